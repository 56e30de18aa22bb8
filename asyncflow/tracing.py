"""Step tracing: per-node start and end times for `RunOptions(trace_level=...)`.

How it stays free when off: a traced run compiles a plan of its own (the master's plan
key includes the trace flag), and only that plan's kernels are wrapped by
`timed_kernel`; an untraced step runs the untouched kernels and never reads the
collector.  The worker opens a collector for a traced step (`collect_into`), every wrapped
kernel appends one record to it when it finishes (a context variable, inherited by
the tasks of kernels that suspend), and the worker turns the records into
`RunMetadata.step_stats` (`fill_run_metadata`) once the step is over.

A record is (device, op, start_ns, end_ns, outputs, live_bytes, peak_bytes), times
from `time.perf_counter_ns`, mapped to the epoch once per process.  Kernels that
suspend (Recv, dequeues, work handed to a thread) overlap on one device, so each
device's records are laid out on lanes (`thread_id`, named in `thread_names`) where no
two slices overlap: lane 0 for what never overlapped, more lanes only as needed.
"""

from __future__ import annotations

import contextvars
import heapq
import time
import weakref
from collections.abc import Callable

import numpy as np

from asyncflow import dtypes
from asyncflow.graph_io import shape_proto
from asyncflow.protos.cost_graph_pb2 import CostGraphDef
from asyncflow.protos.step_stats_pb2 import NodeExecStats, StepStats

__all__ = ["collect_into", "fill_run_metadata", "stop_collecting", "timed_kernel"]

_RECORDS: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "asyncflow_trace", default=None
)
# perf_counter has the resolution; the epoch offset makes all_start_micros TF's.
_EPOCH_OFFSET_NS = time.time_ns() - time.perf_counter_ns()


def timed_kernel(kernel: Callable, op, device) -> Callable:
    """`kernel` recording its start and end into the step's collector (traced plans)."""
    clock = time.perf_counter_ns

    async def timed(ctx, *args, **kw):
        start = clock()
        result = await kernel(ctx, *args, **kw)
        end = clock()
        records = _RECORDS.get()
        if records is not None:
            records.append(
                (
                    device,
                    op,
                    start,
                    end,
                    _describe(result, len(op._outputs)),
                    device.bytes_in_use,
                    device.peak_bytes_in_use,
                )
            )
        return result

    return timed


def _describe(result, n_outputs: int) -> list:
    """(dtype, shape, nbytes) of each array output; None where not an array."""
    if n_outputs == 0:
        return []
    values = result if n_outputs > 1 and isinstance(result, (tuple, list)) else (result,)
    out = []
    for v in values:
        if isinstance(v, np.ndarray) or hasattr(v, "__array_interface__"):
            out.append((v.dtype, tuple(v.shape), int(v.nbytes)))
        else:
            out.append(None)
    return out


def collect_into(records: list) -> contextvars.Token:
    """Records of kernels started from here on (and of the tasks they create) go to
    `records`; the worker calls it around starting a traced step's executors, as it
    sets the step context."""
    return _RECORDS.set(records)


def stop_collecting(token: contextvars.Token) -> None:
    _RECORDS.reset(token)


def _lanes(spans: list[tuple[int, int]]) -> list[int]:
    """Interval partitioning: a lane per span such that spans on a lane never overlap."""
    order = sorted(range(len(spans)), key=lambda i: spans[i])
    free: list[tuple[int, int]] = []  # (end, lane) of each lane's last span
    lanes = [0] * len(spans)
    count = 0
    for i in order:
        s, e = spans[i]
        if free and free[0][0] <= s:
            _, lane = heapq.heappop(free)
        else:
            lane, count = count, count + 1
        lanes[i] = lane
        heapq.heappush(free, (e, lane))
    return lanes


def _label(op) -> str:
    """TF's timeline label, `name = Op(input, ...)`; Send/Recv add their rendezvous key
    after " @@ " (tensor name; sending device; receiving device) for the timeline."""
    inputs = ", ".join(
        t.name.split(":")[0] if t.name.endswith(":0") else t.name for t in op._inputs
    )
    label = f"{op.name} = {op.type}({inputs})"
    if op.type in ("_Send", "_Recv", "_HostSend", "_HostRecv"):
        a = op._attrs
        key = (a.get("tensor_name", ""), a.get("send_device", ""), a.get("recv_device", ""))
        label += " @@ " + ";".join(key)
    return label


def fill_run_metadata(run_metadata, records: list, devices: list) -> None:
    """`run_metadata.step_stats` (and `cost_graph`) from a traced step's records."""
    stats = StepStats()
    by_device: dict[str, list] = {d.name: [] for d in devices}
    for rec in records:
        by_device.setdefault(rec[0].name, []).append(rec)
    cost = CostGraphDef()
    for name, recs in by_device.items():
        if not recs:  # as TF's collector: a device appears once it ran a node of the step
            continue
        dev = stats.dev_stats.add(device=name)
        lanes = _lanes([(r[2], r[3]) for r in recs])
        for lane in sorted(set(lanes)):
            dev.thread_names[lane] = f"{name} lane {lane}"
        for rec, lane in sorted(zip(recs, lanes), key=lambda x: x[0][2]):
            _node_stats(dev.node_stats.add(), rec, lane)
            _cost_node(cost.node.add(), rec, len(cost.node) - 1)
    if isinstance(getattr(run_metadata, "step_stats", None), StepStats):
        run_metadata.step_stats.CopyFrom(stats)
    else:
        run_metadata.step_stats = stats
    if hasattr(run_metadata, "cost_graph") and isinstance(
        getattr(run_metadata, "cost_graph", None), CostGraphDef
    ):
        run_metadata.cost_graph.CopyFrom(cost)
    else:
        run_metadata.cost_graph = cost


# What a node's stats hold apart from its times and memory (name, label, outputs) is the
# same from step to step while its output shapes are: it is built once per op and output
# shapes and copied into each step's StepStats (building it every step was 2/3 of what a
# traced step of the MLP cost, ~0.6 ms for 63 nodes).  Weak keys: a graph's ops go
# with the graph.
_TEMPLATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TEMPLATES_PER_OP = 8  # distinct output signatures kept per op (varying batch sizes)


def _templates(device, op, outputs) -> tuple[NodeExecStats, CostGraphDef.Node]:
    key = (device.name, tuple(outputs))
    per_op = _TEMPLATES.get(op)
    if per_op is None:
        per_op = _TEMPLATES[op] = {}
    found = per_op.get(key)
    if found is None:
        if len(per_op) >= _TEMPLATES_PER_OP:
            per_op.clear()
        found = per_op[key] = (_static_node_stats(device, op, outputs),
                               _static_cost_node(device, op, outputs))  # fmt: skip
    return found


def _node_stats(ns, rec, lane: int) -> None:
    device, op, start, end, outputs, live, peak = rec
    ns.CopyFrom(_templates(device, op, outputs)[0])
    start_ns = start + _EPOCH_OFFSET_NS
    dur = end - start
    ns.thread_id = lane
    ns.all_start_micros = start_ns // 1000
    ns.all_start_nanos = start_ns
    ns.scheduled_micros = start_ns // 1000
    ns.scheduled_nanos = start_ns
    ns.op_start_rel_micros = 0
    ns.op_end_rel_micros = ns.all_end_rel_micros = dur // 1000
    ns.op_end_rel_nanos = ns.all_end_rel_nanos = dur
    mem = ns.memory[0]
    mem.live_bytes = live
    mem.allocator_bytes_in_use = live
    mem.peak_bytes = peak


def _static_node_stats(device, op, outputs) -> NodeExecStats:
    ns = NodeExecStats()
    ns.node_name = op.name
    ns.timeline_label = _label(op)
    for slot, desc in enumerate(outputs):
        if desc is None:
            continue
        dtype, shape, nbytes = desc
        out = ns.output.add(slot=slot)
        td = out.tensor_description
        try:
            td.dtype = dtypes.as_dtype(dtype).as_datatype_enum
        except TypeError:  # an array type TF has no enum for
            pass
        shape_proto(shape, td.shape)
        td.allocation_description.requested_bytes = nbytes
        td.allocation_description.allocated_bytes = nbytes
        td.allocation_description.allocator_name = device.name
    mem = ns.memory.add(allocator_name=device.name)
    mem.total_bytes = sum(d[2] for d in outputs if d is not None)
    return ns


def _cost_node(node, rec, index: int) -> None:
    device, op, start, end, outputs, _, _ = rec
    node.CopyFrom(_templates(device, op, outputs)[1])
    node.id = index
    node.compute_time = (end - start) // 1000
    node.compute_cost = node.compute_time


def _static_cost_node(device, op, outputs) -> CostGraphDef.Node:
    node = CostGraphDef.Node()
    node.name, node.device = op.name, device.name
    for desc in outputs:
        info = node.output_info.add()
        if desc is not None:
            dtype, shape, nbytes = desc
            info.size = nbytes
            shape_proto(shape, info.shape)
            try:
                info.dtype = dtypes.as_dtype(dtype).as_datatype_enum
            except TypeError:
                pass
    return node
