"""TF's WriteFile (`tf.io.write_file`, TF1's `tf.write_file`): a string scalar written
to a file, its directory created first, as TF's kernel does.  The write goes through
aiofiles (its worker threads), so the kernel suspends instead of blocking the loop.
"""

from __future__ import annotations

import os

import aiofiles
import aiofiles.os
import numpy as np

from asyncflow import errors, python_io
from asyncflow import graph as ops
from asyncflow.registry import NotDifferentiable, register_op

__all__ = ["write_file"]


def _scalar_inputs(op):
    for t in op.inputs:
        t.shape.with_rank(0)
    return []


WriteFile = register_op(
    "WriteFile",
    inputs=["filename: string", "contents: string"],
    outputs=[],
    shape_fn=_scalar_inputs,
    stateful=True,
    is_async=True,
)
NotDifferentiable("WriteFile")


def _scalar(x, what: str) -> bytes:
    x = np.asarray(x, dtype=object)
    if x.ndim != 0:
        shape = "[" + ",".join(str(d) for d in x.shape) + "]"
        raise errors.InvalidArgumentError(
            None, None, f"Input {what} should be a scalar but has shape {shape}"
        )
    v = x[()]
    return v if isinstance(v, bytes) else str(v).encode()


@WriteFile.kernel("CPU")
async def _write_file(ctx, filename, contents):
    path = os.fsdecode(_scalar(filename, "filename"))
    data = _scalar(contents, "contents")
    try:
        directory = os.path.dirname(path)
        if directory:
            await aiofiles.os.makedirs(directory, exist_ok=True)
        async with aiofiles.open(path, "wb") as f:
            await f.write(data)
    except OSError as e:
        raise python_io.os_error(path, e) from None


def write_file(filename, contents, name=None):
    """`tf.io.write_file`: writes `contents` to `filename` (creating its directory), an
    op with no output.

    Raises (when run):
      InvalidArgumentError: filename or contents not a scalar.
      NotFoundError / PermissionDeniedError / FailedPreconditionError: the write fails.
    """
    return ops.apply_op("WriteFile", [filename, contents], name=name)
