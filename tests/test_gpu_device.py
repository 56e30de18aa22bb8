"""GPU devices (devices/gpu.py) on the strict CuPy stand-in (devices/fake_cupy.py).

Every test turns the stand-in on for itself (`fake_gpus`), so the suite never needs
ASYNCFLOW_FAKE_GPUS globally.  The GPU device's own code runs: kernels enqueued on the
compute stream, copies through pinned staging on the copy streams ordered with events,
completion learned through stream host callbacks.  The stand-in fails any read that is
not ordered after its producer, so the tests below also prove that a removed
synchronisation is caught.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from test_device_generic import CASES

import asyncflow as af
from asyncflow import device_lib, errors
from asyncflow.devices import fake_cupy, gpu

pytestmark = pytest.mark.timeout(60)

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


@pytest.fixture
def fake_gpus(monkeypatch):
    def turn_on(n=1):
        monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", str(n))
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    turn_on(1)
    return turn_on


@pytest.fixture
def no_gpus(monkeypatch):
    monkeypatch.delenv("ASYNCFLOW_FAKE_GPUS", raising=False)
    if gpu.backend() is not None:  # pragma: no cover - a machine with CuPy and a GPU
        pytest.skip("this machine has a real GPU")


def _cpu_config():
    return af.ConfigProto(device_count={"GPU": 0})


def _soft(**kw):
    return af.ConfigProto(allow_soft_placement=True, **kw)


# -- devices, names, listing ------------------------------------------------------------


def test_fake_gpus_are_listed_after_the_cpu(fake_gpus):
    fake_gpus(2)
    with af.Session(graph=af.Graph()) as sess:
        names = [d.name for d in sess.list_devices()]
    assert names == [
        "/job:localhost/replica:0/task:0/device:CPU:0",
        GPU0,
        "/job:localhost/replica:0/task:0/device:GPU:1",
    ]
    devs = device_lib.list_local_devices()
    gpus = [d for d in devs if d.device_type == "GPU"]
    assert [d.name for d in gpus] == names[1:]
    assert all(d.memory_limit > 0 for d in gpus)
    assert "compute capability" in gpus[0].physical_device_desc
    assert af.test.is_gpu_available() and af.test.gpu_device_name() == "/device:GPU:0"


def test_visible_device_list_and_cuda_visible_devices(fake_gpus, monkeypatch):
    fake_gpus(3)
    cfg = af.ConfigProto()
    cfg.gpu_options.visible_device_list = "2,0"
    with af.Session(graph=af.Graph(), config=cfg) as sess:
        gpus = [d for d in sess.list_devices() if d.device_type == "GPU"]
    assert [d.name.rsplit(":", 1)[-1] for d in gpus] == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with af.Session(graph=af.Graph()) as sess:
        assert [d.device_type for d in sess.list_devices()] == ["CPU", "GPU"]
    cfg.gpu_options.visible_device_list = "5"
    with pytest.raises(errors.InvalidArgumentError, match="visible_device_list"):
        af.Session(graph=af.Graph(), config=cfg).list_devices()


def test_memory_fraction_sets_the_limit(fake_gpus):
    cfg = af.ConfigProto()
    cfg.gpu_options.per_process_gpu_memory_fraction = 0.25
    (g,) = [d for d in device_lib.list_local_devices(cfg) if d.device_type == "GPU"]
    assert g.memory_limit == fake_cupy.DEFAULT_MEMORY // 4


def test_without_cupy_there_is_no_gpu_and_asking_for_one_says_why(no_gpus):
    assert not af.test.is_gpu_available()
    assert af.test.gpu_device_name() == ""
    g = af.Graph()
    with g.as_default():
        with af.device("/gpu:0"):
            y = af.constant([1.0, 2.0]) * 2.0
    with af.Session(graph=g) as sess:
        assert [d.device_type for d in sess.list_devices()] == ["CPU"]
        with pytest.raises(errors.InvalidArgumentError, match="CuPy"):
            sess.run(y)
    with af.Session(graph=g, config=_soft()) as sess:  # soft placement: CPU, as TF
        np.testing.assert_allclose(sess.run(y), [2.0, 4.0])


# -- placement --------------------------------------------------------------------------


def test_ops_with_gpu_kernels_go_to_gpu0_and_the_rest_to_cpu(fake_gpus, placement_log):
    fake_gpus(2)
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 2], name="x")
        y = af.nn.relu(af.matmul(x, af.constant([[1.0, -1.0], [2.0, 0.5]]), name="mm"))
        s = af.strings.as_string(af.reduce_sum(y), name="str")  # string op: CPU only
    cfg = af.ConfigProto(allow_soft_placement=True, log_device_placement=True)
    with af.Session(graph=g, config=cfg) as sess:
        got_y, got_s = sess.run([y, s], {x: np.array([[1.0, 2.0]], np.float32)})
    np.testing.assert_allclose(got_y, [[5.0, 0.0]])
    assert got_s == b"5.000000"
    err = placement_log()
    assert f"mm: (MatMul): {GPU0}\n" in err
    assert "str: (AsString): /job:localhost/replica:0/task:0/device:CPU:0\n" in err


def test_explicit_gpu1_and_a_missing_kernel_without_soft_placement(fake_gpus):
    fake_gpus(2)
    g = af.Graph()
    with g.as_default():
        with af.device("/gpu:1"):
            y = af.square(af.constant([3.0]), name="sq")
            s = af.strings.as_string(y, name="str")
    with af.Session(graph=g, config=_soft(log_device_placement=False)) as sess:
        assert sess.run(y)[0] == 9.0
    with af.Session(graph=g) as sess:
        with pytest.raises(errors.InvalidArgumentError, match="GPU"):
            sess.run(s)


# -- the op table on the fake GPU against CPU -------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_table_on_the_fake_gpu_matches_cpu(case, fake_gpus):
    graph = af.Graph()
    with graph.as_default():
        fetches, feeds = CASES[case]()
        fetches = [t for t in fetches if t is not None]
    with af.Session(graph=graph, config=_cpu_config()) as sess:
        want = sess.run(fetches, feeds)
    with af.Session(graph=graph, config=_soft()) as sess:
        got = sess.run(fetches, feeds)
        placed = sess._master.placer.assignment
    assert any(d.device_type == "GPU" for d in placed.values()), "nothing ran on the GPU"
    for t, g, w in zip(fetches, got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert type(g) is np.ndarray
        assert g.dtype == w.dtype, t.name
        assert g.shape == w.shape, t.name
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=t.name)


# -- training, loops, feeds and fetches -------------------------------------------------


def _train(config, steps=4):
    g = af.Graph()
    with g.as_default():
        af.set_random_seed(3)
        x = af.placeholder(af.float32, [None, 4], name="x")
        labels = af.placeholder(af.int32, [None], name="labels")
        h = af.layers.dense(x, 8, activation=af.nn.relu, name="h")
        logits = af.layers.dense(h, 3, name="logits")
        loss = af.reduce_mean(
            af.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
        train = af.train.GradientDescentOptimizer(0.3).minimize(loss)
        init = af.global_variables_initializer()
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((16, 4)).astype(np.float32)
    ys = (xs[:, 0] > 0).astype(np.int32) + (xs[:, 1] > 0).astype(np.int32)
    with af.Session(graph=g, config=config) as sess:
        sess.run(init)
        losses = [sess.run([loss, train], {x: xs, labels: ys})[0] for _ in range(steps)]
        weights = sess.run(g.get_collection("trainable_variables"))
    return losses, weights


def test_mlp_training_step_on_the_fake_gpu_equals_cpu(fake_gpus):
    cpu = _train(_cpu_config())
    gpu_run = _train(_soft())
    np.testing.assert_allclose(gpu_run[0], cpu[0], rtol=1e-5)
    for a, b in zip(gpu_run[1], cpu[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert cpu[0][-1] < cpu[0][0]


def test_while_loop_on_the_gpu(fake_gpus):
    def build():
        m = af.constant(np.array([[0.9, 0.1], [-0.2, 1.0]], np.float32))

        def body(i, v):
            return i + 1, af.nn.relu(af.matmul(v, m)) + 0.1

        return af.while_loop(lambda i, v: i < 7, body, [af.constant(0), af.ones([1, 2])])[1]

    results = []
    for cfg in (_cpu_config(), _soft()):
        g = af.Graph()
        with g.as_default():
            out = build()
        with af.Session(graph=g, config=cfg) as sess:
            results.append(sess.run(out))
            placed = sess._master.placer.assignment
    # The last session had the GPU: the loop and its body ran there.
    on_gpu = {op.type for op, d in placed.items() if d.device_type == "GPU"}
    assert {"MatMul", "Relu", "Enter", "Merge", "NextIteration"} <= on_gpu
    v = np.ones((1, 2), np.float32)
    m = np.array([[0.9, 0.1], [-0.2, 1.0]], np.float32)
    for _ in range(7):
        v = np.maximum(v @ m, 0) + 0.1
    np.testing.assert_allclose(results[0], v, rtol=1e-6)
    np.testing.assert_allclose(results[1], v, rtol=1e-6)


def test_feeds_and_fetches_cross_through_the_copy_streams(fake_gpus):
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [3], name="x")
        with af.device("/gpu:0"):
            y = x * 2.0
    with af.Session(graph=g, config=_soft()) as sess:
        for k in range(3):
            v = np.arange(3, dtype=np.float32) + k
            got = sess.run(y, {x: v})
            assert type(got) is np.ndarray
            np.testing.assert_array_equal(got, v * 2)
        (dev,) = [d for d in sess._worker.devices if d.device_type == "GPU"]
    assert dev.copies["h2d"] >= 3 and dev.copies["d2h"] >= 3


def test_peer_copy_between_two_gpus(fake_gpus):
    fake_gpus(2)
    g = af.Graph()
    with g.as_default():
        with af.device("/gpu:0"):
            a = af.constant(np.arange(6, dtype=np.float32).reshape(2, 3)) * 3.0
        with af.device("/gpu:1"):
            b = a + 1.0
    with af.Session(graph=g) as sess:
        np.testing.assert_array_equal(sess.run(b), np.arange(6).reshape(2, 3) * 3.0 + 1)


# -- strictness: the stand-in catches what a real GPU would get wrong silently ----------


def _one_run():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [4], name="x")
        with af.device("/gpu:0"):
            y = af.exp(x) * 2.0
    with af.Session(graph=g) as sess:
        return sess.run(y, {x: np.linspace(0, 1, 4, dtype=np.float32)})


def test_a_removed_wait_before_the_compute_stream_is_caught(fake_gpus, monkeypatch):
    """Without `compute.wait_event(h2d event)` the kernel reads the fed value before its
    host->device copy is known done: the stand-in fails the step."""
    np.testing.assert_allclose(_one_run(), np.exp(np.linspace(0, 1, 4)) * 2, rtol=1e-6)

    class NoWait:
        def __init__(self, stream):
            self._s = stream

        def wait_event(self, event):
            pass  # the deliberately removed synchronisation

        def __getattr__(self, name):
            return getattr(self._s, name)

        def __enter__(self):
            return self._s.__enter__()

        def __exit__(self, *exc):
            return self._s.__exit__(*exc)

    phys = gpu._physical(gpu.backend(), 0)
    monkeypatch.setattr(phys, "compute", NoWait(phys.compute))
    with pytest.raises(errors.OpError, match="without waiting"):
        _one_run()


def test_a_removed_await_before_reading_a_fetch_is_caught(fake_gpus, monkeypatch):
    """A device->host copy returned before its event: the pinned buffer read fails."""

    async def no_wait(self, stream):
        return None

    monkeypatch.setattr(gpu.GPUDevice, "_wait", no_wait)
    with pytest.raises((errors.OpError, fake_cupy.UnsynchronizedAccessError), match="event"):
        for _ in range(20):  # the copy thread may win a race once; never 20 times
            _one_run()


def test_stream_order_events_and_host_callbacks(fake_gpus):
    xp = fake_cupy.module
    with xp.cuda.Device(0):
        s1, s2 = xp.cuda.Stream(non_blocking=True), xp.cuda.Stream(non_blocking=True)
        with s1:
            a = xp.arange(4.0) * 2
        with s2:
            with pytest.raises(fake_cupy.UnsynchronizedAccessError):
                a + 1  # no event between s1's producer and s2
            s2.wait_event(s1.record())
            b = a + 1
        order = []
        s2.launch_host_func(order.append, "callback")
        s2.synchronize()
        assert order == ["callback"]
        np.testing.assert_array_equal(b.get(), [1, 3, 5, 7])
        with pytest.raises(fake_cupy.HostConversionError):
            np.asarray(b)
        with pytest.raises(fake_cupy.HostConversionError):
            float(b[0])
        with pytest.raises(fake_cupy.HostArrayError):
            b + np.ones(4)


def test_memory_pool_accounting_and_limit(fake_gpus):
    xp = fake_cupy.module
    pool = xp.get_default_memory_pool()
    gc.collect()  # (an earlier test's cyclic garbage freed during this one would count)
    with xp.cuda.Device(0):
        before = pool.used_bytes()
        a = xp.zeros((1024,), np.float32)
        assert pool.used_bytes() == before + 4096
        limit = pool.get_limit()
        pool.set_limit(size=before + 8192)
        try:
            with pytest.raises(MemoryError, match="Out of memory"):
                xp.zeros((4096,), np.float32)
        finally:
            pool.set_limit(size=limit)
        del a
        assert pool.used_bytes() == before


def test_device_memory_stats_see_the_peak(fake_gpus):
    g = af.Graph()
    with g.as_default():
        with af.device("/gpu:0"):
            y = af.reduce_sum(af.ones([256, 256]) * 2.0)
    with af.Session(graph=g) as sess:
        assert sess.run(y) == 2.0 * 256 * 256
    dev = gpu.GPUDevice(GPU0, 0, gpu.backend(), 0, af.ConfigProto())
    stats = dev.memory_stats()
    assert stats["peak_bytes_in_use"] >= 256 * 256 * 4
    assert stats["bytes_limit"] == dev.memory_limit


def test_full_trace_reports_gpu_memory_in_step_stats(fake_gpus):
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [64, 64], name="x")
        y = af.reduce_sum(af.matmul(x, x) * 2.0)
    md = af.RunMetadata()
    full = af.RunOptions(trace_level=af.RunOptions.FULL_TRACE)
    with af.Session(graph=g, config=_soft()) as sess:
        sess.run(y, {x: np.ones((64, 64), np.float32)}, options=full, run_metadata=md)
    (dev,) = [d for d in md.step_stats.dev_stats if d.device.endswith("GPU:0")]
    names = {n.node_name for n in dev.node_stats}
    assert "MatMul" in names
    assert max(n.memory[0].peak_bytes for n in dev.node_stats) >= 64 * 64 * 4


# -- the multi-GPU tower example --------------------------------------------------------


def _example():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "multi_gpu_train.py"
    spec = importlib.util.spec_from_file_location("multi_gpu_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_multi_gpu_towers_match_the_single_device_run(fake_gpus, placement_log):
    fake_gpus(2)
    example = _example()
    assert example.num_gpus() == 2
    single, single_vars = example.train(0)
    multi, multi_vars = example.train(2, log_placement=True)
    err = placement_log()
    # One tower per GPU, the shared variables and their update on the CPU.
    assert "tower_0/model/MatMul: (MatMul): /job:localhost/replica:0/task:0/device:GPU:0" in err
    assert "tower_1/model/MatMul: (MatMul): /job:localhost/replica:0/task:0/device:GPU:1" in err
    assert "model/w1: (VariableV2): /job:localhost/replica:0/task:0/device:CPU:0" in err
    np.testing.assert_allclose(multi, single, rtol=1e-5)
    for a, b in zip(multi_vars, single_vars, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert example.main() == 0


def test_string_tensors_stay_on_the_cpu(fake_gpus):
    """TF has no GPU kernels for DT_STRING: a string Const, Identity and Reshape run on the
    CPU even though their ops have generic kernels; the numbers beside them on GPU:0."""
    g = af.Graph()
    with g.as_default():
        s = af.reshape(af.identity(af.constant([b"ab", b"cd"], name="s")), [2, 1], name="r")
        n = af.identity(af.constant([1.0, 2.0]), name="n")
    with af.Session(graph=g) as sess:
        got_s, got_n = sess.run([s, n])
        placed = {op.name: d.device_type for op, d in sess._master.placer.assignment.items()}
    assert got_s.tolist() == [[b"ab"], [b"cd"]]
    np.testing.assert_array_equal(got_n, [1.0, 2.0])
    assert placed["s"] == placed["r"] == "CPU" and placed["n"] == "GPU"


def test_dynamic_rnn_with_a_gpu_present_matches_cpu(fake_gpus):
    """A loop split between devices, as TF places it: the TensorArray ops (no GPU
    kernel) and the loop's frame on the CPU, the cell's math on GPU:0."""
    from asyncflow import rnn, rnn_cell

    results = []
    for cfg in (_cpu_config(), af.ConfigProto()):
        g = af.Graph()
        with g.as_default():
            af.set_random_seed(5)
            x = af.constant(np.linspace(-1, 1, 24).reshape(2, 3, 4))
            out, _ = rnn.dynamic_rnn(rnn_cell.BasicRNNCell(4), x, dtype=af.float64)
            y = af.reduce_sum(out * out)
            init = af.global_variables_initializer()
        with af.Session(graph=g, config=cfg) as sess:
            sess.run(init)
            results.append(sess.run(y))
            placed = {op.name: d.device_type for op, d in sess._master.placer.assignment.items()}
    assert placed["rnn/while/basic_rnn_cell/MatMul"] == "GPU"
    assert placed["rnn/while/TensorArrayReadV3"] == "CPU"
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12)


def test_a_cell_placed_on_the_gpu_inside_dynamic_rnn(fake_gpus):
    """Explicit `/gpu:0` for the cell's math inside the loop: the variables' reads (which
    take the variable by reference, through a RefEnter) stay on the CPU with it.  A read
    is made while its op converts its inputs, so it is named under that op (as TF's
    resource variables' "MatMul/ReadVariableOp")."""
    from asyncflow import rnn, rnn_cell

    class OnGPU(rnn_cell.BasicRNNCell):
        def __call__(self, *args, **kwargs):
            with af.device("/gpu:0"):
                return super().__call__(*args, **kwargs)

    results = []
    for cfg in (_cpu_config(), _soft()):
        g = af.Graph()
        with g.as_default():
            af.set_random_seed(5)
            x = af.constant(np.linspace(-1, 1, 24).reshape(2, 3, 4))
            out, _ = rnn.dynamic_rnn(OnGPU(4), x, dtype=af.float64)
            init = af.global_variables_initializer()
        cfg.allow_soft_placement = True
        with af.Session(graph=g, config=cfg) as sess:
            sess.run(init)
            results.append(sess.run(out))
            placed = {op.name: d.device_type for op, d in sess._master.placer.assignment.items()}
    # A subclass's scope is its own class name in snake case, as TF's layers name it.
    assert placed["rnn/while/on_gpu/MatMul"] == "GPU"
    assert placed["rnn/while/on_gpu/MatMul/read"] == "CPU"
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12)


# -- CuPy's narrower API, as the stand-in models it -----------------------------------


@pytest.mark.parametrize("op", ["add", "subtract", "maximum", "minimum"])
@pytest.mark.parametrize(
    "dtype",
    ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "complex64", "bool"],
)
def test_scatter_at_matches_numpy_for_every_dtype_on_the_device(fake_gpus, op, dtype):
    """CuPy's atomic `ufunc.at` takes only a few dtypes (the stand-in refuses the rest,
    as CuPy does); `scatter_at` gives NumPy's result for all of them."""
    from asyncflow.ops.math_helpers import scatter_at

    if (
        dtype == "bool"
        and op == "subtract"
        or dtype == "complex64"
        and op in ("maximum", "minimum")
    ):
        pytest.skip("NumPy defines no such scatter either")
    xp = gpu.backend().xp
    rng = np.random.default_rng(0)
    base = (rng.standard_normal((5, 3)) * 20).astype(dtype)
    if dtype == "complex64":
        base = base + 1j * base[::-1]
    idx = np.array([0, 3, 0, 4, 3, 0])
    upd = (rng.standard_normal((6, 3)) * 20).astype(dtype)
    want = base.copy()
    getattr(np, op).at(want, idx, upd)
    with xp.cuda.Device(0):
        a = xp.asarray(base)
        if dtype not in fake_cupy._AT_DTYPES[op]:
            with pytest.raises((TypeError, NotImplementedError)):
                getattr(xp, op).at(a, xp.asarray(idx), xp.asarray(upd))
        scatter_at(xp, op, a, xp.asarray(idx), xp.asarray(upd))
        got = xp.asnumpy(a)
    np.testing.assert_array_equal(got, want)


def test_ascontiguousarray_of_a_scalar_is_one_dimensional_as_in_cupy(fake_gpus):
    """Fetching a 0-d device value keeps its shape (CuPy's ascontiguousarray does not)."""
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [])
        y = x * 2.0
    with af.Session(graph=g) as s:
        out = s.run(y, {x: 3.0})
    assert np.shape(out) == () and out == 6.0


def test_a_big_feed_is_staged_and_sent_in_overlapping_chunks(fake_gpus, monkeypatch):
    """Past STAGE_IN_THREAD_BYTES a host->device copy goes in CHUNK_BYTES pieces (threads
    stage them into pinned memory, each sent when ready); the device sees every byte."""
    monkeypatch.setattr(gpu, "STAGE_IN_THREAD_BYTES", 1 << 10)
    monkeypatch.setattr(gpu, "CHUNK_BYTES", 1000)  # not a multiple of the item size
    value = np.random.default_rng(3).standard_normal((37, 53)).astype(np.float32)
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [37, 53])
        y = af.reduce_sum(x * 2.0, axis=1)
    chunked = []
    real = gpu.GPUDevice._pipelined_h2d

    async def spy(self, host, staging):
        chunked.append(host.nbytes)
        return await real(self, host, staging)

    monkeypatch.setattr(gpu.GPUDevice, "_pipelined_h2d", spy)
    with af.Session(graph=g) as s:
        got = s.run(y, {x: value})
    assert value.nbytes in chunked
    np.testing.assert_allclose(got, (value * 2.0).sum(axis=1), rtol=1e-5)


def test_singular_and_indefinite_inputs_fail_on_the_gpu_as_on_the_cpu(fake_gpus):
    """CuPy's inv/cholesky give nan instead of raising (the stand-in does the same); the
    kernels learn it through an asynchronous copy of one flag and raise TF's errors."""
    for build, message in (
        (lambda: af.matrix_inverse([[1.0, 2.0], [2.0, 4.0]]), "not invertible"),
        (lambda: af.cholesky([[1.0, 2.0], [2.0, 1.0]]), "Cholesky"),
    ):
        g = af.Graph()
        with g.as_default():
            y = build()
        with af.Session(graph=g) as s:
            with pytest.raises(errors.InvalidArgumentError, match=message):
                s.run(y)
            placed = {op.type: d.device_type for op, d in s._master.placer.assignment.items()}
        assert placed.get("MatrixInverse", placed.get("Cholesky")) == "GPU"
    g = af.Graph()
    with g.as_default():
        y = af.matrix_inverse([[2.0, 1.0], [1.0, 3.0]])
    with af.Session(graph=g) as s:
        np.testing.assert_allclose(s.run(y), np.linalg.inv([[2.0, 1.0], [1.0, 3.0]]), rtol=1e-6)


def test_float64_scatter_maximum_is_exact_though_cupys_rounds_to_float32(fake_gpus):
    """CuPy's maximum.at / minimum.at on float64 go through atomicMax / atomicMin for
    doubles, which compute with fmaxf / fminf: the stand-in rounds as they do (this made
    the float64 tensor_scatter_nd_max/min gradients fail on an H100), and scatter_at
    keeps float64 exact by its sort instead."""
    from asyncflow.ops.math_helpers import scatter_at

    xp = gpu.backend().xp
    base = np.array([0.1, 0.2, 0.3, 0.4])
    idx, upd = np.array([0, 2, 2]), np.array([1 / 3, 0.25, 0.35])
    want = base.copy()
    np.maximum.at(want, idx, upd)
    with xp.cuda.Device(0):
        raw = xp.asarray(base)
        xp.maximum.at(raw, xp.asarray(idx), xp.asarray(upd))
        rounded = xp.asnumpy(raw)
        exact = xp.asarray(base)
        scatter_at(xp, "maximum", exact, xp.asarray(idx), xp.asarray(upd))
        exact = xp.asnumpy(exact)
    written = want.copy()
    written[[0, 2]] = want[[0, 2]].astype(np.float32)  # (the others are left alone)
    np.testing.assert_array_equal(rounded, written)
    np.testing.assert_array_equal(exact, want)
