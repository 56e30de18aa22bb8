"""The wire format between a tf.data input worker process and its parent
(asyncflow/data/remote.py, asyncflow/data/worker.py): fixed binary headers, JSON for
the rare messages that carry text, raw array bytes in shared memory.  No pickle.

Parent -> worker, on the worker's stdin:
  - once: `<II` (config length, graph length), the JSON config, the GraphDef bytes;
  - then commands of 8 bytes, `<BxxxI` (command, argument): START(pass id),
    FREE(slot: the parent copied that slot's element out), STOP (abandon the pass),
    QUIT, AVOID(the CPU the parent's consuming thread last ran on, or NO_CPU: the
    worker keeps off it: remote.py "Where the worker runs").
Worker -> parent, on a pipe of its own: messages of a 16-byte header `<4sIII` (kind,
slot, pass id, payload length) and the payload: HELO (ready), SEGM (slot's segment is
now the shared-memory segment named by the payload), ELEM (slot holds the pass's next
element), ENDP (the pass is over; payload `<II`: how many of its elements the worker made
before START asked for the pass, and how many passes it ran ahead were dropped since the
last ENDP because their input files changed: worker.py "Running ahead"), ERRO (the
pass failed: JSON {"error": class name, "message": text}).

An element in a slot: a header `<4sIQ` (b"AFDS", component count, bytes used), then
per component `<8sII8qQQ` (NumPy dtype string, rank, 0, dims padded to 8, offset,
nbytes), each component's bytes at a 64-aligned offset.
"""

from __future__ import annotations

import asyncio
import os
import struct

import numpy as np

START, FREE, STOP, QUIT, AVOID = 1, 2, 3, 4, 5
NO_CPU = 0xFFFFFFFF
CMD = struct.Struct("<BxxxI")
MSG = struct.Struct("<4sIII")
CONFIG = struct.Struct("<II")
ENDP = struct.Struct("<II")
HEAD = struct.Struct("<4sIQ")
COMP = struct.Struct("<8sII8qQQ")
MAGIC = b"AFDS"
# Where the worker's words of a dataset function's error put the iterator path above
# its pipeline (TF's: from the iterator's root); the parent writes its own path there
PATH_ABOVE = "<input worker>"
# A map's node attr: the node names (in its function) of each earlier map Dataset.map
# fused into its one call (the op's `_fused_maps`: their errors are those maps')
FUSED_MAPS_ATTR = "_af_fused_maps"
MAX_COMPONENTS = 64
MAX_RANK = 8
MAX_PAYLOAD = 64 << 10
MAX_CONFIG = 1 << 20
MAX_GRAPH = 256 << 20
MAX_SLOT_BYTES = 1 << 30
# The dtypes an element may carry (numbers and bools: no object arrays).
DTYPES = frozenset(
    np.dtype(t).str
    for t in (
        np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
        np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128,
    )
)  # fmt: skip


def _align(n: int) -> int:
    return (n + 63) & ~63


def layout(elem) -> tuple[int, list[tuple[int, int]]]:
    """(bytes needed, [(offset, nbytes)] per component) of an element in a slot."""
    off = _align(HEAD.size + COMP.size * len(elem))
    parts = []
    for a in elem:
        parts.append((off, a.nbytes))
        off = _align(off + a.nbytes)
    return off, parts


def write(buf, elem, parts, total: int) -> None:
    """Put `elem` (a tuple of arrays, dtypes in DTYPES) into the slot buffer `buf`."""
    HEAD.pack_into(buf, 0, MAGIC, len(elem), total)
    for k, (a, (off, n)) in enumerate(zip(elem, parts)):
        dims = list(a.shape) + [0] * (MAX_RANK - a.ndim)
        COMP.pack_into(
            buf, HEAD.size + k * COMP.size, a.dtype.str.encode(), a.ndim, 0, *dims, off, n
        )
        dst = np.ndarray(a.shape, a.dtype, buffer=buf, offset=off)
        np.copyto(dst, a)
        del dst


def _plan(buf, n: int, total: int) -> tuple:
    """((dtype, shape, count, offset) per component) of a slot's header, checked."""
    plan = []
    for k in range(n):
        dt, rank, _, *rest = COMP.unpack_from(buf, HEAD.size + k * COMP.size)
        dims, off, nbytes = rest[:MAX_RANK], rest[MAX_RANK], rest[MAX_RANK + 1]
        dts = dt.rstrip(b"\x00").decode("ascii", "replace")
        if dts not in DTYPES or rank > MAX_RANK:
            raise ValueError(f"malformed component {k}")
        dtype = np.dtype(dts)
        shape = tuple(dims[:rank])
        count = 1
        for d in shape:
            if d < 0:
                raise ValueError(f"malformed component {k}")
            count *= d
        if count * dtype.itemsize != nbytes or off + nbytes > total:
            raise ValueError(f"malformed component {k}")
        plan.append((dtype, shape, count, off))
    return tuple(plan)


# (header bytes, slot size) -> _plan's result: a pass's elements mostly share one header
# (the same shapes at the same offsets), parsed and checked once (~9 of a read's ~13 us).
_PLANS: dict = {}
_PLANS_MAX = 64


def read(buf, size: int) -> tuple:
    """The element in the slot buffer `buf` (of `size` bytes), copied out.

    Raises:
      ValueError: a malformed slot (bad magic, count, dtype, shape or bounds)."""
    magic, n, total = HEAD.unpack_from(buf, 0)
    if magic != MAGIC or n > MAX_COMPONENTS or total > size:
        raise ValueError("malformed element header")
    key = (bytes(buf[: HEAD.size + n * COMP.size]), size)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan(buf, n, total)
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[key] = plan
    return tuple(
        np.frombuffer(buf, dtype, count, off).reshape(shape).copy()
        for dtype, shape, count, off in plan
    )


class FdReader:
    """Exact-length reads from a non-blocking pipe on the running loop: what is there
    is taken without waiting; otherwise the loop watches the fd until more arrives."""

    def __init__(self, fd: int):
        self.fd = fd
        os.set_blocking(fd, False)
        self.buf = bytearray()
        self.eof = False

    def fill(self) -> bool:
        """Take what the pipe holds now; False when nothing was there."""
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return False
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def take(self, n: int) -> bytes | None:
        """`n` bytes if buffered (after a non-blocking fill), else None."""
        if len(self.buf) < n and not self.eof:
            while self.fill() and len(self.buf) < n:
                pass
        if len(self.buf) < n:
            return None
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    async def read(self, n: int) -> bytes:
        """Exactly `n` bytes.

        Raises:
          EOFError: the other end closed the pipe first."""
        while True:
            out = self.take(n)
            if out is not None:
                return out
            if self.eof:
                raise EOFError("pipe closed")
            await self.readable()

    async def readable(self) -> None:
        """Wait until the pipe has data (or its end), then take what it has."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        loop.add_reader(self.fd, _wake, fut)
        try:
            await fut
        finally:
            loop.remove_reader(self.fd)
        self.fill()


def _wake(fut) -> None:
    if not fut.done():
        fut.set_result(None)
