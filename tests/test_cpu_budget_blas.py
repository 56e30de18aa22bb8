"""The BLAS thread count our kernels choose is the program's own again after a step.

OpenBLAS's count is process-wide, so a step that ran its products on one thread must
hand the previous count back (issue 21): the program's NumPy between steps keeps it.
threadpoolctl, an independent reader of the library's count, checks it.
"""

import asyncio

import numpy as np
import pytest

import asyncflow as af
from asyncflow.devices import cpu_budget

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_count() -> int | None:
    for info in threadpoolctl.threadpool_info():
        if info.get("user_api") == "blas" and info.get("internal_api") == "openblas":
            return info["num_threads"]
    return None


@pytest.fixture
def busy_neighbour(monkeypatch):
    """Every call of ours takes one BLAS thread, as beside a CPU-bound process."""
    monkeypatch.setattr(cpu_budget, "_sample_competing", lambda: 1)


@pytest.mark.skipif(cpu_budget._set_blas_local is None, reason="no OpenBLAS thread control")
@pytest.mark.parametrize("mode", ["run", "arun"])
def test_a_step_gives_back_the_programs_blas_thread_count(mode, busy_neighbour):
    if _blas_count() is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    x = np.ones((256, 256), np.float32)
    with af.Graph().as_default():
        a = af.placeholder(af.float32, [256, 256])
        y = af.matmul(a, a)
        with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
            for _ in range(3):
                if mode == "run":
                    with af.Session() as sess:
                        got = sess.run(y, {a: x})
                else:
                    got = asyncio.run(_arun(y, a, x))
                assert _blas_count() == 2
                np.testing.assert_allclose(got, x @ x, rtol=1e-6)
        with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
            with af.Session() as sess:
                sess.run(y, {a: x})
                assert _blas_count() == 1


async def _arun(y, a, x):
    async with af.Session(graph=y.graph) as sess:
        return await sess.arun(y, {a: x})


@pytest.mark.skipif(cpu_budget._set_blas_local is None, reason="no OpenBLAS thread control")
def test_a_session_of_two_cpu_devices_leaves_the_count_to_the_budget():
    # The budget sets the (process-wide) count for each call of ours and remembers it
    # (`_blas_now`); a two-device session's core sharing changed it behind the budget's
    # back (a threadpoolctl limit at open, its restore at close), so a call the budget
    # had given one thread could run on another count.  Now the session leaves it.
    if _blas_count() is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    x = np.ones((256, 256), np.float32)
    config = af.ConfigProto(device_count={"CPU": 2})
    with af.Graph().as_default():
        with af.device("/cpu:1"):
            y = af.matmul(af.constant(x), af.constant(x))
        for count in (2, 1):
            with threadpoolctl.threadpool_limits(limits=count, user_api="blas"):
                sess = af.Session(config=config)
                assert _blas_count() == count
                sess.close()
                assert _blas_count() == count
        with af.Session(config=config) as sess:
            np.testing.assert_allclose(sess.run(y), x @ x, rtol=1e-6)


def test_a_session_of_two_cpu_devices_still_counts_the_host_as_shared():
    # (leaving the BLAS count to the budget must not leave the cost model's sharing)
    from asyncflow.devices import cpu

    before = cpu._share_count
    with af.Graph().as_default():
        af.constant(1.0)
        with af.Session(config=af.ConfigProto(device_count={"CPU": 2})):
            assert cpu._share_count == before + 1
    assert cpu._share_count == before
