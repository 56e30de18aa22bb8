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
import re
import shutil

import numpy as np
import pytest
from google.protobuf import text_format

import asyncflow as tf
from asyncflow.protos import saved_object_graph_pb2 as sog
from asyncflow.protos.meta_graph_pb2 import TensorInfo
from asyncflow.protos.saved_model_pb2 import SavedModel
from asyncflow.saved_model.nested_structure import NotEncodableError
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
    if kind == "ragged2":
        outer, inner, values = data
        return tf.RaggedTensor.from_row_splits(
            tf.RaggedTensor.from_row_splits(
                tf.constant(values, tf.float32), tf.constant(inner, tf.int64)
            ),
            tf.constant(outer, tf.int64),
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
        return {"ragged": [_plain(x.values), x.row_splits.tolist()]}
    if isinstance(x, tf.IndexedSlicesValue):
        return {"slices": [x.values.tolist(), x.indices.tolist(), x.dense_shape.tolist()]}
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


def test_composite_argument_that_does_not_fit_fails_as_tf():
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(str(FIXTURES))
        wrong = tf.RaggedTensor.from_row_splits(
            tf.constant([1, 2], tf.int32), tf.constant([0, 2], tf.int64)
        )
        # (TF shows the wanted shape as (None,); asyncflow's TensorSpec repr says (?,))
        want = "Can not cast TensorSpec(shape=(2,), dtype=tf.int32, name=None) to TensorSpec("
        with pytest.raises(TypeError, match=re.escape(want) + ".*dtype=tf.float32"):
            m.rag(wrong)
        with pytest.raises(TypeError, match="Binding inputs to tf.function failed"):
            m.rag(tf.constant([1.0, 2.0]))  # (a dense tensor for a ragged argument)


def test_extension_type_argument_is_refused_as_tf(tmp_path):
    class Pt(tf.experimental.ExtensionType):
        x: tf.Tensor

    class M(tf.Module):
        @tf.function(input_signature=[Pt.Spec(x=tf.TensorSpec([None], tf.float32))])
        def f(self, p):
            return p.x * 2.0

    with tf.Graph().as_default(), tf.Session():
        with pytest.raises(NotEncodableError, match=r"No encoder for object .*Pt\.Spec"):
            tf.saved_model.save(M(), str(tmp_path / "m"))


def test_unknown_type_spec_class_is_a_clear_error(tmp_path):
    sm = SavedModel.FromString((FIXTURES / "saved_model.pb").read_bytes())
    og = sm.meta_graphs[0].object_graph_def
    for concrete in og.concrete_functions.values():
        x = concrete.output_signature
        if x.WhichOneof("kind") == "type_spec_value":
            x.type_spec_value.type_spec_class = sog.TypeSpecProto.OPTIONAL_SPEC
            x.type_spec_value.type_spec_class_name = "OptionalSpec"
    shutil.copytree(FIXTURES, tmp_path / "m")
    (tmp_path / "m" / "saved_model.pb").write_bytes(sm.SerializeToString())
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="OptionalSpec, which asyncflow cannot read"):
            tf.saved_model.load_v2(str(tmp_path / "m"))


@pytest.mark.parametrize("which", ["tf", "ours"])
def test_tf1_loader_rebuilds_composite_signature_outputs(ours, which):
    directory = FIXTURES if which == "tf" else ours
    with tf.Session(graph=tf.Graph()) as sess:
        mg = tf.saved_model.loader.load(sess, ["serve"], str(directory))
        for key, kwargs in cases.SIGNATURE_CALLS:
            sig = mg.signature_def[key]
            outs = {
                k: tf.saved_model.utils.get_tensor_from_tensor_info(v)
                for k, v in sig.outputs.items()
            }
            feeds = {sig.inputs[k].name: data for k, (_, data) in kwargs.items()}
            assert _plain(sess.run(outs, feeds)) == EXPECTED["signatures"][key]


def test_build_tensor_info_of_composites_as_tf():
    want = EXPECTED["structure"]["signatures"]
    with tf.Graph().as_default():
        values = tf.placeholder(tf.float32, [None])
        splits = tf.placeholder(tf.int64, [None])
        info = tf.saved_model.utils.build_tensor_info(
            tf.RaggedTensor.from_row_splits(values, splits, validate=False)
        )
        assert [c.name for c in info.composite_tensor.components] == [
            values.name,
            splits.name,
        ]
        for c in info.composite_tensor.components:
            c.ClearField("name")
        assert info == text_format.Parse(
            want["rag"]["signature_def"]["outputs"]["output_0"], TensorInfo()
        )
        sp = tf.SparseTensor(
            tf.placeholder(tf.int64, [None, 2]),
            tf.placeholder(tf.float32, [None]),
            tf.placeholder(tf.int64, [2]),
        )
        sp._static_shape = tf.TensorShape([None, 3])
        info = tf.saved_model.utils.build_tensor_info(sp)
        assert info.coo_sparse.indices_tensor_name == sp.indices.name
        assert info.coo_sparse.values_tensor_name == sp.values.name
        assert info.coo_sparse.dense_shape_tensor_name == sp.dense_shape.name
        info.coo_sparse.Clear()
        assert info == text_format.Parse(
            want["sp"]["signature_def"]["outputs"]["output_1"], TensorInfo()
        )
        back = tf.saved_model.utils.get_tensor_from_tensor_info(
            tf.saved_model.utils.build_tensor_info(sp)
        )
        assert isinstance(back, tf.SparseTensor) and back.values is sp.values
        with pytest.raises(ValueError, match="Invalid TensorInfo.encoding: None"):
            tf.saved_model.utils.get_tensor_from_tensor_info(TensorInfo())


def test_fingerprint_hashes_of_tfs_directory_are_tfs():
    # (the signatures' keywords "x", "x_1", "x_2": map entries in C++'s bytewise order)
    from asyncflow.saved_model import fingerprinting

    raw = (FIXTURES / "saved_model.pb").read_bytes()
    fp = fingerprinting.create_fingerprint_def(SavedModel.FromString(raw), str(FIXTURES))
    assert {f: getattr(fp, f) for f in EXPECTED["fingerprint_tf"]} == EXPECTED["fingerprint_tf"]


def test_deterministic_bytes_order_map_keys_bytewise():
    from asyncflow.saved_model import fingerprinting

    sig = SavedModel().meta_graphs.add().signature_def["s"]
    for key in ("x_2", "x", "x_1", "lengths"):
        sig.inputs[key].name = key + ":0"
    raw = fingerprinting.deterministic_bytes(sig)
    positions = [raw.index((k + ":0").encode()) for k in ("lengths", "x", "x_1", "x_2")]
    assert positions == sorted(positions)
    assert type(sig).FromString(raw) == sig
