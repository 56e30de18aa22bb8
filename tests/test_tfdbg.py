"""tfdbg: the debug ops, RunOptions.debug_options dumps (v1), and tfdbg2's dump files.

Every expected value here was recorded from TF 2.21 (tf.compat.v1 graph mode, CPU).
"""

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors

R = tf.raw_ops
NAN, INF = float("nan"), float("inf")


def _inputs():
    return {
        "f": tf.constant([[1.0, NAN, 3.0], [INF, -2.0, 0.0]]),
        "i": tf.constant([3, -1, 0, 7], tf.int32),
        "b": tf.constant([True, False, True]),
        "e": tf.zeros([0, 3]),
        "d": tf.constant([-INF, 1e300, 0.5], tf.float64),
        "h": tf.constant([1.0, -65504.0, NAN], tf.float16),
    }


def _run(build):
    with tf.Graph().as_default():
        t = build(_inputs())
        with tf.Session() as s:
            return t, s.run(t)


def _same(got, want):
    got = np.asarray(got, np.float64).reshape(-1)
    want = np.asarray(want, np.float64).reshape(-1)
    assert got.shape == want.shape, (got, want)
    np.testing.assert_array_equal(got, want)  # (NaN == NaN here)


# (input, TF 2.21's DebugNumericSummary)
_SUMMARY_V1 = [
    ("f", [1, 6, 1, 0, 1, 1, 2, 1, -2, 3, 0.5, 3.25, 1, 2, 2, 3]),
    ("i", [1, 4, 0, 0, 1, 1, 2, 0, -1, 7, 2.25, 9.6875, 3, 1, 4]),
    ("b", [1, 3, 0, 0, 0, 1, 2, 0, 0, 1, 2 / 3, 0.22222222222222224, 10, 1, 3]),
    ("e", [1, 0, 0, 0, 0, 0, 0, 0, INF, -INF, NAN, NAN, 1, 2, 0, 3]),
    ("d", [1, 3, 0, 1, 0, 0, 2, 0, 0.5, 1e300, 5e299, INF, 2, 1, 3]),
]


@pytest.mark.parametrize("key,want", _SUMMARY_V1)
def test_debug_numeric_summary_v1(key, want):
    t, got = _run(lambda inp: R.DebugNumericSummary(input=inp[key], tensor_name="x:0"))
    assert t.dtype == tf.float64 and t.shape.ndims is None
    assert got.dtype == np.float64
    _same(got, want)


def test_debug_numeric_summary_bounds_count_values_at_a_bound_as_infinities():
    x = [1.0, -1.0, 2.0, 0.5]
    _, got = _run(
        lambda inp: R.DebugNumericSummary(
            input=tf.constant(x), lower_bound=-1.0, upper_bound=2.0, tensor_name="x:0"
        )
    )
    _same(got, [1, 4, 0, 1, 0, 0, 2, 1, -1, 2, 0.625, 1.171875, 1, 1, 4])
    _, got = _run(
        lambda inp: R.DebugNumericSummary(
            input=inp["f"], lower_bound=-1.0, upper_bound=2.0, tensor_name="x:0"
        )
    )
    _same(got, [1, 6, 1, 1, 0, 1, 1, 2, -2, 3, 0.5, 3.25, 1, 2, 2, 3])


def test_mute_if_healthy_changes_no_output():
    _, got = _run(
        lambda inp: R.DebugNumericSummary(
            input=tf.constant([1.0, 2.0]), mute_if_healthy=True, tensor_name="x:0"
        )
    )
    _same(got, [1, 2, 0, 0, 0, 0, 2, 0, 1, 2, 1.5, 0.25, 1, 1, 2])


# (input, TF 2.21's DebugNumericSummaryV2 for modes CURT_HEALTH, CONCISE_HEALTH,
# FULL_HEALTH, SHAPE, REDUCE_INF_NAN_THREE_SLOTS; tensor_id=7)
_SUMMARY_V2 = {
    "f": [[7, 1], [7, 6, 0, 1, 1], [7, -1, 1, 2, 6, 0, 1, 1, 1, 1, 2],
          [7, 1, 2, 6, 2, 3, 0, 0, 0, 0], [0, INF, NAN]],
    "i": [[7, 0], [7, 4, 0, 0, 0], [7, -1, 3, 1, 4, 0, 0, 0, 1, 1, 2],
          [7, 3, 1, 4, 4, 0, 0, 0, 0, 0], [0, 0, 0]],
    "b": [[7, 0], [7, 3, 0, 0, 0], [7, -1, 10, 1, 3, 0, 0, 0, 0, 1, 2],
          [7, 10, 1, 3, 3, 0, 0, 0, 0, 0], [0, 0, 0]],
    "e": [[7, 0], [7, 0, 0, 0, 0], [7, -1, 1, 2, 0, 0, 0, 0, 0, 0, 0],
          [7, 1, 2, 0, 0, 3, 0, 0, 0, 0], [0, 0, 0]],
    "d": [[7, 1], [7, 3, 1, 0, 0], [7, -1, 2, 1, 3, 1, 0, 0, 0, 0, 2],
          [7, 2, 1, 3, 3, 0, 0, 0, 0, 0], [-INF, 0, 0]],
    "h": [[7, 1], [7, 3, 0, 0, 1], [7, -1, 19, 1, 3, 0, 0, 1, 1, 0, 1],
          [7, 19, 1, 3, 3, 0, 0, 0, 0, 0], [0, 0, NAN]],
}  # fmt: skip


@pytest.mark.parametrize("key", sorted(_SUMMARY_V2))
def test_debug_numeric_summary_v2(key):
    with tf.Graph().as_default():
        x = _inputs()[key]
        outs = [
            R.DebugNumericSummaryV2(input=x, tensor_debug_mode=m, tensor_id=7)
            for m in (2, 3, 4, 5, 8)
        ]
        # float64 output, default tensor_id -1
        out64 = R.DebugNumericSummaryV2(input=x, tensor_debug_mode=4, output_dtype=tf.float64)
        with tf.Session() as s:
            got, got64 = s.run([outs, out64])
    for g, want in zip(got, _SUMMARY_V2[key]):
        assert g.dtype == np.float32
        _same(g, want)
    assert got64.dtype == np.float64
    _same(got64, [-1] + _SUMMARY_V2[key][2][1:])


def test_debug_numeric_summary_v2_shape_keeps_the_last_six_dimensions():
    _, got = _run(lambda inp: R.DebugNumericSummaryV2(input=tf.zeros([1, 2, 3, 4, 5, 6, 7]),
                                                    tensor_debug_mode=5))  # fmt: skip
    _same(got, [-1, 1, 7, 5040, 2, 3, 4, 5, 6, 7])


@pytest.mark.parametrize("mode", [1, 6])
def test_debug_numeric_summary_v2_unimplemented_mode(mode):
    with pytest.raises(
        errors.UnimplementedError, match=f"Unimplemented tensor debug mode: {mode}"
    ):
        _run(lambda inp: R.DebugNumericSummaryV2(input=inp["f"], tensor_debug_mode=mode))


# (input, TF 2.21's DebugNanCount; None: no kernel for that dtype)
@pytest.mark.parametrize(
    "key,want", [("f", 1), ("i", 0), ("e", 0), ("d", 0), ("h", 1), ("b", None)]
)
def test_debug_nan_count(key, want):
    if want is None:
        with pytest.raises(errors.InvalidArgumentError, match="No OpKernel was registered"):
            _run(lambda inp: R.DebugNanCount(input=inp[key], tensor_name="x:0"))
        return
    t, got = _run(lambda inp: R.DebugNanCount(input=inp[key], tensor_name="x:0"))
    # (TF says scalar statically, yet its kernel writes a [1] vector: here both are [1].)
    assert t.dtype == tf.int64 and t.shape.as_list() == [1]
    assert got.tolist() == [want]


@pytest.mark.parametrize("op", ["DebugNumericSummary", "DebugNanCount"])
def test_no_kernel_for_strings(op):
    with pytest.raises(errors.InvalidArgumentError, match="T=DT_STRING"):
        _run(lambda inp: getattr(R, op)(input=tf.constant(["a"]), tensor_name="x:0"))


def test_no_numeric_summary_v1_kernel_for_half():
    with pytest.raises(errors.InvalidArgumentError, match="T=DT_HALF"):
        _run(lambda inp: R.DebugNumericSummary(input=inp["h"], tensor_name="x:0"))


@pytest.mark.parametrize(
    "op", ["DebugIdentity", "DebugIdentityV3", "DebugIdentityV2", "DebugGradientIdentity"]
)
def test_identities_pass_their_input(op):
    kw = {"tensor_name": "x:0"} if op in ("DebugIdentity", "DebugIdentityV3") else {}
    t, got = _run(lambda inp: getattr(R, op)(input=inp["f"], **kw))
    assert t.shape.as_list() == [2, 3]
    _same(got, [1, NAN, 3, INF, -2, 0])


@pytest.mark.parametrize("name", ["", "x:a", "x:0:1"])
def test_bad_tensor_name(name):
    with pytest.raises(errors.InvalidArgumentError, match="Failed to parse tensor name"):
        _run(lambda inp: R.DebugNanCount(input=inp["f"], tensor_name=name))


def test_gradients_as_in_tf():
    x = tf.constant([1.0, -1.0, 2.0, 0.5])
    # TF registers none for DebugIdentity(V3) and DebugNumericSummary(V2) ...
    for build in (
        lambda: R.DebugIdentity(input=x, tensor_name="x:0"),
        lambda: R.DebugIdentityV3(input=x, tensor_name="x:0"),
        lambda: R.DebugNumericSummaryV2(input=x, tensor_debug_mode=2),
        lambda: R.DebugNumericSummary(input=x, tensor_name="x:0"),
    ):
        with pytest.raises(LookupError):
            tf.gradients(tf.reduce_sum(build()), x)
    # ... DebugNanCount's integer output stops the walk; DebugIdentityV2 passes it on.
    assert tf.gradients(tf.reduce_sum(R.DebugNanCount(input=x, tensor_name="x:0")), x) == [None]
    (g,) = tf.gradients(tf.reduce_sum(R.DebugIdentityV2(input=x)), x)
    with tf.Session() as s:
        assert s.run(g).tolist() == [1.0, 1.0, 1.0, 1.0]
