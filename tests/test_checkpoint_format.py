"""The safetensors data files and the JSON index (asyncflow.checkpoint_format)."""

import json
import os

import numpy as np
import pytest
import safetensors.numpy as safetensors_numpy  # noqa: E402 - the reference package (test extra)

from asyncflow import checkpoint_format as cf
from asyncflow import errors

STANDARD = {
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
    "empty": np.zeros((0, 3), np.float32),
}


def _metadata(raw: bytes) -> dict:
    n = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8 : 8 + n])["__metadata__"]


def test_bytes_equal_the_safetensors_package():
    # One metadata key: the package orders several keys its own (hash map) way.
    mine = cf.encode_file(STANDARD)
    assert mine == safetensors_numpy.save(STANDARD, metadata=_metadata(mine))
    assert (int.from_bytes(mine[:8], "little")) % 8 == 0


def test_user_metadata_is_kept(tmp_path):
    path = str(tmp_path / "f")
    cf.write_data_file(path, {"a": np.ones(2)}, {"user": "x"})
    assert cf.read_data_header(path).metadata == {"user": "x"}


def test_the_package_reads_our_files_and_we_read_its(tmp_path):
    tensors = dict(STANDARD, s=np.array([b"ab", b"", b"\xff"], dtype=object))
    path = str(tmp_path / "f.safetensors")
    cf.write_data_file(path, tensors)
    loaded = safetensors_numpy.load_file(path)
    assert loaded["b"].dtype == np.bool_
    np.testing.assert_array_equal(loaded["f32"], STANDARD["f32"])
    blob = loaded["s"]  # strings: 3 int64 lengths then the bytes
    assert (
        blob.dtype == np.uint8
        and blob.tobytes() == np.array([2, 0, 1], "<i8").tobytes() + b"ab\xff"
    )
    theirs = str(tmp_path / "theirs.safetensors")
    safetensors_numpy.save_file({"a": STANDARD["f32"], "b": STANDARD["b"]}, theirs)
    header = cf.read_data_header(theirs)
    got = cf.read_tensors(theirs, ["a", "b"], header)
    np.testing.assert_array_equal(got["a"], STANDARD["f32"])
    np.testing.assert_array_equal(got["b"], STANDARD["b"])


@pytest.mark.parametrize(
    "value",
    [
        np.array([b"hello", b"", "ünï".encode()], dtype=object).reshape(3, 1),
        np.array(b"scalar", dtype=object),
        np.array([1 + 2j, 3 - 4j], np.complex128),
        np.array(True),
        np.float32(3.5),
        np.zeros((2, 0), np.int64),
    ],
)
def test_roundtrip(tmp_path, value):
    path = str(tmp_path / "d")
    cf.write_data_file(path, {"t": np.asarray(value)})
    got = cf.read_tensors(path, ["t"])["t"]
    assert got.dtype == np.asarray(value).dtype and got.shape == np.asarray(value).shape
    np.testing.assert_array_equal(got, value)
    assert got.flags.writeable


def _write(tmp_path, tensors=None):
    path = str(tmp_path / "model.data-00000-of-00001")
    cf.write_data_file(path, tensors or {"a": np.arange(100, dtype=np.float32), "b": np.ones(3)})
    return path


def _corrupt(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_flipped_data_byte_is_data_loss(tmp_path):
    path = _write(tmp_path)
    _corrupt(path, os.path.getsize(path) - 1, b"\x99")
    with pytest.raises(errors.DataLossError, match="checksum mismatch.*") as e:
        h = cf.read_data_header(path)
        cf.read_tensors(path, list(h.entries), h)
    assert path in str(e.value)


@pytest.mark.parametrize("keep", [0, 5, 8, 20, -1])
def test_truncated_file_is_data_loss(tmp_path, keep):
    path = _write(tmp_path)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size + keep if keep < 0 else keep)
    with pytest.raises(errors.DataLossError, match=path.replace(".", r"\.")):
        cf.read_data_header(path)


def test_extra_trailing_bytes_are_data_loss(tmp_path):
    path = _write(tmp_path)
    with open(path, "ab") as f:
        f.write(b"x")
    with pytest.raises(errors.DataLossError, match="longer than its header"):
        cf.read_data_header(path)


def test_huge_header_length_is_bounded_before_allocating(tmp_path):
    path = _write(tmp_path)
    _corrupt(path, 0, (1 << 62).to_bytes(8, "little"))
    with pytest.raises(errors.DataLossError, match="header length"):
        cf.read_data_header(path)


@pytest.mark.parametrize(
    "header",
    [
        b"not json",
        b"[1, 2]",
        b'{"a": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}}',
        b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}',
        b'{"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}',
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}',
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}',
        b'{"__metadata__": {"asyncflow": "{"}, "a": {"dtype": "F32", "shape": [1], '
        b'"data_offsets": [0, 4]}}',
    ],
)
def test_malformed_headers_are_data_loss(tmp_path, header):
    path = str(tmp_path / "bad")
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + b"\0" * 8)
    with pytest.raises(errors.DataLossError, match="bad"):
        cf.read_data_header(path)


def test_inconsistent_string_lengths_are_data_loss(tmp_path):
    path = _write(tmp_path, {"s": np.array([b"abc", b"de"], dtype=object)})
    header = cf.read_data_header(path)
    entry = header.entries["s"]
    raw = bytearray(open(path, "rb").read()[entry.begin : entry.end])
    raw[0] = 9  # first length 3 -> 9
    entry.crc32 = None
    with pytest.raises(errors.DataLossError, match="inconsistent lengths"):
        cf.decode_tensor(entry, bytes(raw), path)


def test_missing_file_is_not_found(tmp_path):
    with pytest.raises(errors.NotFoundError):
        cf.read_data_header(str(tmp_path / "nope"))
    with pytest.raises(errors.NotFoundError):
        cf.read_index(str(tmp_path / "nope"))


def test_index_roundtrip_and_validation(tmp_path):
    prefix = str(tmp_path / "m")
    doc = {"a": {"shard": 0, "dtype": "float32", "shape": [2]}}
    cf.atomic_write(cf.index_path(prefix), cf.encode_index(1, doc))
    assert cf.read_index(prefix)["tensors"] == doc
    for bad in [
        b"{}",
        b"nope",
        cf.encode_index(1, {"a": {"shard": 3, "dtype": "f", "shape": []}}),
    ]:
        cf.atomic_write(cf.index_path(prefix), bad)
        with pytest.raises(errors.DataLossError, match=r"m\.index"):
            cf.read_index(prefix)


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


async def test_async_reads_and_writes(tmp_path):
    path = str(tmp_path / "f")
    await cf.aatomic_write(path, cf.encode_file({"x": np.arange(3)}))
    header, got = await cf.aread_tensors(path, ["x"])
    np.testing.assert_array_equal(got["x"], np.arange(3))
    assert list(header.entries) == ["x"]
