"""Chunks fed with their CRC-32C: runs of records accepted on one CRC per chunk.

The scanner then checks the chunk's CRC against the one its records' stored CRCs
imply (CRC-32C combining, asyncflow/crc32c.py) and checks records one by one only on a
mismatch.  These tests hold it to the record-by-record reference of
test_record_scanner.py (records, offsets, error offset), with the chunk CRCs computed
independently, on files made of runs, damaged at every byte or at chosen places, fed in
chunks that cut records anywhere.
"""

import os
import random
import struct

import numpy as np
import pytest
from test_record_scanner import _read_all, frame, reference

from asyncflow import crc32c, errors, python_io
from asyncflow.ops import reader_ops


def crc_of(data) -> int:
    return crc32c.crc32c(bytes(data))


@pytest.fixture(autouse=True)
def short_runs(monkeypatch):
    """Runs of 16 records are accepted on a chunk's CRC (the default, tuned for speed,
    is longer): small files then exercise every path."""
    monkeypatch.setattr(python_io, "_MIN_VERIFY_RUN", 16)


# -- combining -------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_combine_matches_the_crc_of_the_concatenation(seed):
    rng = random.Random(seed)
    for _ in range(40):
        a = rng.randbytes(rng.choice([0, 1, 5, 100]))
        b = rng.randbytes(rng.choice([0, 1, 3, 4, 1000, 70000]))
        assert crc32c.combine(crc_of(a), crc_of(b), len(b)) == crc_of(a + b)
        # shift is the CRC register run over zero bytes
        n = rng.randrange(50)
        assert crc32c.shift(crc_of(a), n) == crc_of(a + bytes(n)) ^ crc_of(bytes(n))


@pytest.mark.parametrize("length", [0, 1, 4, 77, 4112])
def test_combine_equal_and_shift_array(length):
    rng = random.Random(length)
    blocks = [rng.randbytes(length) for _ in range(64 * 64 + 70)]
    crcs = np.array([crc_of(b) for b in blocks], np.uint32)
    for m in (0, 1, 2, 3, 63, 64, 65, 100, 64 * 64, 64 * 64 + 1, len(blocks)):
        want = crc_of(b"".join(blocks[:m])) if m else 0
        assert crc32c.combine_equal(crcs[:m], length) == want, m
    for n in (0, 1, 4, length, 123457):
        want = [crc32c.shift(int(c), n) for c in crcs[:300]]
        assert crc32c.shift_array(crcs[:300], n).tolist() == want
        for m in (1, 2, 17, 300):
            got = crc32c.combine_equal(crcs[:m], length, n)
            assert got == crc32c.shift(crc32c.combine_equal(crcs[:m], length), n)


def test_shift_period_is_the_identity():
    for bit in range(32):  # on a basis: the linear map itself is the identity
        assert crc32c.shift(1 << bit, crc32c.SHIFT_PERIOD) == 1 << bit
        assert crc32c.shift(crc32c.shift(1 << bit, 4), crc32c.SHIFT_PERIOD - 4) == 1 << bit


# -- the scanner ---------------------------------------------------------------------------


def run_records(seed: int, n: int = 400, odd: float = 0.02):
    """Mostly long runs of equal lengths, with an odd record now and then."""
    rng = random.Random(seed)
    recs = []
    while len(recs) < n:
        if rng.random() < odd:
            recs.append(rng.randbytes(rng.randint(0, 90)))
        else:
            length = rng.choice([0, 3, 24, 64, 100])
            recs += [rng.randbytes(length) for _ in range(rng.randint(16, 120))]
    return recs[:n]


class Counting:
    """Counts the records the scanner accepted on a chunk CRC."""

    def __init__(self, monkeypatch):
        self.records = 0
        real = python_io.RecordScanner._take_verified

        def take_verified(scanner, *args):
            got = real(scanner, *args)
            self.records += got
            return got

        monkeypatch.setattr(python_io.RecordScanner, "_take_verified", take_verified)


def scan_with_crc(raw: bytes, chunk: int, batch: int, wrong_crc: bool = False):
    """Feed `raw` in `chunk`-byte pieces through two reused buffers, each with its CRC."""
    s = python_io.RecordScanner("f")
    out, offs = [], []
    ring = [bytearray(chunk), bytearray(chunk)]
    pos, i = 0, 0
    while True:
        try:
            while s.take(batch, out, offs) == batch:
                pass
        except errors.DataLossError as e:
            err = int(e.message.split("corrupted record at ")[1].split()[0])
            with pytest.raises(errors.DataLossError):
                s.take(batch, out, offs)
            return out, offs, err
        if pos >= len(raw):
            return out, offs, None
        piece = raw[pos : pos + chunk]
        pos += len(piece)
        buf, other = ring[i % 2], ring[(i + 1) % 2]
        i += 1
        buf[: len(piece)] = piece
        s.feed(buf, len(piece), crc_of(piece) ^ (1 if wrong_crc else 0))
        s.release(other)
        other[:] = b"\xee" * chunk


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk", [700, 4099, 1 << 20])
@pytest.mark.parametrize("odd", [0.0, 0.02])
def test_good_files_give_the_same_records(monkeypatch, seed, chunk, odd):
    count = Counting(monkeypatch)
    raw = frame(run_records(seed, odd=odd))
    want = reference(raw)
    for batch in (1, 37, 1 << 30):
        assert scan_with_crc(raw, chunk, batch) == want
    if chunk > 700:  # (700: runs of 100-byte records are too short)
        assert count.records > 2 * len(want[0])  # most were accepted on the chunk CRC


def test_a_wrong_chunk_crc_only_costs_the_fast_path(monkeypatch):
    count = Counting(monkeypatch)
    raw = frame(run_records(1))
    assert scan_with_crc(raw, 4099, 50, wrong_crc=True) == reference(raw)
    assert count.records == 0


def _flip(raw: bytes, at: int, bit: int = 0) -> bytes:
    b = bytearray(raw)
    b[at] ^= 1 << bit
    return bytes(b)


@pytest.mark.parametrize("chunk", [23 * 40 + 17, 4096])  # (4096: the whole file)
def test_every_single_byte_of_damage_is_found_where_the_reference_finds_it(chunk):
    # 60 records of 24 bytes (40 framed): runs span chunks, are cut by them, or fill them.
    recs = [bytes([i]) * 24 for i in range(60)]
    raw = frame(recs)
    for at in range(len(raw)):
        bad = _flip(raw, at, at % 8)
        want = reference(bad)
        assert want[2] is not None or len(want[0]) < len(recs)
        assert scan_with_crc(bad, chunk, 1 << 30) == want, at


@pytest.mark.parametrize("chunk", [1300, 4096])  # (4096: the whole file)
def test_odd_records_between_runs_every_byte_damaged(monkeypatch, chunk):
    # runs of 20 records of 24 bytes with odd records before, between and after them
    recs = [b"o" * 7] + [bytes([i]) * 24 for i in range(20)] + [b"p" * 50, b"q"]
    recs += [bytes([i]) * 24 for i in range(20)] + [b"r" * 3]
    raw = frame(recs)
    count = Counting(monkeypatch)
    assert scan_with_crc(raw, chunk, 1 << 30) == reference(raw)
    assert count.records >= 20
    for at in range(len(raw)):
        bad = _flip(raw, at, (at * 5) % 8)
        assert scan_with_crc(bad, chunk, 1 << 30) == reference(bad), at
    assert scan_with_crc(_flip(raw, 900), chunk, 3) == reference(_flip(raw, 900))


@pytest.mark.parametrize("where", ["first", "second", "middle", "last", "straddling"])
@pytest.mark.parametrize("what", ["length", "length_crc", "data", "data_crc"])
def test_damage_at_chosen_places_in_runs(where, what):
    recs = [os.urandom(100) for _ in range(200)]  # 116 bytes framed
    raw = frame(recs)
    chunk = 116 * 50 + 70  # record 50 straddles the first two chunks
    i = {"first": 0, "second": 1, "middle": 117, "last": 199, "straddling": 50}[where]
    at = 116 * i + {"length": 3, "length_crc": 9, "data": 12 + 60, "data_crc": 113}[what]
    bad = _flip(raw, at)
    want = reference(bad)
    assert want[2] is not None
    assert scan_with_crc(bad, chunk, 1 << 30) == want
    assert scan_with_crc(bad, chunk, 7) == want


def test_damage_in_two_records_of_one_chunk_names_the_first():
    recs = [os.urandom(64) for _ in range(300)]
    raw = frame(recs)
    bad = _flip(_flip(raw, 80 * 40 + 30), 80 * 200 + 30)
    assert scan_with_crc(bad, 1 << 20, 1 << 30) == reference(bad)
    assert reference(bad)[2] == 80 * 40 + 12


@pytest.mark.parametrize("seed", range(3))
def test_variable_lengths_with_chunk_crcs(seed):
    rng = random.Random(seed)
    recs = [rng.randbytes(rng.randint(0, 300)) for _ in range(300)]
    raw = frame(recs)
    assert scan_with_crc(raw, 1000, 13) == reference(raw)
    bad = _flip(raw, rng.randrange(len(raw)))
    assert scan_with_crc(bad, 1000, 13) == reference(bad)


def test_a_huge_length_in_a_chunk_with_a_crc_is_bounded():
    recs = [b"x" * 16] * 40
    raw = bytearray(frame(recs))
    header = struct.pack("<Q", 1 << 60)
    raw[30 * 32 : 30 * 32 + 12] = header + struct.pack("<I", crc32c.masked_crc32c(header))
    s = python_io.RecordScanner("h")
    s.feed(bytes(raw), None, crc_of(raw))
    values = []
    s.take(100, values)
    assert values == recs[:30]
    assert s.need() > 0


# -- the reader op ---------------------------------------------------------------------------


def _reader_records(tmp_path, raw: bytes, n: int):
    import asyncflow as af
    from asyncflow.ops import data_flow_ops

    path = tmp_path / "r.tfrecord"
    path.write_bytes(raw)
    with af.Graph().as_default():
        q = data_flow_ops.FIFOQueue(4, af.string)
        fill, close = q.enqueue(str(path)), q.close()
        keys, values = reader_ops.TFRecordReader().read_up_to(q, n)
        with af.Session() as sess:
            sess.run(fill)
            sess.run(close)
            got, err = [], None
            try:
                got = _read_all(sess, [keys, values])
            except errors.DataLossError as e:
                err = e
    return str(path), got, err


@pytest.mark.parametrize("ring", [4096, 1 << 20])
def test_reader_accepts_runs_on_chunk_crcs(monkeypatch, tmp_path, ring):
    monkeypatch.setattr(reader_ops, "_RING_BYTES", ring)
    count = Counting(monkeypatch)
    recs = run_records(7, 600)
    raw = frame(recs)
    path, got, err = _reader_records(tmp_path, raw, 64)
    assert err is None
    _, offs, _ = reference(raw)
    assert np.concatenate([v for _, v in got]).tolist() == recs
    keys = np.concatenate([k for k, _ in got]).tolist()
    assert keys == [b"%s:%d" % (path.encode(), o) for o in offs]
    assert count.records > len(recs) // 2


def test_reader_damage_in_a_run_is_data_loss_after_the_good_records(monkeypatch, tmp_path):
    monkeypatch.setattr(reader_ops, "_RING_BYTES", 4096)
    recs = [os.urandom(100) for _ in range(300)]
    bad = _flip(frame(recs), 116 * 123 + 40)
    good, _, at = reference(bad)

    import asyncflow as af
    from asyncflow.ops import data_flow_ops

    path = tmp_path / "r.tfrecord"
    path.write_bytes(bad)
    with af.Graph().as_default():
        q = data_flow_ops.FIFOQueue(4, af.string)
        fill, close = q.enqueue(str(path)), q.close()
        values = reader_ops.TFRecordReader().read_up_to(q, 50)[1]
        with af.Session() as sess:
            sess.run(fill)
            sess.run(close)
            got = []
            with pytest.raises(errors.DataLossError, match=f"corrupted record at {at} "):
                while True:
                    got += sess.run(values).tolist()
    assert got == good


def test_chunk_crcs_are_asked_for_only_while_they_pay():
    rng = random.Random(5)
    varied = frame([rng.randbytes(rng.randint(0, 300)) for _ in range(2000)])
    s = python_io.RecordScanner("v")
    assert s.wants_crc()
    s.feed(varied[:4000], None, crc_of(varied[:4000]))
    s.take(1 << 30, [])  # reaches the chunk: no run to accept on its CRC
    assert not s.wants_crc()
    pos = 4000
    for _ in range(python_io._CRC_PROBE):
        assert not s.wants_crc()
        s.feed(varied[pos : pos + 4000])
        pos += 4000
        s.take(1 << 30, [])
    assert s.wants_crc()  # tried again now and then

    runs = frame([b"r" * 50] * 500)
    s = python_io.RecordScanner("r")
    for pos in range(0, len(runs), 4000):
        assert s.wants_crc()
        piece = runs[pos : pos + 4000]
        s.feed(piece, None, crc_of(piece))
        s.take(1 << 30, [])


def test_default_run_length_on_a_large_file(monkeypatch, tmp_path):
    monkeypatch.undo()  # the real _MIN_VERIFY_RUN
    count = Counting(monkeypatch)
    recs = [os.urandom(64) for _ in range(3000)] + [b"odd"] + [os.urandom(64)] * 1000
    raw = frame(recs)
    assert scan_with_crc(raw, 1 << 17, 1 << 30) == reference(raw)
    assert count.records > 3000
