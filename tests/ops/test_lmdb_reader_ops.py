"""LMDBReader and the LMDB file walk, against liblmdb's records.

tests/fixtures/record_lmdb.py wrote the files with liblmdb (the `lmdb` package) and
recorded their records in liblmdb's cursor order; it also recorded that TF 2.21 no
longer reads LMDB (UnimplementedError), so the reader follows TF's kernel as it was
(ops/lmdb_reader_ops.py): the database's keys in key order, file after file.
"""

import asyncio
import hashlib
import json
import pathlib
import random
import shutil

import pytest

import asyncflow as af
from asyncflow import errors, lmdb_format
from asyncflow import graph as ops
from asyncflow.ops import lmdb_reader_ops

FIX = pathlib.Path(__file__).parents[1] / "fixtures" / "lmdb"
REF = json.loads((FIX / "lmdb.json").read_text())


def _value(v: bytes) -> str:
    return v.hex() if len(v) <= 32 else f"sha256:{hashlib.sha256(v).hexdigest()}:{len(v)}"


def _as_ref(records) -> list:
    return [[k.hex(), _value(v)] for k, v in records]


def _walk(name: str) -> list:
    with lmdb_format.LMDBFile(str(FIX / name)) as f:
        return list(f.records())


@pytest.mark.parametrize("name", ["data.mdb", "tree.mdb", "dups.mdb", "empty.mdb"])
def test_walk_gives_liblmdb_records_in_order(name):
    assert _as_ref(_walk(name)) == REF[name]


def test_walk_of_a_dupsort_database():
    # The main database of dups.mdb names the DUPSORT database "dups"; walk that as if
    # it were the main one: keys with values in a sub-page, a sub-tree, and alone.
    with lmdb_format.LMDBFile(str(FIX / "dups.mdb")) as f:
        ((name, record),) = f.records()
        assert name == b"dups"
        f._main = lmdb_format._Tree(record)
        assert _as_ref(f.records()) == REF["dups.mdb:dups"]
    assert {bytes.fromhex(k) for k, _ in REF["dups.mdb:dups"]} == {b"few", b"many", b"one"}


@pytest.mark.parametrize(
    "content, match",
    [
        (b"", "not an LMDB file"),
        (b"hello world\n" * 1000, "not an LMDB file"),
        ("cut", "MDB_PAGE_NOTFOUND"),
    ],
)
def test_bad_files_are_lmdb_errors(tmp_path, content, match):
    path = tmp_path / "bad.mdb"
    if content == "cut":
        content = (FIX / "tree.mdb").read_bytes()[: 3 * 4096]
    path.write_bytes(content)
    with pytest.raises(lmdb_format.LMDBError, match=match):
        with lmdb_format.LMDBFile(str(path)) as f:
            list(f.records())


def test_damaged_files_never_crash_or_hang(tmp_path):
    base = (FIX / "tree.mdb").read_bytes()
    rng = random.Random(3)
    path = tmp_path / "x.mdb"
    outcomes = set()
    for _ in range(60):
        raw = bytearray(base)
        for _ in range(rng.randint(1, 12)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        path.write_bytes(bytes(raw))
        try:
            with lmdb_format.LMDBFile(str(path)) as f:
                sum(1 for _ in f.records())
            outcomes.add("read")
        except lmdb_format.LMDBError:
            outcomes.add("error")
    assert outcomes == {"read", "error"}


def test_a_page_cycle_is_an_error(tmp_path):
    # tree.mdb's root is a branch page: point its first child at the root itself.
    raw = bytearray((FIX / "tree.mdb").read_bytes())
    with lmdb_format.LMDBFile(str(FIX / "tree.mdb")) as f:
        root, psize = f._main.root, f.page_size
    page = root * psize
    ptr = int.from_bytes(raw[page + 16 : page + 18], "little")
    raw[page + ptr : page + ptr + 4] = (root & 0xFFFF).to_bytes(2, "little") + (
        root >> 16
    ).to_bytes(2, "little")
    (tmp_path / "c.mdb").write_bytes(bytes(raw))
    with pytest.raises(lmdb_format.LMDBError, match="MDB_CORRUPTED"):
        with lmdb_format.LMDBFile(str(tmp_path / "c.mdb")) as f:
            list(f.records())


# -- the reader -----------------------------------------------------------------------------


def _records(name: str) -> list:
    return [
        (bytes.fromhex(k), v if v.startswith("sha256:") else bytes.fromhex(v))
        for k, v in REF[name]
    ]


def _check(got_k, got_v, name):
    assert [[k.hex(), _value(v)] for k, v in zip(got_k, got_v)] == REF[name]


def _session_reading(paths, read_up_to=None):
    """(sess, key, value, reader) for an LMDBReader over `paths` (queue closed)."""
    fq = af.FIFOQueue(10, af.string)
    reader = af.LMDBReader()
    if read_up_to:
        key, value = reader.read_up_to(fq, read_up_to)
    else:
        key, value = reader.read(fq)
    sess = af.Session()
    for p in paths:
        sess.run(fq.enqueue(str(p).encode()))
    sess.run(fq.close())
    return sess, key, value, reader


def test_tf_2_21_no_longer_reads_lmdb():
    # What the fixture recorded: TF 2.21's kernel is a stub.  This reader reads instead.
    assert REF["tf"]["tf_version"] == "2.21.0"
    assert REF["tf"]["LMDBReader"]["error"] == "UnimplementedError"
    assert "LMDB support is removed" in REF["tf"]["LMDBReader"]["message"]


def test_reader_reads_keys_in_order_then_out_of_range():
    with ops.Graph().as_default():
        sess, key, value, reader = _session_reading([FIX / "data.mdb"])
        with sess:
            got = [tuple(sess.run([key, value])) for _ in range(10)]
            assert got == [(str(i).encode(), chr(97 + i).encode()) for i in range(10)]
            with pytest.raises(errors.OutOfRangeError):
                sess.run(value)
            assert sess.run(reader.num_records_produced()) == 10
            assert sess.run(reader.num_work_units_completed()) == 1
        assert reader.reader_ref.op.type == "LMDBReader"
        assert reader.reader_ref.op.name == "LMDBReader"


def test_reader_goes_from_file_to_file_and_directories(tmp_path):
    (tmp_path / "env").mkdir()
    shutil.copy(FIX / "data.mdb", tmp_path / "env" / "data.mdb")
    paths = [FIX / "tree.mdb", FIX / "empty.mdb", tmp_path / "env", FIX / "data.mdb"]
    with ops.Graph().as_default():
        sess, key, value, reader = _session_reading(paths, read_up_to=64)
        with sess:
            keys, values = [], []
            while True:
                try:
                    k, v = sess.run([key, value])
                except errors.OutOfRangeError:
                    break
                assert len(v) <= 64
                keys += list(k)
                values += list(v)
            assert sess.run(reader.num_work_units_completed()) == 4
    want = REF["tree.mdb"] + REF["data.mdb"] * 2
    assert [[k.hex(), _value(v)] for k, v in zip(keys, values)] == want
    assert not list(FIX.glob("*-lock"))  # no lock file was made


def test_read_up_to_stops_at_the_end_of_a_file():
    with ops.Graph().as_default():
        sess, _, value, _ = _session_reading([FIX / "data.mdb"] * 2, read_up_to=4)
        with sess:
            sizes = []
            while True:
                try:
                    sizes.append(len(sess.run(value)))
                except errors.OutOfRangeError:
                    break
    assert sizes == [4, 4, 2, 4, 4, 2]


def test_reset_starts_over_and_state_is_unimplemented():
    with ops.Graph().as_default():
        fq = af.FIFOQueue(10, af.string)
        reader = af.LMDBReader(name="lmdb")
        key, _ = reader.read(fq)
        reset = reader.reset()
        with af.Session() as sess:
            sess.run(fq.enqueue_many([[str(FIX / "data.mdb").encode()] * 2]))
            assert [sess.run(key) for _ in range(3)] == [b"0", b"1", b"2"]
            sess.run(reset)  # forgets the current file: the next read takes the next one
            assert sess.run(reader.num_records_produced()) == 0
            assert sess.run(key) == b"0"
            with pytest.raises(errors.UnimplementedError):
                sess.run(reader.serialize_state())


@pytest.mark.parametrize(
    "content, error",
    [(b"not lmdb at all" * 600, errors.DataLossError), (None, errors.NotFoundError)],
)
def test_bad_work_is_an_op_error(tmp_path, content, error):
    path = tmp_path / "x.mdb"
    if content is not None:
        path.write_bytes(content)
    with ops.Graph().as_default():
        sess, _, value, _ = _session_reading([path])
        with sess:
            with pytest.raises(error, match="x.mdb"):
                sess.run(value)


def test_damage_midway_gives_the_records_before_it_then_data_loss(tmp_path, monkeypatch):
    monkeypatch.setattr(lmdb_reader_ops, "_BATCH", 8)
    raw = bytearray((FIX / "tree.mdb").read_bytes())
    with lmdb_format.LMDBFile(str(FIX / "tree.mdb")) as f:
        root, psize = f._main.root, f.page_size
    page = root * psize  # the root branch page: make its last child point past the file
    lower = int.from_bytes(raw[page + 12 : page + 14], "little")
    ptr = int.from_bytes(raw[page + lower - 2 : page + lower], "little")
    raw[page + ptr : page + ptr + 2] = b"\xff\x7f"
    (tmp_path / "d.mdb").write_bytes(bytes(raw))
    with ops.Graph().as_default():
        sess, _, value, _ = _session_reading([tmp_path / "d.mdb"], read_up_to=1000)
        with sess:
            got = list(sess.run(value))
            assert 0 < len(got) < 300
            assert [_value(v) for v in got] == [v for _, v in REF["tree.mdb"][: len(got)]]
            for _ in range(2):  # the error stays
                with pytest.raises(errors.DataLossError, match="MDB_PAGE_NOTFOUND"):
                    sess.run(value)


def test_a_cancelled_read_loses_no_records():
    with ops.Graph().as_default():
        fq = af.FIFOQueue(10, af.string)
        reader = af.LMDBReader()
        _, value = reader.read_up_to(fq, 3)

        async def main():
            async with af.Session() as sess:
                await sess.arun(fq.enqueue(str(FIX / "data.mdb").encode()))
                await sess.arun(fq.close())
                step = asyncio.ensure_future(sess.arun(value))
                await asyncio.sleep(0)
                step.cancel()
                got = []
                try:
                    got += list(await step)
                except (asyncio.CancelledError, errors.CancelledError):
                    pass
                while True:
                    try:
                        got += list(await sess.arun(value))
                    except errors.OutOfRangeError:
                        return got

        assert asyncio.run(main()) == [chr(97 + i).encode() for i in range(10)]
