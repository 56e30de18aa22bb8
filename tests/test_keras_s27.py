"""Keras differences from TF fixed in s27 (a nested model's BatchNormalization updates,
DenseNet's weight checks, TensorBoard's profile and projector files) and the Keras and
tf.train names added in s27.

Expected values were recorded from TF 2.21 (tf_keras, TF_USE_LEGACY_KERAS=1,
tf.disable_v2_behavior()) unless a test says otherwise.
"""

import numpy as np
import pytest

import asyncflow as tf

K = tf.keras


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g
    K.backend.clear_session()


# -- a nested Sequential holding BatchNormalization ----------------------------------------


def _nested_bn_model():
    inner = K.Sequential(
        [K.layers.Dense(4, input_shape=(3,)), K.layers.BatchNormalization(), K.layers.Dense(2)]
    )
    inp = K.Input((3,))
    model = K.Model(inp, K.layers.Dense(1)(inner(inp)))
    shapes = [w.shape for w in model.get_weights()]
    new = [np.linspace(-1, 1, np.prod(s)).reshape(s).astype("float32") for s in shapes]
    new[5] = np.linspace(0.5, 1.5, 4).astype("float32")  # moving_variance
    model.set_weights(new)
    model.compile(K.optimizers.SGD(0.1), "mse")
    return model, inner


X = np.linspace(-2, 2, 24).reshape(8, 3).astype("float32")
Y = np.sin(np.arange(8)).reshape(8, 1).astype("float32")


def test_nested_sequential_batchnorm_trains_as_tf():
    # The inner Sequential's updates on its own dense_input placeholder are not run
    # (here they were, and training asked for dense_input to be fed).
    model, inner = _nested_bn_model()
    losses = [model.train_on_batch(X, Y) for _ in range(3)]
    np.testing.assert_allclose(losses, [2.1964471, 4.4873977, 5.2178698], rtol=1e-5)
    hist = model.fit(X, Y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    np.testing.assert_allclose(hist.history["loss"], [1.1333742, 0.65061876], rtol=1e-5)
    np.testing.assert_allclose(
        model.predict(X).ravel(),
        [-0.44170004, -0.3677801, -0.29386032, -0.21994025, -0.14602035, -0.07210046,
         0.00181943, 0.07573932],
        rtol=1e-5, atol=1e-6,
    )  # fmt: skip
    np.testing.assert_allclose(model.evaluate(X, Y, verbose=0), 0.6014741, rtol=1e-5)
    w = model.get_weights()
    np.testing.assert_allclose(w[4], [-0.982984, -0.316206, 0.350575, 1.017354], rtol=1e-5)
    np.testing.assert_allclose(w[5], [0.502286, 0.78071, 1.091402, 1.434355], rtol=1e-5)
    assert (len(model.updates), len(inner.updates)) == (4, 4)


def test_get_updates_for_splits_by_inputs():
    model, inner = _nested_bn_model()
    assert model.get_updates_for(None) == []
    names = [u.name for u in model.get_updates_for(model.inputs)]
    assert names == [
        "sequential/batch_normalization/cond_2/Merge",
        "sequential/batch_normalization/cond_3/Merge",
    ]
    assert [u.name for u in inner.get_updates_for(inner.inputs)] == [
        "batch_normalization/cond_2/Merge",
        "batch_normalization/cond_3/Merge",
    ]


# -- DenseNet's ImageNet weights ----------------------------------------------------------


@pytest.mark.parametrize("blocks", [[1, 1, 1, 1], (6, 12, 24, 16)])
def test_densenet_imagenet_unknown_blocks_raises_as_keras(blocks):
    # TF 2.21's tf_keras builds the model, then fails on the weights path it never set
    # (a tuple is not one of its lists either); here the weights were silently skipped.
    from asyncflow.keras.applications import densenet

    with pytest.raises(UnboundLocalError, match="weights_path"):
        densenet.DenseNet(blocks, include_top=False, weights="imagenet", input_shape=(32, 32, 3))


def test_densenet_custom_blocks_without_weights_is_named_densenet():
    from asyncflow.keras.applications import densenet

    model = densenet.DenseNet(
        [1, 1, 1, 1], include_top=False, weights=None, input_shape=(32, 32, 3)
    )
    assert model.name == "densenet"
    assert model.output_shape == (None, 1, 1, 68)
