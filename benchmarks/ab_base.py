"""Every benchmark that existed at BASE, in several trees and TF 2.21, alternating (issue 13).

    .venv/bin/python benchmarks/ab_base.py --rounds 3 base@/work/wt-base head@. tf@tf

Issue 13's "nothing regresses" compares each benchmark of BASE b907053 (before the
runtime-layers work) with main: `core.py`, `queue_bench.py`, `while_bench.py`,
`train_bench.py` and `conv_bench.py --full`.  A side is LABEL@TREE: the tree's own
`.venv/bin/python` runs the tree's own copy of each script (`--backend asyncflow`);
TREE `tf` is TF 2.21 (`$ASYNCFLOW_TF_PYTHON`, else /work/tfvenv/bin/python) on this
tree's scripts.  Each round runs every script once per side, in separate processes, the
sides' order reversed every other round.  The table gives the median over rounds of
each figure the scripts print (their last line's JSON, nested keys joined by dots),
each side's ratio to the first side, and the load average seen.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = [
    ("core.py", []),
    ("queue_bench.py", []),
    ("while_bench.py", []),
    ("train_bench.py", ["--steps", "200"]),
    ("conv_bench.py", ["--full"]),
]


def _flatten(prefix: str, value, out: dict) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out[prefix] = float(value)


def _run(python: str, tree: Path, script: str, extra: list, backend: str) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_USE_LEGACY_KERAS="1")
    cmd = [python, str(tree / "benchmarks" / script), "--backend", backend, *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=tree)
    if out.returncode:
        tail = out.stderr.strip().splitlines()[-1:]
        print(f"  {backend} {tree} {script} failed: {tail}", flush=True)
        return {}
    figures: dict = {}
    _flatten(script.removesuffix(".py"), json.loads(out.stdout.strip().splitlines()[-1]), figures)
    return figures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sides", nargs="+", help="LABEL@TREE, TREE `tf` for TF 2.21")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    tf_python = os.environ.get("ASYNCFLOW_TF_PYTHON", "/work/tfvenv/bin/python")
    sides = []
    for spec in args.sides:
        label, _, tree = spec.partition("@")
        if tree == "tf":
            sides.append((label, tf_python, HERE.parent, "tf"))
        else:
            root = Path(tree).resolve()
            sides.append((label, str(root / ".venv" / "bin" / "python"), root, "asyncflow"))
    samples: dict = {label: {} for label, *_ in sides}
    loads = []
    for r in range(args.rounds):
        order = sides if r % 2 == 0 else sides[::-1]
        for script, extra in SCRIPTS:
            for label, python, tree, backend in order:
                loads.append(os.getloadavg()[0])
                for key, v in _run(python, tree, script, extra, backend).items():
                    samples[label].setdefault(key, []).append(v)
        print(f"round {r} done", flush=True)
    labels = [label for label, *_ in sides]
    keys = sorted({k for figs in samples.values() for k in figs})
    print(f"{args.rounds} rounds; load (1-min): {min(loads):.2f}-{max(loads):.2f}")
    print(
        "| figure | "
        + " | ".join(labels)
        + " | "
        + " | ".join(f"{x}/{labels[0]}" for x in labels[1:])
        + " |"
    )
    print("|---" * (2 * len(labels)) + "|")
    for key in keys:
        med = [statistics.median(samples[x][key]) if key in samples[x] else None for x in labels]
        cells = ["-" if m is None else f"{m:,.4g}" for m in med]
        ratios = ["-" if m is None or not med[0] else f"{m / med[0]:.3f}" for m in med[1:]]
        print(f"| {key} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
