"""Exponential moving averages of variables (TF1's `tf.train.ExponentialMovingAverage`).

`apply(var_list)` creates one shadow variable per variable ("<var>/<name>", a slot,
initialised to the variable's initial value) and returns an op that moves each shadow
toward its variable: shadow -= (1 - decay) * (shadow - var).  With `num_updates`, the
decay used is min(decay, (1 + num_updates) / (10 + num_updates)).  Tensors that are not
variables get a zero-initialised shadow, optionally zero-debiased (Adam-style).
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow import var_scope as variable_scope
from asyncflow.graph import GraphKeys
from asyncflow.ops import control_flow_ops, init_ops, math_ops, state_ops
from asyncflow.train.optimizer import create_slot, create_zeros_slot
from asyncflow.variables import Variable, global_variables, trainable_variables

__all__ = ["ExponentialMovingAverage", "assign_moving_average"]

_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


def assign_moving_average(variable, value, decay, zero_debias=True, name=None):
    """variable -= (1 - decay) * (variable - value); returns the updated value.

    With `zero_debias`, the average is corrected for its zero initialisation using two
    extra variables ("<variable>/biased", "<variable>/local_step").
    """
    with ops.name_scope(name, "AssignMovingAvg") as scope:
        decay = ops.convert_to_tensor(1.0 - decay, name="decay")
        if decay.dtype != variable.dtype.base_dtype:
            decay = math_ops.cast(decay, variable.dtype.base_dtype)
        if zero_debias:
            return _zero_debias(variable, value, decay, scope)
        return state_ops.assign_sub(variable, (variable - value) * decay, name=scope)


def _zero_debias(unbiased_var, value, decay, scope):
    value = ops.convert_to_tensor(value)
    with variable_scope.variable_scope(unbiased_var.op.name):
        with ops.get_default_graph().control_dependencies(None):
            biased_var = variable_scope.get_variable(
                "biased",
                shape=value.get_shape(),
                dtype=unbiased_var.dtype.base_dtype,
                initializer=init_ops.zeros_initializer(),
                trainable=False,
            )
            local_step = variable_scope.get_variable(
                "local_step",
                shape=[],
                dtype=unbiased_var.dtype.base_dtype,
                initializer=init_ops.zeros_initializer(),
                trainable=False,
            )
    biased_update = state_ops.assign_sub(biased_var, (biased_var - value) * decay)
    step_update = state_ops.assign_add(local_step, 1)
    with ops.control_dependencies([biased_update, step_update]):
        delta = unbiased_var - biased_var.read_value() / (
            1 - math_ops.pow(1.0 - decay, local_step.read_value())
        )
    return state_ops.assign_sub(unbiased_var, delta, name=scope)


class ExponentialMovingAverage:
    """Maintains moving averages of variables by exponential decay.

    Raises (from `apply`):
      TypeError: a variable is not floating point.
      ValueError: `apply` is given the same variable twice in one call.
    """

    def __init__(
        self, decay, num_updates=None, zero_debias=False, name="ExponentialMovingAverage"
    ):
        self._decay = decay
        self._num_updates = num_updates
        self._zero_debias = zero_debias
        self._name = name
        self._averages: dict = {}

    @property
    def name(self) -> str:
        return self._name

    def apply(self, var_list=None) -> ops.Operation:
        """Create the shadow variables and return the op updating all of them."""
        if var_list is None:
            var_list = trainable_variables()
        var_list = list(var_list)
        zero_debias_true = set()
        seen = set()
        for var in var_list:
            if var.dtype.base_dtype not in _FLOATS:
                raise TypeError(f"The variables must be half, float, or double: {var.name}")
            if id(var) in seen:
                raise ValueError(f"Duplicate variable: {var.name}")
            seen.add(id(var))
            if _key(var) in self._averages:
                continue
            graph = var.graph
            with graph.as_default(), graph.control_dependencies(None):  # TF's init_scope
                if isinstance(var, Variable):
                    with ops.device(var.device):
                        initial = var.initialized_value()
                    avg = create_slot(var, initial, self._name)
                    ops.add_to_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, var)
                else:
                    avg = create_zeros_slot(var, self._name)
                    if self._zero_debias:
                        zero_debias_true.add(_key(avg))
            self._averages[_key(var)] = avg
        with ops.name_scope(self._name) as scope:
            decay = ops.convert_to_tensor(self._decay, dtype=dtypes.float32, name="decay")
            if self._num_updates is not None:
                num_updates = math_ops.cast(self._num_updates, dtypes.float32, name="num_updates")
                decay = math_ops.minimum(decay, (1.0 + num_updates) / (10.0 + num_updates))
            updates = []
            for var in var_list:
                avg = self._averages[_key(var)]
                zero_debias = _key(avg) in zero_debias_true
                updates.append(assign_moving_average(avg, var, decay, zero_debias=zero_debias))
            return control_flow_ops.group(*updates, name=scope)

    def average(self, var):
        """The shadow variable of `var`, or None if `apply` has not covered it."""
        return self._averages.get(_key(var))

    def average_name(self, var) -> str:
        """The name the shadow of `var` has (or would have): "<var op name>/<name>"."""
        if _key(var) in self._averages:
            return self._averages[_key(var)].op.name
        return var.op.name + "/" + self._name

    def variables_to_restore(self, moving_avg_variables=None) -> dict:
        """{checkpoint name: variable} restoring each variable from its average."""
        if moving_avg_variables is None:
            moving_avg_variables = trainable_variables() + ops.get_collection(
                GraphKeys.MOVING_AVERAGE_VARIABLES
            )
        name_map = {}
        keys = set()
        for v in moving_avg_variables:
            keys.add(_key(v))
            name_map[self.average_name(v)] = v
        for v in global_variables():
            if _key(v) not in keys and v.op.name not in name_map:
                name_map[v.op.name] = v
        return name_map


def _key(var):
    return (var.graph, var.op.name, getattr(var, "value_index", 0))
