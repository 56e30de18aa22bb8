"""Untraced time of every kernel of a model's training step (issue 21), or of every
product its kernels ask ops/blas.py for.

    .venv/bin/python benchmarks/models/kernel_probe.py --model gan_b32 [--steps 300]
        [--nodes 40] [--blas]

A traced step (profile_step.py) adds ~10 us a node, more than many of its kernels take.
Here the step runs untraced: after warm-up, each kernel of the step's plan is wrapped
with a clock (~1 us a call), and the table gives each op type's median time a step,
then the `--nodes` slowest nodes.  With `--blas`, instead, each call of blas's `_gemm`,
`gemm_pair` and `gemm_epilogue` is timed, by its operands' shapes, with the median of
an immediate second call where it writes its output afresh (beta 0): the same product
with its operands in the cache, against the step's first.
"""

from __future__ import annotations

import argparse
import collections
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import MODELS, _tf  # noqa: E402

_clock = time.perf_counter


def _wrap_kernels(plan, times: dict) -> None:
    for i, node in enumerate(plan.nodes):
        if plan.kernels[i] is None or plan.arity[i] < 0:  # (Identity, NoOp: no call)
            continue
        op = getattr(node, "op", node)
        label = (getattr(op, "type", "?"), getattr(op, "name", str(i)))
        plan.kernels[i] = _timed_kernel(plan.kernels[i], times[label])


def _timed_kernel(kernel, samples: list):
    async def timed(*args, **kw):
        start = _clock()
        out = await kernel(*args, **kw)
        samples.append(_clock() - start)
        return out

    return timed


def _wrap_blas(times: dict) -> None:
    from asyncflow.ops import blas

    for name, beta_at in (("_gemm", 6), ("gemm_pair", None), ("gemm_epilogue", 6)):
        real = getattr(blas, name)

        def timed(*args, _real=real, _name=name, _beta_at=beta_at, **kw):
            key = (_name, tuple(a.shape for a in args[:3] if isinstance(a, np.ndarray)))
            start = _clock()
            out = _real(*args, **kw)
            first = _clock() - start
            again = None
            if _beta_at is not None and args[_beta_at] == 0.0 and out is not False:
                start = _clock()
                _real(*args, **kw)
                again = _clock() - start
            times[key].append((first, again))
            return out

        setattr(blas, name, timed)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--nodes", type=int, default=40, help="slowest nodes listed")
    ap.add_argument("--blas", action="store_true", help="time the products instead")
    args = ap.parse_args(argv)
    tf = _tf("asyncflow")
    from asyncflow import executor
    from asyncflow.ops import fused_elementwise_jit

    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        feeds, train, _, batch = MODELS[args.model](tf, rng)
        init = tf.global_variables_initializer()
    batches = [batch() for _ in range(8)]
    times: dict = collections.defaultdict(list)
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        for k in range(args.warmup):
            sess.run(train, dict(zip(feeds, batches[k % 8])))
        fused_elementwise_jit.wait()
        if args.blas:
            _wrap_blas(times)
        else:
            plans = [o for o in gc.get_objects() if type(o) is executor.Plan]
            _wrap_kernels(max(plans, key=lambda p: len(p.nodes)), times)
        steps = []
        for k in range(args.steps):
            start = _clock()
            sess.run(train, dict(zip(feeds, batches[k % 8])))
            steps.append(_clock() - start)
    n = args.steps
    print(f"{args.model}: step median {statistics.median(steps) * 1e3:.3f} ms ({n} steps)")
    if args.blas:
        for key, samples in sorted(times.items(), key=lambda kv: -sum(s[0] for s in kv[1])):
            again = [s[1] for s in samples if s[1] is not None]
            hot = f"{statistics.median(again) * 1e6:8.1f}" if again else "       -"
            first = statistics.median(s[0] for s in samples) * 1e6
            print(f"  {len(samples) / n:4.1f}/step first {first:8.1f} us  again {hot} us  {key}")
        return 0
    per_type: dict = collections.defaultdict(float)
    calls: collections.Counter = collections.Counter()
    for (op_type, _name), samples in times.items():
        per_type[op_type] += statistics.median(samples) * len(samples) / n * 1e6
        calls[op_type] += len(samples) / n
    print(f"  kernels {sum(per_type.values()):.1f} us a step")
    print(f"  {'op type':<30} {'calls':>6} {'us/step':>9} {'us/call':>8}")
    for op_type, us in sorted(per_type.items(), key=lambda kv: -kv[1]):
        print(f"  {op_type:<30} {calls[op_type]:6.1f} {us:9.1f} {us / calls[op_type]:8.1f}")
    print(f"  the {args.nodes} slowest nodes (median us a call):")
    slowest = sorted(times.items(), key=lambda kv: -statistics.median(kv[1]))
    for (op_type, name), samples in slowest[: args.nodes]:
        print(f"  {statistics.median(samples) * 1e6:9.1f}  {op_type:<28} {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
