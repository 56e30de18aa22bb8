"""A training program's first steps, from a fresh process, under asyncflow and TensorFlow.

    .venv/bin/python benchmarks/models/startup.py [--rounds 2] [--steps 200] [--models ...]

What a TF1 tutorial program pays before its steps run at their steady speed: the
import, the first `sess.run` (the plan: graph passes and lowering) and, in asyncflow,
the compiles of the fused element-wise programs (numba, on background threads that
share the cores and the GIL with the first steps).  Each model runs `--steps` training
steps in a fresh process (no warm-up, no waiting for compiles: as a program does) in
four ways, in turn each round: TF 2.21; asyncflow with the on-disk cache of compiled
loops off (`ASYNCFLOW_JIT_CACHE=0`); asyncflow with an empty cache (a first run, which
fills it); asyncflow again with that cache (every later run); with `--before PY`, also
asyncflow under another tree's interpreter first (an A/B against an older commit; its
cache, if it has one, starts empty each round).  The table gives medians
of the whole process's wall time from before the import to the last step, and of its
CPU time; `plan` is the first step's time.  TF comes from `$ASYNCFLOW_TF_PYTHON`, else
/work/tfvenv/bin/python.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _child(backend: str, model: str, steps: int) -> None:
    t0 = time.perf_counter()
    if backend == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
    else:
        import asyncflow as tf
    imported = time.perf_counter() - t0
    import numpy as np

    sys.path.insert(0, HERE)
    from models import MODELS

    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        feeds, train, _, batch = MODELS[model](tf, rng)
        init = tf.global_variables_initializer()
    batches = [batch() for _ in range(8)]
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        first = None
        for k in range(steps):
            s = time.perf_counter()
            sess.run(train, dict(zip(feeds, batches[k % len(batches)])))
            if first is None:
                first = time.perf_counter() - s
    wall = time.perf_counter() - t0
    cpu = time.process_time()
    print(json.dumps({"import": imported, "plan": first, "wall": wall, "cpu": cpu}))


def _run(python: str, backend: str, model: str, steps: int, env: dict) -> dict | None:
    cmd = [python, os.path.abspath(__file__), "--child", backend, "--models", model]
    out = subprocess.run(
        [*cmd, "--steps", str(steps)], capture_output=True, text=True, timeout=900, env=env
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        err = out.stderr.strip().splitlines()
        why = err[-1] if err else out.returncode
        print(f"{backend} {model}: no result: {why}", file=sys.stderr)
        return None
    return json.loads(lines[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--models", nargs="*", default=["vae", "gan", "autoencoder", "lstm_static"])
    ap.add_argument(
        "--before",
        metavar="PYTHON",
        help="also run asyncflow under this interpreter (another tree's venv), as `before`",
    )
    ap.add_argument("--child", choices=["tf", "asyncflow"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.models[0], args.steps)
        return 0
    tf_python = os.environ.get("ASYNCFLOW_TF_PYTHON", "/work/tfvenv/bin/python")
    base = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
    base.pop("ASYNCFLOW_JIT_CACHE", None)
    ways = ["tf", "off", "cold", "warm"]
    if args.before:
        ways.insert(1, "before")
    print("| model | way | wall s | CPU s | import s | plan s | wall / TF |")
    print("|---|---|---|---|---|---|---|")
    for model in args.models:
        got: dict[str, list[dict]] = {w: [] for w in ways}
        for _ in range(args.rounds):
            cache = tempfile.mkdtemp(prefix="asyncflow-startup-")
            try:
                for way in ways:
                    env = dict(base, ASYNCFLOW_CACHE_DIR=cache)
                    if way == "off":
                        env["ASYNCFLOW_JIT_CACHE"] = "0"
                    if way == "tf":
                        if not os.path.exists(tf_python):
                            continue
                        r = _run(tf_python, "tf", model, args.steps, env)
                    elif way == "before":
                        r = _run(args.before, "asyncflow", model, args.steps, env)
                    else:
                        r = _run(sys.executable, "asyncflow", model, args.steps, env)
                    if r is not None:
                        got[way].append(r)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
        tf_wall = statistics.median(r["wall"] for r in got["tf"]) if got["tf"] else None
        for way in ways:
            if not got[way]:
                continue

            def med(field, rows=got[way]):
                return statistics.median(r[field] for r in rows)

            ratio = f"{med('wall') / tf_wall:.2f}x" if tf_wall else "-"
            print(
                f"| {model} | {way} | {med('wall'):.2f} | {med('cpu'):.2f} | "
                f"{med('import'):.2f} | {med('plan'):.2f} | {ratio} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
