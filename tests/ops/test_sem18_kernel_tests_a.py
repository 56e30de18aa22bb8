"""Issue 18, TF's kernel tests for control flow, variables, queues, readers and parsing:
behaviours asyncflow differed in, each asserted as TF 2.21 (graph mode, v2 behaviour
off) gives it -- the values and messages were checked on TF 2.21 beside these tests."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors, variables
from asyncflow import graph as ops
from asyncflow.ops import control_flow_ops, data_flow_ops, parsing_ops, reader_ops, state_ops
from asyncflow.partitioned_variables import PartitionedVariable
from asyncflow.protos import example_pb2, feature_pb2


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None, init=False):
    with af.Session() as s:
        if init:
            s.run(af.global_variables_initializer())
        return s.run(fetches, feed_dict)


# -- decode_csv ----------------------------------------------------------------------------


def test_decode_csv_ndarray_default_keeps_its_dtype():
    # TF: a float64 column parses 1.79e308 (a float32 one would overflow to inf).
    out = _run(parsing_ops.decode_csv(["1.79e308"], [np.array([], np.float64)]))
    assert out[0].dtype == np.float64 and out[0][0] == 1.79e308


@pytest.mark.parametrize(
    "default,message",
    [
        (np.array([], np.float64), "Field 0 in record 0 is not a valid double: 1.5x"),
        ([1.0], "Field 0 in record 0 is not a valid float: 1.5x"),
        (np.array([], np.int32), "Field 0 in record 0 is not a valid int32: 1.5x"),
    ],
)
def test_decode_csv_names_the_column_type_as_tf(default, message):
    with pytest.raises(errors.InvalidArgumentError, match=message):
        _run(parsing_ops.decode_csv(["1.5x"], [default]))


def test_decode_csv_checks_defaults_and_select_cols_when_built():
    with pytest.raises(ValueError, match="Shape must be at most rank 1 but is rank 2"):
        parsing_ops.decode_csv(["1"], [[[0]]])
    with pytest.raises(TypeError, match="Expected list for 'record_defaults'"):
        parsing_ops.decode_csv(["1"], np.zeros(1))
    with pytest.raises(ValueError, match="select_cols contains negative values."):
        parsing_ops.decode_csv(["1,2,3"], [[0], [1]], select_cols=[-1, 0])
    with pytest.raises(ValueError, match="select_cols is not strictly increasing."):
        parsing_ops.decode_csv(["1,2,3"], [[0], [1]], select_cols=[-1, -2])


def test_decode_csv_counts_the_selected_columns_a_record_has():
    got = parsing_ops.decode_csv([",,", "4,5,6"], [[0], [1], [2]], select_cols=[0, 1, 3])
    with pytest.raises(
        errors.InvalidArgumentError, match="Expect 3 fields but have 2 in record 0"
    ):
        _run(got)
    got = parsing_ops.decode_csv(["1,2,3"], [[0], [1]], select_cols=[0, 3])
    with pytest.raises(
        errors.InvalidArgumentError, match="Expect 2 fields but have 1 in record 0"
    ):
        _run(got)


# -- queues and readers ----------------------------------------------------------------------


def test_padding_queue_shape_mismatch_writes_unknown_dims_as_question_marks():
    q = data_flow_ops.PaddingFIFOQueue(10, (af.int32, af.int32), ((2, 2), (None, 3)))
    bad = af.placeholder(af.int32)
    enq = q.enqueue((np.ones((2, 2), np.int32), bad))
    with pytest.raises(errors.InvalidArgumentError, match=r"Expected \[\?,3\], got \[3,4\]"):
        _run(enq, {bad: np.ones((3, 4), np.int32)})


def test_reader_restore_state_takes_a_scalar_state():
    reader = reader_ops.IdentityReader("test_reader")
    for state in ([], [b"a", b"b"]):
        with pytest.raises(ValueError, match="Shape must be rank 0 but is rank 1"):
            reader.restore_state(state)


# -- variables -------------------------------------------------------------------------------


def test_v1_and_v2_aggregation_enums_compare_and_hash_equal():
    v1, v2 = variables.VariableAggregation, variables.VariableAggregationV2
    for a, b in [
        (v1.NONE, v2.NONE),
        (v1.SUM, v2.SUM),
        (v1.ONLY_FIRST_TOWER, v2.ONLY_FIRST_REPLICA),
    ]:
        assert a == b and b == a and hash(a) == hash(b)
    assert v1.SUM != v2.MEAN


def test_on_read_variable_is_not_trainable_unless_asked():
    on_read = variables.VariableSynchronization.ON_READ
    assert variables.Variable(1.0).trainable
    assert not variables.Variable(1.0, synchronization=on_read).trainable
    # TF 2.21 takes an explicit trainable=True (older TF1 raised).
    assert variables.Variable(1.0, synchronization=on_read, trainable=True).trainable


def test_variable_shared_name_and_iteration_error():
    v = variables.Variable([0.0, 1.0])
    assert v._shared_name == "Variable" and v._distribute_strategy is None
    with pytest.raises(errors.OperatorNotAllowedInGraphError, match="not allowed.*Graph mode"):
        iter(v)
    assert issubclass(errors.OperatorNotAllowedInGraphError, TypeError)


def test_variable_operators_wrap_tensor_operators():
    for attr in functools.WRAPPER_ASSIGNMENTS:
        assert getattr(variables.Variable.__add__, attr) == getattr(af.Tensor.__add__, attr)


def test_variable_def_round_trip_keeps_trainable_sync_and_aggregation():
    v = variables.Variable(
        10.0,
        trainable=False,
        synchronization=variables.VariableSynchronization.NONE,
        aggregation=variables.VariableAggregationV2.ONLY_FIRST_REPLICA,
    )
    w = variables.Variable(variable_def=v.to_proto())
    assert not w.trainable
    assert w.synchronization == variables.VariableSynchronization.NONE
    assert w.aggregation == variables.VariableAggregation.ONLY_FIRST_REPLICA
    assert w.op is v.op


def test_save_slice_info_from_spec():
    info = variables.Variable.SaveSliceInfo(
        full_name="foo", full_shape=[2, 3, 4], var_offset=[0, 2, 0], var_shape=[1, 1, 3]
    )
    assert info.spec == "2 3 4 0,1:2,1:0,3"
    back = variables.Variable.SaveSliceInfo.from_spec(info.spec)
    assert (back.full_shape, back.var_offset, back.var_shape) == ([2, 3, 4], [0, 2, 0], [1, 1, 3])
    for spec, message in [
        ("0", "must contain space-separated full_shape info"),
        ("0:0", "must contain space-separated full_shape info"),
        ("a b", "full_shape must be a sequence of integers. Found 'a'"),
        ("0 0:0", "comma-separated pairs of offsets and shapes"),
        ("0 a,0:0:0", "var_offset must be an integer. Found 'a'"),
        ("0 0,a:0:0", "var_shape must be an integer. Found 'a'"),
    ]:
        with pytest.raises(ValueError, match=message):
            variables.Variable.SaveSliceInfo.from_spec(spec)


def test_partitioned_variable_assign_add_and_sub():
    parts = [variables.Variable([0.0]), variables.Variable([1.0])]
    for i, p in enumerate(parts):
        p._set_save_slice_info(variables.Variable.SaveSliceInfo(p.name, [2], [i], [1]))
    pv = PartitionedVariable("two", [2], af.float32, parts, [2])
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        assert s.run(pv.assign_add(af.constant([1.0, 2.0]))) == [[1.0], [3.0]]
        assert s.run(pv.assign_sub(af.constant([3.0, 4.0]))) == [[-2.0], [-1.0]]


def test_variable_op_takes_a_shape_given_as_a_list():
    v = ops.apply_op(
        "VariableV2", [], {"shape": [1], "dtype": af.float32, "container": "", "shared_name": ""}
    ).outputs[0]
    assert _run(state_ops.assign(v, [1.0])).tolist() == [1.0]


# -- parse_example ---------------------------------------------------------------------------


def _example(**feats) -> bytes:
    ex = example_pb2.Example()
    for k, f in feats.items():
        ex.features.feature[k].CopyFrom(f)
    return ex.SerializeToString()


def test_parse_example_feature_of_no_kind_counts_as_missing():
    empty = feature_pb2.Feature()  # present, no list set
    got = parsing_ops.parse_example(
        [_example(b=empty)], {"b": parsing_ops.FixedLenFeature((1,), af.string, "tmp")}
    )
    assert _run(got["b"]).tolist() == [[b"tmp"]]
    got = parsing_ops.parse_example(
        [_example(c=empty)],
        {"c": parsing_ops.FixedLenFeature((2,), af.float32)},
        example_names=["in1"],
    )
    with pytest.raises(
        errors.InvalidArgumentError,
        match=r"Name: in1, Feature: c \(data type: float\) is required",
    ):
        _run(got)


def test_parse_example_feature_without_shape():
    with pytest.raises(ValueError, match="Missing shape for feature a"):
        parsing_ops.parse_example([b""], {"a": parsing_ops.FixedLenFeature(None, af.float32)})


# -- control flow ----------------------------------------------------------------------------


def test_identity_and_enter_of_a_variable_carry_its_reference():
    v = variables.Variable(7)
    ident = control_flow_ops._Identity(v)
    v2 = control_flow_ops.with_dependencies([state_ops.assign(ident, 9)], ident)
    assert isinstance(v2, af.Tensor)
    assert _run(v2, init=True) == 9

    w = variables.Variable(7)
    enter_w = control_flow_ops._Enter(w, "foo_1", is_constant=True)
    enter_nine = control_flow_ops.enter(af.constant(9), "foo_1")
    done = control_flow_ops.with_dependencies([state_ops.assign(enter_w, enter_nine)], enter_w)
    assert _run(control_flow_ops.exit(done), init=True) == 9


def test_ref_switch_of_an_uninitialized_variable():
    # TF's testUninitializedRefIdentity: only the live side's RefIdentity fires.
    v = ops.apply_op(
        "VariableV2", [], {"shape": [1], "dtype": af.float32, "container": "", "shared_name": ""}
    ).outputs[0]
    v_f, v_t = control_flow_ops.ref_switch(v, state_ops.is_variable_initialized(v))
    f_op = ops.apply_op("RefIdentity", [v_f]).outputs[0]
    t_op = ops.apply_op("RefIdentity", [v_t]).outputs[0]
    with ops.control_dependencies([f_op]):
        assign_v = state_ops.assign(v, [1.0])
    with ops.control_dependencies([t_op]):
        orig_v = af.identity(v)
    merged = control_flow_ops.merge([assign_v, orig_v])
    assert _run(merged.output).tolist() == [1.0]


def test_enter_shape_is_unknown_unless_loop_constant():
    v = af.constant([0.0, 0.0])
    assert control_flow_ops.enter(v, "frame1", is_constant=True).shape.as_list() == [2]
    assert control_flow_ops.enter(v, "frame2", is_constant=False).shape.ndims is None
    # A while loop still knows its loop variables' shapes.
    out = af.while_loop(lambda x: af.reduce_sum(x) < 5.0, lambda x: x + 1.0, [v])
    assert out.shape.as_list() == [2]
    assert _run(out).tolist() == [3.0, 3.0]


def test_cond_of_indexed_slices_with_int32_and_int64_indices():
    values = af.constant([10])
    i32 = af.constant([0], dtype=af.int32)
    i64 = af.constant([0], dtype=af.int64)
    x = af.IndexedSlices(values, i32)
    r = af.cond(
        af.less(1, 2),
        lambda: af.IndexedSlices(x.values + 1, i32),
        lambda: af.IndexedSlices(x.values - 1, i64),
    )
    assert r.indices.dtype == af.int64
    val, ind = _run([r.values, r.indices])
    assert val.tolist() == [11] and ind.tolist() == [0] and ind.dtype == np.int64


def test_cond_branches_of_different_dict_keys():
    x, y = af.constant(10), af.constant(200)
    with pytest.raises(ValueError, match="The two structures don't have the same nested"):
        af.cond(af.less(1, 2), lambda: {"a": x + y, "b": x + y}, lambda: {"c": y, "d": y})


def test_cond_of_resource_variables_and_its_gradients():
    # TF's testCondResourceGradShape: the handle's shape follows it through the Switch,
    # and the untaken branch's zero gradient has the variable's shape.
    from asyncflow.resource_variable import ResourceVariable

    rv1, rv2 = ResourceVariable([1.0, 2.0]), ResourceVariable([3.0, 4.0])
    pred = af.placeholder(af.bool, [])
    result = af.cond(pred, lambda: rv1, lambda: rv2)
    assert result.shape.as_list() == [2]
    grads = af.gradients(result, [rv1, rv2])
    assert [g.shape.as_list() for g in grads] == [[2], [2]]
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        g1, g2 = s.run(grads, {pred: True})
        assert g1.tolist() == [1.0, 1.0] and g2.tolist() == [0.0, 0.0]
        assert s.run(result, {pred: False}).tolist() == [3.0, 4.0]


def test_reference_dtypes_have_tf_names():
    from asyncflow import dtypes

    assert dtypes.int32_ref == dtypes.as_dtype("int32_ref") == dtypes.int32._as_ref
    assert dtypes.float32_ref.base_dtype == dtypes.float32


def test_while_loop_under_control_dependencies_on_a_placeholder():
    # TF's testWhileWithControl_3/_4 (issue 18: control_dependencies on a placeholder).
    b = af.placeholder(af.bool)
    c = af.constant(1)
    with ops.control_dependencies([b]):
        r = af.while_loop(lambda x: x < 10, lambda x: x + c, [af.constant(0)])
        r2 = af.while_loop(lambda x: x < 10, lambda x: x + af.identity(c), [af.constant(0)])
    assert _run([r, r2], {b: True}) == [10, 10]
    with pytest.raises(errors.InvalidArgumentError, match="placeholder"):
        _run(r)  # the loop still waits for b


def test_while_loop_keeps_a_reference_loop_variable():
    # TF's testWhileWithRefs_1: the body sees the variable's reference, so does the exit.
    x = variables.Variable(0)._ref()
    seen = []

    def body(i, x):
        seen.append(x.dtype)
        return i + 1, ops.apply_op("RefIdentity", [x]).outputs[0]

    r = af.while_loop(lambda i, x: i < 100, body, [af.constant(0), x], parallel_iterations=5)
    assert seen == [af.int32._as_ref] and r[0].dtype == af.int32
    assert r[1].dtype == af.int32._as_ref
    assert list(_run(r, init=True)) == [100, 0]


def test_while_loop_sparse_tensor_default_invariant_keeps_only_its_rank():
    # TF's testWhileShapeInferenceSparseTensor: a body adding values needs no invariant.
    x = af.SparseTensor(af.constant([[0], [3]], af.int64), [2.0, 4.0], af.constant([10], af.int64))

    def body(i, x):
        one = af.SparseTensor(
            af.cast(af.fill([1, 1], i), af.int64), af.fill([1], 1.0), x.dense_shape
        )
        return i + 1, af.sparse_add(x, one)

    _, r = af.while_loop(lambda i, _: i < 10, body, [af.constant(0), x])
    assert r.indices.shape.as_list() == [None, 1] and r.values.shape.as_list() == [None]
    assert r.dense_shape.shape.as_list() == [1]
    _, r = af.while_loop(
        lambda i, _: i < 10,
        lambda i, x: (i + 1, x),
        [af.constant(0), x],
        [af.TensorShape([]), af.TensorShape(None)],
    )
    assert r.indices.shape.as_list() == [None, None]


def test_while_loop_takes_tensor_specs_as_invariants():
    spec = af.TensorSpec(None, dtype=af.int32)
    i, x = af.constant(0), af.constant([1])
    _, r = af.while_loop(
        lambda i, _: i < 3,
        lambda i, x: (i + 1, af.stack([x, x])),
        [i, x],
        [af.TensorSpec([], dtype=af.int32), spec],
    )
    assert r.shape.ndims is None
    assert _run(r).shape == (2, 2, 2, 1)


def test_colocation_takes_the_device_of_the_innermost_colocated_op_with_one():
    # As TF 2.21 places them (checked): x with b's device, y with a's (c0 has none).
    with ops.device("/cpu:0"):
        a = af.constant(1.0, name="a")
    with ops.device("/cpu:1"):
        b = af.constant(2.0, name="b")
    c0 = af.constant(0.0, name="c0")
    with ops.colocate_with(a.op):
        with ops.colocate_with(b.op):
            x = af.identity(a, name="x")
        with ops.colocate_with(c0.op):
            y = af.identity(a, name="y")
    assert x.op.device == "/device:CPU:1" and x.op.colocation_groups() == [b"loc:@a", b"loc:@b"]
    assert y.op.device == "/device:CPU:0"


def test_while_loop_gradient_accumulators_follow_colocated_gradients():
    # TF's testWhileGrad_ColocateGradients: the forward accumulator of Square's input
    # is colocated with it, so it takes Square's device.
    def body(x):
        with ops.device("/device:CPU:0"):
            return af.square(x)

    v = af.constant(2.0, name="v")
    loop = af.while_loop(lambda v: v < 100.0, body, [v], parallel_iterations=1)
    r = af.gradients(loop, v, colocate_gradients_with_ops=True)[0]
    for op in ops.get_default_graph().get_operations():
        if "Square" in op.name:
            assert op.device == "/device:CPU:0", op.name
    assert _run(r) == 1024.0


def test_while_loop_gradient_of_a_resource_variable_sparse_read():
    # TF's testWhileGrad_ResourceVarSparseRead: the accumulated IndexedSlices carry the
    # variable's shape (not its handle's) as their dense shape.
    from asyncflow.resource_variable import ResourceVariable

    var = ResourceVariable(np.ones(5), dtype=af.float32)
    r = af.while_loop(
        lambda i, _: i < 3,
        lambda i, x: (i + 1, x * af.reduce_sum(var.sparse_read([1, 3]))),
        [0, af.constant(1.0)],
    )[1]
    grad = af.gradients(r, var)[0]
    got = _run(grad, init=True)
    assert got.dense_shape.tolist() == [5]
    dense = np.zeros(5, np.float32)
    np.add.at(dense, got.indices, got.values)
    assert dense.tolist() == [0.0, 12.0, 0.0, 12.0, 0.0]


def test_gradient_inside_a_loop_through_a_loop_variable_initial_value_raises():
    # TF's testGradInWhileWrtInitialLoopVal (TF's ValueError, not a crash).
    x = af.placeholder(af.float32, shape=(), name="x")
    y = x + 1

    def body(i, v):
        return i + 1, af.gradients(v * 2, x)[0]

    with pytest.raises(ValueError, match="Cannot compute gradient inside while loop with respect"):
        af.while_loop(lambda i, x: i < 3, body, [0, y])


def test_initializer_function_ops_are_colocated_with_their_variable():
    # TF's testInitializerFunctionDevicePlacement.
    with ops.device("/cpu:100"):
        v1 = variables.Variable(lambda: af.constant(42.0), dtype=af.float32, name="v1")
    assert v1.op.device == "/device:CPU:100"
    assert v1.op.colocation_groups() == [b"loc:@v1"]
    for t in v1.initializer.inputs:
        assert t.op.colocation_groups() == [b"loc:@v1"]
    v2 = variables.Variable(lambda: af.constant(42.0), dtype=af.float32, name="v2")
    assert [t.op.colocation_groups() for t in v2.initializer.inputs] == [[b"loc:@v2"]] * 2
    assert _run(v2.initialized_value()) == 42.0
