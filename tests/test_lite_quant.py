"""tf.lite post-training quantization, dynamic range (int8 weights, float activations)
and full integer (int8 activations and weights, calibrated on a representative
dataset): asyncflow's converter writes TF's operators, versions, tensor types and
quantization parameters (int8 weights bit-equal), and its interpreter runs TF's files
and its own to TF's outputs. (TF 2.21's interpreter was run by hand on asyncflow's
files: every output equal to what it gives for its own files.)

Recorded from TF 2.21 by tests/fixtures/lite/record_quant_tf.py: the tfq_*.tflite files
TF's converter writes for the graphs of tests/fixtures/lite_quant_cases.py, and
tfq_facts.json (their tensors' types and quantization parameters, operator versions,
and TF's interpreter's outputs with its reference kernels and with its default ones).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph as ops
from asyncflow.lite import quant_kernels, schema

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
from lite_cases import CASES as LITE_CASES  # noqa: E402
from lite_cases import constant_maker as lite_constant_maker  # noqa: E402
from lite_quant_cases import QUANT_CASES, calibration, constant_maker, sample  # noqa: E402

LITE = FIXTURES / "lite"
FACTS = json.loads((LITE / "tfq_facts.json").read_text())


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _case(fname: str) -> str:
    return fname.split("_")[1]


def _invoke(interp, case: str) -> np.ndarray:
    interp.allocate_tensors()
    d = interp.get_input_details()[0]
    x = sample(QUANT_CASES[case][1])
    if d["dtype"] != np.float32:
        scale, zero = d["quantization"]
        info = np.iinfo(d["dtype"])
        x = np.clip(np.round(x / scale) + zero, info.min, info.max).astype(d["dtype"])
    interp.set_tensor(d["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


@pytest.mark.parametrize("fname", sorted(FACTS))
def test_interpreter_runs_tfs_quantized_files_to_tfs_outputs(fname):
    got = _invoke(tf.lite.Interpreter(model_path=str(LITE / fname)), _case(fname))
    want = np.asarray(FACTS[fname]["output"])
    default = np.asarray(FACTS[fname]["output_default"])
    if fname.endswith("_dynamic.tflite"):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(got, default, rtol=1e-5, atol=1e-6)
        return
    # Full integer: bit-equal to TF's reference kernels; TF's default (optimized,
    # XNNPACK) kernels round a few values one or two steps differently.
    np.testing.assert_array_equal(got, want)
    step = 1.0
    if got.dtype == np.float32:  # a DEQUANTIZE at the output
        step = FACTS[fname]["tensors"][FACTS[fname]["ops"][-1][2][0]]["scale"][0]
    assert np.abs(got.astype(np.float64) - default).max() <= 2 * step + 1e-7


@pytest.mark.parametrize("fname", sorted(FACTS))
def test_details_carry_tfs_quantization_parameters(fname):
    interp = tf.lite.Interpreter(model_path=str(LITE / fname))
    details = {d["index"]: d for d in interp.get_tensor_details()}
    for i, t in enumerate(FACTS[fname]["tensors"]):
        d = details[i]
        assert d["name"] == t["name"]
        assert list(d["shape"]) == t["shape"]
        params = d["quantization_parameters"]
        if "scale" not in t:
            assert len(params["scales"]) == 0
            continue
        np.testing.assert_array_equal(params["scales"], np.float32(t["scale"]))
        np.testing.assert_array_equal(params["zero_points"], t["zero_point"])
        assert params["quantized_dimension"] == t["quantized_dimension"]
        if len(t["scale"]) == 1:
            assert d["quantization"] == (np.float32(t["scale"][0]), t["zero_point"][0])


def test_quantize_multiplier_and_fixed_point_rounding_follow_tflite():
    mult, shift = quant_kernels.quantize_multiplier([0.5, 0.75, 1.0, 3.0, 0.0, 1e-12])
    assert mult.tolist() == [1 << 30, 1610612736, 1 << 30, 1610612736, 0, 0]
    assert shift.tolist() == [0, 0, 1, 2, 0, 0]
    x = np.array([5, -5, 6, -6, 7, -7, 1 << 20])
    # x * 0.5 with gemmlowp's doubling high multiply: +2.5 -> 3 but -2.5 -> -2.
    got = quant_kernels.multiply_by_quantized_multiplier(x, 1 << 30, 0)
    assert got.tolist() == [3, -2, 3, -3, 4, -3, 1 << 19]
    # Then the rounding right shift rounds halves away from zero (-0.5 -> -1).
    got = quant_kernels.multiply_by_quantized_multiplier(x, 1 << 30, -2)
    assert got.tolist() == [1, -1, 1, -1, 1, -1, 1 << 17]


def _convert(case: str, mode: str, **options) -> bytes:
    build, shape = QUANT_CASES[case]
    x = tf.placeholder(tf.float32, shape, name="x")
    y = build(tf, constant_maker(tf), x)
    with tf.Session() as sess:
        conv = tf.lite.TFLiteConverter.from_session(sess, [x], [y])
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    if mode != "dynamic":
        conv.representative_dataset = lambda: ([v] for v in calibration(shape))
    if mode in ("int8", "uint8"):
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = getattr(tf, mode)
        conv.inference_output_type = getattr(tf, mode)
    for key, value in options.items():
        setattr(conv, key, value)
    return conv.convert()


def _operators(model: dict) -> list:
    codes = model["operator_codes"]
    return [
        (
            schema.BUILTIN_NAMES[codes[op["opcode_index"]]["builtin_code"]],
            codes[op["opcode_index"]]["version"],
            [int(i) for i in op["inputs"]],
            [int(i) for i in op["outputs"]],
        )
        for op in model["subgraphs"][0]["operators"]
    ]


@pytest.mark.parametrize("fname", sorted(FACTS))
def test_converter_quantizes_as_tf_does(fname):
    case, mode = fname[len("tfq_") : -len(".tflite")].split("_")
    content = _convert(case, mode)
    ours, theirs = schema.read_model(content), schema.read_model((LITE / fname).read_bytes())
    facts = FACTS[fname]
    mine = _operators(ours)
    # TF's operators, in TF's order, with TF's versions.
    assert [(n, v) for n, v, _, _ in mine] == [(n, v) for n, v, _, _ in facts["ops"]]
    tensors = ours["subgraphs"][0]["tensors"]
    for (_, _, ins, outs), (_, _, t_ins, t_outs) in zip(mine, facts["ops"], strict=True):
        for i, j in zip(ins + outs, t_ins + t_outs, strict=True):
            assert (i < 0) == (j < 0)
            if i < 0:
                continue
            got, want = tensors[i], facts["tensors"][j]
            assert got["type"] == want["type"], want["name"]
            q = quant_kernels.quant_of(got)
            if "scale" not in want:
                assert q is None, want["name"]
                continue
            # Calibrated ranges come from our float kernels, which may differ from
            # TFLite's in the last bit; scales agree to that bit.
            np.testing.assert_allclose(q.scale, np.float32(want["scale"]), rtol=3e-7)
            assert q.zero_point.tolist() == want["zero_point"], want["name"]
            assert q.axis == want["quantized_dimension"]
            data = ours["buffers"][got["buffer"]].get("data")
            if data is not None and len(data):
                tf_t = theirs["subgraphs"][0]["tensors"][j]
                tf_data = theirs["buffers"][tf_t["buffer"]]["data"]
                # int8 weights and int32 biases: bit-equal to TF's.
                np.testing.assert_array_equal(data, tf_data)
    got = _invoke(tf.lite.Interpreter(model_content=content), case)
    if mode == "dynamic" or mode == "floatio":
        np.testing.assert_allclose(got, FACTS[fname]["output"], rtol=1e-5, atol=1e-7)
    else:
        np.testing.assert_array_equal(got, FACTS[fname]["output"])


def test_quantization_errors_are_tfs():
    x = tf.placeholder(tf.float32, [1, 4], name="x")
    y = tf.nn.relu(tf.matmul(x, tf.constant(np.ones((4, 3), np.float32))))
    with tf.Session() as sess:
        conv = tf.lite.TFLiteConverter.from_session(sess, [x], [y])
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    with pytest.raises(ValueError, match="a `representative_dataset` must be specified"):
        conv.convert()
    conv.representative_dataset = lambda: iter([[np.ones((1, 4), np.float32)]])
    conv.inference_input_type = tf.int16
    with pytest.raises(ValueError, match=r"instead got tf.int16\."):
        conv.convert()
    conv.optimizations = []
    conv.inference_input_type = tf.int8
    with pytest.raises(ValueError, match="`quantized_input_stats` flag must be defined"):
        conv.convert()


# TF 2.21's converter on these graphs (int8 with a one-sample representative dataset,
# also with supported_ops=[TFLITE_BUILTINS_INT8]): (operator, version, input types,
# output types), 0 float32, 9 int8. SIN has no int8 kernel and stays float.
TF_FALLBACK = {
    "exp": [("QUANTIZE", 1, [0], [9]), ("EXP", 2, [9], [9]), ("DEQUANTIZE", 2, [9], [0])],
    "sin": [
        ("SIN", 1, [0], [0]),
        ("QUANTIZE", 1, [0], [9]),
        ("MUL", 2, [9, 9], [9]),
        ("DEQUANTIZE", 2, [9], [0]),
    ],
}


@pytest.mark.parametrize("case", sorted(TF_FALLBACK))
@pytest.mark.parametrize("int8_only", [False, True])
def test_ops_without_int8_kernels_stay_float_as_in_tf(case, int8_only):
    x = tf.placeholder(tf.float32, [1, 4], name="x")
    y = tf.exp(x) if case == "exp" else tf.nn.relu(tf.sin(x) * 2.0)
    with tf.Session() as sess:
        conv = tf.lite.TFLiteConverter.from_session(sess, [x], [y])
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    sample = np.linspace(-1, 1, 4, dtype=np.float32).reshape(1, 4)
    conv.representative_dataset = lambda: iter([[sample]])
    if int8_only:
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    content = conv.convert()
    model = schema.read_model(content)
    tensors = model["subgraphs"][0]["tensors"]
    got = [
        (name, version, [tensors[i]["type"] for i in ins], [tensors[i]["type"] for i in outs])
        for name, version, ins, outs in _operators(model)
    ]
    assert got == TF_FALLBACK[case]
    interp = tf.lite.Interpreter(model_content=content)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], sample)
    interp.invoke()
    out = interp.get_tensor(interp.get_output_details()[0]["index"])
    want = np.exp(sample) if case == "exp" else np.maximum(np.sin(sample) * 2, 0)
    np.testing.assert_allclose(out, want, atol=0.02)


def test_small_weights_stay_float_in_dynamic_range_models():
    x = tf.placeholder(tf.float32, [1, 4], name="x")
    y = tf.matmul(x, tf.constant(np.ones((4, 3), np.float32)))
    with tf.Session() as sess:
        conv = tf.lite.TFLiteConverter.from_session(sess, [x], [y])
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    model = schema.read_model(conv.convert())
    assert all(t["type"] == schema.FLOAT32 for t in model["subgraphs"][0]["tensors"])


def test_float16_quantization_matches_tfs_file():
    # tests/fixtures/lite/tf_cnn_f16.tflite: TF 2.21's float16 conversion of lite_cases'
    # "cnn" graph (recorded by record_lite_tf.py; test_lite checks TF's outputs for it).
    build, shapes = LITE_CASES["cnn"][:2]
    xs = [tf.placeholder(tf.float32, s, name=f"x{i}") for i, s in enumerate(shapes)]
    ys = build(tf, lite_constant_maker(tf), *xs)
    with tf.Session() as sess:
        conv = tf.lite.TFLiteConverter.from_session(sess, xs, ys)
    conv.target_spec.supported_types = [tf.float16]
    float_model = conv.convert()  # float16 without optimizations: TF keeps float32
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    content = conv.convert()
    theirs = schema.read_model((LITE / "tf_cnn_f16.tflite").read_bytes())
    ours = schema.read_model(content)
    assert sorted((n, v) for n, v, _, _ in _operators(ours)) == sorted(
        (n, v) for n, v, _, _ in _operators(theirs)
    )
    assert all(
        t["type"] != schema.FLOAT16
        for t in schema.read_model(float_model)["subgraphs"][0]["tensors"]
    )

    def halves(model):
        sg = model["subgraphs"][0]
        return sorted(
            bytes(model["buffers"][t["buffer"]]["data"])
            for t in sg["tensors"]
            if t["type"] == schema.FLOAT16
        )

    # The same float16 constants, bit for bit.
    assert halves(ours) == halves(theirs)
    x = np.random.RandomState(1).uniform(-1, 1, shapes[0]).astype(np.float32)
    results = []
    for model in (content, (LITE / "tf_cnn_f16.tflite").read_bytes()):
        interp = tf.lite.Interpreter(model_content=model)
        interp.allocate_tensors()
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        results.append(interp.get_tensor(interp.get_output_details()[0]["index"]))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fname", ["tfq_cnn_int8.tflite", "tfq_dw_dynamic.tflite"])
def test_corrupt_quantized_files_raise_only_value_or_runtime_errors(fname):
    base = (LITE / fname).read_bytes()
    rng = np.random.RandomState(11)
    for _ in range(60):
        content = bytearray(base)
        for i in rng.randint(len(content), size=rng.randint(1, 4)):
            content[i] = rng.randint(256)
        try:
            interp = tf.lite.Interpreter(model_content=bytes(content))
            interp.allocate_tensors()
            for d in interp.get_input_details():
                interp.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
            interp.invoke()
        except (ValueError, RuntimeError):
            pass
