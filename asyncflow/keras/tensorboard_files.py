"""The files Keras' v1 TensorBoard callback leaves beside its event file, in TF's formats.

- `plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb`: the profiled batch as an
  XSpace (TF's profiler format, which TensorBoard's profile plugin reads).  TF's profiler
  traces the whole process; asyncflow has no such tracer, so the space holds what a
  FULL_TRACE step records: one host plane "/host:CPU" whose "python" line has the
  SessionRun event and one line per device with an event per op, named "<node>:<type>"
  and displayed as "<type>" as TF names its op events.  Times are relative to the start
  of profiling, as TF normalizes them.
- `projector_config.pbtxt`: the embedding projector's ProjectorConfig in text format
  (embeddings { tensor_name, metadata_path }), as TensorBoard's
  `projector.visualize_embeddings` writes it.

The messages are small, so they are encoded field by field (proto_wire) instead of
carrying TF's profiler and projector .proto files.
"""

from __future__ import annotations

import os
import socket
import time

from google.protobuf import text_encoding

from asyncflow import gfile
from asyncflow.proto_wire import length_delimited, varint

__all__ = ["write_projector_config", "write_xplane"]


def _int(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value) if value else b""


def _str(field: int, text: str) -> bytes:
    return length_delimited(field, text.encode()) if text else b""


class _Line:
    """One XLine being filled: events as (metadata id, start ns, duration ns)."""

    def __init__(self, line_id: int, name: str):
        self.id, self.name, self.events = line_id, name, []

    def encode(self, origin_ns: int) -> bytes:
        if not self.events:
            return b""
        self.events.sort(key=lambda e: e[1])
        start = self.events[0][1]
        events = b"".join(
            length_delimited(4, _int(1, mid) + _int(2, (t - start) * 1000) + _int(3, d * 1000))
            for mid, t, d in self.events
        )
        return length_delimited(
            3,
            _int(1, self.id)
            + _str(2, self.name)
            + _int(3, max(start - origin_ns, 0))
            + events
            + _str(11, self.name),
        )


def _xspace(step_stats, graph, origin_ns: int, host: str) -> bytes:
    metadata: dict[tuple[str, str], int] = {}

    def metadata_id(name: str, display: str) -> int:
        return metadata.setdefault((name, display), len(metadata) + 1)

    python = _Line(1, "python")
    lines = [python]
    first, last = None, None
    for dev in step_stats.dev_stats:
        line = _Line(len(lines) + 1, dev.device)
        lines.append(line)
        for ns in dev.node_stats:
            start = ns.all_start_nanos or ns.all_start_micros * 1000
            duration = ns.all_end_rel_nanos or ns.all_end_rel_micros * 1000
            op_type = _op_type(graph, ns)
            line.events.append(
                (metadata_id(f"{ns.node_name}:{op_type}", op_type), start, duration)
            )
            first = start if first is None else min(first, start)
            last = start + duration if last is None else max(last, start + duration)
    if first is not None:
        python.events.append((metadata_id("SessionRun", ""), first, last - first))
    entries = b"".join(
        length_delimited(
            4, _int(1, mid) + length_delimited(2, _int(1, mid) + _str(2, name) + _str(4, shown))
        )
        for (name, shown), mid in metadata.items()
    )
    plane = _str(2, "/host:CPU") + b"".join(line.encode(origin_ns) for line in lines) + entries
    return length_delimited(1, plane) + _str(4, host)


def _op_type(graph, node_stats) -> str:
    try:
        return graph.get_operation_by_name(node_stats.node_name).type
    except (KeyError, ValueError):
        # Not in the graph (a runtime-made node): the type its timeline label names.
        label = node_stats.timeline_label
        return label.split("= ", 1)[1].split("(", 1)[0] if "= " in label else ""


def write_xplane(logdir: str, step_stats, graph, origin_ns: int) -> str:
    """Writes the traced step `step_stats` (a StepStats) as
    `logdir/plugins/profile/<local time>/<host>.xplane.pb`; returns its path."""
    host = socket.gethostname()
    run_dir = os.path.join(
        logdir, "plugins", "profile", time.strftime("%Y_%m_%d_%H_%M_%S", time.localtime())
    )
    gfile.makedirs(run_dir)
    path = os.path.join(run_dir, f"{host}.xplane.pb")
    with gfile.GFile(path, "wb") as f:
        f.write(_xspace(step_stats, graph, origin_ns, host))
    return path


def write_projector_config(logdir: str, embeddings) -> str:
    """Writes `logdir/projector_config.pbtxt` for `embeddings`, (tensor name, metadata
    path or None) pairs; returns its path."""
    text = ""
    for tensor_name, metadata_path in embeddings:
        text += "embeddings {\n"
        text += f'  tensor_name: "{text_encoding.CEscape(tensor_name, False)}"\n'
        if metadata_path:
            text += f'  metadata_path: "{text_encoding.CEscape(metadata_path, False)}"\n'
        text += "}\n"
    path = os.path.join(logdir, "projector_config.pbtxt")
    with gfile.GFile(path, "w") as f:
        f.write(text)
    return path
