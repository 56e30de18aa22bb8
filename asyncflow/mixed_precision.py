"""Loss scaling for mixed-precision training: TF1's `tf.train.experimental.LossScale`,
`FixedLossScale`, `DynamicLossScale`, `MixedPrecisionLossScaleOptimizer` and
`enable_mixed_precision_graph_rewrite` (also under `tf.mixed_precision`).

The optimizer wrapper multiplies the loss by the loss scale before differentiating and
divides the gradients by it after, so small float16 gradients do not flush to zero.  A
dynamic scale halves (never below 1) and skips the update when a gradient is not finite,
and doubles after `increment_period` finite steps in a row; the update and the scale's
bookkeeping run in one step, under TF's `cond`s, so the values step by step are TF's.

asyncflow keeps float32 math where TF's graph rewrite would cast to float16 on a GPU:
`enable_mixed_precision_graph_rewrite` wraps the optimizer (the loss scaling works as in
TF) and records the setting, and on a CPU TF's rewrite changes nothing either.
"""

from __future__ import annotations

import logging
import numbers

from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import (
    control_flow_cond,
    control_flow_ordering,
    manip_ops,
    math_ops,
    reduction_ops,
    special_math_ops,
)
from asyncflow.ops.cast_ops import cast
from asyncflow.resource_variable import ResourceVariable
from asyncflow.train.optimizer import Optimizer

__all__ = [
    "LossScale",
    "FixedLossScale",
    "DynamicLossScale",
    "MixedPrecisionLossScaleOptimizer",
    "enable_mixed_precision_graph_rewrite",
    "disable_mixed_precision_graph_rewrite",
]

_log = logging.getLogger("asyncflow")


class LossScale:
    """The loss scale's interface: `loss_scale()` is the current scale (a float32
    tensor) and `update(grads)` returns `(update_op, should_apply_gradients)`."""

    def __call__(self):
        raise NotImplementedError("LossScale subclasses implement __call__")

    def update(self, grads):
        raise NotImplementedError("LossScale subclasses implement update")

    def get_config(self) -> dict:
        raise NotImplementedError("LossScale subclasses implement get_config")

    def _variables(self) -> list:
        """The variables the scale keeps (none for a fixed one)."""
        return []

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)


class FixedLossScale(LossScale):
    """A loss scale that never changes; every update is applied.

    Raises:
      ValueError: the value is not a Python number, or is below 1.
    """

    def __init__(self, loss_scale_value):
        if isinstance(loss_scale_value, bool) or not isinstance(loss_scale_value, numbers.Real):
            raise ValueError("loss_scale_value must be a Python int or float.")
        if loss_scale_value < 1:
            raise ValueError("loss_scale_value must be at least 1.")
        self._loss_scale_value = float(loss_scale_value)

    def __call__(self):
        return ops.convert_to_tensor(self._loss_scale_value)

    def update(self, grads):
        del grads
        return control_flow_ordering.no_op(), True

    def get_config(self) -> dict:
        return {"loss_scale_value": self._loss_scale_value}

    def __repr__(self) -> str:
        return f"FixedLossScale({self._loss_scale_value})"


class DynamicLossScale(LossScale):
    """A loss scale that adapts to the gradients (TF1's defaults: 2**15, 2000, 2).

    Its state is two non-trainable resource variables made at construction,
    `current_loss_scale` (float32) and `good_steps` (int64), so it is saved and restored
    with the model's checkpoints as TF's is."""

    def __init__(self, initial_loss_scale=2**15, increment_period=2000, multiplier=2.0):
        self._initial_loss_scale = float(initial_loss_scale)
        self._increment_period = int(increment_period)
        self._multiplier = float(multiplier)
        with ops.get_default_graph().control_dependencies(None):
            self._current_loss_scale = ResourceVariable(
                self._initial_loss_scale, name="current_loss_scale", trainable=False
            )
            self._num_good_steps = ResourceVariable(
                ops.convert_to_tensor(0, dtype="int64"), name="good_steps", trainable=False
            )

    @property
    def initial_loss_scale(self) -> float:
        return self._initial_loss_scale

    @property
    def increment_period(self) -> int:
        return self._increment_period

    @property
    def multiplier(self) -> float:
        return self._multiplier

    def __call__(self):
        return self._current_loss_scale.value()

    def _variables(self) -> list:
        return [self._current_loss_scale, self._num_good_steps]

    def update(self, grads):
        """`(update, finite)`: `finite` is whether every gradient is finite (the
        optimizer applies them only then); `update` (a bool tensor, True when the scale
        was raised) changes the scale: halved (at least 1) after a non-finite gradient,
        raised by `multiplier` after `increment_period` finite steps (kept where the
        product would overflow), the count of good steps reset either way."""
        finite = _all_finite(grads)
        scale, good = self._current_loss_scale, self._num_good_steps

        def raise_scale():
            new_scale = scale.read_value() * self._multiplier

            def keep_new():
                return control_flow_ordering.group(
                    scale.assign(new_scale, read_value=False),
                    good.assign(0, read_value=False),
                )

            def keep_old():
                return good.assign(0, read_value=False)

            done = control_flow_cond.cond(
                special_math_ops.is_finite(new_scale), keep_new, keep_old
            )
            with ops.control_dependencies([done]):
                return ops.convert_to_tensor(True)

        def count_step():
            with ops.control_dependencies([good.assign_add(1, read_value=False)]):
                return ops.convert_to_tensor(False)

        def after_finite():
            due = math_ops.greater_equal(good.read_value() + 1, self._increment_period)
            return control_flow_cond.cond(due, raise_scale, count_step)

        def after_not_finite():
            lowered = math_ops.maximum(scale.read_value() / self._multiplier, 1.0)
            assigned = control_flow_ordering.group(
                scale.assign(lowered, read_value=False), good.assign(0, read_value=False)
            )
            with ops.control_dependencies([assigned]):
                return ops.convert_to_tensor(False)

        update = control_flow_cond.cond(finite, after_finite, after_not_finite)
        return update, finite

    def get_config(self) -> dict:
        return {
            "initial_loss_scale": self._initial_loss_scale,
            "increment_period": self._increment_period,
            "multiplier": self._multiplier,
        }

    def __repr__(self) -> str:
        return (
            f"DynamicLossScale(initial_loss_scale={self._initial_loss_scale}, "
            f"increment_period={self._increment_period}, multiplier={self._multiplier})"
        )


def _all_finite(grads):
    """One bool tensor: every element of every gradient (None skipped) is finite."""
    checks = []
    for g in grads:
        if g is None:
            continue
        values = g.values if isinstance(g, IndexedSlices) else g
        checks.append(reduction_ops.reduce_all(special_math_ops.is_finite(values)))
    if not checks:
        return ops.convert_to_tensor(True)
    return reduction_ops.reduce_all(manip_ops.stack(checks))


def _as_loss_scale(loss_scale) -> LossScale:
    if isinstance(loss_scale, LossScale):
        return loss_scale
    if isinstance(loss_scale, numbers.Real) and not isinstance(loss_scale, bool):
        return FixedLossScale(loss_scale)
    if loss_scale == "dynamic":
        return DynamicLossScale()
    raise ValueError(f"Could not interpret loss scale identifier: {loss_scale}")


class MixedPrecisionLossScaleOptimizer(Optimizer):
    """Wraps `opt`: gradients of `loss * loss_scale`, divided by it; the update is
    applied only when the loss scale says so (all gradients finite).

    Raises:
      ValueError: `opt` is not an Optimizer, or `loss_scale` is not "dynamic", a number
        >= 1 or a LossScale.
    """

    def __init__(self, opt, loss_scale):
        if not isinstance(opt, Optimizer):
            raise ValueError(f'"opt" must be an instance of Optimizer, but got: {type(opt)}')
        self._optimizer = opt
        super().__init__(use_locking=False, name=opt.get_name())
        self._loss_scale = _as_loss_scale(loss_scale)

    def compute_gradients(
        self,
        loss,
        var_list=None,
        gate_gradients=Optimizer.GATE_OP,
        aggregation_method=None,
        colocate_gradients_with_ops=False,
        grad_loss=None,
    ) -> list:
        scaled = loss * cast(self._loss_scale(), loss.dtype)
        grads_and_vars = self._optimizer.compute_gradients(
            scaled,
            var_list=var_list,
            gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
            grad_loss=grad_loss,
        )
        inverse = math_ops.reciprocal(self._loss_scale())
        return [(_unscaled(g, inverse), v) for g, v in grads_and_vars]

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The wrapped optimizer's update, under the loss scale's condition.

        With a fixed scale every update applies, so it is the wrapped optimizer's own op,
        as in TF.  Otherwise the update runs in a `cond` named `<name>-wrapped`, grouped
        with the scale's update as `name` (default the optimizer's name)."""
        grads_and_vars = tuple(grads_and_vars)
        if isinstance(self._loss_scale, FixedLossScale):
            return self._optimizer.apply_gradients(grads_and_vars, global_step, name)
        name = name or self._name
        update, should_apply = self._loss_scale.update([g for g, _ in grads_and_vars])

        def apply():
            return self._optimizer.apply_gradients(grads_and_vars, global_step, name + "-wrapped")

        if should_apply is True:
            applied = apply()
        else:
            applied = control_flow_cond.cond(should_apply, apply, control_flow_ordering.no_op)
        return control_flow_ordering.group(applied, update, name=name)

    def variables(self) -> list:
        own = self._loss_scale._variables()
        return sorted(self._optimizer.variables() + own, key=lambda v: v.name)


def _unscaled(grad, inverse):
    if grad is None:
        return None
    if isinstance(grad, IndexedSlices):
        values = grad.values * cast(inverse, grad.values.dtype)
        return IndexedSlices(values, grad.indices, grad.dense_shape)
    return grad * cast(inverse, grad.dtype)


# Whether enable_mixed_precision_graph_rewrite is on (TF keeps this process-wide too).
_rewrite_enabled = False


def enable_mixed_precision_graph_rewrite(opt, loss_scale="dynamic"):
    """`opt` wrapped in a MixedPrecisionLossScaleOptimizer, and the rewrite setting on.

    Raises:
      ValueError: `opt` is already a MixedPrecisionLossScaleOptimizer, or the loss
        scale cannot be interpreted.
    """
    global _rewrite_enabled
    if isinstance(opt, MixedPrecisionLossScaleOptimizer):
        raise ValueError(
            '"opt" must not already be an instance of a MixedPrecisionLossScaleOptimizer. '
            "`enable_mixed_precision_graph_rewrite` will automatically wrap the optimizer "
            "with a MixedPrecisionLossScaleOptimizer."
        )
    wrapped = MixedPrecisionLossScaleOptimizer(opt, loss_scale)
    if not _rewrite_enabled:
        _log.warning(
            "Mixed precision: asyncflow applies loss scaling but does not cast ops to "
            "float16; the model computes in its own dtypes."
        )
    _rewrite_enabled = True
    return wrapped


def disable_mixed_precision_graph_rewrite():
    """Turns the setting `enable_mixed_precision_graph_rewrite` set off."""
    global _rewrite_enabled
    _rewrite_enabled = False


class _Experimental:
    """`tf.mixed_precision.experimental`: the loss-scale classes again (TF1's)."""

    LossScale = LossScale
    FixedLossScale = FixedLossScale
    DynamicLossScale = DynamicLossScale


experimental = _Experimental()
