"""Keras' v3 saving format (`.keras` archives, `.weights.h5` files): files TF 2.21's
tf_keras wrote (tests/fixtures/keras_v3, recorded in eager mode: graph-mode tf_keras
refuses the format) load here with TF's predictions, and the files written here have the
layout TF writes (recorded from TF 2.21 for the same models)."""

import json
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

import asyncflow as tf
from asyncflow.keras import saving_v3

FIXTURES = Path(__file__).parent / "fixtures" / "keras_v3"
L = tf.keras.layers


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    tf.keras.backend.clear_session()
    yield
    tf.keras.backend.clear_session()


def _h5_paths(f) -> list:
    out = []
    f.visit(out.append)
    return sorted(out)


def _sequential():
    return tf.keras.Sequential(
        [
            L.Dense(3, input_shape=(2,), name="d1"),
            L.BatchNormalization(name="bn"),
            L.Dense(1, name="d2"),
        ]
    )


def _functional():
    inp = L.Input((4, 3), name="x")
    h = L.LSTM(2, return_sequences=True)(inp)
    h = L.Bidirectional(L.GRU(2, return_sequences=True))(h)
    h = L.TimeDistributed(L.Dense(2))(h)
    sub = tf.keras.Sequential([L.Dense(2, input_shape=(4, 2)), L.Dense(2)], name="sub")
    h = L.BatchNormalization()(L.Flatten()(sub(h)))
    return tf.keras.Model(inp, L.Dense(1)(h))


X_SEQ = np.arange(8, dtype=np.float32).reshape(4, 2)
X_FUN = np.linspace(0, 1, 48).reshape(4, 4, 3).astype(np.float32)

# The weights file TF 2.21 writes for the functional model above (with
# metrics=["mae"], after training): its group and dataset paths.  TF also writes
# "metrics/mean" (its loss tracker, which graph-mode Keras has not) and an empty
# "layers/bidirectional/layer" (the unbuilt template layer).
TF_FUNCTIONAL_LAYOUT_HEAD = [
    "layers",
    "layers/batch_normalization",
    "layers/batch_normalization/vars",
    "layers/batch_normalization/vars/0",
    "layers/batch_normalization/vars/1",
    "layers/batch_normalization/vars/2",
    "layers/batch_normalization/vars/3",
    "layers/bidirectional",
    "layers/bidirectional/backward_layer",
    "layers/bidirectional/backward_layer/cell",
    "layers/bidirectional/backward_layer/cell/vars",
    "layers/bidirectional/backward_layer/cell/vars/0",
    "layers/bidirectional/backward_layer/cell/vars/1",
    "layers/bidirectional/backward_layer/cell/vars/2",
    "layers/bidirectional/backward_layer/vars",
    "layers/bidirectional/forward_layer",
    "layers/bidirectional/forward_layer/cell",
    "layers/bidirectional/forward_layer/cell/vars",
    "layers/bidirectional/forward_layer/cell/vars/0",
    "layers/bidirectional/forward_layer/cell/vars/1",
    "layers/bidirectional/forward_layer/cell/vars/2",
    "layers/bidirectional/forward_layer/vars",
    "layers/bidirectional/vars",
    "layers/dense",
    "layers/dense/vars",
    "layers/dense/vars/0",
    "layers/dense/vars/1",
    "layers/flatten",
    "layers/flatten/vars",
    "layers/input_layer",
    "layers/input_layer/vars",
    "layers/lstm",
    "layers/lstm/cell",
    "layers/lstm/cell/vars",
    "layers/lstm/cell/vars/0",
    "layers/lstm/cell/vars/1",
    "layers/lstm/cell/vars/2",
    "layers/lstm/vars",
    "layers/sequential",
    "layers/sequential/layers",
    "layers/sequential/layers/dense",
    "layers/sequential/layers/dense/vars",
    "layers/sequential/layers/dense/vars/0",
    "layers/sequential/layers/dense/vars/1",
    "layers/sequential/layers/dense_1",
    "layers/sequential/layers/dense_1/vars",
    "layers/sequential/layers/dense_1/vars/0",
    "layers/sequential/layers/dense_1/vars/1",
    "layers/sequential/vars",
    "layers/time_distributed",
    "layers/time_distributed/layer",
    "layers/time_distributed/layer/vars",
    "layers/time_distributed/layer/vars/0",
    "layers/time_distributed/layer/vars/1",
    "layers/time_distributed/vars",
    "metrics",
    "metrics/mean_metric_wrapper",
    "metrics/mean_metric_wrapper/vars",
    "metrics/mean_metric_wrapper/vars/0",
    "metrics/mean_metric_wrapper/vars/1",
    "vars",
]


def test_tf_written_sequential_archive_loads_with_tfs_predictions():
    model = tf.keras.models.load_model(FIXTURES / "tf_sequential.keras")
    assert [w.name for w in model.weights] == [
        "d1/kernel:0",
        "d1/bias:0",
        "bn/gamma:0",
        "bn/beta:0",
        "bn/moving_mean:0",
        "bn/moving_variance:0",
        "d2/kernel:0",
        "d2/bias:0",
    ]
    # recorded from TF 2.21 (load_model of the same file, predict)
    want = [0.66885537, 1.9576386, 3.2464216, 4.5352044]
    np.testing.assert_allclose(model.predict(X_SEQ).ravel(), want, rtol=1e-6)
    # compile_config {"optimizer": "adam", "loss": "mse"}: compiled afresh
    assert type(model.optimizer).__name__ == "Adam"
    assert model.loss == "mse"


def test_tf_written_weights_file_loads_into_a_matching_model():
    model = _sequential()
    model.load_weights(str(FIXTURES / "tf_sequential.weights.h5"))
    want = [0.66885537, 1.9576386, 3.2464216, 4.5352044]  # recorded from TF 2.21
    np.testing.assert_allclose(model.predict(X_SEQ).ravel(), want, rtol=1e-6)


def test_tf_written_functional_archive_loads_with_tfs_predictions():
    model = tf.keras.models.load_model(str(FIXTURES / "tf_functional.keras"))
    assert [type(la).__name__ for la in model.layers] == [
        "InputLayer",
        "LSTM",
        "Bidirectional",
        "TimeDistributed",
        "Sequential",
        "Flatten",
        "Dense",
    ]
    want = [0.11960246, 0.145605, 0.16520235, 0.17699668]  # recorded from TF 2.21
    np.testing.assert_allclose(model.predict(X_FUN).ravel(), want, rtol=1e-5)
    assert model.metrics_names == ["loss", "mean_absolute_error"]
    # compile=False leaves it uncompiled
    bare = tf.keras.models.load_model(str(FIXTURES / "tf_functional.keras"), compile=False)
    assert bare.optimizer is None


def test_saved_archive_has_tfs_entries_and_layout(tmp_path):
    model = _functional()
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="mse", metrics=["mae"])
    model.fit(X_FUN, np.ones((4, 1), np.float32), epochs=1, verbose=0)
    path = tmp_path / "m.keras"
    model.save(str(path))
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        assert [i.filename for i in infos] == ["metadata.json", "config.json", "model.weights.h5"]
        assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED}
        metadata = json.loads(zf.read("metadata.json"))
        config = json.loads(zf.read("config.json"))
        weights = zf.read("model.weights.h5")
    assert sorted(metadata) == ["date_saved", "keras_version"]
    assert metadata["keras_version"] == "2.21.0"
    assert config["module"] == "tf_keras.src.engine.functional"
    assert config["class_name"] == "Functional"
    assert config["registered_name"] is None
    assert config["build_config"] == {"input_shape": [None, 4, 3]}
    lstm = config["config"]["layers"][1]
    assert (lstm["module"], lstm["class_name"]) == ("keras.layers", "LSTM")
    assert lstm["config"]["kernel_initializer"]["module"] == "keras.initializers"
    assert lstm["inbound_nodes"] == [[["x", 0, 0, {}]]]
    compiled = config["compile_config"]
    assert compiled["optimizer"]["module"] == "keras.optimizers.legacy"
    assert compiled["optimizer"]["class_name"] == "Adam"
    assert compiled["loss"] == "mse"
    with h5py.File(__import__("io").BytesIO(weights), "r") as h5:
        assert _h5_paths(h5) == TF_FUNCTIONAL_LAYOUT_HEAD
        assert h5["layers/lstm/cell/vars/0"].shape == (3, 8)
    before = model.predict(X_FUN)
    tf.keras.backend.clear_session()
    loaded = tf.keras.models.load_model(str(path))
    np.testing.assert_array_equal(loaded.predict(X_FUN), before)
    assert loaded.metrics_names == ["loss", "mean_absolute_error"]


def test_weights_file_round_trip_and_layout(tmp_path):
    model = _sequential()
    path = str(tmp_path / "w.weights.h5")
    model.save_weights(path)
    with h5py.File(path, "r") as h5:
        # as TF 2.21 writes this model's weights (Sequential.layers has no InputLayer)
        assert [p for p in _h5_paths(h5) if p.endswith("/vars") or p == "vars"] == [
            "layers/batch_normalization/vars",
            "layers/dense/vars",
            "layers/dense_1/vars",
            "vars",
        ]
        assert h5["layers/dense/vars/0"].shape == (2, 3)
        assert list(h5["layers/batch_normalization/vars"]) == ["0", "1", "2", "3"]
    before = model.predict(X_SEQ)
    other = _sequential()
    other.load_weights(path)
    np.testing.assert_array_equal(other.predict(X_SEQ), before)


def test_weights_that_do_not_fit_raise_value_error(tmp_path):
    path = str(tmp_path / "w.weights.h5")
    _sequential().save_weights(path)
    wider = tf.keras.Sequential([L.Dense(4, input_shape=(2,)), L.BatchNormalization(), L.Dense(1)])
    with pytest.raises(ValueError, match="Shape mismatch"):
        wider.load_weights(path)
    # (a group the model has no object for is ignored, as in TF)
    fewer = tf.keras.Sequential([L.Dense(3, input_shape=(2,)), L.Dense(1, use_bias=False)])
    with pytest.raises(ValueError, match="expected 1 variables, but received 2"):
        fewer.load_weights(path)
    fewer.load_weights(path, skip_mismatch=True)  # warns and leaves them


def test_keras_format_needs_a_keras_path(tmp_path):
    with pytest.raises(ValueError, match="Invalid filepath extension"):
        _sequential().save(str(tmp_path / "m.bin"), save_format="keras")
    with pytest.raises(OSError, match="No file or directory"):
        tf.keras.models.load_model(str(tmp_path / "none.keras"))
    (tmp_path / "bad.keras").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a Keras"):
        tf.keras.models.load_model(str(tmp_path / "bad.keras"))


@pytest.mark.parametrize(
    "name,snake",
    [
        ("BatchNormalization", "batch_normalization"),
        ("GRUCell", "gru_cell"),
        ("LSTM", "lstm"),
        ("Conv2D", "conv2d"),
        ("MeanMetricWrapper", "mean_metric_wrapper"),
        ("InputLayer", "input_layer"),
    ],
)
def test_object_names_are_tfs_snake_case(name, snake):
    assert saving_v3.to_snake_case(name) == snake
