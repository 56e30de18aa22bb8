"""tf.nn.safe_embedding_lookup_sparse and collapse_repeated against values (and a
gradient) recorded from TF 2.21 (tests/fixtures/nn_cases.py)."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
from nn_cases import GRADS, VALUES, ids  # noqa: E402

RECORDED = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "nn_extras_tf.json").read_text()
)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(t):
    with af.Session() as s:
        return s.run(t)


@pytest.mark.parametrize("key", sorted(VALUES))
def test_values_match_tf(key):
    got, want = _run(VALUES[key](af)), RECORDED["values"][key]
    if isinstance(got, tuple):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, err_msg=key)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("key", sorted(GRADS))
def test_gradients_match_tf(key):
    build, inputs = GRADS[key]
    x = af.cast(af.constant(np.asarray(inputs[0], np.float64)), af.float32)
    y = build(af, x, None)
    shape = _run(y).shape
    w = af.constant(np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape), af.float32)
    (g,) = af.gradients(af.reduce_sum(y * w), [x])
    np.testing.assert_allclose(_run(af.convert_to_tensor(g)), RECORDED["grads"][key][0],
                               rtol=1e-5, atol=1e-6)  # fmt: skip


def test_errors():
    with pytest.raises(ValueError, match="combiner"):
        af.nn.safe_embedding_lookup_sparse(af.ones([3, 2]), ids(af), combiner="max")
    with pytest.raises(ValueError, match="Missing"):
        af.nn.safe_embedding_lookup_sparse([], ids(af))
    with pytest.raises(ValueError):
        af.nn.collapse_repeated([1, 2], [2])
