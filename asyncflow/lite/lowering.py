"""TF op -> TFLite builtin operator rules, and the fusion passes TF's converter runs.

The converter hands each non-constant TF op to `LOWERINGS[op.type](ctx, op)`, which
emits `Node`s into `ctx` (a `converter._Builder`). Values flowing between nodes are
either a TF tensor name (dynamic) or a `Const` (a folded NumPy array), so a rule can look
at its constant inputs (a MatMul's weights, a Conv2D's filter) and lay them out the way
TFLite's kernels want them: OHWI conv filters, [1, H, W, C*M] depthwise filters, [units,
depth] fully-connected weights, int32 axes.

The fusion passes that run after lowering are in `passes`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from asyncflow.lite import schema


@dataclasses.dataclass
class Const:
    """A folded constant; `name` is what its TFLite tensor is called."""

    value: np.ndarray
    name: str


@dataclasses.dataclass
class Node:
    """One TFLite operator: inputs are tensor names, `Const`s or None (omitted)."""

    op: str
    inputs: list
    outputs: list[str]
    options: dict
    names: list[str] = dataclasses.field(default_factory=list)  # TF ops it stands for


def _i32(values) -> np.ndarray:
    return np.asarray(values, np.int64).astype(np.int32)


def _padding(op) -> int:
    pad = op.get_attr("padding")
    pad = pad.decode() if isinstance(pad, bytes) else pad
    if pad not in ("SAME", "VALID"):
        raise ctx_error(op, f"padding {pad}")
    return schema.SAME if pad == "SAME" else schema.VALID


def _nhwc(op) -> None:
    try:
        fmt = op.get_attr("data_format")
    except (ValueError, KeyError):
        return
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    if fmt not in ("NHWC", ""):
        raise ctx_error(op, f"data_format {fmt}")


class LoweringError(Exception):
    """An op the converter cannot express in TFLite builtins (becomes ConverterError)."""

    def __init__(self, op_type: str, detail: str = ""):
        super().__init__(op_type, detail)
        self.op_type = op_type
        self.detail = detail


def ctx_error(op, detail: str) -> LoweringError:
    return LoweringError(op.type, detail)


def _conv2d(ctx, op):
    _nhwc(op)
    filt = ctx.const(op.inputs[1])
    if filt is None:
        raise ctx_error(op, "a non-constant filter")
    strides = list(op.get_attr("strides"))
    dil = list(op.get_attr("dilations")) if _has(op, "dilations") else [1, 1, 1, 1]
    w = np.ascontiguousarray(np.transpose(filt, (3, 0, 1, 2)))
    bias = np.zeros(w.shape[0], w.dtype)
    opts = {
        "padding": _padding(op),
        "stride_w": strides[2],
        "stride_h": strides[1],
        "fused_activation_function": 0,
        "dilation_w_factor": dil[2],
        "dilation_h_factor": dil[1],
    }
    ctx.emit(
        "CONV_2D",
        [ctx.value(op.inputs[0]), ctx.new_const(w, op.name), ctx.new_const(bias, op.name)],
        op,
        opts,
    )


def _depthwise(ctx, op):
    _nhwc(op)
    filt = ctx.const(op.inputs[1])
    if filt is None:
        raise ctx_error(op, "a non-constant filter")
    h, w_, c, m = filt.shape
    strides = list(op.get_attr("strides"))
    dil = list(op.get_attr("dilations")) if _has(op, "dilations") else [1, 1, 1, 1]
    w = np.ascontiguousarray(filt.reshape(1, h, w_, c * m))
    opts = {
        "padding": _padding(op),
        "stride_w": strides[2],
        "stride_h": strides[1],
        "depth_multiplier": m,
        "fused_activation_function": 0,
        "dilation_w_factor": dil[2],
        "dilation_h_factor": dil[1],
    }
    ctx.emit(
        "DEPTHWISE_CONV_2D",
        [
            ctx.value(op.inputs[0]),
            ctx.new_const(w, op.name),
            ctx.new_const(np.zeros(c * m, w.dtype), op.name),
        ],
        op,
        opts,
    )


def _has(op, attr) -> bool:
    try:
        op.get_attr(attr)
    except (ValueError, KeyError):
        return False
    return True


def _pool(kind):
    def lower(ctx, op):
        _nhwc(op)
        k, s = list(op.get_attr("ksize")), list(op.get_attr("strides"))
        opts = {
            "padding": _padding(op),
            "stride_w": s[2],
            "stride_h": s[1],
            "filter_width": k[2],
            "filter_height": k[1],
            "fused_activation_function": 0,
        }
        ctx.emit(kind, [ctx.value(op.inputs[0])], op, opts)

    return lower


def _matmul_like(ctx, op, adj_x: bool, adj_y: bool):
    b = ctx.const(op.inputs[1])
    if b is not None and b.ndim == 2 and not adj_x:
        # A constant 2-D right side is FULLY_CONNECTED's [units, depth] weights.
        w = np.ascontiguousarray(b if adj_y else b.T)
        keep = len(ctx.static_shape(op.inputs[0])) > 2
        opts = {"fused_activation_function": 0, "weights_format": 0, "keep_num_dims": keep}
        ctx.emit(
            "FULLY_CONNECTED", [ctx.value(op.inputs[0]), ctx.new_const(w, op.name), None], op, opts
        )
        return
    ctx.emit(
        "BATCH_MATMUL",
        [ctx.value(op.inputs[0]), ctx.value(op.inputs[1])],
        op,
        {"adj_x": adj_x, "adj_y": adj_y},
    )


def _matmul(ctx, op):
    _matmul_like(ctx, op, bool(op.get_attr("transpose_a")), bool(op.get_attr("transpose_b")))


def _batch_matmul(ctx, op):
    _matmul_like(ctx, op, bool(op.get_attr("adj_x")), bool(op.get_attr("adj_y")))


def _binary(kind):
    opts = {"fused_activation_function": 0}
    if kind in ("ADD", "SUB"):
        opts["pot_scale_int16"] = True
    if kind in ("MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"):
        opts = {}

    def lower(ctx, op):
        ctx.emit(kind, [ctx.value(t) for t in op.inputs[:2]], op, dict(opts))

    return lower


def _div(ctx, op):
    divisor = ctx.const(op.inputs[1])
    if divisor is not None and divisor.dtype.kind == "f":
        # TF's converter multiplies by the reciprocal of a constant divisor.
        recip = (np.float32(1) / divisor).astype(divisor.dtype)
        ctx.emit(
            "MUL",
            [ctx.value(op.inputs[0]), ctx.new_const(recip, op.inputs[1].op.name)],
            op,
            {"fused_activation_function": 0},
        )
        return
    ctx.emit("DIV", [ctx.value(t) for t in op.inputs[:2]], op, {"fused_activation_function": 0})


def _unary(kind, opts=None):
    def lower(ctx, op):
        ctx.emit(kind, [ctx.value(op.inputs[0])], op, dict(opts or {}))

    return lower


def _bias_add(ctx, op):
    _nhwc(op)
    ctx.emit(
        "ADD",
        [ctx.value(op.inputs[0]), ctx.value(op.inputs[1])],
        op,
        {"fused_activation_function": 0, "pot_scale_int16": True},
    )


def _fused_batch_norm(ctx, op):
    _nhwc(op)
    if op.get_attr("is_training"):
        raise ctx_error(op, "is_training=True")
    scale, offset, mean, var = (ctx.const(t) for t in op.inputs[1:5])
    if any(v is None for v in (scale, offset, mean, var)):
        raise ctx_error(op, "non-constant statistics")
    eps = np.float32(op.get_attr("epsilon"))
    mul = (scale / np.sqrt(var + eps)).astype(np.float32)
    add = (offset - mean * mul).astype(np.float32)
    mid = ctx.synthetic(op.name + "/mul:0", op.inputs[0])
    ctx.emit(
        "MUL",
        [ctx.value(op.inputs[0]), ctx.new_const(mul, op.name)],
        op,
        {"fused_activation_function": 0},
        outputs=[mid],
    )
    ctx.emit(
        "ADD",
        [mid, ctx.new_const(add, op.name)],
        op,
        {"fused_activation_function": 0, "pot_scale_int16": True},
        outputs=[op.outputs[0].name],
    )


def _reshape_to_output(ctx, op):
    shape = ctx.static_shape(op.outputs[0])
    if len(op.inputs) > 1 and op.type == "Reshape":
        given = ctx.const(op.inputs[1])
        if given is not None:
            shape = given
    ctx.emit("RESHAPE", [ctx.value(op.inputs[0]), ctx.new_const(_i32(shape), op.name)], op, {})


def _axes_input(ctx, op, i):
    axes = ctx.const(op.inputs[i])
    if axes is None:
        raise ctx_error(op, "non-constant axes")
    return ctx.new_const(_i32(axes), op.inputs[i].op.name)


def _reducer(kind):
    def lower(ctx, op):
        ctx.emit(
            kind,
            [ctx.value(op.inputs[0]), _axes_input(ctx, op, 1)],
            op,
            {"keep_dims": bool(op.get_attr("keep_dims"))},
        )

    return lower


def _concat(ctx, op):
    axis = ctx.const(op.inputs[-1])
    if axis is None:
        raise ctx_error(op, "a non-constant axis")
    ctx.emit(
        "CONCATENATION",
        [ctx.value(t) for t in op.inputs[:-1]],
        op,
        {"axis": int(axis), "fused_activation_function": 0},
    )


def _with_int32_inputs(kind, n_int, opts_fn=None):
    """Ops whose inputs after the first are int32 constants (paddings, perm, ...)."""

    def lower(ctx, op):
        ins = [ctx.value(op.inputs[0])]
        for i in range(1, 1 + n_int):
            ins.append(_axes_input(ctx, op, i))
        for t in op.inputs[1 + n_int :]:
            ins.append(ctx.value(t))
        ctx.emit(kind, ins, op, opts_fn(op) if opts_fn else {})

    return lower


def _strided_slice_opts(op):
    keys = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
    return dict({k: int(op.get_attr(k)) for k in keys}, offset=False)


def _pack(ctx, op):
    ctx.emit(
        "PACK",
        [ctx.value(t) for t in op.inputs],
        op,
        {"values_count": len(op.inputs), "axis": int(op.get_attr("axis"))},
    )


def _unpack(ctx, op):
    ctx.emit(
        "UNPACK",
        [ctx.value(op.inputs[0])],
        op,
        {"num": len(op.outputs), "axis": int(op.get_attr("axis"))},
    )


def _gather(ctx, op):
    axis = ctx.const(op.inputs[2]) if len(op.inputs) > 2 else np.int32(0)
    if axis is None:
        raise ctx_error(op, "a non-constant axis")
    batch_dims = int(op.get_attr("batch_dims")) if _has(op, "batch_dims") else 0
    ctx.emit(
        "GATHER",
        [ctx.value(op.inputs[0]), ctx.value(op.inputs[1], int32=True)],
        op,
        {"axis": int(axis), "batch_dims": batch_dims},
    )


def _cast(ctx, op):
    src, dst = op.inputs[0].dtype.as_numpy_dtype, op.outputs[0].dtype.as_numpy_dtype
    codes = [schema.NUMPY_TENSOR.get(np.dtype(d)) for d in (src, dst)]
    if None in codes:
        raise ctx_error(op, f"a cast to {np.dtype(dst)}")
    ctx.emit(
        "CAST",
        [ctx.value(op.inputs[0])],
        op,
        {"in_data_type": codes[0], "out_data_type": codes[1]},
    )


def _identity(ctx, op):
    for out, src in zip(op.outputs, op.inputs, strict=False):
        ctx.alias(out, src)


def _plain(kind, opts=None):
    """Ops whose TFLite form reads the same inputs and has no (or fixed) options."""

    def lower(ctx, op):
        ctx.emit(kind, [ctx.value(t) for t in op.inputs], op, dict(opts or {}))

    return lower


_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


def _selu(ctx, op):
    # TF's converter: select(x > 0, scale * x, scale * alpha * (exp(x) - 1)).
    x, like, f32 = ctx.value(op.inputs[0]), op.inputs[0], np.float32
    mul = {"fused_activation_function": 0}
    name = op.name
    pos = ctx.synthetic(f"{name}/Greater:0", like, np.bool_)
    ctx.emit("GREATER", [x, ctx.new_const(f32(0), name)], op, {}, outputs=[pos])
    scaled = ctx.synthetic(f"{name}/mul:0", like)
    ctx.emit("MUL", [x, ctx.new_const(f32(_SELU_SCALE), name)], op, mul, outputs=[scaled])
    exp = ctx.synthetic(f"{name}/Exp:0", like)
    ctx.emit("EXP", [x], op, {}, outputs=[exp])
    em1 = ctx.synthetic(f"{name}/sub:0", like)
    ctx.emit(
        "SUB",
        [exp, ctx.new_const(f32(1), name)],
        op,
        {"fused_activation_function": 0, "pot_scale_int16": True},
        outputs=[em1],
    )
    neg = ctx.synthetic(f"{name}/mul_1:0", like)
    ctx.emit(
        "MUL", [em1, ctx.new_const(f32(_SELU_SCALE * _SELU_ALPHA), name)], op, mul, outputs=[neg]
    )
    ctx.emit("SELECT", [pos, scaled, neg], op, {})


def _softplus(ctx, op):
    # TF's converter: log(exp(x) + 1).
    x, like = ctx.value(op.inputs[0]), op.inputs[0]
    exp = ctx.synthetic(f"{op.name}/Exp:0", like)
    ctx.emit("EXP", [x], op, {}, outputs=[exp])
    plus = ctx.synthetic(f"{op.name}/add:0", like)
    ctx.emit(
        "ADD",
        [exp, ctx.new_const(np.float32(1), op.name)],
        op,
        {"fused_activation_function": 0, "pot_scale_int16": True},
        outputs=[plus],
    )
    ctx.emit("LOG", [plus], op, {})


def _softsign(ctx, op):
    # TF's converter: x / (|x| + 1).
    x, like = ctx.value(op.inputs[0]), op.inputs[0]
    mag = ctx.synthetic(f"{op.name}/Abs:0", like)
    ctx.emit("ABS", [x], op, {}, outputs=[mag])
    plus = ctx.synthetic(f"{op.name}/add:0", like)
    ctx.emit(
        "ADD",
        [mag, ctx.new_const(np.float32(1), op.name)],
        op,
        {"fused_activation_function": 0, "pot_scale_int16": True},
        outputs=[plus],
    )
    ctx.emit("DIV", [x, plus], op, {"fused_activation_function": 0})


def _mirror_pad(ctx, op):
    mode = op.get_attr("mode")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    ctx.emit(
        "MIRROR_PAD",
        [ctx.value(op.inputs[0]), _axes_input(ctx, op, 1)],
        op,
        {"mode": 0 if mode.upper() == "REFLECT" else 1},
    )


def _lrn(ctx, op):
    opts = {
        "radius": int(op.get_attr("depth_radius")),
        "bias": float(op.get_attr("bias")),
        "alpha": float(op.get_attr("alpha")),
        "beta": float(op.get_attr("beta")),
    }
    ctx.emit("LOCAL_RESPONSE_NORMALIZATION", [ctx.value(op.inputs[0])], op, opts)


def _pow(ctx, op):
    exponent = ctx.const(op.inputs[1])
    if exponent is not None and exponent.size == 1 and float(exponent.reshape(())) == 2.0:
        x = ctx.value(op.inputs[0])  # TF's converter squares by multiplying
        ctx.emit("MUL", [x, x], op, {"fused_activation_function": 0})
        return
    ctx.emit("POW", [ctx.value(t) for t in op.inputs], op, {})


def _arg(kind):
    def lower(ctx, op):
        out = schema.NUMPY_TENSOR[np.dtype(op.outputs[0].dtype.as_numpy_dtype)]
        ctx.emit(
            kind, [ctx.value(op.inputs[0]), _axes_input(ctx, op, 1)], op, {"output_type": out}
        )

    return lower


def _split(ctx, op):
    ctx.emit(
        "SPLIT",
        [_axes_input(ctx, op, 0), ctx.value(op.inputs[1])],
        op,
        {"num_splits": len(op.outputs)},
    )


def _split_v(ctx, op):
    ctx.emit(
        "SPLIT_V",
        [ctx.value(op.inputs[0]), _axes_input(ctx, op, 1), _axes_input(ctx, op, 2)],
        op,
        {"num_splits": len(op.outputs)},
    )


def _resize(kind):
    def lower(ctx, op):
        opts = {
            "align_corners": bool(op.get_attr("align_corners")),
            "half_pixel_centers": bool(op.get_attr("half_pixel_centers"))
            if _has(op, "half_pixel_centers")
            else False,
        }
        ctx.emit(kind, [ctx.value(op.inputs[0]), _axes_input(ctx, op, 1)], op, opts)

    return lower


def _block(kind):
    def lower(ctx, op):
        _nhwc(op)
        ctx.emit(
            kind, [ctx.value(op.inputs[0])], op, {"block_size": int(op.get_attr("block_size"))}
        )

    return lower


def _conv_transpose(ctx, op):
    _nhwc(op)
    filt = ctx.const(op.inputs[1])
    if filt is None:
        raise ctx_error(op, "a non-constant filter")
    dil = list(op.get_attr("dilations")) if _has(op, "dilations") else [1, 1, 1, 1]
    if dil != [1, 1, 1, 1]:
        raise ctx_error(op, "dilations")
    strides = list(op.get_attr("strides"))
    w = np.ascontiguousarray(np.transpose(filt, (2, 0, 1, 3)))
    opts = {
        "padding": _padding(op),
        "stride_w": strides[2],
        "stride_h": strides[1],
        "fused_activation_function": 0,
    }
    ctx.emit(
        "TRANSPOSE_CONV",
        [_axes_input(ctx, op, 0), ctx.new_const(w, op.name), ctx.value(op.inputs[2])],
        op,
        opts,
    )


def _leaky_relu(ctx, op):
    ctx.emit("LEAKY_RELU", [ctx.value(op.inputs[0])], op, {"alpha": float(op.get_attr("alpha"))})


LOWERINGS = {
    "Conv2D": _conv2d,
    "DepthwiseConv2dNative": _depthwise,
    "MaxPool": _pool("MAX_POOL_2D"),
    "AvgPool": _pool("AVERAGE_POOL_2D"),
    "MatMul": _matmul,
    "BatchMatMul": _batch_matmul,
    "BatchMatMulV2": _batch_matmul,
    "BatchMatMulV3": _batch_matmul,
    "BiasAdd": _bias_add,
    "FusedBatchNorm": _fused_batch_norm,
    "FusedBatchNormV2": _fused_batch_norm,
    "FusedBatchNormV3": _fused_batch_norm,
    "Add": _binary("ADD"),
    "AddV2": _binary("ADD"),
    "Sub": _binary("SUB"),
    "Mul": _binary("MUL"),
    "RealDiv": _div,
    "Div": _div,
    "Maximum": _binary("MAXIMUM"),
    "Minimum": _binary("MINIMUM"),
    "SquaredDifference": _binary("SQUARED_DIFFERENCE"),
    "Relu": _unary("RELU"),
    "Relu6": _unary("RELU6"),
    "Sigmoid": _unary("LOGISTIC"),
    "Tanh": _unary("TANH"),
    "Elu": _unary("ELU"),
    "LeakyRelu": _leaky_relu,
    "Softmax": _unary("SOFTMAX", {"beta": 1.0}),
    "LogSoftmax": _unary("LOG_SOFTMAX"),
    "Exp": _unary("EXP"),
    "Log": _unary("LOG"),
    "Sqrt": _unary("SQRT"),
    "Rsqrt": _unary("RSQRT"),
    "Square": _unary("SQUARE"),
    "Neg": _unary("NEG"),
    "Abs": _unary("ABS"),
    "Sin": _unary("SIN"),
    "Cos": _unary("COS"),
    "Floor": _unary("FLOOR"),
    "Ceil": _unary("CEIL"),
    "Reshape": _reshape_to_output,
    "Squeeze": _reshape_to_output,
    "ExpandDims": _reshape_to_output,
    "Mean": _reducer("MEAN"),
    "Sum": _reducer("SUM"),
    "Max": _reducer("REDUCE_MAX"),
    "Min": _reducer("REDUCE_MIN"),
    "Prod": _reducer("REDUCE_PROD"),
    "ConcatV2": _concat,
    "Pad": _with_int32_inputs("PAD", 1),
    "PadV2": _with_int32_inputs("PADV2", 1),
    "Transpose": _with_int32_inputs("TRANSPOSE", 1),
    "StridedSlice": _with_int32_inputs("STRIDED_SLICE", 3, _strided_slice_opts),
    "Slice": _with_int32_inputs("SLICE", 2),
    "Tile": _with_int32_inputs("TILE", 1),
    "Pack": _pack,
    "Unpack": _unpack,
    "GatherV2": _gather,
    "Gather": _gather,
    "Cast": _cast,
    "Identity": _identity,
    "IdentityN": _identity,
    "Less": _plain("LESS"),
    "LessEqual": _plain("LESS_EQUAL"),
    "Greater": _plain("GREATER"),
    "GreaterEqual": _plain("GREATER_EQUAL"),
    "Equal": _plain("EQUAL"),
    "NotEqual": _plain("NOT_EQUAL"),
    "LogicalAnd": _plain("LOGICAL_AND"),
    "LogicalOr": _plain("LOGICAL_OR"),
    "LogicalNot": _plain("LOGICAL_NOT"),
    "Select": _plain("SELECT"),
    "SelectV2": _plain("SELECT_V2"),
    "Pow": _pow,
    "Selu": _selu,
    "Softplus": _softplus,
    "Softsign": _softsign,
    "AddN": _plain("ADD_N"),
    "MirrorPad": _mirror_pad,
    "LRN": _lrn,
    "FloorDiv": _plain("FLOOR_DIV"),
    "FloorMod": _plain("FLOOR_MOD"),
    "Round": _unary("ROUND"),
    "Sign": _unary("SIGN"),
    "Any": _reducer("REDUCE_ANY"),
    "ReverseV2": _with_int32_inputs("REVERSE_V2", 1),
    "ArgMax": _arg("ARG_MAX"),
    "ArgMin": _arg("ARG_MIN"),
    "Split": _split,
    "SplitV": _split_v,
    "ResizeBilinear": _resize("RESIZE_BILINEAR"),
    "ResizeNearestNeighbor": _resize("RESIZE_NEAREST_NEIGHBOR"),
    "SpaceToDepth": _block("SPACE_TO_DEPTH"),
    "DepthToSpace": _block("DEPTH_TO_SPACE"),
    "Conv2DBackpropInput": _conv_transpose,
    "StopGradient": _identity,
    "Snapshot": _identity,
    "PreventGradient": _identity,
}
