"""The format messages read what TensorFlow wrote: field numbers and types are TF's.

The fixtures in tests/fixtures/formats_tf/ were written by TF 2.21
(tests/fixtures/record_formats_tf.py); parsing them with asyncflow's generated classes
must give back the values TF put in, with no field left unknown.
"""

import json
import os

import pytest
from google.protobuf import text_format
from google.protobuf.unknown_fields import UnknownFieldSet

import asyncflow as af
from asyncflow import protos

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "formats_tf")
with open(os.path.join(HERE, "expected.json")) as _f:
    EXPECTED = json.load(_f)


def _read(*parts) -> bytes:
    with open(os.path.join(HERE, *parts), "rb") as f:
        return f.read()


def _no_unknown_fields(msg) -> None:
    """Assert that `msg` and every message inside it has no field our schema lacks."""
    assert len(UnknownFieldSet(msg)) == 0, type(msg).__name__
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = value.values() if hasattr(value, "values") else []
            for v in items:
                if hasattr(v, "ListFields"):
                    _no_unknown_fields(v)
        elif field.is_repeated:
            for v in value:
                _no_unknown_fields(v)
        else:
            _no_unknown_fields(value)


def test_graph_def_binary_and_text_agree():
    binary = af.GraphDef.FromString(_read("graph.pb"))
    text = text_format.Parse(_read("graph.pbtxt").decode(), af.GraphDef())
    assert binary == text
    _no_unknown_fields(binary)
    names = [n.name for n in binary.node]
    assert {"x", "w", "b", "MatMul", "add", "y", "z"} <= set(names)
    x = next(n for n in binary.node if n.name == "x")
    assert x.op == "Placeholder"
    assert x.attr["dtype"].type == protos.DataType.DT_FLOAT
    assert [d.size for d in x.attr["shape"].shape.dim] == [-1, 3]
    assert binary.versions.producer > 0
    assert binary.SerializeToString(deterministic=True) == _read("graph.pb")


def test_meta_graph_and_saved_model_parse():
    meta = af.MetaGraphDef.FromString(_read("ckpt", EXPECTED["checkpoint"]["prefix"] + ".meta"))
    _no_unknown_fields(meta)
    assert meta.saver_def.version == protos.SaverDef.V2
    assert meta.saver_def.filename_tensor_name == "save/Const:0"
    assert meta.collection_def["trainable_variables"].WhichOneof("kind") == "bytes_list"
    var = protos.VariableDef.FromString(
        meta.collection_def["trainable_variables"].bytes_list.value[0]
    )
    assert var.variable_name == "dense/w:0"
    sm = protos.SavedModel.FromString(_read("saved_model", "saved_model.pb"))
    _no_unknown_fields(sm)
    (mg,) = sm.meta_graphs
    assert list(mg.meta_info_def.tags) == ["serve"]
    sig = mg.signature_def["serving_default"]
    assert sig.method_name == "tensorflow/serving/predict"
    assert sig.inputs["x"].name == "x:0"
    assert sig.inputs["x"].dtype == protos.DataType.DT_FLOAT
    assert [d.size for d in sig.inputs["x"].tensor_shape.dim] == [-1, 3]
    assert sig.outputs["y"].name == "y:0"


def test_event_with_summary_and_histogram():
    ev = af.Event.FromString(_read("event.bin"))
    _no_unknown_fields(ev)
    assert (ev.wall_time, ev.step, ev.WhichOneof("what")) == (1700000000.5, 42, "summary")
    loss, w = ev.summary.value
    assert (loss.tag, loss.simple_value) == ("loss", 0.25)
    assert w.tag == "w" and w.WhichOneof("value") == "histo"
    h = w.histo
    assert (h.min, h.max, h.num, h.sum, h.sum_squares) == (-1.0, 2.0, 4, 2.5, 6.25)
    assert list(h.bucket_limit) == [0.0, 1.0, 2.0] and list(h.bucket) == [1.0, 1.0, 2.0]
    assert ev.SerializeToString() == _read("event.bin")


def test_run_metadata_step_stats():
    meta = protos.RunMetadata.FromString(_read("run_metadata.bin"))
    _no_unknown_fields(meta)
    assert [d.device for d in meta.step_stats.dev_stats] == EXPECTED["run_metadata"]["devices"]
    nodes = {n.node_name for d in meta.step_stats.dev_stats for n in d.node_stats}
    assert nodes == set(EXPECTED["run_metadata"]["nodes"])
    stats = [n for d in meta.step_stats.dev_stats for n in d.node_stats]
    assert all(n.all_start_micros > 0 for n in stats)


def test_tf1_names_are_the_messages():
    assert af.GraphDef is protos.GraphDef and af.NodeDef is protos.NodeDef
    assert af.MetaGraphDef is protos.MetaGraphDef
    assert af.train.Example is protos.Example and af.train.Feature is protos.Feature
    assert af.Summary is protos.Summary and af.HistogramProto is protos.HistogramProto


@pytest.mark.parametrize("garbage", [b"\x0a", b"\x0a\x10", b"\xff" * 11, b"\x0b"])
def test_malformed_bytes_raise_decode_error(garbage):
    from google.protobuf.message import DecodeError

    with pytest.raises(DecodeError):
        af.GraphDef.FromString(garbage)
