"""Configs of the Keras pieces the masking/RNN work added after the config table was
written: StackedRNNCells (TF 2.21 graph mode writes `cells` as class_name/config pairs,
the cells' own configs inside, recorded) and an RNN with time_major=True."""

import asyncflow as af

L = af.keras.layers


def test_stacked_cells_config_round_trip():
    stacked = L.StackedRNNCells([L.LSTMCell(3), L.GRUCell(2)], name="st")
    config = stacked.get_config()
    assert sorted(config) == ["cells", "dtype", "name", "trainable"]
    assert [c["class_name"] for c in config["cells"]] == ["LSTMCell", "GRUCell"]
    assert config["cells"][0]["config"]["units"] == 3
    assert config["cells"][0]["config"]["bias_initializer"] == {
        "class_name": "Zeros",
        "config": {"dtype": "float32"},
    }
    again = L.StackedRNNCells.from_config(config)
    assert [type(c).__name__ for c in again.cells] == ["LSTMCell", "GRUCell"]
    model = af.keras.Sequential(
        [L.RNN(L.StackedRNNCells([L.LSTMCell(3), L.LSTMCell(2)]), input_shape=(5, 4))]
    )
    rebuilt = af.keras.models.model_from_json(model.to_json())
    assert [type(c).__name__ for c in rebuilt.layers[0].cell.cells] == ["LSTMCell"] * 2


def test_time_major_round_trips():
    layer = L.LSTM(4, time_major=True)
    assert layer.get_config()["time_major"] is True
    assert L.LSTM.from_config(layer.get_config()).time_major is True
