"""Queue resources: FIFO, padding FIFO, random-shuffle and priority queues.

Each queue is a synchronous state machine (no await inside it) with trio-style pairs:
`put_nowait` / `put` and `get_nowait` / `get`.  The async forms suspend on a future
registered as a waiter; every state change calls `_pump`, which admits pending enqueues
while there is room and serves pending dequeues in arrival order.  The queue ops
(ops/queue_ops.py) are thin kernels around these methods.

Exactly-once delivery (issue 6, item 2):
- Elements leave the queue only inside `_pump` or a `get*` fast path, in the same
  synchronous section that completes the dequeue: either the caller receives them at
  once, or the waiter's future receives them together with an `on_take` notification.
- A dequeue whose wait is cancelled withdraws its waiter; any elements it had already
  taken (a dequeue_many filling progressively, as TF's) go back in their original order.
- The kernel's `on_take` registers an undo with its step (`executor.current_step()`):
  if the step then fails, is cancelled or times out, the elements are restored in
  enqueue order (`restore`), so nothing is lost; a later enqueue in the same step that
  consumed them commits them (see ops/queue_ops.py), so nothing is duplicated.
- An enqueue is committed when its last element is inserted; a step that fails after
  that keeps the elements queued (as TF does).

Invariants:
- Waiters are served strictly in arrival order (FIFO fairness for both sides).
- A waiter whose future is done (cancelled) is skipped and dropped by `_pump`; elements
  it held are restored first.
- `restore` may push the size above capacity for a moment: giving an element back is
  never refused.
- Every element carries a sequence number (its enqueue order), so restoring keeps FIFO
  order even when several failed steps give elements back in any order.
"""

from __future__ import annotations

import asyncio
import heapq
import os
import weakref
from collections import deque
from collections.abc import Callable

import numpy as np

from asyncflow import errors, tensor_shape

__all__ = [
    "QueueBase",
    "FIFOQueueResource",
    "PaddingFIFOQueueResource",
    "RandomShuffleQueueResource",
    "PriorityQueueResource",
    "WouldBlock",
    "aiterate",
    "unstarted_runner_timeout",
    "set_unstarted_runner_timeout",
]

Element = tuple  # one queue element: a tuple of per-component arrays


class WouldBlock(Exception):
    """Raised by `*_nowait` methods when the operation would have to wait."""


# -- the "queue runners were never started" watchdog ------------------------------------

_UNSTARTED_TIMEOUT_S = float(os.environ.get("ASYNCFLOW_QUEUE_RUNNER_TIMEOUT", "60"))


def unstarted_runner_timeout() -> float:
    """Seconds a dequeue waits on a queue whose runners were never started (default 60)."""
    return _UNSTARTED_TIMEOUT_S


def set_unstarted_runner_timeout(seconds: float) -> float:
    """Set that bound (env ASYNCFLOW_QUEUE_RUNNER_TIMEOUT); returns the previous value."""
    global _UNSTARTED_TIMEOUT_S
    old, _UNSTARTED_TIMEOUT_S = _UNSTARTED_TIMEOUT_S, float(seconds)
    return old


# Runners started per session: QueueRunner.create_threads records itself here.
_started_runners: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def note_runner_started(session, runner) -> None:
    _started_runners.setdefault(session, weakref.WeakSet()).add(runner)


def unstarted_runners(session, queue_op) -> list:
    """QueueRunners in the graph's QUEUE_RUNNERS collection feeding `queue_op` that were
    never started for `session`; empty when at least one of them was started."""
    graph = queue_op.graph
    mine = []
    for r in graph.get_collection("queue_runners"):
        q = getattr(r, "queue", None)
        if q is queue_op:  # (a runner rebuilt from a meta graph holds the queue's op)
            mine.append(r)
            continue
        ref = getattr(q, "queue_ref", None)
        if ref is not None and getattr(ref, "op", None) is queue_op:
            mine.append(r)
    started = _started_runners.get(session)
    if started is not None and any(r in started for r in mine):
        return []
    return mine


# -- poison elements ----------------------------------------------------------------------

# Step errors that say nothing about the data the step took: its elements go back.
_NOT_THE_DATA = (
    errors.CancelledError,
    errors.DeadlineExceededError,
    errors.AbortedError,
    errors.UnavailableError,
)


def poisoned_by(error, op) -> bool:
    """Whether a step's `error` came from an op computing on what `op` took (the taker
    itself or an op downstream of it): then what it took was consumed, as TF consumes
    it, and is not given back (a poison element fails one step, not every later one).
    Cancellations, deadlines, aborts and failures elsewhere in the step give it back."""
    failed = getattr(error, "op", None)
    if failed is None or op is None or isinstance(error, _NOT_THE_DATA):
        return False
    if not isinstance(error, errors.OpError):
        return False
    target, seen, stack = op.name, set(), [failed]
    while stack:
        o = stack.pop()
        if o.name == target:
            return True
        for dep in [t.op for t in o.inputs]:
            if dep.name not in seen:
                seen.add(dep.name)
                stack.append(dep)
    return False


# -- waiters ----------------------------------------------------------------------------


class _Getter:
    __slots__ = ("n", "allow_small", "fut", "taken", "on_take", "timer")

    def __init__(self, n, allow_small, fut, on_take):
        self.n = n
        self.allow_small = allow_small
        self.fut = fut
        self.taken: list = []  # (seq, element) pairs already removed from the queue
        self.on_take = on_take
        self.timer = None


class _Putter:
    __slots__ = ("elems", "pos", "fut", "on_commit", "atomic")

    def __init__(self, elems, fut, on_commit, atomic=False):
        self.elems = elems
        self.pos = 0  # elements of `elems` already inserted (enqueue_many is progressive)
        self.fut = fut
        self.on_commit = on_commit
        # All at once when there is room for all: an enqueue of elements its own step
        # dequeued (a transfer) then either commits them all or gives them all back.
        self.atomic = atomic


# -- the queues -------------------------------------------------------------------------


class QueueBase:
    """Shared machinery; subclasses define the storage (`_insert`, `_take`, `_restore`)."""

    kind = "Queue"

    def __init__(self, name: str, capacity: int, dtypes, shapes=None):
        self.name = name
        self.capacity = int(capacity)
        self.dtypes = list(dtypes)
        self.shapes = None if shapes is None else [tensor_shape.as_shape(s) for s in shapes]
        # Per-component dims as tuples (None for unknown): the enqueue fast path checks these.
        self.dims = None if self.shapes is None else [tuple(s.as_list()) for s in self.shapes]
        self._closed = False  # dequeues that cannot be served fail
        self._closing = False  # enqueues are refused; closed once pending ones are done
        self._seq = 0
        self._getters: deque[_Getter] = deque()
        self._putters: deque[_Putter] = deque()
        handle = np.empty((), dtype=object)
        handle[()] = self
        self.handle = handle  # what the queue op outputs (a 0-d object "resource" tensor)

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name!r} size={self.size()} closed={self._closed}>"

    # -- storage hooks
    def __len__(self) -> int:
        raise NotImplementedError

    def _insert(self, elems) -> None:
        raise NotImplementedError

    def _take(self, k: int) -> list:
        raise NotImplementedError

    def _restore(self, items: list) -> None:
        raise NotImplementedError

    def _available(self) -> int:
        """Elements a dequeue may take now."""
        return len(self)

    def _room(self) -> int:
        if self.capacity < 0:
            return 1 << 62
        return self.capacity - len(self)

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # -- introspection
    def size(self) -> int:
        return len(self)

    def is_closed(self) -> bool:
        return self._closed

    def num_waiting(self) -> tuple[int, int]:
        """(pending dequeues, pending enqueues), for tests and diagnostics."""
        return (
            sum(1 for g in self._getters if not g.fut.done()),
            sum(1 for p in self._putters if not p.fut.done()),
        )

    def _closed_error(self) -> errors.CancelledError:
        return errors.CancelledError(None, None, f"{self.kind} '{self.name}' is closed.")

    def _insufficient(self, n: int, size: int) -> errors.OutOfRangeError:
        return errors.OutOfRangeError(
            None,
            None,
            f"{self.kind} '{self.name}' is closed and has insufficient elements "
            f"(requested {n}, current size {size})",
        )

    # -- enqueue
    def put_nowait(self, elems: list, on_commit: Callable | None = None) -> None:
        """Insert all of `elems` now, or raise WouldBlock (nothing inserted).

        Raises: errors.CancelledError when the queue is closed.
        """
        if self._closing:
            raise self._closed_error()
        if self._putters or self._room() < len(elems):
            raise WouldBlock
        self._insert(elems)
        if on_commit is not None:
            on_commit()
        if self._getters:
            self._pump()

    async def put(self, elems: list, on_commit: Callable | None = None) -> None:
        """Insert `elems` in order, suspending while the queue is full.

        Elements go in as room appears (TF's progressive enqueue_many); `on_commit()` is
        called in the synchronous section that inserts the last one.  A cancelled wait
        withdraws the rest; those already inserted stay: `on_commit(k)` says, as they go
        in, how many of a transfer too large for the queue are in so far.

        With an `on_commit` (elements this step dequeued elsewhere, whose undo it
        disarms) the elements go in all at once when they fit in the queue's capacity,
        so a cancelled transfer commits all or nothing: nothing is lost or duplicated.
        Raises: errors.CancelledError when the queue is or gets closed with
        cancel_pending_enqueues.
        """
        try:
            self.put_nowait(elems, on_commit)
            return
        except WouldBlock:
            pass
        atomic = on_commit is not None and (self.capacity < 0 or len(elems) <= self.capacity)
        p = _Putter(elems, asyncio.get_running_loop().create_future(), on_commit, atomic)
        self._putters.append(p)
        self._pump()
        try:
            await p.fut  # a done future returns without suspending
        except BaseException:
            if not p.fut.done() or p.fut.cancelled():
                self._remove_putter(p)
            raise

    def _remove_putter(self, p: _Putter) -> None:
        try:
            self._putters.remove(p)
        except ValueError:
            return
        self._pump()  # smaller enqueues behind it may fit now

    # -- dequeue
    def get_nowait(self, n: int = 1) -> list:
        """Remove and return n (seq, element) pairs now, or raise WouldBlock.

        Raises: errors.OutOfRangeError when closed with fewer than n elements.
        """
        if not self._getters and self._available() >= n:
            items = self._take(n)
            if self._putters:
                self._pump()
            return items
        if self._closed and not self._getters:
            raise self._insufficient(n, len(self))
        raise WouldBlock

    async def dequeue_work(self):
        """One element for a reader's work queue (a filename), with no step undo.

        A reader keeps what it dequeued as its current work even if the step fails, so
        giving the element back to the queue as well would read the file twice.
        """
        ((_, element),) = await self.get(1)
        return element

    async def get(
        self,
        n: int = 1,
        allow_small: bool = False,
        on_take: Callable | None = None,
        watchdog: Callable[[], tuple[float, Callable] | None] | None = None,
    ) -> list:
        """Remove n (seq, element) pairs, suspending until they are there.

        allow_small: once closed, return what remains (at least one) instead of failing
        (dequeue_up_to).  `on_take(items)` runs in the synchronous section that removes
        them.  `watchdog()`, called only if the dequeue must suspend, may return
        `(delay, check)`: after `delay` s still waiting, `check()` may return an OpError
        that fails the wait (used for never-started queue runners).
        Raises: errors.OutOfRangeError when closed with too few elements.
        """
        if not self._getters and self._available() >= n:
            items = self._take(n)
            if on_take is not None:
                on_take(items)
            if self._putters:
                self._pump()
            return items
        loop = asyncio.get_running_loop()
        g = _Getter(n, allow_small, loop.create_future(), on_take)
        self._getters.append(g)
        self._pump()
        if not g.fut.done() and watchdog is not None:
            wd = watchdog()
            if wd is not None:
                g.timer = loop.call_later(wd[0], self._watchdog_fired, g, wd[1])
        try:
            return await g.fut
        except asyncio.CancelledError:
            if not g.fut.done() or g.fut.cancelled():
                self._withdraw_getter(g)
            raise
        finally:
            if g.timer is not None:
                g.timer.cancel()

    def _withdraw_getter(self, g: _Getter) -> None:
        try:
            self._getters.remove(g)
        except ValueError:
            pass
        if g.taken:
            taken, g.taken = g.taken, []
            self._restore(taken)
        self._pump()

    def _watchdog_fired(self, g: _Getter, check: Callable) -> None:
        g.timer = None
        if g.fut.done():
            return
        err = check()
        if err is None:
            return
        self._withdraw_getter(g)
        if not g.fut.done():
            g.fut.set_exception(err)

    def restore(self, items: list) -> None:
        """Give back (seq, element) pairs taken by a dequeue whose step failed."""
        if items:
            self._restore(items)
            self._pump()

    # -- close
    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Refuse further enqueues; pending dequeues that cannot be served then fail.

        As in TF, the close takes effect behind enqueues already pending (they may still
        complete), unless cancel_pending_enqueues, which fails them with
        errors.CancelledError.
        Raises: errors.CancelledError when already closed (without
        cancel_pending_enqueues), as TF.
        """
        if self._closing and not cancel_pending_enqueues:
            raise errors.CancelledError(None, None, f"Queue '{self.name}' is already closed.")
        self._closing = True
        if cancel_pending_enqueues:
            putters, self._putters = self._putters, deque()
            for p in putters:
                if not p.fut.done():
                    p.fut.set_exception(self._closed_error())
        self._pump()

    # -- the state machine
    def _complete(self, g: _Getter) -> None:
        items, g.taken = g.taken, []
        g.fut.set_result(items)
        if g.on_take is not None:
            g.on_take(items)

    def _pump(self) -> None:
        """Admit pending enqueues and serve pending dequeues until neither can progress."""
        getters, putters = self._getters, self._putters
        while True:
            progress = False
            while putters:
                p = putters[0]
                if p.fut.done():
                    putters.popleft()
                    continue
                room = self._room()
                if room <= 0 or (p.atomic and room < len(p.elems)):
                    break
                k = min(room, len(p.elems) - p.pos)
                self._insert(p.elems[p.pos : p.pos + k])
                p.pos += k
                progress = True
                if p.pos < len(p.elems):
                    if p.on_commit is not None:
                        p.on_commit(p.pos)  # a partial transfer: those inserted stay
                    break
                putters.popleft()
                p.fut.set_result(None)
                if p.on_commit is not None:
                    p.on_commit()
            if self._closing and not self._closed and not putters:
                self._closed = True
                progress = True
            while getters:
                g = getters[0]
                if g.fut.done():  # cancelled; its kernel has not run its cleanup yet
                    getters.popleft()
                    if g.taken:
                        taken, g.taken = g.taken, []
                        self._restore(taken)
                        progress = True
                    continue
                if self._closed and len(g.taken) + len(self) < g.n:
                    getters.popleft()
                    progress = True
                    if g.allow_small and (g.taken or len(self)):
                        g.taken.extend(self._take(len(self)))
                        self._complete(g)
                    else:
                        size = len(g.taken) + len(self)
                        if g.taken:
                            taken, g.taken = g.taken, []
                            self._restore(taken)
                        g.fut.set_exception(self._insufficient(g.n, size))
                    continue
                k = min(self._available(), g.n - len(g.taken))
                if k > 0:
                    g.taken.extend(self._take(k))
                    progress = True
                if len(g.taken) < g.n:
                    break
                getters.popleft()
                self._complete(g)
            if not progress:
                return

    # -- batching (dequeue_many's output)
    def stack(self, items: list, n_expected: int | None = None) -> list:
        """Stack the components of (seq, element) pairs into batch arrays."""
        out = []
        for k, dt in enumerate(self.dtypes):
            if items:
                np_dt = dt.as_numpy_dtype
                vals = [e[k] for _, e in items]
                if np_dt is not np.object_ and np.ndim(vals[0]) == 0:
                    out.append(np.array(vals, dtype=np_dt))  # scalars: ~5x faster than stack
                else:
                    out.append(np.stack([np.asarray(v) for v in vals]))
            else:
                shape = (0, *self.shapes[k].as_list()) if self.shapes else (0,)
                out.append(np.empty(shape, dtype=dt.as_numpy_dtype))
        return out


class FIFOQueueResource(QueueBase):
    """First in, first out."""

    kind = "FIFOQueue"

    def __init__(self, name, capacity, dtypes, shapes=None):
        super().__init__(name, capacity, dtypes, shapes)
        self._q: deque = deque()

    def __len__(self) -> int:
        return len(self._q)

    def _insert(self, elems) -> None:
        append, seq = self._q.append, self._seq
        for e in elems:
            seq += 1
            append((seq, e))
        self._seq = seq

    def _take(self, k: int) -> list:
        pop = self._q.popleft
        return [pop() for _ in range(k)]

    def _restore(self, items: list) -> None:
        q = self._q
        for item in sorted(items, key=_seq_key, reverse=True):
            # Restored elements are almost always older than everything queued: the scan
            # stops at once.  It keeps enqueue order when several steps give back.
            i, seq, n = 0, item[0], len(q)
            while i < n and q[i][0] < seq:
                i += 1
            q.insert(i, item)


def _seq_key(item) -> int:
    return item[0]


class PaddingFIFOQueueResource(FIFOQueueResource):
    """A FIFO queue whose dequeue_many pads components of unknown dimensions."""

    kind = "PaddingFIFOQueue"

    def stack(self, items: list, n_expected: int | None = None) -> list:
        out = []
        for k, dt in enumerate(self.dtypes):
            parts = [np.asarray(e[k]) for _, e in items]
            declared = self.shapes[k].as_list()
            if not parts:
                shape = [0] + [0 if d is None else d for d in declared]
                out.append(np.empty(shape, dtype=dt.as_numpy_dtype))
                continue
            target = [max(p.shape[i] for p in parts) for i in range(len(declared))]
            np_dt = dt.as_numpy_dtype
            batch = np.zeros([len(parts), *target], dtype=np_dt)
            if np_dt is np.object_:
                batch.fill(b"")
            for i, p in enumerate(parts):
                batch[(i, *(slice(0, s) for s in p.shape))] = p
            out.append(batch)
        return out


class RandomShuffleQueueResource(QueueBase):
    """Dequeues a uniformly random element; keeps min_after_dequeue until closed."""

    kind = "RandomShuffleQueue"

    def __init__(self, name, capacity, dtypes, shapes=None, min_after_dequeue=0, draws=None):
        if 0 <= int(capacity) <= int(min_after_dequeue):  # TF checks when the kernel is made
            raise errors.InvalidArgumentError(
                None, None, f"min_after_dequeue {min_after_dequeue} must be < capacity {capacity}"
            )
        super().__init__(name, capacity, dtypes, shapes)
        self.min_after_dequeue = int(min_after_dequeue)
        self._items: list = []
        # `draws.take(k)`: k uint32 draws; an element's index is a draw modulo the size,
        # as TF's queue takes them.  The op passes TF's generator, Philox(seed, seed2)
        # one draw at a time (ops/queue_ops.py), so a seeded queue dequeues in TF's order.
        self._draws = draws if draws is not None else _Draws()

    def __len__(self) -> int:
        return len(self._items)

    def _available(self) -> int:
        if self._closed:
            return len(self._items)
        return max(0, len(self._items) - self.min_after_dequeue)

    def _insert(self, elems) -> None:
        for e in elems:
            self._items.append((self._next_seq(), e))

    def _take(self, k: int) -> list:
        items, out = self._items, []
        for draw in self._draws.take(k) if k else ():
            i = draw % len(items)
            items[i], items[-1] = items[-1], items[i]
            out.append(items.pop())
        return out

    def _restore(self, items: list) -> None:
        self._items.extend(items)


class _Draws:
    """Unseeded uint32 draws (a queue made without the op's generator)."""

    def __init__(self):
        self._rng = np.random.default_rng()

    def take(self, k: int) -> list[int]:
        return self._rng.integers(0, 1 << 32, k, dtype=np.uint64).tolist()


class PriorityQueueResource(QueueBase):
    """Dequeues the element with the smallest priority (component 0, an int64) first."""

    kind = "PriorityQueue"

    def __init__(self, name, capacity, dtypes, shapes=None):
        super().__init__(name, capacity, dtypes, shapes)
        self._heap: list = []

    def __len__(self) -> int:
        return len(self._heap)

    def _insert(self, elems) -> None:
        for e in elems:
            seq = self._next_seq()
            heapq.heappush(self._heap, (int(e[0]), seq, (seq, e)))

    def _take(self, k: int) -> list:
        pop, heap = heapq.heappop, self._heap
        return [pop(heap)[2] for _ in range(k)]

    def _restore(self, items: list) -> None:
        for seq, e in items:
            heapq.heappush(self._heap, (int(e[0]), seq, (seq, e)))


# -- async consumption (issue 6, item 7) --------------------------------------------------


async def aiterate(session, fetches, feed_dict=None, options=None):
    """Run `fetches` repeatedly, yielding each result, until OutOfRangeError.

    `async for batch in aiterate(sess, q.dequeue_many(32)): ...` ends cleanly when the
    queue is closed and drained.  Other errors propagate.
    """
    while True:
        try:
            value = await session.arun(fetches, feed_dict, options=options)
        except errors.OutOfRangeError:
            return
        yield value
