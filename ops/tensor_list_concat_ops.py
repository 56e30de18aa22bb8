"""TensorList ops that join and cut lists (TF's `list_ops`): TensorListConcat(V2) and
TensorListSplit (a list of row blocks to and from one tensor), TensorListScatter (V1),
TensorListConcatLists and TensorListPushBackBatch (batches of lists, a `variant` vector).

Lists are ops/tensor_list_ops.py's immutable `TensorList` values; every op returns new
lists.  Concat(V2), Split and Scatter have TF's gradients (list_ops.py): a concat's
gradient is the incoming tensor split by the lengths, a split's the incoming list
concatenated, a scatter's the incoming list gathered at the indices; TF marks
ConcatLists and PushBackBatch not differentiable.  Errors are TF 2.21's: class and
message, build-time shape errors as `ValueError`.  TF also checks a list's element dtype
and shape at build time from the handle's recorded data; asyncflow does not record it,
so those mismatches raise at run time (InvalidArgumentError).
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops
from asyncflow.ops import tensor_list_ops as tl_ops
from asyncflow.ops.data_flow_stack_ops import handle_value
from asyncflow.registry import ANY, INDEX, NotDifferentiable, register_op

__all__: list[str] = []

_invalid = tl_ops._invalid
_list = tl_ops._list
_merge = tl_ops._merge
_show = tl_ops._show
TensorList = tl_ops.TensorList


def _compatible(shape, dims) -> bool:
    """Whether a partial shape (None: unknown rank) admits the dims `dims`."""
    if shape is None:
        return True
    return len(shape) == len(dims) and all(d is None or d == e for d, e in zip(shape, dims))


def _dt_string(dt: np.dtype) -> str:
    """TF's DataTypeString of an element dtype ("float" for float32)."""
    name = tl_ops._type_name(dt)
    return {"float32": "float", "float64": "double", "float16": "half"}.get(name, name)


def _register(name, inputs, outputs, attrs, shape_fn, differentiable=False):
    op_def = register_op(name, inputs=inputs, outputs=outputs, attrs=attrs, shape_fn=shape_fn)
    if not differentiable:
        NotDifferentiable(name)
    return op_def


def _at_least(shape: tensor_shape.TensorShape, rank: int) -> None:
    if shape.ndims is not None and shape.ndims < rank:
        raise ValueError(f"Shape must be at least rank {rank} but is rank {shape.ndims}")


def _rank(shape: tensor_shape.TensorShape, rank: int) -> None:
    if shape.ndims is not None and shape.ndims != rank:
        raise ValueError(f"Shape must be rank {rank} but is rank {shape.ndims}")


# -- TensorListConcat / TensorListConcatV2 ------------------------------------------------


def _concat_shape(element_shape: tensor_shape.TensorShape):
    if element_shape.ndims is None or element_shape.ndims == 0:
        return tensor_shape.unknown_shape()
    return tensor_shape.TensorShape([None]).concatenate(element_shape[1:])


_LENGTHS = tensor_shape.TensorShape([None])

TensorListConcat = _register(
    "TensorListConcat",
    ["input_handle: variant"],
    ["tensor: element_dtype", "lengths: int64"],
    {"element_dtype": ANY, "element_shape": tensor_shape.unknown_shape()},
    lambda op: [_concat_shape(tensor_shape.as_shape(op._attr("element_shape"))), _LENGTHS],
    differentiable=True,
)

TensorListConcatV2 = _register(
    "TensorListConcatV2",
    ["input_handle: variant", "element_shape: shape_type", "leading_dims: int64"],
    ["tensor: element_dtype", "lengths: int64"],
    {"element_dtype": ANY, "shape_type": INDEX},
    lambda op: [_concat_shape(tl_ops._shape_value(op.inputs[1])), _LENGTHS],
    differentiable=True,
)


def _concat(tl, element_shape, leading) -> tuple[np.ndarray, np.ndarray]:
    """TF's TensorListConcat: the items joined on their first axis; an item not set is
    `leading[i]` rows of zeros, which needs the trailing dims known."""
    shape = _merge(element_shape, tl.shape)
    if shape is not None and len(shape) == 0:
        raise _invalid("Concat requires elements to be at least vectors, found scalars instead.")
    rest = None if shape is None else shape[1:]
    known = rest is not None and all(d is not None for d in rest)
    if not tl.items and not known:
        raise _invalid(
            "All except the first dimension must be fully defined when concating an empty "
            f"tensor list. element_shape: {_show(shape)}"
        )
    if not known:  # the first set item tells the trailing dims
        for i, v in enumerate(tl.items):
            if v is not None:
                if v.ndim < 1:
                    raise _invalid(
                        f"Concat saw a scalar shape at index {i} but requires at least vectors."
                    )
                rest = _merge(rest, list(v.shape[1:]))
                break
    blocks, lengths = [], []
    for i, v in enumerate(tl.items):
        if v is None:
            v = tl_ops._zeros(tl, [_leading(shape, leading, i), *_trailing(rest)], "")
        elif v.ndim < 1:
            raise _invalid(
                f"Concat saw a scalar shape at index {i} but requires at least vectors."
            )
        else:
            rest = _merge(rest, list(v.shape[1:]))
        blocks.append(v)
        lengths.append(v.shape[0])
    if not blocks:
        out = np.zeros([0, *rest], dtype=tl.dtype)
    else:
        out = np.concatenate(blocks).astype(tl.dtype, copy=False)
    return out, np.array(lengths, np.int64)


def _leading(shape, leading, i: int) -> int:
    """An unset item's row count: leading_dims[i], else a fully known element_shape's."""
    if i < len(leading):
        return int(leading[i])
    if shape is not None and all(d is not None for d in shape):
        return shape[0]
    raise _invalid(
        f"List contains uninitialized tensor at index {i} but leading_dims has only "
        f"{len(leading)} elements."
    )


def _trailing(rest) -> list:
    if rest is None or any(d is None for d in rest):
        raise _invalid(
            "Trying to concat list with only uninitialized tensors but "
            f"element_shape_except_first_dim is not fully defined: {_show(rest)}"
        )
    return rest


@TensorListConcat.kernel("CPU")
async def _concat_v1(ctx, handle):
    tl = _list(handle)
    tl_ops._check_dtype(tl, ctx.attrs["element_dtype"])
    shape = tensor_shape.as_shape(ctx.attrs["element_shape"])
    given = None if shape.ndims is None else [d for d in shape.as_list()]
    return _concat(tl, given, ())


@TensorListConcatV2.kernel("CPU")
async def _concat_v2(ctx, handle, element_shape, leading_dims):
    tl = _list(handle)
    tl_ops._check_dtype(tl, ctx.attrs["element_dtype"])
    leading = np.asarray(leading_dims).reshape(-1)
    return _concat(tl, tl_ops._partial_shape(element_shape), leading)


# -- TensorListSplit ----------------------------------------------------------------------


def _static_merge(a: tensor_shape.TensorShape, b: tensor_shape.TensorShape):
    """TF's shape-inference Merge, with its messages."""
    if a.ndims is None:
        return b
    if b.ndims is None:
        return a
    if a.ndims != b.ndims:
        raise ValueError(f"Shapes must be equal rank, but are {a.ndims} and {b.ndims}")
    for i, (x, y) in enumerate(zip(a.as_list(), b.as_list())):
        if x is not None and y is not None and x != y:
            raise ValueError(
                f"Dimension {i} in both shapes must be equal, but are {x} and {y}. Shapes are "
                f"{_show(a.as_list())} and {_show(b.as_list())}."
            )
    return a.merge_with(b)


def _split_shape(op):
    _at_least(op.inputs[0].shape, 1)
    given = tl_ops._shape_value(op.inputs[1])
    if given.ndims is not None and op.inputs[0].shape.ndims is not None:
        tail = tensor_shape.TensorShape([None]).concatenate(op.inputs[0].shape[1:])
        if given.ndims == 0:
            raise ValueError(f"Shapes must be equal rank, but are {tail.ndims} and 0")
        _static_merge(tail, tensor_shape.TensorShape([None]).concatenate(given[1:]))
    return [tl_ops._HANDLE]


TensorListSplit = _register(
    "TensorListSplit",
    ["tensor: element_dtype", "element_shape: shape_type", "lengths: int64"],
    ["output_handle: variant"],
    {"element_dtype": ANY, "shape_type": INDEX},
    _split_shape,
    differentiable=True,
)


@TensorListSplit.kernel("CPU")
async def _split(ctx, tensor, element_shape, lengths):
    t = np.asarray(tensor)
    shape = tl_ops._partial_shape(element_shape)
    if shape is not None and len(shape) < 1:
        raise _invalid(
            f"TensorListSplit requires element_shape to be at least of rank 1, but saw: "
            f"{_show(shape)}"
        )
    if t.ndim < 1:
        raise _invalid(f"Tensor must be at least a vector, but saw shape: {list(t.shape)}")
    if shape is not None and not _compatible(shape[1:], t.shape[1:]):
        raise _invalid(
            f"tensor shape {list(t.shape[1:])} is not compatible with element_shape "
            f"{_show(shape[1:])}"
        )
    items, start = [], 0
    for n in (int(v) for v in np.asarray(lengths).reshape(-1)):
        if n < 0:
            raise _invalid(f"Invalid value in lengths: {n}")
        if start + n > t.shape[0]:
            raise _invalid(
                f"Attempting to slice [{start}, {start + n}] from tensor with length {t.shape[0]}"
            )
        items.append(tl_ops._own(t[start : start + n], t.dtype))
        start += n
    if start != t.shape[0]:
        raise _invalid(
            f"Unused values in tensor. Length of tensor: {t.shape[0]} Values used: {start}"
        )
    return handle_value(TensorList(t.dtype, shape, items))


# -- TensorListScatter (V1: the list as long as the largest index) -------------------------


TensorListScatter = _register(
    "TensorListScatter",
    ["tensor: element_dtype", "indices: int32", "element_shape: shape_type"],
    ["output_handle: variant"],
    {"element_dtype": ANY, "shape_type": INDEX},
    lambda op: [tl_ops._HANDLE],
    differentiable=True,
)


@TensorListScatter.kernel("CPU")
async def _scatter_v1(ctx, tensor, indices, element_shape):
    t = np.asarray(tensor)
    shape = tl_ops._partial_shape(element_shape)
    row = list(t.shape[1:]) if t.ndim else None
    if row is not None and not _compatible(shape, row):
        raise _invalid(f"Specified a list with shape {_show(shape)} from a tensor with shape "
                       f"{_show(row)}")  # fmt: skip
    idx = np.asarray(indices).reshape(-1)
    n = int(idx.max()) + 1 if idx.size else 0
    return handle_value(tl_ops._scatter(TensorList(t.dtype, shape, (None,) * n), t, idx))


# -- batches of lists: TensorListConcatLists, TensorListPushBackBatch ----------------------


def _concat_lists_shape(op):
    a, b = op.inputs[0].shape, op.inputs[1].shape
    return [_static_merge(a, b)]


TensorListConcatLists = _register(
    "TensorListConcatLists",
    ["input_a: variant", "input_b: variant"],
    ["output: variant"],
    {"element_dtype": ANY},
    _concat_lists_shape,
)


def _concat_pair(a, b, dt, pos) -> TensorList:
    a, b = _list(a), _list(b)
    want = tl_ops._np_dtype(dt)
    for which, x in (("a", a), ("b", b)):
        if x.dtype != want:
            raise _invalid(
                f"input_{which}[{pos}].dtype != element_dtype.  Saw: {_dt_string(x.dtype)} vs. "
                f"{_dt_string(want)}"
            )
    if a.shape != b.shape:
        raise _invalid(
            f"input_a and input_b TensorList element shapes are not identical at index {pos}.  "
            f"Saw {_show(a.shape)} vs. {_show(b.shape)}"
        )
    return TensorList(a.dtype, a.shape, a.items + b.items, a.max)


@TensorListConcatLists.kernel("CPU")
async def _concat_lists(ctx, input_a, input_b):
    a, b = np.asarray(input_a), np.asarray(input_b)
    if a.shape != b.shape:
        raise _invalid(
            f"input_a and input_b must have the same shape, saw {list(a.shape)} and "
            f"{list(b.shape)}"
        )
    out = np.empty(a.shape, dtype=object)
    dt = ctx.attrs["element_dtype"]
    for k, pos in enumerate(np.ndindex(a.shape)):
        out[pos] = _concat_pair(a[pos], b[pos], dt, k)
    return out


def _push_back_batch_shape(op):
    handles, t = op.inputs[0].shape, op.inputs[1].shape
    _rank(handles, 1)
    _at_least(t, 1)
    h, r = handles[0].value if handles.ndims else None, t[0].value if t.ndims else None
    if h is not None and r is not None and h != r:
        raise ValueError(f"Dimensions must be equal, but are {r} and {h}")
    return [handles]


TensorListPushBackBatch = _register(
    "TensorListPushBackBatch",
    ["input_handles: variant", "tensor: element_dtype"],
    ["output_handles: variant"],
    {"element_dtype": ANY},
    _push_back_batch_shape,
)


@TensorListPushBackBatch.kernel("CPU")
async def _push_back_batch(ctx, input_handles, tensor):
    handles, t = np.asarray(input_handles), np.asarray(tensor)
    if handles.ndim != 1:
        raise _invalid(f"Expected input_handles to be a vector, but saw shape: "
                       f"{list(handles.shape)}")  # fmt: skip
    if t.ndim < 1 or t.shape[0] != handles.shape[0]:
        raise _invalid(
            f"Expected tensor.shape[0] == input_handles.size, but saw "
            f"{t.shape[0] if t.ndim else 0} vs. {handles.shape[0]}"
        )
    dt = ctx.attrs["element_dtype"]
    out = np.empty(handles.shape, dtype=object)
    for b in range(handles.shape[0]):
        tl = _list(handles[b])
        want = tl_ops._np_dtype(dt)
        if tl.dtype != want:
            raise _invalid(
                f"Invalid data type at index {b} Requested: {_dt_string(want)} saw: "
                f"{_dt_string(tl.dtype)}"
            )
        row = t[b]
        if not tl_ops._fits(tl.shape, row):
            raise _invalid(
                f"Tried to append a tensor with incompatible shape to a list at index {b}. Op "
                f"element shape: {_show(list(row.shape))} list shape: {_show(tl.shape)}"
            )
        # (TF's batch push does not check max_num_elements; neither does this one)
        out[b] = tl.replace((*tl.items, tl_ops._own(row, tl.dtype)))
    return out


# -- gradients (TF's list_ops.py) ---------------------------------------------------------------


def _element_shape_int64(handle):
    op = ops.apply_op("TensorListElementShape", [handle], {"shape_type": dtypes.int64})
    return op.outputs[0]


@TensorListConcat.gradient
def _concat_grad(op, dtensor, _dlengths):
    shape = _element_shape_int64(op.inputs[0])
    return ops.apply_op(
        "TensorListSplit", [dtensor, shape, op.outputs[1]],
        {"element_dtype": dtensor.dtype, "shape_type": dtypes.int64},
    ).outputs[0]  # fmt: skip


@TensorListConcatV2.gradient
def _concat_v2_grad(op, dtensor, dlengths):
    return _concat_grad(op, dtensor, dlengths), None, None


def _row_shape(t, leading=None):
    """The shape of `t` less its first dimension (after `leading`, when given)."""
    rest = array_ops.slice(array_ops.shape(t), [1], [-1])
    return rest if leading is None else array_ops.concat([[leading], rest], 0)


@TensorListSplit.gradient
def _split_grad(op, dlist):
    tensor, _, lengths = op.inputs
    dt = tensor.dtype
    out = ops.apply_op(
        "TensorListConcatV2", [dlist, _row_shape(tensor, -1), lengths],
        {"element_dtype": dt, "shape_type": dtypes.int32},
    ).outputs[0]  # fmt: skip
    return out, None, None


@TensorListScatter.gradient
def _scatter_grad(op, dlist):
    tensor, indices, _ = op.inputs
    out = ops.apply_op(
        "TensorListGather", [dlist, indices, _row_shape(tensor)], {"element_dtype": tensor.dtype}
    ).outputs[0]
    return out, None, None
