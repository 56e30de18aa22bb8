"""Behaviours found different from TF 2.21 by running the same TF1 snippets on both
(tensorflow-cpu 2.21.0, tf.compat.v1 graph mode); the values here are TF's, recorded."""

import numpy as np
import pytest

import asyncflow as af
from asyncflow.ops import gradient_ops

nan, inf = float("nan"), float("inf")


def _grad(build, x0):
    with af.Graph().as_default(), af.device("/cpu:0"):
        x = af.constant(np.asarray(x0, np.float32))
        (g,) = af.gradients(af.reduce_sum(build(x)), [x])
        with af.Session() as sess:
            return sess.run(g).tolist()


def test_a_masked_branchs_nan_does_not_reach_the_gradient():
    # TF's SqrtGrad / RsqrtGrad / ReciprocalGrad give 0 where the incoming gradient is 0.
    assert _grad(lambda x: af.where(x > 0, af.sqrt(x), x * 0), [-1.0, 4.0]) == [0.0, 0.25]
    assert _grad(lambda x: af.where(x > 0, af.rsqrt(x), x * 0), [-1.0, 4.0]) == [0.0, -0.0625]
    assert _grad(lambda x: af.where(x > 0, af.reciprocal(x), x * 0), [0.0, 2.0]) == [0.0, -0.25]


@pytest.mark.parametrize(
    "op_type, y, dy, want",
    [
        ("SqrtGrad", [nan, 0.0, 2.0, inf], [0.0, 0.0, 1.0, 3.0], [0.0, 0.0, 0.25, 0.0]),
        ("RsqrtGrad", [nan, inf, 0.5], [0.0, 0.0, 2.0], [0.0, 0.0, -0.125]),
        ("ReciprocalGrad", [nan, inf, 0.5], [0.0, 0.0, 2.0], [0.0, 0.0, -0.5]),
    ],
)
def test_gradient_ops_give_zero_where_the_gradient_is_zero(op_type, y, dy, want):
    with af.Graph().as_default(), af.device("/cpu:0"):
        t = gradient_ops.apply(op_type, af.constant(y), af.constant(dy))
        with af.Session() as sess:
            assert sess.run(t).tolist() == want


def test_cumprod_gradient_at_a_zero_is_zero_not_nan():
    # TF's _CumprodGrad divides with div_no_nan.
    assert _grad(af.cumprod, [2.0, 0.0, 3.0]) == [1.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "build, type_name, fields",
    [
        (lambda: af.nn.top_k(af.constant([1.0, 3.0, 3.0]), 2), "TopKV2", ("values", "indices")),
        (lambda: af.unique(af.constant([1, 2])), "Unique", ("y", "idx")),
        (
            lambda: af.unique_with_counts(af.constant([1, 2])),
            "UniqueWithCounts",
            ("y", "idx", "count"),
        ),
        (lambda: af.setdiff1d(af.constant([1, 2]), af.constant([2])), "ListDiff", ("out", "idx")),
        (
            lambda: af.nn.max_pool_with_argmax(
                af.ones([1, 2, 2, 1]), [1, 2, 2, 1], [1, 2, 2, 1], "VALID"
            ),
            "MaxPoolWithArgmax",
            ("output", "argmax"),
        ),
        (lambda: af.qr(af.ones([2, 2])), "Qr", ("q", "r")),
        (lambda: af.linalg.lu(af.eye(2)), "Lu", ("lu", "p")),
        (
            lambda: af.nn.uniform_candidate_sampler(af.constant([[1]], af.int64), 1, 2, True, 5),
            "UniformCandidateSampler",
            ("sampled_candidates", "true_expected_count", "sampled_expected_count"),
        ),
        (
            lambda: af.nn.compute_accidental_hits(
                af.constant([[1]], af.int64), af.constant([1], af.int64), 1
            ),
            "ComputeAccidentalHits",
            ("indices", "ids", "weights"),
        ),
    ],
)
def test_multi_output_builders_return_tfs_named_tuples(build, type_name, fields):
    with af.Graph().as_default():
        out = build()
        assert type(out).__name__ == type_name and out._fields == fields
        assert isinstance(out, tuple) and out[0] is getattr(out, fields[0])


def test_top_k_values_gradient_through_the_named_field():
    assert _grad(lambda x: af.nn.top_k(x, 2).values, [1.0, 3.0, 3.0]) == [0.0, 1.0, 1.0]


def test_psnr_of_uint8_images_takes_max_val_in_their_dtype():
    # TF casts max_val to the images' dtype and converts it as them: 255 beside uint8
    # images converted to [0, 1] is 1.0.  Ours took 255.0 there: 71.49 dB for TF's 23.36.
    img = (np.arange(4 * 5 * 3) % 256).astype(np.uint8).reshape(4, 5, 3)
    rng = np.random.default_rng(0)
    a = rng.random((2, 8, 8, 3)).astype(np.float32)
    b = np.clip(a + rng.normal(0, 0.05, a.shape), 0, 1).astype(np.float32)
    with af.Graph().as_default(), af.Session() as sess:
        got = sess.run(
            [
                af.image.psnr(img, img // 2, 255),
                af.image.psnr(a, b, 1.0),
                af.image.psnr((a * 255).astype(np.uint8), (b * 255).astype(np.uint8), 255),
            ]
        )
    np.testing.assert_allclose(got[0], 23.357177734375, rtol=1.5e-7)
    np.testing.assert_allclose(got[1], [26.31114387512207, 26.32146644592285], rtol=1.5e-7)
    np.testing.assert_allclose(got[2], [26.296472549438477, 26.320707321166992], rtol=1.5e-7)


def test_strings_split_takes_tf1s_arguments():
    # tf.compat.v1.strings.split(input, sep, maxsplit, result_type, source): StringSplitV2.
    with af.Graph().as_default(), af.Session() as sess:
        got = sess.run(
            [
                af.strings.split(af.constant(["a b c d"]), maxsplit=2).values,
                af.strings.split(["a,,b"], sep=",").values,
                af.strings.split(source=["x  y "]).values,
                af.string_split(["a,,b"], delimiter=",").values,  # (v1 string_split: chars)
            ]
        )
    assert [g.tolist() for g in got] == [
        [b"a", b"b", b"c d"],
        [b"a", b"", b"b"],
        [b"x", b"y"],
        [b"a", b"b"],
    ]
    with pytest.raises(ValueError):
        af.strings.split(["a"], source=["b"])


@pytest.mark.parametrize(
    "kwargs, want",
    [
        ({}, [b"(1.000000,2.000000)", b"(-0.500000,-0.000000)"]),
        ({"precision": 2}, [b"(1.00,2.00)", b"(-0.50,-0.00)"]),
        ({"scientific": True}, [b"(1.000000e+00,2.000000e+00)", b"(-5.000000e-01,-1.000000e-08)"]),
        ({"shortest": True}, [b"(1,2)", b"(-0.5,-1e-08)"]),
        ({"width": 12}, [b"(    1.000000,    2.000000)", b"(   -0.500000,   -0.000000)"]),
        (
            {"width": 12, "fill": "0"},
            [b"(00001.000000,00002.000000)", b"(-0000.500000,-0000.000000)"],
        ),
    ],
)
def test_as_string_of_complex_numbers_as_tf(kwargs, want):
    with af.Graph().as_default(), af.Session() as sess:
        c = af.constant([1 + 2j, -0.5 - 1e-8j], af.complex64)
        assert sess.run(af.as_string(c, **kwargs)).tolist() == want


def test_as_string_fill_other_than_printfs_pads_is_an_error_as_tf():
    with af.Graph().as_default(), af.Session() as sess:
        assert sess.run(af.as_string([7], width=4, fill=" ")).tolist() == [b"   7"]
        with pytest.raises(
            af.errors.InvalidArgumentError, match='Fill argument not supported: "x"'
        ):
            sess.run(af.as_string([7], width=4, fill="x"))


def test_batch_normalization_collects_its_update_operations_as_tf():
    # TF 2.21 (legacy tf.layers): UPDATE_OPS holds the AssignSub operations, each named
    # by its scope.
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 2])
        af.layers.batch_normalization(x, training=True)
        got = [
            (type(o).__name__, o.name, o.type) for o in af.get_collection(af.GraphKeys.UPDATE_OPS)
        ]
    assert got == [
        ("Operation", "batch_normalization/AssignMovingAvg", "AssignSub"),
        ("Operation", "batch_normalization/AssignMovingAvg_1", "AssignSub"),
    ]


@pytest.mark.parametrize(
    "graph_seed, seed, want",
    [
        (1, 3, ([7, 3, 5], [4, 6, 0], [6, 1, 0, 2, 3, 4, 7, 1, 2, 5])),
        (None, 3, ([7, 3, 4], [0, 6, 2], [4, 2, 1, 6, 5, 7, 3, 0, 5, 1])),
        (5, None, ([5, 4, 1], [0, 6, 2], [0, 5, 7, 2, 1, 6, 4, 3, 7, 3])),
    ],
)
def test_seeded_random_shuffle_queue_dequeues_in_tfs_order(graph_seed, seed, want):
    # TF's queue draws Philox(seed, seed2) one uint32 at a time, index = draw % size.
    with af.Graph().as_default():
        if graph_seed is not None:
            af.set_random_seed(graph_seed)
        q = af.RandomShuffleQueue(10, 0, af.int32, shapes=[[]], seed=seed)
        enq = q.enqueue_many([list(range(8))])
        deq, deq3, rest = q.dequeue(), q.dequeue_many(3), q.dequeue_up_to(10)
        with af.Session() as sess:
            sess.run(enq)
            one = [int(sess.run(deq)) for _ in range(3)]
            three = sess.run(deq3).tolist()
            sess.run(enq)
            assert (one, three, sess.run(rest).tolist()) == want


def test_train_batch_of_one_tensor_is_that_tensor_as_tf():
    with af.Graph().as_default():
        x = af.constant([1, 2, 3])
        b = af.train.batch([x], batch_size=2, enqueue_many=True)
        d = af.train.batch({"a": x}, batch_size=2, enqueue_many=True)
        two = af.train.batch([x, x], batch_size=2, enqueue_many=True)
        assert isinstance(b, af.Tensor) and str(b.shape) == "(2,)"
        assert isinstance(d, dict) and list(d) == ["a"]
        assert isinstance(two, list) and len(two) == 2


@pytest.mark.parametrize(
    "variable, value, message",
    [
        (
            [1, 2],
            [1, 2, 3],
            "Dimension 0 in both shapes must be equal, but are 2 and 3. Shapes are [2] and [3].",
        ),
        ([[1, 2]], [1, 2], "Shapes must be equal rank, but are 2 and 1"),
        (
            [[1, 2]],
            [[1], [2]],
            "Dimension 0 in both shapes must be equal, but are 1 and 2. "
            "Shapes are [1,2] and [2,1].",
        ),
    ],
)
def test_assign_of_another_shape_says_what_tf_says(variable, value, message):
    import re

    for assign in (af.assign, af.assign_add):
        with af.Graph().as_default():
            with pytest.raises(ValueError, match=re.escape(message)):
                assign(af.Variable(variable), value)


def test_get_attr_gives_tfs_protos_for_shapes_and_tensors():
    # TF's get_attr: a shape attr is a TensorShapeProto, a tensor attr a TensorProto
    # (`tf.make_ndarray(op.get_attr("value"))`, `tf.TensorShape(op.get_attr("shape"))`).
    with af.Graph().as_default():
        p = af.placeholder(af.float32, [None, 3])
        p2 = af.placeholder(af.float32, None)
        c = af.constant([[1.0, 2.0]])
        q = af.FIFOQueue(3, [af.float32], shapes=[[2]])
        shape = p.op.get_attr("shape")
        assert type(shape).__name__ == "TensorShapeProto"
        assert [d.size for d in shape.dim] == [-1, 3] and not shape.unknown_rank
        assert p2.op.get_attr("shape").unknown_rank
        assert af.TensorShape(shape).as_list() == [None, 3]
        assert af.TensorShape(p2.op.get_attr("shape")).ndims is None
        assert [[d.size for d in s.dim] for s in q.queue_ref.op.get_attr("shapes")] == [[2]]
        value = c.op.get_attr("value")
        assert type(value).__name__ == "TensorProto"
        assert value.SerializeToString().hex() == (
            "0801120812020801120208022208" + "0000803f00000040"
        )  # TF's bytes
        np.testing.assert_array_equal(af.make_ndarray(value), [[1.0, 2.0]])
        assert p.op.get_attr("dtype") == af.float32
        assert af.TensorShape([None, 3]).as_proto() == shape


@pytest.mark.parametrize(
    "value, dtype",
    [
        (2**63, "uint64"),
        ([2**63, 2**63 + 1], "uint64"),
        ([True, 2**63], "uint64"),
        ([1, 2**63], "float32"),  # (NumPy's int64 and uint64 make float64: TF's float32)
        ([-1, 2**63], "float32"),
        ([1.5, 2**63], "float32"),
    ],
)
def test_integers_past_int64_take_tfs_type(value, dtype):
    with af.Graph().as_default():
        assert af.constant(value).dtype.name == dtype


def test_none_is_refused_as_tf_refuses_it():
    with af.Graph().as_default():
        x = af.constant([1.0])
        with pytest.raises(ValueError, match="^None values not supported.$"):
            af.convert_to_tensor(None)
        with pytest.raises((TypeError, ValueError), match="None values not supported.$"):
            x + None  # (was a NaN here)
        # (a None among values was a NaN here)
        with pytest.raises(TypeError, match="^Expected float32, got None of type 'NoneType'"):
            af.constant([1.0, None], dtype=af.float32)
        with pytest.raises(TypeError, match="^Failed to convert elements of 18446744073709551616"):
            af.constant(2**64)


@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda a, b: af.matmul(a, b),
            "Dimensions must be equal, but are 3 and 4 for 'MatMul' (op: 'MatMul') with input "
            "shapes: [2,3], [4,5].",
        ),
        (
            lambda a, b: af.nn.conv2d(a, b, [1, 1, 1, 1], "SAME"),
            "Shape must be rank 4 but is rank 2 for 'Conv2D' (op: 'Conv2D') with input shapes: "
            "[2,3], [4,5].",
        ),
        (
            lambda a, b: af.tile(a, [1, 2, 3]),
            "Shape must be rank 2 but is rank 3 for 'Tile' (op: 'Tile') with input shapes: "
            "[2,3], [3].",
        ),
        (
            lambda a, b: af.gather(a, [0], axis=3),
            "Shape must be at least rank 4 but is rank 2 for 'GatherV2' (op: 'GatherV2') with "
            "input shapes: [2,3], [1], [].",
        ),
        (
            lambda a, b: af.stack([a, b]),
            "Dimension 0 in both shapes must be equal, but are 2 and 4. Shapes are [2,3] and "
            "[4,5].\n\tFrom merging shape 1 with other shapes. for 'stack' (op: 'Pack') with "
            "input shapes: [2,3], [4,5].",
        ),
        (
            lambda a, b: af.where(af.constant([True, False]), a, b),
            "Dimension 0 in both shapes must be equal, but are 2 and 4. Shapes are [2,3] and "
            "[4,5]. for 'Select' (op: 'Select') with input shapes: [2], [2,3], [4,5].",
        ),
    ],
)
def test_shape_errors_say_tfs_words_and_the_input_shapes(build, message):
    # TF1's words (TF 2.21 names the node as '{{node MatMul}} = MatMul[...](a, b)').
    with af.Graph().as_default():
        a = af.placeholder(af.float32, [2, 3], name="a")
        b = af.placeholder(af.float32, [4, 5], name="b")
        with pytest.raises(ValueError) as info:
            build(a, b)
        assert str(info.value) == message


def test_none_inputs_fail_as_in_tf():
    with af.Graph().as_default():
        x = af.constant([1.0])
        for build in (lambda: x + None, lambda: af.add(x, None), lambda: af.matmul(x, None)):
            with pytest.raises(ValueError, match="^None values not supported.$"):
                build()
        want = "^Tried to convert 'shape' to a tensor and failed. Error: None values not "
        with pytest.raises(ValueError, match=want + "supported."):
            af.reshape(x, None)
        want = (
            r"^Tensors in list passed to 'values' of 'ConcatV2' Op have types \[float32, "
            r"<NOT CONVERTIBLE TO TENSOR>\] that don't all match.$"
        )
        with pytest.raises(TypeError, match=want):
            af.concat([x, None], 0)


@pytest.mark.parametrize(
    "build, error, message",
    [
        (
            lambda i, f: af.matmul(i, f),
            TypeError,
            "Input 'b' of 'MatMul' Op has type float32 that does not match type int32 of "
            "argument 'a'.",
        ),
        (
            lambda i, f: i**f,
            TypeError,
            "Input 'y' of 'Pow' Op has type float32 that does not match type int32 of "
            "argument 'x'.",
        ),
        (
            lambda i, f: i / f,
            TypeError,
            "`x` and `y` must have the same dtype, got tf.int32 != tf.float32.",
        ),
        (
            lambda i, f: af.div_no_nan(f, i),
            TypeError,
            "`x` and `y` must have the same dtype, got tf.float32 != tf.int32.",
        ),
        (
            lambda i, f: af.div(i, f),
            ValueError,
            "Tensor conversion requested dtype int32 for Tensor with dtype float32: ",
        ),
    ],
)
def test_builders_refuse_two_dtypes_as_tfs_do(build, error, message):
    with af.Graph().as_default():
        i, f = af.constant([[1]]), af.constant([[1.0]])
        with pytest.raises(error) as info:
            build(i, f)
        assert str(info.value).startswith(message)


def test_get_variable_without_a_shape_or_an_initializer():
    with af.Graph().as_default():
        want = "^Variable noshape did not get an initializer, so its `shape` argument must"
        with pytest.raises(ValueError, match=want):
            af.get_variable("noshape")
