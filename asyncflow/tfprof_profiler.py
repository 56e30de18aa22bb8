"""TF1's `tf.profiler.Profiler` and `tf.profiler.advise` over asyncflow's tfprof views.

A Profiler holds a graph, an optional OpLogProto and the traced steps added to it
(`add_step(step, run_meta)`, RunMetadata from `RunOptions(trace_level=FULL_TRACE)`);
its profile_* methods are the views of asyncflow/tfprof.py, reading the step the
options' `step` names, or with -1 (the default) each node's average over the steps it
ran in, as TF's.

`advise` runs TF's checkers and returns an AdviceProto (checker name -> reports),
printing each checker's name and reports.  ExpensiveOperationChecker reports the three
op types that took longest (own cpu, accelerator and total time, and the share of all
time) and the three top-level name scopes whose subtrees took longest (their own
times), as TF 2.21 words them; TF's third report, from the code view's Python call
stacks, is not made (asyncflow records one user line per op, not the stack).
AcceleratorUtilizationChecker and OperationChecker look at accelerator streams and
ops placed on accelerators: asyncflow's CPU traces give them nothing to report, as
TF's CPU traces give TF's; their accelerator findings are not built.  JobChecker,
named in ALL_ADVICE, is not a checker of TF's open-source build and reports nothing
there, so it is left out of the result as TF leaves it out.
"""

from __future__ import annotations

import copy
import re
import sys

from asyncflow import errors
from asyncflow.protos.tfprof_log_pb2 import ProfileProto
from asyncflow.protos.tfprof_output_pb2 import AdviceProto
from asyncflow.tfprof import (
    _DEFAULTS,
    _float_ops,
    _fmt_time,
    _function_at,
    _op_tree,
    _scope_tree,
    _trainable,
    _types,
    profile_graph,
)

__all__ = ["ALL_ADVICE", "AdviceProto", "ProfileProto", "Profiler", "advise", "profile_proto"]

ALL_ADVICE = {
    "ExpensiveOperationChecker": {},
    "AcceleratorUtilizationChecker": {},
    "JobChecker": {},  # (not a checker of TF's open-source build)
    "OperationChecker": {},
}
_BUILT = ("AcceleratorUtilizationChecker", "ExpensiveOperationChecker", "OperationChecker")
_DEFAULT_ADVISE_OPTIONS = 0


class Profiler:
    """TF1's `tf.profiler.Profiler(graph=None, op_log=None)`."""

    def __init__(self, graph=None, op_log=None):
        from asyncflow import graph as ops

        self._graph = graph if graph is not None else ops.get_default_graph()
        self._op_log = op_log
        self._steps: dict[int, object] = {}

    def add_step(self, step, run_meta) -> None:
        """Adds the traced step `run_meta` as step number `step` (replacing one there).

        Raises:
          InvalidArgumentError: `run_meta` holds no trace (TF aborts the process).
        """
        stats = getattr(run_meta, "step_stats", None)
        if stats is None or not stats.dev_stats:
            raise errors.InvalidArgumentError(
                None, None, "Profiler.add_step: run_meta has no step_stats (run the step "
                "with RunOptions(trace_level=FULL_TRACE))"
            )  # fmt: skip
        self._steps[int(step)] = run_meta

    def _run_meta(self, options):
        step = int(options.get("step", -1))
        if step < 0:
            return [self._steps[k] for k in sorted(self._steps)] or None
        return self._steps.get(step)

    def _view(self, cmd, options):
        options = {**_DEFAULTS, **(options or {})}
        return profile_graph(self._graph, self._run_meta(options), cmd, options, self._op_log)

    def profile_name_scope(self, options):
        """The scope view (GraphNodeProto) under `options`."""
        return self._view("scope", options)

    def profile_operations(self, options):
        """The op view (MultiGraphNodeProto) under `options`."""
        return self._view("op", options)

    def profile_graph(self, options):
        """The graph view (GraphNodeProto) under `options`: each op under the first op
        that reads it (asyncflow/tfprof.py, `_graph_tree`)."""
        return self._view("graph", options)

    def profile_python(self, options):
        """The code view (MultiGraphNodeProto) under `options`: one level, the user's
        lines (asyncflow/tfprof.py, `_code_tree`)."""
        return self._view("code", options)

    def advise(self, options):
        """Runs the checkers named in `options` over the added steps; an AdviceProto."""
        return _advise(self._graph, self._run_meta({"step": -1}), options, self._op_log)

    def serialize_to_string(self) -> bytes:
        """The profile as TF's ProfileProto bytes: the graph's nodes (attrs, inputs,
        shapes, float ops, op types, the Python line that built each) and, per added
        step, each node's execution (device, times, output memory)."""
        return profile_proto(self._graph, self._steps, self._op_log).SerializeToString()


_DEVICE_TYPE = re.compile(r"(device:)([A-Za-z_]+)(:\d+)$")


def _canonical_device(name: str) -> str:
    """tfprof's device name: the device type in lower case ("/...device:cpu:0")."""
    return _DEVICE_TYPE.sub(lambda m: m.group(1) + m.group(2).lower() + m.group(3), name)


def _input_name(text: str) -> tuple[str, int]:
    name, _, index = text.partition(":")
    return name, int(index or 0)


def profile_proto(graph, steps: dict, op_log=None) -> ProfileProto:
    """The ProfileProto of `graph` and its traced `steps` (step -> RunMetadata), as
    TF 2.21's Profiler serialises: nodes by id in graph order (nodes a step ran that
    the graph lacks after them), ids into `id_to_string` for the Python lines (0:
    "none"), execution times and output memory per step."""
    out = ProfileProto()
    strings: dict[str, int] = {"none": 0}

    def string_id(text: str) -> int:
        return strings.setdefault(text, len(strings))

    op_log = op_log or {}
    if not isinstance(op_log, dict):
        op_log = {e.name: e for e in op_log.log_entries}
    trainable = _trainable(graph)
    graph_def = graph.as_graph_def(add_shapes=True)
    ops_by_name = {op.name: op for op in graph.get_operations()}
    ids: dict[str, int] = {}
    for nd in graph_def.node:
        node = out.nodes[len(ids)]
        node.id = ids[nd.name] = len(ids)
        node.name, node.op = nd.name, nd.op
        for key, value in nd.attr.items():
            node.attrs[key].CopyFrom(value)
        op = ops_by_name.get(nd.name)
        if op is not None:
            node.op_types.extend(sorted(set(_types(op, trainable, op_log))))
            entry = op_log.get(op.name)
            node.float_ops = entry.float_ops if entry is not None and entry.float_ops else (
                _float_ops(op))  # fmt: skip
            path, _, line = (op.traceback or "").rpartition(":")
            if path and line.isdigit():
                frame = node.trace.traces.add()
                frame.file_id = string_id(path)
                frame.lineno = int(line)
                frame.function_id = string_id(_function_at(path, int(line)))
                frame.func_start_line = -1
        else:
            node.op_types.append(nd.op)
        if "_output_shapes" in nd.attr:
            for i, shape in enumerate(nd.attr["_output_shapes"].list.shape):
                if not shape.unknown_rank:  # (a scalar's is [1], as TF's)
                    dims = [d.size for d in shape.dim] or [1]
                    node.output_shapes[i].int64_values.extend(dims)
        if "shape" in nd.attr and nd.attr["shape"].HasField("shape"):
            shape = nd.attr["shape"].shape
            if not shape.unknown_rank:
                node.shape.extend(d.size for d in shape.dim)
    for nd in graph_def.node:
        node = out.nodes[ids[nd.name]]
        for i, text in enumerate(t for t in nd.input if not t.startswith("^")):
            name, index = _input_name(text)
            if name in ids:
                node.inputs[i] = ids[name]
                node.src_output_index[ids[name]] = index
    for step in sorted(steps):
        out.steps.append(step)
        for dev in steps[step].step_stats.dev_stats:
            device = _canonical_device(dev.device)
            for stats in dev.node_stats:
                if stats.node_name not in ids:  # (a node of the runtime's own)
                    extra = out.nodes[len(ids)]
                    extra.id = ids[stats.node_name] = len(ids)
                    extra.name = extra.op = stats.node_name
                    extra.op_types.append(stats.node_name)
                _add_exec(out.nodes[ids[stats.node_name]], step, device, stats)
    out.has_trace = any(n.trace.traces for n in out.nodes.values())
    for text, i in strings.items():
        out.id_to_string[i] = text
    return out


def _add_exec(node, step: int, device: str, stats) -> None:
    """One traced execution of `node` at `step` on `device` (NodeExecStats `stats`)."""
    if device not in node.op_types:
        types = sorted({*node.op_types, device})
        del node.op_types[:]
        node.op_types.extend(types)
    node.canonical_device = node.host_device = device
    ex = node.execs[step]
    start = int(stats.all_start_micros)
    micros = int(stats.all_end_rel_micros)
    ex.run_count += 1
    ex.all_start_micros = start if not ex.all_start_micros else min(ex.all_start_micros, start)
    ex.latest_end_micros = max(ex.latest_end_micros, start + micros)
    ex.cpu_execs[device].times.add().int64_values.extend([start, micros])
    if device not in ex.devices:
        ex.devices.append(device)
    mem = ex.memory_execs.add()
    mem.memory_micros = start + micros
    for m in stats.memory:
        mem.requested_bytes += m.total_bytes
        mem.peak_bytes += m.peak_bytes
        mem.residual_bytes += m.live_bytes
    mem.host_persistent_bytes = int(stats.memory_stats.persistent_memory_size)
    for out in stats.output:
        alloc = out.tensor_description.allocation_description
        nbytes = alloc.allocated_bytes or alloc.requested_bytes
        mem.output_bytes += nbytes
        slot = mem.output_memory[out.slot]
        slot.bytes = nbytes
        slot.ptr = alloc.ptr


def _expensive_operations(graph, run_meta, op_log) -> list[str]:
    if run_meta is None:
        return []
    options = {**_DEFAULTS, "select": ["micros"], "order_by": "micros", "max_depth": 10000}
    root = _op_tree(graph, options, run_meta, op_log)
    whole = root.total_exec_micros
    lines = []
    for i, row in enumerate(root._rows[:3], 1):
        share = 100.0 * row.exec_micros / whole if whole else 0.0
        lines.append(
            f"top {i} operation type: {row.name}, cpu: {_fmt_time(row.cpu_exec_micros)}, "
            f"accelerator: {_fmt_time(row.accelerator_exec_micros)}, "
            f"total: {_fmt_time(row.exec_micros)} ({share:.2f}%)"
        )
    reports = ["\n".join(lines)] if lines else []
    scope = _scope_tree(graph, {**options, "max_depth": 2}, run_meta, op_log)
    # (TF ranks the top-level nodes by their subtrees' time and prints their own)
    top = sorted(scope.children, key=lambda n: -n.total_exec_micros)[:3]
    lines = [
        f"top {i} graph node: {n.name}, cpu: {_fmt_time(n.cpu_exec_micros)}, "
        f"accelerator: {_fmt_time(n.accelerator_exec_micros)}, "
        f"total: {_fmt_time(n.exec_micros)}"
        for i, n in enumerate(top, 1)
    ]
    if lines:
        reports.append("\n".join(lines))
    return reports


def _advise(graph, run_meta, options, op_log=None) -> AdviceProto:
    if options == _DEFAULT_ADVISE_OPTIONS:
        options = copy.deepcopy(ALL_ADVICE)
    advice = AdviceProto()
    for name in options:
        if name not in _BUILT:
            continue
        checker = advice.checkers[name]
        if name == "ExpensiveOperationChecker":
            checker.reports.extend(_expensive_operations(graph, run_meta, op_log))
    for name in sorted(advice.checkers):
        sys.stdout.write(f"\n{name}:\n")
        for report in advice.checkers[name].reports:
            sys.stdout.write(report + "\n")
    return advice


def advise(graph=None, run_meta=None, options=_DEFAULT_ADVISE_OPTIONS):
    """TF1's `tf.profiler.advise`: the checkers of `options` (a dict of checker name ->
    its options; the default, all of ALL_ADVICE) over `graph` (the default graph when
    None) and the traced step `run_meta`; prints and returns the AdviceProto."""
    from asyncflow import graph as ops

    g = graph if graph is not None else ops.get_default_graph()
    return _advise(g, run_meta, options)
