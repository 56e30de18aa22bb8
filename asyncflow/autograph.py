"""`tf.autograph`: the parts that do not convert source.

TF's AutoGraph rewrites a Python function's `if`/`while`/`for` on tensors into graph
control flow by transforming its source and executing the result; asyncflow never
executes generated code, so `to_graph` and `to_code` refuse (write the graph with
`tf.cond`/`tf.while_loop`, or call the function as it is).  The rest behaves as TF's:
the verbosity setting, `trace` (a print), and `experimental.do_not_convert`,
`set_loop_options` and `Feature`, which only matter inside converted code and are
accepted outside it exactly as TF accepts them there.
"""

from __future__ import annotations

import enum
import functools
import inspect
import os

__all__ = ["experimental", "get_verbosity", "set_verbosity", "to_code", "to_graph", "trace"]

_state = {"verbosity": None, "alsologtostdout": False}


def set_verbosity(level, alsologtostdout=False):
    """AutoGraph's logging verbosity (0 silent; also read from $AUTOGRAPH_VERBOSITY)."""
    _state["verbosity"], _state["alsologtostdout"] = level, alsologtostdout


def get_verbosity():
    if _state["verbosity"] is not None:
        return _state["verbosity"]
    return int(os.getenv("AUTOGRAPH_VERBOSITY", "0"))


def trace(*args):
    """Print `args` when the program runs (in converted code: when it is traced)."""
    print(*args)


def _refuse(what):
    raise NotImplementedError(
        f"tf.autograph.{what}: AutoGraph converts a function by rewriting its source and "
        "executing the result, which asyncflow never does. Build the control flow with "
        "tf.cond / tf.while_loop (or tf.case, tf.map_fn), or call the function unconverted."
    )


def to_graph(
    entity, recursive=True, arg_values=None, arg_types=None, experimental_optional_features=None
):
    """Refused: see the module docstring."""
    _refuse("to_graph")


def to_code(
    entity,
    recursive=True,
    arg_values=None,
    arg_types=None,
    indentation="  ",
    experimental_optional_features=None,
):
    """Refused: see the module docstring."""
    _refuse("to_code")


class Feature(enum.Enum):
    """AutoGraph's optional conversions (`experimental_optional_features`)."""

    ALL = "ALL"
    AUTO_CONTROL_DEPS = "AUTO_CONTROL_DEPS"
    ASSERT_STATEMENTS = "ASSERT_STATEMENTS"
    BUILTIN_FUNCTIONS = "BUILTIN_FUNCTIONS"
    EQUALITY_OPERATORS = "EQUALITY_OPERATORS"
    LISTS = "LISTS"
    NAME_SCOPES = "NAME_SCOPES"

    @classmethod
    def all(cls):
        return tuple(cls.__members__.values())

    @classmethod
    def all_but(cls, exclude):
        if not isinstance(exclude, (list, tuple, set)):
            exclude = (exclude,)
        return tuple(set(cls.all()) - set(exclude) - {cls.ALL})


def do_not_convert(func=None):
    """Mark `func` as never converted (a decorator, with or without a call)."""
    if func is None:
        return do_not_convert

    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    if inspect.isfunction(func) or inspect.ismethod(func):
        wrapper = functools.update_wrapper(wrapper, func)
    wrapper.autograph_info__ = {}
    return wrapper


_UNSPECIFIED = object()


def set_loop_options(
    parallel_iterations=_UNSPECIFIED,
    swap_memory=_UNSPECIFIED,
    maximum_iterations=_UNSPECIFIED,
    shape_invariants=_UNSPECIFIED,
):
    """Options for the enclosing converted loop; outside converted code it does nothing,
    as in TF."""
    del parallel_iterations, swap_memory, maximum_iterations, shape_invariants


class _Experimental:
    """`tf.autograph.experimental`."""

    Feature = Feature
    do_not_convert = staticmethod(do_not_convert)
    set_loop_options = staticmethod(set_loop_options)


experimental = _Experimental()
