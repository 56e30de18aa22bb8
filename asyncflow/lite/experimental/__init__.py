"""`tf.lite.experimental` (tf.compat.v1.lite.experimental)."""

from asyncflow.lite.experimental.analyzer import Analyzer
from asyncflow.lite.experimental.debugger import QuantizationDebugger, QuantizationDebugOptions
from asyncflow.lite.experimental.delegates import OpResolverType, load_delegate

__all__ = [
    "Analyzer",
    "OpResolverType",
    "QuantizationDebugOptions",
    "QuantizationDebugger",
    "load_delegate",
]
