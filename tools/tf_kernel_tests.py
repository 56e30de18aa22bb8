"""Run TensorFlow's own kernel-test files against asyncflow and report the pass rate.

    python tools/tf_kernel_tests.py [--tf-python /work/tfvenv/bin/python] [--json OUT]
                                    [--timeout S] [--verbose] FILE.py ...

The files are TF's `tensorflow/python/kernel_tests/**/*_test.py` as text the user already
has on disk (this tool downloads nothing, and no TF code is part of the project).  Each
file runs in a child process, once per backend:

- `asyncflow`: a shim makes `import tensorflow...` resolve to asyncflow
  (`tensorflow_shim.py` beside this file): `tensorflow.python.ops.X` finds its names in
  asyncflow's op family `X`, then the top-level, `nn`, `math`, ... namespaces, and
  `gen_*_ops.snake_name` builds the registered op of that type; `test_util` and
  `platform.test` give a minimal graph-mode `TensorFlowTestCase`.
- `tf` (with `--tf-python`): the same file under real TensorFlow with v2 behaviour
  disabled (graph mode), to learn which cases pass on TF.

The pass rate counts, as issue 18 does, only the cases that pass on TF in graph mode and
are not TF2-only: a case skipped or failing on TF is left out, and so is one the shim
skips as TF2-only (the `WithControlFlowV2` copies TF's `with_control_flow_v2` adds).
Without `--tf-python` every case that runs (not skipped) counts.  A case that hangs is
cut by a per-case alarm (`--timeout`) and counts as failed; a file whose process dies or
runs past 20 x that counts all its unreported cases as failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))


def _run_once(python, backend, path, timeout, skip):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        out_path = out.name
    cmd = [
        python,
        os.path.join(HERE, "tensorflow_shim.py"),
        "--backend",
        backend,
        "--timeout",
        str(timeout),
        "--out",
        out_path,
        "--skip",
        ",".join(sorted(skip)),
        path,
    ]
    env = dict(os.environ, PYTHONHASHSEED="0", TF_CPP_MIN_LOG_LEVEL="3")
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=max(120.0, 20 * timeout)
        )
        tail = (proc.stdout + proc.stderr)[-2000:]
        died = proc.returncode not in (0, 1)
    except subprocess.TimeoutExpired:
        tail, died = "file timed out", True
    try:
        with open(out_path) as f:
            results = json.load(f)
    except (OSError, ValueError):
        results = {}
    os.unlink(out_path)
    return results, died, tail


def _run_file(python: str, backend: str, path: str, timeout: float) -> dict:
    """Run every case of `path`; a case that kills the process counts as "crash" and
    the file runs again without the cases already done."""
    results, died, tail = {}, False, ""
    for _ in range(50):
        got, died, tail = _run_once(python, backend, path, timeout, set(results))
        results.update(got)
        running = [c for c, r in got.items() if r["status"] == "running"]
        for c in running:
            results[c] = {"status": "crash", "message": tail[-300:]}
        if not died or not running:
            break
    return {"results": results, "died": died, "tail": tail}


def _tf2_only(result) -> bool:
    return bool(result) and result["status"] == "skip" and result["message"].startswith("TF2-only")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--tf-python", help="a Python with TensorFlow, for the reference run")
    p.add_argument("--json", help="write every case's outcome here")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per case")
    p.add_argument("--verbose", action="store_true", help="list each failing case")
    args = p.parse_args(argv)

    report, total_pass, total_count = {}, 0, 0
    print(f"{'file':44s} {'tf-pass':>7s} {'af-pass':>7s} {'rate':>6s}")
    for path in args.files:
        af = _run_file(sys.executable, "asyncflow", path, args.timeout)
        tf = _run_file(args.tf_python, "tf", path, args.timeout) if args.tf_python else None
        if tf is not None:
            # A case asyncflow's shim skips as TF2-only (control flow v2 copies) is
            # left out, as the issue counts only TF1 behaviour.
            counted = [
                c
                for c, r in tf["results"].items()
                if r["status"] == "pass" and not _tf2_only(af["results"].get(c))
            ]
        else:
            counted = [c for c, r in af["results"].items() if r["status"] != "skip"]
        passed = [c for c in counted if af["results"].get(c, {}).get("status") == "pass"]
        total_pass += len(passed)
        total_count += len(counted)
        rate = 100.0 * len(passed) / len(counted) if counted else 100.0
        name = os.path.basename(path)
        print(
            f"{name:44s} {len(counted):7d} {len(passed):7d} {rate:5.1f}%"
            + ("  (asyncflow process died)" if af["died"] else "")
        )
        failing = {
            c: af["results"].get(c, {"status": "missing", "message": af["tail"][-300:]})
            for c in counted
            if c not in passed
        }
        if args.verbose:
            for c, r in sorted(failing.items()):
                print(f"    {r['status']:7s} {c}: {r.get('message', '')[:160]!r}")
        report[name] = {
            "counted": len(counted),
            "passed": len(passed),
            "failing": failing,
            "tf_statuses": dict(Counter(r["status"] for r in (tf or af)["results"].values())),
        }
    rate = 100.0 * total_pass / total_count if total_count else 100.0
    print(f"{'TOTAL':44s} {total_count:7d} {total_pass:7d} {rate:5.1f}%")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"total": total_count, "passed": total_pass, "files": report},
                f,
                indent=1,
                sort_keys=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
