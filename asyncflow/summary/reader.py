"""Reading event files back: `summary_iterator(path)` (TF1's `tf.train.summary_iterator`)."""

from __future__ import annotations

from collections.abc import Iterator

from asyncflow.protos.event_pb2 import Event
from asyncflow.python_io import tf_record_iterator

__all__ = ["summary_iterator"]


def summary_iterator(path) -> Iterator[Event]:
    """The Event protos of an event file, in order.

    Raises: DataLossError for a corrupt record; NotFoundError for a missing file.
    """
    for record in tf_record_iterator(path):
        yield Event.FromString(record)
