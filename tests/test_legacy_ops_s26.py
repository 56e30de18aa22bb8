"""TF 1.x op types old GraphDefs hold (ops/legacy_nn_ops.py ...), against TF 2.21.

The cases and TF's results are in tests/fixtures/legacy_s26b/ (recorded from TF 2.21 by
building each op with tf.raw_ops in a TF1 graph and running it)."""

from __future__ import annotations

import pytest

from tests import legacy_s26_cases as cases

_NN = cases.load("nn_array_cases.json")


@pytest.mark.parametrize("case", _NN, ids=[c["name"] for c in _NN])
def test_nn_array_ops_match_tf(case):
    half = any(
        not isinstance(a, list) and a["dtype"] in ("float16", "bfloat16")
        for a in case["args"].values()
    )
    cases.run_case(case, rtol=1e-2 if half else 1e-5, atol=1e-2 if half else 1e-5)
