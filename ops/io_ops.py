"""Checkpoint I/O ops: SaveV2, RestoreV2, MergeV2Checkpoints, ShardedFilename.

Save and restore are graph ops, as in the OSDI paper (§4.3): a Saver builds a SaveV2
fed with the variables' values and a RestoreV2 whose outputs it assigns back.  The byte
formats live in `asyncflow.checkpoint_format`; these kernels only move bytes, off the
event loop: small files through aiofiles, the large data-file write, CRCs and fsyncs on
worker threads.

Crash safety: SaveV2 writes "<prefix>.data-00000-of-00001" and then "<prefix>.index",
each to a temporary file that is fsynced and renamed; MergeV2Checkpoints renames the
shards' data files into place and writes the merged index last.  A checkpoint exists
exactly when its index does, so a crash never exposes a half-written one.
"""

from __future__ import annotations

import asyncio
import os
import re

import aiofiles.os
import numpy as np

from asyncflow import checkpoint_format as cf
from asyncflow import checkpoint_v1, dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.registry import NotDifferentiable, TypeConstraint, register_op

__all__ = [
    "save_v2",
    "restore_v2",
    "merge_v2_checkpoints",
    "sharded_filename",
    "checkpoint_prefix",
]

_DATA_SUFFIX = re.compile(r"\.data-\d{5}-of-\d{5}$")


def checkpoint_prefix(path: str) -> str:
    """The checkpoint prefix of `path`: a prefix, its ".index" or one of its data files."""
    if path.endswith(".index"):
        return path[: -len(".index")]
    return _DATA_SUFFIX.sub("", path)


def _str(value) -> str:
    value = value.item() if isinstance(value, np.ndarray) else value
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _strings(value, what: str) -> list[str]:
    arr = np.asarray(value, dtype=object)
    if arr.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, f"Input {what} should be a vector, got shape {list(arr.shape)}"
        )
    return [_str(v) for v in arr.tolist()]


def _scalar_string(value, what: str) -> str:
    arr = np.asarray(value, dtype=object)
    if arr.size != 1:
        raise errors.InvalidArgumentError(
            None, None, f"Input {what} should be a scalar, got shape {list(arr.shape)}"
        )
    return _str(arr.reshape(-1)[0])


_TF_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "half"}


def _tf_type_name(dt: dtypes.DType) -> str:
    return _TF_TYPE_NAMES.get(dt.name, dt.name)


# -- SaveV2 ------------------------------------------------------------------------------

SaveV2 = register_op(
    "SaveV2",
    inputs=[
        "prefix: string",
        "tensor_names: string",
        "shape_and_slices: string",
        "tensors: dtypes",
    ],
    attrs={"dtypes": TypeConstraint(None, is_list=True)},
    shape_fn=lambda op: [],
    stateful=True,
    is_async=True,
)
NotDifferentiable("SaveV2")


@SaveV2.kernel("CPU")
async def _save_v2(ctx, prefix, tensor_names, shape_and_slices, *tensors):
    prefix = _scalar_string(prefix, "prefix")
    names = _strings(tensor_names, "tensor_names")
    slices = _strings(shape_and_slices, "shape_and_slices")
    if len(names) != len(tensors) or len(slices) != len(tensors):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Got {len(names)} tensor names, {len(slices)} shape_and_slices and "
            f"{len(tensors)} tensors: they must be equal",
        )
    keys = list(zip(names, slices))
    if len(set(keys)) != len(keys):
        dup = next(n for n, sl in keys if keys.count((n, sl)) > 1)
        raise errors.InvalidArgumentError(None, None, f"Duplicate tensor name {dup!r} in SaveV2")
    data, sliced = {}, {}  # in SaveV2's order, as TF's BundleWriter lays data out
    for name, spec, t in zip(names, slices, tensors):
        t = np.asarray(t)
        if not spec:
            data[name] = t
            continue
        full, starts, lengths = cf.parse_slice_spec(spec)
        want = [d if n == -1 else n for d, n in zip(full, lengths)]
        if list(t.shape) != want:
            raise errors.InvalidArgumentError(
                None, None,
                "Slice in shape_and_slice specification does not match the shape of the tensor "
                f"to  save: {spec}, tensor: {list(t.shape)}",
            )  # fmt: skip
        if want == full:  # a single slice covering the tensor is saved whole, as TF
            data[name] = t
            continue
        entry = sliced.setdefault(name, {"dtype": t.dtype, "shape": full, "slices": []})
        if entry["shape"] != full or entry["dtype"] != t.dtype:
            raise errors.InvalidArgumentError(
                None, None, f"Slices of {name!r} disagree on the full shape or dtype"
            )
        entry["slices"].append((starts, lengths, t))
        data[cf.slice_key(name, starts, lengths)] = t
    await write_checkpoint(prefix, data, sliced)


async def write_checkpoint(prefix: str, data: dict, sliced: dict | None = None) -> None:
    """Write a one-shard checkpoint: the data file, then the index (both atomically).

    `data` maps names (and slices' keys) to arrays, laid out in its order.  `sliced`
    maps a name to {"dtype", "shape", "slices": [(starts, lengths, array)]} (lengths -1
    for a whole dimension): each slice is stored under its own key (`cf.slice_key`) and
    the name's entry lists them, as TF's BundleWriter::AddSlice does.
    """
    sliced = sliced or {}
    loop = asyncio.get_running_loop()
    dirname = os.path.dirname(prefix)
    if dirname:  # as TF's BundleWriter: the prefix's own directory is created, not its parents
        try:
            await aiofiles.os.mkdir(dirname)
        except FileExistsError:
            pass
        except FileNotFoundError as e:
            raise errors.NotFoundError(None, None, f"{dirname}: {e.strerror}") from e
    try:
        entries = await loop.run_in_executor(
            None, cf.write_data_file, cf.data_path(prefix, 0, 1), data, 0, True
        )
    except FileNotFoundError as e:
        raise errors.NotFoundError(None, None, f"{os.path.dirname(prefix)}: {e.strerror}") from e
    index = {name: entries[name] for name in data if isinstance(name, str)}
    for name, info in sliced.items():
        parts = []
        for starts, lengths, t in info["slices"]:
            parts.append({
                "start": starts,
                "length": list(t.shape),
                "key_lengths": lengths,
                "entry": entries[cf.slice_key(name, starts, lengths)],
            })  # fmt: skip
        index[name] = {"dtype": dtypes.as_dtype(info["dtype"]).name, "shape": info["shape"],
                       "slices": parts}  # fmt: skip
    await cf.aatomic_write(cf.index_path(prefix), cf.encode_index(1, index))


def save_v2(prefix, tensor_names, shape_and_slices, tensors, name=None) -> ops.Operation:
    """Save `tensors` under `tensor_names` to the checkpoint `prefix` (TF's SaveV2).

    A non-empty `shape_and_slices` entry ("<full shape> <start,length:...>") saves the
    tensor as that slice of the named whole tensor, as TF saves partitioned variables.

    Raises (when run):
      InvalidArgumentError: lengths differ, a (name, slice) repeats, or a bad slice spec.
      NotFoundError: the directory of `prefix` does not exist.
    """
    return ops.apply_op(
        "SaveV2", [prefix, tensor_names, shape_and_slices, list(tensors)], {}, name=name
    )


# -- RestoreV2 ---------------------------------------------------------------------------


def _restore_shape(op):
    return [tensor_shape.unknown_shape() for _ in op._attr("dtypes")]


RestoreV2 = register_op(
    "RestoreV2",
    inputs=["prefix: string", "tensor_names: string", "shape_and_slices: string"],
    outputs=["tensors: dtypes"],
    attrs={"dtypes": TypeConstraint(None, is_list=True)},
    shape_fn=_restore_shape,
    stateful=True,
    is_async=True,
)
NotDifferentiable("RestoreV2")


@RestoreV2.kernel("CPU")
async def _restore_v2(ctx, prefix, tensor_names, shape_and_slices):
    prefix = checkpoint_prefix(_scalar_string(prefix, "prefix"))
    names = _strings(tensor_names, "tensor_names")
    slices = _strings(shape_and_slices, "shape_and_slices")
    want = ctx.attrs["dtypes"]
    if len(names) != len(want) or len(slices) != len(want):
        raise errors.InvalidArgumentError(
            None, None, f"Got {len(names)} tensor names for {len(want)} dtypes"
        )
    legacy = ctx.attrs.get("_legacy_names")
    if legacy:
        names, slices = await _legacy_fallback(prefix, names, slices, legacy)
    values = await read_checkpoint(prefix, names, want, ctx.device)
    for i, spec in enumerate(slices):
        if spec:
            values[i] = _cut_slice(names[i], spec, values[i])
    return values[0] if len(values) == 1 else tuple(values)


async def _legacy_fallback(prefix, names, slices, legacy):
    """`names` and `slices` with each key the checkpoint lacks replaced by its legacy
    name (read whole) when the checkpoint holds that name with the slice's shape.

    asyncflow before commit 1a64274 saved the optimizer slots of partitioned variables
    whole under their own names ("w/part_0/Adam") where TF saves slices of "w/Adam".
    """
    try:
        held = (await cf.aread_index(prefix))["tensors"]
    except errors.OpError:
        return names, slices  # read_checkpoint reports it
    names, slices = list(names), list(slices)
    for i, old in enumerate(legacy):
        old = old.decode() if isinstance(old, bytes) else old  # as a GraphDef holds it
        if not old or names[i] in held or old not in held:
            continue
        if slices[i]:
            full, _, lengths = cf.parse_slice_spec(slices[i])
            shape = [d if n == -1 else n for d, n in zip(full, lengths)]
        else:
            shape = None
        if shape is None or list(held[old]["shape"]) == shape:
            names[i], slices[i] = old, ""
    return names, slices


def _cut_slice(name: str, spec: str, whole: np.ndarray) -> np.ndarray:
    """The slice `spec` names of a tensor read whole (any partitioning it was saved in)."""
    full, starts, lengths = cf.parse_slice_spec(spec)
    if list(whole.shape) != full:
        raise errors.InvalidArgumentError(
            None, None,
            f"tensor_name = {name}; shape in shape_and_slice spec {full} does not match the "
            f"shape stored in checkpoint: {list(whole.shape)}",
        )  # fmt: skip
    index = tuple(slice(None) if n == -1 else slice(a, a + n) for a, n in zip(starts, lengths))
    return np.ascontiguousarray(whole[index])


async def read_checkpoint(prefix: str, names: list[str], want=None, device=None) -> list:
    """The arrays `names` of checkpoint `prefix`, checked against dtypes `want`.

    Raises: NotFoundError (no checkpoint, unknown key), InvalidArgumentError (dtype),
    DataLossError (corrupt files).
    """
    try:
        index = await cf.aread_index(prefix)
    except errors.NotFoundError:
        # TF's RestoreV2 reads a prefix without an index as a V1 checkpoint's pattern.
        return await _read_v1_checkpoint(prefix, names, want)
    by_shard: dict[int, list[str]] = {}
    for i, name in enumerate(names):
        info = index["tensors"].get(name)
        if info is None:
            raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint")
        have = dtypes.as_dtype(info["dtype"])
        if want is not None and have != want[i]:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"tensor_name = {name}; expected dtype {_tf_type_name(want[i])} does not "
                f"equal original dtype {_tf_type_name(have)}",
            )
        by_shard.setdefault(info["shard"], []).append(name)
    found: dict[str, np.ndarray] = {}
    for shard, shard_names in sorted(by_shard.items()):
        filename = cf.data_path(prefix, shard, index["num_shards"])
        if device is not None:
            sizes = [int(np.prod(index["tensors"][n]["shape"], dtype=object)) for n in shard_names]
            device.check_alloc(sum(sizes), dtypes.uint8)
        try:
            got = await cf.aread_shard_tensors(filename, index, shard_names)
        except errors.NotFoundError:
            raise errors.DataLossError(
                None, None, f"Checkpoint data file {filename} named by {prefix}.index is missing"
            ) from None
        for n in shard_names:
            info, arr = index["tensors"][n], got[n]
            if dtypes.as_dtype(arr.dtype) != dtypes.as_dtype(info["dtype"]) or list(
                arr.shape
            ) != list(info["shape"]):
                raise errors.DataLossError(
                    None, None, f"Tensor '{n}' in {filename} does not match {prefix}.index"
                )
        found.update(got)
    return [found[n] for n in names]


async def _read_v1_checkpoint(pattern: str, names: list[str], want) -> list:
    loop = asyncio.get_running_loop()
    tensors, values = await loop.run_in_executor(None, checkpoint_v1.read, pattern, names)
    for i, name in enumerate(names):
        have = tensors[name].dtype
        if want is not None and have != want[i]:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Expected to restore a tensor of type {_tf_type_name(want[i])}, got a tensor "
                f"of type {_tf_type_name(have)} instead: tensor_name = {name}",
            )
    return [values[n] for n in names]


def restore_v2(  # noqa: A002
    prefix, tensor_names, shape_and_slices, dtypes, name=None, legacy_names=None
):
    """Tensors `tensor_names` of the checkpoint `prefix`, of the given `dtypes`.

    `legacy_names` (asyncflow's, not TF's; kept in the private attr "_legacy_names"):
    per tensor, a name to read whole instead when the checkpoint lacks the tensor.

    Raises (when run):
      NotFoundError: no checkpoint at `prefix`, or a name it does not hold.
      InvalidArgumentError: a saved dtype differs from the requested one.
      DataLossError: a corrupt or truncated checkpoint file.
    """
    attrs = {"dtypes": list(dtypes)}
    if legacy_names is not None:
        attrs["_legacy_names"] = [str(n) for n in legacy_names]
    op = ops.apply_op("RestoreV2", [prefix, tensor_names, shape_and_slices], attrs, name=name)
    return list(op.outputs)


# -- MergeV2Checkpoints ----------------------------------------------------------------

MergeV2Checkpoints = register_op(
    "MergeV2Checkpoints",
    inputs=["checkpoint_prefixes: string", "destination_prefix: string"],
    attrs={"delete_old_dirs": True, "allow_missing_files": False},
    shape_fn=lambda op: [],
    stateful=True,
    is_async=True,
)
NotDifferentiable("MergeV2Checkpoints")


@MergeV2Checkpoints.kernel("CPU")
async def _merge_v2(ctx, checkpoint_prefixes, destination_prefix):
    sources = _strings(np.asarray(checkpoint_prefixes, dtype=object).reshape(-1), "prefixes")
    dest = _scalar_string(destination_prefix, "destination_prefix")
    indexes = []
    for src in sources:
        try:
            indexes.append(await cf.aread_index(src))
        except errors.NotFoundError:
            if not ctx.attrs["allow_missing_files"]:
                raise
            indexes.append(None)
    present = [(s, ix) for s, ix in zip(sources, indexes) if ix is not None]
    n = len(present)
    merged: dict[str, dict] = {}
    for shard, (src, ix) in enumerate(present):
        for name, info in ix["tensors"].items():
            info = _in_shard(info, shard)
            have = merged.get(name)
            if have is None:
                merged[name] = info
            elif "slices" in have and "slices" in info and _same_tensor(have, info):
                have["slices"] = have["slices"] + info["slices"]  # TF's MergeBundles
            else:
                raise errors.InvalidArgumentError(
                    None, None, f"Tensor {name} appears in more than one shard"
                )
        if ix["num_shards"] != 1:
            raise errors.InvalidArgumentError(None, None, f"{src} is already a merged checkpoint")
        await aiofiles.os.replace(cf.data_path(src, 0, 1), cf.data_path(dest, shard, n))
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, cf.fsync_dir, os.path.dirname(dest))
    await cf.aatomic_write(cf.index_path(dest), cf.encode_index(max(n, 1), merged))
    for src, _ in present:
        await aiofiles.os.remove(cf.index_path(src))
        if ctx.attrs["delete_old_dirs"]:
            try:
                await aiofiles.os.rmdir(os.path.dirname(src))
            except OSError:
                pass  # not empty or already gone: TF ignores this too


def _in_shard(info: dict, shard: int) -> dict:
    if "slices" not in info:
        return dict(info, shard=shard)
    parts = [dict(p, entry=dict(p["entry"], shard=shard)) for p in info["slices"]]
    return dict(info, slices=parts)


def _same_tensor(a: dict, b: dict) -> bool:
    return a["dtype"] == b["dtype"] and list(a["shape"]) == list(b["shape"])


def merge_v2_checkpoints(
    checkpoint_prefixes, destination_prefix, delete_old_dirs=True, allow_missing_files=False,
    name=None,
):  # fmt: skip
    """Merge one-shard checkpoints into `destination_prefix` (data files renamed, index last).

    Raises (when run):
      NotFoundError: a source checkpoint is missing (unless allow_missing_files).
      InvalidArgumentError: a tensor name appears in two sources.
    """
    attrs = {"delete_old_dirs": delete_old_dirs, "allow_missing_files": allow_missing_files}
    return ops.apply_op(
        "MergeV2Checkpoints", [checkpoint_prefixes, destination_prefix], attrs, name=name
    )


# -- ShardedFilename ---------------------------------------------------------------------

ShardedFilename = register_op(
    "ShardedFilename",
    inputs=["basename: string", "shard: int32", "num_shards: int32"],
    outputs=["filename: string"],
    shape_fn=lambda op: [tensor_shape.scalar()],
)
NotDifferentiable("ShardedFilename")


@ShardedFilename.kernel("CPU")
async def _sharded_filename(ctx, basename, shard, num_shards):
    base = _scalar_string(basename, "basename")
    return np.asarray(f"{base}-{int(shard):05d}-of-{int(num_shards):05d}".encode(), dtype=object)


def sharded_filename(basename, shard, num_shards, name=None):
    """The name "<basename>-<shard:05d>-of-<num_shards:05d>" (TF's ShardedFilename)."""
    return ops.apply_op("ShardedFilename", [basename, shard, num_shards], name=name).outputs[0]
