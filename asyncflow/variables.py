"""TF1 variables (`tf.compat.v1.Variable`, a RefVariable) and the variable collections.

A Variable is three ops under one name scope, as TF1 builds them:
  "v"         VariableV2, whose ref output the update ops take;
  "v/Assign"  the initializer, assigning the initial value;
  "v/read"    an Identity snapshot, the tensor every ordinary use reads.
Its state lives in a resource container at run time (see ops/state_ops.py), so two
sessions on one graph hold independent values.

Invariant: a Variable converts to its snapshot wherever a Tensor is expected, and to
its ref tensor only for ops declaring a `Ref(T)` input (apply_op asks for `_ref()`).
"""

from __future__ import annotations

import contextlib
import enum
import functools
from collections.abc import Callable

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.graph import GraphKeys
from asyncflow.ops import (
    array_ops,
    control_flow_ops,
    manip_ops,
    math_ops,
    partition_ops,
    scatter_nd_ops,
    slicing_ops,
    state_ops,
)
from asyncflow.ops.state_ops import is_variable_initialized
from asyncflow.partitioned_variables import SaveSliceInfo

__all__ = [
    "Variable",
    "VariableV1",
    "variable_creator_scope",
    "VariableSynchronization",
    "VariableAggregation",
    "VariableAggregationV2",
    "global_variables",
    "all_variables",
    "trainable_variables",
    "local_variables",
    "model_variables",
    "moving_average_variables",
    "global_variables_initializer",
    "initialize_all_variables",
    "local_variables_initializer",
    "initialize_local_variables",
    "variables_initializer",
    "initialize_variables",
    "report_uninitialized_variables",
    "is_variable_initialized",
    "assert_variables_initialized",
]


class VariableSynchronization(enum.Enum):
    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


class _AggregationEq:
    """TF's v1 and v2 aggregation enums compare (and hash) equal member by member."""

    def __eq__(self, other):
        if isinstance(other, (VariableAggregation, VariableAggregationV2)):
            return self.value == other.value
        return NotImplemented

    def __hash__(self):
        return hash(self.value)


class VariableAggregationV2(_AggregationEq, enum.Enum):
    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3


class VariableAggregation(_AggregationEq, enum.Enum):
    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3
    ONLY_FIRST_TOWER = 3


_DEFAULT_USE_RESOURCE = [False]  # (tf.compat.v1.enable_resource_variables sets it)


def set_default_use_resource(value: bool) -> None:
    """Whether Variable(...) without use_resource makes a ResourceVariable."""
    _DEFAULT_USE_RESOURCE[0] = bool(value)


def default_use_resource() -> bool:
    return _DEFAULT_USE_RESOURCE[0]


_RESOURCE_VARIABLE: list = [None]  # the ResourceVariable class (asyncflow.resource_variable)
_VARIABLE_FROM_DEF: list = [None]  # asyncflow.meta_graph.variable_from_def, set there


# TF1's Variable arguments, in the order (and with the defaults) a variable creator
# (`variable_creator_scope`) receives them as keywords.
_CREATOR_ARGS = (
    ("initial_value", None), ("trainable", None), ("collections", None),
    ("validate_shape", True), ("caching_device", None), ("name", None),
    ("variable_def", None), ("dtype", None), ("expected_shape", None),
    ("import_scope", None), ("constraint", None), ("use_resource", None),
    ("synchronization", None), ("aggregation", None), ("shape", None),
    ("experimental_enable_variable_lifting", None),
)  # fmt: skip
_CREATOR_STACK = "variable_creator_stack"  # (a tuple, in the graph's `_attached`)


def creator_stack(graph) -> tuple:
    """The variable creators in effect in `graph`, outermost first; a function's graph
    (tf_function.FuncGraph) sees its outer graph's."""
    stack = graph._attached.get(_CREATOR_STACK)
    if stack is None:
        outer = getattr(graph, "outer_graph", None)
        return creator_stack(outer) if outer is not None else ()
    return stack


def set_creator_stack(graph, stack: tuple) -> None:
    graph._attached[_CREATOR_STACK] = stack


@contextlib.contextmanager
def variable_creator_scope(variable_creator):
    """`tf.variable_creator_scope`: `variable_creator(next_creator, **kwargs)` makes every
    `Variable(...)` (and `get_variable`) of the default graph built inside; it may change
    the keyword arguments and call `next_creator(**kwargs)`, or return a variable of its
    own.  Nested scopes run innermost first."""
    graph = ops.get_default_graph()
    saved = graph._attached.get(_CREATOR_STACK)
    set_creator_stack(graph, (*creator_stack(graph), variable_creator))
    try:
        yield
    finally:
        if saved is None:
            graph._attached.pop(_CREATOR_STACK, None)
        else:
            set_creator_stack(graph, saved)


_DATASET_FUNCTION = "dataset_function"  # (True in the graph's `_attached` while tracing one)


@contextlib.contextmanager
def dataset_function_scope(graph, inside: bool = True):
    """While a dataset function is traced into `graph` (data/dataset.py `_Traced`), or,
    with `inside` False, a variable is lifted out of one (var_scope's `get_variable`
    with AUTO_REUSE): a `Variable(...)` made inside is TF's ValueError, which
    tf.data's tf.function raises as it traces the function again."""
    saved = graph._attached.get(_DATASET_FUNCTION, False)
    graph._attached[_DATASET_FUNCTION] = inside
    try:
        yield
    finally:
        graph._attached[_DATASET_FUNCTION] = saved


def in_dataset_function(graph) -> bool:
    """Whether a dataset function is being traced into `graph` (`dataset_function_scope`)."""
    return graph._attached.get(_DATASET_FUNCTION, False)


class _VariableMeta(type):
    """`Variable(...)` (and so `get_variable`) goes through the variable creators of
    `variable_creator_scope`, innermost first, as TF's VariableMetaclass; subclasses
    called directly (ResourceVariable(...)) do not.  Inside a dataset function
    (`dataset_function_scope`) it is TF's ValueError."""

    def __call__(cls, *args, **kwargs):
        if cls is Variable and in_dataset_function(ops.get_default_graph()):
            raise ValueError(
                "tf.function only supports singleton tf.Variables created on the first "
                "call. Make sure the tf.Variable is only created once or created outside "
                "tf.function. See https://www.tensorflow.org/guide/function#creating_tfvariables"
                " for more information."
            )
        stack = creator_stack(ops.get_default_graph()) if cls is Variable else ()
        if not stack:
            return super().__call__(*args, **kwargs)
        if len(args) > len(_CREATOR_ARGS):
            raise TypeError(f"Variable() takes at most {len(_CREATOR_ARGS)} arguments")
        full = dict(_CREATOR_ARGS)
        full["synchronization"] = VariableSynchronization.AUTO
        full["aggregation"] = VariableAggregation.NONE
        for (key, _), value in zip(_CREATOR_ARGS, args):
            full[key] = value
        unknown = set(kwargs) - set(full)
        if unknown:
            key = sorted(unknown)[0]
            raise TypeError(f"Variable() got an unexpected keyword argument {key!r}")
        full.update(kwargs)

        def default_creator(**kw):
            kw.pop("experimental_enable_variable_lifting", None)
            return type.__call__(Variable, **kw)

        def chain(creators):
            if not creators:
                return default_creator
            inner_next = chain(creators[:-1])
            return lambda **kw: creators[-1](inner_next, **kw)

        return chain(stack)(**full)


class Variable(metaclass=_VariableMeta):
    """A TF1 variable: state that persists across `Session.run` calls.

    Raises (at construction):
      ValueError: no initial value, an initial value without a fully defined shape when
        validate_shape, a bad `collections` argument, or a non-callable constraint.
    Raises (when read before its initializer ran):
      FailedPreconditionError: "Attempting to use uninitialized value v".
    """

    __array_priority__ = 100
    SaveSliceInfo = SaveSliceInfo  # where a partitioned variable's slice sits (TF's)

    def __new__(cls, *args, use_resource=None, **kwargs):
        # TF1's VariableMetaclass: Variable(use_resource=True) is a ResourceVariable.
        if use_resource is None:  # (enable_resource_variables switches the default)
            use_resource = _DEFAULT_USE_RESOURCE[0]
        if cls is Variable and use_resource:
            # Set by asyncflow.resource_variable (which subclasses this), when imported.
            return super().__new__(_RESOURCE_VARIABLE[0])
        return super().__new__(cls)

    def __init__(
        self,
        initial_value=None,
        trainable=None,
        collections=None,
        validate_shape=True,
        caching_device=None,
        name=None,
        variable_def=None,
        dtype=None,
        expected_shape=None,
        import_scope=None,
        constraint=None,
        use_resource=None,
        synchronization=VariableSynchronization.AUTO,
        aggregation=VariableAggregation.NONE,
        shape=None,
    ):
        if variable_def is not None:
            if initial_value is not None:
                raise ValueError("variable_def and initial_value are mutually exclusive.")
            self._init_from_proto(variable_def, import_scope)
            return
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        if constraint is not None and not callable(constraint):
            raise ValueError("The `constraint` argument must be a callable.")
        if trainable is None:  # TF 2.21: an ON_READ variable is not trainable by default
            trainable = synchronization != VariableSynchronization.ON_READ
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        if not isinstance(collections, (list, tuple, set)):
            raise ValueError(
                "collections argument to Variable constructor must be a list, tuple, or "
                f"set. Got {collections} of type {type(collections)}"
            )
        collections = list(collections)
        if trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections.append(GraphKeys.TRAINABLE_VARIABLES)
        self._trainable = trainable
        self._constraint = constraint
        self._synchronization = synchronization
        self._aggregation = aggregation
        self._caching_device = caching_device
        self._save_slice_info = None
        graph = (
            ops.get_default_graph()
            if callable(initial_value)
            else (ops._graph_from_values([initial_value]))
        )
        # TF's init_scope: no control dependencies and no cond/while context, so a
        # variable made in a branch or loop body is initialised outside it.
        saved_context, graph._control_flow_context = graph._control_flow_context, None
        try:
            with graph.as_default(), graph.control_dependencies(None):
                self._build(graph, initial_value, validate_shape, name, dtype, shape)
        finally:
            graph._control_flow_context = saved_context
        graph.add_to_collections(collections, self)

    def _build(self, graph, initial_value, validate_shape, name, dtype, shape):
        base = (name or "Variable").rstrip("/")
        # TF names the VariableV2 op after its name scope ("v", with "v/Assign" and
        # "v/read" inside).  apply_op always uniquifies, so take the name the op will
        # get, build the initial value inside that scope, then create the op.  A name
        # ending in "/" (get_variable("") in a scope: optimizer slots) is used exactly.
        exact = bool(name) and name.endswith("/")
        scope = base if exact else graph.unique_name(base, mark_as_used=False)
        with graph.name_scope(scope + "/"):
            if callable(initial_value):
                # TF builds the initializer function's ops with no device, colocated
                # with the variable (they are placed where it is).
                first = len(graph._ops)
                with graph.name_scope("Initializer"), graph.device(None):
                    value = ops.convert_to_tensor(
                        initial_value(), name="initial_value", dtype=dtype
                    )
                for op in graph._ops[first:]:
                    op._attrs["_class"] = [f"loc:@{scope}".encode()]
            else:
                value = ops.convert_to_tensor(initial_value, name="initial_value", dtype=dtype)
        if value.op._control_flow_context is not None:
            raise ValueError(
                f"Initializer for variable {scope}/ is from inside a control-flow construct, "
                "such as a loop or conditional. When creating a variable inside a loop or "
                "conditional, use a lambda as the initializer."
            )
        value_shape = value.shape
        if shape is not None:
            var_shape = tensor_shape.as_shape(shape)
            if validate_shape and not value_shape.is_compatible_with(var_shape):
                raise ValueError(
                    f"The initial value's shape ({value_shape}) is not compatible with the "
                    f"explicitly supplied `shape` argument ({var_shape})."
                )
        elif validate_shape:
            var_shape = value_shape
        else:
            var_shape = tensor_shape.unknown_shape()
        if validate_shape and not var_shape.is_fully_defined():
            raise ValueError(f"initial_value must have a shape specified: {value}")
        self._variable = state_ops.variable_op_v2(
            var_shape, value.dtype.base_dtype, name=scope + "/" if exact else base
        )
        assert self._variable.op.name == scope, (self._variable.op.name, scope)
        self._initial_value = value
        with graph.name_scope(scope + "/"):
            with graph.colocate_with(self._variable.op):
                self._initializer_op = state_ops.assign(
                    self._variable,
                    guard_uninitialized_dependencies(scope, value),
                    validate_shape=validate_shape,
                    name="Assign",
                ).op
            if self._caching_device is not None:
                with graph.device(self._caching_device):
                    self._snapshot = array_ops.identity(self._variable, name="read")
            else:
                with graph.colocate_with(self._variable.op):
                    self._snapshot = array_ops.identity(self._variable, name="read")

    # -- properties ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._variable.name

    @property
    def op(self) -> ops.Operation:
        return self._variable.op

    @property
    def graph(self) -> ops.Graph:
        return self._variable.graph

    @property
    def device(self) -> str:
        return self._variable.device

    @property
    def dtype(self) -> dtypes.DType:
        return self._variable.dtype

    @property
    def shape(self) -> tensor_shape.TensorShape:
        return self._variable.shape

    def get_shape(self) -> tensor_shape.TensorShape:
        return self._variable.shape

    @property
    def initializer(self) -> ops.Operation:
        return self._initializer_op

    @property
    def initial_value(self) -> ops.Tensor:
        return self._initial_value

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def constraint(self):
        return self._constraint

    @property
    def synchronization(self):
        return self._synchronization

    @property
    def aggregation(self):
        return self._aggregation

    @property
    def _shared_name(self) -> str:
        """The variable's name without the output index (TF's RefVariable)."""
        return self.name.split(":")[0]

    @property
    def _distribute_strategy(self):
        return None  # asyncflow has no distribution strategies

    # -- VariableDef protos (to_proto/from_proto: asyncflow.meta_graph attaches them) --
    def _init_from_proto(self, variable_def, import_scope) -> None:
        # asyncflow.meta_graph (a higher layer) sets the builder when imported.
        built = _VARIABLE_FROM_DEF[0](variable_def, import_scope=import_scope)
        self.__dict__.update(built.__dict__)

    # -- reading -------------------------------------------------------------------------
    def value(self) -> ops.Tensor:
        """The snapshot tensor ("v/read")."""
        return self._snapshot

    def read_value(self) -> ops.Tensor:
        """A new Identity reading the variable."""
        return array_ops.identity(self._variable, name="read")

    def initialized_value(self) -> ops.Tensor:
        """The variable's value once initialised, else its initial value (TF1 semantics).

        For `Variable(other.initialized_value())`: both initializers may run in one
        step in any order and the new variable still gets `other`'s initial value.
        """
        graph = self.graph
        # TF1's own graph (so a MetaGraph of ours loads in TF): a cond on the flag.
        with graph.as_default(), graph.control_dependencies(None):
            return control_flow_ops.cond(
                is_variable_initialized(self), self.read_value, lambda: self._initial_value
            )

    def _ref(self) -> ops.Tensor:
        return self._variable

    def _gradient_source(self) -> ops.Tensor:
        """What `gradients(y, v)` differentiates with respect to: the ref tensor here,
        the handle of a resource variable."""
        return self._variable

    def _as_graph_element(self) -> ops.Tensor:
        return self._snapshot

    def eval(self, session=None):
        """The variable's current value, computed in `session` (default: the default one)."""
        return self._snapshot.eval(session=session)

    def load(self, value, session=None) -> None:
        """Assign `value` by feeding the initializer (no new ops)."""
        self._initializer_op.run(
            feed_dict={self._initializer_op.inputs[1]: value}, session=session
        )

    # -- updating ------------------------------------------------------------------------
    def assign(self, value, use_locking=False, name=None, read_value=True):
        t = state_ops.assign(self._variable, value, use_locking=use_locking, name=name)
        return t if read_value else t.op

    def assign_add(self, delta, use_locking=False, name=None, read_value=True):
        t = state_ops.assign_add(self._variable, delta, use_locking=use_locking, name=name)
        return t if read_value else t.op

    def assign_sub(self, delta, use_locking=False, name=None, read_value=True):
        t = state_ops.assign_sub(self._variable, delta, use_locking=use_locking, name=name)
        return t if read_value else t.op

    def _scatter(self, builder, sparse_delta, use_locking, name):
        if not (hasattr(sparse_delta, "indices") and hasattr(sparse_delta, "values")):
            raise TypeError(f"sparse_delta is not IndexedSlices: {sparse_delta}")
        return builder(
            self._variable,
            sparse_delta.indices,
            sparse_delta.values,
            use_locking=use_locking,
            name=name,
        )

    def scatter_update(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(state_ops.scatter_update, sparse_delta, use_locking, name)

    def scatter_add(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(state_ops.scatter_add, sparse_delta, use_locking, name)

    def scatter_sub(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(state_ops.scatter_sub, sparse_delta, use_locking, name)

    def scatter_mul(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(state_ops.scatter_mul, sparse_delta, use_locking, name)

    def scatter_div(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(state_ops.scatter_div, sparse_delta, use_locking, name)

    def scatter_min(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(state_ops.scatter_min, sparse_delta, use_locking, name)

    def scatter_max(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(state_ops.scatter_max, sparse_delta, use_locking, name)

    def batch_scatter_update(self, sparse_delta, use_locking=False, name=None):
        """`tf.batch_scatter_update` of this variable with an IndexedSlices (TF1's
        RefVariable reads `.indices` unchecked: anything else is an AttributeError)."""
        return scatter_nd_ops.batch_scatter_update(
            self, sparse_delta.indices, sparse_delta.values, use_locking=use_locking, name=name
        )

    # TF1's variables write N-d scatters with use_locking=True.
    def scatter_nd_update(self, indices, updates, name=None):
        return self._scatter_nd(scatter_nd_ops.scatter_nd_update, indices, updates, name)

    def scatter_nd_add(self, indices, updates, name=None):
        return self._scatter_nd(scatter_nd_ops.scatter_nd_add, indices, updates, name)

    def scatter_nd_sub(self, indices, updates, name=None):
        return self._scatter_nd(scatter_nd_ops.scatter_nd_sub, indices, updates, name)

    def _scatter_nd(self, builder, indices, updates, name):
        return builder(self._variable, indices, updates, use_locking=True, name=name)

    # TF1's RefVariable has these names but no implementation: calling one raises a bare
    # AttributeError (ResourceVariable implements them).
    def sparse_read(self, indices, name=None):
        raise AttributeError

    def gather_nd(self, indices, name=None):
        raise AttributeError

    def __getitem__(self, slice_spec):
        """The value's slice, with TF1's `assign(value, name=None)` writing that slice
        of the variable (StridedSliceAssign)."""
        return slicing_ops.slice_of_variable(self, slice_spec)

    def _strided_slice_assign(self, begin, end, strides, value, name=None, **masks):
        return state_ops.strided_slice_assign(
            self._variable, begin, end, strides, value, name=name, **masks
        )

    def count_up_to(self, limit):
        """Increments the variable until it reaches `limit` (op CountUpTo); the value
        before the increment.

        Raises (when run): OutOfRangeError once the variable holds `limit`.
        """
        return state_ops.count_up_to(self._variable, limit)

    # TF's `is_tensor(v)` is true for variables.
    is_tensor_like = True

    # -- misc ------------------------------------------------------------------------------
    def _get_save_slice_info(self):
        return self._save_slice_info

    def _set_save_slice_info(self, info) -> None:
        self._save_slice_info = info

    def __repr__(self) -> str:
        return f"<tf.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other) -> bool:  # TF1: identity
        return self is other

    def __iter__(self):
        raise errors.OperatorNotAllowedInGraphError(
            "Iterating over a symbolic `tf.Tensor` (a Variable's value) is not allowed in "
            "Graph mode: index it or fetch its value with Session.run instead."
        )


# Operators go to the snapshot, as TF1's `Variable._OverloadAllOperators` does.
_OPERATORS = (
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__truediv__",
    "__rtruediv__",
    "__floordiv__",
    "__rfloordiv__",
    "__mod__",
    "__rmod__",
    "__pow__",
    "__rpow__",
    "__matmul__",
    "__rmatmul__",
    "__neg__",
    "__abs__",
    "__invert__",
    "__and__",
    "__rand__",
    "__or__",
    "__ror__",
    "__xor__",
    "__rxor__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
)


# -- initial values that read other variables --------------------------------------------

# Ops the guard leaves as they are: the initialised-flag reads, and resource reads (TF1
# guards only ref variables; a ReadVariableOp of an uninitialised one fails as TF's).
_GUARD_KEEP = frozenset({"IsVariableInitialized", "VarIsInitializedOp", "ReadVariableOp", "If"})


def guard_uninitialized_dependencies(scope: str, value: ops.Tensor) -> ops.Tensor:
    """`value` rebuilt so each ref variable it reads is read through that variable's
    `initialized_value()` (TF1's `_try_guard_against_uninitialized_dependencies`).

    So `Variable(v + 1.)` initialises from v's initial value while v is uninitialised,
    and one `global_variables_initializer()` works whatever order it runs the
    initializers in.  Ops on such a path are copied as "<op>_<scope>"; the rest of the
    graph is shared.  A value inside a loop or cond, or on a cycle, is left as it is.
    """
    graph = value.graph
    cache: dict = {}  # op -> its replacement op (itself when nothing it reads changed)
    stack = [(value.op, False)]
    on_path: set = set()
    while stack:  # iterative post-order: initial values may hang off long chains
        op, expanded = stack.pop()
        if op in cache:
            continue
        if not expanded:
            if op.type in _GUARD_KEEP or op._control_flow_context is not None:
                cache[op] = op
                continue
            if op.type in ("Variable", "VariableV2"):
                cache[op] = _initialized_value_op(op)
                continue
            if op in on_path:
                return value  # a cycle: TF leaves such an initial value unguarded
            on_path.add(op)
            stack.append((op, True))
            stack.extend((t.op, False) for t in op.inputs if t.op not in cache)
            continue
        on_path.discard(op)
        new_inputs = [cache[t.op].outputs[t.value_index] for t in op.inputs]
        if all(a is b for a, b in zip(new_inputs, op.inputs)):
            cache[op] = op
        else:
            cache[op] = _copy_op(graph, op, new_inputs, f"{op.name}_{scope}/")
    return cache[value.op].outputs[value.value_index]


def _initialized_value_op(variable_op: ops.Operation) -> ops.Operation:
    names = (variable_op.name, variable_op.name + ":0")
    for key in (GraphKeys.GLOBAL_VARIABLES, GraphKeys.LOCAL_VARIABLES):
        for var in variable_op.graph.get_collection(key):
            if getattr(var, "name", None) in names and hasattr(var, "initialized_value"):
                return var.initialized_value().op
    return variable_op


def _copy_op(graph: ops.Graph, op: ops.Operation, inputs: list, name: str) -> ops.Operation:
    attrs = dict(op._attrs)
    out_dtypes, refs = ops._output_dtypes(op.op_def, attrs)
    with graph.as_default(), graph.control_dependencies(None):
        # An exact name, as TF's ("vv/read_ww/" names the op "vv/read_ww").
        name = ops._claim_op_name(graph, name, op.type)
        new = graph._create_op(op.op_def, name, inputs, attrs, out_dtypes, refs, [])
        if op.op_def.shape_fn is not None:
            ops._set_output_shapes(graph, new, op.op_def)
    return new


def _delegate(name: str) -> Callable:
    # TF wraps Tensor's operator (functools.wraps): same name, module, doc.
    @functools.wraps(getattr(ops.Tensor, name))
    def method(self, *args):
        return getattr(self._snapshot, name)(*args)

    return method


for _name in _OPERATORS:
    setattr(Variable, _name, _delegate(_name))

VariableV1 = Variable


def _to_tensor(v: Variable, dtype=None, name=None, as_ref=False) -> ops.Tensor:
    if as_ref:
        return v._ref()
    graph = ops.get_default_graph()
    if graph is v.graph and graph._current_control_inputs():
        # TF1's v/read aliases the variable's buffer, so a use under
        # control_dependencies([v.assign_add(1)]) sees the update.  Our v/read is a
        # snapshot taken outside those dependencies (DESIGN.md "State"): read afresh
        # inside them instead.
        with graph.colocate_with(v.op):
            return array_ops.identity(v._variable, name="read")
    return v.value()


ops.register_tensor_conversion_function(Variable, _to_tensor)


# -- collections ------------------------------------------------------------------------


def global_variables(scope=None) -> list:
    """Variables in GLOBAL_VARIABLES (optionally whose name matches regex `scope`)."""
    return ops.get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


all_variables = global_variables


def trainable_variables(scope=None) -> list:
    return ops.get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope=None) -> list:
    return ops.get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope=None) -> list:
    return ops.get_collection(GraphKeys.MODEL_VARIABLES, scope)


def moving_average_variables(scope=None) -> list:
    return ops.get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def variables_initializer(var_list, name="init") -> ops.Operation:
    """One op running the initializers of `var_list` (a NoOp when it is empty)."""
    if var_list:
        return control_flow_ops.group(*[v.initializer for v in var_list], name=name)
    return control_flow_ops.no_op(name=name)


initialize_variables = variables_initializer


def global_variables_initializer() -> ops.Operation:
    """The op ("init") initialising every global variable."""
    return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer


def local_variables_initializer() -> ops.Operation:
    """The op ("init") initialising every local variable."""
    return variables_initializer(local_variables())


initialize_local_variables = local_variables_initializer


def report_uninitialized_variables(var_list=None, name="report_uninitialized_variables"):
    """A 1-D string tensor: the op names of the uninitialised variables of `var_list`.

    `var_list` defaults to global_variables() + local_variables().  Built as TF1 builds
    it (the flags stacked, negated, masking a constant of the names), so the graph --
    a MonitoredTrainingSession's ready op included -- loads in TF.
    """
    if var_list is None:
        var_list = global_variables() + local_variables()
    var_list = list(var_list)
    with ops.name_scope(name):
        if not var_list:
            return array_ops.constant([], dtype=dtypes.string)
        flags = []
        for v in var_list:
            with ops.colocate_with(v.op):
                flags.append(is_variable_initialized(v))
        mask = math_ops.logical_not(manip_ops.stack(flags))
        names = array_ops.constant([v.op.name for v in var_list])
        return partition_ops.boolean_mask(names, mask)


def assert_variables_initialized(var_list=None):
    """A tensor whose evaluation fails unless every variable of `var_list` is initialised.

    Raises (when run):
      FailedPreconditionError: "Attempting to use uninitialized value <name>".
    """
    if var_list is None:
        var_list = global_variables() + local_variables()
    if not var_list:
        return None
    # TF1's graph: the rank of each variable, which reading an uninitialised one fails.
    with ops.name_scope("assert_variables_initialized"):
        ranks = []
        for v in var_list:
            with ops.colocate_with(v.op):
                ranks.append(ops.apply_op("Rank", [v.value()], {}).outputs[0])
        return ranks[0] if len(ranks) == 1 else manip_ops.stack(ranks)
