from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TfRecordFile(_message.Message):
    __slots__ = ("path",)
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class RepresentativeDatasetConfig(_message.Message):
    __slots__ = ("tf_record", "signature_key")
    TF_RECORD_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_KEY_FIELD_NUMBER: _ClassVar[int]
    tf_record: TfRecordFile
    signature_key: str
    def __init__(self, tf_record: _Optional[_Union[TfRecordFile, _Mapping]] = ..., signature_key: _Optional[str] = ...) -> None: ...

class CalibrationOptions(_message.Message):
    __slots__ = ("calibration_method", "calibration_parameters", "representative_datasets", "calibration_data_dir", "force_regenerate_calibration_data")
    class CalibrationMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        CALIBRATION_METHOD_UNSPECIFIED: _ClassVar[CalibrationOptions.CalibrationMethod]
        CALIBRATION_METHOD_MIN_MAX: _ClassVar[CalibrationOptions.CalibrationMethod]
        CALIBRATION_METHOD_AVERAGE_MIN_MAX: _ClassVar[CalibrationOptions.CalibrationMethod]
        CALIBRATION_METHOD_HISTOGRAM_PERCENTILE: _ClassVar[CalibrationOptions.CalibrationMethod]
        CALIBRATION_METHOD_HISTOGRAM_MSE_BRUTEFORCE: _ClassVar[CalibrationOptions.CalibrationMethod]
        CALIBRATION_METHOD_HISTOGRAM_MSE_MAX_FREQUENCY: _ClassVar[CalibrationOptions.CalibrationMethod]
        CALIBRATION_METHOD_HISTOGRAM_MSE_SYMMETRIC: _ClassVar[CalibrationOptions.CalibrationMethod]
    CALIBRATION_METHOD_UNSPECIFIED: CalibrationOptions.CalibrationMethod
    CALIBRATION_METHOD_MIN_MAX: CalibrationOptions.CalibrationMethod
    CALIBRATION_METHOD_AVERAGE_MIN_MAX: CalibrationOptions.CalibrationMethod
    CALIBRATION_METHOD_HISTOGRAM_PERCENTILE: CalibrationOptions.CalibrationMethod
    CALIBRATION_METHOD_HISTOGRAM_MSE_BRUTEFORCE: CalibrationOptions.CalibrationMethod
    CALIBRATION_METHOD_HISTOGRAM_MSE_MAX_FREQUENCY: CalibrationOptions.CalibrationMethod
    CALIBRATION_METHOD_HISTOGRAM_MSE_SYMMETRIC: CalibrationOptions.CalibrationMethod
    class CalibrationParameters(_message.Message):
        __slots__ = ("num_bins", "min_percentile", "max_percentile")
        NUM_BINS_FIELD_NUMBER: _ClassVar[int]
        MIN_PERCENTILE_FIELD_NUMBER: _ClassVar[int]
        MAX_PERCENTILE_FIELD_NUMBER: _ClassVar[int]
        num_bins: int
        min_percentile: float
        max_percentile: float
        def __init__(self, num_bins: _Optional[int] = ..., min_percentile: _Optional[float] = ..., max_percentile: _Optional[float] = ...) -> None: ...
    CALIBRATION_METHOD_FIELD_NUMBER: _ClassVar[int]
    CALIBRATION_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    REPRESENTATIVE_DATASETS_FIELD_NUMBER: _ClassVar[int]
    CALIBRATION_DATA_DIR_FIELD_NUMBER: _ClassVar[int]
    FORCE_REGENERATE_CALIBRATION_DATA_FIELD_NUMBER: _ClassVar[int]
    calibration_method: CalibrationOptions.CalibrationMethod
    calibration_parameters: CalibrationOptions.CalibrationParameters
    representative_datasets: _containers.RepeatedCompositeFieldContainer[RepresentativeDatasetConfig]
    calibration_data_dir: str
    force_regenerate_calibration_data: bool
    def __init__(self, calibration_method: _Optional[_Union[CalibrationOptions.CalibrationMethod, str]] = ..., calibration_parameters: _Optional[_Union[CalibrationOptions.CalibrationParameters, _Mapping]] = ..., representative_datasets: _Optional[_Iterable[_Union[RepresentativeDatasetConfig, _Mapping]]] = ..., calibration_data_dir: _Optional[str] = ..., force_regenerate_calibration_data: _Optional[bool] = ...) -> None: ...

class DebuggerConfig(_message.Message):
    __slots__ = ("debugger_type", "unquantized_dump_model_path", "log_dir_path")
    class DebuggerType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DEBUGGER_TYPE_UNSPECIFIED: _ClassVar[DebuggerConfig.DebuggerType]
        DEBUGGER_TYPE_WHOLE_MODEL: _ClassVar[DebuggerConfig.DebuggerType]
        DEBUGGER_TYPE_INT_PER_LAYER: _ClassVar[DebuggerConfig.DebuggerType]
        DEBUGGER_TYPE_FLOAT_PER_LAYER: _ClassVar[DebuggerConfig.DebuggerType]
    DEBUGGER_TYPE_UNSPECIFIED: DebuggerConfig.DebuggerType
    DEBUGGER_TYPE_WHOLE_MODEL: DebuggerConfig.DebuggerType
    DEBUGGER_TYPE_INT_PER_LAYER: DebuggerConfig.DebuggerType
    DEBUGGER_TYPE_FLOAT_PER_LAYER: DebuggerConfig.DebuggerType
    DEBUGGER_TYPE_FIELD_NUMBER: _ClassVar[int]
    UNQUANTIZED_DUMP_MODEL_PATH_FIELD_NUMBER: _ClassVar[int]
    LOG_DIR_PATH_FIELD_NUMBER: _ClassVar[int]
    debugger_type: DebuggerConfig.DebuggerType
    unquantized_dump_model_path: str
    log_dir_path: str
    def __init__(self, debugger_type: _Optional[_Union[DebuggerConfig.DebuggerType, str]] = ..., unquantized_dump_model_path: _Optional[str] = ..., log_dir_path: _Optional[str] = ...) -> None: ...
