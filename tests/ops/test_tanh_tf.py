"""Tanh gives TF 2.21's bits (ops/elementwise.tanh, Eigen's rational function): the op's
kernel inline and over blocks, float16, a fused program run as NumPy's passes and as a
compiled loop, and a lone Tanh fused alone.  TF's outputs come from
tests/fixtures/record_tanh_tf.py."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from jit_recording import record_compiled

import asyncflow as af
from asyncflow.devices import cpu_budget
from asyncflow.ops import elementwise, fused_elementwise_jit, fused_updates

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "tanh_tf.npz"


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
    with np.errstate(all="ignore"):
        _assert_bits(elementwise.tanh(np, x), want)
        buf = x.copy()
        assert elementwise.tanh(np, buf, out=buf) is buf
    _assert_bits(buf, want)
    # NumPy's own float32 tanh is not TF's: the fixture tells them apart.
    assert np.count_nonzero(np.tanh(x) != want) > x.size // 4


def test_the_op_gives_tfs_bits_inline_over_blocks_and_in_half(tf_values):
    x, want = tf_values["x32"], tf_values["y32"]
    tails = tf_values["tails"]
    with af.Graph().as_default(), af.device("/cpu:0"):  # (TF's CPU kernel)
        p = af.placeholder(af.float32, [None])
        p16 = af.placeholder(af.float16, [None])
        y, y16 = af.tanh(p), af.tanh(p16)
        with af.Session() as sess:
            _assert_bits(sess.run(y, {p: x}), want)  # over the size run inline
            big = np.tile(x, 16)  # 265,760 elements: blocks on the budget's threads
            _assert_bits(sess.run(y, {p: big}), np.tile(want, 16))
            got = np.concatenate([sess.run(y, {p: x[1000 : 1000 + n]}) for n in range(1, 18)])
            _assert_bits(got, tails)
            _assert_bits(sess.run(y16, {p16: tf_values["x16"]}), tf_values["y16"])


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy_program", "compiled_loop"])
def test_fused_programs_and_a_lone_tanh_give_tfs_bits(tf_values, monkeypatch, compiled):
    if compiled:
        pytest.importorskip("numba")
    x, want = tf_values["x32"], tf_values["y32"]
    n = x.size // 2 * 2
    x2, want2 = x[:n].reshape(2, -1), want[:n].reshape(2, -1)
    ones = np.ones_like(x2)
    monkeypatch.setattr(fused_updates, "_DISABLED", not compiled)
    ran = record_compiled(monkeypatch)  # per fused call: whether its compiled loop ran
    monkeypatch.setattr(cpu_budget, "_deterministic", True)
    with af.Graph().as_default(), af.device("/cpu:0"):
        p = af.placeholder(af.float32, x2.shape)
        q = af.placeholder(af.float32, x2.shape)
        a = af.placeholder(af.float32, x2.shape)
        fused = af.tanh(p) * q  # one program: the tanh times exact ones
        alone = af.tanh(a)  # a lone node: fused alone where numba is
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


def test_scalars_empty_and_strided_values(tf_values):
    x, want = tf_values["x32"][:6], tf_values["y32"][:6]
    with af.Graph().as_default(), af.device("/cpu:0"):
        p = af.placeholder(af.float32, None)
        y = af.tanh(p)
        c = af.tanh(af.constant(float(x[0])))
        with af.Session() as sess:
            for k in range(6):  # 0-d values (a Python float, a NumPy scalar)
                got = sess.run(y, {p: x[k]})
                assert np.shape(got) == ()
                _assert_bits(np.float32(got), want[k])
            _assert_bits(np.float32(sess.run(c)), want[0])
            assert sess.run(y, {p: np.zeros((0, 3), np.float32)}).shape == (0, 3)
            grid = np.ascontiguousarray(x.reshape(2, 3).T)  # (a transposed copy's values)
            _assert_bits(sess.run(y, {p: x.reshape(2, 3).T}), want.reshape(2, 3).T)
            _assert_bits(sess.run(y, {p: grid}), want.reshape(2, 3).T)
    # the function itself: NumPy scalars, 0-d arrays, float16 scalars, `out` of 0-d
    _assert_bits(elementwise.tanh(np, np.float32(x[1])), want[1])
    _assert_bits(elementwise.tanh(np, np.array(x[1])), np.array(want[1]))
    out = np.empty((), np.float32)
    assert elementwise.tanh(np, np.array(x[2]), out=out) is out
    _assert_bits(out, np.array(want[2]))
    half = elementwise.tanh(np, np.float16(0.5))
    assert half.dtype == np.float16 and half.shape == ()
