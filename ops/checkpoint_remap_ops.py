"""Vocabulary remapping ops (TF's checkpoint_ops): what tf.train.warm_start uses to start
an embedding or output layer from a checkpoint written with another vocabulary.

- GenerateVocabRemapping: for each token of the new vocabulary file (lines
  `new_vocab_offset` .. + `num_new_vocab`), its line in the old vocabulary file (the
  first `old_vocab_size` lines, all when -1), or -1; and how many were found.
- LoadAndRemapMatrix: a [num_rows, num_cols] matrix whose cell (i, j) is the checkpoint
  matrix's (row_remapping[i], col_remapping[j]) (col_remapping empty: the same column),
  and, where either is -1, the next of `initializing_values`, in row-major order; they
  must be used up exactly.

Errors are TF 2.21's.  Files are read on the device's workers (as text-file lookup
tables are); the checkpoint through RestoreV2's reader.  TF marks both ops not
differentiable.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import io_ops, lookup_ops
from asyncflow.registry import NotDifferentiable, register_op

__all__: list[str] = []


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _text(value) -> str:
    value = value[()] if isinstance(value, np.ndarray) else value
    return value.decode() if isinstance(value, bytes) else str(value)


GenerateVocabRemapping = register_op(
    "GenerateVocabRemapping",
    inputs=["new_vocab_file: string", "old_vocab_file: string"],
    outputs=["remapping: int64", "num_present: int32"],
    attrs={"new_vocab_offset": 0, "num_new_vocab": 0, "old_vocab_size": -1},
    shape_fn=lambda op: [
        tensor_shape.TensorShape([op._attr("num_new_vocab")]),
        tensor_shape.TensorShape([]),
    ],
)
NotDifferentiable("GenerateVocabRemapping")


def _lines(path: str, vocab_size: int) -> list[bytes]:
    keys, _ = lookup_ops._read_table_file(
        path, lookup_ops.WHOLE_LINE, lookup_ops.LINE_NUMBER, vocab_size, "\t", 0,
        dtypes.string, dtypes.int64,
    )  # fmt: skip
    return keys


def _remapping(new_path, old_path, offset: int, num: int, old_size: int):
    new = _lines(new_path, -1)
    if len(new) < offset + num:
        raise _invalid("lookup table size must be larger than last new vocab entry's line")
    old_index: dict[bytes, int] = {}
    for i, token in enumerate(_lines(old_path, old_size)):
        if old_index.setdefault(token, i) != i:
            raise errors.FailedPreconditionError(
                None, None, f"HashTable has different value for same key. Key "
                f"{token.decode(errors='replace')} has {old_index[token]} and trying to add "
                f"value {i}"
            )  # fmt: skip
    remap = np.array([old_index.get(t, -1) for t in new[offset : offset + num]], np.int64)
    return remap, np.array(int(np.sum(remap >= 0)), np.int32)


@GenerateVocabRemapping.kernel("CPU")
async def _generate_vocab_remapping(ctx, new_vocab_file, old_vocab_file):
    a = ctx.attrs
    return await ctx.device.compute(
        _remapping, _text(new_vocab_file), _text(old_vocab_file), a["new_vocab_offset"],
        a["num_new_vocab"], a["old_vocab_size"],
    )  # fmt: skip


LoadAndRemapMatrix = register_op(
    "LoadAndRemapMatrix",
    inputs=["ckpt_path: string", "old_tensor_name: string", "row_remapping: int64",
            "col_remapping: int64", "initializing_values: float32"],
    outputs=["output_matrix: float32"],
    attrs={"num_rows": 0, "num_cols": 1, "max_rows_in_memory": -1},
    shape_fn=lambda op: [
        tensor_shape.TensorShape([op._attr("num_rows"), op._attr("num_cols")])
    ],
    stateful=True,
)  # fmt: skip
NotDifferentiable("LoadAndRemapMatrix")


def _check_one_to_one(remap: np.ndarray) -> None:
    seen: dict[int, int] = {}
    for new_id, old_id in enumerate(int(v) for v in remap):
        if old_id < 0:
            continue
        first = seen.setdefault(old_id, new_id)
        if first != new_id:
            raise errors.UnimplementedError(
                None, None, f"Old ID {old_id} is mapped to both new ID {first} and {new_id}, "
                "which is not supported."
            )  # fmt: skip


def _check_rows_in_bounds(rows: np.ndarray, shape, chunk: int) -> None:
    """TF reads the old rows in order, `chunk` at a time (all: -1), as a slice from the
    chunk's first to last row; a slice past the matrix fails as TF's reader does."""
    wanted = np.sort(rows[rows >= 0])
    size = len(wanted) if chunk <= 0 else chunk
    for start in range(0, len(wanted), max(size, 1)):
        part = wanted[start : start + size]
        lo, hi = int(part[0]), int(part[-1])
        if hi >= shape[0]:
            raise errors.InternalError(
                None, None, f"Extent in dimension 0 out of bounds: shape = "
                f"[{shape[0]},{shape[1]}], slice = {lo},{hi - lo + 1}:-"
            )  # fmt: skip


def _remap_matrix(old, rows, cols, init, num_cols, name):
    if cols.size == 0:
        if old.shape[1] != num_cols:
            raise _invalid(
                f"Tensor {name} has shape [{old.shape[0]},{old.shape[1]}], where the size of its "
                f"2nd dimension is {old.shape[1]} instead of being equal to num_cols={num_cols}"
            )
        cols = np.arange(num_cols, dtype=np.int64)
    keep_r, keep_c = rows >= 0, cols >= 0
    out = np.zeros((rows.size, num_cols), np.float32)
    out[np.ix_(keep_r, keep_c)] = old[np.ix_(rows[keep_r], cols[keep_c])]
    missing = ~np.logical_and.outer(keep_r, keep_c)
    need = int(missing.sum())
    if init.size < need:
        raise _invalid(
            f"initializing_values contained {init.size} elements, but more missing values remain."
        )
    if init.size > need:
        raise _invalid(
            f"initializing_values contained {init.size} elements, but only {need} elements "
            "were used to fill in missing values."
        )
    out[missing] = init  # (boolean indexing walks the matrix in row-major order)
    return out


@LoadAndRemapMatrix.kernel("CPU")
async def _load_and_remap_matrix(ctx, ckpt_path, old_tensor_name, row_remapping,
                                 col_remapping, initializing_values):  # fmt: skip
    a = ctx.attrs
    rows = np.asarray(row_remapping, np.int64).reshape(-1)
    cols = np.asarray(col_remapping, np.int64).reshape(-1)
    init = np.asarray(initializing_values, np.float32).reshape(-1)
    num_rows, num_cols = a["num_rows"], a["num_cols"]
    if rows.size != num_rows:
        raise _invalid(
            f"Size of row_remapping is {rows.size} instead of being equal to num_rows={num_rows}"
        )
    if cols.size and cols.size != num_cols:
        raise _invalid(
            f"Provided col_remapping, but its size is {cols.size} instead of being equal to "
            f"num_cols={num_cols}"
        )
    _check_one_to_one(rows)
    _check_one_to_one(cols)
    name = _text(old_tensor_name)
    prefix = io_ops.checkpoint_prefix(_text(ckpt_path))
    (old,) = await io_ops.read_checkpoint(prefix, [name], None, ctx.device)
    if old.ndim != 2:
        raise _invalid(f"Tensor {name} should be a matrix, but has shape {list(old.shape)}")
    _check_rows_in_bounds(rows, old.shape, a["max_rows_in_memory"])
    old = np.asarray(old, np.float32)
    return await ctx.device.compute(
        _remap_matrix, old, rows, cols, init, num_cols, name, cost=4 * num_rows * num_cols
    )


# -- builders (TF's gen_checkpoint_ops) -------------------------------------------------------


def generate_vocab_remapping(new_vocab_file, old_vocab_file, new_vocab_offset, num_new_vocab,
                             old_vocab_size=-1, name=None):  # fmt: skip
    """(remapping, num_present): the old line of each new token, -1 when absent."""
    op = ops.apply_op(
        "GenerateVocabRemapping",
        [new_vocab_file, old_vocab_file],
        {"new_vocab_offset": new_vocab_offset, "num_new_vocab": num_new_vocab,
         "old_vocab_size": old_vocab_size},
        name=name,
    )  # fmt: skip
    return op.outputs[0], op.outputs[1]


def load_and_remap_matrix(ckpt_path, old_tensor_name, row_remapping, col_remapping,
                          initializing_values, num_rows, num_cols, max_rows_in_memory=-1,
                          name=None):  # fmt: skip
    """The checkpoint matrix remapped to [num_rows, num_cols] (see LoadAndRemapMatrix)."""
    return ops.apply_op(
        "LoadAndRemapMatrix",
        [ckpt_path, old_tensor_name, row_remapping, col_remapping, initializing_values],
        {"num_rows": num_rows, "num_cols": num_cols, "max_rows_in_memory": max_rows_in_memory},
        name=name,
    ).outputs[0]
