"""Parameter-server training across processes: 1 ps + 2 workers on this machine, and a
worker killed mid-training and brought back.

    python examples/distributed_train.py            # launches the cluster, prints progress

What it shows (OSDI §4.2-4.4, as a TF1 program writes it):
- the ps task is `python -m asyncflow.server` (what a Kubernetes TFJob's ps pod runs,
  from TF_CONFIG); each worker is this file with --job_name/--task_index: it serves its
  own task (`af.train.Server`) and trains between-graph, with its own client;
- `replica_device_setter` puts the model's variables on the ps task (a partitioned
  embedding and a dense layer) and the computation on the worker; training is
  asynchronous, and both workers' steps advance one global step kept on the ps;
- worker 0 is the chief: it initialises the model (and with --checkpoint_dir writes
  checkpoints there);
- the launcher SIGKILLs worker 1 after it has trained a while and starts it again; the new
  process finds the model already initialised on the ps and carries on from the global
  step the ps holds, while worker 0 never stopped (its session only talks to the ps and
  itself: `device_filters`, as TF recommends).

Every process gets the same cluster secret (ASYNCFLOW_CLUSTER_SECRET), as a Kubernetes
secret would provide.  On Kubernetes, examples/k8s/tfjob.yaml runs the same two roles
(`python -m asyncflow.server` for the ps, `--job_name worker` for the workers), each
finding its task in the TF_CONFIG that Kubeflow's training operator sets.

The launcher exits 0 once both workers reached --steps and the loss fell below a tenth
of its start.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import time

import numpy as np

VOCAB, DIM = 50, 4


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


# -- a worker --------------------------------------------------------------------------------


def _model(af, cluster, task: int):
    """A bag-of-ids regression: embedding rows (partitioned) summed, then a dense layer."""
    rng = np.random.RandomState(0)
    true_emb = rng.randn(VOCAB, DIM).astype(np.float32)
    true_w = rng.randn(DIM, 1).astype(np.float32)
    setter = af.train.replica_device_setter(
        cluster=cluster, worker_device=f"/job:worker/task:{task}"
    )
    with af.device(setter):
        gs = af.train.get_or_create_global_step()
        emb = af.get_variable(
            "emb", [VOCAB, DIM], initializer=af.random_normal_initializer(stddev=0.5, seed=1),
            partitioner=af.fixed_size_partitioner(2),
        )  # fmt: skip
        w = af.get_variable("w", [DIM, 1], initializer=af.random_normal_initializer(seed=2))
        ids = af.placeholder(af.int64, [None, 3], name="ids")
        y = af.placeholder(af.float32, [None, 1], name="y")
        h = af.reduce_sum(af.nn.embedding_lookup(emb, ids, partition_strategy="div"), 1)
        loss = af.reduce_mean(af.square(af.matmul(h, w) - y))
        train = af.train.AdagradOptimizer(0.5).minimize(loss, global_step=gs)

    def batch(step_rng):
        b = step_rng.randint(0, VOCAB, size=(32, 3))
        return {ids: b, y: true_emb[b].sum(1) @ true_w}

    return gs, loss, train, batch


def worker_task(args):
    """(cluster, task index) from the flags, else from TF_CONFIG (a TFJob pod's)."""
    import asyncflow as af
    from asyncflow.distributed.cluster import parse_tf_config

    if args.cluster:
        return af.train.ClusterSpec(json.loads(args.cluster)), args.task_index
    cluster, job, index = parse_tf_config()
    if not cluster.jobs or job != "worker":
        raise SystemExit(f"TF_CONFIG names no worker task (job {job!r})")
    return cluster, index


def run_worker(args) -> int:
    import asyncflow as af

    cluster, args.task_index = worker_task(args)
    server = af.train.Server(cluster, "worker", args.task_index)
    gs, loss, train, batch = _model(af, cluster, args.task_index)
    config = af.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{args.task_index}"])
    is_chief = args.task_index == 0
    step_rng = np.random.RandomState(100 + args.task_index + 10 * os.getpid() % 1000)
    eval_feed = batch(np.random.RandomState(7))
    first = last = float("nan")
    with af.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=(args.checkpoint_dir or None) if is_chief else None,
        save_checkpoint_steps=50 if is_chief else None,
        hooks=[af.train.StopAtStepHook(last_step=args.steps)],
        config=config,
        log_step_count_steps=0,
    ) as sess:
        first = sess.run(loss, eval_feed)  # on a fixed batch, before this worker's steps
        mine = 0
        while not sess.should_stop():
            value, step, _ = sess.run([loss, gs, train], batch(step_rng))
            mine += 1
            if mine % 100 == 0:
                print(f"worker {args.task_index}: global step {step} loss {value:.4f}", flush=True)
            if sess.should_stop():
                break
            last = sess.run(loss, eval_feed) if mine % 50 == 0 else last
    print(f"worker {args.task_index} done: {mine} steps, first loss {first:.4f}, "
          f"last loss {last:.4f}", flush=True)  # fmt: skip
    server.stop()
    return 0


# -- the launcher ----------------------------------------------------------------------------


def _spawn(cmd, env):
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, bufsize=1)


def _wait_line(proc, needle: str, deadline: float, echo: str) -> str:
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{echo} exited before printing {needle!r}")
        print(f"[{echo}] {line.rstrip()}", flush=True)
        if needle in line:
            return line
    raise TimeoutError(f"{echo}: no {needle!r} in time")


def launch(args) -> int:
    ps_port, w0, w1 = _free_ports(3)
    cluster = {
        "ps": [f"localhost:{ps_port}"],
        "worker": [f"localhost:{w0}", f"localhost:{w1}"],
    }
    env = dict(os.environ, ASYNCFLOW_CLUSTER_SECRET=secrets.token_hex(16))
    ckpt = args.checkpoint_dir
    deadline = time.monotonic() + args.timeout
    # The ps task reads its place in the cluster from TF_CONFIG, as in a TFJob pod.
    ps_env = dict(env, TF_CONFIG=json.dumps({"cluster": cluster,
                                             "task": {"type": "ps", "index": 0}}))  # fmt: skip
    ps = _spawn([sys.executable, "-m", "asyncflow.server"], ps_env)
    procs = [ps]

    def worker(i):
        cmd = [sys.executable, os.path.abspath(__file__), "--job_name", "worker",
               "--task_index", str(i), "--cluster", json.dumps(cluster), "--steps",
               str(args.steps), "--checkpoint_dir", ckpt]  # fmt: skip
        p = _spawn(cmd, env)
        procs.append(p)
        return p

    try:
        _wait_line(ps, "listening", deadline, "ps")
        chief = worker(0)
        # Worker 1 starts once the chief has initialised the model on the ps (a non-chief
        # that finds it uninitialised waits 30 s between checks, as TF's does).
        _wait_line(chief, "global step", deadline, "worker 0")
        other = worker(1)
        # Let worker 1 train a while, then kill it (SIGKILL: no goodbye to anyone).
        _wait_line(other, "global step", deadline, "worker 1")
        other.kill()
        other.wait()
        print("[launcher] killed worker 1; starting it again", flush=True)
        other = worker(1)
        done = {}
        for name, p in (("worker 0", chief), ("worker 1", other)):
            line = _wait_line(p, "done:", deadline, name)
            first, last = (float(x) for x in line.split("first loss ")[1].split(", last loss "))
            done[name] = (first, last)
            p.wait(max(1.0, deadline - time.monotonic()))
        ok = all(p.returncode == 0 for p in (chief, other))
        first, last = done["worker 0"]
        print(f"[launcher] loss {first:.4f} -> {last:.4f}", flush=True)
        return 0 if ok and last < first / 10 else 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
            if p.stdout is not None:
                p.stdout.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--job_name", default=None, help="(internal) run one worker task")
    p.add_argument("--task_index", type=int, default=0)
    p.add_argument("--cluster", default="", help="cluster JSON (else from TF_CONFIG)")
    p.add_argument("--steps", type=int, default=2000, help="global steps to train")
    p.add_argument("--checkpoint_dir", default="")
    p.add_argument("--timeout", type=float, default=120.0)
    args = p.parse_args(argv)
    if args.job_name == "worker":
        return run_worker(args)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
