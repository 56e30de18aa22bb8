"""while_loop (graph structure, values, nesting, invariants, errors) and map_fn/scan/fold."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.ops import functional_ops as fn_ops
from asyncflow.ops.control_flow_ops import WhileContext, while_loop


@pytest.fixture(autouse=True)
def _graph():
    with af.Graph().as_default() as g:
        yield g


def _run(fetches, feed=None):
    with af.Session() as s:
        return s.run(fetches, feed)


def test_classic_loop_structure(_graph):
    i = while_loop(lambda i: i < 10, lambda i: i + 1, [af.constant(0)])
    types = {op.name: op.type for op in _graph.get_operations()}
    for name, t in [
        ("while/Enter", "Enter"),
        ("while/Merge", "Merge"),
        ("while/LoopCond", "LoopCond"),
        ("while/Switch", "Switch"),
        ("while/Identity", "Identity"),
        ("while/NextIteration", "NextIteration"),
        ("while/Exit", "Exit"),
    ]:
        assert types[name] == t
    enter = _graph.get_operation_by_name("while/Enter")
    assert enter.get_attr("frame_name") == b"while/while_context"
    assert enter.get_attr("parallel_iterations") == 10
    merge = _graph.get_operation_by_name("while/Merge")
    assert [t.op.type for t in merge.inputs] == ["Enter", "NextIteration"]
    assert i.op.type == "Exit" and i.shape.as_list() == []
    ctx = af.get_collection(af.GraphKeys.WHILE_CONTEXT)
    assert len(ctx) == 1 and isinstance(ctx[0], WhileContext)
    assert _run(i) == 10


def test_invariants_enter_once_as_constant(_graph):
    x = af.constant(3.0)
    _, s = while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s + x * x), [0, 0.0])
    enters = [op for op in _graph.get_operations() if op.type == "Enter"]
    const = [op for op in enters if op.get_attr("is_constant")]
    assert len(const) == 1 and const[0].inputs[0] is x
    assert _run(s) == 36.0


def test_nested_structures_and_namedtuples():
    import collections

    Pair = collections.namedtuple("Pair", "a b")
    out = while_loop(
        lambda i, p, d: i < 3,
        lambda i, p, d: (i + 1, Pair(p.a * 2, p.b + 1), {"x": d["x"] - 1.0}),
        [af.constant(0), Pair(af.constant(1), af.constant(0.5)), {"x": af.constant(0.0)}],
    )
    assert isinstance(out[1], Pair)
    i, p, d = _run(out)
    assert (i, p.a, p.b, d["x"]) == (3, 8, 3.5, -3.0)


def test_nested_loops_and_control_dependencies_in_body():
    outer_dep = af.no_op(name="outer_dep")

    def body(i, acc):
        _, inner = while_loop(lambda j, t: j < i, lambda j, t: (j + 1, t + j), [0, 0])
        check = af.Assert(i >= 0, ["negative"])
        with af.control_dependencies([check, outer_dep]):
            out = acc + inner
        # The outer NoOp has no outputs: TF drops such edges into a loop frame.
        assert outer_dep not in out.op.control_inputs and check in out.op.control_inputs
        return i + 1, out

    _, acc = while_loop(lambda i, a: i < 5, body, [0, 0])
    assert _run(acc) == sum(j for i in range(5) for j in range(i))


def test_stop_gradient_and_constants_inside_body():
    x = af.constant(2.0)
    _, y = while_loop(
        lambda i, y: i < 3, lambda i, y: (i + 1, af.stop_gradient(y) * x + 1.0), [0, 1.0]
    )
    assert _run(y) == 15.0


def test_maximum_iterations_and_return_same_structure():
    i = while_loop(lambda i: i < 100, lambda i: i + 1, [af.constant(0)], maximum_iterations=7)
    assert _run(i) == 7
    r = while_loop(
        lambda i: i < 3, lambda i: [i + 1], [af.constant(0)], return_same_structure=True
    )
    assert isinstance(r, list) and _run(r) == [3]
    with pytest.raises(ValueError, match="scalar"):
        while_loop(lambda i: i < 3, lambda i: i + 1, [0], maximum_iterations=[1, 2])


def test_shape_invariants():
    x = af.zeros([1, 2])
    body = lambda i, x: (i + 1, af.concat([x, x], 0))  # noqa: E731
    with pytest.raises(ValueError, match="shape_invariants"):
        while_loop(lambda i, x: i < 3, body, [0, x])
    _, y = while_loop(
        lambda i, x: i < 3,
        body,
        [0, x],
        shape_invariants=[af.TensorShape([]), af.TensorShape([None, 2])],
    )
    assert y.shape.as_list() == [None, 2]
    assert _run(y).shape == (8, 2)
    with pytest.raises(ValueError, match="not compatible"):
        while_loop(
            lambda i, x: i < 3,
            body,
            [0, x],
            shape_invariants=[af.TensorShape([]), af.TensorShape([None, 3])],
        )


def test_build_errors():
    with pytest.raises(ValueError, match="No loop variables"):
        while_loop(lambda: True, lambda: 1, [])
    with pytest.raises(TypeError, match="callable"):
        while_loop(1, lambda i: i, [0])
    with pytest.raises(TypeError, match="parallel_iterations"):
        while_loop(lambda i: i < 1, lambda i: i, [0], parallel_iterations=0)
    with pytest.raises(ValueError):
        while_loop(lambda i, j: i < 1, lambda i, j: i, [0, 1])
    with pytest.raises(TypeError):
        while_loop(lambda i: i < 1, lambda i: af.cast(i, af.float32), [0])
    with pytest.raises(TypeError):
        while_loop(lambda i: i, lambda i: i, [0.0])


def test_using_a_loop_tensor_outside_its_loop_is_an_error():
    leaked = []

    def body(i):
        leaked.append(i * 2)
        return i + 1

    while_loop(lambda i: i < 3, body, [0])
    with pytest.raises(ValueError, match="different while loops"):
        while_loop(lambda i: i < 3, lambda i: i + leaked[0], [0])


def test_error_in_body_aborts_the_step():
    def body(i):
        check = af.Assert(i < 3, ["i too big", i])
        with af.control_dependencies([check]):
            return i + 1

    out = while_loop(lambda i: i < 10, body, [0])
    with pytest.raises(errors.InvalidArgumentError, match="i too big"):
        _run(out)


def test_parallel_iterations_one_still_correct():
    _, s = while_loop(
        lambda i, s: i < 50, lambda i, s: (i + 1, s + i), [0, 0], parallel_iterations=1
    )
    assert _run(s) == sum(range(50))


def test_map_fn_scan_fold():
    xs = af.constant(np.arange(1.0, 6.0))
    sq = fn_ops.map_fn(lambda x: x * x, xs)
    pair = fn_ops.map_fn(
        lambda p: (p[0] + p[1], p[0] * p[1]), (xs, xs), dtype=(af.float64, af.float64)
    )
    cast = fn_ops.map_fn(lambda x: af.cast(x, af.int32), xs, dtype=af.int32)
    cs = fn_ops.scan(lambda a, x: a + x, xs)
    cs_init = fn_ops.scan(lambda a, x: a * x, xs, initializer=af.constant(1.0, af.float64))
    cs_rev = fn_ops.scan(lambda a, x: a + x, xs, reverse=True)
    fl = fn_ops.foldl(lambda a, x: a - x, xs)
    fr = fn_ops.foldr(lambda a, x: a - x, xs, initializer=af.constant(0.0, af.float64))
    r = _run([sq, pair, cast, cs, cs_init, cs_rev, fl, fr])
    x = np.arange(1.0, 6.0)
    np.testing.assert_allclose(r[0], x * x)
    np.testing.assert_allclose(r[1][0], 2 * x)
    assert r[2].dtype == np.int32
    np.testing.assert_allclose(r[3], np.cumsum(x))
    np.testing.assert_allclose(r[4], np.cumprod(x))
    np.testing.assert_allclose(r[5], np.cumsum(x[::-1])[::-1])
    assert r[6] == 1 - 2 - 3 - 4 - 5 and r[7] == -15
    with pytest.raises(ValueError, match="scalars"):
        fn_ops.map_fn(lambda x: x, af.constant(1.0))
