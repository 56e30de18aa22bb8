"""`tf.keras.applications`, the newer families (MobileNetV3, EfficientNet, EfficientNetV2,
ConvNeXt, RegNet, ResNet-RS), against TF 2.21 (tf_keras 2.21, TF1 graph mode,
`tf.compat.v1.keras` with TF_USE_LEGACY_KERAS=1).

All values below were recorded from TF 2.21:
- STRUCTURE: per model at input 32x32x3 with weights=None, built as the tests below
  build it (classes=5 and no classifier activation where it has a top; MobileNetV3Large
  minimalistic; MobileNetV3Small without top, average pooled): its name, number of
  layers, trainable and non-trainable parameter counts, and the first 16 hex digits of
  the sha256 of the JSON (separators ",", ":") of [[layer class, layer name, output
  shape], ...] in `model.layers` order and of [[weight name, shape, trainable], ...] in
  `model.weights` order.
- PREDICTIONS: `model.predict` of two images after every weight was set by `_fill`.
- The ImageNet-weights case: TF saved the `_fill`ed weights of MobileNetV3Small (no top)
  under Keras' file name, loaded them back through `weights='imagenet'` and predicted.
"""

import hashlib
import json
import logging

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.keras.applications import _common_v2, convnext, mobilenet_v3

A = tf.keras.applications
K = tf.keras

STRUCTURE = {
    "MobileNetV3Large": (
        "MobilenetV3large",
        146,
        2649693,
        24400,
        "33e7b2749c452e50",
        "517ef7f75233ae53",
    ),
    "EfficientNetB0": (
        "efficientnetb0",
        240,
        4013953,
        42023,
        "f21ebbd04ef6f9cd",
        "c4a4b86b65252a93",
    ),
    "EfficientNetV2B0": (
        "efficientnetv2-b0",
        273,
        5865109,
        60608,
        "14051d6dc78e0481",
        "7c1ebe770ab20bac",
    ),
    "ConvNeXtTiny": ("convnext_tiny", 153, 27823973, 0, "af768df81bef350a", "884b07850d3bb4d7"),
    "RegNetX002": ("regnetx002", 145, 2317637, 20848, "2fc0c7698d58239f", "62f2e7d6f5abfa8d"),
    "RegNetY002": ("regnety002", 197, 2795841, 20848, "3b1a9483a5423846", "aeb6d71038b83593"),
    "ResNetRS50": ("resnet-rs-50", 274, 33653157, 53376, "e8ee288b956e2fe9", "b47a3427d2a9cc21"),
    "MobileNetV3Small": (
        "MobilenetV3small",
        230,
        927008,
        12112,
        "2a22097a82d805e0",
        "ee92fd502df79308",
    ),
}

# classes=5, classifier_activation=None (RegNet's head has none anyway).
PREDICTIONS = {
    "MobileNetV3Large": [
        [-0.02258829, -0.08271585, -0.2464436, 0.1939121, 0.1870717],
        [-0.02258825, -0.08271585, -0.2464437, 0.1939121, 0.1870717],
    ],
    "EfficientNetB0": [
        [0.1474462, 0.09055323, 0.233945, 0.1046487, 0.08883199],
        [0.1474462, 0.09055321, 0.233945, 0.1046487, 0.08883199],
    ],
    "EfficientNetV2B0": [
        [0.05551766, 0.2982295, 0.06747855, -0.2050292, -0.1094346],
        [0.05551771, 0.2982295, 0.06747852, -0.2050292, -0.1094346],
    ],
    "ConvNeXtTiny": [
        [0.5202511, 0.2242972, -1.098486, -0.6596841, 1.224312],
        [0.467653, -0.3824562, -0.06920488, -1.382466, 1.85597],
    ],
    "RegNetX002": [
        [0.3625376, 0.2787555, 0.4526281, 0.490853, -0.187664],
        [0.4452667, 0.3785693, 0.3979571, 0.5083538, -0.1716677],
    ],
    "RegNetY002": [
        [0.3564293, -0.2106266, -0.3498735, 0.01010314, 0.5769442],
        [0.3019409, -0.1662572, -0.3455018, 0.006837487, 0.6293731],
    ],
}
# MobileNetV3Small(include_top=False, pooling="avg") with the filled weights loaded from
# Keras' cache: each row's first 6 values and its sum.
H5_HEAD = [
    [-0.007520062, -0.06215693, 0.1309212, -0.023502, -0.01176785, -0.07404128],
    [-0.007520066, -0.06215694, 0.1309212, -0.02350201, -0.01176787, -0.0740413],
]
H5_SUMS = [0.70545815, 0.7054584]


@pytest.fixture(autouse=True)
def fresh_keras():
    K.backend.clear_session()
    yield
    K.backend.clear_session()


def _images():
    return np.random.RandomState(99).uniform(0, 255, (2, 32, 32, 3)).astype("float32")


def _fill(model) -> None:
    """Weight i of model.weights from RandomState(i): kernels scaled by their fan-in,
    variances and gammas near 1, the rest small; integer counters 0."""
    values = []
    for i, w in enumerate(model.weights):
        shape, name, dtype = w.shape.as_list(), w.name, w.dtype.base_dtype.name
        u = np.random.RandomState(i).uniform(-1.0, 1.0, shape)
        if dtype.startswith("int"):
            v = np.zeros(shape, dtype)
        elif "variance" in name:
            v = 1.0 + 0.5 * u
        elif "gamma" in name and len(shape) == 1:
            v = 1.0 + 0.1 * u
        elif len(shape) >= 2:
            v = u * np.sqrt(3.0 / np.prod(shape[:-1]))
        else:
            v = 0.1 * u
        values.append(np.asarray(v, dtype))
    model.set_weights(values)


def _digest(rows) -> str:
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()[:16]


def _signature(model) -> tuple:
    def shape(layer):
        s = layer.output_shape
        return list(s[0] if isinstance(s, list) else s)

    trainable = model.trainable_weights
    layers = [[type(la).__name__, la.name, shape(la)] for la in model.layers]
    weights = [[w.name, w.shape.as_list(), any(w is t for t in trainable)] for w in model.weights]
    count = lambda ws: int(sum(np.prod(w.shape.as_list()) for w in ws))  # noqa: E731
    return (
        model.name,
        len(model.layers),
        count(trainable),
        count(model.non_trainable_weights),
        _digest(layers),
        _digest(weights),
    )


def _build(name, **kwargs):
    kwargs.setdefault("classes", 5)
    return getattr(A, name)(input_shape=(32, 32, 3), weights=None, **kwargs)


@pytest.mark.parametrize("name", sorted(PREDICTIONS))
def test_structure_and_predictions_match_tf(name):
    kwargs = {"classifier_activation": None}
    if name == "MobileNetV3Large":
        kwargs["minimalistic"] = True
    model = _build(name, **kwargs)
    assert _signature(model) == STRUCTURE[name]
    _fill(model)
    got = model.predict(_images())
    np.testing.assert_allclose(got, PREDICTIONS[name], rtol=1e-4, atol=2e-6)


def test_structure_resnet_rs():
    assert _signature(_build("ResNetRS50")) == STRUCTURE["ResNetRS50"]


def test_imagenet_weights_load_from_keras_cache(tmp_path, monkeypatch):
    """weights='imagenet' finds Keras' file name in ~/.keras/models (checked against the
    file's hash, here the file written for the test) and loads it by layer order."""
    monkeypatch.setenv("HOME", str(tmp_path))
    models_dir = tmp_path / ".keras" / "models"
    models_dir.mkdir(parents=True)
    source = A.MobileNetV3Small(
        input_shape=(32, 32, 3), weights=None, include_top=False, pooling="avg"
    )
    assert _signature(source) == STRUCTURE["MobileNetV3Small"]
    _fill(source)
    path = models_dir / "weights_mobilenet_v3_small_224_1.0_float_no_top_v2.h5"
    source.save_weights(str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    key = "small_224_1.0_float"
    monkeypatch.setitem(
        mobilenet_v3.WEIGHTS_HASHES, key, (mobilenet_v3.WEIGHTS_HASHES[key][0], digest)
    )
    K.backend.clear_session()
    model = A.MobileNetV3Small(
        input_shape=(32, 32, 3), weights="imagenet", include_top=False, pooling="avg"
    )
    got = model.predict(_images())
    np.testing.assert_allclose(got[:, :6], H5_HEAD, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got.astype(np.float64).sum(axis=1), H5_SUMS, rtol=1e-4)


# (function, arguments, what TF 2.21 passed to get_file: file name, origin, file hash);
# cache_subdir was "models" in each.
FETCHES = [
    (
        "MobileNetV3Large",
        {"minimalistic": True},
        "weights_mobilenet_v3_large_minimalistic_224_1.0_float.h5",
        "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v3/"
        "weights_mobilenet_v3_large_minimalistic_224_1.0_float.h5",
        "675e7b876c45c57e9e63e6d90a36599c",
    ),
    (
        "EfficientNetB0",
        {"include_top": False, "input_shape": (32, 32, 3)},
        "efficientnetb0_notop.h5",
        "https://storage.googleapis.com/keras-applications/efficientnetb0_notop.h5",
        "50bc09e76180e00e4465e1a485ddc09d",
    ),
]


@pytest.mark.parametrize(("name", "kwargs", "fname", "origin", "file_hash"), FETCHES)
def test_imagenet_weights_file_names(monkeypatch, name, kwargs, fname, origin, file_hash):
    calls = []

    def fake_get_file(fname, origin, cache_subdir, file_hash):
        calls.append((fname, origin, cache_subdir, file_hash))
        raise LookupError("stop")  # (nothing to load)

    monkeypatch.setattr(_common_v2, "get_file", fake_get_file)
    with pytest.raises(LookupError, match="stop"):
        getattr(A, name)(**kwargs)
    assert calls == [(fname, origin, "models", file_hash)]


ERRORS = [
    (
        "MobileNetV3Small",
        {"weights": "nope"},
        "The `weights` argument should be either `None` (random initialization), `imagenet` "
        "(pre-training on ImageNet), or the path to the weights file to be loaded.  Received "
        "weights=nope",
    ),
    (
        "MobileNetV3Small",
        {"classes": 10},
        'If using `weights` as `"imagenet"` with `include_top` as true, `classes` should be '
        "1000.  Received classes=10",
    ),
    (
        "MobileNetV3Small",
        {"weights": None, "input_shape": (16, 16, 3)},
        "Input size must be at least 32x32; Received `input_shape=(16, 16, 3)`",
    ),
    (
        "MobileNetV3Large",
        {"minimalistic": True, "alpha": 0.75},
        "If imagenet weights are being loaded, alpha can be one of `0.75`, `1.0` for non "
        "minimalistic or `1.0` for minimalistic only.",
    ),
    (
        "EfficientNetB0",
        {"weights": "nope"},
        "The `weights` argument should be either `None` (random initialization), `imagenet` "
        "(pre-training on ImageNet), or the path to the weights file to be loaded.",
    ),
    (
        "EfficientNetB0",
        {"classes": 10},
        'If using `weights` as `"imagenet"` with `include_top` as true, `classes` should be 1000',
    ),
    (
        "EfficientNetB0",
        {"input_shape": (32, 32, 3)},
        "When setting `include_top=True` and loading `imagenet` weights, `input_shape` should "
        "be (224, 224, 3).  Received: input_shape=(32, 32, 3)",
    ),
    (
        "EfficientNetB0",
        {"weights": None, "include_top": False, "input_shape": (16, 16, 3)},
        "Input size must be at least 32x32; Received: input_shape=(16, 16, 3)",
    ),
    (
        "EfficientNetB0",
        {"weights": None, "include_top": False, "input_shape": (32, 32)},
        "`input_shape` must be a tuple of three integers.",
    ),
    (
        "EfficientNetB0",
        {"include_top": False, "input_shape": (32, 32, 1)},
        "The input must have 3 channels; Received `input_shape=(32, 32, 1)`",
    ),
    (
        "EfficientNetV2B0",
        {"weights": "nope"},
        "The `weights` argument should be either `None` (random initialization), `imagenet` "
        "(pre-training on ImageNet), or the path to the weights file to be loaded.Received: "
        "weights=nope",
    ),
    (
        "EfficientNetV2B0",
        {"classes": 10},
        "If using `weights` as `'imagenet'` with `include_top` as true, `classes` should be "
        "1000Received: classes=10",
    ),
    (
        "ConvNeXtTiny",
        {"classes": 10},
        "If using `weights` as `'imagenet'` with `include_top` as true, `classes` should be 1000",
    ),
    (
        "RegNetX002",
        {"classes": 10},
        "If using `weights` as `'imagenet'` with `include_top` as true, `classes` should be 1000",
    ),
    (
        "ResNetRS50",
        {"weights": "imagenet-i224"},
        "The `weights` argument should be either `None` (random initialization), "
        "`'imagenet'` (pre-training on ImageNet, with highest available input shape), or the "
        "path to the weights file to be loaded. For ResNetRS50 the following weight variants "
        "are available ['imagenet-i160'] (default=highest). Received weights=imagenet-i224",
    ),
    (
        "ResNetRS101",
        {"weights": "imagenet-i160", "classes": 10},
        "If using `weights` as `'imagenet'` or any of ['imagenet-i160', 'imagenet-i192'] "
        "with `include_top` as true, `classes` should be 1000. Received classes=10",
    ),
]


@pytest.mark.parametrize(("name", "kwargs", "message"), ERRORS)
def test_argument_errors_match_tf(name, kwargs, message):
    with pytest.raises(ValueError) as info:
        getattr(A, name)(**kwargs)
    assert str(info.value) == message


def test_namespaces():
    for module, names in [
        (A.mobilenet_v3, ["MobileNetV3Small", "MobileNetV3Large"]),
        (A.efficientnet, [f"EfficientNetB{i}" for i in range(8)]),
        (A.efficientnet_v2, ["EfficientNetV2B0", "EfficientNetV2S", "EfficientNetV2L"]),
        (A.convnext, ["ConvNeXtTiny", "ConvNeXtXLarge"]),
        (A.regnet, ["RegNetX002", "RegNetY320"]),
        (A.resnet_rs, ["ResNetRS50", "ResNetRS420"]),
    ]:
        for n in names:
            assert getattr(module, n) is getattr(A, n)
            assert getattr(A, n).__name__ == n
        x = np.ones((1, 2, 2, 3), np.float32)
        assert module.preprocess_input(x) is x


def test_decode_predictions(monkeypatch):
    with pytest.raises(ValueError) as info:
        A.efficientnet.decode_predictions(np.zeros((2, 10)))
    assert str(info.value) == (
        "`decode_predictions` expects a batch of predictions (i.e. a 2D array of shape "
        "(samples, 1000)). Found array with shape: (2, 10)"
    )
    index = {str(i): [f"n{i:08d}", f"class_{i}"] for i in range(1000)}
    monkeypatch.setattr(A.imagenet_utils, "CLASS_INDEX", index)
    preds = np.zeros((1, 1000), np.float32)
    preds[0, [7, 3, 900]] = [0.5, 0.3, 0.2]
    got = A.convnext.decode_predictions(preds, top=2)
    assert [row[:2] for row in got[0]] == [("n00000007", "class_7"), ("n00000003", "class_3")]
    assert got[0][0][2] == pytest.approx(0.5)


def test_mobilenet_v3_warns_for_non_224_imagenet_input(monkeypatch, caplog):
    monkeypatch.setattr(_common_v2, "load_weights", lambda *args: None)
    with caplog.at_level(logging.WARNING, logger="asyncflow"):
        A.MobileNetV3Small(input_shape=(32, 32, 3), include_top=False, minimalistic=True)
    assert "`input_shape` is undefined or non-square, or `rows` is not 224." in caplog.text


def test_layer_scale_and_stochastic_depth():
    x = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    scale = convnext.LayerScale(0.5, 3, name="ls")
    y = scale(x)
    assert [w.name for w in scale.weights] == ["ls/gamma:0"]
    depth = convnext.StochasticDepth(0.5, name="sd")
    assert depth.get_config()["drop_path_rate"] == 0.5
    assert scale.get_config()["init_values"] == 0.5
    dropped = depth(x, training=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(y), np.arange(6).reshape(2, 3) * 0.5)
        np.testing.assert_array_equal(sess.run(depth(x, training=False)), sess.run(x))
        # Each example is kept whole (scaled by 1/keep) or dropped whole.
        for row, src in zip(sess.run(dropped), np.arange(6).reshape(2, 3), strict=True):
            assert np.allclose(row, 0) or np.allclose(row, 2 * src)


# -- what the families needed from keras (recorded from TF 2.21) --------------------------

# Conv2D(filters, 3, groups, padding="same") of RandomState(0).uniform(-1, 1, (1, 5, 5, 4))
# with kernel RandomState(1).uniform(-1, 1, kernel shape) and bias linspace(-0.5, 0.5):
# output row 2, flattened.
GROUPED_CONV = {
    (4, 2): [
        -0.1743107, 1.08647, -0.1884302, 1.673337, -1.508338, 0.7963234, -0.2158605,
        1.867016, 1.270114, 0.4813181, 0.390503, 3.695408, 0.7139285, -1.421936, -2.460977,
        1.069295, 0.6046473, -0.6300178, 1.174281, 2.635748,
    ],
    (8, 4): [
        -0.05748203, 0.2128012, -0.935628, -0.09398339, 0.6171935, -0.1297058, -1.195609,
        1.608123, -1.184273, 0.6096371, 0.05778189, -0.6764325, -0.1678151, -0.8986677,
        -0.07067752, 1.489223, -0.0003042221, 0.06300971, -0.4264676, -1.412845, 0.4690693,
        -1.127001, -1.400554, 2.236844, 0.6352253, -1.59795, 0.4686032, -0.06275149,
        -0.04232848, -0.1745766, -0.9840392, 1.209231, 0.01485461, 0.01415151, -0.2549766,
        0.6484188, 0.6344047, 1.030385, 0.6214454, 1.356614,
    ],
}  # fmt: skip


@pytest.mark.parametrize(("filters", "groups"), sorted(GROUPED_CONV))
def test_grouped_conv2d(filters, groups):
    inp = K.Input((5, 5, 4))
    conv = K.layers.Conv2D(filters, 3, groups=groups, padding="same", name="c")
    model = K.Model(inp, conv(inp))
    assert conv.kernel.shape.as_list() == [3, 3, 4 // groups, filters]
    assert conv.get_config()["groups"] == groups
    kernel = np.random.RandomState(1).uniform(-1, 1, [3, 3, 4 // groups, filters])
    conv.set_weights([kernel.astype("float32"), np.linspace(-0.5, 0.5, filters)])
    x = np.random.RandomState(0).uniform(-1, 1, (1, 5, 5, 4)).astype("float32")
    got = model.predict(x)[0, 2].ravel()
    np.testing.assert_allclose(got, GROUPED_CONV[filters, groups], rtol=1e-5, atol=1e-6)


def test_grouped_conv2d_errors():
    with pytest.raises(ValueError) as info:
        K.layers.Conv2D(3, 1, groups=2)
    assert str(info.value) == (
        "The number of filters must be evenly divisible by the number of groups. Received: "
        "groups=2, filters=3"
    )
    with pytest.raises(ValueError, match="Received groups=4, but the input has 6 channels"):
        K.layers.Conv2D(4, 1, groups=4)(K.Input((5, 5, 6)))


def test_gelu_matches_tf():
    x = tf.constant(np.linspace(-3, 3, 7).astype("float32"))
    with tf.Session() as sess:
        exact, approx = sess.run([K.activations.gelu(x), K.activations.gelu(x, approximate=True)])
    np.testing.assert_allclose(
        exact,
        [-0.004049696, -0.04550026, -0.1586553, 0.0, 0.8413447, 1.9545, 2.99595],
        rtol=1e-5,
        atol=1e-7,
    )
    np.testing.assert_allclose(
        approx,
        [-0.003637433, -0.04540223, -0.158808, 0.0, 0.841192, 1.954598, 2.996363],
        rtol=1e-5,
        atol=1e-7,
    )
    assert K.activations.get("gelu") is K.activations.gelu


def test_passed_through_layer_and_nested_sequential_keep_tf_names():
    inp = K.Input((3,))
    seq = K.Sequential([K.layers.Dense(2, name="d")], name="s")
    out = K.layers.Activation("linear", name="lin")(seq(inp))
    model = K.Model(inp, out)
    assert [la.name for la in model.layers] == ["input_1", "s", "lin"]
    assert [w.name for w in model.weights] == ["s/d/kernel:0", "s/d/bias:0"]


def test_dropout_noise_shape_with_none():
    drop = K.layers.Dropout(0.5, noise_shape=(None, 1, 1), seed=1)
    out = drop(tf.ones((3, 2, 4)), training=True)
    with tf.Session() as sess:
        value = sess.run(out)
    assert value.shape == (3, 2, 4)
    for example in value:  # each example kept whole (x2) or dropped whole
        assert len(set(example.ravel().tolist())) == 1
        assert example.ravel()[0] in (0.0, 2.0)
