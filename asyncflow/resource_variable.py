"""TF1's resource variables (`tf.compat.v1` with `use_resource=True`,
`resource_variable_ops.ResourceVariable`), in graph mode.

A ResourceVariable is built, as TF builds it, from a VarHandleOp "v" (dtype
`resource`), an AssignVariableOp initializer "v/Assign" and a graph element
"v/Read/ReadVariableOp" (what `sess.run(v)` fetches).  What differs from a ref
variable (`variables.Variable`) is when a use reads the state:
- every use (an operator, a conversion to a Tensor, `value()`, `read_value()`) is a
  ReadVariableOp of its own, built where it is used, so it is ordered by the control
  dependencies around it: a read under `control_dependencies([v.assign(2.0)])` sees 2.0;
- `assign`/`assign_add`/`assign_sub`/`scatter_*` return, as TF's `_lazy_read`, an
  `_UnreadVariable`: the variable as the update left it, named after the update op (its
  `.op`); fetching it or using it reads the variable after that op.
Gradients flow from the reads to the handle (`gradients(y, v)` differentiates with
respect to `v.handle`), and optimizers update the variable through the same kernels as
a ref variable's: the update ops take `_ref()`, a `_ResourceAsRef` view of the handle.
"""

from __future__ import annotations

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow import variables as _variables
from asyncflow.ops import resource_variable_ops as rvo
from asyncflow.variables import Variable, guard_uninitialized_dependencies

__all__ = ["ResourceVariable", "is_resource_variable"]


class ResourceVariable(Variable):
    """A variable whose state is read and written through a resource handle."""

    def _build(self, graph, initial_value, validate_shape, name, dtype, shape):
        base = (name or "Variable").rstrip("/")
        exact = bool(name) and name.endswith("/")
        scope = base if exact else graph.unique_name(base, mark_as_used=False)
        # TF names a resource variable's initial value under "Initializer" whether or
        # not it is given as a function ("v/Initializer/initial_value").
        first_new = len(graph.get_operations())
        with graph.name_scope(scope + "/"), graph.name_scope("Initializer"):
            value = ops.convert_to_tensor(
                initial_value() if callable(initial_value) else initial_value,
                name="initial_value",
                dtype=dtype,
            )
        initializer_ops = graph.get_operations()[first_new:]
        if value.op._control_flow_context is not None:
            raise ValueError(
                f"Initializer for variable {scope}/ is from inside a control-flow construct, "
                "such as a loop or conditional. When creating a variable inside a loop or "
                "conditional, use a lambda as the initializer."
            )
        if shape is not None:
            var_shape = tensor_shape.as_shape(shape)
            if validate_shape and not value.shape.is_compatible_with(var_shape):
                raise ValueError(
                    f"The initial value's shape ({value.shape}) is not compatible with the "
                    f"explicitly supplied `shape` argument ({var_shape})."
                )
        elif validate_shape:
            var_shape = value.shape
        else:
            var_shape = tensor_shape.unknown_shape()
        self._dtype_base = value.dtype.base_dtype
        self._shape_static = var_shape
        self._handle = rvo.var_handle_op(
            self._dtype_base,
            var_shape,
            shared_name=scope,
            name=scope + "/" if exact else base,
            debug_name=scope + "/",
        )
        assert self._handle.op.name == scope, (self._handle.op.name, scope)
        # As TF's: the handle and the ops made for its initial value are colocated with
        # the handle (`_class`); its reads and assigns are not (they follow the handle).
        loc = [f"loc:@{scope}".encode()]
        for op in (*initializer_ops, self._handle.op):
            if "_class" not in op._attrs:
                op._attrs["_class"] = loc
        self._initial_value = value
        with graph.name_scope(scope + "/"):
            with graph.name_scope("IsInitialized"):
                self._is_initialized_op = rvo.var_is_initialized_op(self._handle)
            self._initializer_op = rvo.assign_variable_op(
                self._handle, guard_uninitialized_dependencies(scope, value), name="Assign"
            )
            with graph.name_scope("Read"):
                self._graph_element = rvo.read_variable_op(self._handle, self._dtype_base)
            # What the ref-updating ops (optimizers, Scatter*, CountUpTo) take.
            with graph.colocate_with(self._handle.op):
                self._variable = rvo.resource_as_ref(self._handle, self._dtype_base, name="Ref")
        self._snapshot = self._graph_element

    # -- properties ----------------------------------------------------------------------
    @property
    def handle(self) -> ops.Tensor:
        return self._handle

    @property
    def name(self) -> str:
        return self._handle.name

    @property
    def op(self) -> ops.Operation:
        return self._handle.op

    @property
    def device(self) -> str:
        return self._handle.device

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype_base

    @property
    def shape(self) -> tensor_shape.TensorShape:
        return self._shape_static

    def get_shape(self) -> tensor_shape.TensorShape:
        return self._shape_static

    # -- reading -------------------------------------------------------------------------
    def _read(self, name="ReadVariableOp") -> ops.Tensor:
        return rvo.read_variable_op(self._handle, self._dtype_base, name=name)

    def value(self) -> ops.Tensor:
        """A new read of the variable (TF: each use of a resource variable reads it)."""
        return self._read()

    def read_value(self) -> ops.Tensor:
        """A new read, as TF: an Identity ("Identity") of a ReadVariableOp under "Read"."""
        from asyncflow.ops import array_ops

        with ops.name_scope("Read"):
            value = self._read()
        return array_ops.identity(value)

    def sparse_read(self, indices, name=None) -> ops.Tensor:
        """Rows `indices` of the variable (op ResourceGather: its gradient is sparse)."""
        with ops.name_scope("Gather" if name is None else name):
            return rvo.resource_gather(self._handle, indices, self._dtype_base)

    def gather_nd(self, indices, name=None) -> ops.Tensor:
        """`tf.gather_nd` of the variable (op ResourceGatherNd)."""
        from asyncflow.ops import array_ops

        with ops.name_scope("GatherNd" if name is None else name):
            # As TF: an Identity of the ResourceGatherNd.
            return array_ops.identity(
                rvo.resource_gather_nd(self._handle, indices, self._dtype_base)
            )

    def initialized_value(self) -> ops.Tensor:
        from asyncflow.ops import control_flow_ops

        graph = self.graph
        saved, graph._control_flow_context = graph._control_flow_context, None
        try:
            with graph.as_default(), graph.control_dependencies(None):
                return control_flow_ops.cond(
                    self.is_initialized(), self.read_value, lambda: self.initial_value
                )
        finally:
            graph._control_flow_context = saved

    def is_initialized(self, name=None) -> ops.Tensor:
        return rvo.var_is_initialized_op(self._handle, name=name)

    def eval(self, session=None):
        return self._graph_element.eval(session=session)

    def _as_graph_element(self) -> ops.Tensor:
        return self._graph_element

    def _gradient_source(self) -> ops.Tensor:
        return self._handle

    # -- updating ------------------------------------------------------------------------
    def _after(self, op, read_value):
        return _UnreadVariable(self, op) if read_value else op

    def assign(self, value, use_locking=None, name=None, read_value=True):
        value = ops.convert_to_tensor(value, dtype=self._dtype_base)
        self._shape_static.assert_is_compatible_with(value.shape)
        # As TF 2.x: a variable of a fully known shape checks each value's when run.
        validate = self._shape_static.is_fully_defined()
        op = rvo.assign_variable_op(self._handle, value, validate_shape=validate, name=name)
        return self._after(op, read_value)

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        delta = ops.convert_to_tensor(delta, dtype=self._dtype_base)
        op = rvo.assign_add_variable_op(self._handle, delta, name=name)
        return self._after(op, read_value)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        delta = ops.convert_to_tensor(delta, dtype=self._dtype_base)
        op = rvo.assign_sub_variable_op(self._handle, delta, name=name)
        return self._after(op, read_value)

    def _resource_scatter(self, op_type, indices, updates, name):
        """TF's Resource`op_type` on the handle, built as TF's builders build it (the
        updates converted first, the indices within the op's scope)."""
        updates = ops.convert_to_tensor(updates, dtype=self._dtype_base)
        op = ops.apply_op("Resource" + op_type, [self._handle, indices, updates], name=name)
        return _UnreadVariable(self, op)

    def _scatter(self, builder, sparse_delta, use_locking, name):
        if not (hasattr(sparse_delta, "indices") and hasattr(sparse_delta, "values")):
            raise TypeError(f"sparse_delta is not IndexedSlices: {sparse_delta}")
        return self._resource_scatter(
            builder.op_type, sparse_delta.indices, sparse_delta.values, name
        )

    def batch_scatter_update(self, sparse_delta, use_locking=False, name=None):
        if not (hasattr(sparse_delta, "indices") and hasattr(sparse_delta, "values")):
            raise TypeError(f"sparse_delta is not IndexedSlices: {sparse_delta}")
        return super().batch_scatter_update(sparse_delta, use_locking, name)

    def _scatter_nd(self, builder, indices, updates, name):
        return self._resource_scatter(builder.op_type, indices, updates, name)

    def _strided_slice_assign(self, begin, end, strides, value, name=None, **masks):
        attrs = dict(masks, T=self._dtype_base)
        op = ops.apply_op(
            "ResourceStridedSliceAssign", [self._handle, begin, end, strides, value], attrs,
            name=name,
        )  # fmt: skip
        return self._after(op, True)

    def __repr__(self) -> str:
        return f"<tf.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}>"


class _UnreadVariable(ResourceVariable):
    """What an update of a resource variable returns (TF's `_UnreadVariable`): the same
    variable, seen after the update op `parent_op`.  Its name and `.op` are that op's;
    `sess.run` of it, `value()`, `read_value()` and every use read the variable in a
    ReadVariableOp that runs after the update.  Not a new variable: no collections."""

    def __init__(self, variable: ResourceVariable, parent_op: ops.Operation):
        self.__dict__.update(variable.__dict__)
        self._parent_op = parent_op
        self._graph_element = self._snapshot = self._read()

    @property
    def name(self) -> str:
        return self._parent_op.name

    @property
    def op(self) -> ops.Operation:
        return self._parent_op

    def _read(self, name="ReadVariableOp") -> ops.Tensor:
        with ops.control_dependencies([self._parent_op]):
            return rvo.read_variable_op(self._handle, self._dtype_base, name=name)

    def read_value(self) -> ops.Tensor:
        """A new read after the update (a bare ReadVariableOp, as TF's)."""
        return self._read()


def _operator(name: str):
    def method(self, *args):
        return getattr(self.value(), name)(*args)

    method.__name__ = name
    return method


for _name in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
    "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__",
    "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__", "__abs__", "__invert__",
    "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__lt__", "__le__",
    "__gt__", "__ge__",
):  # fmt: skip
    setattr(ResourceVariable, _name, _operator(_name))


def _to_tensor(v: ResourceVariable, dtype=None, name=None, as_ref=False) -> ops.Tensor:
    if as_ref:
        return v._ref()
    if dtype is not None and not dtypes.as_dtype(dtype).is_compatible_with(v.dtype):
        raise ValueError(
            f"Incompatible type conversion requested to type '{dtypes.as_dtype(dtype).name}' "
            f"for variable of type '{v.dtype.name}'"
        )
    return v.value()


ops.register_tensor_conversion_function(ResourceVariable, _to_tensor)
_variables._RESOURCE_VARIABLE[0] = ResourceVariable  # Variable(use_resource=True)


def is_resource_variable(var) -> bool:
    """Whether `var` is a resource variable (TF's `resource_variable_ops.is_resource_variable`)."""
    return isinstance(var, ResourceVariable)
