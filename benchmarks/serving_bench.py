"""Serving benchmark: the digits MLP answering single-example requests at concurrency C.

A closed-loop load generator in the same process keeps C requests in flight (each
client sends its next request when the previous answer arrives) for a fixed time and
records every request's latency.  Three ways of serving are compared:

- ``asyncflow-batched``: ``ServableModel.predict`` with the dynamic Batcher, on one
  event loop (uvloop when present);
- ``asyncflow-unbatched``: ``await sess.arun(...)`` per request on the same loop;
- ``tf-threads``: TF1 ``session.run`` called from a ThreadPoolExecutor of C threads
  (run in /work/tfvenv by a subprocess: ``--backend tf``).

Usage::

    .venv/bin/python benchmarks/serving_bench.py            # all three, table + JSON
    .venv/bin/python benchmarks/serving_bench.py --backend asyncflow --json

Targets (issue 7): at C=64 batched throughput >= 3x tf-threads and p99 <= tf's; at
C=1 batched p50 <= 0.5x tf's.  The model is 64-128-10 (ReLU, softmax), trained for a
few hundred NumPy steps on sklearn's digits when scikit-learn is installed, otherwise
random weights (the arithmetic served is the same).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

CONCURRENCY = (1, 16, 64)
TF_PYTHON = os.environ.get("TF_PYTHON", "/work/tfvenv/bin/python")


# -- the model ----------------------------------------------------------------------------


def digits_data():
    """(X float32 [n, 64] scaled to [0, 1], y int64), or synthetic data without sklearn."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        rng = np.random.default_rng(0)
        return rng.random((1797, 64), dtype=np.float32), rng.integers(0, 10, 1797)
    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)


def train_weights(x, y, hidden=128, steps=300, lr=0.5, seed=0):
    """A 64-hidden-10 MLP trained with full-batch gradient descent in NumPy."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((x.shape[1], hidden)) * np.sqrt(2 / x.shape[1])).astype(np.float32)
    b1 = np.zeros(hidden, np.float32)
    w2 = (rng.standard_normal((hidden, 10)) * np.sqrt(1 / hidden)).astype(np.float32)
    b2 = np.zeros(10, np.float32)
    onehot = np.eye(10, dtype=np.float32)[y]
    for _ in range(steps):
        h = np.maximum(x @ w1 + b1, 0)
        logits = h @ w2 + b2
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        g = (p - onehot) / len(x)
        gw2, gb2 = h.T @ g, g.sum(0)
        gh = (g @ w2.T) * (h > 0)
        gw1, gb1 = x.T @ gh, gh.sum(0)
        w1 -= lr * gw1
        b1 -= lr * gb1
        w2 -= lr * gw2
        b2 -= lr * gb2
    acc = float((np.argmax(np.maximum(x @ w1 + b1, 0) @ w2 + b2, 1) == y).mean())
    return {"w1": w1, "b1": b1, "w2": w2, "b2": b2}, acc


def build_mlp(tf, weights):
    """x [None, 64] -> probabilities [None, 10]; the same calls for both backends."""
    x = tf.placeholder(tf.float32, [None, 64], name="x")
    h = tf.nn.relu(tf.matmul(x, tf.constant(weights["w1"])) + tf.constant(weights["b1"]))
    probs = tf.nn.softmax(tf.matmul(h, tf.constant(weights["w2"])) + tf.constant(weights["b2"]))
    return x, probs


def _stats(latencies, elapsed, n):
    a = np.asarray(latencies) * 1e3
    return {
        "requests": n,
        "throughput_rps": n / elapsed,
        "p50_ms": float(np.percentile(a, 50)),
        "p99_ms": float(np.percentile(a, 99)),
    }


# -- asyncflow ----------------------------------------------------------------------------


async def _closed_loop(call, rows, concurrency, duration):
    latencies = []
    stop_at = time.perf_counter() + duration
    perf = time.perf_counter

    async def client(i):
        k = i
        while perf() < stop_at:
            row = rows[k % len(rows)]
            k += concurrency
            t0 = perf()
            await call(row)
            latencies.append(perf() - t0)

    t0 = perf()
    await asyncio.gather(*(client(i) for i in range(concurrency)))
    return _stats(latencies, perf() - t0, len(latencies))


async def _bench_asyncflow(weights, rows, duration, batching):
    import asyncflow as af
    from asyncflow.serving import ServableModel

    g = af.Graph()
    with g.as_default():
        x, probs = build_mlp(af, weights)
    results = {}
    sess = af.Session(graph=g)
    try:
        await sess.arun([])  # bind to this loop
        model = ServableModel.from_session(sess, {"x": x}, {"probs": probs}, batching=batching)
        fetch = {"probs": probs}
        for c in CONCURRENCY:
            if batching is not None:

                async def call(row):
                    return await model.predict({"x": row})

                model.batcher().metrics.__init__()  # fresh metrics per concurrency
            else:

                async def call(row):
                    return await sess.arun(fetch, {x: row})

            await _closed_loop(call, rows, c, min(0.3, duration))  # warm-up
            results[c] = await _closed_loop(call, rows, c, duration)
            if batching is not None:
                snap = model.metrics()
                results[c]["mean_batch_size"] = snap["mean_batch_size"]
        expect = _reference(weights, rows[0])
        got = (await model.predict({"x": rows[0]}))["probs"]
        np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-5)
        if batching is not None:
            await model.aclose()
    finally:
        sess.close()
    return results


def _reference(weights, row):
    h = np.maximum(row @ weights["w1"] + weights["b1"], 0)
    logits = h @ weights["w2"] + weights["b2"]
    p = np.exp(logits - logits.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True)


def run_asyncflow(weights, rows, duration, batching):
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    return {
        "asyncflow-batched": runner(_bench_asyncflow(weights, rows, duration, batching)),
        "asyncflow-unbatched": runner(_bench_asyncflow(weights, rows, duration, None)),
    }


# -- tf.compat.v1 from threads ------------------------------------------------------------


def run_tf(weights, rows, duration):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow.compat.v1 as tf

    tf.disable_eager_execution()
    g = tf.Graph()
    with g.as_default():
        x, probs = build_mlp(tf, weights)
    sess = tf.Session(graph=g)
    results = {}
    for c in CONCURRENCY:
        for d in (min(0.3, duration), duration):
            latencies = []
            lock = threading.Lock()
            stop_at = time.perf_counter() + d

            def client(i, stop_at=stop_at, latencies=latencies, lock=lock, c=c):
                k = i
                mine = []
                while time.perf_counter() < stop_at:
                    row = rows[k % len(rows)]
                    k += c
                    t0 = time.perf_counter()
                    sess.run(probs, {x: row})
                    mine.append(time.perf_counter() - t0)
                with lock:
                    latencies.extend(mine)

            t0 = time.perf_counter()
            with ThreadPoolExecutor(c) as pool:
                list(pool.map(client, range(c)))
            results[c] = _stats(latencies, time.perf_counter() - t0, len(latencies))
    got = sess.run(probs, {x: rows[0]})
    np.testing.assert_allclose(got, _reference(weights, rows[0]), rtol=1e-4, atol=1e-5)
    sess.close()
    return {"tf-threads": results}


# -- driver -------------------------------------------------------------------------------


def _load_or_make(path):
    if path and os.path.exists(path):
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in ("w1", "b1", "w2", "b2")}, f["x"][:512]
    x, y = digits_data()
    weights, acc = train_weights(x, y)
    print(f"digits MLP 64-128-10 trained: accuracy {acc:.3f}", file=sys.stderr)
    if path:
        np.savez(path, x=x, **weights)
    return weights, x[:512]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["asyncflow", "tf", "all"], default="all")
    p.add_argument("--duration", type=float, default=2.0, help="seconds per measurement")
    p.add_argument("--weights", help=".npz with w1,b1,w2,b2,x (made if missing)")
    p.add_argument("--max-batch-size", type=int, default=64)
    p.add_argument("--max-concurrent-batches", type=int, default=1)
    p.add_argument("--batch-timeout-micros", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print only one JSON object")
    args = p.parse_args()
    tmp = None
    if args.backend == "all" and not args.weights:
        tmp = tempfile.TemporaryDirectory()
        args.weights = os.path.join(tmp.name, "digits_mlp.npz")
    weights, x = _load_or_make(args.weights)
    rows = [x[i : i + 1] for i in range(len(x))]
    batching = {
        "max_batch_size": args.max_batch_size,
        "max_concurrent_batches": args.max_concurrent_batches,
        "batch_timeout_micros": args.batch_timeout_micros,
        "max_enqueued_batches": 1000,
    }
    results = {}
    if args.backend in ("asyncflow", "all"):
        results.update(run_asyncflow(weights, rows, args.duration, batching))
    if args.backend == "tf":
        results.update(run_tf(weights, rows, args.duration))
    if args.backend == "all":
        out = subprocess.run(
            [
                TF_PYTHON,
                __file__,
                "--backend",
                "tf",
                "--json",
                "--weights",
                args.weights,
                "--duration",
                str(args.duration),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode == 0:
            results.update(json.loads(out.stdout.strip().splitlines()[-1]))
        else:
            print(f"tf backend failed:\n{out.stderr[-2000:]}", file=sys.stderr)
    if tmp is not None:
        tmp.cleanup()
    results = {k: {str(c): v for c, v in r.items()} for k, r in results.items()}
    if args.json:
        print(json.dumps(results))
        return
    _print_table(results)
    print(json.dumps(results))


def _print_table(results):
    print(f"{'backend':<22}{'C':>4}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'batch':>7}")
    for name, per_c in results.items():
        for c, r in per_c.items():
            mb = r.get("mean_batch_size")
            print(
                f"{name:<22}{c:>4}{r['throughput_rps']:>10.0f}{r['p50_ms']:>9.3f}"
                f"{r['p99_ms']:>9.3f}{(f'{mb:.1f}' if mb else ''):>7}"
            )
    tf = results.get("tf-threads")
    ab = results.get("asyncflow-batched")
    if tf and ab:
        print("\ntargets:")
        t64, a64 = tf["64"], ab["64"]
        print(f"  C=64 throughput x{a64['throughput_rps'] / t64['throughput_rps']:.2f} (>= 3)")
        print(f"  C=64 p99 {a64['p99_ms']:.3f} ms vs tf {t64['p99_ms']:.3f} ms (<=)")
        ratio = ab["1"]["p50_ms"] / tf["1"]["p50_ms"]
        print(f"  C=1 p50 ratio {ratio:.2f} (<= 0.5)")


if __name__ == "__main__":
    main()
