"""Where a model's training step spends its time: per op type, beside TF (issue 21 item 5).

    .venv/bin/python benchmarks/profile_step.py --model autoencoder [--steps 20] [--top 15]
    /work/tfvenv/bin/python benchmarks/profile_step.py --backend tf --model autoencoder
    .venv/bin/python benchmarks/profile_step.py --model lstm_static --cprofile

The models are those of benchmarks/models/models.py.  After warm-up steps, the untraced
step is timed (median), then `--steps` steps run with `RunOptions(trace_level=FULL_TRACE)`
and their `RunMetadata.step_stats` are summed per op type: count per step, microseconds
per step, mean per call and share of the kernels' total.  The summary splits one step:

- kernels: the sum of the kernels' own spans (start to end, as the step stats record
  them; a kernel that hands its work to a thread counts the hand-off and the wait);
- outside kernels: traced step wall time minus the union of the kernel spans, which is
  the interpreter's own per-node work (ready counts, dispatch, releasing tensors),
  the session's feed/fetch handling, and tracing's own cost;
- offloaded: `compute` calls per step that went to a device worker thread (each a
  thread hand-off), from the CPU device's counter.

`--cpu` reads the kernels' spans from the thread's CPU clock (`time.thread_time_ns`)
instead of the wall clock: on a machine other processes share, a wall span also counts
the slices the scheduler gave them, and per-op CPU time is what stays comparable
between runs.  The kernels run on the loop thread unless handed off (the offloaded
count), so the sums are their CPU time; a hand-off's thread and BLAS's helper threads
are not counted.  The step line then gives the process's CPU time per step
(`time.process_time`, all threads) instead of the union of spans.

`--timeline` prints the fastest of the traced steps node by node instead, in start order:
start and duration (us from the step's first kernel), op type and name, for nodes of at
least `--min-us`; beside `--backend tf` it shows which kernels TF's inter-op pool ran
side by side (a start before the previous node's end) and where ours ran one at a time.

`--cprofile` instead runs the untraced steps under cProfile and prints the functions
with the most time of their own: Python-level per-op overhead shows up there, while
NumPy's time is charged to the kernels that call it.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "models"))
import numpy as np  # noqa: E402
from models import MODELS, _tf  # noqa: E402


def _op_type(label: str, name: str) -> str:
    if " = " in label and "(" in label:
        return label.split(" = ", 1)[1].split("(", 1)[0]
    return name


def _spans(step_stats) -> list[tuple[str, int, int]]:
    """(op type, start ns, end ns) of every node of one traced step."""
    out = []
    for dev in step_stats.dev_stats:
        for n in dev.node_stats:
            start = n.all_start_nanos or n.all_start_micros * 1000
            dur = n.all_end_rel_nanos or n.all_end_rel_micros * 1000
            out.append((_op_type(n.timeline_label, n.node_name), start, start + dur))
    return out


def _union_ns(spans) -> int:
    total, cur_s, cur_e = 0, None, None
    for _, s, e in sorted(spans, key=lambda x: x[1]):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def _print_timeline(args, wall: float, meta) -> None:
    """The nodes of one traced step in start order (see the module note)."""
    rows = []
    for dev in meta.step_stats.dev_stats:
        for n in dev.node_stats:
            start = n.all_start_nanos or n.all_start_micros * 1000
            dur = n.all_end_rel_nanos or n.all_end_rel_micros * 1000
            rows.append((start, dur, _op_type(n.timeline_label, n.node_name), n.node_name))
    rows.sort()
    t0 = rows[0][0]
    span = max(s + d for s, d, _, _ in rows) - t0
    busy = sum(d for _, d, _, _ in rows)
    print(
        f"{args.backend} {args.model}: traced step {wall * 1e3:.2f} ms (the fastest of "
        f"{args.steps}), kernels from first start to last end {span / 1e6:.2f} ms, their "
        f"spans' sum {busy / 1e6:.2f} ms, {len(rows)} nodes"
    )
    print(f"  {'start us':>9} {'us':>7}  {'op type':<28} name  (|: began before the last ended)")
    end = None
    for start, dur, op_type, name in rows:
        beside = end is not None and start < end
        end = start + dur if end is None else max(end, start + dur)
        if dur / 1e3 >= args.min_us:
            print(
                f"  {(start - t0) / 1e3:>9.0f} {dur / 1e3:>7.0f} {'|' if beside else ' '} "
                f"{op_type[:28]:<28} {name}"
            )


def _offloaded(sess) -> int:
    worker = getattr(sess, "_worker", None)
    return sum(getattr(d, "offloaded", 0) for d in getattr(worker, "devices", ()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["asyncflow", "tf"], default="asyncflow")
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="kernel spans on the thread's CPU clock")
    ap.add_argument("--timeline", action="store_true", help="one traced step, node by node")
    ap.add_argument("--min-us", type=float, default=15.0, help="--timeline: shortest node shown")
    args = ap.parse_args(argv)
    tf = _tf(args.backend)
    if args.cpu:
        if args.backend == "tf":
            ap.error("--cpu reads asyncflow's own step tracing; TF's is wall-clock only")
        from asyncflow import tracing

        # timed_kernel reads tracing.time.perf_counter_ns when a traced plan is built.
        tracing.time = type(time)("cpu_clock")
        tracing.time.perf_counter_ns = time.thread_time_ns
    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        feeds, train, _, batch = MODELS[args.model](tf, rng)
        init = tf.global_variables_initializer()
    config = None
    if args.backend == "tf":
        config = tf.ConfigProto(
            intra_op_parallelism_threads=os.cpu_count(), inter_op_parallelism_threads=2
        )
    batches = [dict(zip(feeds, batch())) for _ in range(4)]
    with tf.Session(graph=graph, config=config) as sess:
        sess.run(init)
        for k in range(args.warmup):
            sess.run(train, batches[k % 4])
        if args.backend == "asyncflow":  # the fused programs' compiled loops, as models.py
            from asyncflow.ops import eigen_reduce_jit, fused_elementwise_jit

            fused_elementwise_jit.wait()
            # (TF's order of sums, compiled: started by the first BiasAddGrad or Sum, ~1.2 s
            # from numba's cache, it was not ready for a timeline's steps, which then showed
            # NumPy's forms: the CNN's BiasAddGrads 641 / 1156 us against 204 / 378)
            eigen_reduce_jit.warm()
            for k in range(3):  # (their first calls)
                sess.run(train, batches[k % 4])
        if args.cprofile:
            prof = cProfile.Profile()
            prof.enable()
            for k in range(args.steps):
                sess.run(train, batches[k % 4])
            prof.disable()
            print(f"{args.backend} {args.model}: cProfile of {args.steps} steps, by own time")
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
            return 0
        plain = []
        for k in range(args.steps):
            t0 = time.perf_counter()
            sess.run(train, batches[k % 4])
            plain.append(time.perf_counter() - t0)
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        for k in range(3):  # the traced plan compiles and warms up
            sess.run(train, batches[k % 4], options=options, run_metadata=tf.RunMetadata())
        if args.timeline:
            best = None
            for k in range(args.steps):
                meta = tf.RunMetadata()
                t0 = time.perf_counter()
                sess.run(train, batches[k % 4], options=options, run_metadata=meta)
                wall = time.perf_counter() - t0
                if best is None or wall < best[0]:
                    best = (wall, meta)
            _print_timeline(args, *best)
            return 0
        per_type: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
        walls, kernel_sums, unions, cpus = [], [], [], []
        off0 = _offloaded(sess)
        for k in range(args.steps):
            meta = tf.RunMetadata()
            t0, c0 = time.perf_counter(), time.process_time()
            sess.run(train, batches[k % 4], options=options, run_metadata=meta)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            spans = _spans(meta.step_stats)
            for op_type, s, e in spans:
                row = per_type[op_type]
                row[0] += 1
                row[1] += (e - s) / 1e3
            kernel_sums.append(sum(e - s for _, s, e in spans) / 1e9)
            unions.append(_union_ns(spans) / 1e9)
        offloaded = (_offloaded(sess) - off0) / args.steps
    n = args.steps
    total_us = sum(r[1] for r in per_type.values()) / n or 1.0
    step_ms = statistics.median(plain) * 1e3
    wall_ms = statistics.median(walls) * 1e3
    union_ms = statistics.median(unions) * 1e3
    print(f"{args.backend} {args.model}: untraced step {step_ms:.2f} ms (median of {n})")
    if args.cpu:
        kernels_ms = statistics.median(kernel_sums) * 1e3
        cpu_ms = statistics.median(cpus) * 1e3
        print(
            f"  traced step CPU {cpu_ms:.2f} ms = kernels' CPU {kernels_ms:.2f} ms + outside "
            f"kernels {cpu_ms - kernels_ms:.2f} ms; "
            f"{sum(r[0] for r in per_type.values()) / n:.0f} nodes, {offloaded:.1f} offloaded "
            "per step (CPU times, medians)"
        )
    else:
        print(
            f"  traced step {wall_ms:.2f} ms = kernels' spans {union_ms:.2f} ms (sum "
            f"{statistics.median(kernel_sums) * 1e3:.2f} ms) + outside kernels "
            f"{wall_ms - union_ms:.2f} ms; {sum(r[0] for r in per_type.values()) / n:.0f} "
            f"nodes, {offloaded:.1f} offloaded per step"
        )
    print(f"  {'op type':<34} {'n/step':>7} {'us/step':>9} {'us/call':>8} {'%':>6}")
    rows = sorted(per_type.items(), key=lambda kv: -kv[1][1])
    for op_type, (count, us) in rows[: args.top]:
        print(
            f"  {op_type[:34]:<34} {count / n:>7.1f} {us / n:>9.1f} {us / count:>8.1f} "
            f"{100 * us / n / total_us:>5.1f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
