"""Print: pass a tensor through and print tensors to stderr as a side effect; the raw
Assert op (`tf.Assert`, which may guard it with a cond, is in `control_flow_cond`).

`summarize_value` renders a tensor as TF's `Tensor::SummarizeValue` does ("1 2 3...",
nested "[1 2][3...]..." for matrices); Assert's message uses it too.
"""

from __future__ import annotations

import sys

import numpy as np

from asyncflow import errors, ragged_functions
from asyncflow import graph as ops
from asyncflow.kernel_api import pass_state
from asyncflow.registry import ANY, NotDifferentiable, TypeConstraint, register_op

__all__ = ["Print", "print", "print_v2", "string_format"]


_C_ESCAPES = {
    **{i: f"\\{i:03o}" for i in (*range(32), 127)},
    **{ord(c): e for c, e in zip("\n\r\t\"'\\", ("\\n", "\\r", "\\t", '\\"', "\\'", "\\\\"))},
}


def _one_element(x) -> str:
    """One value as TF's `PrintOneElement` (C++ `StrCat`) writes it."""
    if isinstance(x, bytes):
        # absl's Utf8SafeCEscape: quotes, backslashes and control bytes escaped, UTF-8
        # text kept as it is.
        text = x.decode("utf-8", "surrogateescape").translate(_C_ESCAPES)
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
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


# -- Assert ------------------------------------------------------------------------------


def _assert_shape(op):
    cond = op.inputs[0].shape
    if cond.ndims is not None and cond.ndims != 0 and cond.as_list() != [1]:
        raise ValueError(f"Shape must be rank 0 but is rank {cond.ndims}")
    return []


AssertOp = register_op(
    "Assert",
    inputs=["condition: bool", "data: T"],
    attrs={"T": TypeConstraint(None, is_list=True), "summarize": 3},
    shape_fn=_assert_shape,
    stateful=True,
)


@AssertOp.kernel("CPU")
async def _assert(ctx, condition, *data):
    cond = np.asarray(condition)
    if not (cond.ndim == 0 or cond.shape == (1,)):
        raise errors.InvalidArgumentError(
            None, None, "In[0] should be a scalar: [" + ",".join(map(str, cond.shape)) + "]"
        )
    if bool(cond.reshape(())):
        return None
    summarize = ctx.attrs["summarize"]
    msg = " ".join(f"[{summarize_value(d, summarize)}]" for d in data)
    raise errors.InvalidArgumentError(None, None, "assertion failed: " + msg)


def assert_op(condition, data, summarize=None, name=None) -> ops.Operation:
    """One bare Assert op (TF's generated `_assert`); `tf.Assert` is the public builder."""
    attrs = {} if summarize is None else {"summarize": int(summarize)}
    return ops.apply_op("Assert", [condition, list(data)], attrs, name=name)


NotDifferentiable("Assert")


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
    if first_n >= 0:  # (counted for the session, or a dataset's pass as TF's kernel)
        state = pass_state(ctx)
        count = state.get("count", 0)
        if count >= first_n:
            return x
        state["count"] = count + 1
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
    # apply_op converts the Python values of `data`: "Print/data_1", as TF's.
    return ops.apply_op("Print", [input_, list(data)], attrs, name=name).outputs[0]


@PrintOp.gradient
def _print_grad(op, grad):
    """The gradient passes through to `input`; the printed data get none (as TF)."""
    return [grad] + [None] * (len(op.inputs) - 1)


# -- StringFormat, PrintV2 and tf.print ---------------------------------------------------


def summarize_value_v2(value, summarize: int) -> str:
    """TF's `SummarizeValue(summarize, print_v2=true)`: numpy-like nesting, a dimension
    longer than 2 * summarize shows its first and last `summarize` entries around "...";
    strings quoted; summarize < 0 shows everything."""
    arr = np.asarray(value)
    if arr.dtype.kind == "c":
        # TF has no printer for complex: each value is "?", the first `summarize` of the
        # flattened tensor, "..." right after them when there are more.
        if arr.ndim == 0:
            return "?"
        shown = arr.size if summarize < 0 else min(arr.size, summarize)
        return "[" + " ".join(["?"] * shown) + ("..." if shown < arr.size else "") + "]"
    if arr.dtype.name == "bfloat16":
        arr = arr.astype(np.float32)  # printed as the float it widens to
    if arr.ndim == 0:
        return _v2_element(arr[()])
    if arr.size == 0:
        # An empty tensor: "[]", or, when its first dimension is not the empty one, one
        # newline per inner dimension and an ellipsis (TF's output, kept as it is).
        return (
            "[]" if arr.shape[0] == 0 or arr.ndim == 1 else "[" + "\n" * (arr.ndim - 1) + " ...]"
        )
    return _v2_block(arr, 0, summarize)


def _v2_element(x) -> str:
    if isinstance(x, bytes):
        return '"' + _one_element(x) + '"'
    return _one_element(x)


def _v2_block(arr, dim: int, summarize: int) -> str:
    n = arr.shape[0]
    elide = 0 <= summarize < n and n > 2 * summarize
    idx = list(range(summarize)) + [None] + list(range(n - summarize, n)) if elide else range(n)
    if arr.ndim == 1:
        parts = ["..." if i is None else _v2_element(arr[i]) for i in idx]
        return "[" + " ".join(parts) + "]"
    sep = "\n" * (arr.ndim - 1) + " " * (dim + 1)
    parts = ["..." if i is None else _v2_block(arr[i], dim + 1, summarize) for i in idx]
    return "[" + sep.join(parts) + "]"


StringFormat = register_op(
    "StringFormat",
    inputs=["inputs: T"],
    outputs=["output: string"],
    attrs={
        "T": TypeConstraint(None, is_list=True),
        "template": "%s",
        "placeholder": "%s",
        "summarize": 3,
    },
    shape_fn=lambda op: [[]],
)


@StringFormat.kernel("CPU")
async def _string_format(ctx, *inputs):
    a = ctx.attrs
    pieces = a["template"].split(a["placeholder"])
    if len(pieces) - 1 != len(inputs):
        from asyncflow import errors

        raise errors.InvalidArgumentError(
            None,
            None,
            f"num placeholders in template and num inputs must match: "
            f"{len(pieces) - 1} vs. {len(inputs)}",
        )
    out = [pieces[0]]
    for value, piece in zip(inputs, pieces[1:]):
        out.append(summarize_value_v2(value, a["summarize"]))
        out.append(piece)
    return np.array("".join(out).encode("utf-8"), dtype=object)


PrintV2 = register_op(
    "PrintV2",
    inputs=["input: string"],
    outputs=[],
    attrs={"output_stream": "stderr", "end": "\n"},
    shape_fn=lambda op: [],
    stateful=True,
)

NotDifferentiable("StringFormat")
NotDifferentiable("PrintV2")

_LOG_LEVELS = {"log(info)": 20, "log(warning)": 30, "log(error)": 40}


@PrintV2.kernel("CPU")
async def _print_v2(ctx, text):
    import asyncio

    raw = np.asarray(text, dtype=object)[()]
    s = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    stream, end = ctx.attrs["output_stream"], ctx.attrs["end"]
    if stream in ("stderr", "stdout"):
        f = sys.stderr if stream == "stderr" else sys.stdout
        f.write(s + end)
        f.flush()
    elif stream in _LOG_LEVELS:
        from asyncflow import tf_logging

        tf_logging.log(_LOG_LEVELS[stream], "%s", s + end.rstrip("\n"))
    elif stream.startswith("file://"):
        await asyncio.to_thread(_append, stream[len("file://") :], s + end)
    else:
        from asyncflow import errors

        raise errors.InvalidArgumentError(
            None, None, f"{stream} is not a valid output stream for PrintV2"
        )


def _append(path: str, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def _stream_name(output_stream) -> str:
    if output_stream is sys.stderr:
        return "stderr"
    if output_stream is sys.stdout:
        return "stdout"
    if isinstance(output_stream, str):
        return output_stream
    from asyncflow import tf_logging

    for name, fn in (
        ("log(info)", tf_logging.info),
        ("log(warning)", tf_logging.warning),
        ("log(error)", tf_logging.error),
    ):
        if output_stream is fn:
            return name
    raise ValueError(
        f"Unsupported output stream, logging level, or file.{output_stream}. Supported "
        "streams are sys.stdout, sys.stderr, tf.logging.info, tf.logging.warning, "
        "tf.logging.error. File needs to be in the form of 'file://<filepath>'."
    )


def print_v2(*inputs, **kwargs):
    """`tf.print`: print tensors and Python values when the returned op runs.

    Tensors are formatted as TF's (at most `summarize` entries at each end of a
    dimension, default 3); other values with `str`; joined by `sep`, followed by `end`,
    written to `output_stream` (sys.stderr, sys.stdout, af.logging.info/warning/error,
    or "file://<path>").

    Raises:
      ValueError: an unknown output stream or keyword argument.
    """
    import os

    output_stream = kwargs.pop("output_stream", sys.stderr)
    name = kwargs.pop("name", None)
    summarize = kwargs.pop("summarize", 3)
    sep = kwargs.pop("sep", " ")
    end = kwargs.pop("end", os.linesep)
    if kwargs:
        raise ValueError(f"Unrecognized keyword arguments for tf.print: {kwargs}")
    stream = _stream_name(output_stream)
    with ops.name_scope(name, "PrintV2"):
        tensors = [x for x in inputs if isinstance(x, ops.Tensor)]
        if (
            len(inputs) == 1
            and tensors
            and tensors[0].dtype.name == "string"
            and (tensors[0].shape.ndims == 0)
        ):
            formatted = tensors[0]
        else:
            placeholder = "{}"
            while any(placeholder in str(x) for x in inputs if not isinstance(x, ops.Tensor)):
                placeholder = "{" + placeholder + "}"
            tensors = []
            template = sep.join(_print_template(x, placeholder, tensors) for x in inputs)
            formatted = ops.apply_op(
                "StringFormat",
                [tensors],
                {"template": template, "placeholder": placeholder, "summarize": summarize},
            ).outputs[0]
        return ops.apply_op("PrintV2", [formatted], {"output_stream": stream, "end": end})


print = print_v2  # noqa: A001 - TF's name (tf.print)


def _print_template(x, placeholder: str, tensors: list, nested: bool = False) -> str:
    """`x` as tf.print writes it, each Tensor (appended to `tensors`, in order) as
    `placeholder`: a list, tuple or dict holding Tensors as its str() would be with
    the Tensors' values in place and dict keys sorted (TF formats nest's structure)."""
    if isinstance(x, ops.Tensor):
        tensors.append(x)
        return placeholder
    if not nested and not _holds_tensor(x):
        return str(x)

    def walk(v):
        return _print_template(v, placeholder, tensors, True)

    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {walk(x[k])}" for k in sorted(x)) + "}"
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        items = ", ".join(f"{f}={walk(v)}" for f, v in zip(x._fields, x))
        return f"{type(x).__name__}({items})"
    if isinstance(x, tuple):
        return "(" + ", ".join(walk(v) for v in x) + ("," if len(x) == 1 else "") + ")"
    if isinstance(x, list):
        return "[" + ", ".join(walk(v) for v in x) + "]"
    return repr(x)


def _holds_tensor(x) -> bool:
    if isinstance(x, ops.Tensor):
        return True
    if isinstance(x, dict):
        return any(_holds_tensor(v) for v in x.values())
    if isinstance(x, list | tuple):
        return any(_holds_tensor(v) for v in x)
    return False


def string_format(template, inputs, placeholder="{}", summarize=3, name=None):
    """`tf.strings.format`: `template` with each `placeholder` replaced by a tensor.

    Raises:
      ValueError: the template's placeholders and the inputs differ in number.
    """
    if isinstance(inputs, ops.Tensor) or ragged_functions.is_ragged(inputs):
        inputs = [inputs]
    expected = len(template.split(placeholder)) - 1
    if len(inputs) != expected:
        raise ValueError(
            f"The template expects {expected} tensors, but the inputs only has "
            f"{len(inputs)}. Please ensure the number of placeholders in template matches "
            "inputs length."
        )
    if any(ragged_functions.is_ragged(x) for x in inputs):
        return _format_with_ragged(template, inputs, placeholder, summarize, name)
    tensors = [ops.convert_to_tensor(x) for x in inputs]
    attrs = {"template": template, "placeholder": placeholder, "summarize": summarize}
    return ops.apply_op("StringFormat", [tensors], attrs, name=name).outputs[0]


def _format_with_ragged(template, inputs, placeholder, summarize, name):
    """TF's string_format given RaggedTensors: the template's pieces joined with each
    input's text (a RaggedTensor's as TF writes it: "[[1, 2], [3]]")."""
    pieces = template.split(placeholder)
    with ops.name_scope(name, "StringFormat", []):
        out = [ops.convert_to_tensor(pieces[0])]
        for x, piece in zip(inputs, pieces[1:]):
            if ragged_functions.is_ragged(x):
                out.append(ragged_functions.to_string(x, summarize))
            else:
                out.append(string_format("{}", [x], summarize=summarize))
            out.append(ops.convert_to_tensor(piece))
        return ops.apply_op("StringJoin", [out], {"N": len(out), "separator": ""}).outputs[0]
