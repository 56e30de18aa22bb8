"""TensorMap ops (TF's `map_ops`): an immutable map from tensor keys to tensors, carried
as a 0-d `variant` tensor, as TF 2.x's control flow carries TensorLists.

Every op that "changes" a map (Insert, Erase) returns a new map and leaves its input as
it was.  A key is a tensor of any dtype and shape; two keys are the same key when their
dtypes, shapes and values are equal (TF's TensorKey), so int32 1 and int64 1 are two
keys.  Inserting a present key replaces its value, as TF 2.21 does.  Values are copied
in and out (the kernel-output invariant: no buffer shared with a donated tensor).

Gradients are TF's (map_ops.py): Lookup's puts the incoming gradient in a map under the
key, Insert's takes the value's gradient back out of the map's (zeros when absent), and
Erase's passes the map's through; TF registers none for Size, HasKey and StackKeys
(LookupError), nor does asyncflow.  AddN and ZerosLike of maps (the gradient walk sums and
seeds them) are installed beside the TensorList ones.

StackKeys lists keys in insertion order.  TF lists them in its hash map's order, which
changes from process to process (its hashes are seeded per process), so no program can
rely on TF's.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops as _array_ops
from asyncflow.ops import control_flow_cond, tensor_list_ops
from asyncflow.ops import math_ops as _math_ops
from asyncflow.ops.data_flow_stack_ops import handle_object, handle_value
from asyncflow.ops.logging_ops import summarize_value
from asyncflow.registry import ANY, NotDifferentiable, register_op

__all__: list[str] = []


class TensorMap:
    """An immutable map of tensors: `items` maps a key's identity to (key, value)."""

    __slots__ = ("items",)

    def __init__(self, items):
        self.items = dict(items)


def _key_id(key: np.ndarray) -> tuple:
    """A key's identity (TF's TensorKey equality): dtype, shape and values."""
    if key.dtype == object:
        return ("string", key.shape, tuple(bytes(v) for v in key.reshape(-1)))
    return (key.dtype.str, key.shape, key.tobytes())


def _map(value) -> TensorMap:
    return handle_object(value, TensorMap, "TensorMap")


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _own(value) -> np.ndarray:
    arr = np.asarray(value)
    return np.array(arr, dtype=arr.dtype, copy=True)


def _show_key(key: np.ndarray) -> str:
    return summarize_value(key, 100)


_SCALAR = tensor_shape.TensorShape([])


def _scalar_shape(op):
    return [_SCALAR]


def _unknown_shape(op):
    return [tensor_shape.unknown_shape()]


EmptyTensorMap = register_op(
    "EmptyTensorMap", inputs=[], outputs=["handle: variant"], shape_fn=_scalar_shape
)
NotDifferentiable("EmptyTensorMap")


@EmptyTensorMap.kernel("CPU")
async def _empty(ctx):
    return handle_value(TensorMap({}))


TensorMapSize = register_op(
    "TensorMapSize", inputs=["input_handle: variant"], outputs=["size: int32"],
    shape_fn=_scalar_shape,
)  # fmt: skip


@TensorMapSize.kernel("CPU")
async def _size(ctx, handle):
    return np.array(len(_map(handle).items), np.int32)


TensorMapInsert = register_op(
    "TensorMapInsert",
    inputs=["input_handle: variant", "key: key_dtype", "value: value_dtype"],
    outputs=["output_handle: variant"],
    attrs={"key_dtype": ANY, "value_dtype": ANY},
    shape_fn=_scalar_shape,
)


@TensorMapInsert.kernel("CPU")
async def _insert(ctx, handle, key, value):
    items = dict(_map(handle).items)
    key = _own(key)
    items[_key_id(key)] = (key, _own(value))
    return handle_value(TensorMap(items))


TensorMapLookup = register_op(
    "TensorMapLookup",
    inputs=["input_handle: variant", "key: key_dtype"],
    outputs=["value: value_dtype"],
    attrs={"key_dtype": ANY, "value_dtype": ANY},
    shape_fn=_unknown_shape,
)


def _np_dtype(dt) -> np.dtype:
    return np.dtype(object) if dt == dtypes.string else np.dtype(dt.as_numpy_dtype)


def _type_string(dt: np.dtype) -> str:
    """TF's DataTypeString ("float" for float32)."""
    name = "string" if dt.kind == "O" else dtypes.as_dtype(dt).name
    return {"float32": "float", "float64": "double", "float16": "half"}.get(name, name)


@TensorMapLookup.kernel("CPU")
async def _lookup(ctx, handle, key):
    key = np.asarray(key)
    found = _map(handle).items.get(_key_id(key))
    if found is None:
        raise _invalid(
            f'Trying to lookup non-existent key. Could not find key "{_show_key(key)}".'
        )
    value = found[1]
    want = _np_dtype(ctx.attrs["value_dtype"])
    if value.dtype != want:  # (TF's executor checks the output's dtype)
        raise errors.InternalError(
            None,
            None,
            f"Output 0 of type {_type_string(value.dtype)} does not match declared output "
            f"type {_type_string(want)} for node {{{{node {ctx.op.name}}}}}",
        )
    return value.copy()


TensorMapErase = register_op(
    "TensorMapErase",
    inputs=["input_handle: variant", "key: key_dtype"],
    outputs=["output_handle: variant"],
    attrs={"key_dtype": ANY, "value_dtype": ANY},
    shape_fn=_scalar_shape,
)


@TensorMapErase.kernel("CPU")
async def _erase(ctx, handle, key):
    key = np.asarray(key)
    items = dict(_map(handle).items)
    if items.pop(_key_id(key), None) is None:
        raise _invalid(
            f'Trying to erase non-existent item. Could not find key "{_show_key(key)}".'
        )
    return handle_value(TensorMap(items))


TensorMapHasKey = register_op(
    "TensorMapHasKey",
    inputs=["input_handle: variant", "key: key_dtype"],
    outputs=["has_key: bool"],
    attrs={"key_dtype": ANY},
    shape_fn=_scalar_shape,
)


@TensorMapHasKey.kernel("CPU")
async def _has_key(ctx, handle, key):
    return np.array(_key_id(np.asarray(key)) in _map(handle).items)


TensorMapStackKeys = register_op(
    "TensorMapStackKeys",
    inputs=["input_handle: variant"],
    outputs=["keys: key_dtype"],
    attrs={"key_dtype": ANY},
    shape_fn=_unknown_shape,
)


@TensorMapStackKeys.kernel("CPU")
async def _stack_keys(ctx, handle):
    keys = [k for k, _ in _map(handle).items.values()]
    if not keys:
        raise _invalid("TensorMapStackKeys cannot be called on empty map.")
    want_np = _np_dtype(ctx.attrs["key_dtype"])
    for k in keys:
        if k.dtype != want_np:
            raise _invalid("Key does not match requested dtype.")
        if k.shape != keys[0].shape:
            raise _invalid(
                f"Keys of a TensorMap must have one shape to be stacked, saw "
                f"{list(keys[0].shape)} and {list(k.shape)}"
            )
    return np.stack(keys)


# -- AddN and ZerosLike of maps (what the gradient walk does with them) ----------------------


def _add_maps(xs):
    items = {}
    for x in xs:
        for kid, (key, value) in _map(x).items.items():
            if kid in items:
                items[kid] = (key, np.add(items[kid][1], value))
            else:
                items[kid] = (key, value.copy())
    return handle_value(TensorMap(items))


def _zeros_like_map(x):
    return handle_value(TensorMap({}))


def _chain(slot: list, fn):
    """Install `fn` for maps in a variant hook, leaving other variants to the old hook."""
    previous = slot[0]

    def dispatch(arg):
        first = arg[0] if isinstance(arg, list | tuple) else arg
        obj = first[()] if isinstance(first, np.ndarray) and first.shape == () else first
        if isinstance(obj, TensorMap) or previous is None:
            return fn(arg)
        return previous(arg)

    slot[0] = dispatch


_ = tensor_list_ops  # (its hooks are installed first; these chain to them)
_chain(_math_ops.VARIANT_ADD, _add_maps)
_chain(_array_ops.VARIANT_ZEROS_LIKE, _zeros_like_map)


# -- gradients (TF's map_ops.py) --------------------------------------------------------------


@TensorMapLookup.gradient
def _lookup_grad(op, dval):
    key = op.inputs[1]
    empty = ops.apply_op("EmptyTensorMap", [], {}).outputs[0]
    grad_map = ops.apply_op(
        "TensorMapInsert", [empty, key, dval],
        {"key_dtype": key.dtype, "value_dtype": dval.dtype},
    ).outputs[0]  # fmt: skip
    return grad_map, None


@TensorMapInsert.gradient
def _insert_grad(op, dmap):
    key, value = op.inputs[1], op.inputs[2]
    attrs = {"key_dtype": key.dtype, "value_dtype": value.dtype}
    has = ops.apply_op("TensorMapHasKey", [dmap, key], {"key_dtype": key.dtype}).outputs[0]

    def present():
        v = ops.apply_op("TensorMapLookup", [dmap, key], attrs).outputs[0]
        rest = ops.apply_op("TensorMapErase", [dmap, key], attrs).outputs[0]
        return v, rest

    def absent():
        passed = ops.apply_op("Identity", [dmap], {"T": dtypes.variant}).outputs[0]
        return _array_ops.zeros_like(value), passed

    value_grad, map_grad = control_flow_cond.cond(has, present, absent)
    return map_grad, None, value_grad


@TensorMapErase.gradient
def _erase_grad(op, dmap):
    return dmap, None
