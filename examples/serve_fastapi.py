"""Embed an asyncflow model in a FastAPI service: an `async def` endpoint awaits
`model.predict(...)` on uvicorn's own event loop, no thread hop, no second server.

    .venv/bin/pip install -e '.[fastapi]'                  # FastAPI and uvicorn
    .venv/bin/python examples/serve_fastapi.py             # serve on 127.0.0.1:8000
    .venv/bin/python examples/serve_fastapi.py --export_dir /models/m/1
    .venv/bin/python examples/serve_fastapi.py --selftest  # start, call it, stop

The model is loaded in the application's lifespan, on the loop that will serve it
(`await asyncflow.serving.aload(export_dir)` for a SavedModel; without one, a small
model built in-process with `ServableModel.from_session`), and closed at shutdown.
Concurrent requests share the loop: while one request's step runs, the others' I/O
waits, as in any asyncio service; `batching={"max_batch_size": 32}` merges concurrent
requests into one step instead.  Errors keep TF's meaning: a bad input is a 400 with
the InvalidArgumentError's message.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

import numpy as np
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

import asyncflow as af
from asyncflow import errors
from asyncflow.serving import ServableModel, aload


async def build_model() -> ServableModel:
    """y = x @ [[1], [-2]] + 0.5, served as signature "serving_default"."""
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 2], name="x")
        w = af.constant(np.array([[1.0], [-2.0]], np.float32))
        y = af.add(af.matmul(x, w), 0.5, name="y")
    sess = af.Session(graph=g)
    await sess.arun([])  # bind the session to this (uvicorn's) loop
    return ServableModel.from_session(sess, {"x": x}, {"y": y})


class PredictRequest(BaseModel):
    instances: list  # rows of the model's one input


def make_app(export_dir: str | None = None) -> FastAPI:
    state: dict = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        model = await aload(export_dir) if export_dir else await build_model()
        state["model"] = model
        try:
            yield
        finally:
            await model.aclose()

    app = FastAPI(title="asyncflow model", lifespan=lifespan)

    @app.post("/predict")
    async def predict(body: PredictRequest) -> dict:
        model: ServableModel = state["model"]
        (name,) = model.signatures[model.default_signature].inputs  # its one input
        try:
            outputs = await model.predict({name: body.instances})
        except errors.InvalidArgumentError as e:
            raise HTTPException(status_code=400, detail=e.message) from None
        return {"predictions": {k: v.tolist() for k, v in outputs.items()}}

    @app.get("/healthz")
    async def health() -> dict:
        return {"ready": "model" in state}

    return app


async def main(args) -> None:
    import uvicorn

    config = uvicorn.Config(
        make_app(args.export_dir),
        host=args.host,
        port=0 if args.selftest else args.port,
        log_level="warning",
        lifespan="on",
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:  # (startup: the lifespan has loaded the model)
        if serving.done():
            await serving  # startup failed: its error
            return
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    print(f"serving on http://{args.host}:{port}/predict")
    if not args.selftest:
        await serving
        return
    try:
        from aiohttp import ClientSession

        async with ClientSession() as http:
            url = f"http://{args.host}:{port}"
            async with http.post(url + "/predict", json={"instances": [[1, 2], [3, 0.5]]}) as r:
                print(r.status, await r.text())
            async with http.post(url + "/predict", json={"instances": [[1, 2, 3]]}) as r:
                print(r.status, (await r.json())["detail"][:40])
            async with http.get(url + "/healthz") as r:
                print(r.status, await r.text())
    finally:
        server.should_exit = True
        await serving


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--export_dir", default=None, help="a TF1 SavedModel (default: built here)")
    p.add_argument("--selftest", action="store_true")
    asyncio.run(main(p.parse_args()))
