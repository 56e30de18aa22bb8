"""A/B of an environment setting of asyncflow's, TF 2.21 beside, alternating (issue 21).

    .venv/bin/python benchmarks/models/ab_env.py NAME=VALUE [NAME=VALUE ...] \\
        [--rounds 3] [--steps 30] [--models gan lstm_static]

Each round runs, for every model, TF, asyncflow as the environment has it (A) and
asyncflow with the settings given (B), each in its own process (models.py), in turn,
A and B in the other order every other round: with A always right after TF, the pool
of ops/jit_threads.py read 0.83-0.92x on three models where runs alternating their
order read 0.99-1.37x the same hour (the order may count; alternating costs nothing).
The table shows medians over rounds of each run's median step time (wall) and CPU
time per step, and each asyncflow column's ratio to TF's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run_models import _run, _tf_python  # noqa: E402


def _with_env(settings: dict, fn):
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        return fn()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("settings", nargs="+", help="NAME=VALUE for run B")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--models", nargs="*", default=["gan", "lstm_static"])
    args = ap.parse_args(argv)
    settings = dict(s.split("=", 1) for s in args.settings)
    tf_py = _tf_python()
    runs: dict = {}
    for round_ in range(args.rounds):
        for model in args.models:
            sides = [("A", lambda m=model: _run(sys.executable, "asyncflow", m, args.steps))]
            sides.append(
                (
                    "B",
                    lambda m=model: _with_env(
                        settings, lambda: _run(sys.executable, "asyncflow", m, args.steps)
                    ),
                )
            )
            if round_ % 2:  # B before A every other round (see the module note)
                sides.reverse()
            if tf_py:
                sides.insert(0, ("TF", lambda m=model: _run(tf_py, "tf", m, args.steps)))
            for name, fn in sides:
                r = fn()
                if r:
                    runs.setdefault((model, name), []).append(r)
    print(f"B: {' '.join(args.settings)}; {args.rounds} rounds, {args.steps} steps")
    head = "".join(f" {c + ' ms/cpu':>14s}" for c in ("TF", "A", "B"))
    print(f"{'model':14s}{head}  A/TF      B/TF      B/A")

    def med(model, name, field):
        rs = runs.get((model, name))
        return statistics.median(r[field] for r in rs) if rs else float("nan")

    for model in args.models:
        cells = {
            n: (med(model, n, "median_ms"), med(model, n, "cpu_ms")) for n in "TF A B".split()
        }
        line = f"{model:14s}" + "".join(f" {w:6.2f}/{c:6.2f}" for w, c in cells.values())
        for x, y in (("A", "TF"), ("B", "TF"), ("B", "A")):
            (wx, cx), (wy, cy) = cells[x], cells[y]
            line += f"  {wx / wy:.2f}/{cx / cy:.2f}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
