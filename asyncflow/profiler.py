"""`af.profiler.profile`: the top ops by total time per device, from a traced step.

A small stand-in for TF1's tfprof over what asyncflow records: give it the RunMetadata
(or StepStats) of one or more steps run with `RunOptions(trace_level=FULL_TRACE)`; it
sums each op's time per device, grouped by op type (`cmd="op"`) or by node name
(`cmd="graph"` / `"scope"`), prints the table (unless `options["output"] == "none"`)
and returns it as `ProfileResult`.  Command line: `python -m asyncflow.profiler
run_metadata.pb` prints the table of a serialized RunMetadata.
"""

from __future__ import annotations

import collections
import sys
from dataclasses import dataclass, field

from asyncflow.tfprof import GraphNodeProto, MultiGraphNodeProto, ProfileOptionBuilder
from asyncflow.tfprof_logger import OpLogProto, write_op_log
from asyncflow.tfprof_profiler import AdviceProto, Profiler, advise

__all__ = [
    "AdviceProto",
    "GraphNodeProto",
    "MultiGraphNodeProto",
    "OpLogProto",
    "OpStats",
    "ProfileOptionBuilder",
    "ProfileResult",
    "Profiler",
    "advise",
    "profile",
    "write_op_log",
]


@dataclass
class OpStats:
    """One row: a device, an op type (or node), how often it ran and for how long."""

    device: str
    name: str
    count: int = 0
    total_us: float = 0.0
    output_bytes: int = 0

    @property
    def mean_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0


@dataclass
class ProfileResult:
    """Rows per device, largest total time first; `text()` is the printed table."""

    by_device: dict[str, list[OpStats]] = field(default_factory=dict)

    def text(self, top: int = 20) -> str:
        lines = []
        for device, rows in self.by_device.items():
            total = sum(r.total_us for r in rows) or 1.0
            lines.append(f"Device {device}: {len(rows)} ops, {total:.1f} us")
            lines.append(f"  {'op':<40} {'count':>6} {'total us':>11} {'mean us':>9} {'%':>6}")
            for r in rows[:top]:
                lines.append(
                    f"  {r.name[:40]:<40} {r.count:>6} {r.total_us:>11.1f} "
                    f"{r.mean_us:>9.1f} {100 * r.total_us / total:>5.1f}%"
                )
        return "\n".join(lines)


def profile(graph=None, run_meta=None, op_log=None, cmd=None, options=None):
    """TF1's `tf.profiler.profile`, two ways.

    With options from `ProfileOptionBuilder` (a dict with `select`), or with no
    run_meta: TF's tfprof model analysis of `graph` (the default graph when None):
    float operations, parameters and, with run_meta, times and bytes, as a
    GraphNodeProto tree (`cmd` "scope", the default, or "graph") or a
    MultiGraphNodeProto by op type ("op"); no options means TF's default, the
    trainable variables' parameters (asyncflow/tfprof.py).

    Otherwise the time summary of traced steps: total time per op type (`cmd` "op",
    the default here) or node ("graph", "scope") per device, as a ProfileResult.
    `run_meta`: a RunMetadata, a StepStats, or a list of either (steps add up).
    `options`: a dict; `max_depth`/`top` (rows printed per device, default 20) and
    `output` ("stdout", the default, or "none").

    Raises:
      ValueError: an unknown cmd.
    """
    tf_options = options if isinstance(options, dict) and "select" in options else None
    if tf_options is not None or run_meta is None:
        from asyncflow import graph as ops
        from asyncflow.tfprof import ProfileOptionBuilder, profile_graph

        if tf_options is None:
            tf_options = ProfileOptionBuilder.trainable_variables_parameter()
            tf_options.update(options or {})
        g = graph if graph is not None else ops.get_default_graph()
        return profile_graph(g, run_meta, cmd or "scope", tf_options, op_log)
    cmd = cmd or "op"
    if cmd not in ("op", "graph", "scope"):
        raise ValueError(f"unknown cmd {cmd!r}: use 'op', 'graph' or 'scope'")
    options = dict(options or {})
    metas = run_meta if isinstance(run_meta, (list, tuple)) else [run_meta]
    rows: dict[tuple[str, str], OpStats] = {}
    for meta in metas:
        stats = getattr(meta, "step_stats", meta)
        for dev in stats.dev_stats:
            for n in dev.node_stats:
                name = n.node_name if cmd != "op" else _op_type(n)
                row = rows.setdefault((dev.device, name), OpStats(dev.device, name))
                row.count += 1
                row.total_us += (n.all_end_rel_nanos or n.all_end_rel_micros * 1000) / 1000.0
                row.output_bytes += sum(
                    o.tensor_description.allocation_description.requested_bytes for o in n.output
                )
    result = ProfileResult()
    grouped: dict[str, list[OpStats]] = collections.defaultdict(list)
    for (device, _), row in rows.items():
        grouped[device].append(row)
    for device in sorted(grouped):
        result.by_device[device] = sorted(grouped[device], key=lambda r: (-r.total_us, r.name))
    if options.get("output", "stdout") != "none":
        print(result.text(int(options.get("top", options.get("max_depth", 20)))))
    return result


def _op_type(n) -> str:
    label = n.timeline_label
    if " = " in label and "(" in label:
        return label.split(" = ", 1)[1].split("(", 1)[0]
    return n.node_name


def main(argv: list[str]) -> int:
    from asyncflow.protos import RunMetadata

    if len(argv) != 2:
        print("usage: python -m asyncflow.profiler RUN_METADATA.pb", file=sys.stderr)
        return 2
    with open(argv[1], "rb") as f:
        meta = RunMetadata.FromString(f.read())
    profile(run_meta=meta)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
