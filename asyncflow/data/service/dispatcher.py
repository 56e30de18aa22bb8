"""The tf.data service's dispatcher: registered datasets, workers, jobs and their tasks.

It keeps which datasets are registered (their GraphDefs), which workers are up (each
one's connection to here), and for each job (one distributed read of one dataset,
shared by name between consumers) one task per worker.  A worker that registers gets a
task of every live job; a job created later is pushed to every worker.  For DYNAMIC
sharding it hands out the source's splits, each once per repetition of the input.

State changes are synchronous methods on this object (no I/O inside them); the serving
around them answers requests on the running loop.

Invariants: a task is in `jobs[j].tasks` only while its worker is in `workers`; a
worker whose connection is lost leaves with its tasks (consumers see them gone at
their next refresh; the splits it took are not handed out again: at most once).
"""

from __future__ import annotations

import asyncio
import itertools

from asyncflow import errors
from asyncflow.data.service import protocol as p
from asyncflow.distributed import wire

__all__ = ["Dispatcher"]


class _Job:
    __slots__ = (
        "id",
        "dataset",
        "mode",
        "name",
        "num_consumers",
        "tasks",
        "splits",
        "clients",
        "compressed",
    )

    def __init__(self, job_id, dataset, mode, name, num_consumers):
        self.id = job_id
        self.dataset = dataset
        self.mode = mode
        self.name = name
        self.num_consumers = num_consumers
        self.tasks: dict[int, str] = {}  # task id -> worker address
        self.splits: dict[tuple, int] = {}  # (repetition, source) -> next split to hand out
        self.clients = 0
        self.compressed = 0  # (1: its elements travel compressed)

    def task_dict(self, task: int, worker: tuple[int, int] = (-1, 0)) -> dict:
        """The task's message to its worker; `worker`: the worker's index in the
        fixed worker list and the list's length ((-1, 0) without one)."""
        return {
            "wi": worker[0],
            "nw": worker[1],
            "task": task,
            "job": self.id,
            "d": self.dataset,
            "mode": self.mode,
            "nc": self.num_consumers,
            "z": self.compressed,
        }


class Dispatcher:
    """A dispatcher on the running loop (`await start(host, port)`, `close()`)."""

    def __init__(self, secret: bytes, tls=None, worker_addresses=()):
        self.secret = secret
        self.tls = tls
        self.worker_addresses = list(worker_addresses)  # static sharding's fixed list
        self.datasets: dict[str, tuple] = {}  # id -> (graph, dataset tensor, element spec)
        self.compressed: set[str] = set()  # ids of datasets whose elements travel compressed
        self._dataset_ids = itertools.count(1000)
        self.workers: dict[str, wire.Connection] = {}  # address -> its connection
        self.jobs: dict[int, _Job] = {}
        self.named: dict[tuple[str, str], int] = {}  # (dataset, job name) -> job id
        self._job_ids = itertools.count(0)
        self._task_ids = itertools.count(0)
        self.connections: set[wire.Connection] = set()
        self.server = None
        self.telling: set[asyncio.Task] = set()  # messages to workers not yet answered
        self.released = asyncio.Event()  # set when a job goes (tests wait on it)

    # -- serving
    async def start(self, host: str, port: int) -> int:
        self.server = await wire.serve(self._new_connection, host, port, self.tls)
        return self.server.sockets[0].getsockname()[1]

    def _new_connection(self) -> wire.Connection:
        conn = wire.Connection(self.secret, True, self.on_frame, self._lost)
        self.connections.add(conn)
        return conn

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        err = errors.UnavailableError(
            None, None, "The tf.data service dispatcher is shutting down"
        )
        for conn in list(self.connections):
            conn.abort(err)

    def _lost(self, conn, error) -> None:
        self.connections.discard(conn)
        address = conn.state
        if isinstance(address, str) and self.workers.get(address) is conn:
            self.remove_worker(address)

    def on_frame(self, conn, kind, rid, meta, payload) -> None:
        if kind != wire.RUN:
            raise errors.InvalidArgumentError(None, None, f"Unexpected frame kind {kind}")
        method = meta.get("m")
        if method == "register":
            p.answer(conn, rid, self._register, meta, payload)
        elif method == "job":
            p.answer(conn, rid, self._job, meta)
        elif method == "tasks":
            p.answer(conn, rid, self._tasks, meta)
        elif method == "release":
            p.answer(conn, rid, self._release, meta)
        elif method == "worker":
            p.answer(conn, rid, self._worker, conn, meta)
        elif method == "dataset":
            p.answer(conn, rid, self._dataset, meta)
        elif method == "split":
            p.answer(conn, rid, self._split, meta)
        else:
            p.answer(conn, rid, _unknown, method)

    # -- requests
    def _register(self, meta, payload):
        graph = p.read_graph(meta, payload)
        out, spec = p.check_str(meta, "out"), p.check_str(meta, "spec", "")
        d = self.register(graph, out, spec, p.check_str(meta, "id", ""))
        if p.check_int(meta, "z", 0, 0, 1):
            self.compressed.add(d)
        return {"id": d}, None

    def _job(self, meta):
        job = self.get_or_create_job(
            p.check_str(meta, "d"),
            p.check_int(meta, "mode", 0, 0, 5),
            p.check_str(meta, "name", ""),
            p.check_int(meta, "nc", 0, 0, 1 << 20),
        )
        job.clients += 1
        return {"job": job.id}, None

    def _tasks(self, meta):
        job = self._get_job(p.check_int(meta, "job", None, 0))
        return {"tasks": sorted([t, a] for t, a in job.tasks.items())}, None

    def _release(self, meta):
        job = self.jobs.get(p.check_int(meta, "job", None, 0))
        if job is not None:
            job.clients -= 1
            if job.clients <= 0:
                self.remove_job(job.id)
        return {}, None

    def _worker(self, conn, meta):
        address = p.check_str(meta, "addr")
        return {"tasks": self.add_worker(address, conn)}, None

    def _dataset(self, meta):
        d = p.check_str(meta, "d")
        if d not in self.datasets:
            raise errors.NotFoundError(None, None, f"Dataset id {d} not found")
        graph, out, _ = self.datasets[d]
        return {"out": out}, [p.graph_tensor(graph)]

    def _split(self, meta):
        job = self._get_job(p.check_int(meta, "job", None, 0))
        rep = p.check_int(meta, "rep", None, 0)
        n = p.check_int(meta, "n", None, 0)
        key = (rep, p.check_int(meta, "src", 0, 0, 1 << 16))
        i = job.splits.get(key, 0)
        if i >= n:
            return {"end": True}, None
        job.splits[key] = i + 1
        return {"i": i}, None

    # -- state
    def register(self, graph: bytes, out: str, spec: str, requested: str = "") -> str:
        """The id of the dataset `out` of `graph`: `requested` if given (a requested id
        already holding another dataset raises AlreadyExistsError), else a new one
        (TF 2.21's: every registration gets a new id, the same dataset's too)."""
        if requested:
            old = self.datasets.get(requested)
            if old is not None and old[0] != graph:
                raise errors.AlreadyExistsError(
                    None, None, f"Dataset id {requested} is already registered with a "
                    "different dataset"
                )  # fmt: skip
            self.datasets[requested] = (graph, out, spec)
            return requested
        d = str(next(self._dataset_ids))
        while d in self.datasets:
            d = str(next(self._dataset_ids))
        self.datasets[d] = (graph, out, spec)
        return d

    def get_or_create_job(self, dataset: str, mode: int, name: str, num_consumers: int) -> _Job:
        """The job `name` of `dataset` (created on first use; anonymous jobs are each new).

        A job is named per dataset: the same name for another dataset id is another
        job (as TF's, where each run of a register op gives a new id).

        Raises NotFoundError for an unknown dataset, InvalidArgumentError where the
        named job exists with another processing mode or number of consumers."""
        if dataset not in self.datasets:
            raise errors.NotFoundError(None, None, f"Dataset id {dataset} not found")
        if name:
            job_id = self.named.get((dataset, name))
            if job_id is not None:
                job = self.jobs[job_id]
                if job.mode != mode or job.num_consumers != num_consumers:
                    raise errors.InvalidArgumentError(
                        None, None, f"Tried to create job with name {name}, but found an "
                        "existing job with different parameters: existing processing mode "
                        f"{p.ShardingPolicy(job.mode).name}, {job.num_consumers} consumers; "
                        f"requested {p.ShardingPolicy(mode).name}, {num_consumers} consumers"
                    )  # fmt: skip
                return job
        job = _Job(next(self._job_ids), dataset, mode, name, num_consumers)
        job.compressed = int(dataset in self.compressed)
        self.jobs[job.id] = job
        if name:
            self.named[(dataset, name)] = job.id
        for address, conn in self.workers.items():
            task = next(self._task_ids)
            job.tasks[task] = address
            self._tell(conn, "task", job.task_dict(task, self.index_of(address)))
        return job

    def add_worker(self, address: str, conn: wire.Connection) -> list[dict]:
        """Register a worker; the tasks it gets (one for every live job)."""
        old = self.workers.get(address)
        if old is not None and old is not conn:
            self.remove_worker(address)
            old.abort(errors.AbortedError(None, None, f"Worker {address} registered again"))
        conn.state = address
        self.workers[address] = conn
        tasks = []
        for job in self.jobs.values():
            task = next(self._task_ids)
            job.tasks[task] = address
            tasks.append(job.task_dict(task, self.index_of(address)))
        return tasks

    def index_of(self, address: str) -> tuple[int, int]:
        """(`address`'s index in the fixed worker list or -1, the list's length)."""
        listed = self.worker_addresses
        return (listed.index(address) if address in listed else -1), len(listed)

    def remove_worker(self, address: str) -> None:
        self.workers.pop(address, None)
        for job in self.jobs.values():
            for t in [t for t, a in job.tasks.items() if a == address]:
                del job.tasks[t]

    def remove_job(self, job_id: int) -> None:
        job = self.jobs.pop(job_id, None)
        if job is None:
            return
        self.released.set()
        if job.name:
            self.named.pop((job.dataset, job.name), None)
        for task, address in job.tasks.items():
            conn = self.workers.get(address)
            if conn is not None:
                self._tell(conn, "drop", {"task": task})

    def _tell(self, conn: wire.Connection, method: str, meta: dict) -> None:
        task = asyncio.ensure_future(_tell(conn, method, meta))
        self.telling.add(task)
        task.add_done_callback(self.telling.discard)

    async def settled(self) -> None:
        """Return once every worker has answered what it was told (tests' quiescence)."""
        while self.telling:
            await asyncio.gather(*self.telling)

    def _get_job(self, job_id: int) -> _Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise errors.NotFoundError(None, None, f"Job id {job_id} not found")
        return job


def _unknown(method):
    raise errors.UnimplementedError(None, None, f"Unknown tf.data service method {method!r}")


async def _tell(conn: wire.Connection, method: str, meta: dict) -> None:
    """A request to a worker whose answer nobody waits for (a lost worker leaves by
    its connection's loss)."""
    try:
        await p.call(conn, method, meta)
    except errors.OpError:
        pass
