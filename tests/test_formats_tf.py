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
