"""`tf.tpu.experimental.embedding_column` and `shared_embedding_columns`: TF's TPU
embedding columns, validated as TF 2.21's are.  Outside a TPU computation TF embeds
them as the feature columns they extend, and so do these: a TPU embedding column is an
`embedding_column` (the same variable, `<column>_embedding/embedding_weights`, the
same lookup) that also carries its TPU settings (max sequence length, learning-rate
function, lookup device).  The shared columns are asyncflow's TF1 shared embedding
columns with the TPU settings; TF's are its v2 columns, which `input_layer` refuses
(asyncflow's embed there too).
"""

from __future__ import annotations

import enum
import math

from asyncflow.feature_column_kinds import EmbeddingColumn, _Categorical
from asyncflow.feature_column_kinds import _SharedEmbeddingColumn as _Shared
from asyncflow.ops import init_ops

__all__ = ["embedding_column", "shared_embedding_columns"]

_ALLOWED_DEVICES = ["cpu", "tpu_tensor_core", "tpu_embedding_core"]


class EmbeddingDevice(enum.Enum):
    CPU = 1
    TPU_TENSOR_CORE = 2
    TPU_EMBEDDING_CORE = 3


class _TPUColumn:
    """The TPU settings of an embedding column and TF's accessors of them."""

    def _set_tpu(self, max_sequence_length, learning_rate_fn, device=None, core_shape=None):
        self._max_sequence_length = max_sequence_length
        self._learning_rate_fn = learning_rate_fn
        self._embedding_lookup_device = device
        self._tensor_core_shape = core_shape
        if self.is_sequence_column() and max_sequence_length < 1:
            raise ValueError(
                "max_sequence_length must be greater than 0 for sequence columns. Got "
                f"max_sequence_length={max_sequence_length} for sequence column "
                f"{self.categorical_column.name}."
            )
        if not self.is_sequence_column() and max_sequence_length != 0:
            raise ValueError(
                f"Non zero max_seq_length={max_sequence_length} specified for non sequence "
                f"column {self.categorical_column.name}."
            )

    def is_sequence_column(self) -> bool:
        return bool(self.categorical_column._is_sequence)

    def get_max_sequence_length(self) -> int:
        return self._max_sequence_length

    def get_learning_rate_fn(self):
        return self._learning_rate_fn

    def get_combiner(self) -> str:
        return self.combiner

    def get_embedding_table_size(self) -> tuple:
        return (self.categorical_column.num_buckets, self.dimension)

    def get_feature_key_name(self) -> str:
        if self.is_sequence_column():
            return self.categorical_column.categorical_column.name
        return self.categorical_column.name

    def __repr__(self):
        return type(self).__name__ + super().__repr__()[super().__repr__().index("(") :]


class _TPUEmbeddingColumnV2(_TPUColumn, EmbeddingColumn):
    def get_embedding_var_name(self) -> str:
        return self.categorical_column.name


class _TPUDeviceSpecificEmbeddingColumnV2(_TPUEmbeddingColumnV2):
    pass


class _TPUSharedEmbeddingColumnV2(_TPUColumn, _Shared):
    def get_embedding_var_name(self) -> str:
        return self.shared_embedding_collection_name


class _TPUSharedDeviceSpecificEmbeddingColumnV2(_TPUSharedEmbeddingColumnV2):
    pass


def _lookup_device(device, core_shape, columns):
    if device and device not in _ALLOWED_DEVICES:
        raise ValueError(f"If set, embedding_lookup_device must be in {_ALLOWED_DEVICES}")
    device = {
        "cpu": EmbeddingDevice.CPU,
        "tpu_tensor_core": EmbeddingDevice.TPU_TENSOR_CORE,
        "tpu_embedding_core": EmbeddingDevice.TPU_EMBEDDING_CORE,
    }.get(device, device)
    if device == EmbeddingDevice.TPU_TENSOR_CORE:
        if not core_shape:
            raise ValueError(
                "Using embedding_lookup_device=tpu_tensor_core requires tensor_core_shape to "
                "be set."
            )
        if any(c._is_sequence for c in columns):
            raise ValueError(
                "embedding_lookup_device=tpu_tensor_core currently does not support "
                "sequence columns."
            )
    return device


def _check_common(dimension, tensor_core_shape, initializer, who: str):
    if dimension is None or dimension < 1:
        raise ValueError(f"Invalid dimension {dimension}.")
    if tensor_core_shape and len(tensor_core_shape) != 2:
        raise ValueError(f"tensor_core_shape must be size 2. Got {tensor_core_shape}.")
    if initializer is not None and not callable(initializer):
        raise ValueError(f"initializer must be callable if specified. {who}")
    if initializer is None:
        return init_ops.truncated_normal_initializer(mean=0.0, stddev=1 / math.sqrt(dimension))
    return initializer


def embedding_column(categorical_column, dimension, combiner="mean", initializer=None,
                     max_sequence_length=0, learning_rate_fn=None,
                     embedding_lookup_device=None, tensor_core_shape=None,
                     use_safe_embedding_lookup=True):  # fmt: skip
    """A TPU embedding column of `categorical_column` (an embedding_column with TPU
    settings).

    Raises:
      TypeError: `categorical_column` is not categorical.
      ValueError: dimension < 1, a tensor_core_shape not of 2, an initializer not
        callable, an unknown lookup device (or tpu_tensor_core without a shape or
        with a sequence column), a sequence column without a max_sequence_length or
        a max_sequence_length for a non-sequence column.
    """
    if not isinstance(categorical_column, _Categorical):
        raise TypeError(
            "categorical_column for tpu embedding_column must be type CategoricalColumn, "
            f"got {type(categorical_column)}."
        )
    initializer = _check_common(
        dimension, tensor_core_shape, initializer,
        f"Embedding of column_name: {categorical_column.name}",
    )  # fmt: skip
    device = _lookup_device(embedding_lookup_device, tensor_core_shape, [categorical_column])
    cls = _TPUDeviceSpecificEmbeddingColumnV2 if device else _TPUEmbeddingColumnV2
    column = cls(categorical_column, dimension, combiner, initializer, None, None, None, True,
                 use_safe_embedding_lookup)  # fmt: skip
    column._set_tpu(max_sequence_length, learning_rate_fn, device, tensor_core_shape)
    return column


def shared_embedding_columns(categorical_columns, dimension, combiner="mean",
                             initializer=None, shared_embedding_collection_name=None,
                             max_sequence_lengths=None, learning_rate_fn=None,
                             embedding_lookup_device=None, tensor_core_shape=None,
                             use_safe_embedding_lookup=True):  # fmt: skip
    """TPU embedding columns of `categorical_columns` sharing one table.

    Raises:
      TypeError: a column that is not categorical.
      ValueError: as `embedding_column`; max_sequence_lengths of another length than
        the columns; columns with different bucket counts.
    """
    columns = list(categorical_columns)
    for c in columns:
        if not isinstance(c, _Categorical):
            raise TypeError(
                "categorical_column for tpu  shared_embedding_columns must be type "
                f"CategoricalColumn, got {type(c)}."
            )
    if not max_sequence_lengths:
        max_sequence_lengths = [0] * len(columns)
    if len(max_sequence_lengths) != len(columns):
        raise ValueError(
            "max_sequence_lengths and categorical_columns must be of the same length. "
            f"len(max_sequence_lengths)={len(max_sequence_lengths)} "
            f"len(categorical_columns)={len(columns)}."
        )
    initializer = _check_common(dimension, tensor_core_shape, initializer, "")
    ordered = sorted(columns, key=lambda c: c.name)
    buckets = ordered[0].num_buckets
    for c in ordered[1:]:
        if c.num_buckets != buckets:
            # (TF's words, the double space included)
            raise ValueError(
                "To use shared_embedding_column, all categorical_columns must have the same "
                f"number of buckets. Given column: {ordered[0]} with buckets: {buckets} does  "
                f"not match column: {c} with buckets: {c.num_buckets}"
            )
    if not shared_embedding_collection_name:
        shared_embedding_collection_name = "_".join(c.name for c in ordered) + "_shared_embedding"
    device = _lookup_device(embedding_lookup_device, tensor_core_shape, ordered)
    cls = _TPUSharedDeviceSpecificEmbeddingColumnV2 if device else _TPUSharedEmbeddingColumnV2
    out = []
    for c, length in zip(columns, max_sequence_lengths):
        column = cls(c, dimension, combiner, initializer, shared_embedding_collection_name,
                     None, None, None, True, use_safe_embedding_lookup)  # fmt: skip
        column._set_tpu(length, learning_rate_fn, device, tensor_core_shape)
        out.append(column)
    return out
