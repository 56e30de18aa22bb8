"""RFFT/IRFFT (1-D, 2-D, 3-D) ops (ops/fft_real_ops.py) and tf.signal.rfft & co.
writing them, with gradients.  Values recorded from TF 2.21 (rounded to 6 places)."""

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors

R = tf.raw_ops
X1 = np.array([1.0, 2.0, -1.0, 0.5, 3.0])
X2 = np.arange(12.0).reshape(3, 4) ** 1.5 / 7
X3 = np.sin(np.arange(24.0)).reshape(2, 3, 4)
_X = {1: X1, 2: X2, 3: X3}


def _run(t):
    with tf.Session() as sess:
        return sess.run(t)


def _op(kind, rank):
    return getattr(R, kind + ("" if rank == 1 else f"{rank}D"))


# (rank, fft_length, TF 2.21's value): RFFT of X, cropped to fft_length
_RFFT = [
    (1, [4], [2.5, 2 - 1.5j, -2.5]),
    (1, [5], [5.5, 2.949593 + 1.832734j, -3.199593 - 0.8388j]),
    (2, [2, 3], [[5.386529, -0.978979 + 0.661275j], [-4.292693, 0.432061 - 0.208857j]]),
    (3, [1, 2, 3], [[[-0.244374, -1.013017 + 0.647211j], [3.745911, -0.737752 - 0.529732j]]]),
]
# (rank, fft_length, TF 2.21's value): IRFFT of complex(X, cos(X))
_IRFFT = [
    (1, [8], [0.875, -0.201482, 1.073432, -0.461661, -0.375, -0.56867, 0.426568, 0.231812]),
    (
        1,
        [9],
        [
            1.111111,
            -0.421477,
            0.929735,
            0.152371,
            -0.693292,
            -0.139812,
            -0.596815,
            0.774764,
            -0.116584,
        ],
    ),
    (
        2,
        [3, 6],
        [
            [2.122886, -0.355191, 0.021049, -0.076478, 0.018605, -0.272423],
            [-0.951123, 0.024975, 4e-06, -0.013332, 0.047869, -0.2449],
            [-0.865739, -0.3882, -0.008794, 0.05316, -0.013604, 0.901234],
        ],
    ),
    (3, [1, 2, 3], [[[-0.165285, -0.464737, 0.251621], [0.726266, -0.20048, -0.147384]]]),
]


@pytest.mark.parametrize("rank, lengths, want", _RFFT)
def test_rfft(rank, lengths, want):
    with tf.Graph().as_default():
        y = _op("RFFT", rank)(input=_X[rank], fft_length=lengths, Tcomplex=tf.complex128)
        assert y.dtype == tf.complex128 and y.shape.as_list() == list(np.shape(want))
        np.testing.assert_allclose(_run(y), want, atol=1e-6)


@pytest.mark.parametrize("rank, lengths, want", _IRFFT)
def test_irfft(rank, lengths, want):
    with tf.Graph().as_default():
        x = tf.constant(_X[rank])
        y = _op("IRFFT", rank)(
            input=tf.complex(x, tf.cos(x)), fft_length=lengths, Treal=tf.float64
        )
        assert y.dtype == tf.float64 and y.shape.as_list() == list(np.shape(want))
        np.testing.assert_allclose(_run(y), want, atol=1e-6)


def test_rfft_gradients():
    with tf.Graph().as_default():
        grads = []
        for rank in (1, 2):
            x = tf.constant(_X[rank])
            y = _op("RFFT", rank)(input=x, fft_length=list(_X[rank].shape), Tcomplex=tf.complex128)
            shape = y.shape.as_list()
            w = tf.constant(np.cos(np.arange(int(np.prod(shape))) * 1.3).reshape(shape))
            loss = tf.reduce_sum(tf.real(y) * w + tf.imag(y) * w * 0.5)
            grads.append(tf.gradients(loss, x)[0])
        g1, g2 = _run(grads)
    np.testing.assert_allclose(g1, [0.41061, 1.900529, 0.032705, 1.004886, 1.651269], atol=1e-6)
    np.testing.assert_allclose(
        g2,
        [
            [-0.324968, 0.875162, 0.098444, 0.663455],
            [-0.162937, 1.924119, 0.049359, 4.884217],
            [1.719735, 2.370137, -0.520966, 0.424242],
        ],
        atol=1e-6,
    )


def test_irfft_gradients():
    with tf.Graph().as_default():
        grads = []
        for rank, lengths in ((1, [8]), (2, [3, 6])):
            x = tf.constant(_X[rank])
            c = tf.complex(x, tf.cos(x))
            z = _op("IRFFT", rank)(input=c, fft_length=lengths, Treal=tf.float64)
            shape = z.shape.as_list()
            w = tf.constant(np.cos(np.arange(int(np.prod(shape))) * 0.7).reshape(shape))
            grads.append(tf.gradients(tf.reduce_sum(z * w), c)[0])
        g1, g2 = _run(grads)
    np.testing.assert_allclose(
        g1,
        [-0.094058, 0.908522 - 0.343591j, 0.094518 - 0.03668j, 0.06259 - 0.013477j, 0.028429],
        atol=1e-6,
    )
    np.testing.assert_allclose(
        g2,
        [
            [0.002574, -0.004512 - 0.000103j, -0.00092 - 2.2e-05j, -0.000325],
            [
                -0.03868 - 0.205096j,
                0.059615 - 0.182409j,
                0.110655 - 0.097068j,
                0.075513 - 0.014866j,
            ],
            [
                -0.03868 + 0.205096j,
                0.546619 - 0.629672j,
                0.212628 - 0.072972j,
                0.075513 + 0.014866j,
            ],
        ],
        atol=1e-6,
    )


def test_errors():
    with tf.Graph().as_default():
        with pytest.raises(errors.InvalidArgumentError) as e:
            _run(R.RFFT(input=X1, fft_length=[7], Tcomplex=tf.complex128))
        assert "Input dimension 0 must have length of at least 7 but got: 5" in str(e.value)
        x = tf.constant(X2)
        with pytest.raises(errors.InvalidArgumentError) as e:
            _run(R.IRFFT2D(input=tf.complex(x, x), fft_length=[5, 6], Treal=tf.float64))
        assert "Input dimension 0 must have length of at least 5 but got: 3" in str(e.value)
        with pytest.raises(ValueError, match="Dimension must be 1 but is 2"):
            R.RFFT(input=tf.constant([1.0, 2.0]), fft_length=[1, 2])
        with pytest.raises(ValueError, match="Shape must be at least rank 2 but is rank 1"):
            R.RFFT2D(input=tf.constant([1.0, 2.0]), fft_length=[1, 2])
        y = R.RFFT3D(input=X3, fft_length=[2, 3, 4], Tcomplex=tf.complex128)
        with pytest.raises(LookupError, match="op type: RFFT3D"):
            tf.gradients(tf.abs(y), y.op.inputs[0])


def test_signal_writes_tf_ops():
    with tf.Graph().as_default():
        x = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0])
        x2 = tf.constant(np.arange(12.0).reshape(3, 4))
        y = tf.signal.rfft(x)
        assert (y.name, y.op.type, y.dtype) == ("rfft:0", "RFFT", tf.complex64)
        assert [i.name for i in y.op.inputs] == ["Const:0", "rfft/fft_length:0"]
        padded = tf.signal.rfft(x, [8])
        assert padded.op.inputs[0].op.type == "Pad"
        z = tf.signal.irfft2d(tf.cast(x2, tf.complex128))
        assert (z.name, z.op.type, z.dtype, z.shape.as_list()) == (
            "irfft2d:0",
            "IRFFT2D",
            tf.float64,
            [3, 6],
        )
        cropped = tf.signal.irfft(tf.cast(x, tf.complex64), [4])
        g = tf.gradients(tf.reduce_sum(tf.abs(padded)), x)[0]
        g2 = tf.gradients(tf.reduce_sum(tf.abs(z)), x2)[0]
        yv, pv, zv, cv, gv, g2v = _run([y, padded, z, cropped, g, g2])
    np.testing.assert_allclose(yv, [15, -2.5 + 3.44096j, -2.5 + 0.8123j], atol=2e-5)
    np.testing.assert_allclose(
        pv, [15, -5.41421 - 7.24264j, 3 + 2j, -2.58579 - 1.24264j, 3], atol=2e-5
    )
    np.testing.assert_allclose(
        zv,
        [
            [5.5, -0.66667, 0.0, -0.16667, 0.0, -0.66667],
            [-2.0, 0.66667, 0.0, 0.0, 0.0, -0.66667],
            [-2.0, -0.66667, 0.0, 0.0, 0.0, 0.66667],
        ],
        atol=1e-5,
    )
    np.testing.assert_allclose(cv, [2.0, -0.5, 0.0, -0.5], atol=1e-6)
    np.testing.assert_allclose(gv, [1.33198, 0.53189, 1.53575, 1.21337, 4.33212], atol=1e-5)
    np.testing.assert_allclose(
        g2v,
        [
            [-0.22222, -0.11111, -0.11111, 0.11111],
            [-0.05556, -0.11111, -0.11111, 0.27778],
            [-0.05556, 0.55556, 0.55556, 0.27778],
        ],
        atol=1e-5,
    )
