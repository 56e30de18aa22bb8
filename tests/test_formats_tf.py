"""Files TensorFlow 2.21 wrote load in asyncflow and give TF's numbers.

Fixtures: tests/fixtures/formats_tf/ (recorded by tests/fixtures/record_formats_tf.py).
The other direction (TF loading asyncflow's files) is checked by
tools/check_asyncflow_files_in_tf.py, recorded in docs/FORMATS.md.
"""

import json
import os

import numpy as np
import pytest
from google.protobuf import text_format

import asyncflow as af

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "formats_tf")
with open(os.path.join(HERE, "expected.json")) as _f:
    EXPECTED = json.load(_f)
X = np.array(EXPECTED["x"], np.float32)


def _path(*parts) -> str:
    return os.path.join(HERE, *parts)


def _read(*parts) -> bytes:
    with open(_path(*parts), "rb") as f:
        return f.read()


@pytest.mark.parametrize("form", ["message", "bytes", "text"])
def test_tf_graph_def_imports_and_computes_tf_values(form):
    if form == "text":
        gd = text_format.Parse(_read("graph.pbtxt").decode(), af.GraphDef())
    elif form == "bytes":
        gd = _read("graph.pb")
    else:
        gd = af.GraphDef.FromString(_read("graph.pb"))
    with af.Graph().as_default() as g:
        y, z = af.import_graph_def(gd, return_elements=["y:0", "z:0"], name="")
        with af.Session(graph=g) as sess:
            yv, zv = sess.run([y, z], {"x:0": X})
    np.testing.assert_allclose(yv, EXPECTED["graph"]["y"], rtol=1e-6)
    np.testing.assert_allclose(zv, EXPECTED["graph"]["z"], rtol=1e-6)


def test_tf_frozen_graph_imports_under_a_scope():
    with af.Graph().as_default() as g:
        x = af.placeholder(af.float32, [None, 3], name="images")
        (probs,) = af.import_graph_def(
            af.GraphDef.FromString(_read("frozen.pb")),
            input_map={"x:0": x},
            return_elements=["probs:0"],
        )
        assert probs.name == "import/probs:0"
        assert not af.global_variables()  # frozen: the variables became constants
        with af.Session(graph=g) as sess:
            got = sess.run(probs, {x: X})
    np.testing.assert_allclose(got, EXPECTED["frozen"]["probs"], rtol=1e-5)


def test_our_graph_def_round_trips_through_bytes_and_text(tmp_path):
    with af.Graph().as_default() as g:
        af.import_graph_def(_read("graph.pb"), name="")
        pb = af.train.write_graph(g, str(tmp_path), "g.pb", as_text=False)
        txt = af.train.write_graph(g.as_graph_def(), str(tmp_path), "g.pbtxt", as_text=True)
    from_binary = af.GraphDef.FromString(open(pb, "rb").read())
    from_text = text_format.Parse(open(txt).read(), af.GraphDef())
    assert from_binary == from_text == g.as_graph_def()
    umask = os.umask(0o022)
    os.umask(umask)
    assert os.stat(pb).st_mode & 0o777 == 0o666 & ~umask  # as TF: the user's umask
    assert sorted(os.listdir(tmp_path)) == ["g.pb", "g.pbtxt"]  # no temporary files left


def test_stale_temporary_files_of_dead_writers_are_removed(tmp_path):
    from asyncflow import checkpoint_format as cf

    dead = tmp_path / "g.pb.tmp999999999-abc"  # no such pid
    dead.write_bytes(b"half")
    mine = tmp_path / f"g.pb.tmp{os.getpid()}-xyz"  # a live writer's: kept
    mine.write_bytes(b"busy")
    with af.Graph().as_default() as g:
        af.constant(1.0, name="c")
        af.train.write_graph(g, str(tmp_path), "g.pb", as_text=False)
    assert sorted(os.listdir(tmp_path)) == sorted(["g.pb", mine.name])
    assert cf.FILE_MODE & 0o600 == 0o600


def test_tf_meta_graph_imports_variables_collections_and_saver():
    with af.Graph().as_default() as g:
        prefix = EXPECTED["checkpoint"]["prefix"]
        saver = af.train.import_meta_graph(_path("ckpt", prefix + ".meta"))
        sd = saver.as_saver_def()
        assert sd.filename_tensor_name == "save/Const:0"
        assert sd.restore_op_name == "save/restore_all"
        names = sorted(v.op.name for v in af.global_variables())
        assert names == sorted(EXPECTED["checkpoint"]["values"])
        trainable = {v.op.name for v in af.trainable_variables()}
        assert trainable == set(names) - {"global_step"}  # TF's default: trainable
        (step,) = af.get_collection(af.GraphKeys.GLOBAL_STEP)
        assert step is next(v for v in af.global_variables() if v.op.name == "global_step")
        assert all(op.type == "AssignAdd" for op in af.get_collection("train_op"))
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            assert sess.run("word:0") == b"hello"
            sess.run(af.get_collection("train_op")[0], {"x:0": X})
            assert sess.run(step) == 1


def test_tf_checkpoint_restores_and_training_continues_as_in_tf():
    prefix = _path("ckpt", EXPECTED["checkpoint"]["prefix"])
    want = EXPECTED["checkpoint"]["values"]
    with af.Graph().as_default() as g:
        saver = af.train.import_meta_graph(prefix + ".meta")
        with af.Session(graph=g) as sess:
            saver.restore(sess, prefix)
            np.testing.assert_array_equal(sess.run("dense/w:0"), np.float32(want["dense/w"]))
            assert sess.run("count:0") == want["count"] and sess.run("word:0") == b"hello"
            assert sess.run("flag:0").tolist() == want["flag"]
            np.testing.assert_array_equal(sess.run("d64:0"), want["d64"])
            loss = sess.run("loss:0", {"x:0": X})
            np.testing.assert_allclose(loss, EXPECTED["checkpoint"]["loss_after"], rtol=1e-6)
            sess.run(af.get_collection("train_op")[0], {"x:0": X})
            loss = sess.run("loss:0", {"x:0": X})
            want_loss = EXPECTED["checkpoint"]["loss_after_one_more_step"]
            np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
            assert sess.run("global_step:0") == want["global_step"] + 1


def test_tf_checkpoint_through_the_reader_apis():
    ckpt_dir = _path("ckpt")
    prefix = os.path.join(ckpt_dir, EXPECTED["checkpoint"]["prefix"])
    assert af.train.latest_checkpoint(ckpt_dir) == prefix
    state = af.train.get_checkpoint_state(ckpt_dir)
    assert list(state.all_model_checkpoint_paths) == [prefix]
    want = EXPECTED["checkpoint"]["values"]
    shapes = dict(af.train.list_variables(ckpt_dir))
    assert shapes == {k: list(np.shape(v)) for k, v in want.items()}
    np.testing.assert_array_equal(af.train.load_variable(ckpt_dir, "dense/b"), want["dense/b"])
    reader = af.train.load_checkpoint(prefix + ".index")
    assert reader.get_variable_to_dtype_map()["d64"] == af.float64
    with pytest.raises(af.errors.NotFoundError):
        reader.get_tensor("nope")


def test_tf_saved_model_loads_and_serves():
    export_dir = _path("saved_model")
    with af.Graph().as_default() as g, af.Session(graph=g) as sess:
        meta = af.saved_model.loader.load(sess, ["serve"], export_dir)
        sig = meta.signature_def["serving_default"]
        assert sig.method_name == "tensorflow/serving/predict"
        y = sess.run(sig.outputs["y"].name, {sig.inputs["x"].name: X})
    np.testing.assert_allclose(y, EXPECTED["saved_model"]["y"], rtol=1e-6)


SEEDS = int(os.environ.get("AF_FUZZ_SEEDS", "3"))


def _fuzzed(raw: bytes, rng):
    raw = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.7 and raw:
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        else:
            del raw[rng.randrange(len(raw) + 1) :]
    return bytes(raw)


@pytest.mark.parametrize("seed", range(SEEDS))
def test_fuzzed_pb_and_meta_files_raise_only_tf_errors(tmp_path, seed):
    import random

    rng = random.Random(seed)
    meta = _read("ckpt", EXPECTED["checkpoint"]["prefix"] + ".meta")
    pb = _read("graph.pb")
    for i in range(25):
        path = tmp_path / f"m{i}.meta"
        path.write_bytes(_fuzzed(meta, rng))
        with af.Graph().as_default():
            try:
                af.train.import_meta_graph(str(path))
            except (af.errors.DataLossError, af.errors.NotFoundError, ValueError):
                pass  # unparsable, an op name mangled, or an inconsistent graph
        with af.Graph().as_default():
            try:
                af.import_graph_def(_fuzzed(pb, rng))
            except (af.errors.NotFoundError, ValueError):
                pass


def test_tf_partitioned_checkpoint_restores_into_whole_variables(tmp_path):
    prefix = _path("partitioned", EXPECTED["partitioned"]["prefix"])
    want = EXPECTED["partitioned"]["values"]
    reader = af.train.load_checkpoint(prefix)
    assert reader.get_variable_to_shape_map() == {k: list(np.shape(v)) for k, v in want.items()}
    for name, value in want.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value)
    with af.Graph().as_default() as g:
        made = {
            "part": af.Variable(np.zeros((5, 3), np.float32), name="part"),
            "cols": af.Variable(np.zeros((2, 6), np.int64), name="cols"),
            "big": af.Variable(np.zeros((300, 1)), name="big"),
            "plain": af.Variable([0.0], name="plain"),
        }
        saver = af.train.Saver()
        with af.Session(graph=g) as sess:
            saver.restore(sess, prefix)
            for name, var in made.items():
                np.testing.assert_array_equal(sess.run(var), want[name])


def test_slice_keys_are_tfs():
    from asyncflow import checkpoint_format as cf

    keys = [k for k, _ in cf.decode_table(_read("partitioned", "model.ckpt.index"), "x")]
    assert cf.slice_key("big", [100, 0], [100, 1]) in keys  # 2-byte signed numbers
    assert cf.slice_key("part", [3, 0], [2, 3]) in keys
    assert cf.slice_key("x", [0], [-1]) == b"\x00x\x00\x01\x01\x01\x80\x7f"  # -1: whole dim


def test_partitioned_checkpoint_missing_a_slice_is_data_loss(tmp_path):
    from asyncflow import checkpoint_format as cf

    items = cf.decode_table(_read("partitioned", "model.ckpt.index"), "x")
    dropped = [(k, v) for k, v in items if k != cf.slice_key("part", [3, 0], [2, 3])]
    prefix = str(tmp_path / "model.ckpt")
    (tmp_path / "model.ckpt.index").write_bytes(cf.encode_table(dropped))
    with pytest.raises(af.errors.DataLossError, match="slice of 'part'"):
        af.train.load_checkpoint(prefix)
