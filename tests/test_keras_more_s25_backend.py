"""tf.keras.backend functions added in s25 (conv1d/2d/3d, conv2d_transpose, depthwise and
separable conv, pool2d/3d, bias_add, arange, foldl/foldr/map_fn, in_top_k, repeat,
reverse, resize_images/volumes, paddings, CTC cost/decode and label conversion, batch
normalization, random_bernoulli with a seed, errors; rnn with masks, backwards,
constants and time-major input, the focal crossentropies, random_*_variable,
moving_average_update, local_conv1d/2d): the printed results of
fixtures/keras_more_s25_backend_cases.py must equal those recorded from TF 2.21
(fixtures/keras_more_s25_backend_tf.txt, by record_keras_more_s25_backend_tf.py).
"""

import contextlib
import io
import pathlib
import sys

import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_more_s25_backend_cases as cases  # noqa: E402


def test_backend_cases_match_tf():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        with tf.Graph().as_default():
            cases.run(tf)
        with tf.Graph().as_default():
            cases.run_more(tf)
    want = (FIXTURES / "keras_more_s25_backend_tf.txt").read_text().splitlines()
    got = out.getvalue().splitlines()
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g == w, g.split(" ", 1)[0]


def test_manual_variable_initialization():
    K = tf.keras.backend
    with tf.Graph().as_default():
        K.manual_variable_initialization(True)
        try:
            v = K.variable(3.0)
            with pytest.raises(tf.errors.FailedPreconditionError):
                K.get_session().run(v.read_value())
        finally:
            K.manual_variable_initialization(False)
        assert K.get_session().run(v.read_value()) == 3.0
    K.clear_session()
