"""do_quantize_training_on_graphdef against TF 2.21's rewrite, and the rewritten graphs
run here as TF ran them; QuantizeAndDequantizeV2 against TF's functor.

tests/fixtures/record_quantize_training_tf.py built three graphs with TF (a dense
network of VariableV2s, a conv network with every kind of source, one with a Saver),
recorded TF's rewrite of each as text protos and TF's run of the rewritten graph.
"""

import json
import pathlib

import numpy as np
import pytest
from google.protobuf import text_format

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.protos.graph_pb2 import GraphDef

FIX = pathlib.Path(__file__).parent / "fixtures" / "quantize_training"
GRAPHS = ["dense", "conv", "saver"]
ERRORS = json.loads((FIX / "errors.json").read_text())
# TF's binding raises its statuses as these (OUT_OF_RANGE, INVALID_ARGUMENT, UNIMPLEMENTED).
_PYTHON_ERRORS = {
    "IndexError": IndexError,
    "ValueError": ValueError,
    "NotImplementedError": NotImplementedError,
}


def _graph_def(name: str) -> GraphDef:
    return text_format.Parse((FIX / name).read_text(), GraphDef())


@pytest.mark.parametrize("name", GRAPHS)
def test_rewrite_is_tfs_graph_def(name):
    got = af.train.do_quantize_training_on_graphdef(_graph_def(f"{name}.in.pbtxt"), 8)
    want = _graph_def(f"{name}.out.pbtxt")
    assert [n.name for n in got.node] == [n.name for n in want.node]
    for a, b in zip(got.node, want.node):
        assert a == b, a.name
    assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)


def _run(graph_def: GraphDef, record: dict) -> list:
    with ops.Graph().as_default() as g:
        af.import_graph_def(graph_def, name="")
        inits = [
            f"{n.name}/Assign"
            for n in graph_def.node
            if n.op == "VariableV2" and not n.name.endswith("/Variable")
        ]
        with af.Session() as sess:
            if inits:
                sess.run(inits)
            feed = {
                g.get_tensor_by_name(f"{k}:0"): np.asarray(v, np.float32)
                for k, v in record["feed"].items()
            }
            return [sess.run(record["fetches"], feed) for _ in range(2)]


@pytest.mark.parametrize("name", GRAPHS)
def test_rewritten_graph_runs_as_in_tf(name):
    record = json.loads((FIX / f"{name}.run.json").read_text())
    out = af.train.do_quantize_training_on_graphdef(_graph_def(f"{name}.in.pbtxt"), 8)
    for label, graph_def in (("original", _graph_def(f"{name}.in.pbtxt")), ("rewritten", out)):
        got = _run(graph_def, record)
        for got_run, want_run in zip(got, record[label]):
            for g_val, w_val in zip(got_run, want_run):
                np.testing.assert_allclose(g_val, w_val, rtol=1e-5, atol=1e-5, err_msg=label)


def test_tf_message_and_serialized_input():
    gd = _graph_def("dense.in.pbtxt")
    want = af.train.do_quantize_training_on_graphdef(gd, 8)
    assert af.train.do_quantize_training_on_graphdef(gd.SerializeToString(), 8) == want


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_as_tf(case):
    rec = ERRORS[case]
    if case == "three_inputs":
        with ops.Graph().as_default() as g:
            a = af.placeholder(af.float32, [2, 2], name="a")
            b = af.placeholder(af.float32, [2, 2], name="b")
            c = af.placeholder(af.float32, [2, 2], name="c")
            af.matmul(af.matmul(a, b, name="ab"), c, name="abc")
            gd = g.as_graph_def()
        bits = 8
    elif case == "two_savers":
        gd = _graph_def("saver.in.pbtxt")
        extra = [n for n in gd.node if n.op == "SaveV2"][0]
        copy = gd.node.add()
        copy.CopyFrom(extra)
        copy.name = "save/SaveV2_1"
        bits = 8
    else:
        gd, bits = _graph_def("dense.in.pbtxt"), int(case.rsplit("_", 1)[1])
    if "ok" in rec:
        af.train.do_quantize_training_on_graphdef(gd, bits)
        return
    with pytest.raises(_PYTHON_ERRORS[rec["error"]]) as e:
        af.train.do_quantize_training_on_graphdef(gd, bits)
    assert str(e.value) == rec["message"]


# -- QuantizeAndDequantizeV2 ------------------------------------------------------------------


def _qdq(x, lo, hi, **attrs):
    with ops.Graph().as_default():
        out = ops.apply_op(
            "QuantizeAndDequantizeV2",
            [af.constant(x, af.float32), af.constant(lo, af.float32), af.constant(hi, af.float32)],
            attrs,
        ).outputs[0]
        with af.Session() as sess:
            return sess.run(out)


def test_quantize_and_dequantize_v2():
    x = np.array([-1.0, -0.5, 0.0, 0.3, 0.51, 1.0, 2.0], np.float32)
    # Own range [-1, 2]: scale 127/2 from the max side, min moved to -128/63.5.
    got = _qdq(x, 0.0, 0.0, num_bits=8, signed_input=True, range_given=False)
    scale = np.float32(127) / np.float32(2)
    np.testing.assert_array_equal(got, np.rint(x * scale) * (np.float32(2) / np.float32(127)))
    # Given range [0, 1], unsigned: clamped, 255 levels.
    got = _qdq(x, 0.0, 1.0, num_bits=8, signed_input=False, range_given=True)
    want = np.rint(np.clip(x, 0, 1) * np.float32(255)) * (np.float32(1) / np.float32(255))
    np.testing.assert_array_equal(got, want)
    with pytest.raises(errors.InvalidArgumentError, match="Invalid range"):
        _qdq(x, 1.0, 0.0, range_given=True)
    with pytest.raises(errors.InvalidArgumentError, match="num_bits is out of range"):
        _qdq(x, 0.0, 1.0, num_bits=0)


def test_quantize_and_dequantize_v2_gradient_passes_through():
    with ops.Graph().as_default():
        x = af.constant([0.1, 0.7], af.float32)
        y = ops.apply_op(
            "QuantizeAndDequantizeV2", [x, af.constant(0.0), af.constant(1.0)], {}
        ).outputs[0]
        (g,) = af.gradients(af.reduce_sum(y * 3.0), [x])
        with af.Session() as sess:
            np.testing.assert_array_equal(sess.run(g), [3.0, 3.0])
