"""Summary ops and event files against TensorFlow 2.21 (fixtures in tests/fixtures/summary,
recorded by record_af.py then record_tf.py there; TensorFlow is not needed here).

- tf.tfevents, written by TF's FileWriter, is read with this file's own TFRecord/Event
  reader and with `af.summary.summary_iterator`; its summaries equal what asyncflow's ops
  compute for the same inputs (scalars, histograms, tensors and WAV bytes exactly;
  images as decoded pixels, the PNG compression differing);
- tf_read_af.json is what TF's `summary_iterator` read in af.tfevents, written by
  asyncflow's FileWriter: the same events, and every value equal to TF's own.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import threading
import wave
import zlib
from pathlib import Path

import google_crc32c
import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.protos import Event, GraphDef, Summary

HERE = Path(__file__).parent / "fixtures" / "summary"
sys.path.insert(0, str(HERE))
import cases  # noqa: E402

# -- an independent reader: TFRecord framing, masked CRC32C, Event parsing ----------------


def _masked(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_events(path) -> list[Event]:
    raw = Path(path).read_bytes()
    events, pos = [], 0
    while pos < len(raw):
        header = raw[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", raw[pos + 8 : pos + 12])
        assert hcrc == _masked(header)
        data = raw[pos + 12 : pos + 12 + length]
        (dcrc,) = struct.unpack("<I", raw[pos + 12 + length : pos + 16 + length])
        assert dcrc == _masked(data)
        events.append(Event.FromString(data))
        pos += 16 + length
    return events


def decode_png(data: bytes) -> np.ndarray:
    """8-bit gray/RGB/RGBA PNG (any filter) -> [h, w, c] uint8."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert depth == 8
    c = {0: 1, 4: 2, 2: 3, 6: 4}[color]
    rows = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * c)
    out = np.zeros((h, w * c), np.int32)
    for y in range(h):
        f, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        prev = out[y - 1] if y else np.zeros(w * c, np.int32)
        cur = np.zeros(w * c, np.int32)
        for x in range(w * c):
            a = cur[x - c] if x >= c else 0
            b, d = prev[x], prev[x - c] if x >= c else 0
            if f == 0:
                pred = 0
            elif f == 1:
                pred = a
            elif f == 2:
                pred = b
            elif f == 3:
                pred = (a + b) // 2
            else:
                p = a + b - d
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - d)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else d)
            cur[x] = (line[x] + pred) & 0xFF
        out[y] = cur
    return out.astype(np.uint8).reshape(h, w, c)


def decode_wav(data: bytes) -> tuple[np.ndarray, int]:
    import io

    with wave.open(io.BytesIO(data)) as w:
        frames = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        return frames.reshape(-1, w.getnchannels()) / 32768.0, w.getframerate()


def _summaries(events):
    return [e for e in events if e.WhichOneof("what") == "summary"]


def _our_summary() -> Summary:
    with af.Graph().as_default():
        merged = cases.build(af)
        with af.Session() as sess:
            return Summary.FromString(sess.run(merged))


def _assert_value_equal(ours, theirs):
    assert ours.tag == theirs.tag
    kind = theirs.WhichOneof("value")
    assert ours.WhichOneof("value") == kind
    if kind == "image":
        for f in ("height", "width", "colorspace"):
            assert getattr(ours.image, f) == getattr(theirs.image, f)
        np.testing.assert_array_equal(
            decode_png(ours.image.encoded_image_string),
            decode_png(theirs.image.encoded_image_string),
        )
    else:  # scalars, histograms, tensors, audio: the same message, byte for byte
        assert ours.SerializeToString() == theirs.SerializeToString()


# -- TF's event file ------------------------------------------------------------------------


def test_tf_event_file_reads_back():
    events = read_events(HERE / "tf.tfevents")
    assert [e.WhichOneof("what") for e in events] == [
        "file_version",
        "graph_def",
        "meta_graph_def",
        "summary",
        "summary",
    ]
    assert events[0].file_version == "brain.Event:2"
    assert [e.step for e in _summaries(events)] == [1, 2]
    ours = list(af.summary.summary_iterator(HERE / "tf.tfevents"))
    assert [e.SerializeToString() for e in ours] == [e.SerializeToString() for e in events]


def test_summary_ops_match_tf():
    theirs = _summaries(read_events(HERE / "tf.tfevents"))[0].summary
    ours = _our_summary()
    assert [v.tag for v in ours.value] == [v.tag for v in theirs.value]
    for o, t in zip(ours.value, theirs.value):
        _assert_value_equal(o, t)


def test_histogram_and_image_details():
    """Spot values against an independent reading of the TF fixture."""
    values = {v.tag: v for v in _summaries(read_events(HERE / "tf.tfevents"))[0].summary.value}
    x = cases.inputs()
    h = values["weights"].histo
    w = x["weights"].astype(np.float64)
    assert (h.min, h.max, h.num) == (w.min(), w.max(), 200)
    assert sum(h.bucket) == 200 and h.bucket_limit[-1] == sys.float_info.max
    assert h.sum == pytest.approx(w.sum(), rel=1e-12)
    # A non-finite pixel is painted bad_color (red, cut to the image's 1 channel).
    np.testing.assert_array_equal(
        decode_png(values["bad_img/image/0"].image.encoded_image_string)[..., 0],
        [[159, 255], [64, 255]],  # [[0.5, nan], [-1, 2]]: x * 127/2 + 128
    )
    np.testing.assert_array_equal(
        decode_png(values["u8_img/image/0"].image.encoded_image_string), x["u8_img"][0]
    )
    samples, rate = decode_wav(values["wave/audio/1"].audio.encoded_audio_string)
    assert rate == 8000
    np.testing.assert_allclose(samples, np.clip(x["wave"][1], -1, 32767 / 32768), atol=1 / 32768)


def test_metadata_only_with_a_tags_first_value():
    """As TF1's FileWriter: the second step's text/tensor values carry no metadata."""
    for path in (HERE / "tf.tfevents", HERE / "af.tfevents"):
        first, second = _summaries(read_events(path))
        assert first.summary.value[-1].metadata.plugin_data.plugin_name == ""
        assert first.summary.value[-2].metadata.plugin_data.plugin_name == "text"
        assert not any(v.HasField("metadata") for v in second.summary.value)


# -- asyncflow's event file, as TF read it --------------------------------------------------


def test_tf_reads_our_event_file():
    seen = json.loads((HERE / "tf_read_af.json").read_text())
    ours = read_events(HERE / "af.tfevents")
    assert [d["kind"] for d in seen] == [e.WhichOneof("what") for e in ours]
    assert [d["step"] for d in seen] == [e.step for e in ours]
    assert seen[0]["file_version"] == "brain.Event:2"
    assert seen[1]["nodes"] == sorted(n.name for n in GraphDef.FromString(ours[1].graph_def).node)
    tf_values = _summaries(read_events(HERE / "tf.tfevents"))[0].summary.value
    for d, t in zip(seen[3]["values"], tf_values):
        assert d["tag"] == t.tag
        kind = d["value"]
        if kind == "simple_value":
            assert d["simple_value"] == t.simple_value
        elif kind == "histo":
            h = t.histo
            assert (d["min"], d["max"], d["num"], d["sum"]) == (h.min, h.max, h.num, h.sum)
            assert (d["bucket_limit"], d["bucket"]) == (list(h.bucket_limit), list(h.bucket))
        elif kind == "image":
            np.testing.assert_array_equal(d["pixels"], decode_png(t.image.encoded_image_string))
        elif kind == "audio":
            samples, _ = decode_wav(t.audio.encoded_audio_string)
            np.testing.assert_array_equal(d["decoded"], samples.astype(np.float32))
            assert d["content_type"] == "audio/wav" and d["decoded_rate"] == 8000
        else:
            assert d["plugin"] in ("text", "")
    assert seen[3]["values"][-2]["values"] == ["hello", "naïve"]
    assert seen[3]["values"][-1]["values"] == [1, 2, 3, 4]


# -- builders: names, tags, collections, errors ----------------------------------------------


def test_names_tags_and_collections():
    with af.Graph().as_default() as g:
        a = af.summary.scalar("a b", 1.0)
        with af.name_scope("outer"):
            b = af.summary.histogram("h", [1.0], family="fam")
        c = af.summary.scalar("c", 2.0, collections=["mine"])
        assert [t.name for t in af.get_collection(af.GraphKeys.SUMMARIES)] == [
            "a_b:0",
            "outer/fam/h:0",
        ]
        assert af.get_collection("mine") == [c]
        merged = af.summary.merge_all()
        assert merged.op.type == "MergeSummary" and merged.name == "Merge/MergeSummary:0"
        assert af.summary.merge_all("nothing") is None
        with af.Session(graph=g) as s:
            tags = [v.tag for v in Summary.FromString(s.run(merged)).value]
        assert tags == ["a_b", "fam/outer/fam/h"]
        del a, b


def test_errors_as_tf():
    with af.Graph().as_default():
        with pytest.raises(ValueError):
            af.summary.scalar("s", [1.0, 2.0])
        with pytest.raises(ValueError):
            af.summary.text("t", 1.0)
        x = af.summary.scalar("x", 1.0)
        dup = af.summary.merge([x, x])
        nan = af.summary.histogram("n", [1.0, np.nan])
        with af.Session() as s:
            with pytest.raises(errors.InvalidArgumentError, match="Duplicate tag x"):
                s.run(dup)
            with pytest.raises(errors.InvalidArgumentError, match="Nan in summary histogram"):
                s.run(nan)


# -- the writer ------------------------------------------------------------------------------


def test_writer_file_and_event_order(tmp_path):
    w = af.summary.FileWriter(str(tmp_path), filename_suffix=".x", max_queue=3)
    name = os.path.basename(w.event_writer.path)
    assert name.startswith("events.out.tfevents.") and name.endswith(".x")
    assert len(name.split(".")[3]) == 10
    for i in range(25):
        w.add_scalar("v", i, global_step=i)
    w.add_session_log(af.SessionLog(status=af.SessionLog.START), 25)
    w.flush()
    events = read_events(w.event_writer.path)
    assert events[0].file_version == "brain.Event:2"
    assert [e.summary.value[0].simple_value for e in events[1:26]] == list(range(25))
    assert events[26].session_log.status == af.SessionLog.START
    md = af.protos.RunMetadata()
    w.add_run_metadata(md, "step1", 1)
    with pytest.raises(ValueError):
        w.add_run_metadata(md, "step1", 2)
    w.close()
    w.add_scalar("ignored", 1.0)  # after close: dropped, as TF1
    assert read_events(w.event_writer.path)[-1].tagged_run_metadata.tag == "step1"


def test_writer_from_threads_and_async(tmp_path):
    import asyncio

    w = af.summary.FileWriter(str(tmp_path), max_queue=7)

    def add(k):
        for i in range(200):
            w.add_scalar(f"t{k}", i, global_step=i)

    threads = [threading.Thread(target=add, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    async def from_async():
        w.add_scalar("async", 1.0, 0)
        await w.aflush()
        await w.aclose()

    asyncio.run(from_async())
    events = read_events(w.event_writer.path)[1:]
    assert len(events) == 801
    for k in range(4):  # each thread's events in its own order
        steps = [e.step for e in events if e.summary.value[0].tag == f"t{k}"]
        assert steps == list(range(200))


def test_file_writer_cache_and_graph(tmp_path):
    with af.Graph().as_default() as g:
        af.constant(1.0, name="c")
        w = af.summary.FileWriterCache.get(str(tmp_path))
        assert af.summary.FileWriterCache.get(str(tmp_path)) is w
        af.summary.FileWriterCache.clear()
    events = read_events(w.event_writer.path)
    assert [n.name for n in GraphDef.FromString(events[1].graph_def).node] == ["c"]
    assert events[2].WhichOneof("what") == "meta_graph_def"
    del g


def test_bucket_counts_are_tfs_upper_bound():
    """The per-cell counting equals a binary search over TF's limits (std::upper_bound
    on the value as double), for float64 and float32 inputs, at and beside every limit."""
    from asyncflow.ops import summary_ops

    limits = np.array(summary_ops._BUCKET_LIMITS)
    rng = np.random.RandomState(3)
    with np.errstate(over="ignore"):
        edge = np.concatenate(
            [
                limits,
                -limits,
                np.nextafter(limits, 0),
                np.nextafter(limits[:-1], np.inf),
                np.nextafter(limits[1:], -np.inf),
                [0.0, -0.0, 1e-13, -1e-13, 1e300, -1e300, 5e-324, -5e-324],
                np.exp(rng.uniform(-745, 709, 100_000)) * np.sign(rng.randn(100_000)),
                rng.randn(10_000) * 0.05,
            ]
        )
    with np.errstate(over="ignore"):
        edge32 = np.concatenate(
            [
                edge.astype(np.float32),
                np.nextafter(limits.astype(np.float32), np.float32(0)),
                np.nextafter(limits.astype(np.float32), np.float32(np.inf)),
                np.nextafter(limits.astype(np.float32), np.float32(-np.inf)),
                np.array([1e-45, -1e-45, 3e38, -3e38], np.float32),
            ]
        )
    for values in (edge, edge32):
        values = values[np.isfinite(values)]
        index = np.searchsorted(limits, values.astype(np.float64), side="right")
        want = np.bincount(np.minimum(index, limits.size - 1), minlength=limits.size)
        np.testing.assert_array_equal(summary_ops.bucket_counts(values), want)
    big = rng.randn(1 << 17)
    h = summary_ops.histogram_proto(big)
    assert h.num == big.size and sum(h.bucket) == big.size
    assert h.sum == pytest.approx(big.sum(), rel=1e-12, abs=1e-9)
    assert h.sum_squares == pytest.approx(float(np.square(big).sum()), rel=1e-12)
    # The encoding: each non-empty bucket, an empty one where a run of empties ends, and
    # the last limit; against a direct walk of the counts.
    for values in (big, big.astype(np.float32), np.array([3.0]), np.array([-2.0, 5.0, 7.0])):
        h = summary_ops.histogram_proto(values)
        c = summary_ops.bucket_counts(values)
        want_limits, want_counts, prev = [], [], -1
        for i in np.flatnonzero(c):
            if i > prev + 1:
                want_limits.append(limits[i - 1])
                want_counts.append(0.0)
            want_limits.append(limits[i])
            want_counts.append(float(c[i]))
            prev = i
        if prev < limits.size - 1:
            want_limits.append(limits[-1])
            want_counts.append(0.0)
        assert list(h.bucket_limit) == want_limits and list(h.bucket) == want_counts


def _reference_counts(values) -> np.ndarray:
    """TF's bucket counts by a binary search per value (std::upper_bound on doubles)."""
    from asyncflow.ops import summary_ops

    limits = np.array(summary_ops._BUCKET_LIMITS)
    index = np.searchsorted(limits, np.asarray(values, np.float64).reshape(-1), "right")
    return np.bincount(np.minimum(index, limits.size - 1), minlength=limits.size)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bucket_memo_counts_as_a_fresh_count(dtype):
    """A histogram op's memo of its last input's buckets gives exactly the counts of a
    binary search, step after step: values drifting across limits, landing on limits
    and just beside them, jumping far, a step where most values move (the memo pauses),
    a NaN (reported; the memo still right afterwards), a new size."""
    from asyncflow.ops import summary_ops

    limits = np.array(summary_ops._BUCKET_LIMITS)
    rng = np.random.RandomState(7)
    memo = summary_ops._BucketMemo()
    table = summary_ops._cell_table(np.dtype(dtype))
    w = (rng.randn(3 * summary_ops._CHUNK // 2) * 0.05).astype(dtype)
    steps = 0
    for step in range(80):
        w = (w + rng.randn(w.size) * 2e-4).astype(dtype)
        if step % 10 == 3:  # some values exactly on limits and one step beside them
            at = rng.randint(0, w.size, 300)
            lim = limits[rng.randint(300, limits.size - 300, 300)].astype(dtype)
            w[at[:100]] = lim[:100]
            w[at[100:200]] = np.nextafter(lim[100:200], dtype(0))
            w[at[200:]] = -lim[200:]
        if step == 5:
            w[:10] = np.array([0, -0.0, 1e-30, -1e-30, 1e20, -1e20, 7, -7, 1e-12, -1e-12])
        if step == 20:  # most values move
            w *= dtype(3)
        if step == 40:
            w = w[: w.size - 1000].copy()
        if step == 60:
            bad = w.copy()
            bad[12345] = np.nan
            with pytest.raises(errors.InvalidArgumentError, match="Nan in summary"):
                summary_ops.histogram_proto(bad, "h", memo)
        counts, nonfinite, _ = table.counts(w, memo)
        assert nonfinite == 0
        np.testing.assert_array_equal(counts, _reference_counts(w))
        with_memo = summary_ops.histogram_proto(w, "h", memo)
        assert with_memo == summary_ops.histogram_proto(w, "h"), step
        steps += memo.key is not None
    assert steps > 40  # the memo was in use most of the time


def test_histogram_summary_of_a_variable_across_steps():
    """The HistogramSummary kernel keeps its memo per session: the summary of a
    variable updated every step equals a fresh count of its value."""
    from asyncflow.ops import summary_ops

    rng = np.random.RandomState(11)
    start = (rng.randn(300, 100) * 0.1).astype(np.float32)
    with af.Graph().as_default():
        v = af.Variable(start)
        delta = af.placeholder(af.float32, [300, 100])
        update = af.assign_add(v, delta)
        summ = af.summary.histogram("v", v)
        with af.Session() as sess:
            sess.run(v.initializer)
            value = start
            for _ in range(6):
                d = (rng.randn(300, 100) * 1e-3).astype(np.float32)
                got = Summary.FromString(sess.run(summ))
                want = summary_ops.histogram_proto(value, "v")
                assert got.value[0].histo == want
                sess.run(update, {delta: d})
                value = value + d


def test_tensorboard_reads_our_event_file():
    """tb_read_af.json: TensorBoard 2.21's EventAccumulator on af.tfevents (recorded by
    record_tensorboard.py; TensorBoard is needed only to re-record).  Every scalar,
    histogram, image (decoded pixels), audio clip, tensor and the graph come back as
    TF's own summaries of the same inputs have them."""
    tb = json.loads((HERE / "tb_read_af.json").read_text())
    theirs = {v.tag: v for v in _summaries(read_events(HERE / "tf.tfevents"))[0].summary.value}
    assert tb["tags"]["graph"] and tb["tags"]["meta_graph"]
    for tag, points in tb["scalars"].items():
        assert points == [[1, theirs[tag].simple_value], [2, theirs[tag].simple_value]]
    for tag, points in tb["histograms"].items():
        h = theirs[tag].histo
        for p in points:
            assert (p["min"], p["max"], p["num"], p["sum"]) == (h.min, h.max, h.num, h.sum)
            assert p["bucket_limit"] == list(h.bucket_limit) and p["bucket"] == list(h.bucket)
    assert sorted(tb["images"]) == sorted(t for t, v in theirs.items() if v.HasField("image"))
    for tag, points in tb["images"].items():
        want = decode_png(theirs[tag].image.encoded_image_string)
        for p in points:
            got = np.array(p["pixels"], np.uint8).reshape(want.shape)
            np.testing.assert_array_equal(got, want)
    for tag, points in tb["audio"].items():
        a = theirs[tag].audio
        for p in points:
            assert (p["sample_rate"], p["length_frames"]) == (a.sample_rate, a.length_frames)
            assert p["bytes"] == len(a.encoded_audio_string)
    assert tb["tensors"]["text"][0]["value"] == ["hello", "naïve"]
    assert tb["tensors"]["tensor"][1]["value"] == [1, 2, 3, 4]
    with af.Graph().as_default() as g:
        cases.build(af)
        assert tb["graph_nodes"] == sorted(op.name for op in g.get_operations())


def test_pending_events_are_written_at_exit(tmp_path):
    """A script that never closes its writer still leaves every event on disk."""
    import subprocess

    script = (
        "import asyncflow as af\n"
        f"w = af.summary.FileWriter({str(tmp_path)!r}, flush_secs=3600)\n"
        "for i in range(5):\n"
        "    w.add_scalar('x', i, i)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=50)
    (path,) = tmp_path.iterdir()
    assert [e.step for e in read_events(path)[1:]] == [0, 1, 2, 3, 4]


# -- which loop writes ------------------------------------------------------------------


def test_writer_made_in_async_code_runs_on_the_callers_loop(tmp_path):
    """No thread of the writer's own: its task is a task of the program's loop."""
    import asyncio

    async def main():
        w = af.summary.FileWriter(str(tmp_path), max_queue=2)
        assert w.event_writer._loop is asyncio.get_running_loop()
        for i in range(5):
            w.add_scalar("a", i, i)
        await w.aflush()
        assert [e.step for e in read_events(w.event_writer.path)[1:]] == [0, 1, 2, 3, 4]
        w.add_scalar("a", 5, 5)
        # A blocking flush on the loop's own thread cannot wait for the task there: it
        # appends the pending bytes itself (nothing of the task's is being written).
        w.flush()
        assert read_events(w.event_writer.path)[-1].step == 5
        w.add_scalar("a", 6, 6)
        await w.aclose()
        return w

    w = asyncio.run(main())
    assert [e.step for e in read_events(w.event_writer.path)[1:]] == list(range(7))


def test_writer_outlives_its_loop(tmp_path):
    """Made in one asyncio.run, flushed and closed after it returned: every event is
    written, in order, by the caller (the task went with its loop)."""
    import asyncio

    async def main():
        w = af.summary.FileWriter(str(tmp_path), flush_secs=3600)
        w.add_scalar("a", 0, 0)
        return w

    w = asyncio.run(main())
    w.add_scalar("a", 1, 1)
    w.flush()
    w.add_scalar("a", 2, 2)

    async def later():
        w.add_scalar("a", 3, 3)
        await w.aclose()

    asyncio.run(later())
    events = read_events(w.event_writer.path)
    assert events[0].file_version == "brain.Event:2"
    assert [e.step for e in events[1:]] == [0, 1, 2, 3]


def test_sync_writer_uses_the_runtime_loop_once_it_has_a_thread(tmp_path, monkeypatch):
    from asyncflow import session as session_mod

    rt = session_mod._Runtime()
    rt.ensure_thread()
    monkeypatch.setattr(session_mod, "_runtime", rt)
    try:
        w = af.summary.FileWriter(str(tmp_path))
        assert w.event_writer._loop is rt.loop
        w.add_scalar("a", 1.0, 1)
        w.close()
        assert [e.step for e in read_events(w.event_writer.path)[1:]] == [1]
    finally:
        rt.loop.call_soon_threadsafe(rt.loop.stop)
        rt.thread.join(timeout=10)
        rt.loop.close()


def test_summary_of_a_weight_runs_before_its_update_without_a_copy(monkeypatch):
    """A histogram of a weight fetched with the training op: the optimizer's update
    waits for the summary (graph pass summary_ops.order_before_updates), so it writes
    in place instead of copying the lent weight, and the summary shows the value from
    before the update, as copy-on-write promised anyway."""
    from asyncflow.ops import state_ops, summary_ops

    copies = []
    real = state_ops.VarRef._exclusive

    def counting(ref):
        ok = real(ref)
        if not ok:
            copies.append(ref.name)
        return ok

    monkeypatch.setattr(state_ops.VarRef, "_exclusive", counting)
    rng = np.random.RandomState(3)
    xv = rng.rand(16, 32).astype(np.float32)
    w0 = (rng.randn(32, 8) * 0.1).astype(np.float32)
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 32])
        w = af.Variable(w0, name="w")
        b = af.Variable(np.zeros(8, np.float32), name="b")
        loss = af.reduce_mean(af.square(af.matmul(x, w) + b))
        train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        summ = af.summary.merge([af.summary.histogram("w", w), af.summary.histogram("b", b)])
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for _ in range(3):
                before = sess.run([w, b])
                _, s = sess.run([train, summ], {x: xv})
                got = [v.histo for v in Summary.FromString(s).value]
                assert got[0] == summary_ops.histogram_proto(before[0], "w")
                assert got[1] == summary_ops.histogram_proto(before[1], "b")
            after = sess.run(w)
    assert not np.array_equal(after, w0)  # it trained
    assert copies == []


def test_the_digits_example_writes_tf1_tutorial_summaries(tmp_path):
    """examples/train_digits.py's graph (built without scikit-learn): merge_all of the
    loss, the batch accuracy and a histogram per trainable variable, written every step
    by a FileWriter and read back."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    try:
        import train_digits
    finally:
        sys.path.pop(0)
    m = train_digits.build_model(af, "mlp", 2e-3, 0, summaries=True)
    rng = np.random.RandomState(0)
    images = rng.rand(32, 8, 8, 1).astype(np.float32)
    labels = rng.randint(0, 10, 32).astype(np.int32)
    with af.Session(graph=m.graph) as sess:
        sess.run(m.init)
        writer = af.summary.FileWriter(str(tmp_path), sess.graph)
        for step in range(3):
            _, loss, s = sess.run(
                [m.train_op, m.loss, m.merged], {m.images: images, m.labels: labels}
            )
            writer.add_summary(s, step)
        weights = sess.run(m.graph.get_tensor_by_name("hidden1/w:0"))
        writer.close()
    (path,) = tmp_path.iterdir()
    events = list(af.summary.summary_iterator(str(path)))
    values = [(e.step, v) for e in events if e.HasField("summary") for v in e.summary.value]
    tags = sorted({v.tag for _, v in values})
    assert tags == sorted(
        ["loss", "accuracy"]
        + [f"{layer}/{p}_1" for layer in ("hidden1", "hidden2", "logits") for p in "wb"]
    )
    (last_loss,) = [v.simple_value for step, v in values if step == 2 and v.tag == "loss"]
    assert last_loss == pytest.approx(float(loss))
    assert any(e.HasField("graph_def") for e in events)
    assert weights.size == 64 * 256


# -- summary bytes written by hand, merged and framed without a parse ---------------------


@pytest.mark.parametrize(
    "values",
    [
        np.array([0.5, -3.0, 1e-13, 7.0], np.float32),
        np.zeros(5, np.float32),  # min = max = sum = 0: fields left out, as upb does
        np.array([-0.0, -0.0]),
        np.arange(-20, 20),
        np.array([np.finfo(np.float64).max, -1e30, 2.5]),
        np.zeros(0, np.float32),
        np.random.RandomState(3).normal(0, 0.1, 40_000).astype(np.float32),  # the cells
        np.random.RandomState(4).normal(0, 2, 300).astype(np.float16),
    ],
)
def test_histogram_bytes_are_the_messages_bytes(values):
    from asyncflow.ops import summary_ops

    expected = summary_ops.histogram_proto(values, "h").SerializeToString()
    assert summary_ops.histogram_bytes(values, "h") == expected


def _merged_by_messages(parts) -> bytes:
    merged = Summary()
    for raw in parts:
        merged.value.extend(Summary.FromString(raw).value)
    return merged.SerializeToString()


def test_merge_of_summary_ops_is_their_bytes_concatenated():
    """What the ops return parses back to the values given; a merge of them is the
    Summary of all their values (what merging the parsed messages gives), made without a
    parse; fed strings are parsed as before, and duplicate tags still raise."""
    with af.Graph().as_default():
        a = af.summary.scalar("a", af.constant(-0.0))
        b = af.summary.scalar("b", af.constant(2.5))
        h = af.summary.histogram("h", af.constant([1.0, 2.0, 300.0]))
        t = af.summary.text("t", af.constant("hi"))
        merged = af.summary.merge([a, b, h, t])
        fed = af.placeholder(af.string, [])
        with_fed = af.summary.merge([a, fed])
        dup = af.summary.merge([a, af.summary.merge([b, a])])
        with af.Session() as s:
            parts = s.run([a, b, h, t])
            got = s.run(merged)
            other = Summary()
            other.value.add(tag="z", simple_value=1.0)
            got_fed = s.run(with_fed, {fed: other.SerializeToString()})
            with pytest.raises(errors.InvalidArgumentError, match="Duplicate tag a"):
                s.run(dup)
    sa, sb = Summary.FromString(parts[0]), Summary.FromString(parts[1])
    assert (sa.value[0].tag, sa.value[0].simple_value) == ("a", 0.0)
    assert sa.value[0].HasField("simple_value") and sb.value[0].simple_value == 2.5
    from asyncflow.ops.summary_ops import histogram_proto

    histo = Summary.FromString(parts[2]).value[0].histo
    assert histo == histogram_proto(np.array([1.0, 2.0, 300.0], np.float32))
    assert (histo.num, sum(histo.bucket), histo.max) == (3, 3, 300.0)
    assert got == _merged_by_messages(parts)
    assert [v.tag for v in Summary.FromString(got_fed).value] == ["a", "z"]


def test_writer_frames_summary_op_bytes_as_events(tmp_path):
    """A summary op's string is written as the Event TF's writer makes of it (wall time,
    step, the summary), metadata kept on a tag's first value only."""
    with af.Graph().as_default():
        merged = af.summary.merge(
            [af.summary.scalar("loss", af.constant(0.25)), af.summary.text("t", af.constant("x"))]
        )
        plain = af.summary.merge([af.summary.histogram("w", af.constant([1.0, -1.0]))])
        with af.Session() as s:
            w = af.summary.FileWriter(str(tmp_path))
            for step in (0, 1, 2**40):
                w.add_summary(s.run(merged), step)
                w.add_summary(s.run(plain), step)
            w.close()
            raw_plain = s.run(plain)
    events = read_events(w.event_writer.path)[1:]
    assert [e.step for e in events] == [0, 0, 1, 1, 2**40, 2**40]
    assert all(e.wall_time > 1.5e9 for e in events)
    assert events[0].summary.value[1].metadata.plugin_data.plugin_name == "text"
    assert not events[2].summary.value[1].HasField("metadata")
    assert events[1].summary == Summary.FromString(raw_plain)
    again = Event(wall_time=events[1].wall_time, step=events[1].step)
    again.summary.ParseFromString(raw_plain)
    assert read_events(w.event_writer.path)[2].SerializeToString() == again.SerializeToString()


def test_record_of_made_summaries_is_bounded(monkeypatch):
    from asyncflow.ops import summary_ops

    monkeypatch.setattr(summary_ops, "_made", summary_ops.collections.OrderedDict())
    monkeypatch.setattr(summary_ops, "_made_bytes", 0)
    monkeypatch.setattr(summary_ops, "_MADE_BYTES", 10_000)
    kept = [
        summary_ops._remember(bytes([i % 256]) * 1000, ("t",), False).item() for i in range(25)
    ]
    assert summary_ops._made_bytes == sum(len(r) for r, _, _ in summary_ops._made.values())
    assert summary_ops._made_bytes <= 10_000 and len(summary_ops._made) == 10
    assert summary_ops.made_here(kept[-1]) == (("t",), False)
    assert summary_ops.made_here(kept[0]) is None  # forgotten: parsed, as any string
    big = summary_ops._remember(b"x" * (summary_ops._MADE_ONE_MAX + 1), ("b",), False)
    assert summary_ops.made_here(big.item()) is None and len(summary_ops._made) == 10


def _fused_and_unfused(monkeypatch, build, feeds_list):
    """Each feed's merged summary with the graph pass `fuse_summaries` (one
    _FusedMergeSummary) and without it (the ops and a MergeSummary), and how many times
    the fused kernel ran."""
    from asyncflow import graph_passes
    from asyncflow.ops import summary_ops

    ran = []
    real = summary_ops._FusedState.run

    def counting(state, args):
        ran.append(1)
        return real(state, args)

    monkeypatch.setattr(summary_ops._FusedState, "run", counting)
    results = []
    unfused = [p for p in graph_passes.GRAPH_PASSES if p is not summary_ops.fuse_summaries]
    for fused in (True, False):
        passes = [summary_ops.fuse_summaries] + unfused if fused else unfused
        monkeypatch.setattr(graph_passes, "GRAPH_PASSES", passes)
        with af.Graph().as_default():
            merged, placeholders = build()
            with af.Session() as sess:
                out = []
                for feeds in feeds_list:
                    try:
                        out.append(sess.run(merged, dict(zip(placeholders, feeds))))
                    except errors.InvalidArgumentError as e:
                        out.append(e.message)
                results.append(out)
    return results[0], results[1], len(ran)


def test_fused_merge_of_scalars_and_histograms_is_the_ops_bytes(monkeypatch):
    """A merge of scalars, histograms (float32 of a few values and of more than
    _SEARCH_MAX, float64, ints, empty) and a text summary: the fused op's bytes are the
    ops', step after step, NaN and Inf raise naming the histogram's op, and it goes on."""
    from asyncflow.ops import summary_ops

    rng = np.random.RandomState(5)
    shapes = [(7,), (3, 4), (summary_ops._SEARCH_MAX + 5,), (0,), (1,)]
    feeds_list = []
    values = [rng.randn(*s).astype(np.float32) for s in shapes]
    for step in range(4):  # slowly changing values, then a jump
        values = [
            v + np.float32(1e-3 if step < 3 else 5.0) * rng.randn(*v.shape).astype(np.float32)
            for v in values
        ]
        feeds_list.append(values + [np.float64(step - 0.5), np.array([-0.0, -0.0])])
    bad = [v.copy() for v in values]
    bad[2][17] = np.nan
    feeds_list.append(bad + [np.float64(1.0), np.array([1.0, 2.0])])
    feeds_list.append(values + [np.float64(1.0), np.array([1.0, np.inf])])
    feeds_list.append(feeds_list[1])

    def build():
        ps = [af.placeholder(af.float32, s) for s in shapes]
        loss = af.placeholder(af.float64, [])
        d = af.placeholder(af.float64, [2])
        parts = [af.summary.scalar("loss", loss)]
        parts += [af.summary.histogram(f"h{k}", p) for k, p in enumerate(ps)]
        parts += [
            af.summary.histogram("ints", af.constant([3, -2, 0, 7], af.int32)),
            af.summary.histogram("doubles", d),
            af.summary.text("t", af.constant("hi")),
            af.summary.scalar("two", af.constant(2, af.int32)),
        ]
        return af.summary.merge(parts), ps + [loss, d]

    fused, unfused, ran = _fused_and_unfused(monkeypatch, build, feeds_list)
    assert ran == len(feeds_list)
    # (an error names the fused op's node, the merge's: the message names the histogram)
    first_lines = [
        [r.split("\n")[0] if isinstance(r, str) else r for r in rs] for rs in (fused, unfused)
    ]
    assert first_lines[0] == first_lines[1]
    assert fused[4].startswith("Nan in summary histogram for: h2")
    assert fused[5].startswith("Infinity in summary histogram for: doubles")
    tags = [v.tag for v in Summary.FromString(fused[0]).value]
    assert tags == ["loss", "h0", "h1", "h2", "h3", "h4", "ints", "doubles", "t", "two"]
    for k, v in enumerate(values):
        got = Summary.FromString(fused[3]).value[1 + k].histo
        assert got == summary_ops.histogram_proto(v, f"h{k}")
    # TF's sum starts from 0.0: a sum of -0.0s is 0.0, left out of the bytes
    doubles = Summary.FromString(fused[0]).value[7].histo
    assert doubles.sum == 0.0 and not str(doubles.sum).startswith("-")


def test_fused_merge_keeps_duplicate_tag_errors_and_unfused_parts(monkeypatch):
    """Duplicate tags among the fused parts raise as MergeSummary's; a summary that
    another op also reads stays an op of its own; fed Summaries are parsed."""

    other = Summary()
    other.value.add(tag="z", simple_value=1.0)

    def build_dup():
        from asyncflow.ops import summary_ops

        tag = af.constant("a")
        a = summary_ops._summary_op("ScalarSummary", [tag, af.constant(1.0)], {}, "s")
        h = summary_ops._summary_op("HistogramSummary", [tag, af.constant([1.0, 2.0])], {}, "h")
        return af.summary.merge([a, h]), []

    fused, unfused, _ = _fused_and_unfused(monkeypatch, build_dup, [[]])
    assert (
        fused[0].split("\n")[0]
        == unfused[0].split("\n")[0]
        == "Duplicate tag a found in summary inputs"
    )

    def build_shared():  # b is read by two merges: an op of its own
        a = af.summary.scalar("a", af.constant(1.0))
        b = af.summary.scalar("b", af.constant(2.0))
        return af.summary.merge([af.summary.merge([a, b]), af.summary.merge([b])]), []

    fused, unfused, _ = _fused_and_unfused(monkeypatch, build_shared, [[]])
    assert (
        fused[0].split("\n")[0]
        == unfused[0].split("\n")[0]
        == "Duplicate tag b found in summary inputs"
    )

    def build_fed():
        b = af.summary.scalar("b", af.constant(2.0))
        c = af.summary.scalar("c", af.constant(3.0))
        fed = af.placeholder(af.string, [])
        return af.summary.merge([b, fed, c]), [fed]

    fused, unfused, ran = _fused_and_unfused(monkeypatch, build_fed, [[other.SerializeToString()]])
    assert ran == 1 and fused == unfused
    assert [v.tag for v in Summary.FromString(fused[0]).value] == ["b", "z", "c"]


@pytest.mark.parametrize("cell_bits", [13, 16])
def test_float32_cells_of_13_bits_bucket_as_tfs_upper_bound(cell_bits):
    """The fused op's table (float32's top 13 bits: cells 2**-4 wide) puts every value
    where std::upper_bound over TF's limits (as double) does: each float32 at, just
    below and just above every limit, and random values over the whole range."""
    from asyncflow.ops import summary_ops

    table = summary_ops._cell_table(np.float32, cell_bits)
    limits = summary_ops._LIMITS
    with np.errstate(over="ignore"):
        at = limits.astype(np.float32)
    near = np.concatenate(
        [at, np.nextafter(at, np.float32(np.inf)), np.nextafter(at, np.float32(-np.inf))]
    )
    rng = np.random.RandomState(7)
    scales = 10.0 ** rng.uniform(-45, 38, 20000)
    random = (rng.randn(20000) * scales).astype(np.float32)
    values = np.concatenate([near, random, np.float32([0.0, -0.0])])
    values = values[np.isfinite(values)]
    want = np.minimum(np.searchsorted(limits, values.astype(np.float64), "right"), limits.size - 1)
    np.testing.assert_array_equal(table.buckets(values), want)


def test_first_event_names_the_writer_as_tf(tmp_path):
    # TF 2.21's FileWriter: the file_version event carries source_metadata.writer
    # "tensorflow.core.util.events_writer" (recorded)
    import glob

    from asyncflow.protos import event_pb2

    w = af.summary.FileWriter(str(tmp_path))
    w.add_summary(af.Summary(value=[af.Summary.Value(tag="a", simple_value=1.0)]), 3)
    w.close()
    (path,) = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    first = event_pb2.Event.FromString(next(iter(af.io.tf_record_iterator(path))))
    assert first.file_version == "brain.Event:2"
    assert first.source_metadata.writer == "tensorflow.core.util.events_writer"
