"""Run benchmarks/core.py for asyncflow and for TensorFlow 1 (tf.compat.v1); print one table.

asyncflow runs under this interpreter (``sys.executable``). TensorFlow lives in its own venv
and is never a project dependency; its interpreter is ``$ASYNCFLOW_TF_PYTHON`` if set, else
``/work/tfvenv/bin/python`` if it exists; otherwise the TF column reads "TF: not installed".

    .venv/bin/python benchmarks/run.py [--repeats 7] [--json out.json]

Exit status is non-zero when the asyncflow run reports an error (TF errors are only shown).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CORE = HERE / "core.py"
DEFAULT_TF_PYTHON = "/work/tfvenv/bin/python"
TIMEOUT_S = 300  # per backend; a hung runtime must not hang `make bench`

# (json key, label, higher_is_better, format)
ROWS: list[tuple[str, str, bool, str]] = [
    ("chain_ops_per_s", "a. Identity chain x2000, ops/s", True, "{:,.0f}"),
    ("fanin_ops_per_s", "b. NoOp fan-in 5000+1, ops/s", True, "{:,.0f}"),
    ("step_p50_us", "c. trivial sess.run p50, us", False, "{:,.1f}"),
    ("step_p99_us", "c. trivial sess.run p99, us", False, "{:,.1f}"),
    ("arun_p50_us", "d. await sess.arun p50, us", False, "{:,.1f}"),
    ("arun_p99_us", "d. await sess.arun p99, us", False, "{:,.1f}"),
    ("arun_gather_steps_per_s", "d. arun x100 gather, steps/s", True, "{:,.0f}"),
]
ASYNCFLOW_ONLY = {"arun_p50_us", "arun_p99_us", "arun_gather_steps_per_s"}


def find_tf_python() -> str | None:
    env = os.environ.get("ASYNCFLOW_TF_PYTHON")
    if env:
        return env
    return DEFAULT_TF_PYTHON if os.path.exists(DEFAULT_TF_PYTHON) else None


def run_core(python: str, backend: str, extra: list[str]) -> dict[str, Any]:
    """Run core.py in a subprocess; return its JSON (or a dict with a 'fatal' message)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    cmd = [python, str(CORE), "--backend", backend, *extra]
    print(f"running: {' '.join(cmd)}", file=sys.stderr, flush=True)
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"fatal": f"{type(e).__name__}: {e}"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    result: dict[str, Any]
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        result = {"fatal": f"no JSON on stdout (exit {proc.returncode})"}
    if proc.returncode != 0 or "fatal" in result:
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        print(f"--- {backend} stderr (exit {proc.returncode}) ---\n{tail}", file=sys.stderr)
    return result


def cell(res: dict[str, Any] | None, key: str, fmt: str, missing: str) -> tuple[str, float | None]:
    if res is None:
        return missing, None
    if "fatal" in res:
        return "error", None
    val = res.get("metrics", {}).get(key)
    if val is None:
        return ("error" if res.get("errors") else "n/a"), None
    return fmt.format(val), float(val)


def render(af: dict[str, Any], tf: dict[str, Any] | None) -> str:
    header = ["metric", "asyncflow", "TF1", "ratio asyncflow/TF"]
    table = [header]
    for key, label, higher, fmt in ROWS:
        a_txt, a_val = cell(af, key, fmt, "n/a")
        if key in ASYNCFLOW_ONLY:
            t_txt, t_val = "n/a", None
        else:
            t_txt, t_val = cell(tf, key, fmt, "TF: not installed")
        better = "higher is better" if higher else "lower is better"
        ratio = f"{a_val / t_val:.2f}x ({better})" if a_val and t_val else f"- ({better})"
        table.append([label, a_txt, t_txt, ratio])
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]

    def fmt_row(r: list[str]) -> str:
        nums = [c.rjust(w) for c, w in zip(r[1:3], widths[1:3], strict=True)]
        cells = [r[0].ljust(widths[0]), *nums]
        return "| " + " | ".join([*cells, r[3].ljust(widths[3])]) + " |"

    out = [fmt_row(table[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [fmt_row(r) for r in table[1:]]
    return "\n".join(out)


def describe(name: str, res: dict[str, Any] | None) -> str:
    if res is None:
        return f"{name}: not installed"
    if "fatal" in res:
        return f"{name}: FAILED ({res['fatal']})"
    s = f"{name} {res.get('version', '?')} (python {res.get('python')}, {res.get('cpus')} cpus)"
    for metric, err in res.get("errors", {}).items():
        s += f"\n  error in {metric}: {err}"
    return s


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7, help="timed repeats per metric (median)")
    p.add_argument("--steps", type=int, help="timed steps for the latency metrics")
    p.add_argument("--json", type=Path, help="also write both raw results to this file")
    args = p.parse_args()
    extra = ["--repeats", str(args.repeats)]
    if args.steps is not None:
        extra += ["--steps", str(args.steps)]

    af = run_core(sys.executable, "asyncflow", extra)
    tf_python = find_tf_python()
    tf = run_core(tf_python, "tf", extra) if tf_python else None

    print(describe("asyncflow", af))
    print(describe("TF1 (tf.compat.v1, grappler off)", tf) + (f" [{tf_python}]" if tf else ""))
    print()
    print(render(af, tf))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"asyncflow": af, "tf": tf}, indent=2) + "\n")
    return 1 if ("fatal" in af or af.get("errors")) else 0


if __name__ == "__main__":
    sys.exit(main())
