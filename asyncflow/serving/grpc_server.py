"""TF Serving's gRPC API on grpc.aio: PredictionService and ModelService.

    tensorflow.serving.PredictionService/Predict            PredictRequest -> PredictResponse
    tensorflow.serving.PredictionService/Classify           ClassificationRequest -> ...Response
    tensorflow.serving.PredictionService/Regress            RegressionRequest -> ...Response
    tensorflow.serving.PredictionService/MultiInference     MultiInferenceRequest -> ...
    tensorflow.serving.PredictionService/GetModelMetadata   GetModelMetadataRequest -> ...
    tensorflow.serving.ModelService/GetModelStatus          GetModelStatusRequest -> ...

The messages are asyncflow.protos.serving's (TF Serving's message and field numbers), and
the method paths TF Serving's own, so TF Serving's generated clients talk to this server
unchanged.  The protobuf package of our messages is renamed (see asyncflow.protos), hence
the handlers are registered by hand under TF Serving's service names rather than through
protoc's grpc plugin, which would take the service name from the package.

Errors end the call with the gRPC status whose number is the TF error code (gRPC's codes
are TF's), and the message TF Serving words, as TF Serving's server does.

Every handler runs on the server's loop and awaits `ServableModel.predict`, like REST.
"""

from __future__ import annotations

import time

import grpc
import numpy as np

from asyncflow import errors, graph_io
from asyncflow.protos import types_pb2
from asyncflow.protos.serving import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_pb2,
    predict_pb2,
    regression_pb2,
)
from asyncflow.serving import rest
from asyncflow.serving.registry import ModelRegistry

__all__ = [
    "Inference",
    "PREDICTION_SERVICE",
    "MODEL_SERVICE",
    "SIGNATURE_DEF_MAP_TYPE_URL",
    "PredictionServiceStub",
    "ModelServiceStub",
    "add_services",
]

PREDICTION_SERVICE = "tensorflow.serving.PredictionService"
MODEL_SERVICE = "tensorflow.serving.ModelService"
# TF Serving's name for the metadata message, so its clients' Any.Unpack accepts ours.
SIGNATURE_DEF_MAP_TYPE_URL = "type.googleapis.com/tensorflow.serving.SignatureDefMap"

_GRPC_CODE = {code.value[0]: code for code in grpc.StatusCode}

_STATE_NUMBER = get_model_status_pb2.ModelVersionStatus.State.Value

_PREDICTION_METHODS = {
    "Classify": (
        classification_pb2.ClassificationRequest,
        classification_pb2.ClassificationResponse,
    ),
    "Regress": (regression_pb2.RegressionRequest, regression_pb2.RegressionResponse),
    "Predict": (predict_pb2.PredictRequest, predict_pb2.PredictResponse),
    "MultiInference": (
        inference_pb2.MultiInferenceRequest,
        inference_pb2.MultiInferenceResponse,
    ),
    "GetModelMetadata": (
        get_model_metadata_pb2.GetModelMetadataRequest,
        get_model_metadata_pb2.GetModelMetadataResponse,
    ),
}
_MODEL_METHODS = {
    "GetModelStatus": (
        get_model_status_pb2.GetModelStatusRequest,
        get_model_status_pb2.GetModelStatusResponse,
    ),
}


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def _spec(out: model_pb2.ModelSpec, name: str, version: int | None, signature: str) -> None:
    out.name = name
    if version is not None:
        out.version.value = version
    out.signature_name = signature


class Inference:
    """The inference RPC bodies on one loaded version (a ServableModel): request message
    in, response message out, OpErrors raised.  The gRPC services run them on the version
    the request's ModelSpec names; the warm-up (asyncflow.serving.warmup) on the version
    being loaded, whatever the request names."""

    def __init__(self, request_timeout_s: float | None = None):
        self.request_timeout_s = request_timeout_s

    async def predict(self, model, version, request: predict_pb2.PredictRequest):
        signature_name = request.model_spec.signature_name or model.default_signature
        signature = model._signature(signature_name)
        inputs = {}
        for key, proto in request.inputs.items():
            try:
                value = graph_io.tensor_from_proto(proto)
            except ValueError as e:
                raise _invalid(f"Input '{key}': {e}") from None
            tensor = signature.inputs.get(key)
            if tensor is not None and tensor.dtype.as_datatype_enum != proto.dtype:
                raise _invalid(
                    f"Expects arg '{key}' to be {_dtype_name(tensor.dtype.as_datatype_enum)} "
                    f"but {_dtype_name(proto.dtype)} is provided"
                )
            inputs[key] = value
        wanted = list(request.output_filter)
        for alias in wanted:
            if alias not in signature.outputs:
                raise _invalid(
                    f"output tensor alias not found in signature: {alias} Outputs expected "
                    f"to be in the set {{{','.join(sorted(signature.outputs))}}}."
                )
        outputs = await model.predict(inputs, signature_name, deadline_s=self.request_timeout_s)
        response = predict_pb2.PredictResponse()
        for alias in wanted or outputs:
            graph_io.tensor_proto(outputs[alias], response.outputs[alias])
        _spec(response.model_spec, request.model_spec.name, version, signature_name)
        return response

    async def _examples_call(self, model, request, verb: str):
        method = rest.CLASSIFY_METHOD_NAME if verb == "classify" else rest.REGRESS_METHOD_NAME
        signature_name = rest._method_signature(
            model, {"signature_name": request.model_spec.signature_name}, method, verb
        )
        examples = _serialized_examples(request.input)
        outputs = await model.predict(
            {"inputs": examples}, signature_name, deadline_s=self.request_timeout_s
        )
        return signature_name, outputs, len(examples)

    async def classify(self, model, version, request: classification_pb2.ClassificationRequest):
        signature_name, outputs, n = await self._examples_call(model, request, "classify")
        response = classification_pb2.ClassificationResponse()
        _classification(response.result, outputs, n)
        _spec(response.model_spec, request.model_spec.name, version, signature_name)
        return response

    async def regress(self, model, version, request: regression_pb2.RegressionRequest):
        signature_name, outputs, n = await self._examples_call(model, request, "regress")
        response = regression_pb2.RegressionResponse()
        _regression(response.result, outputs, n)
        _spec(response.model_spec, request.model_spec.name, version, signature_name)
        return response

    async def multi_inference(self, model, version, request):
        """Classify and regress tasks of one model over one input, as one step; the
        checks and messages are TF Serving's (servables/tensorflow/multi_inference.cc)."""
        if not request.tasks:
            raise _invalid("Missing ModelSpec")
        name = ""
        names, verbs = [], []
        for task in request.tasks:
            spec = task.model_spec
            if not spec.name:
                raise _invalid("Found ModelSpec with an empty model name.")
            if not name:
                name = spec.name
            elif spec.name != name:
                raise _invalid(
                    "All ModelSpecs in a MultiInferenceRequest must access the same model name."
                )
            signature_name = spec.signature_name or model.default_signature
            if signature_name in names:
                raise _invalid(f"Duplicate evaluation of signature: {signature_name}")
            if signature_name not in model.signatures:
                raise _invalid(f"Requested signature not found in model graph: {signature_name}")
            if task.method_name == rest.CLASSIFY_METHOD_NAME:
                verb = "classify"
            elif task.method_name == rest.REGRESS_METHOD_NAME:
                verb = "regress"
            else:
                raise errors.UnimplementedError(
                    None, None, f"Unsupported signature method_name: {task.method_name}"
                )
            method = {"signature_name": signature_name}
            rest._method_signature(model, method, task.method_name, verb)
            names.append(signature_name)
            verbs.append(verb)
        examples = _serialized_examples(request.input)
        results = await model.predict_signatures(
            names, {"inputs": examples}, deadline_s=self.request_timeout_s
        )
        response = inference_pb2.MultiInferenceResponse()
        for signature_name, verb, outputs in zip(names, verbs, results):
            result = response.results.add()
            if verb == "classify":
                _classification(result.classification_result, outputs, len(examples))
            else:
                _regression(result.regression_result, outputs, len(examples))
            _spec(result.model_spec, name, version, signature_name)
        return response


def _classification(out: classification_pb2.ClassificationResult, outputs, n: int) -> None:
    for row in rest.classify_results(outputs, n):
        classifications = out.classifications.add()
        for label, score in row:
            classifications.classes.add(label=label, score=score)


def _regression(out: regression_pb2.RegressionResult, outputs, n: int) -> None:
    for value in rest.regress_results(outputs, n):
        out.regressions.add(value=value)


class _Services:
    """The RPCs: the version a request names, from the registry, and its Inference body."""

    def __init__(self, registry: ModelRegistry, request_timeout_s: float | None):
        self.registry = registry
        self.inference = Inference(request_timeout_s)

    def _model(self, spec: model_pb2.ModelSpec):
        if not spec.name:
            raise _invalid("Missing ModelSpec")
        choice = spec.WhichOneof("version_choice")
        if choice == "version":
            return self.registry.get(spec.name, spec.version.value)
        if choice == "version_label":
            return self.registry.resolve(spec.name, label=spec.version_label)
        return self.registry.get(spec.name)

    async def Predict(self, request: predict_pb2.PredictRequest):
        version, model = self._model(request.model_spec)
        return await self.inference.predict(model, version, request)

    async def Classify(self, request: classification_pb2.ClassificationRequest):
        version, model = self._model(request.model_spec)
        return await self.inference.classify(model, version, request)

    async def Regress(self, request: regression_pb2.RegressionRequest):
        version, model = self._model(request.model_spec)
        return await self.inference.regress(model, version, request)

    async def MultiInference(self, request: inference_pb2.MultiInferenceRequest):
        # The version is the first task's (TF Serving's multi_inference_helper.cc).
        version, model = self._model(_first_spec(request))
        return await self.inference.multi_inference(model, version, request)

    async def GetModelMetadata(self, request: get_model_metadata_pb2.GetModelMetadataRequest):
        if not request.metadata_field:
            raise _invalid("GetModelMetadataRequest must specify at least one metadata_field")
        for field in request.metadata_field:
            if field != "signature_def":
                raise _invalid(f"Metadata field {field} is not supported")
        version, model = self._model(request.model_spec)
        signature_defs = get_model_metadata_pb2.SignatureDefMap()
        for key, sd in getattr(model.meta_graph, "signature_def", {}).items():
            signature_defs.signature_def[key].CopyFrom(sd)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        packed = response.metadata["signature_def"]
        packed.type_url = SIGNATURE_DEF_MAP_TYPE_URL
        packed.value = signature_defs.SerializeToString()
        response.model_spec.name = request.model_spec.name
        response.model_spec.version.value = version
        return response

    async def GetModelStatus(self, request: get_model_status_pb2.GetModelStatusRequest):
        spec = request.model_spec
        if not spec.name:
            raise _invalid("Missing ModelSpec")
        choice = spec.WhichOneof("version_choice")
        version = None
        if choice == "version":
            version = spec.version.value
        elif choice == "version_label":
            version = self.registry.label_version(spec.name, spec.version_label)
        response = get_model_status_pb2.GetModelStatusResponse()
        for v, state, err in self.registry.status(spec.name, version):
            entry = response.model_version_status.add(version=v, state=_STATE_NUMBER(state))
            entry.status.SetInParent()  # error_code OK, as TF Serving sends it
            if err is not None:
                entry.status.error_code = err.error_code
                entry.status.error_message = err.message
        return response


def _dtype_name(enum: int) -> str:
    """TF's DataTypeString: DT_FLOAT -> "float"."""
    try:
        return types_pb2.DataType.Name(enum).removeprefix("DT_").lower()
    except ValueError:
        return f"DataType({enum})"


def _serialized_examples(input_message) -> np.ndarray:
    """The request's examples (context merged into each, an example's own features
    winning) as serialized tf.Examples: a 1-D object array."""
    kind = input_message.WhichOneof("kind")
    if kind == "example_list":
        serialized = [e.SerializeToString() for e in input_message.example_list.examples]
    elif kind == "example_list_with_context":
        lists = input_message.example_list_with_context
        context = lists.context.SerializeToString()
        # Concatenated serializations parse as a merge: later map entries win.
        serialized = [context + e.SerializeToString() for e in lists.examples]
    else:
        raise _invalid("Input is empty")
    if not serialized:
        raise _invalid("Input is empty")
    return np.array(serialized, dtype=object)


async def _abort(context, error: Exception):
    if isinstance(error, errors.OpError):
        await context.abort(
            _GRPC_CODE.get(error.error_code, grpc.StatusCode.UNKNOWN), error.message
        )
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))


_ERRORS = (errors.OpError, ValueError, TypeError)


def _handler(body, request_cls, response_cls, metrics=None, api=None):
    async def call(request, context: grpc.aio.ServicerContext):
        try:
            return await body(request)
        except _ERRORS as e:
            await _abort(context, e)

    async def measured_call(request, context: grpc.aio.ServicerContext):
        start = time.perf_counter()
        error = None
        try:
            return await body(request)
        except _ERRORS as e:
            error = e
            await _abort(context, e)
        finally:
            spec = _first_spec(request) if api == "MultiInference" else request.model_spec
            version = spec.version.value if spec.HasField("version") else None
            metrics.record(spec.name, version, api, "GRPC", error, time.perf_counter() - start)

    return grpc.unary_unary_rpc_method_handler(
        call if metrics is None or api not in _MEASURED else measured_call,
        request_deserializer=request_cls.FromString,
        response_serializer=response_cls.SerializeToString,
    )


_MEASURED = ("Predict", "Classify", "Regress", "MultiInference")


def _first_spec(request: inference_pb2.MultiInferenceRequest) -> model_pb2.ModelSpec:
    return request.tasks[0].model_spec if request.tasks else model_pb2.ModelSpec()


def add_services(
    server: grpc.aio.Server,
    registry: ModelRegistry,
    request_timeout_s: float | None = None,
    metrics=None,
) -> None:
    """Serve PredictionService and ModelService for `registry` on `server`; with
    `metrics` (asyncflow.serving.metrics.ServingMetrics) inference calls are recorded."""
    services = _Services(registry, request_timeout_s)
    for service, methods in ((PREDICTION_SERVICE, _PREDICTION_METHODS),
                             (MODEL_SERVICE, _MODEL_METHODS)):  # fmt: skip
        handlers = {
            name: _handler(getattr(services, name), req, resp, metrics, name)
            for name, (req, resp) in methods.items()
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))


class _Stub:
    _service = ""
    _methods: dict = {}

    def __init__(self, channel):
        for name, (req, resp) in self._methods.items():
            setattr(
                self,
                name,
                channel.unary_unary(
                    f"/{self._service}/{name}",
                    request_serializer=req.SerializeToString,
                    response_deserializer=resp.FromString,
                ),
            )


class PredictionServiceStub(_Stub):
    """A client: `await PredictionServiceStub(grpc.aio.insecure_channel(...)).Predict(req)`."""

    _service = PREDICTION_SERVICE
    _methods = _PREDICTION_METHODS


class ModelServiceStub(_Stub):
    """A client of ModelService (GetModelStatus)."""

    _service = MODEL_SERVICE
    _methods = _MODEL_METHODS
