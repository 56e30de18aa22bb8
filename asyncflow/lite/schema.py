"""The TFLite flatbuffer schema (the subset float32 models use), read and written as dicts.

A table is described once, as a tuple of fields `(name, slot, kind, default)`; the same
description drives the bounds-checked reader (`read_model`) and the writer
(`write_model`, on Google's `flatbuffers.Builder`). Slots, enum values and the file
identifier `TFL3` follow TFLite's `schema.fbs`.

Invariant: the reader checks every offset and length it takes from the file against the
buffer before it slices or allocates, so a truncated or hostile file raises ValueError
instead of reading out of bounds or allocating what the file claims.
"""

from __future__ import annotations

import struct
from typing import Any

import flatbuffers
import numpy as np

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3

# TensorType
FLOAT32, FLOAT16, INT32, UINT8, INT64, STRING, BOOL, INT16 = range(8)
INT8, FLOAT64 = 9, 10
TENSOR_NUMPY = {
    FLOAT32: np.float32,
    FLOAT16: np.float16,
    INT32: np.int32,
    UINT8: np.uint8,
    INT64: np.int64,
    BOOL: np.bool_,
    INT16: np.int16,
    INT8: np.int8,
    FLOAT64: np.float64,
}
TENSOR_TYPE_NAMES = {
    FLOAT32: "FLOAT32",
    FLOAT16: "FLOAT16",
    INT32: "INT32",
    UINT8: "UINT8",
    INT64: "INT64",
    STRING: "STRING",
    BOOL: "BOOL",
    INT16: "INT16",
    INT8: "INT8",
    FLOAT64: "FLOAT64",
}
NUMPY_TENSOR = {np.dtype(v): k for k, v in TENSOR_NUMPY.items()}

# Padding and ActivationFunctionType
SAME, VALID = 0, 1
ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6, ACT_TANH = range(5)

# BuiltinOperator codes used here (schema.fbs numbering).
BUILTIN_OPS = {
    "ADD": 0,
    "AVERAGE_POOL_2D": 1,
    "CONCATENATION": 2,
    "CONV_2D": 3,
    "DEPTHWISE_CONV_2D": 4,
    "FLOOR": 8,
    "FULLY_CONNECTED": 9,
    "LOGISTIC": 14,
    "MAX_POOL_2D": 17,
    "MUL": 18,
    "RELU": 19,
    "RELU6": 21,
    "RESHAPE": 22,
    "SOFTMAX": 25,
    "TANH": 28,
    "PAD": 34,
    "GATHER": 36,
    "TRANSPOSE": 39,
    "MEAN": 40,
    "SUB": 41,
    "DIV": 42,
    "SQUEEZE": 43,
    "STRIDED_SLICE": 45,
    "EXP": 47,
    "LOG_SOFTMAX": 50,
    "CAST": 53,
    "MAXIMUM": 55,
    "MINIMUM": 57,
    "NEG": 59,
    "PADV2": 60,
    "SLICE": 65,
    "SIN": 66,
    "TILE": 69,
    "EXPAND_DIMS": 70,
    "LOG": 73,
    "SUM": 74,
    "SQRT": 75,
    "RSQRT": 76,
    "REDUCE_PROD": 81,
    "REDUCE_MAX": 82,
    "PACK": 83,
    "UNPACK": 88,
    "REDUCE_MIN": 89,
    "SQUARE": 92,
    "LEAKY_RELU": 98,
    "SQUARED_DIFFERENCE": 99,
    "ABS": 101,
    "CEIL": 104,
    "COS": 108,
    "ELU": 111,
    "BATCH_MATMUL": 126,
    "DEPTH_TO_SPACE": 5,
    "L2_NORMALIZATION": 11,
    "RESIZE_BILINEAR": 23,
    "SPACE_TO_DEPTH": 26,
    "SPLIT": 49,
    "ARG_MAX": 56,
    "LESS": 58,
    "GREATER": 61,
    "GREATER_EQUAL": 62,
    "LESS_EQUAL": 63,
    "SELECT": 64,
    "TRANSPOSE_CONV": 67,
    "EQUAL": 71,
    "NOT_EQUAL": 72,
    "POW": 78,
    "ARG_MIN": 79,
    "LOGICAL_OR": 84,
    "LOGICAL_AND": 86,
    "LOGICAL_NOT": 87,
    "FLOOR_DIV": 90,
    "REDUCE_ANY": 91,
    "FLOOR_MOD": 95,
    "RESIZE_NEAREST_NEIGHBOR": 97,
    "SPLIT_V": 102,
    "REVERSE_V2": 105,
    "ROUND": 116,
    "SELECT_V2": 123,
    "SIGN": 158,
    "DEQUANTIZE": 6,
    "QUANTIZE": 114,
    "RELU_N1_TO_1": 20,
    "ADD_N": 106,
    "LOCAL_RESPONSE_NORMALIZATION": 13,
    "MIRROR_PAD": 100,
    "HARD_SWISH": 117,
}
BUILTIN_NAMES = {v: k for k, v in BUILTIN_OPS.items()}
# Codes above 127 do not fit the int8 deprecated_builtin_code; it then holds this marker.
PLACEHOLDER_FOR_GREATER_OP_CODES = 127

# Field kinds: scalars by struct code; "str"; "vec:<code>" (scalar vector);
# "table:<Name>"; "tables:<Name>" (vector of tables); "union" (options, typed by the
# preceding "<name>_type" field).
_SCALARS = {"b": 1, "B": 1, "?": 1, "h": 2, "H": 2, "i": 4, "I": 4, "f": 4, "q": 8, "Q": 8}

# Builtin options tables: name -> (BuiltinOptions union type, fields).
OPTIONS: dict[str, tuple[int, tuple]] = {
    "Conv2DOptions": (
        1,
        (
            ("padding", 0, "b", 0),
            ("stride_w", 1, "i", 0),
            ("stride_h", 2, "i", 0),
            ("fused_activation_function", 3, "b", 0),
            ("dilation_w_factor", 4, "i", 1),
            ("dilation_h_factor", 5, "i", 1),
            ("quantized_bias_type", 6, "b", 0),
        ),
    ),
    "DepthwiseConv2DOptions": (
        2,
        (
            ("padding", 0, "b", 0),
            ("stride_w", 1, "i", 0),
            ("stride_h", 2, "i", 0),
            ("depth_multiplier", 3, "i", 0),
            ("fused_activation_function", 4, "b", 0),
            ("dilation_w_factor", 5, "i", 1),
            ("dilation_h_factor", 6, "i", 1),
        ),
    ),
    "Pool2DOptions": (
        5,
        (
            ("padding", 0, "b", 0),
            ("stride_w", 1, "i", 0),
            ("stride_h", 2, "i", 0),
            ("filter_width", 3, "i", 0),
            ("filter_height", 4, "i", 0),
            ("fused_activation_function", 5, "b", 0),
        ),
    ),
    "FullyConnectedOptions": (
        8,
        (
            ("fused_activation_function", 0, "b", 0),
            ("weights_format", 1, "b", 0),
            ("keep_num_dims", 2, "?", False),
            ("asymmetric_quantize_inputs", 3, "?", False),
            ("quantized_bias_type", 4, "b", 0),
        ),
    ),
    "SoftmaxOptions": (9, (("beta", 0, "f", 0.0),)),
    "ConcatenationOptions": (
        10,
        (("axis", 0, "i", 0), ("fused_activation_function", 1, "b", 0)),
    ),
    "AddOptions": (
        11,
        (("fused_activation_function", 0, "b", 0), ("pot_scale_int16", 1, "?", True)),
    ),
    "ReshapeOptions": (17, (("new_shape", 0, "vec:i", None),)),
    "MulOptions": (21, (("fused_activation_function", 0, "b", 0),)),
    "PadOptions": (22, ()),
    "GatherOptions": (23, (("axis", 0, "i", 0), ("batch_dims", 1, "i", 0))),
    "TransposeOptions": (26, ()),
    "ReducerOptions": (27, (("keep_dims", 0, "?", False),)),
    "SubOptions": (
        28,
        (("fused_activation_function", 0, "b", 0), ("pot_scale_int16", 1, "?", True)),
    ),
    "DivOptions": (29, (("fused_activation_function", 0, "b", 0),)),
    "SqueezeOptions": (30, (("squeeze_dims", 0, "vec:i", None),)),
    "StridedSliceOptions": (
        32,
        (
            ("begin_mask", 0, "i", 0),
            ("end_mask", 1, "i", 0),
            ("ellipsis_mask", 2, "i", 0),
            ("new_axis_mask", 3, "i", 0),
            ("shrink_axis_mask", 4, "i", 0),
            ("offset", 5, "?", False),
        ),
    ),
    "ExpOptions": (33, ()),
    "LogSoftmaxOptions": (36, ()),
    "CastOptions": (37, (("in_data_type", 0, "b", 0), ("out_data_type", 1, "b", 0))),
    "MaximumMinimumOptions": (39, ()),
    "NegOptions": (42, ()),
    "PadV2Options": (43, ()),
    "SliceOptions": (48, ()),
    "TileOptions": (51, ()),
    "ExpandDimsOptions": (52, ()),
    "PackOptions": (59, (("values_count", 0, "i", 0), ("axis", 1, "i", 0))),
    "UnpackOptions": (64, (("num", 0, "i", 0), ("axis", 1, "i", 0))),
    "SquareOptions": (66, ()),
    "LeakyReluOptions": (75, (("alpha", 0, "f", 0.0),)),
    "SquaredDifferenceOptions": (76, ()),
    "AbsOptions": (78, ()),
    "CosOptions": (84, ()),
    "BatchMatMulOptions": (101, (("adj_x", 0, "?", False), ("adj_y", 1, "?", False))),
    "L2NormOptions": (12, (("fused_activation_function", 0, "b", 0),)),
    "ResizeBilinearOptions": (
        15,
        (("align_corners", 2, "?", False), ("half_pixel_centers", 3, "?", False)),
    ),
    "SpaceToDepthOptions": (19, (("block_size", 0, "i", 0),)),
    "SplitOptions": (35, (("num_splits", 0, "i", 0),)),
    "ArgMaxOptions": (40, (("output_type", 0, "b", 0),)),
    "SelectOptions": (47, ()),
    "TransposeConvOptions": (
        49,
        (
            ("padding", 0, "b", 0),
            ("stride_w", 1, "i", 0),
            ("stride_h", 2, "i", 0),
            ("fused_activation_function", 3, "b", 0),
        ),
    ),
    "ArgMinOptions": (57, (("output_type", 0, "b", 0),)),
    "ResizeNearestNeighborOptions": (
        74,
        (("align_corners", 0, "?", False), ("half_pixel_centers", 1, "?", False)),
    ),
    "SplitVOptions": (79, (("num_splits", 0, "i", 0),)),
    "DepthToSpaceOptions": (94, (("block_size", 0, "i", 0),)),
    "LocalResponseNormalizationOptions": (
        13,
        (
            ("radius", 0, "i", 0),
            ("bias", 1, "f", 0.0),
            ("alpha", 2, "f", 0.0),
            ("beta", 3, "f", 0.0),
        ),
    ),
    "MirrorPadOptions": (77, (("mode", 0, "b", 0),)),
}
OPTIONS_BY_TYPE = {v[0]: k for k, v in OPTIONS.items()}

TABLES: dict[str, tuple] = {
    "Model": (
        ("version", 0, "I", 0),
        ("operator_codes", 1, "tables:OperatorCode", None),
        ("subgraphs", 2, "tables:SubGraph", None),
        ("description", 3, "str", None),
        ("buffers", 4, "tables:Buffer", None),
        ("metadata", 6, "tables:Metadata", None),
        ("signature_defs", 7, "tables:SignatureDef", None),
    ),
    "OperatorCode": (
        ("deprecated_builtin_code", 0, "b", 0),
        ("custom_code", 1, "str", None),
        ("version", 2, "i", 1),
        ("builtin_code", 3, "i", 0),
    ),
    "SubGraph": (
        ("tensors", 0, "tables:Tensor", None),
        ("inputs", 1, "vec:i", None),
        ("outputs", 2, "vec:i", None),
        ("operators", 3, "tables:Operator", None),
        ("name", 4, "str", None),
    ),
    "Tensor": (
        ("shape", 0, "vec:i", None),
        ("type", 1, "b", 0),
        ("buffer", 2, "I", 0),
        ("name", 3, "str", None),
        ("quantization", 4, "table:QuantizationParameters", None),
        ("is_variable", 5, "?", False),
        ("sparsity", 6, "table:SparsityParameters", None),
        ("shape_signature", 7, "vec:i", None),
        ("has_rank", 8, "?", False),
    ),
    "QuantizationParameters": (
        ("min", 0, "vec:f", None),
        ("max", 1, "vec:f", None),
        ("scale", 2, "vec:f", None),
        ("zero_point", 3, "vec:q", None),
        ("quantized_dimension", 6, "i", 0),
    ),
    "SparsityParameters": (("traversal_order", 0, "vec:i", None),),
    "Buffer": (("data", 0, "vec:B", None), ("offset", 1, "Q", 0), ("size", 2, "Q", 0)),
    "Operator": (
        ("opcode_index", 0, "I", 0),
        ("inputs", 1, "vec:i", None),
        ("outputs", 2, "vec:i", None),
        ("builtin_options_type", 3, "B", 0),
        ("builtin_options", 4, "union", None),
        ("custom_options", 5, "vec:B", None),
    ),
    "Metadata": (("name", 0, "str", None), ("buffer", 1, "I", 0)),
    "SignatureDef": (
        ("inputs", 0, "tables:TensorMap", None),
        ("outputs", 1, "tables:TensorMap", None),
        ("signature_key", 2, "str", None),
        ("subgraph_index", 4, "I", 0),
    ),
    "TensorMap": (("name", 0, "str", None), ("tensor_index", 1, "I", 0)),
}


# ----------------------------------------------------------------------------- reading


class _Reader:
    """Bounds-checked access to a flatbuffer held in `buf`."""

    def __init__(self, buf: bytes):
        self.buf = memoryview(buf)
        self.n = len(buf)

    def _need(self, pos: int, size: int) -> None:
        if pos < 0 or size < 0 or pos + size > self.n:
            raise ValueError("Model provided is not a valid TFLite flatbuffer (out of bounds)")

    def scalar(self, code: str, pos: int):
        self._need(pos, _SCALARS[code])
        return struct.unpack_from("<" + code, self.buf, pos)[0]

    def deref(self, pos: int) -> int:
        return pos + self.scalar("I", pos)

    def field_pos(self, table: int, slot: int) -> int | None:
        vtable = table - self.scalar("i", table)
        vsize = self.scalar("H", vtable)
        entry = 4 + 2 * slot
        if entry + 2 > vsize:
            return None
        off = self.scalar("H", vtable + entry)
        return table + off if off else None

    def vector(self, pos: int, elem_size: int) -> tuple[int, int]:
        start = self.deref(pos)
        count = self.scalar("I", start)
        self._need(start + 4, count * elem_size)
        return start + 4, count

    def table(self, name: str, pos: int, fields: tuple | None = None) -> dict:
        fields = TABLES[name] if fields is None else fields
        out: dict[str, Any] = {}
        for fname, slot, kind, default in fields:
            p = self.field_pos(pos, slot)
            if p is None:
                out[fname] = default
            elif kind in _SCALARS:
                out[fname] = self.scalar(kind, p)
                if kind == "?":
                    out[fname] = bool(out[fname])
            elif kind == "str":
                start, count = self.vector(p, 1)
                out[fname] = bytes(self.buf[start : start + count]).decode("utf-8", "replace")
            elif kind.startswith("vec:"):
                code = kind[4:]
                start, count = self.vector(p, _SCALARS[code])
                out[fname] = np.frombuffer(self.buf, "<" + code, count, start).copy()
            elif kind.startswith("table:"):
                out[fname] = self.table(kind[6:], self.deref(p))
            elif kind.startswith("tables:"):
                start, count = self.vector(p, 4)
                out[fname] = [
                    self.table(kind[7:], self.deref(start + 4 * i)) for i in range(count)
                ]
            elif kind == "union":
                opt_name = OPTIONS_BY_TYPE.get(out.get("builtin_options_type", 0))
                out[fname] = (
                    self.table(opt_name, self.deref(p), OPTIONS[opt_name][1]) if opt_name else {}
                )
        return out


def read_model(buf: bytes) -> dict:
    """The Model table of the .tflite bytes `buf`, as nested dicts (field names as in
    schema.fbs). Raises ValueError on a file that is not a TFLite flatbuffer."""
    if len(buf) < 8 or bytes(buf[4:8]) != FILE_IDENTIFIER:
        ident = bytes(buf[4:8]).decode("latin-1")
        raise ValueError(f"Model provided has model identifier '{ident}', should be 'TFL3'")
    reader = _Reader(buf)
    return reader.table("Model", reader.deref(0))


# ----------------------------------------------------------------------------- writing

_PREPEND = {
    "b": "PrependInt8Slot",
    "B": "PrependUint8Slot",
    "?": "PrependBoolSlot",
    "i": "PrependInt32Slot",
    "I": "PrependUint32Slot",
    "f": "PrependFloat32Slot",
    "q": "PrependInt64Slot",
    "Q": "PrependUint64Slot",
}


def _vector_of_offsets(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _write_table(b: flatbuffers.Builder, name: str, value: dict, fields=None) -> int:
    fields = TABLES[name] if fields is None else fields
    # Children first: flatbuffers builds bottom-up, and a table may not be open meanwhile.
    children: dict[str, int] = {}
    for fname, _slot, kind, _default in fields:
        v = value.get(fname)
        if v is None or kind in _SCALARS:
            continue
        if kind == "str":
            children[fname] = b.CreateString(v)
        elif kind.startswith("vec:"):
            arr = np.asarray(v, dtype="<" + kind[4:])
            if kind == "vec:B":
                b.StartVector(1, len(arr), 16)  # buffers are 16-byte aligned, as TF's
                b.head -= len(arr)
                b.Bytes[b.head : b.head + len(arr)] = arr.tobytes()
                children[fname] = b.EndVector()
            else:
                children[fname] = b.CreateNumpyVector(arr)
        elif kind.startswith("table:"):
            children[fname] = _write_table(b, kind[6:], v)
        elif kind.startswith("tables:"):
            offs = [_write_table(b, kind[7:], item) for item in v]
            children[fname] = _vector_of_offsets(b, offs)
        elif kind == "union":
            opt_name = OPTIONS_BY_TYPE[value["builtin_options_type"]]
            children[fname] = _write_table(b, opt_name, v, OPTIONS[opt_name][1])
    b.StartObject(max(slot for _, slot, _, _ in fields) + 1 if fields else 0)
    for fname, slot, kind, default in fields:
        v = value.get(fname)
        if fname in children:
            b.PrependUOffsetTRelativeSlot(slot, children[fname], 0)
        elif kind in _SCALARS and v is not None:
            getattr(b, _PREPEND[kind])(slot, v, default)
    return b.EndObject()


def write_model(model: dict) -> bytes:
    """The .tflite bytes of `model` (nested dicts as `read_model` returns)."""
    b = flatbuffers.Builder(1024)
    root = _write_table(b, "Model", model)
    b.Finish(root, file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())
