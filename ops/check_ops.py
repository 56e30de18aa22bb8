"""Run-time checks: CheckNumerics, Assert, and TF1's `assert_*` helpers.

The helpers build an Assert op over a reduced condition; when every input is known at
build time they also check statically and fail at once, as TF does: value checks raise
`InvalidArgumentError`, rank checks `ValueError`, dtype checks `TypeError`.  Math and
array builders are imported inside the helpers because those modules import nothing
from here and may load later.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, ragged_functions
from asyncflow import graph as ops
from asyncflow.ops import array_ops, control_flow_ordering, math_ops, reduction_ops
from asyncflow.ops.control_flow_cond import Assert
from asyncflow.ops.control_flow_ordering import _take_scope_name
from asyncflow.ops.math_helpers import to_host
from asyncflow.registry import FLOATING, register_op

__all__ = [
    "check_numerics",
    "verify_tensor_all_finite",
    "Assert",
    "assert_equal",
    "assert_none_equal",
    "assert_less",
    "assert_less_equal",
    "assert_greater",
    "assert_greater_equal",
    "assert_positive",
    "assert_negative",
    "assert_non_negative",
    "assert_non_positive",
    "assert_near",
    "assert_rank",
    "assert_rank_in",
    "assert_rank_at_least",
    "assert_type",
    "assert_integer",
    "assert_scalar",
]


# -- CheckNumerics -----------------------------------------------------------------------

CheckNumerics = register_op(
    "CheckNumerics",
    inputs=["tensor: T"],
    outputs=["output: T"],
    attrs={"T": FLOATING, "message": ""},
    shape_fn=lambda op: [op.inputs[0].shape],
)


@CheckNumerics.kernel()
async def _check_numerics(ctx, x):
    xp = ctx.xp
    has_inf = bool(to_host(xp, xp.isinf(x).any()))
    has_nan = bool(to_host(xp, xp.isnan(x).any()))
    if has_inf or has_nan:
        status = "Inf and NaN" if has_inf and has_nan else ("Inf" if has_inf else "NaN")
        raise errors.InvalidArgumentError(
            None, None, f"{ctx.attrs['message']} : Tensor had {status} values"
        )
    return x


CheckNumericsV2 = register_op(
    "CheckNumericsV2",
    inputs=["tensor: T"],
    outputs=["output: T"],
    attrs={"T": FLOATING, "message": ""},
    shape_fn=lambda op: [op.inputs[0].shape],
)


@CheckNumericsV2.kernel()
async def _check_numerics_v2(ctx, x):
    # V2 tells -Inf from +Inf: "Tensor had -Inf, +Inf, and NaN values".
    xp = ctx.xp
    found = [
        kind
        for kind, test in (
            ("-Inf", lambda: xp.isinf(x) & (x < 0)),
            ("+Inf", lambda: xp.isinf(x) & (x > 0)),
            ("NaN", lambda: xp.isnan(x)),
        )
        if bool(to_host(xp, test().any()))
    ]
    if found:
        kinds = " and ".join(found) if len(found) < 3 else "-Inf, +Inf, and NaN"
        raise errors.InvalidArgumentError(
            None, None, f"{ctx.attrs['message']} : Tensor had {kinds} values"
        )
    return x


def check_numerics_v2(tensor, message, name=None) -> ops.Tensor:
    """`tensor`, after checking it holds no NaN, -Inf or +Inf (TF's CheckNumericsV2).

    Raises:
      InvalidArgumentError: at run time, "<message> : Tensor had -Inf and NaN values".
    """
    return ops.apply_op("CheckNumericsV2", [tensor], {"message": message}, name=name).outputs[0]


@_dispatch.add_dispatch_support
def check_numerics(tensor, message, name=None) -> ops.Tensor:
    """`tensor`, after checking it holds no NaN or Inf.

    Raises:
      InvalidArgumentError: at run time, "<message> : Tensor had NaN values" (or Inf).
    """
    if ragged_functions.is_ragged(tensor):
        return ragged_functions.map_flat_values(check_numerics, tensor, message, name=name)
    return ops.apply_op("CheckNumerics", [tensor], {"message": message}, name=name).outputs[0]


def verify_tensor_all_finite(t=None, msg=None, name=None, x=None, message=None) -> ops.Tensor:
    """`t`, gated on a CheckNumerics of it (`tf.verify_tensor_all_finite`).

    Raises:
      InvalidArgumentError: at run time, when `t` holds NaN or Inf.
    """
    t = x if t is None else t
    msg = message if msg is None else msg
    with ops.name_scope(name, "VerifyFinite", [t]):
        t = ops.convert_to_tensor(t, name="t")
        with ops.colocate_with(t):
            verify_input = check_numerics(t, message=msg)
            return control_flow_ordering.with_dependencies([verify_input], t)


# -- value comparisons -------------------------------------------------------------------


def _static_text(t) -> str:
    if not isinstance(t, ops.Tensor):
        return str(t)
    value = ops.constant_value(t)
    return str(value) if value is not None else str(t)


def _assert_static(condition, data) -> None:
    if not condition:
        raise errors.InvalidArgumentError(None, None, "\n".join(_static_text(x) for x in data))


def _reduce_all(x) -> ops.Tensor:
    return reduction_ops.reduce_all(x)


def _binary_assert(sym, opname, op_name, static_func, x, y, data, summarize, message, name):
    with ops.name_scope(name, opname, [x, y] + list(data or [])):
        x = ops.convert_to_tensor(x, name="x")
        y = ops.convert_to_tensor(y, name="y")
        if data is None:
            data = [
                f"Condition x {sym} y did not hold element-wise:",
                f"x ({x.name}) = ", x,
                f"y ({y.name}) = ", y,
            ]  # fmt: skip
        if message is not None:
            data = [message] + list(data)
        condition = _reduce_all(getattr(math_ops, op_name)(x, y))
        x_static, y_static = ops.constant_value(x), ops.constant_value(y)
        if x_static is not None and y_static is not None:
            _assert_static(np.all(static_func(x_static, y_static)), data)
        return Assert(condition, data, summarize=summarize)


@_dispatch.add_dispatch_support
def assert_equal(x, y, data=None, summarize=None, message=None, name=None) -> ops.Operation:
    """An op asserting `x == y` element-wise (broadcasting).

    Raises:
      InvalidArgumentError: at build time when both are constants and differ, else at
        run time when the op runs and the condition fails.
      ValueError: when the shapes cannot broadcast.
    """
    if x is y and isinstance(x, ops.Tensor):
        with ops.name_scope(name, "assert_equal", [x]):
            return control_flow_ordering.no_op()
    return _binary_assert("==", "assert_equal", "equal", np.equal, x, y, data, summarize,
                          message, name)  # fmt: skip


@_dispatch.add_dispatch_support
def assert_none_equal(x, y, data=None, summarize=None, message=None, name=None):
    """An op asserting `x != y` for every element (see `assert_equal` for errors)."""
    return _binary_assert("!=", "assert_none_equal", "not_equal", np.not_equal, x, y, data,
                          summarize, message, name)  # fmt: skip


@_dispatch.add_dispatch_support
def assert_less(x, y, data=None, summarize=None, message=None, name=None):
    """An op asserting `x < y` element-wise (see `assert_equal` for errors)."""
    return _binary_assert("<", "assert_less", "less", np.less, x, y, data, summarize,
                          message, name)  # fmt: skip


@_dispatch.add_dispatch_support
def assert_less_equal(x, y, data=None, summarize=None, message=None, name=None):
    """An op asserting `x <= y` element-wise (see `assert_equal` for errors)."""
    return _binary_assert("<=", "assert_less_equal", "less_equal", np.less_equal, x, y, data,
                          summarize, message, name)  # fmt: skip


@_dispatch.add_dispatch_support
def assert_greater(x, y, data=None, summarize=None, message=None, name=None):
    """An op asserting `x > y` element-wise (see `assert_equal` for errors)."""
    return _binary_assert(">", "assert_greater", "greater", np.greater, x, y, data, summarize,
                          message, name)  # fmt: skip


@_dispatch.add_dispatch_support
def assert_greater_equal(x, y, data=None, summarize=None, message=None, name=None):
    """An op asserting `x >= y` element-wise (see `assert_equal` for errors)."""
    return _binary_assert(">=", "assert_greater_equal", "greater_equal", np.greater_equal, x,
                          y, data, summarize, message, name)  # fmt: skip


def _sign_assert(cond_text, opname, zero_first, compare, x, data, summarize, message, name):
    with ops.name_scope(name, opname, [x] + list(data or [])):
        x = ops.convert_to_tensor(x, name="x")
        if data is None:
            # TF ends a given message with ".  " ahead of the condition.
            data = [f"{message}.  " if message else "",
                    f"Condition {cond_text} did not hold element-wise:",
                    f"x ({x.name}) = ", x]  # fmt: skip
            if opname == "assert_non_positive":
                # TF's assert_non_positive joins these two strings (a comma is missing
                # in its list), so its message reads "...element-wise:x (name) = ".
                data[1:3] = [data[1] + data[2]]
        zero = ops.convert_to_tensor(0, dtype=x.dtype)
        a, b = (zero, x) if zero_first else (x, zero)
        return compare(a, b, data=data, summarize=summarize)


def assert_positive(x, data=None, summarize=None, message=None, name=None):
    """An op asserting `x > 0` element-wise (see `assert_equal` for errors)."""
    return _sign_assert("x > 0", "assert_positive", True, assert_less, x, data, summarize,
                        message, name)  # fmt: skip


def assert_negative(x, data=None, summarize=None, message=None, name=None):
    """An op asserting `x < 0` element-wise (see `assert_equal` for errors)."""
    return _sign_assert("x < 0", "assert_negative", False, assert_less, x, data, summarize,
                        message, name)  # fmt: skip


def assert_non_negative(x, data=None, summarize=None, message=None, name=None):
    """An op asserting `x >= 0` element-wise (see `assert_equal` for errors)."""
    return _sign_assert("x >= 0", "assert_non_negative", True, assert_less_equal, x, data,
                        summarize, message, name)  # fmt: skip


def assert_non_positive(x, data=None, summarize=None, message=None, name=None):
    """An op asserting `x <= 0` element-wise (see `assert_equal` for errors)."""
    return _sign_assert("x <= 0", "assert_non_positive", False, assert_less_equal, x, data,
                        summarize, message, name)  # fmt: skip


@_dispatch.add_dispatch_support
def assert_near(x, y, rtol=None, atol=None, data=None, summarize=None, message=None, name=None):
    """An op asserting `|x - y| <= atol + rtol * |y|` element-wise (floats).

    `rtol` and `atol` default to 10 * the dtype's machine epsilon.

    Raises:
      InvalidArgumentError: at run time when the tolerance is exceeded.
    """
    message = message or ""
    with ops.name_scope(name, "assert_near", [x, y, rtol, atol] + list(data or [])):
        x = ops.convert_to_tensor(x, name="x")
        y = ops.convert_to_tensor(y, name="y", dtype=x.dtype)
        eps = np.finfo(x.dtype.as_numpy_dtype).eps
        rtol = 10 * eps if rtol is None else rtol
        atol = 10 * eps if atol is None else atol
        rtol = ops.convert_to_tensor(rtol, name="rtol", dtype=x.dtype)
        atol = ops.convert_to_tensor(atol, name="atol", dtype=x.dtype)
        if data is None:
            data = [
                message,
                f"x and y not equal to tolerance rtol = {rtol}, atol = {atol}",
                f"x ({x.name}) = ", x,
                f"y ({y.name}) = ", y,
            ]  # fmt: skip
        tol = math_ops.add(atol, math_ops.multiply(rtol, math_ops.abs(y)))
        diff = math_ops.abs(math_ops.subtract(x, y))
        condition = _reduce_all(math_ops.less_equal(diff, tol))
        return Assert(condition, data, summarize=summarize)


# -- rank and dtype checks ---------------------------------------------------------------


def _assert_rank_condition(x, rank, static_condition, dynamic_condition, make_data, summarize):
    assert_type(rank, dtypes.int32)
    rank_static = ops.constant_value(rank)
    if rank_static is not None:
        if rank_static.ndim != 0:
            raise ValueError("Rank must be a scalar.")
        x_rank_static = x.shape.ndims
        if x_rank_static is not None:
            if not static_condition(x_rank_static, int(rank_static)):
                raise ValueError("Static rank condition failed", x_rank_static, int(rank_static))
            return control_flow_ordering.no_op(name="static_checks_determined_all_ok")
    data = make_data()
    condition = dynamic_condition(array_ops.rank(x), rank)
    if rank_static is None:
        # Catches assert_rank(x, [n]) written for assert_rank(x, n).
        this_data = ["Rank must be a scalar. Received rank: ", rank]
        rank_check = assert_rank(rank, 0, data=this_data)
        condition = control_flow_ordering.with_dependencies([rank_check], condition)
    return Assert(condition, data, summarize=summarize)


def _rank_assert(what, opname, static_condition, dyn_name, x, rank, data, summarize, message,
                 name):  # fmt: skip
    with ops.name_scope(name, opname, [x, rank] + list(data or [])):
        x = ops.convert_to_tensor(x, name="x")
        rank = ops.convert_to_tensor(rank, name="rank")
        message = message or ""

        def make_data():
            # Built only when the check is left to run time (TF builds it always).
            if data is not None:
                return data
            return [message, f"Tensor {x.name} must have {what}", rank, "Received shape: ",
                    array_ops.shape(x)]  # fmt: skip

        try:
            return _assert_rank_condition(
                x, rank, static_condition, getattr(math_ops, dyn_name), make_data, summarize
            )
        except ValueError as e:
            if e.args[0] == "Static rank condition failed":
                raise ValueError(
                    f"{message}.  Tensor {x.name} must have {what} {e.args[2]}.  Received "
                    f"rank {e.args[1]}, shape {x.shape}"
                ) from None
            raise


def assert_rank(x, rank, data=None, summarize=None, message=None, name=None):
    """An op asserting that `x` has rank `rank` (an int32 scalar).

    Raises:
      ValueError: at build time when both ranks are known and differ, or `rank` is
        not a scalar.
      TypeError: when `rank` is not int32.
      InvalidArgumentError: at run time when a rank known only then differs.
    """
    return _rank_assert("rank", "assert_rank", lambda a, r: a == r, "equal", x, rank, data,
                        summarize, message, name)  # fmt: skip


def assert_rank_at_least(x, rank, data=None, summarize=None, message=None, name=None):
    """An op asserting that `x` has rank `rank` or more (see `assert_rank` for errors)."""
    return _rank_assert("rank at least", "assert_rank_at_least", lambda a, r: a >= r,
                        "greater_equal", x, rank, data, summarize, message, name)  # fmt: skip


def assert_rank_in(x, ranks, data=None, summarize=None, message=None, name=None):
    """An op asserting that the rank of `x` is one of `ranks` (int32 scalars).

    Raises:
      ValueError: at build time when the rank and all of `ranks` are known and it is
        none of them.
      InvalidArgumentError: at run time when a rank known only then is none of them.
    """
    with ops.name_scope(name, "assert_rank_in", [x, *list(ranks), *list(data or [])]):
        x = ops.convert_to_tensor(x, name="x")
        ranks = [ops.convert_to_tensor(r, name="rank", dtype=dtypes.int32) for r in ranks]
        message = message or ""
        static = [ops.constant_value(r) for r in ranks]
        x_rank = x.shape.ndims
        if x_rank is not None and all(v is not None for v in static):
            if any(np.ndim(v) != 0 for v in static):
                raise ValueError("Rank must be a scalar.")
            if x_rank not in [int(v) for v in static]:
                raise ValueError(
                    f"{message}.  Tensor {x.name} must have rank in "
                    f"{tuple(int(v) for v in static)}.  Received rank {x_rank}, shape {x.shape}"
                )
            return control_flow_ordering.no_op(name="static_checks_determined_all_ok")
        if data is None:
            data = [message, f"Tensor {x.name} must have rank in", *ranks, "Received shape: ",
                    array_ops.shape(x)]  # fmt: skip
        actual = array_ops.rank(x)
        hits = [math_ops.equal(actual, r) for r in ranks]
        condition = reduction_ops.reduce_any(array_ops.stack(hits))
        return Assert(condition, data, summarize=summarize)


def assert_type(tensor, tf_type, message=None, name=None) -> ops.Operation:
    """A no-op if `tensor` has dtype `tf_type`.

    Raises:
      TypeError: at build time when the dtype differs.
    """
    message = message or ""
    tf_type = dtypes.as_dtype(tf_type)
    with ops.name_scope(name, "assert_type", [tensor]):
        tensor = ops.convert_to_tensor(tensor, name="tensor")
        if tensor.dtype != tf_type:
            raise TypeError(f"{message}  {tensor.name} must be of type {tf_type}")
        return control_flow_ordering.no_op("statically_determined_correct_type")


def assert_integer(x, message=None, name=None) -> ops.Operation:
    """A no-op if `x` has an integer dtype.

    Raises:
      TypeError: at build time when it does not.
    """
    message = message or ""
    with ops.name_scope(name, "assert_integer", [x]):
        x = ops.convert_to_tensor(x, name="x")
        if not x.dtype.is_integer:
            raise TypeError(
                f'{message}  Expected "x" to be integer type.  Found: {x.name} of dtype {x.dtype}'
            )
        return control_flow_ordering.no_op("statically_determined_was_integer")


def assert_scalar(tensor, name=None, message=None) -> ops.Tensor:
    """`tensor` itself, after checking statically that it is a scalar.

    Raises:
      ValueError: at build time when its rank is not known to be 0.
    """
    with ops.name_scope(name, "assert_scalar", [tensor]) as scope:
        if isinstance(tensor, ops.Tensor):
            converted = tensor
        else:
            converted = ops.convert_to_tensor(tensor)
            _take_scope_name(converted.op, scope)
        shape = converted.shape
        if shape.ndims != 0:
            raise ValueError(
                f"{message or ''}Expected scalar shape for {converted.name}, saw shape: {shape}."
            )
        return converted


# -- gradients ---------------------------------------------------------------------------


@CheckNumerics.gradient
def _check_numerics_grad(op, grad):
    """The gradient passes through, itself checked (as TF)."""
    message = "Not a number (NaN) or infinity (Inf) values detected in gradient. " + op._attr(
        "message"
    )
    return [check_numerics(ops.convert_to_tensor(grad), message)]


@CheckNumericsV2.gradient
def _check_numerics_v2_grad(op, grad):
    """The gradient passes through, checked by a V2 (as TF)."""
    # TF 2.21 formats the bytes attr, so the message ends "gradient. b'<message>'".
    message = "Not a number (NaN) or infinity (Inf) values detected in gradient. " + str(
        op.get_attr("message")
    )
    return [check_numerics_v2(ops.convert_to_tensor(grad), message)]
