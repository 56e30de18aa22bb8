"""while_loop benchmark: per-iteration cost of `i + 1` on a scalar for N iterations.

The same TF1-style code against asyncflow or tf.compat.v1 (classic Switch/Merge loop,
control flow v1, grappler off)::

    .venv/bin/python benchmarks/while_bench.py --backend asyncflow
    /work/tfvenv/bin/python benchmarks/while_bench.py --backend tf

Prints one JSON object on the last line of stdout: the median of several runs of one
step of the loop, and that divided by the iteration count.  asyncflow runs such a
loop compiled (asyncflow/frames.py, LoopProgram); `--general` times the general frame
executor instead (what loops with async kernels, conds or Send/Recv inside use).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def _backend(name: str):
    if name == "asyncflow":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        import asyncflow as tf
        from asyncflow.ops.control_flow_ops import while_loop

        return tf, while_loop, None
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow.compat.v1 as tf

    tf.disable_eager_execution()
    tf.disable_control_flow_v2()  # the classic Switch/Merge/Enter/Exit loop
    from tensorflow.core.protobuf import rewriter_config_pb2

    cfg = tf.ConfigProto()
    cfg.graph_options.rewrite_options.disable_meta_optimizer = True
    cfg.graph_options.rewrite_options.meta_optimizer_iterations = (
        rewriter_config_pb2.RewriterConfig.ONE
    )
    return tf, tf.while_loop, cfg


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["asyncflow", "tf"], default="asyncflow")
    ap.add_argument("--iterations", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--parallel-iterations", type=int, default=10)
    ap.add_argument(
        "--general",
        action="store_true",
        help="asyncflow: run the loop on the general frame executor, not compiled",
    )
    args = ap.parse_args()
    tf, while_loop, cfg = _backend(args.backend)
    if args.general and args.backend == "asyncflow":
        from asyncflow import lowering

        lowering._NO_COMPILED_LOOPS = True
    n = args.iterations
    with tf.Graph().as_default():
        i = while_loop(
            lambda i: i < n,
            lambda i: i + 1,
            [tf.constant(0)],
            parallel_iterations=args.parallel_iterations,
        )
        with tf.Session(config=cfg) as sess:
            assert sess.run(i) == n  # warm-up: plans built, kernels loaded
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                sess.run(i)
                times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(
        json.dumps(
            {
                "backend": args.backend + (" (general executor)" if args.general else ""),
                "iterations": n,
                "step_s_median": med,
                "us_per_iteration": med / n * 1e6,
                "step_s_all": times,
            }
        )
    )


if __name__ == "__main__":
    main()
