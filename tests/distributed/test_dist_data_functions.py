"""tf.data's traced functions (map, filter, flat_map, interleave...) on a cluster: their
bodies travel with the task's partitions and run there as nested steps
(distributed/graph_codec.py `encode_functions`, distributed/task_functions.py), with the
values a session of this process gives; a dataset itself cannot cross tasks, and the
step says so at once."""

import importlib.util
import json
import pathlib

import numpy as np
import pytest
from conftest import cluster_of

import asyncflow as af

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(scope="module")
def two_workers():
    cluster = cluster_of(worker=2)
    servers = [af.train.Server(cluster, "worker", i) for i in range(2)]
    yield servers
    for s in servers:
        s.stop()


def _pipelines():
    c = af.constant(10, af.int64)
    slices = (np.arange(3.0), np.arange(3) * 2)
    return {
        "map": af.data.Dataset.range(6).map(lambda x: x * 2),
        "filter": af.data.Dataset.range(8).filter(lambda x: af.equal(x % 3, 0)),
        "captured_constant": af.data.Dataset.range(4).map(lambda x: x + c),
        "tuple": af.data.Dataset.from_tensor_slices(slices).map(lambda a, b: (a * 2, b + 1)),
        "flat_map": af.data.Dataset.range(4).flat_map(af.data.Dataset.range),
        "interleave": af.data.Dataset.range(1, 4).interleave(
            lambda x: af.data.Dataset.range(x).map(lambda y: y * 10 + x), cycle_length=2
        ),
        "cond": af.data.Dataset.range(5).map(lambda x: af.cond(x > 2, lambda: x * 100, lambda: x)),
        "parallel_map_batch": af.data.Dataset.range(7)
        .map(lambda x: x * x, num_parallel_calls=3)
        .batch(3),
    }


def _drain(sess, nxt) -> list:
    out = []
    while True:
        try:
            out.append(sess.run(nxt))
        except af.errors.OutOfRangeError:
            return out


def _all_values(target, device=None) -> dict:
    with af.Graph().as_default():
        with af.device(device):
            nxts = {
                k: af.data.make_one_shot_iterator(ds).get_next() for k, ds in _pipelines().items()
            }
        with af.Session(target) as s:
            return {k: repr(_drain(s, n)) for k, n in nxts.items()}


@pytest.mark.parametrize("device", [None, "/job:worker/task:1"])
def test_dataset_functions_run_on_a_task_as_in_one_process(two_workers, device):
    # (task 1: the dataset's ops and its iterator on a task the session's target is not)
    assert _all_values(two_workers[0].target, device) == _all_values("")


def test_a_fed_capture_reaches_the_function_on_the_task(two_workers):
    # An initializable iterator's feeds reach its functions as captured placeholders.
    def run(target):
        with af.Graph().as_default():
            k = af.placeholder(af.int64, [])
            n = af.placeholder(af.int64, [])
            ds = af.data.Dataset.range(n).map(lambda x: x * k)
            ds = ds.filter(lambda x: af.equal(x % 2, 0))
            it = af.data.make_initializable_iterator(ds)
            nxt = it.get_next()
            out = []
            with af.Session(target) as s:
                for kk in (3, 4):
                    s.run(it.initializer, {k: kk, n: 5})
                    out.append([int(v) for v in _drain(s, nxt)])
            return out

    assert run(two_workers[1].target) == run("") == [[0, 6, 12], [0, 4, 8, 12, 16]]


def test_a_dataset_sent_between_tasks_fails_the_step_at_once():
    # A dataset value cannot cross tasks (TF: a variant of a dataset has no encoding
    # either).  The first push from task 1 to task 0 waits for the link to open: it
    # used to be refused only then, with no step to tell, and the step hung.
    cluster = cluster_of(worker=2)
    servers = [af.train.Server(cluster, "worker", i) for i in range(2)]
    config = af.ConfigProto(operation_timeout_in_ms=10000)
    try:
        with af.Graph().as_default():
            with af.device("/job:worker/task:0"):
                a = af.constant(2.0)
            with af.device("/job:worker/task:1"):
                b = a * 3  # (task 0 -> task 1: the link the other way is not up yet)
                ds = af.data.Dataset.range(3).repeat()
            with af.device("/job:worker/task:0"):
                # (an iterator made from the dataset is colocated with it, as TF's: one
                # made apart and initialized with it takes the dataset across)
                it = af.data.Iterator.from_structure(ds.output_types, ds.output_shapes)
                init = it.make_initializer(ds)
                c = b + 1  # (task 1 -> task 0)
            with af.Session(servers[0].target, config=config) as s:
                assert s.run(b) == 6.0
                for _ in range(2):  # the link opening, then open
                    with pytest.raises(af.errors.UnimplementedError, match="type Repeat"):
                        s.run(init)
                assert s.run(c) == 7.0  # the cluster still serves steps
    finally:
        for srv in servers:
            srv.stop()


def test_a_task_prefetches_in_process(two_workers, tmp_path, monkeypatch):
    # tf.data's input worker process gets the pipeline's GraphDef from the op's graph; a
    # task's partition ops are in none, so the task prefetches in its own process.
    from asyncflow.data import remote

    monkeypatch.setattr(remote, "MODE", "always")
    path = str(tmp_path / "r.tfrecord")
    with af.python_io.TFRecordWriter(path) as w:
        for i in range(5):
            w.write(bytes([i, 2 * i]))
    spawned = remote.STATS["spawned"]
    with af.Graph().as_default():
        ds = af.data.TFRecordDataset(path)
        ds = ds.map(lambda s: af.cast(af.io.decode_raw(s, af.uint8), af.int64) * 2).prefetch(2)
        it = af.data.make_initializable_iterator(ds)
        nxt = it.get_next()
        with af.Session(two_workers[0].target) as s:
            for _ in range(2):
                s.run(it.initializer)
                assert [v.tolist() for v in _drain(s, nxt)] == [[2 * i, 4 * i] for i in range(5)]
    assert remote.STATS["spawned"] == spawned


def test_a_function_reading_another_tasks_variable_is_refused_as_tf(two_workers):
    # A resource of another task: TF's InternalError as the iterator is initialized
    # (unless the session shares the cluster's devices: test_dist_remote_state.py).
    with af.Graph().as_default():
        with af.device("/job:worker/task:1"):
            v = af.get_variable("v", initializer=af.constant(5, af.int64), use_resource=True)
        with af.device("/job:worker/task:0"):
            ds = af.data.Dataset.range(3).map(lambda x: x + v)
            it = af.data.make_initializable_iterator(ds)
        with af.Session(two_workers[0].target) as s:
            s.run(v.initializer)
            refused = "Assigned device '/job:worker/replica:0/task:1/device:CPU:0' does not"
            with pytest.raises(af.errors.InternalError, match=refused):
                s.run(it.initializer)


def test_tf_pipelines_run_on_a_task_with_tfs_values(two_workers):
    # The GraphDefs TF 2.21 wrote (tests/fixtures/record_dataset_graphdef_tf.py: map,
    # filter, interleave, scan, group_by_window... as FunctionDefs; captured feeds; files)
    fixtures = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
    spec = importlib.util.spec_from_file_location(
        "record_dataset_graphdef_tf", fixtures / "record_dataset_graphdef_tf.py"
    )
    rec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rec)  # (TF is imported only by its record_tf)
    ref = json.loads((rec.OUT / "ref.json").read_text())
    got = {}
    for case, r in sorted(ref.items()):
        gd = af.GraphDef()
        gd.ParseFromString((rec.OUT / f"{case}.pb").read_bytes())
        with af.Graph().as_default() as g:
            af.import_graph_def(gd, name="")
            feed = {}
            for k, v in r["feeds"].items():
                feed[g.get_tensor_by_name(f"{k}:0")] = (
                    [str(rec.OUT / f) for f in v] if k == "files" else v
                )
            nxt = [g.get_tensor_by_name(n) for n in r["next"]]
            with af.Session(two_workers[1].target) as s:
                if r["init"]:
                    s.run(g.get_operation_by_name(r["init"]), feed)
                got[case] = [[rec.plain(v) for v in vs] for vs in _drain(s, nxt)]
    assert got == {case: r["values"] for case, r in ref.items()}


@pytest.mark.parametrize("device", [None, "/job:worker/task:1"])
def test_a_functions_random_op_restarts_with_each_pass_on_a_task(two_workers, device):
    # As in one process (tests/test_data_random_state.py, TF's numbers): the op's state
    # lasts one initialization of the iterator, or one run of `reduce`, on the task too.
    fixtures = pathlib.Path(__file__).parent.parent / "fixtures"
    recorded = json.loads((fixtures / "dataset_random_tf.json").read_text())["cases"]
    with af.Graph().as_default():
        with af.device(device):
            ds = af.data.Dataset.range(3).map(
                lambda x: x * 0 + af.random_uniform([], 0, 1 << 30, dtype=af.int64, seed=2)
            )
            it = af.data.make_initializable_iterator(ds)
            nxt = it.get_next()
            total = ds.take(2).reduce(af.constant(0, af.int64), lambda s, x: s * (1 << 30) + x)
        with af.Session(two_workers[0].target) as s:
            passes = []
            for _ in range(2):
                s.run(it.initializer)
                passes.append([int(s.run(nxt)) for _ in range(3)])
            runs = [int(s.run(total)) for _ in range(2)]
    assert passes == recorded["reinit"][:2]
    first = recorded["reduce_runs"][0]
    assert runs == [first[0] * (1 << 30) + first[1]] * 2


def _resources_recorder():
    fixtures = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
    spec = importlib.util.spec_from_file_location(
        "record_dataset_resources_imported_tf",
        fixtures / "record_dataset_resources_imported_tf.py",
    )
    rec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rec)  # (TF is imported only by its main)
    return rec


_RESOURCE_CASES = ["accumulator", "fifo_queue", "raw_fifo_queue", "raw_mutable_table_node_name"]


@pytest.mark.parametrize("device", [None, "/job:worker/task:1"])
def test_a_functions_unshared_resource_lasts_one_pass_on_a_task(two_workers, device):
    # As in one process (tests/test_data_resources_imported.py, TF's values): the body's
    # ops keep their mark across the wire (graph_codec `_IN_FUNCTION`), traced here or
    # imported from a GraphDef; a lifted queue and a node-named table last the session.
    # (Each graph's names are its own: a server's resources outlive its sessions.)
    rec = _resources_recorder()
    ref = json.loads((rec.OUT / "tf.json").read_text())["graphdef"]
    got, want = {}, {}
    for case in _RESOURCE_CASES:
        for imported in (False, True):
            scope = f"{case}_{imported}_{device is not None}"
            with af.Graph().as_default() as g:
                with af.device(device), af.name_scope(None if imported else scope):
                    start = af.placeholder(af.int64, [])
                    ds = af.data.Dataset.range(start, start + 3).map(rec.FNS[case](af))
                    it = af.data.make_initializable_iterator(ds)
                    nxt = it.get_next()
            if imported:
                gd = g.as_graph_def()
                with af.Graph().as_default() as g, af.device(device):
                    init, nxt, start = af.import_graph_def(
                        gd, name=scope, return_elements=[it.initializer.name, nxt.name,
                                                         start.name],
                    )  # fmt: skip
            else:
                init = it.initializer
            with g.as_default(), af.Session(two_workers[0].target) as s:
                passes = []
                for _ in range(2):
                    s.run(init, {start: 0})
                    passes.append([int(s.run(nxt)) for _ in range(3)])
            got[scope], want[scope] = passes, ref[case]["values"]
    assert got == want
