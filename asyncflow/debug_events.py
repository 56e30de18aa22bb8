"""tfdbg2 in graph mode: `tf.debugging.experimental.enable_dump_debug_info` and
`disable_dump_debug_info`, and the DebugEvent files they write.

While dumping is on, every op `apply_op` makes (through `graph.OP_CALLBACKS`) is
recorded in the `.graphs` file (a GraphOpCreation: type, name, inputs, one id per
output, and where it was made: ids of `.stack_frames` entries, whose files' lines go to
`.source_files` once each).  Each output the mode covers is then instrumented as TF's
graph mode does: a DebugIdentityV2 reads it (through a DebugNumericSummaryV2 for the
health and SHAPE modes, an empty float32 constant for NO_TENSOR, the value itself for
FULL_TENSOR), and ops made later, and session fetches, read an Identity
("tfdbg_identity_<n>") that waits for it (FULL_TENSOR: the DebugIdentityV2's output
itself) through `Graph._checked_outputs`.  A placeholder's output is not replaced (it
must stay feedable): its consumers wait for its debug op instead.  Ref outputs (a
VariableV2's) are recorded, never instrumented: a variable's users need the ref.

When a step runs a DebugIdentityV2, its kernel hands the value to the writer of its
dump root as a GraphExecutionTrace.  The traces stay in memory (the last
`circular_buffer_size` of them; all of them when that is 0 or less) until
`disable_dump_debug_info`, the writer's `FlushExecutionFiles`/`Close`, or the process
exit writes them: kernels never write files on the event loop.

Each file holds DebugEvent protos in TFRecord framing, named
`<dump_root>/tfdbg_events.<seconds>.<host>.<kind>` as TF's `DebugDataReader` expects.

Invariant: at most one writer per dump root per process; every event is framed and
written under the writer's lock, so files never hold half a record.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import os
import re
import socket
import threading
import time
import traceback
import uuid

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.framework_extras import VERSION
from asyncflow.graph_io import tensor_content_proto
from asyncflow.ops import array_ops, debug_ops
from asyncflow.protos.debug_event_pb2 import (
    CodeLocation,
    DebugEvent,
    DebuggedGraph,
    DebugMetadata,
    GraphExecutionTrace,
    GraphOpCreation,
    SourceFile,
    StackFrameWithId,
    TensorDebugMode,
)
from asyncflow.protos.graph_debug_info_pb2 import GraphDebugInfo
from asyncflow.python_io import _frame

__all__ = ["disable_dump_debug_info", "enable_dump_debug_info"]

_KINDS = ("metadata", "source_files", "stack_frames", "graphs", "execution")
_TRACES = "graph_execution_traces"
# Op types TF records but never instruments (control flow and plain forwarding).
_SKIP_OPS = frozenset(
    "Enter Exit Identity If LoopCond Merge NextIteration StatelessIf "
    "StatefulPartitionedCall Switch While RemoteCall".split()
)
_HEALTH = frozenset(
    [TensorDebugMode.CURT_HEALTH, TensorDebugMode.CONCISE_HEALTH, TensorDebugMode.FULL_HEALTH]
)


class DebugEventsWriter:
    """The six files of one dump root (TF's DebugEventsWriter, same methods): the
    non-execution events are written as they come, graph execution traces kept in a
    ring of `circular_buffer_size` (unbounded when 0 or less) until flushed."""

    def __init__(self, dump_root: str, tfdbg_run_id: str, circular_buffer_size: int = 1000):
        os.makedirs(dump_root, exist_ok=True)
        self.dump_root = dump_root
        self.tfdbg_run_id = tfdbg_run_id
        prefix = os.path.join(dump_root, f"tfdbg_events.{int(time.time())}.{socket.gethostname()}")
        self._lock = threading.Lock()
        self._files = {k: open(f"{prefix}.{k}", "ab") for k in (*_KINDS, _TRACES)}  # noqa: SIM115
        size = circular_buffer_size if circular_buffer_size > 0 else None
        self._traces: collections.deque = collections.deque(maxlen=size)
        metadata = DebugMetadata(
            tensorflow_version=VERSION, file_version="debug.Event:1", tfdbg_run_id=tfdbg_run_id
        )
        self._write("metadata", DebugEvent(wall_time=time.time(), debug_metadata=metadata))
        self.FlushNonExecutionFiles()

    def _write(self, kind: str, event: DebugEvent) -> None:
        data = _frame(event.SerializeToString())
        with self._lock:
            f = self._files.get(kind)
            if f is not None:
                f.write(data)

    def WriteSourceFile(self, source_file: SourceFile) -> None:  # noqa: N802 - TF's names
        self._write("source_files", DebugEvent(wall_time=time.time(), source_file=source_file))

    def WriteStackFrameWithId(self, frame: StackFrameWithId) -> None:  # noqa: N802
        self._write("stack_frames", DebugEvent(wall_time=time.time(), stack_frame_with_id=frame))

    def WriteGraphOpCreation(self, creation: GraphOpCreation) -> None:  # noqa: N802
        self._write("graphs", DebugEvent(wall_time=time.time(), graph_op_creation=creation))

    def WriteDebuggedGraph(self, graph: DebuggedGraph) -> None:  # noqa: N802
        self._write("graphs", DebugEvent(wall_time=time.time(), debugged_graph=graph))

    def WriteGraphExecutionTrace(self, trace: GraphExecutionTrace) -> None:  # noqa: N802
        """Keep `trace` for the next FlushExecutionFiles (no file I/O: kernels call it)."""
        event = DebugEvent(wall_time=time.time(), graph_execution_trace=trace)
        with self._lock:
            self._traces.append(event)

    def FlushNonExecutionFiles(self) -> None:  # noqa: N802
        with self._lock:
            for kind in _KINDS:
                f = self._files.get(kind)
                if f is not None:
                    f.flush()

    def FlushExecutionFiles(self) -> None:  # noqa: N802
        with self._lock:
            f = self._files.get(_TRACES)
            if f is None:
                return
            while self._traces:
                f.write(_frame(self._traces.popleft().SerializeToString()))
            f.flush()

    def Close(self) -> None:  # noqa: N802
        """Flush everything and close the files (later events are dropped)."""
        self.FlushNonExecutionFiles()
        self.FlushExecutionFiles()
        with self._lock:
            files, self._files = self._files, {}
        for f in files.values():
            f.close()
        _WRITERS.pop(self.dump_root, None)


_WRITERS: dict[str, DebugEventsWriter] = {}
_WRITERS_LOCK = threading.Lock()


def _writer_for(dump_root: str, run_id: str = "", circular_buffer_size: int = 1000):
    with _WRITERS_LOCK:
        w = _WRITERS.get(dump_root)
        if w is None:
            w = _WRITERS[dump_root] = DebugEventsWriter(
                dump_root, run_id or _run_id(), circular_buffer_size
            )
        return w


def _close_writers() -> None:
    for writer in list(_WRITERS.values()):
        writer.Close()


atexit.register(_close_writers)  # (a writer's traces reach its file by the exit at the latest)


def _run_id() -> str:
    return str(uuid.uuid4())[:8]


async def _trace_kernel(ctx, value) -> None:
    """DebugIdentityV2's dump: one GraphExecutionTrace per file:// root it names."""
    attrs = ctx.attrs
    for url in attrs["debug_urls"]:
        url = url.decode() if isinstance(url, bytes) else str(url)
        if not url.startswith("file://"):
            continue
        root = url[len("file://") :]
        writer = _WRITERS.get(root)
        if writer is None:  # (dumping was turned off since: a fresh writer, made off the loop)
            writer = await asyncio.to_thread(
                _writer_for, root, attrs["tfdbg_run_id"], int(attrs["circular_buffer_size"])
            )
        trace = GraphExecutionTrace(
            tfdbg_context_id=attrs["tfdbg_context_id"],
            op_name=attrs["op_name"],
            output_slot=max(int(attrs["output_slot"]), 0),
            tensor_debug_mode=max(int(attrs["tensor_debug_mode"]), 0),
            device_name=ctx.device.name,
        )
        tensor_content_proto(value, trace.tensor_proto)
        writer.WriteGraphExecutionTrace(trace)


debug_ops._V2_WRITER[0] = _trace_kernel


# -- the op callback -----------------------------------------------------------------------


class _Dumping:
    """What enable_dump_debug_info turned on: the mode, filters, and ids handed out."""

    def __init__(self, dump_root, mode, circular_buffer_size, op_regex, tensor_dtypes):
        self.dump_root = dump_root
        self.mode = mode
        self.circular_buffer_size = circular_buffer_size
        self.op_regex = op_regex
        self.tensor_dtypes = tensor_dtypes
        self.run_id = _run_id()
        self.host = socket.gethostname()
        self.graph_ids: dict = {}
        self.tensor_counter = 0
        self.frame_ids: dict = {}
        self.source_files: list[str] = []
        self.placeholder_debug: dict = {}
        self.aliases: dict[str, str] = {}

    @property
    def writer(self) -> DebugEventsWriter:
        return _writer_for(self.dump_root, self.run_id, self.circular_buffer_size)

    def __call__(self, op) -> None:
        # (apply_op calls no callback for the ops a callback makes: the debug ops.)
        self._record(op)

    def _graph_id(self, graph) -> str:
        gid = self.graph_ids.get(graph)
        if gid is None:
            gid = self.graph_ids[graph] = str(uuid.uuid4())
            self.writer.WriteDebuggedGraph(DebuggedGraph(graph_id=gid))
        return gid

    def _record(self, op) -> None:
        graph = op.graph
        gid = self._graph_id(graph)
        ids = list(range(self.tensor_counter + 1, self.tensor_counter + 1 + len(op.outputs)))
        self.tensor_counter += len(ids)
        for t in op.inputs:
            waited = self.placeholder_debug.get(t)
            if waited is not None:
                op._add_control_input(waited)
        self.writer.WriteGraphOpCreation(
            GraphOpCreation(
                op_type=op.type,
                op_name=op.name,
                graph_id=gid,
                input_names=[self.aliases.get(t.name, t.name) for t in op.inputs],
                num_outputs=len(op.outputs),
                output_tensor_ids=ids,
                code_location=self._code_location(),
            )
        )
        if op.outputs and op.type not in _SKIP_OPS:
            # TF makes the debug ops in the scope the op's builder opened ("b/..."); a
            # constant opens none, so its debug ops are named where it is made.
            scope = (
                contextlib.nullcontext() if op.type == "Const" else graph.name_scope(op.name + "/")
            )
            with graph.as_default(), scope:
                self._instrument(op, gid, ids)

    def _code_location(self) -> CodeLocation:
        frames = traceback.extract_stack()[:-4]  # (not the callback's own frames)
        out = []
        for f in frames:
            path = os.path.abspath(f.filename)
            key = (path, f.lineno, f.name)
            fid = self.frame_ids.get(key)
            if fid is None:
                fid = self.frame_ids[key] = str(uuid.uuid4())
                flc = GraphDebugInfo.FileLineCol(
                    file_index=self._file_index(path), line=f.lineno, func=f.name
                )
                self.writer.WriteStackFrameWithId(StackFrameWithId(id=fid, file_line_col=flc))
            out.append(fid)
        return CodeLocation(host_name=self.host, stack_frame_ids=out)

    def _file_index(self, path: str) -> int:
        if path not in self.source_files:
            lines = []
            if path.endswith(".py"):
                try:
                    with open(path, encoding="utf-8", errors="replace") as f:
                        lines = f.read().splitlines()
                except OSError:
                    lines = []
            sf = SourceFile(file_path=path, host_name=self.host, lines=lines)
            self.writer.WriteSourceFile(sf)
            self.source_files.append(path)
        return self.source_files.index(path)

    def _wanted(self, op, t) -> bool:
        if t.dtype._is_ref_dtype or t.dtype in (dtypes.resource, dtypes.variant):
            return False
        if self.op_regex is not None and not re.match(self.op_regex, op.type):
            return False
        if self.tensor_dtypes is not None:
            if callable(self.tensor_dtypes):
                return bool(self.tensor_dtypes(t.dtype))
            return t.dtype in self.tensor_dtypes
        return True

    def _instrument(self, op, gid, ids) -> None:
        mode = self.mode
        for slot, t in enumerate(op.outputs):
            if not self._wanted(op, t):
                continue
            dt = t.dtype
            kw = {
                "tfdbg_context_id": gid,
                "op_name": op.name,
                "output_slot": slot,
                "tensor_debug_mode": mode,
                "debug_urls": [f"file://{self.dump_root}"],
                "circular_buffer_size": self.circular_buffer_size,
                "tfdbg_run_id": self.run_id,
            }
            name = f"DebugIdentityV2_{self.tensor_counter}"
            if mode == TensorDebugMode.NO_TENSOR:
                empty = array_ops.constant([], dtypes.float32)
                debug = ops.apply_op("DebugIdentityV2", [empty], kw, name=name).outputs[0]
            elif mode in _HEALTH or mode == TensorDebugMode.SHAPE:
                if not (dt.is_floating or (mode == TensorDebugMode.SHAPE and (
                        dt.is_integer or dt == dtypes.bool))):  # fmt: skip
                    continue
                summary = ops.apply_op(
                    "DebugNumericSummaryV2",
                    [t],
                    {
                        "tensor_debug_mode": mode,
                        "tensor_id": ids[slot],
                        "output_dtype": dtypes.float64,
                    },  # fmt: skip
                ).outputs[0]
                debug = ops.apply_op("DebugIdentityV2", [summary], kw, name=name).outputs[0]
            elif mode == TensorDebugMode.FULL_TENSOR:
                debug = ops.apply_op("DebugIdentityV2", [t], kw, name=name).outputs[0]
            else:  # (UNSPECIFIED, FULL_NUMERICS, REDUCE_INF_NAN_THREE_SLOTS: as TF)
                raise NotImplementedError(
                    f"Symbolic tensor instrumentation is not implemented for debug mode {mode}"
                )
            self._replace(op, t, debug)

    def _replace(self, op, t, debug) -> None:
        graph = op.graph
        if op.type in ("Placeholder", "PlaceholderWithDefault"):
            self.placeholder_debug[t] = debug.op
            return
        if self.mode == TensorDebugMode.FULL_TENSOR and op.type != "Const":
            out = debug
        else:
            out = array_ops.identity(t, name=f"tfdbg_identity_{self.tensor_counter}")
            out.op._add_control_input(debug.op)
        self.aliases[out.name] = t.name
        if graph._checked_outputs is None:
            graph._checked_outputs = {}
        graph._checked_outputs[t] = out


_STATE: dict = {}
_SUPPORTED = frozenset([*_HEALTH, TensorDebugMode.NO_TENSOR, TensorDebugMode.SHAPE,
                        TensorDebugMode.FULL_TENSOR])  # fmt: skip
_MODES = {
    name: TensorDebugMode.Value(name)
    for name in (
        "NO_TENSOR",
        "CURT_HEALTH",
        "CONCISE_HEALTH",
        "FULL_HEALTH",
        "SHAPE",
        "FULL_TENSOR",
    )  # fmt: skip
}


def enable_dump_debug_info(
    dump_root,
    tensor_debug_mode="NO_TENSOR",
    circular_buffer_size=1000,
    op_regex=None,
    tensor_dtypes=None,
) -> DebugEventsWriter:
    """Start tfdbg2 dumping to `dump_root` (see the module note): ops made from now on
    are recorded and instrumented per `tensor_debug_mode`; `op_regex` (matched against
    op types) and `tensor_dtypes` (a list of dtypes, or a predicate on a DType) narrow
    which outputs are instrumented.  Returns the dump root's DebugEventsWriter.

    Raises:
      ValueError: a `tensor_debug_mode` that is no TensorDebugMode name (case
        matters), a `tensor_dtypes` that is neither a list, a tuple nor a callable, or
        dumping already on with another mode or circular_buffer_size.
      NotImplementedError: UNSPECIFIED, FULL_NUMERICS or REDUCE_INF_NAN_THREE_SLOTS.
    """
    names = list(TensorDebugMode.keys())
    if isinstance(tensor_debug_mode, str) and tensor_debug_mode in names:
        mode = TensorDebugMode.Value(tensor_debug_mode)
    else:
        raise ValueError(
            f"Invalid value in tensor_debug_mode ('{tensor_debug_mode}'). Valid options "
            f"are: {names}"
        )
    if mode not in _SUPPORTED:
        raise NotImplementedError(
            f"tfdbg dumping: support for tensor debug mode {tensor_debug_mode} is not "
            "implemented yet"
        )
    if tensor_dtypes is not None and not callable(tensor_dtypes):
        if not isinstance(tensor_dtypes, list | tuple):
            raise ValueError(
                "If specified, tensor_dtypes is expected to be a list, a tuple, or a "
                "callable that takes a DType argument and returns a boolean, but "
                f"received {tensor_dtypes}"
            )
        tensor_dtypes = [dtypes.as_dtype(d) for d in tensor_dtypes]
    dumping = _STATE.get("dumping")
    if dumping is not None:
        if dumping.circular_buffer_size != circular_buffer_size:
            raise ValueError(
                "There is already a dumping callback configured with a different "
                f"circular-buffer size ({dumping.circular_buffer_size}). Therefore the "
                f"newly request circular-buffer size ({circular_buffer_size}) will not be "
                "honored."
            )
        if dumping.mode != mode:
            raise ValueError(
                f"There is already a dumping callback configured for dump root "
                f"{dumping.dump_root} with a different tensor-debug mode "
                f"({TensorDebugMode.Name(dumping.mode)}). Therefore the newly request "
                f"tensor-debug mode ({tensor_debug_mode}) size will not be honored."
            )
        dumping.dump_root = os.fspath(dump_root)
    else:
        dumping = _STATE["dumping"] = _Dumping(
            os.fspath(dump_root), mode, circular_buffer_size, op_regex, tensor_dtypes
        )
        ops.OP_CALLBACKS.append(dumping)
    atexit.register(disable_dump_debug_info)
    return dumping.writer


def disable_dump_debug_info() -> None:
    """Stop dumping: ops made from now on are not recorded, and the dump root's files
    are written out and closed (ops already instrumented keep their debug ops; their
    later traces go to a fresh writer).  Does nothing when dumping is off."""
    dumping = _STATE.pop("dumping", None)
    if dumping is None:
        return
    if dumping in ops.OP_CALLBACKS:
        ops.OP_CALLBACKS.remove(dumping)
    writer = _WRITERS.get(dumping.dump_root)
    if writer is not None:
        writer.Close()
