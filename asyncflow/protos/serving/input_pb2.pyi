from asyncflow.protos import example_pb2 as _example_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExampleList(_message.Message):
    __slots__ = ("examples",)
    EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    examples: _containers.RepeatedCompositeFieldContainer[_example_pb2.Example]
    def __init__(self, examples: _Optional[_Iterable[_Union[_example_pb2.Example, _Mapping]]] = ...) -> None: ...

class ExampleListWithContext(_message.Message):
    __slots__ = ("examples", "context")
    EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    examples: _containers.RepeatedCompositeFieldContainer[_example_pb2.Example]
    context: _example_pb2.Example
    def __init__(self, examples: _Optional[_Iterable[_Union[_example_pb2.Example, _Mapping]]] = ..., context: _Optional[_Union[_example_pb2.Example, _Mapping]] = ...) -> None: ...

class Input(_message.Message):
    __slots__ = ("example_list", "example_list_with_context")
    EXAMPLE_LIST_FIELD_NUMBER: _ClassVar[int]
    EXAMPLE_LIST_WITH_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    example_list: ExampleList
    example_list_with_context: ExampleListWithContext
    def __init__(self, example_list: _Optional[_Union[ExampleList, _Mapping]] = ..., example_list_with_context: _Optional[_Union[ExampleListWithContext, _Mapping]] = ...) -> None: ...
