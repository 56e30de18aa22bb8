"""Unique, UniqueWithCounts, ListDiff (setdiff1d), InvertPermutation against TF 2.21
(tf.compat.v1 graph mode)."""

from __future__ import annotations

import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def test_unique_matches_tf():
    # TF 2.21: unique([4, 1, 4, 3, 1]) = ([4, 1, 3], [0, 1, 0, 2, 1]) (first appearance),
    # op Unique, idx int32, y of static shape (None,).
    y, idx = af.unique([4, 1, 4, 3, 1])
    assert y.op.type == "Unique" and idx.dtype == af.int32 and y.shape.as_list() == [None]
    with Session() as sess:
        got = sess.run([y, idx])
    assert [g.tolist() for g in got] == [[4, 1, 3], [0, 1, 0, 2, 1]]
    with pytest.raises(ValueError):
        af.unique([[1, 2]])


def test_unique_with_counts_matches_tf():
    # TF 2.21: unique_with_counts([b"b", b"a", b"b"], out_idx=int64) = ([b"b", b"a"],
    # [0, 1, 0], [2, 1]), op UniqueWithCounts.
    y, idx, count = af.unique_with_counts([b"b", b"a", b"b"], out_idx=af.int64)
    assert y.op.type == "UniqueWithCounts" and idx.dtype == af.int64
    with Session() as sess:
        got = sess.run([y, idx, count])
    assert got[0].tolist() == [b"b", b"a"]
    assert got[1].tolist() == [0, 1, 0] and got[2].tolist() == [2, 1]


def test_setdiff1d_matches_tf():
    # TF 2.21: setdiff1d([1..6], [1, 3, 5]) = ([2, 4, 6], [1, 3, 5]), op ListDiff.
    out, idx = af.setdiff1d([1, 2, 3, 4, 5, 6], [1, 3, 5])
    assert out.op.type == "ListDiff"
    with Session() as sess:
        assert [g.tolist() for g in sess.run([out, idx])] == [[2, 4, 6], [1, 3, 5]]


def test_invert_permutation_matches_tf():
    # TF 2.21: invert_permutation([3, 4, 0, 2, 1]) = [2, 4, 3, 0, 1]; [0, 0] -> "0 is
    # duplicated in the input."; [0, 5] -> "5 is not between 0 and 2".
    with Session() as sess:
        assert sess.run(af.invert_permutation([3, 4, 0, 2, 1])).tolist() == [2, 4, 3, 0, 1]
        with pytest.raises(errors.InvalidArgumentError, match="0 is duplicated in the input"):
            sess.run(af.invert_permutation([0, 0]))
        with pytest.raises(errors.InvalidArgumentError, match="5 is not between 0 and 2"):
            sess.run(af.invert_permutation([0, 5]))
