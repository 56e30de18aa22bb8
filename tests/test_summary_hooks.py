"""SummarySaverHook, StepCounterHook and ProfilerHook through MonitoredTrainingSession.

EXPECTED is what TensorFlow 2.21 (tf.compat.v1) writes for the same program: five
steps of `MonitoredTrainingSession(summary_dir=d, save_summaries_steps=2,
log_step_count_steps=2, hooks=[ProfilerHook(save_steps=2, output_dir=d)])` — the
event file's kinds and steps in order, the loss summaries, the run metadata tags (the
ProfilerHook gives no step), and timeline-2.json / timeline-4.json.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os

import pytest

import asyncflow as af

EXPECTED = [
    ("file_version", 0, None),
    ("graph_def", 0, None),
    ("meta_graph_def", 0, None),
    ("session_log", 1, "START"),
    ("summary", 1, [("loss", 4.0)]),
    ("tagged_run_metadata", 0, "step_2"),
    ("summary", 3, ["global_step/sec"]),
    ("summary", 3, [("loss", 1.6384)]),
    ("tagged_run_metadata", 0, "step_4"),
    ("summary", 5, ["global_step/sec"]),
    ("summary", 5, [("loss", 0.671089)]),
]


def _build():
    af.train.get_or_create_global_step()
    w = af.Variable(2.0)
    loss = af.square(w)
    af.summary.scalar("loss", loss)
    return af.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=af.train.get_global_step()
    )


def _check_logdir(d):
    af.summary.FileWriterCache.clear()
    assert sorted(f for f in os.listdir(d) if f.startswith("timeline")) == [
        "timeline-2.json",
        "timeline-4.json",
    ]
    for name in ("timeline-2.json", "timeline-4.json"):
        with open(os.path.join(d, name)) as f:
            events = json.load(f)["traceEvents"]
        assert any(e["ph"] == "X" and e["name"] == "ApplyGradientDescent" for e in events)
    (path,) = glob.glob(os.path.join(d, "events.out.tfevents.*"))
    got = []
    for e in af.train.summary_iterator(path):
        kind = e.WhichOneof("what")
        if kind == "summary":
            detail = [
                v.tag if v.tag.endswith("/sec") else (v.tag, round(v.simple_value, 6))
                for v in e.summary.value
            ]
            if detail == ["global_step/sec"]:
                assert e.summary.value[0].simple_value > 0
        elif kind == "session_log":
            detail = af.SessionLog.SessionStatus.Name(e.session_log.status)
        elif kind == "tagged_run_metadata":
            detail = e.tagged_run_metadata.tag
            meta = af.protos.RunMetadata.FromString(e.tagged_run_metadata.run_metadata)
            assert len(meta.step_stats.dev_stats[0].node_stats) > 0
        else:
            detail = None
        got.append((kind, e.step, detail))
    assert got == EXPECTED


def test_monitored_training_session_writes_summaries_as_tf(tmp_path):
    d = str(tmp_path)
    with af.Graph().as_default():
        train = _build()
        hooks = [af.train.ProfilerHook(save_steps=2, output_dir=d)]
        with af.train.MonitoredTrainingSession(
            summary_dir=d, save_summaries_steps=2, log_step_count_steps=2, hooks=hooks
        ) as mon:
            for _ in range(5):
                mon.run(train)
    _check_logdir(d)


def test_async_monitored_training_session_writes_the_same(tmp_path):
    d = str(tmp_path)

    async def main():
        train = _build()
        hooks = [af.train.ProfilerHook(save_steps=2, output_dir=d)]
        async with af.train.AsyncMonitoredTrainingSession(
            summary_dir=d, save_summaries_steps=2, log_step_count_steps=2, hooks=hooks
        ) as mon:
            for _ in range(5):
                await mon.arun(train)

    with af.Graph().as_default():
        asyncio.run(main())
    _check_logdir(d)


def test_summary_saver_hook_arguments(tmp_path):
    with af.Graph().as_default():
        op = af.summary.scalar("x", 1.0)
        with pytest.raises(ValueError):
            af.train.SummarySaverHook(save_steps=1)
        with pytest.raises(ValueError):
            af.train.SummarySaverHook(save_steps=1, summary_op=op, scaffold=af.train.Scaffold())
        with pytest.raises(ValueError):
            af.train.SummarySaverHook(summary_op=op)
        hook = af.train.SummarySaverHook(save_steps=1, summary_op=op, output_dir=str(tmp_path))
        with pytest.raises(RuntimeError):
            hook.begin()  # no global step
        af.summary.FileWriterCache.clear()
