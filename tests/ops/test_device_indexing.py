"""Gather and UnsortedSegmentSum on a GPU (ops/device_indexing.py): TF's GPU kernels'
semantics (no error; zeros for a gather index out of range, rows of a segment id out
of range dropped) without any device->host read, on the CuPy stand-in."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow.devices import fake_cupy

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _run_on_gpu(fetches, feeds):
    with af.Session() as s:
        s.run(fetches, feeds)
        fake_cupy.reset_launches()
        got = s.run(fetches, feeds)
        return got, fake_cupy.launches()


def test_gather_gives_zeros_for_indices_out_of_range(fake_gpu):
    params = np.arange(1.0, 13.0, dtype=np.float32).reshape(4, 3)
    p = af.placeholder(af.float32, [4, 3])
    i = af.placeholder(af.int32, [None])
    j = af.placeholder(af.int64, [2, 2])
    idx = np.array([2, 7, 0, -1], np.int32)
    idx2 = np.array([[1, 3], [4, 0]], np.int64)
    fetches = [af.gather(p, i), af.gather(p, j, axis=1), af.gather(p, i[:0])]
    (rows, cols, empty), launches = _run_on_gpu(fetches, {p: params, i: idx, j: idx2})
    np.testing.assert_array_equal(rows, [params[2], np.zeros(3), params[0], np.zeros(3)])
    want = np.zeros((4, 2, 2), np.float32)
    want[:, 0, 0], want[:, 1, 1] = params[:, 1], params[:, 0]
    np.testing.assert_array_equal(cols, want)
    assert empty.shape == (0, 3)
    assert launches["sync"] == 0


def test_gather_with_batch_dims(fake_gpu):
    params = np.arange(24.0).reshape(2, 3, 4)
    idx = np.array([[0, 5], [3, 1]], np.int32)
    p = af.placeholder(af.float64, [2, 3, 4])
    out = af.gather(p, idx, axis=2, batch_dims=1)
    (got,), launches = _run_on_gpu([out], {p: params})
    want = np.zeros((2, 3, 2))
    want[0, :, 0] = params[0, :, 0]
    want[1, :, 0], want[1, :, 1] = params[1, :, 3], params[1, :, 1]
    np.testing.assert_array_equal(got, want)
    assert launches["sync"] == 0


def test_unsorted_segment_sum_drops_ids_out_of_range(fake_gpu):
    data = np.arange(1.0, 11.0).reshape(5, 2)
    ids = np.array([1, 4, -1, 1, 0], np.int32)
    d = af.placeholder(af.float64, [5, 2])
    out = af.math.unsorted_segment_sum(d, ids, 3)
    (got,), launches = _run_on_gpu([out], {d: data})
    np.testing.assert_array_equal(got, [data[4], data[0] + data[3], [0.0, 0.0]])
    assert launches["sync"] == 0


def test_embedding_gradient_reads_nothing_back(fake_gpu):
    table = af.Variable(np.arange(12.0, dtype=np.float32).reshape(6, 2))
    ids = af.placeholder(af.int32, [4])
    loss = af.reduce_sum(af.nn.embedding_lookup(table, ids) ** 2)
    train = af.train.GradientDescentOptimizer(0.5).minimize(loss)
    with af.Session() as s:
        s.run(table.initializer)
        s.run(train, {ids: [0, 2, 2, 5]})
        fake_cupy.reset_launches()
        s.run(train, {ids: [1, 1, 3, 4]})
        assert fake_cupy.launches()["sync"] == 0
        got = s.run(table)
    want = np.arange(12.0, dtype=np.float32).reshape(6, 2)
    for step in ([0, 2, 2, 5], [1, 1, 3, 4]):
        grad = np.zeros_like(want)
        np.add.at(grad, step, 2 * want[step])
        want = want - 0.5 * grad
    np.testing.assert_allclose(got, want, rtol=1e-6)
