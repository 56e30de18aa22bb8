"""Math ops: element-wise unary and binary arithmetic, comparisons, logic, AddN.

Element-wise families come from two factories (`_unary_op`, `_binary_op`): each
registers the op with its type constraint, a shape function (the input shape, or the
broadcast of both input shapes) and one xp-generic kernel for CPU and GPU.

Invariants:
- Kernels return exactly the declared output dtype: every element-wise result goes
  through `_as_dtype`, because NumPy upcasts (Python scalars, float16 intermediates).
- Binary kernels check broadcasting before computing, so a runtime shape mismatch is
  TF's `InvalidArgumentError("Incompatible shapes: [2] vs. [3]")`, not a NumPy error.
- Builders follow TF1's Python layer: `x / y` is `truediv` (ints are cast to floats),
  `tf.div` is Python-2 division (FloorDiv for ints), `cast` to the same dtype is a no-op.

Reductions, ArgMax/ArgMin, Range and LinSpace live in `reduction_ops.py`.  Cast lives
in `cast_ops.py` and MatMul/BatchMatMul(V2) in `matmul_ops.py`; this module imports
both (registering their ops) and re-exports their builders (`math_ops.cast`,
`math_ops.matmul`, ...).  The helpers all of them share (`_builder_scope`, `_quiet`,
...) live in `math_helpers.py` and stay importable from here.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.ops import elementwise as _ew
from asyncflow.ops import gradient_ops as _g
from asyncflow.ops.cast_ops import cast, to_double, to_float, to_int32, to_int64
from asyncflow.ops.math_helpers import (
    _as_dtype,
    _builder_scope,
    _convert_pair,
    _quiet,
    _shape_str,
    _unary_shape,
    no_nan,
    to_host,
)
from asyncflow.ops.matmul_ops import matmul
from asyncflow.registry import (
    ANY,
    FLOATING,
    INTEGER,
    NUMERIC,
    REAL,
    NotDifferentiable,
    TypeConstraint,
    get_op_def,
    register_op,
)

__all__ = [
    # binary arithmetic
    "add",
    "subtract",
    "sub",
    "multiply",
    "mul",
    "div",
    "divide",
    "truediv",
    "realdiv",
    "floordiv",
    "floor_div",
    "floormod",
    "mod",
    "pow",
    "maximum",
    "minimum",
    "squared_difference",
    "add_n",
    # comparisons and logic
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    # unary
    "negative",
    "neg",
    "abs",
    "sign",
    "square",
    "sqrt",
    "rsqrt",
    "exp",
    "expm1",
    "log",
    "log1p",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sigmoid",
    "round",
    "floor",
    "ceil",
    "reciprocal",
    # casts
    "cast",
    "to_float",
    "to_double",
    "to_int32",
    "to_int64",
    # linear algebra
    "matmul",
]

_COMPLEX = TypeConstraint([dtypes.complex64, dtypes.complex128])
_FLOAT_OR_COMPLEX = TypeConstraint(FLOATING.allowed | _COMPLEX.allowed)
_SIGNED_NUMERIC = TypeConstraint(
    (NUMERIC.allowed - INTEGER.allowed) | {dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64}
)
_ADDABLE = TypeConstraint(NUMERIC.allowed | {dtypes.string})
_COMPARABLE = REAL


# -- helpers shared by builders and kernels ---------------------------------------------


# Below this many elements a kernel computes inline, and NumPy's floating-point
# warnings are silenced by the module-level filter below instead of an errstate block
# (~2 µs each): TF yields inf/nan without a word, and so do we.
_INLINE_ELEMENTS = 4096


def _broadcast_small(x, y) -> bool:
    """Whether broadcasting x with y makes a small result ([4096,1] + [1,4096] does not:
    two small inputs, 16M outputs, which must go through the device's cost model)."""
    return math.prod(np.broadcast_shapes(x.shape, y.shape)) < _INLINE_ELEMENTS


warnings.filterwarnings(
    "ignore",
    message=r"(divide by zero|invalid value|overflow|underflow) encountered",
    category=RuntimeWarning,
    module=r"asyncflow\.ops\..*",
)


def _check_broadcast(a, b) -> None:
    sa, sb = a.shape, b.shape
    if sa == sb:
        return
    try:
        np.broadcast_shapes(sa, sb)
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"Incompatible shapes: {_shape_str(sa)} vs. {_shape_str(sb)}"
        ) from None


def _broadcast_shape(op):
    return [tensor_shape.broadcast_shape(op.inputs[0].shape, op.inputs[1].shape)]


# -- element-wise factories ----------------------------------------------------------------


def _binary_op(
    op_type: str,
    fn: Callable,
    types: TypeConstraint | str = NUMERIC,
    out: str = "T",
    check: Callable | None = None,
    inplace: Callable | None = None,
):
    """Register a broadcasting binary op `z = fn(xp, x, y)`.

    `types` is the constraint of type attr T, or a fixed dtype name ("bool"); `out` is
    "T" or a fixed output dtype name; `check(xp, x, y, dtype)` validates values;
    `inplace` (the name of an xp ufunc computing `(x, y, out)`) lets a large kernel
    write into an input nothing else holds (`ctx.may_forward`) instead of allocating.
    """
    if isinstance(types, str):
        arg_type, attrs = types, {}
    else:
        arg_type, attrs = "T", {"T": types}
    op_def = register_op(
        op_type,
        inputs=[f"x: {arg_type}", f"y: {arg_type}"],
        outputs=[f"z: {out}"],
        attrs=attrs,
        shape_fn=_broadcast_shape,
    )
    in_fixed = None if attrs else dtypes.as_dtype(arg_type)
    out_fixed = None if out == "T" else dtypes.as_dtype(out)

    @op_def.kernel()
    async def _kernel(ctx, x, y):
        same = x.shape == y.shape  # (read once: a NumPy scalar makes a new tuple each time)
        if not same and x.ndim and y.ndim:  # a scalar always broadcasts
            _check_broadcast(x, y)
        if check is not None:
            check(ctx.xp, x, y, in_fixed or ctx.attrs["T"])
        out_dtype = out_fixed or ctx.attrs["T"]
        if x.size + y.size < _INLINE_ELEMENTS and (  # small in and out: no errstate, no hop
            same or x.size == 1 or y.size == 1 or _broadcast_small(x, y)
        ):
            z = fn(ctx.xp, x, y)
        elif inplace is not None and (ctx.may_forward(0, x) or ctx.may_forward(1, y)):
            shape = x.shape if x.shape == y.shape else np.broadcast_shapes(x.shape, y.shape)
            want = out_dtype.np_dtype
            ufunc = getattr(ctx.xp, inplace)
            if ctx.may_forward(0, x) and x.shape == shape and x.dtype == want:
                z = await ctx.device.compute(_quiet, ctx.xp, ufunc, x, y, x)
            elif ctx.may_forward(1, y) and y.shape == shape and y.dtype == want:
                z = await ctx.device.compute(_quiet, ctx.xp, ufunc, x, y, y)
            else:
                z = await ctx.device.compute(_quiet, ctx.xp, fn, ctx.xp, x, y)
        else:
            z = await ctx.device.compute(_quiet, ctx.xp, fn, ctx.xp, x, y)
        zd = z.dtype
        if zd is out_dtype.np_dtype or zd == out_dtype.np_dtype:
            return z
        return _as_dtype(ctx.xp, z, out_dtype)

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


def _unary_op(
    op_type: str,
    fn: Callable,
    types: TypeConstraint | str = NUMERIC,
    out_fn: Callable | None = None,
):
    """Register an element-wise unary op `y = fn(xp, x)` (T in `types`, or a fixed dtype).

    `out_fn(xp, x, out)` computes the same into `out` (None: a new array of x's dtype):
    a large kernel runs it over blocks shared by the CPU budget's threads
    (`ops.elementwise.parallel`), writing into `x` itself when nothing else holds it
    (`ctx.may_forward`) instead of allocating."""
    if isinstance(types, str):
        arg_type, attrs = types, {}
    else:
        arg_type, attrs = "T", {"T": types}
    op_def = register_op(
        op_type,
        inputs=[f"x: {arg_type}"],
        outputs=[f"y: {arg_type}"],
        attrs=attrs,
        shape_fn=_unary_shape,
    )
    fixed = None if attrs else dtypes.as_dtype(arg_type)

    @op_def.kernel()
    async def _kernel(ctx, x):
        xp = ctx.xp
        dt = fixed or ctx.attrs["T"]
        if x.size < _INLINE_ELEMENTS:
            y = fn(xp, x)
        elif out_fn is not None and x.dtype == dt.np_dtype:
            out = x if ctx.may_forward(0, x) else None
            return await ctx.device.compute(_quiet, xp, _ew.parallel, xp, out_fn, (x,), out)
        else:
            y = await ctx.device.compute(_quiet, xp, fn, xp, x)
        return y if y.dtype == dt.as_numpy_dtype else _as_dtype(xp, y, dt)

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


def _binary_builder(op_type: str, doc: str) -> Callable:
    def builder(x, y, name=None):
        return ops.apply_op(op_type, [x, y], name=name).outputs[0]

    builder.__doc__ = doc
    return _ragged.dispatch_binary(builder)  # (a RaggedTensor: the op of its flat values)


def _unary_builder(op_type: str, doc: str) -> Callable:
    def builder(x, name=None):
        return ops.apply_op(op_type, [x], name=name).outputs[0]

    builder.__doc__ = doc
    return _ragged.dispatch_unary(builder)


# -- binary arithmetic ---------------------------------------------------------------------


def _check_int_div(xp, x, y, dtype) -> None:
    # TF checks the divisors it uses: an empty result (e.g. `FloorMod([], 0)`) divides
    # nothing.  The shapes broadcast (checked before): the result is empty exactly when
    # an operand is.  (Shape arithmetic of gradients runs these on a few integers every
    # step: no np.broadcast_shapes or np.any wrappers.)
    if not dtype.is_integer or not x.size or not y.size:
        return
    if bool(to_host(xp, (xp.asarray(y) == 0).any())):
        raise errors.InvalidArgumentError(None, None, "Integer division by zero")


def _check_int_pow(xp, x, y, dtype) -> None:
    if dtype.is_integer and not dtype.is_unsigned and bool(to_host(xp, xp.any(xp.asarray(y) < 0))):
        raise errors.InvalidArgumentError(
            None, None, "Integers to negative integer powers are not allowed"
        )


def _trunc_div(xp, x, y):
    """C++ `/`: integers round toward zero; floats divide."""
    x, y = xp.asarray(x), xp.asarray(y)
    if x.dtype.kind not in "iu":
        return xp.true_divide(x, y)
    q = xp.floor_divide(x, y)
    # floor and truncation differ when the signs differ and the division is inexact.
    fix = (xp.remainder(x, y) != 0) & ((x < 0) != (y < 0))
    return q + fix.astype(q.dtype)


def _floor_mod(xp, x, y):
    """Integers: Python's `%`.  Floats: C's fmod moved onto the divisor's side, as TF
    computes it, so a zero remainder keeps the dividend's sign (`3 % -3` is +0, where
    NumPy's remainder gives the divisor's)."""
    x, y = xp.asarray(x), xp.asarray(y)
    if x.dtype.kind in "iu":
        return xp.remainder(x, y)
    m = xp.fmod(x, y)
    return xp.where((m != 0) & ((y < 0) != (m < 0)), m + y, m)


def _check_real_div(xp, x, y, dtype) -> None:
    # TF registers RealDiv kernels for floating and complex types only.
    if dtype.is_integer:
        raise errors.InvalidArgumentError(
            None,
            None,
            "No OpKernel was registered to support Op 'RealDiv' with these attrs: "
            f"[T=DT_{dtype.name.upper()}]",
        )


def _squared_difference(xp, x, y):
    d = xp.subtract(x, y)
    return d * xp.conj(d)


# Numeric ops written with operators: the same ufunc on arrays, and ~20x cheaper on
# the NumPy scalars of scalar graphs (loop counters).  Add also takes strings: ufunc.
Add = _binary_op("Add", lambda xp, x, y: xp.add(x, y), _ADDABLE)
AddV2 = _binary_op("AddV2", lambda xp, x, y: x + y, NUMERIC, inplace="add")
Sub = _binary_op("Sub", lambda xp, x, y: x - y, inplace="subtract")
Mul = _binary_op("Mul", lambda xp, x, y: x * y, inplace="multiply")
Div = _binary_op("Div", _trunc_div, check=_check_int_div)
RealDiv = _binary_op(
    "RealDiv", lambda xp, x, y: xp.true_divide(x, y), check=_check_real_div, inplace="true_divide"
)


def _floor_div(xp, x, y):
    """Integers: Python's `//`.  Floats: floor(x / y), as TF computes it (NumPy's
    floor_divide rounds through fmod: 1 // 0.1 is 9 there, 10 in TF; -1 // inf is -1
    there, -0 in TF)."""
    x, y = xp.asarray(x), xp.asarray(y)
    if x.dtype.kind in "iu":
        return xp.floor_divide(x, y)
    return xp.floor(xp.true_divide(x, y))


FloorDiv = _binary_op("FloorDiv", _floor_div, REAL, check=_check_int_div)
FloorMod = _binary_op("FloorMod", _floor_mod, REAL, check=_check_int_div)
# TF's Pow: floating, complex and signed integer types (no unsigned ones).
_POW_T = TypeConstraint([t for t in NUMERIC.allowed if not t.is_unsigned])
Pow = _binary_op("Pow", lambda xp, x, y: xp.power(x, y), _POW_T, check=_check_int_pow)
Maximum = _binary_op("Maximum", lambda xp, x, y: xp.maximum(x, y), REAL, inplace="maximum")
Minimum = _binary_op("Minimum", lambda xp, x, y: xp.minimum(x, y), REAL, inplace="minimum")
SquaredDifference = _binary_op("SquaredDifference", _squared_difference)


def _is_string(value) -> bool:
    if isinstance(value, (str, bytes)):
        return True
    dt = getattr(value, "dtype", None)
    if dt is None:
        return isinstance(value, (list, tuple)) and any(_is_string(v) for v in value)
    try:
        return dtypes.as_dtype(dt).base_dtype == dtypes.string
    except TypeError:
        return False


@_ragged.dispatch_binary
def add(x, y, name=None):
    """Returns x + y element-wise (broadcasting); strings concatenate.

    Builds AddV2 (as TF 2.x's compat.v1 does), or Add for strings, named "Add" by default.

    Raises:
      TypeError: x and y have different dtypes.
    """
    op_type = "Add" if _is_string(x) or _is_string(y) else "AddV2"
    return ops.apply_op(op_type, [x, y], name=name or "Add").outputs[0]


subtract = _binary_builder("Sub", "Returns x - y element-wise (broadcasting).")
multiply = _binary_builder("Mul", "Returns x * y element-wise (broadcasting).")
realdiv = _binary_builder("RealDiv", "Returns x / y element-wise for real types.")
floordiv = _binary_builder(
    "FloorDiv",
    "Returns floor(x / y) element-wise.\n\nRaises:\n  InvalidArgumentError: (at run time) "
    "integer division by zero.",
)
floor_div = floordiv
floormod = _binary_builder(
    "FloorMod",
    "Returns x - floor(x / y) * y element-wise (the sign of y, as Python's %).\n\n"
    "Raises:\n  InvalidArgumentError: (at run time) integer division by zero.",
)
mod = floormod
maximum = _binary_builder("Maximum", "Returns max(x, y) element-wise (broadcasting).")
minimum = _binary_builder("Minimum", "Returns min(x, y) element-wise (broadcasting).")
squared_difference = _binary_builder(
    "SquaredDifference", "Returns (x - y)(x - y) element-wise (broadcasting)."
)
sub = subtract
mul = multiply


@_dispatch.add_dispatch_support
def pow(x, y, name=None):  # noqa: A001 - TF's name
    """Computes x ** y element-wise (op Pow).

    Raises:
      TypeError: x and y have different dtypes.
      InvalidArgumentError: (at run time) an integer raised to a negative integer power.
    """
    with _builder_scope(name, "Pow", [x, y]) as op_name:
        x, y = _convert_pair(x, y, "Pow")
    return ops.apply_op("Pow", [x, y], name=op_name).outputs[0]


# 8- and 16-bit integers divide in float32, wider ones in float64 (TF's _TRUEDIV_TABLE).
_TRUEDIV_FLOAT = {
    dtypes.int8: dtypes.float32,
    dtypes.uint8: dtypes.float32,
    dtypes.int16: dtypes.float32,
    dtypes.uint16: dtypes.float32,
    dtypes.int32: dtypes.float64,
    dtypes.uint32: dtypes.float64,
    dtypes.int64: dtypes.float64,
    dtypes.uint64: dtypes.float64,
}


@_ragged.dispatch_binary
def truediv(x, y, name=None):
    """Divides x / y with Python 3 semantics: integer inputs are cast to floats first.

    8- and 16-bit integers are cast to float32, 32- and 64-bit ones to float64 (op
    RealDiv).

    Raises:
      TypeError: x and y have different dtypes, or the dtype cannot be divided.
    """
    with _builder_scope(name, "truediv", [x, y]) as op_name:
        x, y = _convert_pair(x, y, "truediv")
        target = _TRUEDIV_FLOAT.get(x.dtype)
        if target is not None:
            x = cast(x, target)
            y = cast(y, target)
        elif x.dtype.is_integer:
            raise TypeError(f"Invalid dtype {x.dtype.name} in __truediv__")
    return ops.apply_op("RealDiv", [x, y], name=op_name).outputs[0]


@_dispatch.add_dispatch_support
def divide(x, y, name=None):
    """`tf.divide`: Python 3 division (`truediv`)."""
    return truediv(x, y, name=name)


@_dispatch.add_dispatch_support
def div(x, y, name=None):
    """`tf.div`: Python 2 division — FloorDiv for integers, RealDiv for floats.

    Raises:
      TypeError: x and y have different dtypes.
      InvalidArgumentError: (at run time) integer division by zero.
    """
    with _builder_scope(name, "div", [x, y]) as op_name:
        x, y = _convert_pair(x, y, "div")
    op_type = "RealDiv" if x.dtype.is_floating or x.dtype.is_complex else "FloorDiv"
    return ops.apply_op(op_type, [x, y], name=op_name).outputs[0]


# -- comparisons and logic -------------------------------------------------------------------


def _plain(x):
    """A quantized (qint8...) array, NumPy's one-field record, as its integer field."""
    names = getattr(x.dtype, "names", None)
    return x[names[0]] if names and len(names) == 1 else x


Equal = _binary_op("Equal", lambda xp, x, y: xp.equal(_plain(x), _plain(y)), ANY, out="bool")
NotEqual = _binary_op(
    "NotEqual", lambda xp, x, y: xp.not_equal(_plain(x), _plain(y)), ANY, out="bool"
)
Less = _binary_op("Less", lambda xp, x, y: x < y, _COMPARABLE, out="bool")
LessEqual = _binary_op("LessEqual", lambda xp, x, y: x <= y, _COMPARABLE, out="bool")
Greater = _binary_op("Greater", lambda xp, x, y: x > y, _COMPARABLE, out="bool")
GreaterEqual = _binary_op("GreaterEqual", lambda xp, x, y: x >= y, _COMPARABLE, out="bool")
LogicalAnd = _binary_op("LogicalAnd", lambda xp, x, y: xp.logical_and(x, y), "bool", out="bool")
LogicalOr = _binary_op("LogicalOr", lambda xp, x, y: xp.logical_or(x, y), "bool", out="bool")
LogicalNot = _unary_op("LogicalNot", lambda xp, x: xp.logical_not(x), "bool")

equal = _binary_builder("Equal", "Returns the truth value of (x == y) element-wise.")
not_equal = _binary_builder("NotEqual", "Returns the truth value of (x != y) element-wise.")
less = _binary_builder("Less", "Returns the truth value of (x < y) element-wise.")
less_equal = _binary_builder("LessEqual", "Returns the truth value of (x <= y) element-wise.")
greater = _binary_builder("Greater", "Returns the truth value of (x > y) element-wise.")
greater_equal = _binary_builder(
    "GreaterEqual", "Returns the truth value of (x >= y) element-wise."
)
logical_and = _binary_builder("LogicalAnd", "Returns x AND y element-wise (bool tensors).")
logical_or = _binary_builder("LogicalOr", "Returns x OR y element-wise (bool tensors).")
logical_not = _unary_builder("LogicalNot", "Returns NOT x element-wise (a bool tensor).")

# Boolean results have no gradient (TF's math_grad marks the same ops).
for _op_type in (
    "Equal",
    "NotEqual",
    "Less",
    "LessEqual",
    "Greater",
    "GreaterEqual",
    "LogicalAnd",
    "LogicalOr",
    "LogicalNot",
):
    NotDifferentiable(_op_type)


@_dispatch.add_dispatch_support
def logical_xor(x, y, name="LogicalXor"):
    """x XOR y, built as TF does: (x | y) & ~(x & y)."""
    return ops.apply_op(
        "LogicalAnd",
        [logical_or(x, y), logical_not(logical_and(x, y))],
        name=name,
    ).outputs[0]


# -- AddN ------------------------------------------------------------------------------------


def _add_n_shape(op):
    shape = tensor_shape.unknown_shape()
    for t in op.inputs:
        shape = shape.merge_with(t.shape)
    return [shape]


# AddN of variants: TF 2.x's gradient of a While loop sums TensorLists.  The list op
# module (ops/tensor_list_ops.py) installs how; math does not import it.
VARIANT_ADD: list = [None]

AddN = register_op(
    "AddN",
    inputs=["inputs: N * T"],
    outputs=["sum: T"],
    attrs={"N": 1, "T": TypeConstraint([*NUMERIC.allowed, dtypes.variant])},
    shape_fn=_add_n_shape,
)


@AddN.kernel()
async def _add_n(ctx, *xs):
    if ctx.attrs["T"] == dtypes.variant:
        if VARIANT_ADD[0] is None:
            raise errors.UnimplementedError(None, None, "AddN of this variant is not supported")
        return VARIANT_ADD[0](xs)
    xp = ctx.xp
    first = xs[0].shape
    for i, x in enumerate(xs[1:], 1):
        if x.shape != first:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Inputs to operation {ctx.op.name} of type AddN must have the same size and "
                f"shape.  Input 0: {_shape_str(first)} != input {i}: "
                f"{_shape_str(x.shape)}",
            )
    total = await ctx.device.compute(_quiet, xp, functools.reduce, xp.add, xs)
    return _as_dtype(xp, total, ctx.attrs["T"])


@_dispatch.add_dispatch_support
def add_n(inputs, name=None):
    """Adds all input tensors element-wise; all must have the same shape and dtype.

    Raises:
      ValueError: `inputs` is not a non-empty list, or the static shapes differ.
      TypeError: the dtypes differ.
    """
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise ValueError(
            "Inputs must be an iterable of at least one Tensor/IndexedSlices with the same "
            "dtype and shape."
        )
    inputs = list(inputs)
    if any(_ragged.is_ragged(x) for x in inputs):  # (one partition for all: checked)
        return _ragged.map_flat_values(add_n, inputs, name=name)
    if len(inputs) == 1:
        x = ops.convert_to_tensor(inputs[0])
        if name:
            return ops.apply_op("Identity", [x], name=name).outputs[0]
        return x
    return ops.apply_op("AddN", [inputs], name=name).outputs[0]


# -- unary -----------------------------------------------------------------------------------


def _sigmoid(xp, x):
    return _ew.sigmoid(xp, xp.asarray(x))


def _reciprocal(xp, x):
    return xp.reciprocal(xp.asarray(x))


Neg = _unary_op("Neg", lambda xp, x: xp.negative(x), _SIGNED_NUMERIC, _ew.ufunc("negative"))
Abs = _unary_op("Abs", lambda xp, x: xp.absolute(x), REAL)
ComplexAbs = register_op(
    "ComplexAbs",
    inputs=["x: T"],
    outputs=["y: Tout"],
    attrs={
        "T": _COMPLEX.with_default(dtypes.complex64),
        "Tout": TypeConstraint([dtypes.float32, dtypes.float64], default=dtypes.float32),
    },
    shape_fn=_unary_shape,
)


@ComplexAbs.kernel()
async def _complex_abs(ctx, x):
    return _as_dtype(ctx.xp, ctx.xp.absolute(x), ctx.attrs["Tout"])


Sign = _unary_op("Sign", lambda xp, x: xp.sign(x))
Square = _unary_op("Square", lambda xp, x: xp.multiply(x, x))
Sqrt = _unary_op("Sqrt", lambda xp, x: xp.sqrt(x), _FLOAT_OR_COMPLEX, _ew.ufunc("sqrt"))
Rsqrt = _unary_op("Rsqrt", lambda xp, x: xp.reciprocal(xp.sqrt(x)), _FLOAT_OR_COMPLEX)
# float32 (and half) Exp, Log and Log1p as TF's CPU kernels compute them where numba
# runs: ops/elementwise
Exp = _unary_op("Exp", lambda xp, x: _ew.exp(xp, xp.asarray(x)), _FLOAT_OR_COMPLEX, _ew.exp)
Expm1 = _unary_op("Expm1", lambda xp, x: xp.expm1(x), _FLOAT_OR_COMPLEX, _ew.ufunc("expm1"))
Log = _unary_op("Log", lambda xp, x: _ew.log(xp, xp.asarray(x)), _FLOAT_OR_COMPLEX, _ew.log)
Log1p = _unary_op(
    "Log1p", lambda xp, x: _ew.log1p(xp, xp.asarray(x)), _FLOAT_OR_COMPLEX, _ew.log1p
)
Sin = _unary_op("Sin", lambda xp, x: xp.sin(x), _FLOAT_OR_COMPLEX)
Cos = _unary_op("Cos", lambda xp, x: xp.cos(x), _FLOAT_OR_COMPLEX)
Tan = _unary_op("Tan", lambda xp, x: xp.tan(x), _FLOAT_OR_COMPLEX)
# float32 (and half) as TF's CPU kernel computes it: ops/elementwise.tanh
Tanh = _unary_op("Tanh", lambda xp, x: _ew.tanh(xp, xp.asarray(x)), _FLOAT_OR_COMPLEX, _ew.tanh)
Sigmoid = _unary_op("Sigmoid", _sigmoid, _FLOAT_OR_COMPLEX, _ew.sigmoid)
# NumPy's rint rounds half to even, as TF's Round does; integers pass through.
Round = _unary_op("Round", lambda xp, x: xp.rint(x) if xp.asarray(x).dtype.kind in "fc" else x)
Floor = _unary_op("Floor", lambda xp, x: xp.floor(x), FLOATING)
Ceil = _unary_op("Ceil", lambda xp, x: xp.ceil(x), FLOATING)
Reciprocal = _unary_op("Reciprocal", _reciprocal, _FLOAT_OR_COMPLEX)

negative = _unary_builder("Neg", "Computes -x element-wise.")
neg = negative
sign = _unary_builder("Sign", "Returns -1, 0 or 1 by the sign of x (x / |x| for complex).")
square = _unary_builder("Square", "Computes x * x element-wise.")
sqrt = _unary_builder("Sqrt", "Computes the square root of x element-wise.")
rsqrt = _unary_builder("Rsqrt", "Computes 1 / sqrt(x) element-wise.")
exp = _unary_builder("Exp", "Computes e ** x element-wise.")
expm1 = _unary_builder("Expm1", "Computes e ** x - 1 element-wise.")
log = _unary_builder("Log", "Computes the natural logarithm of x element-wise.")
log1p = _unary_builder("Log1p", "Computes log(1 + x) element-wise.")
sin = _unary_builder("Sin", "Computes sine element-wise.")
cos = _unary_builder("Cos", "Computes cosine element-wise.")
tan = _unary_builder("Tan", "Computes tangent element-wise.")
floor = _unary_builder("Floor", "Returns the largest integer not greater than x, element-wise.")
ceil = _unary_builder("Ceil", "Returns the smallest integer not less than x, element-wise.")
reciprocal = _unary_builder("Reciprocal", "Computes 1 / x element-wise.")


@_ragged.dispatch_unary
def abs(x, name=None):  # noqa: A001 - TF's name
    """Absolute value element-wise; ComplexAbs (a real result) for complex tensors."""
    with _builder_scope(name, "Abs", [x]) as op_name:
        x = ops.convert_to_tensor(x, name="x")  # "Abs/x", as TF's
    if x.dtype.is_complex:
        tout = dtypes.float64 if x.dtype == dtypes.complex128 else dtypes.float32
        return ops.apply_op("ComplexAbs", [x], {"Tout": tout}, name=op_name).outputs[0]
    return ops.apply_op("Abs", [x], name=op_name).outputs[0]


@_ragged.dispatch_unary
def round(x, name=None):  # noqa: A001 - TF's name
    """Rounds half to even element-wise (banker's rounding, as TF); ints are unchanged."""
    x = ops.convert_to_tensor(x, name="x")
    if x.dtype.is_integer:
        return x
    return ops.apply_op("Round", [x], name=name).outputs[0]


@_ragged.dispatch_unary
def sigmoid(x, name=None):
    """Computes 1 / (1 + exp(-x)) element-wise (op Sigmoid)."""
    with _builder_scope(name, "Sigmoid", [x]) as op_name:
        x = ops.convert_to_tensor(x, name="x")
    return ops.apply_op("Sigmoid", [x], name=op_name).outputs[0]


@_ragged.dispatch_unary
def tanh(x, name=None):
    """Computes the hyperbolic tangent element-wise (op Tanh)."""
    with _builder_scope(name, "Tanh", [x]) as op_name:
        x = ops.convert_to_tensor(x, name="x")
    return ops.apply_op("Tanh", [x], name=op_name).outputs[0]


def sparse_values_map(fn: Callable) -> Callable:
    """TF's unary functions that take a SparseTensor too (abs, negative, sign, square,
    sqrt, tanh, erf): the function of its values, at the same indices and dense shape."""

    @functools.wraps(fn)
    def apply(x, name=None):
        from asyncflow.sparse_tensor import SparseTensor

        if isinstance(x, SparseTensor):
            return SparseTensor(x.indices, fn(x.values, name=name), x.dense_shape)
        return fn(x, name=name)

    return apply


abs, negative, sign, square, sqrt, tanh = map(  # noqa: A001 - TF's names
    sparse_values_map, (abs, negative, sign, square, sqrt, tanh)
)
neg = negative


# -- build-time folding of small integer arithmetic ------------------------------------------
# Lets shape functions see bounds like `i + 2` (StridedSlice, Pack), as TF's
# constant_value does; larger or non-integer values stay unknown.

_FOLD_MAX_ELEMENTS = 1000


def _integer_folder(fn: Callable) -> Callable:
    def fold(t):
        if not t.dtype.is_integer:
            return None
        values = [ops.constant_value(x) for x in t.op.inputs]
        if any(v is None or v.size > _FOLD_MAX_ELEMENTS for v in values):
            return None
        with np.errstate(all="ignore"):  # integers wrap, as in the kernel
            out = fn(*values)
        return None if out is None else np.asarray(out, dtype=t.dtype.as_numpy_dtype)

    return fold


def _fold_floor_div(x, y):
    if np.any(y == 0):
        return None  # unknown at build time; the kernel raises at run time
    return np.floor_divide(x, y)


for _op_type, _fold_fn in {
    "Add": np.add,
    "AddV2": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Neg": np.negative,
    "FloorDiv": _fold_floor_div,
    "Maximum": np.maximum,
    "Minimum": np.minimum,
}.items():
    ops.register_constant_folder(_op_type, _integer_folder(_fold_fn))
del _op_type, _fold_fn


Conj = _unary_op("Conj", lambda xp, x: xp.conj(x), TypeConstraint(_COMPLEX.allowed))


@_dispatch.add_dispatch_support
def conj(x, name=None):
    """Complex conjugate; real tensors are returned unchanged (as TF)."""
    x = ops.convert_to_tensor(x, name="x")
    if x.dtype.is_complex:
        return ops.apply_op("Conj", [x], name=name).outputs[0]
    if x.dtype.is_floating or x.dtype.is_integer:
        return x
    raise TypeError(f"Expected numeric or variant tensor, got dtype {x.dtype!r}.")


def polyval(coeffs, x, name=None):
    """`tf.math.polyval`: coeffs[0] * x**(n-1) + ... + coeffs[n-1] by Horner's rule
    (broadcasting); zeros like x for no coefficients.

    Raises:
      ValueError: coeffs is not a list.
    """
    if not isinstance(coeffs, list):
        raise ValueError(f"Argument coeffs must be list type. Received type {type(coeffs)}.")
    with ops.name_scope(name, "polyval", [*coeffs, x]) as scope:
        x = ops.convert_to_tensor(x, name="x")
        if not coeffs:
            from asyncflow.ops import array_ops

            return array_ops.zeros_like(x, name=scope)
        coeffs = [ops.convert_to_tensor(c, name=f"coeff_{i}") for i, c in enumerate(coeffs)]
        p = coeffs[0]
        for c in coeffs[1:]:
            p = c + p * x
        return p


__all__ += ["conj", "polyval"]


# -- gradients (TF's math_grad.py) ----------------------------------------------------------


def _conj(x):
    return _g.apply("Conj", x) if x.dtype.is_complex else x


def _scalar(value, like):
    return _g.constant(value, like.dtype)


def _unary_grad(op_type: str):
    """Register `fn(op, grad) -> grad * d op / dx` for a unary op."""

    def register(fn):
        @get_op_def(op_type).gradient
        def _grad(op, grad):
            return [fn(op, grad)]

        _grad.__name__ = _grad.__qualname__ = f"_{op_type.lower()}_grad"
        return fn

    return register


_mul = _g.mul


@_unary_grad("Neg")
def _neg_grad(op, grad):
    return _g.neg(grad)


@_unary_grad("Abs")
def _abs_grad(op, grad):
    return _mul(grad, _g.apply("Sign", op.inputs[0]))


@_unary_grad("Sign")
def _sign_grad(op, grad):
    return _g.zeros_like(op.inputs[0])


@_unary_grad("Square")
def _square_grad(op, grad):
    x = _conj(op.inputs[0])
    return _mul(grad, _mul(x, _scalar(2, x)))


# Sqrt, Rsqrt and Reciprocal differentiate through their gradient ops, as TF's
# math_grad does: those give 0 where the incoming gradient is 0 (below), so a branch
# a where() masked off does not turn the gradient NaN.
@_unary_grad("Sqrt")
def _sqrt_grad(op, grad):
    return _g.apply("SqrtGrad", op.outputs[0], grad)


@_unary_grad("Rsqrt")
def _rsqrt_grad(op, grad):
    return _g.apply("RsqrtGrad", op.outputs[0], grad)


@_unary_grad("Exp")
def _exp_grad(op, grad):
    return _mul(grad, _conj(op.outputs[0]))


@_unary_grad("Expm1")
def _expm1_grad(op, grad):
    return _mul(grad, _g.apply("Exp", _conj(op.inputs[0])))


@_unary_grad("Log")
def _log_grad(op, grad):
    return _mul(grad, _g.apply("Reciprocal", _conj(op.inputs[0])))


@_unary_grad("Log1p")
def _log1p_grad(op, grad):
    x = _conj(op.inputs[0])
    return _mul(grad, _g.apply("Reciprocal", _g.apply("AddV2", _scalar(1, x), x)))


@_unary_grad("Sin")
def _sin_grad(op, grad):
    return _mul(grad, _g.apply("Cos", _conj(op.inputs[0])))


@_unary_grad("Cos")
def _cos_grad(op, grad):
    return _g.neg(_mul(grad, _g.apply("Sin", _conj(op.inputs[0]))))


@_unary_grad("Tan")
def _tan_grad(op, grad):
    secx = _g.apply("Reciprocal", _g.apply("Cos", _conj(op.inputs[0])))
    return _mul(grad, _g.apply("Square", secx))


# TF's gradients of Tanh and Sigmoid are one op each (TanhGrad, SigmoidGrad): one kernel
# of three passes instead of three nodes (Square or Sub, Sub, Mul) and their temporaries.
@_unary_grad("Tanh")
def _tanh_grad(op, grad):
    return _g.apply("TanhGrad", _conj(op.outputs[0]), grad)


@_unary_grad("Sigmoid")
def _sigmoid_grad(op, grad):
    return _g.apply("SigmoidGrad", _conj(op.outputs[0]), grad)


def _activation_grad_op(op_type: str, fn: Callable):
    """Register TF's `z = op_type(y, dy)` (y an activation's output, dy its gradient):
    `fn(xp, y, dy, out=None)` from ops.elementwise, into a donated y or dy when allowed."""
    op_def = register_op(
        op_type,
        inputs=["y: T", "dy: T"],
        outputs=["z: T"],
        attrs={"T": _FLOAT_OR_COMPLEX},
        shape_fn=lambda op: [op.inputs[0].shape.merge_with(op.inputs[1].shape)],
    )

    @op_def.kernel()
    async def _kernel(ctx, y, dy):
        xp = ctx.xp
        if y.shape != dy.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Incompatible shapes: {_shape_str(y.shape)} vs. {_shape_str(dy.shape)}",
            )
        want = ctx.attrs["T"].np_dtype
        if y.size < _INLINE_ELEMENTS:
            return _as_dtype(xp, fn(xp, y, dy), ctx.attrs["T"])
        out = None
        for k, x in ((1, dy), (0, y)):
            if ctx.may_forward(k, x) and x.dtype == want:
                out = x
                break
        z = await ctx.device.compute(_quiet, xp, _ew.parallel, xp, fn, (y, dy), out)
        return _as_dtype(xp, z, ctx.attrs["T"])

    _kernel.__name__ = _kernel.__qualname__ = f"_{op_type.lower()}_kernel"
    return op_def


SigmoidGrad = _activation_grad_op("SigmoidGrad", _ew.sigmoid_grad)
TanhGrad = _activation_grad_op("TanhGrad", _ew.tanh_grad)


def _grad_fn(fn):
    """An activation-gradient body `fn(xp, conj(y), dy)` as `(xp, y, dy, out)`."""

    def body(xp, y, dy, out=None):
        c = xp.conj(y) if xp.iscomplexobj(y) else y
        z = fn(xp, c, dy)
        if out is None:
            return z
        out[...] = z
        return out

    return body


# a * b, 0 where b is 0 (Eigen's mul_no_nan: whatever a is, inf and NaN too); MulNoNan's.
_mul_no_nan = no_nan(lambda a, b: a * b)


# TF's gradients of Reciprocal, Rsqrt and Sqrt as ops of their own (gen_math_ops'
# reciprocal_grad(y, dy) etc., y the forward output): the kernel conjugates y.  TF's
# kernels (cwise_ops_gradients.h, the vectorized form) give 0 wherever dy is 0, so a
# masked branch's NaN or inf does not leak through (the gradient of
# where(x > 0, sqrt(x), 0) at x = -1 is 0, not NaN), in these operations' order.
ReciprocalGrad = _activation_grad_op(
    "ReciprocalGrad", _grad_fn(lambda xp, c, dy: _mul_no_nan(xp, -(c * c), dy))
)
RsqrtGrad = _activation_grad_op(
    "RsqrtGrad",
    _grad_fn(lambda xp, c, dy: _mul_no_nan(xp, (c * c) * -0.5, _mul_no_nan(xp, c, dy))),
)
SqrtGrad = _activation_grad_op(
    "SqrtGrad", _grad_fn(lambda xp, c, dy: _mul_no_nan(xp, 0.5 / c, dy))
)


# Second derivatives (TF's math_grad.py): for complex values each takes conjugates, so
# a real loss's gradient is 2 dL/d(conj z) as everywhere in TF.
@SigmoidGrad.gradient
def _sigmoid_grad_grad(op, grad):
    # d/dy (dy * y * (1 - y)) = dy * (1 - 2y); d/ddy = SigmoidGrad.
    y, dy = _conj(op.inputs[0]), _conj(op.inputs[1])
    gy = _mul(_mul(grad, dy), _g.apply("Sub", _scalar(1, y), _mul(_scalar(2, y), y)))
    return [gy, _g.apply("SigmoidGrad", y, grad)]


@TanhGrad.gradient
def _tanh_grad_grad(op, grad):
    # d/dy (dy * (1 - y^2)) = -2 * dy * y; d/ddy = TanhGrad.
    y, dy = _conj(op.inputs[0]), _conj(op.inputs[1])
    return [_mul(_mul(grad, _scalar(-2, y)), _mul(dy, y)), _g.apply("TanhGrad", y, grad)]


@ReciprocalGrad.gradient
def _reciprocal_grad_grad(op, grad):
    # z = -dy conj(y)^2: dz/d conj(y) = -2 dy conj(y); d/ddy = ReciprocalGrad.
    y, dy = _conj(op.inputs[0]), op.inputs[1]
    return [_mul(_mul(_conj(grad), _scalar(-2, y)), _mul(dy, y)),
            _g.apply("ReciprocalGrad", y, grad)]  # fmt: skip


@RsqrtGrad.gradient
def _rsqrt_grad_grad(op, grad):
    # z = -dy conj(y)^3 / 2: dz/d conj(y) = -1.5 dy conj(y)^2; d/ddy = RsqrtGrad.
    y, dy = _conj(op.inputs[0]), op.inputs[1]
    return [_mul(_mul(_conj(grad), _scalar(-1.5, y)), _mul(dy, _mul(y, y))),
            _g.apply("RsqrtGrad", y, grad)]  # fmt: skip


@SqrtGrad.gradient
def _sqrt_grad_grad(op, grad):
    # z = dy / (2 conj(y)): dz/d conj(y) = -z / conj(y); dz/ddy = 1 / (2 conj(y)).
    y, z = op.inputs[0], op.outputs[0]
    g_over_y = _g.apply("RealDiv", grad, y)
    return [_g.neg(_mul(_conj(g_over_y), z)), _mul(_scalar(0.5, y), g_over_y)]


@_unary_grad("Reciprocal")
def _reciprocal_grad(op, grad):
    return _g.apply("ReciprocalGrad", op.outputs[0], grad)


@_unary_grad("Conj")
def _conj_grad(op, grad):
    return _g.apply("Conj", grad)


@_unary_grad("ComplexAbs")
def _complex_abs_grad(op, grad):
    # d|z| = Re(conj(z) dz) / |z|: the gradient is grad * z / |z| (0 where z == 0).
    x, y = op.inputs[0], op.outputs[0]
    grad_c, y_c = _g.cast(grad, x.dtype), _g.cast(y, x.dtype)
    ratio = _g.apply("RealDiv", _mul(grad_c, x), y_c)
    zero = _g.apply("Equal", y_c, _g.zeros_like(y_c))
    return _g.apply("Select", zero, _g.zeros_like(ratio), ratio)


def _no_grad(op, grad):
    return [None]


for _op_type in ("Floor", "Ceil", "Round"):
    get_op_def(_op_type).gradient(_no_grad)


def _binary_grad(op_type: str):
    """Register `fn(op, grad) -> (gx, gy)` at the broadcast shape; reduced to x and y."""

    def register(fn):
        @get_op_def(op_type).gradient
        def _grad(op, grad):
            x, y = op.inputs
            gx, gy = fn(op, grad)
            return list(_g.broadcast_reduce(x, y, gx, gy))

        _grad.__name__ = _grad.__qualname__ = f"_{op_type.lower()}_grad"
        return fn

    return register


@_binary_grad("Add")
@_binary_grad("AddV2")
def _add_grad(op, grad):
    return grad, grad


@_binary_grad("Sub")
def _sub_grad(op, grad):
    return grad, _g.neg(grad)


@_binary_grad("Mul")
def _mul_grad(op, grad):
    x, y = op.inputs
    return _mul(grad, _conj(y)), _mul(_conj(x), grad)


def _div_grad_fn(div_type: str):
    def fn(op, grad):
        x, y = (_conj(t) for t in op.inputs)
        gx = _g.apply(div_type, grad, y)
        gy = _mul(grad, _g.apply(div_type, _g.apply(div_type, _g.neg(x), y), y))
        return gx, gy

    return fn


_binary_grad("Div")(_div_grad_fn("Div"))
_binary_grad("RealDiv")(_div_grad_fn("RealDiv"))


@FloorDiv.gradient
def _floor_div_grad(op, grad):
    return [None, None]


@_binary_grad("FloorMod")
def _floor_mod_grad(op, grad):
    x, y = op.inputs
    return grad, _mul(grad, _g.neg(_g.apply("FloorDiv", x, y)))


@_binary_grad("Pow")
def _pow_grad(op, grad):
    x, y = op.inputs
    z = op.outputs[0]
    one = _scalar(1, y)
    # Products in TF's order ((grad * y) * ..., (grad * z) * log x): in half precision
    # z * log(x) alone can overflow to inf, and 0 * inf would put NaN where TF has 0.
    gx = _mul(_mul(grad, y), _g.apply("Pow", x, _g.apply("Sub", y, one)))
    if x.dtype.is_complex:
        log_x = _g.apply("Log", x)
    else:
        # d/dy x^y = x^y log(x), taken as 0 where x <= 0 (as TF).
        positive = _g.apply("Greater", x, _g.zeros_like(x))
        safe_x = _g.apply("Select", positive, x, _g.ones_like(x))
        log_x = _g.apply("Select", positive, _g.apply("Log", safe_x), _g.zeros_like(x))
    gy = _mul(_mul(grad, _conj(z)), _conj(log_x))
    return gx, gy


def _maximum_minimum_grad(selector: str):
    # The comparison broadcasts, so the mask already has the gradient's shape.
    def fn(op, grad):
        x_mask = _g.apply(selector, *op.inputs)
        zeros = _g.zeros_like(grad)
        return _g.apply("Select", x_mask, grad, zeros), _g.apply("Select", x_mask, zeros, grad)

    return fn


_binary_grad("Maximum")(_maximum_minimum_grad("GreaterEqual"))
_binary_grad("Minimum")(_maximum_minimum_grad("LessEqual"))


@_binary_grad("SquaredDifference")
def _squared_difference_grad(op, grad):
    x, y = op.inputs
    x_grad = _mul(_mul(_scalar(2, grad), grad), _g.apply("Sub", x, y))
    return x_grad, _g.neg(x_grad)


@AddN.gradient
def _add_n_grad(op, grad):
    return [grad] * len(op.inputs)


# -- operator overloads ----------------------------------------------------------------------


def _binary_operator(fn: Callable, scope: str) -> Callable:
    """TF's binary_op_wrapper: `x + y` runs `fn` in a fresh scope ("add") naming its op."""

    def operator(x, y):
        with ops.name_scope(None, scope, [x, y]) as name:
            return fn(x, y, name=name)

    operator.__name__ = operator.__qualname__ = f"_{scope}_operator"
    return operator


for _name, _fn in {
    "add": _binary_operator(add, "add"),
    "subtract": _binary_operator(subtract, "sub"),
    "multiply": _binary_operator(multiply, "mul"),
    "truediv": _binary_operator(truediv, "truediv"),
    "floordiv": _binary_operator(floordiv, "floordiv"),
    "floormod": _binary_operator(floormod, "mod"),
    "pow": _binary_operator(pow, "pow"),
    "matmul": _binary_operator(matmul, "matmul"),
    "negative": negative,
    "abs": abs,
    "logical_not": logical_not,
    "logical_and": _binary_operator(logical_and, "and"),
    "logical_or": _binary_operator(logical_or, "or"),
    "logical_xor": _binary_operator(logical_xor, "xor"),
    "less": less,
    "less_equal": less_equal,
    "greater": greater,
    "greater_equal": greater_equal,
}.items():
    ops.register_overload(_name, _fn)

del _name, _fn


# -- Bucketize ----------------------------------------------------------------------------

Bucketize = register_op(
    "Bucketize",
    inputs=["input: T"],
    outputs=["output: int32"],
    attrs={
        "T": TypeConstraint([dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64]),
        "boundaries": [],
    },
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("Bucketize")


@Bucketize.kernel()
async def _bucketize_kernel(ctx, x):
    bounds = np.asarray(ctx.attrs["boundaries"], dtype=np.float64)
    if bounds.size > 1 and np.any(np.diff(bounds) < 0):
        raise errors.InvalidArgumentError(None, None, "Expected sorted boundaries")
    x = np.asarray(to_host(ctx.xp, x))
    # The index of the first boundary above each value (TF: upper_bound).
    return ctx.xp.asarray(np.searchsorted(bounds, x, side="right").astype(np.int32))


def _bucketize(input, boundaries, name=None):  # noqa: A002 - TF's names
    """TF's hidden `math_ops._bucketize` (op Bucketize): the bucket of each value, i such
    that boundaries[i-1] <= x < boundaries[i].

    Raises:
      TypeError: boundaries not a list (TF's message).
      InvalidArgumentError: (when run) boundaries not sorted.
    """
    if not isinstance(boundaries, list | tuple):
        raise TypeError(
            f"Expected list for 'boundaries' argument to 'Bucketize' Op, not {boundaries!r}."
        )
    bounds = [float(b) for b in boundaries]
    return ops.apply_op("Bucketize", [input], {"boundaries": bounds}, name=name).outputs[0]
