"""TF1's session handles (ops/session_ops.py) against TF 2.21's recorded behaviour
(tests/fixtures/session_handles.json, recorded by record_session_handles.py from
session_handle_cases.py): the same scenario gives TF's handle strings, values and errors.
"""

from __future__ import annotations

import gc
import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
import session_handle_cases as cases  # noqa: E402

RECORDED = json.loads((HERE / "session_handles.json").read_text())


def _scenario() -> dict:
    with tf.Graph().as_default():
        return json.loads(json.dumps(cases.scenario(tf)))


@pytest.fixture(scope="module")
def seen():
    return _scenario()


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_scenario_as_tf(seen, key):
    assert seen[key] == RECORDED[key]


def test_handle_feeds_as_its_string_and_as_the_object():
    with tf.Graph().as_default(), tf.Session() as sess:
        h = sess.run(tf.get_session_handle(tf.constant([3, 4])))
        p, t = tf.get_session_tensor(h, tf.int32)
        assert sess.run(t, {p: h}).tolist() == [3, 4]
        assert sess.run(t, {p: h.handle}).tolist() == [3, 4]
        assert isinstance(h, bytes) and bytes(h) == h.handle.encode()


def test_persistent_value_is_a_private_copy():
    """A value read back twice, and written into by a consumer, stays what was stored."""
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.placeholder(tf.float32, [2])
        h = sess.run(tf.get_session_handle(x + 0), {x: np.float32([1, 2])})
        p, t = tf.get_session_tensor(h.handle, tf.float32)
        y = t + 1.0
        assert sess.run(y, {p: h.handle}).tolist() == [2, 3]
        assert sess.run(y, {p: h.handle}).tolist() == [2, 3]
        got = sess.run(t, {p: h.handle})
        got[0] = 99  # (the fetched array is the caller's)
        assert h.eval().tolist() == [1, 2]


def test_ten_garbage_collected_handles_free_their_tensors():
    with tf.Graph().as_default(), tf.Session() as sess:
        make = tf.get_session_handle(tf.constant(1.0))
        names = []
        for _ in range(10):
            h = sess.run(make)
            names.append(h.handle)
            del h
        gc.collect()
        p, t = tf.get_session_tensor(names[0], tf.float32)
        for name in names:
            with pytest.raises(tf.errors.InvalidArgumentError, match="not in the session store"):
                sess.run(t, {p: name})


def test_graph_def_with_handle_ops_imports():
    with tf.Graph().as_default() as g:
        h = tf.get_session_handle(tf.constant(2.5), name="keep")
        tf.get_session_tensor(b"keep;0;/job:localhost/replica:0/task:0/device:CPU:0", tf.float32)
        gd = g.as_graph_def()
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
        with tf.Session() as sess:
            hv = sess.run(g2.get_tensor_by_name(h.name))
            got = sess.run(
                g2.get_tensor_by_name("GetSessionTensor:0"),
                {g2.get_tensor_by_name("Placeholder:0"): hv.handle},
            )
    assert hv.handle == "keep;0;/job:localhost/replica:0/task:0/device:CPU:0" and got == 2.5


def test_tf_graph_def_of_the_handle_ops_runs():
    """TF's own GraphDef (session_handles.pb): a handle kept, read back, deleted."""
    gd = tf.GraphDef()
    gd.ParseFromString((HERE / "session_handles.pb").read_bytes())
    assert {"GetSessionHandle", "GetSessionTensor", "DeleteSessionTensor"} <= {
        n.op for n in gd.node
    }
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        read_feed = g.get_tensor_by_name("Placeholder:0")
        drop_feed = g.get_tensor_by_name("Placeholder_1:0")
        with tf.Session() as sess:
            h = sess.run(g.get_tensor_by_name("keep:0"))
            assert h.handle == "keep;0;/job:localhost/replica:0/task:0/device:CPU:0"
            assert sess.run(g.get_tensor_by_name("times10:0"), {read_feed: h.handle}) == 500.0
            sess.run(g.get_operation_by_name("drop"), {drop_feed: h.handle})
            with pytest.raises(tf.errors.InvalidArgumentError, match="not in the session store"):
                sess.run(g.get_tensor_by_name("read:0"), {read_feed: h.handle})
