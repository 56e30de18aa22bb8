"""af.train.Saver and checkpoint management, step for step against tf.compat.v1.

The TF facts come from tests/fixtures/saver_tf.json (record_saver_tf.py).
"""

import json
import os
import time

import aiofiles.os
import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.train import checkpoint_utils as cu
from asyncflow.train import saver as sv

TF = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures", "saver_tf.json")))


def _four_vars():
    v = af.Variable([1.0, 2.0], name="v")
    w = af.Variable(3, name="w")
    s = af.Variable(b"hello", name="s")
    b = af.Variable([True, False], name="b")
    return v, w, s, b


def _files(d):
    return sorted(f for f in os.listdir(d) if ".tmp" not in f)


def test_op_names_and_saver_def_match_tf(graph):
    af.Variable([1.0, 2.0], name="v")
    af.Variable(1, name="x")
    saver = sv.Saver(max_to_keep=2)
    names = [op.name for op in graph.get_operations() if op.name.startswith("save")]
    assert names == TF["saver_op_names"]
    d = saver.as_saver_def()
    for key, want in TF["saver_def"].items():
        assert str(getattr(d, key)) == want, key


def test_saves_with_global_step_and_max_to_keep(graph, sess, tmp_path):
    v, *_ = _four_vars()
    saver = sv.Saver(max_to_keep=2)
    sess.run(af.global_variables_initializer())
    d = str(tmp_path)
    for want in TF["saves_max_to_keep_2"]:
        path = saver.save(sess, os.path.join(d, "model.ckpt"), global_step=want["step"])
        assert os.path.relpath(path, d) == want["returned"]
        assert _files(d) == want["files"]
        with open(os.path.join(d, "checkpoint")) as f:
            assert f.read().replace(d, "<DIR>") == want["state"]
        assert [os.path.relpath(p, d) for p in saver.last_checkpoints] == want["last_checkpoints"]
    assert os.path.relpath(sv.latest_checkpoint(d), d) == TF["latest"]
    assert [[n, s] for n, s in cu.list_variables(d)] == TF["list_variables"]
    dtypes = {k: v.name for k, v in cu.load_checkpoint(d).get_variable_to_dtype_map().items()}
    assert dtypes == TF["dtype_map"]
    kind, msg = TF["restore_deleted"]
    with pytest.raises(ValueError) as e:
        saver.restore(sess, os.path.join(d, "model.ckpt-0"))
    assert str(e.value).replace(d, "<DIR>") == msg and kind == "ValueError"


def test_save_variants_match_tf(graph, sess, tmp_path):
    _four_vars()
    sess.run(af.global_variables_initializer())
    d2 = tmp_path / "a"
    d2.mkdir()
    saver = sv.Saver(max_to_keep=2)
    path = saver.save(sess, str(d2 / "m"))
    want = TF["save_no_step"]
    assert os.path.relpath(path, d2) == want["returned"] and _files(d2) == want["files"]
    assert (d2 / "checkpoint").read_text().replace(str(d2), "<DIR>") == want["state"]
    d3 = tmp_path / "b"
    d3.mkdir()
    saver = sv.Saver(max_to_keep=2)
    saver.save(sess, str(d3 / "sub" / "m"), 5, latest_filename="ck2", write_meta_graph=False)
    want = TF["save_subdir"]
    assert _files(d3 / "sub") == want["files"]
    assert (d3 / "sub" / "ck2").read_text().replace(str(d3), "<DIR>") == want["state"]
    with pytest.raises(ValueError, match="Parent directory of .* doesn't exist, can't save."):
        saver.save(sess, str(tmp_path / "x" / "y" / "m"))
    with pytest.raises(ValueError, match="'latest_filename' collides with 'save_path'"):
        saver.save(sess, str(tmp_path / "checkpoint"))


def test_pad_step_number_relative_paths_and_global_step_tensor(graph, sess, tmp_path):
    af.Variable(1.0, name="a")
    from asyncflow.train import training_util

    gs = training_util.get_or_create_global_step()
    sess.run(af.global_variables_initializer())
    d5 = tmp_path / "p"
    d5.mkdir()
    path = sv.Saver(pad_step_number=True).save(sess, str(d5 / "m"), global_step=gs)
    assert os.path.relpath(path, d5) == TF["pad_step"] and _files(d5) == TF["pad_step_files"]
    d6 = tmp_path / "r"
    d6.mkdir()
    sv.Saver(save_relative_paths=True).save(sess, str(d6 / "m"), global_step=3)
    assert (d6 / "checkpoint").read_text() == TF["relative_state"]
    assert sv.latest_checkpoint(str(d6)) == str(d6 / "m-3")


def test_sharded_matches_tf_and_writes_one_file_per_device(tmp_path):
    d = str(tmp_path)
    with af.Graph().as_default() as g:
        with af.device("/cpu:0"):
            af.Variable([1.0], name="a")
        saver = sv.Saver(sharded=True)
        for key, want in TF["sharded_saver_def"].items():
            assert getattr(saver.as_saver_def(), key) == want
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            path = saver.save(sess, os.path.join(d, "m"), global_step=1)
    want = TF["sharded"]
    assert os.path.relpath(path, d) == want["returned"] and _files(d) == want["files"]
    with af.Graph().as_default() as g:
        with af.device("/cpu:0"):
            a = af.Variable([1.0], name="a")
        with af.device("/cpu:1"):
            b = af.Variable([2, 3], name="b")
        saver = sv.Saver(sharded=True)
        config = af.ConfigProto(device_count={"CPU": 2})
        with af.Session(graph=g, config=config) as sess:
            sess.run(af.global_variables_initializer())
            path = saver.save(sess, os.path.join(d, "two"), write_meta_graph=False)
            sess.run([a.assign([0.0]), b.assign([0, 0])])
            saver.restore(sess, path)
            assert sess.run(a).tolist() == [1.0] and sess.run(b).tolist() == [2, 3]
    names = [f for f in _files(d) if f.startswith("two")]
    assert names == ["two.data-00000-of-00002", "two.data-00001-of-00002", "two.index"]
    assert not any("_temp" in f for f in os.listdir(d))
    assert cu.load_variable(path, "b").tolist() == [2, 3]


def test_restore_into_fresh_graph_with_prefix_index_or_data_file(tmp_path):
    with af.Graph().as_default() as g:
        _four_vars()
        saver = sv.Saver()
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            path = saver.save(sess, str(tmp_path / "m"), global_step=7)
    for suffix in ["", ".index", ".data-00000-of-00001"]:
        with af.Graph().as_default() as g:
            v = af.Variable([0.0, 0.0], name="v")
            w = af.Variable(0, name="w")
            s = af.Variable(b"", name="s")
            b = af.Variable([False, False], name="b")
            saver = sv.Saver()
            with af.Session(graph=g) as sess:
                saver.restore(sess, path + suffix)
                got = sess.run([v, w, s, b])
        assert got[0].tolist() == [1.0, 2.0] and got[1] == 3
        assert got[2] == b"hello" and got[3].tolist() == [True, False]


def test_restore_by_name_map(tmp_path):
    with af.Graph().as_default() as g:
        v = af.Variable([1.0, 2.0], name="v")
        saver = sv.Saver({"renamed": v})
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            path = saver.save(sess, str(tmp_path / "named"))
    assert [n for n, _ in cu.list_variables(path)] == TF["named_vars"]
    with af.Graph().as_default() as g:
        other = af.Variable([0.0, 0.0], name="other")
        saver = sv.Saver({"renamed": other})
        with af.Session(graph=g) as sess:
            saver.restore(sess, path)
            assert sess.run(other).tolist() == [1.0, 2.0]


def _saved(tmp_path):
    with af.Graph().as_default() as g:
        af.Variable([1.0, 2.0], name="v")
        af.Variable(1, name="x")
        saver = sv.Saver()
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            return saver.save(sess, str(tmp_path / "m"))


@pytest.mark.parametrize(
    "make, fixture_key, detail",
    [
        (lambda: af.Variable([1.0, 2.0, 3.0], name="v"), "restore_shape_mismatch",
         "Assign requires shapes of both tensors to match. lhs shape= [3] rhs shape= [2]"),
        (lambda: af.Variable(1.5, name="x"), "restore_dtype_mismatch",
         "tensor_name = x; expected dtype float does not equal original dtype int32"),
        (lambda: af.Variable(1.0, name="missing_var"), "restore_missing_key",
         "Key missing_var not found in checkpoint"),
    ],
)  # fmt: skip
def test_restore_mismatch_errors_match_tf(tmp_path, make, fixture_key, detail):
    path = _saved(tmp_path)
    kind, prefix = TF[fixture_key]
    with af.Graph().as_default() as g:
        var = make()
        saver = sv.Saver([var])
        with af.Session(graph=g) as sess:
            with pytest.raises(getattr(errors, kind)) as e:
                saver.restore(sess, path)
    assert str(e.value).startswith(prefix.split("\n")[0]) and detail in str(e.value)


def test_empty_var_list_and_bad_arguments(graph, sess, tmp_path):
    with pytest.raises(ValueError, match=TF["empty_saver"][1]):
        sv.Saver(var_list=[])
    empty = sv.Saver(var_list=[], allow_empty=True)
    assert empty.save(sess, str(tmp_path / "e")) is None
    v = af.Variable(1.0, name="v")
    with pytest.raises(ValueError, match="build cannot be deferred"):
        sv.Saver([v], defer_build=True)
    with pytest.raises(TypeError, match="dict or a list"):
        sv.Saver(v)
    with pytest.raises(TypeError, match="not a Variable"):
        sv.Saver([af.constant(1.0)])
    with pytest.raises(ValueError, match="same name"):
        sv.Saver([v, v])
    deferred = sv.Saver(defer_build=True)
    with pytest.raises(RuntimeError, match="build"):
        deferred.save(sess, str(tmp_path / "d"))
    deferred.build()
    sess.run(af.global_variables_initializer())
    assert deferred.save(sess, str(tmp_path / "d")) == str(tmp_path / "d")
    with pytest.raises(ValueError, match="None"):
        deferred.restore(sess, None)


def test_corrupt_checkpoint_raises_data_loss(graph, sess, tmp_path):
    af.Variable(np.arange(64, dtype=np.float32), name="v")
    saver = sv.Saver()
    sess.run(af.global_variables_initializer())
    path = saver.save(sess, str(tmp_path / "m"))
    data = path + ".data-00000-of-00001"
    with open(data, "r+b") as f:
        f.seek(-3, os.SEEK_END)
        f.write(b"\x01\x02\x03")
    with pytest.raises(errors.DataLossError, match="checksum mismatch"):
        saver.restore(sess, path)
    with pytest.raises(errors.DataLossError, match=data.replace(".", r"\.")):
        cu.load_variable(path, "v")
    os.remove(data)
    with pytest.raises(errors.DataLossError, match="missing"):
        saver.restore(sess, path)


def test_keep_checkpoint_every_n_hours_and_recover(graph, sess, tmp_path):
    af.Variable(1.0, name="v")
    sess.run(af.global_variables_initializer())
    saver = sv.Saver(max_to_keep=1, keep_checkpoint_every_n_hours=1.0)
    # As if the saver had been built half an hour ago: the first checkpoint deleted is
    # past the mark and kept, the next is not (the mark moved an hour on).
    saver._next_checkpoint_time = time.time() - 1800
    p1 = saver.save(sess, str(tmp_path / "m"), global_step=1)
    p2 = saver.save(sess, str(tmp_path / "m"), global_step=2)
    saver.save(sess, str(tmp_path / "m"), global_step=3)
    assert sv.checkpoint_exists(p1)  # kept: one per hour
    assert not sv.checkpoint_exists(p2)
    assert not os.path.exists(p2 + ".meta")
    other = sv.Saver(max_to_keep=3)
    state = sv.get_checkpoint_state(str(tmp_path))
    other.recover_last_checkpoints([p1, p2] + list(state.all_model_checkpoint_paths))
    assert other.last_checkpoints == [p1, str(tmp_path / "m-3")]
    other.set_last_checkpoints_with_time([("a", 1.0)])
    assert other.last_checkpoints == ["a"]
    with pytest.raises(AssertionError):
        other.set_last_checkpoints_with_time("a")


def test_checkpoint_state_file(tmp_path):
    d = str(tmp_path)
    assert sv.latest_checkpoint(d) is None and sv.get_checkpoint_state(d) is None
    sv.update_checkpoint_state(d, os.path.join(d, 'we"ird\n'), [os.path.join(d, "a")])
    state = sv.get_checkpoint_state(d)
    assert state.model_checkpoint_path == os.path.join(d, 'we"ird\n')
    assert state.all_model_checkpoint_paths == [os.path.join(d, "a"), os.path.join(d, 'we"ird\n')]
    assert sv.latest_checkpoint(d) is None  # named, but its files do not exist
    (tmp_path / "checkpoint").write_text("garbage {{{")
    assert sv.get_checkpoint_state(d) is None
    (tmp_path / "checkpoint").write_text('all_model_checkpoint_paths: "x"\n')
    with pytest.raises(ValueError, match="Invalid checkpoint state"):
        sv.get_checkpoint_state(d)
    with pytest.raises(RuntimeError, match="conflicts"):
        sv.update_checkpoint_state(d, os.path.join(d, "checkpoint"))
    assert sv.meta_graph_filename("a/b-00000-of-00002") == "a/b.meta"


def test_checkpoint_reader_and_errors(tmp_path):
    path = _saved(tmp_path)
    reader = cu.NewCheckpointReader(path)
    assert reader.has_tensor("v") and not reader.has_tensor("zz")
    assert reader.get_variable_to_shape_map() == {"v": [2], "x": []}
    assert cu.load_variable(str(tmp_path), "v:0").tolist() == [1.0, 2.0]
    kind, msg = TF["get_tensor_missing"]
    with pytest.raises(getattr(errors, kind), match=msg):
        reader.get_tensor("zz")
    kind, msg = TF["load_missing"]
    with pytest.raises(getattr(errors, kind)) as e:
        cu.load_checkpoint(str(tmp_path / "nope"))
    assert str(e.value).replace(str(tmp_path), "<DIR>") == msg
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="Couldn't find 'checkpoint' file"):
        cu.list_variables(str(empty))


def test_init_from_checkpoint(tmp_path):
    with af.Graph().as_default() as g:
        with af.variable_scope("old"):
            af.get_variable("w", initializer=[1.0, 2.0])
            af.get_variable("b", initializer=[3.0])
        saver = sv.Saver()
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            saver.save(sess, str(tmp_path / "m"))
    with af.Graph().as_default() as g:
        with af.variable_scope("new"):
            w = af.get_variable("w", initializer=[0.0, 0.0])
            b = af.get_variable("b", initializer=[0.0])
        other = af.Variable([9.0], name="other")
        cu.init_from_checkpoint(str(tmp_path), {"old/": "new/"})
        cu.init_from_checkpoint(str(tmp_path), {"old/b": other})
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            got = sess.run([w, b, other])
        assert [x.tolist() for x in got] == [[1.0, 2.0], [3.0], [3.0]]
        with pytest.raises(ValueError, match="not found"):
            cu.init_from_checkpoint(str(tmp_path), {"nope": other})
        with pytest.raises(ValueError, match="scope only"):
            cu.init_from_checkpoint(str(tmp_path), {"old/w": "missing"})


async def test_asave_and_arestore_on_the_loop(tmp_path):
    with af.Graph().as_default() as g:
        v = af.Variable([1.0, 2.0], name="v")
        saver = sv.Saver(max_to_keep=1)
        async with af.Session(graph=g) as sess:
            await sess.arun(af.global_variables_initializer())
            p1 = await saver.asave(sess, str(tmp_path / "m"), global_step=1)
            await sess.arun(v.assign([5.0, 6.0]))
            p2 = await saver.asave(sess, str(tmp_path / "m"), global_step=2)
            assert not sv.checkpoint_exists(p1) and await aiofiles.os.path.exists(p2 + ".meta")
            assert sv.latest_checkpoint(str(tmp_path)) == p2
            await sess.arun(v.assign([0.0, 0.0]))
            await saver.arestore(sess, p2)
            assert (await sess.arun(v)).tolist() == [5.0, 6.0]
            with pytest.raises(ValueError, match="not a valid checkpoint"):
                await saver.arestore(sess, p1)
