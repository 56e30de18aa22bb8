"""TFRecord files: byte-identical to TensorFlow's, TF's files read back, damage detected."""

import json
import pathlib
import shutil

import numpy as np
import pytest

from asyncflow import crc32c, errors, python_io

FIX = pathlib.Path(__file__).parent / "fixtures"
REF = json.loads((FIX / "io_tf.json").read_text())
RECORDS = [bytes.fromhex(h) for h in REF["records"]]
FILES = [("plain.tfrecord", None), ("gzip.tfrecord", "GZIP"), ("zlib.tfrecord", "ZLIB")]


@pytest.mark.parametrize("name, comp", FILES)
def test_writer_is_byte_identical_to_tf(tmp_path, name, comp):
    path = tmp_path / name
    opts = python_io.TFRecordOptions(comp) if comp else None
    with python_io.TFRecordWriter(str(path), opts) as w:
        for r in RECORDS:
            w.write(r)
    assert path.read_bytes() == (FIX / "io_tf" / name).read_bytes()


@pytest.mark.parametrize("name, comp", FILES)
def test_reads_tf_written_files(name, comp):
    got = list(python_io.tf_record_iterator(str(FIX / "io_tf" / name), comp))
    assert got == RECORDS


@pytest.mark.parametrize("chunk", [1, 7, 13, 1000])
@pytest.mark.parametrize("name, comp", FILES)
def test_any_chunking_gives_the_same_records(monkeypatch, name, comp, chunk):
    monkeypatch.setattr(python_io, "CHUNK_BYTES", chunk)
    got = list(python_io.tf_record_iterator(str(FIX / "io_tf" / name), comp))
    assert got == RECORDS


def test_compression_type_enum_and_strings(tmp_path):
    t = python_io.TFRecordCompressionType
    get = python_io.TFRecordOptions.get_compression_type_string
    assert (get(None), get(t.NONE), get(t.ZLIB), get(t.GZIP)) == ("", "", "ZLIB", "GZIP")
    assert get(python_io.TFRecordOptions(t.GZIP)) == "GZIP"
    with pytest.raises(ValueError):
        python_io.TFRecordOptions("LZ4")
    p = tmp_path / "enum.gz"
    with python_io.TFRecordWriter(str(p), t.GZIP) as w:
        w.write(b"q")
    assert list(python_io.tf_record_iterator(str(p), python_io.TFRecordOptions(t.GZIP))) == [b"q"]


@pytest.mark.parametrize("case", sorted(REF["tfrecord_errors"]))
def test_damage_like_tf(tmp_path, case):
    raw = (FIX / "io_tf" / "plain.tfrecord").read_bytes()
    data = {
        "truncated_header": raw[:5],
        "truncated_data": raw[: 16 + 4],
        "bad_length_crc": raw[:8] + bytes([raw[8] ^ 1]) + raw[9:],
        "bad_data_crc": raw[:-1] + bytes([raw[-1] ^ 1]),
    }[case]
    path = tmp_path / case
    path.write_bytes(data)
    want = REF["tfrecord_errors"][case]
    got = []
    if "error" in want:
        with pytest.raises(errors.DataLossError) as e:
            for r in python_io.tf_record_iterator(str(path)):
                got.append(r.hex())
        assert want["message"] in e.value.message
        assert str(path) in e.value.message  # names the file, beyond TF's message
    else:
        got = [r.hex() for r in python_io.tf_record_iterator(str(path))]
    assert got == want["records"]


def test_corrupt_middle_record_names_offset(tmp_path):
    path = tmp_path / "c.tfrecord"
    with python_io.TFRecordWriter(str(path)) as w:
        for i in range(5):
            w.write(b"r%d" % i)
    raw = bytearray(path.read_bytes())
    raw[2 * 18 + 13] ^= 0xFF  # record 2's data (each record: 12 + 2 + 4 bytes)
    path.write_bytes(bytes(raw))
    it = python_io.tf_record_iterator(str(path))
    assert [next(it), next(it)] == [b"r0", b"r1"]
    with pytest.raises(errors.DataLossError, match=f"corrupted record at 48 in file {path}"):
        next(it)


def test_corrupt_gzip_stream_is_data_loss(tmp_path):
    raw = (FIX / "io_tf" / "gzip.tfrecord").read_bytes()
    path = tmp_path / "bad.gz"
    path.write_bytes(raw[:20] + bytes(b ^ 0x55 for b in raw[20:60]) + raw[60:])
    with pytest.raises(errors.DataLossError):
        list(python_io.tf_record_iterator(str(path), "GZIP"))


def test_huge_length_with_valid_crc_does_not_allocate(tmp_path):
    import struct

    header = struct.pack("<Q", 1 << 60)
    path = tmp_path / "huge"
    path.write_bytes(header + struct.pack("<I", crc32c.masked_crc32c(header)) + b"abc")
    # A header promising more than the file holds is a truncated record: DataLossError,
    # as TF 2.21 says for a length of 1000 (for 2**60 TF's process aborts), with nothing
    # allocated for the promised length.
    with pytest.raises(errors.DataLossError, match="truncated record at 0"):
        list(python_io.tf_record_iterator(str(path)))


def test_missing_file_is_not_found(tmp_path):
    with pytest.raises(errors.NotFoundError):
        list(python_io.tf_record_iterator(str(tmp_path / "nope")))
    with pytest.raises(errors.NotFoundError):
        python_io.TFRecordWriter(str(tmp_path / "no" / "dir"))


def test_writer_api(tmp_path):
    p = tmp_path / "w"
    w = python_io.TFRecordWriter(str(p))
    w.write("text")  # str is written as UTF-8
    w.write(bytearray(b"ba"))
    w.flush()
    w.close()
    w.close()  # idempotent
    with pytest.raises(errors.FailedPreconditionError):
        w.write(b"x")
    with pytest.raises(TypeError):
        python_io.TFRecordWriter(str(tmp_path / "t")).write(5)
    assert list(python_io.tf_record_iterator(str(p))) == [b"text", b"ba"]


def test_crc32c_known_answers_and_buffers():
    """RFC 3720 (iSCSI) B.4's CRC-32C test vectors; every kind of buffer (copied to the
    backend in pieces) gives the CRC of its bytes."""
    assert crc32c.BACKEND.startswith("google-crc32c")
    assert crc32c.crc32c(b"123456789") == 0xE3069283
    assert crc32c.crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c.crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c.crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C
    data = np.random.RandomState(0).bytes(3 * crc32c._PIECE + 123)
    want = crc32c.crc32c(data)
    arr = np.frombuffer(data[: len(data) // 16 * 16], np.float64).reshape(-1, 2)
    for buf in (bytearray(data), memoryview(data), memoryview(bytearray(data))):
        assert crc32c.crc32c(buf) == want
        assert crc32c.crc32c_function()(buf) == crc32c.crc32c_gil_free()(buf) == want
    assert crc32c.crc32c(arr) == crc32c.crc32c(arr.tobytes())
    assert crc32c.crc32c(memoryview(data)[5:70000]) == crc32c.crc32c(data[5:70000])
    assert crc32c.unmask(crc32c.masked_crc32c(data)) == want
    assert crc32c.extend(crc32c.crc32c(data[:100]), data[100:]) == want
    assert crc32c.extend(crc32c.crc32c(data[:100]), bytearray(data[100:])) == want


def test_concatenated_gzip_members(tmp_path):
    a = (FIX / "io_tf" / "gzip.tfrecord").read_bytes()
    p = tmp_path / "two.gz"
    p.write_bytes(a + a)
    assert list(python_io.tf_record_iterator(str(p), "GZIP")) == RECORDS * 2


def test_tf_fixture_is_not_modified(tmp_path):
    # Reading must never write: copy and compare after a full read.
    src = FIX / "io_tf" / "plain.tfrecord"
    dst = tmp_path / "copy"
    shutil.copy(src, dst)
    list(python_io.tf_record_iterator(str(dst)))
    assert dst.read_bytes() == src.read_bytes()


# -- issue 18 item 14: a truncated file ------------------------------------------------------


def _cut_file(tmp_path, where):
    """A TFRecord file of b"one", b"two", b"three" cut short at `where`."""
    from asyncflow import python_io

    path = tmp_path / "full.tfr"
    with python_io.TFRecordWriter(str(path)) as w:
        for r in (b"one", b"two", b"three"):
            w.write(r)
    data = path.read_bytes()
    two = 2 * 16 + 3 + 3  # the first two records, 38 bytes
    cut = {"in_data": len(data) - 6, "in_footer": len(data) - 2,
           "in_header": two + 5, "at_boundary": two}[where]  # fmt: skip
    out = tmp_path / f"cut_{where}.tfr"
    out.write_bytes(data[:cut])
    return out


@pytest.mark.parametrize(
    "where,error",
    [("in_data", True), ("in_footer", True), ("in_header", False), ("at_boundary", False)],
)
def test_truncated_file_is_data_loss_as_tf(tmp_path, where, error):
    # TF 2.21: a record cut in its data or CRC footer raises DataLossError "truncated
    # record at 38" after the two whole records; fewer bytes than a header end cleanly.
    from asyncflow import errors, python_io

    got = []
    it = python_io.tf_record_iterator(str(_cut_file(tmp_path, where)))
    if error:
        with pytest.raises(errors.DataLossError, match="truncated record at 38"):
            for r in it:
                got.append(r)
    else:
        got = list(it)
    assert got == [b"one", b"two"]
