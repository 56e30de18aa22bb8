"""BoostedTreesClassifier / BoostedTreesRegressor trained as TF trains them.

Expected results were recorded from TF 2.8.4 with tensorflow_estimator 2.8
(tests/fixtures/record_boosted_trees_estimator_tf.py; TF 2.15.1's estimators run on
kernels neither it nor TF 2.21 ships): the checkpointed ensemble (stamp, serialized
TreeEnsemble byte for byte), the other checkpointed values, and the predictions.

The classifiers' leaf values and gains are compared to a tolerance: their closed-form
logistic gradient calls Exp, and asyncflow's Exp (NumPy's) differs from TF's (Eigen's)
by 1 ulp on some float32 inputs, so from the second layer on a leaf may differ by a
few ulp (the first tree, grown from zero logits, is TF's to the bit); the head's
probabilities differ by as much.  With three classes the maxent loss's gradients and
hessians (tf.gradients through Exp, twice) differ by a few ulp from the first layer
on, so leaves agree to about 1e-6 relative (the hessian solve itself is TF's to the
bit: tests/test_boosted_trees.py).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow.protos import boosted_trees_pb2

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE / "fixtures"))
import boosted_trees_estimator_cases as cases  # noqa: E402

TF = json.loads((HERE / "fixtures" / "boosted_trees_estimator_tf.json").read_text())

# Regression (squared loss) never calls Exp: its ensembles are TF's to the byte.
EXACT = [
    "regressor_center_bias",
    "regressor_post_pruning",
    "regressor_two_batches",
    "regressor_numeric",
    "regressor_categorical",
]
CLASSIFIERS = [
    "classifier",
    "classifier_center_bias",
    "classifier_numeric",
    "classifier_3_classes",
]
SERIALIZED = "boosted_trees:0_serialized"
_RESULTS: dict = {}


@pytest.fixture
def results(tmp_path_factory):
    """Each case trained once, when a test first asks for it (training is the slow part)."""

    def get(name):
        if name not in _RESULTS:
            _RESULTS[name] = cases.run(tf, name, str(tmp_path_factory.mktemp(name)))
        return _RESULTS[name]

    return get


def _ensemble(hex_blob: str):
    return boosted_trees_pb2.TreeEnsemble.FromString(bytes.fromhex(hex_blob))


def _floats_apart(ens) -> list:
    """The ensemble's float fields (leaf values, gains), each set to 0 in `ens`."""
    values = []
    for tree in ens.trees:
        for node in tree.nodes:
            for leaf in (node.leaf, node.metadata.original_leaf):
                if leaf.scalar:
                    values.append(leaf.scalar)
                    leaf.scalar = 0.0
                values.extend(leaf.vector.value)
                leaf.vector.value[:] = [0.0] * len(leaf.vector.value)
            if node.metadata.gain:
                values.append(node.metadata.gain)
                node.metadata.gain = 0.0
    return values


@pytest.mark.parametrize("name", EXACT)
def test_checkpointed_ensemble_is_tfs(results, name):
    mine, theirs = results(name)["checkpoint"], TF[name]["checkpoint"]
    assert sorted(mine) == sorted(theirs)
    assert mine == theirs  # the serialized ensemble to the byte, stamp and variables


@pytest.mark.parametrize("name", EXACT)
def test_predictions_are_tfs(results, name):
    assert results(name)["predictions"] == TF[name]["predictions"]


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_classifier_grows_tfs_trees(results, name):
    """TF's trees: the same splits, stamps and variables; leaf values and gains within a
    few ulp (the logistic gradient's Exp); without bias centring the first tree to the
    bit."""
    mine, theirs = results(name)["checkpoint"], TF[name]["checkpoint"]
    assert {k: v for k, v in mine.items() if k != SERIALIZED} == {
        k: v for k, v in theirs.items() if k != SERIALIZED
    }
    a, b = _ensemble(mine[SERIALIZED]), _ensemble(theirs[SERIALIZED])
    if name in ("classifier", "classifier_numeric"):  # from zero logits: Exp(0) is exact
        assert a.trees[0] == b.trees[0]
    np.testing.assert_allclose(_floats_apart(a), _floats_apart(b), rtol=1e-5, atol=1e-7)
    assert a == b  # everything else: structure, thresholds, metadata
    np.testing.assert_allclose(results(name)["logits"], TF[name]["logits"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(
        results(name)["probabilities"], TF[name]["probabilities"], rtol=1e-5, atol=1e-7
    )


@pytest.mark.parametrize("name", [n for n in cases.CASES if not n.endswith("categorical")])
def test_feature_importances_are_tfs(results, name):
    """Gain sums per column, raw and normalized (TF's AssertionError without a split)."""
    for normalize in (False, True):
        key = f"importances_{normalize}"
        mine, theirs = results(name)[key], TF[name][key]
        if name in EXACT or isinstance(theirs, str):
            assert mine == theirs
            continue
        assert [k for k, _ in mine] == [k for k, _ in theirs]
        np.testing.assert_allclose([v for _, v in mine], [v for _, v in theirs], rtol=1e-5)


@pytest.mark.parametrize("name", ["regressor_center_bias", "classifier_center_bias"])
def test_explanations_are_tfs(results, name):
    """experimental_predict_with_explanations: each example's bias and per-column
    directional feature contributions."""
    mine, theirs = results(name)["explanations"], TF[name]["explanations"]
    assert len(mine) == len(theirs) == len(cases.X1)
    for (bias, dfc), (tf_bias, tf_dfc) in zip(mine, theirs, strict=True):
        assert [k for k, _ in dfc] == [k for k, _ in tf_dfc]
        if name in EXACT:
            assert (bias, dfc) == (tf_bias, tf_dfc)
        else:
            np.testing.assert_allclose(bias, tf_bias, rtol=1e-5)
            np.testing.assert_allclose([v for _, v in dfc], [v for _, v in tf_dfc], atol=1e-6)


def test_explanations_need_center_bias(tmp_path):
    est = tf.estimator.BoostedTreesRegressor(cases.columns(tf), 1, model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="center_bias must be enabled"):
        next(est.experimental_predict_with_explanations(cases._predict_input(tf)))


def test_training_stops_after_n_trees(results):
    ens = _ensemble(results("classifier")["checkpoint"][SERIALIZED])
    assert [m.is_finalized for m in ens.tree_metadata] == [True, True, False]
    assert results("classifier")["checkpoint"]["global_step"] == 4


def test_bad_hyperparameters_raise_as_tf():
    cols = cases.columns(tf)
    with pytest.raises(ValueError, match="Expected n_trees > 0, received: 0"):
        tf.estimator.BoostedTreesClassifier(cols, n_batches_per_layer=1, n_trees=0)
    with pytest.raises(ValueError, match="Expected l2 >= 0, received: -1"):
        tf.estimator.BoostedTreesRegressor(cols, n_batches_per_layer=1, l2_regularization=-1)
    with pytest.raises(ValueError, match="center_bias not yet support with n_classes > 2"):
        tf.estimator.BoostedTreesClassifier(cols, 1, n_classes=3, center_bias=True)


def test_pruning_needs_tree_complexity(tmp_path):
    est = tf.estimator.BoostedTreesRegressor(
        cases.columns(tf), 1, model_dir=str(tmp_path), pruning_mode="pre"
    )
    with pytest.raises(ValueError, match="For pruning, tree_complexity must be positive"):
        est.train(cases._train_input(tf, cases.TARGETS, 1), max_steps=1)
