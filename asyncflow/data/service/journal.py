"""The fault-tolerant dispatcher's journal: its state changes, appended to a file in
`work_dir` as they happen and replayed by a dispatcher started again on that work_dir.

A file of our own (TF's journal is a sequence of its protobuf `Update`s; nothing reads
both): an 8-byte magic, then records, each

    meta length (u32 LE) | blob length (u32 LE) | CRC-32 of meta and blob (u32 LE)
    | meta (JSON object, "u" naming the update) | blob (raw bytes: a dataset's graph)

Both lengths are checked against their bounds before anything is allocated.  A record
cut short at the end of the file (the process died while appending it) is dropped and
the file truncated there before appending again; any other damage (a bad magic or
checksum, a meta that is not a JSON object) raises DataLossError rather than starting
from a state that is not the one journaled.  No pickle.

Appends are one `os.write` each, unbuffered, without fsync: the failure this covers
is the dispatcher's process going away (the page cache keeps what was written), not
the machine's.
"""

from __future__ import annotations

import json
import os
import struct
import zlib

from asyncflow import errors
from asyncflow.data.service import protocol as p

__all__ = ["FILE_NAME", "Journal", "read_journal"]

FILE_NAME = "asyncflow_dispatcher_journal"
MAGIC = b"AFDSJ1\n\0"
_HEADER = struct.Struct("<III")
MAX_META = 1 << 20
MAX_BLOB = p.MAX_GRAPH_BYTES


def _lost(path: str, what: str) -> errors.DataLossError:
    return errors.DataLossError(
        None, None, f"The tf.data service dispatcher's journal {path} is corrupted: {what}"
    )


def read_journal(path: str) -> tuple[list[tuple[dict, bytes]], int]:
    """(the journal's updates as (meta, blob), the offset its complete records end at);
    ([], 0) when there is no journal yet.

    Raises DataLossError for a journal that is damaged other than at its tail."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - read in one place below
    except FileNotFoundError:
        return [], 0
    with f:
        size = os.fstat(f.fileno()).st_size
        magic = f.read(len(MAGIC))
        if len(magic) < len(MAGIC):
            if MAGIC.startswith(magic):
                return [], 0  # (died while writing the magic)
            raise _lost(path, "not a journal")
        if magic != MAGIC:
            raise _lost(path, "not a journal")
        updates, end = [], len(MAGIC)
        while True:
            head = f.read(_HEADER.size)
            if len(head) < _HEADER.size:
                return updates, end  # (the end, or a header cut short)
            meta_len, blob_len, crc = _HEADER.unpack(head)
            if meta_len > MAX_META or blob_len > MAX_BLOB:
                raise _lost(path, f"a record at offset {end} states sizes over the limits")
            if end + _HEADER.size + meta_len + blob_len > size:
                return updates, end  # (a record cut short: dropped)
            raw = f.read(meta_len + blob_len)
            if len(raw) != meta_len + blob_len:
                return updates, end
            if zlib.crc32(raw) != crc:
                raise _lost(path, f"the record at offset {end} fails its checksum")
            try:
                meta = json.loads(raw[:meta_len])
            except ValueError:
                meta = None
            if not isinstance(meta, dict) or not isinstance(meta.get("u"), str):
                raise _lost(path, f"the record at offset {end} is not an update")
            updates.append((meta, raw[meta_len:]))
            end += _HEADER.size + meta_len + blob_len


class Journal:
    """The journal in `work_dir`, open for appending (created with the directory).

    Raises UnavailableError when work_dir cannot be written, DataLossError (reading)
    for a damaged journal."""

    def __init__(self, work_dir: str):
        try:
            os.makedirs(work_dir, exist_ok=True)
        except OSError as e:
            raise errors.UnavailableError(
                None, None, f"Cannot create the dispatcher's work_dir {work_dir!r}: {e}"
            ) from None
        self.path = os.path.join(work_dir, FILE_NAME)
        self.updates, end = read_journal(self.path)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        if end == 0:
            os.ftruncate(self._fd, 0)
            os.write(self._fd, MAGIC)
        else:
            os.ftruncate(self._fd, end)  # (a record cut short goes)
        os.lseek(self._fd, 0, os.SEEK_END)

    def append(self, meta: dict, blob: bytes = b"") -> None:
        """Append one update (before the state changes: what was answered was journaled).

        Raises InternalError when it cannot be written."""
        if self._fd < 0:
            raise errors.InternalError(None, None, "The dispatcher's journal is closed")
        raw = json.dumps(meta, separators=(",", ":")).encode()
        if len(raw) > MAX_META or len(blob) > MAX_BLOB:
            raise errors.InvalidArgumentError(None, None, "A journal update over the limits")
        record = _HEADER.pack(len(raw), len(blob), zlib.crc32(raw + blob)) + raw + blob
        start = os.lseek(self._fd, 0, os.SEEK_CUR)
        try:
            if os.write(self._fd, record) != len(record):
                raise OSError("short write (is the disk full?)")
        except OSError as e:
            try:  # (a record cut short would make every later one unreadable)
                os.ftruncate(self._fd, start)
                os.lseek(self._fd, start, os.SEEK_SET)
            except OSError:
                pass
            raise errors.InternalError(
                None, None, f"Failed to write the dispatcher's journal {self.path}: {e}"
            ) from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
