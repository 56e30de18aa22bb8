"""Summary-writer ops: TF 2's raw ops that write event files from inside a graph
(SummaryWriter, CreateSummaryFileWriter, Write*Summary, ImportEvent, Flush/Close), and
the legacy v1 `TensorSummary` op.

A `SummaryWriter` op only names a writer resource (its container and shared_name; an
empty shared_name is a name too, shared by every such op, as in TF); the writer itself
is made by `CreateSummaryFileWriter` (or found, when one of that name exists: the
existing writer and its file are kept) and removed by `CloseSummaryWriter`.  Using a
name with no writer is TF's NotFoundError.

Writes never block a step: each Write* kernel serializes its Event and hands the bytes
to the resource's asynchronous event-file writer (`asyncflow.summary.EventFileWriter`),
whose task on the session's loop appends them to the file when `max_queue` events wait,
every `flush_millis`, on FlushSummaryWriter and on CloseSummaryWriter (those two await
the write).  The writer class lives in a higher layer (the summary package, which reads
sessions); it hands itself to this module when imported (`use_event_file_writer`).

The file is TF's: `events.out.tfevents.<seconds>.<host>.<pid>.<n><suffix>` (n counts the
process's writers; a suffix not starting with "." gets one), a first event with
`source_metadata.writer`, then one Event per write with its step and wall time.

`CreateSummaryDbWriter` is registered with TF's signature; TF 2.21's kernel opens an
SQLite file through its own `Sqlite::Open` and writes TensorBoard's database schema,
which asyncflow does not implement: it raises UnimplementedError naming the op.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.graph_io import tensor_content_proto
from asyncflow.ops.summary_ops import (
    _FLOATS,
    _INTS,
    _serialized,
    add_audio_values,
    add_image_values,
    histogram_proto,
)
from asyncflow.protos import Event, GraphDef, Summary
from asyncflow.registry import ANY, NotDifferentiable, TypeConstraint, register_op

__all__ = ["use_event_file_writer"]

_SOURCE = "tensorflow.core.util.events_writer"  # TF's first-event source_metadata.writer
# TF's C++ type name of the resource, as its NotFound messages spell it.
_RESOURCE_TYPE = "N10tensorflow22SummaryWriterInterfaceE"

_event_file_writer = None  # the EventFileWriter class (see the module note)
_writer_ids = itertools.count()


def use_event_file_writer(cls) -> None:
    """Called by `asyncflow.summary.writer` with its EventFileWriter class."""
    global _event_file_writer
    _event_file_writer = cls


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _scalar_value(x, what: str):
    a = np.asarray(x)
    if a.size != 1:
        raise _invalid(f"{what} must be a scalar; got shape {list(a.shape)}")
    v = a.reshape(-1)[0]
    return v[()] if isinstance(v, np.ndarray) else v


def _bytes(x, what: str) -> bytes:
    v = _scalar_value(x, what)
    return v if isinstance(v, bytes) else str(v).encode()


def _text(x, what: str) -> str:
    return _bytes(x, what).decode("utf-8", "replace")


# -- the writer resource ----------------------------------------------------------------------


class _WriterName:
    """What a SummaryWriter handle holds: where its writer is (or will be) kept."""

    __slots__ = ("mgr", "container", "name")

    def __init__(self, mgr, container: str, name: str):
        self.mgr, self.container, self.name = mgr, container, name

    def _missing(self, with_resource: bool) -> errors.NotFoundError:
        shown = self.container or "localhost"  # (TF's default container's name)
        if self.container not in self.mgr.containers():
            msg = f"Container {shown} does not exist."
            if with_resource:
                msg += f" (Could not find resource: {shown}/{self.name})"
        else:
            msg = f"Resource {shown}/{self.name}/{_RESOURCE_TYPE} does not exist."
        return errors.NotFoundError(None, None, msg)

    def writer(self, with_resource: bool = True) -> _SummaryFileWriter:
        w = self.mgr.get(self.container, self.name)
        if not isinstance(w, _SummaryFileWriter):
            raise self._missing(with_resource)
        return w


class _SummaryFileWriter:
    """A writer resource: one event file, written by the async EventFileWriter."""

    def __init__(self, logdir: str, max_queue: int, flush_millis: int, suffix: str):
        if _event_file_writer is None:  # (asyncflow.summary not imported)
            raise errors.UnimplementedError(
                None, None, "Summary file writers need asyncflow.summary to be imported"
            )
        if suffix and not suffix.startswith("."):
            suffix = "." + suffix
        elif not suffix:
            suffix = "."
        queue, secs = max_queue, flush_millis / 1000.0
        if flush_millis <= 0:  # TF then writes at every event; no timer that spins
            queue, secs = 1, 120.0
        self.events = _event_file_writer(
            logdir,
            max_queue=queue,
            flush_secs=secs,
            filename_suffix=f".{os.getpid()}.{next(_writer_ids)}{suffix}",
            source=_SOURCE,
        )

    def write(self, event: Event, step=None) -> None:
        if step is not None:
            event.step = int(step)
        if not event.wall_time:
            event.wall_time = time.time()
        self.events.add_event_bytes(event.SerializeToString())

    def write_summary(self, summary: Summary, step) -> None:
        event = Event()
        event.summary.CopyFrom(summary)
        self.write(event, step)


def _name_of(handle) -> _WriterName:
    h = handle[()] if isinstance(handle, np.ndarray) and handle.shape == () else handle
    if not isinstance(h, _WriterName):
        raise _invalid(f"Expected a SummaryWriter handle, got {type(h).__name__}")
    return h


def _writer(handle) -> _SummaryFileWriter:
    return _name_of(handle).writer()


def _step(step) -> int:
    return int(_scalar_value(step, "step"))


# -- the ops ----------------------------------------------------------------------------------

_NO_OUTPUT = lambda op: []  # noqa: E731
_SCALAR = lambda op: [tensor_shape.TensorShape([])]  # noqa: E731
_HEAD = ["writer: resource", "step: int64"]


def _writer_op(name: str, inputs: list, attrs=None, is_async: bool = False):
    # (No gradient registered, not even a NotDifferentiable mark: as TF 2.21.)
    return register_op(
        name, inputs=inputs, attrs=attrs, shape_fn=_NO_OUTPUT, stateful=True, is_async=is_async
    )


SummaryWriter = register_op(
    "SummaryWriter",
    outputs=["writer: resource"],
    attrs={"shared_name": "", "container": ""},
    shape_fn=_SCALAR,
    stateful=True,
)


@SummaryWriter.kernel("CPU")
async def _summary_writer(ctx):
    container = ctx.attrs["container"]
    out = np.empty((), dtype=object)
    # (shared_name as given, "" included: TF's ResourceHandleOp names it so)
    out[()] = _WriterName(ctx.resource_mgr(container), container, ctx.attrs["shared_name"])
    return out


CreateSummaryFileWriter = _writer_op(
    "CreateSummaryFileWriter",
    [
        "writer: resource",
        "logdir: string",
        "max_queue: int32",
        "flush_millis: int32",
        "filename_suffix: string",
    ],
    is_async=True,
)


@CreateSummaryFileWriter.kernel("CPU")
async def _create_summary_file_writer(ctx, writer, logdir, max_queue, flush_millis, suffix):
    name = _name_of(writer)
    args = (
        _text(logdir, "logdir"),
        int(_scalar_value(max_queue, "max_queue")),
        int(_scalar_value(flush_millis, "flush_millis")),
        _text(suffix, "filename_suffix"),
    )
    if name.mgr.get(name.container, name.name) is None:  # (the directory, off the loop)
        await asyncio.to_thread(os.makedirs, args[0], exist_ok=True)
    made = []

    def make() -> _SummaryFileWriter:
        made.append(_SummaryFileWriter(*args))
        return made[0]

    name.mgr.lookup_or_create(name.container, name.name, make)
    hooks = getattr(ctx.session, "_close_hooks", None)
    if made and not name.container and hooks is not None:
        # The session's own container goes with the session: as TF's writer, destroyed
        # with it, the file gets what is pending when the session closes.
        hooks.append(made[0].events.close)


CreateSummaryDbWriter = _writer_op(
    "CreateSummaryDbWriter",
    [
        "writer: resource",
        "db_uri: string",
        "experiment_name: string",
        "run_name: string",
        "user_name: string",
    ],
)


@CreateSummaryDbWriter.kernel("CPU")
async def _create_summary_db_writer(ctx, writer, db_uri, experiment, run, user):
    raise errors.UnimplementedError(
        None,
        None,
        "CreateSummaryDbWriter: TensorBoard's SQLite summary database is not implemented "
        f"in asyncflow (db_uri {_text(db_uri, 'db_uri')!r}); use CreateSummaryFileWriter",
    )


WriteSummary = _writer_op(
    "WriteSummary",
    [*_HEAD, "tensor: T", "tag: string", "summary_metadata: string"],
    attrs={"T": ANY},
)


@WriteSummary.kernel("CPU")
async def _write_summary(ctx, writer, step, tensor, tag, summary_metadata):
    w = _writer(writer)
    summary = Summary()
    value = summary.value.add(tag=_text(tag, "tag"))
    tensor_content_proto(tensor, value.tensor)
    meta = _bytes(summary_metadata, "summary_metadata")
    if meta:  # (set even when it does not parse, then empty: as TF's kernel)
        value.metadata.SetInParent()
        try:
            value.metadata.ParseFromString(meta)
        except Exception:  # noqa: BLE001 - a DecodeError; TF ignores the failure
            value.metadata.Clear()
    w.write_summary(summary, _step(step))


WriteScalarSummary = _writer_op(
    "WriteScalarSummary",
    [*_HEAD, "tag: string", "value: T"],
    attrs={"T": TypeConstraint(_FLOATS + _INTS)},
)


@WriteScalarSummary.kernel("CPU")
async def _write_scalar_summary(ctx, writer, step, tag, value):
    w = _writer(writer)
    summary = Summary()
    summary.value.add(tag=_text(tag, "tag"), simple_value=float(_scalar_value(value, "value")))
    w.write_summary(summary, _step(step))


WriteHistogramSummary = _writer_op(
    "WriteHistogramSummary",
    [*_HEAD, "tag: string", "values: T"],
    attrs={"T": TypeConstraint((*_FLOATS, *_INTS, "bool"), default="float32")},
)


@WriteHistogramSummary.kernel("CPU")
async def _write_histogram_summary(ctx, writer, step, tag, values):
    w = _writer(writer)
    name = _text(tag, "tag")
    values = np.asarray(values)
    if values.dtype == np.bool_:
        values = values.astype(np.float64)
    histo = await ctx.device.compute(histogram_proto, values, name)
    summary = Summary()
    summary.value.add(tag=name).histo.CopyFrom(histo)
    w.write_summary(summary, _step(step))


WriteImageSummary = _writer_op(
    "WriteImageSummary",
    [*_HEAD, "tag: string", "tensor: T", "bad_color: uint8"],
    attrs={
        "max_images": 3,
        "T": TypeConstraint(("uint8", "float32", "float64", "float16"), default="float32"),
    },
)


@WriteImageSummary.kernel("CPU")
async def _write_image_summary(ctx, writer, step, tag, tensor, bad_color):
    w = _writer(writer)
    t = np.asarray(tensor)
    if t.ndim != 4 or t.shape[-1] not in (1, 3, 4):
        raise _invalid(
            f"Tensor must be 4-D with last dim 1, 3, or 4, not [{','.join(map(str, t.shape))}]"
        )
    color = np.asarray(bad_color, np.uint8).reshape(-1)
    if color.size < t.shape[-1]:
        raise _invalid(
            f"expected depth <= bad_color.size, got depth = {t.shape[-1]}, "
            f"bad_color.size = {color.size}"
        )
    summary = Summary()
    add_image_values(summary, _text(tag, "tag"), t, ctx.attrs["max_images"], color)
    w.write_summary(summary, _step(step))


WriteAudioSummary = _writer_op(
    "WriteAudioSummary",
    [*_HEAD, "tag: string", "tensor: float", "sample_rate: float"],
    attrs={"max_outputs": 3},
)


@WriteAudioSummary.kernel("CPU")
async def _write_audio_summary(ctx, writer, step, tag, tensor, sample_rate):
    w = _writer(writer)
    t = np.asarray(tensor, np.float32)
    if t.ndim not in (2, 3):  # (TF 2.21 aborts the process on other ranks)
        raise _invalid(f"Tensor must be 3-D or 2-D, got: [{','.join(map(str, t.shape))}]")
    rate = float(_scalar_value(sample_rate, "sample_rate"))
    if rate <= 0:
        raise _invalid("sample_rate must be > 0")
    summary = Summary()
    add_audio_values(summary, _text(tag, "tag"), t, rate, ctx.attrs["max_outputs"])
    w.write_summary(summary, _step(step))


WriteGraphSummary = _writer_op("WriteGraphSummary", [*_HEAD, "tensor: string"])


@WriteGraphSummary.kernel("CPU")
async def _write_graph_summary(ctx, writer, step, tensor):
    w = _writer(writer)
    raw = _bytes(tensor, "tensor")
    graph_def = GraphDef()
    try:
        graph_def.ParseFromString(raw)
    except Exception as exc:  # noqa: BLE001 - a DecodeError
        msg = "Bad tf.GraphDef binary proto tensor string"
        raise errors.DataLossError(None, None, msg) from exc
    w.write(Event(graph_def=graph_def.SerializeToString()), _step(step))


WriteRawProtoSummary = _writer_op("WriteRawProtoSummary", [*_HEAD, "tensor: string"])


@WriteRawProtoSummary.kernel("CPU")
async def _write_raw_proto_summary(ctx, writer, step, tensor):
    w = _writer(writer)
    summary = Summary()
    for i, item in enumerate(np.asarray(tensor, dtype=object).reshape(-1)):
        one = Summary()
        try:
            one.ParseFromString(item if isinstance(item, bytes) else str(item).encode())
        except Exception as exc:  # noqa: BLE001 - a DecodeError
            raise errors.DataLossError(
                None, None, f"Bad tf.compat.v1.Summary binary proto tensor string at index {i}"
            ) from exc
        summary.MergeFrom(one)
    w.write_summary(summary, _step(step))


ImportEvent = _writer_op("ImportEvent", ["writer: resource", "event: string"])


@ImportEvent.kernel("CPU")
async def _import_event(ctx, writer, event):
    w = _writer(writer)
    e = Event()
    try:
        e.ParseFromString(_bytes(event, "event"))
    except Exception as exc:  # noqa: BLE001 - a DecodeError
        raise errors.DataLossError(None, None, "Bad tf.Event binary proto tensor string") from exc
    w.events.add_event_bytes(e.SerializeToString())  # (its own step and wall time)


FlushSummaryWriter = _writer_op("FlushSummaryWriter", ["writer: resource"], is_async=True)


@FlushSummaryWriter.kernel("CPU")
async def _flush_summary_writer(ctx, writer):
    await _writer(writer).events.aflush()


CloseSummaryWriter = _writer_op("CloseSummaryWriter", ["writer: resource"], is_async=True)


@CloseSummaryWriter.kernel("CPU")
async def _close_summary_writer(ctx, writer):
    name = _name_of(writer)
    w = name.writer(with_resource=False)
    name.mgr.delete(name.container, name.name)  # (a later Create makes a new file)
    await w.events.aclose()


# -- TensorSummary (v1) -------------------------------------------------------------------

TensorSummary = register_op(
    "TensorSummary",
    inputs=["tensor: T"],
    outputs=["summary: string"],
    attrs={"T": ANY, "description": "", "labels": [], "display_name": ""},
    shape_fn=_SCALAR,
)
NotDifferentiable("TensorSummary")


@TensorSummary.kernel("CPU")
async def _tensor_summary(ctx, tensor):
    # TF 2.21's kernel writes the op's name as node_name, no tag and no metadata: the
    # description, labels and display_name attrs stay in the graph only.
    summary = Summary()
    value = summary.value.add(node_name=ctx.op.name)
    tensor_content_proto(tensor, value.tensor)
    return _serialized(summary)
