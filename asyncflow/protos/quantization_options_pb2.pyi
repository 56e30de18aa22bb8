from asyncflow.protos import quantization_config_pb2 as _quantization_config_pb2
from asyncflow.protos import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OpSet(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OP_SET_UNSPECIFIED: _ClassVar[OpSet]
    TF: _ClassVar[OpSet]
    XLA: _ClassVar[OpSet]
    UNIFORM_QUANTIZED: _ClassVar[OpSet]
    STABLEHLO: _ClassVar[OpSet]
OP_SET_UNSPECIFIED: OpSet
TF: OpSet
XLA: OpSet
UNIFORM_QUANTIZED: OpSet
STABLEHLO: OpSet

class QuantizationMethod(_message.Message):
    __slots__ = ("preset_method", "quantization_component_specs")
    class PresetMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        METHOD_UNSPECIFIED: _ClassVar[QuantizationMethod.PresetMethod]
        METHOD_NO_QUANTIZE: _ClassVar[QuantizationMethod.PresetMethod]
        METHOD_STATIC_RANGE_INT8: _ClassVar[QuantizationMethod.PresetMethod]
        METHOD_DYNAMIC_RANGE_INT8: _ClassVar[QuantizationMethod.PresetMethod]
        METHOD_STATIC_RANGE_WEIGHT_ONLY_INT8: _ClassVar[QuantizationMethod.PresetMethod]
    METHOD_UNSPECIFIED: QuantizationMethod.PresetMethod
    METHOD_NO_QUANTIZE: QuantizationMethod.PresetMethod
    METHOD_STATIC_RANGE_INT8: QuantizationMethod.PresetMethod
    METHOD_DYNAMIC_RANGE_INT8: QuantizationMethod.PresetMethod
    METHOD_STATIC_RANGE_WEIGHT_ONLY_INT8: QuantizationMethod.PresetMethod
    PRESET_METHOD_FIELD_NUMBER: _ClassVar[int]
    QUANTIZATION_COMPONENT_SPECS_FIELD_NUMBER: _ClassVar[int]
    preset_method: QuantizationMethod.PresetMethod
    quantization_component_specs: _containers.RepeatedCompositeFieldContainer[QuantizationComponentSpec]
    def __init__(self, preset_method: _Optional[_Union[QuantizationMethod.PresetMethod, str]] = ..., quantization_component_specs: _Optional[_Iterable[_Union[QuantizationComponentSpec, _Mapping]]] = ...) -> None: ...

class QuantizationComponentSpec(_message.Message):
    __slots__ = ("quantization_component", "tensor_type")
    class QuantizationComponent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        COMPONENT_UNSPECIFIED: _ClassVar[QuantizationComponentSpec.QuantizationComponent]
        COMPONENT_ACTIVATION: _ClassVar[QuantizationComponentSpec.QuantizationComponent]
        COMPONENT_WEIGHT: _ClassVar[QuantizationComponentSpec.QuantizationComponent]
        COMPONENT_BIAS: _ClassVar[QuantizationComponentSpec.QuantizationComponent]
    COMPONENT_UNSPECIFIED: QuantizationComponentSpec.QuantizationComponent
    COMPONENT_ACTIVATION: QuantizationComponentSpec.QuantizationComponent
    COMPONENT_WEIGHT: QuantizationComponentSpec.QuantizationComponent
    COMPONENT_BIAS: QuantizationComponentSpec.QuantizationComponent
    class TensorType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TENSORTYPE_UNSPECIFIED: _ClassVar[QuantizationComponentSpec.TensorType]
        TENSORTYPE_INT_4: _ClassVar[QuantizationComponentSpec.TensorType]
        TENSORTYPE_INT_8: _ClassVar[QuantizationComponentSpec.TensorType]
        TENSORTYPE_INT_32: _ClassVar[QuantizationComponentSpec.TensorType]
    TENSORTYPE_UNSPECIFIED: QuantizationComponentSpec.TensorType
    TENSORTYPE_INT_4: QuantizationComponentSpec.TensorType
    TENSORTYPE_INT_8: QuantizationComponentSpec.TensorType
    TENSORTYPE_INT_32: QuantizationComponentSpec.TensorType
    QUANTIZATION_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    TENSOR_TYPE_FIELD_NUMBER: _ClassVar[int]
    quantization_component: QuantizationComponentSpec.QuantizationComponent
    tensor_type: QuantizationComponentSpec.TensorType
    def __init__(self, quantization_component: _Optional[_Union[QuantizationComponentSpec.QuantizationComponent, str]] = ..., tensor_type: _Optional[_Union[QuantizationComponentSpec.TensorType, str]] = ...) -> None: ...

class UnitWiseQuantizationSpec(_message.Message):
    __slots__ = ("unit", "quantization_method")
    class QuantizationUnit(_message.Message):
        __slots__ = ("op_type", "node_name", "func_name")
        OP_TYPE_FIELD_NUMBER: _ClassVar[int]
        NODE_NAME_FIELD_NUMBER: _ClassVar[int]
        FUNC_NAME_FIELD_NUMBER: _ClassVar[int]
        op_type: str
        node_name: str
        func_name: str
        def __init__(self, op_type: _Optional[str] = ..., node_name: _Optional[str] = ..., func_name: _Optional[str] = ...) -> None: ...
    UNIT_FIELD_NUMBER: _ClassVar[int]
    QUANTIZATION_METHOD_FIELD_NUMBER: _ClassVar[int]
    unit: _containers.RepeatedCompositeFieldContainer[UnitWiseQuantizationSpec.QuantizationUnit]
    quantization_method: QuantizationMethod
    def __init__(self, unit: _Optional[_Iterable[_Union[UnitWiseQuantizationSpec.QuantizationUnit, _Mapping]]] = ..., quantization_method: _Optional[_Union[QuantizationMethod, _Mapping]] = ...) -> None: ...

class RepresentativeDataSample(_message.Message):
    __slots__ = ("tensor_proto_inputs",)
    class TensorProtoInputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _tensor_pb2.TensorProto
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ...) -> None: ...
    TENSOR_PROTO_INPUTS_FIELD_NUMBER: _ClassVar[int]
    tensor_proto_inputs: _containers.MessageMap[str, _tensor_pb2.TensorProto]
    def __init__(self, tensor_proto_inputs: _Optional[_Mapping[str, _tensor_pb2.TensorProto]] = ...) -> None: ...

class RepresentativeDatasetFile(_message.Message):
    __slots__ = ("tfrecord_file_path",)
    TFRECORD_FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    tfrecord_file_path: str
    def __init__(self, tfrecord_file_path: _Optional[str] = ...) -> None: ...

class QuantizationOptions(_message.Message):
    __slots__ = ("quantization_method", "op_set", "unit_wise_quantization_specs", "tags", "signature_keys", "representative_datasets", "min_num_elements_for_weights", "freeze_all_variables", "enable_per_channel_quantization", "enable_two_input_tensors", "experimental_enable_tpu_model_support", "enable_legacy_weight_only", "force_graph_mode_calibration", "calibration_options", "debugger_config")
    class RepresentativeDatasetsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: RepresentativeDatasetFile
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[RepresentativeDatasetFile, _Mapping]] = ...) -> None: ...
    QUANTIZATION_METHOD_FIELD_NUMBER: _ClassVar[int]
    OP_SET_FIELD_NUMBER: _ClassVar[int]
    UNIT_WISE_QUANTIZATION_SPECS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_KEYS_FIELD_NUMBER: _ClassVar[int]
    REPRESENTATIVE_DATASETS_FIELD_NUMBER: _ClassVar[int]
    MIN_NUM_ELEMENTS_FOR_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    FREEZE_ALL_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    ENABLE_PER_CHANNEL_QUANTIZATION_FIELD_NUMBER: _ClassVar[int]
    ENABLE_TWO_INPUT_TENSORS_FIELD_NUMBER: _ClassVar[int]
    EXPERIMENTAL_ENABLE_TPU_MODEL_SUPPORT_FIELD_NUMBER: _ClassVar[int]
    ENABLE_LEGACY_WEIGHT_ONLY_FIELD_NUMBER: _ClassVar[int]
    FORCE_GRAPH_MODE_CALIBRATION_FIELD_NUMBER: _ClassVar[int]
    CALIBRATION_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    DEBUGGER_CONFIG_FIELD_NUMBER: _ClassVar[int]
    quantization_method: QuantizationMethod
    op_set: OpSet
    unit_wise_quantization_specs: _containers.RepeatedCompositeFieldContainer[UnitWiseQuantizationSpec]
    tags: _containers.RepeatedScalarFieldContainer[str]
    signature_keys: _containers.RepeatedScalarFieldContainer[str]
    representative_datasets: _containers.MessageMap[str, RepresentativeDatasetFile]
    min_num_elements_for_weights: int
    freeze_all_variables: bool
    enable_per_channel_quantization: bool
    enable_two_input_tensors: bool
    experimental_enable_tpu_model_support: bool
    enable_legacy_weight_only: bool
    force_graph_mode_calibration: bool
    calibration_options: _quantization_config_pb2.CalibrationOptions
    debugger_config: _quantization_config_pb2.DebuggerConfig
    def __init__(self, quantization_method: _Optional[_Union[QuantizationMethod, _Mapping]] = ..., op_set: _Optional[_Union[OpSet, str]] = ..., unit_wise_quantization_specs: _Optional[_Iterable[_Union[UnitWiseQuantizationSpec, _Mapping]]] = ..., tags: _Optional[_Iterable[str]] = ..., signature_keys: _Optional[_Iterable[str]] = ..., representative_datasets: _Optional[_Mapping[str, RepresentativeDatasetFile]] = ..., min_num_elements_for_weights: _Optional[int] = ..., freeze_all_variables: _Optional[bool] = ..., enable_per_channel_quantization: _Optional[bool] = ..., enable_two_input_tensors: _Optional[bool] = ..., experimental_enable_tpu_model_support: _Optional[bool] = ..., enable_legacy_weight_only: _Optional[bool] = ..., force_graph_mode_calibration: _Optional[bool] = ..., calibration_options: _Optional[_Union[_quantization_config_pb2.CalibrationOptions, _Mapping]] = ..., debugger_config: _Optional[_Union[_quantization_config_pb2.DebuggerConfig, _Mapping]] = ...) -> None: ...
