"""ops/matmul_sum.py: AddN of MatMul products as gemm calls accumulating into one
buffer, as one node or streamed (a part per product, the sum's end).  Values against
NumPy (float64 references) and against the unfused graph, the streamed sum bitwise
against the one-node sum; errors as the unfused ops word them.  A loop's two products
of one operand as one _MatMulPair, bitwise the MatMuls'; its weight product added to
the loop's accumulator in the gemm (_MatMulPairAdd), bitwise the Add's, in place only
where the accumulator was donated."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors, graph_passes
from asyncflow.devices import cpu_budget
from asyncflow.ops import blas, matmul_sum, state_ops

needs_blas = pytest.mark.skipif(
    not blas.available(np.float32), reason="NumPy's bundled OpenBLAS not found"
)


def _plan_types(sess) -> list[str]:
    return [op.type for sp in sess._plans.values() for pl in sp.plans for op in pl.nodes]


@pytest.fixture
def unfused(monkeypatch):
    """Run the graph passes without this one (the plain MatMul and AddN kernels)."""
    passes = [p for p in graph_passes.GRAPH_PASSES if p is not matmul_sum.fuse_matmul_add_n]
    monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blas_matmul_sum_matches_numpy_in_any_number_of_runs(dtype):
    rng = np.random.default_rng(0)
    pairs, want = [], np.zeros((40, 70))
    for k in range(5):
        ta, tb = bool(k & 1), bool(k & 2)
        a = rng.standard_normal((30, 40) if ta else (40, 30)).astype(dtype)
        b = rng.standard_normal((70, 30) if tb else (30, 70)).astype(dtype)
        pairs.append((a, b, ta, tb))
        want += (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    extra = rng.standard_normal((40, 70)).astype(dtype)
    want += extra
    tol = 1e-5 if dtype == np.float32 else 1e-12
    results = []
    for runs in (1, 2, 3, 5, 9):
        got = blas.matmul_sum(pairs, [extra], (40, 70), runs)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        results.append(got)
    # the runs depend on `runs` only: the same call gives the same bits again
    np.testing.assert_array_equal(blas.matmul_sum(pairs, [extra], (40, 70), 3), results[2])


def test_runs_follow_size_and_budget():
    assert matmul_sum.runs_for(28, 1 << 20) == 1  # small: one run
    assert matmul_sum.runs_for(1, 1 << 30) == 1  # one product: blas splits it itself
    big = matmul_sum.runs_for(28, 1 << 30)
    assert 1 <= big <= 8


def _rnn_gradients(steps=6, batch=64):
    """Gradients of a static LSTM (the weight gradient is a sum of one product per
    step), fed a batch of `batch` rows: the plan's op types and the values."""
    rng = np.random.default_rng(1)
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, steps, 12])
        cell = af.nn.rnn_cell.BasicLSTMCell(64)
        out, _ = af.nn.static_rnn(cell, af.unstack(x, steps, 1), dtype=af.float32)
        loss = af.reduce_sum(out[-1] * out[-1])
        variables = af.trainable_variables()
        grads = af.gradients(loss, variables)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            s.run(
                [
                    v.assign(rng.standard_normal(v.shape.as_list()).astype(np.float32) * 0.2)
                    for v in variables
                ]
            )
            xv = rng.standard_normal((batch, steps, 12)).astype(np.float32)
            values = s.run(grads, {x: xv})
            return _plan_types(s), values


@needs_blas
def test_an_unrolled_rnn_weight_gradient_sums_beside_the_input_gradients(request):
    types, fused = _rnn_gradients()
    # the weights' gradient: each step's product paired with the step's input
    # gradient (the first step's is pruned: a part alone), then the end (the bias's
    # sum of BiasAddGrads stays AddN)
    assert types.count("_MatMulSumPair") == 5 and types.count("_MatMulSumPart") == 1
    assert types.count("_MatMulSumEnd") == 1
    assert "_FusedMatMulAddN" not in types
    request.getfixturevalue("unfused")
    types, plain = _rnn_gradients()
    assert "_MatMulSumEnd" not in types
    for f, p in zip(fused, plain):
        np.testing.assert_allclose(f, p, rtol=1e-5, atol=1e-5)


def _one_blas_thread(monkeypatch):
    """Every gemm call on one BLAS thread (the budget's deterministic mode; the runs and
    blocks still split over `threads_now`): on some CPUs OpenBLAS's two threads do not
    give one thread's bits (0.3.31's Haswell kernels on an EPYC: a [96,76]^T x [96,256]
    weight gradient differed in 16% of its elements), and the budget picks the thread
    count of each kind of call by measured time, differently in the graphs compared."""
    monkeypatch.setattr(cpu_budget, "_deterministic", True)


@needs_blas
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_paired_sum_has_the_one_node_sums_bits(monkeypatch, batched, threads):
    # The same gemm calls into the same runs' buffers in the same order: the same
    # bits as the one-node sum (and the input gradients as the MatMuls'), from one
    # batched call on one or two BLAS threads or from two calls, with the one-node
    # sum's runs (two, as on a budget of two cores).
    monkeypatch.setattr(matmul_sum, "runs_for", lambda count, macs: min(count, 2))
    if not batched:
        monkeypatch.setattr(blas, "_batch_fns", {})
    monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None: threads)
    _one_blas_thread(monkeypatch)
    types, paired = _rnn_gradients(steps=7, batch=96)
    assert types.count("_MatMulSumPair") == 6
    monkeypatch.setattr(matmul_sum, "_PAIR_MIN", 1000)
    types, one_node = _rnn_gradients(steps=7, batch=96)
    assert types.count("_FusedMatMulAddN") == 1 and "_MatMulSumEnd" not in types
    for a, b in zip(paired, one_node):
        np.testing.assert_array_equal(a, b)


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [1, 4])  # two calls (small: see blas), or batched
def test_gemm_pair_matches_two_gemms(dtype, size):
    rng = np.random.default_rng(6)
    m, n, k = 70 * size, 40 * size, 50 * size
    for ta, tb in [(False, False), (True, False), (False, True), (True, True)]:
        a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
        pa = rng.standard_normal((33 * size, 21 * size)).astype(dtype)
        pb = rng.standard_normal((21 * size, 65 * size)).astype(dtype)
        c0 = rng.standard_normal((m, n)).astype(dtype)
        c, pc = c0.copy(), np.empty((33 * size, 65 * size), dtype)
        blas.gemm_pair(pc, pa, pb, False, False, 0.0, c, a, b, ta, tb, 1.0)
        # each as one gemm call on one thread (a split, or OpenBLAS's threads, may
        # round a float64 product's edge columns otherwise)
        want_c, want_pc = c0.copy(), np.empty_like(pc)
        cpu_budget.blas_single()
        blas.accumulate(want_c, a, b, ta, tb, False)
        blas.accumulate(want_pc, pa, pb, False, False, True)
        np.testing.assert_array_equal(c, want_c)
        np.testing.assert_array_equal(pc, want_pc)
        opa, opb = (a.T if ta else a), (b.T if tb else b)
        np.testing.assert_allclose(c, c0 + opa.astype(np.float64) @ opb, rtol=1e-4, atol=1e-3)
    # an empty inner dimension: beta times C, as gemm_into
    c = np.ones((3, 4), dtype)
    pc = np.ones((2, 2), dtype)
    empty = [np.ones(s, dtype) for s in [(2, 0), (0, 2), (3, 0), (0, 4)]]
    blas.gemm_pair(pc, *empty[:2], False, False, 0.0, c, *empty[2:], False, False, 1.0)
    np.testing.assert_array_equal(c, np.ones((3, 4), dtype))
    np.testing.assert_array_equal(pc, np.zeros((2, 2), dtype))


@needs_blas
@pytest.mark.parametrize("busy", [True, False])
@pytest.mark.parametrize("size", [1, 4])
def test_gemm_pair_beside_a_busy_process_calls_the_one_thread_gemm_twice(monkeypatch, busy, size):
    # Given one thread while another process holds a core: two calls of MKL's or
    # oneDNN's one-thread gemm (faster than OpenBLAS's batched call on one thread),
    # here a recording stand-in computing with OpenBLAS's; else as before.
    real = blas._fns[np.dtype(np.float32)]
    calls = []

    def one(*args):
        calls.append(tuple(args[3:6]))
        real(*args)

    monkeypatch.setattr(blas, "_one_fns", {np.dtype(np.float32): one})
    monkeypatch.setattr(blas, "_ONE_ADDRESSES", {})  # (the ctypes call, not the compiled)
    monkeypatch.setattr(blas, "_pool", lambda *args, **kwargs: None)
    monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None: 1 if busy else 2)
    cpu_budget.blas_single()
    try:
        rng = np.random.default_rng(size)
        m, n, k = 70 * size, 40 * size, 50 * size
        a = rng.standard_normal((k, m)).astype(np.float32)
        b = rng.standard_normal((n, k)).astype(np.float32)
        pa = rng.standard_normal((33 * size, 21 * size)).astype(np.float32)
        pb = rng.standard_normal((21 * size, 65 * size)).astype(np.float32)
        c0 = rng.standard_normal((m, n)).astype(np.float32)
        c, pc = c0.copy(), np.empty((33 * size, 65 * size), np.float32)
        blas.gemm_pair(pc, pa, pb, False, False, 0.0, c, a, b, True, True, 1.0)
        if busy or size == 1 or not blas._batch_fns:  # (size 1: small, two calls anyway)
            assert calls == [(33 * size, 65 * size, 21 * size), (m, n, k)]
        else:  # OpenBLAS's batched call
            assert calls == []
        np.testing.assert_allclose(c, c0 + a.T.astype(np.float64) @ b.T, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(pc, pa.astype(np.float64) @ pb, rtol=1e-4, atol=1e-3)
    finally:
        cpu_budget.restore_blas()


@needs_blas
def test_sum_of_products_against_finite_differences():
    # loss = |x1 @ w + x2.T @ w|^2 / 2: w's gradient is AddN of two products, checked
    # against central differences of the loss (float64).
    rng = np.random.default_rng(2)
    x1 = rng.standard_normal((80, 64))
    x2 = rng.standard_normal((64, 80))
    w0 = rng.standard_normal((64, 64)) * 0.1
    with af.Graph().as_default():
        w = af.Variable(w0)
        y = af.matmul(af.constant(x1), w) + af.matmul(af.constant(x2), w, transpose_a=True)
        loss = af.reduce_sum(y * y) / 2
        (g,) = af.gradients(loss, [w])
        with af.Session() as s:
            s.run(w.initializer)
            got = s.run(g)
            assert "_FusedMatMulAddN" in _plan_types(s)

    def f(wv):
        yv = x1 @ wv + x2.T @ wv
        return float((yv * yv).sum() / 2)

    eps = 1e-6
    for i, j in [(0, 0), (3, 17), (63, 63), (20, 5)]:
        up, down = w0.copy(), w0.copy()
        up[i, j] += eps
        down[i, j] -= eps
        assert got[i, j] == pytest.approx((f(up) - f(down)) / (2 * eps), rel=1e-6, abs=1e-6)


@needs_blas
def test_weights_a_product_reads_are_updated_after_it(monkeypatch):
    # h's gradient is dy1 @ w1.T + dy2 @ w2.T, one fused sum reading w1 and w2: their
    # updates must wait for it (no copy-on-write copy), and the values stay SGD's.
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 40)).astype(np.float32)
    w0 = rng.standard_normal((40, 96)).astype(np.float32) * 0.1
    w1 = rng.standard_normal((96, 80)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((96, 80)).astype(np.float32) * 0.1
    lr = 0.001
    copies = []
    real = state_ops.VarRef.writable_target

    def counting(ref):
        if not ref._exclusive():
            copies.append(ref.value.shape)
        return real(ref)

    monkeypatch.setattr(state_ops.VarRef, "writable_target", counting)
    with af.Graph().as_default():
        v0, v1, v2 = af.Variable(w0), af.Variable(w1), af.Variable(w2)
        h = af.matmul(af.constant(x), v0)
        y1, y2 = af.matmul(h, v1), af.matmul(h, v2)
        loss = af.reduce_sum(y1 * y1) / 2 + af.reduce_sum(y2 * y2) / 2
        train = af.train.GradientDescentOptimizer(lr).minimize(loss)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            for _ in range(3):
                s.run(train)
            got = s.run([v0, v1, v2])
            assert "_FusedMatMulAddN" in _plan_types(s)
    assert copies == []
    w0, w1, w2 = (w.astype(np.float64) for w in (w0, w1, w2))
    for _ in range(3):
        hh = x @ w0
        d1, d2 = hh @ w1, hh @ w2
        dh = d1 @ w1.T + d2 @ w2.T
        w0, w1, w2 = w0 - lr * x.T @ dh, w1 - lr * hh.T @ d1, w2 - lr * hh.T @ d2
    for g, want in zip(got, (w0, w1, w2)):
        np.testing.assert_allclose(g, want, rtol=2e-4, atol=2e-5)


@needs_blas
@pytest.mark.parametrize("fuse", [True, False])
def test_mixed_addends_keep_their_values(request, fuse):
    if not fuse:
        request.getfixturevalue("unfused")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((70, 90)).astype(np.float32)
    b = rng.standard_normal((90, 60)).astype(np.float32)
    c = rng.standard_normal((90, 70)).astype(np.float32)
    d = rng.standard_normal((60, 90)).astype(np.float32)
    e = rng.standard_normal((70, 60)).astype(np.float32)
    with af.Graph().as_default():
        pa, pb, pc, pd, pe = (af.placeholder(af.float32, [None, None]) for _ in range(5))
        total = af.add_n([pe, af.matmul(pa, pb), af.matmul(pc, pd, True, True), pe * 2.0])
        with af.Session() as s:
            got = s.run(total, {pa: a, pb: b, pc: c, pd: d, pe: e})
            assert ("_FusedMatMulAddN" in _plan_types(s)) == fuse
    a, b, c, d, e = (v.astype(np.float64) for v in (a, b, c, d, e))
    want = 3.0 * e + a @ b + c.T @ d.T
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@needs_blas
def test_errors_are_the_unfused_ops():
    with af.Graph().as_default():
        pa, pb, pc = (af.placeholder(af.float32, [None, None]) for _ in range(3))
        total = af.add_n([af.matmul(pa, pb), af.matmul(pc, pb)])
        with af.Session() as s:
            ones = np.ones
            # a product of sizes that do not match: MatMul's error
            with pytest.raises(errors.InvalidArgumentError, match="Matrix size-incompatible"):
                s.run(total, {pa: ones((4, 3)), pb: ones((5, 2)), pc: ones((4, 5))})
            # products of different shapes: AddN's error, in AddN's words
            with pytest.raises(errors.InvalidArgumentError, match="must have the same size"):
                s.run(total, {pa: ones((4, 5)), pb: ones((5, 2)), pc: ones((3, 5))})
            # small sums take the plain path, with the same values
            got = s.run(total, {pa: ones((4, 5)), pb: ones((5, 2)), pc: ones((4, 5))})
            np.testing.assert_array_equal(got, np.full((4, 2), 10.0, np.float32))
            assert "_FusedMatMulAddN" in _plan_types(s)


@needs_blas
@pytest.mark.parametrize("fuse", [True, False])
def test_paired_sum_with_addends_values_and_errors(request, fuse):
    # Four products, each with a partner MatMul reading its right operand (paired), and
    # two other addends, against NumPy; then the errors of the unfused ops: MatMul's for
    # a product or a partner, AddN's for products of different shapes.
    if not fuse:
        request.getfixturevalue("unfused")
    # (its last check compares bits across two runs: one BLAS thread for each call, or
    # the budget's measured choice of threads may differ between them)
    _one_blas_thread(request.getfixturevalue("monkeypatch"))
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((70, 90)).astype(np.float32) for _ in range(4)]
    ys = [rng.standard_normal((90, 60)).astype(np.float32) for _ in range(4)]
    w = rng.standard_normal((60, 80)).astype(np.float32)
    e = rng.standard_normal((70, 60)).astype(np.float32)
    with af.Graph().as_default():
        pxs = [af.placeholder(af.float32, [None, None]) for _ in range(4)]
        pys = [af.placeholder(af.float32, [None, None]) for _ in range(4)]
        pw, pe = af.placeholder(af.float32, [None, None]), af.placeholder(af.float32, [None, None])
        negs = [af.negative(y) for y in pys]  # (a node, read by both: partners)
        products = [af.matmul(a, b) for a, b in zip(pxs, negs)]
        partners = [af.matmul(y, pw) for y in negs]
        total = af.add_n([products[0], pe, *products[1:3], pe * 2.0, products[3]])
        with af.Session() as s:
            feed = dict(zip(pxs + pys + [pw, pe], xs + ys + [w, e]))
            got, got_partners = s.run([total, partners], feed)
            types = _plan_types(s)
            assert (types.count("_MatMulSumPair") == 4) == fuse
            want = 3.0 * e.astype(np.float64)
            for a, b in zip(xs, ys):
                want -= a.astype(np.float64) @ b.astype(np.float64)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            for y, p in zip(ys, got_partners):
                np.testing.assert_allclose(p, -y.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
            bad = dict(feed)
            bad[pxs[2]] = np.ones((70, 80), np.float32)
            with pytest.raises(errors.InvalidArgumentError, match="Matrix size-incompatible"):
                s.run(total, bad)
            bad = dict(feed)
            bad[pw] = np.ones((61, 80), np.float32)
            with pytest.raises(errors.InvalidArgumentError, match="Matrix size-incompatible"):
                s.run([total, partners], bad)
            bad = dict(feed)
            bad[pxs[1]], bad[pys[1]] = np.ones((70, 5), np.float32), np.ones((5, 60), np.float32)
            bad[pxs[3]], bad[pys[3]] = np.ones((70, 5), np.float32), np.ones((5, 61), np.float32)
            with pytest.raises(errors.InvalidArgumentError, match="must have the same size"):
                s.run(total, bad)
            # the session runs on after the errors, with the same values
            np.testing.assert_array_equal(s.run(total, feed), got)


@pytest.mark.timeout(60)
def test_pairs_can_be_turned_off_by_the_environment():
    code = "from asyncflow.ops import matmul_sum; print(matmul_sum._PAIR_MIN)"
    for value, paired in (("0", False), ("1", True), ("", True)):
        env = dict(os.environ, ASYNCFLOW_MATMUL_PAIRS=value)
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert (int(out.stdout) <= 64) == paired, value


def _dynamic_rnn_gradients(batch=128):
    """Gradients of a dynamic_rnn LSTM (a while loop: each backward iteration's input
    gradient and weight product read one dgates): the plan's op types and the values."""
    rng = np.random.default_rng(2)
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 5, 12])
        cell = af.nn.rnn_cell.BasicLSTMCell(64)
        out, _ = af.nn.dynamic_rnn(cell, x, dtype=af.float32)
        loss = af.reduce_sum(out[:, -1] * out[:, -1])
        variables = af.trainable_variables()
        # (an optimizer's gradients: gate_gradients' tuples, as a training step has)
        pairs = af.train.GradientDescentOptimizer(0.1).compute_gradients(loss, variables)
        grads = [g for g, _v in pairs]
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            s.run(
                [
                    v.assign(rng.standard_normal(v.shape.as_list()).astype(np.float32) * 0.2)
                    for v in variables
                ]
            )
            xv = rng.standard_normal((batch, 5, 12)).astype(np.float32)
            values = s.run(grads, {x: xv})
            return _plan_types(s), values


@needs_blas
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_loop_products_of_one_operand_pair_with_the_matmuls_bits(monkeypatch, batched, threads):
    # Inside the backward loop dgates @ W^T and concat^T @ dgates are one _MatMulPair
    # (one batched gemm call on one or two BLAS threads, or two calls): each product
    # the MatMul's bits; a small batch (two plain products) too.
    if not batched:
        monkeypatch.setattr(blas, "_batch_fns", {})
    monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None: threads)
    _one_blas_thread(monkeypatch)
    for batch in (128, 8):
        types, paired = _dynamic_rnn_gradients(batch)
        assert types.count("_MatMulPair") + types.count("_MatMulPairAdd") >= 1
        with monkeypatch.context() as m:
            passes = [p for p in graph_passes.GRAPH_PASSES if p is not matmul_sum.pair_matmuls]
            m.setattr(graph_passes, "GRAPH_PASSES", passes)
            types, plain = _dynamic_rnn_gradients(batch)
        assert "_MatMulPair" not in types and "_MatMulPairAdd" not in types
        for a, b in zip(paired, plain):
            np.testing.assert_array_equal(a, b)


def _dense_gradients(batch, pair_plain: bool, monkeypatch):
    """A two-layer tanh network's gradients (no control flow, an optimizer's gradient
    gates): the plan's op types, the values, and the inputs for a NumPy reference."""
    monkeypatch.setattr(matmul_sum, "_PAIR_PLAIN", pair_plain)
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((batch, 96)).astype(np.float32)
    w1v = rng.standard_normal((96, 80)).astype(np.float32) * 0.2
    w2v = rng.standard_normal((80, 72)).astype(np.float32) * 0.2
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 96])
        w1, w2 = af.Variable(w1v), af.Variable(w2v)
        out = af.matmul(af.tanh(af.matmul(x, w1)), w2)
        loss = af.reduce_sum(out * out)
        pairs = af.train.AdamOptimizer(0.1).compute_gradients(loss, [w1, w2])
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            values = s.run([g for g, _v in pairs], {x: xv})
            return _plan_types(s), values, (xv, w1v, w2v)


@needs_blas
@pytest.mark.parametrize("batch", [64, 4])
def test_a_dense_layers_two_gradient_products_pair_outside_loops(monkeypatch, batch):
    # dz @ W2^T and h^T @ dz read one dz, with no path between them: one _MatMulPair in
    # a partition without control flow too, each product with its MatMul's bits on one
    # BLAS thread (a small batch: two plain products), and the gradients NumPy's.
    _one_blas_thread(monkeypatch)
    types, paired, (xv, w1v, w2v) = _dense_gradients(batch, True, monkeypatch)
    assert types.count("_MatMulPair") == 1
    types, plain, _ = _dense_gradients(batch, False, monkeypatch)
    assert "_MatMulPair" not in types
    for a, b in zip(paired, plain):
        np.testing.assert_array_equal(a, b)
    x, w1, w2 = (v.astype(np.float64) for v in (xv, w1v, w2v))
    h = np.tanh(x @ w1)
    dz = 2 * (h @ w2)
    dw2 = h.T @ dz
    dw1 = x.T @ ((dz @ w2.T) * (1 - h * h))
    np.testing.assert_allclose(paired[0], dw1, rtol=2e-4, atol=2e-4 * np.abs(dw1).max())
    np.testing.assert_allclose(paired[1], dw2, rtol=2e-4, atol=2e-4 * np.abs(dw2).max())


@needs_blas
def test_a_pair_outside_loops_never_waits_for_a_later_operand(monkeypatch):
    # h @ w1 and h @ w2 (variables) pair; h @ g does not, where g is computed apart
    # from h: the pair would hold h @ w1 back until g is ready.
    monkeypatch.setattr(matmul_sum, "_PAIR_PLAIN", True)
    rng = np.random.default_rng(6)
    xv, zv = (rng.standard_normal((64, 96)).astype(np.float32) for _ in range(2))
    av, bv, w1v, w2v = (rng.standard_normal((96, 96)).astype(np.float32) * 0.1 for _ in range(4))
    with af.Graph().as_default():
        x, z = af.placeholder(af.float32, [64, 96]), af.placeholder(af.float32, [64, 96])
        a, b, w1, w2 = af.constant(av), af.constant(bv), af.Variable(w1v), af.Variable(w2v)
        h = af.tanh(af.matmul(x, a))
        g = af.exp(af.matmul(z, b) * 0.1)
        p1, p2, p3 = af.matmul(h, w1), af.matmul(h, w2), af.matmul(h, g, transpose_b=True)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            feed = {x: xv, z: zv}
            got = s.run([p1, p3], feed)
            assert "_MatMulPair" not in _plan_types(s)
            got += s.run([p1, p2], feed)
            assert _plan_types(s).count("_MatMulPair") == 1
    hv = np.tanh(xv.astype(np.float64) @ av)
    gv = np.exp((zv.astype(np.float64) @ bv) * 0.1)
    for value, want in zip(got, [hv @ w1v, hv @ gv.T, hv @ w1v, hv @ w2v]):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


# -- a pair's product added to an accumulator (_MatMulPairAdd) -----------------------


def _without(monkeypatch, rewrite):
    passes = [p for p in graph_passes.GRAPH_PASSES if p is not rewrite]
    monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)


@pytest.fixture
def taken(monkeypatch):
    """For each gemm-path run of a _MatMulPairAdd: whether it wrote into its
    accumulator's own buffer (donated) rather than a copy."""
    seen = []
    real = matmul_sum._accumulator

    def spy(ctx, acc):
        out = real(ctx, acc)
        seen.append(out is acc)
        return out

    monkeypatch.setattr(matmul_sum, "_accumulator", spy)
    return seen


@needs_blas
@pytest.mark.parametrize("batched", [True, False])
def test_a_loop_weight_product_accumulates_in_the_gemm_with_the_adds_bits(
    monkeypatch, taken, batched
):
    # In the backward loop the weight product concat^T @ dgates and the accumulator's
    # Add are one node, the gemm adding into the accumulator: a copy of it in the first
    # iteration (the Enter's value), its own buffer after (the compiled loop gives a
    # loop variable to its one reader: asyncflow/frames.py `_carry_takers`).  K = batch
    # = 128, one K block of OpenBLAS: the sum has the Add's bits (and the input
    # gradient the MatMul's).
    if not batched:
        monkeypatch.setattr(blas, "_batch_fns", {})
    _one_blas_thread(monkeypatch)
    types, fused = _dynamic_rnn_gradients(128)
    assert types.count("_MatMulPairAdd") == 1 and "_MatMulPair" not in types
    assert taken == [False] + [True] * 4  # a copy of the Enter's value, then in place
    with monkeypatch.context() as m:
        _without(m, matmul_sum.accumulate_pair_products)
        types, plain = _dynamic_rnn_gradients(128)
    assert "_MatMulPairAdd" not in types and types.count("_MatMulPair") == 1
    for a, b in zip(fused, plain):
        np.testing.assert_array_equal(a, b)


@needs_blas
def test_a_loop_accumulated_weight_gradient_against_finite_differences():
    rng = np.random.default_rng(8)
    xv = rng.standard_normal((128, 4, 12))
    cv = rng.standard_normal((128, 64))
    with af.Graph().as_default():
        x = af.placeholder(af.float64, [None, 4, 12])
        cell = af.nn.rnn_cell.BasicLSTMCell(64)
        out, _ = af.nn.dynamic_rnn(cell, x, dtype=af.float64)
        loss = af.reduce_sum(out[:, -1] * af.constant(cv))
        kernel = [v for v in af.trainable_variables() if "kernel" in v.name][0]
        # (an optimizer's gradients: without gate_gradients' Identity between the
        # product and the accumulator's Add, the Add is a _FusedMatMul's)
        ((grad, _v),) = af.train.GradientDescentOptimizer(0.1).compute_gradients(loss, [kernel])
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            w0 = rng.standard_normal(kernel.shape.as_list()) * 0.2
            s.run(kernel.assign(w0))
            got = s.run(grad, {x: xv})
            types = _plan_types(s)
            assert "_MatMulPairAdd" in types
            eps = 1e-6
            for r, c in [(0, 0), (11, 7), (40, 100), (75, 255)]:
                values = []
                for sign in (1, -1):
                    w = w0.copy()
                    w[r, c] += sign * eps
                    s.run(kernel.assign(w))
                    values.append(s.run(loss, {x: xv}))
                want = (values[0] - values[1]) / (2 * eps)
                assert got[r, c] == pytest.approx(want, rel=1e-6, abs=1e-7)


def _loop_accumulation(variant: str, dtype=np.float32):
    """acc += x^T @ tanh(d) over three iterations of a while loop, beside the partner
    product tanh(d) @ w (summed into s), the product past an Identity as gradients'
    tuples put it (a MatMul added directly is a _FusedMatMul's): (acc, s, the plan's op
    types, the fed initial accumulator after the run, the NumPy reference).  variant:
    "own" (the loop's accumulator, donated), "fed" (the caller's array enters the loop),
    "read" (the body reads acc again), "fetched" (the result read after the loop
    twice)."""
    rng = np.random.default_rng(7)
    xv = rng.standard_normal((128, 156)).astype(dtype)
    wv = rng.standard_normal((512, 156)).astype(dtype) * 0.1
    dv = rng.standard_normal((128, 512)).astype(dtype)
    av = rng.standard_normal((156, 512)).astype(dtype)
    fed = av.copy()
    with af.Graph().as_default():
        x, w = af.constant(xv), af.constant(wv)
        d0, a0 = af.placeholder(dtype, [128, 512]), af.placeholder(dtype, [156, 512])

        def body(i, acc, d, s):
            g = af.tanh(d)
            s = s + af.reduce_sum(af.matmul(g, w))
            if variant == "read":
                s = s + af.reduce_sum(acc)
            product = af.identity(af.matmul(x, g, transpose_a=True))  # (gate_gradients')
            return i + 1, acc + product, d * 0.5, s

        start = a0 if variant == "fed" else a0 * 2.0
        loop = af.while_loop(lambda i, *_: i < 3, body, [0, start, d0, af.constant(0, dtype)])
        fetches = [loop[1], loop[3]] + ([loop[1] * 2.0] if variant == "fetched" else [])
        with af.Session() as sess:
            got = sess.run(fetches, {d0: dv, a0: fed})
            types = _plan_types(sess)
    x64, w64 = xv.astype(np.float64), wv.astype(np.float64)
    acc = av.astype(np.float64) * (1.0 if variant == "fed" else 2.0)
    d, s = dv.astype(np.float64), 0.0
    for _ in range(3):
        g = np.tanh(d)
        s += (g @ w64).sum() + (acc.sum() if variant == "read" else 0.0)
        acc, d = acc + x64.T @ g, d * 0.5
    if variant == "fetched":
        np.testing.assert_array_equal(got[2], got[0] * 2.0)
    return got[0], got[1], types, (fed, av), (acc, s)


@needs_blas
@pytest.mark.parametrize("variant", ["own", "fed", "read", "fetched"])
def test_loop_accumulators_keep_every_reader_s_value(taken, variant):
    # The first iteration adds into a copy of the Enter's value (a feed's array stays as
    # it was); the later ones into the buffer the iteration before made, unless the body
    # reads the accumulator elsewhere too ("read"); a fetch of the loop's result reads
    # its Exit, after the last iteration.
    acc, s, types, (fed, av), (want_acc, want_s) = _loop_accumulation(variant)
    assert types.count("_MatMulPairAdd") == 1
    assert taken == ([False] * 3 if variant == "read" else [False, True, True])
    np.testing.assert_array_equal(fed, av)  # the caller's array as it was
    np.testing.assert_allclose(acc, want_acc, rtol=1e-4, atol=1e-4 * np.abs(want_acc).max())
    assert s == pytest.approx(want_s, rel=1e-4, abs=1e-3)


@needs_blas
def test_a_donated_accumulator_is_written_in_place(taken):
    # acc made fresh in the step, its one reader the Add: the gemm adds into its buffer.
    av = np.random.default_rng(12).standard_normal((156, 512)).astype(np.float32)
    got, types, g, cv, _wv = _plain_accumulation(av, fresh=True)
    assert types.count("_MatMulPairAdd") == 1 and taken == [True]
    want = av * 2.0 + cv.T.astype(np.float64) @ g
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@needs_blas
def test_a_float64_accumulator(taken):
    acc, s, types, _, (want_acc, want_s) = _loop_accumulation("own", np.float64)
    assert types.count("_MatMulPairAdd") == 1 and taken == [False, True, True]
    np.testing.assert_allclose(acc, want_acc, rtol=1e-12, atol=1e-12 * np.abs(want_acc).max())
    assert s == pytest.approx(want_s, rel=1e-12)


def _plain_accumulation(
    acc_value, transposed: bool = False, rows: int = 128, static=False, fresh=False
):
    """acc + c^T @ tanh(d) beside tanh(d) @ w, no control flow, acc fed with any shape
    (a transposed view of the fed array with `transposed`; its shape known to the graph
    with `static`): (values, op types)."""
    rng = np.random.default_rng(9)
    cv = rng.standard_normal((rows, 156)).astype(np.float32)
    wv = rng.standard_normal((512, 156)).astype(np.float32) * 0.1
    dv = rng.standard_normal((rows, 512)).astype(np.float32)
    with af.Graph().as_default():
        d = af.placeholder(af.float32, [rows, 512])
        a = af.placeholder(af.float32, acc_value.shape if static else None)
        g = af.tanh(d)
        acc = af.transpose(a) if transposed else a
        acc = acc * 2.0 if fresh else acc
        out = acc + af.identity(af.matmul(af.constant(cv), g, transpose_a=True))
        with af.Session() as sess:
            got = sess.run([out, af.matmul(g, af.constant(wv))], {d: dv, a: acc_value})
            return got, _plan_types(sess), np.tanh(dv.astype(np.float64)), cv, wv


@needs_blas
@pytest.mark.parametrize(
    "shape, transposed, rows, gemm",
    [((156, 512), False, 128, True), ((1, 512), False, 128, False),
     ((512, 156), True, 128, True), ((156, 512), False, 8, False),
     ((156, 512), False, 512, False)],  # (K = 512: past one K block, the Add's bits)
)  # fmt: skip
def test_accumulators_off_the_gemm_path_take_the_add(
    monkeypatch, taken, shape, transposed, rows, gemm
):
    # A fed accumulator and a transposed view of one (the gemm into a copy), a
    # broadcast one, a small product (the plain products and the Add's kernel): the
    # unfused graph's values.
    av = np.random.default_rng(10).standard_normal(shape).astype(np.float32)
    got, types, g, cv, wv = _plain_accumulation(av, transposed, rows)
    assert types.count("_MatMulPairAdd") == 1
    assert taken == ([False] if gemm else [])
    acc = av.T if transposed else av
    want = acc + cv.T.astype(np.float64) @ g
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    np.testing.assert_allclose(got[1], g @ wv, rtol=1e-4, atol=1e-4)
    _one_blas_thread(monkeypatch)
    fused, _, _, _, _ = _plain_accumulation(av, transposed, rows)
    _without(monkeypatch, matmul_sum.accumulate_pair_products)
    plain, types, _, _, _ = _plain_accumulation(av, transposed, rows)
    assert "_MatMulPairAdd" not in types
    for a, b in zip(fused, plain):
        np.testing.assert_array_equal(a, b)


@needs_blas
def test_an_accumulator_of_another_shape_fails_as_the_add(monkeypatch):
    av = np.ones((3, 5), np.float32)
    with pytest.raises(errors.InvalidArgumentError) as fused:
        _plain_accumulation(av)
    _without(monkeypatch, matmul_sum.accumulate_pair_products)
    with pytest.raises(errors.InvalidArgumentError) as plain:
        _plain_accumulation(av)
    assert fused.value.message == plain.value.message


@needs_blas
def test_an_accumulator_known_to_broadcast_is_left_to_the_add():
    av = np.random.default_rng(11).standard_normal((1, 512)).astype(np.float32)
    got, types, g, cv, _wv = _plain_accumulation(av, static=True)
    assert "_MatMulPairAdd" not in types and "_MatMulPair" in types
    want = av + cv.T.astype(np.float64) @ g
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
