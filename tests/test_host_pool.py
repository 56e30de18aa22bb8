"""devices/host_pool: large host arrays reuse buffers only once nothing can reach them."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import asyncflow as af
from asyncflow.devices import host_pool

BIG = (1024, 1024 + 256)  # float32: 5 MiB, over the tests' MIN_BYTES


@pytest.fixture(autouse=True)
def fresh_pool(monkeypatch):
    monkeypatch.delenv("ASYNCFLOW_HOST_POOL_MB", raising=False)
    monkeypatch.setattr(host_pool, "MIN_BYTES", 4 << 20)  # (32 MiB arrays: slow tests)
    host_pool._clear()
    yield
    host_pool._clear()


def _ptr(a) -> int:
    return a.__array_interface__["data"][0]


def test_small_arrays_are_numpys_own():
    a = host_pool.empty((4, 4), np.float32)
    assert a.base is None and host_pool.owns_memory(a)


def test_a_freed_buffer_serves_the_next_array_of_its_size():
    a = host_pool.empty(BIG, np.float32)
    assert a.shape == BIG and a.dtype == np.float32 and a.flags.writeable
    assert a.flags.c_contiguous and host_pool.owns_memory(a)
    assert not host_pool.owns_memory(a[1:]) and not host_pool.owns_memory(a.reshape(-1))
    p = _ptr(a)
    del a
    assert host_pool.kept_bytes() == BIG[0] * BIG[1] * 4
    b = host_pool.empty((BIG[0] * BIG[1],), np.int32)  # same bytes, any shape and dtype
    assert _ptr(b) == p and host_pool.kept_bytes() == 0


def test_a_view_keeps_the_buffer_from_reuse():
    a = host_pool.empty(BIG, np.float32)
    a[...] = 7.0
    p = _ptr(a)
    view = a[3:5].T  # a view of a view: both reach the buffer through `a`
    del a
    gc.collect()
    b = host_pool.empty(BIG, np.float32)
    assert _ptr(b) != p  # still in use: a fresh buffer
    b[...] = -1.0
    assert (view == 7.0).all()
    del view
    c = host_pool.empty(BIG, np.float32)
    assert _ptr(c) == p


def test_kept_bytes_stay_under_the_limit(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_HOST_POOL_MB", "8")
    host_pool._clear()
    arrays = [host_pool.empty(BIG, np.float32) for _ in range(3)]  # 3 x 5 MiB
    del arrays
    assert host_pool.kept_bytes() == BIG[0] * BIG[1] * 4  # one kept, two freed


def test_zero_turns_it_off(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_HOST_POOL_MB", "0")
    host_pool._clear()
    a = host_pool.empty(BIG, np.float32)
    assert a.base is None
    del a
    assert host_pool.kept_bytes() == 0


def test_buffers_come_back_from_any_thread():
    arrays = [host_pool.empty(BIG, np.float32) for _ in range(4)]
    ptrs = {_ptr(a) for a in arrays}

    def drop():
        arrays.clear()

    t = threading.Thread(target=drop)
    t.start()
    t.join(timeout=30)
    assert host_pool.kept_bytes() == 4 * BIG[0] * BIG[1] * 4
    again = [host_pool.empty(BIG, np.float32) for _ in range(4)]
    assert {_ptr(a) for a in again} == ptrs


def test_fetched_products_stay_valid_across_steps():
    # The large product a step returns is the caller's until they drop it: later steps
    # compute into other buffers, and a dropped one serves again.
    graph = af.Graph()
    with graph.as_default():
        a = af.placeholder(af.float32, [2048, 1])
        b = af.placeholder(af.float32, [1, 1024])
        product = af.matmul(a, b)  # 8 MiB
    rng = np.random.RandomState(0)
    feeds = [
        (rng.rand(2048, 1).astype(np.float32), rng.rand(1, 1024).astype(np.float32))
        for _ in range(3)
    ]
    with af.Session(graph=graph) as sess:
        kept = []
        for x, y in feeds:
            kept.append(sess.run(product, {a: x, b: y}))
        for out, (x, y) in zip(kept, feeds):
            np.testing.assert_array_equal(out, x @ y)
        ptrs = {_ptr(v) for v in kept}
        assert len(ptrs) == 3
        del kept, out
        again = sess.run(product, {a: feeds[0][0], b: feeds[0][1]})
        np.testing.assert_array_equal(again, feeds[0][0] @ feeds[0][1])
        assert _ptr(again) in ptrs  # a dropped product's buffer served again
