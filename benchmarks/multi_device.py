"""Multi-device benchmarks (issue 3), medians over repeats, side by side in one run.

a. Two independent chains of 20 matmuls (1024x1024 float32): both on /cpu:0 versus
   one on /cpu:0 and one on /cpu:1 (ConfigProto(device_count={"CPU": 2}) in both runs,
   so the device setup is the same and only the placement differs), run alternately.
b. A 64 MiB float32 tensor sent from /cpu:0 to /cpu:1 and fetched, versus one
   `np.copyto` of the same array (the cost of one memory copy), and versus the same
   graph on one device.

    .venv/bin/python benchmarks/multi_device.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import asyncflow as af


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up: plans, thread pools, BLAS buffers
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def _chains_session(devices: tuple[str, str]):
    g = af.Graph()
    with g.as_default():
        a = af.constant(np.random.default_rng(0).random((1024, 1024), np.float32) * 1e-3)
        ends = []
        for dev in devices:
            with af.device(dev):
                y = a
                for _ in range(20):
                    y = af.matmul(a, y)
                ends.append(y)
    sess = af.Session(graph=g, config=af.ConfigProto(device_count={"CPU": 2}))
    return sess, ends


def matmul_chains(repeats: int) -> tuple[float, float]:
    """Both placements, run alternately so machine noise hits them alike."""
    (s1, e1), (s2, e2) = (
        _chains_session(("/cpu:0", "/cpu:0")),
        _chains_session(("/cpu:0", "/cpu:1")),
    )
    try:
        s1.run(e1)
        s2.run(e2)
        t1, t2 = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            s1.run(e1)
            t1.append(time.perf_counter() - t)
            t = time.perf_counter()
            s2.run(e2)
            t2.append(time.perf_counter() - t)
        return float(np.median(t1)), float(np.median(t2))
    finally:
        s1.close()
        s2.close()


def transfer(devices: tuple[str, str], repeats: int) -> float:
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [16 * 1024 * 1024])
        with af.device(devices[0]):
            a = af.identity(x)
        with af.device(devices[1]):
            b = af.identity(a)
        value = np.ones(16 * 1024 * 1024, np.float32)
        with af.Session(config=af.ConfigProto(device_count={"CPU": 2})) as s:
            return _median_time(lambda: s.run(b.op, {x: value}), repeats)


def copy_floor(repeats: int) -> float:
    src = np.ones(16 * 1024 * 1024, np.float32)
    dst = np.empty_like(src)
    return _median_time(lambda: np.copyto(dst, src), repeats)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    one, two = matmul_chains(args.repeats)
    same = transfer(("/cpu:0", "/cpu:0"), args.repeats)
    cross = transfer(("/cpu:0", "/cpu:1"), args.repeats)
    floor = copy_floor(args.repeats)
    print("| metric | time (median) | comparison |")
    print("|---|---|---|")
    print(f"| 2 matmul chains, both on /cpu:0 | {one * 1e3:.1f} ms | baseline |")
    print(f"| 2 matmul chains, /cpu:0 + /cpu:1 | {two * 1e3:.1f} ms | {one / two:.2f}x faster |")
    print(
        f"| 64 MiB /cpu:0 -> /cpu:1 step | {cross * 1e3:.2f} ms | "
        f"{cross / floor:.2f}x one np.copyto ({floor * 1e3:.2f} ms) |"
    )
    print(
        f"| same step on one device | {same * 1e3:.2f} ms | "
        f"transfer adds {max(0.0, cross - same) * 1e3:.2f} ms |"
    )


if __name__ == "__main__":
    main()
