"""ParseSequenceExampleV2: `tf.train.SequenceExample` records into context features and
feature lists (tf.io.parse_single_sequence_example / parse_sequence_example).

Both builders make the one op TF 2.21 makes (the single form runs it on a batch of one
and takes the first row, as TF's Python does).  Per record: context FixedLenFeatures
are dense (a default, or required), context VarLenFeatures sparse; feature lists are
FixedLenSequenceFeature (dense [time] + shape; a missing list is an error unless
`allow_missing`) or VarLenFeature (sparse over (time, index)).  In a batch, dense
feature lists pad with zeros to the longest and report each record's length.

Unlike ParseExample this takes each record through protobuf's full message parser: a
sequence is read in one pass per record with no batch fast path (sequence parsing is
rare and its records small).  The op has TF's signature: the feature keys are string
inputs, and a scalar record (what TF's parse_single_sequence_example passes) gives
results without the batch axis, so TF's GraphDefs import here and ours load in TF.
Kernels never suspend; a large batch goes to the device's compute pool.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.example_pb import DecodeError
from asyncflow.ops import array_ops, parsing_ragged
from asyncflow.ops.parsing_ops import (
    _PARSE_TYPES,
    FixedLenFeature,
    FixedLenSequenceFeature,
    RaggedFeature,
    VarLenFeature,
    _check_parse_types,
    _dense_default,
    ragged_keys,
)
from asyncflow.protos.example_pb2 import SequenceExample
from asyncflow.ragged import RaggedTensor
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op
from asyncflow.sparse_tensor import SparseTensor

__all__ = ["parse_sequence_example", "parse_single_sequence_example"]

_SPLIT_TYPES = (dtypes.int64,)  # the row splits this kernel writes (TF: int32 or int64)
_KIND = {dtypes.string: "bytes_list", dtypes.float32: "float_list", dtypes.int64: "int64_list"}
_TYPE_NAME = {dtypes.string: "string", dtypes.float32: "float", dtypes.int64: "int64"}


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _shape_fn(op):
    a = op._attr
    rank = op.inputs[0].shape.ndims
    ncs, nfs = len(a("context_sparse_types")), len(a("feature_list_sparse_types"))
    ncr, nfr = len(a("context_ragged_value_types")), len(a("feature_list_ragged_value_types"))
    if rank is None:
        n = 3 * ncs + len(a("context_dense_shapes")) + 2 * ncr + 3 * nfs
        n += 2 * len(a("feature_list_dense_shapes")) + 3 * nfr
        return [tensor_shape.TensorShape(None)] * n
    lead = [op.inputs[0].shape[0].value] if rank == 1 else []
    out = [tensor_shape.TensorShape([None, rank + 1])] * ncs
    out += [tensor_shape.TensorShape([None])] * ncs
    out += [tensor_shape.TensorShape([rank + 1])] * ncs
    out += [tensor_shape.TensorShape([*lead, *shape]) for shape in a("context_dense_shapes")]
    out += [tensor_shape.TensorShape([None])] * (2 * ncr)
    out += [tensor_shape.TensorShape([None, rank + 2])] * nfs
    out += [tensor_shape.TensorShape([None])] * nfs
    out += [tensor_shape.TensorShape([rank + 2])] * nfs
    shapes = a("feature_list_dense_shapes")
    out += [tensor_shape.TensorShape([*lead, None, *shape]) for shape in shapes]
    out += [tensor_shape.TensorShape(lead)] * len(shapes)
    out += [tensor_shape.TensorShape([None])] * (3 * nfr)
    return out


# TF's signature (so TF's GraphDefs import and ours load in TF): the feature keys are
# string vectors among the inputs (constants in graphs), a scalar `serialized` is one
# record with results unbatched, a vector a batch.
ParseSequenceExampleV2 = register_op(
    "ParseSequenceExampleV2",
    inputs=[
        "serialized: string",
        "debug_name: string",
        "context_sparse_keys: string",
        "context_dense_keys: string",
        "context_ragged_keys: string",
        "feature_list_sparse_keys: string",
        "feature_list_dense_keys: string",
        "feature_list_ragged_keys: string",
        "feature_list_dense_missing_assumed_empty: bool",
        "context_dense_defaults: Tcontext_dense",
    ],
    outputs=[
        "context_sparse_indices: Ncontext_sparse * int64",
        "context_sparse_values: context_sparse_types",
        "context_sparse_shapes: Ncontext_sparse * int64",
        "context_dense_values: Tcontext_dense",
        "context_ragged_values: context_ragged_value_types",
        "context_ragged_row_splits: context_ragged_split_types",
        "feature_list_sparse_indices: Nfeature_list_sparse * int64",
        "feature_list_sparse_values: feature_list_sparse_types",
        "feature_list_sparse_shapes: Nfeature_list_sparse * int64",
        "feature_list_dense_values: feature_list_dense_types",
        "feature_list_dense_lengths: Nfeature_list_dense * int64",
        "feature_list_ragged_values: feature_list_ragged_value_types",
        "feature_list_ragged_outer_splits: feature_list_ragged_split_types",
        "feature_list_ragged_inner_splits: feature_list_ragged_split_types",
    ],
    attrs={
        "Ncontext_sparse": 0,
        "Nfeature_list_sparse": 0,
        "Nfeature_list_dense": 0,
        "context_sparse_types": TypeConstraint(_PARSE_TYPES, is_list=True),
        "Tcontext_dense": TypeConstraint(_PARSE_TYPES, is_list=True),
        "context_ragged_value_types": TypeConstraint(_PARSE_TYPES, is_list=True),
        "context_ragged_split_types": TypeConstraint(_SPLIT_TYPES, is_list=True),
        "feature_list_sparse_types": TypeConstraint(_PARSE_TYPES, is_list=True),
        "feature_list_dense_types": TypeConstraint(_PARSE_TYPES, is_list=True),
        "feature_list_ragged_value_types": TypeConstraint(_PARSE_TYPES, is_list=True),
        "feature_list_ragged_split_types": TypeConstraint(_SPLIT_TYPES, is_list=True),
        "context_dense_shapes": [],
        "feature_list_dense_shapes": [],
        "_example_names": [],  # example names given as Python values, for messages
    },
    shape_fn=_shape_fn,
)
NotDifferentiable("ParseSequenceExampleV2")


def _values(feature, dtype, what: str, name: str = "<unknown>"):
    """The values of one Feature proto as an array of `dtype` (an empty Feature is no
    values of any type, as in TF)."""
    kind = feature.WhichOneof("kind")
    if kind is None:
        vals = []
    elif kind != _KIND[dtype]:
        raise _invalid(f"Name: {name}, {what}.  Data types don't match. Expected type: "
                       f"{_TYPE_NAME[dtype]}")  # fmt: skip
    else:
        vals = getattr(feature, kind).value
    if dtype == dtypes.string:
        arr = np.empty(len(vals), dtype=object)
        arr[:] = list(vals)
        return arr
    return np.asarray(vals, dtype=dtype.as_numpy_dtype)


def _sparse(rows, dtype, lead: int):
    """SparseTensor parts from per-record lists of value arrays (one per time step when
    `lead` is 2): indices [N, 1 + lead], values, dense shape [B, (T,) max]."""
    idx, vals, longest, steps = [], [], 0, 0
    for b, record in enumerate(rows):
        steps = max(steps, len(record))
        for t, v in enumerate(record):
            longest = max(longest, v.size)
            pos = (b, t) if lead == 2 else (b,)
            idx.extend((*pos, j) for j in range(v.size))
            vals.append(v)
    values = (
        np.concatenate(vals)
        if vals
        else np.zeros(0, dtype=object if dtype == dtypes.string else dtype.as_numpy_dtype)
    )
    indices = np.array(idx, np.int64).reshape(-1, lead + 1)
    shape = [len(rows), steps, longest] if lead == 2 else [len(rows), longest]
    return indices, values, np.array(shape, np.int64)


def _parse_records(records):
    out = []
    for r in records:
        try:
            out.append(SequenceExample.FromString(bytes(r)))
        except (DecodeError, ValueError, TypeError) as exc:
            raise _invalid("Invalid protocol message input, example id: <unknown>") from exc
    return out


def _name(a, b: int) -> str:
    """Record b's name in messages: its example_names entry, else TF's "<unknown>"."""
    names = a.get("_example_names") or ()
    return names[b] if b < len(names) else "<unknown>"


def _context(parsed, a, defaults):
    sparse = [
        _sparse(
            [
                [_values(f, dt, f"Context feature: {key}", _name(a, b))]
                if (f := p.context.feature.get(key)) is not None
                else []
                for b, p in enumerate(parsed)
            ],
            dt,
            1,
        )
        for key, dt in zip(a["context_sparse_keys"], a["context_sparse_types"])
    ]
    dense = []
    for key, dt, shape, default in zip(
        a["context_dense_keys"], a["Tcontext_dense"], a["context_dense_shapes"], defaults
    ):
        shape = [int(d) for d in shape]
        want = int(np.prod(shape, dtype=np.int64))
        out = np.empty([len(parsed), *shape], dtype=dt.as_numpy_dtype)
        for b, p in enumerate(parsed):
            f = p.context.feature.get(key)
            if f is None:
                if np.size(default) == 0:
                    raise _invalid(
                        f"Inconsistent max number of elements for feature {key}: expected "
                        f"{want}, but found 0"
                    )
                out[b] = np.reshape(default, shape)
                continue
            v = _values(f, dt, f"Context feature: {key}", _name(a, b))
            if v.size != want:
                raise _invalid(
                    f"Inconsistent max number of elements for feature {key}: expected "
                    f"{want}, but found {v.size}"
                )
            out[b] = v.reshape(shape)
        dense.append(out)
    return sparse, dense


def _feature_lists(parsed, a):
    lists = [p.feature_lists.feature_list for p in parsed]
    sparse = []
    for key, dt in zip(a["feature_list_sparse_keys"], a["feature_list_sparse_types"]):
        rows = []
        for b, fl in enumerate(lists):
            got = fl.get(key)
            rows.append(
                []
                if got is None
                else [
                    _values(f, dt, f"Feature list: {key}, Index: {t}", _name(a, b))
                    for t, f in enumerate(got.feature)
                ]
            )
        sparse.append(_sparse(rows, dt, 2))
    dense, lengths = [], []
    missing_ok = set(a["feature_list_dense_missing_assumed_empty"])
    for key, dt, shape in zip(
        a["feature_list_dense_keys"], a["feature_list_dense_types"], a["feature_list_dense_shapes"]
    ):
        shape = [int(d) for d in shape]
        want = int(np.prod(shape, dtype=np.int64))
        rows = []
        for b, fl in enumerate(lists):
            got = fl.get(key)
            if got is None:
                if key not in missing_ok:
                    raise _invalid(
                        f"Name: {_name(a, b)}, Feature list '{key}' is required but could not be "
                        "found.  Did you mean to include it in "
                        "feature_list_dense_missing_assumed_empty or feature_list_dense_defaults?"
                    )
                rows.append(np.zeros([0, *shape], dt.as_numpy_dtype))
                continue
            steps = [
                _values(f, dt, f"Feature list: {key}, Index: {t}", _name(a, b))
                for t, f in enumerate(got.feature)
            ]
            # TF checks a record's total count first, then each step's.
            total = sum(v.size for v in steps)
            if want and total % want:
                raise _invalid(
                    f"Feature list '{key}' has an unexpected number of values.  Total values "
                    f"size: {total} is not consistent with output shape: "
                    f"[{','.join(['?', *map(str, shape)])}]"
                )
            for t, v in enumerate(steps):
                if v.size != want:
                    raise _invalid(
                        f"Name: {_name(a, b)}, Key: {key}, Index: {t}.  Number of values != "
                        f"expected.  values size: {v.size} but output shape: "
                        f"[{','.join(map(str, shape))}]"
                    )
            steps = [v.reshape(shape) for v in steps]
            rows.append(np.stack(steps) if steps else np.zeros([0, *shape], dt.as_numpy_dtype))
        longest = max([0] + [r.shape[0] for r in rows])
        out = np.zeros([len(rows), longest, *shape], dt.as_numpy_dtype)
        if dt == dtypes.string:
            out[...] = b""
        for b, r in enumerate(rows):
            out[b, : r.shape[0]] = r
        dense.append(out)
        lengths.append(np.array([r.shape[0] for r in rows], np.int64))
    return sparse, dense, lengths


def _empty(dtype):
    return np.zeros(0, dtype=object if dtype == dtypes.string else dtype.as_numpy_dtype)


def _ragged(parsed, a):
    """Each ragged key's values with their row splits: per record for context keys;
    per record (time steps) and per step (values) for feature lists."""
    context = []
    for key, dt in zip(a["context_ragged_keys"], a["context_ragged_value_types"]):
        vals, splits = [], [0]
        for b, p in enumerate(parsed):
            f = p.context.feature.get(key)
            if f is not None:
                vals.append(_values(f, dt, f"Context feature: {key}", _name(a, b)))
            splits.append(splits[-1] + (vals[-1].size if f is not None else 0))
        context.append((np.concatenate(vals) if vals else _empty(dt), np.array(splits, np.int64)))
    lists = []
    for key, dt in zip(a["feature_list_ragged_keys"], a["feature_list_ragged_value_types"]):
        vals, outer, inner = [], [0], [0]
        for b, p in enumerate(parsed):
            got = p.feature_lists.feature_list.get(key)
            steps = [] if got is None else got.feature
            for t, f in enumerate(steps):
                vals.append(_values(f, dt, f"Feature list: {key}, Index: {t}", _name(a, b)))
                inner.append(inner[-1] + vals[-1].size)
            outer.append(outer[-1] + len(steps))
        lists.append((
            np.concatenate(vals) if vals else _empty(dt),
            np.array(outer, np.int64),
            np.array(inner, np.int64),
        ))  # fmt: skip
    return context, lists


def _parse_sync(a, serialized, defaults):
    serialized = np.asarray(serialized, dtype=object)
    if serialized.ndim != 1:
        raise _invalid(f"Expected serialized to be a vector, got shape: {list(serialized.shape)}")
    parsed = _parse_records(serialized.tolist())
    c_sparse, c_dense = _context(parsed, a, defaults)
    f_sparse, f_dense, f_lengths = _feature_lists(parsed, a)
    c_ragged, f_ragged = _ragged(parsed, a)
    return [
        *(s[0] for s in c_sparse),
        *(s[1] for s in c_sparse),
        *(s[2] for s in c_sparse),
        *c_dense,
        *(r[0] for r in c_ragged),
        *(r[1] for r in c_ragged),
        *(s[0] for s in f_sparse),
        *(s[1] for s in f_sparse),
        *(s[2] for s in f_sparse),
        *f_dense,
        *f_lengths,
        *(r[0] for r in f_ragged),
        *(r[1] for r in f_ragged),
        *(r[2] for r in f_ragged),
    ]


def _keys(value) -> list[str]:
    return [k.decode() if isinstance(k, bytes) else str(k) for k in np.ravel(value)]


def _kernel_attrs(ctx, keys, missing_empty, debug_name) -> dict:
    """The attrs `_parse_sync` reads, from the key inputs (cached per distinct keys)."""
    (c_sparse, c_dense, c_ragged, f_sparse, f_dense, f_ragged) = (_keys(k) for k in keys)
    a = ctx.attrs
    checks = (
        (c_sparse, "context_sparse_keys", len(a["context_sparse_types"])),
        (c_dense, "context_dense_keys", len(a["Tcontext_dense"])),
        (c_ragged, "context_ragged_keys", len(a["context_ragged_value_types"])),
        (f_sparse, "feature_list_sparse_keys", len(a["feature_list_sparse_types"])),
        (f_dense, "feature_list_dense_keys", len(a["feature_list_dense_types"])),
        (f_ragged, "feature_list_ragged_keys", len(a["feature_list_ragged_value_types"])),
    )
    for got, what, want in checks:
        if len(got) != want:
            raise _invalid(f"Expected len({what}) to match the op's types: {len(got)} vs. {want}")
    flags = np.ravel(missing_empty).tolist()
    if len(flags) != len(f_dense):
        raise _invalid(
            "Expected len(feature_list_dense_missing_assumed_empty) == "
            f"len(feature_list_dense_keys): {len(flags)} vs. {len(f_dense)}"
        )
    names = a["_example_names"] or _keys(debug_name)
    key = (*(tuple(k) for k, _, _ in checks), tuple(flags), tuple(names))
    cached = ctx.kernel_state.get("attrs")
    if cached is not None and cached[0] == key:
        return cached[1]
    attrs = dict(a)
    attrs.update(
        context_sparse_keys=c_sparse,
        context_dense_keys=c_dense,
        context_ragged_keys=c_ragged,
        feature_list_sparse_keys=f_sparse,
        feature_list_dense_keys=f_dense,
        feature_list_ragged_keys=f_ragged,
        feature_list_dense_missing_assumed_empty=[k for k, f in zip(f_dense, flags) if f],
        _example_names=names,
    )
    ctx.kernel_state["attrs"] = (key, attrs)
    return attrs


def _unbatch(attrs, out: list) -> list:
    """The results for a scalar `serialized`: the batch of one without its batch axis."""
    counts = (
        len(attrs["context_sparse_types"]),
        len(attrs["Tcontext_dense"]),
        len(attrs["feature_list_sparse_types"]),
        len(attrs["feature_list_dense_types"]),
    )
    ncs, ncd, nfs, nfd = counts
    ncr = len(attrs["context_ragged_value_types"])
    nfr = len(attrs["feature_list_ragged_value_types"])
    if ncr or nfr:
        raise errors.UnimplementedError(
            None, None, "ParseSequenceExampleV2: RaggedFeature of a scalar record"
        )
    i = 0
    res = []
    for group, n in (("sparse", ncs), ("dense", ncd), ("sparse", nfs), ("dense", nfd)):
        if group == "sparse":
            res += [np.ascontiguousarray(t[:, 1:]) for t in out[i : i + n]]
            res += [t.copy() for t in out[i + n : i + 2 * n]]
            res += [t[1:].copy() for t in out[i + 2 * n : i + 3 * n]]
            i += 3 * n
        else:
            res += [t[0].copy() for t in out[i : i + n]]
            i += n
    res += [t[0].copy() for t in out[i : i + nfd]]  # the lengths
    return res


@ParseSequenceExampleV2.kernel("CPU")
async def _parse_sequence_example(
    ctx, serialized, debug_name, c_sparse, c_dense, c_ragged, f_sparse, f_dense, f_ragged,
    missing_empty, *defaults,
):  # fmt: skip
    if np.ndim(serialized) > 1:
        raise _invalid(
            f"Expected serialized to be a scalar or vector, got shape: "
            f"{list(np.shape(serialized))}"
        )
    keys = (c_sparse, c_dense, c_ragged, f_sparse, f_dense, f_ragged)
    attrs = _kernel_attrs(ctx, keys, missing_empty, debug_name)
    single = np.ndim(serialized) == 0
    batch = np.reshape(serialized, [1]) if single else serialized
    if np.size(batch) > 64:
        out = await ctx.device.compute(_parse_sync, attrs, batch, defaults)
    else:
        out = _parse_sync(attrs, batch, defaults)
    if single:
        out = _unbatch(attrs, list(out))
    return out[0] if len(out) == 1 else out


# -- builders ------------------------------------------------------------------------------


def _split(features, where: str, sequence: bool):
    """(sparse [(key, dtype)], dense [(key, feature)], ragged {key: RaggedFeature},
    ragged keys [(key, dtype)]: the keys the RaggedFeatures read)."""
    sparse, dense, ragged = [], [], {}
    keys = ragged_keys(features or {})
    for key in sorted(features or {}):
        f = features[key]
        if isinstance(f, RaggedFeature):
            ragged[key] = f
        elif isinstance(f, VarLenFeature):
            sparse.append((key, dtypes.as_dtype(f.dtype)))
        elif isinstance(f, FixedLenSequenceFeature if sequence else FixedLenFeature):
            if sequence and f.default_value is not None:
                raise ValueError(f"Value feature_list.dense_defaults[{key}] must be None")
            dense.append((key, f))
        else:
            raise ValueError(f"Unsupported {type(f).__name__} {f} for key '{key}'")
    prefix = "context" if where == "context" else "feature_list"
    dense_param = "context_dense_defaults" if where == "context" else "feature_list_dense_types"
    _check_parse_types(f"{prefix}_sparse_types", [dt for _, dt in sparse])
    _check_parse_types(dense_param, [dtypes.as_dtype(f.dtype) for _, f in dense])
    return sparse, dense, ragged, [(k, dt) for k, (dt, _) in keys.items()]


def _build(serialized, context_features, sequence_features, name, scope, example_names=None):
    if not context_features and not sequence_features:
        raise ValueError(
            "Both context_features and sequence_features are None, but at least one should "
            "have values."
        )
    c_sparse, c_dense, c_ragged, c_rkeys = _split(context_features, "context", False)
    f_sparse, f_dense, f_ragged, f_rkeys = _split(sequence_features, "sequence", True)
    defaults, c_shapes = [], []
    for key, f in c_dense:
        d, shape, _ = _dense_default(key, f)
        defaults.append(d)
        c_shapes.append(shape)
    f_shapes = []
    for key, f in f_dense:
        shape = tensor_shape.as_shape(f.shape)
        if not shape.is_fully_defined():
            raise ValueError(
                f"All dimensions of shape for feature {key} need to be known but received {shape}."
            )
        f_shapes.append(shape)
    with ops.name_scope(name, scope, [serialized]):
        serialized = ops.convert_to_tensor(serialized, dtype=dtypes.string, name="serialized")
        batch = serialized
        if scope == "ParseSingleSequenceExample":
            serialized.shape.with_rank(0)
            batch = array_ops.reshape(serialized, [1])
        def keys(name, items):
            return ops.convert_to_tensor(
                np.array([k for k, _ in items], dtype=object).reshape(-1),
                dtype=dtypes.string,
                name=name,
            )

        op = ops.apply_op(
            "ParseSequenceExampleV2",
            [
                batch,
                ops.convert_to_tensor(np.array([], dtype=object), dtypes.string, "debug_name"),
                keys("context_sparse_keys", c_sparse),
                keys("context_dense_keys", c_dense),
                keys("context_ragged_keys", c_rkeys),
                keys("feature_list_sparse_keys", f_sparse),
                keys("feature_list_dense_keys", f_dense),
                keys("feature_list_ragged_keys", f_rkeys),
                ops.convert_to_tensor(
                    np.array([bool(f.allow_missing) for _, f in f_dense], dtype=bool),
                    dtypes.bool,
                    "feature_list_dense_missing_assumed_empty",
                ),
                defaults,
            ],
            {
                "Ncontext_sparse": len(c_sparse),
                "Nfeature_list_sparse": len(f_sparse),
                "Nfeature_list_dense": len(f_dense),
                "context_sparse_types": [dt for _, dt in c_sparse],
                "Tcontext_dense": [d.dtype for d in defaults],
                "feature_list_sparse_types": [dt for _, dt in f_sparse],
                "feature_list_dense_types": [dtypes.as_dtype(f.dtype) for _, f in f_dense],
                "context_dense_shapes": c_shapes,
                "feature_list_dense_shapes": f_shapes,
                "_example_names": _names(example_names),
                "context_ragged_value_types": [dt for _, dt in c_rkeys],
                "feature_list_ragged_value_types": [dt for _, dt in f_rkeys],
                "context_ragged_split_types": [dtypes.int64] * len(c_rkeys),
                "feature_list_ragged_split_types": [dtypes.int64] * len(f_rkeys),
            },
            name="ParseSequenceExampleV2",
        )
        context, lists, lengths = _outputs(
            list(op.outputs), c_sparse, c_dense, f_sparse, f_dense, c_rkeys, f_rkeys
        )
        context.update(_ragged_outputs(c_ragged, context.pop("_ragged"), "rows"))
        lists.update(_ragged_outputs(f_ragged, lists.pop("_ragged"), "steps"))
    return context, lists, lengths


def _ragged_outputs(ragged: dict, parts: dict, layout: str) -> dict:
    """The RaggedTensors of `ragged` from each key's parsed (values, *row splits)."""
    out = {}
    for key, f in ragged.items():
        value_key, *partition_keys = parsing_ragged.needed_keys(key, f)
        values, *rows = parts[value_key]
        sources = [(None, rows)] + [(parts[k][0], list(parts[k][1:])) for k in partition_keys]
        out[key] = parsing_ragged.build(key, f, values, sources, layout)
    return out


def _names(example_names) -> list:
    """Names given as Python values, for messages (a Tensor of names is not read: the
    messages then say "<unknown>", as parse_example's)."""
    if example_names is None or isinstance(example_names, ops.Tensor):
        return []
    return [n.decode() if isinstance(n, bytes) else str(n) for n in np.ravel(example_names)]


def _outputs(outs, c_sparse, c_dense, f_sparse, f_dense, c_rkeys=(), f_rkeys=()):
    def take(n):
        nonlocal outs
        got, outs = outs[:n], outs[n:]
        return got

    ci, cv, cs, cd = (
        take(len(c_sparse)),
        take(len(c_sparse)),
        take(len(c_sparse)),
        take(len(c_dense)),
    )
    crv, crs = take(len(c_rkeys)), take(len(c_rkeys))
    fi, fv, fs, fd, fl = (take(len(f_sparse)), take(len(f_sparse)), take(len(f_sparse)),
                          take(len(f_dense)), take(len(f_dense)))  # fmt: skip
    frv, fro, fri = take(len(f_rkeys)), take(len(f_rkeys)), take(len(f_rkeys))
    context = {k: SparseTensor(i, v, s) for (k, _), i, v, s in zip(c_sparse, ci, cv, cs)}
    context.update({k: d for (k, _), d in zip(c_dense, cd)})
    lists = {k: SparseTensor(i, v, s) for (k, _), i, v, s in zip(f_sparse, fi, fv, fs)}
    lists.update({k: d for (k, _), d in zip(f_dense, fd)})
    lengths = {k: n for (k, _), n in zip(f_dense, fl)}
    # (each ragged key's parsed parts, under "_ragged" until _build makes the features)
    context["_ragged"] = {k: (v, s) for (k, _), v, s in zip(c_rkeys, crv, crs)}
    lists["_ragged"] = {k: (v, o, i) for (k, _), v, o, i in zip(f_rkeys, frv, fro, fri)}
    return context, lists, lengths


def _first_row(context, lists):
    """The single form's results: row 0 of each dense output, each sparse output without
    its batch column (TF's parse_single_sequence_example over the batched op)."""

    def one(t):
        if isinstance(t, RaggedTensor):
            return t[0]
        if isinstance(t, SparseTensor):
            return SparseTensor(t.indices[:, 1:], t.values, t.dense_shape[1:])
        return array_ops.squeeze(t, [0])

    return {k: one(v) for k, v in context.items()}, {k: one(v) for k, v in lists.items()}


def parse_single_sequence_example(
    serialized,
    context_features=None,
    sequence_features=None,
    example_name=None,
    name=None,
):
    """Parses one serialized `SequenceExample` (a scalar string).

    Returns (context, feature_lists): dicts of a Tensor per FixedLenFeature /
    FixedLenSequenceFeature ([time] + shape) and a SparseTensor per VarLenFeature.

    Raises:
      ValueError: both feature dicts empty, a FixedLenSequenceFeature with a
        default_value, an unsupported feature or dtype (at build time).
      InvalidArgumentError (when run): a record does not parse, a required feature or
        feature list is missing, or values have the wrong type or count.
    """
    context, lists, _ = _build(
        serialized,
        context_features,
        sequence_features,
        name,
        "ParseSingleSequenceExample",
        None if example_name is None else [example_name],
    )
    return _first_row(context, lists)


def parse_sequence_example(
    serialized,
    context_features=None,
    sequence_features=None,
    example_names=None,
    name=None,
):
    """Parses a batch (a string vector) of serialized `SequenceExample`s.

    Returns (context, feature_lists, feature_list_lengths): dense feature lists are
    padded with zeros to the batch's longest ([batch, time] + shape) and their lengths
    given per record.

    Raises: as `parse_single_sequence_example`.
    """
    return _build(
        serialized,
        context_features,
        sequence_features,
        name,
        "ParseSequenceExample",
        example_names,
    )
