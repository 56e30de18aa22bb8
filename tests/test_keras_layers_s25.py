"""tf.keras layers added in s25 (LayerNormalization, PReLU, ThresholdedReLU, Dot,
Attention, AdditiveAttention, ...) against TF 2.21's tf_keras (TF_USE_LEGACY_KERAS=1):
tests/fixtures/keras_layers_s25_cases.py builds each case; its TF 2.21 record
(weight names, shapes and values after three SGD steps, predictions before and after,
the layer's config) is tests/fixtures/keras_layers_s25_tf.json, written by
record_keras_layers_s25_tf.py."""

import importlib.util
import json
import os

import numpy as np
import pytest

import asyncflow as tf

L = tf.keras.layers
_HERE = os.path.join(os.path.dirname(__file__), "fixtures")
_spec = importlib.util.spec_from_file_location(
    "keras_layers_s25_cases", os.path.join(_HERE, "keras_layers_s25_cases.py")
)
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)
with open(os.path.join(_HERE, "keras_layers_s25_tf.json")) as _f:
    TF = json.load(_f)


def _close(actual, expected):
    np.testing.assert_allclose(
        np.asarray(actual, np.float32), np.asarray(expected, np.float32), rtol=2e-5, atol=1e-5
    )


@pytest.mark.parametrize("name", sorted(TF))
def test_layer_trains_as_tf(name):
    got, want = cases.run(tf, name), TF[name]
    assert got["weights"] == want["weights"]
    assert got["shape"] == want["shape"]
    assert got["config"] == want["config"]
    _close(got["before"], want["before"])
    _close(got["after"], want["after"])
    assert len(got["values"]) == len(want["values"])
    for a, b in zip(got["values"], want["values"]):
        _close(a, b)


@pytest.fixture
def _graph():
    with tf.Graph().as_default() as g:
        yield g
    tf.keras.backend.clear_session()


# (constructor or call, error class, message) as TF 2.21's tf_keras raises them.
ERRORS = [
    (lambda: L.LayerNormalization(axis="a"), TypeError,
     "Expected an int or a list/tuple of ints for the argument 'axis', but received: 'a'"),
    (lambda: L.LayerNormalization(axis=3)(tf.keras.Input((4,))), ValueError,
     "Invalid value for `axis` argument. Expected 0 <= axis < inputs.rank (with "
     "inputs.rank=2). Received: axis=(3,)"),
    (lambda: L.LayerNormalization(axis=[1, -1])(tf.keras.Input((4,))), ValueError,
     "Duplicate axis: (1, 1)"),
    (lambda: L.ThresholdedReLU(-1.0), ValueError,
     "The theta value of a Thresholded ReLU layer should be >=0. Received: -1.0"),
    (lambda: L.ThresholdedReLU(None), ValueError,
     "Theta of a Thresholded ReLU layer cannot be None, expecting a float. Received: None"),
    (lambda: L.Dot("a"), TypeError,
     "Invalid type for argument `axes`: it should be a list or an int. Received: axes=a"),
    (lambda: L.Dot((1, 2, 3)), ValueError,
     "Invalid format for argument `axes`: it should contain two elements. "
     "Received: axes=(1, 2, 3)"),
    (lambda: L.Dot((1.0, 2)), ValueError,
     "Invalid format for argument `axes`: list elements should be integers. "
     "Received: axes=(1.0, 2)"),
    (lambda: L.Dot(1)([tf.keras.Input((3,)), tf.keras.Input((4,))]), ValueError,
     "Incompatible input shapes: axis values 3 (at axis 1) != 4 (at axis 1). "
     "Full input shapes: (None, 3), (None, 4)"),
    (lambda: L.Dot(1)(tf.keras.Input((3,))), ValueError,
     "A `Dot` layer should be called on a list of 2 inputs. Received: input_shape=(None, 3)"),
    (lambda: L.Attention(score_mode="x"), ValueError,
     'Received: score_mode=x. Acceptable values are: ["dot", "concat"]'),
    (lambda: L.Attention()([tf.keras.Input((3, 2))]), ValueError,
     "Attention layer accepts inputs list of length 2 or 3, namely [query, value] or "
     "[query, value, key]. Received length: 1."),
    (lambda: L.EinsumDense("ab->b", 3)(tf.keras.Input((4,))), ValueError,
     "Invalid einsum equation 'ab->b'. Equations must be in the form [X],[Y]->[Z], "
     "...[X],[Y]->...[Z], or [X]...,[Y]->[Z]...."),
    (lambda: L.EinsumDense("abc,cd->abd", (5, 3))(tf.keras.Input((4, 2))), ValueError,
     "Input shape and output shape do not match at shared dimension 'b'. Input shape is "
     "4, and output shape is 5."),
    (lambda: L.EinsumDense("ab,b->ae", 3)(tf.keras.Input((4,))), ValueError,
     "Dimension 'e' was specified in the output 'ae' but has no corresponding dim in the "
     "input spec 'ab' or weight spec 'ae'"),
    (lambda: L.EinsumDense("ab,bz->ab", 4)(tf.keras.Input((4,))), ValueError,
     "Weight dimension 'z' did not have a match in either the input spec 'ab' or the "
     "output spec 'ab'. For this layer, the weight must be fully specified."),
    (lambda: L.EinsumDense("ab,bc->ac", 3, bias_axes="x")(tf.keras.Input((4,))), ValueError,
     "Bias dimension 'x' was requested, but is not part of the output spec 'ac'"),
]  # fmt: skip


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors_as_tf(_graph, i):
    make, cls, message = ERRORS[i]
    with pytest.raises(cls) as info:
        make()
    assert str(info.value) == message


def test_attention_masks_and_scores(_graph):
    q = tf.keras.Input((3, 2))
    _, scores = L.Attention()([q, tf.keras.Input((4, 2))], return_attention_scores=True)
    assert scores.shape.as_list() == [None, 3, 4]
    qm, vm = tf.placeholder(tf.bool, [None, 3]), tf.placeholder(tf.bool, [None, 4])
    q0 = tf.constant([[[1.0, 2], [0, 1], [3, -1]]])
    v0 = tf.constant([[[1.0, 0], [0, 1], [2, 2], [-1, 1]]])
    additive = L.AdditiveAttention(use_scale=False)([q0, v0], mask=[qm, vm])
    causal = L.Attention()([q0, v0, v0 * 2.0], mask=[qm, vm], use_causal_mask=True)
    with tf.Session() as s:
        feed = {qm: [[True, False, True]], vm: [[True, True, False, True]]}
        got_a, got_c = s.run([additive, causal], feed)
    # Recorded from TF 2.21.
    _close(got_a, [[[0.27132, 0.55274], [0.0, 0.0], [-0.20527, 0.80769]]])
    _close(got_c, [[[1.0, 0.0], [0.0, 0.0], [0.99966, 0.00034]]])


def test_serialize_round_trip(_graph):
    made = [
        L.LayerNormalization(axis=[1, 2]),
        L.PReLU(shared_axes=2),
        L.Dot(-1, normalize=True),
        L.Attention(use_scale=True, dropout=0.5),
        L.Identity(),
        L.ThresholdedReLU(0.5),
    ]
    for layer in made:
        config = L.serialize(layer)
        assert config["class_name"] == type(layer).__name__
        again = L.deserialize(config)
        assert type(again) is type(layer)
        assert again.get_config() == layer.get_config()
    # Recorded from TF 2.21.
    assert L.serialize(made[1])["config"]["shared_axes"] == [2]
    assert L.serialize(made[3])["config"] == {
        "name": made[3].name, "trainable": True, "dtype": None, "use_scale": True,
        "score_mode": "dot", "dropout": 0.5,
    }  # fmt: skip


def test_einsum_dense_right_elided_and_mha_over_two_axes(_graph):
    layer = L.EinsumDense("ab...,bc->ac...", (3, 2, 3), bias_axes="c")
    layer(tf.keras.Input((4, 2, 3)))
    # Recorded from TF 2.21.
    assert [w.shape.as_list() for w in layer.weights] == [[4, 3], [3, 1, 1]]
    m = L.MultiHeadAttention(2, 4, attention_axes=(1, 2))
    q = tf.keras.Input((3, 2, 5))
    out, scores = m(q, q, return_attention_scores=True)
    assert out.shape.as_list() == [None, 3, 2, 5]
    assert scores.shape.as_list() == [None, 2, 3, 2, 3, 2]
    assert [w.shape.as_list() for w in m.weights] == [
        [5, 2, 4], [2, 4], [5, 2, 4], [2, 4], [5, 2, 4], [2, 4], [2, 4, 5], [5],
    ]  # fmt: skip
    mask = tf.placeholder(tf.bool, [None, 3, 2, 3, 2])
    masked = m(q, q, attention_mask=mask)
    x = np.arange(60, dtype=np.float32).reshape(2, 3, 2, 5) / 30.0
    mk = np.random.default_rng(0).random((2, 3, 2, 3, 2)) > 0.4
    m.set_weights(
        [np.linspace(-1, 1, w.shape.num_elements()).reshape(w.shape.as_list()) for w in m.weights]
    )
    got = tf.keras.backend.get_session().run(masked, {q: x, mask: mk})
    # Recorded from TF 2.21.
    _close(got[0][1], [[3.6839, 4.24255, 4.8012, 5.35985, 5.9185],
                       [3.90823, 4.46616, 5.02409, 5.58202, 6.13994]])  # fmt: skip
    again = L.deserialize(L.serialize(m))
    assert type(again) is L.MultiHeadAttention
    assert again.get_config()["attention_axes"] == [1, 2]


# Recorded from TF 2.21.
SHAPE_ERRORS = [
    (lambda: L.Cropping1D((1, 2, 3)),
     "The `cropping` argument must be a tuple of 2 integers. Received: (1, 2, 3)"),
    (lambda: L.ZeroPadding1D((1, 2, 3)),
     "The `padding` argument must be a tuple of 2 integers. Received: (1, 2, 3)"),
    (lambda: L.ZeroPadding3D((1, 2)), "`padding` should have 3 elements. Received: (1, 2)."),
    (lambda: L.Cropping3D((1, 2)), "`cropping` should have 3 elements. Received: (1, 2)."),
    (lambda: L.Cropping3D(((1, 2), 1, (1, 2, 3))),
     "The `3rd entry of cropping` argument must be a tuple of 2 integers. Received: (1, 2, 3)"),
]  # fmt: skip


@pytest.mark.parametrize("i", range(len(SHAPE_ERRORS)))
def test_shape_layer_errors_as_tf(_graph, i):
    make, message = SHAPE_ERRORS[i]
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value) == message


def test_unknown_lengths_keep_tf_static_shapes(_graph):
    # Recorded from TF 2.21.
    assert L.UpSampling1D(2)(tf.keras.Input((None, 2))).shape.as_list() == [None, None, 2]
    x1 = tf.keras.Input((None, 2))
    out1 = L.Conv1DTranspose(2, 3, strides=2)(x1)
    assert out1.shape.as_list() == [None, None, 2]
    x3 = tf.keras.Input((3, None, 2, 2))
    out3 = L.Conv3DTranspose(2, 3, strides=2, padding="same")(x3)
    assert out3.shape.as_list() == [None, 6, None, 4, 2]
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got1, got3 = s.run([out1, out3], {x1: np.ones((1, 5, 2)), x3: np.ones((1, 3, 5, 2, 2))})
    # the lengths a fed length-5 axis gets: (5 - 1) * 2 + 3 ('valid'), 5 * 2 ('same')
    assert got1.shape == (1, 11, 2)
    assert got3.shape == (1, 6, 10, 4, 2)


_pp_spec = importlib.util.spec_from_file_location(
    "keras_preprocessing_s25_cases", os.path.join(_HERE, "keras_preprocessing_s25_cases.py")
)
pp_cases = importlib.util.module_from_spec(_pp_spec)
_pp_spec.loader.exec_module(pp_cases)
with open(os.path.join(_HERE, "keras_preprocessing_s25_tf.json")) as _f:
    PP_TF = json.load(_f)


@pytest.fixture(scope="module")
def pp_record():
    return pp_cases.run(tf)


@pytest.mark.parametrize("name", sorted(PP_TF))
def test_preprocessing_layers_as_tf(pp_record, name):
    got, want = pp_record[name], PP_TF[name]
    assert got["shape"] == want["shape"]
    assert got["dtype"] == want["dtype"]
    assert got["config"] == want["config"]
    assert got.get("weights") == want.get("weights")
    _close(got["value"], want["value"])


def test_preprocessing_namespace_and_errors(_graph):
    pre = L.experimental.preprocessing
    assert pre.Rescaling is L.Rescaling and pre.Normalization is L.Normalization
    assert L.experimental.EinsumDense is L.EinsumDense
    assert issubclass(L.Hashing, pre.PreprocessingLayer)
    # Recorded from TF 2.21 (TF1 graph mode).
    with pytest.raises(RuntimeError, match=r"^`adapt` is only supported in tensorflow v2.$"):
        L.Normalization().adapt(np.ones((2, 3)))
    with pytest.raises(ValueError) as info:
        L.Hashing(11, output_mode="one_hot")(tf.placeholder(tf.int64, [None, 2]))
    assert str(info.value) == (
        "When output_mode is not `'int'`, maximum supported output rank is 2. Received "
        "output_mode one_hot and input shape (?, 2), which would result in output rank 3."
    )
    layer = L.deserialize(L.serialize(L.Hashing(7, salt=[1, 2], mask_value="")))
    assert (layer.num_bins, layer.salt, layer.mask_value) == (7, [1, 2], "")


def test_conv_lstm_states_and_locally_connected_errors(_graph):
    # Recorded from TF 2.21.
    layer = L.ConvLSTM2D(2, 3, return_state=True, return_sequences=True)
    outs = layer(tf.keras.Input((3, 5, 5, 2)))
    assert [o.shape.as_list() for o in outs] == [[None, 3, 3, 3, 2], [None, 3, 3, 2]] + [
        [None, 3, 3, 2]
    ]
    again = L.deserialize(L.serialize(layer))
    assert again.get_config() == {**layer.get_config(), "name": again.name}
    with pytest.raises(ValueError) as info:
        L.LocallyConnected1D(2, 2, padding="same")
    assert str(info.value) == (
        'Invalid border mode for LocallyConnected1D (only "valid" is supported if '
        "implementation is 1): same"
    )
    with pytest.raises(ValueError) as info:
        L.LocallyConnected2D(2, 2)(tf.keras.Input((None, 3, 2)))
    assert str(info.value) == (
        "The spatial dimensions of the inputs to  a LocallyConnected2D layer should be "
        "fully-defined, but layer received the inputs shape (None, None, 3, 2)"
    )


class MinimalRNNCell(L.AbstractRNNCell):
    """The cell of TF's AbstractRNNCell docstring example."""

    def __init__(self, units, **kwargs):
        self.units = units
        super().__init__(**kwargs)

    @property
    def state_size(self):
        return self.units

    def build(self, input_shape):
        self.kernel = self.add_weight(
            shape=(input_shape[-1], self.units), initializer="uniform", name="kernel"
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self.units, self.units), initializer="uniform", name="recurrent_kernel"
        )
        self.built = True

    def call(self, inputs, states):
        output = tf.keras.backend.dot(inputs, self.kernel)
        output = output + tf.keras.backend.dot(states[0], self.recurrent_kernel)
        return output, output


def test_abstract_cell_stacked_cells_and_wrapper(_graph):
    tf.set_random_seed(1)
    x = tf.keras.Input((4, 3))
    cell = MinimalRNNCell(2)
    with pytest.raises(NotImplementedError):
        cell.output_size  # noqa: B018
    rnn = L.RNN(cell)
    y = rnn(x)
    stack = L.StackedRNNCells([L.SimpleRNNCell(3), L.LSTMCell(2)])
    rnn2 = L.RNN(stack, return_sequences=True)
    y2 = rnn2(x)
    # Recorded from TF 2.21.
    assert [w.name for w in rnn.weights] == [
        "rnn/minimal_rnn_cell/kernel:0", "rnn/minimal_rnn_cell/recurrent_kernel:0",
    ]  # fmt: skip
    assert [w.name for w in rnn2.weights] == [
        f"rnn_1/stacked_rnn_cells/{c}/{w}:0"
        for c in ("simple_rnn_cell", "lstm_cell")
        for w in ("kernel", "recurrent_kernel", "bias")
    ]
    assert stack.state_size == (3, [2, 2]) and stack.output_size == 2
    config = stack.get_config()
    assert config["dtype"] is None
    assert [c["class_name"] for c in config["cells"]] == ["SimpleRNNCell", "LSTMCell"]
    again = L.deserialize(L.serialize(stack))
    assert [type(c) for c in again.cells] == [L.SimpleRNNCell, L.LSTMCell]
    wrapper = L.Wrapper(L.Dense(2))
    assert L.serialize(wrapper)["config"]["layer"]["class_name"] == "Dense"
    xv = np.linspace(-1, 1, 24).reshape(2, 4, 3).astype(np.float32)
    got, got2 = tf.keras.backend.get_session().run([y, y2], {x: xv})
    # Recorded from TF 2.21.
    _close(got, [[-0.01057, 0.01342], [0.01917, -0.06009]])
    _close(got2, [
        [[0.07851, 0.08288], [0.12032, 0.00617], [0.07745, 0.03421], [0.10663, 0.04201]],
        [[-0.00122, -0.00925], [-0.06811, -0.04313], [-0.11949, -0.04646],
         [-0.18146, -0.06704]],
    ])  # fmt: skip


def test_random_fourier_features(_graph):
    rff = L.experimental.RandomFourierFeatures
    x = tf.keras.Input((3,))
    layer, layer2 = rff(4), rff(2, scale=2.0, trainable=True)
    y, y2 = layer(x), layer2(x)
    # Recorded from TF 2.21 (TF's draws of W and b are not seeded by the graph seed, so
    # the values are checked against the layer's own weights).
    assert [(w.name, w.shape.as_list()) for w in layer.weights] == [
        ("random_fourier_features/kernel_scale:0", [1]),
        ("random_fourier_features/unscaled_kernel:0", [3, 4]),
        ("random_fourier_features/bias:0", [4]),
    ]
    assert layer.trainable_weights == []
    assert [w.name for w in layer2.trainable_weights] == [
        "random_fourier_features_1/kernel_scale:0"
    ]
    assert y.shape.as_list() == [None, 4]
    assert layer.get_config() == {
        "name": "random_fourier_features", "trainable": False, "dtype": "float32",
        "output_dim": 4, "kernel_initializer": "gaussian", "scale": 1.224744871391589,
    }  # fmt: skip
    xv = np.linspace(-1, 1, 6).reshape(2, 3)
    got, got2 = tf.keras.backend.get_session().run([y, y2], {x: xv})
    scale, kernel, bias = layer.get_weights()
    _close(scale, [1.2247449])
    _close(got, np.cos(xv @ (kernel / scale) + bias))
    assert got2.shape == (2, 2)
    errors = [
        (lambda: rff(0), "`output_dim` should be a positive integer. Received: 0"),
        (lambda: rff(2, kernel_initializer="foo"),
         "Unsupported `kernel_initializer`: foo Expected one of: ['gaussian', 'laplacian']"),
        (lambda: rff(2, scale=-1.0),
         "When provided, `scale` should be a positive float. Received: -1.0"),
        (lambda: rff(2)(tf.keras.Input((3, 2))),
         "The rank of the input tensor should be 2. Received input with rank 3 instead. "
         "Full input shape received: (?, 3, 2)"),
        (lambda: rff(2)(tf.keras.Input((None,))),
         "The last dimension of the input tensor should be defined. Found `None`. Full "
         "input shape received: (?, ?)"),
    ]  # fmt: skip
    for make, message in errors:
        with pytest.raises(ValueError) as info:
            make()
        assert str(info.value) == message


def test_category_encoding_count_weights(_graph):
    xi = tf.placeholder(tf.int64, [None, 3])
    w = tf.placeholder(tf.float32, [None, 3])
    y = L.CategoryEncoding(4, output_mode="count")(xi, count_weights=w)
    # Recorded from TF 2.21 (its message keeps the literal braces).
    with pytest.raises(ValueError) as info:
        L.CategoryEncoding(4)(xi, count_weights=w)
    assert str(info.value) == (
        "`count_weights` is not used when `output_mode` is not `'count'`. "
        "Received `count_weights={count_weights}`."
    )
    with tf.Session() as s:
        got = s.run(y, {xi: [[0, 1, 1], [3, 3, 2]], w: [[0.5, 1, 2], [1, 2, 3]]})
    _close(got, [[0.5, 3.0, 0.0, 0.0], [0.0, 0.0, 3.0, 3.0]])


def test_attention_dropout_draws_as_tf(_graph):
    tf.set_random_seed(7)
    q, v = tf.keras.Input((3, 2)), tf.keras.Input((4, 2))
    a = L.Attention(dropout=0.5)([q, v], training=True)
    b = L.MultiHeadAttention(2, 2, dropout=0.5)(q, v, training=True)
    qv = np.linspace(-1, 1, 12).reshape(2, 3, 2)
    vv = np.linspace(1, -2, 16).reshape(2, 4, 2)
    got_a, got_b = tf.keras.backend.get_session().run([a, b], {q: qv, v: vv})
    # Recorded from TF 2.21: the same dropout draws from the graph seed.
    _close(
        got_a,
        [
            [[-0.095284, -0.338584], [0.110765, 0], [-0.016617, -0.245505]],
            [[-1.01063, -1.22515], [-0.97033, -1.12737], [-0.357362, -0.408414]],
        ],
    )
    _close(
        got_b,
        [
            [[0.251872, -0.143864], [0.240932, -0.153629], [-0.003032, -0.074205]],
            [[0.017241, 0.29044], [-0.89483, 1.06586], [-0.811864, 0.712267]],
        ],
    )


def test_models_of_new_layers_rebuild_from_config(_graph):
    q, v = tf.keras.Input((4, 3)), tf.keras.Input((5, 3))
    x = L.Attention(use_scale=True)([q, v])
    x = L.LayerNormalization()(x)
    x = L.MultiHeadAttention(2, 3)(x, v)
    x = L.EinsumDense("abc,cd->abd", (4, 2), bias_axes="d")(x)
    x = L.PReLU()(x)
    x = L.Conv1DTranspose(3, 2, strides=2)(x)
    x = L.LocallyConnected1D(2, 3)(x)
    x = L.ZeroPadding1D(1)(x)
    x = L.Dot(axes=(2, 2))([x, L.Cropping1D((0, 1))(x)])
    model = tf.keras.Model([q, v], x)
    again = tf.keras.models.model_from_json(model.to_json())
    assert [type(a) for a in again.layers] == [type(b) for b in model.layers]
    again.set_weights(model.get_weights())
    feed = [np.linspace(-1, 1, 24).reshape(2, 4, 3), np.linspace(1, -1, 30).reshape(2, 5, 3)]
    np.testing.assert_allclose(again.predict(feed), model.predict(feed), rtol=1e-6)
