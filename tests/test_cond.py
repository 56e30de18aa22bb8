"""cond and case: graph structure, values, the untaken branch never runs, errors."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.ops.control_flow_ops import CondContext, case, cond


@pytest.fixture(autouse=True)
def _graph():
    with af.Graph().as_default() as g:
        yield g


def _run(fetches, feed=None):
    with af.Session() as s:
        return s.run(fetches, feed)


def test_structure_switch_pivot_merge(_graph):
    p = af.placeholder(af.bool, [], name="p")
    x = af.placeholder(af.float32, [2], name="x")
    r = cond(p, lambda: x * 2.0, lambda: af.constant([7.0, 7.0]))
    assert r.op.type == "Merge" and r.shape.as_list() == [2]
    ops = {op.name: op for op in _graph.get_operations()}
    assert ops["cond/Switch"].type == "Switch"
    assert ops["cond/switch_t"].inputs[0].name == "cond/Switch:1"
    assert ops["cond/switch_f"].inputs[0].name == "cond/Switch:0"
    # x enters the true branch through a Switch on pred, output 1
    (sw,) = [op for op in _graph.get_operations() if op.type == "Switch" and op.inputs[0] is x]
    mul = [c for c in sw.outputs[1].consumers()]
    assert mul and sw.inputs[1].op.name == "cond/pred_id"
    # the false branch's constant hangs on the false pivot
    const = r.op.inputs[0].op
    assert const.type == "Const" and ops["cond/switch_f"] in const.control_inputs
    assert len(af.get_collection(af.GraphKeys.COND_CONTEXT)) == 2
    assert isinstance(af.get_collection(af.GraphKeys.COND_CONTEXT)[0], CondContext)
    v = [1.0, 2.0]
    np.testing.assert_allclose(_run(r, {p: True, x: v}), [2.0, 4.0])
    np.testing.assert_allclose(_run(r, {p: False, x: v}), [7.0, 7.0])


def test_untaken_branch_does_not_run():
    p = af.placeholder(af.bool, [])
    x = af.placeholder(af.float32, [])

    def bad():
        a = af.Assert(af.constant(False), ["the untaken branch ran"])
        with af.control_dependencies([a]):
            return af.identity(x)

    r = cond(p, lambda: x + 1.0, bad)
    assert _run(r, {p: True, x: 1.0}) == 2.0
    with pytest.raises(errors.InvalidArgumentError, match="untaken branch ran"):
        _run(r, {p: False, x: 1.0})


def test_nested_structures_ops_and_strict():
    p = af.constant(True)
    r = cond(
        p,
        lambda: {"a": af.constant(1), "b": (af.constant(2.0), af.constant([3]))},
        lambda: {"a": af.constant(4), "b": (af.constant(5.0), af.constant([6]))},
    )
    out = _run(r)
    assert out["a"] == 1 and out["b"][0] == 2.0 and list(out["b"][1]) == [3]
    single = cond(p, lambda: [af.constant(1)], lambda: [af.constant(2)])
    assert isinstance(single, af.Tensor)
    strict = cond(p, lambda: [af.constant(1)], lambda: [af.constant(2)], strict=True)
    assert isinstance(strict, list)
    op_result = cond(p, lambda: af.no_op(), lambda: af.no_op())
    _run(op_result)


def test_nested_cond_and_fn1_fn2():
    x = af.placeholder(af.int32, [])
    r = cond(x > 0, lambda: cond(x > 10, lambda: x * 100, lambda: x * 10), lambda: -x)
    assert [_run(r, {x: v}) for v in (20, 5, -3)] == [2000, 50, 3]
    r2 = cond(x > 0, fn1=lambda: x, fn2=lambda: -x)
    assert _run(r2, {x: -4}) == 4


@pytest.mark.parametrize(
    "kwargs, err",
    [
        (dict(pred=True, true_fn=lambda: 1, false_fn=lambda: 2), TypeError),
        (dict(pred="p", true_fn=1, false_fn=lambda: 2), TypeError),
        (dict(pred="p", true_fn=None, false_fn=lambda: 2), TypeError),
        (dict(pred="p", true_fn=lambda: 1, false_fn=lambda: 2, fn1=lambda: 1), TypeError),
        (dict(pred="v", true_fn=lambda: 1, false_fn=lambda: 2), ValueError),
        (dict(pred="f", true_fn=lambda: 1, false_fn=lambda: 2), TypeError),
        (dict(pred="p", true_fn=lambda: None, false_fn=lambda: 2), ValueError),
        (dict(pred="p", true_fn=lambda: (1, 2), false_fn=lambda: 1), ValueError),
        (dict(pred="p", true_fn=lambda: [1, 2], false_fn=lambda: (1, 2)), TypeError),
        (dict(pred="p", true_fn=lambda: 1, false_fn=lambda: 1.0), ValueError),
    ],
)
def test_build_errors(kwargs, err):
    preds = {
        "p": af.placeholder(af.bool, []),
        "v": af.placeholder(af.bool, [2]),
        "f": af.placeholder(af.float32, []),
    }
    if isinstance(kwargs["pred"], str):
        kwargs = dict(kwargs, pred=preds[kwargs["pred"]])

    def const_fn(f):
        if not callable(f):
            return f

        def wrapped():
            v = f()
            return v if v is None else __import__("asyncflow").nest.map_structure(af.constant, v)

        return wrapped

    kwargs = {
        k: const_fn(v) if k in ("true_fn", "false_fn", "fn1") else v for k, v in kwargs.items()
    }
    with pytest.raises(err):
        cond(**kwargs)


def test_case():
    x = af.placeholder(af.int32, [])
    r = case(
        [(x < 0, lambda: af.constant(-1)), (x < 10, lambda: af.constant(1))],
        default=lambda: af.constant(100),
    )
    assert [_run(r, {x: v}) for v in (-5, 5, 50)] == [-1, 1, 100]
    r2 = case({x < 0: lambda: af.constant(-1), x > 100: lambda: af.constant(1)})
    assert _run(r2, {x: -5}) == -1
    with pytest.raises(errors.InvalidArgumentError, match="None of conditions"):
        _run(r2, {x: 5})
    ex = case(
        [(x < 10, lambda: af.constant(1)), (x < 20, lambda: af.constant(2))],
        default=lambda: af.constant(0),
        exclusive=True,
    )
    assert _run(ex, {x: 15}) == 2
    with pytest.raises(errors.InvalidArgumentError, match="exclusive"):
        _run(ex, {x: 5})
    with pytest.raises(TypeError):
        case("nope")
    with pytest.raises(TypeError):
        case([(True, lambda: 1)])
    with pytest.raises(TypeError):
        case([(x, lambda: 1)])
