"""Dynamic batching: concurrent requests merged along dim 0 into one step.

Two users: the serving REST/gRPC server (asyncflow/serving/model.py: one batcher per
signature) and the in-graph batching ops (ops/batch_ops.py: BatchFunction and Batch,
one batcher per op resource in a session).

The knobs are TF Serving's (BasicBatchScheduler / BatchingParameters), with Triton's and
Ray Serve's names in mind:

- `max_batch_size`: the most rows (sum of requests' sizes) one batch holds;
- `batch_timeout_micros`: how long a batch may wait for more requests once it has one.
  0 (the default) is greedy batching: a batch goes as soon as a batch slot is free, and
  while every slot is busy the waiting batch keeps filling (to `max_batch_size`);
- `max_enqueued_batches`: batches waiting for a slot, per input signature; a request
  that would need one more fails at once with `errors.UnavailableError`;
- `max_concurrent_batches`: batches running at once (TF Serving's num_batch_threads);
- `allowed_batch_sizes`: a merged batch is padded (with copies of its first row) to the
  next allowed size, and the outputs sliced back; the last must equal max_batch_size
  (without splitting);
- `enable_large_batch_splitting` (TF's BatchFunction attr): `max_batch_size` limits one
  request, and batches run at most `allowed_batch_sizes[-1]` rows (max_batch_size when
  none are given): a request that does not fit the open batch is split along dim 0, its
  first piece filling that batch, and its outputs are the pieces' joined back in order;
- `pass_contexts`: `fn(merged, contexts)` also gets each request's `context` (what
  `submit` was given), in the batch's row order: for callers that need more than their
  own rows back (TF's Batch op hands the whole batch to one caller);
- per-request `deadline_s` (seconds from submit): a request still waiting, or still
  running, when it expires fails with `errors.DeadlineExceededError`; one that expires
  while queued is taken out of its batch;
- `batch_size_fn(inputs) -> int`: what a request counts against max_batch_size
  (default: its dim 0, which is always how its outputs are sliced back);
- `pad_variable_length_inputs`: requests whose inputs differ in dims after the first
  share a batch; each input is padded at the end of every such dim to the batch's
  largest size, with its own first element as the padding value (TF Serving's
  choice), and outputs are sliced back along dim 0 only.

Requests are merged only with requests of the same input names, dtypes and trailing
shapes (ranks only, when padding) -- one queue per such key, dropped as soon as it has
no pending batch.  Nothing
sleeps: a batch's timeout is a `loop.call_at` timer, and dispatch happens in
`loop.call_soon` callbacks, so requests submitted in the same loop pass share a batch
even with a zero timeout.

Invariants: a request's future is resolved exactly once (result, error, deadline or
cancellation); a batch is in its queue's `pending` until it starts, and `_running`
counts started, unfinished batches (<= max_concurrent_batches); all state is touched
only on the batcher's loop.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import copy
import itertools
import time
from collections.abc import Awaitable, Callable, Mapping

import numpy as np

from asyncflow import errors

__all__ = ["Batcher", "BatchingMetrics"]

BatchFn = Callable[[dict], Awaitable[Mapping]]


class BatchingMetrics:
    """Counters and recent samples, read at run time with `snapshot()`.

    Latency is submit-to-result; queue time is submit-to-batch-start.  Both keep the
    last `window` samples, so percentiles follow the current load.
    """

    def __init__(self, window: int = 10000):
        self.batch_sizes: collections.Counter = collections.Counter()
        self.padded_batch_sizes: collections.Counter = collections.Counter()
        self.latency = collections.deque(maxlen=window)
        self.queue_time = collections.deque(maxlen=window)
        self.requests = 0
        self.batches = 0
        self.rejected = 0
        self.deadline_exceeded = 0
        self.cancelled = 0
        self.failed = 0

    @staticmethod
    def _percentiles(samples) -> dict:
        if not samples:
            return {"p50": None, "p90": None, "p99": None, "mean": None}
        a = np.fromiter(samples, dtype=np.float64, count=len(samples))
        p50, p90, p99 = np.percentile(a, [50, 90, 99])
        return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "mean": float(a.mean())}

    def snapshot(self) -> dict:
        """A plain dict: counts, batch-size histograms, latency/queue-time percentiles (s)."""
        return {
            "requests": self.requests,
            "batches": self.batches,
            "rejected": self.rejected,
            "deadline_exceeded": self.deadline_exceeded,
            "cancelled": self.cancelled,
            "failed": self.failed,
            "batch_size_histogram": dict(sorted(self.batch_sizes.items())),
            "padded_batch_size_histogram": dict(sorted(self.padded_batch_sizes.items())),
            "mean_batch_size": (
                sum(k * v for k, v in self.batch_sizes.items()) / self.batches
                if self.batches
                else None
            ),
            "latency_s": self._percentiles(self.latency),
            "queue_time_s": self._percentiles(self.queue_time),
        }


class _Request:
    __slots__ = ("inputs", "size", "rows", "future", "enqueued", "deadline", "batch", "context")

    def __init__(self, inputs, size, rows, future, enqueued, context=None):
        self.inputs = inputs
        self.context = context
        self.size = size  # what counts against max_batch_size (batch_size_fn)
        self.rows = rows  # dim 0: how outputs are sliced back
        self.future = future
        self.enqueued = enqueued
        self.deadline = None  # loop.time() when it fails with DeadlineExceededError
        self.batch = None


class _Batch:
    __slots__ = (
        "queue", "requests", "size", "ready", "timer", "started", "seq", "expiry", "expires"
    )  # fmt: skip

    def __init__(self, queue, seq):
        self.queue = queue
        self.requests: list[_Request] = []
        self.size = 0
        self.ready = False
        self.timer = None
        self.started = False
        self.seq = seq
        # One timer per batch for its requests' deadlines, armed for the earliest of
        # them (`expires`): a timer per request cost ~2 us each, a sizeable part of a
        # batched request's own work.
        self.expiry = None
        self.expires = None


class _Queue:
    __slots__ = ("key", "pending")

    def __init__(self, key):
        self.key = key
        self.pending: collections.deque[_Batch] = collections.deque()


class Batcher:
    """Merges concurrent `submit(inputs)` calls into batched calls of `fn`.

    `fn(inputs: dict[str, ndarray]) -> Mapping[str, ndarray]` is awaited once per batch
    with every input concatenated along dim 0; every output must have the padded batch
    size as its dim 0.

    Raises (constructor): ValueError for inconsistent options.
    """

    def __init__(
        self,
        fn: BatchFn,
        *,
        max_batch_size: int = 32,
        batch_timeout_micros: int = 0,
        max_enqueued_batches: int = 10,
        max_concurrent_batches: int = 1,
        allowed_batch_sizes=None,
        batch_size_fn: Callable[[Mapping], int] | None = None,
        metrics_window: int = 10000,
        pad_variable_length_inputs: bool = False,
        enable_large_batch_splitting: bool = False,
        pass_contexts: bool = False,
    ):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be positive; was {max_batch_size}")
        if batch_timeout_micros < 0:
            raise ValueError(
                f"batch_timeout_micros must be non-negative; was {batch_timeout_micros}"
            )
        if max_enqueued_batches < 1:
            raise ValueError(f"max_enqueued_batches must be positive; was {max_enqueued_batches}")
        if max_concurrent_batches < 1:
            raise ValueError(
                f"max_concurrent_batches must be positive; was {max_concurrent_batches}"
            )
        if allowed_batch_sizes:
            sizes = [int(s) for s in allowed_batch_sizes]
            if any(b <= a for a, b in itertools.pairwise(sizes)) or sizes[0] < 1:
                raise ValueError("allowed_batch_sizes entries must be monotonically increasing")
            if enable_large_batch_splitting:
                if sizes[-1] > max_batch_size:
                    raise ValueError(
                        "When enable_large_batch_splitting is true, input_batch_size_limit "
                        "must be greater than or equal to max_execution_batch_size."
                    )
            elif sizes[-1] != max_batch_size:
                raise ValueError(
                    "final entry in allowed_batch_sizes must equal max_batch_size when "
                    f"enable_large_batch_splitting is False; was {sizes[-1]}, expected "
                    f"{max_batch_size}"
                )
            self._allowed = sizes
        else:
            self._allowed = None
        self._fn = fn
        self.max_batch_size = max_batch_size
        # Invariant: no batch holds more than `_batch_limit` rows (sizes); requests up to
        # max_batch_size are split to fit when splitting is on.
        self._split = bool(enable_large_batch_splitting) and batch_size_fn is None
        self._batch_limit = self._allowed[-1] if self._split and self._allowed else max_batch_size
        self._pass_contexts = bool(pass_contexts)
        self.batch_timeout = batch_timeout_micros / 1e6
        self.max_enqueued_batches = max_enqueued_batches
        self.max_concurrent_batches = max_concurrent_batches
        self._batch_size_fn = batch_size_fn
        self.pad_variable_length_inputs = bool(pad_variable_length_inputs)
        self.metrics = BatchingMetrics(metrics_window)
        self._queues: dict = {}
        self._running = 0
        self._tasks: set[asyncio.Task] = set()
        self._dispatch_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seq = itertools.count()
        self._closed = False

    # -- submitting
    async def submit(self, inputs: Mapping, deadline_s: float | None = None, context=None) -> dict:
        """Run `inputs` (name -> array, batch along dim 0) in some batch; its outputs.
        `context` goes to `fn` with the request (`pass_contexts`).

        Raises:
          InvalidArgumentError: empty inputs, or a request larger than max_batch_size.
          UnavailableError: the queue for this input signature is full, or closed.
          DeadlineExceededError: `deadline_s` seconds passed before the result.
          The error `fn` raised for the batch this request was in.
        """
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            cf = asyncio.run_coroutine_threadsafe(
                self.submit(inputs, deadline_s, context), self._loop
            )
            return await asyncio.wrap_future(cf)
        if self._closed:
            raise errors.UnavailableError(None, None, "Batcher has been closed.")
        arrays, rows, size = self._prepare(inputs)
        if self._split and size > self._room(arrays):
            return await self._submit_split(loop, arrays, rows, deadline_s, context)
        request = self._enqueue(loop, arrays, rows, size, deadline_s, context)
        try:
            result = await request.future
        except asyncio.CancelledError:
            if request.batch is not None and not request.batch.started:
                self._withdraw(request)
            self.metrics.cancelled += 1
            raise
        self.metrics.latency.append(time.perf_counter() - request.enqueued)
        return result

    def _room(self, arrays) -> int:
        """Rows the open batch for `arrays`' signature still takes (a fresh one's limit
        when there is none)."""
        queue = self._queues.get(_batch_key(arrays, self.pad_variable_length_inputs))
        if queue is None or not queue.pending:
            return self._batch_limit
        room = self._batch_limit - queue.pending[-1].size
        return room if room > 0 else self._batch_limit

    async def _submit_split(self, loop, arrays, rows, deadline_s, context) -> dict:
        """A request larger than the open batch's room, as pieces in consecutive batches
        (TF's large batch splitting); its outputs are the pieces' joined in order."""
        requests = []
        start = 0
        try:
            while start < rows:
                n = min(self._room(arrays), rows - start)
                piece = {name: a[start : start + n] for name, a in arrays.items()}
                requests.append(self._enqueue(loop, piece, n, n, deadline_s, context))
                start += n
            pieces = [await r.future for r in requests]
        except BaseException as exc:
            for r in requests:
                if not r.future.done():
                    if r.batch is not None and not r.batch.started:
                        self._withdraw(r)
                    r.future.cancel()
                elif not r.future.cancelled():
                    r.future.exception()  # (retrieved: the first error is raised)
            if isinstance(exc, asyncio.CancelledError):
                self.metrics.cancelled += 1
            raise
        self.metrics.latency.append(time.perf_counter() - requests[0].enqueued)
        return {name: np.concatenate([p[name] for p in pieces]) for name in pieces[0]}

    def _prepare(self, inputs) -> tuple[dict, int, int]:
        if not inputs:
            raise errors.InvalidArgumentError(None, None, "A batched request needs inputs.")
        arrays = {
            name: v if type(v) is np.ndarray else np.asarray(v) for name, v in inputs.items()
        }
        rows = _leading_dim(arrays)
        size = rows if self._batch_size_fn is None else int(self._batch_size_fn(arrays))
        if size > self.max_batch_size or size < 1:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Task size {size} is larger than maximum input batch size {self.max_batch_size}"
                if size > 0
                else f"Task size {size} must be positive",
            )
        return arrays, rows, size

    def _enqueue(self, loop, arrays, rows, size, deadline_s, context=None) -> _Request:
        key = _batch_key(arrays, self.pad_variable_length_inputs)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _Queue(key)
        batch = queue.pending[-1] if queue.pending else None
        if batch is None or batch.size + size > self._batch_limit:
            if len(queue.pending) >= self.max_enqueued_batches:
                self.metrics.rejected += 1
                raise errors.UnavailableError(
                    None,
                    None,
                    "The batch scheduling queue to which this task was submitted is full",
                )
            batch = _Batch(queue, next(self._seq))
            queue.pending.append(batch)
            if self.batch_timeout > 0:
                batch.timer = loop.call_later(self.batch_timeout, self._batch_timed_out, batch)
            else:
                batch.ready = True
        now = time.perf_counter()  # not loop.time(): uvloop's has 1 ms resolution
        request = _Request(arrays, size, rows, loop.create_future(), now, context)
        request.batch = batch
        batch.requests.append(request)
        batch.size += size
        self.metrics.requests += 1
        if batch.size == self._batch_limit:
            batch.ready = True
        if deadline_s is not None:
            request.deadline = when = loop.time() + max(deadline_s, 0.0)
            if batch.expires is None or when < batch.expires:
                self._arm_expiry(loop, batch, when)
        if batch.ready:
            self._schedule_dispatch()
        return request

    def _batch_timed_out(self, batch: _Batch) -> None:
        batch.timer = None
        if not batch.started:
            batch.ready = True
            self._schedule_dispatch()

    def _arm_expiry(self, loop, batch: _Batch, when: float) -> None:
        if batch.expiry is not None:
            batch.expiry.cancel()
        batch.expires = when
        batch.expiry = loop.call_at(when, self._expire, batch)

    def _disarm_expiry(self, batch: _Batch) -> None:
        if batch.expiry is not None:
            batch.expiry.cancel()
            batch.expiry = batch.expires = None

    def _expire(self, batch: _Batch) -> None:
        """The batch's earliest deadline came: fail every request of it whose deadline
        passed (taken out of the batch if it has not started), re-arm for the next."""
        fired = batch.expires
        batch.expiry = batch.expires = None
        now = max(self._loop.time(), fired)  # (a timer may fire a clock tick early)
        following = None
        for request in list(batch.requests):
            when = request.deadline
            if when is None or request.future.done():
                continue
            if when <= now:
                self._deadline(request)
            elif following is None or when < following:
                following = when
        if following is not None and (batch.requests or batch.started):
            self._arm_expiry(self._loop, batch, following)

    def _deadline(self, request: _Request) -> None:
        self.metrics.deadline_exceeded += 1
        request.future.set_exception(
            errors.DeadlineExceededError(None, None, "Deadline exceeded while batching")
        )
        if request.batch is not None and not request.batch.started:
            self._withdraw(request)

    def _withdraw(self, request: _Request) -> None:
        """Take a request that will not run out of its (not yet started) batch."""
        batch = request.batch
        try:
            batch.requests.remove(request)
        except ValueError:
            return
        batch.size -= request.size
        if not batch.requests:
            if batch.timer is not None:
                batch.timer.cancel()
                batch.timer = None
            self._disarm_expiry(batch)
            try:
                batch.queue.pending.remove(batch)
            except ValueError:
                pass
            self._release_if_idle(batch.queue)

    # -- dispatching
    def _schedule_dispatch(self) -> None:
        if not self._dispatch_scheduled:
            self._dispatch_scheduled = True
            self._loop.call_soon(self._dispatch)

    def _dispatch(self) -> None:
        self._dispatch_scheduled = False
        while self._running < self.max_concurrent_batches:
            batch = self._oldest_ready()
            if batch is None:
                return
            batch.queue.pending.remove(batch)
            self._release_if_idle(batch.queue)
            batch.started = True
            if batch.timer is not None:
                batch.timer.cancel()
                batch.timer = None
            self._running += 1
            task = self._loop.create_task(self._run_batch(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _release_if_idle(self, queue: _Queue) -> None:
        """Forget a per-signature queue with nothing pending (a new request of that
        signature makes a fresh one), so many distinct shapes do not accumulate."""
        if not queue.pending and self._queues.get(queue.key) is queue:
            del self._queues[queue.key]

    def _oldest_ready(self) -> _Batch | None:
        best = None
        for queue in self._queues.values():
            for batch in queue.pending:
                if batch.ready:
                    if best is None or batch.seq < best.seq:
                        best = batch
                    break
        return best

    def _padded_size(self, size: int) -> int:
        if self._allowed is None:
            return size
        i = bisect.bisect_left(self._allowed, size)
        return self._allowed[i] if i < len(self._allowed) else size

    async def _run_batch(self, batch: _Batch) -> None:
        try:
            requests = [r for r in batch.requests if not r.future.done()]
            if not requests:
                return
            now = time.perf_counter()
            for r in requests:
                self.metrics.queue_time.append(now - r.enqueued)
            total = sum(r.rows for r in requests)
            padded = self._padded_size(total)
            self.metrics.batches += 1
            self.metrics.batch_sizes[total] += 1
            self.metrics.padded_batch_sizes[padded] += 1
            merged = _merge(requests, total, padded, self.pad_variable_length_inputs)
            try:
                if self._pass_contexts:
                    outputs = await self._fn(merged, [r.context for r in requests])
                else:
                    outputs = await self._fn(merged)
                pieces = _split(outputs, requests, padded)
            except Exception as exc:
                self.metrics.failed += len(requests)
                for r in requests:
                    if not r.future.done():
                        r.future.set_exception(_copy_error(exc))
                return
            except asyncio.CancelledError:
                for r in requests:
                    if not r.future.done():
                        r.future.set_exception(
                            errors.CancelledError(None, None, "The batch was cancelled.")
                        )
                raise
            for r, piece in zip(requests, pieces):
                if not r.future.done():
                    r.future.set_result(piece)
        finally:
            self._disarm_expiry(batch)  # (every request of it has its answer now)
            # A request and its batch point at each other: a cycle only the collector
            # would free (with the request's inputs and outputs), and collections of
            # that garbage paused the loop under load.  Done, the batch lets go.
            for r in batch.requests:
                r.batch = None
            batch.requests = []
            self._running -= 1
            if not self._closed:
                self._dispatch()

    # -- lifecycle
    async def aclose(self) -> None:
        """Fail queued requests with UnavailableError and wait for running batches."""
        self._closed = True
        for queue in self._queues.values():
            while queue.pending:
                batch = queue.pending.popleft()
                if batch.timer is not None:
                    batch.timer.cancel()
                self._disarm_expiry(batch)
                for r in batch.requests:
                    if not r.future.done():
                        r.future.set_exception(
                            errors.UnavailableError(None, None, "Batcher has been closed.")
                        )
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def active_queues(self) -> int:
        """Per-signature (input names, dtypes, trailing shapes) queues with pending batches."""
        return len(self._queues)

    def queued_requests(self) -> int:
        return sum(len(b.requests) for q in self._queues.values() for b in q.pending)

    @property
    def running_batches(self) -> int:
        return self._running

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop its state lives on (bound by the first `submit`; None before)."""
        return self._loop


def _leading_dim(inputs: Mapping) -> int:
    dims = {a.shape[0] if a.ndim else None for a in inputs.values()}
    if None in dims:
        raise errors.InvalidArgumentError(
            None, None, "Batching input tensors must have at least one dimension"
        )
    if len(dims) != 1:
        raise errors.InvalidArgumentError(
            None, None, "Batching input tensors must have equal 0th-dimension size"
        )
    return dims.pop()


def _batch_key(arrays: Mapping, ranks_only: bool = False) -> tuple:
    if len(arrays) == 1:  # (the common case: no sort)
        ((name, a),) = arrays.items()
        return ((name, a.dtype, a.ndim if ranks_only else a.shape[1:]),)
    if ranks_only:
        return tuple(sorted((name, a.dtype, a.ndim) for name, a in arrays.items()))
    return tuple(sorted((name, a.dtype, a.shape[1:]) for name, a in arrays.items()))


def _pad_to(arr: np.ndarray, dims: tuple) -> np.ndarray:
    """`arr` padded at the end of each dim after the first to `dims`, with its first
    element (zeros when empty)."""
    if arr.shape[1:] == dims:
        return arr
    widths = [(0, 0)] + [(0, d - n) for n, d in zip(arr.shape[1:], dims)]
    if arr.size:
        return np.pad(arr, widths, mode="constant", constant_values=arr.flat[0])
    out = np.zeros((arr.shape[0], *dims), dtype=arr.dtype)
    if arr.dtype == object:
        out[...] = b""
    return out


def _merge(requests, total: int, padded: int, pad_variable_length: bool = False) -> dict:
    names = list(requests[0].inputs)
    merged = {}
    for name in names:
        parts = [r.inputs[name] for r in requests]
        if pad_variable_length:
            dims = tuple(max(sizes) for sizes in zip(*(p.shape[1:] for p in parts)))
            parts = [_pad_to(p, dims) for p in parts]
        if padded > total:
            first = parts[0][:1]
            parts.append(np.repeat(first, padded - total, axis=0))
        merged[name] = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
    return merged


def _split(outputs: Mapping, requests, padded: int) -> list[dict]:
    for name, value in outputs.items():
        shape = np.shape(value)
        if not shape or shape[0] != padded:
            raise errors.FailedPreconditionError(
                None,
                None,
                f"Batched output tensor '{name}' has 0th dimension "
                f"{shape[0] if shape else 'none'}, which does not equal the sum of the 0th "
                f"dimension sizes of the input tensors ({padded})",
            )
    pieces = []
    offset = 0
    for r in requests:
        end = offset + r.rows
        pieces.append({name: value[offset:end] for name, value in outputs.items()})
        offset = end
    return pieces


def _copy_error(exc: Exception) -> Exception:
    """Each caller gets its own exception object (tracebacks are per raise)."""
    try:
        return copy.copy(exc)
    except Exception:
        return exc
