"""A tf.data input worker process: `python -m asyncflow.data.worker MSG_FD`.

Started by asyncflow/data/remote.py (a fresh interpreter, not a fork of a parent that
has an event loop and threads).  It imports the dataset's subgraph (a GraphDef), and
for each START runs one pass of the dataset in a session of its own: every element
goes into a free slot of shared memory (segments this process creates, owns and
unlinks) and an ELEM message tells the parent.  At most `slots` elements are ahead of
the parent (one per slot the parent has not freed).  Wire format: shm_wire.py.

It exits when its stdin closes (the parent closed it, or died), on QUIT, or when the
message pipe breaks; its segments are unlinked on the way out (and by the
multiprocessing resource tracker if it is killed).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import secrets
import sys

from asyncflow.data import shm_wire as w


def _read_exact(fd: int, n: int) -> bytes:
    parts, left = [], n
    while left:
        b = os.read(fd, left)
        if not b:
            raise EOFError("stdin closed")
        parts.append(b)
        left -= len(b)
    return b"".join(parts)


class _Worker:
    def __init__(self, cfg: dict, graph: bytes, msg_fd: int):
        import asyncflow as af

        self.af = af
        self.msg_fd = msg_fd
        self.slots = int(cfg["slots"])
        if not 1 <= self.slots <= 64:
            raise ValueError("slots out of range")
        self.prefix = f"afds_{os.getpid()}_{secrets.token_hex(4)}"
        self.segs: list = [None] * self.slots
        self.gen = 0
        self.free: collections.deque = collections.deque()
        self.avail = asyncio.Event()
        self.task: asyncio.Task | None = None
        g = af.Graph()
        with g.as_default():
            af.import_graph_def(graph, name="")
        self.graph = g
        self.dataset = g.get_tensor_by_name(cfg["dataset"])
        self.session = af.Session(graph=g)

    def send(self, kind: bytes, slot: int = 0, pass_id: int = 0, payload: bytes = b"") -> None:
        data = w.MSG.pack(kind, slot, pass_id, len(payload)) + payload
        while data:
            n = os.write(self.msg_fd, data)  # blocking; BrokenPipeError: the parent is gone
            data = data[n:]

    def _segment(self, slot: int, need: int):
        from multiprocessing import shared_memory

        seg = self.segs[slot]
        if seg is not None and seg.size >= need:
            return seg
        if need > w.MAX_SLOT_BYTES:
            raise self.af.errors.ResourceExhaustedError(
                None, None, f"A dataset element of {need} bytes is too large for the input worker"
            )
        size = 1 << max(need - 1, 1 << 16).bit_length()
        self.gen += 1
        new = shared_memory.SharedMemory(
            name=f"{self.prefix}_{slot}_{self.gen}", create=True, size=size
        )
        self.segs[slot] = new
        self.send(b"SEGM", slot, 0, new.name.encode())
        if seg is not None:
            self._drop(seg)
        return new

    @staticmethod
    def _drop(seg) -> None:
        try:
            seg.close()
        finally:
            try:
                seg.unlink()
            except FileNotFoundError:
                pass

    async def _slot(self) -> int:
        while not self.free:
            self.avail.clear()
            await self.avail.wait()
        return self.free.popleft()

    async def run_pass(self, pass_id: int) -> None:
        import numpy as np

        errors = self.af.errors
        stream = None
        try:
            value = await self.session.arun(self.dataset)
            value = value[()] if isinstance(value, np.ndarray) else value
            from asyncflow.ops import dataset_pipeline as pl

            stream = value.iterate(pl.Env(self.session))
            async for elem in stream:
                elem = tuple(np.ascontiguousarray(a) for a in elem)
                for k, a in enumerate(elem):
                    if a.dtype.str not in w.DTYPES or a.ndim > w.MAX_RANK:
                        raise errors.InvalidArgumentError(
                            None,
                            None,
                            f"Component {k} of type {a.dtype} cannot leave the input worker",
                        )
                slot = await self._slot()
                total, parts = w.layout(elem)
                seg = self._segment(slot, total)
                w.write(seg.buf, elem, parts, total)
                self.send(b"ELEM", slot, pass_id)
            self.send(b"ENDP", 0, pass_id)
        except asyncio.CancelledError:
            raise
        except errors.OpError as e:
            self._error(pass_id, type(e).__name__, e.message)
        except Exception as e:  # noqa: BLE001 - reported to the parent as TF's UnknownError
            self._error(pass_id, "UnknownError", f"{type(e).__name__}: {e}")
        finally:
            if stream is not None:
                await stream.aclose()

    def _error(self, pass_id: int, cls: str, message: str) -> None:
        body = json.dumps({"error": cls, "message": message[: w.MAX_PAYLOAD // 4]})
        self.send(b"ERRO", 0, pass_id, body.encode())

    async def stop(self) -> None:
        t, self.task = self.task, None
        if t is not None and not t.done():
            t.cancel()
            try:
                await t
            except asyncio.CancelledError:
                pass

    async def serve(self, stdin: int) -> None:
        from asyncflow.kernel_api import parked_task

        cmds = w.FdReader(stdin)
        self.send(b"HELO")
        try:
            while True:
                try:
                    cmd, arg = w.CMD.unpack(await cmds.read(w.CMD.size))
                except EOFError:
                    return
                if cmd == w.FREE:
                    if arg < self.slots:
                        self.free.append(arg)
                        self.avail.set()
                elif cmd == w.START:
                    await self.stop()
                    self.free = collections.deque(range(self.slots))
                    self.avail.set()
                    # (a parked Task: pure map functions run as straight-line programs)
                    self.task = parked_task(self.run_pass(arg))
                elif cmd == w.STOP:
                    await self.stop()
                elif cmd == w.QUIT:
                    return
        finally:
            await self.stop()
            for seg in self.segs:
                if seg is not None:
                    self._drop(seg)
            self.session.close()


def main(argv: list[str]) -> int:
    msg_fd = int(argv[1])
    try:
        cfg_len, graph_len = w.CONFIG.unpack(_read_exact(0, w.CONFIG.size))
        if cfg_len > w.MAX_CONFIG or graph_len > w.MAX_GRAPH:
            return 2
        cfg = json.loads(_read_exact(0, cfg_len))
        graph = _read_exact(0, graph_len)
    except EOFError:  # the parent went away before it sent its graph
        return 0

    async def run():
        worker = _Worker(cfg, graph, msg_fd)
        await worker.serve(0)

    try:
        asyncio.run(run())
    except (BrokenPipeError, EOFError):
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
