"""Composite tensors (RaggedTensor, SparseTensor, IndexedSlices) in TF 2 SavedModels:
tf.functions whose input signature or results hold them, and signatures with composite
inputs (one keyword per component, "x", "x_1", ...) and results, both ways with TF 2.21.

tests/fixtures/saved_model_composite/ is saved_model_composite_cases.py's module as TF
2.21 saves it; expected.json holds what TF's loader computes on it and what TF wrote
(tests/fixtures/record_saved_model_composite_tf.py).  asyncflow's load_v2 of that
directory must compute the same; asyncflow's save of the same module must write the
same function specs, TypeSpecs and signatures (what TF's loader reads), and load back
to the same numbers."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from google.protobuf import text_format

import asyncflow as tf
from asyncflow.protos import saved_object_graph_pb2 as sog
from asyncflow.protos.meta_graph_pb2 import TensorInfo
from asyncflow.protos.saved_model_pb2 import SavedModel
from tests.fixtures import saved_model_composite_cases as cases

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "saved_model_composite"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


def _arg(kind, data):
    if kind == "ragged":
        splits, values = data
        return tf.RaggedTensor.from_row_splits(
            tf.constant(values, tf.float32), tf.constant(splits, tf.int64)
        )
    if kind == "sparse":
        indices, values, shape = data
        return tf.SparseTensor(
            tf.constant(indices, tf.int64), tf.constant(values), tf.constant(shape, tf.int64)
        )
    if kind == "slices":
        values, indices, shape = data
        return tf.IndexedSlices(
            tf.constant(values), tf.constant(indices, tf.int64), tf.constant(shape, tf.int64)
        )
    return tf.constant(data, tf.int64 if kind == "dense_i64" else tf.float32)


def _plain(x):
    """A fetched result as expected.json writes it."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple) and not hasattr(x, "_fields"):
        return [_plain(v) for v in x]
    if isinstance(x, tf.ragged.RaggedTensorValue):
        return {"ragged": [x.values.tolist(), x.row_splits.tolist()]}
    if isinstance(x, tf.SparseTensorValue):
        return {"sparse": [x.indices.tolist(), x.values.tolist(), x.dense_shape.tolist()]}
    return np.asarray(x).tolist()


def _calls(directory):
    """(function results, signature results) of the cases' calls on a loaded model."""
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(str(directory))
        fns = {n: getattr(m, n)(*[_arg(*a) for a in args]) for n, args in cases.FUNCTION_CALLS}
        sigs = {
            key: m.signatures[key](**{k: _arg(*v) for k, v in kwargs.items()})
            for key, kwargs in cases.SIGNATURE_CALLS
        }
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            return sess.run((fns, sigs))


def _save_ours(directory):
    with tf.Graph().as_default(), tf.Session() as sess:
        m = cases.module_class(tf, {"use_resource": True})()
        sess.run(tf.global_variables_initializer())
        tf.saved_model.save(m, str(directory), signatures=cases.signatures(m))


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    directory = tmp_path_factory.mktemp("composite") / "ours"
    _save_ours(directory)
    return directory


def test_tf_saved_model_loads_with_composites():
    fns, sigs = _calls(FIXTURES)
    assert _plain(fns) == EXPECTED["functions"]
    assert _plain(sigs) == EXPECTED["signatures"]


def test_ours_loads_back_to_tf_numbers(ours):
    fns, sigs = _calls(ours)
    assert _plain(fns) == EXPECTED["functions"]
    assert _plain(sigs) == EXPECTED["signatures"]


def _parsed(text, message):
    return text_format.Parse(text, message)


def _unnamed_outputs(sv):
    """`sv` with its tensor specs' names cleared (asyncflow names a function's plain
    tensor results "unknown", TF by their place: the loaders read neither)."""
    sv = type(sv).FromString(sv.SerializeToString())
    todo = [sv]
    while todo:
        x = todo.pop()
        kind = x.WhichOneof("kind")
        if kind == "tensor_spec_value":
            x.tensor_spec_value.ClearField("name")
        elif kind in ("list_value", "tuple_value"):
            todo.extend(getattr(x, kind).values)
        elif kind == "dict_value":
            todo.extend(x.dict_value.fields.values())
    return sv


def _ours_structure(directory):
    sm = SavedModel.FromString((pathlib.Path(directory) / "saved_model.pb").read_bytes())
    mg = sm.meta_graphs[0]
    og = mg.object_graph_def
    names = {c.node_id: c.local_name for c in og.nodes[0].children}
    functions = {}
    for i, node in enumerate(og.nodes):
        if node.WhichOneof("kind") == "function":
            fn = node.function
            functions[names[i]] = (fn, og.concrete_functions[fn.concrete_functions[0]])
    sig_map = [c.node_id for c in og.nodes[0].children if c.local_name == "signatures"][0]
    signatures = {}
    for child in og.nodes[sig_map].children:
        bare = og.nodes[child.node_id].bare_concrete_function
        signatures[child.local_name] = (
            bare,
            og.concrete_functions[bare.concrete_function_name],
            mg.signature_def[child.local_name],
        )
    return functions, signatures


@pytest.mark.parametrize("name", sorted(EXPECTED["structure"]["functions"]))
def test_function_specs_as_tf_writes_them(ours, name):
    functions, _ = _ours_structure(ours)
    fn, concrete = functions[name]
    want = EXPECTED["structure"]["functions"][name]
    sv = sog.StructuredValue
    assert fn.function_spec.input_signature == _parsed(want["input_signature"], sv())
    assert concrete.canonicalized_input_signature == _parsed(
        want["canonicalized_input_signature"], sv()
    )
    assert _unnamed_outputs(concrete.output_signature) == _unnamed_outputs(
        _parsed(want["output_signature"], sv())
    )


@pytest.mark.parametrize("key", sorted(EXPECTED["structure"]["signatures"]))
def test_signatures_as_tf_writes_them(ours, key):
    _, signatures = _ours_structure(ours)
    bare, concrete, sig = signatures[key]
    want = EXPECTED["structure"]["signatures"][key]
    sv = sog.StructuredValue
    assert list(bare.argument_keywords) == want["argument_keywords"]
    assert concrete.canonicalized_input_signature == _parsed(
        want["canonicalized_input_signature"], sv()
    )
    assert concrete.output_signature == _parsed(want["output_signature"], sv())
    for side in ("inputs", "outputs"):
        got = {}
        for k, info in getattr(sig, side).items():
            info = TensorInfo.FromString(info.SerializeToString())
            info.ClearField("name")
            if info.HasField("coo_sparse"):
                info.coo_sparse.Clear()
            for c in info.composite_tensor.components:
                c.ClearField("name")
            got[k] = info
        assert got == {k: _parsed(v, TensorInfo()) for k, v in want["signature_def"][side].items()}
