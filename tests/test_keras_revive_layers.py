"""The layers of a Keras model revived by `tf.keras.models.load_model` from a SavedModel
(`model.layers`, `get_layer`, each layer's weights, config, call, the layers it holds
and the summary), and `tf.keras.utils.model_to_dot(expand_nested=True)`'s clusters,
against TF 2.21's tf_keras.

tests/fixtures/keras_revive_layers_cases.py recorded TF's SavedModels of its cases
(keras_revive_layers/tf_<case>: e.g. sub, a subclassed model of a Dense, a
BatchNormalization and a custom layer the loader does not know; comp and fncomp, models
of a custom layer holding two Dense, a TimeDistributed and a Bidirectional),
asyncflow's of the same (af_<case>), and keras_revive_layers_tf.json: what TF's
load_model makes of either and of keras_savedmodel/{tf,af}_{seq,fn} (`describe`), TF's
dot sources of nested models and its checkpoint keys of layers holding layers.
"""

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_revive_layers_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "keras_revive_layers_tf.json").read_text())
K = tf.keras

# TF 2 behaviour on, as the recorder ran TF; `keras_session` is a fresh graph and Session.
pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("keras_v2_behavior")]


def _same(got, want, where="") -> None:
    """got equals the recorded want: floats to 1e-5, the rest exactly."""
    if isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6), where
    elif isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (where, got, want)
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (where, got, want)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}[{k}]")
    else:
        assert got == want, (where, got, want)


def _load(case, who):
    return K.models.load_model(cases.CASES[case][0][who], compile=False)


# -- what a user sees of the revived model and its layers -------------------------------------


LOADS = [(case, who) for case, (paths, _) in sorted(cases.CASES.items()) for who in paths]


@pytest.mark.parametrize(("case", "who"), LOADS)
def test_revived_model_as_tf_sees_it(keras_session, case, who):
    """Class names, weights, configs, parameter counts, get_layer, the layers' values
    and calls, and the summary text: TF's for the same SavedModel."""
    del keras_session
    got = json.loads(json.dumps(cases.describe(K, _load(case, who), case)))
    want = RECORDED[f"{who}_{case}"]
    want = {k: v for k, v in want.items() if k != "predict"}
    _same(got, want, f"{who}_{case}")


@pytest.mark.parametrize("who", ["tf", "af"])
@pytest.mark.parametrize("case", cases.SAVED)
def test_revived_model_predicts_as_saved(keras_session, case, who):
    del keras_session
    got = _load(case, who).predict(cases.inputs(case))
    np.testing.assert_allclose(got, RECORDED[f"{case}_predict"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, RECORDED[f"{who}_{case}"]["predict"], rtol=1e-5, atol=1e-6)


def test_revived_layers_hold_the_models_variables(keras_session):
    """A layer's weights are the very variables the revived model computes with: setting
    a layer's weights changes the model's predictions."""
    model = _load("sub", "tf")
    model_vars = model.weights
    for layer in model.layers:
        for w in layer.weights:
            assert any(w is v for v in model_vars)
    assert len(model_vars) == sum(len(la.weights) for la in model.layers)
    dense = model.get_layer("dense")
    kernel, bias = dense.get_weights()
    dense.set_weights([np.zeros_like(kernel), np.ones_like(bias)])
    got = model.predict(cases.X_SUB)
    # relu(1) everywhere, then the batch normalization and Scale of the saved values
    bn, scale = model.get_layer("batch_normalization"), model.get_layer("scale")
    gamma, beta, mean, var = bn.get_weights()
    (s,) = scale.get_weights()
    want = ((1.0 - mean) / np.sqrt(var + 1e-3) * gamma + beta) * s
    np.testing.assert_allclose(got, np.broadcast_to(want, got.shape), rtol=1e-5)
    del keras_session


@pytest.mark.parametrize("who", ["tf", "af"])
@pytest.mark.parametrize("case", cases.SAVED)
def test_one_variable_per_saved_weight(keras_session, case, who):
    """The layers hold the model's variables (no copies made beside them: the graph's
    global variables are the model's weights)."""
    del keras_session
    model = _load(case, who)
    weights = model.weights
    assert sorted(map(id, tf.global_variables())) == sorted(map(id, weights))
    for layer in model.layers:
        assert all(any(w is v for v in weights) for w in layer.weights)


def test_revived_layer_classes(keras_session):
    """Dense and BatchNormalization rebuilt from their configs (Keras' classes); the
    custom layer a generic revived layer named as its class, called by its saved call."""
    del keras_session
    model = _load("sub", "af")
    dense, bn, scale = model.layers
    assert type(dense) is K.layers.Dense and type(bn) is K.layers.BatchNormalization
    assert type(scale).__name__ == "Scale" and isinstance(scale, K.layers.Layer)
    assert not isinstance(scale, K.layers.Dense)
    assert model.get_layer(index=2) is scale
    with pytest.raises(ValueError, match="No such layer: nope"):
        model.get_layer("nope")
    # a shape the saved call was not traced for
    with pytest.raises(ValueError, match="Could not find matching concrete function"):
        scale(K.backend.constant(np.ones((2, 4), np.float32)))


def test_layer_saved_without_its_call(keras_session):
    """A layer saved without a traced call (an older asyncflow's subclassed model) is
    revived generically, as TF revives it, and calling it is TF's ValueError."""
    del keras_session
    model = _load("old", "af")
    dense = model.get_layer("dense")
    assert type(dense).__name__ == "Dense" and not isinstance(dense, K.layers.Dense)
    with pytest.raises(ValueError, match="Cannot call custom layer dense of type"):
        dense(K.backend.constant(np.ones((2, 2), np.float32)))
    np.testing.assert_allclose(
        model.predict(cases.X_SUB), RECORDED["af_old"]["predict"], rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("who", ["tf", "af"])
@pytest.mark.parametrize("case", ["comp", "fncomp"])
def test_revived_layers_holding_layers(keras_session, case, who):
    """Known wrappers revived as their classes, their layers (an RNN's cell too) on the
    saved variables; the custom layer generic, holding its revived Dense layers, its
    weights theirs."""
    del keras_session
    model = _load(case, who)
    block, td, bi = (model.get_layer(n) for n in ("block", "td", "bi"))
    assert type(block).__name__ == "Block" and not isinstance(block, K.layers.Dense)
    assert type(block.d1) is type(block.d2) is K.layers.Dense
    assert [id(w) for w in block.weights] == [id(w) for w in block.d1.weights + block.d2.weights]
    assert type(td) is K.layers.TimeDistributed and type(td.layer) is K.layers.Dense
    assert type(bi) is K.layers.Bidirectional
    forward, backward = bi.forward_layer, bi.backward_layer
    assert type(forward) is type(backward) is K.layers.SimpleRNN
    assert [id(w) for w in bi.weights] == [
        id(w) for w in forward.cell.weights + backward.cell.weights
    ]
    # the sublayers' variables are the model's: zeroing the TimeDistributed Dense's
    # weights makes the Bidirectional see zeros
    kernel, bias = td.layer.get_weights()
    td.layer.set_weights([np.zeros_like(kernel), np.zeros_like(bias)])
    x = K.backend.constant(cases.layer_input((4, 3)))
    got = K.backend.get_session().run(td(block(x)))
    np.testing.assert_array_equal(got, np.zeros((2, 4, 2), np.float32))


def test_checkpoint_keys_of_layers_holding_layers(keras_session, tmp_path):
    """save_weights keys a layer's sublayers by the attributes holding them
    ("layer_with_weights-2/forward_layer/cell/kernel"), as TF; TF's own checkpoint of
    the model (its SavedModel's variables) loads by them."""
    del keras_session
    model = cases.build(K, "fncomp")
    model.save_weights(str(tmp_path / "w"))
    assert (
        cases.checkpoint_keys(tf.train.list_variables(str(tmp_path)))
        == (RECORDED["fncomp_checkpoint"])
    )
    for w in model.weights:
        K.backend.set_value(w, np.zeros(w.shape.as_list(), np.float32))
    model.load_weights(
        str(FIXTURES / "keras_revive_layers" / "tf_fncomp" / "variables" / "variables")
    )
    want = [entry["values"] for entry in RECORDED["tf_fncomp"]["layers"]]
    for layer, values in zip(model.layers, want, strict=True):
        _same([v.tolist() for v in layer.get_weights()], values, layer.name)


def test_bidirectional_builds_its_layers_as_tf():
    """build() builds the forward and backward layers in their scopes; a call then runs
    them in "forward_rnn_1", "backward_rnn_1", as TF's graph names them."""
    assert cases.bidirectional_build(tf) == RECORDED["bidirectional_build"]


# -- model_to_dot(expand_nested=True) ---------------------------------------------------------


@pytest.mark.parametrize("name", sorted(cases.DOT_CASES))
def test_model_to_dot_nested_matches_tf(name):
    assert cases.describe_dot(tf, name) == RECORDED["dot"][name]


def _old_checkpoint_model():
    """keras_old_ckpt_make's model, and the values its checkpoints hold."""
    import keras_old_ckpt_make as old  # noqa: PLC0415

    model = old.build()
    return model, [np.asarray(v) for v in old.fill(old.build())]


def test_load_weights_of_a_checkpoint_in_the_old_layout(keras_session, tmp_path):
    # keras_old_ckpt/weights: save_weights by asyncflow before b237f74, which keyed an
    # RNN's, a TimeDistributed's and a custom layer's weights under the layer itself
    # ("layer_with_weights-0/kernel"); they restore by those keys.
    model, want = _old_checkpoint_model()
    names = [n for n, _ in tf.train.list_variables(str(FIXTURES / "keras_old_ckpt/weights"))]
    assert "layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE" in names
    status = model.load_weights(str(FIXTURES / "keras_old_ckpt/weights"))
    status.assert_consumed()
    for got, w in zip(model.get_weights(), want, strict=True):
        np.testing.assert_array_equal(got, w)
    # Saved again, they take Keras' keys.
    model.save_weights(str(tmp_path / "w"))
    names = [n for n, _ in tf.train.list_variables(str(tmp_path / "w"))]
    assert "layer_with_weights-0/cell/kernel/.ATTRIBUTES/VARIABLE_VALUE" in names
    assert "layer_with_weights-4/inner/kernel/.ATTRIBUTES/VARIABLE_VALUE" in names


def test_checkpoint_restore_of_the_old_layout(keras_session):
    """tf.train.Checkpoint(model=...) of keras_old_ckpt/tckpt (old keys) restores."""
    del keras_session
    model, want = _old_checkpoint_model()
    status = tf.train.Checkpoint(model=model).restore(str(FIXTURES / "keras_old_ckpt/tckpt"))
    status.assert_nontrivial_match().run_restore_ops()
    for got, w in zip(model.get_weights(), want, strict=True):
        np.testing.assert_array_equal(got, w)
