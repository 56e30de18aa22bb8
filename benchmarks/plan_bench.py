"""Plan-build time: how long a TF1 program's first `sess.run` of a training step spends
building its plan (prune, place, partition, graph passes, lowering), per model of
benchmarks/models/models.py.

    .venv/bin/python benchmarks/plan_bench.py [--repeats 3] [model ...]
    /work/tfvenv/bin/python benchmarks/plan_bench.py --backend tf [model ...]

For each model, `--repeats` times (a fresh graph and session each): the master's plan
build for the training step (`Master._compile`), the graph passes' share of it, and
the first and second steps' wall times.  Prints one line a model with the medians.
The plan is built once a session (per feeds and fetches), so this is start-up time:
an unrolled LSTM's 2,400-node partition is what a tutorial program pays first.  Under
TensorFlow (`--backend tf`, the same TF1 code) only the steps are timed: its first step
holds its graph's set-up (grappler, executor creation), as ours holds the plan build.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "models"))

from models import MODELS  # noqa: E402

_spent = {"plan": 0.0, "passes": 0.0}


def _timed(fn, key):
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _spent[key] += time.perf_counter() - t

    return wrapper


def once(tf, name: str) -> tuple[int, float, float, float, float]:
    """(ops, plan build s, passes s, first step s, second step s) of one fresh session."""
    rng = np.random.default_rng(0)
    g = tf.Graph()
    with g.as_default():
        feeds, train, _loss, batch = MODELS[name](tf, rng)
        init = tf.global_variables_initializer()
    batches = [dict(zip(feeds, batch())) for _ in range(2)]
    with tf.Session(graph=g) as sess:
        sess.run(init)
        _spent.update(plan=0.0, passes=0.0)
        steps = []
        for k in range(2):
            t = time.perf_counter()
            sess.run(train, batches[k])
            steps.append(time.perf_counter() - t)
            if k == 0:
                plan, passes = _spent["plan"], _spent["passes"]
    return len(g.get_operations()), plan, passes, steps[0], steps[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="default: every model")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", choices=["asyncflow", "tf"], default="asyncflow")
    args = ap.parse_args(argv)
    if args.backend == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
    else:
        import asyncflow as tf
        from asyncflow import master

        master.Master._compile = _timed(master.Master._compile, "plan")
        master.run_graph_passes = _timed(master.run_graph_passes, "passes")
    print("model ops plan_s passes_s first_step_s second_step_s (medians)")
    for name in args.models or list(MODELS):
        runs = [once(tf, name) for _ in range(args.repeats)]
        med = [statistics.median(r[k] for r in runs) for k in range(1, 5)]
        print(name, runs[0][0], " ".join(f"{x:.3f}" for x in med), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
