"""More of tf.data's ops: shard, unique, scan, take_while, windows, grouping, directed
interleaves, reductions to tensors and cardinality (TF 2.21's `tf.compat.v1` behaviour).

The stages follow ops/dataset_pipeline.py's model (a kernel binds its inputs into a
`DatasetValue`; `iterate` runs one pass on the session's loop; traced functions run as
nested steps).  A window is a dataset per component (`Window`): its handle is an element
component like any other (a 0-d string-typed tensor holding the value), so a function of
`flat_map` or `group_by_window` receives it through a placeholder, as TF passes variants.

Errors are TF's: InvalidArgumentError with TF's messages for bad sizes, shard indices,
selector indices and single-element reductions, raised when the pass reaches them.
"""

from __future__ import annotations

import logging
import re
import time

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow.ops import dataset_ops as dso
from asyncflow.ops import dataset_pipeline as pl
from asyncflow.registry import ANY, NotDifferentiable, register_op

__all__: list[str] = []

INFINITE = -1
UNKNOWN = -2
_IN = "input_dataset: string"
_log = logging.getLogger("asyncflow")


def _bad(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def cardinality(value: pl.DatasetValue) -> int:
    """Elements one pass of `value` gives: a count, INFINITE (-1) or UNKNOWN (-2)."""
    return int(value.cardinality())


def _plain_pass(value: pl.DatasetValue, env):
    return value.iterate(env)


async def _closing(stream):
    try:
        async for elem in stream:
            yield elem
    finally:
        await stream.aclose()


# -- stages ----------------------------------------------------------------------------------


_END = object()
_SHARD_HINT = -1  # tf.data.experimental.SHARD_HINT: the tf.data service fills it in


class Shard(pl._PassesFailed, pl.DatasetValue):
    def __init__(self, input_value, num_shards: int, index: int):
        self.hint = num_shards == index == _SHARD_HINT
        if self.hint:  # (TF's: made, and refused only when iterated)
            self.input, self.n, self.index = input_value, 1, 0
            return
        if num_shards <= 0:
            raise _bad(
                "Number of shards must be greater than zero "
                f"(currently num_shards = {num_shards})."
            )
        if not 0 <= index < num_shards:
            raise _bad(
                f"Index must be between 0 and {num_shards - 1} (currently index = {index})."
            )
        self.input, self.n, self.index = input_value, num_shards, index

    def _hint_error(self):
        return errors.FailedPreconditionError(
            None, None, "`tf.data.Dataset.shard(SHARD_HINT, ...)` can only be used in "
            "`tf.distribute.Strategy.experimental_distribute_dataset()` with "
            "`tf.data.experimental.AutoShardPolicy.HINT` policy, or tf.data service "
            "with `tf.data.experimental.service.ShardingPolicy.HINT` processing mode."
        )  # fmt: skip

    async def iterate(self, env):
        if self.hint:
            raise self._hint_error()
        i = 0
        async for elem in _closing(self.input.iterate(env)):
            if i % self.n == self.index:
                yield elem
            i += 1

    async def _tolerant(self, env):
        # TF's: each call skips to the shard's next index, then takes an element; an
        # error is that call's, and where it came while skipping the elements skipped
        # are not counted (the next call skips as many again).
        if self.hint:
            raise self._hint_error()
        i = 0
        source = pl._pass_of(self.input, env)
        try:
            while True:
                skip, k = (self.index - i) % self.n, 0
                while k <= skip:
                    elem = await anext(source, _END)
                    if elem is _END or type(elem) is pl.Failed:
                        break
                    k += 1
                if elem is _END:
                    return
                if k >= skip:  # (the skip done; k == skip: the take failed)
                    i += k
                yield elem
        finally:
            await source.aclose()

    def cardinality(self):
        n = cardinality(self.input)
        if n < 0:
            return n
        return n // self.n + (1 if n % self.n > self.index else 0)


class Unique(pl._PassesFailed, pl.DatasetValue):
    def __init__(self, input_value):
        self.input = input_value

    def iterate(self, env):
        return self._pass(env, False)

    def _tolerant(self, env):
        return self._pass(env, True)

    async def _pass(self, env, tolerant: bool):
        seen: set = set()
        if tolerant:
            async for elem in _closing(pl._pass_of(self.input, env)):
                if type(elem) is pl.Failed:  # (handed on, nothing seen)
                    yield elem
                elif (key := _key(elem)) not in seen:
                    seen.add(key)
                    yield elem
            return
        async for elem in _closing(self.input.iterate(env)):
            key = _key(elem)
            if key in seen:
                continue
            seen.add(key)
            yield elem


def _key(elem: tuple):
    """The set key of a one-component element."""
    (v,) = elem
    a = np.asarray(v)
    return (a.shape, a.tobytes()) if a.dtype != object else (a.shape, *a.reshape(-1))


class Scan(pl._PassesFailed, pl.DatasetValue):
    """`scan_func(state, element) -> (new state, output)`; the state starts as given."""

    def __init__(self, input_value, fn: pl.Function, initial: tuple, n_state: int):
        self.input, self.fn, self.initial, self.n_state = input_value, fn, initial, n_state

    def iterate(self, env):
        return self._pass(env, False)

    def _tolerant(self, env):
        return self._pass(env, True)

    async def _pass(self, env, tolerant: bool):
        state = pl._own(self.initial)
        if tolerant:
            async for elem in _closing(pl._pass_of(self.input, env)):
                if type(elem) is pl.Failed:  # (handed on; the state stays, as TF's)
                    yield elem
                    continue
                out = await self.fn(env, (*state, *elem))
                state, result = out[: self.n_state], out[self.n_state :]
                yield pl._own(result)
            return
        async for elem in _closing(self.input.iterate(env)):
            out = await self.fn(env, (*state, *elem))
            state, result = out[: self.n_state], out[self.n_state :]
            yield pl._own(result)

    def cardinality(self):
        return cardinality(self.input)


class TakeWhile(pl._PassesFailed, pl.DatasetValue):
    def __init__(self, input_value, predicate: pl.Function):
        self.input, self.predicate = input_value, predicate

    def iterate(self, env):
        return self._pass(env, False)

    def _tolerant(self, env):
        return self._pass(env, True)

    async def _pass(self, env, tolerant: bool):
        source = pl._pass_of(self.input, env) if tolerant else self.input.iterate(env)
        async for elem in _closing(source):
            if tolerant and type(elem) is pl.Failed:  # (handed on without a call)
                yield elem
                continue
            (keep,) = await self.predicate(env, elem)
            if np.asarray(keep).shape != ():
                raise _bad("`predicate` must return a scalar boolean tensor.")
            if not keep:
                return
            yield elem


class Elements(pl.DatasetValue):
    """A dataset of elements held in memory (a window's, a group's)."""

    def __init__(self, elems: list):
        self.elems = elems

    async def iterate(self, env):
        for elem in self.elems:
            yield pl._own(elem)

    def cardinality(self):
        return len(self.elems)


async def windows(source, size: int, shift: int, stride: int, drop: bool):
    """The lists of `size` elements of the async iterator `source`, `stride` apart, one
    starting every `shift` elements; the shorter ones at the end too unless `drop`."""
    span = (size - 1) * stride + 1  # input elements one full window covers
    buf: list = []  # input elements from the next window's start on
    skip = 0  # input elements between two windows (a shift longer than a window)
    async for elem in _closing(source):
        if skip:
            skip -= 1
            continue
        buf.append(elem)
        if len(buf) == span:
            yield buf[::stride]
            if shift >= span:
                skip, buf = shift - span, []
            else:
                del buf[:shift]
    while buf and not drop:  # partial windows at the end, one every `shift`
        yield buf[::stride]
        del buf[:shift]


class Window(pl._PassesFailed, pl.DatasetValue):
    """Windows of `size` elements `stride` apart, one starting every `shift` elements;
    each element is a dataset per component."""

    def __init__(self, input_value, size: int, shift: int, stride: int, drop: bool):
        for what, v in (("size", size), ("shift", shift), ("stride", stride)):
            if v <= 0:
                raise _bad(f"Window {what} must be greater than zero, but got {v}.")
        self.input, self.size, self.shift, self.stride = input_value, size, shift, stride
        self.drop = drop

    def _emit(self, elems: list) -> tuple:
        return tuple(dso._handle(Elements([(e[k],) for e in elems])) for k in range(len(elems[0])))

    async def iterate(self, env):
        source = self.input.iterate(env)
        async for elems in windows(source, self.size, self.shift, self.stride, self.drop):
            yield self._emit(elems)

    async def _tolerant(self, env):
        # A window with a failed element in it is that element's error (TF's keeps the
        # error in the element's place in its buffer); one a shift skips over is dropped.
        source = pl._pass_of(self.input, env)
        async for elems in windows(source, self.size, self.shift, self.stride, self.drop):
            failed = next((e for e in elems if type(e) is pl.Failed), None)
            yield failed if failed is not None else self._emit(elems)

    def cardinality(self):
        n = cardinality(self.input)
        if n < 0:
            return n
        if self.drop:
            span = (self.size - 1) * self.stride + 1
            return 0 if n < span else (n - span) // self.shift + 1
        return -(-n // self.shift)


class GroupByWindow(pl._PassesFailed, pl.DatasetValue):
    """Elements grouped by `key_func`; a group of `window_size_func(key)` elements goes
    to `reduce_func(key, window)` and that dataset's elements are the output.  At the
    end of the input the groups left are reduced in increasing key order (TF keeps its
    groups in a map ordered by key)."""

    def __init__(self, input_value, key_fn, reduce_fn, size_fn):
        self.input, self.key_fn, self.reduce_fn, self.size_fn = (
            input_value,
            key_fn,
            reduce_fn,
            size_fn,
        )

    async def _key(self, env, elem) -> int:
        (k,) = await self.key_fn(env, elem)
        k = np.asarray(k)
        if k.shape != () or k.dtype != np.int64:
            raise _bad("`key_func` must return a single tf.int64 scalar tensor.")
        return int(k)

    async def _reduced(self, env, key: int, elems: list, tolerant: bool):
        out = await self.reduce_fn(env, (np.array(key, np.int64), dso._handle(Elements(elems))))
        made = pl._dataset_of(out[0])
        async for x in _closing(pl._pass_of(made, env) if tolerant else made.iterate(env)):
            yield x

    def iterate(self, env):
        return self._pass(env, False)

    def _tolerant(self, env):
        return self._pass(env, True)

    async def _pass(self, env, tolerant: bool):
        groups: dict[int, list] = {}
        sizes: dict[int, int] = {}
        source = pl._pass_of(self.input, env) if tolerant else self.input.iterate(env)
        async for elem in _closing(source):
            if tolerant and type(elem) is pl.Failed:  # (handed on at once, in no group)
                yield elem
                continue
            key = await self._key(env, elem)
            if key not in sizes:
                (size,) = await self.size_fn(env, (np.array(key, np.int64),))
                size = int(np.asarray(size))
                if size <= 0:
                    raise _bad(f"Window size must be greater than zero, but got {size}.")
                sizes[key] = size
            group = groups.setdefault(key, [])
            group.append(elem)
            if len(group) == sizes[key]:
                del groups[key]
                async for x in self._reduced(env, key, group, tolerant):
                    yield x
        for key in sorted(groups):
            async for x in self._reduced(env, key, groups[key], tolerant):
                yield x


class DirectedInterleave(pl._PassesFailed, pl.DatasetValue):
    """Each selector value picks the data input its next element comes from; an
    exhausted input's picks are skipped (or end the pass with `stop_on_empty`)."""

    def __init__(self, selector, inputs: list, stop_on_empty: bool):
        self.selector, self.inputs, self.stop = selector, inputs, stop_on_empty

    def _inputs(self):
        return (self.selector, *self.inputs)

    def iterate(self, env):
        return self._pass(env, False)

    def _tolerant(self, env):
        return self._pass(env, True)  # (a data input's failed element is the one picked)

    async def _pass(self, env, tolerant: bool):
        open_ = pl._pass_of if tolerant else _plain_pass
        streams = [open_(d, env) for d in self.inputs]
        live = len(streams)
        try:
            async for pick in _closing(open_(self.selector, env)):
                if tolerant and type(pick) is pl.Failed:
                    yield pick
                    continue
                i = int(np.asarray(pick[0]))
                if not 0 <= i < len(streams):
                    raise _bad(f"Selector index out of range: {i} >= {len(streams)}")
                if streams[i] is None:
                    continue
                try:
                    yield await streams[i].__anext__()
                except StopAsyncIteration:
                    await streams[i].aclose()
                    streams[i] = None
                    live -= 1
                    if self.stop or not live:
                        return
        finally:
            for s in streams:
                if s is not None:
                    await s.aclose()


class Sample(pl.DatasetValue):
    """`sample_from_datasets`: each element from input i with probability weight_i among
    the inputs not yet exhausted (renormalized); ends when no input with a positive
    weight is left (or, with `stop_on_empty`, at the first exhausted one)."""

    def __init__(self, inputs: list, weights, seed: int, seed2: int, stop_on_empty: bool):
        w = np.asarray(weights, np.float64).reshape(-1)
        if w.shape[0] != len(inputs):
            raise _bad(f"`weights` has {w.shape[0]} entries but there are {len(inputs)} datasets.")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise _bad("`weights` must be finite and non-negative.")
        self.inputs, self.weights, self.stop = inputs, w, stop_on_empty
        self.seed = (int(seed) & 0xFFFFFFFFFFFFFFFF, int(seed2) & 0xFFFFFFFFFFFFFFFF)

    async def iterate(self, env):
        rng = np.random.Generator(np.random.Philox(key=list(self.seed)))
        streams = [d.iterate(env) for d in self.inputs]
        w = self.weights.copy()
        try:
            while w.sum() > 0:
                i = int(rng.choice(len(w), p=w / w.sum()))
                try:
                    yield await streams[i].__anext__()
                except StopAsyncIteration:
                    await streams[i].aclose()
                    streams[i] = None
                    w[i] = 0.0
                    if self.stop:
                        return
        finally:
            for s in streams:
                if s is not None:
                    await s.aclose()


# -- dataset ops -------------------------------------------------------------------------------


def _fn(ctx, prefix: str, captured) -> pl.Function:
    """The traced function whose placeholders the attrs `{prefix}_inputs`, ... name."""
    st = ctx.kernel_state
    key = "fn_" + prefix
    fn = st.get(key)
    if fn is None:
        g = ctx.op.graph
        a = ctx.attrs
        fn = st[key] = (
            [g.get_tensor_by_name(n) for n in a[f"{prefix}_inputs"]],
            [dso.function_result(g, n) for n in a[f"{prefix}_outputs"]],
            [g.get_tensor_by_name(n) for n in a[f"{prefix}_captures"]],
        )
    return dso.make_function(fn, captured)


def _fn_attrs(prefix: str) -> dict:
    return {f"{prefix}_inputs": [], f"{prefix}_outputs": [], f"{prefix}_captures": []}


def function_attrs(prefix: str, inputs, outputs, captures) -> dict:
    """The attrs naming one of an op's traced functions (see `_fn`)."""
    return {
        f"{prefix}_inputs": [t.name for t in inputs],
        f"{prefix}_outputs": [t.name for t in outputs],
        f"{prefix}_captures": [t.name for t in captures],
    }


async def _shard(ctx, ds, num_shards, index):
    return dso._handle(Shard(dso._ds(ds), int(num_shards), int(index)))


async def _unique(ctx, ds):
    return dso._handle(Unique(dso._ds(ds)))


async def _scan(ctx, ds, *rest):
    n = len(ctx.attrs["Tstate"])
    state, captured = rest[:n], rest[n:]
    return dso._handle(Scan(dso._ds(ds), dso._function(ctx, captured), tuple(state), n))


async def _take_while(ctx, ds, *captured):
    return dso._handle(TakeWhile(dso._ds(ds), dso._function(ctx, captured)))


async def _window_op(ctx, ds, size, shift, stride, drop):
    return dso._handle(Window(dso._ds(ds), int(size), int(shift), int(stride), bool(drop)))


def _split_captures(ctx, funcs, captured) -> list:
    """The flat captured values, split per function by TF's `T<func>_other_arguments`."""
    parts, i = [], 0
    for f in funcs:
        n = len(ctx.attrs[f"T{f}_other_arguments"])
        parts.append(captured[i : i + n])
        i += n
    return parts


async def _group_by_window(ctx, ds, *captured):
    key, red, size = _split_captures(
        ctx, ("key_func", "reduce_func", "window_size_func"), captured
    )
    value = GroupByWindow(
        dso._ds(ds), _fn(ctx, "key", key), _fn(ctx, "reduce", red), _fn(ctx, "size", size)
    )
    value.inner_fails = dso._datasets_may_fail(ctx, "reduce")
    return dso._handle(value)


async def _directed(ctx, selector, *inputs):
    return dso._handle(
        DirectedInterleave(
            dso._ds(selector), [dso._ds(d) for d in inputs], ctx.attrs["stop_on_empty_dataset"]
        )
    )


async def _sample(ctx, weights, seed, seed2, *inputs):
    return dso._handle(
        Sample(
            [dso._ds(d) for d in inputs],
            weights,
            seed,
            seed2,
            ctx.attrs["stop_on_empty_dataset"],
        )
    )


dso._register(
    "ShardDataset",
    [_IN, "num_shards: int64", "index: int64"],
    {"require_non_empty": False},
    _shard,
)
dso._register("UniqueDataset", [_IN], None, _unique)
dso._register(
    "ScanDataset",
    [_IN, "initial_state: Tstate", "other_arguments: Targuments"],
    {**dso._FN, "Tstate": dso._LIST},
    _scan,
)
dso._register("TakeWhileDataset", [_IN, "other_arguments: Targuments"], dso._FN, _take_while)
dso._register(
    "WindowDataset",
    [_IN, "size: int64", "shift: int64", "stride: int64", "drop_remainder: bool"],
    None,
    _window_op,
)


def _captures_of(*funcs: str) -> tuple[list, dict]:
    """TF's inputs and type attrs for the captured values of each named function."""
    inputs = [f"{f}_other_arguments: T{f}_other_arguments" for f in funcs]
    return inputs, {f"T{f}_other_arguments": dso._LIST for f in funcs}


_GBW_IN, _GBW_T = _captures_of("key_func", "reduce_func", "window_size_func")
dso._register(
    "GroupByWindowDataset",
    [_IN, *_GBW_IN],
    {**_fn_attrs("key"), **_fn_attrs("reduce"), **_fn_attrs("size"), **_GBW_T},
    _group_by_window,
)
dso._register(
    "DirectedInterleaveDataset",
    ["selector_input_dataset: string", "data_input_datasets: N * string"],
    {"N": 1, "stop_on_empty_dataset": False},
    _directed,
)
dso._register(
    "_SampleFromDatasets",
    ["weights: float64", "seed: int64", "seed2: int64", "data_input_datasets: N * string"],
    {"N": 1, "stop_on_empty_dataset": False},
    _sample,
)


# -- datasets to tensors -----------------------------------------------------------------------


def _components_shapes(op):
    return list(op._attr("output_shapes")) or [None] * len(op.outputs)


def _out(values, types):
    out = []
    for v, dt in zip(values, types):
        a = np.asarray(v)
        want = np.dtype(object) if dt in (dtypes.string, dtypes.variant) else dt.as_numpy_dtype
        out.append(a.astype(want) if a.dtype != want else np.array(a, copy=True))
    return out[0] if len(out) == 1 else tuple(out)


ReduceDataset = register_op(
    "ReduceDataset",
    inputs=[_IN, "initial_state: Tstate", "other_arguments: Targuments"],
    outputs=["components: output_types"],
    attrs={**dso._OUT, **dso._FN, "Tstate": dso._LIST, "use_inter_op_parallelism": True},
    shape_fn=_components_shapes,
    stateful=True,
    is_async=True,
)
NotDifferentiable("ReduceDataset")


@ReduceDataset.kernel("CPU")
async def _reduce(ctx, ds, *rest):
    n = len(ctx.attrs["Tstate"])
    state, captured = tuple(rest[:n]), rest[n:]
    fn = dso._function(ctx, captured)
    env = pl.Env(ctx.session)
    env.name_from(dso._ds(ds), "ReduceIterator::Root")  # (TF's words: pl.in_function)
    async for elem in _closing(dso._ds(ds).iterate(env)):
        state = tuple(await fn(env, (*state, *elem)))
    return _out(state, ctx.attrs["output_types"])


DatasetToSingleElement = register_op(
    "DatasetToSingleElement",
    inputs=["dataset: string"],
    outputs=["components: output_types"],
    attrs=dict(dso._OUT),
    shape_fn=_components_shapes,
    stateful=True,
    is_async=True,
)
NotDifferentiable("DatasetToSingleElement")


@DatasetToSingleElement.kernel("CPU")
async def _single(ctx, ds):
    env = pl.Env(ctx.session)
    env.name_from(dso._ds(ds), "SingleElementIterator", "none")  # (TF's, unoptimized)
    stream = dso._ds(ds).iterate(env)
    try:
        try:
            elem = await stream.__anext__()
        except StopAsyncIteration:
            raise _bad("Dataset was empty.") from None
        try:
            await stream.__anext__()
        except StopAsyncIteration:
            return _out(elem, ctx.attrs["output_types"])
        raise _bad("Dataset had more than one element.")
    finally:
        await stream.aclose()


DatasetCardinality = register_op(
    "DatasetCardinality",
    inputs=["input_dataset: string"],
    outputs=["cardinality: int64"],
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
)
NotDifferentiable("DatasetCardinality")


@DatasetCardinality.kernel("CPU")
async def _cardinality(ctx, ds):
    return np.array(cardinality(dso._ds(ds)), np.int64)


# -- ignore_errors -----------------------------------------------------------------------------


class IgnoreErrors(pl.DatasetValue):
    """The input's elements without those whose computation failed.

    The input runs its tolerant pass where it has one (a map or filter beneath, with
    the transformations between handing its `Failed` elements on: dataset_pipeline's
    `_PassesFailed`): a call that raises an op error gives no element and the pass goes
    on, as in TF.  An error raised anywhere else in the pipeline (a source's, a stage
    with no tolerant pass) ends this pass with that error: the stream it came from
    cannot go on, and ending quietly would drop the rest of the data unseen.
    """

    def __init__(self, input_value, log_warning: bool):
        self.input, self.log = input_value, log_warning

    async def iterate(self, env):
        tolerant = getattr(self.input, "iterate_tolerant", None)
        stream = tolerant(env) if tolerant is not None else self.input.iterate(env)
        last = None
        async for elem in _closing(stream):
            if type(elem) is pl.Failed:
                if elem is last:  # (a stream that gives its error for ever, as a
                    raise elem.error  # tf.data service read's: it cannot go on)
                last = elem
                if self.log:
                    _log.warning("Ignoring an error in the input pipeline: %s", elem.error)
                continue
            yield elem


async def _ignore_errors(ctx, ds):
    return dso._handle(IgnoreErrors(dso._ds(ds), ctx.attrs["log_warning"]))


dso._register("IgnoreErrorsDataset", [_IN], {"log_warning": False}, _ignore_errors)


# -- CSV files -----------------------------------------------------------------------------


_LINE_BREAK = re.compile(rb"(\r\n|\r|\n)")


def csv_records(data: bytes, quote: bool) -> list[bytes]:
    """The records of a CSV file: lines (LF, CRLF or CR ends one), except that a line
    break inside a quoted field belongs to its record."""
    parts = _LINE_BREAK.split(data)  # [text, break, text, break, ..., text]
    out: list[bytes] = []
    i, n = 0, len(parts)
    while i < n:
        cur = parts[i]
        i += 1
        if quote:
            while cur.count(b'"') % 2 and i < n:  # an open quote: the break is the field's
                cur += parts[i] + parts[i + 1]
                i += 2
        if i < n or cur:  # (the text after the last break, when there is any)
            out.append(cur)
        i += 1 if i < n else 0  # past the break
    return out


class CsvRecords(pl.DatasetValue):
    """TF's CSVDataset: typed fields of each record of each file, in order."""

    def __init__(
        self, filenames, compression, header, delim, quote, na, select, defaults, exclude=()
    ):
        from asyncflow.ops import parsing_ops

        self._split, self._number = parsing_ops._split_csv, parsing_ops._parse_number
        self.paths = pl._read_paths(filenames)
        self.compression, self.header = compression, header
        if len(delim) != 1:
            raise _bad("field_delim should be only 1 char")
        self.delim, self.quote, self.na = delim[0], quote, na
        self.select = [int(c) for c in np.ravel(select)]
        self.defaults = [np.ravel(d) for d in defaults]
        for k, d in enumerate(self.defaults):
            if d.size > 1:
                raise _bad(f"Each record default should be at most 1 element: {k}")
        if self.select and len(self.select) != len(self.defaults):
            raise _bad(
                "Expect as many record defaults as selected columns: "
                f"{len(self.defaults)} vs {len(self.select)}"
            )
        self.exclude = [int(c) for c in np.ravel(exclude)]
        if self.exclude and self.select:
            raise _bad("Either select_cols or exclude_cols should be empty")
        if any(a >= b for a, b in zip(self.exclude, self.exclude[1:])):
            raise _bad("exclude_cols should be strictly increasing indices")
        if self.exclude and self.exclude[0] < 0:
            raise _bad("exclude_cols should be non-negative indices")
        self.exclude = frozenset(self.exclude)

    def _element(self, record: bytes, types) -> tuple:
        fields = self._split(record, self.delim, self.quote, 0) if record else [b""]
        want = len(self.defaults)
        if self.select:
            picked = [fields[c] for c in self.select if c < len(fields)]
            fields = picked
        elif self.exclude:
            fields = [f for i, f in enumerate(fields) if i not in self.exclude]
            if len(fields) > want:  # (TF's wording when columns were dropped)
                raise _bad(f"Expect {want} fields but have more in record")
        if len(fields) != want:
            raise _bad(f"Expect {want} fields but have {len(fields)} in record")
        out = []
        for c, (field, dt) in enumerate(zip(fields, types)):
            if not field or field == self.na:
                if self.defaults[c].size == 0:
                    raise _bad(f"Field {c} is required but missing in record!")
                out.append(np.array(self.defaults[c][0], dtype=dt))
            elif dt == np.dtype(object):
                out.append(np.array(field, dtype=object))
            else:
                v = self._number(field, dtypes.as_dtype(dt))
                if v is None:
                    name = {"float32": "float", "float64": "double"}.get(dt.name, dt.name)
                    raise _bad(
                        f"Field {c} in record is not a valid {name}: "
                        f"{field.decode('utf-8', 'replace')}"
                    )
                out.append(np.array(v, dtype=dt))
        return tuple(out)

    async def iterate(self, env):
        types = [np.dtype(object) if d.dtype.kind in "OSU" else d.dtype for d in self.defaults]
        for path in self.paths:
            data = await pl._in_thread(pl._read_whole, path, self.compression)
            records = csv_records(data, self.quote)
            for record in records[1:] if self.header else records:
                yield self._element(record, types)


async def _csv(
    ctx, filenames, compression, buffer_size, header, delim, quote, na, select, *defaults
):
    return _csv_records(ctx, filenames, compression, header, delim, quote, na, select, defaults)


async def _csv_v2(
    ctx, filenames, compression, buffer_size, header, delim, quote, na, select, *rest
):
    *defaults, exclude = rest
    return _csv_records(
        ctx, filenames, compression, header, delim, quote, na, select, defaults, exclude
    )


def _csv_records(
    ctx, filenames, compression, header, delim, quote, na, select, defaults, exclude=()
):
    types = ctx.attrs["output_types"]
    defaults = [
        np.asarray(d, dtype=object) if t == dtypes.string else np.asarray(d, t.as_numpy_dtype)
        for d, t in zip(defaults, types)
    ]
    return dso._handle(
        CsvRecords(
            filenames,
            dso._str(compression),
            bool(header),
            dso._str(delim).encode(),
            bool(quote),
            dso._str(na).encode(),
            select,
            defaults,
            exclude,
        )
    )


_CSV_INPUTS = [
    "filenames: string",
    "compression_type: string",
    "buffer_size: int64",
    "header: bool",
    "field_delim: string",
    "use_quote_delim: bool",
    "na_value: string",
    "select_cols: int64",
    "record_defaults: output_types",
]
dso._register("CSVDataset", _CSV_INPUTS, None, _csv)
# TF 2.x's form (what tf.compat.v1's CsvDataset builds): exclude_cols comes last.
dso._register("CSVDatasetV2", [*_CSV_INPUTS, "exclude_cols: int64"], None, _csv_v2)


# -- SparseTensor components -------------------------------------------------------------------
# An element's SparseTensor travels as one component, a handle holding a SparseValue (TF:
# a variant); the Python API converts at the edges (asyncflow/data/structure.py).

SparseToHandle = register_op(
    "_SparseToDatasetHandle",
    inputs=["indices: int64", "values: T", "dense_shape: int64"],
    outputs=["handle: string"],
    attrs={"T": ANY},
    shape_fn=dso._handle_shape,
)
NotDifferentiable("_SparseToDatasetHandle")


@SparseToHandle.kernel("CPU")
async def _sparse_to_handle(ctx, indices, values, dense_shape):
    return dso._handle(
        pl.SparseValue(np.array(indices, copy=True), np.array(values, copy=True), dense_shape)
    )


def _sparse_shapes(op):
    rank = op._attr("rank")
    r = None if rank < 0 else rank
    return [
        tensor_shape.TensorShape([None, r]),
        tensor_shape.TensorShape([None]),
        tensor_shape.TensorShape([r]),
    ]


HandleToSparse = register_op(
    "_DatasetHandleToSparse",
    inputs=["handle: string"],
    outputs=["indices: int64", "values: T", "dense_shape: int64"],
    attrs={"T": ANY, "rank": -1},
    shape_fn=_sparse_shapes,
)
NotDifferentiable("_DatasetHandleToSparse")


@HandleToSparse.kernel("CPU")
async def _handle_to_sparse(ctx, handle):
    v = handle[()] if isinstance(handle, np.ndarray) and handle.shape == () else handle
    if not isinstance(v, pl.SparseValue):
        raise _bad(f"Expected a SparseTensor component, got {v!r}")
    dt = ctx.attrs["T"]
    want = np.dtype(object) if dt == dtypes.string else dt.as_numpy_dtype
    if v.values.dtype != want:
        raise _bad(f"Expected a SparseTensor of {dt.name}, got {v.values.dtype}")
    return np.array(v.indices, copy=True), np.array(v.values, copy=True), np.array(v.dense_shape)


# -- writing a dataset to a TFRecord file --------------------------------------------------

DatasetToTFRecord = register_op(
    "DatasetToTFRecord",
    inputs=["input_dataset: string", "filename: string", "compression_type: string"],
    shape_fn=lambda op: [],
    stateful=True,
    is_async=True,
)
NotDifferentiable("DatasetToTFRecord")


@DatasetToTFRecord.kernel("CPU")
async def _to_tfrecord(ctx, ds, filename, compression):
    """Every element (one scalar string each) as a record, written on a worker thread
    a batch of records at a time."""
    from asyncflow import python_io

    comp = dso._str(compression)
    writer = await pl._in_thread(
        python_io.TFRecordWriter, dso._str(filename), python_io.TFRecordOptions(comp or None)
    )
    batch: list = []
    try:
        async for elem in _closing(dso._ds(ds).iterate(pl.Env(ctx.session))):
            if len(elem) != 1 or np.ndim(elem[0]) != 0 or np.asarray(elem[0]).dtype != object:
                raise _bad("TFRecordWriter needs a dataset of scalar string elements.")
            batch.append(elem[0][()] if isinstance(elem[0], np.ndarray) else elem[0])
            if len(batch) >= 1024:
                await pl._in_thread(_write_records, writer, batch)
                batch = []
        await pl._in_thread(_write_records, writer, batch)
    finally:
        await pl._in_thread(writer.close)


def _write_records(writer, records) -> None:
    for r in records:
        writer.write(r)


# -- assert_cardinality, RandomDataset, group_by_reducer, dense_to_sparse_batch -------------


def _elements(n: int) -> str:
    return f"{n} element" + ("" if n == 1 else "s")


class AssertCardinality(pl._PassesFailed, pl.DatasetValue):
    """The input unchanged while it has at most `expected` elements.  As TF's, a wrong
    count is an error at every later call: each element past `expected` is an error
    ("at least" that many), and once the input ends with another count than expected,
    every call is that count's error ("only"), for ever.  So this stage always has a
    tolerant pass, which stages above take to hand the errors on (its plain pass, for
    a consumer with none, ends at the first error)."""

    def __init__(self, input_value, expected: int):
        self.input, self.expected = input_value, expected

    @property
    def iterate_tolerant(self):
        return self._tolerant

    def _wrong(self, n: int, at_least: bool) -> errors.FailedPreconditionError:
        want = (
            "an infinite number of elements"
            if self.expected == INFINITE
            else _elements(self.expected)
        )
        return errors.FailedPreconditionError(
            None,
            None,
            f"Input dataset was expected to contain {want} but "
            f"contained {'at least' if at_least else 'only'} {_elements(n)}.",
        )

    async def iterate(self, env):
        n = 0
        async for elem in _closing(self.input.iterate(env)):
            n += 1
            if self.expected >= 0 and n > self.expected:
                raise self._wrong(n, True)
            yield elem
        if n != self.expected:
            raise self._wrong(n, False)

    async def _tolerant(self, env):
        n = 0
        async for elem in _closing(pl._pass_of(self.input, env)):
            if type(elem) is not pl.Failed:  # (a failed element is not counted, as TF's)
                n += 1
                if self.expected >= 0 and n > self.expected:
                    elem = pl.Failed(self._wrong(n, True))
            yield elem
        if n != self.expected:
            # (one Failed for ever: ignore_errors above ends on it rather than spin)
            failed = pl.Failed(self._wrong(n, False))
            while True:
                yield failed

    def cardinality(self):
        return self.expected


class RandomInts(pl.DatasetValue):
    """TF's RandomDataset: one 32-bit draw of Philox(seed, seed2) per element (int64),
    forever; seeds (0, 0) draw fresh ones from the OS. RandomDatasetV2 with
    `rerandomize_each_iteration` draws each pass's seeds from a stream seeded with
    (seed, seed2), as TF's reshuffling seed generator (and shuffle's) does: a new
    sequence per `repeat` epoch, the same sequences again for a new iterator."""

    def __init__(self, seed: int, seed2: int, rerandomize: bool = False):
        from asyncflow.ops import philox_random

        self.seeds = philox_random.seed_generator(int(seed), int(seed2), rerandomize)

    async def iterate(self, env):
        from asyncflow.ops import philox_random

        stream = philox_random.PhiloxStream(*self.seeds.next_pair())
        while True:
            yield (np.array(stream.next(), np.int64),)

    def cardinality(self):
        return INFINITE


class GroupByReducer(pl._PassesFailed, pl.DatasetValue):
    """Per key (`key_func`, int64): state `init_func(key)`, `reduce_func(state, element)`
    for each element, and at the end of the input `finalize_func(state)` for each key
    in the order the keys first appeared."""

    def __init__(self, input_value, key_fn, init_fn, reduce_fn, finalize_fn):
        self.input = input_value
        self.key_fn, self.init_fn, self.reduce_fn, self.finalize_fn = (
            key_fn,
            init_fn,
            reduce_fn,
            finalize_fn,
        )

    def iterate(self, env):
        return self._pass(env, False)

    def _tolerant(self, env):
        return self._pass(env, True)

    async def _pass(self, env, tolerant: bool):
        states: dict[int, tuple] = {}
        source = pl._pass_of(self.input, env) if tolerant else self.input.iterate(env)
        async for elem in _closing(source):
            if tolerant and type(elem) is pl.Failed:  # (handed on at once, not reduced)
                yield elem
                continue
            (k,) = await self.key_fn(env, elem)
            k = np.asarray(k)
            if k.shape != () or k.dtype != np.int64:
                raise _bad("`key_func` must return a single tf.int64 scalar tensor.")
            key = int(k)
            if key not in states:
                states[key] = tuple(await self.init_fn(env, (np.array(key, np.int64),)))
            states[key] = tuple(await self.reduce_fn(env, (*states[key], *elem)))
        for state in states.values():
            yield pl._own(await self.finalize_fn(env, state))


def _dims(shape) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


class DenseToSparseBatch(pl._PassesFailed, pl.DatasetValue):
    """Batches of `n` dense elements as one SparseTensor of shape [batch, *row_shape]:
    every value of element i at [i, *its index]."""

    def __init__(self, input_value, n: int, row_shape):
        if n <= 0:
            raise _bad("Batch size must be greater than zero.")
        self.input, self.n = input_value, n
        self.row_shape = [int(d) for d in np.ravel(row_shape)]

    def _sparse(self, buf) -> tuple:
        rank = len(self.row_shape)
        idx, vals = [], []
        for i, (v,) in enumerate(buf):
            a = np.asarray(v)
            # TF's words and shapes as TF prints them: "[1,2]"
            shape, row = _dims(a.shape), _dims(self.row_shape)
            if a.ndim != rank:
                raise _bad(
                    f"Input element had shape ({shape}) that is incompatible with the "
                    f"row shape ({row})."
                )
            if any(d > r for d, r in zip(a.shape, self.row_shape) if r >= 0):
                raise errors.DataLossError(
                    None,
                    None,
                    f"Input element had shape ({shape}) that is larger than the row shape "
                    f"({row}).",
                )
            pos = np.indices(a.shape).reshape(rank, -1).T if a.size else np.zeros((0, rank))
            idx.append(np.column_stack([np.full(len(pos), i), pos]).astype(np.int64))
            vals.append(a.reshape(-1))
        shape = [len(buf), *self.row_shape]
        value = pl.SparseValue(np.concatenate(idx), np.concatenate(vals), shape)
        return (pl._handle_of(value),)

    def iterate(self, env):
        return self._pass(self.input.iterate(env))

    def _tolerant(self, env):
        return self._pass(pl._pass_of(self.input, env))

    async def _pass(self, source):
        buf: list = []
        async for elem in _closing(source):
            if type(elem) is pl.Failed:  # (as batch's: the batch so far is dropped)
                buf = []
                yield elem
                continue
            buf.append(elem)
            if len(buf) == self.n:
                yield self._sparse(buf)
                buf = []
        if buf:
            yield self._sparse(buf)

    def cardinality(self):
        n = cardinality(self.input)
        return n if n < 0 else -(-n // self.n)


async def _assert_card(ctx, ds, expected):
    return dso._handle(AssertCardinality(dso._ds(ds), int(expected)))


async def _random(ctx, seed, seed2, seed_generator=None):
    return dso._handle(
        RandomInts(int(seed), int(seed2), ctx.attrs.get("rerandomize_each_iteration", False))
    )


async def _dummy_seed_generator(ctx):
    # TF's placeholder resource for RandomDatasetV2: the seeds live in the dataset
    # value (RandomInts), one generator per iterator, as TF's.
    return dso._handle(None)


async def _group_by_reducer(ctx, ds, *captured):
    funcs = ("key_func", "init_func", "reduce_func", "finalize_func")
    parts = _split_captures(ctx, funcs, captured)
    return dso._handle(
        GroupByReducer(
            dso._ds(ds),
            *(_fn(ctx, p, c) for p, c in zip(("key", "init", "reduce", "finalize"), parts)),
        )
    )


async def _dense_to_sparse(ctx, ds, batch_size, row_shape):
    return dso._handle(DenseToSparseBatch(dso._ds(ds), int(batch_size), row_shape))


dso._register("AssertCardinalityDataset", [_IN, "cardinality: int64"], None, _assert_card)
dso._register("RandomDataset", ["seed: int64", "seed2: int64"], None, _random)
dso._register(
    "RandomDatasetV2",
    ["seed: int64", "seed2: int64", "seed_generator: resource"],
    {"rerandomize_each_iteration": False},
    _random,
)
register_op(
    "DummySeedGenerator",
    outputs=["handle: resource"],
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
).kernel("CPU")(_dummy_seed_generator)
NotDifferentiable("DummySeedGenerator")
_GBR_IN, _GBR_T = _captures_of("key_func", "init_func", "reduce_func", "finalize_func")
for _name in ("GroupByReducerDataset", "ExperimentalGroupByReducerDataset"):  # TF writes both
    dso._register(
        _name,
        [_IN, *_GBR_IN],
        {
            **_fn_attrs("key"),
            **_fn_attrs("init"),
            **_fn_attrs("reduce"),
            **_fn_attrs("finalize"),
            **_GBR_T,
        },
        _group_by_reducer,
    )
dso._register(
    "DenseToSparseBatchDataset",
    [_IN, "batch_size: int64", "row_shape: int64"],
    None,
    _dense_to_sparse,
)


# -- tables filled from a dataset ----------------------------------------------------------

InitializeTableFromDataset = register_op(
    "InitializeTableFromDataset",
    inputs=["table_handle: resource", "dataset: string"],
    shape_fn=lambda op: [],
    stateful=True,
    is_async=True,
)
NotDifferentiable("InitializeTableFromDataset")


@InitializeTableFromDataset.kernel("CPU")
async def _init_table_from_dataset(ctx, handle, ds):
    """Every (key, value) element of the dataset into the table (once: TF's static
    tables ignore a second initialization)."""
    from asyncflow.ops import lookup_ops

    table = lookup_ops._table(ctx, handle)
    if table.initialized:
        return None
    keys, values = [], []
    async for elem in _closing(dso._ds(ds).iterate(pl.Env(ctx.session))):
        if len(elem) != 2:
            raise _bad("The dataset of a table's initializer must have (key, value) elements.")
        keys.append(
            np.asarray(elem[0]).item() if np.asarray(elem[0]).dtype != object else elem[0][()]
        )
        values.append(
            np.asarray(elem[1]).item() if np.asarray(elem[1]).dtype != object else elem[1][()]
        )
    table.insert_unique(keys, values)
    table.initialized = True
    return None


# -- ChooseFastestBranchDataset ------------------------------------------------------------


class _Experiment(pl.DatasetValue):
    """The next elements of a shared input iterator, at most `cap` of them (None: all
    that are left), read as the branch reading it asks for them."""

    def __init__(self, source, cap):
        self.source, self.cap = source, cap

    async def iterate(self, env):
        taken = 0
        while self.cap is None or taken < self.cap:
            try:
                elem = await self.source.__anext__()
            except StopAsyncIteration:
                return
            taken += 1
            yield elem


class ChooseFastestBranch(pl.DatasetValue):
    """TF's ChooseFastestBranchDataset: equivalent `branches` (functions of a dataset
    returning a dataset) over one input read once.  Each branch in turn runs one
    experiment (up to `per_branch` outputs, over at most per_branch * numerator /
    denominator input elements: the ratio is input elements per output), then the
    fastest one runs over the rest of the input.  A branch ending its experiment short
    ends the dataset (TF's).  Equivalent branches give the same elements whichever wins.
    """

    def __init__(self, input_value, branches, numerator, denominator, per_branch):
        self.input, self.branches = input_value, branches
        self.numerator, self.denominator, self.per_branch = numerator, denominator, per_branch

    def cardinality(self):
        n = self.input.cardinality()
        return n if n < 0 else n * self.numerator // self.denominator

    async def _run(self, env, branch, source, cap, limit):
        """The branch's elements over the experiment's input (at most `limit`)."""
        (out,) = await branch(env, (dso._handle(_Experiment(source, cap)),))
        produced = 0
        stream = pl._dataset_of(out).iterate(env)
        try:
            while limit is None or produced < limit:
                try:
                    elem = await stream.__anext__()
                except StopAsyncIteration:
                    return
                produced += 1
                yield elem
        finally:
            await stream.aclose()

    async def iterate(self, env):
        source = self.input.iterate(env)
        cap = self.per_branch * self.numerator // self.denominator
        try:
            seconds = []
            for branch in self.branches:
                start, produced = time.perf_counter(), 0
                async for elem in _closing(self._run(env, branch, source, cap, self.per_branch)):
                    produced += 1
                    yield elem
                if produced < self.per_branch:
                    return
                seconds.append(time.perf_counter() - start)
            fastest = self.branches[seconds.index(min(seconds))]
            async for elem in _closing(self._run(env, fastest, source, None, None)):
                yield elem
        finally:
            await source.aclose()


async def _choose_fastest_branch(ctx, ds, numerator, denominator, *args):
    a = ctx.attrs
    numerator, denominator = int(numerator), int(denominator)
    if numerator <= 0:
        raise _bad("`ratio_numerator` must be greater than zero.")
    if denominator <= 0:
        raise _bad("`ratio_denominator` must be greater than zero.")
    lengths = [int(n) for n in a["other_arguments_lengths"]]
    if len(lengths) != len(a["branches_inputs"]):
        raise _bad("branches and other_arguments_lengths must have the same length.")
    per_branch = int(a["num_elements_per_branch"])
    if per_branch < 1:
        raise _bad("`num_elements_per_branch` must be at least 1.")
    get = ctx.op.graph.get_tensor_by_name
    key = ctx.kernel_state.setdefault("branches", object())
    branches, at = [], 0
    for i, n in enumerate(lengths):
        captures = [get(name) for name in a["branches_captures"][at : at + n]]
        branches.append(
            pl.Function((key, i), [get(a["branches_inputs"][i])],
                        [get(a["branches_outputs"][i])], captures, args[at : at + n])
        )  # fmt: skip
        at += n
    return dso._handle(ChooseFastestBranch(dso._ds(ds), branches, numerator, denominator,
                                           per_branch))  # fmt: skip


dso._register(
    "ChooseFastestBranchDataset",
    [_IN, "ratio_numerator: int64", "ratio_denominator: int64", "other_arguments: Targuments"],
    {
        "Targuments": dso._LIST,
        "num_elements_per_branch": 1,
        "other_arguments_lengths": [],
        # One traced function per branch: its dataset placeholder, its output dataset, and
        # its captures' placeholders (other_arguments_lengths of them each, in order).
        "branches_inputs": [],
        "branches_outputs": [],
        "branches_captures": [],
    },
    _choose_fastest_branch,
)


def branches_attrs(branches) -> dict:
    """ChooseFastestBranchDataset's attrs for `branches`: (dataset placeholder, output
    dataset, capture placeholders) per branch."""
    return {
        "branches_inputs": [b[0].name for b in branches],
        "branches_outputs": [b[1].name for b in branches],
        "branches_captures": [t.name for b in branches for t in b[2]],
        "other_arguments_lengths": [len(b[2]) for b in branches],
    }
