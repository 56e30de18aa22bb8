"""TF1's top-level framework helpers: build constants, quantized/handle dtypes,
ensure_shape, guarantee_const, timestamp, broadcast shapes, saturate_cast,
get_static_value, make_tensor_proto/make_ndarray, dtype/rank assertions, scopes.
Expected values and messages were recorded from TF 2.21 (tf.compat.v1, graph mode)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors


@pytest.fixture(autouse=True)
def _graph(graph):
    return graph


def _run(t, feed=None):
    with af.Session() as s:
        return s.run(t, feed)


def test_constants_and_quantized_dtypes():
    assert af.GRAPH_DEF_VERSION > 0  # the producer version of the GraphDefs written here
    assert isinstance(af.VERSION, str) and af.GRAPH_DEF_VERSION_MIN_CONSUMER == 0
    assert af.qint8.as_datatype_enum == 11 and af.quint16.as_datatype_enum == 16
    assert af.qint8.as_numpy_dtype == np.dtype([("qint8", np.int8)])
    assert af.qint8.is_quantized and not af.float32.is_quantized and af.qint32.size == 4
    assert af.as_dtype("qint16") is af.qint16 and af.as_dtype(20) is af.resource
    assert len(af.QUANTIZED_DTYPES) == 10 and af.qint8._as_ref in af.QUANTIZED_DTYPES
    with pytest.raises(TypeError, match="quantized"):
        af.qint8.min  # noqa: B018 - TF raises here
    with pytest.raises(TypeError):
        af.variant.as_numpy_dtype  # noqa: B018
    assert af.OpError is errors.OpError and af.no_gradient is af.NotDifferentiable


def test_ensure_shape():
    x = af.constant([1.0, 2.0])
    y = af.ensure_shape(af.placeholder_with_default(x, [None]), [2])
    assert y.shape.as_list() == [2]
    np.testing.assert_array_equal(_run(y), [1.0, 2.0])
    (g,) = af.gradients(af.reduce_sum(af.ensure_shape(x, [None]) * 3.0), [x])
    np.testing.assert_array_equal(_run(g), [3.0, 3.0])
    with pytest.raises(ValueError, match="must be equal"):
        af.ensure_shape(x, [3])
    z = af.ensure_shape(af.placeholder_with_default(x, [None]), [3])
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Shape of tensor PlaceholderWithDefault_1 \[2\] is not compatible "
                             r"with expected shape \[3\]"):  # fmt: skip
        _run(z)


def test_guarantee_const_timestamp_and_broadcast_shapes():
    x = af.constant([1.0, 2.0])
    np.testing.assert_array_equal(_run(af.guarantee_const(x)), [1.0, 2.0])
    before = time.time()
    ts = _run(af.timestamp())
    assert before - 1 <= ts <= time.time() + 1 and np.asarray(ts).dtype == np.float64
    assert af.broadcast_static_shape(af.TensorShape([2, 1]), af.TensorShape([3])).as_list() == [
        2,
        3,
    ]
    assert af.broadcast_static_shape(af.TensorShape([None, 1]), af.TensorShape([4])).as_list() == [
        None, 4]  # fmt: skip
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        af.broadcast_static_shape(af.TensorShape([2]), af.TensorShape([3]))
    np.testing.assert_array_equal(_run(af.broadcast_dynamic_shape([2, 1], [3])), [2, 3])
    with pytest.raises(errors.InvalidArgumentError, match=r"Incompatible shapes: \[2\] vs. \[3\]"):
        _run(af.broadcast_dynamic_shape([2], [3]))


def test_saturate_cast_matches_tf():
    np.testing.assert_array_equal(_run(af.saturate_cast([300.0, -5.0, 1e10], af.uint8)),
                                  [255, 0, 255])  # fmt: skip
    np.testing.assert_array_equal(_run(af.saturate_cast([1e10, -1e10], af.int32)),
                                  [2147483520, -2147483648])  # fmt: skip
    np.testing.assert_array_equal(_run(af.saturate_cast(af.constant([1 + 2j]), af.float32)), [1.0])
    np.testing.assert_array_equal(_run(af.saturate_cast([-3, 400], af.uint8)), [0, 255])
    assert af.to_complex64([1.0]).dtype == af.complex64
    assert af.to_complex128([1.0]).dtype == af.complex128
    assert af.to_bfloat16([1.0]).dtype == af.bfloat16


def test_static_values_and_protos():
    np.testing.assert_array_equal(af.get_static_value(af.constant([1, 2])), [1, 2])
    np.testing.assert_array_equal(
        af.get_static_value(af.shape(af.placeholder(af.float32, [2, 3]))), [2, 3]
    )
    assert af.get_static_value(af.placeholder(af.float32)) is None
    proto = af.make_tensor_proto([1, 2])
    assert proto.dtype == 3 and [d.size for d in proto.tensor_shape.dim] == [2]
    assert proto.tensor_content == b"\x01\x00\x00\x00\x02\x00\x00\x00"  # TF's bytes
    np.testing.assert_array_equal(af.make_ndarray(proto), [1, 2])
    filled = af.make_ndarray(af.make_tensor_proto(7.0, shape=[2, 2]))
    np.testing.assert_array_equal(filled, np.full((2, 2), 7.0, np.float32))
    with pytest.raises(TypeError):
        af.make_tensor_proto([1, 2], shape=[3], verify_shape=True)


def test_assertions_and_predicates():
    x = af.constant([1.0, 2.0])
    assert af.assert_same_float_dtype([x]) == af.float32
    assert af.assert_same_float_dtype() == af.float32
    with pytest.raises(ValueError, match="must be of the same type"):
        af.assert_same_float_dtype([x, af.constant(1.0, af.float64)])
    with pytest.raises(ValueError, match="Expected floating point"):
        af.assert_same_float_dtype([af.constant([1])])
    with pytest.raises(ValueError, match=r"must have rank in \(0, 2\).  Received rank 1"):
        af.assert_rank_in(x, [0, 2])
    p = af.placeholder(af.float32)
    check = af.assert_rank_in(p, [0, 2])
    _run(check, {p: [[1.0]]})
    with pytest.raises(errors.InvalidArgumentError):
        _run(check, {p: [1.0]})
    with pytest.raises(TypeError, match="proper"):
        af.assert_proper_iterable("abc")
    af.assert_proper_iterable([1, 2])
    assert af.is_numeric_tensor(x) and not af.is_numeric_tensor(af.constant("a"))
    assert af.is_symbolic_tensor(x) and not af.is_symbolic_tensor(np.ones(2))
    assert af.dimension_value(af.Dimension(None)) is None and af.dimension_value(3) == 3
    assert af.dimension_at_index(af.TensorShape(None), 3).value is None
    assert af.dimension_at_index(af.TensorShape([4, 5]), 1).value == 5


def test_scopes_and_switches():
    with af.op_scope([], "outer") as scope:
        assert scope == "outer/"
    a = af.constant(1.0)
    with af.control_dependencies([a.op]):
        with af.init_scope():
            b = af.constant(2.0)
        c = af.constant(3.0)
    assert b.op.control_inputs == [] and c.op.control_inputs == [a.op]
    assert not af.resource_variables_enabled() and not af.control_flow_v2_enabled()
    assert not af.executing_eagerly_outside_functions()
    for switch in (af.disable_resource_variables, af.disable_control_flow_v2,
                   af.disable_v2_tensorshape, af.disable_tensor_equality):  # fmt: skip
        switch()
    assert af.get_logger() is af.logging.get_logger()
    sp = af.convert_to_tensor_or_sparse_tensor(af.SparseTensorValue([[0]], [1.0], [2]))
    assert isinstance(sp, af.SparseTensor)
    assert isinstance(af.convert_to_tensor_or_sparse_tensor([1.0]), af.Tensor)
