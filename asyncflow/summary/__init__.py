"""`af.summary`: TF1's `tf.summary` — summary ops, event files, and reading them back.

The ops and builders live with their kernels in `ops/summary_ops.py`; the event-file
writers in `writer.py`; `summary_iterator` in `reader.py`.
"""

from asyncflow.ops.summary_ops import (
    audio,
    histogram,
    image,
    merge,
    merge_all,
    scalar,
    tensor_summary,
    text,
)
from asyncflow.protos import Event, SessionLog, Summary, SummaryDescription, SummaryMetadata
from asyncflow.protos.event_pb2 import TaggedRunMetadata
from asyncflow.summary.reader import summary_iterator
from asyncflow.summary.writer import EventFileWriter, FileWriter, FileWriterCache

__all__ = [
    "Event",
    "EventFileWriter",
    "FileWriter",
    "FileWriterCache",
    "SessionLog",
    "Summary",
    "SummaryDescription",
    "SummaryMetadata",
    "audio",
    "histogram",
    "image",
    "merge",
    "merge_all",
    "scalar",
    "summary_iterator",
    "tensor_summary",
    "text",
    "TaggedRunMetadata",
    "all_v2_summary_ops",
    "get_summary_description",
    "initialize",
]

# TF's GraphKeys._SUMMARY_COLLECTION: where tf.contrib.summary (v2) ops were collected.
_SUMMARY_V2 = "_SUMMARY_V2"


def all_v2_summary_ops():
    """The default graph's v2 (tf.contrib.summary) summary ops: its `_SUMMARY_V2`
    collection (asyncflow builds none itself)."""
    from asyncflow import graph

    return graph.get_collection(_SUMMARY_V2)


def get_summary_description(node_def):
    """The SummaryDescription a legacy `TensorSummary` node carries in its JSON
    `description` attr; ValueError for any other op, as TF."""
    from google.protobuf import json_format

    if node_def.op != "TensorSummary":
        raise ValueError(f"Can't get_summary_description on {node_def.op}")
    description = SummaryDescription()
    json_format.Parse(node_def.attr["description"].s.decode(), description)
    return description


def initialize(graph=None, session=None):
    """Initialize tf.contrib.summary's default writer: asyncflow has no v2 summary
    writers, so there is never one, and TF's RuntimeError says so."""
    raise RuntimeError("No default tf.contrib.summary.SummaryWriter found")
