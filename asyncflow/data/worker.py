"""A tf.data input worker process: `python -m asyncflow.data.worker MSG_FD`.

Started by asyncflow/data/remote.py (a fresh interpreter, not a fork of a parent that
has an event loop and threads).  It imports the dataset's subgraph (a GraphDef), and
for each START runs one pass of the dataset in a session of its own: every element
goes into a free slot of shared memory (segments this process creates, owns and
unlinks) and an ELEM message tells the parent.  At most `slots` elements are ahead of
the parent (one per slot the parent has not freed).  Wire format: shm_wire.py.

Running ahead: once a pass the parent started has ended, the worker starts the next
one at once, before the parent asks for it (a training loop's next epoch), into the
slots the parent frees; its messages wait until START adopts it, so the parent's first
elements of that pass are ready when it asks (the shuffle buffer's fill and the first
parse no longer delay the epoch's first step).  A pass gives the same elements
whenever it runs: the dataset's subgraph is pure, and each pass evaluates its ops
afresh, seeds included.  Its input files could change in between (a program that
rewrites them between epochs): the pass that ran ahead notes each file's identity
(device, inode, size, modification and change times) before reading, and START keeps it
only if they are all unchanged, else runs the pass afresh.  A pass run ahead and never
asked for costs the shuffle buffer's fill and at most `slots` elements.

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

_SHUFFLES = ("ShuffleDataset", "ShuffleAndRepeatDataset")  # (ops drawing from the Philox loop)


def _read_exact(fd: int, n: int) -> bytes:
    parts, left = [], n
    while left:
        b = os.read(fd, left)
        if not b:
            raise EOFError("stdin closed")
        parts.append(b)
        left -= len(b)
    return b"".join(parts)


def _file_key(path: str):
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _input_files(value) -> list[str] | None:
    """The files a pass over `value` reads (its TFRecord sources' paths), or None where
    the chain of stages is not the one remote.py admits (each stage's `input`, down to
    one TFRecords source)."""
    from asyncflow.ops import dataset_pipeline as pl

    for _ in range(64):
        if isinstance(value, pl.TFRecords):
            return list(value.paths)
        value = getattr(value, "input", None)
        if not isinstance(value, pl.DatasetValue):
            return None
    return None


class _Pass:
    """One pass in the worker.  `pid` is None while it runs ahead of the parent: its
    messages wait in `held` until START adopts it."""

    def __init__(self, pid: int | None):
        self.pid = pid
        self.held: list = []  # (kind, slot, payload) not sent yet
        self.adopted = asyncio.Event()
        if pid is not None:
            self.adopted.set()
        self.files: list | None = None  # [(path, _file_key)] before reading ahead
        self.ahead = 0  # elements it made before START adopted it

    def unchanged(self) -> bool:
        """Whether the files it may have read are the ones there now."""
        try:
            return all(_file_key(path) == key for path, key in self.files or ())
        except OSError:
            return False


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
        self.current: _Pass | None = None
        self.run_ahead = bool(cfg.get("ahead", True))
        self.cpus = _allowed_cpus()  # where this process may run (None: not narrowed)
        self.avoiding = w.NO_CPU
        self.dropped = 0  # passes run ahead and dropped (files changed) since the last ENDP
        g = af.Graph()
        with g.as_default():
            af.import_graph_def(graph, name="")
        for op in g.get_operations():  # (remote.py's _graph_bytes: a map's fused maps)
            parts = op.attrs.get(w.FUSED_MAPS_ATTR)
            if parts:  # (its function's ops are `<op>/_f/<node>` here)
                op._fused_maps = tuple(
                    frozenset(f"{op.name}/_f/{n}" for n in p.decode().split(",")) for p in parts
                )
        self.graph = g
        self.dataset = g.get_tensor_by_name(cfg["dataset"])
        if any(op.type in _SHUFFLES for op in g.get_operations()):
            # The shuffle's draws come from a compiled loop (numba: ~0.35 s of CPU to
            # import and compile or load, on a thread of its own): ready before HELO,
            # so it does not share a core with the step during the first passes here.
            from asyncflow.ops import philox_random

            philox_random.warm()
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

    def _tell(self, p: _Pass, kind: bytes, slot: int = 0, payload: bytes = b"") -> None:
        if p.pid is None:
            p.held.append((kind, slot, payload))
            if kind == b"ELEM":
                p.ahead += 1
            return
        if kind == b"ENDP":
            payload, self.dropped = w.ENDP.pack(p.ahead, self.dropped), 0
        self.send(kind, slot, p.pid, payload)

    async def run_passes(self, p: _Pass) -> None:
        """Pass `p`, then (while each ends cleanly) the next ones, each run ahead of
        the parent's START and waiting for it once done."""
        while True:
            self.current = p
            if not await self.run_pass(p) or not self.run_ahead:
                return
            await p.adopted.wait()
            if not self.run_ahead:
                return
            p = _Pass(None)

    async def run_pass(self, p: _Pass) -> bool:
        """One pass's elements into slots; whether it ended cleanly."""
        import numpy as np

        errors = self.af.errors
        stream = None
        try:
            value = await self.session.arun(self.dataset)
            value = value[()] if isinstance(value, np.ndarray) else value
            from asyncflow.ops import dataset_pipeline as pl

            if p.pid is None:
                paths = _input_files(value)
                try:
                    p.files = None if paths is None else [(f, _file_key(f)) for f in paths]
                except OSError:
                    p.files = None
                if p.files is None:  # (nothing to check: read nothing before START)
                    await p.adopted.wait()
            env = pl.Env(self.session)
            # (a function's error names its path from here on; the parent adds the top)
            env.name_from(value, w.PATH_ABOVE, "beneath")
            stream = value.iterate(env)
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
                self._tell(p, b"ELEM", slot)
            self._tell(p, b"ENDP", 0, b"")
            return True
        except asyncio.CancelledError:
            raise
        except errors.OpError as e:
            self._error(p, type(e).__name__, e.message)
        except Exception as e:  # noqa: BLE001 - reported to the parent as TF's UnknownError
            self._error(p, "UnknownError", f"{type(e).__name__}: {e}")
        finally:
            if stream is not None:
                await stream.aclose()
        return False

    def adopt(self, pass_id: int) -> bool:
        """START for the pass running ahead, if there is one and its files are
        unchanged: its held messages go out under `pass_id`; whether it was adopted."""
        p = self.current
        if p is None or p.pid is not None or self.task is None or self.task.done():
            return False
        if not p.unchanged():
            self.dropped += 1
            return False
        held = {slot for kind, slot, _ in p.held if kind == b"ELEM"}
        # START frees every slot of the parent's earlier pass: all but the held ones.
        self.free = collections.deque(s for s in range(self.slots) if s not in held)
        self.avail.set()
        p.pid = pass_id
        held, p.held = p.held, []
        for kind, slot, payload in held:
            self._tell(p, kind, slot, payload)
        p.adopted.set()
        return True

    def _error(self, p: _Pass, cls: str, message: str) -> None:
        body = json.dumps({"error": cls, "message": message[: w.MAX_PAYLOAD // 4]})
        self._tell(p, b"ERRO", 0, body.encode())

    def avoid(self, cpu: int) -> None:
        """Keep every thread of this process off `cpu` (the parent's consuming thread's;
        w.NO_CPU: none), where another CPU is allowed."""
        if cpu == self.avoiding or self.cpus is None:
            return
        self.avoiding = cpu
        mask = self.cpus - {cpu} if cpu in self.cpus else self.cpus
        if not mask:
            mask = self.cpus
        try:
            tids = [int(t) for t in os.listdir("/proc/self/task")]
        except OSError:
            tids = [0]
        for tid in tids:
            try:
                os.sched_setaffinity(tid, mask)
            except OSError:  # (a thread that just ended)
                pass

    async def stop(self) -> None:
        t, self.task, self.current = self.task, None, None
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
                    if self.adopt(arg):
                        continue
                    await self.stop()
                    self.free = collections.deque(range(self.slots))
                    self.avail.set()
                    # (a parked Task: pure map functions run as straight-line programs)
                    self.task = parked_task(self.run_passes(_Pass(arg)))
                elif cmd == w.AVOID:
                    self.avoid(arg)
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


def _allowed_cpus() -> frozenset | None:
    """The CPUs this process may run on, where it may narrow them (more than one)."""
    try:
        cpus = frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    return cpus if len(cpus) > 1 else None


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
