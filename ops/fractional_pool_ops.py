"""TF's fractional pooling (Graham, "Fractional Max-Pooling", 2014):
FractionalMaxPool / FractionalAvgPool (`tf.nn.fractional_max_pool`,
`fractional_avg_pool`) and their Grad ops.

Rows and columns are cut into windows whose sizes are k or k + 1 (k = in / out), in an
order drawn at random: a random permutation of the sizes ("random"), or the rounded
points alpha * (i + u) for one draw u ("pseudo_random").  The draws are TF's: its
Philox stream for (seed, seed2), words taken as TF's GuardedPhiloxRandom hands them out
(ReserveSamples32) and turned into the sequence as TF's fractional_pool_common does,
so a seeded op gives TF's windows; the op also outputs them (row / col pooling
sequences, which the gradients take).  seed = seed2 = 0 draws fresh seeds each run.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.philox_random import _blocks
from asyncflow.registry import REQUIRED, TypeConstraint, register_op

__all__ = ["fractional_max_pool", "fractional_avg_pool"]

_M32 = 0xFFFFFFFF
_U64 = (1 << 64) - 1
_TYPES = TypeConstraint(["float32", "float64", "int32", "int64"])


class _Generator:
    """TF's GuardedPhiloxRandom initialised with (seed, seed2) for one run."""

    def __init__(self, seed: int, seed2: int):
        seed, seed2 = int(seed) & _U64, int(seed2) & _U64
        if seed == 0 and seed2 == 0:
            seed, seed2 = (int(w) for w in np.random.SeedSequence().generate_state(2, np.uint64))
        self.key = (seed & _M32, seed >> 32)
        self.counter = seed2 << 64

    def samples32(self, n: int) -> list[int]:
        """ReserveSamples32(n) read through a SingleSampleAdapter: n words."""
        blocks = (n + 3) // 4
        words = _blocks(self.counter, self.key, max(blocks, 1))[:n]
        self.counter = (self.counter + blocks) & ((1 << 128) - 1)
        return words


def _uint64_to_double(x0: int, x1: int) -> float:
    bits = ((x0 & 0xFFFFF) << 32) | x1 | (1023 << 52)
    return float(np.array(bits, np.uint64).view(np.float64)) - 1.0


def _pseudo_random(n_in: int, n_out: int, gen: _Generator) -> list[int]:
    alpha = n_in / n_out
    k = n_in // n_out
    max_u = min((k + 2) / alpha - 1, (n_in + 1 - k) / alpha - (n_out - 1))
    x0, x1 = gen.samples32(2)
    u = _uint64_to_double(x0, x1) * max_u
    cum = [1] + [int(math.ceil(alpha * (i + u))) for i in range(1, n_out)] + [n_in + 1]
    return [cum[i + 1] - cum[i] for i in range(n_out)]


def _random(n_in: int, n_out: int, gen: _Generator) -> list[int]:
    k = n_in // n_out
    diff = [k + 1 if i < n_in % n_out else k for i in range(n_out)]
    words = iter(gen.samples32(len(diff)))
    for i in range(len(diff) - 1):  # TF's RandomShuffle: i swaps with i + uniform(rest)
        j = i + next(words) % (len(diff) - i)
        diff[i], diff[j] = diff[j], diff[i]
    return diff


def _sequence(n_in: int, n_out: int, gen: _Generator, pseudo_random: bool) -> np.ndarray:
    if n_in % n_out == 0:
        diff = [n_in // n_out] * n_out
        gen.samples32(2 if pseudo_random else n_out)  # (TF draws all the same)
    else:
        diff = (_pseudo_random if pseudo_random else _random)(n_in, n_out, gen)
    return np.concatenate([[0], np.cumsum(diff)]).astype(np.int64)


def _out_size(size: int, ratio: float) -> int:
    """floor(size / ratio) in float32, as TF (its ratios are floats): 11 / 2.2 is 5."""
    return int(math.floor(np.float32(size) / np.float32(ratio)))


def _ratio(op_type: str, ratio) -> list[float]:
    ratio = [float(r) for r in ratio]
    if len(ratio) != 4:
        raise ValueError("pooling_ratio field must specify 4 dimensions")
    if ratio[0] != 1 or ratio[3] != 1:
        raise ValueError(
            f"{op_type} is not yet supported on the batch nor channel dimension. The first "
            "and last elements of pooling ratio must be 1.0."
        )
    return ratio


def _pool_shape(op):
    x = op.inputs[0].shape
    if x.ndims is not None and x.ndims != 4:
        raise ValueError(f"Shape must be rank 4 but is rank {x.ndims}")
    ratio = _ratio(op.type, op._attr("pooling_ratio"))
    dims = [None] * 4 if x.ndims is None else x.as_list()
    out = []
    for d, r in zip(dims, ratio):
        if d is None:
            out.append(None)
            continue
        if np.float32(d) < np.float32(r):
            raise ValueError(f"Pooling ratio {r} is higher than the input dimension size {d}")
        out.append(_out_size(d, r))
    return [
        tensor_shape.TensorShape(out),
        tensor_shape.TensorShape([None if out[1] is None else out[1] + 1]),
        tensor_shape.TensorShape([None if out[2] is None else out[2] + 1]),
    ]


_POOL_ATTRS = {
    "pooling_ratio": REQUIRED,
    "pseudo_random": False,
    "overlapping": False,
    "deterministic": False,
    "seed": 0,
    "seed2": 0,
    "T": _TYPES,
}


def _windows(seq: np.ndarray, size: int, overlapping: bool) -> list[tuple[int, int]]:
    """[start, stop) of each window (the next window's first element too, overlapping)."""
    out = []
    for i in range(len(seq) - 1):
        stop = seq[i + 1] + (1 if overlapping else 0)
        out.append((int(seq[i]), int(min(stop, size))))
    return out


def _sequences(ctx, x):
    a = ctx.attrs
    ratio = [float(r) for r in a["pooling_ratio"]]
    if len(ratio) != 4 or ratio[0] != 1 or ratio[3] != 1:
        raise errors.InvalidArgumentError(
            None, None, "The first and last elements of pooling ratio must be 1.0."
        )
    if x.ndim != 4:
        raise errors.InvalidArgumentError(None, None, "tensor_in must be 4-dimensional")
    seed, seed2 = int(a["seed"]), int(a["seed2"])
    if not a["deterministic"] and (seed or seed2):
        raise errors.InvalidArgumentError(
            None, None, "Both seed and seed2 should be 0 if deterministic is false."
        )
    for i in range(4):
        if np.float32(x.shape[i]) < np.float32(ratio[i]):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Pooling ratio is higher than input dimension size for dimension {i}. Input "
                f"dim size: {x.shape[i]} pooling ratio: {_g(ratio[i])}",
            )
    out = [_out_size(x.shape[i], ratio[i]) for i in range(4)]
    gen = _Generator(seed, seed2)
    pseudo = bool(a["pseudo_random"])
    rows = _sequence(x.shape[1], out[1], gen, pseudo)
    cols = _sequence(x.shape[2], out[2], gen, pseudo)
    return rows, cols


def _g(v: float) -> str:
    s = f"{v:.6g}"
    return s


def _pool(x, rows, cols, overlapping: bool, reduce):
    rw = _windows(rows, x.shape[1], overlapping)
    cw = _windows(cols, x.shape[2], overlapping)
    out = np.empty((x.shape[0], len(rw), len(cw), x.shape[3]), x.dtype)
    for i, (r0, r1) in enumerate(rw):
        for j, (c0, c1) in enumerate(cw):
            out[:, i, j, :] = reduce(x[:, r0:r1, c0:c1, :])
    return out


def _mean(w):
    if w.dtype.kind in "iu":  # (TF's Eigen mean of integers: the sum divided, truncated)
        return (w.sum(axis=(1, 2)) // (w.shape[1] * w.shape[2])).astype(w.dtype)
    return w.mean(axis=(1, 2), dtype=w.dtype)


def _register_pool(op_type: str, reduce):
    op_def = register_op(
        op_type,
        inputs=["value: T"],
        outputs=["output: T", "row_pooling_sequence: int64", "col_pooling_sequence: int64"],
        attrs=dict(_POOL_ATTRS),
        shape_fn=_pool_shape,
        stateful=True,  # (seeds 0: fresh windows each run)
    )

    @op_def.kernel("CPU")
    async def _kernel(ctx, x):
        x = np.asarray(x)
        rows, cols = _sequences(ctx, x)
        overlapping = bool(ctx.attrs["overlapping"])
        out = await ctx.compute(_pool, x, rows, cols, overlapping, reduce)
        return out, rows, cols

    return op_def


FractionalMaxPool = _register_pool("FractionalMaxPool", lambda w: w.max(axis=(1, 2)))
FractionalAvgPool = _register_pool("FractionalAvgPool", _mean)


# -- gradients -------------------------------------------------------------------------


def _max_pool_grad(x, out, grad, rows, cols, overlapping):
    """Each output's gradient to the first element of its window holding the window's
    maximum (rows, then columns), as TF's FractionalMaxPoolGrad."""
    dx = np.zeros(x.shape, grad.dtype)
    rw = _windows(rows, x.shape[1], overlapping)
    cw = _windows(cols, x.shape[2], overlapping)
    b, _, _, depth = x.shape
    for i, (r0, r1) in enumerate(rw):
        for j, (c0, c1) in enumerate(cw):
            w = x[:, r0:r1, c0:c1, :].reshape(b, -1, depth)
            first = np.argmax(w, axis=1)  # (the first maximum, rows then columns)
            width = c1 - c0
            rr, cc = r0 + first // width, c0 + first % width
            bi, di = np.meshgrid(np.arange(b), np.arange(depth), indexing="ij")
            np.add.at(dx, (bi, rr, cc, di), grad[:, i, j, :])
    return dx


def _avg_pool_grad(shape, grad, rows, cols, overlapping):
    dx = np.zeros(shape, grad.dtype)
    rw = _windows(rows, shape[1], overlapping)
    cw = _windows(cols, shape[2], overlapping)
    for i, (r0, r1) in enumerate(rw):
        for j, (c0, c1) in enumerate(cw):
            n = (r1 - r0) * (c1 - c0)
            dx[:, r0:r1, c0:c1, :] += (grad[:, i, j, :] / n).astype(grad.dtype)[:, None, None, :]
    return dx


FractionalMaxPoolGrad = register_op(
    "FractionalMaxPoolGrad",
    inputs=[
        "orig_input: T",
        "orig_output: T",
        "out_backprop: T",
        "row_pooling_sequence: int64",
        "col_pooling_sequence: int64",
    ],
    outputs=["output: T"],
    attrs={"overlapping": False, "T": _TYPES},
    shape_fn=lambda op: [op.inputs[0].shape.with_rank(4)],
)


@FractionalMaxPoolGrad.kernel("CPU")
async def _max_pool_grad_kernel(ctx, x, out, grad, rows, cols):
    x, grad = np.asarray(x), np.asarray(grad)
    rows, cols = np.asarray(rows), np.asarray(cols)
    if grad.shape[1] != len(rows) - 1 or grad.shape[2] != len(cols) - 1:
        raise errors.InvalidArgumentError(
            None, None, "out_backprop does not match the pooling sequences"
        )
    overlapping = bool(ctx.attrs["overlapping"])
    return await ctx.compute(_max_pool_grad, x, out, grad, rows, cols, overlapping)


FractionalAvgPoolGrad = register_op(
    "FractionalAvgPoolGrad",
    inputs=[
        "orig_input_tensor_shape: int64",
        "out_backprop: T",
        "row_pooling_sequence: int64",
        "col_pooling_sequence: int64",
    ],
    outputs=["output: T"],
    attrs={"overlapping": False, "T": _TYPES},
    shape_fn=lambda op: [_shape_from(op.inputs[0])],
)


def _shape_from(t):
    value = ops.constant_value(t)
    if value is None:
        return tensor_shape.unknown_shape(4)
    return tensor_shape.TensorShape([int(v) for v in value])


@FractionalAvgPoolGrad.kernel("CPU", host_memory=("orig_input_tensor_shape",))
async def _avg_pool_grad_kernel(ctx, shape, grad, rows, cols):
    shape = tuple(int(v) for v in np.asarray(shape))
    grad = np.asarray(grad)
    if len(shape) != 4:
        raise errors.InvalidArgumentError(
            None, None, "Original input tensor shape must be 1-dimensional and 4 elements"
        )
    overlapping = bool(ctx.attrs["overlapping"])
    args = (shape, grad, np.asarray(rows), np.asarray(cols), overlapping)
    return await ctx.compute(_avg_pool_grad, *args)


# (TF registers no gradient for the Grad ops: LookupError there, so here too)


@FractionalMaxPool.gradient
def _fractional_max_pool_grad(op, grad, _rows, _cols):
    return [
        ops.apply_op(
            "FractionalMaxPoolGrad",
            [op.inputs[0], op.outputs[0], grad, op.outputs[1], op.outputs[2]],
            {"overlapping": op._attr("overlapping")},
        ).outputs[0]
    ]


@FractionalAvgPool.gradient
def _fractional_avg_pool_grad(op, grad, _rows, _cols):
    shape = ops.apply_op("Shape", [op.inputs[0]], {"out_type": dtypes.int64}).outputs[0]
    return [
        ops.apply_op(
            "FractionalAvgPoolGrad",
            [shape, grad, op.outputs[1], op.outputs[2]],
            {"overlapping": op._attr("overlapping")},
        ).outputs[0]
    ]


def _builder(op_type: str):
    def pool(
        value,
        pooling_ratio,
        pseudo_random=False,
        overlapping=False,
        deterministic=False,
        seed=0,
        seed2=0,
        name=None,
    ):
        attrs = {
            "pooling_ratio": [float(r) for r in pooling_ratio],
            "pseudo_random": bool(pseudo_random),
            "overlapping": bool(overlapping),
            "deterministic": bool(deterministic),
            "seed": int(seed),
            "seed2": int(seed2),
        }
        out = ops.apply_op(op_type, [value], attrs, name=name).outputs
        return out[0], out[1], out[2]

    return pool


fractional_max_pool = _builder("FractionalMaxPool")
fractional_max_pool.__doc__ = """`tf.nn.fractional_max_pool` (TF1's signature): (output,
row_pooling_sequence, col_pooling_sequence), the max of each fractional window.

Raises:
  ValueError: pooling_ratio not of 4 values with 1.0 first and last (build time).
  InvalidArgumentError (run time): a ratio above its dimension's size."""
fractional_avg_pool = _builder("FractionalAvgPool")
fractional_avg_pool.__doc__ = """`tf.nn.fractional_avg_pool` (TF1's signature): as
fractional_max_pool with the mean of each window."""
