"""Where a GPU step's and a host->device copy's time goes, for a real-GPU session.

`benchmarks/gpu_check.py` gives the table against the targets; this script says why a
row is what it is, in one short run:

1. profile: the host's time in a `gpu_check` MLP training step (784-512-512-10, b256,
   SGD), by function (cProfile over `--steps` steps after a warm-up), beside the step's
   median without the profiler.  On a GPU a step's host time is its cost: the kernels
   are microseconds each.
2. memcpy: the host's pageable -> pinned copy rate for a `--mib` buffer on 1..16 threads
   (what `copy_from_host`'s staging can reach), and the two ways around staging: the
   source registered in place (`cudaHostRegister`, then one DMA, then unregistered) and
   the DMA alone from memory already pinned.

    python benchmarks/gpu_probe.py [--steps 100] [--mib 256]
    ASYNCFLOW_FAKE_GPUS=1 python benchmarks/gpu_probe.py --steps 5 --mib 8   # smoke test
"""

from __future__ import annotations

import argparse
import concurrent.futures
import cProfile
import io
import pathlib
import pstats
import statistics
import sys
import time

import numpy as np

import asyncflow as af
from asyncflow.devices import gpu

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gpu_check  # noqa: E402 - benchmarks/gpu_check.py, beside this script


def profile_mlp(steps: int, top: int) -> None:
    g, x, y, loss, train, init = gpu_check._graph()
    xs, ys = gpu_check._data(max(steps, 5))
    with af.Session(graph=g, config=af.ConfigProto(allow_soft_placement=True)) as s:
        s.run(init)
        for i in range(5):
            s.run([loss, train], {x: xs[i], y: ys[i]})
        times = []
        for i in range(steps):
            t = time.perf_counter()
            s.run([loss, train], {x: xs[i], y: ys[i]})
            times.append(time.perf_counter() - t)
        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        for i in range(steps):
            s.run([loss, train], {x: xs[i], y: ys[i]})
        prof.disable()
        profiled = (time.perf_counter() - t) / steps
    print(
        f"MLP step: median {statistics.median(times) * 1e3:.3f} ms unprofiled, "
        f"{profiled * 1e3:.3f} ms a step profiled ({steps} steps)"
    )
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        st = pstats.Stats(prof, stream=out)
        st.sort_stats(key).print_stats(top)
        text = out.getvalue()
        print(f"--- by {key} (per {steps} steps)")
        print(text[text.find("ncalls") :])


def _rate(nbytes: int, seconds: float) -> str:
    return f"{nbytes / seconds / 1e9:6.2f} GB/s"


def copy_probe(mib: int) -> None:
    b = gpu.backend()
    xp = b.xp
    n = (mib << 20) // 4
    host = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    pinned = b.empty_pinned((n,), np.float32)
    nbytes = host.nbytes
    for threads in (1, 2, 4, 8, 16):
        parts = np.array_split(np.arange(n), threads)
        bounds = [(int(p[0]), int(p[-1]) + 1) for p in parts if len(p)]
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            best = []
            for _ in range(5):
                t = time.perf_counter()
                list(
                    pool.map(
                        lambda ab: np.copyto(pinned[ab[0] : ab[1]], host[ab[0] : ab[1]]), bounds
                    )
                )
                best.append(time.perf_counter() - t)
        print(
            f"pageable -> pinned memcpy, {threads:2d} threads: "
            f"{_rate(nbytes, statistics.median(best))}"
        )
    with xp.cuda.Device(0):
        dev = xp.empty((n,), np.float32)
        stream = xp.cuda.Stream(non_blocking=True)
        runs = []
        for _ in range(5):
            t = time.perf_counter()
            dev.set(pinned, stream=stream)
            stream.synchronize()
            runs.append(time.perf_counter() - t)
        print(f"DMA alone from pinned:                  {_rate(nbytes, statistics.median(runs))}")
        if b.name != "cupy":
            print("(stand-in: no cudaHostRegister)")
            return
        rt = xp.cuda.runtime
        reg, dma, unreg = [], [], []
        for _ in range(5):
            t0 = time.perf_counter()
            rt.hostRegister(host.ctypes.data, nbytes, 0)
            t1 = time.perf_counter()
            rt.memcpyAsync(
                dev.data.ptr, host.ctypes.data, nbytes, rt.memcpyHostToDevice, stream.ptr
            )
            stream.synchronize()
            t2 = time.perf_counter()
            rt.hostUnregister(host.ctypes.data)
            t3 = time.perf_counter()
            reg.append(t1 - t0)
            dma.append(t2 - t1)
            unreg.append(t3 - t2)
        total = statistics.median([a + b_ + c for a, b_, c in zip(reg, dma, unreg)])
        print(
            f"registered in place: register {statistics.median(reg) * 1e3:.2f} ms, "
            f"DMA {statistics.median(dma) * 1e3:.2f} ms, unregister "
            f"{statistics.median(unreg) * 1e3:.2f} ms: {_rate(nbytes, total)} in all"
        )
        ok = bool((dev[:1000].get() == host[:1000]).all())
        print(f"registered copy correct: {ok}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    b = gpu.backend()
    if b is None:
        print(f"no GPU: {gpu.unavailable_reason()}")
        return 2
    profile_mlp(args.steps, args.top)
    copy_probe(args.mib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
