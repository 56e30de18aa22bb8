"""tfdbg's debug ops: DebugIdentity, DebugNanCount, DebugNumericSummary (v1, which dump
to `file://` URLs), DebugIdentityV2/V3, DebugNumericSummaryV2 and the gradient
identities.

A v1 debug op watches one tensor ("node:slot", its `tensor_name` attr) and, for each
`file://ROOT` in `debug_urls`, writes one Event proto (not TFRecord-framed) to
`ROOT/_tfdbg_device_<device>/<node>_<slot>_<op>_<microseconds>`, the layout TF's
`DebugDumpDir` reads: the summary value's tag is the node, its node_name
"node:slot:op", its tensor the op's output.  The session inserts these ops on the
edges `RunOptions.debug_options` watches (asyncflow/debug_watch.py).

Invariant: every dump's timestamp is unique and increasing in this process, so a dump
directory's file order is the order the values were computed in (DebugDumpDir checks
causality against it).
"""

from __future__ import annotations

import json
import os
import threading
import time

import aiofiles
import aiofiles.os
import numpy as np

from asyncflow import errors
from asyncflow.graph_io import tensor_content_proto
from asyncflow.kernel_api import current_step
from asyncflow.ops.math_helpers import to_host
from asyncflow.protos.event_pb2 import Event
from asyncflow.protos.types_pb2 import DataType
from asyncflow.registry import ANY, NotDifferentiable, TypeConstraint, register_op
from asyncflow.tensor_shape import TensorShape

__all__ = ["device_dir_name", "dump_timestamp_us", "numeric_summary_v2"]

_V1_ATTRS = {"T": ANY, "device_name": "", "tensor_name": "", "debug_urls": [], "gated_grpc": False}
_FLOATS = frozenset(["float16", "bfloat16", "float32", "float64"])
_INTS = frozenset(["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])


def _same(op):
    return [op.inputs[0].shape]


def _unknown(op):
    return [TensorShape(None)]


def _one(op):
    # (TF's shape function says scalar, but its kernel writes a [1] vector: the runtime
    # checks values against static shapes, so here both are [1].)
    return [TensorShape([1])]


DebugIdentity = register_op(
    "DebugIdentity", inputs=["input: T"], outputs=["output: T"], attrs=dict(_V1_ATTRS),
    shape_fn=_same,
)  # fmt: skip
DebugNanCount = register_op(
    "DebugNanCount", inputs=["input: T"], outputs=["output: int64"], attrs=dict(_V1_ATTRS),
    shape_fn=_one,
)  # fmt: skip
DebugNumericSummary = register_op(
    "DebugNumericSummary",
    inputs=["input: T"],
    outputs=["output: float64"],
    attrs={
        **_V1_ATTRS,
        "lower_bound": float("-inf"),
        "upper_bound": float("inf"),
        "mute_if_healthy": False,
    },  # fmt: skip
    shape_fn=_unknown,
)
DebugIdentityV3 = register_op(
    "DebugIdentityV3",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={**_V1_ATTRS, "io_of_node": "", "is_input": False, "io_index": -1},
    shape_fn=_same,
    stateful=True,
)
DebugIdentityV2 = register_op(
    "DebugIdentityV2",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs={
        "T": ANY,
        "tfdbg_context_id": "",
        "op_name": "",
        "output_slot": -1,
        "tensor_debug_mode": -1,
        "debug_urls": [],
        "circular_buffer_size": 1000,
        "tfdbg_run_id": "",
    },  # fmt: skip
    shape_fn=_same,
    stateful=True,
)
DebugNumericSummaryV2 = register_op(
    "DebugNumericSummaryV2",
    inputs=["input: T"],
    outputs=["output: output_dtype"],
    attrs={
        "output_dtype": TypeConstraint(["float32", "float64"], default="float32"),
        "T": ANY,
        "tensor_debug_mode": -1,
        "tensor_id": -1,
    },  # fmt: skip
    shape_fn=_unknown,
)
DebugGradientIdentity = register_op(
    "DebugGradientIdentity", inputs=["input: T"], outputs=["output: T"], attrs={"T": ANY},
    shape_fn=_same,
)  # fmt: skip
DebugGradientRefIdentity = register_op(
    "DebugGradientRefIdentity", inputs=["input: Ref(T)"], outputs=["output: Ref(T)"],
    attrs={"T": ANY}, shape_fn=_same,
)  # fmt: skip

# (DebugIdentity, DebugNumericSummary(V2) and DebugIdentityV3 have no gradient in TF:
# tf.gradients raises LookupError through them; DebugNanCount's output is an integer.)
NotDifferentiable("DebugNanCount")


@DebugIdentityV2.gradient
@DebugGradientIdentity.gradient
@DebugGradientRefIdentity.gradient
def _pass_through_grad(op, grad):
    return [grad]


# -- dumping -------------------------------------------------------------------------------

_clock_lock = threading.Lock()
_last_us = 0


def dump_timestamp_us() -> int:
    """Wall-clock microseconds, strictly increasing across calls in this process (two
    dumps in one microsecond would otherwise share a file-name timestamp)."""
    global _last_us
    with _clock_lock:
        now = time.time_ns() // 1000
        _last_us = now if now > _last_us else _last_us + 1
        return _last_us


def device_dir_name(device_name: str) -> str:
    """TF's directory for a device's dumps: "/job:a/task:0/device:CPU:0" ->
    "_tfdbg_device_,job_a,task_0,device_CPU_0"."""
    return "_tfdbg_device_" + ",".join(device_name.replace(":", "_").split("/"))


def _parse_tensor_name(op_type: str, tensor_name: str) -> tuple[str, int]:
    node, colon, slot = tensor_name.rpartition(":")
    if not colon:
        node, slot = tensor_name, "0"
    if not tensor_name or not slot.isdigit() or ":" in node:
        raise errors.InvalidArgumentError(
            None, None, f'{op_type}: Failed to parse tensor name: "{tensor_name}"'
        )
    return node, int(slot)


def _file_roots(op_type: str, urls) -> list[str]:
    roots = []
    for url in urls:
        url = url.decode() if isinstance(url, bytes) else str(url)
        if not url.startswith("file://"):
            raise errors.UnimplementedError(
                None, None, f"{op_type}: unsupported debug URL scheme in {url!r} (file:// only)"
            )
        roots.append(url[len("file://") :])
    return roots


async def _dump_v1(ctx, op_type: str, value) -> None:
    """Write `value` as this watch's Event file under each file:// root (a
    DebugIdentityV3 naming `io_of_node` writes TF's node-io layout instead:
    "node-io-dump/step-<step id>/<node>:<in|out>:<index>_<us>")."""
    attrs = ctx.attrs
    roots = _file_roots(op_type, attrs["debug_urls"])
    node, slot = _parse_tensor_name(op_type, attrs["tensor_name"])
    if not roots:
        return
    device = attrs.get("device_name") or ""  # (TF's: "" dumps under "_tfdbg_device_")
    ts = dump_timestamp_us()
    event = Event(wall_time=ts)
    v = event.summary.value.add()
    v.tag = node
    v.node_name = f"{node}:{slot}:{op_type}"
    tensor_content_proto(value, v.tensor)
    v.metadata.plugin_data.plugin_name = "debugger"
    v.metadata.plugin_data.content = json.dumps(
        {"device": device, "outputSlot": slot, "numChunks": 1, "chunkIndex": 0},
        separators=(",", ":"),
    ).encode()
    data = event.SerializeToString()
    io_of = attrs.get("io_of_node")
    if io_of:
        where = "in" if attrs["is_input"] else "out"
        step = current_step()
        dirs = ["node-io-dump", f"step-{step.step_id if step is not None else 0}"]
        base = f"{io_of}:{where}:{attrs['io_index']}_{ts}"
    else:
        *scopes, last = node.split("/")
        dirs = [device_dir_name(device), *scopes]
        base = f"{last}_{slot}_{op_type}_{ts}"
    for root in roots:
        directory = os.path.join(root, *dirs)
        path = os.path.join(directory, base)
        try:
            await aiofiles.os.makedirs(directory, exist_ok=True)
            async with aiofiles.open(path, "wb") as f:
                await f.write(data)
        except OSError as e:
            raise errors.InternalError(
                None, None, f"{op_type}: failed to write debug dump {path}: {e}"
            ) from None


def _no_kernel(ctx, op_type: str):
    dt = ctx.attrs["T"]
    return errors.InvalidArgumentError(
        None,
        None,
        f"No OpKernel was registered to support Op '{op_type}' used by "
        f"{{{{node {ctx.node_name}}}}} with these attrs: [T={DataType.Name(dt.as_datatype_enum)}]",
    )


@DebugIdentity.kernel()
async def _debug_identity(ctx, x):
    _parse_tensor_name("DebugIdentity", ctx.attrs["tensor_name"])
    if ctx.attrs["debug_urls"]:
        await _dump_v1(ctx, "DebugIdentity", to_host(ctx.xp, x))
    return x


@DebugIdentityV3.kernel()
async def _debug_identity_v3(ctx, x):
    _parse_tensor_name("DebugIdentityV3", ctx.attrs["tensor_name"])
    if ctx.attrs["debug_urls"]:
        await _dump_v1(ctx, "DebugIdentityV3", to_host(ctx.xp, x))
    return x


@DebugNanCount.kernel()
async def _debug_nan_count(ctx, x):
    name = ctx.attrs["T"].name
    if name not in _FLOATS and name not in _INTS:
        raise _no_kernel(ctx, "DebugNanCount")
    _parse_tensor_name("DebugNanCount", ctx.attrs["tensor_name"])
    x = to_host(ctx.xp, x)
    count = np.array([np.count_nonzero(np.isnan(x)) if name in _FLOATS else 0], np.int64)
    if ctx.attrs["debug_urls"]:
        await _dump_v1(ctx, "DebugNanCount", count)
    return ctx.xp.asarray(count)


def numeric_summary_v1(x: np.ndarray, dtype, lower: float, upper: float) -> np.ndarray:
    """TF's DebugNumericSummary: [initialized, count, NaN, -inf, negative, zero,
    positive, +inf, min, max, mean, variance, dtype enum, rank, *shape]; values at or
    beyond a bound count as that infinity; min/max/mean/variance are of the finite
    values (inf, -inf, NaN, NaN when there is none)."""
    v = np.asarray(x, np.float64).reshape(-1)
    nan = np.isnan(v)
    finite = v[np.isfinite(v)]
    low = np.count_nonzero(v == -np.inf) + np.count_nonzero(finite <= lower)
    high = np.count_nonzero(v == np.inf) + np.count_nonzero(finite >= upper)
    inner = finite[(finite > lower) & (finite < upper)]
    if finite.size:
        stats = [finite.min(), finite.max(), finite.mean(), finite.var()]
    else:
        stats = [np.inf, -np.inf, np.nan, np.nan]
    with np.errstate(over="ignore", invalid="ignore"):
        head = [1.0, v.size, np.count_nonzero(nan), low, np.count_nonzero(inner < 0)]
        head += [np.count_nonzero(inner == 0), np.count_nonzero(inner > 0), high]
    tail = [dtype.as_datatype_enum, np.ndim(x), *np.shape(x)]
    return np.array(head + stats + tail, np.float64)


@DebugNumericSummary.kernel()
async def _debug_numeric_summary(ctx, x):
    attrs = ctx.attrs
    dt = attrs["T"]
    if dt.name not in _INTS and dt.name not in ("float32", "float64", "bool"):
        raise _no_kernel(ctx, "DebugNumericSummary")
    _parse_tensor_name("DebugNumericSummary", attrs["tensor_name"])
    with np.errstate(over="ignore", invalid="ignore"):
        out = numeric_summary_v1(
            to_host(ctx.xp, x), dt, float(attrs["lower_bound"]), float(attrs["upper_bound"])
        )
    healthy = not (out[2] or out[3] or out[7])
    if attrs["debug_urls"] and not (attrs["mute_if_healthy"] and healthy):
        await _dump_v1(ctx, "DebugNumericSummary", out)
    return ctx.xp.asarray(out)  # (on the device the op runs on)


# -- tfdbg2's summaries --------------------------------------------------------------------

# TensorDebugMode (debug_event.proto) values DebugNumericSummaryV2 computes.
CURT_HEALTH, CONCISE_HEALTH, FULL_HEALTH, SHAPE, REDUCE_INF_NAN_THREE_SLOTS = 2, 3, 4, 5, 8


def numeric_summary_v2(x: np.ndarray, dtype, mode: int, tensor_id: float) -> list[float]:
    """DebugNumericSummaryV2's values for `mode` (a TensorDebugMode number).

    Raises UnimplementedError for a mode it has no summary for."""
    v = np.asarray(x).reshape(-1)
    floating = v.dtype.kind == "f" or dtype.name == "bfloat16"
    if floating:
        v = v.astype(np.float64)
        nan = int(np.count_nonzero(np.isnan(v)))
        ninf, pinf = int(np.count_nonzero(v == -np.inf)), int(np.count_nonzero(v == np.inf))
    else:
        v = v.astype(np.float64)
        nan = ninf = pinf = 0
    if mode == CURT_HEALTH:
        return [tensor_id, 1.0 if nan or ninf or pinf else 0.0]
    if mode == CONCISE_HEALTH:
        return [tensor_id, v.size, ninf, pinf, nan]
    shape = list(np.shape(x))
    if mode == FULL_HEALTH:
        neg, zero = np.count_nonzero(v < -0.0), np.count_nonzero(v == 0)
        pos = np.count_nonzero((v > 0) & (v != np.inf))
        neg -= ninf
        return [tensor_id, -1.0, dtype.as_datatype_enum, len(shape), v.size]  + [
            ninf, pinf, nan, neg, zero, pos
        ]  # fmt: skip
    if mode == SHAPE:
        dims = (shape[-6:] + [0] * 6)[:6]
        return [tensor_id, dtype.as_datatype_enum, len(shape), v.size, *dims]
    if mode == REDUCE_INF_NAN_THREE_SLOTS:
        return [-np.inf if ninf else 0.0, np.inf if pinf else 0.0, np.nan if nan else 0.0]
    raise errors.UnimplementedError(None, None, f"Unimplemented tensor debug mode: {mode}")


@DebugNumericSummaryV2.kernel()
async def _debug_numeric_summary_v2(ctx, x):
    attrs = ctx.attrs
    dt, out_dt = attrs["T"], attrs["output_dtype"]
    if dt.name not in _FLOATS and dt.name not in _INTS and dt.name != "bool":
        raise _no_kernel(ctx, "DebugNumericSummaryV2")
    values = numeric_summary_v2(
        to_host(ctx.xp, x), dt, int(attrs["tensor_debug_mode"]), float(attrs["tensor_id"])
    )
    return ctx.xp.asarray(np.array(values, out_dt.as_numpy_dtype))


@DebugIdentityV2.kernel()
async def _debug_identity_v2(ctx, x):
    writer = _V2_WRITER[0]
    if writer is not None and ctx.attrs["debug_urls"]:
        await writer(ctx, to_host(ctx.xp, x))
    return x


# The tfdbg2 dump writer (asyncflow/debug_events.py installs it when it loads): kept
# here as a hook so the op needs no import of the writer's layer.
_V2_WRITER: list = [None]


async def _forward(ctx, x):
    return x


DebugGradientIdentity.kernel()(_forward)
DebugGradientRefIdentity.kernel()(_forward)
