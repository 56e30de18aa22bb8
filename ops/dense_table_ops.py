"""Dense hash tables: MutableDenseHashTableV2, its ref-typed MutableDenseHashTable and
AnonymousMutableDenseHashTable (a new table each run, owned by its handle).

TF's dense table keeps keys in a bucket array with an `empty_key` marking free buckets
and a `deleted_key` marking removed ones; neither may be used as a key.  The table
doubles its buckets before an insert would take it past `max_load_factor`, and its
export is the whole bucket array ([buckets, 1] keys, [buckets, value size] values).
The lookup ops (LookupTableFindV2 ... ImportV2, ops/lookup_ops.py) run on it through
`Table`'s hooks: `check_keys`, `reserve`, `export_buckets`, `import_buckets`.

Differs from TF: a key's bucket.  Entries fill the buckets in insertion order, so an
export holds TF's entries and bucket count but not TF's positions (TF's positions
come from its hash function).
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.kernel_api import PASS_RESOURCE_OPS, kernel_resource
from asyncflow.ops.data_flow_stack_ops import handle_value
from asyncflow.ops.lookup_ops import Table
from asyncflow.registry import ANY, NotDifferentiable, register_op

__all__: list[str] = []


class DenseTable(Table):
    """A mutable table with TF's dense table's reserved keys and bucket count."""

    def __init__(self, name, key_dtype, value_dtype, value_shape, empty_key, deleted_key,
                 num_buckets: int, max_load_factor: float):  # fmt: skip
        super().__init__(name, key_dtype, value_dtype, value_shape, mutable=True)
        self.empty_key, self.deleted_key = empty_key, deleted_key
        self.num_buckets, self.max_load_factor = num_buckets, max_load_factor

    def check_keys(self, keys: list) -> None:
        for k in keys:
            if k == self.empty_key:
                raise errors.InvalidArgumentError(
                    None, None, "Using the empty_key as a table key is not allowed"
                )
            if self.deleted_key is not None and k == self.deleted_key:
                raise errors.InvalidArgumentError(
                    None, None, "Using the deleted_key as a table key is not allowed"
                )

    def reserve(self, n: int) -> None:
        need = len(self.data) + n
        buckets = self.num_buckets
        while need > buckets * self.max_load_factor:
            buckets <<= 1
        self.num_buckets = buckets

    def _value_size(self) -> int:
        return int(np.prod(self.value_shape, dtype=np.int64)) if self.value_shape else 1

    def export_buckets(self, kd, vd):
        n, size = self.num_buckets, self._value_size()
        keys = np.empty((n, 1), dtype=kd)
        keys[:] = self.empty_key
        values = np.zeros((n, size), dtype=vd)
        for i, (k, v) in enumerate(self.data.items()):
            keys[i, 0] = k
            values[i] = np.asarray(v, dtype=vd).reshape(size)
        return keys, values

    def import_buckets(self, keys: np.ndarray, values: np.ndarray) -> None:
        size = self._value_size()
        if keys.ndim != 2 or keys.shape[1] != 1 or values.shape != (keys.shape[0], size):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Expected shape [{keys.shape[0] if keys.ndim else 0}, {size}] for values, got "
                f"{list(values.shape)}",
            )
        data = {}
        for k, v in zip(keys[:, 0].tolist(), values, strict=True):
            if k == self.empty_key or (self.deleted_key is not None and k == self.deleted_key):
                continue
            data[k] = v.reshape(self.value_shape).copy() if self.value_shape else v[0].item()
        self.data = data
        self.num_buckets = max(int(keys.shape[0]), 1)


_ATTRS = {
    "container": "",
    "shared_name": "",
    "use_node_name_sharing": False,
    "key_dtype": ANY,
    "value_dtype": ANY,
    "value_shape": [],
    "initial_num_buckets": 131072,
    "max_load_factor": 0.8,
}
_SHARING = ("container", "shared_name", "use_node_name_sharing")


def _key(value):
    a = np.asarray(value)
    if a.size != 1:
        raise errors.InvalidArgumentError(
            None, None, f"Expected a scalar key, got shape {list(a.shape)}"
        )
    return a.reshape(-1).tolist()[0]


def _make(ctx, empty_key, deleted_key):
    a = ctx.attrs
    buckets = a["initial_num_buckets"]
    if buckets < 4 or buckets & (buckets - 1):
        raise errors.InvalidArgumentError(
            None, None, f"Number of buckets must be at least 4 and a power of 2, got: {buckets}"
        )
    if not 0 < a["max_load_factor"] < 1:
        raise errors.InvalidArgumentError(
            None, None, f"max_load_factor must be between 0 and 1, got: {a['max_load_factor']:g}"
        )
    empty = _key(empty_key)
    deleted = None if deleted_key is None else _key(deleted_key)
    if deleted is not None and empty == deleted:
        raise errors.InvalidArgumentError(None, None, "Empty and deleted keys cannot be equal")
    shape = tensor_shape.as_shape(a["value_shape"]).as_list()

    def new(name):
        return DenseTable(name, a["key_dtype"], a["value_dtype"], shape, empty, deleted,
                          buckets, a["max_load_factor"])  # fmt: skip

    if "shared_name" not in a:  # AnonymousMutableDenseHashTable: owned by its handle
        return new(ctx.op.name)
    container = a["container"]
    name = a["shared_name"] or ctx.op.name
    table = kernel_resource(ctx, container, name, lambda: new(name))
    table.check(a["key_dtype"], a["value_dtype"])
    return table


MutableDenseHashTableV2 = register_op(
    "MutableDenseHashTableV2",
    inputs=["empty_key: key_dtype", "deleted_key: key_dtype"],
    outputs=["table_handle: resource"],
    attrs=_ATTRS,
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
)
NotDifferentiable("MutableDenseHashTableV2")
PASS_RESOURCE_OPS.add("MutableDenseHashTableV2")


@MutableDenseHashTableV2.kernel("CPU")
async def _dense_table_v2(ctx, empty_key, deleted_key):
    return handle_value(_make(ctx, empty_key, deleted_key))


# Each run makes a new table, held by its handle alone (what DenseHashTable's
# experimental_is_anonymous=True builds); TF 2.21 registers no gradient for it.
AnonymousMutableDenseHashTable = register_op(
    "AnonymousMutableDenseHashTable",
    inputs=["empty_key: key_dtype", "deleted_key: key_dtype"],
    outputs=["table_handle: resource"],
    attrs={k: v for k, v in _ATTRS.items() if k not in _SHARING},
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
    stateful=True,
)


@AnonymousMutableDenseHashTable.kernel("CPU")
async def _anonymous_dense_table(ctx, empty_key, deleted_key):
    return handle_value(_make(ctx, empty_key, deleted_key))


# The first spelling had no deleted key.  TF 2.21 runs it with the V2 kernel, which
# looks for that input: every run fails (InvalidArgumentError), here as there.
MutableDenseHashTable = register_op(
    "MutableDenseHashTable",
    inputs=["empty_key: key_dtype"],
    outputs=["table_handle: Ref(string)"],
    attrs=_ATTRS,
    shape_fn=lambda op: [tensor_shape.TensorShape([2])],
    stateful=True,
)
NotDifferentiable("MutableDenseHashTable")


@MutableDenseHashTable.kernel("CPU")
async def _dense_table_v1(ctx, empty_key):
    raise errors.InvalidArgumentError(None, None, "Unknown input name: deleted_key")
