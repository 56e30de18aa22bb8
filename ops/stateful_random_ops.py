"""Stateful random ops on a resource variable holding an RNG state (TF's
stateful_random_ops): StatefulUniform, StatefulStandardNormal(V2),
StatefulTruncatedNormal, StatefulUniformFullInt, StatefulUniformInt, and
StatelessRandomGetAlg.

The state is an int64 vector.  For Philox (algorithm 1, and 3, auto-select, which picks
Philox on CPU) it is [counter_lo, counter_hi, key, ...]: an op draws as the stateless V2
op of its distribution from that (key, counter), then moves the counter 256 blocks per
output element, as TF's kernels do, so two ops on one state never overlap.  The V1
StatefulStandardNormal (removed from GraphDefs at version 29) reads its algorithm from
the state's first element and the Philox state after it.  ThreeFry (2) is XLA-only in
TF: UnimplementedError, as there.

Reading the state and writing it back happen with no await between them: atomic on the
loop, as TF's kernel holds the variable's lock.  The draws are the stateless V2 ops'
vectorized Philox, run inline as theirs are.  TF registers no gradient for these ops
(tf.gradients through one raises LookupError), nor does asyncflow.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import legacy_ops, philox_random, resource_variable_ops
from asyncflow.ops import stateless_random_ops as sro
from asyncflow.ops.data_flow_stack_ops import handle_object
from asyncflow.ops.state_ops import VarRef
from asyncflow.registry import TypeConstraint, register_op

__all__: list[str] = []

_PHILOX = 1
_M32 = (1 << 32) - 1
_SHAPE_T = TypeConstraint(["int32", "int64"], "int64")
_FLOATS = TypeConstraint(["float16", "bfloat16", "float32", "float64"], "float32")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _reserve(handle, alg, n: int, from_state: bool):
    """The Philox (key, counter) the state holds now; the state's counter moved past `n`
    outputs.  `from_state`: the algorithm is the state's first element (the V1 op)."""
    var = handle_object(handle, VarRef, "resource variable")
    if var.value is None:  # (TF's LookupResource finds no variable: NotFoundError)
        raise resource_variable_ops._not_found(var)
    skip = 0
    if from_state:
        state = np.asarray(var.value)
        if state.ndim != 1 or state.size < 1:
            raise _invalid("The RNG state must have at least one element (the algorithm)")
        alg, skip = int(state[0]), 1
    words = sro.skip_state(var, alg, n, skip).view(np.uint64)
    k = int(words[skip + 2])
    return (k & _M32, k >> 32), int(words[skip]) | (int(words[skip + 1]) << 64)


def _check_range(minval, maxval) -> None:
    lo, hi = np.asarray(minval), np.asarray(maxval)
    for name, v in (("minval", lo), ("maxval", hi)):
        if v.ndim:
            raise _invalid(f"{name} must be 0-D, got shape {sro._shape_str(v.shape)}")
    if int(lo) >= int(hi):
        raise _invalid(f"Need minval < maxval, got {int(lo)} >= {int(hi)}")


def _output_shape(op):
    if "Normal" in op.type:
        philox_random.prepare()  # (the host's Box-Muller loops, compiled meanwhile)
    shape_input = op.inputs[2] if op.type != "StatefulStandardNormal" else op.inputs[1]
    shape_input.shape.with_rank(1)
    return [ops.constant_shape(shape_input)]


def _register(name, draw, dtype_attr, extra_inputs=(), with_alg=True):
    """`name`(resource, algorithm, shape, *extra) drawing `draw(key, counter, shape, dtype,
    *extra)` from the state, which moves past the drawn elements."""
    alg_input = ["algorithm: int64"] if with_alg else []
    op_def = register_op(
        name,
        inputs=["resource: resource", *alg_input, "shape: shape_dtype", *extra_inputs],
        outputs=["output: dtype"],
        attrs={"dtype": dtype_attr, "shape_dtype": _SHAPE_T},
        shape_fn=_output_shape,
        stateful=True,
    )

    @op_def.kernel("CPU")
    async def _kernel(ctx, handle, *args):
        alg = int(np.asarray(args[0])) if with_alg else None
        shape, *extra = args[1:] if with_alg else args
        dims = sro.make_shape(shape)
        n = int(np.prod(dims))
        if extra:  # (the range is checked before the state moves, as TF does)
            _check_range(*extra)
        key, counter = _reserve(handle, alg, n, not with_alg)
        return draw(key, counter, dims, ctx.attrs["dtype"], *extra)

    return op_def


_register("StatefulUniform", sro._uniform, _FLOATS)
_register("StatefulStandardNormalV2", sro._normal, _FLOATS)
_register("StatefulTruncatedNormal", sro._truncated, _FLOATS)
_register("StatefulUniformFullInt", sro._full_int,
          TypeConstraint(["int32", "int64", "uint32", "uint64"], "uint64"))  # fmt: skip
_register("StatefulUniformInt", sro._int_range, TypeConstraint(["int32", "int64"], "int64"),
          ("minval: dtype", "maxval: dtype"))  # fmt: skip
legacy_ops._removed_in(
    _register("StatefulStandardNormal", sro._normal, _FLOATS, with_alg=False),
    29,
    "Use StatefulStandardNormalV2 instead",
)


StatelessRandomGetAlg = register_op(
    "StatelessRandomGetAlg",
    inputs=[],
    outputs=["alg: int32"],
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
)


@StatelessRandomGetAlg.kernel("CPU")
async def _get_alg(ctx):
    """The algorithm the stateless V2 ops pick on this device: Philox on CPU (and GPU)."""
    return np.array(_PHILOX, np.int32)
