"""`tf.lite.experimental` (tf.compat.v1.lite.experimental)."""

from asyncflow.lite.experimental import authoring
from asyncflow.lite.experimental.analyzer import Analyzer
from asyncflow.lite.experimental.debugger import QuantizationDebugger, QuantizationDebugOptions
from asyncflow.lite.experimental.delegates import OpResolverType, load_delegate
from asyncflow.lite.op_hint import convert_op_hints_to_stubs

__all__ = [
    "Analyzer",
    "authoring",
    "OpResolverType",
    "QuantizationDebugOptions",
    "QuantizationDebugger",
    "convert_op_hints_to_stubs",
    "load_delegate",
]
