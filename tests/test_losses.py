"""af.losses against TF's numbers (tests/fixtures/nn_layers_tf.json: every loss under every
reduction, with weights that include zeros), the loss collections and regularizers."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow import losses, regularizers
from asyncflow.session import Session

CASES = json.loads((pathlib.Path(__file__).parent / "fixtures" / "nn_layers_tf.json").read_text())[
    "losses"
]


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


def _case_id(c):
    w = np.asarray(c["weights"])
    return f"{c['fn']}-{c['reduction']}-w{w.shape}{'-smooth' if c['kwargs'] else ''}"


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_loss_against_tf(case):
    args = [np.asarray(a, np.int64 if case["fn"].startswith("sparse") and i == 0 else np.float32)
            for i, a in enumerate(case["args"])]  # fmt: skip
    fn = getattr(losses, case["fn"])
    out = fn(*args, weights=np.asarray(case["weights"], np.float32),
             reduction=case["reduction"], **case["kwargs"])  # fmt: skip
    assert out.dtype == af.float32
    assert out in af.get_collection(af.GraphKeys.LOSSES)
    np.testing.assert_allclose(_run(out), case["out"], rtol=2e-5, atol=1e-6)


def test_default_reduction_and_names():
    labels, preds = np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.0, 5.0])
    out = losses.mean_squared_error(labels, preds, weights=[1.0, 0.0, 2.0])
    # SUM_BY_NONZERO_WEIGHTS: (0.25 * 1 + 4 * 2) / 2 nonzero weights
    np.testing.assert_allclose(_run(out), (0.25 + 8.0) / 2, rtol=1e-6)
    assert out.op.name.startswith("mean_squared_error/")
    zero = losses.absolute_difference(labels, preds, weights=0.0)
    assert _run(zero) == 0.0  # no present weights: 0, not nan


def test_loss_errors():
    with pytest.raises(ValueError, match="labels"):
        losses.mean_squared_error(None, [1.0])
    with pytest.raises(ValueError):
        losses.mean_squared_error([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="Reduction"):
        losses.mean_squared_error([1.0], [1.0], reduction="bogus")
    with pytest.raises(ValueError, match="broadcast"):
        losses.mean_squared_error(np.ones((2, 3)), np.ones((2, 3)), weights=np.ones((2, 2)))
    with pytest.raises(ValueError, match="No losses"):
        losses.get_total_loss()


def test_collections_and_total_loss():
    a = losses.mean_squared_error([1.0], [3.0])
    b = losses.absolute_difference([1.0], [3.0], loss_collection=None)
    assert losses.get_losses() == [a] and b not in losses.get_losses()
    w = af.get_variable("w", initializer=np.array([1.0, -2.0], np.float32),
                        regularizer=regularizers.l2_regularizer(0.5))  # fmt: skip
    assert len(losses.get_regularization_losses()) == 1
    losses.add_loss(af.constant(10.0))
    total = losses.get_total_loss()
    reg = losses.get_regularization_loss()
    assert total.op.name == "total_loss" and reg.op.name == "total_regularization_loss"
    with Session() as sess:
        sess.run(w.initializer)
        t, r = sess.run([total, reg])
    np.testing.assert_allclose(r, 0.5 * (1 + 4) / 2, rtol=1e-6)
    np.testing.assert_allclose(t, 4.0 + 10.0 + r, rtol=1e-6)
    no_reg = losses.get_total_loss(add_regularization_losses=False)
    np.testing.assert_allclose(_run(no_reg), 14.0, rtol=1e-6)


@pytest.mark.parametrize(
    "factory,ref",
    [
        (lambda: regularizers.l1_regularizer(0.5), lambda w: 0.5 * np.abs(w).sum()),
        (lambda: regularizers.l2_regularizer(0.5), lambda w: 0.5 * (w**2).sum() / 2),
        (lambda: regularizers.l1_l2_regularizer(0.5, 0.25),
         lambda w: 0.5 * np.abs(w).sum() + 0.25 * (w**2).sum() / 2),
        (lambda: regularizers.l1(0.5), lambda w: 0.5 * np.abs(w).sum()),
        (lambda: regularizers.l2(0.5), lambda w: 0.5 * (w**2).sum()),
        (lambda: regularizers.l1_l2(0.5, 0.25),
         lambda w: 0.5 * np.abs(w).sum() + 0.25 * (w**2).sum()),
    ],
)  # fmt: skip
def test_regularizers(factory, ref):
    w = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    np.testing.assert_allclose(_run(factory()(w)), ref(w), rtol=1e-6)


def test_regularizer_errors_and_zero_scale():
    assert regularizers.l1_regularizer(0.0)(np.ones(2)) is None
    with pytest.raises(ValueError, match="integer"):
        regularizers.l2_regularizer(1)
    with pytest.raises(ValueError, match="less than 0"):
        regularizers.l1_regularizer(-0.1)
    w = af.get_variable("w2", [2], initializer=af.ones_initializer())
    total = regularizers.apply_regularization(regularizers.l1_regularizer(2.0), [w])
    with Session() as sess:
        sess.run(w.initializer)
        assert sess.run(total) == pytest.approx(4.0)
    assert len(af.get_collection(af.GraphKeys.REGULARIZATION_LOSSES)) == 1
