"""The summaries of examples/train_digits.py's MLP with and without the graph pass that
fuses them (`summary_ops.fuse_summaries`: a MergeSummary and the scalar and histogram
ops feeding it as one `_FusedMergeSummary`), in one process, and what tracing off costs.

Two sessions of the same model (built by benchmarks/summary_example_bench.py): one
lowered with `GRAPH_PASSES` as they are, one without the pass.  Turns of `--block` steps
take turns over all of (session x plain / summaries / trace_off); prints CPU-time
medians and the summaries' and trace_off's overhead over plain in each session.  The
trace_off figure is steadier here than in summary_example_bench.py (more turns):

    flock /tmp/bench.lock .venv/bin/python benchmarks/summary_fusion_bench.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import summary_example_bench  # noqa: E402

import asyncflow as af  # noqa: E402
from asyncflow import graph_passes  # noqa: E402
from asyncflow.ops import summary_ops  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    passes = list(graph_passes.GRAPH_PASSES)
    sessions = {}
    for name, fused in (("unfused", False), ("fused", True)):
        graph_passes.GRAPH_PASSES[:] = [
            p for p in passes if fused or p is not summary_ops.fuse_summaries
        ]
        steps, _, _ = summary_example_bench.build(af, "mlp", 32)
        for step in steps.values():  # (lowered here, with the passes of its name)
            for _ in range(args.warmup):
                step()
        sessions[name] = steps
    graph_passes.GRAPH_PASSES[:] = passes
    cpu: dict[tuple, list[float]] = {}
    for _ in range(args.rounds):
        for name, steps in sessions.items():
            for kind, step in steps.items():
                times = cpu.setdefault((name, kind), [])
                for _ in range(args.block):
                    c0 = time.process_time()
                    step()
                    times.append(time.process_time() - c0)
    result: dict = {}
    for name in sessions:
        ms = {k: statistics.median(cpu[(name, k)]) * 1e3 for k in sessions[name]}
        result[name] = {f"{k}_cpu_ms": round(v, 3) for k, v in ms.items()}
        for k in ("summaries", "trace_off"):
            result[name][f"{k}_overhead_pct"] = round(100 * (ms[k] / ms["plain"] - 1), 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
