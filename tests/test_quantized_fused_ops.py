"""The fused quantized raw ops of ops/quantized_fused_ops.py against TF 2.21, recorded by
tests/fixtures/quantized_fused_cases.py into quantized_fused_tf.json: their OpDefs, the
static shapes TF's shape functions give, and every output code (float32 bit pattern for
float outputs) of TF's unfused chain of CPU kernels, which is what each fused op computes
here (TF's own fused kernels are oneDNN placeholders on its CPU build: recorded errors).
QuantizedBatchNormWithGlobalNormalization's, QuantizedResizeBilinear's and
QuantizedInstanceNorm's values are TF's own kernels' (they compute on CPU)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import dtypes, errors
from asyncflow.registry import REQUIRED, TypeConstraint, get_op_def

_RECORD = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "quantized_fused_tf.json").read_text()
)
_OPDEFS = _RECORD["opdefs"]
_CASES = {c["label"]: c for c in _RECORD["cases"]}


def _arg(a) -> list:
    return [a.name, a.fixed_dtype.name if a.fixed_dtype else None, a.type_attr, a.number_attr]


def _default(value):
    if isinstance(value, list | tuple):
        return [_default(v) for v in value]
    if isinstance(value, dtypes.DType):
        return value.name
    return value


@pytest.mark.parametrize("name", sorted(_OPDEFS))
def test_opdef_as_tf(name):
    want, op_def = _OPDEFS[name], get_op_def(name)
    for got, arg in ((op_def.inputs, want["inputs"]), (op_def.outputs, want["outputs"])):
        assert [_arg(a) for a in got] == [
            [a["name"], a["type"], a["type_attr"], a["number_attr"]] for a in arg
        ]
    assert list(op_def.attrs) == [a["name"] for a in want["attrs"]]
    for a in want["attrs"]:
        got = op_def.attrs[a["name"]]
        if a["type"] == "type":
            assert isinstance(got, TypeConstraint)
            assert sorted(d.name for d in got.allowed) == sorted(a["allowed"])
            assert _default(got.default) == (a["default"] if a["has_default"] else None)
        elif not a["has_default"]:
            assert got is REQUIRED, a["name"]
        else:
            assert _default(got) == a["default"], a["name"]
    assert op_def.stateful == want["stateful"]


def _tensor(spec):
    if not (isinstance(spec, list) and isinstance(spec[0], str)):
        return tf.constant(spec, tf.float32)
    dtype, shape, values = spec
    if dtype == "float32":
        return tf.constant(np.array(values, np.float32).reshape(shape))
    return tf.constant(np.array(values, np.int64).reshape(shape), getattr(tf, dtype))


def _build(case, inputs=None):
    kw = {k: _tensor(v) for k, v in (inputs or case["inputs"]).items()}
    for k, v in case["attrs"].items():
        kw[k] = getattr(tf, v) if k in ("out_type", "Toutput") else v
    out = getattr(tf.raw_ops, case["op"])(**kw)
    return list(out) if isinstance(out, tuple | list) else [out]


def _encode(v) -> dict:
    v = np.asarray(v)
    if v.dtype == np.float32:
        return {"shape": list(v.shape), "bits": v.reshape(-1).view(np.uint32).tolist()}
    codes = v.view(v.dtype[0]) if v.dtype.names else v
    return {"shape": list(v.shape), "codes": codes.astype(np.int64).reshape(-1).tolist()}


def _run(case, inputs=None):
    with tf.Graph().as_default():
        outs = _build(case, inputs)
        static = [o.shape.as_list() if o.shape.rank is not None else None for o in outs]
        with tf.Session() as sess:
            return static, [_encode(v) for v in sess.run(outs)]


@pytest.mark.parametrize("label", sorted(_CASES))
def test_values_and_shapes_as_tf(label):
    case = _CASES[label]
    static, values = _run(case)
    assert static == case["static"]
    assert values == case["outputs"]


def _shifted(case, keys):
    """The case with the quint8 codes of `keys` as the qint8 codes of the same values."""
    inputs = json.loads(json.dumps(case["inputs"]))
    for k in keys:
        inputs[k] = ["qint8", inputs[k][1], (np.array(inputs[k][2]) - 128).tolist()]
    return inputs


@pytest.mark.parametrize(
    "label, keys",
    [
        ("conv_bias_relu_req", ["filter"]),
        ("dw_bias", ["filter"]),
        ("mm_bias_req", ["b"]),
        ("conv_bias_signed_sum", ["summand"]),
    ],
)
def test_qint8_codes_give_the_same_values(label, keys):
    case = _CASES[label]
    assert _run(case, _shifted(case, keys))[1] == case["outputs"]


def test_tf_fused_kernels_do_not_compute_on_cpu():
    # what the record says TF's own fused kernels do (why the chain is the reference)
    fused = _RECORD["tf_fused"]
    own = {"QuantizedBatchNormWithGlobalNormalization", "QuantizedResizeBilinear"}
    assert set(fused) == set(_OPDEFS) - own - {"QuantizedInstanceNorm"}
    assert all(outcome.startswith("ERR ") for outcome in fused.values())


@pytest.mark.parametrize("name", sorted(_OPDEFS))
def test_no_gradient_as_tf(name):
    op_def = get_op_def(name)
    assert _RECORD["gradients"][name] == "none"
    assert op_def.grad_fn is None and not op_def.not_differentiable


def _error(case, inputs=None, attrs=None):
    case = {**case, "attrs": {**case["attrs"], **(attrs or {})}}
    with tf.Graph().as_default():
        outs = _build(case, inputs)
        with tf.Session() as sess:
            sess.run(outs)


def test_bias_of_the_wrong_size_is_invalid():
    case = _CASES["conv_bias"]
    inputs = {**case["inputs"], "bias": ["float32", [2], [0.5, 1.0]]}
    with pytest.raises(ValueError), tf.Graph().as_default():
        _build(case, {**inputs, "bias": ["float32", [1, 3], [[0.5, 1.0, 2.0]]]})
    with pytest.raises(errors.InvalidArgumentError, match="as many biases"):
        _error(case, inputs)


def test_unregistered_types_and_modes_raise():
    with pytest.raises(errors.InvalidArgumentError, match="No OpKernel was registered"):
        _error(_CASES["conv_bias"], attrs={"out_type": "quint8"})
    with pytest.raises(errors.UnimplementedError, match="MIN_FIRST"):
        _error(_CASES["mm_bias"], attrs={"input_quant_mode": "SCALED"})
    with pytest.raises(errors.InvalidArgumentError, match="min_freezed_output must be <= 0"):
        inputs = {**_CASES["conv_req"]["inputs"], "min_freezed_output": 1.0}
        _error(_CASES["conv_req"], inputs)


def test_resize_of_qint32_to_the_same_size_copies_the_codes():
    case = _CASES["resize_qint32"]
    inputs = {**case["inputs"], "size": ["int32", [2], [2, 3]]}
    assert _run(case, inputs)[1][0]["codes"] == np.ravel(case["inputs"]["images"][2]).tolist()


def test_instance_norm_ranges_must_be_ordered():
    case = _CASES["inorm"]
    with pytest.raises(errors.InvalidArgumentError, match="input_min must be less than"):
        _error(case, {**case["inputs"], "x_min": 3.0})
    with pytest.raises(errors.InvalidArgumentError, match="given_y_min must be less than"):
        _error(case, attrs={"output_range_given": True, "given_y_min": 1.0, "given_y_max": 0.0})
    with pytest.raises(errors.InvalidArgumentError, match="No OpKernel was registered"):
        _error(case, {**case["inputs"], "x": ["qint8", [1, 1, 1, 1], [3]]})


def test_qint32_bias_is_read_in_the_core_output_range():
    # a qint32 bias stands for its codes' values in the range QuantizedConv2D gives
    case = _CASES["conv_bias"]
    ins = case["inputs"]
    codes = np.array([-(2**20), 3 * 2**19, 2**21], np.int64)
    with tf.Graph().as_default():
        conv = tf.raw_ops.QuantizedConv2D(
            input=_tensor(ins["input"]), filter=_tensor(ins["filter"]),
            min_input=ins["min_input"], max_input=ins["max_input"],
            min_filter=ins["min_filter"], max_filter=ins["max_filter"], **case["attrs"],
        )  # fmt: skip
        values = tf.raw_ops.Dequantize(
            input=tf.constant(codes, tf.qint32), min_range=conv[1], max_range=conv[2],
            mode="MIN_FIRST",
        )  # fmt: skip
        with tf.Session() as sess:
            floats = sess.run(values)
    frozen = {"min_freezed_output": -10.0, "max_freezed_output": 12.0}
    op = {**case, "op": "QuantizedConv2DWithBiasAndRequantize"}
    as_float = {**ins, **frozen, "bias": ["float32", [3], floats.tolist()]}
    as_codes = {**ins, **frozen, "bias": ["qint32", [3], codes.tolist()]}
    assert _run(op, as_codes)[1] == _run(op, as_float)[1]
