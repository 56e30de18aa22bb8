"""One unbatched serving step, in-process: CPU time per request of each layer a REST or
gRPC predict goes through, beside NumPy computing the same model.

The model is serving_rest_bench's digits MLP 64-128-10 (a TF1 SavedModel loaded with
`asyncflow.serving.aload`), fed one row.  Rows, each the median of `--rounds`
alternated rounds of `--n` calls (`time.process_time`, so other processes' load counts little):

- ``Session.arun``: the general step (`await sess.arun(fetches, feed_dict)`);
- ``make_async_callable``: the prepared step serving uses (fetches, feeds and plan key
  resolved once; `Session.make_async_callable`);
- ``ServableModel.predict``: what a request's handler awaits (input checks included);
- ``master.run_step``: the step alone on the worker's interpreter, no client layer;
- ``straight_line``: the step alone as the prepared callable runs a small pure plan
  (`asyncflow.straight_line.Program.run`);
- ``numpy``: the model in NumPy, as the issue's baseline server computes it;
- ``REST layers``: what the REST handler adds around `ServableModel.predict` for one
  `{"instances": [[64 floats]]}` body (parse with orjson, inputs to arrays, outputs to
  the JSON response);
- ``numpy handler``: the baseline server's whole handler (json.loads, np.asarray, the
  model, json.dumps of tolist(), the Response): compare with ``ServableModel.predict``
  plus ``REST layers``.

Each call is followed by a trip through the loop (as requests arrive in a server), so
no row pays the loop-sharing yields that back-to-back steps of one task would.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/serving_step_bench.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serving_rest_bench import export, make_weights, numpy_model  # noqa: E402


async def measure(export_dir: str, weights: dict, n: int, rounds: int) -> dict:
    from aiohttp import web

    from asyncflow import serving
    from asyncflow.serving import rest

    model = await serving.aload(export_dir)
    sess = model.session
    sig = model.signatures[model.default_signature]
    x = np.random.default_rng(0).random((1, 64), dtype=np.float32)
    feed = {sig.inputs["x"]: x}
    prepared = sess.make_async_callable(sig.outputs, [sig.inputs["x"]])
    mapper, feeds, values = sess._feeds_and_fetches(sig.outputs, feed)
    plan = sess._master.plan(feeds, mapper.elements)

    async def numpy_call():
        return numpy_model(weights, x)

    program = sess._straight_line(plan) if hasattr(sess, "_straight_line") else None

    async def straight_line():
        return await program.run(0, values)

    body = json.dumps({"instances": x.tolist()}).encode()
    outputs = await model.predict({"x": x})

    async def rest_layers():
        doc = rest.parse_body(body)
        rest._row_inputs(doc["instances"], sig)
        payload = {"predictions": rest.predictions_row(outputs)}
        return rest._json_response(payload, outputs=outputs)

    async def numpy_handler():
        doc = json.loads(body)
        probs = numpy_model(weights, np.asarray(doc["instances"], dtype=np.float32))
        return web.Response(
            body=json.dumps({"predictions": probs.tolist()}).encode(),
            content_type="application/json",
        )

    cases = {
        "Session.arun": lambda: sess.arun(sig.outputs, feed),
        "make_async_callable": lambda: prepared(x),
        "ServableModel.predict": lambda: model.predict({"x": x}, deadline_s=30.0),
        "master.run_step": lambda: sess._master.run_step(plan, values, None),
        "straight_line": straight_line,
        "numpy": numpy_call,
        "REST layers": rest_layers,
        "numpy handler": numpy_handler,
    }
    if program is None:
        del cases["straight_line"]
    np.testing.assert_allclose(
        (await prepared(x))["probs"], numpy_model(weights, x), rtol=1e-5, atol=1e-6
    )
    times: dict[str, list] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, call in cases.items():
            for _ in range(50):
                await call()
            t0 = time.process_time()
            for _ in range(n):
                await call()
                await asyncio.sleep(0)
            times[name].append((time.process_time() - t0) / n * 1e6)
    # The loop trip alone, taken off every row.
    t0 = time.process_time()
    for _ in range(n):
        await asyncio.sleep(0)
    trip = (time.process_time() - t0) / n * 1e6
    await model.aclose()
    return {name: sorted(ts)[len(ts) // 2] - trip for name, ts in times.items()}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5, help="alternated rounds (median)")
    args = p.parse_args(argv)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")  # as the model server runs
    weights = make_weights()
    with tempfile.TemporaryDirectory() as tmp:
        export(weights, tmp)
        try:
            import uvloop
        except ImportError:
            result = asyncio.run(measure(os.path.join(tmp, "1"), weights, args.n, args.rounds))
        else:
            result = uvloop.run(measure(os.path.join(tmp, "1"), weights, args.n, args.rounds))
    base = result["numpy"]
    print(f"{'layer':24} {'cpu us/request':>15} {'x numpy':>8}")
    for name, us in result.items():
        print(f"{name:24} {us:15.1f} {us / base:8.1f}")


if __name__ == "__main__":
    main()
