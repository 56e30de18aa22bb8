"""TF's sparse feature crosses: SparseCross (tf.sparse.cross_hashed, and TF1's string
cross), SparseCrossV2 (tf.sparse.cross) and SparseCrossHashed (the keyed, optionally
strong, hash Keras' HashedCrossing uses), with TF's builders.

Each batch row crosses every feature of every input column (sparse inputs first, then
dense ones), the last column varying fastest.  String crosses join the features (int64
ones as decimal) with the separator.  Hashed crosses must land in TF's very buckets:
the features are hashed as TF's columns hash them (Fingerprint64 of a string; an int64
as itself in SparseCross; in SparseCrossHashed Fingerprint64 -- or SipHash under the
salt with strong_hash -- of the int64's first four little-endian bytes, TF hashing
`sizeof(DataType)` bytes of it) and chained with FingerprintCat64, then taken modulo
num_buckets (else modulo 2**63 - 1).  A sparse input's features for row b are the run
of its entries with row index b where TF's walk over the rows finds them (indices in
row order, as TF requires); the work is bounded by the inputs' sizes, never by the
batch size a shape input claims.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.string_hash_ops import fingerprint64, siphash24
from asyncflow.registry import REQUIRED, NotDifferentiable, TypeConstraint, register_op
from asyncflow.sparse_tensor import SparseTensor

__all__ = []  # tf.sparse.cross / cross_hashed only (asyncflow/namespaces.py)

_M = (1 << 64) - 1
_I63 = (1 << 63) - 1
_KMUL = 0xC6A4A7935BD1E995
_DEFAULT_HASH_KEY = 0xDECAFCAFFE
_FEATURE_TYPES = TypeConstraint([dtypes.int64, dtypes.string], is_list=True)


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- op definitions --------------------------------------------------------------------------


def _cross_shape(op):
    return [tensor_shape.TensorShape([None, 2]), tensor_shape.TensorShape([None]), [2]]


_LIST_INPUTS = [
    "indices: N * int64",
    "values: sparse_types",
    "shapes: N * int64",
    "dense_inputs: dense_types",
]
_LIST_ATTRS = {"N": REQUIRED, "sparse_types": _FEATURE_TYPES, "dense_types": _FEATURE_TYPES}

SparseCross = register_op(
    "SparseCross",
    inputs=_LIST_INPUTS,
    outputs=["output_indices: int64", "output_values: out_type", "output_shape: int64"],
    attrs={
        **_LIST_ATTRS,
        "hashed_output": REQUIRED,
        "num_buckets": REQUIRED,
        "hash_key": REQUIRED,
        "out_type": TypeConstraint([dtypes.int64, dtypes.string]),
        "internal_type": TypeConstraint([dtypes.int64, dtypes.string]),
    },
    shape_fn=_cross_shape,
)
SparseCrossV2 = register_op(
    "SparseCrossV2",
    inputs=[*_LIST_INPUTS, "sep: string"],
    outputs=["output_indices: int64", "output_values: string", "output_shape: int64"],
    attrs=dict(_LIST_ATTRS),
    shape_fn=_cross_shape,
)
SparseCrossHashed = register_op(
    "SparseCrossHashed",
    inputs=[*_LIST_INPUTS, "num_buckets: int64", "strong_hash: bool", "salt: int64"],
    outputs=["output_indices: int64", "output_values: int64", "output_shape: int64"],
    attrs=dict(_LIST_ATTRS),
    shape_fn=_cross_shape,
)
for _t in ("SparseCross", "SparseCrossV2", "SparseCrossHashed"):
    NotDifferentiable(_t)


# -- the kernels --------------------------------------------------------------------------------


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _validate(indices, values, shapes, dense, internal_type=None) -> int:
    """TF's ValidateInput; returns the batch size."""
    for i, ind in enumerate(indices):
        if ind.ndim != 2:
            raise _invalid(
                f"Input indices should be a matrix but received shape {_shape_str(ind.shape)} "
                f"at position {i}"
            )
        if ind.shape[1] != 2:
            raise _invalid(f"Expected D2 of index to be 2 got {ind.shape[1]} at position {i}")
    for i, (ind, val) in enumerate(zip(indices, values)):
        if internal_type == dtypes.string and val.dtype != object:
            raise _invalid("Input values should be of internal type string but received int64")
        if val.ndim != 1:
            raise _invalid(
                f"Input values should be a vector but received shape {_shape_str(val.shape)} "
                f"at position {i}"
            )
        if ind.shape[0] != val.shape[0]:
            raise _invalid(
                f"Expected size of values to be {ind.shape[0]} got {val.shape[0]} at position {i}"
            )
    for i, shp in enumerate(shapes):
        if shp.ndim != 1:
            raise _invalid(
                f"Input shapes should be a vector but received shape {_shape_str(shp.shape)} "
                f"at position {i}"
            )
        if shp.shape[0] != 2:
            raise _invalid(
                f"shape should imply a 2D tensor, but got {_shape_str(shp.shape)} at position {i}"
            )
    for i, d in enumerate(dense):
        if internal_type == dtypes.string and d.dtype != object:
            raise _invalid("Dense inputs should be of internal type string but received int64")
        if d.ndim != 2:
            raise _invalid(
                f"Dense inputs should be a matrix but received shape {_shape_str(d.shape)} at "
                f"position {i}"
            )
    batch = int(shapes[0][0]) if shapes else (dense[0].shape[0] if dense else 0)
    for i, shp in enumerate(shapes):
        if shp[0] != batch:
            raise _invalid(f"Expected batch size {batch} got {shp[0]} at position {i}")
    for i, d in enumerate(dense):
        if d.shape[0] != batch:
            raise _invalid(f"Expected batch size {batch} got {d.shape[0]} at dense tensor {i}")
    return batch


def _row_runs(rows: np.ndarray, batch: int) -> dict:
    """{row: (start, count)} as TF's walk over rows 0..batch-1 finds a column's entries:
    at each row, the run of entries from the current position with that row index."""
    runs, pos, n, expect = {}, 0, len(rows), 0
    while pos < n:
        r = int(rows[pos])
        if r < expect or r >= batch:  # TF's walk never reaches this entry (nor later ones)
            break
        end = pos
        while end < n and rows[end] == r:
            end += 1
        runs[r] = (pos, end - pos)
        pos, expect = end, r + 1
    return runs


def _crosses(indices, values, shapes, dense):
    """Where each cross's features sit: (batch, row of each cross, one array per column
    of flat positions into that column's values), crosses in TF's order -- by row, then
    every choice of features with the last column varying fastest."""
    batch = _validate(indices, values, shapes, dense)
    runs = [_row_runs(ind[:, 0], batch) for ind in indices]
    if runs:
        rows = np.array(sorted(set(runs[0]).intersection(*runs[1:])), np.int64)
    elif dense and all(d.shape[1] for d in dense):
        rows = np.arange(batch, dtype=np.int64)  # (batch == every dense input's rows)
    else:
        rows = np.zeros(0, np.int64)
    starts = [np.array([r[b][0] for b in rows.tolist()], np.int64) for r in runs]
    counts = [np.array([r[b][1] for b in rows.tolist()], np.int64) for r in runs]
    for d in dense:
        starts.append(rows * d.shape[1])
        counts.append(np.full(len(rows), d.shape[1], np.int64))
    cross_row, positions = np.arange(len(rows)), []
    for start, count in zip(starts, counts):
        k = count[cross_row]  # each partial cross grows by each of this column's features
        first = np.cumsum(k) - k
        cross_row = np.repeat(cross_row, k)
        offsets = np.arange(len(cross_row)) - np.repeat(first, k)
        positions = [np.repeat(p, k) for p in positions]
        positions.append(start[cross_row] + offsets)
    return batch, rows, cross_row, positions


def _sparse_result(batch, rows, cross_row, values):
    per_row = np.bincount(cross_row, minlength=len(rows))
    first = np.cumsum(per_row) - per_row
    within = np.arange(len(cross_row)) - np.repeat(first, per_row)
    indices = np.stack([rows[cross_row], within], axis=1).astype(np.int64).reshape(-1, 2)
    widest = int(per_row.max()) if len(per_row) else 0
    return indices, values, np.array([batch, widest], np.int64)


def _column_values(values, dense):
    return [*values, *(d.reshape(-1) for d in dense)]


def _map_column(column: np.ndarray, fn) -> np.ndarray:
    """fn of each value (uint64), computed once per distinct value."""
    memo: dict = {}
    out = np.empty(len(column), np.uint64)
    for i, v in enumerate(column.tolist()):
        h = memo.get(v)
        if h is None:
            h = memo[v] = fn(v)
        out[i] = h
    return out


_KMUL_U = np.uint64(_KMUL)
_S47 = np.uint64(47)


def _cat_arrays(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fingerprint_cat64 elementwise on uint64 arrays (NumPy's uint64 products wrap)."""
    with np.errstate(over="ignore"):
        t = b * _KMUL_U
        t ^= t >> _S47
        r = (a ^ _KMUL_U) ^ (t * _KMUL_U)
        r = r * _KMUL_U
        r ^= r >> _S47
        r = r * _KMUL_U
        r ^= r >> _S47
    return r


def _hashed_cross(parts, feature_fns, key: int | None, num_buckets: int):
    """The hashed crosses: chained from `key` (SparseCross), or from the first feature
    (key None: SparseCrossHashed)."""
    batch, rows, cross_row, positions = _crosses(*parts)
    columns = _column_values(parts[1], parts[3])
    h = None if key is None else np.full(len(cross_row), key, np.uint64)
    for col, fn, pos in zip(columns, feature_fns, positions):
        f = _map_column(col, fn)[pos]
        h = f if h is None else _cat_arrays(h, f)
    if h is None:
        h = np.zeros(0, np.uint64)
    h = h % np.uint64(num_buckets if num_buckets > 0 else _I63)
    return _sparse_result(batch, rows, cross_row, h.astype(np.int64))


def _as_bytes(v) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, (int, np.integer)):
        return str(int(v)).encode()
    return str(v).encode()


def _low4(v) -> bytes:
    return (int(v) & _M).to_bytes(8, "little")[:4]


def _arrays(indices, values, shapes, dense):
    return (
        [np.asarray(i) for i in indices],
        [np.asarray(v) for v in values],
        [np.asarray(s) for s in shapes],
        [np.asarray(d) for d in dense],
    )


def _string_cross(parts, sep: bytes):
    batch, rows, cross_row, positions = _crosses(*parts)
    columns = [
        np.array([_as_bytes(v) for v in col.tolist()], dtype=object)
        for col in _column_values(parts[1], parts[3])
    ]
    picked = [col[pos].tolist() for col, pos in zip(columns, positions)]
    out = np.empty(len(cross_row), dtype=object)
    out[:] = [sep.join(t) for t in zip(*picked)] if picked else []
    return _sparse_result(batch, rows, cross_row, out)


def _v1_feature(v) -> int:
    return fingerprint64(v) if isinstance(v, bytes) else int(v) & _M


@SparseCross.kernel("CPU")
async def _sparse_cross(ctx, *args):
    n, nd = ctx.attrs["N"], len(ctx.attrs["dense_types"])
    parts = _arrays(args[:n], args[n : 2 * n], args[2 * n : 3 * n], args[3 * n : 3 * n + nd])
    internal = dtypes.as_dtype(ctx.attrs["internal_type"])
    _validate(*parts, internal_type=internal)
    if not ctx.attrs["hashed_output"]:
        return await ctx.compute(_string_cross, parts, b"_X_")
    key, nb = int(ctx.attrs["hash_key"]) & _M, int(ctx.attrs["num_buckets"])
    fns = [_v1_feature] * (len(parts[1]) + len(parts[3]))
    return await ctx.compute(_hashed_cross, parts, fns, key, nb)


@SparseCrossV2.kernel("CPU")
async def _sparse_cross_v2(ctx, *args):
    n, nd = ctx.attrs["N"], len(ctx.attrs["dense_types"])
    parts = _arrays(args[:n], args[n : 2 * n], args[2 * n : 3 * n], args[3 * n : 3 * n + nd])
    sep = np.asarray(args[-1], dtype=object)
    if sep.ndim != 0:
        raise _invalid(f"Input separator should be a scalar. Received: {sep!r}")
    return await ctx.compute(_string_cross, parts, _as_bytes(sep[()]))


def _keyed_features(parts, strong: bool, k0: int, k1: int):
    """SparseCrossHashed's per-column feature hash (TF's Keyed*TensorColumn)."""
    if strong:
        h_str = lambda v: siphash24(k0, k1, v)  # noqa: E731
        h_int = lambda v: siphash24(k0, k1, _low4(v))  # noqa: E731
    else:
        h_str = fingerprint64
        h_int = lambda v: fingerprint64(_low4(v))  # noqa: E731
    dense_int = h_int if strong else (lambda v: int(v) & _M)  # (dense int64: the value)

    def sparse_fn(v):
        return h_str(v) if isinstance(v, bytes) else h_int(v)

    def dense_fn(v):
        return h_str(v) if isinstance(v, bytes) else dense_int(v)

    return [sparse_fn] * len(parts[1]) + [dense_fn] * len(parts[3])


@SparseCrossHashed.kernel("CPU")
async def _sparse_cross_hashed(ctx, *args):
    n, nd = ctx.attrs["N"], len(ctx.attrs["dense_types"])
    parts = _arrays(args[:n], args[n : 2 * n], args[2 * n : 3 * n], args[3 * n : 3 * n + nd])
    num_buckets, strong, salt = args[3 * n + nd :]
    nb, strong = int(np.asarray(num_buckets)), bool(np.asarray(strong))
    salt = np.asarray(salt).reshape(-1)
    if salt.size != 2:
        raise _invalid(f'Input "salt" must have length 2 but has length {salt.size}')
    _validate(*parts)
    if not parts[1] and not parts[3]:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(2, np.int64)
    fns = _keyed_features(parts, strong, int(salt[0]) & _M, int(salt[1]) & _M)
    return await ctx.compute(_hashed_cross, parts, fns, None, nb)


# -- builders -----------------------------------------------------------------------------------


def _split_inputs(inputs, what: str):
    if not isinstance(inputs, (tuple, list)):
        raise TypeError("Inputs must be a list")
    if not all(isinstance(i, (SparseTensor, ops.Tensor)) for i in inputs):
        raise TypeError(what)
    sparse = [i for i in inputs if isinstance(i, SparseTensor)]
    dense = [i for i in inputs if not isinstance(i, SparseTensor)]
    values = [sp.values for sp in sparse]
    internal = dtypes.string
    for lst in (values, dense):
        for k, t in enumerate(lst):
            if t.dtype != dtypes.string:
                lst[k] = ops.apply_op("Cast", [t], {"DstT": dtypes.int64}).outputs[0]
                internal = dtypes.int64
    return sparse, values, dense, internal


def _list_attrs(sparse, values, dense):
    return {
        "N": len(sparse),
        "sparse_types": [v.dtype for v in values],
        "dense_types": [d.dtype for d in dense],
    }


def sparse_cross(inputs, name=None, separator=None):
    """`tf.sparse.cross`: the string crosses of sparse and dense (batch-major) inputs, a
    string SparseTensor (features joined with `separator`, default "_X_").

    Raises:
      TypeError: `inputs` is not a list of Tensors and SparseTensors.
    Raises (when run):
      InvalidArgumentError: inputs of different batch sizes, or not matrices.
    """
    sparse, values, dense, _ = _split_inputs(inputs, "All inputs must be Tensor or SparseTensor.")
    sep = ops.convert_to_tensor("_X_" if separator is None else separator, dtypes.string)
    outs = ops.apply_op(
        "SparseCrossV2",
        [[s.indices for s in sparse], values, [s.dense_shape for s in sparse], dense, sep],
        _list_attrs(sparse, values, dense),
        name=name,
    ).outputs
    return SparseTensor(*outs)


def sparse_cross_hashed(inputs, num_buckets=0, hash_key=None, name=None):
    """`tf.sparse.cross_hashed`: the crosses as TF's chained Fingerprint64 hashes (an
    int64 SparseTensor), modulo `num_buckets` when > 0."""
    sparse, values, dense, internal = _split_inputs(inputs, "All inputs must be SparseTensors")
    attrs = {
        **_list_attrs(sparse, values, dense),
        "hashed_output": True,
        "num_buckets": int(num_buckets),
        "hash_key": int(hash_key or _DEFAULT_HASH_KEY),
        "out_type": dtypes.int64,
        "internal_type": internal,
    }
    outs = ops.apply_op(
        "SparseCross",
        [[s.indices for s in sparse], values, [s.dense_shape for s in sparse], dense],
        attrs,
        name=name,
    ).outputs
    return SparseTensor(*outs)
