"""The fused RNN kernels of tf.contrib.rnn (LSTMBlockCell, LSTMBlockFusedCell, GRUBlockCell)
and Keras' BlockLSTMV2: LSTMBlockCell, BlockLSTM, BlockLSTMV2, GRUBlockCell and their
Grad ops, with TF 2.21's OpDefs and math.

One LSTM step, gates from xh = [x, h_prev] (TF's lstm_ops):
  [i, ci, f, o] = xh w + b        (BlockLSTMV2 lays w and b out as [i, f, ci, o])
  i = sigmoid(i + cs_prev wci), f = sigmoid(f + forget_bias + cs_prev wcf), ci = tanh(ci)
  cs = clip(i ci + f cs_prev, cell_clip)   (no clip when cell_clip <= 0)
  o = sigmoid(o + cs wco), co = tanh(cs), h = o co
(the peephole weights wci, wcf, wco count only with use_peephole).  BlockLSTM runs
seq_len_max steps over x [time, batch, input]; later steps' cs and h are zeros (TF
leaves the other outputs' later steps unwritten).  The backward step ignores the clip,
as TF's; TF's BlockLSTMGradV2 takes V2's gate gradients in BlockLSTM's order (see
_block_ops), and so does this one.

One GRU step:  [r, u] = sigmoid([x, h_prev] w_ru + b_ru);
  c = tanh([x, r h_prev] w_c + b_c);  h = u h_prev + (1 - u) c.

TF 2.21 registers gradients for BlockLSTM and BlockLSTMV2 only (tf.contrib, which
differentiated the cells, is gone): the others raise LookupError under tf.gradients.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import REQUIRED, TypeConstraint, register_op

__all__: list[str] = []

_T = TypeConstraint(["float16", "float32"])
_LSTM_IN = ["x: T", "cs_prev: T", "h_prev: T", "w: T", "wci: T", "wcf: T", "wco: T", "b: T"]
_LSTM_OUT = ["i: T", "cs: T", "f: T", "o: T", "ci: T", "co: T", "h: T"]


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gates(layout_ifco: bool, z, n):
    """(i, ci, f, o) pre-activations from z = xh w + b, in the op's layout."""
    a, b, c, d = (z[:, k * n : (k + 1) * n] for k in range(4))
    return (a, c, b, d) if layout_ifco else (a, b, c, d)


def _lstm_step(x, cs_prev, h_prev, w, wci, wcf, wco, b, attrs, layout_ifco=False):
    n = cs_prev.shape[1]
    z = np.concatenate([x, h_prev], axis=1) @ w + b
    i, ci, f, o = _gates(layout_ifco, z, n)
    if not attrs["use_peephole"]:
        wci = wcf = wco = np.zeros_like(wci)
    i = _sigmoid(i + cs_prev * wci)
    f = _sigmoid(f + attrs.get("forget_bias", 0.0) + cs_prev * wcf)
    ci = np.tanh(ci)
    cs = i * ci + f * cs_prev
    clip = attrs["cell_clip"]
    if clip > 0:
        cs = np.clip(cs, -clip, clip)
    o = _sigmoid(o + cs * wco)
    co = np.tanh(cs)
    return i, cs, f, o, ci, co, co * o


def _lstm_step_grad(cs_prev, i, cs, f, o, ci, co, cs_grad, h_grad, wci, wcf, wco, peephole):
    """One step back: (cs_prev_grad, [di, dci, df, do] pre-activation, peephole grads)."""
    do = o * (1 - o) * h_grad * co
    dcs = (1 - co * co) * h_grad * o + cs_grad
    if peephole:
        dcs = dcs + do * wco
    dci = (1 - ci * ci) * dcs * i
    df = f * (1 - f) * dcs * cs_prev
    di = i * (1 - i) * dcs * ci
    cs_prev_grad = dcs * f
    if peephole:
        cs_prev_grad = cs_prev_grad + di * wci + df * wcf
    if peephole:
        peep = ((di * cs_prev).sum(0), (df * cs_prev).sum(0), (do * cs).sum(0))
    else:
        peep = (np.zeros_like(wci),) * 3
    return cs_prev_grad, (di, dci, df, do), peep


def _check_lstm(x, cs_prev, h_prev, w, wci, wcf, wco, b, time_major=False):
    if x.ndim != (3 if time_major else 2):
        raise _invalid(f"x must be {3 if time_major else 2}D")
    batch, n_in = x.shape[-2], x.shape[-1]
    n = w.shape[1] // 4 if w.ndim == 2 else -1
    if cs_prev.ndim != 2 or cs_prev.shape[0] != batch:
        raise _invalid(f"cs_prev.dims(0) != batch_size: {cs_prev.shape[0]} vs. {batch}")
    n = cs_prev.shape[1]
    if h_prev.shape != (batch, n):
        raise _invalid(f"h_prev.dims(0) != batch_size: {h_prev.shape[0]} vs. {batch}")
    if w.shape != (n_in + n, 4 * n):
        raise _invalid(
            f"w.dim_size(0) != input_size + cell_size: {w.shape[0]} vs. {n_in + n}"
            if w.ndim != 2 or w.shape[0] != n_in + n
            else f"w.dim_size(1) != cell_size * 4: {w.shape[1]} vs. {4 * n}"
        )
    if b.shape != (4 * n,):
        raise _invalid(f"b.dim_size(0) != cell_size * 4: {b.shape[0]} vs. {4 * n}")


def _cell_shape(op):
    x = op.inputs[0].shape.with_rank(2)
    cs = op.inputs[1].shape.with_rank(2)
    shape = tensor_shape.TensorShape([x[0].merge_with(cs[0]), cs[1]])
    return [shape] * 7


def _block_shape(op):
    x = op.inputs[1].shape.with_rank(3)
    cs = op.inputs[2].shape.with_rank(2)
    shape = tensor_shape.TensorShape([x[0], x[1].merge_with(cs[0]), cs[1]])
    return [shape] * 7


def _f(*arrays):
    return [np.asarray(a) for a in arrays]


# -- LSTMBlockCell (+Grad) -----------------------------------------------------------------

_CELL_ATTRS = {"forget_bias": 1.0, "cell_clip": 3.0, "use_peephole": False, "T": _T}
LSTMBlockCell = register_op(
    "LSTMBlockCell", inputs=_LSTM_IN, outputs=_LSTM_OUT, attrs=_CELL_ATTRS, shape_fn=_cell_shape
)


@LSTMBlockCell.kernel("CPU")
async def _lstm_block_cell(ctx, *args):
    args = _f(*args)
    _check_lstm(*args)
    dtype = args[0].dtype
    wide = [a.astype(np.float32) for a in args]
    return tuple(v.astype(dtype) for v in _lstm_step(*wide, ctx.attrs))


def _cell_grad_shape(op):
    cs = op.inputs[1].shape.with_rank(2)
    n = cs[1].value
    vec = op.inputs[4].shape
    return [cs, tensor_shape.TensorShape([cs[0], None if n is None else 4 * n]), vec, vec, vec]


_CELL_OUTS = ["i: T", "cs: T", "f: T", "o: T", "ci: T", "co: T"]
LSTMBlockCellGrad = register_op(
    "LSTMBlockCellGrad",
    inputs=_LSTM_IN + _CELL_OUTS + ["cs_grad: T", "h_grad: T"],
    outputs=["cs_prev_grad: T", "dicfo: T", "wci_grad: T", "wcf_grad: T", "wco_grad: T"],
    attrs={"use_peephole": REQUIRED, "T": _T},
    shape_fn=_cell_grad_shape,
)


@LSTMBlockCellGrad.kernel("CPU")
async def _lstm_block_cell_grad(ctx, *args):
    args = _f(*args)
    _check_lstm(*args[:8])
    dtype = args[0].dtype
    x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, cs_grad, h_grad = (
        a.astype(np.float32) for a in args
    )
    cs_prev_grad, (di, dci, df, do), peep = _lstm_step_grad(
        cs_prev, i, cs, f, o, ci, co, cs_grad, h_grad, wci, wcf, wco, ctx.attrs["use_peephole"]
    )
    dicfo = np.concatenate([di, dci, df, do], axis=1)
    return tuple(v.astype(dtype) for v in (cs_prev_grad, dicfo, *peep))


# -- BlockLSTM, BlockLSTMV2 (+Grad): the cell over time ----------------------------------------


def _block_forward(seq_len_max, args, attrs, layout_ifco):
    x, cs_prev, h_prev, w, wci, wcf, wco, b = args
    steps, batch, n = x.shape[0], cs_prev.shape[0], cs_prev.shape[1]
    outs = [np.zeros((steps, batch, n), np.float32) for _ in range(7)]
    cs_t, h_t = cs_prev, h_prev
    for t in range(min(seq_len_max, steps)):
        step = _lstm_step(x[t], cs_t, h_t, w, wci, wcf, wco, b, attrs, layout_ifco)
        for out, v in zip(outs, step):
            out[t] = v
        cs_t, h_t = step[1], step[6]
    return outs


def _block_backward(seq_len_max, args, fwd, cs_grad, h_grad, peephole):
    x, cs_prev, h_prev, w, wci, wcf, wco, b = args
    i, cs, f, o, ci, co, h = fwd
    steps, n_in = x.shape[0], x.shape[2]
    x_grad = np.zeros_like(x)
    w_grad, b_grad = np.zeros_like(w), np.zeros_like(b)
    peep_grads = [np.zeros_like(wci), np.zeros_like(wcf), np.zeros_like(wco)]
    dcs_next = np.zeros_like(cs_prev)
    dh_next = np.zeros_like(h_prev)
    for t in reversed(range(min(seq_len_max, steps))):
        cs_before = cs[t - 1] if t else cs_prev
        h_before = h[t - 1] if t else h_prev
        dcs_prev, (di, dci, df, do), peep = _lstm_step_grad(
            cs_before, i[t], cs[t], f[t], o[t], ci[t], co[t], cs_grad[t] + dcs_next,
            h_grad[t] + dh_next, wci, wcf, wco, peephole,
        )  # fmt: skip
        dz = np.concatenate([di, dci, df, do], axis=1)
        dxh = dz @ w.T
        x_grad[t] = dxh[:, :n_in]
        dh_next = dxh[:, n_in:]
        dcs_next = dcs_prev
        w_grad += np.concatenate([x[t], h_before], axis=1).T @ dz
        b_grad += dz.sum(0)
        for acc, v in zip(peep_grads, peep):
            acc += v
    return x_grad, dcs_next, dh_next, w_grad, *peep_grads, b_grad


def _block_ops(name: str, attrs: dict, layout_ifco: bool):
    """Register `name` and its Grad op; `layout_ifco`: w and b hold [i, f, ci, o]."""
    inputs = ["seq_len_max: int64", *_LSTM_IN]
    op_def = register_op(
        name, inputs=inputs, outputs=_LSTM_OUT, attrs=attrs, shape_fn=_block_shape
    )

    @op_def.kernel("CPU", host_memory=("seq_len_max",))
    async def _kernel(ctx, seq_len_max, *args):
        args = _f(*args)
        _check_lstm(*args, time_major=True)
        dtype = args[0].dtype
        wide = [a.astype(np.float32) for a in args]
        outs = await ctx.device.compute(
            _block_forward, int(seq_len_max), wide, ctx.attrs, layout_ifco
        )
        return tuple(v.astype(dtype) for v in outs)

    grad_def = register_op(
        name.replace("BlockLSTM", "BlockLSTMGrad"),
        inputs=inputs + ["i: T", "cs: T", "f: T", "o: T", "ci: T", "co: T", "h: T"]
        + ["cs_grad: T", "h_grad: T"],
        outputs=["x_grad: T", "cs_prev_grad: T", "h_prev_grad: T", "w_grad: T",
                 "wci_grad: T", "wcf_grad: T", "wco_grad: T", "b_grad: T"],
        attrs={"use_peephole": REQUIRED, "T": _T},
        shape_fn=lambda op: [t.shape for t in op.inputs[1:9]],
    )  # fmt: skip

    @grad_def.kernel("CPU", host_memory=("seq_len_max",))
    async def _grad_kernel(ctx, seq_len_max, *args):
        args = _f(*args)
        _check_lstm(*args[:8], time_major=True)
        dtype = args[0].dtype
        wide = [a.astype(np.float32) for a in args]
        # TF's CPU BlockLSTMGradV2 lays the gate gradients out as BlockLSTM's [i, ci, f, o]
        # against V2's [i, f, ci, o] weights, so its x, h_prev, cs_prev, w and b gradients
        # are not the forward's derivatives (finite differences disagree); it is
        # followed here, so a graph's numbers are TF's.
        outs = await ctx.device.compute(
            _block_backward, int(seq_len_max), wide[:8], wide[8:15], wide[15], wide[16],
            ctx.attrs["use_peephole"],
        )  # fmt: skip
        return tuple(v.astype(dtype) for v in outs)

    @op_def.gradient
    def _grad(op, *grads):
        i, cs, f, o, ci, co, h = op.outputs
        cs_grad = grads[1] if grads[1] is not None else _zeros_like(cs)
        h_grad = grads[6] if grads[6] is not None else _zeros_like(h)
        outs = ops.apply_op(
            grad_def.name,
            [*op.inputs, i, cs, f, o, ci, co, h, cs_grad, h_grad],
            {"use_peephole": op._attr("use_peephole")},
        ).outputs
        return [None, *outs]

    _kernel.__name__ = f"_{name.lower()}_kernel"
    _grad_kernel.__name__ = f"_{name.lower()}_grad_kernel"
    return op_def, grad_def


def _zeros_like(t):
    return ops.apply_op("ZerosLike", [t]).outputs[0]


BlockLSTM, BlockLSTMGrad = _block_ops("BlockLSTM", dict(_CELL_ATTRS), False)
BlockLSTMV2, BlockLSTMGradV2 = _block_ops(
    "BlockLSTMV2", {"cell_clip": 0.0, "use_peephole": False, "T": _T}, True
)


# -- GRUBlockCell (+Grad) ------------------------------------------------------------------------

_GRU_IN = ["x: T", "h_prev: T", "w_ru: T", "w_c: T", "b_ru: T", "b_c: T"]


def _check_gru(x, h_prev, w_ru, w_c, b_ru, b_c):
    if x.ndim != 2 or h_prev.ndim != 2:
        raise _invalid("x and h_prev must be 2D")
    batch, n_in = x.shape
    n = h_prev.shape[1]
    if h_prev.shape[0] != batch:
        raise _invalid(f"h_prev.dims(0) != batch_size: {h_prev.shape[0]} vs. {batch}")
    checks = (
        (w_ru.shape == (n_in + n, 2 * n), f"w_ru.dim_size(0) != input_size + cell_size: "
         f"{w_ru.shape[0]} vs. {n_in + n}"),
        (w_c.shape == (n_in + n, n), f"w_c.dim_size(0) != input_size + cell_size: "
         f"{w_c.shape[0]} vs. {n_in + n}"),
        (b_ru.shape == (2 * n,), f"b_ru.dim_size(0) != cell_size * 2: {b_ru.shape[0]} vs. "
         f"{2 * n}"),
        (b_c.shape == (n,), f"b_c.dim_size(0) != cell_size: {b_c.shape[0]} vs. {n}"),
    )  # fmt: skip
    for ok, msg in checks:
        if not ok:
            raise _invalid(msg)


def _gru_shape(op):
    x = op.inputs[0].shape.with_rank(2)
    h = op.inputs[1].shape.with_rank(2)
    shape = tensor_shape.TensorShape([x[0].merge_with(h[0]), h[1]])
    return [shape] * 4


GRUBlockCell = register_op(
    "GRUBlockCell",
    inputs=_GRU_IN,
    outputs=["r: T", "u: T", "c: T", "h: T"],
    attrs={"T": TypeConstraint(["float32"])},
    shape_fn=_gru_shape,
)


@GRUBlockCell.kernel("CPU")
async def _gru_block_cell(ctx, x, h_prev, w_ru, w_c, b_ru, b_c):
    x, h_prev, w_ru, w_c, b_ru, b_c = _f(x, h_prev, w_ru, w_c, b_ru, b_c)
    _check_gru(x, h_prev, w_ru, w_c, b_ru, b_c)
    n = h_prev.shape[1]
    ru = _sigmoid(np.concatenate([x, h_prev], axis=1) @ w_ru + b_ru)
    r, u = ru[:, :n], ru[:, n:]
    c = np.tanh(np.concatenate([x, r * h_prev], axis=1) @ w_c + b_c)
    return r, u, c, u * h_prev + (1 - u) * c


GRUBlockCellGrad = register_op(
    "GRUBlockCellGrad",
    inputs=_GRU_IN + ["r: T", "u: T", "c: T", "d_h: T"],
    outputs=["d_x: T", "d_h_prev: T", "d_c_bar: T", "d_r_bar_u_bar: T"],
    attrs={"T": TypeConstraint(["float32"])},
    shape_fn=lambda op: _gru_grad_shape(op),
)


def _gru_grad_shape(op):
    h = op.inputs[1].shape.with_rank(2)
    n = h[1].value
    return [
        op.inputs[0].shape,
        h,
        h,
        tensor_shape.TensorShape([h[0], None if n is None else 2 * n]),
    ]


@GRUBlockCellGrad.kernel("CPU")
async def _gru_block_cell_grad(ctx, *args):
    x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c, d_h = _f(*args)
    _check_gru(x, h_prev, w_ru, w_c, b_ru, b_c)
    n_in = x.shape[1]
    d_c_bar = d_h * (1 - u) * (1 - c * c)
    d_u_bar = d_h * (h_prev - c) * u * (1 - u)
    d_x2_rh = d_c_bar @ w_c.T
    d_rh = d_x2_rh[:, n_in:]
    d_r_bar = d_rh * h_prev * r * (1 - r)
    d_ru = np.concatenate([d_r_bar, d_u_bar], axis=1)
    d_x1_h = d_ru @ w_ru.T
    d_x = d_x1_h[:, :n_in] + d_x2_rh[:, :n_in]
    d_h_prev = d_x1_h[:, n_in:] + d_rh * r + d_h * u
    return d_x, d_h_prev, d_c_bar, d_ru
