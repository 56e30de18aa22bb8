"""`tf.feature_column.sequence_*` columns and `sequence_input_layer`: features that are
sequences, one row of steps per example, given as SparseTensors [batch, T] (or
[batch, T, k]).

    words = fc.sequence_categorical_column_with_identity("words", 100)
    x, length = fc.sequence_input_layer(features, [fc.embedding_column(words, 8)])

`x` is [batch, T, D] floats (each column's values a step, concatenated in the order of
the columns' names), `length` the int64 [batch] number of steps of each example.

Invariants, as TF 2.21's (values as TF 2.15.1's `tf.keras.experimental.SequenceFeatures`,
which computes what TF1's `tf.contrib.feature_column.sequence_input_layer` did):
- An example's length is its last set step plus one; its steps are padded (numeric
  columns with `default_value`, categorical ones with no id) up to the batch's longest.
  A numeric column of shape s reads prod(s) values a step from a [batch, T * prod(s)]
  input, or one value a step from a [batch, T, k] input.
- A sequence categorical column's ids get a trailing axis ([batch, T, 1]), so an
  indicator or embedding column over it gives one row per step.
- TF1's `input_layer`, `linear_model` and `make_parse_example_spec` take only TF1 columns:
  a sequence numeric column is not one (they raise ValueError, as TF 2.21's compat.v1);
  indicator and embedding columns over a sequence column raise in `input_layer`; and a
  non-sequence column raises in `sequence_input_layer`.
- sequence_input_layer's variables are `sequence_input_layer/<column>/embedding_weights`
  (TF1's names; SequenceFeatures uses `sequence_features/`), in GLOBAL_VARIABLES and
  `weight_collections` (not MODEL_VARIABLES, as SequenceFeatures); with several columns,
  their lengths are asserted equal when the step runs (InvalidArgumentError otherwise).
- TF1's shared_embedding_columns over sequence columns work here as embedding columns
  (TF1's sequence_input_layer took them; SequenceFeatures refuses them).
"""

from __future__ import annotations

import collections

import numpy as np

from asyncflow import dtypes, tensor_shape, var_scope
from asyncflow import graph as ops
from asyncflow.feature_column_kinds import (
    SequenceDenseColumn,
    _Builder,
    _Categorical,
    _Ctx,
    _IdsAndWeights,
    _is_sparse,
    _sequence_length,
)
from asyncflow.ops import array_ops, check_ops, manip_ops, parsing_ops, sparse_ops
from asyncflow.sparse_tensor import SparseTensor, SparseTensorValue
from asyncflow.train import checkpoint_utils

__all__ = [
    "SequenceCategoricalColumn",
    "SequenceNumericColumn",
    "sequence_input_layer",
    "sequence_numeric_column",
]


# -- the columns -------------------------------------------------------------------------


class SequenceNumericColumn(
    SequenceDenseColumn,
    collections.namedtuple(
        "SequenceNumericColumn", ["key", "shape", "default_value", "dtype", "normalizer_fn"]
    ),
):
    """`shape` values a step of the sparse feature `key` (see sequence_numeric_column)."""

    @property
    def name(self):
        return self.key

    @property
    def parse_example_spec(self):
        return {self.key: parsing_ops.VarLenFeature(self.dtype)}

    @property
    def _var_scope_name(self):
        return self.name

    @property
    def _num_elements(self):
        return int(np.prod(self.shape))

    def _transform(self, builder):
        tensor = builder.get(self.key)
        if self.normalizer_fn is not None:
            tensor = self.normalizer_fn(tensor)  # on the SparseTensor, as TF
        return tensor

    def _sequence_dense(self, builder, ctx):
        sp = builder.get(self)
        dense = sparse_ops.sparse_tensor_to_dense(sp, default_value=self.default_value)
        batch = array_ops.shape(dense, out_type=dtypes.int32)[:1]
        dense = array_ops.reshape(dense, manip_ops.concat([batch, [-1], list(self.shape)], 0))
        # Values a step come from axis 1 of a [batch, T * n] input; a [batch, T, k]
        # input holds its steps' values on axis 2 already.
        per_step = self._num_elements if sp.dense_shape.shape.as_list() == [2] else 1
        return dense, _sequence_length(sp, per_step)


class SequenceCategoricalColumn(
    _Categorical,
    collections.namedtuple("SequenceCategoricalColumn", ["categorical_column"]),
):
    """`categorical_column`'s ids, each step its own row (see the module note)."""

    _is_sequence = True

    @property
    def name(self):
        return self.categorical_column.name

    @property
    def parse_example_spec(self):
        return self.categorical_column.parse_example_spec

    @property
    def num_buckets(self):
        return self.categorical_column.num_buckets

    def _ids(self, builder):
        ids, weights = self.categorical_column._ids(builder)
        return _IdsAndWeights(_steps_as_rows(ids), _steps_as_rows(weights))


def _steps_as_rows(sp):
    """A [batch, T] SparseTensor as [batch, T, 1]; others as they are."""
    if sp is None or sp.dense_shape.shape.as_list() != [2]:
        return sp
    one = ops.convert_to_tensor([1], dtypes.int64)
    return sparse_ops.sparse_reshape(sp, manip_ops.concat([sp.dense_shape, one], 0))


# -- making columns ----------------------------------------------------------------------


def sequence_numeric_column(
    key, shape=(1,), default_value=0.0, dtype=dtypes.float32, normalizer_fn=None
):
    """A sequence of dense values, `shape` a step, from a sparse feature; missing steps
    and values read `default_value`.  (As TF, neither key nor default_value is checked.)

    Raises:
      ValueError: a shape dimension < 1, a dtype not convertible to float.
      TypeError: a shape dimension not a Python int, normalizer_fn not callable.
    """
    shape = tuple([shape] if isinstance(shape, int) else shape)
    for d in shape:
        if not isinstance(d, int):
            raise TypeError(f"shape dimensions must be integer. shape: {shape}, key: {key}")
        if d < 1:
            raise ValueError(
                f"shape dimensions must be greater than 0. shape: {shape}, key: {key}"
            )
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"normalizer_fn must be a callable. Given: {normalizer_fn}")
    dtype = dtypes.as_dtype(dtype)
    if not (dtype.is_integer or dtype.is_floating):
        raise ValueError(f"dtype must be convertible to float. dtype: {dtype}, key: {key}")
    return SequenceNumericColumn(key, shape, default_value, dtype, normalizer_fn)


# -- the layer ---------------------------------------------------------------------------


def _check_sequence_columns(feature_columns):
    if isinstance(feature_columns, SequenceDenseColumn | _Categorical):
        feature_columns = [feature_columns]
    columns = list(feature_columns)
    if not columns:
        raise ValueError("feature_columns must not be empty.")
    for column in columns:
        if not isinstance(column, SequenceDenseColumn):
            raise ValueError(
                f"Items of feature_columns must be a {SequenceDenseColumn}. You can wrap a "
                f"categorical column with an embedding_column or indicator_column. "
                f"Given: {column}"
            )
    seen = {}
    for column in columns:
        if column.name in seen:
            raise ValueError(
                f"Duplicate feature column name found for columns: {column} and "
                f"{seen[column.name]}. This usually means that these columns refer to same "
                "base feature. Either one must be discarded or a duplicated but renamed item "
                "must be inserted in features dict."
            )
        seen[column.name] = column
    return columns


def sequence_input_layer(features, feature_columns, weight_collections=None, trainable=True):
    """The sequence columns' values as one [batch, T, D] float tensor (each column's
    values a step flattened, concatenated in the order of the columns' names) and the
    int64 [batch] sequence lengths.

    Returns:
      (input_layer, sequence_length).

    Raises:
      ValueError: no columns, a column that is not a sequence column (numeric, or an
        indicator or embedding column over a sequence_categorical_column_with_*), two
        columns of one name, a feature missing from `features`, static batch sizes
        that differ.
      TypeError: a sequence feature given as a dense Tensor (it must be sparse).
      InvalidArgumentError: (when run) columns whose sequence lengths differ.
    """
    columns = _check_sequence_columns(feature_columns)
    return _sequence_layer(
        features, columns, weight_collections, trainable,
        var_scope.variable_scope(None, default_name="sequence_input_layer"),
    )  # fmt: skip


def _sequence_layer(features, columns, weight_collections, trainable, scope):
    """sequence_input_layer's body in `scope` (also tf.keras.experimental.SequenceFeatures',
    in the layer's own scope)."""
    # (Not in MODEL_VARIABLES: TF 2.15.1's SequenceFeatures puts them in no other.)
    collections = list(weight_collections or [])
    if ops.GraphKeys.GLOBAL_VARIABLES not in collections:
        collections.append(ops.GraphKeys.GLOBAL_VARIABLES)
    ctx = _Ctx(collections, trainable, checkpoint_utils.init_from_checkpoint)
    with scope:
        builder = _SequenceBuilder(features)
        outputs, lengths = [], []
        for column in sorted(columns, key=lambda c: c.name):
            with var_scope.variable_scope(None, default_name=column._var_scope_name):
                dense, length = column._sequence_dense(builder, ctx)
                outputs.append(_steps_flat(dense, column._num_elements))
                lengths.append(length)
        _check_static_batches(sorted(columns, key=lambda c: c.name), outputs)
        return manip_ops.concat(outputs, -1), _all_equal(lengths)


def _check_static_batches(columns, outputs):
    known = [(c.name, t.shape[0]) for c, t in zip(columns, outputs, strict=True)]
    known = [(name, int(d)) for name, d in known if tensor_shape.dimension_value(d) is not None]
    if len({d for _, d in known}) > 1:
        raise ValueError(
            "Batch size (first dimension) of each feature must be same. Batch size of "
            f"columns ({', '.join(n for n, _ in known)}): ({', '.join(str(d) for _, d in known)})"
        )


class _SequenceBuilder(_Builder):
    """A model call's features where a sequence feature must be a SparseTensor."""

    @staticmethod
    def _raw(key, feature):
        if not (_is_sparse(feature) or isinstance(feature, SparseTensorValue)):
            raise TypeError("Input must be a SparseTensor.")
        if not isinstance(feature, SparseTensor):
            feature = SparseTensor.from_value(feature)
        return _Builder._raw(key, feature)


def _steps_flat(dense, num_elements):
    """[batch, T, ...] as [batch, T, num_elements], keeping the static batch and T."""
    shape = array_ops.shape(dense, out_type=dtypes.int32)
    out = array_ops.reshape(dense, manip_ops.stack([shape[0], shape[1], num_elements]))
    out.set_shape(dense.shape[:2].concatenate([num_elements]))
    return out


def _all_equal(lengths):
    if len(lengths) == 1:
        return lengths[0]
    with ops.name_scope(None, "assert_all_equal"):
        checks = [check_ops.assert_equal(lengths[0], other) for other in lengths[1:]]
        with ops.control_dependencies(checks):
            return array_ops.identity(lengths[0])
