"""tf.py_func / tf.numpy_function in a TF1 program: what a Python function may return
and the error TF 2.21 raises for each other return (recorded from TF 2.21,
tf.compat.v1): None is no values, objects other than strings are an InternalError, and a
returned exception object is a value, not a raise."""

import numpy as np
import pytest

import asyncflow as tf


class _Foo:
    pass


_IA, _INT = tf.errors.InvalidArgumentError, tf.errors.InternalError
_CASES = [
    # (function, Tout, TF's error class, the start of TF's message)
    (lambda v: None, tf.float32, _IA, "returns 0 values, but expects to see 1"),
    (lambda v: None, [tf.float32] * 2, _IA, "returns 0 values, but expects to see 2"),
    (lambda v: {"a": 1}, tf.float32, _INT, "Unsupported object type dict"),
    (lambda v: _Foo(), tf.float32, _INT, "Unsupported object type _Foo"),
    (lambda v: np.array([1, "a"], dtype=object), tf.string, _INT, "Unsupported object type int"),
    (lambda v: (None, v), [tf.float32] * 2, _INT, "Unsupported object type NoneType"),
    (lambda v: 1, [], _IA, "returns 1 values, but expects to see 0"),
    (lambda v: [], tf.float32, _IA, "returns 0 values, but expects to see 1"),
    (lambda v: ValueError("q"), tf.float32, _INT, "Unsupported object type ValueError"),
    (lambda v: np.array([1.5]), tf.float32, _IA, "0-th value returned by pyfunc_"),
]


@pytest.mark.parametrize("fn,tout,error,message", _CASES)
def test_py_func_returns_checked_as_tf(fn, tout, error, message):
    with tf.Graph().as_default(), tf.Session() as sess:
        out = tf.py_func(fn, [tf.constant([1.0])], tout)
        with pytest.raises(error, match=message.replace("(", r"\(")):
            sess.run(out)


def test_none_with_no_outputs_and_numpy_function_none():
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.constant([1.0])
        sess.run(tf.py_func(lambda v: None, [x], []))
        with pytest.raises(tf.errors.InvalidArgumentError, match="returns 0 values"):
            sess.run(tf.numpy_function(lambda v: None, [x], tf.float32))


def test_raised_errors_keep_tf_classes():
    def raise_oor(v):
        raise tf.errors.OutOfRangeError(None, None, "custom end")

    def stop(v):
        raise StopIteration("done")

    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.constant([1.0])
        with pytest.raises(tf.errors.UnknownError, match="OutOfRangeError: custom end"):
            sess.run(tf.py_func(raise_oor, [x], tf.float32))
        with pytest.raises(tf.errors.OutOfRangeError, match="StopIteration: done"):
            sess.run(tf.py_func(stop, [x], tf.float32))


def test_an_element_whose_map_failed_does_not_end_the_iterator():
    # TF 2.21: the failing element's error, then the next element on the next call
    def fails_on_3(x):
        if x == 3:
            raise ValueError("bad element 3")
        return x * 2

    with tf.Graph().as_default(), tf.Session() as sess:
        ds = tf.data.Dataset.range(5).map(lambda x: tf.py_func(fails_on_3, [x], tf.int64))
        it = tf.data.make_initializable_iterator(ds)
        nxt = it.get_next()
        sess.run(it.initializer)
        got = [int(sess.run(nxt)) for _ in range(3)]
        with pytest.raises(tf.errors.InvalidArgumentError, match="ValueError: bad element 3"):
            sess.run(nxt)
        got.append(int(sess.run(nxt)))
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(nxt)
    assert got == [0, 2, 4, 8]


def test_a_saved_iterator_past_a_failed_element_restores(tmp_path):
    def fails_on_1(x):
        if x == 1:
            raise ValueError("bad")
        return x

    with tf.Graph().as_default(), tf.Session() as sess:
        ds = tf.data.Dataset.range(4).map(lambda x: tf.py_func(fails_on_1, [x], tf.int64))
        it = tf.data.make_initializable_iterator(ds)
        nxt = it.get_next()
        # (TF refuses a stateful PyFunc's state unless told to ignore it)
        saveable = tf.data.experimental.make_saveable_from_iterator(
            it, external_state_policy="ignore"
        )
        saver = tf.train.Saver([saveable])
        sess.run(it.initializer)
        assert sess.run(nxt) == 0
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(nxt)
        path = saver.save(sess, str(tmp_path / "it"))
        assert sess.run(nxt) == 2
        saver.restore(sess, path)  # replays the pass, the failed element included
        assert sess.run(nxt) == 2
