"""Helpers shared by the distributions: logits/probs pairs and argument checks."""

from __future__ import annotations

import hashlib

from asyncflow.distributions import _ops as ops
from asyncflow.graph import control_dependencies, convert_to_tensor, name_scope

__all__ = ["gen_new_seed", "get_logits_and_probs"]


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
