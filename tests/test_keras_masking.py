"""Keras masking in TF1 graph mode: Masking, Embedding(mask_zero=True), compute_mask
and mask propagation through layers, Sequential and functional models; recurrent
layers (and Bidirectional, TimeDistributed, GlobalAveragePooling1D) honouring the mask;
fit/evaluate weighting the loss and metrics by the output's mask.

Expected values were recorded from TF 2.21 (TF_USE_LEGACY_KERAS=1, v2 behaviour
disabled): the runs of fixtures/keras_masking_cases.py in fixtures/keras_masking_tf.json
(written by fixtures/record_keras_masking_tf.py), and the literals below.
"""

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_masking_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "keras_masking_tf.json").read_text())
L = tf.keras.layers
K = tf.keras.backend


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        tf.set_random_seed(1)
        yield g
    K.clear_session()


def _assert_close(got, want, rtol=1e-5, atol=1e-6):
    if isinstance(want, dict):
        assert sorted(got) == sorted(want)
        for k in want:
            _assert_close(got[k], want[k], rtol, atol)
    elif isinstance(want, list) and want and isinstance(want[0], (list, dict)):
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            _assert_close(a, b, rtol, atol)
    else:
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=atol)


def _mask_of(t):
    m = t._keras_mask
    return None if m is None else (m.name, m.shape.as_list(), m.dtype.name)


def test_mask_metadata_matches_tf():
    ids = tf.keras.Input((4,), dtype="int32")
    emb = L.Embedding(10, 3, mask_zero=True)
    h = emb(ids)
    assert emb.supports_masking and L.Dense(2).supports_masking
    assert not L.Flatten().supports_masking and not L.Conv1D(2, 2).supports_masking
    assert _mask_of(h) == ("embedding/NotEqual:0", [None, 4], "bool")
    d = L.Dense(2)(h)
    assert _mask_of(d) == ("embedding/NotEqual:0", [None, 4], "bool")
    # Layers that do not support masking drop it without complaint.
    assert L.Flatten()(h)._keras_mask is None
    assert L.Conv1D(2, 2)(h)._keras_mask is None
    assert _mask_of(L.Add()([d, d])) == ("add/All:0", [None, 4], "bool")
    assert _mask_of(L.Concatenate()([d, h])) == ("concatenate/All:0", [None, 4], "bool")
    seq = tf.keras.Input((3, 2))
    masked = L.Masking(mask_value=0.5)(seq)
    assert masked.name == "masking/mul:0"
    assert _mask_of(masked) == ("masking/Squeeze:0", [None, 3], "bool")
    assert _mask_of(L.LSTM(2, return_sequences=True)(masked))[0] == "masking/Squeeze:0"
    assert L.LSTM(2)(masked)._keras_mask is None
    outs = L.SimpleRNN(2, return_state=True, return_sequences=True)(masked)
    assert outs[0]._keras_mask is not None and outs[1]._keras_mask is None


def test_compute_mask_calls():
    m = L.Embedding(3, 2, mask_zero=True).compute_mask(tf.constant([[0, 1]]))
    assert m.name == "NotEqual:0" and m.shape.as_list() == [1, 2]
    m2 = L.Masking().compute_mask(tf.constant([[[0.0, 1], [0, 0]]]))
    assert m2.shape.as_list() == [1, 2]
    assert L.Embedding(3, 2).compute_mask(tf.constant([[0, 1]])) is None
    with tf.Session() as sess:
        assert sess.run(m).tolist() == [[False, True]]
        assert sess.run(m2).tolist() == [[True, False]]
    with pytest.raises(TypeError, match="does not support masking"):
        L.Flatten().compute_mask(tf.constant([[1.0]]), tf.constant([[True]]))
    with pytest.raises(ValueError, match="should be a list"):
        L.Add().compute_mask([tf.constant([1.0])] * 2, tf.constant([True]))


def test_lambda_mask():
    x = tf.keras.Input((3, 2))
    masked = L.Masking()(x)
    same = L.Lambda(lambda t: t * 2, mask=lambda inputs, mask: mask)(masked)
    assert same._keras_mask is masked._keras_mask
    assert L.Lambda(lambda t: t * 2)(masked)._keras_mask is None


@pytest.mark.parametrize("steps", [4, None])
@pytest.mark.parametrize("group", cases.LAYER_GROUPS)
def test_masked_layers_match_tf(group, steps):
    got = cases.masked_layers(tf, steps, group)
    want = RECORDED[f"masked_{group}_{steps}"]
    assert got["has_mask"] == want["has_mask"]
    _assert_close(got["values"], want["values"])


def test_unrolled_masked_match_tf():
    got = cases.unrolled_masked(tf)
    _assert_close(got["values"], RECORDED["unrolled_masked"]["values"])


def test_generic_rnn_cells_match_tf():
    got = cases.generic_cells(tf)
    want = RECORDED["generic_cells"]
    assert got["weights"] == want["weights"]
    assert want["weights"][-1] == "rnn_3/stacked_rnn_cells/simple_rnn_cell_1/bias:0"
    _assert_close(got["values"], want["values"])


def test_bidirectional_states_and_lists_match_tf():
    got = cases.bidirectional_states(tf)
    want = RECORDED["bidirectional_states"]
    assert got["has_mask"] == want["has_mask"]
    assert want["has_mask"] == [True] + [False] * 4 + [True, True] + [False] * 3
    _assert_close(got["values"], want["values"])


@pytest.mark.parametrize("arch", ["pooling", "bidirectional"])
def test_text_classifier_fit_matches_tf(arch):
    got = json.loads(json.dumps(cases.text_classifier(tf, arch)))
    _assert_close(got, RECORDED[f"text_{arch}"], rtol=1e-5)


def test_sequence_tagging_metrics_match_tf():
    got = json.loads(json.dumps(cases.sequence_tagging(tf)))
    _assert_close(got, RECORDED["sequence_tagging"], rtol=1e-5)


def test_masked_training_matches_tf():
    got = cases.masked_training(tf)
    _assert_close(json.loads(json.dumps(got)), RECORDED["masked_training"], rtol=1e-5)


def test_masked_two_outputs_match_tf():
    got = json.loads(json.dumps(cases.masked_two_outputs(tf)))
    want = RECORDED["masked_two_outputs"]
    assert got["names"] == want["names"]
    assert got["inner_mask"] is want["inner_mask"] is True
    _assert_close(got["history"], want["history"], rtol=1e-5)
    _assert_close(got["evaluate"], want["evaluate"], rtol=1e-5)


def test_sequence_output_with_sample_weights_and_no_mask():
    # Per-step losses take one sample weight a row (TF 2.21: weighted evaluate of an
    # unmasked sequence output equals the manual weighted mean below).
    model = tf.keras.Sequential([L.Embedding(5, 3, input_length=4), L.Dense(2)])
    model.compile("sgd", "mse")
    y = np.array(cases.Y_SEQ, np.float32)
    sw = np.array(cases.SW, np.float32)
    pred = model.predict(cases.IDS)
    per_step = ((pred - y) ** 2).mean(-1)
    want = (per_step * sw[:, None]).sum() / per_step.size
    got = model.evaluate(cases.IDS, y, sample_weight=sw, verbose=0)
    np.testing.assert_allclose(got, want, rtol=1e-5)
