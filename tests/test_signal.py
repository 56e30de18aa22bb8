"""tf.signal (asyncflow/signal.py) against values and gradients recorded from TF 2.21
(tests/fixtures/record_api_extras_tf.py over tests/fixtures/signal_cases.py), plus
round trips, finite differences and errors."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow.test_util import compute_gradient_error

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
from signal_cases import GRADS, SIG, VALUES  # noqa: E402

RECORDED = json.loads((pathlib.Path(__file__).parent / "fixtures" / "signal_tf.json").read_text())


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(t):
    with af.Session() as s:
        return s.run(t)


def _compare(got, want, key):
    if isinstance(want, dict) and "re" in want:
        np.testing.assert_allclose(np.real(got), want["re"], rtol=1e-4, atol=2e-5, err_msg=key)
        np.testing.assert_allclose(np.imag(got), want["im"], rtol=1e-4, atol=2e-5, err_msg=key)
    else:
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                   rtol=1e-4, atol=2e-5, err_msg=key)  # fmt: skip


@pytest.mark.parametrize("key", sorted(VALUES))
def test_values_match_tf(key):
    _compare(_run(VALUES[key](af)), RECORDED["values"][key], key)


@pytest.mark.parametrize("key", sorted(GRADS))
def test_gradients_match_tf(key):
    build, inputs = GRADS[key]
    xs = [af.cast(af.constant(np.asarray(v, np.float64)), af.float32) for v in inputs]
    y = build(af, xs[0], xs[1] if len(xs) > 1 else None)
    shape = _run(y).shape
    w = af.constant(np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape), af.float32)
    for g, want in zip(af.gradients(af.reduce_sum(y * w), xs), RECORDED["grads"][key]):
        dense = af.convert_to_tensor(g)  # frame's gather gives IndexedSlices
        np.testing.assert_allclose(_run(dense), want, rtol=2e-4, atol=2e-4, err_msg=key)


def test_stft_round_trip_and_finite_differences():
    x = np.asarray(SIG, np.float64)
    spec = af.signal.stft(x, 8, 2)
    back = af.signal.inverse_stft(spec, 8, 2, window_fn=af.signal.inverse_stft_window_fn(2))
    got = _run(back)
    np.testing.assert_allclose(got[6:-6], x[6 : len(got) - 6], atol=1e-9)  # full overlap
    xt = af.constant(x)
    s = af.signal.stft(xt, 8, 4)
    y = af.square(af.real(s)) + af.square(af.imag(s))  # |s|^2: smooth where |s| is ~0
    err = compute_gradient_error(xt, [20], y, list(_run(y).shape), x_init_value=x)
    assert err < 1e-6
    z = af.signal.irfft(af.signal.rfft(xt, [24]), [24])
    err = compute_gradient_error(xt, [20], z, [24], x_init_value=x)
    assert err < 1e-6


def test_errors():
    with pytest.raises(ValueError, match="Types I, II, III and IV"):
        af.signal.dct([1.0, 2.0], type=5)
    with pytest.raises(ValueError, match="Type-I DCT"):
        af.signal.dct([1.0, 2.0], type=1, norm="ortho")
    with pytest.raises(ValueError, match="greater than one"):
        af.signal.dct([1.0], type=1)
    with pytest.raises(ValueError, match="positive integer"):
        af.signal.idct([1.0, 2.0], n=0)
    with pytest.raises(NotImplementedError, match="axis"):
        af.signal.dct([[1.0, 2.0]], axis=0)
    with pytest.raises(ValueError, match="normalization"):
        af.signal.dct([1.0, 2.0], norm="x")
    with pytest.raises(ValueError, match="floating"):
        af.signal.hann_window(4, dtype=af.int32)
    with pytest.raises(ValueError):
        af.signal.linear_to_mel_weight_matrix(8, 17, 8000, 100.0, 5000.0)
    assert af.signal.fft is af.fft and af.signal.frame.__module__ == "asyncflow.signal"


DCT = json.loads((pathlib.Path(__file__).parent / "fixtures" / "dct_tf.json").read_text())


def _dct_matrix(t: int, size: int) -> np.ndarray:
    """Unnormalised DCT-`t` as a matrix, from the textbook sums (numpy's reference)."""
    k, m = np.arange(size)[:, None], np.arange(size)[None, :]
    if t == 1:
        w = 2 * np.cos(np.pi * k * m / (size - 1))
        w[:, 0] /= 2
        w[:, -1] = (-1.0) ** np.arange(size)
        return w
    if t == 2:
        return 2 * np.cos(np.pi * (2 * m + 1) * k / (2 * size))
    if t == 3:
        w = 2 * np.cos(np.pi * m * (2 * k + 1) / (2 * size))
        w[:, 0] = 1
        return w
    return 2 * np.cos(np.pi * (2 * m + 1) * (2 * k + 1) / (4 * size))


@pytest.mark.parametrize("case", DCT["cases"], ids=lambda c: str(c[0]))
def test_dct_types_match_tf_and_the_sums(case):
    (fn, t, norm, n), want = case
    x = np.array(DCT["x"])
    got = _run(getattr(af.signal, fn)(af.constant(x), type=t, norm=norm, n=n))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    if n is not None:
        x = x[:, :n] if n <= x.shape[1] else np.pad(x, [(0, 0), (0, n - x.shape[1])])
    if fn == "dct" and norm is None:
        np.testing.assert_allclose(got, x @ _dct_matrix(t, x.shape[1]).T, atol=1e-9)


@pytest.mark.parametrize("t", [1, 2, 3, 4])
def test_idct_inverts_dct(t):
    x = np.random.RandomState(t).randn(3, 7)
    norm = None if t == 1 else "ortho"
    y = af.signal.idct(af.signal.dct(af.constant(x), type=t, norm=norm), type=t, norm=norm)
    scale = 2 * (7 - 1) if t == 1 else 1
    np.testing.assert_allclose(_run(y) / scale, x, atol=1e-9)


@pytest.mark.parametrize(
    "t,norm,n", [(1, None, None), (4, "ortho", None), (4, None, 9), (3, None, 5)]
)
def test_dct_gradients_match_finite_differences(t, norm, n):
    x = np.random.RandomState(3).randn(2, 6)
    xt = af.constant(x)
    y = af.signal.dct(xt, type=t, norm=norm, n=n)
    err = compute_gradient_error(xt, [2, 6], y, y.shape.as_list(), x_init_value=x)
    assert err < 1e-6
