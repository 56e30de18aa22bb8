"""TF1's control-flow and autodiff edge cases (issue 18, items 1-6).

Each test states what TF 2.21 does in `tf.compat.v1` graph mode with v1 control flow
(`tf.disable_v2_behavior()`: Switch/Merge conds and loops, reference variables), as
recorded with /work/tfvenv; the values are small enough to write down here.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf

# -- item 1: assigns inside a cond branch ----------------------------------------------------


def test_assign_in_cond_branches_updates_the_variable():
    # TF: (5.0, 5.0) with pred True, then (6.0, 6.0) with pred False.
    with tf.Graph().as_default():
        v = tf.Variable(1.0)
        p = tf.placeholder(tf.bool, [])
        r = tf.cond(p, lambda: tf.assign(v, 5.0), lambda: tf.assign_add(v, 1.0))
        with tf.Session() as sess:
            sess.run(v.initializer)
            assert sess.run(r, {p: True}) == 5.0
            assert sess.run(v) == 5.0
            assert sess.run(r, {p: False}) == 6.0
            assert sess.run(v) == 6.0


def test_assign_as_control_dependency_and_scatter_update_in_cond():
    # TF: [3, 4] (the branch reads after its assign), then [9, 4] from scatter_update.
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0])
        p = tf.placeholder(tf.bool, [])

        def assign_then_read():
            with tf.control_dependencies([tf.assign(v, [3.0, 4.0])]):
                return tf.identity(v)

        r = tf.cond(p, assign_then_read, lambda: tf.identity(v))
        r2 = tf.cond(p, lambda: tf.scatter_update(v, [0], [9.0]), lambda: tf.identity(v))
        with tf.Session() as sess:
            sess.run(v.initializer)
            np.testing.assert_array_equal(sess.run(r, {p: True}), [3.0, 4.0])
            np.testing.assert_array_equal(sess.run(r2, {p: True}), [9.0, 4.0])
            np.testing.assert_array_equal(sess.run(r2, {p: False}), [9.0, 4.0])


def test_untaken_assign_branch_leaves_the_variable_alone():
    # TF: the false branch runs; the true branch's assign never does: v stays 1.
    with tf.Graph().as_default():
        v = tf.Variable(1.0)
        p = tf.placeholder(tf.bool, [])
        r = tf.cond(p, lambda: tf.assign(v, 5.0), lambda: tf.constant(0.0))
        with tf.Session() as sess:
            sess.run(v.initializer)
            assert sess.run(r, {p: False}) == 0.0
            assert sess.run(v) == 1.0


# -- item 2: a loop condition reading a variable its body updates ----------------------------


def test_while_condition_sees_the_bodys_assign_add():
    # TF: the loop ends after 5 iterations: (5, 5).
    with tf.Graph().as_default():
        v = tf.Variable(0)

        def body(i):
            with tf.control_dependencies([tf.assign_add(v, 1)]):
                return i + 1

        r = tf.while_loop(lambda i: tf.less(v, 5), body, [tf.constant(0)])
        with tf.Session() as sess:
            sess.run(v.initializer)
            assert sess.run(r) == 5
            assert sess.run(v) == 5


def test_while_body_reads_the_variable_each_iteration():
    # TF, one iteration at a time: acc sums v after each increment: 1 + 2 + 3 = 6, v
    # ends at 3.  (With parallel iterations TF's reads race the next increments.)
    with tf.Graph().as_default():
        v = tf.Variable(0)

        def body(i, acc):
            with tf.control_dependencies([tf.assign_add(v, 1)]):
                i = i + 1
            with tf.control_dependencies([i]):
                return i, acc + v

        _, acc = tf.while_loop(
            lambda i, acc: i < 3, body, [tf.constant(0), tf.constant(0)], parallel_iterations=1
        )
        with tf.Session() as sess:
            sess.run(v.initializer)
            assert sess.run(acc) == 6
            assert sess.run(v) == 3


def test_loop_reading_a_variable_still_differentiates_to_it():
    # TF: d/dw of w**3, a loop of three multiplications by the variable w: 6.75.
    with tf.Graph().as_default():
        w = tf.Variable(np.float64(1.5))
        _, y = tf.while_loop(
            lambda i, y: i < 3, lambda i, y: (i + 1, y * w), [0, tf.constant(1.0, tf.float64)]
        )
        (g,) = tf.gradients(y, [w])
        with tf.Session() as sess:
            sess.run(w.initializer)
            np.testing.assert_allclose(sess.run(g), 3 * 1.5**2)


# -- item 3: the gradient of a reduction of a scalar -----------------------------------------


@pytest.mark.parametrize(
    "reduce", ["reduce_sum", "reduce_mean", "reduce_prod", "reduce_max", "reduce_min"]
)
def test_gradient_of_reducing_a_scalar(reduce):
    # TF: 1.0 for each; here also against the finite difference of reduce(x * x).
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [])
        (g1,) = tf.gradients(getattr(tf, reduce)(x), x)
        y = getattr(tf, reduce)(x * x)
        (g2,) = tf.gradients(y, x)
        with tf.Session() as sess:
            assert sess.run(g1, {x: 3.0}) == 1.0
            eps = 1e-6
            fd = (sess.run(y, {x: 3.0 + eps}) - sess.run(y, {x: 3.0 - eps})) / (2 * eps)
            np.testing.assert_allclose(sess.run(g2, {x: 3.0}), fd, rtol=1e-6)


# -- item 4: IndexedSlices and SparseTensor through cond, while_loop, switch, merge, tuple ---


def _slices(values, indices, shape=(3, 2)):
    return tf.IndexedSlices(tf.constant(values), tf.constant(indices), tf.constant(list(shape)))


def _sparse(indices, values, shape=(3, 2)):
    return tf.SparseTensor(indices=indices, values=values, dense_shape=list(shape))


def test_cond_carries_indexed_slices_and_sparse_tensors():
    # TF: cond returns an IndexedSlices / SparseTensor; fetched as their *Value types.
    with tf.Graph().as_default():
        p = tf.placeholder(tf.bool, [])
        a, b = _slices([[1.0, 2.0]], [1]), _slices([[5.0, 6.0]], [0])
        r = tf.cond(p, lambda: a, lambda: b)
        s = tf.cond(
            p, lambda: _sparse([[0, 1], [2, 0]], [1.0, 2.0]), lambda: _sparse([[1, 1]], [7.0])
        )
        assert isinstance(r, tf.IndexedSlices) and isinstance(s, tf.SparseTensor)
        with tf.Session() as sess:
            got = sess.run(r, {p: True})
            assert isinstance(got, tf.IndexedSlicesValue)
            assert got.values.tolist() == [[1.0, 2.0]] and got.indices.tolist() == [1]
            assert list(got.dense_shape) == [3, 2]
            got = sess.run(r, {p: False})
            assert got.values.tolist() == [[5.0, 6.0]] and got.indices.tolist() == [0]
            got = sess.run(s, {p: True})
            assert isinstance(got, tf.SparseTensorValue)
            assert got.indices.tolist() == [[0, 1], [2, 0]] and got.values.tolist() == [1.0, 2.0]
            got = sess.run(s, {p: False})
            assert got.indices.tolist() == [[1, 1]] and got.values.tolist() == [7.0]


def test_cond_rejects_indexed_slices_against_a_tensor():
    # TF: ValueError "Incompatible return values of 'true_fn' and 'false_fn': The two
    # structures don't have the same nested structure." (no densifying).
    with tf.Graph().as_default():
        p = tf.placeholder(tf.bool, [])
        with pytest.raises(ValueError, match="same nested structure"):
            tf.cond(p, lambda: _slices([[1.0, 2.0]], [1]), lambda: tf.zeros([3, 2]))


def test_while_loop_carries_indexed_slices_and_sparse_tensors():
    # TF: values doubled three times: [[8, 16]], indices unchanged.
    with tf.Graph().as_default():
        _, r = tf.while_loop(
            lambda i, x: i < 3,
            lambda i, x: (i + 1, tf.IndexedSlices(x.values * 2.0, x.indices, x.dense_shape)),
            [0, _slices([[1.0, 2.0]], [1])],
        )
        _, s = tf.while_loop(
            lambda i, x: i < 3,
            lambda i, x: (i + 1, tf.SparseTensor(x.indices, x.values * 2.0, x.dense_shape)),
            [0, _sparse([[0, 1], [2, 0]], [1.0, 2.0])],
        )
        assert isinstance(r, tf.IndexedSlices) and isinstance(s, tf.SparseTensor)
        with tf.Session() as sess:
            got = sess.run(r)
            assert got.values.tolist() == [[8.0, 16.0]] and got.indices.tolist() == [1]
            got = sess.run(s)
            assert got.values.tolist() == [8.0, 16.0]
            assert got.indices.tolist() == [[0, 1], [2, 0]]


def test_while_loop_shape_invariants_of_composites():
    # TF: an IndexedSlices' invariant is its values' ([None, 2] lets the rows grow;
    # indices become [None]); a SparseTensor's is its dense_shape's ([2]: rank 2).
    # Without an invariant, rows that grow raise ValueError ("enters the loop with shape").
    def grow_slices(i, x):
        values = tf.concat([x.values, x.values], 0)
        return i + 1, tf.IndexedSlices(values, tf.concat([x.indices, x.indices], 0), x.dense_shape)

    def grow_sparse(i, x):
        indices = tf.concat([x.indices, x.indices], 0)
        return i + 1, tf.SparseTensor(indices, tf.concat([x.values, x.values], 0), x.dense_shape)

    with tf.Graph().as_default():
        _, r = tf.while_loop(
            lambda i, x: i < 2,
            grow_slices,
            [0, _slices([[1.0, 2.0]], [1])],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 2])],
        )
        assert r.values.shape.as_list() == [None, 2] and r.indices.shape.as_list() == [None]
        _, s = tf.while_loop(
            lambda i, x: i < 2,
            grow_sparse,
            [0, _sparse([[0, 1]], [1.0])],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape([2])],
        )
        assert s.indices.shape.as_list() == [None, 2] and s.values.shape.as_list() == [None]
        with tf.Session() as sess:
            got = sess.run(r)
            assert got.values.tolist() == [[1.0, 2.0]] * 4 and got.indices.tolist() == [1] * 4
            got = sess.run(s)
            assert got.values.tolist() == [1.0] * 4 and got.indices.tolist() == [[0, 1]] * 4
        with pytest.raises(ValueError, match="enters the loop with shape"):
            tf.while_loop(lambda i, x: i < 2, grow_slices, [0, _slices([[1.0, 2.0]], [1])])
        with pytest.raises(ValueError, match="Expected a shape with 1 dimension"):
            tf.while_loop(
                lambda i, x: i < 2,
                grow_sparse,
                [0, _sparse([[0, 1]], [1.0])],
                shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 2])],
            )


def test_switch_and_merge_of_composites():
    # TF: switch and merge keep the types; an IndexedSlices merged with a Tensor turns
    # the Tensor into IndexedSlices of all its rows; a SparseTensor with a Tensor is a
    # TypeError.
    from asyncflow.ops.control_flow_prims import merge, switch

    with tf.Graph().as_default():
        p = tf.placeholder(tf.bool, [])
        f, t = switch(_slices([[1.0, 2.0]], [1]), p)
        f2, t2 = switch(_sparse([[0, 1]], [1.0]), p)
        dense = tf.constant([[7.0, 8.0], [9.0, 10.0]])
        _, d_t = switch(dense, p)
        assert isinstance(t, tf.IndexedSlices) and isinstance(f2, tf.SparseTensor)
        m, index = merge([t, f])
        m2, _ = merge([t2, f2])
        mixed, _ = merge([f, d_t])
        assert isinstance(m, tf.IndexedSlices) and isinstance(m2, tf.SparseTensor)
        assert isinstance(mixed, tf.IndexedSlices)
        with pytest.raises(TypeError):
            merge([_sparse([[0, 1]], [1.0]), dense])
        with tf.Session() as sess:
            got, i = sess.run([m, index], {p: False})
            assert got.values.tolist() == [[1.0, 2.0]] and i == 1
            assert sess.run(t, {p: True}).indices.tolist() == [1]
            assert sess.run(m2, {p: True}).values.tolist() == [1.0]
            got = sess.run(mixed, {p: True})
            assert got.values.tolist() == [[7.0, 8.0], [9.0, 10.0]]
            assert got.indices.tolist() == [0, 1] and list(got.dense_shape) == [2, 2]


def test_tuple_of_composites():
    # TF: tuple returns IndexedSlices, SparseTensor and Tensor, each gated by all.
    with tf.Graph().as_default():
        a, b, c = tf.tuple([_slices([[1.0, 2.0]], [1]), _sparse([[0, 1]], [1.0]), 1.0])
        assert isinstance(a, tf.IndexedSlices) and isinstance(b, tf.SparseTensor)
        assert isinstance(c, tf.Tensor)
        gate = a.values.op.control_inputs[0]
        assert b.values.op.control_inputs == [gate] and c.op.control_inputs == [gate]
        with tf.Session() as sess:
            got_a, got_b, got_c = sess.run([a, b, c])
            assert got_a.values.tolist() == [[1.0, 2.0]] and got_b.values.tolist() == [1.0]
            assert got_c == 1.0


# -- item 5: graph checks ---------------------------------------------------------------


def test_control_dependency_on_a_fed_placeholder():
    # TF: the edge stays (control_inputs == ['Placeholder']); fed, the step runs (2.0);
    # not fed, InvalidArgumentError.
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [])
        with tf.control_dependencies([x]):
            y = tf.constant(2.0)
        assert [c.name for c in y.op.control_inputs] == ["Placeholder"]
        with tf.Session() as sess:
            assert sess.run(y, {x: 1.0}) == 2.0
            with pytest.raises(tf.errors.InvalidArgumentError):
                sess.run(y)


def test_variable_made_in_a_cond_branch_is_initialised_outside_it():
    # TF: the initializer (Assign of the VariableV2 and its initial value) is in no
    # control-flow context, so global_variables_initializer needs no feed; (4.0, 0.0).
    with tf.Graph().as_default():
        p = tf.placeholder(tf.bool, [])
        r = tf.cond(p, lambda: tf.Variable(3.0, name="v_in_cond") + 1.0, lambda: tf.constant(0.0))
        (v,) = tf.global_variables()
        assert v.op.name == "cond/v_in_cond"
        init = v.initializer
        assert init.type == "Assign" and init._control_flow_context is None
        assert sorted(i.op.type for i in init.inputs) == ["Const", "VariableV2"]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert sess.run(r, {p: True}) == 4.0
            assert sess.run(r, {p: False}) == 0.0


def test_variable_in_a_while_body():
    # TF: an initial value from inside the loop is a ValueError; a lambda initializer
    # (or a Python value) is lifted out of the loop and works: 2 + 2 + 2 = 6.
    with tf.Graph().as_default():

        def body(i):
            tf.Variable(tf.cast(i, tf.float32) * 2.0)
            return i + 1

        with pytest.raises(ValueError, match="Initializer for variable while/Variable/ is from"):
            tf.while_loop(lambda i: i < 3, body, [0])
    with tf.Graph().as_default():
        p = tf.placeholder(tf.bool, [])
        x = tf.constant(1.0)
        with pytest.raises(ValueError, match="inside a control-flow construct"):
            tf.cond(p, lambda: tf.Variable(x * 2.0) + 1.0, lambda: tf.constant(0.0))
    with tf.Graph().as_default():
        made = []

        def body(i):
            made.append(tf.Variable(lambda: tf.constant(2.0)))
            return i + tf.cast(made[-1], tf.int32)

        r = tf.while_loop(lambda i: i < 5, body, [0])
        assert made[0].initializer.name == "while/Variable/Assign"
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert sess.run(r) == 6


def _loop_with_inner():
    inner = []

    def body(i):
        inner.append(i * 2)
        return i + 1

    return tf.while_loop(lambda i: i < 3, body, [0]), inner[0]


def test_while_body_tensor_used_outside_its_loop():
    # TF: ValueError "Cannot use 'while/mul' as input to 'add' because 'while/mul' is in
    # a while loop."; in another loop: "... because they are in different while loops.";
    # as a control dependency it is accepted.
    with tf.Graph().as_default():
        _, inner = _loop_with_inner()
        with pytest.raises(ValueError, match="Cannot use 'while/mul' as input to 'add' because"):
            inner + 1
        with pytest.raises(ValueError, match="different while loops"):
            tf.while_loop(lambda j: j < 10, lambda j: j + inner, [0])
        with tf.control_dependencies([inner]):
            tf.constant(1)


def test_fetching_inside_a_loop_or_cond_raises():
    # TF: InaccessibleTensorError (a ValueError): "Operation while/mul has been marked as
    # not fetchable. ..."; the same for an op inside a cond branch; the loop's result and
    # the cond's Merge are fetchable.
    with tf.Graph().as_default() as g:
        r, inner = _loop_with_inner()
        p = tf.placeholder(tf.bool, [])
        branch = []

        def t():
            branch.append(tf.constant(1.0) * 2.0)
            return branch[0]

        c = tf.cond(p, t, lambda: tf.constant(0.0))
        with tf.Session() as sess:
            with pytest.raises(ValueError, match="Operation while/mul has been marked as not"):
                sess.run([r, inner])
            with pytest.raises(ValueError, match="Operation cond/mul has been marked"):
                sess.run(branch[0], {p: True})
            assert sess.run(r) == 3 and sess.run(c, {p: True}) == 2.0
        assert not g.is_fetchable(inner) and not g.is_feedable(inner)
        assert g.is_fetchable(r) and g.is_feedable(r)
        assert not g.is_fetchable(branch[0]) and g.is_feedable(branch[0])


def test_prevent_feeding_and_fetching():
    # TF: [True, True, True] before; after prevent_feeding(x), prevent_fetching(y.op):
    # x not feedable, y and y.op not fetchable, y still feedable; running y fed with x
    # reports the feed first: "ValueError: Tensor Placeholder:0 may not be fed."; a
    # fetch of y alone: InaccessibleTensorError "Operation add has been marked as not
    # fetchable."
    from asyncflow.graph import InaccessibleTensorError

    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [])
        y = x + 1.0
        z = tf.placeholder(tf.float32, [])
        assert g.is_feedable(x) and g.is_fetchable(y) and g.is_fetchable(y.op)
        g.prevent_feeding(x)
        g.prevent_fetching(y.op)
        assert not g.is_feedable(x) and not g.is_fetchable(y) and not g.is_fetchable(y.op)
        assert g.is_feedable(y)
        with tf.Session() as sess:
            with pytest.raises(ValueError, match="Tensor Placeholder:0 may not be fed."):
                sess.run(y, {x: 1.0})
            with pytest.raises(InaccessibleTensorError, match="Operation add has been marked"):
                sess.run(y.op, {z: 1.0})
            assert sess.run(y + 1.0, {y: 5.0}) == 6.0


# -- item 6: grad_ys scopes, complex Jacobians, TensorArray errors, concat([]) --------------


def test_grad_ys_made_outside_the_gradients_scope_reach_a_tensor_array():
    # TF: dx == dy == [[2.42]] (gradients wraps each grad_y in an Identity of its own
    # scope, where the TensorArray gradient looks for it).
    with tf.Graph().as_default():
        x = tf.constant([[1.42]])
        dy = tf.constant([[2.42]])
        ta = tf.TensorArray(tf.float32, size=1, element_shape=[1]).write(0, x[0])
        (dx,) = tf.gradients(ys=[ta.stack()], xs=[x], grad_ys=[dy])
        with tf.Session() as sess:
            np.testing.assert_allclose(sess.run(dx), [[2.42]])


def test_grad_ys_kinds_and_names():
    # TF: an IndexedSlices grad_y passes through identity unchanged (values [2.], indices
    # [0], no dense_shape); name="" builds at the root ("AddN:0"), None under
    # "gradients"; a wrong count is "Length mismatch. Passed 2 grad_ys for 1 ys".
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32)
        dy = tf.IndexedSlices(tf.placeholder(tf.float32), tf.placeholder(tf.int32))
        (dx,) = tf.gradients(tf.identity(x), x, grad_ys=dy)
        assert isinstance(dx, tf.IndexedSlices)
        with tf.Session() as sess:
            got = sess.run(dx, {x: [1.0], dy.indices: [0], dy.values: [2.0]})
            assert got.values.tolist() == [2.0] and got.indices.tolist() == [0]
            assert got.dense_shape is None
    with tf.Graph().as_default():
        x = tf.constant([1.0, 2.0])
        y = x * x
        gy = tf.constant([3.0, 4.0])
        (g0,) = tf.gradients(y, x, grad_ys=gy, name="")
        (g1,) = tf.gradients(y, x, grad_ys=gy, name=None)
        assert g0.name == "AddN:0" and g1.name == "gradients/AddN:0"
        with tf.Session() as sess:
            np.testing.assert_allclose(sess.run([g0, g1]), [[6.0, 16.0]] * 2)
        with pytest.raises(ValueError, match="Length mismatch. Passed 2 grad_ys for 1 ys"):
            tf.gradients(y, x, grad_ys=[gy, gy])


def test_compute_gradient_of_complex_tensors():
    # TF: a complex number counts as two reals (real, imaginary), the Jacobian is real:
    # d(x*x) at [1+2j, 3-1j] is block-diagonal [[2, 4], [-4, 2]], [[6, -2], [2, 6]]
    # (4x4, float64); for complex64, x * (2-1j) at [1+2j] gives [[2, -1], [1, 2]] (float32).
    with tf.Graph().as_default(), tf.Session():
        x = tf.placeholder(tf.complex128, [2])
        theoretical, numerical = tf.test.compute_gradient(
            x, [2], x * x, [2], x_init_value=np.array([1 + 2j, 3 - 1j]), delta=1e-6
        )
        want = [[2, 4, 0, 0], [-4, 2, 0, 0], [0, 0, 6, -2], [0, 0, 2, 6]]
        assert theoretical.dtype == np.float64 and theoretical.shape == (4, 4)
        np.testing.assert_allclose(theoretical, want, atol=1e-9)
        np.testing.assert_allclose(numerical, want, atol=1e-6)
    with tf.Graph().as_default(), tf.Session():
        x = tf.placeholder(tf.complex64, [1])
        y = x * tf.constant([2 - 1j], tf.complex64)
        theoretical, numerical = tf.test.compute_gradient(
            x, [1], y, [1], x_init_value=np.array([1 + 2j])
        )
        assert theoretical.dtype == np.float32
        np.testing.assert_allclose(theoretical, [[2, -1], [1, 2]], atol=1e-6)
        np.testing.assert_allclose(numerical, [[2, -1], [1, 2]], atol=1e-2)


def test_tensor_array_shapes_and_errors():
    # TF: element_shape is checked at build time ("Inconsistent shapes: saw (3,) but
    # expected (2,)", also for unstack); concat/stack of a zero-size array whose
    # element shape is not fully known is UnimplementedError; concat of scalars is
    # InvalidArgumentError; gradients have x's shape.
    with tf.Graph().as_default():
        ta = tf.TensorArray(tf.float32, size=2, element_shape=[2])
        with pytest.raises(ValueError, match=r"Inconsistent shapes: saw \(3,\) but expected"):
            ta.write(0, [1.0, 2.0, 3.0])
        with pytest.raises(ValueError, match="Inconsistent shapes"):
            ta.unstack([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
        empty = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        empty_known = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[3, 2])
        scalars = tf.TensorArray(tf.float32, size=2).write(0, 1.0).write(1, 2.0)
        x = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        (g,) = tf.gradients(tf.TensorArray(tf.float32, size=3).unstack(x).read(1) * 2.0, x)
        assert g.shape.as_list() == [3, 2]
        with tf.Session() as sess:
            with pytest.raises(tf.errors.UnimplementedError, match="size zero"):
                sess.run(empty.concat())
            with pytest.raises(tf.errors.UnimplementedError, match="size zero"):
                sess.run(empty.stack())
            assert sess.run(empty_known.concat()).shape == (0, 2)
            assert sess.run(empty_known.stack()).shape == (0, 3, 2)
            with pytest.raises(tf.errors.InvalidArgumentError, match="scalar"):
                sess.run(scalars.concat())
            np.testing.assert_array_equal(sess.run(g), [[0, 0], [2, 2], [0, 0]])


def test_concat_of_nothing_is_a_value_error():
    # TF: ValueError "List argument 'values' to 'ConcatV2' Op with length 0 shorter than
    # minimum length 2."
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="length 0 shorter than minimum length 2"):
            tf.concat([], 0)


def test_gradient_of_an_embedding_read_in_a_loop_stays_sparse():
    # TF: an IndexedSlices gathered over the iterations (a zero row at index 0, then
    # each backward iteration's rows: i = 2, 1, 0), dense_shape [4, 3]; its dense value
    # matches finite differences.
    params_v = np.arange(12.0).reshape(4, 3)
    with tf.Graph().as_default():
        params = tf.placeholder(tf.float64, [4, 3])

        def body(i, acc):
            e = tf.gather(params, tf.stack([i, i + 1]))
            return i + 1, acc + tf.reduce_sum(e * e)

        _, r = tf.while_loop(lambda i, a: i < 3, body, [0, tf.constant(0.0, tf.float64)])
        (g,) = tf.gradients(r, params)
        assert isinstance(g, tf.IndexedSlices)
        assert g.values.shape.as_list() == [None, 3]
        with tf.Session() as sess:
            got = sess.run(g, {params: params_v})
            assert got.indices.tolist() == [0, 2, 3, 1, 2, 0, 1]
            assert list(got.dense_shape) == [4, 3]
            np.testing.assert_allclose(
                got.values,
                [[0, 0, 0], [12, 14, 16], [18, 20, 22], [6, 8, 10], [12, 14, 16], [0, 2, 4],
                 [6, 8, 10]],
            )  # fmt: skip
            dense = np.zeros((4, 3))
            np.add.at(dense, got.indices, got.values)
            eps, fd = 1e-6, np.zeros((4, 3))
            for idx in np.ndindex(4, 3):
                for sign in (1, -1):
                    v = params_v.copy()
                    v[idx] += sign * eps
                    fd[idx] += sign * sess.run(r, {params: v})
            np.testing.assert_allclose(dense, fd / (2 * eps), rtol=1e-6, atol=1e-6)
