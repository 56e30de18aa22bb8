"""tf.data's `prefetch` on an input worker process, for pipelines that are pure and
CPU-bound (TFRecord reads, parses, numeric maps, shuffle, batch).

Why: the pipeline is Python holding the GIL.  In the step's thread it runs after each
step; on a thread of its own it still takes turns with the step (benchmarks/README.md,
"tf.data pipeline").  TF's input threads run beside the step on another core; so does
a worker process.  The worker (asyncflow/data/worker.py, a fresh interpreter: spawned,
not forked) imports the dataset's subgraph and runs each pass there, handing the
elements over through shared memory (asyncflow/data/shm_wire.py: raw array bytes
under a fixed header, commands as bytes; no pickle).

Automatic (`ASYNCFLOW_DATA_WORKER`: `auto`, the default; `always`; `0` keeps every
pipeline in-process), as TF's input threads are: with 16 slots, data_bench's training
epochs alternated in one process ran 1.37-1.42x as fast from the worker as in-process
(benchmarks/README.md, "tf.data pipeline").  A worker costs a process and ~1 s of
CPU to start, so `auto` starts one only for a pipeline passed over again.

Where: `PrefetchDataset` over a subgraph whose every op is in `_PURE` (a TFRecord
source, shuffle, batch, map/filter with functions of pure numeric ops and parses; no
captured placeholders, no variables, no random or stateful ops) and whose elements are
numbers.  Anything else runs in-process as before.

`auto`, without a wait: the second pass over such a pipeline (an iterator
initialized again) starts the worker (~1-4 s to import asyncflow); passes run
in-process until it is ready, and in the worker from then on.  `always`:
every pass waits for the worker (a one-shot iterator has one pass).  Each pass
evaluates the dataset ops afresh in either process (a shuffle's seeds come from its
op's run), so a pass gives the same elements in the same order either way.

Where the worker runs: the parent tells it (AVOID, in the write that carries its FREEs)
the CPU its consuming thread is on, and the worker keeps its threads off that CPU where
another one is allowed; before the parent waits for an element it lifts that (the
worker is behind, and the parent's CPU idle).  Why: a FREE write wakes the worker on
the writer's CPU, and when the other core was busy the worker preempted the step there
for its burst (~1.4 ms, 8 batches): 60-130 ms of run-queue wait for the step in an
epoch of ~270 ms beside one CPU-bound process.  Training epochs alternated in one
process with and without it (data_bench --parse batch, beside such a process): 1.46x
and 1.52x (pair medians, 12 of 12 pairs faster; the step's run-queue wait 86-128 ->
3-9 ms an epoch); on an otherwise idle machine 0.997x (the worker had the other core);
--parse single, where the worker is the slower side, 1.04-1.14x.

Lifetime: one worker per (session, prefetch op), serving one pass at a time (another
pass meanwhile runs in-process).  It ends at `Session.close()`, when its handle is
collected, at interpreter exit, and by itself when the parent's end of its stdin
closes (the parent died); it unlinks its segments (the multiprocessing resource
tracker does if it is killed).  Errors of a pass (a bad record, a failed parse) reach
`get_next` as the same OpError class, after the elements before them; the end of the
data is OutOfRangeError as in-process.
"""

from __future__ import annotations

import asyncio
import json
import mmap
import os
import subprocess
import sys
import threading
import weakref

import numpy as np

from asyncflow import errors
from asyncflow.data import shm_wire as w
from asyncflow.ops import dataset_paths
from asyncflow.ops import dataset_pipeline as pl

__all__ = ["prefetch_hook", "wait_for_workers", "worker_pids", "MODE", "STATS"]

MODE = os.environ.get("ASYNCFLOW_DATA_WORKER", "auto").lower()  # auto | always | 0
STATS = {"spawned": 0, "remote_passes": 0, "ahead_elements": 0, "ahead_dropped": 0}
# Whether a worker starts the next pass once one ends, before START (worker.py,
# "Running ahead"); read when a worker starts.
RUN_AHEAD = True
# Whether a worker keeps off the CPU that the parent's consuming thread runs on ("Where
# the worker runs" below); read when a worker starts.
AVOID_CPU = True
SLOTS = 16  # elements a worker may have ready (bounded memory: 16 batches)
_LIVE: weakref.WeakSet = weakref.WeakSet()  # handles whose worker may be running
_START_TIMEOUT_S = 120.0

_DATASET_OPS = {
    "TFRecordDataset",
    "ShuffleDataset",
    "ShuffleAndRepeatDataset",
    "BatchDatasetV2",
    "MapDataset",
    "ParallelMapDataset",
    "ParallelMapDatasetV2",
    "MapAndBatchDataset",
    "FilterDataset",
    "TakeDataset",
    "SkipDataset",
    "RepeatDataset",
}  # (not PrefetchDataset: of nested prefetches, the innermost that qualifies is served)
_FUNCTION_OPS = {
    "MapDataset",
    "ParallelMapDataset",
    "ParallelMapDatasetV2",
    "MapAndBatchDataset",
    "FilterDataset",
}
_PURE = _DATASET_OPS | {
    "Const", "Identity", "Cast", "Reshape", "Squeeze", "ExpandDims", "Transpose",
    "ParseExample", "ParseExampleV2", "ParseSingleExample", "DecodeRaw",
    "Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "FloorDiv", "Neg", "Abs", "Square",
    "Sqrt", "Rsqrt", "Exp", "Log", "Maximum", "Minimum", "Tanh", "Sigmoid", "OneHot",
    "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd",
    "LogicalOr", "LogicalNot", "Pack", "ConcatV2", "Shape", "Fill", "ZerosLike",
    "OnesLike", "ClipByValue", "Round", "Floor", "Ceil",
    "SelectV2",  # (shuffle_and_repeat's seed2, chosen in the graph)
}  # fmt: skip
_NUMERIC = {np.dtype(d).str for d in w.DTYPES}


def _attr(op, name):
    try:
        return op.get_attr(name)
    except (ValueError, KeyError, AttributeError):
        return None


def _names(v) -> list[str]:
    return [n.decode() if isinstance(n, bytes) else str(n) for n in (v or [])]


def _subgraph(op) -> list | None:
    """The ops (the dataset ops below `op` and their functions' bodies) a worker needs
    to build `op`'s input dataset, or None when one of them is not pure and CPU-bound."""
    g = op.graph
    if g._ops_by_name.get(op.name) is not op:  # (a remote task's partition op: detached,
        return None  # its pipeline is in no graph to send: distributed/graph_codec.py)
    root = op.inputs[0].op
    seen: dict = {}
    fn_inputs: set = set()
    stack = [root]
    has_source = False
    while stack:
        o = stack.pop()
        if o.name in seen:
            continue
        seen[o.name] = o
        if o.type not in _PURE and o.type != "Placeholder":  # (placeholders: checked below)
            return None
        if o.device and "CPU" not in o.device.upper():
            return None
        has_source |= o.type == "TFRecordDataset"
        if o.type in _FUNCTION_OPS:
            if _names(_attr(o, "f_captures")):
                return None
            ins = _names(_attr(o, "f_inputs"))
            fn_inputs.update(n.split(":")[0] for n in ins)
            stack.extend(g.get_tensor_by_name(n).op for n in _names(_attr(o, "f_outputs")))
            stack.extend(g.get_tensor_by_name(n).op for n in ins)
        stack.extend(t.op for t in o.inputs)
        stack.extend(o.control_inputs)
        apart = getattr(o, "_fused_after", None)
        if apart is not None:  # (the earlier map, as the GraphDef writes a fused map's)
            stack.append(apart[0])
    if not has_source:
        return None
    for o in seen.values():  # every placeholder is a function's argument
        if o.type == "Placeholder" and o.name not in fn_inputs:
            return None
    return list(seen.values())


def _graph_bytes(op, ops_needed) -> bytes:
    gd = op.graph.as_graph_def()
    by_name = {o.name: o for o in ops_needed}
    sub = type(gd)()
    for n in gd.node:
        if n.name in by_name:
            sub.node.add().CopyFrom(n)
            fused = getattr(by_name[n.name], "_fused_maps", ())
            apart = getattr(by_name[n.name], "_fused_after", None)
            if apart is not None and n.input[0].split(":")[0] == apart[0].name:
                fused = ()  # (written apart from the earlier map, as TF writes them)
            if fused:  # (the worker's map words an earlier map's error as that map's)
                parts = [",".join(sorted(map(_node_name, p))).encode() for p in fused]
                sub.node[-1].attr[w.FUSED_MAPS_ATTR].list.s.extend(parts)
    # The functions' bodies travel as the GraphDef's FunctionDefs (TF's form: as_graph_def
    # writes them there, and the worker's import instantiates them).
    sub.library.CopyFrom(gd.library)
    return sub.SerializeToString()


def _node_name(op_name: str) -> str:
    """An op's node name in its function's FunctionDef (dataset_functions' form)."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in op_name)


def _error(cls: str, message: str) -> errors.OpError:
    c = getattr(errors, cls, None)
    if not (isinstance(c, type) and issubclass(c, errors.OpError)) or c is errors.OpError:
        c = errors.UnknownError
    return c(None, None, message)


class _Handle:
    """The parent's end of one worker process."""

    def __init__(self, graph: bytes, dataset: str, slots: int):
        self.slots = slots
        self.ready = False
        self.broken = False
        self.busy = False
        self.pass_id = 0
        self.segs: list = [None] * slots  # the _Segment of each slot
        self.frees = bytearray()  # FREE commands not sent yet
        self._avoid = AVOID_CPU
        self._cpu_sent = w.NO_CPU  # the CPU the worker was last told to keep off
        self._free_batch = w.CMD.size * max(1, slots // 2)
        r, wfd = os.pipe()
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        env["ASYNCFLOW_DATA_WORKER"] = "0"  # no workers of workers
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "asyncflow.data.worker", str(wfd)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                pass_fds=(wfd,),
                env=env,
                start_new_session=True,  # a terminal's Ctrl-C is the parent's to handle
            )
        finally:
            os.close(wfd)
        STATS["spawned"] += 1
        _LIVE.add(self)
        self.msgs = w.FdReader(r)
        cfg = {"dataset": dataset, "slots": slots, "ahead": RUN_AHEAD}
        cfg = json.dumps(cfg).encode()
        head = w.CONFIG.pack(len(cfg), len(graph)) + cfg + graph
        stdin = self.proc.stdin

        def send_config():  # (on a thread: the worker reads it once it has imported)
            try:
                stdin.write(head)
                stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass

        threading.Thread(target=send_config, daemon=True, name="asyncflow-data-cfg").start()
        self._up = [False]  # whether it said HELO (may own segments)
        self._finalizer = weakref.finalize(self, _shutdown, self.proc, r, self.segs, self._up)

    # -- messages
    def _message(self):
        """The next whole message if buffered (non-blocking), else None."""
        head = self.msgs.take(w.MSG.size)
        if head is None:
            return None
        kind, slot, pass_id, n = w.MSG.unpack(head)
        if n > w.MAX_PAYLOAD:
            raise self._fail("oversized message from the input worker")
        payload = b""
        if n:
            payload = self.msgs.take(n)
            while payload is None:  # (the rest of a message written at once)
                if self.msgs.eof:
                    raise self._fail("the input worker exited")
                payload = self.msgs.take(n)
        self._note(kind, slot, payload)
        return kind, slot, pass_id, payload

    def _note(self, kind, slot, payload) -> None:
        if kind == b"HELO":
            self.ready = self._up[0] = True
        elif kind == b"SEGM":
            if slot >= self.slots:
                raise self._fail("bad slot from the input worker")
            try:
                seg = _Segment(payload.decode("ascii"))
            except (OSError, ValueError, UnicodeDecodeError) as e:
                raise self._fail(f"cannot map its segment: {e}") from None
            old, self.segs[slot] = self.segs[slot], seg
            if old is not None:
                old.close()

    async def _next(self):
        while True:
            m = self._message()
            if m is not None:
                return m
            if self.msgs.eof:
                raise self._fail("the input worker exited")
            # About to wait: the FREEs held back (the worker may be waiting for them),
            # and the worker may run on this thread's CPU while it sleeps.
            if self.frees or self._cpu_sent != w.NO_CPU:
                self._command(None, cpu=w.NO_CPU)
            await self._readable()

    async def _readable(self) -> None:
        await self.msgs.readable()

    def poll(self) -> bool:
        """Read what has arrived (without waiting); whether the worker is ready."""
        try:
            while not self.ready and self._message() is not None:
                pass
        except errors.OpError:
            return False
        if self.msgs.eof and not self.ready:
            self._fail("the input worker exited")
        return self.ready and not self.broken

    async def wait_ready(self) -> bool:
        deadline = asyncio.get_running_loop().time() + _START_TIMEOUT_S
        while not self.poll():
            if self.broken:
                return False
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                self._fail("the input worker did not start")
                return False
            try:
                await asyncio.wait_for(self._readable(), left)
            except TimeoutError:
                pass
        return True

    def _fail(self, why: str) -> errors.OpError:
        self.broken = True
        self.close()
        return errors.UnavailableError(None, None, f"tf.data input worker: {why}")

    def _command(self, cmd: int | None, arg: int = 0, cpu: int | None = None) -> None:
        """Send the FREEs held back, then `cmd` (if any), in one write; first, where it
        changed, the CPU for the worker to keep off: `cpu`, by default the one this
        thread runs on ("Where the worker runs")."""
        data = bytes(self.frees) + (b"" if cmd is None else w.CMD.pack(cmd, arg))
        self.frees.clear()
        if self._avoid:
            if cpu is None:
                cpu = _cpu_now()
            if cpu != self._cpu_sent:
                data = w.CMD.pack(w.AVOID, cpu) + data
                self._cpu_sent = cpu
        try:
            fd = self.proc.stdin.fileno()
            while data:
                data = data[os.write(fd, data) :]
        except (BrokenPipeError, ValueError, OSError):
            raise self._fail("the input worker exited") from None

    # -- one pass
    async def elements(self):
        """One pass in the worker: its elements, then StopAsyncIteration (or its error)."""
        self.busy = True
        self.pass_id += 1
        pid = self.pass_id
        done = False
        STATS["remote_passes"] += 1
        try:
            self.frees.clear()  # (those of an earlier pass: START frees every slot)
            self._command(w.START, pid)
            while True:
                kind, slot, got, payload = await self._next()
                if got != pid or kind in (b"HELO", b"SEGM"):
                    continue  # a message of an abandoned pass, or bookkeeping
                if kind == b"ELEM":
                    seg = self.segs[slot] if slot < self.slots else None
                    if seg is None:
                        raise self._fail("element in an unknown segment")
                    try:
                        elem = w.read(seg.buf, seg.size)
                    except ValueError as e:
                        raise self._fail(str(e)) from None
                    # Slots go back a few at a time (one wake-up of the worker for
                    # several), and all of them before this process waits.
                    self.frees += w.CMD.pack(w.FREE, slot)
                    if len(self.frees) >= self._free_batch:
                        self._command(None)
                    yield elem
                elif kind == b"ENDP":
                    done = True
                    if len(payload) == w.ENDP.size:
                        ahead, dropped = w.ENDP.unpack(payload)
                        STATS["ahead_elements"] += ahead
                        STATS["ahead_dropped"] += dropped
                    # Every slot back now: the worker may fill them with the next pass.
                    if self.frees:
                        self._command(None)
                    return
                elif kind == b"ERRO":
                    done = True
                    body = json.loads(payload)
                    raise _error(str(body.get("error")), str(body.get("message")))
        finally:
            if not done and not self.broken:
                try:
                    self._command(w.STOP)
                except errors.OpError:
                    pass
            self.busy = False

    def close(self) -> None:
        self.ready = False
        self.broken = True
        _LIVE.discard(self)
        self._finalizer()


def _cpu_getter():
    """libc's sched_getcpu (the CPU the calling thread runs on; a vDSO call on Linux),
    or None where there is none."""
    try:
        import ctypes

        f = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError, ImportError):
        return None
    f.restype, f.argtypes = ctypes.c_int, []
    return f


_SCHED_GETCPU = _cpu_getter() if hasattr(os, "sched_setaffinity") else None


def _cpu_now() -> int:
    """The CPU this thread is on (w.NO_CPU where unknown)."""
    if _SCHED_GETCPU is None:
        return w.NO_CPU
    cpu = _SCHED_GETCPU()
    return cpu if 0 <= cpu < w.NO_CPU else w.NO_CPU


def wait_for_workers(timeout_s: float = 60.0) -> bool:
    """Block until every input worker started so far is ready to serve passes (for a
    benchmark's warm-up; call it between steps, not from a running step); whether they
    all are."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        pending = [h for h in list(_LIVE) if not h.poll() and not h.broken]
        if not pending:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def worker_pids() -> list[int]:
    """The process ids of this process's running input workers."""
    return sorted(h.proc.pid for h in list(_LIVE) if h.proc.poll() is None)


class _Segment:
    """A worker's shared-memory segment mapped read-only here: the worker created it
    (multiprocessing.shared_memory) and unlinks it.  Mapped through its POSIX name
    where the system shows those as files (Linux's /dev/shm), so this process starts
    no resource tracker of its own for segments it does not own."""

    def __init__(self, name: str):
        if not name.startswith("afds_") or "/" in name or len(name) > 200:
            raise ValueError(f"unexpected segment name {name!r}")
        path = os.path.join("/dev/shm", name)
        if os.path.isdir("/dev/shm"):
            fd = os.open(path, os.O_RDONLY)
            try:
                self.size = os.fstat(fd).st_size
                self.buf = mmap.mmap(fd, self.size, prot=mmap.PROT_READ)
            finally:
                os.close(fd)
            self._shm = None
        else:  # elsewhere: the stdlib's attach, and no tracking of what is not ours
            from multiprocessing import resource_tracker, shared_memory

            self._shm = shared_memory.SharedMemory(name=name)
            resource_tracker.unregister(self._shm._name, "shared_memory")
            self.buf, self.size = self._shm.buf, self._shm.size

    def close(self) -> None:
        try:
            if self._shm is not None:
                self._shm.close()
            else:
                self.buf.close()
        except (BufferError, OSError):
            pass


def _close_quietly(seg) -> None:
    seg.close()


def _shutdown(proc, msg_fd, segs, up) -> None:
    """End the worker (its stdin closed: it stops at the EOF, unlinking its segments;
    killed if it lingers, or at once while it is still starting: it has none yet),
    unmap its segments here."""
    try:
        try:
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        if not up[0]:
            proc.kill()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    finally:
        for i, seg in enumerate(segs):
            if seg is not None:
                _close_quietly(seg)
                segs[i] = None
        try:
            os.close(msg_fd)
        except OSError:
            pass


class _Site:
    """Per (session, prefetch op): whether it qualifies, and its worker."""

    def __init__(self, op, slots: int):
        self.op = op
        self.slots = slots
        self.needed = _subgraph(op)
        if self.needed is not None:
            types = _attr(op, "output_types") or []
            if not types or any(
                getattr(t, "as_numpy_dtype", None) is None
                or np.dtype(t.as_numpy_dtype).str not in _NUMERIC
                for t in types
            ):
                self.needed = None
        self.handle: _Handle | None = None
        self.passes = 0

    def get(self, session, spawn: bool) -> _Handle | None:
        """The worker (started now if `spawn`), or None."""
        if self.needed is None:
            return None
        h = self.handle
        if h is None:
            if not spawn:
                return None
            try:
                h = self.handle = _Handle(
                    _graph_bytes(self.op, self.needed), self.op.inputs[0].name, self.slots
                )
            except OSError:  # no interpreter to start: in-process from now on
                self.needed = None
                return None
            hooks = getattr(session, "_close_hooks", None)
            if hooks is not None:
                hooks.append(h.close)
        return None if h.broken else h


class RemotePrefetch(pl.DatasetValue):
    """`prefetch` whose passes run in the input worker once it is ready."""

    def __init__(self, local: pl.Prefetch, site: _Site):
        self.local, self.site = local, site

    @property
    def input(self):
        """The prefetch's input (the stage an error's path names beneath it)."""
        return self.local.input

    async def iterate(self, env):
        site = self.site
        site.passes += 1
        # auto: a pipeline passed over once (an evaluation, a one-shot iterator) never
        # starts a worker; the second pass starts it, and it serves once it is ready.
        h = site.get(env.session, MODE == "always" or site.passes >= 2)
        remote = False
        if h is not None and not h.busy:
            remote = h.poll() or (MODE == "always" and await h.wait_ready())
        remote = remote and not h.busy
        source = h.elements() if remote else self.local.iterate(env)
        try:
            async for elem in source:
                yield elem
        except errors.OpError as e:
            if not remote or w.PATH_ABOVE not in e.message:
                raise
            # (the worker named the path beneath this prefetch: this pass's own above)
            above = dataset_paths.stage_path(env, self) or "Iterator::Root::Prefetch"
            raise type(e)(e.node_def, e.op, e.message.replace(w.PATH_ABOVE, above, 1)) from None
        finally:
            await source.aclose()


def prefetch_hook(ctx, local: pl.Prefetch):
    """dataset_ops' PrefetchDataset kernel: the worker form of `local` where it applies."""
    if MODE not in ("auto", "always"):
        return local
    st = ctx.kernel_state
    site = st.get("remote_site")
    if site is None:
        # More slots than prefetch's buffer: the worker runs ahead in bursts instead
        # of waking up for every element the step takes.
        site = st["remote_site"] = _Site(ctx.op, SLOTS)
    if site.needed is None:
        return local
    return RemotePrefetch(local, site)
