"""asyncflow's dynamic_rnn training GraphDef loads in TF (tests/fixtures/rnn_export).

TF 2.21 imported the GraphDef asyncflow wrote for an LSTM dynamic_rnn trained by
gradient descent and trained it to the recorded losses: TensorArray element shapes are
shape attrs, and TensorArray / stack handles pass through the loop's Enter, Merge,
Switch, ... as resources (asyncflow/tf_export.py), as TF writes them.  Here the same
GraphDef trains to the same losses, and the builders still write it that way.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import pytest

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "rnn_export"
REF = json.loads((FIXTURES / "ref.json").read_text())


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_rnn_export_tf", FIXTURES.parent / "record_rnn_export_tf.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REC = _recorder()


def test_graphdef_tf_trained_trains_here_to_tf_losses():
    gd = af.GraphDef()
    gd.ParseFromString((FIXTURES / "ours.pb").read_bytes())
    weights = json.loads((FIXTURES / "weights.json").read_text())
    np.testing.assert_allclose(REC.run(af, gd, weights), REF["tf_losses"], rtol=1e-5)


def _handle_forwarding(gd):
    return sorted(
        (nd.op, nd.attr["T"].type)
        for nd in gd.node
        if nd.op in ("Enter", "Merge", "Switch", "Exit", "NextIteration")
        and nd.attr["T"].type in (7, 20)  # string / resource
    )


def test_export_still_writes_what_tf_read():
    with af.Graph().as_default() as g:
        REC.build(af)
        gd = g.as_graph_def()
    want = af.GraphDef()
    want.ParseFromString((FIXTURES / "ours.pb").read_bytes())
    assert _handle_forwarding(gd) == _handle_forwarding(want)
    assert all(t == 20 for _, t in _handle_forwarding(gd))  # no string handle left
    shapes = [nd.attr["element_shape"].WhichOneof("value") for nd in gd.node
              if nd.op == "TensorArrayV3" and "element_shape" in nd.attr]  # fmt: skip
    assert shapes and set(shapes) == {"shape"}
