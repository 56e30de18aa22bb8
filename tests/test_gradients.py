"""`gradients`: the backward search, aggregation, naming, stop_gradient, IndexedSlices."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow.gradients import AggregationMethod, gradients, hessians
from asyncflow.graph import apply_op
from asyncflow.indexed_slices import IndexedSlices, convert_to_tensor_or_indexed_slices
from asyncflow.ops.gradient_ops import prevent_gradient, stop_gradient
from asyncflow.registry import get_op_def
from asyncflow.test_util import GradientChecker, compute_gradient, compute_gradient_error


def run(sess, fetches, feed=None):
    return sess.run(fetches, feed or {})


def test_single_path_value(graph, sess):
    x = af.constant([1.0, 2.0, 3.0])
    y = af.reduce_sum(x * x)
    (gx,) = gradients(y, x)
    np.testing.assert_allclose(run(sess, gx), [2.0, 4.0, 6.0])


def test_returns_list_and_accepts_single_tensors(graph):
    x = af.constant(1.0)
    result = gradients(x * 2.0, x)
    assert isinstance(result, list) and len(result) == 1


def test_unconnected_is_none_or_zero(graph, sess):
    x = af.constant([1.0, 2.0])
    z = af.constant([3.0, 4.0])
    y = x * 2.0
    assert gradients(y, [x, z])[1] is None
    (gz,) = gradients(y, z, unconnected_gradients="zero")
    np.testing.assert_array_equal(run(sess, gz), [0.0, 0.0])


@pytest.mark.parametrize(
    "build,expected",
    [
        (lambda x: stop_gradient(x) * x, 2.0),  # one path stopped, the other counts
        (lambda x: x * stop_gradient(x * 3.0), 6.0),
        (lambda x: stop_gradient(x) * 5.0, None),
    ],
    ids=["stop_first", "stop_second", "all_stopped"],
)
def test_stop_gradient_op(graph, sess, build, expected):
    x = af.constant([2.0])
    (gx,) = gradients(build(x), x)
    if expected is None:
        assert gx is None
    else:
        np.testing.assert_allclose(run(sess, gx), [expected])


def test_stop_gradients_argument(graph, sess):
    a = af.constant(1.0)
    b = a * 2.0
    c = a + b
    ga, gb = gradients(c, [a, b], stop_gradients=[a, b])
    assert run(sess, [ga, gb]) == [1.0, 1.0]
    (ga_only,) = gradients(c, a, stop_gradients=[b])
    assert run(sess, ga_only) == 1.0
    (ga_full,) = gradients(c, a)
    assert run(sess, ga_full) == 3.0


def test_grad_ys_weights(graph, sess):
    x = af.constant([1.0, 2.0])
    y = x * 3.0
    (gx,) = gradients(y, x, grad_ys=af.constant([10.0, 100.0]))
    np.testing.assert_allclose(run(sess, gx), [30.0, 300.0])
    (gx2,) = gradients([y, x], x, grad_ys=[[1.0, 1.0], [5.0, 5.0]])
    np.testing.assert_allclose(run(sess, gx2), [8.0, 8.0])


@pytest.mark.parametrize(
    "make_grad_ys,error",
    [
        (lambda: [1.0, 2.0], ValueError),  # two grad_ys for one y
        (lambda: [af.constant([1, 2])], TypeError),  # an integer grad for a float y
        (lambda: [af.constant([1.0, 2.0, 3.0])], ValueError),  # wrong shape
    ],
)
def test_grad_ys_errors(graph, make_grad_ys, error):
    x = af.constant([1.0, 2.0])
    with pytest.raises(error):
        gradients(x * 2.0, x, grad_ys=make_grad_ys())


def test_multiple_paths_sum_with_add_n(graph, sess):
    x = af.constant(3.0)
    y = x * x + af.sin(x) + x
    (gx,) = gradients(y, x)
    assert gx.op.type == "AddN" and gx.op.name == "gradients/AddN"
    np.testing.assert_allclose(run(sess, gx), 2 * 3.0 + np.cos(3.0) + 1)


@pytest.mark.parametrize(
    "method", [None, AggregationMethod.ADD_N, AggregationMethod.EXPERIMENTAL_TREE, 2]
)
def test_aggregation_methods(graph, sess, method):
    x = af.constant(2.0)
    y = x * 1.0 + x * 2.0 + x * 3.0
    (gx,) = gradients(y, x, aggregation_method=method)
    assert run(sess, gx) == 6.0


def test_bad_aggregation_method(graph):
    x = af.constant(2.0)
    with pytest.raises(ValueError, match="Invalid aggregation_method"):
        gradients(x * 2.0, x, aggregation_method=7)


def test_integer_paths_give_none(graph):
    xi = af.placeholder(af.int32, [3])
    assert gradients(xi * 2, xi) == [None]
    xf = af.placeholder(af.float32, [3])
    y = af.cast(af.cast(xf, af.int32), af.float32) * xf
    (g,) = gradients(af.cast(af.cast(xf, af.int32), af.float32), xf)
    assert g is None
    assert gradients(y, xf)[0] is not None


def test_gather_gives_indexed_slices_and_densifies(graph, sess):
    params = af.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    y = af.reduce_sum(af.gather(params, [2, 0, 2]) * 2.0)
    (g,) = gradients(y, params)
    assert isinstance(g, IndexedSlices)
    assert g.dtype == af.float32 and g.graph is graph
    values, indices = run(sess, [g.values, g.indices])
    np.testing.assert_array_equal(indices, [2, 0, 2])
    np.testing.assert_allclose(values, np.full((3, 2), 2.0))
    dense = af.convert_to_tensor(g)
    assert dense.shape.as_list() == [3, 2]
    np.testing.assert_allclose(run(sess, dense), [[2.0, 2.0], [0.0, 0.0], [4.0, 4.0]])
    assert convert_to_tensor_or_indexed_slices(g) is g


def test_indexed_slices_from_two_gathers_concatenate(graph, sess):
    params = af.constant(np.arange(8.0).reshape(4, 2))
    y = af.reduce_sum(af.gather(params, [1])) + af.reduce_sum(af.gather(params, [3, 1]))
    (g,) = gradients(y, params)
    assert isinstance(g, IndexedSlices)
    np.testing.assert_array_equal(sorted(run(sess, g.indices)), [1, 1, 3])
    np.testing.assert_allclose(run(sess, af.convert_to_tensor(g))[:, 0], [0, 2, 0, 1])


def test_indexed_slices_mixed_with_dense_becomes_dense(graph, sess):
    params = af.constant(np.ones((3, 2)))
    y = af.reduce_sum(af.gather(params, [0])) + af.reduce_sum(params)
    (g,) = gradients(y, params)
    assert isinstance(g, af.Tensor)
    np.testing.assert_allclose(run(sess, g), [[2, 2], [1, 1], [1, 1]])


def test_indexed_slices_conversion_errors(graph):
    s = IndexedSlices(af.constant([[1.0]]), af.constant([0]))
    with pytest.raises(ValueError, match="dense_shape"):
        af.convert_to_tensor(s)
    s2 = IndexedSlices(af.constant([[1.0]]), af.constant([0]), af.constant([2, 1]))
    with pytest.raises(ValueError):
        af.convert_to_tensor(s2, dtype=af.int32)


def test_gradient_op_names(graph):
    x = af.placeholder(af.float32, [2], name="x")
    with af.name_scope("layer"):
        y = af.sin(x, name="s")
    (gx,) = gradients(y, x)
    assert gx.op.name.startswith("gradients/layer/s_grad/")
    names = {op.name for op in graph.get_operations()}
    assert {"gradients/Shape", "gradients/grad_ys_0", "gradients/grad_ys_0/Const"} <= names
    (gx2,) = gradients(y, x, name="my_grads")
    assert gx2.op.name.startswith("my_grads/layer/s_grad/")
    (gx3,) = gradients(y, x)
    assert gx3.op.name.startswith("gradients_1/")


def test_colocate_gradients_with_ops(graph):
    x = af.placeholder(af.float32, [2], name="x")
    y = af.sin(x, name="s")
    (gx,) = gradients(y, x, colocate_gradients_with_ops=True)
    assert b"loc:@s" in gx.op.colocation_groups()
    (gx2,) = gradients(y, x)
    assert b"loc:@s" not in gx2.op.colocation_groups()


def test_gate_gradients_tuples_the_grads(graph, sess):
    a = af.constant([[1.0, 2.0]])
    b = af.constant([[3.0], [4.0]])
    y = af.matmul(a, b)
    ga, gb = gradients(y, [a, b], gate_gradients=True)
    assert ga.op.type == "Identity" and ga.op.control_inputs
    assert gb.op.control_inputs
    np.testing.assert_allclose(run(sess, ga), [[3.0, 4.0]])
    np.testing.assert_allclose(run(sess, gb), [[1.0], [2.0]])


def test_variables_as_xs(graph, sess):
    v = af.Variable([1.0, 2.0], name="v")
    w = af.Variable(3.0, name="w")
    y = af.reduce_sum(v * v) * w
    gv, gw = gradients(y, [v, w])
    run(sess, af.global_variables_initializer())
    np.testing.assert_allclose(run(sess, gv), [6.0, 12.0])
    assert run(sess, gw) == 5.0


def test_op_without_gradient_raises_lookup_error(graph, monkeypatch):
    op_def = get_op_def("TestFailOp")
    monkeypatch.setattr(op_def, "grad_fn", None)
    monkeypatch.setattr(op_def, "not_differentiable", False)
    x = af.placeholder(af.float32, [2])
    y = apply_op("TestFailOp", [x]).outputs[0]
    with pytest.raises(LookupError, match="No gradient defined for operation"):
        gradients(y * 2.0, x)
    # Off the path between xs and ys it does not matter.
    z = af.placeholder(af.float32, [2])
    assert gradients(y + z, z)[0] is not None


def test_prevent_gradient_raises(graph):
    x = af.placeholder(af.float32, [2])
    y = prevent_gradient(x, message="no way")
    with pytest.raises(LookupError, match="no way"):
        gradients(y, x)


def test_not_differentiable_op_contributes_nothing(graph, sess):
    x = af.constant([1.0, 5.0, 3.0])
    idx = af.argmax(x)
    y = af.cast(idx, af.float32) + af.reduce_sum(x)
    (gx,) = gradients(y, x)
    np.testing.assert_allclose(run(sess, gx), [1.0, 1.0, 1.0])


def test_multi_output_op_unused_output_gets_zero(graph, sess):
    x = af.constant([1.0, 2.0, 3.0, 4.0])
    a, _ = af.split(x, 2)
    (gx,) = gradients(af.reduce_sum(a * 2.0), x)
    np.testing.assert_allclose(run(sess, gx), [2.0, 2.0, 0.0, 0.0])


def test_y_depends_on_another_y(graph, sess):
    x = af.constant(2.0)
    y1 = x * 3.0
    y2 = y1 * y1
    (gx,) = gradients([y1, y2], x)
    assert run(sess, gx) == 3.0 + 2 * 6.0 * 3.0


def test_hessians(graph, sess):
    x = af.constant([1.0, 2.0])
    y = af.reduce_sum(x * x * x)
    (h,) = hessians(y, x)
    np.testing.assert_allclose(run(sess, h), np.diag([6.0, 12.0]))


def test_runtime_broadcast_gradient(graph, sess):
    x = af.placeholder(af.float64, [None, None])
    b = af.placeholder(af.float64, [None])
    y = af.reduce_sum(x * b)
    gx, gb = gradients(y, [x, b])
    xv, bv = np.arange(6.0).reshape(2, 3), np.array([1.0, 2.0, 3.0])
    got = run(sess, [gx, gb], {x: xv, b: bv})
    np.testing.assert_allclose(got[0], np.tile(bv, (2, 1)))
    np.testing.assert_allclose(got[1], xv.sum(0))


def test_broadcast_gradient_args_rejects_bad_shapes(graph, sess):
    s0 = af.placeholder(af.int32, [None])
    r0, _ = apply_op("BroadcastGradientArgs", [s0, af.constant([3])]).outputs
    with pytest.raises(af.errors.InvalidArgumentError, match="Incompatible shapes"):
        sess.run(r0, {s0: [2]})


def test_unsorted_segment_sum_rejects_out_of_range(graph, sess):
    from asyncflow.ops.gradient_ops import unsorted_segment_sum

    ids = af.placeholder(af.int32, [2])
    y = unsorted_segment_sum(af.constant([1.0, 2.0]), ids, 2)
    np.testing.assert_allclose(sess.run(y, {ids: [1, 1]}), [0.0, 3.0])
    if af.test.is_gpu_available():  # TF's GPU kernel drops the row instead
        np.testing.assert_allclose(sess.run(y, {ids: [0, 5]}), [1.0, 0.0])
        return
    with pytest.raises(af.errors.InvalidArgumentError, match="out of range"):
        sess.run(y, {ids: [0, 5]})


def test_compute_gradient_and_error(graph, sess):
    x = af.placeholder(af.float64, [2, 3])
    y = af.reduce_sum(af.square(x), axis=1)
    with sess.as_default():
        theoretical, numerical = compute_gradient(x, [2, 3], y, [2], delta=1e-6)
        assert theoretical.shape == numerical.shape == (6, 2)
        np.testing.assert_allclose(theoretical, numerical, atol=1e-6)
        assert compute_gradient_error(x, [2, 3], y, [2], delta=1e-6) < 1e-6
        w = af.placeholder(af.float64, [3])
        z = af.reduce_sum(x * w)
        pairs = compute_gradient([x, w], [[2, 3], [3]], z, [], delta=1e-6)
        assert len(pairs) == 2 and pairs[1][0].shape == (3, 1)


def test_compute_gradient_shape_mismatch(graph, sess):
    x = af.placeholder(af.float64, [2])
    with sess.as_default(), pytest.raises(ValueError, match="not compatible"):
        compute_gradient(x, [3], x * 2.0, [3])


def test_gradient_checker_detects_a_wrong_gradient():
    checker = GradientChecker(delta=1e-6)
    checker.assert_close(lambda a: af.sin(a), [np.array([0.1, 0.2])])
    with pytest.raises(AssertionError, match="max Jacobian error"):
        # stop_gradient hides the dependency: the theoretical Jacobian is zero.
        checker.assert_close(lambda a: stop_gradient(a) * 1.0, [np.array([0.1, 0.2])])


def test_gradients_of_a_broadcast_against_an_empty_dimension():
    # A size-0 dimension is a real one: [0, 0] * scalar keeps x's gradient [0, 0] (it was
    # summed to a scalar and failed to reshape), and [1, 3] * [0, 3] sums x's gradient
    # over the empty batch: zeros [1, 3] (TF 2.21 gives the same).
    with af.Graph().as_default():
        e = af.constant(np.zeros((0, 0)))
        c = af.constant(2.0, af.float64)
        x, y = af.constant(np.ones((1, 3))), af.constant(np.ones((0, 3)))
        ge = af.gradients(af.reduce_sum(e * c), [e])[0]
        gx, gy = af.gradients(af.reduce_sum(x * y), [x, y])
        assert ge.shape.as_list() == [0, 0] and gx.shape.as_list() == [1, 3]
        with af.Session() as sess:
            got_e, got_x, got_y = sess.run([ge, gx, gy])
    assert got_e.shape == (0, 0) and got_y.shape == (0, 3)
    assert got_x.tolist() == [[0.0, 0.0, 0.0]]
