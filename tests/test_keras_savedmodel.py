"""Keras models in the SavedModel format: model.save(dir) / save_format="tf" and
load_model(dir), against TF 2.21's tf_keras (graph mode, TF 2 behaviour on).

tests/fixtures/keras_savedmodel_cases.py recorded, from the same cases built with either
library: TF's SavedModels (keras_savedmodel/tf_<case>), asyncflow's
(keras_savedmodel/af_<case>), and keras_savedmodel_tf.json: TF's predictions, TF's
predictions after loading asyncflow's SavedModel with tf_keras' load_model, and both
SavedModels' serving signatures run by TF's tf.saved_model.load.
"""

import json
import os
import pathlib
import shutil
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.protos.saved_metadata_pb2 import SavedMetadata
from asyncflow.protos.saved_model_pb2 import SavedModel

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_savedmodel_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "keras_savedmodel_tf.json").read_text())
SAVED = FIXTURES / "keras_savedmodel"
K = tf.keras

# TF 2 behaviour on, as the recorder ran TF; `keras_session` is a fresh graph and Session.
pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("keras_v2_behavior")]


def _predict(model, case):
    out = model.predict(cases.inputs(case))
    return out if isinstance(out, list) else [out]


def _close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, np.array(w, np.float32), rtol=1e-5, atol=1e-6)


def _metadata(path) -> SavedMetadata:
    md = SavedMetadata()
    md.ParseFromString((pathlib.Path(path) / "keras_metadata.pb").read_bytes())
    return md


def _object_graph(path):
    sm = SavedModel()
    sm.ParseFromString((pathlib.Path(path) / "saved_model.pb").read_bytes())
    return sm.meta_graphs[0]


# -- TF's SavedModels load here ------------------------------------------------------------


@pytest.mark.parametrize("case", cases.CASES)
def test_tf_savedmodel_loads_with_tf_predictions(keras_session, case):
    model = K.models.load_model(str(SAVED / f"tf_{case}"))
    _close(_predict(model, case), RECORDED[case]["predict"])
    assert len(model.weights) == len(cases.build(K, case).weights)


def test_tf_savedmodel_compile_restores_training_config(keras_session):
    model = K.models.load_model(str(SAVED / "tf_seq"))
    assert type(model.optimizer).__name__ == "SGD"
    assert np.isclose(model.optimizer.get_config()["learning_rate"], 0.1)
    assert model.loss == "categorical_crossentropy"
    # it trains on
    y = np.eye(2, dtype=np.float32)[[0, 1, 0, 1]]
    model.fit(cases.X_SEQ, y, epochs=1, verbose=0)


def test_tf_savedmodel_compile_false_and_uncompiled(keras_session, caplog):
    model = K.models.load_model(str(SAVED / "tf_fn"), compile=False)
    assert model.optimizer is None
    model = K.models.load_model(str(SAVED / "tf_cnn"))
    assert model.optimizer is None
    assert "No training configuration found" in caplog.text


# -- asyncflow's SavedModels load in TF (recorded) and here -------------------------------


@pytest.mark.parametrize("case", cases.CASES)
def test_our_savedmodel_matches_what_tf_loaded(keras_session, case, tmp_path):
    model = cases.build(K, case)
    want = _predict(model, case)
    # TF 2.21 loaded the committed af_<case> (written by this code) and predicted these:
    _close(want, RECORDED[case]["tf_loads_af"])
    _close(want, RECORDED[case]["predict"])
    model.save(str(tmp_path / "m"))
    # the same files as the ones TF loaded: metadata entries, object graph, keys
    ours, theirs = _metadata(tmp_path / "m"), _metadata(SAVED / f"af_{case}")
    assert [(n.node_id, n.node_path, n.identifier) for n in ours.nodes] == [
        (n.node_id, n.node_path, n.identifier) for n in theirs.nodes
    ]
    assert [json.loads(n.metadata) for n in ours.nodes] == [
        json.loads(n.metadata) for n in theirs.nodes
    ]
    assert tf.train.list_variables(str(tmp_path / "m" / "variables" / "variables")) == (
        tf.train.list_variables(str(SAVED / f"af_{case}" / "variables" / "variables"))
    )


@pytest.mark.parametrize("case", cases.CASES)
def test_our_savedmodel_round_trip(keras_session, case, tmp_path):
    model = cases.build(K, case)
    want = _predict(model, case)
    model.save(str(tmp_path / "m"), save_format="tf")
    with tf.Graph().as_default(), tf.Session() as sess:
        K.backend.set_session(sess)
        loaded = K.models.load_model(str(tmp_path / "m"))
        _close(_predict(loaded, case), want)
        assert type(loaded) is type(model)
        assert [layer.name for layer in loaded.layers] == [layer.name for layer in model.layers]
        opt = RECORDED[case]["tf_loads_af_optimizer"]
        assert (type(loaded.optimizer).__name__ if loaded.optimizer else None) == opt


@pytest.mark.parametrize("case", cases.CASES)
def test_committed_af_savedmodel_loads_here(keras_session, case):
    loaded = K.models.load_model(str(SAVED / f"af_{case}"))
    _close(_predict(loaded, case), RECORDED[case]["predict"])


@pytest.mark.parametrize("who", ["tf", "af"])
@pytest.mark.parametrize("case", cases.CASES)
def test_serving_signature_as_tf(keras_session, who, case):
    rec = RECORDED["serving"][f"{who}_{case}"]
    mg = _object_graph(SAVED / f"{who}_{case}")
    sig = mg.signature_def["serving_default"]
    assert sorted(sig.inputs) == rec["inputs"]
    assert sorted(sig.outputs) == sorted(rec["outputs"])
    loaded = tf.saved_model.load_v2(str(SAVED / f"{who}_{case}"))
    fn = loaded.signatures["serving_default"]
    feeds = {n: tf.constant(x) for n, x in zip(rec["inputs"], cases.inputs(case), strict=True)}
    outputs = fn(**feeds)
    keras_session.run(tf.global_variables_initializer())  # (restores the saved values)
    got = keras_session.run(outputs)
    for key, want in rec["outputs"].items():
        np.testing.assert_allclose(got[key], np.array(want, np.float32), rtol=1e-5, atol=1e-6)


def test_keras_object_graph_as_tf(keras_session, tmp_path):
    """The model's layers are its children "layer_with_weights-k" and "layer-k", with
    Keras' identifiers, as in TF's SavedModel; the variables keep TF's keys."""
    cases.build(K, "seq").save(str(tmp_path / "m"))
    ours, theirs = _object_graph(tmp_path / "m"), _object_graph(SAVED / "tf_seq")

    def layers(mg):
        root = mg.object_graph_def.nodes[0]
        return [
            (c.local_name, mg.object_graph_def.nodes[c.node_id].user_object.identifier)
            for c in root.children
            if c.local_name.startswith("layer")
        ]

    assert layers(ours) == layers(theirs)
    assert ours.object_graph_def.nodes[0].user_object.identifier == "_tf_keras_sequential"
    # (with the compiled metric's total/count under keras_api/metrics, as TF's)
    assert tf.train.list_variables(
        str(tmp_path / "m" / "variables" / "variables")
    ) == tf.train.list_variables(str(SAVED / "tf_seq" / "variables" / "variables"))
    theirs_md = [(n.node_path, n.identifier) for n in _metadata(SAVED / "tf_seq").nodes]
    ours_md = [(n.node_path, n.identifier) for n in _metadata(tmp_path / "m").nodes]
    assert theirs_md == ours_md


def test_save_model_api_and_v1_default_format(keras_session, tmp_path):
    model = cases.build(K, "cnn")
    K.models.save_model(model, str(tmp_path / "a"), save_format="tf")
    assert (tmp_path / "a" / "keras_metadata.pb").is_file()
    # TF: after disable_v2_behavior, Keras' default format is HDF5 (a file at the path)
    assert RECORDED["v1_default_is_file"] is True
    tf.disable_v2_behavior()
    model.save(str(tmp_path / "b"))
    assert (tmp_path / "b").is_file()
    # save_format="tf" still writes a SavedModel
    model.save(str(tmp_path / "c"), save_format="tf")
    assert (tmp_path / "c" / "saved_model.pb").is_file()


def test_include_optimizer_false_has_no_training_config(keras_session, tmp_path):
    cases.build(K, "seq").save(str(tmp_path / "m"), include_optimizer=False)
    root = json.loads(_metadata(tmp_path / "m").nodes[0].metadata)
    assert "training_config" not in root
    with tf.Graph().as_default(), tf.Session() as sess:
        K.backend.set_session(sess)
        assert K.models.load_model(str(tmp_path / "m")).optimizer is None


# -- errors ------------------------------------------------------------------------------


def test_plain_savedmodel_directory_is_refused(keras_session, tmp_path):
    shutil.copytree(SAVED / "tf_seq", tmp_path / "m")
    os.remove(tmp_path / "m" / "keras_metadata.pb")
    with pytest.raises(NotImplementedError, match="keras_metadata.pb"):
        K.models.load_model(str(tmp_path / "m"))


def test_corrupt_metadata_is_a_value_error(keras_session, tmp_path):
    shutil.copytree(SAVED / "tf_seq", tmp_path / "m")
    (tmp_path / "m" / "keras_metadata.pb").write_bytes(b"\xff\xff\xff")
    with pytest.raises(ValueError, match="keras_metadata.pb"):
        K.models.load_model(str(tmp_path / "m"))


def test_missing_variables_is_not_found(keras_session, tmp_path):
    shutil.copytree(SAVED / "tf_seq", tmp_path / "m")
    shutil.rmtree(tmp_path / "m" / "variables")
    with pytest.raises(tf.errors.NotFoundError):
        K.models.load_model(str(tmp_path / "m"))


def test_unbuilt_subclassed_model_cannot_be_saved(keras_session, tmp_path):
    class Sub(K.Model):
        def __init__(self):
            super().__init__()
            self.d = K.layers.Dense(2)

        def call(self, x):
            return self.d(x)

    with pytest.raises(ValueError, match="cannot be saved"):
        Sub().save(str(tmp_path / "m"))
