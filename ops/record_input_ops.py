"""RecordInput: batches of records from TFRecord files, shuffled epoch after epoch (the op
of TF's data_flow_ops.RecordInput, found in TF1 input pipelines' GraphDefs).

Each run outputs `batch_size` records.  The files matching `file_pattern` are read
epoch after epoch, the file order shuffled (`file_random_seed`, then rotated by
`file_shuffle_shift_ratio`), their records through a shuffle buffer of
`file_buffer_size`; every record comes once per epoch.  The reading state lives with
the op in its session, or inside a dataset function in the dataset's pass, as TF's
(kernel_api.pass_state); files are read on a worker thread.

Differs from TF: the order within an epoch.  TF's reader threads
(`file_parallelism`) interleave files nondeterministically, so no two TF runs agree
either; the multiset of each epoch's records is TF's.
"""

from __future__ import annotations

import asyncio
import glob

import numpy as np

from asyncflow import errors, python_io, tensor_shape
from asyncflow.kernel_api import pass_state
from asyncflow.registry import register_op

__all__: list[str] = []

RecordInput = register_op(
    "RecordInput",
    outputs=["records: string"],
    attrs={
        "file_pattern": "",
        "file_random_seed": 301,
        "file_shuffle_shift_ratio": 0.0,
        "file_buffer_size": 10000,
        "file_parallelism": 16,
        "batch_size": 32,
        "compression_type": "",
    },
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
    stateful=True,
    is_async=True,
)


class _Yielder:
    """The records still to hand out of the current epoch, refilled epoch by epoch."""

    def __init__(self, attrs):
        self.attrs = attrs
        self.rng = np.random.default_rng(attrs["file_random_seed"])
        self.pending: list[bytes] = []
        self.epoch = 0

    def _files(self) -> list[str]:
        pattern = self.attrs["file_pattern"]
        files = sorted(glob.glob(pattern))
        if not files:
            raise errors.NotFoundError(None, None, f"Found no files at {pattern}")
        order = self.rng.permutation(len(files)).tolist()
        shift = int(self.attrs["file_shuffle_shift_ratio"] * len(files))
        order = order[shift:] + order[:shift]
        return [files[i] for i in order]

    def next_epoch(self) -> list[bytes]:
        """One epoch's records, through the shuffle buffer.  Blocking (a worker runs it)."""
        options = python_io.TFRecordOptions(self.attrs["compression_type"] or None)
        size = max(int(self.attrs["file_buffer_size"]), 1)
        buffer: list[bytes] = []
        out: list[bytes] = []
        for path in self._files():
            for record in python_io.tf_record_iterator(path, options):
                buffer.append(record)
                if len(buffer) >= size:
                    i = int(self.rng.integers(len(buffer)))
                    buffer[i], buffer[-1] = buffer[-1], buffer[i]
                    out.append(buffer.pop())
        out.extend(buffer[i] for i in self.rng.permutation(len(buffer)).tolist())
        if not out:
            raise errors.OutOfRangeError(
                None, None, f"The files at {self.attrs['file_pattern']} hold no records"
            )
        return out


@RecordInput.kernel("CPU")
async def _record_input(ctx):
    batch_size = ctx.attrs["batch_size"]
    if batch_size < 1:
        raise errors.InvalidArgumentError(None, None, f"batch_size must be > 0: {batch_size}")
    state = pass_state(ctx)  # (a dataset function's reads start again with each pass)
    y = state.get("yielder")
    if y is None:
        y = state["yielder"] = _Yielder(dict(ctx.attrs))
    loop = asyncio.get_running_loop()
    while len(y.pending) < batch_size:
        y.pending.extend(await loop.run_in_executor(None, y.next_epoch))
    batch, y.pending = y.pending[:batch_size], y.pending[batch_size:]
    out = np.empty(batch_size, dtype=object)
    out[:] = batch
    return out
