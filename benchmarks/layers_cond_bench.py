"""Training steps of tf.layers models whose `training` argument is a tensor: the MLP
784-512-512-10 (batch 128, ReLU, dropout 0.5 after each hidden layer, SGD 0.01), the same
with the dropout after the first hidden layer only (the second ReLU's gradient then
takes its product: a MatMul+ReluGrad fusion, and an ordering edge before W3's update), and the
same MLP with batch normalization before each ReLU instead of the dropout (its moving
averages updated each step through the UPDATE_OPS collection).  With a tensor, both
layers build TF's cond (smart_cond), whose Switch/Merge nodes the graph passes must see
past (asyncflow/deadness.py) to keep their fusions.

Prints one JSON line: per model, the median step time (ms) over `--repeats` repeats of
`--steps` steps (the models take turns of `--block` steps so that machine noise hits
them alike), the best repeat's, the median process CPU time per step (all threads:
what other load disturbs least), and how many nodes of each fused op type the step's
plans hold.

    /work/bin/cpu-quiet .venv/bin/python benchmarks/layers_cond_bench.py
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import time

import numpy as np

BATCH, SIZES, LR, RATE = 128, (784, 512, 512, 10), 0.01, 0.5


def _build(tf, model: str):
    """(session, train op, feed) for `model`: "dropout", "dropout1" (after the first
    hidden layer only) or "bn"."""
    rng = np.random.RandomState(0)
    x_val = rng.uniform(0, 1, (BATCH, SIZES[0])).astype(np.float32)
    y_val = rng.randint(0, SIZES[-1], BATCH).astype(np.int32)
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(1)
        x = tf.placeholder(tf.float32, [None, SIZES[0]], name="x")
        y = tf.placeholder(tf.int32, [None], name="y")
        training = tf.placeholder_with_default(False, [], name="training")
        h = x
        for k, width in enumerate(SIZES[1:-1]):
            if model == "bn":
                h = tf.layers.dense(h, width, use_bias=False)
                h = tf.nn.relu(tf.layers.batch_normalization(h, training=training))
            else:
                h = tf.layers.dense(h, width, tf.nn.relu)
                if model == "dropout" or k == 0:
                    h = tf.layers.dropout(h, RATE, training=training)
        logits = tf.layers.dense(h, SIZES[-1])
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train = tf.train.GradientDescentOptimizer(LR).minimize(loss)
        init = tf.global_variables_initializer()
    sess = tf.Session(graph=graph)
    sess.run(init)
    return sess, train, {x: x_val, y: y_val, training: True}


def bench(models, steps: int, warmup: int, block: int, repeats: int) -> dict:
    import asyncflow as tf
    from asyncflow.ops import fused_updates, philox_random

    fused_updates.warm()
    philox_random.warm()
    made = {m: _build(tf, m) for m in models}
    out: dict = {}
    try:
        for sess, train, feed in made.values():
            for _ in range(warmup):
                sess.run(train, feed)
        medians: dict = {m: [] for m in made}
        cpu_medians: dict = {m: [] for m in made}
        for _ in range(repeats):
            times: dict = {m: [] for m in made}
            cpu: dict = {m: [] for m in made}
            while len(times[models[0]]) < steps:
                for m, (sess, train, feed) in made.items():
                    for _ in range(block):
                        t0, c0 = time.perf_counter(), time.process_time()
                        sess.run(train, feed)
                        times[m].append(time.perf_counter() - t0)
                        cpu[m].append(time.process_time() - c0)
            for m in made:
                medians[m].append(statistics.median(times[m]) * 1e3)
                cpu_medians[m].append(statistics.median(cpu[m]) * 1e3)
        for m, (sess, _train, _feed) in made.items():
            kinds = collections.Counter(
                op.type
                for sp in sess._plans.values()
                for pl in sp.plans
                for op in pl.nodes
                if op.type.startswith("_")
            )
            out[m] = {
                "ms": round(statistics.median(medians[m]), 3),
                "best_ms": round(min(medians[m]), 3),
                "cpu_ms": round(statistics.median(cpu_medians[m]), 3),
                "per_repeat": [round(t, 3) for t in medians[m]],
                "fused": dict(sorted(kinds.items())),
            }
    finally:
        for sess, _, _ in made.values():
            sess.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="dropout,dropout1,bn")
    parser.add_argument("--steps", type=int, default=40, help="timed steps per model, repeat")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--block", type=int, default=10, help="steps per turn")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    models = args.models.split(",")
    print(json.dumps(bench(models, args.steps, args.warmup, args.block, args.repeats)))


if __name__ == "__main__":
    main()
