"""cuDNN's recurrent ops, CudnnRNNV3 and its gradient CudnnRNNBackpropV3, as
`keras.layers.CuDNNGRU` / `CuDNNLSTM` build them.

TF 2.21 registers GPU kernels only: on a CPU a session fails with InvalidArgumentError
("No OpKernel was registered to support Op 'CudnnRNNV3' ..."), and so do these CPU
kernels.  The GPU kernels compute one unidirectional layer (linear input, no
projection, no dropout: what the Keras layers ask for) with the device's array module.

`params` is cuDNN's opaque buffer in TF's canonical order: each gate's input weights
(units, input_size) row-major, then each gate's recurrent weights (units, units), then
each gate's input biases, then each gate's recurrent biases.  Gates are (i, f, c, o) for
an LSTM and (r, z, h) for a GRU, whose candidate applies the reset gate after the
recurrent product: h~ = tanh(W_h x + b_Wh + r * (R_h h + b_Rh)), h' = (1-z) h~ + z h.
A batch entry's steps past its `sequence_lengths` leave its state as it was and output
zeros.  The gradient recomputes the forward pass (the reserve space holds nothing).
"""

from __future__ import annotations

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import gradient_ops as _g
from asyncflow.registry import TypeConstraint, register_op

__all__ = ["CudnnRNNV3", "CudnnRNNBackpropV3"]

_T = TypeConstraint(["float16", "float32", "float64"])
_ATTRS = {
    "T": _T,
    "rnn_mode": "lstm",
    "input_mode": "linear_input",
    "direction": "unidirectional",
    "dropout": 0.0,
    "seed": 0,
    "seed2": 0,
    "num_proj": 0,
    "time_major": True,
}
_ATTR_ORDER = ("rnn_mode", "dropout", "is_training", "time_major", "seed2", "input_mode",
               "seed", "T", "num_proj", "direction")  # fmt: skip
_GATES = {"lstm": 4, "gru": 3}
_DT_NAMES = {"float32": "FLOAT", "float64": "DOUBLE"}


def _forward_shape(op):
    x = op.inputs[0].shape.with_rank(3)
    h = op.inputs[1].shape.with_rank(3)
    time_major = op._attr("time_major")
    steps, batch = (x[0], x[1]) if time_major else (x[1], x[0])
    seq = [steps, batch, h[2]] if time_major else [batch, steps, h[2]]
    return [
        tensor_shape.TensorShape(seq),
        h,
        op.inputs[2].shape,
        tensor_shape.unknown_shape(),
        tensor_shape.unknown_shape(),
    ]


CudnnRNNV3 = register_op(
    "CudnnRNNV3",
    inputs=["input: T", "input_h: T", "input_c: T", "params: T", "sequence_lengths: int32"],
    outputs=[
        "output: T",
        "output_h: T",
        "output_c: T",
        "reserve_space: T",
        "host_reserved: int8",
    ],  # fmt: skip
    attrs={**_ATTRS, "is_training": True},
    shape_fn=_forward_shape,
    stateful=True,
)

CudnnRNNBackpropV3 = register_op(
    "CudnnRNNBackpropV3",
    inputs=[
        "input: T",
        "input_h: T",
        "input_c: T",
        "params: T",
        "sequence_lengths: int32",
        "output: T",
        "output_h: T",
        "output_c: T",
        "output_backprop: T",
        "output_h_backprop: T",
        "output_c_backprop: T",
        "reserve_space: T",
        "host_reserved: int8",
    ],  # fmt: skip
    outputs=[
        "input_backprop: T",
        "input_h_backprop: T",
        "input_c_backprop: T",
        "params_backprop: T",
    ],  # fmt: skip
    attrs=dict(_ATTRS),
    shape_fn=lambda op: [
        op.inputs[0].shape,
        op.inputs[1].shape,
        op.inputs[2].shape,
        op.inputs[3].shape,
    ],  # fmt: skip
    stateful=True,
)


def _no_cpu_kernel(ctx) -> errors.InvalidArgumentError:
    a = ctx.attrs
    shown = []
    for k in _ATTR_ORDER:
        if k not in a:
            continue
        v = a[k]
        if k == "T":
            shown.append(f"T=DT_{_DT_NAMES.get(v.name, 'HALF')}")
        elif isinstance(v, str):
            shown.append(f'{k}="{v}"')
        elif isinstance(v, bool):
            shown.append(f"{k}={str(v).lower()}")
        elif isinstance(v, float):
            shown.append(f"{k}={v:g}")
        else:
            shown.append(f"{k}={v}")
    kernels = "".join(
        f"\n  device='GPU'; T in [DT_{t}]" for t in ("DOUBLE", "FLOAT", "BFLOAT16", "HALF")
    )
    return errors.InvalidArgumentError(
        None,
        None,
        f"No OpKernel was registered to support Op '{ctx.op.type}' used by "
        f"{{{{node {ctx.op.name}}}}} with these attrs: [{', '.join(shown)}]\n"
        f"Registered devices: [CPU]\nRegistered kernels:{kernels}\n",
    )


@CudnnRNNV3.kernel("CPU")
async def _cudnn_rnn_cpu(ctx, x, h, c, params, lengths):
    raise _no_cpu_kernel(ctx)


@CudnnRNNBackpropV3.kernel("CPU")
async def _cudnn_rnn_backprop_cpu(ctx, *args):
    raise _no_cpu_kernel(ctx)


# -- the computation (array-module generic) -------------------------------------------------


def _check(ctx, x, h, params):
    a = ctx.attrs
    mode = a["rnn_mode"]
    if mode not in _GATES:
        raise errors.UnimplementedError(
            None, None, f"{ctx.op.type}: rnn_mode '{mode}' is not supported"
        )
    if a["direction"] != "unidirectional" or a["input_mode"] != "linear_input" or a["num_proj"]:
        raise errors.UnimplementedError(
            None,
            None,
            f"{ctx.op.type}: only a unidirectional linear-input layer without projection",
        )
    if x.ndim != 3 or h.ndim != 3 or h.shape[0] != 1:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{ctx.op.type}: input must be 3-D and input_h [1, batch, units] (one layer)",
        )
    gates, units, size = _GATES[mode], h.shape[2], x.shape[2]
    want = gates * (units * size + units * units + 2 * units)
    if params.shape != (want,):
        raise errors.InvalidArgumentError(
            None, None, f"{ctx.op.type}: params must hold {want} values, got {params.shape}"
        )
    return mode, gates, units, size


def _unpack(params, gates, units, size):
    """(W, R, bW, bR): per-gate lists of views into the flat buffer."""
    shapes = [(units, size)] * gates + [(units, units)] * gates + [(units,)] * (2 * gates)
    parts, o = [], 0
    for shape in shapes:
        n = shape[0] * (shape[1] if len(shape) == 2 else 1)
        parts.append(params[o : o + n].reshape(shape))
        o += n
    return [parts[k * gates : (k + 1) * gates] for k in range(4)]


def _sigmoid(xp, v):
    return 1 / (1 + xp.exp(-v))


def _step(xp, mode, W, R, bW, bR, xt, h, c):
    """One step: (h', c', the activations the gradient needs)."""
    if mode == "lstm":
        g = [xt @ W[k].T + h @ R[k].T + bW[k] + bR[k] for k in range(4)]
        i, f, cc, o = _sigmoid(xp, g[0]), _sigmoid(xp, g[1]), xp.tanh(g[2]), _sigmoid(xp, g[3])
        c2 = f * c + i * cc
        return o * xp.tanh(c2), c2, (i, f, cc, o, c2)
    r = _sigmoid(xp, xt @ W[0].T + bW[0] + h @ R[0].T + bR[0])
    z = _sigmoid(xp, xt @ W[1].T + bW[1] + h @ R[1].T + bR[1])
    q = h @ R[2].T + bR[2]
    n = xp.tanh(xt @ W[2].T + bW[2] + r * q)
    return (1 - z) * n + z * h, c, (r, z, n, q)


def _run(xp, mode, gates, units, size, x, h0, c0, params, lengths, time_major):
    if not time_major:
        x = xp.swapaxes(x, 0, 1)
    W, R, bW, bR = _unpack(params, gates, units, size)
    h, c = h0[0], (c0[0] if mode == "lstm" else c0)
    outs, saved = [], []
    for t in range(x.shape[0]):
        m = (lengths > t).astype(x.dtype)[:, None]
        h2, c2, acts = _step(xp, mode, W, R, bW, bR, x[t], h, c)
        saved.append((h, c, m, acts))
        outs.append(m * h2)
        h = m * h2 + (1 - m) * h
        if mode == "lstm":
            c = m * c2 + (1 - m) * c
    out = xp.stack(outs) if outs else xp.zeros((0, x.shape[1], units), x.dtype)
    if not time_major:
        out = xp.swapaxes(out, 0, 1)
    return out, h[None], (c[None] if mode == "lstm" else c), (W, R, bW, bR, x, saved)


def _forward(xp, mode, gates, units, size, time_major, x, h0, c0, params, lengths):
    out, h, c, _ = _run(xp, mode, gates, units, size, x, h0, c0, params, lengths, time_major)
    return out, h, c, xp.zeros((0,), x.dtype), xp.zeros((0,), "int8")


@CudnnRNNV3.kernel("GPU")
async def _cudnn_rnn_gpu(ctx, x, h, c, params, lengths):
    mode, gates, units, size = _check(ctx, x, h, params)
    return await ctx.device.compute(
        _forward,
        ctx.xp,
        mode,
        gates,
        units,
        size,
        ctx.attrs["time_major"],
        x,
        h,
        c,
        params,
        lengths,
    )


def _backward(xp, mode, gates, units, size, time_major, x, h0, c0, params, lengths, d_out, dh, dc):
    _, _, _, (W, R, bW, bR, xs, saved) = _run(
        xp, mode, gates, units, size, x, h0, c0, params, lengths, time_major
    )
    if not time_major:
        d_out = xp.swapaxes(d_out, 0, 1)
    dW = [xp.zeros_like(w) for w in W]
    dR = [xp.zeros_like(r) for r in R]
    dbW = [xp.zeros_like(b) for b in bW]
    dbR = [xp.zeros_like(b) for b in bR]
    dx = xp.zeros_like(xs)
    dh = dh[0]
    dc = dc[0] if mode == "lstm" else dc
    for t in range(xs.shape[0] - 1, -1, -1):
        h, c, m, acts = saved[t]
        xt = xs[t]
        dh2 = m * (dh + d_out[t])  # into this step's new state
        dh_prev = (1 - m) * dh
        if mode == "lstm":
            i, f, cc, o, c2 = acts
            tc = xp.tanh(c2)
            dc2 = m * dc + dh2 * o * (1 - tc * tc)
            dg = [dc2 * cc * i * (1 - i), dc2 * c * f * (1 - f), dc2 * i * (1 - cc * cc),
                  dh2 * tc * o * (1 - o)]  # fmt: skip
            dc = (1 - m) * dc + dc2 * f
            for k in range(4):
                dW[k] += dg[k].T @ xt
                dR[k] += dg[k].T @ h
                dbW[k] += dg[k].sum(0)
                dbR[k] += dg[k].sum(0)
                dx[t] += dg[k] @ W[k]
                dh_prev = dh_prev + dg[k] @ R[k]
        else:
            r, z, n, q = acts
            dan = dh2 * (1 - z) * (1 - n * n)
            daz = dh2 * (h - n) * z * (1 - z)
            dq = dan * r
            dar = dan * q * r * (1 - r)
            for k, d in ((0, dar), (1, daz)):
                dW[k] += d.T @ xt
                dR[k] += d.T @ h
                dbW[k] += d.sum(0)
                dbR[k] += d.sum(0)
                dx[t] += d @ W[k]
                dh_prev = dh_prev + d @ R[k]
            dW[2] += dan.T @ xt
            dbW[2] += dan.sum(0)
            dR[2] += dq.T @ h
            dbR[2] += dq.sum(0)
            dx[t] += dan @ W[2]
            dh_prev = dh_prev + dh2 * z + dq @ R[2]
        dh = dh_prev
    flat = [a.reshape(-1) for a in dW + dR + dbW + dbR]
    d_params = xp.concatenate(flat).astype(params.dtype)
    if not time_major:
        dx = xp.swapaxes(dx, 0, 1)
    dc_out = dc[None] if mode == "lstm" else xp.zeros_like(c0)
    return dx, dh[None], dc_out, d_params


@CudnnRNNBackpropV3.kernel("GPU")
async def _cudnn_rnn_backprop_gpu(ctx, x, h, c, params, lengths, out, out_h, out_c, d_out, dh,
                                  dc, reserve, host_reserved):  # fmt: skip
    mode, gates, units, size = _check(ctx, x, h, params)
    return await ctx.device.compute(
        _backward, ctx.xp, mode, gates, units, size, ctx.attrs["time_major"], x, h, c, params,
        lengths, d_out, dh, dc,
    )  # fmt: skip


@CudnnRNNV3.gradient
def _cudnn_rnn_grad(op, d_out, dh, dc, d_reserve, d_host):
    outs = op.outputs
    grads = [g if g is not None else _g.zeros_like(o) for g, o in zip((d_out, dh, dc), outs[:3])]
    attrs = {k: op._attr(k) for k in _ATTRS if k != "T"}
    back = ops.apply_op(
        "CudnnRNNBackpropV3", [*op.inputs[:5], *outs[:3], *grads, outs[3], outs[4]], attrs
    ).outputs
    return [back[0], back[1], back[2], back[3], None]
