"""Array ops: constants, placeholders, identity, shapes, creation, reshaping, autopacking.

Slicing and indexing (Slice, StridedSlice, `Tensor.__getitem__`, GatherV2, ReverseV2,
Split, Unpack, OneHot, Where/Select) live in `slicing_ops`; joining, tiling and padding
(ConcatV2, Pack, Tile, Pad/PadV2/MirrorPad) in `manip_ops`.  Both are imported here,
which registers their ops, and re-exported, so that `from asyncflow.ops.array_ops import *`
gives the whole family.

Shape functions follow TF's C++ shape inference (array_ops.cc) and read build-time
values through `ops.constant_value` / `ops.constant_shape`; the constant folders
registered here (Const, Identity, Shape, Size, Rank, Fill, Reshape) and in `manip_ops`
(ConcatV2, Pack) are what make those values visible.  Builders follow TF1's python
layer, including its shortcuts (`tf.shape` of a fully known shape is a Const, small
`tf.zeros` are Consts).
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, graph_io, tensor_shape
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.dynamic_ragged_shape import DynamicRaggedShape
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops import manip_ops, slicing_ops
from asyncflow.ops.manip_ops import *  # noqa: F403 - re-exported as one family
from asyncflow.ops.manip_ops import _FOLD_LIMIT, _shape_str
from asyncflow.ops.slicing_ops import *  # noqa: F403 - re-exported as one family
from asyncflow.ops.slicing_ops import _np_dtype, _outs, apply, cast, op_scope
from asyncflow.registry import ANY, INDEX, REQUIRED, NotDifferentiable, TypeConstraint, register_op

__all__ = [
    "newaxis",
    "constant",
    "placeholder",
    "placeholder_with_default",
    "identity",
    "identity_n",
    "zeros",
    "ones",
    "zeros_like",
    "ones_like",
    "fill",
    "reshape",
    "transpose",
    "expand_dims",
    "squeeze",
    "shape",
    "shape_n",
    "size",
    "rank",
    *manip_ops.__all__,
    *slicing_ops.__all__,
]

newaxis = None


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _num_elements(dims) -> int:
    """Number of elements of a shape given as a small list or 1-D array (math.prod is
    ~10x cheaper than np.prod on these)."""
    return math.prod(int(d) for d in np.asarray(dims).reshape(-1))


# -- Const ---------------------------------------------------------------------------


def _const_shape(op):
    return [tensor_shape.TensorShape(op._attr("value").shape)]


Const = register_op(
    "Const", outputs=["output: dtype"], attrs={"value": REQUIRED, "dtype": ANY},
    shape_fn=_const_shape,
)  # fmt: skip


# The value is a host attr: on a device with memory of its own the partitioner copies
# it over where a device kernel consumes it.
@Const.kernel(host_memory=("output",))
async def _const(ctx):
    return ctx.attrs["value"]


ops.register_constant_folder("Const", lambda t: t.op._attr("value"))


def constant(value, dtype=None, shape=None, name="Const", verify_shape=False):
    """`tf.constant`: a Const op holding `value` (TF's Python conversion rules).

    With `shape`, a value of fewer elements than the shape is filled out with its last
    element (TF1's graph constant), one of more elements raises ValueError.

    Raises:
      TypeError: a value the dtype cannot hold, or another shape under `verify_shape`.
      ValueError: more elements than `shape` has.
    """
    arr = dtypes.convert_to_numpy(value, dtype)
    if shape is not None:
        shape = tuple(int(d) for d in tensor_shape.as_shape(shape).as_list())
        if arr.shape != shape:
            if verify_shape:
                raise TypeError(f"Expected Tensor's shape: {shape}, but got {arr.shape}.")
            size = int(np.prod(shape))
            if arr.size == size:
                arr = arr.reshape(shape)
            elif arr.size > 1 and arr.size > size:
                raise ValueError(
                    f"Too many elements provided. Takes at most {size}, but got {arr.size}."
                )
            else:  # TF1's graph constant: the last value fills the rest (zeros if none)
                return _const(graph_io.fill_values(arr, shape), dtype, name)
    if arr.size > 1 and not any(arr.strides):
        # A caller's broadcast view: TF writes all its values (graph_io.tensor_proto
        # writes one for a stride-0 array, as fill_values makes).
        arr = np.ascontiguousarray(arr)
    if (
        isinstance(value, np.ndarray)
        and arr.flags.writeable
        and (arr is value or np.may_share_memory(arr, value))
    ):
        # TF copies the value into the graph: the caller's array stays writable, and a
        # later write to it does not change the constant.
        arr = arr.copy()
    arr.flags.writeable = False  # a Const's value is shared by every step
    return _const(arr, dtype, name)


def _const(arr, dtype, name) -> ops.Tensor:
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.as_dtype(arr.dtype)
    return apply("Const", [], {"value": arr, "dtype": dt}, name=name).outputs[0]


ops.register_overload("constant", constant)

# -- Placeholder -----------------------------------------------------------------------


def _placeholder_shape(op):
    return [op._attr("shape")]


Placeholder = register_op(
    "Placeholder", outputs=["output: dtype"],
    attrs={"dtype": ANY, "shape": tensor_shape.unknown_shape()}, shape_fn=_placeholder_shape,
)  # fmt: skip


@Placeholder.kernel()
async def _placeholder(ctx):
    shape = ctx.attrs["shape"]
    shape_txt = f" and shape {shape.as_list()}" if shape.ndims is not None else ""
    raise errors.InvalidArgumentError(
        None, None,
        f"You must feed a value for placeholder tensor '{ctx.op.name}' with dtype "
        f"{ctx.attrs['dtype'].name}{shape_txt}",
    )  # fmt: skip


def placeholder(dtype, shape=None, name=None):
    """`tf.placeholder`: a tensor that must be fed (InvalidArgumentError otherwise)."""
    shape = tensor_shape.as_shape(shape) if shape is not None else tensor_shape.unknown_shape()
    attrs = {"dtype": dtypes.as_dtype(dtype), "shape": shape}
    return apply("Placeholder", [], attrs, name=name).outputs[0]


PlaceholderWithDefault = register_op(
    "PlaceholderWithDefault", inputs=["input: dtype"], outputs=["output: dtype"],
    attrs={"dtype": ANY, "shape": REQUIRED}, shape_fn=_placeholder_shape,
)  # fmt: skip


@PlaceholderWithDefault.kernel()
async def _placeholder_with_default(ctx, x):
    return x


def placeholder_with_default(input, shape, name=None):  # noqa: A002 - TF's name
    """`tf.placeholder_with_default`: `input` unless fed.

    Raises:
      ValueError: `input`'s shape is incompatible with `shape`.
    """
    shape = tensor_shape.as_shape(shape)
    with op_scope(name, "PlaceholderWithDefault", [input]) as scope:
        x = ops.convert_to_tensor(input, name="input")  # "PlaceholderWithDefault/input"
        if not x.shape.is_compatible_with(shape):
            raise ValueError(f"Shapes {x.shape} and {shape} are incompatible")
    return apply("PlaceholderWithDefault", [x], {"shape": shape}, name=scope).outputs[0]


# -- Identity, IdentityN -------------------------------------------------------------------

Identity = register_op(
    "Identity", inputs=["input: T"], outputs=["output: T"], attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape],
)  # fmt: skip


@Identity.kernel()
async def _identity(ctx, x):
    return x


ops.register_constant_folder("Identity", lambda t: ops.constant_value(t.op.inputs[0]))


@_ragged.dispatch_unary
def identity(input, name=None):  # noqa: A002 - TF's name
    """Return a tensor with the same value as `input` (an ExtensionType value or
    Optional: the same of each of its tensors, as TF's)."""
    if hasattr(input, "_cf_parts"):
        return input._cf_rebuild([identity(p, name=name) for p in input._cf_parts()])
    return apply("Identity", [input], name=name).outputs[0]


IdentityN = register_op(
    "IdentityN", inputs=["input: T"], outputs=["output: T"],
    attrs={"T": TypeConstraint(None, is_list=True)},
    shape_fn=lambda op: [t.shape for t in op.inputs],
)  # fmt: skip


@IdentityN.kernel()
async def _identity_n(ctx, *xs):
    return _outs(xs)


def identity_n(input, name=None):  # noqa: A002 - TF's name
    """`tf.identity_n`: a list of tensors with the same values as `input` (a list)."""
    return list(apply("IdentityN", [list(input)], name=name).outputs)


# -- Fill, zeros, ones, zeros_like, ones_like ---------------------------------------------


def _fill_shape(op):
    dims_t, value_t = op.inputs
    dims_t.shape.with_rank(1)
    value_t.shape.with_rank(0)
    dims = ops.constant_value(dims_t)
    if dims is not None and (dims < 0).any():
        raise ValueError("Fill dimensions must be >= 0")
    return [ops.constant_shape(dims_t)]


Fill = register_op(
    "Fill", inputs=["dims: index_type", "value: T"], outputs=["output: T"],
    attrs={"T": ANY, "index_type": INDEX}, shape_fn=_fill_shape,
)  # fmt: skip


def _check_fill_args(dims, value, xp=np):
    dims, value = np.asarray(dims), xp.asarray(value)
    if dims.ndim != 1:
        raise _invalid(f"dims must be a vector, got shape {_shape_str(dims.shape)}")
    if value.ndim != 0:
        raise _invalid(f"value must be a scalar, got shape {_shape_str(value.shape)}")
    for d in dims.tolist():
        if d < 0:
            raise _invalid(f"Dimension {d} must be >= 0")
    return tuple(dims.tolist()), value


@Fill.kernel(host_memory=("dims",))
async def _fill(ctx, dims, value):
    dims, value = _check_fill_args(dims, value, ctx.xp)
    dtype = ctx.attrs["T"]
    ctx.device.check_alloc(_num_elements(dims), dtype)
    return await ctx.device.compute(ctx.xp.full, dims, value, _np_dtype(dtype))


def _fold_fill(t):
    dims, value = (ops.constant_value(i) for i in t.op.inputs)
    if dims is None or value is None or np.prod(dims) > _FOLD_LIMIT:
        return None
    dims, value = _check_fill_args(dims, value)
    return np.full(dims, value, _np_dtype(t.dtype))


ops.register_constant_folder("Fill", _fold_fill)


def _no_layout(layout, what):
    if layout is not None:
        raise NotImplementedError(
            f"tf.{what}(layout=...): DTensor layouts are not supported by asyncflow; place "
            "tensors with tf.device instead."
        )


@_dispatch.add_dispatch_support
def fill(dims, value, name=None, layout=None):
    """`tf.fill`: a tensor of shape `dims` with every element `value` (`layout`, a
    DTensor layout, is refused).

    Raises:
      InvalidArgumentError: at run time for a non-vector `dims` or negative sizes.
      ResourceExhaustedError: when the result would not fit in memory.
    """
    _no_layout(layout, "fill")
    return apply("Fill", [dims, value], name=name).outputs[0]


def _zero_of(dtype):
    return False if dtype == dtypes.bool else "" if dtype == dtypes.string else 0


def _filled(value, shape, dtype, name, default_name):
    """TF1's zeros/ones: a Const when small and static, else Fill."""
    dtype = dtypes.as_dtype(dtype)
    with op_scope(name, default_name, [shape]) as scope:
        if not isinstance(shape, ops.Tensor):
            try:
                static = tensor_shape.as_shape(shape).as_list()
                if int(np.prod(static)) < 1000:
                    return constant(value, dtype=dtype, shape=static, name=scope)
                shape = constant(static, dtype=_index_dtype_for(static), name="shape_as_tensor")
            except (TypeError, ValueError):
                shape = ops.convert_to_tensor(shape, dtype=dtypes.int32)
        if shape.shape.ndims == 0:
            shape = reshape(shape, [-1])
        return fill(shape, constant(value, dtype=dtype), name=scope)


def _index_dtype_for(values) -> dtypes.DType:
    return dtypes.int64 if any(v > np.iinfo(np.int32).max for v in values) else dtypes.int32


@_dispatch.add_dispatch_support
def zeros(shape, dtype=dtypes.float32, name=None, layout=None):
    """`tf.zeros`: all elements zero (False, b"" for bool/string)."""
    _no_layout(layout, "zeros")
    if isinstance(shape, DynamicRaggedShape):
        return _ragged_filled(_zero_of(dtypes.as_dtype(dtype)), shape, dtype, name, "zeros")
    return _filled(_zero_of(dtypes.as_dtype(dtype)), shape, dtype, name, "zeros")


@_dispatch.add_dispatch_support
def ones(shape, dtype=dtypes.float32, name=None, layout=None):
    """`tf.ones`: all elements one (True for bool)."""
    _no_layout(layout, "ones")
    dtype = dtypes.as_dtype(dtype)
    if dtype == dtypes.string:
        raise TypeError("Expected string, got 1 of type 'int' instead.")
    if isinstance(shape, DynamicRaggedShape):
        return _ragged_filled(True if dtype == dtypes.bool else 1, shape, dtype, name, "ones")
    return _filled(True if dtype == dtypes.bool else 1, shape, dtype, name, "ones")


def _ragged_filled(value, shape, dtype, name, default_name):
    """A value of a DynamicRaggedShape `shape` filled with `value` (tf.ones / tf.zeros
    given one, as TF's)."""
    with ops.name_scope(name, default_name, []):
        return manip_ops.broadcast_to(ops.convert_to_tensor(value, dtype=dtype), shape)


ZerosLike = register_op(
    "ZerosLike", inputs=["x: T"], outputs=["y: T"], attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape],
)  # fmt: skip
OnesLike = register_op(
    "OnesLike", inputs=["x: T"], outputs=["y: T"], attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape],
)  # fmt: skip


# ZerosLike of a variant (a TensorList in TF 2.x's loop gradients): the list op module
# (ops/tensor_list_ops.py) installs how.
VARIANT_ZEROS_LIKE: list = [None]


@ZerosLike.kernel()
async def _zeros_like(ctx, x):
    if ctx.attrs["T"] == dtypes.variant and VARIANT_ZEROS_LIKE[0] is not None:
        return VARIANT_ZEROS_LIKE[0](x)
    x = ctx.xp.asarray(x)
    if x.dtype == object:  # strings live in host memory only
        return np.full(x.shape, b"", dtype=object)
    return ctx.xp.zeros_like(x)


@OnesLike.kernel()
async def _ones_like(ctx, x):
    x = ctx.xp.asarray(x)
    if x.dtype == object:
        raise _invalid("OnesLike is not defined for strings")
    return ctx.xp.ones_like(x)


@_ragged.dispatch_unary
def zeros_like(tensor, dtype=None, name=None, optimize=True):
    """`tf.zeros_like`: zeros shaped like `tensor` (with `dtype` if given)."""
    with op_scope(name, "zeros_like", [tensor]) as scope:
        tensor = ops.convert_to_tensor(tensor, name="tensor")
        if optimize and tensor.shape.is_fully_defined():
            return zeros(tensor.shape.as_list(), dtype=dtype or tensor.dtype, name=scope)
        if dtype is not None and dtypes.as_dtype(dtype) != tensor.dtype:
            return zeros(shape(tensor, optimize=optimize), dtype=dtype, name=scope)
        return apply("ZerosLike", [tensor], name=scope).outputs[0]


@_ragged.dispatch_unary
def ones_like(tensor, dtype=None, name=None, optimize=True):
    """`tf.ones_like`: ones shaped like `tensor` (with `dtype` if given)."""
    with op_scope(name, "ones_like", [tensor]) as scope:
        tensor = ops.convert_to_tensor(tensor, name="tensor")
        if optimize and tensor.shape.is_fully_defined():
            # TF's shape_internal with no out_type names the Const "Shape/shape_as_tensor".
            with op_scope(None, "Shape", [tensor]):
                dims = tensor.shape.as_list()
                ones_shape = constant(dims, dtypes.int32, name="shape_as_tensor")
        else:
            ones_shape = shape(tensor, optimize=optimize)
        ret = ones(ones_shape, dtype=dtype or tensor.dtype, name=scope)
        ret.set_shape(tensor.shape)
        return ret


# -- Shape, ShapeN, Size, Rank -------------------------------------------------------------


def _shape_shape(op):
    return [[t.shape.ndims] for t in op.inputs]


Shape = register_op(
    "Shape", inputs=["input: T"], outputs=["output: out_type"],
    attrs={"T": ANY, "out_type": INDEX}, shape_fn=_shape_shape,
)  # fmt: skip
ShapeN = register_op(
    "ShapeN", inputs=["input: N * T"], outputs=["output: N * out_type"],
    attrs={"N": REQUIRED, "T": ANY, "out_type": INDEX}, shape_fn=_shape_shape,
)  # fmt: skip
Size = register_op(
    "Size", inputs=["input: T"], outputs=["output: out_type"],
    attrs={"T": ANY, "out_type": INDEX}, shape_fn=lambda op: [[]],
)  # fmt: skip
Rank = register_op(
    "Rank", inputs=["input: T"], outputs=["output: int32"], attrs={"T": ANY},
    shape_fn=lambda op: [[]],
)  # fmt: skip


def _shape_of(x) -> tuple:
    """The shape of a kernel input: metadata, on the host wherever the array lives."""
    try:
        return x.shape
    except AttributeError:  # a Python scalar
        return np.shape(x)


# Shape, Size and Rank read only metadata; their results live in host memory (TF's
# HostMemory("output")), where the shape arguments of other kernels are read.
@Shape.kernel(host_memory=("output",))
async def _shape_kernel(ctx, x):
    return np.array(_shape_of(x), dtype=_np_dtype(ctx.attrs["out_type"]))


@ShapeN.kernel(host_memory=("output",))
async def _shape_n(ctx, *xs):
    dt = _np_dtype(ctx.attrs["out_type"])
    return _outs(np.array(_shape_of(x), dtype=dt) for x in xs)


@Size.kernel(host_memory=("output",))
async def _size(ctx, x):
    return np.asarray(math.prod(_shape_of(x)), dtype=_np_dtype(ctx.attrs["out_type"]))


@Rank.kernel(host_memory=("output",))
async def _rank(ctx, x):
    return np.int32(len(_shape_of(x)))


def _fold_shape(t):
    s = t.op.inputs[t.value_index].shape
    return np.array(s.as_list(), _np_dtype(t.dtype)) if s.is_fully_defined() else None


def _fold_size(t):
    n = t.op.inputs[0].shape.num_elements()
    return None if n is None else np.asarray(n, _np_dtype(t.dtype))


def _fold_rank(t):
    r = t.op.inputs[0].shape.ndims
    return None if r is None else np.int32(r)


ops.register_constant_folder("Shape", _fold_shape)
ops.register_constant_folder("ShapeN", _fold_shape)
ops.register_constant_folder("Size", _fold_size)
ops.register_constant_folder("Rank", _fold_rank)
ops.register_constant_folder("__partial_shape__:Shape", lambda t: t.op.inputs[0].shape or None)
ops.register_constant_folder(
    "__partial_shape__:ShapeN", lambda t: t.op.inputs[t.value_index].shape or None
)


@_dispatch.add_dispatch_support
def shape(input, name=None, out_type=dtypes.int32, optimize=True):  # noqa: A002 - TF's name
    """`tf.shape`: the dynamic shape of `input` (a Const when statically known, as TF1);
    of a RaggedTensor, its DynamicRaggedShape in `out_type` (TF's dispatch)."""
    if _ragged.is_ragged(input):
        with ops.name_scope(name, "RaggedShape", []):
            return DynamicRaggedShape.from_tensor(input, dtype=out_type)
    with op_scope(name, "Shape", [input]) as scope:
        input = ops.convert_to_tensor(input)  # noqa: A001
        out_type = dtypes.as_dtype(out_type)
        if optimize and input.shape.is_fully_defined():
            return constant(input.shape.as_list(), out_type, name=scope)
        return apply("Shape", [input], {"out_type": out_type}, name=scope).outputs[0]


def shape_n(input, out_type=dtypes.int32, name=None):  # noqa: A002 - TF's name
    """`tf.shape_n`: the shapes of a list of tensors."""
    attrs = {"out_type": dtypes.as_dtype(out_type)}
    return list(apply("ShapeN", [list(input)], attrs, name=name).outputs)


@_dispatch.add_dispatch_support
def size(input, name=None, out_type=dtypes.int32, optimize=True):  # noqa: A002 - TF's name
    """`tf.size`: the number of elements of `input`."""
    if _ragged.is_ragged(input):  # (its values: the elements of every row)
        return size(input.flat_values, name, out_type, optimize)
    with op_scope(name, "Size", [input]) as scope:
        input = ops.convert_to_tensor(input)  # noqa: A001
        out_type = dtypes.as_dtype(out_type)
        if optimize:
            n = input.shape.num_elements()
            if n is None and input.shape.ndims and any(d == 0 for d in input.shape.as_list()):
                n = 0
            if n is not None:
                return constant(n, out_type, name=scope)
        return apply("Size", [input], {"out_type": out_type}, name=scope).outputs[0]


@_dispatch.add_dispatch_support
def rank(input, name=None):  # noqa: A002 - TF's name
    """`tf.rank`: the number of dimensions of `input` (int32)."""
    if _ragged.is_ragged(input):
        return rank(input.flat_values, name) + input.ragged_rank
    with op_scope(name, "Rank", [input]) as scope:
        input = ops.convert_to_tensor(input)  # noqa: A001
        if input.shape.ndims is not None:
            return constant(input.shape.ndims, dtypes.int32, name=scope)
        return apply("Rank", [input], name=scope).outputs[0]


# -- Reshape -------------------------------------------------------------------------------


def _check_reshape_spec(sizes, fail):
    """The sizes vector's own rules: one -1 at most, nothing below -1."""
    neg = None
    for i, s in enumerate(sizes):
        if s == -1:
            if neg is not None:
                raise fail(f"Only one input size may be -1, not both {neg} and {i}")
            neg = i
        elif s < 0:
            raise fail(f"Size {i} must be non-negative, not {s}")
    return neg


def _reshape_shape(op):
    x, shape_t = op.inputs
    shape_t.shape.with_rank_at_most(1)
    value = ops.constant_value(shape_t)
    if value is not None:
        # Two -1s build (both dims unknown) and fail at run time, as in TF; sizes below
        # -1 are rejected now.
        for s in value.reshape(-1).tolist():
            if s < -1:
                raise ValueError(f"Invalid value in tensor used for shape: {s}")
    out = ops.constant_shape(shape_t)
    if out.ndims is None or x.shape.ndims is None:
        return [out]
    out_dims, in_dims = out.as_list(), x.shape.as_list()
    out_unknown = [i for i, d in enumerate(out_dims) if d is None]
    in_unknown = [i for i, d in enumerate(in_dims) if d is None]
    if len(out_unknown) > 1 or len(in_unknown) > 1:
        return [out]
    known_out = int(np.prod([d for d in out_dims if d is not None], dtype=np.int64))
    known_in = int(np.prod([d for d in in_dims if d is not None], dtype=np.int64))
    if not in_unknown and not out_unknown and known_in != known_out:
        raise ValueError(
            f"Cannot reshape a tensor with {known_in} elements to shape "
            f"{_shape_str(out_dims)} ({known_out} elements)"
        )
    if not in_unknown and out_unknown and known_out > 0:
        if known_in % known_out:
            raise ValueError(
                f"Dimension size must be evenly divisible by {known_out} but is {known_in}"
            )
        out_dims[out_unknown[0]] = known_in // known_out
    elif in_unknown and not out_unknown and known_in != 0 and known_out % known_in:
        raise ValueError(
            f"Dimension size must be evenly divisible by {known_in} but is {known_out}"
        )
    return [out_dims]


Reshape = register_op(
    "Reshape", inputs=["tensor: T", "shape: Tshape"], outputs=["output: T"],
    attrs={"T": ANY, "Tshape": INDEX}, shape_fn=_reshape_shape,
)  # fmt: skip


def _reshape_value(x, sizes, xp=np):
    """TF's ReshapeOp::ValidateSizes: zero sizes are left out of the -1 inference."""
    x, sizes = xp.asarray(x), np.asarray(sizes)
    if sizes.ndim > 1:
        raise _invalid(f"sizes input must be 1-D, not {_shape_str(sizes.shape)}")
    sizes = sizes.reshape(-1).tolist()
    neg = _check_reshape_spec(sizes, _invalid)
    product = math.prod(s for s in sizes if s > 0)
    if neg is not None:
        sizes_have_zero = 0 in sizes
        n_in, in_has_zero = 1, False
        for d in x.shape:
            if d > 0 or not sizes_have_zero:
                n_in *= d
            else:
                in_has_zero = True
        if not in_has_zero and n_in % product:
            raise _invalid(
                f"Input to reshape is a tensor with {n_in} values, but the requested shape "
                f"requires a multiple of {product}"
            )
        sizes[neg] = n_in // product
    n_out = math.prod(sizes)
    if n_out != x.size:
        raise _invalid(
            f"Input to reshape is a tensor with {x.size} values, but the requested shape "
            f"has {n_out}"
        )
    return x.reshape(sizes)


@Reshape.kernel(host_memory=("shape",))
async def _reshape(ctx, x, sizes):
    return _reshape_value(x, sizes, ctx.xp)


def _fold_reshape(t):
    x, sizes = (ops.constant_value(i) for i in t.op.inputs)
    return None if x is None or sizes is None else _reshape_value(x, sizes)


ops.register_constant_folder("Reshape", _fold_reshape)


@_dispatch.add_dispatch_support
def reshape(tensor, shape, name=None):
    """`tf.reshape`: the same elements in a new shape (one size may be -1).

    Raises:
      ValueError: at build time when both element counts are known and differ.
      InvalidArgumentError: at run time, "Input to reshape is a tensor with 6 values,
        but the requested shape has 4".
    """
    if _ragged.is_ragged(tensor) or isinstance(shape, DynamicRaggedShape):
        return _ragged.reshape(tensor, shape, name)
    return apply("Reshape", [tensor, shape], name=name).outputs[0]


# -- Transpose -------------------------------------------------------------------------------


def _transpose_shape(op):
    x, perm_t = op.inputs
    perm = ops.constant_value(perm_t)
    n_perm = perm_t.shape[0].value if perm_t.shape.ndims == 1 else None
    if x.shape.ndims is not None:
        rank = x.shape.ndims
    elif n_perm is not None:
        rank = n_perm
    elif perm is not None:
        rank = perm.size
    else:
        return [tensor_shape.unknown_shape()]
    if x.shape.ndims is None and rank < 2:
        return [x.shape]
    dims = x.shape.with_rank(rank).as_list()
    perm_t.shape.with_rank(1)
    if n_perm is not None and n_perm != rank:
        raise ValueError(f"Dimension must be {rank} but is {n_perm}")
    if perm is None:
        return [tensor_shape.unknown_shape(rank)]
    out = []
    for p in perm.reshape(-1).tolist():
        if not -rank <= p < rank:
            raise ValueError(f"perm dim {p} is out of range of input rank {rank}")
        out.append(dims[p])
    return [out]


Transpose = register_op(
    "Transpose", inputs=["x: T", "perm: Tperm"], outputs=["y: T"],
    attrs={"T": ANY, "Tperm": INDEX}, shape_fn=_transpose_shape,
)  # fmt: skip
ConjugateTranspose = register_op(
    "ConjugateTranspose", inputs=["x: T", "perm: Tperm"], outputs=["y: T"],
    attrs={"T": ANY, "Tperm": INDEX}, shape_fn=_transpose_shape,
)  # fmt: skip


def _check_perm(x, perm):
    perm = np.asarray(perm)
    if perm.ndim != 1:
        raise _invalid(f"perm must be a vector, not {_shape_str(perm.shape)}")
    if perm.size != x.ndim:
        raise _invalid(
            f"transpose expects a vector of size {x.ndim}. But input(1) is a vector of size "
            f"{perm.size}"
        )
    perm = perm.tolist()
    for d in perm:
        if not 0 <= d < x.ndim:
            raise _invalid(f"{d} is out of range [0 .. {x.ndim})")
    for i in range(x.ndim):
        if i not in perm:
            raise _invalid(f"{i} is missing from {{{','.join(str(p) for p in perm)}}}.")
    return perm


@Transpose.kernel(host_memory=("perm",))
async def _transpose(ctx, x, perm):
    x = ctx.xp.asarray(x)
    return ctx.xp.transpose(x, _check_perm(x, perm))


@ConjugateTranspose.kernel(host_memory=("perm",))
async def _conjugate_transpose(ctx, x, perm):
    xp = ctx.xp
    x = xp.asarray(x)
    return xp.conj(xp.transpose(x, _check_perm(x, perm)))


@_dispatch.add_dispatch_support
def transpose(a, perm=None, name="transpose", conjugate=False):
    """`tf.transpose`: permute dimensions (reversed when `perm` is None).

    Raises:
      ValueError: at build time for a known perm of the wrong size or out of range.
      InvalidArgumentError: at run time when `perm` is not a permutation of [0, rank).
    """
    with op_scope(name, "transpose", [a]) as scope:
        a = ops.convert_to_tensor(a, name="a")
        op_type = "ConjugateTranspose" if conjugate and a.dtype.is_complex else "Transpose"
        if perm is None:
            if a.shape.ndims is not None:
                perm = np.arange(a.shape.ndims - 1, -1, -1, dtype=np.int32)
            else:
                # TF: (rank - 1) - range(0, rank); needs the math family's Sub and Range.
                r = rank(a)
                one = constant(1)
                seq = apply("Range", [constant(0), r, one]).outputs[0]
                perm = apply("Sub", [apply("Sub", [r, one]).outputs[0], seq]).outputs[0]
        return apply(op_type, [a, perm], name=scope).outputs[0]


# -- ExpandDims, Squeeze -------------------------------------------------------------------


def _expand_dims_shape(op):
    x, dim_t = op.inputs
    dim = ops.constant_value(dim_t)
    if dim is not None and dim.size != 1:
        raise ValueError("'dim' input must be a tensor with a single value")
    if x.shape.ndims is None:
        return [tensor_shape.unknown_shape()]
    rank = x.shape.ndims
    if dim is None:
        return [tensor_shape.unknown_shape(rank + 1)]
    d = int(dim.reshape(-1)[0])
    if not -rank - 1 <= d <= rank:
        raise ValueError(f"dim {d} not in the interval [{-rank - 1}, {rank}].")
    if d < 0:
        d += rank + 1
    dims = x.shape.as_list()
    return [dims[:d] + [1] + dims[d:]]


ExpandDims = register_op(
    "ExpandDims", inputs=["input: T", "dim: Tdim"], outputs=["output: T"],
    attrs={"T": ANY, "Tdim": INDEX}, shape_fn=_expand_dims_shape,
)  # fmt: skip


@ExpandDims.kernel(host_memory=("dim",))
async def _expand_dims(ctx, x, dim):
    x, dim = ctx.xp.asarray(x), np.asarray(dim)
    if dim.size != 1:
        raise _invalid(f"'dim' must be a tensor with a single value, got {dim.size}")
    d = int(dim.reshape(-1)[0])
    if not -x.ndim - 1 <= d <= x.ndim:
        raise _invalid(f"Tried to expand dim index {d} for tensor with {x.ndim} dimensions.")
    return ctx.xp.expand_dims(x, d)


@_dispatch.add_dispatch_support
def expand_dims(input, axis=None, name=None, dim=None):  # noqa: A002 - TF's name
    """`tf.expand_dims`: insert a size-1 dimension at `axis` (a RaggedTensor's too).

    Raises:
      ValueError: both or neither of `axis` and `dim` given, or a known axis out of range.
      InvalidArgumentError: at run time for an axis out of range.
    """
    if _ragged.is_ragged(input):
        return _ragged.expand_dims(input, axis if dim is None else dim, name=name)
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = dim if axis is None else axis
    if axis is None:
        raise ValueError("Must specify an axis argument to tf.expand_dims()")
    return apply("ExpandDims", [input, axis], name=name).outputs[0]


def _squeeze_dims(squeeze, rank, fail):
    out = set()
    for d in squeeze:
        if not -rank <= d < rank:
            raise fail(f"Tried to squeeze dim index {d} for tensor with {rank} dimensions.")
        out.add(d % rank)
    return out


def _squeeze_shape(op):
    x = op.inputs[0]
    if x.shape.ndims is None:
        return [tensor_shape.unknown_shape()]
    squeeze = list(op._attr("squeeze_dims"))
    wanted = _squeeze_dims(squeeze, x.shape.ndims, ValueError)
    out = []
    for i, d in enumerate(x.shape.as_list()):
        match = not squeeze or i in wanted
        if d is None:
            if not squeeze:
                return [tensor_shape.unknown_shape()]
            if match:
                continue  # assume it is 1 at run time
        elif d == 1 and match:
            continue
        elif squeeze and match:
            raise ValueError(f"Can not squeeze dim[{i}], expected a dimension of 1, got {d}")
        out.append(d)
    return [out]


Squeeze = register_op(
    "Squeeze", inputs=["input: T"], outputs=["output: T"],
    attrs={"T": ANY, "squeeze_dims": []}, shape_fn=_squeeze_shape,
)  # fmt: skip


@Squeeze.kernel()
async def _squeeze(ctx, x):
    x = ctx.xp.asarray(x)
    squeeze = list(ctx.attrs["squeeze_dims"])
    if not squeeze:
        return x.reshape([d for d in x.shape if d != 1])
    wanted = _squeeze_dims(squeeze, x.ndim, _invalid)
    for i in sorted(wanted):
        if x.shape[i] != 1:
            raise _invalid(
                f"Can not squeeze dim[{i}], expected a dimension of 1, got {x.shape[i]}"
            )
    return x.reshape([d for i, d in enumerate(x.shape) if i not in wanted])


@_dispatch.add_dispatch_support
def squeeze(input, axis=None, name=None, squeeze_dims=None):  # noqa: A002 - TF's name
    """`tf.squeeze`: drop size-1 dimensions (all of them, or those in `axis`).

    Raises:
      ValueError: both `axis` and `squeeze_dims`, or squeezing a known non-1 dimension.
      InvalidArgumentError: at run time when a named dimension is not 1.
    """
    if axis is not None and squeeze_dims is not None:
        raise ValueError("Cannot specify both 'axis' and 'squeeze_dims'")
    axis = squeeze_dims if axis is None else axis
    if _ragged.is_ragged(input):
        return _ragged.squeeze(input, axis, name=name)
    if isinstance(axis, int | np.integer):
        axis = [axis]
    attrs = {"squeeze_dims": [int(a) for a in (axis or [])]}
    return apply("Squeeze", [input], attrs, name=name).outputs[0]


# -- autopacking: convert_to_tensor of a (nested) list holding Tensors -------------------


def _leaves(values):
    for v in values:
        if isinstance(v, list | tuple):
            yield from _leaves(v)
        else:
            yield v


def _autopack(values, dtype=None, name=None):
    """convert_to_tensor of a (nested) list holding Tensors: Pack them (TF's autopacking).

    Raises:
      TypeError: a Tensor whose dtype differs from the list's (the first Tensor's).
    """
    inferred = next(v.dtype for v in _leaves(values) if isinstance(v, ops.Tensor))
    if dtype is None:
        dtype = inferred
    else:
        dtype = dtypes.as_dtype(dtype)
        if dtype != inferred:
            values = _cast_nested(values, dtype)
    return _autopack_helper(values, dtype, name or "packed")


def _cast_nested(values, dtype):
    if isinstance(values, list | tuple):
        return [_cast_nested(v, dtype) for v in values]
    return cast(values, dtype) if isinstance(values, ops.Tensor) else values


def _autopack_helper(values, dtype, name):
    with op_scope(name, name, list(_leaves(values))) as scope:
        converted, must_pack = [], False
        for i, elem in enumerate(values):
            if isinstance(elem, ops.Tensor):
                if elem.dtype != dtype:
                    raise TypeError(
                        f"Cannot convert a list containing a tensor of dtype {elem.dtype} to "
                        f"{dtype} (Tensor is: {elem!r})"
                    )
                must_pack = True
            elif isinstance(elem, list | tuple):
                elem = _autopack_helper(elem, dtype, str(i))
                must_pack |= isinstance(elem, ops.Tensor)
            converted.append(elem)
        if not must_pack:
            return converted
        tensors = [
            e if isinstance(e, ops.Tensor) else constant(e, dtype=dtype, name=str(i))
            for i, e in enumerate(converted)
        ]
        return apply("Pack", [tensors], {"axis": 0}, name=scope).outputs[0]


ops.register_overload("stack", _autopack)


# -- gradients (TF's array_grad.py) ---------------------------------------------------------

for _op_type in ("Const", "Placeholder", "ZerosLike", "OnesLike", "Shape", "ShapeN", "Size",
                 "Rank"):  # fmt: skip
    NotDifferentiable(_op_type)


@Identity.gradient
def _identity_grad(op, grad):
    return [grad]


@IdentityN.gradient
def _identity_n_grad(op, *grads):
    return list(grads)


@PlaceholderWithDefault.gradient
def _placeholder_with_default_grad(op, grad):
    return [grad]


@Fill.gradient
def _fill_grad(op, grad):
    rank = grad.shape.ndims
    axes = (
        list(range(rank)) if rank is not None else _g.apply("Range", 0, _g.apply("Rank", grad), 1)
    )
    return [None, _g.reduce_sum(grad, axes)]


def _reshape_to_input(op, grad):
    """grad (dense) in the shape of op's first input."""
    return _g.reshape(ops.convert_to_tensor(grad), _g.shape(op.inputs[0]))


@Reshape.gradient
def _reshape_grad(op, grad):
    return [_reshape_to_input(op, grad), None]


@ExpandDims.gradient
def _expand_dims_grad(op, grad):
    return [_reshape_to_input(op, grad), None]


@Squeeze.gradient
def _squeeze_grad(op, grad):
    return [_reshape_to_input(op, grad)]


def _inverse_perm(perm_t):
    """The inverse permutation: a constant when perm is, else inv[perm[i]] = i at run time."""
    perm = ops.constant_value(perm_t)
    if perm is not None:
        return _g.constant(_g.invert_permutation(perm.reshape(-1).tolist()), perm_t.dtype)
    n = _g.apply("Size", perm_t, out_type=perm_t.dtype)
    positions = _g.apply("Range", _g.constant(0, perm_t.dtype), n, _g.constant(1, perm_t.dtype))
    return _g.apply("UnsortedSegmentSum", positions, perm_t, n)


@Transpose.gradient
def _transpose_grad(op, grad):
    return [_g.transpose(grad, _inverse_perm(op.inputs[1])), None]


@ConjugateTranspose.gradient
def _conjugate_transpose_grad(op, grad):
    return [_g.apply("ConjugateTranspose", grad, _inverse_perm(op.inputs[1])), None]


# -- TensorShape and Dimension as tensors (TF's constant_op conversion functions) -------------


def _tensor_shape_to_tensor(s, dtype=None, name=None, as_ref=False):
    if not s.is_fully_defined():
        raise ValueError(f"Cannot convert a partially known TensorShape {s} to a Tensor.")
    dims = s.as_list()
    if dtype is None:
        dtype = dtypes.int64 if any(d >= 2**31 for d in dims) else dtypes.int32
    return constant(dims, dtype=dtype, name=name or "Const")


def _dimension_to_tensor(d, dtype=None, name=None, as_ref=False):
    if d.value is None:
        raise ValueError(f"Cannot convert an unknown Dimension to a Tensor: {d}")
    return constant(d.value, dtype=dtype or dtypes.int32, name=name or "Const")


ops.register_tensor_conversion_function(tensor_shape.TensorShape, _tensor_shape_to_tensor)
ops.register_tensor_conversion_function(tensor_shape.Dimension, _dimension_to_tensor)


# -- ConcatOffset (the offsets ConcatV2's gradient slices at) -------------------------------

ConcatOffset = register_op(
    "ConcatOffset", inputs=["concat_dim: int32", "shape: N * shape_type"],
    outputs=["offset: N * shape_type"],
    attrs={"N": REQUIRED, "shape_type": INDEX},
    shape_fn=lambda op: [t.shape for t in op.inputs[1:]],
)  # fmt: skip
NotDifferentiable("ConcatOffset")


def _vec_str(v) -> str:
    """A shape vector as TF prints the tensor's values: "[2 3]"."""
    return "[" + " ".join(str(int(d)) for d in v) + "]"


@ConcatOffset.kernel(host_memory=("concat_dim", "shape", "offset"))
async def _concat_offset(ctx, concat_dim, *shapes):
    for i, s in enumerate(shapes):
        if np.ndim(s) != 1:
            raise errors.InvalidArgumentError(
                None, None, f"input {i} should be a vector, but got shape {_vec_str(np.shape(s))}"
            )
    shapes = [np.asarray(s).reshape(-1) for s in shapes]
    first = shapes[0]
    rank = first.size
    axis = int(concat_dim)
    if not -rank <= axis < rank:
        raise errors.InvalidArgumentError(
            None, None, f"Concat dim is out of range: {axis} vs. {rank}"
        )
    axis %= rank
    offsets, running = [], 0
    for i, s in enumerate(shapes):
        if s.size != rank:
            raise errors.InvalidArgumentError(
                None, None, f"input {i} should contain {rank} elements, but got {s.size}"
            )
        for j in range(rank):
            if j != axis and s[j] != first[j]:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"All dimensions except {axis} must match. Input {i} has shape "
                    f"{_vec_str(s)} and doesn't match input 0 with shape {_vec_str(first)}.",
                )
        off = np.zeros(rank, dtype=s.dtype)
        off[axis] = running
        running += int(s[axis])
        offsets.append(off)
    return tuple(offsets)


def concat_offset(concat_dim, shape, name=None):
    """The offset of each input of a concatenation along `concat_dim` (op ConcatOffset;
    TF's `gen_array_ops.concat_offset`)."""
    op = ops.apply_op("ConcatOffset", [concat_dim, list(shape)], name=name)
    return list(op.outputs)
