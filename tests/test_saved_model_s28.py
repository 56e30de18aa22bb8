"""TF 2 SavedModels with lookup tables and assets, as TF 2.21 writes them, through
`tf.compat.v1.saved_model.load_v2` in graph mode: the restored resources' creator and
initializer functions, the assets' paths, the constants the functions captured.
Expected values: tests/fixtures/saved_model_s28/expected.json, printed by TF 2.21's
load_v2 on the same directories (tests/fixtures/record_saved_model_s28_tf.py)."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "saved_model_s28"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


def test_text_file_table_and_asset(tmp_path):
    # A copy elsewhere: the asset's path follows the SavedModel's directory.
    where = tmp_path / "moved"
    shutil.copytree(FIXTURES / "text_table", where)
    want = EXPECTED["text_table"]
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(str(where))
        sig = m.signatures["serving_default"](
            x=tf.constant([[1.0, 1.0]]), s=tf.constant(["b", "zz", "c", "a"])
        )
        direct = m.f(tf.constant([[1.0, 2.0], [0.0, 1.0]]), tf.constant(["c"]))
        assert (
            len(tf.get_collection(tf.GraphKeys.TABLE_INITIALIZERS)) == want["table_initializers"]
        )
        with tf.Session() as sess:
            sess.run([tf.tables_initializer(), tf.global_variables_initializer()])
            a, b = sess.run([sig, direct])
            path = sess.run(m.table._initializer._filename.asset_path).decode()
    assert {k: v.tolist() for k, v in a.items()} == want["signature"]
    assert {k: v.tolist() for k, v in b.items()} == want["direct"]
    assert path == str(where) + want["asset_suffix"]


def test_key_value_and_vocabulary_tables():
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(str(FIXTURES / "kv_table"))
        r = m.signatures["serving_default"](s=tf.constant(["x", "y", "q", "b", "nope"]))
        with tf.Session() as sess:
            sess.run(tf.tables_initializer())
            got = sess.run(r)
    want = {k: v for k, v in EXPECTED["kv_table"].items() if k != "fingerprint_tf"}
    assert {k: v.tolist() for k, v in got.items()} == want


def test_table_not_initialized_fails_as_tf():
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(str(FIXTURES / "kv_table"))
        r = m.signatures["serving_default"](s=tf.constant(["x"]))
        with tf.Session() as sess, pytest.raises(tf.errors.FailedPreconditionError):
            sess.run(r)


def test_tables_through_the_tf1_loader():
    with tf.Session(graph=tf.Graph()) as sess:
        mg = tf.saved_model.loader.load(sess, ["serve"], str(FIXTURES / "text_table"))
        sig = mg.signature_def["serving_default"]
        got = sess.run(
            {k: v.name for k, v in sig.outputs.items()},
            {sig.inputs["x"].name: [[1.0, 1.0]], sig.inputs["s"].name: ["b", "zz", "c", "a"]},
        )
    want = EXPECTED["text_table"]["signature"]
    assert got["ids"].tolist() == want["ids"]
    np.testing.assert_array_equal(got["y"], want["y"])


# -- asyncflow's save: tables and assets -----------------------------------------------
OURS = EXPECTED["asyncflow_saved"]  # what TF 2.21 computed on the directory we wrote
X, S = [[1.0, 1.0], [2.0, 0.0]], ["b", "zz", "c", "a", "q"]


def _save(tmp_path):
    from tests.fixtures import saved_model_s28_cases as cases

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("a\nb\nc\n")
    out = tmp_path / "model"
    cases.save(str(out), str(vocab))
    vocab.unlink()  # the SavedModel holds its own copy
    return out


def test_save_tables_then_load_v2_gives_tfs_values(tmp_path):
    out = _save(tmp_path)
    assert sorted(p.name for p in (out / "assets").iterdir()) == ["vocab.txt"]
    assert (out / "assets" / "vocab.txt").read_text() == "a\nb\nc\n"
    with tf.Graph().as_default():
        m = tf.saved_model.load_v2(str(out))
        sig = m.signatures["serving_default"](x=tf.constant(X), s=tf.constant(S))
        direct = m.f(tf.constant(X), tf.constant(S))
        with tf.Session() as sess:
            sess.run([tf.tables_initializer(), tf.global_variables_initializer()])
            a, b = sess.run([sig, direct])
    assert {k: v.tolist() for k, v in a.items()} == OURS["graph_signature"]
    assert {k: v.tolist() for k, v in b.items()} == OURS["eager_f"]


def test_save_tables_serves_through_the_tf1_loader(tmp_path):
    out = _save(tmp_path)
    with tf.Session(graph=tf.Graph()) as sess:
        mg = tf.saved_model.loader.load(sess, ["serve"], str(out))
        sig = mg.signature_def["serving_default"]
        got = sess.run(
            {k: v.name for k, v in sig.outputs.items()},
            {sig.inputs["x"].name: X, sig.inputs["s"].name: S},
        )
    assert {k: v.tolist() for k, v in got.items()} == OURS["tf1_loader"]
    assert [a.filename for a in mg.asset_file_def] == OURS["asset_file_def"]


def test_signature_arguments_in_keyword_order(tmp_path):
    # TF's loaders flatten a signature's keyword arguments sorted: the wrapper takes
    # "s" before "x" although the function takes x first.
    from asyncflow.protos import saved_model_pb2

    out = _save(tmp_path)
    sm = saved_model_pb2.SavedModel.FromString((out / "saved_model.pb").read_bytes())
    og = sm.meta_graphs[0].object_graph_def
    wrappers = [n.bare_concrete_function for n in og.nodes if n.HasField("bare_concrete_function")]
    assert [list(w.argument_keywords) for w in wrappers] == [["s", "x"]]
    lib = {f.signature.name: f for f in sm.meta_graphs[0].graph_def.library.function}
    fdef = lib[wrappers[0].concrete_function_name]
    assert [a.type for a in fdef.signature.input_arg[:2]] == [
        tf.string.as_datatype_enum,
        tf.float32.as_datatype_enum,
    ]


def test_save_missing_vocabulary_file_is_an_error(tmp_path):
    vocab = tmp_path / "gone.txt"
    with tf.Graph().as_default():
        m = tf.Module()
        m.table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(str(vocab), tf.string, -2, tf.int64, -1),
            -1,
        )
        # (TF 2.21 writes the model without the file; it then fails to load)
        with tf.Session(), pytest.raises(tf.errors.NotFoundError, match="gone.txt does not exist"):
            tf.saved_model.save(m, str(tmp_path / "m"))


# -- fingerprint.pb ---------------------------------------------------------------------
def _our_hashes(directory):
    from asyncflow.protos import saved_model_pb2
    from asyncflow.saved_model import fingerprinting

    raw = (directory / "saved_model.pb").read_bytes()
    sm = saved_model_pb2.SavedModel.FromString(raw)
    return fingerprinting.create_fingerprint_def(sm, str(directory))


_HASHES = (
    "saved_model_checksum",
    "graph_def_program_hash",
    "signature_def_hash",
    "saved_object_graph_hash",
    "checkpoint_hash",
)


@pytest.mark.parametrize("name", ["text_table", "kv_table"])
def test_fingerprint_hashes_of_tfs_models_are_tfs(name):
    want = EXPECTED[name]["fingerprint_tf"]
    fp = _our_hashes(FIXTURES / name)
    for field in (
        "saved_model_checksum",
        "graph_def_program_hash",
        "signature_def_hash",
        "saved_object_graph_hash",
        "checkpoint_hash",
    ):
        assert getattr(fp, field) == want[field], field


def test_save_writes_the_fingerprint_tf_computes(tmp_path):
    from asyncflow.protos.fingerprint_pb2 import FingerprintDef

    out = _save(tmp_path)
    fp = FingerprintDef.FromString((out / "fingerprint.pb").read_bytes())
    tf_fp = OURS["fingerprint_tf"]  # TF's own fingerprinting of the directory we wrote
    assert {f: getattr(fp, f) for f in _HASHES} == {f: tf_fp[f] for f in _HASHES}
    # TF's read_fingerprint read the file we wrote (producer 4, as TF 2.21's).
    assert OURS["fingerprint_read"] == [
        fp.signature_def_hash,
        fp.saved_object_graph_hash,
        fp.checkpoint_hash,
        fp.version.producer,
    ]
    assert len(fp.uuid) >= 20 and fp.uuid.isdigit()


def test_hashes_serialise_maps_in_cpp_key_order():
    # Python's protobuf orders a map's keys otherwise than C++ ("config_proto" before
    # "config", integer keys descending); TF hashes C++'s bytes.  The hashes are what TF
    # 2.21's CreateFingerprintDef gave for these two SavedModels.
    from asyncflow.protos import saved_model_pb2
    from asyncflow.saved_model import fingerprinting

    def hashes(sm):
        fp = fingerprinting.create_fingerprint_def(sm, "/nonexistent")
        return fp.saved_model_checksum, fp.graph_def_program_hash

    sm = saved_model_pb2.SavedModel()
    fn = sm.meta_graphs.add().graph_def.library.function.add()
    fn.signature.name = "f_1"
    fn.arg_attr[0].attr["a"].i = 1
    fn.arg_attr[1].attr["a"].i = 1
    assert hashes(sm) == (16793021690695357061, 1826355931633539578)
    sm = saved_model_pb2.SavedModel()
    node = sm.meta_graphs.add().graph_def.node.add()
    node.name, node.op = "n", "NoOp"
    for key in ("config_proto", "config", "aa", "a"):
        node.attr[key].s = b""
    assert hashes(sm) == (15544429282672033707, 1006237206168255570)


def test_fingerprint_cat64_chain():
    from asyncflow.saved_model.fingerprinting import fingerprint_cat64

    # Order matters, and the result stays 64-bit.
    a, b = fingerprint_cat64(1, 2), fingerprint_cat64(2, 1)
    assert a != b and 0 <= a < 2**64 and 0 <= b < 2**64


def test_save_an_anonymous_table(tmp_path):
    # Its handle op has no container or shared name: the saved creator makes an
    # anonymous table too, and the saved graph's node names none.
    from asyncflow.protos import saved_model_pb2

    with tf.Graph().as_default():
        m = tf.Module()
        m.kv = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2], value_dtype=tf.int64),
            -1,
            experimental_is_anonymous=True,
        )
        m.f = tf.function(
            lambda s: m.kv.lookup(s), input_signature=[tf.TensorSpec([None], tf.string)]
        )
        with tf.Session():
            tf.saved_model.save(m, str(tmp_path / "m"))
    sm = saved_model_pb2.SavedModel.FromString((tmp_path / "m" / "saved_model.pb").read_bytes())
    mg = sm.meta_graphs[0]
    kinds = [n.WhichOneof("kind") for n in mg.object_graph_def.nodes]
    assert kinds.count("resource") == 1
    ops_in = {f.signature.name: [n.op for n in f.node_def] for f in mg.graph_def.library.function}
    creators = [v for k, v in ops_in.items() if "_create_resource" in k]
    assert [ops[0] for ops in creators] == ["AnonymousHashTable"]
    (table,) = [n for n in mg.graph_def.node if n.op == "AnonymousHashTable"]
    assert "shared_name" not in table.attr
