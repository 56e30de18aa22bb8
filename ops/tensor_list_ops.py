"""TensorList ops (TF's `list_ops`): the lists TF 2.x's control flow carries through a
While loop -- a TensorArray in a tf.function, a Keras RNN's inputs and outputs.

A list is a value, not a resource: a 0-d `variant` tensor holding an immutable
`TensorList` (element dtype, element shape as TF's partial shape, items); every op that
"changes" one (SetItem, PushBack, PopBack, Resize, Scatter) returns a new list and leaves
its input as it was, as TF's do.  An item not set yet reads as zeros when the element
shape is fully known, as TF's.  Items are copied in and out: a list never shares a buffer
with a tensor a later kernel may donate (the kernel-output invariant).

asyncflow's own TensorArray is the TF1 one (ops/data_flow_ops.py); these ops run the
graphs TF 2.x writes (imported GraphDefs, SavedModels), so none has a gradient here
(TF's graphs carry their gradient ops).  Errors are TF's: class and message.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops as _array_ops
from asyncflow.ops import math_ops as _math_ops
from asyncflow.ops.data_flow_stack_ops import handle_object, handle_value
from asyncflow.registry import ANY, INDEX, NotDifferentiable, register_op

__all__: list[str] = []

_HANDLE = tensor_shape.TensorShape([])


class TensorList:
    """An immutable list of tensors of one dtype (TF's TensorList variant)."""

    __slots__ = ("dtype", "shape", "items", "max")

    def __init__(self, dtype, shape, items, max_elements=-1):
        self.dtype = dtype  # numpy dtype of the elements
        self.shape = shape  # None (unknown rank) or a list of int / None
        self.items = tuple(items)  # arrays, or None for an item not set
        self.max = max_elements

    def replace(self, items=None, shape=None):
        return TensorList(
            self.dtype,
            self.shape if shape is None else shape,
            self.items if items is None else items,
            self.max,
        )


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _np_dtype(dt) -> np.dtype:
    return np.dtype(object) if dt == dtypes.string else np.dtype(dt.as_numpy_dtype)


def _list(value) -> TensorList:
    return handle_object(value, TensorList, "TensorList")


def _partial_shape(value):
    """A shape tensor's value as TF's partial shape: -1 (scalar) is unknown rank."""
    arr = np.asarray(value)
    if arr.ndim == 0:
        if int(arr) != -1:
            raise _invalid(
                "The only valid scalar shape tensor is the fully unknown shape specified as -1."
            )
        return None
    return [None if int(d) < 0 else int(d) for d in arr.reshape(-1)]


def _merge(a, b):
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b):
        raise _invalid(f"Incompatible shapes during merge: {_show(a)} vs. {_show(b)}")
    out = []
    for x, y in zip(a, b):
        if x is not None and y is not None and x != y:
            raise _invalid(f"Incompatible shapes during merge: {_show(a)} vs. {_show(b)}")
        out.append(x if x is not None else y)
    return out


def _show(shape) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _type_name(dt: np.dtype) -> str:
    return "string" if dt.kind == "O" else dtypes.as_dtype(dt).name


def _check_dtype(tl: TensorList, dt):
    want = _np_dtype(dt)
    if tl.dtype != want:
        raise _invalid(
            f"Invalid data types; op elements {_type_name(want)} but list elements "
            f"{_type_name(tl.dtype)}"
        )


def _fits(shape, value: np.ndarray) -> bool:
    if shape is None:
        return True
    dims = zip(shape, value.shape)
    return len(shape) == value.ndim and all(d is None or d == s for d, s in dims)


def _own(value, dtype) -> np.ndarray:
    """A copy the list owns (the kernel-output invariant: no shared buffers)."""
    return np.array(value, dtype=dtype, copy=True)


def _zeros(tl: TensorList, shape, what: str) -> np.ndarray:
    if shape is None or any(d is None for d in shape):
        raise _invalid(
            f"Trying to read an uninitialized tensor but element_shape is not fully "
            f"defined: {_show(shape)} and no list element is set.{what}"
        )
    return np.zeros(shape, dtype=tl.dtype) if tl.dtype.kind != "O" else np.full(shape, b"", object)


def _item(tl: TensorList, i: int, element_shape) -> np.ndarray:
    v = tl.items[i]
    if v is not None:
        return v.copy()
    shape = _merge(tl.shape, element_shape)
    for other in tl.items:  # TF: a set item tells the shape of the unset ones
        if other is not None:
            shape = _merge(shape, list(other.shape))
            break
    return _zeros(tl, shape, "")


def _shape_value(t):
    value = ops.constant_value(t)
    if value is None:
        return tensor_shape.unknown_shape()
    try:
        s = _partial_shape(value)
    except errors.InvalidArgumentError:
        return tensor_shape.unknown_shape()
    return tensor_shape.TensorShape(s)


def _add_lists(xs) -> np.ndarray:
    """AddN of TensorLists (TF's TensorListBinaryAdd, pairwise): equal lengths and element
    dtypes; item by item, an item set in one list only is taken as it is."""
    lists = [_list(x) for x in xs]
    first = lists[0]
    items = list(first.items)
    for other in lists[1:]:
        if other.dtype != first.dtype:
            raise _invalid(
                f"Trying to add two lists of tensors of different dtypes. One is "
                f"{_type_name(first.dtype)} and the other is {_type_name(other.dtype)}"
            )
        if len(other.items) != len(items):
            raise _invalid(
                f"Trying to add two lists of tensors with different lengths. One is "
                f"{len(items)} and the other is {len(other.items)}"
            )
        for i, b in enumerate(other.items):
            a = items[i]
            if b is None:
                continue
            if a is None:
                items[i] = b.copy()
            elif a.shape != b.shape:
                raise _invalid(
                    f"Trying to add two tensors with incompatible element shapes. One is "
                    f"{list(a.shape)} and the other is {list(b.shape)}"
                )
            else:
                items[i] = np.add(a, b)
    return handle_value(first.replace(items, shape=_merge(first.shape, lists[-1].shape)))


def _zeros_like_list(x) -> np.ndarray:
    """ZerosLike of a TensorList (TF's TensorListZerosLike): as long, each set item zeros."""
    tl = _list(x)
    return handle_value(tl.replace([None if v is None else np.zeros_like(v) for v in tl.items]))


_math_ops.VARIANT_ADD[0] = _add_lists
_array_ops.VARIANT_ZEROS_LIKE[0] = _zeros_like_list


def _register(name, inputs, outputs, attrs, shape_fn):
    op_def = register_op(name, inputs=inputs, outputs=outputs, attrs=attrs, shape_fn=shape_fn)
    NotDifferentiable(name)
    return op_def


def _handle_shape(op):
    return [_HANDLE] * len(op.outputs)


_ELEM = {"element_dtype": ANY}
_SHAPE_T = {"shape_type": INDEX}


# -- making lists -------------------------------------------------------------------------


EmptyTensorList = _register(
    "EmptyTensorList",
    ["element_shape: shape_type", "max_num_elements: int32"],
    ["handle: variant"],
    {**_ELEM, **_SHAPE_T},
    _handle_shape,
)


@EmptyTensorList.kernel("CPU")
async def _empty(ctx, element_shape, max_num_elements):
    dt = _np_dtype(ctx.attrs["element_dtype"])
    return handle_value(TensorList(dt, _partial_shape(element_shape), (), int(max_num_elements)))


TensorListReserve = _register(
    "TensorListReserve",
    ["element_shape: shape_type", "num_elements: int32"],
    ["handle: variant"],
    {**_ELEM, **_SHAPE_T},
    _handle_shape,
)


@TensorListReserve.kernel("CPU")
async def _reserve(ctx, element_shape, num_elements):
    n = int(num_elements)
    if n < 0:
        raise _invalid(
            f"The num_elements to reserve must be a non negative number, but got {n}"
        )
    dt = _np_dtype(ctx.attrs["element_dtype"])
    return handle_value(TensorList(dt, _partial_shape(element_shape), (None,) * n))


TensorListFromTensor = _register(
    "TensorListFromTensor",
    ["tensor: element_dtype", "element_shape: shape_type"],
    ["output_handle: variant"],
    {**_ELEM, **_SHAPE_T},
    _handle_shape,
)


@TensorListFromTensor.kernel("CPU")
async def _from_tensor(ctx, tensor, element_shape):
    t = np.asarray(tensor)
    if t.ndim < 1:
        raise _invalid(f"Tensor must be at least a vector, but saw shape: {list(t.shape)}")
    shape = _partial_shape(element_shape)  # TF keeps the given shape (checked against t)
    _merge(shape, list(t.shape[1:]))
    items = [_own(row, t.dtype) for row in t]
    return handle_value(TensorList(t.dtype, shape, items))


# -- reading ------------------------------------------------------------------------------


def _item_shape(op):
    return [_shape_value(op.inputs[2])]


TensorListGetItem = _register(
    "TensorListGetItem",
    ["input_handle: variant", "index: int32", "element_shape: Tshape"],
    ["item: element_dtype"],
    {**_ELEM, "Tshape": INDEX},
    _item_shape,
)


@TensorListGetItem.kernel("CPU")
async def _get_item(ctx, handle, index, element_shape):
    tl = _list(handle)
    _check_dtype(tl, ctx.attrs["element_dtype"])
    i = int(index)
    if not 0 <= i < len(tl.items):
        raise _invalid(f"Trying to access element {i} in a list with {len(tl.items)} elements.")
    return _item(tl, i, _partial_shape(element_shape))


def _stacked_shape(op):
    s = _shape_value(op.inputs[1])
    n = op._attr("num_elements") if "num_elements" in op._attrs else -1
    lead = tensor_shape.TensorShape([n if n is not None and n >= 0 else None])
    return [lead.concatenate(s) if s.ndims is not None else tensor_shape.unknown_shape()]


TensorListStack = _register(
    "TensorListStack",
    ["input_handle: variant", "element_shape: int32"],
    ["tensor: element_dtype"],
    {**_ELEM, "num_elements": -1},
    _stacked_shape,
)


def _stack(tl: TensorList, indices, element_shape) -> np.ndarray:
    shape = _merge(tl.shape, element_shape)
    known = next((v for v in tl.items if v is not None), None)
    if known is not None:
        shape = _merge(shape, list(known.shape))
    rows = []
    for i in indices:
        v = tl.items[i]
        rows.append(v if v is not None else _zeros(tl, shape, ""))
    if not rows:
        if shape is None or any(d is None for d in shape):
            raise _invalid(
                f"Tried to stack elements of an empty list with non-fully-defined "
                f"element_shape: {_show(shape)}"
            )
        return np.zeros([0, *shape], dtype=tl.dtype)
    first = rows[0].shape
    for r in rows[1:]:
        if r.shape != first:
            raise _invalid(
                f"Incompatible ranks during merge: {list(first)} vs. {list(r.shape)}"
                if len(r.shape) != len(first)
                else f"Incompatible shapes during merge: {list(first)} vs. {list(r.shape)}"
            )
    return np.stack(rows).astype(tl.dtype, copy=False)


@TensorListStack.kernel("CPU")
async def _stack_kernel(ctx, handle, element_shape):
    tl = _list(handle)
    _check_dtype(tl, ctx.attrs["element_dtype"])
    n = ctx.attrs["num_elements"]
    if n != -1 and n != len(tl.items):
        raise _invalid(
            f"Operation expected a list with {n} elements but got a list with "
            f"{len(tl.items)} elements."
        )
    return _stack(tl, range(len(tl.items)), _partial_shape(element_shape))


TensorListGather = _register(
    "TensorListGather",
    ["input_handle: variant", "indices: int32", "element_shape: int32"],
    ["values: element_dtype"],
    _ELEM,
    lambda op: [
        tensor_shape.TensorShape([op.inputs[1].shape.num_elements()]).concatenate(
            _shape_value(op.inputs[2])
        )
        if _shape_value(op.inputs[2]).ndims is not None
        else tensor_shape.unknown_shape()
    ],
)


@TensorListGather.kernel("CPU")
async def _gather(ctx, handle, indices, element_shape):
    tl = _list(handle)
    _check_dtype(tl, ctx.attrs["element_dtype"])
    idx = [int(i) for i in np.asarray(indices).reshape(-1)]
    for i in idx:
        if not 0 <= i < len(tl.items):
            raise _invalid(
                f"Trying to gather element {i} in a list with {len(tl.items)} elements."
            )
    return _stack(tl, idx, _partial_shape(element_shape))


TensorListLength = _register(
    "TensorListLength",
    ["input_handle: variant"],
    ["length: int32"],
    {},
    lambda op: [tensor_shape.TensorShape([])],
)


@TensorListLength.kernel("CPU")
async def _length(ctx, handle):
    return np.array(len(_list(handle).items), np.int32)


TensorListElementShape = _register(
    "TensorListElementShape",
    ["input_handle: variant"],
    ["element_shape: shape_type"],
    _SHAPE_T,
    lambda op: [tensor_shape.unknown_shape()],
)


@TensorListElementShape.kernel("CPU")
async def _element_shape(ctx, handle):
    tl = _list(handle)
    dt = ctx.attrs["shape_type"].as_numpy_dtype
    if tl.shape is None:
        return np.array(-1, dt)
    return np.array([-1 if d is None else d for d in tl.shape], dt)


# -- "changing" lists (each returns a new list) -------------------------------------------


TensorListSetItem = _register(
    "TensorListSetItem",
    ["input_handle: variant", "index: int32", "item: element_dtype"],
    ["output_handle: variant"],
    {**_ELEM, "resize_if_index_out_of_bounds": False},
    _handle_shape,
)


@TensorListSetItem.kernel("CPU")
async def _set_item(ctx, handle, index, item):
    tl = _list(handle)
    _check_dtype(tl, ctx.attrs["element_dtype"])
    i = int(index)
    items = list(tl.items)
    if i >= len(items) and ctx.attrs["resize_if_index_out_of_bounds"]:
        items.extend([None] * (i + 1 - len(items)))
    if not 0 <= i < len(items):
        raise _invalid(f"Trying to modify element {i} in a list with {len(items)} elements.")
    value = np.asarray(item)
    if not _fits(tl.shape, value):
        raise _invalid(
            f"Tried to set a tensor with incompatible shape at a list index. Item element "
            f"shape: {list(value.shape)} list shape: {_show(tl.shape)}"
        )
    items[i] = _own(value, tl.dtype)
    return handle_value(tl.replace(items))


TensorListPushBack = _register(
    "TensorListPushBack",
    ["input_handle: variant", "tensor: element_dtype"],
    ["output_handle: variant"],
    _ELEM,
    _handle_shape,
)


@TensorListPushBack.kernel("CPU")
async def _push_back(ctx, handle, tensor):
    tl = _list(handle)
    _check_dtype(tl, ctx.attrs["element_dtype"])
    value = np.asarray(tensor)
    if not _fits(tl.shape, value):
        raise _invalid(
            f"Tried to push item with incompatible shape to a list. Item element shape: "
            f"{list(value.shape)} list shape: {_show(tl.shape)}"
        )
    if tl.max != -1 and len(tl.items) >= tl.max:
        raise _invalid(f"Tried to push item into a full list list size: {len(tl.items)} "
                       f"max_num_elements: {tl.max}")  # fmt: skip
    return handle_value(tl.replace((*tl.items, _own(value, tl.dtype))))


TensorListPopBack = _register(
    "TensorListPopBack",
    ["input_handle: variant", "element_shape: int32"],
    ["output_handle: variant", "tensor: element_dtype"],
    _ELEM,
    lambda op: [_HANDLE, _shape_value(op.inputs[1])],
)


@TensorListPopBack.kernel("CPU")
async def _pop_back(ctx, handle, element_shape):
    tl = _list(handle)
    _check_dtype(tl, ctx.attrs["element_dtype"])
    if not tl.items:
        raise _invalid("Trying to pop from an empty list.")
    last = _item(tl, len(tl.items) - 1, _partial_shape(element_shape))
    return handle_value(tl.replace(tl.items[:-1])), last


TensorListResize = _register(
    "TensorListResize",
    ["input_handle: variant", "size: int32"],
    ["output_handle: variant"],
    {},
    _handle_shape,
)


@TensorListResize.kernel("CPU")
async def _resize(ctx, handle, size):
    tl = _list(handle)
    n = int(size)
    if n < 0:
        raise _invalid(f"TensorListSlice expects size to be non-negative. Got: {n}")
    items = tl.items[:n] + (None,) * max(0, n - len(tl.items))
    return handle_value(tl.replace(items))


TensorListScatterIntoExistingList = _register(
    "TensorListScatterIntoExistingList",
    ["input_handle: variant", "tensor: element_dtype", "indices: int32"],
    ["output_handle: variant"],
    _ELEM,
    _handle_shape,
)


def _scatter(tl: TensorList, tensor, indices) -> TensorList:
    t = np.asarray(tensor)
    idx = [int(i) for i in np.asarray(indices).reshape(-1)]
    if t.ndim < 1 or t.shape[0] != len(idx):
        raise _invalid(
            f"Invalid number of rows in input tensor. Expected: {len(idx)} Actual: "
            f"{t.shape[0] if t.ndim else 0}"
        )
    items = list(tl.items)
    for k, i in enumerate(idx):
        if i < 0:
            raise _invalid("Indices in TensorListScatter must all be non-negative.")
        if i >= len(items):
            items.extend([None] * (i + 1 - len(items)))
        items[i] = _own(t[k], tl.dtype)
    return tl.replace(items)


@TensorListScatterIntoExistingList.kernel("CPU")
async def _scatter_existing(ctx, handle, tensor, indices):
    tl = _list(handle)
    _check_dtype(tl, ctx.attrs["element_dtype"])
    return handle_value(_scatter(tl, tensor, indices))


TensorListScatterV2 = _register(
    "TensorListScatterV2",
    ["tensor: element_dtype", "indices: int32", "element_shape: shape_type",
     "num_elements: int32"],  # fmt: skip
    ["output_handle: variant"],
    {**_ELEM, **_SHAPE_T},
    _handle_shape,
)


@TensorListScatterV2.kernel("CPU")
async def _scatter_v2(ctx, tensor, indices, element_shape, num_elements):
    t = np.asarray(tensor)
    shape = _partial_shape(element_shape)
    row = list(t.shape[1:]) if t.ndim else None
    if row is not None and shape is not None and not _fits(shape, np.empty(row)):
        raise _invalid(f"Specified a list with shape {_show(shape)} from a tensor with shape "
                       f"{_show(row)}")  # fmt: skip
    n = int(num_elements)
    tl = TensorList(t.dtype, shape, (None,) * max(n, 0))
    return handle_value(_scatter(tl, t, indices))

