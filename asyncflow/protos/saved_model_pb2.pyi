from asyncflow.protos import meta_graph_pb2 as _meta_graph_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SavedModel(_message.Message):
    __slots__ = ("saved_model_schema_version", "meta_graphs")
    SAVED_MODEL_SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    META_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    saved_model_schema_version: int
    meta_graphs: _containers.RepeatedCompositeFieldContainer[_meta_graph_pb2.MetaGraphDef]
    def __init__(self, saved_model_schema_version: _Optional[int] = ..., meta_graphs: _Optional[_Iterable[_Union[_meta_graph_pb2.MetaGraphDef, _Mapping]]] = ...) -> None: ...
