"""train_bench.py's MLP step in several trees and settings and TF 2.21, alternating.

    .venv/bin/python benchmarks/ab_train.py --rounds 6 base@/work/wt-base head@. \\
        "one@.:ASYNCFLOW_CPU_BUDGET=0,ASYNCFLOW_GEMM_SPLIT=0,OPENBLAS_NUM_THREADS=1" \\
        "base1@/work/wt-base%1" tf@tf

A side is LABEL@TREE[:NAME=VALUE,...][%CPUS]: the tree's own `.venv/bin/python` runs
`benchmarks/train_bench.py --backend asyncflow` there with those environment settings,
under `taskset -c CPUS` when given; TREE `tf` is TF 2.21 (`$ASYNCFLOW_TF_PYTHON`, else
/work/tfvenv/bin/python) on this tree's train_bench.py.  Each round runs every side once,
in separate processes, the order reversed every other round; the table gives the median
over rounds of each run's median step (and of its minimum) and the load average seen.
For A/B figures against an older tree (issue 13's "nothing regresses": BASE b907053).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _side(spec: str):
    spec, _, cpus = spec.partition("%")
    head, _, settings = spec.partition(":")
    label, _, tree = head.partition("@")
    env = dict(s.split("=", 1) for s in settings.split(",") if s)
    return label, tree or ".", env, cpus


def _run(tree: str, env: dict, cpus: str, steps: int):
    if tree == "tf":
        cwd = HERE.parent
        py = os.environ.get("ASYNCFLOW_TF_PYTHON", "/work/tfvenv/bin/python")
        backend = "tf"
    else:
        cwd = Path(tree).resolve()
        py, backend = str(cwd / ".venv" / "bin" / "python"), "asyncflow"
    cmd = [py, "benchmarks/train_bench.py", "--backend", backend, "--steps", str(steps)]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    full = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **env)
    out = subprocess.run(cmd, cwd=cwd, env=full, capture_output=True, text=True, timeout=600)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        print(f"{tree} {env} failed: {out.stderr[-400:]}", flush=True)
        return None
    return json.loads(lines[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sides", nargs="+", help="LABEL@TREE[:NAME=VALUE,...][%%CPUS]")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args(argv)
    sides = [_side(s) for s in args.sides]
    results: dict[str, list] = {label: [] for label, *_ in sides}
    loads = []
    for r in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for label, tree, env, cpus in sides if r % 2 == 0 else sides[::-1]:
            res = _run(tree, env, cpus, args.steps)
            if res is not None:
                results[label].append(res)
    loads.append(os.getloadavg()[0])
    load = f"{min(loads):.2f}-{max(loads):.2f}"
    print(f"{args.rounds} rounds, {args.steps} steps; load (1-min): {load}")
    print("| side | median ms | min ms | runs' medians |")
    print("|---|---|---|---|")
    for label, *_ in sides:
        rs = results[label]
        if not rs:
            continue
        med = statistics.median(x["median_ms"] for x in rs)
        low = statistics.median(x["min_ms"] for x in rs)
        runs = ", ".join(f"{x['median_ms']:.2f}" for x in rs)
        print(f"| {label} | {med:.3f} | {low:.3f} | {runs} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
