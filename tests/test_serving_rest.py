"""asyncflow.serving's TF Serving REST API (aiohttp), against an in-process server.

The served SavedModels are small graphs whose results NumPy computes independently:
version 1 and 2 of `m` differ only in their weights, so which version answered is visible
in the numbers.  Every request goes through aiohttp's test client to a server bound to
127.0.0.1 on a free port.
"""

import asyncio
import base64
import json
import math

import numpy as np
import pytest
from _testing_ops import settle
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient, TestServer

import asyncflow as af
from asyncflow import saved_model as sm
from asyncflow.serving import rest, server

W = {
    1: np.arange(6, dtype=np.float32).reshape(3, 2) / 4,
    2: -np.arange(6, dtype=np.float32)[::-1].reshape(3, 2),
}
WC = np.array([[1.0, -1.0, 0.5], [0.25, 2.0, -3.0]], np.float32)
B = {1: np.array([0.5, -1.0], np.float32), 2: np.array([2.0, 3.0], np.float32)}


def _export(export_dir, version):
    with af.Graph().as_default() as g:
        x = af.placeholder(af.float32, [None, 3], name="x")
        w = af.Variable(W[version], name="w")
        b = af.Variable(B[version], name="b")
        y = af.add(af.matmul(x, w), b, name="y")
        a = af.placeholder(af.float32, [None, 2], name="a")
        c = af.placeholder(af.float32, [None, 2], name="c")
        p = af.placeholder(af.float32, [None], name="p")
        q = af.placeholder(af.float32, [None], name="q")
        s = af.placeholder(af.string, [None], name="s")
        serialized = af.placeholder(af.string, [None], name="tf_example")
        parsed = af.parse_example(
            serialized,
            {
                "x": af.FixedLenFeature([2], af.float32),
                "k": af.FixedLenFeature([1], af.int64, default_value=[0]),
            },
        )
        scores = af.nn.softmax(af.matmul(parsed["x"], WC))
        classes = af.tile(af.constant([[b"a", b"b", b"c"]]), [af.shape(scores)[0], 1])
        fx = parsed["x"]
        regressed = fx[:, 0] * 2 + fx[:, 1] + af.cast(parsed["k"][:, 0], af.float32)
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            builder = sm.SavedModelBuilder(export_dir)
            sigs = {
                "serving_default": sm.predict_signature_def({"x": x}, {"y": y}),
                "multi": sm.predict_signature_def(
                    {"a": a, "c": c}, {"sum": af.add(a, c), "prod": af.multiply(a, c)}
                ),
                "ratio": sm.predict_signature_def({"p": p, "q": q}, {"r": af.divide(p, q)}),
                "echo": sm.predict_signature_def({"s": s}, {"s_bytes": af.identity(s)}),
                "classify": sm.classification_signature_def(serialized, classes, scores),
                "regress": sm.regression_signature_def(serialized, regressed),
            }
            builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map=sigs)
            builder.save()


@pytest.fixture(scope="module")
def base_path(tmp_path_factory):
    base = tmp_path_factory.mktemp("models") / "m"
    for version in (1, 2):
        _export(str(base / str(version)), version)
    (base / "not_a_version").mkdir()
    return str(base)


@pytest.fixture
async def registry(base_path):
    reg = rest.ModelRegistry()
    for version in (1, 2):
        await server.load_version(reg, "m", base_path, version)
    yield reg
    await reg.aclose()


@pytest.fixture(params=["app", "server"])
async def client(registry, request):
    """A client of the REST API both ways it is served: `rest.make_app` (an aiohttp
    Application, as a service mounts it) and the model server's own low-level
    `rest.make_server` (what `ModelServer` listens with)."""
    if request.param == "app":
        app = rest.make_app(registry, max_body_bytes=4096, max_depth=16)
        async with TestClient(TestServer(app, host="127.0.0.1")) as c:
            yield c
        return
    srv = server.ModelServer(registry, host="127.0.0.1", port=0, max_body_bytes=4096,
                             max_depth=16)  # fmt: skip
    port = await srv.start()
    try:
        async with ClientSession(base_url=f"http://127.0.0.1:{port}") as c:
            yield c
    finally:
        await srv.stop()


async def _json(resp):
    return resp.status, json.loads(await resp.text())


def _ref(x, version=2):
    return np.asarray(x, np.float32) @ W[version] + B[version]


X = [[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]]


# -- predict --------------------------------------------------------------------------------


async def test_predict_row_form_equals_the_model(client):
    status, body = await _json(await client.post("/v1/models/m:predict", json={"instances": X}))
    assert status == 200
    np.testing.assert_allclose(body["predictions"], _ref(X), rtol=1e-6)
    assert list(body) == ["predictions"]


async def test_predict_column_form_equals_the_model(client):
    status, body = await _json(await client.post("/v1/models/m:predict", json={"inputs": X}))
    assert status == 200
    np.testing.assert_allclose(body["outputs"], _ref(X), rtol=1e-6)
    status, body = await _json(
        await client.post("/v1/models/m:predict", json={"inputs": {"x": X}})
    )
    np.testing.assert_allclose(body["outputs"], _ref(X), rtol=1e-6)


async def test_specific_version(client):
    status, body = await _json(
        await client.post("/v1/models/m/versions/1:predict", json={"instances": X})
    )
    assert status == 200
    np.testing.assert_allclose(body["predictions"], _ref(X, 1), rtol=1e-6)


async def test_named_instances_and_several_outputs(client):
    a = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    c = np.array([[0.5, 1], [2, -1], [0, 3]], np.float32)
    instances = [{"a": a[i].tolist(), "c": c[i].tolist()} for i in range(3)]
    status, body = await _json(
        await client.post(
            "/v1/models/m:predict", json={"signature_name": "multi", "instances": instances}
        )
    )
    assert status == 200
    assert [sorted(p) for p in body["predictions"]] == [["prod", "sum"]] * 3
    for i, p in enumerate(body["predictions"]):
        assert p["sum"] == (a[i] + c[i]).tolist() and p["prod"] == (a[i] * c[i]).tolist()
    status, body = await _json(
        await client.post(
            "/v1/models/m:predict",
            json={"signature_name": "multi", "inputs": {"a": a.tolist(), "c": c.tolist()}},
        )
    )
    assert body["outputs"] == {"sum": (a + c).tolist(), "prod": (a * c).tolist()}


async def test_nan_and_infinity_tokens(client):
    resp = await client.post(
        "/v1/models/m:predict",
        json={
            "signature_name": "ratio",
            "inputs": {"p": [0.0, 1.0, -1.0, 3.0], "q": [0.0] * 3 + [2.0]},
        },
    )
    text = await resp.text()
    assert resp.status == 200
    assert text.replace(" ", "") == '{"outputs":[NaN,Infinity,-Infinity,1.5]}'
    out = json.loads(text)["outputs"]
    assert math.isnan(out[0]) and out[1:] == [math.inf, -math.inf, 1.5]


async def test_b64_inputs_and_bytes_outputs(client):
    raw = [b"\x00\xffbin", b"text"]
    instances = [{"b64": base64.b64encode(v).decode()} for v in raw]
    status, body = await _json(
        await client.post(
            "/v1/models/m:predict", json={"signature_name": "echo", "instances": instances}
        )
    )
    assert status == 200
    assert [base64.b64decode(p["b64"]) for p in body["predictions"]] == raw


async def test_chunked_request_body(client):
    payload = json.dumps({"instances": X}).encode()

    async def chunks():
        for i in range(0, len(payload), 7):
            yield payload[i : i + 7]

    resp = await client.post(
        "/v1/models/m:predict", data=chunks(), headers={"Content-Type": "application/json"}
    )
    assert resp.request_info.headers.get("Transfer-Encoding") == "chunked"
    status, body = await _json(resp)
    assert status == 200
    np.testing.assert_allclose(body["predictions"], _ref(X), rtol=1e-6)


async def test_expect_100_continue(client):
    """curl sends `Expect: 100-continue` before a body over 1 KiB and waits for the
    interim answer; any other expectation is refused (417)."""
    body = json.dumps({"instances": X}).encode()
    resp = await client.post(
        "/v1/models/m:predict",
        data=body,
        headers={"Content-Type": "application/json", "Expect": "100-continue"},
        expect100=True,
    )
    status, doc = await _json(resp)
    assert status == 200
    np.testing.assert_allclose(doc["predictions"], _ref(X), rtol=1e-6)
    resp = await client.post("/v1/models/m:predict", data=body, headers={"Expect": "teapot"})
    assert resp.status == 417


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


async def test_classify_examples(client):
    xs = [[1.0, 2.0], [-0.5, 0.25]]
    status, body = await _json(
        await client.post(
            "/v1/models/m:classify",
            json={"signature_name": "classify", "examples": [{"x": x} for x in xs]},
        )
    )
    assert status == 200
    want = _softmax(np.array(xs, np.float32) @ WC)
    assert [[c[0] for c in row] for row in body["result"]] == [["a", "b", "c"]] * 2
    np.testing.assert_allclose([[c[1] for c in row] for row in body["result"]], want, rtol=1e-5)


async def test_regress_examples_with_context(client):
    status, body = await _json(
        await client.post(
            "/v1/models/m/versions/1:regress",
            json={
                "signature_name": "regress",
                "context": {"k": 10},
                "examples": [{"x": [1.0, 2.0]}, {"x": [3, 0.5], "k": [-4]}],
            },
        )
    )
    assert status == 200
    assert body == {"result": [1 * 2 + 2 + 10, 3 * 2 + 0.5 - 4]}


# -- status and metadata --------------------------------------------------------------------


async def test_model_status(client):
    status, body = await _json(await client.get("/v1/models/m"))
    assert status == 200
    ok = {"error_code": "OK", "error_message": ""}
    assert body == {
        "model_version_status": [
            {"version": "2", "state": "AVAILABLE", "status": ok},
            {"version": "1", "state": "AVAILABLE", "status": ok},
        ]
    }
    status, body = await _json(await client.get("/v1/models/m/versions/1"))
    assert body["model_version_status"] == [{"version": "1", "state": "AVAILABLE", "status": ok}]


async def test_metadata_prints_signature_defs(client):
    status, body = await _json(await client.get("/v1/models/m/metadata"))
    assert status == 200
    assert body["model_spec"] == {"name": "m", "signature_name": "", "version": "2"}
    defs = body["metadata"]["signature_def"]["signature_def"]
    assert {"serving_default", "multi", "ratio", "echo", "classify", "regress"} <= set(defs)
    assert defs["classify"]["method_name"] == "tensorflow/serving/classify"
    default = defs["serving_default"]
    assert default["method_name"] == "tensorflow/serving/predict"
    assert default["inputs"]["x"] == {
        "dtype": "DT_FLOAT",
        "tensor_shape": {
            "dim": [{"size": "-1", "name": ""}, {"size": "3", "name": ""}],
            "unknown_rank": False,
        },
        "name": "x:0",
    }
    assert default["outputs"]["y"]["name"] == "y:0"
    assert defs["echo"]["inputs"]["s"]["dtype"] == "DT_STRING"
    status, body = await _json(await client.get("/v1/models/m/versions/1/metadata"))
    assert body["model_spec"]["version"] == "1"


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,url,payload,code,message",
    [
        (
            "POST",
            "/v1/models/nope:predict",
            {"instances": X},
            404,
            "Servable not found for request: Latest(nope)",
        ),
        (
            "POST",
            "/v1/models/m/versions/7:predict",
            {"instances": X},
            404,
            "Servable not found for request: Specific(m, 7)",
        ),
        ("GET", "/v1/models/nope", None, 404, "Could not find any versions of model nope"),
        ("GET", "/v1/models/m/versions/7", None, 404, "Could not find version 7 of model m"),
        ("GET", "/v1/models/nope/metadata", None, 404, "Servable not found"),
        ("GET", "/v1/models/m:predict", None, 400, "Malformed request: GET /v1/models/m:predict"),
        ("POST", "/v1/models/m/versions/x:predict", {}, 400, "Malformed request"),
        ("GET", "/v2/whatever", None, 400, "Malformed request"),
        ("POST", "/v1/models/m:predict", {"instances": [[1.0, 2.0]]}, 400, "not compatible"),
        (
            "POST",
            "/v1/models/m:predict",
            {"instances": [[1.0, 2.0, 3.0], [1.0]]},
            400,
            "cannot be converted",
        ),
        (
            "POST",
            "/v1/models/m:predict",
            {"instances": [["a", "b", "c"]]},
            400,
            "cannot be converted",
        ),
        ("POST", "/v1/models/m:predict", {"x": X}, 400, "Missing 'inputs' or 'instances' key"),
        ("POST", "/v1/models/m:predict", {"inputs": X, "instances": X}, 400, "Not both"),
        (
            "POST",
            "/v1/models/m:predict",
            {"instances": X, "signature_name": "zz"},
            400,
            'Serving signature key "zz" not found.',
        ),
        (
            "POST",
            "/v1/models/m:predict",
            {"instances": [{"a": [1, 2]}], "signature_name": "multi"},
            400,
            "Missing input",
        ),
        (
            "POST",
            "/v1/models/m:predict",
            {"instances": [[1, 2], [3, 4]], "signature_name": "multi"},
            400,
            "2 inputs",
        ),
        (
            "POST",
            "/v1/models/m:classify",
            {"examples": [{"x": [1.0, 2.0]}]},
            400,
            "Expected classification signature method_name to be tensorflow/serving/classify. "
            "Was: tensorflow/serving/predict",
        ),
        (
            "POST",
            "/v1/models/m:regress",
            {"examples": [], "signature_name": "regress"},
            400,
            "'examples' must be a non-empty list",
        ),
        (
            "POST",
            "/v1/models/m:regress",
            {"examples": [{"x": [1.0, "a"]}], "signature_name": "regress"},
            400,
            "Feature 'x'",
        ),
        (
            "POST",
            "/v1/models/m/labels/stable:predict",
            {"instances": X},
            400,
            "Unrecognized servable version label: stable",
        ),
    ],
)
async def test_errors(client, method, url, payload, code, message):
    status, body = await _json(await client.request(method, url, json=payload))
    assert status == code
    assert list(body) == ["error"] and message in body["error"]


async def test_bad_json_oversize_and_deep_nesting_answer_without_dropping(client):
    url = "/v1/models/m:predict"
    for data, code, message in [
        (b'{"instances": [1,', 400, "JSON Parse error"),
        (b"[1, 2]", 400, "is not an object"),
        (b"\xff\xfe", 400, "JSON Parse error"),
        (b'{"instances": ' + b"[" * 2000 + b"]" * 2000 + b"}", 400, "nesting deeper than 16"),
        (json.dumps({"instances": [[0.0] * 3] * 400}).encode(), 413, "larger than 4096"),
    ]:
        resp = await client.post(url, data=data, headers={"Content-Type": "application/json"})
        status, body = await _json(resp)
        assert (status, list(body)) == (code, ["error"]) and message in body["error"], body
    # brackets inside strings do not count as nesting
    deep_string = json.dumps({"instances": X, "signature_name": "[" * 100})
    status, body = await _json(await client.post(url, data=deep_string))
    assert status == 400 and "signature key" in body["error"]
    status, body = await _json(await client.post(url, json={"instances": X}))
    assert status == 200  # the server is still serving


async def test_idle_connections_time_out(registry):
    srv = server.ModelServer(registry, host="127.0.0.1", port=0, idle_timeout_s=0.2)
    port = await srv.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /v1/models/m HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(10):
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            assert await reader.read() == b""  # the server closed the idle connection
        writer.close()
    finally:
        await srv.stop()


# -- the command line and batching ----------------------------------------------------------


async def test_command_line_serves_the_latest_version_with_batching(base_path, tmp_path):
    params = tmp_path / "batching.txt"
    params.write_text("max_batch_size { value: 4 }\nbatch_timeout_micros { value: 0 }\n")
    args = server.parse_args(
        [
            "--rest_api_port=0",
            "--port=0",
            "--rest_api_host=127.0.0.1",
            "--model_name=m",
            f"--model_base_path={base_path}",
            "--enable_batching",
            f"--batching_parameters_file={params}",
        ]
    )
    ready = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    task = asyncio.create_task(server.serve(args, ready, stop))
    try:
        async with asyncio.timeout(30):
            port = (await ready).port
            from aiohttp import ClientSession

            async with ClientSession() as http:
                base = f"http://127.0.0.1:{port}/v1/models/m"
                async with http.get(base) as resp:
                    versions = [v["version"] for v in (await resp.json())["model_version_status"]]
                assert versions == ["2"]
                # --tensorflow_intra_op_parallelism (0: 1 in this server) is the sessions'.
                config = (await ready).registry.get("m")[1].session._config
                assert config.intra_op_parallelism_threads == 1

                async def one(i):
                    async with http.post(base + ":predict", json={"instances": [X[i % 2]]}) as r:
                        return r.status, await r.json()

                results = await asyncio.gather(*(one(i) for i in range(12)))
                for i, (status, body) in enumerate(results):
                    assert status == 200
                    np.testing.assert_allclose(body["predictions"], _ref([X[i % 2]]), rtol=1e-6)
    finally:
        stop.set()
        async with asyncio.timeout(30):
            await task


async def test_sigterm_drains_in_flight_requests_then_serve_returns(base_path):
    """SIGTERM: both ports stop accepting at once, the request in flight still gets its
    answer, then serve() closes the models and returns."""
    import os
    import signal

    from aiohttp import ClientSession

    args = server.parse_args(
        [
            "--rest_api_port=0",
            "--port=0",
            "--rest_api_host=127.0.0.1",
            "--grpc_host=127.0.0.1",
            "--model_name=m",
            f"--model_base_path={base_path}",
            "--file_system_poll_wait_seconds=0",
        ]
    )
    ready = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(server.serve(args, ready))  # no stop event: it takes signals
    gate = asyncio.Event()
    try:
        async with ClientSession() as http, asyncio.timeout(30):
            srv = await ready
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # serve's handler
            _, model = srv.registry.get("m")
            signature = model.signatures["serving_default"]
            step, entered = signature.step, asyncio.Event()

            def gated_step(session):
                run = step(session)

                async def gated(feed):
                    entered.set()
                    await gate.wait()
                    return await run(feed)

                return gated

            signature.step = gated_step

            async def call():
                url = f"http://127.0.0.1:{srv.port}/v1/models/m:predict"
                async with http.post(url, json={"instances": X}) as r:
                    return r.status, await r.json()

            request = asyncio.create_task(call())
            await entered.wait()
            os.kill(os.getpid(), signal.SIGTERM)
            for port in (srv.port, srv.grpc_port):  # refused once the drain has begun
                while True:
                    try:
                        _, writer = await asyncio.open_connection("127.0.0.1", port)
                    except OSError:
                        break
                    writer.close()
                    await asyncio.sleep(0.01)  # (polling the port; bounded by the timeout)
            assert not request.done() and not task.done()
            gate.set()
            status, body = await request
            assert status == 200
            np.testing.assert_allclose(body["predictions"], _ref(X), rtol=1e-6)
            await task  # drained, models closed, signal handlers removed
        assert model.session._closed
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        gate.set()
        if not task.done():
            task.cancel()


def test_parse_batching_parameters():
    text = """
    max_batch_size { value: 32 }  # rows
    batch_timeout_micros { value: 500 }
    max_enqueued_batches { value: 100 }
    num_batch_threads { value: 2 }
    allowed_batch_sizes: 8
    allowed_batch_sizes: 32
    """
    assert server.parse_batching_parameters(text) == {
        "max_batch_size": 32,
        "batch_timeout_micros": 500,
        "max_enqueued_batches": 100,
        "max_concurrent_batches": 2,
        "allowed_batch_sizes": [8, 32],
    }
    padding = server.parse_batching_parameters("pad_variable_length_inputs: true")
    assert padding == {"pad_variable_length_inputs": True}
    with pytest.raises(ValueError, match="pad_variable_length_inputs"):
        server.parse_batching_parameters("pad_variable_length_inputs: maybe")


async def test_float32_outputs_keep_float32_digits(client):
    """Each float32 is written at float32's shortest round-trip repr (1/3 -> 0.33333334),
    and parses back to the same float32."""
    resp = await client.post(
        "/v1/models/m:predict",
        json={"signature_name": "ratio", "inputs": {"p": [1.0, 2.0], "q": [3.0, 7.0]}},
    )
    text = await resp.text()
    assert text == '{"outputs":[0.33333334,0.2857143]}'
    want = np.array([1.0, 2.0], np.float32) / np.array([3.0, 7.0], np.float32)
    np.testing.assert_array_equal(np.array(json.loads(text)["outputs"], np.float32), want)


def test_server_asks_for_one_blas_thread_unless_told():
    assert server.parse_args(["--model_base_path=/m"]).tensorflow_intra_op_parallelism == 0
    assert server.blas_threads(0) == 1
    assert server.blas_threads(4) == 4


def test_find_versions(base_path, tmp_path):
    assert server.find_versions(base_path) == [1, 2]
    with pytest.raises(af.errors.NotFoundError):
        server.find_versions(str(tmp_path / "missing"))


# -- request timeout and draining -----------------------------------------------------------


def _gated_registry(probes, key):
    import _testing_ops

    from asyncflow.serving import ServableModel

    waiter = probes.waiter(key)
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None], name="x")
        y = _testing_ops.wait_op(x, waiter)
    sess = af.Session(graph=g)
    reg = rest.ModelRegistry()
    reg.add("gated", 1, ServableModel.from_session(sess, {"x": x}, {"y": y}))
    return reg, waiter


async def test_request_timeout_answers_504(probes):
    reg, _ = _gated_registry(probes, "rest-timeout")
    app = rest.make_app(reg, request_timeout_s=0.05)
    try:
        async with TestClient(TestServer(app, host="127.0.0.1")) as c:
            async with asyncio.timeout(20):
                resp = await c.post("/v1/models/gated:predict", json={"instances": [1.0]})
                status, body = await _json(resp)
        assert status == 504 and body == {"error": "Deadline exceeded"}
    finally:
        await reg.aclose()


async def test_stopping_drains_in_flight_requests(probes):
    from aiohttp import ClientSession

    reg, waiter = _gated_registry(probes, "rest-drain")
    srv = server.ModelServer(reg, host="127.0.0.1", port=0)
    port = await srv.start()
    try:
        async with ClientSession() as http, asyncio.timeout(30):

            async def call():
                url = f"http://127.0.0.1:{port}/v1/models/gated:predict"
                async with http.post(url, json={"instances": [2.5, 4.0]}) as r:
                    return r.status, await r.json()

            request = asyncio.create_task(call())
            assert await asyncio.to_thread(waiter.wait_started, 1, 10.0)
            stopping = asyncio.create_task(srv.stop())
            await settle()
            assert not stopping.done()  # stop() waits for the request in flight
            waiter.release()
            assert await request == (200, {"predictions": [2.5, 4.0]})
            await stopping
            with pytest.raises(OSError):  # no longer listening
                await asyncio.open_connection("127.0.0.1", port)
    finally:
        await srv.aclose()


# -- --model_config_file --------------------------------------------------------------------

CONFIG = """
# two models over the same version directories
model_config_list {
  config {
    name: "m"
    base_path: "%s"
    model_platform: "tensorflow"
    model_version_policy { all {} }
    version_labels { key: "stable" value: 1 }
    version_labels { key: "canary" value: 2 }
  }
  config: {
    name: 'm_one'
    base_path: '%s'
    model_version_policy: { specific { versions: 1 } }
  }
}
"""


async def test_model_config_file_policies_and_labels(base_path, tmp_path):
    from aiohttp import ClientSession

    config = tmp_path / "models.config"
    config.write_text(CONFIG % (base_path, base_path))
    args = server.parse_args(
        [
            "--rest_api_port=0",
            "--port=0",
            "--rest_api_host=127.0.0.1",
            f"--model_config_file={config}",
        ]
    )
    ready = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    task = asyncio.create_task(server.serve(args, ready, stop))
    try:
        async with asyncio.timeout(30):
            port = (await ready).port
            async with ClientSession() as http:
                url = f"http://127.0.0.1:{port}/v1/models/"

                async def get(path):
                    async with http.get(url + path) as r:
                        return r.status, await r.json()

                async def post(path, doc):
                    async with http.post(url + path, json=doc) as r:
                        return r.status, await r.json()

                def versions(body):
                    return [v["version"] for v in body["model_version_status"]]

                assert versions((await get("m"))[1]) == ["2", "1"]
                assert versions((await get("m_one"))[1]) == ["1"]
                assert versions((await get("m/labels/stable"))[1]) == ["1"]
                assert (await get("m/labels/canary/metadata"))[1]["model_spec"]["version"] == "2"
                for path, version in [
                    ("m/labels/stable", 1),
                    ("m/labels/canary", 2),
                    ("m_one", 1),
                    ("m", 2),
                ]:
                    status, body = await post(path + ":predict", {"instances": X})
                    assert status == 200
                    np.testing.assert_allclose(body["predictions"], _ref(X, version), rtol=1e-6)
                status, body = await post("m_one/labels/stable:predict", {"instances": X})
                assert (status, body) == (
                    400,
                    {"error": "Unrecognized servable version label: stable"},
                )
    finally:
        stop.set()
        async with asyncio.timeout(30):
            await task


def test_parse_model_config_and_version_policies():
    from asyncflow.serving.config import parse_model_config, select_versions

    (c,) = parse_model_config(
        'model_config_list { config { name: "a" base_path: "/p" '
        "model_version_policy { latest { num_versions: 2 } } } }"
    )
    assert (c.name, c.base_path, c.policy, c.labels) == ("a", "/p", ("latest", 2), {})
    assert select_versions(c.policy, [3, 1, 7, 5]) == [5, 7]
    assert select_versions(("latest", 1), [3, 1]) == [3]
    assert select_versions(("all",), [3, 1]) == [1, 3]
    assert select_versions(("specific", (1, 9)), [3, 1]) == [1]
    with pytest.raises(af.errors.InvalidArgumentError, match="missing"):
        parse_model_config("model_config_list { config { name: 'a'")
    with pytest.raises(af.errors.InvalidArgumentError, match="base_path"):
        parse_model_config("model_config_list { config { name: 'a' } }")
    with pytest.raises(af.errors.InvalidArgumentError, match="Duplicate"):
        parse_model_config(
            "model_config_list { config { name: 'a' base_path: '/x' } "
            "config { name: 'a' base_path: '/y' } }"
        )


async def test_label_must_name_a_loaded_version(registry):
    with pytest.raises(af.errors.FailedPreconditionError, match="version 9 of model m"):
        registry.set_labels("m", {"stable": 9})


async def test_example_embeds_the_api_in_an_aiohttp_app(capsys):
    import argparse
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parent.parent / "examples" / "serve_aiohttp.py"
    spec = importlib.util.spec_from_file_location("serve_aiohttp_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    async with asyncio.timeout(30):
        await example.main(argparse.Namespace(host="127.0.0.1", port=0, selftest=True))
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == ['200 {"predictions":[[-2.5],[2.5]]}', '200 {"models": ["linear"]}']


async def test_example_awaits_the_model_from_a_fastapi_endpoint(capsys):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    import argparse
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parent.parent / "examples" / "serve_fastapi.py"
    spec = importlib.util.spec_from_file_location("serve_fastapi_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    args = argparse.Namespace(host="127.0.0.1", port=0, export_dir=None, selftest=True)
    async with asyncio.timeout(30):
        await example.main(args)
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        '200 {"predictions":{"y":[[-2.5],[2.5]]}}',  # x @ [[1], [-2]] + 0.5
        "400 Input 'x' has shape (1, 3), which is not",
        '200 {"ready":true}',
    ]
