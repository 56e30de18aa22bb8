"""Run-time errors and variable state ops against values recorded from TF 2.21
(tf.compat.v1 graph mode); TF1's behaviour where TF2 changed only a message."""

from __future__ import annotations

import re

import numpy as np
import pytest

import asyncflow as tf


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g


# -- initial values that read other variables ---------------------------------------------


def test_initial_value_reading_an_uninitialized_variable_uses_its_initial_value():
    v = tf.Variable(1.0, name="vv")
    w = tf.Variable(v + 1.0, name="ww")
    with tf.Session() as sess:
        sess.run(w.initializer)  # TF: 2.0, and vv is still uninitialised
        assert sess.run(w) == 2.0
        assert not sess.run(tf.is_variable_initialized(v))


def test_global_initializer_with_dependent_variables_and_tf_op_names():
    v = tf.Variable(2.0, name="vv")
    w = tf.Variable(v * 2 + v, name="ww")
    names = [op.name for op in tf.get_default_graph().get_operations()]
    # TF's copies of the path that reads vv, named "<op>_<scope>".
    assert names[-5:] == ["vv/read_ww", "mul_ww", "add_ww", "ww/Assign", "ww/read"]
    assert "ww/cond/Merge" in names
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run([v, w]) == [2.0, 6.0]


def test_get_variable_initializer_tensor_reading_a_variable():
    v = tf.Variable(2.0, name="vv")
    w = tf.get_variable("w", initializer=v * 2.0)
    with tf.Session() as sess:
        sess.run(w.initializer)
        assert sess.run(w) == 4.0


def test_resource_read_in_an_initial_value_is_not_guarded():
    v = tf.Variable(1.0, name="vv", use_resource=True)
    w = tf.Variable(v * 3.0, name="ww", use_resource=True)
    with tf.Session() as sess, pytest.raises(tf.errors.FailedPreconditionError):
        sess.run(w.initializer)


# -- resource variables used before initialisation: TF's lookup fails (NotFoundError) --------

_NOT_FOUND = "Resource localhost/Variable/N10tensorflow3VarE does not exist."


@pytest.mark.parametrize(
    "build",
    [
        lambda v: v.sparse_read([1]),
        lambda v: v.gather_nd([[1, 1]]),
        lambda v: tf.scatter_add(v, [0], [[1.0, 1.0]]),
        lambda v: tf.scatter_update(v, [0], [[1.0, 1.0]]),
        lambda v: tf.scatter_nd_update(v, [[0]], [[1.0, 1.0]]),
        lambda v: tf.scatter_nd_add(v, [[0]], [[1.0, 1.0]]),
        lambda v: v[0].assign([1.0, 1.0]),
        lambda v: v.assign_sub([[1.0, 1.0], [1.0, 1.0]]),
    ],
    ids=["sparse_read", "gather_nd", "scatter_add", "scatter_update", "scatter_nd_update",
         "scatter_nd_add", "slice_assign", "assign_sub"],
)  # fmt: skip
def test_resource_update_or_gather_of_uninitialized_variable_is_not_found(build):
    v = tf.Variable([[1.0, 2.0], [3.0, 4.0]], use_resource=True)
    with tf.Session() as sess, pytest.raises(tf.errors.NotFoundError, match=_NOT_FOUND):
        sess.run(build(v))


def test_resource_count_up_to_of_uninitialized_variable_is_not_found():
    v = tf.Variable(0, use_resource=True)
    with tf.Session() as sess, pytest.raises(tf.errors.NotFoundError, match=_NOT_FOUND):
        sess.run(v.count_up_to(3))


def test_resource_read_of_uninitialized_variable_stays_failed_precondition():
    v = tf.Variable(1.0, use_resource=True)
    with tf.Session() as sess, pytest.raises(tf.errors.FailedPreconditionError):
        sess.run(v.read_value())


# -- update builders given something that is not a variable --------------------------------


@pytest.mark.parametrize(
    "build,method",
    [
        (lambda t: tf.assign(t, 2.0), "assign"),
        (lambda t: tf.assign_add(t, 2.0), "assign_add"),
        (lambda t: tf.assign_sub(t, 2.0), "assign_sub"),
        (lambda t: tf.scatter_update(t, [0], [2.0]), "_lazy_read"),
        (lambda t: tf.scatter_nd_update(t, [[0]], [2.0]), "_lazy_read"),
        (lambda t: tf.count_up_to(t, 2), "handle"),
    ],
)
def test_update_builders_on_a_plain_tensor_raise_attribute_error(build, method):
    t = tf.constant([1.0])
    with pytest.raises(AttributeError, match=f"'Tensor' object has no attribute '{method}'"):
        build(t)


@pytest.mark.parametrize("method", ["assign_add", "assign_sub"])
def test_ref_assign_add_of_a_different_shape_says_tf1s_words(method):
    v = tf.Variable([1.0, 2.0])
    x = tf.placeholder(tf.float32)
    with tf.Session() as sess:
        sess.run(v.initializer)
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="^Parameters and update must be the same size"
        ):
            sess.run(getattr(v, method)(x), {x: [1.0, 2.0, 3.0]})


# -- Variable's scatter methods ---------------------------------------------------------------


@pytest.mark.parametrize("use_resource", [False, True])
def test_variable_scatter_methods(use_resource):
    # (on the CPU: the ref ScatterNd* kernels are CPU kernels here, and the stand-in GPU
    # set places a ref variable on GPU:0)
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        _variable_scatter_methods(use_resource)


def _variable_scatter_methods(use_resource):
    v = tf.Variable([[1.0, 2.0], [3.0, 4.0]], use_resource=use_resource)
    rows = tf.IndexedSlices(tf.constant([[2.0, 3.0]]), tf.constant([1]))
    with tf.Session() as sess:
        sess.run(v.initializer)
        got = [
            sess.run(v.scatter_nd_update([[0, 1]], [9.0])),
            sess.run(v.scatter_nd_add([[1, 1]], [9.0])),
            sess.run(v.scatter_nd_sub([[1]], [[1.0, 1.0]])),
            sess.run(
                v.batch_scatter_update(
                    tf.IndexedSlices(tf.constant([[5.0], [6.0]]), tf.constant([[1], [0]]))
                )
            ),
        ]
        for method in ("scatter_mul", "scatter_div", "scatter_min", "scatter_max"):
            got.append(sess.run(getattr(v, method)(rows)))
    want = [  # TF 2.21
        [[1, 9], [3, 4]], [[1, 9], [3, 13]], [[1, 9], [2, 12]], [[1, 5], [6, 12]],
        [[1, 5], [12, 36]], [[1, 5], [6, 12]], [[1, 5], [2, 3]], [[1, 5], [2, 3]],
    ]  # fmt: skip
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, np.array(w, np.float32))


def test_ref_variable_sparse_read_and_gather_nd_raise_attribute_error():
    v = tf.Variable([1.0, 2.0])
    with pytest.raises(AttributeError):
        v.sparse_read([0])
    with pytest.raises(AttributeError):
        v.gather_nd([[0]])


def test_batch_scatter_update_needs_indexed_slices():
    ref = tf.Variable([[1.0, 2.0]])
    with pytest.raises(AttributeError, match="'list' object has no attribute 'indices'"):
        ref.batch_scatter_update([1])
    res = tf.Variable([[1.0, 2.0]], use_resource=True)
    with pytest.raises(TypeError, match=r"sparse_delta is not IndexedSlices: \[1\]"):
        res.batch_scatter_update([1])


# -- assertion messages ---------------------------------------------------------------------


def _assert_message(make_assert, feed):
    x = tf.placeholder(tf.float32)
    with tf.control_dependencies([make_assert(x)]):
        y = tf.identity(x)
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(y, {x: feed})
    return info.value.message.split("\n")[0]


def test_assert_non_positive_message_joins_condition_and_name_as_tf():
    got = _assert_message(tf.assert_non_positive, [1.0, -1.0, 3.0])
    assert got == (
        "assertion failed: [] [Condition x <= 0 did not hold element-wise:"
        "x (Placeholder:0) = ] [1 -1 3]"
    )


def test_assert_data_strings_are_c_escaped():
    flag = tf.placeholder(tf.bool)
    data = ['a"b', "c'd", "new\nline", "back\\slash", tf.constant(["üñ"])]
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(tf.Assert(flag, data), {flag: False})
    assert info.value.message.split("\n")[0] == (
        "assertion failed: [a\\\"b] [c\\'d] [new\\nline] [back\\\\slash] [üñ]"
    )


def test_debugging_namespace():
    assert tf.debugging.assert_all_finite is tf.verify_tensor_all_finite
    got = _assert_message(lambda x: tf.debugging.assert_all_finite(x, "fin"), [np.nan])
    assert got == "fin : Tensor had NaN values"
    with tf.Session() as sess:
        assert sess.run(
            tf.debugging.check_numerics(tf.constant([1.0, 2.0]) * 2, "m")
        ).tolist() == [
            2.0,
            4.0,
        ]
        assert sess.run(tf.debugging.is_nan([1.0, np.nan])).tolist() == [False, True]


# -- resource variable names ------------------------------------------------------------------


def test_resource_variable_op_names_as_tf():
    v = tf.Variable([1.0, 2.0], name="pv", use_resource=True)
    assert v.initial_value.name == "pv/Initializer/initial_value:0"
    assert v.read_value().name == "Identity:0"
    assert v.to_proto().initial_value_name == "pv/Initializer/initial_value:0"
    ref = tf.Variable(1.0)
    assert tf.is_variable_initialized(ref).name == "IsVariableInitialized:0"
    flag = tf.is_variable_initialized(v)  # a resource variable's own op, as TF1's
    assert flag.op.type == "VarIsInitializedOp"
    assert tf.is_variable_initialized(ref).name == "IsVariableInitialized_1:0"
    with tf.Session() as sess:
        assert not sess.run(flag)
        sess.run(v.initializer)
        assert sess.run(flag)


# -- tf.eye with sizes known only at run time -------------------------------------------------


@pytest.mark.parametrize(
    "build,feed,want",
    [
        (lambda n, m: tf.eye(n), (3, 0), np.eye(3)),
        (lambda n, m: tf.eye(n, m), (2, 3), np.eye(2, 3)),
        (lambda n, m: tf.eye(n, m, dtype=tf.int32), (3, 2), np.eye(3, 2)),
        (lambda n, m: tf.eye(n, batch_shape=[2]), (2, 0), np.stack([np.eye(2)] * 2)),
        (
            lambda n, m: tf.eye(2, batch_shape=tf.reshape(m, [1])),
            (0, 2),
            np.stack([np.eye(2)] * 2),
        ),
    ],
)
def test_eye_of_tensor_sizes(build, feed, want):
    n, m = tf.placeholder(tf.int32), tf.placeholder(tf.int32)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(build(n, m), {n: feed[0], m: feed[1]}), want)


def test_eye_of_a_negative_tensor_size_fails_at_run_time():
    n = tf.placeholder(tf.int32, [])
    e = tf.eye(n)
    assert e.shape.as_list() == [None, None]
    with (
        tf.Session() as sess,
        pytest.raises(tf.errors.InvalidArgumentError, match="^Dimension -1 must be >= 0"),
    ):
        sess.run(e, {n: -1})


# -- softmax cross-entropy with labels of unknown rank ------------------------------------------


def test_softmax_xent_labels_of_unknown_rank():
    labels = tf.placeholder(tf.float32)
    loss = tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=tf.ones([2, 3]))
    loss0 = tf.nn.softmax_cross_entropy_with_logits_v2(
        labels=labels, logits=tf.ones([3, 2]), axis=0
    )
    with tf.Session() as sess:
        got = sess.run(loss, {labels: [[1.0, 0, 0], [0, 1, 0]]})
        np.testing.assert_allclose(got, [1.0986123085021973] * 2, rtol=1e-6)
        got = sess.run(loss0, {labels: [[1.0, 0], [0, 1], [0, 0]]})
        np.testing.assert_allclose(got, [1.0986123085021973] * 2, rtol=1e-6)
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"^logits and labels must be broadcastable: logits_size=\[2,3\] "
            r"labels_size=\[2,4\]",
        ):
            sess.run(loss, {labels: np.ones((2, 4))})


# -- kernel error messages (shapes known only at run time) --------------------------------------

_MESSAGES = [  # (name, builder of the failing op, fed value, TF's first line)
    ("det", tf.matrix_determinant, np.ones((2, 3)), "Input matrix must be square."),
    ("det_rank", tf.matrix_determinant, np.ones(3), "Input tensor 0 must have rank >= 2, got 1"),
    ("inverse", tf.matrix_inverse, np.ones((2, 3)), "Input matrix must be square."),
    ("cholesky", tf.cholesky, np.ones((2, 3)), "Input matrix must be square."),
    ("eig", tf.self_adjoint_eigvals, np.ones((2, 3)), "Input matrix must be square."),
    ("sqrtm", tf.linalg.sqrtm, np.ones((2, 3)), "Input matrix must be square."),
    ("logm", lambda a: tf.linalg.logm(tf.cast(a, tf.complex64)), np.ones((2, 3)),
     "Input matrix must be square."),
    ("solve", lambda a: tf.matrix_solve(a, tf.ones([2, 1])), np.ones((2, 3)),
     "First input (lhs) must be a square matrix."),
    ("lu_rank", tf.linalg.lu, np.ones(3), "Input tensor must have rank >= 2, got 1"),
    ("diag_part", tf.diag_part, np.ones((2, 3)),
     "Invalid shape [2,3]: dimensions 0 and 1 do not match."),
    ("diag_part_odd", tf.diag_part, np.ones((2, 2, 3)),
     "The rank of the tensor should be" + " " * 42 + "even and positive, got shape [2,2,3]"),
    ("batch_to_space", lambda a: tf.batch_to_space(a, [[0, 0], [0, 0]], 2), np.ones((3, 1, 1, 1)),
     "Input batch dimension (3) is not divisible by product of block sizes (4)"),
    ("space_to_depth", lambda a: tf.space_to_depth(a, 2), np.ones((1, 3, 5, 1)),
     "Image width 5 and height 3 should be divisible by block_size: 2"),
]  # fmt: skip


@pytest.mark.parametrize(
    "build,value,message", [c[1:] for c in _MESSAGES], ids=[c[0] for c in _MESSAGES]
)
def test_kernel_error_messages(build, value, message):
    x = tf.placeholder(tf.float32)
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(build(x), {x: value})
    assert info.value.message.split("\n")[0] == message


@pytest.mark.parametrize(
    "reduce", [tf.unsorted_segment_sum, tf.unsorted_segment_max, tf.unsorted_segment_prod]
)
def test_unsorted_segment_negative_num_segments(reduce):
    n = tf.placeholder(tf.int32)
    with (
        tf.Session() as sess,
        pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"^Input num_segments == -1 must not be negative\.",
        ),
    ):
        sess.run(reduce([1.0, 2.0], [0, 1], n), {n: -1})


# -- decoding bytes that are no image -------------------------------------------------------------


@pytest.mark.parametrize(
    "decode", ["decode_png", "decode_jpeg", "decode_gif", "decode_bmp", "decode_image"]
)
@pytest.mark.parametrize(
    "data,message",
    [
        (b"abc", "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required."),
        (b"", "Input is empty."),
        (b"\x89PNG\r\n\x1a\nxxxx", "Invalid PNG. Failed to initialize decoder."),
    ],
)
def test_decode_of_bad_bytes(decode, data, message):
    x = tf.placeholder(tf.string)
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(getattr(tf.image, decode)(x), {x: data})
    assert info.value.message.split("\n")[0] == message


# -- crop/pad to a bounding box: TF's checks, static and at run time ------------------------------

_BOX_CASES = [  # (builder, offsets and sizes, TF's message)
    (tf.image.crop_to_bounding_box, (-1, 0, 2, 2), "offset_height must be >= 0."),
    (tf.image.crop_to_bounding_box, (0, -1, 2, 2), "offset_width must be >= 0."),
    (tf.image.crop_to_bounding_box, (0, 0, 0, 2), "target_height must be > 0."),
    (tf.image.crop_to_bounding_box, (0, 0, 2, 0), "target_width must be > 0."),
    (tf.image.crop_to_bounding_box, (3, 0, 2, 2), "height must be >= target + offset."),
    (tf.image.crop_to_bounding_box, (0, 3, 2, 2), "width must be >= target + offset."),
    (tf.image.pad_to_bounding_box, (-1, 0, 5, 5), "offset_height must be >= 0"),
    (tf.image.pad_to_bounding_box, (0, -1, 5, 5), "offset_width must be >= 0"),
    (tf.image.pad_to_bounding_box, (2, 0, 5, 5), "height must be <= target - offset"),
    (tf.image.pad_to_bounding_box, (0, 2, 5, 5), "width must be <= target - offset"),
]


@pytest.mark.parametrize("build,args,message", _BOX_CASES)
def test_bounding_box_checks(build, args, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        build(tf.ones([4, 4, 1]), *args)
    with tf.Graph().as_default():
        ps = [tf.placeholder(tf.int32) for _ in args]
        out = build(tf.ones([4, 4, 1]), *ps)
        with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError) as info:
            sess.run(out, dict(zip(ps, args, strict=True)))
    assert info.value.message.split("\n")[0] == f"assertion failed: [{message}]"


def test_bounding_box_with_run_time_sizes_that_fit():
    ps = [tf.placeholder(tf.int32) for _ in range(4)]
    crop = tf.image.crop_to_bounding_box(tf.ones([4, 4, 1]), *ps)
    pad = tf.image.pad_to_bounding_box(tf.ones([4, 4, 1]), *ps)
    with tf.Session() as sess:
        assert sess.run(crop, dict(zip(ps, (1, 1, 2, 2), strict=True))).shape == (2, 2, 1)
        assert sess.run(pad, dict(zip(ps, (1, 1, 5, 5), strict=True))).shape == (5, 5, 1)
