"""The kinds of feature column (feature_column.py makes them): how each turns
features into tensors.

A categorical column's `_ids(builder)` gives its int64 ids as a SparseTensor [batch, n]
and its weights (a float SparseTensor) or None; a dense column's `_dense(builder, ctx)`
gives floats [batch, ...], `_num_elements` per example; a SequenceDenseColumn's
`_sequence_dense(builder, ctx)` gives [batch, T, ...] floats and int64 [batch] lengths
(indicator and embedding columns over a sequence column; feature_column_sequence.py).
Each column is a namedtuple of TF's fields, so equal columns are one dict key
(cols_to_vars) and errors print them as TF does.

Invariant: `_Builder.get` builds each raw feature and each column's transform once per
model call, so a column read by two others (a cross and an indicator) is one subgraph.
"""

from __future__ import annotations

import collections

import numpy as np

from asyncflow import dtypes, tensor_shape, var_scope
from asyncflow import graph as ops
from asyncflow.nn_sparse_extras import safe_embedding_lookup_sparse
from asyncflow.ops import (
    array_ops,
    cast_ops,
    manip_ops,
    math_ops,
    parsing_ops,
    reduction_ops,
    scatter_nd_ops,
    segment_ops,
    slicing_ops,
    sparse_cross_ops,
    sparse_ops,
    string_hash_ops,
    string_ops,
)
from asyncflow.sparse_tensor import SparseTensor

_IdsAndWeights = collections.namedtuple("IdWeightPair", ["id_tensor", "weight_tensor"])

# -- reading raw features ------------------------------------------------------------------


def _is_sparse(t) -> bool:
    return isinstance(t, SparseTensor)


class _Builder:
    """One model call's features: each raw feature read once (rank 1 made [batch, 1]),
    each column's transform built once."""

    def __init__(self, features):
        self._features = dict(features)
        self._cache = {}

    def get(self, key):
        """The raw feature under the string `key`, or column `key`'s transform."""
        if key in self._cache:
            return self._cache[key]
        if isinstance(key, str):
            if key not in self._features:
                raise ValueError(f"Feature {key} is not in features dictionary.")
            value = self._raw(key, self._features[key])
        else:
            value = key._transform(self)
        self._cache[key] = value
        return value

    @staticmethod
    def _raw(key, feature):
        if not _is_sparse(feature):
            feature = ops.convert_to_tensor(feature)
            rank = feature.shape.ndims
            if rank == 0:
                raise ValueError(f"Feature (key: {key}) cannot have rank 0. Given: {feature}")
            if rank == 1:
                return array_ops.expand_dims(feature, -1)
            return feature
        shape = feature.dense_shape.shape
        rank = shape.as_list()[0] if shape.ndims == 1 else None
        if rank == 0:
            raise ValueError(f"Feature (key: {key}) cannot have rank 0. Given: {feature}")
        if rank == 1:
            batch = array_ops.reshape(feature.dense_shape, [1])
            shape = manip_ops.concat([batch, ops.convert_to_tensor([1], dtypes.int64)], 0)
            return sparse_ops.sparse_reshape(feature, shape)
        return feature


def _to_sparse(tensor, ignore_value=None):
    """A dense tensor as a SparseTensor of its entries other than `ignore_value` ('' for
    strings, -1 for ints, 0 otherwise); a SparseTensor as it is."""
    if _is_sparse(tensor):
        return tensor
    with ops.name_scope(None, "to_sparse_input"):
        if ignore_value is None:
            if tensor.dtype == dtypes.string:
                ignore_value = ""
            elif tensor.dtype.is_integer:
                ignore_value = -1
            else:
                ignore_value = tensor.dtype.as_numpy_dtype()
        ignore = ops.convert_to_tensor(ignore_value, dtype=tensor.dtype, name="ignore_value")
        indices = slicing_ops.where(math_ops.not_equal(tensor, ignore), name="indices")
        return SparseTensor(
            indices,
            scatter_nd_ops.gather_nd(tensor, indices, name="values"),
            array_ops.shape(tensor, out_type=dtypes.int64, name="dense_shape"),
        )


def _check_key(key):
    if not isinstance(key, str):
        raise ValueError(f"key must be a string. Got: type {type(key)}. Given key: {key}.")


def _check_string_or_int(dtype, prefix):
    if dtype != dtypes.string and not dtype.is_integer:
        raise ValueError(f"{prefix} dtype must be string or integer. dtype: {dtype}.")


def _check_compatible(column, tensor):
    if column.dtype.is_integer != tensor.dtype.is_integer:
        raise ValueError(
            "Column dtype and SparseTensors dtype must be compatible. "
            f"key: {column.key}, column dtype: {column.dtype}, tensor dtype: {tensor.dtype}"
        )


def _with_values(sp, values):
    return SparseTensor(sp.indices, values, sp.dense_shape)


def _sequence_length(sp, num_elements=1):
    """Each example's number of steps in a SparseTensor [batch, T, ...]: its last set
    index along axis 1 plus one (0 for an empty example), over `num_elements` values
    a step, rounded up; int64 [batch]."""
    rows = slicing_ops.gather(sp.indices, 0, axis=1)
    steps = math_ops.add(slicing_ops.gather(sp.indices, 1, axis=1), 1)
    batch = slicing_ops.gather(sp.dense_shape, 0)
    last = segment_ops.unsorted_segment_max(steps, rows, batch)
    # An example with no entries gets the dtype's lowest value from the max.
    last = math_ops.maximum(last, ops.convert_to_tensor(0, dtypes.int64))
    if num_elements == 1:
        return array_ops.identity(last, name="sequence_length")
    n = ops.convert_to_tensor(num_elements, dtypes.int64)
    return math_ops.floordiv(math_ops.add(last, n - 1), n, name="sequence_length")


class SequenceDenseColumn:
    """A column `sequence_input_layer` takes: `_sequence_dense(builder, ctx)` gives its
    [batch, T, ...] floats and its int64 [batch] sequence lengths."""


def _not_sequence_error(column, layer, what="SequenceCategoricalColumn"):
    cc = column.categorical_column
    return ValueError(
        f"In {column._kind}: {column.name}. categorical_column must be of type {what} "
        f"to use {layer}. Suggested fix: Use one of sequence_categorical_column_with_*. "
        f"Given (type {type(cc)}): {cc}"
    )


def _sequence_error(column, layer="DenseFeatures", other="SequenceFeatures"):
    cc = column.categorical_column
    return ValueError(
        f"In {column._kind}: {column.name}. categorical_column must not be of type "
        f"_SequenceCategoricalColumn. Suggested fix A: If you wish to use {layer}, use a "
        f"non-sequence categorical_column_with_*. Suggested fix B: If you wish to create "
        f"sequence input, use {other} instead of {layer}. Given (type {type(cc)}): {cc}"
    )


# -- what a model tells its columns -------------------------------------------------------


class _Ctx:
    """What a model tells its columns: the variables' collections, trainability, and
    what to do with a new embedding variable: `init_from_checkpoint(ckpt, {name: var})`
    (train.checkpoint_utils', passed in: this layer cannot import train/), as TF does
    for a column with ckpt_to_load_from."""

    def __init__(self, collections_, trainable, init_from_checkpoint):
        self.collections = collections_
        self.trainable = trainable
        self._init_from_checkpoint = init_from_checkpoint

    def made_embedding(self, column, weights):
        if column.ckpt_to_load_from is not None:
            self._init_from_checkpoint(
                column.ckpt_to_load_from, {column.tensor_name_in_ckpt: weights}
            )


def _model_collections(weight_collections):
    names = list(weight_collections or [])
    for key in (ops.GraphKeys.GLOBAL_VARIABLES, ops.GraphKeys.MODEL_VARIABLES):
        if key not in names:
            names.append(key)
    return names


# -- the column kinds --------------------------------------------------------------------


class _Column:
    """What every column has: `name`, `parse_example_spec`, its scope name."""

    _is_dense = False
    _is_categorical = False
    _is_sequence = False

    @property
    def _var_scope_name(self) -> str:
        return self.name

    # TF1's underscored names, which TF1 programs still read.
    @property
    def _parse_example_spec(self):
        return self.parse_example_spec

    @property
    def _num_buckets(self):
        return self.num_buckets

    @property
    def _variable_shape(self):
        return tensor_shape.TensorShape([self._num_elements])


class _Categorical(_Column):
    _is_categorical = True

    def _ids(self, builder) -> _IdsAndWeights:
        return _IdsAndWeights(builder.get(self), None)


class _KeyedCategorical(_Categorical):
    """A categorical column of one input feature, its key, parsed as a VarLenFeature of
    the column's dtype (`_key_dtype` where the column has no dtype field)."""

    _key_dtype = None

    @property
    def name(self):
        return self.key

    @property
    def parse_example_spec(self):
        return {self.key: parsing_ops.VarLenFeature(self._key_dtype or self.dtype)}


class NumericColumn(
    _Column,
    collections.namedtuple(
        "NumericColumn", ["key", "shape", "default_value", "dtype", "normalizer_fn"]
    ),
):
    _is_dense = True

    @property
    def name(self):
        return self.key

    @property
    def parse_example_spec(self):
        return {self.key: parsing_ops.FixedLenFeature(self.shape, self.dtype, self.default_value)}

    @property
    def _num_elements(self):
        return int(np.prod(self.shape))

    def _transform(self, builder):
        tensor = builder.get(self.key)
        if _is_sparse(tensor):
            raise ValueError(
                "The corresponding Tensor of numerical column must be a Tensor. "
                f"SparseTensor is not supported. key: {self.key}"
            )
        if self.normalizer_fn is not None:
            tensor = self.normalizer_fn(tensor)
        return cast_ops.cast(tensor, dtypes.float32)

    def _dense(self, builder, ctx):
        return builder.get(self)


class BucketizedColumn(
    _Categorical, collections.namedtuple("BucketizedColumn", ["source_column", "boundaries"])
):
    _is_dense = True

    @property
    def name(self):
        return f"{self.source_column.name}_bucketized"

    @property
    def parse_example_spec(self):
        return self.source_column.parse_example_spec

    @property
    def _num_elements(self):
        return self.source_column._num_elements * (len(self.boundaries) + 1)

    @property
    def num_buckets(self):
        return self._num_elements

    def _transform(self, builder):
        return math_ops._bucketize(builder.get(self.source_column), boundaries=self.boundaries)

    def _dense(self, builder, ctx):
        return slicing_ops.one_hot(
            builder.get(self), depth=len(self.boundaries) + 1, on_value=1.0, off_value=0.0
        )

    def _ids(self, builder):
        # Element j of a row falls in bucket b: id j * (len(boundaries) + 1) + b.
        buckets = builder.get(self)
        shape = array_ops.shape(buckets)
        batch, n = shape[0], self.source_column._num_elements
        rows = array_ops.reshape(
            manip_ops.tile(array_ops.expand_dims(reduction_ops.range(0, batch), 1), [1, n]),
            [-1],
        )
        cols = manip_ops.tile(reduction_ops.range(0, n), [batch])
        ids = math_ops.add(
            array_ops.reshape(buckets, [-1]),
            math_ops.multiply(len(self.boundaries) + 1, cols),
        )
        indices = cast_ops.cast(array_ops.transpose(manip_ops.stack([rows, cols])), dtypes.int64)
        dense_shape = cast_ops.cast(manip_ops.stack([batch, n]), dtypes.int64)
        return _IdsAndWeights(
            SparseTensor(indices, cast_ops.cast(ids, dtypes.int64), dense_shape), None
        )


class VocabularyListCategoricalColumn(
    _KeyedCategorical,
    collections.namedtuple(
        "VocabularyListCategoricalColumn",
        ["key", "vocabulary_list", "dtype", "default_value", "num_oov_buckets"],
    ),
):
    @property
    def num_buckets(self):
        return len(self.vocabulary_list) + self.num_oov_buckets

    def _transform(self, builder):
        sp = _to_sparse(builder.get(self.key))
        _check_compatible(self, sp)
        _check_string_or_int(sp.dtype, f"column_name: {self.key} input_tensor")
        if sp.dtype.is_integer:
            sp = _with_values(sp, cast_ops.cast(sp.values, dtypes.int64))
        key_dtype = dtypes.int64 if self.dtype.is_integer else self.dtype
        keys = ops.convert_to_tensor(list(self.vocabulary_list), dtype=key_dtype)
        return _with_values(
            sp, _vocabulary_lookup(self, keys, self.default_value, sp.values, key_dtype)
        )


def _vocabulary_lookup(column, keys, default_value, values, key_dtype, size=None):
    """Each value's index in `keys`; else one of num_oov_buckets ids after them (TF's
    Fingerprint64 of the value as a string), or `default_value` when there are none."""
    from asyncflow import lookup

    with ops.name_scope(None, f"{column.key}_lookup"):
        if size is None:
            size = len(column.vocabulary_list)
        ids = cast_ops.cast(reduction_ops.range(0, size), dtypes.int64)
        init = lookup.KeyValueTensorInitializer(keys, ids)
        table = lookup.StaticHashTable(init, default_value=default_value)
        found = table.lookup(values)
        if not column.num_oov_buckets:
            return found
        text = values if key_dtype == dtypes.string else string_ops.as_string(values)
        bucket = string_hash_ops.string_to_hash_bucket_fast(text, column.num_oov_buckets)
        oov = math_ops.add(cast_ops.cast(bucket, dtypes.int64), size)
        return slicing_ops.where(math_ops.equal(found, -1), oov, found)


class VocabularyFileCategoricalColumn(
    _KeyedCategorical,
    collections.namedtuple(
        "VocabularyFileCategoricalColumn",
        [
            "key",
            "vocabulary_file",
            "vocabulary_size",
            "num_oov_buckets",
            "dtype",
            "default_value",
            "file_format",
        ],
    ),
):
    @property
    def num_buckets(self):
        return self.vocabulary_size + self.num_oov_buckets

    def _transform(self, builder):
        from asyncflow import lookup

        sp = _to_sparse(builder.get(self.key))
        _check_compatible(self, sp)
        _check_string_or_int(sp.dtype, f"column_name: {self.key} input_tensor")
        key_dtype = self.dtype
        if sp.dtype.is_integer:
            key_dtype = dtypes.int64
            sp = _with_values(sp, cast_ops.cast(sp.values, dtypes.int64))
        with ops.name_scope(None, f"{self.key}_lookup"):
            init = lookup.TextFileInitializer(
                self.vocabulary_file,
                key_dtype,
                lookup.TextFileIndex.WHOLE_LINE,
                dtypes.int64,
                lookup.TextFileIndex.LINE_NUMBER,
                vocab_size=self.vocabulary_size,
            )
            table = lookup.StaticHashTable(init, default_value=self.default_value)
            found = table.lookup(sp.values)
            if self.num_oov_buckets:
                text = sp.values if key_dtype == dtypes.string else string_ops.as_string(sp.values)
                bucket = string_hash_ops.string_to_hash_bucket_fast(text, self.num_oov_buckets)
                oov = math_ops.add(cast_ops.cast(bucket, dtypes.int64), self.vocabulary_size)
                found = slicing_ops.where(math_ops.equal(found, -1), oov, found)
        return _with_values(sp, found)


class IdentityCategoricalColumn(
    _KeyedCategorical,
    collections.namedtuple(
        "IdentityCategoricalColumn", ["key", "number_buckets", "default_value"]
    ),
):
    _key_dtype = dtypes.int64

    @property
    def num_buckets(self):
        return self.number_buckets

    def _transform(self, builder):
        sp = _to_sparse(builder.get(self.key))
        if not sp.dtype.is_integer:
            raise ValueError(f"Invalid input, not integer. key: {self.key} dtype: {sp.dtype}")
        values = sp.values
        if values.dtype != dtypes.int64:
            values = cast_ops.cast(values, dtypes.int64)
        if self.default_value is not None:
            # Without a default, ids out of range pass as they are (TF 2.21): an
            # indicator gives them no 1, an embedding lookup fails on them when run.
            n = ops.convert_to_tensor(self.number_buckets, dtypes.int64, name="num_buckets")
            zero = ops.convert_to_tensor(0, dtypes.int64)
            bad = math_ops.logical_or(
                math_ops.less(values, zero), math_ops.greater_equal(values, n)
            )
            default = array_ops.fill(
                array_ops.shape(values), ops.convert_to_tensor(self.default_value, dtypes.int64)
            )
            values = slicing_ops.where(bad, default, values)
        return _with_values(sp, values)


class HashedCategoricalColumn(
    _KeyedCategorical,
    collections.namedtuple("HashedCategoricalColumn", ["key", "hash_bucket_size", "dtype"]),
):
    @property
    def num_buckets(self):
        return self.hash_bucket_size

    def _transform(self, builder):
        sp = _to_sparse(builder.get(self.key))
        _check_string_or_int(sp.dtype, f"column_name: {self.key} input_tensor")
        _check_compatible(self, sp)
        text = sp.values if self.dtype == dtypes.string else string_ops.as_string(sp.values)
        ids = string_hash_ops.string_to_hash_bucket_fast(
            text, self.hash_bucket_size, name="lookup"
        )
        return _with_values(sp, ids)


class WeightedCategoricalColumn(
    _Categorical,
    collections.namedtuple(
        "WeightedCategoricalColumn", ["categorical_column", "weight_feature_key", "dtype"]
    ),
):
    @property
    def name(self):
        return f"{self.categorical_column.name}_weighted_by_{self.weight_feature_key}"

    @property
    def parse_example_spec(self):
        spec = dict(self.categorical_column.parse_example_spec)
        if self.weight_feature_key in spec:
            raise ValueError(
                f"Parse config {spec[self.weight_feature_key]} already exists for "
                f"{self.weight_feature_key}."
            )
        spec[self.weight_feature_key] = parsing_ops.VarLenFeature(self.dtype)
        return spec

    @property
    def num_buckets(self):
        return self.categorical_column.num_buckets

    def _transform(self, builder):
        weights = builder.get(self.weight_feature_key)
        if self.dtype != weights.dtype.base_dtype:
            raise ValueError(f"Bad dtype, expected {self.dtype}, but got {weights.dtype}.")
        if not _is_sparse(weights):
            weights = _to_sparse(weights, ignore_value=0.0)
        if not weights.dtype.is_floating:
            weights = _with_values(weights, cast_ops.cast(weights.values, dtypes.float32))
        return (self.categorical_column._ids(builder).id_tensor, weights)

    def _ids(self, builder):
        return _IdsAndWeights(*builder.get(self))


class CrossedColumn(
    _Categorical,
    collections.namedtuple("CrossedColumn", ["keys", "hash_bucket_size", "hash_key"]),
):
    @property
    def name(self):
        return "_X_".join(sorted(k if isinstance(k, str) else k.name for k in self.keys))

    @property
    def parse_example_spec(self):
        spec = {}
        for key in self.keys:
            if isinstance(key, str):
                spec[key] = parsing_ops.VarLenFeature(dtypes.string)
            else:
                spec.update(key.parse_example_spec)
        return spec

    @property
    def num_buckets(self):
        return self.hash_bucket_size

    def _transform(self, builder):
        inputs = []
        for key in _leaf_keys(self):
            if isinstance(key, str):
                inputs.append(builder.get(key))
                continue
            ids, weights = key._ids(builder)
            if weights is not None:
                raise ValueError(
                    "crossed_column does not support weight_tensor, but the given column "
                    f"populates weight_tensor. Given column: {key.name}"
                )
            inputs.append(ids)
        return sparse_cross_ops.sparse_cross_hashed(
            inputs, num_buckets=self.hash_bucket_size, hash_key=self.hash_key
        )


def _leaf_keys(cross):
    keys = []
    for key in cross.keys:
        keys.extend(_leaf_keys(key) if isinstance(key, CrossedColumn) else [key])
    return keys


class IndicatorColumn(
    _Column, SequenceDenseColumn, collections.namedtuple("IndicatorColumn", ["categorical_column"])
):
    _is_dense = True
    _kind = "indicator_column"

    @property
    def name(self):
        return f"{self.categorical_column.name}_indicator"

    @property
    def parse_example_spec(self):
        return self.categorical_column.parse_example_spec

    @property
    def _num_elements(self):
        return self.categorical_column.num_buckets

    def _transform(self, builder):
        ids, weights = self.categorical_column._ids(builder)
        depth = self.categorical_column.num_buckets
        dense_ids = sparse_ops.sparse_tensor_to_dense(ids, default_value=-1)
        one_hot = slicing_ops.one_hot(dense_ids, depth=depth, on_value=1.0, off_value=0.0)
        if weights is not None:
            dense_w = sparse_ops.sparse_tensor_to_dense(weights, default_value=0.0)
            one_hot = math_ops.multiply(one_hot, array_ops.expand_dims(dense_w, -1))
        return reduction_ops.reduce_sum(one_hot, axis=[-2])

    def _dense(self, builder, ctx):
        if self.categorical_column._is_sequence:
            raise _sequence_error(self)
        return builder.get(self)

    def _sequence_dense(self, builder, ctx):
        if not self.categorical_column._is_sequence:
            raise _not_sequence_error(self, "SequenceFeatures")
        ids, _ = self.categorical_column._ids(builder)
        return builder.get(self), _sequence_length(ids)


_EMBEDDING_FIELDS = [
    "categorical_column",
    "dimension",
    "combiner",
    "initializer",
    "ckpt_to_load_from",
    "tensor_name_in_ckpt",
    "max_norm",
    "trainable",
    "use_safe_embedding_lookup",
]


def _embed(column, weights, builder):
    ids, sp_weights = column.categorical_column._ids(builder)
    return safe_embedding_lookup_sparse(
        weights,
        ids,
        sp_weights,
        combiner=column.combiner,
        name=f"{column.name}_weights",
        max_norm=column.max_norm,
    )


class EmbeddingColumn(
    _Column, SequenceDenseColumn, collections.namedtuple("EmbeddingColumn", _EMBEDDING_FIELDS)
):
    _is_dense = True
    _kind = "embedding_column"

    @property
    def name(self):
        return f"{self.categorical_column.name}_embedding"

    @property
    def parse_example_spec(self):
        return self.categorical_column.parse_example_spec

    @property
    def _num_elements(self):
        return self.dimension

    def _dense(self, builder, ctx):
        if self.categorical_column._is_sequence:
            raise _sequence_error(self)
        return self._lookup(builder, ctx)

    def _sequence_dense(self, builder, ctx):
        if not self.categorical_column._is_sequence:
            raise _not_sequence_error(self, "SequenceFeatures")
        ids, _ = self.categorical_column._ids(builder)
        return self._lookup(builder, ctx), _sequence_length(ids)

    def _lookup(self, builder, ctx):
        weights = var_scope.get_variable(
            "embedding_weights",
            shape=(self.categorical_column.num_buckets, self.dimension),
            dtype=dtypes.float32,
            initializer=self.initializer,
            trainable=self.trainable and ctx.trainable,
            collections=ctx.collections,
        )
        ctx.made_embedding(self, weights)
        return _embed(self, weights, builder)


class _SharedEmbeddingColumn(
    _Column,
    SequenceDenseColumn,
    collections.namedtuple(
        "_SharedEmbeddingColumn",
        [*_EMBEDDING_FIELDS[:4], "shared_embedding_collection_name", *_EMBEDDING_FIELDS[4:]],
    ),
):
    _is_dense = True

    @property
    def name(self):
        return f"{self.categorical_column.name}_shared_embedding"

    @property
    def parse_example_spec(self):
        return self.categorical_column.parse_example_spec

    _kind = "embedding_column"

    @property
    def _var_scope_name(self):
        return self.shared_embedding_collection_name

    @property
    def _num_elements(self):
        return self.dimension

    # TF1's own shared columns, whose messages name TF1's layers.
    def _dense(self, builder, ctx):
        if self.categorical_column._is_sequence:
            raise _sequence_error(self, "input_layer", "sequence_input_layer")
        return self._lookup(builder, ctx)

    def _sequence_dense(self, builder, ctx):
        if not self.categorical_column._is_sequence:
            raise _not_sequence_error(self, "sequence_input_layer", "_SequenceCategoricalColumn")
        ids, _ = self.categorical_column._ids(builder)
        return self._lookup(builder, ctx), _sequence_length(ids)

    def _lookup(self, builder, ctx):
        # The first column of the group makes the variable; the others find it in the
        # collection named after the group.
        shape = (self.categorical_column.num_buckets, self.dimension)
        found = ops.get_collection(self.shared_embedding_collection_name)
        if found:
            weights = found[0]
            if len(found) > 1:
                raise ValueError(
                    f"Collection {self.shared_embedding_collection_name} can only contain "
                    f"one variable. Suggested fix A: Choose a unique name for this "
                    f"collection. Suggested fix B: Do not add any variables to this "
                    f"collection. The feature_column library already adds a variable under "
                    f"the hood."
                )
        else:
            weights = var_scope.get_variable(
                "embedding_weights",
                shape=shape,
                dtype=dtypes.float32,
                initializer=self.initializer,
                trainable=self.trainable and ctx.trainable,
                collections=ctx.collections,
            )
            ops.add_to_collection(self.shared_embedding_collection_name, weights)
            ctx.made_embedding(self, weights)
        return _embed(self, weights, builder)
