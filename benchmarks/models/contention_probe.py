"""Where a step's time goes beside a busy process (issue 21): one process, one model,
rounds alone and beside a spinning process alternated, per thread of ours its CPU time
and its time waiting on a run queue (/proc/self/task/*/schedstat), optionally two
settings (`--attr`, as ab_inproc.py) alternated within each condition.

    .venv/bin/python benchmarks/models/contention_probe.py mlp --rounds 6
    .venv/bin/python benchmarks/models/contention_probe.py mlp \\
        --attr asyncflow.devices.cpu_budget:_CONFIRM=1

Each round: for alone and beside (a `while True: pass` process started for the round,
killed after it), for each setting, 3 untimed steps then `--steps` timed ones.  Lines
give medians over rounds of ms a step: wall, CPU of the process, and per thread group
(the driver, numba's OpenMP pool, OpenBLAS's threads, the budget's helpers, others)
CPU / run-queue wait.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ab_inproc import attr_settings, model_graph  # noqa: E402
from models import MODELS, _tf  # noqa: E402


def _threads() -> dict[int, tuple[str, int, int]]:
    """tid -> (name, CPU ns, run-queue wait ns) for every thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                run, wait, _ = f.read().split()
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        out[int(tid)] = (name, int(run), int(wait))
    return out


def _group(tid: int, name: str, main: int) -> str:
    if tid == main:
        return "driver"
    if name.startswith("asyncflow-intr"):
        return "helpers"
    return f"{name[:8]}#{tid}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--attr", action="append", default=[], help="MODULE:NAME=VALUE, setting B")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--beside-only", action="store_true")
    args = ap.parse_args(argv)
    tf = _tf("asyncflow")
    _, use = attr_settings(args.attr)
    sides = (0, 1) if args.attr else (0,)
    graph, _, train, init, batches = model_graph(tf, args.model)
    main_tid = os.getpid()
    sessions = []
    # (condition, side) -> list of per-round dicts
    got: dict = {}
    conditions = (True,) if args.beside_only else (False, True)
    try:
        for j in sides:
            use(j)
            s = tf.Session(graph=graph)
            sessions.append(s)
            s.run(init)
            for k in range(30):
                s.run(train, batches[k % 4])
        from asyncflow.ops import blas, fused_elementwise_jit

        fused_elementwise_jit.wait()
        blas.warm_epilogues()
        for r in range(args.rounds):
            for busy in conditions if r % 2 == 0 else conditions[::-1]:
                spinner = (
                    subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"])
                    if busy
                    else None
                )
                try:
                    if busy:
                        time.sleep(0.05)
                    for j in sides if r % 2 == 0 else sides[::-1]:
                        use(j)
                        s = sessions[j]
                        for k in range(3):
                            s.run(train, batches[k % 4])
                        t_before = _threads()
                        t0, c0 = time.perf_counter(), time.process_time()
                        for k in range(args.steps):
                            s.run(train, batches[k % 4])
                        wall = (time.perf_counter() - t0) / args.steps * 1e3
                        cpu = (time.process_time() - c0) / args.steps * 1e3
                        t_after = _threads()
                        row = {"wall": wall, "cpu": cpu}
                        for tid, (name, run, wait) in t_after.items():
                            _, run0, wait0 = t_before.get(tid, (name, 0, 0))
                            g = _group(tid, name, main_tid)
                            c, w = row.get(g, (0.0, 0.0))
                            row[g] = (
                                c + (run - run0) / 1e6 / args.steps,
                                w + (wait - wait0) / 1e6 / args.steps,
                            )
                        got.setdefault((busy, j), []).append(row)
                finally:
                    if spinner is not None:
                        spinner.kill()
                        spinner.wait()
    finally:
        use(0)
        for s in sessions:
            s.close()
    for busy in conditions:
        for j in sides:
            rows = got[(busy, j)]
            med = statistics.median
            groups = sorted({g for row in rows for g in row if g not in ("wall", "cpu")})
            parts = []
            for g in groups:
                cs = [row.get(g, (0.0, 0.0))[0] for row in rows]
                ws = [row.get(g, (0.0, 0.0))[1] for row in rows]
                if med(cs) >= 0.005 or med(ws) >= 0.005:
                    parts.append(f"{g} {med(cs):.2f}/{med(ws):.2f}")
            label = "beside" if busy else "alone "
            side = ("A" if j == 0 else "B") if args.attr else ""
            print(
                f"{args.model} {label} {side} wall {med(r['wall'] for r in rows):.3f} "
                f"cpu {med(r['cpu'] for r in rows):.3f} | " + ", ".join(parts),
                flush=True,
            )
    if args.attr:
        for busy in conditions:
            a = [r["wall"] for r in got[(busy, 0)]]
            b = [r["wall"] for r in got[(busy, 1)]]
            wins = sum(y < x for x, y in zip(a, b))
            ratio = statistics.median(b) / statistics.median(a)
            print(
                f"{'beside' if busy else 'alone'}: B/A {ratio:.3f}x, "
                f"B faster in {wins}/{len(a)} rounds [{' '.join(args.attr)}]"
            )
    import threading

    print("python threads:", ", ".join(f"{t.name}#{t.native_id}" for t in threading.enumerate()))
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
