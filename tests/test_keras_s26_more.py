"""keras.layers.CuDNNGRU / CuDNNLSTM and the CudnnRNNV3 op they build: TF 2.21's
weights, names and configs (recorded from TF 2.21, TF_USE_LEGACY_KERAS=1, graph mode),
TF's CPU failure (no CPU kernel), and on the stand-in GPU (ASYNCFLOW_FAKE_GPUS=1) the
values and gradients of a Keras GRU (reset_after) / LSTM with the same weights and of a
NumPy reference."""

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.devices import gpu

L = tf.keras.layers


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.keras.backend.clear_session()


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _cpu_only():
    return tf.ConfigProto(device_count={"GPU": 0})


# Recorded from TF 2.21: layer name, output shapes (return_sequences and return_state
# on a [2, 3, 4] input, 5 units), weights.
@pytest.mark.parametrize(
    "cls,name,n_states,gates",
    [("CuDNNGRU", "cu_dnngru", 1, 3), ("CuDNNLSTM", "cu_dnnlstm", 2, 4)],
)
def test_layers_build_with_tfs_names_shapes_and_config(cls, name, n_states, gates):
    x = tf.placeholder(tf.float32, [2, 3, 4])
    layer = getattr(L, cls)(5, return_sequences=True, return_state=True)
    out = layer(x)
    assert layer.name == name
    assert [o.shape.as_list() for o in out] == [[2, 3, 5]] + [[2, 5]] * n_states
    assert [(w.name, w.shape.as_list()) for w in layer.weights] == [
        (f"{name}/kernel:0", [4, 5 * gates]),
        (f"{name}/recurrent_kernel:0", [5, 5 * gates]),
        (f"{name}/bias:0", [10 * gates]),
    ]
    assert out[0].op.type == "Transpose"  # back to batch-major, as TF's
    assert any(op.type == "CudnnRNNV3" for op in tf.get_default_graph().get_operations())
    config = layer.get_config()
    assert list(config)[:10] == [
        "name", "trainable", "dtype", "return_sequences", "return_state", "go_backwards",
        "stateful", "time_major", "units", "kernel_initializer",
    ]  # fmt: skip
    assert config["kernel_initializer"] == {
        "class_name": "GlorotUniform",
        "config": {"seed": None, "dtype": "float32"},
    }
    assert ("unit_forget_bias" in config) == (cls == "CuDNNLSTM")
    again = getattr(L, cls).from_config(config)
    assert again.units == 5 and again.return_state


@pytest.mark.parametrize("cls,mode", [("CuDNNGRU", "gru"), ("CuDNNLSTM", "lstm")])
def test_on_a_cpu_running_it_raises_tfs_no_kernel_error(cls, mode):
    x = tf.placeholder(tf.float32, [2, 3, 4])
    layer = getattr(L, cls)(5)
    y = layer(x)
    with tf.Session(config=_cpu_only()) as sess:
        sess.run(tf.variables_initializer(layer.weights))  # (TF fails this run too)
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(y, {x: np.ones((2, 3, 4))})
    text = str(e.value)
    # TF 2.21's text (its attrs come in hash order; these are the values)
    assert text.startswith(
        f"No OpKernel was registered to support Op 'CudnnRNNV3' used by "
        f"{{{{node {layer.name}/CudnnRNNV3}}}} with these attrs: ["
    )
    for attr in (f'rnn_mode="{mode}"', "dropout=0", "is_training=true", "time_major=true",
                 'input_mode="linear_input"', "T=DT_FLOAT", "num_proj=0",
                 'direction="unidirectional"'):  # fmt: skip
        assert attr in text
    assert "Registered devices: [CPU]" in text
    assert "device='GPU'; T in [DT_FLOAT]" in text


def test_lstm_forget_bias_starts_at_one_on_the_recurrent_side():
    layer = L.CuDNNLSTM(2)
    layer(tf.placeholder(tf.float32, [1, 3, 4]))
    with tf.Session() as sess:
        sess.run(tf.variables_initializer(layer.weights))
        bias = sess.run(layer.bias)
    # recorded from TF 2.21: ones at [5u, 6u)
    np.testing.assert_array_equal(bias, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0])


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _numpy_reference(mode, x, kernel, recurrent, bias, units):
    """Keras' batch-major run of cuDNN's cell, straight from the definitions."""
    h = np.zeros((x.shape[0], units), np.float64)
    c = np.zeros_like(h)
    outs = []
    u = units
    for t in range(x.shape[1]):
        xt = x[:, t]
        if mode == "gru":
            xz, xr, xh = np.split(xt @ kernel + bias[: 3 * u], 3, axis=1)
            rz, rr, rh = np.split(h @ recurrent + bias[3 * u :], 3, axis=1)
            z, r = _sigmoid(xz + rz), _sigmoid(xr + rr)
            n = np.tanh(xh + r * rh)
            h = (1 - z) * n + z * h
        else:
            g = xt @ kernel + h @ recurrent + bias[: 4 * u] + bias[4 * u :]
            i, f, cc, o = np.split(g, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(cc)
            h = _sigmoid(o) * np.tanh(c)
        outs.append(h)
    return np.stack(outs, 1), h, c


@pytest.mark.parametrize("cls,ref", [("CuDNNGRU", "GRU"), ("CuDNNLSTM", "LSTM")])
def test_on_the_stand_in_gpu_values_and_gradients_are_a_keras_rnns(fake_gpu, cls, ref):
    if gpu.unavailable_reason():
        pytest.skip(gpu.unavailable_reason())
    rng = np.random.RandomState(0)
    xv = rng.randn(2, 3, 4).astype(np.float32)
    weight = rng.randn(2, 3, 5).astype(np.float32)
    x = tf.constant(xv)
    layer = getattr(L, cls)(5, return_sequences=True, return_state=True)
    with tf.device("/gpu:0"):
        out = layer(x)
    ref_layer = getattr(L, ref)(
        5, return_sequences=True, return_state=True, recurrent_activation="sigmoid",
        **({"reset_after": True} if ref == "GRU" else {}),
    )  # fmt: skip
    with tf.device("/cpu:0"):
        ref_out = ref_layer(x)
    gates = 3 if ref == "GRU" else 4
    b = layer.bias
    ref_bias = tf.reshape(b, [2, gates * 5]) if ref == "GRU" else b[: gates * 5] + b[gates * 5 :]
    copy = [ref_layer.weights[0].assign(layer.kernel),
            ref_layer.weights[1].assign(layer.recurrent_kernel),
            ref_layer.weights[2].assign(ref_bias)]  # fmt: skip

    def loss(outs):
        return tf.reduce_sum(outs[0] * weight) + tf.reduce_sum(outs[-1] * 0.5)

    grads = tf.gradients(loss(out), [x, layer.kernel, layer.recurrent_kernel, layer.bias])
    ref_grads = tf.gradients(loss(ref_out), [x, *ref_layer.weights])
    with tf.Session() as sess:
        sess.run(tf.variables_initializer(layer.weights + ref_layer.weights))
        sess.run(b.assign(rng.randn(10 * gates).astype(np.float32) * 0.5))
        sess.run(copy)
        got, want = sess.run([out, ref_out])
        g, rg = sess.run([grads, ref_grads])
        kernel, recurrent, bias = sess.run(layer.weights)
    for a, w in zip(got, want, strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-6)
    seq, h, c = _numpy_reference(ref.lower(), xv, kernel, recurrent, bias, 5)
    np.testing.assert_allclose(got[0], seq, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], h, rtol=1e-5, atol=1e-6)
    if ref == "LSTM":
        np.testing.assert_allclose(got[2], c, rtol=1e-5, atol=1e-6)
    for a, w in zip(g[:3], rg[:3], strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-5)
    # one bias per side: each side's gradient is the shared bias' one
    d_bias = g[3].reshape(2, gates * 5)
    want_bias = rg[3] if ref == "GRU" else np.stack([rg[3], rg[3]])
    np.testing.assert_allclose(d_bias, want_bias, rtol=1e-4, atol=1e-5)


def test_stand_in_gpu_go_backwards_last_output_and_initial_state(fake_gpu):
    if gpu.unavailable_reason():
        pytest.skip(gpu.unavailable_reason())
    rng = np.random.RandomState(1)
    xv = rng.randn(2, 4, 3).astype(np.float32)
    h0 = rng.randn(2, 2).astype(np.float32)
    layer = L.CuDNNGRU(2, go_backwards=True)
    with tf.device("/gpu:0"):
        y = layer(tf.constant(xv), initial_state=[tf.constant(h0)])
    with tf.Session() as sess:
        sess.run(tf.variables_initializer(layer.weights))
        sess.run(layer.bias.assign(rng.randn(12).astype(np.float32)))
        got = sess.run(y)
        kernel, recurrent, bias = sess.run(layer.weights)
    u, h = 2, h0.astype(np.float64)
    for t in range(3, -1, -1):
        xt = xv[:, t]
        xz, xr, xh = np.split(xt @ kernel + bias[: 3 * u], 3, axis=1)
        rz, rr, rh = np.split(h @ recurrent + bias[3 * u :], 3, axis=1)
        z, r = _sigmoid(xz + rz), _sigmoid(xr + rr)
        h = (1 - z) * np.tanh(xh + r * rh) + z * h
    np.testing.assert_allclose(got, h, rtol=1e-5, atol=1e-6)


def test_stateful_is_refused():
    with pytest.raises(NotImplementedError, match="stateful"):
        L.CuDNNLSTM(3, stateful=True)


# -- tf.keras.estimator.model_to_estimator (recorded from TF 2.15.1, graph mode) -----------

X_EST = np.arange(24, dtype=np.float32).reshape(8, 3) / 10
Y_EST = (X_EST.sum(1, keepdims=True) > 1.2).astype(np.float32)


def _functional_for_estimator():
    K = tf.keras
    inp = L.Input((3,), name="feat")
    h = L.Dense(4, activation="relu", name="hid", kernel_initializer=K.initializers.Constant(0.1))(
        inp
    )
    out = L.Dense(
        1, name="out", kernel_initializer=K.initializers.Constant(0.2), bias_initializer="ones"
    )(h)
    model = K.Model(inp, out)
    model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    return model


def test_model_to_estimator_trains_evaluates_and_predicts_as_tf(tmp_path):
    model_dir = str(tmp_path / "md")
    est = tf.keras.estimator.model_to_estimator(
        keras_model=_functional_for_estimator(), model_dir=model_dir
    )
    assert isinstance(est, tf.estimator.Estimator)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"feat": X_EST}, Y_EST)).batch(4).repeat()

    est.train(input_fn, steps=3)
    # TF 2.15.1 writes the Keras weights first (model_dir/keras) and warm-starts from them
    assert sorted(p.name for p in (tmp_path / "md" / "keras").iterdir()) == [
        "checkpoint",
        "keras_model.ckpt.data-00000-of-00001",
        "keras_model.ckpt.index",
        "keras_model.ckpt.meta",
    ]
    assert tf.train.list_variables(model_dir) == [
        ("global_step", []),
        ("hid/bias", [4]),
        ("hid/kernel", [3, 4]),
        ("out/bias", [1]),
        ("out/kernel", [4, 1]),
        ("training/SGD/decay", []),
        ("training/SGD/learning_rate", []),
        ("training/SGD/momentum", []),
    ]
    result = est.evaluate(
        lambda: tf.data.Dataset.from_tensor_slices(({"feat": X_EST}, Y_EST)).batch(4)
    )
    assert sorted(result) == ["global_step", "loss", "mean_absolute_error"]
    np.testing.assert_allclose(result["loss"], 0.15481286, rtol=1e-6)
    np.testing.assert_allclose(result["mean_absolute_error"], 0.2514687, rtol=1e-6)
    assert result["global_step"] == 3
    preds = list(
        est.predict(lambda: tf.data.Dataset.from_tensor_slices({"feat": X_EST[:3]}).batch(2))
    )
    assert [sorted(p) for p in preds] == [["out"]] * 3
    np.testing.assert_allclose(
        [p["out"][0] for p in preds], [0.75251347, 0.784801, 0.82883817], rtol=1e-6
    )


def test_model_to_estimator_from_a_saved_model_file_with_adam(tmp_path):
    K = tf.keras
    model = K.Sequential([
        L.Dense(3, activation="tanh", input_shape=(2,), name="a",
                kernel_initializer=K.initializers.Constant(0.3)),
        L.Dense(1, activation="sigmoid", name="b",
                kernel_initializer=K.initializers.Constant(-0.2)),
    ])  # fmt: skip
    model.compile(
        optimizer=K.optimizers.Adam(0.05), loss="binary_crossentropy", metrics=["accuracy"]
    )
    x = np.array([[0, 1], [1, 0], [1, 1], [0, 0], [2, 1], [1, 2]], np.float32)
    y = np.array([[1], [0], [1], [0], [1], [0]], np.float32)
    model.fit(x, y, epochs=2, batch_size=3, verbose=0, shuffle=False)
    path = str(tmp_path / "m.h5")
    model.save(path)
    model_dir = str(tmp_path / "md")
    est = K.estimator.model_to_estimator(
        keras_model_path=path, config=tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=1)
    )

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"a_input": x}, y)).batch(3).repeat()

    est.train(input_fn, steps=4)
    assert [n for n, _ in tf.train.list_variables(model_dir)][-4:] == [
        "training/Adam/beta_1",
        "training/Adam/beta_2",
        "training/Adam/decay",
        "training/Adam/learning_rate",
    ]
    full = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"a_input": x}, y)).batch(3))
    # recorded from TF 2.15.1
    assert full["acc"] == 0.5 and full["global_step"] == 4
    np.testing.assert_allclose(full["loss"], 0.685223, rtol=1e-6)
    preds = [
        p["b"][0] for p in est.predict(lambda: tf.data.Dataset.from_tensor_slices(x).batch(4))
    ]
    want = [0.5172826051712036, 0.5494019389152527, 0.5573756694793701, 0.5090467929840088,
            0.5906213521957397, 0.5650350451469421]  # fmt: skip
    np.testing.assert_allclose(preds, want, rtol=1e-6)


def test_model_to_estimator_errors():
    K = tf.keras
    with pytest.raises(ValueError, match="Either `keras_model` or `keras_model_path`"):
        K.estimator.model_to_estimator()
    model = _functional_for_estimator()
    with pytest.raises(ValueError, match="but not both"):
        K.estimator.model_to_estimator(keras_model=model, keras_model_path="m.h5")
    raw = K.Sequential([L.Dense(1, input_shape=(2,))])
    with pytest.raises(ValueError, match="has not been compiled yet"):
        K.estimator.model_to_estimator(keras_model=raw)
    with pytest.raises(ValueError, match='one of "checkpoint" or "saver"'):
        K.estimator.model_to_estimator(keras_model=model, checkpoint_format="ckpt")


# -- the v1 / v2 dtype behaviour (recorded from TF 2.21, graph mode) ------------------------


def _dtype_probe():
    x = tf.placeholder(tf.float64, [None, 2])
    dense = L.Dense(3)
    y = dense(x)
    given = L.Dense(1, dtype="float64")
    z = given(tf.placeholder(tf.float32, [None, 2]))
    act = L.Activation("relu")(x)
    return [y.dtype.name, dense.dtype, dense.kernel.dtype.name, dense.get_config()["dtype"],
            z.dtype.name, given.dtype, act.dtype.name]  # fmt: skip


def test_v1_dtype_behaviour_layers_take_their_first_inputs_dtype():
    # TF1's rule, the default under tf.compat.v1
    assert _dtype_probe() == ["float64"] * 7


def test_enable_v2_dtype_behavior_computes_in_floatx():
    L.enable_v2_dtype_behavior()
    try:
        got = _dtype_probe()
    finally:
        L.disable_v2_dtype_behavior()
    assert got == ["float32", "float32", "float32", "float32", "float64", "float64", "float32"]
    tf.reset_default_graph()
    assert _dtype_probe() == ["float64"] * 7  # disabled again
