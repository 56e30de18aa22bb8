"""Convolution benchmark: a LeNet-like forward + backward step, the same TF1-style code
against asyncflow or tf.compat.v1.

    .venv/bin/python benchmarks/conv_bench.py --backend asyncflow
    /work/tfvenv/bin/python benchmarks/conv_bench.py --backend tf

The conv step (default) is: input 64x28x28x1; conv 5x5x32 SAME + bias + ReLU + 2x2
max-pool; conv 5x5x64 SAME + bias + ReLU + 2x2 max-pool; loss = sum of squares / 2 of
the result; gradients of the loss w.r.t. both filters and biases, applied by SGD
(assign_sub).  `--full` adds the LeNet head: dense 1024 ReLU, dense 10, sparse softmax
cross-entropy (the issue's CNN step).  Times are medians over `--repeats` timed steps
after warm-up.  Prints one JSON object on stdout (the last line).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import types

import numpy as np


def _backend(name: str):
    if name == "asyncflow":
        import asyncflow as tf
        from asyncflow.gradients import gradients
        from asyncflow.ops import conv_ops, nn_impl, pooling_ops

        nn = types.SimpleNamespace(**{k: getattr(tf.nn, k) for k in tf.nn.__all__})
        for mod in (conv_ops, pooling_ops, nn_impl):  # until af.nn re-exports them
            for k in mod.__all__:
                setattr(nn, k, getattr(mod, k))
        return tf, nn, gradients, tf.Session
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow.compat.v1 as tf

    tf.disable_eager_execution()
    return tf, tf.nn, tf.gradients, tf.Session


def build(tf, nn, gradients, full: bool, batch: int):
    rng = np.random.RandomState(0)

    def var(shape, scale):
        return tf.Variable(rng.normal(0, scale, shape).astype(np.float32))

    x = tf.placeholder(tf.float32, [batch, 28, 28, 1])
    labels = tf.placeholder(tf.int32, [batch])
    params = [var([5, 5, 1, 32], 0.1), var([32], 0.1), var([5, 5, 32, 64], 0.03), var([64], 0.1)]
    h = nn.relu(nn.bias_add(nn.conv2d(x, params[0], [1, 1, 1, 1], "SAME"), params[1]))
    h = nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    h = nn.relu(nn.bias_add(nn.conv2d(h, params[2], [1, 1, 1, 1], "SAME"), params[3]))
    h = nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    if full:
        params += [var([7 * 7 * 64, 1024], 0.01), var([1024], 0.01), var([1024, 10], 0.03),
                   var([10], 0.01)]  # fmt: skip
        h = tf.reshape(h, [batch, 7 * 7 * 64])
        h = nn.relu(nn.bias_add(tf.matmul(h, params[4]), params[5]))
        logits = nn.bias_add(tf.matmul(h, params[6]), params[7])
        loss = tf.reduce_mean(
            nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
    else:
        loss = nn.l2_loss(h)  # fmt: skip
    grads = gradients(loss, params)
    step = tf.group(*[tf.assign_sub(p, 1e-4 * g) for p, g in zip(params, grads)])
    return x, labels, loss, step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["asyncflow", "tf"], required=True)
    ap.add_argument("--full", action="store_true", help="add the dense head (LeNet CNN step)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    tf, nn, gradients, session = _backend(args.backend)
    rng = np.random.RandomState(1)
    with tf.Graph().as_default():
        x, labels, loss, step = build(tf, nn, gradients, args.full, args.batch)
        feed = {x: rng.uniform(0, 1, (args.batch, 28, 28, 1)).astype(np.float32),
                labels: rng.randint(0, 10, args.batch).astype(np.int32)}  # fmt: skip
        with session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(args.warmup):
                sess.run(step, feed)
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                sess.run(step, feed)
                times.append(time.perf_counter() - t0)
            final_loss = float(sess.run(loss, feed))
    times_ms = sorted(t * 1e3 for t in times)
    result = {
        "backend": args.backend,
        "metric": "cnn_step" if args.full else "conv_step",
        "batch": args.batch,
        "median_ms": round(statistics.median(times_ms), 2),
        "min_ms": round(times_ms[0], 2),
        "max_ms": round(times_ms[-1], 2),
        "repeats": args.repeats,
        "loss": final_loss,
    }
    print(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
