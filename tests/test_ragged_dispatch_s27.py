"""TF's dense ops given RaggedTensors (TF's ragged dispatch), beyond the element-wise
ones: gather along inner axes and with batch_dims, where's coordinates, reduce_join
along any axis, split, dynamic_partition, reshape, matmul, cumsum, one_hot, bincount,
variance/std/logsumexp, keepdims, the strings' split/join/format, and TF's error for a
RaggedTensor a dense op cannot take.  Every expected value was recorded from TF 2.21
(tf.compat.v1, graph mode) running the same expression."""

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors


def _rt():
    return tf.ragged.constant([[1, 2], [3], [4, 5, 6]])


def _rt3():
    return tf.ragged.constant([[[1, 2], [3]], [[4]], []], ragged_rank=2)


def _rf():
    return tf.ragged.constant([[1.0, -2.0], [3.0], [4.0, 5.0, 6.0]])


def _rs():
    return tf.ragged.constant([["a b", "bc"], ["d e f"]])


def _value(v):
    if hasattr(v, "to_list"):
        return ("RT", v.to_list())
    if isinstance(v, list):
        return [_value(x) for x in v]
    if hasattr(v, "dense_shape"):
        return ("SP", v.indices.tolist(), v.values.tolist(), v.dense_shape.tolist())
    return np.asarray(v).tolist()


def _run(build):
    with tf.Graph().as_default(), tf.Session() as sess:
        return _value(sess.run(build()))


CASES = {
    # gather along inner axes, with batch_dims, with ragged indices
    "gather_ax1": (lambda: tf.gather(_rt(), [0, 1], axis=1), [[1, 2], [3, 4], [4, 5]]),
    "gather_ax1_2d": (
        lambda: tf.gather(_rt(), [[0], [1]], axis=1),
        [[[1], [2]], [[3], [4]], [[4], [5]]],
    ),
    "gather_ax2_rt3": (lambda: tf.gather(_rt3(), [0], axis=2), ("RT", [[[1], [3]], [[4]], []])),
    "gather_ax2_inner": (
        lambda: tf.gather(
            tf.ragged.constant([[[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]]], ragged_rank=1),
            [1, 0],
            axis=2,
        ),
        ("RT", [[[2.0, 1.0]], [[4.0, 3.0], [6.0, 5.0]]]),
    ),
    "gather_neg_axis": (lambda: tf.gather(_rt(), [0], axis=-1), [[1], [3], [4]]),
    "gather_bd1": (
        lambda: tf.gather(_rt(), [[0], [0], [1]], axis=1, batch_dims=1),
        [[1], [3], [5]],
    ),
    "gather_bd_neg": (
        lambda: tf.gather(_rt(), [[0], [0], [1]], axis=1, batch_dims=-1),
        [[1], [3], [5]],
    ),
    "gather_bd1_ragged_idx": (
        lambda: tf.gather(_rt(), tf.ragged.constant([[0, 1, 0], [], [2]]), axis=1, batch_dims=1),
        ("RT", [[1, 2, 1], [], [6]]),
    ),
    "gather_ragged_idx_ax1": (
        lambda: tf.gather(_rt(), tf.ragged.constant([[0, 1], [0]]), axis=1),
        ("RT", [[[1, 2], [1]], [[3, 4], [3]], [[4, 5], [4]]]),
    ),
    "gather_dense_ragged_idx_ax1": (
        lambda: tf.gather([[1, 2, 3], [4, 5, 6]], tf.ragged.constant([[0, 1], [2]]), axis=1),
        ("RT", [[[1, 2], [3]], [[4, 5], [6]]]),
    ),
    "gather_ragged_idx_ax2": (
        lambda: tf.gather(
            tf.ragged.constant([[[1, 2, 3]], [[4, 5, 6], [7, 8, 9]]], ragged_rank=1),
            tf.ragged.constant([[0, 2], [1]]),
            axis=2,
        ),
        ("RT", [[[[1, 3], [2]]], [[[4, 6], [5]], [[7, 9], [8]]]]),
    ),
    # where's coordinates
    "where_coords": (
        lambda: tf.where(tf.ragged.constant([[True, False], [True], [False, True, True]])),
        [[0, 0], [1, 0], [2, 1], [2, 2]],
    ),
    "where_coords_r3": (
        lambda: tf.where(tf.ragged.constant([[[True, False], [True]], [[False, True]]])),
        [[0, 0, 0], [0, 1, 0], [1, 0, 1]],
    ),
    "where_coords_inner": (
        lambda: tf.where(
            tf.ragged.constant([[[True, False]], [[False, True], [True, True]]], ragged_rank=1)
        ),
        [[0, 0, 0], [1, 0, 1], [1, 1, 0], [1, 1, 1]],
    ),
    # reduce_join
    "rj0": (
        lambda: tf.strings.reduce_join(tf.ragged.constant([["a", "b"], ["c"]]), axis=0),
        [b"ac", b"b"],
    ),
    "rj_none": (
        lambda: tf.strings.reduce_join(tf.ragged.constant([["a", "b"], ["c"]])),
        b"abc",
    ),
    "rj0_sep": (
        lambda: tf.strings.reduce_join(
            tf.ragged.constant([["a", "b"], ["c"], ["d", "e", "f"]]), axis=0, separator="-"
        ),
        [b"a-c-d", b"b-e", b"f"],
    ),
    "rj0_keep": (
        lambda: tf.strings.reduce_join(
            tf.ragged.constant([["a", "b"], ["c"]]), axis=0, keepdims=True
        ),
        [[b"ac", b"b"]],
    ),
    "rj_none_keep": (
        lambda: tf.strings.reduce_join(tf.ragged.constant([["a", "b"], ["c"]]), keepdims=True),
        [[b"abc"]],
    ),
    "rj01": (
        lambda: tf.strings.reduce_join(tf.ragged.constant([["a", "b"], ["c"]]), axis=[0, 1]),
        b"abc",
    ),
    "rj_r3_0": (
        lambda: tf.strings.reduce_join(tf.ragged.constant([[["a", "b"], ["c"]], [["d"]]]), axis=0),
        ("RT", [[b"ad", b"b"], [b"c"]]),
    ),
    "rj_r3_1": (
        lambda: tf.strings.reduce_join(tf.ragged.constant([[["a", "b"], ["c"]], [["d"]]]), axis=1),
        ("RT", [[b"ac", b"b"], [b"d"]]),
    ),
    "rj_r3_2": (
        lambda: tf.strings.reduce_join(
            tf.ragged.constant([[["a", "b"], ["c"]], [["d"]]]), axis=2, separator="+"
        ),
        ("RT", [[b"a+b", b"c"], [b"d"]]),
    ),
    # split, dynamic_partition
    "split": (lambda: tf.split(_rt(), 3), [("RT", [[1, 2]]), ("RT", [[3]]), ("RT", [[4, 5, 6]])]),
    "split_sizes": (lambda: tf.split(_rt(), [1, 2]), [("RT", [[1, 2]]), ("RT", [[3], [4, 5, 6]])]),
    "split_sizes_tensor": (
        lambda: tf.split(_rt(), tf.constant([1, 2])),
        [("RT", [[1, 2]]), ("RT", [[3], [4, 5, 6]])],
    ),
    "split_num": (
        lambda: tf.split(_rt(), [1, 1, 1], num=3),
        [("RT", [[1, 2]]), ("RT", [[3]]), ("RT", [[4, 5, 6]])],
    ),
    "dynamic_partition": (
        lambda: tf.dynamic_partition(_rt(), [0, 1, 0], 2),
        [("RT", [[1, 2], [4, 5, 6]]), ("RT", [[3]])],
    ),
    "dynamic_partition_r3": (
        lambda: tf.dynamic_partition(_rt3(), [1, 1, 0], 3),
        [("RT", [[]]), ("RT", [[[1, 2], [3]], [[4]]]), ("RT", [])],
    ),
    # reshape, matmul
    "reshape": (lambda: tf.reshape(_rt(), [-1]), [1, 2, 3, 4, 5, 6]),
    "reshape2": (lambda: tf.reshape(_rt(), [2, 3]), [[1, 2, 3], [4, 5, 6]]),
    "reshape_inner": (
        lambda: tf.reshape(
            tf.ragged.constant([[[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]]], ragged_rank=1), [-1, 3]
        ),
        [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
    ),
    "matmul_2d": (
        lambda: tf.matmul(
            tf.ragged.constant([[1.0, 2.0], [3.0, 4.0]]), tf.ragged.constant([[1.0], [2.0]])
        ),
        [[5.0], [11.0]],
    ),
    "matmul_ragged_dense": (
        lambda: tf.matmul(
            tf.ragged.constant([[[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]]], ragged_rank=1),
            tf.constant([[[1.0], [2.0]], [[3.0], [4.0]]]),
        ),
        ("RT", [[[5.0]], [[25.0], [39.0]]]),
    ),
    "matmul_dense_ragged": (
        lambda: tf.matmul(
            tf.constant([[[1.0, 2.0]], [[3.0, 4.0]]]),
            tf.ragged.constant([[[1.0], [2.0]], [[3.0], [4.0]]], ragged_rank=1),
        ),
        ("RT", [[[5.0]], [[25.0]]]),
    ),
    "matmul_ragged_ragged": (
        lambda: tf.matmul(
            tf.ragged.constant([[[1.0, 2.0]], [[3.0, 4.0]]], ragged_rank=1),
            tf.ragged.constant([[[1.0], [2.0]], [[3.0], [4.0]]], ragged_rank=1),
        ),
        ("RT", [[[5.0]], [[25.0]]]),
    ),
    # cumsum
    "cumsum0": (lambda: tf.cumsum(_rt(), axis=0), ("RT", [[1, 2], [4], [8, 7, 6]])),
    "cumsum1_exclusive": (
        lambda: tf.cumsum(_rt(), axis=1, exclusive=True),
        ("RT", [[0, 1], [0], [0, 4, 9]]),
    ),
    "cumsum1_reverse": (
        lambda: tf.cumsum(_rt(), axis=1, reverse=True),
        ("RT", [[3, 2], [3], [15, 11, 6]]),
    ),
    "cumsum_r3_2": (
        lambda: tf.cumsum(tf.ragged.constant([[[1, 2], [3]], [[4]]]), axis=2),
        ("RT", [[[1, 3], [3]], [[4]]]),
    ),
    "cumsum_neg": (lambda: tf.cumsum(_rt(), axis=-1), ("RT", [[1, 3], [3], [4, 9, 15]])),
    # add_n, one_hot, bincount, check_numerics, dropout
    "add_n": (
        lambda: tf.add_n([tf.ragged.constant([[[1, 2], [3]], [[4]]])] * 3),
        ("RT", [[[3, 6], [9]], [[12]]]),
    ),
    "one_hot": (
        lambda: tf.one_hot(_rt(), 3, axis=-1, on_value=5, off_value=-1),
        (
            "RT",
            [
                [[-1, 5, -1], [-1, -1, 5]],
                [[-1, -1, -1]],
                [[-1, -1, -1], [-1, -1, -1], [-1, -1, -1]],
            ],
        ),
    ),
    "bincount": (lambda: tf.math.bincount(_rt()), [0, 1, 1, 1, 1, 1, 1]),
    "bincount_weights": (
        lambda: tf.math.bincount(
            _rt(), weights=tf.ragged.constant([[1.0, 1.0], [2.0], [1.0, 1.0, 0.5]])
        ),
        [0.0, 1.0, 1.0, 2.0, 1.0, 1.0, 0.5],
    ),
    "bincount_minlength": (
        lambda: tf.math.bincount(_rt(), minlength=9),
        [0, 1, 1, 1, 1, 1, 1, 0, 0],
    ),
    "check_numerics": (
        lambda: tf.debugging.check_numerics(_rf(), "x"),
        ("RT", [[1.0, -2.0], [3.0], [4.0, 5.0, 6.0]]),
    ),
    "dropout_seeded": (
        lambda: tf.nn.dropout(_rf(), rate=0.5, seed=1),
        ("RT", [[0.0, -4.0], [0.0], [0.0, 10.0, 0.0]]),
    ),
    # variance, std, logsumexp, means, keepdims
    "var_none": (lambda: tf.math.reduce_variance(_rf()), 7.1388893),
    "var_0": (lambda: tf.math.reduce_variance(_rf(), axis=0), [1.5555553, 12.25, 0.0]),
    "std_keep": (
        lambda: tf.math.reduce_std(_rf(), axis=1, keepdims=True),
        [[1.5], [0.0], [0.8164962]],
    ),
    "var_int": (lambda: tf.math.reduce_variance(_rt(), axis=1), [0.25, 0.0, 0.66666667]),
    "lse_none": (lambda: tf.reduce_logsumexp(_rf()), 6.444734),
    "lse_keep": (
        lambda: tf.reduce_logsumexp(_rf(), axis=1, keepdims=True),
        [[1.0485873], [3.0], [6.407606]],
    ),
    "mean_int": (
        lambda: tf.reduce_mean(tf.ragged.constant([[1, 2], [3]]), axis=1),
        [1.5, 3.0],
    ),
    "mean_int8": (
        lambda: tf.reduce_mean(tf.ragged.constant([[1, 2], [3]], dtype=tf.int8)),
        2.0,
    ),
    "mean_none_keep": (
        lambda: tf.reduce_mean(tf.ragged.constant([[1.0, 2.0], [3.0]]), keepdims=True),
        [[2.0]],
    ),
    "sum_keep0": (lambda: tf.reduce_sum(_rt(), axis=0, keepdims=True), [[8, 7, 6]]),
    "sum_keep1": (lambda: tf.reduce_sum(_rt(), axis=1, keepdims=True), [[3], [3], [15]]),
    "sum_keep_none": (lambda: tf.reduce_sum(_rt(), keepdims=True), [[21]]),
    "max_r3_keep2": (
        lambda: tf.reduce_max(tf.ragged.constant([[[1, 2], [3]], [[4]]]), axis=2, keepdims=True),
        ("RT", [[[2], [3]], [[4]]]),
    ),
    "mean_r3_keep0": (
        lambda: tf.reduce_mean(
            tf.cast(tf.ragged.constant([[[1, 2], [3]], [[4]]]), tf.float32), axis=0, keepdims=True
        ),
        ("RT", [[[2.5, 2.0], [3.0]]]),
    ),
    "sum_keep01": (
        lambda: tf.reduce_sum(
            tf.ragged.constant([[[1, 2], [3]], [[4]]]), axis=[0, 1], keepdims=True
        ),
        ("RT", [[[8, 2]]]),
    ),
    # strings
    "split_ragged": (
        lambda: tf.strings.split(_rs(), result_type="RaggedTensor"),
        ("RT", [[[b"a", b"b"], [b"bc"]], [[b"d", b"e", b"f"]]]),
    ),
    "split_sparse": (
        lambda: tf.strings.split(_rs()),
        (
            "SP",
            [[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0], [1, 0, 1], [1, 0, 2]],
            [b"a", b"b", b"bc", b"d", b"e", b"f"],
            [2, 2, 3],
        ),
    ),
    "split_sep": (
        lambda: tf.strings.split(tf.ragged.constant([["a,b"], ["c"]]), sep=","),
        ("SP", [[0, 0, 0], [0, 0, 1], [1, 0, 0]], [b"a", b"b", b"c"], [2, 1, 2]),
    ),
    "join": (
        lambda: tf.strings.join([_rs(), "x"], separator="-"),
        ("RT", [[b"a b-x", b"bc-x"], [b"d e f-x"]]),
    ),
    "format_float": (
        lambda: tf.strings.format("x={}", _rf()),
        b"x=[[1.000000, -2.000000], [3.000000], [4.000000, 5.000000, 6.000000]]",
    ),
    "format_two": (
        lambda: tf.strings.format("{} and {}", (tf.ragged.constant([[[1, 2], [3]], [[4]]]), 1)),
        b"[[[1, 2], [3]], [[4]]] and 1",
    ),
    "format_strings": (
        lambda: tf.strings.format("{}", _rs()),
        b"[['a b', 'bc'], ['d e f']]",
    ),
    "format_escaped": (
        lambda: tf.strings.format("{}", tf.ragged.constant([["it's", "a\\b"], []])),
        b"[['it\\'s', 'a\\\\b'], []]",
    ),
    "format_inner": (
        lambda: tf.strings.format(
            "{}", tf.ragged.constant([[[1.5, 2.0], [3.0, 4.0]], []], ragged_rank=1)
        ),
        b"[[[1.500000, 2.000000], [3.000000, 4.000000]], []]",
    ),
}

_BIG = [[1, 2, 3, 4, 5, 6, 7], [8], [], [9, 10, 11, 12, 13], [1], [2], [3], [4]]
CASES.update(
    {
        "format_summarize2": (
            lambda: tf.strings.format("{}", tf.ragged.constant(_BIG), summarize=2),
            b"[[1, 2, ..., 6, 7], [8], ..., [3], [4]]",
        ),
        "format_summarize_all": (
            lambda: tf.strings.format("{}", tf.ragged.constant(_BIG), summarize=-1),
            b"[[1, 2, 3, 4, 5, 6, 7], [8], [], [9, 10, 11, 12, 13], [1], [2], [3], [4]]",
        ),
        "format_summarize3": (
            lambda: tf.strings.format("{}", tf.ragged.constant(_BIG)),
            b"[[1, 2, 3, ..., 5, 6, 7], [8], [], ..., [2], [3], [4]]",
        ),
    }
)


def _assert_close(got, expected):
    """Equal structure and values; floats to TF's float32 values within rounding."""
    if isinstance(expected, float):
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-7)
    elif isinstance(expected, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(expected), (got, expected)
        for g, e in zip(got, expected):
            _assert_close(g, e)
    else:
        assert got == expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_recorded(case):
    build, expected = CASES[case]
    _assert_close(_run(build), expected)


BUILD_ERRORS = {
    "gather_bd_above_axis": (
        lambda: tf.gather(_rt(), [[1], [0], [2]], batch_dims=1),
        ValueError,
        "axis must be greater than or equal to batch_dims",
    ),
    "gather_bd_shape": (
        lambda: tf.gather(_rt(), [[0], [0]], axis=1, batch_dims=1),
        ValueError,
        "batch shape from indices",
    ),
    "split_negative": (
        lambda: tf.split(_rt(), [1, -1]),
        errors.InvalidArgumentError,
        "`num_or_size_splits` must be non-negative.",
    ),
    "split_zero_parts": (
        lambda: tf.split(_rt(), 0),
        ValueError,
        "`num_or_size_splits` must be >=1 if it is an `int`.Received 0.",
    ),
    "split_ragged_axis": (
        lambda: tf.split(_rt(), 2, axis=1),
        ValueError,
        "Cannot split a ragged dimension.",
    ),
    "one_hot_axis0": (
        lambda: tf.one_hot(_rt(), 3, axis=0),
        ValueError,
        "axis (0) must be greater than indices.ragged_rank (1).",
    ),
    "matmul_ranks": (
        lambda: tf.matmul(
            tf.ragged.constant([[[1.0, 2.0]], [[3.0, 4.0]]], ragged_rank=1),
            tf.constant([[1.0, 0.0], [0.0, 2.0]]),
        ),
        ValueError,
        "`a` and `b` must have the same rank.",
    ),
    "argmax": (
        lambda: tf.argmax(_rt(), axis=1),
        TypeError,
        "Failed to convert elements of tf.RaggedTensor",
    ),
    "convert": (
        lambda: tf.convert_to_tensor(_rt()),
        TypeError,
        "Consider casting elements to a supported type.",
    ),
    "sparse_to_dense_op": (
        lambda: tf.argmax(tf.SparseTensor([[0, 0]], [1], [2, 2])),
        TypeError,
        "Failed to convert elements of SparseTensor(",
    ),
}


@pytest.mark.parametrize("case", sorted(BUILD_ERRORS))
def test_build_errors(case):
    build, cls, text = BUILD_ERRORS[case]
    with tf.Graph().as_default():
        with pytest.raises(cls) as info:
            build()
    assert text in str(info.value)


RUN_ERRORS = {
    # (TF fails these when the step runs too: InvalidArgumentError)
    "gather_ax1_out_of_values": lambda: tf.gather(_rt3(), [0], axis=1),
    "split_uneven": lambda: tf.split(_rt(), 2),
    "dynamic_partition_range": lambda: tf.dynamic_partition(_rt(), [0, 5, 0], 2),
    "check_numerics_nan": lambda: tf.debugging.check_numerics(
        tf.ragged.constant([[1.0], [float("nan")]]), "bad!"
    ),
    "matmul_rows_differ": lambda: tf.matmul(
        tf.ragged.constant([[[1.0, 2.0], [3.0]], [[3.0, 4.0]]]),
        tf.constant([[[1.0], [2.0]], [[3.0], [4.0]]]),
    ),
}


@pytest.mark.parametrize("case", sorted(RUN_ERRORS))
def test_run_errors(case):
    with pytest.raises(errors.InvalidArgumentError):
        _run(RUN_ERRORS[case])


def test_shape_is_dynamic_ragged_shape():
    # (recorded from TF 2.21: tf.shape of a RaggedTensor is a DynamicRaggedShape, of
    # out_type, which a session cannot fetch)
    with tf.Graph().as_default(), tf.Session() as sess:
        s = tf.shape(_rt())
        assert repr(s) == "<DynamicRaggedShape lengths=[3, None] num_row_partitions=1>"
        assert (s.dtype, s.rank, s.num_row_partitions) == (tf.int32, 2, 1)
        assert tf.shape(_rt(), out_type=tf.int64).dtype == tf.int64
        inner = tf.ragged.constant([[[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]]], ragged_rank=1)
        assert repr(tf.shape(inner)) == (
            "<DynamicRaggedShape lengths=[2, None, 2] num_row_partitions=1>"
        )
        assert sess.run(s.row_partitions[0].row_splits()).tolist() == [0, 2, 3, 6]
        assert sess.run(s.inner_shape).tolist() == [6]
        assert sess.run(s[0]) == 3
        with pytest.raises(TypeError):
            sess.run(s)
