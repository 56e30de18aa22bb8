"""`tf.feature_column` (TF1's `tf.compat.v1.feature_column`): structured inputs as tensors.

    age = fc.numeric_column("age")
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green"])
    net = fc.input_layer(features, [age, fc.embedding_column(color, 8)])

A column says how one feature (or a few) of the `features` dict becomes a tensor.
Categorical columns give int64 ids as a SparseTensor [batch, n] (and, for a weighted
column, a float SparseTensor of weights); dense columns give [batch, ...] floats.
`input_layer` concatenates dense columns, `linear_model` sums a weighted slice per
column plus a bias.

Invariants, as TF 2.21's:
- Columns are namedtuples (equal, hashable, TF's repr); their `name` orders them: both
  models walk columns sorted by name, each under a variable scope of that name.
- A dense raw feature of rank 1 is read as [batch, 1]; a dense string or int feature
  given to a categorical column becomes sparse, dropping '' (strings) or -1 (ints).
- Variables: `<model>/<column name>/weights`, `<model>/bias_weights`,
  `input_layer/<column name>/embedding_weights`, shared embeddings under the sorted
  names joined by '_' plus '_shared_embedding'.

The sequence columns and `sequence_input_layer` are in feature_column_sequence.py.

Not as TF: a crossed column over dense features
loses the static batch size TF keeps ([?, n] for its [2, n]); op names inside a lookup
(not the models' outputs, not the variables) may differ.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dtypes, var_scope
from asyncflow import graph as ops
from asyncflow.feature_column_kinds import (
    BucketizedColumn,
    CrossedColumn,
    EmbeddingColumn,
    HashedCategoricalColumn,
    IdentityCategoricalColumn,
    IndicatorColumn,
    NumericColumn,
    VocabularyFileCategoricalColumn,
    VocabularyListCategoricalColumn,
    WeightedCategoricalColumn,
    _Builder,
    _Categorical,
    _check_key,
    _check_string_or_int,
    _Column,
    _Ctx,
    _model_collections,
    _SharedEmbeddingColumn,
)
from asyncflow.feature_column_sequence import (
    SequenceCategoricalColumn,
    sequence_input_layer,
    sequence_numeric_column,
)
from asyncflow.nn_sparse_extras import safe_embedding_lookup_sparse
from asyncflow.ops import (
    array_ops,
    init_ops,
    manip_ops,
    math_ops,
    matmul_ops,
    nn_ops,
    sparse_ops,
)
from asyncflow.train import checkpoint_utils

__all__ = [
    "bucketized_column",
    "categorical_column_with_hash_bucket",
    "categorical_column_with_identity",
    "categorical_column_with_vocabulary_file",
    "categorical_column_with_vocabulary_list",
    "crossed_column",
    "embedding_column",
    "indicator_column",
    "input_layer",
    "linear_model",
    "make_parse_example_spec",
    "numeric_column",
    "sequence_categorical_column_with_hash_bucket",
    "sequence_categorical_column_with_identity",
    "sequence_categorical_column_with_vocabulary_file",
    "sequence_categorical_column_with_vocabulary_list",
    "sequence_input_layer",
    "sequence_numeric_column",
    "shared_embedding_columns",
    "weighted_categorical_column",
]


# -- making columns ----------------------------------------------------------------------


def numeric_column(key, shape=(1,), default_value=None, dtype=dtypes.float32, normalizer_fn=None):
    """A dense feature of `shape` per example, as float32 (after `normalizer_fn`).

    Raises:
      ValueError: a non-string key, a bad shape or default_value, a non-numeric dtype.
      TypeError: normalizer_fn given but not callable.
    """
    _check_key(key)
    shape = _check_shape(shape, key)
    dtype = dtypes.as_dtype(dtype)
    if not (dtype.is_integer or dtype.is_floating):
        raise ValueError(f"dtype must be convertible to float. dtype: {dtype}, key: {key}")
    default_value = _check_default_value(shape, default_value, dtype, key)
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"normalizer_fn must be a callable. Given: {normalizer_fn}")
    return NumericColumn(key, shape, default_value, dtype, normalizer_fn)


def _check_shape(shape, key):
    if isinstance(shape, int):
        shape = [shape]
    shape = tuple(shape)
    for d in shape:
        if not isinstance(d, int | np.integer):
            raise TypeError(f"shape dimensions must be integer. shape: {shape}, key: {key}")
        if d < 1:
            raise ValueError(
                f"shape dimensions must be greater than 0. shape: {shape}, key: {key}"
            )
    return tuple(int(d) for d in shape)


def _check_default_value(shape, default_value, dtype, key):
    """TF's rule: an int, or a float for a float column, fills `shape`; a (nested)
    sequence or array must have `shape` and hold ints, or floats for a float column."""
    if default_value is None:
        return None
    if isinstance(default_value, int) or (isinstance(default_value, float) and dtype.is_floating):
        return _nested_tuple(np.full(shape, default_value, dtype=object).tolist())
    if callable(getattr(default_value, "tolist", None)):  # a NumPy array or scalar
        default_value = default_value.tolist()
    if isinstance(default_value, list | tuple):
        if not _has_shape(default_value, shape):
            raise ValueError(
                "The shape of default_value must be equal to given shape. default_value: "
                f"{default_value}, shape: {shape}, key: {key}"
            )
        flat = _flat(default_value)
        if all(isinstance(v, int) for v in flat) or (
            dtype.is_floating and all(isinstance(v, int | float) for v in flat)
        ):
            return _nested_tuple(default_value)
    raise TypeError(
        f"default_value must be compatible with dtype. default_value: {default_value}, "
        f"dtype: {dtype}, key: {key}"
    )


def _has_shape(value, shape) -> bool:
    if not shape:
        return not isinstance(value, list | tuple)
    return (
        isinstance(value, list | tuple)
        and len(value) == shape[0]
        and all(_has_shape(v, shape[1:]) for v in value)
    )


def _flat(value) -> list:
    if isinstance(value, list | tuple):
        return [x for v in value for x in _flat(v)]
    return [value]


def _nested_tuple(v):
    return tuple(_nested_tuple(x) for x in v) if isinstance(v, list | tuple) else v


def bucketized_column(source_column, boundaries):
    """`source_column`'s values as bucket ids (i where boundaries[i-1] <= x <
    boundaries[i]); one-hot when used densely.

    Raises:
      ValueError: source not a numeric_column of one dimension, or boundaries empty or
        not strictly increasing.
    """
    if not isinstance(source_column, NumericColumn):
        raise ValueError(
            "source_column must be a column generated with numeric_column(). "
            f"Given: {source_column}"
        )
    if len(source_column.shape) > 1:
        raise ValueError(f"source_column must be one-dimensional column. Given: {source_column}")
    if not boundaries:
        raise ValueError("boundaries must not be empty.")
    if not isinstance(boundaries, list | tuple) or any(
        a >= b for a, b in zip(boundaries[:-1], boundaries[1:], strict=True)
    ):
        raise ValueError("boundaries must be a sorted list.")
    return BucketizedColumn(source_column, tuple(boundaries))


def categorical_column_with_vocabulary_list(
    key, vocabulary_list, dtype=None, default_value=-1, num_oov_buckets=0
):
    """Ids from a vocabulary: each value's index in `vocabulary_list`; an unknown value
    gets `default_value` or, with num_oov_buckets, a hashed id after the vocabulary.

    Raises:
      ValueError: an empty or duplicated vocabulary, both default_value and
        num_oov_buckets, a negative num_oov_buckets, a dtype not the vocabulary's kind.
    """
    if vocabulary_list is None or len(vocabulary_list) < 1:
        raise ValueError(
            f"vocabulary_list {vocabulary_list} must be non-empty, column_name: {key}"
        )
    if len(set(vocabulary_list)) != len(vocabulary_list):
        raise ValueError(
            f"Duplicate keys in vocabulary_list {vocabulary_list}, column_name: {key}"
        )
    vocab_dtype = dtypes.as_dtype(np.array(vocabulary_list).dtype)
    if num_oov_buckets:
        if default_value != -1:
            raise ValueError(f"Can't specify both num_oov_buckets and default_value in {key}.")
        if num_oov_buckets < 0:
            raise ValueError(f"Invalid num_oov_buckets {num_oov_buckets} in {key}.")
    _check_string_or_int(vocab_dtype, f"column_name: {key} vocabulary")
    if dtype is None:
        dtype = vocab_dtype
    else:
        dtype = dtypes.as_dtype(dtype)
        _check_string_or_int(dtype, f"column_name: {key}")
        if dtype.is_integer != vocab_dtype.is_integer:
            raise ValueError(
                f"dtype {dtype} and vocabulary dtype {vocab_dtype} do not match, "
                f"column_name: {key}"
            )
    _check_key(key)
    return VocabularyListCategoricalColumn(
        key, tuple(vocabulary_list), dtype, default_value, num_oov_buckets
    )


def categorical_column_with_vocabulary_file(
    key,
    vocabulary_file,
    vocabulary_size=None,
    num_oov_buckets=0,
    default_value=None,
    dtype=dtypes.string,
):
    """Ids from a vocabulary file, one entry a line (line number = id); its size is
    counted from the file when not given.

    Raises:
      ValueError: no file, a size < 1, both default_value and num_oov_buckets.
    """
    from asyncflow import gfile

    if not vocabulary_file:
        raise ValueError(f"Missing vocabulary_file in {key}.")
    if vocabulary_size is None:
        if not gfile.Exists(vocabulary_file):
            raise ValueError(f"vocabulary_file in {key} does not exist.")
        with gfile.GFile(vocabulary_file, mode="rb") as f:
            vocabulary_size = sum(1 for _ in f)
    if vocabulary_size < 1:
        raise ValueError(f"Invalid vocabulary_size in {key}.")
    if num_oov_buckets:
        if default_value is not None:
            raise ValueError(f"Can't specify both num_oov_buckets and default_value in {key}.")
        if num_oov_buckets < 0:
            raise ValueError(f"Invalid num_oov_buckets {num_oov_buckets} in {key}.")
    dtype = dtypes.as_dtype(dtype)
    _check_string_or_int(dtype, f"column_name: {key} vocabulary")
    _check_key(key)
    return VocabularyFileCategoricalColumn(
        key, vocabulary_file, vocabulary_size, num_oov_buckets or 0, dtype,
        -1 if default_value is None else default_value, None,
    )  # fmt: skip


def categorical_column_with_identity(key, num_buckets, default_value=None):
    """Ids that are the (integer) values themselves, in [0, num_buckets); others get
    `default_value` or, without one, fail the step (InvalidArgumentError).

    Raises:
      ValueError: num_buckets < 1 or default_value out of range.
    """
    if num_buckets < 1:
        raise ValueError(f"num_buckets {num_buckets} < 1, column_name {key}")
    if default_value is not None and (default_value < 0 or default_value >= num_buckets):
        raise ValueError(
            f"default_value {default_value} not in range [0, {num_buckets}), column_name {key}"
        )
    _check_key(key)
    return IdentityCategoricalColumn(key, num_buckets, default_value)


def categorical_column_with_hash_bucket(key, hash_bucket_size, dtype=dtypes.string):
    """Ids by hashing each value (ints as their decimal string) into hash_bucket_size.

    Raises:
      ValueError: no or < 1 hash_bucket_size, a dtype neither string nor integer.
    """
    if hash_bucket_size is None:
        raise ValueError(f"hash_bucket_size must be set. key: {key}")
    if hash_bucket_size < 1:
        raise ValueError(
            f"hash_bucket_size must be at least 1. hash_bucket_size: {hash_bucket_size}, "
            f"key: {key}"
        )
    _check_key(key)
    dtype = dtypes.as_dtype(dtype)
    _check_string_or_int(dtype, f"column_name: {key}")
    return HashedCategoricalColumn(key, hash_bucket_size, dtype)


def sequence_categorical_column_with_identity(key, num_buckets, default_value=None):
    """categorical_column_with_identity over a sequence feature ([batch, T] ids; same
    arguments and errors)."""
    return SequenceCategoricalColumn(
        categorical_column_with_identity(key, num_buckets, default_value)
    )


def sequence_categorical_column_with_hash_bucket(key, hash_bucket_size, dtype=dtypes.string):
    """categorical_column_with_hash_bucket over a sequence feature (same arguments and
    errors)."""
    return SequenceCategoricalColumn(
        categorical_column_with_hash_bucket(key, hash_bucket_size, dtype)
    )


def sequence_categorical_column_with_vocabulary_list(
    key, vocabulary_list, dtype=None, default_value=-1, num_oov_buckets=0
):
    """categorical_column_with_vocabulary_list over a sequence feature (same arguments
    and errors)."""
    return SequenceCategoricalColumn(
        categorical_column_with_vocabulary_list(
            key, vocabulary_list, dtype, default_value, num_oov_buckets
        )
    )


def sequence_categorical_column_with_vocabulary_file(
    key,
    vocabulary_file,
    vocabulary_size=None,
    num_oov_buckets=0,
    default_value=None,
    dtype=dtypes.string,
):
    """categorical_column_with_vocabulary_file over a sequence feature (same arguments
    and errors)."""
    return SequenceCategoricalColumn(
        categorical_column_with_vocabulary_file(
            key, vocabulary_file, vocabulary_size, num_oov_buckets, default_value, dtype
        )
    )


def weighted_categorical_column(categorical_column, weight_feature_key, dtype=dtypes.float32):
    """`categorical_column`'s ids weighted by the feature `weight_feature_key`.

    Raises:
      ValueError: a dtype not convertible to float.
    """
    dtype = None if dtype is None else dtypes.as_dtype(dtype)
    if dtype is None or not (dtype.is_integer or dtype.is_floating):
        raise ValueError(f"dtype {dtype} is not convertible to float.")
    return WeightedCategoricalColumn(categorical_column, weight_feature_key, dtype)


def crossed_column(keys, hash_bucket_size, hash_key=None):
    """Ids of the crosses of `keys` (feature names or categorical columns), hashed as
    TF's `sparse_cross_hashed` into hash_bucket_size.

    Raises:
      ValueError: hash_bucket_size < 1, fewer than two keys, an unsupported key.
    """
    if not hash_bucket_size or hash_bucket_size < 1:
        raise ValueError(f"hash_bucket_size must be > 1. hash_bucket_size: {hash_bucket_size}")
    if not keys or len(keys) < 2:
        raise ValueError(f"keys must be a list with length > 1. Given: {keys}")
    for key in keys:
        if not isinstance(key, str | _Categorical):
            raise ValueError(
                "Unsupported key type. All keys must be either string, or categorical "
                f"column except HashedCategoricalColumn. Given: {key}"
            )
        if isinstance(key, HashedCategoricalColumn):
            raise ValueError(
                "categorical_column_with_hash_bucket is not supported for crossing. Hashing "
                "before crossing will increase probability of collision. Instead, use the "
                f"feature name as a string. Given: {key}"
            )
    return CrossedColumn(tuple(keys), hash_bucket_size, hash_key)


def indicator_column(categorical_column):
    """`categorical_column` as a multi-hot [batch, num_buckets] (counts, or summed
    weights for a weighted column)."""
    if not isinstance(categorical_column, _Categorical):
        raise ValueError(
            "Unsupported input type. Input must be a CategoricalColumn. "
            f"Given: {categorical_column}"
        )
    return IndicatorColumn(categorical_column)


def _check_embedding_args(dimension, initializer, ckpt_to_load_from, tensor_name_in_ckpt, who):
    if dimension is None or dimension < 1:
        raise ValueError(f"Invalid dimension {dimension}.")
    if (ckpt_to_load_from is None) != (tensor_name_in_ckpt is None):
        raise ValueError(
            "Must specify both `ckpt_to_load_from` and `tensor_name_in_ckpt` or none of them."
        )
    if initializer is not None and not callable(initializer):
        raise ValueError(f"initializer must be callable if specified. {who}")
    if initializer is None:
        return init_ops.truncated_normal_initializer(mean=0.0, stddev=1 / math.sqrt(dimension))
    return initializer


def embedding_column(
    categorical_column,
    dimension,
    combiner="mean",
    initializer=None,
    ckpt_to_load_from=None,
    tensor_name_in_ckpt=None,
    max_norm=None,
    trainable=True,
    use_safe_embedding_lookup=True,
):
    """`categorical_column`'s ids as the `combiner` of rows of a [num_buckets, dimension]
    variable (truncated normal, stddev 1/sqrt(dimension), unless `initializer`).

    Raises:
      ValueError: dimension < 1, an initializer not callable, only one of the
        checkpoint arguments.
    """
    initializer = _check_embedding_args(
        dimension, initializer, ckpt_to_load_from, tensor_name_in_ckpt,
        f"Embedding of column_name: {categorical_column.name}",
    )  # fmt: skip
    return EmbeddingColumn(
        categorical_column, dimension, combiner, initializer, ckpt_to_load_from,
        tensor_name_in_ckpt, max_norm, trainable, use_safe_embedding_lookup,
    )  # fmt: skip


def shared_embedding_columns(
    categorical_columns,
    dimension,
    combiner="mean",
    initializer=None,
    shared_embedding_collection_name=None,
    ckpt_to_load_from=None,
    tensor_name_in_ckpt=None,
    max_norm=None,
    trainable=True,
    use_safe_embedding_lookup=True,
):
    """Embedding columns of `categorical_columns` (same kind, same num_buckets) that
    share one variable, named after the sorted column names joined by '_'.

    Raises:
      ValueError: as embedding_column; columns of different kinds or bucket counts.
    """
    initializer = _check_embedding_args(
        dimension, initializer, ckpt_to_load_from, tensor_name_in_ckpt,
        "Embedding of column_name: {}".format(
            "_".join(c.name for c in categorical_columns)
        ),
    )  # fmt: skip
    columns = list(categorical_columns)
    first = columns[0]
    for c in columns:
        if not isinstance(c, _Categorical):  # (TF reads its bucket count and fails so)
            raise AttributeError(f"'{type(c).__name__}' object has no attribute '_num_buckets'")
    base = [_base_kind(c) for c in columns]
    for c, b in zip(columns, base, strict=True):
        if type(b) is not type(base[0]):
            raise ValueError(
                "To use shared_embedding_column, all categorical_columns must have the same "
                "type, or be weighted_categorical_column or sequence column of the same type. "
                f"Given column: "
                f"{c} of type: {type(c)} does not match given column: {first} of type: "
                f"{type(first)}"
            )
        if c.num_buckets != first.num_buckets:
            raise ValueError(
                "To use shared_embedding_column, all categorical_columns must have the same "
                # (TF 2.21's words, its dropped letters and double space too)
                f"number of buckets. ven column: {first} with buckets: {first.num_buckets} "
                f"does  not match column: {c} with buckets: {c.num_buckets}"
            )
    if not shared_embedding_collection_name:
        names = sorted(c.name for c in columns)
        shared_embedding_collection_name = "_".join(names) + "_shared_embedding"
    return [
        _SharedEmbeddingColumn(
            c,
            dimension,
            combiner,
            initializer,
            shared_embedding_collection_name,
            ckpt_to_load_from,
            tensor_name_in_ckpt,
            max_norm,
            trainable,
            use_safe_embedding_lookup,
        )  # fmt: skip
        for c in columns
    ]


def _base_kind(column):
    """The column whose kind a shared embedding compares: under weighting and sequence."""
    while isinstance(column, WeightedCategoricalColumn | SequenceCategoricalColumn):
        column = column.categorical_column
    return column


# -- models ------------------------------------------------------------------------------


def _normalize(feature_columns):
    if isinstance(feature_columns, _Column):
        feature_columns = [feature_columns]
    if isinstance(feature_columns, dict):
        raise ValueError("Expected feature_columns to be iterable, found dict.")
    feature_columns = list(feature_columns)
    for column in feature_columns:
        if not isinstance(column, _Column):
            raise ValueError(
                f"Items of feature_columns must be a _FeatureColumn. Given (type "
                f"{type(column)}): {column}."
            )
    if not feature_columns:
        raise ValueError("feature_columns must not be empty.")
    seen = {}
    for column in feature_columns:
        if column.name in seen:
            raise ValueError(
                f"Duplicate feature column name found for columns: {column} and "
                f"{seen[column.name]}. This usually means that these columns refer to same "
                "base feature. Either one must be discarded or a duplicated but renamed item "
                "must be inserted in features dict."
            )
        seen[column.name] = column
    return feature_columns


def _flatten(tensor, num_elements):
    batch = array_ops.shape(tensor)[0]
    return array_ops.reshape(tensor, manip_ops.stack([batch, num_elements]))


def input_layer(
    features,
    feature_columns,
    weight_collections=None,
    trainable=True,
    cols_to_vars=None,
    cols_to_output_tensors=None,
):
    """The dense columns' tensors, each flattened to [batch, n], concatenated in the
    order of the columns' names: [batch, sum of n].

    Raises:
      ValueError: no columns, a column not dense, two columns of one name, a feature
        missing from `features`, features of the wrong kind.
    """
    columns = _dense_columns(feature_columns)
    collections = _model_collections(weight_collections)
    return _dense_layer(
        features, columns, collections, trainable, cols_to_vars, cols_to_output_tensors,
        var_scope.variable_scope(None, default_name="input_layer"),
    )  # fmt: skip


def _dense_columns(feature_columns) -> list:
    columns = _normalize(feature_columns)
    for column in columns:
        if not column._is_dense:
            raise ValueError(
                "Items of feature_columns must be a _DenseColumn. You can wrap a categorical "
                f"column with an embedding_column or indicator_column. Given: {column}"
            )
    return columns


def _dense_layer(
    features, columns, collections, trainable, cols_to_vars, cols_to_output_tensors, scope
):
    """input_layer's body, in `scope` (a variable scope), its variables in `collections`
    (also tf.keras.layers.DenseFeatures', in the layer's own scope)."""
    ctx = _Ctx(collections, trainable, checkpoint_utils.init_from_checkpoint)
    with scope:
        builder = _Builder(features)
        outputs = []
        for column in sorted(columns, key=lambda c: c.name):
            with var_scope.variable_scope(None, default_name=column._var_scope_name):
                out = _flatten(column._dense(builder, ctx), column._num_elements)
                outputs.append(out)
                if cols_to_vars is not None:
                    cols_to_vars[column] = ops.get_collection(
                        ops.GraphKeys.GLOBAL_VARIABLES,
                        scope=var_scope.get_variable_scope().name,
                    )
                if cols_to_output_tensors is not None:
                    cols_to_output_tensors[column] = out
        return manip_ops.concat(outputs, 1)


def linear_model(
    features,
    feature_columns,
    units=1,
    sparse_combiner="sum",
    weight_collections=None,
    trainable=True,
    cols_to_vars=None,
):
    """A linear prediction [batch, units]: per column, its dense tensor times a
    `<column>/weights` variable, or its ids' weights combined by `sparse_combiner`;
    summed, plus `bias_weights`. All variables start at zero.

    Raises:
      ValueError: as input_layer; a column neither dense nor categorical.
    """
    columns = _normalize(feature_columns)
    for column in columns:
        if not (column._is_dense or column._is_categorical):
            raise ValueError(
                f"Items of feature_columns must be either a _DenseColumn or "
                f"_CategoricalColumn. Given: {column}"
            )
    ctx = _Ctx(
        _model_collections(weight_collections), trainable, checkpoint_utils.init_from_checkpoint
    )
    ordered = sorted(columns, key=lambda c: c.name)
    scope_names = [_claim_scope_name(c._var_scope_name) for c in ordered]
    with var_scope.variable_scope(None, default_name="linear_model") as model_scope:
        pass
    # TF's model is a layer called after its scope is made: its ops land under
    # "linear_model_1/linear_model/" (a fresh name scope, then the scope's own name).
    short = model_scope.name.rpartition("/")[2]
    with (
        ops.name_scope(short),
        var_scope.variable_scope(model_scope, auxiliary_name_scope=False),
        ops.name_scope(short),
    ):
        builder = _Builder(features)
        sums = []
        for column, scope_name in zip(ordered, scope_names, strict=True):
            with var_scope.variable_scope(scope_name):
                sums.append(_weighted_sum(column, builder, units, sparse_combiner, ctx))
                if cols_to_vars is not None:
                    cols_to_vars[column] = ops.get_collection(
                        ops.GraphKeys.GLOBAL_VARIABLES,
                        scope=var_scope.get_variable_scope().name,
                    )
        no_bias = math_ops.add_n(sums, name="weighted_sum_no_bias")
        bias = var_scope.get_variable(
            "bias_weights",
            shape=[units],
            initializer=init_ops.zeros_initializer(),
            trainable=trainable,
            collections=ctx.collections,
        )
        if cols_to_vars is not None:
            cols_to_vars["bias"] = [bias]
        return nn_ops.bias_add(no_bias, bias, name="weighted_sum")


def _claim_scope_name(prefix):
    """`prefix` made unique among the scopes of the scope linear_model is called in, and
    counted there: TF's linear model names each column's part so (its layers are made
    outside the model's scope), hence `linear_model_1/age_1/weights` on a second call."""
    name = var_scope._get_unique_variable_scope(prefix)
    outer = var_scope.get_variable_scope().name
    var_scope.get_variable_scope_store().open_variable_scope(f"{outer}/{name}" if outer else name)
    return name


def _weighted_sum(column, builder, units, sparse_combiner, ctx):
    rows = column.num_buckets if column._is_categorical else column._num_elements
    weights = var_scope.get_variable(
        "weights",
        shape=[rows, units],
        initializer=init_ops.zeros_initializer(),
        trainable=ctx.trainable,
        collections=ctx.collections,
    )
    if column._is_categorical:
        ids, sp_weights = column._ids(builder)
        batch = ids.dense_shape[0]
        shape = manip_ops.stack([batch, ops.convert_to_tensor(-1, dtypes.int64)])
        ids = sparse_ops.sparse_reshape(ids, shape)
        if sp_weights is not None:
            sp_weights = sparse_ops.sparse_reshape(sp_weights, shape)
        return safe_embedding_lookup_sparse(
            weights, ids, sp_weights, combiner=sparse_combiner, name="weighted_sum"
        )
    tensor = _flatten(column._dense(builder, ctx), column._num_elements)
    return matmul_ops.matmul(tensor, weights, name="weighted_sum")


def make_parse_example_spec(feature_columns):
    """The `parse_example` features dict the columns read: FixedLenFeature for numeric
    columns, VarLenFeature for categorical ones (and their weights).

    Raises:
      ValueError: an item not a feature column, two specs for one key.
    """
    result = {}
    for column in feature_columns:
        if not isinstance(column, _Column):
            raise ValueError(
                f"All feature_columns must be _FeatureColumn instances. Given: {column}"
            )
        for key, value in column.parse_example_spec.items():
            if key in result and value != result[key]:
                raise ValueError(
                    f"feature_columns contain different parse_spec for key {key}. Given "
                    f"{value} and {result[key]}"
                )
        result.update(column.parse_example_spec)
    return result
