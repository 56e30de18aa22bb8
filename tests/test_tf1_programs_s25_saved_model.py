"""A SavedModel program (builder with signatures, assets and a main op; loader into a
fresh session; simple_save) checked against TF 2.21's tf.compat.v1: what the builder
records (the main op and assets in collections, no init signature), a TF-written model
whose original asset file is gone (tests/fixtures/s25_tf_saved_model, written by
tests/fixtures/record_s25_saved_model_tf.py), and the builder's errors."""

import os
import pathlib

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import protos

_TF_MODEL = str(pathlib.Path(__file__).parent / "fixtures" / "s25_tf_saved_model")


def _export(export_dir, vocab):
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
        asset = tf.constant(vocab, name="asset_path")
        tf.add_to_collection(tf.GraphKeys.ASSET_FILEPATHS, asset)
        init = tf.lookup.TextFileInitializer(
            asset,
            tf.string,
            tf.lookup.TextFileIndex.WHOLE_LINE,
            tf.int64,
            tf.lookup.TextFileIndex.LINE_NUMBER,
        )
        table = tf.lookup.StaticHashTable(init, -1)
        words = tf.placeholder(tf.string, [None], name="words")
        ids = table.lookup(words)
        counter = tf.get_variable("counter", [], tf.int32, tf.zeros_initializer(), trainable=False)
        main_op = tf.group(tf.tables_initializer(), tf.assign(counter, 7), name="main_op")
        sess.run(tf.global_variables_initializer())
        builder = tf.saved_model.builder.SavedModelBuilder(export_dir)
        sig = tf.saved_model.predict_signature_def({"words": words}, {"ids": ids})
        builder.add_meta_graph_and_variables(
            sess,
            ["serve"],
            signature_def_map={"serving_default": sig},
            assets_collection=tf.get_collection(tf.GraphKeys.ASSET_FILEPATHS),
            main_op=main_op,
        )
        builder.add_meta_graph(["eval"])
        with pytest.raises(ValueError, match="already contains one or more main ops"):
            builder.add_meta_graph(["x"], main_op=main_op)
        builder.save()


def _load_and_lookup(export_dir):
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
        mg = tf.saved_model.loader.load(sess, ["serve"], export_dir)
        sig = mg.signature_def["serving_default"]
        ids = sess.run(sig.outputs["ids"].name, {sig.inputs["words"].name: ["c", "a", "zz"]})
        return mg, ids.tolist(), sess.run("counter:0")


def test_builder_records_what_tf_records_and_loads_without_the_original_asset(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("a\nb\nc\n")
    export_dir = str(tmp_path / "sm")
    _export(export_dir, str(vocab))
    vocab.unlink()  # the loader must feed the copy under assets/
    assert tf.saved_model.contains_saved_model(export_dir)
    mg, ids, counter = _load_and_lookup(export_dir)
    # as TF 2.21 loads the same program's export
    assert (ids, counter) == ([2, 0, -1], 7)
    assert sorted(mg.signature_def) == ["serving_default"]
    assert len(mg.asset_file_def) == 0
    assert sorted(mg.collection_def) == [
        "asset_filepaths",
        "saved_model_assets",
        "saved_model_main_op",
        "table_initializer",
        "variables",
    ]
    packed, again = mg.collection_def["saved_model_assets"].any_list.value
    assert again == packed  # the table's initializer added the path too, as in TF
    assert packed.type_url == "type.googleapis.com/tensorflow.AssetFileDef"
    asset = protos.AssetFileDef.FromString(packed.value)
    assert (asset.filename, asset.tensor_info.name) == ("vocab.txt", "asset_path:0")
    # the later meta graph keeps the graph's main op and assets, as in TF
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
        mg = tf.saved_model.loader.load(sess, ["eval"], export_dir)
        assert (sess.run("counter:0"), sorted(mg.signature_def)) == (7, [])


def test_tf_written_model_with_assets_in_a_collection_loads():
    mg, ids, counter = _load_and_lookup(_TF_MODEL)
    assert (ids, counter) == ([2, 0, -1], 7)
    with tf.Graph().as_default() as g:
        tf.train.import_meta_graph(mg)
        # imported as Any, as TF does (the table's initializer added the path a second time)
        packed, again = g.get_collection("saved_model_assets")
        assert again == packed
        assert protos.AssetFileDef.FromString(packed.value).filename == "vocab_s25.txt"


def test_builder_errors_match_tf(tmp_path):
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
        v = tf.Variable(1.0)
        sess.run(v.initializer)
        b = tf.saved_model.builder.SavedModelBuilder(str(tmp_path / "a"))
        with pytest.raises(TypeError, match="to be an Operation"):
            b.add_meta_graph_and_variables(sess, ["serve"], main_op=v.read_value())
        sig = tf.saved_model.predict_signature_def({"x": v.value()}, {"y": v.value()})
        with pytest.raises(KeyError, match="is reserved for initialization"):
            b.add_meta_graph_and_variables(
                sess, ["serve"], signature_def_map={"__saved_model_init_op": sig}
            )


def test_simple_save_round_trip(tmp_path):
    export_dir = str(tmp_path / "simple")
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
        a = tf.placeholder(tf.float32, [2], name="a")
        v = tf.Variable([1.0, 2.0], name="v")
        o = tf.multiply(a, v, name="o")
        sess.run(tf.global_variables_initializer())
        tf.saved_model.simple_save(sess, export_dir, inputs={"a": a}, outputs={"o": o})
    assert sorted(os.listdir(export_dir)) == ["saved_model.pb", "variables"]
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
        mg = tf.saved_model.load(sess, [tf.saved_model.SERVING], export_dir)
        s = mg.signature_def["serving_default"]
        assert (s.method_name, s.inputs["a"].name, s.outputs["o"].name) == (
            "tensorflow/serving/predict",
            "a:0",
            "o:0",
        )
        out = sess.run(s.outputs["o"].name, {s.inputs["a"].name: [3.0, 4.0]})
        np.testing.assert_allclose(out, [3.0, 8.0])
        assert sorted(mg.collection_def) == ["trainable_variables", "variables"]


def test_constants_and_main_op_module_as_tf():
    sm = tf.saved_model
    assert (sm.ASSETS_KEY, sm.MAIN_OP_KEY, sm.LEGACY_INIT_OP_KEY) == (
        "saved_model_assets",
        "saved_model_main_op",
        "legacy_init_op",
    )
    assert (sm.SAVED_MODEL_FILENAME_PB, sm.SAVED_MODEL_FILENAME_PBTXT) == (
        "saved_model.pb",
        "saved_model.pbtxt",
    )
    assert (sm.VARIABLES_DIRECTORY, sm.VARIABLES_FILENAME, sm.ASSETS_DIRECTORY) == (
        "variables",
        "variables",
        "assets",
    )
    assert (sm.DEBUG_DIRECTORY, sm.DEBUG_INFO_FILENAME_PB) == (
        "debug",
        "saved_model_debug_info.pb",
    )
    assert sm.SAVED_MODEL_SCHEMA_VERSION == 1
    assert sm.constants.MAIN_OP_KEY == "saved_model_main_op"
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
        v = tf.Variable(0, collections=[tf.GraphKeys.LOCAL_VARIABLES], name="lv")
        op = sm.main_op.main_op()
        assert op.name == "group_deps"  # as TF names it
        sess.run(op)
        assert sess.run(v) == 0
