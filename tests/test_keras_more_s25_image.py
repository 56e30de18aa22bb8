"""keras.preprocessing.image's array functions (array_to_img, img_to_array, save_img and
load_img in each mode, apply_affine_transform, the seeded random rotation, shift, shear,
zoom, channel and brightness shifts, errors) and ImageDataGenerator (seeded flows, fit,
standardize, subsets, flow_from_directory, errors): the printed results of the
fixtures/keras_more_s25_image*_cases.py must equal those recorded from TF 2.21 with SciPy
and Pillow (fixtures/keras_more_s25_image*_tf.txt, by record_keras_more_s25_image_tf.py).
"""

import contextlib
import io
import pathlib
import sys

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_more_s25_image_cases as cases  # noqa: E402
import keras_more_s25_imagedir_cases as dir_cases  # noqa: E402
import keras_more_s25_imagegen_cases as gen_cases  # noqa: E402


def test_image_cases_match_tf(tmp_path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cases.run(tf, str(tmp_path))
    want = (FIXTURES / "keras_more_s25_image_tf.txt").read_text().splitlines()
    got = out.getvalue().splitlines()
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g == w, g.split(" ", 1)[0]


def test_image_data_generator_cases_match_tf():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        gen_cases.run(tf)
    want = (FIXTURES / "keras_more_s25_imagegen_tf.txt").read_text().splitlines()
    got = out.getvalue().splitlines()
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g == w, g.split(" ", 1)[0]


def test_flow_from_directory_cases_match_tf(tmp_path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        dir_cases.run(tf, str(tmp_path))
    want = (FIXTURES / "keras_more_s25_imagedir_tf.txt").read_text().splitlines()
    got = out.getvalue().splitlines()
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g == w, g.split(" ", 1)[0]
