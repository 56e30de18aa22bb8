"""Denormal floats are flushed to zero while kernels run, as TF's CPU kernels flush
them (devices/denormal.py): results against TF 2.21's, recorded by
tests/fixtures/record_denormal_flush_tf.py; the calling thread, the event loop's other
tasks and the numba pool's threads keep their own modes outside the kernels."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.devices import cpu_budget, denormal

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE / "fixtures"))
import denormal_cases  # noqa: E402

RECORDED = json.loads((HERE / "fixtures" / "denormal_flush_tf.json").read_text())

pytestmark = pytest.mark.skipif(
    not denormal.active(), reason="denormal modes are set on Linux x86-64 (glibc) only"
)


def _underflow() -> float:
    """A float32 product whose exact result is denormal: 1e-40 kept, 0 flushed."""
    return float(np.float32(1e-38) * np.float32(0.01))


def test_kernels_flush_as_tf():
    graph = tf.Graph()
    with graph.as_default():
        fetches, feeds = denormal_cases.build(tf)
        init = tf.global_variables_initializer()
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        results = sess.run(fetches, feeds)
        # the caller's own NumPy after the step: its modes are its own again
        assert float(_underflow()).hex() == RECORDED["numpy_on_the_calling_thread_after_a_step"]
    got = {name: denormal_cases.summary(v) for name, v in results.items()}
    want = {k: v for k, v in RECORDED.items() if k in got}
    assert got == want
    assert len(want) == len(fetches)


def test_loop_tasks_beside_a_parked_step_keep_their_modes():
    # A step parked on a Dequeue lets the loop run other tasks: they see the thread's
    # own modes, and the step's kernels after the wait flush again.
    async def main():
        graph = tf.Graph()
        with graph.as_default():
            q = tf.FIFOQueue(1, tf.float32, shapes=[[]])
            enqueue = q.enqueue(tf.constant(np.float32(1e-38)))
            out = q.dequeue() * tf.constant(np.float32(0.01))
        with tf.Session(graph=graph) as sess:
            step = asyncio.ensure_future(sess.arun(out))
            await asyncio.sleep(0.05)
            assert not step.done()
            beside = _underflow()  # on the loop's thread, while the step waits
            await sess.arun(enqueue)
            value = await asyncio.wait_for(step, 10)
            after = _underflow()
        return beside, float(value), after

    beside, value, after = asyncio.run(main())
    assert beside != 0.0 and after != 0.0
    assert value == 0.0


def test_threads_that_only_run_kernels_flush():
    from asyncflow.devices.cpu import CPUDevice

    device = CPUDevice("/job:localhost/replica:0/task:0/device:CPU:0", 0, 1)
    assert device.pool.submit(_underflow).result(10) == 0.0  # its workers
    seen = []
    job = cpu_budget._Job(lambda start, stop: seen.append(_underflow()), [(0, 1)])
    cpu_budget._offer(job, 1)  # parallel_for's helper threads
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.005)
    assert seen == [0.0]
    assert _underflow() != 0.0  # (this thread: untouched)
    device.pool.shutdown()


def test_pool_blocks_take_the_callers_modes():
    pytest.importorskip("numba")
    from asyncflow.ops import blas, jit_threads

    blas.warm()
    blocks = blas._JIT.get("blocks")
    if blocks is None or not jit_threads.usable():
        pytest.skip("numba's pool does not run here")
    a = np.full((64, 64), 1e-20, np.float32)
    address = blas._single_address(np.dtype(np.float32))

    def product():
        c = np.full((64, 64), np.nan, np.float32)
        blocks(address, blas._NO_TRANS, blas._NO_TRANS, 64, 64, 64, 1.0, a, 64, a, 64, 0.0,
               c, 2, True)  # fmt: skip
        return c

    jit_threads.threads(2)
    token = denormal.enter()
    try:
        flushed = product()
    finally:
        denormal.leave(token)
    kept = product()  # the pool's threads put their own modes back after each block
    assert not flushed.any()
    np.testing.assert_allclose(kept, 64 * 1e-40, rtol=1e-4)  # (sums of denormals: kept)


def test_switched_off():
    code = (
        "import numpy as np, asyncflow as tf\n"
        "x = tf.placeholder(tf.float32, [])\n"
        "with tf.Session() as s: print(float(s.run(x * 1.0, {x: np.float32(1e-39)})).hex())\n"
    )
    env = dict(os.environ, ASYNCFLOW_FLUSH_DENORMALS="0")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert float.fromhex(out.stdout.split()[-1]) == float(np.float32(1e-39))


def test_a_cached_table_does_not_depend_on_who_built_it(monkeypatch):
    # summary histograms' cell tables have denormal bounds near zero: one built inside
    # a step (denormals flushed) must equal one the caller builds
    from asyncflow.ops import summary_ops

    rng = np.random.RandomState(3)
    wide = np.exp(rng.uniform(-745, 80, 20_000)) * np.sign(rng.randn(20_000))
    for values in (wide, wide.astype(np.float32)):  # denormals of both types
        monkeypatch.setattr(summary_ops, "_TABLES", {})
        want = summary_ops.bucket_counts(values)
        monkeypatch.setattr(summary_ops, "_TABLES", {})
        token = denormal.enter()
        try:
            summary_ops._cell_table(values.dtype)
        finally:
            denormal.leave(token)
        np.testing.assert_array_equal(summary_ops.bucket_counts(values), want)
