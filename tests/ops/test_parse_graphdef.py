"""Parse ops in GraphDefs: TF's import and run here, ours loaded in TF.

tests/fixtures/record_parse_graphdef_tf.py recorded, with TF 2.21: GraphDefs TF wrote
for parse_example (ParseExampleV2 with a FixedLenSequenceFeature and a VarLenFeature),
parse_single_example, parse_sequence_example and parse_single_sequence_example
(ParseSequenceExampleV2, batch and scalar records), and TF 1.x's ParseExample and
ParseSingleExample (through tf.raw_ops); and TF's run of asyncflow's GraphDefs of the
same four builders, equal to TF's own.  Here both kinds import and give TF's values,
and asyncflow's builders still write the parse nodes TF ran.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "parse_graphdef"
sys.path.insert(0, str(FIXTURES.parent))
from fetched import nested as _plain  # noqa: E402

REF = json.loads((FIXTURES / "ref.json").read_text())
RECORDS = {k: [bytes.fromhex(r) for r in v] for k, v in REF["records"].items()}


def _run(gd, case):
    ref = REF["cases"][case]
    records = RECORDS[ref["kind"]]
    feeds = [records] if ref["rank"] else [records[0]]
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        outs = [g.get_tensor_by_name(f"out_{i}:0") for i in range(ref["outputs"])]
        with tf.Session() as sess:
            return [[_plain(v) for v in sess.run(outs, {"records:0": f})] for f in feeds]


def _graph_def(path):
    gd = tf.GraphDef()
    gd.ParseFromString(path.read_bytes())
    return gd


@pytest.mark.parametrize("case", sorted(REF["cases"]))
def test_tf_graphdef_runs_to_tf_values(case):
    assert _run(_graph_def(FIXTURES / f"tf_{case}.pb"), case) == REF["cases"][case]["values"]


OURS = sorted(c for c, r in REF["cases"].items() if r["tf_ran_ours"])


@pytest.mark.parametrize("case", OURS)
def test_our_graphdef_tf_ran_runs_here(case):
    assert _run(_graph_def(FIXTURES / f"ours_{case}.pb"), case) == REF["cases"][case]["values"]


def _parse_nodes(gd):
    return [
        (nd.op, len(nd.input), sorted(k for k in nd.attr if not k.startswith("_")))
        for nd in gd.node
        if nd.op.startswith("Parse")
    ]


@pytest.mark.parametrize("case", OURS)
def test_builders_still_write_what_tf_ran(case):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "record_parse_graphdef_tf", FIXTURES.parent / "record_parse_graphdef_tf.py"
    )
    recorder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recorder)
    g, _ = recorder._build(tf, case)
    assert _parse_nodes(g.as_graph_def()) == _parse_nodes(_graph_def(FIXTURES / f"ours_{case}.pb"))
