"""Keras configs and HDF5 saving: layer/object configs, model JSON, model_from_json,
clone_model, custom objects, and whole-model / weights HDF5 files.

Expected values were recorded from TF 2.21 (tf_keras, TF_USE_LEGACY_KERAS=1, v2
behaviour disabled) by tests/fixtures/keras_saving_make.py from the cases in
keras_saving_cases.py: tests/fixtures/keras_saving_tf.json and the TF-written files
keras_saving_seq_tf.h5 (a compiled Sequential after two Adam steps) and
keras_saving_weights_tf.h5 (save_weights of a functional model).
"""

import json
import pathlib
import sys

import h5py
import numpy as np
import pytest

import asyncflow as tf
from asyncflow.keras import saving_hdf5 as keras_saving

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_saving_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "keras_saving_tf.json").read_text())
K = tf.keras
L = tf.keras.layers
LAYER_CASES = cases.layer_cases(K)
OBJECT_CASES = cases.object_cases(K)


@pytest.fixture
def session():
    with tf.Graph().as_default(), tf.Session() as sess:
        K.backend.set_session(sess)
        yield sess


def _json(value):
    return json.loads(json.dumps(value))


# -- configs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(LAYER_CASES))
def test_layer_config_matches_tf(key):
    with tf.Graph().as_default():
        layer = LAYER_CASES[key]()
        config = _json(K.utils.serialize_keras_object(layer))
        assert config == RECORDED["layers"][key]
        # from_config makes a layer with the same config.
        again = type(layer).from_config(layer.get_config())
        assert _json(K.utils.serialize_keras_object(again)) == config


@pytest.mark.parametrize("key", sorted(OBJECT_CASES))
def test_object_config_matches_tf(key):
    assert _json(OBJECT_CASES[key]()) == RECORDED["objects"][key]


_PREFIXES = {
    "initializers": "init_",
    "regularizers": "reg_",
    "constraints": "con_",
    "optimizers": "opt_",
    "losses": "loss_",
    "metrics": "metric_",
}


@pytest.mark.parametrize(
    "module",
    ["initializers", "regularizers", "constraints", "optimizers", "losses", "metrics"],
)
def test_deserialize_round_trips(module):
    mod = getattr(K, module)
    kind = _PREFIXES[module]
    with tf.Graph().as_default():
        for key, value in RECORDED["objects"].items():
            if key.startswith(kind):
                obj = mod.deserialize(value)
                assert _json(mod.serialize(obj)) == value, key
                assert _json(mod.serialize(mod.get(value))) == value, key


def test_activation_names():
    assert K.activations.serialize(K.activations.get("relu")) == "relu"
    assert K.activations.deserialize("tanh") is K.activations.tanh
    assert K.activations.serialize(K.activations.get(None)) == "linear"


@pytest.mark.parametrize("key", ["seq_json", "func_json"])
def test_model_json_matches_tf(key):
    make = cases.seq_model if key == "seq_json" else cases.func_model
    with tf.Graph().as_default():
        model = make(K)
        text = model.to_json()
        assert json.loads(text) == RECORDED[key]
        rebuilt = K.models.model_from_json(text)
        assert json.loads(rebuilt.to_json()) == RECORDED[key]
        assert type(rebuilt) is type(model)
        # (in the same graph, so its variables' names are uniquified: d1_1/kernel)
        assert [w.shape.as_list() for w in rebuilt.weights] == [
            w.shape.as_list() for w in model.weights
        ]
    with tf.Graph().as_default():
        names = [w.name for w in make(K).weights]
    with tf.Graph().as_default():
        rebuilt = K.models.model_from_json(json.dumps(RECORDED[key]))
        assert [w.name for w in rebuilt.weights] == names


def test_model_from_config_predicts_like_the_original(session):
    model = cases.func_model(K)
    cases.fill(model)
    rebuilt = K.Model.from_config(model.get_config())
    rebuilt.set_weights(model.get_weights())
    for a, b in zip(model.predict([cases.XA, cases.XB]), rebuilt.predict([cases.XA, cases.XB])):
        np.testing.assert_array_equal(a, b)
    # The shared layer has one node per call, so the second call is node index 1.
    nodes = {entry["name"]: entry["inbound_nodes"] for entry in model.get_config()["layers"]}
    assert nodes["cat"] == [[["shared", 0, 0, {}], ["shared", 1, 0, {}]]]


def test_clone_model(session):
    for make in (cases.seq_model, cases.func_model, cases.nested_model):
        model = make(K)
        clone = K.models.clone_model(model)
        assert clone is not model
        assert [lyr.get_config() for lyr in clone.layers] == [
            lyr.get_config() for lyr in model.layers
        ]
        assert not {id(w) for w in clone.weights} & {id(w) for w in model.weights}
        assert [w.shape.as_list() for w in clone.weights] == [
            w.shape.as_list() for w in model.weights
        ]
    given = K.Input((4,), name="given")
    clone = K.models.clone_model(cases.seq_model(K), input_tensors=given)
    assert clone.inputs[0] is given


class Scaled(L.Layer):
    """A custom layer with a config (and so serializable)."""

    def __init__(self, factor=2.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, inputs):
        return inputs * self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


def _custom_model():
    x = K.Input((3,), name="x")
    return K.Model(x, Scaled(3.0, name="scaled")(L.Dense(2, name="d")(x)))


def test_custom_objects():
    with tf.Graph().as_default():
        text = _custom_model().to_json()
        with pytest.raises(ValueError) as e:
            K.models.model_from_json(text)
        # (the same words as TF 2.21's error)
        assert str(e.value) == RECORDED["err_unknown_layer"][1].replace("'Nope'", "'Scaled'")
        model = K.models.model_from_json(text, custom_objects={"Scaled": Scaled})
        assert model.get_layer("scaled").factor == 3.0
        with K.utils.CustomObjectScope({"Scaled": Scaled}):
            assert K.models.model_from_json(text).get_layer("scaled").factor == 3.0
        with K.utils.custom_object_scope({"Scaled": Scaled}):
            assert "Scaled" in K.utils.get_custom_objects()
        assert "Scaled" not in K.utils.get_custom_objects()
        K.utils.get_custom_objects()["Scaled"] = Scaled
        try:
            assert K.models.model_from_json(text).get_layer("scaled").factor == 3.0
        finally:
            del K.utils.get_custom_objects()["Scaled"]


def test_unknown_classes_raise_tf_errors():
    for key in ("err_unknown_layer", "err_unknown_model"):
        with pytest.raises(ValueError) as e:
            if key == "err_unknown_layer":
                K.models.model_from_json(
                    '{"class_name": "Sequential", "config": {"name": "s", "layers": '
                    '[{"class_name": "Nope", "config": {}}]}}'
                )
            else:
                K.models.model_from_config({"class_name": "Nope", "config": {}})
        assert [type(e.value).__name__, str(e.value)] == RECORDED[key]


def test_custom_loss_and_activation_names():
    def my_act(x):
        return x

    with K.utils.custom_object_scope({"my_act": my_act}):
        assert K.activations.get("my_act") is my_act
        assert K.utils.deserialize_keras_object("my_act") is my_act
    assert K.utils.serialize_keras_object(my_act) == "my_act"
    with pytest.raises(ValueError, match="Unknown activation function: 'my_act'"):
        K.activations.get("my_act")


def test_lambda_layer_config_is_refused():
    with tf.Graph().as_default():
        with pytest.raises(NotImplementedError, match="Lambda"):
            L.Lambda(lambda x: x).get_config()


# -- HDF5 ---------------------------------------------------------------------------------------


def test_load_tf_model_h5_restores_and_keeps_training(session):
    model = K.models.load_model(str(FIXTURES / "keras_saving_seq_tf.h5"))
    np.testing.assert_allclose(model.predict(cases.XS), RECORDED["seq_loaded_pred"], rtol=1e-6)
    assert model.optimizer.get_config()["learning_rate"] == pytest.approx(0.01)
    steps = [model.train_on_batch(cases.XS, cases.YS) for _ in range(2)]
    np.testing.assert_allclose(steps, RECORDED["seq_loaded_train_more"], rtol=1e-5)


def test_load_tf_model_h5_without_compile(session):
    model = K.models.load_model(str(FIXTURES / "keras_saving_seq_tf.h5"), compile=False)
    assert model.optimizer is None
    np.testing.assert_allclose(model.predict(cases.XS), RECORDED["seq_loaded_pred"], rtol=1e-6)


def _layout(path):
    """Every group/dataset with its attributes (names, dtypes, shapes), comparable."""
    out = {}

    def visit(name, obj):
        attrs = {}
        for k in obj.attrs:
            if k in ("model_config", "training_config"):
                attrs[k] = json.loads(obj.attrs[k])
                continue
            v = obj.attrs[k]
            attrs[k] = [x.decode() if isinstance(x, bytes) else x for x in np.atleast_1d(v)]
            attrs[k] = [str(x) for x in attrs[k]]
        kind = (str(obj.dtype), obj.shape) if isinstance(obj, h5py.Dataset) else "group"
        out[name] = (kind, attrs)

    with h5py.File(path, "r") as f:
        visit("/", f)
        f.visititems(visit)
    return out


def test_save_model_h5_has_tf_layout_and_continues_like_tf(session, tmp_path):
    model = cases.seq_model(K)
    model.compile(K.optimizers.Adam(0.01), "mse", metrics=["mae"])
    cases.fill(model)
    losses = [model.train_on_batch(cases.XS, cases.YS)[0] for _ in range(2)]
    np.testing.assert_allclose(losses, RECORDED["seq_train"], rtol=1e-5)
    path = str(tmp_path / "m.h5")
    model.save(path)
    assert _layout(path) == _layout(FIXTURES / "keras_saving_seq_tf.h5")
    with h5py.File(path, "r") as ours, h5py.File(FIXTURES / "keras_saving_seq_tf.h5") as tf_f:
        for name in ("model_weights/d1/d1/kernel:0", "optimizer_weights/training/Adam/iter:0"):
            np.testing.assert_allclose(ours[name][()], tf_f[name][()], rtol=1e-5, atol=1e-7)
    with tf.Graph().as_default(), tf.Session() as sess:
        K.backend.set_session(sess)
        loaded = K.models.load_model(path)
        steps = [loaded.train_on_batch(cases.XS, cases.YS) for _ in range(2)]
    np.testing.assert_allclose(steps, RECORDED["seq_train_more"], rtol=1e-5)


def test_load_tf_weights_h5(session, tmp_path):
    model = cases.func_model(K)
    model.load_weights(str(FIXTURES / "keras_saving_weights_tf.h5"))
    for got, want in zip(model.predict([cases.XA, cases.XB]), RECORDED["func_pred"]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    path = str(tmp_path / "w.h5")
    model.save_weights(path)
    assert _layout(path) == _layout(FIXTURES / "keras_saving_weights_tf.h5")
    other = cases.func_model(K)
    other.load_weights(path)
    for a, b in zip(other.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_load_weights_h5_errors_as_tf(session):
    path = str(FIXTURES / "keras_saving_weights_tf.h5")
    model = cases.seq_model(K)
    with pytest.raises(ValueError) as e:
        model.load_weights(path)
    assert [type(e.value).__name__, str(e.value)] == RECORDED["err_count"]
    a = K.Input((4,), name="a")
    narrow = K.Model(a, L.Dense(3, name="shared")(a))
    with pytest.raises(ValueError) as e:
        narrow.load_weights(path, by_name=True)
    assert [type(e.value).__name__, str(e.value)] == RECORDED["err_shape_by_name"]
    before = narrow.get_weights()
    narrow.load_weights(path, by_name=True, skip_mismatch=True)
    for x, y in zip(before, narrow.get_weights()):
        np.testing.assert_array_equal(x, y)


def test_load_weights_by_name_picks_matching_layers(session, tmp_path):
    model = cases.func_model(K)
    cases.fill(model)
    path = str(tmp_path / "w.h5")
    model.save_weights(path)
    b = K.Input((3,), name="b")
    part = K.Model(b, L.Dense(4, name="to4")(b))
    part.load_weights(path, by_name=True)
    np.testing.assert_array_equal(part.get_weights()[0], model.get_layer("to4").get_weights()[0])


def test_load_model_errors(tmp_path, session):
    with pytest.raises(OSError) as e:
        K.models.load_model(str(tmp_path / "no.h5"))
    assert str(e.value) == f"No file or directory found at {tmp_path / 'no.h5'}"
    # A directory without keras_metadata.pb is no Keras SavedModel (those:
    # tests/test_keras_savedmodel.py; a .keras path: tests/test_keras_s26_saving.py)
    with pytest.raises(NotImplementedError, match="keras_metadata.pb"):
        K.models.load_model(str(tmp_path))


def test_untrusted_h5_shapes_are_checked_before_reading(session, tmp_path):
    model = cases.func_model(K)
    path = str(tmp_path / "w.h5")
    model.save_weights(path)
    with h5py.File(path, "a") as f:
        del f["to4/to4/kernel:0"]
        f.create_dataset("to4/to4/kernel:0", shape=(100000, 1000), dtype="f4")
    with pytest.raises(ValueError, match=r"Weight expects shape \(3, 4\)"):
        model.load_weights(path)
    with h5py.File(path, "a") as f:
        del f["to4/to4/kernel:0"]
        f.create_dataset("to4/to4/kernel:0", data=np.array([[b"ab"] * 4] * 3))
    with pytest.raises(ValueError, match="not numeric"):
        model.load_weights(path)


def test_save_model_function_and_save_format(session, tmp_path):
    model = cases.seq_model(K)
    path = str(tmp_path / "model")
    K.models.save_model(model, path, save_format="h5")
    loaded = K.models.load_model(path)
    assert [layer.name for layer in loaded.layers] == ["d1", "bn", "d2"]
    assert loaded.optimizer is None


def test_nested_model_json_matches_tf():
    with tf.Graph().as_default():
        model = cases.nested_model(K)
        assert json.loads(model.to_json()) == RECORDED["nested_json"]
        rebuilt = K.models.model_from_json(model.to_json())
        assert json.loads(rebuilt.to_json()) == RECORDED["nested_json"]


def test_optimizer_state_names_match_tf(session):
    model = cases.seq_model(K)
    model.compile(K.optimizers.SGD(0.1, momentum=0.9), "mse")
    model.train_on_batch(cases.XS, cases.YS)
    names = [w.name for w in keras_saving.optimizer_weights(model.optimizer)]
    assert names == RECORDED["sgd_opt_weight_names"]


def test_momentum_state_survives_save_and_load(session, tmp_path):
    model = cases.nested_model(K)
    model.compile(K.optimizers.SGD(0.1, momentum=0.9), "mse")
    x, y = np.ones((3, 4), np.float32), np.ones((3, 1), np.float32)
    model.train_on_batch(x, y)
    model.save(str(tmp_path / "n.h5"))
    kept_on = [model.train_on_batch(x, y) for _ in range(2)]
    with tf.Graph().as_default(), tf.Session() as sess:
        K.backend.set_session(sess)
        loaded = K.models.load_model(str(tmp_path / "n.h5"))
        np.testing.assert_array_equal([loaded.train_on_batch(x, y) for _ in range(2)], kept_on)


def test_recurrent_model_h5_round_trip(session, tmp_path):
    # (no random initial values: fill() sets them, and drawing them is slow here)
    fixed = {"kernel_initializer": "ones", "recurrent_initializer": "ones"}
    x = K.Input((2, 3), name="seqin")
    lstm = L.LSTM(2, return_sequences=True, name="l", **fixed)
    h = L.Bidirectional(lstm, name="bi")(x)
    out = L.GRU(2, name="g", **fixed)(h)
    model = K.Model(x, out, name="rnn")
    cases.fill(model)
    xr = np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 2, 3)
    want = model.predict(xr)
    model.save(str(tmp_path / "r.h5"))
    with tf.Graph().as_default(), tf.Session() as sess:
        K.backend.set_session(sess)
        loaded = K.models.load_model(str(tmp_path / "r.h5"))
        np.testing.assert_array_equal(loaded.predict(xr), want)


def test_model_checkpoint_saves_whole_models(session, tmp_path):
    model = cases.seq_model(K)
    model.compile(K.optimizers.SGD(0.1), "mse")
    path = str(tmp_path / "m-{epoch:02d}.h5")
    checkpoint = K.callbacks.ModelCheckpoint(path, monitor="loss")
    model.fit(cases.XS, cases.YS, epochs=2, verbose=0, callbacks=[checkpoint])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m-01.h5", "m-02.h5"]
    with h5py.File(tmp_path / "m-02.h5", "r") as f:
        assert json.loads(f.attrs["training_config"])["loss"] == "mse"


def test_load_model_needs_a_model_config(session, tmp_path):
    path = str(tmp_path / "w.h5")
    cases.seq_model(K).save_weights(path)
    with pytest.raises(ValueError, match="No model config found in the file at"):
        K.models.load_model(path)


def test_layer_with_arguments_needs_its_own_get_config():
    class NoConfig(L.Layer):
        def __init__(self, factor, **kwargs):
            super().__init__(**kwargs)
            self.factor = factor

    with tf.Graph().as_default():
        # (TF 2.21's words)
        with pytest.raises(NotImplementedError, match="must override `get_config`"):
            NoConfig(2.0).get_config()
        assert L.Layer(name="plain").get_config() == {
            "name": "plain",
            "trainable": True,
            "dtype": None,
        }


def test_two_output_training_config_and_reload_match_tf(session, tmp_path):
    model = cases.func_model(K)
    cases.fill(model)
    cases.compile_multi(K, model)
    xs, ys = [cases.XA, cases.XB], [cases.YA, cases.YB]
    model.train_on_batch(xs, ys)
    path = str(tmp_path / "multi.h5")
    model.save(path)
    with h5py.File(path, "r") as f:
        assert json.loads(f.attrs["training_config"]) == RECORDED["multi_training_config"]
    with tf.Graph().as_default(), tf.Session() as sess:
        K.backend.set_session(sess)
        loaded = K.models.load_model(path)
        steps = [loaded.train_on_batch(xs, ys) for _ in range(2)]
        assert loaded.metrics_names == RECORDED["multi_metrics_names"]
    np.testing.assert_allclose(steps, RECORDED["multi_train_more"], rtol=1e-5)


def test_optimizer_get_and_set_weights(session):
    model = cases.seq_model(K)
    model.compile(K.optimizers.SGD(0.1, momentum=0.9), "mse")
    model.train_on_batch(cases.XS, cases.YS)
    state = model.optimizer.get_weights()
    assert [w.name for w in model.optimizer.weights] == RECORDED["sgd_opt_weight_names"]
    assert state[0] == 1
    model.optimizer.set_weights([np.zeros_like(s) for s in state])
    assert model.optimizer.get_weights()[0] == 0
    with pytest.raises(ValueError, match="expecting 7 weights"):
        model.optimizer.set_weights(state[:2])


def test_load_tf2_mode_h5(session):
    # Written by TF 2.21's tf_keras in TF 2 mode (keras_saving_make_tf2.py): new-style
    # initializer configs, LSTM implementation 2, TF 2's Adam in the training config.
    path = str(FIXTURES / "keras_saving_tf2.h5")
    want = json.loads((FIXTURES / "keras_saving_tf2.json").read_text())["pred"]
    model = K.models.load_model(path, compile=False)
    x = np.linspace(-1, 1, 60, dtype=np.float32).reshape(4, 5, 3)
    np.testing.assert_allclose(model.predict(x), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="compile=False"):
        K.models.load_model(path)


def test_unsupported_config_values_are_refused():
    config = {"name": "c", "filters": 2, "kernel_size": 3, "groups": 2}
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="groups=2 is not supported"):
            L.Conv1D.from_config(config)


def test_sequential_config_lists_only_a_given_input(session):
    model = K.Sequential([L.Dense(2, name="d")], name="s")
    assert _json(model.get_config()) == RECORDED["seq_config_unbuilt"]
    model.build((None, 3))
    assert _json(model.get_config()) == RECORDED["seq_config_built"]
    model = K.Sequential([L.Dense(2, name="d2")], name="s2")
    model.compile("sgd", "mse")
    model.train_on_batch(np.ones((2, 3), np.float32), np.ones((2, 2), np.float32))
    assert _json(model.get_config()) == RECORDED["seq_config_from_data"]


def test_node_call_kwargs_in_config():
    with tf.Graph().as_default():
        x = K.Input((3,), name="x")
        model = K.Model(x, L.Dropout(0.5, name="do")(x, training=True))
        assert _json(model.get_config()["layers"][1]) == RECORDED["node_kwargs_layer"]
        rebuilt = K.Model.from_config(model.get_config())
        assert rebuilt.get_layer("do")._inbound_nodes[0].arguments == {"training": True}


def test_sequential_built_from_data_saves_and_loads(session, tmp_path):
    # (TF 2.21 loads such a file too: RECORDED["err_load_deferred"] is None)
    assert RECORDED["err_load_deferred"] is None
    model = K.Sequential([L.Dense(2, name="d2")], name="s2")
    model.compile("sgd", "mse")
    model.train_on_batch(np.ones((2, 3), np.float32), np.ones((2, 2), np.float32))
    path = str(tmp_path / "deferred.h5")
    model.save(path)
    want = model.get_weights()
    with tf.Graph().as_default(), tf.Session() as sess:
        K.backend.set_session(sess)
        loaded = K.models.load_model(path)
        for got, w in zip(loaded.get_weights(), want):
            np.testing.assert_array_equal(got, w)


def test_load_model_with_custom_layer_and_loss(session, tmp_path):
    def my_loss(y_true, y_pred):
        return tf.reduce_mean(tf.square(y_true - y_pred), axis=-1)

    model = _custom_model()
    model.compile(K.optimizers.Adam(0.01), loss=my_loss, metrics=[my_loss])
    x, y = np.ones((2, 3), np.float32), np.ones((2, 2), np.float32)
    model.train_on_batch(x, y)
    path = str(tmp_path / "custom.h5")
    model.save(path)
    with h5py.File(path, "r") as f:
        assert json.loads(f.attrs["training_config"])["loss"] == "my_loss"
    steps = [model.train_on_batch(x, y) for _ in range(2)]
    with tf.Graph().as_default(), tf.Session() as sess:
        K.backend.set_session(sess)
        with pytest.raises(ValueError, match="Unknown layer: 'Scaled'"):
            K.models.load_model(path)
        custom = {"Scaled": Scaled, "my_loss": my_loss}
        loaded = K.models.load_model(path, custom_objects=custom)
        np.testing.assert_allclose([loaded.train_on_batch(x, y) for _ in range(2)], steps)
