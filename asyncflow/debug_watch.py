"""tfdbg v1 in the session: `RunOptions.debug_options` turned into debug ops on the
watched edges, and the dump directory's metadata files.

For each `DebugTensorWatch` (node_name, output_slot, debug_ops, debug_urls) whose node
a partition holds, the partition gets one node per debug op, named as TF names them
("__dbg_<node>:<slot>_<k>_<op>"), reading the watched output; every node consuming
that output also waits for them (control edges), as TF's debug graph rewrite does, so a
value is dumped before anything computed from it is.  Beside the op's dumps
(ops/debug_ops.py), each dump root gets what TF's `DebugDumpDir` reads first:

- per device, the partition graph the step ran, debug nodes included
  (`_tfdbg_device_<device>/_tfdbg_graph_hash<hash>_<us>`, an Event with graph_def),
  written when the plan's first step runs;
- per step, `_tfdbg_core_metadata_sessionrun<run index, 14 digits>_<us>`, an Event
  whose log message is the JSON of (global step, session run index, the plan's step
  index, feeds, fetches, targets).

Invariant: a step without watches never reaches this module (the plan key's debug
part is None, and `Master.run_step` checks one attribute).
"""

from __future__ import annotations

import json
import os
import zlib

import aiofiles
import aiofiles.os

from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow.graph_io import as_graph_def_message
from asyncflow.ops.debug_ops import device_dir_name, dump_timestamp_us
from asyncflow.partition import PNode, _topological_order, make_op, partition_graph_defs
from asyncflow.protos.event_pb2 import Event

__all__ = ["DebugPlan", "debug_watches", "insert_debug_nodes", "run_debugged"]

_V1_DEBUG_OPS = frozenset(["DebugIdentity", "DebugNanCount", "DebugNumericSummary"])


def debug_watches(options) -> tuple | None:
    """The watches of `options.debug_options` as a hashable plan-key part; None when
    there are none (the common step)."""
    if options is None:
        return None
    made = getattr(options, "_made", None)  # (our RunOptions: its field, if ever made)
    dbg = made("debug_options") if made is not None else getattr(options, "debug_options", None)
    if dbg is None or not dbg.debug_tensor_watch_opts:
        return None
    return tuple(
        (
            w.node_name,
            w.output_slot,
            tuple(w.debug_ops),
            tuple(w.debug_urls),
            w.tolerate_debug_op_creation_failures,
        )  # fmt: skip
        for w in dbg.debug_tensor_watch_opts
    )


class DebugPlan:
    """What a watched plan's steps write beside the dumps: the dump roots, the
    partition GraphDefs (written once, before the first step), the core metadata's
    names, and the plan's own step count."""

    __slots__ = ("roots", "graphs", "graphs_written", "names", "steps")

    def __init__(self, roots, graphs, names):
        self.roots = roots
        self.graphs = graphs  # [(device name, serialized GraphDef)]
        self.graphs_written = False
        self.names = names  # (input_names, output_names, target_nodes)
        self.steps = 0


def _url_roots(urls) -> list[str]:
    roots = []
    for url in urls:
        if not url.startswith("file://"):
            raise errors.UnimplementedError(
                None, None, f"Debug URL scheme of {url!r} is not supported: use file://"
            )
        roots.append(url[len("file://") :])
    return roots


def insert_debug_nodes(parts, watches, scratch_graph) -> list[str]:
    """Add the debug ops `watches` ask for to the partitions holding the watched nodes;
    the dump roots named.  A watch of a node no partition runs, or of an output slot
    the node does not have, adds nothing (TF's too).

    Raises:
      FailedPreconditionError: a debug op type TF's v1 debugger does not know, unless
        the watch tolerates debug op creation failures (the op is then left out).
      UnimplementedError: a debug URL other than file://.
    """
    roots: list[str] = []
    for node_name, slot, debug_ops, urls, tolerate in watches:
        for r in _url_roots(urls):
            if r not in roots:
                roots.append(r)
        for p in parts:
            i = next((k for k, n in enumerate(p.nodes) if n.op.name == node_name), None)
            if i is not None and 0 <= slot < len(p.nodes[i].op._outputs):
                _watch(p, i, slot, debug_ops, list(urls), tolerate, scratch_graph)
    for p in parts:
        _topological_order(p)
    return roots


def _watch(p, i, slot, debug_ops, urls, tolerate, scratch_graph) -> None:
    op = p.nodes[i].op
    dtype = op._outputs[slot].dtype.base_dtype
    device = p.device.name if p.device is not None else ""
    consumers = [n for n in p.nodes if (i, slot) in n.inputs]
    for k, op_type in enumerate(debug_ops):
        if op_type not in _V1_DEBUG_OPS:
            if tolerate:
                continue
            tensor = f"{op.name}:{slot}"
            raise errors.FailedPreconditionError(
                None,
                None,
                f"Failed to create debug node {op_type} for tensor {tensor}, due to: Failed "
                f"to create node definition for debug op {op_type} on watched tensor {tensor}",
            )
        attrs = {
            "T": dtype,
            "device_name": device,
            "tensor_name": f"{op.name}:{slot}",
            "debug_urls": urls,
            "gated_grpc": False,
        }
        if op_type == "DebugNumericSummary":
            attrs.update(lower_bound=float("-inf"), upper_bound=float("inf"))
            attrs["mute_if_healthy"] = False
        out = {"DebugNanCount": "int64", "DebugNumericSummary": "float64"}.get(op_type, dtype)
        dbg = make_op(
            scratch_graph,
            op_type,
            f"__dbg_{op.name}:{slot}_{k}_{op_type}",
            attrs,
            [dtype],
            dtypes.as_dtype(out),
        )
        idx = p.add(PNode(dbg, p.device, [(i, slot)], []))
        for n in consumers:
            n.controls.append(idx)


def debug_graph_defs(parts, feed_tensors) -> list[tuple[str, bytes]]:
    """Each partition's GraphDef as the dump holds it: a feed enters through an _Arg
    node ("_arg_<node>_<slot>_<index>", TF's names) where the partition reads "_feed:i",
    and a fetch leaves through a _Retval ("_retval_<node>_<slot>_<index>")."""
    out = []
    for p, gd in zip(parts, partition_graph_defs(parts)):
        device = p.device.name if p.device is not None else ""
        args = {}
        for node in gd["node"]:
            for j, inp in enumerate(node["input"]):
                if inp.startswith("_feed:"):
                    n = int(inp[len("_feed:") :])
                    t = feed_tensors[n]
                    name = f"_arg_{t.op.name}_{t.value_index}_{n}"
                    args[name] = (n, t)
                    node["input"][j] = name
        for name, (n, t) in args.items():
            gd["node"].append(
                {
                    "name": name,
                    "op": "_Arg",
                    "device": device,
                    "attr": {"index": {"i": n}, "T": {"type": t.dtype.as_datatype_enum}},
                }
            )
        for spec, k in zip(p.fetches, p.fetch_ids):
            if spec[0] == "feed":
                continue
            node, slot = p.nodes[spec[0]].op.name, spec[1]
            gd["node"].append(
                {
                    "name": f"_retval_{node}_{slot}_{k}",
                    "op": "_Retval",
                    "input": [node if slot == 0 else f"{node}:{slot}"],
                    "device": device,
                    "attr": {"index": {"i": k}},
                }
            )
        gd["versions"] = {"producer": 27}
        out.append((device, as_graph_def_message(gd).SerializeToString()))
    return out


def debug_plan(parts, feed_tensors, elements, roots) -> DebugPlan:
    # (Sorted, as TF's executor key lists them.)
    outputs = sorted({e.name for e in elements if isinstance(e, ops.Tensor)})
    targets = sorted({e.name for e in elements if isinstance(e, ops.Operation)})
    names = (sorted({t.name for t in feed_tensors}), outputs, targets)
    return DebugPlan(roots, debug_graph_defs(parts, feed_tensors), names)


async def _write(path: str, data: bytes) -> None:
    try:
        await aiofiles.os.makedirs(os.path.dirname(path), exist_ok=True)
        async with aiofiles.open(path, "wb") as f:
            await f.write(data)
    except OSError as e:
        raise errors.InternalError(None, None, f"Failed to write debug file {path}: {e}") from None


async def run_debugged(start, dplan: DebugPlan, options, session_run_index: int):
    """One watched step: the graph files (on the plan's first step) and this step's
    core metadata, then the step `start()` begins; its fetched values."""
    if not dplan.graphs_written:
        dplan.graphs_written = True
        for device, graph in dplan.graphs:
            ts = dump_timestamp_us()
            data = Event(wall_time=ts, graph_def=graph).SerializeToString()
            name = f"_tfdbg_graph_hash{zlib.crc32(graph)}_{ts}"
            for root in dplan.roots:
                await _write(os.path.join(root, device_dir_name(device), name), data)
    inputs, outputs, targets = dplan.names
    meta = {
        "global_step": int(options.debug_options.global_step),
        "session_run_index": session_run_index,
        "executor_step_index": dplan.steps,
        "input_names": inputs,
        "output_names": outputs,
        "target_nodes": targets,
    }
    dplan.steps += 1
    ts = dump_timestamp_us()
    event = Event(wall_time=ts)
    event.log_message.message = json.dumps(meta, separators=(",", ":"))
    data = event.SerializeToString()
    name = f"_tfdbg_core_metadata_sessionrun{session_run_index:014d}_{ts}"
    for root in dplan.roots:
        await _write(os.path.join(root, name), data)
    return await start()
