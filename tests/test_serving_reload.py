"""Hot reload (asyncflow.serving.manager): versions appear and go under a served base path.

Versions 1 and 2 of `m` differ in their weights (tests/test_serving_rest.py's export), so
which version answered shows in the numbers.  Each test lays out a fresh base path by
copying those exports, and drives the manager with `poll_once()` (no timers).  A request
is held in flight by gating its version's `Session.arun` on an event.
"""

import asyncio
import json
import shutil

import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer
from test_serving_rest import X, _ref, base_path  # noqa: F401 (fixture)

import asyncflow as af
from asyncflow.serving import registry as reg_mod
from asyncflow.serving import rest, server
from asyncflow.serving.config import ModelConfig
from asyncflow.serving.manager import VersionManager


@pytest.fixture
def layout(base_path, tmp_path):  # noqa: F811
    """add(v, source) copies export `source` as version `v` of a fresh base path."""
    base = tmp_path / "m"
    base.mkdir()

    def add(version, source=None):
        shutil.copytree(f"{base_path}/{source or version}", base / str(version))

    return base, add


@pytest.fixture
async def served(layout):
    base, add = layout
    registry = reg_mod.ModelRegistry()
    managers = []

    def manager(policy=("latest", 1)):
        m = VersionManager(registry, [ModelConfig("m", str(base), policy)], poll_wait_s=0)
        managers.append(m)
        return m

    app = rest.make_app(registry)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield registry, manager, add, base, client
    for m in managers:
        await m.aclose()
    await registry.aclose()


async def _predict(client, path="m"):
    async with asyncio.timeout(30):
        resp = await client.post(f"/v1/models/{path}:predict", json={"instances": X})
        return resp.status, json.loads(await resp.text())


def _version_of(body):
    got = np.asarray(body["predictions"], np.float32)
    for version in (1, 2):
        if np.allclose(got, _ref(X, version), rtol=1e-6):
            return version
    raise AssertionError(f"answer from no known version: {got}")


def _states(registry):
    return {v: state for v, state, _ in registry.status("m")}


async def test_new_version_swaps_in_and_the_old_drains(served):
    registry, manager, add, base, client = served
    mgr = manager()
    add(1)
    await mgr.poll_once()
    assert _states(registry) == {1: "AVAILABLE"}
    _, v1 = registry.get("m")

    entered, gate = asyncio.Event(), asyncio.Event()
    signature = v1.signatures["serving_default"]
    step = signature.step

    def gated_step(session):
        run = step(session)

        async def gated(feed):
            entered.set()
            await gate.wait()
            return await run(feed)

        return gated

    signature.step = gated_step
    held = asyncio.create_task(_predict(client))
    await entered.wait()
    assert v1.in_flight == 1

    add(2)
    await mgr.poll_once()
    assert _states(registry) == {2: "AVAILABLE", 1: "UNLOADING"}
    status, body = await _predict(client)  # new requests go to version 2 at once
    assert status == 200 and _version_of(body) == 2
    status, _ = await _predict(client, "m/versions/1")
    assert status == 404
    assert not held.done()

    gate.set()
    status, body = await held  # the in-flight request finishes on version 1
    assert status == 200 and _version_of(body) == 1
    await mgr.wait_unloaded()
    assert _states(registry) == {2: "AVAILABLE", 1: "END"}
    assert v1.session._closed


async def test_no_request_fails_while_a_version_loads_under_load(served):
    registry, manager, add, base, client = served
    mgr = manager()
    add(1)
    await mgr.poll_once()
    seen = {1: 0, 2: 0}
    failures = []
    warm, done, stop = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def worker():
        while not stop.is_set():
            status, body = await _predict(client)
            if status != 200:
                failures.append(body)
                continue
            seen[_version_of(body)] += 1
            if seen[1] >= 16:
                warm.set()
            if seen[2] >= 16:
                done.set()

    workers = [asyncio.create_task(worker()) for _ in range(8)]
    await warm.wait()
    add(2)  # copied and loaded while the workers keep asking
    await mgr.poll_once()
    await done.wait()
    stop.set()
    await asyncio.gather(*workers)
    await mgr.wait_unloaded()
    assert failures == []
    assert seen[1] >= 16 and seen[2] >= 16
    assert _states(registry) == {2: "AVAILABLE", 1: "END"}


async def test_a_broken_version_is_reported_and_does_not_replace_the_working_one(served):
    registry, manager, add, base, client = served
    mgr = manager()
    add(1)
    await mgr.poll_once()
    (base / "3").mkdir()
    (base / "3" / "saved_model.pb").write_bytes(b"\x0a\xff\xff not a SavedModel")
    await mgr.poll_once()
    status, body = await _predict(client)
    assert status == 200 and _version_of(body) == 1
    resp = await client.get("/v1/models/m")
    body = json.loads(await resp.text())
    entries = {e["version"]: e for e in body["model_version_status"]}
    assert entries["1"]["state"] == "AVAILABLE"
    assert entries["3"]["state"] == "END"
    assert entries["3"]["status"]["error_code"] not in ("OK", "")
    assert entries["3"]["status"]["error_message"]
    await mgr.poll_once()  # not retried, still not served
    assert registry.state("m", 3)[0] == "END"
    assert registry.get("m")[0] == 1


async def test_policies_under_new_and_removed_versions(served):
    registry, manager, add, base, client = served
    add(1)
    add(2)
    add(3, source=1)
    specific = manager(("specific", (1,)))
    await specific.poll_once()
    assert sorted(registry.versions("m")) == [1]
    specific.configs = [ModelConfig("m", str(base), ("latest", 2))]
    await specific.poll_once()
    await specific.wait_unloaded()
    assert sorted(registry.versions("m")) == [2, 3]
    assert _states(registry)[1] == "END"
    specific.configs = [ModelConfig("m", str(base), ("all",))]
    await specific.poll_once()
    assert sorted(registry.versions("m")) == [1, 2, 3]
    status, body = await _predict(client)
    assert status == 200 and _version_of(body) == 1  # version 3 holds version 1's weights
    status, body = await _predict(client, "m/versions/2")
    assert _version_of(body) == 2

    shutil.rmtree(base / "3")  # a removed directory unloads its version
    await specific.poll_once()
    await specific.wait_unloaded()
    assert sorted(registry.versions("m")) == [1, 2]
    assert _states(registry) == {3: "END", 2: "AVAILABLE", 1: "AVAILABLE"}


async def test_command_line_fails_fast_on_a_model_without_versions(layout):
    base, add = layout
    args = server.parse_args(
        ["--rest_api_port=0", "--port=0", "--model_name=m", f"--model_base_path={base}"]
    )
    assert args.file_system_poll_wait_seconds == 1.0
    with pytest.raises(af.errors.NotFoundError, match="No versions of servable m"):
        async with asyncio.timeout(30):
            await server.serve(args, None, asyncio.Event())
    (base / "1").mkdir()
    (base / "1" / "saved_model.pb").write_bytes(b"\x0a\xff\xff broken")
    with pytest.raises(af.errors.OpError):
        async with asyncio.timeout(30):
            await server.serve(args, None, asyncio.Event())


async def test_the_server_freezes_what_lives_long_and_frees_an_unloaded_version(layout):
    # python -m asyncflow.serving freezes the objects alive once its models are loaded
    # (the cycle collector's full passes skip them: no 35-50 ms pauses under load), and
    # after a version unloads collects once, so that version is freed, not kept frozen.
    import gc
    import weakref

    base, add = layout
    add(1)
    args = server.parse_args(
        ["--rest_api_port=0", "--port=0", "--rest_api_host=127.0.0.1", "--model_name=m",
         f"--model_base_path={base}", "--file_system_poll_wait_seconds=0.05"]
    )  # fmt: skip
    ready = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    serving = asyncio.create_task(server.serve(args, ready, stop))
    try:
        async with asyncio.timeout(60):
            srv = await ready
            assert gc.get_freeze_count() > 0
            _, v1 = srv.registry.get("m")
            old = weakref.ref(v1.session)
            del v1
            add(2)
            while _states(srv.registry) != {2: "AVAILABLE", 1: "END"}:  # noqa: ASYNC110
                await asyncio.sleep(0.02)  # (the server's own poller swaps the versions)
            assert old() is None  # collected by the unload's pass, not left frozen
            assert gc.get_freeze_count() > 0
    finally:
        stop.set()
        await serving
    assert gc.get_freeze_count() == 0  # serve() leaves the process as it found it
