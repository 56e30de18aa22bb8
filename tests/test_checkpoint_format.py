"""TF's V2 checkpoint bundle (asyncflow.checkpoint_format): byte-exact with TF 2.21,
round trips, corrupt files, and the former safetensors layout read back.

References: tests/fixtures/formats_tf/ckpt (written by TF 2.21's Saver, see
record_formats_tf.py) and tests/fixtures/legacy_ckpt (written by asyncflow's former
safetensors writer, commit b907053).
"""

import json
import os
import random

import numpy as np
import pytest

from asyncflow import checkpoint_format as cf
from asyncflow import dtypes, errors

HERE = os.path.join(os.path.dirname(__file__), "fixtures")
TF_DIR = os.path.join(HERE, "formats_tf")
with open(os.path.join(TF_DIR, "expected.json")) as _f:
    EXPECTED = json.load(_f)["checkpoint"]
TF_PREFIX = os.path.join(TF_DIR, "ckpt", EXPECTED["prefix"])

VALUES = {
    "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
    "f64": np.array([1.5, -2.25]),
    "f16": np.array([0.5, 1.0], np.float16),
    "i8": np.array([-1, 2], np.int8),
    "i16": np.array([-300], np.int16),
    "i32": np.array(7, np.int32),
    "i64": np.array([[1 << 40]], np.int64),
    "u8": np.array([255], np.uint8),
    "u16": np.array([65535], np.uint16),
    "u32": np.array([1 << 31], np.uint32),
    "u64": np.array([1 << 63], np.uint64),
    "b": np.array([True, False, True]),
    "c64": np.array([1 + 2j], np.complex64),
    "c128": np.array([[1 - 2j, 3j]], np.complex128),
    "empty": np.zeros((0, 3), np.float32),
    "s": np.array([b"hello", b"", "\u00fcn\u00ef".encode()], dtype=object).reshape(3, 1),
    "s0": np.array(b"scalar", dtype=object),
    "empty_s": np.zeros((2, 0), dtype=object),
}
if dtypes.bfloat16._np is not None:
    VALUES["bf16"] = np.array([1.5, -2.0], dtypes.bfloat16.as_numpy_dtype)


def _write(tmp_path, tensors=None, name="model"):
    prefix = str(tmp_path / name)
    entries = cf.write_data_file(cf.data_path(prefix, 0, 1), tensors or VALUES)
    cf.atomic_write(cf.index_path(prefix), cf.encode_index(1, entries))
    return prefix


def _read_all(prefix):
    index = cf.read_index(prefix)
    return cf.read_shard_tensors(cf.data_path(prefix, 0, 1), index, list(index["tensors"]))


def test_reads_tf_checkpoint_and_rewrites_it_byte_for_byte(tmp_path):
    got = _read_all(TF_PREFIX)
    want = EXPECTED["values"]
    np.testing.assert_array_equal(got["dense/w"], np.array(want["dense/w"], np.float32))
    assert got["global_step"] == want["global_step"] and got["global_step"].dtype == np.int64
    assert got["word"] == want["word"].encode() and got["flag"].tolist() == want["flag"]
    assert got["d64"].dtype == np.float64
    prefix = _write(tmp_path, got, "again")  # what TF's BundleWriter wrote, exactly
    for path in (cf.index_path, lambda p: cf.data_path(p, 0, 1)):
        assert open(path(prefix), "rb").read() == open(path(TF_PREFIX), "rb").read()


def test_round_trip_every_dtype(tmp_path):
    got = _read_all(_write(tmp_path))
    assert set(got) == set(VALUES)
    for name, value in VALUES.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        assert got[name].tolist() == value.tolist(), name


def test_index_is_a_table_with_header_and_sorted_entries(tmp_path):
    prefix = _write(tmp_path)
    items = cf.decode_table(open(cf.index_path(prefix), "rb").read(), "x")
    keys = [k for k, _ in items]
    assert keys[0] == b"" and keys == sorted(keys)
    index = cf.read_index(prefix)
    assert index["format"] == "bundle" and index["num_shards"] == 1


def test_many_entries_span_several_blocks():
    items = [(f"v{i:06d}".encode(), bytes(300)) for i in range(2000)]  # > 256 KiB of values
    raw = cf.encode_table(items)
    assert cf.decode_table(raw, "x") == items


def test_flipped_data_byte_is_data_loss(tmp_path):
    prefix = _write(tmp_path, {"a": np.arange(100, dtype=np.float32)})
    path = cf.data_path(prefix, 0, 1)
    raw = bytearray(open(path, "rb").read())
    raw[10] ^= 1
    open(path, "wb").write(bytes(raw))
    with pytest.raises(errors.DataLossError, match="checksum"):
        _read_all(prefix)


@pytest.mark.parametrize("keep", [0, 10, 47, -5, -1])
def test_truncated_index_is_data_loss(tmp_path, keep):
    prefix = _write(tmp_path)
    path = cf.index_path(prefix)
    raw = open(path, "rb").read()
    open(path, "wb").write(raw[:keep])
    with pytest.raises(errors.DataLossError, match=r"model\.index"):
        cf.read_index(prefix)


def test_truncated_data_is_data_loss(tmp_path):
    prefix = _write(tmp_path)
    path = cf.data_path(prefix, 0, 1)
    raw = open(path, "rb").read()
    open(path, "wb").write(raw[: len(raw) // 2])
    with pytest.raises(errors.DataLossError, match="past the end|truncated"):
        _read_all(prefix)


def test_sizes_from_the_index_are_checked_before_allocating(tmp_path):
    huge = {"shard": 0, "dtype": "float32", "shape": [1 << 40], "offset": 0,
            "size": 4 << 40, "crc32c": 0}  # fmt: skip
    prefix = str(tmp_path / "m")
    cf.atomic_write(cf.index_path(prefix), cf.encode_index(1, {"x": huge}))
    open(cf.data_path(prefix, 0, 1), "wb").write(b"\0" * 16)
    with pytest.raises(errors.DataLossError, match="past the end"):
        _read_all(prefix)
    wrong = dict(huge, size=8)  # a size that does not match dtype and shape
    cf.atomic_write(cf.index_path(prefix), cf.encode_index(1, {"x": wrong}))
    with pytest.raises(errors.DataLossError, match="bytes, not"):
        cf.read_index(prefix)
    strings = {"shard": 0, "dtype": "string", "shape": [1 << 40], "offset": 0,
               "size": 16, "crc32c": 0}  # fmt: skip
    cf.atomic_write(cf.index_path(prefix), cf.encode_index(1, {"x": strings}))
    with pytest.raises(errors.DataLossError, match="larger than its bytes"):
        _read_all(prefix)


def _fuzz(tmp_path, which, seed):
    rng = random.Random(seed)
    prefix = _write(tmp_path, {"a": np.arange(5.0), "s": VALUES["s"], "b": VALUES["b"]})
    path = cf.index_path(prefix) if which == "index" else cf.data_path(prefix, 0, 1)
    good = open(path, "rb").read()
    for _ in range(60):
        raw = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            op = rng.random()
            if op < 0.6 and raw:
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            elif op < 0.8:
                del raw[rng.randrange(len(raw) + 1) :]
            else:
                pos = rng.randrange(len(raw) + 1)
                raw[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 9)))
        open(path, "wb").write(bytes(raw))
        try:
            _read_all(prefix)
        except (errors.DataLossError, errors.UnimplementedError):
            pass


@pytest.mark.parametrize("which", ["index", "data"])
@pytest.mark.parametrize("seed", range(4))
def test_fuzzed_files_raise_only_data_loss(tmp_path, which, seed):
    _fuzz(tmp_path, which, seed)


def test_former_safetensors_checkpoints_still_read():
    prefix = os.path.join(HERE, "legacy_ckpt", "model.ckpt-7")
    index = cf.read_index(prefix)
    assert index["format"] == "safetensors"
    got = _read_all(prefix)
    np.testing.assert_array_equal(got["w"], np.arange(6, dtype=np.float32).reshape(2, 3) / 4)
    assert got["global_step"] == 7 and got["flag"].tolist() == [True, False]
    assert got["names"].tolist() == [b"a", b"", "\u00e9".encode()]
    assert got["c"].tolist() == [1 + 2j]


def test_missing_files_are_not_found(tmp_path):
    with pytest.raises(errors.NotFoundError):
        cf.read_index(str(tmp_path / "nope"))
    prefix = _write(tmp_path)
    os.remove(cf.data_path(prefix, 0, 1))
    with pytest.raises(errors.NotFoundError):
        _read_all(prefix)


def test_atomic_write_leaves_no_temporary_on_failure(tmp_path):
    target = tmp_path / "f"
    target.write_bytes(b"old")

    def boom(f):
        f.write(b"partial")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        cf.atomic_write(str(target), boom)
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["f"]
    with pytest.raises(errors.NotFoundError):
        cf.atomic_write(str(tmp_path / "no" / "f"), b"x")


async def test_async_reads(tmp_path):
    prefix = _write(tmp_path)
    index = await cf.aread_index(prefix)
    got = await cf.aread_shard_tensors(cf.data_path(prefix, 0, 1), index, ["f32", "s"])
    np.testing.assert_array_equal(got["f32"], VALUES["f32"])
    assert got["s"].tolist() == VALUES["s"].tolist()
