"""`tf.profiler.write_op_log`: the OpLogProto tfprof reads beside a graph, written as
TF writes it (the `tfprof_log` file of a log directory).

Its entries are TF's: one per op with a float-operation count (the counts of
asyncflow/tfprof.py), in graph order, then the trainable variables with the
`_trainable_variables` type; the entries of a given `op_log` come first, and a logged
op already there gains the missing types and, when it has none, the count.  With
`add_trace`, each op's entry carries the Python line that built it as a CodeDef trace:
asyncflow records the user's innermost line, so a trace has that one frame (TF's has
every frame down to its own internals); the frame's function is found from the file's
source.  `id_to_string` maps the ids the traces use, 0 being "none" as in TF.
"""

from __future__ import annotations

import os

from asyncflow.protos.tfprof_log_pb2 import OpLogProto
from asyncflow.tfprof import _float_ops, _function_at

__all__ = ["OpLogProto", "op_log_of", "write_op_log"]


class _Ids:
    def __init__(self, proto):
        self._proto = proto
        self._ids = {"none": 0}
        proto.id_to_string[0] = "none"

    def __call__(self, text: str) -> int:
        if text not in self._ids:
            self._ids[text] = len(self._ids)
            self._proto.id_to_string[self._ids[text]] = text
        return self._ids[text]


def _add_trace(entry, op, ids) -> None:
    where = op.traceback or ""
    path, _, line = where.rpartition(":")
    if not path or not line.isdigit():
        return
    trace = entry.code_def.traces.add()
    trace.file_id = ids(path)
    trace.lineno = int(line)
    trace.function_id = ids(_function_at(path, int(line)))
    trace.func_start_line = -1  # (TF leaves the function's first line unknown too)


def op_log_of(graph, op_log=None, run_meta=None, add_trace=True) -> OpLogProto:
    """The OpLogProto `write_op_log` writes for `graph` (merged into a copy of `op_log`).

    `run_meta` is accepted as TF's is; asyncflow's graph shapes are already those the
    step ran with for the fully defined ones, so it adds nothing.
    """
    from asyncflow.graph import GraphKeys

    del run_meta
    out = OpLogProto()
    if op_log is not None:
        out.CopyFrom(op_log)
    entries = {e.name: e for e in out.log_entries}
    ids = _Ids(out)
    for key, value in list(out.id_to_string.items()):
        ids._ids.setdefault(value, key)

    def entry_for(name):
        if name not in entries:
            entries[name] = out.log_entries.add(name=name)
        return entries[name]

    logged = []
    for op in graph.get_operations():
        flops = _float_ops(op)
        if flops or add_trace:
            logged.append((op, flops))
    for op, flops in logged:
        entry = entry_for(op.name)
        if flops and not entry.float_ops:
            entry.float_ops = flops
        if add_trace and not entry.HasField("code_def"):
            _add_trace(entry, op, ids)
    for v in graph.get_collection(GraphKeys.TRAINABLE_VARIABLES):
        entry = entry_for(v.op.name)
        if "_trainable_variables" not in entry.types:
            entry.types.append("_trainable_variables")
    return out


def write_op_log(graph, log_dir, op_log=None, run_meta=None, add_trace=True) -> None:
    """TF1's `tf.profiler.write_op_log`: `log_dir`/tfprof_log, an OpLogProto.

    Raises:
      NotFoundError: `log_dir` does not exist (TF does not create it).
    """
    from asyncflow import errors

    proto = op_log_of(graph, op_log, run_meta, add_trace)
    path = os.path.join(log_dir, "tfprof_log")
    try:
        with open(path, "wb") as f:
            f.write(proto.SerializeToString())
    except FileNotFoundError as exc:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from exc
