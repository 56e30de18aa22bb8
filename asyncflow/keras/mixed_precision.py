"""`tf.keras.mixed_precision.LossScaleOptimizer` in TF1 graph mode: a Keras optimizer
wrapper that multiplies the loss by a loss scale before differentiating, divides the
gradients by it, and applies them only when all are finite.

A dynamic scale (the default: 2**15) halves after a step with a non-finite gradient and
doubles after `dynamic_growth_steps` (2000) finite steps in a row; a static one stays.
The scale and its step counter are variables ("current_loss_scale", "good_steps") made
with the wrapper; `weights`/`variables()` are the inner optimizer's, as TF lists them.

Invariant: the inner optimizer's weights exist before the conditional apply is built,
so no variable is created inside a cond branch.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow import resource_variable as _rv
from asyncflow.keras import optimizers
from asyncflow.ops import (
    array_ops,
    control_flow_cond,
    control_flow_ordering,
    math_ops,
    reduction_ops,
    special_math_ops,
)

__all__ = ["LossScaleOptimizer"]


class LossScaleOptimizer(optimizers.Optimizer):
    """Loss scaling around a Keras optimizer (`inner_optimizer`).

    Raises:
      TypeError: an inner optimizer that is not a Keras optimizer.
      ValueError: a clipping inner optimizer; `initial_scale` missing for a static scale,
        or `dynamic_growth_steps` given with one.
    """

    def __init__(self, inner_optimizer, dynamic=True, initial_scale=None,
                 dynamic_growth_steps=None):  # fmt: skip
        if not isinstance(inner_optimizer, optimizers.Optimizer):
            raise TypeError(
                '"inner_optimizer" must be an instance of `tf.keras.optimizers.Optimizer` or '
                "`tf.keras.optimizers.experimental.Optimizer`, but got: "
                f"{inner_optimizer}."
            )
        if inner_optimizer.clipnorm is not None or inner_optimizer.clipvalue is not None:
            raise ValueError(
                "LossScaleOptimizer does not support wrapping optimizers with a clipnorm or "
                f"clipvalue. Optimizer {inner_optimizer} has clipnorm "
                f"{inner_optimizer.clipnorm} and clipvalue {inner_optimizer.clipvalue}"
            )
        if not dynamic:
            if initial_scale is None:
                raise ValueError('"initial_scale" must be specified if "dynamic" is False')
            if dynamic_growth_steps is not None:
                raise ValueError(
                    '"dynamic_growth_steps" must be None if "dynamic" is False, but got: '
                    f"{dynamic_growth_steps}"
                )
        super().__init__("LossScaleOptimizer")
        self.inner_optimizer = inner_optimizer
        self.dynamic = bool(dynamic)
        self.initial_scale = float(2**15 if initial_scale is None else initial_scale)
        self.dynamic_growth_steps = None
        if dynamic:
            steps = dynamic_growth_steps
            self.dynamic_growth_steps = 2000 if steps is None else int(steps)
        self._scale = _rv.ResourceVariable(
            self.initial_scale, name="current_loss_scale", dtype=dtypes.float32,
            trainable=False,
        )  # fmt: skip
        self._good_steps = None
        if self.dynamic:
            self._good_steps = _rv.ResourceVariable(
                0, name="good_steps", dtype=dtypes.int64, trainable=False
            )

    @property
    def loss_scale(self):
        """The current loss scale (a float32 tensor)."""
        return self._scale.read_value()

    @property
    def iterations(self):
        return self.inner_optimizer.iterations

    @property
    def weights(self) -> list:
        return self.inner_optimizer.weights

    def variables(self) -> list:
        return self.inner_optimizer.variables()

    def get_weights(self) -> list:
        return self.inner_optimizer.get_weights()

    def set_weights(self, weights) -> None:
        self.inner_optimizer.set_weights(weights)

    def get_scaled_loss(self, loss):
        """`loss * loss_scale` (a callable loss is wrapped)."""
        if callable(loss):
            return lambda: loss() * self._scale.read_value()
        return loss * self._scale.read_value()

    def get_unscaled_gradients(self, grads) -> list:
        """Each gradient times 1 / loss_scale (None stays None)."""
        reciprocal = 1.0 / self._scale.read_value()
        return [None if g is None else g * reciprocal for g in grads]

    def get_gradients(self, loss, params) -> list:
        scaled = self.get_scaled_loss(loss)
        return self.get_unscaled_gradients(self.inner_optimizer.get_gradients(scaled, params))

    def get_updates(self, loss, params) -> list:
        grads = self.get_gradients(loss, params)
        return [self.apply_gradients(list(zip(grads, params, strict=True)))]

    def apply_gradients(self, grads_and_vars, name=None):
        """Apply through the inner optimizer when every gradient is finite, and move the
        dynamic scale; one op for both."""
        grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
        self.inner_optimizer._create_all_weights([v for _, v in grads_and_vars])
        finite = reduction_ops.reduce_all(
            array_ops.stack(
                [
                    reduction_ops.reduce_all(special_math_ops.is_finite(g))
                    for g, _ in grads_and_vars
                ]
            )
        )

        def apply():
            return control_flow_ordering.group(
                self.inner_optimizer.apply_gradients(grads_and_vars, name=name)
            )

        applied = control_flow_cond.cond(finite, apply, control_flow_ordering.no_op)
        if not self.dynamic:
            return applied
        return control_flow_ordering.group(applied, self._update_scale(finite))

    def _update_scale(self, finite):
        def grown():
            steps = self._good_steps.read_value() + 1
            grow = steps >= self.dynamic_growth_steps
            new_scale = control_flow_cond.cond(
                grow, lambda: self._scale.read_value() * 2.0, self._scale.read_value
            )
            new_steps = control_flow_cond.cond(
                grow, lambda: ops.convert_to_tensor(0, dtype=dtypes.int64), lambda: steps
            )
            return control_flow_ordering.group(
                self._scale.assign(new_scale), self._good_steps.assign(new_steps)
            )

        def shrunk():
            new_scale = math_ops.maximum(self._scale.read_value() / 2.0, 1.0)
            return control_flow_ordering.group(
                self._scale.assign(new_scale), self._good_steps.assign(0)
            )

        return control_flow_cond.cond(finite, grown, shrunk)

    def get_config(self) -> dict:
        return {
            "inner_optimizer": optimizers.serialize(self.inner_optimizer),
            "dynamic": self.dynamic,
            "initial_scale": self.initial_scale,
            "dynamic_growth_steps": self.dynamic_growth_steps,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        inner = optimizers.deserialize(config.pop("inner_optimizer"), custom_objects)
        return cls(inner, **config)
