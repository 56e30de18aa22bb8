"""Which nodes of a model's training step could run beside each other (side lanes).

    .venv/bin/python benchmarks/models/ready_sets.py --model gan [--steps 20] [--top 8]

Runs the model of models.py under asyncflow on one lane (caller-driven `sess.run`), with
every kernel of its step's plan timed, and prints from those times and the plan's edges:
- the step, the kernels' sum and the plan's critical path (the longest chain of kernel
  times: no number of lanes gets the kernels under it);
- the kernels' makespan when a second lane takes any ready kernel of at least 0.1 ms or
  1 ms while another node is ready (a list schedule, longest remaining path first):
  what inter-op parallelism could gain at best, hand-offs and the GIL aside;
- the kernels of at least 0.1 ms, and for each the nodes ready when it started in the
  interpreter's own order (devices/base.py DRIVER) and their kernels' time: what a side
  lane (devices/cpu.py) could overlap it with as the step runs now.
"""

from __future__ import annotations

import argparse
import collections
import heapq
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import MODELS, _tf  # noqa: E402

HEAVY_S = 1e-4


def _timed(kernel, i, times, readies, driver):
    async def timed(*args, **kw):
        ready = tuple(driver.ready)
        t0 = time.perf_counter()
        result = await kernel(*args, **kw)
        times[i].append(time.perf_counter() - t0)
        readies[i].append(ready)
        return result

    return timed


def _makespan(n, succ, pending, init, dur, rest, threshold) -> float:
    """Kernels' end when a second lane takes ready kernels of `threshold` or more."""
    pending = pending[:]
    ready, t, side, side_busy = list(init), 0.0, [], False
    while ready or side:
        if not ready or (side and side[0][0] <= t):
            end, j = heapq.heappop(side)
            t, side_busy = max(t, end), False
        else:
            heavy = [i for i in ready if dur[i] >= threshold]
            if not side_busy and heavy and len(ready) >= 2:
                j = max(heavy, key=lambda i: rest[i])
                ready.remove(j)
                heapq.heappush(side, (t + dur[j], j))
                side_busy = True
                continue
            j = max(ready, key=lambda i: rest[i])
            ready.remove(j)
            t += dur[j]
        for k in succ[j]:
            pending[k] -= 1
            if not pending[k]:
                ready.append(k)
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args(argv)
    from asyncflow.devices.base import DRIVER

    tf = _tf("asyncflow")
    graph = tf.Graph()
    with graph.as_default():
        feeds, train, _, batch = MODELS[args.model](tf, np.random.default_rng(0))
        init = tf.global_variables_initializer()
    batches = [dict(zip(feeds, batch())) for _ in range(4)]
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        for k in range(10):
            sess.run(train, batches[k % 4])
        plans = [p for g in sess._worker._graphs.values() for p in g.plans]
        plan = max(plans, key=lambda p: len(p.nodes))
        times, readies = collections.defaultdict(list), collections.defaultdict(list)
        kernels = list(plan.kernels)
        for i, kernel in enumerate(kernels):
            if plan.arity[i] not in (-1, -2):  # (Identity and NoOp run no kernel)
                plan.kernels[i] = _timed(kernel, i, times, readies, DRIVER)
        walls = []
        try:
            for k in range(args.steps):
                t0 = time.perf_counter()
                sess.run(train, batches[k % 4])
                walls.append(time.perf_counter() - t0)
        finally:
            plan.kernels[:] = kernels
    n = len(plan.nodes)
    dur = [statistics.median(times[i]) if times[i] else 0.0 for i in range(n)]
    succ = [[j for _, j, _ in plan.edges[i] if j < n] for i in range(n)]
    order, pending, stack = [], plan.init_pending[:], list(plan.init_ready)
    while stack:
        i = stack.pop()
        order.append(i)
        for j in succ[i]:
            pending[j] -= 1
            if not pending[j]:
                stack.append(j)
    rest = [0.0] * n
    for i in reversed(order):
        rest[i] = dur[i] + max((rest[j] for j in succ[i]), default=0.0)
    ms = 1e3
    print(
        f"{args.model}: {n} nodes; step {statistics.median(walls) * ms:.2f} ms (kernels timed), "
        f"kernels {sum(dur) * ms:.2f} ms, critical path {max(rest) * ms:.2f} ms"
    )
    for threshold in (1e-4, 1e-3):
        span = _makespan(n, succ, plan.init_pending, plan.init_ready, dur, rest, threshold)
        print(f"  two lanes, kernels >= {threshold * ms:g} ms beside: {span * ms:.2f} ms")
    # The kernel time of the nodes ready when a kernel starts (its first timed run).
    ready_work = {i: sum(dur[j] for j in readies[i][0] if j < n) for i in readies}
    heavy = [i for i in range(n) if dur[i] >= HEAVY_S]
    beside = [i for i in heavy if ready_work[i] >= 0.5 * dur[i]]
    print(
        f"  kernels >= {HEAVY_S * ms:g} ms: {len(heavy)} ({sum(dur[i] for i in heavy) * ms:.2f} "
        f"ms); {len(beside)} of them start with ready nodes worth half their time or more "
        f"({sum(dur[i] for i in beside) * ms:.2f} ms)"
    )
    print("    kernel ms  ready: nodes, their kernels' ms")
    for i in sorted(heavy, key=lambda i: -dur[i])[: args.top]:
        op = plan.nodes[i]
        print(
            f"    {dur[i] * ms:9.3f}  {len(readies[i][0]):5d} {ready_work[i] * ms:8.3f}  "
            f"{op.type} {op.name}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
