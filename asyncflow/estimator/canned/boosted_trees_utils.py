"""Reading a trained boosted trees ensemble (TF's boosted_trees_utils): gain-based
feature importances and, from BoostedTreesExampleDebugOutputs, each example's
directional feature contributions.  Both in NumPy, as TF's, on the ensemble proto.
"""

from __future__ import annotations

import collections

import numpy as np

from asyncflow.protos import boosted_trees_pb2

__all__ = ["explanations", "feature_importances", "sum_by_name_and_sort"]


def _tree_importances(tree, num_features) -> np.ndarray:
    importances = np.zeros(num_features)
    for node in tree.nodes:
        kind = node.WhichOneof("node")
        if kind == "bucketized_split":
            importances[node.bucketized_split.feature_id] += node.metadata.gain
        elif kind == "leaf":
            assert node.metadata.gain == 0
        else:
            raise ValueError(f"Unexpected split type {kind}")
    return importances


def feature_importances(ensemble, num_features, normalize) -> np.ndarray:
    """Each feature's gains summed over the ensemble's splits, weighted by tree weight
    (TF's gain-based importances).

    Raises:
      AssertionError: normalize with a negative importance, or with no split at all.
      ValueError: a split other than a bucketized one.
    """
    per_tree = np.array([_tree_importances(t, num_features) for t in ensemble.trees])
    weights = np.array(ensemble.tree_weights).reshape(-1, 1)
    importances = np.sum(per_tree * weights, axis=0)
    if normalize:
        assert np.all(importances >= 0), "feature_importances must be non-negative."
        normalizer = np.sum(importances)
        assert normalizer > 0, "Trees are all empty or contain only a root node."
        importances /= normalizer
    return importances


def sum_by_name_and_sort(names, values) -> collections.OrderedDict:
    sums: dict = {}
    for name, value in zip(names, values, strict=True):
        sums[name] = sums.setdefault(name, 0) + value
    return collections.OrderedDict(sorted(sums.items(), key=lambda kv: abs(kv[1]), reverse=True))


def explanations(serialized, names, classification):
    """(bias, DFCs) of one example from its DebugOutput: the change each split made to
    the prediction (sigmoid of the logits for a classifier), summed per column."""
    debug = boosted_trees_pb2.DebugOutput.FromString(bytes(serialized))
    logits = np.array(debug.logits_path)
    predictions = 1 / (1 + np.exp(-logits)) if classification else logits
    deltas = predictions[1:] - predictions[:-1]
    contribs = np.bincount(
        np.array(debug.feature_ids, np.int64), weights=deltas, minlength=len(names)
    )
    return predictions[0], sum_by_name_and_sort(names, contribs)
