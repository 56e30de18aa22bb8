"""Parameter-server building blocks (OSDI §4.2), against TF 2.21's tf.compat.v1
(tests/fixtures/ps_tf.json, recorded by tests/fixtures/record_ps_tf.py):
replica_device_setter placements, the partitioners, partitioned get_variable, and
embedding lookups over shards with their sparse updates."""

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow.indexed_slices import IndexedSlices

pytestmark = pytest.mark.timeout(60)

TF = json.loads((pathlib.Path(__file__).parent / "fixtures" / "ps_tf.json").read_text())


# -- replica_device_setter -------------------------------------------------------------------


def test_replica_device_setter_places_like_tf(graph):
    cluster = {"ps": ["ps0:2222", "ps1:2222", "ps2:2222"], "worker": ["w0:2222", "w1:2222"]}
    setter = af.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:1")
    with af.device(setter):
        a = af.Variable(af.zeros([4]), name="a")
        af.Variable(af.zeros([2, 2]), name="b")
        af.Variable(1.0, name="c")
        y = af.add(a, 1.0, name="y")
        with af.device("/cpu:0"):
            af.Variable(2.0, name="d")
            af.multiply(y, 2.0, name="z")
        with af.device("/job:ps/task:0"):
            af.Variable(3.0, name="e")  # the strategy still counts it: TF's order
        with af.device("/job:worker/task:0"):
            af.Variable(4.0, name="f")  # another job: not a ps op there
        af.ConditionalAccumulator(af.float32, shape=[], name="acc")
    setter2 = af.train.replica_device_setter(
        ps_tasks=2, ps_device="/job:ps/device:CPU:0", worker_device="/job:worker/task:3/cpu:0"
    )
    with af.device(setter2):
        af.Variable(1.0, name="h")
        af.Variable(1.0, name="i")
        j = af.Variable(1.0, name="j")
        af.identity(j, name="k")
    with af.device(af.train.replica_device_setter(ps_tasks=2, merge_devices=False)):
        with af.device("/job:foo"):
            af.Variable(1.0, name="m")
        af.Variable(1.0, name="n")
    ours = {op.name: op.device for op in graph.get_operations()}
    want = {k: v for k, v in TF["device_setter"].items() if k in ours and k != "q"}
    assert len(want) >= 45
    assert {k: ours[k] for k in want} == want


def test_replica_device_setter_without_ps_is_none():
    assert TF["no_ps_job"] is True
    assert af.train.replica_device_setter(cluster={"worker": ["w:1"]}) is None
    assert af.train.replica_device_setter(ps_tasks=0) is None
    with pytest.raises(TypeError, match="ps_strategy must be callable"):
        af.train.replica_device_setter(ps_tasks=1, ps_strategy=3)


def test_greedy_load_balancing_by_bytes(graph):
    sizes = [1000, 10, 10, 400, 300, 300, 5]
    strategy = af.train.GreedyLoadBalancingStrategy(3, af.train.byte_size_load_fn)
    with af.device(af.train.replica_device_setter(ps_tasks=3, ps_strategy=strategy)):
        vs = [af.Variable(af.zeros([n]), name=f"v{i}") for i, n in enumerate(sizes)]
    # The reference: each variable to the least-loaded task so far (ties: lowest index).
    loads, want = [0, 0, 0], []
    for n in sizes:
        t = loads.index(min(loads))
        want.append(f"/job:ps/task:{t}")
        loads[t] += 4 * n
    assert [v.device for v in vs] == want
    assert [v.op.inputs[0].op.device if v.op.inputs else "" for v in vs] == [""] * len(vs)
    assert vs[0].initial_value.op.device == "/job:worker"


# -- partitioners and partitioned variables -----------------------------------------------------


@pytest.mark.parametrize("case", TF["partitioners"], ids=lambda c: f"{c['shape']}-{c['dtype']}")
def test_partitioners_match_tf(case):
    shape, dtype = af.TensorShape(case["shape"]), af.as_dtype(case["dtype"])
    last = len(case["shape"]) - 1
    got = {
        "fixed3": af.fixed_size_partitioner(3)(shape, dtype=dtype),
        "fixed20_axis_last": af.fixed_size_partitioner(20, axis=last)(shape, dtype=dtype),
        "minmax_default": af.min_max_variable_partitioner(max_partitions=4)(shape, dtype),
        "minmax_small": af.min_max_variable_partitioner(5, min_slice_size=64)(shape, dtype),
        "axis_size_100": af.variable_axis_size_partitioner(100)(shape, dtype),
        "axis_size_1k_max3": af.variable_axis_size_partitioner(1000, max_shards=3)(shape, dtype),
        "axis_size_big": af.variable_axis_size_partitioner(1 << 20)(shape, dtype),
    }
    assert got == {k: case[k] for k in got}


def test_partitioner_errors():
    with pytest.raises(ValueError, match="must be positive"):
        af.variable_axis_size_partitioner(0)
    with pytest.raises(ValueError, match="Can not partition variable along axis 2"):
        af.min_max_variable_partitioner(axis=2)(af.TensorShape([3, 4]), af.float32)


def test_get_variable_with_partitioner_matches_tf(sess):
    with af.variable_scope("s", partitioner=af.fixed_size_partitioner(4)):
        v = af.get_variable("v", [10, 3], initializer=af.ones_initializer())
    w = af.get_variable("w", [2, 7], partitioner=af.fixed_size_partitioner(3, axis=1))
    want = TF["get_variable"]
    assert isinstance(v, af.PartitionedVariable)
    for pv, name in ((v, "v"), (w, "w")):
        got = [[p.op.name, p.shape.as_list(), p._get_save_slice_info().spec] for p in pv]
        assert got == want[name]
    assert af.convert_to_tensor(v).name == want["v_tensor"]
    assert len(v) == want["v_len"]
    assert [x.op.name for x in af.global_variables()] == want["global"]
    assert [x.op.name for x in af.trainable_variables()] == want["trainable"]
    sess.run(af.global_variables_initializer())
    np.testing.assert_array_equal(sess.run(v.as_tensor()), np.ones([10, 3]))
    # Reuse gives the same object; another partitioning of it is refused, as TF.
    with af.variable_scope("s", reuse=True, partitioner=af.fixed_size_partitioner(4)):
        assert af.get_variable("v", [10, 3]) is v
    with af.variable_scope("s", reuse=True, partitioner=af.fixed_size_partitioner(2)):
        with pytest.raises(ValueError, match="specified partitions"):
            af.get_variable("v", [10, 3])
    with pytest.raises(ValueError, match="already exists"):
        af.get_variable("w", [2, 7], partitioner=af.fixed_size_partitioner(3, axis=1))


def test_partitioned_variable_from_a_tensor_and_assign(sess):
    full = np.arange(21, dtype=np.float32).reshape(7, 3)
    v = af.get_variable("t", initializer=af.constant(full),
                        partitioner=af.fixed_size_partitioner(3))  # fmt: skip
    assert [p.shape.as_list() for p in v] == [[3, 3], [2, 3], [2, 3]]
    sess.run(af.global_variables_initializer())
    np.testing.assert_array_equal(sess.run(v.as_tensor()), full)
    sess.run(v.assign(full * 2))
    np.testing.assert_array_equal(sess.run(af.convert_to_tensor(v)), full * 2)
    with pytest.raises(ValueError, match="fully defined"):
        af.get_variable("u", initializer=full, partitioner=af.fixed_size_partitioner(2))


def test_glorot_slices_use_the_full_shape(sess):
    # Each slice of a glorot-initialised variable is drawn with the full variable's
    # fans: limit sqrt(6 / (1000 + 4)), not the slice's sqrt(6 / (334 + 4)).
    v = af.get_variable("g", [1000, 4], partitioner=af.fixed_size_partitioner(3))
    sess.run(af.global_variables_initializer())
    x = sess.run(v.as_tensor())
    limit = np.sqrt(6.0 / 1004)
    assert np.abs(x).max() <= limit and np.abs(x).max() > 0.9 * limit


# -- embedding lookups over shards ------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_sharded_embedding_lookup_matches_tf(sess, strategy):
    want = TF["embedding"][strategy]
    shards = [af.Variable(np.array(s, np.float32), name=f"shard{i}")
              for i, s in enumerate(want["shards"])]  # fmt: skip
    ids = np.array(TF["embedding"]["ids"], np.int64)
    rows = af.nn.embedding_lookup(shards, ids, partition_strategy=strategy)
    clipped = af.nn.embedding_lookup(shards, ids, partition_strategy=strategy, max_norm=1.0)
    types = {op.type for op in sess.graph.get_operations()
             if op.name.startswith("embedding_lookup/")}  # fmt: skip
    assert {"DynamicPartition", "GatherV2"} <= types
    assert sess.graph.get_operation_by_name("embedding_lookup").type == "ParallelDynamicStitch"
    sp = af.SparseTensor([[0, 0], [0, 1], [1, 0], [3, 0], [3, 1], [3, 2]],
                         np.array([1, 9, 4, 4, 0, 8], np.int64), [5, 3])  # fmt: skip
    spw = af.SparseTensor(sp.indices, np.array([1.0, 2.0, 0.5, 1.0, 3.0, -1.0], np.float32),
                          sp.dense_shape)  # fmt: skip
    combiners = ("sum", "mean", "sqrtn")
    sparse = {c: af.nn.embedding_lookup_sparse(shards, sp, None, strategy, combiner=c)
              for c in combiners}  # fmt: skip
    sparse_w = {c: af.nn.embedding_lookup_sparse(shards, sp, spw, strategy, combiner=c)
                for c in combiners}  # fmt: skip
    coef = np.array(TF["embedding"]["coef"], np.float32)
    loss = af.reduce_sum(rows * coef)
    grads = af.gradients(loss, shards)
    assert (
        all(isinstance(g, IndexedSlices) for g in grads)
        and want["grad_types"] == ["IndexedSlices"] * 3
    )
    train = af.train.GradientDescentOptimizer(0.5).minimize(loss)
    sess.run(af.global_variables_initializer())
    assert rows.shape.as_list() == [2, 3, 4]
    np.testing.assert_allclose(sess.run(rows), want["rows"], rtol=1e-6)
    np.testing.assert_allclose(sess.run(clipped), want["clipped"], rtol=1e-6)
    for c in combiners:
        np.testing.assert_allclose(sess.run(sparse[c]), want["sparse"][c], rtol=1e-6)
        np.testing.assert_allclose(sess.run(sparse_w[c]), want["sparse_weighted"][c], rtol=1e-6)
    sess.run(train)
    for s, after in zip(shards, want["after_sgd"]):
        np.testing.assert_allclose(sess.run(s), after, rtol=1e-6)


def test_lookup_over_a_partitioned_variable_runs_on_its_shards(graph):
    full = np.arange(40, dtype=np.float32).reshape(10, 4) / 10.0
    config = af.ConfigProto(device_count={"CPU": 3})
    turn = iter(range(100))

    def ps(op):  # slices on CPU:1 and CPU:2, like two parameter servers; the rest CPU:0
        return f"/device:CPU:{1 + next(turn) % 2}" if op.type == "VariableV2" else "/cpu:0"

    with af.device(ps):
        emb = af.get_variable("emb", initializer=af.constant(full),
                              partitioner=af.fixed_size_partitioner(3))  # fmt: skip
    ids = af.placeholder(af.int64, [None])
    rows = af.nn.embedding_lookup(emb, ids, partition_strategy="div")
    gathers = [op for op in graph.get_operations() if op.type == "GatherV2"]
    assert [op.colocation_groups() for op in gathers] == [p.op.colocation_groups() for p in emb]
    loss = af.reduce_sum(rows)
    train = af.train.GradientDescentOptimizer(1.0).minimize(loss)
    with af.Session(graph=graph, config=config) as s:
        s.run(af.global_variables_initializer())
        np.testing.assert_array_equal(s.run(rows, {ids: [9, 0, 4, 4]}), full[[9, 0, 4, 4]])
        s.run(train, {ids: [9, 0, 4, 4]})
        want = full.copy()
        want[[9, 0]] -= 1.0
        want[4] -= 2.0
        np.testing.assert_allclose(s.run(emb.as_tensor()), want)
