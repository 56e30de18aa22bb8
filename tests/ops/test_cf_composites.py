"""Control-flow primitives on composites and Python values, as TF 2.21's tf.compat.v1
(its ControlFlowTest.testSparseIdentity / testSparseEnterExit / testCaseSideEffects):
`_Identity`, `_Enter` and `exit` apply part by part to a SparseTensor or IndexedSlices,
and `with_dependencies` takes a Python number as its output (converted to a Const)."""

import numpy as np

import asyncflow as af
from asyncflow.ops import control_flow_ops as cfo


def test_identity_of_a_sparse_tensor_keeps_its_parts():
    g = af.Graph()
    with g.as_default():
        st1 = af.SparseTensor([[0, 5]], ["x"], [10, 10])
        st2 = cfo._Identity(st1)
        assert isinstance(st2, af.SparseTensor)
        assert st2.values.op.type == "Identity"
        with af.Session(graph=g) as s:
            a, b = s.run(
                [
                    [st1.indices, st1.values, st1.dense_shape],
                    [st2.indices, st2.values, st2.dense_shape],
                ]
            )
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_enter_and_exit_of_a_sparse_tensor_and_indexed_slices():
    g = af.Graph()
    with g.as_default():
        st = cfo.exit(cfo._Enter(af.SparseTensor([[0, 5]], ["x"], [10, 10]), "foo_1"))
        assert isinstance(st, af.SparseTensor)
        assert [t.op.type for t in (st.indices, st.values, st.dense_shape)] == ["Exit"] * 3
        assert st.values.op.inputs[0].op.type == "Enter"
        sl = cfo._Identity(
            af.IndexedSlices(af.constant([1.0]), af.constant([0]), af.constant([3]))
        )
        assert isinstance(sl, af.IndexedSlices)
        with af.Session(graph=g) as s:
            np.testing.assert_array_equal(s.run(sl.values), [1.0])


def test_case_branches_returning_python_numbers_after_their_assigns():
    g = af.Graph()
    with g.as_default():
        v0, v1, v2 = (af.Variable(-1) for _ in range(3))
        a = lambda: cfo.with_dependencies([af.assign(v0, 0)], 0)  # noqa: E731
        b = lambda: cfo.with_dependencies([af.assign(v1, 1)], 1)  # noqa: E731
        c = lambda: cfo.with_dependencies([af.assign(v2, 2)], 2)  # noqa: E731
        x, y = af.constant(1), af.constant(2)
        r0 = af.case(((x < y, a), (x > y, b)), default=c, exclusive=True)
        r1 = af.case(((x > y, a), (x < y, b)), default=c, exclusive=True)
        r2 = af.case(((x > y, a), (x > y, b)), default=c, exclusive=True)
        init = af.global_variables_initializer()
        with af.Session(graph=g) as s:
            for r, want, after in (
                (r2, 2, [-1, -1, 2]),
                (r1, 1, [-1, 1, -1]),
                (r0, 0, [0, -1, -1]),
            ):
                s.run(init)
                assert s.run(r) == want
                assert s.run([v0, v1, v2]) == after
