"""Numeric edge cases where asyncflow differed from TF 2.21 (tf.compat.v1 graph mode).

Each expected value or error below is what TF 2.21 printed for the same graph (recorded
once, as literals: TF is never imported here); NumPy is the reference elsewhere.
"""

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors


def _run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


# -- math_ops ------------------------------------------------------------------------------


def test_floormod_float_zero_keeps_the_dividend_sign():
    x = np.array([-7, -3, 0, 3, 7, -3], np.float32)
    y = np.array([2, -2, 3, -3, 2, 3], np.float32)
    got = _run(tf.floormod(tf.constant(x), tf.constant(y)))
    np.testing.assert_array_equal(got, [1.0, -1.0, 0.0, 0.0, 1.0, 0.0])
    # TF: fmod's zero keeps the dividend's sign (3 % -3 is +0, -3 % 3 is -0).
    np.testing.assert_array_equal(np.signbit(got), [False, True, False, False, False, True])


def test_realdiv_of_integers_has_no_kernel():
    z = tf.realdiv(tf.constant([1, 2]), tf.constant([0, 1]))
    with pytest.raises(errors.InvalidArgumentError, match="No OpKernel was registered"):
        _run(z)


def test_sort_and_argsort_descending_at_the_integer_minimum():
    x = tf.constant(np.array([3, -2147483648, 0], np.int32))
    np.testing.assert_array_equal(_run(tf.sort(x, direction="DESCENDING")), [3, 0, -2147483648])
    np.testing.assert_array_equal(_run(tf.argsort(x, direction="DESCENDING")), [0, 2, 1])
    np.testing.assert_array_equal(_run(tf.nn.top_k(x, 2)[1]), [0, 2])
    with pytest.raises(ValueError, match="Argument `direction` should be one of ASCENDING"):
        tf.argsort(x, direction="UP")


def test_in_top_k_is_false_for_a_row_with_a_non_finite_prediction():
    pred = tf.constant([[0.1, np.nan, 0.3, 0.2], [5.0, 4, 3, np.inf], [1, 2, 3, 4]])
    np.testing.assert_array_equal(
        _run(tf.nn.in_top_k(pred, tf.constant([2, 0, 3]), 2)), [False, False, True]
    )


def test_bincount_rejects_negative_values():
    with pytest.raises(errors.InvalidArgumentError, match="Input arr must be non-negative!"):
        _run(tf.math.bincount(tf.constant([1, -1])))
    np.testing.assert_array_equal(_run(tf.math.bincount(tf.constant([1, 1, 3, 0]))), [1, 2, 0, 1])
    np.testing.assert_array_equal(
        _run(tf.math.bincount(tf.constant([1, 1, 3, 0]), maxlength=2)), [1, 2]
    )
    w = _run(tf.math.bincount(tf.constant([1, 1, 3, 0]), weights=tf.constant([1.0, 2, 3, 4])))
    assert w.dtype == np.float32
    np.testing.assert_array_equal(w, [4.0, 3.0, 0.0, 3.0])
    assert _run(tf.math.bincount(tf.constant([], tf.int32))).shape == (0,)


def test_histogram_fixed_width_checks_its_range_and_bins():
    v = tf.constant([-1.0, 0.0, 1.5, 2.0, 5.0, 15])
    np.testing.assert_array_equal(
        _run(tf.histogram_fixed_width(v, [0.0, 5.0], nbins=5)), [2, 1, 1, 0, 2]
    )
    with pytest.raises(errors.InvalidArgumentError, match=r"value_range\[0\] < value_range\[1\]"):
        _run(tf.histogram_fixed_width(v, [5.0, 0.0], nbins=5))
    with pytest.raises(ValueError, match="Requires nbins > 0: 0"):
        tf.histogram_fixed_width(v, [0.0, 5.0], nbins=0)


def test_confusion_matrix_checks_its_labels():
    with pytest.raises(errors.InvalidArgumentError, match="`labels` contains negative values"):
        tf.confusion_matrix(tf.constant([-1, 2]), tf.constant([2, 2]))
    with pytest.raises(errors.InvalidArgumentError, match="`labels` out of bound"):
        tf.confusion_matrix(tf.constant([1, 7]), tf.constant([2, 2]), num_classes=3)
    labels = tf.placeholder(tf.int32, [2])
    cm = tf.confusion_matrix(labels, tf.constant([2, 2]), num_classes=3)
    np.testing.assert_array_equal(_run(cm, {labels: [1, 2]}), [[0, 0, 0], [0, 0, 1], [0, 0, 1]])
    with pytest.raises(errors.InvalidArgumentError, match="`labels` out of bound"):
        _run(cm, {labels: [1, 3]})


def test_cumsum_axis_error_says_what_tf_says():
    with pytest.raises(
        errors.InvalidArgumentError,
        match=r"ScanOp: Expected scan axis in the range \[-2, 2\), but got 2",
    ):
        _run(tf.cumsum(tf.constant([[1.0, 2], [3, 4]]), axis=2))


# -- segment ops ---------------------------------------------------------------------------


def test_segment_ids_of_another_length_fail_when_run():
    data = tf.constant([[1.0, 2], [3, 4], [5, 6], [7, 8]])
    z = tf.segment_sum(data, tf.constant([0, 0, 1]))  # (no build-time error, as TF)
    with pytest.raises(errors.InvalidArgumentError, match="segment_ids should be the same size"):
        _run(z)


def test_unsorted_segment_mean_of_integers_is_float64():
    data = tf.constant([[1, 2], [3, 4], [5, 6], [7, 8]])
    got = _run(tf.unsorted_segment_mean(data, tf.constant([0, 1, 0, 1]), 3))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [[3.0, 4.0], [5.0, 6.0], [0.0, 0.0]])


def test_segment_prod_gradients():
    x = tf.constant([0.0, 2, 0, 0, 3, 4])
    ids = tf.constant([0, 0, 1, 1, 2, 2])
    (g,) = tf.gradients(tf.segment_prod(x, ids), x)
    np.testing.assert_array_equal(_run(g), [2.0, 0.0, 0.0, 0.0, 4.0, 3.0])
    (g,) = tf.gradients(tf.unsorted_segment_prod(x, tf.constant([0, 0, 1, 1, -1, 2]), 3), x)
    np.testing.assert_array_equal(_run(g), [2.0, 0.0, 0.0, 0.0, 0.0, 1.0])


def test_segment_prod_gradient_against_finite_differences():
    rng = np.random.RandomState(1)
    x0 = rng.uniform(0.5, 2.0, (5, 3))
    x = tf.constant(x0)
    ids = np.array([1, 0, 2, 1, 0])
    y = tf.unsorted_segment_prod(x, tf.constant(ids), 3)
    (g,) = tf.gradients(tf.reduce_sum(y * tf.constant(np.arange(9.0).reshape(3, 3))), x)
    want = np.zeros_like(x0)
    for i in range(5):
        others = np.prod(x0[(ids == ids[i]) & (np.arange(5) != i)], axis=0)
        want[i] = others * np.arange(9.0).reshape(3, 3)[ids[i]]
    np.testing.assert_allclose(_run(g), want, rtol=1e-12)


def test_sparse_segment_ops_take_num_segments():
    data = tf.constant([[1.0, 2], [3, 4], [5, 6], [7, 8]])
    idx, ids = tf.constant([0, 1, 3]), tf.constant([0, 0, 2])
    got = _run(tf.sparse.segment_mean(data, idx, ids, num_segments=5))
    np.testing.assert_array_equal(got, [[2, 3], [0, 0], [7, 8], [0, 0], [0, 0]])
    got = _run(tf.sparse_segment_sum(data, idx, ids, num_segments=4))
    np.testing.assert_array_equal(got, [[4, 6], [0, 0], [7, 8], [0, 0]])
    with pytest.raises(errors.InvalidArgumentError, match="segment ids must be < num_segments"):
        _run(tf.sparse_segment_sum(data, idx, ids, num_segments=2))
    (g,) = tf.gradients(tf.sparse_segment_sqrt_n(data, idx, ids, num_segments=5), data)
    r = 0.5**0.5
    want = [[r, r], [r, r], [0, 0], [1, 1]]
    np.testing.assert_allclose(_run(tf.convert_to_tensor(g)), want, rtol=1e-6)


def test_sparse_segment_checks():
    data = tf.constant([[1.0, 2], [3, 4], [5, 6], [7, 8]])
    with pytest.raises(ValueError, match="Dimension 0 in both shapes must be equal"):
        tf.sparse_segment_sum(data, tf.constant([0, 1, 3]), tf.constant([0, 2]))
    with pytest.raises(errors.InvalidArgumentError, match=r"Segment id -1 out of range \[0, 3\)"):
        _run(tf.sparse_segment_mean(data, tf.constant([0, 1, 3]), tf.constant([-1, 0, 2])))
    with pytest.raises(TypeError):
        tf.sparse_segment_mean(tf.constant([[1, 2]]), tf.constant([0]), tf.constant([0]))


# -- sparse ops ----------------------------------------------------------------------------


def _sp(indices, values, shape, dtype=np.float32):
    return tf.SparseTensor(
        np.array(indices, np.int64), np.array(values, dtype), np.array(shape, np.int64)
    )


def test_sparse_tensor_times_and_over_a_dense_tensor():
    a = _sp([[0, 0], [1, 2]], [1.0, 2.0], [3, 4])
    assert isinstance(a * tf.constant([[2.0], [3.0], [4.0]]), tf.SparseTensor)
    np.testing.assert_array_equal(_run((a * tf.constant([[2.0], [3.0], [4.0]])).values), [2, 6])
    np.testing.assert_array_equal(_run((tf.constant(2.0) * a).values), [2, 4])
    np.testing.assert_array_equal(_run((a / tf.constant([1.0, 2, 4, 8])).values), [1, 0.5])
    i = _sp([[0, 0], [1, 2]], [3, 4], [3, 4], np.int32)
    got = _run((i / tf.constant(2)).values)  # truediv: through float64, as TF
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [1.5, 2.0])
    with pytest.raises(errors.InvalidArgumentError, match=r"got incompatible shapes: \[3,4\]"):
        _run((a * tf.constant([1.0, 2])).values)


def test_sparse_dense_cwise_gradients():
    x, d = tf.constant([1.0, 2.0]), tf.constant([1.0, 2, 4, 8])
    a = tf.SparseTensor(tf.constant([[0, 0], [1, 2]], tf.int64), x, tf.constant([3, 4], tf.int64))
    gx, gd = _run(tf.gradients((a / d).values, [x, d]))
    np.testing.assert_array_equal(gx, [1.0, 0.25])
    np.testing.assert_array_equal(gd, [-1.0, 0.0, -0.125, 0.0])
    d = tf.constant([[2.0], [3.0], [4.0]])
    gx, gd = _run(tf.gradients((a * d).values, [x, d]))
    np.testing.assert_array_equal(gx, [2.0, 3.0])
    np.testing.assert_array_equal(gd, [[1.0], [2.0], [0.0]])


def test_sparse_add_of_unordered_indices_walks_them_as_tf():
    a = _sp([[1, 2], [0, 0], [0, 3]], [1.0, 2.0, 3.0], [3, 4])
    b = _sp([[0, 0], [2, 1]], [3.0, -1.0], [3, 4])
    got = _run(tf.sparse.add(a, b))
    np.testing.assert_array_equal(got.indices, [[0, 0], [1, 2], [0, 0], [0, 3], [2, 1]])
    np.testing.assert_array_equal(got.values, [3.0, 1.0, 2.0, 3.0, -1.0])


def test_sparse_static_shape_checks():
    a = _sp([[0, 0], [1, 2]], [1.0, 2.0], [3, 4])
    with pytest.raises(ValueError, match=r"Shapes \(3, 4\) and \(3, 5\) are incompatible"):
        tf.sparse.add(a, _sp([[0, 0]], [1.0], [3, 5]))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 4 and 3"):
        tf.sparse_tensor_dense_matmul(a, tf.ones([3, 2]))
    with pytest.raises(ValueError, match=r"At most one dimension can be inferred \(-1\)"):
        tf.sparse.reshape(a, [-1, -1])
    unsorted = _sp([[1, 2], [0, 0]], [1.0, 2.0], [3, 4])
    with pytest.raises(errors.InvalidArgumentError, match="out of order. Many sparse ops"):
        _run(tf.sparse.to_dense(unsorted))


def test_sparse_placeholder_names_and_static_shape():
    p = tf.sparse_placeholder(tf.float32, shape=[2, 2])
    assert (p.values.name, p.indices.name) == ("Placeholder:0", "Placeholder_1:0")
    assert p.dense_shape.name == "PlaceholderWithDefault:0"
    assert p.shape.as_list() == [2, 2]
    q = tf.sparse_placeholder(tf.float32, shape=[None, 3], name="sp")
    assert (q.values.name, q.indices.name, q.dense_shape.name) == (
        "sp/values:0",
        "sp/indices:0",
        "sp/shape:0",
    )
    assert q.shape.as_list() == [None, 3]
    r = tf.sparse_placeholder(tf.float32)
    assert r.dense_shape.name == "Placeholder_2:0" and r.values.name == "Placeholder_3:0"


# -- linalg --------------------------------------------------------------------------------


def test_einsum_with_ellipsis():
    b = np.arange(18, dtype=np.float64).reshape(2, 3, 3)
    m = np.arange(9, dtype=np.float64).reshape(3, 3).T + 1
    np.testing.assert_array_equal(
        _run(tf.einsum("...ij,...jk->...ik", tf.constant(b), tf.constant(m))), b @ m
    )
    ones = np.ones((1, 3, 2))
    np.testing.assert_array_equal(
        _run(tf.einsum("...ij,...jk->...ik", tf.constant(b), tf.constant(ones))), b @ ones
    )
    np.testing.assert_array_equal(
        _run(tf.einsum("...ij,jk", tf.constant(b), tf.constant(m))), b @ m
    )
    np.testing.assert_array_equal(
        _run(tf.einsum("...ii->...", tf.constant(b))), np.trace(b, axis1=1, axis2=2)
    )
    np.testing.assert_array_equal(
        _run(tf.einsum("i...j->ji...", tf.constant(b))), np.einsum("i...j->ji...", b)
    )
    x = tf.constant(b)
    (g,) = tf.gradients(tf.reduce_sum(tf.einsum("...ij,...jk->...ik", x, tf.constant(m))), x)
    np.testing.assert_allclose(_run(g), np.broadcast_to(m.sum(1), (2, 3, 3)))


def test_matrix_2_norm_is_the_largest_singular_value():
    n = np.array([[0.0, 1, 2], [3, 4, 5], [6, 7, 9]], np.float32)
    np.testing.assert_allclose(_run(tf.norm(tf.constant(n), ord=2, axis=[0, 1])), 14.82346, 1e-6)
    b = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    got = _run(tf.norm(tf.constant(b), ord=2, axis=[0, 2], keepdims=True))
    want = np.linalg.norm(b.transpose(1, 0, 2), 2, axis=(1, 2)).reshape(1, 3, 1)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    got = _run(tf.norm(tf.constant(b), ord=2, axis=[-1, -2]))
    np.testing.assert_allclose(got, np.linalg.norm(b, 2, axis=(2, 1)), rtol=1e-12)


def test_linalg_static_shape_checks():
    n = tf.constant(np.eye(3, dtype=np.float32))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 2"):
        tf.linalg.solve(n, tf.constant([[1.0], [2]]))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3"):
        tf.linalg.solve(tf.ones([2, 3]), tf.constant([[1.0], [2]]))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 2"):
        tf.linalg.triangular_solve(n, tf.constant([[1.0], [2]]))
    with pytest.raises(ValueError, match="Dimension must be 3 but is 2"):
        tf.cross(tf.constant([1.0, 2]), tf.constant([4.0, 5]))
    with pytest.raises(ValueError, match="Shapes must be equal rank, but are 2 and 1"):
        tf.cross(tf.constant([[1.0, 2, 3]]), tf.constant([4.0, 5, 6]))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 2"):
        tf.tensordot(n, tf.ones([2, 3]), [[1], [0]])


def test_band_part_names_the_bound_out_of_range():
    n = tf.constant(np.eye(3, dtype=np.float32))
    with pytest.raises(errors.InvalidArgumentError) as info:
        _run(tf.matrix_band_part(n, 1, 5))
    assert info.value.message.startswith(
        "num_upper must be negative or less or equal to number of columns (3) got: 5"
    )


# -- special functions ---------------------------------------------------------------------


def test_igamma_igammac_betainc_edge_values():
    a = [0.0, 0.0, 0.0, -1.0, -1.0, 1.0, 1.0, 1.0, 2.0, np.inf, np.inf, 0.5, np.nan, 1.0]
    x = [0.0, 1.0, -1.0, 0.0, 1.0, 0.0, -1.0, np.inf, np.inf, 1.0, np.inf, 0.0, 1.0, np.nan]
    nan = np.nan
    np.testing.assert_array_equal(
        _run(tf.igamma(tf.constant(a), tf.constant(x))),
        [0, nan, nan, 0, nan, 0, nan, 1, 1, 0, 0, 0, nan, nan],
    )
    np.testing.assert_array_equal(
        _run(tf.igammac(tf.constant(a), tf.constant(x))),
        [nan, nan, nan, nan, nan, 1, nan, 0, 0, 1, 0, 1, nan, nan],
    )
    a = [1.0, 0.0, -1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 0.0, np.nan]
    b = [0.0, 1.0, 1.0, -1.0, 1.0, 1.0, 1.0, 3.0, 0.0, 1.0]
    x = [0.5, 0.5, 0.5, 0.5, 0.0, 1.0, 1.5, -0.5, 0.5, 0.5]
    np.testing.assert_array_equal(
        _run(tf.betainc(tf.constant(a), tf.constant(b), tf.constant(x))),
        [nan, nan, nan, nan, 0, 1, nan, nan, nan, nan],
    )


# TF 2.21's float32 values at x = 0.5, 1, 2.5, -0.7.
_SPECIAL = {
    "dawsn": [0.4244364, 0.5380795, 0.2230837, -0.5105041],
    "expint": [0.4542198, 1.8951179, 7.0737658, np.nan],
    "fresnel_cos": [0.4923442, 0.7798934, 0.457413, -0.6596524],
    "fresnel_sin": [0.0647324, 0.4382591, 0.6191818, -0.1721365],
    "spence": [0.5822403, 0.0, -1.1473808, np.nan],
    "bessel_j0": [0.9384699, 0.7651977, -0.0483838, 0.881201],
    "bessel_j1": [0.2422685, 0.4400506, 0.4970941, -0.3289957],
    "bessel_y0": [-0.4445187, 0.088257, 0.4980704, -np.inf],
    "bessel_y1": [-1.4714724, -0.7812128, 0.1459181, -np.inf],
    "bessel_k0": [0.9244191, 0.4210244, 0.0623476, np.inf],
    "bessel_k0e": [1.5241094, 1.1444631, 0.7595488, np.inf],
    "bessel_k1": [1.656441, 0.6019073, 0.0738908, np.inf],
    "bessel_k1e": [2.7310095, 1.6361537, 0.9001744, np.inf],
}


@pytest.mark.parametrize("fn", sorted(_SPECIAL))
def test_math_special_functions(fn):
    x = tf.constant([0.5, 1.0, 2.5, -0.7])
    np.testing.assert_allclose(_run(getattr(tf.math.special, fn)(x)), _SPECIAL[fn], rtol=2e-6)
    x64 = np.array([0.6, 1.3, 2.2])
    t = tf.constant(x64)
    (g,) = tf.gradients(getattr(tf.math.special, fn)(t), t)
    h = 1e-6
    f = getattr(tf.math.special, fn)
    up, down = _run([f(tf.constant(x64 + h)), f(tf.constant(x64 - h))])
    np.testing.assert_allclose(_run(g), (up - down) / (2 * h), rtol=1e-6)


# -- casts, reductions, namespaces ---------------------------------------------------------


def test_cast_of_positive_infinity_to_unsigned_32_and_64_bits():
    f = tf.constant([np.inf, np.nan, 1.7, 3e9])
    np.testing.assert_array_equal(
        _run(tf.cast(f, tf.uint32)), np.array([2147483648, 2147483648, 1, 3000000000], np.uint32)
    )
    np.testing.assert_array_equal(
        _run(tf.cast(f, tf.uint64)),
        np.array([9223372036854775808, 9223372036854775808, 1, 3000000000], np.uint64),
    )


def test_reduce_std_and_variance_of_complex_are_real():
    x = tf.constant([1 + 1j, 2 + 0j])
    var, std = _run([tf.math.reduce_variance(x), tf.math.reduce_std(x)])
    assert var.dtype == np.float64 and std.dtype == np.float64
    np.testing.assert_allclose([var, std], [0.5, 0.5**0.5])
    with pytest.raises(TypeError, match="Input must be either real or complex. Received integer"):
        tf.math.reduce_std(tf.constant([1, 2]))


def test_reduction_error_words():
    with pytest.raises(
        errors.InvalidArgumentError,
        match="Invalid reduction arguments: Axes contains duplicate dimension: 1",
    ):
        _run(tf.reduce_sum(tf.constant([[1.0, 2], [3, 4]]), axis=[1, 1]))
    with pytest.raises(TypeError, match="The `real` and `imag` components have incorrect types"):
        tf.complex(tf.constant([1.0]), tf.constant(np.array([2.0])))


def test_spectral_is_tf1s_name_for_the_signal_transforms():
    x = np.array([1.0, 2, 3, 4, 0, -1], np.complex64)
    np.testing.assert_allclose(_run(tf.spectral.fft(tf.constant(x))), np.fft.fft(x), atol=1e-5)
    assert tf.spectral.rfft is tf.signal.rfft


# -- gradients -----------------------------------------------------------------------------


def test_frame_gradient_is_dense():
    x = tf.constant([1.0, 2, 3])
    (g,) = tf.gradients(tf.signal.frame(x, 2, 1) * tf.constant([[1.0, 2], [3, 4]]), x)
    assert isinstance(g, tf.Tensor)
    np.testing.assert_array_equal(_run(g), [1.0, 5.0, 4.0])


def test_qr_gradient_of_a_wide_matrix():
    a0 = np.array([[1.0, 2, 3], [3, 5, 1]])
    w = np.array([[0.3, -1.0, 2.0], [0.7, 0.2, -0.4]])

    def loss(a):
        q, r = tf.linalg.qr(a, full_matrices=False)
        return tf.reduce_sum(r * tf.constant(w)) + tf.reduce_sum(q * tf.constant(w[:, :2]))

    a = tf.constant(a0)
    (g,) = tf.gradients(loss(a), a)
    got = _run(g)
    h, want = 1e-6, np.zeros_like(a0)
    for i in np.ndindex(a0.shape):
        e = np.zeros_like(a0)
        e[i] = h
        up, down = _run([loss(tf.constant(a0 + e)), loss(tf.constant(a0 - e))])
        want[i] = (up - down) / (2 * h)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    x = tf.constant([[1.0, 2], [3, 5], [1, 1]])
    with pytest.raises(NotImplementedError, match="nrows > ncols and full_matrices is true"):
        tf.gradients(tf.linalg.qr(x, full_matrices=True)[1], x)


def test_ops_without_a_tf_gradient_raise_lookup_error():
    x = tf.constant([1.0, 2.0])
    sp = tf.SparseTensor(tf.constant([[0, 0], [0, 2]], tf.int64), x, tf.constant([2, 3], tf.int64))
    for y in [
        tf.truncatemod(x, tf.constant([2.0, 3.0])),
        tf.unique(x)[0],
        tf.unique_with_counts(x)[0],
        tf.setdiff1d(x, tf.constant([1.0]))[0],
        tf.sparse.reduce_sum_sparse(sp, 1).values,
        tf.sparse.reduce_max(sp),
        tf.sparse.reduce_max_sparse(sp, 1).values,
        tf.sparse.split(sp_input=sp, num_split=2, axis=0)[0].values,
        tf.math.bincount(tf.constant([1, 2]), weights=x),
    ]:
        with pytest.raises(LookupError, match="No gradient defined for operation"):
            tf.gradients(y, x)


# -- more math_ops -------------------------------------------------------------------------


def test_pow_takes_no_unsigned_integers():
    with pytest.raises(TypeError, match="uint8"):
        tf.pow(tf.constant(np.array([2], np.uint8)), tf.constant(np.array([9], np.uint8)))


def test_unique_keeps_each_nan_apart():
    y, idx, count = _run(tf.unique_with_counts(tf.constant([np.nan, 1.0, np.nan, 1.0, 2.0])))
    np.testing.assert_array_equal(y, [np.nan, 1.0, np.nan, 2.0])
    np.testing.assert_array_equal(idx, [0, 1, 2, 1, 3])
    np.testing.assert_array_equal(count, [1, 2, 1, 1])


def test_confusion_matrix_counts_every_pair_of_2d_inputs():
    cm = _run(tf.confusion_matrix(tf.constant([[1, 2]]), tf.constant([[2, 2]])))
    np.testing.assert_array_equal(cm, [[0, 0, 0], [0, 0, 1], [0, 0, 1]])


def test_histogram_rejects_nan_and_bincount_takes_int64():
    with pytest.raises(errors.InvalidArgumentError, match="must not contain NaN"):
        _run(tf.histogram_fixed_width(tf.constant([1.0, np.nan]), [0.0, 10.0], nbins=3))
    got = _run(tf.histogram_fixed_width(tf.constant([1.0, np.inf, -np.inf]), [0.0, 10.0], 3))
    np.testing.assert_array_equal(got, [2, 0, 1])
    got = _run(tf.math.bincount(tf.constant(np.array([1, 1], np.int64))))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [0, 2])


# -- more linalg ---------------------------------------------------------------------------


def test_inverse_of_nan_and_square_root_without_a_real_root():
    with pytest.raises(errors.InvalidArgumentError, match="Input is not invertible."):
        _run(tf.linalg.inv(tf.constant([[np.nan, 1.0], [1, 0]])))
    got = _run(tf.linalg.sqrtm(tf.constant([[-1.0, 0], [0, 1]])))
    assert np.isnan(got).all()
    m = np.array([[4.0, 1, 2], [1, 3, 0], [2, 0, 5]])
    root = _run(tf.linalg.sqrtm(tf.constant(m)))
    np.testing.assert_allclose(root @ root, m, rtol=1e-12, atol=1e-12)


def test_lstsq_without_fast_is_the_minimum_norm_solution():
    s = tf.constant([[1.0, 2], [2, 4]])
    got = _run(tf.linalg.lstsq(s, tf.constant([[1.0], [2]]), fast=False))
    np.testing.assert_allclose(got, [[0.2], [0.4]], rtol=1e-6)
    a = np.array([[0.0, 1], [3, 4], [6, 7]])
    b = np.array([[1.0], [2], [3]])
    got = _run(tf.linalg.lstsq(tf.constant(a), tf.constant(b), fast=False))
    np.testing.assert_allclose(got, np.linalg.lstsq(a, b, rcond=None)[0], rtol=1e-12)


def test_einsum_and_tensordot_build_time_checks():
    n = tf.ones([3, 3])
    with pytest.raises(ValueError, match="label k not present in the input subscripts"):
        tf.einsum("ij->k", n)
    with pytest.raises(ValueError, match="label appearing more than once: ij->ii"):
        tf.einsum("ij->ii", n)
    with pytest.raises(ValueError, match="`axes` must be at least 0. Received: -1."):
        tf.tensordot(n, n, axes=-1)


def test_sparse_operand_dtypes_that_differ_are_a_type_error():
    a = _sp([[0, 0]], [1.0], [2, 2])
    i = _sp([[0, 0]], [1], [2, 2], np.int32)
    with pytest.raises(TypeError, match="Input 'b_values' of 'SparseAdd' Op has type int32"):
        tf.sparse.add(a, i)
    with pytest.raises(TypeError, match="Input 'b' of 'SparseTensorDenseAdd' Op has type int32"):
        tf.sparse.add(a, tf.constant([[1, 2], [3, 4]]))
    with pytest.raises(TypeError, match="'SparseTensorDenseMatMul' Op has type float32"):
        tf.sparse.sparse_dense_matmul(_sp([[0, 0]], [1.0], [1, 1], np.float64), [[2.0]])
    with pytest.raises(TypeError, match="Input 'b_values' of 'SparseSparseMaximum' Op"):
        tf.sparse.maximum(a, i)
    with pytest.raises(TypeError, match=r"have types \[float32, int32\] that don't all match"):
        tf.sparse.concat(0, [a, i])


def test_sparse_slice_and_dense_add_checks():
    a = _sp([[0, 0], [1, 2]], [1.0, 2.0], [3, 4])
    with pytest.raises(errors.InvalidArgumentError, match="Expected a non-negative size, got -1"):
        _run(tf.sparse.slice(a, [0, 0], [-1, 2]).values)
    with pytest.raises(
        errors.InvalidArgumentError, match="Expected start to be a vector of length"
    ):
        _run(tf.sparse.slice(a, [0], [2]).values)
    with pytest.raises(errors.InvalidArgumentError, match="different ranks; received: 2 and 1"):
        _run(tf.sparse.add(a, tf.ones([4])))


def test_float_floordiv_and_truncatediv_round_the_quotient():
    x, y = tf.constant([1.0, -1.0, 7.0, -1.0, np.inf]), tf.constant([0.1, 0.1, -0.7, np.inf, 2])
    got = _run(tf.floordiv(x, y))
    np.testing.assert_array_equal(got, [10.0, -10.0, -10.0, -0.0, np.inf])
    assert np.signbit(got[3])
    np.testing.assert_array_equal(
        _run(tf.truncatediv(tf.constant([-7.0, 7.0, 1.0]), tf.constant([2.0, -0.7, 0.0]))),
        [-3.0, -10.0, np.inf],
    )


def test_scans_need_an_axis_inside_the_rank():
    for scan in (tf.cumsum, tf.cumprod, tf.math.cumulative_logsumexp):
        with pytest.raises(errors.InvalidArgumentError, match=r"range \[0, 0\), but got 0"):
            _run(scan(tf.constant(3.0)))
    with pytest.raises(errors.InvalidArgumentError, match=r"ScanOp: axis must be a scalar, not"):
        _run(tf.cumsum(tf.constant([1.0, 2.0]), axis=tf.constant([0])))


def test_polygamma_at_infinity_and_builder_words():
    got = _run(tf.polygamma(tf.constant([3.0, 1.0, 0.0]), tf.constant([np.inf, np.inf, 2.0])))
    np.testing.assert_allclose(got, [0.0, 0.0, 0.42278433], rtol=1e-6)
    with pytest.raises(ValueError, match="Inputs must be an iterable of at least one"):
        tf.add_n([])
    with pytest.raises(ValueError, match="The input scalar must be a 0-D value"):
        tf.scalar_mul(tf.constant([1.0, 2.0]), tf.constant([1.0, 2.0]))


def test_segment_max_min_fold_nan_as_tf():
    x = tf.constant([[np.nan, 1.0], [2.0, np.nan], [1.0, 3.0], [np.nan, np.nan]])
    got = _run(tf.unsorted_segment_max(x, tf.constant([0, 0, 1, 1]), 3))
    lowest = np.finfo(np.float32).min
    np.testing.assert_array_equal(got, [[2.0, np.nan], [np.nan, np.nan], [lowest, lowest]])
    x = tf.constant([[np.nan, 1.0], [2.0, np.nan], [1.0, 3.0], [5.0, np.nan]])
    got = _run(tf.segment_min(x, tf.constant([0, 0, 0, 1])))
    np.testing.assert_array_equal(got, [[1.0, 3.0], [5.0, np.nan]])
    got = _run(tf.segment_max(tf.constant([5.0, np.nan, 1.0, 2.0]), tf.constant([0, 0, 0, 0])))
    np.testing.assert_array_equal(got, [2.0])


def test_sparse_reduce_max_folds_nan_as_tf():
    sp = _sp([[0, 0], [1, 0], [0, 1]], [np.nan, 1.0, 5.0], [2, 2])
    np.testing.assert_array_equal(_run(tf.sparse.reduce_max(sp, axis=0)), [1.0, 5.0])
    np.testing.assert_array_equal(_run(tf.sparse.reduce_max(sp, axis=1)), [5.0, 1.0])
    assert _run(tf.sparse.reduce_max(sp)) == 5.0
    last = _sp([[0, 0], [0, 1]], [1.0, np.nan], [2, 2])
    np.testing.assert_array_equal(_run(tf.sparse.reduce_max(last, axis=1)), [np.nan, 0.0])


def test_signal_argument_checks():
    with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
        _run(tf.signal.frame(tf.constant([1.0, 2, 3]), 2, 0))
    with pytest.raises(ValueError, match="RFFT requires tf.float32 or tf.float64 inputs"):
        tf.signal.rfft(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="lower_edge_hertz 5000.0 >= upper_edge_hertz 4000.0"):
        tf.signal.linear_to_mel_weight_matrix(2, 5, 8000, 5000.0, 4000.0)
    with pytest.raises(ValueError, match="num_mel_bins must be positive. Got: 0"):
        tf.signal.linear_to_mel_weight_matrix(num_mel_bins=0)
    zeros = _run(tf.signal.linear_to_mel_weight_matrix(num_spectrogram_bins=0))
    np.testing.assert_array_equal(zeros, np.zeros((1, 20), np.float32))


def test_bitcast_shape_error_says_what_tf_says():
    with pytest.raises(ValueError, match="Cannot bitcast from 4 to 1 due to shape. 3 does not"):
        tf.bitcast(tf.constant(np.array([0, 0, 128], np.uint8)), tf.float32)


def test_cast_of_sparse_tensors_and_indexed_slices_casts_their_values():
    sp = tf.cast(tf.SparseTensor([[0]], [1.5], [2]), tf.int32)
    assert isinstance(sp, tf.SparseTensor)
    np.testing.assert_array_equal(_run(sp.values), [1])
    s = tf.cast(tf.IndexedSlices(tf.constant([1.5]), tf.constant([0])), tf.int32)
    assert isinstance(s, tf.IndexedSlices)
    np.testing.assert_array_equal(_run(s.values), [1])


def test_saturate_cast_from_integers_to_half_and_of_bool():
    got = _run(tf.saturate_cast(tf.constant(np.array([10**6, -(10**6)], np.int64)), tf.float16))
    np.testing.assert_array_equal(got, [65504.0, -65504.0])
    with pytest.raises(TypeError, match="Cannot find minimum value of <dtype: 'bool'>"):
        tf.saturate_cast(tf.constant([2]), tf.bool)
    with pytest.raises(TypeError, match="Cannot convert the argument `type_value`: 'float33'"):
        tf.cast(tf.constant([1.0]), "float33")


def test_matrix_solve_does_not_broadcast_batches():
    a = tf.constant(np.stack([np.eye(3, dtype=np.float32)] * 2))
    with pytest.raises(ValueError, match="Shapes must be equal rank, but are 1 and 0"):
        tf.linalg.solve(a, tf.ones([3, 2]))
    got = _run(tf.linalg.triangular_solve(a, tf.ones([3, 2])))  # (this one broadcasts)
    np.testing.assert_array_equal(got, np.ones((2, 3, 2)))


def test_searchsorted_with_nan_probes_as_tf():
    seq = tf.constant([1.0, np.nan, 2.0, 3.0, 4.0])
    vals = tf.constant([np.nan, 3.0, 1.5, 0.0, 5.0])
    np.testing.assert_array_equal(_run(tf.searchsorted(seq, vals)), [0, 3, 1, 0, 5])
    np.testing.assert_array_equal(_run(tf.searchsorted(seq, vals, side="right")), [5, 4, 2, 2, 5])
    got = _run(tf.searchsorted(tf.constant([1.0, 2, np.nan]), tf.constant([np.nan, 3.0])))
    np.testing.assert_array_equal(got, [0, 2])
