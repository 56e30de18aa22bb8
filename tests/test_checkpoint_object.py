"""tf.Module and object-based checkpoints (tf.compat.v1.train.Checkpoint in graph mode,
CheckpointManager) against TF 2.21.

References: tests/fixtures/checkpoint_object_tf/ (recorded by
record_checkpoint_object_tf.py from the programs in checkpoint_object_cases.py): TF's
checkpoint of the program, its object graph, keys and values, tf.Module's answers, the
load statuses' messages, CheckpointManager's files.  The recorder also loaded
asyncflow's checkpoint of the same program in TF ("ours_in_tf").
"""

import json
import os
import shutil
import sys

import numpy as np
import pytest
from google.protobuf import text_format

import asyncflow as af
from asyncflow import errors
from asyncflow.protos.trackable_object_graph_pb2 import TrackableObjectGraph

pytestmark = pytest.mark.timeout(120)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
HERE = os.path.join(FIXTURES, "checkpoint_object_tf")
TF_CKPT = os.path.join(HERE, "tf_ckpt", "ckpt-1")
sys.path.insert(0, FIXTURES)

import checkpoint_object_cases as cases  # noqa: E402

with open(os.path.join(HERE, "expected.json")) as _f:
    EXPECTED = json.load(_f)
SLOT_M = "model/layer/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE"


def _object_graph(path) -> TrackableObjectGraph:
    proto = TrackableObjectGraph()
    proto.ParseFromString(af.train.load_variable(path, "_CHECKPOINTABLE_OBJECT_GRAPH"))
    return proto


def _trained_checkpoint(tmp_path):
    """asyncflow runs the program one step and saves it; returns (path, values)."""
    with af.Graph().as_default():
        b = cases.build_and_train(af, af.Module)
        ck = af.train.Checkpoint(model=b["model"], optimizer=b["opt"], gs=b["gs"])
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            s.run(b["train"])
            path = ck.save(str(tmp_path / "ckpt"), session=s)
    return path


# -- tf.Module -----------------------------------------------------------------------------


def test_module_variables_submodules_and_scopes_are_tfs(graph):
    b = cases.build_and_train(af, af.Module, slots=False)
    assert cases.module_facts(b["model"]) == EXPECTED["module"]


def test_module_name_validation_and_with_name_scope(graph):
    with pytest.raises(ValueError, match="not a valid module name"):
        af.Module(name="not valid")

    class MyThing(af.Module):
        @af.Module.with_name_scope
        def make(self):
            return af.constant(1.0, name="c")

    m = MyThing()
    assert m.name == "my_thing"
    assert m.make().name == "my_thing/c:0"
    assert MyThing().name_scope.name == "my_thing_1/"


def test_module_ignores_cycles_and_duplicates(graph):
    a, b = af.Module(name="a"), af.Module(name="b")
    v = af.Variable(1.0, name="v")
    a.child, b.parent = b, a
    a.v = b.v = v
    assert [x.name for x in a.variables] == ["v:0"]
    assert [m.name for m in a.submodules] == ["b"]


# -- the object graph and its keys -------------------------------------------------------


def test_our_object_graph_and_keys_equal_tfs(tmp_path):
    path = _trained_checkpoint(tmp_path)
    want = text_format.Parse(EXPECTED["object_graph"], TrackableObjectGraph())
    assert _object_graph(path) == want
    names = [n for n, _ in af.train.list_variables(path)]
    assert names == EXPECTED["keys"]
    reader = af.train.load_checkpoint(path)
    dtypes = reader.get_variable_to_dtype_map()
    assert {k: dtypes[k].name for k in names} == EXPECTED["dtypes"]


def test_our_values_after_one_step_equal_tfs(tmp_path):
    path = _trained_checkpoint(tmp_path)
    for key, want in EXPECTED["values"].items():
        got = af.train.load_variable(path, key)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=key)


def test_save_numbers_prefixes_and_writes_tfs_state_file(tmp_path):
    path = _trained_checkpoint(tmp_path)
    assert os.path.basename(path) == "ckpt-1"
    with open(tmp_path / "checkpoint") as f:
        assert f.read() == EXPECTED["state_file"]
    assert af.train.latest_checkpoint(str(tmp_path)) == path


def test_write_has_no_counter_and_no_state_file(tmp_path, graph, sess):
    v = af.Variable([1.0, 2.0], name="v")
    ck = af.train.Checkpoint(v=v)
    sess.run(v.initializer)
    with sess.as_default():
        assert ck.write(str(tmp_path / "w")) == str(tmp_path / "w")
    assert sorted(os.listdir(tmp_path)) == ["w.data-00000-of-00001", "w.index"]
    assert [n for n, _ in af.train.list_variables(str(tmp_path / "w"))] == [
        "_CHECKPOINTABLE_OBJECT_GRAPH",
        "v/.ATTRIBUTES/VARIABLE_VALUE",
    ]


def test_checkpoint_rejects_untrackable_values():
    with pytest.raises(ValueError, match="expecting a trackable object"):
        af.train.Checkpoint(x=3)


def test_the_recorder_found_our_checkpoints_load_in_tf():
    ours = EXPECTED["ours_in_tf"]
    assert ours["assert_consumed"] == "ok"
    assert ours["same_keys"] and ours["values_match_tf"]
    assert ours["save_counter"] == 1
    assert ours["manager_files"] == EXPECTED["manager"]["files"]
    assert ours["manager_state"] == EXPECTED["manager"]["state_paths"]


# -- restoring TF's checkpoint -------------------------------------------------------------


def _restore_tf(slots=True):
    b = cases.build_and_train(af, af.Module, slots=slots)
    ck = af.train.Checkpoint(model=b["model"], optimizer=b["opt"], gs=b["gs"])
    return b, ck, ck.restore(TF_CKPT)


def test_tfs_checkpoint_restores_every_value(graph, sess):
    b, ck, status = _restore_tf()
    status.assert_consumed()
    status.assert_existing_objects_matched().assert_nontrivial_match()
    status.run_restore_ops(sess)
    vals = EXPECTED["values"]
    model = b["model"]
    checks = {
        "model/layer/kernel/.ATTRIBUTES/VARIABLE_VALUE": model.layer.kernel,
        "model/cfg/a.Sb..c/bias/.ATTRIBUTES/VARIABLE_VALUE": model.cfg["a/b.c"].bias,
        "model/pair/0/.ATTRIBUTES/VARIABLE_VALUE": model.pair[0],
        "model/frozen/.ATTRIBUTES/VARIABLE_VALUE": model.frozen,
        "gs/.ATTRIBUTES/VARIABLE_VALUE": b["gs"],
        "optimizer/beta2_power/.ATTRIBUTES/VARIABLE_VALUE": b["opt"]._get_non_slot_variable(
            "beta2_power"
        ),
        SLOT_M: b["opt"].get_slot(model.layer.kernel, "m"),
        "save_counter/.ATTRIBUTES/VARIABLE_VALUE": ck.save_counter,
    }
    for key, var in checks.items():
        np.testing.assert_array_equal(sess.run(var), vals[key], err_msg=key)


def test_nothing_is_assigned_before_run_restore_ops(graph, sess):
    b, _, status = _restore_tf()
    sess.run(af.global_variables_initializer())
    before = sess.run(b["model"].frozen)
    assert before == 7.0
    status.run_restore_ops(sess)
    assert (
        sess.run(b["model"].frozen)
        == EXPECTED["values"]["model/frozen/.ATTRIBUTES/VARIABLE_VALUE"]
    )


def test_slots_created_after_restore_are_restored(graph, sess):
    # TF: restore, then minimize() makes the slots; initialize_or_restore fills them.
    b, _, status = _restore_tf(slots=False)
    b["opt"].minimize(b["loss"], global_step=b["gs"])
    status.initialize_or_restore(sess)
    got = sess.run(b["opt"].get_slot(b["model"].layer.kernel, "m"))
    np.testing.assert_allclose(got, EXPECTED["values"][SLOT_M])
    assert EXPECTED["deferred"] == {"consumed": "ok", "slot_restored": True}
    status.assert_consumed()


def test_objects_attached_after_restore_are_restored(graph, sess):
    m = af.Module()
    ck = af.train.Checkpoint(model=m)
    status = ck.restore(TF_CKPT)
    sess.run(af.global_variables_initializer())
    m.frozen = af.Variable(0.0, name="late")
    sess.run(m.frozen.initializer)
    status.run_restore_ops(sess)
    assert sess.run(m.frozen) == 7.0


# -- load statuses' assertions, as TF words them ---------------------------------------------


def test_partial_restore_statuses(graph):
    st_msgs = EXPECTED["status"]["partial"]
    b = cases.build_and_train(af, af.Module, slots=False)
    status = af.train.Checkpoint(model=b["model"]).restore(TF_CKPT)
    with pytest.raises(AssertionError) as e:
        status.assert_consumed()
    assert str(e.value) == st_msgs["assert_consumed"]
    assert st_msgs["assert_existing_objects_matched"] == "ok"
    assert status.assert_existing_objects_matched() is status
    assert status.assert_nontrivial_match() is status
    assert status.expect_partial() is status


def test_unmatched_python_object_status(graph):
    b = cases.build_and_train(af, af.Module, slots=False)
    extra = af.Variable(0.0, name="extra")
    status = af.train.Checkpoint(model=b["model"], extra=extra).restore(TF_CKPT)
    want = EXPECTED["status"]["extra"].split("[")[0]
    with pytest.raises(AssertionError, match="^" + want.replace(".", r"\.")):
        status.assert_existing_objects_matched()


def test_unrelated_checkpoint_still_matches_the_save_counter(graph):
    status = af.train.Checkpoint(other=af.Variable(0.0, name="other")).restore(TF_CKPT)
    assert EXPECTED["status"]["unrelated"] == "ok"
    status.assert_nontrivial_match()


def test_restore_none_and_missing(graph, sess):
    v = af.Variable(3.0, name="v")
    status = af.train.Checkpoint(v=v).restore(None)
    with pytest.raises(AssertionError) as e:
        status.assert_consumed()
    assert str(e.value) == EXPECTED["status"]["none"]
    status.run_restore_ops(sess)
    status.initialize_or_restore(sess)
    assert sess.run(v) == 3.0
    assert EXPECTED["status"]["missing"] == "NotFoundError"
    with pytest.raises(errors.NotFoundError):
        af.train.Checkpoint().restore("/nonexistent_dir_x/no_such_ckpt")


def test_name_based_checkpoint_restores_by_variable_name(tmp_path, graph, sess):
    v = af.Variable([1.0, 2.0], name="v")
    sess.run(v.initializer)
    path = af.train.Saver([v]).save(sess, str(tmp_path / "named"))
    sess.run(v.assign([0.0, 0.0]))
    status = af.train.Checkpoint(v=v).restore(path)
    status.assert_consumed()
    status.run_restore_ops(sess)
    np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])


# -- CheckpointManager ----------------------------------------------------------------------


def test_manager_numbering_deletion_and_state_as_tf(tmp_path, graph, sess):
    want = EXPECTED["manager"]
    v = af.Variable(np.arange(3, dtype=np.float32), name="v")
    ck = af.train.Checkpoint(v=v)
    sess.run(v.initializer)
    d = str(tmp_path / "m")
    with sess.as_default():
        m = af.train.CheckpointManager(ck, d, max_to_keep=2)
        saved = [os.path.basename(m.save(checkpoint_number=n)) for n in cases.MANAGER_SAVES]
        assert saved == want["saved"]
        assert [os.path.basename(p) for p in m.checkpoints] == want["checkpoints"]
        assert os.path.basename(m.latest_checkpoint) == want["latest"]
        assert sorted(os.listdir(d)) == want["files"]
        state = af.train.get_checkpoint_state(d)
        assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == want[
            "state_paths"
        ]
        assert sess.run(ck.save_counter) == want["save_counter"]
        m2 = af.train.CheckpointManager(ck, d, max_to_keep=2)
        assert [os.path.basename(p) for p in m2.checkpoints] == want["recovered"]
        assert m2.restore_or_initialize() == m.latest_checkpoint


def test_manager_checkpoint_interval(tmp_path, graph, sess):
    v = af.Variable(1.0, name="v")
    gs = af.train.get_or_create_global_step()
    ck = af.train.Checkpoint(v=v)
    sess.run(af.global_variables_initializer())
    with sess.as_default():
        m = af.train.CheckpointManager(
            ck, str(tmp_path / "i"), max_to_keep=None, step_counter=gs, checkpoint_interval=2
        )
        got = []
        for step in range(5):
            sess.run(gs.assign(step))
            p = m.save()
            got.append(None if p is None else os.path.basename(p))
    assert got == EXPECTED["manager"]["interval"]


def test_manager_argument_errors_and_init_fn(tmp_path, graph):
    ck = af.train.Checkpoint()
    with pytest.raises(ValueError, match="max_to_keep"):
        af.train.CheckpointManager(ck, str(tmp_path), max_to_keep=0)
    with pytest.raises(ValueError, match="step_counter"):
        af.train.CheckpointManager(ck, str(tmp_path), 1, checkpoint_interval=3)
    called = []
    m = af.train.CheckpointManager(ck, str(tmp_path), 1, init_fn=lambda: called.append(1))
    assert m.latest_checkpoint is None and m.checkpoints == []
    assert m.restore_or_initialize() is None and called == [1]


def test_checkpoint_options_signature():
    o = af.train.CheckpointOptions(experimental_io_device="/job:localhost")
    assert o.experimental_io_device == "/job:localhost"
    assert o.enable_async is False and o.experimental_skip_slot_variables is False


def test_tf_checkpoint_dir_copy_loads_by_latest(tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(os.path.join(HERE, "tf_ckpt"), d)
    path = af.train.latest_checkpoint(str(d))
    assert os.path.basename(path) == "ckpt-1"
    assert (
        af.train.load_variable(str(d), "gs/.ATTRIBUTES/VARIABLE_VALUE")
        == (EXPECTED["values"]["gs/.ATTRIBUTES/VARIABLE_VALUE"])
    )


def test_tf_layers_in_a_checkpoint_have_tfs_keys(tmp_path, graph, sess):
    want = EXPECTED["layers"]
    d, bn = cases.make_layers(af)
    ck = af.train.Checkpoint(d=d, bn=bn)
    sess.run(af.global_variables_initializer())
    got = {v.name: sess.run(v).tolist() for v in d.variables + bn.variables}
    assert got == want["values"]
    path = ck.write(str(tmp_path / "layers"), session=sess)
    assert [k for k, _ in af.train.list_variables(path)] == want["keys"]
    sess.run(d.variables[0].assign(np.zeros((2, 3), np.float32)))
    # (write() saves no save_counter, so assert_consumed fails on it here as in TF)
    status = af.train.Checkpoint(d=d, bn=bn).restore(path).assert_nontrivial_match()
    status.run_restore_ops(sess)
    np.testing.assert_array_equal(sess.run(d.variables[0]), want["values"]["dd/kernel:0"])


def test_manager_keep_checkpoint_every_n_hours_as_tf(tmp_path, graph, sess, monkeypatch):
    from asyncflow.train import checkpoint_object

    want = EXPECTED["manager_hours"]
    clock = [cases.CLOCK[0]]
    monkeypatch.setattr(checkpoint_object, "_now", lambda: clock[0])
    v = af.Variable(1.0, name="v")
    ck = af.train.Checkpoint(v=v)
    sess.run(v.initializer)
    d = str(tmp_path / "h")
    with sess.as_default():
        m = af.train.CheckpointManager(ck, d, max_to_keep=1, keep_checkpoint_every_n_hours=0.5)
        for t in cases.CLOCK[1:]:
            clock[0] = t
            m.save()
    assert sorted(os.listdir(d)) == want["files"]
    assert [os.path.basename(p) for p in m.checkpoints] == want["checkpoints"]
    state = af.train.get_checkpoint_state(d)
    assert state.last_preserved_timestamp == want["last_preserved"]
    assert list(state.all_model_checkpoint_timestamps) == want["timestamps"]
