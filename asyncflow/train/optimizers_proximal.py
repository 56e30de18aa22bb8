"""TF1's regularising optimizers: ProximalGradientDescent, ProximalAdagrad, AdagradDA.

As optimizers.py: TF1's slot and hyper-parameter names, and the fused update ops of
ops/training_ops.py (ApplyProximalAdagrad, SparseApplyAdagradDA, ...), so variables
follow TF1's numbers step for step.  Sparse gradients are deduplicated (summed) first,
as TF1's base optimizer does.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import array_ops, init_ops, math_ops, training_ops
from asyncflow.train.optimizer import Optimizer

__all__ = ["ProximalGradientDescentOptimizer", "ProximalAdagradOptimizer", "AdagradDAOptimizer"]


def _cast(t, var):
    return math_ops.cast(t, var.dtype.base_dtype)


class _Regularised(Optimizer):
    """Learning rate plus l1/l2 strengths as tensors, built once per apply."""

    def __init__(self, learning_rate, l1, l2, use_locking, name):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._l1_regularization_strength = l1
        self._l2_regularization_strength = l2

    def _prepare(self):
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = ops.convert_to_tensor(lr, name="learning_rate")
        l1 = self._call_if_callable(self._l1_regularization_strength)
        self._l1_regularization_strength_tensor = ops.convert_to_tensor(
            l1, name="l1_regularization_strength"
        )
        l2 = self._call_if_callable(self._l2_regularization_strength)
        self._l2_regularization_strength_tensor = ops.convert_to_tensor(
            l2, name="l2_regularization_strength"
        )

    def _hyper(self, var):
        return [
            _cast(self._learning_rate_tensor, var),
            _cast(self._l1_regularization_strength_tensor, var),
            _cast(self._l2_regularization_strength_tensor, var),
        ]


class ProximalGradientDescentOptimizer(_Regularised):
    """Gradient descent followed by the proximal (l1 shrink, l2 scale) step
    (ApplyProximalGradientDescent)."""

    def __init__(self, learning_rate, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, use_locking=False,
                 name="ProximalGradientDescent"):  # fmt: skip
        super().__init__(learning_rate, l1_regularization_strength,
                         l2_regularization_strength, use_locking, name)  # fmt: skip

    def _apply_dense(self, grad, var):
        return training_ops.apply_proximal_gradient_descent(
            var, *self._hyper(var), grad, use_locking=self._use_locking
        ).op

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_proximal_gradient_descent(
            var, *self._hyper(var), grad.values, grad.indices, use_locking=self._use_locking
        ).op


class ProximalAdagradOptimizer(_Regularised):
    """Adagrad's per-coordinate step followed by the proximal step (ApplyProximalAdagrad).

    Raises:
      ValueError: `initial_accumulator_value` is not positive.
    """

    def __init__(self, learning_rate, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="ProximalAdagrad"):  # fmt: skip
        if initial_accumulator_value <= 0.0:
            raise ValueError(
                f"initial_accumulator_value must be positive: {initial_accumulator_value}"
            )
        super().__init__(learning_rate, l1_regularization_strength,
                         l2_regularization_strength, use_locking, name)  # fmt: skip
        self._initial_accumulator_value = initial_accumulator_value

    def _create_slots(self, var_list):
        for v in var_list:
            init = init_ops.constant_initializer(
                self._initial_accumulator_value, dtype=v.dtype.base_dtype
            )
            self._get_or_make_slot_with_initializer(
                v, init, v.get_shape(), v.dtype.base_dtype, "accumulator", self._name
            )

    def _apply_dense(self, grad, var):
        acc = self.get_slot(var, "accumulator")
        return training_ops.apply_proximal_adagrad(
            var, acc, *self._hyper(var), grad, use_locking=self._use_locking
        ).op

    def _apply_sparse(self, grad, var):
        acc = self.get_slot(var, "accumulator")
        return training_ops.sparse_apply_proximal_adagrad(
            var, acc, *self._hyper(var), grad.values, grad.indices, use_locking=self._use_locking
        ).op


class AdagradDAOptimizer(_Regularised):
    """Adagrad dual averaging (Duchi et al.): the variable is recomputed from the sums of
    gradients and squared gradients and `global_step` (ApplyAdagradDA).

    Raises:
      ValueError: `initial_gradient_squared_accumulator_value` is not positive.
    """

    def __init__(self, learning_rate, global_step,
                 initial_gradient_squared_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="AdagradDA"):  # fmt: skip
        if initial_gradient_squared_accumulator_value <= 0.0:
            raise ValueError(
                "initial_gradient_squared_accumulator_value must be positive: "
                f"{initial_gradient_squared_accumulator_value}"
            )
        super().__init__(learning_rate, l1_regularization_strength,
                         l2_regularization_strength, use_locking, name)  # fmt: skip
        self._initial_gradient_squared_accumulator_value = (
            initial_gradient_squared_accumulator_value
        )
        self._global_step = global_step

    def _create_slots(self, var_list):
        for v in var_list:
            dtype = v.dtype.base_dtype
            self._get_or_make_slot_with_initializer(
                v, init_ops.zeros_initializer(dtype=dtype), v.get_shape(), dtype,
                "gradient_accumulator", self._name,
            )  # fmt: skip
            gg_init = init_ops.constant_initializer(
                self._initial_gradient_squared_accumulator_value, dtype=dtype
            )
            self._get_or_make_slot_with_initializer(
                v, gg_init, v.get_shape(), dtype, "gradient_squared_accumulator", self._name
            )

    def _prepare(self):
        super()._prepare()
        # TF1 counts this update as step global_step + 1 (read once per apply)
        step = math_ops.cast(array_ops.identity(self._global_step), dtypes.int64)
        self._global_step_on_worker = step + 1

    def _step(self, var):
        with ops.device(var.device):
            return array_ops.identity(self._global_step_on_worker)

    def _apply_dense(self, grad, var):
        g_acc = self.get_slot(var, "gradient_accumulator")
        gg_acc = self.get_slot(var, "gradient_squared_accumulator")
        return training_ops.apply_adagrad_da(
            var, g_acc, gg_acc, grad, *self._hyper(var), self._step(var),
            use_locking=self._use_locking,
        ).op  # fmt: skip

    def _apply_sparse(self, grad, var):
        g_acc = self.get_slot(var, "gradient_accumulator")
        gg_acc = self.get_slot(var, "gradient_squared_accumulator")
        return training_ops.sparse_apply_adagrad_da(
            var, g_acc, gg_acc, grad.values, grad.indices, *self._hyper(var), self._step(var),
            use_locking=self._use_locking,
        ).op  # fmt: skip
