"""LMDBReader: the records of LMDB database files, as TF1's `tf.LMDBReader` read them.

A reader like the others (ops/reader_ops.py: the same ReaderReadV2 / ReaderReadUpToV2 /
counters / reset ops, the same put-back of records a failed step took).  Each work unit
is an LMDB data file, or a directory holding one (`data.mdb`), as TF's kernel opened a
regular file with MDB_NOSUBDIR and anything else as an environment directory.  Its
records are the main database's (key, value) pairs in key order (liblmdb's MDB_FIRST /
MDB_NEXT walk; a DUPSORT key once per value); the key is the database's own key.  At the
end of a file the reader takes the next filename from the queue, as every reader does.

TF 2.21 no longer reads LMDB: its LMDBReader kernel fails with UnimplementedError ("LMDB
support is removed from TensorFlow", recorded in tests/fixtures/lmdb/).  This reader
does what TF's kernel did before that, so TF1 programs written for it run; it reads the
file itself (asyncflow/lmdb_format.py) instead of through liblmdb, so a damaged file is
a DataLossError rather than a crash (TF's kernel CHECK-failed on any LMDB error).

File reads never block the loop: the file is opened and its records walked on a worker
thread, a batch at a time (at most _BATCH records or _BATCH_BYTES of values), and a
batch still being read when its read is cancelled is kept for the next read.

Invariants: at most one batch is being read per reader, and only that read touches the
open file and its record walk until it completes; a file is closed only after it.
"""

from __future__ import annotations

import asyncio
import collections
import os

from asyncflow import errors, lmdb_format, python_io
from asyncflow.ops.reader_ops import (
    ReaderBase,
    _as_path,
    _Reader,
    _reader,
    _register_reader,
)

__all__ = ["LMDBReader"]

_BATCH = 256  # records a worker-thread read gathers (more when a read asks for more)
_BATCH_BYTES = 4 << 20  # ... or fewer, once their values reach this many bytes


def _open(path: str) -> lmdb_format.LMDBFile:
    """TF's choice: a regular file is the data file, anything else a database directory."""
    data = path if os.path.isfile(path) else os.path.join(path, lmdb_format.DATA_FILE)
    try:
        return lmdb_format.LMDBFile(data)
    except OSError as e:
        raise python_io.os_error(data, e) from None
    except lmdb_format.LMDBError as e:
        raise errors.DataLossError(None, None, f"{data}: {e}") from None


class _Walk:
    """One file's records, walked on worker threads a batch at a time (one at a time)."""

    def __init__(self, path: str):
        self.path = path
        self.file: lmdb_format.LMDBFile | None = None
        self.records = None  # the file's record walk (a generator)

    def batch(self, n: int) -> tuple[list, bool, errors.OpError | None]:
        """Up to n (key, value) records (fewer past _BATCH_BYTES); whether the walk
        ended; the error that ended it (after the records before it)."""
        out, size = [], 0
        try:
            if self.file is None:
                self.file = _open(self.path)
                self.records = self.file.records()
            for record in self.records:
                out.append(record)
                size += len(record[1])
                if len(out) >= n or size >= _BATCH_BYTES:
                    return out, False, None
        except errors.OpError as e:
            return out, True, e
        except OSError as e:
            return out, True, python_io.os_error(self.file.path, e)
        except lmdb_format.LMDBError as e:
            return out, True, errors.DataLossError(None, None, f"{self.file.path}: {e}")
        return out, True, None

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class _LMDBReader(_Reader):
    def __init__(self, name: str):
        super().__init__(name)
        self._walk: _Walk | None = None
        self._buffer: collections.deque = collections.deque()
        self._ended = False  # the walk gave its last record (the buffer may hold more)
        self._error: errors.OpError | None = None  # raised once the buffer is empty
        self._fetch: asyncio.Future | None = None

    async def _start(self, work):
        # The file is opened by the first batch's read, so that a read cancelled while
        # the file opens keeps its work: the in-flight read is taken up by the next one.
        self._walk = _Walk(_as_path(work))

    async def _read_some(self, n):
        if not self._buffer and not self._ended:
            if self._fetch is None:
                loop = asyncio.get_running_loop()
                self._fetch = loop.run_in_executor(None, self._walk.batch, max(n, _BATCH))
            # Cancelled, the read stays in flight (or done): the next read takes it.
            batch, self._ended, self._error = await asyncio.shield(self._fetch)
            self._fetch = None
            self._buffer.extend(batch)
        if not self._buffer and self._error is not None:
            error = self._error  # a damaged file fails every read until the reader moves on
            if self._walk.file is None:  # not opened: as a reader's failed start, drop it
                self._finish()
                self.work = None
            raise error
        m = min(n, len(self._buffer))
        records = [self._buffer.popleft() for _ in range(m)]
        at_end = self._ended and not self._buffer and self._error is None
        return [k for k, _ in records], [v for _, v in records], at_end

    def _finish(self):
        fetch, walk = self._fetch, self._walk
        self._fetch = self._walk = None
        self._buffer.clear()
        self._ended, self._error = False, None
        if walk is None:
            return
        if fetch is not None and not fetch.done():
            fetch.add_done_callback(lambda _f: walk.close())  # close after the read
        else:
            walk.close()


_register_reader("LMDBReader", {}, lambda name, a: _LMDBReader(name))


class LMDBReader(ReaderBase):
    """A Reader that outputs the records from a LMDB file.

    Each filename from the queue is an LMDB data file (or a directory holding
    `data.mdb`); `read` gives its (key, value) records in key order, then goes on to
    the next file.  See `ReaderBase` for supported methods.

    Args:
      name: A name for the operation (optional).
      options: A LMDBRecordOptions object (optional); unused, as in TF.

    Raises (when run):
      OutOfRangeError: the queue is closed and every file has been read.
      NotFoundError: a filename from the queue does not exist.
      DataLossError: a file is not an LMDB database, or is damaged.
    """

    def __init__(self, name=None, options=None):
        del options
        super().__init__(_reader("LMDBReader", {}, name))
