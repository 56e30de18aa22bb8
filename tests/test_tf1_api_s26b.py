"""TF 2.21 compat.v1 names and arguments added in s26-small: the tf.signal N-d FFT
wrappers, CsvDataset(exclude_cols=), the Optimizer's own-namescope non-slot variables,
and the experimental random/linalg/saved_model helpers.

Graph structure, dtypes and errors were recorded from TF 2.21 (tf.compat.v1, graph mode);
numbers TF cannot produce on a CPU (FFTND has GPU kernels only) are checked against NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph as ops


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(*fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(list(fetches), feed)


# -- tf.signal.fftnd family ------------------------------------------------------------------

_X = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) ** 1.3 % 5).astype(np.float32)
_XC = (_X + 1j * _X[::-1]).astype(np.complex64)
_NP_NORM = {None: "backward", "backward": "backward", "forward": "forward", "ortho": "ortho"}


@pytest.mark.parametrize("norm", [None, "backward", "forward", "ortho"])
def test_fftnd_norms_match_numpy(norm):
    n = _NP_NORM[norm]
    got = _run(
        tf.signal.fftnd(_XC, norm=norm),
        tf.signal.ifftnd(_XC, norm=norm),
        tf.signal.rfftnd(_X, norm=norm),
        tf.signal.irfftnd(_XC, norm=norm),
    )
    want = [
        np.fft.fftn(_XC, norm=n),
        np.fft.ifftn(_XC, norm=n),
        np.fft.rfftn(_X, norm=n),
        np.fft.irfftn(_XC, norm=n),
    ]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "fn, x, kwargs, ref, shape",
    [
        # static shapes are the transform's (TF 2.21's graph keeps the padded input's)
        ("fftnd", _XC, {"axes": [0, 2]}, lambda: np.fft.fftn(_XC, axes=[0, 2]), [2, 3, 4]),
        ("fftnd", _XC, {"axes": [-1]}, lambda: np.fft.fftn(_XC, axes=[-1]), [2, 3, 4]),
        (
            "fftnd",
            _XC,
            {"fft_length": [2, 6]},
            lambda: np.fft.fftn(_XC, s=[2, 6], axes=[1, 2]),
            [2, 2, 6],
        ),
        (
            "fftnd",
            _XC,
            {"fft_length": [5, 2], "axes": [1, 2]},
            lambda: np.fft.fftn(_XC, s=[5, 2], axes=[1, 2]),
            [2, 5, 2],
        ),
        (
            "rfftnd",
            _X,
            {"fft_length": [5, 3], "axes": [0, 2], "norm": "ortho"},
            lambda: np.fft.rfftn(_X, s=[5, 3], axes=[0, 2], norm="ortho"),
            [5, 3, 2],
        ),
        (
            "irfftnd",
            _XC,
            {"fft_length": [4, 6], "norm": "forward"},
            lambda: np.fft.irfftn(_XC, s=[4, 6], axes=[1, 2], norm="forward"),
            [2, 4, 6],
        ),
        (
            "irfftnd",
            _XC,
            {"fft_length": [7]},
            lambda: np.fft.irfftn(_XC, s=[7], axes=[2]),
            [2, 3, 7],
        ),
    ],
)
def test_fftnd_lengths_and_axes(fn, x, kwargs, ref, shape):
    t = getattr(tf.signal, fn)(x, **kwargs)
    assert t.shape.as_list() == shape
    np.testing.assert_allclose(_run(t)[0], ref(), rtol=1e-4, atol=1e-4)


def test_fftnd_graph_as_tf():
    # Recorded from TF 2.21: a shorter transformed dimension is padded by a Pad op
    # before the raw op (a longer one is cropped by the op); the raw op carries the
    # wrapper's name; rfftnd / irfftnd keep complex64 / float32 whatever the input.
    t = tf.signal.fftnd(_XC, fft_length=[5, 2], axes=[1, 2], name="A")
    assert t.op.type == "FFTND" and t.op.name == "A"
    pad = t.op.inputs[0].op
    assert pad.type == "Pad"
    np.testing.assert_array_equal(_run(pad.inputs[1])[0], [[0, 0], [0, 2], [0, 0]])
    c = tf.signal.irfftnd(_XC, fft_length=[4, 6], name="C")
    assert c.op.type == "IRFFTND" and c.dtype == tf.float32
    np.testing.assert_array_equal(_run(c.op.inputs[0].op.inputs[1])[0], [[0, 0], [0, 1], [0, 0]])
    assert tf.signal.rfftnd(_X.astype(np.float64)).dtype == tf.complex64
    assert tf.signal.irfftnd(_XC.astype(np.complex128)).dtype == tf.float32
    assert tf.signal.fftnd(_XC.astype(np.complex128)).dtype == tf.complex128
    assert tf.signal.fftnd(_X).dtype == tf.complex64  # real input made complex
    assert tf.signal.rfftnd(_X).name == "rfftnd_1:0"
    # tf.fftnd stays the raw op (input, fft_length, axes).
    raw = tf.fftnd(_XC, [3, 4], [1, 2])
    assert raw.op.type == "FFTND"


def test_fftnd_errors():
    with pytest.raises(ValueError, match="norm"):
        tf.signal.fftnd(_XC, norm="bad")
    # fft_length and axes of different lengths fail when run, as TF's kernel does.
    t = tf.signal.fftnd(_XC, fft_length=[2, 3], axes=[1])
    with pytest.raises(tf.errors.InvalidArgumentError, match="same length"):
        _run(t)


def test_fftnd_placeholder_batch():
    ph = tf.placeholder(tf.complex64, [None, 3, 4])
    t = tf.signal.fftnd(ph, axes=[1, 2], norm="ortho")
    assert t.shape.as_list() == [None, 3, 4]
    got = _run(t, feed={ph: _XC})[0]
    np.testing.assert_allclose(got, np.fft.fftn(_XC, axes=[1, 2], norm="ortho"), atol=1e-4)
    with pytest.raises(ValueError, match="known at build time"):
        tf.signal.ifftnd(ph)
