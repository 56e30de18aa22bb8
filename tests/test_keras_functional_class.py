"""The class of functional Keras models against TF 2.21's tf_keras:
`tf.keras.Model(inputs, outputs)` makes a `Functional` (a Model subclass, Sequential's
base, "Functional" in configs, JSON and summaries), as do from_config, model_from_json
(of "Functional" or "Model"), clone_model and load_model of h5 files TF and asyncflow
wrote.

tests/fixtures/keras_functional_cases.py recorded keras_functional_tf.json (`classes`
under TF, and TF's load_model of keras_functional/{tf,af}_fn.h5 and of asyncflow's
SavedModel of the same model).
"""

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import keras_functional_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "keras_functional_tf.json").read_text())
K = tf.keras

# TF 2 behaviour on, as the recorder ran TF; `keras_session` is a fresh graph and Session.
pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("keras_v2_behavior")]


def test_functional_classes_as_tf(keras_session):
    del keras_session
    assert cases.classes(K) == RECORDED["classes"]


@pytest.mark.parametrize("who", ["tf", "af"])
def test_h5_loads_as_functional(keras_session, who):
    """The h5 file of either library loads as TF loads it (TF loads asyncflow's too)."""
    del keras_session
    want = RECORDED[f"{who}_h5"]
    assert RECORDED["af_h5"]["type"] == RECORDED["tf_h5"]["type"] == "Functional"
    got = cases.loaded(K, str(FIXTURES / "keras_functional" / f"{who}_fn.h5"))
    np.testing.assert_allclose(got.pop("predict"), want["predict"], rtol=1e-6)
    assert got == {k: v for k, v in want.items() if k != "predict"}


def test_saved_files_name_the_class_functional(keras_session, tmp_path):
    """asyncflow's h5 and SavedModel of a functional model name its class "Functional"
    (TF's load_model of the SavedModel made a Functional: RECORDED["af_sm"]), and load
    back as one."""
    del keras_session
    import h5py

    model = cases.functional(K)
    model.save(str(tmp_path / "m.h5"))
    model.save(str(tmp_path / "sm"))
    with h5py.File(tmp_path / "m.h5", "r") as f:
        assert json.loads(f.attrs["model_config"])["class_name"] == "Functional"
    got = cases.loaded(K, str(tmp_path / "sm"))
    want = RECORDED["af_sm"]
    np.testing.assert_allclose(got.pop("predict"), want["predict"], rtol=1e-6)
    assert got == {k: v for k, v in want.items() if k != "predict"}
