"""A snapshot's shard_func / reader_func in GraphDefs, both ways: asyncflow's export names
them as TF's attrs (`shard_func`, `reader_func`; TF 2.21 ran the exported graph to the
same elements when this was written), and TF's GraphDef, whose shard_func captures a
tensor (`Tshard_func_args`), imports and runs here
(tests/fixtures/snapshot_graphdef/record_tf.py wrote it)."""

from __future__ import annotations

import pathlib

import pytest

import asyncflow as tf
from asyncflow.protos.graph_pb2 import GraphDef

pytestmark = pytest.mark.timeout(60)

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "snapshot_graphdef" / "tf_snapshot.pb"


def test_export_names_tfs_function_attrs(tmp_path):
    with tf.Graph().as_default() as g:
        d = tf.data.Dataset.range(6).apply(
            tf.data.experimental.snapshot(str(tmp_path / "s"), shard_func=lambda x: x % 2)
        )
        tf.data.make_one_shot_iterator(d).get_next()
        gd = g.as_graph_def()
    (node,) = [n for n in gd.node if n.op == "SnapshotDatasetV2"]
    assert node.attr["shard_func"].func.name in {f.signature.name for f in gd.library.function}
    assert node.attr["reader_func"].func.name in {f.signature.name for f in gd.library.function}
    assert not [k for k in node.attr if k.startswith(("shard_", "reader_")) and k not in (
        "shard_func", "reader_func", "reader_prefix")]  # fmt: skip


def test_tfs_graph_def_with_a_captured_shard_argument_runs(tmp_path):
    gd = GraphDef.FromString(FIXTURE.read_bytes())
    moved = 0
    for node in gd.node:  # the snapshot's directory: under tmp_path
        if node.op == "Const" and node.attr["value"].tensor.string_val == [
            b"/tmp/snapshot_graphdef_rec"
        ]:
            node.attr["value"].tensor.string_val[0] = str(tmp_path / "s").encode()
            moved += 1
    assert moved == 1
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        (nxt,) = [op for op in g.get_operations() if op.type == "IteratorGetNext"]
        with tf.Session() as sess:
            got = [int(sess.run(nxt.outputs[0])) for _ in range(6)]
    assert got == [0, 1, 2, 3, 4, 5]
