"""Keras differences from TF fixed in s27 (a nested model's BatchNormalization updates,
DenseNet's weight checks, TensorBoard's profile and projector files) and the Keras and
tf.train names added in s27.

Expected values were recorded from TF 2.21 (tf_keras, TF_USE_LEGACY_KERAS=1,
tf.disable_v2_behavior()) unless a test says otherwise.
"""

import os

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


# -- TensorBoard: profile_batch and embeddings ------------------------------------------


def _fields(buf):
    """(field number, value) pairs of a protobuf message: ints for varints, bytes for
    length-delimited fields (enough to read an XSpace back)."""
    out, i = [], 0

    def varint():
        nonlocal i
        n = shift = 0
        while True:
            b = buf[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return n

    while i < len(buf):
        key = varint()
        if key & 7 == 0:
            out.append((key >> 3, varint()))
        else:
            assert key & 7 == 2
            size = varint()
            out.append((key >> 3, buf[i : i + size]))
            i += size
    return out


def _embedding_model():
    inp = K.Input((4,), dtype="int32")
    flat = K.layers.Flatten()(K.layers.Embedding(10, 3, name="emb")(inp))
    model = K.Model(inp, K.layers.Dense(1, name="out")(flat))
    model.set_weights(
        [np.arange(30).reshape(10, 3).astype("float32") / 10, np.ones((12, 1), "float32"),
         np.zeros(1, "float32")]
    )  # fmt: skip
    model.compile("sgd", "mse")
    return model


EMB_X = np.arange(20).reshape(5, 4) % 10


def test_tensorboard_embeddings_writes_projector_config_and_checkpoints(tmp_path):
    model = _embedding_model()
    board = K.callbacks.TensorBoard(
        str(tmp_path), embeddings_freq=1, embeddings_data=EMB_X[:3], batch_size=2,
        embeddings_metadata={"emb": "meta.tsv"}, write_graph=False, profile_batch=0,
    )  # fmt: skip
    y = np.ones((5, 1), "float32")
    model.fit(EMB_X, y, batch_size=2, epochs=2, verbose=0, callbacks=[board], shuffle=False)
    names = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("events."))
    assert names == [
        "checkpoint",
        "keras_embedding.ckpt-0.data-00000-of-00001",
        "keras_embedding.ckpt-0.index",
        "keras_embedding.ckpt-0.meta",
        "keras_embedding.ckpt-1.data-00000-of-00001",
        "keras_embedding.ckpt-1.index",
        "keras_embedding.ckpt-1.meta",
        "projector_config.pbtxt",
    ]
    assert (tmp_path / "projector_config.pbtxt").read_text() == (
        'embeddings {\n  tensor_name: "emb_embedding:0"\n  metadata_path: "meta.tsv"\n}\n'
    )
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("keras_embedding.ckpt-1")
    reader = tf.train.NewCheckpointReader(str(tmp_path / "keras_embedding.ckpt-1"))
    assert reader.get_variable_to_shape_map() == {"emb_embedding": [3, 12]}
    # TF 2.21's values (the embedding variables initialized by hand there: tf_keras
    # leaves them uninitialized and fails at the first save with NotFoundError).
    want = [
        [-0.1137318, -0.01287703, 0.08797774, 0.18883252, 0.2896873, 0.39054209,
         0.50315899, 0.60264409, 0.70212924, 0.80161428, 0.90109944, 1.0005846],
        [0.9693405, 1.0687556, 1.16817117, 1.26758647, 1.36700201, 1.46641719,
         1.51317596, 1.61943185, 1.7256875, 1.83194315, 1.93819892, 2.04445481],
        [2.2197752, 2.32941175, 2.43904805, 2.54868484, 2.65832162, 2.76795793,
         -0.1137318, -0.01287703, 0.08797774, 0.18883252, 0.2896873, 0.39054209],
    ]  # fmt: skip
    np.testing.assert_allclose(reader.get_tensor("emb_embedding"), want, rtol=1e-5, atol=1e-6)


def test_tensorboard_embeddings_named_layer_and_metadata_string(tmp_path):
    inp = K.Input((4,))
    model = K.Model(inp, K.layers.Dense(1)(inp))
    model.compile("sgd", "mse")
    x, y = np.ones((4, 4), "float32"), np.ones((4, 1), "float32")
    board = K.callbacks.TensorBoard(
        str(tmp_path), write_graph=False, embeddings_freq=1, embeddings_data=x,
        embeddings_layer_names=["dense"], embeddings_metadata="m.tsv",
    )  # fmt: skip
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[board])
    assert (tmp_path / "projector_config.pbtxt").read_text() == (
        'embeddings {\n  tensor_name: "dense_embedding:0"\n  metadata_path: "m.tsv"\n}\n'
    )
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("events.")) == [
        "checkpoint", "keras_embedding.ckpt-0.data-00000-of-00001",
        "keras_embedding.ckpt-0.index", "keras_embedding.ckpt-0.meta", "plugins",
        "projector_config.pbtxt",
    ]  # fmt: skip


def test_tensorboard_embeddings_without_embedding_layer_raises_as_tf(tmp_path):
    inp = K.Input((4,))
    model = K.Model(inp, K.layers.Dense(1)(inp))
    model.compile("sgd", "mse")
    x = np.ones((4, 4), "float32")
    board = K.callbacks.TensorBoard(str(tmp_path), embeddings_freq=1, embeddings_data=x)
    with pytest.raises(ValueError, match="No variables to save"):
        model.fit(x, x[:, :1], batch_size=2, epochs=1, verbose=0, callbacks=[board])


def test_tensorboard_profile_batch_writes_an_xspace(tmp_path):
    inp = K.Input((4,))
    model = K.Model(inp, K.layers.Dense(1, name="out")(inp))
    model.compile("sgd", "mse")
    x, y = np.ones((6, 4), "float32"), np.ones((6, 1), "float32")
    board = K.callbacks.TensorBoard(str(tmp_path), write_graph=False, profile_batch=2)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[board])
    # As TF: logdir/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb
    runs = list((tmp_path / "plugins" / "profile").iterdir())
    assert len(runs) == 1 and len(runs[0].name.split("_")) == 6
    (path,) = runs[0].iterdir()
    assert path.name.endswith(".xplane.pb")
    space = _fields(path.read_bytes())
    assert [v.decode() for f, v in space if f == 4] == [path.name[: -len(".xplane.pb")]]
    (plane,) = [_fields(v) for f, v in space if f == 1]
    assert [v for f, v in plane if f == 2] == [b"/host:CPU"]
    names = set()
    for f, entry in plane:
        if f == 4:
            (meta,) = [_fields(v) for k, v in _fields(entry) if k == 2]
            names.add(dict(meta)[2].decode())
    assert {"SessionRun", "out/BiasAdd:BiasAdd", "loss/out_loss/Mean:Mean"} <= names
    lines = [dict(_fields(v)) for f, v in plane if f == 3]
    assert lines[0][2] == b"python"
    # The train function runs untraced again after the profiled batch.
    assert model._function("train").run_options is None


def test_tensorboard_profile_batch_zero_writes_no_profile(tmp_path):
    inp = K.Input((4,))
    model = K.Model(inp, K.layers.Dense(1)(inp))
    model.compile("sgd", "mse")
    x = np.ones((4, 4), "float32")
    board = K.callbacks.TensorBoard(str(tmp_path), write_graph=False, profile_batch=0)
    model.fit(x, x[:, :1], batch_size=2, epochs=1, verbose=0, callbacks=[board])
    assert [p.name.startswith("events.") for p in tmp_path.iterdir()] == [True]


# -- tf.layers.experimental: Keras-style layers -------------------------------------------


def test_keras_style_scope_names_and_variables_as_tf():
    x = tf.placeholder(tf.float32, [None, 3])
    with tf.layers.experimental.keras_style_scope():
        d = tf.layers.Dense(2, kernel_regularizer=tf.nn.l2_loss)
        with tf.name_scope("ns"):
            y = d(x)
        y2 = d(x)
        bn = tf.layers.BatchNormalization()
        bn(x, training=True)
    # TF 2.21: Keras names from 1, variables named by the first call's name scope,
    # resource variables, updates kept out of UPDATE_OPS, regularizers in the collection.
    assert d.name == "dense_1"
    assert [v.name for v in d.variables] == ["ns/dense_1/kernel:0", "ns/dense_1/bias:0"]
    assert (y.name, y2.name) == ("ns/dense_1/BiasAdd:0", "dense_1/BiasAdd:0")
    assert type(d.variables[0]).__name__ == "ResourceVariable"
    assert len(d.losses) == 1 and len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 1
    assert bn.name == "batch_normalization_1"
    assert [v.name for v in bn.trainable_variables] == [
        "batch_normalization_1/gamma:0",
        "batch_normalization_1/beta:0",
    ]
    assert len(bn.updates) == 2 and tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []
    assert len(tf.trainable_variables()) == 4


def test_keras_style_scope_refuses_scope_and_reuse():
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    with tf.layers.experimental.keras_style_scope():
        with pytest.raises(ValueError, match="scope argument not allowed .* saw: s$"):
            tf.layers.Dense(2, _scope="s")
        with pytest.raises(ValueError, match="reuse argument not allowed .* saw: True"):
            tf.layers.Dense(2, _reuse=True)
        with pytest.raises(ValueError, match="scope argument not allowed .* saw: z"):
            tf.layers.Dense(2)(x, scope="z")
        # The functional layers make a Keras-style layer: `name` is a refused scope.
        with pytest.raises(ValueError, match="scope argument not allowed .* saw: foo"):
            tf.layers.dense(x, 2, name="foo")
        with pytest.raises(ValueError, match="reuse argument not allowed"):
            tf.layers.dense(x, 2, reuse=True)
        # Recorded from TF 2.21 (the refused layers above took dense_1..dense_4).
        assert tf.layers.dense(x, 2).name == "dense_5/BiasAdd:0"
        assert tf.layers.conv2d(x, 2, 3).name == "conv2d_1/BiasAdd:0"
        assert tf.layers.dropout(x, 0.5, training=True).name == "dropout_1/dropout/SelectV2:0"
        assert tf.layers.flatten(x).name == "flatten_1/Reshape:0"
        assert tf.layers.max_pooling2d(x, 2, 2).name == "max_pooling2d_1/MaxPool:0"
    # Outside the scope, layers use variable scopes again.
    d = tf.layers.Dense(2)
    d(x)
    assert (d.name, d.variables[0].name) == ("dense_6", "dense/kernel:0")


def test_set_keras_style_and_shared_name_counter():
    x = tf.placeholder(tf.float32, [None, 3])
    a = tf.layers.Dense(2)
    a(x)
    b = tf.keras.layers.Dense(2)
    # TF 2.21: tf.layers count in Keras' names (a is dense_1, so b is dense_1 too:
    # Keras' own layers are named from 0).
    assert (a.name, [v.name for v in a.variables], b.name) == (
        "dense_1",
        ["dense/kernel:0", "dense/bias:0"],
        "dense_1",
    )
    from asyncflow import layer_classes

    try:
        assert tf.layers.experimental.set_keras_style() is None
        c = tf.layers.Dense(2)
        c(x)
        assert [v.name for v in c.variables] == ["dense_3/kernel:0", "dense_3/bias:0"]
    finally:
        layer_classes._KERAS_STYLE[0] = False


def test_layer_classes_name_ops_in_their_scope_as_tf():
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    # TF 2.21's names (the ops went into a second scope here).
    assert tf.layers.Flatten()(x).name == "flatten/Reshape:0"
    assert tf.layers.Dropout(0.5)(x, training=True).name == "dropout/dropout/SelectV2:0"
    assert tf.layers.MaxPooling2D(2, 2)(x).name == "max_pooling2d/MaxPool:0"
    assert tf.layers.flatten(x).name == "flatten_1/Reshape:0"


# -- keras.utils: DeterministicRandomTestTool, StepsPerExecutionTuner -----------------------


def _seeds(t):
    op = t.op
    while "seed2" not in op.node_def.attr:
        op = op.inputs[0].op
    return op.get_attr("seed"), op.get_attr("seed2")


@pytest.mark.parametrize(
    "mode, want",
    [
        # TF 2.21: graph seed after the scope, operation_seed, the seeds of a, b and of
        # a random op made after the scope, then a, b, v's values.
        ("constant", (0, 0, (42, 0), (42, 0), (0, 2147483647),
                      [0.8354591, 0.9162973, 0.49464953], [0.8354591, 0.9162973],
                      [0.8217038, 1.0197161])),
        ("num_random_ops", (42, 3, (42, 0), (42, 1), (42, 0),
                            [0.8354591, 0.9162973, 0.49464953], [0.15012848, 0.63992536],
                            [1.1948923, -0.33785152])),
    ],
)  # fmt: skip
def test_deterministic_random_test_tool_seeds_as_tf(mode, want, _fresh_graph):
    g = _fresh_graph
    tool = K.utils.DeterministicRandomTestTool(mode=mode)
    assert (tool.operation_seed, g.seed) == (0, None)
    with tool.scope():
        assert g.seed == 42
        a = tf.random.uniform([3])
        b = tf.random.uniform([2], seed=7)  # the op seed asked for is ignored
        v = tf.get_variable("v", [2], initializer=tf.glorot_uniform_initializer())
    c = tf.random.uniform([1])
    assert (g.seed, tool.operation_seed, _seeds(a), _seeds(b), _seeds(c)) == want[:5]
    with tf.Session() as sess:
        sess.run(v.initializer)
        got = sess.run([a, b, v])
    for value, expected in zip(got, want[5:], strict=True):
        np.testing.assert_allclose(value, expected, rtol=1e-6)


def test_deterministic_random_test_tool_errors():
    with pytest.raises(
        ValueError, match="Mode arg must be 'constant' or 'num_random_ops'. Got: x"
    ):
        K.utils.DeterministicRandomTestTool(mode="x")
    tool = K.utils.DeterministicRandomTestTool(mode="num_random_ops")
    with tool.scope():
        tf.random.uniform([1])
        tf.random.uniform([1])
    tool.operation_seed = 1
    with tool.scope(), pytest.raises(ValueError, match="re-use the already-used operation seed 1"):
        tf.random.uniform([1])


def test_steps_per_execution_tuner_in_graph_mode():
    spe = tf.Variable(1, dtype=tf.int64)
    tuner = K.utils.StepsPerExecutionTuner(K.optimizers.SGD(), spe)
    assert tuner.steps_per_execution is spe
    assert (tuner.interval, tuner.change_spe_interval, tuner.spe_change_threshold) == (5, 10, 0.1)
    # TF 2.21 in graph mode: start() reads the optimizer's iterations with numpy().
    with pytest.raises(NotImplementedError, match="only available when eager execution"):
        tuner.start()
    assert tuner.stop() is None and tuner.steps_per_execution_stop_event.is_set()


# -- keras.layers.experimental.DynamicLookup / DynamicEmbedding, UpdateEmbeddingCallback ----

_DIMENSION_ERROR = "Dimension value must be integer or None or have an __index__ method"


def test_dynamic_lookup_cannot_be_made_in_graph_mode_as_tf():
    DL = K.layers.experimental.DynamicLookup
    with pytest.raises(ValueError, match="Either specify the initial vocabulary or provide"):
        DL(5, initial_vocabulary=["a"])
    # TF 2.21 graph mode: the table size is a tensor, which no shape can hold.
    with pytest.raises(
        TypeError, match=_DIMENSION_ERROR + ".*'Cast_1:0' shape=\\(\\) dtype=int32"
    ):
        DL(5, initial_vocabulary=tf.constant(["a", "b"]))
    for vocabulary in (tf.int64, "string"):
        with pytest.raises(TypeError, match=_DIMENSION_ERROR):
            DL(5, initial_vocabulary=vocabulary)
    with pytest.raises(ValueError, match="LRU eviction policy is currently unsupported"):
        DL(5, initial_vocabulary=tf.constant(["a"]), eviction_policy="LRU")
    with pytest.raises(TypeError, match=_DIMENSION_ERROR):
        K.layers.experimental.DynamicEmbedding(5, 2, initial_vocabulary=tf.constant(["a"]))
    # TF 2.21's names afterwards (the DynamicEmbedding made its Embedding first).
    assert (K.layers.Embedding(2, 2).name, K.layers.Dense(1).name) == ("embedding_1", "dense")


def test_update_embedding_callback_updates_its_layer_on_interval():
    import threading

    called = threading.Event()

    class Layer:
        def update_embeddings(self, strategy):
            called.set()

    callback = K.callbacks.experimental.UpdateEmbeddingCallback(Layer(), interval=3600)
    assert (callback._epoch, callback.interval, callback.daemon, callback.is_alive()) == (
        0, 3600, True, False,
    )  # fmt: skip
    inp = K.Input((2,))
    model = K.Model(inp, K.layers.Dense(1)(inp))
    model.compile("sgd", "mse")
    callback.set_model(model)
    with callback:  # the thread calls on_interval at once, then waits an hour
        assert called.wait(10)
    callback.thread.join(10)
    assert not callback.is_alive()
    callback.on_epoch_begin(3)
    assert callback._epoch == 3


# -- keras.callbacks.SidecarEvaluatorModelExport -------------------------------------------


def test_sidecar_evaluator_model_export_saves_the_best_as_tf(tmp_path, capsys, caplog):
    inp = K.Input((2,))
    model = K.Model(inp, K.layers.Dense(1)(inp))
    model.compile("sgd", "mse")
    (tmp_path / "ck").mkdir()
    callback = K.callbacks.SidecarEvaluatorModelExport(
        export_filepath=str(tmp_path / "best" / "best-{epoch:04d}.h5"),
        checkpoint_filepath=str(tmp_path / "ck" / "ckpt-{epoch:04d}"),
        save_weights_only=True, monitor="loss", mode="min", verbose=1,
    )  # fmt: skip
    assert callback.save_best_only
    callback.set_model(model)
    callback.on_test_begin()
    assert callback.export_index == 0
    indices = []
    for i, loss in [(3, 0.5), (5, 0.7), (7, 0.2)]:
        for ext in (".index", ".data-00000-of-00001"):
            path = tmp_path / "ck" / f"ckpt-{i:04d}{ext}"
            path.write_text("x")
            os.utime(path, (1000 + i, 1000 + i))
        callback.on_test_begin()
        indices.append(callback.export_index)
        callback.on_test_end({"loss": loss})
    # TF 2.21: the training epoch is the checkpoint's number; the best is exported
    # (its directory made), a worse one is not.
    assert indices == [2, 4, 6]
    assert sorted(p.name for p in (tmp_path / "best").iterdir()) == [
        "best-0003.h5",
        "best-0007.h5",
    ]
    out = capsys.readouterr().out
    assert "Epoch 3: loss improved from inf to 0.50000, saving model to" in out
    assert "Epoch 5: loss did not improve from 0.50000" in out
    assert "Epoch 7: loss improved from 0.50000 to 0.20000" in out
    callback.on_test_end({"acc": 1.0})
    assert "Can save best model only with loss available, skipping." in caplog.text


def test_model_saves_make_their_directory_as_keras(tmp_path):
    inp = K.Input((2,))
    model = K.Model(inp, K.layers.Dense(1)(inp))
    # TF 2.21: the TF-format weights and model.save(h5) make the directory; h5 weights
    # do not.
    model.save_weights(str(tmp_path / "b" / "w.ckpt"))
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "checkpoint",
        "w.ckpt.data-00000-of-00001",
        "w.ckpt.index",
    ]
    model.save(str(tmp_path / "c" / "m.h5"))
    assert (tmp_path / "c" / "m.h5").exists()
    with pytest.raises(FileNotFoundError):
        model.save_weights(str(tmp_path / "a" / "w.h5"))


# -- tf.train.experimental: sharding policies and PythonState ------------------------------

E = tf.train.experimental


def _shardable(t, key, spec=""):
    return E.ShardableTensor(
        _tensor_save_spec=None, tensor=t, dtype=t.dtype,
        device=tf.DeviceSpec.from_string("/job:localhost/task:0/device:CPU:0"), name=key,
        shape=t.shape, slice_spec=spec, checkpoint_key=key, trackable=None,
    )  # fmt: skip


def _shard_values(shards):
    with tf.Session() as sess:
        return [
            {
                key: {
                    spec: (t.shape.as_list(), sess.run(t).ravel().tolist())
                    if t.dtype != tf.string
                    else "str"
                    for spec, t in slices.items()
                }
                for key, slices in shard.items()
            }
            for shard in shards
        ]


def _sharding_inputs():
    return [
        _shardable(tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4)), "v"),
        _shardable(tf.constant(np.arange(5, dtype=np.int64)), "w"),
        _shardable(tf.constant(3.0), "s"),
        _shardable(tf.constant(b"x" * 100), "_CHECKPOINTABLE_OBJECT_GRAPH"),
        _shardable(tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3)), "p", "4 3 2,2:0,3"),
    ]


def test_sharding_policies_descriptions_and_interface():
    assert E.ShardByTaskPolicy().description == (
        "Split tensors into shards based on their device spec task."
    )
    assert E.MaxShardSizePolicy(100).description == (
        "Split tensors into shards with a max shard size."
    )
    with pytest.raises(TypeError, match="abstract"):
        E.ShardingCallback()
    assert isinstance(E.MaxShardSizePolicy(1), E.ShardingCallback)
    opts = tf.train.CheckpointOptions(experimental_sharding_callback=E.ShardByTaskPolicy())
    assert isinstance(opts.experimental_sharding_callback, E.ShardByTaskPolicy)
    (shard,) = _shard_values(E.ShardByTaskPolicy()(_sharding_inputs()))
    assert shard["p"] == {"4 3 2,2:0,3": ([2, 3], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])}
    assert list(shard) == ["v", "w", "s", "_CHECKPOINTABLE_OBJECT_GRAPH", "p"]


V12 = [float(i) for i in range(12)]
P6 = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
OG = {"_CHECKPOINTABLE_OBJECT_GRAPH": {"": "str"}}
# Recorded from TF 2.21 (the strings unmeasured: no default session).
MAX_SHARD_CASES = {
    20: [
        {"v": {"3 4 0,1:0,4": ([1, 4], [0.0, 1.0, 2.0, 3.0])}},
        {"v": {"3 4 1,1:0,4": ([1, 4], [4.0, 5.0, 6.0, 7.0]), "3 4 2,1:0,1": ([1, 1], [8.0])}},
        {"v": {"3 4 2,1:1,3": ([1, 3], [9.0, 10.0, 11.0])}, "w": {"5 0,1": ([1], [0])}},
        {"w": {"5 1,2": ([2], [1, 2])}},
        {"w": {"5 3,2": ([2], [3, 4])}, "s": {"": ([], [3.0])}, **OG},
        {"p": {"4 3 2,1:0,3": ([1, 3], [0.0, 1.0, 2.0]), "4 3 3,1:0,2": ([1, 2], [3.0, 4.0])}},
        {"p": {"4 3 3,1:2,1": ([1, 1], [5.0])}},
    ],
    48: [
        {"v": {"3 4 0,3:0,4": ([3, 4], V12)}},
        {"w": {"5 0,5": ([5], [0, 1, 2, 3, 4])}, "s": {"": ([], [3.0])}, **OG},
        {"p": {"4 3 2,2:0,3": ([2, 3], P6)}},
    ],
    1000: [
        {"v": {"3 4 0,3:0,4": ([3, 4], V12)}, "w": {"5 0,5": ([5], [0, 1, 2, 3, 4])},
         "s": {"": ([], [3.0])}, **OG, "p": {"4 3 2,2:0,3": ([2, 3], P6)}},
    ],
}  # fmt: skip


@pytest.mark.parametrize("max_size", sorted(MAX_SHARD_CASES))
def test_max_shard_size_policy_shards_as_tf(max_size):
    shards = E.MaxShardSizePolicy(max_size)(_sharding_inputs())
    assert _shard_values(shards) == MAX_SHARD_CASES[max_size]


def test_max_shard_size_policy_refuses_an_element_larger_than_a_shard():
    # TF 2.21 never returns here (it opens new shards forever).
    with pytest.raises(ValueError, match="an element of w \\(8 bytes\\) is larger than"):
        E.MaxShardSizePolicy(7)([_shardable(tf.constant(np.arange(5, dtype=np.int64)), "w")])


class _Greeting(E.PythonState):
    def __init__(self):
        self.value = "hello"

    def serialize(self):
        return self.value

    def deserialize(self, string_value):
        self.value = string_value


def test_python_state_in_an_object_checkpoint_as_tf(tmp_path):
    v = tf.Variable(np.arange(12, dtype=np.float32).reshape(3, 4), name="v", use_resource=True)
    state = _Greeting()
    ckpt = tf.train.Checkpoint(v=v, ps=state)
    options = tf.train.CheckpointOptions(experimental_sharding_callback=E.MaxShardSizePolicy(20))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        # TF 2.21 graph mode: one data file whatever the policy; the parent directory
        # is made.
        path = ckpt.save(str(tmp_path / "sub" / "ck"), session=sess, options=options)
        assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == [
            "checkpoint",
            "ck-1.data-00000-of-00001",
            "ck-1.index",
        ]
        reader = tf.train.NewCheckpointReader(path)
        assert reader.get_tensor("ps/.ATTRIBUTES/py_state") == b"hello"
        from asyncflow.protos.trackable_object_graph_pb2 import TrackableObjectGraph

        proto = TrackableObjectGraph()
        proto.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
        (ps_node,) = [
            proto.nodes[c.node_id] for c in proto.nodes[0].children if c.local_name == "ps"
        ]
        assert [(a.name, a.full_name, a.checkpoint_key) for a in ps_node.attributes] == [
            ("py_state", "", "ps/.ATTRIBUTES/py_state")
        ]
        state.value = "changed"
        ckpt.restore(path).assert_consumed().run_restore_ops(sess)
        assert state.value == b"hello"  # bytes, as TF's graph mode restores it


# -- keras.export.ExportArchive ------------------------------------------------------------


def test_export_archive_errors_as_tf():
    inp = K.Input((3,))
    model = K.Model(inp, K.layers.Dense(2)(inp))
    archive = K.export.ExportArchive()
    with pytest.raises(ValueError, match="Invalid resource type. .* '<class 'int'>'"):
        archive.track(3)
    with pytest.raises(ValueError, match="has not yet been built"):
        archive.track(K.layers.Dense(2))
    archive.track(model)
    assert [v.name for v in archive.variables] == ["dense/kernel:0", "dense/bias:0"]
    with pytest.raises(ValueError, match="you must provide an `input_signature`"):
        archive.add_endpoint("x", lambda z: z)
    with pytest.raises(ValueError, match="No endpoints have been set yet"):
        archive.write_out("/nonexistent")
    spec = [tf.TensorSpec((None, 3), tf.float32)]
    archive.add_endpoint("serve", model.__call__, input_signature=spec)
    with pytest.raises(ValueError, match="Endpoint name 'serve' is already taken."):
        archive.add_endpoint("serve", model.__call__, input_signature=spec)
    with pytest.raises(ValueError, match="Expected `variables` to be a list/tuple/set"):
        archive.add_variable_collection("c", 3)
    with pytest.raises(ValueError, match="Found instead the following types: \\[<class 'int'>\\]"):
        archive.add_variable_collection("c", [3])


def test_export_archive_writes_a_servable_saved_model(tmp_path, capsys):
    inp = K.Input((3,))
    model = K.Model(inp, K.layers.Dense(2)(inp))
    model.set_weights([np.arange(6, dtype=np.float32).reshape(3, 2), np.ones(2, np.float32)])
    archive = K.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        "serve", model.__call__, input_signature=[tf.TensorSpec((None, 3), tf.float32)]
    )
    archive.write_out(str(tmp_path / "art"))
    out = capsys.readouterr().out
    assert out.startswith(f"Saved artifact at '{tmp_path / 'art'}'. The following endpoints")
    assert "* Endpoint 'serve'\n  args_0 (POSITIONAL_ONLY): TensorSpec(shape=(?, 3)" in out
    assert "Output Type:\n  TensorSpec(shape=(?, 2), dtype=tf.float32, name=None)" in out
    x = np.array([[1, 2, 3], [0, -1, 0.5]], np.float32)
    with tf.Graph().as_default(), tf.Session() as sess:
        meta = tf.saved_model.loader.load(sess, ["serve"], str(tmp_path / "art"))
        assert sorted(meta.signature_def) == ["serve", "serving_default"]
        sig = meta.signature_def["serving_default"]
        assert sig.method_name == "tensorflow/serving/predict"
        got = sess.run(sig.outputs["output_0"].name, {sig.inputs["args_0"].name: x})
    # TF 2.21's artifact gives these (and TF loads this one and gives them too).
    np.testing.assert_allclose(got, [[17.0, 23.0], [1.0, 0.5]])


def test_event_file_names_its_writer_as_tf(tmp_path):
    # TF 2.21's first event: file_version and source_metadata (38 bytes more than here
    # before), as the TensorBoard callback's file showed.
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.close()
    (path,) = tmp_path.iterdir()
    (first,) = list(tf.train.summary_iterator(str(path)))
    assert first.file_version == "brain.Event:2"
    assert first.source_metadata.writer == "tensorflow.core.util.events_writer"
