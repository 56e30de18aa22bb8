"""Keras pieces added in s26 beside the callbacks (RadialConstraint, activations.mish,
tf.keras.experimental's schedule aliases, model_from_yaml's refusal) and the Keras
differences from TF fixed in s26.

Expected values were recorded from TF 2.21 (tf_keras, TF_USE_LEGACY_KERAS=1,
tf.disable_v2_behavior()) unless a test says TF 2.15.1.
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


def _run(t):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(t)


# TF 2.21's values for the (0, k) kernels of np.arange(n*n*1*2).reshape(n, n, 1, 2):
# the centre (a cell, or a 2x2 block) takes k[s-1, s-1], ring r the diagonal beyond it.
RADIAL = {
    2: [[[[0.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]]],
    3: [[[[8.0, 8.0, 8.0], [8.0, 0.0, 8.0], [8.0, 8.0, 8.0]],
         [[9.0, 9.0, 9.0], [9.0, 1.0, 9.0], [9.0, 9.0, 9.0]]]],
    4: [[[[30.0, 30.0, 30.0, 30.0], [30.0, 10.0, 10.0, 30.0], [30.0, 10.0, 10.0, 30.0],
          [30.0, 30.0, 30.0, 30.0]],
         [[31.0, 31.0, 31.0, 31.0], [31.0, 11.0, 11.0, 31.0], [31.0, 11.0, 11.0, 31.0],
          [31.0, 31.0, 31.0, 31.0]]]],
    5: [[[[36.0, 36.0, 36.0, 36.0, 36.0], [36.0, 24.0, 24.0, 24.0, 36.0],
          [36.0, 24.0, 12.0, 24.0, 36.0], [36.0, 24.0, 24.0, 24.0, 36.0],
          [36.0, 36.0, 36.0, 36.0, 36.0]],
         [[37.0, 37.0, 37.0, 37.0, 37.0], [37.0, 25.0, 25.0, 25.0, 37.0],
          [37.0, 25.0, 13.0, 25.0, 37.0], [37.0, 25.0, 25.0, 25.0, 37.0],
          [37.0, 37.0, 37.0, 37.0, 37.0]]]],
}  # fmt: skip


@pytest.mark.parametrize("n", sorted(RADIAL))
def test_radial_constraint_values(n):
    w = np.arange(n * n * 2, dtype="float32").reshape(n, n, 1, 2)
    out = _run(K.constraints.RadialConstraint()(tf.constant(w)))
    assert out.transpose(2, 3, 0, 1).tolist() == RADIAL[n]


def test_radial_constraint_names_and_rank_error():
    C = K.constraints
    assert C.radial_constraint is C.RadialConstraint
    assert type(C.get("radial_constraint")) is C.RadialConstraint
    assert C.serialize(C.RadialConstraint()) == {"class_name": "RadialConstraint", "config": {}}
    assert type(C.deserialize({"class_name": "RadialConstraint", "config": {}})).__name__ == (
        "RadialConstraint"
    )
    with pytest.raises(ValueError, match=r"must have rank 4. Received weight tensor with shape"):
        C.RadialConstraint()(tf.ones([2, 2]))


def test_mish_values_gradient_and_name():
    x = tf.constant([-20.0, -2.0, -0.5, 0.0, 0.3, 1.5, 25.0])
    expected = [-4.1223074731533416e-08, -0.2525014579296112, -0.22074377536773682, 0.0,
                0.20800139009952545, 1.4033781290054321, 25.0]  # fmt: skip
    np.testing.assert_allclose(_run(K.activations.mish(x)), expected, rtol=1e-6)
    g = tf.constant([-2.0, 0.0, 1.5])
    grad = _run(tf.gradients(K.activations.mish(g), g)[0])
    np.testing.assert_allclose(grad, [-0.10835510492324829, 0.6, 1.0884881019592285], rtol=1e-6)
    assert K.activations.get("mish") is K.activations.mish
    assert K.activations.serialize(K.activations.mish) == "mish"
    assert K.layers.Dense(2, activation="mish").get_config()["activation"] == "mish"


def test_experimental_schedule_aliases_and_model_from_yaml():
    assert K.experimental.CosineDecay is K.optimizers.schedules.CosineDecay
    assert K.experimental.CosineDecayRestarts is K.optimizers.schedules.CosineDecayRestarts
    with pytest.raises(RuntimeError, match=r"model_from_yaml\(\)` has been removed"):
        K.models.model_from_yaml("a: 1")


def _xy():
    x = np.arange(12, dtype="float32").reshape(4, 3) / 10
    return x, np.arange(4, dtype="float32").reshape(4, 1)


def test_linear_model_trains_like_tf():
    model = K.experimental.LinearModel(units=1, kernel_initializer="ones")
    assert K.models.LinearModel is K.experimental.LinearModel
    model.compile("sgd", "mse")
    x, y = _xy()
    history = model.fit(x, y, epochs=2, batch_size=2, verbose=0, shuffle=False)
    np.testing.assert_allclose(
        history.history["loss"], [0.03466086648404598, 0.03259047609753907], rtol=1e-6
    )
    np.testing.assert_allclose(
        model.predict(x).ravel(),
        [0.2874971330165863, 1.1846904754638672, 2.081883668899536, 2.979076862335205],
        rtol=1e-6,
    )
    assert [w.name for w in model.weights] == ["linear_model/kernel:0", "linear_model/bias:0"]
    assert model.get_config() == {
        "name": "linear_model", "trainable": True, "dtype": "float32", "units": 1,
        "activation": "linear", "use_bias": True,
        "kernel_initializer": {"class_name": "Ones", "config": {"dtype": "float32"}},
        "bias_initializer": {"class_name": "Zeros", "config": {"dtype": "float32"}},
        "kernel_regularizer": None, "bias_regularizer": None,
    }  # fmt: skip


def test_linear_model_list_and_dict_inputs():
    model = K.experimental.LinearModel(
        units=2, activation="relu", use_bias=False, kernel_initializer="ones"
    )
    y = model([tf.ones([2, 3]), tf.ones([2, 1])])
    assert [w.name for w in model.weights] == [
        "linear_model/kernel:0",
        "linear_model/kernel_1:0",
    ]
    assert [w.shape.as_list() for w in model.weights] == [[3, 2], [1, 2]]
    assert _run(y).tolist() == [[4.0, 4.0], [4.0, 4.0]]
    by_key = K.experimental.LinearModel(kernel_initializer="ones", name="lm")
    out = by_key({"b": tf.ones([1, 2]), "a": tf.ones([1, 1])})
    assert [w.name for w in by_key.weights] == ["lm/kernel:0", "lm/kernel_1:0", "lm/bias:0"]
    assert _run(out).tolist() == [[3.0]]
    with pytest.raises(ValueError, match="does not match the structure expected"):
        by_key({"a": tf.ones([1, 1])})


def test_wide_deep_model_two_optimizers_like_tf():
    linear = K.experimental.LinearModel(units=1, kernel_initializer="ones")
    ones = "ones"
    dnn = K.Sequential(
        [K.layers.Dense(2, kernel_initializer=ones), K.layers.Dense(1, kernel_initializer=ones)]
    )
    model = K.experimental.WideDeepModel(linear, dnn, activation=None)
    assert K.models.WideDeepModel is K.experimental.WideDeepModel
    model.compile(["sgd", "adam"], "mse")
    x, y = _xy()
    history = model.fit([x, x], y, epochs=2, batch_size=2, verbose=0, shuffle=False)
    np.testing.assert_allclose(
        history.history["loss"], [15.111997842788696, 12.681082606315613], rtol=1e-6
    )
    np.testing.assert_allclose(
        model.predict([x, x]).ravel(),
        [0.5619419813156128, 3.0773348808288574, 5.592728614807129, 8.108121871948242],
        rtol=1e-6,
    )
    config = model.get_config()
    assert (config["name"], config["activation"]) == ("wide_deep_model", "linear")
    assert config["linear_model"]["class_name"] == "LinearModel"
    assert config["dnn_model"]["class_name"] == "Sequential"


def test_wide_deep_model_one_optimizer_sigmoid_like_tf():
    model = K.experimental.WideDeepModel(
        K.experimental.LinearModel(units=1, kernel_initializer="ones"),
        K.Sequential([K.layers.Dense(1, kernel_initializer="ones")]),
        activation="sigmoid",
    )
    model.compile("sgd", "binary_crossentropy")
    x = _xy()[0]
    y = np.array([[0], [1], [0], [1]], "float32")
    history = model.fit(x, y, epochs=2, batch_size=2, verbose=0, shuffle=False)
    np.testing.assert_allclose(
        history.history["loss"], [1.3338502049446106, 1.3239297568798065], rtol=1e-6
    )
    np.testing.assert_allclose(
        model.predict(x).ravel(),
        [0.6374331116676331, 0.9130393862724304, 0.9843021035194397, 0.9973366260528564],
        rtol=1e-6,
    )


def test_warmstart_embedding_matrix_like_tf(tmp_path):
    base = np.arange(6, dtype="float32").reshape(3, 2)
    ws = K.utils.warmstart_embedding_matrix
    out = ws(["a", "b", "c"], ["c", "d", "a"], base, new_embeddings_initializer="zeros")
    assert (out.shape.as_list(), out.dtype.name) == ([3, 2], "float32")
    assert _run(out).tolist() == [[4.0, 5.0], [0.0, 0.0], [0.0, 1.0]]
    out = ws(np.array(["a", "b", "c"]), ("x", "y"), base, new_embeddings_initializer="ones")
    assert _run(out).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    out = ws(["a", "b", "c"], ["b"], tf.constant(base), new_embeddings_initializer="zeros")
    assert _run(out).tolist() == [[2.0, 3.0]]
    vocab = tmp_path / "v.txt"
    vocab.write_text("a\nb\nc\n")
    out = ws(str(vocab), ["b", "q"], base.astype("float64"), new_embeddings_initializer="zeros")
    assert (out.dtype.name, _run(out).tolist()) == ("float64", [[2.0, 3.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match="with at least one token. Received 0 instead"):
        ws(["a"], [], base)
    with pytest.raises(ValueError, match="Instead type <class 'int'> was received"):
        ws(5, ["a"], base)
    with pytest.raises(ValueError, match="Vocabulary file /nonexist/v.txt does not exist"):
        ws("/nonexist/v.txt", ["a"], base)
    with pytest.raises(AttributeError, match="has no attribute 'numpy'"):
        ws(tf.constant(["a"]), ["a"], base)


_X = np.random.RandomState(0).rand(6, 3).astype("float32")
_Y = (np.random.RandomState(1).rand(6, 1) > 0.5).astype("float32")

# TF 2.21: optimizer.variables() is optimizer.weights (iterations, then the slots); the
# hyperparameter variables (learning_rate, decay, beta_1 ...) are not listed.
OPTIMIZER_VARIABLES = {
    "sgd": ["iter"],
    "adam": ["iter", "dense/kernel/m", "dense/bias/m", "dense/kernel/v", "dense/bias/v"],
    "rmsprop": ["iter", "dense/kernel/rms", "dense/bias/rms"],
    "adagrad": ["iter", "dense/kernel/accumulator", "dense/bias/accumulator"],
    "nadam": ["iter", "momentum_cache", "dense/kernel/m", "dense/bias/m", "dense/kernel/v",
              "dense/bias/v"],
    "ftrl": ["iter", "dense/kernel/accumulator", "dense/kernel/linear",
             "dense/bias/accumulator", "dense/bias/linear"],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(OPTIMIZER_VARIABLES))
def test_optimizer_variables_are_its_weights(name):
    model = K.Sequential([K.layers.Dense(1, input_shape=(3,))])
    opt = K.optimizers.get(name)
    assert opt.variables() == []
    model.compile(opt, "mse")
    model.fit(_X, _Y, epochs=1, batch_size=3, verbose=0)
    prefix = f"training/{type(opt).__name__}/"
    expected = [prefix + v + ":0" for v in OPTIMIZER_VARIABLES[name]]
    assert [v.name for v in opt.variables()] == expected
    assert [v.name for v in opt.weights] == expected


def _metric_history(metrics):
    model = K.Sequential(
        [K.layers.Dense(1, input_shape=(3,), activation="sigmoid", kernel_initializer="ones")]
    )
    model.compile("sgd", "binary_crossentropy", metrics=metrics)
    history = model.fit(_X, _Y, epochs=2, batch_size=3, verbose=0, shuffle=False)
    values = {k: [round(v, 6) for v in vs] for k, vs in history.history.items()}
    evaluated = [round(float(v), 6) for v in model.evaluate(_X, _Y, verbose=0)]
    return model.metrics_names, values, evaluated


def test_repeated_metric_names_are_reported_once():
    # TF 2.21 keeps one metric per name, in the first one's place.
    assert _metric_history(["acc", "acc"])[0] == ["loss", "acc"]
    assert _metric_history(["accuracy", "acc"])[0] == ["loss", "acc"]
    names, values, evaluated = _metric_history(
        ["mae", K.metrics.MeanAbsoluteError(), "acc", "binary_accuracy"]
    )
    assert names == ["loss", "mean_absolute_error", "acc", "binary_accuracy"]
    assert values == {
        "loss": [1.575073, 1.557229],
        "mean_absolute_error": [0.721239, 0.718927],
        "acc": [0.166667, 0.166667],
        "binary_accuracy": [0.166667, 0.166667],
    }
    assert evaluated == [1.543868, 0.717452, 0.166667, 0.166667]
    # Distinct default names (auc, auc_1) are kept.
    assert _metric_history([K.metrics.AUC(), K.metrics.AUC()])[0] == ["loss", "auc", "auc_1"]


def test_repeated_metric_name_reports_the_last_metric():
    # TF 2.21: AUC alone gives 0.4 here and Precision 1/6, Recall 1.0; the name keeps
    # the value of the last metric given under it.
    pr = [K.metrics.AUC(name="a"), K.metrics.Precision(name="a")]
    assert _metric_history(pr)[1:] == (
        {"loss": [1.575073, 1.557229], "a": [0.166667, 0.166667]},
        [1.543868, 0.166667],
    )
    par = [K.metrics.Precision(name="a"), K.metrics.AUC(name="a"), K.metrics.Recall(name="a")]
    assert _metric_history(par) == (
        ["loss", "a"],
        {"loss": [1.575073, 1.557229], "a": [1.0, 1.0]},
        [1.543868, 1.0],
    )


def _transpose(cls, shape, dynamic_batch=False, **kwargs):
    x = np.arange(np.prod(shape), dtype="float32").reshape(shape) / 10
    layer = cls(2, kernel_initializer="ones", **kwargs)
    ph = tf.placeholder(tf.float32, (None,) + shape[1:] if dynamic_batch else shape)
    y = layer(ph)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(y, {ph: x})
    weighted = float((out * np.arange(out.size).reshape(out.shape)).sum())
    return y.shape.as_list(), out.shape, float(out.sum()), weighted, layer


# TF 2.21: (static output shape, sum, sum of value * flat index) of each case.
TRANSPOSE_CASES = [
    ("Conv2DTranspose", (1, 3, 4, 1), dict(kernel_size=3, strides=2, output_padding=1),
     [1, 8, 10, 2], 118.8, 10549.8),
    ("Conv2DTranspose", (1, 3, 4, 1),
     dict(kernel_size=3, strides=2, padding="same", output_padding=1), [1, 6, 8, 2], 85.6,
     5550.0),
    ("Conv2DTranspose", (1, 3, 4, 1),
     dict(kernel_size=(2, 3), strides=(2, 3), output_padding=(1, 2)), [1, 7, 14, 2], 79.2,
     8713.2),
    # A kernel shorter than its stride: in * stride (the last positions stay zero).
    ("Conv2DTranspose", (1, 3, 4, 1), dict(kernel_size=2, strides=3), [1, 9, 12, 2], 52.8,
     6904.8),
    ("Conv2DTranspose", (1, 3, 4, 1), dict(kernel_size=3, dilation_rate=2), [1, 7, 8, 2],
     118.8, 7569.0),
    ("Conv1DTranspose", (1, 5, 2), dict(kernel_size=3, strides=2, output_padding=1),
     [1, 12, 2], 27.0, 379.5),
    ("Conv1DTranspose", (1, 5, 2),
     dict(kernel_size=3, strides=3, padding="same", output_padding=2), [1, 15, 2], 27.0, 535.5),
    ("Conv3DTranspose", (1, 2, 3, 2, 1), dict(kernel_size=2, strides=2, output_padding=1),
     [1, 5, 7, 5, 2], 105.6, 18660.8),
    ("Conv3DTranspose", (1, 2, 3, 2, 1),
     dict(kernel_size=3, strides=(2, 2, 1), padding="same", output_padding=(1, 0, 0)),
     [1, 4, 5, 2, 2], 137.2, 7095.4),
]  # fmt: skip


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=lambda c: f"{c[0]}-{c[2]}")
@pytest.mark.parametrize("dynamic_batch", [False, True])
def test_transposed_convolutions_output_padding(case, dynamic_batch):
    name, shape, kwargs, static, total, weighted = case
    got_static, got_shape, got_total, got_weighted, layer = _transpose(
        getattr(K.layers, name), shape, dynamic_batch, **kwargs
    )
    expected_static = [None] + static[1:] if dynamic_batch else static
    assert (got_static, list(got_shape)) == (expected_static, static)
    assert got_total == pytest.approx(total, rel=1e-5)
    assert got_weighted == pytest.approx(weighted, rel=1e-5)
    padding = kwargs.get("output_padding")
    expected = None if padding is None else list(np.broadcast_to(padding, len(shape) - 2))
    assert layer.get_config()["output_padding"] == expected
    assert list(layer.get_config())[-2:] == ["groups", "output_padding"]


def test_transposed_convolution_errors():
    with pytest.raises(ValueError, match=r"Strides must be greater than output padding. "
                       r"Received strides=\(2, 2\), output_padding=\(2, 2\)."):  # fmt: skip
        K.layers.Conv2DTranspose(2, 3, strides=2, output_padding=2)
    with pytest.raises(ValueError, match=r"Received strides=\(2,\), output_padding=\(3,\)"):
        K.layers.Conv1DTranspose(2, 3, strides=2, output_padding=3)
    with pytest.raises(ValueError, match=r"strides=\(2, 2, 2\), output_padding=\(1, 2, 1\)"):
        K.layers.Conv3DTranspose(2, 2, strides=2, output_padding=(1, 2, 1))
    with pytest.raises(ValueError, match=r"The channel dimension of the inputs to "
                       r"`Conv2DTranspose` should be defined. The input_shape received is "
                       r"\(\?, \?, \?, \?\), where axis -1"):  # fmt: skip
        K.layers.Conv2DTranspose(2, 3)(tf.placeholder(tf.float32, [None] * 4))
    rebuilt = K.layers.Conv2DTranspose.from_config(
        K.layers.Conv2DTranspose(2, 3, strides=2, output_padding=1).get_config()
    )
    assert rebuilt.output_padding == (1, 1)


def _channels_first_cases():
    L, cf = K.layers, "channels_first"

    def normal(shape, dtype=None, **kwargs):
        # Deterministic weights (sin of the flat index / 2) with no random draw.
        return tf.constant(np.sin(np.arange(np.prod(shape))).reshape(shape) / 2, dtype)

    return {
        "conv3d": (lambda: L.Conv3D(2, 2, data_format=cf, kernel_initializer="ones"),
                   (1, 3, 3, 4, 2)),
        "conv3dT": (lambda: L.Conv3DTranspose(2, 2, strides=2, data_format=cf,
                                              kernel_initializer="ones"), (1, 3, 2, 3, 2)),
        "conv1dT": (lambda: L.Conv1DTranspose(2, 2, strides=2, data_format=cf,
                                              kernel_initializer="ones"), (1, 3, 4)),
        "dw1d": (lambda: L.DepthwiseConv1D(2, data_format=cf, depthwise_initializer="ones"),
                 (1, 3, 4)),
        "sep1d": (lambda: L.SeparableConv1D(2, 2, data_format=cf, depthwise_initializer="ones",
                                            pointwise_initializer="ones"), (1, 3, 4)),
        "maxpool3d": (lambda: L.MaxPooling3D(2, data_format=cf), (1, 2, 4, 4, 5)),
        "avgpool3d": (lambda: L.AveragePooling3D((2, 1, 2), strides=1, data_format=cf),
                      (1, 2, 4, 4, 5)),
        "gmax3d": (lambda: L.GlobalMaxPooling3D(data_format=cf), (1, 2, 4, 4, 5)),
        "gavg3d": (lambda: L.GlobalAveragePooling3D(data_format=cf, keepdims=True),
                   (1, 2, 4, 4, 5)),
        "crop3d": (lambda: L.Cropping3D(((1, 0), (0, 1), (1, 1)), data_format=cf),
                   (1, 2, 4, 4, 5)),
        "pad3d": (lambda: L.ZeroPadding3D(((1, 0), (0, 1), (1, 2)), data_format=cf),
                  (1, 2, 2, 3, 2)),
        "up3d": (lambda: L.UpSampling3D((2, 1, 3), data_format=cf), (1, 2, 2, 3, 2)),
        "sdrop3d": (lambda: L.SpatialDropout3D(0.5, data_format=cf), (1, 2, 2, 3, 2)),
        "lc1d": (lambda: L.LocallyConnected1D(2, 2, data_format=cf,
                                              kernel_initializer=normal), (1, 3, 5)),
        "lc2d": (lambda: L.LocallyConnected2D(2, (2, 2), strides=(1, 2), data_format=cf,
                                              kernel_initializer=normal), (1, 3, 4, 5)),
        "lc1d_last": (lambda: L.LocallyConnected1D(2, 2, kernel_initializer=normal),
                      (1, 5, 3)),
        "convlstm2d": (lambda: L.ConvLSTM2D(2, 2, data_format=cf, kernel_initializer=normal,
                                            recurrent_initializer="ones",
                                            return_sequences=True), (1, 2, 3, 3, 4)),
        "convlstm2d_st": (lambda: L.ConvLSTM2D(2, 2, data_format=cf, return_state=True,
                                               kernel_initializer=normal, padding="same",
                                               recurrent_initializer="ones"), (1, 2, 3, 3, 4)),
        "convlstm1d": (lambda: L.ConvLSTM1D(2, 2, data_format=cf, kernel_initializer=normal,
                                            recurrent_initializer="ones"), (1, 2, 3, 4)),
    }  # fmt: skip


# TF 2.21: per output (static shape, sum, sum of value * flat index), then weight shapes;
# inputs (np.arange % 7) / 10, kernels `normal` (sin of the flat index / 2) or ones.
CHANNELS_FIRST_EXPECTED = {
    'conv3d': ([([1, 2, 2, 3, 1], 87.2, 483.6)], [[2, 2, 2, 3, 2], [2]]),
    'conv3dT': ([([1, 2, 4, 6, 4], 168.0, 16052.0)], [[2, 2, 2, 2, 3], [2]]),
    'conv1dT': ([([1, 2, 8], 12.4, 96.6)], [[2, 2, 3], [2]]),
    'dw1d': ([([1, 3, 3], 5.0, 22.3)], [[2, 3, 1], [3]]),
    'sep1d': ([([1, 2, 3], 10.0, 26.0)], [[2, 3, 1], [1, 3, 2], [2]]),
    'maxpool3d': ([([1, 2, 2, 2, 2], 8.7, 64.6)], []),
    'avgpool3d': ([([1, 2, 3, 4, 4], 28.725, 1388.45)], []),
    'gmax3d': ([([1, 2], 1.2, 0.6)], []),
    'gavg3d': ([([1, 2, 1, 1, 1], 0.5962, 0.304)], []),
    'crop3d': ([([1, 2, 3, 3, 3], 16.2, 424.2)], []),
    'pad3d': ([([1, 2, 3, 4, 5], 6.6, 451.3)], []),
    'up3d': ([([1, 2, 4, 3, 6], 39.6, 2926.8)], []),
    'sdrop3d': ([([1, 2, 2, 3, 2], 6.6, 78.2)], []),
    'lc1d': ([([1, 2, 4], 0.1823, 1.576)], [[4, 6, 2], [4, 2]]),
    'lc2d': ([([1, 2, 3, 2], -0.025, -1.521)], [[6, 12, 2], [3, 2, 2]]),
    'lc1d_last': ([([1, 4, 2], -0.6439, -1.677)], [[4, 6, 2], [4, 2]]),
    'convlstm2d': ([([1, 2, 2, 2, 3], -1.3533, -20.937)], [[2, 2, 3, 8], [2, 2, 2, 8], [8]]),
    'convlstm2d_st': ([([1, 2, 3, 4], -1.0647, -12.382),
                       ([1, 2, 3, 4], -1.0647, -12.382), ([1, 2, 3, 4], -2.2204, -25.014)],
                      [[2, 2, 3, 8], [2, 2, 2, 8], [8]]),
    'convlstm1d': ([([1, 2, 3], -0.5363, -0.838)], [[2, 3, 8], [2, 2, 8], [8]]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CHANNELS_FIRST_EXPECTED))
def test_channels_first_layers_match_tf(name):
    make, shape = _channels_first_cases()[name]
    layer = make()
    x = (np.arange(np.prod(shape), dtype="float32").reshape(shape) % 7) / 10
    y = layer(tf.constant(x))
    outs = y if isinstance(y, list) else [y]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        values = sess.run(outs)
    got = []
    for out, v in zip(outs, values, strict=True):
        weighted = float((v * np.arange(v.size).reshape(v.shape)).sum())
        got.append((out.shape.as_list(), float(v.sum()), weighted))
    expected, weight_shapes = CHANNELS_FIRST_EXPECTED[name]
    assert [w.shape.as_list() for w in layer.weights] == weight_shapes
    assert [g[0] for g in got] == [e[0] for e in expected]
    for g, e in zip(got, expected, strict=True):
        assert g[1] == pytest.approx(e[1], abs=1e-3)
        assert g[2] == pytest.approx(e[2], abs=2e-2)


def _sine(shape, dtype=None, **kwargs):
    return tf.constant(np.sin(np.arange(np.prod(shape))).reshape(shape) / 2, dtype)


def test_conv_lstm_dropout_only_in_training():
    x = (np.arange(2 * 3 * 3 * 4 * 2, dtype="float32").reshape(2, 3, 3, 4, 2) % 7) / 10
    layer = K.layers.ConvLSTM2D(
        2, 2, kernel_initializer=_sine, recurrent_initializer="ones", dropout=0.5,
        recurrent_dropout=0.3,
    )  # fmt: skip
    assert (layer.get_config()["dropout"], layer.get_config()["recurrent_dropout"]) == (0.5, 0.3)
    inp = K.Input((3, 3, 4, 2))
    fn = K.backend.function([inp, K.backend.learning_phase()], [layer(inp)])
    inference = fn([x, 0])[0]
    # TF 2.21 predicts -2.2547 (summed) for this layer with or without dropout.
    assert float(inference.sum()) == pytest.approx(-2.2547, abs=1e-3)
    assert not np.allclose(fn([x, 1])[0], inference)
    with pytest.raises(ValueError, match=r"range \[0, 1\)"):
        K.layers.ConvLSTM2D(2, 2, dropout=1.5)(tf.constant(x))


class _Tf1Style(K.layers.Layer):
    @K.utils.track_tf1_style_variables
    def call(self, x):
        with tf.variable_scope("s"):
            v = tf.get_variable(
                "v", [3, 2], initializer=tf.ones_initializer(),
                regularizer=lambda w: tf.reduce_sum(w),
            )  # fmt: skip
        inner = K.utils.get_or_create_layer(
            "dd", lambda: K.layers.Dense(2, kernel_initializer="ones", name="inner")
        )
        return tf.matmul(x, v) + inner(x)


def test_track_tf1_style_variables_reuses_per_object():
    first, second = _Tf1Style(name="l"), _Tf1Style(name="l_1")
    y1 = first(tf.ones([1, 3]))
    y2 = first(tf.ones([1, 3]) * 2)
    y3 = second(tf.ones([1, 3]))
    # TF 2.21 graph mode: reused within an object, new (uniquely named) per object; not
    # in the layer's weights nor the REGULARIZATION_LOSSES collection.
    assert [v.name for v in tf.global_variables()] == [
        "s/v:0", "l/inner/kernel:0", "l/inner/bias:0",
        "s/v_1:0", "l_1_1/inner/kernel:0", "l_1_1/inner/bias:0",
    ]  # fmt: skip
    assert first.weights == [] and first.trainable_weights == []
    assert tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES) == []
    assert [float(v) for v in _run(first.losses)] == [6.0]
    assert [v.tolist() for v in _run([y1, y2, y3])] == [[[6.0, 6.0]], [[12.0, 12.0]],
                                                        [[6.0, 6.0]]]  # fmt: skip


def test_get_or_create_layer_outside_a_tracked_method_and_bad_owner():
    make = lambda: K.layers.Dense(1)  # noqa: E731
    assert K.utils.get_or_create_layer("x", make) is not K.utils.get_or_create_layer("x", make)
    with pytest.raises(ValueError, match="must be applied to a method of a subclassed"):
        K.utils.track_tf1_style_variables(lambda a: a)(3)


def test_loss_scale_optimizer_trains_like_tf():
    x = np.random.RandomState(0).rand(8, 3).astype("float32")
    y = np.random.RandomState(1).rand(8, 1).astype("float32")
    opt = K.mixed_precision.LossScaleOptimizer(K.optimizers.SGD(0.1))
    assert (opt.dynamic, opt.initial_scale, opt.dynamic_growth_steps) == (True, 32768.0, 2000)
    model = K.Sequential([K.layers.Dense(1, input_shape=(3,), kernel_initializer="ones")])
    model.compile(opt, "mse")
    history = model.fit(x, y, batch_size=3, epochs=2, verbose=0, shuffle=False)
    # TF 2.21 (the same as plain SGD: the scale is a power of two).
    np.testing.assert_allclose(
        history.history["loss"], [1.4503668807446957, 0.13536282791756094], rtol=1e-6
    )
    np.testing.assert_allclose(
        K.backend.get_value(model.weights[0]).ravel(),
        [0.5732357501983643, 0.44584834575653076, 0.44453752040863037],
        rtol=1e-6,
    )
    assert K.backend.get_value(opt.loss_scale) == 32768.0
    assert [v.name.split("/")[-1] for v in opt.variables()] == ["iter:0"]


def test_loss_scale_optimizer_dynamic_scale_moves():
    # The sequence TF 2.21 gives (a resource variable: TF's SGD needs one here).
    var = tf.Variable([1.0, 2.0], use_resource=True)
    opt = K.mixed_precision.LossScaleOptimizer(
        K.optimizers.SGD(0.5), initial_scale=8, dynamic_growth_steps=2
    )
    grad = tf.placeholder(tf.float32, [2])
    step = opt.apply_gradients([(grad, var)])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        seen = []
        for g in ([1.0, 1.0], [np.inf, 1.0], [1.0, 1.0], [1.0, 1.0], [np.nan, 0.0]):
            sess.run(step, {grad: g})
            seen.append((sess.run(opt.loss_scale), sess.run(var).tolist()))
    assert seen == [
        (8.0, [0.5, 1.5]),  # one good step of two
        (4.0, [0.5, 1.5]),  # not applied, halved
        (4.0, [0.0, 1.0]),
        (8.0, [-0.5, 0.5]),  # two good steps: doubled
        (4.0, [-0.5, 0.5]),
    ]


def test_loss_scale_optimizer_static_and_errors():
    opt = K.mixed_precision.LossScaleOptimizer(
        K.optimizers.SGD(0.1), dynamic=False, initial_scale=8
    )
    assert (opt.dynamic, opt.initial_scale, opt.dynamic_growth_steps) == (False, 8.0, None)
    with pytest.raises(TypeError, match='"inner_optimizer" must be an instance of'):
        K.mixed_precision.LossScaleOptimizer(tf.train.GradientDescentOptimizer(0.1))


def test_model_to_dot_and_plot_model_without_pydot(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pydot", None)  # (import pydot fails)
    model = K.Sequential([K.layers.Dense(1, input_shape=(2,))])
    with pytest.raises(ImportError, match=r"install pydot \(`pip install pydot`\) for model_to"):
        K.utils.model_to_dot(model)
    with pytest.raises(ImportError, match="and install graphviz .* for plot_model to work"):
        K.utils.plot_model(model)


def _stateful_sums(channels_first=False, **kwargs):
    x = (np.arange(2 * 3 * 5 * 4 * 2, dtype="float32").reshape(2, 3, 5, 4, 2) % 7) / 10
    x = x.transpose(0, 1, 4, 2, 3) if channels_first else x
    layer = K.layers.ConvLSTM2D(
        2, (2, 3), strides=(2, 1), kernel_initializer=_sine, recurrent_initializer="ones",
        stateful=True, batch_input_shape=x.shape,
        data_format="channels_first" if channels_first else None, **kwargs,
    )  # fmt: skip
    model = K.Sequential([layer])
    first = model.predict(x, batch_size=2)
    second = model.predict(x, batch_size=2)  # from the states the first left
    model.reset_states()
    again = model.predict(x, batch_size=2)
    sums = [round(float(v.sum()), 4) for v in (first, second, again)]
    return [s.shape.as_list() for s in layer.states], sums, layer.get_config()["stateful"]


def test_conv_lstm_stateful_like_tf():
    # TF 2.21: state shapes, and the summed outputs of predict, predict, reset, predict.
    assert _stateful_sums() == ([[2, 2, 2, 2]] * 2, [-2.0803, -2.3928, -2.0803], True)
    assert _stateful_sums(True) == ([[2, 2, 2, 2]] * 2, [-2.0803, -2.3928, -2.0803], True)
    seq = _stateful_sums(return_sequences=True, padding="same")
    assert seq == ([[2, 3, 4, 2]] * 2, [-7.8823, -16.8667, -7.8823], True)
    with pytest.raises(TypeError, match="batch size"):
        K.layers.ConvLSTM2D(2, 2, stateful=True)(K.Input((3, 4, 4, 2)))
    with pytest.raises(AttributeError, match="Layer must be stateful."):
        K.layers.ConvLSTM2D(2, 2).reset_states()
