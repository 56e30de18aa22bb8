"""The global step: one int64 variable per graph counting training steps (TF1's helpers).

The global step is the variable in the graph's GLOBAL_STEP collection, or else the
tensor named "global_step:0".  `Optimizer.apply_gradients(global_step=...)` increments
it after every update of a step.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow import var_scope as variable_scope
from asyncflow.graph import GraphKeys
from asyncflow.ops import init_ops
from asyncflow.variables import VariableAggregation

__all__ = [
    "global_step",
    "get_global_step",
    "create_global_step",
    "get_or_create_global_step",
    "assert_global_step",
]


def global_step(sess, global_step_tensor) -> int:
    """The current value of `global_step_tensor` in `sess`, as a Python int."""
    return int(sess.run(global_step_tensor))


def get_global_step(graph=None):
    """The global step variable (or tensor) of `graph`, or None if there is none.

    Raises:
      TypeError: the global step exists but is not an integer scalar.
    """
    graph = graph or ops.get_default_graph()
    found = graph.get_collection(GraphKeys.GLOBAL_STEP)
    if len(found) == 1:
        step = found[0]
    elif not found:
        try:
            step = graph.get_tensor_by_name("global_step:0")
        except KeyError:
            return None
    else:
        raise TypeError("Multiple tensors in global_step collection.")
    assert_global_step(step)
    return step


def assert_global_step(global_step_tensor) -> None:
    """Raises TypeError unless `global_step_tensor` is an integer scalar Variable/Tensor."""
    from asyncflow.variables import Variable

    if not isinstance(global_step_tensor, (Variable, ops.Tensor)):
        raise TypeError(
            f'Existing "global_step" must be a Variable or Tensor: {global_step_tensor}.'
        )
    if not global_step_tensor.dtype.base_dtype.is_integer:
        raise TypeError(
            f'Existing "global_step" does not have integer type: {global_step_tensor.dtype}'
        )
    shape = global_step_tensor.get_shape()
    if shape.ndims != 0 and shape.is_fully_defined():
        raise TypeError(f'Existing "global_step" is not scalar: {shape}')


def create_global_step(graph=None):
    """Create the int64 scalar variable "global_step" (initially 0) in `graph`.

    Raises:
      ValueError: the graph already has a global step.
    """
    graph = graph or ops.get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    with graph.as_default(), graph.name_scope(None), graph.control_dependencies(None):
        return variable_scope.get_variable(
            GraphKeys.GLOBAL_STEP,
            shape=[],
            dtype=dtypes.int64,
            initializer=init_ops.zeros_initializer(),
            trainable=False,
            aggregation=VariableAggregation.ONLY_FIRST_REPLICA,
            collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.GLOBAL_STEP],
        )


def get_or_create_global_step(graph=None):
    """The graph's global step, created first if it does not exist yet."""
    graph = graph or ops.get_default_graph()
    step = get_global_step(graph)
    if step is None:
        step = create_global_step(graph)
    return step
