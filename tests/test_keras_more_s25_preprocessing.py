"""tf.keras.preprocessing.sequence (pad_sequences, make_sampling_table, skipgrams with a
seed, TimeseriesGenerator) and .text (text_to_word_sequence, hashing_trick, Tokenizer in
its modes, JSON round trip, errors): the printed results of the cases in
fixtures/keras_more_s25_preprocessing_cases.py must equal those recorded from TF 2.21
(fixtures/keras_more_s25_preprocessing_tf.txt, by record_keras_more_s25_preprocessing_tf.py).
"""

import contextlib
import io
import pathlib
import sys

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_more_s25_preprocessing_cases as cases  # noqa: E402


def test_preprocessing_cases_match_tf():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cases.run(tf)
    want = (FIXTURES / "keras_more_s25_preprocessing_tf.txt").read_text().splitlines()
    got = out.getvalue().splitlines()
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"line {i + 1}"
