"""`tf.keras.optimizers.schedules`: learning-rate schedules, callables from the step
(an optimizer's iteration count) to a learning-rate tensor, with Keras' configs.

The decay formulas are TF1's `tf.train.*_decay` functions, which Keras' schedules
share; `CosineDecay` adds Keras' optional linear warmup.
"""

from __future__ import annotations

import abc

from asyncflow import graph as ops
from asyncflow import math_composites
from asyncflow.keras.serialization import deserialize_keras_object, serialize_keras_object
from asyncflow.ops import cast_ops, math_ops
from asyncflow.train import learning_rate_decay as _decay

__all__ = [
    "LearningRateSchedule",
    "ExponentialDecay",
    "PiecewiseConstantDecay",
    "PolynomialDecay",
    "InverseTimeDecay",
    "CosineDecay",
    "CosineDecayRestarts",
    "serialize",
    "deserialize",
]


class LearningRateSchedule(abc.ABC):
    """Base class: `schedule(step)` is the learning rate at `step`."""

    @abc.abstractmethod
    def __call__(self, step):
        """The learning rate at `step`."""

    @abc.abstractmethod
    def get_config(self) -> dict:
        """The constructor arguments."""

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class _Schedule(LearningRateSchedule):
    """The built-in schedules: the config is the constructor arguments `_ARGS` in TF's
    order, read from the attributes of the same names (`_t_mul` and `_m_mul` keep the
    leading underscore TF's CosineDecayRestarts gives them)."""

    _ARGS: tuple = ()

    def get_config(self) -> dict:
        return {k: getattr(self, k) if hasattr(self, k) else getattr(self, "_" + k)
                for k in self._ARGS}  # fmt: skip


class ExponentialDecay(_Schedule):
    """initial_learning_rate * decay_rate ** (step / decay_steps) (floored with staircase)."""

    _ARGS = ("initial_learning_rate", "decay_steps", "decay_rate", "staircase", "name")

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name=None):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.decay_rate, self.staircase, self.name = decay_rate, staircase, name

    def __call__(self, step):
        return _decay.exponential_decay(
            self.initial_learning_rate,
            step,
            self.decay_steps,
            self.decay_rate,
            self.staircase,
            name=self.name or "ExponentialDecay",
        )


class PiecewiseConstantDecay(_Schedule):
    """values[i] for steps in (boundaries[i-1], boundaries[i]]."""

    _ARGS = ("boundaries", "values", "name")

    def __init__(self, boundaries, values, name=None):
        if len(boundaries) != len(values) - 1:
            raise ValueError(
                "The length of boundaries should be 1 less than the length of values. "
                f"Received: boundaries={boundaries} of length {len(boundaries)}, and "
                f"values={values} of length {len(values)}."
            )
        self.boundaries, self.values, self.name = boundaries, values, name

    def __call__(self, step):
        step = ops.convert_to_tensor(step)
        boundaries = [ops.convert_to_tensor(b, dtype=step.dtype) for b in self.boundaries]
        return _decay.piecewise_constant(
            step, boundaries, self.values, name=self.name or "PiecewiseConstant"
        )


class PolynomialDecay(_Schedule):
    """From initial_learning_rate to end_learning_rate over decay_steps, as
    (1 - step / decay_steps) ** power (decay_steps growing in multiples with cycle)."""

    _ARGS = ("initial_learning_rate", "decay_steps", "end_learning_rate", "power", "cycle", "name")

    def __init__(
        self,
        initial_learning_rate,
        decay_steps,
        end_learning_rate=0.0001,
        power=1.0,
        cycle=False,
        name=None,
    ):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.end_learning_rate, self.power, self.cycle = end_learning_rate, power, cycle
        self.name = name

    def __call__(self, step):
        return _decay.polynomial_decay(
            self.initial_learning_rate,
            step,
            self.decay_steps,
            self.end_learning_rate,
            self.power,
            self.cycle,
            name=self.name or "PolynomialDecay",
        )


class InverseTimeDecay(_Schedule):
    """initial_learning_rate / (1 + decay_rate * step / decay_steps) (floored with
    staircase)."""

    _ARGS = ("initial_learning_rate", "decay_steps", "decay_rate", "staircase", "name")

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name=None):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.decay_rate, self.staircase, self.name = decay_rate, staircase, name

    def __call__(self, step):
        return _decay.inverse_time_decay(
            self.initial_learning_rate,
            step,
            self.decay_steps,
            self.decay_rate,
            self.staircase,
            name=self.name or "InverseTimeDecay",
        )


class CosineDecay(_Schedule):
    """Cosine decay from the initial (or, after `warmup_steps` of linear warmup, the
    `warmup_target`) learning rate to alpha times it over decay_steps."""

    _ARGS = (
        "initial_learning_rate",
        "decay_steps",
        "alpha",
        "name",
        "warmup_target",
        "warmup_steps",
    )

    def __init__(
        self,
        initial_learning_rate,
        decay_steps,
        alpha=0.0,
        name=None,
        warmup_target=None,
        warmup_steps=0,
    ):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.alpha, self.name = alpha, name
        self.warmup_target, self.warmup_steps = warmup_target, warmup_steps

    def __call__(self, step):
        name = self.name or "CosineDecay"
        if self.warmup_target is None:
            return _decay.cosine_decay(
                self.initial_learning_rate, step, self.decay_steps, self.alpha, name=name
            )
        with ops.name_scope(name):
            step = cast_ops.cast(ops.convert_to_tensor(step), "float32")
            warmup_steps = float(self.warmup_steps)
            initial = ops.convert_to_tensor(self.initial_learning_rate, "float32")
            target = float(self.warmup_target)
            warm = initial + (target - initial) * math_composites.div_no_nan(
                step, ops.convert_to_tensor(warmup_steps, "float32")
            )
            decayed = _decay.cosine_decay(
                target, math_ops.maximum(step - warmup_steps, 0.0), self.decay_steps, self.alpha
            )
            return math_composites.where_v2(step < warmup_steps, warm, decayed)


class CosineDecayRestarts(_Schedule):
    """Cosine decay restarted every period (first_decay_steps, growing by t_mul, the
    peak scaled by m_mul each restart)."""

    _ARGS = ("initial_learning_rate", "first_decay_steps", "t_mul", "m_mul", "alpha", "name")

    def __init__(
        self, initial_learning_rate, first_decay_steps, t_mul=2.0, m_mul=1.0, alpha=0.0, name=None
    ):
        self.initial_learning_rate, self.first_decay_steps = (
            initial_learning_rate,
            first_decay_steps,
        )
        self._t_mul, self._m_mul, self.alpha, self.name = t_mul, m_mul, alpha, name

    def __call__(self, step):
        return _decay.cosine_decay_restarts(
            self.initial_learning_rate,
            step,
            self.first_decay_steps,
            self._t_mul,
            self._m_mul,
            self.alpha,
            name=self.name or "SGDRDecay",
        )


_CLASSES = {
    c.__name__: c
    for c in (
        ExponentialDecay,
        PiecewiseConstantDecay,
        PolynomialDecay,
        InverseTimeDecay,
        CosineDecay,
        CosineDecayRestarts,
    )
}


def serialize(learning_rate_schedule, use_legacy_format=False) -> dict:
    """`{"class_name": ..., "config": ...}` of a schedule."""
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return serialize_keras_object(learning_rate_schedule)


def deserialize(config, custom_objects=None, use_legacy_format=False):
    """The schedule a serialized config describes.

    Raises:
      ValueError: an unknown class name.
    """
    del use_legacy_format  # (TF1 graph mode: Keras' legacy format either way)
    return deserialize_keras_object(config, _CLASSES, custom_objects, "decay")
