"""TensorArray: every op, dynamic_size, clear_after_read, element_shape, errors, gradients."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.gradients import gradients
from asyncflow.ops.control_flow_ops import while_loop
from asyncflow.ops.data_flow_stack_ops import stack_pop_v2, stack_push_v2, stack_v2
from asyncflow.ops.tensor_array_ops import TensorArray


@pytest.fixture(autouse=True)
def _graph():
    with af.Graph().as_default() as g:
        yield g


def _run(fetches, feed=None):
    with af.Session() as s:
        return s.run(fetches, feed)


def test_write_read_stack_size():
    ta = TensorArray(af.float32, size=3)
    ta = ta.write(0, [1.0, 2.0]).write(1, [3.0, 4.0]).write(2, [5.0, 6.0])
    assert ta.element_shape.as_list() == [2]
    r = ta.read(1)
    assert r.shape.as_list() == [2]
    st = ta.stack()
    assert st.shape.as_list() == [3, 2]
    out = _run([r, ta.size()])
    np.testing.assert_allclose(out[0], [3.0, 4.0])
    assert out[1] == 3
    ta2 = (
        TensorArray(af.float32, size=3)
        .write(0, [1.0, 2.0])
        .write(1, [3.0, 4.0])
        .write(2, [5.0, 6.0])
    )
    np.testing.assert_allclose(_run(ta2.stack()), [[1, 2], [3, 4], [5, 6]])


def test_unstack_gather_scatter_concat_split():
    x = np.arange(12.0).reshape(4, 3)
    ta = TensorArray(af.float64, size=4, clear_after_read=False).unstack(x)
    g = ta.gather([3, 1])
    c = ta.concat()
    ta2 = TensorArray(af.float64, size=4).scatter([2, 0, 3, 1], x)
    ta3 = TensorArray(af.float64, size=2, infer_shape=False).split(np.arange(5.0), [2, 3])
    out = _run([g, c, ta2.stack(), ta3.read(1)])
    np.testing.assert_allclose(out[0], x[[3, 1]])
    np.testing.assert_allclose(out[1], x.reshape(-1))
    np.testing.assert_allclose(out[2], x[[1, 3, 0, 2]])
    np.testing.assert_allclose(out[3], [2.0, 3.0, 4.0])


def test_dynamic_size_in_a_loop():
    ta = TensorArray(af.int32, size=0, dynamic_size=True)
    _, ta = while_loop(lambda i, ta: i < 5, lambda i, ta: (i + 1, ta.write(i, i * i)), [0, ta])
    out = _run([ta.stack(), ta.size()])
    assert list(out[0]) == [0, 1, 4, 9, 16] and out[1] == 5


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: TensorArray(af.float32, size=2).read(2), "index 2 but array size is: 2"),
        (lambda: TensorArray(af.float32, size=2).write(5, 1.0).flow, "not resizeable"),
        (
            lambda: TensorArray(af.float32, size=2).write(0, 1.0).write(0, 2.0).flow,
            "already been written",
        ),
        (
            lambda: TensorArray(af.float32, size=2).read(0),
            "Could not read from TensorArray index 0",
        ),
        (
            lambda: af.stack(
                [(t := TensorArray(af.float32, size=1).write(0, 1.0)).read(0), t.read(0)]
            ),
            "cleared after a previous read",
        ),
        (
            lambda: (
                TensorArray(af.float32, size=2, infer_shape=True)
                .write(0, af.placeholder_with_default([1.0], [None]))
                .write(1, af.placeholder_with_default([1.0, 2.0], [None]))
                .stack()
            ),
            "incompatible|inconsistent",
        ),
    ],
)
def test_runtime_errors(build, match):
    with pytest.raises(errors.InvalidArgumentError, match=match):
        _run(build())


def test_build_errors():
    with pytest.raises(ValueError, match="Size must be provided"):
        TensorArray(af.float32)
    with pytest.raises(errors.InvalidArgumentError, match="dtype"):
        TensorArray(af.float32, size=1).write(0, af.constant(1))
    with pytest.raises(ValueError, match="Inconsistent shapes"):
        TensorArray(af.float32, size=2).write(0, [1.0]).write(1, [1.0, 2.0])
    ta = TensorArray(af.float32, size=1, element_shape=[2])
    assert ta.read(0).shape.as_list() == [2]


def test_unwritten_element_with_known_shape_reads_zeros():
    ta = TensorArray(af.float32, size=2, element_shape=[3])
    np.testing.assert_allclose(_run(ta.read(1)), np.zeros(3))


def test_gradients_through_tensor_arrays():
    x = af.constant(np.arange(1.0, 7.0).reshape(3, 2))
    ta = TensorArray(af.float64, size=3).unstack(x)
    out = TensorArray(af.float64, size=3)

    def body(t, acc, out):
        v = ta.read(t)
        acc = acc * 0.5 + v * v
        return t + 1, acc, out.write(t, acc)

    _, acc, out = while_loop(lambda t, a, o: t < 3, body, [0, af.zeros([2], af.float64), out])
    y = af.reduce_sum(out.stack()) + af.reduce_sum(acc)
    (gx,) = gradients(y, x)
    xv = np.arange(1.0, 7.0).reshape(3, 2)
    # d/dx_t of sum_s acc_s (+ acc_2): acc_s = sum_{t<=s} 0.5^(s-t) x_t^2
    w = np.array([sum(0.5 ** (s - t) for s in range(t, 3)) + 0.5 ** (2 - t) for t in range(3)])
    np.testing.assert_allclose(_run(gx), 2 * xv * w[:, None])
    # gather/scatter/concat/split gradients
    ta2 = TensorArray(af.float64, size=3, clear_after_read=False).scatter([2, 0, 1], x)
    y2 = af.reduce_sum(ta2.gather([0, 0, 2]) * 3.0)
    ta3 = TensorArray(af.float64, size=2, infer_shape=False).split(af.reshape(x, [-1]), [2, 4])
    y3 = af.reduce_sum(ta3.concat() * af.constant(np.arange(6.0)))
    g2, g3 = gradients([y2], x)[0], gradients(y3, x)[0]
    np.testing.assert_allclose(_run([y2, g2])[1], [[3, 3], [6, 6], [0, 0]])
    np.testing.assert_allclose(_run(g3), np.arange(6.0).reshape(3, 2))


def test_stack_ops():
    h = stack_v2(-1, af.float32)
    push = stack_push_v2(h, af.constant(1.0))
    with af.control_dependencies([push]):
        pop = stack_pop_v2(h, af.float32)
    assert _run(pop) == 1.0
    with pytest.raises(errors.InvalidArgumentError, match="empty"):
        _run(stack_pop_v2(stack_v2(-1, af.float32), af.float32))


def test_ref_stack_ops_as_tf1():
    # TF 2.21's gen_data_flow_ops._stack/stack_push/stack_pop/stack_close (TF1's ref
    # stacks): a [2] handle; two stacks named "foo" are distinct; pushes pop back LIFO.
    from asyncflow import graph as ops

    def op(t, inputs, **attrs):
        out = ops.apply_op(t, inputs, attrs)
        return out.outputs[0] if out.outputs else out

    h1 = op("Stack", [], elem_type=af.float32, stack_name="foo")
    h2 = op("Stack", [], elem_type=af.float32, stack_name="foo")
    assert h1.shape.as_list() == [2]
    p1 = op("StackPush", [h1, af.constant([[4.0, 5.0]])])
    p2 = op("StackPush", [h2, af.constant(6.0)])
    with af.control_dependencies([p1, p2]):
        q1 = op("StackPop", [h1], elem_type=af.float32)
        q2 = op("StackPop", [h2], elem_type=af.float32)
    with af.control_dependencies([q1]):
        close = op("StackClose", [h1])
    with af.Session() as s:
        v1, v2, _ = s.run([q1, q2, close])
        a, b = s.run([h1, h2])
    np.testing.assert_array_equal(v1, [[4.0, 5.0]])
    assert v2 == 6.0
    assert a[1] is not b[1]
