"""`tf.train.Server`: one task of a cluster, serving on its own event loop and thread.

`Server(cluster, job_name, task_index)` binds the task's address (loopback for
"localhost"/"127.0.0.1", every interface otherwise, as TF binds 0.0.0.0) and serves the
worker service (`service.TaskService`) until stopped; `target` ("grpc://localhost:PORT",
as TF) is what `Session` takes.  The protocol is asyncflow's own over TCP; "grpc" is
accepted as the protocol name so TF programs run unchanged.
"""

from __future__ import annotations

import asyncio
import threading

from asyncflow.config import ConfigProto
from asyncflow.devices.registry import create_devices
from asyncflow.distributed import wire
from asyncflow.distributed.cluster import ClusterSpec, split_address
from asyncflow.distributed.service import TaskService
from asyncflow.protos.tensorflow_server_pb2 import ServerDef

__all__ = ["Server", "resolve_task"]

_LOOPBACK = ("localhost", "127.0.0.1", "::1", "ip6-localhost")


def resolve_task(cluster: ClusterSpec, job_name, task_index) -> tuple[str, int]:
    """TF's defaults: the only job, the only task.  Raises ValueError otherwise."""
    if job_name is None:
        if len(cluster.jobs) != 1:
            raise ValueError("Must specify an explicit `job_name`.")
        job_name = cluster.jobs[0]
    if task_index is None:
        indices = cluster.task_indices(job_name)
        if len(indices) != 1:
            raise ValueError("Must specify an explicit `task_index`.")
        task_index = indices[0]
    cluster.task_address(job_name, task_index)  # ValueError for an unknown task
    return job_name, int(task_index)


def bind_host(host: str) -> str:
    return "127.0.0.1" if host in _LOOPBACK else "0.0.0.0"


def new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency where it exists
        return asyncio.new_event_loop()


class Server:
    """An in-process server for one task of a cluster (TF1's `tf.train.Server`).

    Args:
      server_or_cluster_def: a ServerDef, a ClusterSpec / ClusterDef, or a dict of
        job -> addresses.
      job_name, task_index: this task (defaults: the ServerDef's, else the only job /
        the only task).
      protocol: None or "grpc".
      config: a ConfigProto for the task's devices (device_count, threads).
      start: start serving now.
      secret: the cluster secret (bytes); by default `wire.cluster_secret()`.
      tls: a `wire.TLSConfig` for this task's connections (served and dialled); by
        default `wire.tls_config()` (the ASYNCFLOW_TLS_* environment; None: plain TCP).
        False: plain TCP whatever the environment says.

    Raises:
      ValueError: for a missing job_name/task_index where the cluster has several, an
        unknown job or task, or an unsupported protocol.
    """

    def __init__(
        self,
        server_or_cluster_def,
        job_name=None,
        task_index=None,
        protocol=None,
        config=None,
        start=True,
        secret: bytes | None = None,
        tls=None,
    ):
        if isinstance(server_or_cluster_def, ServerDef):
            sd = server_or_cluster_def
            job_name = sd.job_name if job_name is None else job_name
            task_index = sd.task_index if task_index is None else task_index
            protocol = (sd.protocol or None) if protocol is None else protocol
            server_or_cluster_def = ClusterSpec(sd.cluster)
        if protocol not in (None, "grpc"):
            raise ValueError(
                f"Unsupported protocol {protocol!r}: asyncflow servers speak 'grpc' "
                "(asyncflow's own authenticated TCP protocol)"
            )
        cluster = ClusterSpec(server_or_cluster_def)
        job_name, task_index = resolve_task(cluster, job_name, task_index)
        self._cluster = cluster
        self._job, self._task = job_name, task_index
        self._config = config if config is not None else ConfigProto()
        self._secret = secret if secret is not None else wire.cluster_secret()
        self._tls = wire.tls_config() if tls is None else (tls or None)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._service: TaskService | None = None
        self._port: int | None = None
        self._stopped = threading.Event()
        if start:
            self.start()

    @property
    def target(self) -> str:
        """The session target for this task: "grpc://localhost:PORT"."""
        return f"grpc://localhost:{self._port}"

    @property
    def server_def(self) -> ServerDef:
        """This server's ServerDef (TF's message)."""
        return ServerDef(
            cluster=self._cluster.as_cluster_def(),
            job_name=self._job,
            task_index=self._task,
            protocol="grpc",
        )

    def start(self) -> None:
        """Start serving (a no-op when already started).

        Raises UnavailableError when the task's address cannot be bound."""
        if self._thread is not None:
            return
        host, port = split_address(self._cluster.task_address(self._job, self._task))
        if self._tls is not None:  # (its files are read now: their errors raise here)
            self._tls.server_context()
            self._tls.client_context()
        devices = create_devices(self._config, self._job, 0, self._task)
        self._service = TaskService(
            self._cluster, self._job, self._task, devices, self._secret, self._tls
        )
        self._loop = new_loop()
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(ready,), name=f"asyncflow-server-{self._job}-{self._task}"
        )
        self._thread.daemon = True
        self._thread.start()
        ready.wait()
        try:
            self._port = asyncio.run_coroutine_threadsafe(
                self._service.start(bind_host(host), port), self._loop
            ).result()
        except OSError as e:
            self.stop()
            raise wire.unavailable(f"Could not start a server on {host}:{port}: {e}") from None
        if port == 0:  # an ephemeral port: the cluster learns the real one
            self._cluster._spec[self._job][self._task] = f"{host}:{self._port}"

    def _serve(self, ready) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(ready.set)
        try:
            self._loop.run_forever()
        finally:
            self._stopped.set()

    def join(self) -> None:
        """Block until the server stops."""
        if self._thread is not None:
            self._stopped.wait()

    def stop(self) -> None:
        """Stop serving: in-flight steps fail with UnavailableError, connections close."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or loop.is_closed():
            return

        def shutdown():
            self._service.close()
            loop.call_later(0.05, loop.stop)  # (let the aborts reach the sockets)

        loop.call_soon_threadsafe(shutdown)
        thread.join()
        loop.close()
        for d in self._service.devices:
            d.close()

    @staticmethod
    def create_local_server(config=None, start=True) -> Server:
        """A single-task server on localhost with a free port (job "localhost")."""
        return Server({"localhost": ["localhost:0"]}, protocol="grpc", config=config, start=start)

    def __repr__(self) -> str:
        return f"<Server /job:{self._job}/task:{self._task} {self.target}>"
