"""The seed and options ops of exported tf.data GraphDefs are TF 2.21's, and the
pipelines they make give TF's elements (tests/fixtures/record_dataset_export_tf.py).

Shuffle, shuffle_and_repeat and Dataset.random write TF's seed2 subgraph (a SelectV2
where a seed is set); with_options writes TF's OptionsDataset (the options of that
call alone, colocated with its input; none where with_options is not called), and the
runtime merges a pipeline's OptionsDatasets as TF does for map_and_batch_fusion.  TF
ran our GraphDefs of the runs to its own elements (`tf_ran_ours`).
"""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
EXPORT = FIXTURES / "dataset_graphdef" / "export"
RECORDED = json.loads((EXPORT / "export_tf.json").read_text())
OURS = json.loads((EXPORT / "ours.json").read_text())


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_dataset_export_tf", FIXTURES / "record_dataset_export_tf.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # (TF is imported only by its record_tf)
    return module


REC = _recorder()


@pytest.mark.parametrize("case", sorted(RECORDED["graphs"]))
def test_graph_as_tf_writes_it(case):
    g, _, _ = REC.build(tf, REC.GRAPHS, case)
    ours = REC.normalized(g.as_graph_def())
    theirs = RECORDED["graphs"][case]
    assert sorted(ours) == sorted(theirs)
    for name, node in theirs.items():
        mine = ours[name]
        assert (mine["op"], mine["input"]) == (node["op"], node["input"]), name
        # An attr at its OpDef's default may be left out; any written is TF's value.
        needed = {k: v for k, v in node["attr"].items() if k not in node["default"]}
        assert {k: mine["attr"].get(k) for k in needed} == needed, name
        assert {k: node["attr"].get(k) for k in mine["attr"]} == mine["attr"], name


def test_no_options_dataset_unless_with_options():
    assert "OptionsDataset" not in {n["op"] for n in RECORDED["graphs"]["no_options"].values()}
    g, _, _ = REC.build(tf, REC.GRAPHS, "no_options")
    assert "OptionsDataset" not in {n.op for n in g.as_graph_def().node}


@pytest.mark.parametrize("case", sorted(RECORDED["runs"]))
def test_run_gives_tf_elements(case):
    g, init, fetch = REC.build(tf, REC.RUNS, case)
    assert REC.drain(tf, g.as_graph_def(), init, fetch) == RECORDED["runs"][case]["values"]


TF_RAN_OURS = sorted(c for c, r in RECORDED["runs"].items() if r["tf_ran_ours"])


@pytest.mark.parametrize("case", TF_RAN_OURS)
def test_export_still_writes_what_tf_ran(case):
    g, _, _ = REC.build(tf, REC.RUNS, case)
    ran = tf.GraphDef()
    ran.ParseFromString((EXPORT / f"ours_{case}.pb").read_bytes())
    assert REC.normalized(g.as_graph_def()) == REC.normalized(ran)
    at = OURS[case]
    assert REC.drain(tf, ran, at["init"], at["next"]) == RECORDED["runs"][case]["values"]


def test_options_of_an_old_graph_merged_over_the_pipeline():
    """A GraphDef whose OptionsDatasets each hold the pipeline's options merged (as
    asyncflow wrote them before) still reads the same: the outer one says it all."""
    from asyncflow.data.options import serialized

    with tf.Graph().as_default() as g:
        ds = REC.RUNS["fusion_off_then_slack"](tf)
        it = tf.data.make_initializable_iterator(ds)
        init, fetch = it.initializer.name, it.get_next().name
    gd = g.as_graph_def()
    outer = next(n for n in gd.node if n.name == ds._variant.op.name)
    assert outer.op == "OptionsDataset"
    outer.attr["serialized_options"].s = serialized(ds.options())
    assert REC.drain(tf, gd, init, fetch) == RECORDED["runs"]["fusion_off_then_slack"]["values"]


@pytest.mark.parametrize("case", sorted(RECORDED["serialized"]))
def test_serialized_graph_as_tf_writes_it(case):
    """DatasetToGraphV2 (TF's `_as_serialized_graph`) writes the OptionsDatasets with
    TF's attrs and no colocation (whose names the GraphDef renames: TF's
    DatasetFromGraph refuses one naming a node it lacks)."""
    recorded = RECORDED["serialized"][case]
    gd = tf.GraphDef()
    gd.ParseFromString(REC.serialized_ours(case))
    ours = REC.serialized_nodes(gd)
    assert [n[:3] for n in ours] == [n[:3] for n in recorded["nodes"]]
    for mine, theirs in zip(ours, recorded["nodes"]):
        assert mine[4] is theirs[4] is False, mine[0]
        if theirs[3] is not None:
            options = bytes.fromhex(theirs[3][0])
            assert bytes.fromhex(mine[3][0]) == options
    # Dataset nodes: no device; metadata TF's name ("<op>:<id>" where none was given).
    assert REC.serialized_datasets(gd) == recorded["datasets"]


def test_serialized_metadata_ops_are_tfs():
    """The dataset ops DatasetToGraph names in a metadata attr are those whose TF 2.21
    OpDef has one (tests/fixtures/tf_op_attr_defaults.json)."""
    from asyncflow.ops.dataset_graph import TF_METADATA_OPS

    defaults = json.loads((FIXTURES / "tf_op_attr_defaults.json").read_text())
    tfs = {op for op, attrs in defaults.items() if "Dataset" in op and "metadata" in attrs}
    assert TF_METADATA_OPS == tfs


@pytest.mark.parametrize("case", sorted(RECORDED["serialized"]))
def test_serialized_graph_tf_ran_reads_back(case):
    """The GraphDef TF read to its elements (`tf_ran_ours`) reads back here too."""
    recorded = RECORDED["serialized"][case]
    assert recorded["tf_ran_ours"]
    raw = (EXPORT / f"ours_serialized_{case}.pb").read_bytes()
    with tf.Graph().as_default():
        v = tf.raw_ops.DatasetFromGraph(graph_def=raw)
        ds = tf.data.experimental.from_variant(v, tf.TensorSpec(None, tf.int64))
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        got = []
        with tf.Session() as s:
            with pytest.raises(tf.errors.OutOfRangeError):
                while True:
                    got.append(REC.plain(s.run(nxt)))
    assert got == recorded["values"]


@pytest.mark.parametrize("case", sorted(RECORDED["iterators"]))
def test_iterator_ops_as_tf_writes_them(case):
    """TF colocates an iterator made from a dataset (its IteratorV2 or OneShotIterator,
    MakeIterator, string handle and get_next) with the dataset, and from_structure's
    and from_string_handle's make_initializer and get_next with the iterator; a
    dataset's MakeIterator comes before its string handle."""
    assert REC.iterator_nodes(tf, case) == RECORDED["iterators"][case]


@pytest.mark.parametrize("case", sorted(RECORDED["names"]))
def test_dataset_nodes_named_as_tf_names_them(case):
    """The scalar constants (batch_size, drop_remainder, padding_value, row_shape,
    normalize_element/component_<i>, ...) and dataset ops carry TF's names, in TF's
    order."""
    assert REC.dataset_nodes(tf, case) == RECORDED["names"][case]


def test_serialized_defaults_are_tfs():
    """The attr defaults DatasetToGraph writes out are those of TF 2.21's OpDefs of the
    dataset ops (tests/fixtures/tf_op_attr_defaults.json)."""
    from asyncflow.ops.dataset_graph import TF_DATASET_DEFAULTS

    defaults = json.loads((FIXTURES / "tf_op_attr_defaults.json").read_text())
    tfs = {
        op: {k: v for k, v in attrs.items() if k != "metadata"}
        for op, attrs in defaults.items()
        if "Dataset" in op
    }
    assert TF_DATASET_DEFAULTS == {op: attrs for op, attrs in tfs.items() if attrs}
