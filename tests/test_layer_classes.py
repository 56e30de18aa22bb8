"""tf.layers classes and the added functional layers against NumPy, with TF1's
variable names and reuse rules."""

import numpy as np
import pytest

import asyncflow as af

L = af.layers


def np_conv2d_transpose(x, k, stride, out_hw):
    """x [n, h, w, c], k [kh, kw, f, c]; 'valid' layout, then cropped to out_hw."""
    n, h, w, _ = x.shape
    kh, kw, f, _ = k.shape
    full = np.zeros((n, (h - 1) * stride + kh, (w - 1) * stride + kw, f))
    for i in range(h):
        for j in range(w):
            full[:, i * stride : i * stride + kh, j * stride : j * stride + kw] += np.einsum(
                "nc,abfc->nabf", x[:, i, j], k
            )
    return full[:, : out_hw[0], : out_hw[1]]


def np_conv1d_valid(x, k):
    n, w, _ = x.shape
    kw = k.shape[0]
    return np.stack([np.einsum("nkc,kcf->nf", x[:, i : i + kw], k) for i in range(w - kw + 1)], 1)


def test_dense_class_reuses_its_variables(sess):
    x = af.placeholder(af.float32, [None, 4])
    d = L.Dense(3, activation=af.nn.relu)
    y1, y2 = d(x), d(x * 2.0)
    assert [v.name for v in d.variables] == ["dense/kernel:0", "dense/bias:0"]
    assert len(af.trainable_variables()) == 2 and d.kernel is d.variables[0]
    d2 = L.Dense(2)
    d2(y1)
    # TF 2.21: a layer's name is its Keras name (dense_1, dense_2), its scope "dense_1".
    assert d2.name == "dense_2" and d2.kernel.name == "dense_1/kernel:0"
    sess.run(af.global_variables_initializer())
    xv = np.random.RandomState(0).randn(5, 4).astype(np.float32)
    k, b = sess.run([d.kernel, d.bias])
    a1, a2 = sess.run([y1, y2], {x: xv})
    np.testing.assert_allclose(a1, np.maximum(xv @ k + b, 0), rtol=1e-5)
    np.testing.assert_allclose(a2, np.maximum(2 * xv @ k + b, 0), rtol=1e-5)


def test_layer_non_trainable_and_named(graph):
    d = L.Dense(2, name="head", trainable=False)
    d(af.placeholder(af.float32, [None, 3]))
    assert [v.name for v in d.non_trainable_variables] == ["head/kernel:0", "head/bias:0"]
    assert d.trainable_variables == [] and af.trainable_variables() == []


@pytest.mark.parametrize("padding,stride", [("same", 2), ("valid", 2), ("valid", 1)])
def test_conv2d_transpose_like_numpy(sess, padding, stride):
    rng = np.random.RandomState(1)
    x = rng.randn(2, 4, 3, 2).astype(np.float32)
    layer = L.Conv2DTranspose(5, 3, strides=stride, padding=padding, use_bias=False)
    y = layer(af.constant(x))
    out_hw = (
        (4 * stride, 3 * stride)
        if padding == "same"
        else ((4 - 1) * stride + 3, (3 - 1) * stride + 3)
    )
    assert y.shape.as_list() == [2, *out_hw, 5]
    sess.run(af.global_variables_initializer())
    k = sess.run(layer.kernel)
    assert k.shape == (3, 3, 5, 2)
    if padding == "same":
        # TF's SAME transpose: the 'valid' result with pad_before = (k - stride) // 2 ...
        full = np_conv2d_transpose(x, k, stride, (99, 99))
        ph = max(3 - stride, 0) // 2
        want = full[:, ph : ph + out_hw[0], ph : ph + out_hw[1]]
    else:
        want = np_conv2d_transpose(x, k, stride, out_hw)
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-4, atol=1e-5)


def test_conv1d_and_pooling1d_like_numpy(sess):
    rng = np.random.RandomState(2)
    x = rng.randn(2, 7, 3).astype(np.float32)
    c = L.Conv1D(4, 3, use_bias=False)
    y = c(af.constant(x))
    mp = L.max_pooling1d(af.constant(x), 2, 2)
    ap = L.AveragePooling1D(3, 2)(af.constant(x))
    sess.run(af.global_variables_initializer())
    want = np_conv1d_valid(x, sess.run(c.kernel))  # (float32 sums near 0: an atol too)
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sess.run(mp), x[:, :6].reshape(2, 3, 2, 3).max(2))
    want = np.stack([x[:, i : i + 3].mean(1) for i in (0, 2, 4)], 1)
    np.testing.assert_allclose(sess.run(ap), want, rtol=1e-6)


def test_separable_conv2d_is_depthwise_then_pointwise(sess):
    rng = np.random.RandomState(3)
    x = rng.randn(1, 5, 5, 2).astype(np.float32)
    s = L.SeparableConv2D(3, 3, depth_multiplier=2, use_bias=False)
    y = s(af.constant(x))
    sess.run(af.global_variables_initializer())
    dk, pk = sess.run([s.depthwise_kernel, s.pointwise_kernel])
    assert dk.shape == (3, 3, 2, 2) and pk.shape == (1, 1, 4, 3)
    dw = np.zeros((1, 3, 3, 4))
    for i in range(3):
        for j in range(3):
            patch = x[0, i : i + 3, j : j + 3]  # [3, 3, c]
            dw[0, i, j] = np.einsum("abc,abcm->cm", patch, dk).reshape(-1)
    np.testing.assert_allclose(sess.run(y), dw @ pk[0, 0], rtol=1e-4, atol=1e-5)


def test_batch_normalization_class_training_and_updates(sess):
    x = np.random.RandomState(4).randn(8, 3).astype(np.float32) * 2 + 1
    bn = L.BatchNormalization(momentum=0.9)
    training = af.placeholder_with_default(False, [])
    y = bn(af.constant(x), training=training)
    assert [v.name.split("/")[-1] for v in bn.variables] == [
        "gamma:0",
        "beta:0",
        "moving_mean:0",
        "moving_variance:0",
    ]
    assert len(bn.updates) == 2 and len(bn.trainable_variables) == 2
    sess.run(af.global_variables_initializer())
    got, _ = sess.run([y, bn.updates], {training: True})
    want = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sess.run(bn.moving_mean), 0.1 * x.mean(0), rtol=1e-5)


def test_dropout_and_flatten_classes(sess):
    x = af.constant(np.ones((4, 2, 3), np.float32))
    assert sess.run(L.Dropout(0.5)(x, training=False)).sum() == 24
    kept = sess.run(L.Dropout(0.5, seed=1)(x, training=True))
    assert set(np.unique(kept)) <= {0.0, 2.0}
    assert L.Flatten()(x).shape.as_list() == [4, 6]


def test_custom_layer_subclass(sess):
    class Scale(L.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(
                "w", [int(input_shape[-1])], initializer=af.constant_initializer(3.0)
            )

        def call(self, inputs):
            return inputs * self.w

    s = Scale(name="scale")
    y = s(af.constant([[1.0, 2.0]]))
    s(af.constant([[0.0, 0.0]]))  # reuses w
    assert [v.name for v in s.variables] == ["scale/w:0"]
    sess.run(af.global_variables_initializer())
    np.testing.assert_allclose(sess.run(y), [[3.0, 6.0]])
