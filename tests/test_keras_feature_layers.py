"""tf.keras.layers.DenseFeatures and tf.keras.experimental.SequenceFeatures, and a
Sequential model fed a features dict, against TF 2.21 (tf_keras, graph mode): names,
shapes, collections and values below were recorded from it running the same code."""

import numpy as np
import pytest

import asyncflow as tf

fc = tf.feature_column


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


def test_dense_and_sequence_features_as_tf():
    age = fc.numeric_column("age")
    city = fc.categorical_column_with_vocabulary_list("city", ["a", "b", "c"])
    table = tf.constant_initializer([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    cols = [age, fc.embedding_column(city, 2, initializer=table), fc.indicator_column(city)]
    features = {"age": tf.constant([[30.0], [40.0]]), "city": tf.constant([["b"], ["c"]])}
    layer = tf.keras.layers.DenseFeatures(cols)
    out = layer(features)
    tf.keras.layers.DenseFeatures(cols, name="mine")(features)
    assert (type(layer).__name__, layer.name, out.name) == (
        "DenseFeatures",
        "dense_features",
        "dense_features/concat:0",
    )
    assert out.shape.as_list() == [2, 6]
    assert [v.name for v in layer.weights] == ["dense_features/city_embedding/embedding_weights:0"]
    assert [v.name for v in layer.trainable_weights] == [v.name for v in layer.weights]
    assert [v.name for v in tf.global_variables()] == [
        "dense_features/city_embedding/embedding_weights:0",
        "mine/city_embedding/embedding_weights:0",
    ]
    assert tf.get_collection(tf.GraphKeys.MODEL_VARIABLES) == []
    seq = fc.sequence_categorical_column_with_identity("ids", 5)
    emb = fc.embedding_column(
        seq, 3, initializer=tf.constant_initializer(np.arange(15).reshape(5, 3))
    )
    sf = tf.keras.experimental.SequenceFeatures([emb])
    sp = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([1, 2, 4], tf.int64), [2, 2])
    dense, lengths = sf({"ids": sp})
    assert (type(sf).__name__, sf.name) == ("SequenceFeatures", "sequence_features")
    assert dense.shape.as_list() == [2, 2, 3] and lengths.dtype == tf.int64
    assert [v.name for v in sf.weights] == ["sequence_features/ids_embedding/embedding_weights:0"]
    with tf.Session() as s:
        s.run([tf.global_variables_initializer(), tf.tables_initializer()])
        got_out, got_dense, got_lengths = s.run([out, dense, lengths])
    np.testing.assert_array_equal(got_out, [[30, 3, 4, 0, 1, 0], [40, 5, 6, 0, 0, 1]])
    np.testing.assert_array_equal(got_dense, [[[3, 4, 5], [6, 7, 8]], [[12, 13, 14], [0, 0, 0]]])
    np.testing.assert_array_equal(got_lengths, [2, 1])


def test_feature_layer_errors():
    seq = fc.sequence_categorical_column_with_identity("ids", 5)
    with pytest.raises(ValueError, match="Items of feature_columns must be a _DenseColumn"):
        tf.keras.layers.DenseFeatures([seq])
    with pytest.raises(ValueError, match="feature_columns must not be empty"):
        tf.keras.layers.DenseFeatures([])
    layer = tf.keras.layers.DenseFeatures([fc.numeric_column("a")])
    with pytest.raises(ValueError, match="We expected a dictionary here"):
        layer(tf.constant([[1.0]]))


def test_sequential_fed_a_features_dict_trains_as_tf():
    tf.set_random_seed(1)
    cols = [fc.numeric_column("a"), fc.numeric_column("b")]
    model = tf.keras.Sequential(
        [tf.keras.layers.DenseFeatures(cols), tf.keras.layers.Dense(1, kernel_initializer="ones")]
    )
    model.compile("sgd", "mse")
    data = {"a": np.ones(8, np.float32), "b": np.zeros(8, np.float32)}
    ds = tf.data.Dataset.from_tensor_slices((data, np.ones(8, np.float32))).batch(4).repeat()
    history = model.fit(ds, epochs=2, steps_per_epoch=2, verbose=0)
    assert history.history == {"loss": [0.0, 0.0]}
    got = model.predict(
        {"a": np.array([1.0, 2.0], np.float32), "b": np.array([0.0, 1.0], np.float32)}
    )
    np.testing.assert_allclose(got, [[1.0], [3.0]])
    assert [w.name for w in model.weights] == [
        "sequential/dense/kernel:0",
        "sequential/dense/bias:0",
    ]


def test_sequential_built_from_data_scopes_its_layers_as_tf():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(np.ones((4, 2), np.float32), np.ones((4, 1), np.float32), verbose=0)
    assert [w.name for w in model.weights] == [
        "sequential/dense/kernel:0",
        "sequential/dense/bias:0",
    ]
    assert model.inputs[0].name == "input_1:0"
