"""Serve the digits MLP over HTTP/1.1 with dynamic batching, on plain asyncio streams.

    .venv/bin/python examples/serve_http.py                    # serve on 127.0.0.1:8501
    .venv/bin/python examples/serve_http.py --load 5000 --concurrency 64
                                                               # built-in load generator

No extra dependency: the server is asyncio streams (keep-alive, Content-Length bodies).
Data: sklearn's digits (`pip install scikit-learn`) when installed, else random data of
the same shape (the served arithmetic is the same).  With `--export-dir` pointing at a
SavedModel (af.saved_model) it serves that; otherwise it trains a 64-128-10 MLP for a
few seconds with asyncflow and, when the SavedModel builder exists, exports it there.

API (TF Serving's REST shape):
    POST /v1/models/digits:predict   {"instances": [[64 floats], ...]}
                                  -> {"predictions": [[10 probabilities], ...]}
    GET  /v1/models/digits/metrics   batching metrics (batch sizes, queue time, latency)
    GET  /healthz
Errors: 400 InvalidArgument / bad JSON, 404, 413 body too large, 503 Unavailable
(batch queue full), 504 DeadlineExceeded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

import numpy as np

import asyncflow as af
from asyncflow import errors
from asyncflow.serving import ServableModel

MAX_BODY = 1 << 20
MAX_HEADER_LINES = 100
STATUS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    413: "Payload Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


# -- the model ----------------------------------------------------------------------------


def digits():
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        print("scikit-learn not installed: random data instead of digits", file=sys.stderr)
        rng = np.random.default_rng(0)
        return rng.random((1797, 64), dtype=np.float32), rng.integers(0, 10, 1797)
    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)


def build_and_train(graph, x_data, y_data, steps=150):
    from asyncflow.train.optimizers import GradientDescentOptimizer

    with graph.as_default():
        x = af.placeholder(af.float32, [None, 64], name="x")
        labels = af.placeholder(af.int64, [None], name="labels")
        h = af.nn.relu(_dense(x, 128, name="hidden"))
        logits = _dense(h, 10, name="out")
        probs = af.nn.softmax(logits, name="probs")
        loss = -af.reduce_mean(
            af.reduce_sum(af.one_hot(labels, 10) * af.nn.log_softmax(logits), 1)
        )
        train = GradientDescentOptimizer(0.5).minimize(loss)
        init = af.global_variables_initializer()
    return x, labels, probs, loss, train, init, steps


def _dense(x, units, name=None):
    with af.variable_scope(name, default_name="dense"):
        n_in = int(x.shape[-1])
        w = af.get_variable(
            "kernel",
            [n_in, units],
            initializer=af.random_normal_initializer(stddev=(2 / n_in) ** 0.5),
        )
        b = af.get_variable("bias", [units], initializer=af.zeros_initializer())
        return af.matmul(x, w) + b


async def make_model(args) -> ServableModel:
    batching = {
        "max_batch_size": args.max_batch_size,
        "batch_timeout_micros": args.batch_timeout_micros,
        "max_enqueued_batches": args.max_enqueued_batches,
    }
    if args.export_dir and await asyncio.to_thread(os.path.isdir, args.export_dir):
        from asyncflow import serving

        print(f"loading SavedModel from {args.export_dir}", file=sys.stderr)
        return await serving.aload(args.export_dir, batching=batching)
    x_data, y_data = digits()
    graph = af.Graph()
    x, labels, probs, loss, train, init, steps = build_and_train(graph, x_data, y_data)
    sess = af.Session(graph=graph)
    await sess.arun(init)
    t0 = time.perf_counter()
    for _ in range(steps):
        _, value = await sess.arun([train, loss], {x: x_data, labels: y_data})
    acc = (np.argmax(await sess.arun(probs, {x: x_data}), 1) == y_data).mean()
    print(
        f"trained in {time.perf_counter() - t0:.1f}s: loss {value:.3f}, accuracy {acc:.3f}",
        file=sys.stderr,
    )
    if args.export_dir:
        _export(sess, x, probs, args.export_dir)
    return ServableModel.from_session(sess, {"x": x}, {"probs": probs}, batching=batching)


def _export(sess, x, probs, export_dir):
    try:
        from asyncflow.saved_model import simple_save
    except ImportError:
        print("asyncflow.saved_model not available: not exported", file=sys.stderr)
        return
    # simple_save runs blocking session steps: hand it to a thread in real services.
    print(f"exporting to {export_dir}", file=sys.stderr)
    simple_save(sess, export_dir, inputs={"x": x}, outputs={"probs": probs})


# -- HTTP ---------------------------------------------------------------------------------


class HttpError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


async def read_request(reader):
    """(method, path, headers, body) or None at EOF.  Raises HttpError for bad input."""
    line = await reader.readline()
    if not line:
        return None
    try:
        method, path, _version = line.decode("latin-1").split()
    except ValueError:
        raise HttpError(400, "malformed request line") from None
    headers = {}
    for _ in range(MAX_HEADER_LINES):
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    else:
        raise HttpError(400, "too many headers")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise HttpError(400, "bad Content-Length") from None
    if length < 0 or length > MAX_BODY:
        raise HttpError(413, f"body larger than {MAX_BODY} bytes")
    body = await reader.readexactly(length) if length else b""
    return method, path, headers, body


def response(status, payload) -> bytes:
    body = json.dumps(payload).encode()
    head = (
        f"HTTP/1.1 {status} {STATUS.get(status, 'Error')}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


_ERROR_STATUS = {
    errors.InvalidArgumentError: 400,
    errors.UnavailableError: 503,
    errors.DeadlineExceededError: 504,
}


async def handle(model, method, path, body, deadline_s):
    if path == "/healthz":
        return 200, {"status": "ok"}
    if path == "/v1/models/digits/metrics" and method == "GET":
        return 200, model.metrics()
    if path != "/v1/models/digits:predict":
        return 404, {"error": f"no route {path}"}
    if method != "POST":
        return 400, {"error": "use POST"}
    try:
        instances = np.asarray(json.loads(body)["instances"], dtype=np.float32)
    except (ValueError, KeyError, TypeError) as e:
        return 400, {"error": f"bad request body: {e}"}
    try:
        out = await model.predict({"x": instances}, deadline_s=deadline_s)
    except errors.OpError as e:
        return _ERROR_STATUS.get(type(e), 500), {"error": e.message}
    return 200, {"predictions": out["probs"].tolist()}


async def serve_connection(model, reader, writer, deadline_s):
    try:
        while True:
            try:
                request = await read_request(reader)
            except HttpError as e:
                writer.write(response(e.status, {"error": str(e)}))
                break
            if request is None:
                break
            method, path, headers, body = request
            status, payload = await handle(model, method, path, body, deadline_s)
            writer.write(response(status, payload))
            await writer.drain()
            if headers.get("connection", "").lower() == "close":
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


# -- load generator -----------------------------------------------------------------------


async def load_generator(host, port, total, concurrency, rows):
    latencies = []
    counter = iter(range(total))
    failures = 0

    async def client():
        nonlocal failures
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for i in counter:
                body = json.dumps({"instances": rows[i % len(rows)].tolist()}).encode()
                t0 = time.perf_counter()
                writer.write(
                    b"POST /v1/models/digits:predict HTTP/1.1\r\nHost: x\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                status = (await reader.readline()).split()[1]
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - t0)
                failures += status != b"200"
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    a = np.asarray(latencies) * 1e3
    print(
        f"{len(a)} requests, concurrency {concurrency}: {len(a) / elapsed:.0f} req/s, "
        f"p50 {np.percentile(a, 50):.2f} ms, p99 {np.percentile(a, 99):.2f} ms, "
        f"{failures} failed"
    )


async def main(args):
    model = await make_model(args)
    deadline_s = args.deadline_ms / 1000 if args.deadline_ms else None
    server = await asyncio.start_server(
        lambda r, w: serve_connection(model, r, w, deadline_s), args.host, args.port
    )
    host, port = server.sockets[0].getsockname()[:2]
    print(f"serving digits on http://{host}:{port}/v1/models/digits:predict", file=sys.stderr)
    async with server:
        if args.load:
            rows = [digits()[0][i : i + 1] for i in range(256)]
            await load_generator(host, port, args.load, args.concurrency, rows)
            print(json.dumps(model.metrics(), indent=1))
        else:
            await server.serve_forever()
    await model.aclose()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Serve the digits MLP over HTTP.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--export-dir", help="SavedModel to serve (or to export the trained one to)")
    p.add_argument("--max-batch-size", type=int, default=64)
    p.add_argument("--batch-timeout-micros", type=int, default=0)
    p.add_argument("--max-enqueued-batches", type=int, default=100)
    p.add_argument("--deadline-ms", type=float, default=0, help="per-request deadline")
    p.add_argument("--load", type=int, default=0, help="send N requests to ourselves, then exit")
    p.add_argument("--concurrency", type=int, default=16)
    args = p.parse_args(argv)
    if args.load:
        args.port = 0 if args.port == 8501 else args.port
    return args


if __name__ == "__main__":
    args = parse_args()
    try:
        import uvloop

        uvloop.run(main(args))
    except ImportError:
        asyncio.run(main(args))
