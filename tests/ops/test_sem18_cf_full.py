"""Issue 18, the rest of TF's control_flow_ops_py_test (run whole by
tools/tf_kernel_tests.py): behaviours asyncflow differed in, each asserted as TF 2.21
gives it in graph mode (v2 behaviour off) -- values and messages read from TF 2.21
running the same programs beside these tests."""

from __future__ import annotations

import collections

import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import control_flow_ops as cfo


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


# -- RefSelect, RefMerge ---------------------------------------------------------------------


def test_ref_select_passes_the_chosen_variable_on_as_itself():
    idx = af.placeholder(af.int32)
    v1, v2 = af.Variable([[1, 2]]), af.Variable([[3, 4]])
    v3 = af.Variable([[5], [6]])
    s = cfo.ref_select(idx, [v1, v2])
    assert s.shape.as_list() == [1, 2] and s.dtype == af.int32._as_ref
    # TF's shape: the inputs' when all are fully defined and equal, else unknown
    assert cfo.ref_select(idx, [v1, v3]).shape.ndims is None
    p = af.placeholder(af.float32)
    unknown = af.Variable(p, validate_shape=False)
    assert cfo.ref_select(idx, [af.Variable([[1.0, 2.0]]), unknown]).shape.ndims is None
    upd = af.assign_add(s, [[10, 10]])  # an update through it reaches the variable
    with af.Session() as sess:
        sess.run(af.global_variables_initializer(), {p: [1.0]})
        assert sess.run(s, {idx: 1}).tolist() == [[3, 4]]
        assert sess.run(upd, {idx: 1}).tolist() == [[13, 14]]
        assert sess.run(v2).tolist() == [[13, 14]]
        assert sess.run(v1).tolist() == [[1, 2]]


def test_ref_merge_of_a_ref_switch():
    v = af.Variable([[1, 2]])
    f, t = cfo.ref_switch(v, af.constant(True))
    m = cfo.ref_merge([f, t])
    assert m[0].dtype == af.int32._as_ref
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        out, index = sess.run(m)
    assert out.tolist() == [[1, 2]] and index == 1


# -- frames ----------------------------------------------------------------------------------


def test_a_node_with_inputs_from_two_frames_fails_the_run():
    data = af.placeholder(af.float32, shape=[])
    res = af.add(cfo.enter(data, "foo_1"), cfo.enter(data, "foo_2"))
    with af.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError) as got:
            sess.run(res, {data: 1.0})
    assert str(got.value).split("\n")[0] == (
        "{{node Add}} has inputs from different frames. The input {{node Enter_1}} is in "
        "frame 'foo_2'. The input {{node Enter}} is in frame 'foo_1'."
    )


def test_nested_loops_and_conds_still_run():
    # (the frame check must accept every legal graph: loop constants, conds in loops,
    # loops in conds, tensors of an outer loop used in an inner one)
    def outer(i, acc):
        c = af.constant(2)

        def inner(j, a):
            return j + 1, a + af.cond(j < 1, lambda: c * i, lambda: c)

        _, acc = af.while_loop(lambda j, a: j < 3, inner, [0, acc])
        return i + 1, acc

    r = af.while_loop(lambda i, acc: i < 4, outer, [0, 0])
    with af.Session() as sess:
        assert sess.run(r) == (4, 2 * (0 + 1 + 2 + 3) + 4 * 2 * 2)


# -- while_loop invariants and structures ----------------------------------------------------


def _body(i, x):
    return i + 1, x


def test_sparse_tensor_spec_invariant_keeps_the_rank():
    x = af.SparseTensor([[0]], [1.0], [10])
    inv = [af.TensorSpec([], dtype=af.int32), af.SparseTensorSpec([None])]
    assert repr(inv[1]) == "SparseTensorSpec(TensorShape([Dimension(None)]), tf.float32)"
    r = af.while_loop(lambda i, _: i < 10, _body, [af.constant(0), x], inv)
    assert r[1].indices.shape.as_list() == [None, 1]
    assert r[1].dense_shape.shape.as_list() == [1]


@pytest.mark.parametrize("case", ["dense for sparse", "ragged for sparse", "float for int"])
def test_type_spec_invariant_of_another_kind_or_dtype_is_a_type_error(case):
    inv = [af.TensorSpec([], dtype=af.int32), af.SparseTensorSpec([None])]
    i, x = af.constant(0), af.SparseTensor([[0]], [1.0], [10])
    args = {
        "dense for sparse": [i, af.constant([1])],
        "ragged for sparse": [i, af.ragged.constant([[1, 2], [3]])],
        "float for int": [af.constant(0.0), x],
    }[case]
    with pytest.raises(TypeError, match=r"^TypeSpec .* is not compatible with "):
        af.while_loop(lambda i, _: i < 10, _body, args, inv)


def test_while_body_with_fewer_results_says_tfs_message():
    named = collections.namedtuple("named", ("a", "b"))
    loop_vars = [
        named(a=af.constant(0.0), b=af.constant(1.0)),
        (af.constant(2.0), af.constant(3.0)),
        af.constant(4.0),
    ]
    with pytest.raises(ValueError, match="the same number of elements"):
        af.while_loop(lambda lv0, _1, _2: lv0.a < 100.0, lambda lv0, lv1, _: [lv0, lv1],
                      loop_vars)  # fmt: skip


# -- gradients: grad_ys types ----------------------------------------------------------------


def test_integer_grad_ys_for_a_float_reference_loop_variable():
    x = af.Variable(0.0)._ref()
    r = af.while_loop(lambda i, x: af.less(i, 10), lambda i, x: [i + 1, x],
                      [af.constant(0), x], parallel_iterations=5)  # fmt: skip
    grad = af.gradients([r[1]], [x], grad_ys=[af.Variable(73)._ref()])
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        assert sess.run(r + grad) == [10, 0.0, 73]


def test_bool_grad_ys_for_a_float_is_a_type_error():
    y = af.constant([1.0, 2.0])
    with pytest.raises(
        TypeError,
        match="^Gradient type bool generated for real or integer-valued tensor .* with type "
        "float32 must be real or integer",
    ):
        af.gradients(y, [y], grad_ys=[af.constant([True, False])])


# -- RunMetadata, ConfigProto ----------------------------------------------------------------


def test_run_metadata_has_field_and_config_experimental():
    md = af.RunMetadata()
    assert md.HasField("step_stats") is False
    with af.Session() as sess:
        sess.run(af.constant(1), options=af.RunOptions(trace_level=3), run_metadata=md)
    assert md.HasField("step_stats") is True
    with pytest.raises(ValueError):
        md.HasField("partition_graphs")  # a repeated field, as protobuf
    c = af.ConfigProto()
    c.experimental.executor_type = "SINGLE_THREADED_EXECUTOR"
    assert c.experimental.executor_type == "SINGLE_THREADED_EXECUTOR"
    assert isinstance(c.experimental, af.ConfigProto.Experimental)
