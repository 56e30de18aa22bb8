"""A TF-written GraphDef whose FunctionDefLibrary its nodes call (Defun ops, a nested
call, a PartitionedCall of a tf.function) imports and runs with TF's numbers.

fixtures/functions_tf/ is recorded by fixtures/record_functions_tf.py with TF 2.21.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.protos import GraphDef

pytestmark = pytest.mark.timeout(60)

HERE = pathlib.Path(__file__).parent / "fixtures" / "functions_tf"
EXPECTED = json.loads((HERE / "expected.json").read_text())
X = np.array(EXPECTED["x"], np.float32)


def _graph_def() -> GraphDef:
    return GraphDef.FromString((HERE / "graph.pb").read_bytes())


def test_fixture_calls_functions():
    gd = _graph_def()
    assert sorted(f.signature.name for f in gd.library.function) == EXPECTED["functions"]
    assert "PartitionedCall" in EXPECTED["call_ops"]


def test_tf_graph_with_functions_runs_as_tf():
    with af.Graph().as_default() as g:
        af.import_graph_def(_graph_def(), name="")
        with af.Session() as sess:
            sess.run("init")
            out = sess.run(["a:0", "b:0", "c:0", "p:0", "d:0"], {"x:0": X})
            for value, key in zip(out, "abcpd", strict=True):
                np.testing.assert_array_equal(value, np.array(EXPECTED[key], np.float32))
            assert sess.run("counter:0") == EXPECTED["counter_after"]
    # Each call is its body's ops under the call's name, results through an IdentityN
    # that keeps the call's name (so "call:i" still names result i).
    names = {op.name for op in g.get_operations()}
    call = next(n.name for n in _graph_def().node if n.op.startswith("scale_add"))
    assert g.get_operation_by_name(call).type == "IdentityN"
    assert {f"{call}/mul", f"{call}/add_0", f"{call}/x", f"{call}/y"} <= names
    nested = next(n.name for n in _graph_def().node if n.op.startswith("two_out"))
    inner = next(n for n in names if n.startswith(f"{nested}/scale_add") and n.endswith("/mul"))
    assert g.get_operation_by_name(inner).type == "Mul"
    assert g.get_operation_by_name("PartitionedCall").type == "IdentityN"


def test_a_gated_call_runs_after_its_control_input():
    """`c` calls scale_add under a control dependency on `bump`: fetching `c` alone
    bumps the counter once per step (the call's arguments wait on it)."""
    with af.Graph().as_default():
        af.import_graph_def(_graph_def(), name="imp")
        with af.Session() as sess:
            sess.run("imp/init")
            for _ in range(3):
                sess.run("imp/c:0", {"imp/x:0": X})
            assert sess.run("imp/counter:0") == 3.0
            # Through a control dependency only: `d` waits for two_out(a) to finish.
            np.testing.assert_array_equal(sess.run("imp/d:0", {"imp/x:0": X}), X)


def test_gradients_flow_through_inlined_calls():
    with af.Graph().as_default():
        (a, x) = af.import_graph_def(_graph_def(), return_elements=["a:0", "x:0"], name="")
        (grad,) = af.gradients(af.reduce_sum(a), [x])
        with af.Session() as sess:
            np.testing.assert_array_equal(sess.run(grad, {x: X}), np.full_like(X, 3.0))


def _library_graph(body_op="Mul", recursive=False, call_missing=False) -> GraphDef:
    gd = GraphDef()
    x = gd.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = 1  # DT_FLOAT
    f = gd.library.function.add()
    f.signature.name = "f"
    f.signature.input_arg.add(name="a", type=1)
    f.signature.output_arg.add(name="out", type=1)
    n = f.node_def.add(name="n", op="f" if recursive else body_op)
    n.input.extend(["a", "a"])
    n.attr["T"].type = 1
    f.ret["out"] = "n:z:0"
    call = gd.node.add(name="call", op="PartitionedCall" if call_missing else "f")
    call.input.append("x")
    if call_missing:
        call.attr["f"].func.name = "g"
    return gd


def test_function_errors():
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="calls itself"):
            af.import_graph_def(_library_graph(recursive=True))
        with pytest.raises(ValueError, match="function 'g', not in the library"):
            af.import_graph_def(_library_graph(call_missing=True))
        with pytest.raises(errors.NotFoundError, match="'NoSuchOp'.*node 'n' of function 'f'"):
            af.import_graph_def(_library_graph(body_op="NoSuchOp"))
        assert af.get_default_graph().get_operations() == []  # nothing half-imported
        (y,) = af.import_graph_def(_library_graph(), return_elements=["call:0"], name="")
        with af.Session() as sess:
            assert sess.run(y, {"x:0": 3.0}) == 9.0
