"""Start a cluster's tasks as Ray actors (issue 15 item 8): Ray places and restarts the
processes; asyncflow runs in them.  Ray is an optional extra (`pip install
"asyncflow[ray]"`).

    import ray, asyncflow as af
    from asyncflow.distributed import ray as af_ray

    ray.init()
    cluster = af_ray.start_cluster({"ps": 1, "worker": 2},
                                   resources={"worker": {"num_cpus": 2}})
    with af.Session(cluster.target("worker", 0)) as sess: ...
    cluster.shutdown()

Each task is one actor: it takes a free port on its node, the driver gathers every
task's address into the ClusterSpec (a TF cluster is static), then each actor serves its
task with `af.train.Server`.  When an actor dies, Ray restarts it (`max_restarts`) and
the new process serves the same task at the same address, so the rest of the cluster
and its clients find it again; a restarted ps task has lost its variables, as a
restarted TF ps has (a monitored session restores them from its checkpoint).

All tasks share one cluster secret: the driver's (`wire.cluster_secret()`), handed to
the actors through Ray, whose own connections carry it.
"""

from __future__ import annotations

import socket
import time

from asyncflow.distributed.cluster import ClusterSpec

__all__ = ["RayCluster", "start_cluster"]

_DEFAULT_RESOURCES = {"num_cpus": 1}


def _ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - the extra is installed where tested
        raise ImportError(
            'asyncflow.distributed.ray needs Ray: pip install "asyncflow[ray]"'
        ) from e
    return ray


class _Addresses:
    """A small actor holding the tasks' addresses, so a restarted task finds its own."""

    def __init__(self):
        self._addresses: dict[str, dict[int, str]] = {}
        self._final = False

    def report(self, job: str, index: int, address: str) -> None:
        self._addresses.setdefault(job, {})[index] = address

    def finalize(self) -> dict:
        self._final = True
        return self._addresses

    def get(self) -> dict | None:
        return self._addresses if self._final else None


class _Task:
    """One task of the cluster, in its own Ray worker process."""

    def __init__(self, job: str, index: int, addresses, secret: bytes, cpus, host: str, tls=None):
        self._job, self._index = job, index
        self._secret, self._cpus, self._host = secret, cpus, host
        self._tls = tls  # TLSConfig's fields (a tuple) or None: plain TCP
        self._server = None
        spec = _ray().get(addresses.get.remote())
        if spec is not None:  # a restart: serve the same task at the same address
            self._serve(spec)
            return
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        _ray().get(addresses.report.remote(job, index, f"{host}:{port}"))

    def _serve(self, spec: dict) -> str:
        import asyncflow as af

        config = af.ConfigProto(device_count={"CPU": self._cpus}) if self._cpus else None
        from asyncflow.distributed import wire

        tls = wire.TLSConfig(*self._tls) if self._tls is not None else False
        self._server = af.train.Server(
            ClusterSpec(spec), self._job, self._index, config=config, secret=self._secret,
            tls=tls,
        )  # fmt: skip
        return self._server.target

    def serve(self, spec: dict) -> str:
        return self._server.target if self._server is not None else self._serve(spec)

    def pid(self) -> int:
        import os

        return os.getpid()


class RayCluster:
    """The started cluster: its ClusterSpec, session targets, actors, shutdown."""

    def __init__(self, spec: ClusterSpec, actors: dict, addresses):
        self.cluster_spec = spec
        self.actors = actors  # {(job, index): actor handle}
        self._addresses = addresses

    def target(self, job: str, index: int = 0) -> str:
        """The session target of a task: "grpc://host:port"."""
        return "grpc://" + self.cluster_spec.task_address(job, index)

    def wait_ready(self, job: str, index: int, timeout: float = 60.0) -> None:
        """Wait until the task's actor serves (after a restart, for instance).

        Raises TimeoutError."""
        ray = _ray()
        deadline = time.monotonic() + timeout
        actor = self.actors[job, index]
        while True:
            try:
                ray.get(actor.serve.remote(self.cluster_spec.as_dict()), timeout=timeout)
                return
            except ray.exceptions.RayActorError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"/job:{job}/task:{index} did not come back") from None
                time.sleep(0.2)  # the actor is restarting; Ray offers no event to await

    def shutdown(self) -> None:
        """Kill every task's actor (no restarts)."""
        ray = _ray()
        for actor in self.actors.values():
            ray.kill(actor, no_restart=True)
        ray.kill(self._addresses, no_restart=True)


def start_cluster(
    jobs: dict[str, int],
    resources: dict[str, dict] | None = None,
    max_restarts: int = -1,
    cpus_per_task: int | None = None,
    secret: bytes | None = None,
    host: str | None = None,
    timeout: float = 120.0,
    tls=None,
) -> RayCluster:
    """Start `jobs` ({"ps": 1, "worker": 2}) as Ray actors and return the cluster.

    Args:
      jobs: tasks per job.
      resources: Ray resource requests per job ({"worker": {"num_cpus": 2,
        "num_gpus": 1}}); default one CPU per task.
      max_restarts: restarts Ray gives each actor (-1: without limit).
      cpus_per_task: virtual CPU devices in each task (ConfigProto.device_count).
      secret: the cluster secret; default the driver's `wire.cluster_secret()`.
      host: the address tasks listen on; default this node's IP as Ray sees it
        (127.0.0.1 for a local Ray).
      tls: a `wire.TLSConfig` for the tasks (its files must exist on every node);
        default the driver's `wire.tls_config()`; False: plain TCP.

    Raises:
      ImportError: Ray is not installed.
      ValueError: a job with no tasks.
    """
    ray = _ray()
    from asyncflow.distributed import wire

    if any(n < 1 for n in jobs.values()):
        raise ValueError(f"Every job needs at least one task: {jobs}")
    if not ray.is_initialized():
        ray.init()
    secret = wire.cluster_secret() if secret is None else secret
    tls = wire.tls_config() if tls is None else (tls or None)
    tls_fields = None if tls is None else tls._key()
    host = host or ray.util.get_node_ip_address()
    addresses = ray.remote(num_cpus=0)(_Addresses).remote()
    task_cls = ray.remote(_Task)
    actors = {}
    for job, n in jobs.items():
        res = dict((resources or {}).get(job, _DEFAULT_RESOURCES))
        for index in range(n):
            actors[job, index] = task_cls.options(
                max_restarts=max_restarts, max_task_retries=0, **res
            ).remote(job, index, addresses, secret, cpus_per_task, host, tls_fields)
    # Every actor has reported its address once its constructor returned.
    ray.get([a.pid.remote() for a in actors.values()], timeout=timeout)
    spec = ray.get(addresses.finalize.remote())
    ray.get([a.serve.remote(spec) for a in actors.values()], timeout=timeout)
    return RayCluster(ClusterSpec(spec), actors, addresses)
