"""A TF 2.x-style training graph with control flow v2 trains here to TF's losses.

tests/fixtures/record_tf2_rnn_training_tf.py: TF 2.21 (tf.compat.v1, eager off, control
flow v2 on) wrote a dynamic_rnn trained by gradient descent.  Its forward loop is a
StatelessWhile over TensorLists; its gradient is another While that sums TensorLists
(AddN and ZerosLike of variants) and updates resource variables.  Imported here, with
the same initial values, it trains to TF's three losses.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "tf2_rnn_training"
REF = json.loads((FIXTURES / "ref.json").read_text())


def test_control_flow_v2_training_graph_trains_to_tf_losses():
    gd = af.GraphDef()
    gd.ParseFromString((FIXTURES / "graph.pb").read_bytes())
    with af.Graph().as_default() as g, af.Session() as sess:
        af.import_graph_def(gd, name="")
        sess.run("init")
        for name, value in REF["weights"].items():
            assigns = [o for o in g.get_operations() if o.type == "AssignVariableOp"]
            (assign,) = [o for o in assigns if o.name.startswith(name + "/")]
            sess.run(assign, {assign.inputs[1]: value})
        losses = [float(sess.run(["loss:0", "train"])[0]) for _ in range(3)]
    np.testing.assert_allclose(losses, REF["losses"], rtol=1e-5)


def test_tensor_lists_add_and_zeros_like():
    from asyncflow import graph as ops

    with af.Graph().as_default(), af.Session() as sess:
        def lst(rows):
            return ops.apply_op(
                "TensorListFromTensor", [af.constant(rows, af.float32), af.constant([2])]
            ).outputs[0]

        a, b = lst([[1.0, 2.0], [3.0, 4.0]]), lst([[10.0, 20.0], [30.0, 40.0]])
        total = ops.apply_op("AddN", [[a, b]]).outputs[0]
        zeros = ops.apply_op("ZerosLike", [a]).outputs[0]
        stack = lambda h: ops.apply_op(  # noqa: E731
            "TensorListStack", [h, af.constant([2])], {"element_dtype": af.float32}
        ).outputs[0]
        got_total, got_zeros = sess.run([stack(total), stack(zeros)])
        np.testing.assert_array_equal(got_total, [[11, 22], [33, 44]])
        np.testing.assert_array_equal(got_zeros, np.zeros((2, 2)))
        short = lst([[1.0, 2.0]])
        with pytest.raises(af.errors.InvalidArgumentError, match="different lengths"):
            sess.run(stack(ops.apply_op("AddN", [[a, short]]).outputs[0]))
