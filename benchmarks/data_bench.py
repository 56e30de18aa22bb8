"""tf.data input pipeline feeding an MLP: records/s, asyncflow beside TensorFlow.

The same TF1-style code runs against either library:

    .venv/bin/python benchmarks/data_bench.py --backend asyncflow
    /work/tfvenv/bin/python benchmarks/data_bench.py --backend tf

It writes (once, reused) `--files` TFRecord files of tf.Example records (a float
feature "x" of `--dim` values, an int64 "y" label in [0, 10)), then builds

    TFRecordDataset(files) -> map(parse) -> map(normalise) -> shuffle(--buffer, seed)
      -> batch(--batch) -> prefetch(2) -> get_next -> MLP (dim-128-10) Adam train step

with the parse either per record (`--parse single`: parse_single_example in the first
map, the pipeline of the issue as written) or per batch (`--parse batch`: batch first,
then parse_example on the batch, TF's performance guide's advice).  It times, after
`--warmup` epochs, `--epochs` epochs of training steps (`sess.run(train_op)` until
OutOfRangeError, re-initialising the iterator each epoch), and, separately, the
pipeline alone (`sess.run(next_element)`).  Reports records/s and CPU time per record
(all threads of the process and of its child processes: asyncflow's input worker,
asyncflow/data/remote.py; the fairer figure on a shared machine), medians over epochs;
one JSON object on the last stdout line.  Beside them, per part (where /proc has
schedstat): the thread running the steps, the process's other threads, its child
processes: CPU µs a record and run-queue wait (runnable, not running) ms an epoch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time


def backend(name):
    if name == "asyncflow":
        import asyncflow as tf
        from asyncflow.ops import fused_updates

        fused_updates.warm()  # the compiled optimizer loops, before any timing
        return tf
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow.compat.v1 as tf

    tf.disable_eager_execution()
    return tf


def write_files(tf, args) -> list[str]:
    import numpy as np

    if args.backend == "asyncflow":
        from asyncflow import example_pb as pb
        from asyncflow.python_io import TFRecordWriter
    else:
        pb, TFRecordWriter = tf.train, tf.io.TFRecordWriter  # noqa: N806

    d = os.path.join(tempfile.gettempdir(), f"data_bench_{args.records}_{args.dim}")
    os.makedirs(d, exist_ok=True)
    paths = [os.path.join(d, f"part-{i}.tfrecord") for i in range(args.files)]
    if all(os.path.exists(p) for p in paths):
        return paths
    rng = np.random.RandomState(0)
    per = args.records // args.files
    for p in paths:
        with TFRecordWriter(p + ".tmp") as w:
            for _ in range(per):
                x = rng.randn(args.dim).astype(np.float32)
                ex = pb.Example(
                    features=pb.Features(
                        feature={
                            "x": pb.Feature(float_list=pb.FloatList(value=x.tolist())),
                            "y": pb.Feature(int64_list=pb.Int64List(value=[int(rng.randint(10))])),
                        }
                    )
                )
                w.write(ex.SerializeToString())
        os.replace(p + ".tmp", p)
    return paths


def build(tf, paths, args):
    spec = {"x": tf.FixedLenFeature([args.dim], tf.float32), "y": tf.FixedLenFeature([], tf.int64)}
    ds = tf.data.TFRecordDataset(paths)
    if args.parse == "single":
        ds = ds.map(lambda r: tf.parse_single_example(r, spec))
        ds = ds.map(lambda f: (f["x"] * 0.5, f["y"]))
        ds = ds.shuffle(args.buffer, seed=1).batch(args.batch)
    else:
        ds = ds.shuffle(args.buffer, seed=1).batch(args.batch)
        ds = ds.map(lambda r: tf.parse_example(r, spec))
        ds = ds.map(lambda f: (f["x"] * 0.5, f["y"]))
    ds = ds.prefetch(2)
    it = ds.make_initializable_iterator()
    x, y = it.get_next()
    w1 = tf.Variable(tf.truncated_normal([args.dim, 128], stddev=0.1, seed=1))
    b1 = tf.Variable(tf.zeros([128]))
    w2 = tf.Variable(tf.truncated_normal([128, 10], stddev=0.1, seed=2))
    b2 = tf.Variable(tf.zeros([10]))
    h = tf.nn.relu(tf.matmul(x, w1) + b1)
    logits = tf.matmul(h, w2) + b2
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = tf.train.AdamOptimizer(1e-3).minimize(loss)
    return it, (x, y), train


def tree_cpu() -> float:
    """CPU seconds of this process and its live child processes (an input worker's
    too), every thread; `time.process_time()` where /proc is not there."""
    me = os.getpid()
    try:
        total, tick = 0.0, os.sysconf("SC_CLK_TCK")
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(d) == me:
                continue
            if int(fields[1]) == me:  # a child: utime + stime
                total += (int(fields[11]) + int(fields[12])) / tick
        return total + time.process_time()
    except OSError:
        return time.process_time()


def _schedstat(path: str) -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) of a thread or process."""
    try:
        with open(path) as f:
            run, wait = f.read().split()[:2]
        return int(run) / 1e9, int(wait) / 1e9
    except (OSError, ValueError):
        return 0.0, 0.0


def threads_now() -> dict:
    """Scheduler figures, each (CPU s, run-queue wait s): this thread ("step": the one
    running the steps), this process's other threads ("others") and its child processes
    ("children": asyncflow's input worker).  CPU: the thread's, else the process's
    (/proc stat, threads that ended included); the wait: its live threads'."""
    me = os.getpid()
    step = _schedstat("/proc/thread-self/schedstat")
    tick = os.sysconf("SC_CLK_TCK")
    try:
        waits = sum(
            _schedstat(f"/proc/{me}/task/{t}/schedstat")[1] for t in os.listdir(f"/proc/{me}/task")
        )
        kids = [0.0, 0.0]
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == me:
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) != me:
                    continue
                kids[0] += (int(fields[11]) + int(fields[12])) / tick
                kids[1] += sum(
                    _schedstat(f"/proc/{d}/task/{t}/schedstat")[1]
                    for t in os.listdir(f"/proc/{d}/task")
                )
            except (OSError, ValueError):
                continue
    except OSError:
        return {}
    others = (time.process_time() - step[0], waits - step[1])
    return {"step": step, "others": others, "children": kids}


def epoch(tf, sess, it, fetch, threads=None) -> tuple[float, float]:
    """(wall seconds, CPU seconds: every thread of the process and its children) of one
    epoch; `threads` (a list) gets threads_now()'s differences over it."""
    sess.run(it.initializer)
    t0, c0 = time.perf_counter(), tree_cpu()
    s0 = threads_now() if threads is not None else None
    while True:
        try:
            sess.run(fetch)
        except tf.errors.OutOfRangeError:
            dt, dc = time.perf_counter() - t0, tree_cpu() - c0
            if s0 is not None:
                s1 = threads_now()
                threads.append(
                    {k: (s1[k][0] - s0[k][0], s1[k][1] - s0[k][1]) for k in s1 if k in s0}
                )
            return dt, dc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["asyncflow", "tf"], default="asyncflow")
    ap.add_argument("--records", type=int, default=40_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--buffer", type=int, default=5_000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2, help="untimed epochs first")
    ap.add_argument("--parse", choices=["single", "batch"], default="single")
    args = ap.parse_args()
    tf = backend(args.backend)
    paths = write_files(tf, args)
    g = tf.Graph()
    with g.as_default():
        it, nxt, train = build(tf, paths, args)
        init = tf.global_variables_initializer()
        with tf.Session(graph=g) as sess:
            sess.run(init)
            res = {
                "backend": args.backend,
                "parse": args.parse,
                "records": args.records,
                "batch": args.batch,
            }
            for what, fetch in (("train", train), ("pipeline", nxt)):
                for _ in range(args.warmup):
                    epoch(tf, sess, it, fetch)
                if args.backend == "asyncflow":
                    # A second pass starts asyncflow's input worker process (where the
                    # pipeline qualifies), and passes run in-process until it is up;
                    # time the passes it serves (asyncflow/data/remote.py).
                    from asyncflow.data import remote

                    remote.wait_for_workers()
                rates, cpu, threads = [], [], []
                for _ in range(args.epochs):
                    dt, dc = epoch(tf, sess, it, fetch, threads)
                    rates.append(args.records / dt)
                    cpu.append(dc / args.records * 1e6)
                res[f"{what}_records_per_s"] = round(statistics.median(rates))
                res[f"{what}_cpu_us_per_record"] = round(statistics.median(cpu), 1)
                # Where the CPU went, per part (medians over the epochs): CPU us a
                # record, and run-queue wait (runnable, not running) ms an epoch.
                for part in ("step", "others", "children"):
                    got = [t[part] for t in threads if part in t]
                    if got:
                        c = statistics.median(x[0] for x in got) / args.records * 1e6
                        q = statistics.median(x[1] for x in got) * 1e3
                        res[f"{what}_{part}_cpu_us_per_record"] = round(c, 2)
                        res[f"{what}_{part}_runq_ms"] = round(q, 1)
            if args.backend == "asyncflow":
                from asyncflow.data import remote

                res["input_worker_passes"] = remote.STATS["remote_passes"]
    print(json.dumps(res))


if __name__ == "__main__":
    main()
