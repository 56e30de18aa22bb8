"""One process, examples/train_digits.py's training step (MLP or CNN, batch 32), two
settings alternated round by round: A/B figures for per-step costs too small for separate
runs on a shared machine (as benchmarks/models/ab_inproc.py does for the model steps).

    .venv/bin/python benchmarks/ab_example.py asyncflow.ops.blas:_COMPILED_CALL=False

Setting B is the module attribute at VALUE (a number, True or False), A its own value;
the one graph and session serve both (the attribute is read at run time).  Each round
runs `--steps` timed steps under A and under B, in alternating order; the line gives the
medians over rounds of the per-round median step time, B/A, and in how many rounds B was
the faster.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))
sys.path.insert(0, str(HERE / "models"))
import train_digits  # noqa: E402
from ab_inproc import _number  # noqa: E402  (a command line's value: int, float, bool)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("setting", help="MODULE:NAME=VALUE (setting B)")
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    import asyncflow as tf
    from asyncflow.ops import blas, fused_updates

    fused_updates.warm()
    blas.warm()
    where, assignment = args.setting.split(":")
    name, value = assignment.split("=")
    module = importlib.import_module(where)
    values = {"A": getattr(module, name), "B": _number(value)}
    m = train_digits.build_model(tf, args.model, 2e-3, 0, summaries=False)
    sess = tf.Session(graph=m.graph)
    sess.run(m.init)
    rng = np.random.RandomState(0)
    feeds = [
        {
            m.images: rng.uniform(0, 1, (32, 8, 8, 1)).astype(np.float32),
            m.labels: rng.randint(0, 10, 32).astype(np.int32),
        }
        for _ in range(16)
    ]
    for i in range(300):
        sess.run([m.train_op, m.loss], feeds[i % 16])
    medians: dict[str, list[float]] = {"A": [], "B": []}
    wins = 0
    for r in range(args.rounds):
        this = {}
        for k in ("A", "B") if r % 2 else ("B", "A"):
            setattr(module, name, values[k])
            times = []
            for i in range(args.steps):
                t0 = time.perf_counter()
                sess.run([m.train_op, m.loss], feeds[i % 16])
                times.append(time.perf_counter() - t0)
            this[k] = statistics.median(times)
            medians[k].append(this[k])
        wins += this["B"] < this["A"]
    setattr(module, name, values["A"])
    a, b = statistics.median(medians["A"]), statistics.median(medians["B"])
    print(
        f"{args.model}: A {a * 1e6:.0f} us, B [{args.setting}] {b * 1e6:.0f} us, "
        f"B/A {b / a:.3f}x, B faster in {wins}/{args.rounds} rounds"
    )


if __name__ == "__main__":
    main()
