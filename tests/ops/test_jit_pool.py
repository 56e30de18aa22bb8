"""The numba pool (ops/jit_threads.py): products granted two threads run as blocks on
its threads, each block one gemm call on one BLAS thread (ops/blas.py).  The products
equal one thread's within float32 rounding of their K-term sums (a block may sum in
another order than the whole call).  Where numba's threading layer does not spin the
pool stays off; a forked child never runs it."""

from __future__ import annotations

import os
import threading
import time
import types

import numpy as np
import pytest

from asyncflow.devices import cpu_budget
from asyncflow.ops import blas, fused_updates, jit_threads
from asyncflow.ops import elementwise as ew

pytest.importorskip("numba")


def _pool_or_skip():
    if not blas.available(np.float32) or not cpu_budget.manages_blas():
        pytest.skip("no OpenBLAS whose threads the CPU budget sets")
    blas.warm()
    if blas._JIT.get("blocks") is None or not jit_threads.usable():
        pytest.skip("numba's threading layer does not spin here: the pool stays off")


@pytest.fixture
def pool(monkeypatch):
    """Two cores free: the budget grants products two threads."""
    monkeypatch.setattr(fused_updates, "_DISABLED", False)
    monkeypatch.setattr(cpu_budget, "_budget", 2)
    monkeypatch.setattr(cpu_budget, "_CORES", 2)
    monkeypatch.setattr(cpu_budget, "_deterministic", False)
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 0)
    _pool_or_skip()
    yield
    cpu_budget.restore_blas()


def _one_thread(c, a, b, ta, tb, alpha, beta):
    cpu_budget._blas_threads(1)
    blas._gemm(c, a, b, ta, tb, alpha, beta, split=False)


# (m, k, n): blocks of rows (m >= n) and of columns, odd sizes, the models' shapes
_SHAPES = [(128, 156, 512), (156, 128, 512), (128, 512, 156), (300, 64, 96), (67, 33, 259)]


@pytest.mark.parametrize("m, k, n", _SHAPES)
@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_products_on_the_pool_equal_one_thread(pool, monkeypatch, m, k, n, ta, tb):
    rng = np.random.default_rng(m * k + n)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    ran = []
    real = blas._JIT.get("blocks")
    monkeypatch.setitem(blas._JIT._loops, "blocks", lambda *args: ran.append(1) or real(*args))
    for alpha, beta in ((1.0, 0.0), (-0.5, 1.0)):
        want, got = c0.copy(), c0.copy()
        _one_thread(want, a, b, ta, tb, alpha, beta)
        cpu_budget._blas_threads(2)
        blas._gemm(got, a, b, ta, tb, alpha, beta, split=False)
        assert cpu_budget._lib_now == 1  # (each block on one BLAS thread)
        # Within float32 rounding of K-term sums: OpenBLAS 0.3.31 (numpy 2.4) sums a
        # block's elements in another order than the whole call's (up to ~1.6e-5
        # relative at K=512), where earlier builds gave the same bits.
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(k))
        exact = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
        exact = alpha * exact + beta * c0
        np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    assert len(ran) == 2


def test_pair_on_the_pool(pool):
    # the LSTM's backward pair: the input gradient and the accumulated weight gradient
    rng = np.random.default_rng(1)
    g = rng.standard_normal((128, 512)).astype(np.float32)
    w = rng.standard_normal((156, 512)).astype(np.float32)
    x = rng.standard_normal((128, 156)).astype(np.float32)
    dw0 = rng.standard_normal((156, 512)).astype(np.float32)
    want_dx, want_dw = np.empty((128, 156), np.float32), dw0.copy()
    _one_thread(want_dx, g, w, False, True, 1.0, 0.0)
    _one_thread(want_dw, x, g, True, False, 1.0, 1.0)
    dx, dw = np.full((128, 156), np.nan, np.float32), dw0.copy()
    cpu_budget._blas_threads(2)
    blas.gemm_pair(dx, g, w, False, True, 0.0, dw, x, g, True, False, 1.0)
    assert cpu_budget._lib_now == 1
    np.testing.assert_allclose(dx, want_dx, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(dw, want_dw, rtol=1e-6, atol=1e-5)


def test_a_small_pair_takes_the_pool_only_while_two_cores_are_free(pool, monkeypatch):
    # granted one thread (the budget's small calls) a pair still takes the pool's two
    # threads while the budget has both free, and stays on one beside a busy process
    # and under TF_DETERMINISTIC_OPS=1
    rng = np.random.default_rng(3)
    g = rng.standard_normal((128, 256)).astype(np.float32)
    w = rng.standard_normal((65, 256)).astype(np.float32)
    x = rng.standard_normal((128, 65)).astype(np.float32)
    want_dx, want_dw = np.empty((128, 65), np.float32), np.ones((65, 256), np.float32)
    _one_thread(want_dx, g, w, False, True, 1.0, 0.0)
    _one_thread(want_dw, x, g, True, False, 1.0, 1.0)
    ran = []
    real = blas._JIT.get("pair")
    monkeypatch.setitem(blas._JIT._loops, "pair", lambda *args: ran.append(1) or real(*args))
    cases = ((0, False, [1]), (1, False, [1]), (0, True, [1]))  # (then OpenBLAS's call)
    for competing, deterministic, runs in cases:
        monkeypatch.setattr(cpu_budget, "_sample_competing", lambda c=competing: c)
        monkeypatch.setattr(cpu_budget, "_deterministic", deterministic)
        cpu_budget._blas_threads(1)
        dx, dw = np.full((128, 65), np.nan, np.float32), np.ones((65, 256), np.float32)
        blas.gemm_pair(dx, g, w, False, True, 0.0, dw, x, g, True, False, 1.0)
        assert ran == runs
        assert cpu_budget._lib_now == 1
        np.testing.assert_allclose(dx, want_dx, rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(dw, want_dw, rtol=1e-6, atol=1e-5)


def test_a_sum_of_two_products_runs_as_the_pools_pair(pool, monkeypatch):
    # the GAN's discriminator weight gradient: real^T dh_real + fake^T dh_fake in two
    # runs, one product each; on the pool's pair the same bits as the runs on one thread
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((128, 300)).astype(np.float32) for _ in range(2)]
    gs = [rng.standard_normal((128, 96)).astype(np.float32) for _ in range(2)]
    pairs = [(x, g, True, False) for x, g in zip(xs, gs)]
    addend = rng.standard_normal((300, 96)).astype(np.float32)
    ran = []
    real = blas._JIT.get("pair")
    monkeypatch.setitem(blas._JIT._loops, "pair", lambda *args: ran.append(1) or real(*args))
    cpu_budget._blas_threads(2)
    got = blas.matmul_sum(pairs, [addend], (300, 96), 2)
    assert ran == [1]
    monkeypatch.setattr(cpu_budget, "_budget", 1)  # (no pool: the runs one after another)
    cpu_budget._blas_threads(1)
    want = blas.matmul_sum(pairs, [addend], (300, 96), 2)
    assert ran == [1]
    np.testing.assert_array_equal(got, want)
    exact = sum(x.T.astype(np.float64) @ g for x, g in zip(xs, gs)) + addend
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-4)


def _epilogues_or_skip(sigmoid: bool = True):
    if not blas.warm_epilogues() or blas._EPILOGUES.get("blocks") is None:
        pytest.skip("the epilogues' loops did not compile here")
    if sigmoid and not blas._EPILOGUES.get("sigmoid"):
        pytest.skip("TF's compiled sigmoid did not pass its check here")


def _then(act, c, features):
    """The activation's kernel after the product (the callers' two steps)."""
    if act == "sigmoid":
        return ew.sigmoid(np, c)
    if act == "relu":
        return np.maximum(c, np.float32(0))
    with np.errstate(invalid="ignore"):
        return c * (features > 0)


# (m, k, n): blocks of rows and of columns, odd sides, the GAN generator's output
@pytest.mark.parametrize("m, k, n", [(128, 256, 784), (67, 33, 264), (264, 45, 40)])
@pytest.mark.parametrize("ta, tb", [(False, False), (True, True)])
@pytest.mark.parametrize("act", ["sigmoid", "relu", "relu_grad"])
def test_an_activation_in_the_pools_blocks_equals_the_product_then_its_kernel(
    pool, m, k, n, ta, tb, act
):
    # the product as the pool's blocks make it, then the activation's kernel function
    # (TF's float32 sigmoid, np.maximum, TF's ReluGrad mask), bit for bit; the bias row
    # holds values past the sigmoid's clamps, NaN, inf and -0.0, the features NaN and 0
    _epilogues_or_skip(act == "sigmoid")
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = (rng.standard_normal((n, k) if tb else (k, n)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) * 4
    bias[:4] = [-300.0, 300.0, -104.5, 16.7]
    if act != "sigmoid":
        bias[4:7] = [np.nan, np.inf, -np.inf]
    c0 = np.broadcast_to(bias, (m, n)).copy()
    features = rng.standard_normal((m, n)).astype(np.float32)
    features[:, :3] = [np.nan, 0.0, -0.0]
    product = c0.copy()
    cpu_budget._blas_threads(2)
    blas._gemm(product, a, b, ta, tb, 1.0, 1.0, split=False)
    want = _then(act, product, features)
    got = c0.copy()
    cpu_budget._blas_threads(2)
    assert blas.gemm_epilogue(got, a, b, ta, tb, 1.0, 1.0, act, features)
    assert cpu_budget._lib_now == 1  # (each block on one BLAS thread)
    np.testing.assert_array_equal(got, want)
    assert (np.signbit(got) == np.signbit(want)).all()  # (-0.0 where the kernels give it)
    exact = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    exact = (
        _then(act, exact + bias, features)
        if act != "sigmoid"
        else 1 / (1 + np.exp(-(exact + bias)))
    )
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    if act == "sigmoid":
        assert (got[:, 0] == 0).all() and (got[:, 1] == 1).all()
        flat = product.copy()
        assert blas.sigmoid_in_place(flat)  # (the one-thread loop: the same function)
        np.testing.assert_array_equal(flat, want)


def test_a_sigmoid_in_the_pools_blocks_only_where_every_element_is_in_a_packet(pool, monkeypatch):
    # TF computes the last size % 8 values by Eigen's scalar path, and a product the
    # pool does not take (one thread granted, TF_DETERMINISTIC_OPS=1, float64, too
    # small) is the caller's: False, C untouched
    _epilogues_or_skip()
    a = np.ones((67, 33), np.float32)
    b = np.ones((33, 259), np.float32)
    cases = [
        (np.zeros((67, 259), np.float32), a, b, 2, False),  # 67 * 259 values: odd
        (np.zeros((67, 264), np.float32), a, np.ones((33, 264), np.float32), 1, False),
        (np.zeros((67, 264), np.float32), a, np.ones((33, 264), np.float32), 2, True),
        (np.zeros((67, 264)), a.astype(np.float64), np.ones((33, 264)), 2, False),
        (np.zeros((16, 264), np.float32), a[:16], np.ones((33, 264), np.float32), 2, False),
    ]
    for c, x, y, threads, deterministic in cases:
        monkeypatch.setattr(cpu_budget, "_deterministic", deterministic)
        cpu_budget._blas_threads(threads)
        assert not blas.gemm_sigmoid(c, x, y, False, False, 1.0, 1.0)
        assert not c.any()
    monkeypatch.setattr(cpu_budget, "_deterministic", False)
    c, y = np.zeros((67, 264), np.float32), np.ones((33, 264), np.float32)
    for features in (np.ones((67, 264)), np.ones((264, 67), np.float32).T, None):
        cpu_budget._blas_threads(2)  # (a mask of another dtype or layout: the caller's)
        assert not blas.gemm_epilogue(c, a, y, False, False, 1.0, 0.0, "relu_grad", features)
    monkeypatch.setattr(blas, "_RELU_EPILOGUES", False)  # (the A/B switch)
    cpu_budget._blas_threads(2)
    assert not blas.gemm_epilogue(c, a, y, False, False, 1.0, 0.0, "relu")
    assert not c.any()
    assert not blas.sigmoid_in_place(np.zeros(12, np.float32))  # (not whole packets)
    assert not blas.sigmoid_in_place(np.zeros(16))  # (float64)


def test_products_over_the_pools_size_keep_blas_threads(pool, monkeypatch):
    # (a product or pair the pool does not take runs on the threads the budget granted:
    # OpenBLAS's count is not narrowed to one for it)
    monkeypatch.setattr(blas, "_POOL_MAX_MACS", 1000)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 128)).astype(np.float32)
    b = rng.standard_normal((128, 96)).astype(np.float32)
    c1, c2 = np.empty((64, 96), np.float32), np.empty((64, 96), np.float32)
    cpu_budget._blas_threads(2)
    blas.gemm_pair(c1, a, b, False, False, 0.0, c2, a, b, False, False, 0.0)
    assert cpu_budget._lib_now == 2
    blas._gemm(c1, a, b, False, False, 1.0, 0.0, split=False)
    assert cpu_budget._lib_now == 2
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c1, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(c2, want, rtol=1e-5, atol=1e-4)


def test_the_pools_functions_refuse_other_layouts(pool):
    # (an array of another layout than their one signature raises TypeError before any
    # call, which `_gemm` and `gemm_pair` catch to take OpenBLAS's call instead)
    a = np.ones((64, 48), np.float32)
    c = np.asfortranarray(np.zeros((64, 64), np.float32))
    with pytest.raises(TypeError):
        blas._JIT.get("blocks")(0, 111, 111, 64, 64, 48, 1.0, a, 48, a.T, 64, 0.0, c, 2, True)
    with pytest.raises(TypeError):
        blas._JIT.get("pair")(0, 111, 111, 48, a, a.T, 0.0, c, 111, 111, 48, a, a.T, 0.0, c)
    assert not c.any()


def test_products_from_two_threads_at_once(pool):
    # (two sessions' kernels, or a device worker's beside the driver: GNU OpenMP takes
    # a team per calling thread; each product still gets its own values)
    rng = np.random.default_rng(2)
    a = [rng.standard_normal((128, 156)).astype(np.float32) for _ in range(2)]
    b = [rng.standard_normal((156, 512)).astype(np.float32) for _ in range(2)]
    want = []
    for x, y in zip(a, b):
        c = np.empty((128, 512), np.float32)
        _one_thread(c, x, y, False, False, 1.0, 0.0)
        want.append(c)
    cpu_budget._blas_threads(2)
    errors: list = []

    def work(i):
        try:
            for _ in range(200):
                c = np.empty((128, 512), np.float32)
                blas._gemm(c, a[i], b[i], False, False, 1.0, 0.0, split=False)
                np.testing.assert_allclose(c, want[i], rtol=1e-6, atol=1e-4)
        except BaseException as exc:  # (re-raised below)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads) and not errors


def test_products_keep_blas_threads_when_the_pool_is_off(pool, monkeypatch):
    monkeypatch.setattr(jit_threads, "_ENABLED", False)
    a = np.ones((128, 128), np.float32)
    c = np.empty((128, 128), np.float32)
    cpu_budget._blas_threads(2)
    blas._gemm(c, a, a, False, False, 1.0, 0.0, split=False)
    assert cpu_budget._lib_now == 2
    np.testing.assert_array_equal(c, np.full((128, 128), 128, np.float32))


def test_blas_counts_around_the_pool(monkeypatch):
    # (the budget's bookkeeping, against a stand-in for OpenBLAS's process-wide count)
    counts = [4]

    def set_local(n):
        previous, counts[0] = counts[0], n
        return previous

    monkeypatch.setattr(cpu_budget, "_set_blas_local", set_local)
    monkeypatch.setattr(cpu_budget, "_blas_now", 0)
    monkeypatch.setattr(cpu_budget, "_lib_now", 0)
    monkeypatch.setattr(cpu_budget, "_active", 0)
    cpu_budget._blas_threads(2)
    assert (counts[0], cpu_budget._blas_now) == (2, 2)
    assert cpu_budget.pool_threads() == 2 and counts[0] == 1  # blocks: one BLAS thread
    cpu_budget._blas_threads(2)  # a call not on the pool gets its two threads back
    assert counts[0] == 2
    cpu_budget.pool_threads()
    cpu_budget.unpool()  # (a product the pool did not make after all)
    assert (counts[0], cpu_budget.granted()) == (2, 2)
    cpu_budget.pool_threads()
    cpu_budget.blas_single()
    assert (counts[0], cpu_budget._blas_now) == (1, 1)
    cpu_budget.restore_blas()  # the program's own count at the step's end
    assert (counts[0], cpu_budget._blas_now, cpu_budget._lib_now) == (4, 0, 0)


@pytest.mark.parametrize(
    "layer, env, spins",
    [
        ("omp", {}, True),
        ("tbb", {}, False),  # (not measured: off)
        ("workqueue", {}, False),
        ("omp", {"OMP_WAIT_POLICY": "PASSIVE"}, False),
        ("omp", {"GOMP_SPINCOUNT": "0"}, False),
    ],
)
def test_the_pool_runs_only_where_numbas_threads_spin(monkeypatch, layer, env, spins):
    monkeypatch.setattr(jit_threads, "_spins", [])
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    fake = types.SimpleNamespace(threading_layer=lambda: layer)
    assert jit_threads.note_layer(fake) is spins
    monkeypatch.setattr(cpu_budget, "_budget", 2)
    monkeypatch.setattr(cpu_budget, "_CORES", 2)
    assert jit_threads.usable() is (spins and jit_threads._ENABLED)
    monkeypatch.setattr(cpu_budget, "_budget", 1)  # intra_op_parallelism_threads=1
    assert not jit_threads.usable()


def test_a_forked_child_runs_no_parallel_region(pool):
    # GNU OpenMP's team does not survive a fork: a parallel region in the child would
    # wait for threads it lacks.  The child runs serial loops and one-thread products.
    a = np.ones((128, 256), np.float32)
    b = np.ones((256, 128), np.float32)
    c = np.empty((128, 128), np.float32)
    cpu_budget._blas_threads(2)
    blas._gemm(c, a, b, False, False, 1.0, 0.0, split=False)  # (the pool's team started)
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            if not jit_threads.usable():
                cpu_budget._blas_threads(2)
                blas._gemm(c, a, b, False, False, 1.0, 0.0, split=False)
                code = 0 if c[0, 0] == 256 else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0


# -- how long GNU OpenMP's threads spin: a time, counted in rounds timed here -----------


@pytest.mark.skipif(
    __import__("platform").machine().lower() not in ("x86_64", "amd64"),
    reason="libgomp's round is a `pause` on x86-64 only",
)
def test_a_round_of_gnu_openmps_wait_loop_is_timed_on_this_cpu():
    from asyncflow.ops import jit_spin

    start = time.perf_counter()
    per_round = jit_spin.seconds_per_round(rounds=20_000, tries=3)
    took = time.perf_counter() - start
    # A load and a pause: a few cycles at least, far under a microsecond; the three
    # tries' best is at most the whole call's time over their rounds.
    assert 1e-10 < per_round < 1e-6
    assert per_round * 60_000 <= took


@pytest.mark.parametrize(
    ("per_round", "count"),
    [
        (10.8e-9, 92_593),  # the 2-vCPU Xeon (Rocket Lake): ~1 ms of rounds
        (55e-9, 18_182),  # Skylake's server cores' ~140-cycle pause
        (1e-6, 5_000),  # (a timing gone wrong: the bounds)
        (1e-12, 300_000),
        (0.0, 20_000),
    ],
)
def test_the_spin_count_is_about_a_millisecond_of_rounds(monkeypatch, per_round, count):
    from asyncflow.ops import jit_spin

    monkeypatch.setattr(jit_threads, "_spin_memo", [])
    monkeypatch.setattr(jit_threads.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(jit_spin, "seconds_per_round", lambda: per_round)
    assert jit_threads._spin_count() == count
    monkeypatch.setattr(jit_spin, "seconds_per_round", lambda: 1 / 0)
    assert jit_threads._spin_count() == count  # (timed once a process)


def test_the_spin_count_falls_back_where_it_cannot_be_timed(monkeypatch):
    from asyncflow.ops import jit_spin

    monkeypatch.setattr(jit_threads, "_spin_memo", [])
    monkeypatch.setattr(jit_spin, "seconds_per_round", lambda: 1e-8)
    monkeypatch.setattr(jit_threads.platform, "machine", lambda: "aarch64")
    assert jit_threads._spin_count() == jit_threads._SPIN_FALLBACK
    monkeypatch.setattr(jit_threads.platform, "machine", lambda: "x86_64")
    monkeypatch.delitem(__import__("sys").modules, "numba")  # (oneDNN loading first)
    assert jit_threads._spin_count() == jit_threads._SPIN_FALLBACK
    assert jit_threads._spin_memo == []  # (timed later, once numba is loaded)

    def broken():
        raise RuntimeError("no compiler")

    monkeypatch.undo()
    monkeypatch.setattr(jit_threads, "_spin_memo", [])
    monkeypatch.setattr(jit_threads.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(jit_spin, "seconds_per_round", broken)
    assert jit_threads._spin_count() == jit_threads._SPIN_FALLBACK


def test_gnu_openmp_finds_the_spin_count_unless_the_program_set_one(monkeypatch):
    monkeypatch.setattr(jit_threads, "_spin_memo", [61_234])
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(name, raising=False)
    with jit_threads.launching():
        assert os.environ["GOMP_SPINCOUNT"] == "61234"
    assert "GOMP_SPINCOUNT" not in os.environ
    monkeypatch.setenv("GOMP_SPINCOUNT", "7")
    with jit_threads.launching():
        assert os.environ["GOMP_SPINCOUNT"] == "7"
    monkeypatch.delenv("GOMP_SPINCOUNT")
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    with jit_threads.launching():
        assert "GOMP_SPINCOUNT" not in os.environ
    assert os.environ["OMP_WAIT_POLICY"] == "passive"


@pytest.mark.parametrize(
    ("m", "n", "parts", "rows"),
    [
        (256, 128, 2, True),  # no wider than tall
        (128, 128, 2, True),
        (128, 256, 2, True),  # wider, blocks of 64 rows
        (128, 784, 2, True),
        (64, 256, 2, False),  # blocks of 32 rows: columns
        (32, 784, 2, False),
        (128, 256, 4, False),
    ],
)
def test_row_blocks_where_each_has_64_rows(m, n, parts, rows):
    assert blas._by_rows(m, n, parts) is rows


def test_a_wide_product_in_row_blocks_equals_one_calls(pool):
    # [128,784]x[784,256]: C wider than tall, split into two blocks of 64 rows; each
    # block one gemm call on one thread, within rounding of a whole product's sums.
    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 784)).astype(np.float32)
    b = rng.standard_normal((784, 256)).astype(np.float32)
    assert blas._by_rows(128, 256, 2)
    cpu_budget._blas_threads(2)
    c = np.empty((128, 256), np.float32)
    blas._gemm(c, a, b, False, False, 1.0, 0.0)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * np.sqrt(784))
