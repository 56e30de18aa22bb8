from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdviceProto(_message.Message):
    __slots__ = ("checkers",)
    class Checker(_message.Message):
        __slots__ = ("reports",)
        REPORTS_FIELD_NUMBER: _ClassVar[int]
        reports: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, reports: _Optional[_Iterable[str]] = ...) -> None: ...
    class CheckersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AdviceProto.Checker
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AdviceProto.Checker, _Mapping]] = ...) -> None: ...
    CHECKERS_FIELD_NUMBER: _ClassVar[int]
    checkers: _containers.MessageMap[str, AdviceProto.Checker]
    def __init__(self, checkers: _Optional[_Mapping[str, AdviceProto.Checker]] = ...) -> None: ...
