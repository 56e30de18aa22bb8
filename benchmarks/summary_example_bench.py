"""What the summaries of examples/train_digits.py cost per training step.

The example's MLP (64-256-128-10, ReLU, Adam, batch 32) built by the example's own
`build_model` with its summaries (the loss and the batch accuracy as scalars, a
histogram of each of the six weights and biases: 50,826 values, `merge_all`), in one
session, run two ways that take turns in blocks of `--block` steps:

  plain      sess.run([train_op, loss], feed)                       (no summary)
  summaries  sess.run([train_op, loss, merged], feed) and
             FileWriter.add_summary(summary, step)                  (every step)
  trace_off  plain, with RunOptions(trace_level=NO_TRACE) and a RunMetadata: what
             tracing costs a step that does not trace

`--model cnn` times the example's CNN instead.  Feeds are random batches of the digits'
shape (8x8x1, labels 0-9), so scikit-learn is not needed.  Prints the median step time
of each (CPU time of the whole process, the steadier figure on a shared machine, and
wall time) and its overhead over plain, and the means per step over whole turns
(`*_mean_ms`: they include what a median leaves out, the FileWriter's background write
every `max_queue` events, on its thread and its wait for the GIL).  The turns go
plain, summaries, trace_off, plain, trace_off, summaries, ..., so that each mode
follows each other mode equally often.  The same code runs on
tf.compat.v1 for comparison (the example builds its graph from TF1 names only):

    flock /tmp/bench.lock .venv/bin/python benchmarks/summary_example_bench.py
    flock /tmp/bench.lock /work/tfvenv/bin/python benchmarks/summary_example_bench.py --backend tf
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import train_digits  # noqa: E402


def _backend(name: str):
    if name == "tf":
        import os

        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
        tf.disable_resource_variables()
        return tf
    import asyncflow
    from asyncflow.ops import blas, fused_updates, summary_jit

    # The compiled loops (numba, where installed) before timing, not after 30 steps:
    # until their background compile ends, the NumPy paths run.
    fused_updates.warm()
    summary_jit.warm()
    blas.warm()
    return asyncflow


def build(tf, model: str, batch: int, seed: int = 0):
    m = train_digits.build_model(tf, model, 2e-3, seed, summaries=True)
    sess = tf.Session(graph=m.graph)
    sess.run(m.init)
    writer = tf.summary.FileWriter(tempfile.mkdtemp(), m.graph)
    rng = np.random.RandomState(seed)
    images = rng.uniform(0, 1, (64 * batch, 8, 8, 1)).astype(np.float32)
    labels = rng.randint(0, 10, 64 * batch).astype(np.int32)
    feeds = [
        {m.images: images[k : k + batch], m.labels: labels[k : k + batch]}
        for k in range(0, len(images), batch)
    ]
    counter = [0]

    def plain():
        counter[0] += 1
        sess.run([m.train_op, m.loss], feeds[counter[0] % len(feeds)])

    def summaries():
        counter[0] += 1
        _, _, s = sess.run([m.train_op, m.loss, m.merged], feeds[counter[0] % len(feeds)])
        writer.add_summary(s, counter[0])

    no_trace = tf.RunOptions(trace_level=tf.RunOptions.NO_TRACE)

    def trace_off():
        counter[0] += 1
        feed = feeds[counter[0] % len(feeds)]
        sess.run([m.train_op, m.loss], feed, options=no_trace, run_metadata=tf.RunMetadata())

    return {"plain": plain, "summaries": summaries, "trace_off": trace_off}, sess, writer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["asyncflow", "tf"], default="asyncflow")
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    steps, sess, writer = build(_backend(args.backend), args.model, args.batch)
    wall: dict[str, list[float]] = {k: [] for k in steps}
    cpu: dict[str, list[float]] = {k: [] for k in steps}
    totals = {k: [0.0, 0.0] for k in steps}  # whole turns: wall, CPU
    for step in steps.values():
        for _ in range(args.warmup):
            step()
    names = list(steps)
    # Turns in the order plain, summaries, trace_off, plain, trace_off, summaries, ...:
    # each mode follows each other mode equally often.  (Rotating the three gave
    # trace_off the turn after summaries two times in three, and it read +2% CPU over
    # plain from what the summaries' turn left behind: the writer's background flush,
    # the caches; beside plain alone it is within +-1%.)
    cycle = (0, 1, 2, 0, 2, 1)
    for turn in range(3 * (args.steps // args.block)):
        name = names[cycle[turn % len(cycle)]]
        step = steps[name]
        w0, p0 = time.perf_counter(), time.process_time()
        for _ in range(args.block):
            t0, c0 = time.perf_counter(), time.process_time()
            step()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
        totals[name][0] += time.perf_counter() - w0
        totals[name][1] += time.process_time() - p0
    writer.close()
    sess.close()
    result = {"backend": args.backend, "model": args.model}
    for name in steps:
        result[name] = {
            "cpu_ms": round(statistics.median(cpu[name]) * 1e3, 3),
            "wall_ms": round(statistics.median(wall[name]) * 1e3, 3),
            "cpu_mean_ms": round(totals[name][1] / len(cpu[name]) * 1e3, 3),
            "wall_mean_ms": round(totals[name][0] / len(wall[name]) * 1e3, 3),
        }
    for name in ("summaries", "trace_off"):
        for kind in ("cpu", "wall", "cpu_mean", "wall_mean"):
            base = result["plain"][f"{kind}_ms"]
            result[name][f"{kind}_overhead_pct"] = round(
                100 * (result[name][f"{kind}_ms"] / base - 1), 1
            )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
