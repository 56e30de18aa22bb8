"""TF1's V1 checkpoint ops: Save, SaveSlices, Restore, RestoreSlice, ShardedFilespec.

A V1 Saver (`write_version=SaverDef.V1`) writes one table file per shard with
SaveSlices and restores with RestoreV2, which reads a V1 checkpoint when the prefix has
no ".index" (io_ops.read_checkpoint); graphs from TF1 hold Save/Restore/RestoreSlice
too.  The byte format lives in `asyncflow.checkpoint_v1`; the kernels parse and encode
on a worker thread and write atomically (a temporary file renamed into place), so the
loop never blocks and a crash leaves the old file or the new one.
"""

from __future__ import annotations

import asyncio

import numpy as np

from asyncflow import checkpoint_format as cf
from asyncflow import checkpoint_v1, errors, tensor_shape
from asyncflow.ops.io_ops import _scalar_string, _strings, _tf_type_name
from asyncflow.registry import TypeConstraint, register_op

__all__ = ["sharded_filespec"]


def _no_outputs(op):
    return []


def _unknown(op):
    return [tensor_shape.unknown_shape()]


Save = register_op(
    "Save",
    inputs=["filename: string", "tensor_names: string", "data: T"],
    attrs={"T": TypeConstraint(None, is_list=True)},
    shape_fn=_no_outputs,
    stateful=True,
    is_async=True,
)
SaveSlices = register_op(
    "SaveSlices",
    inputs=["filename: string", "tensor_names: string", "shapes_and_slices: string", "data: T"],
    attrs={"T": TypeConstraint(None, is_list=True)},
    shape_fn=_no_outputs,
    stateful=True,
    is_async=True,
)
Restore = register_op(
    "Restore",
    inputs=["file_pattern: string", "tensor_name: string"],
    outputs=["tensor: dt"],
    attrs={"dt": TypeConstraint(None), "preferred_shard": -1},
    shape_fn=_unknown,
    stateful=True,
    is_async=True,
)
RestoreSlice = register_op(
    "RestoreSlice",
    inputs=["file_pattern: string", "tensor_name: string", "shape_and_slice: string"],
    outputs=["tensor: dt"],
    attrs={"dt": TypeConstraint(None), "preferred_shard": -1},
    shape_fn=_unknown,
    stateful=True,
    is_async=True,
)
ShardedFilespec = register_op(
    "ShardedFilespec",
    inputs=["basename: string", "num_shards: int32"],
    outputs=["filename: string"],
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
)


def _items(op_name, names, specs, tensors) -> list:
    """checkpoint_v1.encode's items for the Save/SaveSlices inputs."""
    if len(names) != len(tensors) or len(specs) != len(tensors):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{op_name}: expected {len(names)} tensors and {len(names)} shapes_and_slices, "
            f"got {len(tensors)} tensors and {len(specs)} shapes_and_slices",
        )
    items = []
    for name, spec, t in zip(names, specs, tensors, strict=True):
        t = np.asarray(t)
        if not spec:
            items.append((name, t, list(t.shape), [0] * t.ndim, [-1] * t.ndim))
            continue
        full, starts, lengths = cf.parse_slice_spec(spec)
        want = [d if n == -1 else n for d, n in zip(full, lengths, strict=True)]
        if list(t.shape) != want:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shape in shape_and_slice spec does not match the shape of the tensor to "
                f"save: {spec}, tensor: {list(t.shape)}",
            )
        items.append((name, t, full, starts, lengths))
    return items


async def _save(op_name, filename, names, specs, tensors) -> None:
    filename = _scalar_string(filename, "filename")
    names = _strings(names, "tensor_names")
    items = _items(op_name, names, specs, list(tensors))
    loop = asyncio.get_running_loop()
    raw = await loop.run_in_executor(None, checkpoint_v1.encode, items)
    try:
        await cf.aatomic_write(filename, raw)
    except FileNotFoundError as e:
        raise errors.NotFoundError(None, None, f"{filename}: {e.strerror}") from e


@Save.kernel("CPU")
async def _save_kernel(ctx, filename, tensor_names, *data):
    specs = [""] * len(np.asarray(tensor_names, dtype=object).reshape(-1))
    await _save("Save", filename, tensor_names, specs, data)


@SaveSlices.kernel("CPU")
async def _save_slices_kernel(ctx, filename, tensor_names, shapes_and_slices, *data):
    specs = _strings(shapes_and_slices, "shapes_and_slices")
    await _save("SaveSlices", filename, tensor_names, specs, data)


async def _restore(ctx, pattern, name, spec):
    pattern = _scalar_string(pattern, "file_pattern")
    name = _scalar_string(name, "tensor_name")
    loop = asyncio.get_running_loop()
    tensors, values = await loop.run_in_executor(None, checkpoint_v1.read, pattern, [name])
    want, have = ctx.attrs["dt"], tensors[name].dtype
    if want != have:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Expected to restore a tensor of type {_tf_type_name(want)}, got a tensor of "
            f"type {_tf_type_name(have)} instead: tensor_name = {name}",
        )
    whole = values[name]
    if not spec:
        return whole
    full, starts, lengths = cf.parse_slice_spec(spec)
    if list(whole.shape) != full:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Shape in shape_and_slice spec does not match the shape in the save file: "
            f"[{','.join(map(str, full))}], save file shape: "
            f"[{','.join(map(str, whole.shape))}]",
        )
    index = tuple(
        slice(None) if n == -1 else slice(a, a + n) for a, n in zip(starts, lengths, strict=True)
    )
    return np.ascontiguousarray(whole[index])


@Restore.kernel("CPU")
async def _restore_kernel(ctx, file_pattern, tensor_name):
    return await _restore(ctx, file_pattern, tensor_name, "")


@RestoreSlice.kernel("CPU")
async def _restore_slice_kernel(ctx, file_pattern, tensor_name, shape_and_slice):
    return await _restore(
        ctx, file_pattern, tensor_name, _scalar_string(shape_and_slice, "shape_and_slice")
    )


def sharded_filespec(basename: str, num_shards: int) -> str:
    return f"{basename}-?????-of-{int(num_shards):05d}"


@ShardedFilespec.kernel("CPU")
async def _sharded_filespec_kernel(ctx, basename, num_shards):
    spec = sharded_filespec(_scalar_string(basename, "basename"), int(num_shards))
    return np.array(spec.encode(), dtype=object)
