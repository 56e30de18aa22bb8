"""`DispatchServer` and `WorkerServer`: the tf.data service's servers, each serving on
an event loop and thread of its own (as `tf.train.Server`), and their configs.

`DispatchServer(config).target` is "grpc://localhost:PORT" as TF prints it; the
protocol is asyncflow's own authenticated TCP (asyncflow/distributed/wire.py), named
"grpc" so TF programs run unchanged.  Every process of one service shares the cluster
secret (`wire.cluster_secret()`): a peer without it is refused before anything it sends
is read.

With `fault_tolerant_mode=True` and a `work_dir`, the dispatcher journals its state
there (dispatcher.py, journal.py); a DispatchServer started again on the same port and
work_dir resumes it, while consumers keep reading from the workers and reconnect, and
workers register again (as TF's).  `work_dir` alone journals nothing (TF keeps only
snapshots there).  `worker_addresses` is the fixed worker list static sharding (FILE,
DATA, FILE_OR_DATA, HINT) needs: worker i of it produces shard i; any worker may still
join for the other policies.
"""

from __future__ import annotations

import asyncio
import collections
import threading

from asyncflow import errors
from asyncflow.data.service.client import parse_address
from asyncflow.data.service.dispatcher import GC_TIMEOUT_S, Dispatcher
from asyncflow.data.service.worker import Worker
from asyncflow.distributed import wire
from asyncflow.distributed.server import bind_host, new_loop

__all__ = ["DispatchServer", "DispatcherConfig", "WorkerConfig", "WorkerServer"]

_DISPATCHER_FIELDS = (
    "port",
    "protocol",
    "work_dir",
    "fault_tolerant_mode",
    "worker_addresses",
    "job_gc_check_interval_ms",
    "job_gc_timeout_ms",
    "worker_timeout_ms",
    "worker_max_concurrent_snapshots",
)


class DispatcherConfig(collections.namedtuple("DispatcherConfig", _DISPATCHER_FIELDS)):
    """A tf.data service dispatcher's configuration (TF's fields and defaults).

    port: the port to bind (0: a free one).  protocol: "grpc".  work_dir and
    fault_tolerant_mode: journal the dispatcher's state in work_dir, and resume it
    when started again there (fault_tolerant_mode needs a work_dir).  worker_addresses:
    TF's fixed worker list, for static sharding (each worker's `worker_address`).
    job_gc_timeout_ms: how long a named job no consumer reads is kept for a later one
    (0: TF's 5 minutes; negative: for ever).  The rest are TF's timing knobs, kept for
    their values.
    """

    def __new__(
        cls,
        port=0,
        protocol=None,
        work_dir=None,
        fault_tolerant_mode=False,
        worker_addresses=None,
        job_gc_check_interval_ms=None,
        job_gc_timeout_ms=None,
        worker_timeout_ms=None,
        worker_max_concurrent_snapshots=0,
    ):
        return super().__new__(
            cls,
            port,
            protocol or "grpc",
            work_dir,
            fault_tolerant_mode,
            worker_addresses,
            job_gc_check_interval_ms or 0,
            job_gc_timeout_ms or 0,
            worker_timeout_ms,
            worker_max_concurrent_snapshots,
        )


_WORKER_FIELDS = (
    "dispatcher_address",
    "worker_address",
    "port",
    "protocol",
    "heartbeat_interval_ms",
    "dispatcher_timeout_ms",
    "data_transfer_protocol",
    "data_transfer_address",
)


class WorkerConfig(collections.namedtuple("WorkerConfig", _WORKER_FIELDS)):
    """A tf.data service worker's configuration (TF's fields and defaults).

    dispatcher_address: "host:port" of the dispatcher (no protocol prefix).
    worker_address: the address consumers dial, "%port%" standing for the bound port.
    """

    def __new__(
        cls,
        dispatcher_address,
        worker_address=None,
        port=0,
        protocol=None,
        heartbeat_interval_ms=None,
        dispatcher_timeout_ms=None,
        data_transfer_protocol=None,
        data_transfer_address=None,
    ):
        return super().__new__(
            cls,
            dispatcher_address,
            worker_address or "localhost:%port%",
            port,
            protocol or "grpc",
            heartbeat_interval_ms or 0,
            dispatcher_timeout_ms or 0,
            data_transfer_protocol,
            data_transfer_address or "localhost:%dts_port%",
        )


class _LoopThread:
    """A server's own event loop, run on a daemon thread until stopped."""

    def __init__(self, name: str):
        self.loop = new_loop()
        self.stopped = threading.Event()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), name=name, daemon=True)
        self.thread.start()
        ready.wait()

    def _serve(self, ready) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        try:
            self.loop.run_forever()
        finally:
            self.stopped.set()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self, close) -> None:
        if self.loop.is_closed():
            return

        def shutdown():
            close()
            self.loop.call_later(0.05, self.loop.stop)  # (let the aborts reach the sockets)

        self.loop.call_soon_threadsafe(shutdown)
        self.thread.join()
        self.loop.close()


def _check_protocol(protocol) -> None:
    if protocol not in ("grpc", "grpc+local"):
        raise ValueError(
            f"Unsupported tf.data service protocol {protocol!r}: asyncflow's service "
            "speaks 'grpc' (its own authenticated TCP protocol)"
        )


def _gc_timeout_s(ms) -> float | None:
    """A named job's collection delay for `job_gc_timeout_ms`: TF's 5 minutes for 0
    (unset), never for a negative value."""
    if ms is None or ms == 0:
        return GC_TIMEOUT_S
    return None if ms < 0 else ms / 1000.0


async def _made(cls, *args):
    """`cls(*args)` made on the server's loop (its events belong to that loop)."""
    return cls(*args)


class _Served:
    """What DispatchServer and WorkerServer share: the service (`_service`, a Dispatcher
    or a Worker) runs on its own loop thread (`_thread`) once started."""

    def join(self) -> None:
        """Block until the server stops."""
        if self._thread is not None:
            self._thread.stopped.wait()

    def _stop(self) -> None:
        if self._thread is not None and self._service is not None:
            self._thread.stop(self._service.close)

    @property
    def _address(self) -> str:
        return f"localhost:{self._port}"


class DispatchServer(_Served):
    """A tf.data service dispatcher (TF's `tf.data.experimental.service.DispatchServer`).

    Args:
      config: a DispatcherConfig (default: a free port).
      start: start serving now.

    Raises:
      ValueError: for `fault_tolerant_mode` without a `work_dir`.
      UnavailableError (at start): when the port cannot be bound.
      DataLossError (at start): when the journal in `work_dir` is damaged.
    """

    def __init__(self, config=None, start=True):
        config = config if config is not None else DispatcherConfig()
        _check_protocol(config.protocol)
        if config.fault_tolerant_mode and not config.work_dir:
            raise ValueError(
                "Cannot enable fault tolerant mode without configuring a work dir. Make "
                "sure to set `work_dir` in the `config` object passed to `DispatcherServer`."
            )
        addresses = config.worker_addresses or []
        if isinstance(addresses, str) or not all(isinstance(a, str) for a in addresses):
            raise TypeError(f"worker_addresses must be a list of strings, got {addresses!r}")
        self._config = config
        self._secret = wire.cluster_secret()
        self._service: Dispatcher | None = None
        self._thread: _LoopThread | None = None
        self._port = None
        if start:
            self.start()

    def start(self) -> None:
        """Start serving (a no-op when already started), resuming the journal in
        `work_dir` in fault-tolerant mode.

        Raises UnavailableError when the port cannot be bound, DataLossError when the
        journal is damaged."""
        if self._thread is not None:
            return
        config = self._config
        work_dir = config.work_dir if config.fault_tolerant_mode else None
        self._thread = _LoopThread("asyncflow-data-dispatcher")
        try:
            self._service = self._thread.run(
                _made(
                    Dispatcher,
                    self._secret,
                    None,
                    config.worker_addresses or (),
                    work_dir,
                    _gc_timeout_s(config.job_gc_timeout_ms),
                )
            )
        except errors.OpError:
            self._thread.stop(lambda: None)
            self._thread = None
            raise
        try:
            self._port = self._thread.run(self._service.start("0.0.0.0", self._config.port))
        except OSError as e:
            self._stop()
            raise wire.unavailable(
                f"Could not start a tf.data service dispatcher on port {self._config.port}: {e}"
            ) from None

    def stop(self) -> None:
        """Stop serving: connections close, consumers and workers see it lost."""
        self._stop()

    @property
    def target(self) -> str:
        """The address `distribute` and `register_dataset` take: "grpc://localhost:PORT"."""
        return f"{self._config.protocol}://localhost:{self._port}"

    def __repr__(self) -> str:
        return f"<DispatchServer {self.target}>"


class WorkerServer(_Served):
    """A tf.data service worker (TF's `tf.data.experimental.service.WorkerServer`).

    Args:
      config: a WorkerConfig naming the dispatcher.
      start: start serving (and register with the dispatcher) now.

    Raises:
      UnavailableError (at start): when the dispatcher cannot be reached or the port
        cannot be bound.
    """

    def __init__(self, config, start=True):
        _check_protocol(config.protocol)
        if not isinstance(config.dispatcher_address, str) or not config.dispatcher_address:
            raise ValueError("Must specify a `dispatcher_address`.")
        self._config = config
        self._secret = wire.cluster_secret()
        self._service: Worker | None = None
        self._thread: _LoopThread | None = None
        self._port = None
        if start:
            self.start()

    def start(self) -> None:
        """Start serving and register with the dispatcher (a no-op when started).

        Raises UnavailableError when the dispatcher cannot be reached."""
        if self._thread is not None:
            return
        parse_address(self._config.dispatcher_address)  # (InvalidArgumentError first)
        self._thread = _LoopThread("asyncflow-data-worker")
        self._service = Worker(self._secret)
        dispatcher = self._config.dispatcher_address.partition("://")
        dispatcher = dispatcher[2] if dispatcher[1] else dispatcher[0]
        host = bind_host(self._config.worker_address.rpartition(":")[0].strip("[]"))
        try:
            self._port = self._thread.run(
                self._service.start(
                    host, self._config.port, dispatcher, self._config.worker_address
                )
            )
        except (OSError, errors.OpError) as e:
            self._stop()
            if isinstance(e, errors.OpError):
                raise
            raise wire.unavailable(f"Could not start a tf.data service worker: {e}") from None

    def stop(self) -> None:
        """Stop serving: its tasks end, consumers reading them see it lost."""
        self._stop()

    def __repr__(self) -> str:
        return f"<WorkerServer {self._address}>"
