"""tf.feature_column's sequence columns and sequence_input_layer, against TF.

The layer's values, static shapes and variable names were recorded from TF 2.15.1's
`tf.keras.experimental.SequenceFeatures(columns)(features)` (which returns the pair TF1's
contrib sequence_input_layer did; its scope is `sequence_features/` where ours is TF1's
`sequence_input_layer/`).  Column reprs, parse specs and errors were recorded from
TF 2.21's tf.compat.v1.feature_column.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(60)
fc = tf.feature_column


def _sp(indices, values, shape, dtype=None):
    return tf.SparseTensor(indices, tf.constant(values, dtype=dtype), shape)


def _a():
    return _sp([[0, 0], [0, 1], [1, 0]], [1.0, 2.0, 3.0], [2, 2])


def _i():
    return _sp([[0, 0], [0, 1], [1, 0]], [1, 3, 2], [2, 2], tf.int64)


def _i3():
    return _sp([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0]], [1, 3, 2, 0], [2, 2, 2], tf.int64)


def _strings(key):
    return {key: lambda: _sp([[0, 0], [0, 1], [1, 0]], ["x", "q", "z"], [2, 2])}


def _table(n=8):
    return tf.constant_initializer(np.arange(float(n)).reshape(-1, 2))


def _num(key, **kw):
    return fc.sequence_numeric_column(key, **kw)


def _ident():
    return fc.sequence_categorical_column_with_identity("i", 4)


# (name, columns, features, static shape, values, lengths, variables) from TF 2.15.1.
LAYER_CASES = [
    ("numeric", lambda: [_num("a")], {"a": _a}, [2, 2, 1],
     [[[1], [2]], [[3], [0]]], [2, 1], []),
    ("empty_middle_row", lambda: [_num("a")],
     {"a": lambda: _sp([[0, 0], [0, 1], [2, 0]], [1.0, 2.0, 3.0], [3, 2])}, [3, 2, 1],
     [[[1], [2]], [[0], [0]], [[3], [0]]], [2, 0, 1], []),
    ("empty_last_rows", lambda: [_num("a")],
     {"a": lambda: _sp([[0, 0], [0, 1], [1, 0]], [1.0, 2.0, 3.0], [4, 3])}, [4, 3, 1],
     [[[1], [2], [0]], [[3], [0], [0]], [[0], [0], [0]], [[0], [0], [0]]], [2, 1, 0, 0], []),
    ("gap_counts_to_last_step", lambda: [_num("a")],
     {"a": lambda: _sp([[0, 0], [0, 2], [1, 1]], [1.0, 2.0, 3.0], [2, 4])}, [2, 4, 1],
     [[[1], [0], [2], [0]], [[0], [3], [0], [0]]], [3, 2], []),
    ("shape_2_default", lambda: [_num("b", shape=(2,), default_value=-1.0)],
     {"b": lambda: _sp([[0, 0], [0, 1], [0, 2], [1, 0], [1, 1]], [1.0, 2, 3, 4, 5], [2, 4])},
     [2, 2, 2], [[[1, 2], [3, -1]], [[4, 5], [-1, -1]]], [2, 1], []),
    ("shape_2x2_partial_step", lambda: [_num("c", shape=(2, 2))],
     {"c": lambda: _sp([[0, 0], [0, 1], [0, 2], [0, 3], [0, 4], [1, 0]],
                       [1.0, 2, 3, 4, 5, 6], [2, 8])},
     [2, 2, 4], [[[1, 2, 3, 4], [5, 0, 0, 0]], [[6, 0, 0, 0], [0, 0, 0, 0]]], [2, 1], []),
    ("rank3_input", lambda: [_num("b", shape=(2,), default_value=-1.0)],
     {"b": lambda: _sp([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0]], [1.0, 2, 3, 4], [2, 2, 2])},
     [2, 2, 2], [[[1, 2], [3, -1]], [[4, -1], [-1, -1]]], [2, 1], []),
    ("normalizer_on_sparse", lambda: [_num("d", normalizer_fn=lambda x: x * 2.0)], {"d": _a},
     [2, 2, 1], [[[2], [4]], [[6], [0]]], [2, 1], []),
    ("indicator", lambda: [fc.indicator_column(_ident())], {"i": _i}, [2, 2, 4],
     [[[0, 1, 0, 0], [0, 0, 0, 1]], [[0, 0, 1, 0], [0, 0, 0, 0]]], [2, 1], []),
    ("indicator_rank3", lambda: [fc.indicator_column(_ident())], {"i": _i3}, [2, 2, 4],
     [[[0, 1, 0, 1], [0, 0, 1, 0]], [[1, 0, 0, 0], [0, 0, 0, 0]]], [2, 1], []),
    ("embedding", lambda: [fc.embedding_column(_ident(), 2, initializer=_table())], {"i": _i},
     [2, 2, 2], [[[2, 3], [6, 7]], [[4, 5], [0, 0]]], [2, 1],
     ["sequence_input_layer/i_embedding/embedding_weights:0"]),
    ("embedding_sum_rank3",
     lambda: [fc.embedding_column(_ident(), 2, combiner="sum", initializer=_table())],
     {"i": _i3}, [2, 2, 2], [[[8, 10], [4, 5]], [[0, 1], [0, 0]]], [2, 1],
     ["sequence_input_layer/i_embedding/embedding_weights:0"]),
    ("hash_bucket",
     lambda: [fc.indicator_column(fc.sequence_categorical_column_with_hash_bucket("h", 5))],
     {"h": lambda: _sp([[0, 0], [0, 1], [1, 0]], ["a", "b", "c"], [2, 2])}, [2, 2, 5],
     [[[0, 0, 0, 0, 1], [0, 0, 1, 0, 0]], [[0, 0, 1, 0, 0], [0, 0, 0, 0, 0]]], [2, 1], []),
    ("vocabulary_list_oov",
     lambda: [fc.indicator_column(fc.sequence_categorical_column_with_vocabulary_list(
         "v", ["x", "y", "z"], num_oov_buckets=2))],
     _strings("v"), [2, 2, 5],
     [[[1, 0, 0, 0, 0], [0, 0, 0, 0, 1]], [[0, 0, 1, 0, 0], [0, 0, 0, 0, 0]]], [2, 1], []),
    ("vocabulary_file_default",
     lambda: [fc.indicator_column(fc.sequence_categorical_column_with_vocabulary_file(
         "vf", "vocab.txt", default_value=1))],
     _strings("vf"), [2, 2, 3], [[[1, 0, 0], [0, 1, 0]], [[0, 0, 1], [0, 0, 0]]], [2, 1], []),
    ("two_columns_by_name", lambda: [fc.indicator_column(_ident()), _num("a")],
     {"a": _a, "i": _i}, [2, 2, 5],
     [[[1, 0, 1, 0, 0], [2, 0, 0, 0, 1]], [[3, 0, 0, 1, 0], [0, 0, 0, 0, 0]]], [2, 1], []),
]  # fmt: skip


@pytest.fixture
def vocab_dir(tmp_path, monkeypatch):
    (tmp_path / "vocab.txt").write_text("x\ny\nz\n")
    monkeypatch.chdir(tmp_path)


def _layer(columns, features):
    return fc.sequence_input_layer({k: make() for k, make in features.items()}, columns)


@pytest.mark.parametrize(
    "name,columns,features,shape,values,lengths,variables",
    LAYER_CASES,
    ids=[c[0] for c in LAYER_CASES],
)
def test_sequence_input_layer_as_tf(
    vocab_dir, name, columns, features, shape, values, lengths, variables
):
    with tf.Graph().as_default():
        x, length = _layer(columns(), features)
        assert x.shape.as_list() == shape
        assert (x.dtype, length.dtype) == (tf.float32, tf.int64)
        assert length.shape.as_list() == [None]
        assert [v.name for v in tf.global_variables()] == variables
        with tf.Session() as s:
            s.run([tf.global_variables_initializer(), tf.tables_initializer()])
            got_x, got_len = s.run([x, length])
    np.testing.assert_array_equal(got_x, np.array(values, np.float32))
    assert got_len.tolist() == lengths


def test_lengths_that_differ_fail_when_run():
    with tf.Graph().as_default():
        wrong = _sp([[0, 0], [1, 0], [1, 1]], [1, 3, 2], [2, 2], tf.int64)
        x, length = fc.sequence_input_layer(
            {"a": _a(), "i": wrong}, [_num("a"), fc.indicator_column(_ident())]
        )
        with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError) as e:
            s.run(length)
    # TF 2.15.1 (its scope sequence_features/): the lengths' names and values.
    assert (
        "[Condition x == y did not hold element-wise:] [x (sequence_input_layer/a/"
        "sequence_length:0) = ] [2 1] [y (sequence_input_layer/i_indicator/sequence_length:0)"
        " = ] [1 2]"
    ) in str(e.value)


# Errors building the layer, TF 2.15.1's words (its classes' module paths are TF's).
def _items_error(given):
    return (
        "Items of feature_columns must be a <class 'asyncflow.feature_column_kinds."
        "SequenceDenseColumn'>. You can wrap a categorical column with an embedding_column or "
        f"indicator_column. Given: {given}"
    )


def _not_sequence_error(name, kind, given):
    return (
        f"In indicator_column: {name}. categorical_column must be of type "
        "SequenceCategoricalColumn to use SequenceFeatures. Suggested fix: Use one of "
        f"sequence_categorical_column_with_*. Given (type <class 'asyncflow.feature_column_kinds."
        f"{kind}'>): {given}"
    )


IDENT = "IdentityCategoricalColumn(key='i', number_buckets=4, default_value=None)"
LAYER_ERRORS = [
    ("non_sequence_numeric", lambda: [fc.numeric_column("a")], {"a": _a}, ValueError,
     _items_error("NumericColumn(key='a', shape=(1,), default_value=None, dtype=tf.float32, "
                  "normalizer_fn=None)")),
    ("raw_sequence_categorical", lambda: [_ident()], {"i": _i}, ValueError,
     _items_error(f"SequenceCategoricalColumn(categorical_column={IDENT})")),
    ("indicator_of_non_sequence",
     lambda: [fc.indicator_column(fc.categorical_column_with_identity("i", 4))], {"i": _i},
     ValueError, _not_sequence_error("i_indicator", "IdentityCategoricalColumn", IDENT)),
    ("indicator_of_weighted_sequence",
     lambda: [fc.indicator_column(fc.weighted_categorical_column(_ident(), "w"))],
     {"i": _i, "w": _a}, ValueError,
     _not_sequence_error(
         "i_weighted_by_w_indicator", "WeightedCategoricalColumn",
         f"WeightedCategoricalColumn(categorical_column=SequenceCategoricalColumn("
         f"categorical_column={IDENT}), weight_feature_key='w', dtype=tf.float32)")),
    ("dense_feature", lambda: [_num("a")], {"a": lambda: tf.constant([[1.0, 2.0]])},
     TypeError, "Input must be a SparseTensor."),
]  # fmt: skip


@pytest.mark.parametrize(
    "name,columns,features,error,message", LAYER_ERRORS, ids=[c[0] for c in LAYER_ERRORS]
)
def test_sequence_input_layer_errors_as_tf(name, columns, features, error, message):
    with tf.Graph().as_default(), pytest.raises(error) as e:
        _layer(columns(), features)
    assert str(e.value) == message


def test_int_numeric_column_with_float_default_fails_at_build_as_tf():
    # TF 2.15.1 raises TypeError (SparseToDense's default_value 0.0 for int64 values).
    with tf.Graph().as_default(), pytest.raises(TypeError, match="Expected int64"):
        _layer([_num("e", dtype=tf.int64)], {"e": lambda: _sp([[0, 0]], [4], [2, 3], tf.int64)})


def test_shared_embedding_in_sequence_layer_is_an_embedding():
    # TF1's shared columns take sequence ids in TF1's sequence_input_layer (Keras'
    # SequenceFeatures refuses them): each gives what an embedding_column would.
    cols = fc.shared_embedding_columns(
        [_ident(), fc.sequence_categorical_column_with_identity("j", 4)], 2, initializer=_table()
    )
    with tf.Graph().as_default():
        x, length = _layer(cols, {"i": _i, "j": _i})
        assert [v.name for v in tf.global_variables()] == [
            "sequence_input_layer/i_j_shared_embedding/embedding_weights:0"
        ]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got_x, got_len = s.run([x, length])
    np.testing.assert_array_equal(got_x, [[[2, 3, 2, 3], [6, 7, 6, 7]], [[4, 5, 4, 5], [0] * 4]])
    assert got_len.tolist() == [2, 1]


def test_embedding_trains_through_the_layer():
    with tf.Graph().as_default():
        x, _ = _layer([fc.embedding_column(_ident(), 2, initializer=_table())], {"i": _i})
        step = tf.train.GradientDescentOptimizer(1.0).minimize(tf.reduce_sum(x))
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(step)
            (table,) = s.run(tf.global_variables())
    # Rows 1, 2, 3 are each looked up once (mean of one id): each loses 1.
    np.testing.assert_array_equal(table, [[0, 1], [1, 2], [3, 4], [5, 6]])


# -- the columns themselves (TF 2.21 compat.v1) -----------------------------------------

REPRS = [
    (lambda: _num("a"),
     "SequenceNumericColumn(key='a', shape=(1,), default_value=0.0, dtype=tf.float32, "
     "normalizer_fn=None)"),
    (lambda: _num("a", shape=[2, 3]),
     "SequenceNumericColumn(key='a', shape=(2, 3), default_value=0.0, dtype=tf.float32, "
     "normalizer_fn=None)"),
    (lambda: _num("a", shape=3, default_value=None, dtype=tf.int64),
     "SequenceNumericColumn(key='a', shape=(3,), default_value=None, dtype=tf.int64, "
     "normalizer_fn=None)"),
    # (TF checks neither key nor default_value.)
    (lambda: _num(1, default_value="x"),
     "SequenceNumericColumn(key=1, shape=(1,), default_value='x', dtype=tf.float32, "
     "normalizer_fn=None)"),
    (lambda: fc.sequence_categorical_column_with_identity("a", 3, default_value=2),
     "SequenceCategoricalColumn(categorical_column=IdentityCategoricalColumn(key='a', "
     "number_buckets=3, default_value=2))"),
    (lambda: fc.sequence_categorical_column_with_hash_bucket("a", 3, dtype=tf.int32),
     "SequenceCategoricalColumn(categorical_column=HashedCategoricalColumn(key='a', "
     "hash_bucket_size=3, dtype=tf.int32))"),
    (lambda: fc.sequence_categorical_column_with_vocabulary_list("a", [1, 2, 3], dtype=tf.int32),
     "SequenceCategoricalColumn(categorical_column=VocabularyListCategoricalColumn(key='a', "
     "vocabulary_list=(1, 2, 3), dtype=tf.int32, default_value=-1, num_oov_buckets=0))"),
    (lambda: fc.sequence_categorical_column_with_vocabulary_file("vf", "vocab.txt",
                                                                 num_oov_buckets=2),
     "SequenceCategoricalColumn(categorical_column=VocabularyFileCategoricalColumn(key='vf', "
     "vocabulary_file='vocab.txt', vocabulary_size=3, num_oov_buckets=2, dtype=tf.string, "
     "default_value=-1, file_format=None))"),
    (lambda: fc.sequence_categorical_column_with_vocabulary_file(
        "a", "vocab.txt", vocabulary_size=2, num_oov_buckets=1, dtype=tf.int64),
     "SequenceCategoricalColumn(categorical_column=VocabularyFileCategoricalColumn(key='a', "
     "vocabulary_file='vocab.txt', vocabulary_size=2, num_oov_buckets=1, dtype=tf.int64, "
     "default_value=-1, file_format=None))"),
    (lambda: fc.indicator_column(_ident()),
     f"IndicatorColumn(categorical_column=SequenceCategoricalColumn(categorical_column="
     f"{IDENT}))"),
    (lambda: fc.crossed_column([_ident(), "x"], 10),
     f"CrossedColumn(keys=(SequenceCategoricalColumn(categorical_column={IDENT}), 'x'), "
     "hash_bucket_size=10, hash_key=None)"),
]  # fmt: skip


@pytest.mark.parametrize("make,expected", REPRS)
def test_column_reprs_as_tf(vocab_dir, make, expected):
    assert repr(make()) == expected


def test_column_fields_names_and_specs_as_tf():
    n, i = _num("a"), _ident()
    assert n._fields == ("key", "shape", "default_value", "dtype", "normalizer_fn")
    assert i._fields == ("categorical_column",)
    assert (n.name, n.shape, n.default_value) == ("a", (1,), 0.0)
    assert (i.name, i.num_buckets, i._num_buckets) == ("i", 4, 4)
    assert not hasattr(i, "key")
    assert repr(i.parse_example_spec) == "{'i': VarLenFeature(dtype=tf.int64)}"
    assert repr(i._parse_example_spec) == "{'i': VarLenFeature(dtype=tf.int64)}"
    assert repr(_num("a", dtype=tf.int64).parse_example_spec) == (
        "{'a': VarLenFeature(dtype=tf.int64)}"
    )
    assert fc.indicator_column(i).name == "i_indicator"
    assert fc.embedding_column(i, 2).name == "i_embedding"
    assert _num("a") == _num("a") and hash(_num("a")) == hash(_num("a"))
    assert _ident() == i


def test_make_parse_example_spec_as_tf(vocab_dir):
    cols = [
        _ident(),
        fc.sequence_categorical_column_with_hash_bucket("h", 3, dtype=tf.int64),
        fc.sequence_categorical_column_with_vocabulary_file("vf", "vocab.txt"),
        fc.weighted_categorical_column(fc.sequence_categorical_column_with_identity("k", 2), "w"),
        fc.embedding_column(fc.sequence_categorical_column_with_identity("e", 2), 2),
    ]
    assert repr(fc.make_parse_example_spec(cols)) == (
        "{'i': VarLenFeature(dtype=tf.int64), 'h': VarLenFeature(dtype=tf.int64), "
        "'vf': VarLenFeature(dtype=tf.string), 'k': VarLenFeature(dtype=tf.int64), "
        "'w': VarLenFeature(dtype=tf.float32), 'e': VarLenFeature(dtype=tf.int64)}"
    )
    # TF1's make_parse_example_spec takes only TF1 columns: a sequence numeric is not.
    with pytest.raises(ValueError) as e:
        fc.make_parse_example_spec([_num("a")])
    assert str(e.value) == (
        "All feature_columns must be _FeatureColumn instances. Given: SequenceNumericColumn("
        "key='a', shape=(1,), default_value=0.0, dtype=tf.float32, normalizer_fn=None)"
    )


ARG_ERRORS = [
    (lambda: _num("a", shape=(0,)), ValueError,
     "shape dimensions must be greater than 0. shape: (0,), key: a"),
    (lambda: _num("a", shape=(1.5,)), TypeError,
     "shape dimensions must be integer. shape: (1.5,), key: a"),
    (lambda: _num("a", dtype=tf.string), ValueError,
     "dtype must be convertible to float. dtype: <dtype: 'string'>, key: a"),
    (lambda: _num("a", dtype=tf.bool), ValueError,
     "dtype must be convertible to float. dtype: <dtype: 'bool'>, key: a"),
    (lambda: _num("a", normalizer_fn=3), TypeError, "normalizer_fn must be a callable. Given: 3"),
    (lambda: fc.sequence_categorical_column_with_identity("a", 0), ValueError,
     "num_buckets 0 < 1, column_name a"),
    (lambda: fc.sequence_categorical_column_with_identity("a", 3, default_value=5), ValueError,
     "default_value 5 not in range [0, 3), column_name a"),
    (lambda: fc.sequence_categorical_column_with_identity(3, 3), ValueError,
     "key must be a string. Got: type <class 'int'>. Given key: 3."),
    (lambda: fc.sequence_categorical_column_with_hash_bucket("a", 0), ValueError,
     "hash_bucket_size must be at least 1. hash_bucket_size: 0, key: a"),
    (lambda: fc.sequence_categorical_column_with_hash_bucket("a", 3, dtype=tf.float32),
     ValueError, "column_name: a dtype must be string or integer. dtype: <dtype: 'float32'>."),
    (lambda: fc.sequence_categorical_column_with_vocabulary_list("a", []), ValueError,
     "vocabulary_list [] must be non-empty, column_name: a"),
    (lambda: fc.sequence_categorical_column_with_vocabulary_list("a", ["a", "a"]), ValueError,
     "Duplicate keys in vocabulary_list ['a', 'a'], column_name: a"),
    (lambda: fc.sequence_categorical_column_with_vocabulary_list(
        "a", ["a"], default_value=1, num_oov_buckets=2), ValueError,
     "Can't specify both num_oov_buckets and default_value in a."),
    (lambda: fc.sequence_categorical_column_with_vocabulary_file("a", None), ValueError,
     "Missing vocabulary_file in a."),
    (lambda: fc.sequence_categorical_column_with_vocabulary_file("a", "/nonexist/x.txt"),
     ValueError, "vocabulary_file in a does not exist."),
    (lambda: fc.bucketized_column(_num("a"), [1.0]), ValueError,
     "source_column must be a column generated with numeric_column(). Given: "
     "SequenceNumericColumn(key='a', shape=(1,), default_value=0.0, dtype=tf.float32, "
     "normalizer_fn=None)"),
    (lambda: fc.indicator_column(_num("a")), ValueError,
     "Unsupported input type. Input must be a CategoricalColumn. Given: SequenceNumericColumn("
     "key='a', shape=(1,), default_value=0.0, dtype=tf.float32, normalizer_fn=None)"),
]  # fmt: skip


@pytest.mark.parametrize("make,error,message", ARG_ERRORS)
def test_argument_errors_as_tf(make, error, message):
    with pytest.raises(error) as e:
        make()
    assert str(e.value) == message


def _features():
    return {"a": _sp([[0, 0]], [1.0], [2, 2]), "i": _sp([[0, 0]], [1], [2, 2], tf.int64)}


def _il_sequence_error(kind, name, layer, other):
    return (
        f"In {kind}: {name}. categorical_column must not be of type _SequenceCategoricalColumn. "
        f"Suggested fix A: If you wish to use {layer}, use a non-sequence "
        f"categorical_column_with_*. Suggested fix B: If you wish to create sequence input, use "
        f"{other} instead of {layer}. Given (type <class 'asyncflow.feature_column_sequence."
        f"SequenceCategoricalColumn'>): SequenceCategoricalColumn(categorical_column={IDENT})"
    )


NOT_FC = (
    "Items of feature_columns must be a _FeatureColumn. Given (type <class "
    "'asyncflow.feature_column_sequence.SequenceNumericColumn'>): SequenceNumericColumn("
    "key='a', shape=(1,), default_value=0.0, dtype=tf.float32, normalizer_fn=None)."
)
TF1_MODEL_ERRORS = [
    (fc.input_layer, lambda: [_num("a")], NOT_FC),
    (fc.input_layer, lambda: [fc.numeric_column("a"), _num("a")], NOT_FC),
    (fc.linear_model, lambda: [_num("a")], NOT_FC),
    (fc.input_layer, lambda: [fc.indicator_column(_ident())],
     _il_sequence_error("indicator_column", "i_indicator", "DenseFeatures", "SequenceFeatures")),
    (fc.input_layer, lambda: [fc.embedding_column(_ident(), 2)],
     _il_sequence_error("embedding_column", "i_embedding", "DenseFeatures", "SequenceFeatures")),
    (fc.input_layer,
     lambda: fc.shared_embedding_columns(
         [_ident(), fc.sequence_categorical_column_with_identity("j", 4)], 2),
     _il_sequence_error("embedding_column", "i_shared_embedding", "input_layer",
                        "sequence_input_layer")),
]  # fmt: skip


@pytest.mark.parametrize("model,columns,message", TF1_MODEL_ERRORS)
def test_tf1_models_refuse_sequence_columns_as_tf(model, columns, message):
    with tf.Graph().as_default(), pytest.raises(ValueError) as e:
        features = dict(_features(), j=_sp([[0, 0]], [1], [2, 2], tf.int64))
        model(features, columns())
    assert str(e.value) == message


def test_linear_model_takes_a_sequence_categorical_column_as_tf():
    with tf.Graph().as_default():
        y = fc.linear_model(_features(), [_ident()])
        assert y.shape.as_list() == [2, 1]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            assert s.run(y).tolist() == [[0.0], [0.0]]


def test_shared_embedding_mixes_sequence_and_plain_of_one_kind_as_tf():
    cols = fc.shared_embedding_columns([_ident(), fc.categorical_column_with_identity("j", 4)], 2)
    assert [c.shared_embedding_collection_name for c in cols] == ["i_j_shared_embedding"] * 2
    assert [c.name for c in cols] == ["i_shared_embedding", "j_shared_embedding"]


# -- more of the layer, as TF 2.15.1's SequenceFeatures -----------------------------------


def test_layer_build_errors_as_tf():
    a, b = _num("a"), _num("b")
    with tf.Graph().as_default():
        one = _sp([[0, 0]], [1.0], [2, 2])
        with pytest.raises(ValueError) as e:
            fc.sequence_input_layer({"a": one, "b": _sp([[0, 0]], [1.0], [3, 2])}, [a, b])
        assert str(e.value) == (
            "Batch size (first dimension) of each feature must be same. Batch size of columns "
            "(a, b): (2, 3)"
        )
        with pytest.raises(ValueError, match=r"^Feature b is not in features dictionary\.$"):
            fc.sequence_input_layer({"a": one}, [a, b])
        with pytest.raises(ValueError, match=r"^feature_columns must not be empty\.$"):
            fc.sequence_input_layer({"a": one}, [])
        with pytest.raises(ValueError, match=r"^Duplicate feature column name found for col"):
            fc.sequence_input_layer({"a": one}, [a, _num("a")])


def test_layer_input_kinds_and_static_shapes_as_tf():
    a = _num("a")
    with tf.Graph().as_default():
        rank1 = fc.sequence_input_layer({"a": _sp([[0], [1]], [1.0, 2.0], [3])}, [a])
        value = fc.sequence_input_layer({"a": tf.SparseTensorValue([[0, 0]], [1.0], [2, 2])}, [a])
        ph = fc.sequence_input_layer({"a": tf.sparse_placeholder(tf.float32)}, [a])
        shapes = [[t.shape.as_list() for t in pair] for pair in (rank1, value, ph)]
        assert shapes == [[[3, 1, 1], [None]], [[2, 2, 1], [None]], [[None, None, 1], [None]]]
        with tf.Session() as s:
            x, length = s.run(rank1)
    np.testing.assert_array_equal(x, [[[1.0]], [[2.0]], [[0.0]]])
    assert length.tolist() == [1, 1, 0]


def test_layer_variables_collections():
    i = _ident()
    with tf.Graph().as_default():
        fc.sequence_input_layer(
            {"i": _i()}, [fc.embedding_column(i, 2)], weight_collections=["mine"], trainable=False
        )
        # TF 2.15.1 (trainable=False): 0 trainable, 1 global, no model variables.
        assert len(tf.trainable_variables()) == 0
        assert len(tf.global_variables()) == 1
        assert tf.get_collection("mine") == tf.global_variables()
        assert tf.model_variables() == []


def test_embedding_starts_from_a_checkpoint(tmp_path):
    table = np.arange(8.0, dtype=np.float32).reshape(4, 2) * 10
    with tf.Graph().as_default():
        tf.Variable(table, name="emb")
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            path = tf.train.Saver().save(s, str(tmp_path / "ckpt"))
    column = fc.embedding_column(_ident(), 2, ckpt_to_load_from=path, tensor_name_in_ckpt="emb")
    with tf.Graph().as_default():
        x, _ = _layer([column], {"i": _i})
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got = s.run(x)
    np.testing.assert_array_equal(got, [[[20, 30], [60, 70]], [[40, 50], [0, 0]]])
