"""`tf.lite` (tf.compat.v1.lite): the TFLite flatbuffer format, both ways.

`TFLiteConverter` turns a TF1 float32 inference graph into .tflite bytes; `Interpreter`
runs .tflite files (ours or TF's) with NumPy kernels. `schema` holds the flatbuffer
layout both share.
"""

from asyncflow.lite import constants, experimental
from asyncflow.lite.converter import (
    ConverterError,
    OpsSet,
    Optimize,
    RepresentativeDataset,
    TargetSpec,
    TFLiteConverter,
)
from asyncflow.lite.interpreter import Interpreter, SignatureRunner
from asyncflow.lite.op_hint import OpHint
from asyncflow.lite.toco import TocoConverter, toco_convert

__all__ = [
    "ConverterError",
    "Interpreter",
    "OpHint",
    "OpsSet",
    "Optimize",
    "RepresentativeDataset",
    "SignatureRunner",
    "TFLiteConverter",
    "TargetSpec",
    "TocoConverter",
    "constants",
    "experimental",
    "toco_convert",
]
