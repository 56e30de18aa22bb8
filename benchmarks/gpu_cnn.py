"""The CNN rows of benchmarks/gpu_check.py: a training step of a small CNN run by a
session on GPU:0 against the same step written by hand in CuPy.

The model: two 3x3 SAME convolutions (16 and 32 channels) each with a bias, ReLU and
2x2 max pooling, then a dense layer to 10 classes; 28x28x1 inputs, batch 64, softmax
cross-entropy, SGD.  The hand-written step does forward and backward with im2col
(CuPy's as_strided) and matmuls, as a CuPy user would; both start from the same
weights and data, so their losses agree.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import asyncflow as af

BATCH = 64
SIDE = 28
CHANNELS = (1, 16, 32)
CLASSES = 10
LR = 0.01


def _data(steps):
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((steps, BATCH, SIDE, SIDE, CHANNELS[0])).astype(np.float32)
    ys = rng.integers(0, CLASSES, (steps, BATCH)).astype(np.int32)
    return xs, ys


def _init():
    rng = np.random.default_rng(3)
    convs = [
        ((rng.standard_normal((3, 3, a, b)) * np.sqrt(2.0 / (9 * a))).astype(np.float32),
         np.full(b, 0.01, np.float32))
        for a, b in zip(CHANNELS[:-1], CHANNELS[1:])
    ]  # fmt: skip
    side = SIDE // 2 ** (len(CHANNELS) - 1)
    fan_in = side * side * CHANNELS[-1]
    dense = (
        (rng.standard_normal((fan_in, CLASSES)) * np.sqrt(1.0 / fan_in)).astype(np.float32),
        np.zeros(CLASSES, np.float32),
    )
    return convs, dense


def graph():
    convs, (wd0, bd0) = _init()
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [BATCH, SIDE, SIDE, CHANNELS[0]], name="x")
        y = af.placeholder(af.int32, [BATCH], name="y")
        h = x
        for i, (w0, b0) in enumerate(convs):
            w = af.Variable(w0, name=f"conv{i}/w")
            b = af.Variable(b0, name=f"conv{i}/b")
            h = af.nn.relu(af.nn.bias_add(af.nn.conv2d(h, w, [1, 1, 1, 1], "SAME"), b))
            h = af.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        flat = af.reshape(h, [BATCH, -1])
        logits = af.matmul(flat, af.Variable(wd0, name="dense/w")) + af.Variable(
            bd0, name="dense/b"
        )
        loss = af.reduce_mean(
            af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        train = af.train.GradientDescentOptimizer(LR).minimize(loss)
        init = af.global_variables_initializer()
    return g, x, y, loss, train, init


def asyncflow_cnn(steps, counter=None) -> tuple[float, list[float]]:
    """Median step time and the losses; with the stand-in's `counter` dict, step 1's
    launches."""
    g, x, y, loss, train, init = graph()
    xs, ys = _data(steps)
    losses, times = [], []
    with af.Session(graph=g, config=af.ConfigProto(allow_soft_placement=True)) as s:
        s.run(init)
        for i in range(steps):
            if counter is not None and i == 1:
                _fake().reset_launches()
            t = time.perf_counter()
            losses.append(float(s.run([loss, train], {x: xs[i], y: ys[i]})[0]))
            times.append(time.perf_counter() - t)
            if counter is not None and i == 1:
                counter.update(_fake().launches())
    return statistics.median(times[2:] or times), losses


def _im2col(cp, x):
    """[N, H, W, C] -> [N*H*W, 9*C]: each position's 3x3 SAME window, (ki, kj, c) order."""
    n, h, w, c = x.shape
    padded = cp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    s = padded.strides
    windows = cp.lib.stride_tricks.as_strided(
        padded, (n, h, w, 3, 3, c), (s[0], s[1], s[2], s[1], s[2], s[3])
    )
    return windows.reshape(n * h * w, 9 * c)


def _col2im(cp, dcols, shape):
    """The gradient of _im2col: each window's gradient added back at its positions."""
    n, h, w, c = shape
    d = dcols.reshape(n, h, w, 3, 3, c)
    out = cp.zeros((n, h + 2, w + 2, c), dcols.dtype)
    for i in range(3):
        for j in range(3):
            out[:, i : i + h, j : j + w, :] += d[:, :, :, i, j, :]
    return out[:, 1:-1, 1:-1, :]


def cupy_cnn(cp, steps, counter=None) -> tuple[float, list[float]]:
    """The same step by hand; with a `counter` dict (stand-in only), step 1's launches."""
    convs, (wd, bd) = _init()
    convs = [(cp.asarray(w), cp.asarray(b)) for w, b in convs]
    wd, bd = cp.asarray(wd), cp.asarray(bd)
    xs, ys = _data(steps)
    losses, times = [], []
    for step in range(steps):
        if counter is not None and step == 1:
            _fake().reset_launches()
        t = time.perf_counter()
        h = cp.asarray(xs[step])
        y = cp.asarray(ys[step])
        saved = []
        for w, b in convs:
            n, side, _, c = h.shape
            cols = _im2col(cp, h)
            z = (cols @ w.reshape(9 * c, -1) + b).reshape(n, side, side, -1)
            a = cp.maximum(z, 0)
            half = side // 2
            windows = a.reshape(n, half, 2, half, 2, a.shape[-1])
            pooled = windows.max(axis=(2, 4))
            saved.append((h.shape, cols, z, windows, pooled))
            h = pooled
        flat = h.reshape(BATCH, -1)
        logits = flat @ wd + bd
        shifted = logits - logits.max(axis=1, keepdims=True)
        e = cp.exp(shifted)
        total = e.sum(axis=1, keepdims=True)
        onehot = cp.zeros_like(e)
        onehot[cp.arange(BATCH), y] = 1
        loss = (cp.log(total[:, 0]) - (shifted * onehot).sum(axis=1)).mean()
        g = (e / total - onehot) / BATCH
        dflat = g @ wd.T
        wd -= LR * (flat.T @ g)
        bd -= LR * g.sum(axis=0)
        dh = dflat.reshape(h.shape)
        for k in range(len(convs) - 1, -1, -1):
            w, b = convs[k]
            in_shape, cols, z, windows, pooled = saved[k]
            hit = windows == pooled[:, :, None, :, None, :]
            da = (hit * dh[:, :, None, :, None, :]).reshape(z.shape)
            dz = (da * (z > 0)).reshape(-1, z.shape[-1])
            if k:
                dh = _col2im(cp, dz @ w.reshape(-1, w.shape[-1]).T, in_shape)
            w -= LR * (cols.T @ dz).reshape(w.shape)
            b -= LR * dz.sum(axis=0)
        losses.append(float(cp.asnumpy(loss)))
        times.append(time.perf_counter() - t)
        if counter is not None and step == 1:
            counter.update(_fake().launches())
    return statistics.median(times[2:] or times), losses


def _fake():
    from asyncflow.devices import fake_cupy

    return fake_cupy
