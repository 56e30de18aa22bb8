import asyncio
import copy

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors

CASES = [
    (errors.CancelledError, errors.CANCELLED, 1),
    (errors.UnknownError, errors.UNKNOWN, 2),
    (errors.InvalidArgumentError, errors.INVALID_ARGUMENT, 3),
    (errors.DeadlineExceededError, errors.DEADLINE_EXCEEDED, 4),
    (errors.NotFoundError, errors.NOT_FOUND, 5),
    (errors.AlreadyExistsError, errors.ALREADY_EXISTS, 6),
    (errors.PermissionDeniedError, errors.PERMISSION_DENIED, 7),
    (errors.ResourceExhaustedError, errors.RESOURCE_EXHAUSTED, 8),
    (errors.FailedPreconditionError, errors.FAILED_PRECONDITION, 9),
    (errors.AbortedError, errors.ABORTED, 10),
    (errors.OutOfRangeError, errors.OUT_OF_RANGE, 11),
    (errors.UnimplementedError, errors.UNIMPLEMENTED, 12),
    (errors.InternalError, errors.INTERNAL, 13),
    (errors.UnavailableError, errors.UNAVAILABLE, 14),
    (errors.DataLossError, errors.DATA_LOSS, 15),
    (errors.UnauthenticatedError, errors.UNAUTHENTICATED, 16),
]


def test_ok_code():
    assert errors.OK == 0


@pytest.mark.parametrize("cls,code,value", CASES)
def test_subclass(cls, code, value):
    assert code == value
    err = cls(None, None, "boom")
    assert isinstance(err, errors.OpError) and isinstance(err, Exception)
    assert (err.message, err.op, err.node_def, err.error_code) == ("boom", None, None, code)
    assert str(err) == "boom" and err.args == ("boom",)
    assert errors.exception_type_from_error_code(code) is cls
    assert errors.error_code_from_exception_type(cls) == code
    assert cls.__name__ in repr(err)


@pytest.mark.parametrize("cls,code,value", CASES)
def test_copy_and_reraise(cls, code, value):
    op = object()
    err = cls("node", op, "msg")
    for clone in (copy.copy(err), copy.deepcopy(err)):
        assert type(clone) is cls and clone.message == "msg" and clone.error_code == code
    assert copy.copy(err).op is op
    with pytest.raises(cls) as info:
        try:
            raise err
        except errors.OpError:
            raise
    assert info.value is err


def test_base_op_error():
    err = errors.OpError(None, None, "m", errors.INTERNAL)
    assert err.error_code == errors.INTERNAL and str(err) == "m"
    assert errors.OpError(None, None, "m").error_code is None
    assert copy.copy(err).error_code == errors.INTERNAL


def test_cancelled_is_not_asyncio():
    assert not issubclass(errors.CancelledError, asyncio.CancelledError)
    assert not issubclass(asyncio.CancelledError, errors.CancelledError)


def test_code_lookup_errors():
    with pytest.raises(KeyError):
        errors.exception_type_from_error_code(99)
    assert errors.error_code_from_exception_type(ValueError) == errors.UNKNOWN


def test_run_error_carries_the_failing_nodes_node_def():
    # TF 2.21: e.op.name and e.node_def.name are both "mm"; the NodeDef is the op's.
    with tf.Graph().as_default():
        a = tf.placeholder(tf.float32, [None, 3])
        b = tf.placeholder(tf.float32, [None, 4])
        c = tf.matmul(a, b, name="mm")
        with tf.Session() as s:
            with pytest.raises(tf.errors.InvalidArgumentError) as e:
                s.run(c, {a: np.ones((2, 3)), b: np.ones((2, 4))})
    assert e.value.op is c.op
    assert e.value.node_def.name == "mm" and e.value.node_def.op == "MatMul"
    assert e.value.node_def == c.op.node_def
