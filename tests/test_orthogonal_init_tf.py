"""orthogonal_initializer and ConvolutionDeltaOrthogonal build TF's graph (a seeded
random_normal, QR, Q signed by R's diagonal): the values of TF 2.21 to float32
rounding (TF's QR is Eigen's, ours LAPACK's), run after run (each run draws anew, as
TF's) - fixtures/orthogonal_tf.json, recorded by fixtures/record_orthogonal_tf.py from
fixtures/orthogonal_cases.py."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

import asyncflow as af
from asyncflow import graph as ops
from asyncflow.ops.init_ops import ConvolutionDeltaOrthogonal
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import orthogonal_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "orthogonal_tf.json").read_text())


def test_values_as_tf_run_after_run():
    with ops.Graph().as_default():
        out = cases.build(af, ConvolutionDeltaOrthogonal)
        with Session() as sess:
            runs = [sess.run(out) for _ in range(2)]
    for i, r in enumerate(runs):
        for key, value in r.items():
            want = np.array(TF[f"{key}/{i}"])
            assert value.shape == want.shape, key
            np.testing.assert_allclose(value, want, atol=1e-6, err_msg=f"{key} run {i}")
    assert not np.array_equal(runs[0]["tall"], runs[1]["tall"])


def test_orthogonal_columns():
    with ops.Graph().as_default(), Session() as sess:
        q = sess.run(af.orthogonal_initializer(gain=3.0, seed=5)([40, 12]))
    np.testing.assert_allclose(q.T @ q, 9.0 * np.eye(12), atol=1e-4)
