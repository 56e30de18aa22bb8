"""Helpers shared by the distributions: logits/probs pairs and argument checks."""

from __future__ import annotations

import hashlib

import numpy as np

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.graph import control_dependencies, convert_to_tensor, name_scope

__all__ = ["embed_check_integer_casting_closed", "gen_new_seed", "get_logits_and_probs"]


def get_logits_and_probs(
    logits=None, probs=None, multidimensional=False, validate_args=False, name="logits_and_probs"
):
    """Both parameterizations from one: `(logits, probs)` as tensors.

    Raises:
      ValueError: if both or neither of `logits` and `probs` are given.
      TypeError: if the given one is not floating point.
    """
    with name_scope(name, values=[probs, logits]):
        if (probs is None) == (logits is None):
            raise ValueError("Must pass probs or logits, but not both.")
        if probs is None:
            logits = convert_to_tensor(logits, name="logits")
            if not logits.dtype.is_floating:
                raise TypeError("logits must having floating type.")
            if multidimensional:
                if validate_args:
                    logits = _embed_check_categorical_event_shape(logits)
                return logits, ops.softmax(logits, name="probs")
            return logits, ops.sigmoid(logits, name="probs")

        probs = convert_to_tensor(probs, name="probs")
        if not probs.dtype.is_floating:
            raise TypeError("probs must having floating type.")
        if validate_args:
            with name_scope("validate_probs"):
                one = ops.constant(1.0, probs.dtype)
                deps = [ops.assert_non_negative(probs)]
                if multidimensional:
                    probs = _embed_check_categorical_event_shape(probs)
                    deps.append(
                        ops.assert_near(
                            ops.reduce_sum(probs, -1), one, message="probs does not sum to 1."
                        )
                    )
                else:
                    deps.append(
                        ops.assert_less_equal(
                            probs, one, message="probs has components greater than 1."
                        )
                    )
                with control_dependencies(deps):
                    probs = ops.identity(probs)
        with name_scope("logits"):
            if multidimensional:
                return ops.log(probs), probs
            return ops.log(probs) - ops.log1p(-1.0 * probs), probs


def _embed_check_categorical_event_shape(categorical_param):
    # Only the static check: the event must have at least two classes.
    with name_scope("embed_check_categorical_event_shape", values=[categorical_param]):
        x = convert_to_tensor(categorical_param, name="categorical_param")
        x_dtype = x.dtype.base_dtype
        max_event_size = {"float16": 2048, "float32": 16777216, "float64": 9007199254740992}.get(
            x_dtype.name, 0
        )
        if x.shape.ndims is None or x.shape[-1] is None:
            return x
        event_size = int(x.shape[-1])
        if event_size < 2:
            raise ValueError("A categorical-distribution parameter must have at least 2 events.")
        if event_size > max_event_size:
            raise ValueError(
                f"Number of classes exceeds `dtype` precision, i.e., {x_dtype.name} "
                f"implies shape ({event_size}) cannot exceed {max_event_size}."
            )
        return x


def gen_new_seed(seed, salt):
    """A new op seed from `seed` and `salt`, as TF derives the second seed of a sampler."""
    if seed is None:
        return None
    string = (str(seed) + salt).encode("utf-8")
    return int(hashlib.md5(string).hexdigest()[:8], 16) & 0x7FFFFFFF


def _largest_integer(dtype):
    if dtype.is_floating:
        return int(2 ** (np.finfo(dtype.as_numpy_dtype).nmant + 1))
    if dtype == dtypes.bool:
        return 1
    return int(np.iinfo(dtype.as_numpy_dtype).max)


def _smallest_integer(dtype):
    if dtype.is_floating:
        return -_largest_integer(dtype)
    if dtype == dtypes.bool:
        return 0
    return int(np.iinfo(dtype.as_numpy_dtype).min)


def embed_check_integer_casting_closed(
    x, target_dtype, assert_nonnegative=True, name="embed_check_casting_closed"
):
    """`x`, run only after asserting that a cast to `target_dtype` loses nothing.

    Raises:
      TypeError: if neither dtype is an integer one, or `x` is not numeric.
      InvalidArgumentError: at run time, for a negative, fractional or too large value.
    """
    with name_scope(name, values=[x]):
        x = convert_to_tensor(x, name="x")
        if not (x.dtype.is_integer or x.dtype.is_floating):
            raise TypeError(f"{x.dtype.name}.dtype must be floating- or integer-type.")
        target_integer = target_dtype.is_integer or target_dtype == dtypes.bool
        if not (target_integer or target_dtype.is_floating):
            raise TypeError(
                f"target_dtype ({target_dtype.name}) must be floating- or integer-type."
            )
        if not (x.dtype.is_integer or target_integer):
            raise TypeError(
                f"At least one of {x.dtype.name}.dtype ({x.dtype.name}) and target_dtype "
                f"({target_dtype.name}) must be integer-type."
            )
        checks = []
        if assert_nonnegative:
            checks.append(ops.assert_non_negative(x, message="Elements must be non-negative."))
        if x.dtype.is_floating:
            # A float equal to its round trip through the integer type fits it too.
            with name_scope("assert_integer_form"):
                round_trip = ops.cast(ops.cast(x, target_dtype), x.dtype)
                checks.append(
                    ops.assert_equal(
                        x, round_trip, message=f"Elements must be {target_dtype.name}-equivalent."
                    )
                )
        else:
            largest = _largest_integer(target_dtype)
            if _largest_integer(x.dtype) > largest:
                checks.append(
                    ops.assert_less_equal(
                        x,
                        ops.cast(largest, x.dtype),
                        message=f"Elements cannot exceed {largest}.",
                    )
                )
            smallest = _smallest_integer(target_dtype)
            if not assert_nonnegative and _smallest_integer(x.dtype) < smallest:
                checks.append(
                    ops.assert_greater_equal(
                        x,
                        ops.cast(smallest, x.dtype),
                        message=f"Elements cannot be smaller than {smallest}.",
                    )
                )
        if not checks:
            return x
        with control_dependencies(checks):
            return ops.identity(x)


def positive_concentration(concentration, validate_args):
    """`concentration`, checked positive when run if `validate_args` (TF's message)."""
    if not validate_args:
        return concentration
    check = ops.assert_positive(concentration, message="Concentration parameter must be positive.")
    with control_dependencies([check]):
        return ops.identity(concentration)
