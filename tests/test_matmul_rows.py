"""ops/matmul_sum.py's `merge_matmul_rows`: one layer (x @ W + b, ReLU) applied to two
batches, as a GAN's discriminator reads the real and the generated batch, runs as one
_FusedMatMulRows gemm over both batches' rows, and its weight gradient, the sum of the
two batches' products, as one gemm over both batches' rows (matmul_sum._joined_k), while
a product gets one thread (another process holds the other core): the values the two
_FusedMatMul nodes' to float32 rounding (not bitwise: OpenBLAS computes a block's last
rows with its edge kernels, and a batch's last rows are no longer last in the merged
operand), against float64 NumPy, gradients against finite differences, and the kernels'
own errors where the operands do not fit one gemm. On two free cores, and with
TF_DETERMINISTIC_OPS=1 always, the two batches' own kernels run, with their bits."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.devices import cpu_budget
from asyncflow.ops import blas, matmul_sum

needs_blas = pytest.mark.skipif(
    not blas.available(np.float32), reason="NumPy's bundled OpenBLAS not found"
)


def _plan_types(sess) -> list[str]:
    return [op.type for sp in sess._plans.values() for pl in sp.plans for op in pl.nodes]


def _two_batches(monkeypatch, rows: bool, n=96, m=(64, 48), relu=True, add="bias", dtype=None):
    """A dense layer of two placeholders' batches, its outputs and the gradients of a
    loss of both with respect to W and b: the plan's op types and the values."""
    monkeypatch.setattr(matmul_sum, "_ROWS", rows)
    monkeypatch.setattr(matmul_sum, "_JOIN_K", rows)
    dtype = dtype or np.float32
    rng = np.random.default_rng(3)
    k = 48  # (the weight gradient, [k, n], large enough for the gemm path)
    with af.Graph().as_default():
        x1 = af.placeholder(dtype, [None, k])
        x2 = af.placeholder(dtype, [None, k])
        w = af.Variable(rng.standard_normal((k, n)).astype(dtype) * 0.3)
        b = af.Variable(rng.standard_normal(n).astype(dtype) * 0.3)

        def layer(x):
            z = af.matmul(x, w)
            z = af.nn.bias_add(z, b) if add == "bias" else z + b
            return af.nn.relu(z) if relu else z

        y1, y2 = layer(x1), layer(x2)
        loss = af.reduce_sum(y1 * y1) + af.reduce_sum(af.sigmoid(y2))
        grads = af.gradients(loss, [w, b])
        feeds = {
            x1: rng.standard_normal((m[0], k)).astype(dtype),
            x2: rng.standard_normal((m[1], k)).astype(dtype),
        }
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            values = s.run([y1, y2, *grads], feeds)
            return _plan_types(s), values, (feeds[x1], feeds[x2], *s.run([w, b]))


def _count_joined(monkeypatch, threads: int, deterministic: bool = False) -> list:
    """Products on `threads` threads as the budget sees it now; the list gets "rows"
    or "k" for each merged-rows or joined-K gemm run."""
    monkeypatch.setattr(cpu_budget, "threads_now", lambda active=None: threads)
    monkeypatch.setattr(cpu_budget, "_deterministic", deterministic)
    calls = []
    rows, join = matmul_sum._rows_gemm, matmul_sum._joined_k
    monkeypatch.setattr(matmul_sum, "_rows_gemm", lambda *a: calls.append("rows") or rows(*a))
    monkeypatch.setattr(matmul_sum, "_joined_k", lambda *a: calls.append("k") or join(*a))
    return calls


@needs_blas
@pytest.mark.parametrize(("relu", "add"), [(True, "bias"), (False, "add")])
def test_one_layer_on_two_batches_on_one_thread_is_one_gemm_with_the_two_nodes_values(
    monkeypatch, relu, add
):
    calls = _count_joined(monkeypatch, threads=1)
    types, merged, (x1, x2, w, b) = _two_batches(monkeypatch, True, relu=relu, add=add)
    assert types.count("_FusedMatMulRows") == 1 and "_FusedMatMul" not in types
    assert types.count("_FusedMatMulAddN") == 1 and calls == ["rows", "k"]
    types, apart, _ = _two_batches(monkeypatch, False, relu=relu, add=add)
    assert "_FusedMatMulRows" not in types and types.count("_FusedMatMul") == 2
    assert calls == ["rows", "k"]
    for got, want in zip(merged, apart):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6 * np.abs(want).max())
    for x, y in zip((x1, x2), merged[:2]):
        ref = x.astype(np.float64) @ w + b
        ref = np.maximum(ref, 0) if relu else ref
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@needs_blas
def test_on_two_free_cores_the_two_products_run_as_before(monkeypatch):
    # Two threads for a product: each batch's own kernels (merging gained nothing there).
    calls = _count_joined(monkeypatch, threads=2)
    types, _, _ = _two_batches(monkeypatch, True)
    assert "_FusedMatMulRows" in types and calls == []


@needs_blas
def test_deterministic_ops_keep_the_unmerged_bits_whatever_the_load(monkeypatch):
    # TF_DETERMINISTIC_OPS=1: never merged, even on one thread, so the bits do not depend
    # on other processes' load: bitwise the graph without the pass.
    calls = _count_joined(monkeypatch, threads=1, deterministic=True)
    types, merged, _ = _two_batches(monkeypatch, True)
    assert "_FusedMatMulRows" in types
    _, apart, _ = _two_batches(monkeypatch, False)
    assert calls == []
    for got, want in zip(merged, apart):
        np.testing.assert_array_equal(got, want)


def test_gradients_through_the_merged_layer_against_finite_differences(monkeypatch):
    calls = _count_joined(monkeypatch, threads=1)
    types, (_, _, gw, gb), (x1, x2, w, b) = _two_batches(
        monkeypatch, True, dtype=np.float64, m=(70, 60)
    )
    assert types.count("_FusedMatMulRows") == 1 and calls == ["rows", "k"]

    def loss(w, b):
        y1 = np.maximum(x1 @ w + b, 0)
        y2 = np.maximum(x2 @ w + b, 0)
        return np.sum(y1 * y1) + np.sum(1 / (1 + np.exp(-y2)))

    eps = 1e-6
    for idx in [(0, 0), (3, 7), (39, 95), (12, 50)]:
        d = np.zeros_like(w)
        d[idx] = eps
        fd = (loss(w + d, b) - loss(w - d, b)) / (2 * eps)
        np.testing.assert_allclose(gw[idx], fd, rtol=1e-5, atol=1e-6)
    for j in (0, 41, 95):
        d = np.zeros_like(b)
        d[j] = eps
        fd = (loss(w, b + d) - loss(w, b - d)) / (2 * eps)
        np.testing.assert_allclose(gb[j], fd, rtol=1e-5, atol=1e-6)


def test_narrow_layers_and_small_batches_keep_their_own_kernels(monkeypatch):
    # A layer narrower than _ROWS_MIN_N (a discriminator's logit) is not merged; a
    # merged layer with batches too small for a gemm runs each batch's own kernel.
    calls = _count_joined(monkeypatch, threads=1)
    types, _, _ = _two_batches(monkeypatch, True, n=8)
    assert "_FusedMatMulRows" not in types
    types, small, _ = _two_batches(monkeypatch, True, m=(3, 2))
    assert types.count("_FusedMatMulRows") == 1 and calls == ["k"]
    _, apart, _ = _two_batches(monkeypatch, False, m=(3, 2))
    for got, want in zip(small[:2], apart[:2]):  # (the outputs: each batch's own kernel)
        np.testing.assert_array_equal(got, want)
    for got, want in zip(small[2:], apart[2:]):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6 * np.abs(want).max())


def test_a_batch_of_the_wrong_width_fails_as_the_layer_alone(monkeypatch):
    calls = _count_joined(monkeypatch, threads=1)
    monkeypatch.setattr(matmul_sum, "_ROWS", True)
    with af.Graph().as_default():
        x1 = af.placeholder(af.float32, [None, None])
        x2 = af.placeholder(af.float32, [None, None])
        w = af.constant(np.ones((4, 64), np.float32))
        b = af.constant(np.ones(64, np.float32))
        w, b = af.identity(w), af.identity(b)
        y1 = af.nn.relu(af.nn.bias_add(af.matmul(x1, w), b))
        y2 = af.nn.relu(af.nn.bias_add(af.matmul(x2, w), b))
        with af.Session() as s:
            ok = np.ones((128, 4), np.float32)
            got = s.run([y1, y2], {x1: ok, x2: ok})
            assert "_FusedMatMulRows" in _plan_types(s) and calls == ["rows"]
            np.testing.assert_array_equal(got[0], np.full((128, 64), 5, np.float32))
            with pytest.raises(errors.InvalidArgumentError, match="Matrix size-incompatible"):
                s.run([y1, y2], {x1: ok, x2: np.ones((128, 5), np.float32)})
