from asyncflow.protos import attr_value_pb2 as _attr_value_pb2
from asyncflow.protos import node_def_pb2 as _node_def_pb2
from asyncflow.protos import op_def_pb2 as _op_def_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FunctionDefLibrary(_message.Message):
    __slots__ = ("function", "gradient", "registered_gradients")
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    GRADIENT_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_GRADIENTS_FIELD_NUMBER: _ClassVar[int]
    function: _containers.RepeatedCompositeFieldContainer[FunctionDef]
    gradient: _containers.RepeatedCompositeFieldContainer[GradientDef]
    registered_gradients: _containers.RepeatedCompositeFieldContainer[RegisteredGradient]
    def __init__(self, function: _Optional[_Iterable[_Union[FunctionDef, _Mapping]]] = ..., gradient: _Optional[_Iterable[_Union[GradientDef, _Mapping]]] = ..., registered_gradients: _Optional[_Iterable[_Union[RegisteredGradient, _Mapping]]] = ...) -> None: ...

class FunctionDef(_message.Message):
    __slots__ = ("signature", "attr", "arg_attr", "resource_arg_unique_id", "node_def", "ret", "control_ret")
    class AttrEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _attr_value_pb2.AttrValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_attr_value_pb2.AttrValue, _Mapping]] = ...) -> None: ...
    class ArgAttrs(_message.Message):
        __slots__ = ("attr",)
        class AttrEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: _attr_value_pb2.AttrValue
            def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_attr_value_pb2.AttrValue, _Mapping]] = ...) -> None: ...
        ATTR_FIELD_NUMBER: _ClassVar[int]
        attr: _containers.MessageMap[str, _attr_value_pb2.AttrValue]
        def __init__(self, attr: _Optional[_Mapping[str, _attr_value_pb2.AttrValue]] = ...) -> None: ...
    class ArgAttrEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: FunctionDef.ArgAttrs
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[FunctionDef.ArgAttrs, _Mapping]] = ...) -> None: ...
    class ResourceArgUniqueIdEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    class RetEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ControlRetEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    ATTR_FIELD_NUMBER: _ClassVar[int]
    ARG_ATTR_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ARG_UNIQUE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_DEF_FIELD_NUMBER: _ClassVar[int]
    RET_FIELD_NUMBER: _ClassVar[int]
    CONTROL_RET_FIELD_NUMBER: _ClassVar[int]
    signature: _op_def_pb2.OpDef
    attr: _containers.MessageMap[str, _attr_value_pb2.AttrValue]
    arg_attr: _containers.MessageMap[int, FunctionDef.ArgAttrs]
    resource_arg_unique_id: _containers.ScalarMap[int, int]
    node_def: _containers.RepeatedCompositeFieldContainer[_node_def_pb2.NodeDef]
    ret: _containers.ScalarMap[str, str]
    control_ret: _containers.ScalarMap[str, str]
    def __init__(self, signature: _Optional[_Union[_op_def_pb2.OpDef, _Mapping]] = ..., attr: _Optional[_Mapping[str, _attr_value_pb2.AttrValue]] = ..., arg_attr: _Optional[_Mapping[int, FunctionDef.ArgAttrs]] = ..., resource_arg_unique_id: _Optional[_Mapping[int, int]] = ..., node_def: _Optional[_Iterable[_Union[_node_def_pb2.NodeDef, _Mapping]]] = ..., ret: _Optional[_Mapping[str, str]] = ..., control_ret: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GradientDef(_message.Message):
    __slots__ = ("function_name", "gradient_func")
    FUNCTION_NAME_FIELD_NUMBER: _ClassVar[int]
    GRADIENT_FUNC_FIELD_NUMBER: _ClassVar[int]
    function_name: str
    gradient_func: str
    def __init__(self, function_name: _Optional[str] = ..., gradient_func: _Optional[str] = ...) -> None: ...

class RegisteredGradient(_message.Message):
    __slots__ = ("gradient_func", "registered_op_type")
    GRADIENT_FUNC_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    gradient_func: str
    registered_op_type: str
    def __init__(self, gradient_func: _Optional[str] = ..., registered_op_type: _Optional[str] = ...) -> None: ...
