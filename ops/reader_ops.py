"""Readers: ops that turn a queue of filenames into (key, value) records.

TF1's reader ops (TextLineReaderV2, FixedLengthRecordReaderV2, TFRecordReaderV2,
WholeFileReaderV2, IdentityReaderV2 and ReaderReadV2 / ReaderReadUpToV2 /
ReaderNumRecordsProducedV2 / ReaderNumWorkUnitsCompletedV2 / ReaderResetV2) and the
Python `ReaderBase` classes (`af.TFRecordReader()`, `reader.read(queue)`...).

A reader is a resource in the session's container (shared_name or the op's name).  Its
handle is a 0-d string tensor holding the object (as stacks and queues: this runtime
has no resource dtype).  Reading holds the reader's asyncio lock, so concurrent steps
take records one after another, as TF's mutex does.  When the current file is used up
the reader dequeues the next filename from the queue (suspending while it is empty);
a closed, empty queue ends the reading with OutOfRangeError.

File I/O never blocks the loop: files are opened and read on worker threads in large
chunks (python_io.CHUNK_BYTES; _RING_BYTES for uncompressed TFRecord files, read into
two reused buffers), and the TFRecord reader keeps one chunk read ahead while it parses
the current one (see _TFRecordReader for the bounded GIL hand-overs that make the read
overlap the parsing).

Exactly-once (DESIGN.md "State"): records a step took are put back when that step
fails or is cancelled (`current_step().on_failure`) -- unless an op computing on them
failed (`queues.poisoned_by`: a poison record fails one step, as in TF) -- and records
gathered by a read that is itself cancelled are put back before the cancellation
propagates.  Put-back
records are served first, in their original order (each record has a serial number),
so no record is lost or duplicated.  A chunk read still in flight when its reader was
cancelled is kept and consumed by the next read.

Invariants:
- `produced` counts records handed out and not put back; `completed` counts files
  finished (TF's num_work_units_completed).
- At most one worker-thread read per reader is in flight, and only its future touches
  the reader's source until it completes.
"""

from __future__ import annotations

import asyncio
import bisect
import glob
import mmap
import os
import threading

import numpy as np

from asyncflow import dtypes, errors, python_io, queues, tensor_shape
from asyncflow import graph as ops
from asyncflow.crc32c import crc32c_gil_free
from asyncflow.kernel_api import PASS_RESOURCE_OPS, current_step, kernel_resource
from asyncflow.proto_wire import varint as _varint
from asyncflow.registry import REQUIRED, NotDifferentiable, register_op

__all__ = [
    "ReaderBase",
    "TextLineReader",
    "FixedLengthRecordReader",
    "TFRecordReader",
    "WholeFileReader",
    "IdentityReader",
    "matching_files",
    "read_file",
]


def _handle_value(obj) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = obj
    return out


def _handle_object(value, cls, what: str):
    obj = value[()] if isinstance(value, np.ndarray) else value
    if not isinstance(obj, cls):
        raise errors.InvalidArgumentError(None, None, f"Expected a {what} handle, got {obj!r}")
    return obj


def _as_path(work) -> str:
    return os.fsdecode(work if isinstance(work, (bytes, str)) else bytes(work))


async def _in_thread(fn, *args):
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


# -- dequeuing work from the filename queue ---------------------------------------------------


async def _dequeue_work(queue_handle) -> bytes:
    """The next filename from the queue behind `queue_handle` (suspends while empty).

    Raises:
      OutOfRangeError: the queue is closed and empty.
    """
    q = queue_handle[()] if isinstance(queue_handle, np.ndarray) else queue_handle
    # `dequeue_work` (preferred) must not register a step-failure undo: the reader keeps
    # a dequeued filename as its current work even when the step fails, so putting it
    # back in the queue as well would read the file twice.
    dequeue = getattr(q, "dequeue_work", None) or getattr(q, "dequeue", None)
    if dequeue is None:
        raise errors.InvalidArgumentError(None, None, f"Expected a queue handle, got {q!r}")
    item = await dequeue()
    if isinstance(item, (list, tuple)):
        if len(item) != 1:
            raise errors.InvalidArgumentError(
                None, None, f"Expected a queue of one string component, got {len(item)}"
            )
        item = item[0]
    item = item[()] if isinstance(item, np.ndarray) else item
    if isinstance(item, str):
        item = item.encode()
    if not isinstance(item, bytes):
        raise errors.InvalidArgumentError(
            None, None, f"Expected to dequeue a one-element string tensor, got {item!r}"
        )
    return item


# -- the reader state machine -----------------------------------------------------------------


class _Reader:
    """A reader resource: current work, counters, put-back records.  Subclasses read."""

    def __init__(self, name: str):
        self.name = name
        self.work: bytes | None = None
        self.produced = 0
        self.completed = 0
        self.started = 0
        self.last_work = b""  # TF's current_work: kept once the work is finished
        self._serial = 0
        self._pending: list[tuple[int, bytes, bytes]] = []  # put back; sorted by serial
        self._lock: asyncio.Lock | None = None
        self._drained = False  # the work's records are all read; its end not seen yet

    # Whether a file's end is seen only by a read after its last record (TF's text,
    # record and fixed-length readers), not with that record (whole-file, identity).
    _end_seen_late = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} work={self.work!r}>"

    # subclass hooks --------------------------------------------------------------------
    async def _start(self, work: bytes) -> None:
        """Open `work` (a filename)."""

    async def _read_some(self, n: int) -> tuple:
        """Up to n (keys, values) from the current work, and whether it is finished.
        The keys may be a list or a `_LazyKeys`, formatted only if they are used."""
        raise NotImplementedError

    def _finish(self) -> None:
        """Release the current work's resources."""

    # the protocol ---------------------------------------------------------------------
    async def read_up_to(
        self, queue_handle, n: int, exact: bool, with_keys: bool = True, op=None
    ) -> tuple[list | None, list]:
        """Up to n records; with `exact`, n or OutOfRangeError (ReaderRead).  Without
        `with_keys` the keys are not formatted (None comes back instead); records put
        back keep what makes their keys."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            got = _Batch()
            try:
                await self._gather(queue_handle, n, exact, got)
            except (errors.OutOfRangeError, errors.DataLossError):
                # The records before the end (or the damage) are delivered; the error
                # comes again on the next read.
                if not got.values or exact:
                    self._unread(got)
                    raise
            except BaseException:
                self._unread(got)  # never delivered: put them back
                raise
        self.produced += len(got.values)
        step = current_step()
        if step is not None and got.values:
            step.on_failure(lambda e: None if queues.poisoned_by(e, op) else self._put_back(got))
        return (got.keys() if with_keys else None), got.values

    async def _gather(self, queue_handle, n, exact, got: _Batch) -> None:
        pending, values = self._pending, got.values
        if pending:
            first = pending[:n]
            del pending[:n]
            got.serials.append([s for s, _, _ in first])
            got.key_parts.append([k for _, k, _ in first])
            values.extend([v for _, _, v in first])
            if not exact:
                return  # records put back by a failed step come back on their own
        while len(values) < n:
            if self._drained:  # the read after a file's last record finds its end (TF)
                self._drained = False
                self._finish()
                self.work = None
                self.completed += 1
            if self.work is None:
                work = await _dequeue_work(queue_handle)
                self.work = work
                self.started += 1
                self.last_work = work
                try:
                    await self._start(work)
                except BaseException:
                    self._finish()
                    self.work = None
                    raise
            want = n - len(values)
            got_k, got_v, at_end = await self._read_some(want)
            if at_end and self._end_seen_late and len(got_v) == want:
                # TF's source readers learn a file ended only when a read finds nothing
                # more: a batch filled by the last records leaves the file open.
                self._drained, at_end = True, False
            if got_v:
                got.serials.append(range(self._serial, self._serial + len(got_v)))
                got.key_parts.append(got_k)
                values.extend(got_v)
                self._serial += len(got_v)
            if at_end:
                self._finish()
                self.work = None
                self.completed += 1
                if values and not exact:
                    return  # TF: a read returns what the current file had (item 12)

    def _unread(self, got: _Batch) -> None:
        serials = [s for part in got.serials for s in part]
        for item in zip(serials, got.keys(), got.values):
            bisect.insort(self._pending, item)

    def _put_back(self, got: _Batch) -> None:
        self._unread(got)
        self.produced -= len(got.values)

    def reset(self) -> None:
        self._finish()
        self.work = None
        self._drained = False
        self.produced = 0
        self.completed = 0
        self.started = 0
        self.last_work = b""
        self._pending.clear()

    # state serialization (TF's ReaderBase: unimplemented but for the readers that say so)
    def serialize_state(self) -> bytes:
        raise errors.UnimplementedError(None, None, "Reader SerializeState not implemented")

    def restore_state(self, state: bytes) -> None:
        raise errors.UnimplementedError(None, None, "Reader RestoreState not implemented")

    def _base_state(self) -> bytes:
        """TF's ReaderBaseState proto: work_started (1), work_finished (2),
        num_records_produced (3), current_work (4); defaults left out (proto3)."""
        out = bytearray()
        for tag, value in ((1, self.started), (2, self.completed), (3, self.produced)):
            if value:
                out += _varint(tag << 3) + _varint(value)
        if self.last_work:
            out += _varint(4 << 3 | 2) + _varint(len(self.last_work)) + self.last_work
        return bytes(out)

    def _restore_base(self, state: bytes, kind: str) -> None:
        try:
            fields = _parse_state(state)
        except ValueError:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Could not parse state for {kind} '{self.name}': "
                + state[:200].decode("latin-1"),
            ) from None
        started, finished, produced = (fields.get(k, 0) for k in (1, 2, 3))
        if started < 0 or finished < 0 or produced < 0:
            raise errors.InvalidArgumentError(
                None, None, f"Unexpected negative value when restoring in {kind} '{self.name}'"
            )
        self.reset()
        self.started, self.completed, self.produced = started, finished, produced
        self.last_work = fields.get(4, b"")


class _LazyKeys:
    """TF's record keys, b"<file>:<offset>", not formatted until they are used."""

    __slots__ = ("work", "offsets")

    def __init__(self, work: bytes, offsets: list):
        self.work, self.offsets = work, offsets

    def format(self) -> list:
        # One C-level pass over the offsets.
        return list(map((self.work.replace(b"%", b"%%") + b":%d").__mod__, self.offsets))


class _Batch:
    """The records one read gathered, in parts as they came (see `_Reader._gather`)."""

    __slots__ = ("serials", "key_parts", "values")

    def __init__(self):
        self.serials: list = []  # a range or list per part
        self.key_parts: list = []  # a list or _LazyKeys per part
        self.values: list = []

    def keys(self) -> list:
        parts = [p.format() if isinstance(p, _LazyKeys) else p for p in self.key_parts]
        return parts[0] if len(parts) == 1 else [k for p in parts for k in p]


def _parse_state(data: bytes) -> dict:
    """The fields of a ReaderBaseState; ValueError for anything else."""
    fields, i = {}, 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            if i >= len(data) or shift > 63:
                raise ValueError("truncated varint")
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value - (1 << 64) if value >= 1 << 63 else value

    while i < len(data):
        key = varint()
        tag, wire = key >> 3, key & 7
        if tag in (1, 2, 3) and wire == 0:
            fields[tag] = varint()
        elif tag == 4 and wire == 2:
            n = varint()
            if n < 0 or i + n > len(data):
                raise ValueError("truncated bytes")
            fields[4] = bytes(data[i : i + n])
            i += n
        else:
            raise ValueError(f"unexpected field {tag} (wire type {wire})")
    return fields


class _IdentityReader(_Reader):
    async def _read_some(self, n):
        return [self.work], [self.work], True

    def serialize_state(self) -> bytes:
        return self._base_state()

    def restore_state(self, state: bytes) -> None:
        self._restore_base(state, "IdentityReader")


class _WholeFileReader(_Reader):
    async def _read_some(self, n):
        path = _as_path(self.work)

        def read_all():
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as e:
                raise python_io.os_error(path, e) from None

        return [self.work], [await _in_thread(read_all)], True


class _SourceReader(_Reader):
    _end_seen_late = True
    """A reader over a python_io source, with one chunk read kept in flight."""

    compression = ""

    def __init__(self, name: str):
        super().__init__(name)
        self._source = None
        self._fetch: asyncio.Future | None = None
        self._eof = False

    async def _start(self, work):
        self._source = await _in_thread(python_io.open_source, _as_path(work), self.compression)
        self._eof = False
        self._begin()

    def _begin(self) -> None:
        """Per-file state once the source is open."""

    def _prefetch(self, n: int) -> None:
        if self._fetch is None and not self._eof and self._source is not None:
            loop = asyncio.get_running_loop()
            self._fetch = loop.run_in_executor(None, self._source.read, n)

    async def _next_chunk(self, n: int) -> bytes:
        """The next chunk of the file (b"" at its end); starts reading the one after."""
        self._prefetch(n)
        fut = self._fetch
        try:
            data = await asyncio.shield(fut)
        except asyncio.CancelledError:
            raise  # the read stays in flight; the next read consumes it
        self._fetch = None
        if not data:
            self._eof = True
        else:
            self._prefetch(python_io.CHUNK_BYTES)
        return data

    def _finish(self):
        fetch, source = self._fetch, self._source
        self._fetch = None
        self._source = None
        if source is not None:
            if fetch is not None and not fetch.done():
                fetch.add_done_callback(lambda _f: source.close())  # close after the read
            else:
                source.close()

    def reset(self):
        super().reset()
        self._eof = False


_HANDOFF_S = 0.0005  # the longest the loop waits for a worker thread to take a read
_RING_BYTES = 8 << 20  # each of the two read buffers of a TFRecord reader
_CRC_GIL_FREE = crc32c_gil_free()  # None (pure-Python CRC): records are checked one by one


class _TFRecordReader(_SourceReader):
    """TFRecord files.  Uncompressed ones are read into two reusable buffers in turn:
    a worker thread fills one (preadv, GIL released) while the loop's thread cuts
    records out of the other, so no chunk is allocated (and page-faulted) per read.

    The GIL decides whether the read really overlaps the scan: a thread that wants it
    gets it only when its holder blocks or after the 5 ms switch interval.  So the loop
    hands it over explicitly, twice per chunk: when the next chunk is needed, until a
    finished read has reported (it usually has finished, and waits only for the GIL;
    at most _HANDOFF_S); then, having started the next read, until the worker has
    entered it.  A read still going on (a cold page cache) is awaited without blocking
    the loop.

    The second hand-over is spent on the chunk's CRC-32C, taken in one call with the GIL
    released: the worker takes the GIL meanwhile, and the scanner can accept whole runs
    of records without a CRC per record (python_io.RecordScanner's class note).  The
    worker could take that CRC itself, but it would need the GIL a third time per chunk,
    between its read and the CRC, and on a 2-core VM (a woken thread runs 0.1-0.2 ms
    after the signal) that hand-over cost as much as the CRC does here (0.35-0.6 ms for
    8 MiB, against about 1 ms for the same records checked one by one).  Files without
    runs of equal-length records soon stop asking for it (`RecordScanner.wants_crc`)."""

    def __init__(self, name: str, compression: str):
        super().__init__(name)
        self.compression = compression
        self._scanner = None
        self._ring: list | None = None  # the two buffers of the current (plain) file
        self._filling = None  # the buffer the in-flight fetch writes into
        self._fetch_box = None  # (done event, [bytes read, exception]) of that fetch

    def _begin(self):
        self._scanner = python_io.RecordScanner(self._source.path)
        if not self._source.compressed:
            size = max(mmap.PAGESIZE, min(_RING_BYTES, self._source.size))
            # Anonymous maps: slicing one gives `bytes`, and they are writable for preadv.
            self._ring = [mmap.mmap(-1, size), mmap.mmap(-1, size)]
            self._fill(self._ring[0])

    def _fill(self, buf, crc_of=None, n: int = 0) -> int | None:
        """Start reading the next chunk of the file into `buf` on a worker thread; with
        `crc_of`, return the CRC-32C of `crc_of[:n]` (taken while the worker starts)."""
        self._scanner.release(buf)  # the scanner must not see it change
        self._filling = buf
        source = self._source
        entered, done = threading.Event(), threading.Event()
        box: list = [0, None]  # bytes read, exception

        def read():
            entered.set()
            try:
                box[0] = source.readinto(buf)  # preadv releases the GIL
            except BaseException as e:
                box[1] = e
            finally:
                done.set()

        self._fetch = asyncio.get_running_loop().run_in_executor(None, read)
        self._fetch_box = (done, box)
        # Hand the GIL over until the worker is inside its read.  Without this the worker
        # cannot start while this thread scans (the GIL is given up only every 5 ms), and
        # the read would not overlap the scan.  Bounded: a busy pool just loses the overlap.
        crc = None
        if crc_of is not None and _CRC_GIL_FREE is not None and self._scanner.wants_crc():
            crc = _CRC_GIL_FREE(crc_of if n == len(crc_of) else memoryview(crc_of)[:n])
        entered.wait(_HANDOFF_S)
        return crc

    async def _next_buffer(self):
        """The buffer the in-flight fetch filled and how many bytes it holds (0: end)."""
        if self._fetch is None:
            self._fill(self._ring[0] if self._filling is self._ring[1] else self._ring[1])
        done, box = self._fetch_box
        if not done.is_set():
            # The read has usually finished and its thread waits for the GIL to say so:
            # give the GIL up for a moment instead of waiting for the loop to hear of it.
            done.wait(_HANDOFF_S)
        if not done.is_set():
            await asyncio.shield(self._fetch)  # cancelled: the read stays in flight
        self._fetch = None
        if box[1] is not None:
            raise box[1]
        return self._filling, box[0]

    async def _read_some(self, n):
        scanner = self._scanner
        values: list = []
        offsets: list = []
        while True:
            try:
                scanner.take(n, values, offsets)
            except errors.DataLossError:
                if not values:
                    raise
                # Deliver the good records first; the damage is reported by the next read.
            if values:
                return _LazyKeys(self.work, offsets), values, False
            if self._ring is None:
                data = await self._next_chunk(scanner.need())
                if not data:
                    scanner.check_end()  # a record cut short is DataLossError (item 14)
                    return [], [], True
                scanner.feed(data)
                continue
            buf, got = await self._next_buffer()
            if not got:
                self._eof = True
                scanner.check_end()
                return [], [], True
            crc = self._fill(self._ring[1] if buf is self._ring[0] else self._ring[0], buf, got)
            scanner.feed(buf, got, crc)

    def _finish(self):
        super()._finish()
        self._scanner = None
        self._ring = None  # an in-flight fetch keeps its buffer alive until it is done
        self._filling = None


class _TextLineReader(_SourceReader):
    def __init__(self, name: str, skip_header_lines: int):
        super().__init__(name)
        self.skip = skip_header_lines
        self._begin()

    def _begin(self):
        self._lines: list[bytes] = []  # complete lines of the chunks read so far
        self._next = 0  # index in _lines of the next line to hand out
        self._rest = b""  # a partial last line
        self._line_no = 0

    async def _read_some(self, n):
        while len(self._lines) - self._next < n + self.skip and not self._eof:
            data = await self._next_chunk(python_io.CHUNK_BYTES)
            del self._lines[: self._next]
            self._next = 0
            if not data:
                if self._rest:
                    self._lines.append(self._rest)
                    self._rest = b""
                break
            parts = (self._rest + data).split(b"\n")
            self._rest = parts.pop()
            self._lines.extend(parts)
        keys, values = [], []
        prefix = self.work + b":"
        lines = self._lines
        while self._next < len(lines) and len(values) < n:
            line = lines[self._next]
            self._next += 1
            self._line_no += 1
            if self._line_no <= self.skip:
                continue
            keys.append(prefix + str(self._line_no).encode())
            values.append(line[:-1] if line.endswith(b"\r") else line)
        done = self._eof and self._next >= len(lines) and not self._rest
        return keys, values, done


class _FixedLengthReader(_SourceReader):
    def __init__(self, name, header, record, footer, hop):
        super().__init__(name)
        self.header, self.record, self.footer = header, record, footer
        self.hop = hop or record
        self._index = 0
        self._count = 0

    def _begin(self):
        size = self._source.size - self.header - self.footer
        self._count = 0 if size < self.record else (size - self.record) // self.hop + 1
        self._index = 0

    async def _read_some(self, n):
        m = min(n, self._count - self._index, max(1, python_io.CHUNK_BYTES // self.hop))
        if m <= 0:
            return [], [], True
        start = self.header + self._index * self.hop
        span = (m - 1) * self.hop + self.record
        data = await _in_thread(os.pread, self._source.fd, span, start)
        if len(data) < span:  # the file shrank under us
            m = (
                max(0, (len(data) - self.record) // self.hop + 1)
                if len(data) >= self.record
                else 0
            )
        keys, values = [], []
        prefix = self.work + b":"
        for j in range(m):
            o = j * self.hop
            keys.append(prefix + str(self._index + j).encode())
            values.append(data[o : o + self.record])
        self._index += m
        return keys, values, self._index >= self._count or m == 0


def _decompress_file(path: str, encoding: str) -> bytes:
    import gzip
    import zlib

    with open(path, "rb") as f:
        raw = f.read()
    try:
        if encoding == "GZIP":
            return gzip.decompress(raw)
        return zlib.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise errors.DataLossError(None, None, f"{path}: corrupt {encoding} data: {e}") from None


class _FixedLengthCompressedReader(_FixedLengthReader):
    """FixedLengthRecordReader over a ZLIB or GZIP file (TF's `encoding`): header,
    records and footer are cut from the decompressed bytes, decompressed off the loop
    when the file is opened."""

    def __init__(self, name, header, record, footer, hop, encoding):
        super().__init__(name, header, record, footer, hop)
        self.encoding = encoding
        self._data = b""

    async def _start(self, work):
        self._data = await _in_thread(_decompress_file, _as_path(work), self.encoding)
        size = len(self._data) - self.header - self.footer
        self._count = 0 if size < self.record else (size - self.record) // self.hop + 1
        self._index = 0
        self._eof = False

    async def _read_some(self, n):
        m = min(n, self._count - self._index)
        if m <= 0:
            return [], [], True
        prefix = self.work + b":"
        keys, values = [], []
        for j in range(self._index, self._index + m):
            o = self.header + j * self.hop
            keys.append(prefix + str(j).encode())
            values.append(self._data[o : o + self.record])
        self._index += m
        return keys, values, self._index >= self._count

    def _finish(self):
        self._data = b""


# -- reader creation ops -----------------------------------------------------------------------


def _scalar_shape(op):
    return [tensor_shape.TensorShape([])]


def _register_reader(op_type: str, attrs: dict, make):
    op_def = register_op(
        op_type,
        outputs=["reader_handle: string"],
        attrs={**attrs, "container": "", "shared_name": ""},
        shape_fn=_scalar_shape,
        stateful=True,
    )
    NotDifferentiable(op_type)
    PASS_RESOURCE_OPS.add(op_type)

    @op_def.kernel("CPU")
    async def _create(ctx):
        a = ctx.attrs
        name = a["shared_name"] or ctx.op.name
        reader = kernel_resource(ctx, a["container"], name, lambda: make(name, a))
        return _handle_value(reader)

    return op_def


def _make_fixed(name, a):
    for k in ("header_bytes", "record_bytes", "footer_bytes", "hop_bytes"):
        if a[k] < 0 or (k == "record_bytes" and a[k] <= 0):
            raise errors.InvalidArgumentError(None, None, f"{k} must be >= 0 not {a[k]}")
    if a["encoding"] in ("ZLIB", "GZIP"):
        return _FixedLengthCompressedReader(
            name,
            a["header_bytes"],
            a["record_bytes"],
            a["footer_bytes"],
            a["hop_bytes"],
            a["encoding"],
        )
    if a["encoding"]:
        raise errors.UnimplementedError(
            None, None, f"FixedLengthRecordReader encoding {a['encoding']!r} is not supported"
        )
    return _FixedLengthReader(
        name, a["header_bytes"], a["record_bytes"], a["footer_bytes"], a["hop_bytes"]
    )


def _make_tfrecord(name, a):
    comp = a["compression_type"]
    if comp not in ("", "ZLIB", "GZIP"):
        raise errors.InvalidArgumentError(None, None, f"Unsupported compression_type {comp!r}")
    return _TFRecordReader(name, comp)


def _make_text(name, a):
    if a["skip_header_lines"] < 0:
        raise errors.InvalidArgumentError(
            None, None, f"skip_header_lines must be >= 0 not {a['skip_header_lines']}"
        )
    return _TextLineReader(name, a["skip_header_lines"])


_register_reader("TextLineReaderV2", {"skip_header_lines": 0}, _make_text)
_register_reader(
    "FixedLengthRecordReaderV2",
    {
        "header_bytes": 0,
        "record_bytes": REQUIRED,
        "footer_bytes": 0,
        "hop_bytes": 0,
        "encoding": "",
    },
    _make_fixed,
)
_register_reader("TFRecordReaderV2", {"compression_type": ""}, _make_tfrecord)
_register_reader("WholeFileReaderV2", {}, lambda name, a: _WholeFileReader(name))
_register_reader("IdentityReaderV2", {}, lambda name, a: _IdentityReader(name))


# -- reader use ops -----------------------------------------------------------------------------


def _reader_op(op_type, inputs, outputs, shape_fn, is_async=True):
    op_def = register_op(
        op_type,
        inputs=inputs,
        outputs=outputs,
        shape_fn=shape_fn,
        stateful=True,
        is_async=is_async,
    )
    NotDifferentiable(op_type)
    return op_def


ReaderReadV2 = _reader_op(
    "ReaderReadV2",
    ["reader_handle: string", "queue_handle: string"],
    ["key: string", "value: string"],
    lambda op: [tensor_shape.TensorShape([])] * 2,
)
ReaderReadUpToV2 = _reader_op(
    "ReaderReadUpToV2",
    ["reader_handle: string", "queue_handle: string", "num_records: int64"],
    ["keys: string", "values: string"],
    lambda op: [tensor_shape.TensorShape([None])] * 2,
)
ReaderNumRecordsProducedV2 = _reader_op(
    "ReaderNumRecordsProducedV2", ["reader_handle: string"], ["records_produced: int64"],
    _scalar_shape, is_async=False,
)  # fmt: skip
ReaderNumWorkUnitsCompletedV2 = _reader_op(
    "ReaderNumWorkUnitsCompletedV2", ["reader_handle: string"], ["units_completed: int64"],
    _scalar_shape, is_async=False,
)  # fmt: skip
ReaderResetV2 = _reader_op("ReaderResetV2", ["reader_handle: string"], [], lambda op: [], False)
ReaderSerializeStateV2 = _reader_op(
    "ReaderSerializeStateV2", ["reader_handle: string"], ["state: string"], _scalar_shape,
    is_async=False,
)  # fmt: skip


def _restore_state_shape(op):
    """TF's ReaderRestoreState shape function: the state is a scalar string."""
    rank = op.inputs[1].shape.ndims
    if rank is not None and rank != 0:
        raise ValueError(f"Shape must be rank 0 but is rank {rank} for '{op.name}'")
    return []


ReaderRestoreStateV2 = _reader_op(
    "ReaderRestoreStateV2", ["reader_handle: string", "state: string"], [],
    _restore_state_shape, is_async=False,
)  # fmt: skip


def _strings(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


@ReaderReadV2.kernel("CPU")
async def _reader_read(ctx, reader, queue):
    reader = _handle_object(reader, _Reader, "reader")
    keys, values = await reader.read_up_to(queue, 1, exact=True, op=ctx.op)
    return _strings(keys).reshape(()), _strings(values).reshape(())


@ReaderReadUpToV2.kernel("CPU")
async def _reader_read_up_to(ctx, reader, queue, num_records, with_keys=True):
    reader = _handle_object(reader, _Reader, "reader")
    n = int(num_records)
    if n <= 0:
        raise errors.InvalidArgumentError(None, None, f"num_records must be positive, got {n}")
    keys, values = await reader.read_up_to(queue, n, exact=False, with_keys=with_keys, op=ctx.op)
    return (_strings(keys) if with_keys else _NO_KEYS), _strings(values)


_NO_KEYS = _strings([])  # the keys output when nothing takes it


async def _reader_read_up_to_values(ctx, reader, queue, num_records):
    return await _reader_read_up_to(ctx, reader, queue, num_records, with_keys=False)


def skip_unused_keys(plan) -> None:
    """ReaderReadUpToV2 whose keys nothing takes (`_, values = reader.read_up_to(...)`
    fetching only the values): its records' keys are not formatted (~0.15 us a record)."""
    for i, p in enumerate(plan.pnodes):
        if p.op.type != "ReaderReadUpToV2" or plan.derefs[i]:
            continue
        if p.device.device_type != "CPU" or any(e[0] == 0 for e in plan.edges[i]):
            continue
        if plan.claim(i):
            plan.kernels[i] = plan.checked(_reader_read_up_to_values, p.op)


@ReaderNumRecordsProducedV2.kernel("CPU")
async def _reader_num_records(ctx, reader):
    return np.int64(_handle_object(reader, _Reader, "reader").produced)


@ReaderNumWorkUnitsCompletedV2.kernel("CPU")
async def _reader_num_work_units(ctx, reader):
    return np.int64(_handle_object(reader, _Reader, "reader").completed)


@ReaderResetV2.kernel("CPU")
async def _reader_reset(ctx, reader):
    _handle_object(reader, _Reader, "reader").reset()


@ReaderSerializeStateV2.kernel("CPU")
async def _reader_serialize_state(ctx, reader):
    out = np.empty((), dtype=object)
    out[()] = _handle_object(reader, _Reader, "reader").serialize_state()
    return out


@ReaderRestoreStateV2.kernel("CPU")
async def _reader_restore_state(ctx, reader, state):
    state = np.asarray(state, dtype=object)
    if state.shape != ():
        raise errors.InvalidArgumentError(
            None, None, f"Reader state must be scalar, got shape {list(state.shape)}"
        )
    value = state[()]
    _handle_object(reader, _Reader, "reader").restore_state(
        value.encode() if isinstance(value, str) else bytes(value)
    )


# -- Python reader classes ------------------------------------------------------------------------


def _queue_ref(queue):
    if isinstance(queue, ops.Tensor):
        return queue
    ref = getattr(queue, "queue_ref", None)
    if ref is None:
        raise TypeError(f"Expected a queue or a queue handle Tensor, got {queue!r}")
    return ref


class ReaderBase:
    """Base class for different Reader types, that produce a record every step.

    A reader takes filenames from a queue (one work unit at a time) and yields
    (key, value) string records; it keeps its position across `Session.run` calls.
    """

    def __init__(self, reader_ref, supports_serialize=False):
        self._reader_ref = reader_ref
        self._supports_serialize = supports_serialize

    @property
    def reader_ref(self) -> ops.Tensor:
        return self._reader_ref

    @property
    def supports_serialize(self) -> bool:
        return self._supports_serialize

    def read(self, queue, name=None):
        """Returns the next record (key, value) pair produced by a reader.

        Raises (when run):
          OutOfRangeError: the queue is closed and every file has been read.
          DataLossError: a corrupt record (TFRecordReader).
          NotFoundError: a filename from the queue does not exist.
        """
        op = ops.apply_op("ReaderReadV2", [self._reader_ref, _queue_ref(queue)], name=name)
        return op.outputs[0], op.outputs[1]

    def read_up_to(self, queue, num_records, name=None):
        """Returns up to num_records (key, value) pairs produced by a reader.

        Fewer records come back only when the queue is closed and runs out of files.

        Raises (when run):
          OutOfRangeError: no record is left at all.
        """
        num = ops.convert_to_tensor(num_records, dtype=dtypes.int64)
        op = ops.apply_op(
            "ReaderReadUpToV2", [self._reader_ref, _queue_ref(queue), num], name=name
        )
        return op.outputs[0], op.outputs[1]

    def num_records_produced(self, name=None):
        return ops.apply_op("ReaderNumRecordsProducedV2", [self._reader_ref], name=name).outputs[0]

    def num_work_units_completed(self, name=None):
        return ops.apply_op(
            "ReaderNumWorkUnitsCompletedV2", [self._reader_ref], name=name
        ).outputs[0]

    def reset(self, name=None):
        """Restore a reader to its initial clean state."""
        return ops.apply_op("ReaderResetV2", [self._reader_ref], name=name)

    def serialize_state(self, name=None):
        """The reader's state as a string (IdentityReader only, as TF).

        Raises (when run): UnimplementedError for a reader that cannot serialize.
        """
        return ops.apply_op("ReaderSerializeStateV2", [self._reader_ref], name=name).outputs[0]

    def restore_state(self, state, name=None):
        """Restore a state from serialize_state (IdentityReader only, as TF).

        Raises (when run): InvalidArgumentError for a state that does not parse.
        """
        state = ops.convert_to_tensor(state, dtype=dtypes.string)
        return ops.apply_op("ReaderRestoreStateV2", [self._reader_ref, state], name=name)


def _reader(op_type, attrs, name):
    return ops.apply_op(op_type, [], attrs, name=name or op_type).outputs[0]


class TextLineReader(ReaderBase):
    """A Reader that outputs the lines of a file delimited by newlines ('\\r' stripped)."""

    def __init__(self, skip_header_lines=None, name=None):
        super().__init__(
            _reader("TextLineReaderV2", {"skip_header_lines": skip_header_lines or 0}, name)
        )


class FixedLengthRecordReader(ReaderBase):
    """A Reader that outputs fixed-length records from a file."""

    def __init__(
        self,
        record_bytes,
        header_bytes=None,
        footer_bytes=None,
        hop_bytes=None,
        name=None,
        encoding=None,
    ):
        attrs = {
            "record_bytes": int(record_bytes),
            "header_bytes": int(header_bytes or 0),
            "footer_bytes": int(footer_bytes or 0),
            "hop_bytes": int(hop_bytes or 0),
            "encoding": encoding or "",
        }
        super().__init__(_reader("FixedLengthRecordReaderV2", attrs, name))


class TFRecordReader(ReaderBase):
    """A Reader that outputs the records from a TFRecords file."""

    def __init__(self, name=None, options=None):
        comp = python_io.TFRecordOptions.get_compression_type_string(options)
        super().__init__(_reader("TFRecordReaderV2", {"compression_type": comp}, name))


class WholeFileReader(ReaderBase):
    """A Reader that outputs the entire contents of a file as a value (key: filename)."""

    def __init__(self, name=None):
        super().__init__(_reader("WholeFileReaderV2", {}, name))


class IdentityReader(ReaderBase):
    """A Reader that outputs the queued work as both the key and value."""

    def __init__(self, name=None):
        super().__init__(_reader("IdentityReaderV2", {}, name), supports_serialize=True)


# -- MatchingFiles, ReadFile ---------------------------------------------------------------

MatchingFiles = register_op(
    "MatchingFiles",
    inputs=["pattern: string"],
    outputs=["filenames: string"],
    shape_fn=lambda op: [tensor_shape.TensorShape([None])],
    is_async=True,
)
NotDifferentiable("MatchingFiles")


@MatchingFiles.kernel("CPU")
async def _matching_files(ctx, pattern):
    patterns = [os.fsdecode(p) for p in np.asarray(pattern, dtype=object).ravel()]

    def match():
        out = []
        for p in patterns:
            out.extend(sorted(glob.glob(p)))
        return out

    return _strings([os.fsencode(f) for f in await _in_thread(match)])


def matching_files(pattern, name=None):
    """The set of files matching one or more glob patterns (sorted per pattern)."""
    return ops.apply_op("MatchingFiles", [pattern], name=name).outputs[0]


ReadFile = register_op(
    "ReadFile",
    inputs=["filename: string"],
    outputs=["contents: string"],
    shape_fn=_scalar_shape,
    is_async=True,
)
NotDifferentiable("ReadFile")


@ReadFile.kernel("CPU")
async def _read_file(ctx, filename):
    path = _as_path(np.asarray(filename, dtype=object)[()])

    def read_all():
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as e:
            raise python_io.os_error(path, e) from None

    return _strings([await _in_thread(read_all)]).reshape(())


def read_file(filename, name=None):
    """Reads and outputs the entire contents of the input filename.

    Raises (when run):
      NotFoundError: the file does not exist.
    """
    return ops.apply_op("ReadFile", [filename], name=name).outputs[0]
