"""`tf.lite.constants`: the dtype and output-format names TF1's converter accepted."""

from asyncflow import dtypes

FLOAT = dtypes.float32
FLOAT16 = dtypes.float16
INT32 = dtypes.int32
INT64 = dtypes.int64
INT8 = dtypes.int8
INT16 = dtypes.int16
STRING = dtypes.string
QUANTIZED_UINT8 = dtypes.uint8
TFLITE = 2
GRAPHVIZ_DOT = 3
