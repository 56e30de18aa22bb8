"""tf.lookup tables against TF 2.21's recorded values, errors and GraphDef
(tests/fixtures/record_lookup_tf.py -> lookup_tf.json, lookup_graph.pb)."""

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import lookup_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "lookup_tf.json").read_text())


def plain(v):
    if isinstance(v, af.SparseTensorValue):
        return {"sparse": [plain(v.indices), plain(v.values), plain(v.dense_shape)]}
    if isinstance(v, tuple | list):
        return [plain(x) for x in v]
    a = np.asarray(v)
    if a.dtype.kind == "S":
        a = a.astype(object)
    if a.dtype == object:
        return {"dtype": "string", "shape": list(a.shape),
                "value": [b.decode("latin-1") for b in a.reshape(-1)]}  # fmt: skip
    return {"dtype": a.dtype.name, "shape": list(a.shape), "value": a.reshape(-1).tolist()}


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_case_matches_tf(graph, name, tmp_path):
    cases.write_files(tmp_path)
    t = cases.CASES[name](af, str(tmp_path))
    with af.Session(graph=graph) as s:
        if name in TF["values"]:
            s.run(af.tables_initializer())
            assert plain(s.run(t)) == TF["values"][name]
            return
        want = TF["errors"][name]
        # (the recorder's temporary directory is in TF's message; ours is tmp_path)
        message = want["message"].split("/tmp/")[0]
        with pytest.raises(getattr(errors, want["error"])) as info:
            s.run(af.tables_initializer())
            s.run(t)
        assert message in info.value.message
        if "kv.txt" in want["message"]:
            assert want["message"].split("kv.txt", 1)[1] in info.value.message


def test_lookup_before_initializing(sess):
    t = cases.CASES["static_str"](af, ".")
    want = TF["errors"]["not_initialized"]
    with pytest.raises(errors.FailedPreconditionError, match=want["message"]):
        sess.run(t)


def test_initializing_again_changes_nothing(sess):
    table = af.lookup.StaticHashTable(
        af.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2], value_dtype=af.int64), -1
    )
    sess.run(af.tables_initializer())
    sess.run(table.initializer)  # TF: no error, the same table
    assert sess.run(table.size()) == 2
    assert af.get_collection(af.GraphKeys.TABLE_INITIALIZERS) == [table.initializer]


def test_mutable_tables_match_tf(sess):
    want = TF["mutable"]
    m = af.lookup.experimental.MutableHashTable(af.string, af.int64, -1)
    ins = m.insert(af.constant(["x", "y", "z"]), af.constant([3, 4, 5], af.int64))
    upd = m.insert(af.constant(["x"]), af.constant([30], af.int64))
    rem = m.remove(af.constant(["y", "nope"]))
    look = m.lookup(af.constant([["x", "y"], ["z", "w"]]))
    bad = m.insert(af.constant(["x", "y"]), af.constant([3], af.int64))
    assert plain(sess.run(m.size())) == want["empty_size"]
    sess.run(ins)
    assert plain(sess.run([look, m.size()])) == want["after_insert"]
    sess.run(upd)
    sess.run(rem)
    assert plain(sess.run([look, m.size()])) == want["after_update_remove"]
    k, v = sess.run(m.export())
    assert sorted(zip([x.decode() for x in k.tolist()], v.tolist())) == [
        tuple(p) for p in want["export"]
    ]
    with pytest.raises(
        errors.InvalidArgumentError, match=want["bad_insert"]["message"].replace("[", r"\[")
    ):
        sess.run(bad)
    vm = af.lookup.experimental.MutableHashTable(af.int64, af.float32, [0.0, -1.0])
    sess.run(vm.insert(af.constant([1, 2], af.int64), af.constant([[1.0, 2.0], [3.0, 4.0]])))
    got = sess.run(vm.lookup(af.constant([[1, 5], [2, 2]], af.int64)))
    assert plain(got) == want["vector_values"]


def test_tf_graph_def_with_a_table_imports_and_runs(graph):
    gd = af.GraphDef.FromString((FIXTURES / "lookup_graph.pb").read_bytes())
    af.import_graph_def(gd, name="")
    with af.Session(graph=graph) as s:
        s.run("init_tables")
        ids, n = s.run(["ids:0", "n:0"], {"words_in:0": [b"c", b"x", b"a"]})
    assert ids.tolist() == [9, -1, 7] and n == 3


def test_build_time_checks(graph):
    table = af.lookup.StaticHashTable(
        af.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2], value_dtype=af.int64), -1
    )
    with pytest.raises(TypeError, match="keys"):
        table.lookup(af.constant([1, 2]))
    with pytest.raises(ValueError):
        af.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2, 3])
    with pytest.raises(ValueError):
        af.lookup.StaticVocabularyTable(
            af.lookup.KeyValueTensorInitializer(["a"], af.constant([0], af.int64)), 0
        )
    static = graph.get_operation_by_name(table.name)
    assert static.type == "HashTableV2"
    with pytest.raises(errors.UnimplementedError, match="^Insert not supported by Initializable"):
        with af.Session(graph=graph) as s:
            s.run(af.tables_initializer())
            s.run(
                af.graph.apply_op(
                    "LookupTableInsertV2",
                    [table.resource_handle, af.constant(["q"]), af.constant([1], af.int64)],
                    {"Tin": af.string, "Tout": af.int64},
                )
            )


def test_monitored_session_initializes_tables(graph):
    table = af.lookup.StaticHashTable(
        af.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2], value_dtype=af.int64), -1
    )
    ids = table.lookup(af.constant(["b", "z"]))
    af.train.get_or_create_global_step()
    with af.train.MonitoredTrainingSession() as s:  # (its Scaffold's local_init_op)
        assert s.run(ids).tolist() == [2, -1]
