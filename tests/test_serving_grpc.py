"""asyncflow.serving's TF Serving gRPC API (grpc.aio), against an in-process server.

The requests are TF Serving's own: their bytes were serialized by tensorflow-serving-api's
generated code (tests/fixtures/record_serving_grpc_tf.py) and are sent as they are, so a
field number of ours that differed from TF Serving's would show.  The same server also
answers REST; every gRPC answer is compared with the REST answer and with NumPy.
"""

import asyncio
import base64
import json
import os

import grpc
import numpy as np
import pytest
from aiohttp import ClientSession
from test_serving_rest import WC, X, _ref, _softmax, base_path  # noqa: F401 (fixture)

import asyncflow as af
from asyncflow import errors, graph_io
from asyncflow.protos.serving import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    predict_pb2,
    regression_pb2,
)
from asyncflow.serving import grpc_server, rest, server
from asyncflow.serving.model import Signature
from asyncflow.serving.registry import ModelRegistry

FIXTURE = json.load(
    open(os.path.join(os.path.dirname(__file__), "fixtures", "serving_grpc_tf.json"))
)
RESPONSES = {
    "PredictionService/Predict": predict_pb2.PredictResponse,
    "PredictionService/Classify": classification_pb2.ClassificationResponse,
    "PredictionService/Regress": regression_pb2.RegressionResponse,
    "PredictionService/MultiInference": inference_pb2.MultiInferenceResponse,
    "PredictionService/GetModelMetadata": get_model_metadata_pb2.GetModelMetadataResponse,
    "ModelService/GetModelStatus": get_model_status_pb2.GetModelStatusResponse,
}


@pytest.fixture
async def servers(base_path):  # noqa: F811
    registry = ModelRegistry()
    for version in (1, 2):
        await server.load_version(registry, "m", base_path, version)
    registry.set_labels("m", {"stable": 1})
    srv = server.ModelServer(registry, host="127.0.0.1", port=0, grpc_port=0)
    await srv.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}")
    async with ClientSession() as http:
        yield srv, channel, http
    await channel.close()
    await srv.aclose()


async def _tf_request(channel, key):
    """Send TF Serving's recorded request bytes; our message parsed from the reply."""
    method, payload = FIXTURE["requests"][key]
    call = channel.unary_unary(f"/tensorflow.serving.{method}")  # bytes in, bytes out
    reply = await asyncio.wait_for(call(base64.b64decode(payload)), 30)
    return RESPONSES[method].FromString(reply)


async def _rest(http, srv, path, doc=None):
    url = f"http://127.0.0.1:{srv.port}/v1/models/{path}"
    if doc is None:
        async with http.get(url) as r:
            return r.status, await r.json()
    async with http.post(url, json=doc) as r:
        return r.status, await r.json()


def _array(proto):
    return graph_io.tensor_from_proto(proto)


async def test_predict_equals_rest_and_numpy(servers):
    srv, channel, http = servers
    response = await _tf_request(channel, "predict_latest")
    got = _array(response.outputs["y"])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _ref(X, 2), rtol=1e-6)
    assert response.model_spec.name == "m"
    assert response.model_spec.version.value == 2
    assert response.model_spec.signature_name == "serving_default"
    status, body = await _rest(http, srv, "m:predict", {"instances": X})
    assert status == 200
    np.testing.assert_array_equal(got, np.asarray(body["predictions"], np.float32))

    response = await _tf_request(channel, "predict_version_1")
    np.testing.assert_allclose(_array(response.outputs["y"]), _ref(X, 1), rtol=1e-6)
    assert response.model_spec.version.value == 1


async def test_predict_output_filter_and_strings(servers):
    srv, channel, http = servers
    response = await _tf_request(channel, "predict_multi_filtered")
    assert list(response.outputs) == ["prod"]
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    c = np.array([[0.5, 1.0], [2.0, -1.0]], np.float32)
    np.testing.assert_array_equal(_array(response.outputs["prod"]), a * c)
    status, body = await _rest(
        http,
        srv,
        "m:predict",
        {"signature_name": "multi", "inputs": {"a": a.tolist(), "c": c.tolist()}},
    )
    np.testing.assert_array_equal(_array(response.outputs["prod"]), body["outputs"]["prod"])

    response = await _tf_request(channel, "predict_strings")
    assert _array(response.outputs["s_bytes"]).tolist() == [b"ab", b"\x00\xff"]


async def test_classify_equals_rest(servers):
    srv, channel, http = servers
    response = await _tf_request(channel, "classify")
    rows = response.result.classifications
    assert [[c.label for c in row.classes] for row in rows] == [["a", "b", "c"]] * 2
    xs = np.array([[1.0, 2.0], [3.0, 0.5]], np.float32)
    scores = [[c.score for c in row.classes] for row in rows]
    np.testing.assert_allclose(scores, _softmax(xs @ WC), rtol=1e-5)
    assert response.model_spec.signature_name == "classify"
    status, body = await _rest(
        http,
        srv,
        "m:classify",
        {"signature_name": "classify", "examples": [{"x": x} for x in xs.tolist()]},
    )
    np.testing.assert_allclose(scores, [[s for _, s in row] for row in body["result"]], rtol=1e-6)


async def test_regress_with_label_and_context_equals_rest(servers):
    srv, channel, http = servers
    response = await _tf_request(channel, "regress_label_with_context")
    values = [r.value for r in response.result.regressions]
    # context k=10 for the first example; the second's own k=-4 wins over the context's.
    assert values == [1 * 2 + 2 + 10, 3 * 2 + 0.5 - 4]
    assert response.model_spec.version.value == 1
    status, body = await _rest(
        http,
        srv,
        "m/labels/stable:regress",
        {
            "signature_name": "regress",
            "context": {"k": 10},
            "examples": [{"x": [1.0, 2.0]}, {"x": [3.0, 0.5], "k": [-4]}],
        },
    )
    assert body["result"] == values


async def test_metadata_packs_tf_servings_signature_def_map(servers):
    srv, channel, http = servers
    response = await _tf_request(channel, "metadata")
    packed = response.metadata["signature_def"]
    assert packed.type_url == FIXTURE["responses"]["metadata_type_url"]
    defs = get_model_metadata_pb2.SignatureDefMap.FromString(packed.value).signature_def
    status, body = await _rest(http, srv, "m/metadata")
    rest_defs = body["metadata"]["signature_def"]["signature_def"]
    assert set(defs) == set(rest_defs)
    for key, sd in defs.items():
        assert sd.method_name == rest_defs[key]["method_name"]
        assert {k: v.name for k, v in sd.inputs.items()} == {
            k: v["name"] for k, v in rest_defs[key]["inputs"].items()
        }
    assert response.model_spec.version.value == 2


async def test_model_status(servers):
    srv, channel, http = servers
    response = await _tf_request(channel, "status")
    got = [(s.version, s.state, s.status.error_code) for s in response.model_version_status]
    available = get_model_status_pb2.ModelVersionStatus.AVAILABLE
    assert got == [(2, available, 0), (1, available, 0)]
    status, body = await _rest(http, srv, "m")
    assert [int(s["version"]) for s in body["model_version_status"]] == [2, 1]


def test_tf_servings_responses_parse_with_our_messages():
    r = FIXTURE["responses"]
    p = predict_pb2.PredictResponse.FromString(base64.b64decode(r["predict"]))
    assert (p.model_spec.name, p.model_spec.version.value) == ("m", 2)
    assert p.model_spec.signature_name == "serving_default"
    np.testing.assert_array_equal(_array(p.outputs["y"]), np.array([[1.5, -2.5]], np.float32))
    c = classification_pb2.ClassificationResponse.FromString(base64.b64decode(r["classify"]))
    assert [(x.label, x.score) for x in c.result.classifications[0].classes] == [
        ("a", 0.25),
        ("b", 0.75),
    ]
    g = regression_pb2.RegressionResponse.FromString(base64.b64decode(r["regress"]))
    assert [x.value for x in g.result.regressions] == [14.0, 2.5]
    assert g.model_spec.version.value == 1
    s = get_model_status_pb2.GetModelStatusResponse.FromString(base64.b64decode(r["status"]))
    got = [(x.version, x.state, x.status.error_code, x.status.error_message)
           for x in s.model_version_status]  # fmt: skip
    assert got == [(2, 30, 0, ""), (3, 50, 5, "no SavedModel")]
    m = get_model_metadata_pb2.GetModelMetadataResponse.FromString(base64.b64decode(r["metadata"]))
    assert m.metadata["signature_def"].type_url == grpc_server.SIGNATURE_DEF_MAP_TYPE_URL
    sdm = get_model_metadata_pb2.SignatureDefMap.FromString(m.metadata["signature_def"].value)
    assert sdm.signature_def["serving_default"].inputs["x"].name == "x:0"
    mi = inference_pb2.MultiInferenceResponse.FromString(base64.b64decode(r["multi_inference"]))
    first, second = mi.results
    assert (first.model_spec.version.value, first.model_spec.signature_name) == (2, "classify")
    (row,) = first.classification_result.classifications
    assert [(c.label, c.score) for c in row.classes] == [("a", 0.5)]
    assert [x.value for x in second.regression_result.regressions] == [-1.5]


# -- errors: TF Serving's status codes --------------------------------------------------------


def _predict_request(name="m", **inputs):
    r = predict_pb2.PredictRequest()
    r.model_spec.name = name
    for key, value in inputs.items():
        graph_io.tensor_proto(value, r.inputs[key])
    return r


async def _code(call, request):
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await asyncio.wait_for(call(request), 30)
    return info.value.code(), info.value.details()


async def test_error_status_codes(servers):
    srv, channel, http = servers
    stub = grpc_server.PredictionServiceStub(channel)
    x = np.array(X, np.float32)

    code, details = await _code(stub.Predict, _predict_request("nope", x=x))
    assert code == grpc.StatusCode.NOT_FOUND
    assert details == "Servable not found for request: Latest(nope)"
    status, body = await _rest(http, srv, "nope:predict", {"instances": X})
    assert (status, body["error"]) == (404, details)

    r = _predict_request(x=x)
    r.model_spec.version.value = 7
    code, _ = await _code(stub.Predict, r)
    assert code == grpc.StatusCode.NOT_FOUND

    r = _predict_request(x=x)
    r.model_spec.version_label = "nolabel"
    code, _ = await _code(stub.Predict, r)
    assert code == grpc.StatusCode.INVALID_ARGUMENT

    code, details = await _code(stub.Predict, _predict_request(x=x.astype(np.float64)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "float" in details and "double" in details

    code, details = await _code(stub.Predict, _predict_request(z=x))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "input tensor alias not found in signature: z" in details

    code, _ = await _code(stub.Predict, _predict_request(x=np.ones((2, 4), np.float32)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT

    r = _predict_request(x=x)
    r.output_filter.append("nothing")
    code, _ = await _code(stub.Predict, r)
    assert code == grpc.StatusCode.INVALID_ARGUMENT

    r = _predict_request(x=x)
    r.model_spec.signature_name = "classify"  # a classify signature has no input 'x'
    code, _ = await _code(stub.Predict, r)
    assert code == grpc.StatusCode.INVALID_ARGUMENT

    r = classification_pb2.ClassificationRequest()
    r.model_spec.name = "m"  # serving_default is a predict signature
    r.input.example_list.examples.add()
    code, details = await _code(stub.Classify, r)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "method_name" in details

    r = get_model_metadata_pb2.GetModelMetadataRequest()
    r.model_spec.name = "m"
    code, _ = await _code(stub.GetModelMetadata, r)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    r.metadata_field.append("graph")
    code, _ = await _code(stub.GetModelMetadata, r)
    assert code == grpc.StatusCode.INVALID_ARGUMENT

    status_stub = grpc_server.ModelServiceStub(channel)
    r = get_model_status_pb2.GetModelStatusRequest()
    r.model_spec.name = "m"
    r.model_spec.version.value = 9
    code, _ = await _code(status_stub.GetModelStatus, r)
    assert code == grpc.StatusCode.NOT_FOUND

    # An RPC TF Serving has and this server does not serve.
    call = channel.unary_unary("/tensorflow.serving.ModelService/HandleReloadConfigRequest")
    code, _ = await _code(call, b"")
    assert code == grpc.StatusCode.UNIMPLEMENTED


async def test_an_op_error_keeps_its_code(servers):
    """A failing step (ratio's inputs do not broadcast) answers the op's error code, and
    the same message REST gives."""
    srv, channel, http = servers
    stub = grpc_server.PredictionServiceStub(channel)
    r = _predict_request(p=np.ones(3, np.float32), q=np.ones(2, np.float32))
    r.model_spec.signature_name = "ratio"
    code, details = await _code(stub.Predict, r)
    status, body = await _rest(
        http,
        srv,
        "m:predict",
        {"signature_name": "ratio", "inputs": {"p": [1.0] * 3, "q": [1.0] * 2}},
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert status == 400
    assert details == body["error"]


# -- MultiInference ---------------------------------------------------------------------------


async def test_multi_inference_is_classify_and_regress_in_one_step(servers):
    srv, channel, http = servers
    _, model = srv.registry.get("m")
    steps = model.session._master._step_counter
    response = await _tf_request(channel, "multi_inference")
    assert model.session._master._step_counter == steps + 1  # both tasks, one step
    classified, regressed = response.results
    assert classified.WhichOneof("result") == "classification_result"
    assert regressed.WhichOneof("result") == "regression_result"
    spec = [(r.model_spec.name, r.model_spec.version.value, r.model_spec.signature_name)
            for r in response.results]  # fmt: skip
    assert spec == [("m", 2, "classify"), ("m", 2, "regress")]
    xs = np.array([[1.0, 2.0], [3.0, 0.5]], np.float32)
    rows = classified.classification_result.classifications
    assert [[c.label for c in row.classes] for row in rows] == [["a", "b", "c"]] * 2
    scores = [[c.score for c in row.classes] for row in rows]
    np.testing.assert_allclose(scores, _softmax(xs @ WC), rtol=1e-5)
    # context k=10 for the first example; the second's own k=-4 wins over the context's.
    values = [r.value for r in regressed.regression_result.regressions]
    assert values == [1 * 2 + 2 + 10, 3 * 2 + 0.5 - 4]
    # The same answers as the separate RPCs.
    single = await _tf_request(channel, "classify")
    assert [[c.score for c in row.classes] for row in single.result.classifications] == scores


def _multi(*tasks, examples=1):
    r = inference_pb2.MultiInferenceRequest()
    for name, signature, method in tasks:
        task = r.tasks.add(method_name=f"tensorflow/serving/{method}")
        task.model_spec.name = name
        task.model_spec.signature_name = signature
    for _ in range(examples):
        r.input.example_list.examples.add().features.feature["x"].float_list.value.extend(
            [1.0, 2.0]
        )
    return r


@pytest.mark.parametrize(
    "tasks, code, message",
    [
        ((), "INVALID_ARGUMENT", "Missing ModelSpec"),
        ((("m", "classify", "classify"), ("", "regress", "regress")), "INVALID_ARGUMENT",
         "Found ModelSpec with an empty model name."),
        ((("m", "classify", "classify"), ("n", "regress", "regress")), "INVALID_ARGUMENT",
         "All ModelSpecs in a MultiInferenceRequest must access the same model name."),
        ((("m", "classify", "classify"), ("m", "classify", "classify")), "INVALID_ARGUMENT",
         "Duplicate evaluation of signature: classify"),
        ((("m", "nope", "classify"),), "INVALID_ARGUMENT",
         "Requested signature not found in model graph: nope"),
        ((("m", "classify", "predict"),), "UNIMPLEMENTED",
         "Unsupported signature method_name: tensorflow/serving/predict"),
        ((("m", "regress", "classify"),), "INVALID_ARGUMENT",
         "Expected classification signature method_name to be tensorflow/serving/classify. "
         "Was: tensorflow/serving/regress"),
        ((("nope", "classify", "classify"),), "NOT_FOUND",
         "Servable not found for request: Latest(nope)"),
    ],
)  # fmt: skip
async def test_multi_inference_errors_are_tf_servings(servers, tasks, code, message):
    srv, channel, http = servers
    stub = grpc_server.PredictionServiceStub(channel)
    got = await _code(stub.MultiInference, _multi(*tasks))
    assert got == (getattr(grpc.StatusCode, code), message)


async def test_multi_inference_tasks_must_share_their_input():
    from asyncflow.serving import ServableModel

    g = af.Graph()
    with g.as_default():
        a = af.placeholder(af.float32, [None], name="a")
        b = af.placeholder(af.float32, [None], name="b")
        ya = af.multiply(a, 2.0)
        yb = af.multiply(b, 3.0)
    sess = af.Session(graph=g)
    model = ServableModel(
        sess,
        {
            "one": Signature({"inputs": a}, {"outputs": ya}, rest.REGRESS_METHOD_NAME),
            "two": Signature({"inputs": b}, {"outputs": yb}, rest.REGRESS_METHOD_NAME),
            "same": Signature({"inputs": a}, {"outputs": ya, "twice": ya}, "x"),
        },
    )
    with pytest.raises(errors.InvalidArgumentError, match="Input tensor must be the same"):
        await model.predict_signatures(["one", "two"], {"inputs": [1.0]})
    one, same = await model.predict_signatures(["one", "same"], {"inputs": [1.0, -0.5]})
    np.testing.assert_array_equal(one["outputs"], [2.0, -1.0])
    assert sorted(same) == ["outputs", "twice"]
    np.testing.assert_array_equal(same["twice"], [2.0, -1.0])
    await model.aclose()
