"""`Dataset.save` / `Dataset.load` / `Dataset.snapshot` (and tf.data.experimental's
save, load and snapshot) in TF 2.21's graph mode, on the ops of ops/dataset_snapshot.py.

As TF's Python does: `save` writes `path/dataset_spec.pb` (the element_spec) when the
graph is built and returns the SaveDataset op, which writes the elements when run;
`load` without an element_spec reads that file when the graph is built; the default
`reader_func` interleaves the shard datasets with `cycle_length` = the CPU count;
`snapshot` without a `shard_func` enumerates the input and shards element i to
i % CPU count.  `load` also reads a distributed snapshot (tf.data.experimental.
distributed_save's chunks; LoadDataset's kernel tells the two apart by the metadata
file).  A snapshot's directory is named by a hash of the input pipeline's
graph (op types, attrs and constants, not names), so the same pipeline built again
finds the snapshot an earlier run finished.

The Dataset class and its function tracer are passed in (`cls`, `trace`):
asyncflow/data/dataset.py imports this module.
"""

from __future__ import annotations

import hashlib
import os
import time

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow import snapshot_format as sf
from asyncflow.data.structure import (
    _component_attrs,
    _DatasetSpec,
    _flat,
    _pack,
    _SparseSpec,
    _Spec,
)
from asyncflow.framework_extras import TensorSpec
from asyncflow.ops import dataset_more, dataset_ops

__all__ = ["save", "load", "snapshot"]

_RETRY_SECONDS = 5


def _cpu_count() -> int:
    return os.cpu_count() or 1


def _default_reader(datasets):
    return datasets.interleave(lambda x: x, cycle_length=_cpu_count(), num_parallel_calls=-1)


def _spec_nest(structure):
    """The (name, shape, dtype) leaves snapshot_format encodes, for a dense structure.

    Raises:
      TypeError: a SparseTensor or dataset component (TF saves those as variants).
    """
    flat = []
    for s in _flat(structure):
        if isinstance(s, (_SparseSpec, _DatasetSpec)):
            raise TypeError(f"Saving a dataset with a {s!r} component is not supported.")
        flat.append(("", s.shape, s.dtype))
    return _pack(structure, flat)


def _structure_of_spec(spec):
    """A component structure from an element_spec (TensorSpecs) or a decoded spec nest."""
    if isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[2], dtypes.DType):
        return _Spec(spec[2], spec[1])
    if hasattr(spec, "shape") and hasattr(spec, "dtype") and not isinstance(spec, tuple):
        kind = type(spec).__name__
        if kind == "SparseTensorSpec":
            return _SparseSpec(spec.dtype, spec.shape)
        if kind != "TensorSpec":
            raise TypeError(f"Unsupported element_spec component {spec!r}")
        return _Spec(spec.dtype, spec.shape)
    if isinstance(spec, dict):
        return {k: _structure_of_spec(v) for k, v in spec.items()}
    if isinstance(spec, tuple) and hasattr(spec, "_fields"):
        return type(spec)(*[_structure_of_spec(v) for v in spec])
    if isinstance(spec, (tuple, list)):
        return tuple(_structure_of_spec(v) for v in spec)
    raise TypeError(f"Unsupported element_spec component {spec!r}")


def _path_str(path) -> str:
    if isinstance(path, ops.Tensor):
        v = ops.constant_value(path)
        if v is None:
            raise ValueError("`path` must be a Python string or a constant string tensor.")
        path = v.item() if isinstance(v, np.ndarray) else v
    return path.decode() if isinstance(path, bytes) else os.fspath(path)


def _compression(compression) -> str:
    return "" if compression is None else str(compression)


# -- save ------------------------------------------------------------------------------------


def save(ds, trace, path, compression=None, shard_func=None, checkpoint_args=None):
    """The SaveDataset op writing `ds` to `path` when run (TF1 graph mode: TF ignores
    `checkpoint_args` outside eager execution, as here).

    Raises:
      TypeError: components TF saves as variants (SparseTensors, datasets).
    """
    p = _path_str(path)
    spec = sf.encode_spec(_spec_nest(ds._structure))
    os.makedirs(p, exist_ok=True)
    with open(os.path.join(p, sf.SPEC_FILE), "wb") as f:
        f.write(spec)
    attrs = {"compression": _compression(compression), "use_shard_func": shard_func is not None}
    captures: list = []
    if shard_func is not None:
        t = trace(shard_func, ds._structure, "save")
        captures = t.op_inputs()
        attrs.update(dataset_more.function_attrs("shard", t.inputs, t.outputs, t.captures))
    path_t = ops.convert_to_tensor(p, dtype=dtypes.string, name="path")
    return ops.apply_op("SaveDataset", [ds._variant, path_t, captures], attrs, name="SaveDataset")


# -- load ------------------------------------------------------------------------------------


def _load_spec(path: str):
    name = os.path.join(path, sf.SPEC_FILE)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(
            None, None, f"tf.data snapshot element_spec file not found: {name}."
        ) from None
    try:
        return sf.decode_spec(data)
    except (ValueError, errors.DataLossError) as e:
        raise errors.NotFoundError(
            None, None, f"tf.data snapshot element_spec file not found or invalid: {name}."
        ) from e


def _trace_reader(cls, trace, reader_func, structure, what):
    t = trace(reader_func or _default_reader, _DatasetSpec(_DatasetSpec(structure)), what)
    if not isinstance(t.structure, cls):
        raise TypeError("`reader_func` must return a `Dataset` object.")
    return t


def load(cls, trace, path, element_spec=None, compression=None, reader_func=None, wait=False):
    """A dataset of the elements saved at `path` (`wait`: retry every 5 s until a
    snapshot is there, as TF).

    Raises:
      NotFoundError: no element_spec given and `path/dataset_spec.pb` missing or invalid.
    """
    p = _path_str(path)
    while element_spec is None:
        try:
            element_spec = _load_spec(p)
        except errors.NotFoundError:
            if not wait:
                raise
            time.sleep(_RETRY_SECONDS)
    structure = _structure_of_spec(element_spec)
    t = _trace_reader(cls, trace, reader_func, structure, "load")
    attrs = {**_component_attrs(structure), "compression": _compression(compression)}
    attrs.update(dataset_more.function_attrs("reader", t.inputs, t.outputs, t.captures))
    ds = cls(None, structure)
    path_t = ops.convert_to_tensor(p, dtype=dtypes.string, name="path")
    ds._variant = dataset_ops.dataset_op(
        "LoadDataset", [path_t, t.op_inputs()], attrs, name="LoadDataset"
    )
    return ds


# -- snapshot --------------------------------------------------------------------------------


def _canon(op, key, value, tensor_digest) -> bytes:
    if key.endswith(("_inputs", "_outputs", "_captures")) and isinstance(value, list):
        g = op.graph
        return b"|".join(tensor_digest(dataset_ops.function_result(g, n)) for n in value)
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return repr(value.tolist()).encode()
        return f"{value.dtype}{value.shape}".encode() + value.tobytes()
    if isinstance(value, (list, tuple)):
        return b"[" + b",".join(_canon(op, "", v, tensor_digest) for v in value) + b"]"
    if isinstance(value, dtypes.DType):
        return value.name.encode()
    if isinstance(value, tensor_shape.TensorShape):
        return str(value).encode()
    return repr(value).encode()


def graph_hash(tensor: ops.Tensor) -> int:
    """A 63-bit hash of the ops `tensor` depends on (types, attrs, constants, traced
    functions), blind to op names."""
    memo: dict = {}

    def op_digest(op) -> bytes:
        d = memo.get(op)
        if d is None:
            h = hashlib.sha256(op.type.encode())
            for k in sorted(op._attrs):
                if not k.startswith("_"):
                    h.update(k.encode() + b"=" + _canon(op, k, op._attrs[k], tensor_digest))
            for x in op.inputs:
                h.update(tensor_digest(x))
            for c in op.control_inputs:
                h.update(b"^" + op_digest(c))
            d = memo[op] = h.digest()
        return d

    def tensor_digest(x) -> bytes:
        if isinstance(x, ops.Operation):  # (a function's control outputs: `^name`)
            return b"^" + op_digest(x)
        return op_digest(x.op) + b":%d" % x.value_index

    return int.from_bytes(op_digest(tensor.op)[:8], "little") >> 1


def snapshot(cls, trace, ds, path, compression="AUTO", reader_func=None, shard_func=None):
    """`ds` through a snapshot at `path` (see the module note).

    Raises:
      TypeError: a `shard_func` not returning an int32/int64 scalar.
    """
    p = _path_str(path)
    project = shard_func is None
    src = ds.enumerate() if project else ds
    if project:
        n = _cpu_count()
        shard_func = lambda index, _: index % n  # noqa: E731 - TF's own default
    st = trace(shard_func, src._structure, "snapshot_shard")
    outs = st.outputs
    if (
        len(outs) != 1
        or outs[0].dtype not in (dtypes.int32, dtypes.int64)
        or outs[0].shape.ndims not in (0, None)
    ):
        got = [TensorSpec(t.shape, t.dtype) for t in outs]
        raise TypeError(
            "Invalid `shard_func`. `shard_func` must return `tf.int64` scalar tensor but "
            f"its return type is {got[0] if len(got) == 1 else tuple(got)}."
        )
    rt = _trace_reader(cls, trace, reader_func, src._structure, "snapshot_reader")
    attrs = {
        "compression": _compression(compression),
        "hash_valid": True,
        "hash": graph_hash(src._variant),
        **dataset_more.function_attrs("reader", rt.inputs, rt.outputs, rt.captures),
        **dataset_more.function_attrs("shard", st.inputs, st.outputs, st.captures),
    }
    path_t = ops.convert_to_tensor(p, dtype=dtypes.string, name="path")
    out = src._then(
        "SnapshotDatasetV2",
        [src._variant, path_t, rt.op_inputs(), st.op_inputs()],
        None,
        attrs,
        name="SnapshotDatasetV2",
    )
    return out.map(lambda _, elem: elem) if project else out
