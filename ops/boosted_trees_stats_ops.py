"""Boosted trees' gradient statistics and split search (TF's boosted_trees stats ops).

MakeStatsSummary, AggregateStats and SparseAggregateStats sum each example's gradient
and hessian into the bucket its feature value falls in, per node; the Calculate* ops
then find, for every node of a range, the split with the largest gain:

    weight = -(g - l1 * sign(g)) / (h + l2)      gain = -(g - l1 * sign(g)) * weight

(zero when |g| <= l1 or h + l2 is ~0), a split's gain being its two children's gains
less the parent's, less tree_complexity.  The stats summaries that carry a default
bucket (the last one: missing values, feature -1) try the default on the left and on
the right of each threshold.

Invariant: sums and gains are float32, accumulated in TF's order (the summaries'
buckets summed first to last; MakeStatsSummary and AggregateStats in float64, then
rounded), so results carry TF's bits.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.registry import REQUIRED, register_op

__all__: list[str] = ["weight_and_gain"]

_F = np.float32
_LOWEST = _F(np.finfo(np.float32).min)
_EPS = _F(1e-15)
_INEQ_LEFT = b"INEQUALITY_DEFAULT_LEFT"
_INEQ_RIGHT = b"INEQUALITY_DEFAULT_RIGHT"
_EQ_RIGHT = b"EQUALITY_DEFAULT_RIGHT"


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def weight_and_gain(g, h, l1, l2):
    """A leaf's weights and gain from its gradient and hessian sums (lists of float32):
    one logit (with L1), a full hessian (len(h) == d * d) or a diagonal one."""
    d = len(g)
    if d == 1:
        g0 = _F(g[0])
        if l1 > 0:
            if g0 > l1:
                g0 = g0 - l1
            elif g0 < -l1:
                g0 = g0 + l1
            else:
                return [_F(0)], _F(0)
        denom = _F(h[0]) + l2
        if denom <= _EPS:
            return [_F(0)], _F(0)
        w = -g0 / denom
        return [w], -g0 * w
    gv = np.asarray(g, np.float32)
    if len(h) == d * d:
        # Eigen reshapes column-major: row r, column c is h[c * d + r].
        m = np.asarray(h, np.float32).reshape(d, d).T + l2 * np.eye(d, dtype=np.float32)
        w = -_solve(m, gv)
    else:
        hr = np.asarray(h, np.float32) + l2
        if np.all(hr != 0):
            w = -(np.float32(1) / hr) * gv
        else:  # not invertible: TF's least-squares route, zero where the hessian is
            w = -_solve(np.diag(hr), gv)
    gain = _F(0)
    for gi, wi in zip(-gv, w, strict=True):
        gain = gain + gi * wi
    return [_F(x) for x in w], gain


def _dot(a, b):
    """A float32 dot product summed first to last (Eigen's for short vectors)."""
    total = _F(0)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        total = x * y if i == 0 else total + x * y
    return _F(total)


def _norm(v) -> np.float32:
    return _F(np.sqrt(_dot(v, v)))


def _reflect(block: np.ndarray, essential: np.ndarray, tau) -> None:
    """Apply the Householder reflector (1, essential), tau to `block`'s rows in place."""
    if block.shape[0] == 1:
        block *= _F(1) - tau
        return
    if tau == 0:
        return
    bottom = block[1:]
    tmp = np.array([_dot(essential, bottom[:, j]) for j in range(block.shape[1])], np.float32)
    tmp += block[0]
    block[0] -= tau * tmp
    bottom -= np.outer(tau * essential, tmp).astype(np.float32)


def _solve(m: np.ndarray, g: np.ndarray) -> np.ndarray:
    """m^-1 g by Eigen's column-pivoting Householder QR, in float32 and in its order
    (TF's full-hessian leaf weights), zeros past the numerical rank."""
    qr = np.array(m, np.float32)
    rows, cols = qr.shape
    size = min(rows, cols)
    taus = np.zeros(size, np.float32)
    direct = np.array([_norm(qr[:, k]) for k in range(cols)], np.float32)
    updated = direct.copy()
    eps = _F(np.finfo(np.float32).eps)
    threshold = _F(np.square(updated.max() * eps)) / _F(rows)
    downdate = _F(np.sqrt(eps))
    nonzero, swaps = size, []
    for k in range(size):
        pick = k + int(np.argmax(updated[k:]))
        if nonzero == size and _F(np.square(updated[pick])) < threshold * _F(rows - k):
            nonzero = k
        swaps.append(pick)
        if pick != k:
            qr[:, [k, pick]] = qr[:, [pick, k]]
            updated[[k, pick]], direct[[k, pick]] = updated[[pick, k]], direct[[pick, k]]
        col = qr[k:, k]
        tail_sq = _dot(col[1:], col[1:]) if col.size > 1 else _F(0)
        c0 = col[0]
        if tail_sq <= np.finfo(np.float32).tiny:
            taus[k], beta = 0, c0
            col[1:] = 0
        else:
            beta = _F(np.sqrt(c0 * c0 + tail_sq))
            beta = -beta if c0 >= 0 else beta
            col[1:] = col[1:] / (c0 - beta)
            taus[k] = (beta - c0) / beta
        qr[k, k] = beta
        _reflect(qr[k:, k + 1 :], qr[k + 1 :, k], taus[k])
        for j in range(k + 1, cols):
            if updated[j] != 0:
                t = _F(abs(qr[k, j])) / updated[j]
                t = max((_F(1) + t) * (_F(1) - t), _F(0))
                t2 = t * _F(np.square(updated[j] / direct[j]))
                if t2 <= downdate:
                    direct[j] = updated[j] = _norm(qr[k + 1 :, j])
                else:
                    updated[j] = updated[j] * _F(np.sqrt(t))
    perm = list(range(cols))
    for k, pick in enumerate(swaps):
        perm[k], perm[pick] = perm[pick], perm[k]
    out = np.zeros(cols, np.float32)
    if nonzero == 0:
        return out
    c = np.array(g, np.float32).reshape(-1, 1)
    for k in range(nonzero):  # Q^T g, reflector 0 first
        _reflect(c[k:], qr[k + 1 :, k], taus[k])
    c = c[:, 0]
    for i in range(nonzero - 1, -1, -1):  # upper triangular, column by column
        c[i] = c[i] / qr[i, i]
        if i:
            c[:i] -= c[i] * qr[:i, i]
    for i in range(nonzero):
        out[perm[i]] = c[i]
    return out


def _scalar(x, what: str):
    x = np.asarray(x)
    if x.ndim != 0:
        raise _invalid(f"{what} must be a scalar, got a tensor of shape {list(x.shape)}")
    return _F(x[()])


def _node_range(x) -> tuple[int, int]:
    x = np.asarray(x)
    if x.ndim != 1:
        raise _invalid(
            f"node_id_range must be a rank 1 tensor, but given node_id_range has dims of {x.ndim}"
        )
    if x.shape[0] != 2:
        raise _invalid(
            f"node_id_range must be a rank 1 tensor with shape=[2], but given "
            f"node_id_range has shape {x.shape[0]} on its first dim"
        )
    return int(x[0]), int(x[1])


def _regularizers(l1, l2, tc, mw) -> tuple:
    return (
        _scalar(l1, "l1"),
        _scalar(l2, "l2"),
        _scalar(tc, "tree_complexity"),
        _scalar(mw, "min_node_weight"),
    )


def _cumulative(rows: np.ndarray) -> np.ndarray:
    """Running float32 sums down axis 0, first to last (np.cumsum keeps that order)."""
    return np.cumsum(rows, axis=0, dtype=np.float32)


def _rank(t, rank: int, what: str = "") -> tensor_shape.TensorShape:
    """Raises ValueError (TF's shape-inference words) when `t`'s known rank is not `rank`;
    the graph adds which op."""
    shape = tensor_shape.as_shape(t.shape)
    if shape.ndims is not None and shape.ndims != rank:
        raise ValueError(f"Shape must be rank {rank} but is rank {shape.ndims}")
    return shape


def _text(dims) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def merge_dims(a, b) -> None:
    """TF's InferenceContext::Merge of two dimensions (values or None).

    Raises:
      ValueError: both are known and differ.
    """
    if a is not None and b is not None and a != b:
        raise ValueError(f"Dimensions must be equal, but are {a} and {b}")


def merge_shape(t, target: list) -> None:
    """TF's Merge of an input's shape with `target` (a list, None for unknown).

    Raises:
      ValueError: a known rank or dimension differs.
    """
    shape = tensor_shape.as_shape(t.shape)
    if shape.ndims is None:
        return
    if shape.ndims != len(target):
        raise ValueError(f"Shapes must be equal rank, but are {shape.ndims} and {len(target)}")
    dims = shape.as_list()
    for i, (a, b) in enumerate(zip(dims, target, strict=True)):
        if a is not None and b is not None and a != b:
            raise ValueError(
                f"Dimension {i} in both shapes must be equal, but are {a} and {b}. "
                f"Shapes are {_text(dims)} and {_text(target)}."
            )


def dim(t, i: int):
    """Dimension `i` of an input's static shape, None when unknown."""
    shape = tensor_shape.as_shape(t.shape)
    return None if shape.ndims is None or shape.ndims <= i else shape[i].value


def min_list(op, arg: str, n: int, minimum: int = 1) -> None:
    """Raises ValueError, in TF's words, for a list argument shorter than its minimum."""
    if n < minimum:
        raise ValueError(
            f"List argument '{arg}' to '{op.type}' Op with length {n} shorter "
            f"than minimum length {minimum}."
        )


# -- summaries ------------------------------------------------------------------------------


def _make_stats_shape(op):
    a = op.get_attr
    min_list(op, "bucketized_features_list", a("num_features"))
    ids, g, h = op.inputs[:3]
    _rank(ids, 1), _rank(g, 2), _rank(h, 2)
    merge_dims(dim(ids, 0), dim(g, 0))
    merge_shape(g, tensor_shape.as_shape(h.shape).as_list() if h.shape.ndims else [None, None])
    for t in op.inputs[3:]:
        _rank(t, 1)
        merge_dims(dim(ids, 0), dim(t, 0))
    return [[a("num_features"), a("max_splits"), a("num_buckets"), 2]]


BoostedTreesMakeStatsSummary = register_op(
    "BoostedTreesMakeStatsSummary",
    inputs=[
        "node_ids: int32",
        "gradients: float32",
        "hessians: float32",
        "bucketized_features_list: num_features * int32",
    ],
    outputs=["stats_summary: float32"],
    attrs={"max_splits": REQUIRED, "num_buckets": REQUIRED, "num_features": REQUIRED},
    shape_fn=_make_stats_shape,
)


def _accumulate(out: np.ndarray, index: tuple, values: np.ndarray, what: str) -> None:
    try:
        np.add.at(out, index, values)
    except IndexError:
        raise _invalid(
            f"{what}: a node id or bucket is out of range for the summary of "
            f"shape {list(out.shape)}"
        ) from None


@BoostedTreesMakeStatsSummary.kernel("CPU")
async def _make_stats_summary(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_make_stats_summary_value, ctx, *args)


def _make_stats_summary_value(ctx, node_ids, gradients, hessians, *features):
    a = ctx.attrs
    node_ids = np.asarray(node_ids, np.int32).reshape(-1)
    grads, hess = np.asarray(gradients, np.float32), np.asarray(hessians, np.float32)
    if grads.ndim != 2 or node_ids.shape[0] != grads.shape[0]:
        raise _invalid(
            f"node_ids size should match 0th dim of gradients. node ids size: "
            f"{node_ids.shape[0]}, gradients dim0: {grads.shape[0]}"
        )
    out = np.zeros((a["num_features"], a["max_splits"], a["num_buckets"], 2), np.float64)
    for f, feat in enumerate(features):
        feat = np.asarray(feat, np.int32).reshape(-1)
        _accumulate(out[f], (node_ids, feat, 0), grads[:, 0], ctx.op.type)
        _accumulate(out[f], (node_ids, feat, 1), hess[:, 0], ctx.op.type)
    return out.astype(np.float32)


def _aggregate_shape(op):
    a = op.get_attr
    _rank(op.inputs[0], 1)
    g, h, f = (_rank(op.inputs[i], 2) for i in (1, 2, 3))
    for i in (1, 2, 3):
        merge_dims(dim(op.inputs[i], 0), dim(op.inputs[0], 0))
    stats = None if g[1].value is None or h[1].value is None else g[1].value + h[1].value
    return [[a("max_splits"), f[1].value, a("num_buckets") + 1, stats]]


BoostedTreesAggregateStats = register_op(
    "BoostedTreesAggregateStats",
    inputs=["node_ids: int32", "gradients: float32", "hessians: float32", "feature: int32"],
    outputs=["stats_summary: float32"],
    attrs={"max_splits": REQUIRED, "num_buckets": REQUIRED},
    shape_fn=_aggregate_shape,
)


@BoostedTreesAggregateStats.kernel("CPU")
async def _aggregate_stats(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_aggregate_stats_value, ctx, *args)


def _aggregate_stats_value(ctx, node_ids, gradients, hessians, feature):
    a = ctx.attrs
    node_ids = np.asarray(node_ids, np.int32).reshape(-1)
    grads, hess = np.asarray(gradients, np.float32), np.asarray(hessians, np.float32)
    feature = np.asarray(feature, np.int32)
    if grads.ndim != 2 or node_ids.shape[0] != grads.shape[0]:
        raise _invalid(
            f"node_ids size should match 0th dim of gradients. node ids size: "
            f"{node_ids.shape[0]}, gradients dim0: {grads.shape[0]}"
        )
    bad = np.flatnonzero(node_ids < 0)
    if bad.size:
        i = int(bad[0])
        raise _invalid(f"node_ids {i}th entry should be >=0, got: {node_ids[i]}")
    nb = a["num_buckets"]
    logits, fdims = grads.shape[1], feature.shape[1]
    out = np.zeros((a["max_splits"], fdims, nb + 1, logits + hess.shape[1]), np.float64)
    stats = np.concatenate([grads, hess], axis=1).astype(np.float64)
    buckets = np.where(feature == -1, nb, feature)
    for d in range(fdims):
        _accumulate(out[:, d], (node_ids, buckets[:, d]), stats, ctx.op.type)
    return out.astype(np.float32)


def _sparse_aggregate_shape(op):
    for i, r in enumerate((1, 2, 2, 2, 1, 1)):
        _rank(op.inputs[i], r)
    for i in (1, 2):
        merge_dims(dim(op.inputs[i], 0), dim(op.inputs[0], 0))
    merge_dims(dim(op.inputs[3], 0), dim(op.inputs[4], 0))
    d = dim(op.inputs[5], 0)
    if d is not None and d != 2:
        raise ValueError(f"Dimension must be 2 but is {d}")
    return [[None, 4], [None], [4]]


BoostedTreesSparseAggregateStats = register_op(
    "BoostedTreesSparseAggregateStats",
    inputs=[
        "node_ids: int32",
        "gradients: float32",
        "hessians: float32",
        "feature_indices: int32",
        "feature_values: int32",
        "feature_shape: int32",
    ],
    outputs=[
        "stats_summary_indices: int32",
        "stats_summary_values: float32",
        "stats_summary_shape: int32",
    ],
    attrs={"max_splits": REQUIRED, "num_buckets": REQUIRED},
    shape_fn=_sparse_aggregate_shape,
)


def _check_sparse_inputs(a, node_ids, grads, hess, indices, values, shape) -> None:
    for i, n in enumerate(node_ids.tolist()):
        if n > a["max_splits"]:
            raise _invalid(
                f"Nodes in node_ids must be at most max_splits. Node {i} is {n} "
                f"which is greater than {a['max_splits']}"
            )
    if grads.ndim != 2 or hess.ndim != 2:
        raise _invalid("gradients and hessians must be matrices")
    if indices.ndim != 2 or indices.shape[1] != 2:
        raise _invalid(
            f"feature_indices must be a matrix of shape [?, 2], received shape "
            f"{list(indices.shape)}"
        )
    for i, v in enumerate(values.tolist()):
        if v > a["num_buckets"]:
            raise _invalid(
                f"Features in feature_values must be at most num_buckets. Node {i} "
                f"is {v} which is greater than {a['num_buckets']}"
            )
    if values.shape[0] != indices.shape[0]:
        raise _invalid(
            f"Number of elements in feature_values must match number of sparse "
            f"entries in feature_indices. Got {values.shape[0]} and "
            f"{indices.shape[0]}"
        )
    if shape.shape[0] < 2:
        raise _invalid("feature_shape must hold [batch size, feature dimensions]")


@BoostedTreesSparseAggregateStats.kernel("CPU")
async def _sparse_aggregate_stats(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_sparse_aggregate_stats_value, ctx, *args)


def _sparse_aggregate_stats_value(ctx, node_ids, gradients, hessians, indices, values, shape):
    a = ctx.attrs
    node_ids = np.asarray(node_ids, np.int32).reshape(-1)
    grads, hess = np.asarray(gradients, np.float32), np.asarray(hessians, np.float32)
    indices, values = np.asarray(indices, np.int32), np.asarray(values, np.int32)
    shape = np.asarray(shape, np.int32).reshape(-1)
    _check_sparse_inputs(a, node_ids, grads, hess, indices, values, shape)
    batch, fdims, nb = grads.shape[0], int(shape[1]), a["num_buckets"]
    stats_dims = grads.shape[1] + hess.shape[1]
    rows = np.concatenate([grads, hess], axis=1)
    acc: dict[tuple, np.ndarray] = {}

    def add(instance: int, f_dim: int, bucket: int) -> None:
        key = (int(node_ids[instance]), f_dim, bucket)
        s = acc.get(key)
        if s is None:
            s = acc[key] = np.zeros(stats_dims, np.float32)
        s += rows[instance]

    def add_missing(start_i, end_i, start_d, end_d) -> None:
        # Every (instance, dimension) strictly between two entries is a missing value.
        for inst in range(start_i, end_i + 1):
            lo = start_d + 1 if inst == start_i else 0
            hi = end_d if inst == end_i else fdims
            for d in range(lo, hi):
                add(inst, d, nb)

    prev_i, prev_d = 0, -1
    for k in range(indices.shape[0]):
        inst, d = int(indices[k, 0]), int(indices[k, 1])
        if inst < prev_i or inst >= node_ids.shape[0] or inst < 0 or d > fdims:
            raise _invalid(
                f"feature_indices({k}, 0) = {inst} is not increasing or not a "
                f"valid index in the node_ids vector"
            )
        add_missing(prev_i, inst, prev_d, d)
        prev_i, prev_d = inst, d
        add(inst, d, int(values[k]))
    add_missing(prev_i, batch - 1, prev_d, fdims)
    keys = sorted(acc)
    out_idx = np.array([[*key, s] for key in keys for s in range(stats_dims)], np.int32)
    out_val = np.array([acc[key][s] for key in keys for s in range(stats_dims)], np.float32)
    return (
        out_idx.reshape(-1, 4),
        out_val.reshape(-1),
        np.array([a["max_splits"], fdims, nb + 1, stats_dims], np.int32),
    )


# -- split search ---------------------------------------------------------------------------


def _gain_larger(g1, g2) -> bool:
    with np.errstate(over="ignore"):
        return bool(_F(g1) - _F(g2) >= _EPS)


class _Best:
    """The best split of one node found so far (TF's running best)."""

    __slots__ = ("gain", "bucket", "f_dim", "split_type", "left", "right")

    def __init__(self):
        self.gain, self.bucket, self.f_dim = _LOWEST, 0, 0
        self.split_type, self.left, self.right = b"", None, None

    def consider(self, gl, hl, gr, hr, l1, l2, bucket, f_dim, split_type) -> None:
        wl, gain_l = weight_and_gain(gl, hl, l1, l2)
        wr, gain_r = weight_and_gain(gr, hr, l1, l2)
        gain = gain_l + gain_r
        if _gain_larger(gain, self.gain):
            self.gain, self.bucket, self.f_dim = gain, bucket, f_dim
            self.split_type, self.left, self.right = split_type, wl, wr


def _weights_and_gains_1d(g: np.ndarray, h: np.ndarray, l1, l2):
    """weight_and_gain for one logit over arrays of candidates: the same float32
    operations, element by element."""
    zero = np.zeros(g.shape, bool)
    if l1 > 0:
        above, below = g > l1, g < -l1
        g = np.where(above, g - l1, np.where(below, g + l1, g))
        zero |= ~(above | below)
    denom = h + l2
    zero |= denom <= _EPS
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        w = np.negative(g) / denom
        gain = np.negative(g) * w
    w[zero] = 0
    gain[zero] = 0
    return w, gain


# Above this, gains a float32 ulp apart differ by more than TF's 1e-15 tolerance.
_TOLERANCE_FREE = _F(2.0**-20)


def _first_better(running, gains: np.ndarray) -> int | None:
    """The candidate TF's scan (take g when g - best >= 1e-15) ends on, or None when
    none beats `running`.  For gains of at least 2^-20 that is the first maximum."""
    if gains.size == 0:
        return None
    top = gains.max()
    if top >= _TOLERANCE_FREE:
        return int(np.argmax(gains)) if top > running else None
    chosen = None
    for i, g in enumerate(gains):  # tiny gains: the tolerance matters, scan as TF
        if _gain_larger(g, running):
            running, chosen = g, i
    return chosen


def _consider_many(best: _Best, gl, hl, gr, hr, l1, l2, buckets, f_dims, types) -> None:
    """best.consider for arrays of one-logit candidates, in their order."""
    wl, gain_l = _weights_and_gains_1d(gl, hl, l1, l2)
    wr, gain_r = _weights_and_gains_1d(gr, hr, l1, l2)
    gains = gain_l + gain_r
    i = _first_better(best.gain, gains)
    if i is not None:
        best.gain, best.bucket, best.f_dim = gains[i], int(buckets[i]), int(f_dims[i])
        best.split_type, best.left, best.right = types[i], [wl[i]], [wr[i]]


def _inequality(best: _Best, stats: np.ndarray, d: int, l1, l2) -> None:
    """stats: [feature dims, buckets + 1 (the default last), logits + hessians]."""
    nb = stats.shape[1] - 1
    if d == 1 and nb > 0:
        # Candidates in TF's order: per dimension, per bucket, default left then right.
        cum = _cumulative(np.moveaxis(stats, 1, 0))  # [buckets + 1, dims, 2]
        total, missing, cum = cum[nb], stats[:, nb], cum[:nb]
        left = np.stack([cum + missing, cum], axis=2)  # [buckets, dims, 2 kinds, 2]
        right = total[None, :, None, :] - left
        order = (1, 0, 2)  # dims, buckets, kinds
        gl, hl = (left[..., k].transpose(order).reshape(-1) for k in (0, 1))
        gr, hr = (right[..., k].transpose(order).reshape(-1) for k in (0, 1))
        dims, buckets, kinds = np.indices((stats.shape[0], nb, 2)).reshape(3, -1)
        types = [(_INEQ_LEFT, _INEQ_RIGHT)[k] for k in kinds]
        _consider_many(best, gl, hl, gr, hr, l1, l2, buckets, dims, types)
        return
    for f_dim in range(stats.shape[0]):
        cum = _cumulative(stats[f_dim])
        total = cum[nb]
        missing = stats[f_dim, nb]
        for b in range(nb):
            left = cum[b] + missing
            right = total - left
            best.consider(left[:d], left[d:], right[:d], right[d:], l1, l2, b, f_dim, _INEQ_LEFT)
            right = total - cum[b]
            best.consider(
                cum[b, :d], cum[b, d:], right[:d], right[d:], l1, l2, b, f_dim, _INEQ_RIGHT
            )


def _equality(best: _Best, stats: np.ndarray, d: int, tg, th, l1, l2) -> None:
    nb = stats.shape[1] - 1
    if d == 1 and nb > 0:
        cand = stats[:, :nb].reshape(-1, stats.shape[2])  # dims then buckets, TF's order
        dims, buckets = np.indices((stats.shape[0], nb)).reshape(2, -1)
        g, h = cand[:, 0], cand[:, 1]
        _consider_many(
            best, g, h, tg[0] - g, th[0] - h, l1, l2, buckets, dims, [_EQ_RIGHT] * g.size
        )
        return
    for f_dim in range(stats.shape[0]):
        for b in range(nb):
            g, h = stats[f_dim, b, :d], stats[f_dim, b, d:]
            best.consider(g, h, tg - g, th - h, l1, l2, b, f_dim, _EQ_RIGHT)


def _totals(stats: np.ndarray, d: int):
    """The node's gradient and hessian sums over the first dimension's buckets."""
    total = _cumulative(stats[0])[-1]
    return total[:d], total[d:]


def _split_outputs(rows: list, d: int, with_feature_ids: bool) -> tuple:
    n = len(rows)
    out = [
        np.array([r["node"] for r in rows], np.int32),
        np.array([r["gain"] for r in rows], np.float32).reshape(n),
    ]
    if with_feature_ids:
        out.append(np.array([r["feature_id"] for r in rows], np.int32).reshape(n))
    out += [
        np.array([r["f_dim"] for r in rows], np.int32).reshape(n),
        np.array([r["bucket"] for r in rows], np.int32).reshape(n),
        np.array([r["left"] for r in rows], np.float32).reshape(n, d),
        np.array([r["right"] for r in rows], np.float32).reshape(n, d),
        np.array([r["split_type"] for r in rows], dtype=object).reshape(n),
    ]
    return tuple(out)


def _row(node: int, best: _Best, parent_gain, tc, **extra) -> dict:
    return {
        "node": node,
        "gain": (best.gain - parent_gain) - tc,
        "f_dim": best.f_dim,
        "bucket": best.bucket,
        "left": best.left,
        "right": best.right,
        "split_type": best.split_type,
        **extra,
    }


def _check_dims(stats_shape, d: int) -> None:
    hess_dim = stats_shape[3] - d
    if hess_dim <= 0:
        raise _invalid(f"hessian dim should be < 0, got {hess_dim}")
    if hess_dim > d * d:
        raise _invalid(f"hessian dim should be <= {d * d} but got: {hess_dim}")


def _vector_outputs_shape(ranks: dict, n_out: int, contrib_dim_attr: str | None):
    def fn(op):
        _rank(op.inputs[0], 1)
        merge_shape(op.inputs[0], [2])
        for i, r in ranks.items():
            _rank(op.inputs[i], r)
        d = op.get_attr(contrib_dim_attr) if contrib_dim_attr else 1
        shapes = [[None]] * n_out
        shapes[n_out - 3] = shapes[n_out - 2] = [None, d]
        return shapes

    return fn


_SPLIT_OUTPUTS = [
    "node_ids: int32",
    "gains: float32",
    "feature_dimensions: int32",
    "thresholds: int32",
    "left_node_contribs: float32",
    "right_node_contribs: float32",
    "split_with_default_directions: string",
]
_REG_INPUTS = [
    "l1: float32",
    "l2: float32",
    "tree_complexity: float32",
    "min_node_weight: float32",
]

BoostedTreesCalculateBestFeatureSplit = register_op(
    "BoostedTreesCalculateBestFeatureSplit",
    inputs=["node_id_range: int32", "stats_summary: float32", *_REG_INPUTS],
    outputs=_SPLIT_OUTPUTS,
    attrs={"logits_dimension": REQUIRED, "split_type": "inequality"},
    shape_fn=_vector_outputs_shape({0: 1, 1: 4, 2: 0, 3: 0, 4: 0, 5: 0}, 7, "logits_dimension"),
)


@BoostedTreesCalculateBestFeatureSplit.kernel("CPU")
async def _calculate_best_feature_split(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_calculate_best_feature_split_value, ctx, *args)


def _calculate_best_feature_split_value(ctx, node_range, summary, l1, l2, tc, mw):
    first, last = _node_range(node_range)
    summary = np.asarray(summary, np.float32)
    if summary.ndim != 4:
        raise _invalid("stats_summary argument must have rank 4")
    d = ctx.attrs["logits_dimension"]
    _check_dims(summary.shape, d)
    l1, l2, tc, mw = _regularizers(l1, l2, tc, mw)
    equality = ctx.attrs["split_type"] == "equality"
    rows = []
    for node in range(first, last):
        tg, th = _totals(summary[node], d)
        if _F(np.sqrt(np.sum(th.astype(np.float32) ** 2))) < mw:
            continue
        _, parent_gain = weight_and_gain(tg, th, l1, l2)
        best = _Best()
        if equality:
            _equality(best, summary[node], d, tg, th, l1, l2)
        else:
            _inequality(best, summary[node], d, l1, l2)
        if best.gain == _LOWEST:
            continue
        rows.append(_row(node, best, parent_gain, tc))
    return _split_outputs(rows, d, with_feature_ids=False)


def _v2_shape(op):
    n = op.get_attr("num_features")
    min_list(op, "stats_summaries_list", n)
    base = tensor_shape.as_shape(op.inputs[1].shape)
    for t in op.inputs[2 : 1 + n]:
        if base.ndims is not None:
            merge_shape(t, base.as_list())
    ranks = {0: 1, **{1 + i: 4 for i in range(n)}, n + 1: 1, n + 2: 1}
    ranks.update({n + 3 + i: 0 for i in range(4)})
    return _vector_outputs_shape(ranks, 8, "logits_dimension")(op)


BoostedTreesCalculateBestFeatureSplitV2 = register_op(
    "BoostedTreesCalculateBestFeatureSplitV2",
    inputs=[
        "node_id_range: int32",
        "stats_summaries_list: num_features * float32",
        "split_types: string",
        "candidate_feature_ids: int32",
        *_REG_INPUTS,
    ],
    outputs=[*_SPLIT_OUTPUTS[:2], "feature_ids: int32", *_SPLIT_OUTPUTS[2:]],
    attrs={"num_features": REQUIRED, "logits_dimension": REQUIRED},
    shape_fn=_v2_shape,
)


@BoostedTreesCalculateBestFeatureSplitV2.kernel("CPU")
async def _calculate_best_feature_split_v2(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_calculate_best_feature_split_v2_value, ctx, *args)


def _calculate_best_feature_split_v2_value(ctx, node_range, *args):
    n, d = ctx.attrs["num_features"], ctx.attrs["logits_dimension"]
    summaries = [np.asarray(s, np.float32) for s in args[:n]]
    split_types, candidates = np.asarray(args[n]), np.asarray(args[n + 1])
    first, last = _node_range(node_range)
    _check_dims(summaries[0].shape, d)
    if split_types.ndim != 1:
        raise _invalid(f"split_types must be a vector, received shape {list(split_types.shape)}")
    types = [t.decode() if isinstance(t, bytes) else str(t) for t in split_types.tolist()]
    if any(t not in ("inequality", "equality") for t in types):
        raise errors.AbortedError(
            None, None, "Operation received an exception: Incorrect split type"
        )
    if candidates.ndim != 1:
        raise _invalid(
            f"candidate_feature_ids must be a vector, received shape {list(candidates.shape)}"
        )
    l1, l2, tc, mw = _regularizers(*args[n + 2 : n + 6])
    rows = []
    for node in range(first, last):
        tg, th = _totals(summaries[0][node], d)
        if _F(np.sqrt(np.sum(th.astype(np.float32) ** 2))) < mw:
            continue
        _, parent_gain = weight_and_gain(tg, th, l1, l2)
        best, best_fid = None, 0
        for f in range(n):
            fb = _Best()
            if types[f] == "inequality":
                _inequality(fb, summaries[f][node], d, l1, l2)
            else:
                _equality(fb, summaries[f][node], d, tg, th, l1, l2)
            if best is None or fb.gain > best.gain:
                best, best_fid = fb, int(candidates[f])
        if best is None or best.gain == _LOWEST:
            continue
        rows.append(_row(node, best, parent_gain, tc, feature_id=best_fid))
    return _split_outputs(rows, d, with_feature_ids=True)


BoostedTreesSparseCalculateBestFeatureSplit = register_op(
    "BoostedTreesSparseCalculateBestFeatureSplit",
    inputs=[
        "node_id_range: int32",
        "stats_summary_indices: int32",
        "stats_summary_values: float32",
        "stats_summary_shape: int32",
        *_REG_INPUTS,
    ],
    outputs=_SPLIT_OUTPUTS,
    attrs={"logits_dimension": REQUIRED, "split_type": "inequality"},
    shape_fn=_vector_outputs_shape({0: 1, 1: 2, 2: 1, 3: 1, 4: 0, 5: 0, 6: 0, 7: 0}, 7, None),
)


def _sparse_node(node: int, fmap: dict, nb: int, l1, l2, mw):
    """The best split of one node from its {f_dim: {bucket: [grad, hess]}} stats, or None."""
    best = _Best()
    best.split_type = _INEQ_LEFT
    best.left, best.right = [_F(0)], [_F(0)]
    tg = th = parent_gain = _F(0)
    for i, f_dim in enumerate(sorted(fmap)):
        buckets = fmap[f_dim]
        default = buckets.get(nb)
        dg, dh = (_F(default[0]), _F(default[1])) if default is not None else (_F(0), _F(0))
        if i == 0:
            for b in sorted(buckets):
                tg, th = tg + _F(buckets[b][0]), th + _F(buckets[b][1])
            if th < mw:
                break
            _, parent_gain = weight_and_gain([tg], [th], l1, l2)
        lg = lh = _F(0)
        for b in sorted(buckets):
            if b == nb:
                break
            lg, lh = lg + _F(buckets[b][0]), lh + _F(buckets[b][1])
            best.consider([lg], [lh], [tg - lg], [th - lh], l1, l2, b, f_dim, _INEQ_RIGHT)
            best.consider(
                [lg + dg],
                [lh + dh],
                [(tg - dg) - lg],
                [(th - dh) - lh],
                l1,
                l2,
                b,
                f_dim,
                _INEQ_LEFT,
            )
    if best.gain == _LOWEST:
        return None
    return best, parent_gain


@BoostedTreesSparseCalculateBestFeatureSplit.kernel("CPU")
async def _sparse_calculate_best_feature_split(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_sparse_calculate_best_feature_split_value, ctx, *args)


def _sparse_calculate_best_feature_split_value(
    ctx, node_range, indices, values, shape, l1, l2, tc, mw
):
    x = np.asarray(node_range)
    if x.ndim != 1:
        raise _invalid(f"node_id_range must be a scalar, got a tensor of shape {list(x.shape)}")
    if x.shape[0] != 2:
        raise _invalid(f"node_id_range should have 2 entries, got: {x.shape[0]}")
    indices, values = np.asarray(indices, np.int32), np.asarray(values, np.float32)
    shape = np.asarray(shape, np.int32)
    if indices.ndim != 2:
        raise _invalid(
            f"stats_summary_indices must be a matrix, got a tensor of shape {list(indices.shape)}"
        )
    nb, stats_dims = int(shape[2]) - 1, int(shape[3])
    l1, l2, tc, mw = _regularizers(l1, l2, tc, mw)
    rows, fmap, prev = [], {}, -1

    def flush(node):
        found = _sparse_node(node, fmap, nb, l1, l2, mw) if fmap else None
        if found is not None:
            rows.append(_row(node, found[0], found[1], tc))

    for k in range(indices.shape[0]):
        node, f_dim, bucket, stat = (int(v) for v in indices[k])
        if node != prev:
            flush(prev)
            fmap = {}
        prev = node
        if stat >= stats_dims:
            raise _invalid(
                f"Stat dim, the sum of logits dim and hessian dim in stats_summary_indices, "
                f"cannot be greater than stats dims, the last value in stats_summary_shape, "
                f"which was {stats_dims}. At index ({k}, 4), stats_summary_indices contains "
                f"value {stat}"
            )
        if stat < 0:
            raise _invalid(
                f"Stat dim, the sum of logits dim and hessian dim in "
                f"stats_summary_indices, should be >= 0, which was {stat} at "
                f"index {k}"
            )
        fmap.setdefault(f_dim, {}).setdefault(bucket, [_F(0)] * stats_dims)[stat] = values[k]
    flush(prev)
    return _split_outputs(rows, 1, with_feature_ids=False)


def _gains_per_feature_shape(op):
    n, ms = op.get_attr("num_features"), op.get_attr("max_splits")
    min_list(op, "stats_summary_list", n)
    _rank(op.inputs[0], 1)
    merge_shape(op.inputs[0], [2])
    _rank(op.inputs[1], 3)
    merge_shape(op.inputs[1], [ms, None, 2])
    base = tensor_shape.as_shape(op.inputs[1].shape)
    for t in op.inputs[2 : 1 + n]:
        _rank(t, 3)
        if base.ndims is not None:
            merge_shape(t, base.as_list())
    for t in op.inputs[1 + n : 4 + n]:
        _rank(t, 0)
    return [[None]] * (3 * n) + [[None, 1]] * (2 * n)


BoostedTreesCalculateBestGainsPerFeature = register_op(
    "BoostedTreesCalculateBestGainsPerFeature",
    inputs=["node_id_range: int32", "stats_summary_list: num_features * float32", *_REG_INPUTS],
    outputs=[
        "node_ids_list: num_features * int32",
        "gains_list: num_features * float32",
        "thresholds_list: num_features * int32",
        "left_node_contribs_list: num_features * float32",
        "right_node_contribs_list: num_features * float32",
    ],
    attrs={"max_splits": REQUIRED, "num_features": REQUIRED},
    shape_fn=_gains_per_feature_shape,
)


@BoostedTreesCalculateBestGainsPerFeature.kernel("CPU")
async def _calculate_best_gains_per_feature(ctx, *args):
    # Python loops over examples, nodes and buckets: the device decides inline or a worker
    return await ctx.device.compute(_calculate_best_gains_per_feature_value, ctx, *args)


def _calculate_best_gains_per_feature_value(ctx, node_range, *args):
    n = ctx.attrs["num_features"]
    first, last = _node_range(node_range)
    summaries = [np.asarray(s, np.float32) for s in args[:n]]
    if summaries[0].ndim != 3 or summaries[0].shape[2] != 2:
        got = summaries[0].shape[2] if summaries[0].ndim == 3 else summaries[0].ndim
        raise _invalid(f"stats_summary_list[0] must have exactly 2 dimensions, obtained: {got}")
    l1, l2, tc, mw = _regularizers(*args[n : n + 4])
    outs: list[list] = [[] for _ in range(5)]
    for s in summaries:
        rows = []
        for node in range(first, last):
            cum = _cumulative(s[node])
            tg, th = cum[-1, 0], cum[-1, 1]
            if th < mw:
                continue
            _, parent_gain = weight_and_gain([tg], [th], l1, l2)
            best = _Best()
            n = cum.shape[0]
            _consider_many(
                best,
                cum[:, 0],
                cum[:, 1],
                tg - cum[:, 0],
                th - cum[:, 1],
                l1,
                l2,
                np.arange(n),
                np.zeros(n, np.int64),
                [b""] * n,
            )
            rows.append(_row(node, best, parent_gain, tc))
        m = len(rows)
        outs[0].append(np.array([r["node"] for r in rows], np.int32))
        outs[1].append(np.array([r["gain"] for r in rows], np.float32).reshape(m))
        outs[2].append(np.array([r["bucket"] for r in rows], np.int32).reshape(m))
        outs[3].append(np.array([r["left"] for r in rows], np.float32).reshape(m, 1))
        outs[4].append(np.array([r["right"] for r in rows], np.float32).reshape(m, 1))
    return tuple(x for group in outs for x in group)
