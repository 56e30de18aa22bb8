"""TF's V1 checkpoint format (asyncflow/checkpoint_v1.py, ops/io_v1_ops.py).

tests/fixtures/checkpoint_v1/ holds what TF 2.21 wrote and read (recorded by
tests/fixtures/record_checkpoint_v1_tf.py): model.ckpt, a Saver(write_version=V1) of
the variables of checkpoint_v1_cases.py (one partitioned in two) and its MetaGraph
model.ckpt.meta; raw.ckpt, a Save op's file; tf.json, TF's readings of both and its
errors for damaged copies.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import checkpoint_v1, errors
from asyncflow.protos.saved_tensor_slice_pb2 import SavedTensorSlices

FIX = Path(__file__).parent / "fixtures" / "checkpoint_v1"
TF = json.loads((FIX / "tf.json").read_text())
sys.path.insert(0, str(FIX.parent))
from checkpoint_v1_cases import variables  # noqa: E402


def _decode(v):
    shape = tuple(v["shape"])
    if v["dtype"] == "string":
        return np.array([x.encode() for x in v["value"]], dtype=object).reshape(shape)
    if v["dtype"].startswith("complex"):
        return np.array([complex(*x) for x in v["value"]], dtype=v["dtype"]).reshape(shape)
    return np.array(v["value"], dtype=v["dtype"]).reshape(shape)


def _same(got, want):
    got = np.asarray(got)
    assert got.shape == want.shape
    assert got.dtype == want.dtype or want.dtype == object
    np.testing.assert_array_equal(got, want)


@pytest.fixture
def ckpt(tmp_path):
    """A copy of TF's model.ckpt (tests must not touch the fixture)."""
    path = tmp_path / "model.ckpt"
    shutil.copy(FIX / "model.ckpt", path)
    return str(path)


def test_list_variables_and_dtypes_as_tf(ckpt):
    assert [[n, s] for n, s in tf.train.list_variables(ckpt)] == TF["list_variables"]
    reader = tf.train.NewCheckpointReader(ckpt)
    assert {k: v.name for k, v in reader.get_variable_to_dtype_map().items()} == TF["dtypes"]


@pytest.mark.parametrize("name", sorted(TF["values"]))
def test_reader_get_tensor_as_tf(ckpt, name):
    """TF's reader of V1 files refuses sliced tensors, float16 and complex64."""
    reader = tf.train.NewCheckpointReader(ckpt)
    want = TF["values"][name]
    if "error" in want:
        with pytest.raises(getattr(errors, want["error"])) as e:
            reader.get_tensor(name)
        assert e.value.message == want["message"]
        return
    _same(reader.get_tensor(name), _decode(want))
    if name != "scope/b":
        _same(tf.train.load_variable(ckpt, name), _decode(want))


def test_reader_errors_as_tf(ckpt):
    reader = tf.train.NewCheckpointReader(ckpt)
    with pytest.raises(errors.NotFoundError) as e:
        reader.get_tensor("nope")
    assert e.value.message == TF["missing_key"]["message"]
    with pytest.raises(errors.NotFoundError) as e:
        tf.train.NewCheckpointReader(ckpt + "-nothing")
    assert e.value.message == TF["no_file"]["message"].replace("$FIX", os.path.dirname(ckpt))


def test_saver_restores_a_tf_v1_checkpoint(ckpt):
    with tf.Graph().as_default():
        variables(tf)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, ckpt)
            for v in tf.global_variables():
                _same(sess.run(v), _decode(TF["restored"][v.op.name]))


@pytest.mark.parametrize("parts", [3, 1])
def test_partitioned_variable_restores_in_any_partitioning(ckpt, parts):
    with tf.Graph().as_default():
        p = tf.get_variable(
            "p",
            shape=[5, 2],
            initializer=tf.zeros_initializer(),
            partitioner=tf.fixed_size_partitioner(parts),
        )
        with tf.Session() as sess:
            tf.train.Saver([p] if parts == 1 else None).restore(sess, ckpt)
            got = sess.run(tf.convert_to_tensor(p))
    _same(got, _decode(TF[f"restored_p_in_{parts}"]))


def test_init_from_checkpoint_reads_v1(ckpt):
    with tf.Graph().as_default():
        a = tf.get_variable("new_a", shape=[2, 3], initializer=tf.zeros_initializer())
        tf.train.init_from_checkpoint(ckpt, {"a": "new_a"})
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            _same(sess.run(a), _decode(TF["values"]["a"]))


def test_saver_v1_writes_tf_bytes(ckpt, tmp_path):
    """Restore TF's file, save it again as V1: the same bytes (TF reads ours)."""
    out = tmp_path / "again" / "model.ckpt"
    out.parent.mkdir()
    with tf.Graph().as_default():
        variables(tf)
        saver = tf.train.Saver(write_version=tf.train.SaverDef.V1)
        assert saver.saver_def.version == tf.train.SaverDef.V1
        with tf.Session() as sess:
            saver.restore(sess, ckpt)
            path = saver.save(sess, str(out), write_meta_graph=False)
    assert path == str(out)
    assert out.read_bytes() == (FIX / "model.ckpt").read_bytes()
    assert tf.train.latest_checkpoint(str(out.parent)) == str(out)


def test_sharded_v1_saver_writes_one_file_per_device(tmp_path):
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0], name="v")
        saver = tf.train.Saver(write_version=tf.train.SaverDef.V1, sharded=True, max_to_keep=1)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            path = saver.save(sess, str(tmp_path / "sh"), global_step=1, write_meta_graph=False)
            # (as TF 2.21 does: the checkpoint is its shards' pattern, and max_to_keep
            # removes an older one's shard files)
            assert path == str(tmp_path / "sh-1-?????-of-00001")
            assert (tmp_path / "sh-1-00000-of-00001").is_file()
            sess.run(v.assign([0.0, 0.0]))
            saver.restore(sess, path)
            assert sess.run(v).tolist() == [1.0, 2.0]
            saver.save(sess, str(tmp_path / "sh"), global_step=2, write_meta_graph=False)
    assert not (tmp_path / "sh-1-00000-of-00001").exists()  # max_to_keep removed it


@pytest.mark.parametrize("kind", sorted(TF["damaged"]))
def test_damaged_files_raise_data_loss(ckpt, tmp_path, kind):
    data = (FIX / "model.ckpt").read_bytes()
    raw = {
        "truncated": data[:-10],
        "bad_magic": data[:-1] + bytes([data[-1] ^ 1]),
        "flipped_byte": data[:40] + bytes([data[40] ^ 0x55]) + data[41:],
        "empty": b"",
    }[kind]
    path = tmp_path / kind
    path.write_bytes(raw)
    with pytest.raises(errors.DataLossError) as e:
        tf.train.NewCheckpointReader(str(path)).get_tensor("a")
    want = TF["damaged"][kind]
    if want["error"] == "DataLossError":
        assert e.value.message == want["message"].replace("$TMP", str(tmp_path))
    else:
        # TF's table reader skips block checksums: the damaged meta then fails to
        # parse (InternalError).  asyncflow checks them, as the V2 reader does.
        assert want["error"] == "InternalError"
        assert "checksum" in e.value.message


def _crafted(tmp_path, shape, count):
    """A V1 file whose only tensor claims `shape` but holds `count` float values."""
    head = SavedTensorSlices()
    head.meta.versions.producer = 1
    m = head.meta.tensor.add(name="big", type=tf.float32.as_datatype_enum)
    for d in shape:
        m.shape.dim.add(size=d)
    sl = m.slice.add()
    for _ in shape:
        sl.extent.add()
    data = SavedTensorSlices()
    data.data.name = "big"
    data.data.slice.CopyFrom(sl)
    data.data.data.float_val.extend([1.0] * count)
    key = checkpoint_v1.cf.slice_key("big", [0] * len(shape), [-1] * len(shape))
    table = checkpoint_v1.cf.encode_table(
        sorted([(b"", head.SerializeToString()), (key, data.SerializeToString())])
    )
    path = tmp_path / "crafted"
    path.write_bytes(table)
    return str(path)


def test_sizes_in_the_file_are_bounded_by_its_values(tmp_path):
    """A shape of 2**40 elements with one value saved: DataLossError, nothing allocated."""
    path = _crafted(tmp_path, [1 << 20, 1 << 20], 1)
    with pytest.raises(errors.DataLossError, match="holds 1 values, not 1099511627776"):
        tf.train.NewCheckpointReader(path).get_tensor("big")
    with tf.Graph().as_default():
        r = tf.raw_ops.Restore(file_pattern=path, tensor_name="big", dt=tf.float32)
        with tf.Session() as sess, pytest.raises(errors.DataLossError):
            sess.run(r)
    ok = _crafted(tmp_path, [2, 2], 4)
    assert tf.train.NewCheckpointReader(ok).get_tensor("big").tolist() == [[1, 1], [1, 1]]


def test_raw_ops_as_tf(tmp_path):
    raw_path = str(tmp_path / "raw.ckpt")
    model = str(tmp_path / "model.ckpt")
    shutil.copy(FIX / "model.ckpt", model)
    with tf.Graph().as_default():
        save = tf.raw_ops.Save(
            filename=raw_path,
            tensor_names=["x", "y", "z"],
            data=[tf.constant([[1, 2], [3, 4]], tf.int32), tf.constant(2.5), tf.constant(["u"])],
        )
        r = tf.raw_ops.Restore(file_pattern=raw_path, tensor_name="x", dt=tf.int32)
        rs = tf.raw_ops.RestoreSlice(
            file_pattern=raw_path, tensor_name="x", shape_and_slice="2 2 1,1:-", dt=tf.int32
        )
        pr = tf.raw_ops.RestoreSlice(
            file_pattern=model, tensor_name="p", shape_and_slice="5 2 2,3:0,1", dt=tf.float32
        )
        bad = tf.raw_ops.Restore(file_pattern=raw_path, tensor_name="y", dt=tf.int32)
        spec = tf.raw_ops.ShardedFilespec(basename="/ckpt/m", num_shards=3)
        with tf.Session() as sess:
            sess.run(save)
            _same(sess.run(r), _decode(TF["restore"]))
            _same(sess.run(rs), _decode(TF["restore_slice"]))
            _same(sess.run(pr), _decode(TF["restore_slice_partitioned"]))
            with pytest.raises(errors.InvalidArgumentError) as e:
                sess.run(bad)
            assert e.value.message.split("\n")[0] == TF["restore_bad_dtype"]["message"]
            assert sess.run(spec).decode() == TF["sharded_filespec"]
    assert Path(raw_path).read_bytes() == (FIX / "raw.ckpt").read_bytes()


def _data_blocks(path):
    """[(block size, entry count)] of a table file, from its index block."""
    cf = checkpoint_v1.cf
    d = Path(path).read_bytes()
    footer = d[-48:]
    pos, handles = 0, []
    for _ in range(2):
        off, pos = cf._get_varint(footer, pos, 40, path)
        size, pos = cf._get_varint(footer, pos, 40, path)
        handles.append((off, size))
    out = []
    for _, h in cf._block_entries(cf._read_block(d, handles[1], path), path):
        off, q = cf._get_varint(h, 0, len(h), path)
        size, _ = cf._get_varint(h, q, len(h), path)
        out.append(
            (size, len(list(cf._block_entries(cf._read_block(d, (off, size), path), path))))
        )
    return out


@pytest.mark.parametrize(
    "sizes, blocks",
    [  # recorded from TF 2.21's V1 Saver: float32 variables v0, v1, ... of these sizes
        ([1000, 131064], [(528374, 3)]),
        ([1000, 131065], [(4086, 2), (524302, 1)]),
        ([10000] * 8, [(280397, 8), (40042, 1)]),
        ([70000, 1000, 1000], [(280109, 2), (8066, 2)]),
    ],
)
def test_v1_file_blocks_as_tf(tmp_path, sizes, blocks):
    """TF's table builder closes a block past 256 KiB, and gives an entry over 512 KiB a
    block of its own."""
    with tf.Graph().as_default():
        vs = [tf.Variable(np.full(n, i, np.float32), name=f"v{i}") for i, n in enumerate(sizes)]
        saver = tf.train.Saver(write_version=tf.train.SaverDef.V1)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            path = saver.save(sess, str(tmp_path / "m.ckpt"), write_meta_graph=False)
            assert _data_blocks(path) == blocks
            sess.run([v.assign(np.zeros(n, np.float32)) for v, n in zip(vs, sizes)])
            saver.restore(sess, path)
            assert [float(sess.run(v)[-1]) for v in vs] == list(range(len(sizes)))


def test_restore_errors_as_tf(ckpt):
    """Messages recorded from TF 2.21 (Restore, RestoreV2 and RestoreSlice on model.ckpt)."""
    with tf.Graph().as_default():
        missing = tf.raw_ops.Restore(file_pattern=ckpt, tensor_name="nope", dt=tf.float32)
        missing_v2 = tf.raw_ops.RestoreV2(
            prefix=ckpt, tensor_names=["nope"], shape_and_slices=[""], dtypes=[tf.float32]
        )
        wrong_dtype = tf.raw_ops.RestoreV2(
            prefix=ckpt, tensor_names=["a"], shape_and_slices=[""], dtypes=[tf.int32]
        )
        wrong_shape = tf.raw_ops.RestoreSlice(
            file_pattern=ckpt, tensor_name="a", shape_and_slice="3 3 0,1:-", dt=tf.float32
        )
        cases = [
            (
                missing,
                errors.NotFoundError,
                f'Tensor name "nope" not found in checkpoint files {ckpt}',
            ),
            (
                missing_v2,
                errors.NotFoundError,
                f'Tensor name "nope" not found in checkpoint files {ckpt}',
            ),
            (
                wrong_dtype,
                errors.InvalidArgumentError,
                "Expected to restore a tensor of type int32, got a tensor of type float instead: "
                "tensor_name = a",
            ),
            (
                wrong_shape,
                errors.InvalidArgumentError,
                "Shape in shape_and_slice spec does not match the shape in the save file: [3,3], "
                "save file shape: [2,3]",
            ),
        ]
        with tf.Session() as s:
            for t, cls, message in cases:
                with pytest.raises(cls) as e:
                    s.run(t)
                assert e.value.message.split("\n")[0] == message


def test_checkpoint_helpers_take_a_sharded_v1_pattern(tmp_path):
    with tf.Graph().as_default():
        tf.Variable([1.0], name="v")
        saver = tf.train.Saver(write_version=tf.train.SaverDef.V1, sharded=True)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            path = saver.save(sess, str(tmp_path / "m"), write_meta_graph=False)
    assert tf.train.checkpoint_exists(path)
    first = tmp_path / "m-00000-of-00001"
    assert tf.train.get_checkpoint_mtimes([path]) == [first.stat().st_mtime]
    assert tf.train.list_variables(path) == [("v", [1])]


def test_tf_meta_graph_with_a_v1_saver(ckpt, tmp_path):
    """TF's MetaGraph of model.ckpt (its Saver: SaveSlices, RestoreV2, version V1) imports,
    restores TF's values and saves TF's bytes again."""
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(str(FIX / "model.ckpt.meta"))
        assert saver.saver_def.version == tf.train.SaverDef.V1
        assert {op.type for op in g.get_operations()} >= {"SaveSlices", "RestoreV2"}
        with tf.Session() as s:
            saver.restore(s, ckpt)
            for name in ("a", "s", "scope/b", "c", "p/part_1"):
                _same(s.run(name + ":0"), _decode(TF["restored"][name]))
            again = saver.save(s, str(tmp_path / "again.ckpt"), write_meta_graph=False)
    assert Path(again).read_bytes() == (FIX / "model.ckpt").read_bytes()
