"""What flushing denormals costs and saves (devices/denormal.py), in one process.

    .venv/bin/python benchmarks/denormal_bench.py [--rounds 10] [--steps 400]

Each case is a session step timed with denormals flushed (as TF's kernels run) and
with the modes left alone (the reference, `denormal._fns` set to None for its turns);
turns alternate, and the table gives the medians of the per-turn median step times:

- `tiny`: `x + 1.0` on a scalar, where the scope around the driver (a few foreign
  calls a step) is all there is to see;
- `matmul_denormal`: a [32,784]x[784,256] product whose operand holds denormals
  (half its elements 1e-39), as a saturated layer's gradient does;
- `elementwise_denormal`: sigmoid(x) * y + x over [256,784] with x's elements
  denormal: each operation meets them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncflow as tf  # noqa: E402
from asyncflow.devices import denormal  # noqa: E402


def _cases(tf):
    rng = np.random.default_rng(0)
    cases = {}
    x = tf.placeholder(tf.float32, [])
    cases["tiny"] = (x + 1.0, {x: np.float32(1.0)})
    a = tf.placeholder(tf.float32, [32, 784])
    w = tf.constant(rng.standard_normal((784, 256)).astype(np.float32))
    fed = rng.standard_normal((32, 784)).astype(np.float32)
    fed[:, ::2] = np.float32(1e-39)
    cases["matmul_denormal"] = (tf.matmul(a, w), {a: fed})
    e = tf.placeholder(tf.float32, [256, 784])
    y = tf.constant(rng.standard_normal((256, 784)).astype(np.float32))
    tiny = np.full((256, 784), np.float32(1e-39))
    cases["elementwise_denormal"] = (tf.sigmoid(e) * y + e, {e: tiny})
    return cases


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=400)
    args = ap.parse_args(argv)
    if not denormal.active():
        print("denormal modes are not set on this platform: nothing to compare")
        return 0
    graph = tf.Graph()
    with graph.as_default():
        cases = _cases(tf)
    fns = denormal._fns
    times: dict = {(name, mode): [] for name in cases for mode in ("flushed", "kept")}
    with tf.Session(graph=graph) as sess:
        for fetch, feed in cases.values():
            for _ in range(50):
                sess.run(fetch, feed)
        for r in range(args.rounds):
            for name, (fetch, feed) in cases.items():
                modes = ("flushed", "kept") if r % 2 == 0 else ("kept", "flushed")
                for mode in modes:
                    denormal._fns = fns if mode == "flushed" else None
                    try:
                        ts = []
                        for _ in range(args.steps):
                            t0 = time.perf_counter()
                            sess.run(fetch, feed)
                            ts.append(time.perf_counter() - t0)
                    finally:
                        denormal._fns = fns
                    times[name, mode].append(statistics.median(ts) * 1e6)
    print("| case | flushed us/step | kept us/step | flushed / kept |")
    print("|---|---|---|---|")
    for name in cases:
        f = statistics.median(times[name, "flushed"])
        k = statistics.median(times[name, "kept"])
        print(f"| {name} | {f:.1f} | {k:.1f} | {f / k:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
