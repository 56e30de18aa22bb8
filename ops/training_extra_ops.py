"""The optimizer updates TF has and asyncflow lacked: ApplyAdaMax, ApplyAdagradV2,
ApplyAddSign, ApplyPowerSign and their Resource* twins (tf.raw_ops; tf.contrib's
AddSign/PowerSign and Keras' Adamax/Adagrad write them); SparseApplyAdagradV2 and its
twin, ResourceApplyAdamWithAmsgrad, and Keras' momentum (ResourceApplyKerasMomentum and
its sparse form, which TF has only on resource variables: their ref forms here are
asyncflow's own `_ApplyKerasMomentum` / `_SparseApplyKerasMomentum`).

Each is registered through training_ops' machinery (ref inputs, shape checks, in-place
update on the variables' buffers) and resource_training_ops' twin (the same kernel on
resource handles); the update rules are TF's documented ones:
  AdaMax:     m = beta1 m + (1 - beta1) g;  v = max(beta2 v, |g|);
              var -= lr / (1 - beta1_power) * m / (v + epsilon)
  AdagradV2:  accum += g^2 (if update_slots);  var -= lr g / (sqrt(accum) + epsilon)
  AddSign:    m = beta m + (1 - beta) g;  var -= lr (alpha + sign_decay sign(g) sign(m)) g
  PowerSign:  m = beta m + (1 - beta) g;
              var -= lr exp(logbase sign_decay sign(g) sign(m)) g
  KerasMomentum: accum = momentum accum - lr g;
              var += accum, or with Nesterov var += momentum accum - lr g
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors
from asyncflow.ops import resource_training_ops, training_ops
from asyncflow.ops.resource_variable_ops import _var
from asyncflow.registry import get_op_def

__all__: list[str] = []


def _ada_max(xp, attrs, var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad):
    one = var.dtype.type(1)
    m += (grad - m) * (one - beta1)
    xp.maximum(v * beta2, xp.abs(grad), out=v)
    var -= (lr / (one - beta1_power)) * (m / (v + epsilon))


def _adagrad_v2(xp, attrs, var, accum, lr, epsilon, grad):
    if attrs["update_slots"]:
        accum += grad * grad
    var -= lr * grad / (xp.sqrt(accum) + epsilon)


def _keras_momentum(xp, attrs, var, accum, lr, grad, momentum):
    accum *= momentum
    accum -= grad * lr
    if attrs["use_nesterov"]:
        var += accum * momentum - grad * lr
    else:
        var += accum


def _add_sign(xp, attrs, var, m, lr, alpha, sign_decay, beta, grad):
    m += (grad - m) * (var.dtype.type(1) - beta)
    var -= lr * (alpha + sign_decay * xp.sign(grad) * xp.sign(m)) * grad


def _power_sign(xp, attrs, var, m, lr, logbase, sign_decay, beta, grad):
    m += (grad - m) * (var.dtype.type(1) - beta)
    var -= lr * xp.exp(logbase * sign_decay * xp.sign(grad) * xp.sign(m)) * grad


_SIGN = ["var: Ref(T)", "m: Ref(T)", "lr: T"]
training_ops._register(
    "ApplyAdaMax",
    [
        "var: Ref(T)",
        "m: Ref(T)",
        "v: Ref(T)",
        "beta1_power: T",
        "lr: T",
        "beta1: T",
        "beta2: T",
        "epsilon: T",
        "grad: T",
    ],
    3,
    _ada_max,
)
training_ops._register(
    "ApplyAdagradV2",
    ["var: Ref(T)", "accum: Ref(T)", "lr: T", "epsilon: T", "grad: T"],
    2,
    _adagrad_v2,
    {"update_slots": True},
)
training_ops._register(
    "ApplyAddSign", _SIGN + ["alpha: T", "sign_decay: T", "beta: T", "grad: T"], 2, _add_sign
)
training_ops._register(
    "ApplyPowerSign",
    _SIGN + ["logbase: T", "sign_decay: T", "beta: T", "grad: T"],
    2,
    _power_sign,
)
for _t in ("ApplyAdaMax", "ApplyAdagradV2", "ApplyAddSign", "ApplyPowerSign"):
    resource_training_ops._twin(_t)

training_ops._register(
    "SparseApplyAdagradV2",
    ["var: Ref(T)", "accum: Ref(T)", "lr: T", "epsilon: T", "grad: T", "indices: Tindices"],
    2,
    _adagrad_v2,
    {"update_slots": True},
    sparse=True,
)
training_ops._register(
    "_ApplyKerasMomentum",
    ["var: Ref(T)", "accum: Ref(T)", "lr: T", "grad: T", "momentum: T"],
    2,
    _keras_momentum,
    {"use_nesterov": False},
)
training_ops._register(
    "_SparseApplyKerasMomentum",
    ["var: Ref(T)", "accum: Ref(T)", "lr: T", "grad: T", "indices: Tindices", "momentum: T"],
    2,
    _keras_momentum,
    {"use_nesterov": False},
    sparse=True,
)
resource_training_ops._twin("SparseApplyAdagradV2")
resource_training_ops._twin("ApplyAdamWithAmsgrad")
resource_training_ops._twin("_ApplyKerasMomentum", "ResourceApplyKerasMomentum")
resource_training_ops._twin("_SparseApplyKerasMomentum", "ResourceSparseApplyKerasMomentum")


def _keras_index_check(op_type: str) -> None:
    """TF's Keras sparse momentum words an index out of range its own way: checked here
    before the shared sparse kernel runs."""
    op_def = get_op_def(op_type)
    kd = op_def.kernel_defs["CPU"]

    async def kernel(ctx, var, accum, lr, grad, indices, momentum, _fn=kd.fn):
        value = _var(ctx, var).value
        idx = np.asarray(indices)
        if value is not None and value.ndim >= 1 and idx.ndim == 1:
            bad = np.flatnonzero((idx < 0) | (idx >= value.shape[0]))
            if bad.size:
                i = int(bad[0])
                raise errors.InvalidArgumentError(
                    None, None, f"indices[{i}] = {int(idx[i])} is not in [0, {value.shape[0]})"
                )
        return await _fn(ctx, var, accum, lr, grad, indices, momentum)

    kernel.__name__ = kd.fn.__name__
    op_def.kernel_defs["CPU"] = type(kd)(kernel, kd.device_type, kd.host_memory)


_keras_index_check("ResourceSparseApplyKerasMomentum")
