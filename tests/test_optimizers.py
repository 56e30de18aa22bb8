"""Training ops, optimizers, global step, moving averages (NumPy references, closed forms).

The TF-recorded trajectories and schedule/clip values are in test_optimizers_tf.py.
"""

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import training_ops
from asyncflow.registry import get_op_def
from asyncflow.train import training_util
from asyncflow.train.moving_averages import ExponentialMovingAverage
from asyncflow.train.optimizer import Optimizer
from asyncflow.train.optimizers import (
    AdadeltaOptimizer,
    AdagradOptimizer,
    AdamOptimizer,
    FtrlOptimizer,
    GradientDescentOptimizer,
    MomentumOptimizer,
    RMSPropOptimizer,
)

F32 = np.float32

# -- NumPy references: TF's formulas, written as pure functions returning new arrays ------


def ref_gd(var, alpha, delta):
    return (var - alpha * delta,)


def ref_momentum(var, accum, lr, grad, momentum, use_nesterov=False):
    accum = accum * momentum + grad
    if use_nesterov:
        return var - (grad * lr + accum * momentum * lr), accum
    return var - accum * lr, accum


def ref_adagrad(var, accum, lr, grad):
    accum = accum + grad * grad
    return var - lr * grad / np.sqrt(accum), accum


def ref_adadelta(var, accum, accum_update, lr, rho, epsilon, grad):
    accum = rho * accum + (1 - rho) * grad * grad
    update = np.sqrt(accum_update + epsilon) / np.sqrt(accum + epsilon) * grad
    accum_update = rho * accum_update + (1 - rho) * update * update
    return var - lr * update, accum, accum_update


def ref_rms(var, ms, mom, lr, rho, momentum, epsilon, grad):
    ms = rho * ms + (1 - rho) * grad * grad
    mom = momentum * mom + lr * grad / np.sqrt(ms + epsilon)
    return var - mom, ms, mom


def ref_centered_rms(var, mg, ms, mom, lr, rho, momentum, epsilon, grad):
    ms = rho * ms + (1 - rho) * grad * grad
    mg = rho * mg + (1 - rho) * grad
    mom = momentum * mom + lr * grad / np.sqrt(ms - mg * mg + epsilon)
    return var - mom, mg, ms, mom


def ref_adam(var, m, v, b1p, b2p, lr, b1, b2, eps, grad, use_nesterov=False):
    alpha = lr * np.sqrt(1 - b2p) / (1 - b1p)
    m = b1 * m + (1 - b1) * grad
    v = b2 * v + (1 - b2) * grad * grad
    step = (b1 * m + (1 - b1) * grad) if use_nesterov else m
    return var - alpha * step / (np.sqrt(v) + eps), m, v


def ref_ftrl(var, accum, linear, grad, lr, l1, l2, lr_power, shrinkage=0.0):
    g_shrunk = grad + 2 * shrinkage * var
    new_accum = accum + grad * grad
    sigma = (new_accum ** (-lr_power) - accum ** (-lr_power)) / lr
    linear = linear + g_shrunk - sigma * var
    quadratic = new_accum ** (-lr_power) / lr + 2 * l2
    var = np.where(np.abs(linear) > l1, (np.sign(linear) * l1 - linear) / quadratic, 0.0)
    return var, new_accum, linear


def ref_ftrl_v2(var, accum, linear, grad, lr, l1, l2, shrinkage, lr_power):
    return ref_ftrl(var, accum, linear, grad, lr, l1, l2, lr_power, shrinkage)


# op, reference, number of refs, {input: kind}; kinds: "v" in [-1, 1], "s" in [-0.3, 0.3],
# "p" positive, a float: that scalar.
CASES = {
    "ApplyGradientDescent": (ref_gd, 1, {"var": "v", "alpha": 0.1, "delta": "v"}),
    "ApplyMomentum": (
        ref_momentum,
        2,
        {"var": "v", "accum": "v", "lr": 0.1, "grad": "v", "momentum": 0.9},
    ),
    "ApplyAdagrad": (ref_adagrad, 2, {"var": "v", "accum": "p", "lr": 0.1, "grad": "v"}),
    "ApplyAdadelta": (
        ref_adadelta,
        3,
        {
            "var": "v",
            "accum": "p",
            "accum_update": "p",
            "lr": 0.5,
            "rho": 0.95,
            "epsilon": 1e-6,
            "grad": "v",
        },
    ),
    "ApplyRMSProp": (
        ref_rms,
        3,
        {
            "var": "v",
            "ms": "p",
            "mom": "v",
            "lr": 0.01,
            "rho": 0.9,
            "momentum": 0.5,
            "epsilon": 1e-7,
            "grad": "v",
        },
    ),
    "ApplyCenteredRMSProp": (
        ref_centered_rms,
        4,
        {
            "var": "v",
            "mg": "s",
            "ms": "p",
            "mom": "v",
            "lr": 0.01,
            "rho": 0.9,
            "momentum": 0.5,
            "epsilon": 1e-7,
            "grad": "v",
        },
    ),
    "ApplyAdam": (
        ref_adam,
        3,
        {
            "var": "v",
            "m": "v",
            "v": "p",
            "beta1_power": 0.81,
            "beta2_power": 0.998,
            "lr": 0.01,
            "beta1": 0.9,
            "beta2": 0.999,
            "epsilon": 1e-8,
            "grad": "v",
        },
    ),
    "ApplyFtrl": (
        ref_ftrl,
        3,
        {
            "var": "v",
            "accum": "p",
            "linear": "v",
            "grad": "v",
            "lr": 0.1,
            "l1": 0.05,
            "l2": 0.02,
            "lr_power": -0.5,
        },
    ),
    "ApplyFtrlV2": (
        ref_ftrl_v2,
        3,
        {
            "var": "v",
            "accum": "p",
            "linear": "v",
            "grad": "v",
            "lr": 0.1,
            "l1": 0.05,
            "l2": 0.02,
            "l2_shrinkage": 0.05,
            "lr_power": -0.3,
        },
    ),
}
SPARSE_OF = {
    "SparseApplyMomentum": "ApplyMomentum",
    "SparseApplyAdagrad": "ApplyAdagrad",
    "SparseApplyAdadelta": "ApplyAdadelta",
    "SparseApplyRMSProp": "ApplyRMSProp",
    "SparseApplyCenteredRMSProp": "ApplyCenteredRMSProp",
    "SparseApplyFtrl": "ApplyFtrl",
    "SparseApplyFtrlV2": "ApplyFtrlV2",
}


def _inputs(spec, shape, rng, grad_rows=None):
    out = {}
    for name, kind in spec.items():
        s = (
            shape
            if grad_rows is None or name not in ("grad", "delta")
            else (grad_rows,) + shape[1:]
        )
        if kind == "v":
            out[name] = rng.uniform(-1, 1, s).astype(F32)
        elif kind == "s":  # small: keeps centered RMSProp's ms - mg**2 positive
            out[name] = rng.uniform(-0.3, 0.3, s).astype(F32)
        elif kind == "p":
            out[name] = rng.uniform(0.1, 1, s).astype(F32)
        else:
            out[name] = F32(kind)
    return out


def _run_op(op_type, values, n_refs, indices=None, attrs=None, runs=1):
    """Build op_type on fresh variables holding `values`; return the refs' values."""
    with af.Graph().as_default():
        names = list(values)
        refs = [af.Variable(values[n], name=n) for n in names[:n_refs]]
        args = refs + [values[n] for n in names[n_refs:]]
        if indices is not None:
            pos = [a.name for a in get_op_def(op_type).inputs].index("indices")
            args.insert(pos, np.asarray(indices, np.int32))
        out = ops.apply_op(op_type, args, dict(attrs or {})).outputs[0]
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for _ in range(runs - 1):
                sess.run(out.op)
            result = sess.run(out)
            return [sess.run(r) for r in refs], result


def _close(got, want):
    np.testing.assert_allclose(got, np.asarray(want, np.float64), rtol=2e-5, atol=1e-6)


DENSE_PARAMS = [(k, {}) for k in CASES] + [
    ("ApplyMomentum", {"use_nesterov": True}),
    ("ApplyAdam", {"use_nesterov": True}),
]


@pytest.mark.parametrize(("op_type", "attrs"), DENSE_PARAMS)
def test_dense_kernel_matches_reference(op_type, attrs):
    ref, n_refs, spec = CASES[op_type]
    values = _inputs(spec, (3, 4), np.random.RandomState(7))
    got, out = _run_op(op_type, values, n_refs, attrs=attrs)
    want = ref(*[np.float64(v) for v in values.values()], **attrs)
    for g, w in zip(got, want):
        _close(g, w)
    np.testing.assert_array_equal(out, got[0])  # the op's output is the updated var


@pytest.mark.parametrize("op_type", sorted(SPARSE_OF))
def test_sparse_kernel_updates_only_indexed_rows(op_type):
    ref, n_refs, spec = CASES[SPARSE_OF[op_type]]
    values = _inputs(spec, (5, 3), np.random.RandomState(3), grad_rows=2)
    indices = [4, 1]
    got, _ = _run_op(op_type, values, n_refs, indices=indices)
    names = list(values)
    rows = [
        np.float64(values[n][indices]) if k < n_refs else np.float64(values[n])
        for k, n in enumerate(names)
    ]
    want_rows = ref(*rows)
    for k, (g, w) in enumerate(zip(got, want_rows)):
        expected = np.float64(values[names[k]]).copy()
        expected[indices] = w
        _close(g, expected)


def test_sparse_kernel_applies_duplicates_in_sequence():
    ref, n_refs, spec = CASES["ApplyAdagrad"]
    values = _inputs(spec, (4, 2), np.random.RandomState(5), grad_rows=3)
    got, _ = _run_op("SparseApplyAdagrad", values, n_refs, indices=[2, 2, 0])
    var, accum = np.float64(values["var"]), np.float64(values["accum"])
    for i, row in enumerate([2, 2, 0]):
        v, a = ref_adagrad(var[row], accum[row], 0.1, np.float64(values["grad"][i]))
        var[row], accum[row] = v, a
    _close(got[0], var)
    _close(got[1], accum)


def test_sparse_kernel_with_no_indices_is_a_noop():
    ref, n_refs, spec = CASES["ApplyMomentum"]
    values = _inputs(spec, (3, 2), np.random.RandomState(1), grad_rows=0)
    got, _ = _run_op("SparseApplyMomentum", values, n_refs, indices=np.zeros(0, np.int32))
    np.testing.assert_array_equal(got[0], values["var"])


def test_repeated_steps_follow_reference():
    ref, n_refs, spec = CASES["ApplyAdam"]
    values = _inputs(spec, (6,), np.random.RandomState(2))
    got, _ = _run_op("ApplyAdam", values, n_refs, runs=3)
    state = [np.float64(v) for v in values.values()]
    for _ in range(3):
        state[:3] = ref(*state)
    for g, w in zip(got, state[:3]):
        _close(g, w)


def test_float64_kernel():
    values = {"var": np.arange(4.0), "alpha": np.float64(0.5), "delta": np.ones(4)}
    got, out = _run_op("ApplyGradientDescent", values, 1)
    assert got[0].dtype == np.float64
    np.testing.assert_array_equal(got[0], np.arange(4.0) - 0.5)


# -- in place, copy-on-write ----------------------------------------------------------------


def _varref(sess, name):
    """The variable's VarRef on whichever device holds it (GPU:0 under TF1 placement when
    a GPU is present, the CPU otherwise)."""
    for device in sess._devices:
        try:
            return device.resource_mgr.lookup("", name)
        except errors.NotFoundError:
            pass
    raise AssertionError(f"no device holds {name!r}")


def test_update_is_in_place_and_fetched_values_never_change():
    with af.Graph().as_default():
        var = af.Variable(np.zeros(4, F32), name="w")
        mom = af.Variable(np.zeros(4, F32), name="m")
        step = training_ops.apply_momentum(var, mom, 0.5, np.ones(4, F32), 0.9)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            ids = (id(_varref(sess, "w").value), id(_varref(sess, "m").value))
            for _ in range(3):
                sess.run(step.op)
                assert (id(_varref(sess, "w").value), id(_varref(sess, "m").value)) == ids
            held = sess.run(var)
            snapshot = held.copy()
            sess.run(step.op)
            np.testing.assert_array_equal(held, snapshot)  # copy-on-write protected it
            assert not np.array_equal(sess.run(var), snapshot)


# -- errors -----------------------------------------------------------------------------


def test_runtime_shape_mismatch_leaves_variables_unchanged():
    with af.Graph().as_default():
        var = af.Variable(np.ones(3, F32), name="w", validate_shape=False)
        acc = af.Variable(np.ones(3, F32), name="a")
        grad = af.placeholder(af.float32)
        step = training_ops.apply_adagrad(var, acc, 0.1, grad)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            with pytest.raises(errors.InvalidArgumentError, match="var and grad"):
                sess.run(step, {grad: np.ones(4, F32)})
            np.testing.assert_array_equal(sess.run(var), np.ones(3))
            np.testing.assert_array_equal(sess.run(acc), np.ones(3))


def test_non_scalar_hyperparameter_fails_at_run_time():
    with af.Graph().as_default():
        var = af.Variable(np.ones(3, F32), name="w")
        lr = af.placeholder(af.float32)
        step = training_ops.apply_gradient_descent(var, lr, np.ones(3, F32))
        with af.Session() as sess:
            sess.run(var.initializer)
            with pytest.raises(errors.InvalidArgumentError, match="alpha is not a scalar"):
                sess.run(step, {lr: np.ones(2, F32)})


def test_non_scalar_hyperparameter_fails_at_build_time():
    with af.Graph().as_default():
        var = af.Variable(np.ones(3, F32), name="w")
        with pytest.raises(ValueError, match="rank 0"):
            training_ops.apply_gradient_descent(var, np.ones(2, F32), np.ones(3, F32))
        with pytest.raises(ValueError):
            training_ops.apply_gradient_descent(var, F32(1), np.ones(4, F32))


def test_uninitialised_slot_fails_and_var_unchanged():
    with af.Graph().as_default():
        var = af.Variable(np.ones(3, F32), name="w")
        mom = af.Variable(np.ones(3, F32), name="m")
        step = training_ops.apply_momentum(var, mom, 0.1, np.ones(3, F32), 0.9)
        with af.Session() as sess:
            sess.run(var.initializer)
            with pytest.raises(errors.FailedPreconditionError, match="uninitialized value m"):
                sess.run(step)
            np.testing.assert_array_equal(sess.run(var), np.ones(3))


def test_sparse_index_out_of_range():
    with af.Graph().as_default():
        var = af.Variable(np.ones((3, 2), F32), name="w")
        acc = af.Variable(np.ones((3, 2), F32), name="a")
        idx = af.placeholder(af.int32, [2])
        step = training_ops.sparse_apply_adagrad(var, acc, 0.1, np.ones((2, 2), F32), idx)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            with pytest.raises(errors.InvalidArgumentError, match="Index 3 at offset 1"):
                sess.run(step, {idx: [0, 3]})
            np.testing.assert_array_equal(sess.run(var), np.ones((3, 2)))


def test_var_must_be_a_ref():
    with af.Graph().as_default():
        with pytest.raises(TypeError, match="mutable tensor"):
            training_ops.apply_gradient_descent(af.constant([1.0]), 0.1, [1.0])


def test_deduplicate_indexed_slices():
    with af.Graph().as_default():
        values = np.arange(10, dtype=F32).reshape(5, 2)
        summed, unique = training_ops.deduplicate_indexed_slices(values, [4, 1, 4, 0, 1])
        with af.Session() as sess:
            s, u = sess.run([summed, unique])
    np.testing.assert_array_equal(u, [4, 1, 0])
    np.testing.assert_array_equal(s, [[4, 6], [10, 12], [6, 7]])


# -- optimizers ---------------------------------------------------------------------------


def _apply_const(opt, grads, global_step=False, name=None):
    """apply_gradients of constant gradients to fresh variables named w0, w1..."""
    vs = [af.Variable(np.ones_like(g), name=f"w{i}") for i, g in enumerate(grads)]
    gs = training_util.get_or_create_global_step() if global_step else None
    train = opt.apply_gradients(
        [(af.constant(g), v) for g, v in zip(grads, vs)], global_step=gs, name=name
    )
    return vs, gs, train


def test_adam_slot_and_variable_names():
    with af.Graph().as_default() as g:
        opt = AdamOptimizer(0.1)
        vs, gs, train = _apply_const(opt, [np.ones(2, F32), np.ones((2, 2), F32)], True)
        assert train.name == "Adam"
        assert opt.get_slot_names() == ["m", "v"]
        assert opt.get_slot(vs[0], "m").op.name == "w0/Adam"
        assert opt.get_slot(vs[0], "v").op.name == "w0/Adam_1"
        assert opt.get_slot(vs[1], "v").op.name == "w1/Adam_1"
        assert opt.get_slot(vs[0], "nope") is None
        assert [v.op.name for v in opt.variables()] == [
            "beta1_power",
            "beta2_power",
            "w0/Adam",
            "w0/Adam_1",
            "w1/Adam",
            "w1/Adam_1",
        ]
        assert all(not v.trainable for v in opt.variables())
        assert set(af.trainable_variables()) == set(vs)
        assert g.get_collection(af.GraphKeys.TRAIN_OP) == [train]
        assert g.get_operation_by_name("Adam/update_w0/ApplyAdam").type == "ApplyAdam"


@pytest.mark.parametrize(
    ("opt", "names"),
    [
        (lambda: MomentumOptimizer(0.1, 0.9), ["w0/Momentum"]),
        (lambda: AdagradOptimizer(0.1), ["w0/Adagrad"]),
        (lambda: AdadeltaOptimizer(), ["w0/Adadelta", "w0/Adadelta_1"]),
        (lambda: RMSPropOptimizer(0.1), ["w0/RMSProp", "w0/RMSProp_1"]),
        (
            lambda: RMSPropOptimizer(0.1, centered=True),
            [f"w0/RMSProp{s}" for s in ("", "_1", "_2")],
        ),
        (lambda: FtrlOptimizer(0.1), ["w0/Ftrl", "w0/Ftrl_1"]),
        (lambda: GradientDescentOptimizer(0.1), []),
    ],
)
def test_slot_names(opt, names):
    with af.Graph().as_default():
        o = opt()
        _apply_const(o, [np.ones(3, F32)])
        assert [v.op.name for v in o.variables()] == names


def test_global_step_increments_after_updates():
    with af.Graph().as_default():
        opt = GradientDescentOptimizer(0.5)
        vs, gs, train = _apply_const(opt, [np.full(2, 2.0, F32)], global_step=True)
        assert train.name == "GradientDescent"
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for step in range(1, 4):
                sess.run(train)
                assert training_util.global_step(sess, gs) == step
            np.testing.assert_allclose(sess.run(vs[0]), 1 - 3 * 0.5 * 2)


def test_apply_gradients_name_and_none_gradients():
    with af.Graph().as_default():
        a = af.Variable([1.0], name="a")
        b = af.Variable([1.0], name="b")
        opt = MomentumOptimizer(0.1, 0.9)
        train = opt.apply_gradients([(af.constant([1.0]), a), (None, b)], name="train")
        assert train.name == "train"
        assert opt.get_slot(b, "momentum") is None
        with pytest.raises(ValueError, match="No gradients provided"):
            opt.apply_gradients([(None, a)])
        with pytest.raises(ValueError, match="No variables provided"):
            opt.apply_gradients([])


def test_adam_matches_reference_over_steps():
    grads = np.array([0.5, -1.0, 2.0], F32)
    with af.Graph().as_default():
        opt = AdamOptimizer(0.1)
        (v,), _, train = _apply_const(opt, [grads])
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for _ in range(4):
                sess.run(train)
            got = sess.run([v, opt.get_slot(v, "m"), opt.get_slot(v, "v")])
            b1p, b2p = sess.run(opt._get_beta_accumulators())
    var, m, vv = np.ones(3), np.zeros(3), np.zeros(3)
    for t in range(1, 5):
        var, m, vv = ref_adam(var, m, vv, 0.9**t, 0.999**t, 0.1, 0.9, 0.999, 1e-8, grads)
    for g, w in zip(got, (var, m, vv)):
        _close(g, w)
    _close(b1p, 0.9**5)
    _close(b2p, 0.999**5)


def test_sparse_gradient_deduplicated_then_applied():
    # Adagrad with summed duplicate rows equals dense Adagrad with the summed gradient.
    values = np.array([[1.0, 2.0], [0.5, 0.5], [3.0, -1.0]], F32)
    indices = np.array([2, 0, 2], np.int32)
    dense = np.zeros((4, 2), F32)
    np.add.at(dense, indices, values)
    with af.Graph().as_default():
        sparse_var = af.Variable(np.ones((4, 2), F32), name="s")
        dense_var = af.Variable(np.ones((4, 2), F32), name="d")
        opt = AdagradOptimizer(0.1)
        grad = IndexedSlices(af.constant(values), af.constant(indices), af.constant([4, 2]))
        train = opt.apply_gradients([(grad, sparse_var), (af.constant(dense), dense_var)])
        assert any(o.type == "SparseApplyAdagrad" for o in af.get_default_graph().get_operations())
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            sess.run(train)
            sess.run(train)
            np.testing.assert_allclose(sess.run(sparse_var), sess.run(dense_var), rtol=1e-6)


@pytest.mark.parametrize(
    "make",
    [
        lambda: GradientDescentOptimizer(0.1),
        lambda: MomentumOptimizer(0.1, 0.9),
        lambda: RMSPropOptimizer(0.1, momentum=0.5, centered=True),
        lambda: AdamOptimizer(0.1),
        lambda: FtrlOptimizer(0.1, l2_shrinkage_regularization_strength=0.1),
        lambda: AdadeltaOptimizer(1.0),
    ],
)
def test_sparse_gradient_touches_only_its_rows(make):
    with af.Graph().as_default():
        var = af.Variable(np.ones((4, 2), F32), name="w")
        grad = IndexedSlices(af.constant(np.ones((2, 2), F32)), af.constant([1, 1]))
        opt = make()
        train = opt.apply_gradients([(grad, var)])
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            sess.run(train)
            out = sess.run(var)
    changed = ~np.all(out == 1.0, axis=1)
    assert changed.tolist() == [False, True, False, False]


def test_optimizer_argument_errors():
    with pytest.raises(ValueError, match="Must specify the optimizer name"):
        GradientDescentOptimizer(0.1, name="")
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        AdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match="needs to be negative or zero"):
        FtrlOptimizer(0.1, learning_rate_power=0.5)
    with pytest.raises(ValueError, match="l1_regularization_strength"):
        FtrlOptimizer(0.1, l1_regularization_strength=-1.0)
    with af.Graph().as_default():
        v = af.Variable([1.0], name="v")
        loss = af.reduce_sum(v * v)
        with pytest.raises(ValueError, match="gate_gradients"):
            GradientDescentOptimizer(0.1).compute_gradients(loss, gate_gradients=7)
        with pytest.raises(ValueError, match="Invalid type"):
            GradientDescentOptimizer(0.1).compute_gradients(af.constant(1), var_list=[v])
        with pytest.raises(NotImplementedError):
            GradientDescentOptimizer(0.1).apply_gradients([(af.constant([1.0]), loss)])
        with pytest.raises(TypeError, match="Gradient must be convertible"):
            GradientDescentOptimizer(0.1).apply_gradients([(object(), v)])


# -- minimize (needs af.gradients) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "steps"),
    [
        (lambda: GradientDescentOptimizer(0.1), 100),
        (lambda: MomentumOptimizer(0.05, 0.9, use_nesterov=True), 100),
        (lambda: AdagradOptimizer(0.5), 200),
        (lambda: RMSPropOptimizer(0.05), 200),
        (lambda: AdamOptimizer(0.1), 200),
        (lambda: AdadeltaOptimizer(1.0, rho=0.95, epsilon=1e-2), 200),
        (lambda: FtrlOptimizer(1.0), 200),
    ],
)
@pytest.mark.parametrize("gate", [Optimizer.GATE_NONE, Optimizer.GATE_OP, Optimizer.GATE_GRAPH])
def test_minimize_quadratic_converges(make, steps, gate):
    target = np.array([1.0, -2.0, 0.5], F32)
    with af.Graph().as_default():
        x = af.Variable(np.zeros(3, F32), name="x")
        loss = af.reduce_sum(af.square(x - target))
        gs = training_util.get_or_create_global_step()
        train = make().minimize(loss, global_step=gs, gate_gradients=gate)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            first = sess.run(loss)
            for _ in range(steps):
                sess.run(train)
            assert sess.run(loss) < 1e-2 * first
            assert sess.run(gs) == steps


def test_minimize_var_list_and_compute_gradients():
    with af.Graph().as_default():
        a = af.Variable(1.0, name="a")
        b = af.Variable(2.0, name="b")
        loss = a * a + 3.0 * b
        opt = GradientDescentOptimizer(0.5)
        gv = opt.compute_gradients(loss, var_list=[b])
        assert [v for _, v in gv] == [b]
        train = opt.minimize(loss, var_list=[b])
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            assert sess.run(gv[0][0]) == pytest.approx(3.0)
            sess.run(train)
            assert sess.run([a, b]) == [pytest.approx(1.0), pytest.approx(0.5)]
        c = af.Variable(1.0, name="c")
        with pytest.raises(ValueError, match="No gradients provided"):
            opt.minimize(a * 2.0, var_list=[c])


# -- global step ---------------------------------------------------------------------------


def test_global_step_helpers():
    with af.Graph().as_default() as g:
        assert training_util.get_global_step() is None
        gs = training_util.get_or_create_global_step()
        assert gs.op.name == "global_step"
        assert gs.dtype.base_dtype == af.int64
        assert not gs.trainable
        assert training_util.get_global_step(g) is gs
        assert training_util.get_or_create_global_step() is gs
        with pytest.raises(ValueError, match="already exists"):
            training_util.create_global_step(g)
        with af.Session() as sess:
            sess.run(gs.initializer)
            assert training_util.global_step(sess, gs) == 0
    with af.Graph().as_default() as g:
        g.add_to_collection(af.GraphKeys.GLOBAL_STEP, af.Variable(0.0, name="float_step"))
        with pytest.raises(TypeError, match="integer type"):
            training_util.get_global_step()
    with af.Graph().as_default():
        af.constant(3, af.int64, name="global_step")
        assert training_util.get_global_step().name == "global_step:0"


# -- moving averages (closed form) ------------------------------------------------------


def test_ema_closed_form_with_num_updates():
    with af.Graph().as_default():
        v = af.Variable([1.0, 2.0], name="v")
        step = af.placeholder(af.int64, [])
        ema = ExponentialMovingAverage(0.9, num_updates=step)
        update = ema.apply([v])
        avg = ema.average(v)
        assert avg.op.name == "v/ExponentialMovingAverage"
        assert ema.average_name(v) == "v/ExponentialMovingAverage"
        assert v in af.get_collection(af.GraphKeys.MOVING_AVERAGE_VARIABLES)
        assign = v.assign([3.0, -1.0])
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            np.testing.assert_allclose(sess.run(avg), [1.0, 2.0])
            sess.run(assign)
            expected = np.array([1.0, 2.0])
            for n in (0, 5, 1000):
                sess.run(update, {step: n})
                decay = min(0.9, (1.0 + n) / (10.0 + n))
                expected = expected - (1 - decay) * (expected - np.array([3.0, -1.0]))
                np.testing.assert_allclose(sess.run(avg), expected, rtol=1e-6)
        restore = ema.variables_to_restore()
        assert restore["v/ExponentialMovingAverage"] is v
        assert "v" not in restore


def test_ema_of_tensor_with_zero_debias():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [2])
        ema = ExponentialMovingAverage(0.5, zero_debias=True)
        update = ema.apply([x])
        avg = ema.average(x)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            sess.run(update, {x: [4.0, 8.0]})
            # One debiased step of a zero-initialised average gives the value itself.
            np.testing.assert_allclose(sess.run(avg), [4.0, 8.0], rtol=1e-6)
            sess.run(update, {x: [0.0, 0.0]})
            # biased = 0.5*(0.5*v) ... / (1 - 0.25): (1 - 0.5) * 0.5 * v / 0.75
            np.testing.assert_allclose(sess.run(avg), np.array([4.0, 8.0]) / 3, rtol=1e-6)


def test_ema_rejects_integer_variables():
    with af.Graph().as_default():
        v = af.Variable(1, name="i")
        with pytest.raises(TypeError, match="half, float, or double"):
            ExponentialMovingAverage(0.9).apply([v])


@pytest.mark.parametrize("as_iterable", [lambda d: d.values(), lambda d: set(d.values()),
                                         lambda d: (v for v in d.values())])  # fmt: skip
def test_minimize_accepts_any_iterable_var_list(as_iterable):
    # Issue 18 item 9.  TF 2.21: minimize(a*a + b, var_list=d.values()) with lr 0.1 takes
    # a from 1.0 to 0.8 and b from 2.0 to 1.9.
    with ops.Graph().as_default():
        d = {"a": af.Variable(1.0), "b": af.Variable(2.0)}
        loss = d["a"] * d["a"] + d["b"]
        train = GradientDescentOptimizer(0.1).minimize(loss, var_list=as_iterable(d))
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            sess.run(train)
            np.testing.assert_allclose(sess.run([d["a"], d["b"]]), [0.8, 1.9], rtol=1e-6)


# -- scalar variables on the NumPy update path (numba absent or declining) ---------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: GradientDescentOptimizer(0.1),
        lambda: MomentumOptimizer(0.1, 0.9),
        lambda: MomentumOptimizer(0.1, 0.9, use_nesterov=True),
        lambda: RMSPropOptimizer(0.01),
        lambda: RMSPropOptimizer(0.01, momentum=0.5, centered=True),
        lambda: AdamOptimizer(0.001),
        lambda: AdagradOptimizer(0.1),
        lambda: AdadeltaOptimizer(1.0),
    ],
)
def test_scalar_variable_updates_on_the_numpy_path(monkeypatch, make):
    """A 0-d variable's dense update gives the same values as a [1]-shaped one when the
    NumPy update functions run (without the optional numba loops: NumPy's arithmetic
    on 0-d arrays returns scalars, which the functions' out= temporaries refused)."""
    from asyncflow.ops import fused_updates

    monkeypatch.setattr(fused_updates, "_DISABLED", True)
    got = {}
    for shape in ([], [1]):
        g = af.Graph()
        with g.as_default():
            v = af.Variable(np.full(shape, 3.0, F32))
            step = make().minimize(af.reduce_sum(af.square(v) * 0.5))
            with af.Session(graph=g) as s:
                s.run(af.global_variables_initializer())
                for _ in range(3):
                    s.run(step)
                got[len(shape)] = np.asarray(s.run(v)).reshape(-1)
    assert got[0][0] != 3.0  # it moved
    np.testing.assert_array_equal(got[0], got[1])
