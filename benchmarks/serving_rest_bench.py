"""REST serving benchmark: `python -m asyncflow.serving` against a plain aiohttp+NumPy server.

The model is the digits MLP 64-128-10 (ReLU, softmax) with seeded random weights,
exported as a TF1 SavedModel (version 1 under a model base path).  Each server runs in its
own process; a closed-loop load generator (this process, aiohttp client) keeps C requests
in flight, one instance per request (`{"instances": [[64 floats]]}`), for `--seconds`
after a short warm-up, and records every request's latency.  Servers:

- ``numpy-aiohttp``: the issue's baseline, a minimal aiohttp server whose handler parses
  the JSON, computes the same model with NumPy and writes `{"predictions": ...}`;
- ``asyncflow``: `python -m asyncflow.serving` (each request one `Session.arun` step);
- ``asyncflow-batching``: the same with `--enable_batching` (max_batch_size 64, greedy).

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/serving_rest_bench.py
    .venv/bin/python benchmarks/serving_rest_bench.py --seconds 2 --concurrency 1 64 --json
    .venv/bin/python benchmarks/serving_rest_bench.py --seconds 6 --rounds 3 \
        --concurrency 64 --slices --gc-log   # each slice's ratios; collector pauses

Target (issue 19): at C=64, asyncflow's throughput >= 1.0x numpy-aiohttp's at no worse p99;
with `--reload`, no failed request while a new version is hot-loaded under that load.
The `cpu us/req` column (the server process's CPU time per request) is the figure to
compare on a shared machine, where throughput swings with other processes' load.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = "digits"


# -- the model ------------------------------------------------------------------------------


def make_weights(seed=0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((64, 128)) * (2 / 64) ** 0.5).astype(np.float32),
        "b1": (rng.standard_normal(128) * 0.1).astype(np.float32),
        "w2": (rng.standard_normal((128, 10)) * (2 / 128) ** 0.5).astype(np.float32),
        "b2": (rng.standard_normal(10) * 0.1).astype(np.float32),
    }


def numpy_model(weights, x):
    h = np.maximum(x @ weights["w1"] + weights["b1"], 0)
    logits = h @ weights["w2"] + weights["b2"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def export(weights, base_path):
    sys.path.insert(0, ROOT)
    import asyncflow as af
    from asyncflow.saved_model import simple_save

    with af.Graph().as_default() as g:
        x = af.placeholder(af.float32, [None, 64], name="x")
        w1 = af.Variable(weights["w1"], name="w1")
        b1 = af.Variable(weights["b1"], name="b1")
        w2 = af.Variable(weights["w2"], name="w2")
        b2 = af.Variable(weights["b2"], name="b2")
        h = af.nn.relu(af.matmul(x, w1) + b1)
        probs = af.nn.softmax(af.matmul(h, w2) + b2, name="probs")
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            simple_save(sess, os.path.join(base_path, "1"), {"x": x}, {"probs": probs})


# -- the baseline server ---------------------------------------------------------------------


def numpy_server(weights_path: str) -> None:
    from aiohttp import web

    with np.load(weights_path) as f:
        weights = {k: f[k] for k in f.files}

    async def predict(request):
        doc = json.loads(await request.read())
        x = np.asarray(doc["instances"], dtype=np.float32)
        probs = numpy_model(weights, x)
        return web.Response(
            body=json.dumps({"predictions": probs.tolist()}).encode(),
            content_type="application/json",
        )

    async def main():
        app = web.Application()
        app.router.add_post(f"/v1/models/{MODEL}:predict", predict)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(f"Exporting HTTP/REST API at 127.0.0.1:{runner.addresses[0][1]}", flush=True)
        await asyncio.Event().wait()

    _run(main())


def _run(coro):
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def gc_wrapped(log_path: str, argv: list) -> None:
    """Run a server (`-m asyncflow.serving ...` or this file's `--numpy-server ...`)
    logging the cycle collector's pauses (generation, start, end: time.perf_counter) to
    `log_path` as JSON when it exits (SIGTERM)."""
    import atexit
    import gc
    import runpy
    import signal

    pauses, started = [], [0.0]

    def note(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append((info["generation"], started[0], time.perf_counter()))

    def write():
        with open(log_path, "w") as f:
            json.dump(pauses, f)

    gc.callbacks.append(note)
    atexit.register(write)
    if argv[:2] == ["-m", "asyncflow.serving"]:
        sys.argv = ["asyncflow.serving", *argv[2:]]
        runpy.run_module("asyncflow.serving", run_name="__main__", alter_sys=True)
    else:

        def stop(*_):  # (SystemExit raised inside the loop's callbacks may not end it)
            write()
            os._exit(0)

        signal.signal(signal.SIGTERM, stop)
        numpy_server(argv[-1])


def gc_report(slices: list[dict], log_path: str) -> str:
    """The collector's pauses in one server's measured slices, and how many of the
    requests at or past its p99 overlapped a pause over 2 ms."""
    with open(log_path) as f:
        pauses = json.load(f)
    windows = [(min(s["starts"]), max(s["starts"]) + max(s["latencies"])) for s in slices]
    inside = [p for p in pauses if any(a <= p[1] <= b for a, b in windows)]
    t0 = np.concatenate([np.asarray(s["starts"]) for s in slices])
    lat = np.concatenate([np.asarray(s["latencies"]) for s in slices])
    tail = lat >= np.percentile(lat, 99)
    long_ = [(a, b) for _, a, b in inside if b - a > 0.002]
    hit = sum(any(a < e and b > s for a, b in long_) for s, e in zip(t0[tail], (t0 + lat)[tail]))
    per_gen = []
    for g in (0, 1, 2):
        ms = [(b - a) * 1e3 for gen, a, b in inside if gen == g]
        if ms:
            per_gen.append(f"gen{g} {len(ms)} (max {max(ms):.1f} ms)")
    return (
        f"gc pauses: {', '.join(per_gen) or 'none'}; requests >= p99 overlapping one "
        f"over 2 ms: {hit} of {int(tail.sum())}"
    )


# -- the load generator ----------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _hot_load(base: str, version: int) -> None:
    """Publish version `version` (a copy of version 1) atomically: copy, then rename."""
    staging = os.path.join(os.path.dirname(base), f".staging-{version}")
    shutil.copytree(os.path.join(base, "1"), staging)
    os.rename(staging, os.path.join(base, str(version)))


async def load(
    port, concurrency, seconds, warmup, bodies, expected, pid=None, reload=None, versions=False
):
    from aiohttp import ClientSession, TCPConnector

    url = f"http://127.0.0.1:{port}/v1/models/{MODEL}:predict"
    latencies = []
    starts = []  # (time.perf_counter: CLOCK_MONOTONIC, the servers' clock too)
    failures = 0
    headers = {"Content-Type": "application/json"}

    async with ClientSession(connector=TCPConnector(limit=0)) as http:
        # correctness first: the server's answer is the NumPy model's
        async with http.post(url, data=bodies[0], headers=headers) as r:
            got = np.asarray((await r.json())["predictions"])
        np.testing.assert_allclose(got, expected[0:1], rtol=1e-4, atol=1e-6)

        async def client(stop_at, record):
            nonlocal failures
            i = 0
            while time.perf_counter() < stop_at:
                body = bodies[i % len(bodies)]
                i += 1
                t0 = time.perf_counter()
                async with http.post(url, data=body, headers=headers) as r:
                    await r.read()
                    ok = r.status == 200
                if record:
                    latencies.append(time.perf_counter() - t0)
                    starts.append(t0)
                    failures += not ok

        t0 = time.perf_counter()
        await asyncio.gather(*(client(t0 + warmup, False) for _ in range(concurrency)))
        cpu0 = cpu_seconds(pid) if pid else None
        t0 = time.perf_counter()
        clients = asyncio.gather(*(client(t0 + seconds, True) for _ in range(concurrency)))
        versions = None
        if reload is not None:  # (base path, version): published mid-run, polled by the server
            await asyncio.sleep(seconds / 4)
            await asyncio.to_thread(_hot_load, *reload)
        await clients
        elapsed = time.perf_counter() - t0
        if reload is not None or versions:
            async with http.get(url.removesuffix(":predict")) as r:
                versions = {
                    v["version"]: v["state"] for v in (await r.json())["model_version_status"]
                }
        cpu = cpu_seconds(pid) - cpu0 if pid else float("nan")
    return {
        "latencies": latencies,
        "starts": starts,
        "elapsed": elapsed,
        "cpu": cpu,
        "failed": failures,
        **({"versions_after": versions} if versions is not None else {}),
    }


def summarize(slices: list[dict]) -> dict:
    """One server's figures over its measured slices (see `--rounds`)."""
    a = np.concatenate([np.asarray(s["latencies"]) for s in slices]) * 1e3
    elapsed = sum(s["elapsed"] for s in slices)
    cpu = sum(s["cpu"] for s in slices)
    versions = [s["versions_after"] for s in slices if "versions_after" in s]
    return {
        "requests": len(a),
        "req_s": len(a) / elapsed,
        # The server's CPU time per request: robust where the machine is shared and
        # throughput swings with other processes' load.
        "cpu_us": cpu / max(len(a), 1) * 1e6,
        "p50_ms": float(np.percentile(a, 50)),
        "p99_ms": float(np.percentile(a, 99)),
        "failed": sum(s["failed"] for s in slices),
        **({"versions_after": versions[-1]} if versions else {}),
    }


def start(cmd) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        m = re.search(r"Exporting HTTP/REST API at [^:]+:(\d+)", line)
        if m:
            return proc, int(m.group(1))
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError(f"server did not start: {cmd}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument(
        "--servers", nargs="+", default=["numpy-aiohttp", "asyncflow", "asyncflow-batching"]
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="split each server's --seconds into this many slices, the servers taking "
        "turns (all of them started first): on a shared machine, load that comes and goes "
        "then falls on every server alike",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--slices",
        action="store_true",
        help="also print each slice's figures (req/s and p99 against numpy-aiohttp's slice "
        "of the same round)",
    )
    p.add_argument(
        "--reload",
        action="store_true",
        help="publish a new version a quarter into each asyncflow server's first slice (hot "
        "reload under load: no request of any slice may fail, and the last slice ends on "
        "the new version)",
    )
    p.add_argument(
        "--gc-log",
        action="store_true",
        help="log each server's garbage collections (gc.callbacks) and report the pauses "
        "in its slices and the tail requests they overlapped",
    )
    p.add_argument("--numpy-server", metavar="WEIGHTS_NPZ", help=argparse.SUPPRESS)
    p.add_argument("--gc-wrap", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.gc_wrap:
        return gc_wrapped(args.gc_wrap[0], args.gc_wrap[1:])
    if args.numpy_server:
        return numpy_server(args.numpy_server)

    weights = make_weights()
    rng = np.random.default_rng(1)
    rows = rng.random((256, 64), dtype=np.float32)
    bodies = [json.dumps({"instances": [r.tolist()]}).encode() for r in rows]
    expected = numpy_model(weights, rows)
    slices: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        first = os.path.join(tmp, "export")
        export(weights, first)
        npz = os.path.join(tmp, "weights.npz")
        np.savez(npz, **weights)
        batching = os.path.join(tmp, "batching.txt")
        with open(batching, "w") as f:
            f.write(
                "max_batch_size { value: 64 }\nbatch_timeout_micros { value: 0 }\n"
                "max_enqueued_batches { value: 1000 }\n"
            )
        bases, commands = {}, {}
        for name in args.servers:
            if name == "numpy-aiohttp":
                commands[name] = [sys.executable, os.path.abspath(__file__), "--numpy-server", npz]
                continue
            base = bases[name] = os.path.join(tmp, name, MODEL)  # (its own versions)
            os.makedirs(base)
            shutil.copytree(os.path.join(first, "1"), os.path.join(base, "1"))
            commands[name] = [
                sys.executable,
                "-m",
                "asyncflow.serving",
                "--rest_api_port=0",
                "--port=0",
                "--rest_api_host=127.0.0.1",
                f"--model_name={MODEL}",
                f"--model_base_path={base}",
            ]
            if name == "asyncflow-batching":
                commands[name] += ["--enable_batching", f"--batching_parameters_file={batching}"]
        gc_logs = {}
        if args.gc_log:
            for name in args.servers:
                gc_logs[name] = os.path.join(tmp, f"{name}.gc.json")
                cmd = commands[name]
                commands[name] = [sys.executable, os.path.abspath(__file__), "--gc-wrap",
                                  gc_logs[name], *cmd[1:]]  # fmt: skip
        # The load generator's own long-lived objects (NumPy, asyncflow for the export,
        # aiohttp) frozen: its full collections paused all 64 clients for 25-60 ms,
        # landing on whichever server had the turn.
        gc.collect()
        gc.freeze()
        servers = {}
        try:
            for name in args.servers:
                servers[name] = start(commands[name])
            next_version = {name: 2 for name in bases}
            for c in args.concurrency:
                for rnd in range(args.rounds):
                    order = args.servers if rnd % 2 == 0 else args.servers[::-1]
                    for name in order:
                        proc, port = servers[name]
                        reload = None
                        if args.reload and rnd == 0 and name in bases:
                            reload = (bases[name], next_version[name])
                            next_version[name] += 1
                        warmup = args.warmup if rnd == 0 else min(args.warmup, 0.2)
                        run = load(port, c, args.seconds / args.rounds, warmup, bodies,
                                   expected, proc.pid, reload,
                                   args.reload and name in bases)  # fmt: skip
                        slices.setdefault((name, c), []).append(_run(run))
        finally:
            for proc, _ in servers.values():
                proc.terminate()
            for proc, _ in servers.values():
                proc.wait(timeout=30)
        gc_lines = {
            (name, c): gc_report(slices[(name, c)], gc_logs[name])
            for name in gc_logs
            for c in args.concurrency
        }
    results = {
        (name, c): summarize(slices[(name, c)]) for c in args.concurrency for name in args.servers
    }

    if args.json:
        print(json.dumps([{"server": s, "concurrency": c, **r} for (s, c), r in results.items()]))
        return
    print(
        f"{'server':20} {'C':>3} {'req/s':>8} {'x numpy':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'failed':>6} {'cpu us/req':>10}"
    )
    for (name, c), r in results.items():
        base_r = results.get(("numpy-aiohttp", c))
        ratio = f"{r['req_s'] / base_r['req_s']:.2f}" if base_r else "-"
        print(
            f"{name:20} {c:3d} {r['req_s']:8.0f} {ratio:>8} {r['p50_ms']:8.2f} "
            f"{r['p99_ms']:8.2f} {r['failed']:6d} {r['cpu_us']:10.0f}"
            + (f"  versions after: {r['versions_after']}" if "versions_after" in r else "")
        )
    for (name, c), line in gc_lines.items():
        print(f"{name:20} {c:3d} {line}")
    if args.slices:
        for name, c in results:
            base = slices.get(("numpy-aiohttp", c))
            if base is None or name == "numpy-aiohttp":
                continue
            cells = []
            for mine, theirs in zip(slices[(name, c)], base):
                a, b = summarize([mine]), summarize([theirs])
                cells.append(
                    f"{a['req_s'] / b['req_s']:.2f}x p99 {a['p99_ms'] / b['p99_ms']:.2f}x"
                )
            print(f"{name:20} {c:3d} slices against numpy-aiohttp: " + ", ".join(cells))


if __name__ == "__main__":
    main()
