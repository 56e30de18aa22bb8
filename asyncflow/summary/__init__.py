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
]
