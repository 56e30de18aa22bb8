"""Functional models calling a layer with tensors given by keyword (MultiHeadAttention's
value and key): their config writes those as Keras does (references among the first
input's call arguments), a config of either form rebuilds, and TF's load_model reads
asyncflow's SavedModel and h5 file of them; against TF 2.21's tf_keras as
tests/fixtures/keras_kwcall_cases.py recorded it (keras_kwcall_tf.json).
"""

import copy
import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_kwcall_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "keras_kwcall_tf.json").read_text())
K = tf.keras

# TF 2 behaviour on, as the recorder ran TF; `keras_session` is a fresh graph and Session.
pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("keras_v2_behavior")]


def _close(got, want) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", cases.CASES)
def test_config_writes_keyword_tensors_as_tf(keras_session, case):
    """MHA(x, y, y) is written [["x", 0, 0, {"value": ["y", 0, 0], "key": [...]}]]."""
    del keras_session
    model = cases.build(K, case)
    want = RECORDED[case]
    assert cases.inbound(json.loads(model.to_json())) == cases.inbound(want["json"])
    _close(model.predict(cases.feeds(case)), want["predict"])


@pytest.mark.parametrize("case", cases.CASES)
def test_tf_loads_asyncflows_saved_models(case):
    """TF's load_model of our SavedModel and h5 file rebuilt the calls as its own and
    predicts as TF's model of the case."""
    want = RECORDED[case]
    for who in ("af_sm", "af_h5"):
        assert "error" not in want[who], (who, want[who])
        assert want[who]["inbound"] == cases.inbound(want["json"]), who
        _close(want[who]["predict"], want["predict"])


@pytest.mark.parametrize("case", cases.CASES)
def test_model_from_tf_json(keras_session, case):
    """TF's JSON rebuilds: the keyword references become the call's tensors."""
    del keras_session
    want = RECORDED[case]
    model = K.models.model_from_json(json.dumps(want["json"]))
    assert cases.inbound(json.loads(model.to_json())) == cases.inbound(want["json"])
    model.set_weights(cases.build(K, case).get_weights())
    _close(model.predict(cases.feeds(case)), want["predict"])


def test_model_from_config_of_positional_inputs(keras_session):
    """A config of asyncflow's earlier form, MHA's inputs as one list of positional
    references, still rebuilds (and is written back in Keras' form)."""
    del keras_session
    want = RECORDED["qvk"]["json"]
    old = copy.deepcopy(want)
    mha = next(layer for layer in old["config"]["layers"] if layer["name"] == "mha")
    mha["inbound_nodes"] = [[["x", 0, 0, {}], ["y", 0, 0, {}], ["y", 0, 0, {}]]]
    model = K.models.model_from_json(json.dumps(old))
    assert cases.inbound(json.loads(model.to_json())) == cases.inbound(want)


def test_keyword_reference_to_an_unknown_layer(keras_session):
    del keras_session
    bad = copy.deepcopy(RECORDED["qv"]["json"])
    mha = next(layer for layer in bad["config"]["layers"] if layer["name"] == "mha")
    mha["inbound_nodes"][0][0][3]["value"] = ["nowhere", 0, 0]
    with pytest.raises(ValueError, match="unknown layer 'nowhere'"):
        K.models.model_from_json(json.dumps(bad))


@pytest.mark.parametrize("suffix", [".h5", ""])
def test_saved_and_loaded_back(keras_session, tmp_path, suffix):
    """asyncflow's own h5 file and SavedModel of MHA(x, y, y) load back and predict."""
    del keras_session
    model = cases.build(K, "qvk")
    path = str(tmp_path / f"m{suffix}")
    model.save(path)
    back = K.models.load_model(path, compile=False)
    _close(back.predict(cases.feeds("qvk")), RECORDED["qvk"]["predict"])
