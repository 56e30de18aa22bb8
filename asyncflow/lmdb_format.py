"""Reading an LMDB database file (liblmdb's on-disk format, 64-bit, little-endian), for
the LMDBReader op (ops/lmdb_reader_ops.py).

The format (liblmdb's mdb.c): the file is an array of pages of one size.  Pages 0 and
1 are meta pages; the one with the larger transaction id is current, and its record
of the main database gives the root page and the tree's depth.  The tree is a B+tree:
branch pages hold (key, child page) nodes, leaf pages (key, value) nodes in key order;
a value too big for its leaf is kept on overflow pages.  In a DUPSORT database a key's
values are the keys of a sub-page inside its node or of a sub-tree of their own.

    page header (16 bytes)  pgno u64, pad u16 (a LEAF2 page's key size), flags u16,
                            lower u16 and upper u16 (or an overflow run's page count u32)
                            then the nodes' offsets, u16 each: (lower - 16) / 2 of them
    node (8 bytes + key)    lo u16, hi u16 (a leaf's value size, or with the flags a
                            branch's child page), flags u16, key size u16, key, value

Walking the tree in order gives the records in key order, the order of liblmdb's
MDB_FIRST / MDB_NEXT cursor.  The walk reads the file with `os.pread`, page by page, on
whatever thread calls it (the reader's worker thread): no map, so a file truncated
while it is read gives a short read (an error here), never a SIGBUS.

Invariants: every offset and size taken from the file is checked against the page or
the file before it is used or anything is allocated for it; a walk visits no more pages
than the file has (a cycle of pages is an error, not a hang) and goes no deeper than
the tree's recorded depth.  A file that is not LMDB, or is damaged, raises `LMDBError`.
The database is read without liblmdb's lock file, as a snapshot: a database being
written meanwhile may read as damaged.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

__all__ = ["LMDBError", "LMDBFile", "DATA_FILE"]

DATA_FILE = "data.mdb"  # a database directory's data file

_MAGIC = 0xBEEFC0DE
_VERSION = 1
_PAGE_HEADER = 16
_NODE_HEADER = 8
_META = _PAGE_HEADER  # where the meta record starts in a meta page
_MIN_PAGE, _MAX_PAGE = 512, 1 << 16  # liblmdb's page sizes (MDB_MINPAGESIZE, MAX_PAGESIZE)
_INVALID_PAGE = (1 << 64) - 1  # P_INVALID: an empty tree's root
_MAX_DEPTH = 64

# page flags
_P_BRANCH, _P_LEAF, _P_OVERFLOW, _P_META, _P_LEAF2 = 0x01, 0x02, 0x04, 0x08, 0x20
# node flags
_F_BIGDATA, _F_SUBDATA, _F_DUPDATA = 0x01, 0x02, 0x04
# database flags
_MDB_DUPSORT = 0x04

_HEADER = struct.Struct("<QHHHH")  # pgno, pad, flags, lower, upper
_NODE = struct.Struct("<HHHH")  # lo, hi, flags, ksize
_DB = struct.Struct("<IHHQQQQQ")  # pad, flags, depth, branch, leaf, overflow, entries, root
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


class LMDBError(Exception):
    """The file is not an LMDB database (`invalid`) or is damaged."""

    def __init__(self, message: str, invalid: bool = False):
        super().__init__(message)
        self.invalid = invalid


def _corrupt(what: str) -> LMDBError:
    return LMDBError(f"MDB_CORRUPTED: Located page was wrong type ({what})")


class _Tree:
    """A tree's root, depth and flags (an MDB_db record)."""

    __slots__ = ("flags", "depth", "entries", "root")

    def __init__(self, record: bytes):
        _, self.flags, self.depth, _, _, _, self.entries, self.root = _DB.unpack_from(record)


class LMDBFile:
    """An open LMDB data file: `records()` walks its main database in key order.

    Raises:
      OSError: the file cannot be opened or read.
      LMDBError: not an LMDB file, or a damaged one.
    """

    def __init__(self, path: str):
        self.path = path
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            self._size = os.fstat(self._fd).st_size
            self._open()
        except BaseException:
            os.close(self._fd)
            raise

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> LMDBFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _open(self) -> None:
        head = os.pread(self._fd, _META + 28, 0)
        if len(head) < _META + 28 or _U32.unpack_from(head, _META)[0] != _MAGIC:
            raise LMDBError("MDB_INVALID: File is not an LMDB file", invalid=True)
        if _U32.unpack_from(head, _META + 4)[0] != _VERSION:
            raise LMDBError("MDB_VERSION_MISMATCH: Database environment version mismatch")
        self.page_size = _U32.unpack_from(head, _META + 24)[0]  # the free DB's md_pad
        if not _MIN_PAGE <= self.page_size <= _MAX_PAGE or self.page_size & (self.page_size - 1):
            raise LMDBError("MDB_INVALID: File is not an LMDB file", invalid=True)
        best = None
        for pgno in (0, 1):
            page = self._page(pgno, check_last=False)
            if _HEADER.unpack_from(page)[2] & _P_META == 0:
                continue
            magic, version = struct.unpack_from("<II", page, _META)
            if magic != _MAGIC or version != _VERSION:
                continue
            last_page, txnid = struct.unpack_from("<QQ", page, _META + 120)
            if best is None or txnid > best[0]:
                best = (txnid, last_page, page[_META + 72 : _META + 72 + _DB.size])
        if best is None:
            raise LMDBError("MDB_INVALID: File is not an LMDB file", invalid=True)
        _, self._last_page, main = best
        self._pages = min(self._last_page + 1, self._size // self.page_size)
        self._main = _Tree(main)
        if self._main.depth > _MAX_DEPTH:
            raise _corrupt("depth")

    @property
    def entries(self) -> int:
        """The records the main database says it holds."""
        return self._main.entries

    def _page(self, pgno: int, check_last: bool = True) -> bytes:
        if check_last and not 2 <= pgno < self._pages:
            raise LMDBError(
                f"MDB_PAGE_NOTFOUND: Requested page not found (page {pgno}; the file has "
                f"{self._pages})"
            )
        page = os.pread(self._fd, self.page_size, pgno * self.page_size)
        if len(page) != self.page_size:
            raise LMDBError(f"MDB_CORRUPTED: page {pgno} is past the end of the file")
        return page

    def records(self) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs of the main database in key order (a DUPSORT key once
        for each of its values, in their order)."""
        budget = [self._pages]  # pages this walk may still read (no page is read twice)
        dupsort = bool(self._main.flags & _MDB_DUPSORT)
        for key, flags, value in self._walk(self._main, budget):
            if flags & _F_DUPDATA and dupsort:
                for dup in self._dups(flags, value, budget):
                    yield key, dup
            else:
                yield key, value

    def _dups(self, flags: int, value: bytes, budget: list) -> Iterator[bytes]:
        """A DUPSORT key's values: the keys of its sub-tree or its sub-page."""
        if flags & _F_SUBDATA:
            if len(value) < _DB.size:
                raise _corrupt("sub-database record")
            for dup, _, _ in self._walk(_Tree(value), budget):
                yield dup
        else:
            yield from (k for k, _, _ in self._leaf_nodes(value, keys_only=True))

    def _walk(self, tree: _Tree, budget: list) -> Iterator[tuple[bytes, int, bytes]]:
        """The (key, node flags, value) nodes of a tree's leaves, in order."""
        if tree.root == _INVALID_PAGE:
            return
        if not 1 <= tree.depth <= _MAX_DEPTH:
            raise _corrupt("depth")
        stack: list = [(tree.root, 1)]  # page numbers, read as the walk reaches them
        while stack:
            pgno, depth = stack.pop()
            page = self._take(pgno, budget)
            flags = _HEADER.unpack_from(page)[2]
            if flags & _P_BRANCH:
                if depth >= tree.depth:
                    raise _corrupt("branch page below the tree's depth")
                children = [c for c, _ in self._nodes(page, branch=True)]
                stack.extend((child, depth + 1) for child in reversed(children))
            elif flags & (_P_LEAF | _P_LEAF2):
                if depth != tree.depth:
                    raise _corrupt("leaf page above the tree's depth")
                yield from self._leaf_nodes(page, keys_only=bool(flags & _P_LEAF2))
            else:
                raise _corrupt(f"page flags {flags:#x}")

    def _take(self, pgno: int, budget: list) -> bytes:
        budget[0] -= 1
        if budget[0] < 0:
            raise LMDBError("MDB_CORRUPTED: the tree's pages form a cycle")
        return self._page(pgno)

    def _nodes(self, page: bytes, branch: bool) -> Iterator[tuple[int, bytes]]:
        """A branch page's (child page, key) or a leaf page's (node offset, key)."""
        _, _, _, lower, upper = _HEADER.unpack_from(page)
        if not _PAGE_HEADER <= lower <= upper <= len(page) or lower & 1:
            raise _corrupt("page bounds")
        n = (lower - _PAGE_HEADER) >> 1
        for ptr in struct.unpack_from(f"<{n}H", page, _PAGE_HEADER):
            if not upper <= ptr <= len(page) - _NODE_HEADER:
                raise _corrupt("node offset")
            lo, hi, flags, ksize = _NODE.unpack_from(page, ptr)
            start = ptr + _NODE_HEADER
            if start + ksize > len(page):
                raise _corrupt("key size")
            if branch:
                yield lo | hi << 16 | flags << 32, b""
            else:
                yield ptr, page[start : start + ksize]

    def _leaf_nodes(self, page: bytes, keys_only: bool) -> Iterator[tuple[bytes, int, bytes]]:
        """(key, node flags, value) of a leaf page (or a sub-page); LEAF2 pages and
        sub-pages of values hold keys only."""
        if len(page) < _PAGE_HEADER:
            raise _corrupt("sub-page size")
        _, ksize, flags, lower, upper = _HEADER.unpack_from(page)
        if flags & _P_LEAF2:
            if not _PAGE_HEADER <= lower <= len(page) or ksize == 0:
                raise _corrupt("LEAF2 page")
            n = (lower - _PAGE_HEADER) >> 1
            if _PAGE_HEADER + n * ksize > len(page):
                raise _corrupt("LEAF2 page size")
            for i in range(n):
                o = _PAGE_HEADER + i * ksize
                yield page[o : o + ksize], 0, b""
            return
        for ptr, key in self._nodes(page, branch=False):
            if keys_only:
                yield key, 0, b""
                continue
            lo, hi, nflags, ksize = _NODE.unpack_from(page, ptr)
            size, start = lo | hi << 16, ptr + _NODE_HEADER + ksize
            if nflags & _F_BIGDATA:
                yield key, nflags, self._overflow(page, start, size)
            elif start + size > len(page):
                raise _corrupt("value size")
            else:
                yield key, nflags, page[start : start + size]

    def _overflow(self, page: bytes, start: int, size: int) -> bytes:
        """A big value: `size` bytes on the overflow pages the node names."""
        if start + 8 > len(page):
            raise _corrupt("overflow page number")
        pgno = _U64.unpack_from(page, start)[0]
        head = self._page(pgno)
        flags, pages = _HEADER.unpack_from(head)[2], _U32.unpack_from(head, 12)[0]
        if not flags & _P_OVERFLOW or pgno + pages > self._pages:
            raise _corrupt("overflow page")
        if _PAGE_HEADER + size > pages * self.page_size:
            raise _corrupt("overflow value size")
        value = os.pread(self._fd, size, pgno * self.page_size + _PAGE_HEADER)
        if len(value) != size:
            raise LMDBError("MDB_CORRUPTED: a value is past the end of the file")
        return value
