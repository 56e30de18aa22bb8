"""A map directly under a batch runs as TF 2.21's default map_and_batch_fusion makes it
(one MapAndBatch) where an element fails, against TF's recorded results
(tests/fixtures/dataset_map_batch_fusion_cases.py, recorded by
record_dataset_map_batch_fusion_tf.py); options turning the fusion off keep the batch
apart (ops/dataset_pipeline.py's Batch, ops/dataset_raw.py's WithOptions)."""

import json
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import dataset_map_batch_fusion_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "dataset_map_batch_fusion_tf.json").read_text())


def _either_order(result: list) -> list:
    # TF's MapAndBatch shapes its batch by the element whose call ends first (its calls
    # run in parallel), so the two shapes of its message come in either order.
    out = []
    for r in result:
        if isinstance(r, list) and isinstance(r[-1], str) and "[tensor]: " in r[-1]:
            head, shapes = r[1].split("Shapes are: ")
            tensor, batch = (s.split(": ")[1] for s in shapes.split(", [batch]"))
            r = [r[0], head, sorted([tensor, batch])]
        out.append(r)
    return out


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_map_batch_fusion_matches_tf(key):
    with tf.Graph().as_default():
        got = cases.CASES[key](tf)
    assert _either_order(got) == _either_order(RECORDED["cases"][key])


def test_options_serialize_as_tf_writes_them():
    from asyncflow.data.options import serialized

    options = tf.data.Options()
    assert serialized(options) == b"\x12\x00\x1a\x00*\x00:\x00b\x00"  # (TF 2.21's bytes)
    options.experimental_optimization.map_and_batch_fusion = False
    assert serialized(options) == b"\x12\x00\x1a\x02H\x00*\x00:\x00b\x00"
    options = tf.data.Options()
    options.deterministic = True
    options.experimental_optimization.map_fusion = True
    options.threading.private_threadpool_size = 3
    options.autotune.enabled = False
    assert serialized(options) == b"\x08\x01\x12\x00\x1a\x02X\x01*\x02\x10\x03:\x02\x08\x00b\x00"


def test_with_options_writes_an_options_dataset():
    with tf.Graph().as_default() as g:
        options = tf.data.Options()
        options.experimental_optimization.apply_default_optimizations = False
        ds = tf.data.Dataset.range(3).with_options(options)
        op = ds._variant.op
        assert op.type == "OptionsDataset"
        assert op.get_attr("serialized_options") == b"\x12\x00\x1a\x02\x08\x00*\x00:\x00b\x00"
        assert ds.options() == tf.data.Dataset.range(3).options().merge(options)
        assert "OptionsDataset" in [n.op for n in g.as_graph_def().node]
