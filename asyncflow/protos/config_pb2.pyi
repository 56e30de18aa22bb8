from asyncflow.protos import cost_graph_pb2 as _cost_graph_pb2
from asyncflow.protos import graph_pb2 as _graph_pb2
from asyncflow.protos import step_stats_pb2 as _step_stats_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunMetadata(_message.Message):
    __slots__ = ("step_stats", "cost_graph", "partition_graphs", "function_graphs", "session_metadata")
    class FunctionGraphs(_message.Message):
        __slots__ = ("partition_graphs", "pre_optimization_graph", "post_optimization_graph")
        PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
        PRE_OPTIMIZATION_GRAPH_FIELD_NUMBER: _ClassVar[int]
        POST_OPTIMIZATION_GRAPH_FIELD_NUMBER: _ClassVar[int]
        partition_graphs: _containers.RepeatedCompositeFieldContainer[_graph_pb2.GraphDef]
        pre_optimization_graph: _graph_pb2.GraphDef
        post_optimization_graph: _graph_pb2.GraphDef
        def __init__(self, partition_graphs: _Optional[_Iterable[_Union[_graph_pb2.GraphDef, _Mapping]]] = ..., pre_optimization_graph: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., post_optimization_graph: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ...) -> None: ...
    STEP_STATS_FIELD_NUMBER: _ClassVar[int]
    COST_GRAPH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    SESSION_METADATA_FIELD_NUMBER: _ClassVar[int]
    step_stats: _step_stats_pb2.StepStats
    cost_graph: _cost_graph_pb2.CostGraphDef
    partition_graphs: _containers.RepeatedCompositeFieldContainer[_graph_pb2.GraphDef]
    function_graphs: _containers.RepeatedCompositeFieldContainer[RunMetadata.FunctionGraphs]
    session_metadata: SessionMetadata
    def __init__(self, step_stats: _Optional[_Union[_step_stats_pb2.StepStats, _Mapping]] = ..., cost_graph: _Optional[_Union[_cost_graph_pb2.CostGraphDef, _Mapping]] = ..., partition_graphs: _Optional[_Iterable[_Union[_graph_pb2.GraphDef, _Mapping]]] = ..., function_graphs: _Optional[_Iterable[_Union[RunMetadata.FunctionGraphs, _Mapping]]] = ..., session_metadata: _Optional[_Union[SessionMetadata, _Mapping]] = ...) -> None: ...

class SessionMetadata(_message.Message):
    __slots__ = ("name", "version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...
