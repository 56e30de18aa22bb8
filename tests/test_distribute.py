"""tf.distribute in TF1 graph mode (asyncflow/distribute/).

Every expected value, name and message below was recorded from TensorFlow 2.21
(`tf.compat.v1`, graph mode, two CPU devices from `ConfigProto(device_count={"CPU": 2})`)
running the same program.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

CPU2 = af.ConfigProto(device_count={"CPU": 2})
DEV0 = "/replica:0/task:0/device:CPU:0"
DEV1 = "/replica:0/task:0/device:CPU:1"


@pytest.fixture(autouse=True)
def fresh_graph():
    with af.Graph().as_default() as g:
        yield g


def _mirrored(**kw):
    return af.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"], **kw)


def _scaled(x):
    """x times (this replica's id + 1)."""
    ctx = af.distribute.get_replica_context()
    return x * af.cast(ctx.replica_id_in_sync_group + 1, af.float32)


# -- the default strategy and the context functions ---------------------------------------


def test_default_context():
    assert not af.distribute.has_strategy()
    assert not af.distribute.in_cross_replica_context()
    ctx = af.distribute.get_replica_context()
    assert ctx is not None and ctx.replica_id_in_sync_group == 0
    d = af.distribute.get_strategy()
    assert type(d).__name__ == "_DefaultDistributionStrategyV1"
    assert d.num_replicas_in_sync == 1
    assert d.run(lambda x: x + 1, args=(1,)) == 2
    assert d.experimental_local_results(5) == (5,)
    assert ctx.all_reduce("sum", af.constant(2.0)).name == "IdentityN:0"
    st, x, cross = ctx.merge_call(
        lambda s, x: (type(s).__name__, x, af.distribute.in_cross_replica_context()), args=(3,)
    )
    assert (st, x, cross) == ("_DefaultDistributionStrategyV1", 3, True)
    with pytest.raises(RuntimeError, match="worker_devices.. method unsupported by default"):
        d.extended.worker_devices  # noqa: B018


def test_reduce_op_input_context_and_loss_reduction():
    R = af.distribute.ReduceOp
    assert list(R) == [R.SUM, R.MEAN] and str(R.SUM) == "ReduceOp.SUM"
    assert R.from_variable_aggregation(af.VariableAggregation.MEAN) is R.MEAN
    with pytest.raises(ValueError, match="Could not convert from `tf.VariableAggregation`"):
        R.from_variable_aggregation(af.VariableAggregation.NONE)
    ic = af.distribute.InputContext(2, 1, 4)
    assert str(ic) == "tf.distribute.InputContext(input pipeline id 1, total: 2)"
    assert ic.get_per_replica_batch_size(8) == 2
    with pytest.raises(ValueError, match="The `global_batch_size` 7 is not divisible by"):
        ic.get_per_replica_batch_size(7)
    modes = [m.name for m in af.distribute.InputReplicationMode]
    assert modes == ["PER_WORKER", "PER_REPLICA"]
    assert af.distribute.get_loss_reduction() is R.SUM


def test_experimental_set_strategy():
    s = _mirrored()
    af.distribute.experimental_set_strategy(s)
    assert af.distribute.get_strategy() is s and af.distribute.in_cross_replica_context()
    af.distribute.experimental_set_strategy(None)
    assert not af.distribute.has_strategy()
    with s.scope(), pytest.raises(RuntimeError, match="Must not be called inside"):
        af.distribute.experimental_set_strategy(s)


# -- MirroredStrategy: devices, variables ------------------------------------------------


def test_devices():
    s = _mirrored()
    assert s.num_replicas_in_sync == 2
    assert s.extended.worker_devices == (DEV0, DEV1)
    # (TF's default: every GPU, else the CPU; the stand-in GPUs count as GPUs)
    default = ("/replica:0/task:0/device:GPU:0",) if af.test.is_gpu_available() else (DEV0,)
    assert af.distribute.MirroredStrategy().extended.worker_devices[:1] == default
    assert af.distribute.MirroredStrategy([]).extended.worker_devices[:1] == default
    with pytest.raises(AssertionError, match="No duplicates allowed in `devices` argument"):
        af.distribute.MirroredStrategy(["/cpu:0", "/cpu:0"])
    with pytest.raises(ValueError, match="foo"):
        af.distribute.MirroredStrategy(["foo"])


def test_mirrored_variables_names_devices_collections():
    s = _mirrored()
    with s.scope():
        v = af.Variable([1.0, 2.0], name="v")
        w = af.get_variable("w", [2], initializer=af.ones_initializer())
        assert af.distribute.has_strategy() and af.distribute.in_cross_replica_context()
        assert af.distribute.get_replica_context() is None
    assert type(v).__name__ == "MirroredVariable" and isinstance(v, af.Variable)
    assert [x.name for x in v.values] == ["v:0", "v/replica_1:0"]
    assert [x.name for x in w.values] == ["w:0", "w/replica_1:0"]
    assert [x.device for x in v.values] == [DEV0, DEV1]
    assert [type(x).__name__ for x in v.values] == ["ResourceVariable"] * 2
    assert (v.name, v.op.name, v.device, v.trainable) == ("v:0", "v", DEV0, True)
    assert v.aggregation == af.VariableAggregation.NONE
    assert v.synchronization == af.VariableSynchronization.ON_WRITE
    assert repr(v).startswith("MirroredVariable:{\n  0: <tf.Variable 'v:0' shape=(2,)")
    assert [x.name for x in af.global_variables()] == ["v:0", "w:0"]
    assert all(type(x).__name__ == "MirroredVariable" for x in af.global_variables())
    # As TF's: tf.Variable (trainable left to default) leaves its copies trainable;
    # get_variable (trainable=True) makes the mirrored variable the trainable one.
    trainable = af.trainable_variables()
    assert [x.name for x in trainable] == ["v:0", "v/replica_1:0", "w:0"]
    assert trainable[1] is v.values[1] and trainable[2] is w


def test_copies_start_equal_and_assign_in_cross_replica_writes_all():
    s = _mirrored()
    with s.scope():
        r = af.Variable(af.random_uniform([3], seed=1), name="r")
        v = af.Variable(2.0, name="v")
        inc = v.assign_add(1.0)
        assign = v.assign(5.0)
    assert type(inc).__name__ == "Mirrored"
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        a, b = sess.run(r.values)
        np.testing.assert_array_equal(a, b)
        assert sess.run(s.experimental_local_results(inc)) == (3.0, 3.0)
        assert sess.run(v.values) == (3.0, 3.0)
        sess.run(s.experimental_local_results(assign))
        assert sess.run(v) == 5.0 and sess.run(v.values) == (5.0, 5.0)


def test_variables_made_in_a_replica_are_made_once():
    s = _mirrored()

    def fn():
        rv = af.Variable(1.0, name="rv")
        gv = af.get_variable("gv", [2])
        return rv, gv

    rv, gv = s.run(fn)
    assert type(rv).__name__ == "MirroredVariable"
    assert [x.name for x in rv.values] == ["rv:0", "rv/replica_1:0"]
    assert [x.name for x in gv.values] == ["gv:0", "gv/replica_1:0"]
    assert [x.name for x in af.global_variables()] == ["rv:0", "gv:0"]


def test_aggregated_assign_in_replica():
    s = _mirrored()
    with s.scope():
        vs = af.Variable(0.0, name="vs", aggregation=af.VariableAggregation.SUM)
        vm = af.Variable(0.0, name="vm", aggregation=af.VariableAggregation.MEAN)
        vn = af.Variable(0.0, name="vn")
        with pytest.raises(ValueError, match="Invalid variable aggregation mode: x for variable"):
            af.Variable(1.0, aggregation="x")

    def fn():
        r = _scaled(1.0)
        return vs.assign_add(r), vm.assign(r * 10), vn.assign(r)

    a, b, c = s.run(fn)
    assert [type(x).__name__ for x in (a, b)] == ["PerReplica", "PerReplica"]
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        sess.run([s.experimental_local_results(x) for x in (a, b, c)])
        assert sess.run(vs.values) == (3.0, 3.0)
        assert sess.run(vm.values) == (15.0, 15.0)
        assert sess.run(vn.values) == (1.0, 2.0)  # NONE: each replica writes its own copy


# -- run, all_reduce, reduce, merge_call ---------------------------------------------------


def test_run_replica_ids_and_all_reduce():
    s = _mirrored()

    def step(x):
        ctx = af.distribute.get_replica_context()
        assert ctx.num_replicas_in_sync == 2 and ctx.strategy is s
        assert not af.distribute.in_cross_replica_context()
        assert af.distribute.get_strategy() is s
        return ctx.replica_id_in_sync_group, ctx.all_reduce("sum", _scaled(x))

    rid, total = s.run(step, args=(af.constant(2.0),))
    assert type(rid).__name__ == "PerReplica"
    names = [t.name for t in s.experimental_local_results(rid)]
    assert names == ["replica_id_in_sync_group:0", "replica_1/replica_id_in_sync_group:0"]
    assert [t.device for t in s.experimental_local_results(total)] == [DEV0, DEV1]
    red = s.reduce("sum", total, axis=None)
    with af.Session(config=CPU2) as sess:
        assert sess.run(s.experimental_local_results(rid)) == (0, 1)
        assert sess.run(s.experimental_local_results(total)) == (6.0, 6.0)
        assert sess.run(red) == 12.0


@pytest.mark.parametrize(
    "cross_device_ops",
    [
        None,
        af.distribute.ReductionToOneDevice(),
        af.distribute.ReductionToOneDevice(reduce_to_device="/cpu:1"),
        af.distribute.HierarchicalCopyAllReduce(),
        af.distribute.NcclAllReduce(),
    ],
)
def test_reduce_and_all_reduce_mean_over_every_cross_device_ops(cross_device_ops):
    s = _mirrored(cross_device_ops=cross_device_ops)

    def fn(x):
        y = _scaled(x)
        ctx = af.distribute.get_replica_context()
        return y, ctx.all_reduce("mean", y), ctx.all_reduce("sum", {"a": y, "b": [y * 2]})

    y, m, d = s.run(fn, args=(af.constant([1.0, 2.0, 3.0]),))
    assert sorted(d) == ["a", "b"]
    outs = [s.reduce(op, y, axis=axis) for op in ("sum", "mean") for axis in (None, 0)]
    with af.Session(config=CPU2) as sess:
        got_m, got_outs, got_b = sess.run(
            [s.experimental_local_results(m), outs, s.experimental_local_results(d["b"][0])]
        )
    for part in got_m:
        np.testing.assert_allclose(part, [1.5, 3.0, 4.5])
    np.testing.assert_allclose(got_outs[0], [3.0, 6.0, 9.0])
    assert got_outs[1] == 18.0
    np.testing.assert_allclose(got_outs[2], [1.5, 3.0, 4.5])
    assert got_outs[3] == 3.0
    for part in got_b:
        np.testing.assert_allclose(part, [6.0, 12.0, 18.0])


def test_regrouped_results_and_reduce_errors():
    s = _mirrored()
    assert s.run(lambda: 3) == 3
    out = s.run(lambda: {"k": af.constant(1.0), "t": (af.constant(2), "str")})
    assert type(out["k"]).__name__ == "PerReplica" and out["t"][1] == "str"
    assert repr(out["k"]).startswith("PerReplica:{\n  0: <tf.Tensor 'Const")
    c = af.constant(1.0)
    assert s.reduce("mean", c, axis=None) is c
    with pytest.raises(ValueError, match="A non-DistributedValues value .* cannot be reduced"):
        s.reduce("sum", c, axis=None)
    with pytest.raises(ValueError, match="'MAX' is not a valid ReduceOp"):
        s.reduce("max", c, axis=None)


def test_replica_errors():
    s = _mirrored()

    def bad(x):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        s.run(bad, args=(1,))

    def uneven():
        ctx = af.distribute.get_replica_context()
        if af.get_default_graph().get_name_scope().startswith("replica_1"):
            return 1
        return ctx.merge_call(lambda st: 2)

    with pytest.raises(RuntimeError, match="Some replicas made a different number of"):
        s.run(uneven)
    s2 = _mirrored()
    with s.scope(), pytest.raises(RuntimeError, match="Mixing different tf.distribute.Strategy"):
        with s2.scope():
            pass


def test_merge_call_gathers_and_splits():
    s = _mirrored()

    def fn():
        ctx = af.distribute.get_replica_context()
        x = _scaled(af.constant(1.0))

        def merge(strategy, xs):
            assert af.distribute.in_cross_replica_context()
            assert type(xs).__name__ == "PerReplica"
            return strategy.extended.reduce_to("sum", xs, xs)

        return ctx.merge_call(merge, args=(x,))

    out = s.run(fn)
    with af.Session(config=CPU2) as sess:
        assert sess.run(s.experimental_local_results(out)) == (3.0, 3.0)


# -- optimizers ----------------------------------------------------------------------------


def test_gradient_descent_sums_the_replicas_gradients():
    s = _mirrored()
    with s.scope():
        v = af.Variable([1.0, 2.0], name="v")
        opt = af.train.GradientDescentOptimizer(0.1)

        def step(x):
            return opt.minimize(af.reduce_sum(v * _scaled(x)))

        train = s.run(step, args=(af.constant([1.0, 3.0]),))
        with pytest.raises(
            RuntimeError, match="instead of `apply_gradients..` in a cross-replica"
        ):
            opt.apply_gradients([(af.constant([1.0, 1.0]), v)])
    assert isinstance(train, af.Operation)
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        sess.run(train)
        for part in sess.run(v.values):
            np.testing.assert_allclose(part, [0.7, 1.0999999])


def test_adam_and_momentum_with_global_step():
    s = _mirrored()
    with s.scope():
        v = af.Variable([1.0, 2.0], name="v")
        gs = af.train.get_or_create_global_step()
        adam = af.train.AdamOptimizer(0.1)
        momentum = af.train.MomentumOptimizer(0.1, 0.9)
        train = s.run(
            lambda x: adam.minimize(af.reduce_sum(v * v * _scaled(x)), global_step=gs),
            args=(af.constant([1.0, 3.0]),),
        )
        train2 = s.run(
            lambda x: momentum.minimize(af.reduce_sum(v * _scaled(x))),
            args=(af.constant([1.0, 3.0]),),
        )
    assert type(gs).__name__ == "MirroredVariable"
    assert gs.aggregation == af.VariableAggregation.ONLY_FIRST_REPLICA
    assert type(train).__name__ == "PerReplica" and isinstance(train2, af.Operation)
    assert [(type(x).__name__, x.name) for x in af.global_variables()] == [
        ("MirroredVariable", n)
        for n in (
            "v:0",
            "global_step:0",
            "beta1_power:0",
            "beta2_power:0",
            "v/Adam:0",
            "v/Adam_1:0",
            "v/Momentum:0",
        )
    ]
    slot = momentum.get_slot(v, "momentum")
    assert [(x.name, x.device) for x in slot.values] == [
        ("v/Momentum:0", DEV0),
        ("v/Momentum/replica_1:0", DEV1),
    ]
    assert [x.name for x in adam.get_slot(v, "m").values] == ["v/Adam:0", "v/Adam/replica_1:0"]
    expected = [[0.9, 1.9], [0.80041254, 1.8001668], [0.5004125, 0.9001668]]
    expected += [[-0.06958747, -0.8098331]]
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        got = []
        for i, op in enumerate([train, train, train2, train2]):
            sess.run(s.experimental_local_results(op))
            got.append(sess.run(v.values))
            if i < 2:
                assert sess.run(gs.values) == (i + 1, i + 1)
        for parts, want in zip(got, expected, strict=True):
            for part in parts:
                np.testing.assert_allclose(part, want, rtol=1e-6)
        beta1, beta2 = adam._get_beta_accumulators()
        np.testing.assert_allclose(sess.run(beta1.values), [0.7289999] * 2, rtol=1e-6)
        np.testing.assert_allclose(sess.run(beta2.values), [0.9970031] * 2, rtol=1e-6)


# -- OneDeviceStrategy -------------------------------------------------------------------


def test_one_device_strategy():
    o = af.distribute.OneDeviceStrategy("/cpu:0")
    with o.scope():
        ov = af.Variable(3.0, name="ov")
        out = o.run(lambda x: x * 2, args=(af.constant(1.0),))
        opt = af.train.GradientDescentOptimizer(0.5)
        train = o.run(lambda: opt.minimize(ov * ov))
    assert (type(ov).__name__, ov.name, o.num_replicas_in_sync) == ("ResourceVariable", "ov:0", 1)
    assert o.extended.worker_devices == (DEV0,)
    assert out.name == "mul:0" and out.device == DEV0
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(train)
        assert sess.run(ov) == 0.0
        assert sess.run(o.reduce("sum", out, axis=None)) == 2.0


# -- input ---------------------------------------------------------------------------------


def test_dataset_batches_are_split_over_the_replicas():
    s = _mirrored()
    ds = af.data.Dataset.range(7).map(lambda x: {"f": x, "g": x * 10}).batch(3)
    it = s.make_dataset_iterator(ds)
    nx = it.get_next()
    assert type(nx["f"]).__name__ == "PerReplica"
    assert [t.device for t in nx["f"].values] == [DEV0, DEV1]
    want = [
        {"f": ([0, 1], [2]), "g": ([0, 10], [20])},
        {"f": ([3, 4], [5]), "g": ([30, 40], [50])},
        {"f": ([6], []), "g": ([60], [])},
    ]
    with af.Session(config=CPU2) as sess:
        sess.run(it.initialize())
        for w in want:
            got = sess.run({k: s.experimental_local_results(v) for k, v in nx.items()})
            assert {k: tuple(a.tolist() for a in v) for k, v in got.items()} == w
        with pytest.raises(af.errors.OutOfRangeError):
            sess.run(s.experimental_local_results(nx["f"]))


def test_distribute_dataset_and_input_fn_iterator():
    s = _mirrored()
    dd = s.experimental_distribute_dataset(af.data.Dataset.range(10).batch(4))
    it = dd.make_initializable_iterator()
    nx = it.get_next()
    contexts = []

    def input_fn(ctx):
        contexts.append((ctx.num_replicas_in_sync, ctx.input_pipeline_id, ctx.num_input_pipelines))
        return af.data.Dataset.range(6).batch(2)

    it3 = s.make_input_fn_iterator(input_fn)
    nx3 = it3.get_next()
    assert contexts == [(2, 0, 1)]
    with af.Session(config=CPU2) as sess:
        sess.run(it.initializer)
        got = [sess.run(s.experimental_local_results(nx)) for _ in range(3)]
        assert [tuple(a.tolist() for a in g) for g in got] == [
            ([0, 1], [2, 3]),
            ([4, 5], [6, 7]),
            ([8], [9]),
        ]
        with pytest.raises(af.errors.OutOfRangeError):
            sess.run(s.experimental_local_results(nx))
        sess.run(it3.initializer)
        got = sess.run(s.experimental_local_results(nx3))
        assert [a.tolist() for a in got] == [[0, 1], [2, 3]]
        with pytest.raises(af.errors.OutOfRangeError):  # [4, 5] alone cannot feed both
            sess.run(s.experimental_local_results(nx3))
    # Elements of different shapes (a short last batch) are handed out as they are.
    it7 = s.make_input_fn_iterator(lambda ctx: af.data.Dataset.range(7).batch(3))
    nx7 = it7.get_next()
    with af.Session(config=CPU2) as sess:
        sess.run(it7.initializer)
        got = sess.run(s.experimental_local_results(nx7))
        assert [a.tolist() for a in got] == [[0, 1, 2], [3, 4, 5]]
        with pytest.raises(af.errors.OutOfRangeError):  # [6] alone cannot feed both
            sess.run(s.experimental_local_results(nx7))


def test_default_strategy_dataset_iterator():
    d = af.distribute.get_strategy()
    it = d.make_dataset_iterator(af.data.Dataset.range(3))
    n = it.get_next()
    with af.Session() as sess:
        sess.run(it.initializer)
        assert [sess.run(n), sess.run(n)] == [0, 1]


# -- extended ------------------------------------------------------------------------------


def test_extended_update_batch_reduce_to_and_call_for_each_replica():
    s = _mirrored()
    ext = s.extended
    with s.scope():
        v = af.Variable(1.0, name="v")
    per = ext.call_for_each_replica(_scaled, args=(af.constant(2.0),))
    assert type(per).__name__ == "PerReplica"
    with s.scope():
        (red,) = ext.batch_reduce_to("sum", [(per, v)])
        upd = ext.update(v, lambda var, x: var.assign_add(x), args=(red,))
        copies = ext.broadcast_to(af.constant(7.0), v)
    assert type(upd).__name__ == "Mirrored"
    assert [t.device for t in red.values] == [DEV0, DEV1]
    assert ext.worker_devices_by_replica == [[DEV0], [DEV1]]
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        assert sess.run(red.values) == (6.0, 6.0)
        sess.run(s.experimental_local_results(upd))
        assert sess.run(v.values) == (7.0, 7.0)
        assert sess.run(copies.values) == (7.0, 7.0)


# -- the stand-in GPUs -----------------------------------------------------------------------


def test_mirrored_over_two_fake_gpus(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "2")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    s = af.distribute.MirroredStrategy()
    gpu0, gpu1 = "/replica:0/task:0/device:GPU:0", "/replica:0/task:0/device:GPU:1"
    assert s.extended.worker_devices == (gpu0, gpu1)
    with s.scope():
        v = af.Variable([1.0, 2.0], name="v")
        opt = af.train.GradientDescentOptimizer(0.1)
        train = s.run(
            lambda x: opt.minimize(af.reduce_sum(v * _scaled(x))),
            args=(af.constant([1.0, 3.0]),),
        )
    assert [x.device for x in v.values] == [gpu0, gpu1]
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        sess.run(train)
        for part in sess.run(v.values):  # the two-CPU numbers TF gives
            np.testing.assert_allclose(part, [0.7, 1.0999999])


# -- a model: tf.layers in the replicas, a checkpoint -------------------------------------


def test_layers_model_trains_and_checkpoints(tmp_path):
    s = _mirrored()
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    y = np.array([[1.0], [0.0], [1.0], [0.5]], np.float32)
    ds = af.data.Dataset.from_tensor_slices((x, y)).repeat().batch(4)
    with s.scope():
        it = s.make_dataset_iterator(ds)
        opt = af.train.GradientDescentOptimizer(0.5)
        gs = af.train.get_or_create_global_step()

    def step(inputs):
        feats, labels = inputs
        h = af.layers.dense(
            feats, 2, af.nn.tanh, kernel_initializer=af.constant_initializer(0.1), name="h"
        )
        out = af.layers.dense(h, 1, kernel_initializer=af.constant_initializer(-0.2), name="out")
        loss = af.losses.mean_squared_error(labels, out)
        with af.control_dependencies([opt.minimize(loss, global_step=gs)]):
            return af.identity(loss)

    with s.scope():
        losses = s.run(step, args=(it.get_next(),))
        mean_loss = s.reduce("mean", losses, axis=None)
    names = ["global_step:0", "h/kernel:0", "h/bias:0", "out/kernel:0", "out/bias:0"]
    assert [v.name for v in af.global_variables()] == names
    assert sorted(v.name for v in af.trainable_variables()) == sorted(names[1:])
    saver = af.train.Saver()
    kernel = af.global_variables()[1]
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        sess.run(it.initializer)
        got = [sess.run(mean_loss) for _ in range(3)]
        np.testing.assert_allclose(got, [0.6447371, 0.7216543, 1.3885987], rtol=1e-5)
        want = [[0.39078006] * 2, [0.45800239] * 2, [0.52522463] * 2]
        for part in sess.run(kernel.values):
            np.testing.assert_allclose(part, want, rtol=1e-5)
        path = saver.save(sess, str(tmp_path / "m"))
        saved = sorted(n for n, _ in af.train.list_variables(path))
        assert saved == ["global_step", "h/bias", "h/kernel", "out/bias", "out/kernel"]
        sess.run([c.assign(c * 0) for c in kernel.values])
        saver.restore(sess, path)
        for part in sess.run(kernel.values):  # every copy restored
            np.testing.assert_allclose(part, want, rtol=1e-5)


def test_all_reduce_gradient_and_scopes_in_replicas():
    s = _mirrored()

    def fn():
        ctx = af.distribute.get_replica_context()
        r = af.cast(ctx.replica_id_in_sync_group + 1, af.float32)
        x = af.constant(3.0) * r
        total = ctx.all_reduce("sum", x)
        loss = total * r + ctx.all_reduce("mean", x * x)
        with af.variable_scope("model"):
            z = af.get_variable("z", [], initializer=af.ones_initializer())
            with af.name_scope("inner"):
                q = af.Variable(2.0, name="q")
        return af.gradients(loss, [x])[0], total, z, q, af.identity(z, name="zz")

    g, total, z, q, zz = s.run(fn)
    assert [t.name for t in total.values] == ["IdentityN:0", "replica_1/IdentityN:0"]
    assert [t.name for t in zz.values] == ["zz:0", "replica_1/zz:0"]
    assert [v.name for v in z.values] == ["model/z:0", "model/z/replica_1:0"]
    assert [v.name for v in q.values] == ["model/inner/q:0", "model/inner/q/replica_1:0"]
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        # d/dx: the replicas' upstream gradients of `total` summed (1 + 2), plus 2x.
        assert sess.run(s.experimental_local_results(g)) == (9.0, 15.0)


def test_cross_replica_methods_refuse_a_replica():
    s = _mirrored()
    with s.scope():
        v = af.Variable(1.0, name="v")
    msg = "Method requires being in cross-replica context, use get_replica_context.*merge_call"
    calls = {
        "reduce": lambda: s.reduce("sum", af.constant(1.0), axis=None),
        "run": lambda: s.run(lambda: af.constant(1.0)),
        "scope": lambda: s.scope().__enter__(),
        "reduce_to": lambda: s.extended.reduce_to("sum", af.constant(1.0), v),
    }
    errors = {}

    def fn():
        for name, call in calls.items():
            with pytest.raises(RuntimeError, match=msg):
                call()
            errors[name] = True
        # update in a replica writes that replica's copy only
        return s.extended.update(v, lambda x: x.assign_add(1.0))

    out = s.run(fn)
    assert sorted(errors) == sorted(calls)
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        sess.run(s.experimental_local_results(out))
        assert sess.run(v.values) == (2.0, 2.0)
        with pytest.raises(TypeError, match="PerReplica"):
            sess.run(out)


# -- sync-on-read variables and metrics ----------------------------------------------------


def test_metric_mean_over_replicas():
    s = _mirrored()

    def fn():
        return af.metrics.mean(_scaled(af.constant([1.0, 2.0])))

    with s.scope():
        value, update = s.run(fn)
    assert isinstance(value, af.Tensor)  # one value, computed across the replicas
    assert [t.name for t in update.values] == ["mean/update_op:0", "replica_1/mean/update_op:0"]
    total = af.local_variables()[0]
    assert [(type(v).__name__, v.name) for v in af.local_variables()] == [
        ("SyncOnReadVariable", "mean/total:0"),
        ("SyncOnReadVariable", "mean/count:0"),
    ]
    assert [x.name for x in total.values] == ["mean/total:0", "mean/total/replica_1:0"]
    assert total.synchronization == af.VariableSynchronization.ON_READ
    assert total.aggregation == af.VariableAggregation.SUM
    with af.Session(config=CPU2) as sess:
        sess.run(af.local_variables_initializer())
        assert sess.run(s.experimental_local_results(update)) == (1.5, 3.0)
        assert sess.run(value) == 2.25


def test_sync_on_read_variable_reads_and_writes():
    s = _mirrored()
    with s.scope():
        sv = af.Variable(
            0.0,
            name="sv",
            synchronization=af.VariableSynchronization.ON_READ,
            aggregation=af.VariableAggregation.SUM,
        )
        a = sv.assign(4.0)
        # TF 2.21 accepts a trainable sync-on-read variable
        tv = af.Variable(0.0, trainable=True, synchronization=af.VariableSynchronization.ON_READ)
    b = s.run(lambda: sv.assign_add(_scaled(1.0)))
    assert type(sv).__name__ == "SyncOnReadVariable" and af.trainable_variables() == [tv]
    assert tv.name == "Variable:0" and tv.trainable
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        assert (sess.run(sv), sess.run(sv.values)) == (0.0, (0.0, 0.0))
        sess.run(s.experimental_local_results(a))  # a SUM variable's value is shared out
        assert (sess.run(sv), sess.run(sv.values)) == (4.0, (2.0, 2.0))
        sess.run(s.experimental_local_results(b))  # each replica writes its own copy
        assert (sess.run(sv), sess.run(sv.values)) == (7.0, (3.0, 4.0))


def test_sync_on_read_variable_checkpoint(tmp_path):
    s = _mirrored()
    with s.scope():
        sv = af.Variable(
            0.0,
            name="sv",
            synchronization=af.VariableSynchronization.ON_READ,
            aggregation=af.VariableAggregation.SUM,
        )
    add = s.run(lambda: sv.assign_add(_scaled(1.0)))
    saver = af.train.Saver([sv])
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        sess.run(s.experimental_local_results(add))
        path = saver.save(sess, str(tmp_path / "m"))
        assert af.train.load_variable(path, "sv") == 3.0  # the copies' sum
        saver.restore(sess, path)
        assert sess.run(sv.values) == (1.5, 1.5)


def test_one_device_mirrored_and_an_outer_device_scope():
    s = af.distribute.MirroredStrategy(["/cpu:0"])
    with s.scope():
        v = af.Variable([1.0, 2.0], name="v")
        opt = af.train.MomentumOptimizer(0.1, 0.5)
        train = s.run(lambda: opt.minimize(af.reduce_sum(v * v)))
    r = s.run(lambda: af.distribute.get_replica_context().all_reduce("mean", af.identity(v)))
    assert [x.name for x in v.values] == ["v:0"]
    assert isinstance(r, af.Tensor) and isinstance(train, af.Operation)
    with af.device("/cpu:1"):  # the replicas' own devices win
        q = _mirrored().run(lambda: af.constant(1.0) + 1)
    assert [t.device for t in q.values] == [DEV0, DEV1]
    with af.Session(config=CPU2) as sess:
        sess.run(af.global_variables_initializer())
        sess.run(train)
        sess.run(train)
        np.testing.assert_allclose(sess.run(v), [0.54, 1.08])
        np.testing.assert_allclose(sess.run(r), [0.54, 1.08])


def test_cross_replica_context_and_run_aliases():
    s = _mirrored()
    assert af.distribute.get_cross_replica_context() is None  # the default replica context
    with s.scope():
        assert af.distribute.get_cross_replica_context() is s
        seen = []

        def fn(x):
            seen.append(af.distribute.get_cross_replica_context())
            return x + 1

        out = s.experimental_run_v2(fn, args=(af.constant(1.0),))  # TF 1.15's name
        assert seen == [None, None] and type(out).__name__ == "PerReplica"
        it = s.make_dataset_iterator(af.data.Dataset.range(4).batch(2))
        pair = s.experimental_run(lambda x: x * 10, it)
    with af.Session(config=CPU2) as sess:
        sess.run(it.initializer)
        assert [a.tolist() for a in sess.run(pair.values)] == [[0], [10]]
