"""TFRecord files (`af.python_io`, TF1's `tf.python_io` / `tf.io`).

A TFRecord file is a sequence of records, each framed as

    uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)

(little-endian), optionally wrapped whole in a ZLIB or GZIP stream.  `TFRecordWriter`
writes exactly the bytes TensorFlow writes; `tf_record_iterator` reads them back.

The pieces are shared with the TFRecordReader op (ops/reader_ops.py):
- a *source* (`open_source`) hands out the file's (decompressed) bytes in chunks with
  a blocking `read(n)` (or, uncompressed, `readinto(buf)` into a buffer the caller
  reuses); the sync iterator calls it directly, the reader op runs it on a worker
  thread, so the event loop never waits on the disk;
- a `RecordScanner` cuts framed records out of the bytes it is fed, with no I/O.

Invariants:
- No read asks for more bytes than the file still holds, so a corrupt length field can
  never make us allocate more than the file's size (compressed streams are inflated in
  bounded steps).
- A CRC mismatch raises `DataLossError` naming the file and the record's offset in
  the (decompressed) stream.  A record cut short by the end of the file ends the file
  without error, as in TensorFlow (a file still being written is read up to its last
  complete record).
"""

from __future__ import annotations

import errno
import os
import struct
import zlib
from collections.abc import Iterator

import numpy as np

from asyncflow import errors
from asyncflow.crc32c import (
    SHIFT_PERIOD,
    combine,
    combine_equal,
    crc32c_function,
    masked_crc32c,
    shift,
)

__all__ = [
    "TFRecordWriter",
    "TFRecordOptions",
    "TFRecordCompressionType",
    "tf_record_iterator",
    "RecordScanner",
    "open_source",
    "os_error",
    "CHUNK_BYTES",
]

CHUNK_BYTES = 4 << 20  # one read from the file; large enough to amortise the thread hop
_HEADER = struct.Struct("<QI")
_Q = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8
_M32 = 0xFFFFFFFF
_crc_fn = crc32c_function()  # the backend's own callable: no wrapper on the hot path


# -- options -----------------------------------------------------------------------------


class TFRecordCompressionType:
    """The type of compression for the record (TF's enum values)."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


class TFRecordOptions:
    """Options used for manipulating TFRecord files (TF1's `tf.python_io.TFRecordOptions`).

    Only `compression_type` changes the format; the zlib parameters default to TF's
    (level -1, window 15, memory level 9, default strategy) so that compressed files
    come out byte-identical to TensorFlow's.
    """

    compression_type_map = {
        TFRecordCompressionType.ZLIB: "ZLIB",
        TFRecordCompressionType.GZIP: "GZIP",
        TFRecordCompressionType.NONE: "",
    }

    def __init__(
        self,
        compression_type=None,
        flush_mode=None,
        input_buffer_size=None,
        output_buffer_size=None,
        window_bits=None,
        compression_level=None,
        compression_method=None,
        mem_level=None,
        compression_strategy=None,
    ):
        # Validate now: TF raises ValueError for an unknown type at construction.
        self.get_compression_type_string(compression_type)
        self.compression_type = compression_type
        self.flush_mode = flush_mode
        self.input_buffer_size = input_buffer_size
        self.output_buffer_size = output_buffer_size
        self.window_bits = window_bits
        self.compression_level = compression_level
        self.compression_method = compression_method
        self.mem_level = mem_level
        self.compression_strategy = compression_strategy

    @classmethod
    def get_compression_type_string(cls, options) -> str:
        """ "", "ZLIB" or "GZIP" for an options object, an enum value or a string.

        Raises:
          ValueError: not a valid compression type.
        """
        if not options:
            return ""
        if isinstance(options, TFRecordOptions):
            return cls.get_compression_type_string(options.compression_type)
        if isinstance(options, int) and options in cls.compression_type_map:
            return cls.compression_type_map[options]
        if isinstance(options, str) and options in cls.compression_type_map.values():
            return options
        raise ValueError(f'Not a valid compression_type: "{options}"')

    def _zlib_params(self, compression: str) -> tuple[int, int, int, int]:
        bits = self.window_bits if self.window_bits is not None else zlib.MAX_WBITS
        level = self.compression_level
        return (
            zlib.Z_DEFAULT_COMPRESSION if level is None else level,
            bits + 16 if compression == "GZIP" else bits,
            9 if self.mem_level is None else self.mem_level,
            zlib.Z_DEFAULT_STRATEGY
            if self.compression_strategy is None
            else self.compression_strategy,
        )


def _as_options(options) -> tuple[str, TFRecordOptions]:
    compression = TFRecordOptions.get_compression_type_string(options)
    if isinstance(options, TFRecordOptions):
        return compression, options
    return compression, TFRecordOptions(compression)


def os_error(path, exc: OSError) -> errors.OpError:
    """The TF error class for a failed file operation on `path`."""
    msg = f"{os.fsdecode(path)}; {exc.strerror or exc}"
    if exc.errno == errno.ENOENT:
        return errors.NotFoundError(None, None, msg)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return errors.PermissionDeniedError(None, None, msg)
    if exc.errno == errno.EISDIR:
        return errors.FailedPreconditionError(None, None, msg)
    return errors.UnknownError(None, None, msg)


# -- writing -----------------------------------------------------------------------------


def _frame(record: bytes) -> bytes:
    header = struct.pack("<Q", len(record))
    return b"".join(
        (
            header,
            _U32.pack(masked_crc32c(header)),
            record,
            _U32.pack(masked_crc32c(record)),
        )
    )


class TFRecordWriter:
    """A class to write records to a TFRecords file (TF1's `tf.python_io.TFRecordWriter`).

    Raises:
      NotFoundError / PermissionDeniedError: the file cannot be created.
      ValueError: `options` names an unknown compression type.
    """

    def __init__(self, path, options=None):
        compression, opts = _as_options(options)
        self._path = os.fspath(path)
        try:
            self._file = open(self._path, "wb")  # noqa: SIM115 - closed by close()
        except OSError as e:
            raise os_error(self._path, e) from None
        self._zlib = None
        if compression:
            level, wbits, mem_level, strategy = opts._zlib_params(compression)
            self._zlib = zlib.compressobj(level, zlib.DEFLATED, wbits, mem_level, strategy)

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def write(self, record) -> None:
        """Write a string record to the file.

        Raises:
          TypeError: `record` is not bytes-like (str is encoded as UTF-8, as TF does).
          FailedPreconditionError: the writer is closed.
        """
        if self._file is None:
            raise errors.FailedPreconditionError(None, None, "Writer is closed.")
        if isinstance(record, str):
            record = record.encode("utf-8")
        elif not isinstance(record, bytes):
            try:
                record = bytes(memoryview(record))
            except TypeError:
                raise TypeError(
                    f"write(): incompatible function arguments: expected bytes, got "
                    f"{type(record).__name__}"
                ) from None
        data = _frame(record)
        if self._zlib is not None:
            data = self._zlib.compress(data)
        if data:
            self._file.write(data)

    def flush(self) -> None:
        """Flush the file (buffered compressed data stays in the compressor, as in TF)."""
        if self._file is None:
            raise errors.FailedPreconditionError(None, None, "Writer is closed.")
        self._file.flush()

    def close(self) -> None:
        """Close the file; further writes raise FailedPreconditionError."""
        if self._file is None:
            return
        try:
            if self._zlib is not None:
                self._file.write(self._zlib.flush(zlib.Z_FINISH))
            self._file.close()
        finally:
            self._file = None
            self._zlib = None


# -- reading: sources ---------------------------------------------------------------------


class _PlainSource:
    """The bytes of an uncompressed file, read with pread (no shared file position)."""

    compressed = False

    def __init__(self, path: str, fd: int, size: int):
        self.path, self.fd, self.size, self.pos = path, fd, size, 0

    def read(self, n: int) -> bytes:
        """Up to n bytes (never more than the file holds); b"" at the end."""
        n = min(max(n, CHUNK_BYTES), self.size - self.pos)
        if n <= 0:
            # The file may have grown since we looked (a writer still appending).
            self.size = os.fstat(self.fd).st_size
            n = min(CHUNK_BYTES, self.size - self.pos)
            if n <= 0:
                return b""
        data = os.pread(self.fd, n, self.pos)
        self.pos += len(data)
        return data

    def readinto(self, buf) -> int:
        """Fill `buf` (writable, reused by the caller) from the file; 0 at the end.

        One preadv, with the GIL released: a worker thread reads the next chunk while
        the event loop's thread scans the current one.
        """
        n = min(len(buf), self.size - self.pos)
        if n <= 0:
            self.size = os.fstat(self.fd).st_size  # a writer may still be appending
            n = min(len(buf), self.size - self.pos)
            if n <= 0:
                return 0
        got = os.preadv(self.fd, [memoryview(buf)[:n]], self.pos)
        self.pos += got
        return got

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):  # a reader dropped with its session must not leak the descriptor
        try:
            self.close()
        except (OSError, AttributeError, TypeError):  # at shutdown `os` may be gone
            pass


class _ZlibSource(_PlainSource):
    """The inflated bytes of a ZLIB or GZIP file, inflated in bounded steps."""

    compressed = True

    def __init__(self, path: str, fd: int, size: int, wbits: int):
        super().__init__(path, fd, size)
        self._wbits = wbits
        self._z = zlib.decompressobj(wbits)
        self._pending = b""  # compressed bytes read but not yet inflated

    def read(self, n: int) -> bytes:
        n = max(n, CHUNK_BYTES)
        out: list[bytes] = []
        got = 0
        while got < n:
            if not self._pending:
                self._pending = super().read(CHUNK_BYTES)
                if not self._pending:
                    break
            try:
                data = self._z.decompress(self._pending, n - got)
            except zlib.error as e:
                raise errors.DataLossError(
                    None, None, f"{self.path}: corrupt compressed data: {e}"
                ) from None
            self._pending = self._z.unconsumed_tail
            if self._z.eof:  # a concatenated member follows (gzip allows several)
                self._pending = self._z.unused_data + self._pending
                self._z = zlib.decompressobj(self._wbits)
            out.append(data)
            got += len(data)
        return b"".join(out)


def open_source(path, compression: str = ""):
    """Open `path` for record reading (blocking: call it from a worker thread in kernels).

    Raises:
      NotFoundError / PermissionDeniedError / FailedPreconditionError: cannot open.
    """
    path = os.fsdecode(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise os_error(path, e) from None
    try:
        size = os.fstat(fd).st_size
        if hasattr(os, "posix_fadvise"):  # records are read front to back: read ahead
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            except OSError:
                pass
        if compression:
            wbits = zlib.MAX_WBITS + (16 if compression == "GZIP" else 0)
            return _ZlibSource(path, fd, size, wbits)
        return _PlainSource(path, fd, size)
    except BaseException:
        os.close(fd)
        raise


# -- reading: the record scanner ----------------------------------------------------------

# A run of equal-length records, seen through numpy: each record's 12-byte header.
_RUN_HEADER = np.dtype([("length", "<u8"), ("crc", "<u4")])
_MIN_RUN = 8  # below this many equal-length records the per-record path is cheaper
# The most records cut in one go: their CRCs are taken right after the copy, while the
# copies are still in the core's cache (a whole 1024-record batch would not fit).
_RUN_MAX = 64
_HCACHE_MAX = 4096
_MASK_DELTA_U32 = np.uint32(_MASK_DELTA)
# The fewest equal-length records accepted as a run on a chunk's CRC: checking a run
# costs ~0.1 ms of numpy calls, about what 250 records of 4 KiB cost one by one.
_MIN_VERIFY_RUN = 512
_CRC4_ZERO = crc32c_function()(bytes(4))
_CRC_PROBE = 16
_ODD_SLACK = 64 << 10  # odd records walked past in a chunk before its runs must pay


class RecordScanner:
    """Cuts TFRecord-framed records out of the bytes fed to it.  No I/O.

    `offset` is the stream offset of the next record; `need()` says how many more bytes
    the next record needs (0 when a whole one is buffered).  Fed chunks are scanned in
    place: only a record that straddles two chunks is copied together, so the data is
    copied once, into the record values themselves.

    A chunk may be a reusable buffer (`feed(buf, n)`, an mmap or bytearray the caller
    refills later): before refilling it the caller calls `release(buf)`, which copies
    the part not yet scanned (at most the start of one record, unless a record is larger
    than a chunk) so that the scanner keeps no reference to it.

    The scan does little Python work per record: lengths are checked against a cache of
    header CRCs, a run of equal-length records is validated with one numpy comparison,
    and data CRCs are computed with one C-level `map` per batch and compared as lists.

    A chunk may come with its CRC-32C (`feed(buf, n, crc)`: one call over the chunk, with
    the GIL released, is much cheaper than a call per record).  When the scan reaches it,
    it finds the chunk's long runs of equal-length records (their headers compared in
    numpy; the odd records between them are left to the record-by-record check), and,
    CRC-32C being affine, compares the chunk's CRC with the one the chunk must have if
    every stored data CRC in those runs is right (`_verify`).  On a match the records
    of the runs are cut out with no further check; otherwise the chunk goes through the
    record-by-record check, which finds the damaged record, so errors and the records
    delivered before them are the same either way.  Guarantee: damage
    confined to one record (header, data or stored CRC) is always caught, exactly when
    the record-by-record check would catch it: headers are still compared one by one
    (in numpy), and a record's CRC error changes the chunk's CRC by an invertible linear
    map of it.  Damage to several records of one chunk could cancel out in the chunk's
    CRC, with probability 2**-32 for random damage, as for any CRC over the chunk.
    """

    __slots__ = (
        "path",
        "_buf",
        "_pos",
        "_end",
        "_base",
        "_chunks",
        "_held",
        "_hcrc",
        "_runs",
        "_rcrc",
        "_crc_skip",
    )

    def __init__(self, path: str = ""):
        self.path = path
        self._buf = b""
        self._pos = 0
        self._end = 0  # _buf[_pos:_end] is fed and not yet scanned
        self._base = 0  # stream offset of _buf[0]
        self._chunks: list[list] = []  # [data, start, end, crc of data[:end] or None]
        self._held = 0  # bytes in _chunks past their starts
        self._hcrc: dict[int, int] = {}  # length -> masked CRC of its 8 bytes
        # What _verify found ahead in _buf, the first entry starting at _pos: [length,
        # stop] for a run of records accepted on the chunk's CRC, [-1, stop] for odd
        # records to check one by one.  Invariant: empty unless _buf is a chunk that
        # passed _verify.
        self._runs: list[list[int]] = []
        self._rcrc: dict[int, np.uint32] = {}  # length -> K' of _run_crc
        self._crc_skip = 0  # chunks to feed without a CRC before trying one again

    @property
    def offset(self) -> int:
        return self._base + self._pos

    def buffered(self) -> int:
        return self._end - self._pos + self._held

    def feed(self, data, n: int | None = None, crc: int | None = None) -> None:
        """Append `data[:n]` (all of it by default) to the stream; `crc`, if given, is
        the CRC-32C of `data[:n]` (see the class note and `wants_crc`)."""
        n = len(data) if n is None else n
        if crc is None and self._crc_skip:
            self._crc_skip -= 1
        if n > 0:
            self._chunks.append([data, 0, n, crc])
            self._held += n

    def wants_crc(self) -> bool:
        """Whether the next chunk is worth its CRC: yes until a chunk fed with one had
        no run of records to accept on it (variable lengths), then once in _CRC_PROBE
        chunks, in case runs come later in the stream."""
        return not self._crc_skip

    def release(self, data) -> None:
        """Stop referring to `data`: copy its unscanned part (the caller will reuse it)."""
        if self._buf is data:
            pos = self._pos
            self._buf = bytes(data[pos : self._end])
            self._base += pos
            self._end -= pos
            self._pos = 0
            self._runs = []
        for c in self._chunks:
            if c[0] is data:
                c[0], c[1], c[2], c[3] = bytes(data[c[1] : c[2]]), 0, c[2] - c[1], None

    def clear(self) -> None:
        """Drop everything buffered (the stream restarts at offset 0)."""
        self._buf, self._pos, self._end, self._base = b"", 0, 0, 0
        self._chunks.clear()
        self._held = 0
        self._runs = []

    def _merge(self) -> None:
        """Make the next record contiguous in `_buf`, copying as little as possible."""
        buf, pos, chunks = self._buf, self._pos, self._chunks
        rest = self._end - pos
        off = self._base + pos
        self._runs = []
        if rest == 0:  # the common case: move on to the next chunk
            data, start, end, crc = chunks.pop(0)
            self._buf, self._pos, self._end, self._base = data, start, end, off - start
            self._held -= end - start
            if crc is not None:
                self._verify(crc)
            return
        if chunks:
            data, start, end, _ = chunks[0]
            head = bytes(buf[pos : pos + min(rest, 12)])
            if rest < 12:
                head += bytes(data[start : min(end, start + 12 - rest)])
            if len(head) == 12:
                missing = 16 + struct.unpack_from("<Q", head)[0] - rest
                if missing <= end - start:  # the straddling record alone is copied
                    joined = bytes(buf[pos : self._end]) + bytes(data[start : start + missing])
                    self._buf, self._pos, self._end, self._base = joined, 0, len(joined), off
                    self._held -= missing
                    if start + missing == end:
                        chunks.pop(0)
                    else:
                        chunks[0][1] = start + missing
                    return
        # A record longer than a chunk (or a header split three ways): join what we have.
        pieces = (bytes(data[start:end]) for data, start, end, _ in chunks)
        joined = b"".join([bytes(buf[pos : self._end]), *pieces])
        self._buf, self._pos, self._end, self._base = joined, 0, len(joined), off
        chunks.clear()
        self._held = 0

    def need(self) -> int:
        """Bytes still missing for the next record (0: one is ready, or its header is
        damaged, which `take` reports)."""
        have = self.buffered()
        if have < 12:
            return 12 - have
        while self._end - self._pos < 12:
            self._merge()
        length = self._next_length()
        return 0 if length < 0 else max(0, 16 + length - have)

    def check_end(self) -> None:
        """The stream ended: a record cut short after its 12-byte header is
        DataLossError, as in TF ("truncated record at 38"); fewer bytes than a header end
        the stream cleanly, as TF's reader does."""
        if self.buffered() < 12:
            return
        while self._end - self._pos < 12:
            self._merge()
        if self._next_length() < 0:
            raise self._corrupt(self.offset, header=True)
        raise errors.DataLossError(
            None, None, f"truncated record at {self.offset} in file {self.path}"
        )

    def _next_length(self) -> int:
        """The length in the (contiguous) header at _pos, or -1 if its CRC is wrong:
        TF checks a length before it reads that far, so a damaged one is an error even
        when the file ends before it."""
        length, hc = _HEADER.unpack_from(self._buf, self._pos)
        if (self._hcrc.get(length) or self._header_crc(length)) != hc:
            return -1
        return length

    def _corrupt(self, offset: int, header: bool) -> errors.DataLossError:
        hint = " (Is this even a TFRecord file?)" if header and offset == 0 else ""
        return errors.DataLossError(
            None, None, f"corrupted record at {offset}{hint} in file {self.path}"
        )

    def take(self, max_records: int, values: list, offsets: list | None = None) -> int:
        """Append up to `max_records` whole records to `values` (their offsets to
        `offsets`); returns how many.

        Raises:
          DataLossError: a length or data CRC does not match (the records before it are
            appended first; the next call raises again).
        """
        count = 0
        while True:
            count += self._take(max_records - count, values, offsets)
            if count >= max_records or not self._chunks:
                return count
            if self.need():
                return count
            length = self._next_length()  # need() made the header contiguous
            if length >= 0 and 16 + length > self._end - self._pos:
                self._merge()  # the record straddles chunks

    def _header_crc(self, length: int) -> int:
        c = _crc_fn(_Q.pack(length))
        c = (((c >> 15) | (c << 17)) + _MASK_DELTA) & _M32
        cache = self._hcrc
        if len(cache) >= _HCACHE_MAX:
            cache.clear()
        cache[length] = c
        return c

    def _verify(self, crc: int) -> None:
        """List in `_runs` the runs of equal-length records of the chunk now in _buf, if
        `crc` (of `_buf[:_end]`) shows that their data CRCs are all right.

        The expected CRC is built from the pieces of the chunk in order: each run's from
        its records' stored CRCs (`_run_crc`); the rest (the end of a record begun in
        the previous chunk, odd records between runs, the start of one that the next
        chunk ends) is CRC'd here, and its records are still checked one by one later
        (entries [-1, stop] of `_runs`).  Nothing is listed when the rest would cost
        more to CRC here than the runs save.
        """
        buf, pos, n = self._buf, self._pos, self._end
        want, odd_from, odd, in_runs = 0, 0, 0, 0  # odd: bytes CRC'd here
        runs: list[list[int]] = []
        hcache, unpack = self._hcrc, _HEADER.unpack_from
        while n - pos >= 12 and odd <= in_runs + _ODD_SLACK:
            length, hc = unpack(buf, pos)
            if (hcache.get(length) or self._header_crc(length)) != hc:
                break  # damage: the record-by-record check will report it
            step = length + 16
            k = (n - pos) // step
            if k == 0:
                break  # the record ends in the next chunk
            m = 1  # (a cheap look at the next header before any numpy call)
            if k > 1 and unpack(buf, pos + step) == (length, hc):
                m = self._count_run(buf, pos, length, hc, k, pos == self._pos)
            if m < _MIN_VERIFY_RUN:  # odd records: left to the one-by-one check
                odd += m * step
                pos += m * step
                continue
            if pos > odd_from:
                want = combine(want, _crc_fn(memoryview(buf)[odd_from:pos]), pos - odd_from)
                if pos > self._pos:
                    runs.append([-1, pos])
            want = combine(want, self._run_crc(buf, pos, length, hc, m), m * step)
            pos += m * step
            in_runs += m * step
            runs.append([length, pos])
            odd_from = pos
        if odd + n - pos > in_runs:
            self._crc_skip = _CRC_PROBE  # too few runs to pay for the chunks' CRCs
            return
        if n > odd_from:
            want = combine(want, _crc_fn(memoryview(buf)[odd_from:n]), n - odd_from)
        if want == crc:
            self._runs = runs

    @staticmethod
    def _count_run(buf, pos: int, length: int, hc: int, k: int, first: bool) -> int:
        """How many of the (at most k) records at `pos` have the header (length, hc):
        all at once for a run that starts the chunk (a file of one record length has
        no other), else in windows that double, so that a short run costs a short
        window whatever k is."""
        step = length + 16
        m, w = 0, k if first else 64
        while m < k:
            w = min(w, k - m)
            heads = np.ndarray(
                (w,), _RUN_HEADER, buffer=buf, offset=pos + m * step, strides=(step,)
            )
            ok = (heads["length"] == length) & (heads["crc"] == hc)
            if not ok.all():
                return m + int(np.argmin(ok))
            m += w
            w *= 2
        return m

    def _run_crc(self, buf, pos: int, length: int, hc: int, m: int) -> int:
        """The CRC of `m` framed records of `length` bytes at `buf[pos:]`, as it is if
        each record's data has the CRC its footer says (headers already checked).

        Record i is h + d_i + f_i: a 12-byte header h (the same for the whole run),
        data with crc(d_i) = unmask(u_i), and u_i's 4 bytes, so by combining
            crc(record i) = shift(unmask(u_i) ^ u_i, 4) ^ K
                          = shift(unmask(u_i) ^ u_i ^ K', 4)
        with K = shift(crc(h), length + 4) ^ crc(0000) and K' = K shifted back by 4.
        The last shift is left to the end of the combining: one table pass less.
        """
        step = length + 16
        u = np.ndarray((m,), "<u4", buffer=buf, offset=pos + 12 + length, strides=(step,))
        rot = u - _MASK_DELTA_U32
        v = (rot >> 17) | (rot << 15)  # the data CRCs the footers claim
        fixed = self._rcrc.get(length)
        if fixed is None:
            k = combine(_crc_fn(_HEADER.pack(length, hc)), 0, length + 4) ^ _CRC4_ZERO
            fixed = np.uint32(shift(k, SHIFT_PERIOD - 4))
            if len(self._rcrc) >= _HCACHE_MAX:
                self._rcrc.clear()
            self._rcrc[length] = fixed
        v ^= u
        v ^= fixed
        return combine_equal(v, step, 4)

    def _take(self, max_records: int, values: list, offsets: list | None) -> int:
        count, runs = 0, self._runs
        while runs and count < max_records:
            length, stop = runs[0]
            if length < 0:  # odd records between runs
                count += self._take_checked(max_records - count, values, offsets, stop)
            else:
                count += self._take_verified(max_records - count, values, offsets, length, stop)
            if self._pos < stop:
                return count
            del runs[0]
        if runs:
            return count
        return count + self._take_checked(max_records - count, values, offsets)

    def _take_verified(self, max_records, values, offsets, length: int, stop: int) -> int:
        """Cut records out of a verified run: slices, and nothing else to do."""
        buf, pos, base = self._buf, self._pos, self._base
        step = length + 16
        end = min(stop, pos + max_records * step)
        values += [buf[a : a + length] for a in range(pos + 12, end, step)]
        if offsets is not None:
            offsets += range(base + pos, base + end, step)
        self._pos = end
        return (end - pos) // step

    def _take_checked(self, max_records, values, offsets, limit: int | None = None) -> int:
        """Cut records out of _buf (up to `limit`), checking each one."""
        buf, pos, base = self._buf, self._pos, self._base
        n = self._end if limit is None else limit
        if max_records <= 0 or n - pos < 12:
            return 0
        unpack, unpack_u32 = _HEADER.unpack_from, _U32.unpack_from
        hcache = self._hcrc
        got: list = []  # the records' data, in order
        starts: list = []  # their start offsets in `buf`
        stored: list = []  # their stored (masked) data CRCs: uint32 arrays
        singles: list = []  # stored CRCs of single records not yet in `stored`
        crcs: list = []  # the data CRCs computed, in order
        count = 0
        prev = -1  # the previous record's length: a run may start when it repeats
        bad_header = -1
        while count < max_records and n - pos >= 12:
            length, hc = unpack(buf, pos)
            want = hcache.get(length)
            if want is None:
                want = self._header_crc(length)
            if want != hc:
                bad_header = pos
                break
            step = length + 16
            if step > n - pos:
                break  # the record is not all here yet
            if (
                length == prev
                and (k := min((n - pos) // step, max_records - count, _RUN_MAX)) >= _MIN_RUN
            ):
                # Probably a run of records of this length: check their headers at once.
                heads = np.ndarray((k,), _RUN_HEADER, buffer=buf, offset=pos, strides=(step,))
                ok = (heads["length"] == length) & (heads["crc"] == hc)
                m = k if ok.all() else max(1, int(np.argmin(ok)))
                first = pos + 12
                stop = pos + m * step
                run = [buf[a : a + length] for a in range(first, stop, step)]
                crcs.extend(map(_crc_fn, run))
                got.extend(run)
                starts.extend(range(pos, stop, step))
                if singles:
                    stored.append(np.array(singles, np.uint32))
                    singles = []
                stored.append(
                    np.ndarray((m,), "<u4", buffer=buf, offset=first + length, strides=(step,))
                )
                pos = stop
                count += m
                prev = -1 if m < k else length
            else:
                end = pos + 12 + length
                record = buf[pos + 12 : end]
                crcs.append(_crc_fn(record))
                got.append(record)
                starts.append(pos)
                singles.append(unpack_u32(buf, end)[0])
                pos = end + 4
                count += 1
                prev = length
        if got:
            # Data CRCs in one C-level pass, masked as stored, compared all at once.
            if singles:
                stored.append(np.array(singles, np.uint32))
            want = stored[0] if len(stored) == 1 else np.concatenate(stored)
            crcs = np.array(crcs, np.uint32)
            bad = (((crcs >> 15) | (crcs << 17)) + _MASK_DELTA_U32) != want
            if bad.any():
                i = int(np.argmax(bad))
                # Deliver the records before the damaged one; stop at it.
                del got[i:], starts[i + 1 :]
                rec_start = starts.pop()
                self._deliver(got, starts, base, values, offsets)
                self._pos = rec_start
                raise self._corrupt(base + rec_start + 12, False)  # TF names the data offset
            self._deliver(got, starts, base, values, offsets)
        self._pos = pos
        if bad_header >= 0:
            raise self._corrupt(base + bad_header, True)
        return count

    @staticmethod
    def _deliver(got, starts, base, values, offsets) -> None:
        values.extend(got)
        if offsets is not None:
            offsets.extend(map(base.__add__, starts) if base else starts)


def tf_record_iterator(path, options=None) -> Iterator[bytes]:
    """An iterator that reads the records from a TFRecords file.

    Raises:
      NotFoundError: the file does not exist.
      DataLossError: a record is corrupt (the message names the file and offset).
      ValueError: `options` names an unknown compression type.
    """
    compression = TFRecordOptions.get_compression_type_string(options)
    source = open_source(path, compression)
    return _iterate(source)


def _iterate(source) -> Iterator[bytes]:
    scanner = RecordScanner(source.path)
    try:
        while True:
            values: list[bytes] = []
            try:
                scanner.take(1 << 30, values)
            except errors.DataLossError:
                yield from values  # the good records before the damage come first
                raise
            yield from values
            data = source.read(scanner.need())
            if not data:
                scanner.check_end()
                return
            scanner.feed(data)
    finally:
        source.close()
