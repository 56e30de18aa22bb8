"""TF's quantization ops (ops/quantization_ops.py) against TF 2.21's recorded results
(tests/fixtures/quantization/, recorded by record_quantization.py from
quantization_cases.py):

- the same graph built by asyncflow gives TF's values bit for bit (fake quantization,
  QuantizeV2 / Dequantize in every mode and quantized type, QuantizedConcat) and TF's
  gradients (the sums over min / max to float32 rounding: TF's reduction order differs);
- TF's own GraphDef (with TF's gradient ops) imports and runs to the same values;
- each error case raises TF's error class with TF's message;
- gradients of the fake-quant ops as TF's registered ones; none for QuantizeV2 /
  Dequantize (TF registers none either).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
import quantization_cases as cases  # noqa: E402

FIX = HERE / "quantization"
FETCHES = json.loads((FIX / "fetches.json").read_text())
ERRORS = json.loads((FIX / "errors.json").read_text())
with np.load(FIX / "values.npz", allow_pickle=False) as _npz:
    VALUES = {k: _npz[k] for k in _npz.files}


def _is_sum(key: str) -> bool:
    return key.endswith(("_dmin", "_dmax"))


def _check(got: dict) -> None:
    assert set(got) == set(VALUES)
    for k, want in VALUES.items():
        g = np.asarray(got[k])
        if FETCHES[k]["dtype"] == "bfloat16":
            g = g.astype(np.float32)
        assert g.dtype == want.dtype, k
        assert g.shape == want.shape, k
        if _is_sum(k):
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-5, err_msg=k)
        else:
            np.testing.assert_array_equal(g, want, err_msg=k)


def test_built_here_matches_tf_bit_for_bit():
    with tf.Graph().as_default() as g:
        out = cases.build(tf)
        with tf.Session() as sess:
            got = sess.run(out, {g.get_tensor_by_name("x:0"): cases.X})
    assert out["args0"].op.type == "FakeQuantWithMinMaxArgs"
    assert out["q_qint8_0"].op.type == "QuantizeV2" and out["q_qint8_0"].dtype == tf.qint8
    assert out["q_qint8_0_deq"].op.type == "Dequantize"
    assert out["concat0"].op.type == "QuantizedConcat"
    _check(got)


def test_tf_graph_def_imports_and_runs():
    gd = tf.GraphDef()
    gd.ParseFromString((FIX / "graph.pb").read_bytes())
    types = {n.op for n in gd.node}
    assert {
        "FakeQuantWithMinMaxArgsGradient",
        "FakeQuantWithMinMaxVarsGradient",
        "FakeQuantWithMinMaxVarsPerChannelGradient",
        "QuantizeV2",
        "Dequantize",
        "QuantizedConcat",
    } <= types
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        fetch = {k: g.get_tensor_by_name(rec["tensor"]) for k, rec in FETCHES.items()}
        assert all(fetch[k].dtype.name == rec["dtype"] for k, rec in FETCHES.items())
        with tf.Session() as sess:
            got = sess.run(fetch, {g.get_tensor_by_name("x:0"): cases.X})
    _check(got)


@pytest.mark.parametrize("name", sorted(cases.ERRORS))
def test_errors_as_tf(name):
    want = ERRORS[name]
    error = getattr(tf.errors, want["error"], None) or {"ValueError": ValueError}[want["error"]]
    with tf.Graph().as_default():
        x = tf.placeholder_with_default(cases.X, [None, 16])
        with pytest.raises(error) as info:
            t = cases.ERRORS[name](tf, x)
            with tf.Session() as sess:
                sess.run(t)
    assert want["message"] in str(info.value)


def test_quantized_values_feed_and_fetch_as_tf():
    """TF hands out a qint8 tensor's integers and takes them as a feed."""
    with tf.Graph().as_default(), tf.Session() as sess:
        p = tf.placeholder(tf.qint8, [3])
        deq = tf.dequantize(p, -1.0, 1.0)
        q = tf.quantize(tf.constant([-1.0, 0.0, 1.0]), -1.0, 1.0, tf.qint8)
        got_q, got_deq = sess.run([q.output, deq], {p: np.array([-128, 0, 127], np.int8)})
    assert got_q.dtype == np.int8 and got_q.tolist() == [-128, -1, 127]  # (TF's values)
    np.testing.assert_array_equal(got_deq, np.float32([-1.0, 0.003921627998352051, 1.0]))


def test_no_gradient_for_quantize_and_dequantize_as_tf():
    with tf.Graph().as_default():
        x = tf.constant([0.5, 1.0])
        q = tf.quantize(x, -1.0, 1.0, tf.quint8)
        y = tf.dequantize(q.output, q.output_min, q.output_max)
        with pytest.raises(LookupError):
            tf.gradients(y, [x])


def test_fake_quant_gradients_are_the_straight_through_estimator():
    """d/dx of fake quant is 1 inside the nudged range and 0 outside (TF's registered
    gradient), whatever the dtype of the incoming gradient's graph."""
    x0 = np.float32([-7.0, -0.2, 0.0, 3.3, 5.9, 6.2])  # (nudged range [-6.02, 5.98])
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.constant(x0)
        y = tf.fake_quant_with_min_max_args(x, min=-6.0, max=6.0)
        (dx,) = tf.gradients(y, [x])
        assert dx.op.type == "FakeQuantWithMinMaxArgsGradient"
        np.testing.assert_array_equal(sess.run(dx), [0, 1, 1, 1, 1, 0])
