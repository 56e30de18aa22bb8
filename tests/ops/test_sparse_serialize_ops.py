"""Sparse serialization (SerializeSparse, SerializeManySparse, DeserializeManySparse,
DeserializeSparse), sparse crosses (SparseCross, SparseCrossV2, SparseCrossHashed) and
WriteFile against TF 2.21's recorded results: the graph of
tests/fixtures/sparse_serialize_cases.py built here equals TF's values (serialized bytes
included, byte for byte), its error cases raise TF's error class and message, and a
GraphDef TF wrote with the raw ops imports and runs to TF's outputs.  Fixtures recorded
by tests/fixtures/record_sparse_serialize_tf.py.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph as tf_graph
from asyncflow.registry import get_op_def

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
import sparse_serialize_cases as C  # noqa: E402

TABLE = json.loads((HERE / "sparse_serialize" / "values.json").read_text())


def plain(v):
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, bytes):
        return {"hex": v.hex()}
    if isinstance(v, np.generic):
        return v.item()
    return v


def unhex(v):
    if isinstance(v, dict):
        return bytes.fromhex(v["hex"])
    if isinstance(v, list):
        return [unhex(x) for x in v]
    return v


def raw(op_type, name=None, **kwargs):
    """TF's tf.raw_ops.<op_type>(**kwargs): inputs by their names, the rest attrs."""
    op_def = get_op_def(op_type)
    inputs = [kwargs.pop(a.name) for a in op_def.inputs]
    outs = tf_graph.apply_op(op_type, inputs, kwargs, name=name).outputs
    return outs[0] if len(outs) == 1 else tuple(outs)


@pytest.fixture(scope="module")
def values():
    with tf.Graph().as_default():
        fetches = C.build(tf, raw)
        with tf.Session() as sess:
            return {k: plain(v) for k, v in sess.run(fetches).items()}


@pytest.mark.parametrize("name", sorted(k for k in TABLE if k != "errors"))
def test_value_matches_tf(values, name):
    assert values[name] == TABLE[name]


@pytest.mark.parametrize("name", sorted(C.ERROR_CASES))
def test_error_matches_tf(name):
    want = TABLE["errors"][name]
    with tf.Graph().as_default():
        if "build_error" in want:
            with pytest.raises(ValueError):
                C.ERROR_CASES[name](tf, raw)
            return
        out = C.ERROR_CASES[name](tf, raw)
        with tf.Session() as sess:
            with pytest.raises(getattr(tf.errors, want["error"])) as e:
                sess.run(out)
    assert want["message"] in str(e.value)


def test_graphdef_tf_wrote_imports_and_runs(tmp_path):
    table = json.loads((HERE / "sparse_serialize" / "graph_values.json").read_text())
    gd = tf.GraphDef()
    gd.ParseFromString((HERE / "sparse_serialize" / "graph.pb").read_bytes())
    feeds = {k: unhex(v) for k, v in table["feeds"].items()}
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        feed = {g.get_tensor_by_name(k): v for k, v in feeds.items()}
        with tf.Session() as sess:
            names = list(table["values"])
            got = sess.run(names, feed)
            for name, value in zip(names, got):
                assert plain(value) == table["values"][name], name
            target = tmp_path / "sub" / "dir" / "out.txt"
            sess.run("write", {**feed, g.get_tensor_by_name("path:0"): str(target)})
    assert target.read_bytes() == unhex(table["written"])


def test_untrusted_bytes_are_bounded_and_typed():
    """A TensorProto claiming more elements than its bytes hold, or string content whose
    lengths overrun it, is InvalidArgumentError, never a large allocation."""
    from asyncflow.protos.tensor_pb2 import TensorProto

    huge = TensorProto(dtype=tf.int64.as_datatype_enum)
    for d in (1 << 40, 2):
        huge.tensor_shape.dim.add().size = d
    huge.tensor_content = b"\0" * 16
    bad_strings = TensorProto(dtype=tf.string.as_datatype_enum, tensor_content=b"\xff\xff\x0f")
    bad_strings.tensor_shape.dim.add().size = 1 << 30
    ok = TensorProto(dtype=tf.int64.as_datatype_enum, tensor_content=b"\0" * 8)
    ok.tensor_shape.dim.add().size = 1
    for bad in (huge, bad_strings):
        row = [bad.SerializeToString(), bad.SerializeToString(), ok.SerializeToString()]
        with tf.Graph().as_default(), tf.Session() as sess:
            out = tf.deserialize_many_sparse([row], tf.string)
            with pytest.raises(tf.errors.InvalidArgumentError):
                sess.run(out)


def test_write_file_errors_and_shapes(tmp_path):
    (tmp_path / "a_dir").mkdir()
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            tf.write_file(["a", "b"], "x")
        op = tf.io.write_file(str(tmp_path / "a_dir"), "x")
        with tf.Session() as sess:
            with pytest.raises(tf.errors.OpError):
                sess.run(op)


def test_builder_type_errors():
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="Input must be a SparseTensor"):
            tf.serialize_sparse(tf.constant([1]))
        with pytest.raises(TypeError, match="Inputs must be a list"):
            tf.sparse.cross(tf.constant([[b"a"]]))
        with pytest.raises(TypeError, match="All inputs must be Tensor or SparseTensor"):
            tf.sparse.cross([[b"a"]])
