"""export_meta_graph / import_meta_graph / write_graph in TF's protobuf formats."""

import os

import pytest
from google.protobuf import text_format

import asyncflow as af
from asyncflow import meta_graph as mg
from asyncflow import protos
from asyncflow.train import saver as sv


def _model():
    x = af.placeholder(af.float32, [2], name="x")
    with af.device("/cpu:0"):
        v = af.Variable([1.0, 2.0], name="v")
    y = af.add(x, v, name="y")
    af.add_to_collection("outs", y)
    af.add_to_collection("ops", y.op)
    af.add_to_collection("strs", "hello")
    af.add_to_collection("ints", 3)
    af.add_to_collection("floats", 0.5)
    af.add_to_collection("odd", object())  # not serialisable: skipped with a warning
    return x, v, y


def test_export_and_import_roundtrip(tmp_path):
    with af.Graph().as_default() as g:
        _, v, _ = _model()
        saver = sv.Saver()
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            sess.run(v.assign([5.0, 6.0]))
            path = saver.save(sess, str(tmp_path / "m"), global_step=1)
    meta = path + ".meta"
    doc = af.MetaGraphDef.FromString(open(meta, "rb").read())
    assert {"meta_info_def", "graph_def", "saver_def", "collection_def"} <= {
        f.name for f, _ in doc.ListFields()
    }
    assert "odd" not in doc.collection_def
    (raw,) = doc.collection_def["variables"].bytes_list.value  # as TF: serialized VariableDefs
    assert protos.VariableDef.FromString(raw) == protos.VariableDef(
        variable_name="v:0",
        initial_value_name="v/initial_value:0",
        initializer_name="v/Assign",
        snapshot_name="v/read:0",
        trainable=True,
        is_resource=False,
    )
    with af.Graph().as_default() as g:
        saver = af.train.import_meta_graph(meta)
        assert af.get_collection("strs") == [b"hello"] and af.get_collection("ints") == [3]
        assert af.get_collection("floats") == [0.5]
        assert af.get_collection("ops")[0] is g.get_operation_by_name("y")
        (v2,) = af.global_variables()
        assert af.trainable_variables() == [v2] and v2.name == "v:0"
        assert g.get_operation_by_name("v").device.endswith("CPU:0")
        with af.Session(graph=g) as sess:
            saver.restore(sess, path)
            out = af.get_collection("outs")[0]
            assert sess.run(out, {"x:0": [1.0, 1.0]}).tolist() == [6.0, 7.0]
            sess.run(v2.initializer)  # the rebuilt Variable is bound to the imported ops
            assert sess.run(v2).tolist() == [1.0, 2.0]


def test_import_scope_and_clear_devices(tmp_path):
    with af.Graph().as_default() as g:
        _model()
        saver = sv.Saver()
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            path = saver.save(sess, str(tmp_path / "m"))
    with af.Graph().as_default() as g:
        saver = af.train.import_meta_graph(path + ".meta", clear_devices=True, import_scope="imp")
        assert saver.as_saver_def().restore_op_name == "imp/save/restore_all"
        assert g.get_operation_by_name("imp/v").device == ""
        with af.Session(graph=g) as sess:
            saver.restore(sess, path)
            assert sess.run("imp/y:0", {"imp/x:0": [0.0, 0.0]}).tolist() == [1.0, 2.0]


def test_export_scope_and_strip_default_attrs(graph):
    with af.name_scope("inner"):
        a = af.constant(1.0, name="a")
        af.identity(a, name="b")
    af.constant(2.0, name="outside")
    doc = mg.export_meta_graph(export_scope="inner", strip_default_attrs=True)
    assert [n.name for n in doc.graph_def.node] == ["a", "b"]
    with af.Graph().as_default() as g:
        af.train.import_meta_graph(doc, import_scope="again")
        assert g.get_operation_by_name("again/b").inputs[0].op.name == "again/a"


def test_without_saver_def_a_saver_is_made_when_there_are_variables(graph):
    af.Variable(1.0, name="v")
    doc = mg.export_meta_graph()
    assert not doc.HasField("saver_def")
    with af.Graph().as_default():
        assert isinstance(af.train.import_meta_graph(doc), sv.Saver)
    with af.Graph().as_default():
        af.constant(1.0)
        doc = mg.export_meta_graph()
    with af.Graph().as_default():
        assert af.train.import_meta_graph(doc) is None


def test_bad_files(tmp_path):
    with pytest.raises(OSError, match="does not exist"):  # TF's IOError
        af.train.import_meta_graph(str(tmp_path / "nope.meta"))
    bad = tmp_path / "bad.meta"
    bad.write_bytes(b"\x12\xff{not a proto")
    with pytest.raises(af.errors.DataLossError, match="Cannot parse file"):
        af.train.import_meta_graph(str(bad))
    bad.write_text('graph_def { node { name: "a" op: "NoSuchOp" } }')  # text format
    with af.Graph().as_default():
        with pytest.raises(af.errors.NotFoundError, match="NoSuchOp.*'a'"):
            af.train.import_meta_graph(str(bad))


def test_write_graph_and_as_text(graph, tmp_path):
    af.constant(1.0, name="c")
    path = mg.write_graph(graph, str(tmp_path / "logs"), "g.pbtxt")
    assert path == os.path.join(str(tmp_path / "logs"), "g.pbtxt")
    assert text_format.Parse(open(path).read(), af.GraphDef()).node[0].name == "c"
    path = mg.write_graph(graph.as_graph_def(), str(tmp_path), "g.pb", as_text=False)
    assert af.GraphDef.FromString(open(path, "rb").read()) == graph.as_graph_def()
    text = tmp_path / "m.meta"
    mg.export_meta_graph(str(text), as_text=True)
    assert text_format.Parse(text.read_text(), af.MetaGraphDef()).graph_def.node[0].name == "c"


def test_saver_collection_roundtrip(graph):
    af.Variable(1.0, name="v")
    saver = sv.Saver()
    af.add_to_collection(af.GraphKeys.SAVERS, saver)
    doc = mg.export_meta_graph()
    (raw,) = doc.collection_def["savers"].bytes_list.value
    assert protos.SaverDef.FromString(raw).restore_op_name == "save/restore_all"
    with af.Graph().as_default():
        af.train.import_meta_graph(doc, import_scope="s")
        (restored,) = af.get_collection(af.GraphKeys.SAVERS)
        assert restored.as_saver_def().save_tensor_name == "s/save/control_dependency:0"
