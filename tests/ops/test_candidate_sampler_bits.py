"""Candidate samplers draw for draw as TF 2.21 (fixtures/candidate_sampler_tf.json,
recorded by fixtures/record_candidate_sampler_tf.py from
fixtures/candidate_sampler_cases.py): uniform, log-uniform, learned unigram and fixed
unigram samplers (unigrams, distortion, reserved ids and shards, a vocabulary file),
with and without `unique`, three runs each (a learned sampler counts the true classes
it saw), their float32 expected counts bit for bit; then word2vec's nce_loss and
sampled_softmax_loss over three runs."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import candidate_sampler_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "candidate_sampler_tf.json").read_text())


def _bits(x) -> list[int]:
    return np.asarray(x, np.float32).view(np.uint32).reshape(-1).tolist()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.csv"
    vocab.write_text(cases.VOCAB)
    with ops.Graph().as_default():
        out = cases.build(af, str(vocab))
        with Session() as sess:
            return [sess.run(out) for _ in range(cases.RUNS)]


@pytest.mark.parametrize("key", sorted(TF["samplers"]))
def test_sampler_runs_as_tf(runs, key):
    for i, (r, want) in enumerate(zip(runs, TF["samplers"][key])):
        sampled, true_exp, sampled_exp = r[key]
        assert sampled.tolist() == want["sampled"], (key, i)
        assert _bits(true_exp) == want["true_expected"], (key, i)
        assert _bits(sampled_exp) == want["sampled_expected"], (key, i)


def test_sampled_losses_as_tf():
    with ops.Graph().as_default():
        losses = cases.build_losses(af)
        with Session() as sess:
            got = [sess.run(losses) for _ in range(cases.RUNS)]
    for key in losses:
        for i, r in enumerate(got):
            want = np.array(TF["losses"][key][i], np.uint32).view(np.float32)
            # (the candidates are TF's exactly; the matmuls' sums may differ in the
            # last bits, so the losses are compared to float32 rounding)
            np.testing.assert_allclose(r[key], want, rtol=2e-6, err_msg=f"{key} run {i}")


def test_thread_unsafe_unigram_is_the_learned_sampler():
    t = np.array([[1, 2], [3, 9]], np.int64)
    with ops.Graph().as_default():
        a = af.nn.learned_unigram_candidate_sampler(t, 2, 5, True, 12, seed=3)
        b = ops.apply_op(
            "ThreadUnsafeUnigramCandidateSampler",
            [ops.convert_to_tensor(t)],
            {"num_true": 2, "num_sampled": 5, "unique": True, "range_max": 12,
             "seed": a[0].op.get_attr("seed"), "seed2": a[0].op.get_attr("seed2")},
        ).outputs  # fmt: skip
        with Session() as sess:
            for _ in range(3):
                x, y = sess.run([list(a), list(b)])
                for u, v in zip(x, y):
                    assert np.array_equal(u, v)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda t: af.nn.uniform_candidate_sampler(t, 1, 5, True, 3), "range is too small"),
        (lambda t: af.nn.uniform_candidate_sampler(t, 2, 1, True, 3), "num_true columns"),
        (
            lambda t: af.nn.learned_unigram_candidate_sampler(t + 9, 1, 1, False, 5),
            r"`true_candidate` out of range \[0, 5\), received 9",
        ),
        (
            lambda t: af.nn.fixed_unigram_candidate_sampler(t, 1, 1, False, 4, unigrams=[1.0]),
            "must be equal to weights size",
        ),
    ],
)
def test_errors_as_tf(build, message):
    with ops.Graph().as_default():
        s = build(af.constant([[0]], af.int64))
        with Session() as sess, pytest.raises(errors.InvalidArgumentError, match=message):
            sess.run(s)
