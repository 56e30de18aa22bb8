"""TF1's top-level framework helpers over what asyncflow already has: build constants
(`VERSION`, `GRAPH_DEF_VERSION`, ...), `dimension_value`, `get_static_value`,
`make_tensor_proto` / `make_ndarray`, dtype and shape assertions, `init_scope`,
`op_scope`, casts (`saturate_cast`, `to_complex64`, ...), and the switches of TF's
v2 behaviours that are TF1's behaviour here (`disable_resource_variables`, ...; the
matching `*_enabled()` queries say False).
"""

from __future__ import annotations

import contextlib

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.graph_io import GRAPH_DEF_VERSION, fill_values, tensor_from_proto, tensor_proto
from asyncflow.ops import math_ops, math_special_ops
from asyncflow.registry import NotDifferentiable
from asyncflow.sparse_tensor import SparseTensor, SparseTensorValue
from asyncflow.tf_logging import get_logger
from asyncflow.type_spec import TypeSpec

__all__ = [
    "VERSION",
    "GIT_VERSION",
    "COMPILER_VERSION",
    "CXX_VERSION",
    "CXX11_ABI_FLAG",
    "MONOLITHIC_BUILD",
    "GRAPH_DEF_VERSION",
    "GRAPH_DEF_VERSION_MIN_CONSUMER",
    "GRAPH_DEF_VERSION_MIN_PRODUCER",
    "NoGradient",
    "no_gradient",
    "dimension_value",
    "dimension_at_index",
    "get_logger",
    "is_numeric_tensor",
    "is_symbolic_tensor",
    "assert_same_float_dtype",
    "assert_proper_iterable",
    "op_scope",
    "init_scope",
    "get_static_value",
    "make_tensor_proto",
    "make_ndarray",
    "convert_to_tensor_or_sparse_tensor",
    "saturate_cast",
    "to_complex64",
    "to_complex128",
    "to_bfloat16",
    "executing_eagerly_outside_functions",
    "resource_variables_enabled",
    "disable_resource_variables",
    "control_flow_v2_enabled",
    "disable_control_flow_v2",
    "disable_v2_tensorshape",
    "disable_tensor_equality",
    "tables_initializer",
    "initialize_all_tables",
    "parallel_stack",
    "switch_case",
    "conv2d_backprop_filter_v2",
    "conv2d_backprop_input_v2",
    "TensorSpec",
]

# What a GraphDef from here is: its producer version, and the oldest reader/writer the
# runtime accepts.  VERSION is asyncflow's own (pyproject.toml's), not TensorFlow's.
VERSION = "0.1.0"
GIT_VERSION = "unknown"
COMPILER_VERSION = "python"  # no compiled core
CXX_VERSION = 0
CXX11_ABI_FLAG = 0
MONOLITHIC_BUILD = 0
GRAPH_DEF_VERSION_MIN_CONSUMER = 0
GRAPH_DEF_VERSION_MIN_PRODUCER = 0

NoGradient = NotDifferentiable
no_gradient = NotDifferentiable


def dimension_value(dimension):
    """The int size of a Dimension (or int), None when unknown."""
    return tensor_shape.dimension_value(dimension)


def dimension_at_index(shape, index) -> tensor_shape.Dimension:
    """`shape[index]` as a Dimension; an unknown Dimension when the rank is unknown."""
    shape = tensor_shape.as_shape(shape)
    if shape.ndims is None:
        return tensor_shape.Dimension(None)
    return shape.dims[index]


def is_numeric_tensor(tensor) -> bool:
    """True for a Tensor of a number type (not bool, string, resource or variant)."""
    if not isinstance(tensor, ops.Tensor):
        return False
    dt = tensor.dtype.base_dtype
    return dt.is_floating or dt.is_integer or dt.is_complex or dt.is_quantized


def is_symbolic_tensor(tensor) -> bool:
    """True for a graph Tensor or Variable (every tensor is symbolic here)."""
    from asyncflow.variables import Variable

    return isinstance(tensor, ops.Tensor | Variable)


def assert_same_float_dtype(tensors=None, dtype=None):
    """The common floating dtype of `tensors` (and `dtype`); float32 when there is none.

    Raises:
      ValueError: the dtypes differ, or the common one is not floating.
    """
    if tensors:
        for t in tensors:
            if not t.dtype:
                continue
            t_dt = t.dtype.base_dtype
            if dtype is None:
                dtype, first = t_dt, t
            elif t_dt != dtype:
                first_name = first.name if "first" in locals() else "expected_dtype"
                raise ValueError(
                    f"{t.name}, type={t_dt}, must be of the same type ({dtype}) as {first_name}."
                )
    if not dtype:
        return dtypes.float32
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype}.")
    return dtype


def assert_proper_iterable(values) -> None:
    """Raise TypeError unless `values` is an iterable other than a Tensor, an ndarray,
    a string or bytes (whose iteration is rarely what a caller wants)."""
    unintentional = (ops.Tensor, SparseTensor, np.ndarray, str, bytes)
    if isinstance(values, unintentional):
        raise TypeError(
            f'Expected argument "values" to be a "proper" iterable.  Found: {type(values)}'
        )
    if not hasattr(values, "__iter__"):
        raise TypeError(f'Expected argument "values" to be iterable.  Found: {type(values)}')


@contextlib.contextmanager
def op_scope(values, name, default_name=None):
    """TF1's deprecated `op_scope`: `name_scope(name, default_name, values)`."""
    with ops.name_scope(name, default_name, values) as scope:
        yield scope


@contextlib.contextmanager
def init_scope():
    """A scope for building initialisers: no control dependencies (nor control-flow
    context) of the enclosing code apply inside it; the graph and name scope stay."""
    with ops.control_dependencies(None):
        yield


def get_static_value(tensor, partial=False):
    """The value of `tensor` when it is known at build time (a constant, a static shape,
    ...), else None; a non-tensor is returned as an array."""
    del partial  # TF's partial shapes come back as None here
    if isinstance(tensor, ops.Tensor):
        return ops.constant_value(tensor)
    from asyncflow.variables import Variable

    if isinstance(tensor, Variable):
        return None
    return np.asarray(tensor)


def make_tensor_proto(values, dtype=None, shape=None, verify_shape=False,
                      allow_broadcast=False):  # fmt: skip
    """A TensorProto of `values` (with `dtype` and `shape` if given), as TF writes it.

    Raises:
      TypeError: values that do not convert to `dtype`.
      ValueError: `values` do not fit `shape` (with verify_shape: any other shape).
    """
    if isinstance(values, np.ndarray) and dtype is None:
        arr = values
    else:
        arr = dtypes.convert_to_numpy(values, dtype)
    if dtype is not None:
        arr = arr.astype(dtypes.as_dtype(dtype).as_numpy_dtype, copy=False)
    if shape is not None:
        shape = [int(d) for d in tensor_shape.as_shape(shape).as_list()]
        if verify_shape and list(arr.shape) != shape:
            raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, but got {arr.shape}.")
        size = int(np.prod(shape, dtype=np.int64))
        if arr.size == size:
            arr = arr.reshape(shape)
        elif allow_broadcast and arr.size != 1 and _broadcasts(arr.shape, shape):
            arr = np.broadcast_to(arr, shape)
        elif arr.size == 1 or (arr.size < size and not allow_broadcast and arr.ndim <= 1):
            return tensor_proto(fill_values(arr, shape))  # (TF writes the values given)
        else:
            raise ValueError(
                f"Too many elements provided. Needed at most {size}, but received {arr.size}"
            )
    if arr.size > 1 and not any(arr.strides):
        arr = np.ascontiguousarray(arr)  # (given whole: TF writes all its values)
    return tensor_proto(arr)


def _broadcasts(have, want) -> bool:
    try:
        np.broadcast_shapes(have, tuple(want))
    except ValueError:
        return False
    return True


def make_ndarray(tensor):
    """The NumPy array a TensorProto holds (a copy, writable).

    Raises:
      TypeError: an unknown dtype.
    """
    try:
        return np.array(tensor_from_proto(tensor))
    except ValueError as e:
        raise TypeError(str(e)) from None


def convert_to_tensor_or_sparse_tensor(value, dtype=None, name=None):
    """A SparseTensor for a SparseTensor(Value), else `convert_to_tensor(value)`.

    Raises:
      RuntimeError: a SparseTensor whose dtype is not `dtype`.
    """
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype)
    if isinstance(value, SparseTensorValue):
        value = SparseTensor.from_value(value)
    if isinstance(value, SparseTensor):
        if dtype and not dtype.is_compatible_with(value.dtype):
            raise RuntimeError(f"Sparse dtype: requested = {dtype}, actual = {value.dtype}")
        return value
    return ops.convert_to_tensor(value, dtype=dtype, name=name)


@_dispatch.add_dispatch_support
def saturate_cast(value, dtype, name=None):
    """`value` cast to `dtype`, clamped to its range first (complex to real takes the
    real part), so out-of-range values saturate instead of wrapping."""
    with ops.name_scope(name, "saturate_cast", [value]) as scope:
        value = ops.convert_to_tensor(value, name="value")
        dtype = dtypes.as_dtype(dtype).base_dtype
        if value.dtype.is_complex and not dtype.is_complex:
            value = math_special_ops.real(value)
            return saturate_cast(value, dtype, name=scope)
        src = value.dtype.base_dtype
        if dtypes.bool in (src, dtype) and src != dtype:  # (TF asks bool for its range)
            raise TypeError(
                "Cannot find minimum value of <dtype: 'bool'> with type <dtype: 'bool'>."
            )
        if not dtype.is_complex and src != dtype:
            lo, hi = _clamp_bounds(src, dtype)
            if lo is not None:
                value = math_ops.maximum(value, ops.convert_to_tensor(lo, dtype=src))
            if hi is not None:
                value = math_ops.minimum(value, ops.convert_to_tensor(hi, dtype=src))
        return math_ops.cast(value, dtype, name=scope)


def _clamp_bounds(src, dst):
    """(lo, hi) in src's type that keep a cast to dst in range (None: no clamp needed)."""
    lo = hi = None
    if src.min < dst.min:
        lo = dst.min
    if src.max > dst.max:
        hi = dst.max
    if src.is_floating and hi is not None and dst.is_integer:
        # the largest src value not above dst.max (float32 cannot hold 2**31 - 1)
        as_src = np.asarray(dst.max, src.as_numpy_dtype)
        if float(as_src) > dst.max:
            as_src = np.nextafter(as_src, src.as_numpy_dtype(0))
        hi = float(as_src)
    if src.is_integer:  # (bounds of a float dst in the integer src: whole numbers)
        lo = None if lo is None else int(np.ceil(lo))
        hi = None if hi is None else int(np.floor(hi))
    return lo, hi


@_dispatch.add_dispatch_support
def to_complex64(x, name="ToComplex64"):
    """`cast(x, complex64)`."""
    return math_ops.cast(x, dtypes.complex64, name=name)


@_dispatch.add_dispatch_support
def to_complex128(x, name="ToComplex128"):
    """`cast(x, complex128)`."""
    return math_ops.cast(x, dtypes.complex128, name=name)


@_dispatch.add_dispatch_support
def to_bfloat16(x, name="ToBFloat16"):
    """`cast(x, bfloat16)`."""
    return math_ops.cast(x, dtypes.bfloat16, name=name)


def executing_eagerly_outside_functions() -> bool:
    """False: asyncflow builds graphs only."""
    return False


def resource_variables_enabled() -> bool:
    """Whether variables made without `use_resource` are ResourceVariables (False, TF1's
    reference variables, unless enable_resource_variables() ran)."""
    from asyncflow.variables import default_use_resource

    return default_use_resource()


def disable_resource_variables() -> None:
    """Variables made without `use_resource` are TF1's reference variables (the default)."""
    from asyncflow.variables import set_default_use_resource

    set_default_use_resource(False)


def control_flow_v2_enabled() -> bool:
    """False: cond and while_loop build TF1's Switch/Merge/Enter/Exit graphs."""
    return False


def disable_control_flow_v2() -> None:
    """TF1's control flow: what asyncflow always builds (nothing to switch)."""


def disable_v2_tensorshape() -> None:
    """TF1's TensorShape, whose entries are Dimensions: asyncflow's only behaviour."""


def disable_tensor_equality() -> None:
    """TF1's Tensor equality (`==` is identity, tensors are hashable), which a graph
    keeps either way (enable_tensor_equality only sets TF's flag)."""
    ops.Tensor._USE_EQUALITY = False


# -- tables, stacking, switch_case, conv2d backprops taking tensors ---------------------------


def tables_initializer(name="init_all_tables"):
    """One op running every initializer in GraphKeys.TABLE_INITIALIZERS (a no-op when
    there is none)."""
    from asyncflow.ops import control_flow_ordering

    inits = ops.get_collection(ops.GraphKeys.TABLE_INITIALIZERS)
    if inits:
        return control_flow_ordering.group(*inits, name=name)
    return control_flow_ordering.no_op(name=name)


initialize_all_tables = tables_initializer


def parallel_stack(values, name="parallel_stack"):
    """stack(values) along a new first axis; every value's shape must be fully known at
    build time, as TF's parallel_stack requires.

    Raises:
      ValueError: a value whose shape is not fully defined, or shapes that differ.
    """
    from asyncflow.ops import manip_ops

    with ops.name_scope(name):
        vals = [ops.convert_to_tensor(v) for v in values]
        shape = vals[0].shape
        for v in vals:
            if not v.shape.is_fully_defined():
                raise ValueError(f"Cannot parallel_stack a tensor of unknown shape {v.shape}")
            if not v.shape.is_compatible_with(shape):
                raise ValueError(f"Shapes {shape} and {v.shape} are incompatible")
        return manip_ops.stack(vals)


def switch_case(branch_index, branch_fns, default=None, name="switch_case"):
    """The result of branch_fns[branch_index]() (`default`, or the last branch, for an
    index out of range), built as nested conds.

    Raises:
      TypeError: branch_fns is not a list/dict of callables.
      ValueError: no branches.
    """
    from asyncflow.ops import control_flow_ops

    if isinstance(branch_fns, dict):
        items = sorted(branch_fns.items())
    elif isinstance(branch_fns, list | tuple):
        items = [v if isinstance(v, tuple) else (i, v) for i, v in enumerate(branch_fns)]
        items = [(int(k), fn) for k, fn in items]
    else:
        raise TypeError("branch_fns must be a list, tuple, or dict")
    if not items:
        raise ValueError("Must provide at least one item in branch_fns")
    for _, fn in items:
        if not callable(fn):
            raise TypeError("fn for key must be callable.")
    fallback = default if default is not None else items[-1][1]
    with ops.name_scope(name, "switch_case", [branch_index]):
        index = ops.convert_to_tensor(branch_index, name="branch_index")
        if index.dtype.base_dtype != dtypes.int32:
            raise TypeError(f"branch_index must be int32, got {index.dtype}")
        result = fallback
        for key, fn in reversed(items):
            result = _case(control_flow_ops, index, key, fn, result)
        return result()


def _case(cf, index, key, fn, otherwise):
    return lambda: cf.cond(math_ops.equal(index, key), fn, otherwise)


def conv2d_backprop_filter_v2(input, filter, out_backprop, strides, padding,  # noqa: A002
                              use_cudnn_on_gpu=True, explicit_paddings=(), data_format="NHWC",
                              dilations=(1, 1, 1, 1), name=None):  # fmt: skip
    """conv2d's filter gradient, the filter's shape taken from `filter` itself."""
    from asyncflow.ops import array_ops, conv_ops

    pad = _explicit_pairs(padding, explicit_paddings)
    return conv_ops.conv2d_backprop_filter(
        input, array_ops.shape(filter), out_backprop, strides, pad, use_cudnn_on_gpu,
        data_format, dilations, name=name,
    )  # fmt: skip


def conv2d_backprop_input_v2(input, filter, out_backprop, strides, padding,  # noqa: A002
                             use_cudnn_on_gpu=True, explicit_paddings=(), data_format="NHWC",
                             dilations=(1, 1, 1, 1), name=None):  # fmt: skip
    """conv2d's input gradient, the input's shape taken from `input` itself."""
    from asyncflow.ops import array_ops, conv_ops

    pad = _explicit_pairs(padding, explicit_paddings)
    return conv_ops.conv2d_backprop_input(
        array_ops.shape(input), filter, out_backprop, strides, pad, use_cudnn_on_gpu,
        data_format, dilations, name=name,
    )  # fmt: skip


def _explicit_pairs(padding, explicit_paddings):
    if padding == "EXPLICIT":
        flat = list(explicit_paddings)
        return [flat[i : i + 2] for i in range(0, len(flat), 2)]
    return padding


class TensorSpec(TypeSpec):
    """`tf.TensorSpec`: the shape, dtype and optional name a tensor is expected to have
    (a `tf.function`'s `input_signature`).  A TypeSpec of fields (shape, dtype, name):
    equality and joins compare the name too; is_compatible_with does not."""

    __slots__ = ("_shape", "_dtype", "_name")
    _spec_of = "tensor"  # (what control flow checks a loop variable against)

    def __init__(self, shape, dtype=dtypes.float32, name=None):
        self._shape = tensor_shape.as_shape(shape)
        self._dtype = dtypes.as_dtype(dtype)
        self._name = name

    @classmethod
    def from_tensor(cls, tensor, name=None):
        return cls(tensor.shape, tensor.dtype, name if name is not None else tensor.op.name)

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    name = property(lambda self: self._name)

    value_type = property(lambda self: ops.Tensor)

    def _serialize(self) -> tuple:
        return (self._shape, self._dtype, self._name)

    def is_compatible_with(self, spec_or_tensor) -> bool:
        """Same dtype and a compatible shape, for a TensorSpec or a Tensor (TF: any other
        value, a list or an array, is not compatible)."""
        if not isinstance(spec_or_tensor, TensorSpec | ops.Tensor):
            return False
        return self._dtype.is_compatible_with(
            spec_or_tensor.dtype
        ) and self._shape.is_compatible_with(spec_or_tensor.shape)

    def _key(self):
        dims = None if self._shape.rank is None else tuple(self._shape.as_list())
        return (dims, self._dtype, self._name)

    def __repr__(self):
        return f"TensorSpec(shape={self._shape}, dtype={self._dtype!r}, name={self._name!r})"
