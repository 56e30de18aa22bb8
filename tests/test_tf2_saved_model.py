"""TF 2.x SavedModels (tf.saved_model.save of a tf.Module, Keras 3's `model.export`, an
LSTM and GRU among them) load with TF1's loader and serve here, to TF's outputs.

The models and TF's outputs come from tests/fixtures/record_tf2_saved_model_tf.py.  TF
2.x writes its serving signature as a StatefulPartitionedCall of a function over
resource variables, and a saver whose functions call DisableCopyOnRead.
"""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer

import asyncflow as af
from asyncflow.serving import rest, server

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "tf2_saved_model"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


def _run_signature(name: str, x):
    with af.Graph().as_default() as g, af.Session(graph=g) as sess:
        meta = af.saved_model.loader.load(sess, ["serve"], str(FIXTURES / name))
        sig = meta.signature_def["serving_default"]
        (arg,) = sig.inputs.values()
        return sess.run({k: v.name for k, v in sig.outputs.items()}, {arg.name: x})


def test_tf_module_saved_model_runs_to_tf_outputs():
    want = EXPECTED["module"]
    got = _run_signature("module", want["x"])
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
    assert got["n"] == want["n"] and got["n"].dtype == np.int32


def test_keras3_export_runs_to_tf_outputs():
    want = EXPECTED["keras3"]
    got = _run_signature("keras3", want["x"])
    np.testing.assert_allclose(got["output_0"], want["output_0"], rtol=1e-5, atol=1e-6)


async def test_keras3_export_served_over_rest(tmp_path):
    shutil.copytree(FIXTURES / "keras3", tmp_path / "1")
    reg = rest.ModelRegistry()
    try:
        await server.load_version(reg, "k", str(tmp_path), 1)
        app = rest.make_app(reg, max_body_bytes=1 << 16, max_depth=16)
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            want = EXPECTED["keras3"]
            resp = await client.post("/v1/models/k:predict", json={"instances": want["x"]})
            assert resp.status == 200, await resp.text()
            body = await resp.json()
    finally:
        await reg.aclose()
    np.testing.assert_allclose(body["predictions"], want["output_0"], rtol=1e-5, atol=1e-6)


def test_keras3_lstm_gru_export_runs_to_tf_outputs():
    # TF 2.x writes each recurrent layer as a While loop (control flow v2) whose loop
    # variables include TensorLists: lowered to frames on import, run by TensorList ops.
    want = EXPECTED["keras3_rnn"]
    got = _run_signature("keras3_rnn", want["x"])
    np.testing.assert_allclose(got["output_0"], want["output_0"], rtol=1e-5, atol=1e-6)


def test_control_flow_v2_saved_model_runs_to_tf_outputs():
    # StatelessIf, StatelessCase (an index out of range runs the last branch), a While
    # over a TensorArray (TensorLists), map_fn, and the ops around them.
    want = EXPECTED["control_flow"]
    with af.Graph().as_default() as g, af.Session(graph=g) as sess:
        meta = af.saved_model.loader.load(sess, ["serve"], str(FIXTURES / "control_flow"))
        sig = meta.signature_def["serving_default"]
        fetch = {k: v.name for k, v in sig.outputs.items()}
        for k in want["k"]:
            got = sess.run(fetch, {sig.inputs["x"].name: want["x"], sig.inputs["k"].name: k})
            for name, value in want["out"][str(k)].items():
                np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6)
