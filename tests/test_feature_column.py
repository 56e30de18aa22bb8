"""tf.feature_column as TF 2.21's: the builders of fixtures/feature_column_cases.py run
here and give the numbers, variable names and shapes, parse specs and errors TF gave
(fixtures/feature_column_tf.json, written by fixtures/record_feature_column_tf.py)."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(HERE))
import feature_column_cases as cases  # noqa: E402

pytestmark = pytest.mark.timeout(60)

TF = json.loads((HERE / "feature_column_tf.json").read_text())
FACTS = (
    "names",
    "shapes",
    "spec",
    "variables",
    "trainable",
    "model",
    "cols_to_vars",
    "lm_cols_to_vars",
)


@pytest.fixture
def vocabularies(tmp_path, monkeypatch):
    cases.write_vocabularies(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # (the error cases name vocab.txt relatively)


def _dense(recorded):
    if isinstance(recorded, dict):
        out = np.zeros(recorded["shape"])
        for *index, value in recorded["nonzero"]:
            out[tuple(index)] = value
        return out
    return np.asarray(recorded)


def _run(builder) -> dict:
    """What record_feature_column_tf.py records, from asyncflow."""
    with tf.Graph().as_default():
        facts, fetches = builder(tf)
        got = dict(facts)
        if "spec" in got:
            got["spec"] = sorted([k, repr(v)] for k, v in got["spec"].items())
        got["variables"] = [[v.name, v.shape.as_list()] for v in tf.global_variables()]
        with tf.Session() as s:
            s.run([tf.global_variables_initializer(), tf.tables_initializer()])
            if "set" in fetches:
                s.run(fetches.pop("set"))
            step = fetches.pop("step", None)
            for k, t in fetches.items():
                got[k] = s.run(t)
            if step is not None:
                s.run(step)
                got["after_step"] = {v.name: s.run(v) for v in tf.global_variables()}
    return got


@pytest.mark.parametrize("builder", cases.BUILDERS, ids=lambda b: b.__name__.strip("_"))
def test_matches_tf(builder, vocabularies):
    got, want = _run(builder), TF[builder.__name__]
    assert sorted(got) == sorted(want)
    for key, recorded in want.items():
        if key in FACTS:
            assert json.loads(json.dumps(got[key])) == recorded, key
        elif key == "after_step":
            assert sorted(got[key]) == sorted(recorded)
            for name, values in recorded.items():
                np.testing.assert_allclose(got[key][name], _dense(values), atol=2e-5, err_msg=name)
        else:
            np.testing.assert_allclose(got[key], _dense(recorded), atol=2e-5, err_msg=key)


CASES = cases.error_cases(tf)


@pytest.mark.parametrize("label,call", CASES, ids=[label for label, _ in CASES])
def test_errors_and_results_as_tf(label, call, vocabularies):
    """TF's error class and first line for bad input; TF's result (str) otherwise."""
    kind, message = TF["errors"][label]
    with tf.Graph().as_default():
        if kind == "OK":
            assert str(call()) == message
            return
        with pytest.raises(Exception) as info:
            call()
    assert (type(info.value).__name__, str(info.value).split("\n")[0]) == (kind, message)


def test_input_layer_is_column_blocks_in_name_order():
    """NumPy's view of input_layer: each column's block, blocks sorted by column name."""
    fc = tf.feature_column
    b = fc.numeric_column("b", shape=(2,))
    a = fc.indicator_column(fc.categorical_column_with_identity("a", 3))
    c = fc.bucketized_column(fc.numeric_column("c"), [0.0, 1.0])
    with tf.Graph().as_default():
        feats = {
            "a": tf.constant([[2], [0]], tf.int64),
            "b": tf.constant([[1.0, 2.0], [3.0, 4.0]]),
            "c": tf.constant([-1.0, 5.0]),
        }
        with tf.Session() as s:
            out = s.run(fc.input_layer(feats, [b, c, a]))
    buckets = np.eye(3)[np.digitize([-1.0, 5.0], [0.0, 1.0])]
    want = np.concatenate([np.eye(3)[[2, 0]], [[1.0, 2.0], [3.0, 4.0]], buckets], axis=1)
    np.testing.assert_array_equal(out, want)


def test_identity_ids_out_of_range_pass_as_in_tf2():
    """TF 2 checks nothing without a default: such ids get no 1 in an indicator."""
    fc = tf.feature_column
    col = fc.indicator_column(fc.categorical_column_with_identity("i", 3))
    with tf.Graph().as_default(), tf.Session() as s:
        out = s.run(fc.input_layer({"i": tf.constant([[1], [5], [-3]])}, [col]))
    np.testing.assert_array_equal(out, [[0, 1, 0], [0, 0, 0], [0, 0, 0]])


def test_embeddings_start_from_a_checkpoint(tmp_path):
    """ckpt_to_load_from/tensor_name_in_ckpt: the variable starts as the checkpoint's
    tensor (TF's output recorded from the same program)."""
    fc = tf.feature_column
    with tf.Graph().as_default():
        v = tf.get_variable(
            "emb", initializer=tf.constant(np.arange(6.0).reshape(3, 2) / 2, tf.float32)
        )
        with tf.Session() as s:
            s.run(v.initializer)
            path = tf.train.Saver().save(s, str(tmp_path / "m"))
    with tf.Graph().as_default():
        i, j = (
            fc.categorical_column_with_identity("i", 3),
            fc.categorical_column_with_identity("j", 3),
        )
        kw = {"ckpt_to_load_from": path, "tensor_name_in_ckpt": "emb"}
        cols = [fc.embedding_column(i, 2, **kw), *fc.shared_embedding_columns([i, j], 2, **kw)]
        out = fc.input_layer({"i": tf.constant([[2], [0]]), "j": tf.constant([[1], [1]])}, cols)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got = s.run(out)
    np.testing.assert_allclose(got, [[2, 2.5, 2, 2.5, 1, 1.5], [0, 0.5, 0, 0.5, 1, 1.5]])
