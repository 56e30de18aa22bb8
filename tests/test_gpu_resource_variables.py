"""Resource variables on a GPU device (the strict CuPy stand-in, devices/fake_cupy.py).

The variable's buffer lives in device memory and its handle in host memory (TF's
HostMemory("resource") on every GPU kernel): VarHandleOp, ReadVariableOp, the assigns,
scatters, gathers and the optimizers' updates run on GPU:0, and the stand-in fails any
NumPy call on a device array, so a kernel that reads the buffer on the host is caught.

Expected values were recorded from TF 2.21 (`tf.compat.v1`, CPU); every GPU result is
also compared with the same program on asyncflow's CPU, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow.ops import resource_variable_ops as rvo

pytestmark = pytest.mark.timeout(60)

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


@pytest.fixture(autouse=True)
def fake_gpu(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _logged():
    return af.ConfigProto(log_device_placement=True)


def _placed(err: str, name: str, op_type: str) -> str:
    """The device the placement log gave op `name` (of `op_type`)."""
    prefix = f"{name}: ({op_type}): "
    for line in err.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :]
    raise AssertionError(f"{name} ({op_type}) not in the placement log:\n{err}")


def _devices(err: str, op_type: str) -> set:
    """The devices the placement log gave the ops of `op_type`."""
    tag = f": ({op_type}): "
    found = {line.split(tag)[1] for line in err.splitlines() if tag in line}
    assert found, f"no {op_type} in the placement log:\n{err}"
    return found


def test_create_read_and_assign_on_the_gpu(placement_log):
    with af.Graph().as_default():
        with af.device("/gpu:0"):
            v = af.Variable([1.0, 2.0, 3.0, 4.0], use_resource=True, name="v")
            a = v.assign([2.0, 4.0, 6.0, 8.0])
            b = v.assign_add([1.0, 1.0, 1.0, 1.0])
            c = v.assign_sub([0.5, 0.5, 0.5, 0.5])
            y = v * 3.0
        with af.Session(config=_logged()) as s:
            s.run(af.global_variables_initializer())
            got = [s.run(t).tolist() for t in (y, a, b, c, v)]
    # TF 2.21
    assert got == [
        [3.0, 6.0, 9.0, 12.0],
        [2.0, 4.0, 6.0, 8.0],
        [3.0, 5.0, 7.0, 9.0],
        [2.5, 4.5, 6.5, 8.5],
        [2.5, 4.5, 6.5, 8.5],
    ]
    err = placement_log()
    for op_type in ("VarHandleOp", "AssignVariableOp", "AssignAddVariableOp",
                    "AssignSubVariableOp", "ReadVariableOp", "Mul"):  # fmt: skip
        assert _devices(err, op_type) == {GPU0}, op_type


def test_assign_checks_the_shape_of_a_device_value():
    with af.Graph().as_default():
        with af.device("/gpu:0"):
            v = af.Variable([1.0, 2.0], use_resource=True, name="v")
            bad = rvo.assign_variable_op(v.handle, [1.0, 2.0, 3.0], validate_shape=True)
        with af.Session() as s:
            s.run(v.initializer)
            with pytest.raises(af.errors.InvalidArgumentError, match=r"Expected \[2\] got \[3\]"):
                s.run(bad)


def _scatter_program(dev):
    with af.Graph().as_default():
        with af.device(dev):
            v = af.Variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], use_resource=True, name="v")

            def sl(vals, idx):
                return af.IndexedSlices(af.constant(vals), af.constant(idx))

            updates = [
                v.scatter_add(sl([[1.0, 1.0], [2.0, 2.0]], [0, 0])),
                v.scatter_sub(sl([[1.0, 0.5]], [2])),
                v.scatter_update(sl([[7.0, 8.0]], [1])),
                v.scatter_max(sl([[5.0, 0.0], [6.0, 1.0]], [0, 0])),
                v.scatter_min(sl([[1.0, 9.0]], [1])),
                v.scatter_mul(sl([[3.0, 2.0], [2.0, 0.5]], [2, 2])),
                v.scatter_div(sl([[2.0, 4.0], [2.0, 1.0]], [0, 0])),
            ]
        with af.Session(config=_logged()) as s:
            s.run(af.global_variables_initializer())
            return [s.run(u).tolist() for u in updates]


def test_scatters_with_duplicate_indices_on_the_gpu(placement_log):
    got = _scatter_program("/gpu:0")
    err = placement_log()
    for kind in ("Add", "Sub", "Update", "Max", "Min", "Mul", "Div"):
        assert _devices(err, f"ResourceScatter{kind}") == {GPU0}, kind
    # TF 2.21
    assert got == [
        [[4.0, 5.0], [3.0, 4.0], [5.0, 6.0]],
        [[4.0, 5.0], [3.0, 4.0], [4.0, 5.5]],
        [[4.0, 5.0], [7.0, 8.0], [4.0, 5.5]],
        [[6.0, 5.0], [7.0, 8.0], [4.0, 5.5]],
        [[6.0, 5.0], [1.0, 8.0], [4.0, 5.5]],
        [[6.0, 5.0], [1.0, 8.0], [24.0, 5.5]],
        [[1.5, 1.25], [1.0, 8.0], [24.0, 5.5]],
    ]
    assert got == _scatter_program("/cpu:0")


def test_integer_scatter_div_truncates_on_the_gpu():
    with af.Graph().as_default():
        with af.device("/gpu:0"):
            v = af.Variable([7, -7, 9], use_resource=True, name="v")
            d = af.scatter_div(v, [0, 1, 2, 2], [2, 2, -2, 2])
        with af.Session() as s:
            s.run(v.initializer)
            # C++ `/` (toward zero), duplicates one after another: 9 / -2 / 2 = -2
            assert s.run(d).tolist() == [3, -3, -2]


def test_embedding_lookup_and_its_sparse_update_on_the_gpu(placement_log):
    with af.Graph().as_default():
        with af.device("/gpu:0"):
            emb = af.Variable(
                [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]], use_resource=True, name="emb"
            )
            looked = af.nn.embedding_lookup(emb, [3, 0, 3])
            row = emb.sparse_read([1])
            loss = af.reduce_sum(looked * looked)
            train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        with af.Session(config=_logged()) as s:
            s.run(af.global_variables_initializer())
            rows = s.run(looked).tolist()
            assert s.run(row).tolist() == [[3.0, 4.0]]
            s.run(train)
            s.run(train)
            final = s.run(emb)
    err = placement_log()
    assert _devices(err, "ResourceGather") == {GPU0}
    assert _devices(err, "ResourceScatterSub") == {GPU0}  # the sparse SGD step
    # TF 2.21
    assert rows == [[7.0, 8.0], [1.0, 2.0], [7.0, 8.0]]
    np.testing.assert_array_equal(
        final,
        np.array([[0.64, 1.28], [3.0, 4.0], [5.0, 6.0], [2.52, 2.88]], np.float32),
    )


_OPTIMIZERS = {
    "GradientDescent": (
        lambda: af.train.GradientDescentOptimizer(0.1),
        "ResourceApplyGradientDescent",
        [0.46125727891921997, -18.07339859008789, 0.2506412863731384],
    ),
    "Momentum": (
        lambda: af.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
        "ResourceApplyMomentum",
        [-0.18581968545913696, -161.4023895263672, -37.1353645324707],
    ),
    "Adam": (
        lambda: af.train.AdamOptimizer(0.1),
        "ResourceApplyAdam",
        [0.7041547894477844, -2.300492525100708, 2.700869560241699],
    ),
    "RMSProp": (
        lambda: af.train.RMSPropOptimizer(0.1, momentum=0.5, centered=True),
        "ResourceApplyCenteredRMSProp",
        [0.3309343457221985, -3.2705631256103516, 1.9233980178833008],
    ),
    "Adagrad": (
        lambda: af.train.AdagradOptimizer(0.1),
        "ResourceApplyAdagrad",
        [0.7900323867797852, -2.236192226409912, 2.7771785259246826],
    ),
    "Ftrl": (
        lambda: af.train.FtrlOptimizer(
            0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.02
        ),
        "ResourceApplyFtrl",
        [0.6992850303649902, -2.1800496578216553, 2.743008613586426],
    ),
    "FtrlPower": (
        lambda: af.train.FtrlOptimizer(0.1, learning_rate_power=-0.7),
        "ResourceApplyFtrl",
        None,  # (compared with the CPU only)
    ),
}


def _train(dev, make):
    with af.Graph().as_default():
        with af.device(dev):
            v = af.Variable([1.0, -2.0, 3.0], use_resource=True, name="v")
            loss = af.reduce_sum(v * v * v)
            train = make().minimize(loss)
        apply_ops = {op.name for op in af.get_default_graph().get_operations()}
        with af.Session(config=_logged()) as s:
            s.run(af.global_variables_initializer())
            for _ in range(3):
                s.run(train)
            return s.run(v), apply_ops


@pytest.mark.parametrize("name", sorted(_OPTIMIZERS))
def test_optimizer_on_a_gpu_resource_variable_matches_the_cpu(name, placement_log):
    make, _, want = _OPTIMIZERS[name]
    on_gpu, _ = _train("/gpu:0", make)
    err = placement_log()
    assert _placed(err, "v", "VarHandleOp") == GPU0
    assert any(line.endswith(f"): {GPU0}") and "/update_v/" in line for line in err.splitlines())
    assert all(CPU0 not in line for line in err.splitlines() if "/update_v/" in line)
    on_cpu, _ = _train("/cpu:0", make)
    np.testing.assert_array_equal(on_gpu, on_cpu)
    if want is not None:  # TF 2.21
        np.testing.assert_allclose(on_gpu, want, rtol=1e-6)


def test_checkpoint_saved_from_the_gpu_restores_on_the_cpu_and_back(tmp_path):
    def build(dev):
        with af.device(dev):
            v = af.Variable([1.0, 2.0], use_resource=True, name="v")
            step = af.Variable(0, use_resource=True, name="step")
        return v, step, af.train.Saver()

    with af.Graph().as_default():
        v, step, saver = build("/gpu:0")
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            s.run([v.assign_add([0.5, 0.25]), step.assign(7)])
            first = saver.save(s, str(tmp_path / "gpu"))
    with af.Graph().as_default():
        v, step, saver = build("/cpu:0")
        with af.Session() as s:
            saver.restore(s, first)
            assert s.run(v).tolist() == [1.5, 2.25]
            assert s.run(step) == 7
            s.run(v.assign([3.0, 4.0]))
            second = saver.save(s, str(tmp_path / "cpu"))
    with af.Graph().as_default():
        v, step, saver = build("/gpu:0")
        with af.Session() as s:
            saver.restore(s, second)
            assert s.run(v).tolist() == [3.0, 4.0]
            assert s.run(step) == 7
    reader = af.train.load_checkpoint(second)
    assert reader.get_variable_to_shape_map() == {"v": [2], "step": []}


def test_cond_and_while_loop_read_a_gpu_resource_variable():
    with af.Graph().as_default():
        with af.device("/gpu:0"):
            v = af.Variable(2.0, use_resource=True, name="v")
        p = af.placeholder(af.bool, [])
        c = af.cond(p, lambda: v.read_value() * 10.0, lambda: v.read_value() - 1.0)
        w = af.while_loop(
            lambda i, acc: i < 4, lambda i, acc: (i + 1, acc + v.read_value()), [0, 0.0]
        )

        def body(i):
            with af.control_dependencies([v.assign_add(0.5)]):
                return i + 1

        w2 = af.while_loop(lambda i: i < 3, body, [0])
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            got = [s.run(c, {p: True}), s.run(c, {p: False}), s.run(w)[1], s.run(w2), s.run(v)]
    assert got == [20.0, 1.0, 8.0, 3, 3.5]  # TF 2.21


def test_a_loop_on_the_cpu_passes_the_handle_of_a_gpu_variable(placement_log):
    # The loop's primitives carry the handle (a host object) on the CPU; the reads and
    # updates inside join the variable on GPU:0.
    with af.Graph().as_default():
        with af.device("/gpu:0"):
            v = af.Variable([1.0, 2.0], use_resource=True, name="v")
        with af.device("/cpu:0"):

            def body(i, acc):
                with af.control_dependencies([v.assign_add([1.0, 1.0])]):
                    return i + 1, acc + af.reduce_sum(v.read_value())

            out = af.while_loop(lambda i, acc: i < 3, body, [0, 0.0])
        with af.Session(config=_logged()) as s:
            s.run(af.global_variables_initializer())
            assert s.run(out)[1] == 5.0 + 7.0 + 9.0
            assert s.run(v).tolist() == [4.0, 5.0]
    err = placement_log()
    assert _placed(err, "while/AssignAddVariableOp/Enter", "Enter") == CPU0
    assert _placed(err, "while/AssignAddVariableOp", "AssignAddVariableOp") == GPU0
    assert _placed(err, "while/Read/ReadVariableOp", "ReadVariableOp") == GPU0


def test_host_only_resources_stay_on_the_cpu(placement_log):
    # A lookup table (string keys) and a queue have no GPU kernel: the placer puts them
    # on the CPU beside the GPU variables.
    with af.Graph().as_default():
        v = af.Variable([1.0, 2.0], use_resource=True, name="v")
        table = af.lookup.StaticHashTable(
            af.lookup.KeyValueTensorInitializer(["a", "b"], [0, 1]), -1
        )
        q = af.FIFOQueue(2, af.float32)
        enq = q.enqueue(af.reduce_sum(v.read_value()))
        idx = table.lookup(af.constant(["b"]))
        y = af.gather(v.read_value(), idx)
        with af.Session(config=_logged()) as s:
            s.run([af.global_variables_initializer(), af.tables_initializer()])
            s.run(enq)
            assert s.run([y, q.dequeue()]) == [[2.0], 3.0]
    err = placement_log()
    assert _placed(err, "v", "VarHandleOp") == GPU0
    assert _placed(err, "fifo_queue", "FIFOQueueV2") == CPU0
    assert _placed(err, "hash_table", "HashTableV2") == CPU0


# TF 2.21: an embedding trained twice through each optimizer's sparse update (the
# optimizers deduplicate the lookup's indices with Unique, then SparseApply*).
_SPARSE = {
    "Momentum": (
        lambda: af.train.MomentumOptimizer(0.1, 0.9),
        [[0.46000000834465027, 0.9200000166893005], [3.0, 4.0], [0.0, -2.384185791015625e-07]],
    ),
    "Adam": (
        lambda: af.train.AdamOptimizer(0.1),
        [
            [0.8004125952720642, 1.8001668453216553],
            [3.0, 4.0],
            [4.800058364868164, 5.800047874450684],
        ],
    ),
    "RMSProp": (
        lambda: af.train.RMSPropOptimizer(0.1),
        [
            [0.6872513294219971, 1.5594706535339355],
            [3.0, 4.0],
            [4.466253280639648, 5.463592052459717],
        ],
    ),
    "Adagrad": (
        lambda: af.train.AdagradOptimizer(0.1),
        [[0.8347373008728027, 1.83154296875], [3.0, 4.0], [4.830023765563965, 5.829897880554199]],
    ),
    "Ftrl": (
        lambda: af.train.FtrlOptimizer(0.1),
        [
            [0.6857819557189941, 1.6771111488342285],
            [3.0, 4.0],
            [4.751560211181641, 5.751330375671387],
        ],
    ),
}


def _train_embedding(dev, make):
    with af.Graph().as_default():
        with af.device(dev):
            emb = af.Variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], use_resource=True, name="emb")
            loss = af.reduce_sum(af.nn.embedding_lookup(emb, [2, 0, 2]) ** 2)
            train = make().minimize(loss)
        with af.Session(config=_logged()) as s:
            s.run(af.global_variables_initializer())
            s.run(train)
            s.run(train)
            return s.run(emb)


@pytest.mark.parametrize("name", sorted(_SPARSE))
def test_sparse_update_of_a_gpu_embedding_matches_the_cpu(name, placement_log):
    make, want = _SPARSE[name]
    on_gpu = _train_embedding("/gpu:0", make)
    err = placement_log()
    assert _devices(err, "VarHandleOp") == {GPU0}
    assert _devices(err, "Unique") == {GPU0}
    on_cpu = _train_embedding("/cpu:0", make)
    np.testing.assert_array_equal(on_gpu, on_cpu)
    np.testing.assert_allclose(on_gpu, want, rtol=1e-6)  # (RMSProp: 1 ulp from TF's CPU)


def _sparse_with_duplicates(dev):
    from asyncflow.ops import training_ops

    with af.Graph().as_default():
        with af.device(dev):
            v = af.Variable([[1.0, 2.0], [3.0, 4.0]], use_resource=True, name="v")
            a = af.Variable([[0.1, 0.1], [0.1, 0.1]], use_resource=True, name="a")
            m = af.Variable([[0.0, 0.0], [0.0, 0.0]], use_resource=True, name="m")
            grad = [[1.0, 2.0], [0.5, 0.5], [3.0, -1.0], [1.0, 1.0]]
            adagrad = training_ops.sparse_apply_adagrad(
                v._ref(), a._ref(), 0.5, grad, [1, 0, 1, 1]
            )
            grad2 = [[1.0, 2.0], [3.0, -1.0]]
            momentum = training_ops.sparse_apply_momentum(
                v._ref(), m._ref(), 0.5, grad2, [1, 1], 0.9
            )
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            return [s.run(adagrad), s.run(a), s.run(momentum), s.run(m)]


def test_sparse_apply_with_duplicate_indices_applies_them_in_order_on_the_gpu():
    for got, want in zip(_sparse_with_duplicates("/gpu:0"), _sparse_with_duplicates("/cpu:0")):
        np.testing.assert_array_equal(got, want)


def test_a_strided_value_assigned_on_the_gpu_reads_back():
    # An assign may keep its value's layout: the orthogonal initializer's value for a
    # 3-D shape (a transposed QR factor, strides (8, 4, 16) for [2, 2, 8], as a Keras
    # ConvLSTM1D's recurrent kernel) left the variable a strided device buffer, which a
    # read lent as a plain (pointer, size) window ("ndarray is not contiguous" on the
    # stand-in; other memory on a real GPU).
    with af.Graph().as_default():
        with af.device("/gpu:0"):
            init = af.orthogonal_initializer(seed=3)
            v = af.get_variable("v", [2, 2, 8], initializer=init, use_resource=True)
            doubled = v.read_value() * 2.0
        with af.Session() as sess:
            sess.run(v.initializer)
            value, twice = sess.run([v.read_value(), doubled])
    np.testing.assert_array_equal(twice, value * 2.0)
    flat = value.reshape(4, 8)  # (orthogonal rows: the QR factor's, up to rounding)
    np.testing.assert_allclose(flat @ flat.T, np.eye(4), atol=1e-5)
