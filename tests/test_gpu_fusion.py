"""Element-wise fusion on a GPU: the stand-in's `cupy.fuse` (devices/fake_fusion.py), the
GPU kernel of `_FusedElementwise` (ops/fused_elementwise_gpu.py) and the kernel launches
an MLP training step asks of the device (the stand-in counts them, as CUDA would see
them: views and allocations launch nothing, a fused function launches once).

Every graph runs twice, on GPU:0 and on the CPU (NumPy), and must give the same numbers.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.devices import fake_cupy, fake_fusion

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _device(values, dtype=np.float32):
    xp = fake_cupy.module
    with fake_cupy.cuda.Device(0):
        return [xp.asarray(np.asarray(v, dtype)) for v in values]


# -- the stand-in's cupy.fuse -----------------------------------------------------------


def test_fuse_is_one_launch_with_numpys_numbers(fake_gpu):
    xp = fake_cupy.module
    x0 = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    b0 = np.arange(4, dtype=np.float32)
    x, b = _device([x0, b0])

    @xp.fuse(kernel_name="bias_relu_sigmoid")
    def f(x, b, one):
        h = xp.maximum(xp.add(x, b), np.float32(0))
        return h, xp.reciprocal(xp.add(xp.exp(-h), one))

    with fake_cupy.cuda.Device(0):
        fake_cupy.reset_launches()
        h, s = f(x, b, np.float32(1))
        assert fake_cupy.launches(0)["kernels"] == 1
        xp.add(x, b)  # unfused: one launch per ufunc
        assert fake_cupy.launches(0)["kernels"] == 2
        h, s = xp.asnumpy(h), xp.asnumpy(s)
    want = np.maximum(x0 + b0, 0)
    np.testing.assert_array_equal(h, want)
    np.testing.assert_array_equal(s, 1 / (np.exp(-want) + np.float32(1)))
    assert s.dtype == np.float32


def test_fuse_outputs_take_the_broadcast_shape_and_out_writes_an_argument(fake_gpu):
    xp = fake_cupy.module
    v, g, lr = _device([np.ones((2, 3)), np.full((2, 3), 2.0), 0.5])
    with fake_cupy.cuda.Device(0):
        (only_lr,) = xp.fuse(lambda v, lr: (lr * np.float32(2),))(v, lr)
        assert only_lr.shape == (2, 3)  # as an ElementwiseKernel's outputs
        xp.fuse(lambda v, g, lr: xp.subtract(v, g * lr, out=v))(v, g, lr)
        np.testing.assert_array_equal(xp.asnumpy(v), np.zeros((2, 3)))


@pytest.mark.parametrize(
    "body",
    [
        lambda xp, x: x[0],  # indexing
        lambda xp, x: x.shape,  # a traced value's shape
        lambda xp, x: x if x > 0 else -x,  # control flow on a value
        lambda xp, x: xp.sum(x),  # a reduction (CuPy fuses one, at the end only)
        lambda xp, x: xp.matmul(x, x),  # not element-wise
        lambda xp, x: x * np.float64(2),  # NumPy promotes, CuPy's fusion does not
        lambda xp, x: xp.add(x, x, dtype=np.float64),  # keyword arguments
    ],
)
def test_fuse_refuses_what_cupys_fusion_refuses(fake_gpu, body):
    xp = fake_cupy.module
    (x,) = _device([np.ones(3)])
    with fake_cupy.cuda.Device(0), pytest.raises(fake_fusion.FusionError):
        xp.fuse(lambda x: body(xp, x))(x)


def test_fuse_refuses_host_arrays_and_unsynchronised_operands(fake_gpu):
    xp = fake_cupy.module
    (x,) = _device([np.ones(3)])
    f = xp.fuse(lambda a, b: a + b)
    with fake_cupy.cuda.Device(0):
        with pytest.raises(fake_cupy.HostArrayError):
            f(x, np.ones(3, np.float32))
        other = fake_cupy.cuda.Stream(non_blocking=True)
        with other:
            y = xp.asarray(np.ones(3, np.float32))  # made on another stream, no event
        with pytest.raises(fake_cupy.UnsynchronizedAccessError):
            f(x, y)


# -- _FusedElementwise on GPU:0 ---------------------------------------------------------


def _run_both(build, feeds_np):
    """Values of build()'s fetches on GPU:0 and on the CPU, and the GPU step's launches."""
    got = {}
    for where in ("gpu", "cpu"):
        g = af.Graph()
        with g.as_default():
            fetches, feeds = build()
        config = None if where == "gpu" else af.ConfigProto(device_count={"GPU": 0})
        with af.Session(graph=g, config=config) as s:
            feed = dict(zip(feeds, feeds_np))
            s.run(fetches, feed)  # (constants reach the device once)
            fake_cupy.reset_launches()
            got[where] = s.run(fetches, feed)
            if where == "gpu":
                launches = fake_cupy.launches()
                fused = [
                    op.type for sp in s._plans.values() for pl in sp.plans for op in pl.nodes
                ].count("_FusedElementwise")
    return got["gpu"], got["cpu"], launches, fused


def test_an_activation_chain_is_one_kernel_with_the_cpus_numbers(fake_gpu):
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((8, 16)).astype(np.float32)

    def build():
        x = af.placeholder(af.float32, [8, 16])
        b = af.constant(np.linspace(-1, 1, 16, dtype=np.float32))
        h = af.nn.relu(af.nn.bias_add(x, b))
        y = af.sigmoid(h) * af.tanh(x) - af.nn.softplus(x) + af.square(x - h) * 0.5
        return [y], [x]

    gpu, cpu, launches, fused = _run_both(build, [x0])
    assert fused == 1
    assert launches["kernels"] == 1  # the whole expression
    np.testing.assert_allclose(gpu[0], cpu[0], rtol=1e-6, atol=1e-6)


def test_gradients_reduced_over_broadcast_axes(fake_gpu):
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((6, 5)).astype(np.float64)
    y0 = rng.standard_normal((1, 5)).astype(np.float64)

    def build():
        x = af.placeholder(af.float64, [6, 5])
        y = af.placeholder(af.float64, [1, 5])
        z = af.tanh(x * y + x) * af.sigmoid(y - x)
        loss = af.reduce_sum(z * z)
        return af.gradients(loss, [x, y]) + [z], [x, y]

    gpu, cpu, launches, fused = _run_both(build, [x0, y0])
    assert fused >= 1
    for a, b in zip(gpu, cpu):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_shape_errors_are_the_ops_own(fake_gpu):
    def build():
        x = af.placeholder(af.float32, [None, None])
        y = af.placeholder(af.float32, [None, None])
        return [af.nn.relu(x + y) * 2.0], [x, y]

    with pytest.raises(errors.InvalidArgumentError, match="Incompatible shapes"):
        _run_both(build, [np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)])


def _within_half_ulps(a, b, steps=1):
    """float16 arrays equal but for values `steps` apart at most: the CPU's Sigmoid and
    Softplus of half values are TF's CPU functions (ops.elementwise: each operation
    rounded to half, on TF's exp and log), the GPU's their float32 formulas rounded
    once (as TF's GPU kernels differ from its CPU ones)."""
    ia, ib = a.view(np.int16).astype(np.int32), b.view(np.int16).astype(np.int32)
    assert np.abs(ia - ib).max(initial=0) <= steps, (a, b)


def test_float16_programs_are_one_kernel_with_the_cpus_numbers(fake_gpu):
    """float16 between ops as on the CPU (each op rounds); the activations and their
    gradients computed in float32 and rounded once, as ops.elementwise does for the GPU
    (the CPU's Sigmoid and Softplus: TF's CPU functions, `_within_half_ulps`; a
    difference carried through the later operations may grow to two steps, and more
    in the gradient)."""
    x0 = np.linspace(-4, 4, 32, dtype=np.float16).reshape(4, 8)

    def build():
        x = af.placeholder(af.float16, [4, 8])
        y = af.sigmoid(x) * af.tanh(x) + af.nn.softplus(x) * x - af.square(x - 0.3)
        (dx,) = af.gradients(af.reduce_sum(af.sigmoid(y) * af.tanh(y)), [x])
        return [y, dx], [x]

    gpu, cpu, launches, fused = _run_both(build, [x0])
    assert fused >= 1
    assert all(a.dtype == np.float16 for a in (*gpu, *cpu))
    _within_half_ulps(gpu[0], cpu[0], steps=2)
    # (the gradient amplifies those steps where its terms cancel: ~1% at 7e-3)
    np.testing.assert_allclose(gpu[1], cpu[1], rtol=2e-2, atol=1e-4)


def test_a_float16_chain_is_one_launch(fake_gpu):
    x0 = np.linspace(-4, 4, 32, dtype=np.float16).reshape(4, 8)

    def build():
        x = af.placeholder(af.float16, [4, 8])
        return [af.sigmoid(x) * af.tanh(x) + x], [x]

    gpu, cpu, launches, fused = _run_both(build, [x0])
    assert fused == 1 and launches["kernels"] == 1
    _within_half_ulps(gpu[0], cpu[0])


# -- an MLP training step ---------------------------------------------------------------


def _mlp(sizes=(32, 24, 24, 5), batch=16):
    rng = np.random.default_rng(2)
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [batch, sizes[0]])
        y = af.placeholder(af.int32, [batch])
        h = x
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            w = af.Variable((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32))
            bias = af.Variable(np.full(b, 0.1, np.float32))
            h = af.matmul(h, w) + bias
            if i < len(sizes) - 2:
                h = af.nn.relu(h)
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = af.global_variables_initializer()
    xs = rng.standard_normal((4, batch, sizes[0])).astype(np.float32)
    ys = rng.integers(0, sizes[-1], (4, batch)).astype(np.int32)
    return g, x, y, loss, train, init, xs, ys


def mlp_step_launches(config=None) -> tuple[dict, list]:
    """Launches of one MLP training step (after a first), and the losses of 4 steps."""
    g, x, y, loss, train, init, xs, ys = _mlp()
    losses = []
    with af.Session(graph=g, config=config) as s:
        s.run(init)
        for i in range(4):
            if i == 1:
                fake_cupy.reset_launches()
            losses.append(float(s.run([loss, train], {x: xs[i], y: ys[i]})[0]))
            if i == 1:
                launches = fake_cupy.launches()
    return launches, losses


def test_mlp_step_launches_and_numbers(fake_gpu):
    launches, gpu_losses = mlp_step_launches()
    _, cpu_losses = mlp_step_launches(af.ConfigProto(device_count={"GPU": 0}))
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-5)
    # Two feeds in, the loss out (no host check of the labels); the kernels: 3 + 5
    # MatMuls, one fused kernel per bias+relu and per relu gradient, the last bias add,
    # 7 for the cross-entropy, the loss's mean and its gradient's scalars, 3 bias
    # gradients' sums, one fused update per variable (in place: no copy first).
    # A hand-written CuPy step (benchmarks/gpu_check.py) makes 48.
    assert launches["h2d"] == 2 and launches["d2h"] == 1, launches
    assert launches["kernels"] <= 34, launches


# -- variables on the GPU: updated in place when nothing else holds the buffer ---------


def test_gpu_variable_updates_in_place_unless_a_read_is_alive(fake_gpu):
    g = af.Graph()
    with g.as_default():
        v = af.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
        delta = af.placeholder(af.float32, [2, 3])
        update = af.train.GradientDescentOptimizer(1.0).apply_gradients([(delta, v)])
        with af.control_dependencies([v.read_value()]):
            read = af.identity(v.read_value())
        with af.control_dependencies([read]):
            read_then_update = af.train.GradientDescentOptimizer(1.0).apply_gradients([(delta, v)])
    ones = np.ones((2, 3), np.float32)
    with af.Session(graph=g) as s:
        s.run(v.initializer)
        s.run(update, {delta: ones})
        fake_cupy.reset_launches()
        s.run(update, {delta: ones})
        assert fake_cupy.launches()["kernels"] == 1  # the fused update, no copy first
        before = s.run(v)
        got, _ = s.run([read, read_then_update], {delta: ones})
        np.testing.assert_array_equal(got, before)  # the read kept its value
        np.testing.assert_array_equal(s.run(v), before - 1)
        held = s.run(v)  # a fetched value never changes afterwards
        s.run(update, {delta: ones})
        np.testing.assert_array_equal(held, before - 1)


@pytest.mark.parametrize(
    "build",
    [
        lambda x, y: af.sigmoid(x),
        lambda x, y: af.nn.softplus(x),
        lambda x, y: af.math.rsqrt(af.abs(x) + 0.5),
        lambda x, y: af.math.squared_difference(x, y),
        lambda x, y: af.gradients(af.reduce_sum(af.nn.relu(x) * y), [x])[0],
        lambda x, y: af.gradients(af.reduce_sum(af.tanh(x) * y), [x])[0],
        lambda x, y: af.gradients(af.reduce_sum(af.sigmoid(x) * y), [x])[0],
        lambda x, y: af.gradients(af.reduce_sum(af.nn.softplus(x) * y), [x])[0],
    ],
)
def test_lone_activations_and_gradients_on_the_gpu_match_the_cpu(fake_gpu, build):
    rng = np.random.default_rng(3)
    x0, y0 = rng.standard_normal((2, 5, 7))

    def graph():
        x = af.placeholder(af.float64, [5, 7])
        y = af.placeholder(af.float64, [5, 7])
        return [build(x, y)], [x, y]

    gpu, cpu, launches, _ = _run_both(graph, [x0, y0])
    np.testing.assert_allclose(gpu[0], cpu[0], rtol=1e-14, atol=1e-14)


def test_a_lone_relu_gradient_is_one_launch(fake_gpu):
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [4, 6])
        dy = af.placeholder(af.float32, [4, 6])
        grad = af.gradients(af.nn.relu(x), [x], [dy])[0]
    feed = {x: np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6), dy: np.ones((4, 6))}
    with af.Session(graph=g) as s:
        s.run(grad, feed)
        fake_cupy.reset_launches()
        got = s.run(grad, feed)
        assert fake_cupy.launches()["kernels"] == 1
    np.testing.assert_array_equal(got, (feed[x] > 0).astype(np.float32))


def test_max_pool_gradient_reads_nothing_back_on_the_loop(fake_gpu):
    """MaxPoolGrad chose its formula by reading dy's finiteness on the host: on a GPU a
    blocking read in every training step.  It computes where(hit, dy, 0) there now."""
    rng = np.random.default_rng(4)
    x0 = rng.standard_normal((2, 4, 6, 3)).astype(np.float32)
    dy0 = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    dy0[0, 0, 0, 0] = np.inf

    def build():
        x = af.placeholder(af.float32, [2, 4, 6, 3])
        dy = af.placeholder(af.float32, [2, 2, 3, 3])
        y = af.nn.max_pool(x, [1, 3, 3, 1], [1, 1, 1, 1], "SAME")  # (not tiles)
        g_tiles = af.gradients(af.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"), [x], [dy])
        g_other = af.gradients(y, [x], [af.ones_like(y)])
        return g_tiles + g_other, [x, dy]

    gpu, cpu, launches, _ = _run_both(build, [x0, dy0])
    assert launches["sync"] == 0
    for a, b in zip(gpu, cpu):
        np.testing.assert_array_equal(a, b)


def test_gpu_variable_lends_through_owned_memory_and_views_keep_the_lease(fake_gpu):
    """A device read is an array over the variable's memory owned by a lease
    (cuda.UnownedMemory): while it or any view of it lives, an update copies; once all
    are gone, the update writes in place."""
    from asyncflow.ops import state_ops

    xp = fake_cupy.module
    with fake_cupy.cuda.Device(0):
        ref = state_ops.VarRef(af.float32, name="v")
        ref.assign(xp.asarray(np.arange(6, dtype=np.float32)), True, xp)
        buf = ref.value
        lent = ref.read()
        assert lent is not buf and lent.data.ptr == buf.data.ptr
        view = lent.reshape(2, 3)[1:]  # a view: holds `lent`, hence the lease
        del lent
        ref.apply_ufunc("add", xp.ones(6, np.float32), xp)
        assert ref.value is not buf  # copied: a view of the lent value is alive
        np.testing.assert_array_equal(xp.asnumpy(view), [[3, 4, 5]])
        del view
        buf = ref.value
        ref.apply_ufunc("add", xp.ones(6, np.float32), xp)
        assert ref.value is buf  # nothing lent is alive: in place
        np.testing.assert_array_equal(xp.asnumpy(ref.read()), np.arange(6) + 2)


def test_the_stand_in_refuses_memory_it_did_not_hand_out(fake_gpu):
    xp = fake_cupy.module
    with fake_cupy.cuda.Device(0):
        a = xp.asarray(np.zeros(4, np.float32))
        with pytest.raises(ValueError, match="not a live device allocation"):
            fake_cupy.cuda.UnownedMemory(12345, 16, object())
        with pytest.raises(ValueError, match="past their allocation"):
            fake_cupy.cuda.UnownedMemory(a.data.ptr, 32, object())
        mem = fake_cupy.cuda.UnownedMemory(a.data.ptr, 16, object())
        with pytest.raises(ValueError, match="past the end"):
            xp.ndarray((8,), np.float32, fake_cupy.cuda.MemoryPointer(mem, 0))
