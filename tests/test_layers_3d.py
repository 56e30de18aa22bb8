"""tf.layers' 3-D layers (conv3d, conv3d_transpose, max/average_pooling3d and their
classes): TF1's variable names and shapes, output shapes, values against af.nn."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _graph(graph):
    return graph


def _run(fetches):
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        return s.run(fetches)


def test_conv3d_variables_shapes_and_values():
    x = RNG.standard_normal((2, 5, 6, 7, 3)).astype(np.float32)
    y = af.layers.conv3d(x, 4, (2, 3, 2), strides=(1, 2, 2), padding="same",
                         bias_initializer=af.constant_initializer(0.5))  # fmt: skip
    names = {v.op.name: v.shape.as_list() for v in af.trainable_variables()}
    assert names == {"conv3d/kernel": [2, 3, 2, 3, 4], "conv3d/bias": [4]}
    assert y.shape.as_list() == [2, 5, 3, 4, 4]
    kernel = af.trainable_variables()[0]
    ref = af.nn.conv3d(x, kernel, [1, 1, 2, 2, 1], "SAME") + 0.5
    a, b = _run([y, ref])
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_conv3d_channels_first_and_class_reuse():
    x = af.placeholder(af.float32, [None, 2, 4, 4, 4])
    layer = af.layers.Conv3D(3, 2, data_format="channels_first", activation=af.nn.relu)
    y1, y2 = layer(x), layer(x)
    assert y1.shape.as_list() == [None, 3, 3, 3, 3]
    assert [v.op.name for v in af.trainable_variables()] == ["conv3d/kernel", "conv3d/bias"]
    assert layer.kernel.shape.as_list() == [2, 2, 2, 2, 3]
    feed = RNG.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        a, b = s.run([y1, y2], {x: feed})
    np.testing.assert_array_equal(a, b)
    assert (a >= 0).all()


@pytest.mark.parametrize("padding,want", [("valid", [2, 9, 7, 5, 6]), ("same", [2, 8, 6, 4, 6])])
def test_conv3d_transpose_output_sizes_as_tf(padding, want):
    x = af.constant(RNG.standard_normal((2, 4, 3, 2, 5)).astype(np.float32))
    y = af.layers.conv3d_transpose(x, 6, 3, strides=2, padding=padding)
    assert y.shape.as_list() == want
    assert af.trainable_variables()[0].shape.as_list() == [3, 3, 3, 6, 5]
    assert _run(y).shape == tuple(want)


def test_conv3d_transpose_class_is_trainable():
    x = af.constant(RNG.standard_normal((1, 2, 2, 2, 1)).astype(np.float32))
    layer = af.layers.Conv3DTranspose(2, 2, strides=2)
    loss = af.reduce_sum(af.square(layer(x) - 1.0))
    train = af.train.GradientDescentOptimizer(0.01).minimize(loss)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        first = s.run(loss)
        for _ in range(20):
            s.run(train)
        assert s.run(loss) < first


@pytest.mark.parametrize(
    "fn,cls,op_type",
    [
        (af.layers.max_pooling3d, af.layers.MaxPooling3D, "MaxPool3D"),
        (af.layers.average_pooling3d, af.layers.AveragePooling3D, "AvgPool3D"),
    ],
)
def test_pooling3d_layers(fn, cls, op_type):
    x = RNG.standard_normal((1, 4, 4, 6, 2)).astype(np.float32)
    y = fn(x, (2, 2, 3), (2, 2, 3))
    assert y.op.type == op_type and y.op.name.startswith(fn.__name__)
    assert y.shape.as_list() == [1, 2, 2, 2, 2]
    z = cls(pool_size=(2, 2, 3), strides=(2, 2, 3))(x)
    nn_fn = af.nn.max_pool3d if op_type == "MaxPool3D" else af.nn.avg_pool3d
    ref = nn_fn(x, [1, 2, 2, 3, 1], [1, 2, 2, 3, 1], "VALID")
    a, b, c = _run([y, z, ref])
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(b, c)


def test_bad_arguments_raise_value_error():
    x = af.placeholder(af.float32, [1, 4, 4, 4, 2])
    with pytest.raises(ValueError, match="3 integers"):
        af.layers.conv3d(x, 2, (2, 2))
    with pytest.raises(ValueError, match="data_format"):
        af.layers.max_pooling3d(x, 2, 2, data_format="NDHWC")
    with pytest.raises(ValueError, match="channel dimension"):
        af.layers.conv3d(af.placeholder(af.float32, [1, 4, 4, 4, None]), 2, 2)
