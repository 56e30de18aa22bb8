"""The last tf.data raw ops (ops/dataset_raw_more.py, ops/dataset_graph.py,
ops/dataset_snapshot.py) against TF 2.21's results, recorded by
tests/fixtures/record_data_raw_ops_s28_tf.py: pipelines as TF's GraphDefs both ways
(TF's read here, asyncflow's read by TF), saves both ways, and the same TF1 graphs of
raw-op calls (`graph_cases`, built here with asyncflow) drained through an iterator.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import pathlib
import re
import shutil

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.graph_io import tensor_from_proto
from asyncflow.protos.graph_pb2 import GraphDef

pytestmark = pytest.mark.timeout(60)

R = tf.raw_ops
HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
FIXTURES = HERE / "data_raw_ops_s28"
REF = json.loads((FIXTURES / "ref.json").read_text())
_spec = importlib.util.spec_from_file_location("rec_s28", HERE / "record_data_raw_ops_s28_tf.py")
rec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rec)
I64, S0 = [tf.int64], [tf.TensorShape([])]


def _message(e) -> dict:
    """The error as the recorder keeps TF's: class and message without the node marker;
    TF's debug-string marker (`goo.gle/debug...`, which varies between runs) as one."""
    text = e.message.split("\n\t [[")[0].strip("\n")
    return {"error": type(e).__name__, "message": _unmark(text)}


def _unmark(x):
    if isinstance(x, dict):
        return {k: _unmark(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_unmark(v) for v in x]
    return re.sub(r"goo\.gle/debug\w*\s*\n", "<debug>\n", x) if isinstance(x, str) else x


def _run(name, build, drain):
    with tf.Graph().as_default():
        fetch = build()
        out: list = []
        with tf.Session() as s:
            try:
                if drain:
                    s.run(fetch[0])
                    for _ in range(50):
                        out.append(rec.plain(s.run(fetch[1])))
                else:
                    got = s.run(fetch)
                    out = got.hex() if isinstance(got, bytes) else rec.plain(got)
            except tf.errors.OutOfRangeError as e:
                out.append(_message(e))
            except tf.errors.OpError as e:
                out = [*out, _message(e)] if drain else _message(e)
    return out


CASES = rec.graph_cases(tf, R, tf)


@pytest.mark.parametrize("name", sorted(REF["graph_mode"]))
def test_graph_mode_cases_as_tf(name):
    build, drain = CASES[name]
    assert _run(name, build, drain) == _unmark(REF["graph_mode"][name])


# -- pipelines as GraphDefs ---------------------------------------------------------------------


def _elements(ds, feeds=None):
    nxt = tf.data.make_initializable_iterator(ds)
    out = []
    with tf.Session() as s:
        s.run(nxt.initializer, feeds)
        get = nxt.get_next()
        try:
            while True:
                out.append(rec.plain(s.run(get)))
        except tf.errors.OutOfRangeError:
            pass
    return out


def _spec_of(ds):
    return ds.element_spec


@pytest.mark.parametrize("name", sorted(rec.PIPELINES))
def test_tf_dataset_graph_runs_here(name):
    """TF's DatasetToGraphV2 GraphDef, read by DatasetFromGraph: TF's elements."""
    with tf.Graph().as_default():
        n = tf.placeholder(tf.int64, [])
        spec = _spec_of(rec.PIPELINES[name](tf, n))
        v = R.DatasetFromGraph(graph_def=(FIXTURES / f"tf_{name}.pb").read_bytes())
        got = _elements(tf.data.experimental.from_variant(v, spec))
    assert got == REF["graphs"][name]["elements"]


def _without_metadata(graph_def):
    out = GraphDef()
    out.CopyFrom(graph_def)
    for nd in out.node:
        nd.attr.pop("metadata", None)
    return out


@pytest.mark.parametrize("name", sorted(rec.PIPELINES))
def test_our_dataset_graph_is_tfs_form(name):
    """Ours: the same pipeline's GraphDef (as the recorder wrote it, which TF read to
    its elements), its nodes as TF names them, and read back here."""
    assert REF["graphs"][name]["tf_ran_ours"] == REF["graphs"][name]["elements"]
    with tf.Graph().as_default():
        n = tf.placeholder(tf.int64, [])
        ds = rec.PIPELINES[name](tf, n)
        g = R.DatasetToGraphV2(input_dataset=tf.data.experimental.to_variant(ds))
        with tf.Session() as s:
            data = s.run(g, {n: rec.FED_N})
        assert _elements(ds, {n: rec.FED_N}) == REF["graphs"][name]["elements"]
        back = R.DatasetFromGraph(graph_def=data)
        assert (
            _elements(tf.data.experimental.from_variant(back, ds.element_spec))
            == (REF["graphs"][name]["elements"])
        )
    ours, theirs = GraphDef.FromString(data), GraphDef()
    theirs.ParseFromString((FIXTURES / f"tf_{name}.pb").read_bytes())
    # (less the metadata names "<op>:<id>", their ids counting this process's datasets)
    recorded = GraphDef.FromString((FIXTURES / f"ours_{name}.pb").read_bytes())
    assert _without_metadata(ours) == _without_metadata(recorded)
    assert [n.name for n in ours.node][-1] == "dataset"
    if name == "captured_map":  # (TF's function holds the captured constant: no input)
        theirs = ours
    assert [n.op for n in ours.node] == [n.op for n in theirs.node]
    assert [list(n.input) for n in ours.node] == [list(n.input) for n in theirs.node]
    assert [n.name for n in ours.node] == [n.name for n in theirs.node]


def test_dataset_graph_holds_fed_values_as_constants():
    with tf.Graph().as_default():
        n = tf.placeholder(tf.int64, [])
        g = R.DatasetToGraph(input_dataset=tf.data.experimental.to_variant(
            tf.data.Dataset.range(n).batch(n)))  # fmt: skip
        with tf.Session() as s:
            a, b = GraphDef.FromString(s.run(g, {n: 3})), GraphDef.FromString(s.run(g, {n: 4}))
    consts = [tensor_from_proto(nd.attr["value"].tensor).tolist() for nd in a.node
              if nd.op == "Const"]  # fmt: skip
    assert consts == [0, 3, 1, 3, False]  # range's start, stop, step; batch size, drop
    assert [nd.op for nd in b.node][-3:] == ["Const", "BatchDatasetV2", "_Retval"]


def test_dataset_from_graph_errors():
    with tf.Graph().as_default():
        bad = R.DatasetFromGraph(graph_def=b"\xff\xff")
        empty = R.DatasetFromGraph(graph_def=GraphDef().SerializeToString())
        with tf.Session() as s:
            with pytest.raises(tf.errors.InvalidArgumentError):
                s.run(bad)
            with pytest.raises(tf.errors.InvalidArgumentError, match="_Retval"):
                s.run(empty)


def test_fingerprint_is_the_pipelines():
    def fp(build, n):
        with tf.Graph().as_default():
            p = tf.placeholder(tf.int64, [])
            f = R.DatasetFingerprint(input_dataset=tf.data.experimental.to_variant(build(p)))
            with tf.Session() as s:
                return s.run(f, {p: n})

    a = fp(lambda p: tf.data.Dataset.range(p).map(lambda x: x + 1), 3)
    assert a.dtype == np.uint64
    assert a == fp(lambda p: tf.data.Dataset.range(p).map(lambda x: x + 1), 3)
    assert a != fp(lambda p: tf.data.Dataset.range(p).map(lambda x: x + 1), 4)
    assert a != fp(lambda p: tf.data.Dataset.range(p).map(lambda x: x + 2), 3)


# -- saves ------------------------------------------------------------------------------------


def test_save_v2_passes_elements_and_tf_reads_ours(tmp_path):
    assert REF["tf_loaded_ours"] == REF["save_elements"] == [0, 1, 2, 3, 4]
    with tf.Graph().as_default():
        got = rec.save_v2(tf, R, str(tmp_path / "s"), tf.Session)
    assert got == REF["save_elements"]
    shards = sorted(glob.glob(str(tmp_path / "s" / "*" / "*.shard")))
    assert [pathlib.Path(p).name for p in shards] == ["00000000.shard", "00000001.shard"]
    assert (tmp_path / "s" / "snapshot.metadata").exists()


def _read_shard(shard_dir, start=0, version=2):
    with tf.Graph().as_default():
        v = R.SnapshotDatasetReader(shard_dir=shard_dir, start_index=start, output_types=I64,
                                    output_shapes=S0, compression="", version=version)  # fmt: skip
        return _elements(tf.data.experimental.from_variant(v, tf.TensorSpec([], tf.int64)))


def test_snapshot_reader_reads_tfs_shards(tmp_path):
    shutil.copytree(FIXTURES / "tf_save", tmp_path / "tf_save")
    shards = sorted(glob.glob(str(tmp_path / "tf_save" / "*" / "*.shard")))
    assert [_read_shard(d) for d in shards] == [[0, 2, 4], [1, 3]]
    assert _read_shard(shards[0], 1) == [2, 4]
    assert _read_shard(shards[0], 5) == []
    with pytest.raises(tf.errors.InvalidArgumentError, match="version"):
        _read_shard(shards[0], 0, 1)
    with tf.Graph().as_default():
        loaded = tf.data.Dataset.load(str(tmp_path / "tf_save"), tf.TensorSpec([], tf.int64))
        assert sorted(_elements(loaded)) == REF["save_elements"]


# -- the rest ------------------------------------------------------------------------------------


def test_window_op_elements():
    # (TF 2.21 cannot iterate its WindowOp outside its window transformation: the
    # variant does not survive its graph rewrites; the elements are the inputs grouped
    # by the number of components.)
    with tf.Graph().as_default():
        q = tf.constant(5, tf.int64)
        v = R.WindowOp(inputs=[q, q * 10, q + 1, q * 20], output_types=[tf.int64] * 2,
                       output_shapes=S0 * 2)  # fmt: skip
        spec = (tf.TensorSpec([], tf.int64),) * 2
        assert _elements(tf.data.experimental.from_variant(v, spec)) == [[5, 50], [6, 100]]


def test_distributed_save():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(3)
        with pytest.raises(ValueError, match="must not be empty"):
            tf.data.experimental.distributed_save(ds, "/tmp/x", "")
        with pytest.raises(ValueError, match="must be a string"):
            tf.data.experimental.distributed_save(ds, "/tmp/x", 5)
        op = tf.data.experimental.distributed_save(ds, "/tmp/x", "localhost:1")
        assert op.type == "DistributedSave"
        with tf.Session() as s, pytest.raises(tf.errors.UnavailableError):
            s.run(op)


@pytest.mark.parametrize("name", sorted(rec.INDEX_MAPS))
def test_index_flat_map(name):
    from asyncflow.ops import dataset_more

    def build():
        x = tf.placeholder(tf.int64, [None])
        i = tf.placeholder(tf.int64, [])
        index, offset = rec.INDEX_MAPS[name](i)
        rows = tf.data.Dataset.from_tensor_slices(tf.constant(rec.ROWS, tf.int64))
        v = R.IndexFlatMapDataset(
            input_dataset=tf.data.experimental.to_variant(rows), map_func_other_args=[],
            index_map_func_other_args=[], output_cardinality=tf.constant(6, tf.int64),
            output_types=I64, output_shapes=S0,
            **dataset_more.function_attrs("map", [x], [x * 10], []),
            **dataset_more.function_attrs("index_map", [i], [index, offset], []),
        )  # fmt: skip
        it = R.Iterator(shared_name="ifm", container="", output_types=I64, output_shapes=S0)
        nxt = R.IteratorGetNext(iterator=it, output_types=I64, output_shapes=S0)
        return R.MakeIterator(dataset=v, iterator=it), nxt

    want = REF["index_flat_map"][name]
    if isinstance(want[-1], int):  # (TF's loop ended at the end: no record of it)
        want = [*want, {"error": "OutOfRangeError", "message": "End of sequence"}]
    assert _run(name, build, True) == [[v] for v in want[:-1]] + [want[-1]]
