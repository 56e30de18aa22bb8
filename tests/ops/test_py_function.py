"""tf.py_function (EagerPyFunc) against TF 2.21's recorded results
(fixtures/py_function_tf.json, recorded by fixtures/record_py_function_tf.py from the
graphs of fixtures/py_function_cases.py): what the function's EagerTensor arguments give
(.numpy(), .shape, repr, arithmetic, comparisons, indexing), how results convert to Tout,
the error class and message of each failure, the node, the decorator form and its
build errors, tf.data map.  Gradients: TF takes them from its eager tape, which
asyncflow does not have; tf.gradients raises LookupError naming the op."""

from __future__ import annotations

import json
import pathlib
import re
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow.ops.eager_tensor import EagerTensor
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import py_function_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "py_function_tf.json").read_text())


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetch) -> dict:
    with Session() as sess:
        try:
            return {"value": cases.plain(sess.run(fetch))}
        except af.errors.OpError as e:
            return {"error": type(e).__name__, "message": e.message.split("\n\t [[")[0]}


def _tokens(x):
    return re.sub(r"pyfunc_\d+", "pyfunc_N", json.dumps(x))


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_case_matches_tf(key):
    want = TF["cases"][key]
    got = _run(cases.CASES[key](af))
    if key == "mixed_dtypes":  # TF's message names its Python module path
        assert got["error"] == want["error"] == "UnknownError"
        assert want["message"].endswith(got["message"].split(": ", 1)[1] + " name:")
        return
    assert _tokens(got) == _tokens(want)


def test_node_matches_tf():
    t = cases.CASES["two_args"](af)[0]
    want = TF["node"]
    assert t.op.type == want["type"] and t.op.op_def.stateful == want["stateful"]
    assert sorted(t.op.node_def.attr) == want["attrs"]
    assert t.op.get_attr("is_async") is want["is_async"]
    assert (t.shape.ndims is not None) == want["shape_known"]
    assert type(cases.CASES["none_for_empty"](af)).__name__ == want["empty_tout_returns"]


def test_in_a_dataset_map():
    nxt = cases.dataset_map(af)
    with Session() as sess:
        assert [int(sess.run(nxt)) for _ in range(4)] == TF["dataset_map"]


def test_decorator_and_build_errors():
    assert _run(cases.decorated(af)) == TF["decorated"]
    assert cases.build_errors(af) == TF["build_errors"]


@pytest.mark.parametrize("key", sorted(cases.GRADIENT_CASES))
def test_gradient_matches_tf(key):
    # Through the operators on the EagerTensors, as TF's tape; none through NumPy (a
    # scalar zero, as TF's); TF's TypeError for an integer input's zero.
    got = _run(cases.GRADIENT_CASES[key](af))
    want = TF["gradient_cases"][key]
    if "error" in want:
        assert got["error"] == want["error"]
        assert got["message"].split("\n")[0] == want["message"]
        return
    for g, w in zip(_flat(got["value"]), _flat(want["value"]), strict=True):
        assert g["dtype"] == w["dtype"]
        if w["shape"] == [] and g["shape"] != []:  # TF's unconnected 0.0: zeros here
            assert set(g["values"]) == {0.0}
            continue
        assert g["shape"] == w["shape"]
        np.testing.assert_allclose(g["values"], w["values"], rtol=1e-6)


def _flat(v):
    return [x for part in v for x in part]


def test_the_function_owns_its_arguments():
    # A function that keeps and changes its argument leaves the step's values alone.
    kept = []

    def keep(a):
        kept.append(a)
        a.numpy()[:] = 0.0
        return a

    x = af.constant([1.0, 2.0])
    y = af.py_function(keep, [x], af.float32)
    z = x + 1.0
    with Session() as sess:
        yv, zv = sess.run([y, z])
    np.testing.assert_array_equal(zv, [2.0, 3.0])
    np.testing.assert_array_equal(yv, [0.0, 0.0])
    assert isinstance(kept[0], EagerTensor)


def test_convert_to_tensor_of_an_eager_tensor_is_a_constant():
    seen = {}

    def fn(a):
        seen["t"] = af.convert_to_tensor(a)
        return a

    _run(af.py_function(fn, [af.constant([1, 2])], af.int32))
    assert seen["t"].op.type == "Const" and seen["t"].dtype == af.int32


def test_tf_ops_inside_build_elsewhere_and_say_so():
    # TF runs them eagerly; here they would be graph ops: the user's graph is left alone
    # and the result is refused with a message saying why.
    g = ops.get_default_graph()
    y = af.py_function(lambda a: af.square(a), [af.constant([1.0, 2.0])], af.float32)
    before = len(g.get_operations())
    with pytest.raises(af.errors.InvalidArgumentError, match="no eager execution"):
        _run_raw(y)
    assert len(g.get_operations()) == before


def _run_raw(fetch):
    with Session() as sess:
        return sess.run(fetch)
