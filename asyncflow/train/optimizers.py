"""TF1's optimizers: GradientDescent, Momentum, Adagrad, Adadelta, RMSProp, Adam, Ftrl.

Each one names its slots and hyper-parameter tensors as TF1 does and emits the fused
update op of ops/training_ops.py (ApplyAdam, SparseApplyMomentum, ...), so a graph
built here has TF1's node names and its variables follow TF1's numbers step for step.
Hyper-parameters may be Python numbers, Tensors, or callables returning either.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.ops import array_ops, control_flow_ops, init_ops, math_ops, state_ops, training_ops
from asyncflow.train.optimizer import Optimizer, _make_indexed_slices

__all__ = [
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "AdagradOptimizer",
    "AdadeltaOptimizer",
    "RMSPropOptimizer",
    "AdamOptimizer",
    "FtrlOptimizer",
]


def _cast(t, var):
    return math_ops.cast(t, var.dtype.base_dtype)


class GradientDescentOptimizer(Optimizer):
    """var -= learning_rate * grad (ApplyGradientDescent; sparse: ScatterSub)."""

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._learning_rate_tensor = None

    def _prepare(self):
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = ops.convert_to_tensor(lr, name="learning_rate")

    def _apply_dense(self, grad, var):
        return training_ops.apply_gradient_descent(
            var, _cast(self._learning_rate_tensor, var), grad, use_locking=self._use_locking
        ).op

    def _apply_sparse_duplicate_indices(self, grad, var):
        # ScatterSub accumulates duplicates itself: no deduplication needed.
        delta = _make_indexed_slices(
            grad.values * _cast(self._learning_rate_tensor, var), grad.indices, grad.dense_shape
        )
        return var.scatter_sub(delta, use_locking=self._use_locking)


class MomentumOptimizer(Optimizer):
    """accum = momentum * accum + grad; var -= lr * accum (or Nesterov's variant)."""

    def __init__(
        self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False
    ):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self):
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = ops.convert_to_tensor(lr, name="learning_rate")
        momentum = self._call_if_callable(self._momentum)
        self._momentum_tensor = ops.convert_to_tensor(momentum, name="momentum")

    def _apply_dense(self, grad, var):
        return training_ops.apply_momentum(
            var,
            self.get_slot(var, "momentum"),
            _cast(self._learning_rate_tensor, var),
            grad,
            _cast(self._momentum_tensor, var),
            use_locking=self._use_locking,
            use_nesterov=self._use_nesterov,
        ).op

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_momentum(
            var,
            self.get_slot(var, "momentum"),
            _cast(self._learning_rate_tensor, var),
            grad.values,
            grad.indices,
            _cast(self._momentum_tensor, var),
            use_locking=self._use_locking,
            use_nesterov=self._use_nesterov,
        ).op


class AdagradOptimizer(Optimizer):
    """accum += grad**2; var -= lr * grad / sqrt(accum).

    Raises:
      ValueError: `initial_accumulator_value` is not positive.
    """

    def __init__(
        self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad"
    ):
        if initial_accumulator_value <= 0.0:
            raise ValueError(
                f"initial_accumulator_value must be positive: {initial_accumulator_value}"
            )
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value
        self._learning_rate_tensor = None

    def _create_slots(self, var_list):
        for v in var_list:
            dtype = v.dtype.base_dtype
            if v.get_shape().is_fully_defined():
                init = init_ops.constant_initializer(self._initial_accumulator_value)
            else:
                init = self._init_constant_op(v, dtype)
            self._get_or_make_slot_with_initializer(
                v, init, v.get_shape(), dtype, "accumulator", self._name
            )

    def _init_constant_op(self, v, dtype):
        def init():
            value = array_ops.fill(array_ops.shape(v), self._initial_accumulator_value)
            return math_ops.cast(value, dtype)

        return init

    def _prepare(self):
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = ops.convert_to_tensor(lr, name="learning_rate")

    def _apply_dense(self, grad, var):
        return training_ops.apply_adagrad(
            var,
            self.get_slot(var, "accumulator"),
            _cast(self._learning_rate_tensor, var),
            grad,
            use_locking=self._use_locking,
        )

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_adagrad(
            var,
            self.get_slot(var, "accumulator"),
            _cast(self._learning_rate_tensor, var),
            grad.values,
            grad.indices,
            use_locking=self._use_locking,
        )


class AdadeltaOptimizer(Optimizer):
    """Adadelta (Zeiler 2012) with TF's learning-rate scaling (ApplyAdadelta)."""

    def __init__(
        self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking=False, name="Adadelta"
    ):
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._rho = rho
        self._epsilon = epsilon

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "accum", self._name)
            self._zeros_slot(v, "accum_update", self._name)

    def _prepare(self):
        self._lr_t = ops.convert_to_tensor(self._call_if_callable(self._lr), name="lr")
        self._rho_t = ops.convert_to_tensor(self._call_if_callable(self._rho), name="rho")
        self._epsilon_t = ops.convert_to_tensor(
            self._call_if_callable(self._epsilon), name="epsilon"
        )

    def _args(self, var):
        return (
            var,
            self.get_slot(var, "accum"),
            self.get_slot(var, "accum_update"),
            _cast(self._lr_t, var),
            _cast(self._rho_t, var),
            _cast(self._epsilon_t, var),
        )

    def _apply_dense(self, grad, var):
        return training_ops.apply_adadelta(*self._args(var), grad, use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_adadelta(
            *self._args(var), grad.values, grad.indices, use_locking=self._use_locking
        )


class RMSPropOptimizer(Optimizer):
    """RMSProp with optional momentum and centering (ApplyRMSProp / ApplyCenteredRMSProp).

    The "rms" slot starts at ones, as in TF1.
    """

    def __init__(
        self,
        learning_rate,
        decay=0.9,
        momentum=0.0,
        epsilon=1e-10,
        use_locking=False,
        centered=False,
        name="RMSProp",
    ):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = centered

    def _create_slots(self, var_list):
        for v in var_list:
            if v.get_shape().is_fully_defined():
                init_rms = init_ops.ones_initializer()
            else:
                init_rms = array_ops.ones_like(v)
            self._get_or_make_slot_with_initializer(
                v, init_rms, v.get_shape(), v.dtype.base_dtype, "rms", self._name
            )
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self):
        c = self._call_if_callable
        self._learning_rate_tensor = ops.convert_to_tensor(
            c(self._learning_rate), name="learning_rate"
        )
        self._decay_tensor = ops.convert_to_tensor(c(self._decay), name="decay")
        self._momentum_tensor = ops.convert_to_tensor(c(self._momentum), name="momentum")
        self._epsilon_tensor = ops.convert_to_tensor(c(self._epsilon), name="epsilon")

    def _refs(self, var):
        refs = [var]
        if self._centered:
            refs.append(self.get_slot(var, "mg"))
        refs += [self.get_slot(var, "rms"), self.get_slot(var, "momentum")]
        return refs

    def _hyper(self, var):
        return [
            _cast(self._learning_rate_tensor, var),
            _cast(self._decay_tensor, var),
            _cast(self._momentum_tensor, var),
            _cast(self._epsilon_tensor, var),
        ]

    def _apply_dense(self, grad, var):
        fn = (
            training_ops.apply_centered_rms_prop if self._centered else training_ops.apply_rms_prop
        )
        args = self._refs(var) + self._hyper(var) + [grad]
        return fn(*args, use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        fn = (
            training_ops.sparse_apply_centered_rms_prop
            if self._centered
            else training_ops.sparse_apply_rms_prop
        )
        args = self._refs(var) + self._hyper(var) + [grad.values, grad.indices]
        return fn(*args, use_locking=self._use_locking)


class AdamOptimizer(Optimizer):
    """Adam (Kingma & Ba) with TF1's bias correction folded into the step size.

    Non-slot variables "beta1_power" / "beta2_power" hold beta**t; `_finish` advances
    them after every update of a step.
    """

    def __init__(
        self,
        learning_rate=0.001,
        beta1=0.9,
        beta2=0.999,
        epsilon=1e-8,
        use_locking=False,
        name="Adam",
        use_own_namescope_for_non_slot_vars=False,
    ):
        super().__init__(use_locking, name, use_own_namescope_for_non_slot_vars)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon

    def _get_beta_accumulators(self):
        graph = ops.get_default_graph()
        return (
            self._get_non_slot_variable("beta1_power", graph=graph),
            self._get_non_slot_variable("beta2_power", graph=graph),
        )

    def _create_slots(self, var_list):
        first_var = min(var_list, key=lambda x: x.name)
        self._create_non_slot_variable(self._beta1, "beta1_power", first_var)
        self._create_non_slot_variable(self._beta2, "beta2_power", first_var)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _prepare(self):
        c = self._call_if_callable
        self._lr_t = ops.convert_to_tensor(c(self._lr), name="learning_rate")
        self._beta1_t = ops.convert_to_tensor(c(self._beta1), name="beta1")
        self._beta2_t = ops.convert_to_tensor(c(self._beta2), name="beta2")
        self._epsilon_t = ops.convert_to_tensor(c(self._epsilon), name="epsilon")

    def _apply_dense(self, grad, var):
        beta1_power, beta2_power = self._get_beta_accumulators()
        return training_ops.apply_adam(
            var,
            self.get_slot(var, "m"),
            self.get_slot(var, "v"),
            _cast(beta1_power, var),
            _cast(beta2_power, var),
            _cast(self._lr_t, var),
            _cast(self._beta1_t, var),
            _cast(self._beta2_t, var),
            _cast(self._epsilon_t, var),
            grad,
            use_locking=self._use_locking,
        ).op

    def _apply_sparse(self, grad, var):
        # TF1 builds sparse Adam from dense decay + scatter_add, updating all of var.
        beta1_power, beta2_power = self._get_beta_accumulators()
        beta1_power, beta2_power = _cast(beta1_power, var), _cast(beta2_power, var)
        lr_t, beta1_t = _cast(self._lr_t, var), _cast(self._beta1_t, var)
        beta2_t, epsilon_t = _cast(self._beta2_t, var), _cast(self._epsilon_t, var)
        lr = lr_t * math_ops.sqrt(1 - beta2_power) / (1 - beta1_power)
        values, indices = grad.values, grad.indices
        m = self.get_slot(var, "m")
        m_scaled = values * (1 - beta1_t)
        m_t = state_ops.assign(m, m * beta1_t, use_locking=self._use_locking)
        with ops.control_dependencies([m_t]):
            m_t = state_ops.scatter_add(m, indices, m_scaled, use_locking=self._use_locking)
        v = self.get_slot(var, "v")
        v_scaled = (values * values) * (1 - beta2_t)
        v_t = state_ops.assign(v, v * beta2_t, use_locking=self._use_locking)
        with ops.control_dependencies([v_t]):
            v_t = state_ops.scatter_add(v, indices, v_scaled, use_locking=self._use_locking)
        v_sqrt = math_ops.sqrt(v_t)
        var_update = state_ops.assign_sub(
            var, lr * m_t / (v_sqrt + epsilon_t), use_locking=self._use_locking
        )
        return control_flow_ops.group(var_update, m_t, v_t)

    def _finish(self, update_ops, name_scope):
        with ops.control_dependencies(update_ops):
            beta1_power, beta2_power = self._get_beta_accumulators()
            with ops.colocate_with(beta1_power.op):
                update_beta1 = beta1_power.assign(
                    beta1_power * self._beta1_t, use_locking=self._use_locking
                )
                update_beta2 = beta2_power.assign(
                    beta2_power * self._beta2_t, use_locking=self._use_locking
                )
        return control_flow_ops.group(*update_ops, update_beta1, update_beta2, name=name_scope)


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal (McMahan et al. 2013), with TF's L2 shrinkage variant (ApplyFtrlV2).

    Raises:
      ValueError: a negative accumulator or regularisation strength, or a positive
        `learning_rate_power`.
    """

    def __init__(
        self,
        learning_rate,
        learning_rate_power=-0.5,
        initial_accumulator_value=0.1,
        l1_regularization_strength=0.0,
        l2_regularization_strength=0.0,
        use_locking=False,
        name="Ftrl",
        accum_name=None,
        linear_name=None,
        l2_shrinkage_regularization_strength=0.0,
        beta=None,
    ):
        super().__init__(use_locking, name)
        checks = {
            "initial_accumulator_value": initial_accumulator_value,
            "l1_regularization_strength": l1_regularization_strength,
            "l2_regularization_strength": l2_regularization_strength,
            "l2_shrinkage_regularization_strength": l2_shrinkage_regularization_strength,
        }
        for what, value in checks.items():
            if value < 0.0:
                raise ValueError(f"{what} {value:f} needs to be positive or zero")
        if learning_rate_power > 0.0:
            raise ValueError(
                f"learning_rate_power {learning_rate_power:f} needs to be negative or zero"
            )
        self._learning_rate = learning_rate
        self._learning_rate_power = learning_rate_power
        self._initial_accumulator_value = initial_accumulator_value
        self._l1_regularization_strength = l1_regularization_strength
        self._l2_regularization_strength = l2_regularization_strength
        self._beta = 0.0 if beta is None else beta
        self._l2_shrinkage_regularization_strength = l2_shrinkage_regularization_strength
        self._accum_name = accum_name
        self._linear_name = linear_name

    def _create_slots(self, var_list):
        def accum_initializer(shape, dtype=None, partition_info=None):
            return array_ops.ones(shape=shape, dtype=dtype) * self._initial_accumulator_value

        for v in var_list:
            self._get_or_make_slot_with_initializer(
                v,
                accum_initializer,
                v.shape,
                v.dtype.base_dtype,
                "accum",
                self._accum_name or self._name,
            )
            self._zeros_slot(v, "linear", self._linear_name or self._name)

    def _prepare(self):
        self._learning_rate_tensor = ops.convert_to_tensor(
            self._learning_rate, name="learning_rate"
        )
        self._l1_regularization_strength_tensor = ops.convert_to_tensor(
            self._l1_regularization_strength, name="l1_regularization_strength"
        )
        adjusted = self._l2_regularization_strength + self._beta / (
            2.0 * math_ops.maximum(self._learning_rate, 1e-36)
        )
        self._adjusted_l2_regularization_strength_tensor = ops.convert_to_tensor(
            adjusted, name="adjusted_l2_regularization_strength"
        )
        self._l2_shrinkage_regularization_strength_tensor = ops.convert_to_tensor(
            self._l2_shrinkage_regularization_strength,
            name="l2_shrinkage_regularization_strength",
        )
        self._learning_rate_power_tensor = ops.convert_to_tensor(
            self._learning_rate_power, name="learning_rate_power"
        )

    def _hyper(self, var):
        out = [
            _cast(self._learning_rate_tensor, var),
            _cast(self._l1_regularization_strength_tensor, var),
            _cast(self._adjusted_l2_regularization_strength_tensor, var),
        ]
        if self._l2_shrinkage_regularization_strength > 0.0:
            out.append(_cast(self._l2_shrinkage_regularization_strength_tensor, var))
        out.append(_cast(self._learning_rate_power_tensor, var))
        return out

    def _slots_of(self, var):
        return [var, self.get_slot(var, "accum"), self.get_slot(var, "linear")]

    def _apply_dense(self, grad, var):
        shrink = self._l2_shrinkage_regularization_strength > 0.0
        fn = training_ops.apply_ftrl_v2 if shrink else training_ops.apply_ftrl
        return fn(*self._slots_of(var), grad, *self._hyper(var), use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        shrink = self._l2_shrinkage_regularization_strength > 0.0
        fn = training_ops.sparse_apply_ftrl_v2 if shrink else training_ops.sparse_apply_ftrl
        return fn(
            *self._slots_of(var),
            grad.values,
            grad.indices,
            *self._hyper(var),
            use_locking=self._use_locking,
        )
