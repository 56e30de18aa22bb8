"""Lookup tables (TF1's `tf.lookup`): hash tables as resources, their ops under TF's names.

A table is a resource in the device's resource manager (as a variable or an iterator:
shared by the sessions of the process, found again by its shared name or its op's
name): `HashTableV2` (filled once by an initializer: `LookupTableImportV2` from tensors,
`InitializeTableFromTextFileV2` from a file) and `MutableHashTableV2` /
`MutableHashTableOfTensorsV2` (insert, remove).  The Anonymous* spellings
(`AnonymousHashTable` ..., what `experimental_is_anonymous=True` builds) have no shared
name: each run of the op makes a new table, held by its handle alone and freed with it,
so a program fills and reads one within a run.  `LookupTableFindV2` maps keys of any
shape to values, the default for missing keys.  Errors are TF's: FailedPrecondition
for a table used before it is initialized or a key given two values, InvalidArgument
for a file with too few columns or lines, an unparsable value, mismatched keys and
values; NotFound for a missing file.

Keys are the NumPy values' Python forms (int, float, bytes); a table's dict is touched
only by kernels on the loop, one at a time, so no lock is needed.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow.kernel_api import PASS_RESOURCE_OPS, kernel_resource
from asyncflow.ops.data_flow_stack_ops import handle_object, handle_value
from asyncflow.registry import ANY, NotDifferentiable, register_op

__all__: list[str] = []


def _bad(msg):
    return errors.InvalidArgumentError(None, None, msg)


def _np(dt: dtypes.DType):
    return np.dtype(object) if dt == dtypes.string else dt.as_numpy_dtype


class Table:
    """One hash table: keys -> values (scalars, or vectors of `value_shape`)."""

    def __init__(self, name, key_dtype, value_dtype, value_shape=(), mutable=False):
        self.name = name
        self.key_dtype, self.value_dtype = key_dtype, value_dtype
        self.value_shape = tuple(value_shape)
        self.mutable = mutable
        self.data: dict = {}
        self.initialized = mutable

    def check(self, key_dtype, value_dtype) -> None:
        if key_dtype != self.key_dtype or value_dtype != self.value_dtype:
            raise _bad(
                f"Conflicting key/value dtypes {key_dtype.name}->{value_dtype.name} with "
                f"{self.key_dtype.name}->{self.value_dtype.name}"
            )

    def match(self, have_in, want_in: str, have_out=(), want_out: str = "") -> None:
        """TF's kernel signature check: an op's dtypes after the handle (`have_in`,
        `have_out`) against the table's, `want_*` spelling them "k" (key) and "v"."""
        kinds = {"k": self.key_dtype, "v": self.value_dtype}
        want_in_t, want_out_t = [kinds[c] for c in want_in], [kinds[c] for c in want_out]
        if list(have_in) != want_in_t or list(have_out) != want_out_t:
            raise _bad(
                f"Signature mismatch, have: {_sig(have_in, have_out)} "
                f"expected: {_sig(want_in_t, want_out_t)}"
            )

    def check_keys(self, keys: list) -> None:
        """Refuse keys the table cannot hold (a dense table's empty and deleted keys)."""

    def reserve(self, n: int) -> None:
        """Room for `n` more entries (a dense table grows its buckets)."""

    def ready(self) -> None:
        if not self.initialized:
            raise errors.FailedPreconditionError(None, None, "Table not initialized.")

    def insert_unique(self, keys, values) -> None:
        """Static tables: a key given a second, different value is an error (TF)."""
        data = self.data
        for k, v in zip(keys, values):
            old = data.get(k, _MISSING)
            if old is _MISSING:
                data[k] = v
            elif old != v:
                raise errors.FailedPreconditionError(
                    None,
                    None,
                    f"HashTable has different value for same key. Key {_show(k)} has "
                    f"{_show(old)} and trying to add value {_show(v)}",
                )


_MISSING = object()
_TF_TYPE_NAMES = {"float16": "half", "float32": "float", "float64": "double"}


def _sig(ins, outs) -> str:
    """TF's spelling of a kernel signature: "resource, string, int64->int64"."""

    def names(types):
        return [_TF_TYPE_NAMES.get(t.name, t.name) for t in types]

    return ", ".join(["resource", *names(ins)]) + "->" + ", ".join(names(outs))


def _dims(shape) -> str:
    """A shape as TF's messages write it: [2,3]."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def _show(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _keys(arr) -> list:
    a = np.asarray(arr)
    return a.reshape(-1).tolist()


def _table(ctx, value) -> Table:
    return handle_object(value, Table, "lookup table")


def _scalar_shape(op):
    return [tensor_shape.TensorShape([])]


_TABLE_ATTRS = {"container": "", "shared_name": "", "use_node_name_sharing": False}


def _make(ctx, mutable: bool, value_shape=()) -> np.ndarray:
    a = ctx.attrs
    if "shared_name" not in a:  # an anonymous table: a new one, owned by its handle
        table = Table(ctx.op.name, a["key_dtype"], a["value_dtype"], value_shape, mutable)
        return handle_value(table)
    container = a["container"]
    name = a["shared_name"] or ctx.op.name
    table = kernel_resource(
        ctx,
        container,
        name,
        lambda: Table(name, a["key_dtype"], a["value_dtype"], value_shape, mutable),
    )
    table.check(a["key_dtype"], a["value_dtype"])
    return handle_value(table)


def _table_op(op_type: str, mutable: bool, extra_attrs=None, anonymous=False) -> None:
    """A table-creating op: its kernel finds or makes the table (see `_make`); an
    anonymous one (no container, no shared name) makes a new table every run."""
    op_def = register_op(
        op_type,
        outputs=["table_handle: resource"],
        attrs={
            **({} if anonymous else _TABLE_ATTRS),
            "key_dtype": ANY,
            "value_dtype": ANY,
            **(extra_attrs or {}),
        },
        shape_fn=_scalar_shape,
        stateful=True,
    )
    if not anonymous:  # (TF 2.21 registers no gradient at all for the anonymous ones)
        NotDifferentiable(op_type)
        PASS_RESOURCE_OPS.add(op_type)

    @op_def.kernel("CPU")
    async def _kernel(ctx):
        shape = ()
        if "value_shape" in ctx.attrs:
            shape = tensor_shape.as_shape(ctx.attrs["value_shape"]).as_list()
        return _make(ctx, mutable=mutable, value_shape=shape)


_table_op("HashTableV2", mutable=False)
_table_op("MutableHashTableV2", mutable=True)
_table_op("MutableHashTableOfTensorsV2", mutable=True, extra_attrs={"value_shape": []})
_table_op("AnonymousHashTable", mutable=False, anonymous=True)
_table_op("AnonymousMutableHashTable", mutable=True, anonymous=True)
_table_op(
    "AnonymousMutableHashTableOfTensors", mutable=True, extra_attrs={"value_shape": []},
    anonymous=True,
)  # fmt: skip


def _rows(values, table: Table, n: int) -> list:
    """`values` (n entries of the table's value shape) as the dict's values."""
    v = np.asarray(values)
    if table.value_shape:
        want = (n, *table.value_shape)
        if v.shape != want:
            raise _bad(f"Expected shape {_dims(want)} for value, got {_dims(v.shape)}")
        return [np.array(r, copy=True) for r in v]
    if v.size != n:
        raise _bad(f"Expected shape [{n}] for values, got {_dims(v.shape)}")
    return v.reshape(-1).tolist()


LookupTableImportV2 = register_op(
    "LookupTableImportV2",
    inputs=["table_handle: resource", "keys: Tin", "values: Tout"],
    attrs={"Tin": ANY, "Tout": ANY},
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("LookupTableImportV2")


@LookupTableImportV2.kernel("CPU")
async def _import(ctx, handle, keys, values):
    table = _table(ctx, handle)
    table.match((ctx.attrs["Tin"], ctx.attrs["Tout"]), "kv")
    if hasattr(table, "import_buckets"):
        table.import_buckets(np.asarray(keys), np.asarray(values))
        return None
    k = _keys(keys)
    if table.mutable:  # (MutableHashTable's import replaces its contents)
        table.data = dict(zip(k, _rows(values, table, len(k))))
        return None
    if np.size(keys) != np.size(values) and not table.initialized:
        raise _bad(
            f"Expected shape {_dims(np.shape(keys))} for values, got {_dims(np.shape(values))}"
        )
    _fill_once(table, k, values)
    return None


def _fill_once(table: Table, keys: list, values) -> None:
    """A static table's one initialization (TF: a later one changes nothing)."""
    if not table.initialized:
        table.insert_unique(keys, _rows(values, table, len(keys)))
        table.initialized = True


InitializeTableV2 = register_op(
    "InitializeTableV2",
    inputs=["table_handle: resource", "keys: Tkey", "values: Tval"],
    attrs={"Tkey": ANY, "Tval": ANY},
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("InitializeTableV2")


@InitializeTableV2.kernel("CPU")
async def _initialize(ctx, handle, keys, values):
    table = _table(ctx, handle)
    table.match((ctx.attrs["Tkey"], ctx.attrs["Tval"]), "kv")
    _fill_once(table, _keys(keys), values)
    return None


# -- from a text file ---------------------------------------------------------------------

WHOLE_LINE, LINE_NUMBER = -2, -1


def _field(path, line_no, line: bytes, parts, index, dt: dtypes.DType, delim):
    if index == LINE_NUMBER:
        value = line_no
    elif index == WHOLE_LINE:
        value = line
    else:
        if index >= len(parts):
            raise _bad(
                f"Invalid number of columns in {path} line {line_no} "
                f"({line.decode('utf-8', 'replace')}) : expected at least {index + 1} "
                f"got {len(parts)}"
            )
        value = parts[index]
    if dt == dtypes.string:
        return value if isinstance(value, bytes) else str(value).encode()
    if isinstance(value, int):
        return value
    text = value.decode("utf-8", "replace")
    try:
        return int(text) if dt.is_integer else float(text)
    except ValueError:
        name = {"float32": "float", "float64": "double"}.get(dt.name, dt.name)
        raise _bad(f"Field {text} in line {line_no} is not a valid {name}.") from None


def _read_table_file(path, key_index, value_index, vocab_size, delim, offset, kdt, vdt):
    from asyncflow import python_io

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise python_io.os_error(path, e) from None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]
    if vocab_size > 0:
        if len(lines) < vocab_size:
            raise _bad(f"Invalid vocab_size in {path}: expected {vocab_size} but got {len(lines)}")
        lines = lines[:vocab_size]
    keys, values = [], []
    sep = delim.encode()
    for n, line in enumerate(lines):
        parts = line.split(sep) if sep else line.split()
        keys.append(_field(path, n, line, parts, key_index, kdt, sep))
        v = _field(path, n, line, parts, value_index, vdt, sep)
        values.append(v + offset if value_index == LINE_NUMBER else v)
    return keys, values


InitializeTableFromTextFileV2 = register_op(
    "InitializeTableFromTextFileV2",
    inputs=["table_handle: resource", "filename: string"],
    attrs={
        "key_index": 0,
        "value_index": 0,
        "vocab_size": -1,
        "delimiter": "\t",
        "offset": 0,
    },
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("InitializeTableFromTextFileV2")


@InitializeTableFromTextFileV2.kernel("CPU")
async def _init_from_file(ctx, handle, filename):
    table = _table(ctx, handle)
    if table.initialized:
        return None
    a = ctx.attrs
    path = filename[()] if isinstance(filename, np.ndarray) else filename
    path = path.decode() if isinstance(path, bytes) else str(path)
    keys, values = await ctx.device.compute(
        _read_table_file,
        path,
        a["key_index"],
        a["value_index"],
        a["vocab_size"],
        a["delimiter"],
        a["offset"],
        table.key_dtype,
        table.value_dtype,
    )
    table.insert_unique(keys, values)
    table.initialized = True
    return None


# -- lookups, size, export, insert, remove ---------------------------------------------------


def _find_shape(op):
    keys = op.inputs[1].shape
    default = op.inputs[2].shape
    if default.ndims and default.ndims > 0:  # a table of vectors: keys' shape + value's
        return [keys.concatenate(default)] if keys.ndims is not None else [None]
    return [keys]


LookupTableFindV2 = register_op(
    "LookupTableFindV2",
    inputs=["table_handle: resource", "keys: Tin", "default_value: Tout"],
    outputs=["values: Tout"],
    attrs={"Tin": ANY, "Tout": ANY},
    shape_fn=_find_shape,
    stateful=True,  # (reads a table other ops change: never folded or merged)
)
NotDifferentiable("LookupTableFindV2")


@LookupTableFindV2.kernel("CPU")
async def _find(ctx, handle, keys, default):
    table = _table(ctx, handle)
    table.match((ctx.attrs["Tin"], ctx.attrs["Tout"]), "kv", (ctx.attrs["Tout"],), "v")
    table.ready()
    keys = np.asarray(keys)
    table.check_keys(keys.reshape(-1).tolist())
    get = table.data.get
    dt = _np(table.value_dtype)
    if table.value_shape:
        d = np.asarray(default, dt)
        rows = [get(k, None) for k in keys.reshape(-1).tolist()]
        out = (
            np.stack([d if r is None else r for r in rows])
            if rows
            else np.zeros((0, *table.value_shape), dt)
        )
        return out.reshape(*keys.shape, *table.value_shape).astype(dt, copy=False)
    d = np.asarray(default).reshape(-1)
    if d.size != 1:
        raise _bad(f"Expected a scalar default value, got shape {list(np.shape(default))}")
    dflt = d[0].item() if dt != np.dtype(object) else d[0]
    flat = [get(k, dflt) for k in keys.reshape(-1).tolist()]
    return np.array(flat, dtype=dt).reshape(keys.shape)


LookupTableSizeV2 = register_op(
    "LookupTableSizeV2",
    inputs=["table_handle: resource"],
    outputs=["size: int64"],
    shape_fn=_scalar_shape,
    stateful=True,  # (reads a table other ops change: never folded or merged)
)
NotDifferentiable("LookupTableSizeV2")


@LookupTableSizeV2.kernel("CPU")
async def _size(ctx, handle):
    table = _table(ctx, handle)
    return np.array(len(table.data), np.int64)


def _export_shapes(op):
    # (unknown, as TF's: a dense table exports [buckets, 1] keys)
    return [tensor_shape.unknown_shape(), tensor_shape.unknown_shape()]


LookupTableExportV2 = register_op(
    "LookupTableExportV2",
    inputs=["table_handle: resource"],
    outputs=["keys: Tkeys", "values: Tvalues"],
    attrs={"Tkeys": ANY, "Tvalues": ANY},
    shape_fn=_export_shapes,
    stateful=True,  # (reads a table other ops change: never folded or merged)
)
NotDifferentiable("LookupTableExportV2")


@LookupTableExportV2.kernel("CPU")
async def _export(ctx, handle):
    table = _table(ctx, handle)
    kd, vd = _np(ctx.attrs["Tkeys"]), _np(ctx.attrs["Tvalues"])
    if hasattr(table, "export_buckets"):
        return table.export_buckets(kd, vd)
    keys = np.array(list(table.data), dtype=kd)
    if table.value_shape:
        vals = list(table.data.values())
        values = np.stack(vals).astype(vd) if vals else np.zeros((0, *table.value_shape), vd)
    else:
        values = np.array(list(table.data.values()), dtype=vd)
    return keys, values


def _static_refuses(what: str) -> errors.UnimplementedError:
    return errors.UnimplementedError(
        None, None, f"{what} not supported by InitializableLookupTable implementations"
    )


LookupTableInsertV2 = register_op(
    "LookupTableInsertV2",
    inputs=["table_handle: resource", "keys: Tin", "values: Tout"],
    attrs={"Tin": ANY, "Tout": ANY},
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("LookupTableInsertV2")


@LookupTableInsertV2.kernel("CPU")
async def _insert(ctx, handle, keys, values):
    table = _table(ctx, handle)
    if not table.mutable:
        raise _static_refuses("Insert")
    table.match((ctx.attrs["Tin"], ctx.attrs["Tout"]), "kv")
    k = _keys(keys)
    if table.value_shape:
        v = np.asarray(values)
        want = (*np.shape(keys), *table.value_shape)
        if v.shape != want:
            raise _bad(f"Expected shape {_dims(want)} for value, got {_dims(v.shape)}")
        rows = [np.array(r, copy=True) for r in v.reshape(len(k), *table.value_shape)]
    else:
        if np.shape(values) != np.shape(keys):
            raise _bad(
                f"Expected shape {_dims(np.shape(keys))} for value, got {_dims(np.shape(values))}"
            )
        rows = np.asarray(values).reshape(-1).tolist()
    table.check_keys(k)
    table.reserve(len(k))
    table.data.update(zip(k, rows))
    return None


LookupTableRemoveV2 = register_op(
    "LookupTableRemoveV2",
    inputs=["table_handle: resource", "keys: Tin"],
    attrs={"Tin": ANY},
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("LookupTableRemoveV2")


@LookupTableRemoveV2.kernel("CPU")
async def _remove(ctx, handle, keys):
    table = _table(ctx, handle)
    if not table.mutable:
        raise _static_refuses("Remove")
    table.match((ctx.attrs["Tin"],), "k")
    table.check_keys(_keys(keys))
    for k in _keys(keys):
        table.data.pop(k, None)
    return None
