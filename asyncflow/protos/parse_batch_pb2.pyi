from asyncflow.protos import example_pb2 as _example_pb2
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

class RawFeature(_message.Message):
    __slots__ = ("bytes_list", "float_list", "int64_list")
    BYTES_LIST_FIELD_NUMBER: _ClassVar[int]
    FLOAT_LIST_FIELD_NUMBER: _ClassVar[int]
    INT64_LIST_FIELD_NUMBER: _ClassVar[int]
    bytes_list: bytes
    float_list: bytes
    int64_list: bytes
    def __init__(self, bytes_list: _Optional[bytes] = ..., float_list: _Optional[bytes] = ..., int64_list: _Optional[bytes] = ...) -> None: ...

class RawFeatures(_message.Message):
    __slots__ = ("feature",)
    class FeatureEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: RawFeature
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[RawFeature, _Mapping]] = ...) -> None: ...
    FEATURE_FIELD_NUMBER: _ClassVar[int]
    feature: _containers.MessageMap[str, RawFeature]
    def __init__(self, feature: _Optional[_Mapping[str, RawFeature]] = ...) -> None: ...

class RawExample(_message.Message):
    __slots__ = ("features",)
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    features: RawFeatures
    def __init__(self, features: _Optional[_Union[RawFeatures, _Mapping]] = ...) -> None: ...

class RawExampleBatch(_message.Message):
    __slots__ = ("example",)
    EXAMPLE_FIELD_NUMBER: _ClassVar[int]
    example: _containers.RepeatedCompositeFieldContainer[RawExample]
    def __init__(self, example: _Optional[_Iterable[_Union[RawExample, _Mapping]]] = ...) -> None: ...
