"""ops/select_zero.py: Select of a value and ZerosLike as one masked pass.  Values
against NumPy's np.where (nan, inf and -0.0 included) and against the unfused graph,
errors as the Select words them, and sigmoid cross-entropy's gradient."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors, graph_passes
from asyncflow.ops import fused_elementwise, select_zero


@pytest.fixture(autouse=True)
def selects_as_nodes(monkeypatch):
    """The _SelectZero nodes this module checks for, and their own kernel: not taken
    into the element-wise programs (tests/ops/test_fused_elementwise.py tests those)."""
    monkeypatch.setattr(fused_elementwise, "_SELECT", False)


def _plan_types(sess) -> list[str]:
    return [op.type for sp in sess._plans.values() for pl in sp.plans for op in pl.nodes]


@pytest.fixture
def unfused(monkeypatch):
    passes = [p for p in graph_passes.GRAPH_PASSES if p is not select_zero.fuse_select_zero]
    monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)


def _special_values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(shape).astype(dtype)
    flat = v.reshape(-1)
    flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return v


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("shape", [(40, 50), (7, 3)])  # the masked pass, the Select's own
def test_select_with_zeros_matches_numpy(dtype, shape):
    v = (
        _special_values(shape, np.float64).astype(dtype)
        if dtype != np.int32
        else (np.arange(np.prod(shape), dtype=dtype).reshape(shape) - 5)
    )
    c = np.random.default_rng(1).random(shape) < 0.5
    with af.Graph().as_default():
        pc = af.placeholder(af.bool, [None, None])
        pv = af.placeholder(af.as_dtype(dtype), [None, None])
        zeros = af.zeros_like(pv)
        a = af.where(pc, pv, zeros)
        b = af.where(pc, zeros, pv)
        with af.Session() as s:
            got_a, got_b = s.run([a, b], {pc: c, pv: v})
            types = _plan_types(s)
    assert types.count("_SelectZero") == 2 and "ZerosLike" not in types
    want_a, want_b = np.where(c, v, dtype(0)), np.where(c, dtype(0), v)
    assert got_a.dtype == dtype and got_b.dtype == dtype
    # the same bits: nan where kept, +0.0 where masked, -0.0 kept as -0.0
    np.testing.assert_array_equal(got_a.view(np.uint8), want_a.view(np.uint8))
    np.testing.assert_array_equal(got_b.view(np.uint8), want_b.view(np.uint8))


def test_zeros_read_elsewhere_stay():
    v = _special_values((40, 50), np.float32)
    c = v > 0
    with af.Graph().as_default():
        pv = af.placeholder(af.float32, [None, None])
        zeros = af.zeros_like(pv)
        a = af.where(af.constant(c), pv, zeros)
        with af.Session() as s:
            got_a, got_z = s.run([a, zeros], {pv: v})
            assert "_SelectZero" in _plan_types(s)
    np.testing.assert_array_equal(got_a, np.where(c, v, np.float32(0)))
    np.testing.assert_array_equal(got_z, np.zeros_like(v))


def test_errors_and_batch_conditions_are_the_selects():
    with af.Graph().as_default():
        pc = af.placeholder(af.bool, [None])
        pv = af.placeholder(af.float32, [None, None])
        pl = af.placeholder(af.float32, [None, None])
        out = af.where(pc, pv, af.zeros_like(pl))
        with af.Session() as s:
            v = np.arange(6, dtype=np.float32).reshape(3, 2)
            # a batch vector condition (TF1 Select): rows kept or zeroed
            got = s.run(out, {pc: [True, False, True], pv: v, pl: v})
            np.testing.assert_array_equal(got, v * np.array([[1], [0], [1]], np.float32))
            assert "_SelectZero" in _plan_types(s)
            with pytest.raises(errors.InvalidArgumentError, match="'then' and 'else' must have"):
                s.run(out, {pc: [True, False, True], pv: v, pl: np.ones((2, 2), np.float32)})
            with pytest.raises(errors.InvalidArgumentError, match="Number of batches"):
                s.run(out, {pc: [True, False], pv: v, pl: v})


@pytest.mark.parametrize("fuse", [True, False])
def test_sigmoid_cross_entropy_gradient(request, fuse):
    # d/dx of sum(sigmoid_cross_entropy_with_logits(z, x)) is sigmoid(x) - z.
    if not fuse:
        request.getfixturevalue("unfused")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 40)) * 4
    z = rng.random((64, 40))
    with af.Graph().as_default():
        px = af.placeholder(af.float64, [None, None])
        loss = af.reduce_sum(af.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=px))
        (g,) = af.gradients(loss, [px])
        with af.Session() as s:
            got_loss, got_g = s.run([loss, g], {px: x})
            assert ("_SelectZero" in _plan_types(s)) == fuse
    want = np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))
    assert got_loss == pytest.approx(want.sum(), rel=1e-12)
    np.testing.assert_allclose(got_g, 1 / (1 + np.exp(-x)) - z, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kept", ["mixed", "all", "none"])
def test_batch_vector_conditions_match_numpy(dtype, kept):
    # static_rnn's sequence_length steps: Select(cond[batch], x, y) keeps whole rows, its
    # gradient masks rows against ZerosLike, its zero output is Fill(shape, 0).
    v = _special_values((64, 48), dtype)
    w = _special_values((64, 48), dtype, seed=3)[::-1]
    c = {
        "mixed": np.random.default_rng(4).random(64) < 0.4,
        "all": np.ones(64, bool),
        "none": np.zeros(64, bool),
    }[kept]
    with af.Graph().as_default():
        pc = af.placeholder(af.bool, [None])
        pv = af.placeholder(af.as_dtype(dtype), [None, None])
        pw = af.placeholder(af.as_dtype(dtype), [None, None])
        fill = af.zeros(af.shape(pv), af.as_dtype(dtype))  # Fill(dims, 0)
        outs = [
            af.where(pc, pv, pw),
            af.where(pc, pv, af.zeros_like(pw)),
            af.where(pc, af.zeros_like(pw), pv),
            af.where(pc, fill, pv),
            af.where(pc, pv, fill),
            af.where(pc, af.fill(af.shape(pv), af.constant(-0.0, pv.dtype)), pv),  # -0.0
        ]
        with af.Session() as s:
            got = s.run(outs, {pc: c, pv: v, pw: w})
            types = _plan_types(s)
    assert types.count("_SelectZero") == 4 and "ZerosLike" not in types
    rows = c[:, None]
    z = dtype(0)
    wants = [
        np.where(rows, v, w),
        np.where(rows, v, z),
        np.where(rows, z, v),
        np.where(rows, z, v),
        np.where(rows, v, z),
        np.where(rows, dtype(-0.0), v),
    ]
    for g, want in zip(got, wants):
        assert g.dtype == dtype and g.shape == want.shape
        np.testing.assert_array_equal(g.view(np.uint8), want.view(np.uint8))


def test_fill_of_a_fed_or_nonzero_value_is_not_zeros():
    v = _special_values((40, 50), np.float32)
    c = np.random.default_rng(5).random(40) < 0.5
    with af.Graph().as_default():
        pc = af.placeholder(af.bool, [None])
        pv = af.placeholder(af.float32, [None, None])
        zero = af.constant(0.0)
        fed = af.where(pc, af.fill(af.shape(pv), zero), pv)
        ones = af.where(pc, af.fill(af.shape(pv), 1.0), pv)
        with af.Session() as s:
            got_fed, got_ones = s.run([fed, ones], {pc: c, pv: v, zero: 2.5})
            assert "_SelectZero" not in _plan_types(s)
    np.testing.assert_array_equal(got_fed, np.where(c[:, None], np.float32(2.5), v))
    np.testing.assert_array_equal(got_ones, np.where(c[:, None], np.float32(1), v))


def test_static_rnn_sequence_length_gradients_match_unfused(monkeypatch):
    # Every Select of the copy-through (outputs, states, their gradients) on rows.
    rng = np.random.default_rng(6)
    x = rng.standard_normal((40, 6, 3)).astype(np.float32)
    lengths = rng.integers(1, 7, 40).astype(np.int32)
    lengths[:3] = [6, 1, 6]

    def run():
        with af.Graph().as_default():
            af.set_random_seed(1)
            px = af.placeholder(af.float32, [None, 6, 3])
            pl = af.placeholder(af.int32, [None])
            cell = af.nn.rnn_cell.BasicLSTMCell(32)
            outs, state = af.nn.static_rnn(
                cell, af.unstack(px, 6, 1), dtype=af.float32, sequence_length=pl
            )
            loss = af.reduce_sum(af.stack(outs) ** 2) + af.reduce_sum(state.c)
            grads = af.gradients(loss, [px] + af.trainable_variables())
            with af.Session() as s:
                s.run(af.global_variables_initializer())
                got = s.run([loss, *grads], {px: x, pl: lengths})
                return got, _plan_types(s)

    fused, types = run()
    assert "_SelectZero" in types
    passes = [p for p in graph_passes.GRAPH_PASSES if p is not select_zero.fuse_select_zero]
    monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)
    unfused, types = run()
    assert "_SelectZero" not in types
    for a, b in zip(fused, unfused):
        np.testing.assert_array_equal(a, b)


def test_select_v2_against_a_scalar_zero_fuses_and_stays_dead_in_an_untaken_branch():
    # TF 2's dropout is SelectV2(keep, x * scale, 0): one _SelectZero pass, also inside a
    # cond branch, whose zero constant waits on the branch's pivot.
    tf = af
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 2048])
        flag = tf.placeholder(tf.bool, [])
        y = tf.cond(flag, lambda: tf.nn.dropout(x, rate=0.5, seed=3), lambda: x * 3.0)
        g = tf.gradients(tf.reduce_sum(y * y), x)[0]
        xv = np.random.RandomState(0).randn(4, 2048).astype(np.float32)
        with tf.Session() as s:
            a, ga = s.run([y, g], {x: xv, flag: True})
            b, gb = s.run([y, g], {x: xv, flag: False})
            nodes = [op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes]
    kept = a != 0
    assert 0.4 < kept.mean() < 0.6 and not np.signbit(a[~kept]).any()
    np.testing.assert_array_equal(a[kept], (xv * 2.0)[kept])
    np.testing.assert_allclose(ga, 4 * a, rtol=1e-6)
    np.testing.assert_allclose(b, 3 * xv, rtol=1e-6)
    np.testing.assert_allclose(gb, 18 * xv, rtol=1e-6)
    assert "SelectV2" not in nodes and "_SelectZero" in nodes
