"""cuDNN's recurrent ops: CudnnRNN / CudnnRNNV2 / CudnnRNNV3 and their gradients
CudnnRNNBackprop(V2, V3), CudnnRNNParamsSize, and the conversions between TF's
canonical weights and biases and cuDNN's opaque parameter buffer
(CudnnRNNCanonicalToParams(V2), CudnnRNNParamsToCanonical(V2)).  V3 is what
`keras.layers.CuDNNGRU` / `CuDNNLSTM` build; V3 adds `sequence_lengths`, `time_major`
and an LSTM's `num_proj`.

TF 2.21 registers GPU kernels only, for every one of them: on a CPU a session fails with
InvalidArgumentError ("No OpKernel was registered to support Op 'CudnnRNN' ..."), and
so do these CPU kernels.  The GPU kernels compute with the device's array module
(ops/cudnn_rnn_math.py: the buffer's layout, the equations, the gradient) any number of
layers, one or two directions, modes lstm / gru / rnn_tanh / rnn_relu, linear input.

Not done here (UnimplementedError): input_mode "skip_input", and dropout between the
layers of a network of several layers while training (cuDNN draws its own mask).
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import cudnn_rnn_math as _m
from asyncflow.ops import gradient_ops as _g
from asyncflow.registry import REQUIRED, TypeConstraint, register_op

__all__ = [
    "CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "CudnnRNNBackprop", "CudnnRNNBackpropV2",
    "CudnnRNNBackpropV3", "CudnnRNNParamsSize", "CudnnRNNCanonicalToParams",
    "CudnnRNNCanonicalToParamsV2", "CudnnRNNParamsToCanonical", "CudnnRNNParamsToCanonicalV2",
]  # fmt: skip

_T = TypeConstraint(["bfloat16", "float16", "float32", "float64"])
_RNN_ATTRS = {
    "T": _T,
    "rnn_mode": "lstm",
    "input_mode": "linear_input",
    "direction": "unidirectional",
    "dropout": 0.0,
    "seed": 0,
    "seed2": 0,
}
_ATTRS = {**_RNN_ATTRS, "num_proj": 0, "time_major": True}  # (V3's)
_ATTR_ORDER = ("rnn_mode", "dropout", "is_training", "time_major", "seed2", "input_mode",
               "seed", "T", "num_params", "num_params_weights", "num_params_biases",
               "num_proj", "direction", "S")  # fmt: skip
_DT_NAMES = {"float16": "HALF", "float32": "FLOAT", "float64": "DOUBLE", "int32": "INT32",
             "int64": "INT64"}  # fmt: skip


def _bad(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- shapes -------------------------------------------------------------------------------


def _dirs(op) -> int:
    return 2 if op._attr("direction") == "bidirectional" else 1


def _output_shape(op, time_major=True):
    x = op.inputs[0].shape.with_rank(3)
    h = op.inputs[1].shape.with_rank(3)
    steps, batch = (x[0], x[1]) if time_major else (x[1], x[0])
    width = h[2] * _dirs(op) if h[2] is not None else None
    return tensor_shape.TensorShape([steps, batch, width] if time_major else [batch, steps, width])


def _v1_shape(op):
    """CudnnRNN(V2): an LSTM's output_c has output_h's shape; other modes' a scalar."""
    out = _output_shape(op)
    h = op.inputs[1].shape
    c = h if op._attr("rnn_mode") == "lstm" else tensor_shape.TensorShape([])
    shapes = [out, h, c, tensor_shape.unknown_shape()]
    return shapes + ([tensor_shape.unknown_shape()] if op.type == "CudnnRNNV2" else [])


def _v3_shape(op):
    out = _output_shape(op, op._attr("time_major"))
    c = op.inputs[2].shape if op._attr("rnn_mode") == "lstm" else tensor_shape.TensorShape([])
    unknown = tensor_shape.unknown_shape()
    return [out, op.inputs[1].shape, c, unknown, unknown]


def _backprop_shape(op):
    return [op.inputs[k].shape for k in range(4)]


_FORWARD_IN = ["input: T", "input_h: T", "input_c: T", "params: T"]
_BACKWARD_IN = ["output: T", "output_h: T", "output_c: T", "output_backprop: T",
                "output_h_backprop: T", "output_c_backprop: T", "reserve_space: T"]  # fmt: skip
_BACKWARD_OUT = ["input_backprop: T", "input_h_backprop: T", "input_c_backprop: T",
                 "params_backprop: T"]  # fmt: skip
_OUT = ["output: T", "output_h: T", "output_c: T", "reserve_space: T"]

CudnnRNN = register_op(
    "CudnnRNN", inputs=_FORWARD_IN, outputs=_OUT, attrs={**_RNN_ATTRS, "is_training": True},
    shape_fn=_v1_shape, stateful=True,
)  # fmt: skip
CudnnRNNV2 = register_op(
    "CudnnRNNV2", inputs=_FORWARD_IN, outputs=[*_OUT, "host_reserved: int8"],
    attrs={**_RNN_ATTRS, "is_training": True}, shape_fn=_v1_shape, stateful=True,
)  # fmt: skip
CudnnRNNV3 = register_op(
    "CudnnRNNV3", inputs=[*_FORWARD_IN, "sequence_lengths: int32"],
    outputs=[*_OUT, "host_reserved: int8"], attrs={**_ATTRS, "is_training": True},
    shape_fn=_v3_shape, stateful=True,
)  # fmt: skip
CudnnRNNBackprop = register_op(
    "CudnnRNNBackprop", inputs=_FORWARD_IN + _BACKWARD_IN, outputs=_BACKWARD_OUT,
    attrs=dict(_RNN_ATTRS), shape_fn=_backprop_shape, stateful=True,
)  # fmt: skip
CudnnRNNBackpropV2 = register_op(
    "CudnnRNNBackpropV2", inputs=[*_FORWARD_IN, *_BACKWARD_IN, "host_reserved: int8"],
    outputs=_BACKWARD_OUT, attrs=dict(_RNN_ATTRS), shape_fn=_backprop_shape, stateful=True,
)  # fmt: skip
CudnnRNNBackpropV3 = register_op(
    "CudnnRNNBackpropV3",
    inputs=[*_FORWARD_IN, "sequence_lengths: int32", *_BACKWARD_IN, "host_reserved: int8"],
    outputs=_BACKWARD_OUT, attrs=dict(_ATTRS), shape_fn=_backprop_shape, stateful=True,
)  # fmt: skip

_SIZES_IN = ["num_layers: int32", "num_units: int32", "input_size: int32"]


def _scalar_sizes(op) -> None:
    for t in op.inputs[:3]:
        t.shape.with_rank(0)


CudnnRNNParamsSize = register_op(
    "CudnnRNNParamsSize", inputs=_SIZES_IN, outputs=["params_size: S"],
    attrs={**_RNN_ATTRS, "S": TypeConstraint(["int32", "int64"]), "num_proj": 0},
    shape_fn=lambda op: _scalar_sizes(op) or [tensor_shape.TensorShape([1])],
)  # fmt: skip


def _to_params_shape(op):
    _scalar_sizes(op)
    return [tensor_shape.TensorShape([None])]


def _to_canonical_shape(op):
    _scalar_sizes(op)
    if op.type == "CudnnRNNParamsToCanonical":
        nw = nb = op._attr("num_params")
    else:
        nw, nb = op._attr("num_params_weights"), op._attr("num_params_biases")
    return [tensor_shape.TensorShape([None, None])] * nw + [tensor_shape.TensorShape([None])] * nb


CudnnRNNCanonicalToParams = register_op(
    "CudnnRNNCanonicalToParams",
    inputs=[*_SIZES_IN, "weights: num_params * T", "biases: num_params * T"],
    outputs=["params: T"], attrs={**_RNN_ATTRS, "num_params": REQUIRED},
    shape_fn=_to_params_shape,
)  # fmt: skip
CudnnRNNCanonicalToParamsV2 = register_op(
    "CudnnRNNCanonicalToParamsV2",
    inputs=[*_SIZES_IN, "weights: num_params_weights * T", "biases: num_params_biases * T"],
    outputs=["params: T"],
    attrs={**_RNN_ATTRS, "num_params_weights": REQUIRED, "num_params_biases": REQUIRED,
           "num_proj": 0},  # fmt: skip
    shape_fn=_to_params_shape,
)  # fmt: skip
CudnnRNNParamsToCanonical = register_op(
    "CudnnRNNParamsToCanonical", inputs=[*_SIZES_IN, "params: T"],
    outputs=["weights: num_params * T", "biases: num_params * T"],
    attrs={**_RNN_ATTRS, "num_params": REQUIRED}, shape_fn=_to_canonical_shape,
)  # fmt: skip
CudnnRNNParamsToCanonicalV2 = register_op(
    "CudnnRNNParamsToCanonicalV2", inputs=[*_SIZES_IN, "params: T"],
    outputs=["weights: num_params_weights * T", "biases: num_params_biases * T"],
    attrs={**_RNN_ATTRS, "num_params_weights": REQUIRED, "num_params_biases": REQUIRED,
           "num_proj": 0},  # fmt: skip
    shape_fn=_to_canonical_shape,
)  # fmt: skip

_ALL = (CudnnRNN, CudnnRNNV2, CudnnRNNV3, CudnnRNNBackprop, CudnnRNNBackpropV2,
        CudnnRNNBackpropV3, CudnnRNNParamsSize, CudnnRNNCanonicalToParams,
        CudnnRNNCanonicalToParamsV2, CudnnRNNParamsToCanonical,
        CudnnRNNParamsToCanonicalV2)  # fmt: skip


# -- CPU: TF's "no kernel" failure ------------------------------------------------------------


def _no_cpu_kernel(ctx) -> errors.InvalidArgumentError:
    a = ctx.attrs
    shown = []
    for k in (*_ATTR_ORDER, *sorted(set(a) - set(_ATTR_ORDER))):
        if k not in a:
            continue
        v = a[k]
        if isinstance(v, dtypes.DType):
            shown.append(f"{k}=DT_{_DT_NAMES.get(v.name, v.name.upper())}")
        elif isinstance(v, str):
            shown.append(f'{k}="{v}"')
        elif isinstance(v, bool):
            shown.append(f"{k}={str(v).lower()}")
        elif isinstance(v, float):
            shown.append(f"{k}={v:g}")
        else:
            shown.append(f"{k}={v}")
    s = "; S in [DT_INT32]" if ctx.op.type == "CudnnRNNParamsSize" else ""
    kernels = "".join(
        f"\n  device='GPU'; T in [DT_{t}]{s}" for t in ("DOUBLE", "FLOAT", "BFLOAT16", "HALF")
    )
    return _bad(
        f"No OpKernel was registered to support Op '{ctx.op.type}' used by "
        f"{{{{node {ctx.op.name}}}}} with these attrs: [{', '.join(shown)}]\n"
        f"Registered devices: [CPU]\nRegistered kernels:{kernels}\n"
    )


async def _cpu_kernel(ctx, *args):
    raise _no_cpu_kernel(ctx)


for _op in _ALL:
    _op.kernel("CPU")(_cpu_kernel)


# -- GPU: the computation -----------------------------------------------------------------


def _common(ctx, layers: int, num_proj: int = 0) -> tuple:
    """(mode, directions), refusing what is not done here."""
    a = ctx.attrs
    mode, dirs = a["rnn_mode"], 2 if a["direction"] == "bidirectional" else 1
    if mode not in _m.GATES:
        raise _bad(f"{ctx.op.type}: invalid rnn_mode '{mode}'")
    if a["direction"] not in ("unidirectional", "bidirectional"):
        raise _bad(f"{ctx.op.type}: invalid direction '{a['direction']}'")
    if a["input_mode"] not in ("linear_input", "auto_select"):
        raise errors.UnimplementedError(
            None, None, f"{ctx.op.type}: input_mode '{a['input_mode']}' is not supported here"
        )
    if a.get("is_training", True) and a["dropout"] > 0 and layers > 1:
        raise errors.UnimplementedError(
            None, None, f"{ctx.op.type}: dropout between layers is not supported here"
        )
    if num_proj and mode != "lstm":
        raise _bad(f"{ctx.op.type}: num_proj is only for an lstm, not '{mode}'")
    return mode, dirs


def _layout(ctx, x, h, c, params, time_major=True) -> _m.Layout:
    """The network a forward or backward kernel's inputs describe, checked."""
    if x.ndim != 3 or h.ndim != 3:
        raise _bad(f"{ctx.op.type}: input and input_h must be 3-D, got {x.shape} and {h.shape}")
    num_proj = ctx.attrs.get("num_proj", 0)
    dirs = 2 if ctx.attrs["direction"] == "bidirectional" else 1
    if h.shape[0] % dirs or h.shape[0] == 0:
        raise _bad(
            f"{ctx.op.type}: input_h's first dimension ({h.shape[0]}) must be num_layers * "
            f"{dirs} directions"
        )
    layers = h.shape[0] // dirs
    mode, dirs = _common(ctx, layers, num_proj)
    batch = x.shape[1] if time_major else x.shape[0]
    units = c.shape[2] if num_proj and c.ndim == 3 else h.shape[2]
    lay = _m.Layout(mode, layers, dirs, units, x.shape[2], num_proj)
    if h.shape[1:] != (batch, lay.out_units):
        raise _bad(f"{ctx.op.type}: input_h must be [{h.shape[0]}, {batch}, {lay.out_units}], "
                   f"got {list(h.shape)}")  # fmt: skip
    if mode == "lstm" and c.shape != (h.shape[0], batch, units):
        raise _bad(f"{ctx.op.type}: input_c must be [{h.shape[0]}, {batch}, {units}], "
                   f"got {list(c.shape)}")  # fmt: skip
    if params.shape != (lay.size(),):
        raise _bad(
            f"{ctx.op.type}: params must hold {lay.size()} values for this network, got "
            f"shape {list(params.shape)}"
        )
    return lay


def _forward(xp, lay, time_major, v3, x, h0, c0, params, lengths):
    if not time_major:
        x = xp.swapaxes(x, 0, 1)
    out, h, c, _ = _m.forward(xp, lay, x, h0, c0, params, lengths)
    if not time_major:
        out = xp.swapaxes(out, 0, 1)
    outs = (out, h, c, xp.zeros((0,), x.dtype))
    return outs if v3 is None else (*outs, xp.zeros((0,), "int8"))


def _backward(xp, lay, time_major, x, h0, c0, params, lengths, d_out, dh, dc):
    if not time_major:
        x, d_out = xp.swapaxes(x, 0, 1), xp.swapaxes(d_out, 0, 1)
    dx, dh0, dc0, dp = _m.backward(xp, lay, x, h0, c0, params, d_out, dh, dc, lengths)
    if not time_major:
        dx = xp.swapaxes(dx, 0, 1)
    return dx, dh0, dc0, dp


@CudnnRNN.kernel("GPU")
async def _cudnn_rnn_gpu(ctx, x, h, c, params):
    lay = _layout(ctx, x, h, c, params)
    return await ctx.device.compute(_forward, ctx.xp, lay, True, None, x, h, c, params, None)


@CudnnRNNV2.kernel("GPU")
async def _cudnn_rnn_v2_gpu(ctx, x, h, c, params):
    lay = _layout(ctx, x, h, c, params)
    return await ctx.device.compute(_forward, ctx.xp, lay, True, False, x, h, c, params, None)


@CudnnRNNV3.kernel("GPU")
async def _cudnn_rnn_v3_gpu(ctx, x, h, c, params, lengths):
    time_major = ctx.attrs["time_major"]
    lay = _layout(ctx, x, h, c, params, time_major)
    return await ctx.device.compute(
        _forward, ctx.xp, lay, time_major, True, x, h, c, params, lengths
    )


@CudnnRNNBackprop.kernel("GPU")
async def _cudnn_rnn_backprop_gpu(ctx, x, h, c, params, out, out_h, out_c, d_out, dh, dc,
                                  reserve):  # fmt: skip
    lay = _layout(ctx, x, h, c, params)
    return await ctx.device.compute(
        _backward, ctx.xp, lay, True, x, h, c, params, None, d_out, dh, dc
    )


@CudnnRNNBackpropV2.kernel("GPU")
async def _cudnn_rnn_backprop_v2_gpu(ctx, x, h, c, params, out, out_h, out_c, d_out, dh, dc,
                                     reserve, host_reserved):  # fmt: skip
    lay = _layout(ctx, x, h, c, params)
    return await ctx.device.compute(
        _backward, ctx.xp, lay, True, x, h, c, params, None, d_out, dh, dc
    )


@CudnnRNNBackpropV3.kernel("GPU")
async def _cudnn_rnn_backprop_v3_gpu(ctx, x, h, c, params, lengths, out, out_h, out_c, d_out,
                                     dh, dc, reserve, host_reserved):  # fmt: skip
    time_major = ctx.attrs["time_major"]
    lay = _layout(ctx, x, h, c, params, time_major)
    return await ctx.device.compute(
        _backward, ctx.xp, lay, time_major, x, h, c, params, lengths, d_out, dh, dc
    )


# -- sizes and the canonical <-> opaque conversions (host-side sizes) -----------------------

_HOST_SIZES = ("num_layers", "num_units", "input_size")


def _sizes_layout(ctx, num_layers, num_units, input_size) -> _m.Layout:
    sizes = []
    for name, v in zip(_HOST_SIZES, (num_layers, num_units, input_size)):
        a = np.asarray(v)
        if a.shape != ():
            raise _bad(f"{ctx.op.type}: {name} must be a scalar, got shape {list(a.shape)}")
        if int(a) <= 0:
            raise _bad(f"{ctx.op.type}: {name} must be positive, got {int(a)}")
        sizes.append(int(a))
    num_proj = ctx.attrs.get("num_proj", 0)
    mode, dirs = _common(ctx, sizes[0], num_proj)
    if num_proj < 0 or num_proj > sizes[1]:
        raise _bad(f"{ctx.op.type}: num_proj must be between 0 and num_units, got {num_proj}")
    return _m.Layout(mode, sizes[0], dirs, sizes[1], sizes[2], num_proj)


@CudnnRNNParamsSize.kernel("GPU", host_memory=(*_HOST_SIZES, "params_size"))
async def _params_size_gpu(ctx, num_layers, num_units, input_size):
    lay = _sizes_layout(ctx, num_layers, num_units, input_size)
    return np.array([lay.size()], dtype=ctx.attrs["S"].as_numpy_dtype)


def _counts(ctx) -> tuple[int, int]:
    a = ctx.attrs
    if "num_params" in a:
        return a["num_params"], a["num_params"]
    return a["num_params_weights"], a["num_params_biases"]


def _check_counts(ctx, lay) -> tuple[list, list]:
    ws, bs = lay.weight_shapes(), lay.bias_shapes()
    nw, nb = _counts(ctx)
    if (nw, nb) != (len(ws), len(bs)):
        raise _bad(
            f"{ctx.op.type}: this network has {len(ws)} weights and {len(bs)} biases, the "
            f"op's attrs say {nw} and {nb}"
        )
    return ws, bs


def _to_params(xp, weights, biases):
    return xp.concatenate([a.reshape(-1) for a in (*weights, *biases)])


def _to_canonical(xp, lay, params):
    weights, biases = lay.split(params)
    return (*(w.copy() for w in weights), *(b.copy() for b in biases))


async def _canonical_to_params_gpu(ctx, num_layers, num_units, input_size, *tensors):
    lay = _sizes_layout(ctx, num_layers, num_units, input_size)
    ws, bs = _check_counts(ctx, lay)
    weights, biases = tensors[: len(ws)], tensors[len(ws) :]
    for kind, given, shapes in (("weight", weights, ws), ("bias", biases, bs)):
        for i, (t, shape) in enumerate(zip(given, shapes)):
            if t.size != int(np.prod(shape)):
                raise _bad(
                    f"{ctx.op.type}: {kind} {i} must hold {int(np.prod(shape))} values "
                    f"({list(shape)}), got shape {list(t.shape)}"
                )
    return await ctx.device.compute(_to_params, ctx.xp, weights, biases)


async def _params_to_canonical_gpu(ctx, num_layers, num_units, input_size, params):
    lay = _sizes_layout(ctx, num_layers, num_units, input_size)
    _check_counts(ctx, lay)
    if params.ndim != 1 or params.shape[0] != lay.size():
        raise _bad(
            f"{ctx.op.type}: params must hold {lay.size()} values for this network, got "
            f"shape {list(params.shape)}"
        )
    return await ctx.device.compute(_to_canonical, ctx.xp, lay, params)


for _op in (CudnnRNNCanonicalToParams, CudnnRNNCanonicalToParamsV2):
    _op.kernel("GPU", host_memory=_HOST_SIZES)(_canonical_to_params_gpu)
for _op in (CudnnRNNParamsToCanonical, CudnnRNNParamsToCanonicalV2):
    _op.kernel("GPU", host_memory=_HOST_SIZES)(_params_to_canonical_gpu)


# -- gradients (TF 2.21 registers one for each forward op, none for the others) ------------


def _backprop(op, grads, back_type, extra_outputs):
    outs = op.outputs
    grads = [g if g is not None else _g.zeros_like(o) for g, o in zip(grads, outs[:3])]
    names = _ATTRS if back_type == "CudnnRNNBackpropV3" else _RNN_ATTRS
    attrs = {k: op._attr(k) for k in names if k != "T"}
    inputs = [*op.inputs, *outs[:3], *grads, *outs[3 : 3 + extra_outputs]]
    back = ops.apply_op(back_type, inputs, attrs).outputs
    return [back[0], back[1], back[2], back[3]] + [None] * (len(op.inputs) - 4)


@CudnnRNN.gradient
def _cudnn_rnn_grad(op, d_out, dh, dc, d_reserve):
    return _backprop(op, (d_out, dh, dc), "CudnnRNNBackprop", 1)


@CudnnRNNV2.gradient
def _cudnn_rnn_v2_grad(op, d_out, dh, dc, d_reserve, d_host):
    return _backprop(op, (d_out, dh, dc), "CudnnRNNBackpropV2", 2)


@CudnnRNNV3.gradient
def _cudnn_rnn_v3_grad(op, d_out, dh, dc, d_reserve, d_host):
    return _backprop(op, (d_out, dh, dc), "CudnnRNNBackpropV3", 2)
