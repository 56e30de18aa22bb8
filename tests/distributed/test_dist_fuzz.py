"""The wire protocol under hostile input: no crash, no hang, bounded memory.

An unauthenticated peer is refused before any request is read; an authenticated one
sending random, truncated, oversized or malformed frames gets its connection closed or
an error answer, and the task keeps serving.  ASYNCFLOW_FUZZ_SECONDS sets how long the
random phase runs (2 s here; benchmarks/distributed/fuzz.sh runs it for a minute)."""

import asyncio
import hashlib
import hmac
import json
import os
import random
import resource
import secrets

import numpy as np
import pytest

import asyncflow as af
from asyncflow.distributed import wire

pytestmark = pytest.mark.timeout(180)

SECONDS = float(os.environ.get("ASYNCFLOW_FUZZ_SECONDS", "2"))
SECRET = os.environ["ASYNCFLOW_CLUSTER_SECRET"].encode()


@pytest.fixture(scope="module")
def server():
    s = af.train.Server.create_local_server()
    yield s
    s.stop()


def _port(server) -> int:
    return int(server.target.rsplit(":", 1)[1])


async def _open(server):
    return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", _port(server)), 5)


async def _authed(server):
    r, w = await _open(server)
    hello = await asyncio.wait_for(r.readexactly(wire.SERVER_HELLO.size), 5)
    _, _, sn, _ = wire.SERVER_HELLO.unpack(hello)
    cn = secrets.token_bytes(32)
    mac = hmac.new(SECRET, b"c" + sn + cn, hashlib.sha256).digest()
    w.write(wire.CLIENT_HELLO.pack(b"AFC", wire.VERSION, cn, mac))
    await asyncio.wait_for(r.readexactly(wire.SERVER_PROOF.size), 5)
    return r, w


async def _closed_by_peer(r) -> bool:
    """Whether the server closes the connection (reading whatever it answers)."""
    try:
        while await asyncio.wait_for(r.read(1 << 16), 5):
            pass
    except ConnectionError:
        return True
    except TimeoutError:
        return False
    return True


def _frame(kind, meta=b"", payload=b"", rid=1, version=wire.VERSION, mlen=None, plen=None):
    head = wire.HEADER.pack(
        wire.MAGIC,
        version,
        kind,
        rid,
        len(meta) if mlen is None else mlen,
        len(payload) if plen is None else plen,
    )
    return head + meta + payload


def test_unauthenticated_peer_is_refused_before_any_request_is_read(server):
    service = server._service
    runs_before = service.runs

    async def go():
        # A peer that skips the hello and sends a request straight away.
        r, w = await _open(server)
        await r.readexactly(wire.SERVER_HELLO.size)
        w.write(_frame(wire.STATUS, b"{}") * 8)
        assert await _closed_by_peer(r)
        # A wrong secret: the hello's MAC does not check out.
        r, w = await _open(server)
        await r.readexactly(wire.SERVER_HELLO.size)
        w.write(wire.CLIENT_HELLO.pack(b"AFC", wire.VERSION, bytes(32), bytes(32)))
        w.write(_frame(wire.STATUS, b"{}"))
        data = b""
        try:
            data = await asyncio.wait_for(r.read(1 << 16), 5)
        except ConnectionError:
            pass  # (closed with our frame unread: a reset)
        assert data == b""  # no proof, no answer: closed
        # A client with the wrong secret is told so.
        with pytest.raises(af.errors.OpError):
            await wire.connect("127.0.0.1", _port(server), b"wrong", lambda *a: None)

    asyncio.run(go())
    assert service.runs == runs_before
    with af.Graph().as_default(), af.Session(server.target) as sess:  # still serving
        assert sess.run(af.constant(3) + 4) == 7


def _random_frames(rng: random.Random):
    kinds = list(range(0, 14))
    metas = [
        b"",
        b"{}",
        b"[]",
        b"null",
        b'{"h": 1, "s": 5}',
        b'{"h": "x", "s": [1]}',
        b'{"s": 1, "k": "a;b;c;d;e", "t": [[0, "float32", [2], 8]]}',
        b'{"h": 1, "s": 2, "t": [[0, "float32", [1000000000], 4000000000]]}',
        b'{"h": 1, "s": 2, "t": [[1, [3], 4]]}',
        b'{"h": 1, "p": [[[0, 0]]], "fd": [1], "fm": [[0, 0]], "t": [[0, "uint8", [3], 3]]}',
        b'{"t": [[7]]}',
        json.dumps({"h": 1, "t": [[0, "object", [1], 8]]}).encode(),
        bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200))),
    ]
    while True:
        choice = rng.random()
        meta = rng.choice(metas)
        if meta and rng.random() < 0.5:
            meta = meta + b" " * (-len(meta) % 64)
        payload = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 3, 8, 64, 300])))
        kind = rng.choice(kinds)
        if choice < 0.15:  # pure noise
            yield bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 500)))
        elif choice < 0.3:  # truncated
            f = _frame(kind, meta, payload)
            yield f[: rng.randint(1, len(f))]
        elif choice < 0.45:  # oversized or lying lengths
            yield _frame(
                kind,
                meta,
                payload,
                mlen=rng.choice([wire.MAX_META + 1, 1 << 31, len(meta) + 5]),
                plen=rng.choice([wire.MAX_PAYLOAD + 1, 1 << 40, 1 << 20, len(payload)]),
            )
        elif choice < 0.5:
            yield _frame(kind, meta, payload, version=rng.randint(0, 255))
        else:
            yield _frame(kind, meta, payload, rid=rng.getrandbits(32))


def test_random_truncated_and_oversized_frames(server):
    rng = random.Random(1234)
    frames = _random_frames(rng)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    async def go():
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SECONDS
        n = 0
        while loop.time() < deadline:
            r, w = await _authed(server)
            try:
                for _ in range(rng.randint(1, 20)):
                    w.write(next(frames))
                    n += 1
                    await w.drain()
                if rng.random() < 0.3:
                    w.write_eof()
                # Whatever the task answers, it answers or closes, and never hangs.
                await asyncio.wait_for(r.read(1 << 16), 0.2)
            except (OSError, TimeoutError):  # (ConnectionError is an OSError)
                pass
            w.close()
        return n

    sent = asyncio.run(go())
    assert sent > 0
    # Still serving, correctly.
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [3])
        with af.Session(server.target) as sess:
            np.testing.assert_array_equal(sess.run(x * 2, {x: [1, 2, 3]}), [2, 4, 6])
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert grew_mb < 200  # lengths are checked before allocating; big bodies stay virtual


def test_tensor_codec_round_trip_and_rejects_lies():
    values = [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.array([b"a", b"", b"xyz"], dtype=object),
        np.array(True),
        np.zeros((0, 4), np.int64),
        None,
    ]
    descs, bufs, n = wire.encode_tensors(values)
    payload = memoryview(b"".join(bytes(b) for b in bufs))
    assert len(payload) == n
    out = wire.decode_tensors(json.loads(json.dumps(descs)), payload)
    np.testing.assert_array_equal(out[0], values[0])
    assert list(out[1]) == [b"a", b"", b"xyz"] and out[2] == True  # noqa: E712
    assert out[3].shape == (0, 4) and out[4] is None
    for lie in (
        [[0, "float32", [2, 3], 25]],
        [[0, "float32", [1 << 40], 1 << 42]],
        [[0, "object", [1], 8]],
        [[1, [3], 10]],
        [[0, "float32", [-1], 4]],
        "x",
        [[9]],
    ):
        with pytest.raises(af.errors.InvalidArgumentError):
            wire.decode_tensors(lie, payload)
