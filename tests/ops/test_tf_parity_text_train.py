"""String, parsing, loss, schedule and training-helper behaviours checked against values,
error classes and messages recorded from TF 2.21 (tf.compat.v1 graph mode). TF is never
imported here: each expected value is a literal copied from a TF run."""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g


def _run(t, feed=None):
    with tf.Session() as s:
        return s.run(t, feed)


# -- Substr ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pos", "length", "expected"),
    [(1, -1, b"ello"), (-3, -2, b"llo"), (0, -10, b"hello"), (5, -1, b""), (-5, -1, b"hello")],
)
def test_substr_negative_len_in_bytes_runs_to_the_end(pos, length, expected):
    assert _run(tf.strings.substr(["hello"], pos, length)).tolist() == [expected]


def test_substr_negative_len_in_utf8_chars():
    assert _run(tf.strings.substr(["héllo"], 1, -1, unit="UTF8_CHAR")).tolist() == [b""]
    with pytest.raises(
        errors.InvalidArgumentError, match=r"^pos -2 out of range for string at index 0\n"
    ):
        _run(tf.strings.substr(["héllo"], -2, -5, unit="UTF8_CHAR"))


def test_substr_out_of_range_messages():
    with pytest.raises(
        errors.InvalidArgumentError, match=r"^pos 6 out of range for string at index 0\n"
    ):
        _run(tf.strings.substr(["héllo"], 6, 1, unit="UTF8_CHAR"))
    with pytest.raises(errors.InvalidArgumentError, match=r"string b'ab' at index \(0, 1\)\n"):
        _run(tf.strings.substr([["hello", "ab"]], [1, 3], [1, 1]))
    with pytest.raises(
        errors.InvalidArgumentError, match=r"^pos 3 out of range for string at index 1\n"
    ):
        _run(tf.strings.substr([["héllo", "ab"]], [[1], [3]], [[1], [1]], unit="UTF8_CHAR"))


# -- ReduceJoin -----------------------------------------------------------------------------

_CUBE = [[["a", "b"], ["c", "d"]], [["e", "f"], ["g", "h"]]]


@pytest.mark.parametrize(
    ("axis", "expected"),
    [
        ([0, 1], [b"a.e.c.g", b"b.f.d.h"]),
        ([1, 0], [b"a.c.e.g", b"b.d.f.h"]),
        ([0, 2], [b"a.e.b.f", b"c.g.d.h"]),
        ([0, 1, 2], b"a.e.c.g.b.f.d.h"),
        ([1, 0, 2], b"a.c.e.g.b.d.f.h"),
        (None, b"a.b.c.d.e.f.g.h"),
    ],
)
def test_reduce_join_reduces_axes_in_the_order_listed(axis, expected):
    out = _run(tf.strings.reduce_join(_CUBE, axis=axis, separator="."))
    assert (out.tolist() if hasattr(out, "tolist") else out) == expected


def test_reduce_join_no_axes_is_identity_and_axes_may_be_fed():
    assert _run(tf.reduce_join(_CUBE, axis=[], separator=".")).tolist() == [
        [[b"a", b"b"], [b"c", b"d"]],
        [[b"e", b"f"], [b"g", b"h"]],
    ]
    axes = tf.placeholder(tf.int32, [None])
    t = tf.reduce_join(_CUBE, axis=axes, separator=".")
    assert t.shape.ndims is None
    assert _run(t, {axes: [1, 0]}).tolist() == [b"a.c.e.g", b"b.d.f.h"]


def test_reduce_join_bad_axes():
    with pytest.raises(ValueError, match="Invalid reduction dimension 3 for input with 3 dim"):
        tf.reduce_join(_CUBE, axis=[3])
    with pytest.raises(errors.InvalidArgumentError, match="^Duplicate reduction dimension 0"):
        _run(tf.reduce_join(_CUBE, axis=[0, 0]))


# -- SerializeTensor ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "dtype", "expected"),
    [
        (3.0, tf.float64, b'\x08\x02\x12\x00"\x08\x00\x00\x00\x00\x00\x00\x08@'),
        ([1.5], tf.float16, b'\x08\x13\x12\x04\x12\x02\x08\x01"\x02\x00>'),
        ([7], tf.uint8, b'\x08\x04\x12\x04\x12\x02\x08\x01"\x01\x07'),
        ([-7], tf.int8, b'\x08\x06\x12\x04\x12\x02\x08\x01"\x01\xf9'),
        (
            [[1 + 2j]],
            tf.complex64,
            b'\x08\x08\x12\x08\x12\x02\x08\x01\x12\x02\x08\x01"\x08\x00\x00\x80?\x00\x00\x00@',
        ),
    ],
)
def test_serialize_tensor_writes_numbers_as_tensor_content(value, dtype, expected):
    assert _run(tf.serialize_tensor(tf.constant(value, dtype))) == expected


# -- DecodeJSONExample ----------------------------------------------------------------------


def test_decode_json_example_bytes_follow_the_json_order_unpacked():
    text = (
        '{"features": {"feature": {"a": {"floatList": {"value": [1.5, 2]}}, '
        '"b": {"int64List": {"value": [1, "2", 300, -1]}}, '
        '"c": {"bytesList": {"value": ["YWI=", ""]}}}}}'
    )
    assert _run(tf.io.decode_json_example([text])).tolist() == [
        b"\n=\n\x11\n\x01a\x12\x0c\x12\n\r\x00\x00\xc0?\r\x00\x00\x00@\n\x19\n\x01b\x12\x14"
        b"\x1a\x12\x08\x01\x08\x02\x08\xac\x02\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
        b"\n\r\n\x01c\x12\x08\n\x06\n\x02ab\n\x00"
    ]
    empty = ['{"features": {}}', "{}", '{"features": {"feature": {"x": {}}}}']
    assert _run(tf.io.decode_json_example(empty)).tolist() == [
        b"\n\x00",
        b"",
        b"\n\x07\n\x05\n\x01x\x12\x00",
    ]


# -- parse_example's feature dtypes ---------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "param"),
    [
        (lambda: tf.parse_example([b""], {"a": tf.VarLenFeature(tf.int32)}), "sparse_types"),
        (
            lambda: tf.parse_single_example(b"", {"a": tf.FixedLenFeature([], tf.int32)}),
            "dense_defaults",
        ),
        (
            lambda: tf.io.parse_single_sequence_example(
                b"", context_features={"a": tf.FixedLenFeature([], tf.int32)}
            ),
            "context_dense_defaults",
        ),
        (
            lambda: tf.io.parse_single_sequence_example(
                b"", sequence_features={"a": tf.FixedLenSequenceFeature([], tf.int32)}
            ),
            "feature_list_dense_types",
        ),
        (
            lambda: tf.io.parse_sequence_example(
                [b""], sequence_features={"a": tf.VarLenFeature(tf.int32)}
            ),
            "feature_list_sparse_types",
        ),
    ],
)
def test_parse_feature_of_unsupported_dtype_is_a_type_error(build, param):
    with pytest.raises(TypeError) as info:
        build()
    assert str(info.value) == (
        f"Value passed to parameter '{param}' has DataType int32 not in list of allowed "
        "values: float32, int64, string"
    )


# -- moments ------------------------------------------------------------------------------

_X = [[1.0, 2.0, 4.0], [3.0, -1.0, 0.5]]


def test_weighted_moments_with_zero_weights_are_zero():
    mean, var = _run(tf.nn.weighted_moments(tf.constant(_X), [1], tf.zeros([2, 3])))
    assert mean.tolist() == [0.0, 0.0] and var.tolist() == [0.0, 0.0]
    w = tf.constant([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0]], tf.float16)
    mean, var = _run(tf.nn.weighted_moments(tf.constant(_X, tf.float16), [1], w))
    assert mean.dtype == np.float16
    np.testing.assert_allclose(mean, [1.667, 0.0], rtol=1e-3)
    np.testing.assert_allclose(var, [0.2222, 0.0], rtol=1e-3)


def test_sufficient_statistics_hands_back_the_shift_as_a_tensor():
    count, m, v, shift = tf.nn.sufficient_statistics(tf.constant(_X), [1], shift=0.5)
    assert isinstance(shift, tf.Tensor) and shift.name == "sufficient_statistics/shift:0"
    out = _run([count, m, v, shift])
    assert out[0] == 3.0 and out[1].tolist() == [5.5, 1.0]
    assert out[2].tolist() == [14.75, 8.5] and out[3] == 0.5


# -- ComputeAccidentalHits ------------------------------------------------------------------


def test_accidental_hits_one_per_true_class_at_the_last_candidate():
    true = np.array([[3, 1], [1, 1], [5, 3]], np.int64)
    hits = _run(tf.nn.compute_accidental_hits(true, tf.constant([3, 1, 3, 7], tf.int64), 2))
    assert hits[0].tolist() == [0, 0, 1, 1, 2]
    assert hits[1].tolist() == [2, 1, 1, 1, 2]
    assert hits[2].tolist() == [np.float32(-3.4028235e38)] * 5


def test_sampled_losses_mask_an_accidental_hit_at_its_last_position_only():
    rng = np.random.RandomState(0)
    w, b = rng.randn(10, 4).astype(np.float32), rng.randn(10).astype(np.float32)
    x = rng.randn(3, 4).astype(np.float32)
    labels = np.array([[1, 2], [7, 0], [3, 3]], np.int64)
    sampled = (
        tf.constant([3, 7, 3], tf.int64),
        tf.constant([[0.5, 0.5]] * 3),
        tf.constant([0.3, 0.3, 0.3]),
    )
    kw = dict(num_sampled=3, num_classes=10, num_true=2, sampled_values=sampled)
    ssm = tf.nn.sampled_softmax_loss(w, b, labels, x, **kw)
    nce = tf.nn.nce_loss(w, b, labels, x, remove_accidental_hits=True, **kw)
    got_ssm, got_nce = _run([ssm, nce])
    np.testing.assert_allclose(got_ssm, [5.553167, 2.838476, 1.360543], rtol=1e-6)
    np.testing.assert_allclose(got_nce, [8.087351, 8.625964, 5.166266], rtol=1e-6)


# -- string attrs with allowed values -------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: tf.strings.length(["a"], unit="FOO"),
            "Attr 'unit' of 'StringLength' Op passed string 'FOO' not in: "
            '"BYTE", "UTF8_CHAR".',
        ),
        (
            lambda: tf.strings.substr(["a"], 0, 1, unit="FOO"),
            """Attr 'unit' of 'Substr' Op passed string 'FOO' not in: "BYTE", "UTF8_CHAR".""",
        ),
        (
            lambda: tf.strings.unicode_decode(["a"], "UTF-8", errors="foo"),
            "Attr 'errors' of 'UnicodeDecode' Op passed string 'foo' not in: "
            '"strict", "replace", "ignore".',
        ),
        (
            lambda: tf.strings.unicode_encode([97], "UTF-8", errors="foo"),
            "Attr 'errors' of 'UnicodeEncode' Op passed string 'foo' not in: "
            '"ignore", "replace", "strict".',
        ),
        (
            lambda: tf.strings.unicode_transcode(["a"], "UTF-8", "UTF-8", errors="x"),
            "Attr 'errors' of 'UnicodeTranscode' Op passed string 'x' not in: "
            '"strict", "replace", "ignore".',
        ),
        (
            lambda: tf.strings.unicode_split(["a"], "FOO"),
            "Attr 'output_encoding' of 'UnicodeEncode' Op passed string 'FOO' not in: "
            '"UTF-8", "UTF-16-BE", "UTF-32-BE".',
        ),
    ],
)
def test_string_attrs_outside_their_values_fail_at_build(build, message):
    with pytest.raises(ValueError) as info:
        build()
    assert str(info.value) == message


# -- regex_replace / regex_full_match (RE2) -------------------------------------------------


def test_regex_works_on_utf8_characters_with_ascii_classes():
    out = _run(tf.strings.regex_replace(["héllo wörld"], ".", "<\\0>"))
    assert out.tolist() == [b"<h><\xc3\xa9><l><l><o>< ><w><\xc3\xb6><r><l><d>"]
    assert _run(tf.strings.regex_full_match(["é", "٣"], ".")).tolist() == [True, True]
    assert _run(tf.strings.regex_full_match(["é", "ab", "٣", "7"], "\\w|\\d")).tolist() == [
        False,
        False,
        False,
        True,
    ]


def test_regex_dollar_is_the_end_of_the_text():
    assert _run(tf.strings.regex_replace(["ab\n"], "b$", "X")).tolist() == [b"ab\n"]
    assert _run(tf.strings.regex_full_match(["ab\n"], "ab$")).tolist() == [False]
    assert _run(tf.strings.regex_replace(["a\nb\n"], "(?m)b$", "D")).tolist() == [b"a\nD\n"]


@pytest.mark.parametrize(
    ("pattern", "rewrite", "expected"),
    [("a", "\\1", b"abc"), ("(a)", "\\2", b"abc"), ("b", "\\x", b"ac"), ("b", "X\\yZ", b"aXc")],
)
def test_regex_replace_with_a_bad_rewrite(pattern, rewrite, expected):
    assert _run(tf.strings.regex_replace(["abc"], pattern, rewrite)).tolist() == [expected]


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        ("a(b", "missing ): a(b"),
        ("a[bc", "missing ]: [bc"),
        ("*", "no argument for repetition operator: *"),
        ("a**", "bad repetition operator: **"),
        ("a++", "bad repetition operator: ++"),
        ("a)", "unexpected ): a)"),
        ("a{2,1}", "invalid repetition size: {2,1}"),
        ("x{1001}", "invalid repetition size: {1001}"),
        ("\\1", "invalid escape sequence: \\1"),
        ("a\\", "trailing \\"),
        ("(?<=a)b", "invalid perl operator: (?<"),
        ("(?z)", "invalid perl operator: (?z"),
        ("[z-a]", "invalid character class range: z-a"),
    ],
)
def test_regex_pattern_errors_in_re2_words(pattern, error):
    with pytest.raises(errors.InvalidArgumentError) as info:
        _run(tf.strings.regex_full_match(["abc"], pattern))
    assert info.value.message.split("\n")[0] == f"Invalid pattern: {pattern}, error: {error}"


# -- strings.format ---------------------------------------------------------------------------


def test_string_format_placeholder_count_is_checked_at_build():
    with pytest.raises(
        ValueError, match="^The template expects 2 tensors, but the inputs only has 1"
    ):
        tf.strings.format("{} {}", tf.constant(1))


@pytest.mark.parametrize(
    ("value", "dtype", "expected"),
    [
        ([[1 + 2j, 3j]], tf.complex128, b"[? ?]"),
        ([[1 + 2j, 3j], [1, 2]], tf.complex64, b"[? ? ?...]"),
        (1 + 2j, tf.complex64, b"?"),
        ([0.1, 2.5], tf.bfloat16, b"[0.100097656 2.5]"),
    ],
)
def test_string_format_complex_and_bfloat16(value, dtype, expected):
    assert _run(tf.strings.format("{}", tf.constant(value, dtype))) == expected


@pytest.mark.parametrize(
    ("shape", "expected"),
    [([0], b"[]"), ([0, 3], b"[]"), ([2, 0], b"[\n ...]"), ([2, 2, 0], b"[\n\n ...]")],
)
def test_string_format_empty_tensors(shape, expected):
    assert _run(tf.strings.format("{}", tf.zeros(shape))) == expected


# -- piecewise_constant -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "boundaries", "message"),
    [
        (
            lambda: tf.constant(7.0),
            [5, 10],
            "Boundaries (<dtype: 'int32'>) must have the same dtype as x (<dtype: 'float32'>).",
        ),
        (
            lambda: tf.constant(7),
            [tf.constant(5, tf.int64)],
            "Boundaries (<dtype: 'int64'>) must have the same dtype as x (<dtype: 'int32'>).",
        ),
        (
            lambda: tf.constant(7.0, tf.float64),
            [5.0],
            "Boundaries (<dtype: 'float32'>) must have the same dtype as x (<dtype: 'float64'>).",
        ),
    ],
)
def test_piecewise_constant_boundaries_of_another_dtype(x, boundaries, message):
    values = [float(i) for i in range(len(boundaries) + 1)]
    with pytest.raises(ValueError) as info:
        tf.train.piecewise_constant(x(), boundaries, values)
    assert str(info.value) == message


def test_piecewise_constant_int32_boundaries_widen_to_an_int64_step():
    lr = tf.train.piecewise_constant(tf.constant(7, tf.int64), [5, 10], [1.0, 2.0, 3.0])
    assert _run(lr) == 2.0


# -- losses: weights must broadcast as TF's assert_broadcastable says ---------------------

_LABELS = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]], np.float32)
_PREDS = np.array([[0.2, 0.7, 0.9], [0.6, 0.3, 0.1]], np.float32)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: tf.losses.mean_squared_error(_LABELS, _PREDS, weights=[1.0, 2.0, 3.0]),
            "values.rank=2. weights.rank=1. values.shape=(2, 3). weights.shape=(3,).",
        ),
        (
            lambda: tf.losses.compute_weighted_loss(_LABELS, weights=[2.0]),
            "values.rank=2. weights.rank=1. values.shape=(2, 3). weights.shape=(1,).",
        ),
        (
            lambda: tf.losses.mean_squared_error(_LABELS, _PREDS, weights=[[2.0, 1.0, 0.0, 1.0]]),
            "Mismatch at dim 1. values.shape=[2 3], weights.shape=[1 4].",
        ),
        (
            lambda: tf.losses.mean_pairwise_squared_error(
                np.ones([2, 2, 2], np.float32), np.zeros([2, 2, 2], np.float32), weights=[1.0, 2.0]
            ),
            "values.rank=3. weights.rank=1. values.shape=(2, 2, 2). weights.shape=(2,).",
        ),
    ],
)
def test_loss_weights_of_another_rank_do_not_broadcast(build, message):
    with pytest.raises(ValueError) as info:
        build()
    assert str(info.value) == "weights can not be broadcast to values. " + message


def test_loss_weights_of_unknown_shape_are_checked_when_run():
    w = tf.placeholder(tf.float32)
    loss = tf.losses.mean_squared_error(_LABELS, _PREDS, weights=w)
    np.testing.assert_allclose(_run(loss, {w: [[2.0], [1.0]]}), 0.09, rtol=1e-6)
    with pytest.raises(errors.InvalidArgumentError) as info:
        _run(loss, {w: [1.0, 2.0, 3.0]})
    assert info.value.message.split("\n")[0] == (
        "assertion failed: [weights can not be broadcast to values.] [weights.shape=] "
        "[Placeholder:0] [3] [values.shape=] [mean_squared_error/SquaredDifference:0] [2 3] "
        "[is_scalar=] [0]"
    )


# -- decode_compressed ------------------------------------------------------------------------


def test_decode_compressed_reads_until_the_input_ends():
    import gzip
    import zlib

    truncated = zlib.compress(b"hello world")[:-3]
    members = gzip.compress(b"ab") + gzip.compress(b"cd")
    assert _run(tf.io.decode_compressed([truncated, b""], compression_type="ZLIB")).tolist() == [
        b"hello world",
        b"",
    ]
    assert _run(tf.io.decode_compressed([members], compression_type="GZIP")).tolist() == [b"abcd"]


@pytest.mark.parametrize(
    ("data", "kind", "error", "message"),
    [
        (
            b"garbage",
            "ZLIB",
            errors.DataLossError,
            "inflate() failed with error -3: incorrect header check",
        ),
        (
            b"\x1f\x8bjunkjunk",
            "GZIP",
            errors.DataLossError,
            "inflate() failed with error -3: unknown compression method",
        ),
        (
            b"abc",
            "FOO",
            errors.InvalidArgumentError,
            "Only ZLIB, GZIP or NONE are supported compressions",
        ),
    ],
)
def test_decode_compressed_errors(data, kind, error, message):
    with pytest.raises(error) as info:
        _run(tf.io.decode_compressed([data], compression_type=kind))
    assert info.value.message.split("\n")[0] == message


# -- string_to_number -------------------------------------------------------------------------


def test_string_to_number_unsigned():
    out = _run(tf.strings.to_number(["18446744073709551615", "+3", " 7 "], tf.uint64))
    assert out.dtype == np.uint64 and out.tolist() == [18446744073709551615, 3, 7]
    assert _run(tf.strings.to_number(["12", "4294967295"], tf.uint32)).tolist() == [12, 4294967295]
    for text, dtype in (("-1", tf.uint32), ("4294967296", tf.uint32), ("-0", tf.uint64)):
        with pytest.raises(errors.InvalidArgumentError) as info:
            _run(tf.strings.to_number([text], dtype))
        assert info.value.message.split("\n")[0] == (
            f"StringToNumberOp could not correctly convert string: {text}"
        )


# -- natural_exp_decay ------------------------------------------------------------------------


def test_natural_exp_decay_is_exponential_decay_of_a_float32_rate():
    step = tf.placeholder(tf.int64, [])
    lr = tf.train.natural_exp_decay(tf.constant(0.1, tf.float64), step, 7, 0.3)
    assert lr.name == "ExponentialDecay:0"
    got = [_run(lr, {step: s}) for s in (5, 100)]
    # exp(-0.3) rounded to float32 first, as TF computes it
    rate = float(np.exp(np.float32(-0.3)))
    np.testing.assert_allclose(got, [0.1 * rate ** (5 / 7), 0.1 * rate ** (100 / 7)], rtol=1e-15)
    named = tf.train.natural_exp_decay(0.1, step, 7, 0.3, name="nn")
    assert named.name == "nn:0"


# -- Optimizer.compute_gradients(gate_gradients=GATE_GRAPH) -----------------------------------


def test_gate_graph_gradients_come_out_of_tf_tuple():
    v = tf.Variable([1.0, 2.0])
    opt = tf.train.GradientDescentOptimizer(0.1)
    loss = tf.reduce_sum(v * v)
    gv = opt.compute_gradients(loss, gate_gradients=tf.train.Optimizer.GATE_GRAPH)
    assert [g.name for g, _ in gv] == ["tuple/control_dependency:0"]
    train = opt.apply_gradients(gv)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(train)
        np.testing.assert_allclose(s.run(v), [0.8, 1.6], rtol=1e-6)


# -- UTF-8 characters in ill-formed text ------------------------------------------------------

_ILL = [b"\x82\x82ab", b"a\xe2\x82b", b"\xffx", b"a\xc3\xa9\x82b"]


def test_utf8_length_counts_bytes_that_start_no_continuation():
    assert _run(tf.strings.length(_ILL, unit="UTF8_CHAR")).tolist() == [2, 3, 2, 3]


@pytest.mark.parametrize(
    ("pos", "length", "expected"),
    [
        (0, 1, [b"\x82\x82", b"a", b"\xff", b"a"]),
        (1, 2, [b"ab", b"\xe2\x82b", b"x", b"\xc3\xa9\x82b"]),
        (-2, 1, [b"a", b"\xe2\x82", b"\xff", b"\xc3\xa9\x82"]),
        (0, 10, _ILL),
    ],
)
def test_utf8_substr_keeps_the_bytes_of_ill_formed_text(pos, length, expected):
    out = _run(tf.strings.substr(_ILL, [pos] * 4, [length] * 4, unit="UTF8_CHAR"))
    assert out.tolist() == expected


# -- parse_example messages -------------------------------------------------------------------


def _example(**features) -> bytes:
    feats = {}
    for key, values in features.items():
        if isinstance(values[0], float):
            feats[key] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feats[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()


def test_parse_messages_for_a_sparse_type_mismatch_and_a_single_missing_feature():
    e = _example(s=[b"x", b"y"])
    with pytest.raises(errors.InvalidArgumentError) as info:
        _run(tf.parse_example([e], {"s": tf.VarLenFeature(tf.int64)}))
    assert info.value.message.split("\n")[0] == (
        "Name: <unknown>, Key: s, Index: 0.  Data types don't match. "
        "Expected type: int64, Actual type: string"
    )
    with pytest.raises(errors.InvalidArgumentError) as info:
        _run(tf.parse_single_example(e, {"a": tf.FixedLenFeature([2], tf.float32)}))
    assert info.value.message.split("\n")[0] == (
        "Feature: a (data type: float) is required but could not be found."
    )


# -- decode_csv's record defaults -------------------------------------------------------------


def test_decode_csv_defaults_checked_at_build():
    with pytest.raises(ValueError, match=r"^Shape of a default must be a length-0 or length-1 "):
        tf.decode_csv(["1,2"], [[0, 1], [0]])
    with pytest.raises(ValueError, match=r"^Shape must be at most rank 1 but is rank 2 for 'De"):
        tf.decode_csv(["1,2"], [[[0]], [0]])
    with pytest.raises(TypeError) as info:
        tf.decode_csv(["1,2"], [[True], [0]])
    assert str(info.value) == (
        "Value passed to parameter 'record_defaults' has DataType bool not in list of allowed "
        "values: float32, float64, int32, int64, string"
    )


# -- safe_embedding_lookup_sparse over a PartitionedVariable ----------------------------------


def test_safe_embedding_lookup_sparse_looks_up_the_shards_by_strategy():
    table = np.arange(11 * 3, dtype=np.float32).reshape(11, 3) / 7
    v = tf.get_variable(
        "e", initializer=tf.constant(table), partitioner=tf.fixed_size_partitioner(2)
    )
    ids = tf.SparseTensor([[0, 0], [0, 1], [2, 0]], tf.constant([10, -1, 7], tf.int64), [4, 2])
    out = tf.nn.safe_embedding_lookup_sparse(v, ids, None, partition_strategy="mod")
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got = s.run(out)
    # "mod": id 10 is row 5 of shard 0 (table row 5), id 7 row 3 of shard 1 (table row 9)
    np.testing.assert_allclose(got, [table[5], np.zeros(3), table[9], np.zeros(3)], rtol=1e-6)


# -- ctc_greedy_decoder's score -----------------------------------------------------------------


def test_ctc_greedy_score_adds_frames_in_float32():
    x = (np.arange(40, dtype=np.float32) / 3 + 0.1).reshape(20, 1, 2)
    x = np.concatenate([x, x[:, :, ::-1] * 1.7], axis=1)
    _, log_prob = tf.nn.ctc_greedy_decoder(x, [20, 17])
    # (a float64 sum rounds the first to -135.33332824707031)
    assert _run(log_prob).ravel().tolist() == [-135.33334350585938, -166.6566619873047]


# -- clip ops' output names ---------------------------------------------------------------------


def test_clip_ops_name_their_outputs_as_tf():
    a = np.array([[3.0, 4.0], [1.0, -2.0]], np.float32)
    clipped, norm = tf.clip_by_global_norm([tf.constant(a), tf.constant(a)], 5.0)
    assert [t.name for t in clipped] == [
        "clip_by_global_norm/clip_by_global_norm/_0:0",
        "clip_by_global_norm/clip_by_global_norm/_1:0",
    ]
    assert norm.name == "global_norm/global_norm:0"
    assert tf.clip_by_norm(a, 2.0).name == "clip_by_norm:0"
    assert tf.clip_by_average_norm(a, 2.0).name == "clip_by_average_norm:0"


# -- output names of the cross-entropies, moments and string builders ---------------------------


def test_cross_entropy_outputs_are_named_as_tf():
    logits = np.zeros([2, 3, 4], np.float32)
    labels = np.full([2, 3, 4], 0.25, np.float32)
    v2 = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
    assert v2.name == "softmax_cross_entropy_with_logits/Reshape_2:0"
    assert v2.op.inputs[0].op.name == "softmax_cross_entropy_with_logits"
    sparse3 = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=np.zeros([2, 3], np.int32), logits=logits
    )
    assert sparse3.name == "SparseSoftmaxCrossEntropyWithLogits/Reshape_2:0"
    sparse2 = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[1], logits=[[0.0, 1.0]])
    assert sparse2.name == (
        "SparseSoftmaxCrossEntropyWithLogits_1/SparseSoftmaxCrossEntropyWithLogits:0"
    )
    np.testing.assert_allclose(_run(v2), np.full([2, 3], np.log(4.0)), rtol=1e-6)


def test_moments_and_string_builders_are_named_as_tf():
    mean, var = tf.nn.normalize_moments(tf.constant(2.0), [1.0, 2.0], [3.0, 4.0], None)
    assert (mean.name, var.name) == ("normalize/mean:0", "normalize/variance:0")
    count = tf.nn.sufficient_statistics(tf.zeros([6, 2]), [0])[0]
    assert count.name == "sufficient_statistics/Const:0" and _run(count) == 6.0
    replaced = tf.strings.regex_replace(["a"], "a", "b")
    assert replaced.op.type == "StaticRegexReplace" and _run(replaced).tolist() == [b"b"]
    assert tf.strings.reduce_join(["a", "b"]).name == "ReduceJoin/ReduceJoin:0"


# -- decode_raw to bfloat16 ---------------------------------------------------------------------


def test_decode_raw_bfloat16_in_either_byte_order():
    little = _run(tf.io.decode_raw([b"\x80\x3f\x00\x40"], tf.bfloat16))
    big = _run(tf.io.decode_raw([b"\x3f\x80\x40\x00"], tf.bfloat16, little_endian=False))
    assert little.dtype.name == "bfloat16" and little.astype(np.float32).tolist() == [[1.0, 2.0]]
    assert big.astype(np.float32).tolist() == [[1.0, 2.0]]
