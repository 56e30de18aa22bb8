"""SavedModel warm-up (asyncflow.serving.warmup): assets.extra/tf_serving_warmup_requests
replayed when a version loads, as TF Serving does.

The warm-up file of the main test was written by TensorFlow's own TFRecordWriter, its
PredictionLog records by TF Serving's generated code (tests/fixtures/
record_serving_grpc_tf.py): a Predict, a Classify, a Regress and a MultiInference log.
The broken files are written here, with asyncflow's TFRecord writer.
"""

import base64
import shutil

import numpy as np
import pytest
from test_serving_grpc import FIXTURE
from test_serving_rest import X, _ref, base_path  # noqa: F401 (fixture)

from asyncflow import errors
from asyncflow.protos.serving import prediction_log_pb2
from asyncflow.python_io import TFRecordWriter
from asyncflow.serving import aload, warmup
from asyncflow.serving import registry as reg_mod
from asyncflow.serving.config import ModelConfig
from asyncflow.serving.manager import VersionManager


@pytest.fixture
def layout(base_path, tmp_path):  # noqa: F811
    """add(v, records) copies export v as version v of a fresh base path, with a warm-up
    file of `records` (bytes: the whole file; list: records to write; None: no file)."""
    base = tmp_path / "m"
    base.mkdir()

    def add(version, records=None):
        shutil.copytree(f"{base_path}/{version}", base / str(version))
        if records is None:
            return
        path = base / str(version) / "assets.extra" / "tf_serving_warmup_requests"
        path.parent.mkdir()
        if isinstance(records, bytes):
            path.write_bytes(records)
            return
        with TFRecordWriter(str(path)) as w:
            for r in records:
                w.write(r if isinstance(r, bytes) else r.SerializeToString())

    return base, add


@pytest.fixture
async def managed(layout):
    base, add = layout
    registry = reg_mod.ModelRegistry()
    mgr = VersionManager(registry, [ModelConfig("m", str(base))], poll_wait_s=0)
    yield registry, mgr, add
    await mgr.aclose()
    await registry.aclose()


async def _load_steps(base):
    """The steps a load itself runs (restoring the variables), before any warm-up."""
    model = await aload(f"{base}/1")
    steps = model.session._master._step_counter
    await model.aclose()
    return steps


def _states(registry):
    return {v: (state, None if e is None else (type(e), e.message))
            for v, state, e in registry.status("m")}  # fmt: skip


async def test_tf_servings_warmup_file_is_replayed_before_the_version_serves(
    managed,
    base_path,  # noqa: F811
):
    registry, mgr, add = managed
    load_steps = await _load_steps(base_path)
    add(1, base64.b64decode(FIXTURE["warmup_file"]))
    await mgr.poll_once()
    assert _states(registry) == {1: ("AVAILABLE", None)}
    _, model = registry.get("m")
    # Four records, four steps: predict, classify, regress, and the multi-inference's one.
    assert model.session._master._step_counter == load_steps + 4
    plans = len(model.session._master.plans)
    got = await model.predict({"x": np.array(X, np.float32)})
    np.testing.assert_allclose(got["y"], _ref(X, 1), rtol=1e-6)
    assert len(model.session._master.plans) == plans  # the request found its plan compiled


def _predict_log(**inputs):
    from asyncflow import graph_io

    log = prediction_log_pb2.PredictionLog()
    log.predict_log.request.model_spec.name = "another name"  # ignored: the version loading
    for key, value in inputs.items():
        graph_io.tensor_proto(np.asarray(value, np.float32), log.predict_log.request.inputs[key])
    return log


async def test_records_run_on_the_loading_version_and_unknown_kinds_are_skipped(
    managed,
    base_path,  # noqa: F811
):
    registry, mgr, add = managed
    load_steps = await _load_steps(base_path)
    add(1, [_predict_log(x=X), prediction_log_pb2.PredictionLog(), _predict_log(x=X[:1])])
    await mgr.poll_once()
    _, model = registry.get("m")
    assert model.session._master._step_counter == load_steps + 2  # the empty one is skipped


@pytest.mark.parametrize(
    "records, error, message",
    [
        ([_predict_log(z=X)], errors.InvalidArgumentError,
         "input tensor alias not found in signature: z. Inputs expected to be in the set {x}."),
        ([b"\x2a\x00"], errors.UnimplementedError, "Unsupported log_type for warmup: 5"),
        ([b"\xff\xff\xff"], errors.InvalidArgumentError, "Failed to parse warmup record"),
        ([b""] * (warmup.MAX_RECORDS + 1), errors.InvalidArgumentError,
         "Number of warmup records exceeds the maximum (1000)"),
        (b"not a TFRecord file", errors.DataLossError,
         "Please verify your warmup data is in TFRecord format."),
    ],
)  # fmt: skip
async def test_a_failing_warmup_fails_the_load_and_keeps_the_served_version(
    managed, records, error, message
):
    registry, mgr, add = managed
    add(1)  # no warm-up file: loads (with the built-in warm-up on zeros)
    await mgr.poll_once()
    add(2, records)
    await mgr.poll_once()
    states = _states(registry)
    assert states[1] == ("AVAILABLE", None)
    state, (kind, text) = states[2]
    assert state == "END" and kind is error and message in text
    version, _ = registry.get("m")
    assert version == 1
