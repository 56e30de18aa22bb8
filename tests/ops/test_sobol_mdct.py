"""tf.math.sobol_sample bit-equal to TF 2.21's (values or SHA-256 of their bytes) with TF's
errors; tf.signal.mdct / inverse_mdct / kaiser_bessel_derived_window against TF's
recorded outputs (tests/fixtures/record_sobol_mdct_tf.py), perfect reconstruction and
gradients through the ops."""

import hashlib
import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors

pytestmark = pytest.mark.timeout(120)

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import sobol_mdct_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "sobol_mdct_tf.json").read_text())


@pytest.mark.parametrize("name", sorted(cases.SOBOL))
def test_sobol_bit_equal_to_tf(sess, name):
    d, n, skip, dt = cases.SOBOL[name]
    t = af.math.sobol_sample(d, n, skip=skip, dtype=getattr(af, dt))
    assert t.shape.as_list() == [n, d]
    v = sess.run(t)
    want = TF["sobol"][name]
    assert list(v.shape) == want["shape"] and str(v.dtype) == want["dtype"]
    assert hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest() == want["sha256"]
    if "value" in want:
        assert v.astype(np.float64).reshape(-1).tolist() == want["value"]


@pytest.mark.parametrize("name", sorted(cases.SOBOL_ERRORS))
def test_sobol_errors(sess, name):
    want = TF["sobol_errors"][name]
    with pytest.raises(getattr(errors, want["error"])) as e:
        sess.run(af.math.sobol_sample(*cases.SOBOL_ERRORS[name]))
    assert want["message"] in e.value.message


def test_sobol_fed_arguments(sess):
    dim = af.placeholder(af.int32, [])
    t = af.math.sobol_sample(dim, 4, dtype=af.float64)
    assert t.shape.as_list() == [4, None]
    v = sess.run(t, {dim: 3})
    np.testing.assert_array_equal(v[0], [0.5, 0.5, 0.5])


@pytest.mark.parametrize("name", sorted(cases.MDCT))
def test_mdct_matches_tf(sess, name):
    n, fl, dt, win, pad, norm = cases.MDCT[name]
    x = cases.signal(n, dt)
    m = af.signal.mdct(x, fl, window_fn=cases.window_fn(af, win), pad_end=pad, norm=norm)
    r = af.signal.inverse_mdct(m, window_fn=cases.window_fn(af, win), norm=norm)
    mv, rv = sess.run([m, r])
    want = TF["mdct"][name]
    tol = 1e-5 if dt == "float32" else 1e-12
    np.testing.assert_allclose(mv, want["mdct"], rtol=tol, atol=tol * 10)
    np.testing.assert_allclose(rv, want["inverse"], rtol=tol, atol=tol * 10)
    assert mv.dtype == np.dtype(dt) and rv.dtype == np.dtype(dt)


def test_mdct_reconstructs(sess):
    """With the Vorbis window the inverse of the mdct of a half-frame-padded signal is
    the signal (TF's documented round trip)."""
    x = cases.signal(400, np.float64)[0]
    half = 50
    padded = np.pad(x, [half, 0])
    m = af.signal.mdct(padded, 2 * half, pad_end=True)
    r = sess.run(af.signal.inverse_mdct(m))[half : half + 400]
    np.testing.assert_allclose(r, x, atol=1e-10)


def test_mdct_frame_length_multiple_of_4():
    with pytest.raises(ValueError, match="multiple of 4"):
        af.signal.mdct(np.zeros(32, np.float32), 10)


def test_mdct_gradient(sess):
    x = af.constant(cases.signal(32, np.float64)[0])
    y = af.reduce_sum(af.square(af.signal.mdct(x, 8)))
    (g,) = af.gradients(y, [x])
    xv = cases.signal(32, np.float64)[0]
    eps = 1e-6

    def f(v):
        return sess.run(y, {x: v})

    num = np.array([(f(xv + eps * e) - f(xv - eps * e)) / (2 * eps) for e in np.eye(32)])
    np.testing.assert_allclose(sess.run(af.convert_to_tensor(g)), num, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", sorted(cases.KBD))
def test_kbd_window_matches_tf(sess, name):
    n, beta = cases.KBD[name]
    dt = af.float64 if name.endswith("f64") else af.float32
    w = sess.run(af.signal.kaiser_bessel_derived_window(n, beta, dtype=dt))
    tol = 1e-6 if dt == af.float32 else 1e-13
    np.testing.assert_allclose(w, TF["kbd"][name], rtol=tol, atol=tol)
    assert w.dtype == dt.as_numpy_dtype
