"""Embed asyncflow's TF Serving REST API in your own aiohttp application.

    .venv/bin/python examples/serve_aiohttp.py            # serve on 127.0.0.1:8501
    .venv/bin/python examples/serve_aiohttp.py --selftest # start, call it once, stop

The model runs on the application's own loop (`Session.arun`): `rest.make_app` is an
ordinary aiohttp sub-application, mounted here under `/` beside a route of the service's
own.  A SavedModel directory would be loaded with `asyncflow.serving.server.load_latest`;
this example serves a model built in-process with `ServableModel.from_session`.
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np
from aiohttp import ClientSession, web

import asyncflow as af
from asyncflow.serving import ServableModel, rest


async def build_model() -> ServableModel:
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 2], name="x")
        w = af.constant(np.array([[1.0], [-2.0]], np.float32))
        y = af.add(af.matmul(x, w), 0.5, name="y")
    sess = af.Session(graph=g)
    await sess.arun([])  # bind the session to this loop
    return ServableModel.from_session(sess, {"x": x}, {"y": y})


async def main(args):
    registry = rest.ModelRegistry()
    registry.add("linear", 1, await build_model())
    app = web.Application()

    async def health(request):
        return web.json_response({"models": registry.names()})

    app.router.add_get("/healthz", health)
    app.add_subapp("/v1/", rest.make_app(registry))  # TF Serving's /v1/models/... URLs
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, args.host, 0 if args.selftest else args.port)
    await site.start()
    port = runner.addresses[0][1]
    print(f"serving on http://{args.host}:{port}/v1/models/linear:predict")
    try:
        if args.selftest:
            async with ClientSession() as http:
                url = f"http://{args.host}:{port}/v1/models/linear:predict"
                async with http.post(url, json={"instances": [[1, 2], [3, 0.5]]}) as r:
                    print(r.status, await r.text())
                async with http.get(f"http://{args.host}:{port}/healthz") as r:
                    print(r.status, await r.text())
        else:
            await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        await registry.aclose()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--selftest", action="store_true")
    asyncio.run(main(p.parse_args()))
