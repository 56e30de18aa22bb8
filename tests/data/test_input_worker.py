"""tf.data's input worker process (asyncflow/data/remote.py): a pure TFRecord -> parse
-> map -> shuffle -> batch -> prefetch pipeline run in another process gives the
elements the in-process pipeline gives, in its order, with its errors; the worker and
its shared-memory segments are gone after the iterator's session closes or the parent
dies; pipelines with anything else stay in-process."""

import os
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors, python_io
from asyncflow.data import remote
from asyncflow.data import shm_wire as w

pytestmark = pytest.mark.timeout(180)

SPEC = {"x": af.FixedLenFeature([3], af.float32), "y": af.FixedLenFeature([], af.int64)}


def _write(path, rows, corrupt=False):
    from asyncflow import example_pb as pb

    with python_io.TFRecordWriter(str(path)) as w:
        for x, y in rows:
            ex = pb.Example(
                features=pb.Features(
                    feature={
                        "x": pb.Feature(float_list=pb.FloatList(value=list(x))),
                        "y": pb.Feature(int64_list=pb.Int64List(value=[y])),
                    }
                )
            )
            w.write(ex.SerializeToString())
    if corrupt:
        data = bytearray(path.read_bytes())
        data[len(data) * 2 // 3] ^= 0xFF
        path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("worker")
    rng = np.random.RandomState(3)
    paths = []
    for f in range(3):
        p = d / f"part-{f}.tfrecord"
        _write(p, [(rng.randn(3), f * 100 + i) for i in range(100)])
        paths.append(str(p))
    return paths


def _pipeline(paths, spec=SPEC, batch=16):
    ds = af.data.TFRecordDataset(paths).shuffle(40, seed=7).batch(batch)
    ds = ds.map(lambda r: af.parse_example(r, spec)).map(lambda f: (f["x"] * 0.5, f["y"]))
    return ds.prefetch(2)


def _passes(paths, mode, monkeypatch, n=2, make=_pipeline):
    """`n` passes of an initializable iterator; (elements per pass, worker pids)."""
    monkeypatch.setattr(remote, "MODE", mode)
    before = remote.STATS["remote_passes"]
    g = af.Graph()
    with g.as_default():
        it = make(paths).make_initializable_iterator()
        nxt = it.get_next()
    out = []
    with af.Session(graph=g) as sess:
        for _ in range(n):
            sess.run(it.initializer)
            got = []
            while True:
                try:
                    got.append(sess.run(nxt))
                except errors.OutOfRangeError:
                    break
            with pytest.raises(errors.OutOfRangeError):  # and again at the end
                sess.run(nxt)
            out.append(got)
        pids = remote.worker_pids()
    return out, pids, remote.STATS["remote_passes"] - before


def _gone(pid, timeout=20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def _segments(pid) -> list:
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"afds_{pid}_")]


def _same(a, b):
    assert len(a) == len(b)
    for (xa, ya), (xb, yb) in zip(a, b):
        assert xa.dtype == xb.dtype and ya.dtype == yb.dtype
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or not os.path.isdir("/proc"), reason="Linux")
def test_worker_gives_the_in_process_order_and_cleans_up(files, monkeypatch):
    local, _, remote_passes = _passes(files, "0", monkeypatch)
    assert remote_passes == 0
    got, pids, remote_passes = _passes(files, "always", monkeypatch, n=3)
    assert remote_passes == 3 and len(pids) == 1
    for p in got:
        _same(p, local[0])  # each pass: the in-process pass's elements, in its order
    ys = np.concatenate([y for _, y in got[0]])
    assert sorted(ys.tolist()) == [f * 100 + i for f in range(3) for i in range(100)]
    assert [len(y) for _, y in got[0]] == [16] * 18 + [12]
    # Session.close ended the worker; its segments are unlinked.
    assert _gone(pids[0])
    assert _segments(pids[0]) == []


def test_reinitialized_mid_pass(files, monkeypatch):
    local, _, _ = _passes(files, "0", monkeypatch, n=1)
    monkeypatch.setattr(remote, "MODE", "always")
    g = af.Graph()
    with g.as_default():
        it = _pipeline(files).make_initializable_iterator()
        nxt = it.get_next()
    with af.Session(graph=g) as sess:
        sess.run(it.initializer)
        sess.run(nxt)
        sess.run(nxt)  # abandoned after two elements
        sess.run(it.initializer)
        got = []
        while True:
            try:
                got.append(sess.run(nxt))
            except errors.OutOfRangeError:
                break
        _same(got, local[0])
        (pid,) = remote.worker_pids()
    assert _gone(pid)


def test_auto_starts_a_worker_at_the_second_pass(files, monkeypatch):
    local, _, _ = _passes(files, "0", monkeypatch, n=1)
    monkeypatch.setattr(remote, "MODE", "auto")
    spawned, served = remote.STATS["spawned"], remote.STATS["remote_passes"]
    g = af.Graph()
    with g.as_default():
        it = _pipeline(files).make_initializable_iterator()
        nxt = it.get_next()

    def one_pass():
        sess.run(it.initializer)
        got = []
        while True:
            try:
                got.append(sess.run(nxt))
            except errors.OutOfRangeError:
                return got

    with af.Session(graph=g) as sess:
        _same(one_pass(), local[0])
        assert remote.STATS["spawned"] == spawned  # one pass: no worker
        _same(one_pass(), local[0])  # in-process while the worker starts, no wait
        assert remote.STATS["spawned"] == spawned + 1
        assert remote.wait_for_workers(120)
        _same(one_pass(), local[0])
        assert remote.STATS["remote_passes"] == served + 1


def test_errors_reach_get_next_as_in_process(tmp_path, monkeypatch):
    rng = np.random.RandomState(0)
    bad = tmp_path / "bad.tfrecord"
    _write(bad, [(rng.randn(3), i) for i in range(200)], corrupt=True)
    spec = dict(SPEC, x=af.FixedLenFeature([4], af.float32))  # records hold 3 values

    def unshuffled(paths, spec=SPEC):
        ds = af.data.TFRecordDataset(paths).batch(16)
        return ds.map(lambda r: af.parse_example(r, spec)).map(lambda f: (f["x"], f["y"]))

    def both(make):
        res = []
        for mode in ("0", "always"):
            monkeypatch.setattr(remote, "MODE", mode)
            g = af.Graph()
            with g.as_default():
                nxt = make().make_one_shot_iterator().get_next()
            got = []
            with af.Session(graph=g) as sess:
                with pytest.raises(errors.OpError) as e:
                    for _ in range(100):
                        got.append(sess.run(nxt))
            res.append((got, type(e.value), e.value.message))
        return res

    before = remote.STATS["remote_passes"]
    (g0, c0, m0), (g1, c1, m1) = both(lambda: unshuffled([str(bad)]).prefetch(2))
    assert c0 is c1 is errors.DataLossError and m1.split("\n")[0] == m0.split("\n")[0]
    assert 3 < len(g1) == len(g0) < 13  # the good records' batches first
    _same(g1, g0)
    good = tmp_path / "good.tfrecord"
    _write(good, [(rng.randn(3), i) for i in range(40)])
    (g0, c0, m0), (g1, c1, m1) = both(lambda: unshuffled([str(good)], spec).prefetch(2))
    assert c0 is c1 is errors.InvalidArgumentError and g0 == g1 == []
    # (the map's error names its dataset by the count of its process, as TF's)
    assert _uncounted(m1.split("\n")[0]) == _uncounted(m0.split("\n")[0])
    assert remote.STATS["remote_passes"] - before == 2


def _uncounted(message: str) -> str:
    return re.sub(r"(passed to \w+):\d+ ", r"\1:<n> ", message)


def test_ineligible_pipelines_stay_in_process(files, monkeypatch):
    spawned = remote.STATS["spawned"]
    monkeypatch.setattr(remote, "MODE", "always")
    strings = {"y": af.FixedLenFeature([], af.int64), "x": af.FixedLenFeature([3], af.float32)}

    def random_map(paths):
        ds = af.data.TFRecordDataset(paths).batch(8)
        ds = ds.map(lambda r: af.parse_example(r, strings)["x"] + af.random_uniform([3]))
        return ds.prefetch(1)

    def string_out(paths):
        return af.data.TFRecordDataset(paths).batch(8).prefetch(1)

    def captured(paths):
        k = af.placeholder_with_default(np.float32(2), [])
        ds = af.data.TFRecordDataset(paths).batch(8)
        return ds.map(lambda r: af.parse_example(r, strings)["x"] * k).prefetch(1)

    for make in (random_map, string_out, captured):
        g = af.Graph()
        with g.as_default():
            nxt = make(files).make_one_shot_iterator().get_next()
        with af.Session(graph=g) as sess:
            assert len(sess.run(nxt)) == 8
    assert remote.STATS["spawned"] == spawned


_ORPHAN = textwrap.dedent(
    """
    import sys, time
    import asyncflow as af
    from asyncflow.data import remote
    remote.MODE = "always"
    spec = {"x": af.FixedLenFeature([3], af.float32), "y": af.FixedLenFeature([], af.int64)}
    ds = af.data.TFRecordDataset(sys.argv[1:]).batch(4)
    ds = ds.map(lambda r: af.parse_example(r, spec)).map(lambda f: (f["x"], f["y"]))
    nxt = ds.prefetch(2).make_one_shot_iterator().get_next()
    sess = af.Session()
    sess.run(nxt)
    print(remote.worker_pids()[0], flush=True)
    time.sleep(600)
    """
)


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or not os.path.isdir("/proc"), reason="Linux")
def test_worker_exits_when_its_parent_dies(files):
    p = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN, *files], stdout=subprocess.PIPE, text=True
    )
    try:
        pid = int(p.stdout.readline())
        assert _segments(pid)
        p.kill()  # no cleanup in the parent at all
        p.wait(timeout=30)
        assert _gone(pid, timeout=30)
        deadline = time.monotonic() + 10
        while _segments(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _segments(pid) == []
    finally:
        p.kill()
        p.stdout.close()


def _one_pass(sess, it, nxt):
    sess.run(it.initializer)
    return _one_pass_rest(sess, nxt)


def _one_pass_rest(sess, nxt):
    got = []
    while True:
        try:
            got.append(sess.run(nxt))
        except errors.OutOfRangeError:
            return got


def test_worker_runs_the_next_pass_ahead(files, monkeypatch):
    local, _, _ = _passes(files, "0", monkeypatch, n=1)
    monkeypatch.setattr(remote, "MODE", "always")
    g = af.Graph()
    with g.as_default():
        it = _pipeline(files).make_initializable_iterator()
        nxt = it.get_next()
    with af.Session(graph=g) as sess:
        _same(_one_pass(sess, it, nxt), local[0])
        before = remote.STATS["ahead_elements"]
        deadline = time.monotonic() + 60
        # Each pass the worker ran ahead gives the in-process elements in their order;
        # given time between passes, it has some of them ready before START.
        while remote.STATS["ahead_elements"] == before:
            assert time.monotonic() < deadline, "the worker never ran ahead"
            time.sleep(0.2)
            _same(_one_pass(sess, it, nxt), local[0])
        assert remote.STATS["ahead_elements"] - before <= remote.SLOTS


def test_files_changed_between_passes_are_read_again(tmp_path, monkeypatch):
    rng = np.random.RandomState(5)
    paths = [tmp_path / f"p{i}.tfrecord" for i in range(2)]
    for i, p in enumerate(paths):
        _write(p, [(rng.randn(3), i * 1000 + j) for j in range(60)])
    names = [str(p) for p in paths]
    monkeypatch.setattr(remote, "MODE", "always")
    g = af.Graph()
    with g.as_default():
        it = _pipeline(names).make_initializable_iterator()
        nxt = it.get_next()
    with af.Session(graph=g) as sess:
        assert len(_one_pass(sess, it, nxt)) == 8
        dropped = remote.STATS["ahead_dropped"]
        deadline = time.monotonic() + 60
        k = 0
        # A file rewritten after the worker ran the next pass ahead: that pass is
        # dropped and the new contents are read (until one rewrite came after it).
        while remote.STATS["ahead_dropped"] == dropped:
            assert time.monotonic() < deadline, "no pass run ahead was dropped"
            k += 1
            time.sleep(0.2)
            _write(paths[1], [(rng.randn(3), 1000 * k + j) for j in range(60 + k)])
            got = _one_pass(sess, it, nxt)
            ys = np.concatenate([y for _, y in got])
            assert sorted(ys.tolist()) == list(range(60)) + [1000 * k + j for j in range(60 + k)]
        # A file deleted: the in-process pass's error.
        dropped = remote.STATS["ahead_dropped"]
        time.sleep(0.2)
        paths[0].unlink()
        with pytest.raises(errors.OpError) as gone:
            _one_pass(sess, it, nxt)
    monkeypatch.setattr(remote, "MODE", "0")
    g = af.Graph()
    with g.as_default():
        it = _pipeline(names).make_initializable_iterator()
        nxt = it.get_next()
    with af.Session(graph=g) as sess:
        with pytest.raises(errors.OpError) as gone_local:
            _one_pass(sess, it, nxt)
    assert type(gone.value) is type(gone_local.value) is errors.NotFoundError
    assert gone.value.message.split("\n")[0] == gone_local.value.message.split("\n")[0]


def _masks(pid) -> set:
    """The CPU masks of every thread of process `pid`."""
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out.add(frozenset(os.sched_getaffinity(int(tid))))
        except OSError:  # (a thread that just ended)
            pass
    return out


def _until_masks(pid, want, timeout=30.0) -> set:
    deadline = time.monotonic() + timeout
    while (got := _masks(pid)) != {want} and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs two CPUs and thread affinity",
)
def test_worker_keeps_off_the_consuming_threads_cpu(files, monkeypatch):
    # The worker's threads run on every allowed CPU but the one the parent's consuming
    # thread was last seen on (a step that shares its CPU with the worker waits for it);
    # while the parent waits for an element, on any; the elements are the same.
    local, _, _ = _passes(files, "0", monkeypatch, n=1)
    allowed = frozenset(os.sched_getaffinity(0))
    first, last = min(allowed), max(allowed)
    cpu = [first]
    monkeypatch.setattr(remote, "_cpu_now", lambda: cpu[0])
    monkeypatch.setattr(remote, "MODE", "always")
    g = af.Graph()
    with g.as_default():
        it = _pipeline(files).make_initializable_iterator()
        nxt = it.get_next()
    with af.Session(graph=g) as sess:
        _same(_one_pass(sess, it, nxt), local[0])
        (pid,) = remote.worker_pids()
        (h,) = [h for h in remote._LIVE if h.proc.pid == pid]
        # (a pass may end with the parent waiting for ENDP, having sent NO_CPU: the
        # parent's next command names its CPU again)
        h._command(None)
        assert _until_masks(pid, allowed - {first}) == {allowed - {first}}
        cpu[0] = last  # the consuming thread moved
        h._command(None)
        assert _until_masks(pid, allowed - {last}) == {allowed - {last}}
        _same(_one_pass(sess, it, nxt), local[0])
        h._command(None, cpu=w.NO_CPU)  # (what the parent sends before it waits)
        assert _until_masks(pid, allowed) == {allowed}
        h._command(None, cpu=first)
        assert _until_masks(pid, allowed - {first}) == {allowed - {first}}
        h._command(None, cpu=max(allowed) + 1000)  # a CPU it may not run on anyway
        assert _until_masks(pid, allowed) == {allowed}
        _same(_one_pass(sess, it, nxt), local[0])


def test_parent_lets_the_worker_onto_its_cpu_while_it_waits(files, monkeypatch):
    # A pass whose first element is not ready yet: the parent sends NO_CPU before it
    # waits (the worker then behind, the parent's CPU idle), its own CPU again after.
    monkeypatch.setattr(remote, "_cpu_now", lambda: 0)
    monkeypatch.setattr(remote, "MODE", "always")
    monkeypatch.setattr(remote, "RUN_AHEAD", False)  # (so the first element is awaited)
    sent = []
    orig = remote._Handle._command

    def record(self, cmd, arg=0, cpu=None):
        before = self._cpu_sent
        orig(self, cmd, arg, cpu)
        if self._cpu_sent != before:
            sent.append(self._cpu_sent)

    monkeypatch.setattr(remote._Handle, "_command", record)
    g = af.Graph()
    with g.as_default():
        it = _pipeline(files, batch=4).make_initializable_iterator()
        nxt = it.get_next()
    with af.Session(graph=g) as sess:
        sess.run(it.initializer)
        got = [sess.run(nxt)]  # (awaited: the worker had nothing ready)
        deadline = time.monotonic() + 60
        while sent.count(0) < 2:  # given time, elements are ready: its CPU again
            assert time.monotonic() < deadline, f"never named its CPU again: {sent}"
            time.sleep(0.5)
            got.append(sess.run(nxt))
        got += _one_pass_rest(sess, nxt)
        assert len(got) == 75
    assert sent[0] == 0 and sent[1] == w.NO_CPU


def test_worker_warms_the_shuffles_compiled_loop_before_it_is_ready(files, monkeypatch):
    # The shuffle's Philox loop compiles (or loads) before the worker says HELO, not
    # on a thread beside its first passes; a pipeline without a shuffle compiles none.
    from asyncflow.data import worker
    from asyncflow.ops import philox_random

    warmed = []
    monkeypatch.setattr(philox_random, "warm", lambda timeout=120.0: warmed.append(1) or True)
    sar = af.data.experimental.shuffle_and_repeat(40, 2, seed=7)
    for shuffle, want in (("shuffle", [1]), ("shuffle_and_repeat", [1]), (None, [])):
        warmed.clear()
        g = af.Graph()
        with g.as_default():
            ds = af.data.TFRecordDataset(files)
            if shuffle == "shuffle":
                ds = ds.shuffle(40, seed=7)
            elif shuffle:  # (TF's fused op, its seed2 chosen in the graph: served too)
                ds = ds.apply(sar)
            op = ds.batch(8).prefetch(2)._variant.op
            needed = remote._subgraph(op)
            graph = remote._graph_bytes(op, needed)
        r, wfd = os.pipe()
        try:
            wk = worker._Worker({"dataset": op.inputs[0].name, "slots": 4}, graph, wfd)
            wk.session.close()
        finally:
            os.close(r)
            os.close(wfd)
        assert warmed == want
