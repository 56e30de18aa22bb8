"""ops/blas.py's gemm and the plan rewrite folding a gradient MatMul into its
ApplyGradientDescent: same values as the unfused path, and only where it is safe."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.ops import blas, matmul_ops, state_ops

# The gemm fusions need the OpenBLAS NumPy's wheels ship (ops/blas.py); without it the
# plain kernels run and there is nothing to compare.
needs_blas = pytest.mark.skipif(
    not blas.available(np.float32), reason="NumPy's bundled OpenBLAS not found"
)


@pytest.fixture
def gemm_calls(monkeypatch):
    """Counts gemm calls: `gemm_calls[0]`, a product with its activation in the pool's
    blocks (`blas.gemm_epilogue`, where it ran) included: which of the two a kernel
    takes depends on whether the epilogue's loop has compiled yet (a test before it in
    the same process may have compiled it)."""
    calls = [0]
    real, real_epilogue = blas.gemm_into, blas.gemm_epilogue

    def counting(*args):
        calls[0] += 1
        real(*args)

    def counting_epilogue(*args):
        ran = real_epilogue(*args)
        calls[0] += bool(ran)
        return ran

    monkeypatch.setattr(blas, "gemm_into", counting)
    monkeypatch.setattr(blas, "gemm_epilogue", counting_epilogue)
    return calls


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_gemm_into_matches_numpy(dtype, ta, tb):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((9, 6) if ta else (6, 9)).astype(dtype)
    b = rng.standard_normal((4, 9) if tb else (9, 4)).astype(dtype)
    c = rng.standard_normal((6, 4)).astype(dtype)
    want = 0.5 * c - 0.25 * ((a.T if ta else a) @ (b.T if tb else b))
    blas.gemm_into(c, a, b, ta, tb, -0.25, 0.5)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(c, want, rtol=tol, atol=tol)


@needs_blas
def test_gemm_into_non_contiguous_and_empty():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, 10)).astype(np.float32)[:, ::2]  # a strided view
    b = rng.standard_normal((5, 3)).astype(np.float32)
    c = np.zeros((8, 3), np.float32)
    blas.gemm_into(c, a, b, False, False, 1.0, 0.0)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    c = np.full((2, 2), 3.0, np.float32)
    empty_a, empty_b = np.zeros((2, 0), np.float32), np.zeros((0, 2), np.float32)
    blas.gemm_into(c, empty_a, empty_b, False, False, 1.0, 2.0)
    np.testing.assert_array_equal(c, np.full((2, 2), 6.0))


def _mlp_losses(steps=5, fetch_grad=False):
    rng = np.random.default_rng(3)
    x_val = rng.uniform(0, 1, (64, 80)).astype(np.float32)
    y_val = rng.integers(0, 4, 64).astype(np.int32)
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 80])
        y = af.placeholder(af.int32, [None])
        # Products of at least 4096 elements: smaller ones are not worth a gemm call.
        w1 = af.Variable(rng.standard_normal((80, 64)).astype(np.float32) * 0.1)
        w2 = af.Variable(rng.standard_normal((64, 64)).astype(np.float32) * 0.1)
        logits = af.matmul(af.nn.relu(af.matmul(x, w1)), w2)
        loss = af.reduce_mean(
            af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        opt = af.train.GradientDescentOptimizer(0.5)
        grads = opt.compute_gradients(loss)
        train = opt.apply_gradients(grads)
        fetches = [loss, train] + ([grads[0][0]] if fetch_grad else [])
        out = []
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            for _ in range(steps):
                out.append(s.run(fetches, {x: x_val, y: y_val}))
            out.append(s.run([w1, w2]))
    return out


@needs_blas
def test_fused_updates_follow_the_unfused_ones(monkeypatch, gemm_calls):
    fused = _mlp_losses()
    assert gemm_calls[0] == 3 * 5  # both weight updates and the ReluGrad, every step
    monkeypatch.setattr(blas, "_fns", {})  # BLAS "not found": the plain kernels
    plain = _mlp_losses()
    assert gemm_calls[0] == 15
    for f, p in zip(fused[:-1], plain[:-1]):
        assert f[0] == pytest.approx(p[0], rel=1e-5)
    for f, p in zip(fused[-1], plain[-1]):
        np.testing.assert_allclose(f, p, rtol=1e-5, atol=1e-6)


@needs_blas
def test_a_fetched_gradient_is_not_fused(gemm_calls):
    out = _mlp_losses(steps=2, fetch_grad=True)
    # w2's update and the ReluGrad only: w1's gradient is fetched too
    assert gemm_calls[0] == 2 * 2
    assert out[0][2].shape == (80, 64) and np.isfinite(out[0][2]).all()


@needs_blas
def test_fused_update_of_an_uninitialized_variable_fails_cleanly():
    with af.Graph().as_default():
        w = af.Variable(np.ones((3, 2), np.float32), name="w")
        a = af.constant(np.ones((4, 3), np.float32))
        b = af.constant(np.ones((4, 2), np.float32))
        g = af.matmul(a, b, transpose_a=True)
        train = af.train.GradientDescentOptimizer(0.1).apply_gradients([(g, w)])
        with af.Session() as s:
            with pytest.raises(errors.FailedPreconditionError, match="uninitialized"):
                s.run(train)
            s.run(w.initializer)
            s.run(train)
            np.testing.assert_allclose(s.run(w), np.full((3, 2), 1 - 0.1 * 4, np.float32))


@needs_blas
def test_bias_adds_fold_into_the_product(gemm_calls):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 40)).astype(np.float32)
    w = rng.standard_normal((40, 96)).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    full = rng.standard_normal((64, 96)).astype(np.float32)
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 40])
        wt, bt = af.constant(w), af.constant(b)
        outs = [
            af.matmul(x, wt) + bt,
            bt + af.matmul(x, wt),
            af.nn.bias_add(af.matmul(x, wt), bt),
            af.matmul(x, wt) + af.reshape(bt, [1, 96]),
            af.matmul(x, wt) + af.constant(full),
            af.matmul(af.transpose(wt), x, transpose_b=True) + af.constant(full.T),
        ]
        with af.Session() as s:
            got = s.run(outs, {x: a})
    assert gemm_calls[0] == 6
    want = a @ w + b
    for g in got[:4]:
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[4], a @ w + full, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[5], (a @ w + full).T, rtol=1e-5, atol=1e-5)


@needs_blas
def test_dense_relu_runs_inside_the_bias_gemm(gemm_calls):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 40)).astype(np.float32)
    w = rng.standard_normal((40, 96)).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    a[0, :] = np.nan  # max(nan, 0) stays nan, as the separate Relu gives
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 40])
        wt, bt = af.constant(w), af.constant(b)
        fused = af.nn.relu(af.matmul(x, wt) + bt, name="fused")
        pre = af.matmul(x, wt) + bt  # fetched beside its Relu: that Relu runs apart
        apart = af.nn.relu(pre, name="apart")
        small = af.nn.relu(af.matmul(x[:2], wt[:, :3]) + bt[:3])  # not deferred: too small
        (g,) = af.gradients(af.reduce_sum(fused * fused), [wt])
        with af.Session() as s:
            got_fused, got_pre, got_apart, got_small = s.run([fused, pre, apart, small], {x: a})
            calls = gemm_calls[0]
            got_g = s.run(g, {x: a[1:]})
            fused_ops = {op.name for sp in s._plans.values()
                         for pl in sp.plans for op in pl.nodes
                         if op.type == "_FusedMatMul"}  # fmt: skip
    assert calls == 2
    assert "fused" in fused_ops and "apart" not in fused_ops
    want = np.maximum(a @ w + b, 0)
    np.testing.assert_allclose(got_fused, want, rtol=1e-5, atol=1e-5)
    assert np.isnan(got_fused[0]).all()
    np.testing.assert_allclose(got_pre, a @ w + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_apart, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_small, want[:2, :3], rtol=1e-5, atol=1e-5)
    z = a[1:] @ w + b
    np.testing.assert_allclose(got_g, a[1:].T @ (2 * np.maximum(z, 0) * (z > 0)), rtol=1e-4)


def _fused_nodes(session) -> dict:
    return {op.name: op for sp in session._plans.values()
            for pl in sp.plans for op in pl.nodes
            if op.type == "_FusedMatMul"}  # fmt: skip


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", [(128, 256, 784), (1, 40, 96), (3, 33, 65), (5, 7, 64)])
def test_dense_sigmoid_runs_inside_the_bias_gemm(monkeypatch, dtype, m, k, n):
    # a wide layer's Sigmoid read by a product is the product's epilogue (the GAN
    # generator's output): the values of the Sigmoid node apart (TF's float32 sigmoid;
    # float64, sizes not whole packets, a batch of one and products too small to defer
    # included), and its gradient through SigmoidGrad of the fused output; a narrow
    # layer's, and one an element-wise node reads (a loss), stay apart
    from asyncflow.ops import matmul_ops

    blas.warm_epilogues()
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    w = (rng.standard_normal((k, n)) * 0.3).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    b[:2] = [-300.0, 300.0]
    a[0, 0] = np.nan if m > 1 else a[0, 0]  # (a NaN row stays NaN)
    graphs = {}
    for epilogue in (True, False):
        monkeypatch.setattr(matmul_ops, "_SIGMOID_EPILOGUE", epilogue)
        with af.Graph().as_default():
            x = af.placeholder(dtype, [None, k])
            wt, bt = af.constant(w), af.constant(b)
            y = af.nn.sigmoid(af.matmul(x, wt) + bt, name="fused")
            narrow = af.nn.sigmoid(af.matmul(x, wt[:, :1]) + bt[:1], name="narrow")
            loss = af.nn.sigmoid(af.matmul(x, wt * 2) + bt, name="loss")  # (read by a Mul)
            next_layer = af.matmul(y, af.constant(np.ones((n, 1), dtype)))
            total = af.reduce_sum(next_layer) + af.reduce_sum(narrow) + af.reduce_sum(loss * 2)
            (g,) = af.gradients(total, [wt])
            with af.Session() as s:
                for _ in range(3):  # (the budget measures both ways of a kind)
                    got = s.run([y, narrow, g], {x: a})
                graphs[epilogue] = (got, _fused_nodes(s))
    (fused, narrow_v, grad), nodes = graphs[True]
    (apart, _, grad_apart), nodes_apart = graphs[False]
    assert nodes["fused"].get_attr("sigmoid") and not nodes_apart.get("fused")
    assert "narrow" not in nodes and "loss" not in nodes
    z = a.astype(np.float64) @ w + b
    want = 1 / (1 + np.exp(-z))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(fused, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(fused, apart, rtol=tol, atol=tol)
    if dtype == np.float32:  # (past the clamps: exactly 0 and 1, as TF's)
        assert (fused[1:, 0] == 0).all() and (fused[1:, 1] == 1).all()
    if m > 1:
        assert np.isnan(fused[0]).all() and np.isnan(grad).all()
    want_narrow = 1 / (1 + np.exp(-(a.astype(np.float64) @ w[:, :1] + b[:1])))
    np.testing.assert_allclose(narrow_v, want_narrow, rtol=tol, atol=tol)
    if m == 1:  # (a NaN row reaches every gradient: compared where there is none)
        s_loss = 1 / (1 + np.exp(-(a.astype(np.float64) @ (2 * w) + b)))
        dz = want * (1 - want) + 4 * s_loss * (1 - s_loss)
        want_g = a.T.astype(np.float64) @ dz + a.T.astype(np.float64) @ (
            want_narrow * (1 - want_narrow)
        ) * (np.arange(n) == 0)
        np.testing.assert_allclose(grad, want_g, rtol=10 * tol, atol=10 * tol)
    np.testing.assert_allclose(grad, grad_apart, rtol=10 * tol, atol=10 * tol)


@needs_blas
def test_a_sigmoid_read_by_element_wise_nodes_past_an_identity_stays_apart():
    # (Identity is element-wise too: what reads past it decides)
    rng = np.random.default_rng(9)
    a = rng.standard_normal((32, 40)).astype(np.float32)
    w = (rng.standard_normal((40, 96)) * 0.3).astype(np.float32)
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 40])
        y = af.nn.sigmoid(af.matmul(x, af.constant(w)) + 1.0, name="apart")
        z = af.nn.sigmoid(af.matmul(x, af.constant(w)) + 2.0, name="fused")
        outs = [af.identity(y) * 2.0, af.matmul(af.identity(z), af.constant(w.T))]
        with af.Session() as s:
            got = s.run(outs, {x: a})
            nodes = _fused_nodes(s)
    assert nodes["fused"].get_attr("sigmoid") and "apart" not in nodes
    z64 = a.astype(np.float64) @ w
    np.testing.assert_allclose(got[0], 2 / (1 + np.exp(-(z64 + 1))), rtol=1e-5, atol=1e-6)
    want = (1 / (1 + np.exp(-(z64 + 2)))) @ w.T
    np.testing.assert_allclose(got[1], want, rtol=1e-4, atol=1e-5)


@needs_blas
def test_a_layer_of_two_batches_with_its_sigmoid():
    # two Sigmoid layers of the same weights (a discriminator on real and fake rows)
    # each keep their epilogue: no merged rows, whose gemm makes a ReLU's only
    rng = np.random.default_rng(8)
    a1 = rng.standard_normal((64, 80)).astype(np.float32)
    a2 = rng.standard_normal((64, 80)).astype(np.float32)
    w = (rng.standard_normal((80, 128)) * 0.2).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    with af.Graph().as_default():
        x1 = af.placeholder(af.float32, [None, 80])
        x2 = af.placeholder(af.float32, [None, 80])
        wt, bt = af.constant(w), af.constant(b)
        y1 = af.nn.sigmoid(af.matmul(x1, wt) + bt)
        y2 = af.nn.sigmoid(af.matmul(x2, wt) + bt)
        with af.Session() as s:
            got1, got2 = s.run([y1, y2], {x1: a1, x2: a2})
            assert len(_fused_nodes(s)) == 2
    for got, x in ((got1, a1), (got2, a2)):
        want = 1 / (1 + np.exp(-(x.astype(np.float64) @ w + b)))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@needs_blas
def test_relu_grad_takes_its_product_in_a_gemm_with_pre_update_weights(monkeypatch):
    # dh = dy @ w2.T is deferred into ReluGrad, which may run after w2's own update: the
    # gradient must still use the weights from before the step (copy-on-write).
    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 40)).astype(np.float32)
    w1 = rng.standard_normal((40, 96)).astype(np.float32) * 0.1
    b1 = rng.standard_normal(96).astype(np.float32) * 0.1
    w2 = rng.standard_normal((96, 80)).astype(np.float32) * 0.1
    lr = 0.002
    copies = []  # copy-on-write copies of a variable's buffer (see below)
    real = state_ops.VarRef.writable_target

    def counting(ref):
        if not ref._exclusive():
            copies.append(ref.value.shape)
        return real(ref)

    monkeypatch.setattr(state_ops.VarRef, "writable_target", counting)
    with af.Graph().as_default():
        v1, vb, v2 = af.Variable(w1), af.Variable(b1), af.Variable(w2)
        h = af.nn.relu(af.matmul(af.constant(x), v1) + vb)
        y = af.matmul(h, v2)
        loss = af.reduce_sum(y * y) / 2
        train = af.train.GradientDescentOptimizer(lr).minimize(loss)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            for _ in range(3):
                s.run(train)
            got = s.run([v1, vb, v2])
            relu_grads = [op.name for sp in s._plans.values() for pl in sp.plans
                          for op in pl.nodes
                          if op.type == "_FusedMatMulReluGrad"]  # fmt: skip
    assert relu_grads
    # w2's update waits for the ReluGrad reading w2, so it never has to copy w2.
    assert copies == []
    w1, b1, w2 = w1.astype(np.float64), b1.astype(np.float64), w2.astype(np.float64)
    for _ in range(3):
        z = x @ w1 + b1
        hh = np.maximum(z, 0)
        dy = hh @ w2
        dz = (dy @ w2.T) * (z > 0)
        w1, b1, w2 = w1 - lr * x.T @ dz, b1 - lr * dz.sum(0), w2 - lr * hh.T @ dy
    for g, want in zip(got, (w1, b1, w2)):
        np.testing.assert_allclose(g, want, rtol=2e-4, atol=2e-5)


@needs_blas
def test_a_bias_of_the_wrong_length_fails_as_unfused():
    with af.Graph().as_default():
        x = af.constant(np.ones((64, 80), np.float32))
        w = af.constant(np.ones((80, 96), np.float32))
        b = af.placeholder(af.float32, [None])
        with af.Session() as s:
            with pytest.raises(errors.InvalidArgumentError, match="bias"):
                s.run(af.nn.bias_add(af.matmul(x, w), b), {b: np.ones(5, np.float32)})
            with pytest.raises(errors.InvalidArgumentError, match="Incompatible shapes"):
                s.run(af.matmul(x, w) + b, {b: np.ones(5, np.float32)})


@needs_blas
def test_assign_updates_of_scaled_products_fold_into_gemm(gemm_calls):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 80)).astype(np.float32)
    d = rng.standard_normal((64, 96)).astype(np.float32)
    w0 = rng.standard_normal((80, 96)).astype(np.float32)
    with af.Graph().as_default():
        at, dt = af.constant(a), af.constant(d)
        ws = [af.Variable(w0) for _ in range(5)]
        g = [af.matmul(at, dt, transpose_a=True) for _ in range(5)]
        scaled_by_row = g[3] * af.constant(np.linspace(0, 1, 96, dtype=np.float32))
        fetched = 0.25 * g[4]
        updates = [
            af.assign_sub(ws[0], 0.1 * g[0]),  # Mul(Const, MatMul)
            af.assign_add(ws[1], g[1] * 0.5),  # Mul(MatMul, Const)
            af.assign_sub(ws[2], g[2]),  # the MatMul itself
            af.assign_sub(ws[3], scaled_by_row),  # not a scalar factor: no fusion
            af.assign_sub(ws[4], fetched),  # the scaled gradient is fetched too
        ]
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            got_fetched = s.run([af.group(*updates), fetched])[1]
            got = s.run(ws)
    assert gemm_calls[0] == 3
    grad = a.T @ d
    want = [
        w0 - np.float32(0.1) * grad,
        w0 + grad * np.float32(0.5),
        w0 - grad,
        w0 - grad * np.linspace(0, 1, 96, dtype=np.float32),
        w0 - np.float32(0.25) * grad,
    ]
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(g_, w_, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got_fetched, np.float32(0.25) * grad, rtol=1e-5, atol=1e-5)


def test_bias_add_relu_fusion_matches_the_separate_ops():
    rng = np.random.default_rng(6)
    v = rng.standard_normal((8, 12, 12, 16)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    a = rng.standard_normal((64, 40)).astype(np.float32)
    w = rng.standard_normal((40, 96)).astype(np.float32)
    bd = rng.standard_normal(96).astype(np.float32)
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 12, 12, 16])
        pre = af.nn.bias_add(x * 1.0, af.constant(b))
        shared_pre = af.nn.bias_add(x * 1.0, af.constant(b))
        nchw = af.nn.bias_add(af.transpose(x, [0, 3, 1, 2]), af.constant(b), "NCHW")
        outs = [
            af.nn.relu(pre),  # fused: BiasAdd computes the Relu too
            af.nn.relu(shared_pre),  # not fused: the pre-activation is fetched
            shared_pre,
            af.nn.relu(nchw),
            af.nn.relu(af.nn.bias_add(af.matmul(af.constant(a), af.constant(w)), bd)),
        ]
        with af.Session() as s:
            got = s.run(outs, {x: v})
    want = np.maximum(v + b, 0)
    np.testing.assert_allclose(got[0], want, rtol=1e-6)
    np.testing.assert_allclose(got[1], want, rtol=1e-6)
    np.testing.assert_allclose(got[2], v + b, rtol=1e-6)
    np.testing.assert_allclose(got[3], want.transpose(0, 3, 1, 2), rtol=1e-6)
    np.testing.assert_allclose(got[4], np.maximum(a @ w + bd, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "ksize,stride,fmt",
    [(2, 2, "NHWC"), (3, 2, "NHWC"), (2, 2, "NCHW"), (3, 1, "NCHW")],
)
def test_max_pool_grad_relu_grad_fusion_matches_the_separate_ops(monkeypatch, ksize, stride, fmt):

    rng = np.random.default_rng(7)
    v = rng.integers(-3, 4, (2, 9, 9, 3)).astype(np.float32)  # ties, all-negative windows
    if fmt == "NCHW":
        v = v.transpose(0, 3, 1, 2).copy()
    window = [1, 1, ksize, ksize] if fmt == "NCHW" else [1, ksize, ksize, 1]
    strides = [1, 1, stride, stride] if fmt == "NCHW" else [1, stride, stride, 1]
    with af.Graph().as_default():
        x = af.placeholder(af.float32, v.shape)
        r = af.nn.relu(x)
        pool = af.nn.max_pool(r, window, strides, "VALID", data_format=fmt)
        dy = af.constant(rng.standard_normal(pool.shape.as_list()).astype(np.float32))
        (fused,) = af.gradients(pool, [x], grad_ys=[dy])  # MaxPoolGrad -> ReluGrad
        (pool_grad,) = af.gradients(pool, [r], grad_ys=[dy])  # MaxPoolGrad alone
        with af.Session() as s:
            got, pg = s.run([fused, pool_grad], {x: v})
            fused_nodes = [op for sp in s._plans.values() for pl in sp.plans
                           for op in pl.nodes
                           if op.type == "_FusedMaxPoolGradReluGrad"]  # fmt: skip
    assert len(fused_nodes) == 1  # the pool_grad fetched alone stays a MaxPoolGrad
    np.testing.assert_array_equal(got, pg * (np.maximum(v, 0) > 0))


@pytest.mark.parametrize("data", ["continuous", "ties", "non_finite_dy", "nan_x"])
@pytest.mark.parametrize("ksize", [2, 3])
def test_max_pool_grad_relu_grad_fusion_on_tiling_windows(monkeypatch, data, ksize):
    """Windows that tile the input (the fast MaxPoolGrad, one maximum per window) give
    exactly ReluGrad(MaxPoolGrad(dy), x), with ties, non-positive windows, inf / nan in
    dy and nan in x (the last two take the general path)."""
    from asyncflow.ops import pooling_ops

    fast = []
    unique = pooling_ops._max_pool_grad_unique

    def recording(p, x, y, dy, relu, out):
        dx = unique(p, x, y, dy, relu, out)
        fast.append((relu, dx is not None))
        return dx

    monkeypatch.setattr(pooling_ops, "_max_pool_grad_unique", recording)
    rng = np.random.default_rng(11)
    shape = (3, 4 * ksize, 2 * ksize, 5)
    v = rng.uniform(-1, 1, shape).astype(np.float32)
    if data == "ties":  # equal positive maxima, all-zero and all-negative windows
        v = np.round(v * 2) / 2
    if data == "nan_x":
        v[0, 0, 0, 0] = np.nan
    oshape = (3, 4, 2, 5)
    dyv = rng.standard_normal(oshape).astype(np.float32)
    if data == "non_finite_dy":
        dyv[0, 0, 0, :3] = [np.inf, -np.inf, np.nan]
    window = [1, ksize, ksize, 1]
    with af.Graph().as_default():
        x = af.placeholder(af.float32, shape)
        r = af.nn.relu(x)
        pool = af.nn.max_pool(r, window, window, "VALID")
        (fused,) = af.gradients(pool, [x], grad_ys=[af.constant(dyv)])
        (pool_grad,) = af.gradients(pool, [r], grad_ys=[af.constant(dyv)])
        with af.Session() as s:
            got, pg = s.run([fused, pool_grad], {x: v})
    with np.errstate(invalid="ignore"):
        want = pg * (np.maximum(v, 0) > 0)  # TF's ReluGrad: gradients * (features > 0)
    np.testing.assert_array_equal(got, want)
    if data == "continuous":  # ties only among zeros: they do not matter to the fused one
        assert (True, True) in fast
    elif data in ("ties", "nan_x"):  # (a nan window is masked out in the fused one)
        assert (False, False) in fast
    else:  # inf * 0 would leak: both take the general path
        assert not any(took for _, took in fast)
    # and MaxPoolGrad alone routes each dy to the first maximum of its window
    rv = np.maximum(v, 0)
    if data != "nan_x":
        win = rv.reshape(3, 4, ksize, 2, ksize, 5).transpose(0, 1, 3, 5, 2, 4)
        first = win.reshape(3, 4, 2, 5, -1).argmax(axis=-1)
        ref = np.zeros((3, 4, 2, 5, ksize * ksize), np.float32)
        np.put_along_axis(ref, first[..., None], dyv[..., None], axis=-1)
        ref = ref.reshape(3, 4, 2, 5, ksize, ksize).transpose(0, 1, 4, 2, 5, 3).reshape(shape)
        np.testing.assert_array_equal(pg, ref)


@pytest.mark.parametrize(
    "shape",
    [(8, 12, 12, 16), (7, 13, 3), (1, 97, 32), (5, 1), (3, 2000), (0, 32), (4, 0), (2, 5, 7, 64)],
)
def test_add_relu_blocked_matches_numpy(shape):
    """The widened rows (bias repeated) cover every layout: channel counts that do and do
    not divide the row width, prime pixel counts, rows wider than a block, empty arrays."""
    from asyncflow.ops import nn_ops

    rng = np.random.default_rng(3)
    v = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape[-1]).astype(np.float32)
    out = np.full_like(v, np.nan)
    got = nn_ops._add_relu_blocked(v, b, out)
    assert got is out
    np.testing.assert_array_equal(got, np.maximum(v + b, 0))
    inplace = v.copy()
    np.testing.assert_array_equal(nn_ops._add_relu_blocked(inplace, b, inplace), got)


@needs_blas
def test_relu_grad_fusion_inside_a_cond_keeps_the_updates_alive():
    # With control flow the ReluGrad may be dead (its branch not taken): it must not
    # order the weights' updates after itself, or they would die with it.
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 40)).astype(np.float32)
    w1 = rng.standard_normal((40, 96)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((96, 80)).astype(np.float32) * 0.1
    with af.Graph().as_default():
        v1, v2 = af.Variable(w1), af.Variable(w2)
        pred = af.placeholder(af.bool, [])

        def dense():
            y = af.matmul(af.nn.relu(af.matmul(af.constant(x), v1)), v2)
            return af.reduce_sum(y * y) / 2

        loss = af.cond(pred, dense, lambda: af.reduce_sum(v1) + af.reduce_sum(v2))
        train = af.train.GradientDescentOptimizer(0.001).minimize(loss)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            s.run(train, {pred: False})
            g1, g2 = s.run([v1, v2])
            s.run(train, {pred: True})
            h1, h2 = s.run([v1, v2])
    np.testing.assert_allclose(g1, w1 - 0.001, rtol=1e-6)
    np.testing.assert_allclose(g2, w2 - 0.001, rtol=1e-6)
    w1, w2 = g1.astype(np.float64), g2.astype(np.float64)
    z = x @ w1
    hh = np.maximum(z, 0)
    dy = hh @ w2
    want1 = w1 - 0.001 * x.T @ ((dy @ w2.T) * (z > 0))
    want2 = w2 - 0.001 * hh.T @ dy
    np.testing.assert_allclose(h1, want1, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(h2, want2, rtol=2e-4, atol=2e-5)


# -- a join read as a product's left operand (matmul_ops.fuse_concat_matmul) -------------------


def _kinds(s):
    return [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch", [1, 3, 128])
@pytest.mark.parametrize("axis", [1, -1, 0])
def test_a_join_and_its_product_in_one_node(dtype, batch, axis, monkeypatch):
    # An LSTM cell's [x_t, h] join and its product; the weights' gradient reads the join
    # again (the fused node's second output).  Odd sizes, batch 1; a join of rows too.
    rng = np.random.default_rng(6)
    x_np = rng.standard_normal((batch, 1)).astype(dtype)
    h_np = rng.standard_normal((batch, 7)).astype(dtype)
    w_np = rng.standard_normal((8, 12)).astype(dtype)
    b_np = rng.standard_normal(12).astype(dtype)
    if axis == 0:  # (rows joined: [x; h] of 8 columns)
        x_np = rng.standard_normal((1, 8)).astype(dtype)
        h_np = rng.standard_normal((batch, 8)).astype(dtype)

    def run():
        with af.Graph().as_default(), af.device("/cpu:0"):
            x = af.placeholder(dtype, [None, x_np.shape[1]])
            h = af.placeholder(dtype, [None, h_np.shape[1]])
            w, b = af.Variable(w_np), af.Variable(b_np)
            joined = af.concat([x, h], axis)
            y = af.nn.bias_add(af.matmul(joined, w), b)
            loss = af.reduce_sum(af.tanh(y))
            (dw,) = af.gradients(loss, [w])
            with af.Session() as s:
                s.run(af.global_variables_initializer())
                out = s.run([y, dw, joined], {x: x_np, h: h_np})
                kinds = _kinds(s)
        return out, kinds

    (y, dw, joined), kinds = run()
    assert "_FusedConcatMatMul" in kinds and "ConcatV2" not in kinds
    want_j = np.concatenate([x_np, h_np], axis).astype(np.float64)
    want_y = want_j @ w_np + b_np
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_array_equal(joined, want_j.astype(dtype))
    np.testing.assert_allclose(y, want_y, rtol=tol, atol=tol)
    np.testing.assert_allclose(dw, want_j.T @ (1 - np.tanh(want_y) ** 2), rtol=tol, atol=tol)
    assert y.dtype == dtype and dw.dtype == dtype
    monkeypatch.setattr(matmul_ops, "_CONCATS", False)
    (y0, dw0, _), kinds0 = run()
    assert "ConcatV2" in kinds0 and "_FusedConcatMatMul" not in kinds0
    assert y.tobytes() == y0.tobytes() and dw.tobytes() == dw0.tobytes()


@needs_blas
def test_a_fused_join_that_does_not_fit_is_concats_error():
    with af.Graph().as_default(), af.device("/cpu:0"):
        x = af.placeholder(af.float32, [None, 1])
        h = af.placeholder(af.float32, [None, 7])
        y = af.matmul(af.concat([x, h], 1), af.ones([8, 4])) + af.ones([4])
        with af.Session() as s:
            with pytest.raises(
                errors.InvalidArgumentError,
                match=r"ConcatOp : Dimensions of inputs should match: shape\[0\] = \[2,1\] "
                r"vs. shape\[1\] = \[3,7\]",
            ):
                s.run(y, {x: np.ones((2, 1), np.float32), h: np.ones((3, 7), np.float32)})
            assert "_FusedConcatMatMul" in _kinds(s)


@needs_blas
def test_joins_that_stay_concat_nodes():
    with af.Graph().as_default(), af.device("/cpu:0"):
        x = af.placeholder(af.float32, [None, 4])
        h = af.placeholder(af.float32, [None, 4])
        w = af.ones([8, 3])
        fetches = [
            af.matmul(af.concat([x, h], 1), w) * 2.0,  # (no bias: a plain MatMul)
            af.matmul(af.concat([x, h], 0), af.ones([4, 3]), transpose_a=True) + 1.0,
            af.matmul(x, af.concat([w, w], 1)[:4]) + 1.0,  # (a join of the right operand)
        ]
        with af.Session() as s:
            s.run(fetches, {x: np.ones((2, 4), np.float32), h: np.ones((2, 4), np.float32)})
            kinds = _kinds(s)
    assert "_FusedConcatMatMul" not in kinds and kinds.count("ConcatV2") == 3


def test_a_join_in_a_loop_that_its_product_waits_for_stays_a_concat_node(monkeypatch):
    # Inside a while loop, another reader of the join that the product waits for in the
    # same iteration (its right operand made from the join): the fused node would wait
    # for itself; a loop's back edge makes no such wait (the join into the next
    # iteration's product: folded).
    rng = np.random.default_rng(41)
    x_np = rng.standard_normal((3, 4)).astype(np.float32)

    def run():
        with af.Graph().as_default(), af.device("/cpu:0"):
            x = af.placeholder(af.float32, [None, 4])

            def body(i, h, acc):
                joined = af.concat([x, h], 1)
                w = af.matmul(joined, joined, transpose_a=True) * 0.01  # [8, 8]
                y = af.nn.bias_add(af.matmul(joined, w[:, :4]), af.ones([4]))
                z = af.nn.bias_add(af.matmul(af.concat([h, x], 1), af.ones([8, 4])), af.ones([4]))
                return i + 1, af.tanh(y), acc + z * 0.1

            _, h, acc = af.while_loop(lambda i, h, acc: i < 3, body, [af.constant(0), x, x])
            with af.Session() as s:
                out = s.run([h, acc], {x: x_np})
                kinds = _kinds(s)
        return out, kinds

    out, kinds = run()
    assert kinds.count("_FusedConcatMatMul") == 1 and kinds.count("ConcatV2") == 1
    monkeypatch.setattr(matmul_ops, "_CONCATS", False)
    off, kinds0 = run()
    assert "_FusedConcatMatMul" not in kinds0
    h, acc = x_np.astype(np.float64), x_np.astype(np.float64)
    for _ in range(3):
        joined = np.concatenate([x_np, h], 1)
        y = joined @ (joined.T @ joined * 0.01)[:, :4] + 1.0
        z = np.concatenate([h, x_np], 1) @ np.ones((8, 4)) + 1.0
        h, acc = np.tanh(y), acc + z * 0.1
    np.testing.assert_allclose(out[0], h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], acc, rtol=1e-5, atol=1e-5)
    for v, v0 in zip(out, off):
        assert v.tobytes() == v0.tobytes()
