"""NN and array op types that TF 1.x GraphDefs hold and TF 2.21 still registers:
FusedBatchNorm / V2 and their Grad ops (frozen MobileNet and Inception graphs),
SparseMatMul, SparseSegment{Sum,Mean,SqrtN}Grad (+V2), SparseBincount, ToBool, the
debugger's Copy / CopyHost, DeepCopy, ImmutableConst, and CTCLossV2 (cuDNN's: TF 2.21
runs it on GPUs only, and on a CPU raises its "No OpKernel" error, as here).

Each has TF 2.21's OpDef (inputs, attrs, defaults, allowed dtypes) and computes what TF's
CPU kernel does; the batch-norm ops run FusedBatchNormV3's kernels (ops/nn_impl.py)
without its third reserve space.  Gradients are registered where TF 2.21 registers one
(FusedBatchNorm, FusedBatchNormV2, SparseMatMul, CTCLossV2); for the others tf.gradients raises
LookupError, as there.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import ctc_ops, nn_impl
from asyncflow.ops import gradient_ops as _g
from asyncflow.registry import ANY, INDEX, REQUIRED, TypeConstraint, register_op

__all__: list[str] = []

_F32 = TypeConstraint(["float32"])
_BN_T = TypeConstraint(["float16", "bfloat16", "float32"])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- FusedBatchNorm, FusedBatchNormV2 -------------------------------------------------------


def _register_bn(name: str, vec: str, t_types: TypeConstraint, extra_attrs: dict):
    attrs = {
        "T": t_types,
        **extra_attrs,
        "epsilon": 0.0001,
        "exponential_avg_factor": 1.0,
        "data_format": "NHWC",
        "is_training": True,
    }
    op_def = register_op(
        name,
        inputs=["x: T", f"scale: {vec}", f"offset: {vec}", f"mean: {vec}", f"variance: {vec}"],
        outputs=[
            "y: T",
            f"batch_mean: {vec}",
            f"batch_variance: {vec}",
            f"reserve_space_1: {vec}",
            f"reserve_space_2: {vec}",
        ],
        attrs=attrs,
        shape_fn=lambda op: nn_impl._bn_shape(op)[:5],
    )

    @op_def.kernel()
    async def _kernel(ctx, x, scale, offset, mean, variance):
        outs = await nn_impl._fused_bn_kernel(ctx, x, scale, offset, mean, variance)
        return outs[:5]

    grad_type = "FusedBatchNormGrad" if vec == "T" else "FusedBatchNormGradV2"

    @op_def.gradient
    def _grad(op, *grads):
        attrs = {k: op._attr(k) for k in ("epsilon", "data_format", "is_training")}
        dy = grads[0] if grads[0] is not None else _g.zeros_like(op.outputs[0])
        outs = ops.apply_op(
            grad_type, [dy, op.inputs[0], op.inputs[1], op.outputs[3], op.outputs[4]], attrs
        ).outputs
        return [outs[0], outs[1], outs[2], None, None]

    _kernel.__name__ = f"_{name.lower()}_kernel"
    return op_def


FusedBatchNorm = _register_bn("FusedBatchNorm", "T", _F32, {})
FusedBatchNormV2 = _register_bn("FusedBatchNormV2", "U", _BN_T, {"U": _F32})


def _register_bn_grad(name: str, inputs: list[str], vec: str, attrs: dict):
    outputs = ["x_backprop: T", f"scale_backprop: {vec}", f"offset_backprop: {vec}",
               f"reserve_space_3: {vec}", f"reserve_space_4: {vec}"]  # fmt: skip
    op_def = register_op(
        name,
        inputs=inputs,
        outputs=outputs,
        attrs={**attrs, "epsilon": 0.0001, "data_format": "NHWC", "is_training": True},
        shape_fn=nn_impl.FusedBatchNormGradV3.shape_fn,
    )

    @op_def.kernel()
    async def _kernel(ctx, dy, x, scale, mean, variance):
        outs = await nn_impl._fused_bn_grad_kernel(ctx, dy, x, scale, mean, variance, None)
        # (TF's kernel for these two types returns a scalar 0 for each reserve space
        # against its shape function's [0]; the declared empty vector is given here)
        return outs

    _kernel.__name__ = f"_{name.lower()}_kernel"
    return op_def


# TF registers _FusedBatchNormGradGrad for both; like FusedBatchNormGradV3's, it is not
# written here yet (tf.gradients raises LookupError).
FusedBatchNormGrad = _register_bn_grad(
    "FusedBatchNormGrad",
    ["y_backprop: T", "x: T", "scale: T", "reserve_space_1: T", "reserve_space_2: T"],
    "T",
    {"T": _F32},
)
FusedBatchNormGradV2 = _register_bn_grad(
    "FusedBatchNormGradV2",
    ["y_backprop: T", "x: T", "scale: float32", "reserve_space_1: U", "reserve_space_2: U"],
    "U",
    {"T": _BN_T, "U": _F32},
)


# -- SparseMatMul: MatMul with sparsity hints ---------------------------------------------------


def _sparse_matmul_shape(op):
    a, b = (t.shape.with_rank(2) for t in op.inputs)
    ta, tb = op._attr("transpose_a"), op._attr("transpose_b")
    m, ka = (a[1], a[0]) if ta else (a[0], a[1])
    kb, n = (b[1], b[0]) if tb else (b[0], b[1])
    ka.merge_with(kb)
    return [tensor_shape.TensorShape([m, n])]


_BF16_F32 = TypeConstraint(["float32", "bfloat16"], default="float32")
SparseMatMul = register_op(
    "SparseMatMul",
    inputs=["a: Ta", "b: Tb"],
    outputs=["product: float32"],
    attrs={
        "transpose_a": False,
        "transpose_b": False,
        "a_is_sparse": False,
        "b_is_sparse": False,
        "Ta": _BF16_F32,
        "Tb": _BF16_F32,
    },
    shape_fn=_sparse_matmul_shape,
)


@SparseMatMul.kernel("CPU")
async def _sparse_matmul(ctx, a, b):
    a = np.asarray(a).astype(np.float32, copy=False)
    b = np.asarray(b).astype(np.float32, copy=False)
    if a.ndim != 2 or b.ndim != 2:
        raise _invalid("a and b must be matrices")
    a = a.T if ctx.attrs["transpose_a"] else a
    b = b.T if ctx.attrs["transpose_b"] else b
    if a.shape[1] != b.shape[0]:
        raise _invalid(
            f"Matrix size incompatible: a: [{a.shape[0]},{a.shape[1]}], b: "
            f"[{b.shape[0]},{b.shape[1]}]"
        )
    return await ctx.device.compute(np.matmul, a, b)


@SparseMatMul.gradient
def _sparse_matmul_grad(op, grad):
    a, b = op.inputs
    ta, tb = op._attr("transpose_a"), op._attr("transpose_b")

    def mm(x, y, dtype, transpose_a=False, transpose_b=False):
        prod = _g.apply("SparseMatMul", x, y, transpose_a=transpose_a, transpose_b=transpose_b)
        return prod if dtype == dtypes.float32 else _g.cast(prod, dtype)

    da_t, db_t = a.dtype.base_dtype, b.dtype.base_dtype
    if not ta and not tb:
        return [mm(grad, b, da_t, transpose_b=True), mm(a, grad, db_t, transpose_a=True)]
    if not ta and tb:
        return [mm(grad, b, da_t), mm(grad, a, db_t, transpose_a=True)]
    if ta and not tb:
        return [mm(b, grad, da_t, transpose_b=True), mm(a, grad, db_t)]
    return [
        mm(b, grad, da_t, transpose_a=True, transpose_b=True),
        mm(grad, a, db_t, transpose_a=True, transpose_b=True),
    ]


# -- SparseSegment{Sum,Mean,SqrtN}Grad (+V2): the segment reductions' backprop -----------------


def _segment_grad_shape(op):
    indices = op.inputs[1].shape.with_rank(1)
    indices.merge_with(op.inputs[2].shape.with_rank(1))
    grad = op.inputs[0].shape
    rest = grad[1:] if grad.ndims is not None else tensor_shape.unknown_shape()
    if op.type.endswith("V2"):
        return [
            tensor_shape.TensorShape([None]).concatenate(rest),
            tensor_shape.TensorShape([None]),
        ]
    dim0 = ops.constant_value(op.inputs[3])
    return [tensor_shape.TensorShape([None if dim0 is None else int(dim0)]).concatenate(rest)]


def _segment_grad_rows(grad, indices, seg, dim0, mode):
    """output[indices[i]] += grad[seg[i]] / w(seg[i]): w 1, the segment's size, its root."""
    if indices.ndim != 1 or seg.ndim != 1 or indices.shape != seg.shape:
        raise _invalid("segment_ids and indices should have same size.")
    if grad.ndim < 1:
        raise _invalid("grad must be at least 1-D")
    n = grad.shape[0]
    if len(seg) and ((seg < 0).any() or (seg >= n).any()):
        raise _invalid("Invalid number of segments")
    if len(indices) and ((indices < 0).any() or (indices >= dim0).any()):
        bad = int(np.flatnonzero((indices < 0) | (indices >= dim0))[0])
        raise _invalid(f"Index {int(indices[bad])} out of range [0, {dim0}).")
    picked = grad[seg].astype(np.float64 if grad.dtype == np.float64 else np.float32)
    if mode != "sum":
        counts = np.bincount(seg, minlength=n).astype(picked.dtype)[seg]
        weights = counts if mode == "mean" else np.sqrt(counts)
        picked = picked / weights.reshape(-1, *[1] * (grad.ndim - 1))
    out = np.zeros((dim0, *grad.shape[1:]), picked.dtype)
    np.add.at(out, indices, picked)
    return out.astype(grad.dtype)


def _segment_grad_op(op_type: str, mode: str, v2: bool):
    last = "dense_output_dim0: int32" if v2 else "output_dim0: int32"
    outputs = ["output: T", "sorted_unique_indices: Tidx"] if v2 else ["output: T"]
    op_def = register_op(
        op_type,
        inputs=["grad: T", "indices: Tidx", "segment_ids: Tsegmentids", last],
        outputs=outputs,
        attrs={
            "T": TypeConstraint(["bfloat16", "float16", "float32", "float64"]),
            "Tidx": INDEX,
            "Tsegmentids": INDEX,
        },
        shape_fn=_segment_grad_shape,
    )

    @op_def.kernel("CPU", host_memory=(last.split(":")[0],))
    async def _kernel(ctx, grad, indices, seg, dim0):
        grad, indices, seg = np.asarray(grad), np.asarray(indices), np.asarray(seg)
        dim0 = int(dim0)
        out = _segment_grad_rows(grad, indices, seg, dim0, mode)
        if not v2:
            return out
        unique = np.unique(indices)
        return out[unique], unique.astype(indices.dtype)

    _kernel.__name__ = f"_{op_type.lower()}_kernel"
    return op_def


for _mode, _word in (("sum", "Sum"), ("mean", "Mean"), ("sqrt_n", "SqrtN")):
    _segment_grad_op(f"SparseSegment{_word}Grad", _mode, False)
    _segment_grad_op(f"SparseSegment{_word}GradV2", _mode, True)


# -- SparseBincount ----------------------------------------------------------------------------


def _sparse_bincount_shape(op):
    size = ops.constant_value(op.inputs[3])
    size = None if size is None else int(size)
    dense_shape = op.inputs[2].shape
    rank = dense_shape[0].value if dense_shape.ndims == 1 else None
    if rank == 1:
        return [tensor_shape.TensorShape([size])]
    if rank == 2:
        shape = ops.constant_value(op.inputs[2])
        return [tensor_shape.TensorShape([None if shape is None else int(shape[0]), size])]
    return [tensor_shape.unknown_shape()]


SparseBincount = register_op(
    "SparseBincount",
    inputs=["indices: int64", "values: Tidx", "dense_shape: int64", "size: Tidx", "weights: T"],
    outputs=["output: T"],
    attrs={
        "Tidx": TypeConstraint(["int32", "int64"]),
        "T": TypeConstraint(["int32", "int64", "float32", "float64"]),
        "binary_output": False,
    },
    shape_fn=_sparse_bincount_shape,
)


@SparseBincount.kernel("CPU", host_memory=("size",))
async def _sparse_bincount(ctx, indices, values, dense_shape, size, weights):
    indices, values = np.asarray(indices), np.asarray(values).reshape(-1)
    dense_shape, weights = np.asarray(dense_shape).reshape(-1), np.asarray(weights)
    size = int(size)
    if size < 0:
        raise _invalid(f"Non-negative size is required, got {size}")
    binary = ctx.attrs["binary_output"]
    out_dtype = ctx.attrs["T"].as_numpy_dtype
    # (TF's kernel reads past weights shorter than values; refused here)
    if weights.size and weights.shape != values.shape:
        raise _invalid(
            "Weights and values must have the same shape. Weight shape: "
            f"{list(weights.shape)}; values shape: {list(values.shape)}"
        )
    rank = dense_shape.size
    if rank not in (1, 2):
        raise _invalid(f"Input must be a 1 or 2-dimensional tensor. Got: {rank}")
    rows = 1 if rank == 1 else int(dense_shape[0])
    row_of = np.zeros(len(values), np.int64) if rank == 1 else indices[:, 0].astype(np.int64)
    out = np.zeros((rows, size), out_dtype)
    keep = (values >= 0) & (values < size)  # (TF skips the others)
    rows_k, vals_k = row_of[keep], values[keep].astype(np.int64)
    if binary:
        out[rows_k, vals_k] = 1
    elif weights.size:
        np.add.at(out, (rows_k, vals_k), weights[keep].astype(out_dtype))
    else:
        np.add.at(out, (rows_k, vals_k), 1)
    return out[0] if rank == 1 else out


# -- ToBool, Copy, CopyHost, DeepCopy, ImmutableConst ---------------------------------------

ToBool = register_op(
    "ToBool",
    inputs=["input: T"],
    outputs=["output: bool"],
    attrs={"T": ANY},
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
)


@ToBool.kernel("CPU")
async def _to_bool(ctx, x):
    x = np.asarray(x)
    if x.ndim:  # a non-scalar is true when it has elements (TF's ToBoolOp)
        return np.bool_(x.size > 0)
    value = x.item()
    return np.bool_(len(value) > 0 if isinstance(value, bytes | str) else value != 0)


def _identity_like(name: str, in_name: str, out_name: str, attrs: dict, stateful: bool):
    op_def = register_op(
        name,
        inputs=[f"{in_name}: T"],
        outputs=[f"{out_name}: T"],
        attrs={"T": ANY, **attrs},
        shape_fn=lambda op: [op.inputs[0].shape],
        stateful=stateful,
    )

    @op_def.kernel()
    async def _kernel(ctx, x):
        return ctx.xp.array(x, copy=True)

    _kernel.__name__ = f"_{name.lower()}_kernel"
    return op_def


# The debugger's copies (tfdbg inserts them before its debug ops): the value, copied.
_DEBUG_ATTRS = {"tensor_name": "", "debug_ops_spec": []}
Copy = _identity_like("Copy", "input", "output", _DEBUG_ATTRS, False)
CopyHost = _identity_like("CopyHost", "input", "output", _DEBUG_ATTRS, False)
DeepCopy = _identity_like("DeepCopy", "x", "y", {}, True)
# tf.raw_ops.Snapshot: a copy of its input (TF registers no gradient for it).
Snapshot = _identity_like("Snapshot", "input", "output", {}, False)


def _immutable_const_shape(op):
    return [tensor_shape.TensorShape(op._attr("shape"))]


ImmutableConst = register_op(
    "ImmutableConst",
    inputs=[],
    outputs=["tensor: dtype"],
    attrs={"dtype": ANY, "shape": REQUIRED, "memory_region_name": REQUIRED},
    shape_fn=_immutable_const_shape,
)


@ImmutableConst.kernel("CPU")
async def _immutable_const(ctx):
    # TF maps the region from a memmapped file system (tf.contrib.util's
    # convert_graphdef_memmapped_format); asyncflow has none, so every region is
    # missing, as in a TF session opened without that file system.
    region = ctx.attrs["memory_region_name"]
    raise errors.NotFoundError(None, None, f"{region}; No such file or directory")


# -- CTCLossV2: cuDNN's CTC loss (TF 2.21 has a GPU kernel only) ------------------------------

CTCLossV2 = register_op(
    "CTCLossV2",
    inputs=[
        "inputs: float32",
        "labels_indices: int64",
        "labels_values: int32",
        "sequence_length: int32",
    ],
    outputs=["loss: float32", "gradient: float32"],
    attrs={
        "preprocess_collapse_repeated": False,
        "ctc_merge_repeated": True,
        "ignore_longer_outputs_than_inputs": False,
    },
    shape_fn=ctc_ops._ctc_loss_shape,
)
CTCLossV2.gradient(ctc_ops.CTCLoss.grad_fn)  # (TF's: the same rule as CTCLoss')


@CTCLossV2.kernel("CPU")
async def _ctc_loss_v2(ctx, inputs, labels_indices, labels_values, sequence_length):
    # A graph written for cuDNN: on a CPU, TF's error (its attrs in TF's order).
    a = ctx.attrs
    attrs = ", ".join(
        f"{k}={str(a[k]).lower()}"
        for k in (
            "preprocess_collapse_repeated",
            "ctc_merge_repeated",
            "ignore_longer_outputs_than_inputs",
        )
    )
    raise _invalid(
        f"No OpKernel was registered to support Op 'CTCLossV2' used by {{{{node {ctx.op.name}}}}} "
        f"with these attrs: [{attrs}]\nRegistered devices: [CPU]\nRegistered kernels:\n"
        "  device='GPU'\n"
    )
