# -*- coding: utf-8 -*-
# The descriptor of asyncflow/protos/saved_tensor_slice.proto, serialized (built from
# that file's messages with descriptor_pb2: this checkout has no protoc).
"""Generated protocol buffer code."""
from google.protobuf import descriptor_pool as _descriptor_pool
from google.protobuf.internal import builder as _builder

from asyncflow.protos import (  # noqa: F401 - the descriptors this one depends on
    tensor_pb2,
    tensor_shape_pb2,
    tensor_slice_pb2,
    types_pb2,
    versions_pb2,
)

DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile(b'\n)asyncflow/protos/saved_tensor_slice.proto\x12\x14asyncflow.tensorflow\x1a\x1dasyncflow/protos/tensor.proto\x1a#asyncflow/protos/tensor_shape.proto\x1a#asyncflow/protos/tensor_slice.proto\x1a\x1casyncflow/protos/types.proto\x1a\x1fasyncflow/protos/versions.proto"\xd4\x01\n\x0eSavedSliceMeta\x12\x12\n\x04name\x18\x01 \x01(\tR\x04name\x12<\n\x05shape\x18\x02 \x01(\x0b2&.asyncflow.tensorflow.TensorShapeProtoR\x05shape\x122\n\x04type\x18\x03 \x01(\x0e2\x1e.asyncflow.tensorflow.DataTypeR\x04type\x12<\n\x05slice\x18\x04 \x03(\x0b2&.asyncflow.tensorflow.TensorSliceProtoR\x05slice"\x92\x01\n\x14SavedTensorSliceMeta\x12<\n\x06tensor\x18\x01 \x03(\x0b2$.asyncflow.tensorflow.SavedSliceMetaR\x06tensor\x12<\n\x08versions\x18\x02 \x01(\x0b2 .asyncflow.tensorflow.VersionDefR\x08versions"\x95\x01\n\nSavedSlice\x12\x12\n\x04name\x18\x01 \x01(\tR\x04name\x12<\n\x05slice\x18\x02 \x01(\x0b2&.asyncflow.tensorflow.TensorSliceProtoR\x05slice\x125\n\x04data\x18\x03 \x01(\x0b2!.asyncflow.tensorflow.TensorProtoR\x04data"\x89\x01\n\x11SavedTensorSlices\x12>\n\x04meta\x18\x01 \x01(\x0b2*.asyncflow.tensorflow.SavedTensorSliceMetaR\x04meta\x124\n\x04data\x18\x02 \x01(\x0b2 .asyncflow.tensorflow.SavedSliceR\x04datab\x06proto3')

_globals = globals()
_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, _globals)
_builder.BuildTopDescriptorsAndMessages(
    DESCRIPTOR, "asyncflow.protos.saved_tensor_slice_pb2", _globals
)
