"""Random op types TF 1.x and early TF 2 graphs hold: RngSkip (tf.random.Generator's skip
before RngReadAndSkip), NonDeterministicInts, StatelessShuffle and
StatelessSampleDistortedBoundingBox.

The stateless ones draw from the (key, counter) of their inputs with the samplers of
the stateful ops they mirror (RandomShuffle's swaps, SampleDistortedBoundingBox's
attempts), so a seed gives TF 2.21's numbers.  NonDeterministicInts takes the operating
system's entropy, as TF's kernel does (no seed reproduces it).  None has a gradient in
TF 2.21, nor here.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.ops import image_sample_box_ops, random_ops, stateless_random_ops
from asyncflow.registry import ANY, INDEX, TypeConstraint, register_op

__all__: list[str] = []


# -- RngSkip -----------------------------------------------------------------------------------

RngSkip = register_op(
    "RngSkip",
    inputs=["resource: resource", "algorithm: int64", "delta: int64"],
    outputs=[],
    shape_fn=lambda op: [],
    stateful=True,
)


@RngSkip.kernel("CPU")
async def _rng_skip(ctx, handle, algorithm, delta):
    # (delta counts 256-block reservations, as RngReadAndSkip's; a negative one wraps)
    delta = int(np.asarray(delta)) & ((1 << 64) - 1)
    stateless_random_ops._read_and_skip(handle, int(np.asarray(algorithm)), delta)


# -- NonDeterministicInts ----------------------------------------------------------------------

NonDeterministicInts = register_op(
    "NonDeterministicInts",
    inputs=["shape: shape_dtype"],
    outputs=["output: dtype"],
    attrs={
        "dtype": TypeConstraint(None, default="int64"),
        "shape_dtype": TypeConstraint(None, default="int64"),
    },
    shape_fn=lambda op: [ops.constant_shape(op.inputs[0])],
    stateful=True,
)


def _dt(dtype) -> str:
    """TF's DataType enum name (DT_FLOAT for float32)."""
    names = {"float32": "FLOAT", "float64": "DOUBLE", "float16": "HALF"}
    return "DT_" + names.get(dtype.name, dtype.name.upper())


@NonDeterministicInts.kernel("CPU", host_memory=("shape",))
async def _non_deterministic_ints(ctx, shape):
    shape = stateless_random_ops.make_shape(shape)
    dtype = ctx.attrs["dtype"]
    if dtype.name not in ("int32", "uint32", "int64", "uint64"):  # (TF's kernels)
        attrs = f"shape_dtype={_dt(ctx.attrs['shape_dtype'])}, dtype={_dt(dtype)}"
        kernels = "".join(
            f"  device='CPU'; dtype in [DT_{t}]\n" for t in ("UINT64", "INT64", "UINT32", "INT32")
        )
        raise errors.InvalidArgumentError(
            None,
            None,
            "No OpKernel was registered to support Op 'NonDeterministicInts' used by {{node "
            f"{ctx.op.name}}}}} with these attrs: [{attrs}]\nRegistered devices: [CPU]\n"
            f"Registered kernels:\n{kernels}",
        )
    words = np.random.default_rng().integers(0, 1 << 64, size=shape, dtype=np.uint64)
    return words.astype(dtype.as_numpy_dtype)  # (wraps: the low bits of each word)


# -- StatelessShuffle --------------------------------------------------------------------------

StatelessShuffle = register_op(
    "StatelessShuffle",
    inputs=["value: T", "key: uint64", "counter: uint64", "alg: int32"],
    outputs=["output: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape],
)


@StatelessShuffle.kernel("CPU", host_memory=("key", "counter", "alg"))
async def _stateless_shuffle(ctx, value, key, counter, alg):
    if np.ndim(counter) != 1 or np.shape(counter)[0] < 2:  # TF checks this before alg
        raise errors.InvalidArgumentError(
            None, None, "counter must be a vector with length at least 2; got shape: "
            f"{list(np.shape(counter))}. (Note that batched counters are not supported yet.)"
        )  # fmt: skip
    key, counter = stateless_random_ops._key_counter_of_tensors(key, counter, alg)
    value = np.asarray(value)
    if value.ndim == 0 or value.shape[0] <= 1:
        return value.copy()
    perm = random_ops._shuffle_permutation(key, counter, value.shape[0])
    return value[perm]


# -- StatelessSampleDistortedBoundingBox -------------------------------------------------------

_BOX_ATTRS = {k: v for k, v in image_sample_box_ops._ATTRS.items() if k not in ("seed", "seed2")}
StatelessSampleDistortedBoundingBox = register_op(
    "StatelessSampleDistortedBoundingBox",
    inputs=[
        "image_size: T",
        "bounding_boxes: float32",
        "min_object_covered: float32",
        "seed: Tseed",
    ],
    outputs=image_sample_box_ops._OUTPUTS,
    attrs={**_BOX_ATTRS, "Tseed": INDEX},
    shape_fn=image_sample_box_ops._shape,
)


@StatelessSampleDistortedBoundingBox.kernel("CPU")
async def _stateless_sample_box(ctx, image_size, bounding_boxes, min_object_covered, seed):
    key_counter = stateless_random_ops.key_counter_of_seed(seed)
    return await image_sample_box_ops._kernel(
        ctx, image_size, bounding_boxes, min_object_covered, key_counter
    )
