"""`tf.keras.optimizers` in TF1 graph mode: Keras' (legacy OptimizerV2) SGD, Adam,
RMSprop, Adagrad, Adadelta, Adamax, Nadam and Ftrl, with Keras' argument names and
defaults, plus `get`; a `schedules` LearningRateSchedule may be the learning rate (it is
called with the iteration count).

`get_updates(loss, params)` builds one update op per call, as Keras' v1 training loop
asks for.  The optimizer's state lives in non-trainable variables made on first use in
the caller's name scope ("training/Adam/iter", "training/Adam/learning_rate",
"training/Adam/dense/kernel/m", ...).  Updates follow Keras' formulas (which differ from
TF1's tf.train optimizers: RMSprop's slot starts at zero and its epsilon is added
outside the square root; Adam's beta powers come from the iteration count), using TF's
training kernels (ApplyAdam, ApplyGradientDescent, ...) where Keras does.

A TF1 `tf.train.Optimizer` given to `compile` is wrapped in `TFOptimizer`.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow import resource_variable as _rv
from asyncflow.gradients import gradients as _gradients_fn
from asyncflow.keras import backend
from asyncflow.keras import learning_rate_schedule as schedules
from asyncflow.keras.serialization import (
    deserialize_keras_object,
    get_custom_objects,
    serialize_keras_object,
)
from asyncflow.keras.utils import unknown_object
from asyncflow.ops import cast_ops, math_ops, training_ops
from asyncflow.train.optimizer import Optimizer as _TF1Optimizer

__all__ = [
    "Optimizer", "SGD", "Adam", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl",
    "TFOptimizer", "schedules", "legacy", "get", "serialize", "deserialize",
]  # fmt: skip


class Optimizer:
    """Keras' optimizer base: hyperparameters as variables, slots per weight,
    an int64 iteration counter.

    Raises:
      TypeError: an unknown keyword argument.
    """

    _slot_names: tuple = ()

    def __init__(self, name, **kwargs):
        allowed = {"clipnorm", "clipvalue", "lr", "decay", "global_clipnorm"}
        for k in kwargs:
            if k not in allowed:
                raise TypeError(f"Unexpected keyword argument passed to optimizer: {k}")
        self._name = name
        self._hyper: dict = {}
        self._hyper_vars: dict = {}
        self._slots: dict = {}
        self._iterations = None
        self._initial_decay = float(kwargs.get("decay", 0.0))
        self.clipnorm, self.clipvalue = kwargs.get("clipnorm"), kwargs.get("clipvalue")
        self._set_hyper("decay", self._initial_decay)
        self.weights_created = False

    def _set_hyper(self, name, value) -> None:
        self._hyper[name] = value

    def _get_hyper(self, name):
        if name in self._hyper_vars:
            return self._hyper_vars[name].value()
        if isinstance(self._hyper[name], schedules.LearningRateSchedule):
            return self._hyper[name]
        return ops.convert_to_tensor(self._hyper[name], dtype=dtypes.float32)

    def __getattr__(self, name):
        hyper = self.__dict__.get("_hyper", {})
        if name in hyper:
            return self._hyper_vars.get(name, hyper[name])
        if name == "lr" and "learning_rate" in hyper:
            return self._hyper_vars.get("learning_rate", hyper["learning_rate"])
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    @property
    def iterations(self):
        if self._iterations is None:
            self._iterations = _rv.ResourceVariable(
                0, name="iter", dtype=dtypes.int64, trainable=False
            )
        return self._iterations

    def _create_all_weights(self, params) -> None:
        _ = self.iterations
        if not self.weights_created:
            for name in sorted(self._hyper):
                value = self._hyper[name]
                if isinstance(value, schedules.LearningRateSchedule):
                    continue
                self._hyper_vars[name] = _rv.ResourceVariable(
                    float(value), name=name, dtype=dtypes.float32, trainable=False
                )
            self.weights_created = True
        for slot in self._slot_names:
            for p in params:
                key = (slot, id(p))
                if key not in self._slots:
                    base = p.op.name
                    self._slots[key] = _rv.ResourceVariable(
                        lambda p=p: _zeros_like(p),
                        name=f"{base}/{slot}",
                        dtype=p.dtype.base_dtype,
                        trainable=False,
                    )

    def get_slot(self, var, slot_name):
        return self._slots[(slot_name, id(var))]

    def _decayed_lr(self):
        lr = self._get_hyper("learning_rate")
        if isinstance(lr, schedules.LearningRateSchedule):
            lr = cast_ops.cast(lr(cast_ops.cast(self.iterations, dtypes.float32)), dtypes.float32)
        if self._initial_decay > 0.0:
            step = cast_ops.cast(self.iterations, dtypes.float32)
            lr = lr / (1.0 + self._get_hyper("decay") * step)
        return lr

    def get_gradients(self, loss, params) -> list:
        """d(loss)/d(params), clipped by clipnorm/clipvalue if set.

        Raises:
          ValueError: a weight the loss does not depend on.
        """
        grads = _gradients_fn(loss, params)
        for g, p in zip(grads, params, strict=True):
            if g is None:
                raise ValueError(
                    f"Variable {p} has `None` for gradient. Please make sure that all of your "
                    "ops have a gradient defined (i.e. are differentiable). Common ops without "
                    "gradient: K.argmax, K.round, K.eval."
                )
        if self.clipnorm is not None:
            from asyncflow import clip_ops

            grads = [clip_ops.clip_by_norm(g, self.clipnorm) for g in grads]
        if self.clipvalue is not None:
            from asyncflow import clip_ops

            grads = [clip_ops.clip_by_value(g, -self.clipvalue, self.clipvalue) for g in grads]
        return grads

    def get_updates(self, loss, params) -> list:
        grads = self.get_gradients(loss, params)
        return [self.apply_gradients(list(zip(grads, params, strict=True)))]

    def apply_gradients(self, grads_and_vars, name=None):
        """One op applying every (gradient, variable) pair, then counting the step."""
        grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
        params = [v for _, v in grads_and_vars]
        # Weights go in the caller's scope ("training/Adam/iter" under Keras' loop).
        self._create_all_weights(params)
        with ops.name_scope(name or self._name):
            coeffs = self._prepare()
            updates = []
            for g, v in grads_and_vars:
                with ops.name_scope("update_" + v.op.name):
                    update = self._apply_dense(ops.convert_to_tensor(g), v, coeffs)
                    if getattr(v, "constraint", None) is not None:
                        # Keras projects the updated weight through its constraint.
                        with ops.control_dependencies([update]):
                            update = v.assign(v.constraint(v.read_value())).op
                    updates.append(update)
            with ops.control_dependencies(updates):
                return self.iterations.assign_add(1)

    def _prepare(self) -> dict:
        return {"lr_t": self._decayed_lr()}

    def get_config(self) -> dict:
        """The constructor arguments; a hyperparameter whose variable exists is read
        from it (a float32 value, as TF's Keras reports it)."""
        config = {"name": self._name}
        config.update({k: v for k, v in self._hyper.items()})
        for k, v in config.items():
            if isinstance(v, schedules.LearningRateSchedule):
                config[k] = schedules.serialize(v)
        if self._hyper_vars:
            names = sorted(self._hyper_vars)
            values = backend.batch_get_value([self._hyper_vars[k] for k in names])
            config.update({k: float(v) for k, v in zip(names, values, strict=True)})
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        if "lr" in config:
            config["learning_rate"] = config.pop("lr")
        if isinstance(config.get("learning_rate"), dict):
            config["learning_rate"] = schedules.deserialize(
                config["learning_rate"], custom_objects=custom_objects
            )
        return cls(**config)

    def variables(self) -> list:
        """The same list as `weights` (TF's: the hyperparameter variables are not in it)."""
        return self.weights

    @property
    def weights(self) -> list:
        """The optimizer's state as TF's Keras lists it (and saves it): iterations, then
        the slots (each slot kind for every weight in turn); hyperparameters are in
        its config instead."""
        if self._iterations is None:
            return []
        return [self._iterations] + list(self._slots.values())

    def get_weights(self) -> list:
        return backend.batch_get_value(self.weights)

    def set_weights(self, weights) -> None:
        """Assign the state (numpy arrays in `weights` order).

        Raises:
          ValueError: a different number of arrays, or an array of another shape.
        """
        backend.set_checked_weights(self.weights, weights, f"optimizer {self._name}", "optimizer")


def _zeros_like(p):
    from asyncflow.ops import array_ops

    return array_ops.zeros(p.shape.as_list(), dtype=p.dtype.base_dtype)


def _lr_arg(learning_rate, kwargs):
    return kwargs.pop("lr", learning_rate)


class SGD(Optimizer):
    """Gradient descent, with optional (Nesterov) momentum:
    velocity = momentum * velocity - lr * grad; var += velocity."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, name="SGD", **kwargs):
        lr = _lr_arg(learning_rate, kwargs)
        super().__init__(name, **kwargs)
        self._set_hyper("learning_rate", lr)
        self._momentum = not (isinstance(momentum, (int, float)) and momentum == 0)
        if isinstance(momentum, (int, float)) and not 0 <= momentum <= 1:
            raise ValueError(f"`momentum` must be between [0, 1]. Received: momentum={momentum}")
        self._set_hyper("momentum", momentum)
        self.nesterov = nesterov
        self._slot_names = ("momentum",) if self._momentum else ()

    def get_config(self) -> dict:
        return {**super().get_config(), "nesterov": self.nesterov}

    def _apply_dense(self, grad, var, coeffs):
        lr = coeffs["lr_t"]
        if not self._momentum:
            return training_ops.apply_gradient_descent(var, lr, grad).op
        momentum = self._get_hyper("momentum")
        accum = self.get_slot(var, "momentum")
        new_accum = accum.assign(momentum * accum - lr * grad)
        if self.nesterov:
            return var.assign_add(momentum * new_accum - lr * grad).op
        return var.assign_add(new_accum).op


class Adam(Optimizer):
    """Adam (Kingma & Ba) with Keras' defaults (epsilon 1e-7); the step's beta powers
    are beta ** (iterations + 1)."""

    _slot_names = ("m", "v")

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-7,
        amsgrad=False,
        name="Adam",
        **kwargs,
    ):
        lr = _lr_arg(learning_rate, kwargs)
        super().__init__(name, **kwargs)
        self._set_hyper("learning_rate", lr)
        self._set_hyper("beta_1", beta_1)
        self._set_hyper("beta_2", beta_2)
        self.epsilon = epsilon
        self.amsgrad = amsgrad
        if amsgrad:
            # Keras makes the running maximum of v as a third slot, after every m and v.
            self._slot_names = ("m", "v", "vhat")

    def _prepare(self) -> dict:
        step = cast_ops.cast(self.iterations + 1, dtypes.float32)
        b1, b2 = self._get_hyper("beta_1"), self._get_hyper("beta_2")
        return {
            "lr_t": self._decayed_lr(),
            "beta_1_t": b1,
            "beta_2_t": b2,
            "beta_1_power": math_ops.pow(b1, step),
            "beta_2_power": math_ops.pow(b2, step),
            "epsilon": ops.convert_to_tensor(self.epsilon, dtypes.float32),
        }

    def _apply_dense(self, grad, var, c):
        if self.amsgrad:
            return training_ops.apply_adam_with_amsgrad(
                var, self.get_slot(var, "m"), self.get_slot(var, "v"),
                self.get_slot(var, "vhat"), c["beta_1_power"], c["beta_2_power"],
                c["lr_t"], c["beta_1_t"], c["beta_2_t"], c["epsilon"], grad,
            ).op  # fmt: skip
        return training_ops.apply_adam(
            var,
            self.get_slot(var, "m"),
            self.get_slot(var, "v"),
            c["beta_1_power"],
            c["beta_2_power"],
            c["lr_t"],
            c["beta_1_t"],
            c["beta_2_t"],
            c["epsilon"],
            grad,
        ).op

    def get_config(self) -> dict:
        return {**super().get_config(), "epsilon": self.epsilon, "amsgrad": self.amsgrad}


class RMSprop(Optimizer):
    """RMSprop as Keras computes it: rms = rho * rms + (1 - rho) * grad**2 (rms starts
    at 0); var -= lr * grad / (sqrt(rms) + epsilon); with momentum, TF's RMSProp kernel."""

    def __init__(
        self,
        learning_rate=0.001,
        rho=0.9,
        momentum=0.0,
        epsilon=1e-7,
        centered=False,
        name="RMSprop",
        **kwargs,
    ):
        lr = _lr_arg(learning_rate, kwargs)
        super().__init__(name, **kwargs)
        self._set_hyper("learning_rate", lr)
        self._set_hyper("rho", rho)
        self._set_hyper("momentum", momentum)
        self._momentum = momentum != 0
        self.epsilon, self.centered = epsilon, centered
        slots = ["rms"] + (["momentum"] if self._momentum else []) + (["mg"] if centered else [])
        self._slot_names = tuple(slots)

    def _prepare(self) -> dict:
        rho = self._get_hyper("rho")
        return {
            "lr_t": self._decayed_lr(),
            "rho": rho,
            "one_minus_rho": 1.0 - rho,
            "momentum": self._get_hyper("momentum"),
            "epsilon": ops.convert_to_tensor(self.epsilon, dtypes.float32),
        }

    def _apply_dense(self, grad, var, c):
        rms = self.get_slot(var, "rms")
        if self._momentum:
            mom = self.get_slot(var, "momentum")
            if self.centered:
                return training_ops.apply_centered_rms_prop(
                    var,
                    self.get_slot(var, "mg"),
                    rms,
                    mom,
                    c["lr_t"],
                    c["rho"],
                    c["momentum"],
                    c["epsilon"],
                    grad,
                ).op
            return training_ops.apply_rms_prop(
                var, rms, mom, c["lr_t"], c["rho"], c["momentum"], c["epsilon"], grad
            ).op
        rms_t = rms.assign(c["rho"] * rms + c["one_minus_rho"] * math_ops.square(grad))
        denom = rms_t
        if self.centered:
            mg = self.get_slot(var, "mg")
            mg_t = mg.assign(c["rho"] * mg + c["one_minus_rho"] * grad)
            denom = rms_t - math_ops.square(mg_t)
        return var.assign_sub(c["lr_t"] * grad / (math_ops.sqrt(denom) + c["epsilon"])).op

    def get_config(self) -> dict:
        return {**super().get_config(), "epsilon": self.epsilon, "centered": self.centered}


class Adagrad(Optimizer):
    """Adagrad: accumulator starts at `initial_accumulator_value` (0.1); TF's Adagrad
    kernel (var -= lr * grad / sqrt(accum))."""

    _slot_names = ("accumulator",)

    def __init__(
        self,
        learning_rate=0.001,
        initial_accumulator_value=0.1,
        epsilon=1e-7,
        name="Adagrad",
        **kwargs,
    ):
        lr = _lr_arg(learning_rate, kwargs)
        super().__init__(name, **kwargs)
        self._set_hyper("learning_rate", lr)
        self._initial_accumulator_value, self.epsilon = initial_accumulator_value, epsilon

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "initial_accumulator_value": self._initial_accumulator_value,
            "epsilon": self.epsilon,
        }

    def _create_all_weights(self, params) -> None:
        for p in params:
            key = ("accumulator", id(p))
            if key not in self._slots:
                value = self._initial_accumulator_value
                self._slots[key] = _rv.ResourceVariable(
                    lambda p=p, value=value: _zeros_like(p) + value,
                    name=f"{p.op.name}/accumulator",
                    dtype=p.dtype.base_dtype,
                    trainable=False,
                )
        saved, self._slot_names = self._slot_names, ()
        super()._create_all_weights(params)
        self._slot_names = saved

    def _apply_dense(self, grad, var, c):
        acc = self.get_slot(var, "accumulator")
        acc_t = acc.assign_add(math_ops.square(grad))
        return var.assign_sub(c["lr_t"] * grad / (math_ops.sqrt(acc_t) + self.epsilon)).op


class Adadelta(Optimizer):
    """Adadelta (Zeiler) through TF's ApplyAdadelta kernel; slots accum_grad and
    accum_var start at zero."""

    _slot_names = ("accum_grad", "accum_var")

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-7, name="Adadelta", **kwargs):
        lr = _lr_arg(learning_rate, kwargs)
        super().__init__(name, **kwargs)
        self._set_hyper("learning_rate", lr)
        self._set_hyper("rho", rho)
        self.epsilon = epsilon or backend.epsilon()

    def _prepare(self) -> dict:
        return {"lr_t": self._decayed_lr(), "rho": self._get_hyper("rho"),
                "epsilon": ops.convert_to_tensor(self.epsilon, dtypes.float32)}  # fmt: skip

    def _apply_dense(self, grad, var, c):
        return training_ops.apply_adadelta(
            var, self.get_slot(var, "accum_grad"), self.get_slot(var, "accum_var"),
            c["lr_t"], c["rho"], c["epsilon"], grad,
        ).op  # fmt: skip

    def get_config(self) -> dict:
        return {**super().get_config(), "epsilon": self.epsilon}


class Adamax(Optimizer):
    """Adamax (Adam with the infinity norm): m = b1 m + (1 - b1) g, v = max(b2 v, |g|),
    var -= lr / (1 - b1 ** t) * m / (v + epsilon)."""

    _slot_names = ("m", "v")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 name="Adamax", **kwargs):  # fmt: skip
        lr = _lr_arg(learning_rate, kwargs)
        super().__init__(name, **kwargs)
        self._set_hyper("learning_rate", lr)
        self._set_hyper("beta_1", beta_1)
        self._set_hyper("beta_2", beta_2)
        self.epsilon = epsilon or backend.epsilon()

    def _prepare(self) -> dict:
        step = cast_ops.cast(self.iterations + 1, dtypes.float32)
        b1 = self._get_hyper("beta_1")
        return {"lr_t": self._decayed_lr(), "beta_1_t": b1, "beta_2_t": self._get_hyper("beta_2"),
                "beta_1_power": math_ops.pow(b1, step),
                "epsilon": ops.convert_to_tensor(self.epsilon, dtypes.float32)}  # fmt: skip

    def _apply_dense(self, grad, var, c):
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_t = m.assign(c["beta_1_t"] * m + (1.0 - c["beta_1_t"]) * grad)
        v_t = v.assign(math_ops.maximum(c["beta_2_t"] * v, math_ops.abs(grad)))
        step = c["lr_t"] / (1.0 - c["beta_1_power"])
        return var.assign_sub(step * m_t / (v_t + c["epsilon"])).op

    def get_config(self) -> dict:
        return {**super().get_config(), "epsilon": self.epsilon}


class Nadam(Optimizer):
    """Adam with Nesterov momentum (Dozat), Keras' momentum schedule: mu_t = beta_1 *
    (1 - 0.5 * 0.96 ** (schedule_decay * t)), their running product kept in the
    `momentum_cache` variable.

    Raises:
      ValueError: a LearningRateSchedule as the learning rate.
    """

    _slot_names = ("m", "v")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 name="Nadam", **kwargs):  # fmt: skip
        kwargs["decay"] = kwargs.pop("schedule_decay", 0.004)
        lr = _lr_arg(learning_rate, kwargs)
        if isinstance(lr, schedules.LearningRateSchedule):
            raise ValueError(
                "The Nadam optimizer does not support tf.keras.optimizers."
                "LearningRateSchedules as the learning rate."
            )
        super().__init__(name, **kwargs)
        self._set_hyper("learning_rate", lr)
        self._set_hyper("beta_1", beta_1)
        self._set_hyper("beta_2", beta_2)
        self.epsilon = epsilon or backend.epsilon()
        self._m_cache = None

    def _create_all_weights(self, params) -> None:
        _ = self.iterations
        if self._m_cache is None:
            self._m_cache = _rv.ResourceVariable(
                1.0, name="momentum_cache", dtype=dtypes.float32, trainable=False
            )
        super()._create_all_weights(params)

    def _decayed_lr(self):
        # Nadam's decay drives the momentum schedule, not the learning rate.
        return self._get_hyper("learning_rate")

    def _prepare(self) -> dict:
        b1, b2 = self._get_hyper("beta_1"), self._get_hyper("beta_2")
        step = cast_ops.cast(self.iterations + 1, dtypes.float32)
        next_step = cast_ops.cast(self.iterations + 2, dtypes.float32)
        m_t = b1 * (1.0 - 0.5 * math_ops.pow(0.96, self._initial_decay * step))
        m_t_1 = b1 * (1.0 - 0.5 * math_ops.pow(0.96, self._initial_decay * next_step))
        m_schedule_new = self._m_cache.assign(self._m_cache.read_value() * m_t)
        return {"lr_t": self._decayed_lr(), "beta_1_t": b1, "beta_2_t": b2, "m_t": m_t,
                "m_t_1": m_t_1, "m_schedule_new": m_schedule_new,
                "m_schedule_next": m_schedule_new * m_t_1,
                "v_denominator": 1.0 - math_ops.pow(b2, step),
                "epsilon": ops.convert_to_tensor(self.epsilon, dtypes.float32)}  # fmt: skip

    def _apply_dense(self, grad, var, c):
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        g_prime = grad / (1.0 - c["m_schedule_new"])
        m_t = m.assign(c["beta_1_t"] * m + (1.0 - c["beta_1_t"]) * grad)
        m_t_prime = m_t / (1.0 - c["m_schedule_next"])
        v_t = v.assign(c["beta_2_t"] * v + (1.0 - c["beta_2_t"]) * math_ops.square(grad))
        v_t_prime = v_t / c["v_denominator"]
        m_t_bar = (1.0 - c["m_t"]) * g_prime + c["m_t_1"] * m_t_prime
        return var.assign_sub(c["lr_t"] * m_t_bar / (math_ops.sqrt(v_t_prime) + c["epsilon"])).op

    @property
    def weights(self) -> list:
        out = super().weights
        return out if self._m_cache is None else out[:1] + [self._m_cache] + out[1:]

    def get_config(self) -> dict:
        return {**super().get_config(), "epsilon": self.epsilon}


class Ftrl(Optimizer):
    """FTRL-proximal (McMahan et al.) through TF's ApplyFtrl/ApplyFtrlV2 kernels; slots
    accumulator (from `initial_accumulator_value`) and linear, made weight by weight.

    Raises:
      ValueError: a negative accumulator value or regularization strength, or a
        positive learning_rate_power.
    """

    def __init__(self, learning_rate=0.001, learning_rate_power=-0.5,
                 initial_accumulator_value=0.1, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, name="Ftrl",
                 l2_shrinkage_regularization_strength=0.0, beta=0.0, **kwargs):  # fmt: skip
        lr = _lr_arg(learning_rate, kwargs)
        super().__init__(name, **kwargs)
        nonnegative = {
            "initial_accumulator_value": initial_accumulator_value,
            "l1_regularization_strength": l1_regularization_strength,
            "l2_regularization_strength": l2_regularization_strength,
            "l2_shrinkage_regularization_strength": l2_shrinkage_regularization_strength,
        }
        for key, value in nonnegative.items():
            if value < 0.0:
                raise ValueError(f"`{key}` needs to be positive or zero. Received: {key}={value}.")
        if learning_rate_power > 0.0:
            raise ValueError(
                "`learning_rate_power` needs to be negative or zero. "
                f"Received: learning_rate_power={learning_rate_power}."
            )
        self._set_hyper("learning_rate", lr)
        self._set_hyper("learning_rate_power", learning_rate_power)
        self._set_hyper("l1_regularization_strength", l1_regularization_strength)
        self._set_hyper("l2_regularization_strength", l2_regularization_strength)
        self._set_hyper("beta", beta)
        self._initial_accumulator_value = initial_accumulator_value
        self._l2_shrinkage_regularization_strength = l2_shrinkage_regularization_strength

    def _create_all_weights(self, params) -> None:
        super()._create_all_weights(params)
        for p in params:
            if ("accumulator", id(p)) in self._slots:
                continue
            value = self._initial_accumulator_value
            self._slots[("accumulator", id(p))] = _rv.ResourceVariable(
                lambda p=p, value=value: _zeros_like(p) + value,
                name=f"{p.op.name}/accumulator", dtype=p.dtype.base_dtype, trainable=False,
            )  # fmt: skip
            self._slots[("linear", id(p))] = _rv.ResourceVariable(
                lambda p=p: _zeros_like(p),
                name=f"{p.op.name}/linear", dtype=p.dtype.base_dtype, trainable=False,
            )  # fmt: skip

    def _apply_dense(self, grad, var, c):
        lr = c["lr_t"]
        l2 = self._get_hyper("l2_regularization_strength") + self._get_hyper("beta") / (2.0 * lr)
        args = (var, self.get_slot(var, "accumulator"), self.get_slot(var, "linear"), grad, lr,
                self._get_hyper("l1_regularization_strength"), l2)  # fmt: skip
        power = self._get_hyper("learning_rate_power")
        if self._l2_shrinkage_regularization_strength <= 0.0:
            return training_ops.apply_ftrl(*args, power).op
        shrink = ops.convert_to_tensor(self._l2_shrinkage_regularization_strength, dtypes.float32)
        return training_ops.apply_ftrl_v2(*args, shrink, power).op

    def get_config(self) -> dict:
        return {**super().get_config(),
                "initial_accumulator_value": self._initial_accumulator_value,
                "l2_shrinkage_regularization_strength":
                    self._l2_shrinkage_regularization_strength}  # fmt: skip


class TFOptimizer(Optimizer):
    """A TF1 `tf.train.Optimizer` driven by Keras' training loop."""

    def __init__(self, optimizer, iterations=None, name=None):
        self.optimizer = optimizer
        self._name = name or type(optimizer).__name__
        self._hyper, self._hyper_vars, self._slots = {}, {}, {}
        self._iterations = iterations
        self.weights_created = True
        self._initial_decay = 0.0
        self.clipnorm = self.clipvalue = None

    def get_updates(self, loss, params) -> list:
        grads = self.optimizer.compute_gradients(loss, params)
        return [self.optimizer.apply_gradients(grads, global_step=self.iterations)]

    def apply_gradients(self, grads_and_vars, name=None):
        return self.optimizer.apply_gradients(grads_and_vars, global_step=self.iterations)

    def variables(self) -> list:
        return [self._iterations] if self._iterations is not None else []


class _Legacy:
    """`tf.keras.optimizers.legacy`: the same (OptimizerV2) classes."""

    Optimizer, SGD, Adam, RMSprop, Adagrad = Optimizer, SGD, Adam, RMSprop, Adagrad
    Adadelta, Adamax, Nadam, Ftrl = Adadelta, Adamax, Nadam, Ftrl


legacy = _Legacy()

_BY_NAME = {"sgd": SGD, "adam": Adam, "rmsprop": RMSprop, "adagrad": Adagrad,
            "adadelta": Adadelta, "adamax": Adamax, "nadam": Nadam, "ftrl": Ftrl}  # fmt: skip


def get(identifier):
    """An optimizer from a name ('sgd', 'adam', 'rmsprop', 'adagrad'), a config dict, a
    Keras optimizer (returned as is) or a TF1 tf.train.Optimizer (wrapped in TFOptimizer).

    Raises:
      ValueError: an unknown name or an identifier of another kind.
    """
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, _TF1Optimizer):
        return TFOptimizer(identifier)
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        if identifier in get_custom_objects():
            return deserialize(identifier)
        if identifier.lower() not in _BY_NAME:
            raise unknown_object("optimizer", identifier)
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"Could not interpret optimizer identifier: {identifier}")


_CLASSES = {c.__name__: c for c in (SGD, Adam, RMSprop, Adagrad, Adadelta, Adamax, Nadam, Ftrl)}
_CLASSES.update(_BY_NAME)


def serialize(optimizer, use_legacy_format=False) -> dict:
    """`{"class_name": ..., "config": ...}` of a Keras optimizer."""
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return serialize_keras_object(optimizer)


def deserialize(config, custom_objects=None, use_legacy_format=False, **kwargs):
    """The optimizer a serialized config describes (class names matched ignoring case,
    as Keras does).

    Raises:
      ValueError: an unknown class name.
    """
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    kwargs.pop("use_legacy_optimizer", None)  # (the optimizers here are the legacy ones)
    if kwargs:
        raise TypeError(f"Invalid keyword arguments: {kwargs}")
    if isinstance(config, dict) and isinstance(config.get("class_name"), str):
        name = config["class_name"]
        if name not in (custom_objects or {}) and name.lower() in _BY_NAME:
            config = {**config, "class_name": _BY_NAME[name.lower()].__name__}
    return deserialize_keras_object(config, _CLASSES, custom_objects, "optimizer")
