"""tf.saved_model's layout constants, main_op and contains_saved_model, as TF 2.21's
(values and op names recorded from TF)."""

import pytest

import asyncflow as af

SM = af.saved_model


def test_constants_are_tfs():
    assert (SM.ASSETS_DIRECTORY, SM.ASSETS_KEY, SM.DEBUG_DIRECTORY) == (
        "assets", "saved_model_assets", "debug",
    )  # fmt: skip
    assert (SM.DEBUG_INFO_FILENAME_PB, SM.LEGACY_INIT_OP_KEY, SM.MAIN_OP_KEY) == (
        "saved_model_debug_info.pb", "legacy_init_op", "saved_model_main_op",
    )  # fmt: skip
    assert (SM.SAVED_MODEL_FILENAME_PB, SM.SAVED_MODEL_FILENAME_PBTXT) == (
        "saved_model.pb", "saved_model.pbtxt",
    )  # fmt: skip
    assert (SM.SAVED_MODEL_SCHEMA_VERSION, SM.VARIABLES_DIRECTORY, SM.VARIABLES_FILENAME) == (
        1, "variables", "variables",
    )  # fmt: skip
    assert SM.constants.MAIN_OP_KEY == SM.MAIN_OP_KEY


def test_main_op_groups_the_initializers(graph):
    af.Variable(1.0)
    af.lookup.StaticHashTable(af.lookup.KeyValueTensorInitializer(["a"], [1]), -1)
    op = SM.main_op.main_op()
    assert (op.name, op.type) == ("group_deps", "NoOp")
    deps = {i.name: [c.name for c in i.control_inputs] for i in op.control_inputs}
    assert deps == {
        "init": ["Variable/Assign"],
        "init_1": [],
        "init_all_tables": ["key_value_init/LookupTableImportV2"],
    }
    restore = af.no_op(name="restore_all")
    with_restore = SM.main_op_with_restore(restore)
    assert "restore_all" in [i.name for i in with_restore.control_inputs]
    with pytest.raises(TypeError, match="should be zero or more"):
        SM.main_op_with_restore("save/restore_all")  # TF 2.21's error too


def test_contains_saved_model(tmp_path, graph):
    assert SM.contains_saved_model(str(tmp_path)) is False
    x = af.placeholder(af.float32, [None], name="x")
    with af.Session() as sess:
        SM.simple_save(sess, str(tmp_path / "m"), {"x": x}, {"y": x * 2})
    assert SM.contains_saved_model(str(tmp_path / "m")) is True
    assert SM.contains_saved_model(str(tmp_path / "m").encode()) is True
