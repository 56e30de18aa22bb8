"""The TFRecord scanner and the reader's buffers against a plain record-by-record parser.

The scanner checks runs of equal-length records with numpy and cuts records out of
reused buffers; these tests compare it, record for record and error for error, with
the simplest possible reading of the format, on files mixing runs and odd lengths,
damaged anywhere, fed in chunks of every awkward size.
"""

import random
import struct

import numpy as np
import pytest

from asyncflow import crc32c, errors, python_io
from asyncflow.ops import reader_ops


def reference(raw: bytes):
    """(records, offsets, error offset or None): TF's reading, one record at a time."""
    out, offs, pos = [], [], 0
    while len(raw) - pos >= 12:
        length, lcrc = struct.unpack_from("<QI", raw, pos)
        if crc32c.masked_crc32c(raw[pos : pos + 8]) != lcrc:
            return out, offs, pos
        if len(raw) - pos < 16 + length:
            break  # truncated: the end, without error
        data = raw[pos + 12 : pos + 12 + length]
        if crc32c.masked_crc32c(data) != struct.unpack_from("<I", raw, pos + 12 + length)[0]:
            return out, offs, pos + 12
        out.append(data)
        offs.append(pos)
        pos += 16 + length
    return out, offs, None


def frame(records) -> bytes:
    return b"".join(python_io._frame(r) for r in records)


def make_records(seed: int, n: int = 300):
    rng = random.Random(seed)
    recs = []
    while len(recs) < n:
        kind = rng.random()
        if kind < 0.5:  # a run of equal lengths
            length = rng.choice([0, 1, 7, 64, 300])
            recs += [rng.randbytes(length) for _ in range(rng.randint(1, 40))]
        else:
            recs.append(rng.randbytes(rng.randint(0, 500)))
    return recs[:n]


def scan(raw: bytes, chunk: int, batch: int, reuse: bool):
    """Feed `raw` in `chunk`-byte pieces (through two reused buffers when `reuse`)."""
    s = python_io.RecordScanner("f")
    out, offs, err = [], [], None
    ring = [bytearray(chunk), bytearray(chunk)]
    pos, i = 0, 0
    while True:
        try:
            while s.take(batch, out, offs) == batch:
                pass
        except errors.DataLossError as e:
            err = int(e.message.split("corrupted record at ")[1].split()[0])
            # the error repeats, and nothing more comes, until something changes
            with pytest.raises(errors.DataLossError):
                s.take(batch, out, offs)
            return out, offs, err
        if pos >= len(raw):
            return out, offs, err
        piece = raw[pos : pos + chunk]
        pos += len(piece)
        if reuse:
            buf, other = ring[i % 2], ring[(i + 1) % 2]
            i += 1
            buf[: len(piece)] = piece  # released (and scribbled on) last time
            s.feed(buf, len(piece))
            s.release(other)  # as the reader does before refilling it
            other[:] = b"\xee" * chunk
        else:
            s.feed(piece)


def damage(raw: bytes, rng: random.Random, what: str) -> bytes:
    _, offs, _ = reference(raw)
    at = rng.choice(offs)
    b = bytearray(raw)
    (length,) = struct.unpack_from("<Q", raw, at)
    if what == "length":
        b[at + rng.randrange(8)] ^= 1 << rng.randrange(8)
    elif what == "length_crc":
        b[at + 8 + rng.randrange(4)] ^= 0x10
    elif what == "data" and length:
        b[at + 12 + rng.randrange(length)] ^= 0x01
    else:  # data crc
        b[at + 12 + length + rng.randrange(4)] ^= 0x80
    return bytes(b)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk", [5, 13, 100, 4096, 1 << 20])
@pytest.mark.parametrize("reuse", [False, True])
def test_scanner_matches_reference_on_good_files(seed, chunk, reuse):
    raw = frame(make_records(seed))
    want = reference(raw)
    assert want[2] is None
    for batch in (1, 7, 1 << 30):
        assert scan(raw, chunk, batch, reuse) == want


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("what", ["length", "length_crc", "data", "data_crc"])
@pytest.mark.parametrize("chunk", [13, 1000, 1 << 20])
def test_scanner_matches_reference_on_damaged_files(seed, what, chunk):
    rng = random.Random(seed * 31 + len(what))
    raw = damage(frame(make_records(seed)), rng, what)
    want = reference(raw)
    for batch in (3, 1 << 30):
        assert scan(raw, chunk, batch, reuse=chunk < 1 << 20) == want


@pytest.mark.parametrize("where", ["first", "second", "middle", "last"])
def test_damage_inside_a_long_run(where):
    recs = [bytes([i % 251]) * 64 for i in range(200)]
    raw = bytearray(frame(recs))
    i = {"first": 0, "second": 1, "middle": 117, "last": 199}[where]
    raw[i * 80 + 12 + 5] ^= 0xFF
    values = []
    s = python_io.RecordScanner("run")
    s.feed(bytes(raw))
    with pytest.raises(errors.DataLossError, match=f"at {i * 80 + 12} in file run"):
        s.take(1000, values)
    assert values == recs[:i]


def test_run_broken_by_a_different_length_or_header():
    recs = [b"a" * 32] * 20 + [b"b" * 33] + [b"c" * 32] * 20
    raw = frame(recs)
    assert scan(raw, 1 << 20, 1 << 30, False) == reference(raw)
    bad = bytearray(raw)
    bad[10 * 48 + 8] ^= 1  # header CRC of record 10, inside the run
    assert scan(bytes(bad), 1 << 20, 1 << 30, False) == reference(bytes(bad))
    assert reference(bytes(bad))[2] == 480


def test_huge_length_in_a_run_is_bounded():
    recs = [b"x" * 16] * 12
    raw = bytearray(frame(recs))
    header = struct.pack("<Q", 1 << 60)
    raw[5 * 32 : 5 * 32 + 12] = header + struct.pack("<I", crc32c.masked_crc32c(header))
    s = python_io.RecordScanner("h")
    s.feed(bytes(raw))
    values = []
    s.take(100, values)
    assert values == recs[:5]
    assert s.need() > 0  # waits for more data; the source never reads past the file end


def _read_all(sess, v):
    from asyncflow import errors as e

    got = []
    while True:
        try:
            got.append(sess.run(v))
        except e.OutOfRangeError:
            return got


@pytest.mark.parametrize("ring", [64, 1000, 1 << 20])
def test_reader_buffers_give_every_record_and_key(monkeypatch, tmp_path, ring):
    """Records straddling the two reused buffers, longer than them, and runs."""
    import asyncflow as af
    from asyncflow.ops import data_flow_ops

    monkeypatch.setattr(reader_ops, "_RING_BYTES", ring)
    recs = make_records(3, 400) + [b"L" * 10000] + make_records(4, 50)
    paths = []
    for j in range(2):
        p = tmp_path / f"f{j}.tfrecord"
        with python_io.TFRecordWriter(str(p)) as w:
            for r in recs:
                w.write(r)
        paths.append(str(p))
    raw = frame(recs)
    _, offs, _ = reference(raw)
    with af.Graph().as_default():
        q = data_flow_ops.FIFOQueue(4, af.string)
        fill = [q.enqueue(p) for p in paths]
        close = q.close()
        reader = reader_ops.TFRecordReader()
        keys, values = reader.read_up_to(q, 37)
        count = reader.num_records_produced()
        with af.Session() as sess:
            sess.run(fill)
            sess.run(close)
            got = _read_all(sess, [keys, values])
            assert sess.run(count) == 2 * len(recs)
    all_keys = np.concatenate([k for k, _ in got]).tolist()
    all_values = np.concatenate([v for _, v in got]).tolist()
    assert all(type(v) is bytes for v in all_values)
    assert all_values == recs * 2
    assert all_keys == [b"%s:%d" % (p.encode(), o) for p in paths for o in offs]


def _reader_graph(path, n):
    import asyncflow as af
    from asyncflow.ops import data_flow_ops

    q = data_flow_ops.FIFOQueue(4, af.string)
    fill, close = q.enqueue(str(path)), q.close()
    return (fill, close), reader_ops.TFRecordReader().read_up_to(q, n)[1]


def test_read_cancelled_while_its_chunk_is_in_flight_loses_nothing(monkeypatch, tmp_path):
    import asyncio
    import threading

    import asyncflow as af

    recs = make_records(5, 50)
    path = tmp_path / "r.tfrecord"
    path.write_bytes(frame(recs))
    gate, parked, calls = threading.Event(), threading.Event(), []
    real = python_io._PlainSource.readinto

    def slow_readinto(self, buf):
        calls.append(1)
        if len(calls) == 1:
            parked.set()
            assert gate.wait(10)  # the first chunk is held until the step was cancelled
        return real(self, buf)

    monkeypatch.setattr(python_io._PlainSource, "readinto", slow_readinto)
    with af.Graph().as_default():
        setup, values = _reader_graph(path, 1000)

        async def main():
            async with af.Session() as sess:
                await sess.arun(setup[0])
                await sess.arun(setup[1])
                step = asyncio.ensure_future(sess.arun(values))
                assert await asyncio.to_thread(parked.wait, 10)
                step.cancel()
                with pytest.raises((asyncio.CancelledError, errors.CancelledError)):
                    await step
                gate.set()  # the parked read completes; the next read consumes it
                return list(await sess.arun(values))

        assert asyncio.run(main()) == recs


def test_a_failing_read_is_an_error_of_the_step(monkeypatch, tmp_path):
    import errno

    import asyncflow as af

    path = tmp_path / "r.tfrecord"
    path.write_bytes(frame([b"a", b"b"]))

    def failing(self, buf):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(python_io._PlainSource, "readinto", failing)
    with af.Graph().as_default():
        setup, values = _reader_graph(path, 10)
        with af.Session() as sess:
            sess.run(setup[0])
            sess.run(setup[1])
            with pytest.raises(errors.OpError, match="Input/output error"):
                sess.run(values)


@pytest.mark.parametrize("reuse", [False, True])
def test_damaged_length_at_a_chunk_boundary_is_data_loss(reuse):
    """TF checks a length's CRC before reading that far: a damaged length makes the
    record corrupt, not cut short by the end of the file, wherever the chunks end."""
    recs = [bytes([i]) * 24 for i in range(60)]  # 40 bytes framed
    raw = frame(recs)
    for at in range(47 * 40, 47 * 40 + 12):  # record 47's header, 6 bytes into chunk 3
        bad = bytearray(raw)
        bad[at] ^= 1 << (at % 8)
        want = reference(bytes(bad))
        assert want[2] == 47 * 40
        for batch in (1, 1 << 30):
            assert scan(bytes(bad), 937, batch, reuse) == want
