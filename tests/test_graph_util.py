"""graph_util (frozen graphs) and gfile, against TF 2.21's frozen graph of the same model."""

import json
import os

import numpy as np
import pytest

import asyncflow as af

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "formats_tf")
with open(os.path.join(HERE, "expected.json")) as _f:
    EXPECTED = json.load(_f)
X = np.array(EXPECTED["x"], np.float32)


def _model():
    """The model record_formats_tf.py froze with TF."""
    x = af.placeholder(af.float32, [None, 3], name="x")
    w = af.Variable(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), name="w")
    b = af.Variable([0.5, -0.5], name="b")
    return x, af.nn.softmax(af.matmul(x, w) + b, name="probs")


def test_frozen_graph_matches_tf_and_computes_the_same():
    with af.Graph().as_default() as g:
        x, probs = _model()
        af.add_n([x, x], name="unrelated")  # not needed by probs: dropped
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            frozen = af.graph_util.convert_variables_to_constants(
                sess, g.as_graph_def(), ["probs"]
            )
    with open(os.path.join(HERE, "frozen.pb"), "rb") as f:
        tf_frozen = af.GraphDef.FromString(f.read())
    assert [(n.name, n.op) for n in frozen.node] == [(n.name, n.op) for n in tf_frozen.node]
    w = next(n for n in frozen.node if n.name == "w")
    assert set(w.attr) == {"dtype", "value"} and w.attr["dtype"].type == 1
    with af.Graph().as_default() as g2:
        (out,) = af.import_graph_def(frozen.SerializeToString(), return_elements=["probs:0"])
        assert not af.global_variables()
        with af.Session(graph=g2) as sess:
            got = sess.run(out, {"import/x:0": X})
    np.testing.assert_allclose(got, EXPECTED["frozen"]["probs"], rtol=1e-5)


def test_extract_sub_graph_and_remove_training_nodes():
    with af.Graph().as_default() as g:
        a = af.constant(1.0, name="a")
        b = af.identity(a, name="b")
        c = af.check_numerics(b, "bad", name="c")
        af.multiply(c, 2.0, name="d")
        af.constant(3.0, name="e")
    gd = g.as_graph_def()
    sub = af.graph_util.extract_sub_graph(gd, ["d"])
    assert "e" not in [n.name for n in sub.node]
    with pytest.raises(TypeError):
        af.graph_util.extract_sub_graph(gd, "d")
    slim = af.graph_util.remove_training_nodes(sub)
    assert [n.name for n in slim.node if n.op in ("Identity", "CheckNumerics")] == []
    d = next(n for n in slim.node if n.name == "d")
    assert d.input[0] == "a"


def test_gfile_reading_idiom(tmp_path):
    path = tmp_path / "g.pb"
    with af.Graph().as_default() as g:
        af.constant(1.0, name="c")
    with af.gfile.GFile(str(path), "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    gd = af.GraphDef()
    with af.io.gfile.GFile(str(path), "rb") as f:
        assert f.size() == path.stat().st_size
        gd.ParseFromString(f.read())
    assert gd.node[0].name == "c"
    assert af.gfile.Exists(str(path)) and af.io.gfile.listdir(str(tmp_path)) == ["g.pb"]
    with pytest.raises(af.errors.NotFoundError):
        af.gfile.GFile(str(tmp_path / "nope"), "rb")
    with pytest.raises(af.errors.AlreadyExistsError):
        af.gfile.Copy(str(path), str(path))
    af.gfile.MakeDirs(str(tmp_path / "a" / "b"))
    assert af.gfile.IsDirectory(str(tmp_path / "a" / "b"))
    af.gfile.DeleteRecursively(str(tmp_path / "a"))
    assert af.gfile.Glob(str(tmp_path / "*")) == [str(path)]
