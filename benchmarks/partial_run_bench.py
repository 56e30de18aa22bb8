"""Partial runs: TF's partial_run example (r1 = a + b, then r2 = r1 * c) as one
`partial_run_setup` and two `partial_run` calls, beside the same two values through
two plain `sess.run` steps; asyncflow beside tf.compat.v1.

    .venv/bin/python benchmarks/partial_run_bench.py --backend asyncflow
    /work/tfvenv/bin/python benchmarks/partial_run_bench.py --backend tf

Prints one JSON object (the last line of stdout): median µs per sequence over repeats
- partial: setup + partial_run(r1, {a, b}) + partial_run(r2, {c});
- two_runs: run(r1, {a, b}) + run(r2, {a, b, c}) (what a program without partial runs
  does, computing r1 twice);
- (asyncflow only) apartial: the partial sequence awaited on a running loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core import Backend  # noqa: E402


def _graph(tf):
    a = tf.placeholder(tf.float32, shape=[])
    b = tf.placeholder(tf.float32, shape=[])
    c = tf.placeholder(tf.float32, shape=[])
    r1 = tf.add(a, b)
    r2 = tf.multiply(r1, c)
    return a, b, c, r1, r2


def _per_sequence_us(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def _one_repeat(bk: Backend, steps: int) -> dict[str, float]:
    tf = bk.tf
    with tf.Graph().as_default():
        a, b, c, r1, r2 = _graph(tf)
        with bk.session() as sess:

            def partial():
                h = sess.partial_run_setup([r1, r2], [a, b, c])
                v = sess.partial_run(h, r1, feed_dict={a: 1.0, b: 2.0})
                return sess.partial_run(h, r2, feed_dict={c: v})

            def two_runs():
                v = sess.run(r1, {a: 1.0, b: 2.0})
                return sess.run(r2, {a: 1.0, b: 2.0, c: v})

            for _ in range(50):
                assert partial() == 9.0 and two_runs() == 9.0
            out = {
                "partial": _per_sequence_us(partial, steps),
                "two_runs": _per_sequence_us(two_runs, steps),
            }
        if bk.name == "asyncflow":
            out["apartial"] = _apartial(tf, steps)
    return out


def _apartial(tf, steps: int) -> float:
    async def main():
        a, b, c, r1, r2 = _graph(tf)
        async with tf.Session() as sess:

            async def seq():
                h = await sess.apartial_run_setup([r1, r2], [a, b, c])
                v = await sess.apartial_run(h, r1, feed_dict={a: 1.0, b: 2.0})
                return await sess.apartial_run(h, r2, feed_dict={c: v})

            for _ in range(50):
                await seq()
            t0 = time.perf_counter()
            for _ in range(steps):
                await seq()
            return (time.perf_counter() - t0) / steps * 1e6

    with tf.Graph().as_default():
        return asyncio.run(main())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["asyncflow", "tf"], required=True)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=500)
    args = p.parse_args(argv)
    bk = Backend(args.backend)
    runs: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        for k, v in _one_repeat(bk, args.steps).items():
            runs.setdefault(k, []).append(v)
    result = {"backend": bk.name, "unit": "us_per_sequence_median"}
    result.update({k: round(statistics.median(v), 1) for k, v in runs.items()})
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
