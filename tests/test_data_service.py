"""tf.data.experimental.service: a dispatcher and workers in this process, read by
sessions, against TF 2.21's recorded behaviour (tests/fixtures/data_service_tf.json,
recorded by tests/fixtures/data_service_cases.py): the elements each processing mode
gives, build-time errors and messages, config defaults; and what TF's tests check of
its own service: job sharing by name, coordinated reads, a worker lost midway, a peer
without the cluster secret refused, bounded message sizes, everything on one loop."""

import asyncio
import base64
import json
import pathlib
import re
import socket
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors
from asyncflow.data.service import client as client_module
from asyncflow.data.service import protocol
from asyncflow.data.service import worker as worker_module
from asyncflow.data.service.dispatcher import Dispatcher
from asyncflow.data.service.worker import Worker
from asyncflow.distributed import wire

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
from data_service_cases import _SERVICE, CASES, ERRORS, PIPELINES  # noqa: E402
from record_data_service_rejoin_tf import MODES as REJOIN_MODES  # noqa: E402
from record_data_service_rejoin_tf import _cases as rejoin_cases  # noqa: E402

pytestmark = pytest.mark.timeout(30)

svc = tf.data.experimental.service
TF = json.loads((pathlib.Path(__file__).parent / "fixtures" / "data_service_tf.json").read_text())
TF_REJOIN = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "data_service_rejoin_tf.json").read_text()
)


class _Service:
    """A dispatcher and `n` workers (closed by `close`, workers first)."""

    def __init__(self, n: int):
        self.dispatcher = svc.DispatchServer()
        self.address = self.dispatcher.target.split("://")[1]
        self.workers = [self.add_worker() for _ in range(n)]

    def add_worker(self):
        return svc.WorkerServer(svc.WorkerConfig(dispatcher_address=self.address))

    def close(self):
        for w in self.workers:
            w._stop()
        self.dispatcher._stop()


@pytest.fixture
def service2():
    s = _Service(2)
    yield s
    s.close()


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


def _plain(x):
    if isinstance(x, tuple):
        return [_plain(v) for v in x]
    v = np.asarray(x).tolist()
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [e.decode() if isinstance(e, bytes) else e for e in v]
    return v


def _key(e):
    return json.dumps(e)


@pytest.mark.parametrize("name", sorted(CASES))
def test_elements_as_tf(name):
    src, mode, workers, kw, ordered = CASES[name]
    want = TF["cases"][name]["elements"]
    s = _Service(workers)
    try:
        if mode in ("OFF", "DYNAMIC"):
            mode = svc.ShardingPolicy[mode]
        with tf.Graph().as_default():
            ds = PIPELINES[src](tf).apply(svc.distribute(mode, s.dispatcher.target, **kw))
            got = [_plain(e) for e in _read_all(ds)]
    finally:
        s.close()
    if ordered == "zip":  # (pairs by timing: each worker pairs the splits it got)
        assert len(got) == len(want)
        assert sorted(e[-1] for e in got) == sorted(e[-1] for e in want)
        assert len({e[0] for e in got}) == len(got)
    elif ordered:
        assert got == want
    else:
        assert sorted(map(_key, got)) == sorted(map(_key, want))


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_build_errors_as_tf(name):
    mode, service, kw = ERRORS[name]
    want = TF["errors"][name]
    service = "grpc://localhost:5050" if service is _SERVICE else service
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(3)
        if want is None:
            ds.apply(svc.distribute(mode, service, **kw))
            return
        with pytest.raises(Exception) as info:  # noqa: B017 - its class is checked below
            ds.apply(svc.distribute(mode, service, **kw))
    assert type(info.value).__name__ == want[0]
    assert str(info.value) == want[1]


def test_register_dataset_as_tf(service2):
    want = TF["misc"]["register"]
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(3)
        a = svc.register_dataset(service2.dispatcher.target, ds)
        b = svc.register_dataset(service2.dispatcher.target, ds)
        c = svc.register_dataset(service2.dispatcher.target, ds, dataset_id="mine")
        assert (a.dtype.name, a.shape.as_list(), a.op.type) == (
            want["dtype"],
            want["shape"],
            want["op"],
        )
        with tf.Session() as sess:
            ids = [v.decode() for v in sess.run([a, b, c])]
    # TF: each register op registers anew (ids from 1000 up); a requested id is kept
    assert sorted(ids[:2]) == sorted(want["ids"][:2]) and ids[2] == want["ids"][2]


def test_configs_and_policy_as_tf():
    assert repr(svc.DispatcherConfig()) == TF["misc"]["dispatcher_config"]
    assert repr(svc.WorkerConfig(dispatcher_address="localhost:1")) == TF["misc"]["worker_config"]
    assert {p.name: p.value for p in svc.ShardingPolicy} == TF["misc"]["sharding_policy"]
    d = svc.DispatchServer()
    try:
        assert d.target.startswith(TF["misc"]["target"] + "://localhost:")
    finally:
        d._stop()


def test_compat_v1_names():
    want = {
        "CrossTrainerCache",
        "DispatcherConfig",
        "ShardingPolicy",
        "WorkerConfig",
        "distribute",
        "from_dataset_id",
        "register_dataset",
    }
    assert want <= set(dir(tf.compat.v1.data.experimental.service))


@pytest.mark.parametrize("mode", ["parallel_epochs", "distributed_epoch"])
@pytest.mark.parametrize("how", ["by_id", "by_op"])
def test_two_consumers_of_one_job_name_as_tf(service2, mode, how):
    """by_id: a dataset id registered once, two consumers of one named job share it
    (DYNAMIC: each element once between them).  by_op: each consumer's pass runs the
    register op, which registers anew (TF 2.21), so each has a job of its own."""
    want = TF["misc"]["shared"][f"{how}_{mode}"]
    target = service2.dispatcher.target
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(6)
        did = svc.register_dataset(target, ds)
        with tf.Session() as sess:
            if how == "by_id":
                did = sess.run(did).decode()
            nexts = [
                tf.data.make_one_shot_iterator(
                    svc.from_dataset_id(
                        mode, target, did, element_spec=ds.element_spec, job_name=f"j_{how}"
                    )
                ).get_next()
                for _ in range(2)
            ]
            seen, live = [[], []], [0, 1]
            while live:
                for k in list(live):
                    try:
                        seen[k].append(int(sess.run(nexts[k])))
                    except errors.OutOfRangeError:
                        live.remove(k)
    assert sorted(seen[0] + seen[1]) == want["union"]
    if how == "by_op":
        assert [sorted(x) for x in seen] == [sorted(x) for x in want["each"]]


@pytest.mark.parametrize("mode", REJOIN_MODES)
def test_a_pass_after_its_named_job_ended_as_tf(service2, mode):
    """A named job outlives its last consumer (TF's stays until its garbage collection):
    a later pass of its dataset id and name joins it and, as it ended, gets nothing
    (a second consumer, session or initialization); an anonymous job is each pass's
    own, and `repeat` over the read starts the job's next iteration."""
    got = rejoin_cases(tf, svc, service2.dispatcher.target, mode)
    assert got == TF_REJOIN[mode]


def test_register_runs_and_element_spec_as_tf(service2):
    with tf.Graph().as_default():
        a = svc.register_dataset(service2.dispatcher.target, tf.data.Dataset.range(3))
        with tf.Session() as sess:
            runs = [sess.run(a) for _ in range(3)]
        assert (len(set(runs)) == 3) == TF["misc"]["register_runs_distinct"]
        cls, msg = TF["misc"]["no_element_spec"]
        with pytest.raises(ValueError) as info:
            svc.from_dataset_id("parallel_epochs", service2.dispatcher.target, "1000")
        assert (type(info.value).__name__, str(info.value)) == (cls, msg)


def test_round_robin_needs_an_infinite_dataset_as_tf(service2):
    cls, msg = TF["misc"]["round_robin_finite"]
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(10).apply(
            svc.distribute(
                "parallel_epochs",
                service2.dispatcher.target,
                job_name="rr",
                consumer_index=0,
                num_consumers=2,
            )
        )
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        with tf.Session() as sess, pytest.raises(getattr(errors, cls)) as info:
            sess.run(nxt)
    assert msg.split("Failed to get element: ")[-1].split("\n")[0] in str(info.value)


def test_coordinated_reads_round_robin(service2):
    """num_consumers=2: each round comes from one worker, consumer c taking its c-th
    element; rounds alternate between the workers' tasks."""
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(1000).repeat()
        did = svc.register_dataset(service2.dispatcher.target, ds)
        with tf.Session() as sess:
            did = sess.run(did).decode()  # (one id: one job for both consumers)
        nexts = [
            tf.data.make_one_shot_iterator(
                svc.from_dataset_id(
                    "parallel_epochs",
                    service2.dispatcher.target,
                    did,
                    element_spec=ds.element_spec,
                    job_name="rr",
                    consumer_index=c,
                    num_consumers=2,
                )
            ).get_next()
            for c in range(2)
        ]
        with tf.Session() as sess:
            got = [[int(sess.run(nexts[c])) for _ in range(6)] for c in range(2)]
    # (every worker produces the whole range: round q of a task holds 2q, 2q+1)
    assert got[0] == [0, 0, 2, 2, 4, 4]
    assert got[1] == [1, 1, 3, 3, 5, 5]


def test_worker_lost_midway_dynamic():
    """A worker stopped mid-read: the read finishes, each element at most once (TF's
    guarantee for DYNAMIC when a worker is lost), the other worker's elements all in."""
    s = _Service(2)
    try:
        with tf.Graph().as_default():
            ds = tf.data.Dataset.range(120).apply(
                svc.distribute("distributed_epoch", s.dispatcher.target)
            )
            nxt = tf.data.make_one_shot_iterator(ds).get_next()
            got = []
            with tf.Session() as sess:
                for _ in range(20):
                    got.append(int(sess.run(nxt)))
                s.workers[0]._stop()
                while True:
                    try:
                        got.append(int(sess.run(nxt)))
                    except errors.OutOfRangeError:
                        break
    finally:
        s.close()
    assert len(got) == len(set(got)), "an element was produced twice"
    assert set(got) <= set(range(120))
    # lost: at most the splits the stopped worker held (its buffer, the element it was
    # making and the split it asked for ahead, the requests in flight to it)
    assert len(got) >= 120 - (worker_module._BUFFER + 2 + client_module._DEPTH)


def test_every_worker_lost_fails_not_hangs():
    s = _Service(1)
    try:
        with tf.Graph().as_default():
            ds = tf.data.Dataset.range(10_000).apply(
                svc.distribute("parallel_epochs", s.dispatcher.target)
            )
            nxt = tf.data.make_one_shot_iterator(ds).get_next()
            with tf.Session() as sess:
                assert int(sess.run(nxt)) == 0
                s.workers[0]._stop()
                with pytest.raises(errors.UnavailableError, match="lost"):
                    for _ in range(10_000):
                        sess.run(nxt)
    finally:
        s.close()


def test_unreachable_dispatcher_fails():
    port = _free_port()
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(3).apply(
            svc.distribute("parallel_epochs", f"grpc://localhost:{port}")
        )
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        with tf.Session() as sess, pytest.raises(errors.UnavailableError):
            sess.run(nxt)


def test_worker_needs_a_reachable_dispatcher():
    with pytest.raises(errors.UnavailableError):
        svc.WorkerServer(svc.WorkerConfig(dispatcher_address=f"localhost:{_free_port()}"))


def test_dataset_with_placeholder_refused(service2):
    with tf.Graph().as_default():
        n = tf.placeholder(tf.int64, [])
        ds = tf.data.Dataset.range(n).apply(
            svc.distribute("parallel_epochs", service2.dispatcher.target)
        )
        with pytest.raises(ValueError, match="Cannot capture a placeholder"):
            tf.data.make_one_shot_iterator(ds)  # (TF's refusal, tests/test_one_shot_stateful.py)
        it = tf.data.make_initializable_iterator(ds)
        with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="placeholder"):
            sess.run(it.initializer, {n: 3})


def test_unsupported_configs_refused():
    # (work_dir and fault_tolerant_mode: tests/test_data_service_ft.py)
    with pytest.raises(ValueError, match="protocol"):
        svc.DispatchServer(svc.DispatcherConfig(protocol="http"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the wire: authentication and bounds ---------------------------------------------------


async def _dispatcher():
    d = Dispatcher(wire.cluster_secret())
    port = await d.start("127.0.0.1", 0)
    return d, port


async def test_peer_without_the_secret_is_refused():
    d, port = await _dispatcher()
    try:
        with pytest.raises(errors.OpError):
            await wire.connect("127.0.0.1", port, b"not the secret", lambda *a: None, wait_s=5)
        # A raw peer: a bad hello then a register request; nothing is read past the hello.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await reader.readexactly(wire.SERVER_HELLO.size)
        meta = json.dumps({"m": "register", "out": "x:0"}).encode()
        frame = wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.RUN, 1, len(meta), 0) + meta
        writer.write(b"AFC\x01" + bytes(64) + frame)
        try:  # closed (reset: aborted), nothing answered
            assert await asyncio.wait_for(reader.read(), 5) == b""
        except ConnectionResetError:
            pass
        writer.close()
        assert d.datasets == {}
    finally:
        d.close()


async def test_oversized_frame_closes_the_connection():
    d, port = await _dispatcher()
    try:
        conn = await wire.connect("127.0.0.1", port, wire.cluster_secret(), lambda *a: None)
        conn.transport.write(
            wire.HEADER.pack(wire.MAGIC, wire.VERSION, wire.RUN, 1, 0, wire.MAX_PAYLOAD + 1)
        )
        fut = protocol.call(conn, "tasks", {"job": 0})
        with pytest.raises(errors.UnavailableError):
            await asyncio.wait_for(fut, 5)
        # the dispatcher still serves others
        ok = await wire.connect("127.0.0.1", port, wire.cluster_secret(), lambda *a: None)
        with pytest.raises(errors.NotFoundError):
            await protocol.call(ok, "tasks", {"job": 0})
        ok.abort(errors.CancelledError(None, None, "done"))
    finally:
        d.close()


async def test_graph_size_bounded(monkeypatch):
    d, port = await _dispatcher()
    try:
        conn = await wire.connect("127.0.0.1", port, wire.cluster_secret(), lambda *a: None)
        monkeypatch.setattr(protocol, "MAX_GRAPH_BYTES", 100)
        big = np.zeros(101, np.uint8)
        with pytest.raises(errors.InvalidArgumentError, match="graph too large"):
            await protocol.call(conn, "register", {"out": "x:0"}, [big])
        with pytest.raises(errors.InvalidArgumentError, match="over the tf.data service"):
            protocol.graph_tensor(bytes(101))
        with pytest.raises(errors.InvalidArgumentError, match="Malformed"):
            await protocol.call(conn, "job", {"d": 7})  # (a field of the wrong type)
        conn.abort(errors.CancelledError(None, None, "done"))
        assert d.datasets == {}
    finally:
        d.close()


async def test_everything_on_one_loop():
    """Dispatcher, two workers and the consumer's session on the running loop."""
    secret = wire.cluster_secret()
    d, port = await _dispatcher()
    workers = [Worker(secret) for _ in range(2)]
    try:
        for w in workers:
            await w.start("127.0.0.1", 0, f"localhost:{port}", "localhost:%port%")
        with tf.Graph().as_default():
            ds = tf.data.Dataset.from_tensor_slices(np.arange(12, dtype=np.float32) * 0.5)
            ds = ds.map(lambda x: x + 1).apply(
                svc.distribute(svc.ShardingPolicy.DYNAMIC, f"grpc://localhost:{port}")
            )
            nxt = tf.data.make_one_shot_iterator(ds).get_next()
            got = []
            async with tf.Session() as sess:
                while True:
                    try:
                        got.append(float(await sess.arun(nxt)))
                    except errors.OutOfRangeError:
                        break
        assert sorted(got) == [i * 0.5 + 1 for i in range(12)]
        assert d.jobs == {}  # released at the end of the pass
        await d.settled()  # (the workers drop their tasks when told: a message away)
        assert [(w.tasks, w.graphs) for w in workers] == [({}, {})] * 2
    finally:
        for w in workers:
            w.close()
        d.close()


# -- the raw ops, with TF's argument names ------------------------------------------------


def _raw_read(service, version: str, processing_mode=b""):
    R = tf.raw_ops
    target = service.dispatcher.target
    address = target.split("://")[1]
    ds = tf.data.Dataset.range(4)
    register = R.RegisterDatasetV2 if version == "DataServiceDatasetV4" else R.RegisterDataset
    did = register(dataset=ds._variant, address=address, protocol="grpc", external_state_policy=2)
    args = {
        "dataset_id": did,
        "processing_mode": processing_mode,
        "address": address,
        "protocol": "grpc",
        "job_name": "",
        "max_outstanding_requests": -1,
        "iteration_counter": R.DummyIterationCounter(),
        "output_types": [tf.int64],
        "output_shapes": [tf.TensorShape([])],
    }
    if version != "DataServiceDataset":
        args.update(consumer_index=-1, num_consumers=-1)
    handle = getattr(R, version)(**args)
    return did, tf.data.experimental.from_variant(handle, tf.TensorSpec([], tf.int64))


@pytest.mark.parametrize(
    "version",
    ["DataServiceDataset", "DataServiceDatasetV2", "DataServiceDatasetV3", "DataServiceDatasetV4"],
)
def test_raw_ops(service2, version):
    with tf.Graph().as_default():
        did, ds = _raw_read(service2, version, processing_mode=b"\x08\x01")  # DYNAMIC
        assert did.dtype == (tf.string if version == "DataServiceDatasetV4" else tf.int64)
        assert sorted(int(v) for v in _read_all(ds)) == [0, 1, 2, 3]


def test_raw_op_bad_processing_mode(service2):
    with tf.Graph().as_default():
        _, ds = _raw_read(service2, "DataServiceDatasetV4", processing_mode=b"\x08\x09")
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="mode"):
            sess.run(nxt)


@pytest.mark.parametrize("policy", ["FILE", "DATA", "FILE_OR_DATA", "HINT"])
def test_static_sharding_without_a_worker_list_as_tf(service2, policy):
    """TF shards statically only over the dispatcher's fixed worker list
    (`worker_addresses`, which this dispatcher refuses): a read fails as TF's."""
    cls, msg = TF["misc"]["static_sharding"][policy]
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(4).apply(
            svc.distribute(svc.ShardingPolicy[policy], service2.dispatcher.target)
        )
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        with tf.Session() as sess, pytest.raises(getattr(errors, cls)) as info:
            sess.run(nxt)
    got = re.sub(r":\d+", ":PORT", str(info.value).split("\n")[0])
    assert msg[msg.index("Failed to shard") :] in got


def _lines(tmp_path, files=3, lines=4) -> list[str]:
    names = []
    for f in range(files):
        path = tmp_path / f"part{f}.txt"
        path.write_text("".join(f"f{f}-l{k}\n" for k in range(lines)))
        names.append(str(path))
    return names


def test_dynamic_splits_files(service2, tmp_path):
    """A file source: each file is a split, so each line is read once overall."""
    names = _lines(tmp_path)
    with tf.Graph().as_default():
        ds = tf.data.TextLineDataset(names).map(tf.strings.upper).prefetch(2)
        ds = ds.apply(svc.distribute("distributed_epoch", service2.dispatcher.target))
        got = sorted(v.decode() for v in _read_all(ds))
    assert got == sorted(f"F{f}-L{k}" for f in range(3) for k in range(4))


def test_dynamic_splits_file_names_interleaved(service2, tmp_path):
    """Tensor slices of file names interleaved into their lines (TF's usual file
    pipeline): each name is a split."""
    names = _lines(tmp_path)
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices(names).interleave(
            tf.data.TextLineDataset, cycle_length=2
        )
        ds = ds.apply(svc.distribute("distributed_epoch", service2.dispatcher.target))
        got = sorted(v.decode() for v in _read_all(ds))
    assert got == sorted(f"f{f}-l{k}" for f in range(3) for k in range(4))


def test_dynamic_splits_a_zip(service2):
    """A zip of a range and tensor slices (TF splits it too): each pair once."""
    with tf.Graph().as_default():
        ds = tf.data.Dataset.zip(
            (tf.data.Dataset.range(5), tf.data.Dataset.from_tensor_slices([b"a", b"b", b"c"]))
        )
        ds = ds.apply(svc.distribute("distributed_epoch", service2.dispatcher.target))
        got = sorted((int(a), b.decode()) for a, b in _read_all(ds))
    assert got == [(0, "a"), (1, "b"), (2, "c")]


def test_tf_written_graph_def_reads_from_our_service(service2):
    """TF's GraphDef of a distributed pipeline (DataServiceDatasetV4 with its
    uncompress_fn, RegisterDatasetV2, DummyIterationCounter, all inside the one-shot
    iterator's dataset_factory) imports here and reads from this service."""
    rec = TF["graph_def"]
    gd = tf.GraphDef.FromString(base64.b64decode(rec["pb"]))
    old, new = rec["address"].encode(), service2.address.encode()
    for nd in [*gd.node, *(n for f in gd.library.function for n in f.node_def)]:
        if nd.op == "Const" and list(nd.attr["value"].tensor.string_val) == [old]:
            nd.attr["value"].tensor.string_val[0] = new
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        got = sorted(int(v) for v in _read_iterator(g.get_tensor_by_name(rec["fetch"])))
    assert got == [0, 3, 6, 9, 12]


def _read_iterator(nxt) -> list:
    out = []
    with tf.Session() as sess:
        while True:
            try:
                out.append(sess.run(nxt))
            except errors.OutOfRangeError:
                return out


def test_our_graph_def_round_trips(service2):
    """Ours as TF writes it (uncompress_fn naming an UncompressElement function of the
    library, which TF 2.21 ran against its own service: range(5).map(x * 3) read back
    in full) imports here again and reads from this service."""
    with tf.Graph().as_default() as g:
        ds = tf.data.Dataset.range(5).map(lambda x: x * 3)
        ds = ds.apply(svc.distribute("distributed_epoch", service2.dispatcher.target))
        tf.data.make_one_shot_iterator(ds).get_next(name="next")
        gd = g.as_graph_def()
    fns = [n for f in gd.library.function for n in f.node_def if n.op.startswith("DataService")]
    [node] = [n for n in gd.node if n.op.startswith("DataService")] or fns
    name = node.attr["uncompress_fn"].func.name
    [fn] = [f for f in gd.library.function if f.signature.name == name]
    assert [n.op for n in fn.node_def] == ["UncompressElement", "Identity"]
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        got = sorted(int(v) for v in _read_iterator(g.get_tensor_by_name("next:0")))
    assert got == [0, 3, 6, 9, 12]


@pytest.mark.parametrize("trainer_id", ["", None])
def test_cross_trainer_cache_ids_as_tf(trainer_id):
    cls, msg = TF["misc"]["cross_trainer_cache"][repr(trainer_id)]
    with pytest.raises(ValueError) as info:
        svc.CrossTrainerCache(trainer_id)
    assert (type(info.value).__name__, str(info.value)) == (cls, msg)


def test_cross_trainer_cache_refused():
    """TF shares a sliding window of a job's elements between trainers; not here."""
    cache = svc.CrossTrainerCache("trainer 1")
    with tf.Graph().as_default(), pytest.raises(errors.UnimplementedError):
        tf.data.Dataset.range(3).apply(
            svc.distribute("parallel_epochs", "grpc://localhost:1", "j", cross_trainer_cache=cache)
        )


def test_a_pass_left_early_releases_its_job(service2):
    """take(3) ends the consumer's pass early: its requests in flight are dropped and
    the job released (the workers drop their tasks)."""
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(1000).apply(
            svc.distribute("parallel_epochs", service2.dispatcher.target)
        )
        assert [int(v) for v in _read_all(ds.take(3))] == [0, 0, 1]
    assert service2.dispatcher._thread.run(_jobs_after_settling(service2)) == {}


async def _jobs_after_settling(service):
    """The dispatcher's jobs once none is left (the consumer's pass is closed on its
    session's loop, after the test's last step) and the workers were told."""
    d = service.dispatcher._service
    while d.jobs:
        d.released.clear()
        await asyncio.wait_for(d.released.wait(), 10)
    await d.settled()
    return d.jobs


def test_an_idle_named_job_goes_after_job_gc_timeout_ms():
    """TF's garbage collection: a named job its last consumer released goes
    `job_gc_timeout_ms` later (its workers drop their tasks), and the next consumer of
    the name reads a new job.  0 is TF's 5 minutes, negative never."""
    assert svc.DispatchServer()._service.gc_timeout_s == 300.0
    forever = svc.DispatchServer(svc.DispatcherConfig(job_gc_timeout_ms=-1))
    assert forever._service.gc_timeout_s is None
    forever._stop()
    d = svc.DispatchServer(svc.DispatcherConfig(job_gc_timeout_ms=300))
    w = svc.WorkerServer(svc.WorkerConfig(dispatcher_address=d.target.split("://")[1]))
    s = type("S", (), {"dispatcher": d})
    try:
        with tf.Graph().as_default():
            ds = tf.data.Dataset.range(3)
            with tf.Session() as sess:
                did = sess.run(svc.register_dataset(d.target, ds)).decode()

            def read():
                return sorted(
                    int(v)
                    for v in _read_all(
                        svc.from_dataset_id(
                            "parallel_epochs", d.target, did, element_spec=ds.element_spec,
                            job_name="gc",
                        )
                    )
                )  # fmt: skip

            assert read() == [0, 1, 2]  # (kept after it, as test_a_pass_after_... checks)
            assert d._thread.run(_jobs_after_settling(s)) == {}
            assert w._service.tasks == {}
            assert read() == [0, 1, 2]  # (a new job)
    finally:
        w._stop()
        d._stop()
