"""py_func / numpy_function (PyFunc, PyFuncStateless): results, result checks and error
classes recorded from TF 2.21 (tf.compat.v1 graph mode); the function runs on a worker
thread, and the loop keeps serving other work while it is blocked."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


def test_values_and_op_types_match_tf():
    t = af.py_func(lambda a: a * 2, [af.constant([1.0, 2.0])], af.float32)
    assert t.op.type == "PyFunc" and t.shape.ndims is None
    np.testing.assert_array_equal(_run(t), [2.0, 4.0])
    a, b = af.py_func(lambda a, b: (a + b, a - b), [1.0, 2.0], [af.float32, af.float32])
    assert _run([a, b]) == [3.0, -1.0]
    assert af.py_func(lambda a: a, [1.0], af.float32, stateful=False).op.type == "PyFuncStateless"
    assert af.numpy_function(lambda a: a + 1, [np.int32(3)], af.int32).op.type == "PyFunc"
    assert _run(af.numpy_function(lambda a: a + 1, [np.int32(3)], af.int32)) == 4
    s = af.py_func(
        lambda a: np.array([x.upper() for x in a]), [af.constant(["ab", "c"])], af.string
    )
    assert list(_run(s)) == [b"AB", b"C"]
    # 0-d inputs arrive as NumPy scalars (TF: type name "float32"); strings as bytes
    kind = af.py_func(lambda a: type(a).__name__, [1.0], af.string)
    assert _run(kind) == b"float32"
    op = af.py_func(lambda a: None, [1.0], [])
    assert isinstance(op, ops.Operation) and _run(op) is None
    (g,) = af.gradients(af.py_func(lambda a: a * a, [af.constant(3.0)], af.float32), [t])
    assert g is None


@pytest.mark.parametrize(
    "fn,tout,error,match",
    [
        (lambda a: 1.5, af.float32, errors.InvalidArgumentError,
         r"0-th value returned by pyfunc_\d+ is double, but expects float"),
        (lambda a: 7, af.int32, errors.InvalidArgumentError,
         r"0-th value returned by pyfunc_\d+ is int64, but expects int32"),
        (lambda a: [1.0, 2.0], [af.float32], errors.InvalidArgumentError,
         r"pyfunc_\d+ returns 2 values, but expects to see 1 values."),
        (lambda a: 1 / 0, af.float32, errors.UnknownError, "ZeroDivisionError: division by zero"),
        (lambda a: [][1], af.float32, errors.UnknownError, "IndexError"),  # (as TF 2.21)
        (lambda a: None + 1, af.float32, errors.InvalidArgumentError, "TypeError"),
        (lambda a: int("x"), af.float32, errors.InvalidArgumentError, "ValueError"),
        (lambda a: next(iter(())), af.float32, errors.OutOfRangeError, "StopIteration"),
    ],
)  # fmt: skip
def test_errors_match_tf(fn, tout, error, match):
    with pytest.raises(error, match=match):
        _run(af.py_func(fn, [1.0], tout))
    assert _run(af.py_func(lambda a: np.float32(a), [1.0], af.float32)) == 1.0


def test_int64_result_accepted():
    assert _run(af.py_func(lambda a: 7, [1.0], af.int64)) == 7  # TF: np.int64(7)


def test_runs_on_a_worker_thread_never_the_loop():
    seen = {}

    def fn(a):
        seen["thread"] = threading.current_thread()
        try:
            asyncio.get_running_loop()
            seen["on_loop"] = True
        except RuntimeError:
            seen["on_loop"] = False
        return a

    _run(af.py_func(fn, [1.0], af.float32))
    assert seen["on_loop"] is False
    assert seen["thread"] is not threading.main_thread()


def test_a_blocked_function_does_not_block_other_steps():
    # While one step's py_func waits on an Event, another step on the same loop completes
    # and releases it: impossible if the function ran on the loop.
    release = threading.Event()
    blocked = af.py_func(lambda a: np.float32(a * release.wait(30)), [2.0], af.float32)
    x = af.placeholder(af.float32)
    other = af.py_func(lambda a: (release.set(), a)[1], [x], af.float32)

    async def main():
        async with Session() as sess:
            first = asyncio.ensure_future(sess.arun(blocked))
            second = await sess.arun(other, {x: 5.0})
            return await first, second

    assert asyncio.run(main()) == (2.0, 5.0)
