"""Two asyncflow trees (e.g. main and a branch) and TF 2.21 on the same models, alternating.

    .venv/bin/python benchmarks/models/ab_trees.py /work/main . --models cnn mlp --rounds 3

Each round runs every model once per tree (each tree's own `.venv/bin/python` and
models.py) and once under TF, in separate processes, in turn; the table gives medians
over rounds of each run's median step time (wall) and CPU per step, the ratios to TF
(same run), and the load average seen.  For A/B figures of a change before it lands.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path


def _run(python: str, tree: str, backend: str, model: str, steps: int, env_extra: dict):
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3", **env_extra)
    script = str(Path(tree) / "benchmarks" / "models" / "models.py")
    cmd = [python, script, "--backend", backend, "--model", model, "--steps", str(steps)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tree)
    if out.returncode:
        print(f"  {tree} {model} failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs=2, help="tree A and tree B (each with .venv)")
    ap.add_argument("--models", nargs="*", default=["cnn"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    args = ap.parse_args(argv)
    trees = [str(Path(t).resolve()) for t in args.trees]
    runs = {}
    loads = []
    for r in range(args.rounds):
        for model in args.models:
            order = [("A", trees[0]), ("B", trees[1]), ("TF", None)]
            if r % 2:
                order = order[::-1]
            for name, tree in order:
                loads.append(os.getloadavg()[0])
                if tree is None:
                    res = _run(args.tf_python, trees[1], "tf", model, args.steps, {})
                else:
                    res = _run(
                        str(Path(tree) / ".venv/bin/python"),
                        tree,
                        "asyncflow",
                        model,
                        args.steps,
                        {},
                    )
                if res:
                    runs.setdefault((model, name), []).append(res)
                    print(
                        f"  round {r} {model} {name}: {res['median_ms']:.2f} ms, "
                        f"cpu {res['cpu_ms']:.2f} ms",
                        flush=True,
                    )
    print(f"load {min(loads):.2f}-{max(loads):.2f}; A={trees[0]} B={trees[1]}")
    print("| model | A wall (CPU) | B wall (CPU) | TF wall (CPU) | A/TF | B/TF |")
    print("|---|---|---|---|---|---|")
    for model in args.models:
        med = {}
        for name in ("A", "B", "TF"):
            rs = runs.get((model, name), [])
            if rs:
                med[name] = (
                    statistics.median(x["median_ms"] for x in rs),
                    statistics.median(x["cpu_ms"] for x in rs),
                )
        if len(med) < 3:
            continue

        cells = [f"{med[n][0]:.2f} ({med[n][1]:.2f})" for n in ("A", "B", "TF")]
        ratios = [
            f"{med[n][0] / med['TF'][0]:.2f}x ({med[n][1] / med['TF'][1]:.2f}x)"
            for n in ("A", "B")
        ]
        print(f"| {model} | " + " | ".join(cells + ratios) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
