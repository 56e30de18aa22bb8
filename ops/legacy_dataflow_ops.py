"""TF1's ref-typed data-flow ops, the op types old GraphDefs and MetaGraphs hold.

Before resource handles, TF's queues, readers, lookup tables, accumulators and tensor
arrays handed out their state as a `Ref(string)` tensor (FIFOQueue, QueueDequeue,
TFRecordReader, ReaderRead, HashTable, LookupTableFind, ...).  Each op here is
registered with TF 2.21's OpDef and runs the kernel, shape function and gradient of
the op that replaced it (FIFOQueueV2, QueueDequeueV2, ...), through `legacy_ops._alias`.

Invariant: a ref handle travels as a `_RefHandle` wrapping the newer op's 0-d handle.
Ref consumers unwrap it (`_unwrap`); a consumer declared with a plain handle input
(AccumulatorNumAccumulated, as asyncflow registers it) dereferences it, which the
runtime does by calling `read()`.  TF's ref handle is a 2-vector of strings
(container, name), hence the [2] shape of the creators' outputs.

TensorArray and TensorArrayV2's families were removed from the GraphDef format at
versions 16 and 26: TF 2.21 refuses to build them and runs them only from a GraphDef
older than that (`legacy_ops._removed_in` does the same here).
"""

from __future__ import annotations

import numpy as np

from asyncflow import tensor_shape
from asyncflow.ops import (  # noqa: F401 - they register the ops spelled here
    accumulator_ops,
    lookup_ops,
    queue_ops,
    reader_ops,
    tensor_array_ops,
)
from asyncflow.ops.legacy_ops import _alias, _removed_in
from asyncflow.registry import NotDifferentiable, TypeConstraint, get_op_def, register_op

__all__: list[str] = []


class _RefHandle:
    """A ref-typed handle: the newer op's handle, read through when dereferenced."""

    __slots__ = ("handle",)

    def __init__(self, handle):
        self.handle = handle

    def read(self):
        return self.handle


def _unwrap(x):
    return x.handle if isinstance(x, _RefHandle) else x


def _wrap_kernels(op_def, creator: bool, pick=None) -> None:
    """Unwrap ref handles given to `op_def`'s kernels; a creator wraps its handle (the
    first of the outputs `pick` keeps, when the newer op has more)."""
    for key, kd in list(op_def.kernel_defs.items()):

        async def kernel(ctx, *args, _fn=kd.fn):
            out = await _fn(ctx, *[_unwrap(a) for a in args])
            if pick is not None:
                out = pick(out)
            if creator:
                if isinstance(out, tuple):
                    return (_RefHandle(out[0]), *out[1:])
                return _RefHandle(out)
            return out

        kernel.__name__ = kd.fn.__name__
        op_def.kernel_defs[key] = type(kd)(kernel, kd.device_type, kd.host_memory)


_VEC2 = tensor_shape.TensorShape([2])
_SCALAR = tensor_shape.TensorShape([])


def _ref_spec(arg) -> str:
    typ = arg.type_attr or arg.fixed_dtype.name
    if arg.is_ref or typ in ("string", "resource"):
        typ = f"Ref({'string' if typ == 'resource' else typ})"
    return f"{arg.name}: {typ}"


def _creator(name, base, *, outputs=None, pick=None, shape_fn=None, **kw):
    """`name` makes a ref handle where `base` makes a resource handle."""
    op_def = _alias(name, base, outputs=outputs or ["handle: Ref(string)"], **kw)
    base_shape = op_def.shape_fn
    op_def.shape_fn = shape_fn or (lambda op: [_VEC2, *base_shape(op)[1:]])
    _wrap_kernels(op_def, creator=True, pick=pick)
    return op_def


def _consumer(name, base, *, ref_args=1, **kw):
    """`name` takes `base`'s inputs with its first `ref_args` handles as refs."""
    b = get_op_def(base)
    specs = []
    for k, a in enumerate(b.inputs):
        spec = _ref_spec(a) if k < ref_args else None
        if spec is None:
            typ = a.type_attr or a.fixed_dtype.name
            spec = f"{a.name}: {a.number_attr} * {typ}" if a.number_attr else f"{a.name}: {typ}"
        specs.append(spec)
    op_def = _alias(name, base, inputs=kw.pop("inputs", specs), **kw)
    _wrap_kernels(op_def, creator=False)
    return op_def


def _rename_outputs(b_name, names):
    b = get_op_def(b_name)
    return [f"{n}: {a.type_attr or a.fixed_dtype.name}" for n, a in zip(names, b.outputs)]


# -- queues ---------------------------------------------------------------------------

for _v1 in ("FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue"):
    _creator(_v1, _v1 + "V2")
for _v1 in (
    "QueueEnqueue",
    "QueueEnqueueMany",
    "QueueDequeue",
    "QueueDequeueMany",
    "QueueDequeueUpTo",
    "QueueClose",
    "QueueIsClosed",
    "QueueSize",
):
    _consumer(_v1, _v1 + "V2")

# -- readers --------------------------------------------------------------------------

for _v1 in (
    "TFRecordReader",
    "TextLineReader",
    "WholeFileReader",
    "FixedLengthRecordReader",
    "IdentityReader",
):
    _d = _creator(_v1, _v1 + "V2", outputs=["reader_handle: Ref(string)"])
    if _v1 != "WholeFileReader":  # (TF never deprecated it)
        _removed_in(_d, 26, f"Use {_v1}V2")
_consumer("ReaderRead", "ReaderReadV2", ref_args=2)
_consumer("ReaderReadUpTo", "ReaderReadUpToV2", ref_args=2)
for _v1 in (
    "ReaderReset",
    "ReaderNumRecordsProduced",
    "ReaderNumWorkUnitsCompleted",
    "ReaderSerializeState",
    "ReaderRestoreState",
):
    _consumer(_v1, _v1 + "V2")

# -- lookup tables --------------------------------------------------------------------

for _v1 in ("HashTable", "MutableHashTable", "MutableHashTableOfTensors"):
    _creator(_v1, _v1 + "V2", outputs=["table_handle: Ref(string)"])
for _v1 in (
    "InitializeTable",
    "InitializeTableFromTextFile",
    "LookupTableFind",
    "LookupTableInsert",
    "LookupTableSize",
    "LookupTableExport",
    "LookupTableImport",
):
    _consumer(_v1, _v1 + "V2")

# -- accumulators ---------------------------------------------------------------------

_ACC_TYPES = TypeConstraint(
    [
        "float32",
        "float64",
        "int32",
        "uint8",
        "int16",
        "int8",
        "complex64",
        "int64",
        "qint8",
        "quint8",
        "qint32",
        "bfloat16",
        "qint16",
        "quint16",
        "uint16",
        "complex128",
        "float16",
        "uint32",
        "uint64",
    ]
)
_creator("ConditionalAccumulator", "ResourceConditionalAccumulator", attrs={"dtype": _ACC_TYPES})
_consumer(
    "AccumulatorApplyGradient", "ResourceAccumulatorApplyGradient", attrs={"dtype": _ACC_TYPES}
)
_consumer(
    "AccumulatorTakeGradient", "ResourceAccumulatorTakeGradient", attrs={"dtype": _ACC_TYPES}
)

# -- tensor arrays --------------------------------------------------------------------


def _first(out):
    return out[0]


_TA_FIXED = {"identical_element_shapes": False}
_TA_DIFFERENTIABLE = ("Read", "Write", "Gather", "Scatter", "Concat", "Split")
_TA_PARTS = ("", "Read", "Write", "Gather", "Scatter", "Concat", "Split", "Size", "Close", "Grad")


def _ta_removed(name: str):
    """TF 2.21's OpDeprecation of a TensorArray spelling (version, explanation), or None:
    the first spelling went at 16 (Scatter at 19, Unpack at 20), V2 at 26 but for
    ConcatV2; the explanations are TF's, "TensorArrayGradV3" for Scatter and Concat too."""
    if name.endswith("V2"):
        return None if name == "TensorArrayConcatV2" else (26, f"Use {name[:-2]}V3")
    if name in ("TensorArrayScatter", "TensorArrayConcat"):
        return (19 if name == "TensorArrayScatter" else 16), "Use TensorArrayGradV3"
    return 16, f"Use {name}V3"


def _ta_gradient(handle: str):
    """TF 2.21 registers these ops' gradients, but they build TensorArrayGradV3 on the
    old handle, which it refuses: tf.gradients raises that TypeError, here as there."""
    dtype = "string_ref" if handle.startswith("Ref") else "string"

    def grad(op, *grads):
        raise TypeError(
            f"Input 'handle' of 'TensorArrayGradV3' Op has type {dtype} that does not match "
            "expected type of resource."
        )

    return grad


def _register_tensor_array_family(suffix: str) -> None:
    """TensorArray{suffix} and its ops; the first spelling passed Ref(string) handles
    (only its Grad took a plain one), V2 plain strings."""
    ref = not suffix
    handle = "Ref(string)" if ref else "string"
    for part in _TA_PARTS:
        name, base = f"TensorArray{part}{suffix}", f"TensorArray{part}V3"
        if part in ("", "Grad"):
            inputs = None if not part else ["handle: string", "flow_in: float32"]
            out = "handle" if not part else "grad_handle"
            d = _alias(
                name,
                base,
                inputs=inputs,
                outputs=[f"{out}: {handle}"],
                fixed=_TA_FIXED if not part else None,
            )
            # (a plain handle's static shape is the 0-d one the runtime passes, as
            # TensorArrayV3's; a ref's is TF's [2])
            d.shape_fn = (lambda op: [_VEC2]) if ref else (lambda op: [_SCALAR])
            _wrap_kernels(d, creator=ref, pick=_first)
            grad = False
        else:
            grad = part in _TA_DIFFERENTIABLE
            d = _consumer(name, base) if ref else _alias(name, base)
            if grad:
                d.gradient(_ta_gradient(handle))
        removed = _ta_removed(name)
        if removed is not None:
            _removed_in(d, *removed)
        if not grad:
            NotDifferentiable(name)


for _suffix in ("", "V2"):
    _register_tensor_array_family(_suffix)


# Pack and Unpack are Gather and Scatter over every index (TF's replacement advice:
# "Use TensorArrayGatherV3 with RangeOp").
TensorArrayPack = register_op(
    "TensorArrayPack",
    inputs=["handle: Ref(string)", "flow_in: float32"],
    outputs=["value: dtype"],
    attrs={"dtype": TypeConstraint(None), "element_shape": None},
    shape_fn=lambda op: [
        tensor_shape.TensorShape([None]).concatenate(
            tensor_shape.as_shape(op._attr("element_shape"))
            if op._attr("element_shape") is not None
            else tensor_shape.unknown_shape()
        )
    ],
    stateful=True,
)
TensorArrayUnpack = register_op(
    "TensorArrayUnpack",
    inputs=["handle: Ref(string)", "value: T", "flow_in: float32"],
    outputs=["flow_out: float32"],
    attrs={"T": TypeConstraint(None)},
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
)


@TensorArrayPack.kernel(host_memory=("handle", "flow_in"))
async def _tensor_array_pack(ctx, handle, flow):
    handle = _unwrap(handle)
    size = len(tensor_array_ops._ta(handle).values)
    indices = np.arange(size, dtype=np.int32)
    return await tensor_array_ops._tensor_array_gather_v3(ctx, handle, indices, flow)


@TensorArrayUnpack.kernel(host_memory=("handle", "flow_in", "flow_out"))
async def _tensor_array_unpack(ctx, handle, value, flow):
    indices = np.arange(np.shape(value)[0] if np.ndim(value) else 0, dtype=np.int32)
    return await tensor_array_ops._tensor_array_scatter_v3(
        ctx, _unwrap(handle), indices, value, flow
    )


_removed_in(TensorArrayPack, 16, "Use TensorArrayGatherV3 with RangeOp")
_removed_in(TensorArrayUnpack, 20, "Use TensorArrayScatterV3 with RangeOp")

# TF's marks: creators and most consumers are NotDifferentiable; QueueIsClosed,
# LookupTableExport/Import and the accumulator ops have neither mark nor gradient.
for _name in (
    "QueueEnqueue QueueEnqueueMany QueueDequeue QueueDequeueMany QueueDequeueUpTo QueueClose "
    "QueueSize TFRecordReader TextLineReader WholeFileReader FixedLengthRecordReader "
    "IdentityReader ReaderRead ReaderReadUpTo ReaderReset ReaderNumRecordsProduced "
    "ReaderNumWorkUnitsCompleted ReaderSerializeState ReaderRestoreState HashTable "
    "MutableHashTable MutableHashTableOfTensors InitializeTable InitializeTableFromTextFile "
    "LookupTableFind LookupTableInsert LookupTableSize"
).split():
    NotDifferentiable(_name)

# FakeQueue: a resource queue handle seen as a ref one (TF: "Deprecated. Do not use.").
# Its input is declared `string`, as asyncflow's queue ops declare their handles.
FakeQueue = register_op(
    "FakeQueue",
    inputs=["resource: string"],
    outputs=["handle: Ref(string)"],
    shape_fn=lambda op: [_VEC2],
    stateful=True,
)


@FakeQueue.kernel("CPU")
async def _fake_queue(ctx, resource):
    return _RefHandle(resource)
