"""sample_from_datasets (list, tensor and dataset weights) and rejection_resample
against TF 2.21's recorded elements (fixtures/resampling_tf.json, recorded by
fixtures/record_resampling_tf.py from fixtures/resampling_cases.py): seeded, the same
elements in the same order, since the selector draws TF's numbers; then the class
frequencies rejection_resample reaches and its build errors."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import resampling_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "resampling_tf.json").read_text())


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _drain(ds, limit=300) -> list:
    nxt = af.data.make_one_shot_iterator(ds).get_next()
    out = []
    with Session() as sess:
        while len(out) < limit:
            try:
                out.append(cases.plain(sess.run(nxt)))
            except af.errors.OutOfRangeError:
                break
    return out


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_same_elements_as_tf(key):
    assert _drain(cases.CASES[key](af)) == TF[key]


def test_rejection_resample_reaches_the_target():
    labels = np.random.RandomState(1).choice(3, 3000, p=[0.6, 0.3, 0.1]).astype(np.int32)
    ds = af.data.Dataset.from_tensor_slices(labels).apply(
        af.data.experimental.rejection_resample(
            lambda x: x, [0.2, 0.3, 0.5], initial_dist=[0.6, 0.3, 0.1], seed=3
        )
    )
    got = np.array([c for c, _ in _drain(ds.take(1500), 1500)])
    freq = np.bincount(got, minlength=3) / len(got)
    np.testing.assert_allclose(freq, [0.2, 0.3, 0.5], atol=0.04)


def test_build_errors():
    two = [af.data.Dataset.range(2), af.data.Dataset.range(2)]
    with pytest.raises(ValueError, match="same length as `datasets`"):
        af.data.experimental.sample_from_datasets(two, [1.0])
    with pytest.raises(TypeError, match="must be either `tf.float32` or `tf.float64`"):
        af.data.experimental.sample_from_datasets(two, af.constant([1, 2]))
    with pytest.raises(ValueError, match="should not be empty"):
        af.data.experimental.sample_from_datasets([])
