"""Learning-rate schedules of TF1 (`tf.compat.v1.train.exponential_decay`, ...).

Each function builds a scalar tensor of the global step, computed in the learning
rate's dtype (float32 for a Python float) with TF's formulas, so the values match TF's
to float rounding.  `global_step` is a tensor or variable, usually the one from
`get_or_create_global_step()`.
"""

from __future__ import annotations

import math

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import control_flow_cond, math_ops, random_ops, slicing_ops

__all__ = [
    "exponential_decay",
    "piecewise_constant",
    "piecewise_constant_decay",
    "polynomial_decay",
    "natural_exp_decay",
    "inverse_time_decay",
    "cosine_decay",
    "cosine_decay_restarts",
    "linear_cosine_decay",
    "noisy_linear_cosine_decay",
]


def _require_step(global_step, fn: str) -> None:
    if global_step is None:
        raise ValueError(f"global_step is required for {fn}.")


def _as_lr(learning_rate):
    lr = ops.convert_to_tensor(learning_rate, name="initial_learning_rate")
    return lr, lr.dtype


def exponential_decay(
    learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None
):
    """lr * decay_rate ** (global_step / decay_steps) (the exponent floored if staircase).

    Raises:
      ValueError: `global_step` is None.
    """
    _require_step(global_step, "exponential_decay")
    with ops.name_scope(name, "ExponentialDecay") as scope:
        lr, dtype = _as_lr(learning_rate)
        # TF's order of casts, which names them: Cast (decay_steps), Cast_1, Cast_2 (step).
        steps = math_ops.cast(decay_steps, dtype)
        rate = math_ops.cast(decay_rate, dtype)
        p = math_ops.cast(global_step, dtype) / steps
        if staircase:
            p = math_ops.floor(p)
        return math_ops.multiply(lr, math_ops.pow(rate, p), name=scope)


def natural_exp_decay(
    learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None
):
    """lr * exp(-decay_rate * global_step / decay_steps) (the ratio floored if staircase).

    Raises:
      ValueError: `global_step` is None.
    """
    _require_step(global_step, "natural_exp_decay")
    # As TF: exponential_decay by exp(-decay_rate), that rate computed outside its scope
    # in the decay rate's own dtype (float32 for a Python float, whatever the lr's).
    rate = math_ops.exp(math_ops.negative(decay_rate))
    return exponential_decay(learning_rate, global_step, decay_steps, rate, staircase, name)


def inverse_time_decay(
    learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None
):
    """lr / (1 + decay_rate * global_step / decay_steps) (the ratio floored if staircase).

    Raises:
      ValueError: `global_step` is None.
    """
    _require_step(global_step, "inverse_time_decay")
    with ops.name_scope(name, "InverseTimeDecay") as scope:
        lr, dtype = _as_lr(learning_rate)
        p = math_ops.cast(global_step, dtype) / math_ops.cast(decay_steps, dtype)
        if staircase:
            p = math_ops.floor(p)
        one = ops.convert_to_tensor(1, dtype=dtype)
        denom = math_ops.add(one, math_ops.multiply(math_ops.cast(decay_rate, dtype), p))
        return math_ops.truediv(lr, denom, name=scope)


def polynomial_decay(
    learning_rate,
    global_step,
    decay_steps,
    end_learning_rate=0.0001,
    power=1.0,
    cycle=False,
    name=None,
):
    """(lr - end) * (1 - step / decay_steps) ** power + end, step capped at decay_steps.

    With `cycle`, decay_steps grows to the next multiple covering the step instead.

    Raises:
      ValueError: `global_step` is None.
    """
    _require_step(global_step, "polynomial_decay")
    with ops.name_scope(name, "PolynomialDecay") as scope:
        lr, dtype = _as_lr(learning_rate)
        end = math_ops.cast(end_learning_rate, dtype)
        power = math_ops.cast(power, dtype)
        step = math_ops.cast(global_step, dtype)
        steps = math_ops.cast(decay_steps, dtype)
        if cycle:
            multiplier = slicing_ops.where(
                math_ops.equal(step, 0),
                ops.convert_to_tensor(1.0, dtype=dtype),
                math_ops.ceil(step / steps),
            )
            steps = math_ops.multiply(steps, multiplier)
        else:
            step = math_ops.minimum(step, steps)
        p = math_ops.truediv(step, steps)
        return math_ops.add(
            math_ops.multiply(lr - end, math_ops.pow(1 - p, power)), end, name=scope
        )


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    """lr * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha).

    Raises:
      ValueError: `global_step` is None.
    """
    _require_step(global_step, "cosine_decay")
    with ops.name_scope(name, "CosineDecay"):
        lr, dtype = _as_lr(learning_rate)
        steps = math_ops.cast(decay_steps, dtype)
        step = math_ops.minimum(math_ops.cast(global_step, dtype), steps)
        fraction = step / steps
        pi = ops.convert_to_tensor(math.pi, dtype=dtype)
        cosine = 0.5 * (1.0 + math_ops.cos(pi * fraction))
        decayed = (1 - alpha) * cosine + alpha
        # unnamed, as TF's: the result is "CosineDecay/Mul_3", not the scope's name
        return math_ops.multiply(lr, decayed)


def piecewise_constant(x, boundaries, values, name=None):
    """values[0] while x <= boundaries[0], values[i] while x in (b[i-1], b[i]], then values[-1].

    Raises:
      ValueError: len(values) != len(boundaries) + 1, the values' dtypes differ, or a
        boundary's dtype is not x's (int32 boundaries with an int64 x excepted).
    """
    if len(boundaries) != len(values) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    # As TF: every boundary and value becomes a tensor (then the casts) before the scope,
    # and the result is an exclusive tf.case ("PiecewiseConstant/case/cond/Merge").
    x = ops.convert_to_tensor(x)
    bounds = [ops.convert_to_tensor(b) for b in boundaries]
    vals = [ops.convert_to_tensor(v) for v in values]
    for i, b in enumerate(bounds):
        if b.dtype.base_dtype != x.dtype.base_dtype:
            # Only int32 -> int64 is lossless; TF refuses every other conversion, as
            # one could change a comparison (a float boundary cast to an integer).
            if b.dtype.base_dtype != dtypes.int32 or x.dtype.base_dtype != dtypes.int64:
                raise ValueError(
                    f"Boundaries ({str(b.dtype.base_dtype)}) must have the same dtype as x "
                    f"({str(x.dtype.base_dtype)})."
                )
            bounds[i] = math_ops.cast(b, x.dtype.base_dtype)
    for v in vals[1:]:
        if v.dtype.base_dtype != vals[0].dtype.base_dtype:
            raise ValueError(
                f"Values must have elements all with the same dtype ({vals[0].dtype} vs "
                f"{v.dtype})."
            )
    with ops.name_scope(name, "PiecewiseConstant"):
        pairs = [
            (math_ops.less_equal(x, bounds[0]), lambda: vals[0]),
            (math_ops.greater(x, bounds[-1]), lambda: vals[-1]),
        ]
        for low, high, v in zip(bounds[:-1], bounds[1:], vals[1:-1]):
            pred = math_ops.greater(x, low) & math_ops.less_equal(x, high)
            pairs.append((pred, lambda v=v: v))
        return control_flow_cond.case(pairs, lambda: vals[0], exclusive=True)


piecewise_constant_decay = piecewise_constant


def cosine_decay_restarts(learning_rate, global_step, first_decay_steps, t_mul=2.0, m_mul=1.0,
                          alpha=0.0, name=None):  # fmt: skip
    """SGDR (Loshchilov & Hutter): cosine decay over periods that grow by `t_mul`, each
    restarting from a peak `m_mul` times the previous one.

    Raises:
      ValueError: `global_step` is None.
    """
    _require_step(global_step, "cosine_decay_restarts")
    with ops.name_scope(name, "SGDRDecay") as scope:
        lr, dtype = _as_lr(learning_rate)
        steps = math_ops.cast(first_decay_steps, dtype)
        t_mul = math_ops.cast(t_mul, dtype)
        m_mul = math_ops.cast(m_mul, dtype)
        fraction = math_ops.cast(global_step, dtype) / steps
        # both TF branches, chosen per value: equal periods, or periods growing by t_mul
        flat_restart = math_ops.floor(fraction)
        flat_fraction = fraction - flat_restart
        safe_t = slicing_ops.where(math_ops.equal(t_mul, 1.0), t_mul + 1.0, t_mul)
        geo_restart = math_ops.floor(
            math_ops.log(1.0 - fraction * (1.0 - safe_t)) / math_ops.log(safe_t)
        )
        sum_r = (1.0 - math_ops.pow(safe_t, geo_restart)) / (1.0 - safe_t)
        geo_fraction = (fraction - sum_r) / math_ops.pow(safe_t, geo_restart)
        flat = math_ops.equal(t_mul, 1.0)
        i_restart = slicing_ops.where(flat, flat_restart, geo_restart)
        fraction = slicing_ops.where(flat, flat_fraction, geo_fraction)
        pi = ops.convert_to_tensor(math.pi, dtype=dtype)
        cosine = 0.5 * math_ops.pow(m_mul, i_restart) * (1.0 + math_ops.cos(pi * fraction))
        decayed = (1 - alpha) * cosine + alpha
        return math_ops.multiply(lr, decayed, name=scope)


def _linear_cosine(lr, dtype, global_step, decay_steps, num_periods, alpha, beta, noise):
    steps = math_ops.cast(decay_steps, dtype)
    step = math_ops.minimum(math_ops.cast(global_step, dtype), steps)
    linear = (steps - step) / steps
    if noise is not None:
        linear = linear + noise(step)
    pi = ops.convert_to_tensor(math.pi, dtype=dtype)
    cosine = 0.5 * (1.0 + math_ops.cos(pi * 2.0 * num_periods * step / steps))
    return lr * ((alpha + linear) * cosine + beta)


def linear_cosine_decay(learning_rate, global_step, decay_steps, num_periods=0.5, alpha=0.0,
                        beta=0.001, name=None):  # fmt: skip
    """lr * ((alpha + linear) * cosine + beta), linear = (decay_steps - step) / decay_steps
    and cosine = 0.5 * (1 + cos(2 pi num_periods step / decay_steps)), step capped at
    decay_steps (Bello et al., Neural Optimizer Search).

    Raises:
      ValueError: `global_step` is None.
    """
    _require_step(global_step, "linear_cosine_decay")
    with ops.name_scope(name, "LinearCosineDecay") as scope:
        lr, dtype = _as_lr(learning_rate)
        out = _linear_cosine(lr, dtype, global_step, decay_steps, num_periods, alpha, beta, None)
        return ops.apply_op("Identity", [out], name=scope).outputs[0]


def noisy_linear_cosine_decay(learning_rate, global_step, decay_steps, initial_variance=1.0,
                              variance_decay=0.55, num_periods=0.5, alpha=0.0, beta=0.001,
                              name=None):  # fmt: skip
    """linear_cosine_decay with Gaussian noise on its linear term, of variance
    initial_variance / (1 + step) ** variance_decay (a fresh draw at every run).

    Raises:
      ValueError: `global_step` is None.
    """
    _require_step(global_step, "noisy_linear_cosine_decay")
    with ops.name_scope(name, "NoisyLinearCosineDecay") as scope:
        lr, dtype = _as_lr(learning_rate)

        def noise(step):
            variance = initial_variance / math_ops.pow(1.0 + step, variance_decay)
            return random_ops.random_normal([], stddev=math_ops.sqrt(variance), dtype=dtype)

        out = _linear_cosine(lr, dtype, global_step, decay_steps, num_periods, alpha, beta, noise)
        return ops.apply_op("Identity", [out], name=scope).outputs[0]
