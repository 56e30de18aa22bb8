"""Queue benchmark: enqueue/dequeue through `sess.run`, asyncflow beside tf.compat.v1.

    .venv/bin/python benchmarks/queue_bench.py --backend asyncflow
    /work/tfvenv/bin/python benchmarks/queue_bench.py --backend tf

Prints one JSON object (the last line of stdout): median µs per `run` call for
- enqueue_1 / dequeue_1: one float32 scalar element per call (the enqueue is fed);
- enqueue_many_100 / dequeue_many_100: 100 elements per call;
- (asyncflow only) arun_enqueue_1 / arun_dequeue_1: the same through `await arun`.
Target (issue 6): asyncflow <= 0.5x TF per call.  Same TF1 code for both backends:
`FIFOQueue`, `placeholder`, `Session`, `float32`, `Graph().as_default()`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core import Backend  # noqa: E402


def _fifo(b: Backend):
    q = getattr(b.tf, "FIFOQueue", None)
    if q is None:  # until asyncflow re-exports it as af.FIFOQueue
        from asyncflow.ops.data_flow_ops import FIFOQueue as q
    return q


def _per_call_us(fn, n: int) -> float:
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n * 1e6
    finally:
        gc.enable()


def bench(b: Backend, args) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        for k, v in _one_repeat(b, args).items():
            out.setdefault(k, []).append(v)
    return {k: round(statistics.median(v), 2) for k, v in out.items()}


def _one_repeat(b: Backend, args) -> dict[str, float]:
    tf, steps, res = b.tf, args.steps, {}
    g = tf.Graph()
    with g.as_default():
        q = _fifo(b)(steps * 100 + args.warmup * 100 + 10, [tf.float32], shapes=[[]])
        x = tf.placeholder(tf.float32, [])
        xs = tf.placeholder(tf.float32, [100])
        enq, deq = q.enqueue(x), q.dequeue()
        enq_many, deq_many = q.enqueue_many([xs]), q.dequeue_many(100)
        one, hundred = np.float32(1.0), np.ones(100, np.float32)
        with b.session() as sess:
            for _ in range(args.warmup):
                sess.run(enq, {x: one})
                sess.run(deq)
                sess.run(enq_many, {xs: hundred})
                sess.run(deq_many)
            res["enqueue_1"] = _per_call_us(lambda: sess.run(enq, {x: one}), steps)
            res["dequeue_1"] = _per_call_us(lambda: sess.run(deq), steps)
            res["enqueue_many_100"] = _per_call_us(
                lambda: sess.run(enq_many, {xs: hundred}), steps
            )
            res["dequeue_many_100"] = _per_call_us(lambda: sess.run(deq_many), steps)
        if b.name == "asyncflow":
            res["arun_enqueue_1"], res["arun_dequeue_1"] = _arun(b, enq, deq, x, one, steps)
    return res


def _arun(b, enq, deq, x, one, steps):
    async def main():
        async with b.tf.Session() as s:
            for _ in range(100):
                await s.arun(enq, {x: one})
                await s.arun(deq)
            t0 = time.perf_counter()
            for _ in range(steps):
                await s.arun(enq, {x: one})
            t1 = time.perf_counter()
            for _ in range(steps):
                await s.arun(deq)
            t2 = time.perf_counter()
        return (t1 - t0) / steps * 1e6, (t2 - t1) / steps * 1e6

    return asyncio.run(main())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["asyncflow", "tf"], required=True)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    args = p.parse_args(argv)
    b = Backend(args.backend)
    result = {"backend": b.name, "version": b.version, "unit": "us_per_call_median"}
    result.update(bench(b, args))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
