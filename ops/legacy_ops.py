"""Older spellings of ops asyncflow already runs, under TF's legacy op types.

TF keeps these op types so old GraphDefs still load: BatchMatrixInverse is MatrixInverse,
Inv is Reciprocal, TopK is TopKV2 with `k` as an attr, Concat is ConcatV2 with the axis
first.  Each is registered with TF 2.21's OpDef (input names, attrs, defaults, allowed
dtypes) and runs the kernel, shape function and (where TF registers one) gradient of
the op it spells, seen through a view that supplies the newer op's inputs and attrs.
Where TF registers no gradient for the old type (the Batch* linear algebra, Mod,
InTopK), none is registered here either, so `tf.gradients` raises TF's LookupError.

TF 2.21 refuses to build an op removed from the GraphDef format before its version
(NotImplementedError, "Op TopK is not available in GraphDef version 2474..."); a
GraphDef written before then imports, and one written after imports but its op raises
UnimplementedError when run: `_removed_in` does the same.
"""

from __future__ import annotations

import weakref

import numpy as np

from asyncflow import dtypes, errors, graph_io, tensor_shape
from asyncflow.ops import (  # noqa: F401 - they register the ops spelled here
    array_ops,
    color_ops,
    conv3d_ops,
    conv_ops,
    fft_ops,
    linalg_matrix_ops,
    linalg_ops,
    manip_ops,
    math_extra_ops,
    math_more_ops,
    nn_impl,
    nn_ops,
    random_more_ops,
    segment_ops,
    slicing_ops,
    space_ops,
)
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.math_ops import _binary_op, _check_int_div
from asyncflow.registry import REQUIRED, TypeConstraint, get_op_def, register_op

__all__: list[str] = []

_FD = TypeConstraint(["float64", "float32"])
_FDC = TypeConstraint(["float64", "float32", "complex64", "complex128"])
_NUM = TypeConstraint(
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
_REAL_NUM = TypeConstraint(
    [
        "float32",
        "float64",
        "int32",
        "uint8",
        "int16",
        "int8",
        "int64",
        "bfloat16",
        "uint16",
        "float16",
        "uint32",
        "uint64",
    ]
)


class _AttrCtx:
    """A kernel context whose attrs add the newer op's attrs the old op lacks."""

    __slots__ = ("_ctx", "attrs")

    def __init__(self, ctx, attrs):
        self._ctx = ctx
        self.attrs = attrs

    def __getattr__(self, name):
        return getattr(self._ctx, name)


class _OpView:
    """An Operation seen as the newer op: other inputs, and the attrs the old op lacks
    (for the newer op's shape function and gradient)."""

    def __init__(self, op, inputs, attrs):
        self._op = op
        self.inputs = inputs
        self._attrs = {**op._attrs, **attrs}

    def __getattr__(self, name):
        return getattr(self._op, name)

    def _attr(self, name):
        return self._attrs[name]

    def get_attr(self, name):
        value = self._attrs[name]
        return value.encode() if isinstance(value, str) else value


# TF 2.21's GraphDef version, which its messages name for a graph built now.
_TF_GRAPH_DEF_VERSION = 2474
# Ops imported from a GraphDef newer than their removal, to the error they raise when run.
_REMOVED_OPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# A graph takes the oldest producer version imported into it (as TF's graph takes an
# imported GraphDef's versions): ops built there later, e.g. gradients, are checked
# against it.
_GRAPH_PRODUCER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _removed_in(op_def, version: int, explanation: str):
    """Mark `op_def` removed from GraphDef `version` on (TF's OpDeprecation)."""
    shape_fn = op_def.shape_fn

    def message(producer):
        return (
            f"Op {op_def.name} is not available in GraphDef version {producer}. It has been "
            f"removed in version {version}. {explanation}."
        )

    def checked_shape_fn(op):
        producer = graph_io.importing_producer()
        if producer is None:
            producer = _GRAPH_PRODUCER.get(op.graph)
            if producer is None or producer >= version:
                raise NotImplementedError(message(_TF_GRAPH_DEF_VERSION))
        else:
            _GRAPH_PRODUCER[op.graph] = min(producer, _GRAPH_PRODUCER.get(op.graph, producer))
        if producer >= version:
            _REMOVED_OPS[op] = message(producer)
        return shape_fn(op)

    op_def.shape_fn = checked_shape_fn
    for key, kd in list(op_def.kernel_defs.items()):

        async def kernel(ctx, *args, _fn=kd.fn):
            removed = _REMOVED_OPS.get(ctx.op)
            if removed is not None:
                raise errors.UnimplementedError(None, ctx.op, removed)
            return await _fn(ctx, *args)

        kernel.__name__ = kd.fn.__name__
        op_def.kernel_defs[key] = type(kd)(kernel, kd.device_type, kd.host_memory)
    return op_def


def _spec(arg) -> str:
    typ = arg.type_attr or arg.fixed_dtype.name
    if arg.is_ref:
        typ = f"Ref({typ})"
    return f"{arg.name}: {arg.number_attr} * {typ}" if arg.number_attr else f"{arg.name}: {typ}"


def _alias(
    name,
    base,
    *,
    inputs=None,
    outputs=None,
    attrs=None,
    fixed=None,
    to_base=None,
    view_inputs=None,
    grad=False,
    from_base_grads=None,
):
    """Register `name` running op `base`.

    `inputs` and `outputs` are TF's specs where they differ from `base`'s; `attrs` TF's attrs
    (default: `base`'s, updated); `fixed` maps `base` attrs the old op lacks to their
    value, or to a function of the old op's attrs; `to_base(attrs, *args)` turns the
    old op's input values into `base`'s, `view_inputs(op)` its input tensors; `grad`
    copies `base`'s gradient (`from_base_grads` puts them in the old op's input order).
    """
    b = get_op_def(base)
    fixed = fixed or {}
    own_attrs = {k: v for k, v in b.attrs.items() if k not in fixed}
    own_attrs.update(attrs or {})
    op_def = register_op(
        name,
        inputs=inputs if inputs is not None else [_spec(a) for a in b.inputs],
        outputs=outputs if outputs is not None else [_spec(a) for a in b.outputs],
        attrs=own_attrs,
        shape_fn=lambda op: b.shape_fn(_view(op)),
        stateful=b.stateful,
    )
    names = {a.name for a in op_def.inputs} | {a.name for a in op_def.outputs}

    def base_attrs(attrs):
        extra = {k: (v(attrs) if callable(v) else v) for k, v in fixed.items()}
        return {**attrs, **extra}

    def _view(op):
        extra = {k: (v(op._attrs) if callable(v) else v) for k, v in fixed.items()}
        return _OpView(op, view_inputs(op) if view_inputs else op.inputs, extra)

    # (an old spelling runs on the CPU: its argument conversions read host values)
    cpu_kd = b.kernel_defs.get("CPU") or b.kernel_defs.get(None)
    for key, kd in [("CPU", cpu_kd)] if cpu_kd is not None else []:
        base_fn = kd.fn

        async def kernel(ctx, *args, _fn=base_fn):
            merged = base_attrs(ctx.attrs)
            if to_base is not None:
                args = to_base(merged, *args)
            return await _fn(_AttrCtx(ctx, merged), *args)

        kernel.__name__ = f"_{name.lower()}_kernel"
        host = tuple(sorted(kd.host_memory & names))
        op_def.kernel(*((key,) if key else ()), host_memory=host)(kernel)
    if grad:

        def _grad(op, *grads):
            result = list(b.grad_fn(_view(op), *grads))
            return from_base_grads(result) if from_base_grads else result

        op_def.gradient(_grad)
    return op_def


# -- Batch* linear algebra and FFTs: the ops TF renamed, same inputs (no TF gradient) --

_alias(
    "BatchMatrixBandPart",
    "MatrixBandPart",
    inputs=["input: T", "num_lower: int64", "num_upper: int64"],
    attrs={"T": TypeConstraint(None)},
    fixed={"Tindex": dtypes.int64},
)
_alias("BatchMatrixDeterminant", "MatrixDeterminant", attrs={"T": _FDC})
_alias("BatchMatrixDiag", "MatrixDiag")
_alias("BatchMatrixDiagPart", "MatrixDiagPart")
_alias("BatchMatrixInverse", "MatrixInverse", attrs={"T": _FD})
_alias("BatchMatrixSetDiag", "MatrixSetDiag")
_alias("BatchMatrixSolve", "MatrixSolve", attrs={"T": _FD})
_alias("BatchMatrixSolveLs", "MatrixSolveLs", attrs={"T": _FD})
_alias("BatchMatrixTriangularSolve", "MatrixTriangularSolve", attrs={"T": _FD})
_alias("BatchCholesky", "Cholesky", attrs={"T": _FD})
_alias("BatchSelfAdjointEigV2", "SelfAdjointEigV2", attrs={"T": _FD})
_alias("BatchSvd", "Svd", attrs={"T": _FDC})
for _base in ("FFT", "FFT2D", "FFT3D", "IFFT", "IFFT2D", "IFFT3D"):
    _alias(
        "Batch" + _base,
        _base,
        inputs=["input: complex64"],
        outputs=["output: complex64"],
        fixed={"Tcomplex": dtypes.complex64},
    )

# -- Other renamed ops ---------------------------------------------------------------

# Mod is C's `%` as TruncateMod is, but flags integer division by zero as Div does.
_binary_op(
    "Mod",
    lambda xp, x, y: xp.fmod(x, y),
    TypeConstraint(["int32", "int64", "bfloat16", "float16", "float32", "float64"]),
    check=_check_int_div,
)
_alias(
    "Inv",
    "Reciprocal",
    attrs={
        "T": TypeConstraint(
            [
                "bfloat16",
                "float16",
                "float32",
                "float64",
                "int8",
                "int16",
                "int32",
                "int64",
                "complex64",
                "complex128",
            ]
        )
    },
    grad=True,
)
_alias(
    "InvGrad",
    "ReciprocalGrad",
    attrs={
        "T": TypeConstraint(
            ["bfloat16", "float16", "float32", "float64", "complex64", "complex128"]
        )
    },
    grad=True,
)
_alias("BiasAddV1", "BiasAdd", attrs={"T": _NUM}, fixed={"data_format": "NHWC"}, grad=True)
_alias("PlaceholderV2", "Placeholder", attrs={"shape": REQUIRED})


def _const(value, dtype):
    return _g.constant(np.asarray(value, dtype=dtype.as_numpy_dtype), dtype)


_alias(
    "TopK",
    "TopKV2",
    inputs=["input: T"],
    attrs={"k": REQUIRED, "T": _REAL_NUM},
    to_base=lambda attrs, x: (x, np.int32(attrs["k"])),
    view_inputs=lambda op: [op.inputs[0], _const(op._attrs["k"], dtypes.int32)],
    grad=True,
    from_base_grads=lambda g: g[:1],
)
_alias(
    "InTopK",
    "InTopKV2",
    inputs=["predictions: float32", "targets: T"],
    attrs={"k": REQUIRED},
    to_base=lambda attrs, p, t: (p, t, np.asarray(attrs["k"], dtype=t.dtype)),
    view_inputs=lambda op: [*op.inputs, _const(op._attrs["k"], op.inputs[1].dtype)],
)
_alias(
    "Gather",
    "GatherV2",
    inputs=["params: Tparams", "indices: Tindices"],
    attrs={"validate_indices": True},
    fixed={"Taxis": dtypes.int32, "batch_dims": 0},
    to_base=lambda attrs, p, i: (p, i, np.int32(0)),
    view_inputs=lambda op: [*op.inputs, _const(0, dtypes.int32)],
    grad=True,
    from_base_grads=lambda g: g[:2],
)
_alias(
    "Concat",
    "ConcatV2",
    inputs=["concat_dim: int32", "values: N * T"],
    attrs={"N": REQUIRED},
    fixed={"Tidx": dtypes.int32},
    to_base=lambda attrs, dim, *values: (*values, dim),
    view_inputs=lambda op: [*op.inputs[1:], op.inputs[0]],
    grad=True,
    from_base_grads=lambda g: [None, *g[:-1]],
)


_alias(
    "Reverse",
    "ReverseV2",
    inputs=["tensor: T", "dims: bool"],
    attrs={
        "T": TypeConstraint(
            [
                "uint8",
                "int8",
                "uint16",
                "int16",
                "uint32",
                "int32",
                "uint64",
                "int64",
                "bool",
                "bfloat16",
                "float16",
                "float32",
                "float64",
                "complex64",
                "complex128",
                "string",
            ]
        )
    },
    fixed={"Tidx": dtypes.int32},
    to_base=lambda attrs, x, dims: (x, np.flatnonzero(np.asarray(dims)).astype(np.int32)),
    view_inputs=lambda op: [op.inputs[0], _g.apply("Where", op.inputs[1])],
)


get_op_def("Reverse").shape_fn = lambda op: [op.inputs[0].shape]


@get_op_def("Reverse").gradient
def _reverse_grad(op, grad):
    return [_g.apply("Reverse", grad, op.inputs[1]), None]


def _block(op):
    size = op._attrs["block_size"]
    return _const([size, size], dtypes.int32)


_alias(
    "SpaceToBatch",
    "SpaceToBatchND",
    inputs=["input: T", "paddings: Tpaddings"],
    attrs={"block_size": REQUIRED},
    fixed={"Tblock_shape": dtypes.int32},
    to_base=lambda attrs, x, pads: (x, np.array([attrs["block_size"]] * 2, np.int32), pads),
    view_inputs=lambda op: [op.inputs[0], _block(op), op.inputs[1]],
)
_alias(
    "BatchToSpace",
    "BatchToSpaceND",
    inputs=["input: T", "crops: Tidx"],
    attrs={"block_size": REQUIRED, "Tidx": TypeConstraint(["int32", "int64"], default="int32")},
    fixed={"Tblock_shape": dtypes.int32, "Tcrops": lambda attrs: attrs["Tidx"]},
    to_base=lambda attrs, x, crops: (x, np.array([attrs["block_size"]] * 2, np.int32), crops),
    view_inputs=lambda op: [op.inputs[0], _block(op), op.inputs[1]],
)


@get_op_def("SpaceToBatch").gradient
def _space_to_batch_grad(op, grad):
    size = op._attrs["block_size"]
    return [_g.apply("BatchToSpace", grad, op.inputs[1], block_size=size), None]


@get_op_def("BatchToSpace").gradient
def _batch_to_space_grad(op, grad):
    size = op._attrs["block_size"]
    return [_g.apply("SpaceToBatch", grad, op.inputs[1], block_size=size), None]


# SelfAdjointEig packs the eigenvalues (row 0) above the eigenvectors (rows 1..).
def _self_adjoint_eig_shape(op):
    x = op.inputs[0].shape.with_rank_at_least(2)
    if x.ndims is None:
        return [tensor_shape.unknown_shape()]
    n = x[-1].merge_with(x[-2])
    rows = None if n.value is None else n.value + 1
    return [x[:-2].concatenate([rows, n])]


for _name, _types in (
    ("SelfAdjointEig", ["float64", "float32", "float16"]),
    ("BatchSelfAdjointEig", ["float64", "float32"]),
):
    _def = register_op(
        _name,
        inputs=["input: T"],
        outputs=["output: T"],
        attrs={"T": TypeConstraint(_types)},
        shape_fn=_self_adjoint_eig_shape,
    )

    @_def.kernel("CPU")
    async def _self_adjoint_eig(ctx, x):
        x = np.asarray(x)
        if x.shape[-1] != x.shape[-2]:
            raise errors.InvalidArgumentError(
                None, None, f"Input matrix must be square, got shape {list(x.shape)}"
            )
        e, v = np.linalg.eigh(x.astype(np.float64))
        return np.concatenate([e[..., None, :], v], axis=-2).astype(x.dtype)


# The V2 diagonal ops pack diagonals as V3 does with align LEFT_LEFT.
for _name in ("MatrixDiag", "MatrixDiagPart", "MatrixSetDiag"):
    _alias(_name + "V2", _name + "V3", fixed={"align": "LEFT_LEFT"}, grad=True)

_alias(
    "TileGrad",
    "Sum",
    inputs=["input: T", "multiples: int32"],
    attrs={"T": TypeConstraint(None)},
    fixed={"keep_dims": False, "Tidx": dtypes.int32},
    to_base=lambda attrs, x, multiples: _tile_grad_args(x, multiples),
)
get_op_def("TileGrad").shape_fn = lambda op: [tensor_shape.unknown_shape(op.inputs[0].shape.ndims)]


def _tile_grad_args(x, multiples):
    """Sum TileGrad's tiles: x reshaped to (multiple, size) pairs, summed over the
    multiples (the kernel gets the reshaped value and the axes)."""
    multiples = np.asarray(multiples).reshape(-1)
    x = np.asarray(x)
    pairs = []
    for m, d in zip(multiples, x.shape):
        pairs += [int(m), int(d) // int(m)]
    return x.reshape(pairs), np.arange(0, 2 * x.ndim, 2, dtype=np.int32)


# The convolution backprops that take the tensor whose shape they need, not the shape.
def _shape_of(x):
    return np.asarray(np.shape(x), np.int32)


def _out_like(position):
    def shape_fn(op):
        return [op.inputs[position].shape]

    return shape_fn


_CONV_T = TypeConstraint(["float16", "bfloat16", "float32", "float64"])
for _name, _base, _pos, _fixed in (
    ("Conv2DBackpropFilterV2", "Conv2DBackpropFilter", 1, {}),
    ("Conv2DBackpropInputV2", "Conv2DBackpropInput", 0, {}),
    ("Conv3DBackpropFilter", "Conv3DBackpropFilterV2", 1, {"data_format": "NDHWC"}),
    ("Conv3DBackpropInput", "Conv3DBackpropInputV2", 0, {"data_format": "NDHWC"}),
):
    if _pos == 1:
        _to_base = lambda attrs, x, f, dy: (x, _shape_of(f), dy)  # noqa: E731
    else:
        _to_base = lambda attrs, x, f, dy: (_shape_of(x), f, dy)  # noqa: E731
    if _name.startswith("Conv3D"):
        _fixed = {**_fixed, "Tshape": dtypes.int32} if _pos == 0 else _fixed
        _t = TypeConstraint(["float16", "float32", "float64"])
    else:
        _t = TypeConstraint(
            ["float16", "bfloat16", "float32", "float64"] + (["int32"] if _pos == 0 else [])
        )
    _def = _alias(
        _name,
        _base,
        inputs=["input: T", "filter: T", "out_backprop: T"],
        attrs={"T": _t},
        fixed=_fixed,
        to_base=_to_base,
    )
    _def.shape_fn = _out_like(_pos)


_alias(
    "RandomPoisson",
    "RandomPoissonV2",
    inputs=["shape: S", "rate: dtype"],
    attrs={"dtype": TypeConstraint(["float16", "float32", "float64"])},
    fixed={"R": lambda attrs: attrs["dtype"]},
)


# SegmentSumV2 & co. (TF 2.21 registers them for XLA devices only) take num_segments as
# the unsorted segment ops do; TF's documented results are theirs: empty segments give
# 0 (sum), 1 (prod), the lowest (max) or highest (min) value.
_SEGMENT_MINMAX_T = TypeConstraint(
    [
        "float32",
        "float64",
        "int32",
        "uint8",
        "int16",
        "int8",
        "int64",
        "bfloat16",
        "uint16",
        "float16",
        "uint32",
        "uint64",
    ]
)
for _kind in ("Sum", "Prod", "Max", "Min"):
    _alias(
        f"Segment{_kind}V2",
        f"UnsortedSegment{_kind}",
        attrs={
            "T": _SEGMENT_MINMAX_T
            if _kind in ("Max", "Min")
            else get_op_def(f"UnsortedSegment{_kind}").attrs["T"]
        },
    )


# TF 2.21's OpDeprecation of the ops above (version, explanation).
_REMOVED = {
    "BatchMatrixBandPart": (14, "Use MatrixBandPart"),
    "BatchMatrixDeterminant": (13, "Use MatrixDeterminant instead."),
    "BatchMatrixDiag": (14, "Use MatrixDiag"),
    "BatchMatrixDiagPart": (14, "Use MatrixDiagPart"),
    "BatchMatrixInverse": (13, "Use MatrixInverse instead."),
    "BatchMatrixSetDiag": (14, "Use MatrixSetDiag"),
    "BatchMatrixSolve": (13, "Use MatrixSolve instead."),
    "BatchMatrixSolveLs": (13, "Use MatrixSolveLs instead."),
    "BatchMatrixTriangularSolve": (13, "Use MatrixTriangularSolve instead."),
    "BatchCholesky": (13, "Use Cholesky instead."),
    "BatchSelfAdjointEigV2": (13, "Use SelfAdjointEigV2 instead."),
    "BatchSvd": (13, "Use Svd instead."),
    "BatchFFT": (15, "Use FFT"),
    "BatchFFT2D": (15, "Use FFT2D"),
    "BatchFFT3D": (15, "Use FFT3D"),
    "BatchIFFT": (15, "Use IFFT"),
    "BatchIFFT2D": (15, "Use IFFT2D"),
    "BatchIFFT3D": (15, "Use IFFT3D"),
    "TopK": (7, "Use TopKV2 instead"),
    "PlaceholderV2": (23, "Placeholder now behaves the same as PlaceholderV2."),
    "SelfAdjointEig": (11, "Use SelfAdjointEigV2 instead."),
    "TileGrad": (3, "TileGrad has been replaced with reduce_sum"),
    "RandomPoisson": (25, "Replaced by RandomPoissonV2"),
    "AdjustContrast": (2, "Use AdjustContrastv2 instead"),
    "RandomCrop": (8, "Random crop is now pure Python"),
    "Conv3DBackpropFilter": (10, "Use Conv3DBackpropFilterV2"),
    "BatchNormWithGlobalNormalization": (9, "Use tf.nn.batch_normalization()"),
    "BatchNormWithGlobalNormalizationGrad": (9, "Use tf.nn.batch_normalization()"),
    "Conv3DBackpropInput": (10, "Use Conv3DBackpropInputV2"),
    "BatchSelfAdjointEig": (11, "Use SelfAdjointEigV2 instead."),
    "MatrixExponential": (
        27,
        "Use Python implementation tf.linalg.matrix_exponential instead.",
    ),
}
for _name, (_version, _why) in _REMOVED.items():
    _def = get_op_def(_name)
    if _name.startswith("Batch"):  # TF infers no shapes for these
        _def.shape_fn = lambda op: [tensor_shape.unknown_shape()] * len(op.outputs)
    _removed_in(_def, _version, _why)
