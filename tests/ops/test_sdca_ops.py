"""tf.train.sdca_fprint (op SdcaFprint) against TF 2.21's recorded fingerprints
(tests/fixtures/sdca_cluster_tf.json, recorded by record_sdca_cluster_tf.py) for strings
of every length 0..300 and longer ones: each row is the (low, high) 64-bit halves of
FarmHash's Fingerprint128, as int64."""

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(HERE))
from record_sdca_cluster_tf import strings  # noqa: E402 - the recorder's inputs (no TF import)

REC = json.loads((HERE / "sdca_cluster_tf.json").read_text())


def test_fprint_matches_tf_for_every_length():
    ss = strings()
    with af.Graph().as_default():
        x = af.placeholder(af.string, [None])
        y = af.train.sdca_fprint(x)
        assert y.op.type == "SdcaFprint" and y.shape.as_list() == [None, 2]
        with af.Session() as s:
            got = s.run(y, {x: np.array(ss, dtype=object)})
    assert got.dtype == np.int64 and got.shape == (len(ss), 2)
    np.testing.assert_array_equal(got, np.array(REC["fprint_rows"], np.int64))


def test_fprint_static_shape_and_rank_error():
    with af.Graph().as_default():
        assert af.train.sdca_fprint(af.constant([b"a", b"b", b"c"])).shape.as_list() == [3, 2]
        assert REC["fprint_rank2"].startswith("ValueError: Shape must be rank 1 but is rank 2")
        with pytest.raises(ValueError, match="rank 1"):
            af.train.sdca_fprint(af.constant([[b"a"]]))


def test_fprint_empty_and_not_differentiable():
    with af.Graph().as_default():
        y = af.train.sdca_fprint(af.constant(np.array([], dtype=object), dtype=af.string))
        with af.Session() as s:
            assert s.run(y).shape == (0, 2)


# -- SdcaOptimizer ----------------------------------------------------------------------------

import sdca_cases  # noqa: E402

SDCA = REC["sdca"]


@pytest.mark.parametrize("name", sorted(sdca_cases.CASES))
def test_sdca_optimizer_matches_tf(name):
    with af.Graph().as_default():
        state, sparse, dense = sdca_cases.build(af, **sdca_cases.CASES[name])
        assert state.op.type == "SdcaOptimizer" and state.shape.as_list() == [None, 4]
        with af.Session() as s:
            got_state, got_sparse, got_dense = s.run((state, sparse, dense))
    want = SDCA[name]
    np.testing.assert_allclose(got_state, np.array(want["state"], np.float32), rtol=2e-6)
    assert len(got_sparse) == len(want["sparse"]) and len(got_dense) == len(want["dense"])
    for g, w in zip(list(got_sparse) + list(got_dense), want["sparse"] + want["dense"]):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, np.array(w, np.float32), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(sdca_cases.ERRORS))
def test_sdca_optimizer_errors_are_tfs(name):
    loss, override = sdca_cases.ERRORS[name]
    cls, msg = SDCA["errors"][name]
    with af.Graph().as_default():
        outs = sdca_cases.build_error(af, loss, override)
        with af.Session() as s, pytest.raises(getattr(af.errors, cls)) as e:
            s.run(outs)
    assert e.value.message.startswith(msg)


def test_sdca_optimizer_build_errors():
    cls, msg = SDCA["errors"]["loss_type"]
    with af.Graph().as_default(), pytest.raises(ValueError) as e:
        sdca_cases.build_error(af, "cubic_loss", {})
    assert str(e.value) == msg


def test_sdca_optimizer_v2_is_registered_with_adaptive():
    from asyncflow.registry import get_op_def

    assert "adaptive" in get_op_def("SdcaOptimizerV2").attrs
    assert "adaptative" in get_op_def("SdcaOptimizer").attrs


def test_fprint_never_starts_with_0_or_1(monkeypatch):
    from asyncflow.ops import sdca_ops

    # TF keeps 0 and 1 free as sentinel keys: a low half of 0 or 1 becomes 2**64-2 / -1.
    halves = iter([(0, 5), (1, 6), (2, 7)])
    monkeypatch.setattr(sdca_ops, "fingerprint128", lambda s: next(halves))
    got = sdca_ops._fprints([b"a", b"b", b"c"])
    np.testing.assert_array_equal(got, [[-2, 5], [-1, 6], [2, 7]])
