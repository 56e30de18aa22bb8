"""Stochastic dual coordinate ascent for linear models: SdcaOptimizer / SdcaOptimizerV2
(`tf.train.sdca_optimizer`) and SdcaFprint (a 128-bit fingerprint of each string: the
example ids SDCA's callers key their state by).

SdcaOptimizer takes a mini-batch (sparse feature groups, optionally with values; dense
feature matrices), the current weights and each example's state row (dual, primal loss,
dual loss, weight) and returns the new state rows and the weights' deltas.  Each
example's update is TF's (sdca_ops.cc / sdca_internal.cc, the five losses' updaters):
wx from the L1-shrunk weights (nominal + num_loss_partitions * delta), the loss's dual
update (closed form, or 10 Newton steps for logistic and Poisson), delta_w += x *
(new_dual - dual) * example_weight / l2, dense parts in float32 and sparse parts in
float64 as there.  TF visits the examples in a random order (a shuffle, or adaptive
sampling that may visit one twice) from an unseeded generator, so its results for
examples sharing features depend on the run; asyncflow visits them once each, in order.

SdcaFprint is TF's `Fingerprint128` (FarmHash's `farmhashcc::Fingerprint128`, i.e.
CityHash128), written here from its published definition on unsigned 64-bit arithmetic
and checked against TF 2.21's outputs for every length 0..300
(tests/ops/test_sdca_ops.py).  Output row i is (low 64 bits, high 64 bits) as int64, the
order TF's kernel writes.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.string_hash_ops import _f64, _hash16, _len0to16, _rotr, _shift_mix, _weak32
from asyncflow.registry import REQUIRED, NotDifferentiable, register_op

__all__ = ["sdca_fprint", "sdca_optimizer"]

_M = (1 << 64) - 1
_K0, _K1 = 0xC3A5C85C97CB3127, 0xB492B66FBE98F273
_KMUL = 0x9DDFEA08EB382D69


def _h16(u: int, v: int) -> int:
    """CityHash's HashLen16(u, v) (Hash128to64)."""
    return _hash16(u, v, _KMUL)


def _city_murmur(s: bytes, start: int, n: int, lo: int, hi: int) -> tuple[int, int]:
    a, b, c, d = lo, hi, 0, 0
    if n <= 16:
        a = (_shift_mix((a * _K1) & _M) * _K1) & _M
        c = (b * _K1 + _len0to16(s[start : start + n], n)) & _M
        d = _shift_mix((a + (_f64(s, start) if n >= 8 else c)) & _M)
    else:
        c = _h16((_f64(s, start + n - 8) + _K1) & _M, a)
        d = _h16((b + n) & _M, (c + _f64(s, start + n - 16)) & _M)
        a = (a + d) & _M
        i, left = start, n - 16
        while True:
            a ^= (_shift_mix((_f64(s, i) * _K1) & _M) * _K1) & _M
            a = (a * _K1) & _M
            b ^= a
            c ^= (_shift_mix((_f64(s, i + 8) * _K1) & _M) * _K1) & _M
            c = (c * _K1) & _M
            d ^= c
            i += 16
            left -= 16
            if left <= 0:
                break
    a = _h16(a, c)
    b = _h16(d, b)
    return a ^ b, _h16(b, a)


def _city128_seed(s: bytes, start: int, n: int, lo: int, hi: int) -> tuple[int, int]:
    if n < 128:
        return _city_murmur(s, start, n, lo, hi)
    x, y, z = lo, hi, (n * _K1) & _M
    v0 = (_rotr(y ^ _K1, 49) * _K1 + _f64(s, start)) & _M
    v1 = (_rotr(v0, 42) * _K1 + _f64(s, start + 8)) & _M
    w0 = (_rotr((y + z) & _M, 35) * _K1 + x) & _M
    w1 = (_rotr((x + _f64(s, start + 88)) & _M, 53) * _K1) & _M
    i = start
    while True:
        for _ in range(2):
            x = (_rotr((x + y + v0 + _f64(s, i + 8)) & _M, 37) * _K1) & _M
            y = (_rotr((y + v1 + _f64(s, i + 48)) & _M, 42) * _K1) & _M
            x ^= w1
            y = (y + v0 + _f64(s, i + 40)) & _M
            z = (_rotr((z + w0) & _M, 33) * _K1) & _M
            v0, v1 = _weak32(s, i, (v1 * _K1) & _M, (x + w0) & _M)
            w0, w1 = _weak32(s, i + 32, (z + w1) & _M, (y + _f64(s, i + 16)) & _M)
            z, x = x, z
            i += 64
        n -= 128
        if n < 128:
            break
    x = (x + _rotr((v0 + z) & _M, 49) * _K0) & _M
    y = (y * _K0 + _rotr(w1, 37)) & _M
    z = (z * _K0 + _rotr(w0, 27)) & _M
    w0 = (w0 * 9) & _M
    v0 = (v0 * _K0) & _M
    done = 0
    while done < n:
        done += 32
        y = (_rotr((x + y) & _M, 42) * _K0 + v1) & _M
        w0 = (w0 + _f64(s, i + n - done + 16)) & _M
        x = (x * _K0 + w0) & _M
        z = (z + w1 + _f64(s, i + n - done)) & _M
        w1 = (w1 + v0) & _M
        v0, v1 = _weak32(s, i + n - done, (v0 + z) & _M, v1)
        v0 = (v0 * _K0) & _M
    x = _h16(x, v0)
    y = _h16((y + z) & _M, w0)
    return (_h16((x + v1) & _M, w1) + y) & _M, _h16((x + w1) & _M, (y + v1) & _M)


def fingerprint128(s: bytes) -> tuple[int, int]:
    """(low64, high64) of FarmHash's Fingerprint128 (CityHash128) of `s`."""
    n = len(s)
    if n >= 16:
        return _city128_seed(s, 16, n - 16, _f64(s, 0), (_f64(s, 8) + _K0) & _M)
    return _city128_seed(s, 0, n, _K0, _K1)


def _fprints(values) -> np.ndarray:
    flat = np.asarray(values, dtype=object).reshape(-1)
    out = np.empty((flat.size, 2), np.uint64)
    for i, v in enumerate(flat):
        lo, hi = fingerprint128(v if isinstance(v, bytes) else str(v).encode())
        # TF never returns 0 or 1 first (callers use them as sentinel keys).
        out[i, 0], out[i, 1] = (lo if lo >= 2 else (lo + _M - 1) & _M), hi
    return out.view(np.int64)


def _fprint_shape(op):
    shape = op.inputs[0].shape
    if shape.ndims is not None and shape.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {shape.ndims}")
    return [tensor_shape.TensorShape([shape[0] if shape.ndims else None, 2])]


SdcaFprint = register_op(
    "SdcaFprint",
    inputs=["input: string"],
    outputs=["output: int64"],
    attrs={},
    shape_fn=_fprint_shape,
)
NotDifferentiable("SdcaFprint")


@SdcaFprint.kernel("CPU")
async def _sdca_fprint(ctx, x):
    if np.ndim(x) != 1:
        raise errors.InvalidArgumentError(
            None, None, f"Input must be a vector, got shape {list(np.shape(x))}"
        )
    return await ctx.compute(_fprints, x)


def sdca_fprint(input, name=None):  # noqa: A002 - TF's argument name
    """`tf.train.sdca_fprint`: each string's 128-bit fingerprint as two int64s (op
    SdcaFprint; input a 1-D string tensor, output [N, 2])."""
    return ops.apply_op("SdcaFprint", [input], {}, name=name).outputs[0]


# -- SdcaOptimizer ----------------------------------------------------------------------------

LOSS_TYPES = ("logistic_loss", "squared_loss", "hinge_loss", "smooth_hinge_loss", "poisson_loss")
_NEWTON_STEPS = 10  # Newton's method converges quadratically: 10 steps are plenty (TF's count)


def _binary_label(label: float) -> float:
    if label == 0.0:
        return -1.0
    if label == 1.0:
        return 1.0
    raise errors.InvalidArgumentError(
        None,
        None,
        f"Only labels of 0.0 or 1.0 are supported right now. Found example with label: {label:g}",
    )


def _poisson_label(label: float) -> float:
    if label < 0.0:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Only non-negative labels can be used with the Poisson log loss. Found example "
            f"with label: {label:g}",
        )
    return label


def _dual_logistic(parts, y, weight, dual, wx, norm):
    c = parts * norm * weight
    x = 0.0
    for _ in range(_NEWTON_STEPS):
        t = math.tanh(x)
        num = -2 * y * x - wx - c * (0.5 * (1 + t) / y - dual)
        den = -2 * y - c * (1 - t * t) * 0.5 / y
        x -= num / den
    return 0.5 * (1 + math.tanh(x)) / y


def _dual_squared(parts, y, weight, dual, wx, norm):
    return dual + (y - dual - wx) / (1 + parts * norm * weight)


def _clip_binary(y, candidate):
    if y * candidate < 0:
        return 0.0
    return y if y * candidate > 1.0 else candidate


def _dual_hinge(parts, y, weight, dual, wx, norm):
    return _clip_binary(y, dual + (y - wx) / (parts * weight * norm))


def _dual_smooth_hinge(parts, y, weight, dual, wx, norm, gamma=1.0):
    return _clip_binary(y, dual + (y - wx - gamma * dual) / (parts * weight * norm + gamma))


def _dual_poisson(parts, y, weight, dual, wx, norm):
    c = parts * norm * weight
    x = math.log(y - dual) if y - dual > 0 else 0.0
    for _ in range(_NEWTON_STEPS):
        e = math.exp(x)
        x -= (x - wx - c * (y - dual - e)) / (1 + c * e)
    return y - math.exp(x)


def _primal_logistic(wx, y, weight):
    ywx = y * wx
    return (math.log1p(math.exp(-ywx)) if ywx > 0 else math.log1p(math.exp(ywx)) - ywx) * weight


def _primal_smooth_hinge(wx, y, weight, gamma=1.0):
    ywx = y * wx
    if ywx >= 1:
        return 0.0
    if ywx <= 1 - gamma:
        return (1 - ywx - gamma / 2) * weight
    return (1 - ywx) * (1 - ywx) * weight * 0.5 / gamma


def _xlogx(v):
    return v * math.log(v) if v > 0 else 0.0


def _dual_loss_logistic(dual, y, weight):
    ay = dual * y
    return (_xlogx(ay) + _xlogx(1 - ay)) * weight


def _dual_loss_binary(dual, y, weight, gamma=None):
    ya = dual * y
    if ya < 0 or ya > 1.0:
        return np.finfo(np.float64).max
    return (-ya + (0.5 * gamma * dual * dual if gamma else 0.0)) * weight


def _dual_loss_poisson(dual, y, weight):
    d = y - dual
    if d == 0.0:
        return 0.0
    if d < 0.0:
        return np.finfo(np.float64).max
    return d * (math.log(d) - 1) * weight


# loss -> (label conversion, updated dual, primal loss, dual loss)
_LOSSES = {
    "logistic_loss": (_binary_label, _dual_logistic, _primal_logistic, _dual_loss_logistic),
    "squared_loss": (
        float,
        _dual_squared,
        lambda wx, y, w: (wx - y) * (wx - y) * w * 0.5,
        lambda a, y, w: a * (0.5 * a - y) * w,
    ),
    "hinge_loss": (
        _binary_label,
        _dual_hinge,
        lambda wx, y, w: max(0.0, 1 - y * wx) * w,
        _dual_loss_binary,
    ),
    "smooth_hinge_loss": (
        _binary_label,
        _dual_smooth_hinge,
        _primal_smooth_hinge,
        lambda a, y, w: _dual_loss_binary(a, y, w, gamma=1.0),
    ),
    "poisson_loss": (
        _poisson_label,
        _dual_poisson,
        lambda wx, y, w: (math.exp(wx) - wx * y) * w,
        _dual_loss_poisson,
    ),
}


def _shrink32(w: np.ndarray, shrinkage: np.float32) -> np.ndarray:
    return np.sign(w) * np.maximum(np.abs(w) - shrinkage, np.float32(0))


def _shrink64(w: float, shrinkage: float) -> float:
    s = max(abs(w) - shrinkage, 0.0)
    return math.copysign(s, w) if s > 0.0 else 0.0


def _bad(msg: str):
    return errors.InvalidArgumentError(None, None, msg)


def _split(args, attrs):
    keys = ("num_sparse_features", "num_sparse_features_with_values", "num_dense_features")
    ns, nv, nd = (int(attrs[k]) for k in keys)
    it = iter(args)

    def take(n):
        return [np.asarray(next(it)) for _ in range(n)]

    groups = {"ex_idx": take(ns), "feat_idx": take(ns), "feat_val": take(nv), "dense": take(nd)}
    groups["weights"], groups["labels"] = np.asarray(next(it)), np.asarray(next(it))
    groups["sp_idx"], groups["sp_w"], groups["dense_w"] = take(ns), take(ns), take(nd)
    groups["state"] = np.asarray(next(it))
    return groups


def _sparse_examples(g, n: int, sp_maps):
    """Per feature group, per example: (weight slots, values or None), TF's parse."""
    out = []
    for i, (ex, fi) in enumerate(zip(g["ex_idx"], g["feat_idx"], strict=True)):
        ex, fi = ex.reshape(-1), fi.reshape(-1)
        if ex.size != fi.size:
            raise _bad(f"Found mismatched example_indices and feature_indices [{ex}] vs [{fi}]")
        vals = g["feat_val"][i].reshape(-1) if i < len(g["feat_val"]) else None
        per, end = [], 0
        for e in range(n):
            start = end
            while end < ex.size and ex[end] == e:
                end += 1
            ids = []
            for f in fi[start:end]:
                slot = sp_maps[i].get(int(f))
                if slot is None:
                    raise _bad(f"Found sparse feature indices out of valid range: {int(f)}")
                ids.append(slot)
            if len(set(ids)) != len(ids):
                raise _bad("Duplicate index in sparse vector.")
            v = None if vals is None else vals[start:end].astype(np.float64)
            per.append((np.asarray(ids, np.int64), v))
        out.append(per)
    return out


def _check(g, attrs):
    if int(attrs["num_sparse_features"]) + int(attrs["num_dense_features"]) <= 0:
        raise _bad("Requires at least one feature to train.")
    n = g["weights"].size
    if g["labels"].size != n:
        raise _bad(f"Expected {n} example labels but got {g['labels'].size}")
    for i, d in enumerate(g["dense"]):
        if d.ndim != 2:
            raise _bad(f"Dense features at index {i} must be rank 2 but is rank {d.ndim}")
        if d.shape[1] > g["dense_w"][i].size:
            raise _bad(f"More dense features than we have parameters for: {d.shape[1]}")
    state = g["state"]
    if state.ndim != 2:
        raise _bad(f"example_state_data must be rank 2 but is rank {state.ndim}")
    if state.shape != (n, 4):
        got = ",".join(str(d) for d in state.shape)
        raise _bad(f"Expected shape [{n},4] for example_state_data, got [{got}]")
    return n


def _sdca(args, attrs):
    g = _split(args, attrs)
    n = _check(g, attrs)
    convert, update, primal, dual_loss = _LOSSES[attrs["loss_type"]]
    parts = int(attrs["num_loss_partitions"])
    l1, l2 = np.float32(attrs["l1"]), np.float32(attrs["l2"])
    shrinkage = np.float32(l1 / l2)
    sp_maps = [{int(k): j for j, k in enumerate(ix.reshape(-1))} for ix in g["sp_idx"]]
    sp_nom = [w.reshape(-1).astype(np.float32) for w in g["sp_w"]]
    sp_delta = [np.zeros_like(w) for w in sp_nom]
    d_nom = [w.reshape(-1).astype(np.float32) for w in g["dense_w"]]
    d_delta = [np.zeros_like(w) for w in d_nom]
    rows = [d.astype(np.float32) for d in g["dense"]]
    sparse = _sparse_examples(g, n, sp_maps)
    state = g["state"].astype(np.float32).copy()
    for e in range(n):
        weight, label = float(g["weights"].flat[e]), convert(float(g["labels"].flat[e]))
        dual = float(state[e, 0])
        wx = prev = norm = 0.0
        for j, per in enumerate(sparse):
            slots, vals = per[e]
            for k, slot in enumerate(slots):
                x = 1.0 if vals is None else float(vals[k])
                nom = sp_nom[j][slot]
                cur = float(nom + sp_delta[j][slot] * np.float32(parts))
                prev += x * _shrink64(float(nom), float(shrinkage))
                wx += x * _shrink64(cur, float(shrinkage))
                norm += x * x
        for j, m in enumerate(rows):
            row = m[e]
            k = row.size
            cur = d_nom[j][:k] + d_delta[j][:k] * np.float32(parts)
            prev += float(np.sum(row * _shrink32(d_nom[j][:k], shrinkage), dtype=np.float32))
            wx += float(np.sum(row * _shrink32(cur, shrinkage), dtype=np.float32))
            norm += float(np.sum(row * row, dtype=np.float32))
        with np.errstate(all="ignore"):  # C's division: x/0 is inf, as in TF's kernel
            new_dual = float(
                update(parts, label, weight, dual, np.float64(wx), np.float64(norm) / float(l2))
            )
        step = (new_dual - dual) * weight / float(l2)
        for j, per in enumerate(sparse):
            slots, vals = per[e]
            for k, slot in enumerate(slots):
                x = 1.0 if vals is None else float(vals[k])
                sp_delta[j][slot] = np.float32(float(sp_delta[j][slot]) + x * step)
        for j, m in enumerate(rows):
            k = m.shape[1]
            d_delta[j][:k] += m[e] * np.float32(step)
        state[e] = (new_dual, primal(prev, label, weight), dual_loss(dual, label, weight), weight)
    out_sparse = [d.reshape(w.shape) for d, w in zip(sp_delta, g["sp_w"], strict=True)]
    out_dense = [d.reshape(w.shape) for d, w in zip(d_delta, g["dense_w"], strict=True)]
    return (state, *out_sparse, *out_dense)


def _sdca_shape(op):
    ns = op.get_attr("num_sparse_features")
    nv = op.get_attr("num_sparse_features_with_values")
    nd = op.get_attr("num_dense_features")
    weights = op.inputs[2 * ns + nv + nd + 2 + ns :][: ns + nd]
    return [tensor_shape.TensorShape([None, 4])] + [w.shape for w in weights]


def _register_sdca(op_type: str, adaptive_attr: str):
    op_def = register_op(
        op_type,
        inputs=[
            "sparse_example_indices: num_sparse_features * int64",
            "sparse_feature_indices: num_sparse_features * int64",
            "sparse_feature_values: num_sparse_features_with_values * float32",
            "dense_features: num_dense_features * float32",
            "example_weights: float32",
            "example_labels: float32",
            "sparse_indices: num_sparse_features * int64",
            "sparse_weights: num_sparse_features * float32",
            "dense_weights: num_dense_features * float32",
            "example_state_data: float32",
        ],
        outputs=[
            "out_example_state_data: float32",
            "out_delta_sparse_weights: num_sparse_features * float32",
            "out_delta_dense_weights: num_dense_features * float32",
        ],
        attrs={
            "loss_type": REQUIRED,
            adaptive_attr: False,
            "num_sparse_features": REQUIRED,
            "num_sparse_features_with_values": REQUIRED,
            "num_dense_features": REQUIRED,
            "l1": REQUIRED,
            "l2": REQUIRED,
            "num_loss_partitions": REQUIRED,
            "num_inner_iterations": REQUIRED,
        },
        shape_fn=_sdca_shape,
    )
    NotDifferentiable(op_type)

    @op_def.kernel("CPU")
    async def _kernel(ctx, *args):
        return await ctx.compute(_sdca, args, dict(ctx.attrs))

    return op_def


SdcaOptimizer = _register_sdca("SdcaOptimizer", "adaptative")
SdcaOptimizerV2 = _register_sdca("SdcaOptimizerV2", "adaptive")


def sdca_optimizer(
    sparse_example_indices,
    sparse_feature_indices,
    sparse_feature_values,
    dense_features,
    example_weights,
    example_labels,
    sparse_indices,
    sparse_weights,
    dense_weights,
    example_state_data,
    loss_type,
    l1,
    l2,
    num_loss_partitions,
    num_inner_iterations,
    adaptative=True,
    name=None,
):
    """`tf.train.sdca_optimizer`: one SDCA pass over a mini-batch (op SdcaOptimizer).

    Returns (out_example_state_data, out_delta_sparse_weights, out_delta_dense_weights),
    the last two lists like `sparse_weights` / `dense_weights`.

    Raises:
      ValueError: an unknown loss_type, num_loss_partitions or num_inner_iterations < 1.
      InvalidArgumentError (when run): labels the loss cannot take, mismatched or
        duplicate sparse indices, feature ids without a weight, a bad state shape.
    """
    if loss_type not in LOSS_TYPES:
        allowed = ", ".join(f'"{x}"' for x in LOSS_TYPES)
        raise ValueError(
            f"Attr 'loss_type' of 'SdcaOptimizer' Op passed string '{loss_type}' not in: "
            f"{allowed}."
        )
    for attr, v in (("num_loss_partitions", num_loss_partitions),
                    ("num_inner_iterations", num_inner_iterations)):  # fmt: skip
        if int(v) < 1:
            raise ValueError(f"Attr '{attr}' of {int(v)} must be at least minimum 1")
    attrs = {
        "loss_type": loss_type,
        "adaptative": bool(adaptative),
        "num_sparse_features": len(sparse_example_indices),
        "num_sparse_features_with_values": len(sparse_feature_values),
        "num_dense_features": len(dense_features),
        "l1": float(l1),
        "l2": float(l2),
        "num_loss_partitions": int(num_loss_partitions),
        "num_inner_iterations": int(num_inner_iterations),
    }
    inputs = [
        list(sparse_example_indices), list(sparse_feature_indices), list(sparse_feature_values),
        list(dense_features), example_weights, example_labels, list(sparse_indices),
        list(sparse_weights), list(dense_weights), example_state_data,
    ]  # fmt: skip
    op = ops.apply_op("SdcaOptimizer", inputs, attrs, name=name)
    ns, nd = attrs["num_sparse_features"], attrs["num_dense_features"]
    outs = list(op.outputs)
    return outs[0], outs[1 : 1 + ns], outs[1 + ns : 1 + ns + nd]
