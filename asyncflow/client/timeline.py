"""`Timeline(step_stats).generate_chrome_trace_format()`: a traced step as Chrome-trace JSON
(TF's `tensorflow.python.client.timeline`), which Perfetto and chrome://tracing open.

Layout: one process per device (`pid`), one thread per lane of that device (`tid` is
the NodeExecStats' `thread_id`; the tracer puts overlapping kernels on different lanes,
so slices on one lane never overlap); an "X" slice per node named by its op type, with
the node's name and inputs in `args`; with `show_dataflow`, one flow arrow per
_Send/_Recv pair (matched by rendezvous key: tensor name, sending and receiving
device), from the Send's slice to the Recv's (both ends bound to their slices); with
`show_memory`, a "C" counter per device of the bytes in use after each node.  Times are
microseconds from the step's first node.

For Perfetto's JSON importer (which reads the trace as chrome://tracing does, within the
trace-event format): pids and tids start at 1, since pid/tid 0 is the kernel's swapper
to it (process n+1 is device n; tid lane+1 is lane `lane`, named by its metadata); a
flow is keyed by (cat, name, id), the same on both ends; each flow end lies strictly
inside its slice where the slice has a duration, since an event on a slice's boundary
binds to it only if the importer happens to see the slice first.
"""

from __future__ import annotations

import json
import re

__all__ = ["Timeline"]

_LABEL = re.compile(r"^(?P<name>[^=]+?) = (?P<op>[^(]+)\((?P<inputs>[^)]*)\)(?: @@ (?P<key>.*))?$")


class Timeline:
    """A traced step's StepStats (`run_metadata.step_stats`), ready for Chrome trace."""

    def __init__(self, step_stats, graph=None):
        self._step_stats = step_stats
        self._graph = graph

    def generate_chrome_trace_format(self, show_dataflow=True, show_memory=False) -> str:
        """The trace as a JSON string: `{"traceEvents": [...]}`."""
        events: list[dict] = []
        nodes = [n for d in self._step_stats.dev_stats for n in d.node_stats]
        t0 = min((n.all_start_nanos or n.all_start_micros * 1000 for n in nodes), default=0)
        sends: dict[str, tuple] = {}
        recvs: dict[str, tuple] = {}
        for pid, dev in enumerate(self._step_stats.dev_stats, start=1):
            events.append(_meta("process_name", pid, None, {"name": dev.device}))
            events.append(_meta("process_sort_index", pid, None, {"sort_index": pid}))
            lanes = sorted({n.thread_id for n in dev.node_stats} | set(dev.thread_names))
            for lane in lanes:
                name = dev.thread_names.get(lane, f"lane {lane}")
                events.append(_meta("thread_name", pid, lane + 1, {"name": name}))
            for n in dev.node_stats:
                start, dur = _times(n, t0)
                m = _LABEL.match(n.timeline_label or "")
                op = m.group("op") if m else n.node_name
                args = {"name": n.node_name, "op": op}
                if m and m.group("inputs"):
                    for i, inp in enumerate(m.group("inputs").split(", ")):
                        args[f"input{i}"] = inp
                events.append(
                    {
                        "ph": "X",
                        "cat": "Op",
                        "name": op,
                        "pid": pid,
                        "tid": n.thread_id + 1,
                        "ts": start,
                        "dur": dur,
                        "args": args,
                    }
                )
                if m and m.group("key"):
                    where = (pid, n.thread_id + 1, start, dur)
                    if op in ("_Send", "_HostSend"):
                        sends[m.group("key")] = where
                    elif op in ("_Recv", "_HostRecv"):
                        recvs[m.group("key")] = where
                if show_memory:
                    for mem in n.memory:
                        events.append(
                            {
                                "ph": "C",
                                "name": "Memory",
                                "pid": pid,
                                "ts": start + dur,
                                "args": {mem.allocator_name or dev.device: mem.live_bytes},
                            }
                        )
        if show_dataflow:
            for flow_id, key in enumerate(sorted(set(sends) & set(recvs))):
                spid, stid, sts, sdur = sends[key]
                rpid, rtid, rts, rdur = recvs[key]
                common = {"cat": "DataFlow", "name": key.split(";")[0], "id": flow_id}
                start, end = _flow_times(sts, sdur, rts, rdur)
                events.append({"ph": "s", "pid": spid, "tid": stid, "ts": start, **common})
                events.append(
                    {"ph": "f", "bp": "e", "pid": rpid, "tid": rtid, "ts": end, **common}
                )
        return json.dumps({"traceEvents": events}, indent=None, separators=(",", ":"))


def _flow_times(sts, sdur, rts, rdur) -> tuple[float, float]:
    """Where a Send->Recv arrow starts and ends: inside the Send's slice and inside the
    Recv's (strictly, where a slice has a duration), the end never before the start.
    The value can have arrived once both have started (TF's timeline ends a flow at the
    consumer's start): where the two slices overlap, both ends sit in the middle of the
    overlap; else the Send came first, and each end sits in the middle of its slice."""
    lo, hi = max(sts, rts), min(sts + sdur, rts + rdur)
    if lo < hi:
        mid = (lo + hi) / 2
        return mid, mid
    return sts + sdur / 2, max(rts + rdur / 2, sts + sdur / 2)


def _times(n, t0_ns: int) -> tuple[float, float]:
    start_ns = n.all_start_nanos or n.all_start_micros * 1000
    dur_ns = n.all_end_rel_nanos or n.all_end_rel_micros * 1000
    return (start_ns - t0_ns) / 1000.0, dur_ns / 1000.0


def _meta(name: str, pid: int, tid, args: dict) -> dict:
    event = {"ph": "M", "name": name, "pid": pid, "args": args}
    if tid is not None:
        event["tid"] = tid
    return event
