"""Print: pass a tensor through and print tensors to stderr as a side effect.

`summarize_value` renders a tensor as TF's `Tensor::SummarizeValue` does ("1 2 3...",
nested "[1 2][3...]..." for matrices); Assert's message uses it too.
"""

from __future__ import annotations

import sys

import numpy as np

from asyncflow import graph as ops
from asyncflow.registry import ANY, TypeConstraint, register_op

__all__ = ["Print"]


def _one_element(x) -> str:
    """One value as TF's `PrintOneElement` (C++ `StrCat`) writes it."""
    if isinstance(x, bytes):
        return x.decode("utf-8", "backslashreplace").encode("unicode_escape").decode("ascii")
    if isinstance(x, (bool, np.bool_)):
        return "1" if x else "0"
    if isinstance(x, (np.floating, float)):
        return _float_str(x)
    if isinstance(x, (np.complexfloating, complex)):
        return f"({_float_str(x.real)},{_float_str(x.imag)})"
    return str(x)


def _float_str(x) -> str:
    # StrCat prints the shortest of %.6g / %.9g (float) or %.15g / %.17g (double) that
    # reads back as the same value.
    if isinstance(x, np.float64 | float):
        short, long_, kind = 15, 17, np.float64
    else:
        short, long_, kind = 6, 9, np.float32
    v = kind(x)
    if not np.isfinite(v):
        return "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")
    text = f"{float(v):.{short}g}"
    return text if kind(text) == v else f"{float(v):.{long_}g}"


def summarize_value(value, max_entries: int) -> str:
    """TF's `Tensor::SummarizeValue(max_entries)`: at most `max_entries` elements."""
    arr = np.asarray(value)
    num = arr.size
    limit = num if max_entries < 0 else min(max_entries, num)
    flat = arr.reshape(-1)
    if arr.ndim == 0:
        text = " ".join(_one_element(flat[i]) for i in range(limit))
    else:
        parts: list[str] = []
        _print_one_dim(0, arr.shape, limit, flat, [0], parts)
        text = "".join(parts)
    return text + ("..." if num > limit else "")


def _print_one_dim(dim, shape, limit, flat, index, out) -> None:
    if index[0] >= limit:
        return
    if dim == len(shape) - 1:
        for i in range(shape[dim]):
            if index[0] >= limit:
                if dim != 0:
                    out.append("...")
                return
            if i > 0:
                out.append(" ")
            out.append(_one_element(flat[index[0]]))
            index[0] += 1
        return
    for _ in range(shape[dim]):
        opened = index[0] < limit
        if opened:
            out.append("[")
        _print_one_dim(dim + 1, shape, limit, flat, index, out)
        if index[0] < limit or opened:
            out.append("]")


# -- Print -------------------------------------------------------------------------------

PrintOp = register_op(
    "Print",
    inputs=["input: T", "data: U"],
    outputs=["output: T"],
    attrs={
        "T": ANY,
        "U": TypeConstraint(None, is_list=True),
        "message": "",
        "first_n": -1,
        "summarize": 3,
    },
    shape_fn=lambda op: [op.inputs[0].shape],
    stateful=True,
)


@PrintOp.kernel("CPU")
async def _print(ctx, x, *data):
    first_n = ctx.attrs["first_n"]
    if first_n >= 0:
        count = ctx.kernel_state.get("count", 0)
        if count >= first_n:
            return x
        ctx.kernel_state["count"] = count + 1
    summarize = ctx.attrs["summarize"]
    msg = ctx.attrs["message"] + "".join(f"[{summarize_value(d, summarize)}]" for d in data)
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()
    return x


def Print(input_, data, message=None, first_n=None, summarize=None, name=None):  # noqa: N802
    """Prints `message` and `data` to stderr when evaluated; returns `input_`.

    Each tensor of `data` prints as "[v1 v2 v3...]" with at most `summarize` values
    (default 3); `first_n` limits how many times it prints (-1 or None: always).
    """
    attrs = {}
    if message is not None:
        attrs["message"] = message
    if first_n is not None:
        attrs["first_n"] = int(first_n)
    if summarize is not None:
        attrs["summarize"] = int(summarize)
    data = [ops.convert_to_tensor(d) for d in data]
    return ops.apply_op("Print", [input_, data], attrs, name=name).outputs[0]


@PrintOp.gradient
def _print_grad(op, grad):
    """The gradient passes through to `input`; the printed data get none (as TF)."""
    return [grad] + [None] * (len(op.inputs) - 1)
