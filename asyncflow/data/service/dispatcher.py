"""The tf.data service's dispatcher: registered datasets, workers, jobs and their tasks.

It keeps which datasets are registered (their GraphDefs), which workers are up (each
one's connection to here), and for each job (one distributed read of one dataset,
shared by name between consumers) one task per worker.  A worker that registers gets a
task of every live job; a job created later is pushed to every worker.  For DYNAMIC
sharding it hands out the source's splits, each once per repetition of the input.

A named job outlives its consumers, as TF's: a consumer of its name that comes after
the last one released it shares what is left of it (nothing, when it ended), until it
is collected `gc_timeout_s` after that release (TF's `job_gc_timeout_ms`, 5 minutes).
Its key is its name, whatever the dataset (as TF's: `from_dataset_id` writes the
dataset id into the name, `distribute` does not, so a `distribute` of a dataset
registered again joins the job of its name), and the reading pass's repetition (`rep`:
the passes over the consumer's dataset value started before, TF's iteration counter),
so `repeat` over a read reads a new job.  A consumer whose processing mode or target
workers differ from the job's is refused; one with another `num_consumers` joins it
(as TF's: the job's tasks keep the first consumer's, and serve its reads as they
can).  An anonymous job goes when its last consumer releases it.

State changes are synchronous methods on this object (no I/O inside them but the
journal's append); the serving around them answers requests on the running loop.

Fault tolerance (TF's `fault_tolerant_mode` with a `work_dir`): every state change is
an update (a small dict, "u" naming it) that is journaled (journal.py) and then
applied by `_apply`, the one place state changes; a dispatcher started on the same
work_dir replays the journal through `_apply` and so resumes its datasets, jobs, tasks
(with their ids: workers and consumers keep them) and each job's next split.  Workers
are not journaled: they register again, and each gets back the tasks it had.

Invariants: a task is in `jobs[j].tasks` only while its worker is in `workers`, or
after a restart until that worker registers again; a job without clients is a named
one with its collection scheduled (unless `gc_timeout_s` is None); a worker whose
connection is lost leaves with its tasks (consumers see them gone at their next
refresh; the splits it took are not handed out again: at most once); every update is
journaled before it is applied, so an answer never tells of a state the journal does
not hold.
"""

from __future__ import annotations

import asyncio
import secrets
import time

from asyncflow import errors
from asyncflow.data.service import protocol as p
from asyncflow.data.service.journal import Journal
from asyncflow.distributed import wire

__all__ = ["GC_TIMEOUT_S", "Dispatcher"]

GC_TIMEOUT_S = 300.0  # TF's default job_gc_timeout_ms (5 minutes)


class _Job:
    __slots__ = (
        "id",
        "dataset",
        "mode",
        "name",
        "rep",
        "num_consumers",
        "target_workers",
        "tasks",
        "splits",
        "clients",
        "compressed",
        "idle_since",
    )

    def __init__(self, job_id, dataset, mode, name, num_consumers, rep=0, target_workers="AUTO"):
        self.id = job_id
        self.dataset = dataset
        self.mode = mode
        self.name = name
        self.rep = rep  # (the reading pass's repetition: part of a named job's key)
        self.num_consumers = num_consumers  # (-1: not coordinated; 0 is, as TF's)
        self.target_workers = target_workers  # (AUTO, ANY or LOCAL: its consumers act on it)
        self.tasks: dict[int, str] = {}  # task id -> worker address
        self.splits: dict[tuple, int] = {}  # (repetition, source) -> next split to hand out
        self.clients = 0
        self.compressed = 0  # (1: its elements travel compressed)
        self.idle_since: float | None = None  # (when its last client released it)

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

    def __init__(
        self, secret: bytes, tls=None, worker_addresses=(), work_dir=None,
        gc_timeout_s: float | None = GC_TIMEOUT_S,
    ):  # fmt: skip
        """`work_dir`: journal every state change there, resuming what it holds.
        `gc_timeout_s`: how long a named job no consumer reads stays (None: for ever).

        Raises DataLossError for a damaged journal."""
        self.secret = secret
        self.tls = tls
        self.worker_addresses = list(worker_addresses)  # static sharding's fixed list
        self.datasets: dict[str, tuple] = {}  # id -> (graph, dataset tensor, element spec)
        self.compressed: set[str] = set()  # ids of datasets whose elements travel compressed
        self._next_dataset = 1000  # (the ids TF 2.21 gives: 1000, 1001, ...)
        self.workers: dict[str, wire.Connection] = {}  # address -> its connection
        self.jobs: dict[int, _Job] = {}
        self.named: dict[tuple[str, int], int] = {}  # (name, rep) -> job id
        self.gc_timeout_s = gc_timeout_s
        self.collecting: set[asyncio.TimerHandle] = set()  # idle named jobs' collections
        self._next_job = 0  # (each id is taken by applying its update)
        self._next_task = 0
        self.connections: set[wire.Connection] = set()
        self.server = None
        self.telling: set[asyncio.Task] = set()  # messages to workers not yet answered
        self.released = asyncio.Event()  # set when a job goes (tests wait on it)
        self.closing = False
        self.journal = None
        # This dispatcher's state's id: kept across a restart from the journal, new
        # otherwise, so that consumers and workers of one without it do not take the
        # new jobs and tasks (numbered from 0 again) for theirs.
        self.incarnation = 0
        if work_dir:
            journal = Journal(work_dir)
            for meta, blob in journal.updates:
                self._apply(meta, blob)
            journal.updates = []
            self.journal = journal
        if not self.incarnation:
            self._update({"u": "init", "inc": secrets.randbits(62) or 1})

    # -- serving
    async def start(self, host: str, port: int) -> int:
        self.server = await wire.serve(self._new_connection, host, port, self.tls)
        for job in list(self.jobs.values()):  # (idle named jobs from the journal)
            if job.clients <= 0:
                self._idle(job)
        return self.server.sockets[0].getsockname()[1]

    def _new_connection(self) -> wire.Connection:
        conn = wire.Connection(self.secret, True, self.on_frame, self._lost)
        self.connections.add(conn)
        return conn

    def close(self) -> None:
        self.closing = True  # (the workers it loses now are not journaled as lost)
        for handle in self.collecting:
            handle.cancel()
        self.collecting.clear()
        if self.server is not None:
            self.server.close()
        err = errors.UnavailableError(
            None, None, "The tf.data service dispatcher is shutting down"
        )
        for conn in list(self.connections):
            conn.abort(err)
        if self.journal is not None:
            self.journal.close()

    def _lost(self, conn, error) -> None:
        self.connections.discard(conn)
        address = conn.state
        if isinstance(address, str) and self.workers.get(address) is conn and not self.closing:
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
        compressed = bool(p.check_int(meta, "z", 0, 0, 1))
        d = self.register(graph, out, spec, p.check_str(meta, "id", ""), compressed)
        return {"id": d}, None

    def _job(self, meta):
        job = self.get_or_create_job(
            p.check_str(meta, "d"),
            p.check_int(meta, "mode", 0, 0, 5),
            p.check_str(meta, "name", ""),
            p.check_int(meta, "nc", -1, -1, 1 << 20),
            p.check_int(meta, "rep", 0, 0, p.MAX_SPLITS),
            p.check_str(meta, "tw", "AUTO"),
        )
        self._update({"u": "join", "job": job.id})
        return {"job": job.id, "inc": self.incarnation}, None

    def _tasks(self, meta):
        job_id = p.check_int(meta, "job", None, 0)
        if p.check_int(meta, "inc", 0, 0, p.MAX_INCARNATION) not in (0, self.incarnation):
            raise errors.NotFoundError(
                None, None, f"Job id {job_id} not found: the tf.data service dispatcher "
                "was started again without its journal (fault_tolerant_mode and work_dir)"
            )  # fmt: skip
        job = self._get_job(job_id)
        return {"tasks": sorted([t, a] for t, a in job.tasks.items())}, None

    def _release(self, meta):
        job = self.jobs.get(p.check_int(meta, "job", None, 0))
        if job is not None:
            if self._update({"u": "release", "job": job.id}):
                self._dropped(job)
            elif job.clients <= 0:
                self._idle(job)
        return {}, None

    def _worker(self, conn, meta):
        address = p.check_str(meta, "addr")
        return {"tasks": self.add_worker(address, conn), "inc": self.incarnation}, None

    def _dataset(self, meta):
        d = p.check_str(meta, "d")
        if d not in self.datasets:
            raise _dataset_not_found(d)
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
        self._update({"u": "split", "job": job.id, "rep": key[0], "src": key[1]})
        return {"i": i}, None

    # -- state
    def _update(self, meta: dict, blob: bytes = b""):
        """Journal the update `meta` (with `blob`), then apply it; what `_apply` gives."""
        if self.journal is not None:
            self.journal.append(meta, blob)
        return self._apply(meta, blob)

    def _apply(self, meta: dict, blob: bytes = b""):
        """Apply one update (live, or replayed from the journal): no I/O here.

        Raises DataLossError for an update this dispatcher cannot apply (a journal
        of another version, or not written by it)."""
        try:
            return _APPLY[meta["u"]](self, meta, blob)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise errors.DataLossError(
                None, None, f"Cannot apply the tf.data service journal's update {meta!r}: {e!r}"
            ) from None

    def _apply_init(self, meta, blob):
        self.incarnation = int(meta["inc"])

    def _apply_dataset(self, meta, blob):
        d = str(meta["id"])
        self.datasets[d] = (bytes(blob), str(meta["out"]), str(meta["spec"]))
        if meta["z"]:
            self.compressed.add(d)

    def _apply_job(self, meta, blob):
        nc = int(meta["nc"])
        if not meta.get("co", nc > 0):  # (a journal without "co": 0 was not coordinated)
            nc = -1
        job = _Job(int(meta["id"]), str(meta["d"]), int(meta["mode"]), str(meta["name"]),
                   nc, int(meta.get("rep", 0)), str(meta.get("tw", "AUTO")))  # fmt: skip
        if job.dataset not in self.datasets:
            raise KeyError(f"dataset {job.dataset}")
        job.compressed = int(job.dataset in self.compressed)
        self.jobs[job.id] = job
        if job.name:
            self.named[(job.name, job.rep)] = job.id
        self._next_job = max(self._next_job, job.id + 1)
        return job

    def _apply_task(self, meta, blob):
        task = int(meta["task"])
        self.jobs[int(meta["job"])].tasks[task] = str(meta["addr"])
        self._next_task = max(self._next_task, task + 1)

    def _apply_join(self, meta, blob):
        job = self.jobs[int(meta["job"])]
        job.clients += 1
        job.idle_since = None

    def _apply_release(self, meta, blob):
        """The job when this was its last client and it is anonymous (it goes), else
        None (a named job stays, idle, for a later consumer of its name)."""
        job = self.jobs[int(meta["job"])]
        job.clients -= 1
        if job.clients > 0:
            return None
        if job.name:
            job.idle_since = time.monotonic()
            return None
        return self._apply_drop(meta, blob)

    def _apply_drop(self, meta, blob):
        job = self.jobs.pop(int(meta["job"]), None)
        if job is not None and job.name:
            self.named.pop((job.name, job.rep), None)
        return job

    def _apply_split(self, meta, blob):
        job = self.jobs[int(meta["job"])]
        key = (int(meta["rep"]), int(meta["src"]))
        job.splits[key] = job.splits.get(key, 0) + 1

    def _apply_lost(self, meta, blob):
        address = str(meta["addr"])
        self.workers.pop(address, None)
        for job in self.jobs.values():
            for t in [t for t, a in job.tasks.items() if a == address]:
                del job.tasks[t]

    def register(
        self, graph: bytes, out: str, spec: str, requested: str = "", compressed=False
    ) -> str:
        """The id of the dataset `out` of `graph`: `requested` if given (a requested id
        already holding another dataset raises AlreadyExistsError), else a new one
        (TF 2.21's: every registration gets a new id, the same dataset's too; 1000
        first, and after a restart from the journal the next one on).  `compressed`:
        its elements travel compressed."""
        if requested:
            old = self.datasets.get(requested)
            if old is not None and old[0] != graph:
                raise errors.AlreadyExistsError(
                    None, None, f"Dataset id {requested} is already registered with a "
                    "different dataset"
                )  # fmt: skip
            d = requested
        else:
            while str(self._next_dataset) in self.datasets:
                self._next_dataset += 1
            d = str(self._next_dataset)
        meta = {"u": "dataset", "id": d, "out": out, "spec": spec, "z": int(compressed)}
        self._update(meta, graph)
        return d

    def get_or_create_job(
        self, dataset: str, mode: int, name: str, num_consumers: int, rep: int = 0,
        target_workers: str = "AUTO",
    ) -> _Job:  # fmt: skip
        """The job `name` for the reading pass's repetition `rep` (created on first use
        for `dataset`, and joined after its consumers released it until it is
        collected; anonymous jobs are each new).

        A job is keyed by its name alone, as TF's: a consumer of the name joins the
        job whatever its own dataset id (`from_dataset_id` puts the id in the name).

        Raises NotFoundError for an unknown dataset, InvalidArgumentError where the
        named job exists with another processing mode or target workers (another
        number of consumers joins it: TF's)."""
        if dataset not in self.datasets:
            raise _dataset_not_found(dataset)
        if name:
            job_id = self.named.get((name, rep))
            if job_id is not None:
                job = self.jobs[job_id]
                _check_matching(job, dataset, mode, target_workers)
                return job
        meta = {"u": "job", "id": self._next_job, "d": dataset, "mode": mode, "name": name,
                "nc": num_consumers, "co": int(num_consumers >= 0), "rep": rep if name else 0,
                "tw": target_workers}  # fmt: skip
        job = self._update(meta)
        for address, conn in self.workers.items():
            task = self._new_task(job, address)
            self._tell(conn, "task", job.task_dict(task, self.index_of(address)))
        return job

    def _new_task(self, job: _Job, address: str) -> int:
        task = self._next_task
        self._update({"u": "task", "task": task, "job": job.id, "addr": address})
        return task

    def add_worker(self, address: str, conn: wire.Connection) -> list[dict]:
        """Register a worker; the tasks it gets (one for every live job: those it had,
        journaled before a restart, keep their ids)."""
        old = self.workers.get(address)
        if old is not None and old is not conn:
            self.remove_worker(address)
            old.abort(errors.AbortedError(None, None, f"Worker {address} registered again"))
        conn.state = address
        self.workers[address] = conn
        tasks = []
        for job in list(self.jobs.values()):
            had = [t for t, a in job.tasks.items() if a == address]
            for task in had or [self._new_task(job, address)]:
                tasks.append(job.task_dict(task, self.index_of(address)))
        return tasks

    def index_of(self, address: str) -> tuple[int, int]:
        """(`address`'s index in the fixed worker list or -1, the list's length)."""
        listed = self.worker_addresses
        return (listed.index(address) if address in listed else -1), len(listed)

    def remove_worker(self, address: str) -> None:
        self._update({"u": "lost", "addr": address})

    def remove_job(self, job_id: int) -> None:
        job = self._update({"u": "drop", "job": job_id})
        if job is not None:
            self._dropped(job)

    def _idle(self, job: _Job) -> None:
        """Collect `job`, which no consumer reads now, `gc_timeout_s` from now unless
        one joins it meanwhile."""
        if self.gc_timeout_s is None or self.closing:
            return
        since = job.idle_since
        handle = asyncio.get_running_loop().call_later(
            self.gc_timeout_s, lambda: self._collect(job.id, since, handle)
        )
        self.collecting.add(handle)

    def _collect(self, job_id: int, since, handle) -> None:
        self.collecting.discard(handle)
        job = self.jobs.get(job_id)
        if job is not None and job.clients <= 0 and job.idle_since == since:
            self.remove_job(job_id)

    def _dropped(self, job: _Job) -> None:
        """Tell the workers of `job`, which went, to drop their tasks of it."""
        self.released.set()
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


_APPLY = {
    "init": Dispatcher._apply_init,
    "dataset": Dispatcher._apply_dataset,
    "job": Dispatcher._apply_job,
    "task": Dispatcher._apply_task,
    "join": Dispatcher._apply_join,
    "release": Dispatcher._apply_release,
    "drop": Dispatcher._apply_drop,
    "split": Dispatcher._apply_split,
    "lost": Dispatcher._apply_lost,
}


def _check_matching(job: _Job, dataset: str, mode: int, workers: str):
    """Refuse a consumer of `job`'s name whose processing mode or target workers
    differ from the job's.  Its number of consumers is not compared, as TF's: such a
    consumer reads the job's tasks as they are (a plain read of a coordinated job asks
    as consumer 0 for round 0, and fails once that round was read: worker.py).

    Raises InvalidArgumentError (TF's words, its parameters in TF's order)."""
    diff = ""
    if job.mode != mode:
        diff += f"Existing processing mode: <{_mode_text(job.mode)}>; got <{_mode_text(mode)}>. "
    if job.target_workers != workers:
        diff += f"Existing target workers: <{job.target_workers}>; got <{workers}>. "
    if diff:
        raise errors.InvalidArgumentError(
            None, None, f"Failed to get or create job for dataset with id {dataset}: Tried "
            f"to create job with name {job.name}, but found an existing job with different "
            f"parameters: {diff}"
        )  # fmt: skip


def _mode_text(policy: int) -> str:
    """A processing mode as TF's ProcessingModeDef prints on one line (its default,
    OFF, not written)."""
    return f"sharding_policy: {p.ShardingPolicy(policy).name}" if policy else ""


def _dataset_not_found(d: str) -> errors.NotFoundError:
    return errors.NotFoundError(
        None, None, f"Dataset id {d} not found. It must be registered with "
        "`register_dataset` before calling `from_dataset_id`."
    )  # fmt: skip


def _unknown(method):
    raise errors.UnimplementedError(None, None, f"Unknown tf.data service method {method!r}")


async def _tell(conn: wire.Connection, method: str, meta: dict) -> None:
    """A request to a worker whose answer nobody waits for (a lost worker leaves by
    its connection's loss)."""
    try:
        await p.call(conn, method, meta)
    except errors.OpError:
        pass
