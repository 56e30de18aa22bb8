"""EditDistance (`tf.edit_distance`): the Levenshtein distance between the sequences of
two SparseTensors, as TF computes it.

Both tensors have one rank R; their last dimension holds the sequences, and the first
R - 1 index them: the output has, at each position of the larger of the two shapes'
first R - 1 dimensions, the distance between the hypothesis' sequence there and the
truth's (an absent sequence is empty), as float32.  With `normalize`, each distance is
divided by the truth's length: an empty truth gives 0 against an empty hypothesis and
inf against any other.  A sequence is its values in index order along the last
dimension (TF requires the indices in order; unordered ones are sorted here).
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import ANY, NotDifferentiable, register_op
from asyncflow.sparse_tensor import SparseTensor

__all__ = ["edit_distance"]


def _edit_distance_shape(op):
    h_shape, t_shape = op.inputs[2], op.inputs[5]
    h_shape.shape.with_rank(1)
    t_shape.shape.with_rank(1)
    h_n, t_n = h_shape.shape[0].value, t_shape.shape[0].value
    if h_n is not None and t_n is not None and h_n != t_n:
        raise ValueError(
            f"Num elements of hypothesis_shape does not match truth_shape: {h_n} vs. {t_n}"
        )
    h_val, t_val = ops.constant_value(h_shape), ops.constant_value(t_shape)
    if h_val is not None and t_val is not None:  # TF's: known from constant shapes
        return [tensor_shape.TensorShape(np.maximum(h_val[:-1], t_val[:-1]).tolist())]
    rank = h_n if h_n is not None else t_n
    if rank is None:
        return [tensor_shape.unknown_shape()]
    return [tensor_shape.TensorShape([None] * (rank - 1))]


EditDistance = register_op(
    "EditDistance",
    inputs=[
        "hypothesis_indices: int64",
        "hypothesis_values: T",
        "hypothesis_shape: int64",
        "truth_indices: int64",
        "truth_values: T",
        "truth_shape: int64",
    ],
    outputs=["output: float32"],
    attrs={"normalize": True, "T": ANY},
    shape_fn=_edit_distance_shape,
)
NotDifferentiable("EditDistance")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _levenshtein(a: list, b: list) -> int:
    if not a:
        return len(b)
    if not b:
        return len(a)
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def _sequences(name, indices, values, shape) -> dict:
    indices, values, shape = np.asarray(indices), np.asarray(values), np.asarray(shape)
    if indices.ndim != 2 or values.ndim != 1 or shape.ndim != 1:
        raise _invalid(
            f"{name}_indices should be a matrix, {name}_values a vector and {name}_shape "
            f"a vector, but got shapes: {list(indices.shape)}, {list(values.shape)}, "
            f"{list(shape.shape)}"
        )
    if indices.shape[0] != values.shape[0]:
        raise _invalid(
            f"Expected {name}_indices.dim_size(0) == {name}_values.NumElements(), got "
            f"{indices.shape[0]} and {values.shape[0]}"
        )
    if indices.shape[1] != shape.shape[0]:
        raise _invalid(
            f"Expected {name}_indices.dim_size(1) == {name}_shape.NumElements(), got "
            f"{indices.shape[1]} and {shape.shape[0]}"
        )
    if indices.size and (indices < 0).any():
        raise _invalid(f"{name}_indices has a negative index")
    seqs: dict = {}
    order = np.lexsort(indices.T[::-1]) if indices.shape[0] else []
    for k in order:
        seqs.setdefault(tuple(indices[k, :-1].tolist()), []).append(values[k])
    return seqs


def edit_distances(h_idx, h_val, h_shape, t_idx, t_val, t_shape, normalize: bool):
    h_shape, t_shape = np.asarray(h_shape), np.asarray(t_shape)
    if h_shape.ndim != 1 or t_shape.ndim != 1 or h_shape.shape != t_shape.shape:
        raise _invalid(
            f"hypothesis_shape and truth_shape should have the same number of elements, but "
            f"got {h_shape.size} and {t_shape.size}"
        )
    hyp = _sequences("hypothesis", h_idx, h_val, h_shape)
    truth = _sequences("truth", t_idx, t_val, t_shape)
    out_shape = tuple(int(v) for v in np.maximum(h_shape[:-1], t_shape[:-1]))
    out = np.zeros(out_shape, np.float32)
    for pos in set(hyp) | set(truth):
        if any(p >= n for p, n in zip(pos, out_shape)):  # (TF checks against the output)
            raise _invalid(
                f"an index {list(pos)} of hypothesis or truth is outside the output's shape "
                f"{list(out_shape)}"
            )
        a, b = hyp.get(pos, []), truth.get(pos, [])
        d = float(_levenshtein(a, b))
        if normalize:
            d = d / len(b) if b else (np.inf if a else 0.0)
        out[pos] = d
    return out


@EditDistance.kernel("CPU")
async def _edit_distance_kernel(ctx, h_idx, h_val, h_shape, t_idx, t_val, t_shape):
    return await ctx.compute(
        edit_distances, h_idx, h_val, h_shape, t_idx, t_val, t_shape, ctx.attrs["normalize"]
    )


def edit_distance(hypothesis, truth, normalize=True, name="edit_distance"):
    """TF's `tf.edit_distance`: the Levenshtein distance between the sequences of two
    SparseTensors of one rank (the last dimension the sequence), float32 of the larger
    shape less its last dimension; normalised by the truth's lengths by default.

    Raises:
      TypeError: hypothesis or truth is not a SparseTensor.
    """
    for arg, what in ((hypothesis, "Hypothesis"), (truth, "Truth")):
        if not isinstance(arg, SparseTensor):
            raise TypeError(f"{what} must be a SparseTensor.")
    op = ops.apply_op(
        "EditDistance",
        [
            hypothesis.indices,
            hypothesis.values,
            hypothesis.dense_shape,
            truth.indices,
            truth.values,
            truth.dense_shape,
        ],
        {"normalize": bool(normalize)},
        name=name,
    )
    return op.outputs[0]
