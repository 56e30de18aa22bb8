"""`tf.experimental.StructuredTensor`: a tensor of structures, as TF 2.21's graph-mode
class.  Each of its elements is a record of named fields; it holds one value per field
(a Tensor, a RaggedTensor or a nested StructuredTensor) whose outer dimensions are the
StructuredTensor's own shape, which may be ragged.

Invariants: every field's shape starts with `shape` (its first `rank` dimensions); the
shape is a DynamicRaggedShape (`_ragged_shape`) of `rank - 1` row partitions and an inner
shape of one dimension (its number of elements), or none for a scalar.  Field names
match `[a-zA-Z][a-zA-Z0-9_]*`.  A StructuredTensor never changes once built (with_updates
and the other methods build new ones).  Its components (`tf.nest.flatten(st,
expand_composites=True)`) are its fields' components by field name, then its inner shape
and its partitions' row splits, as TF's.

As TF's in graph mode, `to_pyval` raises ValueError (it needs eager mode) and a Session
fetch of a StructuredTensor is a TypeError: fetch its fields.  tf.cond carries one;
what differs from TF: asyncflow's tf.function takes no composite argument yet (nor a
RaggedTensor), so a StructuredTensor cannot cross one.
"""

from __future__ import annotations

import re

import numpy as np

from asyncflow import dtypes, nest, ragged, tensor_shape
from asyncflow import graph as ops
from asyncflow.composite_specs import (
    RaggedTensorSpec,
    register_type_spec_from_value,
    type_spec_from_value,
)
from asyncflow.dynamic_ragged_shape import DynamicRaggedShape
from asyncflow.framework_extras import TensorSpec
from asyncflow.ops import reduction_ops
from asyncflow.ragged import RaggedTensor
from asyncflow.ragged_methods import _const, _op, _static
from asyncflow.row_partition import RowPartition
from asyncflow.type_spec import TypeSpec

__all__ = ["StructuredTensor"]

_FIELD_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]*$")
_BAD_INDEX = (
    "Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
    "tf.int32/tf.int64 tensors are valid indices, got {!r}"
)


def _shape_of(value) -> tensor_shape.TensorShape:
    return value.shape


def _convert_field(value):
    """A field's value as a Tensor, RaggedTensor or StructuredTensor.

    Raises:
      TypeError: a value nothing converts (TF's message).
    """
    if isinstance(value, (ops.Tensor, RaggedTensor, StructuredTensor)):
        return value
    try:
        return ops.convert_to_tensor(value)
    except (TypeError, ValueError):
        raise TypeError(f"Unexpected type for value in `fields`: {value}") from None


def _check_name(key) -> None:
    if not isinstance(key, str):
        raise TypeError(f"Unexpected type for key in `fields`: {key}")
    if not _FIELD_NAME.match(key):
        raise ValueError(f"Field name {key!r} is not currently allowed.")


def _partitions_of(value, count) -> list:
    """The first `count` row partitions of a field (its ragged dimensions, then uniform
    ones for its dense dimensions)."""
    if isinstance(value, StructuredTensor):
        return list(value.row_partitions[:count])
    out = []
    if isinstance(value, RaggedTensor):
        out = [RowPartition.from_row_splits(s, validate=False) for s in value.nested_row_splits]
        out = out[:count]
        value = value.flat_values
        nvals = out[-1].nvals() if out else None
    else:
        nvals = None
    dims = value.shape.as_list() if value.shape.rank is not None else []
    start = 0 if nvals is None else 1
    if nvals is None:
        nvals = _dim_tensor(value, 0)
    for axis in range(start + 1, start + 1 + count - len(out)):
        length = dims[axis] if axis < len(dims) and dims[axis] is not None else None
        length_t = _const(length, dtypes.int64) if length is not None else _dim_tensor(value, axis)
        part = RowPartition.from_uniform_row_length(length_t, nrows=nvals, validate=False,
                                                    dtype=dtypes.int64)  # fmt: skip
        out.append(part)
        nvals = part.nvals()
    return out


def _dim_tensor(value, axis):
    """value's dimension `axis` as an int64 scalar (a constant where known)."""
    dims = value.shape.as_list() if value.shape.rank is not None else []
    if axis < len(dims) and dims[axis] is not None:
        return _const(dims[axis], dtypes.int64)
    shape = _op("Shape", value, out_type=dtypes.int64)
    return shape[axis]


def _nrows_of(value):
    if isinstance(value, StructuredTensor):
        return value.nrows()
    if isinstance(value, RaggedTensor):
        return _cast64(value.nrows())
    return _dim_tensor(value, 0)


def _cast64(t):
    return t if t.dtype == dtypes.int64 else _op("Cast", t, DstT=dtypes.int64)


def _field_repr(value) -> str:
    if isinstance(value, StructuredTensor):
        return repr(value).replace("\n", "\n" + " " * 12)
    return str(value)


def _shape_str(shape: tensor_shape.TensorShape) -> str:
    dims = ["?" if d is None else str(d) for d in shape.as_list()]
    return "(" + dims[0] + ",)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"


class StructuredTensor:
    """`tf.experimental.StructuredTensor` (see the module note).  Build one with
    `from_pyval`, `from_fields` or `from_fields_and_rank`."""

    __hash__ = None  # (TF's: == builds a tensor)

    def __init__(self, fields, ragged_shape, shape=None):
        self._fields = dict(fields)
        self._ragged_shape = ragged_shape
        self._shape = shape if shape is not None else ragged_shape._to_tensor_shape()

    # -- factories

    @classmethod
    def from_fields(cls, fields, shape=(), nrows=None, row_partitions=None, validate=False):
        """A StructuredTensor of `fields` (name -> value), whose shape is `shape` (each
        field's shape starts with it).  nrows and row_partitions give the outer length
        and the partitions of a ragged shape when no field does.

        Raises:
          TypeError: a field name that is not a str, a value nothing converts.
          ValueError: a field name TF refuses, a shape of unknown rank, a field whose
            shape does not start with `shape`, row_partitions for a rank below 2.
        """
        del validate  # (the partitions are checked where they are built)
        shape = tensor_shape.as_shape(shape)
        if shape.rank is None:
            raise ValueError("StructuredTensor's shape must have known rank.")
        rank = shape.rank
        converted = {}
        for key, value in fields.items():
            _check_name(key)
            converted[key] = _convert_field(value)
        for value in converted.values():
            field_shape = _shape_of(value)
            prefix = field_shape[:rank] if field_shape.rank is not None else [None] * rank
            shape = shape.merge_with(tensor_shape.as_shape(prefix))
        if rank < 2 and row_partitions:
            raise ValueError("row_partitions must be None or [] if shape.rank<2")
        with ops.name_scope(None, "StructuredTensor", []):
            if rank >= 2:
                if row_partitions is None:
                    if not converted:
                        raise ValueError(
                            "When rank > 1 and there are no fields, row_partitions must be given"
                        )
                    row_partitions = _partitions_of(next(iter(converted.values())), rank - 1)
                row_partitions = tuple(row_partitions)
                if len(row_partitions) != rank - 1:
                    raise ValueError("len(row_partitions) must be shape.rank-1")
                inner = _op("Reshape", _cast64(row_partitions[-1].nvals()),
                            _const([1], dtypes.int32))  # fmt: skip
                dims = [row_partitions[0].static_nrows]
                dims += [p.static_uniform_row_length for p in row_partitions]
                shape = shape.merge_with(tensor_shape.TensorShape(dims))
                ragged_shape = DynamicRaggedShape(row_partitions, inner, dtype=dtypes.int64)
            elif rank == 1:
                if nrows is not None:
                    nrows = _cast64(ops.convert_to_tensor(nrows, dtype=dtypes.int64))
                elif shape[0].value is not None:
                    nrows = _const(shape[0].value, dtypes.int64)
                elif converted:
                    nrows = _nrows_of(next(iter(converted.values())))
                else:
                    raise ValueError("nrows must be specified if rank==1 and `fields` is empty.")
                known = _static(nrows)
                if known is not None:
                    shape = shape.merge_with(tensor_shape.TensorShape([int(known)]))
                inner = _op("Reshape", nrows, _const([1], dtypes.int32))
                ragged_shape = DynamicRaggedShape([], inner, dtype=dtypes.int64,
                                                  static_inner_shape=shape)  # fmt: skip
            else:
                ragged_shape = DynamicRaggedShape([], _const(np.zeros([0], np.int64),
                                                             dtypes.int64))  # fmt: skip
        return cls(converted, ragged_shape, shape)

    @classmethod
    def from_fields_and_rank(cls, fields, rank, validate=False, dtype=None):
        """A StructuredTensor of rank `rank` whose shape its fields give.

        Raises:
          ValueError: no fields, or a rank that is not a positive int.
        """
        del dtype
        if not fields:
            raise ValueError("Must provide at least one field")
        if not isinstance(rank, int) or rank < 0:
            raise ValueError("rank must be a nonnegative integer")
        first = _convert_field(next(iter(fields.values())))
        shape = _shape_of(first)[:rank] if rank else tensor_shape.TensorShape([])
        if rank >= 2:
            dims = [shape[0].value] + [None] * (rank - 1)
            return cls.from_fields(fields, dims, row_partitions=_partitions_of(first, rank - 1),
                                   validate=validate)  # fmt: skip
        nrows = _nrows_of(first) if rank == 1 else None
        return cls.from_fields(fields, shape, nrows=nrows, validate=validate)

    @classmethod
    def from_shape(cls, ragged_shape) -> StructuredTensor:
        """A StructuredTensor of no fields whose shape is `ragged_shape` (a
        DynamicRaggedShape)."""
        return cls({}, ragged_shape)

    @classmethod
    def from_pyval(cls, pyval, typespec=None):
        """The StructuredTensor of Python value `pyval`: a dict becomes a scalar
        StructuredTensor of its items; a (nested) list of dicts one of that shape, ragged
        where the lists' lengths differ; a field's values, tensors (tf.ragged.constant).
        A value without dicts comes back as a Tensor or RaggedTensor.  `typespec` (a
        StructuredTensor.Spec, TensorSpec or RaggedTensorSpec) gives the fields' dtypes
        and the shapes they must fit.

        Raises:
          KeyError: dicts of one list with different keys.
          ValueError: a list mixing dicts and other values, dicts at different depths,
            values TF cannot convert ("Error parsing path ..."), a value that does not
            fit typespec.
          TypeError: a key that is not a str.
        """
        return _from_pyval(pyval, typespec, ())

    # -- what it holds

    @property
    def shape(self) -> tensor_shape.TensorShape:
        return self._shape

    @property
    def rank(self) -> int:
        return self._shape.rank

    @property
    def row_partitions(self) -> tuple:
        """The partitions of dimensions 1..rank-1 (none for a rank below 2)."""
        return self._ragged_shape.row_partitions

    def nrows(self):
        """The number of rows (an int64 scalar tensor), None for a scalar."""
        if self.rank == 0:
            return None
        return self._ragged_shape[0]

    def field_names(self) -> tuple:
        return tuple(self._fields)

    def field_value(self, field_name):
        """The value of a field: a name, or a tuple of names through nested structures.

        Raises:
          KeyError: no such field (or a path through a value that has no fields).
          ValueError: an empty path.
        """
        if not isinstance(field_name, tuple):
            return self._fields[field_name]
        if not field_name:
            raise ValueError("Empty field path")
        value = self
        for name in field_name:
            if not isinstance(value, StructuredTensor):
                raise KeyError(f"Field path {field_name!r} not found in {self!r}")
            value = value._fields[name]
        return value

    def to_pyval(self):
        """Raises ValueError: asyncflow builds graphs, and TF converts only in eager
        mode."""
        raise ValueError("StructuredTensor.to_pyval() is only supported in eager mode.")

    @property
    def _type_spec(self) -> StructuredTensor.Spec:
        return StructuredTensor.Spec.from_value(self)

    # -- what control flow carries (found by name in ops/control_flow_contexts.py)

    def _cf_parts(self) -> list:
        return _to_components(self)

    def _cf_rebuild(self, parts):
        return _from_components(self, parts)

    def _cf_kind(self):
        """What two values must share to be carried by one cond: the fields' names and
        kinds, the rank and the partitions' count."""
        return (StructuredTensor, tuple(self._fields), self.rank,
                tuple(type(v).__name__ for v in self._fields.values()))  # fmt: skip

    # -- new structures from this one

    def _rebuilt(self, fields) -> StructuredTensor:
        return StructuredTensor(fields, self._ragged_shape, self._shape)

    def with_updates(self, updates, validate=False) -> StructuredTensor:
        """This structure with fields set, changed or deleted: `updates` maps a name or
        a path (a tuple of names) to a value, a function of the old value, or None
        (delete).

        Raises:
          ValueError: deleting a missing field, a sub-field of a missing field, a value
            whose shape does not start with this structure's.
        """
        grouped: dict = {}
        for key, value in updates.items():
            path = key if isinstance(key, tuple) else (key,)
            if not path:
                raise ValueError("Empty field path")
            grouped.setdefault(path[0], []).append((path, value))
        fields = dict(self._fields)
        for name, items in grouped.items():
            for path, value in items:
                if len(path) == 1:
                    fields = _update_one(fields, path, value)
            deeper = {p[1:]: v for p, v in items if len(p) > 1}
            if deeper:
                child = fields.get(name)
                if not isinstance(child, StructuredTensor):
                    raise ValueError(
                        "`StructuredTensor.with_updates` cannot create new sub-field "
                        f"{next(iter(p for p, _ in items if len(p) > 1))!r} if parent field "
                        f"{(name,)!r} is not set."
                    )
                fields[name] = child.with_updates(deeper, validate)
        try:
            return StructuredTensor.from_fields(
                fields, self._shape, nrows=self.nrows(),
                row_partitions=self.row_partitions or None, validate=validate,
            )  # fmt: skip
        except ValueError as e:
            raise ValueError(f"`StructuredTensor.with_updates` failed\n{e}") from e

    def promote(self, source_path, new_name) -> StructuredTensor:
        """This structure with the field at `source_path` copied to its grandparent
        structure as `new_name` (the dimensions between them merged).

        Raises:
          ValueError: a path of fewer than two names.
        """
        source_path = tuple(source_path)
        if len(source_path) < 2:
            raise ValueError("source_path must have length at least two")
        grandparent = self.field_value(source_path[:-2]) if len(source_path) > 2 else self
        parent = self.field_value(source_path[:-1])
        value = parent.field_value(source_path[-1])
        if parent.rank - grandparent.rank >= 2:
            value = value.merge_dims(grandparent.rank, parent.rank - 1)
        return self.with_updates({source_path[:-2] + (new_name,): value})

    def merge_dims(self, outer_axis, inner_axis) -> StructuredTensor:
        """Dimensions outer_axis..inner_axis of this structure and its fields merged
        into one.

        Raises:
          ValueError: an axis out of range, outer_axis > inner_axis (TF's messages).
        """
        rank = self.rank
        outer = _normalized_axis("outer_axis", outer_axis, rank)
        inner = _normalized_axis("inner_axis", inner_axis, rank)
        if outer > inner:
            raise ValueError(
                f"Expected outer_axis ({outer_axis}) to be less than or equal to inner_axis "
                f"({inner_axis})"
            )
        if outer == inner:
            return self
        fields = {k: _merge_field(v, outer, inner) for k, v in self._fields.items()}
        parts = list(self.row_partitions)
        dims = self._shape.as_list()
        merged = _product(dims[outer : inner + 1])
        new_dims = dims[:outer] + [merged] + dims[inner + 1 :]
        if outer == 0:
            nrows = parts[inner - 1].nvals()
            kept = parts[inner:]
        else:
            splits = parts[outer - 1].row_splits()
            for p in parts[outer:inner]:
                splits = _op("GatherV2", p.row_splits(), splits, _const(0, dtypes.int32))
            kept = [*parts[: outer - 1], RowPartition.from_row_splits(splits, validate=False),
                    *parts[inner:]]  # fmt: skip
            nrows = self.nrows()
        return StructuredTensor.from_fields(fields, new_dims, nrows=nrows,
                                            row_partitions=kept or None)  # fmt: skip

    def partition_outer_dimension(self, row_partition) -> StructuredTensor:
        """This structure's rows grouped by `row_partition` (a RowPartition over them):
        one dimension more, ragged unless the partition is uniform.

        Raises:
          TypeError: row_partition is not a RowPartition.
          ValueError: a scalar structure.
        """
        if not isinstance(row_partition, RowPartition):
            raise TypeError("row_partition must be a RowPartition.")
        self._shape.with_rank_at_least(1)
        fields = {k: _partition_field(v, row_partition) for k, v in self._fields.items()}
        dims = [row_partition.static_nrows, row_partition.static_uniform_row_length]
        if self.rank >= 2:
            parts = [row_partition, *self.row_partitions]
        else:
            parts = [row_partition]
        shape = tensor_shape.TensorShape(dims + self._shape.as_list()[1:])
        return StructuredTensor.from_fields(fields, shape, row_partitions=parts)

    # -- indexing and comparison

    def __getitem__(self, key):
        """A field (a name, or names, on a scalar structure), or the elements the
        leading int / slice indices pick, then a field of them.

        Raises:
          KeyError: no such field.
          TypeError: a field name before the indices of a non-scalar structure.
        """
        key = key if isinstance(key, tuple) else (key,)
        if not key:
            return self
        if self.rank == 0:
            if not isinstance(key[0], str):
                raise ValueError(
                    f"Key for indexing a StructuredTensor must be a string: {key[0]!r}"
                )
            value = self._fields[key[0]]
            return value[key[1:]] if len(key) > 1 else value
        count = 0
        while count < len(key) and not isinstance(key[count], str):
            count += 1
        if count == 0:
            raise TypeError(_BAD_INDEX.format(key[0]))
        index, rest = key[:count], key[count:]
        if rest:
            value = self._fields[rest[0]]
            return value[index + rest[1:]]
        return self._indexed(index)

    def _indexed(self, index) -> StructuredTensor:
        if len(index) > self.rank:
            raise ValueError("Too many indices for StructuredTensor")
        fields = {k: v[index] for k, v in self._fields.items()}
        dims = []
        for i, d in enumerate(self._shape.as_list()):
            if i >= len(index):
                dims.append(d)
            elif isinstance(index[i], slice):
                dims.append(None if d is None else len(range(d)[index[i]]))
        if not dims:
            return StructuredTensor.from_fields(fields, [])
        if fields:
            return StructuredTensor.from_fields(fields, dims)
        if self.rank != 1:
            raise ValueError("asyncflow indexes a StructuredTensor of no fields only of rank 1")
        rows = _op("Range", _const(0, dtypes.int64), self.nrows(), _const(1, dtypes.int64))
        return StructuredTensor.from_fields(
            {}, dims, nrows=_op("Size", rows[index[0]], out_type=dtypes.int64)
        )

    def __eq__(self, other):
        """A bool scalar tensor: whether both have the same fields, shape and values."""
        with ops.name_scope(None, "StructuredTensorEqual", []):
            if not isinstance(other, StructuredTensor):
                return _const(False, dtypes.bool)
            mine = nest.flatten(self, expand_composites=True)
            theirs = nest.flatten(other, expand_composites=True)
            if (
                set(self._fields) != set(other._fields)
                or self.rank != other.rank
                or len(mine) != len(theirs)
                or not self._type_spec.is_compatible_with(other._type_spec)
            ):
                return _const(False, dtypes.bool)
            each = [_tensors_equal(a, b) for a, b in zip(mine, theirs, strict=True)]
            return reduction_ops.reduce_all(_op("Pack", each, axis=0)) if each else (
                _const(True, dtypes.bool))  # fmt: skip

    def __ne__(self, other):
        return _op("LogicalNot", self.__eq__(other))

    def __repr__(self) -> str:
        items = ",\n        ".join(f'"{k}": {_field_repr(v)}' for k, v in self._fields.items())
        return (
            "<StructuredTensor(\n    fields={\n        " + items + "},\n    shape="
            + _shape_str(self._shape) + ")>"
        )  # fmt: skip


# -- helpers of the methods


def _update_one(fields: dict, path: tuple, value) -> dict:
    name = path[0]
    if value is None:
        if name not in fields:
            raise ValueError(
                f"`StructuredTensor.with_updates` cannot delete field {path!r} because it "
                "is not present."
            )
        del fields[name]
    elif callable(value):
        if name not in fields:
            raise ValueError(
                f"`StructuredTensor.with_updates` cannot update field {path!r} because it "
                "is not present."
            )
        fields[name] = value(fields[name])
    else:
        fields[name] = value
    return fields


def _normalized_axis(name, axis, rank) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"{name}={axis} out of bounds: expected {-rank}<={name}<{rank}")
    return axis + rank if axis < 0 else axis


def _product(dims):
    out = 1
    for d in dims:
        if d is None:
            return None
        out *= d
    return out


def _merge_field(value, outer, inner):
    if isinstance(value, (StructuredTensor, RaggedTensor)):
        return value.merge_dims(outer, inner)
    shape = _op("Shape", value, out_type=dtypes.int64)
    rank = value.shape.rank
    parts = [_const([-1], dtypes.int64)]
    if outer:
        parts.insert(0, shape[:outer])
    if inner + 1 < rank:
        parts.append(shape[inner + 1 :])
    new_shape = _op("ConcatV2", parts, _const(0, dtypes.int32))
    return _op("Reshape", value, new_shape)


def _partition_field(value, row_partition):
    if isinstance(value, StructuredTensor):
        return value.partition_outer_dimension(row_partition)
    if row_partition.is_uniform():
        return RaggedTensor.from_uniform_row_length(
            value, row_partition.uniform_row_length(), nrows=row_partition.nrows(), validate=False
        )
    return RaggedTensor.from_row_splits(value, row_partition.row_splits(), validate=False)


def _tensors_equal(a, b):
    """Whether tensors a and b have one shape and the same values (a bool scalar)."""
    if a.dtype != b.dtype or a.shape.rank != b.shape.rank:
        return _const(False, dtypes.bool)
    if not a.shape.is_compatible_with(b.shape):
        return _const(False, dtypes.bool)
    flat_a = _op("Reshape", a, _const([-1], dtypes.int32))
    flat_b = _op("Reshape", b, _const([-1], dtypes.int32))
    size_a = _op("Size", a, out_type=dtypes.int32)
    size_b = _op("Size", b, out_type=dtypes.int32)
    n = _op("Minimum", size_a, size_b)
    same_shape = reduction_ops.reduce_all(
        _op(
            "Equal", _op("Shape", a, out_type=dtypes.int32), _op("Shape", b, out_type=dtypes.int32)
        )
    )
    same_values = reduction_ops.reduce_all(_op("Equal", flat_a[:n], flat_b[:n]))
    return _op("LogicalAnd", same_shape, same_values)


# -- from_pyval


def _from_pyval(pyval, typespec, path):
    if isinstance(pyval, dict):
        return _from_pydict(pyval, typespec, path)
    if isinstance(pyval, (list, tuple)):
        depth = _dict_depth(pyval)
        if depth is None:
            return _from_pylist_of_value(pyval, typespec, path)
        return _from_pylist_of_dict(pyval, depth, typespec, path)
    return _from_pyscalar(pyval, typespec, path)


def _field_spec(typespec, key):
    if isinstance(typespec, StructuredTensor.Spec):
        return typespec._fields.get(key)
    return None


def _mismatch(path, first, second) -> ValueError:
    return ValueError(f"Value at {path!r} does not match typespec: {first!r} vs {second!r}")


def _from_pydict(pyval, typespec, path):
    if typespec is not None and (
        not isinstance(typespec, StructuredTensor.Spec) or set(typespec._fields) != set(pyval)
    ):
        raise _mismatch(path, pyval, typespec)
    fields = {}
    for key, value in pyval.items():
        _check_name(key)
        fields[key] = _from_pyval(value, _field_spec(typespec, key), path + (key,))
    return StructuredTensor.from_fields(fields, shape=())


def _dict_depth(pyval):
    """The list depth at which pyval holds dicts (None if it holds none).

    Raises:
      ValueError: dicts beside other values, or at different depths.
    """
    depths, values = set(), [False]

    def walk(x, depth):
        if isinstance(x, dict):
            depths.add(depth)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y, depth + 1)
        else:
            values[0] = True

    for item in pyval:
        walk(item, 1)
    if not depths:
        return None
    if values[0]:
        raise ValueError("Expected dict or nested list/tuple of dict")
    if len(depths) > 1:
        raise ValueError("Inconsistent depth of dictionaries")
    return depths.pop()


def _from_pylist_of_dict(pyval, depth, typespec, path):
    """Dicts `depth` lists deep: a StructuredTensor of rank `depth`."""
    lengths = [[] for _ in range(depth - 1)]
    dicts = []

    def walk(x, level):
        if level == depth:
            dicts.append(x)
            return
        lengths[level - 1].append(len(x))
        for y in x:
            walk(y, level + 1)

    for item in pyval:
        walk(item, 1)
    keys = list(dicts[0]) if dicts else []
    for d in dicts:
        for k in d:
            if k not in keys:
                raise KeyError(k)
        for k in keys:
            if k not in d:
                raise KeyError(k)
    partitions = [RowPartition.from_row_lengths(np.asarray(ls, np.int64), validate=False)
                  for ls in lengths]  # fmt: skip
    if typespec is not None and (
        not isinstance(typespec, StructuredTensor.Spec) or set(typespec._fields) != set(keys)
    ):
        raise _mismatch(path, pyval, typespec)
    fields = {}
    for key in keys:
        _check_name(key)
        # (a field's spec describes its values under every partition: used at depth 1)
        spec = _field_spec(typespec, key) if depth == 1 else None
        value = _from_pyval([d[key] for d in dicts], spec, path + (key,))
        for p in reversed(partitions):
            value = _partition_field(value, p)
        fields[key] = value
    shape = [len(pyval)] + [None] * (depth - 1)
    return StructuredTensor.from_fields(fields, shape, nrows=len(pyval),
                                        row_partitions=partitions or None)  # fmt: skip


def _from_pyscalar(pyval, typespec, path):
    return _from_pylist_of_value(pyval, typespec, path)


def _from_pylist_of_value(pyval, typespec, path):
    """A Python value (no dicts) as a Tensor or RaggedTensor (of typespec's dtype, and
    checked against its shape, where given).

    Raises:
      ValueError: a value TF cannot convert, or one that does not fit typespec.
    """
    try:
        if isinstance(typespec, RaggedTensorSpec):
            rr = typespec.ragged_rank
            inner = typespec.shape[rr + 1 :] if typespec.shape.rank is not None else None
            return ragged.constant(
                pyval, dtype=typespec.dtype, ragged_rank=rr,
                inner_shape=None if inner is None else tuple(inner.as_list()),
                row_splits_dtype=typespec.row_splits_dtype,
            )  # fmt: skip
        if isinstance(typespec, TensorSpec):
            result = ops.convert_to_tensor(pyval, dtype=typespec.dtype)
        elif isinstance(pyval, (list, tuple)):
            result = ragged.constant(pyval)
        else:
            result = ops.convert_to_tensor(pyval)
    except (TypeError, ValueError) as e:
        raise ValueError(f"Error parsing path {path!r}") from e
    if isinstance(typespec, TensorSpec) and not typespec.shape.is_compatible_with(result.shape):
        raise _mismatch(path, typespec, pyval)
    return result


# -- its TypeSpec


class _StructuredTensorSpec(TypeSpec):
    """`tf.experimental.StructuredTensor.Spec(_fields, _ragged_shape)`: the specs of
    the fields by name and the DynamicRaggedShape.Spec of the shape."""

    __slots__ = ("_fields", "_ragged_shape")

    def __init__(self, _fields, _ragged_shape):
        self._fields = dict(_fields)
        self._ragged_shape = _ragged_shape

    value_type = property(lambda self: StructuredTensor)

    @property
    def _shape(self) -> tensor_shape.TensorShape:
        return self._ragged_shape._to_tensor_shape()

    @property
    def shape(self) -> tensor_shape.TensorShape:
        return self._shape

    @property
    def rank(self):
        return self._ragged_shape.rank

    def _serialize(self) -> tuple:
        return (self._fields, self._ragged_shape)

    def _rebuild(self, fields: tuple):
        return StructuredTensor.Spec(*fields)

    @classmethod
    def from_value(cls, value):
        if not isinstance(value, StructuredTensor):
            raise TypeError(f"Expected a StructuredTensor, got {value!r}")
        fields = {k: type_spec_from_value(v) for k, v in value._fields.items()}
        shape = DynamicRaggedShape.Spec.from_value(value._ragged_shape)
        static = value.shape
        if value.rank == 1 and static[0].value is not None:  # (what the shape knows)
            shape = DynamicRaggedShape.Spec([], static, dtypes.int64)
        return cls(fields, shape)

    def __repr__(self) -> str:
        return (
            f"StructuredTensor.Spec(_fields={self._fields!r}, "
            f"_ragged_shape={self._ragged_shape!r})"
        )


_StructuredTensorSpec.__name__ = "StructuredTensor.Spec"  # (TF's)
_StructuredTensorSpec.__qualname__ = "StructuredTensor.Spec"
StructuredTensor.Spec = _StructuredTensorSpec
register_type_spec_from_value(StructuredTensor, _StructuredTensorSpec.from_value)


# -- tf.nest with expand_composites


def _to_components(st: StructuredTensor) -> list:
    out = []
    for key in sorted(st._fields):
        out.extend(nest.flatten(st._fields[key], expand_composites=True))
    out.append(st._ragged_shape.inner_shape)
    out.extend(p.row_splits() for p in st.row_partitions)
    return out


def _from_components(like: StructuredTensor, components) -> StructuredTensor:
    components, pos, fields = list(components), 0, {}
    for key in sorted(like._fields):
        n = len(nest.flatten(like._fields[key], expand_composites=True))
        fields[key] = nest.pack_sequence_as(like._fields[key], components[pos : pos + n],
                                            expand_composites=True)  # fmt: skip
        pos += n
    inner = components[pos]
    parts = [RowPartition.from_row_splits(s, validate=False) for s in components[pos + 1 :]]
    static = like._ragged_shape._static_inner_shape
    dtype = like._ragged_shape.dtype
    shape = DynamicRaggedShape(parts, inner, dtype=dtype, static_inner_shape=static)
    return StructuredTensor({k: fields[k] for k in like._fields}, shape, like.shape)


nest.register_composite(StructuredTensor, _to_components, _from_components)
