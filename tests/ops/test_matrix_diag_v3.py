"""matrix_diag / matrix_diag_part / matrix_set_diag with k != 0 (MatrixDiagV3 family):
outputs TF 2.21 recorded (tests/fixtures/record_matrix_diag_tf.py), an independent
per-element numpy reference, and finite-difference gradients."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.test_util import compute_gradient_error

CASES = json.loads(
    (pathlib.Path(__file__).parents[1] / "fixtures" / "matrix_diag_tf.json").read_text()
)
FNS = {"part": af.linalg.diag_part, "diag": af.linalg.diag, "set": af.linalg.set_diag}


def _arange(shape):
    return (np.arange(int(np.prod(shape)), dtype=np.float64) + 1).reshape(shape)


def _reference_part(x, k, pad, align):
    """TF's documented formula, one element at a time."""
    k0, k1 = (k, k) if isinstance(k, int) else k
    m, n = x.shape[-2:]
    length = min(m + min(k1, 0), n - max(k0, 0))
    sup, sub = (w == "RIGHT" for w in align.split("_"))
    out = np.full((*x.shape[:-2], k1 - k0 + 1, length), float(pad))
    for d in range(k1, k0 - 1, -1):
        own = min(m + min(d, 0), n - max(d, 0))
        off = length - own if (d >= 0 and sup) or (d <= 0 and sub) else 0
        for p in range(length):
            y, xx = p + max(-d, 0) - off, p + max(d, 0) - off
            if 0 <= y < m and 0 <= xx < n:
                out[..., k1 - d, p] = x[..., y, xx]
    return out[..., 0, :] if k0 == k1 else out


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_matches_tf(case):
    fn, shapes, kw, want = case
    kw = {a: tuple(v) if isinstance(v, list) else v for a, v in kw.items()}
    with ops.Graph().as_default():
        args = [af.constant(_arange(s) * (10 if i else 1)) for i, s in enumerate(shapes)]
        if "error" in want:
            with pytest.raises((ValueError, errors.InvalidArgumentError)):
                with af.Session() as sess:
                    sess.run(FNS[fn](*args, **kw))
            return
        want = want["ok"]
        y = FNS[fn](*args, **kw)
        with af.Session() as sess:
            got = sess.run(y)
        assert y.shape.as_list() == list(np.shape(want))
        np.testing.assert_array_equal(got, want)
        if fn == "part":
            ref = _reference_part(_arange(shapes[0]), kw["k"], kw["padding_value"], kw["align"])
            np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize(
    "k,align", [(1, "RIGHT_LEFT"), ((-1, 1), "LEFT_RIGHT"), ((0, 2), "RIGHT_RIGHT")]
)
def test_gradients_match_finite_differences(k, align):
    rng = np.random.RandomState(0)
    x0 = rng.randn(2, 3, 4)
    with ops.Graph().as_default():
        x = af.constant(x0)
        part = af.linalg.diag_part(x, k=k, align=align)
        assert (
            compute_gradient_error(x, [2, 3, 4], part, part.shape.as_list(), x_init_value=x0)
            < 1e-8
        )
        d0 = rng.randn(*part.shape.as_list())
        d = af.constant(d0)
        full = af.linalg.diag(d, k=k, num_rows=3, num_cols=4, align=align)
        assert compute_gradient_error(d, list(d0.shape), full, [2, 3, 4], x_init_value=d0) < 1e-8
        s = af.linalg.set_diag(x, d, k=k, align=align)
        assert compute_gradient_error(x, [2, 3, 4], s, [2, 3, 4], x_init_value=x0) < 1e-8
        assert compute_gradient_error(d, list(d0.shape), s, [2, 3, 4], x_init_value=d0) < 1e-8


def test_round_trip_and_bad_align():
    x0 = _arange([4, 5])
    with ops.Graph().as_default():
        part = af.linalg.diag_part(af.constant(x0), k=(-3, 4), padding_value=0)
        back = af.linalg.diag(part, k=(-3, 4), num_rows=4, num_cols=5)
        with af.Session() as sess:
            np.testing.assert_array_equal(sess.run(back), x0)
        with pytest.raises(ValueError, match="align"):
            af.linalg.diag_part(af.constant(x0), k=1, align="UP_DOWN")
