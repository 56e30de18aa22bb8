"""State ops: TF1's documented behaviour, NumPy references, copy-on-write."""

from __future__ import annotations

import numpy as np
import pytest

from asyncflow import dtypes, errors
from asyncflow import graph as ops
from asyncflow.ops import array_ops, state_ops
from asyncflow.registry import get_op_def
from asyncflow.session import Session


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _var(value, dtype=None, name="v", validate_shape=True):
    """A bare VariableV2 + its initializer (no Variable class)."""
    value = dtypes.convert_to_numpy(value, dtype)  # TF's rules: Python floats -> float32
    shape = value.shape if validate_shape else None
    ref = state_ops.variable_op_v2(shape, value.dtype, name=name)
    init = state_ops.assign(ref, value, validate_shape=validate_shape)
    return ref, init


def _varref(sess, name="v"):
    """The variable's VarRef on whichever device holds it (GPU:0 under TF1 placement when
    a GPU is present, the CPU otherwise)."""
    for device in sess._devices:
        try:
            return device.resource_mgr.lookup("", name)
        except errors.NotFoundError:
            pass
    raise AssertionError(f"no device holds {name!r}")


# -- reads and initialisation --------------------------------------------------------------


def test_uninitialised_read_fails():
    ref, _ = _var([1.0, 2.0])
    read = array_ops.identity(ref)
    with Session() as sess:
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized value v"):
            sess.run(read)
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized value v"):
            sess.run(ref)


@pytest.mark.parametrize("op", [state_ops.assign_add, state_ops.assign_sub])
def test_update_of_uninitialised_fails(op):
    ref, _ = _var([1.0, 2.0])
    with Session() as sess, pytest.raises(errors.FailedPreconditionError):
        sess.run(op(ref, [1.0, 1.0]))


def test_scatter_of_uninitialised_fails():
    ref, _ = _var([1.0, 2.0])
    with Session() as sess, pytest.raises(errors.FailedPreconditionError):
        sess.run(state_ops.scatter_add(ref, [0], [1.0]))


def test_is_variable_initialized():
    ref, init = _var([1, 2])
    flag = state_ops.is_variable_initialized(ref)
    assert flag.dtype == dtypes.bool and flag.shape.ndims == 0
    with Session() as sess:
        assert not sess.run(flag)
        sess.run(init)
        assert sess.run(flag)


def test_sessions_hold_independent_state():
    ref, init = _var([1.0])
    add = state_ops.assign_add(ref, [1.0])
    with Session() as a, Session() as b:
        a.run(init)
        b.run(init)
        a.run(add)
        np.testing.assert_array_equal(a.run(ref), [2.0])
        np.testing.assert_array_equal(b.run(ref), [1.0])


def test_shared_name_shares_state():
    a = state_ops.variable_op_v2([1], dtypes.float32, name="a", shared_name="s")
    b = state_ops.variable_op_v2([1], dtypes.float32, name="b", shared_name="s")
    with Session() as sess:
        sess.run(state_ops.assign(a, [3.0]))
        np.testing.assert_array_equal(sess.run(b), [3.0])


# -- Assign ------------------------------------------------------------------------------------

ASSIGN_CASES = [
    ("float32", [1.0, 2.0], [5.0, -1.0]),
    ("float64", [[1.0, 2.0]], [[0.5, 0.25]]),
    ("int32", [1, 2, 3], [7, 8, 9]),
    ("int64", 4, 9),
    ("bool", [True, False], [False, True]),
]


@pytest.mark.parametrize("dtype,init,value", ASSIGN_CASES)
def test_assign(dtype, init, value):
    ref, initop = _var(init, dtype)
    out = state_ops.assign(ref, np.asarray(value, dtype))
    assert out.shape == np.shape(value)
    with Session() as sess:
        sess.run(initop)
        np.testing.assert_array_equal(sess.run(ref), np.asarray(init, dtype))
        got = sess.run(out)
        np.testing.assert_array_equal(got, np.asarray(value, dtype))
        assert np.asarray(sess.run(ref)).dtype == np.dtype(dtype)


def test_assign_string():
    ref, init = _var(np.array([b"a", b"b"], dtype=object), dtype=object)
    with Session() as sess:
        sess.run(init)
        sess.run(state_ops.assign(ref, np.array([b"c", b"d"], dtype=object)))
        assert list(sess.run(ref)) == [b"c", b"d"]


def test_assign_shape_mismatch_at_build_time():
    ref, _ = _var([1.0, 2.0])
    with pytest.raises(ValueError):
        state_ops.assign(ref, [1.0, 2.0, 3.0])


def test_assign_shape_mismatch_at_run_time():
    ref, init = _var([1.0, 2.0])
    p = array_ops.placeholder(dtypes.float32)
    assign = state_ops.assign(ref, p)
    with Session() as sess:
        sess.run(init)
        msg = r"Assign requires shapes of both tensors to match. lhs shape= \[2\] rhs shape= \[3\]"
        with pytest.raises(errors.InvalidArgumentError, match=msg):
            sess.run(assign, {p: [1.0, 2.0, 3.0]})


def test_first_assign_checks_declared_shape():
    ref = state_ops.variable_op_v2([2], dtypes.float32, name="v")
    p = array_ops.placeholder(dtypes.float32)
    with Session() as sess, pytest.raises(errors.InvalidArgumentError, match="lhs shape= "):
        sess.run(state_ops.assign(ref, p), {p: [1.0]})


def test_assign_without_validate_shape_changes_shape():
    ref, init = _var([1.0, 2.0], validate_shape=False)
    assign = state_ops.assign(ref, [[1.0, 2.0, 3.0]], validate_shape=False)
    assert assign.shape == (1, 3)
    with Session() as sess:
        sess.run(init)
        sess.run(assign)
        np.testing.assert_array_equal(sess.run(ref), [[1.0, 2.0, 3.0]])


def test_assign_requires_a_ref():
    # TF1's assign calls `ref.assign` on anything that is not a ref tensor.
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'assign'"):
        state_ops.assign(array_ops.constant([1.0]), [2.0])


def test_assign_dtype_mismatch_is_type_error():
    ref, _ = _var([1, 2], np.int32)
    with pytest.raises(TypeError):
        state_ops.assign(ref, array_ops.constant([1.0, 2.0]))


# -- AssignAdd / AssignSub ---------------------------------------------------------------------

UPDATE_CASES = [
    (state_ops.assign_add, np.add, "float32", [1.0, 2.0], [0.5, 0.25]),
    (state_ops.assign_add, np.add, "int32", [[1, 2], [3, 4]], [[10, 20], [30, 40]]),
    (state_ops.assign_add, np.add, "float64", 3.0, 0.5),
    (state_ops.assign_sub, np.subtract, "float32", [1.0, 2.0], [0.5, 0.25]),
    (state_ops.assign_sub, np.subtract, "int64", [5, 6], [1, 9]),
]


@pytest.mark.parametrize("op,ref_fn,dtype,init,delta", UPDATE_CASES)
def test_assign_update(op, ref_fn, dtype, init, delta):
    ref, initop = _var(init, dtype)
    delta = np.asarray(delta, dtype)
    out = op(ref, delta)
    expected = np.asarray(init, dtype)
    with Session() as sess:
        sess.run(initop)
        for _ in range(3):
            expected = ref_fn(expected, delta)
            got = sess.run(out)
            np.testing.assert_allclose(got, expected)
            assert np.asarray(got).dtype == np.dtype(dtype)
        np.testing.assert_allclose(sess.run(ref), expected)


def test_assign_add_shape_mismatch_at_run_time():
    ref, init = _var([1.0, 2.0])
    p = array_ops.placeholder(dtypes.float32)
    with Session() as sess:
        sess.run(init)
        with pytest.raises(errors.InvalidArgumentError, match="must be the same size"):
            sess.run(state_ops.assign_add(ref, p), {p: [1.0]})


def test_assign_add_rejects_bool():
    ref, _ = _var([True])
    with pytest.raises(TypeError):
        state_ops.assign_add(ref, [True])


# -- Scatter* --------------------------------------------------------------------------------


def _np_scatter(kind, params, indices, updates):
    out = params.copy()
    idx = indices.reshape(-1)
    upd = updates if updates.ndim == 0 else updates.reshape((idx.size,) + params.shape[1:])
    if kind == "update":
        out[idx] = upd
    elif kind == "add":
        np.add.at(out, idx, upd)
    else:
        np.subtract.at(out, idx, upd)
    return out


SCATTER_OPS = {
    "update": state_ops.scatter_update,
    "add": state_ops.scatter_add,
    "sub": state_ops.scatter_sub,
}
SCATTER_CASES = [
    # kind, params, indices, updates
    ("update", np.arange(5.0), np.array([1, 3]), np.array([10.0, 30.0])),
    ("update", np.arange(6.0).reshape(3, 2), np.array([2, 0]), np.ones((2, 2))),
    ("update", np.arange(4, dtype=np.int32), np.array(2, np.int64), np.array(7, np.int32)),
    ("add", np.zeros(4), np.array([1, 1, 3, 1]), np.array([1.0, 2.0, 3.0, 4.0])),
    ("add", np.ones((3, 2), np.int32), np.array([[0, 2], [2, 2]]), np.ones((2, 2, 2), np.int32)),
    ("add", np.zeros(3, np.float32), np.array([0, 2]), np.array(5.0, np.float32)),
    ("sub", np.full(4, 10.0), np.array([0, 0, 3], np.int64), np.array([1.0, 2.0, 3.0])),
]


@pytest.mark.parametrize("kind,params,indices,updates", SCATTER_CASES)
def test_scatter(kind, params, indices, updates):
    ref, init = _var(params)
    out = SCATTER_OPS[kind](ref, indices, updates)
    assert out.shape == params.shape
    expected = params
    with Session() as sess:
        sess.run(init)
        for _ in range(2):
            expected = _np_scatter(kind, expected, indices, updates)
            got = sess.run(out)
            np.testing.assert_array_equal(got, expected)
            assert np.asarray(got).dtype == params.dtype


@pytest.mark.parametrize("kind", sorted(SCATTER_OPS))
def test_scatter_index_out_of_range(kind):
    ref, init = _var(np.zeros(5))
    out = SCATTER_OPS[kind](ref, [1, 7], [1.0, 2.0])
    with Session() as sess:
        sess.run(init)
        with pytest.raises(
            errors.InvalidArgumentError, match=r"indices\[1\] = 7 is not in \[0, 5\)"
        ):
            sess.run(out)
        np.testing.assert_array_equal(sess.run(ref), np.zeros(5))  # nothing written


def test_scatter_negative_index_multi_dim():
    ref, init = _var(np.zeros(5))
    out = state_ops.scatter_add(ref, [[0, 1], [-1, 2]], np.ones((2, 2)))
    with Session() as sess:
        sess.run(init)
        with pytest.raises(errors.InvalidArgumentError, match=r"indices\[1,0\] = -1"):
            sess.run(out)


def test_scatter_shape_checks():
    ref, init = _var(np.zeros((4, 2)))
    with pytest.raises(ValueError):
        state_ops.scatter_update(ref, [0, 1], np.ones((2, 3)))
    p = array_ops.placeholder(dtypes.float64)
    with Session() as sess:
        sess.run(init)
        with pytest.raises(errors.InvalidArgumentError, match="Must have updates.shape"):
            sess.run(state_ops.scatter_update(ref, [0, 1], p), {p: np.ones((2, 3))})


def test_scatter_rejects_float_indices():
    ref, _ = _var(np.zeros(3))
    with pytest.raises(TypeError):
        state_ops.scatter_update(ref, [0.5], [1.0])


# -- copy-on-write ---------------------------------------------------------------------------


def test_fetched_value_never_changes():
    ref, init = _var([1.0, 2.0])
    add = state_ops.assign_add(ref, [1.0, 1.0])
    with Session() as sess:
        sess.run(init)
        before = sess.run(ref)
        sess.run(add.op)
        np.testing.assert_array_equal(before, [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(ref), [2.0, 3.0])


def test_fetched_value_is_the_callers_own():
    # TF1 hands out arrays the caller may write into; doing so never touches the variable.
    ref, init = _var([1.0, 2.0])
    with Session() as sess:
        sess.run(init)
        value = sess.run(ref)
        value[0] = 5.0
        np.testing.assert_array_equal(sess.run(ref), [1.0, 2.0])


def test_view_of_fetched_value_counts_as_holder():
    ref, init = _var(np.arange(4.0))
    add = state_ops.assign_add(ref, np.ones(4))
    with Session() as sess:
        sess.run(init)
        view = sess.run(ref)[1:3]  # only the view survives; it holds the buffer via .base
        sess.run(add.op)
        np.testing.assert_array_equal(view, [1.0, 2.0])


@pytest.mark.parametrize(
    "make_update",
    [
        lambda ref: state_ops.assign_add(ref, np.ones(3)),
        lambda ref: state_ops.assign_sub(ref, np.ones(3)),
        lambda ref: state_ops.assign(ref, np.ones(3)),
        lambda ref: state_ops.scatter_add(ref, [0, 0], [1.0, 1.0]),
        lambda ref: state_ops.scatter_update(ref, [2], [4.0]),
    ],
)
def test_updates_are_in_place_without_outside_holders(make_update):
    ref, init = _var(np.zeros(3))
    update = make_update(ref)
    with Session() as sess:
        sess.run(init)
        buffer_id = id(_varref(sess).value)
        for _ in range(3):
            sess.run(update.op)
            assert id(_varref(sess).value) == buffer_id


def test_update_after_fetch_copies_once_then_in_place():
    ref, init = _var(np.zeros(3))
    add = state_ops.assign_add(ref, np.ones(3))
    with Session() as sess:
        sess.run(init)
        held = sess.run(ref)
        sess.run(add.op)
        fresh_id = id(_varref(sess).value)
        assert fresh_id != id(held)
        sess.run(add.op)
        assert id(_varref(sess).value) == fresh_id
        np.testing.assert_array_equal(held, np.zeros(3))


def test_assign_never_aliases_its_input():
    value = array_ops.constant([1.0, 2.0])
    ref = state_ops.variable_op_v2([2], dtypes.float32, name="v")
    init = state_ops.assign(ref, value)
    add = state_ops.assign_add(ref, [1.0, 1.0])
    with Session() as sess:
        sess.run(init)
        sess.run(add.op)
        np.testing.assert_array_equal(sess.run(value), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(ref), [2.0, 3.0])


def test_assign_add_of_itself():
    ref, init = _var([1.0, 2.0])
    double = state_ops.assign_add(ref, array_ops.identity(ref))
    with Session() as sess:
        sess.run(init)
        np.testing.assert_array_equal(sess.run(double), [2.0, 4.0])


# -- kernels directly (no executor) -----------------------------------------------------------


def test_varref_read_and_cow_directly():
    r = state_ops.VarRef(dtypes.float32, name="w")
    with pytest.raises(errors.FailedPreconditionError, match="uninitialized value w"):
        r.read()
    r.assign(np.array([1.0, 2.0], np.float32), validate_shape=True)
    first = r.value
    held = r.read()
    r.apply_ufunc(np.add, np.ones(2, np.float32))
    assert r.value is not first and held.tolist() == [1.0, 2.0]
    del held, first
    second = id(r.value)
    r.apply_ufunc(np.add, np.ones(2, np.float32))
    assert id(r.value) == second and r.value.tolist() == [3.0, 4.0]


def test_registration():
    for name in (
        "VariableV2",
        "Assign",
        "AssignAdd",
        "AssignSub",
        "ScatterUpdate",
        "ScatterAdd",
        "ScatterSub",
        "IsVariableInitialized",
    ):
        op_def = get_op_def(name)
        assert op_def.stateful and op_def.shape_fn is not None and op_def.supports("CPU")
        assert op_def.not_differentiable


def test_variable_op_matches_tf():
    # TF 2.21's state_ops.variable_op([1, 2], float32): op "Variable", shape (1, 2), dtype
    # float32_ref; with set_shape=False the shape is unknown.  Reading it before an
    # assign is FailedPreconditionError; assign([[1, 2]]) then reads [[1, 2]].
    import asyncflow as af
    from asyncflow.ops import state_ops as S

    with af.Graph().as_default():
        v = S.variable_op([1, 2], af.float32)
        assert v.op.type == "Variable" and v.shape.as_list() == [1, 2]
        assert v.dtype == af.float32._as_ref
        assert S.variable_op([1, 2], af.float32, set_shape=False).shape.ndims is None
        with af.Session() as sess:
            with pytest.raises(af.errors.FailedPreconditionError):
                sess.run(v)
            assert sess.run(S.assign(v, [[1.0, 2.0]])).tolist() == [[1.0, 2.0]]
            assert sess.run(v).tolist() == [[1.0, 2.0]]


def test_bfloat16_variable_reads_keep_their_dtype():
    # TF 2.21: a bfloat16 ref variable reads back as bfloat16 values ([1.5, 2] + scatter_add
    # of 3 at row 0 -> [4.5, 2]), not as raw 2-byte records.
    import ml_dtypes

    import asyncflow as af

    with af.Graph().as_default():
        v = af.Variable(np.array([1.5, 2], dtype=ml_dtypes.bfloat16))
        add = af.scatter_add(v, [0], np.array([3], dtype=ml_dtypes.bfloat16))
        with af.Session() as s:
            s.run(v.initializer)
            first = s.run(v)
            after = s.run(add)
    assert first.dtype == ml_dtypes.bfloat16 and after.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(first.astype(np.float32), [1.5, 2])
    np.testing.assert_array_equal(after.astype(np.float32), [4.5, 2])
