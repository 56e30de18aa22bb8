"""Core runtime benchmark: the same TF1-style code against asyncflow or tf.compat.v1.

Run once per backend (each backend lives in its own venv)::

    .venv/bin/python benchmarks/core.py --backend asyncflow
    /work/tfvenv/bin/python benchmarks/core.py --backend tf

Prints exactly one JSON object on stdout (the last line); diagnostics go to stderr.
``benchmarks/run.py`` runs both and prints the comparison table.

Only these APIs of the ``tf`` module are used, so that asyncflow and tf.compat.v1 run the
identical code: ``placeholder``, ``identity``, ``no_op``, ``control_dependencies``,
``Session`` (``with``; for asyncflow also ``async with`` + ``await sess.arun(...)``),
``float32``, ``Graph().as_default()`` and ``Tensor + 1``. Every metric builds a fresh Graph.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

CHAIN_LEN = 2000
FANIN = 5000


# --------------------------------------------------------------------------- backends


class Backend:
    """The module under test (``tf``) plus how to open a session on the default graph."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.config: Any = None
        if name == "asyncflow":
            import asyncflow as tf
            from asyncflow import graph_passes
            from asyncflow.ops import fused_updates

            fused_updates.warm()  # the compiled optimizer loops, before any timing
            from asyncflow.ops import fused_elementwise

            # TF runs without grappler here: this measures dispatch, so asyncflow runs
            # without the graph pass that would fuse an Identity chain into one node.
            if fused_elementwise.fuse_elementwise in graph_passes.GRAPH_PASSES:
                graph_passes.GRAPH_PASSES.remove(fused_elementwise.fuse_elementwise)
            self.tf = tf
            self.version = getattr(tf, "__version__", "unknown")
        elif name == "tf":
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            import tensorflow as tf2
            import tensorflow.compat.v1 as tf

            tf.disable_eager_execution()
            self.tf = tf
            self.version = tf2.__version__
            self.config = _tf_config_no_grappler(tf)
        else:
            raise ValueError(f"unknown backend {name!r}")

    def session(self) -> Any:
        """A Session on the current default graph."""
        if self.config is not None:
            return self.tf.Session(config=self.config)
        return self.tf.Session()


def _tf_config_no_grappler(tf: Any) -> Any:
    """ConfigProto with grappler and the classic graph optimizer switched off."""
    from tensorflow.core.protobuf import rewriter_config_pb2

    off = rewriter_config_pb2.RewriterConfig.OFF
    config = tf.ConfigProto()
    rw = config.graph_options.rewrite_options
    rw.constant_folding = off
    rw.arithmetic_optimization = off
    rw.dependency_optimization = off
    rw.layout_optimizer = off
    rw.remapping = off
    rw.memory_optimization = rewriter_config_pb2.RewriterConfig.NO_MEM_OPT
    rw.disable_meta_optimizer = True
    oo = config.graph_options.optimizer_options
    oo.opt_level = tf.OptimizerOptions.L0
    oo.do_constant_folding = False
    return config


# --------------------------------------------------------------------------- helpers


def _time_runs(fn: Callable[[], Any], repeats: int, warmup: int) -> list[float]:
    """Wall seconds of ``repeats`` calls of ``fn``, after ``warmup`` (>= 1) untimed calls."""
    for _ in range(max(1, warmup)):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _pct_us(samples: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q)) * 1e6


# --------------------------------------------------------------------------- metrics


def bench_identity_chain(b: Backend, args: argparse.Namespace) -> dict[str, float]:
    """(a) Null-op dispatch: a chain of CHAIN_LEN Identity ops, one sess.run per step."""
    tf = b.tf
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, shape=[])
        y = x
        for _ in range(args.chain):
            y = tf.identity(y)
        feed = {x: np.array(1.0, dtype=np.float32)}
        with b.session() as sess:
            out = sess.run(y, feed_dict=feed)
            assert float(out) == 1.0, out
            times = _time_runs(lambda: sess.run(y, feed_dict=feed), args.repeats, args.warmup_runs)
    med = statistics.median(times)
    return {"chain_step_ms": med * 1e3, "chain_ops_per_s": args.chain / med}


def bench_noop_fanin(b: Backend, args: argparse.Namespace) -> dict[str, float]:
    """(b) Fan-in: FANIN independent NoOps, all control inputs of one final NoOp."""
    tf = b.tf
    with tf.Graph().as_default():
        ops = [tf.no_op() for _ in range(args.fanin)]
        with tf.control_dependencies(ops):
            final = tf.no_op()
        with b.session() as sess:
            times = _time_runs(lambda: sess.run(final), args.repeats, args.warmup_runs)
    med = statistics.median(times)
    return {"fanin_step_ms": med * 1e3, "fanin_ops_per_s": (args.fanin + 1) / med}


def bench_trivial_step(b: Backend, args: argparse.Namespace) -> dict[str, float]:
    """(c) Trivial step latency: y = x + 1 on a [1] float32 placeholder, sync sess.run."""
    tf = b.tf
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, shape=[1])
        y = x + 1
        feed = {x: np.ones(1, np.float32)}
        with b.session() as sess:
            out = sess.run(y, feed_dict=feed)
            assert np.allclose(out, 2.0), out
            for _ in range(args.warmup):
                sess.run(y, feed_dict=feed)
            samples = []
            for _ in range(args.steps):
                t0 = time.perf_counter()
                sess.run(y, feed_dict=feed)
                samples.append(time.perf_counter() - t0)
    return {"step_p50_us": _pct_us(samples, 50), "step_p99_us": _pct_us(samples, 99)}


def bench_arun(b: Backend, args: argparse.Namespace) -> dict[str, float]:
    """(d) asyncflow only: the trivial step via ``await sess.arun``; latency + concurrency."""
    tf = b.tf

    async def main() -> dict[str, float]:
        with tf.Graph().as_default():
            x = tf.placeholder(tf.float32, shape=[1])
            y = x + 1
            feed = {x: np.ones(1, np.float32)}
            async with tf.Session() as sess:
                out = await sess.arun(y, feed_dict=feed)
                assert np.allclose(out, 2.0), out
                # Sequential awaits: per-step latency.
                for _ in range(args.warmup):
                    await sess.arun(y, feed_dict=feed)
                samples = []
                for _ in range(args.steps):
                    t0 = time.perf_counter()
                    await sess.arun(y, feed_dict=feed)
                    samples.append(time.perf_counter() - t0)

                # Concurrency: batches of `concurrency` steps in flight via gather.
                async def batch() -> None:
                    outs = await asyncio.gather(
                        *(sess.arun(y, feed_dict=feed) for _ in range(args.concurrency))
                    )
                    assert len(outs) == args.concurrency

                for _ in range(max(1, args.warmup_runs)):
                    await batch()
                times = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    await batch()
                    times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        return {
            "arun_p50_us": _pct_us(samples, 50),
            "arun_p99_us": _pct_us(samples, 99),
            "arun_gather_steps_per_s": args.concurrency / med,
        }

    return asyncio.run(main())


METRICS: list[tuple[str, Callable[[Backend, argparse.Namespace], dict[str, float]], bool]] = [
    # (name, function, asyncflow_only)
    ("identity_chain", bench_identity_chain, False),
    ("noop_fanin", bench_noop_fanin, False),
    ("trivial_step", bench_trivial_step, False),
    ("arun", bench_arun, True),
]


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["asyncflow", "tf"], required=True)
    p.add_argument("--repeats", type=int, default=7, help="timed repeats per metric (median)")
    p.add_argument("--steps", type=int, default=2000, help="timed steps for latency metrics")
    p.add_argument("--warmup", type=int, default=200, help="warm-up steps for latency metrics")
    p.add_argument(
        "--warmup-runs", type=int, default=3, help="untimed runs before the median metrics"
    )
    p.add_argument("--chain", type=int, default=CHAIN_LEN, help="Identity chain length")
    p.add_argument("--fanin", type=int, default=FANIN, help="NoOps feeding the final NoOp")
    p.add_argument("--concurrency", type=int, default=100, help="arun steps per gather")
    p.add_argument("--only", nargs="*", help="run only these metrics (names as in the JSON)")
    args = p.parse_args(argv)

    result: dict[str, Any] = {
        "backend": args.backend,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "params": {k: v for k, v in vars(args).items() if k not in ("backend", "only")},
        "metrics": {},
        "errors": {},
    }
    try:
        b = Backend(args.backend)
    except Exception as e:  # reported in the JSON, not raised
        traceback.print_exc()
        result["errors"]["import"] = f"{type(e).__name__}: {e}"
        print(json.dumps(result))
        return 1
    result["version"] = b.version

    t_all = time.perf_counter()
    for name, fn, asyncflow_only in METRICS:
        if args.only and name not in args.only:
            continue
        if asyncflow_only and args.backend != "asyncflow":
            continue
        gc.collect()
        t0 = time.perf_counter()
        try:
            result["metrics"].update(fn(b, args))
        except Exception as e:  # one broken metric must not hide the rest
            traceback.print_exc()
            result["errors"][name] = f"{type(e).__name__}: {e}"
        print(f"[{args.backend}] {name}: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    result["wall_s"] = time.perf_counter() - t_all
    sys.stdout.flush()
    print(json.dumps(result))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
