"""TF Serving's REST API on aiohttp: status, metadata, predict (row and column form).

URLs (tensorflow_model_server's):

    GET  /v1/models/M[/versions/V]            model status  (/labels/L for /versions/V)
    GET  /v1/models/M[/versions/V]/metadata   signature defs
    POST /v1/models/M[/versions/V]:predict    {"instances": [...]} or {"inputs": ...}
    POST /v1/models/M[/versions/V]:classify   {"examples": [{feature: value}], "context": ...}
    POST /v1/models/M[/versions/V]:regress    (the same) -> {"result": [...]}

Responses and errors are TF Serving's JSON: `{"predictions": ...}` (row form: one entry
per instance, an object per instance when the signature has several outputs),
`{"outputs": ...}` (column form), `{"error": "..."}` with the HTTP status TF Serving maps
the error code to (400 InvalidArgument, 404 NotFound, 503 Unavailable, 504 Deadline...).
NaN and infinities are written as the NaN / Infinity / -Infinity tokens, as TF Serving's
writer does.  Bodies over `max_body_bytes` get 413, JSON nested deeper than `max_depth`
(or unparsable) gets 400; neither drops the connection.

Every predict runs `await model.predict(...)` (Session.arun) on the server's own loop.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import Mapping

import numpy as np
import orjson
from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11
from google.protobuf import json_format

from asyncflow import errors
from asyncflow.protos import error_codes_pb2
from asyncflow.serving import metrics as _metrics
from asyncflow.serving.registry import ModelRegistry

__all__ = ["ModelRegistry", "make_app", "make_handler", "make_server", "HTTP_STATUS"]

_code_name = error_codes_pb2.Code.Name  # 5 -> "NOT_FOUND"

# tensorflow_serving's ToHTTPStatusCode: canonical error code -> HTTP status.
HTTP_STATUS = {
    errors.CANCELLED: 499,
    errors.UNKNOWN: 500,
    errors.INVALID_ARGUMENT: 400,
    errors.DEADLINE_EXCEEDED: 504,
    errors.NOT_FOUND: 404,
    errors.ALREADY_EXISTS: 409,
    errors.PERMISSION_DENIED: 403,
    errors.RESOURCE_EXHAUSTED: 429,
    errors.FAILED_PRECONDITION: 400,
    errors.ABORTED: 409,
    errors.OUT_OF_RANGE: 400,
    errors.UNIMPLEMENTED: 501,
    errors.INTERNAL: 500,
    errors.UNAVAILABLE: 503,
    errors.DATA_LOSS: 500,
    errors.UNAUTHENTICATED: 401,
}

DEFAULT_MAX_BODY_BYTES = 64 << 20
DEFAULT_MAX_DEPTH = 64

_MODEL_URL = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
    r"(?:(?P<metadata>/metadata)|:(?P<verb>predict|classify|regress))?$"
)


_UNPARSED = object()
_MAX_ROUTES = 1024


def _route(path: str):
    """(name, version, label, metadata, verb) of a model URL's path (None: not one)."""
    match = _MODEL_URL.match(path)
    if match is None:
        return None
    return match["name"], match["version"], match["label"], match["metadata"], match["verb"]


# -- JSON -----------------------------------------------------------------------------------


def _json_response(payload, status: int = 200, outputs: Mapping | None = None) -> web.Response:
    """`payload` (builtins and NumPy arrays) as a JSON response.

    orjson writes arrays straight from their buffers (float32 at float32's shortest
    round-trip repr: 0.1, not 0.10000000149011612), ~15x faster than json + tolist().
    It writes NaN and infinities as null, so when `outputs` (the model outputs the
    payload holds) have any, the json module writes the payload instead: its allow_nan
    writes the NaN / Infinity / -Infinity tokens TF Serving writes.  (Only a body with
    a null can have one: looking for it costs less than checking every value.)
    """
    body = None
    try:
        body = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:  # a dtype orjson does not write (bfloat16, complex, ...)
        pass
    else:
        if outputs is not None and b"null" in body and _nonfinite(outputs):
            body = None
    if body is None:
        body = json.dumps(payload, allow_nan=True, default=_builtin).encode()
    return web.Response(body=body, status=status, content_type="application/json")


def _builtin(value):
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _nonfinite(outputs: Mapping) -> bool:
    """Whether any float output holds NaN or an infinity."""
    for value in outputs.values():
        if value.dtype.kind in "fc" and not np.isfinite(value).all():
            return True
    return False


def _error_response(exc: BaseException) -> web.Response:
    if isinstance(exc, errors.OpError):
        status = HTTP_STATUS.get(exc.error_code, 500)
        message = exc.message
    else:
        status, message = 500, f"{type(exc).__name__}: {exc}"
    return _json_response({"error": message}, status)


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def _json_depth_ok(body: bytes, max_depth: int) -> bool:
    """Whether `body`'s brackets nest at most `max_depth` deep (strings ignored)."""
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return True
    stripped = re.sub(rb'"(?:[^"\\]|\\.)*"', b"", body)
    a = np.frombuffer(stripped, dtype=np.uint8)
    steps = (a == ord("[")).astype(np.int32) + (a == ord("{"))
    steps -= (a == ord("]")).astype(np.int32) + (a == ord("}"))
    return not steps.size or int(np.cumsum(steps).max()) <= max_depth


def parse_body(body: bytes, max_depth: int = DEFAULT_MAX_DEPTH):
    """The request's JSON object; InvalidArgumentError for bad or too deeply nested JSON."""
    if not _json_depth_ok(body, max_depth):
        raise _invalid(f"JSON Parse error: nesting deeper than {max_depth} levels")
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        # NaN / Infinity tokens (TF Serving accepts them), integers past 64 bits: the
        # json module parses those, and words the errors of really bad JSON.
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
            raise _invalid(f"JSON Parse error: {e}") from None
    if not isinstance(doc, dict):
        raise _invalid("JSON Value: is not an object")
    return doc


def _decode_b64(value):
    """Nested lists with {"b64": "..."} objects -> nested lists with bytes."""
    if isinstance(value, dict):
        if set(value) != {"b64"} or not isinstance(value["b64"], str):
            raise _invalid('JSON Value: is not a string or a {"b64": ...} object')
        try:
            return base64.b64decode(value["b64"], validate=True)
        except ValueError as e:
            raise _invalid(f"Unable to base64 decode: {e}") from None
    if isinstance(value, list):
        return [_decode_b64(v) for v in value]
    if isinstance(value, str):
        return value.encode()
    return value


def _to_array(value, tensor, name: str) -> np.ndarray:
    dtype = tensor.dtype
    try:
        if dtype.name == "string":
            arr = np.array(_decode_b64(value), dtype=object)
        else:
            arr = np.asarray(value, dtype=dtype.as_numpy_dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise _invalid(
            f"Failed to process element: {name} of 'instances' list. JSON value: "
            f"cannot be converted to {dtype.name}: {e}"
        ) from None
    if arr.dtype == object and dtype.name != "string":
        raise _invalid(f"Input '{name}' is a ragged list; all rows must have the same shape")
    return arr


def _row_inputs(instances, signature) -> dict:
    if not isinstance(instances, list):
        raise _invalid("Expecting 'instances' to be an list/array")
    if not instances:
        raise _invalid("No instances in the request")
    names = list(signature.inputs)
    named = isinstance(instances[0], dict) and not (
        len(names) == 1 and set(instances[0]) == {"b64"}
    )
    if not named:
        if len(names) != 1:
            raise _invalid(
                "Expecting object but got list at item 0 of input list. The signature has "
                f"{len(names)} inputs: name each input in every instance"
            )
        return {names[0]: _to_array(instances, signature.inputs[names[0]], names[0])}
    keys = set(instances[0])
    columns = {k: [] for k in instances[0]}
    for i, inst in enumerate(instances):
        if not isinstance(inst, dict) or set(inst) != keys:
            raise _invalid(
                f"Failed to process element: {i} of 'instances' list. JSON object: does not "
                "have named input(s) the first instance has"
            )
        for k, v in inst.items():
            columns[k].append(v)
    return {
        k: _to_array(v, signature.inputs[k], k) if k in signature.inputs else v
        for k, v in columns.items()
    }


def _column_inputs(inputs, signature) -> dict:
    names = list(signature.inputs)
    if isinstance(inputs, dict) and not (len(names) == 1 and set(inputs) == {"b64"}):
        return {
            k: _to_array(v, signature.inputs[k], k) if k in signature.inputs else v
            for k, v in inputs.items()
        }
    if len(names) != 1:
        raise _invalid(
            f"The signature has {len(names)} inputs: 'inputs' must be an object naming each"
        )
    return {names[0]: _to_array(inputs, signature.inputs[names[0]], names[0])}


def _jsonable(name: str, arr) -> object:
    if type(arr) is not np.ndarray:
        arr = np.asarray(arr)
    if arr.dtype == object or arr.dtype.kind in "SU":
        as_b64 = name.endswith("_bytes")

        def conv(v):
            if isinstance(v, list):
                return [conv(x) for x in v]
            if isinstance(v, bytes):
                if as_b64:
                    return {"b64": base64.b64encode(v).decode()}
                return v.decode("utf-8", "replace")
            return v

        return conv(arr.tolist())
    if arr.dtype.kind == "c":
        return arr.tolist()  # (complex: not JSON; the json fallback reports it)
    return np.ascontiguousarray(arr)  # written by orjson (or tolist() in _builtin)


def predictions_row(outputs: Mapping) -> list:
    """TF Serving's row-form result: per instance, a value (one output) or an object."""
    if len(outputs) == 1:
        ((name, value),) = outputs.items()
        return _jsonable(name, value)
    batch = None
    lists = {}
    for name, value in outputs.items():
        value = np.asarray(value)
        n = value.shape[0] if value.ndim else None
        if n is None or (batch is not None and n != batch):
            raise _invalid(
                f"Tensor name: {name} has inconsistent batch size: {n} expecting: {batch}"
            )
        batch = n
        lists[name] = _jsonable(name, value)
    return [{name: lists[name][i] for name in lists} for i in range(batch)]  # (i: a row)


def outputs_column(outputs: Mapping):
    if len(outputs) == 1:
        ((name, value),) = outputs.items()
        return _jsonable(name, value)
    return {name: _jsonable(name, value) for name, value in outputs.items()}


def metadata_json(name: str, version: int, model) -> dict:
    """GetModelMetadataResponse as TF Serving prints it (proto field names, zero values)."""
    defs = {}
    mg = model.meta_graph
    for key, sd in getattr(mg, "signature_def", {}).items():
        defs[key] = json_format.MessageToDict(
            sd, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
    return {
        "model_spec": {"name": name, "signature_name": "", "version": str(version)},
        "metadata": {"signature_def": {"signature_def": defs}},
    }


# -- classify and regress (tf.Example inputs) ------------------------------------------------

CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"
REGRESS_METHOD_NAME = "tensorflow/serving/regress"


def _feature(name: str, value):
    """A JSON feature value -> tf.train.Feature: ints -> int64_list, numbers with a
    fraction -> float_list, strings and {"b64": ...} -> bytes_list."""
    from asyncflow import example_pb

    values = value if isinstance(value, list) else [value]
    feature = example_pb.Feature()
    if not values:
        feature.float_list.SetInParent()
        return feature
    if all(isinstance(v, (str, dict)) for v in values):
        feature.bytes_list.value.extend(_decode_b64(values))
    elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        feature.int64_list.value.extend(values)
    elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        feature.float_list.value.extend(values)
    else:
        raise _invalid(f"Feature '{name}': values must all be numbers or all strings")
    return feature


def serialized_examples(doc: dict) -> np.ndarray:
    """The request's `examples` (with `context` merged into each) as serialized
    tf.Examples: a 1-D object array, what a classify/regress signature's input takes."""
    from asyncflow import example_pb

    examples = doc.get("examples")
    if not isinstance(examples, list) or not examples:
        raise _invalid("'examples' must be a non-empty list of objects")
    context = doc.get("context", {})
    if not isinstance(context, dict):
        raise _invalid("'context' must be an object")
    out = []
    for i, ex in enumerate(examples):
        if not isinstance(ex, dict):
            raise _invalid(f"Failed to process element: {i} of 'examples' list: not an object")
        example = example_pb.Example()
        for name, value in {**context, **ex}.items():
            example.features.feature[name].CopyFrom(_feature(name, value))
        out.append(example.SerializeToString())
    return np.array(out, dtype=object)


def _method_signature(model, doc, method: str, verb: str):
    name = doc.get("signature_name") or model.default_signature
    if not isinstance(name, str):
        raise _invalid("'signature_name' must be a string")
    signature = model._signature(name)
    if signature.method_name != method:
        kind = "classification" if verb == "classify" else "regression"
        raise _invalid(
            f"Expected {kind} signature method_name to be {method}. Was: {signature.method_name}"
        )
    if list(signature.inputs) != ["inputs"]:
        raise _invalid(f"Expected one input Tensor named 'inputs' in signature {name}")
    return name


def classify_results(outputs: Mapping, batch: int) -> list:
    """Per example, [[label, score], ...] as TF Serving writes ClassificationResult."""
    classes = outputs.get("classes")
    scores = outputs.get("scores")
    ref = classes if classes is not None else scores
    ref = np.asarray(ref)
    if ref.ndim != 2 or ref.shape[0] != batch:
        raise _invalid(
            f"Expected classes/scores Tensor of shape [{batch}, num_classes], got {ref.shape}"
        )
    if classes is not None and scores is not None and np.shape(scores) != np.shape(classes):
        raise _invalid("Tensors class and score should match in shape")
    results = []
    for i in range(batch):
        row = []
        for j in range(ref.shape[1]):
            label = classes[i][j] if classes is not None else b""
            if isinstance(label, bytes):
                label = label.decode("utf-8", "replace")
            score = float(scores[i][j]) if scores is not None else 0.0
            row.append([label, score])
        results.append(row)
    return results


def regress_results(outputs: Mapping, batch: int) -> list:
    values = np.asarray(outputs["outputs"])
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.shape != (batch,):
        raise _invalid(
            f"Expected output Tensor shape to be either [batch_size] or [batch_size, 1] "
            f"but got {list(np.shape(outputs['outputs']))}"
        )
    return values.astype(np.float64).tolist()


# -- the application ------------------------------------------------------------------------


_API = {"predict": "Predict", "classify": "Classify", "regress": "Regress"}


def make_app(
    registry: ModelRegistry,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    request_timeout_s: float | None = None,
    metrics=None,
    metrics_path: str | None = None,
) -> web.Application:
    """An aiohttp Application answering TF Serving's REST API for `registry`'s models
    (to mount in a service's own Application; `make_server` is the model server's).

    With `metrics` (asyncflow.serving.metrics.ServingMetrics) inference requests are
    counted and timed, and `metrics_path` (when given) answers Prometheus' scrapes.
    """
    dispatch = make_handler(
        registry,
        max_body_bytes=max_body_bytes,
        max_depth=max_depth,
        request_timeout_s=request_timeout_s,
        metrics=metrics,
        metrics_path=metrics_path,
    )
    app = web.Application(client_max_size=max_body_bytes)
    app.router.add_route("*", "/{tail:.*}", dispatch)
    return app


def make_server(
    registry: ModelRegistry,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    idle_timeout_s: float = 75.0,
    **options,
) -> web.Server:
    """`make_app`'s API on aiohttp's low-level `web.Server` (serve it with
    `web.ServerRunner`); `options` are make_app's others.

    The handler parses TF Serving's URLs itself, so an Application's router, match
    info and middleware chain would only add their cost to every request.  What the
    Application did for the handler is done here: the body limit (413 from
    `request.read()`) and the answer to `Expect: 100-continue` (curl sends it before
    bodies over 1 KiB).
    """
    handle = make_handler(registry, max_body_bytes=max_body_bytes, _expect=True, **options)
    loop = asyncio.get_running_loop()

    def request_factory(message, payload, protocol, writer, task) -> web.BaseRequest:
        return web.BaseRequest(
            message, payload, protocol, writer, task, loop, client_max_size=max_body_bytes
        )

    return web.Server(
        handle,
        request_factory=request_factory,
        keepalive_timeout=idle_timeout_s,  # closes connections idle between requests
        access_log=None,
    )


def make_handler(
    registry: ModelRegistry,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    request_timeout_s: float | None = None,
    metrics=None,
    metrics_path: str | None = None,
    _expect: bool = False,
):
    """The request handler of `make_app` and `make_server`: `await handler(request)`.
    (`_expect`: it answers `Expect: 100-continue` itself, as an Application would.)"""

    routes: dict = {}  # URL path -> `_route(path)`: clients repeat a few paths

    async def dispatch(request: web.Request) -> web.Response:
        if _expect and request.headers.get(hdrs.EXPECT):
            expect = request.headers[hdrs.EXPECT]
            if request.version == HttpVersion11:
                if expect.lower() != "100-continue":
                    return _json_response({"error": f"Unknown Expect: {expect}"}, 417)
                await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                request.writer.output_size = 0  # (the response proper starts after it)
        path = request.path
        if path == metrics_path and request.method == "GET":
            return web.Response(
                body=metrics.exposition(), headers={"Content-Type": _metrics.CONTENT_TYPE}
            )
        route = routes.get(path, _UNPARSED)
        if route is _UNPARSED:
            route = _route(path)
            if len(path) <= 256:  # (bounded: a client may send any paths)
                if len(routes) >= _MAX_ROUTES:
                    routes.clear()
                routes[path] = route
        try:
            if route is None:
                raise _invalid(f"Malformed request: {request.method} {path}")
            name, version, label, metadata, verb = route
            if label is not None:
                version = str(registry.label_version(name, label))
            if version is not None:
                try:
                    version = int(version)
                except ValueError:
                    raise _invalid(f"Malformed request: {request.method} {path}") from None
            if verb is None:
                if request.method != "GET":
                    raise _invalid(f"Malformed request: {request.method} {path}")
                if metadata:
                    version, model = registry.get(name, version)
                    return _json_response(metadata_json(name, version, model))
                return _json_response(_status(name, version))
            if request.method != "POST":
                raise _invalid(f"Malformed request: {request.method} {path}")
            content = request.content
            if content.is_eof():  # all of it here already (most requests): no await
                body = content.read_nowait()
                too_large = len(body) > max_body_bytes
            else:
                try:
                    body = await request.read()
                    too_large = False
                except web.HTTPRequestEntityTooLarge:
                    too_large = True
            if too_large:
                return _json_response(
                    {"error": f"Request body larger than {max_body_bytes} bytes"}, 413
                )
            # Resolved after the body is read: no await between get() and the predict
            # that counts the request in flight, so a version being unloaded is either
            # not handed out or drained after this request (registry's invariant).
            if metrics is None:
                version, model = registry.get(name, version)
                if verb == "predict":
                    return await _predict(model, body)
                return _json_response(await _classify_regress(model, body, verb))
            return await _measured(name, version, verb, body)
        except Exception as e:  # every error answers TF Serving's JSON body
            return _error_response(e)

    async def _measured(name, version, verb, body) -> web.Response:
        start = time.perf_counter()
        error = None
        try:
            version, model = registry.get(name, version)
            if verb == "predict":
                return await _predict(model, body)
            return _json_response(await _classify_regress(model, body, verb))
        except Exception as e:
            error = e
            return _error_response(e)
        finally:
            metrics.record(name, version, _API[verb], "REST", error, time.perf_counter() - start)

    def _status(name, version):
        return {
            "model_version_status": [
                {
                    "version": str(v),
                    "state": state,
                    "status": {
                        "error_code": "OK" if err is None else _code_name(err.error_code),
                        "error_message": "" if err is None else err.message,
                    },
                }
                for v, state, err in registry.status(name, version)
            ]
        }

    async def _predict(model, body: bytes) -> web.Response:
        doc = parse_body(body, max_depth)
        signature_name = doc.get("signature_name") or model.default_signature
        if not isinstance(signature_name, str):
            raise _invalid("'signature_name' must be a string")
        signature = model._signature(signature_name)
        if "instances" in doc and "inputs" in doc:
            raise _invalid("Not both 'instances' and 'inputs' may be specified")
        if "instances" in doc:
            row = True
            inputs = _row_inputs(doc["instances"], signature)
        elif "inputs" in doc:
            row = False
            inputs = _column_inputs(doc["inputs"], signature)
        else:
            raise _invalid("Missing 'inputs' or 'instances' key")
        outputs = await model.predict(inputs, signature_name, deadline_s=request_timeout_s)
        if row:
            payload = {"predictions": predictions_row(outputs)}
        else:
            payload = {"outputs": outputs_column(outputs)}
        return _json_response(payload, outputs=outputs)

    async def _classify_regress(model, body: bytes, verb: str) -> dict:
        doc = parse_body(body, max_depth)
        method = CLASSIFY_METHOD_NAME if verb == "classify" else REGRESS_METHOD_NAME
        signature_name = _method_signature(model, doc, method, verb)
        examples = serialized_examples(doc)
        outputs = await model.predict(
            {"inputs": examples}, signature_name, deadline_s=request_timeout_s
        )
        if verb == "classify":
            return {"result": classify_results(outputs, len(examples))}
        return {"result": regress_results(outputs, len(examples))}

    return dispatch
