"""Every model of models.py under asyncflow and TensorFlow, alternating; one table.

    .venv/bin/python benchmarks/models/run_models.py [--rounds 2] [--steps 60] [--models ...]

Each (model, backend) runs in its own process, `--rounds` times, the backends taking
turns so that machine noise hits both alike; the table shows medians of the per-run
median step times (wall) and of the CPU time per step (`time.process_time`, all
threads), each with the ratio asyncflow/TF (below 1.0: asyncflow is faster), and the
machine's load average over the model's runs (other people's work moves wall times).  TF comes
from `$ASYNCFLOW_TF_PYTHON`, else /work/tfvenv/bin/python (with tf-keras installed and
TF_USE_LEGACY_KERAS=1 for the TF1 RNN cells); without it the TF column is empty.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from models import MODELS  # noqa: E402


def _tf_python() -> str | None:
    py = os.environ.get("ASYNCFLOW_TF_PYTHON", "/work/tfvenv/bin/python")
    return py if Path(py).exists() else None


def _run(python: str, backend: str, model: str, steps: int) -> dict | None:
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [python, str(HERE / "models.py"), "--backend", backend, "--model", model]
    try:
        out = subprocess.run(
            [*cmd, "--steps", str(steps)], capture_output=True, text=True, timeout=600, env=env
        )
    except subprocess.TimeoutExpired:
        print(f"{backend} {model}: no result in 600 s", file=sys.stderr, flush=True)
        return None
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:  # say why the cell stays empty (TF's RNN cells without tf-keras, ...)
        err = out.stderr.strip().splitlines()
        why = err[-1] if err else f"exit status {out.returncode}"
        print(f"{backend} {model}: no result: {why}", file=sys.stderr, flush=True)
        return None
    return json.loads(lines[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    args = ap.parse_args(argv)
    tf_py = _tf_python()
    rows = []
    for model in args.models:
        got: dict[tuple, list] = collections.defaultdict(list)
        loads = []
        for _ in range(args.rounds):
            for backend, python in (("asyncflow", sys.executable), ("tf", tf_py)):
                if python is None:
                    continue
                loads.append(os.getloadavg()[0])
                r = _run(python, backend, model, args.steps)
                if r:
                    got[backend, "wall"].append(r["median_ms"])
                    got[backend, "cpu"].append(r["cpu_ms"])
        med = {k: statistics.median(v) for k, v in got.items() if v}
        rows.append((model, med, statistics.median(loads)))
        print(_row(*rows[-1]), file=sys.stderr, flush=True)
    print(_HEADER)
    for row in rows:
        print(_row(*row))
    return 0


_HEADER = (
    "| model | asyncflow ms/step | TF 2.21 ms/step | ratio "
    "| asyncflow CPU ms/step | TF CPU ms/step | CPU ratio | load |\n"
    "|---|---|---|---|---|---|---|---|"
)


def _row(model: str, med: dict, load: float) -> str:
    cells = []
    for kind in ("wall", "cpu"):
        af, tf = med.get(("asyncflow", kind)), med.get(("tf", kind))
        cells += [
            f"{af:.2f}" if af else "error",
            f"{tf:.2f}" if tf else "-",
            f"{af / tf:.2f}x" if af and tf else "-",
        ]
    return f"| {model} | " + " | ".join(cells) + f" | {load:.1f} |"


if __name__ == "__main__":
    sys.exit(main())
