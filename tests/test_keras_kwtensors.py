"""Functional models calling layers with tensors among their keyword arguments
(MultiHeadAttention's attention_mask, an Attention's mask list, an RNN's initial_state
and constants, a custom layer's tensor argument; with training=False beside them):
their config writes those as Keras does, TF's configs and h5 files rebuild and predict
as TF, and TF's load_model reads asyncflow's SavedModel and h5 file of them; against TF
2.21's tf_keras as tests/fixtures/keras_kwtensors_cases.py recorded it
(keras_kwtensors_tf.json, keras_kwtensors/).
"""

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_kwtensors_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "keras_kwtensors_tf.json").read_text())
K = tf.keras
CUSTOM = cases.custom_classes(K)

# TF 2 behaviour on, as the recorder ran TF; `keras_session` is a fresh graph and Session.
pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("keras_v2_behavior")]


def _close(got, want) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def _inbound(model) -> list:
    return cases.inbound(json.loads(model.to_json()))


@pytest.mark.parametrize("case", cases.CASES)
def test_config_writes_keyword_tensors_as_tf(keras_session, case):
    """attention_mask=m is written [["x", 0, 0, {"attention_mask": ["m", 0, 0], ...}]],
    an RNN's states and constants as inputs after its own, and the model predicts as
    TF's."""
    del keras_session
    model = cases.build(K, case, CUSTOM)
    want = RECORDED[case]
    assert _inbound(model) == cases.inbound(want["json"])
    _close(model.predict(cases.feeds(case)), want["predict"])


@pytest.mark.parametrize("case", ["mha_mask", "att_mask", "custom"])
def test_sources_and_summary_see_keyword_tensors(keras_session, case):
    """get_source_inputs finds the Inputs behind keyword tensors, and the summary's
    "Connected to" names them, as TF's do."""
    del keras_session
    model = cases.build(K, case, CUSTOM)
    assert cases.sources(K, model) == RECORDED[case]["sources"]
    assert cases.summary(model) == RECORDED[case]["summary"]


@pytest.mark.parametrize("case", cases.CASES)
def test_tf_loads_asyncflows_saved_models(case):
    """TF's load_model of our SavedModel and h5 file rebuilt the calls as its own and
    predicts as TF's model of the case."""
    want = RECORDED[case]
    for who in ("af_sm", "af_h5", "af_sm_revived"):
        if who not in want:
            continue
        assert "error" not in want[who], (who, want[who])
        assert want[who]["inbound"] == cases.inbound(want["json"]), who
        _close(want[who]["predict"], want["predict"])


@pytest.mark.parametrize("case", cases.CASES)
def test_model_from_tf_json(keras_session, case):
    """TF's JSON rebuilds (the keyword references become the call's tensors; an RNN's
    num_constants splits its inputs) and is written back the same."""
    del keras_session
    want = RECORDED[case]
    model = K.models.model_from_json(json.dumps(want["json"]), CUSTOM)
    assert _inbound(model) == cases.inbound(want["json"])
    model.set_weights(cases.build(K, case, CUSTOM).get_weights())
    _close(model.predict(cases.feeds(case)), want["predict"])


@pytest.mark.parametrize("case", cases.CASES)
def test_tf_h5_loads(keras_session, case):
    del keras_session
    path = FIXTURES / "keras_kwtensors" / f"tf_{case}.h5"
    model = K.models.load_model(str(path), CUSTOM, compile=False)
    _close(model.predict(cases.feeds(case)), RECORDED[case]["predict"])


_OWN = ["mha_mask", "att_mask", "rnn_const", "custom", "stacked_const", "bidi_state_const",
        "mha_scores", "emb_state", "td_mask", "att_none_mask", "bidi_mask"]  # fmt: skip


@pytest.mark.parametrize("case", _OWN)
@pytest.mark.parametrize("suffix", [".h5", ""])
def test_saved_and_loaded_back(keras_session, tmp_path, case, suffix):
    """asyncflow's own h5 file and SavedModel load back and predict (a SavedModel's call
    functions are traced with the keyword tensors, as Keras traces them)."""
    del keras_session
    model = cases.build(K, case, CUSTOM)
    path = str(tmp_path / f"m{suffix}")
    model.save(path)
    back = K.models.load_model(path, CUSTOM, compile=False)
    assert _inbound(back) == cases.inbound(RECORDED[case]["json"])
    _close(back.predict(cases.feeds(case)), RECORDED[case]["predict"])


@pytest.mark.parametrize("case", _OWN)
def test_clone_and_reapply_keep_keyword_tensors(keras_session, case):
    """clone_model replays the keyword tensors; a model called on new inputs passes them
    its own (the layer graph's keyword tensors replaced)."""
    del keras_session
    model = cases.build(K, case, CUSTOM)
    with K.utils.custom_object_scope(CUSTOM):  # (the RNN's cell is made from its config)
        clone = K.models.clone_model(model)
    assert _inbound(clone) == cases.inbound(RECORDED[case]["json"])
    clone.set_weights(model.get_weights())
    _close(clone.predict(cases.feeds(case)), RECORDED[case]["predict"])
    inputs = [K.Input(t.shape[1:], dtype=t.dtype) for t in model.inputs]
    outer = K.Model(inputs, model(inputs))
    _close(outer.predict(cases.feeds(case)), RECORDED[case]["predict"])


def test_constants_for_a_cell_without_them(keras_session):
    del keras_session
    x = K.Input((4, 8))
    k = K.Input((3,))
    with pytest.raises(ValueError, match="does not support constants"):
        K.layers.RNN(K.layers.SimpleRNNCell(3))(x, constants=[k])


def test_constants_through_stacked_cells_and_bidirectional(keras_session):
    """A stack passes constants to the cells that take them and runs the others
    without (no error, as Keras); a Bidirectional of an LSTM refuses them as the LSTM
    does; constants that are not Keras tensors stay keyword arguments, written as values
    (TF's JSON), and mixed with Keras tensors among the states they raise."""
    del keras_session
    x = K.Input((4, 8), name="x")
    k = K.Input((3,), name="k")
    stack = K.layers.RNN([K.layers.SimpleRNNCell(3)])(x, constants=k)
    assert stack.shape.as_list() == [None, 3]
    with pytest.raises(ValueError, match="does not support constants"):
        K.layers.Bidirectional(K.layers.LSTM(3))(x, constants=k)
    bidi = K.layers.Bidirectional(K.layers.RNN(CUSTOM["ConstCell"](3)), name="bi")
    model = K.Model(x, bidi(x, constants=K.backend.constant(cases.KC)))
    config = json.loads(model.to_json())["config"]["layers"][1]
    assert config["config"]["num_constants"] == 1
    _close(config["inbound_nodes"][0][0][3]["constants"], [cases.KC])
    h = [K.backend.constant(cases.H)] * 2
    bidi = K.layers.Bidirectional(K.layers.RNN(CUSTOM["ConstCell"](3)))
    with pytest.raises(ValueError, match="mix of TF-Keras tensors and non-Keras tensors"):
        bidi(x, initial_state=h, constants=k)


@pytest.mark.parametrize("case", cases.SAVEDMODEL_CASES)
def test_tf_savedmodel_loads(keras_session, case):
    """TF's SavedModel rebuilds the keyword calls (the custom layer from its class)."""
    del keras_session
    path = FIXTURES / "keras_kwtensors" / f"tf_{case}"
    model = K.models.load_model(str(path), CUSTOM, compile=False)
    assert _inbound(model) == cases.inbound(RECORDED[case]["json"])
    _close(model.predict(cases.feeds(case)), RECORDED[case]["predict"])


@pytest.mark.parametrize("who", ["tf", "af"])
def test_savedmodel_revives_a_layer_taking_a_tensor_keyword(keras_session, tmp_path, who):
    """Without its class, the custom layer is revived from its saved call function,
    which takes the keyword tensor (TF's file, and ours as TF's load reads it)."""
    del keras_session
    if who == "tf":
        path = str(FIXTURES / "keras_kwtensors" / "tf_custom")
    else:
        path = str(tmp_path / "m")
        cases.build(K, "custom", CUSTOM).save(path)
    model = K.models.load_model(path, compile=False)
    assert not isinstance(model.get_layer("scale"), CUSTOM["Scale"])
    _close(model.predict(cases.feeds("custom")), RECORDED["custom"]["predict"])


def test_bidirectional_initial_state_errors(keras_session):
    """An odd number of states, or Keras tensors mixed with others, raise as in TF."""
    del keras_session
    x = K.Input((4, 8))
    h = [K.Input((3,)) for _ in range(3)]
    bidi = K.layers.Bidirectional(K.layers.GRU(3))
    with pytest.raises(ValueError, match="the state should be a list containing the states"):
        bidi(x, initial_state=h)
    with pytest.raises(ValueError, match="mix of TF-Keras tensors and non-Keras tensors"):
        bidi(x, initial_state=[h[0], tf.zeros((2, 3))])
