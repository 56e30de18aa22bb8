from asyncflow.protos.serving import classification_pb2 as _classification_pb2
from asyncflow.protos.serving import input_pb2 as _input_pb2
from asyncflow.protos.serving import model_pb2 as _model_pb2
from asyncflow.protos.serving import regression_pb2 as _regression_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class InferenceTask(_message.Message):
    __slots__ = ("model_spec", "method_name")
    MODEL_SPEC_FIELD_NUMBER: _ClassVar[int]
    METHOD_NAME_FIELD_NUMBER: _ClassVar[int]
    model_spec: _model_pb2.ModelSpec
    method_name: str
    def __init__(self, model_spec: _Optional[_Union[_model_pb2.ModelSpec, _Mapping]] = ..., method_name: _Optional[str] = ...) -> None: ...

class InferenceResult(_message.Message):
    __slots__ = ("model_spec", "classification_result", "regression_result")
    MODEL_SPEC_FIELD_NUMBER: _ClassVar[int]
    CLASSIFICATION_RESULT_FIELD_NUMBER: _ClassVar[int]
    REGRESSION_RESULT_FIELD_NUMBER: _ClassVar[int]
    model_spec: _model_pb2.ModelSpec
    classification_result: _classification_pb2.ClassificationResult
    regression_result: _regression_pb2.RegressionResult
    def __init__(self, model_spec: _Optional[_Union[_model_pb2.ModelSpec, _Mapping]] = ..., classification_result: _Optional[_Union[_classification_pb2.ClassificationResult, _Mapping]] = ..., regression_result: _Optional[_Union[_regression_pb2.RegressionResult, _Mapping]] = ...) -> None: ...

class MultiInferenceRequest(_message.Message):
    __slots__ = ("tasks", "input")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[InferenceTask]
    input: _input_pb2.Input
    def __init__(self, tasks: _Optional[_Iterable[_Union[InferenceTask, _Mapping]]] = ..., input: _Optional[_Union[_input_pb2.Input, _Mapping]] = ...) -> None: ...

class MultiInferenceResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[InferenceResult]
    def __init__(self, results: _Optional[_Iterable[_Union[InferenceResult, _Mapping]]] = ...) -> None: ...
