"""tf.data service, production parts: compressed elements (snappy, bounded on read),
batched `get` replies, static sharding over the dispatcher's fixed worker list against
TF 2.21's recorded elements (tests/fixtures/data_service_more_tf.json, recorded by
tests/fixtures/data_service_more_cases.py), a register op run once for a one-shot
iterator, and a worker lost midway of a parallel_epochs read."""

import json
import pathlib
import socket
import sys
import threading

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors
from asyncflow.data.service import client as client_module
from asyncflow.data.service import protocol
from asyncflow.distributed import wire

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
from data_service_more_cases import STATIC, pipelines  # noqa: E402

pytestmark = pytest.mark.timeout(30)

svc = tf.data.experimental.service
TF = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "data_service_more_tf.json").read_text()
)


def _read_all(ds, limit=10_000):
    nxt = tf.data.make_one_shot_iterator(ds).get_next()
    out = []
    with tf.Session() as sess:
        for _ in range(limit):
            try:
                out.append(sess.run(nxt))
            except errors.OutOfRangeError:
                break
    return out


def _plain(v):
    v = np.asarray(v).tolist() if not isinstance(v, tuple) else [_plain(x) for x in v]
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [_plain(x) if isinstance(x, list | bytes) else x for x in v]
    return v


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- compression --------------------------------------------------------------------------

_ELEMENTS = [
    (np.array(3, np.int64),),
    (np.arange(6, dtype=np.float32).reshape(2, 3), np.array([b"ab", b"", b"c"], object)),
    (np.zeros((0, 4), np.int32), np.array(b"x" * 1000, object), np.array(True)),
]


@pytest.mark.parametrize("compress", [False, True])
def test_pack_round_trips_any_element(compress):
    elems = [_ELEMENTS[1], _ELEMENTS[1]] if compress else _ELEMENTS[:1]
    for batch in ([_ELEMENTS[0]], [_ELEMENTS[1], _ELEMENTS[1]], [_ELEMENTS[2]], elems):
        meta, tensors = protocol.pack(batch, compress)
        descs, bufs, _ = wire.encode_tensors(tensors)
        got = protocol.unpack({**meta, "t": descs}, memoryview(b"".join(bufs)))
        assert len(got) == len(batch)
        for g, want in zip(got, batch, strict=True):
            assert [(x.dtype, x.shape) for x in g] == [(x.dtype, x.shape) for x in want]
            assert all(np.array_equal(a, b) for a, b in zip(g, want, strict=True))
    if compress:  # (a compressible element travels smaller)
        big = [(np.zeros(1 << 16, np.float32),)]
        assert protocol.pack(big, True)[1][0].nbytes < big[0][0].nbytes // 10


def _packed(meta_changes, block=None):
    meta, tensors = protocol.pack([_ELEMENTS[1]], True)
    if block is not None:
        tensors = [np.frombuffer(block, np.uint8)]
    descs, bufs, _ = wire.encode_tensors(tensors)
    return {**meta, "t": descs, **meta_changes}, memoryview(b"".join(bufs))


@pytest.mark.parametrize(
    "changes, block",
    [
        ({"zn": 10}, None),  # (a smaller size than the block holds)
        ({"zn": 1 << 20}, None),  # (a larger one)
        ({"zn": wire.MAX_PAYLOAD + 1}, None),  # (over the limit: refused before allocating)
        ({}, b"\x30garbage-not-snappy"),
        ({"n": 3}, None),  # (2 components: not a multiple of the count)
        ({"n": 0}, None),
    ],
)
def test_unpack_refuses_bad_blocks(changes, block):
    meta, payload = _packed(changes, block)
    with pytest.raises(errors.InvalidArgumentError, match="Malformed"):
        protocol.unpack(meta, payload)


def test_register_metadata_as_tf():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(3)
        for c, want in TF["metadata"].items():
            c = None if c == "None" else c
            op = svc.register_dataset("grpc://localhost:1", ds, compression=c).op
            assert list(op.get_attr("metadata")) == want
            got = client_module.compression_of(op.get_attr("metadata"))
            assert got == want[1]


@pytest.fixture
def service1():
    d = svc.DispatchServer()
    w = svc.WorkerServer(svc.WorkerConfig(dispatcher_address=d.target[7:]))
    yield d
    w._stop()
    d._stop()


@pytest.mark.parametrize("compression", ["AUTO", None])
def test_compressed_elements_read_as_sent(service1, compression):
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices(
            (np.arange(5, dtype=np.int64), [b"a", b"bb", b"", b"dddd", b"e"])
        ).map(lambda x, s: {"x": x * 2, "s": s, "v": tf.fill([3], x)})
        ds = ds.apply(svc.distribute("parallel_epochs", service1.target, compression=compression))
        got = _read_all(ds)
    assert [int(e["x"]) for e in got] == [0, 2, 4, 6, 8]
    assert [e["s"] for e in got] == [b"a", b"bb", b"", b"dddd", b"e"]
    assert [e["v"].tolist() for e in got] == [[i] * 3 for i in range(5)]
    assert service1._service.compressed == (
        set(service1._service.datasets) if compression else set()
    )


def test_one_shot_iterator_registers_once(service1):
    """TF builds a one-shot iterator's dataset once: one registration, not one a step."""
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(20).apply(svc.distribute("parallel_epochs", service1.target))
        assert [int(v) for v in _read_all(ds)] == list(range(20))
    assert len(service1._service.datasets) == 1


@pytest.mark.parametrize("outstanding", [None, 1, 3])
def test_max_outstanding_requests_bounds_the_fetch(service1, outstanding):
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(9).apply(
            svc.distribute(
                "parallel_epochs", service1.target, max_outstanding_requests=outstanding
            )
        )
        assert [int(v) for v in _read_all(ds)] == list(range(9))
    assert client_module._flow(-1, 2) == (client_module._DEPTH, client_module._BATCH)
    assert client_module._flow(1, 2) == (1, 1)
    assert client_module._flow(8, 2) == (2, 2)


# -- static sharding ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(STATIC))
def test_static_sharding_as_tf(name, tmp_path):
    policy, pipeline, started = STATIC[name]
    want = TF["static"][name]
    ports = [_free_port() for _ in range(2)]
    addrs = [f"localhost:{p}" for p in ports]
    d = svc.DispatchServer(svc.DispatcherConfig(worker_addresses=addrs))
    workers = [
        svc.WorkerServer(
            svc.WorkerConfig(
                dispatcher_address=d.target[7:], port=ports[i], worker_address=addrs[i]
            )
        )
        for i in started
    ]
    try:
        with tf.Graph().as_default():
            ds = pipelines(tf, str(tmp_path))[pipeline]()
            ds = ds.apply(svc.distribute(getattr(svc.ShardingPolicy, policy), d.target))
            if "error" in want:
                with pytest.raises(getattr(errors, want["error"][0]), match="unshardable"):
                    _read_all(ds)
                return
            got = sorted((_plain(e) for e in _read_all(ds)), key=json.dumps)
    finally:
        for w in workers:
            w._stop()
        d._stop()
    assert got == want["elements"]


def test_worker_addresses_must_be_strings():
    with pytest.raises(TypeError):
        svc.DispatchServer(svc.DispatcherConfig(worker_addresses="localhost:1"))


# -- a worker lost midway ------------------------------------------------------------------


def test_worker_lost_midway_parallel_epochs():
    """parallel_epochs, two workers, one stopped mid-read: the read ends (no hang) with
    the other worker's whole pass and a prefix of the stopped one's (TF: its client
    drops a worker the dispatcher no longer lists and reads on from the rest)."""
    d = svc.DispatchServer()
    workers = [
        svc.WorkerServer(svc.WorkerConfig(dispatcher_address=d.target[7:])) for _ in range(2)
    ]
    try:
        with tf.Graph().as_default():
            ds = tf.data.Dataset.range(400).apply(
                svc.distribute("parallel_epochs", d.target, max_outstanding_requests=2)
            )
            nxt = tf.data.make_one_shot_iterator(ds).get_next()
            got = []
            with tf.Session() as sess:
                for _ in range(10):
                    got.append(int(sess.run(nxt)))
                stopper = threading.Thread(target=workers[0]._stop)
                stopper.start()
                stopper.join()
                while True:
                    try:
                        got.append(int(sess.run(nxt)))
                    except errors.OutOfRangeError:
                        break
    finally:
        for w in workers:
            w._stop()
        d._stop()
    counts = np.bincount(got, minlength=400)
    assert counts.min() >= 1 and counts.max() <= 2  # one whole pass, at most two
    assert 400 < len(got) < 800


def test_dispatcher_lost_midway_reads_on_from_the_worker(monkeypatch):
    """The dispatcher stopped mid-read (no journal): the consumer reads on from its
    worker, as TF's (which retries the dispatcher meanwhile), and fails with
    UnavailableError only where it needs the dispatcher (the end), in bounded time.
    (A restarted fault-tolerant dispatcher: tests/test_data_service_ft.py.)"""
    monkeypatch.setattr(client_module, "DISPATCHER_WAIT_S", 0.3)
    d = svc.DispatchServer()
    w = svc.WorkerServer(svc.WorkerConfig(dispatcher_address=d.target[7:]))
    try:
        with tf.Graph().as_default():
            ds = (
                tf.data.Dataset.range(10)
                .repeat(3)
                .apply(svc.distribute("parallel_epochs", d.target, max_outstanding_requests=1))
            )
            nxt = tf.data.make_one_shot_iterator(ds).get_next()
            with tf.Session() as sess:
                assert int(sess.run(nxt)) == 0
                d._stop()
                got = [int(sess.run(nxt)) for _ in range(29)]
                assert got == list(range(1, 10)) + list(range(10)) * 2
                with pytest.raises(errors.UnavailableError):
                    sess.run(nxt)
    finally:
        w._stop()
        d._stop()


def test_shard_hint_outside_the_service_fails_as_tf():
    """shard(SHARD_HINT, SHARD_HINT) is made (its graph can be registered) and refused
    when iterated outside a HINT read, as TF 2.21 (FailedPreconditionError)."""
    hint = tf.data.experimental.SHARD_HINT
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(4).shard(hint, hint)
        with pytest.raises(errors.FailedPreconditionError, match="SHARD_HINT"):
            _read_all(ds)
