"""tf.data GraphDefs TF 2.21 wrote import here and produce TF's elements.

The GraphDefs and TF's values come from tests/fixtures/record_dataset_graphdef_tf.py:
pipelines whose functions (map, filter, flat_map, interleave, scan, take_while,
group_by_window, group_by_reducer, a one-shot iterator's dataset factory) TF stores
as FunctionDefs of the GraphDef's library (asyncflow/dataset_functions.py instantiates
them), the parallel forms TF 2.21 writes (ParallelMapDatasetV2,
ParallelInterleaveDatasetV4, LegacyParallelInterleaveDatasetV2, MapAndBatchDataset),
captured placeholders fed at the iterator's initialization, and files read through a
fed list of names.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "dataset_graphdef"
REF = json.loads((FIXTURES / "ref.json").read_text())
OURS = json.loads((FIXTURES / "ours.json").read_text())


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_dataset_graphdef_tf", FIXTURES.parent / "record_dataset_graphdef_tf.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # (TF is imported only by its record_tf)
    return module


REC = _recorder()


def _graph_def(path):
    gd = tf.GraphDef()
    gd.ParseFromString(path.read_bytes())
    return gd


def _drain(case: str, scope: str = "", ours: bool = False):
    ref = REF[case]
    names = OURS[case] if ours else ref
    gd = _graph_def(FIXTURES / (f"ours_{case}.pb" if ours else f"{case}.pb"))
    # (ref's feeds name the data files themselves: no paths to look up)
    return REC.drain(tf, gd, names["init"], names["next"], ref["feeds"], {}, scope)


@pytest.mark.parametrize("case", sorted(REF))
def test_tf_graphdef_pipeline(case):
    assert _drain(case) == REF[case]["values"]


@pytest.mark.parametrize("case", ["captured_feed", "group_by_window", "stateful_in_map"])
def test_tf_graphdef_pipeline_under_a_scope(case):
    # The function attrs name tensors; import_graph_def's scope renames them too.
    assert _drain(case, scope="imported") == REF[case]["values"]


TF_RAN_OURS = sorted(c for c, r in REF.items() if r["tf_ran_ours"])


@pytest.mark.parametrize("case", TF_RAN_OURS)
def test_our_graphdef_tf_ran_runs_here(case):
    # TF ran this GraphDef of ours to its own elements (the recorder asserts it).
    assert _drain(case, ours=True) == REF[case]["values"]


def _shape_of(gd):
    """What TF relies on: each node's op and inputs, each function's signature."""
    nodes = sorted((nd.op, len(nd.input), sorted(nd.attr)) for nd in gd.node)
    sigs = sorted(
        (
            [(a.type, a.name) for a in f.signature.input_arg],
            [(a.type, a.name) for a in f.signature.output_arg],
            sorted(b.op for b in f.node_def),
        )
        for f in gd.library.function
    )
    return nodes, sigs


@pytest.mark.parametrize("case", TF_RAN_OURS)
def test_export_still_writes_what_tf_ran(case):
    g, *_ = REC.build(tf, case)
    assert _shape_of(g.as_graph_def()) == _shape_of(_graph_def(FIXTURES / f"ours_{case}.pb"))


def _map_inputs(gd) -> list:
    """Each MapDataset node's name and its input's, where that is a MapDataset too."""
    by_name = {nd.name: nd for nd in gd.node}
    maps = [(nd.name, by_name[nd.input[0].split(":")[0]]) for nd in gd.node
            if nd.op == "MapDataset"]  # fmt: skip
    return sorted((n, b.name if b.op == "MapDataset" else None) for n, b in maps)


@pytest.mark.parametrize("case", ["text_lines", "tfrecord_parse"])
def test_fused_maps_written_apart_as_tf_writes_them(case):
    # (Dataset.map fuses a map of a map into one call; the GraphDef has TF's two maps,
    # the second reading the first, each with its own function)
    g, *_ = REC.build(tf, case)
    assert _map_inputs(g.as_graph_def()) == _map_inputs(_graph_def(FIXTURES / f"{case}.pb"))


TF_DEFAULTS = json.loads((FIXTURES.parent / "tf_op_attr_defaults.json").read_text())


@pytest.mark.parametrize("case", TF_RAN_OURS)
def test_function_nodes_carry_tfs_default_attrs(case):
    # (TF writes every attr of a node inside a function, at its OpDef's default where
    # not given: our FunctionDefs write them too)
    g, *_ = REC.build(tf, case)
    gd = g.as_graph_def()
    missing = {
        (nd.op, key)
        for f in gd.library.function
        for nd in f.node_def
        for key in TF_DEFAULTS.get(nd.op, {})
        if key not in nd.attr
    }
    assert not missing


def test_own_pipeline_round_trip_under_a_scope():
    g = tf.Graph()
    with g.as_default():
        c = tf.placeholder(tf.int64, [], name="c")
        ds = tf.data.Dataset.range(5).map(lambda x: x * c).filter(lambda x: x > 2)
        it = tf.data.make_initializable_iterator(ds)
        nxt = it.get_next()
        gd = g.as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(gd, name="copy")
        with tf.Session(graph=g2) as sess:
            sess.run(g2.get_operation_by_name("copy/" + it.initializer.name), {"copy/c:0": 3})
            out = []
            with pytest.raises(tf.errors.OutOfRangeError):
                while True:
                    out.append(sess.run(g2.get_tensor_by_name("copy/" + nxt.name)))
    assert out == [3, 6, 9, 12]


def test_round_trip_of_a_function_with_colocated_nodes():
    """A map whose tf.debugging assertion builds a cond (its nodes colocated with a
    Switch of the body, by `_class`) exports under the body's own node names and
    imports again: the elements, then the assertion's error."""
    g = tf.Graph()
    with g.as_default():

        def check(x):
            with tf.control_dependencies([tf.debugging.assert_less(x, tf.constant(3, tf.int64))]):
                return x * 2

        it = tf.data.make_initializable_iterator(tf.data.Dataset.range(5).map(check))
        nxt = it.get_next()
        gd = g.as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(gd, name="copy")
        with tf.Session(graph=g2) as sess:
            sess.run(g2.get_operation_by_name("copy/" + it.initializer.name))
            out = [sess.run(g2.get_tensor_by_name("copy/" + nxt.name)) for _ in range(3)]
            with pytest.raises(tf.errors.InvalidArgumentError, match="x < y did not hold"):
                sess.run(g2.get_tensor_by_name("copy/" + nxt.name))
    assert out == [0, 2, 4]


def test_missing_function_is_a_clear_error():
    gd = tf.GraphDef()
    gd.ParseFromString((FIXTURES / "autotune_map.pb").read_bytes())
    del gd.library.function[:]
    with tf.Graph().as_default(), pytest.raises(ValueError, match="not in the library"):
        tf.import_graph_def(gd, name="")


def _parse_v2(serialized, ragged_keys=()):
    from asyncflow import graph as ops

    op = ops.apply_op(
        "ParseExampleV2",
        [
            serialized,
            tf.constant([], tf.string),
            tf.constant([], tf.string),
            tf.constant(["x"]),
            tf.constant(list(ragged_keys), tf.string),
            [tf.constant([0.0, 0.0])],
        ],
        {"num_sparse": 0, "sparse_types": [], "ragged_value_types": [],
         "ragged_split_types": [], "dense_shapes": [tf.TensorShape([2])]},  # fmt: skip
    )
    return op.outputs[0]


def test_parse_example_v2_scalar_vector_and_bad_input():
    ex = tf.train.Example(
        features=tf.train.Features(
            feature={"x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.5, -2]))}
        )
    ).SerializeToString()
    with tf.Graph().as_default(), tf.Session() as sess:
        one, many = _parse_v2(tf.constant(ex)), _parse_v2(tf.constant([ex, b""]))
        assert one.shape.as_list() == [2] and many.shape.as_list() == [2, 2]
        a, b = sess.run([one, many])
        np.testing.assert_array_equal(a, [1.5, -2])
        np.testing.assert_array_equal(b, [[1.5, -2], [0, 0]])
        with pytest.raises(tf.errors.InvalidArgumentError, match="scalar or vector"):
            sess.run(_parse_v2(tf.constant([[ex]])))
        with pytest.raises(tf.errors.UnimplementedError, match="ragged_keys"):
            sess.run(_parse_v2(tf.constant(ex), ragged_keys=["r"]))
