"""ApplyAdaMax, ApplyAdagradV2, ApplyAddSign, ApplyPowerSign and their Resource* twins
(ops/training_extra_ops.py): one step on ref and resource variables.  Values recorded
from TF 2.21."""

import numpy as np
import pytest

import asyncflow as tf

R = tf.raw_ops
GRAD = np.array([0.5, -1.0, 0.0], np.float32)
UNCHANGED_M = [0.1, -0.2, 0.3]
UNCHANGED_V = [0.2, 0.1, 0.05]
NEW_M = [0.14, -0.28, 0.27]
# (op, extra inputs, var, m, v after one step)
_CASES = [
    (
        "ApplyAdaMax",
        dict(beta1_power=0.81, lr=0.1, beta1=0.9, beta2=0.99, epsilon=1e-3),
        [0.852926, 2.147221, 0.186034],
        NEW_M,
        [0.5, 1.0, 0.0495],
    ),
    (
        "ApplyAdagradV2",
        dict(lr=0.1, epsilon=1e-3),
        [0.925575, 2.095255, 3.0],
        UNCHANGED_M,
        [0.45, 1.1, 0.05],
    ),
    (
        "ApplyAddSign",
        dict(lr=0.1, alpha=1.0, sign_decay=0.5, beta=0.9),
        [0.925, 2.15, 3.0],
        NEW_M,
        UNCHANGED_V,
    ),
    (
        "ApplyPowerSign",
        dict(lr=0.1, logbase=np.float32(np.e), sign_decay=0.5, beta=0.9),
        [0.805358, 2.389284, 3.0],
        NEW_M,
        UNCHANGED_V,
    ),
]


@pytest.mark.parametrize("resource", [False, True])
@pytest.mark.parametrize("op_type, extra, want_var, want_m, want_v", _CASES)
def test_one_step(op_type, extra, want_var, want_m, want_v, resource):
    with tf.Graph().as_default(), tf.Session() as sess:
        var, m, v = (
            tf.Variable(init, name=n, use_resource=resource)
            for init, n in (([1.0, 2.0, 3.0], "var"), (UNCHANGED_M, "m"), (UNCHANGED_V, "v"))
        )

        def h(x):
            return x.handle if resource else x

        slots = {"var": h(var)}
        if op_type == "ApplyAdagradV2":
            slots["accum"] = h(v)
        else:
            slots["m"] = h(m)
            if op_type == "ApplyAdaMax":
                slots["v"] = h(v)
        op = getattr(R, ("Resource" if resource else "") + op_type)(**slots, **extra, grad=GRAD)
        sess.run(tf.global_variables_initializer())
        sess.run(op)
        got = sess.run([var.read_value(), m.read_value(), v.read_value()])
    for g, w in zip(got, (want_var, want_m, want_v)):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
