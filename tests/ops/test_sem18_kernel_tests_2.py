"""Behaviours TF's kernel tests check (queues, scatter_nd, gather, pooling, TensorSpec),
each value or error as TF 2.21 gives it in `tf.compat.v1` graph mode (recorded with
/work/tfvenv; the values are small enough to write down here)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors, graph
from asyncflow.ops import data_flow_ops, nn_ops, scatter_nd_ops


def _run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


# -- queues -----------------------------------------------------------------------------------


def test_fifo_queue_is_pinned_to_the_host():
    # TF: FIFOQueue's NodeDef has device "/device:CPU:*"; GPUCompatibleFIFOQueue's none.
    with tf.Graph().as_default():
        assert tf.FIFOQueue(3, tf.float32).queue_ref.op.device == "/device:CPU:*"
        q = data_flow_ops.GPUCompatibleFIFOQueue(3, tf.float32)
        assert q.queue_ref.op.type == "FIFOQueueV2"
        assert q.queue_ref.op.device == ""
        with pytest.raises(NotImplementedError):
            q.enqueue_many([[1.0, 2.0]])
        with tf.Session() as sess:
            sess.run(q.enqueue(7.0))
            assert sess.run(q.dequeue()) == 7.0


def test_timed_out_dequeue_says_tf_words():
    # TF: DeadlineExceededError "Timed out waiting for notification".
    with tf.Graph().as_default():
        q = tf.FIFOQueue(3, tf.float32)
        with tf.Session() as sess:
            with pytest.raises(errors.DeadlineExceededError, match="Timed out waiting for notif"):
                sess.run(q.dequeue(), options=tf.RunOptions(timeout_in_ms=10))


def test_closing_the_session_cancels_a_blocked_dequeue():
    # TF: CancelledError "Dequeue operation was cancelled".
    with tf.Graph().as_default():
        q = tf.FIFOQueue(3, tf.float32)
        d = q.dequeue()
        sess = tf.Session()
        caught = []

        def blocked():
            try:
                sess.run(d)
            except errors.CancelledError as e:
                caught.append(str(e))

        t = threading.Thread(target=blocked)
        t.start()
        time.sleep(0.2)
        sess.close()
        t.join(10)
        assert caught and "was cancelled" in caught[0]


# -- TensorSpec -------------------------------------------------------------------------------


def test_tensor_spec():
    s = tf.TensorSpec([None, 3], tf.int32, "a")
    assert s.shape.as_list() == [None, 3] and s.dtype == tf.int32 and s.name == "a"
    assert s == tf.TensorSpec([None, 3], tf.int32, "a")
    assert s != tf.TensorSpec([2, 3], tf.int32, "a")
    with tf.Graph().as_default():
        assert s.is_compatible_with(tf.zeros([5, 3], tf.int32))
        assert not s.is_compatible_with(tf.zeros([5, 2], tf.int32))
        assert not s.is_compatible_with(tf.zeros([5, 3], tf.float32))


# -- scatter_nd family ------------------------------------------------------------------------


def test_scatter_nd_non_aliasing_add_values_and_gradients():
    # TF: [41, 2, 23, 4]; d/dx = dy; d/dupdates = gather_nd(dy) = [1, 3, 1].
    with tf.Graph().as_default():
        x = tf.constant([1.0, 2, 3, 4])
        u = tf.constant([10.0, 20, 30])
        y = scatter_nd_ops.scatter_nd_non_aliasing_add(x, [[0], [2], [0]], u)
        gx, gu = tf.gradients(y, [x, u], tf.constant([1.0, 2, 3, 4]))
        got = _run([y, gx, gu])
    np.testing.assert_array_equal(got[0], [41, 2, 23, 4])
    np.testing.assert_array_equal(got[1], [1, 2, 3, 4])
    np.testing.assert_array_equal(got[2], [1, 3, 1])
    with tf.Graph().as_default():  # bools combine by OR: [False, True, False, False]
        b = scatter_nd_ops.scatter_nd_non_aliasing_add(
            tf.zeros([4], tf.bool), [[1], [1], [3]], [True, False, False]
        )
        np.testing.assert_array_equal(_run(b), [False, True, False, False])


def test_tensor_scatter_extremum_gradient_is_shared_among_ties():
    # TF: max grads ([1, 0, 3, 2], [2, 0, 2, 2]); min grads ([1, 2, 0, 2], [0, 3, 2, 2]).
    with tf.Graph().as_default():
        x = tf.ones([4])
        ind = tf.constant([[1], [2], [3], [3]])
        up = tf.constant([2.0, 0.5, 1.0, 1.0])
        dy = tf.constant([1.0, 2, 3, 6])
        gmax = tf.gradients(tf.tensor_scatter_nd_max(x, ind, up), [x, up], dy)
        gmin = tf.gradients(tf.tensor_scatter_nd_min(x, ind, up), [x, up], dy)
        got = _run(gmax + gmin)
    for g, want in zip(got, ([1, 0, 3, 2], [2, 0, 2, 2], [1, 2, 0, 2], [0, 3, 2, 2])):
        np.testing.assert_allclose(g, want)


def test_scatter_nd_strings_and_empty_outputs():
    with tf.Graph().as_default():
        # TF: [b"b", b"a", b""]; duplicates concatenate (b"bb").
        got = _run(tf.scatter_nd([[1], [0]], tf.constant(["a", "b"]), [3]))
        assert list(got) == [b"b", b"a", b""]
        got = _run(tf.scatter_nd([[1], [1]], tf.constant(["b", "b"]), [2]))
        assert list(got) == [b"", b"bb"]
        # TF: ValueError "Indices and updates specified for empty input" at build time.
        with pytest.raises(ValueError, match="Indices and updates specified for empty input"):
            tf.scatter_nd(tf.zeros([2, 1], tf.int32), tf.zeros([2], tf.int32), [0])
        i = tf.placeholder(tf.int32)
        u = tf.placeholder(tf.int32)
        out = tf.scatter_nd(i, u, tf.constant([0, 3, 2]))
        with pytest.raises(errors.InvalidArgumentError, match="updates specified for empty"):
            _run(out, {i: np.zeros([2, 2, 2]), u: np.zeros([2, 2, 2])})
        # Nothing to write into an empty output is fine.
        assert _run(tf.scatter_nd(tf.zeros([0, 1], tf.int32), tf.zeros([0]), [0])).shape == (0,)


def test_scatter_nd_shape_errors_use_tf_words():
    with tf.Graph().as_default():
        z = tf.zeros
        with pytest.raises(
            ValueError,
            match=r"Dimensions \[0,2\) of indices\[shape=\[4,1,1\]\] "
            r"= \[4,1\] must match dimensions \[0,2\) of updates\[shape=\[4\]\]",
        ):
            tf.scatter_nd(z([4, 1, 1], tf.int32), z([4], tf.int32), [8])
        with pytest.raises(ValueError, match=r"Dimensions \[1,3\) of input\[shape="):
            tf.scatter_nd(z([2, 2, 1], tf.int32), z([2, 2], tf.int32), [2, 2, 2])
        with pytest.raises(ValueError, match="Shape must be at least rank 1 but is rank 0"):
            tf.tensor_scatter_nd_update(tf.zeros([]), [[0]], [0.22])
        # A scalar ref variable fails when run: "Output must be at least 1-D".
        v = tf.Variable(0.0)
        upd = tf.scatter_nd_update(v, [[0]], [0.22])
        with tf.Session() as sess:
            sess.run(v.initializer)
            with pytest.raises(errors.InvalidArgumentError, match="must be at least 1-D"):
                sess.run(upd)


# -- gather -----------------------------------------------------------------------------------


def test_gather_takes_int16_indices_and_batch_dims_none():
    with tf.Graph().as_default():
        # TF: [[5, 6], [1, 2]] and [[11, 10], [14, 13]].
        a = tf.gather([[1, 2], [3, 4], [5, 6]], tf.constant([2, 0], tf.int16))
        b = tf.gather([[10, 11, 12], [13, 14, 15]], [1, 0], axis=1, batch_dims=None)
        got = _run([a, b])
        np.testing.assert_array_equal(got[0], [[5, 6], [1, 2]])
        np.testing.assert_array_equal(got[1], [[11, 10], [14, 13]])
        with pytest.raises(TypeError, match="not in list of allowed values: int16, int32, int64"):
            tf.gather([0], 0.0)
        with pytest.raises(ValueError, match="Shape must be at least rank 2 but is rank 1"):
            tf.gather([0, 1, 2], 0, axis=1)


def test_float8_is_not_trainable():
    # TF's IsTrainable leaves the float8 types out: no gradient through their gather.
    with tf.Graph().as_default():
        p = tf.constant(np.ones([3, 2]), tf.dtypes.float8_e5m2)
        (g,) = tf.gradients(tf.gather(p, [0]), [p])
        assert g is None


def test_gather_gradient_needs_indices_rank_for_negative_batch_dims():
    with tf.Graph().as_default():
        p = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        i = tf.placeholder_with_default(tf.constant([[0], [1]]), shape=None)
        y = tf.gather(p, i, axis=1, batch_dims=-1)
        with pytest.raises(ValueError, match="unsupported to take the gradient of tf.gather"):
            tf.gradients(y, p)


# -- pooling ----------------------------------------------------------------------------------


def test_explicit_padding_in_1d_max_pool():
    # TF: [[[2], [3]]] for both max_pool1d and max_pool_v2 with [[0, 0], [0, 1], [0, 0]].
    with tf.Graph().as_default():
        x = tf.constant([[[1.0], [2.0], [3.0]]])
        a = tf.nn.max_pool1d(x, 2, 2, [[0, 0], [0, 1], [0, 0]])
        b = tf.nn.max_pool_v2(x, 2, 2, [[0, 0], [0, 1], [0, 0]])
        for got in _run([a, b]):
            np.testing.assert_array_equal(got, [[[2.0], [3.0]]])
    assert nn_ops.convert_padding([[0, 0], [1, 2], [3, 4], [0, 0]]) == (
        "EXPLICIT",
        [0, 0, 1, 2, 3, 4, 0, 0],
    )
    assert nn_ops.convert_padding("SAME") == ("SAME", [])


def _max_pool(x, paddings):
    attrs = {
        "ksize": [1, 2, 2, 1],
        "strides": [1, 2, 2, 1],
        "padding": "EXPLICIT",
        "explicit_paddings": paddings,
    }
    return graph.apply_op("MaxPool", [x], attrs).outputs[0]


def test_pooling_padding_errors_use_tf_words():
    with tf.Graph().as_default():
        x = tf.constant(np.arange(9.0).reshape(1, 3, 3, 1), tf.float32)
        with pytest.raises(ValueError, match="elements of explicit_paddings must be nonnegative"):
            _max_pool(x, [0, 0, -1, -1, -1, -1, 0, 0])
        with pytest.raises(ValueError, match="Nonzero explicit padding in the batch or depth"):
            _max_pool(x, [1, 1, 1, 1, 1, 1, 0, 0])
        # TF: InvalidArgumentError when run, "Right padding 2 needs to be smaller than the
        # window size 2".
        y = _max_pool(x, [0, 0, 0, 1, 0, 2, 0, 0])
        with pytest.raises(errors.InvalidArgumentError, match="Right padding 2 needs to be"):
            _run(y)
        with pytest.raises(ValueError, match="NCHW_VECT_C'` is not supported with explicit"):
            tf.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], [[0, 0], [0, 1], [0, 1], [0, 0]],
                           data_format="NCHW_VECT_C")  # fmt: skip
        with pytest.raises(
            ValueError, match="Explicit padding is not supported with an input tensor of rank 5"
        ):
            tf.nn.max_pool_v2(tf.zeros([1, 3, 3, 1, 1]), 2, 2, [[0, 0], [0, 1], [0, 1], [0, 0]],
                              data_format="NCHW")  # fmt: skip
        with pytest.raises(
            ValueError, match="Attr ksize has value 9223372036854775807 out of range for an int32"
        ):
            tf.nn.avg_pool(tf.ones([1, 1, 1, 1]), [1, 2**63 - 1, 1, 1], [1, 1, 1, 1], "SAME")
        with pytest.raises(ValueError, match="ksize must be a positive int32 value, got:-2147"):
            tf.nn.max_pool_with_argmax(tf.ones([1, 1, 1, 3]), [1, -(2**31), 4, 1], [1, 1, 1, 1],
                                       "SAME")  # fmt: skip


def test_depth_window_must_divide_the_depth():
    # TF: UnimplementedError when run.
    with tf.Graph().as_default():
        y = tf.nn.max_pool(tf.ones([1, 2, 2, 4]), [1, 1, 1, 3], [1, 1, 1, 3], "SAME")
        with pytest.raises(errors.UnimplementedError, match="evenly divide the input depth"):
            _run(y)


def test_max_pool_grad_of_a_nan_window_goes_to_its_first_position():
    # TF (CPU): [[5, 0], [0, 0]].
    with tf.Graph().as_default():
        x = tf.constant(np.full([1, 2, 2, 1], np.nan, np.float32))
        y = tf.nn.max_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
        (g,) = tf.gradients(y, x, tf.constant([[[[5.0]]]]))
        np.testing.assert_array_equal(_run(g).reshape(-1), [5, 0, 0, 0])


def test_avg_pool_grad_checks_the_grad_batch():
    # TF: InvalidArgumentError for a grad of batch 3 into an input of batch 1.
    with tf.Graph().as_default():
        attrs = {"ksize": [1, 1, 1, 1], "strides": [1, 1, 1, 2], "padding": "VALID"}
        g = graph.apply_op(
            "AvgPoolGrad", [tf.constant([1, 1, 3, 1]), tf.ones([3, 1, 3, 1])], attrs
        ).outputs[0]
        with pytest.raises(errors.InvalidArgumentError, match=r"grad shape to be \[1,1,3,1\]"):
            _run(g)


# -- reductions -------------------------------------------------------------------------------


def test_reduce_mean_of_narrow_ints_does_not_overflow():
    # TF: 100 (int8), 200 (uint8, 300 elements), -2 (int16: C++ division truncates).
    with tf.Graph().as_default():
        got = _run(
            [
                tf.reduce_mean(tf.constant([100, 100, 100], tf.int8)),
                tf.reduce_mean(tf.constant([200] * 300, tf.uint8)),
                tf.reduce_mean(tf.constant([-7, 2], tf.int16)),
            ]
        )
    assert [int(v) for v in got] == [100, 200, -2]
    assert got[0].dtype == np.int8 and got[1].dtype == np.uint8 and got[2].dtype == np.int16


def test_reduction_axes_checks_use_tf_words():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="Shape must be at most rank 1 but is rank 2"):
            tf.reduce_sum(tf.placeholder(tf.float32), [[1], [2]])
        y = tf.reduce_sum(tf.constant([1.0, 2.0]), tf.constant([0, 0]))
        with pytest.raises(errors.InvalidArgumentError, match="duplicate dimension: 0"):
            _run(y)
        # TF: reduce_all([], [0]) is True and reduce_any([], [0]) False (bool inputs).
        assert _run(tf.reduce_all([], [0])) and not _run(tf.reduce_any([], [0]))


def test_reduced_shape():
    from asyncflow.ops import reduction_ops

    # TF: [1, 10, 1] and [5, 3] (NumPy arrays for constant inputs).
    np.testing.assert_array_equal(reduction_ops.reduced_shape([10, 10, 10], [-1, 0]), [1, 10, 1])
    np.testing.assert_array_equal(reduction_ops.reduced_shape([5, 3], []), [5, 3])
    with tf.Graph().as_default():
        shape = tf.placeholder(tf.int32, [3])
        out = reduction_ops.reduced_shape(shape, [-1, 0])
        np.testing.assert_array_equal(_run(out, {shape: [4, 5, 6]}), [1, 5, 1])


# -- TensorArray ------------------------------------------------------------------------------


def test_tensor_array_errors_use_tf_words():
    from asyncflow.ops import tensor_array_ops

    ta_cls = tensor_array_ops.TensorArray
    with tf.Graph().as_default():
        w = ta_cls(tf.float32, size=3, infer_shape=False).write(0, [3.0]).write(1, [4.0])
        w = w.write(2, [[3.0]])
        with pytest.raises(errors.InvalidArgumentError, match="inconsistent shapes"):
            _run(w.concat())
        # TF: an element_shape is checked with infer_shape=False too.
        ta = ta_cls(tf.float32, size=2, infer_shape=False, element_shape=[None, 10, 20])
        ta = ta.write(0, tf.ones([50, 10, 20]))
        with pytest.raises(ValueError, match="Inconsistent shapes"):
            ta.write(1, tf.ones([1, 20, 20]))
        ta.mark_used()
        with pytest.raises(errors.InvalidArgumentError, match=r"\(2 vs. 1\)"):
            _run(ta_cls(tf.float32, size=2).split([1.0], [1]).flow)
        lengths = tf.placeholder(tf.int64)
        f = ta_cls(tf.float32, size=3).split([1.0, 2.0, 3.0], lengths).flow
        with pytest.raises(errors.InvalidArgumentError, match=r"lengths to be a vector"):
            _run(f, {lengths: 1})
        w0 = ta_cls(tf.float32, size=3).write(0, [[4.0, 5.0]])
        bad = graph.apply_op(
            "TensorArrayReadV3", [w0.handle, 0, w0.flow], {"dtype": tf.float64}
        ).outputs[0]
        with pytest.raises(errors.InvalidArgumentError, match="is float but Op requested dtype "
                           "double"):  # fmt: skip
            _run(bad)
    c = tf.constant
    with tf.Graph().as_default():
        src = tensor_array_ops._GetGradSource
        assert src(c(0, name="gradients")) == "gradients:0"
        assert (
            src(c(0, name="foo/gradients/bar/gradients_0/baz")) == "foo/gradients/bar/gradients_0"
        )
        with pytest.raises(ValueError):
            src(c(0, name="foo/bar"))


def test_batch_mat_mul_v3_mixed_types():
    # TF: [[5, 11], [11, 25]] as int32 (int8 inputs) and as bfloat16 (int8 x bfloat16).
    a = np.array([[1, 2], [3, 4]], dtype=np.int8)
    b = a.astype(tf.bfloat16.as_numpy_dtype)
    with tf.Graph().as_default():
        c = graph.apply_op("BatchMatMulV3", [a, a], {"adj_y": True, "Tout": tf.int32}).outputs[0]
        d = graph.apply_op("BatchMatMulV3", [a, b], {"adj_y": True, "Tout": tf.bfloat16})
        x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        e = graph.apply_op("BatchMatMulV3", [x, x], {"Tout": tf.float32}).outputs[0]
        got = _run([c, d.outputs[0], tf.gradients(e, x)[0]])
    assert got[0].dtype == np.int32
    np.testing.assert_array_equal(got[0], [[5, 11], [11, 25]])
    np.testing.assert_array_equal(got[1].astype(np.float32), [[5, 11], [11, 25]])
    np.testing.assert_allclose(got[2], [[7, 11], [9, 13]])  # dy = 1: 1 x^T + x^T 1


def test_concat_offset_and_indexed_slices_gradient_checks():
    from asyncflow.ops import array_ops

    with tf.Graph().as_default():
        off = array_ops.concat_offset(1, [tf.constant([[2, 3, 5]]), tf.constant([[2, 7, 5]])])
        with pytest.raises(errors.InvalidArgumentError, match="should be a vector"):
            _run(off)
        # TF: no IndexedSlices gradient through a negative axis of unknown rank.
        x1, x2 = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
        c = tf.gather(tf.concat([x1, x2], -2), [2, 0])
        with pytest.raises(ValueError, match="negative concat_dim when first value rank"):
            tf.gradients(c, [x1, x2])


def test_matmul_of_a_vector_is_matmul_with_tf_words():
    # TF's math_ops.matmul builds MatMul unless a rank is unknown or above 2, so a rank-1
    # operand is MatMul's shape error, in its C++ words (TF's MatMulInfixOperatorTest).
    with tf.Graph().as_default():
        m = tf.constant([[40.0, 50.0], [60.0, 70.0]])
        for v in (tf.constant([10.0, 20.0]), tf.constant(3.0)):
            with pytest.raises(ValueError, match=r"Shape must be rank 2 but is rank [01] for"):
                v @ m
            with pytest.raises(ValueError, match=r"Shape must be rank 2 but is rank [01] for"):
                tf.matmul(m, v)
        assert tf.matmul(m, m).op.type == "MatMul"
        assert tf.matmul(tf.placeholder(tf.float32), m).op.type == "BatchMatMulV2"
        assert tf.matmul(tf.zeros([3, 2, 2]), m).op.type == "BatchMatMulV2"


def test_tensor_array_write_errors_name_the_array_and_grads_aggregate_same_shapes():
    # TF (_testTensorArrayWriteGradientAddMultipleAdds): the array is "foo_<n>" in its errors;
    # a gradient array sums writes to one index but only of the same shape (no broadcast).
    from asyncflow.ops import tensor_array_ops

    with tf.Graph().as_default():
        ta = tensor_array_ops.TensorArray(
            dtype=tf.float32, tensor_array_name="foo", size=3, infer_shape=False
        )
        ta_grad = ta.grad("grad")
        w1 = ta.write(2, 3.0).write(2, 4.0)
        g = ta_grad.write(2, 3.0).write(2, 4.0).write(2, 5.0)
        assert _run(g.read(2)) == 12.0
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"^TensorArray foo_\d+: Could not "
            r"write to TensorArray index 2 because it has already been written",
        ):
            _run(w1.flow)
        wb = ta_grad.write(1, 1.0).write(1, [1.0])
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"TensorArray foo_\d+@grad: Could "
            r"not aggregate to TensorArray index 1 because the existing shape is "
            r"\[\] but the new input shape is \[1\]",
        ):
            _run(wb.flow)


def test_tensor_array_split_gradient_after_a_dynamic_write():
    # TF (testSkipEagerTensorArraySplitDynamic): the split's gradient concatenates as many
    # elements as the split wrote (TF's marked size), not the 4 the array grew to.
    from asyncflow.ops import tensor_array_ops

    with tf.Graph().as_default():
        ta = tensor_array_ops.TensorArray(dtype=tf.float32, size=3, dynamic_size=True)
        x = tf.constant([1.0, 2.0, 3.0])
        r = ta.split(x, [1, 1, 1]).write(3, [4.0]).concat()
        got = _run([r, tf.gradients(ys=[r], xs=[x])[0]])
    np.testing.assert_array_equal(got[0], [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(got[1], [1.0, 1.0, 1.0])
