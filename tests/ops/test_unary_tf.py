"""Exp, Log, Log1p and Softplus (float32 and float16) and float16 Sigmoid give TF 2.21's
bits (ops/elementwise: `_exp32`, `_log32`, `_log1p32`, Eigen's; `_softplus_tf`, TF's
functor; `_sigmoid16`, Eigen's logistic function on half values): the functions, the
ops' kernels inline and at every length (TF's scalar path for the last size % 8), a
fused program run as NumPy's passes and as a compiled loop, and a lone op fused alone.
TF's outputs come from tests/fixtures/record_unary_tf.py."""

from __future__ import annotations

import importlib
import pathlib

import numpy as np
import pytest
from jit_recording import record_compiled

import asyncflow as af
from asyncflow.devices import cpu_budget, denormal
from asyncflow.ops import elementwise, fused_elementwise_jit, fused_updates

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "unary_tf.npz"
HALVES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
TAIL16 = np.array(  # (the recorder's `tail_source(np.float16)[:17]`)
    np.random.default_rng(40).standard_normal(40) * 4, np.float16
)[:17]

OPS = {
    "exp": af.exp,
    "log": af.log,
    "log1p": af.log1p,
    "softplus": af.nn.softplus,
    "sigmoid": af.sigmoid,
}

# (float16 Sigmoid is TF's everywhere; the others where numba can run)
needs_tf_exp = pytest.mark.skipif(
    not elementwise.tf_exp(), reason="float32 Exp is NumPy's where numba cannot run"
)


@pytest.fixture(scope="module")
def tf_values():
    with np.load(FIXTURE, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _assert_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    ints = f"i{want.itemsize}"
    bad = np.flatnonzero(got[~nan].view(ints) != want[~nan].view(ints))
    assert bad.size == 0, f"{bad.size} values differ from TF's, first at {bad[:5]}"


def test_float16_sigmoid_gives_tfs_bits(tf_values):
    _assert_bits(elementwise.sigmoid(np, HALVES), tf_values["sigmoid16_y"])
    # float32's sigmoid rounded once is not TF's half one
    wide = elementwise.sigmoid(np, HALVES.astype(np.float32)).astype(np.float16)
    assert np.count_nonzero(wide != tf_values["sigmoid16_y"]) > 1000


@needs_tf_exp
def test_the_functions_give_tfs_bits_and_write_in_place(tf_values):
    x = tf_values["exp32_x"]
    saved = denormal.enter()  # (as kernels run: TF's threads flush subnormal results)
    try:
        with np.errstate(all="ignore"):
            for name in ("exp", "log", "log1p", "softplus"):
                fn, want = getattr(elementwise, name), tf_values[f"{name}32_y"]
                _assert_bits(fn(np, x), want)
                buf = x.copy()
                assert fn(np, buf, out=buf) is buf
                _assert_bits(buf, want)
                if f"{name}16_y" in tf_values:
                    _assert_bits(fn(np, HALVES), tf_values[f"{name}16_y"])
                # NumPy's functions are not TF's
                plain = np.logaddexp(0, x) if name == "softplus" else getattr(np, name)(x)
                assert np.count_nonzero(plain != want) > x.size // 20
    finally:
        denormal.leave(saved)


@pytest.mark.parametrize(
    "key",
    [
        *(f"{name}32" for name in ("exp", "log", "log1p", "softplus")),
        *(f"{name}16" for name in ("exp", "softplus", "sigmoid")),
    ],
)
def test_the_ops_give_tfs_bits_inline_over_blocks_and_at_every_length(tf_values, key):
    if key != "sigmoid16" and not elementwise.tf_exp():
        pytest.skip("float32 Exp is NumPy's where numba cannot run")
    f32 = key.endswith("32")
    x = tf_values["exp32_x"] if f32 else HALVES
    src = x[1000:1017] if f32 else TAIL16
    want = tf_values[f"{key}_y"]
    with af.Graph().as_default(), af.device("/cpu:0"):  # (TF's CPU kernel)
        p = af.placeholder(af.float32 if f32 else af.float16, [None])
        y = OPS[key[:-2]](p)
        with af.Session() as sess:
            _assert_bits(sess.run(y, {p: x}), want)
            big = np.tile(x, 4)  # blocks on the budget's threads: whole packets each
            _assert_bits(sess.run(y, {p: big}), np.tile(want, 4))
            got = np.concatenate([sess.run(y, {p: src[:n]}) for n in range(1, 18)])
            _assert_bits(got, tf_values[f"{key}_tails"])


@needs_tf_exp
@pytest.mark.parametrize("compiled", [False, True], ids=["numpy_program", "compiled_loop"])
def test_fused_programs_and_a_lone_op_give_tfs_bits(tf_values, monkeypatch, compiled):
    if compiled:
        pytest.importorskip("numba")
    names = ("exp", "log", "log1p", "softplus")
    x = tf_values["exp32_x"]
    x2 = x.reshape(8, -1)
    ones = np.ones_like(x2)
    monkeypatch.setattr(fused_updates, "_DISABLED", not compiled)
    ran = record_compiled(monkeypatch)  # per fused call: whether its compiled loop ran
    monkeypatch.setattr(cpu_budget, "_deterministic", True)
    with af.Graph().as_default(), af.device("/cpu:0"):
        p = af.placeholder(af.float32, x2.shape)
        q = af.placeholder(af.float32, x2.shape)
        a = af.placeholder(af.float32, x2.shape)
        # one program: each function times exact ones; a lone Exp fused alone
        fetches = [OPS[name](p) * q for name in names] + [af.exp(a)]
        feed = {p: x2, q: ones, a: x2}
        with af.Session() as sess:
            first = sess.run(fetches, feed)
            if compiled:
                assert fused_elementwise_jit.wait(timeout=50)
            ran.clear()
            second = sess.run(fetches, feed)
    assert (ran and all(ran)) if compiled else ran == []
    if compiled:  # (the functions inside the loops, not NumPy's passes between stages)
        # (each function whose inline check passes here: Log1p's is refused where
        # kernels flush denormals, ops/fused_elementwise_exp.InlineFunction.check)
        sources = [source for source, *_ in fused_elementwise_jit._loops]
        for name in names:
            module = importlib.import_module(f"asyncflow.ops.fused_elementwise_{name}")
            if module.check():
                assert any(f"_{name}32" in source for source in sources)
    for got in (first, second):
        for name, y in zip((*names, "exp"), got):
            _assert_bits(y, tf_values[f"{name}32_y"].reshape(8, -1))


@needs_tf_exp
@pytest.mark.parametrize("name", ["exp", "log", "log1p", "softplus"])
def test_a_program_of_a_size_tf_ends_by_its_scalar_path(tf_values, monkeypatch, name):
    # 8k + 5 elements: the loop leaves the function to the kernel's (its scalar tail)
    pytest.importorskip("numba")
    x = np.concatenate([tf_values["exp32_x"][:4096], tf_values["exp32_x"][1000:1005]])
    y32, tails = tf_values[f"{name}32_y"], tf_values[f"{name}32_tails"]
    want = np.concatenate([y32[:4096], tails[10:15]])
    monkeypatch.setattr(fused_updates, "_DISABLED", False)
    monkeypatch.setattr(cpu_budget, "_deterministic", True)
    with af.Graph().as_default(), af.device("/cpu:0"):
        p = af.placeholder(af.float32, x.shape)
        q = af.placeholder(af.float32, x.shape)
        y = OPS[name](p * q) * q
        with af.Session() as sess:
            ones = np.ones_like(x)
            first = sess.run(y, {p: x, q: ones})
            assert fused_elementwise_jit.wait(timeout=50)
            second = sess.run(y, {p: x, q: ones})
    _assert_bits(first, want)
    _assert_bits(second, want)


@needs_tf_exp
def test_elu_and_selu_are_tfs_exp_minus_one(tf_values):
    # TF's functors: (x < 0).select(exp(x) - 1, x), Selu's scaled, on TF's exp (the
    # audit of docs/tf_numerics.md found them TF's bit for bit on 1.3 million inputs)
    x, e = tf_values["exp32_x"], tf_values["exp32_y"]
    f = np.float32
    saved = denormal.enter()  # (as TF's threads: subnormals read and written as 0)
    try:
        with np.errstate(all="ignore"):
            neg = x < 0
            elu = np.where(neg, e - f(1), x)
            scale = f(1.0507009873554804934193349852946)
            scale_alpha = f(1.7580993408473768599402175208123)
            selu = np.where(neg, scale_alpha * (e - f(1)), scale * x)
    finally:
        denormal.leave(saved)
    with af.Graph().as_default(), af.device("/cpu:0"):
        p = af.placeholder(af.float32, [None])
        ys = [af.nn.elu(p), af.nn.selu(p)]
        with af.Session() as sess:
            got = sess.run(ys, {p: x})
    _assert_bits(got[0], elu)
    _assert_bits(got[1], selu)
