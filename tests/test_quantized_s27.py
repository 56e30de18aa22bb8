"""The uniform-quantized raw ops (UniformQuantize, UniformDequantize, UniformRequantize,
UniformQuantizedAdd, ...ClipByValue, ...Dot, ...DotHybrid) against TF 2.21's recorded
results (fixtures/quantized_s27_tf.json, recorded by fixtures/record_quantized_s27_tf.py
from fixtures/quantized_s27_cases.py): every output code, or float32 bit pattern, and
each static shape; per-tensor and per-axis parameters, TF's rounding of ties, values
beyond int32, narrow and inverted clamp ranges, broadcasting; then TF's errors at build
and run time, and no gradient (TF registers none)."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import quantized_s27_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "quantized_s27_tf.json").read_text())


@pytest.fixture(scope="module")
def built():
    with ops.Graph().as_default(), af.device("/cpu:0"):
        out = cases.build(af)
        shapes = {k: t.shape.as_list() if t.shape.ndims is not None else None
                  for k, t in out.items()}  # fmt: skip
        with Session() as sess:
            return sess.run(out), shapes


def _encode(x) -> dict:
    x = np.asarray(x)
    if x.dtype.names:
        x = x.view(x.dtype.fields[x.dtype.names[0]][0])
    if x.dtype == np.float32:
        return {"shape": list(x.shape), "bits": x.reshape(-1).view(np.uint32).tolist()}
    return {"shape": list(x.shape), "codes": x.astype(np.int64).reshape(-1).tolist()}


def test_every_case_recorded(built):
    assert sorted(built[0]) == sorted(TF["values"])


@pytest.mark.parametrize("key", sorted(TF["values"]))
def test_values_as_tf(built, key):
    got, shapes = built
    want = dict(TF["values"][key])
    assert shapes[key] == want.pop("static")
    assert _encode(got[key]) == want


@pytest.mark.parametrize("key", sorted(TF["errors"]))
def test_errors_as_tf(key):
    want = TF["errors"][key]
    with ops.Graph().as_default(), af.device("/cpu:0"):
        if want["when"] == "build":
            with pytest.raises(ValueError) as info:
                cases.errors(af)[key]()
            # (TF then names the node, its attrs and its input shapes)
            assert str(info.value).split(" for '")[0] == want["message"].split(" for '")[0]
            return
        outs = cases.errors(af)[key]()
        with Session() as sess, pytest.raises(errors.OpError) as info:
            sess.run(outs[0])
    assert type(info.value).__name__ == want["error"]
    message = info.value.message
    if want["message"].startswith("No OpKernel was registered"):
        # (TF lists the node's attrs in its own order and its kernels' constraints)
        assert message.split(" used by ")[0] == want["message"].split(" used by ")[0]
    else:
        assert message.split("\n\t [[")[0] == want["message"]


UNIFORM_OPS = [
    "UniformQuantize", "UniformDequantize", "UniformRequantize", "UniformQuantizedAdd",
    "UniformQuantizedClipByValue", "UniformQuantizedDot", "UniformQuantizedDotHybrid",
    "UniformQuantizedConvolution", "UniformQuantizedConvolutionHybrid",
]  # fmt: skip


def test_conv_output_per_axis_needs_rhs_per_axis():
    # (recorded from TF 2.21 eagerly: its graph-mode run of this case crashes the process)
    with ops.Graph().as_default(), af.device("/cpu:0"):
        six = ([0.1] * 6, [0] * 6)
        y = cases._conv(
            af, af.bitcast(af.constant(cases.CX), af.qint8),
            af.bitcast(af.constant(cases.CW), af.qint8), (0.1, 0, 0.1, 0, *six), (-1, -1, 1),
        )  # fmt: skip
        with Session() as sess, pytest.raises(errors.InvalidArgumentError) as info:
            sess.run(y)
    assert info.value.message.split("\n\t [[")[0] == (
        "If rhs is per-tensor quantized, output must be also per-tensor quantized. Given "
        "output scales/zero_points of rank 1"
    )


def test_no_gradient_as_tf():
    # TF 2.21 registers none: its gradient lookup raises LookupError for each; through a
    # quantized tensor the path ends first (its dtype is not differentiable): [None]
    from asyncflow.registry import get_op_def

    for name in UNIFORM_OPS:
        d = get_op_def(name)
        assert d.grad_fn is None and not d.not_differentiable, name
    with ops.Graph().as_default():
        x = af.placeholder(af.float32, [2, 3])
        w = af.bitcast(af.constant(cases.R8), af.qint8)
        y = af.raw_ops.UniformQuantizedDotHybrid(
            lhs=x, rhs=w[:3], rhs_scales=np.float32(0.1), rhs_zero_points=np.int32(0),
            Tout=af.float32, rhs_quantization_min_val=-128, rhs_quantization_max_val=127,
        )  # fmt: skip
        with pytest.raises(LookupError, match="UniformQuantizedDotHybrid"):
            af.gradients(y, x)


def test_op_defs_as_tf():
    # (names, types and defaults dumped from TF 2.21's OpDefs)
    from asyncflow.registry import get_op_def

    d = get_op_def("UniformQuantizedDot")
    assert [a.name for a in d.inputs] == [
        "lhs", "rhs", "lhs_scales", "lhs_zero_points", "rhs_scales", "rhs_zero_points",
        "output_scales", "output_zero_points",
    ]  # fmt: skip
    assert d.attrs["lhs_quantization_axis"] == -1
    for name in UNIFORM_OPS:
        assert [a.name for a in get_op_def(name).outputs] == ["output"]


def test_conv_dimension_numbers_out_of_range():
    # (TF 2.21 reads such dimensions unchecked and returns garbage; here a clear error)
    with ops.Graph().as_default(), af.device("/cpu:0"):
        cx = af.bitcast(af.constant(cases.CX), af.qint8)
        cw = af.bitcast(af.constant(cases.CW), af.qint8)
        with pytest.raises(ValueError, match="dimension_numbers must name each"):
            cases._conv(af, cx, cw, dimension_numbers=bytes([0x10, 9]))
