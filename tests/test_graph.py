"""Graph semantics against TF1's documented behaviour (tf.compat.v1 ops_test.py cases)."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops, control_flow_ops
from asyncflow.session import Session


@pytest.fixture(autouse=True)
def _fresh_default_graph():
    ops.reset_default_graph()
    yield
    ops.reset_default_graph()


@pytest.fixture
def g():
    graph = ops.Graph()
    with graph.as_default():
        yield graph


def _const(value=1.0, name="Const", dtype=None):
    return array_ops.constant(value, dtype=dtype, name=name)


# -- default graph stack -----------------------------------------------------------------


def test_default_graph_is_stable_until_reset():
    g0 = ops.get_default_graph()
    assert ops.get_default_graph() is g0
    ops.reset_default_graph()
    g1 = ops.get_default_graph()
    assert g1 is not g0
    assert g1.get_operations() == []


def test_as_default_nests_and_restores():
    outer = ops.get_default_graph()
    g1, g2 = ops.Graph(), ops.Graph()
    with g1.as_default() as entered:
        assert entered is g1
        assert ops.get_default_graph() is g1
        with g2.as_default():
            assert ops.get_default_graph() is g2
            c = _const()
        assert ops.get_default_graph() is g1
    assert ops.get_default_graph() is outer
    assert c.graph is g2
    assert g1.get_operations() == []


def test_reset_default_graph_inside_as_default_raises():
    with ops.Graph().as_default():
        with pytest.raises(AssertionError):
            ops.reset_default_graph()


def test_ops_go_to_default_graph():
    c = _const()
    assert c.graph is ops.get_default_graph()
    assert ops.get_default_graph().get_operations() == [c.op]


def test_op_inputs_must_share_a_graph():
    with ops.Graph().as_default():
        x = _const()
    with ops.Graph().as_default(), pytest.raises(ValueError):
        ops.apply_op("Identity", [x], graph=ops.get_default_graph())


# -- names ---------------------------------------------------------------------------------


def test_unique_names(g):
    assert _const().op.name == "Const"
    assert _const().op.name == "Const_1"
    assert _const().op.name == "Const_2"
    assert _const(name="foo").op.name == "foo"
    assert _const(name="foo").op.name == "foo_1"


def test_unique_names_skip_taken_suffixes(g):
    assert _const(name="a_1").op.name == "a_1"
    assert _const(name="a").op.name == "a"
    assert _const(name="a").op.name == "a_2"


def test_unique_names_are_case_insensitive(g):
    assert _const(name="foo").op.name == "foo"
    assert _const(name="Foo").op.name == "Foo_1"


def test_unique_name_mark_as_used(g):
    assert g.unique_name("x", mark_as_used=False) == "x"
    assert g.unique_name("x") == "x"
    assert g.unique_name("x", mark_as_used=False) == "x_1"
    assert g.unique_name("x") == "x_1"


def test_name_scope_nesting(g):
    with g.name_scope("a") as a:
        assert a == "a/"
        assert g.get_name_scope() == "a"
        with g.name_scope("b") as b:
            assert b == "a/b/"
            assert _const().op.name == "a/b/Const"
        assert _const().op.name == "a/Const"
    assert g.get_name_scope() == ""
    assert _const().op.name == "Const"


def test_reentering_name_scope_uniquifies(g):
    with g.name_scope("a") as s1:
        pass
    with g.name_scope("a") as s2:
        c = _const()
    assert (s1, s2) == ("a/", "a_1/")
    assert c.op.name == "a_1/Const"


def test_name_scope_with_trailing_slash_reuses_exactly(g):
    with g.name_scope("a") as scope:
        first = _const()
    with g.name_scope(scope) as again:
        second = _const()
    assert again == "a/"
    assert (first.op.name, second.op.name) == ("a/Const", "a/Const_1")


def test_name_scope_none_resets_to_root(g):
    with g.name_scope("a"):
        with g.name_scope(None) as root:
            assert root == ""
            assert _const().op.name == "Const"
        assert _const().op.name == "a/Const"


def test_name_scope_reserves_the_op_name(g):
    with g.name_scope("a"):
        pass
    assert _const(name="a").op.name == "a_1"


def test_module_name_scope_default_name(g):
    with ops.name_scope(None, "default") as s1:
        pass
    with ops.name_scope(None, "default") as s2:
        pass
    with ops.name_scope("given", "default") as s3:
        pass
    assert (s1, s2, s3) == ("default/", "default_1/", "given/")


def test_module_name_scope_uses_graph_of_values():
    other = ops.Graph()
    with other.as_default():
        x = _const()
    with ops.name_scope("s", values=[x]) as scope:
        assert ops.get_default_graph() is other
        y = array_ops.identity(x)
    assert scope == "s/"
    assert y.op.name == "s/Identity"
    assert y.graph is other


def test_invalid_scope_name_raises(g):
    with pytest.raises(ValueError):
        with g.name_scope("a b"):
            pass


def test_invalid_op_name_raises(g):
    with pytest.raises(ValueError):
        _const(name="a b")


# -- control dependencies --------------------------------------------------------------


def test_control_dependencies_basic(g):
    a = _const(name="a")
    x = _const(name="x")
    with g.control_dependencies([a]):
        y = array_ops.identity(x)
        n = control_flow_ops.no_op()
    assert y.op.control_inputs == [a.op]
    assert n.control_inputs == [a.op]
    assert a.op._control_outputs == [y.op, n]
    assert array_ops.identity(x).op.control_inputs == []


def test_control_dependencies_nested_accumulate(g):
    a, b, x = _const(name="a"), _const(name="b"), _const(name="x")
    with g.control_dependencies([a]):
        with g.control_dependencies([b.op]):
            y = array_ops.identity(x)
        z = array_ops.identity(x)
    assert set(y.op.control_inputs) == {a.op, b.op}
    assert z.op.control_inputs == [a.op]


def test_control_dependencies_none_clears(g):
    a, b, x = _const(name="a"), _const(name="b"), _const(name="x")
    with g.control_dependencies([a]):
        with g.control_dependencies(None):
            y = array_ops.identity(x)
            with g.control_dependencies([b]):
                z = array_ops.identity(x)
        w = array_ops.identity(x)
    assert y.op.control_inputs == []
    assert z.op.control_inputs == [b.op]
    assert w.op.control_inputs == [a.op]


def test_control_dependencies_repeated_op_added_once(g):
    a, x = _const(name="a"), _const(name="x")
    with g.control_dependencies([a, a.op]), g.control_dependencies([a]):
        y = array_ops.identity(x)
    assert y.op.control_inputs == [a.op]


def test_control_dependencies_module_function(g):
    a, x = _const(name="a"), _const(name="x")
    with ops.control_dependencies([a]):
        y = array_ops.identity(x)
    assert y.op.control_inputs == [a.op]


def test_control_dependencies_rejects_non_ops(g):
    with pytest.raises(TypeError):
        with g.control_dependencies([1.0]):
            pass


def test_control_dependencies_rejects_other_graph(g):
    with ops.Graph().as_default():
        other = _const()
    with pytest.raises(ValueError):
        with g.control_dependencies([other]):
            pass


def test_no_control_dependency_with_data_dependency(g):
    a = _const(name="a")
    with g.control_dependencies([a]):
        b = array_ops.identity(a)
    assert b.op.control_inputs == []


def test_add_control_input_bumps_version(g):
    a, x = _const(name="a"), _const(name="x")
    y = array_ops.identity(x)
    v = g._version  # (the plan caches' version; the public `version` counts ops, as TF)
    y.op._add_control_input(a.op)
    assert y.op.control_inputs == [a.op]
    assert g._version > v


# -- devices -----------------------------------------------------------------------------


def test_device_scope_sets_canonical_device(g):
    with g.device("/cpu:0"):
        c = _const()
    assert c.op.device == "/device:CPU:0"
    assert c.device == "/device:CPU:0"
    assert _const().op.device == ""


def test_bad_device_string_raises_at_with(g):
    with pytest.raises(ValueError):
        with g.device("/job:w/replica:zero"):
            pytest.fail("entered a scope with a bad device string")


def test_nested_device_scopes_merge(g):
    with g.device("/job:worker/task:1"):
        with g.device("/cpu:0"):
            inner = _const()
        with g.device("/job:ps"):
            override = _const()
        outer = _const()
    assert inner.op.device == "/job:worker/task:1/device:CPU:0"
    assert override.op.device == "/job:ps/task:1"
    assert outer.op.device == "/job:worker/task:1"


def test_device_none_clears(g):
    with g.device("/job:worker"):
        with g.device(None):
            c = _const()
    assert c.op.device == ""


def test_device_function(g):
    def by_type(op):
        return "/cpu:0" if op.type == "Const" else "/job:ps"

    with g.device(by_type):
        c = _const()
        y = array_ops.identity(c)
    assert c.op.device == "/device:CPU:0"
    assert y.op.device == "/job:ps"


def test_device_function_inside_string_scope_merges(g):
    with g.device("/job:worker"), g.device(lambda op: "/cpu:0"):
        c = _const()
    assert c.op.device == "/job:worker/device:CPU:0"


def test_module_device_function(g):
    with ops.device("/gpu:1"):
        c = _const()
    assert c.op.device == "/device:GPU:1"


def test_device_accepts_device_spec(g):
    with g.device(tf.DeviceSpec.from_string("/cpu:0")):
        c = _const()
    assert c.op.device == "/device:CPU:0"


# -- colocation --------------------------------------------------------------------------


def test_colocate_with_sets_class_attr(g):
    with g.device("/cpu:0"):
        x = _const(name="x")
    with g.colocate_with(x.op):
        y = array_ops.identity(x)
    assert y.op.get_attr("_class") == [b"loc:@x"]
    assert y.op.colocation_groups() == [b"loc:@x"]
    assert y.op.device == "/device:CPU:0"
    assert x.op.colocation_groups() == [b"loc:@x"]


def test_colocate_with_tensor_and_ignore_existing(g):
    x, w = _const(name="x"), _const(name="w")
    with ops.colocate_with(x):
        with ops.colocate_with(w, ignore_existing=True):
            y = array_ops.identity(x)
        z = array_ops.identity(x)
    assert y.op.get_attr("_class") == [b"loc:@w"]
    assert z.op.get_attr("_class") == [b"loc:@x"]
    with pytest.raises(ValueError):
        array_ops.identity(x).op.get_attr("_class")


def test_colocate_with_none_clears(g):
    x = _const(name="x")
    with g.colocate_with(x), g.colocate_with(None, ignore_existing=True):
        y = array_ops.identity(x)
    assert "_class" not in y.op.attrs


def test_colocation_is_transitive(g):
    w = _const(name="w")
    with g.colocate_with(w):
        x = array_ops.identity(w, name="x")
    with g.colocate_with(x):
        y = array_ops.identity(x)
    assert y.op.get_attr("_class") == [b"loc:@w"]


# -- collections -------------------------------------------------------------------------


def test_collections(g):
    with g.name_scope("s"):
        a = _const(name="a")
    b = _const(name="b")
    g.add_to_collection("k", a)
    g.add_to_collection("k", b)
    g.add_to_collection("k", 42)
    assert g.get_collection("k") == [a, b, 42]
    assert g.get_collection("k", scope="s") == [a]
    assert g.get_collection("k", scope="b") == [b]
    assert g.get_collection("missing") == []
    assert "k" in g.get_all_collection_keys()


def test_get_collection_returns_a_copy(g):
    g.add_to_collection("k", 1)
    got = g.get_collection("k")
    got.append(2)
    assert g.get_collection("k") == [1]


def test_get_collection_ref_is_live(g):
    ref = g.get_collection_ref("k")
    ref.append(1)
    g.add_to_collection("k", 2)
    assert g.get_collection("k") == [1, 2]
    assert g.get_collection_ref("k") is ref


def test_add_to_collections_and_module_functions(g):
    ops.add_to_collections(["a", "b"], 7)
    ops.add_to_collection("a", 8)
    assert ops.get_collection("a") == [7, 8]
    assert ops.get_collection_ref("b") == [7]
    g.clear_collection("a")
    assert g.get_collection("a") == []


def test_graph_keys_are_tf_strings():
    assert ops.GraphKeys.GLOBAL_VARIABLES == "variables"
    assert ops.GraphKeys.VARIABLES == ops.GraphKeys.GLOBAL_VARIABLES
    assert ops.GraphKeys.TRAINABLE_VARIABLES == "trainable_variables"
    assert ops.GraphKeys.UPDATE_OPS == "update_ops"


# -- finalize ----------------------------------------------------------------------------


def test_finalize_blocks_new_ops(g):
    _const()
    g.finalize()
    assert g.finalized
    with pytest.raises(RuntimeError):
        _const()
    with pytest.raises(RuntimeError):
        g.add_to_collection("k", 1)
    g._unsafe_unfinalize()
    assert _const().op.type == "Const"


# -- lookup by name ----------------------------------------------------------------------


def test_get_tensor_and_operation_by_name(g):
    x = _const(name="x")
    assert g.get_tensor_by_name("x:0") is x
    assert g.get_operation_by_name("x") is x.op
    assert g.as_graph_element("x:0") is x
    assert g.as_graph_element(x.op) is x.op


@pytest.mark.parametrize(
    "lookup, name, error",
    [
        ("tensor", "missing:0", KeyError),
        ("tensor", "x:1", KeyError),
        ("tensor", "x:junk", ValueError),
        ("tensor", "x", ValueError),
        ("tensor", 3, TypeError),
        ("operation", "missing", KeyError),
        ("operation", "x:0", ValueError),
        ("operation", 3, TypeError),
    ],
)
def test_lookup_errors(g, lookup, name, error):
    _const(name="x")
    fn = g.get_tensor_by_name if lookup == "tensor" else g.get_operation_by_name
    with pytest.raises(error):
        fn(name)


def test_as_graph_element_rejects_other_graph_and_wrong_kind(g):
    x = _const(name="x")
    with ops.Graph().as_default():
        y = _const()
    with pytest.raises(ValueError):
        g.as_graph_element(y)
    with pytest.raises(TypeError):
        g.as_graph_element(x, allow_tensor=False)
    with pytest.raises(TypeError):
        g.as_graph_element(1.0)


# -- Tensor --------------------------------------------------------------------------------


def test_tensor_properties(g):
    x = array_ops.placeholder(dtypes.float32, [None, 3], name="x")
    assert x.dtype == dtypes.float32
    assert x.name == "x:0"
    assert x.op.name == "x"
    assert x.op.type == "Placeholder"
    assert x.value_index == 0
    assert x.graph is g
    assert x.shape.as_list() == [None, 3]
    assert x.get_shape() == x.shape
    assert "x:0" in repr(x)


def test_set_shape_refines_and_rejects_incompatible(g):
    x = array_ops.placeholder(dtypes.float32)
    assert x.shape.ndims is None
    x.set_shape([None, 3])
    assert x.shape.as_list() == [None, 3]
    x.set_shape(tensor_shape.TensorShape([2, None]))
    assert x.shape.as_list() == [2, 3]
    with pytest.raises(ValueError):
        x.set_shape([2, 4])
    with pytest.raises(ValueError):
        x.set_shape([2])
    assert x.shape.as_list() == [2, 3]


def test_const_shape_inference(g):
    assert _const([[1, 2, 3], [4, 5, 6]]).shape.as_list() == [2, 3]
    assert _const(1.0).shape.as_list() == []


def test_consumers(g):
    x = _const(name="x")
    y = array_ops.identity(x)
    z = array_ops.identity(x)
    assert x.consumers() == [y.op, z.op]
    assert y.consumers() == []
    x.consumers().clear()  # a copy
    assert len(x.consumers()) == 2


def test_tensor_bool_raises(g):
    x = _const()
    with pytest.raises(TypeError):
        bool(x)
    with pytest.raises(TypeError):
        if x:
            pass


def test_tensor_equality_is_identity_and_hashable(g):
    x, y = _const(), _const()
    assert x == x
    assert not (x == y)
    assert x != y
    assert {x: 1, y: 2}[x] == 1
    assert len({x, y, x}) == 2


def test_tensor_len_and_iteration_rules(g):
    unknown = array_ops.placeholder(dtypes.float32, [None, 2])
    scalar = _const(1.0)
    with pytest.raises(TypeError):
        iter(unknown).__next__()
    with pytest.raises(TypeError):
        list(scalar)
    with pytest.raises(TypeError):
        list(array_ops.placeholder(dtypes.float32))
    with pytest.raises(TypeError):
        len(_const([1.0, 2.0]))
    known = _const([[1.0, 2.0]] * 3)
    with pytest.raises(TypeError):  # TF1: a graph tensor never iterates, shape known or not
        iter(known)


def test_convert_to_tensor_dtype_mismatch(g):
    x = _const(1.0)
    assert ops.convert_to_tensor(x) is x
    with pytest.raises(ValueError):
        ops.convert_to_tensor(x, dtype=dtypes.int32)
    with pytest.raises(TypeError):
        ops.convert_to_tensor(control_flow_ops.no_op())


# -- Operation -----------------------------------------------------------------------------


def test_operation_properties(g):
    a = _const(name="a")
    x = _const(2.0, name="x")
    with g.control_dependencies([a]):
        y = array_ops.identity(x, name="y")
    op = y.op
    assert op.name == "y"
    assert op.type == "Identity"
    assert op.graph is g
    assert op.inputs == (x,)
    assert op.outputs == (y,)
    assert op.control_inputs == [a.op]
    assert op.get_attr("T") == dtypes.float32
    assert op.op_def.name == "Identity"
    assert repr(op) == "<tf.Operation 'y' type=Identity>"


def test_get_attr_returns_string_attrs_as_bytes(g):
    # TF 2.21 (tf.compat.v1): max_pool's op.get_attr("padding") -> b'SAME',
    # get_attr("data_format") -> b'NHWC'; non-string attrs keep their type.
    from asyncflow import nn

    y = nn.max_pool(array_ops.zeros([1, 2, 2, 1]), [1, 1, 1, 1], [1, 1, 1, 1], "SAME")
    assert y.op.get_attr("padding") == b"SAME"
    assert y.op.get_attr("data_format") == b"NHWC"
    assert y.op.get_attr("ksize") == [1, 1, 1, 1]


def test_get_attr_missing_raises_value_error(g):
    x = _const()
    with pytest.raises(ValueError, match="no attr named 'nope'"):
        x.op.get_attr("nope")


def test_operation_node_def_and_str(g):
    a = _const(name="a")
    x = _const(name="x")  # (made inside the block, x would carry ^a for y, as TF)
    with g.control_dependencies([a]), g.device("/cpu:0"):
        y = array_ops.identity(x, name="y")
    nd = y.op.node_def
    assert nd.name == "y"
    assert nd.op == "Identity"
    assert list(nd.input) == ["x", "^a"]
    assert nd.device == "/device:CPU:0"
    assert dict(nd.attr) == {"T": tf.AttrValue(type=tf.float32.as_datatype_enum)}
    text = str(y.op)
    assert 'name: "y"' in text
    assert 'op: "Identity"' in text
    assert 'input: "^a"' in text
    assert "type: DT_FLOAT" in text


def test_no_op_and_group(g):
    a, b = _const(name="a"), _const(name="b")
    n = control_flow_ops.no_op(name="n")
    assert n.type == "NoOp"
    assert n.outputs == ()
    grp = control_flow_ops.group(a, b.op, name="grp")
    assert grp.name == "grp"
    assert set(grp.control_inputs) == {a.op, b.op}


# -- apply_op build-time errors ----------------------------------------------------------


def test_apply_op_dtype_mismatch_is_type_error(g):
    x = _const(1.0)
    with pytest.raises(TypeError):
        ops.apply_op("Identity", [x], {"T": dtypes.int32})


def test_apply_op_wrong_number_of_inputs(g):
    with pytest.raises(TypeError):
        ops.apply_op("Identity", [])


def test_apply_op_missing_required_attr(g):
    with pytest.raises(TypeError):
        ops.apply_op("Const", [], {"dtype": dtypes.float32})


def test_apply_op_unknown_op_type(g):
    with pytest.raises(KeyError):
        ops.apply_op("NoSuchOp", [])


def test_apply_op_converts_python_values(g):
    y = ops.apply_op("Identity", [[1, 2]]).outputs[0]
    assert y.dtype == dtypes.int32
    assert y.op.inputs[0].op.type == "Const"
    z = ops.apply_op("Identity", [3.0], {"T": dtypes.float64}).outputs[0]
    assert z.dtype == dtypes.float64


def test_shape_function_error_leaves_graph_clean(g):
    v = _const([1.0, 2.0], name="v")
    with pytest.raises(ValueError):
        array_ops.placeholder_with_default(v, [3])
    n_ops = len(g.get_operations())
    # Const's shape function reads value.shape: a bare int makes it raise.
    with pytest.raises(AttributeError):
        ops.apply_op("Const", [], {"value": 5, "dtype": dtypes.int32}, name="bad")
    assert len(g.get_operations()) == n_ops
    with pytest.raises(KeyError):
        g.get_operation_by_name("bad")
    assert v.consumers() == []


# -- eval / run --------------------------------------------------------------------------


def test_eval_and_run_with_default_session(g):
    x = array_ops.placeholder(dtypes.float32, [2], name="x")
    y = array_ops.identity(x)
    c = _const([1.0, 2.0])
    n = control_flow_ops.no_op()
    with Session() as sess:
        np.testing.assert_array_equal(c.eval(), [1.0, 2.0])
        np.testing.assert_array_equal(y.eval(feed_dict={x: [3.0, 4.0]}), [3.0, 4.0])
        assert n.run() is None
        assert sess.graph is g


def test_eval_with_explicit_session(g):
    c = _const(5.0)
    sess = Session(graph=g)
    try:
        assert c.eval(session=sess) == 5.0
    finally:
        sess.close()


def test_eval_without_default_session_raises(g):
    with pytest.raises(ValueError, match="No default session"):
        _const().eval()
    with pytest.raises(ValueError, match="No default session"):
        control_flow_ops.no_op().run()


def test_eval_with_session_of_other_graph_raises(g):
    c = _const()
    with Session(graph=ops.Graph()) as sess:
        with pytest.raises(ValueError):
            c.eval(session=sess)


def test_placeholder_with_default_runs(g):
    x = array_ops.placeholder_with_default(_const([1.0, 2.0]), [2])
    with Session() as sess:
        np.testing.assert_array_equal(sess.run(x), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(x, {x: [5.0, 6.0]}), [5.0, 6.0])


# -- issue 18: API details as TF 2.21 has them -------------------------------------------------


def test_colocation_groups_is_a_method():
    with tf.Graph().as_default():
        assert tf.constant(1.0, name="cc").op.colocation_groups() == [b"loc:@cc"]


def test_is_tensor_is_true_for_variables():
    with tf.Graph().as_default():
        assert tf.is_tensor(tf.Variable(1.0)) and tf.is_tensor(tf.constant(1.0))
        assert not tf.is_tensor(np.zeros(2))


def test_dimension_and_tensor_shape_convert_to_tensors():
    # TF 2.21: Dimension(3) -> int32 3; TensorShape([2, 3]) -> int32 [2, 3]; a partially
    # known shape or an unknown Dimension raise ValueError.
    with tf.Graph().as_default():
        d = ops.convert_to_tensor(tensor_shape.Dimension(3))
        s = ops.convert_to_tensor(tensor_shape.TensorShape([2, 3]))
        assert d.dtype == dtypes.int32 and s.dtype == dtypes.int32
        with Session() as sess:
            assert sess.run(d) == 3
            assert sess.run(s).tolist() == [2, 3]
            assert sess.run(tf.zeros(tensor_shape.TensorShape([2, 1]))).shape == (2, 1)
        with pytest.raises(ValueError, match="partially known TensorShape"):
            ops.convert_to_tensor(tensor_shape.TensorShape([2, None]))
        with pytest.raises(ValueError, match="unknown Dimension"):
            ops.convert_to_tensor(tensor_shape.Dimension(None))


def test_lists_of_dimensions_as_op_inputs():
    # TF 2.21: reshape(zeros([1, 100]), [Dimension(100), Dimension(1)]) and
    # [Dimension(100), 1] give shape (100, 1); convert_to_tensor of such a list with no
    # dtype raises TypeError "Failed to convert elements of ...".
    with tf.Graph().as_default():
        x = tf.zeros([1, 100])
        dims = [tensor_shape.Dimension(100), tensor_shape.Dimension(1)]
        assert tf.reshape(x, dims).shape.as_list() == [100, 1]
        assert tf.reshape(x, [tensor_shape.Dimension(100), 1]).shape.as_list() == [100, 1]
        t = ops.convert_to_tensor(dims, dtype=dtypes.int64)
        with Session() as sess:
            assert sess.run(t).tolist() == [100, 1]
        with pytest.raises(TypeError, match="Failed to convert elements"):
            ops.convert_to_tensor(dims)


def test_switch_to_thread_local_keeps_each_threads_scopes_apart():
    import threading

    g = tf.Graph()
    g.switch_to_thread_local()
    g.switch_to_thread_local()  # idempotent
    names, barrier = {}, threading.Barrier(2, timeout=30)

    def build(tag):
        with g.as_default(), g.name_scope(tag):
            barrier.wait()  # both threads are inside their own scope now
            with g.control_dependencies(None):
                names[tag] = tf.constant(1.0, name="c").op.name

    threads = [threading.Thread(target=build, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert names == {"a": "a/c", "b": "b/c"}
    with g.as_default():
        assert tf.constant(1.0, name="top").op.name == "top"  # main thread: no scope leaked


def test_kernel_label_map_is_accepted_and_changes_nothing():
    # TF's tests wrap op creation in Graph._kernel_label_map({...}) to pick a labelled
    # kernel; asyncflow has one kernel per op and device, so results are the same.
    g = tf.Graph()
    with g.as_default(), g._kernel_label_map({"Identity": "some_label"}):
        y = tf.identity(tf.constant([1.0, 2.0]))
    with Session(graph=g) as sess:
        assert sess.run(y).tolist() == [1.0, 2.0]


def test_printed_forms_are_tfs():
    # TF 2.21 (tf.compat.v1, graph mode), recorded: print() of a tensor, a dtype, a
    # sparse tensor and a ragged value, and repr() of a tensor.
    import asyncflow as af

    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 3], name="x")
        u = af.placeholder(af.int32, name="u")
        with af.device("/cpu:0"):
            d = af.constant(1.0, name="d")
        assert str(x) == 'Tensor("x:0", shape=(?, 3), dtype=float32)'
        assert repr(x) == "<tf.Tensor 'x:0' shape=(?, 3) dtype=float32>"
        assert str(u) == 'Tensor("u:0", dtype=int32)'
        assert repr(u) == "<tf.Tensor 'u:0' shape=<unknown> dtype=int32>"
        assert str(d) == 'Tensor("d:0", shape=(), dtype=float32, device=/device:CPU:0)'
        assert str(af.float32) == "<dtype: 'float32'>" and repr(af.float32) == "tf.float32"
        assert str([af.int64]) == "[tf.int64]"
        assert f"{af.bool}" == "<dtype: 'bool'>"
        s = af.SparseTensor([[0, 0]], [1.0], [2, 2])
        want = (
            'SparseTensor(indices=Tensor("SparseTensor/indices:0", shape=(1, 2), dtype=int64), '
            'values=Tensor("SparseTensor/values:0", shape=(1,), dtype=float32), '
            'dense_shape=Tensor("SparseTensor/dense_shape:0", shape=(2,), dtype=int64))'
        )
        assert str(s) == repr(s) == want
        r = af.RaggedTensor.from_row_splits(
            af.constant([1, 2, 3]), af.constant([0, 1, 3], af.int64)
        )
        with af.Session() as sess:
            assert str(sess.run(r)) == "<tf.RaggedTensorValue [[1], [2, 3]]>"


# tf.constant and tf.constant_initializer with `shape`, recorded from TF 2.21 (graph
# mode): a value of fewer elements is filled out with its last (zeros if empty).
_CONSTANT_SHAPED_TF = [
    ([1, 2], [2, 2], {}, [[1, 2], [2, 2]]),
    (np.array([1, 2, 3]), [3, 1], {}, [[1], [2], [3]]),
    ([[1, 2], [3, 4]], [1, 4], {}, [[1, 2, 3, 4]]),
    ([1.5], [3], {}, [1.5, 1.5, 1.5]),
    ([], [2], {}, [0.0, 0.0]),
    ([[1], [2]], [2, 2], {}, [[1, 2], [2, 2]]),
    (
        [1, 2, 3, 4, 5],
        [2, 2],
        {},
        (ValueError, "Too many elements provided. Takes at most 4, but got 5."),
    ),
    (
        [1, 2],
        [2, 2],
        {"verify_shape": True},
        (TypeError, "Expected Tensor's shape: (2, 2), but got (2,)."),
    ),
]


@pytest.mark.parametrize("value, shape, kwargs, want", _CONSTANT_SHAPED_TF)
def test_constant_with_a_shape_fills_as_tf(value, shape, kwargs, want):
    import re

    with tf.Graph().as_default():
        for build in (
            lambda: tf.constant(value, shape=shape, **kwargs),
            lambda: tf.get_variable(
                "w", shape, initializer=tf.constant_initializer(value, **kwargs)
            ),
        ):
            if isinstance(want, tuple):
                with pytest.raises(want[0], match=re.escape(want[1])):
                    build()
                continue
            t = build()
            with Session() as sess:
                sess.run(tf.global_variables_initializer())
                got = sess.run(t)
            assert got.tolist() == want
