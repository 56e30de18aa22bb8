"""IsotonicRegression (tf.raw_ops; TF2's tf.nn.isotonic_regression writes it): along the
last axis, the non-increasing sequence nearest the input in squared error, by pooling
adjacent violators, and each element's segment (the pooled run it falls in, numbered
from 0 per row).  A run is pooled into the one before it only when its mean is strictly
greater (equal neighbours stay separate segments, as TF's).  Means are taken in double
and written in the output type.

TF registers kernels for these (input, output) types only: int32 and int64 to double,
int8 and int16 to float, and each float type to itself; others raise its "No OpKernel"
error.  The gradient is TF's: each element gets the mean of the incoming gradient over
its segment.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors
from asyncflow.ops import gradient_ops as _g
from asyncflow.registry import TypeConstraint, register_op

__all__: list[str] = []

_KERNELS = {
    "int32": "float64",
    "int64": "float64",
    "int8": "float32",
    "int16": "float32",
    "float64": "float64",
    "float32": "float32",
    "bfloat16": "bfloat16",
    "float16": "float16",
}

IsotonicRegression = register_op(
    "IsotonicRegression",
    inputs=["input: T"],
    outputs=["output: output_dtype", "segments: int32"],
    attrs={
        "T": TypeConstraint(
            [
                "float32",
                "float64",
                "int32",
                "uint8",
                "int16",
                "int8",
                "int64",
                "bfloat16",
                "uint16",
                "float16",
                "uint32",
                "uint64",
            ]
        ),
        "output_dtype": TypeConstraint(
            ["float16", "bfloat16", "float32", "float64"], default="float32"
        ),
    },  # fmt: skip
    shape_fn=lambda op: [op.inputs[0].shape, op.inputs[0].shape],
)


def _pava(row):
    """(means, segment of each element) of one row: non-increasing, strict pooling."""
    sums, counts = [], []
    for v in row:
        sums.append(float(v))
        counts.append(1)
        while len(sums) > 1 and sums[-2] / counts[-2] < sums[-1] / counts[-1]:
            last_sum, last_count = sums.pop(), counts.pop()
            sums[-1] += last_sum
            counts[-1] += last_count
    means = np.repeat(np.array(sums) / np.array(counts), counts)
    return means, np.repeat(np.arange(len(counts), dtype=np.int32), counts)


def _isotonic(x, out_dtype):
    rows = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    out = np.empty(rows.shape, np.float64)
    seg = np.empty(rows.shape, np.int32)
    for i, row in enumerate(rows):
        out[i], seg[i] = _pava(row) if row.size else (row, row.astype(np.int32))
    return out.astype(out_dtype).reshape(x.shape), seg.reshape(x.shape)


@IsotonicRegression.kernel("CPU")
async def _isotonic_regression(ctx, x):
    tin, tout = ctx.attrs["T"], ctx.attrs["output_dtype"]
    if _KERNELS.get(tin.name) != tout.name:
        kernels = "".join(
            f"\n  device='CPU'; T in [{_dt(t)}]; output_dtype in [{_dt(o)}]"
            for t, o in _KERNELS.items()
        )
        raise errors.InvalidArgumentError(
            None,
            None,
            "No OpKernel was registered to support Op 'IsotonicRegression' used by {{node "
            f"{ctx.op.name}}}}} with these attrs: [T={_dt(tin.name)}, output_dtype="
            f"{_dt(tout.name)}]\nRegistered devices: [CPU]\nRegistered kernels:{kernels}\n",
        )
    x = np.asarray(x)
    return await ctx.device.compute(_isotonic, x, tout.as_numpy_dtype)


def _dt(name: str) -> str:
    names = {"float32": "FLOAT", "float64": "DOUBLE", "float16": "HALF"}
    return "DT_" + names.get(name, name.upper())


@IsotonicRegression.gradient
def _isotonic_regression_grad(op, grad, _grad_segments):
    # The mean of `grad` over each segment, per row: segment ids made distinct across
    # rows (row * n + segment), then summed, counted and gathered back.
    segments = op.outputs[1]
    shape = _g.apply("Shape", grad)
    n = _g.apply("Shape", segments)[-1]
    flat_seg = _g.reshape(segments, [-1])
    size = _g.apply("Size", segments)
    rows = _g.apply("FloorDiv", _g.apply("Range", 0, size, 1), n)
    ids = _g.apply("AddV2", flat_seg, _g.apply("Mul", rows, n))
    flat = _g.reshape(grad, [-1])
    sums = _g.apply("UnsortedSegmentSum", flat, ids, size)
    ones = _g.cast(_g.ones_like(flat_seg), grad.dtype.base_dtype)
    counts = _g.apply("UnsortedSegmentSum", ones, ids, size)
    counts = _g.apply("Maximum", counts, _g.constant(1, grad.dtype.base_dtype))
    means = _g.apply("RealDiv", sums, counts)
    return [_g.reshape(_g.apply("GatherV2", means, ids, 0), shape)]
