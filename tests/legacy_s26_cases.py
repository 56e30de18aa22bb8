"""Runs recorded tf.raw_ops cases (tests/fixtures/legacy_s26b/*.json) through asyncflow.

Each case names an op, its inputs (value, shape, dtype), attrs, and what TensorFlow 2.21
gave: the outputs, the static shapes, the gradients for a given upstream gradient, or the
error (class and message at run time, class at build time).  The recording script built
the same op with tf.raw_ops in a TF1 graph and ran it in a Session.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "legacy_s26b"


def load(name: str) -> list[dict]:
    return json.loads((FIXTURES / name).read_text())["cases"]


def _array(spec):
    if spec["dtype"] == "string":
        flat = [s.encode("latin1") for s in spec["value"]]
        return np.array(flat, dtype=object).reshape(spec["shape"])
    dtype = tf.as_dtype(spec["dtype"])
    return np.array(spec["value"], dtype=dtype.as_numpy_dtype).reshape(spec["shape"])


def _tensor(spec):
    return tf.constant(_array(spec), dtype=tf.as_dtype(spec["dtype"]))


def _attr(value):
    if isinstance(value, str) and value.startswith("dtype:"):
        return tf.as_dtype(value[6:])
    if isinstance(value, list) and value and isinstance(value[0], str):
        return [_attr(v) for v in value]
    return value


def _close(got, spec, rtol, atol, what):
    want = _array(spec)
    got = np.asarray(got)
    assert list(got.shape) == spec["shape"], f"{what}: shape {got.shape} != {spec['shape']}"
    assert tf.as_dtype(got.dtype).name == spec["dtype"] or spec["dtype"] == "string", what
    if want.dtype == object:
        assert [bytes(v) for v in got.reshape(-1)] == list(want.reshape(-1)), what
    elif want.dtype.kind in "fc" or spec["dtype"] == "bfloat16":
        np.testing.assert_allclose(
            got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, err_msg=what
        )
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def run_case(case: dict, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """Build and run `case` in a fresh graph; assert it does what TF 2.21 did."""
    expect = case["expect"]
    with tf.Graph().as_default():
        feeds = {}
        args = {}
        for k, spec in case["args"].items():
            if isinstance(spec, list):
                args[k] = [_tensor(s) for s in spec]
            elif case.get("feed"):
                value = _array(spec)
                args[k] = tf.placeholder(tf.as_dtype(spec["dtype"]), value.shape)
                feeds[args[k]] = value
            else:
                args[k] = _tensor(spec)
        attrs = {k: _attr(v) for k, v in case["attrs"].items()}
        fn = getattr(tf.raw_ops, case["op"])
        if "build_error" in expect:
            cls = expect["build_error"][0]
            try:
                fn(**args, **attrs)
            except Exception as e:  # noqa: BLE001 - the class is compared below
                assert type(e).__name__ == cls, f"{case['name']}: {e!r}"
            else:
                raise AssertionError(f"{case['name']}: built, TF raised {cls}")
            return
        res = fn(**args, **attrs)
        if isinstance(res, tf.Operation):
            outs = []
        elif isinstance(res, tuple | list):
            outs = list(res)
        else:
            outs = [res]
        outs = [t for o in outs for t in (o if isinstance(o, list) else [o])]
        for t, shape in zip(outs, expect["static_shapes"]):
            got = None if t.shape.ndims is None else t.shape.as_list()
            assert got == shape, f"{case['name']}: static shape {got} != TF's {shape}"
        grads = []
        if "grad" in case:
            g = case["grad"]
            ys = outs[g.get("output", 0)]
            gy = tf.constant(np.array(g["grad_ys"], ys.dtype.as_numpy_dtype))
            grads = tf.gradients(ys, [args[k] for k in g["wrt"]], grad_ys=gy)
            if "grad_is_none" in expect:
                assert [t is None for t in grads] == expect["grad_is_none"], case["name"]
            grads = [t for t in grads if t is not None]
        with tf.Session() as sess:
            if "error" in expect:
                cls, msg = expect["error"]
                try:
                    sess.run(outs, feeds)
                except tf.errors.OpError as e:
                    assert type(e).__name__ == cls, f"{case['name']}: {e!r}"
                    got = e.message.split("\n\t [[")[0]  # (less the node asyncflow adds)
                    assert got == msg, f"{case['name']}: {got!r} != {msg!r}"
                else:
                    raise AssertionError(f"{case['name']}: ran, TF raised {cls}")
                return
            values = sess.run(outs + grads, feeds)
    unchecked = set(case.get("unchecked", ()))  # (memory TF's kernel leaves unwritten)
    for k, (v, spec) in enumerate(zip(values, expect["outputs"] + expect.get("grads", []))):
        if k in unchecked:
            continue
        rows = case.get("rows_written", {}).get(str(k))
        if rows is not None:  # (TF's kernel leaves the later rows unwritten)
            v = np.asarray(v)[:rows]
            spec = dict(spec, value=_array(spec)[:rows].reshape(-1).tolist())
            spec["shape"] = [rows, *spec["shape"][1:]]
        _close(v, spec, rtol, atol, f"{case['name']} result {k}")
