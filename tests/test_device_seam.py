"""The Device seam: a toy accelerator that no runtime module knows about.

The toy device keeps its arrays in "device memory" (`strict_xp.StrictArray`, which
refuses every implicit conversion to NumPy), computes with a strict array module, and
runs only a handful of ops.  It is registered through the devices registry, exactly as
a GPU plugs in.  Graphs placed on it (soft placement putting the rest on CPU) must give
CPU's results, with copies where values cross between host and device memory: feeds,
fetches, Send/Recv between devices, host-memory arguments, and inside while loops.
Its copy functions are strict too: a host value asked to go to the host, or a device
value to the device, fails the step, so the partitioner's bookkeeping of which memory
each value lives in is checked exactly.
"""

from __future__ import annotations

import collections
import pathlib

import numpy as np
import pytest
import strict_xp

import asyncflow as tf
from asyncflow import errors
from asyncflow.devices.base import Device
from asyncflow.devices.registry import (
    DeviceFactory,
    register_device_factory,
    unregister_device_factory,
)

pytestmark = pytest.mark.timeout(60)

# What the toy runs: a little math, the loop primitives (TF runs them on every device),
# and the transfer ops the partitioner inserts.
_TOY_OPS = frozenset(
    {
        "Add",
        "AddV2",
        "Sub",
        "Mul",
        "MatMul",
        "Relu",
        "Square",
        "Identity",
        "Const",
        "Enter",
        "Exit",
        "Merge",
        "Switch",
        "NextIteration",
        "LoopCond",
        "_Send",
        "_Recv",
        "_DeviceCopy",
    }
)


class ToyDevice(Device):
    device_type = "TOY"
    host_memory = False
    run_mode = "inline"
    xp = strict_xp.xp

    def __init__(self, name: str, index: int):
        super().__init__(name, index)
        self.copies: collections.Counter = collections.Counter()
        self.ran: collections.Counter = collections.Counter()

    def kernel_for(self, op_def):
        if op_def.name not in _TOY_OPS:
            return None
        return op_def.kernel_for(self.device_type)

    async def compute(self, fn, *args, cost=None):
        return fn(*args)

    async def copy_to_host(self, value):
        if not strict_xp.is_strict(value):
            raise AssertionError(f"{self.name}: copy to host of a host value {type(value)}")
        self.copies["to_host"] += 1
        return strict_xp.to_numpy(value)

    async def copy_from_host(self, value):
        if strict_xp.is_strict(value):
            raise AssertionError(f"{self.name}: copy to the device of a device value")
        self.copies["from_host"] += 1
        return strict_xp.asarray(value)


_made: list[ToyDevice] = []


def _make_toys(config, prefix: str, count: int) -> list[Device]:
    toys = [ToyDevice(f"{prefix}TOY:{i}", i) for i in range(count)]
    _made.extend(toys)
    return toys


@pytest.fixture
def toy():
    _made.clear()
    register_device_factory(DeviceFactory("TOY", _make_toys, default_count=lambda config: 1))
    try:
        yield _made
    finally:
        unregister_device_factory("TOY")


def _soft():
    return tf.ConfigProto(allow_soft_placement=True)


def _registered_toy():
    register_device_factory(DeviceFactory("TOY", _make_toys, default_count=lambda config: 1))


def test_toy_is_listed_with_its_own_incarnation(toy):
    with tf.Session(graph=tf.Graph()) as sess:
        devs = sess.list_devices()
    names = [d.name for d in devs]
    assert names == [
        "/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/device:TOY:0",
    ]
    assert len({d.incarnation for d in devs}) == 2 and all(d.incarnation for d in devs)


def test_device_count_zero_turns_the_toy_off(toy):
    with tf.Session(graph=tf.Graph(), config=tf.ConfigProto(device_count={"TOY": 0})) as s:
        assert [d.device_type for d in s.list_devices()] == ["CPU"]


def _mlp(toy_dev="/device:TOY:0"):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2) / 7, name="w")
    b = tf.constant(np.array([0.5, -2.0], np.float32), name="b")
    with tf.device(toy_dev):
        h = tf.nn.relu(tf.matmul(x, w) + b)  # MatMul, AddV2, Relu on the toy
        y = tf.square(h) - 1.0
        s = tf.reduce_sum(y, axis=1)  # Sum: no toy kernel -> CPU (soft placement)
        z = s * 3.0  # back on the toy
    return {"h": h, "y": y, "s": s, "z": z}


def test_graph_on_the_toy_matches_cpu_with_copies_at_each_boundary(toy):
    feed = {"x:0": np.array([[1, 2, 3], [-4, 5, -6]], np.float32)}
    g = tf.Graph()
    with g.as_default():
        handles = _mlp()
    with tf.Session(graph=g, config=_soft()) as sess:
        got = sess.run([handles[n] for n in "hysz"], {g.get_tensor_by_name("x:0"): feed["x:0"]})
    (dev,) = toy
    # The feed went to the device, h and y came back as fetches, y crossed to CPU for
    # Sum and s back to the toy, z was fetched: every crossing is a copy.
    assert dev.copies["from_host"] >= 3 and dev.copies["to_host"] >= 3
    for v in got:
        assert type(v) is np.ndarray  # fetches are host arrays
    x = feed["x:0"]
    w = np.arange(6, dtype=np.float32).reshape(3, 2) / 7
    h = np.maximum(x @ w + np.array([0.5, -2.0], np.float32), 0)
    y = h * h - 1
    np.testing.assert_allclose(got[0], h, rtol=1e-6)
    np.testing.assert_allclose(got[1], y, rtol=1e-6)
    np.testing.assert_allclose(got[2], y.sum(1), rtol=1e-6)
    np.testing.assert_allclose(got[3], y.sum(1) * 3, rtol=1e-6)


def test_without_soft_placement_an_op_the_toy_lacks_is_an_error(toy):
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0])
        with tf.device("/device:TOY:0"):
            s = tf.reduce_sum(x)
    with tf.Session(graph=g) as sess:
        with pytest.raises(errors.InvalidArgumentError, match="TOY"):
            sess.run(s)


def test_training_step_with_compute_on_the_toy_matches_cpu(toy):
    def build():
        x = tf.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
        w = tf.Variable(np.full((3, 2), 0.3, np.float32), name="w")  # on CPU
        with tf.device("/device:TOY:0"):
            y = tf.nn.relu(tf.matmul(x, w))
            loss = tf.reduce_mean(tf.square(y - 0.25))
        train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
        return {"loss": loss, "train": train, "w": w}

    cpu = []
    for registered in (False, True):
        if not registered:
            unregister_device_factory("TOY")
        else:
            _registered_toy()
        g = tf.Graph()
        with g.as_default():
            h = build()
            init = tf.global_variables_initializer()
        with tf.Session(graph=g, config=_soft()) as sess:
            sess.run(init)
            losses = [sess.run([h["loss"], h["train"]])[0] for _ in range(5)]
            cpu.append((losses, sess.run(h["w"])))
    (dev,) = toy
    assert dev.copies["from_host"] > 0 and dev.copies["to_host"] > 0
    np.testing.assert_allclose(cpu[1][0], cpu[0][0], rtol=1e-5)
    np.testing.assert_allclose(cpu[1][1], cpu[0][1], rtol=1e-5)


def test_while_loop_with_its_body_on_the_toy(toy):
    def build():
        x0 = tf.constant(np.array([0.5, -1.0, 2.0], np.float32))
        m = tf.constant(np.array([[1.0, 0.1, 0.0], [0.0, 0.9, 0.2], [0.1, 0.0, 1.1]], np.float32))

        def cond(i, x):
            return i < 6  # on CPU (the loop's home)

        def body(i, x):
            with tf.device("/device:TOY:0"):
                y = tf.matmul(tf.reshape(x, [1, 3]), m)  # Reshape: CPU; MatMul: toy
                y = tf.nn.relu(y) * 0.5 + 0.1
            return i + 1, tf.reshape(y, [3])

        _, out = tf.while_loop(cond, body, [tf.constant(0), x0])
        return out

    results = []
    for registered in (False, True):
        if not registered:
            unregister_device_factory("TOY")
        else:
            _registered_toy()
        g = tf.Graph()
        with g.as_default():
            out = build()
        with tf.Session(graph=g, config=_soft()) as sess:
            results.append(sess.run(out))
    (dev,) = toy
    # Every iteration moves x to the toy and the product back: copies inside the frame.
    assert dev.copies["from_host"] >= 6 and dev.copies["to_host"] >= 6
    x = np.array([0.5, -1.0, 2.0], np.float32)
    m = np.array([[1.0, 0.1, 0.0], [0.0, 0.9, 0.2], [0.1, 0.0, 1.1]], np.float32)
    for _ in range(6):
        x = np.maximum(x @ m, 0) * 0.5 + 0.1
    np.testing.assert_allclose(results[0], x, rtol=1e-6)
    np.testing.assert_allclose(results[1], x, rtol=1e-6)


def test_no_runtime_module_knows_the_toy():
    root = pathlib.Path(__file__).resolve().parents[1]
    for folder in ("asyncflow", "ops", "devices"):
        for f in (root / folder).rglob("*.py"):
            text = f.read_text()
            assert "strict_xp" not in text and "TOY" not in text, f
