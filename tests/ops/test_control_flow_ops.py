"""group, tuple, with_dependencies and Print: ordering through control edges.

Side effects are observed through Print's stderr output (captured with capfd) and
Assert failures, so no variables are needed.
"""

from __future__ import annotations

import numpy as np
import pytest

from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow.ops import array_ops, check_ops, control_flow_ops, logging_ops
from asyncflow.ops.logging_ops import summarize_value
from asyncflow.session import Session


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


def _printer(message, value=0.0):
    return logging_ops.Print(array_ops.constant(value), [], message=message)


def _lines(capfd) -> list[str]:
    return [line for line in capfd.readouterr().err.splitlines() if line]


# -- group -------------------------------------------------------------------------------


def test_group_runs_all_inputs(capfd):
    a, b = _printer("a"), _printer("b")
    g = control_flow_ops.group(a, [b.op])
    assert g.type == "NoOp" and g.name == "group_deps"
    assert set(g.control_inputs) == {a.op, b.op}
    assert _run(g) is None
    assert sorted(_lines(capfd)) == ["a", "b"]


def test_group_names_and_empty():
    assert control_flow_ops.group(name="init").name == "init"
    assert control_flow_ops.group().name == "group_deps"
    assert control_flow_ops.group({"x": array_ops.constant(1)}).name == "group_deps_1"


def test_group_rejects_bad_arguments():
    with pytest.raises(ValueError, match="Unknown keyword arguments: bogus"):
        control_flow_ops.group(bogus=1)
    with pytest.raises(TypeError, match="expected Tensor arguments"):
        control_flow_ops.group(3)


def test_group_across_devices_gets_one_noop_per_device():
    with ops.device("/cpu:0"):
        a = array_ops.constant(1)
    with ops.device("/cpu:1"):
        b = array_ops.constant(2)
    g = control_flow_ops.group(a, b)
    assert len(g.control_inputs) == 2
    assert all(c.type == "NoOp" for c in g.control_inputs)


def test_control_dependencies_order_prints(capfd):
    first = _printer("first")
    with ops.control_dependencies([first]):
        second = _printer("second")
    _run(second)
    assert _lines(capfd) == ["first", "second"]


# -- tuple and with_dependencies ----------------------------------------------------------


def test_tuple_gates_every_output_on_all_inputs(capfd):
    a, b = _printer("a", 1.0), _printer("b", 2.0)
    side = _printer("side")
    ta, tb, none = control_flow_ops.tuple([a, b, None], control_inputs=[side])
    assert none is None
    assert ta.name == "tuple/control_dependency:0"
    assert _run(ta) == 1.0
    assert sorted(_lines(capfd)) == ["a", "b", "side"]
    assert _run(tb) == 2.0
    assert sorted(_lines(capfd)) == ["a", "b", "side"]


def test_tuple_with_an_operation_input(capfd):
    a = _printer("a")
    op = _printer("op").op
    _, gated = control_flow_ops.tuple([a, op])
    assert gated.type == "NoOp"
    _run(gated)
    assert sorted(_lines(capfd)) == ["a", "op"]


def test_tuple_errors():
    with pytest.raises(ValueError, match="Must have at least one Tensor"):
        control_flow_ops.tuple([None])
    with pytest.raises(TypeError, match="Control input must be Operation or Tensor"):
        control_flow_ops.tuple([array_ops.constant(1)], control_inputs=[3])


def test_with_dependencies_runs_dependencies_first():
    ok = array_ops.placeholder(dtypes.bool, [])
    check = check_ops.Assert(ok, ["not ok"])
    x = control_flow_ops.with_dependencies([check], array_ops.constant([1, 2]), name="out")
    assert x.name == "out:0" and x.op.type == "Identity"
    np.testing.assert_array_equal(_run(x, {ok: True}), [1, 2])
    with pytest.raises(errors.InvalidArgumentError, match=r"assertion failed: \[not ok\]"):
        _run(x, {ok: False})


# -- Print -------------------------------------------------------------------------------


def test_print_passes_input_through_and_prints(capfd):
    x = array_ops.constant([1, 2, 3, 4])
    y = logging_ops.Print(x, [x, "tag", 2.5], message="x: ")
    assert y.dtype == dtypes.int32 and y.shape.as_list() == [4]
    assert y.op.type == "Print"
    np.testing.assert_array_equal(_run(y), [1, 2, 3, 4])
    assert _lines(capfd) == ["x: [1 2 3...][tag][2.5]"]


def test_print_summarize_and_first_n(capfd):
    x = array_ops.constant(np.arange(6).reshape(2, 3))
    y = logging_ops.Print(x, [x], message="m", first_n=2, summarize=4)
    with Session() as sess:
        for _ in range(3):
            sess.run(y)
    assert _lines(capfd) == ["m[[0 1 2][3...]...]"] * 2


@pytest.mark.parametrize("value,summarize,text", [
    (np.array([1, 2, 3]), 3, "1 2 3"),
    (np.array([1, 2, 3, 4]), 3, "1 2 3..."),
    (np.array([[1, 2], [3, 4]]), 3, "[1 2][3...]..."),
    (np.array([[1, 2], [3, 4]]), -1, "[1 2][3 4]"),
    (np.array(7), 3, "7"),
    (np.array([True, False]), 3, "1 0"),
    (np.array([0.1, 1e-8, np.inf], np.float32), 3, "0.1 1e-08 inf"),
    (np.array([1 / 3, 0.5], np.float64), 3, "0.33333333333333331 0.5"),
    (np.array([b"a b", b"c"], object), 3, "a b c"),
    (np.zeros((0, 2)), 3, ""),
])  # fmt: skip
def test_summarize_value(value, summarize, text):
    assert summarize_value(value, summarize) == text
