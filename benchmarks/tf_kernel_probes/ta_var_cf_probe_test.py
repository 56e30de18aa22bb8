"""TensorArray, variables and control-flow behaviours, condensed from what TF's kernel
tests check; written for the measurement, graph mode."""

import numpy as np
from tensorflow.python.framework import (
    constant_op,
    dtypes,
    ops,
    tensor_shape,
    test_util,
)
from tensorflow.python.ops import (
    array_ops,
    control_flow_ops,
    gradients_impl,
    math_ops,
    resource_variable_ops,
    state_ops,
    tensor_array_ops,
    variable_scope,
    variables,
    while_loop,
)
from tensorflow.python.ops import cond as cond_lib
from tensorflow.python.platform import test


class TensorArrayProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testWriteReadStack(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=3)
        ta = ta.write(0, [[4.0, 5.0]]).write(1, [[1.0, 3.0]]).write(2, [[7.0, -8.5]])
        self.assertAllEqual([[[4.0, 5.0]], [[1.0, 3.0]], [[7.0, -8.5]]], self.evaluate(ta.stack()))
        self.assertAllEqual([[1.0, 3.0]], self.evaluate(ta.read(1)))

    @test_util.run_deprecated_v1
    def testConcatSplit(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=2, infer_shape=False)
        ta = ta.write(0, [[1.0], [2.0]]).write(1, [[3.0]])
        self.assertAllEqual([[1.0], [2.0], [3.0]], self.evaluate(ta.concat()))
        ta2 = tensor_array_ops.TensorArray(dtypes.float32, size=2, infer_shape=False).split(
            [1.0, 2.0, 3.0], [1, 2]
        )
        self.assertAllEqual([2.0, 3.0], self.evaluate(ta2.read(1)))

    @test_util.run_deprecated_v1
    def testUnstackGather(self):
        ta = tensor_array_ops.TensorArray(dtypes.int32, size=3).unstack([[1, 2], [3, 4], [5, 6]])
        self.assertAllEqual([[5, 6], [1, 2]], self.evaluate(ta.gather([2, 0])))
        ta = tensor_array_ops.TensorArray(dtypes.int32, size=3).scatter([2, 0], [[1, 2], [3, 4]])
        self.assertAllEqual([3, 4], self.evaluate(ta.read(0)))

    @test_util.run_deprecated_v1
    def testWriteTwiceRaises(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=3)
        w = ta.write(2, 3.0).write(2, 3.0)
        with self.assertRaisesOpError(
            "Could not write to TensorArray index 2 because it has already been written to."
        ):
            self.evaluate(w.flow)

    @test_util.run_deprecated_v1
    def testReadOutOfBounds(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=3)
        with self.assertRaisesOpError("Tried to read from index 3 but array size is: 3"):
            self.evaluate(ta.read(3))

    @test_util.run_deprecated_v1
    def testWrongDtypeWrite(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=3)
        with self.assertRaises((TypeError, ValueError)):
            ta.write(0, constant_op.constant([1, 2], dtype=dtypes.int32))

    @test_util.run_deprecated_v1
    def testInferShapeMismatch(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=3)
        ta = ta.write(0, [1.0, 2.0])
        with self.assertRaises(ValueError):
            ta.write(1, [1.0, 2.0, 3.0])

    @test_util.run_deprecated_v1
    def testElementShapeChecked(self):
        ta = tensor_array_ops.TensorArray(
            dtypes.float32, size=2, element_shape=tensor_shape.TensorShape([2])
        )
        with self.assertRaises(ValueError):
            ta.write(0, [1.0, 2.0, 3.0])
        self.assertEqual(
            [2, 2], ta.write(0, [1.0, 2.0]).write(1, [3.0, 4.0]).stack().get_shape().as_list()
        )

    @test_util.run_deprecated_v1
    def testDynamicSizeGrows(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=0, dynamic_size=True)
        ta = ta.write(4, 1.0)
        self.assertEqual(5, self.evaluate(ta.size()))

    @test_util.run_deprecated_v1
    def testStackEmptyWithElementShape(self):
        ta = tensor_array_ops.TensorArray(
            dtypes.float32, size=0, element_shape=tensor_shape.TensorShape([3])
        )
        self.assertAllEqual(np.zeros((0, 3)), self.evaluate(ta.stack()))

    @test_util.run_deprecated_v1
    def testGradOfStack(self):
        x = constant_op.constant([[1.0, 2.0], [3.0, 4.0]])
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=2).unstack(x)
        y = ta.stack() * 3.0
        g = gradients_impl.gradients(y, x)[0]
        self.assertAllEqual([[3.0, 3.0], [3.0, 3.0]], self.evaluate(g))

    @test_util.run_deprecated_v1
    def testInWhileLoop(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=5)

        def body(i, ta):
            return i + 1, ta.write(i, math_ops.cast(i, dtypes.float32) * 2.0)

        _, ta = while_loop.while_loop(lambda i, ta: i < 5, body, [0, ta])
        self.assertAllEqual([0.0, 2.0, 4.0, 6.0, 8.0], self.evaluate(ta.stack()))

    @test_util.run_deprecated_v1
    def testCloseOp(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=3)
        self.evaluate(ta.close())

    @test_util.run_deprecated_v1
    def testIdentity(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=1).write(0, 2.0)
        self.assertEqual(2.0, self.evaluate(ta.identity().read(0)))

    @test_util.run_deprecated_v1
    def testConcatWrongRank(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=2, infer_shape=False)
        ta = ta.write(0, 1.0).write(1, 2.0)
        with self.assertRaisesOpError(
            "Concat saw a scalar shape at index 0 but requires at least vectors"
        ):
            self.evaluate(ta.concat())

    @test_util.run_deprecated_v1
    def testSplitWrongLengths(self):
        ta = tensor_array_ops.TensorArray(dtypes.float32, size=2, infer_shape=False)
        with self.assertRaisesOpError("Expected sum of lengths to be equal to values.shape"):
            self.evaluate(ta.split([1.0, 2.0, 3.0], [1, 1]).flow)


class VariableProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testUninitializedRead(self):
        v = variables.Variable(1.0)
        with self.assertRaisesOpError("uninitialized"):
            self.evaluate(v.value())

    @test_util.run_deprecated_v1
    def testAssignAddSub(self):
        v = variables.Variable([1.0, 2.0])
        self.evaluate(v.initializer)
        self.assertAllEqual([2.0, 3.0], self.evaluate(v.assign_add([1.0, 1.0])))
        self.assertAllEqual([0.0, 1.0], self.evaluate(state_ops.assign_sub(v, [2.0, 2.0])))

    @test_util.run_deprecated_v1
    def testValidateShapeFalse(self):
        v = variables.Variable([1.0, 2.0])
        self.evaluate(v.initializer)
        self.evaluate(state_ops.assign(v, [1.0, 2.0, 3.0], validate_shape=False))
        self.assertAllEqual([1.0, 2.0, 3.0], self.evaluate(v))

    @test_util.run_deprecated_v1
    def testAssignWrongShape(self):
        v = variables.Variable([1.0, 2.0])
        with self.assertRaises(ValueError):
            v.assign([1.0, 2.0, 3.0])

    @test_util.run_deprecated_v1
    def testCountUpTo(self):
        v = variables.Variable(0)
        c = v.count_up_to(2)
        self.evaluate(v.initializer)
        self.assertEqual(0, self.evaluate(c))
        self.assertEqual(1, self.evaluate(c))
        with self.assertRaisesOpError("Reached limit of 2"):
            self.evaluate(c)

    @test_util.run_deprecated_v1
    def testInitializedValueDeps(self):
        v = variables.Variable(2.0)
        w = variables.Variable(v.initialized_value() * 3)
        self.evaluate(w.initializer)
        self.assertEqual(6.0, self.evaluate(w))

    @test_util.run_deprecated_v1
    def testReportUninitialized(self):
        v = variables.Variable(1.0, name="vx")
        variables.Variable(1.0, name="wx")
        self.evaluate(v.initializer)
        self.assertAllEqual([b"wx"], self.evaluate(variables.report_uninitialized_variables()))

    @test_util.run_deprecated_v1
    def testIsVariableInitialized(self):
        v = variables.Variable(1.0)
        self.assertFalse(self.evaluate(variables.is_variable_initialized(v)))
        self.evaluate(v.initializer)
        self.assertTrue(self.evaluate(variables.is_variable_initialized(v)))

    @test_util.run_deprecated_v1
    def testVariableProto(self):
        v = variables.Variable([1.0], name="pv")
        p = v.to_proto()
        self.assertEqual("pv:0", p.variable_name)
        w = variables.Variable.from_proto(p)
        self.assertEqual(w.name, "pv:0")

    @test_util.run_deprecated_v1
    def testResourceVariableBasic(self):
        v = resource_variable_ops.ResourceVariable(1.0)
        self.evaluate(v.initializer)
        self.evaluate(v.assign_add(2.0))
        self.assertEqual(3.0, self.evaluate(v.read_value()))
        self.assertEqual(dtypes.resource, v.handle.dtype)

    @test_util.run_deprecated_v1
    def testGetVariableUseResource(self):
        v = variable_scope.get_variable(
            "rv", shape=[2], initializer=lambda *a, **k: [1.0, 2.0], use_resource=True
        )
        self.evaluate(v.initializer)
        self.assertAllEqual([1.0, 2.0], self.evaluate(v))

    @test_util.run_deprecated_v1
    def testResourceScatter(self):
        v = resource_variable_ops.ResourceVariable([1.0, 2.0, 3.0])
        self.evaluate(v.initializer)
        self.evaluate(
            v.scatter_add(
                ops.IndexedSlices(constant_op.constant([5.0]), constant_op.constant([1]))
            )
        )
        self.assertAllEqual([1.0, 7.0, 3.0], self.evaluate(v))
        self.assertAllEqual([3.0, 1.0], self.evaluate(v.sparse_read([2, 0])))

    @test_util.run_deprecated_v1
    def testResourceGradient(self):
        v = resource_variable_ops.ResourceVariable(3.0)
        y = v * v
        g = gradients_impl.gradients(y, v)[0]
        self.evaluate(v.initializer)
        self.assertEqual(6.0, self.evaluate(g))

    @test_util.run_deprecated_v1
    def testResourceReadAfterAssignControlDep(self):
        v = resource_variable_ops.ResourceVariable(1.0)
        a = v.assign(5.0)
        with ops.control_dependencies([a]):
            r = v.read_value()
        self.evaluate(v.initializer)
        self.assertEqual(5.0, self.evaluate(r))


class ControlFlowProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testCondAssign(self):
        v = variables.Variable(1.0)
        p = array_ops.placeholder(dtypes.bool)
        r = cond_lib.cond(p, lambda: state_ops.assign(v, 2.0), lambda: state_ops.assign(v, 3.0))
        self.evaluate(v.initializer)
        with self.cached_session() as s:
            self.assertEqual(3.0, s.run(r, {p: False}))

    @test_util.run_deprecated_v1
    def testWhileUpdateVariable(self):
        v = variables.Variable(0.0)

        def body(i):
            with ops.control_dependencies([state_ops.assign_add(v, 1.0)]):
                return i + 1

        r = while_loop.while_loop(lambda i: i < 5, body, [0])
        self.evaluate(v.initializer)
        self.assertEqual(5, self.evaluate(r))
        self.assertEqual(5.0, self.evaluate(v))

    @test_util.run_deprecated_v1
    def testWhileShapeInvariants(self):
        x = constant_op.constant([1.0])
        r = while_loop.while_loop(
            lambda x: array_ops.size(x) < 4,
            lambda x: array_ops.concat([x, x], 0),
            [x],
            shape_invariants=[tensor_shape.TensorShape([None])],
        )
        self.assertAllEqual([1.0] * 4, self.evaluate(r))
        with self.assertRaises(ValueError):
            while_loop.while_loop(
                lambda x: array_ops.size(x) < 4, lambda x: array_ops.concat([x, x], 0), [x]
            )

    @test_util.run_deprecated_v1
    def testCondIndexedSlices(self):
        values = constant_op.constant([[1.0, 2.0]])
        indices = constant_op.constant([0])
        s = ops.IndexedSlices(values, indices)
        p = constant_op.constant(True)
        r = cond_lib.cond(p, lambda: ops.IndexedSlices(s.values * 2, s.indices), lambda: s)
        self.assertAllEqual([[2.0, 4.0]], self.evaluate(r.values))

    @test_util.run_deprecated_v1
    def testCaseDefault(self):
        x = constant_op.constant(3)
        r = control_flow_ops.case(
            [(math_ops.less(x, 2), lambda: constant_op.constant(1))],
            default=lambda: constant_op.constant(9),
        )
        self.assertEqual(9, self.evaluate(r))

    @test_util.run_deprecated_v1
    def testWhileGradient(self):
        x = constant_op.constant(2.0)
        r = while_loop.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * x), [0, 1.0])[1]
        g = gradients_impl.gradients(r, x)[0]
        self.assertAllClose(12.0, self.evaluate(g))

    @test_util.run_deprecated_v1
    def testGroupAndTuple(self):
        a = variables.Variable(1.0)
        b = variables.Variable(2.0)
        g = control_flow_ops.group(a.initializer, b.initializer)
        self.evaluate(g)
        t = control_flow_ops.tuple([a.value(), b.value()])
        self.assertAllEqual([1.0, 2.0], self.evaluate(t))

    @test_util.run_deprecated_v1
    def testCondGradient(self):
        x = constant_op.constant(3.0)
        p = array_ops.placeholder(dtypes.bool)
        r = cond_lib.cond(p, lambda: x * x, lambda: x * 2.0)
        g = gradients_impl.gradients(r, x)[0]
        with self.cached_session() as s:
            self.assertEqual(6.0, s.run(g, {p: True}))
            self.assertEqual(2.0, s.run(g, {p: False}))

    @test_util.run_deprecated_v1
    def testWhileParallelIterationsMaxIter(self):
        r = while_loop.while_loop(lambda i: i < 100, lambda i: i + 1, [0], maximum_iterations=7)
        self.assertEqual(7, self.evaluate(r))

    @test_util.run_deprecated_v1
    def testFetchWhileBodyTensorRaises(self):
        inner = []

        def body(i):
            y = i * 2
            inner.append(y)
            return i + 1

        while_loop.while_loop(lambda i: i < 3, body, [0])
        with self.assertRaises(ValueError):
            self.evaluate(inner[0])

    @test_util.run_deprecated_v1
    def testSwitchMerge(self):
        data = constant_op.constant([1, 2])
        f, t = control_flow_ops.switch(data, constant_op.constant(True))
        m = control_flow_ops.merge([f, t])
        self.assertAllEqual([1, 2], self.evaluate(m.output))
        self.assertEqual(1, self.evaluate(m.value_index))

    @test_util.run_deprecated_v1
    def testCondNested(self):
        x = constant_op.constant(2)
        r = cond_lib.cond(x > 1, lambda: cond_lib.cond(x > 3, lambda: 10, lambda: 20), lambda: 30)
        self.assertEqual(20, self.evaluate(r))

    @test_util.run_deprecated_v1
    def testWithDependencies(self):
        v = variables.Variable(1.0)
        self.evaluate(v.initializer)
        a = state_ops.assign(v, 4.0)
        out = control_flow_ops.with_dependencies([a], constant_op.constant(2.0))
        self.assertEqual(2.0, self.evaluate(out))
        self.assertEqual(4.0, self.evaluate(v))


if __name__ == "__main__":
    test.main()
