"""TF's deprecation notices: a deprecated endpoint (or a deprecated argument of one)
logs a warning the first time it is called, once per endpoint (and argument); after
`tf.experimental.enable_strict_mode()` that first call raises RuntimeError instead, as
TF's.  Also TF's renamed-argument rule: a function that took an argument under an old
name accepts either spelling, and both at once is an error worded as TF words it.

Invariant: an endpoint warns or raises at most once per process: the notice counts as
given before strict mode raises (TF's order), so a second call goes through.
"""

from __future__ import annotations

import functools
import inspect
import sys

from asyncflow import tf_logging

__all__ = [
    "deprecated",
    "deprecated_args",
    "deprecated_argument_lookup",
    "enable_strict_mode",
    "is_strict_mode",
]

_STRICT = [False]
_GIVEN: set = set()  # (function, argument or None) whose notice was given
_STRICT_MESSAGE = "This behavior has been deprecated, which raises an error in strict mode."


def enable_strict_mode() -> None:
    """`tf.experimental.enable_strict_mode()`: from now on the first call of each
    deprecated endpoint raises RuntimeError instead of logging a warning."""
    _STRICT[0] = True


def is_strict_mode() -> bool:
    return _STRICT[0]


def _notice(key, message: str, *args) -> None:
    """Log the deprecation `message` once per `key`; in strict mode raise instead.

    Raises:
      RuntimeError: strict mode is on and this notice was not given yet.
    """
    if key in _GIVEN:
        return
    _GIVEN.add(key)
    if _STRICT[0]:
        tf_logging.error(message, *args)
        raise RuntimeError(_STRICT_MESSAGE)
    tf_logging.warning(message, *args)


def _caller() -> tuple:
    frame = sys._getframe(2)  # (_caller, the wrapper, its caller)
    return frame.f_code.co_filename, frame.f_lineno


def deprecated(instructions: str, name: str | None = None):
    """A decorator: calling the function gives TF's deprecation notice (see the module
    note) with `instructions`."""

    def decorate(func):
        shown = name or func.__qualname__

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if (func, None) not in _GIVEN:
                filename, line = _caller()
                _notice((func, None), "From %s:%d: %s (from %s) is deprecated and will be "
                        "removed in a future version.\nInstructions for updating:\n%s",
                        filename, line, shown, func.__module__, instructions)  # fmt: skip
            return func(*args, **kwargs)

        return wrapper

    return decorate


def deprecated_args(instructions: str, *arg_names: str, name: str | None = None):
    """A decorator: calling the function with any of `arg_names` (by keyword or by
    position, any value) gives TF's deprecation notice for that argument."""

    def decorate(func):
        shown = name or func.__qualname__
        params = list(inspect.signature(func).parameters)
        where = {a: params.index(a) if a in params else None for a in arg_names}

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for arg, index in where.items():
                if arg in kwargs or (index is not None and len(args) > index):
                    if (func, arg) not in _GIVEN:
                        filename, line = _caller()
                        _notice((func, arg), "From %s:%d: calling %s (from %s) with %s is "
                                "deprecated and will be removed in a future version.\n"
                                "Instructions for updating:\n%s", filename, line,
                                shown, func.__module__, arg, instructions)  # fmt: skip
            return func(*args, **kwargs)

        return wrapper

    return decorate


def deprecated_argument_lookup(new_name, new_value, old_name, old_value):
    """The value given under either name (None if neither).

    Raises:
      ValueError: both were given.
    """
    if old_value is not None:
        if new_value is not None:
            raise ValueError(f"Cannot specify both '{old_name}' and '{new_name}'.")
        return old_value
    return new_value
