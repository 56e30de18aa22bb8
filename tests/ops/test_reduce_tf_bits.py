"""Sum, Mean and BiasAddGrad give TF 2.21's CPU bits (ops/eigen_reduce: Eigen's order of
additions): its NumPy forms and its compiled loops over every recorded case (1-D lengths
around the packet and leaf sizes, 2-D over either axis or both, 3-D and 4-D middle axes,
keep_dims, NHWC and NCHW, float16/32/64 and bfloat16, 1, 2 and 4 intra-op threads), the
ops in a session, and a fused program's SumTo.  TF's outputs come from
tests/fixtures/record_reduce_tf.py."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph_passes
from asyncflow.ops import eigen_reduce, eigen_reduce_jit, fused_elementwise

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"


def _recorder():
    # (the recorder's input generator: the recorder imports TensorFlow only when run)
    spec = importlib.util.spec_from_file_location(
        "record_reduce_tf", FIXTURES / "record_reduce_tf.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cases():
    values = _recorder().values
    out, inputs = [], {}
    with np.load(FIXTURES / "reduce_tf.npz", allow_pickle=False) as data:
        for j, line in enumerate(data["cases"].tolist()):
            case = json.loads(line)
            dtype = eigen_reduce._BF16 if case["dtype"] == "bfloat16" else np.dtype(case["dtype"])
            if dtype is None:
                continue  # (no ml_dtypes)
            key = (case["seed"], case["dtype"])  # (each thread count's cases share inputs)
            if key not in inputs:
                x = values(int(np.prod(case["shape"])), case["seed"])
                if case["dtype"] == "bfloat16":  # (as the recorder: through float32)
                    x = x.astype(np.float32)
                x = x.astype(dtype)
                assert np.float64(x.astype(np.float64).sum()) == data[f"check{j}"]  # TF's
                inputs[key] = x.reshape(case["shape"])
            out.append((case, inputs[key], data[f"out{j}"]))
    return out


def _assert_bits(got, want, case):
    got = np.asarray(got)
    if case["dtype"] == "bfloat16":
        got = got.view(np.uint16)
    assert got.dtype == want.dtype and got.shape == want.shape, case
    bits = f"u{want.itemsize}"
    bad = np.flatnonzero(got.reshape(-1).view(bits) != want.reshape(-1).view(bits))
    assert bad.size == 0, f"{case}: {bad.size} values differ from TF's, first at {bad[:5]}"


def _run_direct(case, x):
    if case["op"] == "BiasAddGrad":
        return eigen_reduce.bias_add_grad(x, case["format"] == "NCHW", case["threads"])
    axes = tuple(sorted(a % x.ndim for a in case["axes"]))
    fn = eigen_reduce.reduce_sum if case["op"] == "Sum" else eigen_reduce.reduce_mean
    out = fn(x, axes, case["threads"])
    if case["keep"]:
        out = out.reshape([1 if i in axes else d for i, d in enumerate(x.shape)])
    return out


def test_numpy_forms_give_tfs_bits(cases, monkeypatch):
    monkeypatch.setattr(eigen_reduce, "_LOOPS", None)
    monkeypatch.setattr(eigen_reduce_jit, "loops", lambda: None)
    for case, x, want in cases:
        _assert_bits(_run_direct(case, x), want, case)


def test_compiled_loops_give_tfs_bits(cases):
    if not eigen_reduce_jit.warm():
        pytest.skip("numba is not installed")
    assert eigen_reduce._loops() is not None
    for case, x, want in cases:
        if x.dtype in (np.float32, np.float64):  # (16-bit types keep the NumPy forms)
            _assert_bits(_run_direct(case, x), want, case)


def _session_cases(cases, threads):
    picked = []
    for case, x, want in cases:
        if case["threads"] != threads or case["dtype"] not in ("float32", "float64"):
            continue
        if case["op"] == "BiasAddGrad" or x.size >= 100000 or case["keep"] or x.ndim > 2:
            picked.append((case, x, want))
    return picked


@pytest.mark.parametrize("threads", [1, 2])
def test_the_ops_in_a_session_give_tfs_bits(cases, threads):
    # The kernels read the session's intra-op thread count, as TF's split their work by it.
    config = tf.ConfigProto(intra_op_parallelism_threads=threads)
    picked = _session_cases(cases, threads)
    assert len(picked) > 20
    with tf.Graph().as_default(), tf.device("/cpu:0"):  # (CPU kernels: TF's CPU bits)
        feeds, fetches = {}, []
        for case, x, _ in picked:
            p = tf.placeholder(x.dtype, x.shape)
            feeds[p] = x
            if case["op"] == "BiasAddGrad":
                fetches.append(tf.raw_ops.BiasAddGrad(out_backprop=p, data_format=case["format"]))
            else:
                fn = tf.reduce_sum if case["op"] == "Sum" else tf.reduce_mean
                fetches.append(fn(p, axis=case["axes"], keepdims=case["keep"]))
        with tf.Session(config=config) as sess:
            got = sess.run(fetches, feeds)
    for (case, _, want), g in zip(picked, got):
        _assert_bits(g, want, case)


def test_a_fused_sum_to_gives_the_sum_ops_bits(monkeypatch):
    # The bias gradient of tanh(x + b) * x over an unknown batch is a SumTo of the fused
    # backward program: it sums with the Sum kernel's function (NumPy's own sum of
    # [128, 784] over the batch differs from TF's in hundreds of the 784 values).
    values = _recorder().values
    x_v = values(128 * 784, 7).astype(np.float32).reshape(128, 784)
    b_v = values(784, 8).astype(np.float32)
    calls = []
    real = eigen_reduce.reduce_sum

    def spy(x, axes, threads, out=None):
        calls.append(out is not None)
        return real(x, axes, threads, out)

    monkeypatch.setattr(eigen_reduce, "reduce_sum", spy)
    results = []
    for fuse in (True, False):
        if not fuse:
            passes = [
                r for r in graph_passes.GRAPH_PASSES if r is not fused_elementwise.fuse_elementwise
            ]
            monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)
        calls.clear()
        with tf.Graph().as_default(), tf.device("/cpu:0"):  # (the CPU's fusion)
            x = tf.placeholder(tf.float32, [None, 784])
            b = tf.placeholder(tf.float32, [None])  # (unknown: a SumTo of the program)
            y = tf.tanh(x + b) * x
            (gb,) = tf.gradients(tf.reduce_sum(y * y), [b])
            with tf.Session() as sess:
                results.append(sess.run(gb, {x: x_v, b: b_v}))
        assert calls and any(calls) == fuse  # (fused: the SumTo's sum, into its buffer)
    fused, plain = results
    np.testing.assert_array_equal(fused.view(np.uint32), plain.view(np.uint32))
