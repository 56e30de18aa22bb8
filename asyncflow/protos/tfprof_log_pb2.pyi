from asyncflow.protos import attr_value_pb2 as _attr_value_pb2
from asyncflow.protos import step_stats_pb2 as _step_stats_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CodeDef(_message.Message):
    __slots__ = ("traces",)
    class Trace(_message.Message):
        __slots__ = ("file_id", "lineno", "function_id", "line_id", "func_start_line")
        FILE_ID_FIELD_NUMBER: _ClassVar[int]
        LINENO_FIELD_NUMBER: _ClassVar[int]
        FUNCTION_ID_FIELD_NUMBER: _ClassVar[int]
        LINE_ID_FIELD_NUMBER: _ClassVar[int]
        FUNC_START_LINE_FIELD_NUMBER: _ClassVar[int]
        file_id: int
        lineno: int
        function_id: int
        line_id: int
        func_start_line: int
        def __init__(self, file_id: _Optional[int] = ..., lineno: _Optional[int] = ..., function_id: _Optional[int] = ..., line_id: _Optional[int] = ..., func_start_line: _Optional[int] = ...) -> None: ...
    TRACES_FIELD_NUMBER: _ClassVar[int]
    traces: _containers.RepeatedCompositeFieldContainer[CodeDef.Trace]
    def __init__(self, traces: _Optional[_Iterable[_Union[CodeDef.Trace, _Mapping]]] = ...) -> None: ...

class OpLogEntry(_message.Message):
    __slots__ = ("name", "float_ops", "types", "code_def")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FLOAT_OPS_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    CODE_DEF_FIELD_NUMBER: _ClassVar[int]
    name: str
    float_ops: int
    types: _containers.RepeatedScalarFieldContainer[str]
    code_def: CodeDef
    def __init__(self, name: _Optional[str] = ..., float_ops: _Optional[int] = ..., types: _Optional[_Iterable[str]] = ..., code_def: _Optional[_Union[CodeDef, _Mapping]] = ...) -> None: ...

class OpLogProto(_message.Message):
    __slots__ = ("log_entries", "id_to_string")
    class IdToStringEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    LOG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    ID_TO_STRING_FIELD_NUMBER: _ClassVar[int]
    log_entries: _containers.RepeatedCompositeFieldContainer[OpLogEntry]
    id_to_string: _containers.ScalarMap[int, str]
    def __init__(self, log_entries: _Optional[_Iterable[_Union[OpLogEntry, _Mapping]]] = ..., id_to_string: _Optional[_Mapping[int, str]] = ...) -> None: ...

class ProfileProto(_message.Message):
    __slots__ = ("nodes", "has_trace", "miss_accelerator_stream", "steps", "id_to_string")
    class NodesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: ProfileNode
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[ProfileNode, _Mapping]] = ...) -> None: ...
    class IdToStringEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    NODES_FIELD_NUMBER: _ClassVar[int]
    HAS_TRACE_FIELD_NUMBER: _ClassVar[int]
    MISS_ACCELERATOR_STREAM_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    ID_TO_STRING_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.MessageMap[int, ProfileNode]
    has_trace: bool
    miss_accelerator_stream: bool
    steps: _containers.RepeatedScalarFieldContainer[int]
    id_to_string: _containers.ScalarMap[int, str]
    def __init__(self, nodes: _Optional[_Mapping[int, ProfileNode]] = ..., has_trace: _Optional[bool] = ..., miss_accelerator_stream: _Optional[bool] = ..., steps: _Optional[_Iterable[int]] = ..., id_to_string: _Optional[_Mapping[int, str]] = ...) -> None: ...

class ProfileNode(_message.Message):
    __slots__ = ("name", "op", "id", "inputs", "input_shapes", "outputs", "output_shapes", "src_output_index", "shape", "op_types", "canonical_device", "host_device", "float_ops", "trace", "attrs", "execs")
    class InputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    class InputShapesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: Tuple
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[Tuple, _Mapping]] = ...) -> None: ...
    class OutputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    class OutputShapesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: Tuple
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[Tuple, _Mapping]] = ...) -> None: ...
    class SrcOutputIndexEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    class AttrsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _attr_value_pb2.AttrValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_attr_value_pb2.AttrValue, _Mapping]] = ...) -> None: ...
    class ExecsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: ExecProfile
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[ExecProfile, _Mapping]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_SHAPES_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SHAPES_FIELD_NUMBER: _ClassVar[int]
    SRC_OUTPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    OP_TYPES_FIELD_NUMBER: _ClassVar[int]
    CANONICAL_DEVICE_FIELD_NUMBER: _ClassVar[int]
    HOST_DEVICE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_OPS_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    EXECS_FIELD_NUMBER: _ClassVar[int]
    name: str
    op: str
    id: int
    inputs: _containers.ScalarMap[int, int]
    input_shapes: _containers.MessageMap[int, Tuple]
    outputs: _containers.ScalarMap[int, int]
    output_shapes: _containers.MessageMap[int, Tuple]
    src_output_index: _containers.ScalarMap[int, int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    op_types: _containers.RepeatedScalarFieldContainer[str]
    canonical_device: str
    host_device: str
    float_ops: int
    trace: CodeDef
    attrs: _containers.MessageMap[str, _attr_value_pb2.AttrValue]
    execs: _containers.MessageMap[int, ExecProfile]
    def __init__(self, name: _Optional[str] = ..., op: _Optional[str] = ..., id: _Optional[int] = ..., inputs: _Optional[_Mapping[int, int]] = ..., input_shapes: _Optional[_Mapping[int, Tuple]] = ..., outputs: _Optional[_Mapping[int, int]] = ..., output_shapes: _Optional[_Mapping[int, Tuple]] = ..., src_output_index: _Optional[_Mapping[int, int]] = ..., shape: _Optional[_Iterable[int]] = ..., op_types: _Optional[_Iterable[str]] = ..., canonical_device: _Optional[str] = ..., host_device: _Optional[str] = ..., float_ops: _Optional[int] = ..., trace: _Optional[_Union[CodeDef, _Mapping]] = ..., attrs: _Optional[_Mapping[str, _attr_value_pb2.AttrValue]] = ..., execs: _Optional[_Mapping[int, ExecProfile]] = ...) -> None: ...

class ExecProfile(_message.Message):
    __slots__ = ("run_count", "all_start_micros", "latest_end_micros", "accelerator_execs", "cpu_execs", "memory_execs", "allocations", "devices")
    class AcceleratorExecsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ExecTime
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ExecTime, _Mapping]] = ...) -> None: ...
    class CpuExecsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ExecTime
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ExecTime, _Mapping]] = ...) -> None: ...
    RUN_COUNT_FIELD_NUMBER: _ClassVar[int]
    ALL_START_MICROS_FIELD_NUMBER: _ClassVar[int]
    LATEST_END_MICROS_FIELD_NUMBER: _ClassVar[int]
    ACCELERATOR_EXECS_FIELD_NUMBER: _ClassVar[int]
    CPU_EXECS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_EXECS_FIELD_NUMBER: _ClassVar[int]
    ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    run_count: int
    all_start_micros: int
    latest_end_micros: int
    accelerator_execs: _containers.MessageMap[str, ExecTime]
    cpu_execs: _containers.MessageMap[str, ExecTime]
    memory_execs: _containers.RepeatedCompositeFieldContainer[ExecMemory]
    allocations: _containers.RepeatedCompositeFieldContainer[_step_stats_pb2.AllocationRecord]
    devices: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run_count: _Optional[int] = ..., all_start_micros: _Optional[int] = ..., latest_end_micros: _Optional[int] = ..., accelerator_execs: _Optional[_Mapping[str, ExecTime]] = ..., cpu_execs: _Optional[_Mapping[str, ExecTime]] = ..., memory_execs: _Optional[_Iterable[_Union[ExecMemory, _Mapping]]] = ..., allocations: _Optional[_Iterable[_Union[_step_stats_pb2.AllocationRecord, _Mapping]]] = ..., devices: _Optional[_Iterable[str]] = ...) -> None: ...

class ExecTime(_message.Message):
    __slots__ = ("times",)
    TIMES_FIELD_NUMBER: _ClassVar[int]
    times: _containers.RepeatedCompositeFieldContainer[Tuple]
    def __init__(self, times: _Optional[_Iterable[_Union[Tuple, _Mapping]]] = ...) -> None: ...

class ExecMemory(_message.Message):
    __slots__ = ("memory_micros", "host_temp_bytes", "host_persistent_bytes", "accelerator_temp_bytes", "accelerator_persistent_bytes", "requested_bytes", "peak_bytes", "residual_bytes", "output_bytes", "allocator_bytes_in_use", "output_memory")
    class OutputMemoryEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: Memory
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[Memory, _Mapping]] = ...) -> None: ...
    MEMORY_MICROS_FIELD_NUMBER: _ClassVar[int]
    HOST_TEMP_BYTES_FIELD_NUMBER: _ClassVar[int]
    HOST_PERSISTENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    ACCELERATOR_TEMP_BYTES_FIELD_NUMBER: _ClassVar[int]
    ACCELERATOR_PERSISTENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    PEAK_BYTES_FIELD_NUMBER: _ClassVar[int]
    RESIDUAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    ALLOCATOR_BYTES_IN_USE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory_micros: int
    host_temp_bytes: int
    host_persistent_bytes: int
    accelerator_temp_bytes: int
    accelerator_persistent_bytes: int
    requested_bytes: int
    peak_bytes: int
    residual_bytes: int
    output_bytes: int
    allocator_bytes_in_use: int
    output_memory: _containers.MessageMap[int, Memory]
    def __init__(self, memory_micros: _Optional[int] = ..., host_temp_bytes: _Optional[int] = ..., host_persistent_bytes: _Optional[int] = ..., accelerator_temp_bytes: _Optional[int] = ..., accelerator_persistent_bytes: _Optional[int] = ..., requested_bytes: _Optional[int] = ..., peak_bytes: _Optional[int] = ..., residual_bytes: _Optional[int] = ..., output_bytes: _Optional[int] = ..., allocator_bytes_in_use: _Optional[int] = ..., output_memory: _Optional[_Mapping[int, Memory]] = ...) -> None: ...

class Tuple(_message.Message):
    __slots__ = ("int64_values",)
    INT64_VALUES_FIELD_NUMBER: _ClassVar[int]
    int64_values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, int64_values: _Optional[_Iterable[int]] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ("bytes", "ptr")
    BYTES_FIELD_NUMBER: _ClassVar[int]
    PTR_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    ptr: int
    def __init__(self, bytes: _Optional[int] = ..., ptr: _Optional[int] = ...) -> None: ...
