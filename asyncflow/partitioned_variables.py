"""Partitioned variables (OSDI §4.2): one logical variable kept as slices along one axis,
each slice an ordinary Variable that can live on its own parameter server.

- `SaveSliceInfo` records where a slice sits in the whole variable; the Saver writes
  each slice under the whole variable's name with its slice spec, as TF's V2 bundle does.
- `PartitionedVariable` is the list of slices (sorted by offset): it iterates over them,
  converts to their concatenation (`as_tensor`), assigns by splitting a value.
- The partitioners (`fixed_size_partitioner`, `min_max_variable_partitioner`,
  `variable_axis_size_partitioner`) map (shape, dtype) to a partition count per axis;
  `get_variable(partitioner=...)` calls them and creates "<name>/part_<i>".

Slices follow TF's rule: `n` slices of an axis of length `L` have lengths `L // n`, the
first `L % n` of them one longer.
"""

from __future__ import annotations

import collections.abc
import math

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops
from asyncflow.protos.variable_pb2 import SaveSliceInfoDef

__all__ = [
    "PartitionedVariable",
    "fixed_size_partitioner",
    "min_max_variable_partitioner",
    "variable_axis_size_partitioner",
]


class SaveSliceInfo:
    """Where a slice sits in its full variable (TF's `Variable.SaveSliceInfo`)."""

    def __init__(self, full_name=None, full_shape=None, var_offset=None, var_shape=None,
                 save_slice_info_def=None, import_scope=None):  # fmt: skip
        if save_slice_info_def is not None:
            full_name = save_slice_info_def.full_name
            if import_scope:
                full_name = f"{import_scope}/{full_name}"
            full_shape = list(save_slice_info_def.full_shape)
            var_offset = list(save_slice_info_def.var_offset)
            var_shape = list(save_slice_info_def.var_shape)
        self.full_name = full_name
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)
        self.var_shape = list(var_shape)

    @classmethod
    def from_spec(cls, spec: str) -> SaveSliceInfo:
        """The SaveSliceInfo a `spec` string describes ("<full shape> <offset,length:...>").

        Raises:
          ValueError: a spec not of that form.
        """
        parts = spec.split()
        if len(parts) < 2:
            raise ValueError("Spec string must contain space-separated full_shape info.")

        def integer(text, what):
            try:
                return int(text)
            except ValueError:
                raise ValueError(
                    f"Spec string {what} Found '{text}', which is not an integer."
                ) from None

        full_shape = [integer(d, "full_shape must be a sequence of integers.") for d in parts[:-1]]
        var_offset, var_shape = [], []
        for pair in parts[-1].split(":"):
            bits = pair.split(",")
            if len(bits) != 2:
                raise ValueError(
                    "Spec string must contain comma-separated pairs of offsets and shapes."
                )
            var_offset.append(integer(bits[0], "var_offset must be an integer."))
            var_shape.append(integer(bits[1], "var_shape must be an integer."))
        return cls(full_shape=full_shape, var_offset=var_offset, var_shape=var_shape)

    @property
    def spec(self) -> str:
        """The SaveV2 shape_and_slices string: "<full shape> <start,length:...>"."""
        full = " ".join(str(d) for d in self.full_shape) + " "
        return full + ":".join(f"{o},{s}" for o, s in zip(self.var_offset, self.var_shape))

    def to_proto(self, export_scope=None) -> SaveSliceInfoDef | None:
        if export_scope is not None and not self.full_name.startswith(export_scope):
            return None
        name = self.full_name
        if export_scope:
            name = name[len(export_scope) :].lstrip("/")
        return SaveSliceInfoDef(
            full_name=name,
            full_shape=self.full_shape,
            var_offset=self.var_offset,
            var_shape=self.var_shape,
        )


class PartitionedVariable:
    """A variable kept as slices along one axis (TF1's `PartitionedVariable`).

    Raises (at construction):
      TypeError: variable_list or partitions is not a list or tuple.
      ValueError: an empty list, a partition count below 1, a slice without save-slice
        info, or slices whose full shape is not `shape`.
    """

    def __init__(self, name, shape, dtype, variable_list, partitions):
        if not isinstance(variable_list, (list, tuple)):
            raise TypeError(f"variable_list is not a list or tuple: {variable_list}")
        if not isinstance(partitions, (list, tuple)):
            raise TypeError(f"partitions is not a list or tuple: {partitions}")
        if not all(p >= 1 for p in partitions):
            raise ValueError(f"partition values must be positive: {partitions}")
        if not variable_list:
            raise ValueError("variable_list may not be empty")
        shape = list(shape)
        for v in variable_list:
            if v._get_save_slice_info() is None:
                raise ValueError(
                    "All variables must have a save_slice_info available: "
                    f"{[v.name for v in variable_list]}"
                )
            if len(shape) != len(partitions):
                raise ValueError(f"len(shape) != len(partitions): {shape} vs. {partitions}")
            if v._get_save_slice_info().full_shape != shape:
                raise ValueError(
                    f"All variables' full shapes must match shape: {shape}; but full shapes "
                    f"were: {v._get_save_slice_info().full_shape}"
                )
        self._variable_list = sorted(
            variable_list, key=lambda v: v._get_save_slice_info().var_offset
        )
        self._name = name
        self._shape = shape
        self._dtype = dtype
        self._partitions = list(partitions)
        self._as_tensor = None

    def __iter__(self):
        return iter(self._variable_list)

    def __len__(self) -> int:
        axes = self._partition_axes()
        if len(axes) > 1:
            raise ValueError(f"Cannot get a length for {len(axes)} > 1 partition axes")
        return len(self._variable_list)

    def _partition_axes(self) -> list[int]:
        if all(p == 1 for p in self._partitions):
            return [0]
        return [i for i, p in enumerate(self._partitions) if p > 1]

    def _concat(self) -> ops.Tensor:
        if len(self._variable_list) == 1:
            with ops.name_scope(None):
                return array_ops.identity(self._variable_list[0], name=self._name)
        axes = self._partition_axes()
        if len(axes) > 1:
            raise NotImplementedError(
                f"Cannot concatenate along more than one dimension: {axes}.  Multi-axis "
                "partition concat is not supported"
            )
        with ops.name_scope(self._name + "/ConcatPartitions/"):
            whole = array_ops.concat(self._variable_list, axes[0])
        with ops.name_scope(None):
            return array_ops.identity(whole, name=self._name)

    def as_tensor(self) -> ops.Tensor:
        """The slices concatenated: the whole variable's value."""
        with ops.control_dependencies(None):
            return self._concat()

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self) -> tensor_shape.TensorShape:
        return self.get_shape()

    def get_shape(self) -> tensor_shape.TensorShape:
        return tensor_shape.TensorShape(self._shape)

    @property
    def op(self):
        return self.as_tensor().op  # TF1 has no single op for it either: the concat's

    @property
    def graph(self):
        return self._variable_list[0].graph

    def _get_variable_list(self) -> list:
        return self._variable_list

    def _get_partitions(self) -> list[int]:
        return self._partitions

    def _apply_assign_fn(self, assign_fn, value) -> list:
        axes = self._partition_axes()
        if len(axes) > 1:
            raise NotImplementedError(
                f"Cannot do assign action along more than one dimension: {axes}.  "
                "Multi-axis partition assign action is not supported "
            )
        if isinstance(value, list):
            if len(value) != len(self._variable_list):
                raise ValueError("One value per partition is required")
            values = value
        elif isinstance(value, PartitionedVariable):
            values = list(value)
        else:
            sizes = [tensor_shape.dimension_value(v.shape[axes[0]]) for v in self._variable_list]
            values = array_ops.split(value, sizes, axis=axes[0])
        return [assign_fn(v, values[i]) for i, v in enumerate(self._variable_list)]

    def assign(self, value, use_locking=False, name=None, read_value=True):
        def fn(var, part):
            return var.assign(part, use_locking=use_locking, name=name, read_value=read_value)

        assigns = self._apply_assign_fn(fn, value)
        return assigns if read_value else [a.op if hasattr(a, "op") else a for a in assigns]

    def assign_add(self, value, use_locking=False, name=None, read_value=True):
        def fn(var, part):
            return var.assign_add(part, use_locking=use_locking, name=name, read_value=read_value)

        assigns = self._apply_assign_fn(fn, value)
        return assigns if read_value else [a.op if hasattr(a, "op") else a for a in assigns]

    def assign_sub(self, value, use_locking=False, name=None, read_value=True):
        def fn(var, part):
            return var.assign_sub(part, use_locking=use_locking, name=name, read_value=read_value)

        assigns = self._apply_assign_fn(fn, value)
        return assigns if read_value else [a.op if hasattr(a, "op") else a for a in assigns]


def _to_tensor(v: PartitionedVariable, dtype=None, name=None, as_ref=False):
    if dtype is not None and not dtypes.as_dtype(dtype).is_compatible_with(v.dtype):
        raise ValueError(
            f"Incompatible type conversion requested to type '{dtypes.as_dtype(dtype).name}' "
            f"for variable of type '{v.dtype.name}'"
        )
    if as_ref:
        raise NotImplementedError("PartitionedVariable doesn't support being used as a reference.")
    return v.as_tensor()


ops.register_tensor_conversion_function(PartitionedVariable, _to_tensor)


# -- partitioners ---------------------------------------------------------------------------


def _element_size(dtype, bytes_per_string_element: int) -> int:
    dtype = dtypes.as_dtype(dtype)
    return bytes_per_string_element if dtype.base_dtype == dtypes.string else dtype.size


def variable_axis_size_partitioner(
    max_shard_bytes, axis=0, bytes_per_string_element=16, max_shards=None
):
    """Slices of at most `max_shard_bytes` along `axis` (at least one row each).

    Raises:
      ValueError: non-positive max_shard_bytes, bytes_per_string_element or max_shards;
        at call time, a shape not fully defined.
    """
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError(
            "Both max_shard_bytes and bytes_per_string_element must be positive. Currently, "
            f"max_shard_bytes is {max_shard_bytes} and bytes_per_string_element is "
            f"{bytes_per_string_element}"
        )
    if max_shards and max_shards < 1:
        raise ValueError("max_shards must be positive.")

    def _partitioner(shape, dtype):
        if not isinstance(shape, tensor_shape.TensorShape):
            raise ValueError(f"shape is not a TensorShape: {shape}")
        if not shape.is_fully_defined():
            raise ValueError(f"shape is not fully defined: {shape}")
        if not isinstance(dtype, dtypes.DType):
            raise ValueError(f"dtype is not a DType: {dtype}")
        partitions = [1] * shape.ndims
        axis_len = tensor_shape.dimension_value(shape.dims[axis])
        bytes_per_slice = (
            1.0
            * (shape.num_elements() / axis_len)
            * _element_size(dtype, bytes_per_string_element)
        )
        slices_per_shard = max(1, math.floor(max_shard_bytes / bytes_per_slice))
        axis_shards = int(math.ceil(1.0 * axis_len / slices_per_shard))
        if max_shards:
            axis_shards = min(max_shards, axis_shards)
        partitions[axis] = axis_shards
        return partitions

    return _partitioner


def min_max_variable_partitioner(
    max_partitions=1, axis=0, min_slice_size=256 << 10, bytes_per_string_element=16
):
    """As many slices of at least `min_slice_size` bytes as fit, at most max_partitions.

    Raises:
      ValueError: at call time, an axis beyond the shape's rank.
    """

    def _partitioner(shape, dtype):
        shape = tensor_shape.as_shape(shape)
        if axis >= len(shape):
            raise ValueError(
                f"Can not partition variable along axis {axis} when shape is only {shape}"
            )
        total = shape.num_elements() * _element_size(dtype, bytes_per_string_element)
        partitions = total / min_slice_size
        out = [1] * len(shape)
        out[axis] = max(
            1,
            min(
                tensor_shape.dimension_value(shape.dims[axis]),
                max_partitions,
                int(math.ceil(partitions)),
            ),
        )
        return out

    return _partitioner


def fixed_size_partitioner(num_shards, axis=0):
    """`num_shards` slices along `axis` (fewer when the axis is shorter)."""

    def _partitioner(shape, **unused_args):
        shape = tensor_shape.as_shape(shape)
        out = [1] * len(shape)
        out[axis] = min(num_shards, tensor_shape.dimension_value(shape.dims[axis]))
        return out

    return _partitioner


# -- creation (used by var_scope's get_variable) ------------------------------------------


def call_partitioner(partitioner, shape, dtype) -> list[int]:
    """The partition list `partitioner` gives, checked as TF checks it.

    Raises:
      ValueError: a shape not fully defined or of rank 0; a result that is not a
        sequence of the variable's rank, has a count below 1, or cuts several axes.
    """
    if not shape.is_fully_defined():
        raise ValueError(
            f"Shape of a new partitioned variable must be fully defined, but instead was {shape}."
        )
    if shape.ndims < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1, shape: {shape}")
    slicing = partitioner(shape=shape, dtype=dtype)
    if not isinstance(slicing, collections.abc.Sequence):
        raise ValueError(f"Partitioner must return a sequence, but saw: {slicing}")
    if len(slicing) != shape.ndims:
        raise ValueError(
            "Partitioner returned a partition list that does not match the Variable's rank: "
            f"{slicing} vs. {shape}"
        )
    if any(p < 1 for p in slicing):
        raise ValueError(f"Partitioner returned zero partitions for some axes: {slicing}")
    if sum(p > 1 for p in slicing) > 1:
        raise ValueError(
            f"Can only slice a variable along one dimension: shape: {shape}, partitioning: "
            f"{slicing}"
        )
    return list(slicing)


def iter_slices(full_shape: list[int], num_slices: int, slice_dim: int):
    """(offset, shape) of each slice, in order (TF's `_iter_slices`)."""
    with_excess = full_shape[slice_dim] % num_slices
    offset = [0] * len(full_shape)
    min_len = full_shape[slice_dim] // num_slices
    for i in range(num_slices):
        shape = list(full_shape)
        shape[slice_dim] = min_len + (i < with_excess)
        yield list(offset), shape
        offset[slice_dim] += shape[slice_dim]


def slice_dim_and_count(partitions: list[int]) -> tuple[int, int]:
    for dim, n in enumerate(partitions):
        if n > 1:
            return dim, n
    return 0, 1


class PartitionInfo:
    """What an initializer learns about the slice it initialises (TF's _PartitionInfo)."""

    def __init__(self, full_shape, var_offset):
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)

    def single_offset(self, shape) -> int:
        dim = self.single_slice_dim(shape)
        return 0 if dim is None else self.var_offset[dim]

    def single_slice_dim(self, shape):
        shape = list(shape)
        if len(shape) != len(self.full_shape):
            raise ValueError(
                f"Expected equal length, but received shape={shape} of length {len(shape)} "
                f"while self.full_shape={self.full_shape} is of length {len(self.full_shape)}."
            )
        dim = None
        for i, (s, f) in enumerate(zip(shape, self.full_shape)):
            if s != f:
                if dim is not None:
                    raise ValueError(
                        f"Cannot use single_slice_dim() with shape={shape} and "
                        f"self.full_shape={self.full_shape} since slice dim could be either "
                        f"dimension {dim} or {i}."
                    )
                dim = i
        return dim
