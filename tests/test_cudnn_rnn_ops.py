"""cuDNN's RNN op family: CudnnRNN, CudnnRNNV2, CudnnRNNV3, their Backprop ops,
CudnnRNNParamsSize and the canonical <-> opaque parameter conversions.

On a CPU every one fails as TF 2.21's does (no CPU kernel: recorded by
tests/fixtures/cudnn_rnn_cpu_cases.py -> cudnn_rnn_cpu_tf.json).  On the stand-in GPU
(ASYNCFLOW_FAKE_GPUS=1) the forward ops match a NumPy reference of the LSTM / GRU /
tanh / relu equations written here from canonical weights, and their gradients (the
Backprop ops) match central finite differences of the ops themselves.  Static shapes
are TF's (recorded from TF 2.21's shape functions).
"""

import json
import os
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors
from asyncflow.devices import gpu

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import cudnn_rnn_cpu_cases as cpu_cases  # noqa: E402

CPU_TF = json.loads((FIXTURES / "cudnn_rnn_cpu_tf.json").read_text())
R = tf.raw_ops
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


@pytest.fixture(autouse=True)
def _graph():
    with tf.Graph().as_default():
        yield


@pytest.fixture
def fake_gpu(monkeypatch):
    """The stand-in GPU, unless this process has a real one (make test-gpu)."""
    if os.environ.get("ASYNCFLOW_FAKE_GPUS", "0") == "0" and gpu.unavailable_reason():
        monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "1")
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


# -- CPU: TF's failure -----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(cpu_cases.CASES))
def test_on_a_cpu_each_op_fails_as_tfs(name):
    config = tf.ConfigProto(device_count={"GPU": 0})
    got = cpu_cases.run_case(tf, name, config)
    assert got == CPU_TF[name]


# -- static shapes (TF 2.21's shape functions) ----------------------------------------------


def test_static_shapes_are_tfs():
    x = tf.placeholder(tf.float32, [7, 2, 4])
    h = tf.placeholder(tf.float32, [4, 2, 5])
    c = tf.placeholder(tf.float32, [4, 2, 6])
    p = tf.placeholder(tf.float32, [None])

    def shapes(ts):
        return [t.shape.as_list() if t.shape.ndims is not None else None for t in ts]

    bi = {"direction": "bidirectional"}
    for op in (R.CudnnRNN, R.CudnnRNNV2):
        lstm = shapes(op(input=x, input_h=h, input_c=c, params=p, **bi))
        gru = shapes(op(input=x, input_h=h, input_c=c, params=p, rnn_mode="gru", **bi))
        assert lstm[:4] == [[7, 2, 10], [4, 2, 5], [4, 2, 5], None]
        assert gru[:4] == [[7, 2, 10], [4, 2, 5], [], None]
    v3 = R.CudnnRNNV3(input=x, input_h=h, input_c=c, params=p, sequence_lengths=[7, 7], **bi)
    assert shapes(v3) == [[7, 2, 10], [4, 2, 5], [4, 2, 6], None, None]
    v3 = R.CudnnRNNV3(input=x, input_h=h, input_c=c, params=p, sequence_lengths=[7, 7],
                      rnn_mode="gru")  # fmt: skip
    assert shapes(v3)[:3] == [[7, 2, 5], [4, 2, 5], []]
    back = R.CudnnRNNBackprop(input=x, input_h=h, input_c=c, params=p, output=x, output_h=h,
                              output_c=c, output_backprop=x, output_h_backprop=h,
                              output_c_backprop=c, reserve_space=p)  # fmt: skip
    assert shapes(back) == [[7, 2, 4], [4, 2, 5], [4, 2, 6], [None]]
    n = R.CudnnRNNParamsSize(num_layers=1, num_units=3, input_size=4, T=tf.float32, S=tf.int64)
    assert n.shape.as_list() == [1] and n.dtype == tf.int64
    can = R.CudnnRNNParamsToCanonicalV2(num_layers=2, num_units=3, input_size=4, params=p,
                                        num_params_weights=9, num_params_biases=8,
                                        num_proj=2)  # fmt: skip
    assert shapes(can.weights) == [[None, None]] * 9 and shapes(can.biases) == [[None]] * 8
    w = R.CudnnRNNCanonicalToParams(num_layers=2, num_units=3, input_size=4, weights=[p] * 2,
                                    biases=[p] * 2)  # fmt: skip
    assert w.shape.as_list() == [None]
    with pytest.raises(ValueError, match="rank 3"):
        R.CudnnRNN(input=x, input_h=tf.zeros([2, 2]), input_c=c, params=p)
    with pytest.raises(ValueError, match="rank 0"):
        R.CudnnRNNParamsSize(num_layers=[1, 2], num_units=3, input_size=4, T=tf.float32,
                             S=tf.int32)  # fmt: skip


def test_only_the_forward_ops_have_gradients_as_in_tf():
    from asyncflow.registry import get_op_def

    with_grad = {"CudnnRNN", "CudnnRNNV2", "CudnnRNNV3"}
    for name in {*(n.split("_")[0] for n in cpu_cases.CASES), "CudnnRNNV3", "CudnnRNNBackpropV3"}:
        op_def = get_op_def(name)
        assert (op_def.grad_fn is not None) == (name in with_grad), name
        assert not op_def.not_differentiable


# -- the NumPy reference --------------------------------------------------------------------


def _sig(v):
    return 1 / (1 + np.exp(-v))


def reference(mode, weights, biases, x, h0, c0, layers, dirs, lengths=None, num_proj=0):
    """Time-major run of the network from TF's canonical weights and biases."""
    g = GATES[mode]
    per_w = 2 * g + (1 if num_proj else 0)
    steps, batch = x.shape[:2]
    lengths = np.full(batch, steps) if lengths is None else np.asarray(lengths)
    seq, hs, cs = x, [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            W = weights[k * per_w : k * per_w + g]
            U = weights[k * per_w + g : k * per_w + 2 * g]
            bw, bu = biases[2 * g * k : 2 * g * k + g], biases[2 * g * k + g : 2 * g * (k + 1)]
            h, c = h0[k], c0[k] if mode == "lstm" else None
            out = np.zeros((steps, batch, h.shape[1]))
            for t in range(steps) if d == 0 else range(steps - 1, -1, -1):
                xt = seq[t]
                pre = [xt @ W[j].T + bw[j] + h @ U[j].T + bu[j] for j in range(g)]
                c_new = c
                if mode == "lstm":
                    c_new = _sig(pre[1]) * c + _sig(pre[0]) * np.tanh(pre[2])
                    h_new = _sig(pre[3]) * np.tanh(c_new)
                    if num_proj:
                        h_new = h_new @ weights[k * per_w + 2 * g].T
                elif mode == "gru":
                    r, z = _sig(pre[0]), _sig(pre[1])
                    n = np.tanh(xt @ W[2].T + bw[2] + r * (h @ U[2].T + bu[2]))
                    h_new = (1 - z) * n + z * h
                elif mode == "rnn_tanh":
                    h_new = np.tanh(pre[0])
                else:
                    h_new = np.maximum(pre[0], 0)
                valid = (lengths > t)[:, None]
                out[t] = np.where(valid, h_new, 0)
                h = np.where(valid, h_new, h)
                c = np.where(valid, c_new, c) if mode == "lstm" else c
            outs.append(out)
            hs.append(h)
            cs.append(c)
        seq = np.concatenate(outs, axis=2)
    return seq, np.stack(hs), (np.stack(cs) if mode == "lstm" else None)


def canonical(rng, mode, layers, dirs, units, input_size, num_proj=0):
    g, ws, bs = GATES[mode], [], []
    out = num_proj or units
    for layer in range(layers):
        width = input_size if layer == 0 else out * dirs
        for _ in range(dirs):
            ws += [rng.uniform(-0.6, 0.6, (units, width)) for _ in range(g)]
            ws += [rng.uniform(-0.6, 0.6, (units, out)) for _ in range(g)]
            if num_proj:
                ws.append(rng.uniform(-0.6, 0.6, (num_proj, units)))
            bs += [rng.uniform(-0.3, 0.3, (units,)) for _ in range(2 * g)]
    return ws, bs


# -- the stand-in GPU: values ---------------------------------------------------------------

CONFIGS = [  # (mode, layers, direction)
    ("lstm", 1, "unidirectional"),
    ("lstm", 2, "bidirectional"),
    ("gru", 2, "bidirectional"),
    ("gru", 1, "unidirectional"),
    ("rnn_tanh", 1, "bidirectional"),
    ("rnn_relu", 2, "unidirectional"),
]


def _network(mode, layers, direction, seed=0, steps=3, batch=2, units=3, input_size=4,
             num_proj=0):  # fmt: skip
    rng = np.random.RandomState(seed)
    dirs = 2 if direction == "bidirectional" else 1
    ws, bs = canonical(rng, mode, layers, dirs, units, input_size, num_proj)
    x = rng.randn(steps, batch, input_size)
    h0 = rng.randn(layers * dirs, batch, num_proj or units) * 0.5
    c0 = rng.randn(layers * dirs, batch, units) * 0.5
    return ws, bs, x, h0, c0, dirs


@pytest.mark.parametrize("mode,layers,direction", CONFIGS)
@pytest.mark.parametrize("version", ["CudnnRNN", "CudnnRNNV2"])
def test_forward_matches_the_numpy_reference(fake_gpu, version, mode, layers, direction):
    ws, bs, x, h0, c0, dirs = _network(mode, layers, direction)
    attrs = {"rnn_mode": mode, "direction": direction}
    sizes = {"num_layers": layers, "num_units": 3, "input_size": 4}
    with tf.device("/gpu:0"):
        n = R.CudnnRNNParamsSize(**sizes, T=tf.float64, S=tf.int32, **attrs)
        params = R.CudnnRNNCanonicalToParams(**sizes, weights=ws, biases=bs, **attrs)
        out = getattr(R, version)(input=x, input_h=h0, input_c=c0, params=params, **attrs)
        back = R.CudnnRNNParamsToCanonical(**sizes, params=params, num_params=len(ws), **attrs)
    with tf.Session() as sess:
        size, p, got, (w2, b2) = sess.run([n, params, out, back])
    assert size.tolist() == [sum(w.size for w in ws) + sum(b.size for b in bs)] == [p.size]
    np.testing.assert_array_equal(p, np.concatenate([a.reshape(-1) for a in ws + bs]))
    for a, b in zip(w2 + b2, ws + bs, strict=True):
        np.testing.assert_array_equal(a, b)
    seq, h, c = reference(mode, ws, bs, x, h0, c0, layers, dirs)
    np.testing.assert_allclose(got[0], seq, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[1], h, rtol=1e-10, atol=1e-12)
    if mode == "lstm":
        np.testing.assert_allclose(got[2], c, rtol=1e-10, atol=1e-12)
    else:
        assert got[2].shape == ()
    assert len(got) == (4 if version == "CudnnRNN" else 5)


def test_v3_lengths_batch_major_and_bidirectional(fake_gpu):
    ws, bs, x, h0, c0, dirs = _network("lstm", 2, "bidirectional", seed=3, steps=4, batch=3)
    lengths = np.int32([4, 2, 1])
    attrs = {"direction": "bidirectional"}
    with tf.device("/gpu:0"):
        params = R.CudnnRNNCanonicalToParams(num_layers=2, num_units=3, input_size=4,
                                             weights=ws, biases=bs, **attrs)  # fmt: skip
        out = R.CudnnRNNV3(input=np.swapaxes(x, 0, 1), input_h=h0, input_c=c0, params=params,
                           sequence_lengths=lengths, time_major=False, **attrs)  # fmt: skip
    with tf.Session() as sess:
        got = sess.run(out)
    seq, h, c = reference("lstm", ws, bs, x, h0, c0, 2, dirs, lengths)
    np.testing.assert_allclose(got[0], np.swapaxes(seq, 0, 1), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[1], h, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[2], c, rtol=1e-10, atol=1e-12)


def test_projection_layout_and_values(fake_gpu):
    rng = np.random.RandomState(5)
    ws, bs = canonical(rng, "lstm", 1, 1, 4, 3, num_proj=2)
    assert [w.shape for w in ws] == [(4, 3)] * 4 + [(4, 2)] * 4 + [(2, 4)]
    x, h0, c0 = rng.randn(3, 2, 3), rng.randn(1, 2, 2) * 0.5, rng.randn(1, 2, 4) * 0.5
    sizes = {"num_layers": 1, "num_units": 4, "input_size": 3, "num_proj": 2}
    with tf.device("/gpu:0"):
        n = R.CudnnRNNParamsSize(**sizes, T=tf.float64, S=tf.int32)
        params = R.CudnnRNNCanonicalToParamsV2(**sizes, weights=ws, biases=bs)
        back = R.CudnnRNNParamsToCanonicalV2(**sizes, params=params, num_params_weights=9,
                                             num_params_biases=8)  # fmt: skip
        out = R.CudnnRNNV3(input=x, input_h=h0, input_c=c0, params=params,
                           sequence_lengths=[3, 3], num_proj=2)  # fmt: skip
    with tf.Session() as sess:
        size, (w2, b2), got = sess.run([n, back, out])
    assert size.tolist() == [4 * (4 * 3 + 4 * 2) + 2 * 4 + 8 * 4]  # W, R, P; 8 biases
    for a, b in zip(w2 + b2, ws + bs, strict=True):
        np.testing.assert_array_equal(a, b)
    seq, h, c = reference("lstm", ws, bs, x, h0, c0, 1, 1, num_proj=2)
    for a, b in zip(got[:3], (seq, h, c)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


# -- the stand-in GPU: gradients by finite differences -----------------------------------------


def _check_gradients(version, mode, layers, direction, extra=None, seed=1):
    num_proj = (extra or {}).get("num_proj", 0)
    ws, bs, x, h0, c0, dirs = _network(mode, layers, direction, seed=seed, num_proj=num_proj)
    p0 = np.concatenate([a.reshape(-1) for a in ws + bs])
    values = [x, h0, c0, p0]
    feeds = [tf.placeholder(tf.float64, v.shape) for v in values]
    rng = np.random.RandomState(seed + 10)
    with tf.device("/gpu:0"):
        kw = dict(extra or {})
        out = getattr(R, version)(input=feeds[0], input_h=feeds[1], input_c=feeds[2],
                                  params=feeds[3], rnn_mode=mode, direction=direction,
                                  **kw)  # fmt: skip
        w_out = rng.randn(*x.shape[:2], (num_proj or 3) * dirs)
        w_h = rng.randn(*h0.shape)
        loss = tf.reduce_sum(out[0] * w_out) + tf.reduce_sum(out[1] * w_h)
        if mode == "lstm":
            loss += tf.reduce_sum(out[2] * rng.randn(*c0.shape))
        grads = tf.gradients(loss, feeds)
    assert any(op.type.startswith("CudnnRNNBackprop")
               for op in tf.get_default_graph().get_operations())  # fmt: skip
    eps = 1e-6
    with tf.Session() as sess:
        g = sess.run(grads, dict(zip(feeds, values)))
        for i, v in enumerate(values):
            if i == 2 and mode != "lstm":
                np.testing.assert_array_equal(g[i], 0)
                continue
            d = rng.randn(*v.shape)
            plus = dict(zip(feeds, values))
            minus = dict(zip(feeds, values))
            plus[feeds[i]], minus[feeds[i]] = v + eps * d, v - eps * d
            numeric = (sess.run(loss, plus) - sess.run(loss, minus)) / (2 * eps)
            np.testing.assert_allclose(np.sum(g[i] * d), numeric, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mode,layers,direction", CONFIGS)
def test_gradients_match_finite_differences(fake_gpu, mode, layers, direction):
    _check_gradients("CudnnRNN", mode, layers, direction)


def test_v2_and_v3_gradients_match_finite_differences_with_lengths_and_projection(fake_gpu):
    _check_gradients("CudnnRNNV2", "gru", 2, "bidirectional")
    _check_gradients("CudnnRNNV3", "lstm", 1, "bidirectional",
                     {"sequence_lengths": np.int32([3, 2])})  # fmt: skip
    _check_gradients("CudnnRNNV3", "lstm", 2, "bidirectional",
                     {"sequence_lengths": np.int32([2, 3]), "num_proj": 2})  # fmt: skip


# -- the stand-in GPU: errors ---------------------------------------------------------------


def _run_gpu(build):
    with tf.device("/gpu:0"):
        t = build()
    with tf.Session() as sess:
        return sess.run(t)


def test_bad_inputs_raise_typed_errors(fake_gpu):
    x, h = np.zeros((2, 1, 3)), np.zeros((1, 1, 2))
    with pytest.raises(errors.InvalidArgumentError, match="params must hold 56 values"):
        _run_gpu(lambda: R.CudnnRNN(input=x, input_h=h, input_c=h, params=np.zeros(5)))
    with pytest.raises(errors.InvalidArgumentError, match="num_layers \\* 2 directions"):
        _run_gpu(lambda: R.CudnnRNN(input=x, input_h=h, input_c=h, params=np.zeros(5),
                                    direction="bidirectional"))  # fmt: skip
    with pytest.raises(errors.UnimplementedError, match="skip_input"):
        _run_gpu(lambda: R.CudnnRNN(input=x, input_h=h, input_c=h, params=np.zeros(56),
                                    input_mode="skip_input"))  # fmt: skip
    h2 = np.zeros((2, 1, 2))
    with pytest.raises(errors.UnimplementedError, match="dropout"):
        _run_gpu(lambda: R.CudnnRNN(input=x, input_h=h2, input_c=h2, params=np.zeros(104),
                                    dropout=0.5))  # fmt: skip
    sizes = {"num_layers": 1, "num_units": 2, "input_size": 3}
    with pytest.raises(errors.InvalidArgumentError, match="8 weights and 8 biases"):
        _run_gpu(lambda: R.CudnnRNNParamsToCanonical(**sizes, params=np.zeros(56),
                                                     num_params=6))  # fmt: skip
    with pytest.raises(errors.InvalidArgumentError, match="params must hold 56 values"):
        _run_gpu(lambda: R.CudnnRNNParamsToCanonical(**sizes, params=np.zeros(50),
                                                     num_params=8))  # fmt: skip
    with pytest.raises(errors.InvalidArgumentError, match="weight 0 must hold 6 values"):
        _run_gpu(lambda: R.CudnnRNNCanonicalToParams(
            **sizes, weights=[np.zeros(5)] * 8, biases=[np.zeros(2)] * 8))  # fmt: skip
    with pytest.raises(errors.InvalidArgumentError, match="num_units must be positive"):
        _run_gpu(lambda: R.CudnnRNNParamsSize(num_layers=1, num_units=0, input_size=3,
                                              T=tf.float32, S=tf.int32))  # fmt: skip
