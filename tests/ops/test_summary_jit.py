"""The compiled histogram statistics (ops/summary_jit.py) against summary_ops' NumPy path
and TF's Histogram::Add: the same HistogramProto bytes for empty tensors, NaN/Inf (the
same error), integer and float types, signed zeros in either order, subnormals, huge
values and values on and beside the bucket limits; the sums in TF's order (one value at
a time from 0.0) on both paths; the fused summary op's batch with and without the
compiled loops."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.ops import summary_jit, summary_ops
from asyncflow.protos.summary_pb2 import HistogramProto, Summary

pytest.importorskip("numba")


@pytest.fixture(autouse=True, scope="module")
def _compiled_loops():
    assert summary_jit.warm()  # compiled in the background otherwise: NumPy runs first


@pytest.fixture
def numpy_path(monkeypatch):
    """A function that runs its argument with the compiled loops out of the way."""

    def run(fn, *args):
        with monkeypatch.context() as m:
            m.setattr(summary_jit._JIT, "_loops", {})
            m.setattr(summary_jit._JIT, "_started", True)  # (no compile starts either)
            assert not summary_jit.ready()
            return fn(*args)

    return run


def _tf_reference(values) -> HistogramProto:
    """TF's Histogram::Add and EncodeToProto(h, false), one value at a time in Python."""
    limits = summary_ops._BUCKET_LIMITS
    d = np.asarray(values).reshape(-1).astype(np.float64)
    counts = np.zeros(len(limits))
    index = np.minimum(np.searchsorted(limits, d, "right"), len(limits) - 1)
    np.add.at(counts, index, 1.0)
    lo, hi, total, squares = limits[-1], -limits[-1], 0.0, 0.0
    for x in d.tolist():
        if lo > x:
            lo = x
        if hi < x:
            hi = x
        total += x
        squares += x * x
    h = HistogramProto(min=lo, max=hi, num=float(d.size), sum=total, sum_squares=squares)
    for b in range(len(limits)):
        if counts[b] or b == len(limits) - 1 or counts[b + 1]:
            h.bucket_limit.append(limits[b])
            h.bucket.append(counts[b])
    return h


def _cases():
    rng = np.random.default_rng(3)
    limits = np.array(summary_ops._BUCKET_LIMITS[1:-1])
    big = np.finfo(np.float64).max
    with np.errstate(over="ignore"):
        near32 = np.concatenate(
            [
                limits.astype(np.float32),
                np.nextafter(limits.astype(np.float32), np.float32(np.inf)),
                np.nextafter(limits.astype(np.float32), np.float32(-np.inf)),
            ]
        )
    return {
        "one": np.array([2.5], np.float32),
        "zeros +0 first": np.array([0.0, -0.0, 1.0, -0.0], np.float32),
        "zeros -0 first": np.array([-0.0, 0.0, -1.0, 0.0], np.float32),
        "only -0": np.array([-0.0, -0.0]),
        "zeros float64 big": np.where(rng.random(10_000) < 0.5, 0.0, -0.0),
        "subnormals": np.array([5e-324, -5e-324, 1e-310, -1e-310, 0.0]),
        "subnormals32": np.array([1e-45, -1e-45, 1e-40, -1e-40], np.float32),
        "huge": np.array([big, -big, 1e300, -1e300, 1e20, 3.0]),
        "huge32": np.array([3e38, -3e38, np.finfo(np.float32).max], np.float32),
        "limits64": np.concatenate([limits, np.nextafter(limits, 0), np.nextafter(limits, big)]),
        "limits32": near32,
        "int8": np.array([-128, 127, 0, 5, -5], np.int8),
        "int32": rng.integers(-(2**31), 2**31 - 1, 5_000, dtype=np.int32),
        "int64 huge": np.array([2**62, -(2**63), 2**63 - 1, 3, 0], np.int64),
        "uint64": np.array([2**64 - 1, 0, 7], np.uint64),
        "float16": rng.standard_normal(300).astype(np.float16),
        "weights32": (rng.standard_normal(33_000) * 0.05).astype(np.float32),
        "more than a chunk": rng.standard_normal(summary_ops._CHUNK + 777).astype(np.float32),
        "wide float64": np.exp(rng.uniform(-700, 700, 20_000)) * np.sign(rng.random(20_000) - 0.5),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_compiled_histogram_is_numpy_and_tf_bit_for_bit(name, numpy_path):
    values = _cases()[name]
    compiled = summary_ops.histogram_bytes(values, "h")
    assert compiled == numpy_path(summary_ops.histogram_bytes, values, "h")
    assert compiled == _tf_reference(values).SerializeToString()
    # and through the op's memo on the NumPy path (a second call uses it)
    memo = summary_ops._BucketMemo()
    for _ in range(2):
        assert numpy_path(summary_ops.histogram_bytes, values, "h", memo) == compiled


def test_empty_and_non_finite(numpy_path):
    empty = summary_ops.histogram_bytes(np.zeros(0, np.float32), "h")
    assert empty == numpy_path(summary_ops.histogram_bytes, np.zeros(0, np.float32), "h")
    for bad, kind in (
        ([1.0, np.nan, 2.0], "Nan"),
        ([np.inf, 1.0], "Infinity"),
        ([-np.inf], "Infinity"),
    ):
        for dtype in (np.float32, np.float64):
            for run in (lambda f, *a: f(*a), numpy_path):
                with pytest.raises(
                    errors.InvalidArgumentError, match=f"{kind} in summary histogram for: h"
                ):
                    run(summary_ops.histogram_bytes, np.array(bad, dtype), "h")


def test_fused_batch_compiled_is_numpy_bit_for_bit(numpy_path):
    """The fused op's batch (the MLP's six parameters' sizes, with edge values) by the
    compiled loops and by the NumPy batch; a NaN names its histogram on both."""
    rng = np.random.default_rng(5)
    sizes = (16384, 256, 32768, 128, 1280, 10)
    values = [(rng.standard_normal(n) * 0.05).astype(np.float32) for n in sizes]
    values[1][:4] = [0.0, -0.0, 1e-45, -3e38]
    values[3][:] = -0.0
    values[5][:] = np.array(summary_ops._BUCKET_LIMITS[600:610], np.float32)
    names = [f"h{k}" for k in range(len(sizes))]
    compiled = summary_ops._jit_histograms(values, names)
    numpy = numpy_path(summary_ops._batch_histograms, summary_ops._Batch(sizes), values, names)
    assert compiled == numpy
    assert compiled == [_tf_reference(v).SerializeToString() for v in values]
    values[4][77] = np.inf
    with pytest.raises(errors.InvalidArgumentError, match="Infinity in summary histogram for: h4"):
        summary_ops._jit_histograms(values, names)
    with pytest.raises(errors.InvalidArgumentError, match="Infinity in summary histogram for: h4"):
        numpy_path(summary_ops._batch_histograms, summary_ops._Batch(sizes), values, names)


def test_fused_summary_op_in_a_session(numpy_path, monkeypatch):
    """A merge of scalars and histograms (float32 parameters, an int32 and a float64
    tensor) fused into one op: the same Summary bytes step after step with the compiled
    loops and without, and TF's histograms."""
    calls = []
    batch = summary_ops._jit_histograms
    monkeypatch.setattr(summary_ops, "_jit_histograms", lambda *a: calls.append(1) or batch(*a))
    rng = np.random.default_rng(9)
    with af.Graph().as_default(), af.device("/cpu:0"):  # (the pass fuses on CPU)
        w = af.Variable((rng.standard_normal([64, 300]) * 0.05).astype(np.float32), name="w")
        b = af.Variable(np.zeros(300, np.float32), name="b")
        d = af.constant(rng.standard_normal(5000))
        i = af.constant(np.array([3, -2, 0, 7], np.int32))
        loss = af.reduce_sum(af.square(w)) + af.reduce_sum(b)
        train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        af.summary.scalar("loss", loss)
        for t, name in ((w, "w"), (b, "b"), (d, "d"), (i, "i")):
            af.summary.histogram(name, t)
        merged = af.summary.merge_all()
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for step in range(3):
                before = sess.run([w, b])
                got = sess.run(merged)
                assert got == numpy_path(sess.run, merged), step
                s = Summary.FromString(got)
                w_h, b_h, _, i_h = [v.histo for v in s.value if v.HasField("histo")]
                assert w_h == _tf_reference(before[0])
                assert b_h == _tf_reference(before[1])
                assert i_h == _tf_reference([3, -2, 0, 7])
                sess.run(train)
    assert len(calls) == 3  # (the fused op's compiled batch ran)


def test_encode_writes_each_summary_value_in_one_call():
    """summary_jit.encode: the float32 cases' HistogramProto bytes (TF's), and with tags
    each inside its Summary Value (`_histo_value_bytes`), tags of every length (an empty
    one, one past a one-byte length, non-ASCII), in one call over all of them."""
    cases = {k: v for k, v in _cases().items() if v.dtype == np.float32}
    values = [np.ascontiguousarray(v).reshape(-1) for v in cases.values()]
    table = summary_ops._jit_table(np.float32)
    histos = summary_jit.encode(values, table, summary_ops._LIMITS)
    assert histos == [_tf_reference(v).SerializeToString() for v in values]
    tags = ["", "t" * 200, "héllo/wörld"] + [f"h{k}" for k in range(len(values) - 3)]
    fields = [summary_ops._tag_field(t) for t in tags]
    wrapped = summary_jit.encode(values, table, summary_ops._LIMITS, fields)
    assert wrapped == [summary_ops._histo_value_bytes(t, h) for t, h in zip(tags, histos)]
    for t, raw, v in zip(tags, wrapped, values):
        (value,) = Summary.FromString(raw).value
        assert value.tag == t and value.histo == _tf_reference(v)


def test_encode_names_the_first_non_finite_tensor():
    ok = np.ones(5, np.float32)
    table = summary_ops._jit_table(np.float32)
    for bad, code in (([1.0, np.nan], 1), ([-np.inf, 2.0], 0), ([np.inf], 0)):
        got = summary_jit.encode([ok, np.array(bad, np.float32), ok], table, summary_ops._LIMITS)
        assert got == 2 * 1 + code
    names = ["a", "b"]
    for bad, kind in (([np.nan, -np.inf], "Nan"), ([3.0, -np.inf], "Infinity")):
        with pytest.raises(
            errors.InvalidArgumentError, match=f"{kind} in summary histogram for: b"
        ):
            summary_ops._jit_histograms([ok, np.array(bad, np.float32)], names, names)


def test_fused_float32_histograms_in_a_session(numpy_path):
    """A merge of a scalar and float32 histograms only (their Summary Values written by
    the compiled call): the same bytes with the compiled loops and without, TF's
    histograms, and an Inf named by its histogram's op."""
    rng = np.random.default_rng(11)
    with af.Graph().as_default(), af.device("/cpu:0"):
        w = af.Variable((rng.standard_normal([64, 300]) * 0.05).astype(np.float32), name="w")
        b = af.Variable(np.zeros(300, np.float32), name="b")
        x = af.placeholder(af.float32, [None])
        loss = af.reduce_sum(af.square(w)) + af.reduce_sum(b)
        train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        af.summary.scalar("loss", loss)
        for t, name in ((w, "weights"), (b, "biases"), (x, "fed")):
            af.summary.histogram(name, t)
        merged = af.summary.merge_all()
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for step in range(3):
                feed = {x: rng.standard_normal(7).astype(np.float32)}
                before = sess.run([w, b])
                got = sess.run(merged, feed)
                assert got == numpy_path(sess.run, merged, feed), step
                s = Summary.FromString(got)
                assert [v.tag for v in s.value] == ["loss", "weights", "biases", "fed"]
                assert s.value[1].histo == _tf_reference(before[0])
                assert s.value[2].histo == _tf_reference(before[1])
                assert s.value[3].histo == _tf_reference(feed[x])
                sess.run(train)
            with pytest.raises(errors.InvalidArgumentError, match="Infinity in summary histogram"):
                sess.run(merged, {x: np.array([1.0, np.inf], np.float32)})


def _sums_cases():
    """Arrays whose sums in TF's order round in every way a reordered or blocked sum
    could miss: weights, wide mixtures, values beside powers of two (squares halfway
    between doubles), tiny and subnormal values beside large ones, zeros of both signs,
    running sums that cancel and cross binades at every step."""
    rng = np.random.default_rng(17)
    n = 3000
    p2 = 2.0 ** rng.integers(-20, 20, n)
    beside = 1 + rng.choice([-1, 1], n) * 2.0 ** rng.integers(-23, -1, n)
    cases = {
        "weights": rng.uniform(-0.1, 0.1, n),
        "normal mixture": rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n),
        "powers of two": p2 * rng.choice([1.0, -1.0, 0.5, 1.5, -0.75], n),
        "beside powers of two": p2 * beside,
        "halfway squares": 1.0 + rng.integers(1, 64, n) * 2.0**-12,
        "tiny and large": np.where(rng.random(n) < 0.05, 1e-30, 1.0) * rng.standard_normal(n),
        "subnormals": rng.standard_normal(n) * 1e-39,
        "zeros": np.where(rng.random(n) < 0.9, np.where(rng.random(n) < 0.5, 0.0, -0.0), 1e-3),
        "cancelling": np.repeat(rng.standard_normal(n // 2) * 1e3, 2) * np.tile([1, -1], n // 2),
        "growing": np.cumprod(np.full(n, 1.01)) * rng.choice([-1.0, 1.0], n),
        "crossing binades": rng.standard_normal(n) * 2.0 ** (np.arange(n) % 60 - 30),
    }
    return {
        f"{name} {np.dtype(t).name}": np.asarray(v, t)
        for name, v in cases.items()
        for t in (np.float32, np.float64)
    }


def _tf_stats(values) -> tuple:
    """Histogram::Add's min, max, sum and sum of squares: min and max one value at a
    time (the first of equal values stays), the sums as NumPy's cumulative sums (one
    double addition a value, in order: TF's chains)."""
    d = np.asarray(values, np.float64)
    lo, hi = summary_ops._LIMITS[-1], -summary_ops._LIMITS[-1]
    for x in d.tolist():
        lo = x if lo > x else lo
        hi = x if hi < x else hi
    return lo, hi, np.cumsum(d)[-1], np.cumsum(d * d)[-1]


@pytest.mark.parametrize("name", list(_sums_cases()))
def test_compiled_sums_are_tf_chains(name):
    """The compiled pass's min, max, sum and sum of squares have TF's bits on arrays
    chosen to catch any reordering of the sums, in one tensor and in pieces of one call."""
    values = _sums_cases()[name]
    table = summary_ops._jit_table(values.dtype)
    for part in ([values], [values[:1], values[1:700], values[700:]]):
        stats, *_ = summary_jit.histograms(part, [table] * len(part), summary_ops._LIMITS)
        for piece, got in zip(part, stats):
            want = _tf_stats(piece)
            assert np.array(got).tobytes() == np.array(want).tobytes(), (got, want)
