"""What cuDNN's RNN ops compute, written once against the device's array module (`xp`):
the opaque parameter buffer's layout, the forward pass and its gradient.  The op
definitions and kernels are in ops/cudnn_rnn_ops.py.

Layout.  A network of `layers` layers, each one or two directions ("pseudo-layers",
ordered layer 0 forward, layer 0 backward, layer 1 forward ...).  Each pseudo-layer has,
per gate, an input matrix (units, width) (width: the input size for layer 0, the layer
below's output width for the others) and a recurrent matrix (units, units, or num_proj
for an LSTM with a projection), then an LSTM's projection (num_proj, units); and per
gate an input bias and a recurrent bias (units,).  The buffer holds every pseudo-layer's
matrices in that order, row-major, then every pseudo-layer's biases: TF's canonical
lists (CudnnRNNParamsToCanonical's outputs) flattened and joined, weights first.

Gates are (i, f, c, o) for an LSTM, (r, z, h) for a GRU (whose candidate applies the
reset gate after the recurrent product: h~ = tanh(W_h x + b_Wh + r * (R_h h + b_Rh)),
h' = (1-z) h~ + z h), one for rnn_tanh / rnn_relu (h' = act(W x + b_W + R h + b_R)).
A bidirectional layer's output is the forward then the backward direction's, on the
last axis; the backward direction reads each batch entry's own steps (its
`sequence_lengths`) from the last.  Steps past an entry's length keep its state and
output zeros.  The gradient recomputes the forward pass (no reserve space is kept).
"""

from __future__ import annotations

import dataclasses

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


@dataclasses.dataclass(frozen=True)
class Layout:
    mode: str
    layers: int
    dirs: int
    units: int
    input_size: int
    num_proj: int = 0

    @property
    def gates(self) -> int:
        return GATES[self.mode]

    @property
    def out_units(self) -> int:
        """One direction's output (and recurrent state) width."""
        return self.num_proj or self.units

    def weight_shapes(self) -> list[tuple]:
        g, u, shapes = self.gates, self.units, []
        for layer in range(self.layers):
            width = self.input_size if layer == 0 else self.out_units * self.dirs
            for _ in range(self.dirs):
                shapes += [(u, width)] * g + [(u, self.out_units)] * g
                if self.num_proj:
                    shapes.append((self.num_proj, u))
        return shapes

    def bias_shapes(self) -> list[tuple]:
        return [(self.units,)] * (2 * self.gates * self.layers * self.dirs)

    def size(self) -> int:
        return sum(a * b for a, b in self.weight_shapes()) + sum(s[0] for s in self.bias_shapes())

    def split(self, params) -> tuple[list, list]:
        """(weights, biases): views of the flat buffer, in the canonical order."""
        parts, o = ([], []), 0
        for out, shapes in zip(parts, (self.weight_shapes(), self.bias_shapes())):
            for shape in shapes:
                n = shape[0] * (shape[1] if len(shape) == 2 else 1)
                out.append(params[o : o + n].reshape(shape))
                o += n
        return parts

    def pieces(self, params) -> list[dict]:
        """Each pseudo-layer's W, R (per-gate lists), P (or None), bW, bR."""
        weights, biases = self.split(params)
        g, per_w = self.gates, 2 * self.gates + (1 if self.num_proj else 0)
        out = []
        for k in range(self.layers * self.dirs):
            w, b = weights[k * per_w : (k + 1) * per_w], biases[k * 2 * g : (k + 1) * 2 * g]
            out.append({"W": w[:g], "R": w[g : 2 * g], "P": w[2 * g] if self.num_proj else None,
                        "bW": b[:g], "bR": b[g:]})  # fmt: skip
        return out


def _sigmoid(xp, v):
    return 1 / (1 + xp.exp(-v))


def _step(xp, mode, p, xt, h, c):
    """One step of one pseudo-layer: (h', c', the activations the gradient needs)."""
    W, R, bW, bR = p["W"], p["R"], p["bW"], p["bR"]
    if mode == "lstm":
        g = [xt @ W[k].T + h @ R[k].T + bW[k] + bR[k] for k in range(4)]
        i, f, cc, o = _sigmoid(xp, g[0]), _sigmoid(xp, g[1]), xp.tanh(g[2]), _sigmoid(xp, g[3])
        c2 = f * c + i * cc
        hr = o * xp.tanh(c2)
        h2 = hr if p["P"] is None else hr @ p["P"].T
        return h2, c2, (i, f, cc, o, c2, hr)
    if mode == "gru":
        r = _sigmoid(xp, xt @ W[0].T + bW[0] + h @ R[0].T + bR[0])
        z = _sigmoid(xp, xt @ W[1].T + bW[1] + h @ R[1].T + bR[1])
        q = h @ R[2].T + bR[2]
        n = xp.tanh(xt @ W[2].T + bW[2] + r * q)
        return (1 - z) * n + z * h, c, (r, z, n, q)
    a = xt @ W[0].T + bW[0] + h @ R[0].T + bR[0]
    h2 = xp.tanh(a) if mode == "rnn_tanh" else xp.maximum(a, 0)
    return h2, c, (a, h2)


def _steps(n: int, reverse: bool):
    return range(n - 1, -1, -1) if reverse else range(n)


def _pass(xp, mode, p, seq, h, c, lengths, reverse):
    """One pseudo-layer over a time-major sequence: (outputs, h, c, per-step record)."""
    outs, saved = [None] * seq.shape[0], []
    for t in _steps(seq.shape[0], reverse):
        h2, c2, acts = _step(xp, mode, p, seq[t], h, c)
        start = (h, c)
        if lengths is None:
            m = None
            outs[t], h, c = h2, h2, c2
        else:
            m = (lengths > t).astype(seq.dtype)[:, None]
            outs[t] = m * h2
            h = m * h2 + (1 - m) * h
            c = m * c2 + (1 - m) * c if mode == "lstm" else c
        saved.append((t, m, start, acts))
    return outs, h, c, saved


def forward(xp, lay: Layout, x, h0, c0, params, lengths=None):
    """Time-major x [T, B, input_size] -> (output, h, c, record for `backward`)."""
    pieces = lay.pieces(params)
    lstm = lay.mode == "lstm"
    seq, hs, cs, record = x, [], [], []
    for layer in range(lay.layers):
        dir_outs = []
        for d in range(lay.dirs):
            k = layer * lay.dirs + d
            outs, h, c, saved = _pass(xp, lay.mode, pieces[k], seq, h0[k],
                                      c0[k] if lstm else None, lengths, d == 1)  # fmt: skip
            record.append((seq, saved))
            dir_outs.append(outs)
            hs.append(h)
            cs.append(c)
        steps = [xp.concatenate([o[t] for o in dir_outs], axis=1) for t in range(x.shape[0])]
        width = lay.out_units * lay.dirs
        seq = xp.stack(steps) if steps else xp.zeros((0, x.shape[1], width), x.dtype)
    h = xp.stack(hs)
    c = xp.stack(cs) if lstm else xp.zeros((), x.dtype)
    return seq, h, c, (pieces, record)


def _pass_backward(xp, mode, p, seq, saved, d_out, dh, dc):
    """Gradients of one pseudo-layer: (d seq, d h0, d c0, {name: gradient})."""
    W, R, P = p["W"], p["R"], p["P"]
    g = {k: [xp.zeros_like(a) for a in p[k]] for k in ("W", "R", "bW", "bR")}
    dP = None if P is None else xp.zeros_like(P)
    d_seq = xp.zeros_like(seq)
    for t, m, (h, c), acts in reversed(saved):
        xt = seq[t]
        dh2 = dh + d_out[t] if m is None else m * (dh + d_out[t])
        dh_prev = 0 * dh if m is None else (1 - m) * dh
        if mode == "lstm":
            i, f, cc, o, c2, hr = acts
            if P is not None:
                dP += dh2.T @ hr
                dh2 = dh2 @ P
            tc = xp.tanh(c2)
            dc2 = (dc if m is None else m * dc) + dh2 * o * (1 - tc * tc)
            dg = [dc2 * cc * i * (1 - i), dc2 * c * f * (1 - f), dc2 * i * (1 - cc * cc),
                  dh2 * tc * o * (1 - o)]  # fmt: skip
            dc = dc2 * f if m is None else (1 - m) * dc + dc2 * f
            for k in range(4):
                _accumulate(g, k, dg[k], dg[k], xt, h)
                d_seq[t] += dg[k] @ W[k]
                dh_prev = dh_prev + dg[k] @ R[k]
        elif mode == "gru":
            r, z, n, q = acts
            dan = dh2 * (1 - z) * (1 - n * n)
            daz = dh2 * (h - n) * z * (1 - z)
            dq = dan * r
            dar = dan * q * r * (1 - r)
            for k, d in ((0, dar), (1, daz)):
                _accumulate(g, k, d, d, xt, h)
                d_seq[t] += d @ W[k]
                dh_prev = dh_prev + d @ R[k]
            _accumulate(g, 2, dan, dq, xt, h)
            d_seq[t] += dan @ W[2]
            dh_prev = dh_prev + dh2 * z + dq @ R[2]
        else:
            a, h2 = acts
            da = dh2 * (1 - h2 * h2) if mode == "rnn_tanh" else dh2 * (a > 0).astype(a.dtype)
            _accumulate(g, 0, da, da, xt, h)
            d_seq[t] += da @ W[0]
            dh_prev = dh_prev + da @ R[0]
        dh = dh_prev
    g["P"] = dP
    return d_seq, dh, dc, g


def _accumulate(g, k, d_input_side, d_recurrent_side, xt, h):
    g["W"][k] += d_input_side.T @ xt
    g["bW"][k] += d_input_side.sum(0)
    g["R"][k] += d_recurrent_side.T @ h
    g["bR"][k] += d_recurrent_side.sum(0)


def backward(xp, lay: Layout, x, h0, c0, params, d_out, dh, dc, lengths=None):
    """Gradients of `forward` for time-major x: (dx, dh0, dc0, d params)."""
    _, _, _, (pieces, record) = forward(xp, lay, x, h0, c0, params, lengths)
    lstm = lay.mode == "lstm"
    dh0 = [None] * len(pieces)
    dc0 = [None] * len(pieces)
    grads = [None] * len(pieces)
    w = lay.out_units
    d_top = d_out
    for layer in range(lay.layers - 1, -1, -1):
        d_below = None
        for d in range(lay.dirs):
            k = layer * lay.dirs + d
            seq, saved = record[k]
            d_seq, dh0[k], dc0[k], grads[k] = _pass_backward(
                xp, lay.mode, pieces[k], seq, saved,
                d_top[:, :, d * w : (d + 1) * w], dh[k], dc[k] if lstm else None,
            )  # fmt: skip
            d_below = d_seq if d_below is None else d_below + d_seq
        d_top = d_below
    weights, biases = [], []
    for g in grads:
        weights += [*g["W"], *g["R"], *([g["P"]] if lay.num_proj else [])]
        biases += [*g["bW"], *g["bR"]]
    flat = xp.concatenate([a.reshape(-1) for a in weights + biases]).astype(params.dtype)
    d_c0 = xp.stack(dc0) if lstm else xp.zeros_like(c0)
    return d_top, xp.stack(dh0), d_c0, flat
