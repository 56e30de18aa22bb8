"""ReaderReadUpToV2 whose keys nothing takes: keys are not formatted, and stay exact.

A plan rewrite (ops/reader_ops.py `_skip_unused_keys`) runs the keyless kernel where
only the values are used; records it puts back after a failed step keep what makes
their keys, so a later read that does fetch keys gets TF's b"<file>:<offset>".
"""

import pytest
from test_record_scanner import frame, reference

import asyncflow as af
from asyncflow import errors
from asyncflow.ops import data_flow_ops, reader_ops


@pytest.fixture
def formatted(monkeypatch):
    """The number of keys formatted so far (a one-element list)."""
    count = [0]
    real = reader_ops._LazyKeys.format

    def format_keys(self):
        count[0] += len(self.offsets)
        return real(self)

    monkeypatch.setattr(reader_ops._LazyKeys, "format", format_keys)
    return count


def _file(tmp_path, n=40):
    recs = [bytes([i]) * (i % 7 + 20) for i in range(n)]
    raw = frame(recs)
    path = tmp_path / "k%.tfrecord"  # a "%" in the name must not upset the key format
    path.write_bytes(raw)
    return str(path), recs, reference(raw)[1]


def _queue(path):
    q = data_flow_ops.FIFOQueue(4, af.string)
    return q, [q.enqueue(path), q.close()]


def test_values_alone_format_no_key(tmp_path, formatted):
    path, recs, _ = _file(tmp_path)
    with af.Graph().as_default():
        q, setup = _queue(path)
        keys, values = reader_ops.TFRecordReader().read_up_to(q, 16)
        with af.Session() as sess:
            for op in setup:  # enqueue, then close
                sess.run(op)
            got = []
            with pytest.raises(errors.OutOfRangeError):
                while True:
                    v = sess.run(values)
                    assert v.dtype == object and all(type(x) is bytes for x in v)
                    got += v.tolist()
    assert got == recs
    assert formatted[0] == 0


def test_keys_are_exact_when_fetched_after_keyless_reads_and_put_backs(tmp_path, formatted):
    path, recs, offs = _file(tmp_path)
    want_keys = [b"%s:%d" % (path.encode(), o) for o in offs]
    with af.Graph().as_default():
        q, setup = _queue(path)
        reader = reader_ops.TFRecordReader()
        keys, values = reader.read_up_to(q, 5)
        bad = af.placeholder(af.bool, [])
        with af.control_dependencies([values]):
            check = af.Assert(bad, ["fail after reading"])
        with af.control_dependencies([check]):
            failing_values = af.identity(values)
        with af.Session() as sess:
            for op in setup:  # enqueue, then close
                sess.run(op)
            assert sess.run(values).tolist() == recs[:5]  # keyless
            assert formatted[0] == 0
            with pytest.raises(errors.InvalidArgumentError):
                sess.run(failing_values, {bad: False})  # reads 5..9 keyless, puts them back
            k, v = sess.run([keys, values])  # the put-back records, with their keys
            assert (k.tolist(), v.tolist()) == (want_keys[5:10], recs[5:10])
            k, v = sess.run([keys, values])
            assert (k.tolist(), v.tolist()) == (want_keys[10:15], recs[10:15])


def test_keys_consumed_by_an_op_are_built(tmp_path):
    path, recs, offs = _file(tmp_path, 12)
    with af.Graph().as_default():
        q, setup = _queue(path)
        keys, values = reader_ops.TFRecordReader().read_up_to(q, 12)
        n_keys = af.size(keys)
        with af.Session() as sess:
            for op in setup:  # enqueue, then close
                sess.run(op)
            assert sess.run([n_keys, values])[0] == 12


def test_read_up_to_fetching_both_gives_tf_keys(tmp_path):
    path, recs, offs = _file(tmp_path, 30)
    with af.Graph().as_default():
        q, setup = _queue(path)
        keys, values = reader_ops.TFRecordReader().read_up_to(q, 7)
        with af.Session() as sess:
            for op in setup:  # enqueue, then close
                sess.run(op)
            got_k, got_v = [], []
            with pytest.raises(errors.OutOfRangeError):
                while True:
                    k, v = sess.run([keys, values])
                    assert k.dtype == object and len(k) == len(v)
                    got_k += k.tolist()
                    got_v += v.tolist()
    assert got_v == recs
    assert got_k == [b"%s:%d" % (path.encode(), o) for o in offs]
