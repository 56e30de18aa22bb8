"""The element streams behind tf.data's dataset ops: asynchronous, on the session's loop.

A dataset op's kernel (ops/dataset_ops.py) returns a `DatasetValue`: an immutable
description of a pipeline stage with its inputs' values bound.  Iterating one
(`value.iterate(env)`) gives an async iterator of elements, each a tuple of NumPy arrays
(one per flat component).  Nothing runs until an IteratorGetNext asks for an element.

Where TF's runtime uses threads, this uses the loop:
- `prefetch` and `map(num_parallel_calls=n)` run as Tasks on the session's loop: a
  producer Task fills a bounded buffer ahead of the consumer; a parallel map keeps up
  to n function calls in flight and hands results out in input order.  They are
  parked Tasks (kernel_api.parked_task): between two synchronous `Session.run`s they
  wait where they are and run while a step waits on them, so a synchronous training
  loop keeps driving its steps inline on its own thread (no hand-off per step);
- a traced function (map, filter, flat_map, interleave) runs as a nested step of the
  session (`await session.arun(...)`), so its kernels suspend like any other step's;
- files are read on worker threads, many records per hop, so the loop never waits on
  the disk; Python generators (`from_generator`) run on a worker thread as well.

Invariants:
- Every element a stream yields owns its arrays (fresh copies or new results), so a
  consumer that writes into an input it alone holds never corrupts a source tensor or
  a cached element.
- A stream that owns Tasks (prefetch, parallel map) cancels them when it is closed or
  collected; a producer's error is delivered to the consumer in order, after the
  elements produced before it.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
import weakref
from collections.abc import AsyncIterator, Callable

import numpy as np

from asyncflow import errors, python_io
from asyncflow.crc32c import crc32c_gil_free
from asyncflow.kernel_api import parked_task, with_pass_random
from asyncflow.ops import dataset_paths, philox_random

__all__ = ["DatasetValue", "Effects", "Env", "Function"]

_CRC_GIL_FREE = crc32c_gil_free()  # None with the pure-Python CRC


# Set by asyncflow.data (which may import the client layer): `factory(session, feeds,
# fetches)` -> an async `call(feed_values, random_states) -> outputs` that skips arun's
# per-call feed and fetch processing (its random ops drawing from `random_states`:
# kernel_api.with_pass_random), or None to use `session.arun`.
FUNCTION_CALLER = None
# Set by asyncflow.data: `hook(ctx, prefetch)` -> the DatasetValue a PrefetchDataset
# kernel returns (`prefetch` itself, or its form on an input worker process).
PREFETCH_HOOK = None


class Env:
    """What a stream needs from the session that runs it: one per pass (an iterator's
    initialization, a run of `reduce`), so `random_states` holds the states of the
    random ops its functions draw from (kernel_api.random_state) for that pass."""

    __slots__ = (
        "session",
        "_callers",
        "random_states",
        "map_and_batch_fusion",
        "root",
        "root_head",
        "root_rewrites",
        "opened",
    )

    def __init__(self, session):
        self.session = session
        self._callers: dict = {}
        self.random_states: dict = {}
        # TF's default tf.data optimization map_and_batch_fusion for this pass: None
        # (on) until the outermost options dataset of the pipeline says (WithOptions).
        self.map_and_batch_fusion: bool | None = None
        # For the words of a function's error only (in_function: TF's iterator path):
        # the pass's root stage and how TF names its path (`name_from`), and what its
        # stages have open: a repeat its epoch, a flat_map or interleave {slot: (index,
        # dataset)} (weak: an inner dataset's own stages come and go)
        self.root: DatasetValue | None = None
        self.root_head, self.root_rewrites = "Iterator::Root", "top"
        self.opened: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def name_from(self, root, head: str = "Iterator::Root", rewrites: str = "top") -> None:
        """Name a function's error's path from `root`, this pass's, under `head` (TF's
        iterator's words above it): `rewrites` "top" where TF's rewrites apply and
        `root` is the pipeline's top (inject_prefetch's place), "beneath" where they
        apply but the top is above (an input worker's part), "none" where TF runs the
        pipeline unoptimized (a single element's)."""
        self.root, self.root_head, self.root_rewrites = root, head, rewrites

    def open_inner(self, stage, slot: int, index: int, inner) -> None:
        """Note that `stage` (a flat_map, an interleave) iterates `inner`, the dataset
        its function made of input element `index`, in cycle `slot` (in_function)."""
        at = self.opened.get(stage)
        if at is None:
            at = self.opened[stage] = {}
        at[slot] = (index, inner)

    def caller(self, fn: Function):
        """The fast call for `fn` in this session (None: use arun)."""
        key = id(fn.key)
        hit = self._callers.get(key)
        if hit is None:
            call = None
            if FUNCTION_CALLER is not None:
                call = FUNCTION_CALLER(self.session, fn.captures + fn.inputs, fn.outputs)
            hit = self._callers[key] = (fn.key, call)
        return hit[1]


def _own(arrays) -> tuple:
    return tuple(np.array(a, copy=True) for a in arrays)


async def _in_thread(fn, *args):
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


class DatasetValue:
    """A pipeline stage with its input values bound; `iterate` starts one pass.

    `chunks` is the same pass in lists of elements (any lengths, in order), for stages
    that move many elements per step (shuffle, batch): one async step per list
    instead of per element.  A stage whose `bare_bytes` is true may put a bare `bytes`
    in those lists for the element `(np.array(b, dtype=object),)`: records stay as
    they were read until a batch (one object array) or a function needs them."""

    bare_bytes = False

    def iterate(self, env: Env) -> AsyncIterator[tuple]:
        raise NotImplementedError

    def cardinality(self) -> int:
        """Elements in one pass: a count, -1 (infinite) or -2 (unknown), as TF's
        DatasetCardinality; a stage whose count depends on its data says -2."""
        return -2

    async def chunks(self, env: Env) -> AsyncIterator[list]:
        source = self.iterate(env)
        try:
            async for elem in source:
                yield [elem]
        finally:
            await source.aclose()


def _dressed(chunks: AsyncIterator[list], bare: bool) -> AsyncIterator[tuple]:
    """The elements of `chunks` one by one, bare records as one-component tuples."""

    async def gen():
        try:
            async for chunk in chunks:
                if bare:
                    for rec in chunk:
                        yield (np.array(rec, dtype=object),)
                else:
                    for elem in chunk:
                        yield elem
        finally:
            await chunks.aclose()

    return gen()


# -- sources ------------------------------------------------------------------------------


class TensorSlices(DatasetValue):
    def __init__(self, components):
        self.components = [np.asarray(c) for c in components]
        n = {c.shape[0] if c.ndim else None for c in self.components}
        if None in n:
            raise errors.InvalidArgumentError(None, None, "Input tensor must be at least 1-D")
        if len(n) > 1:
            raise errors.InvalidArgumentError(
                None, None, "All components must have the same size in the 0th dimension"
            )
        self.n = n.pop()

    def cardinality(self):
        return self.n

    async def iterate(self, env):
        for i in range(self.n):
            # (dtype given: a string slice of an object array stays an object array)
            yield tuple(np.array(c[i], dtype=c.dtype, copy=True) for c in self.components)


class Tensors(DatasetValue):
    def __init__(self, components):
        self.components = [np.asarray(c) for c in components]

    def cardinality(self):
        return 1

    async def iterate(self, env):
        yield _own(self.components)


class Range(DatasetValue):
    def __init__(self, start, stop, step, dtype):
        if step == 0:
            raise errors.InvalidArgumentError(None, None, "step must be a non-zero integer.")
        self.r = range(int(start), int(stop), int(step))
        self.dtype = dtype

    def cardinality(self):
        return len(self.r)

    async def iterate(self, env):
        for v in self.r:
            yield (np.array(v, self.dtype),)


class Generator(DatasetValue):
    """`from_generator`: the Python generator runs on a worker thread."""

    def __init__(self, factory: Callable, dtypes, flatten: Callable, shapes=None):
        self.factory = factory
        self.dtypes = dtypes
        self.flatten = flatten
        # each component's known dims (None where unknown; None for an unknown rank)
        self.shapes = shapes or [None] * len(dtypes)

    async def iterate(self, env):
        it = iter(await _in_thread(self.factory))
        done = object()
        while True:
            item = await _in_thread(next, it, done)
            if item is done:
                return
            flat = self.flatten(item)
            out = []
            for v, dt, shape in zip(flat, self.dtypes, self.shapes):
                a = np.asarray(v)
                if shape is not None and (
                    a.ndim != len(shape) or any(d not in (None, n) for d, n in zip(shape, a.shape))
                ):
                    want = "(" + ", ".join("None" if d is None else str(d) for d in shape)
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"TypeError: `generator` yielded an element of shape {a.shape} where "
                        f"an element of shape {want}{',' if len(shape) == 1 else ''}) was "
                        "expected.",
                    )
                if dt == np.dtype(object):
                    a = np.asarray(v, dtype=object)
                elif a.dtype != dt:
                    if not np.can_cast(a.dtype, dt, casting="same_kind") and a.size:
                        raise errors.InvalidArgumentError(
                            None,
                            None,
                            f"TypeError: `generator` yielded an element of type "
                            f"{a.dtype} where an element of type {dt} was expected.",
                        )
                    a = a.astype(dt)
                out.append(np.array(a, copy=True))
            yield tuple(out)


def _read_paths(filenames) -> list[str]:
    return [os.fsdecode(f if isinstance(f, bytes) else str(f)) for f in np.ravel(filenames)]


class TFRecords(DatasetValue):
    bare_bytes = True

    def __init__(self, filenames, compression):
        self.paths = _read_paths(filenames)
        self.compression = python_io.TFRecordOptions.get_compression_type_string(
            python_io.TFRecordOptions(compression or None)
        )

    def iterate(self, env):
        return _dressed(self.chunks(env), True)

    def _offset(self, k: int) -> int:
        return 0  # (TFRecordDatasetV2 reads each file from a byte offset)

    async def chunks(self, env):
        for k, path in enumerate(self.paths):
            reader = await _in_thread(_RecordChunks, path, self.compression)
            try:
                if self._offset(k):
                    # An uncompressed file's source reads from `pos` (pread, no seek): the
                    # records start at the offset, the bytes before are never read.
                    reader.source.pos = self._offset(k)
                while True:
                    records, error, end = await _in_thread(reader.next)
                    if records:
                        yield records
                    if error is not None:
                        raise error
                    if end:
                        break
            finally:
                reader.close()


class _RecordChunks:
    """A TFRecord file's records, a chunk of the file at a time (on a worker thread).

    Each chunk comes with its CRC-32C when the C backend can take it without the GIL,
    so the scanner accepts runs of equal-length records without a CRC per record
    (python_io.RecordScanner's class note)."""

    _CHUNK = 256 << 10

    def __init__(self, path: str, compression: str):
        self.source = python_io.open_source(path, compression)
        self.scanner = python_io.RecordScanner(self.source.path)

    def next(self):
        """(records, error after them or None, whether the file is done)."""
        scanner, values = self.scanner, []
        try:
            data = self.source.read(max(self._CHUNK, scanner.need()))
            if not data:
                scanner.check_end()
            else:
                crc = None
                if _CRC_GIL_FREE is not None and scanner.wants_crc():
                    crc = _CRC_GIL_FREE(data)
                scanner.feed(data, None, crc)
            scanner.take(1 << 30, values)
        except errors.OpError as e:  # DataLossError: the good records first
            return values, e, True
        return values, None, not data

    def close(self):
        self.source.close()


def _read_whole(path: str, compression: str) -> bytes:
    try:
        src = python_io.open_source(path, compression)
    except OSError as e:
        raise python_io.os_error(path, e) from None
    parts = []
    try:
        while True:
            b = src.read(python_io.CHUNK_BYTES)
            if not b:
                break
            parts.append(b)
    finally:
        src.close()
    return b"".join(parts)


class TextLines(DatasetValue):
    def __init__(self, filenames, compression):
        self.paths = _read_paths(filenames)
        self.compression = compression

    async def iterate(self, env):
        for path in self.paths:
            data = await _in_thread(_read_whole, path, self.compression)
            lines = data.split(b"\n")
            if lines and lines[-1] == b"":
                lines.pop()
            for line in lines:
                if line.endswith(b"\r"):
                    line = line[:-1]
                yield (np.array(line, dtype=object),)


class FixedLengthRecords(DatasetValue):
    def __init__(self, filenames, header, record, footer, compression):
        if record <= 0:
            raise errors.InvalidArgumentError(None, None, "record_bytes must be > 0")
        self.paths = _read_paths(filenames)
        self.header, self.record, self.footer = int(header), int(record), int(footer)
        self.compression = compression

    async def iterate(self, env):
        for path in self.paths:
            data = await _in_thread(_read_whole, path, self.compression)
            body = data[self.header : len(data) - self.footer if self.footer else None]
            partial = None
            if len(body) % self.record:
                partial = (
                    f"Excluding the header ({self.header} bytes) and footer ({self.footer} "
                    f'bytes), input file "{path}" has body length {len(body)} bytes, which '
                    f"is not an exact multiple of the record length ({self.record} bytes)."
                )
                # TF checks a plain file's size before its first record; a compressed
                # file's records come first and its end is a DataLossError
                if not self.compression:
                    raise errors.InvalidArgumentError(None, None, partial)
            for i in range(len(body) // self.record):
                yield (np.array(body[i * self.record : (i + 1) * self.record], dtype=object),)
            if partial is not None:
                raise errors.DataLossError(None, None, partial)


# -- functions -----------------------------------------------------------------------------


class Function:
    """A traced function: run as a nested step feeding its argument placeholders."""

    def __init__(self, key, inputs, outputs, captures, capture_values):
        self.key = key  # one object per (session, op): the fast caller's cache key
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.captures = list(captures)
        self.capture_values = list(capture_values)
        # "<op type>:<n>" of the dataset op passing it (ops/dataset_ops.py): its errors
        # are worded as TF's (`in_function`); None: raised as they are
        self.label: str | None = None
        # Of maps Dataset.map fused into this one call, the op names of each earlier
        # map's part (ops/dataset_ops.py's `_map_function`)
        self.earlier: tuple[frozenset, ...] = ()
        # Of those maps and its own part, the tensors each reads (None: not known)
        self.reads: tuple | None = None

    def in_earlier(self, exc: BaseException) -> bool:
        """Whether `exc` failed an op of an earlier map fused into this call."""
        op = getattr(exc, "op", None)
        name = getattr(op, "name", None)
        return name is not None and any(name in part for part in self.earlier)

    def __call__(self, env: Env, elem: tuple):
        """An awaitable of the function's outputs for `elem`, drawing from the pass's
        random states (`env.random_states`).  (A plain function: the fast call pays no
        coroutine frame of its own here.)"""
        call = env.caller(self)
        if call is not None:
            return call([*self.capture_values, *elem], env.random_states)
        return self._run(env, elem)

    async def _run(self, env: Env, elem: tuple) -> tuple:
        feeds = dict(zip(self.captures, self.capture_values))
        feeds.update(zip(self.inputs, elem))
        out = await with_pass_random(env.session.arun(self.outputs, feeds), env.random_states)
        return tuple(out)


class Effects(Function):
    """A traced function with no results, run for its effects: its outputs are ops (the
    NoOp of its control outputs), and each call's result is ()."""

    def __call__(self, env: Env, elem: tuple):
        return _no_results(super().__call__(env, elem))


async def _no_results(run) -> tuple:
    await run
    return ()


# -- transformations -----------------------------------------------------------------------


class Failed:
    """In a tolerant pass (`iterate_tolerant`), an element whose function failed;
    `stage`: the map whose own function's error `error` words (in_function, the
    error its cause), else None (an error of an earlier map fused into its call
    included: TF's maps are apart, so the error is that map's)."""

    __slots__ = ("error", "stage")

    def __init__(self, error: BaseException, stage: DatasetValue | None = None):
        self.error = error
        self.stage = stage


def in_function(
    fn: Function, stage: str, exc: BaseException, env: Env, value: DatasetValue
) -> BaseException:
    """`exc`, raised by a call of `fn` in a pass of `value` (a `stage`: "Map",
    "Filter", ...) as TF's iterator raises it: of its class, "Error in user-defined
    function passed to <op type>:<n> transformation with iterator: <path>: <its
    message>", `exc` its cause; `exc` itself where `fn` has no label or `exc` is not
    an element's error.  The path names the stages from the iterator's root down to
    `value` as TF's rewrites leave them (ops/dataset_paths.py), or where it cannot
    (no iterator started the pass, a stage it does not know) the stage alone:
    "Iterator::Root::<stage>"."""
    if fn.label is None or not _element_error(exc):
        return exc
    path = dataset_paths.iterator_path(env, value, fn, exc) or f"Iterator::Root::{stage}"
    worded = type(exc)(
        exc.node_def,
        exc.op,
        f"Error in user-defined function passed to {fn.label} transformation with "
        f"iterator: {path}: {exc.message}",
    )
    worded.__cause__ = exc
    return worded


def _raise_in_function(fn: Function, stage: str, exc: BaseException, env, value):
    worded = in_function(fn, stage, exc, env, value)
    if worded is exc:
        raise exc
    raise worded from exc


def tolerant_pass(value: DatasetValue, env: Env):
    """`value`'s tolerant pass (`iterate_tolerant`: a failed element is a `Failed` and the
    pass goes on, as TF's iterators go on after an element's error) where it has one,
    else None."""
    tolerant = getattr(value, "iterate_tolerant", None)
    return tolerant(env) if tolerant is not None else None


def _pass_of(value: DatasetValue, env: Env):
    """`value`'s tolerant pass where it has one, else its plain pass."""
    stream = tolerant_pass(value, env)
    return stream if stream is not None else value.iterate(env)


class _PassesFailed:
    """A transformation that hands its input's `Failed` elements on (TF's: an input's
    error is that call's error, and the next call goes on).  It has a tolerant pass
    (`iterate_tolerant`, its `_tolerant`) only where an input has one, or where the
    datasets its function makes may fail (`inner_fails`), so a pipeline with no map or
    filter beneath keeps its plain (faster) pass."""

    # Set where the datasets a stage's function makes may hold a failed element
    # (flat_map, interleave, group_by_window: dataset_ops' `_datasets_may_fail`).
    inner_fails = False

    def _inputs(self) -> tuple:
        return (self.input,)

    @property
    def iterate_tolerant(self):
        if self.inner_fails:
            return self._tolerant
        for v in self._inputs():
            if getattr(v, "iterate_tolerant", None) is not None:
                return self._tolerant
        return None


def _element_error(exc: BaseException) -> bool:
    """Whether `exc` is an element's own failure (an OpError other than the end)."""
    return isinstance(exc, errors.OpError) and not isinstance(exc, errors.OutOfRangeError)


class _MapEnded(Exception):
    """A map's call raised OutOfRangeError: the end of that map's pass (Map)."""


class Map(DatasetValue):
    """`fn` of each element, up to `parallel` calls at once.  A call raising
    OutOfRangeError ends the pass (TF's map with preserve_cardinality false: a batch
    above still gives its partial batch), or with `preserve_cardinality` is that
    element's InvalidArgumentError (TF's "Function invocation produced ...")."""

    def __init__(
        self, input_value, fn: Function, parallel: int = 1, preserve_cardinality: bool = False
    ):
        self.input, self.fn, self.parallel = input_value, fn, max(int(parallel), 1)
        self.preserve_cardinality = preserve_cardinality

    def iterate(self, env):
        return self._pass(env, False)

    def iterate_tolerant(self, env):
        """The pass with each failed call as a `Failed` element (ignore_errors, an
        iterator), the input's own `Failed` elements handed on without a call."""
        return self._pass(env, True)

    async def _call(self, env, elem, tolerant: bool):
        try:
            return await self.fn(env, elem)
        except Exception as e:
            if isinstance(e, errors.OutOfRangeError):
                if not self.preserve_cardinality:
                    raise _MapEnded from e
                e = errors.InvalidArgumentError(
                    e.node_def, e.op, f"Function invocation produced OutOfRangeError: {e.message}"
                )
            stage = "Map" if self.parallel == 1 else "ParallelMapV2"
            if tolerant and _element_error(e):
                worded = in_function(self.fn, stage, e, env, self)
                own = worded is not e and not self.fn.in_earlier(e)
                return Failed(worded, self if own else None)
            _raise_in_function(self.fn, stage, e, env, self)

    async def _call_tolerant(self, env, elem, tolerant: bool):
        if type(elem) is Failed:
            return elem
        return await self._call(env, elem, True)

    async def _pass(self, env, tolerant: bool):
        # (a call's _MapEnded ends the pass: caught where it is awaited, no frame added)
        if self.parallel == 1:
            source = _pass_of(self.input, env) if tolerant else self.input.iterate(env)
            try:
                async for elem in source:
                    if type(elem) is Failed:
                        yield elem
                        continue
                    try:
                        out = await self._call(env, elem, tolerant)
                    except _MapEnded:
                        return
                    yield out
            finally:
                await source.aclose()
            return
        # Up to `parallel` calls in flight, results in input order.
        pending: collections.deque[asyncio.Task] = collections.deque()
        source = _pass_of(self.input, env) if tolerant else self.input.iterate(env)
        call = self._call_tolerant if tolerant else self._call
        try:
            exhausted = False
            while True:
                while not exhausted and len(pending) < self.parallel:
                    try:
                        elem = await source.__anext__()
                    except StopAsyncIteration:
                        exhausted = True
                        break
                    pending.append(parked_task(call(env, elem, tolerant)))
                if not pending:
                    return
                try:
                    out = await pending.popleft()
                except _MapEnded:
                    return
                yield out
        finally:
            for t in pending:
                t.cancel()
            await source.aclose()


class Filter(DatasetValue):
    def __init__(self, input_value, predicate: Function):
        self.input, self.predicate = input_value, predicate

    def iterate(self, env):
        return self._pass(env, False)

    def iterate_tolerant(self, env):
        """The pass with each failed predicate call as a `Failed` element, the input's
        own `Failed` elements handed on without a call."""
        return self._pass(env, True)

    async def _pass(self, env, tolerant: bool):
        if tolerant:
            async for elem in _pass_of(self.input, env):
                if type(elem) is Failed:
                    yield elem
                elif (kept := await self._keep(env, elem)) is not None:
                    yield kept
            return
        async for elem in self.input.iterate(env):
            try:
                (keep,) = await self.predicate(env, elem)
            except Exception as e:
                _raise_in_function(self.predicate, "Filter", e, env, self)
            if np.asarray(keep).shape != ():
                raise errors.InvalidArgumentError(
                    None, None, "Filter predicate `predicate` must return a scalar bool."
                )
            if keep:
                yield elem

    async def _keep(self, env, elem):
        """`elem` where the predicate keeps it, its `Failed` where the call fails, else
        None."""
        try:
            (keep,) = await self.predicate(env, elem)
        except Exception as e:
            if _element_error(e):
                return Failed(in_function(self.predicate, "Filter", e, env, self))
            raise
        if np.asarray(keep).shape != ():
            raise errors.InvalidArgumentError(
                None, None, "Filter predicate `predicate` must return a scalar bool."
            )
        return elem if keep else None


def _dataset_of(value) -> DatasetValue:
    v = value[()] if isinstance(value, np.ndarray) and value.shape == () else value
    if not isinstance(v, DatasetValue):
        raise errors.InvalidArgumentError(None, None, f"Expected a dataset, got {v!r}")
    return v


class FlatMap(_PassesFailed, DatasetValue):
    def __init__(self, input_value, fn: Function, inner_fails: bool = False):
        self.input, self.fn, self.inner_fails = input_value, fn, inner_fails

    async def iterate(self, env):
        k = 0
        async for elem in self.input.iterate(env):
            try:
                (inner,) = await self.fn(env, elem)
            except Exception as e:
                _raise_in_function(self.fn, "FlatMap", e, env, self)
            env.open_inner(self, 0, k, inner := _dataset_of(inner))
            k += 1
            async for x in inner.iterate(env):
                yield x

    async def _tolerant(self, env):
        k = 0
        async for elem in _pass_of(self.input, env):
            if type(elem) is Failed:
                yield elem
                continue
            try:
                (inner,) = await self.fn(env, elem)
            except Exception as e:
                _raise_in_function(self.fn, "FlatMap", e, env, self)
            env.open_inner(self, 0, k, inner := _dataset_of(inner))
            k += 1
            async for x in _pass_of(inner, env):
                yield x


async def _only(elem):
    yield elem


class Interleave(_PassesFailed, DatasetValue):
    """TF's deterministic interleave: `cycle_length` inner streams, `block_length`
    elements from each in turn; an exhausted one is replaced by the next input's.

    `parallel` (TF's ParallelInterleaveDataset, tf.data.experimental's too) changes
    only where an element fails (the tolerant pass): an input's error is the element of
    the slot it would have opened, its one result, given at that slot's turn, and an
    inner stream's error counts in its block.  The plain InterleaveDataset gives an
    input's error as the slot's turn comes to open it, and an inner error leaves the
    turn where it is."""

    def __init__(
        self, input_value, fn, cycle_length, block_length, parallel=False, inner_fails=False
    ):
        self.input, self.fn, self.parallel = input_value, fn, parallel
        self.inner_fails = inner_fails
        self.cycle, self.block = max(int(cycle_length), 1), max(int(block_length), 1)

    def iterate(self, env):
        return self._pass(env, False)

    def _tolerant(self, env):
        return self._pass(env, True) if self.parallel else self._in_turn(env)

    async def _pass(self, env, tolerant: bool):
        """The plain pass, and the parallel interleave's tolerant one (TF's: each slot
        is refilled as it is found exhausted, and that slot's turn passes)."""
        source = _pass_of(self.input, env) if tolerant else self.input.iterate(env)
        slots: list = []
        exhausted, k = False, itertools.count()

        async def open_next(slot: int):
            """The next input element's stream for cycle `slot`, None at the end
            (tolerant: a `Failed` input is a stream of that one element)."""
            nonlocal exhausted
            try:
                elem = await source.__anext__()
            except StopAsyncIteration:
                exhausted = True
                return None
            index = next(k)
            if tolerant and type(elem) is Failed:
                return _only(elem)
            try:
                (inner,) = await self.fn(env, elem)
            except Exception as e:
                _raise_in_function(self.fn, "Interleave", e, env, self)
            inner = _dataset_of(inner)  # (TF's words index a parallel one by element)
            env.open_inner(self, slot, index if self.parallel else slot, inner)
            return _pass_of(inner, env) if tolerant else inner.iterate(env)

        try:
            while len(slots) < self.cycle and not exhausted:
                s = await open_next(len(slots))
                if s is not None:
                    slots.append(s)
            i = 0
            while slots:
                i %= len(slots)
                s, n = slots[i], 0
                while n < self.block:
                    try:
                        x = await s.__anext__()
                    except StopAsyncIteration:
                        s = None
                        break
                    n += 1
                    yield x
                if s is None:
                    new = None if exhausted else await open_next(i)
                    if new is None:
                        slots.pop(i)
                        continue
                    slots[i] = new
                i += 1  # an exhausted slot ends its turn, as in TF
        finally:
            for s in slots:
                await s.aclose()
            await source.aclose()

    async def _in_turn(self, env):
        """The plain InterleaveDataset's tolerant pass: as TF's, a slot opens its next
        input element when its turn comes; an error (the input's, its function's, or an
        inner stream's) is that call's and the turn stays where it is."""
        source = _pass_of(self.input, env)
        slots: list = [None] * self.cycle
        live, exhausted, i, n = 0, False, 0, 0
        try:
            while True:
                s = slots[i]
                if s is None:
                    if exhausted:
                        if not live:
                            return
                        i, n = (i + 1) % self.cycle, 0
                        continue
                    try:
                        elem = await source.__anext__()
                    except StopAsyncIteration:
                        exhausted = True
                        continue
                    if type(elem) is Failed:
                        yield elem
                        continue
                    try:
                        (inner,) = await self.fn(env, elem)
                    except Exception as e:
                        if not _element_error(e):
                            _raise_in_function(self.fn, "Interleave", e, env, self)
                        # (TF's: that input is spent, the slot opens the next at its turn)
                        yield Failed(in_function(self.fn, "Interleave", e, env, self))
                        continue
                    env.open_inner(self, i, i, inner := _dataset_of(inner))
                    s = slots[i] = _pass_of(inner, env)
                    live, n = live + 1, 0
                try:
                    x = await s.__anext__()
                except StopAsyncIteration:
                    slots[i], live = None, live - 1
                    i, n = (i + 1) % self.cycle, 0
                    continue
                yield x
                if type(x) is not Failed:
                    n += 1
                    if n == self.block:
                        i, n = (i + 1) % self.cycle, 0
        finally:
            for s in slots:
                if s is not None:
                    await s.aclose()
            await source.aclose()


class SparseValue:
    """A SparseTensor component of an element (its handle: a 0-d object array holding
    this), as TF carries one in a variant: indices [n, rank], values [n], dense_shape."""

    __slots__ = ("indices", "values", "dense_shape")

    def __init__(self, indices, values, dense_shape):
        self.indices = np.asarray(indices, np.int64).reshape(-1, np.size(dense_shape))
        self.values = np.asarray(values)
        self.dense_shape = np.asarray(dense_shape, np.int64).reshape(-1)


def _sparse_of(part) -> SparseValue | None:
    if isinstance(part, np.ndarray) and part.dtype == object and part.shape == ():
        v = part[()]
        return v if isinstance(v, SparseValue) else None
    return None


def _handle_of(value) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = value
    return out


def _batch_sparse(parts: list, k: int) -> np.ndarray:
    """TF's batch of SparseTensors: one of rank + 1, each dimension the largest."""
    sp = [_sparse_of(p) for p in parts]
    ranks = {v.dense_shape.size if v is not None else -1 for v in sp}
    if -1 in ranks or len(ranks) != 1:
        raise errors.InvalidArgumentError(
            None, None, f"Cannot batch sparse tensors of different ranks in component {k}."
        )
    shape = np.max(np.stack([v.dense_shape for v in sp]), axis=0)
    indices = np.concatenate(
        [
            np.column_stack([np.full(len(v.indices), i, np.int64), v.indices])
            for i, v in enumerate(sp)
        ]
    )
    values = np.concatenate([v.values for v in sp])
    return _handle_of(SparseValue(indices, values, np.concatenate([[len(sp)], shape])))


def _unbatch_sparse(v: SparseValue) -> list:
    n = int(v.dense_shape[0]) if v.dense_shape.size else 0
    rows = v.indices[:, 0] if v.indices.size else np.zeros(0, np.int64)
    return [
        _handle_of(SparseValue(v.indices[rows == i, 1:], v.values[rows == i], v.dense_shape[1:]))
        for i in range(n)
    ]


def _batch(elems: list[tuple], fused: bool = False) -> tuple:
    """`elems` stacked component by component.  `fused`: as TF's fused MapAndBatch,
    which copies each element into a batch shaped by the first one (an element of as
    many values but another shape is taken reshaped)."""
    out = []
    for k in range(len(elems[0])):
        parts = [e[k] for e in elems]
        if _sparse_of(parts[0]) is not None:
            out.append(_batch_sparse(parts, k))
            continue
        first = np.shape(parts[0])
        for j, p in enumerate(parts):
            if np.shape(p) != first:
                if fused:
                    parts = _fused_parts(parts, first)
                    break
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Cannot batch tensors with different shapes in component {k}. First "
                    f"element had shape {_dims(first)} and element {j} had shape "
                    f"{_dims(np.shape(p))}.",
                )
        out.append(np.stack(parts))
    return tuple(out)


def _fused_parts(parts: list, first: tuple) -> list:
    size = int(np.prod(first))
    out = []
    for p in parts:
        if np.size(p) != size:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Cannot add tensor to the batch: number of elements does not match. "
                f"Shapes are: [tensor]: {_dims(np.shape(p))}, [batch]: {_dims(first)}",
            )
        out.append(np.reshape(p, first))
    return out


def _dims(shape) -> str:
    """A shape as TF's TensorShape::DebugString writes it: `[2,3]`."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def _batch_records(records: list) -> tuple:
    out = np.empty(len(records), dtype=object)
    out[:] = records
    return (out,)


def _batches(n: int, size: int, drop: bool) -> int:
    if n < 0:
        return n
    return n // size if drop else -(-n // size)


class Batch(_PassesFailed, DatasetValue):
    """`batch_size` elements at a time.  A map directly beneath runs with it as TF's
    default tf.data optimization map_and_batch_fusion makes them one MapAndBatch,
    which differs from the two stages apart only where an element fails: its whole
    batch fails, the rest of the batch's input used up, and a batch of unequal shapes
    is TF's MapAndBatch error (`_batch`).  `fused`: None for TF's BatchDataset (fused
    with a map beneath unless the pipeline's options say not), True for its
    MapAndBatchDataset (whatever the options), False for a batch TF never fuses
    (ParallelBatchDataset)."""

    def __init__(self, input_value, batch_size, drop_remainder, fused: bool | None = None):
        if batch_size <= 0:
            raise errors.InvalidArgumentError(None, None, "Batch size must be greater than zero.")
        self.input, self.n, self.drop = input_value, int(batch_size), bool(drop_remainder)
        self.fused = fused

    def cardinality(self):
        return _batches(self.input.cardinality(), self.n, self.drop)

    def _fused(self, env: Env) -> bool:
        """Whether this pass runs as TF's MapAndBatch: asked as an element fails, when
        every options dataset of the pipeline has had its say (Env)."""
        if self.fused is not None:
            return self.fused
        return type(self.input) is Map and env.map_and_batch_fusion is not False

    async def iterate(self, env):
        make = _batch_records if self.input.bare_bytes else _batch
        n = self.n
        buf: list = []
        source = self.input.chunks(env)
        try:
            async for chunk in source:
                buf += chunk
                if len(buf) < n:
                    continue
                k = 0
                while len(buf) - k >= n:
                    try:
                        batch = make(buf[k : k + n])
                    except errors.InvalidArgumentError:
                        batch = self._refused(make, buf[k : k + n], env)
                    yield batch
                    k += n
                del buf[:k]
        finally:
            await source.aclose()
        if buf and not self.drop:
            try:
                batch = make(buf)
            except errors.InvalidArgumentError:
                batch = self._refused(make, buf, env)
            yield batch

    def _refused(self, make, elems: list, env: Env) -> tuple:
        """The batch of `elems`, which `make` refused: TF's MapAndBatch's error (or its
        batch) where this pass is fused, else `make`'s error again."""
        if make is _batch and self._fused(env):
            return _batch(elems, True)
        return make(elems)

    async def _tolerant(self, env):
        # An input's `Failed` is the batch's: unfused, the elements batched before it
        # are dropped and the next batch starts after it (TF's BatchDataset); fused,
        # the rest of its batch is read and dropped as well (TF's MapAndBatch).  A batch
        # that cannot be made is that call's error, and the pass goes on.
        n = self.n
        buf: list = []
        source = _pass_of(self.input, env)
        try:
            async for elem in source:
                if type(elem) is Failed:
                    if self._fused(env):
                        for _ in range(n - len(buf) - 1):
                            if await anext(source, None) is None:
                                break
                        if elem.stage is self.input:  # (MapAndBatch's own: unworded)
                            elem = Failed(elem.error.__cause__)
                    buf = []
                    yield elem
                    continue
                buf.append(elem)
                if len(buf) == n:
                    try:
                        batch = _batch(buf)
                    except errors.InvalidArgumentError:
                        batch = self._tolerant_refused(buf, env)
                    yield batch
                    buf = []
        finally:
            await source.aclose()
        if buf and not self.drop:
            try:
                batch = _batch(buf)
            except errors.InvalidArgumentError:
                batch = self._tolerant_refused(buf, env)
            yield batch

    def _tolerant_refused(self, elems: list, env: Env):
        try:
            return self._refused(_batch, elems, env)
        except errors.InvalidArgumentError as e:
            return Failed(e)


class PaddedBatch(_PassesFailed, DatasetValue):
    def __init__(self, input_value, batch_size, padded_shapes, padding_values, drop_remainder):
        if batch_size <= 0:
            raise errors.InvalidArgumentError(None, None, "Batch size must be greater than zero.")
        self.input, self.n, self.drop = input_value, int(batch_size), bool(drop_remainder)
        self.shapes = [list(np.asarray(s, np.int64).reshape(-1)) for s in padded_shapes]
        self.pads = [np.asarray(v) for v in padding_values]

    def _pad(self, buf):
        out = []
        for k in range(len(buf[0])):
            parts = [np.asarray(e[k]) for e in buf]
            want = self.shapes[k]
            dims = []
            for d, w in enumerate(want):
                longest = max(p.shape[d] for p in parts)
                if w >= 0 and longest > w:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"Attempted to pad to a smaller size than the input element: "
                        f"dimension {d} has {longest} > {w}",
                    )
                dims.append(longest if w < 0 else w)
            res = np.full([len(parts), *dims], self.pads[k], dtype=parts[0].dtype)
            for i, p in enumerate(parts):
                # p[()] for a scalar: an object array stores a 0-d array as an element
                res[(i, *(slice(0, s) for s in p.shape))] = p if p.ndim else p[()]
            out.append(res)
        return tuple(out)

    def cardinality(self):
        return _batches(self.input.cardinality(), self.n, self.drop)

    def iterate(self, env):
        return self._pass(env, False)

    def _tolerant(self, env):
        return self._pass(env, True)

    async def _pass(self, env, tolerant: bool):
        buf: list = []
        async for elem in _pass_of(self.input, env) if tolerant else self.input.iterate(env):
            if type(elem) is Failed:  # (as Batch's: the batch so far is dropped)
                buf = []
                yield elem
                continue
            buf.append(elem)
            if len(buf) == self.n:
                yield self._pad(buf)
                buf = []
        if buf and not self.drop:
            yield self._pad(buf)


class Unbatch(_PassesFailed, DatasetValue):
    def __init__(self, input_value):
        self.input = input_value

    async def iterate(self, env):
        async for elem in self.input.iterate(env):
            n, rows = _unbatched(elem)
            for i in range(n):
                yield tuple(
                    r[i] if r is not None else np.array(c[i], copy=True)
                    for c, r in zip(elem, rows)
                )

    async def _tolerant(self, env):
        async for elem in _pass_of(self.input, env):
            if type(elem) is Failed:  # (TF's: that call's error, the next goes on)
                yield elem
                continue
            n, rows = _unbatched(elem)
            for i in range(n):
                yield tuple(
                    r[i] if r is not None else np.array(c[i], copy=True)
                    for c, r in zip(elem, rows)
                )


def _unbatched(elem: tuple) -> tuple[int, list]:
    """The rows in `elem` and each sparse component's rows (None for a dense one)."""
    sparse = [_sparse_of(c) for c in elem]
    rows = [_unbatch_sparse(sp) if sp is not None else None for sp in sparse]
    n = {
        len(r) if r is not None else (np.shape(c)[0] if np.ndim(c) else None)
        for c, r in zip(elem, rows)
    }
    if None in n or len(n) != 1:
        raise errors.InvalidArgumentError(
            None, None, "Input element must have a non-scalar value in each component."
        )
    return n.pop(), rows


class Shuffle(_PassesFailed, DatasetValue):
    """TF's shuffle, draw for draw: keep up to `buffer_size` elements in arrival order;
    for each output, top the buffer up, pick position `draw % count` (one 32-bit Philox
    draw), hand that element out and move the oldest element into its place.

    Seeds follow TF's ShuffleDataset: (0, 0) draws fresh entropy; each pass (a `repeat`
    epoch, a re-initialized iterator of the same op run) asks the seed generator for its
    seeds: with `reshuffle_each_iteration` the next pair of a stream seeded with
    (seed, seed2), otherwise (seed, seed2) itself."""

    def __init__(self, input_value, buffer_size, seed, seed2, reshuffle):
        if buffer_size <= 0:
            raise errors.InvalidArgumentError(None, None, "buffer_size must be greater than zero.")
        self.input, self.size = input_value, int(buffer_size)
        self.bare_bytes = input_value.bare_bytes
        self.seeds = philox_random.seed_generator(seed, seed2, reshuffle)

    def cardinality(self):
        return self.input.cardinality()

    def iterate(self, env):
        return _dressed(self.chunks(env), self.bare_bytes)

    async def _tolerant(self, env):
        # An input's `Failed` is handed on as it arrives, outside the buffer: the draws
        # are those of the pass without it (TF's ShuffleDataset returns the error while
        # filling its buffer).
        stream = philox_random.PhiloxStream(*self.seeds.next_pair())
        size = self.size
        buf: collections.deque = collections.deque()
        source = _pass_of(self.input, env)
        try:
            async for elem in source:
                if type(elem) is Failed:
                    yield elem
                    continue
                buf.append(elem)
                if len(buf) == size:
                    (d,) = stream.take(1)
                    i = d % size
                    out = buf[i]
                    buf[i] = buf[0]
                    buf.popleft()
                    yield out
            while buf:
                (d,) = stream.take(1)
                i = d % len(buf)
                out = buf[i]
                buf[i] = buf[0]
                buf.popleft()
                yield out
        finally:
            await source.aclose()

    async def chunks(self, env):
        stream = philox_random.PhiloxStream(*self.seeds.next_pair())
        size = self.size
        # Invariant: the buffered elements, oldest first, are buf[head:]; TF's ring
        # buffer holds the same elements in the same logical order.
        buf: list = []
        head = 0
        source = self.input.chunks(env)
        try:
            async for chunk in source:
                fill = size - 1 - (len(buf) - head)  # elements that only fill the buffer
                if fill > 0:
                    buf += chunk[:fill]
                    chunk = chunk[fill:]
                out = []
                # Full: each element in means one draw and one element out.
                for elem, d in zip(chunk, stream.take(len(chunk))):
                    buf.append(elem)
                    i = head + d % size
                    out.append(buf[i])
                    buf[i] = buf[head]
                    buf[head] = None
                    head += 1
                if head >= 4096 and head * 2 >= len(buf):
                    del buf[:head]
                    head = 0
                if out:
                    yield out
            # Draining: the count falls by one per draw; a chunk's draws taken as one list.
            while head < len(buf):
                out = []
                left = len(buf) - head
                for d in stream.take(min(left, 1024)):
                    i = head + d % left
                    out.append(buf[i])
                    buf[i] = buf[head]
                    buf[head] = None
                    head += 1
                    left -= 1
                yield out
        finally:
            await source.aclose()


class Repeat(_PassesFailed, DatasetValue):
    def __init__(self, input_value, count):
        self.input, self.count = input_value, int(count)

    def cardinality(self):
        n = self.input.cardinality()
        if n == 0 or self.count == 0:
            return 0
        if self.count < 0:  # (an unknown count repeated for ever too: TF's)
            return -1
        if n < 0:
            return n
        return n * self.count

    async def iterate(self, env):
        epochs = itertools.count() if self.count < 0 else range(self.count)
        for epoch in epochs:
            produced, env.opened[self] = False, epoch  # (in_function's words)
            async for elem in self.input.iterate(env):
                produced = True
                yield elem
            if not produced:  # an empty input repeated forever ends at once, as in TF
                return

    async def _tolerant(self, env):
        epochs = itertools.count() if self.count < 0 else range(self.count)
        for epoch in epochs:
            produced = False  # (a `Failed` too: an epoch of errors goes on to the next)
            env.opened[self] = epoch  # (in_function's words)
            async for elem in _pass_of(self.input, env):
                produced = True
                yield elem
            if not produced:
                return


class Take(_PassesFailed, DatasetValue):
    def __init__(self, input_value, count):
        self.input, self.count = input_value, int(count)

    def cardinality(self):
        n = self.input.cardinality()
        if self.count < 0:
            return n
        if n == -1:
            return self.count
        return n if n == -2 else min(n, self.count)

    async def iterate(self, env):
        if self.count == 0:
            return
        source = self.input.iterate(env)
        try:
            n = 0
            async for elem in source:
                yield elem
                n += 1
                if n == self.count:
                    return
        finally:
            await source.aclose()

    async def _tolerant(self, env):
        if self.count == 0:
            return
        source = _pass_of(self.input, env)
        try:
            n = 0
            async for elem in source:
                yield elem
                if type(elem) is not Failed:  # (an error is not one of TF's n)
                    n += 1
                    if n == self.count:
                        return
        finally:
            await source.aclose()


class Skip(_PassesFailed, DatasetValue):
    def __init__(self, input_value, count):
        self.input, self.count = input_value, int(count)

    def cardinality(self):
        n = self.input.cardinality()
        if n < 0:
            return n if self.count >= 0 or n == -2 else 0
        return 0 if self.count < 0 else max(0, n - self.count)

    async def iterate(self, env):
        n = 0
        async for elem in self.input.iterate(env):
            if self.count < 0 or n < self.count:
                n += 1
                continue
            yield elem

    async def _tolerant(self, env):
        n = 0
        async for elem in _pass_of(self.input, env):
            if type(elem) is Failed:
                if self.count >= 0 and n < self.count:
                    n = 0  # TF's skip counts the elements it skips again after an error
                yield elem
                continue
            if self.count < 0 or n < self.count:
                n += 1
                continue
            yield elem


class Zip(_PassesFailed, DatasetValue):
    def __init__(self, inputs):
        self.inputs = inputs

    def cardinality(self):
        counts = [d.cardinality() for d in self.inputs]
        if -2 in counts:
            return -2
        finite = [n for n in counts if n >= 0]
        return min(finite) if finite else -1

    async def iterate(self, env):
        streams = [d.iterate(env) for d in self.inputs]
        try:
            while True:
                elem: tuple = ()
                for s in streams:
                    try:
                        elem += await s.__anext__()
                    except StopAsyncIteration:
                        return
                yield elem
        finally:
            for s in streams:
                await s.aclose()

    def _inputs(self):
        return tuple(self.inputs)

    async def _tolerant(self, env):
        # Each input gives its element; one that failed fails the zipped element (the
        # first such error), as TF's, whose later elements stay in step.
        streams = [_pass_of(d, env) for d in self.inputs]
        try:
            while True:
                parts = []
                for s in streams:
                    try:
                        parts.append(await s.__anext__())
                    except StopAsyncIteration:
                        return
                failed = next((p for p in parts if type(p) is Failed), None)
                yield failed if failed is not None else sum(parts, ())
        finally:
            for s in streams:
                await s.aclose()


class Concatenate(_PassesFailed, DatasetValue):
    def __init__(self, first, second):
        self.first, self.second = first, second

    def cardinality(self):
        a, b = self.first.cardinality(), self.second.cardinality()
        if -2 in (a, b):
            return -2
        return -1 if -1 in (a, b) else a + b

    async def iterate(self, env):
        async for elem in self.first.iterate(env):
            yield elem
        async for elem in self.second.iterate(env):
            yield elem

    def _inputs(self):
        return (self.first, self.second)

    async def _tolerant(self, env):
        async for elem in _pass_of(self.first, env):
            yield elem
        async for elem in _pass_of(self.second, env):
            yield elem


class Cache(_PassesFailed, DatasetValue):
    """The first complete pass is kept in memory; later passes replay it.  (A
    `filename` is accepted and the cache kept in memory all the same.)"""

    def __init__(self, input_value):
        self.input = input_value
        self.cached: list | None = None

    def cardinality(self):
        return self.input.cardinality()

    def iterate(self, env):
        return self._replay(self.input.iterate, env)

    def _tolerant(self, env):
        return self._replay(lambda e: _pass_of(self.input, e), env)

    async def _replay(self, source, env):
        """The cached pass, or `source(env)`'s elements, kept for the next pass."""
        if self.cached is not None:
            for elem in self.cached:
                yield _own(elem)
            return
        seen = []
        async for elem in source(env):
            if type(elem) is not Failed:  # (an error is not kept: TF's replay skips it)
                seen.append(_own(elem))
            yield elem
        self.cached = seen


_END = object()


class Prefetch(_PassesFailed, DatasetValue):
    """A producer Task on the loop keeps up to `buffer_size` elements ready."""

    def __init__(self, input_value, buffer_size):
        self.input = input_value
        self.size = int(buffer_size) if buffer_size > 0 else 2  # AUTOTUNE (-1): 2

    def cardinality(self):
        return self.input.cardinality()

    def iterate(self, env):
        return self._pass(env, False)

    def _tolerant(self, env):
        return self._pass(env, True)  # (a `Failed` is a plain item of the queue)

    async def _pass(self, env, tolerant: bool):
        q: asyncio.Queue = asyncio.Queue(self.size)
        source = _pass_of(self.input, env) if tolerant else self.input.iterate(env)

        async def produce():
            try:
                async for elem in source:
                    await q.put(elem)
                await q.put(_END)
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # noqa: BLE001 - delivered to the consumer
                await q.put(e)
            finally:
                await source.aclose()

        task = parked_task(produce())
        try:
            while True:
                item = await q.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            task.cancel()
