"""TF1's ref-typed data-flow ops (ops/legacy_dataflow_ops.py) in TF-written GraphDefs.

Each case of tests/fixtures/legacy_s26/ is a GraphDef TF 2.21 wrote (queues, readers,
lookup tables, accumulators, tensor arrays under their first op types) and the results
TF 2.21 gave for a list of session steps (recorded by
tests/fixtures/record_legacy_s26_tf.py); asyncflow imports the GraphDef and runs the
same steps in one session.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors

FIX = Path(__file__).parent / "fixtures" / "legacy_s26"
CASES = sorted(p.stem for p in FIX.glob("*.json"))


def _decode(v):
    if v is None:
        return None
    shape = tuple(v["shape"])
    if v["dtype"] == "string":
        flat = [base64.b64decode(x) for x in v["b64"]]
        return np.array(flat, dtype=object).reshape(shape)
    return np.array(v["value"], dtype=v["dtype"]).reshape(shape)


def _relative(v):
    """Paths under the fixture directory as TF's recording wrote them ($FIX/...)."""
    a = np.asarray(v)
    if a.dtype == object or a.dtype.kind == "S":
        fix = str(FIX).encode()
        flat = [x.replace(fix, b"$FIX") for x in a.reshape(-1).tolist()]
        return np.array(flat, dtype=object).reshape(a.shape)
    return a


def _feed(v):
    if isinstance(v, list) and v and isinstance(v[0], str):
        return np.array([x.replace("$FIX", str(FIX)) for x in v], dtype=object)
    return v.replace("$FIX", str(FIX)) if isinstance(v, str) else v


def _unnumbered(msg: str) -> str:
    """TF names an unshared queue or tensor array with a process-wide counter ('_0_q',
    'ta_1'); asyncflow names the queue after its op ('q'): neither is compared."""
    return re.sub(r"_\d+", "_N", re.sub(r"'_\d+_", "'", msg))


def _graph_def(case: str):
    gd = tf.GraphDef()
    gd.ParseFromString((FIX / f"{case}.pb").read_bytes())
    return gd


@pytest.mark.parametrize("case", CASES)
def test_tf_written_graphdef_runs_as_in_tf(case):
    expected = json.loads((FIX / f"{case}.json").read_text())
    with tf.Graph().as_default() as g:
        if isinstance(expected, dict):  # TF refused the GraphDef
            cls = getattr(errors, expected["import_error"])
            with pytest.raises(cls) as info:
                tf.import_graph_def(_graph_def(case), name="")
            assert (
                str(info.value.message if hasattr(info.value, "message") else info.value)
                == (expected["message"])
            )
            return
        tf.import_graph_def(_graph_def(case), name="")
        with tf.Session(graph=g) as sess:
            for k, step in enumerate(expected):
                feeds = {key: _feed(v) for key, v in step["feeds"].items()}
                where = f"{case} step {k} {step['fetches']}"
                if "error" in step:
                    with pytest.raises(getattr(errors, step["error"])) as info:
                        sess.run(step["fetches"], feeds)
                    got = _unnumbered(info.value.message.split("\n")[0])
                    assert got == _unnumbered(step["message"]), where
                    continue
                values = sess.run(step["fetches"], feeds)
                for got, want in zip(values, step["values"]):
                    want = _decode(want)
                    if want is None:
                        assert got is None, where
                        continue
                    got = _relative(got)
                    assert got.shape == want.shape, where
                    assert got.dtype == want.dtype or want.dtype == object, where
                    np.testing.assert_array_equal(got, want, err_msg=where)


# Recorded from TF 2.21: building a spelling removed from the GraphDef format.
@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda: tf.raw_ops.TensorArray(size=3, dtype=tf.float32),
            "Op TensorArray is not available in GraphDef version 2474. It has been removed "
            "in version 16. Use TensorArrayV3.",
        ),
        (
            lambda: tf.raw_ops.TensorArrayV2(size=3, dtype=tf.float32),
            "Op TensorArrayV2 is not available in GraphDef version 2474. It has been removed "
            "in version 26. Use TensorArrayV3.",
        ),
        (
            lambda: tf.raw_ops.TextLineReader(skip_header_lines=1),
            "Op TextLineReader is not available in GraphDef version 2474. It has been "
            "removed in version 26. Use TextLineReaderV2.",
        ),
    ],
)
def test_removed_spellings_refuse_to_build(build, message):
    with tf.Graph().as_default():
        with pytest.raises(NotImplementedError) as e:
            build()
        assert str(e.value) == message


def test_ref_handles_built_now():
    """TF 2.21 still builds the ref-typed queue ops: a string_ref handle of shape [2]."""
    with tf.Graph().as_default():
        q = tf.raw_ops.FIFOQueue(component_types=[tf.float32])
        assert (q.dtype.name, q.shape.as_list()) == ("string_ref", [2])
        enq = tf.raw_ops.QueueEnqueue(handle=q, components=[1.0])
        deq = tf.raw_ops.QueueDequeue(handle=q, component_types=[tf.float32])
        size = tf.raw_ops.QueueSize(handle=q)
        with tf.Session() as sess:
            sess.run(enq)
            sess.run(enq)
            assert sess.run(size) == 2
            assert sess.run(deq) == [np.float32(1.0)]


async def test_staging_gets_wait_for_puts_and_puts_for_room():
    """An Unstage on an empty area, a MapUnstage of a missing key and a Stage into a full
    area wait (the loop reaches quiescence with them pending) until another step acts."""
    from _testing_ops import settle

    with tf.Graph().as_default():
        x = tf.placeholder(tf.int32, [])
        key = tf.placeholder(tf.int64, [])
        area = {"shared_name": "a", "capacity": 1, "dtypes": [tf.int32]}
        put = tf.raw_ops.Stage(values=[x], shared_name="a", capacity=1)
        get = tf.raw_ops.Unstage(**area)
        m = {"shared_name": "m", "dtypes": [tf.int32]}
        mput = tf.raw_ops.OrderedMapStage(key=key, indices=[0], values=[x], **m)
        mget = tf.raw_ops.OrderedMapUnstage(key=key, indices=[0], **m)
        async with tf.Session() as s:
            t = asyncio.create_task(s.arun(get))
            await settle()
            assert not t.done()
            await s.arun(put, {x: 1})
            assert await t == [1]
            await s.arun(put, {x: 2})
            t = asyncio.create_task(s.arun(put, {x: 3}))  # capacity 1: waits
            await settle()
            assert not t.done()
            assert await s.arun(get) == [2]
            await t
            assert await s.arun(get) == [3]
            t = asyncio.create_task(s.arun(mget, {key: 5}))
            await s.arun(mput, {key: 4, x: 40})
            await settle()
            assert not t.done()
            await s.arun(mput, {key: 5, x: 50})
            assert await t == [50]


def test_dense_hash_table_as_tf():
    """tf.lookup.experimental.DenseHashTable; values recorded from TF 2.21.  The export
    holds TF's entries and bucket count (TF's bucket positions follow its hash)."""
    dense = tf.lookup.experimental.DenseHashTable
    with tf.Graph().as_default():
        t = dense(tf.int64, tf.float32, -1.0, empty_key=0, deleted_key=-1, initial_num_buckets=8)
        h = t.resource_handle.op
        assert (h.type, h.name, sorted(i.op.name for i in h.inputs)) == (
            "MutableDenseHashTableV2",
            "MutableDenseHashTable",
            ["deleted_key", "empty_key"],
        )
        ins = t.insert(tf.constant([5, 7, 9], tf.int64), [0.5, 0.7, 0.9])
        look = t.lookup(tf.constant([5, 6, 9], tf.int64))
        erase = t.erase(tf.constant([7, 8], tf.int64))
        keys, values = t.export()
        grow = t.insert(tf.range(10, 20, dtype=tf.int64), tf.range(10, 20, dtype=tf.float32))
        v = dense(tf.string, tf.int32, [-1, -2], empty_key="", deleted_key="$")
        vins = v.insert(["a", "b"], [[1, 2], [3, 4]])
        with tf.Session() as s:
            assert s.run(t.size()) == 0
            s.run(ins)
            np.testing.assert_array_equal(s.run(look), np.float32([0.5, -1, 0.9]))
            k, vals = s.run([keys, values])
            assert (k.shape, vals.shape) == ((8, 1), (8, 1))
            pairs = sorted(zip(k[:, 0].tolist(), vals[:, 0].tolist()))
            assert pairs == [(0, 0.0)] * 5 + [(5, 0.5), (7, np.float32(0.7)), (9, np.float32(0.9))]
            s.run(erase)
            assert s.run(t.size()) == 2
            s.run(grow)
            assert (s.run(keys).shape, s.run(t.size())) == ((16, 1), 12)
            for bad, which in ((0, "empty_key"), (-1, "deleted_key")):
                with pytest.raises(errors.InvalidArgumentError) as e:
                    s.run(t.insert(tf.constant([bad], tf.int64), [1.0]))
                assert e.value.message.split("\n")[0] == (
                    f"Using the {which} as a table key is not allowed"
                )
            with pytest.raises(errors.InvalidArgumentError, match="the empty_key as a table"):
                s.run(t.lookup(tf.constant([0], tf.int64)))
            s.run(vins)
            assert s.run(v.lookup(["b", "c"])).tolist() == [[3, 4], [-1, -2]]
            k, vals = s.run(v.export())
            assert (k.shape, vals.shape) == ((131072, 1), (131072, 2))


def test_record_input_yields_each_record_once_per_epoch(tmp_path):
    """Recorded from TF 2.21 (2 files of 3 records, batch_size=4): each run gives 4
    records, every 6 in a row an epoch holding each record once (TF's order within an
    epoch varies from run to run); no file matching: NotFoundError."""
    for i in range(2):
        with tf.python_io.TFRecordWriter(str(tmp_path / f"f{i}.rec")) as w:
            for j in range(3):
                w.write(f"f{i}r{j}".encode())
    with tf.Graph().as_default():
        r = tf.raw_ops.RecordInput(
            file_pattern=str(tmp_path / "*.rec"), batch_size=4, file_buffer_size=10
        )
        none = tf.raw_ops.RecordInput(file_pattern=str(tmp_path / "none*.rec"), batch_size=4)
        assert r.shape.ndims is None
        with tf.Session() as s:
            got = [x for _ in range(3) for x in s.run(r).tolist()]
            everything = sorted(f"f{i}r{j}".encode() for i in range(2) for j in range(3))
            assert sorted(got[:6]) == everything and sorted(got[6:12]) == everything
            with pytest.raises(errors.NotFoundError) as e:
                s.run(none)
            assert e.value.message.split("\n")[0] == f"Found no files at {tmp_path}/none*.rec"


def test_staging_area_classes_as_tf():
    """data_flow_ops.StagingArea and MapStagingArea: op names, structures and values
    recorded from TF 2.21 (tensorflow.python.ops.data_flow_ops)."""
    from asyncflow.ops.data_flow_ops import MapStagingArea, StagingArea

    with tf.Graph().as_default():
        a = StagingArea([tf.float32, tf.int32], shapes=[[2], []], capacity=2)
        assert (a.name, a.names, a.capacity, a.memory_limit) == ("StagingArea", None, 2, 0)
        put = a.put([tf.constant([1.0, 2.0]), tf.constant(3)])
        assert (put.type, put.name) == ("Stage", "StagingArea_put")
        got = a.get()
        assert [t.name for t in got] == ["StagingArea_get:0", "StagingArea_get:1"]
        assert [t.shape.as_list() for t in got] == [[2], []]
        peek = a.peek(0)
        size = a.size()
        assert (size.name, a.clear().name) == ("StagingArea_size:0", "StagingArea_clear")
        with pytest.raises(ValueError, match=r"Shapes \(3,\) and \(2,\) are incompatible"):
            a.put([tf.constant([1.0, 2.0, 3.0]), tf.constant(3)])
        named = StagingArea([tf.float32, tf.int32], names=["x", "y"])
        named_put = named.put({"x": tf.constant(1.0), "y": tf.constant(2)})
        named_get = named.get()
        m = MapStagingArea([tf.float32, tf.int32], ordered=True)
        k = tf.constant(3, tf.int64)
        with pytest.raises(ValueError, match="Indices must be supplied"):
            m.put(k, [tf.constant(1.0), tf.constant(2)])
        mput = m.put(k, [tf.constant(1.0), tf.constant(2)], indices=[0, 1])
        assert (mput.type, mput.name) == ("OrderedMapStage", "MapStagingArea_put")
        key, mget = m.get(k)
        key_any, mget_any = m.get()
        mpeek = m.peek(k)
        assert key is not None and key_any.name == "MapStagingArea_get_nokey:0"
        assert [t.name for t in mpeek] == ["MapStagingArea_pop:0", "MapStagingArea_pop:1"]
        mn = MapStagingArea([tf.float32, tf.int32], names=["x", "y"])
        mn_put = mn.put(k, {"x": tf.constant(1.0)})
        _, mn_get = mn.get(k)
        with tf.Session() as s:
            s.run(put)
            s.run(put)
            assert s.run(size) == 2
            v = s.run(peek)
            assert v[0].tolist() == [1.0, 2.0] and v[1] == 3
            s.run(got)
            assert s.run(size) == 1
            s.run(named_put)
            assert s.run(named_get) == {"x": 1.0, "y": 2}
            s.run(mput)
            s.run(m.put(tf.constant(1, tf.int64), [5.0, tf.constant(6)], indices=[0, 1]))
            assert s.run(m.size()) == 2
            assert s.run(mpeek) == [1.0, 2]
            assert s.run((key_any, mget_any)) == (1, [5.0, 6])
            assert s.run((key, mget)) == (3, [1.0, 2])
            s.run(mn_put)
            assert s.run(mn.incomplete_size()) == 1
            s.run(mn.put(k, {"y": tf.constant(7)}))
            assert s.run(mn_get) == {"x": 1.0, "y": 7}


@pytest.mark.parametrize(
    "case, dtype", [("tensor_arrays", "string_ref"), ("tensor_arrays_v2", "string")]
)
def test_tensor_array_spellings_gradient_fails_as_in_tf(case, dtype):
    """Recorded from TF 2.21: their registered gradients build TensorArrayGradV3 on the old
    handle, which TF refuses (TypeError)."""
    with tf.Graph().as_default() as g:
        tf.import_graph_def(_graph_def(case), name="")
        rd = g.get_tensor_by_name("rd:0")
        x = g.get_operation_by_name("sc").inputs[2]
        with pytest.raises(TypeError) as e:
            tf.gradients(rd, x)
        assert str(e.value) == (
            f"Input 'handle' of 'TensorArrayGradV3' Op has type {dtype} that does not match "
            "expected type of resource."
        )
