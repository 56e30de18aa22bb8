"""String ops: split, substr, join, regex replace, length, as_string.

String tensors are NumPy object arrays of `bytes`.  The kernels follow TF's (messages
included); RegexReplace uses Python's `re`, whose syntax agrees with RE2's for the
patterns TF1 programs use (no backtracking-only constructs are rejected, though).
"""

from __future__ import annotations

import re

import numpy as np

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow import ragged_functions as _ragged
from asyncflow.registry import INDEX, REQUIRED, NotDifferentiable, TypeConstraint, register_op
from asyncflow.sparse_tensor import SparseTensor

__all__ = [
    "regex_full_match",
    "string_split",
    "strings_split",
    "substr",
    "string_join",
    "regex_replace",
    "string_length",
    "as_string",
]


def _obj(x) -> np.ndarray:
    return np.asarray(x, dtype=object)


def _strings(shape, values) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    out.reshape(-1)[:] = values if len(values) else []
    return out


# -- StringSplit ------------------------------------------------------------------------------


def _split_shape(op):
    return [tensor_shape.TensorShape([None, 2]), tensor_shape.TensorShape([None]), [2]]


StringSplit = register_op(
    "StringSplit",
    inputs=["input: string", "delimiter: string"],
    outputs=["indices: int64", "values: string", "shape: int64"],
    attrs={"skip_empty": True},
    shape_fn=_split_shape,
)
NotDifferentiable("StringSplit")

StringSplitV2 = register_op(
    "StringSplitV2",
    inputs=["input: string", "sep: string"],
    outputs=["indices: int64", "values: string", "shape: int64"],
    attrs={"maxsplit": -1},
    shape_fn=_split_shape,
)
NotDifferentiable("StringSplitV2")


def _sparse_from_rows(rows):
    idx, vals, longest = [], [], 0
    for i, parts in enumerate(rows):
        for j, p in enumerate(parts):
            idx.append((i, j))
            vals.append(p)
        longest = max(longest, len(parts))
    indices = np.array(idx, dtype=np.int64).reshape(-1, 2)
    values = np.empty(len(vals), dtype=object)
    values[:] = vals
    return indices, values, np.array([len(rows), longest], dtype=np.int64)


def _check_vector(x, what: str):
    if np.ndim(x) != 1:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{what} should be a vector, got shape: [{','.join(map(str, np.shape(x)))}]",
        )


@StringSplit.kernel("CPU")
async def _string_split(ctx, inp, delimiter):
    _check_vector(inp, "input")
    if np.ndim(delimiter) != 0:
        raise errors.InvalidArgumentError(None, None, "delimiter should be a scalar")
    delim = _obj(delimiter)[()]
    skip = ctx.attrs["skip_empty"]
    rows = []
    for s in _obj(inp):
        if not delim:  # empty delimiter: one token per byte
            parts = [s[i : i + 1] for i in range(len(s))]
        else:
            parts = re.split(b"[" + re.escape(delim) + b"]", s) if s else []
        rows.append([p for p in parts if p] if skip else parts)
    return _sparse_from_rows(rows)


@StringSplitV2.kernel("CPU")
async def _string_split_v2(ctx, inp, sep):
    _check_vector(inp, "input")
    sep = _obj(sep)[()]
    maxsplit = ctx.attrs["maxsplit"]
    rows = []
    for s in _obj(inp):
        if not sep:
            rows.append(s.split(None, maxsplit))
        else:
            rows.append(s.split(sep, maxsplit) if s else [])
    return _sparse_from_rows(rows)


@_dispatch.add_dispatch_support
def string_split(
    source, sep=None, skip_empty=True, delimiter=None, result_type="SparseTensor", name=None
):
    """TF1's `tf.string_split`: elements of `source` (a vector) split into tokens, every
    character of `delimiter` (default " ") a separator; an empty delimiter makes one
    token per byte, and empty tokens are dropped when `skip_empty`. `sep` is the
    argument's newer name, the same character set (TF's StringSplit either way).

    Raises:
      ValueError: both sep and delimiter; an unknown result_type.
      InvalidArgumentError (when run): `source` is not a vector.
    """
    if sep is not None and delimiter is not None:
        raise ValueError("Cannot specify both 'delimiter' and 'sep'.")
    delimiter = sep if delimiter is None else delimiter
    if result_type not in ("SparseTensor", "RaggedTensor"):
        raise ValueError("result_type must be 'RaggedTensor' or 'SparseTensor'.")
    with ops.name_scope(name, "StringSplit", [source]):
        source = ops.convert_to_tensor(source, dtype=dtypes.string)
        op = ops.apply_op(
            "StringSplit",
            [source, " " if delimiter is None else delimiter],
            {"skip_empty": skip_empty},
        )
        st = SparseTensor(*op.outputs)
        if result_type == "RaggedTensor":
            return _ragged_rows(st)
    return st


def _ragged_rows(st):
    """The rows of a split's SparseTensor as a RaggedTensor (int64 row splits, TF's)."""
    from asyncflow.ops import array_ops
    from asyncflow.ops.gradient_ops import cumsum, unsorted_segment_sum
    from asyncflow.ragged import RaggedTensor

    rows = st.indices[:, 0]
    lengths = unsorted_segment_sum(array_ops.ones_like(rows), rows, st.dense_shape[0])
    splits = cumsum(array_ops.concat([array_ops.zeros([1], dtypes.int64), lengths], 0))
    return RaggedTensor.from_row_splits(st.values, splits, validate=False)


def strings_split(
    input=None,  # noqa: A002 - TF's name
    sep=None,
    maxsplit=-1,
    result_type="SparseTensor",
    source=None,
    name=None,
):
    """`tf.strings.split` (TF1's, tf.compat.v1): each element of the vector `input` split
    on the string `sep` (runs of whitespace when None or empty) at most `maxsplit` times
    (-1: no limit), as a SparseTensor of tokens (StringSplitV2).

    Raises:
      ValueError: both `input` and its old name `source`, or neither; a result_type
        other than SparseTensor.
    """
    if source is not None:
        if input is not None:
            raise ValueError("Cannot specify both 'input' and 'source'")
        input = source  # noqa: A001
    if input is None:
        raise ValueError("Must specify 'input'")
    if result_type not in ("SparseTensor", "RaggedTensor"):
        raise ValueError("result_type must be 'RaggedTensor' or 'SparseTensor'.")
    if _ragged.is_ragged(input):  # each string's tokens, a partition inside input's
        with ops.name_scope(name, "StringSplit", []):
            tokens = strings_split(input.flat_values, sep, maxsplit, "RaggedTensor")
            out = _ragged.map_flat_values(lambda _: tokens, input)
            return out if result_type == "RaggedTensor" else out.to_sparse()
    with ops.name_scope(name, "StringSplit", [input]):
        # TF's names: "StringSplit/input" and (the separator) "StringSplit/Const".
        input = ops.convert_to_tensor(input, dtype=dtypes.string, name="input")  # noqa: A001
        sep = ops.convert_to_tensor(sep or "", dtype=dtypes.string)
        op = ops.apply_op("StringSplitV2", [input, sep], {"maxsplit": int(maxsplit)})
        if result_type == "RaggedTensor":
            return _ragged_rows(SparseTensor(*op.outputs))
    return SparseTensor(*op.outputs)


def check_choice(op_type: str, attr: str, value: str, choices) -> None:
    """TF's build-time check of a string attr that takes one of a few values.

    Raises:
      ValueError: `value` is not one of `choices`.
    """
    if value not in choices:
        allowed = ", ".join(f'"{c}"' for c in choices)
        raise ValueError(
            f"Attr '{attr}' of '{op_type}' Op passed string '{value}' not in: {allowed}."
        )


_UNITS = ("BYTE", "UTF8_CHAR")


# -- Substr -----------------------------------------------------------------------------------

Substr = register_op(
    "Substr",
    inputs=["input: string", "pos: T", "len: T"],
    outputs=["output: string"],
    attrs={"T": INDEX, "unit": "BYTE"},
    shape_fn=lambda op: [tensor_shape.broadcast_shape(op.inputs[0].shape, op.inputs[1].shape)],
)
NotDifferentiable("Substr")


@Substr.kernel("CPU")
async def _substr(ctx, inp, pos, length):
    inp, pos, length = _obj(inp), np.asarray(pos), np.asarray(length)
    if pos.shape != length.shape:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"pos and len should have the same shape, got: {pos.shape} vs. {length.shape}",
        )
    try:
        s, p, n = np.broadcast_arrays(inp, pos, length)
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"Incompatible shapes: {list(inp.shape)} vs. {list(pos.shape)}"
        ) from None
    utf8 = ctx.attrs["unit"] == "UTF8_CHAR"
    broadcast = pos.ndim > 0 and pos.shape != inp.shape
    out = []
    for i, (text, start, count) in enumerate(zip(s.ravel(), p.ravel(), n.ravel())):
        piece = _substr_one(text, int(start), int(count), utf8)
        if piece is None:
            out_of_range = f"pos {int(start)} out of range for string"
            if utf8:
                # TF's UTF-8 path names no string, and a broadcast row rather than an element.
                where = np.unravel_index(i, s.shape)[0] if broadcast else i
                raise errors.InvalidArgumentError(None, None, f"{out_of_range} at index {where}")
            where = tuple(int(k) for k in np.unravel_index(i, s.shape)) if broadcast else i
            raise errors.InvalidArgumentError(
                None, None, f"{out_of_range} {text!r} at index {where}"
            )
        out.append(piece)
    return _strings(s.shape, out)


def _substr_one(text: bytes, start: int, count: int, utf8: bool) -> bytes | None:
    """One Substr element, or None when `start` is out of range.

    TF takes a negative `len` in bytes as "to the end" (it becomes a huge unsigned count);
    in UTF-8 characters it yields an empty string, and is out of range for a negative pos.
    """
    size = len(text)
    if not utf8:
        first = start + size if start < 0 else start
        if first < 0 or first > size:
            return None
        return text[first : first + (size if count < 0 else count)]
    if start < 0:
        first = _utf8_back(text, size, -start) if count >= 0 else None
    else:
        first = _utf8_forward(text, 0, start)
    if first is None:
        return None
    end = first if count < 0 else _utf8_forward(text, first, count, partial=True)
    return text[first:end]


def _is_trail(b: int) -> bool:
    return b & 0xC0 == 0x80


def _utf8_forward(text: bytes, pos: int, chars: int, partial: bool = False) -> int | None:
    """The byte `chars` UTF-8 characters after `pos`, as TF steps: a character runs from
    its first byte up to the next byte that is no continuation byte, whatever it is.
    None when the text ends first (unless `partial`: then the text's end)."""
    size = len(text)
    for _ in range(chars):
        if pos >= size:
            return size if partial else None
        pos += 1
        while pos < size and _is_trail(text[pos]):
            pos += 1
    return pos


def _utf8_back(text: bytes, pos: int, chars: int) -> int | None:
    """The byte `chars` UTF-8 characters before `pos` (TF's steps back), or None."""
    for _ in range(chars):
        if pos <= 0:
            return None
        pos -= 1
        while pos > 0 and _is_trail(text[pos]):
            pos -= 1
    return pos


@_ragged.dispatch_unary
def substr(input, pos, len, name=None, unit="BYTE"):  # noqa: A002 - TF's argument names
    """Return substrings `[pos, pos + len)` of each string (bytes or UTF-8 characters).

    Raises:
      ValueError: a unit other than BYTE or UTF8_CHAR.
      InvalidArgumentError: (when run) pos is beyond a string's end, or shapes disagree.
    """
    check_choice("Substr", "unit", unit, _UNITS)
    return ops.apply_op("Substr", [input, pos, len], {"unit": unit}, name=name).outputs[0]


# -- StringJoin ----------------------------------------------------------------------------------


def _join_shape(op):
    shape = tensor_shape.TensorShape([])
    for t in op.inputs:
        shape = tensor_shape.broadcast_shape(shape, t.shape)
    return [shape]


StringJoin = register_op(
    "StringJoin",
    inputs=["inputs: N * string"],
    outputs=["output: string"],
    attrs={"N": 1, "separator": ""},
    shape_fn=_join_shape,
)
NotDifferentiable("StringJoin")


@StringJoin.kernel("CPU")
async def _string_join(ctx, *inputs):
    arrays = [_obj(x) for x in inputs]
    shapes = {a.shape for a in arrays if a.ndim}
    if len(shapes) > 1:
        raise errors.InvalidArgumentError(
            None, None, "Input shapes do not match: " + " vs. ".join(str(list(s)) for s in shapes)
        )
    b = np.broadcast_arrays(*arrays)
    sep = ctx.attrs["separator"].encode()
    joined = [sep.join(parts) for parts in zip(*(x.ravel() for x in b))]
    return _strings(b[0].shape, joined)


@_dispatch.add_dispatch_support
def string_join(inputs, separator="", name=None):
    """Joins the strings in `inputs` element-wise (scalars broadcast)."""
    inputs = list(inputs)
    if any(_ragged.is_ragged(x) for x in inputs):
        return _ragged.map_flat_values(string_join, inputs, separator, name)
    return ops.apply_op(
        "StringJoin", [inputs], {"N": len(inputs), "separator": separator}, name=name
    ).outputs[0]


# -- RegexReplace ------------------------------------------------------------------------------

RegexReplace = register_op(
    "RegexReplace",
    inputs=["input: string", "pattern: string", "rewrite: string"],
    outputs=["output: string"],
    attrs={"replace_global": True},
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("RegexReplace")

_REWRITE_GROUP = re.compile(rb"\\(\d)")
_BAD_REWRITE_ESCAPE = re.compile(rb"(?:\\[\\\d]|[^\\])*(\\)(?![\\\d])", re.DOTALL)


@RegexReplace.kernel("CPU")
async def _regex_replace(ctx, inp, pattern, rewrite):
    return _replace(ctx, inp, _obj(pattern)[()], _obj(rewrite)[()])


# TF 2.x's regex_replace with a constant pattern and rewrite (what tf.function writes).
StaticRegexReplace = register_op(
    "StaticRegexReplace",
    inputs=["input: string"],
    outputs=["output: string"],
    attrs={"pattern": REQUIRED, "rewrite": REQUIRED, "replace_global": True},
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("StaticRegexReplace")


@StaticRegexReplace.kernel("CPU")
async def _static_regex_replace(ctx, inp):
    a = ctx.attrs
    return _replace(ctx, inp, _bytes(a["pattern"]), _bytes(a["rewrite"]))


def _bytes(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode("utf-8")


# RE2 works on UTF-8 text: "." is one character, however many bytes encode it, and its
# \d \w \s \b are ASCII-only. Python's re on str with re.ASCII behaves so; a byte that is not
# UTF-8 becomes a lone surrogate (surrogateescape), one character, and comes back intact.
# Outside multi-line mode RE2's "$" is the end of the text only, which Python spells \Z.
_RE2_REJECTS = re.compile(r"\(\?(?:=|!|<=|<!|>)|(?<!\\)[*+?}]\+")
_REPEAT = re.compile(r"(?<!\\)\{(\d+)(?:,(\d*))?\}")
_DOLLAR = re.compile(r"(\\.|\[(?:\\.|[^\]])*\]?)|\$", re.DOTALL)


def _repeat_bound(m: re.Match) -> int:
    return max(int(g) for g in m.groups() if g)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _utf8(t: str) -> bytes:
    return t.encode("utf-8", "surrogateescape")


def _re2_message(pattern: str, e: re.error) -> str:
    """RE2's wording for the errors Python's re finds in a pattern."""
    pos = e.pos if e.pos is not None else 0
    msg = e.msg
    if msg.startswith("missing ), unterminated subpattern"):
        return f"missing ): {pattern}"
    if msg.startswith("unterminated character set"):
        return f"missing ]: {pattern[pos:]}"
    if msg.startswith("nothing to repeat"):
        return f"no argument for repetition operator: {pattern[pos : pos + 1]}"
    if msg.startswith("multiple repeat"):
        return f"bad repetition operator: {pattern[pos - 1 : pos + 1]}"
    if msg.startswith("unbalanced parenthesis"):
        return f"unexpected ): {pattern}"
    if msg.startswith("min repeat greater than max repeat"):
        start = pattern.rfind("{", 0, pos + 1)
        return f"invalid repetition size: {pattern[start : pattern.find('}', pos) + 1]}"
    if msg.startswith("invalid group reference"):  # (pos is the digit's)
        return f"invalid escape sequence: {pattern[pos - 1 : pos + 1]}"
    if msg.startswith("bad escape \\"):
        return f"invalid escape sequence: {pattern[pos : pos + 2]}"
    if msg.startswith("bad escape (end of pattern)"):
        return "trailing \\"
    if msg.startswith("bad character range"):
        return f"invalid character class range: {msg.split()[3]}"
    if msg.startswith("unknown extension"):
        return f"invalid perl operator: {pattern[pos - 1 : pos + 2]}"
    return str(e)


def _compile(ctx, pattern: bytes) -> re.Pattern:
    """`pattern` compiled as RE2 reads it, cached per kernel.

    Raises:
      InvalidArgumentError: a pattern RE2 rejects (lookarounds, possessive repeats).
    """
    cache = ctx.kernel_state.setdefault("regex", {})
    rx = cache.get(pattern)
    if rx is not None:
        return rx
    text = _text(pattern)
    reject = _RE2_REJECTS.search(text)
    try:
        if reject and reject.group(0).startswith("(?"):
            message = f"invalid perl operator: {reject.group(0)[:3]}"
        elif reject:
            message = f"bad repetition operator: {reject.group(0)[-2:]}"
        elif too_many := [m for m in _REPEAT.finditer(text) if _repeat_bound(m) > 1000]:
            message = f"invalid repetition size: {too_many[0].group(0)}"
        else:
            if not re.match(r"\(\?[a-zA-Z]*m", text):
                text = _DOLLAR.sub(lambda m: m.group(1) or r"\Z", text)
            rx = re.compile(text, re.ASCII)
    except re.error as e:
        message = _re2_message(_text(pattern), e)
    if rx is None:
        raise errors.InvalidArgumentError(
            None, None, f"Invalid pattern: {pattern.decode('utf-8', 'replace')}, error: {message}"
        )
    if len(cache) < 64:
        cache[pattern] = rx
    return rx


def _replace(ctx, inp, pattern: bytes, rewrite: bytes):
    rx = _compile(ctx, pattern)
    inp = _obj(inp)
    # RE2 replaces nothing when the rewrite names a group the pattern lacks, and stops a
    # rewrite at an escape other than \0-\9 or \\ (what came before it is still written).
    bad_escape = _BAD_REWRITE_ESCAPE.match(rewrite)
    if bad_escape:
        rewrite = rewrite[: bad_escape.start(1)]
    groups = [int(g) for g in _REWRITE_GROUP.findall(rewrite.replace(b"\\\\", b""))]
    if groups and max(groups) > rx.groups:
        return _strings(inp.shape, list(inp.ravel()))
    # RE2 rewrites know only \0-\9 and \\; escape everything else for Python's template.
    template = _REWRITE_GROUP.sub(rb"\\g<\1>", rewrite.replace(b"\\\\", b"\x00"))
    template = _text(template.replace(b"\x00", b"\\\\"))
    count = 0 if ctx.attrs["replace_global"] else 1
    try:
        out = [_utf8(rx.sub(template, _text(s), count=count)) for s in inp.ravel()]
    except (re.error, IndexError) as e:
        raise errors.InvalidArgumentError(None, None, f"Invalid rewrite pattern: {e}") from None
    return _strings(inp.shape, out)


@_ragged.dispatch_unary
def regex_replace(input, pattern, rewrite, replace_global=True, name=None):  # noqa: A002
    """Replaces matches of `pattern` in `input` with `rewrite` (\\1 names a group).

    Raises (when run):
      InvalidArgumentError: the pattern does not compile.
    """
    if isinstance(pattern, str | bytes) and isinstance(rewrite, str | bytes):
        # As TF: constant pattern and rewrite become attrs of StaticRegexReplace.
        attrs = {"pattern": pattern, "rewrite": rewrite, "replace_global": replace_global}
        return ops.apply_op("StaticRegexReplace", [input], attrs, name=name).outputs[0]
    return ops.apply_op(
        "RegexReplace",
        [input, pattern, rewrite],
        {"replace_global": replace_global},
        name=name,
    ).outputs[0]


def _full_match(ctx, inp, pattern):
    rx = _compile(ctx, pattern)
    inp = _obj(inp)
    return np.array([rx.fullmatch(_text(s)) is not None for s in inp.ravel()]).reshape(inp.shape)


RegexFullMatch = register_op(
    "RegexFullMatch",
    inputs=["input: string", "pattern: string"],
    outputs=["output: bool"],
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("RegexFullMatch")
# TF's sharded Saver (and so every TF SavedModel) names its temp directory with this op.
StaticRegexFullMatch = register_op(
    "StaticRegexFullMatch",
    inputs=["input: string"],
    outputs=["output: bool"],
    attrs={"pattern": REQUIRED},
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("StaticRegexFullMatch")


@RegexFullMatch.kernel("CPU")
async def _regex_full_match(ctx, inp, pattern):
    return _full_match(ctx, inp, _obj(pattern)[()])


@StaticRegexFullMatch.kernel("CPU")
async def _static_regex_full_match(ctx, inp):
    pattern = ctx.attrs["pattern"]
    return _full_match(ctx, inp, pattern.encode() if isinstance(pattern, str) else pattern)


@_dispatch.add_dispatch_support
def regex_full_match(input, pattern, name=None):  # noqa: A002
    """Whether each string matches `pattern` entirely (TF's tf.strings.regex_full_match).

    Raises (when run):
      InvalidArgumentError: the pattern does not compile.
    """
    if isinstance(pattern, str | bytes):
        op = ops.apply_op("StaticRegexFullMatch", [input], {"pattern": pattern}, name=name)
    else:
        op = ops.apply_op("RegexFullMatch", [input, pattern], {}, name=name)
    return op.outputs[0]


# -- StringLength, AsString ---------------------------------------------------------------------

StringLength = register_op(
    "StringLength",
    inputs=["input: string"],
    outputs=["output: int32"],
    attrs={"unit": "BYTE"},
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("StringLength")


@StringLength.kernel("CPU")
async def _string_length(ctx, inp):
    inp = _obj(inp)
    if ctx.attrs["unit"] == "UTF8_CHAR":
        # TF counts the bytes that are no UTF-8 continuation byte, valid text or not.
        lens = [sum(not _is_trail(b) for b in s) for s in inp.ravel()]
    else:
        lens = [len(s) for s in inp.ravel()]
    return np.array(lens, dtype=np.int32).reshape(inp.shape)


@_ragged.dispatch_unary
def string_length(input, name=None, unit="BYTE"):  # noqa: A002
    """The length of each string, in bytes or UTF-8 characters.

    Raises:
      ValueError: a unit other than BYTE or UTF8_CHAR.
    """
    check_choice("StringLength", "unit", unit, _UNITS)
    return ops.apply_op("StringLength", [input], {"unit": unit}, name=name).outputs[0]


_AS_STRING_TYPES = (
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
    "complex64", "complex128",
)  # fmt: skip

AsString = register_op(
    "AsString",
    inputs=["input: T"],
    outputs=["output: string"],
    attrs={
        "T": TypeConstraint(_AS_STRING_TYPES),
        "precision": -1,
        "scientific": False,
        "shortest": False,
        "width": -1,
        "fill": "",
    },
    shape_fn=lambda op: [op.inputs[0].shape],
)
NotDifferentiable("AsString")


@AsString.kernel("CPU")
async def _as_string(ctx, x):
    a = ctx.attrs
    x = np.asarray(x)
    fill, width = a["fill"], a["width"]
    if len(fill) > 1:
        raise errors.InvalidArgumentError(
            None, None, f"Fill string must be one or fewer characters: {fill}"
        )
    if fill not in ("", " ", "0", "-"):  # (TF's: printf's own pads only)
        raise errors.InvalidArgumentError(None, None, f'Fill argument not supported: "{fill}"')
    spec = "%"
    if fill == "0":
        spec += "0"
    elif fill == "-":
        spec += "-"
    if width > -1:
        spec += str(width)
    if x.dtype.kind in "fc":
        if a["precision"] > -1:
            spec += f".{a['precision']}"
        spec += "e" if a["scientific"] else ("g" if a["shortest"] else "f")
        if x.dtype.kind == "c":  # TF's "(real,imag)", each part formatted alike
            vals = [f"({spec % float(v.real)},{spec % float(v.imag)})" for v in x.ravel()]
        else:
            vals = [spec % float(v) for v in x.ravel()]
    elif x.dtype.kind == "b":
        vals = ["true" if v else "false" for v in x.ravel()]
    else:
        spec += "d"
        vals = [spec % int(v) for v in x.ravel()]
    return _strings(x.shape, [v.encode() for v in vals])


@_ragged.dispatch_unary
def as_string(
    input,
    precision=-1,
    scientific=False,
    shortest=False,
    width=-1,
    fill="",
    name=None,  # noqa: A002
):
    """Converts each entry in the given tensor to strings (printf-style formatting)."""
    attrs = {
        "precision": precision,
        "scientific": scientific,
        "shortest": shortest,
        "width": width,
        "fill": fill,
    }
    return ops.apply_op("AsString", [input], attrs, name=name).outputs[0]
