"""TF 2's summary-writer raw ops run in a TF1 Session, against TensorFlow 2.21.

fixtures/summary/writer_ops_tf.txt is the event file TF 2.21 wrote for the graph that
`_build` makes (the same raw ops, inputs and order, run with tf.compat.v1), one Event a
line in text format, wall times zeroed (an imported event's own kept) and the GraphDef
of a graph event as text (TF re-serializes it; its attr maps come out in C++ hash order,
so the bytes are compared as messages).  The messages and file names below were
recorded from TF 2.21 too.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

import asyncflow as af
from asyncflow import errors, python_io
from asyncflow.protos import Event, GraphDef

FIXTURE = Path(__file__).parent / "fixtures" / "summary" / "writer_ops_tf.txt"
raw = af.raw_ops

_GRAPH_TEXT = (
    'node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } '
    'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1.0 } } '
    "} } versions { producer: 27 }"
)


def _i64(v):
    return af.constant(v, af.int64)


def _writes(w):
    meta = b"\n\x05\n\x03abc"
    image = np.linspace(-1.0, 2.0, 2 * 3 * 4 * 3, dtype=np.float32).reshape(2, 3, 4, 3)
    image[0, 1, 2, 0] = np.nan
    rgba = np.arange(3 * 2 * 2 * 4, dtype=np.uint8).reshape(3, 2, 2, 4)
    wave = np.linspace(-1, 1, 12, dtype=np.float32)
    return [
        raw.WriteSummary(writer=w, step=_i64(7), tensor=af.constant([1.5, 2.5]), tag="t1",
                         summary_metadata=af.constant(meta)),
        raw.WriteSummary(writer=w, step=_i64(7), tensor=af.constant([[1, 2]]), tag="t1",
                         summary_metadata=af.constant(b"")),
        raw.WriteSummary(writer=w, step=_i64(-3), tensor=af.constant(["hi", "yo"]), tag="str",
                         summary_metadata=af.constant(b"\xff\xff")),
        raw.WriteScalarSummary(writer=w, step=_i64(8), tag="sc", value=af.constant(3.25)),
        raw.WriteScalarSummary(writer=w, step=_i64(8), tag="sci", value=_i64(3)),
        raw.WriteHistogramSummary(writer=w, step=_i64(9), tag="h",
                                  values=af.constant([1.0, 2.0, 2.0, 3.0, -1.0, 1e-13])),
        raw.WriteHistogramSummary(writer=w, step=_i64(9), tag="he", values=af.zeros([0])),
        raw.WriteHistogramSummary(writer=w, step=_i64(9), tag="hi",
                                  values=af.constant([[4, 5], [6, 7]], af.int32)),
        raw.WriteImageSummary(writer=w, step=_i64(10), tag="img", tensor=af.constant(image),
                              bad_color=af.constant([9, 8, 7, 6], af.uint8), max_images=1),
        raw.WriteImageSummary(writer=w, step=_i64(10), tag="img2", tensor=af.constant(rgba),
                              bad_color=af.constant([255, 0, 0, 255], af.uint8)),
        raw.WriteAudioSummary(writer=w, step=_i64(11), tag="au",
                              tensor=af.constant(wave.reshape(2, 6)),
                              sample_rate=af.constant(8000.0), max_outputs=3),
        raw.WriteAudioSummary(writer=w, step=_i64(11), tag="au2",
                              tensor=af.constant(wave.reshape(1, 3, 4)),
                              sample_rate=af.constant(16000.0), max_outputs=1),
    ]  # fmt: skip


def _build(logdir):
    w = raw.SummaryWriter(shared_name="w")
    create = raw.CreateSummaryFileWriter(
        writer=w, logdir=str(logdir), max_queue=10, flush_millis=60000, filename_suffix=".sfx"
    )
    graph_def = text_format.Parse(_GRAPH_TEXT, GraphDef())
    imported = Event(step=21, wall_time=5.5)
    imported.summary.value.add(tag="imp", simple_value=1.0)
    summaries = af.stack([af.summary.scalar("a", 2.0), af.summary.scalar("b", 4.0)])
    writes = [
        *_writes(w),
        raw.WriteGraphSummary(
            writer=w, step=_i64(12), tensor=af.constant(graph_def.SerializeToString())
        ),
        raw.WriteRawProtoSummary(writer=w, step=_i64(13), tensor=summaries),
        raw.ImportEvent(writer=w, event=af.constant(imported.SerializeToString())),
    ]
    return w, create, writes


def _lines(path) -> list[str]:
    out = []
    for record in python_io.tf_record_iterator(str(path)):
        e = Event.FromString(record)
        if e.wall_time != 5.5:
            assert e.wall_time > 1e9
            e.wall_time = 0
        if e.graph_def:
            g = GraphDef.FromString(e.graph_def)
            e.graph_def = text_format.MessageToString(g, as_one_line=True).encode()
        out.append(text_format.MessageToString(e, as_one_line=True))
    return out


def _files(logdir) -> list[Path]:
    return sorted(Path(logdir).iterdir())


def test_event_file_equals_tfs(tmp_path):
    with af.Graph().as_default():
        w, create, writes = _build(tmp_path)
        with af.Session() as sess:
            sess.run(create)
            for op in writes:  # one step each, in TF's recorded order
                sess.run(op)
            sess.run(raw.FlushSummaryWriter(writer=w))
            sess.run(raw.CloseSummaryWriter(writer=w))
    (path,) = _files(tmp_path)
    want = FIXTURE.read_text().splitlines()
    assert path.name.rsplit(".", 3)[-1] == want[0]
    assert _lines(path) == want[1:]


def _file_name_pattern(suffix: str) -> str:
    return (
        rf"events\.out\.tfevents\.\d{{10}}\.{re.escape(socket.gethostname())}"
        rf"\.{os.getpid()}\.\d+{re.escape(suffix)}"
    )


@pytest.mark.parametrize(
    "suffix,ending",  # recorded from TF 2.21: a suffix gets a leading "." if it lacks one
    [("", "."), (".v2", ".v2"), ("abc", ".abc"), (".", ".")],
)
def test_file_names_as_tf(tmp_path, suffix, ending):
    with af.Graph().as_default():
        w = raw.SummaryWriter(shared_name="n")
        create = raw.CreateSummaryFileWriter(
            writer=w, logdir=str(tmp_path), max_queue=1, flush_millis=1, filename_suffix=suffix
        )
        with af.Session() as sess:
            sess.run(create)
            sess.run(raw.CloseSummaryWriter(writer=w))
    (path,) = _files(tmp_path)
    assert re.fullmatch(_file_name_pattern(ending), path.name), path.name
    assert _lines(path) == [
        'file_version: "brain.Event:2" '
        'source_metadata { writer: "tensorflow.core.util.events_writer" }'
    ]


def _scalar_write(w, step=1):
    return raw.WriteScalarSummary(writer=w, step=_i64(step), tag="s", value=af.constant(1.0))


def test_create_keeps_an_existing_writer_and_close_removes_it(tmp_path):
    # TF: a second Create on a live writer changes nothing (no file for the new logdir);
    # after Close the name is free and a Create makes a new file.
    with af.Graph().as_default():
        w = raw.SummaryWriter(shared_name="x")
        c1 = raw.CreateSummaryFileWriter(
            writer=w,
            logdir=str(tmp_path / "a"),
            max_queue=5,
            flush_millis=1000,
            filename_suffix="",
        )
        c2 = raw.CreateSummaryFileWriter(
            writer=w,
            logdir=str(tmp_path / "b"),
            max_queue=5,
            flush_millis=1000,
            filename_suffix="",
        )
        write, close = _scalar_write(w), raw.CloseSummaryWriter(writer=w)
        with af.Session() as sess:
            sess.run(c1)
            sess.run(c2)
            sess.run(write)
            sess.run(close)
            sess.run(c1)
            sess.run(close)
    assert not (tmp_path / "b").exists()
    counts = sorted(len(_lines(p)) for p in _files(tmp_path / "a"))
    assert counts == [1, 2]


def test_session_close_writes_what_is_pending(tmp_path):
    with af.Graph().as_default():
        w = raw.SummaryWriter(shared_name="p")
        create = raw.CreateSummaryFileWriter(
            writer=w, logdir=str(tmp_path), max_queue=100, flush_millis=600000, filename_suffix=""
        )
        with af.Session() as sess:
            sess.run(create)
            sess.run(_scalar_write(w, 3))
    (path,) = _files(tmp_path)
    assert _lines(path)[1] == 'step: 3 summary { value { tag: "s" simple_value: 1.0 } }'


def test_writes_from_async_session_on_its_loop(tmp_path):
    async def main():
        with af.Graph().as_default():
            w = raw.SummaryWriter(shared_name="a")
            create = raw.CreateSummaryFileWriter(
                writer=w,
                logdir=str(tmp_path),
                max_queue=100,
                flush_millis=600000,
                filename_suffix="",
            )
            writes = [_scalar_write(w, i) for i in range(1, 4)]
            async with af.Session() as sess:
                await sess.arun(create)
                await asyncio.gather(*(sess.arun(op) for op in writes))
                await sess.arun(raw.FlushSummaryWriter(writer=w))
                (path,) = _files(tmp_path)
                return sorted(_lines(path)[1:])

    got = asyncio.run(main())
    assert got == [
        f'step: {i} summary {{ value {{ tag: "s" simple_value: 1.0 }} }}' for i in range(1, 4)
    ]


# -- errors, recorded from TF 2.21 ------------------------------------------------------------


def _run_error(fetch, feed=None, *before):
    with af.Session() as sess:
        for op in before:
            sess.run(op)
        with pytest.raises(errors.OpError) as info:
            sess.run(fetch, feed)
    return type(info.value), info.value.message.splitlines()[0]


def test_unknown_writer_is_not_found():
    with af.Graph().as_default():
        anon = raw.SummaryWriter()  # shared_name "" is a name too, as in TF
        named = raw.SummaryWriter(shared_name="w9")
        assert _run_error(_scalar_write(anon)) == (
            errors.NotFoundError,
            "Container localhost does not exist. (Could not find resource: localhost/)",
        )
        assert _run_error(raw.FlushSummaryWriter(writer=named)) == (
            errors.NotFoundError,
            "Container localhost does not exist. (Could not find resource: localhost/w9)",
        )
        assert _run_error(raw.CloseSummaryWriter(writer=named)) == (
            errors.NotFoundError,
            "Container localhost does not exist.",
        )


def test_closed_writer_is_not_found(tmp_path):
    with af.Graph().as_default():
        w = raw.SummaryWriter(shared_name="w9")
        create = raw.CreateSummaryFileWriter(
            writer=w, logdir=str(tmp_path), max_queue=1, flush_millis=1, filename_suffix=""
        )
        close = raw.CloseSummaryWriter(writer=w)
        gone = "Resource localhost/w9/N10tensorflow22SummaryWriterInterfaceE does not exist."
        assert _run_error(_scalar_write(w), None, create, close) == (errors.NotFoundError, gone)
        assert _run_error(close, None, create, close) == (errors.NotFoundError, gone)


def _bad_input_cases(w):
    p = af.placeholder(af.string)
    img = af.placeholder(af.float32)
    color = af.placeholder(af.uint8)
    audio = af.placeholder(af.float32)
    rate = af.placeholder(af.float32)
    hist = af.placeholder(af.float32)
    write_image = raw.WriteImageSummary(
        writer=w, step=_i64(1), tag="i", tensor=img, bad_color=color
    )
    write_audio = raw.WriteAudioSummary(
        writer=w, step=_i64(1), tag="a", tensor=audio, sample_rate=rate
    )
    write_hist = raw.WriteHistogramSummary(writer=w, step=_i64(1), tag="h", values=hist)
    invalid = errors.InvalidArgumentError
    return [
        (raw.ImportEvent(writer=w, event=p), {p: b"\xff\xff"}, errors.DataLossError,
         "Bad tf.Event binary proto tensor string"),
        (raw.WriteRawProtoSummary(writer=w, step=_i64(1), tensor=p), {p: b"\xff\xff"},
         errors.DataLossError, "Bad tf.compat.v1.Summary binary proto tensor string at index 0"),
        (raw.WriteGraphSummary(writer=w, step=_i64(1), tensor=p), {p: b"\xff\xff"},
         errors.DataLossError, "Bad tf.GraphDef binary proto tensor string"),
        (write_image, {img: np.zeros([2, 2, 3]), color: [1, 2, 3, 4]}, invalid,
         "Tensor must be 4-D with last dim 1, 3, or 4, not [2,2,3]"),
        (write_image, {img: np.zeros([1, 2, 2, 2]), color: [1, 2, 3, 4]}, invalid,
         "Tensor must be 4-D with last dim 1, 3, or 4, not [1,2,2,2]"),
        (write_image, {img: np.zeros([1, 2, 2, 3]), color: [1, 2]}, invalid,
         "expected depth <= bad_color.size, got depth = 3, bad_color.size = 2"),
        (write_audio, {audio: np.zeros([1, 3]), rate: -1}, invalid, "sample_rate must be > 0"),
        (write_hist, {hist: [1.0, np.nan]}, invalid, "Nan in summary histogram for: h"),
        (write_hist, {hist: [1.0, np.inf]}, invalid, "Infinity in summary histogram for: h"),
    ]  # fmt: skip


def test_bad_inputs_raise_tfs_errors(tmp_path):
    with af.Graph().as_default():
        w = raw.SummaryWriter(shared_name="e")
        create = raw.CreateSummaryFileWriter(
            writer=w, logdir=str(tmp_path), max_queue=1, flush_millis=1, filename_suffix=""
        )
        with af.Session() as sess:
            sess.run(create)
            for op, feed, cls, message in _bad_input_cases(w):
                with pytest.raises(cls) as info:
                    sess.run(op, feed)
                assert info.value.message.splitlines()[0] == message
                assert info.value.op.name == op.name


def test_audio_of_rank_4_is_an_error_not_a_crash(tmp_path):
    # (TF 2.21 aborts the process here; asyncflow says what is wrong)
    with af.Graph().as_default():
        w = raw.SummaryWriter(shared_name="r4")
        create = raw.CreateSummaryFileWriter(
            writer=w, logdir=str(tmp_path), max_queue=1, flush_millis=1, filename_suffix=""
        )
        write = raw.WriteAudioSummary(
            writer=w, step=_i64(1), tag="a", tensor=np.zeros([1, 2, 2, 2], np.float32),
            sample_rate=8000.0,
        )  # fmt: skip
        assert _run_error(write, None, create) == (
            errors.InvalidArgumentError,
            "Tensor must be 3-D or 2-D, got: [1,2,2,2]",
        )


def test_db_writer_is_unimplemented():
    # TF 2.21 opens an SQLite database here; asyncflow has no such writer and says so.
    with af.Graph().as_default():
        w = raw.SummaryWriter(shared_name="db")
        db = raw.CreateSummaryDbWriter(
            writer=w, db_uri="/tmp/x.db", experiment_name="e", run_name="r", user_name="u"
        )
        cls, message = _run_error(db)
    assert cls is errors.UnimplementedError
    assert message.startswith("CreateSummaryDbWriter: ")


def test_op_signatures_as_tf():
    with af.Graph().as_default():
        w = raw.SummaryWriter(shared_name="s", container="")
        assert (w.dtype, w.shape.as_list(), w.op.type) == (af.resource, [], "SummaryWriter")
        create = raw.CreateSummaryFileWriter(
            writer=w, logdir="d", max_queue=1, flush_millis=1, filename_suffix=""
        )
        assert isinstance(create, af.Operation) and list(create.outputs) == []
        hist = raw.WriteHistogramSummary(writer=w, step=_i64(1), tag="h", values=[1.0])
        image = raw.WriteImageSummary(
            writer=w, step=_i64(1), tag="i", tensor=np.zeros([1, 1, 1, 1], np.float32),
            bad_color=np.zeros([4], np.uint8),
        )  # fmt: skip
        assert image.get_attr("max_images") == 3
        assert hist.get_attr("T") == af.float32
        with pytest.raises(TypeError, match="DataType bool not in list of allowed values"):
            raw.WriteScalarSummary(writer=w, step=_i64(1), tag="s", value=af.constant(True))


def test_tensor_summary_v1_as_tf():
    # TF 2.21's TensorSummary kernel: node_name, no tag, no metadata from the attrs.
    with af.Graph().as_default():
        summary = raw.TensorSummary(
            tensor=af.constant([1.0, 2.0]), description="desc", labels=["a", "b"],
            display_name="dn",
        )  # fmt: skip
        with af.Session() as sess:
            got = sess.run(summary)
    want = b'\n#:\rTensorSummaryB\x12\x08\x01\x12\x04\x12\x02\x08\x02"\x08'
    assert got == want + b"\x00\x00\x80?\x00\x00\x00@"
