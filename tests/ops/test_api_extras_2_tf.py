"""Matrix ops, einsum, space/depth moves and string extras against values and
gradients recorded from TF 2.21 (tests/fixtures/record_api_extras_tf.py over
tests/fixtures/api_extras_cases_2.py), plus finite differences and TF's errors."""

from __future__ import annotations

import json
import pathlib
import re
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.test_util import compute_gradient_error

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "fixtures"))
from api_extras_cases_2 import GEN, GRADS, RECT, SPD, VALUES  # noqa: E402

RECORDED = json.loads(
    (pathlib.Path(__file__).parents[1] / "fixtures" / "api_extras_2_tf.json").read_text()
)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(t, feed=None):
    with af.Session() as s:
        return s.run(t, feed)


def _compare(got, want, key):
    if isinstance(want, dict) and "re" in want:
        np.testing.assert_allclose(np.real(got), want["re"], rtol=2e-5, atol=2e-5, err_msg=key)
        np.testing.assert_allclose(np.imag(got), want["im"], rtol=2e-5, atol=2e-5, err_msg=key)
    elif isinstance(want, dict) and "bytes" in want:
        got = np.asarray(got, dtype=object)
        assert list(got.shape) == want["shape"], key
        assert [bytes(b).decode("latin-1") for b in got.reshape(-1)] == want["bytes"], key
    elif isinstance(got, list | tuple):
        assert len(got) == len(want), key
        for g, w in zip(got, want):
            _compare(g, w, key)
    else:
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                   rtol=2e-5, atol=2e-5, err_msg=key)  # fmt: skip


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
    grads = af.gradients(af.reduce_sum(y * w), xs)
    for g, want in zip(grads, RECORDED["grads"][key]):
        if want is None:
            assert g is None, key
        else:
            np.testing.assert_allclose(_run(g), want, rtol=2e-4, atol=2e-4, err_msg=key)


_FD = {
    "inverse": (lambda x: af.matrix_inverse(x), [GEN]),
    "det_batch": (lambda x: af.matrix_determinant(x), [[GEN, SPD]]),
    "cholesky": (lambda x: af.cholesky((x + af.matrix_transpose(x)) * 0.5), [SPD]),
    "solve": (lambda a, b: af.matrix_solve(a, b), [GEN, [[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]]]),
    "triangular": (lambda a, b: af.matrix_triangular_solve(a, b, lower=False),
                   [GEN, [[1.0], [2.0], [3.0]]]),
    "sqrtm": (lambda x: af.matrix_square_root(x), [SPD]),
    "eigh": (lambda x: af.self_adjoint_eig((x + af.matrix_transpose(x)) * 0.5)[0], [SPD]),
    "qr": (lambda x: af.qr(x)[1], [RECT]),
    "svd_s": (lambda x: af.svd(x, compute_uv=False), [RECT]),
    "einsum_batch": (lambda a, b: af.einsum("bij,bjk->bik", a, b),
                     [np.ones((2, 2, 3)) * 0.5, np.arange(12.0).reshape(2, 3, 2)]),
    "einsum_inner_sum": (lambda a: af.einsum("ijk->ik", a), [np.arange(8.0).reshape(2, 2, 2)]),
    "batch_to_space": (lambda x: af.batch_to_space_nd(x, [2, 1], [[1, 0], [0, 0]]),
                       [np.arange(12.0).reshape(2, 2, 3, 1)]),
    "depth_to_space": (lambda x: af.depth_to_space(x, 2), [np.arange(16.0).reshape(1, 1, 4, 4)]),
    "band_diag": (lambda x: af.matrix_diag(af.matrix_diag_part(af.matrix_band_part(x, 0, 1))),
                  [GEN]),
    "cholesky_solve_ls": (lambda a, b: af.matrix_solve_ls(a, b, l2_regularizer=0.1),
                          [RECT, [[1.0], [0.0], [2.0]]]),
}  # fmt: skip


@pytest.mark.parametrize("key", sorted(_FD))
def test_gradients_match_finite_differences(key):
    fn, inputs = _FD[key]
    xs = [af.constant(np.asarray(v, np.float64)) for v in inputs]
    y = fn(*xs)
    shape = list(_run(y).shape)
    err = compute_gradient_error(
        xs, [list(np.shape(v)) for v in inputs], y, shape,
        x_init_value=[np.asarray(v, np.float64) for v in inputs], delta=1e-6,
    )  # fmt: skip
    assert err < 1e-5, (key, err)


def test_errors_match_tf():
    with pytest.raises(errors.InvalidArgumentError, match="not invertible"):
        _run(af.matrix_inverse([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(errors.InvalidArgumentError, match="Cholesky"):
        _run(af.cholesky([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError):
        af.matrix_determinant(af.ones([2, 3]))
    with pytest.raises(ValueError, match="Dimension must be 3 but is 2"):  # TF: at build
        af.cross([1.0, 2.0], [3.0, 4.0])
    with pytest.raises(ValueError, match="divisible"):
        af.space_to_batch_nd(af.ones([1, 3, 3, 1]), [2, 2], [[0, 0], [0, 0]])
    with pytest.raises(ValueError, match="at least 2"):
        af.space_to_depth(af.ones([1, 2, 2, 1]), 1)
    with pytest.raises(errors.InvalidArgumentError, match="base64"):
        _run(af.decode_base64(["a!!b"]))
    with pytest.raises(NotImplementedError, match="full_matrices"):  # TF's limit
        x = af.ones([2, 5])
        af.gradients(af.svd(x, full_matrices=True)[1], [x])
    with pytest.raises(ValueError, match="Input count"):
        af.einsum("ij,jk->ik", af.ones([2, 2]))


# DecodeBase64 on TF 2.21 (recorded with tensorflow-cpu 2.21.0): the value, or the
# error's message.  Python's own decoder skips characters outside its alphabet ("!!!"
# gave b'') and takes '+' and '/'; TF's takes the web-safe alphabet only.
_BAD_CHAR = "Invalid character found in base64."
_ONE_MOD_4 = "Base64 string length cannot be 1 modulo 4."
_DECODE_BASE64_TF = [
    ("", b""),
    ("aGVsbG8", b"hello"),
    ("aGVsbG8=", b"hello"),
    ("aGVsbA", b"hell"),
    ("ab", b"i"),
    ("abc", b"i\xb7"),
    ("ab==", b"i"),
    ("abc=", b"i\xb7"),
    ("ab_-", b"i\xbf\xfe"),
    ("!!!", _BAD_CHAR),
    ("a+b/", _BAD_CHAR),
    ("aGVsbG8==", _BAD_CHAR),
    ("ab=c", _BAD_CHAR),
    ("a=", _BAD_CHAR),
    ("ab=", _BAD_CHAR),
    ("====", _BAD_CHAR),
    ("a===", _BAD_CHAR),
    ("ab\n", _BAD_CHAR),
    (" ab", _BAD_CHAR),
    ("aGVs bG8", _BAD_CHAR),
    ("AA==AA==", _BAD_CHAR),
    ("a", _ONE_MOD_4),
    ("aGVsb", _ONE_MOD_4),
    ("abcd=", _ONE_MOD_4),
    ("=", _ONE_MOD_4),
    ("!", _ONE_MOD_4),
    ("abcd!", _ONE_MOD_4),
    ("abcde", _ONE_MOD_4),
    ("==", _BAD_CHAR),
    ("===", _BAD_CHAR),
    ("abcd==", _BAD_CHAR),
    ("abcd===", _BAD_CHAR),
    ("abcdef=", _BAD_CHAR),
    ("aGVsbG8===", _BAD_CHAR),
    ("a=b=", _BAD_CHAR),
]


@pytest.mark.parametrize("text, want", _DECODE_BASE64_TF)
def test_decode_base64_matches_tf(text, want):
    t = af.decode_base64(text)
    if isinstance(want, bytes):
        assert _run(t) == want
    else:
        with pytest.raises(errors.InvalidArgumentError, match=re.escape(want)):
            _run(t)


def test_conv2d_backprop_v2_match_v1_and_tables_initializer():
    # TF 2.21 registers no CPU kernel for the v2 backprop ops; the builders here give the
    # v1 ops' values with the sizes read from the given tensors
    x = af.constant(np.arange(32.0, dtype=np.float32).reshape(1, 4, 4, 2))
    w = af.constant(np.arange(24.0, dtype=np.float32).reshape(2, 2, 2, 3))
    dy = af.ones([1, 2, 2, 3])
    a = af.conv2d_backprop_filter_v2(x, w, dy, [1, 2, 2, 1], "VALID")
    b = af.nn.conv2d_backprop_filter(x, [2, 2, 2, 3], dy, [1, 2, 2, 1], "VALID")
    c = af.conv2d_backprop_input_v2(x, w, dy, [1, 2, 2, 1], "VALID")
    d = af.nn.conv2d_backprop_input([1, 4, 4, 2], w, dy, [1, 2, 2, 1], "VALID")
    av, bv, cv, dv = _run([a, b, c, d])
    np.testing.assert_array_equal(av, bv)
    np.testing.assert_array_equal(cv, dv)
    assert af.tables_initializer().type == "NoOp"
    assert af.initialize_all_tables is af.tables_initializer
    with pytest.raises(ValueError, match="unknown shape"):
        af.parallel_stack([af.placeholder(af.float32, [None])])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_with_space_to_batch_builds_dilated_convolution(padding):
    x = np.random.default_rng(0).standard_normal((2, 9, 8, 3)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((3, 2, 3, 4)).astype(np.float32)

    def conv(inp, num_spatial_dims, pad):
        assert num_spatial_dims == 2
        return af.nn.conv2d(inp, w, [1, 1, 1, 1], pad)

    y = af.nn.with_space_to_batch(x, [2, 3], padding, conv, filter_shape=[3, 2])
    ref = af.nn.conv2d(x, w, [1, 1, 1, 1], padding, dilations=[1, 2, 3, 1])
    a, b = _run([y, ref])
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    assert af.nn.space_to_batch is af.space_to_batch
    with pytest.raises(ValueError, match="filter_shape"):
        af.nn.with_space_to_batch(x, [2, 2], "SAME", conv)


def test_nd_transforms_match_numpy():
    # TF 2.21 registers FFTND & co. for GPU only: NumPy's transforms are the reference
    x = np.arange(12.0).reshape(3, 4)
    z = x + 1j * np.cos(x)
    cz = af.constant(z.astype(np.complex64))
    cases = [
        (af.fftnd(cz, [3, 4], [0, 1]), np.fft.fftn(z, s=[3, 4], axes=[0, 1])),
        (af.fftnd(cz, [6], [1]), np.fft.fftn(z, s=[6], axes=[1])),
        (af.ifftnd(cz, [2, 4], [0, 1]), np.fft.ifftn(z, s=[2, 4], axes=[0, 1])),
        (af.rfftnd(x.astype(np.float32), [3, 4], [0, 1]), np.fft.rfftn(x, s=[3, 4], axes=[0, 1])),
        (af.irfftnd(cz, [3, 6], [0, 1]), np.fft.irfftn(z, s=[3, 6], axes=[0, 1])),
    ]
    for got, want in zip(_run([c[0] for c in cases]), [c[1] for c in cases]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    err = compute_gradient_error(
        [af.constant(x)], [[3, 4]],
        af.abs(af.fftnd(af.complex(af.constant(x), af.zeros([3, 4], af.float64)), [3, 4], [0, 1])),
        [3, 4], x_init_value=[x],
    )  # fmt: skip
    assert err < 1e-5
