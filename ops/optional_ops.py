"""tf.data's optional values: OptionalFromValue, OptionalNone, OptionalHasValue,
OptionalGetValue and IteratorGetNextAsOptional.

TF carries an optional in a variant tensor; this runtime has no variant dtype, so, as
dataset handles, an optional is a 0-d string-typed tensor holding an `OptionalValue`
(the tuple of its components' arrays, or None).  `IteratorGetNextAsOptional` gives an
empty optional at the end of the data instead of OutOfRangeError.

Invariant: an OptionalValue owns its arrays (copied in), and OptionalGetValue hands out
copies, so neither the step that made the optional nor a consumer of its value can
change what another read of it sees.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow.ops import dataset_ops
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = ["OptionalValue"]

_LIST = TypeConstraint(None, is_list=True)
_SCALAR = tensor_shape.TensorShape([])


class OptionalValue:
    """The value an optional tensor holds: `values` (a tuple of arrays) or None."""

    __slots__ = ("values",)

    def __init__(self, values: tuple | None):
        self.values = values

    def __repr__(self) -> str:
        return "OptionalValue(empty)" if self.values is None else f"OptionalValue({self.values})"


def _handle(value: OptionalValue) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = value
    return out


def _optional(value) -> OptionalValue:
    v = value[()] if isinstance(value, np.ndarray) and value.shape == () else value
    if not isinstance(v, OptionalValue):
        raise errors.InvalidArgumentError(
            None, None, f"Input tensor must be a scalar DT_VARIANT tensor containing an "
            f"OptionalVariant object, got {v!r}"
        )  # fmt: skip
    return v


def _scalar_shape(op):
    return [_SCALAR]


OptionalFromValue = register_op(
    "OptionalFromValue",
    inputs=["components: Toutput_types"],
    outputs=["optional: string"],
    attrs={"Toutput_types": _LIST},
    shape_fn=_scalar_shape,
)
NotDifferentiable("OptionalFromValue")


@OptionalFromValue.kernel("CPU")
async def _from_value(ctx, *components):
    return _handle(OptionalValue(tuple(np.array(c) for c in components)))


OptionalNone = register_op("OptionalNone", outputs=["optional: string"], shape_fn=_scalar_shape)
NotDifferentiable("OptionalNone")


@OptionalNone.kernel("CPU")
async def _none(ctx):
    return _handle(OptionalValue(None))


OptionalHasValue = register_op(
    "OptionalHasValue",
    inputs=["optional: string"],
    outputs=["has_value: bool"],
    shape_fn=_scalar_shape,
)
NotDifferentiable("OptionalHasValue")


@OptionalHasValue.kernel("CPU")
async def _has_value(ctx, optional):
    return np.array(_optional(optional).values is not None)


def _value_shapes(op):
    return list(op._attr("output_shapes")) or [None] * len(op.outputs)


OptionalGetValue = register_op(
    "OptionalGetValue",
    inputs=["optional: string"],
    outputs=["components: output_types"],
    attrs={"output_types": _LIST, "output_shapes": []},
    shape_fn=_value_shapes,
)
NotDifferentiable("OptionalGetValue")


@OptionalGetValue.kernel("CPU")
async def _get_value(ctx, optional):
    values = _optional(optional).values
    if values is None:
        raise errors.InvalidArgumentError(None, None, "The given optional does not have a value.")
    types = ctx.attrs["output_types"]
    if len(values) != len(types):
        raise errors.InvalidArgumentError(
            None, None, f"The expected number of components is {len(types)} but the "
            f"actual number of components is {len(values)}."
        )  # fmt: skip
    out = []
    for v, t in zip(values, types, strict=True):
        got = dtypes.string if v.dtype == object else dtypes.as_dtype(v.dtype)
        if got != t:
            raise errors.InvalidArgumentError(
                None, None, f"The expected type is {t.name} but the actual type is "
                f"{got.name}."
            )  # fmt: skip
        out.append(np.array(v))
    return out[0] if len(out) == 1 else tuple(out)


IteratorGetNextAsOptional = register_op(
    "IteratorGetNextAsOptional",
    inputs=["iterator: string"],
    outputs=["optional: string"],
    attrs={"output_types": _LIST, "output_shapes": []},
    shape_fn=_scalar_shape,
    stateful=True,
    is_async=True,
)
NotDifferentiable("IteratorGetNextAsOptional")


@IteratorGetNextAsOptional.kernel("CPU")
async def _get_next_as_optional(ctx, iterator):
    it = iterator[()] if isinstance(iterator, np.ndarray) else iterator
    if not isinstance(it, dataset_ops.IteratorResource):
        raise errors.InvalidArgumentError(None, None, f"Expected an iterator handle, got {it!r}")
    try:
        elem = await it.get_next()
    except errors.OutOfRangeError:
        return _handle(OptionalValue(None))
    types = ctx.attrs["output_types"]
    if len(elem) != len(types):
        raise errors.InvalidArgumentError(
            None, None, f"Expected {len(types)} components but the element has {len(elem)}"
        )
    values = []
    for v, t in zip(elem, types, strict=True):  # copies, of the iterator's dtypes
        values.append(np.array(v, dtype=object if t == dtypes.string else t.as_numpy_dtype))
    return _handle(OptionalValue(tuple(values)))
