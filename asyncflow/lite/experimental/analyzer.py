"""`tf.lite.experimental.Analyzer`: a text report of a .tflite file's structure.

The report is TF 2.21's, line for line: a summary naming the first operator's tensors,
each subgraph's operators (`Op#k NAME(T#a, T#b[int constants]) -> [T#c]`), its tensors
(shape or shape signature, type, and for constants their bytes, buffer and first five
values), then the sizes of the file, of its data buffers and of its all-zero buffers.
`analyze` prints it; `report` returns it.
"""

from __future__ import annotations

import math
import os

import numpy as np

from asyncflow.lite import schema

_PREVIEW = 5
_SHOWN = {schema.FLOAT32, schema.INT32, schema.INT8, schema.UINT8}
_RULE = "-" * 63
_FOOTER = (
    "* Buffers of TFLite model are mostly used for constant tensors.\n"
    "  And zero value buffers are buffers filled with zeros.\n"
    "  Non-data buffers area are used to store operators, subgraphs and etc.\n"
    "  You can find more details from "
    "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/lite/schema/schema.fbs\n"
)


class Analyzer:
    """TFLite model analyzer (TF's `ModelAnalyzer`)."""

    @staticmethod
    def analyze(model_path=None, model_content=None, gpu_compatibility=False, **kwargs) -> None:
        """Prints the structure of the model at `model_path` or in `model_content`.

        Raises:
          ValueError: neither argument given, or `gpu_compatibility` (asyncflow does
            not check GPU delegate compatibility).
        """
        print(report(model_path, model_content, gpu_compatibility, **kwargs))


def report(model_path=None, model_content=None, gpu_compatibility=False, **kwargs) -> str:
    """The text `Analyzer.analyze` prints.

    Raises:
      ValueError: as `Analyzer.analyze`.
    """
    if not model_path and not model_content:
        raise ValueError("neither `model_path` nor `model_content` is provided")
    if gpu_compatibility or kwargs.get("experimental_use_mlir"):
        raise ValueError(
            "asyncflow's Analyzer reports the model's structure only; it does not check "
            "GPU delegate compatibility or print MLIR."
        )
    if model_path:
        head = f"=== {model_path} ===\n"
        path = os.fspath(model_path)
        try:
            with open(path, "rb") as f:
                content = f.read()
        except OSError:
            return head + f"\nCould not open '{path}'.Failed to mmap model {path}"
        failure = f"Failed to mmap model {path}"
    else:
        head = "=== TFLite ModelAnalyzer ===\n"
        content = bytes(model_content)
        failure = "Failed to mmap the given model buffer."
    if len(content) >= 8 and content[4:8] != schema.FILE_IDENTIFIER:
        ident = content[4:8].decode("latin-1")
        return (
            head + f"\nModel provided has model identifier '{ident}', should be 'TFL3'\n{failure}"
        )
    try:
        model = schema.read_model(content)
    except ValueError:
        return head + "\n" + failure
    return head + "\n" + _body(model, len(content))


def _body(model: dict, size: int) -> str:
    subgraphs = model.get("subgraphs") or []
    codes = model.get("operator_codes") or []
    out = [f"Your TFLite model has '{len(subgraphs)}' subgraph(s). In the subgraph "]
    out.append("description below,\nT# represents the Tensor numbers. ")
    if subgraphs and len(subgraphs[0].get("operators") or []):
        op = subgraphs[0]["operators"][0]
        out.append(f"For example, in Subgraph#0, the {_op_name(codes, op)} op takes\n")
        out.append(_verbose(op.get("inputs")) + " as input and produces ")
        out.append(_verbose(op.get("outputs")) + " as output.\n\n")
    for k, sg in enumerate(subgraphs):
        out.append(_subgraph(model, codes, k, sg))
    out.append(_stats(model, size))
    return "".join(out)


def _op_name(codes, op) -> str:
    code = codes[op["opcode_index"]]
    builtin = max(code.get("builtin_code") or 0, code.get("deprecated_builtin_code") or 0)
    if builtin == schema.BUILTIN_OPS.get("CUSTOM", 32):
        return code.get("custom_code") or ""
    return schema.BUILTIN_NAMES.get(builtin, str(builtin))


def _verbose(indices) -> str:
    return " and ".join(f"tensor #{i}" for i in _ints(indices))


def _ints(values) -> list[int]:
    return [] if values is None else [int(v) for v in values]


def _constant(model, tensor) -> np.ndarray | None:
    buffers = model.get("buffers") or []
    b = tensor.get("buffer") or 0
    data = buffers[b].get("data") if b < len(buffers) else None
    if data is None or not len(data):
        return None
    return np.asarray(data, np.uint8)


def _values(raw: np.ndarray, ttype: int):
    dtype = np.dtype(schema.TENSOR_NUMPY[ttype]).newbyteorder("<")
    usable = raw[: len(raw) // dtype.itemsize * dtype.itemsize]
    return np.frombuffer(usable.tobytes(), dtype)


def _show(v, ttype: int) -> str:
    # TF streams values with C++'s operator<<: (u)int8 as characters (printable ASCII
    # and, as TF 2.21 shows them, the newline; a dot for the rest), float32 as %g.
    if ttype in (schema.INT8, schema.UINT8):
        c = int(v)
        return chr(c) if 32 <= c < 127 or c == 10 else "."
    if ttype == schema.FLOAT32:
        f = float(v)
        if math.isnan(f):
            return "-nan" if math.copysign(1.0, f) < 0 else "nan"
        return format(f, "g")
    return str(int(v))


def _preview(raw: np.ndarray, ttype: int) -> str:
    if ttype in _SHOWN:
        values = _values(raw, ttype)
        shown = [_show(v, ttype) for v in values[:_PREVIEW]]
    else:
        # Other types: TF shows "??" per byte, up to five.
        values = raw
        shown = ["??"] * min(len(raw), _PREVIEW)
    if len(values) > _PREVIEW:
        shown.append("...")
    return "[" + ", ".join(shown) + "]"


def _operand(model, sg, index: int) -> str:
    text = f"T#{index}"
    if index < 0:
        return text
    tensor = sg["tensors"][index]
    raw = _constant(model, tensor)
    if raw is not None and tensor.get("type") == schema.INT32:
        text += _preview(raw, schema.INT32)
    return text


def _subgraph(model, codes, k: int, sg: dict) -> str:
    out = [f"Subgraph#{k}"]
    if sg.get("name"):
        out.append(" " + sg["name"])
    ins = ", ".join(f"T#{int(i)}" for i in _ints(sg.get("inputs")))
    outs = ", ".join(f"T#{int(i)}" for i in _ints(sg.get("outputs")))
    out.append(f"({ins}) -> [{outs}]\n")
    for j, op in enumerate(sg.get("operators") or []):
        args = ", ".join(_operand(model, sg, int(i)) for i in _ints(op.get("inputs")))
        results = ", ".join(f"T#{int(i)}" for i in _ints(op.get("outputs")))
        out.append(f"  Op#{j} {_op_name(codes, op)}({args}) -> [{results}]\n")
    out.append(f"\nTensors of Subgraph#{k}\n")
    for j, t in enumerate(sg.get("tensors") or []):
        out.append("  " + _tensor_line(model, j, t) + "\n")
    out.append("\n")
    return "".join(out)


def _tensor_line(model, j: int, t: dict) -> str:
    sig = t.get("shape_signature")
    dims = sig if sig is not None else t.get("shape")
    label = "shape_signature" if sig is not None else "shape"
    ttype = int(t.get("type") or 0)
    # A tensor whose file holds no shape vector at all (an MLIR scalar): "n/a".
    shape = "n/a" if dims is None else "[" + ", ".join(str(d) for d in _ints(dims)) + "]"
    text = f"T#{j}({t.get('name') or ''}) {label}:{shape}, type:"
    text += schema.TENSOR_TYPE_NAMES.get(ttype, str(ttype))
    raw = _constant(model, t)
    if raw is not None:
        text += f" RO {len(raw)} bytes, buffer: {int(t.get('buffer') or 0)}, data:"
        text += _preview(raw, ttype)
    return text


def _stats(model: dict, size: int) -> str:
    total = zeros = 0
    for buf in model.get("buffers") or []:
        data = buf.get("data")
        if data is None:
            continue
        data = np.asarray(data, np.uint8)
        total += len(data)
        if not data.any():
            zeros += len(data)

    def line(label, n, share=True):
        text = f"{label:>24}: {n:>10} bytes"
        if share:
            text += f" ({np.float32(n) / np.float32(size) * np.float32(100):05.2f} %)"
        return text + "\n"

    out = [_RULE, "\n", line("Model size", size, share=False)]
    out.append(line("Non-data buffer size", size - total))
    out.append(line("Total data buffer size", total))
    out.append(line("(Zero value buffers)", zeros))
    footer = _FOOTER
    if np.float32(zeros) / np.float32(size) * np.float32(100) > 10.0:
        # TF suggests unfolding large splat constants when zeros weigh this much.
        cut = footer.index("  Non-data")
        hint = (
            "  (Consider use `converter._experimental_unfold_large_splat_constant` "
            "to save the model size.)\n"
        )
        footer = footer[:cut] + hint + footer[cut:]
    out.append("\n" + footer)
    return "".join(out)
