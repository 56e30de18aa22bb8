"""What one `tf.cond` costs a training step: the MLP 784-512-512-10 with its dropout
inside `tf.cond(is_training, ...)`, against the same MLP with the dropout applied
unconditionally (issue 13, "two gradient walks").

Both graphs do the same arithmetic when `is_training` is fed True: ReLU layers, dropout
(keep_prob 0.5) after each hidden layer, sparse softmax cross-entropy (mean), batch 128,
plain SGD 0.01, float32.  The cond graph adds only the Switch/Merge pairs and their
gradients; the ratio cond/plain says what the control-flow machinery costs on top.

Each backend runs in its own interpreter: asyncflow in this one's, TF1 (tf.compat.v1,
graph mode, default session config) in `$ASYNCFLOW_TF_PYTHON` or /work/tfvenv/bin/python.
Inside one process the two graphs take turns of `--block` steps so that machine noise
hits them alike; a repeat is one such run of `--steps` steps per graph, the ratio of a
repeat is median(cond) / median(plain), and the table reports the median over
`--repeats` repeats: of wall time (the figure), and of process CPU time (all threads),
which other load on a shared machine disturbs less.

    flock /tmp/bench.lock .venv/bin/python benchmarks/cond_mlp_bench.py
    .venv/bin/python benchmarks/cond_mlp_bench.py --backend asyncflow     # one JSON line
    /work/tfvenv/bin/python benchmarks/cond_mlp_bench.py --backend tf
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

BATCH, SIZES, LR, KEEP = 128, (784, 512, 512, 10), 0.01, 0.5


def _data(seed: int = 0):
    rng = np.random.RandomState(seed)
    x = rng.uniform(0, 1, (BATCH, SIZES[0])).astype(np.float32)
    y = rng.randint(0, SIZES[-1], BATCH).astype(np.int32)
    weights = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        weights.append(rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32))
        weights.append(np.zeros(fan_out, np.float32))
    return x, y, weights


def _build(tf, with_cond: bool):
    """(session, train op, feed) for the MLP; dropout inside a cond or not."""
    x_val, y_val, weights = _data()
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(1)
        x = tf.placeholder(tf.float32, [None, SIZES[0]], name="x")
        y = tf.placeholder(tf.int32, [None], name="y")
        is_training = tf.placeholder(tf.bool, [], name="is_training")
        params = [tf.Variable(w, name=f"p{i}") for i, w in enumerate(weights)]
        h = x
        for k in range(3):
            h = tf.matmul(h, params[2 * k]) + params[2 * k + 1]
            if k < 2:
                h = tf.nn.relu(h)
                if with_cond:
                    h = tf.cond(
                        is_training,
                        lambda h=h: tf.nn.dropout(h, keep_prob=KEEP),
                        lambda h=h: h,
                    )
                else:
                    h = tf.nn.dropout(h, keep_prob=KEEP)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        train = tf.train.GradientDescentOptimizer(LR).minimize(loss)
        init = tf.global_variables_initializer()
    sess = tf.Session(graph=graph)
    sess.run(init)
    feed = {x: x_val, y: y_val}
    if with_cond:
        feed[is_training] = True
    return sess, train, feed


def _import(backend: str):
    if backend == "asyncflow":
        import asyncflow as tf
        from asyncflow.ops import fused_updates, philox_random

        fused_updates.warm()  # the compiled optimizer loops, before any timing
        philox_random.warm()  # and the dropout masks' Philox loop
        return tf, getattr(tf, "__version__", "asyncflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf2
    import tensorflow.compat.v1 as tf

    tf.disable_eager_execution()
    tf.disable_resource_variables()
    return tf, tf2.__version__


def bench(backend: str, steps: int, warmup: int, block: int, repeats: int) -> dict:
    """Per repeat: both graphs in turns of `block` steps; medians of step times."""
    tf, version = _import(backend)
    made = {name: _build(tf, name == "cond") for name in ("plain", "cond")}
    try:
        for sess, train, feed in made.values():
            for _ in range(warmup):
                sess.run(train, feed)
        per_repeat = []
        for _ in range(repeats):
            times: dict = {name: [] for name in made}
            cpu: dict = {name: [] for name in made}
            while len(times["plain"]) < steps:
                for name, (sess, train, feed) in made.items():
                    for _ in range(min(block, steps - len(times[name]))):
                        t0, c0 = time.perf_counter(), time.process_time()
                        sess.run(train, feed)
                        times[name].append(time.perf_counter() - t0)
                        cpu[name].append(time.process_time() - c0)
            plain, cond = statistics.median(times["plain"]), statistics.median(times["cond"])
            cpu_ratio = statistics.median(cpu["cond"]) / statistics.median(cpu["plain"])
            per_repeat.append(
                {
                    "plain_ms": plain * 1e3,
                    "cond_ms": cond * 1e3,
                    "ratio": cond / plain,
                    "cpu_ratio": cpu_ratio,
                }
            )
    finally:
        for sess, _, _ in made.values():
            sess.close()
    return {
        "backend": backend,
        "version": version,
        "plain_ms": statistics.median(r["plain_ms"] for r in per_repeat),
        "cond_ms": statistics.median(r["cond_ms"] for r in per_repeat),
        "ratio": statistics.median(r["ratio"] for r in per_repeat),
        "ratios": [round(r["ratio"], 3) for r in per_repeat],
        "cpu_ratio": statistics.median(r["cpu_ratio"] for r in per_repeat),
    }


def _subprocess(backend: str, python: str, args) -> dict | None:
    if not os.path.exists(python):
        return None
    cmd = [python, __file__, "--backend", backend]
    for flag in ("steps", "warmup", "block", "repeats"):
        cmd += [f"--{flag}", str(getattr(args, flag))]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, check=False)
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("asyncflow", "tf"))
    parser.add_argument("--steps", type=int, default=60, help="timed steps per graph and repeat")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--block", type=int, default=10, help="steps per turn")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.backend:
        print(json.dumps(bench(args.backend, args.steps, args.warmup, args.block, args.repeats)))
        return
    tf_python = os.environ.get("ASYNCFLOW_TF_PYTHON", "/work/tfvenv/bin/python")
    results = [
        _subprocess("asyncflow", sys.executable, args) or {"backend": "asyncflow"},
        _subprocess("tf", tf_python, args) or {"backend": "tf"},
    ]
    print(
        f"MLP 784-512-512-10 step, batch {BATCH}, dropout {KEEP} in tf.cond vs unconditional "
        f"(medians over {args.repeats} repeats of {args.steps} steps per graph)"
    )
    print(
        f"{'backend':<10} {'plain ms':>9} {'cond ms':>9} {'cond/plain':>11} {'(cpu time)':>11}"
        "  per repeat (wall)"
    )
    for r in results:
        if r.get("ratio") is None:
            print(f"{r['backend']:<10} {'n/a':>9}")
            continue
        print(
            f"{r['backend']:<10} {r['plain_ms']:>9.2f} {r['cond_ms']:>9.2f} "
            f"{r['ratio']:>10.3f}x {r['cpu_ratio']:>10.3f}x  {r['ratios']}"
        )


if __name__ == "__main__":
    main()
