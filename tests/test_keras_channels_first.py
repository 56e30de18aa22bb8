"""data_format='channels_first' for Keras conv and pooling layers in TF1 graph mode:
Conv1D, Conv2DTranspose, DepthwiseConv2D, SeparableConv2D, the 1-D poolings,
ZeroPadding2D, Cropping2D and UpSampling2D (Conv2D, the 2-D and global poolings had it).

Expected values recorded from TF 2.21 (TF_USE_LEGACY_KERAS=1, v2 behaviour disabled,
TF's CPU kernels): fixtures/keras_channels_first_tf.json, written by
fixtures/record_keras_channels_first_tf.py from fixtures/keras_channels_first_cases.py.
"""

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_channels_first_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "keras_channels_first_tf.json").read_text())


@pytest.mark.parametrize("name", cases.case_names())
def test_channels_first_matches_tf(name):
    got, want = cases.run(tf, name), RECORDED[name]
    if name != "upsampling2d":  # (asyncflow repeats rows; TF resizes between transposes)
        assert got["name"] == want["name"]
    assert got["shape"] == want["shape"]
    assert got["weight_shapes"] == want["weight_shapes"]
    np.testing.assert_allclose(got["values"], want["values"], rtol=1e-5, atol=1e-6)


def test_conv_rejects_unknown_data_format():
    with pytest.raises(ValueError, match="The `data_format` argument must be one of"):
        tf.keras.layers.Conv1D(2, 2, data_format="channels_middle")


def test_conv1d_channels_first_trains():
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Conv1D(2, 2, data_format="channels_first", input_shape=(3, 5)),
            tf.keras.layers.GlobalAveragePooling1D(data_format="channels_first"),
        ]
    )
    model.compile("sgd", "mse")
    x = np.random.RandomState(0).rand(4, 3, 5).astype(np.float32)
    hist = model.fit(x, np.ones((4, 2), np.float32), epochs=3, verbose=0)
    assert model.output_shape == (None, 2)
    assert hist.history["loss"][2] < hist.history["loss"][0]
    tf.keras.backend.clear_session()


def test_1d_layers_default_to_channels_last_whatever_the_image_format():
    # recorded from TF 2.21: with image_data_format channels_first, the 1-D layers stay
    # channels_last ((2, 4) poolings of a (2, 3, 4) input) and the 2-D ones follow it.
    layers = tf.keras.layers
    tf.keras.backend.set_image_data_format("channels_first")
    try:
        with tf.Graph().as_default():
            x = tf.placeholder(tf.float32, [2, 3, 4])
            assert layers.GlobalMaxPooling1D()(x).shape.as_list() == [2, 4]
            assert layers.GlobalAveragePooling1D()(x).shape.as_list() == [2, 4]
            assert layers.MaxPooling1D()(x).shape.as_list() == [2, 1, 4]
            assert layers.Conv1D(2, 2).data_format == "channels_last"
            assert layers.Conv2DTranspose(2, 2).data_format == "channels_first"
    finally:
        tf.keras.backend.set_image_data_format("channels_last")
