"""Behaviours TF's kernel tests check (conv_ops_3d, init_ops, cwise_ops*), each value
or error as TF 2.21 gives it in `tf.compat.v1` graph mode; values against NumPy
references, or recorded from TF where noted."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors, graph
from asyncflow.ops import conv_pool_nd, init_ops, nn_ops, reduction_ops


def _run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def _ref_conv(x, w, strides, pads):
    """Channels-last N-d cross-correlation by definition (x [N, s..., C], w [k..., C, O])."""
    n = w.ndim - 2
    x = np.pad(x, [(0, 0), *pads, (0, 0)])
    k = w.shape[:n]
    outs = [(x.shape[1 + i] - k[i]) // strides[i] + 1 for i in range(n)]
    y = np.zeros((x.shape[0], *outs, w.shape[-1]))
    for idx in np.ndindex(*outs):
        window = tuple(slice(i * s, i * s + kk) for i, s, kk in zip(idx, strides, k, strict=True))
        patch = x[(slice(None), *window)]
        y[(slice(None), *idx)] = np.tensordot(patch, w, axes=(list(range(1, n + 2)),
                                                              list(range(n + 1))))  # fmt: skip
    return y


# -- Const keeps the caller's array ------------------------------------------------------


def test_constant_copies_a_writable_array_it_is_given():
    # TF copies the value into the graph: the caller may still write the array (TF's
    # cwise tests sparsify an input in place after converting it), and the write does
    # not reach the constant.
    x = np.arange(4.0)
    with tf.Graph().as_default():
        c = tf.convert_to_tensor(x)
        assert x.flags.writeable
        x[0] = 7.0
        np.testing.assert_array_equal(_run(c), [0.0, 1.0, 2.0, 3.0])
        empty = np.empty((2, 0), np.float32)  # no memory to share, still the caller's
        tf.constant(empty)
        assert empty.flags.writeable


# -- the generic Conv op (gen_nn_ops.conv) ------------------------------------------------


def _conv(x, w, **attrs):
    """The raw op Conv (TF's `gen_nn_ops.conv`)."""
    return graph.apply_op("Conv", [tf.constant(x), tf.constant(w)], attrs).outputs[0]


def test_conv_op_matches_the_definition_in_1_2_and_3_d():
    rng = np.random.default_rng(0)
    for n, pad in [(1, "VALID"), (2, "SAME"), (3, "VALID")]:
        x = rng.standard_normal((2, *[5] * n, 3)).astype(np.float32)
        w = rng.standard_normal((*[2] * n, 3, 4)).astype(np.float32)
        strides = [1] + [2] * n + [1]
        with tf.Graph().as_default():
            y = _conv(x, w, strides=strides, padding=pad)
            got = _run(y)
        # SAME for size 5, kernel 2, stride 2: 3 outputs, padding (0, 1).
        pads = [(0, 1)] * n if pad == "SAME" else [(0, 0)] * n
        np.testing.assert_allclose(got, _ref_conv(x, w, [2] * n, pads), rtol=1e-5, atol=1e-5)
        assert list(y.shape) == list(got.shape)


def test_conv_op_batch_dims_channels_first_and_groups():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 4, 4)).astype(np.float32)  # 2 batch dims, NHWC
    w = rng.standard_normal((3, 3, 2, 6)).astype(np.float32)  # 2 groups of 2 channels
    with tf.Graph().as_default():
        y = _conv(x, w, strides=[1, 1, 1, 1], padding="VALID", batch_dims=2)
        xf = np.moveaxis(x.reshape(6, 4, 4, 4), -1, 1)
        yf = _conv(xf, w, strides=[1, 1, 1, 1], padding="VALID", data_format="CHANNELS_FIRST")
        got, got_first = _run([y, yf])
    assert got.shape == (2, 3, 2, 2, 6)
    flat = x.reshape(6, 4, 4, 4)
    ref = np.concatenate(
        [_ref_conv(flat[..., 2 * g : 2 * g + 2], w[..., 3 * g : 3 * g + 3], [1, 1],
                   [(0, 0)] * 2) for g in range(2)], -1)  # fmt: skip
    np.testing.assert_allclose(got.reshape(6, 2, 2, 6), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.moveaxis(got_first, 1, -1), ref, rtol=1e-4, atol=1e-4)


def test_conv_op_explicit_padding_and_errors():
    x = np.arange(1.0, 10.0, dtype=np.float32).reshape(1, 3, 3, 1)
    w = np.ones((2, 2, 1, 1), np.float32)
    with tf.Graph().as_default():
        y = _conv(x, w, strides=[1, 1, 1, 1], padding="EXPLICIT",
                  explicit_paddings=[0, 0, 1, 0, 0, 1, 0, 0])  # fmt: skip
        ref = _ref_conv(x, w, [1, 1], [(1, 0), (0, 1)])
        np.testing.assert_allclose(_run(y), ref)
        with pytest.raises(ValueError, match="rank"):
            _conv(x, np.ones((2, 1, 1), np.float32), strides=[1, 1, 1, 1], padding="VALID")
        z = _conv(x, np.ones((2, 0, 1, 1), np.float32), strides=[1, 1, 1, 1], padding="VALID")
        with pytest.raises(errors.InvalidArgumentError, match="filter must not have zero"):
            _run(z)


def test_conv_op_has_no_gradient_as_in_tf():
    # TF 2.21 registers no gradient for the raw op Conv: tf.gradients raises LookupError.
    with tf.Graph().as_default():
        x = tf.constant(np.ones((1, 3, 3, 1), np.float32))
        y = graph.apply_op("Conv", [x, tf.constant(np.ones((2, 2, 1, 1), np.float32))],
                           {"strides": [1, 1, 1, 1], "padding": "VALID"}).outputs[0]  # fmt: skip
        with pytest.raises(LookupError, match="Conv"):
            tf.gradients(y, x)


def test_conv3d_rejects_an_empty_filter():
    # TF: InvalidArgumentError "filter must not have zero elements ...".
    with tf.Graph().as_default():
        y = tf.nn.conv3d(np.ones((1, 1, 1, 1, 1), np.float32),
                         np.ones((1, 1, 0, 1, 1), np.float32), [1] * 5, "SAME")  # fmt: skip
        with pytest.raises(errors.InvalidArgumentError, match="filter must not have zero"):
            _run(y)


def test_convolution_conv3d_v2_and_convolution_class_fold_leading_batch_dims():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 2, 3, 1, 3)).astype(np.float32)
    w = rng.standard_normal((1, 1, 1, 3, 3)).astype(np.float32)
    ref = _ref_conv(x.reshape(10, 2, 3, 1, 3), w, [1, 1, 1], [(0, 0)] * 3).reshape(
        2, 5, 2, 3, 1, 3)
    with tf.Graph().as_default():
        a = conv_pool_nd.convolution(x, w, "VALID", strides=[1, 1, 1])
        b = nn_ops.conv3d_v2(x, w, [1, 1, 1, 1, 1], "VALID")
        conv = nn_ops.Convolution(x.shape, w.shape, "VALID", strides=[1, 1, 1])
        assert conv.num_batch_dims == 2
        c = conv(x, w)
        assert a.shape.as_list() == [2, 5, 2, 3, 1, 3]
        for got in _run([a, b, c]):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


# -- init_ops -------------------------------------------------------------------------------


def test_delta_orthogonal_is_an_orthogonal_matrix_at_the_centre():
    with tf.Graph().as_default():
        k = _run(init_ops.convolutional_delta_orthogonal(gain=2.0, seed=3)([3, 3, 4, 6]))
    centre = k[1, 1]
    np.testing.assert_allclose(centre @ centre.T, 4.0 * np.eye(4), atol=1e-5)
    k[1, 1] = 0
    assert not k.any()
    with pytest.raises(ValueError, match="In_filters cannot be greater than out_filters"):
        init_ops.convolutional_delta_orthogonal()([3, 3, 6, 5])
    with pytest.raises(ValueError):
        init_ops.convolutional_delta_orthogonal(dtype=tf.string)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_orthogonal_conv_kernels_are_isometries_of_circular_convolution(n):
    init = {1: init_ops.convolutional_orthogonal_1d, 2: init_ops.convolutional_orthogonal_2d,
            3: init_ops.convolutional_orthogonal_3d}[n](gain=1.5, seed=5)  # fmt: skip
    k, cin, cout, size = 3, 2, 4, 5
    with tf.Graph().as_default():
        w = _run(init([k] * n + [cin, cout]))
    # The spatial sum of the kernel is orthogonal rows; a circular convolution with it
    # keeps the norm (times the gain).
    s = w.sum(axis=tuple(range(n)))
    np.testing.assert_allclose(s @ s.T, 2.25 * np.eye(cin), atol=1e-6)
    x = np.random.default_rng(0).standard_normal((size,) * n + (cin,))
    y = np.zeros((size,) * n + (cout,))
    for off in np.ndindex(*(k,) * n):
        y += np.roll(x, [-(o - k // 2) for o in off], axis=tuple(range(n))) @ w[off]
    np.testing.assert_allclose(np.linalg.norm(y), 1.5 * np.linalg.norm(x), rtol=1e-6)
    with pytest.raises(ValueError, match="In_filters cannot be greater than out_filters"):
        init([k] * n + [5, 4])
    if n > 1:
        with pytest.raises(ValueError, match="Kernel sizes must be equal"):
            init([3] + [2] * (n - 1) + [2, 4])


def test_orthogonal_conv_kernels_follow_tf_seed_rules():
    shape = [3, 3, 4, 4]

    def draw(seed, graph_seed=None, twice=False):
        with tf.Graph().as_default():
            if graph_seed is not None:
                tf.set_random_seed(graph_seed)
            init = init_ops.convolutional_orthogonal_2d(seed=seed)
            return _run([init(shape), init(shape)] if twice else init(shape))

    np.testing.assert_array_equal(draw(1), draw(1))
    assert not np.allclose(draw(1), draw(2))
    a, b = draw(None, graph_seed=1, twice=True)
    assert not np.allclose(a, b)


def test_identity_initializer_gives_each_partition_its_slice():
    with tf.Graph().as_default():
        part = tf.variable_axis_size_partitioner(1)
        with tf.variable_scope("s", partitioner=part, initializer=tf.initializers.identity()):
            v = tf.identity(tf.get_variable("v", shape=[4, 3]))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(v), np.eye(4, 3))


def test_constant_initializer_errors_are_tfs():
    # TF: TypeError "Invalid type for initial value=<value> of type: Tensor. ..."; too
    # many values: ValueError "Too many elements provided. Takes at most 6, but got 8."
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match=r"Invalid type for initial value=.*Tensor"):
            tf.constant_initializer(tf.constant([1.0]))
        with pytest.raises(ValueError, match="Takes at most 6, but got 8"):
            tf.get_variable("x", [2, 3], initializer=tf.constant_initializer(list(range(8))))


# -- range / linspace_nd --------------------------------------------------------------------


def test_range_limits_and_dtype_cast():
    with tf.Graph().as_default():
        with pytest.raises(errors.ResourceExhaustedError):
            _run(tf.range(0, 2**63 - 1))
        with pytest.raises((ValueError, errors.InvalidArgumentError), match="<= 9223372036"):
            _run(tf.range(start=-1e38, limit=1))
        r = tf.range(tf.constant(4, dtype=tf.int32), dtype=tf.int64)
        assert r.dtype == tf.int64
        np.testing.assert_array_equal(_run(r), [0, 1, 2, 3])


def test_linspace_nd_along_an_axis_with_exact_endpoints():
    a = np.arange(2, dtype=np.float32)
    with tf.Graph().as_default():
        got = _run([
            reduction_ops.linspace_nd(a, a * 5, 5, axis=0),
            reduction_ops.linspace_nd(a, a * 5, 5, axis=-1),
            reduction_ops.linspace_nd(0.1, 0.2, 4),
            reduction_ops.linspace_nd(5.0, 5.0, 1),
        ])  # fmt: skip
    np.testing.assert_allclose(got[0], np.linspace(a, a * 5, 5, axis=0))
    np.testing.assert_allclose(got[1], np.linspace(a, a * 5, 5, axis=-1))
    assert got[2][0] == np.float32(0.1) and got[2][-1] == np.float32(0.2)
    np.testing.assert_array_equal(got[3], [5.0])


# -- unary ops on SparseTensor ----------------------------------------------------------------


def test_unary_ops_apply_to_sparse_values():
    with tf.Graph().as_default():
        sp = tf.SparseTensor([[0, 0], [1, 1]], [4.0, -0.5], [2, 2])
        fns = [tf.abs, tf.negative, tf.sign, tf.square, tf.sqrt, tf.tanh, tf.math.erf]
        outs = [f(sp) for f in fns]
        assert all(isinstance(o, tf.SparseTensor) for o in outs)
        got = _run([o.values for o in outs])
    v = np.array([4.0, -0.5])
    from scipy import special

    refs = [np.abs(v), -v, np.sign(v), v * v, np.sqrt(v), np.tanh(v), special.erf(v)]
    for g, r in zip(got, refs, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-6)


# -- Pow gradient in half precision -------------------------------------------------------------


def test_pow_gradient_keeps_zero_upstream_zero_in_half_precision():
    # TF multiplies (grad * z) * log(x): with grad 0 the result is 0 even where z * log(x)
    # overflows float16 (6**6 * log 6 > 65504); 0 * inf would be NaN.
    with tf.Graph().as_default():
        x = tf.constant([6.0, 2.0], tf.float16)
        y = tf.constant([6.0, 2.0], tf.float16)
        gx, gy = tf.gradients(tf.pow(x, y), [x, y], grad_ys=tf.constant([0.0, 1.0], tf.float16))
        gx, gy = _run([gx, gy])
    np.testing.assert_array_equal(gx, np.array([0.0, 4.0], np.float16))
    assert gy[0] == 0.0
    np.testing.assert_allclose(gy[1], 4 * np.log(2.0), rtol=1e-3)


# -- cwise: complex gradients, second derivatives, Bessel, dtypes -----------------------------


@pytest.mark.parametrize("name", ["sinh", "cosh", "asinh", "acosh", "atanh", "asin", "atan"])
def test_complex_gradients_are_conjugated_as_tfs(name):
    # TF's gradient of a real loss w.r.t. complex x is grad * conj(f'(x)): checked
    # against the finite-difference Jacobian (TF's own check in cwise_ops_unary_test).
    x = ((1 + 1j) * np.arange(-3, 3).reshape(1, 3, 2) + (0.5 + 0.5j)).astype(np.complex128)
    with tf.Graph().as_default(), tf.Session():
        t = tf.constant(x)
        y = getattr(tf.math, name)(t)
        jt, jn = tf.test.compute_gradient(t, [1, 3, 2], y, [1, 3, 2], x_init_value=x,
                                          delta=1e-6)  # fmt: skip
    np.testing.assert_allclose(jt, jn, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["ReciprocalGrad", "RsqrtGrad", "SigmoidGrad", "SqrtGrad",
                                "TanhGrad"])  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_activation_gradient_ops_and_their_gradients(op, dtype):
    rng = np.random.default_rng(7)
    y = rng.uniform(0.5, 2, 5).astype(dtype)
    dy = rng.uniform(-2, 2, 5).astype(dtype)
    if dtype == np.complex128:
        y = y + 1j * rng.uniform(-1, 1, 5)
        dy = dy + 1j * rng.uniform(-1, 1, 5)
    c = np.conj(y)
    ref = {"ReciprocalGrad": -dy * c * c, "RsqrtGrad": -0.5 * dy * c**3,
           "SqrtGrad": 0.5 * dy / c, "SigmoidGrad": dy * y * (1 - y),
           "TanhGrad": dy * (1 - y * y)}[op]  # fmt: skip
    with tf.Graph().as_default(), tf.Session() as sess:
        a, b = tf.constant(y), tf.constant(dy)
        z = graph.apply_op(op, [a, b]).outputs[0]
        np.testing.assert_allclose(sess.run(z), ref, rtol=1e-12)
        for (jt, jn) in tf.test.compute_gradient([a, b], [[5], [5]], z, [5],
                                                 x_init_value=[y, dy], delta=1e-6):  # fmt: skip
            np.testing.assert_allclose(jt, jn, rtol=1e-5, atol=1e-5)


def test_bessel_i0e_i1e_and_gradients():
    from scipy import special

    x = np.array([-3.0, -0.5, 0.0, 0.7, 2.0])
    with tf.Graph().as_default(), tf.Session() as sess:
        t = tf.constant(x)
        got = sess.run([tf.math.bessel_i0e(t), tf.math.bessel_i1e(t), tf.math.bessel_i0(t),
                        tf.math.bessel_i1(t)])  # fmt: skip
        for f in (tf.math.bessel_i0e, tf.math.bessel_i1e):
            jt, jn = tf.test.compute_gradient(t, [5], f(t), [5], x_init_value=x, delta=1e-6)
            np.testing.assert_allclose(jt, jn, atol=1e-6)
    for g, r in zip(got, [special.i0e(x), special.i1e(x), special.i0(x), special.i1(x)],
                    strict=True):  # fmt: skip
        np.testing.assert_allclose(g, r, rtol=1e-12)


def test_truediv_of_32_and_64_bit_unsigned_is_float64():
    # TF's _TRUEDIV_TABLE: uint32 and uint64 divide in float64.
    with tf.Graph().as_default():
        for dt in (np.uint32, np.uint64):
            q = tf.truediv(np.array([1, 2], dt), np.array([4, 3], dt))
            assert q.dtype == tf.float64
            np.testing.assert_allclose(_run(q), [0.25, 2 / 3])


def test_equal_of_quantized_types():
    x = np.asarray([0, 1, 2])
    with tf.Graph().as_default():
        for dt in (tf.qint8, tf.qint16, tf.quint8, tf.quint16, tf.qint32):
            xt = x.astype(dt.as_numpy_dtype)
            eq, ne = _run([tf.equal(xt, xt), tf.not_equal(xt, xt)])
            np.testing.assert_array_equal(eq, [True] * 3)
            np.testing.assert_array_equal(ne, [False] * 3)


def test_conj_real_type_errors_and_polyval():
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="Expected numeric or variant tensor"):
            tf.math.conj(tf.placeholder(tf.string))
        with pytest.raises(TypeError, match="input must be a numeric tensor"):
            tf.math.real(np.array(["a", "b"]))
        coeffs = [np.array([1.0, 2.0]), np.array(3.0), np.array([[0.5], [1.5]])]
        x = np.array([2.0, -1.0])
        horner = (coeffs[0] * x + coeffs[1]) * x + coeffs[2]
        np.testing.assert_allclose(_run(tf.math.polyval(coeffs, x)), horner)
        np.testing.assert_array_equal(_run(tf.math.polyval([], x)), [0.0, 0.0])
        with pytest.raises(ValueError, match="Argument coeffs must be list"):
            tf.math.polyval({}, x)


def test_compute_gradient_perturbs_a_scalar_without_init_value():
    # The checker's own random value for a scalar x must be the array it perturbs: the
    # numeric Jacobian of 2**y at a random complex y is 2**y log 2 (TF's testComplexPowGrad).
    with tf.Graph().as_default(), tf.Session():
        for dt in (tf.float64, tf.complex128):
            y = tf.constant(2.0, dtype=dt)
            err = tf.test.compute_gradient_error(y, [], tf.pow(tf.constant(2.0, dt), y), [])
            assert err < 1e-6


# -- conv2d: int32, empty shapes, explicit padding checks, expanded batch -----------------------


def test_conv2d_of_int32_matches_the_definition():
    # TF's CPU Conv2D convolves int32 (conv_ops_test checks every case in int32 too).
    x = np.arange(1, 19, dtype=np.int32).reshape(1, 2, 3, 3)
    w = np.arange(1, 37, dtype=np.int32).reshape(2, 2, 3, 3)
    with tf.Graph().as_default():
        y = tf.nn.conv2d(x, w, [1, 1, 1, 1], "VALID")
        assert y.dtype == tf.int32
        got = _run(y)
    # TF's testConv2D2x2Filter values
    np.testing.assert_array_equal(got.ravel(), [2271, 2367, 2463, 2901, 3033, 3165])


def test_conv2d_empty_and_zero_sized_cases_as_tf():
    f32 = np.float32
    with tf.Graph().as_default():
        empty = tf.nn.conv2d(np.ones([0, 2, 3, 3], f32), np.ones([1, 1, 3, 3], f32),
                             [1, 1, 1, 1], "VALID")  # fmt: skip
        only_pad = tf.nn.conv2d(np.ones([1, 0, 2, 1], f32), np.ones([1, 1, 1, 1], f32),
                                [1, 1, 1, 1], [[0, 0], [1, 1], [1, 1], [0, 0]])  # fmt: skip
        bi = tf.nn.conv2d_backprop_input([0, 2, 3, 1], np.ones([2, 2, 1, 1], f32),
                                         np.ones([0, 1, 2, 1], f32), [1, 1, 1, 1], "VALID")
        bf = tf.nn.conv2d_backprop_filter(np.ones([1, 2, 3, 1], f32), [2, 2, 1, 0],
                                          np.ones([1, 1, 2, 0], f32), [1, 1, 1, 1], "VALID")
        got = _run([empty, only_pad, bi, bf])
        assert got[0].shape == (0, 2, 3, 3)
        np.testing.assert_array_equal(got[1], np.zeros([1, 2, 4, 1]))
        assert got[2].shape == (0, 2, 3, 1) and got[3].shape == (2, 2, 1, 0)
        zero = tf.nn.conv2d(np.ones([1, 1, 1, 1], f32), np.ones([1, 0, 1, 1], f32),
                            [1, 1, 1, 1], "SAME")  # fmt: skip
        with pytest.raises(errors.InvalidArgumentError, match="filter must not have zero"):
            _run(zero)


def test_conv2d_explicit_padding_checks():
    with tf.Graph().as_default():
        ph = tf.placeholder(tf.float32)
        # TF: the shape function rejects negative padding (ValueError) ...
        with pytest.raises(ValueError, match="must be nonnegative"):
            tf.nn.conv2d(ph, ph, [1, 1, 1, 1], [[0, 0], [0, -1], [1, 2], [0, 0]])
        with pytest.raises(ValueError, match="list of lists or tuples"):
            tf.nn.conv2d(ph, ph, [1, 1, 1, 1], [0, 0, 0, 0])
        # ... the backprop kernels at run time (InvalidArgumentError).
        bi = tf.nn.conv2d_backprop_input([32, 20, 20, 3], np.ones([18, 18, 3, 2], np.float32),
                                         np.ones([32, 3, 2, 2], np.float32), [1, 1, 1, 1],
                                         [[0, 0], [-1, 0], [0, 0], [0, 0]])  # fmt: skip
        with pytest.raises(errors.InvalidArgumentError, match="must be nonnegative"):
            _run(bi)


def test_conv2d_backprop_input_takes_spatial_input_sizes():
    # TF: input_sizes [height, width]; batch from out_backprop, depth from the filter.
    w = np.arange(1, 5, dtype=np.float32).reshape(2, 2, 1, 1)
    dy = np.ones([1, 1, 1, 1], np.float32)
    with tf.Graph().as_default():
        a = tf.nn.conv2d_backprop_input([2, 2], w, dy, [1, 1, 1, 1], "VALID")
        b = tf.nn.conv2d_backprop_input([1, 2, 2, 1], w, dy, [1, 1, 1, 1], "VALID")
        assert a.shape.as_list() == [1, 2, 2, 1]
        ga, gb = _run([a, b])
    np.testing.assert_array_equal(ga, gb)
    np.testing.assert_array_equal(ga.ravel(), [1, 2, 3, 4])


def test_conv2d_folds_leading_batch_dims():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 4, 4, 3)).astype(np.float32)
    w = rng.standard_normal((2, 2, 3, 2)).astype(np.float32)
    with tf.Graph().as_default():
        y = tf.nn.conv2d(x, w, [1, 1, 1, 1], "VALID")
        assert y.shape.as_list() == [2, 5, 3, 3, 2]
        got = _run(y)
    ref = _ref_conv(x.reshape(10, 4, 4, 3), w, [1, 1], [(0, 0)] * 2).reshape(2, 5, 3, 3, 2)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
