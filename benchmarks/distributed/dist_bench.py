"""OSDI §6.2 microbenchmarks on loopback, the same TF1 code on asyncflow or TF's gRPC runtime.

    .venv/bin/python benchmarks/distributed/dist_bench.py --fw af
    /work/tfvenv/bin/python benchmarks/distributed/dist_bench.py --fw tf

Each case starts its tasks as subprocesses of this script (`--serve`), builds the graph
in this process (the client), and times `sess.run` steps (median of per-step times):

- null1 / null2: a scalar variable on the ps, read by one or two workers (each worker
  with its own client process, stepping at once): a null training step.
- dense: a 100 MB float32 variable on the ps, sliced on the worker (the whole variable
  crosses to the worker every step); reported as ms and GB/s.
- sparse_small / sparse_large: 32 random rows gathered on the ps from a 100k x 32 or
  1M x 32 embedding, then used on the worker.
- transfer: a 256 MiB variable on one task consumed on another (ms, GB/s); `raw` is
  the same bytes over a plain loopback socket between two processes (one sendall into
  one recv_into(MSG_WAITALL) of a preallocated buffer), the bound a framework can reach.

Prints one JSON object.  Run both frameworks under `flock /tmp/bench.lock`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.abspath(__file__)


def load(fw):
    if fw == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
        return tf
    import asyncflow as tf

    return tf


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(fw, cluster, job, task) -> None:
    tf = load(fw)
    server = tf.train.Server(tf.train.ClusterSpec(cluster), job_name=job, task_index=task)
    print("ready", flush=True)
    server.join()


class Cluster:
    def __init__(self, fw, ps=1, workers=1):
        self.spec = {
            "ps": [f"localhost:{free_port()}" for _ in range(ps)],
            "worker": [f"localhost:{free_port()}" for _ in range(workers)],
        }
        self.procs = []
        for job, addrs in self.spec.items():
            for i in range(len(addrs)):
                p = subprocess.Popen(
                    [
                        sys.executable,
                        HERE,
                        "--fw",
                        fw,
                        "--serve",
                        json.dumps(self.spec),
                        job,
                        str(i),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
                assert p.stdout.readline().strip() == "ready"
                self.procs.append(p)

    def target(self, i=0):
        return "grpc://" + self.spec["worker"][i]

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()


def timed(run, steps, warmup=20):
    for _ in range(warmup):
        run()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def config(tf, worker):
    return tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{worker}"])


def null_client(fw, spec, worker, steps) -> float:
    tf = load(fw)
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(1.0, name="scalar")
        with tf.device(f"/job:worker/task:{worker}"):
            y = tf.identity(v)
        with tf.Session("grpc://" + spec["worker"][worker], config=config(tf, worker)) as sess:
            if worker == 0:
                sess.run(v.initializer)
            else:
                while not sess.run(tf.is_variable_initialized(v)):
                    time.sleep(0.01)
            return timed(lambda: sess.run(y), steps)


def bench_null(fw, workers, steps) -> float:
    c = Cluster(fw, workers=workers)
    try:
        if workers == 1:
            return null_client(fw, c.spec, 0, steps)
        # One client process per worker, stepping at the same time (between-graph).
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    HERE,
                    "--fw",
                    fw,
                    "--null-client",
                    json.dumps(c.spec),
                    str(w),
                    str(steps),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for w in range(workers)
        ]
        outs = [float(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        return statistics.mean(outs)
    finally:
        c.close()


def bench_dense(fw, steps, nbytes=100 * 10**6) -> float:
    tf = load(fw)
    c = Cluster(fw)
    try:
        with tf.Graph().as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(tf.zeros([nbytes // 4], tf.float32), name="dense")
            with tf.device("/job:worker/task:0"):
                y = tf.strided_slice(v, [0], [1])
            with tf.Session(c.target(), config=config(tf, 0)) as sess:
                sess.run(v.initializer)
                return timed(lambda: sess.run(y), steps, warmup=3)
    finally:
        c.close()


def bench_sparse(fw, rows, steps, dim=32) -> float:
    tf = load(fw)
    c = Cluster(fw)
    rng = np.random.RandomState(0)
    try:
        with tf.Graph().as_default():
            with tf.device("/job:ps/task:0"):
                emb = tf.Variable(tf.zeros([rows, dim], tf.float32), name="emb")
                ids = tf.placeholder(tf.int64, [32])
                rows_ = tf.gather(emb, ids)
            with tf.device("/job:worker/task:0"):
                y = tf.reduce_sum(rows_)
            with tf.Session(c.target(), config=config(tf, 0)) as sess:
                sess.run(emb.initializer)
                return timed(lambda: sess.run(y, {ids: rng.randint(0, rows, 32)}), steps)
    finally:
        c.close()


def bench_transfer(fw, steps, nbytes=256 << 20) -> float:
    tf = load(fw)
    c = Cluster(fw)
    try:
        with tf.Graph().as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(tf.zeros([nbytes // 4], tf.float32), name="big")
            with tf.device("/job:worker/task:0"):
                y = tf.strided_slice(v, [0], [1])
            with tf.Session(c.target(), config=config(tf, 0)) as sess:
                sess.run(v.initializer)
                return timed(lambda: sess.run(y), steps, warmup=2)
    finally:
        c.close()


def raw_receiver(port: int, nbytes: int, rounds: int) -> None:
    buf = bytearray(nbytes)
    view = memoryview(buf)
    with socket.create_server(("127.0.0.1", port)) as srv:
        print("ready", flush=True)
        conn, _ = srv.accept()
        with conn:
            for _ in range(rounds):
                got = 0
                while got < nbytes:  # (MSG_WAITALL: the kernel loops, not Python)
                    got += conn.recv_into(view[got:], nbytes - got, socket.MSG_WAITALL)
                conn.sendall(b"k")


def bench_raw(steps, nbytes=256 << 20) -> float:
    port = free_port()
    rounds = steps + 2
    p = subprocess.Popen(
        [sys.executable, HERE, "--raw-receiver", str(port), str(nbytes), str(rounds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "ready"
    data = np.ones(nbytes, np.uint8)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def once():
            s.sendall(memoryview(data))
            s.recv(1)

        t = timed(once, steps, warmup=2)
    p.wait()
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fw", choices=["af", "tf"], default="af")
    ap.add_argument("--serve", nargs=3)
    ap.add_argument("--null-client", nargs=3)
    ap.add_argument("--raw-receiver", nargs=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    if a.serve:
        return serve(a.fw, json.loads(a.serve[0]), a.serve[1], int(a.serve[2]))
    if a.null_client:
        spec, w, steps = json.loads(a.null_client[0]), int(a.null_client[1]), int(a.null_client[2])
        print(null_client(a.fw, spec, w, steps))
        return
    if a.raw_receiver:
        return raw_receiver(*map(int, a.raw_receiver))
    only = set(a.only.split(",")) if a.only else None
    cases = {
        "null1_us": lambda: bench_null(a.fw, 1, a.steps) * 1e6,
        "null2_us": lambda: bench_null(a.fw, 2, a.steps) * 1e6,
        "dense_100MB_ms": lambda: bench_dense(a.fw, 10) * 1e3,
        "sparse_100k_us": lambda: bench_sparse(a.fw, 100_000, a.steps) * 1e6,
        "sparse_1M_us": lambda: bench_sparse(a.fw, 1_000_000, a.steps) * 1e6,
        "transfer_256MiB_ms": lambda: bench_transfer(a.fw, 5) * 1e3,
        "raw_socket_256MiB_ms": lambda: bench_raw(5) * 1e3,
    }
    out = {"fw": a.fw}
    for name, fn in cases.items():
        if only is None or name in only:
            out[name] = round(fn(), 2)
    for k, mb in (
        ("dense_100MB_ms", 100e6),
        ("transfer_256MiB_ms", 256 * 2**20),
        ("raw_socket_256MiB_ms", 256 * 2**20),
    ):
        if k in out:
            out[k.replace("_ms", "_GBps")] = round(mb / (out[k] / 1e3) / 1e9, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
