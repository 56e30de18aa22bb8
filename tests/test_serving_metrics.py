"""Prometheus metrics of the model server (asyncflow.serving.metrics).

Requests of known outcomes go through REST and gRPC; the scrape is parsed with
prometheus_client's own text parser and its counts compared with what was sent.
"""

import asyncio

import grpc
import numpy as np
import pytest
from aiohttp import ClientSession
from prometheus_client.parser import text_string_to_metric_families
from test_serving_rest import X, base_path  # noqa: F401 (fixture)

import asyncflow as af
from asyncflow.protos.serving import inference_pb2, predict_pb2
from asyncflow.serving import grpc_server, metrics, server
from asyncflow.serving.registry import ModelRegistry

PATH = "/monitoring/prometheus/metrics"


@pytest.fixture
async def running(base_path):  # noqa: F811
    registry = ModelRegistry()
    await server.load_version(registry, "m", base_path, 1)
    await server.load_version(registry, "m", base_path, 2, batching={"max_batch_size": 8})
    srv = server.ModelServer(registry, host="127.0.0.1", port=0, grpc_port=0, metrics_path=PATH)
    await srv.start()
    async with ClientSession() as http:
        yield srv, http
    await srv.aclose()


def _samples(text):
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def _scrape(srv, http):
    async with http.get(f"http://127.0.0.1:{srv.port}{PATH}") as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        return _samples(await r.text())


async def test_request_counts_latency_batches_and_versions(running):
    srv, http = running
    url = f"http://127.0.0.1:{srv.port}/v1/models/"

    async def post(path, doc):
        async with http.post(url + path, json=doc) as r:
            return r.status

    async with asyncio.timeout(30):
        oks = await asyncio.gather(*(post("m:predict", {"instances": X}) for _ in range(3)))
        assert oks == [200] * 3
        assert await post("m/versions/1:predict", {"instances": X}) == 200
        assert await post("m:predict", {"instances": [[1.0]]}) == 400
        assert await post("nope:predict", {"instances": X}) == 404
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}")
        stub = grpc_server.PredictionServiceStub(channel)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "m"
        af.graph_io.tensor_proto(np.array(X, np.float32), request.inputs["x"])
        for _ in range(2):
            await stub.Predict(request)
        await channel.close()
        got = await _scrape(srv, http)

    def count(version, status, name="m"):
        key = (("model_name", name), ("status", status), ("version", version))
        return got.get((":tensorflow:serving:request_count", key), 0)

    assert count("2", "OK") == 3  # REST, unversioned: the latest, 2
    assert count("1", "OK") == 1
    assert count("", "OK") == 2  # gRPC without a version in the spec
    assert count("2", "INVALID_ARGUMENT") == 1
    assert count("", "NOT_FOUND", "nope") == 1

    def latency(sample, entrypoint, le=None):
        labels = {"model_name": "m", "API": "Predict", "entrypoint": entrypoint}
        if le is not None:
            labels["le"] = le
        return got[(f":tensorflow:serving:request_latency_{sample}",
                    tuple(sorted(labels.items())))]  # fmt: skip

    assert latency("count", "REST") == 5
    assert latency("bucket", "REST", "+Inf") == 5
    assert latency("count", "GRPC") == 2
    assert latency("sum", "GRPC") > 0
    buckets = sorted(
        (float(dict(labels)["le"]), v)
        for (name, labels), v in got.items()
        if name == ":tensorflow:serving:request_latency_bucket"
        and ("entrypoint", "REST") in labels
        and ("model_name", "m") in labels
    )
    assert len(buckets) == len(metrics.LATENCY_BUCKETS_US) + 1
    counts = [v for _, v in buckets]
    assert counts == sorted(counts) and counts[-1] == 5  # cumulative

    batch = (("model_name", "m"), ("signature", "serving_default"), ("version", "2"))
    # Version 2 batches: 3 REST and 2 gRPC requests of 2 rows each (the 400 never ran).
    rows = got[(":tensorflow:serving:batching:processed_batch_size_sum", batch)]
    assert rows == 5 * len(X)
    assert got[(":tensorflow:serving:batching:processed_batch_size_count", batch)] >= 1
    assert got[(":tensorflow:serving:batching:queued_requests", batch)] == 0
    versions = (("model_name", "m"), ("state", "AVAILABLE"))
    assert got[(":tensorflow:serving:model_versions", versions)] == 2


def test_parse_monitoring_config():
    text = 'prometheus_config { enable: true, path: "/metrics/here" }'
    assert metrics.parse_monitoring_config(text.replace(",", "")) == "/metrics/here"
    assert metrics.parse_monitoring_config("prometheus_config { enable: true }") == PATH
    assert metrics.parse_monitoring_config("prometheus_config { enable: false }") is None
    assert metrics.parse_monitoring_config("") is None
    with pytest.raises(af.errors.InvalidArgumentError):
        metrics.parse_monitoring_config('prometheus_config { enable: true path: "x" }')


async def test_command_line_monitoring_config_file(base_path, tmp_path):  # noqa: F811
    config = tmp_path / "monitoring.config"
    config.write_text('prometheus_config { enable: true path: "/prom" }\n')
    args = server.parse_args(
        [
            "--rest_api_port=0",
            "--port=0",
            "--rest_api_host=127.0.0.1",
            "--model_name=m",
            f"--model_base_path={base_path}",
            f"--monitoring_config_file={config}",
        ]
    )
    ready = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    task = asyncio.create_task(server.serve(args, ready, stop))
    try:
        async with asyncio.timeout(30):
            srv = await ready
            async with ClientSession() as http:
                async with http.post(
                    f"http://127.0.0.1:{srv.port}/v1/models/m:predict", json={"instances": X}
                ) as r:
                    assert r.status == 200
                async with http.get(f"http://127.0.0.1:{srv.port}/prom") as r:
                    got = _samples(await r.text())
        key = (("model_name", "m"), ("status", "OK"), ("version", "2"))
        assert got[(":tensorflow:serving:request_count", key)] == 1
    finally:
        stop.set()
        await task


async def test_multi_inference_is_counted_and_timed(running):
    srv, http = running
    request = inference_pb2.MultiInferenceRequest()
    task = request.tasks.add(method_name="tensorflow/serving/regress")
    task.model_spec.name = "m"
    task.model_spec.signature_name = "regress"
    example = request.input.example_list.examples.add()
    example.features.feature["x"].float_list.value.extend([1.0, 2.0])
    async with asyncio.timeout(30):
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}")
        response = await grpc_server.PredictionServiceStub(channel).MultiInference(request)
        await channel.close()
        got = await _scrape(srv, http)
    assert [r.value for r in response.results[0].regression_result.regressions] == [4.0]
    key = (("model_name", "m"), ("status", "OK"), ("version", ""))
    assert got[(":tensorflow:serving:request_count", key)] == 1
    labels = (("API", "MultiInference"), ("entrypoint", "GRPC"), ("model_name", "m"))
    assert got[(":tensorflow:serving:request_latency_count", labels)] == 1
