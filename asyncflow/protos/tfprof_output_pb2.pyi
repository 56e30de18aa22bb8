from asyncflow.protos import tensor_shape_pb2 as _tensor_shape_pb2
from asyncflow.protos import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TFProfTensorProto(_message.Message):
    __slots__ = ("dtype", "value_double", "value_int64", "value_str")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_DOUBLE_FIELD_NUMBER: _ClassVar[int]
    VALUE_INT64_FIELD_NUMBER: _ClassVar[int]
    VALUE_STR_FIELD_NUMBER: _ClassVar[int]
    dtype: _types_pb2.DataType
    value_double: _containers.RepeatedScalarFieldContainer[float]
    value_int64: _containers.RepeatedScalarFieldContainer[int]
    value_str: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, dtype: _Optional[_Union[_types_pb2.DataType, str]] = ..., value_double: _Optional[_Iterable[float]] = ..., value_int64: _Optional[_Iterable[int]] = ..., value_str: _Optional[_Iterable[str]] = ...) -> None: ...

class GraphNodeProto(_message.Message):
    __slots__ = ("name", "tensor_value", "run_count", "exec_micros", "accelerator_exec_micros", "cpu_exec_micros", "requested_bytes", "peak_bytes", "residual_bytes", "output_bytes", "parameters", "float_ops", "devices", "total_definition_count", "total_run_count", "total_exec_micros", "total_accelerator_exec_micros", "total_cpu_exec_micros", "total_requested_bytes", "total_peak_bytes", "total_residual_bytes", "total_output_bytes", "total_parameters", "total_float_ops", "shapes", "input_shapes", "children")
    class InputShapesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: _tensor_shape_pb2.TensorShapeProto
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[_tensor_shape_pb2.TensorShapeProto, _Mapping]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSOR_VALUE_FIELD_NUMBER: _ClassVar[int]
    RUN_COUNT_FIELD_NUMBER: _ClassVar[int]
    EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    ACCELERATOR_EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    CPU_EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    PEAK_BYTES_FIELD_NUMBER: _ClassVar[int]
    RESIDUAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    FLOAT_OPS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_DEFINITION_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_RUN_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ACCELERATOR_EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CPU_EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_REQUESTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PEAK_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_RESIDUAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FLOAT_OPS_FIELD_NUMBER: _ClassVar[int]
    SHAPES_FIELD_NUMBER: _ClassVar[int]
    INPUT_SHAPES_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    name: str
    tensor_value: TFProfTensorProto
    run_count: int
    exec_micros: int
    accelerator_exec_micros: int
    cpu_exec_micros: int
    requested_bytes: int
    peak_bytes: int
    residual_bytes: int
    output_bytes: int
    parameters: int
    float_ops: int
    devices: _containers.RepeatedScalarFieldContainer[str]
    total_definition_count: int
    total_run_count: int
    total_exec_micros: int
    total_accelerator_exec_micros: int
    total_cpu_exec_micros: int
    total_requested_bytes: int
    total_peak_bytes: int
    total_residual_bytes: int
    total_output_bytes: int
    total_parameters: int
    total_float_ops: int
    shapes: _containers.RepeatedCompositeFieldContainer[_tensor_shape_pb2.TensorShapeProto]
    input_shapes: _containers.MessageMap[int, _tensor_shape_pb2.TensorShapeProto]
    children: _containers.RepeatedCompositeFieldContainer[GraphNodeProto]
    def __init__(self, name: _Optional[str] = ..., tensor_value: _Optional[_Union[TFProfTensorProto, _Mapping]] = ..., run_count: _Optional[int] = ..., exec_micros: _Optional[int] = ..., accelerator_exec_micros: _Optional[int] = ..., cpu_exec_micros: _Optional[int] = ..., requested_bytes: _Optional[int] = ..., peak_bytes: _Optional[int] = ..., residual_bytes: _Optional[int] = ..., output_bytes: _Optional[int] = ..., parameters: _Optional[int] = ..., float_ops: _Optional[int] = ..., devices: _Optional[_Iterable[str]] = ..., total_definition_count: _Optional[int] = ..., total_run_count: _Optional[int] = ..., total_exec_micros: _Optional[int] = ..., total_accelerator_exec_micros: _Optional[int] = ..., total_cpu_exec_micros: _Optional[int] = ..., total_requested_bytes: _Optional[int] = ..., total_peak_bytes: _Optional[int] = ..., total_residual_bytes: _Optional[int] = ..., total_output_bytes: _Optional[int] = ..., total_parameters: _Optional[int] = ..., total_float_ops: _Optional[int] = ..., shapes: _Optional[_Iterable[_Union[_tensor_shape_pb2.TensorShapeProto, _Mapping]]] = ..., input_shapes: _Optional[_Mapping[int, _tensor_shape_pb2.TensorShapeProto]] = ..., children: _Optional[_Iterable[_Union[GraphNodeProto, _Mapping]]] = ...) -> None: ...

class MultiGraphNodeProto(_message.Message):
    __slots__ = ("name", "exec_micros", "accelerator_exec_micros", "cpu_exec_micros", "requested_bytes", "peak_bytes", "residual_bytes", "output_bytes", "parameters", "float_ops", "total_exec_micros", "total_accelerator_exec_micros", "total_cpu_exec_micros", "total_requested_bytes", "total_peak_bytes", "total_residual_bytes", "total_output_bytes", "total_parameters", "total_float_ops", "graph_nodes", "children")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    ACCELERATOR_EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    CPU_EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    PEAK_BYTES_FIELD_NUMBER: _ClassVar[int]
    RESIDUAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    FLOAT_OPS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ACCELERATOR_EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CPU_EXEC_MICROS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_REQUESTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PEAK_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_RESIDUAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FLOAT_OPS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_NODES_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    name: str
    exec_micros: int
    accelerator_exec_micros: int
    cpu_exec_micros: int
    requested_bytes: int
    peak_bytes: int
    residual_bytes: int
    output_bytes: int
    parameters: int
    float_ops: int
    total_exec_micros: int
    total_accelerator_exec_micros: int
    total_cpu_exec_micros: int
    total_requested_bytes: int
    total_peak_bytes: int
    total_residual_bytes: int
    total_output_bytes: int
    total_parameters: int
    total_float_ops: int
    graph_nodes: _containers.RepeatedCompositeFieldContainer[GraphNodeProto]
    children: _containers.RepeatedCompositeFieldContainer[MultiGraphNodeProto]
    def __init__(self, name: _Optional[str] = ..., exec_micros: _Optional[int] = ..., accelerator_exec_micros: _Optional[int] = ..., cpu_exec_micros: _Optional[int] = ..., requested_bytes: _Optional[int] = ..., peak_bytes: _Optional[int] = ..., residual_bytes: _Optional[int] = ..., output_bytes: _Optional[int] = ..., parameters: _Optional[int] = ..., float_ops: _Optional[int] = ..., total_exec_micros: _Optional[int] = ..., total_accelerator_exec_micros: _Optional[int] = ..., total_cpu_exec_micros: _Optional[int] = ..., total_requested_bytes: _Optional[int] = ..., total_peak_bytes: _Optional[int] = ..., total_residual_bytes: _Optional[int] = ..., total_output_bytes: _Optional[int] = ..., total_parameters: _Optional[int] = ..., total_float_ops: _Optional[int] = ..., graph_nodes: _Optional[_Iterable[_Union[GraphNodeProto, _Mapping]]] = ..., children: _Optional[_Iterable[_Union[MultiGraphNodeProto, _Mapping]]] = ...) -> None: ...

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
