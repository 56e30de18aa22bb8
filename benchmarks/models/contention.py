"""Each model's slowdown beside a competing CPU-bound process, asyncflow and TF (issue 21).

    .venv/bin/python benchmarks/models/contention.py [--rounds 2] [--steps 40] [--models ...]

For every model of models.py and both backends, the step time (median of the per-run
medians) is measured alone and while another process spins on one core (a Python busy
loop, started for the run and killed after it); the table shows both and the slowdown
(beside / alone) of each backend.  The target: asyncflow's slowdown no worse than TF's.
Runs alternate backends and conditions, so machine noise hits all of them alike.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from models import MODELS  # noqa: E402
from run_models import _run, _tf_python  # noqa: E402

_SPIN = "while True:\n    pass\n"


def _measure(python: str, backend: str, model: str, steps: int, busy: bool) -> float | None:
    spinner = subprocess.Popen([sys.executable, "-c", _SPIN]) if busy else None
    try:
        r = _run(python, backend, model, steps)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    return r["median_ms"] if r else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    args = ap.parse_args(argv)
    tf_py = _tf_python()
    backends = [("asyncflow", sys.executable)] + ([("tf", tf_py)] if tf_py else [])
    print(
        "| model | asyncflow alone | beside | slowdown | TF alone | beside | slowdown |\n"
        "|---|---|---|---|---|---|---|"
    )
    for model in args.models:
        got = {(b, busy): [] for b, _ in backends for busy in (False, True)}
        for _ in range(args.rounds):
            for busy in (False, True):
                for backend, python in backends:
                    ms = _measure(python, backend, model, args.steps, busy)
                    if ms is not None:
                        got[backend, busy].append(ms)
        cells = []
        for backend in ("asyncflow", "tf"):
            alone, beside = got.get((backend, False)), got.get((backend, True))
            if not alone or not beside:
                cells += ["-", "-", "-"]
                continue
            a, b = statistics.median(alone), statistics.median(beside)
            cells += [f"{a:.2f}", f"{b:.2f}", f"{b / a:.2f}x"]
        print(f"| {model} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
