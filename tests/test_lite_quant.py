"""tf.lite post-training quantization: asyncflow's interpreter runs TF's quantized files
(dynamic range: int8 weights with float activations; full integer: int8 activations and
weights) to TF's outputs.

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
from asyncflow.lite import quant_kernels

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
from lite_quant_cases import QUANT_CASES, sample  # noqa: E402

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
    if d["dtype"] == np.int8:
        scale, zero = d["quantization"]
        x = np.clip(np.round(x / scale) + zero, -128, 127).astype(np.int8)
    interp.set_tensor(d["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


@pytest.mark.parametrize("fname", sorted(FACTS))
def test_interpreter_runs_tfs_quantized_files_to_tfs_outputs(fname):
    got = _invoke(tf.lite.Interpreter(model_path=str(LITE / fname)), _case(fname))
    want = np.asarray(FACTS[fname]["output"])
    default = np.asarray(FACTS[fname]["output_default"])
    if fname.endswith("_int8.tflite"):
        assert got.dtype == np.int8
        # Bit-equal to TF's reference kernels; TF's default (optimized, XNNPACK) kernels
        # round a few values one or two steps differently.
        np.testing.assert_array_equal(got, want)
        assert np.abs(got.astype(int) - default).max() <= 2
    else:
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(got, default, rtol=1e-5, atol=1e-6)


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
