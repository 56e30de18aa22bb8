"""tf.data transformations whose graph form is more than one op write TF 2.21's nodes
(name, op, data inputs), and TF's GraphDefs of them import and run here to TF's
elements (tests/fixtures/record_dataset_structure_tf.py)."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
OUT = FIXTURES / "dataset_structure"
REF = json.loads((OUT / "tf.json").read_text())


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_dataset_structure_tf", FIXTURES / "record_dataset_structure_tf.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # (TF is imported only by its record_tf)
    return module


REC = _recorder()


@pytest.mark.parametrize("case", sorted(REF))
def test_nodes_as_tf_writes_them(case):
    g, init, fetch = REC.build(tf, case)
    assert REC.nodes(g.as_graph_def()) == REF[case]["nodes"]
    assert REC.drain(tf, g.as_graph_def(), init, fetch) == REF[case]["values"]


@pytest.mark.parametrize("case", sorted(REF))
def test_tf_graph_def_runs_here(case):
    gd = tf.GraphDef()
    gd.ParseFromString((OUT / f"{case}.pb").read_bytes())
    assert REC.drain(tf, gd, REF[case]["init"], REF[case]["next"]) == REF[case]["values"]
