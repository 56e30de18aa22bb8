"""RunOptions(trace_level=FULL_TRACE): RunMetadata.step_stats and cost_graph, the Chrome
trace of `client.timeline.Timeline`, the profiler summary; nothing when tracing is off."""

from __future__ import annotations

import json
import threading

import numpy as np

import asyncflow as af
from asyncflow import tracing
from asyncflow.client import timeline
from asyncflow.protos import RunMetadata, StepStats

CPU2 = af.ConfigProto(device_count={"CPU": 2})
FULL = af.RunOptions(trace_level=af.RunOptions.FULL_TRACE)


def _two_device_training():
    """A two-layer net with its layers and the update on two devices."""
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
    # Every op of the step that runs a kernel is timed, the partitioner's included.
    assert {"MatMul", "Relu", "Square", "Mean"} <= names
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
    for f in ends:
        s = by_id[f["id"]]
        assert s["pid"] != f["pid"] and s["ts"] <= f["ts"]
    assert any(e["ph"] == "C" and e["name"] == "Memory" for e in events)


def test_overlapping_kernels_get_separate_lanes():
    gate = threading.Barrier(2, timeout=10)

    def wait(v):  # both py_funcs must be running at once (each on a worker thread)
        gate.wait()
        return v

    with af.Graph().as_default():
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
