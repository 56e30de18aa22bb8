from asyncflow.protos import example_pb2 as _example_pb2
from asyncflow.protos import feature_pb2 as _feature_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExampleBatch(_message.Message):
    __slots__ = ("example",)
    EXAMPLE_FIELD_NUMBER: _ClassVar[int]
    example: _containers.RepeatedCompositeFieldContainer[_example_pb2.Example]
    def __init__(self, example: _Optional[_Iterable[_Union[_example_pb2.Example, _Mapping]]] = ...) -> None: ...

class RawFloatList(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, value: _Optional[_Iterable[bytes]] = ...) -> None: ...

class RawFloatFeature(_message.Message):
    __slots__ = ("bytes_list", "float_list", "int64_list")
    BYTES_LIST_FIELD_NUMBER: _ClassVar[int]
    FLOAT_LIST_FIELD_NUMBER: _ClassVar[int]
    INT64_LIST_FIELD_NUMBER: _ClassVar[int]
    bytes_list: _feature_pb2.BytesList
    float_list: RawFloatList
    int64_list: _feature_pb2.Int64List
    def __init__(self, bytes_list: _Optional[_Union[_feature_pb2.BytesList, _Mapping]] = ..., float_list: _Optional[_Union[RawFloatList, _Mapping]] = ..., int64_list: _Optional[_Union[_feature_pb2.Int64List, _Mapping]] = ...) -> None: ...

class RawFloatFeatures(_message.Message):
    __slots__ = ("feature",)
    class FeatureEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: RawFloatFeature
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[RawFloatFeature, _Mapping]] = ...) -> None: ...
    FEATURE_FIELD_NUMBER: _ClassVar[int]
    feature: _containers.MessageMap[str, RawFloatFeature]
    def __init__(self, feature: _Optional[_Mapping[str, RawFloatFeature]] = ...) -> None: ...

class RawFloatExample(_message.Message):
    __slots__ = ("features",)
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    features: RawFloatFeatures
    def __init__(self, features: _Optional[_Union[RawFloatFeatures, _Mapping]] = ...) -> None: ...

class RawFloatExampleBatch(_message.Message):
    __slots__ = ("example",)
    EXAMPLE_FIELD_NUMBER: _ClassVar[int]
    example: _containers.RepeatedCompositeFieldContainer[RawFloatExample]
    def __init__(self, example: _Optional[_Iterable[_Union[RawFloatExample, _Mapping]]] = ...) -> None: ...
