"""CheckNumerics, Assert and the assert_* helpers, passing and failing as TF documents."""

from __future__ import annotations

import numpy as np
import pytest

from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow.ops import array_ops, check_ops
from asyncflow.session import Session


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


# -- CheckNumerics -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("value,status", [
    ([1.0, 2.0], None),
    ([1.0, np.nan], "NaN"),
    ([np.inf, 1.0], "Inf"),
    ([-np.inf, np.nan], "Inf and NaN"),
])  # fmt: skip
def test_check_numerics(dtype, value, status):
    x = array_ops.placeholder(dtypes.as_dtype(dtype))
    y = check_ops.check_numerics(x, "oops")
    assert y.dtype == dtypes.as_dtype(dtype)
    v = np.array(value, dtype)
    if status is None:
        np.testing.assert_array_equal(_run(y, {x: v}), v)
    else:
        with pytest.raises(
            errors.InvalidArgumentError, match=f"oops : Tensor had {status} values"
        ):
            _run(y, {x: v})


def test_check_numerics_rejects_ints():
    with pytest.raises(TypeError):
        check_ops.check_numerics(array_ops.constant([1]), "m")


def test_verify_tensor_all_finite():
    x = array_ops.placeholder(dtypes.float32)
    y = check_ops.verify_tensor_all_finite(x, "not finite")
    assert y.op.type == "Identity"
    assert _run(y, {x: 3.0}) == 3.0
    with pytest.raises(errors.InvalidArgumentError, match="not finite : Tensor had Inf"):
        _run(y, {x: np.inf})


# -- Assert --------------------------------------------------------------------------------


def test_assert_passes_and_fails_with_tf_message():
    cond = array_ops.placeholder(dtypes.bool)
    a = check_ops.Assert(cond, ["x is", array_ops.constant([1, 2, 3, 4]), 2.5])
    # A float among the data: TF guards the Assert with a cond (test_tf1_fixes_s25.py).
    assert isinstance(a, ops.Operation) and a.type == "Merge"
    assert a.name == "Assert/AssertGuard/Merge"
    assert _run(a, {cond: True}) is None
    with pytest.raises(errors.InvalidArgumentError) as info:
        _run(a, {cond: False})
    assert info.value.message.startswith("assertion failed: [x is] [1 2 3...] [2.5]")


def test_assert_summarize_and_condition_shape():
    cond = array_ops.placeholder(dtypes.bool)
    a = check_ops.Assert(cond, [np.arange(5, dtype=np.int32)], summarize=5, name="check")
    assert a.name == "check/Assert"  # int32 data only: the bare Assert
    with pytest.raises(errors.InvalidArgumentError, match=r"assertion failed: \[0 1 2 3 4\]"):
        _run(a, {cond: False})
    with pytest.raises(errors.InvalidArgumentError, match=r"In\[0\] should be a scalar: \[2\]"):
        _run(a, {cond: [True, True]})
    assert _run(a, {cond: [True]}) is None  # a legacy scalar
    with pytest.raises(ValueError):
        check_ops.Assert(array_ops.constant([True, False]), ["x"])
    # Guarded (int64 data): the cond's Switch wants a true scalar (TF 2.21's words).
    g = check_ops.Assert(cond, [np.arange(5)], summarize=5, name="guarded")
    assert g.name == "guarded/AssertGuard/Merge"
    for bad, shape in (([True, True], "[2]"), ([True], "[1]")):
        with pytest.raises(errors.InvalidArgumentError) as info:
            _run(g, {cond: bad})
        assert info.value.message.startswith(
            f"The second input must be a scalar, but it has shape {shape}"
        )


# -- binary value comparisons ---------------------------------------------------------------

_BINARY = [
    # helper, passing (x, y), failing (x, y), symbol
    (check_ops.assert_equal, ([1, 2], [1, 2]), ([1, 2], [1, 3]), "=="),
    (check_ops.assert_none_equal, ([1, 2], [3, 4]), ([1, 2], [3, 2]), "!="),
    (check_ops.assert_less, ([1, 2], [2, 3]), ([1, 2], [2, 2]), "<"),
    (check_ops.assert_less_equal, ([1, 2], [1, 3]), ([1, 4], [1, 3]), "<="),
    (check_ops.assert_greater, ([2, 3], [1, 2]), ([2, 3], [1, 3]), ">"),
    (check_ops.assert_greater_equal, ([2, 3], [2, 2]), ([2, 1], [2, 2]), ">="),
]
_IDS = [b[0].__name__ for b in _BINARY]


@pytest.mark.parametrize("helper,good,bad,sym", _BINARY, ids=_IDS)
def test_binary_assert_at_run_time(helper, good, bad, sym):
    x = array_ops.placeholder(dtypes.int32, [2])
    y = array_ops.placeholder(dtypes.int32, [2])
    op = helper(x, y, message="custom")
    assert _run(op, {x: good[0], y: good[1]}) is None
    with pytest.raises(errors.InvalidArgumentError) as info:
        _run(op, {x: bad[0], y: bad[1]})
    msg = info.value.message
    assert msg.startswith(f"assertion failed: [custom] [Condition x {sym} y did not hold")
    assert f"[x ({x.name}) = ] [{' '.join(map(str, bad[0]))}]" in msg


@pytest.mark.parametrize("helper,good,bad,sym", _BINARY, ids=_IDS)
def test_binary_assert_static(helper, good, bad, sym):
    op = helper(array_ops.constant(good[0]), array_ops.constant(good[1]))
    assert op.type == "Assert"
    assert _run(op) is None
    with pytest.raises(errors.InvalidArgumentError, match=f"Condition x {sym} y did not hold"):
        helper(array_ops.constant(bad[0]), array_ops.constant(bad[1]))


def test_assert_equal_broadcasts_and_checks_shapes():
    x = array_ops.placeholder(dtypes.int32, [2, 2])
    op = check_ops.assert_equal(x, 1)
    assert _run(op, {x: [[1, 1], [1, 1]]}) is None
    with pytest.raises(ValueError):
        check_ops.assert_equal(
            array_ops.constant([1, 2]), array_ops.placeholder(dtypes.int32, [3])
        )


def test_assert_equal_same_tensor_is_a_no_op():
    x = array_ops.placeholder(dtypes.int32)
    assert check_ops.assert_equal(x, x).type == "NoOp"


def test_assert_with_custom_data():
    x = array_ops.placeholder(dtypes.float32, [3])
    op = check_ops.assert_less(x, 1.0, data=["x too big:", x], summarize=2)
    with pytest.raises(
        errors.InvalidArgumentError, match=r"assertion failed: \[x too big:\] \[5 6\.\.\.\]"
    ):
        _run(op, {x: [5.0, 6.0, 7.0]})


# -- sign checks ---------------------------------------------------------------------------

_SIGN = [
    (check_ops.assert_positive, [1, 2], [1, 0], "x > 0"),
    (check_ops.assert_negative, [-1, -2], [-1, 0], "x < 0"),
    (check_ops.assert_non_negative, [0, 2], [0, -1], "x >= 0"),
    (check_ops.assert_non_positive, [0, -2], [0, 1], "x <= 0"),
]


@pytest.mark.parametrize("helper,good,bad,cond", _SIGN, ids=[s[0].__name__ for s in _SIGN])
def test_sign_asserts(helper, good, bad, cond):
    x = array_ops.placeholder(dtypes.float32, [2])
    op = helper(x, message="msg")
    assert _run(op, {x: good}) is None
    # TF ends the message with ".  " (TF 2.21: "[msg.  ] [Condition x > 0 did ...").
    with pytest.raises(errors.InvalidArgumentError, match=rf"\[msg\.  \] \[Condition {cond} did"):
        _run(op, {x: bad})
    assert _run(helper(array_ops.constant(good))) is None
    with pytest.raises(errors.InvalidArgumentError, match=f"Condition {cond} did not hold"):
        helper(array_ops.constant(bad))


def test_assert_near():
    x = array_ops.placeholder(dtypes.float32, [2])
    op = check_ops.assert_near(x, [1.0, 2.0], rtol=0.0, atol=0.1)
    assert _run(op, {x: [1.05, 1.95]}) is None
    with pytest.raises(errors.InvalidArgumentError, match="not equal to tolerance"):
        _run(op, {x: [1.2, 2.0]})
    assert _run(check_ops.assert_near(x, 1.0), {x: [1.0 + 1e-7, 1.0]}) is None


def test_assert_on_unknown_rank_inputs():
    x = array_ops.placeholder(dtypes.int32)
    op = check_ops.assert_equal(x, 1)
    assert _run(op, {x: [[1, 1]]}) is None
    with pytest.raises(errors.InvalidArgumentError, match="Condition x == y"):
        _run(op, {x: [[1, 2]]})


# -- rank, type, scalar ----------------------------------------------------------------------


def test_assert_rank_static():
    x = array_ops.constant([[1, 2]])
    op = check_ops.assert_rank(x, 2)
    assert op.type == "NoOp" and op.name.endswith("static_checks_determined_all_ok")
    with pytest.raises(ValueError, match=r"Tensor Const:0 must have rank 1.  Received rank 2"):
        check_ops.assert_rank(x, 1)
    with pytest.raises(ValueError, match="Rank must be a scalar"):
        check_ops.assert_rank(x, [2])
    with pytest.raises(TypeError, match="must be of type"):
        check_ops.assert_rank(x, np.int64(2))


def test_assert_rank_at_least_static():
    x = array_ops.constant([[1, 2]])
    assert check_ops.assert_rank_at_least(x, 1).type == "NoOp"
    assert check_ops.assert_rank_at_least(x, 2).type == "NoOp"
    with pytest.raises(ValueError, match="must have rank at least 3.  Received rank 2"):
        check_ops.assert_rank_at_least(x, 3)


def test_assert_rank_at_run_time():
    x = array_ops.placeholder(dtypes.float32)
    op = check_ops.assert_rank(x, 2)
    assert op.type == "Assert"
    assert _run(op, {x: np.zeros((2, 3))}) is None
    with pytest.raises(errors.InvalidArgumentError, match="must have rank"):
        _run(op, {x: np.zeros(3)})
    least = check_ops.assert_rank_at_least(x, 2)
    assert _run(least, {x: np.zeros((1, 1, 1))}) is None
    with pytest.raises(errors.InvalidArgumentError, match="must have rank at least"):
        _run(least, {x: np.zeros(3)})


def test_assert_type_integer_scalar():
    i = array_ops.constant(1)
    f = array_ops.constant(1.0)
    assert check_ops.assert_type(i, dtypes.int32).type == "NoOp"
    with pytest.raises(TypeError, match="must be of type"):
        check_ops.assert_type(f, dtypes.int32)
    assert check_ops.assert_integer(i).type == "NoOp"
    with pytest.raises(TypeError, match='Expected "x" to be integer type'):
        check_ops.assert_integer(f)
    assert check_ops.assert_scalar(i) is i
    with pytest.raises(ValueError, match="Expected scalar shape for Const_2:0, saw shape"):
        check_ops.assert_scalar(array_ops.constant([1]))
    with pytest.raises(ValueError, match="Expected scalar shape"):
        check_ops.assert_scalar(array_ops.placeholder(dtypes.int32))
