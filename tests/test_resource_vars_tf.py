"""Resource-variable training graphs load both ways (TF1 programs with use_resource=True).

tests/fixtures/record_resource_vars_tf.py ran one TF1 program (resource variables, a
dense Adam and a sparse Adagrad update, `initialized_value()`, a ready op) under TF 2.21
and under asyncflow and kept both MetaGraphs and checkpoints.  TF's imports here and
trains to TF's losses (ResourceApplyAdam, ResourceSparseApplyAdagrad, ... run the ref
ops' kernels); asyncflow's holds only ops TF has, and TF ran it to the same losses
(recorded); here it runs to them too.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "resource_vars"
REF = json.loads((FIXTURES / "ref.json").read_text())
PRIVATE = {"_ResourceAsRef", "ReportUninitialized", "VariableInitializedValue",
           "_DeduplicateIndexedSlices"}  # fmt: skip


def _train(prefix: str, steps: int = 3):
    with af.Graph().as_default() as g, af.Session() as sess:
        saver = af.train.import_meta_graph(prefix + ".meta")
        saver.restore(sess, prefix)
        losses = [float(sess.run(["loss:0", "train"])[0]) for _ in range(steps)]
        trainable = af.trainable_variables()
        # The restored variables are resource variables a new optimizer can update.
        step = af.train.GradientDescentOptimizer(0.01).minimize(g.get_tensor_by_name("loss:0"))
        before = float(sess.run("loss:0"))
        sess.run(step)
        after = float(sess.run("loss:0"))
    return losses, trainable, before, after


def test_tf_resource_variable_meta_graph_trains_here():
    losses, trainable, before, after = _train(str(FIXTURES / "tf" / "model"))
    np.testing.assert_allclose(losses, REF["tf_losses"], rtol=1e-5)
    assert {v.op.name for v in trainable} == {"w", "emb", "scale", "base"}
    assert all(type(v).__name__ == "ResourceVariable" for v in trainable if v.op.name != "base")
    assert after < before


def test_our_resource_variable_meta_graph_tf_ran_runs_here():
    assert "tf_ran_ours" in REF
    losses, *_ = _train(str(FIXTURES / "ours" / "model"))
    np.testing.assert_allclose(losses, REF["tf_ran_ours"]["losses"], rtol=1e-5)


def test_our_export_holds_only_tf_ops():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "record_resource_vars_tf", FIXTURES.parent / "record_resource_vars_tf.py"
    )
    recorder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recorder)
    with af.Graph().as_default():
        recorder.build(af)
        meta = af.train.export_meta_graph()
        types = {nd.op for nd in meta.graph_def.node}
    assert not types & PRIVATE, sorted(types & PRIVATE)
    assert {"ResourceApplyAdam", "ResourceSparseApplyAdagrad", "VarIsInitializedOp"} <= types
    ref_vars = {"base:0", "global_step:0"}  # (ref variables, as in TF1 by default)
    for vdef in _variable_defs(meta):
        assert vdef.is_resource == (vdef.variable_name not in ref_vars), vdef.variable_name


def _variable_defs(meta):
    from asyncflow.protos.variable_pb2 import VariableDef

    out = []
    for raw in meta.collection_def["variables"].bytes_list.value:
        vdef = VariableDef()
        vdef.ParseFromString(raw)
        out.append(vdef)
    return out
