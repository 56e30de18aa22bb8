"""The compiled dense optimizer updates (ops/fused_updates.py) against training_ops' NumPy
update functions, which follow TF's CPU functors operation for operation: the same bits
in float32 and float64, nan, inf, signed zeros and subnormals included, in one call and
in blocks shared among threads; the cases they leave to NumPy; and a whole optimizer
step through a session with and without them."""

from __future__ import annotations

import concurrent.futures
import threading

import numpy as np
import pytest

import asyncflow as af
from asyncflow.devices import cpu_budget
from asyncflow.ops import fused_updates, training_ops

pytest.importorskip("numba")


@pytest.fixture(autouse=True, scope="module")
def _compiled_loops():
    assert fused_updates.warm()  # compiled in the background otherwise: NumPy runs first


@pytest.fixture(autouse=True)
def _small_variables_compiled_too(monkeypatch):
    # The tests below compare the compiled loops with NumPy on small arrays too, which
    # `apply` otherwise leaves to NumPy (test_small_variables_are_left_to_numpy).
    monkeypatch.setattr(fused_updates, "_NUMPY_BELOW", {})


_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-310, 3.0e38, -1.0, 1.0]


def _array(rng, n, dtype, positive=False):
    x = rng.standard_normal(n)
    k = min(n, len(_SPECIAL))
    x[:k] = _SPECIAL[:k]  # (float64's subnormal is 0 in float32: still an edge value)
    x[k : 2 * k] *= 1e-3
    rng.shuffle(x)
    x = x.astype(dtype)
    return np.abs(x) if positive else x


def _case(name, dtype, n, rng):
    """(update function, attrs, targets, values) as training_ops' kernel passes them."""

    def s(v):
        return np.array(v, dtype)

    var, grad = _array(rng, n, dtype), _array(rng, n, dtype)
    if name == "sgd":
        return training_ops._gradient_descent, {}, [var], [s(0.01), grad]
    if name == "sgd_scratch":
        return training_ops._gradient_descent_scratch, {}, [var], [s(0.01), grad]
    if name == "momentum":
        attrs = {"use_nesterov": False}
        return training_ops._momentum, attrs, [var, _array(rng, n, dtype)], [s(0.01), grad, s(0.9)]
    if name == "rmsprop":
        slots = [_array(rng, n, dtype, positive=True), _array(rng, n, dtype)]
        values = [s(0.01), s(0.9), s(0.5), s(1e-7), grad]
        return training_ops._rms_prop, {}, [var, *slots], values
    slots = [_array(rng, n, dtype), _array(rng, n, dtype, positive=True)]
    values = [s(0.9**3), s(0.999**3), s(0.001), s(0.9), s(0.999), s(1e-8), grad]
    return training_ops._adam, {"use_nesterov": False}, [var, *slots], values


def _same_bits(w, g):
    """Bitwise equal, signed zeros included; a nan matches a nan (IEEE leaves the sign and
    payload of an operation's nan open: which operand's nan a sum keeps varies)."""
    assert w.dtype == g.dtype and w.shape == g.shape
    nan = np.isnan(w)
    np.testing.assert_array_equal(nan, np.isnan(g))
    ints = f"i{w.itemsize}"
    np.testing.assert_array_equal(w[~nan].view(ints), g[~nan].view(ints))


NAMES = ["sgd", "sgd_scratch", "momentum", "rmsprop", "adam"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_compiled_update_is_bitwise_the_numpy_update(name, dtype):
    rng = np.random.default_rng(3)
    for n in (1, 37, 5000):
        fn, attrs, targets, values = _case(name, dtype, n, rng)
        want = [t.copy() for t in targets]
        got = [t.copy() for t in targets]
        for _ in range(3):
            # the NumPy function may overwrite a donated gradient: give each its own
            vals = [v.copy() for v in values]
            with np.errstate(all="ignore"):
                fn(np, attrs, *want, *vals)
            assert fused_updates.apply(fn, attrs, got, [v.copy() for v in values])
        for w, g in zip(want, got):
            _same_bits(w, g)


@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_blocks_shared_among_threads_give_the_same_bits(name, monkeypatch):
    rng = np.random.default_rng(5)
    fn, attrs, targets, values = _case(name, np.float32, 300_007, rng)
    want = [t.copy() for t in targets]
    with np.errstate(all="ignore"):
        fn(np, attrs, *want, *values)
    monkeypatch.setattr(fused_updates, "_SPLIT_MIN", 2 * fused_updates._BLOCK)  # (split)
    for threads in (1, 2, 3):
        monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None, n=threads: n)
        got = [t.copy() for t in targets]
        assert fused_updates.apply(fn, attrs, got, values)
        for w, g in zip(want, got):
            _same_bits(w, g)


def _pool_or_skip():
    from asyncflow.ops import jit_threads

    if not fused_updates._pooled or not jit_threads.usable():
        pytest.skip("numba's threading layer does not spin here: the pool stays off")


def _spy_pool(monkeypatch):
    ran = []
    for name, real in list(fused_updates._pooled.items()):

        def spy(*args, real=real, name=name):
            ran.append((name, args[-1]))
            return real(*args)

        monkeypatch.setitem(fused_updates._pooled, name, spy)
    return ran


@pytest.mark.parametrize("name", NAMES)
def test_updates_on_the_pool_give_the_same_bits(name, monkeypatch):
    _pool_or_skip()
    ran = _spy_pool(monkeypatch)
    rng = np.random.default_rng(8)
    fn, attrs, targets, values = _case(name, np.float32, fused_updates._POOL_MIN + 7, rng)
    want = [t.copy() for t in targets]
    with np.errstate(all="ignore"):
        fn(np, attrs, *want, *[v.copy() for v in values])
    for parts in (2, 3):  # (3 parts on numba's threads, however many it has)
        monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None, n=parts: n)
        got = [t.copy() for t in targets]
        assert fused_updates.apply(fn, attrs, got, [v.copy() for v in values])
        for w, g in zip(want, got):
            _same_bits(w, g)
    assert [parts for _, parts in ran] == [2, 3]


def test_updates_take_the_pool_only_large_float32_and_with_two_cores_free(monkeypatch):
    _pool_or_skip()
    ran = _spy_pool(monkeypatch)
    rng = np.random.default_rng(9)
    big = fused_updates._POOL_MIN
    cases = [  # (threads free, dtype, elements, whether the pool runs it)
        (2, np.float32, big, True),
        (1, np.float32, big, False),  # (another process on the second core, or ours)
        (2, np.float32, big - 1, False),
        (2, np.float64, big, False),
    ]
    for threads, dtype, n, pooled in cases:
        monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None, k=threads: k)
        fn, attrs, targets, values = _case("adam", dtype, n, rng)
        want = [t.copy() for t in targets]
        with np.errstate(all="ignore"):
            fn(np, attrs, *want, *[v.copy() for v in values])
        ran.clear()
        assert fused_updates.apply(fn, attrs, targets, values)
        assert bool(ran) == pooled
        for w, g in zip(want, targets):
            _same_bits(w, g)


def test_updates_on_the_pool_from_two_threads_at_once(monkeypatch):
    # (two sessions' optimizers at once: GNU OpenMP takes a team per calling thread;
    # each update still ends with its own bits, and none waits for the other)
    _pool_or_skip()
    monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None: 2)
    rng = np.random.default_rng(10)
    cases = [_case(name, np.float32, 100_003, rng) for name in ("adam", "rmsprop")]
    wants = []
    for fn, attrs, targets, values in cases:
        want = [t.copy() for t in targets]
        with np.errstate(all="ignore"):
            for _ in range(50):
                fn(np, attrs, *want, *[v.copy() for v in values])
        wants.append(want)

    def work(i):
        fn, attrs, targets, values = cases[i]
        got = [t.copy() for t in targets]
        for _ in range(50):
            assert fused_updates.apply(fn, attrs, got, [v.copy() for v in values])
        return got

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(work, i) for i in range(2)]
        for want, future in zip(wants, futures):
            for w, g in zip(want, future.result(timeout=60)):
                _same_bits(w, g)


def test_a_pool_form_that_fails_to_compile_leaves_the_loop(monkeypatch):
    # (numba without a parallel threading layer: the serial loop is published all
    # the same, and no pool form)
    def fail(numba, name, fn):
        raise RuntimeError("no threading layer")

    monkeypatch.setattr(fused_updates, "_compile_pool", fail)
    monkeypatch.setattr(fused_updates, "_compiled", {})
    monkeypatch.setattr(fused_updates, "_pooled", {})
    fused_updates._compile_loop("_adam_loop")
    assert "_adam_loop" in fused_updates._compiled and not fused_updates._pooled
    rng = np.random.default_rng(11)
    fn, attrs, targets, values = _case("adam", np.float32, fused_updates._POOL_MIN, rng)
    want = [t.copy() for t in targets]
    with np.errstate(all="ignore"):
        fn(np, attrs, *want, *[v.copy() for v in values])
    assert fused_updates.apply(fn, attrs, targets, values)
    for w, g in zip(want, targets):
        _same_bits(w, g)


@pytest.mark.parametrize("n, split", [(300_007, False), (fused_updates._SPLIT_MIN, True)])
def test_updates_split_over_threads_only_from_split_min(n, split, monkeypatch):
    monkeypatch.setattr(fused_updates, "_POOL", False)  # (the budget's helpers' path)
    calls = []
    real = cpu_budget.parallel_for

    def spy(count, fn, **kw):
        calls.append(count)
        real(count, fn, **kw)

    monkeypatch.setattr(cpu_budget, "parallel_for", spy)
    rng = np.random.default_rng(6)
    fn, attrs, targets, values = _case("rmsprop", np.float32, n, rng)
    want = [t.copy() for t in targets]
    with np.errstate(all="ignore"):
        fn(np, attrs, *want, *[v.copy() for v in values])
    assert fused_updates.apply(fn, attrs, targets, values)
    assert calls == ([n] if split else [])
    for w, g in zip(want, targets):
        _same_bits(w, g)


def test_cases_left_to_numpy():
    rng = np.random.default_rng(9)
    fn, attrs, targets, values = _case("adam", np.float16, 64, rng)
    assert not fused_updates.apply(fn, attrs, targets, values)  # half: NumPy's roundings
    fn, attrs, targets, values = _case("adam", np.float32, 64, rng)
    assert not fused_updates.apply(fn, {"use_nesterov": True}, targets, values)
    var = targets[0]
    before = [t.copy() for t in targets]
    aliased = [*values[:-1], var]  # the gradient is var's own buffer
    assert not fused_updates.apply(fn, attrs, targets, aliased)
    assert not fused_updates.apply(fn, attrs, [var, var, targets[2]], values)
    view = var.reshape(var.shape)  # a view of var's buffer (not its own memory): overlaps
    assert not fused_updates.apply(fn, attrs, targets, [*values[:-1], view])
    halves = [t[:32] for t in targets]  # views that do not overlap: checked, then taken
    assert fused_updates.apply(fn, attrs, halves, [*values[:-1], var[32:].copy()])
    fn, attrs, targets, values = _case("rmsprop", np.float32, 64, rng)
    assert not fused_updates.apply(training_ops._adagrad, {"update_slots": True}, targets, values)
    for b, t in zip(before, targets):  # nothing was written by a refused call
        assert b.shape == t.shape


@pytest.mark.parametrize("name", ["momentum", "rmsprop", "adam"])
def test_optimizer_step_same_with_and_without_the_compiled_loops(name, monkeypatch):
    rng = np.random.default_rng(11)
    var0 = rng.standard_normal((300, 500)).astype(np.float32)
    grads = [rng.standard_normal((300, 500)).astype(np.float32) for _ in range(3)]
    make = {
        "momentum": lambda: af.train.MomentumOptimizer(0.01, 0.9),
        "rmsprop": lambda: af.train.RMSPropOptimizer(0.01, momentum=0.5),
        "adam": lambda: af.train.AdamOptimizer(0.01),
    }[name]
    results = []
    for disabled in (True, False):
        monkeypatch.setattr(fused_updates, "_DISABLED", disabled)
        with af.Graph().as_default():
            var = af.Variable(var0)
            g = af.placeholder(af.float32, var0.shape)
            train = make().apply_gradients([(g, var)])
            with af.Session() as sess:
                sess.run(af.global_variables_initializer())
                for x in grads:
                    sess.run(train, {g: x})
                results.append(sess.run(var))
    np.testing.assert_array_equal(results[0], results[1])
    assert not np.array_equal(results[1], var0)


def test_a_loop_not_compiled_yet_leaves_the_update_to_numpy_without_waiting(monkeypatch):
    """The first update that wants a loop starts its compile on a thread and runs
    NumPy's update now (a kernel may run on the event loop: it never waits ~2 s for
    numba); once compiled, the loop runs."""
    import threading

    release = threading.Event()
    real = fused_updates._compile

    def slow_compile(name, done):
        release.wait(30)
        real(name, done)

    monkeypatch.setattr(fused_updates, "_compile", slow_compile)
    monkeypatch.setattr(fused_updates, "_compiled", {})
    monkeypatch.setattr(fused_updates, "_started", {})
    rng = np.random.default_rng(3)
    fn, attrs, targets, values = _case("adam", np.float32, 64, rng)
    assert not fused_updates.apply(fn, attrs, targets, values)  # NumPy's turn, at once
    assert "_adam_loop" in fused_updates._started
    release.set()
    assert fused_updates._started["_adam_loop"].wait(60)
    assert fused_updates.apply(fn, attrs, targets, values)  # the compiled loop now


@pytest.mark.parametrize("name", NAMES)
def test_small_variables_are_left_to_numpy(name, monkeypatch):
    """Below `_NUMPY_BELOW` NumPy's calls cost less than the compiled loop's: `apply`
    declines (nothing written) and the kernel's update gives the same bits either way."""
    monkeypatch.undo()  # the thresholds as shipped
    fn = _case(name, np.float32, 1, np.random.default_rng(0))[0]
    limit = fused_updates._NUMPY_BELOW[fn.__name__]
    assert 0 < limit <= 1 << 16
    rng = np.random.default_rng(13)
    for n in (1, 512, limit - 1, limit):
        fn, attrs, targets, values = _case(name, np.float32, n, rng)
        before = [t.copy() for t in targets]
        done = fused_updates.apply(fn, attrs, targets, [v.copy() for v in values])
        assert done == (n >= limit)
        if not done:
            for b, t in zip(before, targets):
                _same_bits(b, t)
        want = [b.copy() for b in before]
        with np.errstate(all="ignore"):
            fn(np, attrs, *want, *[v.copy() for v in values])
        got = [b.copy() for b in before]
        training_ops._dense_update(fn, attrs, got, [v.copy() for v in values])
        for w, g in zip(want, got):
            _same_bits(w, g)


def test_numba_is_imported_by_one_thread_while_others_wait(monkeypatch):
    # The compile threads start together (one per loop, and fused_elementwise_jit's):
    # an import of numba running on several of them at once handed a half-initialised
    # module to some ("module 'numba' has no attribute 'njit'"), and their loops stayed
    # NumPy's for the process.  One thread imports; the others wait for its result.
    import builtins
    import threading

    real_import = builtins.__import__
    release, calls = threading.Event(), []

    def slow_import(name, *args, **kwargs):
        if name == "numba":
            calls.append(threading.get_ident())
            assert release.wait(20)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(fused_updates, "_numba", None)
    monkeypatch.setattr(builtins, "__import__", slow_import)
    got = []
    threads = [
        threading.Thread(target=lambda: got.append(fused_updates.numba_module())) for _ in range(3)
    ]
    for t in threads:
        t.start()
    release.set()
    for t in threads:
        t.join(20)
    assert len(calls) == 1
    assert len(got) == 3 and all(hasattr(m, "njit") for m in got)


def test_a_compile_under_way_when_the_switch_turns_off_still_compiles(monkeypatch):
    """A loop's compile started (by an earlier step) and the loops then switched off, by
    a test's monkeypatch or a program's A/B run, before the compile thread imported
    numba: the compile still ends with the loop compiled.  (It read the switch and
    compiled nothing; the loop then stayed on NumPy's path, and `warm()` False, for the
    rest of the process: CI's failure of stop 59.)"""
    monkeypatch.setattr(fused_updates, "_started", {})
    monkeypatch.setattr(fused_updates, "_compiled", {})
    monkeypatch.setattr(fused_updates, "_compile_pool", lambda *args: None)
    monkeypatch.setattr(fused_updates, "_DISABLED", True)
    done = fused_updates._started["_momentum_loop"] = threading.Event()
    fused_updates._compile("_momentum_loop", done)  # (the compile thread's body, here)
    assert done.is_set() and "_momentum_loop" in fused_updates._compiled
    monkeypatch.setattr(fused_updates, "_DISABLED", False)
    assert fused_updates._loop("_momentum_loop") is fused_updates._compiled["_momentum_loop"]
