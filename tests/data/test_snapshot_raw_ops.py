"""The snapshot raw ops TF 2.21 has and asyncflow lacked (ops/dataset_snapshot_v1.py,
ops/dataset_snapshot.py): the v1 SnapshotDataset's files both ways, a distributed
snapshot's chunk files both ways, the chunk listing's order, and the errors, against
tests/fixtures/record_snapshot_raw_ops_tf.py's recording."""

from __future__ import annotations

import glob
import json
import os
import pathlib
import shutil
import struct

import numpy as np
import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "snapshot_raw_ops"
REF = json.loads((FIXTURES / "ref.json").read_text())
COMPS = {"none": "", "gzip": "GZIP", "snappy": "SNAPPY"}
WANT = [[0, "0"], [1, "1"], [2, "2"], [3, "3"]]
SPEC = (tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.string))
R = tf.raw_ops


def _elements(ds):
    it = tf.data.make_initializable_iterator(ds)
    nxt = it.get_next()
    out = []
    with tf.Session() as s:
        s.run(it.initializer)
        while True:
            try:
                out.append(s.run(nxt))
            except tf.errors.OutOfRangeError:
                break
    if out and isinstance(out[0], tuple):
        return [[int(a), b.decode()] for a, b in out]
    return [int(x) for x in out]


def _v1(path, base=None, comp="", name="fix", **kw):
    base = base or tf.data.Dataset.range(4).map(lambda x: (x, tf.as_string(x)))
    v = R.SnapshotDataset(input_dataset=tf.data.experimental.to_variant(base), path=str(path),
                          output_types=[tf.int64, tf.string], output_shapes=[[], []],
                          compression=comp, snapshot_name=name, **kw)  # fmt: skip
    return tf.data.experimental.from_variant(v, SPEC)


def _other(n=3):
    return tf.data.Dataset.range(100, 100 + n).map(lambda x: (x, tf.as_string(x)))


# -- the v1 SnapshotDataset --------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(COMPS))
def test_v1_reads_tfs_files(tmp_path, name):
    shutil.copytree(FIXTURES / f"tf_v1_{name}", tmp_path / "s")
    with tf.Graph().as_default():
        assert _elements(_v1(tmp_path / "s", _other(), COMPS[name], mode="read")) == WANT
        # auto: a finalized snapshot is read, its input not run
        assert _elements(_v1(tmp_path / "s", _other(), COMPS[name])) == WANT


@pytest.mark.parametrize("name", sorted(COMPS))
def test_v1_tf_reads_ours_and_files_match_tfs_layout(name):
    assert REF["v1_tf_read_ours"][name] == WANT
    ours = sorted(p.relative_to(FIXTURES / f"ours_v1_{name}").as_posix()
                  for p in (FIXTURES / f"ours_v1_{name}").rglob("*") if p.is_file())  # fmt: skip
    theirs = sorted(p.relative_to(FIXTURES / f"tf_v1_{name}").as_posix()
                    for p in (FIXTURES / f"tf_v1_{name}").rglob("*") if p.is_file())  # fmt: skip
    assert (
        ours == theirs == ["custom-fix/custom/00000000.snapshot", "custom-fix/snapshot.metadata"]
    )
    if name != "gzip":  # (gzip headers and deflate choices may differ)
        a = (FIXTURES / f"ours_v1_{name}/custom-fix/custom/00000000.snapshot").read_bytes()
        b = (FIXTURES / f"tf_v1_{name}/custom-fix/custom/00000000.snapshot").read_bytes()
        assert len(a) == len(b)


def test_v1_write_read_modes(tmp_path):
    p = tmp_path / "s"
    with tf.Graph().as_default():
        assert _elements(_v1(p, _other(), mode="passthrough")) == [[100, "100"], [101, "101"],
                                                                    [102, "102"]]  # fmt: skip
        assert not p.exists()
        assert _elements(_v1(p, mode="write")) == WANT
        assert _elements(_v1(p, _other(), mode="read")) == WANT
        # a second write of a named snapshot appends to its run's files, as TF's
        _elements(_v1(p, _other(2), mode="write"))
        assert _elements(_v1(p, _other(), mode="read")) == WANT + [[100, "100"], [101, "101"]]
        # unnamed: a directory per pipeline fingerprint, a random run id
        q = tmp_path / "h"
        ds = _v1(q, name="", shard_size_bytes=40)
        assert _elements(ds) == WANT
        (hash_dir,) = [d for d in q.iterdir() if d.is_dir()]
        assert len(hash_dir.name) == 16
        files = glob.glob(str(hash_dir / "*" / "*.snapshot"))
        assert len(files) == 2  # 24-byte elements, a new file from 40 bytes on
        assert _elements(_v1(q, _other(), name="")) == [
            [100, "100"],
            [101, "101"],
            [102, "102"],
        ]  # fmt: skip  (another pipeline)
        assert _elements(_v1(q, name="")) == WANT  # the same pipeline: read


def test_v1_unfinished_run(tmp_path):
    p = tmp_path / "s"
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(3000).map(lambda x: (x, tf.as_string(x)))
        it = tf.data.make_initializable_iterator(_v1(p, ds, shard_size_bytes=40))
        nxt = it.get_next()
        with tf.Session() as s:
            s.run(it.initializer)
            for _ in range(5):
                s.run(nxt)
        # auto passes a recent unfinished run through; read reads what it holds
        assert _elements(_v1(p, _other())) == [[100, "100"], [101, "101"], [102, "102"]]
        got = _elements(_v1(p, _other(), mode="read"))  # (the files written so far)
        assert 1 <= len(got) < 3000 and got == [[i, str(i)] for i in range(len(got))]


def test_v1_errors_as_tfs(tmp_path):
    errs = REF["errors"]
    cases = {
        "bad_mode": {"mode": "bogus"},
        "bad_compression": {"comp": "LZ4"},
        "expiry": {"pending_snapshot_expiry_seconds": 0},
        "read_missing": {"mode": "read"},
    }
    for key, kw in cases.items():
        with tf.Graph().as_default():
            cls, msg = errs[key]
            with pytest.raises(getattr(tf.errors, cls)) as e:
                _elements(_v1(tmp_path / key, **kw))
            assert e.value.message.split("\n")[0] == msg
    with tf.Graph().as_default():
        shutil.copytree(FIXTURES / "tf_v1_none", tmp_path / "t")
        base = tf.data.Dataset.range(2).map(lambda x: (tf.cast(x, tf.float32), tf.as_string(x)))
        v = R.SnapshotDataset(
            input_dataset=tf.data.experimental.to_variant(base),
            path=str(tmp_path / "t"),
            output_types=[tf.float32, tf.string],
            output_shapes=[[], []],
            snapshot_name="fix",
            mode="read",
        )
        spec = (tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.string))
        with pytest.raises(tf.errors.InternalError, match="Type: 0 doesn't match"):
            _elements(tf.data.experimental.from_variant(v, spec))


def _corrupt(tmp_path, name, edit):
    shutil.copytree(FIXTURES / f"tf_v1_{name}", tmp_path / name)
    (f,) = glob.glob(str(tmp_path / name / "custom-fix" / "custom" / "*.snapshot"))
    data = pathlib.Path(f).read_bytes()
    pathlib.Path(f).write_bytes(edit(data))
    with tf.Graph().as_default():
        return _elements(_v1(tmp_path / name, comp=COMPS[name], mode="read"))


def test_v1_corrupt_files(tmp_path):
    # as TF's reader: a record running past the end ends the file
    assert _corrupt(tmp_path / "a", "none", lambda d: d[:-3]) == WANT[:3]
    assert _corrupt(tmp_path / "b", "none", lambda d: struct.pack("<Q", 1 << 40) + d[8:]) == []
    with pytest.raises(tf.errors.InvalidArgumentError, match="negative number of bytes"):
        _corrupt(tmp_path / "c", "none", lambda d: b"\xff" * 8 + d[8:])
    with pytest.raises(tf.errors.DataLossError):
        _corrupt(tmp_path / "d", "none", lambda d: d[:8] + b"\xff" * (len(d) - 8))
    with pytest.raises(tf.errors.DataLossError):
        _corrupt(tmp_path / "e", "gzip", lambda d: d[:10] + b"\x00" * (len(d) - 10))

    def huge_snappy(d):
        # the first element's metadata declares 2**40 bytes for its first tensor
        meta = d[8 : 8 + struct.unpack_from("<Q", d)[0]]
        entry = b"\x12\x00\x18\x80\x80\x80\x80\x80\x20"  # scalar, 2**40 bytes
        fat = (b"\x0a" + bytes([len(entry)]) + entry) * 2
        return struct.pack("<Q", len(fat)) + fat + d[8 + len(meta) :]

    with pytest.raises(tf.errors.DataLossError, match="declares"):
        _corrupt(tmp_path / "f", "snappy", huge_snappy)


# -- a distributed snapshot's readers ----------------------------------------------------------


def _chunk(path, comp="", types=(tf.int64, tf.string)):
    v = R.SnapshotChunkDataset(chunk_file=str(path), output_types=list(types),
                               output_shapes=[[]] * len(types), compression=comp)  # fmt: skip
    spec = tuple(tf.TensorSpec([], t) for t in types)
    return tf.data.experimental.from_variant(v, spec if len(spec) > 1 else spec[0])


@pytest.mark.parametrize("name", sorted(COMPS))
def test_chunks_both_ways(name):
    for who in ("tf", "ours"):
        assert REF["chunk_tf_read"][f"{who}_{name}"] == WANT
        with tf.Graph().as_default():
            f = FIXTURES / f"{who}_chunks" / name / "chunk_0_0_4"
            assert _elements(_chunk(f, COMPS[name])) == WANT


def test_chunk_errors(tmp_path):
    f = FIXTURES / "tf_chunks" / "none" / "chunk_0_0_4"
    with tf.Graph().as_default():
        with pytest.raises(tf.errors.NotFoundError):
            _elements(_chunk(tmp_path / "chunk_0_0_1"))
        with pytest.raises(tf.errors.DataLossError):
            _elements(_chunk(f, "GZIP"))
        with pytest.raises(tf.errors.InvalidArgumentError):
            _elements(_chunk(f, "", (tf.float32, tf.string)))
        assert _elements(_chunk(f, "LZ4")) == WANT  # (TF reads an unknown coding as none)
        bad = tmp_path / "chunk_0_1_4"
        data = f.read_bytes()
        bad.write_bytes(data[:20] + bytes([data[20] ^ 1]) + data[21:])
        with pytest.raises(tf.errors.DataLossError):
            _elements(_chunk(bad))


def _listed(path):
    v = R.ListSnapshotChunksDataset(snapshot_path=str(path), output_types=[tf.string],
                                    output_shapes=[[]])  # fmt: skip
    ds = tf.data.experimental.from_variant(v, tf.TensorSpec([], tf.string))
    it = tf.data.make_one_shot_iterator(ds)
    nxt = it.get_next()
    out = []
    with tf.Session() as s:
        while True:
            try:
                out.append(s.run(nxt).decode())
            except tf.errors.OutOfRangeError:
                return out


def test_list_chunks_in_tfs_order(tmp_path, monkeypatch):
    from asyncflow.ops import dataset_snapshot

    monkeypatch.setattr(dataset_snapshot, "_CHUNK_POLL_SECONDS", 0.01)
    (tmp_path / "chunks").mkdir()
    for n in ["chunk_1_0_3", "chunk_0_10_2", "chunk_0_2_5", "chunk_0_0_1", "junk"]:
        (tmp_path / "chunks" / n).write_bytes(b"")
    (tmp_path / "DONE").write_bytes(b"")
    with tf.Graph().as_default():
        got = _listed(tmp_path)
    assert [os.path.basename(p) for p in got] == REF["list_order"]
    assert got[0] == str(tmp_path / "chunks" / "chunk_0_0_1")
    (tmp_path / "ERROR").write_bytes(b"\x08\x03\x12\x04boom")  # StatusProto: code 3
    with tf.Graph().as_default(), pytest.raises(tf.errors.InvalidArgumentError, match="boom"):
        _listed(tmp_path)


def test_list_chunks_waits_for_done(tmp_path, monkeypatch):
    from asyncflow.ops import dataset_snapshot

    polls = []
    real = dataset_snapshot._list_chunks

    def listing(path):
        polls.append(path)
        if len(polls) == 3:
            (tmp_path / "chunks").mkdir()
            (tmp_path / "chunks" / "chunk_0_0_2").write_bytes(b"")
            (tmp_path / "DONE").write_bytes(b"")
        return real(path)

    monkeypatch.setattr(dataset_snapshot, "_CHUNK_POLL_SECONDS", 0.01)
    monkeypatch.setattr(dataset_snapshot, "_list_chunks", listing)
    with tf.Graph().as_default():
        assert [os.path.basename(p) for p in _listed(tmp_path)] == ["chunk_0_0_2"]
    assert len(polls) == 3


def test_nested_reader_reads_datasets_in_turn():
    with tf.Graph().as_default():
        d = tf.data.Dataset.from_tensor_slices
        parts = [d(np.array([1, 2, 3])), d(np.array([10])), d(np.zeros(0, np.int64)),
                 d(np.array([7, 8]))]  # fmt: skip
        v = R.SnapshotNestedDatasetReader(
            inputs=[tf.data.experimental.to_variant(p) for p in parts],
            output_types=[tf.int64], output_shapes=[[]],
        )  # fmt: skip
        ds = tf.data.experimental.from_variant(v, tf.TensorSpec([], tf.int64))
        assert v.op.type == "SnapshotNestedDatasetReader"
        assert _elements(ds) == [1, 2, 3, 10, 7, 8]
        with tf.Session() as s:
            assert s.run(ds.cardinality()) == 6


def test_reads_tfs_distributed_snapshot():
    snap = FIXTURES / "tf_distributed"
    assert "GZIP" in (snap / "snapshot.metadata").read_text()
    with tf.Graph().as_default():
        chunks = _listed(snap)
        assert [os.path.basename(p) for p in chunks] == ["chunk_0_0_3", "chunk_0_1_4"]
        got = [e for c in chunks for e in _elements(_chunk(c, "GZIP"))]
    assert got == REF["distributed_load"]  # (TF's load, reading chunk after chunk)


def test_dataset_load_reads_tfs_distributed_snapshot():
    path = str(FIXTURES / "tf_distributed")
    with tf.Graph().as_default():
        flat = tf.data.Dataset.load(path, reader_func=lambda dss: dss.flat_map(lambda d: d))
        assert _elements(flat) == REF["distributed_load"]
        assert sorted(_elements(tf.data.Dataset.load(path))) == sorted(REF["distributed_load"])
