"""TF 2.21's CPU Sum, Mean and BiasAddGrad to the bit: the order in which its kernels add.

A float sum's bits depend on the order of its additions.  TF's reduction kernel
(reduction_ops_common.h) first merges adjacent axes that are reduced alike, dropping
size-1 axes (ReductionHelper, here `simplify`), then has Eigen reduce one of a few
shapes, each in its own order (Eigen's TensorReduction.h; AVX packets of `lanes`
values: 8 float32, 4 float64, 8 half or bfloat16):

- all of a 1-D run (a full reduction; also each row of an inner reduction), `_tree`:
  runs longer than lanes * leaf (1024; half 200, bfloat16 128) are split in two at a
  packet boundary (counted from the tensor's start) and reduced apart, then added; a
  leaf is summed in four packet accumulators (lane-wise, over strides of four packets),
  added 0+1, +2, +3, then the whole packets left, then the last `n % lanes` values one by
  one from 0, plus the accumulator's lanes added pairwise by halves.  A full reduction
  is also split into one block per thread where Eigen's cost model asks for threads
  (`full_blocks`): its bits depend on TF's intra-op thread count.
- [A, B, C] over B (B over [B, C] for A = 1), `_middle`: each output value at a packet
  of the output that stays within its row (of C) sums B in four accumulators (rows j
  mod 4) when B >= 16, added 0+1, +2, +3, then the last B % 4 rows; every other value
  sums its rows one by one from 0.
- [A, B, C] over A and C: one by one, C outer, A inner.
- anything else: transposed to [kept, reduced] and reduced as rows.

Mean is that sum divided by the count, in the input's type.  bfloat16 sums and means in
float32 (TF's casting specializations).  BiasAddGrad runs TF's redux_functor.h: over
rows (NHWC) a column sum one row at a time, split into blocks of rows by the thread
count when the channels are few; over [N, C, HW] (NCHW) each HW run reduced as above,
added per channel in blocks of the flat input (half adds in float32, bfloat16 in itself).

The NumPy forms here give the same bits as the compiled loops of ops/eigen_reduce_jit.py
(float32 and float64; tests/ops/test_reduce_tf_bits.py checks both against TF's
recorded outputs); NumPy's own sums (pairwise over a contiguous axis, row by row over
others) differ.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dtypes
from asyncflow.ops import eigen_reduce_jit

__all__ = ["SUPPORTED", "bias_add_grad", "lanes", "reduce_mean", "reduce_sum", "simplify"]

# AVX packets: the x86-64 wheel of TF 2.21 compiles Eigen for 256-bit packets (8 float32,
# 4 float64), and 128-bit ones of 8 halves or bfloat16s (the recorded cases tell these
# apart from 512-bit ones: a [32, 10] Sum over axis 0 differs).
_PACKET_BYTES = 32
_BF16 = dtypes._ml_type("bfloat16")
_BF16 = np.dtype(_BF16) if _BF16 is not None else None
# Eigen's LeafSize (1024 for other types)
_LEAF = {np.dtype(np.float16): 200, **({_BF16: 128} if _BF16 is not None else {})}
SUPPORTED = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)) + (
    (_BF16,) if _BF16 is not None else ()
)
_F32 = np.dtype(np.float32)
# A bfloat16 full reduction reads 2 bytes a value, converted to float32 (this cost splits
# the recorded bfloat16 sums of 300,001 and 1M values as TF's 1, 2 and 4 threads did).
_BF16_VALUE_COST = 2 * 11 / 64 + 10 / 8


def lanes(dtype: np.dtype) -> int:
    if dtype.itemsize == 2:  # (half and bfloat16: 128-bit packets)
        return 8
    return _PACKET_BYTES // dtype.itemsize


def _value_cost(dtype: np.dtype) -> float:
    """Eigen's cost of one value of a full reduction (a load, 1/lanes of an add of
    cost 10: the reducer is a functor Eigen's cost table does not know)."""
    return dtype.itemsize * 11 / 64 + 10 / lanes(dtype)


def simplify(shape: tuple[int, ...], axes) -> tuple[list[int], bool]:
    """TF's ReductionHelper: `shape` with size-1 axes dropped and neighbours reduced alike
    merged, and whether its first axis is reduced."""
    dims: list[int] = []
    first = False
    prev = None
    for i, d in enumerate(shape):
        if d == 1 and dims:
            dims[-1] *= 1
            continue
        if d == 1:
            continue
        r = i in axes
        if prev is None:
            first = r
            dims.append(d)
        elif r == prev:
            dims[-1] *= d
        else:
            dims.append(d)
        prev = r
    return dims, first if dims else True


# -- the compiled loops, where ready -----------------------------------------------------------

_JIT_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


_LOOPS: dict | None = None  # eigen_reduce_jit's loops once they are ready


def _loops() -> dict | None:
    global _LOOPS
    _LOOPS = eigen_reduce_jit.loops()
    return _LOOPS


def _jit(dtype):
    """eigen_reduce_jit's loops for arrays of `dtype`, or None (NumPy's forms run)."""
    return _LOOPS or _loops() if dtype in _JIT_TYPES else None


# -- NumPy forms -----------------------------------------------------------------------------


def _seq(x: np.ndarray, axis: int) -> np.ndarray:
    """x summed one value at a time from 0 along `axis`."""
    if x.shape[axis] == 0:
        return np.zeros(x.shape[:axis] + x.shape[axis + 1 :], x.dtype)
    return np.add.accumulate(x, axis=axis, dtype=x.dtype).take(-1, axis=axis) + x.dtype.type(0)


def _predux(acc: np.ndarray) -> np.ndarray:
    """[R, lanes] -> [R]: the lanes added pairwise by halves (Eigen's predux; halves'
    lanes in float32, rounded once)."""
    half = acc.dtype.itemsize == 2  # (half and bfloat16)
    if half:
        dtype, acc = acc.dtype, acc.astype(np.float32)
    while acc.shape[1] > 1:
        h = acc.shape[1] // 2
        acc = acc[:, :h] + acc[:, h:]
    out = acc[:, 0]
    return out.astype(dtype) if half else out


def _leaf(x: np.ndarray) -> np.ndarray:
    """Eigen's vectorized InnerMostDimReducer of each row of x [R, n], no tree."""
    rows, n = x.shape
    p = lanes(x.dtype)
    acc = np.zeros((rows, p), x.dtype)
    start = 0
    if n >= 4 * p:
        v4 = n // (4 * p) * (4 * p)
        four = _seq(x[:, :v4].reshape(rows, v4 // (4 * p), 4, p), 1)
        acc = ((four[:, 0] + four[:, 1]) + four[:, 2]) + four[:, 3]
        start = v4
    for j in range(start, n - p + 1, p):
        acc = acc + x[:, j : j + p]
        start = j + p
    return _seq(x[:, start:], 1) + _predux(acc)


def _tree(x: np.ndarray, first: int, n: int, origin: int = 0) -> np.ndarray:
    """Eigen's tree InnerMostDimReducer of each row's x[:, first - origin:][:n]: `first`
    counts from the tensor's start (it places the split points), `origin` is where x's
    columns start in that count."""
    p = lanes(x.dtype)
    if n <= p * _LEAF.get(x.dtype, 1024):
        return _leaf(x[:, first - origin : first - origin + n]) + x.dtype.type(0)
    split = p * -(-(first + -(-n // 2)) // p)
    left = min(split - first, n)
    out = _tree(x, first, left, origin) + x.dtype.type(0)
    if left < n:
        out = out + _tree(x, split, n - left, origin)
    return out


def _rows(x: np.ndarray, own_tensor: bool = True) -> np.ndarray:
    """Each row of x [R, n] reduced by Eigen's inner reducer: rows of one tensor
    (`own_tensor`: row r starts at r * n, which places a long row's split points), or
    each a tensor of its own."""
    rows, n = x.shape
    jit = _jit(x.dtype)
    p = lanes(x.dtype)
    if jit is not None and x.flags.c_contiguous:
        out = np.empty(rows, x.dtype)
        jit["_rows"](x.reshape(-1), rows, n, own_tensor, out)
        return out
    if n <= p * _LEAF.get(x.dtype, 1024) or n % p == 0 or not own_tensor or rows == 1:
        return _tree(x, 0, n)
    return np.concatenate([_tree(x[r : r + 1], r * n, n, r * n) for r in range(rows)])


def full_blocks(n: int, value_cost: float, threads: int) -> tuple[int, int]:
    """(block size, blocks) of Eigen's threaded full reduction of n values (blocks 1:
    not split): its cost model's thread count for n values of `value_cost` each."""
    cost = n * value_cost
    want = int((cost - 100000) / 100000 + 0.9)
    t = min(threads, max(1, want))
    if t == 1 or n == 0:
        return n, 1
    size = n // t
    return size, n // size


def _full(flat: np.ndarray, threads: int, value_cost: float) -> np.ndarray:
    n = flat.size
    x = flat.reshape(1, n)
    size, blocks = full_blocks(n, value_cost, threads)
    jit = _jit(flat.dtype)
    if jit is not None:
        return jit["_full"](flat, size, blocks)
    if blocks == 1:
        return _tree(x, 0, n)[0]
    rest = n - blocks * size
    total = _tree(x, blocks * size, rest) if rest else np.zeros(1, flat.dtype)
    for b in range(blocks):
        total = total + _tree(x, b * size, size)
    return total[0]


def _middle(x: np.ndarray) -> np.ndarray:
    """x [A, B, C] reduced over B, as Eigen's reducer that keeps the inner axis."""
    a, b, c = x.shape
    jit = _jit(x.dtype)
    if jit is not None and x.flags.c_contiguous:
        out = np.empty((a, c), x.dtype)
        jit["_middle"](x, out)
        return out
    seq = _seq(x, 1)
    if b < 16:
        return seq
    p = lanes(x.dtype)
    u = b // 4 * 4
    four = _seq(x[:, :u].reshape(a, u // 4, 4, c), 1)
    acc = ((four[:, 0] + four[:, 1]) + four[:, 2]) + four[:, 3]
    for j in range(u, b):
        acc = acc + x[:, j]
    o = np.arange(a * c)
    po = o - o % p
    packet = ((po + p <= a * c) & (po % c + p <= c)).reshape(a, c)
    return np.where(packet, acc, seq)


_PLANS: dict = {}  # (shape, axes, threads, dtype) -> _plan's answer


def _plan(shape, axes, threads: int, dtype, value_cost: float) -> tuple:
    """(kind, the shape the kind reduces, the output's shape, the kind's extra): TF's
    case for reducing `shape` over `axes`, taken once per shape."""
    key = (shape, axes, threads, dtype, value_cost)
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    out_shape = tuple(d for i, d in enumerate(shape) if i not in axes)
    dims, first = simplify(shape, axes)
    nd = len(dims)
    extra = None
    if math.prod(shape) == 0 or math.prod(out_shape) == 0:
        kind = "empty"
    elif nd == 0 or (nd == 1 and not first):
        kind = "copy"
    elif nd == 1:
        kind, extra = "full", full_blocks(dims[0], value_cost, threads)
    elif nd == 2 and first:
        kind, dims = "middle", [1, *dims]
    elif nd == 2:
        kind = "rows"
    elif nd == 3 and first:
        kind = "outer_inner"
    elif nd == 3:
        kind = "middle"
    else:
        kept = list(range(1 if first else 0, nd, 2))
        extra = kept + list(range(0 if first else 1, nd, 2))
        kind = "shuffled"
    plan = (kind, tuple(dims), out_shape, extra)
    if len(_PLANS) >= 4096:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _sum(x: np.ndarray, axes, threads: int, out=None, value_cost: float = 0.0) -> np.ndarray:
    """x summed over `axes` (sorted, non-negative), shaped as TF's reduced shape
    without kept dims (written into `out`, a C-contiguous array of that shape, if given;
    `value_cost`: Eigen's cost of a value, when not x's own)."""
    plan = _PLANS.get((x.shape, axes, threads, x.dtype, value_cost))
    if plan is None:
        plan = _plan(x.shape, axes, threads, x.dtype, value_cost or _value_cost(x.dtype))
    kind, dims, out_shape, extra = plan
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    jit = _LOOPS or _loops() if x.dtype in _JIT_TYPES else None
    if jit is not None:  # (the common cases first, with the fewest Python steps)
        if kind == "middle":
            if out is None:
                out = np.empty(out_shape, x.dtype)
            jit["_middle"](x.reshape(dims), out.reshape(dims[0], dims[2]))
            return out
        if kind == "rows":
            if out is None:
                out = np.empty(out_shape, x.dtype)
            jit["_rows"](x.reshape(-1), dims[0], dims[1], True, out.reshape(-1))
            return out
    if out is not None:
        np.copyto(out, _sum(x, axes, threads, None, value_cost).reshape(out.shape))
        return out
    if jit is not None and kind == "full":
        total = x.dtype.type(jit["_full"](x.reshape(-1), extra[0], extra[1]))
        return total if not out_shape else total.reshape(out_shape)
    if kind == "middle":
        return _middle(x.reshape(dims)).reshape(out_shape)
    if kind == "full":
        cost = value_cost or _value_cost(x.dtype)
        return np.asarray(_full(x.reshape(-1), threads, cost), x.dtype).reshape(out_shape)
    if kind == "rows":
        return _rows(x.reshape(dims)).reshape(out_shape)
    if kind == "empty":
        return np.zeros(out_shape, x.dtype)
    if kind == "copy":
        return x.reshape(out_shape).copy()
    if kind == "outer_inner":
        return _seq(x.reshape(dims).transpose(1, 2, 0).reshape(dims[1], -1), 1).reshape(out_shape)
    t = np.ascontiguousarray(x.reshape(dims).transpose(extra))
    return _rows(t.reshape(math.prod(out_shape), -1)).reshape(out_shape)


def reduce_sum(x: np.ndarray, axes, threads: int, out: np.ndarray | None = None) -> np.ndarray:
    """TF's Sum of a float16/32/64 array over `axes` (sorted, non-negative), without
    kept dims, with TF's bits for `threads` intra-op threads; into `out` (C-contiguous,
    of the result's shape) if given."""
    if x.itemsize == 2 and x.dtype == _BF16:  # TF sums bfloat16 in float32, then rounds
        total = _sum(x.astype(_F32), axes, threads, None, _BF16_VALUE_COST).astype(_BF16)
        if out is None:
            return total
        np.copyto(out, total.reshape(out.shape))
        return out
    return _sum(x, axes, threads, out)


def reduce_mean(x: np.ndarray, axes, threads: int) -> np.ndarray:
    """TF's Mean: the sum divided by the count (both in x's type)."""
    if x.itemsize == 2 and x.dtype == _BF16:  # (in float32, as TF's Mean of bfloat16)
        total = _sum(x.astype(_F32), axes, threads, None, _BF16_VALUE_COST)
        count = _F32.type(x.size // max(total.size, 1))
        return np.true_divide(total, count, dtype=_F32).astype(_BF16)
    total = _sum(x, axes, threads)
    n = x.size // max(total.size, 1)
    if x.itemsize == 2 and n >= 65520:  # (rounds past half's range: inf, as TF's cast)
        return np.true_divide(total, x.dtype.type(np.inf), dtype=x.dtype)
    return np.true_divide(total, x.dtype.type(n), dtype=x.dtype)


# -- BiasAddGrad (TF's redux_functor.h) -------------------------------------------------------


def _parallel_chunks(n: int, per_item: float, threads: int) -> int:
    """How many of n equal work items Eigen's parallelFor hands each call (n: one call)."""
    if n == 1 or threads == 1:
        return n
    if int((n * per_item - 100000) / 100000 + 0.9) <= 1:
        return n
    size_f = 1.0 / (per_item / 40000)
    return min(n, max(-(-n // (4 * threads)), int(size_f)))


def _outer(x: np.ndarray, threads: int, itemsize: int) -> np.ndarray:
    """x [outer, inner] summed over outer (ReduceOuterDimensions; `itemsize`: the
    input's, which its cost model counts)."""
    outer, inner = x.shape
    if outer == 1:
        return x[0].copy()
    if inner > threads * 32:
        return _colsum(x)
    per_cell = itemsize * 11 / 64 + 1
    max_blocks = min(outer, -(-(outer * inner) // -(-2000 // inner)))
    blocks = min(max_blocks, threads)
    rows = -(-outer // blocks)
    chunk = _parallel_chunks(blocks, rows * inner * per_cell, threads)
    total = None
    for b in range(0, blocks, chunk):
        part = _colsum(x[b * rows : min(outer, (b + chunk) * rows)])
        total = part if total is None else total + part
    return total


def _colsum(x: np.ndarray) -> np.ndarray:
    jit = _jit(x.dtype)
    if jit is not None and x.flags.c_contiguous:
        out = np.empty(x.shape[1], x.dtype)
        jit["_colsum"](x, out)
        return out
    if x.shape[0] == 0:
        return np.zeros(x.shape[1], x.dtype)
    if x.shape[1] >= 2:
        return np.add.reduce(x, axis=0, dtype=x.dtype) + x.dtype.type(0)
    return _seq(x, 0)


def _nchw(x: np.ndarray, threads: int) -> np.ndarray:
    """x [N, C, HW] summed over N and HW (ReduceMiddleDimensions)."""
    n, c, hw = x.shape
    if n * hw == 1:
        return x.reshape(c).copy()
    total = n * c * hw
    max_blocks = min(n * c, -(-total // -(-2000 // hw)))
    blocks = min(max_blocks, threads)
    size = -(-total // blocks)
    per_item = size * hw * (x.itemsize * 11 / 64 + 1)
    chunk = _parallel_chunks(blocks, per_item, threads)
    flat = x.reshape(-1)
    out = None
    accum = _F32 if x.dtype == np.float16 else x.dtype  # (TF's AccumulatorType<half>)
    for b in range(0, blocks, chunk):
        start, limit = b * size, min(total, (b + chunk) * size)
        buf = np.zeros(c, accum)
        lo, hi = -(-start // hw) * hw, limit // hw * hw
        k = start // hw % c
        buf[k] += _piece(flat[start:lo])
        runs = (hi - lo) // hw
        if runs:
            sums = _rows(flat[lo:hi].reshape(runs, hw), own_tensor=False)
            k0 = lo // hw % c
            for i in range(runs):
                buf[(k0 + i) % c] += sums[i]
        buf[(lo // hw + runs) % c] += _piece(flat[hi:limit])
        out = buf if out is None else out + buf
    return out.astype(x.dtype, copy=False)


def _piece(v: np.ndarray):
    jit = _jit(v.dtype)
    if jit is not None:
        return jit["_full"](v, v.size, 1)
    return _tree(v.reshape(1, -1), 0, v.size)[0] if v.size else v.dtype.type(0)


def bias_add_grad(x: np.ndarray, channel_first: bool, threads: int) -> np.ndarray:
    """TF's BiasAddGrad of a float32/float64 array: the channel axis last (NHWC) or at
    axis 1 (NCHW), for `threads` intra-op threads."""
    x = np.ascontiguousarray(x)
    if channel_first and x.ndim > 2:
        n, c = x.shape[0], x.shape[1]
        return _nchw(x.reshape(n, c, -1), threads)
    c = x.shape[-1] if not channel_first else x.shape[1]
    x2 = x.reshape(-1, c)
    if x.dtype == np.float16:  # (summed in float32, TF's AccumulatorType; bfloat16's is its own)
        return _outer(x2.astype(_F32), threads, 2).astype(x.dtype)
    return _outer(x2, threads, x.itemsize)
