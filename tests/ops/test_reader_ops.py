"""Reader ops: TF's records and keys, state across steps, put-back on failure.

Most tests feed filenames through a test-only queue op (`TestFilenameQueue`) whose
object has the reader-facing `dequeue()` coroutine, so the readers are tested on their
own; `test_with_fifo_queue` runs them on the real FIFOQueue when it is available.
"""

import asyncio
import collections
import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors, python_io, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import reader_ops
from asyncflow.registry import NotDifferentiable, register_op

REF = json.loads((pathlib.Path(__file__).parents[1] / "fixtures" / "io_tf.json").read_text())
RECORDS = [bytes.fromhex(h) for h in REF["records"]]


class FakeQueue:
    """Filenames for readers: dequeue suspends while empty; closed+empty → OutOfRange."""

    def __init__(self):
        self.items = collections.deque()
        self.closed = False
        self.waiters: list[asyncio.Future] = []
        self.dequeued = 0

    def put(self, *names):
        self.items.extend(n.encode() if isinstance(n, str) else n for n in names)
        self._wake()

    def close(self):
        self.closed = True
        self._wake()

    def _wake(self):
        for w in self.waiters:
            if not w.done():
                w.get_loop().call_soon_threadsafe(w.set_result, None)
        self.waiters = []

    async def dequeue(self):
        while not self.items:
            if self.closed:
                raise errors.OutOfRangeError(None, None, "FIFOQueue is closed and has 0 elements")
            fut = asyncio.get_running_loop().create_future()
            self.waiters.append(fut)
            await fut
        self.dequeued += 1
        return self.items.popleft()


QUEUES: dict[str, FakeQueue] = {}

TestFilenameQueue = register_op(
    "TestFilenameQueue",
    outputs=["handle: string"],
    attrs={"key": ""},
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
)


NotDifferentiable("TestFilenameQueue")


@TestFilenameQueue.kernel("CPU")
async def _test_queue(ctx):
    out = np.empty((), dtype=object)
    out[()] = QUEUES[ctx.attrs["key"]]
    return out


@pytest.fixture
def fq(request):
    q = FakeQueue()
    QUEUES[request.node.name] = q
    handle = ops.apply_op("TestFilenameQueue", [], {"key": request.node.name}).outputs[0]
    yield q, handle
    q.close()
    QUEUES.pop(request.node.name, None)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"header\nl1\nl2\r\nl3")
    (tmp_path / "b.txt").write_bytes(b"h\n\nm1\n")
    (tmp_path / "fixed.bin").write_bytes(b"HH" + bytes(range(10)) + b"F")
    for name, comp in (("r.tfrecord", ""), ("r.tfrecord.gz", "GZIP")):
        with python_io.TFRecordWriter(str(tmp_path / name), comp) as w:
            for r in RECORDS[:4]:
                w.write(r)
    return tmp_path


MAKERS = {
    "text": (lambda: reader_ops.TextLineReader(), ["a.txt", "b.txt"]),
    "text_skip": (lambda: reader_ops.TextLineReader(skip_header_lines=1), ["a.txt", "b.txt"]),
    "fixed": (
        lambda: reader_ops.FixedLengthRecordReader(3, header_bytes=2, footer_bytes=1),
        ["fixed.bin"],
    ),
    "fixed_hop": (
        lambda: reader_ops.FixedLengthRecordReader(4, header_bytes=2, footer_bytes=1, hop_bytes=2),
        ["fixed.bin"],
    ),
    "tfrecord": (lambda: reader_ops.TFRecordReader(), ["r.tfrecord"]),
    "tfrecord_gzip": (
        lambda: reader_ops.TFRecordReader(options=python_io.TFRecordOptions("GZIP")),
        ["r.tfrecord.gz"],
    ),
    "whole": (lambda: reader_ops.WholeFileReader(), ["a.txt", "b.txt"]),
}


@pytest.mark.parametrize("case", sorted(MAKERS))
def test_read_matches_tf(case, sess, fq, files):
    q, handle = fq
    make, names = MAKERS[case]
    reader = make()
    k, v = reader.read(handle)
    produced, done = reader.num_records_produced(), reader.num_work_units_completed()
    q.put(*[str(files / n) for n in names])
    q.close()
    out = []
    while True:
        try:
            kk, vv = sess.run([k, v])
        except errors.OutOfRangeError:
            out.append("OutOfRange")
            break
        out.append([kk.decode().replace(str(files) + "/", ""), vv.hex()])
    out += [int(sess.run(produced)), int(sess.run(done))]
    assert out == REF["readers"][case]


@pytest.mark.parametrize("case", ["text", "tfrecord", "fixed_hop", "tfrecord_gzip"])
def test_read_up_to_gives_the_same_records(case, sess, fq, files):
    q, handle = fq
    make, names = MAKERS[case]
    keys, values = make().read_up_to(handle, 3)
    assert keys.shape.as_list() == [None]
    q.put(*[str(files / n) for n in names])
    q.close()
    got = []
    while True:
        try:
            kk, vv = sess.run([keys, values])
        except errors.OutOfRangeError:
            break
        assert 1 <= len(kk) <= 3
        got += [[a.decode().replace(str(files) + "/", ""), b.hex()] for a, b in zip(kk, vv)]
    want = [r for r in REF["readers"][case] if isinstance(r, list)]
    assert got == want


def test_reader_waits_for_filenames(sess, fq, files):
    q, handle = fq
    k, v = reader_ops.TFRecordReader().read(handle)

    async def main():
        step = asyncio.ensure_future(sess.arun(v))
        for _ in range(20):  # let the read reach its dequeue
            await asyncio.sleep(0)
        assert not step.done() and q.waiters
        q.put(str(files / "r.tfrecord"))
        return await step

    assert asyncio.run(main()) == RECORDS[0]


def test_state_survives_steps_and_reset(sess, fq, files):
    q, handle = fq
    reader = reader_ops.TFRecordReader()
    _, v = reader.read(handle)
    reset = reader.reset()
    produced = reader.num_records_produced()
    q.put(str(files / "r.tfrecord"), str(files / "r.tfrecord"))
    assert [sess.run(v) for _ in range(2)] == RECORDS[:2]
    assert sess.run(produced) == 2
    sess.run(reset)  # the rest of the first file is dropped; the second one starts
    assert sess.run(produced) == 0
    assert [sess.run(v) for _ in range(4)] == RECORDS[:4]


def test_failed_step_puts_records_back(sess, fq, files):
    q, handle = fq
    reader = reader_ops.TFRecordReader()
    keys, values = reader.read_up_to(handle, 2)
    bad = af.placeholder(af.bool, [])
    with af.control_dependencies([values]):
        check = af.Assert(bad, ["fail after reading"])
    with af.control_dependencies([check]):
        out = af.identity(values)
    produced = reader.num_records_produced()
    q.put(str(files / "r.tfrecord"))
    q.close()
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(out, {bad: False})
    assert sess.run(produced) == 0
    assert list(sess.run(out, {bad: True})) == RECORDS[:2]  # the same two again
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(out, {bad: False})
    assert list(sess.run(values)) == RECORDS[2:4]
    with pytest.raises(errors.OutOfRangeError):
        sess.run(values)


def test_cancelled_step_loses_nothing(sess, fq, files):
    q, handle = fq
    _, v = reader_ops.TFRecordReader().read_up_to(handle, 10)

    async def main():
        step = asyncio.ensure_future(sess.arun(v))
        for _ in range(20):
            await asyncio.sleep(0)
        step.cancel()  # waiting on the empty filename queue
        with pytest.raises((asyncio.CancelledError, errors.CancelledError)):
            await step
        q.put(str(files / "r.tfrecord"))
        q.close()
        return list(await sess.arun(v))

    assert asyncio.run(main()) == RECORDS[:4]


def test_read_up_to_returns_the_rest_at_the_end(sess, fq, files):
    q, handle = fq
    _, v = reader_ops.TFRecordReader().read_up_to(handle, 3)
    q.put(str(files / "r.tfrecord"), str(files / "r.tfrecord"))
    q.close()
    sizes = []
    while True:
        try:
            sizes.append(len(sess.run(v)))
        except errors.OutOfRangeError:
            break
    # TF 2.21: a read returns what the current file has (4 records a file): 3, 1, 3, 1.
    assert sizes == [3, 1, 3, 1]


def test_corrupt_record_is_data_loss_after_good_ones(sess, fq, files, tmp_path):
    raw = bytearray((files / "r.tfrecord").read_bytes())
    raw[-1] ^= 1  # the last record's data CRC
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(raw))
    q, handle = fq
    _, v = reader_ops.TFRecordReader().read_up_to(handle, 10)
    q.put(str(bad))
    assert list(sess.run(v)) == RECORDS[:3]
    with pytest.raises(errors.DataLossError, match=f"corrupted record at .* in file {bad}"):
        sess.run(v)


def test_missing_file_is_not_found(sess, fq, tmp_path):
    q, handle = fq
    _, v = reader_ops.TextLineReader().read(handle)
    q.put(str(tmp_path / "missing.txt"))
    with pytest.raises(errors.NotFoundError):
        sess.run(v)


def test_large_text_file_in_small_chunks(sess, fq, tmp_path, monkeypatch):
    monkeypatch.setattr(python_io, "CHUNK_BYTES", 7)
    lines = [b"line %d" % i * (i % 3) for i in range(200)]
    p = tmp_path / "big.txt"
    p.write_bytes(b"\n".join(lines) + b"\n")
    q, handle = fq
    keys, v = reader_ops.TextLineReader().read_up_to(handle, 64)
    q.put(str(p))
    q.close()
    got = []
    while True:
        try:
            got += list(sess.run(v))
        except errors.OutOfRangeError:
            break
    assert got == lines


def test_two_steps_share_one_reader_exactly_once(sess, fq, files):
    q, handle = fq
    _, v = reader_ops.TFRecordReader().read(handle)
    q.put(*[str(files / "r.tfrecord")] * 5)
    q.close()

    async def main():
        out = []

        async def worker():
            while True:
                try:
                    out.append(await sess.arun(v))
                except errors.OutOfRangeError:
                    return

        await asyncio.gather(*(worker() for _ in range(4)))
        return out

    got = asyncio.run(main())
    assert sorted(got) == sorted(RECORDS[:4] * 5)


def test_matching_files_and_read_file(sess, files):
    names = sess.run(reader_ops.matching_files(str(files / "*.txt")))
    assert [pathlib.Path(n.decode()).name for n in names] == ["a.txt", "b.txt"]
    assert sess.run(reader_ops.read_file(str(files / "b.txt"))) == b"h\n\nm1\n"
    with pytest.raises(errors.NotFoundError):
        sess.run(reader_ops.read_file(str(files / "nope")))


def test_bad_reader_attrs(sess, fq):
    q, handle = fq
    _, v = reader_ops.FixedLengthRecordReader(0).read(handle)
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(v)
    with pytest.raises(TypeError):
        reader_ops.TFRecordReader().read(object())


def test_a_poison_record_fails_one_step_only(tmp_path):
    # Issue 18 item 11.  TF 2.21: TextLineReader over "1\nbad\n3\n" through
    # string_to_number gives 1.0, InvalidArgumentError, 3.0, then OutOfRangeError, and
    # num_records_produced() is 3.
    (tmp_path / "p.txt").write_bytes(b"1\nbad\n3\n")
    with ops.Graph().as_default():
        fq = af.FIFOQueue(3, af.string)
        reader = af.TextLineReader()
        _, value = reader.read(fq)
        num = af.string_to_number(value)
        with af.Session() as sess:
            sess.run(fq.enqueue(str(tmp_path / "p.txt").encode()))
            sess.run(fq.close())
            assert sess.run(num) == 1.0
            with pytest.raises(errors.InvalidArgumentError):
                sess.run(num)
            assert sess.run(num) == 3.0
            with pytest.raises(errors.OutOfRangeError):
                sess.run(num)
            assert sess.run(reader.num_records_produced()) == 3


def test_read_up_to_does_not_wait_for_the_next_file(tmp_path):
    # Issue 18 item 12.  TF 2.21: TextLineReader.read_up_to(4) over files of 2, 0 and 3
    # lines with the filename queue still open gives [a, b], then [c, d, e] (keys
    # "r2.txt:1".."r2.txt:3"), then, after one more file, [a, b]; OutOfRangeError once
    # the queue is closed and empty.
    (tmp_path / "r1.txt").write_bytes(b"a\nb\n")
    (tmp_path / "r2.txt").write_bytes(b"c\nd\ne\n")
    (tmp_path / "r0.txt").write_bytes(b"")
    with ops.Graph().as_default():
        fq = af.FIFOQueue(5, af.string)
        names = af.placeholder(af.string, [None])
        k, v = af.TextLineReader().read_up_to(fq, 4)
        with af.Session() as sess:
            paths = [str(tmp_path / n).encode() for n in ("r1.txt", "r0.txt", "r2.txt")]
            sess.run(fq.enqueue_many([names]), {names: paths})
            assert sess.run(v).tolist() == [b"a", b"b"]
            keys, values = sess.run([k, v])
            assert values.tolist() == [b"c", b"d", b"e"]
            assert keys.tolist() == [paths[2] + b":%d" % i for i in (1, 2, 3)]
            sess.run(fq.enqueue_many([names]), {names: paths[:1]})
            assert sess.run(v).tolist() == [b"a", b"b"]
            sess.run(fq.close())
            with pytest.raises(errors.OutOfRangeError):
                sess.run(v)


@pytest.mark.parametrize("where,error", [("in_data", True), ("in_header", False)])
def test_truncated_tfrecord_file_is_data_loss_for_the_reader(tmp_path, where, error):
    # Issue 18 item 14.  TF 2.21's TFRecordReader: b"one", b"two", then DataLossError
    # "truncated record at 38" (data cut) or, for a cut header, the end of the file.
    from test_python_io import _cut_file

    path = _cut_file(tmp_path, where)
    with ops.Graph().as_default():
        fq = af.FIFOQueue(3, af.string)
        _, v = af.TFRecordReader().read(fq)
        with af.Session() as sess:
            sess.run(fq.enqueue(str(path).encode()))
            sess.run(fq.close())
            assert [sess.run(v), sess.run(v)] == [b"one", b"two"]
            want = errors.DataLossError if error else errors.OutOfRangeError
            with pytest.raises(want):
                sess.run(v)
