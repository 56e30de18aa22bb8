"""GPU check for a machine with an NVIDIA GPU and CuPy (issue 14's targets), one table.

1. The op table (tests/test_device_generic.py's cases, forward and gradient ops) run by a
   session on GPU:0 against the same graphs on the CPU (NumPy).
2. An MLP training step (784-512-512-10, batch 256, SGD; the batch fed from the host and
   the loss fetched each step) against a hand-written CuPy step doing the same work
   (weights resident on the GPU, same feed and fetch); the same for a small CNN
   (benchmarks/gpu_cnn.py).  On the stand-in, the launches of each step instead.
3. Host<->device copy GB/s of a 256 MiB float32 buffer through the device's copy path
   (`copy_from_host` / `copy_to_host`: pinned staging, copy streams, events) against
   CuPy's own asynchronous copy of the same buffer from/to pinned memory.
4. Copy/compute overlap: a big copy on the h2d stream and matmuls on the compute stream,
   apart and together.
5. Loop citizenship: a 1 ms ticker on the event loop while training steps are awaited
   (`sess.arun`); the largest gap it saw (target: <= 5 ms).

    python benchmarks/gpu_check.py [--steps 50]
    ASYNCFLOW_FAKE_GPUS=1 python benchmarks/gpu_check.py --quick   # smoke-test the script

On the stand-in the numbers mean nothing (it is a correctness tool); the script says so.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import pathlib
import statistics
import sys
import time

import numpy as np

import asyncflow as af
from asyncflow.devices import gpu

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gpu_cnn  # noqa: E402 - benchmarks/gpu_cnn.py, beside this script

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _cases():
    sys.path.insert(0, str(ROOT / "tests"))
    spec = importlib.util.spec_from_file_location(
        "test_device_generic", ROOT / "tests" / "test_device_generic.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.CASES


def op_table() -> tuple[int, int, list[str]]:
    passed, failures = 0, []
    cases = _cases()
    for name in sorted(cases):
        g = af.Graph()
        with g.as_default():
            fetches, feeds = cases[name]()
            fetches = [t for t in fetches if t is not None]
        with af.Session(graph=g, config=af.ConfigProto(device_count={"GPU": 0})) as s:
            want = s.run(fetches, feeds)
        try:
            with af.Session(graph=g, config=af.ConfigProto(allow_soft_placement=True)) as s:
                got = s.run(fetches, feeds)
            for t, a, b in zip(fetches, got, want, strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=t.name)
            passed += 1
        except Exception as e:  # reported in the table, not raised
            failures.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
    return passed, len(cases), failures


SIZES = (784, 512, 512, 10)
BATCH = 256
LR = 0.01


def _data(steps):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((steps, BATCH, SIZES[0])).astype(np.float32)
    ys = rng.integers(0, SIZES[-1], (steps, BATCH)).astype(np.int32)
    return xs, ys


def _init():
    rng = np.random.default_rng(1)
    ws = [
        (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
        for a, b in zip(SIZES[:-1], SIZES[1:])
    ]
    bs = [np.zeros(b, np.float32) for b in SIZES[1:]]
    return ws, bs


def _graph():
    ws, bs = _init()
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [BATCH, SIZES[0]], name="x")
        y = af.placeholder(af.int32, [BATCH], name="y")
        h = x
        for i, (w0, b0) in enumerate(zip(ws, bs)):
            w = af.Variable(w0, name=f"w{i}")
            b = af.Variable(b0, name=f"b{i}")
            h = af.matmul(h, w) + b
            if i < len(ws) - 1:
                h = af.nn.relu(h)
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        train = af.train.GradientDescentOptimizer(LR).minimize(loss)
        init = af.global_variables_initializer()
    return g, x, y, loss, train, init


def asyncflow_mlp(steps) -> tuple[float, list[float]]:
    g, x, y, loss, train, init = _graph()
    xs, ys = _data(steps)
    losses, times = [], []
    with af.Session(graph=g, config=af.ConfigProto(allow_soft_placement=True)) as s:
        s.run(init)
        for i in range(steps):
            t = time.perf_counter()
            losses.append(float(s.run([loss, train], {x: xs[i], y: ys[i]})[0]))
            times.append(time.perf_counter() - t)
    return statistics.median(times[2:]), losses


def cupy_mlp(cp, steps, counter=None) -> tuple[float, list[float]]:
    """The same step by hand: forward, softmax cross-entropy, backward, SGD.  With a
    `counter` dict (stand-in only), step 1's launches are put in it."""
    ws, bs = _init()
    ws = [cp.asarray(w) for w in ws]
    bs = [cp.asarray(b) for b in bs]
    xs, ys = _data(steps)
    losses, times = [], []
    for i in range(steps):
        if counter is not None and i == 1:
            _fake().reset_launches()
        t = time.perf_counter()
        x = cp.asarray(xs[i])
        y = cp.asarray(ys[i])
        acts = [x]
        h = x
        for k, (w, b) in enumerate(zip(ws, bs)):
            h = h @ w + b
            if k < len(ws) - 1:
                h = cp.maximum(h, 0)
            acts.append(h)
        logits = acts[-1]
        m = logits.max(axis=1, keepdims=True)
        e = cp.exp(logits - m)
        p = e / e.sum(axis=1, keepdims=True)
        onehot = cp.zeros_like(p)
        onehot[cp.arange(BATCH), y] = 1
        loss = -(cp.log(p + 1e-30) * onehot).sum() / BATCH
        g = (p - onehot) / BATCH
        for k in range(len(ws) - 1, -1, -1):
            a = acts[k]
            gw = a.T @ g
            gb = g.sum(axis=0)
            if k > 0:
                g = (g @ ws[k].T) * (acts[k] > 0)
            ws[k] -= LR * gw
            bs[k] -= LR * gb
        losses.append(float(cp.asnumpy(loss)))
        times.append(time.perf_counter() - t)
        if counter is not None and i == 1:
            counter.update(_fake().launches())
    return statistics.median(times[2:]), losses


def launches_per_step() -> tuple[dict, dict]:
    """Kernel launches and copies of one MLP step, asyncflow's and the hand-written
    one's, as the stand-in counts them (views and allocations launch nothing; a fused
    kernel launches once).  CuPy keeps no such count: stand-in only."""
    fake_cupy = _fake()
    g, x, y, loss, train, init = _graph()
    xs, ys = _data(3)
    with af.Session(graph=g, config=af.ConfigProto(allow_soft_placement=True)) as s:
        s.run(init)
        s.run([loss, train], {x: xs[0], y: ys[0]})
        fake_cupy.reset_launches()
        s.run([loss, train], {x: xs[1], y: ys[1]})
        ours = fake_cupy.launches()
    theirs: dict = {}
    cupy_mlp(fake_cupy.module, 3, counter=theirs)
    return ours, theirs


def _fake():
    from asyncflow.devices import fake_cupy

    return fake_cupy


async def copy_rates(mib: int, n: int = 4096):
    b = gpu.backend()
    (dev,) = gpu.create_gpus(af.ConfigProto(), "/job:localhost/replica:0/task:0/device:", 1)
    cp, phys = b.xp, dev._phys
    host = np.random.default_rng(0).random(mib * (1 << 20) // 4, dtype=np.float32)
    nbytes = host.nbytes

    async def ours_h2d():
        v = await dev.copy_from_host(host)
        await dev._wait(phys.compute)
        return v

    d = await ours_h2d()
    t = time.perf_counter()
    for _ in range(3):
        d = await ours_h2d()
    h2d = 3 * nbytes / (time.perf_counter() - t) / 1e9
    await dev.copy_to_host(d)
    t = time.perf_counter()
    for _ in range(3):
        await dev.copy_to_host(d)
    d2h = 3 * nbytes / (time.perf_counter() - t) / 1e9

    # CuPy's own: pinned buffer, one stream, async copy, synchronise.
    pinned = b.empty_pinned(host.shape, host.dtype)
    np.copyto(pinned, host)
    with phys.cuda_device:
        s = cp.cuda.Stream(non_blocking=True)
        dd = cp.empty(host.shape, host.dtype)
        dd.set(pinned, stream=s)
        s.synchronize()
        t = time.perf_counter()
        for _ in range(3):
            dd.set(pinned, stream=s)
            s.synchronize()
        ref_h2d = 3 * nbytes / (time.perf_counter() - t) / 1e9
        out = b.empty_pinned(host.shape, host.dtype)
        t = time.perf_counter()
        for _ in range(3):
            dd.get(stream=s, out=out, blocking=False)
            s.synchronize()
        ref_d2h = 3 * nbytes / (time.perf_counter() - t) / 1e9
        # CuPy from and to the same pageable NumPy buffer (what `cp.asarray(host)` and
        # `cp.asnumpy(d)` do: the driver stages it, synchronously).
        cp.asarray(host)
        t = time.perf_counter()
        for _ in range(3):
            cp.asarray(host)
        cp.cuda.Device().synchronize()
        page_h2d = 3 * nbytes / (time.perf_counter() - t) / 1e9
        t = time.perf_counter()
        for _ in range(3):
            cp.asnumpy(dd)
        page_d2h = 3 * nbytes / (time.perf_counter() - t) / 1e9

    # Overlap: matmuls on the compute stream, one big copy on the h2d stream.
    with phys.cuda_device, phys.compute:
        a = cp.ones((n, n), np.float32)

    async def matmuls():
        with phys.cuda_device, phys.compute:
            for _ in range(10):
                a @ a  # noqa: B018 - enqueued work
        await dev._wait(phys.compute)

    async def copy():
        await dev.copy_from_host(host)
        await dev._wait(phys.h2d)

    t = time.perf_counter()
    await matmuls()
    t_mm = time.perf_counter() - t
    t = time.perf_counter()
    await copy()
    t_copy = time.perf_counter() - t
    t = time.perf_counter()
    await asyncio.gather(copy(), matmuls())
    t_both = time.perf_counter() - t
    return h2d, d2h, ref_h2d, ref_d2h, page_h2d, page_d2h, (t_mm, t_copy, t_both)


async def ticker_gap(steps) -> float:
    g, x, y, loss, train, init = _graph()
    xs, ys = _data(steps)
    gaps = []
    stop = False

    async def tick():
        last = time.perf_counter()
        while not stop:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with af.Session(graph=g, config=af.ConfigProto(allow_soft_placement=True)) as s:
        await s.arun(init)
        await s.arun([loss, train], {x: xs[0], y: ys[0]})  # plans built before timing
        ticker = asyncio.ensure_future(tick())
        for i in range(steps):
            await s.arun([loss, train], {x: xs[i], y: ys[i]})
        stop = True
        await ticker
    return max(gaps) if gaps else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--copy-mib", type=int, default=256)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.copy_mib = 6, 8
    b = gpu.backend()
    if b is None:
        print(f"no GPU: {gpu.unavailable_reason()}")
        return 2
    fake = b.name != "cupy"
    with b.xp.cuda.Device(0):
        props = b.xp.cuda.runtime.getDeviceProperties(0)
    card = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    rows = []
    passed, total, failures = op_table()
    rows.append(("op table on GPU:0 vs NumPy", f"{passed}/{total} cases pass", "all pass"))
    t_af, l_af = asyncflow_mlp(args.steps)
    t_cp, l_cp = cupy_mlp(b.xp, args.steps)
    same = np.allclose(l_af, l_cp, rtol=2e-3, atol=1e-4)
    rows.append(
        (
            "MLP step (784-512-512-10, b256)",
            f"{t_af * 1e3:.2f} ms vs CuPy {t_cp * 1e3:.2f} ms = {t_af / t_cp:.2f}x",
            "<= 1.2x" + ("" if same else "  (LOSSES DIFFER)"),
        )
    )

    def fmt(c):
        return f"{c['kernels']} kernels + {c['h2d'] + c['d2h'] + c['peer']} copies"

    if fake:
        ours, theirs = launches_per_step()
        rows.append(("  launches per MLP step", f"{fmt(ours)} vs CuPy {fmt(theirs)}", "(count)"))
    c_af, c_cp = ({}, {}) if fake else (None, None)
    t_af, l_af = gpu_cnn.asyncflow_cnn(args.steps, c_af)
    t_cp, l_cp = gpu_cnn.cupy_cnn(b.xp, args.steps, c_cp)
    same_cnn = np.allclose(l_af, l_cp, rtol=2e-3, atol=1e-4)
    same = same and same_cnn
    rows.append(
        (
            f"CNN step (2x conv3x3+pool, b{gpu_cnn.BATCH})",
            f"{t_af * 1e3:.2f} ms vs CuPy {t_cp * 1e3:.2f} ms = {t_af / t_cp:.2f}x",
            "(no target)" + ("" if same_cnn else "  (LOSSES DIFFER)"),
        )
    )
    if fake:
        rows.append(("  launches per CNN step", f"{fmt(c_af)} vs CuPy {fmt(c_cp)}", "(count)"))
    h2d, d2h, rh2d, rd2h, ph2d, pd2h, (t_mm, t_copy, t_both) = asyncio.run(
        copy_rates(args.copy_mib, 256 if args.quick else 4096)
    )
    rows.append(
        (
            f"H2D copy {args.copy_mib} MiB",
            f"{h2d:.2f} GB/s vs CuPy {rh2d:.2f} GB/s = {h2d / rh2d:.0%}",
            ">= 80% (CuPy: pinned, already staged)",
        )
    )
    rows.append(
        (
            f"D2H copy {args.copy_mib} MiB",
            f"{d2h:.2f} GB/s vs CuPy {rd2h:.2f} GB/s = {d2h / rd2h:.0%}",
            ">= 80% (CuPy: into pinned)",
        )
    )
    rows.append(
        (
            "  same, CuPy from/to pageable",
            f"H2D {h2d / ph2d:.0%} of {ph2d:.2f} GB/s, D2H {d2h / pd2h:.0%} of {pd2h:.2f} GB/s",
            "(cp.asarray / cp.asnumpy)",
        )
    )
    rows.append(
        (
            "copy || matmuls (two streams)",
            f"{t_both * 1e3:.1f} ms vs apart {t_mm * 1e3:.1f} + {t_copy * 1e3:.1f} ms",
            "< sum",
        )
    )
    gap = asyncio.run(ticker_gap(args.steps))
    rows.append(("1 ms ticker, max gap in training", f"{gap * 1e3:.2f} ms", "<= 5 ms"))
    print(
        f"device: {card} ({b.name})" + ("  -- STAND-IN: timings are meaningless" if fake else "")
    )
    w = max(len(r[0]) for r in rows)
    v = max(len(r[1]) for r in rows)
    print(f"{'check':<{w}}  {'measured':<{v}}  target")
    for r in rows:
        print(f"{r[0]:<{w}}  {r[1]:<{v}}  {r[2]}")
    for f in failures:
        print("  op table failure:", f)
    return 0 if passed == total and same else 1


if __name__ == "__main__":
    os.environ.setdefault("CUPY_ACCELERATORS", "cub")
    sys.exit(main())
