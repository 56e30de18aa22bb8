"""tf.keras layers in TF1 graph mode: names, variables, initial values and outputs.

Expected values were recorded from TF 2.21 (TF_USE_LEGACY_KERAS=1, tf.compat.v1 with
v2 behaviour disabled) with the same graph seeds.
"""

import numpy as np
import pytest

import asyncflow as tf

L = tf.keras.layers
K = tf.keras.backend

# Recorded from TF 2.21.
DENSE = [
    [[-0.21124011, -0.105216816], [0.14039195, -1.0344077]],
    [[0.34058917, 0.3079535], [0.93462664, 0.41367522]],
    [[1.0273508, 1.4314709], [0.46896386, 2.0350552]],
]
CONV_MP = [
    [
        [[0.7009848, 0.8973958, 0.0], [0.50008124, 0.4838317, 0.33949962]],
        [[0.7009848, 0.8973958, 0.0], [0.7009848, 0.8973958, 0.0]],
    ],
    [
        [[0.50008124, 0.45267236, 0.0], [0.50008124, 0.6796942, 0.33949962]],
        [[0.7009848, 0.8973958, 0.0], [0.50008124, 0.45267236, 0.0]],
    ],
]
CONV_AP_SUM = [[5.287459, 6.952442, 0.25462472], [5.4833417, 6.396497, 0.67899925]]
CONV_C2 = [
    [[0.6722625, -0.8919982], [0.5579098, -0.7206395], [0.67975926, -0.59438884]],
    [[0.79761726, -0.99356264], [0.6722625, -0.8919982], [0.5579098, -0.7206395]],
    [[-0.19083442, -0.35297439], [0.79761726, -0.99356264], [0.6722625, -0.8919982]],
]
BN_INFER = [[0.0, 0.9995004, 1.9990008], [3.9980016, 2.9985013, 4.997502]]
BN_TRAIN = [
    [[-0.99987507, -0.9995004, -0.9997778], [0.99987507, 0.9995005, 0.99977803]],
    [
        [
            [[-1.3330371, -0.5386769], [0.0, 0.8977949]],
            [[1.3330371, -1.2569128], [-0.66651857, 0.17955898]],
        ],
        [
            [[0.66651857, 1.6160308], [-1.3330371, -0.5386769]],
            [[0.0, 0.8977949], [1.3330371, -1.2569128]],
        ],
    ],
]
BN_W = [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.02, 0.02, 0.035], [1.03, 1.0, 1.0125]]
BN4_W = [[1.0, 1.0], [0.0, 0.0], [0.20000005, 0.17500004], [1.1571429, 1.1214286]]
EMB = [
    [[-0.037263595, 0.031469133, 0.039783787], [0.045233455, 0.01440784, -0.04181837]],
    [[0.03847057, -0.03467065, -0.012260653], [0.03847057, -0.03467065, -0.012260653]],
]


def _close(actual, expected):
    np.testing.assert_allclose(actual, np.array(expected, np.float32), rtol=1e-5, atol=1e-6)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g
    K.clear_session()


def test_dense_names_and_seeded_values():
    tf.set_random_seed(1)
    x = tf.placeholder(tf.float32, [None, 3])
    d, d2 = L.Dense(2), L.Dense(2, activation="relu")
    y = d(x)
    y2 = d2(y)
    with tf.name_scope("foo"):
        d3 = L.Dense(2, kernel_initializer="he_normal", bias_initializer="ones")
        y3 = d3(y2)
    assert [d.name, d2.name, d3.name] == ["dense", "dense_1", "dense_2"]
    assert [v.name for v in d.weights] == ["dense/kernel:0", "dense/bias:0"]
    assert [v.name for v in d3.trainable_weights] == ["foo/dense_2/kernel:0", "foo/dense_2/bias:0"]
    assert (y.name, y2.name, y3.name) == (
        "dense/BiasAdd:0",
        "dense_1/Relu:0",
        "foo/dense_2/BiasAdd:0",
    )
    assert y3.shape.as_list() == [None, 2]
    xv = np.arange(6, dtype=np.float32).reshape(2, 3) / 5
    for got, want in zip(K.get_session().run([y, y2, y3], {x: xv}), DENSE, strict=True):
        _close(got, want)
    assert d.count_params() == 8


def test_set_weights_and_errors():
    x = tf.placeholder(tf.float32, [None, 3])
    d = L.Dense(2)
    y = d(x)
    d.set_weights([np.ones((3, 2)), np.zeros(2)])
    xv = np.arange(6, dtype=np.float32).reshape(2, 3) / 5
    _close(K.get_session().run(y, {x: xv}), [[0.6, 0.6], [2.4, 2.4]])
    with pytest.raises(ValueError, match=r"Layer weight shape \(3, 2\) not compatible"):
        d.set_weights([np.ones((3, 3)), np.zeros(2)])
    with pytest.raises(ValueError, match="with a weight list of length 1"):
        d.set_weights([np.ones((3, 2))])
    with pytest.raises(ValueError, match="last dimension of the inputs to a Dense layer"):
        L.Dense(2)(tf.placeholder(tf.float32, [None, None]))
    with pytest.raises(TypeError, match="Keyword argument not understood"):
        L.Dense(2, bogus=1)


def test_dense_on_rank3_input():
    d = L.Dense(4)
    out = d(tf.zeros([2, 3, 5]))
    assert out.shape.as_list() == [2, 3, 4] and out.name == "dense/BiasAdd:0"


def test_conv_pooling_flatten_reshape():
    tf.set_random_seed(2)
    img = tf.placeholder(tf.float32, [None, 6, 6, 2])
    conv = L.Conv2D(3, 3, activation="relu")
    ci = conv(img)
    mp = L.MaxPooling2D()(ci)
    ap = L.AveragePooling2D(pool_size=2, strides=1, padding="same")(ci)
    c2 = L.Conv2D(2, (2, 2), strides=2, padding="same")(img)
    fl = L.Flatten()(mp)
    rs = L.Reshape((-1, 3))(ci)
    assert [v.name for v in conv.weights] == ["conv2d/kernel:0", "conv2d/bias:0"]
    shapes = [t.shape.as_list() for t in (ci, mp, ap, c2, fl, rs)]
    assert shapes == [[None, 4, 4, 3], [None, 2, 2, 3], [None, 4, 4, 3], [None, 3, 3, 2],
                      [None, 12], [None, 16, 3]]  # fmt: skip
    iv = (np.arange(144, dtype=np.float32).reshape(2, 6, 6, 2) % 7) / 7
    mpv, apv, c2v, flv = K.get_session().run([mp, ap, c2, fl], {img: iv})
    _close(mpv, CONV_MP)
    _close(apv.sum((1, 2)), CONV_AP_SUM)
    _close(c2v[0], CONV_C2)
    _close(flv, np.reshape(CONV_MP, (2, 12)))


def test_batch_normalization_plain_and_fused():
    x = tf.placeholder(tf.float32, [None, 3])
    img = tf.placeholder(tf.float32, [None, 2, 2, 2])
    bn, bn4 = L.BatchNormalization(), L.BatchNormalization(momentum=0.9)
    b, b4 = bn(x), bn4(img)
    assert [v.name for v in bn.weights] == [
        "batch_normalization/gamma:0",
        "batch_normalization/beta:0",
        "batch_normalization/moving_mean:0",
        "batch_normalization/moving_variance:0",
    ]
    assert len(bn.trainable_weights) == 2 and len(bn.updates) == 2 and len(bn4.updates) == 2
    assert not tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    lp = K.learning_phase()
    assert lp.name == "keras_learning_phase:0"
    sess = K.get_session()
    xv = np.array([[0, 1, 2], [4, 3, 5]], np.float32)
    iv = np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2) % 5
    _close(sess.run(b, {x: xv}), BN_INFER)
    got = sess.run([b, b4], {x: xv, img: iv, lp: True})
    _close(got[0], BN_TRAIN[0])
    _close(got[1], BN_TRAIN[1])
    sess.run(bn.updates + bn4.updates, {x: xv, img: iv, lp: True})
    for got_w, want_w in zip(bn.get_weights() + bn4.get_weights(), BN_W + BN4_W, strict=True):
        _close(got_w, want_w)


def test_dropout_follows_learning_phase():
    x = tf.placeholder(tf.float32, [None, 3])
    out = L.Dropout(0.5)(x)
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    sess = K.get_session()
    _close(sess.run(out, {x: xv}), xv)
    dropped = sess.run(out, {x: xv + 1, K.learning_phase(): True})
    assert set(np.unique(dropped / (xv + 1))) <= {0.0, 2.0}
    with pytest.raises(ValueError, match="Invalid value 1.5 received for `rate`"):
        L.Dropout(1.5)


def test_embedding_merge_activation_lambda():
    tf.set_random_seed(3)
    ids = tf.placeholder(tf.int32, [None, 2])
    emb = L.Embedding(5, 3)
    ev = emb(ids)
    assert [v.name for v in emb.weights] == ["embedding/embeddings:0"]
    _close(K.get_session().run(ev, {ids: [[0, 4], [2, 2]]}), EMB)
    a = tf.constant([[1.0, 2.0]])
    b = tf.constant([[3.0, 5.0]])
    outs = [L.Add()([a, b]), L.concatenate([a, b]), L.Concatenate(axis=0)([a, b]),
            L.Activation("relu")(a - b), L.Lambda(lambda t: t * 2)(a), L.add([a, b]),
            L.Multiply()([a, b]), L.Subtract()([a, b])]  # fmt: skip
    assert [t.name for t in outs[:5]] == [
        "add/add:0",
        "concatenate/concat:0",
        "concatenate_1/concat:0",
        "activation/Relu:0",
        "lambda/mul:0",
    ]
    got = K.get_session().run(outs)
    want = [[[4, 7]], [[1, 2, 3, 5]], [[1, 2], [3, 5]], [[0, 0]], [[2, 4]], [[4, 7]],
            [[3, 10]], [[-2, -3]]]  # fmt: skip
    for g, w in zip(got, want, strict=True):
        _close(g, w)
    with pytest.raises(ValueError, match="should be called on a list of inputs"):
        L.Add()(a)


def test_input_layers_and_names():
    inp = tf.keras.Input((4,))
    assert inp.name == "input_1:0" and inp.shape.as_list() == [None, 4]
    assert tf.keras.Input(shape=(2, 2), batch_size=3, name="foo").shape.as_list() == [3, 2, 2]
    assert L.Dense(3)(inp).name == "dense/BiasAdd:0"
    assert tf.keras.Input((1,)).name == "input_2:0"
    with pytest.raises(ValueError, match="Please provide to Input a `shape`"):
        tf.keras.Input()


def test_initializers():
    assert isinstance(
        tf.keras.initializers.get("glorot_uniform"), tf.keras.initializers.glorot_uniform
    )
    assert tf.keras.initializers.RandomNormal().stddev == 0.05
    assert tf.keras.initializers.RandomUniform().minval == -0.05
    he = tf.keras.initializers.he_normal(seed=1)
    assert (he.scale, he.mode, he.distribution) == (2.0, "fan_in", "truncated_normal")
    with pytest.raises(ValueError, match="Unknown initializer: 'nope'"):
        tf.keras.initializers.get("nope")
    v = tf.Variable(tf.keras.initializers.constant(3.0)([2]))
    assert list(K.get_session().run(v)) == [3.0, 3.0]


def test_activations():
    x = tf.constant([-2.0, 0.5, 3.0])
    A = tf.keras.activations
    got = K.get_session().run([A.relu(x), A.relu(x, alpha=0.1, max_value=2.0), A.linear(x),
                               A.get("sigmoid")(x), A.hard_sigmoid(x), A.elu(x)])  # fmt: skip
    _close(got[0], [0, 0.5, 3])
    _close(got[1], [-0.2, 0.5, 2.0])
    _close(got[2], [-2, 0.5, 3])
    _close(got[3], 1 / (1 + np.exp(-np.array([-2.0, 0.5, 3.0]))))
    _close(got[4], [0.1, 0.6, 1.0])
    _close(got[5], [np.expm1(-2.0), 0.5, 3.0])
    with pytest.raises(ValueError, match="Unknown activation function: 'nope'"):
        A.get("nope")


def test_backend_helpers():
    v = K.variable([[1, 2], [3, 4]], name="kv")
    assert v.name == "kv:0" and v.dtype.base_dtype == tf.float32
    _close(K.eval(v), [[1, 2], [3, 4]])
    K.set_value(v, [[5, 6], [7, 8]])
    _close(K.get_value(v), [[5, 6], [7, 8]])
    assert (K.floatx(), K.epsilon(), K.image_data_format()) == ("float32", 1e-07, "channels_last")
    assert K.int_shape(tf.placeholder(tf.float32, [None, 3])) == (None, 3)
    w = tf.Variable(2.0)
    assert K.get_session().run(w) == 2.0  # Keras' session initializes what it finds
    K.set_learning_phase(1)
    assert K.learning_phase() == 1
    with K.learning_phase_scope(0):
        assert K.learning_phase() == 0
    sess = tf.Session()
    with sess.as_default():
        assert K.get_session() is sess


def test_backend_tensor_functions():
    t = K.constant([[1.0, -2.0], [3.0, 4.0]])
    got = K.get_session().run(
        [
            K.mean(t),
            K.sum(t, axis=1),
            K.max(t, axis=0, keepdims=True),
            K.square(t),
            K.abs(t),
            K.dot(t, t),
            K.concatenate([t, t]),
            K.reshape(t, (4,)),
            K.expand_dims(t, 0),
            K.clip(t, 0.0, 2.0),
            K.zeros((2,)),
            K.ones_like(t),
            K.batch_flatten(K.expand_dims(t, -1)),
            K.sigmoid(t),
            K.softmax(t),
            K.relu(t),
            K.argmax(t),
            K.equal(t, 1.0),
            K.stack([t, t]),
            K.transpose(t),
            K.sqrt(K.abs(t)),
            K.exp(t),
            K.log(K.abs(t)),
            K.minimum(t, 0.0),
            K.maximum(t, 0.0),
            K.pow(t, 2),
            K.std(t),
            K.var(t, axis=0),
            K.l2_normalize(t, axis=1),
            K.any(t > 3.0),
            K.all(t > -3.0),
            K.min(t),
            K.prod(t),
            K.cumsum(t),
            K.tanh(t),
            K.gather(t, [1]),
            K.one_hot(K.constant([0, 1], "int32"), 2),
            K.sign(t),
            K.round(t * 0.3),
            K.squeeze(K.expand_dims(t, 0), 0),
            K.repeat_elements(t, 2, axis=0),
            K.tile(t, (1, 2)),
            K.flatten(t),
            K.zeros_like(t),
            K.eye(2),
            K.dropout(t, 0.0),
            K.in_train_phase(t, -t, training=0),
            K.switch(K.constant(True, "bool"), t, -t),
            K.softplus(t),
            K.elu(t),
            K.permute_dimensions(t, (1, 0)),
            K.categorical_crossentropy(K.constant([[0.0, 1.0], [1.0, 0.0]]), K.softmax(t)),
            K.binary_crossentropy(K.constant([[0.0, 1.0], [1.0, 0.0]]), K.sigmoid(t)),
            K.sparse_categorical_crossentropy(K.constant([1, 0]), K.softmax(t)),
        ]
    )
    # Recorded from TF 2.21.
    want = [
        1.5,
        [-1.0, 7.0],
        [[3.0, 4.0]],
        [[1.0, 4.0], [9.0, 16.0]],
        [[1.0, 2.0], [3.0, 4.0]],
        [[-5.0, -10.0], [15.0, 10.0]],
        [[1.0, -2.0, 1.0, -2.0], [3.0, 4.0, 3.0, 4.0]],
        [1.0, -2.0, 3.0, 4.0],
        [[[1.0, -2.0], [3.0, 4.0]]],
        [[1.0, 0.0], [2.0, 2.0]],
        [0.0, 0.0],
        [[1.0, 1.0], [1.0, 1.0]],
        [[1.0, -2.0], [3.0, 4.0]],
        [[0.7310586, 0.11920292], [0.95257413, 0.98201376]],
        [[0.95257413, 0.047425874], [0.26894143, 0.7310586]],
        [[1.0, 0.0], [3.0, 4.0]],
        [0, 1],
        [[True, False], [False, False]],
        [[[1.0, -2.0], [3.0, 4.0]], [[1.0, -2.0], [3.0, 4.0]]],
        [[1.0, 3.0], [-2.0, 4.0]],
        [[1.0, 1.4142135], [1.7320508, 2.0]],
        [[2.7182817, 0.13533528], [20.085537, 54.59815]],
        [[0.0, 0.6931472], [1.0986123, 1.3862944]],
        [[0.0, -2.0], [0.0, 0.0]],
        [[1.0, 0.0], [3.0, 4.0]],
        [[1.0, 4.0], [9.0, 16.0]],
        2.291288,
        [1.0, 9.0],
        [[0.4472136, -0.8944272], [0.6, 0.8]],
        True,
        True,
        -2.0,
        -24.0,
        [[1.0, -2.0], [4.0, 2.0]],
        [[0.7615942, -0.9640276], [0.9950547, 0.99932927]],
        [[3.0, 4.0]],
        [[1.0, 0.0], [0.0, 1.0]],
        [[1.0, -1.0], [1.0, 1.0]],
        [[0.0, -1.0], [1.0, 1.0]],
        [[1.0, -2.0], [3.0, 4.0]],
        [[1.0, -2.0], [1.0, -2.0], [3.0, 4.0], [3.0, 4.0]],
        [[1.0, -2.0, 1.0, -2.0], [3.0, 4.0, 3.0, 4.0]],
        [1.0, -2.0, 3.0, 4.0],
        [[0.0, 0.0], [0.0, 0.0]],
        [[1.0, 0.0], [0.0, 1.0]],
        [[1.0, -2.0], [3.0, 4.0]],
        [[-1.0, 2.0], [-3.0, -4.0]],
        [[1.0, -2.0], [3.0, 4.0]],
        [[1.3132616, 0.126928], [3.0485873, 4.01815]],
        [[1.0, -0.86466473], [3.0, 4.0]],
        [[1.0, 3.0], [-2.0, 4.0]],
        [3.0485873, 1.3132616],
        [[1.3132617, 2.126928], [0.048587352, 4.01815]],
        [3.0485873, 1.3132616],
    ]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(
            np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-5, atol=1e-6
        )
    assert (K.int_shape(K.zeros((2, 3))), K.ndim(t), K.dtype(t)) == ((2, 3), 2, "float32")
    _close(K.get_session().run(K.gradients(K.sum(K.square(t)), [t]))[0], [[2, -4], [6, 8]])
    v = K.variable(1.0)
    K.get_session().run(K.update_add(v, 2.0))
    assert K.get_value(v) == 3.0
    assert K.count_params(K.variable(np.zeros((2, 3)))) == 6
    assert (K.get_uid("x"), K.get_uid("x")) == (1, 2)
    assert K.is_keras_tensor(L.Dense(1)(tf.keras.Input((2,)))) and not K.is_keras_tensor(t)


def test_custom_layer_and_shared_calls():
    class Scale(L.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(
                name="w",
                shape=(int(input_shape[-1]),),
                initializer="random_normal",
                trainable=True,
            )
            super().build(input_shape)

        def call(self, x):
            return x * self.w

    tf.set_random_seed(5)
    s = Scale()
    x = tf.placeholder(tf.float32, [None, 3])
    y1, y2 = s(x), s(x)
    # Recorded from TF 2.21.
    assert (s.name, [w.name for w in s.weights], y1.name, y2.name) == (
        "scale",
        ["scale/w:0"],
        "scale/mul:0",
        "scale_1/mul:0",
    )
    xv = np.array([[1.0, -2.0, 0.5], [2.0, 4.0, -1.0]], np.float32)
    # The weight's seeded initial value, recorded from TF 2.21.
    w = np.array([-0.08569393, -0.033935115, 0.013152375], np.float32)
    _close(K.get_session().run(y2, {x: xv}), xv * w)


def test_recurrent_layers():
    tf.set_random_seed(11)
    x = tf.placeholder(tf.float32, [None, 4, 3])
    rnn, lstm = L.SimpleRNN(2), L.LSTM(3, return_sequences=True)
    gru = L.GRU(2, return_state=True, go_backwards=True)
    ys, yl, yg = rnn(x), lstm(x), gru(x)
    assert [w.name for w in lstm.weights] == [
        "lstm/lstm_cell/kernel:0",
        "lstm/lstm_cell/recurrent_kernel:0",
        "lstm/lstm_cell/bias:0",
    ]
    assert [w.shape.as_list() for w in gru.weights] == [[3, 6], [2, 6], [6]]
    assert [rnn.name, gru.name, rnn.weights[0].name] == [
        "simple_rnn",
        "gru",
        "simple_rnn/simple_rnn_cell/kernel:0",
    ]
    assert (ys.shape.as_list(), yl.shape.as_list()) == ([None, 2], [None, 4, 3])
    xv = np.random.RandomState(2).randn(2, 4, 3).astype("float32")
    got = K.get_session().run([ys, yl] + yg, {x: xv})
    # Recorded from TF 2.21 (v1 LSTM/GRU: hard_sigmoid gates, orthogonal recurrent kernels).
    want = [
        [[-0.72174275, -0.9659124], [-0.15254998, 0.8013243]],
        [
            [
                [-0.07992064, 0.17632437, -0.16105862],
                [-0.20917968, 0.3664458, 0.012595093],
                [-0.20300215, 0.35357407, 0.10796134],
                [0.07186596, 0.022479199, 0.24847859],
            ],
            [
                [0.1308301, 0.0702462, 0.1106402],
                [0.17745851, -0.08469989, 0.15962759],
                [0.22397327, 0.0041562645, -0.022420807],
                [0.10884729, 0.10137686, -0.1259278],
            ],
        ],
        [[-0.2641764, 0.49372664], [0.26530173, 0.048932314]],
        [[-0.2641764, 0.49372664], [0.26530173, 0.048932314]],
    ]
    for g, w in zip(got, want, strict=True):
        _close(g, w)
    _close(lstm.get_weights()[2], [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])


def test_separable_and_depthwise_conv_match_tf():
    import json
    import pathlib
    import sys

    fixtures = pathlib.Path(__file__).parent / "fixtures"
    sys.path.insert(0, str(fixtures))
    import keras_model_cases as cases

    want = json.loads((fixtures / "keras_model_tf.json").read_text())["separable"]
    got = cases.run_separable(tf)
    assert got["shapes"] == want["shapes"] and got["weights"] == want["weights"]
    for g, w in zip(got["values"], want["values"], strict=True):
        _close(g, w)


def test_more_layers_match_tf():
    # Conv1D/Conv2DTranspose/pooling/activation/shape layers against TF 2.21's outputs
    # (tests/fixtures/keras_model_tf.json, recorded by record_keras_model_tf.py).
    import json
    import pathlib
    import sys

    fixtures = pathlib.Path(__file__).parent / "fixtures"
    sys.path.insert(0, str(fixtures))
    import keras_model_cases as cases

    want = json.loads((fixtures / "keras_model_tf.json").read_text())["more_layers"]
    got = cases.run_more_layers(tf)
    assert got["shapes"] == want["shapes"]
    assert got["weights"] == want["weights"]
    for g, w in zip(got["values"], want["values"], strict=True):
        _close(g, w)


def test_bidirectional():
    tf.set_random_seed(21)
    x = tf.keras.Input((4, 3))
    b = L.Bidirectional(L.LSTM(2, return_sequences=True))
    b2 = L.Bidirectional(L.GRU(2), merge_mode="sum")
    b3 = L.Bidirectional(L.SimpleRNN(2, return_state=True), merge_mode="ave")
    y, y2, y3 = b(x), b2(x), b3(x)
    # Recorded from TF 2.21.
    assert [w.name for w in b.weights] == [
        "bidirectional/forward_lstm/lstm_cell/kernel:0",
        "bidirectional/forward_lstm/lstm_cell/recurrent_kernel:0",
        "bidirectional/forward_lstm/lstm_cell/bias:0",
        "bidirectional/backward_lstm/lstm_cell/kernel:0",
        "bidirectional/backward_lstm/lstm_cell/recurrent_kernel:0",
        "bidirectional/backward_lstm/lstm_cell/bias:0",
    ]
    assert b2.weights[0].name == "bidirectional_1/forward_gru/gru_cell/kernel:0"
    assert [y.shape.as_list(), y2.shape.as_list(), [t.shape.as_list() for t in y3]] == [
        [None, 4, 4],
        [None, 2],
        [[None, 2], [None, 2], [None, 2]],
    ]
    xv = np.random.RandomState(4).randn(2, 4, 3).astype("float32")
    got = K.get_session().run([y, y2] + y3, {x: xv})
    want = [
        [
            [
                [-0.17264281, 0.060463738, -0.11364795, -0.0047106594],
                [-0.375777, 0.049333975, -0.059995897, -0.058019165],
                [-0.17475611, 0.09808277, 0.29826814, 0.10959234],
                [-0.095874876, 0.062142663, 0.15555832, 0.04979732],
            ],
            [
                [-0.20364146, 0.06633563, -0.17668112, -0.0111401575],
                [0.004512758, -0.052501168, -0.22417912, -0.09729067],
                [-0.19747803, 0.059032213, -0.18498904, -0.03299905],
                [-0.2843931, 0.069015004, -0.08667564, -0.00010857567],
            ],
        ],
        [[0.5016426, 0.20180655], [0.31353992, -0.012101218]],
        [[0.09898025, 0.27292353], [-0.13138503, 0.614662]],
        [[0.9259105, 0.8757355], [0.71340805, 0.45406255]],
        [[-0.72795, -0.32988843], [-0.9761781, 0.7752614]],
    ]
    for g, w in zip(got, want, strict=True):
        _close(g, w)
    with pytest.raises(ValueError, match="Invalid merge mode"):
        L.Bidirectional(L.LSTM(2), merge_mode="max")


def test_noise_layers_follow_learning_phase_and_seeds():
    tf.set_random_seed(3)
    x = tf.placeholder(tf.float32, [None, 2, 2, 3])
    outs = [L.GaussianNoise(0.5)(x), L.GaussianDropout(0.3)(x), L.SpatialDropout2D(0.5)(x),
            L.SpatialDropout1D(0.5)(x[:, 0])]  # fmt: skip
    xv = np.ones((2, 2, 2, 3), np.float32)
    sess = K.get_session()
    for got in sess.run(outs, {x: xv}):
        _close(got, np.ones_like(got))
    # Training draws, recorded from TF 2.21 (graph seed 3).
    want = [
        [
            [
                [[0.06764102, 1.4013225, 0.7783914], [1.0690835, 1.4919407, 0.44209802]],
                [[1.2031889, 1.1412954, 1.4068623], [1.567183, 0.765627, 1.0463424]],
            ],
            [
                [[0.87708133, 0.90350926, -0.11014485], [1.138627, 1.6175203, 0.7729601]],
                [[1.0305594, 1.1212121, 1.4072909], [1.0195707, 0.48427254, 1.1355171]],
            ],
        ],
        [
            [
                [[0.98459214, 0.5364766, 1.5176152], [1.3672664, 0.03733319, -0.054008245]],
                [[1.7201505, 0.33170354, 0.55485857], [1.7009363, 1.2664881, 2.1287413]],
            ],
            [
                [[0.5227424, 1.6412215, 0.6150906], [1.5516517, 0.71340835, 0.81620246]],
                [[0.5778023, 1.1308756, -0.46444714], [1.40955, 0.89314497, -0.32864165]],
            ],
        ],
        [
            [[[2.0, 0.0, 0.0], [2.0, 0.0, 0.0]], [[2.0, 0.0, 0.0], [2.0, 0.0, 0.0]]],
            [[[2.0, 0.0, 2.0], [2.0, 0.0, 2.0]], [[2.0, 0.0, 2.0], [2.0, 0.0, 2.0]]],
        ],
        [[[0.0, 2.0, 2.0], [0.0, 2.0, 2.0]], [[2.0, 2.0, 0.0], [2.0, 2.0, 0.0]]],
    ]
    for got, w in zip(sess.run(outs, {x: xv, K.learning_phase(): True}), want, strict=True):
        _close(got, w)
