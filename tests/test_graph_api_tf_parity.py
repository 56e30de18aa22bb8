"""Graph, Operation and Tensor API against TF 2.21's tf.compat.v1 graph mode.

Each expected value below was recorded from TF 2.21 running the same graph."""

import pytest

import asyncflow as tf
from asyncflow.graph import _default_graph_stack


def _small_graph_def():
    with tf.Graph().as_default() as g:
        p = tf.placeholder(tf.float32, [None, 2], name="p")
        y = tf.add(p, 1.0, name="y")
        tf.identity(y, name="z")
    return g.as_graph_def()


def test_import_with_empty_name_uniquifies_colliding_nodes():
    gd = _small_graph_def()
    with tf.Graph().as_default() as h:
        tf.constant(1.0, name="z")
        tf.constant(1.0, name="y_1")
        r = tf.import_graph_def(gd, name="", return_elements=["z:0", "y"])
        assert [x.name for x in r] == ["z_1:0", "y"]
        r = tf.import_graph_def(gd, name="", return_elements=["z:0", "y"])
        assert [x.name for x in r] == ["z_2:0", "y_2"]
        got = [(o.name, [i.name for i in o.inputs]) for o in h.get_operations()]
        assert got == [
            ("z", []), ("y_1", []), ("p", []), ("y/y", []), ("y", ["p:0", "y/y:0"]),
            ("z_1", ["y:0"]), ("p_1", []), ("y/y_1", []), ("y_2", ["p_1:0", "y/y_1:0"]),
            ("z_2", ["y_2:0"]),
        ]  # fmt: skip
        assert tf.identity(r[0], name="p").name == "p_2:0"
        assert tf.constant(1.0, name="y_2").name == "y_2_1:0"


def test_graph_util_aliases_import_graph_def_and_names_a_string_dest():
    assert tf.graph_util.import_graph_def is tf.import_graph_def
    with pytest.raises(
        TypeError, match="^dest_nodes must be an iterable of strings, but got type <class 'str'>.$"
    ):
        tf.graph_util.extract_sub_graph(_small_graph_def(), "y")


@pytest.mark.parametrize(
    "build",
    [
        lambda a, n: tf.constant(1.0, name=n),
        lambda a, n: tf.identity(a, name=n),
        lambda a, n: tf.add(a, 1.0, name=n),
        lambda a, n: tf.zeros([2], name=n),
        lambda a, n: tf.group(a, name=n),
    ],
)
def test_an_exact_name_already_taken_is_a_duplicate(build):
    # TF: a name ending in "/" names the op exactly; a second use fails, never "q_1".
    with tf.Graph().as_default():
        a = tf.constant(1.0, name="a")
        build(a, "q/")
        with pytest.raises(ValueError, match="^Duplicate node name in graph: 'q'$"):
            build(a, "q/")


def _control_names(t):
    return [o.name for o in t.op.control_inputs]


def test_control_dependencies_skip_ops_already_ordered_by_a_data_input():
    g = tf.Graph()
    with g.as_default():
        xx = tf.constant(3.0)
        with g.control_dependencies([xx]):
            i1 = tf.identity(xx, name="i1")
            i2 = tf.identity(i1, name="i2")
            i3 = tf.add(i1, 1.0, name="i3")
            with g.control_dependencies(None):
                i4 = tf.identity(xx, name="i4")
            i5 = tf.identity(i4, name="i5")
        with g.control_dependencies([i1]):
            with g.control_dependencies([i2]):
                i6 = tf.identity(i1, name="i6")
                i7 = tf.constant(1.0, name="i7")
    got = {t.op.name: _control_names(t) for t in [i1, i2, i3, i4, i5, i6, i7]}
    assert got == {
        "i1": [], "i2": [], "i3": [], "i4": [], "i5": ["Const"], "i6": ["i2"],
        "i7": ["i1", "i2"],
    }  # fmt: skip
    assert _control_names(i3.op.inputs[1]) == ["Const"]  # the converted "i3/y"


def test_control_dependencies_take_names_and_a_cond_merge_takes_none():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")
        b = tf.constant(2.0, name="b")
        with g.control_dependencies(["a"]):
            c = tf.identity(b)
        assert _control_names(c) == ["a"]
        with g.control_dependencies([a]):
            p = tf.cond(tf.constant(True), lambda: tf.identity(b), lambda: tf.identity(a))
        assert _control_names(p) == []
        with pytest.raises(TypeError, match="^Can not convert a int into a Tensor or Operation.$"):
            with g.control_dependencies([1]):
                pass
        with tf.Graph().as_default():
            z = tf.constant(1.0)
        with pytest.raises(
            ValueError,
            match=r"^Tensor Tensor\(\"Const:0\", shape=\(\), "
            r"dtype=float32\) is not an element of this graph.$",
        ):
            with g.control_dependencies([z]):
                pass


def test_not_differentiable_takes_unregistered_op_types_and_rejects_twice():
    tf.NotDifferentiable("GraphApiParityNoGrad")  # TF: no op of that type need exist
    with pytest.raises(
        KeyError, match="Registering two gradient with name 'GraphApiParityNoGrad'!"
    ):
        tf.no_gradient("GraphApiParityNoGrad")
    with pytest.raises(KeyError, match="Registering two gradient with name 'Square'!"):
        tf.NotDifferentiable("Square")
    with pytest.raises(TypeError, match="^op_type must be a string$"):
        tf.NotDifferentiable(3)


def test_not_differentiable_name_in_gradient_override_map_gives_no_gradient():
    tf.NotDifferentiable("GraphApiParityStop")
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(3.0)
        with g.gradient_override_map({"Square": "GraphApiParityStop"}):
            y = tf.square(x)
        assert tf.gradients(y, x) == [None]


def _named_graph():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")
        b = tf.constant(2.0, name="b")
        tf.add(a, b, name="c")
        tf.placeholder(tf.float32, [None, 3], name="p")
    return g


@pytest.mark.parametrize(
    "lookup, exc, message",
    [
        (lambda g: g.get_operation_by_name("c:0"), ValueError,
         "Name 'c:0' appears to refer to a Tensor, not a Operation."),
        (lambda g: g.get_operation_by_name(3), TypeError,
         "Operation names are strings (or similar), not int."),
        (lambda g: g.get_tensor_by_name(3), TypeError,
         "Tensor names are strings (or similar), not int."),
        (lambda g: g.get_tensor_by_name("c"), ValueError,
         "The name 'c' refers to an Operation, not a Tensor. Tensor names must be of the "
         'form "<op_name>:<output_index>".'),
        (lambda g: g.as_graph_element("c", allow_operation=False, allow_tensor=False),
         ValueError, "allow_tensor and allow_operation can't both be False."),
        (lambda g: g.as_graph_element("c:0:1"), ValueError,
         "The name 'c:0:1' looks a like a Tensor name, but is not a valid one. Tensor names "
         'must be of the form "<op_name>:<output_index>".'),
        (lambda g: g.as_graph_element("c:1"), KeyError,
         "The name 'c:1' refers to a Tensor which does not exist. The operation, 'c', exists "
         "but only has 1 outputs."),
    ],
)  # fmt: skip
def test_graph_element_lookup_errors(lookup, exc, message):
    with pytest.raises(exc) as info:
        lookup(_named_graph())
    got = info.value.args[0] if exc is KeyError else str(info.value)
    assert got == message


def test_graph_element_negative_output_index_counts_back():
    g = _named_graph()
    assert g.as_graph_element("c:-1").name == "c:0"


def test_graph_version_counts_ops_and_building_function():
    g = _named_graph()
    assert g.version == 4
    assert g.building_function is False


def test_name_scope_root_rules_and_missing_names():
    g = tf.Graph()
    with g.as_default():
        for bad in ["-a", "_a", "/a", "a b", "a:b"]:
            with pytest.raises(ValueError, match="is not a valid scope name"):
                with g.name_scope(bad):
                    pass
        for ok, want in [(".a", ".a/"), ("a\\b", "a\\b/"), ("a-b.c_d/e", "a-b.c_d/e/")]:
            with g.name_scope(ok) as s:
                assert s == want
        with g.name_scope("o"):
            with g.name_scope("_i") as s:  # a nested scope may start with "_"
                assert s == "o/_i/"
        with pytest.raises(TypeError):
            with g.name_scope(1):
                pass
        with pytest.raises(
            ValueError,
            match=r"^At least one of name \(None\) and default_name "
            r"\(None\) must be provided.$",
        ):
            with tf.name_scope(None, None, []):
                pass
        with tf.name_scope(None) as s:
            assert s == ""


def test_finalized_graph_rejects_clear_collection_and_odd_collection_keys():
    g = tf.Graph()
    g.add_to_collection("x", 1)
    g.add_to_collection(3, 1)
    assert g.get_all_collection_keys() == ["x"]
    g.finalize()
    with pytest.raises(RuntimeError, match="^Graph is finalized and cannot be modified.$"):
        g.clear_collection("x")


def test_colocate_with_none_needs_ignore_existing():
    g = tf.Graph()
    with pytest.raises(
        ValueError,
        match=r"^Trying to reset colocation \(op is None\) but "
        "ignore_existing is not True$",
    ):
        with g.colocate_with(None):
            pass


def test_operation_values_and_run_without_session():
    with tf.Graph().as_default():
        s = tf.split(tf.constant([[1.0, 2.0, 3.0]]), 3, axis=1, name="sp")
        assert [t.name for t in s[0].op.values()] == ["sp:0", "sp:1", "sp:2"]
        with pytest.raises(
            ValueError,
            match=r"^Cannot execute operation using `run\(\)`: No "
            "default session is registered.",
        ):
            s[0].op.run()


def test_import_meta_graph_of_a_missing_file_is_an_oserror(tmp_path):
    missing = str(tmp_path / "nope.meta")
    with pytest.raises(OSError, match=f"^File {missing} does not exist.$"):
        tf.train.import_meta_graph(missing)


def _import_into_new_graph(make_map=lambda: None, **kwargs):
    gd = _small_graph_def()
    with tf.Graph().as_default():
        r = tf.import_graph_def(gd, input_map=make_map(), **kwargs)
        return None if r is None else [x.name for x in r]


@pytest.mark.parametrize(
    "kwargs, exc, message",
    [
        ({"make_map": lambda: {"nope:0": tf.zeros([1, 2])}}, ValueError,
         "Attempted to map inputs that were not found in graph_def: [nope:0]"),
        ({"make_map": lambda: {"p:3": tf.zeros([1, 2])}}, ValueError,
         "Attempted to map inputs that were not found in graph_def: [p:3]"),
        ({"make_map": lambda: {3: tf.zeros([1, 2])}}, TypeError,
         "All keys for input_map must be strings."),
        ({"make_map": lambda: [1]}, TypeError,
         "input_map must be a dictionary mapping strings to Tensor objects."),
        ({"return_elements": ["nope"]}, ValueError,
         "Requested return node 'nope' not found in graph def"),
        ({"return_elements": ["nope:0"]}, ValueError,
         "Requested return tensor 'nope:0' not found in graph def"),
        ({"return_elements": ["z:3"]}, ValueError,
         "Invalid return output 3 of node 'z', which has 1 output(s)"),
        ({"return_elements": [3]}, TypeError, "return_elements must be a list of strings."),
    ],
)  # fmt: skip
def test_import_graph_def_argument_errors(kwargs, exc, message):
    with pytest.raises(exc) as info:
        _import_into_new_graph(**kwargs)
    assert str(info.value) == message


def test_import_graph_def_maps_an_op_name_key_to_output_zero():
    got = _import_into_new_graph(lambda: {"p": tf.zeros([1, 2])}, return_elements=["z:0"])
    assert got == ["import/z:0"]


def test_a_graph_tensor_is_not_iterable_even_with_a_known_shape():
    with tf.Graph().as_default():
        known = tf.constant([[1.0, 2.0, 3.0]])
        with pytest.raises(TypeError):  # TF's OperatorNotAllowedInGraphError
            iter(known)
        with pytest.raises(TypeError):
            a, b = tf.constant([1.0, 2.0])  # noqa: F841


def test_numpy_refuses_a_graph_tensor():
    import numpy as np

    with tf.Graph().as_default():
        a = tf.constant(1.0, name="a")
        with pytest.raises(
            NotImplementedError, match=r"^Cannot convert a symbolic Tensor \(a:0\)"
        ):
            np.asarray(a)
        assert (np.float32(2.0) * a).name == "mul:0"  # NumPy still defers to the Tensor
        assert tf.convert_to_tensor([a, a]).name == "packed:0"


def test_leaving_default_graphs_out_of_order_is_a_nesting_error():
    g1, g2 = tf.Graph(), tf.Graph()
    c1, c2 = g1.as_default(), g2.as_default()
    c1.__enter__()
    c2.__enter__()
    try:
        with pytest.raises(AssertionError, match="^Nesting violated for default stack of"):
            c1.__exit__(None, None, None)
        assert tf.get_default_graph() is g2
    finally:
        c2.__exit__(None, None, None)
        _default_graph_stack.pop(g1)  # (g1's own exit was the one refused)
    assert tf.get_default_graph() is not g1
