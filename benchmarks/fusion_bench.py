"""Per-op overhead on small element-wise graphs, and what elementwise fusion saves (issue 21
item 4): asyncflow with and without the fusion pass beside TensorFlow's executor.

    .venv/bin/python benchmarks/fusion_bench.py [--cells 28] [--batch 128] [--steps 200]

The graph is the element-wise part of an unrolled LSTM: `--cells` cells in a chain, each
the gates of BasicLSTMCell (4 gate inputs of [batch, 128] fed, Sigmoid/Tanh/Mul/AddV2)
and, with `--grad`, the gradient of the last output with respect to the gate inputs.
Each backend runs in its own process, the three taking turns for `--rounds`; the table
shows the median step time, the nodes a traced step ran, and the time per node.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def _build(tf, cells: int, batch: int, grad: bool):
    gates = [tf.placeholder(tf.float32, [None, 4 * 128]) for _ in range(cells)]
    c0 = c = tf.placeholder(tf.float32, [None, 128])
    h = None
    for g in gates:
        i, j, f, o = tf.split(g, 4, 1)
        c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
        h = tf.tanh(c) * tf.sigmoid(o)
    fetch = tf.gradients(tf.reduce_sum(h), gates) if grad else [h, c]
    rng = np.random.default_rng(0)
    feed_values = [rng.standard_normal((batch, 4 * 128)).astype(np.float32) for _ in gates]
    feed_values.append(rng.standard_normal((batch, 128)).astype(np.float32))
    return fetch, dict(zip([*gates, c0], feed_values))


def _child(args) -> None:
    if args.backend == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow.compat.v1 as tf

        tf.disable_v2_behavior()
        config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    else:
        import asyncflow as tf

        config = None
        if args.backend == "asyncflow-unfused":
            from asyncflow import graph_passes
            from asyncflow.ops import fused_elementwise

            graph_passes.GRAPH_PASSES.remove(fused_elementwise.fuse_elementwise)
    graph = tf.Graph()
    with graph.as_default():
        fetch, feed = _build(tf, args.cells, args.batch, args.grad)
    with tf.Session(graph=graph, config=config) as sess:
        for _ in range(10):
            sess.run(fetch, feed)
        times = []
        cpu0 = time.process_time()
        for _ in range(args.steps):
            t0 = time.perf_counter()
            sess.run(fetch, feed)
            times.append(time.perf_counter() - t0)
        cpu = (time.process_time() - cpu0) / args.steps
        meta = tf.RunMetadata()
        opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        sess.run(fetch, feed, options=opts, run_metadata=meta)
        nodes = sum(len(d.node_stats) for d in meta.step_stats.dev_stats)
    print(json.dumps({"ms": statistics.median(times) * 1e3, "cpu_ms": cpu * 1e3, "nodes": nodes}))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["asyncflow", "asyncflow-unfused", "tf"])
    ap.add_argument("--cells", type=int, default=28)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--grad", action="store_true")
    args = ap.parse_args(argv)
    if args.backend:
        _child(args)
        return 0
    tf_py = os.environ.get("ASYNCFLOW_TF_PYTHON", "/work/tfvenv/bin/python")
    backends = {"asyncflow-unfused": sys.executable, "asyncflow": sys.executable}
    if os.path.exists(tf_py):
        backends["tf"] = tf_py
    got: dict[str, list] = {b: [] for b in backends}
    flags = ["--cells", str(args.cells), "--batch", str(args.batch), "--steps", str(args.steps)]
    flags += ["--grad"] if args.grad else []
    for _ in range(args.rounds):
        for backend, python in backends.items():
            out = subprocess.run(
                [python, __file__, "--backend", backend, *flags],
                capture_output=True,
                text=True,
                timeout=600,
            )
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            if lines:
                got[backend].append(json.loads(lines[-1]))
    what = "forward and gradient" if args.grad else "forward"
    print(f"{args.cells} LSTM cells' element-wise ops ({what}), batch {args.batch}:")
    print("| backend | ms/step | CPU ms/step | nodes run | us/node |\n|---|---|---|---|---|")
    for backend, runs in got.items():
        if not runs:
            print(f"| {backend} | error | | | |")
            continue
        ms = statistics.median(r["ms"] for r in runs)
        cpu = statistics.median(r["cpu_ms"] for r in runs)
        nodes = runs[-1]["nodes"]
        print(f"| {backend} | {ms:.2f} | {cpu:.2f} | {nodes} | {ms * 1e3 / nodes:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
