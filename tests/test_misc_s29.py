"""Session 29's odds against TF 2.21's recorded results (tests/fixtures/misc_s29_tf.json,
recorded by record_misc_s29_tf.py from misc_s29_cases.py with tensorflow.compat.v1 in
graph mode): DynamicRaggedShape's equality, dtypes and tf.reshape to one; tf.where and
tf.where_v2 with ragged operands.  Values, and errors by class and when they came.  And
tf.profiler.profile's results as TF's GraphNodeProto / MultiGraphNodeProto bytes
(tfprof_s29_tf.json, recorded by record_tfprof_s29_tf.py), and tf.keras.utils.model_to_dot's
dot source as TF's (plot_model_s29_tf.json, by record_plot_model_s29_tf.py), and
tf.raw_ops.ChooseFastestBranchDataset's elements (choose_fastest_s29_tf.json).
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
from choose_fastest_s29_cases import BRANCHES  # noqa: E402
from choose_fastest_s29_cases import CASES as FASTEST_CASES  # noqa: E402
from dynamic_ragged_shape_s28_cases import describe  # noqa: E402
from misc_s29_cases import CASES  # noqa: E402
from plot_model_s29_cases import CASES as DOT_CASES  # noqa: E402
from plot_model_s29_cases import describe as describe_dot  # noqa: E402
from tfprof_s29_cases import PROFILES, profile  # noqa: E402

from asyncflow.protos import tfprof_output_pb2  # noqa: E402

TABLE = json.loads((HERE / "misc_s29_tf.json").read_text())


def test_every_case_is_recorded():
    assert sorted(TABLE) == sorted(CASES)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_tf(name):
    assert describe(tf, CASES[name]) == TABLE[name]


# -- tfprof results as TF's messages (tfprof_s29_tf.json: TF's SerializeToString bytes)

PROF_TABLE = json.loads((HERE / "tfprof_s29_tf.json").read_text())
SAME_TREE = sorted(PROFILES)


def _tf_bytes(name) -> bytes:
    return bytes.fromhex(PROF_TABLE[name]["hex"])


def test_every_profile_is_recorded():
    assert sorted(PROF_TABLE) == sorted(PROFILES)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", SAME_TREE)
def test_profile_serializes_as_tf(name):
    ours = profile(tf, name)
    assert type(ours).__name__ == PROF_TABLE[name]["type"]
    assert ours.SerializeToString(deterministic=True) == _tf_bytes(name)
    # TF's bytes read back as the same tree, and serialize again to the same bytes.
    back = type(ours).FromString(_tf_bytes(name))
    assert back == ours
    assert [c.name for c in back.children] == [c.name for c in ours.children]
    assert back.SerializeToString(deterministic=True) == _tf_bytes(name)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_tf_profile_round_trips(name):
    cls = getattr(tf.profiler, PROF_TABLE[name]["type"])
    node = cls.FromString(_tf_bytes(name))
    again = cls()
    assert again.ParseFromString(node.SerializeToString()) > 0
    assert again.SerializeToString(deterministic=True) == _tf_bytes(name)
    message = getattr(tfprof_output_pb2, PROF_TABLE[name]["type"]).FromString(_tf_bytes(name))
    assert again.to_proto() == message
    assert again.total_float_ops == message.total_float_ops


def test_node_fields_from_tf_bytes():
    root = tf.profiler.GraphNodeProto.FromString(_tf_bytes("scope_all"))
    by_name = {c.name: c for c in root.children}
    assert by_name["qi"].input_shapes == {0: None}  # (unknown rank)
    assert by_name["uw"].input_shapes == {0: [None, 3], 1: [3, 4]}
    assert by_name["plus"].input_shapes == {0: [1], 1: [1]}  # (TF writes scalars as [1])
    assert root.total_parameters == 18 and root.total_float_ops == 56
    with pytest.raises(TypeError):
        hash(root)


def test_bad_bytes():
    from google.protobuf.message import DecodeError

    with pytest.raises(DecodeError):
        tf.profiler.GraphNodeProto.FromString(b"\xff\xff\xff")


# -- tf.keras.utils.model_to_dot / plot_model (plot_model_s29_tf.json: TF's dot sources)

DOT_TABLE = json.loads((HERE / "plot_model_s29_tf.json").read_text())


def test_every_dot_case_is_recorded():
    assert sorted(DOT_TABLE) == sorted(DOT_CASES)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(DOT_CASES))
def test_model_to_dot_matches_tf(name):
    assert describe_dot(tf, name) == DOT_TABLE[name]


def _small_model():
    return tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,), name="d")])


@pytest.mark.timeout(60)
def test_without_pydot_tf_import_errors(monkeypatch):
    monkeypatch.setitem(sys.modules, "pydot", None)  # (import fails)
    with tf.Graph().as_default():
        model = _small_model()
        with pytest.raises(ImportError, match=r"install pydot .* for model_to_dot to work"):
            tf.keras.utils.model_to_dot(model)
        with pytest.raises(ImportError, match=r"and install graphviz .* for plot_model"):
            tf.keras.utils.plot_model(model, to_file="unused.png")


@pytest.mark.timeout(60)
def test_plot_model_draws_with_graphviz_else_import_error(tmp_path):
    from asyncflow.keras import vis_utils

    with tf.Graph().as_default():
        model = _small_model()
        target = tmp_path / "model.dot"
        if vis_utils._have_graphviz():
            tf.keras.utils.plot_model(model, to_file=str(target))
            assert "d|Dense" in target.read_text()
        else:  # (no `dot` program: TF's check fails as ours)
            with pytest.raises(ImportError, match="graphviz"):
                tf.keras.utils.plot_model(model, to_file=str(target))
            assert not target.exists()


def test_model_not_built():
    with tf.Graph().as_default():
        model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
        with pytest.raises(ValueError, match="has not yet been built"):
            tf.keras.utils.model_to_dot(model)


# -- tf.raw_ops.ChooseFastestBranchDataset (choose_fastest_s29_tf.json: TF's results)

FASTEST_TABLE = json.loads((HERE / "choose_fastest_s29_tf.json").read_text())


def test_every_choose_fastest_case_is_recorded():
    assert sorted(FASTEST_TABLE) == sorted(FASTEST_CASES)


def _choose_fastest(n, branches, num, den, per, shape, lengths):
    from asyncflow.data.dataset import _Traced
    from asyncflow.data.structure import _DatasetSpec, _Spec
    from asyncflow.ops import dataset_more

    with tf.Graph().as_default():
        source = tf.data.Dataset.range(n)
        traced = [
            _Traced(lambda d, b=b: BRANCHES[b](tf, d), _DatasetSpec(_Spec(tf.int64, [])), b)
            for b in branches
        ]
        attrs = dataset_more.branches_attrs([(t.inputs[0], t.outputs[0], t.captures)
                                             for t in traced])  # fmt: skip
        if lengths is not None:
            attrs["other_arguments_lengths"] = lengths
        variant = tf.raw_ops.ChooseFastestBranchDataset(
            input_dataset=tf.data.experimental.to_variant(source), ratio_numerator=num,
            ratio_denominator=den, other_arguments=[], num_elements_per_branch=per,
            output_types=[tf.int64], output_shapes=[tf.TensorShape(shape)], **attrs,
        )  # fmt: skip
        ds = tf.data.experimental.from_variant(variant, tf.TensorSpec(shape, tf.int64))
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        card = tf.data.experimental.cardinality(ds)
        with tf.Session() as sess:
            try:
                out = {"cardinality": int(sess.run(card)), "elements": []}
                while True:
                    out["elements"].append(sess.run(nxt).tolist())
            except tf.errors.OutOfRangeError:
                return out
            except tf.errors.OpError as e:
                return {"error": type(e).__name__, "message": e.message.split("\n")[0]}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(FASTEST_CASES))
def test_choose_fastest_branch_matches_tf(name):
    assert _choose_fastest(*FASTEST_CASES[name]) == FASTEST_TABLE[name]
