"""Keras crossentropies work from the logits a Keras softmax/sigmoid activation made
its output from, whichever crossentropy it is (TF's `_keras_logits`); a one-array list
is a single-input model's input. Every number recorded from TF 2.21 (tf_keras, graph
mode)."""

import numpy as np
import pytest

import asyncflow as af

X = np.array([[1.0, 2.0]], np.float32)
W = np.array([[100.0, 0.0, 0.0], [50.0, 0.0, 0.0]], np.float32)


@pytest.mark.parametrize("activation", ["softmax", "sigmoid"])
@pytest.mark.parametrize(
    "loss,y,want",
    [
        ("categorical_crossentropy", [[0.0, 1.0, 0.0]], 200.0),
        ("binary_crossentropy", [[0.0, 1.0, 0.0]], 67.1288),
        ("sparse_categorical_crossentropy", [1], 200.0),
    ],
)
def test_saturated_outputs_use_the_logits(activation, loss, y, want):
    af.keras.backend.clear_session()
    layer = af.keras.layers.Dense(3, activation=activation, input_shape=(2,), use_bias=False)
    model = af.keras.Sequential([layer])
    model.compile("sgd", loss)
    layer.set_weights([W])
    got = model.evaluate(X, np.array(y), verbose=0)
    assert got == pytest.approx(want, abs=1e-4)


def test_binary_crossentropy_of_a_softmax_output_and_a_one_array_list():
    af.keras.backend.clear_session()
    init = af.keras.initializers.Constant(0.1)
    dense = af.keras.layers.Dense(3, activation="softmax", input_shape=(4, 5),
                                  kernel_initializer=init)  # fmt: skip
    model = af.keras.Sequential([dense])
    model.compile("sgd", "binary_crossentropy")
    x = np.linspace(-1, 1, 40).reshape(2, 4, 5).astype(np.float32)
    assert model.evaluate(x, np.ones((2, 4, 3)) * 0.3, verbose=0) == pytest.approx(
        0.70387, abs=1e-5
    )
    assert model.predict([x]).shape == (2, 4, 3)
