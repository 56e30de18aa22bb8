"""Graph, Operation and Tensor API against TF 2.21's tf.compat.v1 graph mode.

Each expected value below was recorded from TF 2.21 running the same graph."""

import pytest

import asyncflow as tf


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
