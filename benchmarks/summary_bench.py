"""Summary and tracing overhead on the MLP training step of train_bench.py.

The step (784-512-512-10 MLP, batch 128, SGD) runs in four ways, taking turns in blocks
of `--block` steps so machine noise hits them alike:

  plain       sess.run(train)
  scalar      sess.run([train, summary]) with `loss` as a scalar summary, and
              FileWriter.add_summary of the result, every step
  histograms  the same with histograms of the six parameters too (1.1 M values)
  traced      sess.run(train) with RunOptions(trace_level=FULL_TRACE) and a RunMetadata

Prints each median step time (wall clock, and CPU time of the whole process: the
steadier figure on a shared machine) and its overhead over `plain`.

    flock /tmp/bench.lock .venv/bin/python benchmarks/summary_bench.py
    flock /tmp/bench.lock /work/tfvenv/bin/python benchmarks/summary_bench.py --backend tf

(the same code runs on tf.compat.v1 for comparison).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import train_bench  # noqa: E402


def _backend(name: str):
    if name == "tf":
        import os

        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
        tf.disable_resource_variables()
        return tf
    import asyncflow
    from asyncflow.ops import fused_updates

    fused_updates.warm()  # the compiled optimizer loops, before any timing
    return asyncflow


def build(af):
    x_val, y_val, weights = train_bench._data()
    graph = af.Graph()
    with graph.as_default():
        x = af.placeholder(af.float32, [None, train_bench.SIZES[0]], name="x")
        y = af.placeholder(af.int32, [None], name="y")
        h = x
        params = [af.Variable(w, name=f"p{i}") for i, w in enumerate(weights)]
        for k in range(3):
            h = af.matmul(h, params[2 * k]) + params[2 * k + 1]
            if k < 2:
                h = af.nn.relu(h)
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        train = af.train.GradientDescentOptimizer(train_bench.LR).minimize(loss)
        scalar = af.summary.scalar("loss", loss)
        histos = af.summary.merge([scalar] + [af.summary.histogram(p.op.name, p) for p in params])
        init = af.global_variables_initializer()
    sess = af.Session(graph=graph)
    sess.run(init)
    feed = {x: x_val, y: y_val}
    logdir = tempfile.mkdtemp()
    writer = af.summary.FileWriter(logdir, graph)
    opts = af.RunOptions(trace_level=af.RunOptions.FULL_TRACE)
    counter = [0]

    def with_summary(op):
        def step():
            _, s = sess.run([train, op], feed)
            counter[0] += 1
            writer.add_summary(s, counter[0])

        return step

    steps = {
        "plain": lambda: sess.run(train, feed),
        "scalar": with_summary(scalar),
        "histograms": with_summary(histos),
        "traced": lambda: sess.run(train, feed, options=opts, run_metadata=af.RunMetadata()),
    }
    return steps, sess, writer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--backend", choices=["asyncflow", "tf"], default="asyncflow")
    args = parser.parse_args()
    steps, sess, writer = build(_backend(args.backend))
    times: dict[str, list[float]] = {k: [] for k in steps}
    cpu: dict[str, list[float]] = {k: [] for k in steps}
    for step in steps.values():
        for _ in range(args.warmup):
            step()
    for _ in range(args.steps // args.block):
        for name, step in steps.items():
            for _ in range(args.block):
                t0, c0 = time.perf_counter(), time.process_time()
                step()
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    t0 = time.perf_counter()
    writer.close()
    close_ms = (time.perf_counter() - t0) * 1e3
    sess.close()
    base = statistics.median(times["plain"])
    cpu_base = statistics.median(cpu["plain"])
    result = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        cpu_med = statistics.median(cpu[name])
        result[name] = {
            "median_ms": round(med * 1e3, 3),
            "min_ms": round(min(ts) * 1e3, 3),
            "overhead_pct": round(100 * (med / base - 1), 1),
            "cpu_ms": round(cpu_med * 1e3, 3),
            "cpu_overhead_pct": round(100 * (cpu_med / cpu_base - 1), 1),
        }
    result["writer_close_ms"] = round(close_ms, 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
