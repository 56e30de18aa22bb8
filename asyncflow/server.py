"""`python -m asyncflow.server`: run one task of a cluster until terminated.

The task comes from TF_CONFIG (what Kubeflow's TFJob sets: {"cluster": {...}, "task":
{"type": "worker", "index": 0}}; lower-case job names, DNS addresses, and the chief /
master / evaluator roles are jobs like any other) or from flags:

    python -m asyncflow.server --cluster_spec 'ps|localhost:2222;worker|localhost:2223' \\
        --job_name worker --task_index 0

(--cluster_spec also takes the JSON of a cluster dict.)  The cluster secret comes from
ASYNCFLOW_CLUSTER_SECRET or ASYNCFLOW_CLUSTER_SECRET_FILE (see distributed/wire.py);
TLS from the --tls_* flags or, without them, the ASYNCFLOW_TLS_* environment
(`wire.tls_config`).
SIGTERM (or SIGINT) drains: the task stops accepting connections, lets the steps in
flight finish (up to --grace_s seconds), then exits 0.  Once listening it prints one
line, "asyncflow server /job:J/replica:0/task:T listening on port P", to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from asyncflow.config import ConfigProto
from asyncflow.devices.registry import create_devices
from asyncflow.distributed import wire
from asyncflow.distributed.cluster import ClusterSpec, parse_tf_config, split_address
from asyncflow.distributed.server import bind_host, new_loop, resolve_task
from asyncflow.distributed.service import TaskService

__all__ = ["main", "parse_cluster_spec"]


def parse_cluster_spec(text: str) -> ClusterSpec:
    """A ClusterSpec from JSON or TF's "job|host:port,host:port;job|..." form.

    Raises ValueError for anything else."""
    text = text.strip()
    if text.startswith("{"):
        try:
            return ClusterSpec(json.loads(text))
        except (ValueError, TypeError) as e:
            raise ValueError(f"Invalid --cluster_spec JSON: {e}") from None
    jobs = {}
    for part in filter(None, text.split(";")):
        job, sep, addresses = part.partition("|")
        if not sep or not job:
            raise ValueError(f"Invalid --cluster_spec entry {part!r}: expected job|host:port,...")
        jobs[job] = [a for a in addresses.split(",") if a]
    if not jobs:
        raise ValueError("Empty --cluster_spec")
    return ClusterSpec(jobs)


def _args(argv):
    p = argparse.ArgumentParser(prog="python -m asyncflow.server", description=__doc__)
    p.add_argument("--cluster_spec", default="", help="cluster (else from TF_CONFIG)")
    p.add_argument("--job_name", default=None)
    p.add_argument("--task_index", type=int, default=None)
    p.add_argument("--cpus", type=int, default=None, help="virtual CPU devices")
    p.add_argument("--grace_s", type=float, default=30.0, help="drain time on SIGTERM")
    p.add_argument("--tls_cert", default=None, help="this task's certificate chain (PEM)")
    p.add_argument("--tls_key", default=None, help="its private key (PEM)")
    p.add_argument("--tls_ca", default=None, help="CA certificates peers must chain to")
    p.add_argument(
        "--tls_client_auth", action="store_true", help="require client certificates (mTLS)"
    )
    return p.parse_args(argv)


def _tls(args):
    if args.tls_cert or args.tls_ca or args.tls_client_auth:
        return wire.TLSConfig(args.tls_cert, args.tls_key, args.tls_ca, args.tls_client_auth)
    return wire.tls_config()


async def serve(cluster, job, task, config, grace_s: float, tls=None) -> None:
    host, port = split_address(cluster.task_address(job, task))
    devices = create_devices(config, job, 0, task)
    service = TaskService(cluster, job, task, devices, wire.cluster_secret(), tls)
    bound = await service.start(bind_host(host), port)
    if port == 0:
        cluster._spec[job][task] = f"{host}:{bound}"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"asyncflow server {service.name} listening on port {bound}", flush=True)
    await stop.wait()
    try:  # no new connections; the steps in flight finish (within the grace time)
        await asyncio.wait_for(service.drain(), grace_s)
    except TimeoutError:
        pass
    service.close()
    await asyncio.sleep(0)  # let the aborts reach the sockets


def main(argv=None) -> int:
    args = _args(sys.argv[1:] if argv is None else argv)
    if args.cluster_spec:
        cluster = parse_cluster_spec(args.cluster_spec)
        job, task = args.job_name, args.task_index
    else:
        cluster, job, task = parse_tf_config()
        job = args.job_name or job
        task = args.task_index if args.task_index is not None else task
        if not cluster:
            print("No cluster: set TF_CONFIG or pass --cluster_spec", file=sys.stderr)
            return 2
    job, task = resolve_task(cluster, job, task)
    config = ConfigProto(device_count={"CPU": args.cpus}) if args.cpus else ConfigProto()
    loop = new_loop()
    try:
        loop.run_until_complete(serve(cluster, job, task, config, args.grace_s, _tls(args)))
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
