"""SavedModel directories: builder, loader, simple_save, signatures (TF's protobuf files)."""

import os

import numpy as np
import pytest
from google.protobuf import text_format

import asyncflow as af
from asyncflow import protos
from asyncflow import saved_model as sm


def _export(export_dir):
    with af.Graph().as_default() as g:
        x = af.placeholder(af.float32, [None, 2], name="x")
        w = af.Variable([[1.0], [2.0]], name="w")
        y = af.matmul(x, w, name="y")
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            sess.run(w.assign([[3.0], [4.0]]))
            sm.simple_save(sess, export_dir, {"x": x}, {"y": y})


def test_simple_save_layout_and_load(tmp_path):
    export_dir = str(tmp_path / "model")
    _export(export_dir)
    assert sorted(os.listdir(export_dir)) == ["saved_model.pb", "variables"]
    assert sorted(os.listdir(os.path.join(export_dir, "variables"))) == [
        "variables.data-00000-of-00001",
        "variables.index",
    ]
    assert sm.maybe_saved_model_directory(export_dir)
    with af.Graph().as_default() as g, af.Session(graph=g) as sess:
        meta = sm.load(sess, [sm.SERVING], export_dir)
        sig = meta.signature_def[sm.DEFAULT_SERVING_SIGNATURE_DEF_KEY]
        assert isinstance(meta, af.MetaGraphDef) and isinstance(sig, protos.SignatureDef)
        assert sig.method_name == sm.PREDICT_METHOD_NAME == "tensorflow/serving/predict"
        assert sig.inputs["x"].name == "x:0" and af.as_dtype(sig.inputs["x"].dtype) == af.float32
        assert [d.size for d in sig.outputs["y"].tensor_shape.dim] == [-1, 1]
        y = sm.get_tensor_from_tensor_info(sig.outputs["y"])
        out = sess.run(y, {sig.inputs["x"].name: np.ones((3, 2), np.float32)})
        assert out.tolist() == [[7.0]] * 3
        assert list(meta.meta_info_def.tags) == ["serve"]


def test_builder_with_two_meta_graphs_main_op_and_assets(tmp_path):
    export_dir = str(tmp_path / "model")
    asset = tmp_path / "vocab.txt"
    asset.write_text("a\nb\n")
    with af.Graph().as_default() as g:
        v = af.Variable(1.0, name="v")
        counter = af.Variable(0, name="counter", collections=[af.GraphKeys.LOCAL_VARIABLES])
        asset_t = af.constant(str(asset), name="asset_path")
        main_op = af.group(counter.initializer, counter.assign_add(5))
        b = sm.Builder(export_dir)
        with pytest.raises(AssertionError, match="has not been saved yet"):
            b.add_meta_graph(["x"])
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            sess.run(v.assign(9.0))
            b.add_meta_graph_and_variables(
                sess, [sm.TRAINING], assets_collection=[asset_t], main_op=main_op
            )
            with pytest.raises(AssertionError, match="already been saved"):
                b.add_meta_graph_and_variables(sess, ["y"])
        b.add_meta_graph([sm.SERVING, sm.GPU], signature_def_map={
            "s": sm.build_signature_def({"in": sm.build_tensor_info(v)},
                                        {"out": sm.build_tensor_info(v)}, "m")})  # fmt: skip
        path = b.save(as_text=True)
    assert path == os.path.join(export_dir, "saved_model.pbtxt").encode()
    doc = text_format.Parse(open(path).read(), protos.SavedModel())
    assert [list(m.meta_info_def.tags) for m in doc.meta_graphs] == [["train"], ["serve", "gpu"]]
    assert os.listdir(os.path.join(export_dir, "assets")) == ["vocab.txt"]
    with af.Graph().as_default() as g, af.Session(graph=g) as sess:
        meta = sm.load(sess, ["train"], export_dir, import_scope="m")
        assert sess.run("m/v:0") == 9.0
        assert sess.run("m/counter:0") == 5  # the main op ran
        (packed,) = meta.collection_def["saved_model_assets"].any_list.value
        assert protos.AssetFileDef.FromString(packed.value).filename == "vocab.txt"
    with af.Graph().as_default() as g, af.Session(graph=g) as sess:
        meta = sm.load(sess, [sm.GPU, sm.SERVING], export_dir)
        assert list(meta.signature_def) == ["s"] and sess.run("v:0") == 9.0
    train_graph = doc.meta_graphs[0]  # the main op in a collection, as TF 2.21's v1 builder
    assert "__saved_model_init_op" not in train_graph.signature_def
    assert list(train_graph.collection_def["saved_model_main_op"].node_list.value) == [
        main_op.name
    ]


def test_errors(tmp_path):
    export_dir = str(tmp_path / "model")
    _export(export_dir)
    with pytest.raises(AssertionError, match="isn't empty"):
        sm.Builder(export_dir)
    with af.Graph().as_default() as g, af.Session(graph=g) as sess:
        with pytest.raises(RuntimeError, match="could not be found in SavedModel"):
            sm.load(sess, ["train"], export_dir)
        with pytest.raises(OSError, match="SavedModel file does not exist"):
            sm.load(sess, ["serve"], str(tmp_path / "nope"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "saved_model.pb").write_bytes(b"\x0a\xff[]")
    with af.Graph().as_default() as g, af.Session(graph=g) as sess:
        with pytest.raises(af.errors.DataLossError, match="Cannot parse"):
            sm.load(sess, ["serve"], str(tmp_path / "bad"))
    with pytest.raises(ValueError, match="inputs cannot be None or empty"):
        sm.predict_signature_def({}, {"y": af.constant(1.0)})
    with pytest.raises(TypeError):
        sm.build_tensor_info("x:0")
    assert not sm.is_valid_signature({"inputs": {}, "outputs": {}, "method_name": ""})
    assert not sm.is_valid_signature(protos.SignatureDef(method_name="m"))


def test_serving_skips_the_init_op_signature(tmp_path):
    export_dir = str(tmp_path / "model")
    with af.Graph().as_default() as g:
        x = af.placeholder(af.float32, [None], name="x")
        counter = af.Variable(0, name="counter", collections=[af.GraphKeys.LOCAL_VARIABLES])
        y = af.identity(x * 2.0, name="y")
        main_op = af.group(counter.initializer, name="main_op")
        with af.Session(graph=g) as sess:
            b = sm.Builder(export_dir)
            sig = sm.predict_signature_def({"x": x}, {"y": y})
            b.add_meta_graph_and_variables(
                sess, [sm.SERVING], signature_def_map={"serving_default": sig}, main_op=main_op
            )
            b.save()
    model = af.serving.load(export_dir, [sm.SERVING])
    assert list(model.signatures) == ["serving_default"]
