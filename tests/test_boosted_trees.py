"""The BoostedTrees* ops against TF's kernels: stats summaries, split gains, quantile
sketches and bucket boundaries, growing, pruning, predicting and serializing
ensembles, and the errors bad input raises.

Expected lines were recorded from TF 2.8.4 (tests/fixtures/record_boosted_trees_tf.py;
TF 2.21 and 2.15.1 register these OpDefs without kernels), float32 values to the bit,
serialized TreeEnsemble protos byte for byte.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors
from asyncflow.protos import boosted_trees_pb2

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE / "fixtures"))
import boosted_trees_cases as cases  # noqa: E402

TF = json.loads((HERE / "fixtures" / "boosted_trees_tf.json").read_text())
R = tf.raw_ops


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_case_matches_tf(name):
    with tf.Graph().as_default(), tf.Session() as sess:
        got = cases.CASES[name](tf, sess)
    assert len(got) == len(TF[name])
    for mine, theirs in zip(got, TF[name], strict=True):
        assert mine == theirs


def test_serialized_ensemble_reads_as_tf_proto():
    """The recorded bytes of TF's ensemble parse with asyncflow's TreeEnsemble message."""
    line = next(x for x in TF["ensemble"] if x.startswith("step2_serialized[1]"))
    blob = bytes.fromhex(eval_list(line)[0])
    ens = boosted_trees_pb2.TreeEnsemble.FromString(blob)
    assert len(ens.trees) == 3 and list(ens.tree_weights) == [1.0, 1.0, 1.0]
    assert ens.tree_metadata[0].is_finalized and ens.tree_metadata[1].is_finalized
    assert ens.growing_metadata.num_layers_attempted == 3
    assert ens.trees[0].nodes[0].WhichOneof("node") == "bucketized_split"
    assert ens.SerializeToString(deterministic=True) == blob


def eval_list(line: str) -> list:
    """The hex strings of a recorded string tensor line."""
    body = line.split(" ", 1)[1]
    return [x.strip(" '") for x in body.strip("[]").split(",")]


def test_handles_of_two_kinds_do_not_share_a_name():
    with tf.Graph().as_default(), tf.Session() as sess:
        e = R.BoostedTreesEnsembleResourceHandleOp(shared_name="bt_same")
        q = R.BoostedTreesQuantileStreamResourceHandleOp(shared_name="bt_same")
        sess.run(
            R.BoostedTreesCreateEnsemble(
                tree_ensemble_handle=e, stamp_token=0, tree_ensemble_serialized=""
            )
        )
        got = sess.run(
            R.IsBoostedTreesQuantileStreamResourceInitialized(quantile_stream_resource_handle=q)
        )
        assert not got


def test_predict_checks_the_features_the_trees_split_on():
    ens = boosted_trees_pb2.TreeEnsemble()
    root = ens.trees.add().nodes.add()
    root.bucketized_split.feature_id = 3
    root.bucketized_split.left_id, root.bucketized_split.right_id = 1, 2
    ens.trees[0].nodes.add().leaf.scalar = 1.0
    ens.trees[0].nodes.add().leaf.scalar = 2.0
    ens.tree_weights.append(1.0)
    ens.tree_metadata.add()
    with tf.Graph().as_default(), tf.Session() as sess:
        h = R.BoostedTreesEnsembleResourceHandleOp(shared_name="bt_check")
        sess.run(
            R.BoostedTreesCreateEnsemble(
                tree_ensemble_handle=h,
                stamp_token=0,
                tree_ensemble_serialized=ens.SerializeToString(),
            )
        )
        pred = R.BoostedTreesPredict(
            tree_ensemble_handle=h, bucketized_features=[[0, 1]], logits_dimension=1
        )
        with pytest.raises(errors.InvalidArgumentError, match="splits on feature 3"):
            sess.run(pred)


def test_quantile_summary_ranks_bound_the_true_ranks():
    """A long stream compresses level by level; each kept value's rank bounds still hold
    its true rank, and the ends are the minimum and the total weight."""
    values = np.random.RandomState(3).uniform(0, 100, 5000).astype(np.float32)
    with tf.Graph().as_default(), tf.Session() as sess:
        out = sess.run(
            R.BoostedTreesMakeQuantileSummaries(
                float_values=[values], example_weights=[1.0], epsilon=0.05
            )
        )
    summary = out[0] if isinstance(out, list) else out
    assert summary.shape[0] < 1000
    assert summary[-1, 3] == 5000 and summary[0, 0] == values.min()
    true_rank = np.searchsorted(np.sort(values), summary[:, 0])
    assert np.all(summary[:, 2] <= true_rank + 1) and np.all(true_rank <= summary[:, 3])
