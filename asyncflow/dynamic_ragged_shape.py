"""`tf.experimental.DynamicRaggedShape`: the shape of a (possibly ragged) tensor as row
partitions (one per ragged or partitioned dimension, outermost first) and the dense
shape of the flat values they partition (`inner_shape`), as TF 2.21's graph-mode class.

Invariant: `inner_shape[0]` is the last partition's number of values; `rank` is
`num_row_partitions + inner_rank`.  `DynamicRaggedShape.Spec` is its TypeSpec: a
RowPartitionSpec per partition (static nrows, nvals, uniform_row_length), the static
inner shape and the dtype.  `broadcast_dynamic_shape` and `broadcast_to` broadcast
ragged shapes as TF's (asyncflow/ragged_broadcast.py): tf.broadcast_dynamic_shape,
tf.broadcast_to, tf.ones / tf.zeros take a DynamicRaggedShape through them.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow import ragged_broadcast as _rb
from asyncflow.ragged import RaggedTensor
from asyncflow.ragged_methods import _cast, _const, _op, _static
from asyncflow.row_partition import RowPartition
from asyncflow.type_spec import TypeSpec

__all__ = ["DynamicRaggedShape", "RowPartitionSpec", "broadcast_dynamic_shape", "broadcast_to"]


# tf.TensorSpec, which lives in a higher layer (framework_extras): composite_specs puts
# it here, and registers DynamicRaggedShape's type_spec_from_value.
_TENSOR_SPEC: list = []


def _shape_dtype(dtype, message):
    """dtype (int32 or int64: a shape's), else ValueError(message)."""
    dtype = dtypes.as_dtype(dtype)
    if dtype not in (dtypes.int32, dtypes.int64):
        raise ValueError(message)
    return dtype


def _dim(value):
    """A spec's length (an int, a Dimension or None) as a one-dimension TensorShape, so
    that specs compare lengths as TF's (None fits any)."""
    return tensor_shape.TensorShape([value])


class RowPartitionSpec(TypeSpec):
    """The TypeSpec of a RowPartition: what is known of its nrows, nvals and
    uniform_row_length before the step runs, and its dtype (TF's RowPartitionSpec)."""

    __slots__ = ("_dims", "_dtype")

    def __init__(self, nrows=None, nvals=None, uniform_row_length=None, dtype=dtypes.int64):
        self._dims = (_dim(nrows), _dim(nvals), _dim(uniform_row_length))
        self._dtype = dtypes.as_dtype(dtype)

    nrows = property(lambda self: self._dims[0][0].value)
    nvals = property(lambda self: self._dims[1][0].value)
    uniform_row_length = property(lambda self: self._dims[2][0].value)
    dtype = property(lambda self: self._dtype)
    value_type = property(lambda self: RowPartition)

    def _serialize(self) -> tuple:
        return (*self._dims, self._dtype)

    def _rebuild(self, fields: tuple) -> RowPartitionSpec:
        return RowPartitionSpec(*(d[0].value for d in fields[:3]), fields[3])

    @classmethod
    def from_value(cls, value) -> RowPartitionSpec:
        if not isinstance(value, RowPartition):
            raise TypeError(f"Expected a RowPartition, got {value!r}")
        return cls(value.static_nrows, value.static_nvals, value.static_uniform_row_length,
                   value.dtype)  # fmt: skip

    def __repr__(self) -> str:
        return (
            f"RowPartitionSpec(nrows={self.nrows}, nvals={self.nvals}, "
            f"uniform_row_length={self.uniform_row_length}, dtype={self._dtype!r})"
        )


class DynamicRaggedShape:
    """`tf.experimental.DynamicRaggedShape(row_partitions, inner_shape, dtype=None)`."""

    def __init__(self, row_partitions, inner_shape, dtype=None, validate=False,
                 static_inner_shape=None):  # fmt: skip
        self._row_partitions = tuple(row_partitions)
        if dtype is None:
            dtype = self._row_partitions[0].dtype if self._row_partitions else dtypes.int64
        self._dtype = _shape_dtype(dtype, f"Illegal dtype: {dtypes.as_dtype(dtype)!r}")
        if not isinstance(inner_shape, ops.Tensor):
            inner_shape = _const(np.asarray(inner_shape, np.int64).reshape(-1), self._dtype)
        self._inner_shape = _cast(inner_shape, self._dtype)
        known = _static(self._inner_shape)
        if static_inner_shape is None:
            if known is not None:
                static_inner_shape = tensor_shape.TensorShape([int(d) for d in known])
            else:
                rank = self._inner_shape.shape[0].value
                static_inner_shape = tensor_shape.TensorShape(None if rank is None else
                                                              [None] * rank)  # fmt: skip
        self._static_inner_shape = tensor_shape.as_shape(static_inner_shape)

    # -- factories

    @classmethod
    def from_lengths(cls, lengths, num_row_partitions=None, dtype=dtypes.int64):
        """The shape whose dimensions have `lengths`: an int for a uniform dimension, a
        tuple of row lengths for a ragged one.

        Raises:
          ValueError: a ragged dimension whose row count is not the number of values of
            the dimensions before it ("Shape not consistent.").
        """
        lengths = list(lengths)
        dtype = _shape_dtype(dtype, f"Illegal dtype: {dtypes.as_dtype(dtype)!r}")
        ragged = [i for i, d in enumerate(lengths) if isinstance(d, (tuple, list))]
        if num_row_partitions is None:
            num_row_partitions = ragged[-1] if ragged else 0
        if ragged and (ragged[0] == 0 or ragged[-1] > num_row_partitions):
            raise ValueError("Shape not consistent.")
        if not lengths:
            return cls([], _const(np.zeros([0], np.int64), dtype), dtype=dtype)
        partitions, count = [], int(lengths[0])
        for d in lengths[1 : num_row_partitions + 1]:
            if isinstance(d, (tuple, list)):
                if len(d) != count:
                    raise ValueError("Shape not consistent.")
                partitions.append(RowPartition.from_row_lengths(list(d), dtype=dtype))
                count = int(sum(d))
            else:
                partitions.append(RowPartition.from_uniform_row_length(
                    int(d), nvals=count * int(d), nrows=count, dtype=dtype))  # fmt: skip
                count *= int(d)
        inner = [count] + [int(d) for d in lengths[num_row_partitions + 1 :]]
        return cls(partitions, _const(inner, dtype), dtype=dtype)

    @classmethod
    def from_row_partitions(cls, row_partitions, dtype=None):
        """The shape of a ragged tensor with these partitions and flat values of one
        dimension."""
        row_partitions = list(row_partitions)
        if not row_partitions:
            raise ValueError("row_partitions cannot be empty")
        inner = _op("Reshape", row_partitions[-1].nvals(), _const([1], dtypes.int32))
        return cls(row_partitions, inner, dtype=dtype)

    @classmethod
    def from_tensor(cls, t, dtype=None):
        """The shape of `t` (a Tensor, or a RaggedTensor: a partition per ragged
        dimension)."""
        if isinstance(t, RaggedTensor):
            splits = t.nested_row_splits
            dt = dtypes.as_dtype(dtype) if dtype is not None else splits[0].dtype
            partitions = [RowPartition.from_row_splits(s, validate=False, dtype=dt)
                          for s in splits]  # fmt: skip
            values = t.flat_values
        else:
            values = ops.convert_to_tensor(t)
            dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int32  # (TF's)
            partitions = []
        static = values.shape
        if static.is_fully_defined():
            inner = _const(static.as_list(), dt)
        else:
            inner = _op("Shape", values, out_type=dt)
        return cls(partitions, inner, dtype=dt, static_inner_shape=static)

    # -- what it holds

    @property
    def row_partitions(self) -> tuple:
        return self._row_partitions

    @property
    def inner_shape(self):
        return self._inner_shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def num_row_partitions(self) -> int:
        return len(self._row_partitions)

    @property
    def inner_rank(self):
        return self._static_inner_shape.rank

    @property
    def rank(self):
        inner = self.inner_rank
        return None if inner is None else inner + self.num_row_partitions

    def is_uniform(self, axis) -> bool:
        """Whether dimension `axis` has one length (every dimension but the ragged)."""
        if 0 < axis <= self.num_row_partitions:
            return self._row_partitions[axis - 1].is_uniform()
        return True

    def static_lengths(self, ragged_lengths=True) -> list:
        """Each dimension's length where known at build time: an int, a tuple of row
        lengths (ragged dimensions, with ragged_lengths), or None."""
        if self.rank is None:
            raise ValueError("Cannot get static lengths of a shape of unknown rank")
        inner = self._static_inner_shape.as_list()
        if not self._row_partitions:
            return inner
        out = [self._row_partitions[0].static_nrows]
        for p in self._row_partitions:
            if p.is_uniform():
                out.append(p.static_uniform_row_length)
            elif ragged_lengths:
                known = _static(p.row_lengths())
                out.append(None if known is None else tuple(int(x) for x in known))
            else:
                out.append(None)
        return out + inner[1:]

    def _to_tensor_shape(self) -> tensor_shape.TensorShape:
        if self.rank is None:
            return tensor_shape.unknown_shape()
        lengths = self.static_lengths(ragged_lengths=False)
        return tensor_shape.TensorShape(lengths)

    def __getitem__(self, index):
        """The length of dimension `index` (a scalar tensor), or the shape of a range
        of uniform dimensions.

        Raises:
          IndexError: index not below the rank.
          ValueError: a ragged dimension (TF's messages).
        """
        rank = self.rank
        if isinstance(index, slice):
            start, stop, _ = index.indices(rank)
            if any(not self.is_uniform(i) for i in range(start, stop)):
                raise ValueError("All relevant dimensions must be uniform")
            lengths = self.static_lengths()[start:stop]
            if any(d is None for d in lengths):
                raise ValueError("asyncflow slices shapes whose lengths are known statically")
            return DynamicRaggedShape.from_lengths(lengths, dtype=self._dtype)
        if index < 0:
            index += rank
        if index >= rank:
            raise IndexError(f"Index is too big: {index}>={rank}")
        if not self.is_uniform(index):
            raise ValueError(f"Index {index} is not uniform")
        known = self.static_lengths(ragged_lengths=False)[index]
        if known is not None:
            return _const(int(known), self._dtype)
        if index == 0 and self._row_partitions:
            return self._row_partitions[0].nrows()
        if index <= self.num_row_partitions:
            return self._row_partitions[index - 1].uniform_row_length()
        return self._inner_shape[index - self.num_row_partitions]

    def with_dtype(self, dtype) -> DynamicRaggedShape:
        """This shape with its partitions and inner shape cast to `dtype`.

        Raises:
          ValueError: a dtype other than int32 and int64.
        """
        dtype = _shape_dtype(dtype, f"Illegal dtype: {dtypes.as_dtype(dtype)!r}")
        if dtype == self._dtype:
            return self
        return DynamicRaggedShape([p.with_dtype(dtype) for p in self._row_partitions],
                                  _cast(self._inner_shape, dtype), dtype=dtype,
                                  static_inner_shape=self._static_inner_shape)  # fmt: skip

    @property
    def _type_spec(self) -> DynamicRaggedShape.Spec:
        return DynamicRaggedShape.Spec.from_value(self)

    # -- equality (TF's ExtensionType rule)

    def _components(self) -> list:
        return [p.row_splits() for p in self._row_partitions] + [self._inner_shape]

    def __eq__(self, other):
        """False (a Python bool) for another type or a different Spec; else a scalar
        bool tensor: whether the row splits and inner shapes are equal (in length and
        value) when the step runs."""
        if type(self) is not type(other):
            return False
        if self._type_spec != other._type_spec:
            return False
        conditions = []
        for a, b in zip(self._components(), other._components(), strict=True):
            # Equal sizes, and [a, b] == [b, a] (one length whatever the sizes).
            conditions.append(_op("Equal", _op("Size", a), _op("Size", b)))
            both = _op("ConcatV2", [a, b], _const(0, dtypes.int32))
            swapped = _op("ConcatV2", [b, a], _const(0, dtypes.int32))
            conditions.append(_op("All", _op("Equal", both, swapped), _const([0], dtypes.int32)))
        return _op("All", _op("Pack", conditions, axis=0), _const([0], dtypes.int32))

    def __ne__(self, other):
        equal = self.__eq__(other)
        if isinstance(equal, ops.Tensor):
            return _op("LogicalNot", equal)
        return not equal

    __hash__ = None  # (TF's: unhashable)

    def __repr__(self) -> str:
        lengths = self.static_lengths() if self.rank is not None else None
        return (
            f"<DynamicRaggedShape lengths={lengths} num_row_partitions={self.num_row_partitions}>"
        )


class _DynamicRaggedShapeSpec(TypeSpec):
    """`tf.experimental.DynamicRaggedShape.Spec(row_partitions, static_inner_shape,
    dtype)`: a RowPartitionSpec per partition, the inner shape known before the step
    runs, and the dtype of the partitions and the inner shape."""

    __slots__ = ("_row_partitions", "_static_inner_shape", "_dtype")

    def __init__(self, row_partitions, static_inner_shape, dtype):
        dtype = _shape_dtype(dtype, "dtype must be tf.int32 or tf.int64")
        parts = []
        for p in row_partitions:
            if not isinstance(p, RowPartitionSpec):
                raise TypeError(f"Expected a RowPartitionSpec, got {p!r}")
            parts.append(p if p.dtype == dtype else RowPartitionSpec(
                p.nrows, p.nvals, p.uniform_row_length, dtype))  # fmt: skip
        self._row_partitions = tuple(parts)
        self._static_inner_shape = tensor_shape.as_shape(static_inner_shape)
        self._dtype = dtype

    row_partitions = property(lambda self: self._row_partitions)
    static_inner_shape = property(lambda self: self._static_inner_shape)
    dtype = property(lambda self: self._dtype)
    num_row_partitions = property(lambda self: len(self._row_partitions))
    value_type = property(lambda self: DynamicRaggedShape)

    @property
    def rank(self):
        inner = self._static_inner_shape.rank
        return None if inner is None else inner + len(self._row_partitions)

    @property
    def inner_rank(self):
        return self._static_inner_shape.rank

    def with_dtype(self, dtype):
        """This spec with `dtype` (int32 or int64) for its partitions and inner shape.

        Raises:
          ValueError: another dtype.
        """
        return DynamicRaggedShape.Spec(self._row_partitions, self._static_inner_shape, dtype)

    def _serialize(self) -> tuple:
        return (self._row_partitions, self._static_inner_shape, self._dtype)

    def _rebuild(self, fields: tuple):
        return DynamicRaggedShape.Spec(*fields)

    @classmethod
    def from_value(cls, value):
        if not isinstance(value, DynamicRaggedShape):
            raise TypeError(f"Expected a DynamicRaggedShape, got {value!r}")
        parts = [RowPartitionSpec.from_value(p) for p in value.row_partitions]
        inner = value._static_inner_shape
        # A partition's values are the next one's rows (or the inner shape's first
        # dimension): what is known of one is known of the other (TF's spec).
        counts = [p.nrows for p in parts[1:]]
        counts.append(inner.as_list()[0] if inner.rank else None)
        for i, p in enumerate(parts):
            nvals = p.nvals if p.nvals is not None else counts[i]
            nrows = p.nrows if p.nrows is not None or i == 0 else parts[i - 1].nvals
            if (nvals, nrows) != (p.nvals, p.nrows):
                parts[i] = RowPartitionSpec(nrows, nvals, p.uniform_row_length, p.dtype)
        return cls(parts, inner, value.dtype)

    # -- components (TF's: the inner shape, then the row partitions) and the tensor
    # list (one variant: a ragged tensor of ones(bool) with this shape, encoded)

    @property
    def _component_specs(self) -> tuple:
        inner = _TENSOR_SPEC[0]([self._static_inner_shape.rank], self._dtype)
        return (inner, *self._row_partitions)

    def _to_components(self, value) -> tuple:
        return (value.inner_shape, *value.row_partitions)

    def _from_components(self, components) -> DynamicRaggedShape:
        inner, *parts = components
        parts = [p if isinstance(p, RowPartition) else
                 RowPartition.from_row_splits(p, validate=False) for p in parts]  # fmt: skip
        return DynamicRaggedShape(parts, inner, dtype=self._dtype,
                                  static_inner_shape=self._static_inner_shape)  # fmt: skip

    @property
    def _flat_tensor_specs(self) -> list:
        return [_TENSOR_SPEC[0](None, dtypes.variant)]

    def _to_tensor_list(self, value) -> list:
        """[a scalar variant]: ones(bool) of `value`'s inner shape, partitioned by its
        row partitions, as RaggedTensorToVariant encodes a ragged tensor (TF's)."""
        with ops.name_scope(None, "ones", []) as scope:
            fill = [value.inner_shape, _const(True, dtypes.bool)]
            ones = ops.apply_op("Fill", fill, name=scope).outputs[0]
        splits = [p.row_splits() for p in value.row_partitions]
        with ops.name_scope(None, "RaggedToVariant", []):
            encoded = ops.apply_op(
                "RaggedTensorToVariant", [splits, ones],
                {"RAGGED_RANK": len(splits), "batched_input": False},
            ).outputs[0]  # fmt: skip
        return [encoded]

    def _from_tensor_list(self, tensor_list) -> DynamicRaggedShape:
        """The DynamicRaggedShape `_to_tensor_list` encoded.

        Raises:
          ValueError: not one tensor of dtype variant (TF's messages).
        """
        head = "Cannot create a DynamicRaggedShape from the tensor list because"
        if len(tensor_list) != 1:
            raise ValueError(f"{head} the TypeSpec expects 1 items, but the provided "
                             f"tensor list has {len(tensor_list)} items.")  # fmt: skip
        if tensor_list[0].dtype != dtypes.variant:
            raise ValueError(f"{head} item 0 ({tensor_list[0]!r}) is incompatible with the "
                             f"expected TypeSpec {self._flat_tensor_specs[0]!r}.")  # fmt: skip
        k = len(self._row_partitions)
        with ops.name_scope(None, "RaggedFromVariant", []):
            out = ops.apply_op(
                "RaggedTensorFromVariant", [tensor_list[0]],
                {"input_ragged_rank": k, "output_ragged_rank": k, "Tvalues": dtypes.bool,
                 "Tsplits": self._dtype},
            ).outputs  # fmt: skip
        *splits, ones = out
        # What TF's decoding keeps known: the shape's own dimensions (the first
        # partition's rows, the inner shape's after its first where partitioned).
        inner = self._static_inner_shape
        if k and inner.rank is not None:
            inner = tensor_shape.TensorShape([None]).concatenate(inner[1:])
        ones.set_shape(inner)
        if k and self._row_partitions[0].nrows is not None:
            splits[0].set_shape([self._row_partitions[0].nrows + 1])
        parts = [RowPartition.from_row_splits(s, validate=False) for s in splits]
        return DynamicRaggedShape(parts, _op("Shape", ones, out_type=self._dtype),
                                  dtype=self._dtype, static_inner_shape=inner)  # fmt: skip

    def _to_tensor_shape(self) -> tensor_shape.TensorShape:
        """The static shape of the values this spec describes."""
        if self.rank is None:
            return tensor_shape.unknown_shape()
        if not self._row_partitions:
            return self._static_inner_shape
        dims = [self._row_partitions[0].nrows]
        dims += [p.uniform_row_length for p in self._row_partitions]
        return tensor_shape.TensorShape(dims + self._static_inner_shape.as_list()[1:])

    def __repr__(self) -> str:
        return (
            f"DynamicRaggedShape.Spec(row_partitions={self._row_partitions!r}, "
            f"static_inner_shape={self._static_inner_shape!r}, dtype={self._dtype!r})"
        )


def _register_with_nest():
    """nest.flatten(expand_composites=True) takes a DynamicRaggedShape apart as TF's:
    its inner shape, then each partition's row splits."""
    from asyncflow import nest

    def to_components(shape):
        return [shape.inner_shape, *(p.row_splits() for p in shape.row_partitions)]

    def from_components(like, components):
        return like._type_spec._from_components(components)

    nest.register_composite(DynamicRaggedShape, to_components, from_components)


_DynamicRaggedShapeSpec.__name__ = "DynamicRaggedShape.Spec"  # (TF's)
_DynamicRaggedShapeSpec.__qualname__ = "DynamicRaggedShape.Spec"
DynamicRaggedShape.Spec = _DynamicRaggedShapeSpec
_register_with_nest()


# -- broadcasting


def _as_shape(shape) -> DynamicRaggedShape:
    """A DynamicRaggedShape, or a dense shape vector (its length known) as one."""
    if isinstance(shape, DynamicRaggedShape):
        return shape
    t = ops.convert_to_tensor(shape)
    if t.shape.rank != 1 or t.shape[0].value is None:
        raise ValueError("A dense shape broadcast with a ragged one needs a known length")
    return DynamicRaggedShape([], t, dtype=t.dtype if t.dtype in (dtypes.int32, dtypes.int64)
                              else dtypes.int64)  # fmt: skip


def _padded_partitions(shape: DynamicRaggedShape, rank: int) -> int:
    n = shape.num_row_partitions
    return n + (rank - shape.rank) if n else 0


def _levels(shape: DynamicRaggedShape, rank: int, k: int):
    splits = [p.row_splits() for p in shape.row_partitions]
    inner = _cast(shape.inner_shape, dtypes.int64)
    return _rb.shape_levels(splits, inner, shape.rank, rank, k)


def broadcast_dynamic_shape(shape_x, shape_y) -> DynamicRaggedShape:
    """`tf.broadcast_dynamic_shape` with a DynamicRaggedShape: the shape both broadcast
    to (a dimension of length 1 throughout takes the other's; ragged dimensions must
    have the same row lengths, checked when the step runs).

    Raises:
      ValueError: a rank unknown at build time, or a ragged dimension against a
        uniform one of another length.
    """
    x, y = _as_shape(shape_x), _as_shape(shape_y)
    if x.rank is None or y.rank is None:
        raise ValueError("Unable to broadcast shapes of unknown rank")
    rank = max(x.rank, y.rank)
    k = max(_padded_partitions(x, rank), _padded_partitions(y, rank))
    with ops.name_scope(None, "broadcast_dynamic_shape", []):
        lx, ly = _levels(x, rank, k), _levels(y, rank, k)
        nrows, splits, _, checks = _rb.broadcast_levels([lx, ly], k)
        count = splits[-1][-1] if splits else nrows
        dense = _op("BroadcastArgs", lx[2][1:], ly[2][1:])
        count = _op("Reshape", count, _const([1], dtypes.int32))
        inner = _op("ConcatV2", [count, dense], _const(0, dtypes.int32))
        inner = _rb._guarded(inner, checks)
        parts = [RowPartition.from_row_splits(s, validate=False) for s in splits]
        static = tensor_shape.TensorShape([None] * (rank - k))
        return DynamicRaggedShape(parts, inner, dtype=dtypes.int64, static_inner_shape=static)


def broadcast_to(rt_input, shape: DynamicRaggedShape):
    """`tf.broadcast_to(x, shape)` with a DynamicRaggedShape: x (a Tensor or
    RaggedTensor) repeated along shape's dimensions where its own have length 1 (a
    RaggedTensor, or a Tensor where the shape has no partition).

    Raises:
      ValueError: x has a ragged dimension where shape's is uniform, or more
        dimensions than shape.
      InvalidArgumentError: (when the step runs) a dimension whose lengths are neither
        1 nor shape's.
    """
    with ops.name_scope(None, "broadcast_to", []):
        k = shape.num_row_partitions
        splits = [p.row_splits() for p in shape.row_partitions]
        inner = _cast(shape.inner_shape, dtypes.int64)
        nrows = _op("Size", splits[0], out_type=dtypes.int64) - 1 if splits else inner[0]
        return _rb.broadcast_to_splits(rt_input, nrows, splits, inner, shape.rank, k)
