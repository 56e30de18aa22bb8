"""Two cores inside one kernel (issue 21): convolution, pooling and bias-add + ReLU
kernels split their work into fixed parts that the CPU budget's threads share
(`cpu_budget.parallel_parts`).  The parts depend on sizes only, so the result is the
same bits whether one thread or two ran them, and equals a NumPy reference; helpers
are kept off the caller's CPU."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from asyncflow.devices import cpu_budget
from asyncflow.ops import conv_ops, nn_ops, pooling_ops

_RNG = np.random.default_rng(21)


@pytest.fixture
def parts(monkeypatch):
    """Small problems split too; `threads(n)` sets how many threads share the parts.
    Our own convolution paths, not oneDNN's (whose threads are the budget's grant or,
    with none, the cores free at that moment: a filter gradient's last bits follow)."""
    monkeypatch.setattr(conv_ops, "_PART_MIN_BYTES", 0)
    monkeypatch.setattr(conv_ops, "_ONEDNN", False)

    def threads(n: int) -> None:
        monkeypatch.setattr(cpu_budget, "threads_blocks", lambda active=None: n)
        for role in ("x", "dy", "w", "wt"):  # transforms are remembered: make them again
            setattr(conv_ops._spectra, role, None)

    yield threads
    cpu_budget.restore_blas()


def _both(threads, fn):
    threads(1)
    one = fn()
    one = one.copy() if isinstance(one, np.ndarray) else one
    threads(2)
    two = fn()
    np.testing.assert_array_equal(one, two)  # the same bits, one thread or two
    return two


def _conv_ref(x, w, pad):
    """NHWC stride-1 correlation of x with w [KH, KW, C, OC], zero padding (top, left)."""
    n, h, wd, c = x.shape
    kh, kw, _, oc = w.shape
    xp = np.zeros((n, h + kh - 1, wd + kw - 1, c), np.float64)
    xp[:, pad[0] : pad[0] + h, pad[1] : pad[1] + wd] = x
    out = np.zeros((n, h, wd, oc))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,co->nhwo", xp[:, i : i + h, j : j + wd], w[i, j])
    return out


_ATTRS = dict(strides=[1, 1, 1, 1], padding="SAME", data_format="NHWC", dilations=[1, 1, 1, 1])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["fft", "cols_t", "im2col"])
def test_conv_kernels_same_bits_on_one_or_two_threads(parts, monkeypatch, method):
    if method == "fft":
        monkeypatch.setattr(conv_ops, "_FFT_MIN_MACS", 0)
        monkeypatch.setattr(conv_ops, "_FFT_MAX_RATIO", float("inf"))
    else:
        monkeypatch.setattr(conv_ops, "_FFT_MIN_MACS", float("inf"))
        monkeypatch.setattr(conv_ops, "_ROWS_MIN_K", 10**9)
        monkeypatch.setattr(conv_ops, "_COLS_T_MAX_C", 10**9 if method == "cols_t" else 0)
        monkeypatch.setattr(conv_ops, "_PER_IMAGE_MIN_ROWS", 1)
    c = 1 if method == "cols_t" else 3
    x = _RNG.standard_normal((9, 8, 7, c)).astype(np.float32)
    w = _RNG.standard_normal((3, 3, c, 5)).astype(np.float32)
    dy = _RNG.standard_normal((9, 8, 7, 5)).astype(np.float32)
    g = conv_ops._Geom(_ATTRS, x.shape, w.shape)
    assert len(g.batch_parts(np, 4)) > 1 and len(conv_ops._parts(np, 9, 1)) > 1
    f32 = np.float32
    y = _both(parts, lambda: conv_ops._conv2d_forward(np, g, x, w, "NHWC", f32))
    np.testing.assert_allclose(y, _conv_ref(x, w, (1, 1)), rtol=1e-4, atol=1e-4)
    dx = _both(parts, lambda: conv_ops._conv2d_backprop_input(np, g, w, dy, "NHWC", f32))
    wf = w[::-1, ::-1].transpose(0, 1, 3, 2)
    np.testing.assert_allclose(dx, _conv_ref(dy, wf, (1, 1)), rtol=1e-4, atol=1e-4)
    dw = _both(parts, lambda: conv_ops._conv2d_backprop_filter(np, g, x, dy, "NHWC", f32))
    xpad = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.stack(
        [
            np.stack([np.einsum("nhwc,nhwo->co", xpad[:, i : i + 8, j : j + 7], dy)
                      for j in range(3)])
            for i in range(3)
        ]
    )  # fmt: skip
    np.testing.assert_allclose(dw, ref, rtol=1e-4, atol=1e-3)


def _pool(x):
    attrs = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID", data_format="NHWC")
    return pooling_ops._Pool(attrs, x.shape)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("relu", [False, True])
def test_max_pool_and_grad_same_bits_on_one_or_two_threads(parts, relu):
    x = _RNG.standard_normal((10, 6, 8, 4)).astype(np.float32)
    x[3] = np.round(x[3])  # ties in some images only: those parts take the general path
    x[5, 0, 0, 0] = np.nan
    p = _pool(x)
    y = _both(parts, lambda: pooling_ops._max_pool(np, p, x, "NHWC"))
    win = x.reshape(10, 3, 2, 4, 2, 4)
    np.testing.assert_array_equal(y, np.max(win, axis=(2, 4)))  # NaN propagates, as TF
    dy = _RNG.standard_normal(y.shape).astype(np.float32)
    dx = _both(parts, lambda: pooling_ops._max_pool_grad(np, p, x, y, dy, "NHWC", relu))
    # reference: each window's gradient to its first maximum (row-major; a NaN max: the
    # window's first position), masked by y > 0 with relu
    ref = np.zeros_like(x)
    for n, i, j, c in np.ndindex(y.shape):
        w = x[n, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2, c].ravel()
        k = 0 if np.isnan(y[n, i, j, c]) else int(np.flatnonzero(w == y[n, i, j, c])[0])
        g = dy[n, i, j, c] * (y[n, i, j, c] > 0) if relu else dy[n, i, j, c]
        ref[n, 2 * i + k // 2, 2 * j + k % 2, c] = g
    np.testing.assert_array_equal(dx, ref)


@pytest.mark.timeout(60)
def test_bias_add_relu_same_bits_on_one_or_two_threads(parts, monkeypatch):
    monkeypatch.setattr(nn_ops, "_ADD_RELU_BLOCK", 1024)  # several blocks a part
    v = _RNG.standard_normal((16, 12, 12, 8)).astype(np.float32)
    b = _RNG.standard_normal(8).astype(np.float32)
    out = _both(parts, lambda: nn_ops._add_relu_blocked(v, b, np.empty_like(v)))
    np.testing.assert_array_equal(out, np.maximum(v + b, 0))


@pytest.mark.timeout(60)
def test_conv_bias_relu_same_bits_on_one_or_two_threads(parts):
    from asyncflow.ops import cnn_jit

    if not cnn_jit.warm_conv(3, 2, 1, 5):
        pytest.skip("numba is not installed")
    x = _RNG.standard_normal((9, 7, 6, 1)).astype(np.float32)
    w = _RNG.standard_normal((3, 2, 1, 5)).astype(np.float32)
    b = _RNG.standard_normal(5).astype(np.float32)
    g = conv_ops._Geom(_ATTRS, x.shape, w.shape)
    fn = cnn_jit.conv_bias_relu(3, 2, 1, 5)
    out = _both(parts, lambda: nn_ops._conv_bias_relu(fn, g, x, w, b))
    ref = np.maximum(_conv_ref(x, w, (1, 0)) + b, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("threads", [1, 2])
def test_each_part_calls_blas_on_one_thread_however_many_run_them(monkeypatch, threads):
    # The parts' bits must not depend on how many threads ran them: their BLAS calls
    # on one thread, also when one thread runs them all after a call that left BLAS on
    # two (found as a conv filter gradient's spectral parts differing in the last bits
    # between one and two threads in CI, after another test's call chose two).
    if not cpu_budget.manages_blas():
        pytest.skip("no BLAS whose threads the budget sets")
    monkeypatch.setattr(cpu_budget, "threads_blocks", lambda active=None: threads)
    cpu_budget._blas_threads(2)
    seen = []
    cpu_budget.parallel_parts(4, lambda i: seen.append(cpu_budget._lib_now))
    assert seen == [1, 1, 1, 1]
    cpu_budget._blas_threads(2)
    cpu_budget.parallel_parts(1, lambda i: seen.append(cpu_budget._lib_now))
    assert seen[-1] == 2  # (one part: the threads its kernel was granted)
    cpu_budget.restore_blas()


@pytest.mark.timeout(60)
def test_parallel_parts_runs_each_part_once_and_raises_the_first_error(monkeypatch):
    monkeypatch.setattr(cpu_budget, "threads_blocks", lambda active=None: 2)
    seen = []
    lock = threading.Lock()

    def part(i):
        with lock:
            seen.append(i)

    cpu_budget.parallel_parts(7, part)
    assert sorted(seen) == list(range(7))

    def failing(i):
        if i == 3:
            raise ValueError("part 3")

    with pytest.raises(ValueError, match="part 3"):
        cpu_budget.parallel_parts(7, failing)
    cpu_budget.restore_blas()


@pytest.mark.timeout(60)
@pytest.mark.skipif(
    cpu_budget._getcpu is None or len(cpu_budget._cpus) < 2,
    reason="needs sched_getcpu and two CPUs",
)
def test_helpers_are_woken_off_the_callers_cpu_then_free_to_move():
    where = {}

    def block(start, stop):
        if threading.current_thread().name == "asyncflow-intra-op":
            where["helper"] = os.sched_getaffinity(0)

    for _ in range(20):  # until a helper took a block (the caller may take them all)
        cpu_budget.parallel_for(64, block, min_block=1, threads=2, per_thread=32)
        if "helper" in where:
            break
    assert cpu_budget._helper_tids
    if "helper" in where:  # once running, a helper may go anywhere again
        assert where["helper"] == cpu_budget._cpus
    cpu = min(cpu_budget._cpus)
    with cpu_budget._queue_cond:  # what an offer does before it wakes them
        cpu_budget._keep_helpers_off(cpu)
        for tid in cpu_budget._helper_tids:
            assert os.sched_getaffinity(tid) == cpu_budget._cpus - {cpu}
    cpu_budget.parallel_for(64, block, min_block=1, threads=2, per_thread=32)
