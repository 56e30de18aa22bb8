"""Sigmoid gives TF 2.21's float32 bits (ops/elementwise._sigmoid32, Eigen's logistic
function): the op's kernel inline and over blocks, arrays of every length (TF's scalar
path for the last size % 8), a fused program run as NumPy's passes and as a compiled
loop, and a lone Sigmoid fused alone.  TF's outputs come from
tests/fixtures/record_sigmoid_tf.py."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from jit_recording import record_compiled

import asyncflow as af
from asyncflow.devices import cpu_budget, denormal
from asyncflow.ops import elementwise, fused_elementwise_jit, fused_updates

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "sigmoid_tf.npz"


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


def test_the_function_gives_tfs_bits_and_writes_in_place(tf_values):
    x, want = tf_values["x32"], tf_values["y32"]
    saved = denormal.enter()  # (as kernels run: TF's threads flush subnormal results)
    try:
        with np.errstate(all="ignore"):
            _assert_bits(elementwise.sigmoid(np, x), want)
            buf = x.copy()
            assert elementwise.sigmoid(np, buf, out=buf) is buf
    finally:
        denormal.leave(saved)
    _assert_bits(buf, want)
    # 1 / (1 + exp(-x)) in NumPy is not TF's: the fixture tells them apart.
    with np.errstate(all="ignore"):
        assert np.count_nonzero(1 / (1 + np.exp(-x)) != want) > x.size // 10


def test_the_op_gives_tfs_bits_inline_over_blocks_and_at_every_length(tf_values):
    x, want = tf_values["x32"], tf_values["y32"]
    with af.Graph().as_default(), af.device("/cpu:0"):  # (TF's CPU kernel)
        p = af.placeholder(af.float32, [None])
        y = af.sigmoid(p)
        with af.Session() as sess:
            _assert_bits(sess.run(y, {p: x}), want)
            big = np.tile(x, 16)  # blocks on the budget's threads: whole packets each
            _assert_bits(sess.run(y, {p: big}), np.tile(want, 16))
            got = np.concatenate([sess.run(y, {p: x[1000 : 1000 + n]}) for n in range(1, 18)])
            _assert_bits(got, tf_values["tails"])
            odd = np.concatenate([x, x[1000:1005]])  # (its last 5 by the scalar path)
            _assert_bits(sess.run(y, {p: odd})[-5:], tf_values["tails"][10:15])


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy_program", "compiled_loop"])
def test_fused_programs_and_a_lone_sigmoid_give_tfs_bits(tf_values, monkeypatch, compiled):
    if compiled:
        pytest.importorskip("numba")
    x, want = tf_values["x32"], tf_values["y32"]
    x2, want2 = x.reshape(8, -1), want.reshape(8, -1)
    ones = np.ones_like(x2)
    monkeypatch.setattr(fused_updates, "_DISABLED", not compiled)
    ran = record_compiled(monkeypatch)  # per fused call: whether its compiled loop ran
    monkeypatch.setattr(cpu_budget, "_deterministic", True)
    with af.Graph().as_default(), af.device("/cpu:0"):
        p = af.placeholder(af.float32, x2.shape)
        q = af.placeholder(af.float32, x2.shape)
        a = af.placeholder(af.float32, x2.shape)
        fused = af.sigmoid(p) * q  # one program: the sigmoid times exact ones
        alone = af.sigmoid(a)  # a lone node: fused alone where numba is
        feed = {p: x2, q: ones, a: x2}
        with af.Session() as sess:
            first = sess.run([fused, alone], feed)
            if compiled:
                assert fused_elementwise_jit.wait(timeout=50)
            ran.clear()
            second = sess.run([fused, alone], feed)
    assert ran == ([True, True] if compiled else [])
    for got in (*first, *second):
        _assert_bits(got, want2)


def test_scalars_empty_strided_and_float64(tf_values):
    x, want = tf_values["x32"][:6], tf_values["y32"][:6]
    with af.Graph().as_default(), af.device("/cpu:0"):
        p = af.placeholder(af.float32, None)
        y = af.sigmoid(p)
        with af.Session() as sess:
            for k in range(6):  # 0-d values: TF's scalar path
                got = sess.run(y, {p: x[k]})
                assert np.shape(got) == ()
            assert sess.run(y, {p: np.zeros((0, 3), np.float32)}).shape == (0, 3)
            grid = np.tile(x, 8).reshape(6, 8)
            _assert_bits(sess.run(y, {p: grid.T}), np.tile(want, 8).reshape(6, 8).T)
    # float64 keeps 1 / (1 + exp(-x))
    x64 = np.linspace(-30, 30, 101)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(elementwise.sigmoid(np, x64), 1 / (1 + np.exp(-x64)))
