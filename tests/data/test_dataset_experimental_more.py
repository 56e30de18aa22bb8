"""SqlDataset (sqlite through Python's sqlite3), pad_to_cardinality, dense_to_ragged_batch,
to_variant / from_variant, make_saveable_from_iterator, get_model_proto and ServiceOptions
against TF 2.21's recorded elements and errors
(tests/fixtures/record_data_experimental_more_tf.py)."""

import json
import os
import pathlib
import sys

import pytest

import asyncflow as af
from asyncflow import errors

pytestmark = pytest.mark.timeout(120)

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import data_experimental_more_cases as cases  # noqa: E402
from data_experimental_more_cases import plain  # noqa: E402

TF = json.loads((FIXTURES / "data_experimental_more_tf.json").read_text())
X = af.data.experimental


def drain(sess, ds, limit=100):
    nxt = ds.make_one_shot_iterator().get_next()
    elems, end = [], None
    while len(elems) < limit:
        try:
            elems.append(plain(sess.run(nxt)))
        except errors.OutOfRangeError:
            break
        except errors.OpError as e:
            end = {"error": type(e).__name__, "message": e.message}
            break
    return {"elements": elems, "end": end}


def _same(got, want):
    assert got["elements"] == want["elements"]
    if want["end"] is None or got["end"] is None:
        assert got["end"] == want["end"]
    else:
        assert got["end"]["error"] == want["end"]["error"]
        assert want["end"]["message"] in got["end"]["message"]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sql") / "t.db")
    cases.make_db(path)
    return path


@pytest.mark.parametrize("name", sorted(cases.SQL))
def test_sql_matches_tf(sess, db, name):
    _same(drain(sess, cases.SQL[name](af, db)), TF["sql"][name])


def test_sql_single_type(sess, db):
    ds = cases.single_type(af, db)
    assert ds.output_types == af.int64
    _same(drain(sess, ds), TF["sql"]["single_type"])


def test_sql_creates_a_missing_database(sess, tmp_path):
    new = str(tmp_path / "created.db")
    got = drain(sess, X.SqlDataset("sqlite", new, "select 7", (af.int64,)))
    want = TF["sql"]["missing_file"]
    _same(got, want)
    assert os.path.exists(new) == want["created"]


def test_sql_many_rows_two_passes(sess, tmp_path):
    """More rows than one fetch, each pass a fresh query."""
    import sqlite3

    path = str(tmp_path / "big.db")
    c = sqlite3.connect(path)
    c.execute("create table n (i integer, s text)")
    c.executemany("insert into n values (?, ?)", [(i, f"r{i}") for i in range(1000)])
    c.commit()
    c.close()
    ds = X.SqlDataset("sqlite", path, "select i, s from n order by i", (af.int64, af.string))
    it = ds.batch(400).make_initializable_iterator()
    nxt = it.get_next()
    for _ in range(2):
        sess.run(it.initializer)
        got = [sess.run(nxt) for _ in range(3)]
        assert [len(g[0]) for g in got] == [400, 400, 200]
        assert got[2][0][-1] == 999 and got[2][1][-1] == b"r999"


@pytest.mark.parametrize("name", sorted(cases.RAGGED))
def test_dense_to_ragged_batch_matches_tf(sess, name):
    ds = cases.RAGGED[name](af)
    want = TF["ragged"][name]
    got = cases.describe(af, ds)
    assert got["shapes"] == want["shapes"]
    # (TF 2.21 gives the component's RaggedTensorSpec as its output class; the class here)
    assert got["classes"] == [
        c.replace("RaggedTensorSpec", "RaggedTensor") for c in want["classes"]
    ]
    _same(drain(sess, ds), want)


def test_ragged_elements_through_map(sess):
    """A ragged component goes into a map function as a RaggedTensor and back out."""
    ds = cases.RAGGED["vectors"](af).map(lambda r: (r, r.row_splits))
    nxt = ds.make_one_shot_iterator().get_next()
    rt, splits = sess.run(nxt)
    assert rt.to_list() == [[], [0], [0, 1]]
    assert list(splits) == [0, 0, 1, 3]


@pytest.mark.parametrize("name", sorted(cases.PADDED))
def test_pad_to_cardinality_matches_tf(sess, name):
    _same(drain(sess, cases.PADDED[name](af)), TF["datasets"][name])


def test_pad_to_cardinality_needs_dicts():
    with pytest.raises(ValueError) as e:
        af.data.Dataset.range(3).apply(X.pad_to_cardinality(4))
    assert str(e.value) == TF["errors"]["pad_not_dict"]


def test_variant_round_trip(sess):
    _same(drain(sess, cases.variant_round_trip(af)), TF["datasets"]["variant_round_trip"])


def test_get_model_proto_graph_mode():
    it = af.data.Dataset.range(3).make_one_shot_iterator()
    with pytest.raises(ValueError) as e:
        X.get_model_proto(it)
    assert str(e.value) == TF["errors"]["get_model_proto"]


def test_service_options():
    o = X.ServiceOptions()
    assert repr(o.pinned) == TF["errors"]["service_pinned_default"]
    with pytest.raises(TypeError) as e:
        o.pinned = 3
    assert str(e.value) == TF["errors"]["service_pinned_int"]
    o.pinned = True
    opts = af.data.Options()
    opts.experimental_service.pinned = True
    ds = af.data.Dataset.range(2).with_options(opts)
    assert ds.options().experimental_service.pinned is True


@pytest.mark.parametrize("name", sorted(cases.ITERATOR_PIPELINES))
def test_iterator_saved_and_restored_as_tf(tmp_path, name):
    """A Saver saves the iterator's position; restoring it continues from there."""
    build = cases.ITERATOR_PIPELINES[name]
    got = cases.iterator_state_run(af, build, str(tmp_path))
    assert got == TF["iterator_state"][name]


def test_iterator_restore_needs_initialization(sess, tmp_path):
    it = af.data.Dataset.range(3).make_initializable_iterator()
    saveable = X.make_saveable_from_iterator(it)
    saver = af.train.Saver([saveable])
    with pytest.raises(errors.FailedPreconditionError):
        saver.save(sess, str(tmp_path / "it"))
