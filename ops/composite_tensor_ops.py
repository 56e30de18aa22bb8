"""CompositeTensorVariantFromComponents and CompositeTensorVariantToComponents: a composite
value's component tensors packed into one scalar variant and unpacked again (TF's
composite_tensor_ops, as tf.function and tf.data use them to pass a composite as one
tensor).

`metadata` is TF's serialized CompositeTensorVariantMetadata (the value's TypeSpecProto);
as TF's kernels, these require it to parse as a protobuf message and otherwise compare
only the components' number and dtypes.  A variant here is a 0-d object array holding a
`CompositeTensorVariantValue`.

Invariant: a packed value owns its component arrays (copied in), and unpacking hands out
copies, so no reader sees another's writes.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import TypeConstraint, register_op

__all__ = ["CompositeTensorVariantValue"]

_LIST = TypeConstraint(None, is_list=True)


class CompositeTensorVariantValue:
    """What the variant holds: the metadata it was packed with and the components."""

    __slots__ = ("metadata", "components")

    def __init__(self, metadata: bytes, components: tuple):
        self.metadata = metadata
        self.components = components

    def __repr__(self) -> str:
        return f"CompositeTensorVariant({len(self.components)} components)"


def _check_metadata(metadata) -> None:
    from google.protobuf import empty_pb2, message

    raw = metadata.encode() if isinstance(metadata, str) else bytes(metadata)
    try:
        empty_pb2.Empty().ParseFromString(raw)  # (a wire-format check: fields are kept)
    except message.DecodeError:
        raise errors.InvalidArgumentError(None, None, "Error parsing metadata") from None


def _dtype_string(dtype) -> str:
    return "DT_" + dtypes.as_dtype(dtype).name.upper().replace("FLOAT32", "FLOAT").replace(
        "FLOAT64", "DOUBLE"
    )


CompositeTensorVariantFromComponents = register_op(
    "CompositeTensorVariantFromComponents",
    inputs=["components: Tcomponents"],
    outputs=["encoded: variant"],
    attrs={"metadata": "", "Tcomponents": _LIST},
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
)


@CompositeTensorVariantFromComponents.kernel("CPU")
async def _from_components(ctx, *components):
    _check_metadata(ctx.attrs["metadata"])
    out = np.empty((), dtype=object)
    out[()] = CompositeTensorVariantValue(
        ctx.attrs["metadata"], tuple(np.array(c) for c in components)
    )
    return out


@CompositeTensorVariantFromComponents.gradient
def _from_components_grad(op, grad):
    types = [t.dtype for t in op.inputs]
    outs = ops.apply_op(
        "CompositeTensorVariantToComponents",
        [grad],
        {"metadata": op._attr("metadata"), "Tcomponents": types},
    ).outputs
    return list(outs)


CompositeTensorVariantToComponents = register_op(
    "CompositeTensorVariantToComponents",
    inputs=["encoded: variant"],
    outputs=["components: Tcomponents"],
    attrs={"metadata": "", "Tcomponents": _LIST},
    shape_fn=lambda op: [tensor_shape.unknown_shape()] * len(op.outputs),
)


@CompositeTensorVariantToComponents.kernel("CPU")
async def _to_components(ctx, encoded):
    _check_metadata(ctx.attrs["metadata"])
    item = encoded[()] if isinstance(encoded, np.ndarray) and encoded.shape == () else encoded
    if not isinstance(item, CompositeTensorVariantValue):
        raise errors.InvalidArgumentError(
            None, None,
            f"The input `encoded` is not a valid CompositeTensorVariant tensor, got {item!r}",
        )  # fmt: skip
    types = ctx.attrs["Tcomponents"]
    if len(item.components) != len(types):
        raise errors.InvalidArgumentError(
            None, None,
            f"Encoded value has {len(item.components)} tensor components; expected "
            f"{len(types)} components based on type_spec",
        )  # fmt: skip
    out = []
    for i, (c, t) in enumerate(zip(item.components, types, strict=True)):
        got = dtypes.string if c.dtype == object else dtypes.as_dtype(c.dtype)
        if got != dtypes.as_dtype(t):
            raise errors.InvalidArgumentError(
                None, None,
                f"Tensor component {i} had dtype {_dtype_string(got)}; expected dtype "
                f"{_dtype_string(t)}",
            )  # fmt: skip
        out.append(np.array(c))
    return out[0] if len(out) == 1 else tuple(out)


@CompositeTensorVariantToComponents.gradient
def _to_components_grad(op, *grads):
    parts = [
        g if g is not None else ops.apply_op("ZerosLike", [out]).outputs[0]
        for g, out in zip(grads, op.outputs)
    ]
    encoded = ops.apply_op(
        "CompositeTensorVariantFromComponents",
        [parts],
        {"metadata": op._attr("metadata"), "Tcomponents": [p.dtype for p in parts]},
    ).outputs[0]
    return [encoded]
