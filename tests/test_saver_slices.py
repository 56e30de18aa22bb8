"""Saving and restoring partitioned variables as TF's V2 checkpoints do (OSDI §4.2,
§4.3): each slice under the whole variable's name with its slice spec.

The references are checkpoints TF 2.21 wrote (tests/fixtures/formats_tf/partitioned, one
shard; tests/fixtures/ps_tf/sharded, slices on two devices merged into two shards):
ours are byte for byte the same files, so TF reads what we write; and we restore TF's
into the same partitioning, another one, or none."""

import json
import os
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow import checkpoint_format as cf
from asyncflow.ops import io_ops

pytestmark = pytest.mark.timeout(60)

FIX = pathlib.Path(__file__).parent / "fixtures"
FORMATS = json.loads((FIX / "formats_tf" / "expected.json").read_text())["partitioned"]
PS = json.loads((FIX / "ps_tf.json").read_text())
FULL = np.array(PS["embedding"]["full"], np.float32)
COL = np.arange(12, dtype=np.int32).reshape(2, 6)


def _files(prefix):
    d = pathlib.Path(prefix).parent
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.name != "checkpoint"}


def test_one_shard_checkpoint_is_tfs_byte_for_byte(graph, tmp_path):
    full = {k: np.array(v) for k, v in FORMATS["values"].items()}
    pvs = {
        "part": af.get_variable("part", [5, 3], af.float32, af.zeros_initializer(),
                                partitioner=af.fixed_size_partitioner(2)),
        "cols": af.get_variable("cols", [2, 6], af.int64, af.zeros_initializer(),
                                partitioner=af.fixed_size_partitioner(3, axis=1)),
        "big": af.get_variable("big", [300, 1], af.float64, af.zeros_initializer(),
                               partitioner=af.fixed_size_partitioner(3)),
    }  # fmt: skip
    af.Variable([7.0], name="plain")
    saver = af.train.Saver()
    with af.Session(graph=graph) as s:
        s.run(af.global_variables_initializer())
        for name, pv in pvs.items():
            s.run(pv.assign(full[name].astype(pv.dtype.as_numpy_dtype)))
        prefix = saver.save(s, str(tmp_path / "model.ckpt"), write_meta_graph=False)
    assert _files(prefix) == _files(FIX / "formats_tf" / "partitioned" / "model.ckpt")


def _two_ps_graph(emb_parts=3, col_parts=2):
    turn = iter(range(100))

    def two_cpus(op):  # variables alternate between CPU:0 and CPU:1, as on two ps tasks
        return f"/device:CPU:{next(turn) % 2}" if op.type == "VariableV2" else "/device:CPU:0"

    with af.device(two_cpus):
        emb = af.get_variable("emb", [10, 4], partitioner=af.fixed_size_partitioner(emb_parts))
        by_cols = af.fixed_size_partitioner(col_parts, axis=1)
        col = af.get_variable("col", [2, 6], af.int32, partitioner=by_cols)
        plain = af.Variable([0.0, 0.0], name="plain")
    return emb, col, plain


def test_sharded_save_across_devices_is_tfs_byte_for_byte(graph, tmp_path):
    emb, col, plain = _two_ps_graph()
    assert {v.op.name: v.device for v in af.global_variables()} == PS["sharded_devices"]
    saver = af.train.Saver(sharded=True)
    with af.Session(graph=graph, config=af.ConfigProto(device_count={"CPU": 2})) as s:
        s.run(af.global_variables_initializer())
        s.run([emb.assign(FULL), col.assign(COL), plain.assign([5.0, 6.0])])
        prefix = saver.save(s, str(tmp_path / "model.ckpt"), write_meta_graph=False)
    assert sorted(os.listdir(tmp_path)) == PS["sharded_files"]
    assert _files(prefix) == _files(FIX / "ps_tf" / "sharded" / "model.ckpt")


@pytest.mark.parametrize("parts", [(3, 2), (2, 3), (1, 1), (4, 6)])
def test_tfs_sharded_checkpoint_restores_into_any_partitioning(graph, parts):
    emb, col, plain = _two_ps_graph(*parts)
    with af.Session(graph=graph, config=af.ConfigProto(device_count={"CPU": 2})) as s:
        af.train.Saver().restore(s, str(FIX / "ps_tf" / "sharded" / "model.ckpt"))
        np.testing.assert_array_equal(s.run(emb.as_tensor()), FULL)
        np.testing.assert_array_equal(s.run(col.as_tensor()), COL)
        np.testing.assert_array_equal(s.run(plain), [5.0, 6.0])


def test_tfs_partitioned_checkpoint_restores_into_partitioned_variables(graph):
    big = af.get_variable("big", [300, 1], af.float64, partitioner=af.fixed_size_partitioner(7))
    part = af.get_variable("part", [5, 3], partitioner=af.fixed_size_partitioner(5))
    saver = af.train.Saver([big, part])  # a PartitionedVariable in var_list: its slices
    with af.Session(graph=graph) as s:
        saver.restore(s, str(FIX / "formats_tf" / "partitioned" / "model.ckpt"))
        np.testing.assert_array_equal(s.run(big.as_tensor()), FORMATS["values"]["big"])
        np.testing.assert_array_equal(s.run(part.as_tensor()), FORMATS["values"]["part"])


def test_whole_checkpoint_restores_into_slices_and_back(graph, tmp_path):
    w = af.Variable(FULL, name="emb")
    with af.Session(graph=graph) as s:
        s.run(w.initializer)
        prefix = af.train.Saver().save(s, str(tmp_path / "whole"), write_meta_graph=False)
    with af.Graph().as_default() as g2:
        emb = af.get_variable("emb", [10, 4], partitioner=af.fixed_size_partitioner(4))
        with af.Session(graph=g2) as s:
            af.train.Saver().restore(s, prefix)
            np.testing.assert_array_equal(s.run(emb.as_tensor()), FULL)
            assert [p.shape.as_list() for p in emb] == [[3, 4], [3, 4], [2, 4], [2, 4]]
            np.testing.assert_array_equal(s.run(list(emb)[1]), FULL[3:6])


def test_slice_specs_are_checked(graph, tmp_path):
    prefix = str(tmp_path / "x")
    with af.Session(graph=graph) as s:
        bad = io_ops.save_v2(prefix, ["a"], ["4 2 0,3:-"], [np.zeros((2, 2), np.float32)])
        with pytest.raises(af.errors.InvalidArgumentError, match="does not match the shape"):
            s.run(bad)
        outside = io_ops.save_v2(prefix, ["a"], ["4 2 3,2:-"], [np.zeros((2, 2), np.float32)])
        with pytest.raises(af.errors.InvalidArgumentError, match="outside"):
            s.run(outside)
        # Two halves of "a" in one SaveV2; reading one back, and a slice of it.
        one, zero = np.ones((2, 2), np.float32), np.zeros((2, 2), np.float32)
        halves = io_ops.save_v2(prefix, ["a", "a"], ["4 2 0,2:-", "4 2 2,2:-"], [one, zero])
        s.run(halves)
        (whole,) = io_ops.restore_v2(prefix, ["a"], [""], [af.float32])
        (row,) = io_ops.restore_v2(prefix, ["a"], ["4 2 1,2:1,1"], [af.float32])
        np.testing.assert_array_equal(s.run(whole), [[1, 1], [1, 1], [0, 0], [0, 0]])
        np.testing.assert_array_equal(s.run(row), [[1], [0]])
    index = cf.read_index(prefix)
    assert [p["start"] for p in index["tensors"]["a"]["slices"]] == [[0, 0], [2, 0]]
