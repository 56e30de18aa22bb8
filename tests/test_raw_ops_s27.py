"""TF 2.21 raw ops added in s27: TensorList joins and cuts, TensorArrayGradWithShape,
TensorMap, stateful RNG ops, sparse-tensor maps and the remaining TF1 graph ops.

Every expected value and error message here was recorded from TF 2.21
(`tf.compat.v1` graphs run in a Session) running the same calls.
"""

import pathlib

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors
from asyncflow.estimator import warm_starting

R = tf.raw_ops
F32 = tf.float32


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


def _run(fetches):
    with tf.Session() as sess:
        return sess.run(fetches)


def _raises(fetch, cls, message):
    with tf.Session() as sess, pytest.raises(cls) as info:
        sess.run(fetch)
    assert message in str(info.value)


# -- TensorList --------------------------------------------------------------------------


def _lst(values, es=-1):
    return R.TensorListFromTensor(
        tensor=tf.constant(values, F32), element_shape=tf.constant(es, tf.int32)
    )


def _stack(h, es=-1):
    return R.TensorListStack(input_handle=h, element_shape=tf.constant(es), element_dtype=F32)


def _split(values, lengths, es=-1):
    return R.TensorListSplit(
        tensor=tf.constant(values, F32),
        element_shape=tf.constant(es, tf.int32),
        lengths=tf.constant(lengths, tf.int64),
    )


def _reserve(es, n):
    return R.TensorListReserve(element_shape=tf.constant(es), num_elements=n, element_dtype=F32)


def _concat_v2(h, es, leading):
    return R.TensorListConcatV2(
        input_handle=h,
        element_shape=tf.constant(es, tf.int32),
        leading_dims=tf.constant(leading, tf.int64),
        element_dtype=F32,
    )


def test_tensor_list_concat_and_split_as_tf():
    c = R.TensorListConcat(input_handle=_lst([[1, 2], [3, 4], [5, 6]]), element_dtype=F32)
    c_es = R.TensorListConcat(
        input_handle=_lst([[1, 2], [3, 4]]), element_dtype=F32, element_shape=[None]
    )
    rows = R.TensorListConcat(
        input_handle=_split([[1, 2], [3, 4], [5, 6]], [1, 2]), element_dtype=F32
    )
    s = _stack(_split([1, 2, 3, 4, 5, 6], [3, 3], [3]))
    ints = R.TensorListConcat(
        input_handle=R.TensorListSplit(
            tensor=tf.constant([[1, 2], [3, 4], [5, 6]]),
            element_shape=tf.constant([-1, 2]),
            lengths=tf.constant([0, 3], tf.int64),
        ),
        element_dtype=tf.int32,
    )
    assert c.tensor.shape.ndims is None and c_es.tensor.shape.as_list() == [None]
    assert c.lengths.shape.as_list() == [None]
    got = _run([c, c_es.tensor, rows, s, ints])
    np.testing.assert_array_equal(got[0].tensor, [1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(got[0].lengths, [2, 2, 2])
    assert got[0].lengths.dtype == np.int64
    np.testing.assert_array_equal(got[1], [1, 2, 3, 4])
    np.testing.assert_array_equal(got[2].tensor, [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(got[2].lengths, [1, 2])
    np.testing.assert_array_equal(got[3], [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(got[4].tensor, [[1, 2], [3, 4], [5, 6]])
    assert got[4].tensor.dtype == np.int32


def test_tensor_list_concat_v2_unset_items_as_tf():
    partial = R.TensorListSetItem(input_handle=_reserve([-1, 3], 3), index=1, item=tf.ones([2, 3]))
    cases = [
        _concat_v2(_reserve([-1, 3], 3), [-1, 3], [1, 2, 0]),
        _concat_v2(_reserve([2, 3], 2), [2, 3], []),  # (the known first dim)
        _concat_v2(_reserve([2, 3], 2), [2, 3], [1, 1]),  # (leading_dims first)
        _concat_v2(_reserve([-1, -1], 2), [-1, 4], [1, 1]),
        _concat_v2(partial, [-1, 3], [1, 2, 4]),
        _concat_v2(
            R.EmptyTensorList(
                element_shape=tf.constant([-1, 3]), max_num_elements=-1, element_dtype=F32
            ),
            [-1, 3],
            [],
        ),
    ]
    assert cases[0].tensor.shape.as_list() == [None, 3]
    got = _run(cases)
    want_rows = [3, 4, 2, 2, 7, 0]
    for g, n in zip(got, want_rows):
        assert g.tensor.shape[0] == n
    assert got[3].tensor.shape == (2, 4)
    np.testing.assert_array_equal(got[4].tensor.sum(axis=1), [0, 3, 3, 0, 0, 0, 0])
    np.testing.assert_array_equal(got[4].lengths, [1, 2, 4])
    assert got[5].tensor.shape == (0, 3) and got[5].lengths.tolist() == []


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: R.TensorListConcat(input_handle=_lst([1.0, 2.0]), element_dtype=F32),
            "Concat saw a scalar shape at index 0 but requires at least vectors.",
        ),
        (
            lambda: _concat_v2(_reserve([-1, 3], 2), [-1, 3], []),
            "List contains uninitialized tensor at index 0 but leading_dims has only 0 elements.",
        ),
        (
            lambda: _concat_v2(_reserve([-1, -1], 2), [-1, -1], [1, 1]),
            "Trying to concat list with only uninitialized tensors but "
            "element_shape_except_first_dim is not fully defined: [?]",
        ),
        (
            lambda: _concat_v2(
                R.EmptyTensorList(
                    element_shape=tf.constant(-1), max_num_elements=-1, element_dtype=F32
                ),
                -1,
                [],
            ),
            "All except the first dimension must be fully defined when concating an empty "
            "tensor list. element_shape: <unknown>",
        ),
        (
            lambda: _split([1, 2, 3, 4, 5, 6], [2, 2]),
            "Unused values in tensor. Length of tensor: 6 Values used: 4",
        ),
        (lambda: _split([1, 2, 3, 4, 5, 6], [-1, 7]), "Invalid value in lengths: -1"),
        (
            lambda: _split([1, 2, 3], [2, 2]),
            "Attempting to slice [2, 4] from tensor with length 3",
        ),
    ],
)
def test_tensor_list_concat_split_errors_as_tf(make, message):
    out = make()
    fetch = R.TensorListLength(input_handle=out) if isinstance(out, tf.Tensor) else out
    _raises(fetch, errors.InvalidArgumentError, message)


def test_tensor_list_split_build_errors_as_tf():
    with pytest.raises(ValueError, match="Shape must be at least rank 1 but is rank 0"):
        _split(1.0, [1])
    with pytest.raises(ValueError, match=r"Shapes must be equal rank, but are 1 and 0"):
        _split([1, 2, 3, 4, 5, 6], [3, 3], [])
    with pytest.raises(ValueError) as info:
        _split([[1, 2], [3, 4], [5, 6]], [1, 2], [-1, 3])
    assert (
        "Dimension 1 in both shapes must be equal, but are 2 and 3. Shapes are [?,2] and [?,3]."
        in str(info.value)
    )


def test_tensor_list_scatter_as_tf():
    def scatter(values, idx, es=-1):
        return R.TensorListScatter(
            tensor=tf.constant(values, F32),
            indices=tf.constant(idx, tf.int32),
            element_shape=tf.constant(es, tf.int32),
        )

    got = _run(
        [
            _stack(scatter([[1, 2], [3, 4]], [2, 0]), [2]),
            R.TensorListLength(input_handle=scatter([[1, 2], [3, 4]], [5, 0])),
            _stack(scatter([[1, 2], [3, 4]], [1, 1]), [2]),
        ]
    )
    np.testing.assert_array_equal(got[0], [[3, 4], [0, 0], [1, 2]])
    assert got[1] == 6
    np.testing.assert_array_equal(got[2], [[0, 0], [3, 4]])
    for idx, es, message in [
        ([-1, 0], -1, "Indices in TensorListScatter must all be non-negative."),
        ([0], -1, "Invalid number of rows in input tensor. Expected: 1 Actual: 2"),
        ([0, 1], [3], "Specified a list with shape [3] from a tensor with shape [2]"),
    ]:
        h = scatter([[1, 2], [3, 4]], idx, es)
        _raises(R.TensorListLength(input_handle=h), errors.InvalidArgumentError, message)
    v2 = R.TensorListScatterV2(
        tensor=tf.constant([[1.0, 2.0]]),
        indices=[0],
        element_shape=tf.constant([3]),
        num_elements=2,
    )
    _raises(
        R.TensorListLength(input_handle=v2),
        errors.InvalidArgumentError,
        "Specified a list with shape [3] from a tensor with shape [2]",
    )


def test_tensor_list_concat_lists_and_push_back_batch_as_tf():
    joined = R.TensorListConcatLists(
        input_a=_lst([[1, 2]]), input_b=_lst([[3, 4], [5, 6]]), element_dtype=F32
    )
    batch = R.TensorListConcatLists(
        input_a=tf.stack([_lst([[1, 2]]), _lst([[1, 2]])]),
        input_b=tf.stack([_lst([[3, 4], [5, 6]]), _lst([[7, 8]])]),
        element_dtype=F32,
    )
    pushed = R.TensorListPushBackBatch(
        input_handles=tf.stack([_lst([[1, 2]]), _lst([[3, 4], [5, 6]])]),
        tensor=tf.constant([[9.0, 9.0], [8.0, 8.0]]),
    )
    full = R.EmptyTensorList(element_shape=tf.constant(-1), max_num_elements=0, element_dtype=F32)
    ignores_max = R.TensorListPushBackBatch(
        input_handles=tf.stack([full, full]), tensor=tf.constant([[9.0], [1.0]])
    )
    assert pushed.shape.as_list() == [2]
    got = _run(
        [
            _stack(joined, [2]),
            [R.TensorListLength(input_handle=x) for x in tf.unstack(batch, 2)],
            [_stack(x, [2]) for x in tf.unstack(pushed, 2)],
            [R.TensorListLength(input_handle=x) for x in tf.unstack(ignores_max, 2)],
        ]
    )
    np.testing.assert_array_equal(got[0], [[1, 2], [3, 4], [5, 6]])
    assert got[1] == [3, 2] and got[3] == [1, 1]
    np.testing.assert_array_equal(got[2][0], [[1, 2], [9, 9]])
    np.testing.assert_array_equal(got[2][1], [[3, 4], [5, 6], [8, 8]])


def test_tensor_list_batch_errors_as_tf():
    partial = R.TensorListConcatLists(
        input_a=_lst([[1, 2]], [-1]), input_b=_lst([[3, 4]], [2]), element_dtype=F32
    )
    _raises(
        R.TensorListLength(input_handle=partial),
        errors.InvalidArgumentError,
        "input_a and input_b TensorList element shapes are not identical at index 0.  "
        "Saw [?] vs. [2]",
    )
    bad = R.TensorListPushBackBatch(
        input_handles=tf.stack([_lst([[1, 2]], [2]), _lst([[1, 2]], [2])]),
        tensor=tf.constant([[9.0, 9.0, 9.0], [1.0, 1.0, 1.0]]),
    )
    _raises(
        R.TensorListLength(input_handle=tf.unstack(bad, 2)[0]),
        errors.InvalidArgumentError,
        "Tried to append a tensor with incompatible shape to a list at index 0. Op element "
        "shape: [3] list shape: [2]",
    )
    with pytest.raises(ValueError, match="Shape must be rank 1 but is rank 0"):
        R.TensorListPushBackBatch(input_handles=_lst([[1, 2]]), tensor=tf.constant([[9.0, 9.0]]))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 1 and 2"):
        R.TensorListPushBackBatch(
            input_handles=tf.stack([_lst([[1, 2]]), _lst([[3, 4]])]),
            tensor=tf.constant([[9.0, 9.0]]),
        )
    with pytest.raises(ValueError, match="Shapes must be equal rank, but are 0 and 1"):
        R.TensorListConcatLists(
            input_a=_lst([[1, 2]]), input_b=tf.stack([_lst([[3, 4]])]), element_dtype=F32
        )


def test_tensor_array_grad_with_shape_as_tf():
    def grad_of(prepend, value, es=(2,)):
        ta = R.TensorArrayV3(size=2, dtype=F32, element_shape=None if es is None else list(es))
        flow = R.TensorArrayWriteV3(
            handle=ta.handle, index=0, value=tf.constant([1.0, 2.0]), flow_in=ta.flow
        )
        g = R.TensorArrayGradWithShape(
            handle=ta.handle,
            flow_in=flow,
            shape_to_prepend=tf.constant(prepend, tf.int32),
            source="g",
        )
        gflow = R.TensorArrayWriteV3(
            handle=g.grad_handle, index=1, value=tf.constant(value, F32), flow_in=g.flow_out
        )
        return [
            R.TensorArraySizeV3(handle=g.grad_handle, flow_in=gflow),
            R.TensorArrayReadV3(handle=g.grad_handle, index=1, flow_in=gflow, dtype=F32),
        ]

    got = _run(
        [
            grad_of([3], [[1, 2]] * 3),
            grad_of([], [1, 2]),
            grad_of([1, 2], [[[1, 2]] * 2]),
            grad_of([3], [[1, 2, 3]] * 3, es=None),
        ]
    )
    assert [g[0] for g in got] == [2, 2, 2, 2]
    assert [g[1].shape for g in got] == [(3, 2), (2,), (1, 2, 2), (3, 3)]
    ta = R.TensorArrayV3(size=2, dtype=F32, element_shape=[2])
    g = R.TensorArrayGradWithShape(
        handle=ta.handle, flow_in=ta.flow, shape_to_prepend=tf.constant([3], tf.int32), source="g"
    )
    unset = R.TensorArrayGatherV3(
        handle=g.grad_handle, indices=[0, 1], flow_in=g.flow_out, dtype=F32
    )
    np.testing.assert_array_equal(_run(unset), np.zeros([2, 3, 2], np.float32))


# -- TensorMap ---------------------------------------------------------------------------


def _insert(m, k, v):
    return R.TensorMapInsert(input_handle=m, key=k, value=v)


def _lookup(m, k, dtype=F32):
    return R.TensorMapLookup(input_handle=m, key=k, value_dtype=dtype)


def test_tensor_map_ops_as_tf():
    empty = R.EmptyTensorMap()
    m = _insert(_insert(empty, tf.constant(1), tf.constant([1.0, 2.0])), tf.constant(2),
                tf.constant(5.0))  # fmt: skip
    over = _insert(_insert(empty, tf.constant(1), tf.constant(1.0)), tf.constant(1),
                   tf.constant(7.0))  # fmt: skip
    erased = R.TensorMapErase(input_handle=m, key=tf.constant(1), value_dtype=F32)
    vec = _insert(empty, tf.constant([1, 2]), tf.constant(1.0))
    mixed = _insert(_insert(empty, tf.constant(1), tf.constant(1.0)), tf.constant(1, tf.int64),
                    tf.constant(2.0))  # fmt: skip
    strs = _insert(_insert(empty, tf.constant("b"), tf.constant(1.0)), tf.constant("a"),
                   tf.constant(1.0))  # fmt: skip
    keys = R.TensorMapStackKeys(input_handle=m, key_dtype=tf.int32)
    assert empty.shape.as_list() == [] and R.TensorMapSize(input_handle=m).shape.as_list() == []
    assert _lookup(m, 1).shape.ndims is None and keys.shape.ndims is None
    got = _run(
        [
            R.TensorMapSize(input_handle=empty),
            R.TensorMapSize(input_handle=m),
            _lookup(m, tf.constant(2)),
            R.TensorMapHasKey(input_handle=m, key=tf.constant(2)),
            R.TensorMapHasKey(input_handle=m, key=tf.constant(3)),
            R.TensorMapSize(input_handle=over),
            _lookup(over, tf.constant(1)),
            R.TensorMapSize(input_handle=erased),
            R.TensorMapHasKey(input_handle=erased, key=tf.constant(1)),
            _lookup(vec, tf.constant([1, 2])),
            R.TensorMapHasKey(input_handle=mixed, key=tf.constant(1, tf.int64)),
            R.TensorMapSize(input_handle=mixed),
            keys,
            R.TensorMapStackKeys(input_handle=strs, key_dtype=tf.string),
        ]
    )
    assert got[:9] == [0, 2, 5.0, True, False, 1, 7.0, 1, False]
    assert got[9] == 1.0 and got[10] and got[11] == 2
    # (TF's key order is its hash map's, which changes from process to process)
    assert sorted(got[12].tolist()) == [1, 2] and got[12].dtype == np.int32
    assert sorted(got[13].tolist()) == [b"a", b"b"]


@pytest.mark.parametrize(
    "make, cls, message",
    [
        (lambda e: _lookup(_insert(e, tf.constant(1), tf.constant(1.0)), tf.constant(3)),
         errors.InvalidArgumentError,
         'Trying to lookup non-existent key. Could not find key "3".'),
        (lambda e: _lookup(e, tf.constant([[1, 2], [3, 4]])), errors.InvalidArgumentError,
         'Could not find key "[1 2][3 4]".'),
        (lambda e: _lookup(e, tf.constant(1.5)), errors.InvalidArgumentError,
         'Could not find key "1.5".'),
        (lambda e: R.TensorMapErase(input_handle=e, key=tf.constant([b"a", b"b"]),
                                    value_dtype=F32),
         errors.InvalidArgumentError,
         'Trying to erase non-existent item. Could not find key "a b".'),
        (lambda e: R.TensorMapStackKeys(input_handle=e, key_dtype=tf.int32),
         errors.InvalidArgumentError, "TensorMapStackKeys cannot be called on empty map."),
        (lambda e: R.TensorMapStackKeys(input_handle=_insert(e, tf.constant(3), tf.constant(1.0)),
                                        key_dtype=tf.int64),
         errors.InvalidArgumentError, "Key does not match requested dtype."),
        (lambda e: _lookup(_insert(e, tf.constant(1), tf.constant(1.0)), tf.constant(1), tf.int32),
         errors.InternalError,
         "Output 0 of type float does not match declared output type int32 for node "
         "{{node TensorMapLookup}}"),
    ],
)  # fmt: skip
def test_tensor_map_errors_as_tf(make, cls, message):
    out = make(R.EmptyTensorMap())
    fetch = R.TensorMapSize(input_handle=out) if out.dtype == tf.variant else out
    _raises(fetch, cls, message)


def test_tensor_map_gradients_as_tf():
    x, z = tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0])
    one, two = tf.constant(1), tf.constant(2)
    m = _insert(_insert(R.EmptyTensorMap(), one, x), two, z)
    y = _lookup(m, one)
    over = _lookup(_insert(_insert(R.EmptyTensorMap(), one, x), one, z), one)
    rest = _lookup(R.TensorMapErase(input_handle=m, key=one, value_dtype=F32), two)
    grads = [
        tf.gradients(tf.reduce_sum(y * y), [x, z]),
        tf.gradients(tf.reduce_sum(over * over), [x, z]),
        tf.gradients(tf.reduce_sum(rest * 3.0), [x, z]),
        tf.gradients(tf.reduce_sum(y * 2.0 + _lookup(m, one) ** 2), [x]),
    ]
    got = _run(grads)
    np.testing.assert_array_equal(got[0][0], [2, 4])
    np.testing.assert_array_equal(got[0][1], [0, 0])
    np.testing.assert_array_equal(got[1][0], [0, 0])
    np.testing.assert_array_equal(got[1][1], [6, 8])
    np.testing.assert_array_equal(got[2][0], [0, 0])
    np.testing.assert_array_equal(got[2][1], [3, 3])
    np.testing.assert_array_equal(got[3][0], [4, 6])


# -- stateful RNG ops on a resource variable -----------------------------------------------

_STATE = [5, 0, 42]  # Philox: counter 5, key 42


def _twice(make, state=_STATE):
    """Two draws from one state, then the state (what TF's kernels leave)."""
    v = tf.Variable(np.array(state, np.int64), use_resource=True)
    with tf.control_dependencies([v.initializer]):
        a = make(v.handle)
    with tf.control_dependencies([a]):
        b = make(v.handle)
    with tf.control_dependencies([b]):
        state = R.ReadVariableOp(resource=v.handle, dtype=tf.int64)
    return [a, b, state]


def _alg(n=1):
    return tf.constant(n, tf.int64)


def _shape(dims, dtype=tf.int64):
    return tf.constant(dims, dtype)


def test_stateful_random_ops_draw_tf_numbers():
    got = _run(
        [
            _twice(lambda h: R.StatefulUniform(resource=h, algorithm=_alg(), shape=_shape([3]))),
            _twice(lambda h: R.StatefulUniform(resource=h, algorithm=_alg(3), shape=_shape([3]))),
            _twice(lambda h: R.StatefulUniform(resource=h, algorithm=_alg(), shape=_shape([2, 2]),
                                               dtype=tf.float64)),
            _twice(lambda h: R.StatefulUniform(resource=h, algorithm=_alg(), shape=_shape([3]),
                                               dtype=tf.float16)),
            _twice(lambda h: R.StatefulTruncatedNormal(resource=h, algorithm=_alg(),
                                                       shape=_shape([3]), dtype=tf.float64)),
            _twice(lambda h: R.StatefulUniformFullInt(resource=h, algorithm=_alg(),
                                                      shape=_shape([3]))),
            _twice(lambda h: R.StatefulUniformFullInt(resource=h, algorithm=_alg(),
                                                      shape=_shape([3]), dtype=tf.int32)),
            _twice(lambda h: R.StatefulUniformInt(resource=h, algorithm=_alg(), shape=_shape([5]),
                                                  minval=tf.constant(-3, tf.int64),
                                                  maxval=tf.constant(10, tf.int64))),
            _twice(lambda h: R.StatefulUniformInt(resource=h, algorithm=_alg(),
                                                  shape=_shape([5], tf.int32),
                                                  minval=tf.constant(0), maxval=tf.constant(100))),
            _twice(lambda h: R.StatefulUniform(resource=h, algorithm=_alg(), shape=_shape([3])),
                   [-1, -1, 42]),
            _twice(lambda h: R.StatefulUniform(resource=h, algorithm=_alg(), shape=_shape([3])),
                   [5, 0, 42, 7]),
        ]
    )  # fmt: skip
    u = [[0.20190536975860596, 0.25554871559143066, 0.5133631229400635],
         [0.8904917240142822, 0.9745765924453735, 0.3584461212158203]]  # fmt: skip
    for g in got[:2]:
        np.testing.assert_array_equal(g[0], np.float32(u[0]))
        np.testing.assert_array_equal(g[1], np.float32(u[1]))
        assert g[2].tolist() == [1541, 0, 42]
    np.testing.assert_array_equal(
        got[2][0], [[0.6152432379416166, 0.10690502224611165], [0.5745360785841833,
                    0.7394363236477131]])  # fmt: skip
    np.testing.assert_array_equal(
        got[2][1], [[0.8187623625495966, 0.15233213658375733], [0.42653244803626555,
                    0.4276194904958368]])  # fmt: skip
    assert got[2][2].tolist() == [2053, 0, 42]
    np.testing.assert_array_equal(got[3][0], np.float16([0.0087890625, 0.455078125, 0.470703125]))
    np.testing.assert_array_equal(got[3][1], np.float16([0.908203125, 0.7314453125, 0.390625]))
    np.testing.assert_array_equal(
        got[4][0], [0.6133807536703909, 0.7715174735984164, 0.9903486243648361]
    )
    np.testing.assert_array_equal(
        got[4][1], [-1.5108574372394412, 1.3759808982517805, -0.5127816832403872]
    )
    assert got[5][0].tolist() == [5413526666999355401, 749062117918881250, 13708467064886866252]
    assert got[5][1].tolist() == [2340955832833932194, 10145070994858828176,
                                  17332486070533057385]  # fmt: skip
    assert got[5][0].dtype == np.uint64
    assert got[6][0].tolist() == [1352259593, 1260434898, 222410210]
    assert got[6][1].tolist() == [1391590306, 545046253, -1515331184]
    assert got[7][0].tolist() == [0, 0, 3, -2, 7] and got[7][1].tolist() == [4, 2, 8, 4, 1]
    assert got[7][2].tolist() == [2565, 0, 42]
    assert got[8][0].tolist() == [93, 98, 10, 15, 92] and got[8][0].dtype == np.int32
    assert got[8][1].tolist() == [59, 61, 61, 25, 61]
    np.testing.assert_array_equal(
        got[9][0], np.float32([0.23551714420318604, 0.6732966899871826, 0.3543747663497925])
    )
    assert got[9][2].tolist() == [1535, 0, 42]  # (the counter's high word carries)
    assert got[10][2].tolist() == [1541, 0, 42, 7]


def test_stateful_standard_normal_v2_draws_tf_numbers():
    # (its first draw in a process waits for the host's Box-Muller loops to compile)
    got = _run(
        _twice(
            lambda h: R.StatefulStandardNormalV2(resource=h, algorithm=_alg(), shape=_shape([3]))
        )
    )
    np.testing.assert_array_equal(
        got[0], np.float32([1.7877428531646729, -0.06235247850418091, -1.1173290014266968])
    )
    np.testing.assert_array_equal(
        got[1], np.float32([-0.07660796493291855, 0.4754936099052429, -0.7080456614494324])
    )
    assert got[2].tolist() == [1541, 0, 42]


@pytest.mark.parametrize(
    "alg, state, cls, message",
    [
        (2, _STATE, errors.UnimplementedError,
         "Non-XLA devices don't support the ThreeFry algorithm."),
        (9, _STATE, errors.InvalidArgumentError, "Unsupported algorithm id: 9"),
        (1, [1, 2], errors.InvalidArgumentError,
         "For the Philox algorithm, the size of state must be at least 3; got 2"),
    ],
)  # fmt: skip
def test_stateful_random_errors_as_tf(alg, state, cls, message):
    fetch = _twice(
        lambda h: R.StatefulUniform(resource=h, algorithm=_alg(alg), shape=_shape([3])), state
    )
    _raises(fetch, cls, message)
    skip = _twice(lambda h: R.RngReadAndSkip(resource=h, alg=alg, delta=tf.constant(3, tf.uint64)),
                  state)  # fmt: skip
    _raises(skip, cls, message)


def test_stateful_random_range_shape_and_uninitialized_errors_as_tf():
    bad = _twice(lambda h: R.StatefulUniformInt(resource=h, algorithm=_alg(), shape=_shape([0]),
                                                minval=tf.constant(3, tf.int64),
                                                maxval=tf.constant(3, tf.int64)))  # fmt: skip
    _raises(bad, errors.InvalidArgumentError, "Need minval < maxval, got 3 >= 3")
    neg = _twice(lambda h: R.StatefulUniform(resource=h, algorithm=_alg(), shape=_shape([-1])))
    _raises(neg, errors.InvalidArgumentError, "Dimension -1 must be >= 0")
    v = tf.Variable(np.array(_STATE, np.int64), use_resource=True)
    out = R.StatefulUniform(resource=v.handle, algorithm=_alg(), shape=_shape([3, 2]))
    assert out.shape.as_list() == [3, 2] and out.dtype == tf.float32
    with tf.Session() as sess, pytest.raises(errors.NotFoundError):
        sess.run(out)


def test_rng_skip_wraps_delta_as_tf():
    read = _twice(lambda h: R.RngReadAndSkip(resource=h, alg=1, delta=tf.constant(3, tf.uint64)))
    got = _run(read)
    assert got[0].tolist() == [5, 0, 42] and got[2].tolist() == [1541, 0, 42]
    for delta, want in ((2, [517, 0, 42]), (-1, [-251, 0, 42])):
        v = tf.Variable(np.array(_STATE, np.int64), use_resource=True)
        with tf.control_dependencies([v.initializer]):
            skip = R.RngSkip(
                resource=v.handle, algorithm=_alg(), delta=tf.constant(delta, tf.int64)
            )
        with tf.control_dependencies([skip]):
            state = R.ReadVariableOp(resource=v.handle, dtype=tf.int64)
        assert _run(state).tolist() == want  # (delta * 256 wraps to 64 bits first)


def test_stateless_random_get_alg_and_v1_standard_normal_as_tf():
    assert _run(R.StatelessRandomGetAlg()) == 1
    v = tf.Variable(np.array([1, 5, 0, 42], np.int64), use_resource=True)
    with pytest.raises(NotImplementedError) as info:
        R.StatefulStandardNormal(resource=v.handle, shape=_shape([3]))
    assert str(info.value) == (
        "Op StatefulStandardNormal is not available in GraphDef version 2474. It has been "
        "removed in version 29. Use StatefulStandardNormalV2 instead."
    )


def test_stateful_standard_normal_v1_from_an_old_graph_def_as_tf():
    # A TF 2.21 graph (state variable "state", node "normal") written with producer 27,
    # which still has the V1 op: its state is [algorithm, counter_lo, counter_hi, key].
    fixture = pathlib.Path(__file__).parent / "fixtures/raw_ops_s27/stateful_standard_normal_v1.pb"
    gd = tf.GraphDef.FromString(fixture.read_bytes())
    results = {}
    for state in ([1, 5, 0, 42], [3, 7, 1, 42], [2, 5, 0, 42]):
        with tf.Graph().as_default() as g:
            tf.import_graph_def(gd, name="")
            h = g.get_tensor_by_name("state:0")
            with tf.Session() as sess:
                sess.run(R.AssignVariableOp(resource=h, value=tf.constant(state, tf.int64)))
                try:
                    draws = [sess.run("normal:0"), sess.run("normal:0")]
                except errors.UnimplementedError as e:
                    results[state[0]] = e.message
                    continue
                after = sess.run(R.ReadVariableOp(resource=h, dtype=tf.int64))
                results[state[0]] = (draws, after.tolist())
    draws, after = results[1]
    np.testing.assert_array_equal(
        draws[0], np.float32([1.7877428531646729, -0.06235247850418091, -1.1173290014266968])
    )
    assert after == [1, 1541, 0, 42]
    draws, after = results[3]
    np.testing.assert_array_equal(
        draws[1], np.float32([0.5313908457756042, 0.9557755589485168, 0.4375781714916229])
    )
    assert after == [3, 1543, 1, 42]
    assert results[2].startswith("Non-XLA devices don't support the ThreeFry algorithm.")


# -- sparse-tensor maps and TF1 batching of SparseTensors ----------------------------------

I64 = tf.int64


def _add(ind, val, shape, **kw):
    return R.AddSparseToTensorsMap(sparse_indices=tf.constant(ind, I64),
                                   sparse_values=tf.constant(val),
                                   sparse_shape=tf.constant(shape, I64), **kw)  # fmt: skip


def _add_many(ind, val, shape, **kw):
    return R.AddManySparseToTensorsMap(sparse_indices=tf.constant(ind, I64),
                                       sparse_values=tf.constant(val),
                                       sparse_shape=tf.constant(shape, I64), **kw)  # fmt: skip


def _take(handles, dtype=F32, **kw):
    return R.TakeManySparseFromTensorsMap(sparse_handles=handles, dtype=dtype, **kw)


def test_sparse_tensors_map_ops_as_tf():
    a = _add([[0], [2]], [1.0, 2.0], [3], shared_name="m")
    with tf.control_dependencies([a]):
        b = _add([[1]], [5.0], [4], shared_name="m")
    basic = _take(tf.stack([b, a]), shared_name="m")
    many = _add_many([[0, 1], [0, 3], [2, 0]], [1, 2, 3], [3, 4], shared_name="n")
    rows = _take(many, tf.int32, shared_name="n")
    by_name = _add([[2], [0]], [1.0, 2.0], [3])
    unsorted = _take(tf.stack([by_name]), shared_name=by_name.op.name)
    assert a.shape.as_list() == [] and many.shape.as_list() == [None]
    assert [t.shape.as_list() for t in basic] == [[None, None], [None], [None]]
    got = _run([a, b, basic, many, rows, unsorted])
    assert (got[0], got[1]) == (0, 1) and got[0].dtype == np.int64
    assert got[2].sparse_indices.tolist() == [[0, 1], [1, 0], [1, 2]]
    assert got[2].sparse_values.tolist() == [5.0, 1.0, 2.0]
    assert got[2].sparse_shape.tolist() == [2, 4]
    assert got[3].tolist() == [0, 2, 1]  # (rows with values first, then the empty ones)
    assert got[4].sparse_indices.tolist() == [[0, 1], [0, 3], [2, 0]]
    assert got[4].sparse_values.tolist() == [1, 2, 3] and got[4].sparse_shape.tolist() == [3, 4]
    assert got[5].sparse_indices.tolist() == [[0, 2], [0, 0]]  # (kept in stored order)
    assert got[5].sparse_shape.tolist() == [1, 3]
    m1 = _add_many([[0, 1], [0, 3], [2, 0]], [1, 2, 3], [3, 4], shared_name="k")
    m2 = _add_many([[0, 0]], [9], [1, 7], shared_name="k")
    with tf.control_dependencies([m1]):
        m2 = tf.identity(m2)
    joined = _run(_take(tf.concat([m2, m1], 0), tf.int32, shared_name="k"))
    assert joined.sparse_indices.tolist() == [[0, 0], [1, 1], [1, 3], [3, 0]]
    assert joined.sparse_values.tolist() == [9, 1, 2, 3]
    assert joined.sparse_shape.tolist() == [4, 7]


def test_sparse_tensors_map_errors_as_tf():
    a = _add([[0], [2]], [1.0, 2.0], [3], shared_name="m")
    twice = _take(tf.stack([a, a]), shared_name="m")
    _raises(twice, errors.InvalidArgumentError, "Unable to find SparseTensor: 0 in map: m")
    cases = [
        (lambda: _take(tf.constant([0], I64), shared_name="zz"),
         "Unable to find SparseTensor: 0 in map: zz"),
        (lambda: _take(tf.stack([_add([[0]], [1.0], [3], shared_name="m"),
                                 _add([[0, 0]], [1.0], [2, 2], shared_name="m")]),
                       shared_name="m"),
         "Inconsistent rank across SparseTensors: rank prior to SparseTensor[1] was: 2 but "
         "rank of SparseTensor[1] is: 3"),
        (lambda: _take(tf.stack([_add([[0]], [1.0], [3], shared_name="m")]), tf.int32,
                       shared_name="m"),
         "Requested SparseTensor of type int32 but SparseTensor[0].values.dtype() == float"),
        (lambda: _take(tf.stack([_add([[0]], [1.0], [3], container="c", shared_name="m")]),
                       shared_name="m"),
         "Unable to find SparseTensor: 0 in map: m"),
        (lambda: _add_many([[0]], [1.0], [3]),
         "Rank of input SparseTensor should be > 1, but saw rank: 1"),
        (lambda: _add_many([[2, 0], [0, 1]], [1.0, 2.0], [3, 4]),
         "indices[1] = [0,1] is out of order. Many sparse ops require sorted indices."),
        (lambda: _add_many([[0, 1], [0, 1]], [1.0, 2.0], [3, 4]),
         "indices[1] = [0,1] is repeated"),
        (lambda: _add_many([[0, 1], [5, 1]], [1.0, 2.0], [3, 4]),
         "indices[1] = [5,1] is out of bounds: need 0 <= index < [3,4]"),
        (lambda: _add([[0], [2]], [1.0], [3]),
         "indices and values rows (indexing dimension) must match. (indices = 2, values = 1)"),
    ]  # fmt: skip
    for make, message in cases:
        _raises(make(), errors.InvalidArgumentError, message)
    with pytest.raises(ValueError, match="Shape must be rank 1 but is rank 2"):
        _take(tf.constant([[0]], I64), shared_name="m")
    with pytest.raises(ValueError, match="Shape must be rank 2 but is rank 1"):
        _add([0, 2], [1.0, 2.0], [3])


def _sparse_value(r):
    return r.indices.tolist(), r.values.tolist(), r.dense_shape.tolist()


def test_train_batch_carries_sparse_tensors_as_tf():
    ind = tf.placeholder(I64, [None, 2])
    val = tf.placeholder(F32, [None])
    shp = tf.placeholder(I64, [2])
    dense = tf.placeholder(tf.int32, [3])
    out = tf.train.batch([tf.SparseTensor(ind, val, shp), dense], batch_size=2)
    assert isinstance(out[0], tf.SparseTensor)
    assert [out[0].indices.shape.as_list(), out[0].dense_shape.shape.as_list()] == [
        [None, 3],
        [3],
    ]
    assert [t.name for t in (out[0].indices, out[0].values, out[0].dense_shape, out[1])] == [
        "batch/control_dependency:0",
        "batch/control_dependency_1:0",
        "batch/control_dependency_2:0",
        "batch/control_dependency_3:0",
    ]
    types = {op.type for op in tf.get_default_graph().get_operations()}
    assert {"AddSparseToTensorsMap", "TakeManySparseFromTensorsMap", "Squeeze"} <= types
    enqueue = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)[0].enqueue_ops[0]
    with tf.Session() as sess:
        sess.run(enqueue, {ind: [[0, 1], [1, 0]], val: [1.0, 2.0], shp: [2, 3], dense: [1, 2, 3]})
        sess.run(enqueue, {ind: [[0, 4]], val: [5.0], shp: [1, 5], dense: [4, 5, 6]})
        sp, d = sess.run(out)
    assert _sparse_value(sp) == ([[0, 0, 1], [0, 1, 0], [1, 0, 4]], [1.0, 2.0, 5.0], [2, 2, 5])
    assert d.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_train_batch_sparse_keep_input_join_and_kinds_as_tf():
    keep = tf.placeholder(tf.bool, [])
    sp = tf.SparseTensor(tf.constant([[0]], I64), tf.constant([7.0]), tf.constant([2], I64))
    maybe = tf.train.maybe_batch([sp, tf.constant(1)], keep, batch_size=1)
    enqueue = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)[0].enqueue_ops[0]
    with tf.Session() as sess:
        sess.run(enqueue, {keep: False})
        sess.run(enqueue, {keep: True})
        got = sess.run(maybe)
    assert _sparse_value(got[0]) == ([[0, 0]], [7.0], [1, 2]) and got[1].tolist() == [1]
    with tf.Graph().as_default():
        rows = tf.SparseTensor(tf.constant([[0, 0], [1, 1], [2, 0]], I64),
                               tf.constant([1.0, 2.0, 3.0]), tf.constant([3, 2], I64))  # fmt: skip
        vec = tf.train.maybe_batch([rows, tf.constant([10, 20, 30])],
                                   tf.constant([True, False, True]), batch_size=2,
                                   enqueue_many=True)  # fmt: skip
        with tf.Session() as sess:
            sess.run(tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)[0].enqueue_ops[0])
            got = sess.run(vec)
        assert _sparse_value(got[0]) == ([[0, 0], [1, 0]], [1.0, 3.0], [2, 2])
        assert got[1].tolist() == [10, 30]
    with tf.Graph().as_default() as g:
        a = tf.SparseTensor(tf.constant([[0]], I64), tf.constant([1.0]), tf.constant([2], I64))
        b = tf.SparseTensor(tf.constant([[1]], I64), tf.constant([2.0]), tf.constant([3], I64))
        joined = tf.train.batch_join([[a], [b]], batch_size=2)
        adds = [op for op in g.get_operations() if op.type == "AddSparseToTensorsMap"]
        assert [op.get_attr("shared_name") for op in adds] in (
            ["", "batch_join/AddSparseToTensorsMap"],
            [b"", b"batch_join/AddSparseToTensorsMap"],
        )
        enqueues = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)[0].enqueue_ops
        with tf.Session() as sess:
            sess.run(enqueues[0])
            sess.run(enqueues[1])
            assert _sparse_value(sess.run(joined)) == ([[0, 0], [1, 1]], [1.0, 2.0], [2, 3])
        with pytest.raises(ValueError, match="Inconsistent SparseTensors list"):
            tf.train.batch_join([[a], [tf.constant([1.0])]], batch_size=2)
        assert isinstance(tf.train.batch([a], batch_size=2), tf.SparseTensor)
        d = tf.train.batch({"a": a, "b": tf.constant(1)}, batch_size=2)
        assert isinstance(d["a"], tf.SparseTensor)


def test_tf_written_batch_of_sparse_tensors_imports_and_runs():
    # Written by TF 2.21: tf.train.batch([SparseTensor(ind, val, shp), dense], 2) over
    # placeholders ind, val, shp, dense; values recorded from TF running it.
    fixture = pathlib.Path(__file__).parent / "fixtures/raw_ops_s27/batch_sparse.pb"
    tf.import_graph_def(tf.GraphDef.FromString(fixture.read_bytes()), name="")
    g = tf.get_default_graph()
    feeds = [
        {"ind:0": [[0, 1], [1, 0]], "val:0": [1.0, 2.0], "shp:0": [2, 3], "dense:0": [1, 2, 3]},
        {"ind:0": [[0, 4]], "val:0": [5.0], "shp:0": [1, 5], "dense:0": [4, 5, 6]},
    ]
    outs = [f"batch/control_dependency{s}:0" for s in ("", "_1", "_2", "_3")]
    with tf.Session() as sess:
        for feed in feeds:
            sess.run(
                "batch/fifo_queue_enqueue", {g.get_tensor_by_name(k): v for k, v in feed.items()}
            )
        got = [x.tolist() for x in sess.run(outs)]
        assert got == [[[0, 0, 1], [0, 1, 0], [1, 0, 4]], [1.0, 2.0, 5.0], [2, 2, 5],
                       [[1, 2, 3], [4, 5, 6]]]  # fmt: skip
        with pytest.raises(errors.InvalidArgumentError) as info:
            sess.run("batch/TakeManySparseFromTensorsMap",
                     {g.get_tensor_by_name("batch/Squeeze:0"): [2, 9]})  # fmt: skip
    assert "Unable to find SparseTensor: 2 in map: batch/AddSparseToTensorsMap" in str(info.value)


# -- TF1 ref control flow (RefEnter, RefSwitch, RefMerge in a TF-written GraphDef) ----------


def test_tf_written_ref_variable_loop_and_cond_import_and_run():
    # Written by TF 2.21: ref variables v (1.0) and w ([1, 2]); a while_loop "loop" that
    # adds 1 to v and sums v's ref three times (RefEnter), and a cond "cnd" on placeholder
    # p assigning w or adding 1 to it (RefSwitch, RefMerge).  Values recorded from TF.
    fixture = pathlib.Path(__file__).parent / "fixtures/raw_ops_s27/ref_control_flow.pb"
    gd = tf.GraphDef.FromString(fixture.read_bytes())
    assert {"RefEnter", "RefSwitch", "RefMerge"} <= {n.op for n in gd.node}
    tf.import_graph_def(gd, name="")
    with tf.Session() as sess:
        sess.run("init")
        loop = sess.run(["loop/Exit:0", "loop/Exit_1:0", "v:0"])
        assigned = sess.run(["cnd/Merge:0", "w:0"], {"p:0": True})
        added = sess.run(["cnd/Merge:0", "w:0"], {"p:0": False})
    assert [x.tolist() for x in loop] == [3, 9.0, 4.0]
    assert [x.tolist() for x in assigned] == [[5.0, 6.0], [5.0, 6.0]]
    assert [x.tolist() for x in added] == [[6.0, 7.0], [6.0, 7.0]]
    exported = {n.op for n in tf.get_default_graph().as_graph_def().node}
    assert {"RefEnter", "RefSwitch"} <= exported


# -- KmeansPlusPlusInitialization, Abort, DeviceIndex, SyncDevice, FakeParam ----------------

_KPP_RS = np.random.RandomState(0)  # (legacy RandomState: the same points on every numpy)
_KPP_POINTS = _KPP_RS.randn(40, 3).astype(np.float32)
_KPP_CLUSTERS = np.concatenate(
    [_KPP_RS.randn(10, 2) + [5, 5], _KPP_RS.randn(10, 2) - [5, 5], _KPP_RS.randn(10, 2)]
).astype(np.float32)
# (seed, num_retries_per_sample, num_to_sample, the rows TF picked): 5 from the 40 points,
# 3 from the three clusters (in that order, per seed and retries), and all 40 once.
_KPP_PICKS = [
    (0, -1, 5, [29, 5, 20, 3, 7]),
    (0, -1, 3, [28, 2, 16]),
    (0, 0, 5, [29, 28, 0, 30, 12]),
    (0, 0, 3, [9, 18, 1]),
    (
        0,
        0,
        40,
        [
            29,
            28,
            0,
            30,
            12,
            10,
            39,
            36,
            19,
            6,
            8,
            7,
            21,
            23,
            20,
            17,
            4,
            14,
            24,
            32,
            5,
            3,
            38,
            16,
            22,
            35,
            33,
            11,
            34,
            27,
            26,
            13,
            1,
            37,
            31,
            18,
            9,
            25,
            2,
            15,
        ],
    ),
    (0, 3, 5, [29, 5, 20, 3, 7]),
    (0, 3, 3, [28, 2, 16]),
    (1, -1, 5, [7, 37, 21, 39, 6]),
    (1, -1, 3, [28, 1, 17]),
    (1, 0, 5, [8, 34, 4, 1, 24]),
    (1, 0, 3, [28, 17, 1]),
    (1, 3, 5, [7, 37, 21, 39, 6]),
    (1, 3, 3, [28, 1, 17]),
    (7, -1, 5, [3, 18, 24, 20, 12]),
    (7, -1, 3, [7, 11, 27]),
    (7, 0, 5, [37, 17, 34, 11, 5]),
    (7, 0, 3, [7, 16, 28]),
    (7, 3, 5, [3, 18, 24, 20, 12]),
    (7, 3, 3, [7, 11, 27]),
    (12345, -1, 5, [17, 3, 30, 22, 1]),
    (12345, -1, 3, [29, 6, 16]),
    (12345, 0, 5, [9, 20, 8, 14, 35]),
    (12345, 0, 3, [29, 10, 3]),
    (12345, 3, 5, [17, 3, 30, 22, 1]),
    (12345, 3, 3, [29, 6, 16]),
    (-3, -1, 5, [17, 3, 30, 28, 0]),
    (-3, -1, 3, [27, 2, 17]),
    (-3, 0, 5, [15, 14, 35, 24, 32]),
    (-3, 0, 3, [25, 10, 12]),
    (-3, 3, 5, [17, 3, 30, 28, 0]),
    (-3, 3, 3, [27, 2, 17]),
]


def test_kmeans_plus_plus_initialization_picks_tf_rows():
    cases, fetches = [], []
    for seed, retries, n, picks in _KPP_PICKS:
        points = _KPP_POINTS if n != 3 else _KPP_CLUSTERS
        cases.append((points, picks))
        fetches.append(
            R.KmeansPlusPlusInitialization(
                points=tf.constant(points),
                num_to_sample=tf.constant(n, I64),
                seed=tf.constant(seed, I64),
                num_retries_per_sample=tf.constant(retries, I64),
            )
        )
    assert fetches[0].shape.ndims is None  # (TF's shape function: unknown)
    for (points, picks), got in zip(cases, _run(fetches)):
        np.testing.assert_array_equal(got, points[picks])


@pytest.mark.parametrize(
    "points, n, message",
    [
        (_KPP_POINTS[:3], 5, "Expected num_to_sample <= points.rows(). 5 vs 3."),
        (_KPP_POINTS[:3], 0, "Expected num_to_sample > 0."),
        (np.zeros([0, 2], np.float32), 1, "Expected points.rows() > 0."),
    ],
)
def test_kmeans_plus_plus_errors_as_tf(points, n, message):
    out = R.KmeansPlusPlusInitialization(
        points=tf.constant(points),
        num_to_sample=tf.constant(n, I64),
        seed=tf.constant(1, I64),
        num_retries_per_sample=tf.constant(0, I64),
    )
    _raises(out, errors.InvalidArgumentError, message)
    same = R.KmeansPlusPlusInitialization(
        points=tf.ones([4, 2]),
        num_to_sample=tf.constant(3, I64),
        seed=tf.constant(1, I64),
        num_retries_per_sample=tf.constant(0, I64),
    )
    np.testing.assert_array_equal(_run(same), np.ones([3, 2]))


def test_device_index_sync_device_and_fake_param_as_tf():
    got = _run(
        [
            R.DeviceIndex(device_names=["CPU", "GPU"]),
            R.DeviceIndex(device_names=["GPU", "TPU"]),
            R.DeviceIndex(device_names=[]),
            R.FakeParam(dtype=F32, shape=[2, 3]),
        ]
    )
    assert got[:3] == [0, 2, 0] and got[3].shape == (2, 3) and got[3].dtype == np.float32
    assert R.FakeParam(dtype=F32, shape=[2, None]).shape.as_list() == [2, None]
    assert isinstance(R.SyncDevice(), tf.Operation) and _run(R.SyncDevice()) is None


def test_abort_ends_the_process_as_tf(monkeypatch, capfd):
    from asyncflow.ops import runtime_misc_ops

    calls = []

    def end(*status):
        calls.append(status)
        raise RuntimeError("the process would end here")

    monkeypatch.setattr(runtime_misc_ops.os, "abort", end)
    monkeypatch.setattr(runtime_misc_ops.os, "_exit", end)
    with tf.Session() as sess:
        with pytest.raises(errors.UnknownError):
            sess.run(R.Abort(error_msg="boom"))
        assert calls == [()]  # (os.abort: SIGABRT, as TF's LOG(FATAL))
        assert "Abort_op intentional failure; boom" in capfd.readouterr().err
        with pytest.raises(errors.UnknownError):
            sess.run(R.Abort(exit_without_error=True))
        assert calls == [(), (0,)]


def test_no_gradient_where_tf_has_none():
    x = tf.constant([1.0, 2.0])
    m = _insert(R.EmptyTensorMap(), tf.constant(1), x)
    sp_handle = R.AddSparseToTensorsMap(
        sparse_indices=tf.constant([[0], [1]], I64),
        sparse_values=x,
        sparse_shape=tf.constant([2], I64),
    )
    kpp = R.KmeansPlusPlusInitialization(
        points=tf.reshape(x, [2, 1]),
        num_to_sample=tf.constant(1, I64),
        seed=tf.constant(1, I64),
        num_retries_per_sample=tf.constant(0, I64),
    )
    # (as TF's: integer outputs end the gradient path before the missing gradient matters)
    assert tf.gradients(tf.cast(R.TensorMapSize(input_handle=m), F32), x) == [None]
    assert tf.gradients(tf.cast(sp_handle, F32), x) == [None]
    with pytest.raises(LookupError, match="KmeansPlusPlusInitialization"):
        tf.gradients(kpp, x)


# -- GenerateVocabRemapping, LoadAndRemapMatrix, warm starting with VocabInfo ----------------


@pytest.fixture()
def vocab_ckpt(tmp_path):
    """A checkpoint of emb (arange(12) as [4, 3]), out (arange(8) as [2, 4]) and bias,
    with vocabularies old "a b c d" and new "c x a d" (what the TF 2.21 runs read)."""
    (tmp_path / "old.txt").write_text("a\nb\nc\nd\n")
    (tmp_path / "new.txt").write_text("c\nx\na\nd\ne\n")
    (tmp_path / "dup.txt").write_text("a\nb\na\n")
    with tf.Graph().as_default():
        tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3), name="emb")
        tf.Variable(np.arange(8, dtype=np.float32).reshape(2, 4), name="out")
        tf.Variable(np.arange(4, dtype=np.float32), name="bias")
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            prefix = tf.train.Saver().save(sess, str(tmp_path / "model"))
    return tmp_path, prefix


def _remapping(d, off, num, old_size=-1, new="new.txt", old="old.txt"):
    return list(R.GenerateVocabRemapping(new_vocab_file=str(d / new), old_vocab_file=str(d / old),
                                         new_vocab_offset=off, num_new_vocab=num,
                                         old_vocab_size=old_size))  # fmt: skip


def test_generate_vocab_remapping_as_tf(vocab_ckpt):
    d, _ = vocab_ckpt
    got = _run([_remapping(d, 0, 5), _remapping(d, 1, 3), _remapping(d, 0, 5, 2)])
    assert [(r.tolist(), int(n)) for r, n in got] == [
        ([2, -1, 0, 3, -1], 3),
        ([-1, 0, 3], 2),
        ([-1, -1, 0, -1, -1], 1),
    ]
    assert _remapping(d, 1, 3)[0].shape.as_list() == [3]
    for args, cls, message in [
        ((2, 5), errors.InvalidArgumentError,
         "lookup table size must be larger than last new vocab entry's line"),
        ((0, 2, 10), errors.InvalidArgumentError,
         f"Invalid vocab_size in {d / 'old.txt'}: expected 10 but got 4"),
        ((0, 2, -1, "nope.txt"), errors.NotFoundError, "nope.txt; No such file or directory"),
        ((0, 2, -1, "new.txt", "dup.txt"), errors.FailedPreconditionError,
         "HashTable has different value for same key. Key a has 0 and trying to add value 2"),
    ]:  # fmt: skip
        _raises(_remapping(d, *args)[0], cls, message)


def _remap(prefix, rows, cols, init, nr, nc, name="emb", max_rows=-1):
    return R.LoadAndRemapMatrix(ckpt_path=prefix, old_tensor_name=name,
                                row_remapping=tf.constant(rows, I64),
                                col_remapping=tf.constant(cols, I64),
                                initializing_values=tf.constant(init, F32), num_rows=nr,
                                num_cols=nc, max_rows_in_memory=max_rows)  # fmt: skip


def test_load_and_remap_matrix_as_tf(vocab_ckpt):
    _, prefix = vocab_ckpt
    out = _remap(prefix, [2, -1, 0], [], [100.0, 101.0, 102.0], 3, 3)
    assert out.shape.as_list() == [3, 3]
    got = _run(
        [
            out,
            _remap(prefix, [2, -1, 0], [1, -1], [100.0, 101.0, 102.0, 103.0], 3, 2),
            _remap(prefix, [3, 1, -1, 0], [2, 0], [7.0, 8.0], 4, 2, max_rows=2),
        ]
    )
    assert got[0].tolist() == [[6, 7, 8], [100, 101, 102], [0, 1, 2]]
    assert got[1].tolist() == [[7, 100], [101, 102], [1, 103]]
    assert got[2].tolist() == [[11, 9], [5, 3], [7, 8], [2, 0]]
    for args, cls, message in [
        (([2, -1, 0], [], [100.0], 3, 3), errors.InvalidArgumentError,
         "initializing_values contained 1 elements, but more missing values remain."),
        (([2, 0], [], [100.0, 5.0], 2, 3), errors.InvalidArgumentError,
         "initializing_values contained 2 elements, but only 0 elements were used to fill in "
         "missing values."),
        (([0], [], [], 1, 2), errors.InvalidArgumentError,
         "Tensor emb has shape [4,3], where the size of its 2nd dimension is 3 instead of "
         "being equal to num_cols=2"),
        (([0, 1], [], [], 3, 3), errors.InvalidArgumentError,
         "Size of row_remapping is 2 instead of being equal to num_rows=3"),
        (([7], [], [], 1, 3), errors.InternalError,
         "Extent in dimension 0 out of bounds: shape = [4,3], slice = 7,1:-"),
        (([0], [], [], 1, 3, "zz"), errors.NotFoundError, "Key zz not found in checkpoint"),
        (([1, 1], [], [], 2, 3), errors.UnimplementedError,
         "Old ID 1 is mapped to both new ID 0 and 1, which is not supported."),
    ]:  # fmt: skip
        _raises(_remap(prefix, *args), cls, message)


def _warm_started(make):
    with tf.Graph().as_default() as g:
        var = make()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            value = sess.run(var).tolist()
        return value, {op.type for op in g.get_operations()}


def test_warm_start_with_vocab_info_runs_tf_remapping_ops(vocab_ckpt):
    d, prefix = vocab_ckpt
    (d / "new4.txt").write_text("c\nx\na\nd\n")

    def info(**kw):
        return tf.train.VocabInfo(str(d / "new4.txt"), 4, kw.pop("oov", 1), str(d / "old.txt"),
                                  **kw)  # fmt: skip

    def rows():
        e = tf.get_variable("emb", [5, 3], initializer=tf.ones_initializer())
        tf.train.warm_start(prefix, [e], var_name_to_vocab_info={"emb": info()})
        return e

    def cols():
        o = tf.get_variable("out", [2, 5], initializer=tf.ones_initializer())
        tf.train.warm_start(prefix, [o], var_name_to_vocab_info={"out": info(axis=1)})
        return o

    def old_size():
        e = tf.get_variable("emb", [4, 3], initializer=tf.ones_initializer())
        vocab = {"emb": info(oov=0, old_vocab_size=2)}
        tf.train.warm_start(prefix, [e], var_name_to_vocab_info=vocab)
        return e

    def renamed():  # (through the estimator's WarmStartSettings, as TF's estimators)
        e = tf.get_variable("new_emb", [4, 3], initializer=tf.ones_initializer())
        settings = tf.estimator.WarmStartSettings(
            prefix, ".*", var_name_to_vocab_info={"new_emb": info(oov=0)},
            var_name_to_prev_var_name={"new_emb": "emb"},
        )  # fmt: skip
        warm_starting.warm_start(settings)
        return e

    value, types = _warm_started(rows)
    assert value == [[6, 7, 8], [0, 0, 0], [0, 1, 2], [9, 10, 11], [0, 0, 0]]
    assert {"GenerateVocabRemapping", "LoadAndRemapMatrix", "ConcatV2"} <= types
    assert _warm_started(cols)[0] == [[2, 0, 0, 3, 0], [6, 0, 4, 7, 0]]
    assert _warm_started(old_size)[0] == [[0, 0, 0], [0, 0, 0], [0, 1, 2], [0, 0, 0]]
    value, types = _warm_started(renamed)
    assert value == [[6, 7, 8], [0, 0, 0], [0, 1, 2], [9, 10, 11]]
    assert "LoadAndRemapMatrix" in types
    with tf.Graph().as_default():
        e = tf.get_variable("emb", [6, 3])
        with pytest.raises(ValueError) as excinfo:
            tf.train.warm_start(prefix, [e], var_name_to_vocab_info={"emb": info()})
    assert str(excinfo.value) == (
        "Trying to initialize 6 additional rows after 0 rows have already been initialized, "
        "which would exceed expected total row count of new_row_vocab_size (4) + "
        "num_row_oov_buckets (1) = 5."
    )
    with tf.Graph().as_default():  # (TF's, too, reads a second dimension a vector lacks)
        b = tf.get_variable("bias", [4])
        with pytest.raises(IndexError):
            tf.train.warm_start(prefix, [b], var_name_to_vocab_info={"bias": info(oov=0)})


# -- SymbolicGradient (a TF-written GraphDef) -------------------------------------------------


def test_tf_written_symbolic_gradient_imports_and_runs():
    # Written by TF 2.21: Defun F(x, y) = (x*x*y + sin(y), x + y) and G(a, b) =
    # reduce_sum(2a); "grad" = SymbolicGradient(x, y, dz, dw; F), "grad2" =
    # SymbolicGradient(x, y, 3.0; G), x, y, dz, dw placeholders.  Values recorded from TF.
    fixture = pathlib.Path(__file__).parent / "fixtures/raw_ops_s27/symbolic_gradient.pb"
    gd = tf.GraphDef.FromString(fixture.read_bytes())
    assert "SymbolicGradient" in {n.op for n in gd.node}
    tf.import_graph_def(gd, name="")
    feed = {"x:0": [1.0, 2.0], "y:0": [3.0, 0.5], "dz:0": [1.0, 1.0], "dw:0": [0.0, 2.0]}
    with tf.Session() as sess:
        got = sess.run(["grad:0", "grad:1", "grad2:0", "grad2:1"], feed)
    np.testing.assert_array_equal(got[0], [6.0, 4.0])
    np.testing.assert_array_equal(got[1], np.float32([0.010007500648498535, 6.877582550048828]))
    np.testing.assert_array_equal(got[2], [6.0, 6.0])
    np.testing.assert_array_equal(got[3], [0.0, 0.0])  # (G does not depend on b)


def test_tensor_list_concat_split_scatter_gradients_as_tf():
    x1 = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    split = R.TensorListSplit(
        tensor=x1, element_shape=tf.constant(-1), lengths=tf.constant([2, 4], I64)
    )
    y1 = R.TensorListConcat(input_handle=split, element_dtype=F32).tensor
    x2 = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    split2 = R.TensorListSplit(
        tensor=x2, element_shape=tf.constant([-1, 2]), lengths=tf.constant([1, 2], I64)
    )
    y2 = R.TensorListConcatV2(
        input_handle=split2,
        element_shape=tf.constant([-1, 2]),
        leading_dims=tf.constant([], I64),
        element_dtype=F32,
    ).tensor
    x3 = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    scattered = R.TensorListScatter(
        tensor=x3, indices=tf.constant([1, 0]), element_shape=tf.constant([2])
    )
    y3 = R.TensorListConcat(input_handle=scattered, element_dtype=F32, element_shape=[2]).tensor
    got = _run(
        [
            tf.gradients(tf.reduce_sum(y1 * tf.range(6.0)), x1)[0],
            tf.gradients(tf.reduce_sum(y2 * y2), x2)[0],
            tf.gradients(tf.reduce_sum(y3 * tf.range(4.0)), x3)[0],
        ]
    )
    assert got[0].tolist() == [0, 1, 2, 3, 4, 5]
    assert got[1].tolist() == [[2, 4], [6, 8], [10, 12]]
    assert got[2].tolist() == [[2, 3], [0, 1]]


def test_raw_ref_control_flow_ops_as_tf():
    v = tf.Variable(1.0, use_resource=False, name="v")
    p = tf.placeholder(tf.bool, [])
    built = {
        "RefEnter": R.RefEnter(data=v._ref(), frame_name="f"),
        "RefExit": R.RefExit(data=v._ref()),
        "RefNextIteration": R.RefNextIteration(data=v._ref()),
        "RefSwitch": R.RefSwitch(data=v._ref(), pred=p),
        "RefMerge": R.RefMerge(inputs=[v._ref(), v._ref()]),
    }
    assert type(built["RefSwitch"]).__name__ == "RefSwitch"
    assert built["RefMerge"]._fields == ("output", "value_index")
    for op_type, out in built.items():
        first = out[0] if isinstance(out, tuple) else out
        assert (first.name, first.dtype.name) == (f"{op_type}:0", "float32_ref")
        arg = "inputs" if op_type == "RefMerge" else "data"
        with pytest.raises(TypeError) as info:
            getattr(R, op_type)(**{arg: tf.constant(1.0)}, **(
                {"pred": p} if op_type == "RefSwitch" else {"frame_name": "f"}
                if op_type == "RefEnter" else {}))  # fmt: skip
        assert str(info.value) == (
            f"'{op_type}' Op requires that input '{arg}' be a mutable tensor (e.g.: a tf.Variable)"
        )
    assert built["RefMerge"].value_index.dtype == tf.int32
    exported = {n.name: n.op for n in tf.get_default_graph().as_graph_def().node}
    assert exported["RefSwitch"] == "RefSwitch" and exported["RefEnter"] == "RefEnter"
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(built["RefSwitch"][1], {p: True}) == 1.0
        assert sess.run(list(built["RefMerge"])) == [1.0, 0]
