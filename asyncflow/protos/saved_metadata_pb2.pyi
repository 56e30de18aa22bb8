from asyncflow.protos import versions_pb2 as _versions_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SavedMetadata(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[SavedObject]
    def __init__(self, nodes: _Optional[_Iterable[_Union[SavedObject, _Mapping]]] = ...) -> None: ...

class SavedObject(_message.Message):
    __slots__ = ("node_id", "node_path", "identifier", "metadata", "version")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_PATH_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    node_path: str
    identifier: str
    metadata: str
    version: _versions_pb2.VersionDef
    def __init__(self, node_id: _Optional[int] = ..., node_path: _Optional[str] = ..., identifier: _Optional[str] = ..., metadata: _Optional[str] = ..., version: _Optional[_Union[_versions_pb2.VersionDef, _Mapping]] = ...) -> None: ...
