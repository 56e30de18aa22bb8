"""Training-step benchmark: the MLP step of issue 4 in asyncflow, NumPy by hand, TF1, PyTorch.

The step: 784-512-512-10 MLP with ReLU, sparse softmax cross-entropy (mean), batch 128,
plain SGD with learning rate 0.01, float32; inputs fed every step.  Times are medians
of `--steps` steps after `--warmup` untimed ones.

    .venv/bin/python benchmarks/train_bench.py               # everything, one table
    .venv/bin/python benchmarks/train_bench.py --backend asyncflow   # one JSON line
    /work/tfvenv/bin/python benchmarks/train_bench.py --backend tf

Without --backend, NumPy and asyncflow run in this process, taking turns of `--block`
steps (10) so that machine noise hits them alike (not step by step: each step would then
start with the other backend's data and code in the caches); PyTorch (when importable)
runs in a subprocess of this interpreter, because its OpenMP threads keep spinning
between its steps and would steal the cores from the NumPy/OpenBLAS steps; TF1 runs in
the TensorFlow interpreter (`$ASYNCFLOW_TF_PYTHON`, else /work/tfvenv/bin/python) as a
subprocess.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

BATCH, SIZES, LR = 128, (784, 512, 512, 10), 0.01


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


def _time(step, steps: int, warmup: int) -> dict:
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3}


# -- graph backends (asyncflow and tf.compat.v1 run the same code) ------------------------


def _graph_step(tf, xent, sgd, config=None):
    x_val, y_val, weights = _data()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, SIZES[0]], name="x")
        y = tf.placeholder(tf.int32, [None], name="y")
        h = x
        params = [tf.Variable(w, name=f"p{i}") for i, w in enumerate(weights)]
        for k in range(3):
            h = tf.matmul(h, params[2 * k]) + params[2 * k + 1]
            if k < 2:
                h = tf.nn.relu(h)
        loss = tf.reduce_mean(xent(labels=y, logits=h))
        train = sgd(LR).minimize(loss)
        init = tf.global_variables_initializer()
    sess = (
        tf.Session(graph=graph, config=config) if config is not None else tf.Session(graph=graph)
    )
    sess.run(init)
    feed = {x: x_val, y: y_val}
    first = float(sess.run(loss, feed))
    return (lambda: sess.run(train, feed)), sess, first


def make_asyncflow():
    """(step, loss before the first update, close) for asyncflow."""
    import asyncflow as af
    from asyncflow.ops import fused_updates, nn_impl

    fused_updates.warm()  # the compiled optimizer loops, before any timing
    from asyncflow.train.optimizers import GradientDescentOptimizer

    step, sess, first = _graph_step(
        af, nn_impl.sparse_softmax_cross_entropy_with_logits, GradientDescentOptimizer
    )
    return step, first, sess.close


def make_tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow.compat.v1 as tf

    tf.disable_eager_execution()
    tf.disable_resource_variables()
    step, sess, first = _graph_step(
        tf,
        tf.nn.sparse_softmax_cross_entropy_with_logits,
        tf.train.GradientDescentOptimizer,
    )
    return step, first, sess.close


# -- NumPy by hand: the floor ---------------------------------------------------------------


def make_numpy():
    x, y, params = _data()
    w1, b1, w2, b2, w3, b3 = params
    rows = np.arange(BATCH)

    def step():
        z1 = x @ w1
        z1 += b1
        h1 = np.maximum(z1, 0)
        z2 = h1 @ w2
        z2 += b2
        h2 = np.maximum(z2, 0)
        logits = h2 @ w3
        logits += b3
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        p = e / e.sum(axis=1, keepdims=True)
        loss = -np.log(p[rows, y]).mean()
        p[rows, y] -= 1
        p /= BATCH
        dw3, db3 = h2.T @ p, p.sum(0)
        d2 = p @ w3.T
        d2 *= z2 > 0
        dw2, db2 = h1.T @ d2, d2.sum(0)
        d1 = d2 @ w2.T
        d1 *= z1 > 0
        dw1, db1 = x.T @ d1, d1.sum(0)
        for w, g in ((w1, dw1), (b1, db1), (w2, dw2), (b2, db2), (w3, dw3), (b3, db3)):
            w -= LR * g
        return loss

    first = float(step())  # the loss before the first update, as the others report
    return step, first, lambda: None


# -- PyTorch ----------------------------------------------------------------------------------


def make_torch():
    import torch

    x, y, params = _data()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    opt = torch.optim.SGD(ps, lr=LR)

    def step():
        h = xt
        for k in range(3):
            h = h @ ps[2 * k] + ps[2 * k + 1]
            if k < 2:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, yt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step, step().item(), lambda: None


MAKERS = {"asyncflow": make_asyncflow, "numpy": make_numpy, "tf": make_tf, "torch": make_torch}


def bench(backend: str, steps: int, warmup: int) -> dict:
    step, first, close = MAKERS[backend]()
    try:
        return {"backend": backend, "first_loss": first, **_time(step, steps, warmup)}
    finally:
        close()


def bench_interleaved(backends: list[str], steps: int, warmup: int, block: int = 10) -> list[dict]:
    """Time the backends in turn, `block` steps each, so that machine noise hits all
    alike.  Blocks rather than single steps: a step right after another backend's
    finds the caches full of that backend's data and code (a gemm evicts the Python
    working set), which a training loop never does; every step is still counted."""
    made = {b: MAKERS[b]() for b in backends}
    times = {b: [] for b in backends}
    try:
        for step, _, _ in made.values():
            for _ in range(warmup):
                step()
        while len(times[backends[0]]) < steps:
            for b, (step, _, _) in made.items():
                for _ in range(min(block, steps - len(times[b]))):
                    t0 = time.perf_counter()
                    step()
                    times[b].append(time.perf_counter() - t0)
    finally:
        for _, _, close in made.values():
            close()
    return [
        {
            "backend": b,
            "first_loss": made[b][1],
            "median_ms": statistics.median(times[b]) * 1e3,
            "min_ms": min(times[b]) * 1e3,
        }
        for b in backends
    ]


def _subprocess(backend: str, python: str, steps: int, warmup: int) -> dict | None:
    if not os.path.exists(python):
        return None
    cmd = [python, __file__, "--backend", backend, "--steps", str(steps), "--warmup", str(warmup)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=sorted(MAKERS))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--block", type=int, default=10, help="steps per turn (interleaved)")
    args = parser.parse_args()
    if args.backend:
        print(json.dumps(bench(args.backend, args.steps, args.warmup)))
        return
    results = bench_interleaved(["numpy", "asyncflow"], args.steps, args.warmup, args.block)
    tf_python = os.environ.get("ASYNCFLOW_TF_PYTHON", "/work/tfvenv/bin/python")
    for backend, python in (("tf", tf_python), ("torch", sys.executable)):
        if backend == "torch" and importlib.util.find_spec("torch") is None:
            results.append({"backend": "torch", "median_ms": None})
            continue
        r = _subprocess(backend, python, args.steps, args.warmup)
        results.append(r or {"backend": backend, "median_ms": None})
    floor = results[0]["median_ms"]
    print(f"MLP step 784-512-512-10, batch {BATCH}, SGD {LR}, float32 (median of {args.steps};")
    print(f"numpy and asyncflow in one process, taking turns of {args.block} steps;")
    print(" tf and torch each in a subprocess)")
    print(f"{'backend':<10} {'median ms':>10} {'min ms':>8} {'vs NumPy':>9} {'first loss':>11}")
    for r in results:
        if r.get("median_ms") is None:
            print(f"{r['backend']:<10} {'n/a':>10}")
            continue
        print(
            f"{r['backend']:<10} {r['median_ms']:>10.2f} {r['min_ms']:>8.2f} "
            f"{r['median_ms'] / floor:>8.2f}x {r['first_loss']:>11.5f}"
        )


if __name__ == "__main__":
    main()
