"""RunOptions(trace_level=FULL_TRACE): RunMetadata.step_stats and cost_graph, the Chrome
trace of `client.timeline.Timeline`, the profiler summary; nothing when tracing is off."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import asyncflow as af
from asyncflow import tracing
from asyncflow.client import timeline
from asyncflow.protos import RunMetadata, StepStats

CPU2 = af.ConfigProto(device_count={"CPU": 2})
FULL = af.RunOptions(trace_level=af.RunOptions.FULL_TRACE)


def _two_device_training():
    """A two-layer net with its layers and the update on two devices (the two CPUs, with
    fake GPUs too: every op is pinned)."""
    with af.device("/cpu:0"):
        x = af.placeholder(af.float32, [8, 4], name="x")
    with af.device("/cpu:0"):
        w1 = af.Variable(np.full((4, 5), 0.1, np.float32), name="w1")
        h = af.nn.relu(af.matmul(x, w1))
    with af.device("/cpu:1"):
        w2 = af.Variable(np.full((5, 1), 0.2, np.float32), name="w2")
        loss = af.reduce_mean(af.square(af.matmul(h, w2) - 1.0))
        train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
    return x, loss, train


def _traced_step():
    with af.Graph().as_default():
        x, loss, train = _two_device_training()
        md = af.RunMetadata()
        with af.Session(config=CPU2) as s:
            s.run(af.global_variables_initializer())
            s.run([loss, train], {x: np.ones((8, 4), np.float32)}, options=FULL, run_metadata=md)
            graph_ops = {op.name for op in s.graph.get_operations()}
    return md, graph_ops


def _slices_by_lane(trace):
    lanes: dict = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            lanes.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    return lanes


def test_full_trace_fills_step_stats_per_device():
    md, graph_ops = _traced_step()
    assert isinstance(md.step_stats, StepStats)
    devices = [d.device for d in md.step_stats.dev_stats]
    assert [d[-5:] for d in devices] == ["CPU:0", "CPU:1"]
    names = {n.node_name for d in md.step_stats.dev_stats for n in d.node_stats}
    # Every op of the step that runs a kernel is timed, the partitioner's included
    # (Square and its gradient's element-wise ops run fused, under another's name).
    assert {"MatMul", "Relu", "Mean"} <= names
    assert any(n.startswith("GradientDescent") for n in names)
    assert any(n.startswith("_send") for n in names) and any(n.startswith("_recv") for n in names)
    assert all(n.startswith("_") for n in names - graph_ops)  # _send_*, _recv_*, _control_*
    for dev in md.step_stats.dev_stats:
        for n in dev.node_stats:
            assert n.all_start_micros > 1_500_000_000_000_000  # epoch microseconds
            assert n.all_end_rel_nanos >= n.op_end_rel_nanos >= n.op_start_rel_nanos == 0
            assert n.memory[0].allocator_name == dev.device
            assert n.thread_id in dev.thread_names
    matmul = next(
        n for d in md.step_stats.dev_stats for n in d.node_stats if n.node_name == "MatMul"
    )
    out = matmul.output[0].tensor_description
    assert [d.size for d in out.shape.dim] == [8, 5]
    assert out.allocation_description.requested_bytes == 8 * 5 * 4
    assert matmul.timeline_label == "MatMul = MatMul(x, w1/read)"
    timed = [n for d in md.step_stats.dev_stats for n in d.node_stats]
    assert [c.name for c in md.cost_graph.node] == [n.node_name for n in timed]
    assert [c.compute_time for c in md.cost_graph.node] == [n.all_end_rel_micros for n in timed]
    # The metadata serializes as TF's RunMetadata (what FileWriter.add_run_metadata writes).
    wire = RunMetadata()
    wire.step_stats.CopyFrom(md.step_stats)
    assert RunMetadata.FromString(wire.SerializeToString()).step_stats == md.step_stats


def test_chrome_trace_lanes_flows_and_memory():
    md, _ = _traced_step()
    trace = json.loads(
        timeline.Timeline(md.step_stats).generate_chrome_trace_format(
            show_dataflow=True, show_memory=True
        )
    )
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {d.device for d in md.step_stats.dev_stats}
    for spans in _slices_by_lane(trace).values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert end <= start  # no overlapping slices on any lane
    sends = [e for e in events if e["ph"] == "X" and e["name"] == "_Send"]
    recvs = [e for e in events if e["ph"] == "X" and e["name"] == "_Recv"]
    starts = [e for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "f"]
    assert len(sends) == len(recvs) == len(starts) == len(ends) >= 2
    by_id = {e["id"]: e for e in starts}
    assert len(by_id) == len(starts)  # one id per flow

    def slice_of(e):  # the slice the flow event lies in (on its own lane)
        (found,) = [
            x
            for x in sends + recvs
            if (x["pid"], x["tid"]) == (e["pid"], e["tid"])
            and x["ts"] < e["ts"] < x["ts"] + x["dur"]
        ]
        return found

    # One arrow per Send/Recv pair: from inside each Send to inside its own Recv (the
    # partitioner names them _send_<key> and _recv_<key>) on the other device.
    paired = []
    for f in ends:
        s = by_id[f["id"]]
        send, recv = slice_of(s), slice_of(f)
        assert (send["name"], recv["name"]) == ("_Send", "_Recv")
        assert send["args"]["name"].removeprefix("_send_") == recv["args"]["name"].removeprefix(
            "_recv_"
        )
        assert s["pid"] != f["pid"] and s["ts"] <= f["ts"] and s["cat"] == f["cat"]
        paired.append((send["args"]["name"], recv["args"]["name"]))
    assert sorted(p[0] for p in paired) == sorted(e["args"]["name"] for e in sends)
    assert sorted(p[1] for p in paired) == sorted(e["args"]["name"] for e in recvs)
    counters = [e for e in events if e["ph"] == "C"]
    assert counters and all(e["name"] == "Memory" for e in counters)
    assert all(isinstance(v, int) and v >= 0 for e in counters for v in e["args"].values())


def test_overlapping_kernels_get_separate_lanes():
    gate = threading.Barrier(2, timeout=10)

    def wait(v):  # both py_funcs must be running at once (each on a worker thread)
        gate.wait()
        return v

    with af.Graph().as_default(), af.device("/cpu:0"):  # one device, GPUs or not
        a = af.py_func(wait, [af.constant(1.0)], af.float32)
        b = af.py_func(wait, [af.constant(2.0)], af.float32)
        md = af.RunMetadata()
        with af.Session() as s:
            s.run([a, b], options=FULL, run_metadata=md)
    (dev,) = md.step_stats.dev_stats
    funcs = [n for n in dev.node_stats if n.timeline_label.split(" = ")[1].startswith("PyFunc")]
    assert len(funcs) == 2 and funcs[0].thread_id != funcs[1].thread_id
    trace = json.loads(timeline.Timeline(md.step_stats).generate_chrome_trace_format())
    for spans in _slices_by_lane(trace).values():
        spans.sort()
        assert all(e <= s for (_, e), (s, _) in zip(spans, spans[1:]))


def test_lanes_partition_intervals():
    spans = [(0, 10), (2, 4), (4, 6), (5, 12), (10, 11), (12, 13)]
    lanes = tracing._lanes(spans)
    assert max(lanes) + 1 == 3  # the most spans open at once
    for i, (s1, e1) in enumerate(spans):
        for j, (s2, e2) in enumerate(spans):
            if i < j and lanes[i] == lanes[j]:
                assert e1 <= s2 or e2 <= s1


def test_tracing_off_records_nothing():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [3])
        y = af.reduce_sum(x * 2.0)
        md = af.RunMetadata()
        with af.Session() as s:
            s.run(y, {x: np.ones(3, np.float32)}, run_metadata=md)
            s.run(y, {x: np.ones(3, np.float32)}, options=af.RunOptions(), run_metadata=md)
            (plan,) = s._master.plans.values()
    assert len(md.step_stats.dev_stats) == 0 and len(md.cost_graph.node) == 0
    # The untraced plan runs the kernels themselves, unwrapped.
    for p in plan.plans:
        assert not any("timed_kernel" in getattr(k, "__qualname__", "") for k in p.kernels)


def test_profiler_summary():
    md, _ = _traced_step()
    result = af.profiler.profile(run_meta=md, options={"output": "none"})
    assert set(result.by_device) == {d.device for d in md.step_stats.dev_stats}
    for dev in md.step_stats.dev_stats:
        rows = result.by_device[dev.device]
        total = sum(n.all_end_rel_nanos for n in dev.node_stats) / 1000.0
        assert abs(sum(r.total_us for r in rows) - total) < 1e-6 * max(total, 1)
        assert [r.total_us for r in rows] == sorted((r.total_us for r in rows), reverse=True)
        assert sum(r.count for r in rows) == len(dev.node_stats)
    by_node = af.profiler.profile(run_meta=[md, md], cmd="graph", options={"output": "none"})
    row = next(r for rows in by_node.by_device.values() for r in rows if r.name == "MatMul")
    assert row.count == 2 and row.output_bytes == 2 * 8 * 5 * 4
    assert "MatMul" in result.text()


def test_loops_trace_every_iteration():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [3])
        _, out = af.while_loop(
            lambda i, v: i < 5, lambda i, v: (i + 1, v * 2.0), [af.constant(0), x]
        )
        md = af.RunMetadata()
        with af.Session() as s:
            got = s.run(out, {x: np.ones(3, np.float32)}, options=FULL, run_metadata=md)
    np.testing.assert_array_equal(got, np.full(3, 32.0, np.float32))
    names = [n.node_name for d in md.step_stats.dev_stats for n in d.node_stats]
    assert names.count("while/mul") == 5 and names.count("while/Less") == 6
    json.loads(timeline.Timeline(md.step_stats).generate_chrome_trace_format())


# -- the trace-event format's rules ------------------------------------------------------
#
# No browser runs here, and Perfetto's trace processor cannot be had offline: the
# `perfetto` package on PyPI (0.59.1) is pure Python and downloads trace_processor_shell
# from Google's artifact storage at first use, which this machine cannot reach, and no
# Debian or npm package ships the binary.  So the trace is not opened in Perfetto;
# instead every event is checked against the rules of the Trace Event Format (the JSON
# both chrome://tracing and Perfetto's JSON importer read): strict JSON (no NaN/Infinity);
# the object form with a
# "traceEvents" list; each event's required fields and their types for its phase; slices
# of one thread properly nested (here: disjoint); flow events paired by (cat, id), the
# start bound to the slice enclosing it on its thread, the end ("bp": "e") likewise,
# never earlier than the start; metadata events of the known names with their arguments;
# counters with numeric series.  And what Perfetto's JSON importer (trace processor's
# json_trace_parser) adds to the format: pid and tid 0 are the kernel's swapper there,
# so a synthesized trace uses 1 and up; a v1 flow is keyed by (cat, name, id), so both
# ends carry the same three; an event binds to the slice open on its track when the
# importer reaches it, so a flow end on a slice's boundary binds only if the slice came
# first: flow ends lie strictly inside slices that have a duration.

_META = {
    "process_name": "name",
    "thread_name": "name",
    "process_labels": "labels",
    "process_sort_index": "sort_index",
    "thread_sort_index": "sort_index",
}


def _reject_constant(name):
    raise ValueError(f"not JSON: {name}")


def trace_event_violations(text: str) -> list[str]:
    """Every rule of the trace-event format that the trace `text` breaks."""
    bad: list[str] = []
    trace = json.loads(text, parse_constant=_reject_constant)
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not the object form with a traceEvents list"]
    num = (int, float)
    slices: dict = {}
    flows: dict = {}
    for i, e in enumerate(trace["traceEvents"]):
        ph = e.get("ph")
        where = f"event {i} ({ph} {e.get('name')!r})"
        if not isinstance(e.get("name"), str):
            bad.append(f"{where}: name is not a string")
        if not isinstance(e.get("pid"), int):
            bad.append(f"{where}: pid is not an integer")
        elif e["pid"] < 1:
            bad.append(f"{where}: pid 0 (the swapper to Perfetto)")
        if isinstance(e.get("tid"), int) and e["tid"] < 1:
            bad.append(f"{where}: tid 0 (the swapper to Perfetto)")
        if "args" in e and not isinstance(e["args"], dict):
            bad.append(f"{where}: args is not an object")
        if "cat" in e and not isinstance(e["cat"], str):
            bad.append(f"{where}: cat is not a string")
        if ph != "M" and not (isinstance(e.get("ts"), num) and e["ts"] >= 0):
            bad.append(f"{where}: ts is not a non-negative number")
        if ph in ("X", "s", "f") and not isinstance(e.get("tid"), int):
            bad.append(f"{where}: tid is not an integer")
        if ph == "X":
            if not (isinstance(e.get("dur"), num) and e["dur"] >= 0):
                bad.append(f"{where}: dur is not a non-negative number")
            else:
                slices.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["dur"]))
        elif ph == "M":
            key = _META.get(e.get("name"))
            if key is None or key not in e.get("args", {}):
                bad.append(f"{where}: unknown metadata or its argument missing")
            elif e["name"].endswith("_name") and not isinstance(e["args"][key], str):
                bad.append(f"{where}: a name that is not a string")
            elif e["name"].endswith("sort_index") and not isinstance(e["args"][key], int):
                bad.append(f"{where}: a sort index that is not an integer")
            if e.get("name", "").startswith("thread_") and not isinstance(e.get("tid"), int):
                bad.append(f"{where}: thread metadata without a tid")
        elif ph == "C":
            args = e.get("args")
            if not args or not all(isinstance(v, num) for v in args.values()):
                bad.append(f"{where}: a counter without numeric values")
        elif ph in ("s", "f"):
            if not isinstance(e.get("cat"), str) or "id" not in e:
                bad.append(f"{where}: a flow event without cat and id")
            elif ph == "f" and e.get("bp") != "e":
                bad.append(f"{where}: a flow end not bound to its enclosing slice")
            else:
                flows.setdefault((e["cat"], e["name"], e["id"]), []).append(e)
        else:
            bad.append(f"{where}: a phase this trace should not use")
    for lane, spans in slices.items():
        spans.sort()
        for (s1, d1), (s2, _) in zip(spans, spans[1:]):
            if s1 + d1 > s2:
                bad.append(f"lane {lane}: slices at {s1} and {s2} overlap")

    def enclosed(e) -> bool:
        for start, dur in slices.get((e["pid"], e["tid"]), ()):
            if start < e["ts"] < start + dur or (dur == 0 and e["ts"] == start):
                return True
        return False

    for key, events in flows.items():
        phases = sorted(ev["ph"] for ev in events)
        if phases != ["f", "s"]:
            bad.append(f"flow {key}: phases {phases}, not one start and one end")
            continue
        start = next(ev for ev in events if ev["ph"] == "s")
        end = next(ev for ev in events if ev["ph"] == "f")
        if end["ts"] < start["ts"]:
            bad.append(f"flow {key}: ends before it starts")
        for ev in (start, end):
            if not enclosed(ev):
                bad.append(f"flow {key}: {ev['ph']} at {ev['ts']} is strictly inside no slice")
    return bad


def test_chrome_trace_follows_the_trace_event_format():
    md, _ = _traced_step()
    text = timeline.Timeline(md.step_stats).generate_chrome_trace_format(
        show_dataflow=True, show_memory=True
    )
    assert trace_event_violations(text) == []
    flows = [e for e in json.loads(text)["traceEvents"] if e["ph"] in ("s", "f")]
    assert len(flows) >= 4  # the checks above saw the two devices' Send/Recv pairs


def test_chrome_trace_times_are_the_step_stats_in_microseconds():
    """Each slice is its node's start (from the step's first node) and duration in
    microseconds, on process device+1 and thread lane+1."""
    md, _ = _traced_step()
    events = json.loads(timeline.Timeline(md.step_stats).generate_chrome_trace_format())
    slices = [e for e in events["traceEvents"] if e["ph"] == "X"]
    nodes = [(pid, n) for pid, d in enumerate(md.step_stats.dev_stats) for n in d.node_stats]
    assert len(slices) == len(nodes)
    t0 = min(n.all_start_nanos for _, n in nodes)
    for e, (dev, n) in zip(slices, nodes):
        assert e["args"]["name"] == n.node_name
        assert (e["pid"], e["tid"]) == (dev + 1, n.thread_id + 1)
        assert e["ts"] == pytest.approx((n.all_start_nanos - t0) / 1000, abs=1e-6)
        assert e["dur"] == pytest.approx(n.all_end_rel_nanos / 1000, abs=1e-6)


def test_trace_event_rules_catch_violations():
    """The checker is not vacuous: each broken rule is reported."""
    ok = {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0.0, "dur": 2.0}
    flow = {"name": "k", "cat": "D", "id": 0, "pid": 1, "tid": 1}
    cases = {
        "overlap": [ok, {**ok, "ts": 1.0}],
        "dur": [{**ok, "dur": -1}],
        "ts": [{**ok, "ts": None}],
        "not JSON": None,
        "phases": [ok, {"ph": "s", **flow, "ts": 1.0}],
        "inside no slice": [
            ok, {"ph": "s", **flow, "ts": 1.0}, {"ph": "f", "bp": "e", **flow, "ts": 2.0},
        ],
        "strictly inside": [  # on the slice's start: binds only if the slice comes first
            ok, {"ph": "s", **flow, "ts": 0.0}, {"ph": "f", "bp": "e", **flow, "ts": 1.0},
        ],
        "one start and one end": [  # another name: another flow to Perfetto
            ok, {"ph": "s", **flow, "ts": 0.5}, {"ph": "f", "bp": "e", **flow, "name": "j",
                                                  "ts": 1.0},
        ],
        "pid 0": [{**ok, "pid": 0}],
        "tid 0": [{**ok, "tid": 0}],
        "metadata": [{"ph": "M", "name": "process_name", "pid": 1, "args": {}}],
    }  # fmt: skip
    for rule, events in cases.items():
        text = (
            '{"traceEvents":[{"ts":NaN}]}'
            if events is None
            else json.dumps({"traceEvents": events})
        )
        try:
            found = " ".join(trace_event_violations(text))
        except ValueError as exc:
            found = str(exc)
        assert rule in found, (rule, found)


def test_a_run_metadata_without_tracing_takes_the_untraced_path(monkeypatch):
    # FULL_TRACE off costs nothing: RunOptions(NO_TRACE) with a RunMetadata runs the same
    # plan down the same one-partition path as a plain run (no StepStatus for a step
    # that never suspends); it cost a step of the digits example ~3.6% before.
    from asyncflow import worker

    made = []

    class Counting(worker.StepStatus):
        def __init__(self, *args, **kw):
            made.append(1)
            super().__init__(*args, **kw)

    monkeypatch.setattr(worker, "StepStatus", Counting)
    with af.Graph().as_default(), af.device("/cpu:0"):  # one partition, GPUs or not
        x = af.placeholder(af.float32, [3])
        y = af.reduce_sum(x * 2.0)
        with af.Session() as s:
            md = af.RunMetadata()
            off = af.RunOptions(trace_level=af.RunOptions.NO_TRACE)
            assert s.run(y, {x: np.ones(3, np.float32)}, options=off, run_metadata=md) == 6.0
            assert made == []
            s.run(y, {x: np.ones(3, np.float32)}, options=FULL, run_metadata=md)
    assert made and len(md.step_stats.dev_stats) >= 1
