"""tf.nn.quantized_avg_pool / quantized_max_pool / quantized_conv2d / quantized_relu_x
against TF 2.21's recorded results (fixtures/quantized_nn_tf.json, recorded by
fixtures/record_quantized_nn_tf.py from fixtures/quantized_nn_cases.py): every output
code and both range floats bit for bit, for quint8 and qint8 pools (SAME and VALID,
strided, overlapping) and quint8 convolutions (zero codes inside and at the ends of the
ranges, an empty range); then TF's errors, including its missing kernels."""

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

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import quantized_nn_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "quantized_nn_tf.json").read_text())


@pytest.fixture(scope="module")
def got():
    # (on the CPU: the stand-in GPU set runs this file too)
    with ops.Graph().as_default(), af.device("/cpu:0"):
        out = cases.build(af)
        with Session() as sess:
            return sess.run(out)


def _codes(x) -> np.ndarray:
    x = np.asarray(x)
    return x.view(x.dtype.fields[x.dtype.names[0]][0]) if x.dtype.names else x


@pytest.mark.parametrize("key", sorted(TF["values"]))
def test_values_as_tf(got, key):
    out, lo, hi = got[key]
    want = TF["values"][key]
    codes = _codes(out)
    assert list(codes.shape) == want["shape"]
    assert codes.astype(np.int64).reshape(-1).tolist() == want["codes"]
    assert np.float32([lo, hi]).view(np.uint32).tolist() == want["range"]


def test_static_shapes_and_types():
    with ops.Graph().as_default():
        x = af.placeholder(af.quint8, [2, 7, 6, 3])
        f = af.placeholder(af.quint8, [3, 2, 3, 4])
        out, lo, hi = af.nn.quantized_avg_pool(x, -1.0, 1.0, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        assert out.shape.as_list() == [2, 4, 3, 3] and out.dtype == af.quint8
        assert lo.shape.as_list() == [] and hi.dtype == af.float32
        out, _, _ = af.nn.quantized_conv2d(x, f, -1.0, 1.0, -1.0, 1.0, [1, 2, 2, 1], "VALID")
        assert out.shape.as_list() == [2, 3, 3, 4] and out.dtype == af.qint32


@pytest.mark.parametrize("key", sorted(TF["errors"]))
def test_errors_as_tf(key):
    want = TF["errors"][key]
    with ops.Graph().as_default(), af.device("/cpu:0"):
        outs = cases.errors(af)[key]()
        with Session() as sess, pytest.raises(errors.OpError) as info:
            sess.run(outs[0])
    assert want["when"] == "run"
    assert type(info.value).__name__ == want["error"]
    message = info.value.message
    if want["message"].startswith("No OpKernel was registered"):
        # (TF lists the node's attrs in its own order and its kernels' constraints)
        assert message.split(" used by ")[0] == want["message"].split(" used by ")[0]
    else:
        assert message.split("\n\t [[")[0] == want["message"]
