"""Fused element-wise programs of arithmetic only as one compiled loop, and programs
with transcendental functions as compiled stages around NumPy's calls
(ops/fused_elementwise_jit.py): the same bits as the ufunc program (the fusion pass on,
numba off), nan, inf and signed zeros included, for every op it compiles, an LSTM cell's
forward pass and gradient; and the programs it leaves to NumPy."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from jit_recording import record_compiled

import asyncflow as af
from asyncflow.devices import cpu_budget
from asyncflow.ops import fused_elementwise_jit, fused_updates

pytest.importorskip("numba")

SHAPE = (64, 96)  # 6,144 elements: past the compiling threshold
_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1.0, -1.0, 0.5]


def _data(rng, dtype, positive=False):
    x = rng.standard_normal(SHAPE)
    flat = x.reshape(-1)
    flat[: len(_SPECIAL)] = _SPECIAL
    rng.shuffle(flat)
    x = x.astype(dtype)
    return np.abs(x) if positive else x


def _run_both(build, feeds_np, monkeypatch):
    """The fetches of `build(*placeholders)` with the compiled loops off, then on (a first
    run starts the compiles, NumPy's programs run meanwhile; the second, after `wait`,
    runs the loops); and how many programs ran compiled in that second run."""
    compiled = record_compiled(monkeypatch)
    # Products on one BLAS thread: OpenBLAS's threads do not always give one thread's
    # bits, and the CPU budget picks their count by measured time (ops/blas.py), so
    # the graphs' matmuls could differ in the last bits between the sessions compared.
    monkeypatch.setattr(cpu_budget, "_deterministic", True)
    results = []
    for disabled in (True, False):
        monkeypatch.setattr(fused_updates, "_DISABLED", disabled)
        with af.Graph().as_default(), af.device("/cpu:0"):  # (host arrays: NumPy's)
            phs = [af.placeholder(x.dtype, x.shape) for x in feeds_np]
            fetches = build(*phs)
            with af.Session() as sess:
                feed = dict(zip(phs, feeds_np))
                first = sess.run(fetches, feed)
                if not disabled:
                    assert fused_elementwise_jit.wait(timeout=50)
                    _same_bits(first, results[0])  # (NumPy's programs: the same bits)
                    compiled.clear()
                results.append(sess.run(fetches, feed))
    # One signature a loop: read-only inputs (constants, feeds) took no second compile
    # on the step's thread (a loop of its own, compiled in the background).
    assert all(len(f.signatures) == 1 for f in fused_elementwise_jit._loops.values() if f)
    return results, sum(compiled)


def _new_sources(before: set) -> list:
    """The sources of the compiled loops made since `before` (a set of the loop keys)."""
    loops = fused_elementwise_jit._loops
    return [key[0] for key in set(loops) - before if loops[key]]


def _same_bits(a, b):
    """Bitwise equal, signed zeros included; a nan matches a nan (IEEE leaves the sign and
    payload of an operation's nan open: which operand's nan a sum keeps varies)."""
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        nan = np.isnan(x)
        np.testing.assert_array_equal(nan, np.isnan(y))
        ints = f"i{x.itemsize}"
        np.testing.assert_array_equal(x[~nan].view(ints), y[~nan].view(ints))


UNARY = {
    "Neg": af.negative,
    "Abs": af.abs,
    "Sqrt": af.sqrt,
    "Reciprocal": af.reciprocal,
    "Rsqrt": af.rsqrt,
    "Square": af.square,
}
BINARY = {
    "Add": af.add,
    "Sub": af.subtract,
    "Mul": af.multiply,
    "RealDiv": af.realdiv,
    "SquaredDifference": af.squared_difference,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_op_compiles_to_the_same_bits(dtype, monkeypatch):
    rng = np.random.default_rng(1)
    x, y, dy = _data(rng, dtype), _data(rng, dtype), _data(rng, dtype)
    pos = _data(rng, dtype, positive=True)

    def build(x, y, dy, pos):
        # (Reshape, not element-wise, keeps the parts below in clusters of their own)
        a = af.reshape(x + pos, SHAPE)
        outs = [fn(af.multiply(a, y)) for fn in UNARY.values()]
        outs += [fn(af.add(a, dy), y) for fn in BINARY.values()]
        outs.append(af.add_n([a * y, dy, a, y * dy]))
        # SigmoidGrad, TanhGrad and ReluGrad as gradients make them, apart from the
        # forward cluster (whose Sigmoid and Tanh stay NumPy's)
        z = x * y
        forward = [af.sigmoid(z), af.tanh(z), af.nn.relu(z)]
        g = af.reshape(af.add_n(forward), SHAPE) * dy
        outs += af.gradients(forward, [z], [g, g, g])
        return outs

    (want, got), compiled = _run_both(build, [x, y, dy, pos], monkeypatch)
    assert compiled  # the arithmetic programs were compiled
    _same_bits(want, got)


def test_lstm_cell_gradient_same_bits_and_compiled(monkeypatch):
    rng = np.random.default_rng(2)
    batch, units = 64, 96
    x = rng.standard_normal((batch, 32)).astype(np.float32)
    h = rng.standard_normal((batch, units)).astype(np.float32)
    c = rng.standard_normal((batch, units)).astype(np.float32)

    w_np = rng.standard_normal((32 + units, 4 * units)).astype(np.float32) * 0.1
    w2_np = rng.standard_normal((units, 10)).astype(np.float32)

    def build(x, h, c):
        gates = af.matmul(af.concat([x, h], 1), af.constant(w_np))
        i, j, f, o = af.split(gates, 4, 1)
        new_c = c * af.sigmoid(f + 1.0) + af.sigmoid(i) * af.tanh(j)
        new_h = af.tanh(new_c) * af.sigmoid(o)
        # a loss through a product, as a next layer's: the backward cluster apart
        logits = af.matmul(new_h, af.constant(w2_np))
        loss = af.reduce_sum(logits * logits) + af.reduce_sum(new_c)
        return af.gradients(loss, [x, h, c])

    (want, got), compiled = _run_both(build, [x, h, c], monkeypatch)
    assert compiled
    _same_bits(want, got)


def test_programs_with_transcendental_functions_compile_in_stages_to_the_same_bits(
    monkeypatch,
):
    # An LSTM cell's forward cluster (Sigmoid, Tanh, products and sums), and chains of
    # Exp, Log, Log1p and Tanh between arithmetic: compiled stages around NumPy's calls.
    rng = np.random.default_rng(4)
    units = SHAPE[1] // 4
    gates = np.concatenate([_data(rng, np.float32) for _ in range(4)], 1)[:, : 4 * units]
    c = _data(rng, np.float32)[:, :units]
    x, y = _data(rng, np.float64), _data(rng, np.float64)

    def build(gates, c, x, y):
        eye = af.constant(np.eye(4 * units, dtype=np.float32))
        i, j, f, o = af.split(af.matmul(gates, eye), 4, 1)  # (strided views, as an LSTM's)
        new_c = c * af.sigmoid(f + 1.0) + af.sigmoid(i) * af.tanh(j)
        h = af.tanh(new_c) * af.sigmoid(o)
        z = af.reshape(x * y, SHAPE)  # (its own cluster)
        chain = af.log1p(af.exp(z - 1.0) * y) + af.log(af.abs(z) + 0.5) * af.tanh(z * x)
        chain = chain * (af.tanh(z) + 2.0)  # (a literal read after a NumPy call)
        both = [af.sigmoid(z), af.sigmoid(z) * z]  # (one value, two outputs)
        passed = af.identity(z)  # (an output that is the program's input: a copy)
        return [new_c, h, chain, *both, passed, af.exp(passed) * 2.0]

    (want, got), compiled = _run_both(build, [gates, c, x, y], monkeypatch)
    assert compiled >= 2
    _same_bits(want, got)


def test_programs_left_to_numpy(monkeypatch):
    rng = np.random.default_rng(3)
    x = _data(rng, np.float32)
    b = rng.standard_normal(SHAPE[1:]).astype(np.float32)
    half = _data(rng, np.float16)
    small = rng.standard_normal((8, 8)).astype(np.float32)
    y = _data(rng, np.float64)

    def build(x, b, half, small, y):
        return [
            af.sin(x * 2.0) * x,  # a function the stages do not split
            (x * 2.0) + b,  # broadcasting
            half * half + half,  # float16
            small * small + small,  # below the threshold
            af.tanh(y) * y,  # float64 staged, as many passes as NumPy's program: not staged
        ]

    (want, got), compiled = _run_both(build, [x, b, half, small, y], monkeypatch)
    assert not compiled
    _same_bits(want, got)


def test_inline_exp_gives_the_kernels_bits():
    # fused_elementwise_exp's float32 exp against the Exp kernel's (TF's function as
    # NumPy passes, ops/elementwise._exp32), bit for bit: the check's own inputs and 2M
    # more bit patterns (NaN for NaN), whole packets of 8 (TF's scalar path aside).
    from asyncflow.ops import elementwise
    from asyncflow.ops import fused_elementwise_exp as fexp

    if not elementwise.tf_exp():
        pytest.skip("float32 Exp is NumPy's here")
    assert fexp.check()
    numba = fused_updates.numba_module()
    exp32 = fexp.namespace()["_exp32"]

    @numba.njit(error_model="numpy")
    def loop(x, out):
        for i in range(x.size):
            out[i] = exp32(x[i])

    rng = np.random.default_rng(5)
    bits = rng.integers(0, 1 << 32, 1 << 21, dtype=np.uint64).astype(np.uint32)
    near = rng.uniform(-110, 95, 1 << 16).astype(np.float32)  # (both ends of the range)
    for xs in (fexp._inputs(), bits.view(np.float32), near):
        got = np.empty_like(xs)
        loop(xs, got)
        with np.errstate(all="ignore"):
            _same_bits([elementwise.exp(np, xs)], [got])


def test_sigmoid_inside_the_loops_and_without(monkeypatch):
    # An LSTM cell's forward pass and a program of Sigmoids and arithmetic only: their
    # Sigmoids (TF's function) inside the compiled loops (a passing check), or the
    # kernel's NumPy function between stages (a failing one): the ufunc program's bits
    # either way; and values of a size that is no multiple of 8 (TF's scalar path for
    # the last ones) keep the kernel's function, called between stages.
    from asyncflow.ops import fused_elementwise_sigmoid as fsig

    if not fsig.check():
        pytest.skip("the compiled sigmoid does not give the kernel's bits here")
    rng = np.random.default_rng(6)
    units = SHAPE[1]  # (6,144 elements a gate: past the compiling threshold)
    gates = np.concatenate([_data(rng, np.float32) for _ in range(4)], 1)
    c = _data(rng, np.float32)
    x = _data(rng, np.float32) * 40.0  # (past exp's overflow and underflow bounds)

    def build(gates, c, x):
        eye = af.constant(np.eye(4 * units, dtype=np.float32))
        i, j, f, o = af.split(af.matmul(gates, eye), 4, 1)
        new_c = c * af.sigmoid(f + 1.0) + af.sigmoid(i) * af.tanh(j)
        return [new_c, af.tanh(new_c) * af.sigmoid(o), af.sigmoid(x * 2.0) * x + af.sigmoid(-x)]

    for ok in (True, False):
        monkeypatch.setitem(fsig._state, "ok", ok)
        (want, got), compiled = _run_both(build, [gates, c, x], monkeypatch)
        assert compiled >= 2
        _same_bits(want, got)
    assert any("_sigmoid32" in source for source, *_ in fused_elementwise_jit._loops)

    odd = (rng.standard_normal((67, 67)) * 10).astype(np.float32)  # (4,489 elements)
    (want, got), compiled = _run_both(
        lambda v: [af.sigmoid(v * 2.0) * v + af.sigmoid(-v)], [odd], monkeypatch
    )
    _same_bits(want, got)
    assert compiled == 1  # (staged: the arithmetic in loops, the Sigmoids called)


def test_inline_log1p_and_log_give_the_kernels_bits():
    # fused_elementwise_log1p's and _log's float32 functions against the Log1p and Log
    # kernels' (TF's as NumPy passes, ops/elementwise), bit for bit: the checks' own
    # inputs, 2M more bit patterns and the values a sigmoid cross-entropy takes, whole
    # packets of 8 (TF's scalar path aside), under the kernels' denormal modes.  Log1p's
    # check passes too: where 1 + x is 1 its x * 1 had LLVM fold it to x (a Rocket Lake
    # target), letting a denormal x through where the kernel's pass flushes it, so the
    # check refused it and the sigmoid cross-entropy's programs ran NumPy's passes (the
    # VAE's loss 532 us a call against 125 compiled); a zero x is now multiplied by 0.
    from asyncflow.devices import denormal
    from asyncflow.ops import elementwise
    from asyncflow.ops import fused_elementwise_log as flog
    from asyncflow.ops import fused_elementwise_log1p as flog1p

    if not elementwise.tf_exp():
        pytest.skip("float32 Log and Log1p are NumPy's here")
    assert flog.check()
    assert flog1p.check()
    pairs = [
        (flog.namespace()["_log32"], elementwise.log),
        (flog1p.namespace()["_log1p32"], elementwise.log1p),
    ]
    numba = fused_updates.numba_module()
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 1 << 32, 1 << 21, dtype=np.uint64).astype(np.uint32)
    ce = np.exp(-np.abs(rng.standard_normal(1 << 16) * 10)).astype(np.float32)
    near = rng.uniform(-1.5, 1.5, 1 << 16).astype(np.float32)
    for fn, kernel in pairs:

        @numba.njit(error_model="numpy")
        def loop(x, out, fn=fn):
            for i in range(x.size):
                out[i] = fn(x[i])

        for xs in (flog1p._inputs(), bits.view(np.float32), ce, near):
            got = np.empty_like(xs)
            token = denormal.enter()
            try:
                loop(xs, got)
                with np.errstate(all="ignore"):
                    want = kernel(np, xs)
            finally:
                denormal.leave(token)
            _same_bits([want], [got])


def test_inline_checks_decide_under_the_kernels_denormal_modes():
    # A check's verdict does not depend on the caller's denormal modes: it compares
    # under the kernels' (as the loops run), here once from inside a flushed stretch
    # and once from outside, each check fresh (no recorded verdict).
    from asyncflow.devices import denormal
    from asyncflow.ops import fused_elementwise_exp as fexp
    from asyncflow.ops import fused_elementwise_log1p as flog1p
    from asyncflow.ops import jit_cache

    if fused_updates.numba_module() is None:
        pytest.skip("no numba here")
    verdicts = []
    for flushed in (True, False):
        inline = fexp.InlineFunction(
            "_log1p32_probe", "ASYNCFLOW_INLINE_LOG1P", flog1p._build, flog1p._inputs,
            flog1p._reference,
        )  # fmt: skip
        token = denormal.enter() if flushed else None
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(jit_cache, "read_verdict", lambda *a: None)
                mp.setattr(jit_cache, "write_verdict", lambda *a: None)
                verdicts.append(inline.check())
        finally:
            denormal.leave(token)
    assert verdicts[0] == verdicts[1]


def test_sigmoid_cross_entropy_inside_one_loop(monkeypatch):
    # sigmoid_cross_entropy_with_logits and its gradient (Exp and Log1p inside the loops
    # with passing checks, NumPy's calls between stages with failing ones): the ufunc
    # program's bits either way.
    from asyncflow.ops import fused_elementwise_exp as fexp
    from asyncflow.ops import fused_elementwise_log1p as flog1p

    if not (fexp.check() and flog1p.check()):
        pytest.skip("the compiled exp or log1p does not give the kernels' bits here")
    rng = np.random.default_rng(8)
    logits = _data(rng, np.float32) * 8.0
    labels = rng.random(SHAPE).astype(np.float32)

    def build(logits, labels):
        z = logits * 1.5  # (a value computed in the graph: its gradient is taken)
        loss = af.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=z)
        return [loss, *af.gradients(af.reduce_sum(loss * loss), [z])]

    for ok in (True, False):
        monkeypatch.setitem(flog1p._state, "ok", ok)
        (want, got), compiled = _run_both(build, [logits, labels], monkeypatch)
        assert compiled >= 1
        _same_bits(want, got)
    assert any("_log1p32" in source for source, *_ in fused_elementwise_jit._loops)


def test_scalar_inputs_copied_outputs_and_small_programs_compile(monkeypatch):
    # A VAE's KL term on [64, 20] (1,280 elements: past _MIN_ELEMENTS, under the old
    # 4,096) with scalar inputs read by every element (a constant's read-only buffer
    # among them: one compiled signature all the same), and a Sub's gradient, whose
    # first output is the incoming gradient itself (a copy, stored by the loop): each
    # one compiled loop, with the ufunc program's bits.
    rng = np.random.default_rng(9)
    shape = (64, 20)
    assert fused_elementwise_jit._MIN_ELEMENTS <= 64 * 20
    mean = rng.standard_normal(shape).astype(np.float32)
    log_std = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(SHAPE).astype(np.float32)
    a = rng.standard_normal(SHAPE).astype(np.float32)
    two = np.float32(2.0)

    def build(mean, log_std, g, a, two):
        half = af.constant(np.float32(-0.5))  # (fetched too: an input, a read-only one)
        kl = half * (1.0 + two * log_std - af.square(mean) - af.exp(two * log_std))
        b = af.reshape(a * a, SHAPE)  # (its own cluster)
        da, db = af.gradients(a - b, [a, b], [g])
        return [kl, da, db, half]

    (want, got), compiled = _run_both(build, [mean, log_std, g, a, two], monkeypatch)
    assert compiled >= 3  # (2 with the copy left to NumPy's program)
    _same_bits(want, got)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_compiles_to_numpys_bits_for_every_exponent(dtype, monkeypatch):
    # NumPy's power takes fast paths for a scalar exponent of 2, 1, -1, 0 or 0.5 (glibc's
    # pow rounds x ** 2 differently in ~0.07% of inputs) and C's pow otherwise, or for an
    # exponent array: each loop takes the form its exponent's value at the call gives.
    rng = np.random.default_rng(10)
    x = _data(rng, dtype) * 10
    y = _data(rng, dtype)

    def build(x, e, y):
        d = x * 0.5 - 1.0
        return [af.pow(d, e) + d, af.pow(d, 2.0) * e, af.pow(d, y) * d]

    # Where NumPy's own power is not C's (its AVX-512 loops), programs whose Pow takes
    # the `**` form at the call run NumPy's program: only the fast forms compile.
    general = fused_elementwise_jit._general_pow(np.dtype(dtype))
    for e in (2.0, 1.0, -1.0, 0.0, 0.5, 3.0, -2.5, np.nan):
        with np.errstate(all="ignore"):
            (want, got), compiled = _run_both(build, [x, dtype(e), y], monkeypatch)
        if general:
            assert compiled >= 1
        _same_bits(want, got)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_of_a_fast_form_exponent_compiles_everywhere(dtype, monkeypatch):
    # x ** 2 (the autoencoder's loss) is NumPy's x * x whatever its power loop is.
    rng = np.random.default_rng(11)
    x, t = _data(rng, dtype), _data(rng, dtype)

    def build(x, t):
        return [af.reduce_mean(af.pow(x - t, 2.0) * 0.5 + x)]

    (want, got), compiled = _run_both(build, [x, t], monkeypatch)
    assert compiled >= 1
    _same_bits(want, got)


def test_numpy_power_checked_against_c_pow():
    # float64: Python's math.pow is C's pow, an independent reference for the check.
    rng = np.random.default_rng(1)
    x = np.abs(rng.standard_normal(1000)) * 10
    y = rng.standard_normal(1000) * 3
    same = np.array_equal(np.power(x, y), [math.pow(a, b) for a, b in zip(x, y)])
    assert fused_elementwise_jit._numpy_power_is_c_pow(np.dtype(np.float64)) == same


def test_lone_multi_pass_nodes_compile(monkeypatch):
    # A Sigmoid between two products (NumPy: four passes, its exp among them) and its
    # SigmoidGrad fuse alone into one compiled loop each, with their kernels' bits; a
    # float64 Sigmoid (no inline exp) and a Sigmoid of a known tiny shape stay their own
    # kernels; the Tanh and its gradient fuse together, one loop (the inline tanh).
    from asyncflow.ops import fused_elementwise_sigmoid as fsig

    if not fsig.check():
        pytest.skip("the compiled sigmoid does not give the kernel's bits here")
    rng = np.random.default_rng(11)
    x = _data(rng, np.float32) * 4
    w_np = rng.standard_normal((SHAPE[1], SHAPE[1])).astype(np.float32) * 0.2
    x64 = _data(rng, np.float64)
    tiny = rng.standard_normal((4, 8)).astype(np.float32)

    def build(x, x64, tiny):
        w = af.constant(w_np)
        h = af.sigmoid(af.matmul(x, w))
        t = af.tanh(af.matmul(h, w))
        loss = af.reduce_sum(af.matmul(t, w))
        g = af.gradients(loss, [x])[0]
        return [h, t, g, af.sigmoid(af.matmul(x64, x64, transpose_b=True)), af.sigmoid(tiny)]

    (want, got), compiled = _run_both(build, [x, x64, tiny], monkeypatch)
    assert compiled == 3  # the Sigmoid, the SigmoidGrad, the Tanh with its gradient
    _same_bits(want, got)


def test_a_lone_sigmoid_of_unknown_rows_compiles(monkeypatch):
    # A lone float32 Sigmoid of [?, 10] (a small dense layer's): TF's sigmoid is ~25 NumPy
    # passes, so it fuses alone whatever its known size and compiles from 64 elements.
    from asyncflow.ops import fused_elementwise_sigmoid as fsig

    if not fsig.check():
        pytest.skip("the compiled sigmoid does not give the kernel's bits here")
    rng = np.random.default_rng(12)
    x = rng.standard_normal((128, 16)).astype(np.float32)
    w_np = rng.standard_normal((16, 10)).astype(np.float32)

    def build(x):
        return [af.sigmoid(af.matmul(x, af.constant(w_np)))]

    compiled = record_compiled(monkeypatch)
    monkeypatch.setattr(cpu_budget, "_deterministic", True)
    got = []
    for disabled in (True, False):
        monkeypatch.setattr(fused_updates, "_DISABLED", disabled)
        with af.Graph().as_default(), af.device("/cpu:0"):
            p = af.placeholder(af.float32, [None, 16])
            y = build(p)
            with af.Session() as sess:
                sess.run(y, {p: x})
                assert fused_elementwise_jit.wait(timeout=50)
                compiled.clear()
                got.append(sess.run(y, {p: x}))
    assert compiled == [True]
    _same_bits(got[0], got[1])


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_join_written_by_the_loop_same_bits(axis, dtype, monkeypatch):
    # An LSTM cell's gate gradients joined for the product after them: the loop writes
    # each into its place in the joined array (fused_elementwise.fuse_concat_outputs),
    # with a scalar input, a literal, an input passed on as a part, and an output that
    # is not joined.
    rng = np.random.default_rng(7)
    x, y, dy = _data(rng, dtype), _data(rng, dtype), _data(rng, dtype)
    s = np.asarray(0.75, dtype)

    def build(x, y, dy, s):
        a = af.reshape(x * y, SHAPE)  # (not element-wise: the parts read a and dy)
        # (float64's Sigmoid stays NumPy's: its program would be staged, not one loop)
        act = af.sigmoid(a) if dtype == np.float32 else af.reciprocal(af.abs(a) + 1.0)
        parts = [
            act * dy,
            (a - dy) * s + 2.0,
            af.identity(dy),
            af.square(a) * dy,
        ]
        other = parts[0] * parts[1] - s
        return [af.concat(parts, axis), other]

    (want, got), compiled = _run_both(build, [x, y, dy, s], monkeypatch)
    assert compiled
    _same_bits(want, got)
    assert want[0].shape == np.concatenate([x] * 4, axis).shape
    sources = [key[0] for key, loop in fused_elementwise_jit._loops.items() if loop]
    assert any("cat0[c] = " in src for src in sources)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_selects_compile_to_the_same_bits(dtype, monkeypatch):
    # static_rnn's sequence_length steps (a batch-vector condition: the row loop), a
    # condition of the values' shape, and the _SelectZero both ways that their
    # gradients take; nan, inf and signed zeros in the data
    rng = np.random.default_rng(8)
    x, y, g = _data(rng, dtype), _data(rng, dtype), _data(rng, dtype)
    rows = rng.random(SHAPE[0]) < 0.6
    full = rng.random(SHAPE) < 0.4

    def build(x, y, g, rows, full):
        a = af.reshape(x * y, SHAPE)  # (the programs read a, not x and y)
        kept = af.where(rows, a * 2.0, af.zeros_like(a))  # _SelectZero, per row
        held = af.where(rows, a + g, g)  # Select, per row
        mixed = af.where(full, held - 1.0, kept)  # Select, element-wise
        out = kept * held + mixed
        return [out, *af.gradients(out, [a, g], [g])]

    (want, got), compiled = _run_both(build, [x, y, g, rows, full], monkeypatch)
    assert compiled
    _same_bits(want, got)
    sources = [key[0] for key, loop in fused_elementwise_jit._loops.items() if loop]
    assert any(re.search(r"x\d+ = in\d+\[r\]", src) for src in sources)  # (the row loop)


def test_a_form_that_failed_to_compile_is_not_asked_again(monkeypatch):
    # (a loop whose compile failed, or whose inline function's check did: the program
    # runs NumPy's at once, without writing its source and asking at every call)
    asked = []

    def failing(source, dtype, n_args, readonly=False):
        asked.append(source)
        monkeypatch.setitem(fused_elementwise_jit._loops, (source, dtype, readonly), None)
        return None

    monkeypatch.setattr(fused_elementwise_jit, "_loop_for", failing)
    monkeypatch.setattr(fused_updates, "_DISABLED", False)
    rng = np.random.default_rng(9)
    x_np, y_np = _data(rng, np.float64), _data(rng, np.float64)
    with af.Graph().as_default(), af.device("/cpu:0"):
        x, y = af.placeholder(af.float64, SHAPE), af.placeholder(af.float64, SHAPE)
        z = (x * y + 1.0) * x - y
        with af.Session() as sess:
            got = [sess.run(z, {x: x_np, y: y_np}) for _ in range(5)]
    assert len(asked) == 1
    for g in got:
        np.testing.assert_array_equal(g, (x_np * y_np + 1.0) * x_np - y_np)


@pytest.mark.parametrize("wide_rows", [True, False])
@pytest.mark.parametrize("rows", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_split_pieces_read_where_they_lie_same_bits(rows, dtype, wide_rows, monkeypatch):
    # An LSTM cell's gates: pieces of one array along its last axis that one program
    # reads (fused_elementwise.fuse_split_inputs), four of a SplitV's five (the last
    # one nothing reads) and a Split's two; with a batch-vector Select, or without one
    # where `_WIDE_ROWS` (a dynamic_rnn's cell), the row loop reads each piece's row in
    # its array; else the flat loop copies them.  The same bits as the graph with the
    # Splits kept, and as NumPy's programs.
    from asyncflow.ops import fused_elementwise

    monkeypatch.setattr(fused_elementwise_jit, "_WIDE_ROWS", wide_rows)
    rng = np.random.default_rng(10)
    n, width = SHAPE
    extra = 5 + 2 * rows + wide_rows  # (a loop's source of each case's own)
    big = rng.standard_normal((n, 4 * width + extra)).astype(dtype)
    pair = rng.standard_normal((n, 2 * width)).astype(dtype)
    c = _data(rng, dtype)
    keep = rng.random(n) < 0.6

    def build(big, pair, c, keep):
        a = af.reshape(big, [n, 4 * width + extra])  # (not element-wise: the Split's array)
        i, j, f, o, _rest = af.split(a, [width] * 4 + [extra], 1)
        act = af.sigmoid if dtype == np.float32 else (lambda v: af.reciprocal(af.abs(v) + 1.0))
        tanh = af.tanh if dtype == np.float32 else (lambda v: v / (af.abs(v) + 2.0))
        new_c = c * act(f + 1.0) + act(i) * tanh(j)
        h = tanh(new_c) * act(o)
        if rows:
            h = af.where(keep, h, af.zeros_like(h))
            new_c = af.where(keep, new_c, c)
        g1, g2 = af.split(af.reshape(pair, [n, 2 * width]), 2, -1)
        return [h, new_c, g1 * g2 - 1.0]

    feeds = [big, pair, c, keep]
    before = set(fused_elementwise_jit._loops)
    (want, got), compiled = _run_both(build, feeds, monkeypatch)
    assert compiled
    _same_bits(want, got)
    sources = _new_sources(before)
    wide = [s for s in sources if f"r * {4 * width + extra} + " in s]
    assert bool(wide) == (rows or wide_rows)  # (the row loop reads the gates where they lie)
    assert width >= fused_elementwise_jit._WIDE_MIN_COLS
    monkeypatch.setattr(fused_elementwise, "_SPLITS", False)
    (_, kept), _ = _run_both(build, feeds, monkeypatch)
    _same_bits(got, kept)


@pytest.mark.parametrize("rows", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_joins_bias_gradient_summed_by_the_loop_same_bits(rows, dtype, monkeypatch):
    # An LSTM cell's gate gradients joined, and their BiasAddGrad
    # (fused_elementwise.fuse_bias_add_grad): the loop adds each row of the join into
    # the column sums after writing it, TF's order for the join (from zero, a row at a
    # time): the bits of the BiasAddGrad kernel, nan, inf and signed zeros included;
    # with a batch-vector Select in the program and without.
    from asyncflow.ops import fused_elementwise

    rng = np.random.default_rng(13)
    x, y, dy = _data(rng, dtype), _data(rng, dtype), _data(rng, dtype)
    keep = rng.random(SHAPE[0]) < 0.6

    def build(x, y, dy, keep):
        a = af.reshape(x * y, SHAPE)  # (not element-wise: the parts read a and dy)
        g = af.where(keep, dy, af.zeros_like(dy)) if rows else dy
        parts = [a * g, (a - g) * 0.5, af.identity(g), af.square(a) * g + 1.0]
        joined = af.concat(parts, 1)
        return [joined, af.raw_ops.BiasAddGrad(out_backprop=joined)]

    feeds = [x, y, dy, keep]
    before = set(fused_elementwise_jit._loops)
    (want, got), compiled = _run_both(build, feeds, monkeypatch)
    assert compiled
    _same_bits(want, got)
    sources = _new_sources(before)
    assert any("bsum[j] = bsum[j] + catr[j]" in s for s in sources)
    monkeypatch.setattr(fused_elementwise, "_BIAS_GRADS", False)
    (_, kept), _ = _run_both(build, feeds, monkeypatch)
    _same_bits(got, kept)


def test_narrow_split_pieces_are_copied_for_the_flat_loop_same_bits(monkeypatch):
    # Gates of 4 columns (under _WIDE_MIN_COLS): a row's loop of its own would cost more
    # than the copies, so the flat loop runs; the same bits as the Split kept.
    from asyncflow.ops import fused_elementwise

    rng = np.random.default_rng(13)
    n, width = 2048, 4  # (8,192 elements: past the compiling threshold)
    big = rng.standard_normal((n, 4 * width + 3)).astype(np.float32)
    c = rng.standard_normal((n, width)).astype(np.float32)

    def build(big, c):
        a = af.reshape(big, [n, 4 * width + 3])
        i, j, f, o, _rest = af.split(a, [width] * 4 + [3], 1)
        new_c = c * af.sigmoid(f + 1.0) + af.sigmoid(i) * af.tanh(j)
        return [af.tanh(new_c) * af.sigmoid(o), new_c]

    (want, got), compiled = _run_both(build, [big, c], monkeypatch)
    assert compiled  # (the flat loop: no loop of rows of this width was compiled)
    _same_bits(want, got)
    assert not [key for key in fused_elementwise_jit._loops if f"r * {4 * width + 3} + " in key[0]]
    monkeypatch.setattr(fused_elementwise, "_SPLITS", False)
    (_, kept), _ = _run_both(build, [big, c], monkeypatch)
    _same_bits(got, kept)


@pytest.mark.parametrize("shape", [(8, 1), (32, 1), (3, 8), (40,)])
def test_small_programs_of_tfs_functions_compile_after_some_runs_same_bits(
    shape, monkeypatch
):
    # The GAN tutorial's loss program at its batch of 32 (Sigmoids and Logs over
    # [32, 1]): each of TF's functions ~10-25 NumPy calls in the ufunc program (144 us
    # of the step), ~2.5 us as a loop.  A program under _EAGER_ELEMENTS compiles once it
    # has run _SMALL_RUNS times (a training loop's: not a one-off graph's), then gives
    # the ufunc program's bits, nan, infinities and signed zeros included.
    assert math.prod(shape) < fused_elementwise_jit._EAGER_ELEMENTS
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape).astype(np.float32) * 4
    w = rng.random(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30]

    def build(x, w):
        d_real, d_fake = af.sigmoid(x), af.sigmoid(x * w)
        loss = af.log(d_real) + af.log(1.0 - d_fake)  # (log of 0: -inf; of nan: nan)
        return [loss, af.exp(w - x) * w, af.tanh(x) * w + x]

    compiled = record_compiled(monkeypatch)
    monkeypatch.setattr(cpu_budget, "_deterministic", True)
    results = []
    for disabled in (True, False):
        monkeypatch.setattr(fused_updates, "_DISABLED", disabled)
        with af.Graph().as_default(), af.device("/cpu:0"):
            phs = [af.placeholder(af.float32, shape) for _ in range(2)]
            fetches = build(*phs)
            with af.Session() as sess:
                feed = dict(zip(phs, (x, w)))
                runs = [sess.run(fetches, feed) for _ in range(fused_elementwise_jit._SMALL_RUNS)]
                if disabled:
                    results.append(runs[0])
                    continue
                assert compiled and not any(compiled)  # (the ufunc programs so far)
                programs = len(compiled) // fused_elementwise_jit._SMALL_RUNS
                for got in runs:
                    _same_bits(got, results[0])
                sess.run(fetches, feed)  # (the compiles start)
                assert fused_elementwise_jit.wait(timeout=50)
                compiled.clear()
                results.append(sess.run(fetches, feed))
                assert sum(compiled) == programs  # (every program now its loop)
    _same_bits(results[1], results[0])
