"""The TPU/XLA raw ops of ops/tpu_raw_ops.py against TF 2.21's, recorded by
tests/fixtures/tpu_raw_ops_cases.py into tpu_raw_ops_tf.json: their OpDefs, the shapes
TF's shape functions give a sample of each, the "No OpKernel" error of running them, the
one kernel TF's CPU build has (FileSystemSetConfiguration) and the three gradients TF
registers."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

import asyncflow as tf
from asyncflow import dtypes
from asyncflow.registry import REQUIRED, TypeConstraint, get_op_def
from asyncflow.tensor_shape import TensorShape

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
import tpu_raw_ops_cases  # noqa: E402

_RECORD = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "tpu_raw_ops_tf.json").read_text()
)
_OPDEFS = _RECORD["opdefs"]
_CASES = dict(_RECORD["cases"])


def _arg(a) -> list:
    return [a.name, a.fixed_dtype.name if a.fixed_dtype else None, a.type_attr, a.number_attr]


def _default(value):
    if isinstance(value, TensorShape):
        return None if value.rank is None else value.as_list()
    if isinstance(value, list | tuple):
        return [_default(v) for v in value]
    if isinstance(value, dtypes.DType):
        return value.name
    return value


@pytest.mark.parametrize("name", sorted(_OPDEFS))
def test_opdef_as_tf(name):
    want = _OPDEFS[name]
    op_def = get_op_def(name)
    assert [_arg(a) for a in op_def.inputs] == [
        [a["name"], a["type"], a["type_attr"], a["number_attr"]] for a in want["inputs"]
    ]
    assert [_arg(a) for a in op_def.outputs] == [
        [a["name"], a["type"], a["type_attr"], a["number_attr"]] for a in want["outputs"]
    ]
    assert list(op_def.attrs) == [a["name"] for a in want["attrs"]]
    for a in want["attrs"]:
        got = op_def.attrs[a["name"]]
        if a["type"] in ("type", "list(type)"):
            assert isinstance(got, TypeConstraint)
            assert got.is_list == (a["type"] == "list(type)")
            allowed = None if got.allowed is None else sorted(d.name for d in got.allowed)
            assert allowed == (None if a["allowed"] is None else sorted(a["allowed"]))
            assert _default(got.default) == (a["default"] if a["has_default"] else None)
        elif not a["has_default"]:
            assert got is REQUIRED, a["name"]
        else:
            assert _default(got) == a["default"], a["name"]
    assert op_def.stateful == want["stateful"]


@pytest.fixture(scope="module")
def outcomes():
    return dict(tpu_raw_ops_cases.run(tf, _OPDEFS))


def _comparable(outcome: str) -> str:
    # A shape function's error: TF adds the node and its input shapes to the message.
    return outcome.split(" for '")[0]


@pytest.mark.parametrize("label", sorted(_CASES))
def test_case_as_tf(outcomes, label):
    assert _comparable(outcomes[label]) == _comparable(_CASES[label])


def test_every_op_is_recorded_and_registered():
    # Every op TF has with a func attr (a TPU computation) is left out of the samples.
    sampled = {label.split("#")[0].split(":")[0] for label in _CASES}
    with_func = {n for n, od in _OPDEFS.items() if any(a["type"] == "func" for a in od["attrs"])}
    assert set(_OPDEFS) - sampled == with_func
    assert all(hasattr(tf.raw_ops, n) for n in _OPDEFS)


@pytest.mark.parametrize("name", sorted(_OPDEFS))
def test_gradients_as_in_tf(name):
    op_def = get_op_def(name)
    has = _RECORD["gradients"][name]
    assert (op_def.grad_fn is not None) == (has == "function")
    assert not op_def.not_differentiable


def test_no_kernel_placement_error_names_shape_attrs():
    with tf.Graph().as_default():
        t = tf.raw_ops.TPUDummyInput(dtype=tf.float32, shape=[None, 2])
        assert TensorShape(t.op.get_attr("shape")).as_list() == [None, 2]
        with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError) as info:
            sess.run(t)
    assert "shape=[?,2]" in str(info.value)


def test_shape_attrs_are_exported_as_shapes():
    with tf.Graph().as_default() as g:
        tf.raw_ops.InfeedDequeueTuple(dtypes=[tf.float32], shapes=[[2, 3]], name="q")
        node = [n for n in g.as_graph_def().node if n.name == "q"][0]
    assert [d.size for d in node.attr["shapes"].list.shape[0].dim] == [2, 3]
