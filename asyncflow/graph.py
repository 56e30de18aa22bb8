"""The dataflow graph: Graph, Operation, Tensor, and building ops from OpDefs.

No asyncio here: a graph is plain data that a Session compiles into plans.

Invariants:
- An Operation's inputs, dtypes and attrs are fixed at creation; only control inputs
  may be added later (which bumps `Graph._version` so cached plans are rebuilt).
- Names are unique in a graph; `unique_name` hands out "x", "x_1", ... as TF does.
  `apply_op` takes an op's name before converting its inputs, and converts them in
  its scope named by argument ("Add/y"), as TF's op_def_library.
- Every Operation remembers the user's file:line that created it (`op.traceback`),
  which runtime errors quote.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from asyncflow import device_spec, dtypes, errors, tensor_shape
from asyncflow.registry import REQUIRED, TypeConstraint, get_op_def

__all__ = [
    "Graph",
    "Operation",
    "Tensor",
    "GraphKeys",
    "get_default_graph",
    "reset_default_graph",
    "convert_to_tensor",
    "register_tensor_conversion_function",
    "apply_op",
    "name_scope",
    "control_dependencies",
    "device",
    "colocate_with",
    "add_to_collection",
    "get_collection",
    "get_collection_ref",
    "constant_value",
    "register_constant_folder",
]

_PACKAGE_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (
        __file__,
        os.path.join(os.path.dirname(__file__), "..", "ops", "x"),
        os.path.join(os.path.dirname(__file__), "..", "devices", "x"),
    )
)
_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep


def _user_location() -> str:
    """file:line of the innermost frame outside asyncflow (the user's line)."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PACKAGE_DIRS) and not fn.startswith(_STDLIB_DIR):
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


class GraphKeys:
    GLOBAL_VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    METRIC_VARIABLES = "metric_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    TABLE_INITIALIZERS = "table_initializer"
    ASSET_FILEPATHS = "asset_filepaths"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    CONCATENATED_VARIABLES = "concatenated_variables"
    SAVERS = "savers"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    SAVEABLE_OBJECTS = "saveable_objects"
    RESOURCES = "resources"
    LOCAL_RESOURCES = "local_resources"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARY_OP = "summary_op"
    GLOBAL_STEP = "global_step"
    EVAL_STEP = "eval_step"
    TRAIN_OP = "train_op"
    COND_CONTEXT = "cond_context"
    WHILE_CONTEXT = "while_context"
    VARIABLES = GLOBAL_VARIABLES


# -- Tensor ----------------------------------------------------------------------------

# Operator overloads are filled in by ops modules (math_ops registers "add", ...), so the
# graph never imports op families.
_OVERLOADS: dict[str, Callable] = {}


def register_overload(name: str, fn: Callable) -> None:
    _OVERLOADS[name] = fn


# The `assign` of each tensor that slices a variable (set by its `__getitem__`).
_SLICE_ASSIGN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# tensor -> its Keras mask (`t._keras_mask`, set by Keras layers; the class has slots)
_KERAS_MASKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# tensor -> the logits a Keras softmax/sigmoid activation made it from (`t._keras_logits`)
_KERAS_LOGITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def set_slice_assign(tensor: Tensor, assign: Callable) -> None:
    """Give `tensor` (a variable's slice) its `assign` method."""
    _SLICE_ASSIGN[tensor] = assign


def _overload(name: str) -> Callable:
    try:
        return _OVERLOADS[name]
    except KeyError:
        raise NotImplementedError(f"operator {name} needs asyncflow.ops loaded") from None


class Tensor:
    """A symbolic handle to one output of an Operation."""

    __array_priority__ = 100
    __slots__ = ("_op", "_value_index", "_dtype", "_shape", "_consumers", "_is_ref", "__weakref__")

    def __init__(self, op: Operation, value_index: int, dtype: dtypes.DType, is_ref=False):
        self._op = op
        self._value_index = value_index
        self._dtype = dtype
        self._shape = tensor_shape.unknown_shape()
        self._consumers: list[Operation] = []
        self._is_ref = is_ref

    def __getattr__(self, name):
        # Only for names the class does not have: a slice of a variable (`v[1:3]`)
        # has TF1's `assign(value, name=None)` (StridedSliceAssign), other tensors not.
        if name == "assign":
            assign = _SLICE_ASSIGN.get(self)
            if assign is not None:
                return assign
        raise AttributeError(f"'Tensor' object has no attribute '{name}'")

    @property
    def op(self) -> Operation:
        return self._op

    @property
    def _keras_mask(self):
        return _KERAS_MASKS.get(self)

    @_keras_mask.setter
    def _keras_mask(self, mask) -> None:
        if mask is None:
            _KERAS_MASKS.pop(self, None)
        else:
            _KERAS_MASKS[self] = mask

    @property
    def _keras_logits(self):
        return _KERAS_LOGITS.get(self)

    @_keras_logits.setter
    def _keras_logits(self, logits) -> None:
        _KERAS_LOGITS[self] = logits

    @property
    def graph(self) -> Graph:
        return self._op._graph

    @property
    def dtype(self) -> dtypes.DType:
        """The element type; a ref output (a variable's) reports TF1's `float32_ref`."""
        return self._dtype._as_ref if self._is_ref else self._dtype

    @property
    def name(self) -> str:
        return f"{self._op._name}:{self._value_index}"

    @property
    def value_index(self) -> int:
        return self._value_index

    @property
    def device(self) -> str:
        return self._op.device

    @property
    def shape(self) -> tensor_shape.TensorShape:
        return self._shape

    def get_shape(self) -> tensor_shape.TensorShape:
        return self._shape

    def set_shape(self, shape) -> None:
        """Refine the static shape; ValueError when incompatible (as TF)."""
        self._shape = self._shape.merge_with(tensor_shape.as_shape(shape))

    def consumers(self) -> list[Operation]:
        return list(self._consumers)

    def eval(self, feed_dict=None, session=None):
        return _eval_with_default(self, feed_dict, session)

    def __repr__(self) -> str:
        return f"<tf.Tensor '{self.name}' shape={self._shape} dtype={self._dtype.name}>"

    def __str__(self) -> str:  # TF's: print(t) shows Tensor("x:0", shape=(?, 3), dtype=float32)
        shape = f", shape={self._shape}" if self._shape.ndims is not None else ""
        device = f", device={self.device}" if self.device else ""
        return f'Tensor("{self.name}"{shape}, dtype={self._dtype.name}{device})'

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other) -> bool:  # TF1: identity, comparisons go through functions
        return self is other

    def __bool__(self):
        raise TypeError(
            "Using a `tf.Tensor` as a Python `bool` is not allowed. Use `if t is not None:` "
            "instead of `if t:` or use TensorFlow ops such as tf.cond to execute subgraphs "
            "conditioned on the value of a tensor."
        )

    def __iter__(self) -> Iterator[Tensor]:
        # TF1 (and TF2's graph mode): a graph tensor is never iterable, whatever its
        # shape; `a, b = t` fails at build time (tf.unstack splits a tensor).
        raise errors.OperatorNotAllowedInGraphError(
            "Tensor objects are only iterable when eager execution is enabled. To iterate "
            "over this tensor use tf.map_fn."
        )

    def __array__(self, dtype=None, copy=None):
        # TF1: NumPy may not take a graph tensor for a value (it would make an object
        # array holding the Tensor, and compute with that).
        raise NotImplementedError(
            f"Cannot convert a symbolic Tensor ({self.name}) to a numpy array."
        )

    def __len__(self):
        raise TypeError(
            f"len is not well defined for symbolic Tensors. ({self.name}) Please call "
            "`x.shape` rather than `len(x)` for shape information."
        )

    def __getitem__(self, key):
        return _overload("getitem")(self, key)

    def __add__(self, y):
        return _overload("add")(self, y)

    def __radd__(self, x):
        return _overload("add")(x, self)

    def __sub__(self, y):
        return _overload("subtract")(self, y)

    def __rsub__(self, x):
        return _overload("subtract")(x, self)

    def __mul__(self, y):
        return _overload("multiply")(self, y)

    def __rmul__(self, x):
        return _overload("multiply")(x, self)

    def __truediv__(self, y):
        return _overload("truediv")(self, y)

    def __rtruediv__(self, x):
        return _overload("truediv")(x, self)

    def __floordiv__(self, y):
        return _overload("floordiv")(self, y)

    def __rfloordiv__(self, x):
        return _overload("floordiv")(x, self)

    def __mod__(self, y):
        return _overload("floormod")(self, y)

    def __rmod__(self, x):
        return _overload("floormod")(x, self)

    def __pow__(self, y):
        return _overload("pow")(self, y)

    def __rpow__(self, x):
        return _overload("pow")(x, self)

    def __matmul__(self, y):
        return _overload("matmul")(self, y)

    def __rmatmul__(self, x):
        return _overload("matmul")(x, self)

    def __neg__(self):
        return _overload("negative")(self)

    def __abs__(self):
        return _overload("abs")(self)

    def __invert__(self):
        return _overload("logical_not")(self)

    def __and__(self, y):
        return _overload("logical_and")(self, y)

    def __rand__(self, x):
        return _overload("logical_and")(x, self)

    def __or__(self, y):
        return _overload("logical_or")(self, y)

    def __ror__(self, x):
        return _overload("logical_or")(x, self)

    def __xor__(self, y):
        return _overload("logical_xor")(self, y)

    def __rxor__(self, x):
        return _overload("logical_xor")(x, self)

    def __lt__(self, y):
        return _overload("less")(self, y)

    def __le__(self, y):
        return _overload("less_equal")(self, y)

    def __gt__(self, y):
        return _overload("greater")(self, y)

    def __ge__(self, y):
        return _overload("greater_equal")(self, y)


# -- Operation -------------------------------------------------------------------------


# The TensorProto of an array attr, for Operation.get_attr: graph_io (which builds on
# this module) registers its codec when it is imported, as `import asyncflow` does.
_tensor_attr_proto: Callable | None = None


def register_tensor_attr_proto(fn: Callable) -> None:
    global _tensor_attr_proto
    _tensor_attr_proto = fn


class Operation:
    """A node of the graph: an op type, input tensors, attrs, outputs."""

    # The cond/while context the op was built in (set by that context's `add_op`).
    _control_flow_context = None

    def __init__(self, graph, op_def, name, inputs, attrs, output_dtypes, output_refs):
        self._graph = graph
        self._op_def = op_def
        self._name = name
        self._inputs = tuple(inputs)
        self._attrs = attrs
        self._control_inputs: list[Operation] = []
        self._control_outputs: list[Operation] = []
        self._device = ""
        self._id = graph._next_id()
        self._outputs = tuple(
            Tensor(self, i, dt, ref) for i, (dt, ref) in enumerate(zip(output_dtypes, output_refs))
        )
        self.traceback = _user_location()

    @property
    def name(self) -> str:
        return self._name

    @property
    def type(self) -> str:
        return self._op_def.name

    @property
    def op_def(self):
        return self._op_def

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return self._outputs

    def values(self) -> tuple[Tensor, ...]:
        """The op's outputs (TF's `Operation.values()`)."""
        return tuple(self._outputs)

    @property
    def control_inputs(self) -> list[Operation]:
        return list(self._control_inputs)

    @property
    def device(self) -> str:
        return self._device

    def _set_device(self, dev) -> None:
        self._device = device_spec.DeviceSpec.from_string(dev or "").to_string()

    @property
    def node_def(self):
        """This op's NodeDef message."""
        return _CODEC.node_def(self)

    def colocation_groups(self) -> list[bytes]:
        """The colocation groups of this op (TF: a method; `loc:@name` by default)."""
        return list(self._attrs.get("_class", [f"loc:@{self._name}".encode()]))

    def get_attr(self, name: str) -> Any:
        """The value of attr `name`, as TF1 returns it: string attrs (and lists of them)
        as bytes, shapes as TensorShapeProtos, tensors (a Const's value) as TensorProtos;
        the runtime reads the values it keeps through `_attr`.

        Raises:
          ValueError: the op has no attr of that name.
        """
        value = self._attr(name)
        if isinstance(value, str):
            return value.encode()
        if isinstance(value, tensor_shape.TensorShape):
            return value.as_proto()
        if isinstance(value, np.ndarray) and _tensor_attr_proto is not None:
            return _tensor_attr_proto(value)
        if isinstance(value, list | tuple) and value:
            if all(isinstance(v, str) for v in value):
                return [v.encode() for v in value]
            if all(isinstance(v, tensor_shape.TensorShape) for v in value):
                return [v.as_proto() for v in value]
        return value

    def _attr(self, name: str) -> Any:
        try:
            return self._attrs[name]
        except KeyError:
            raise ValueError(f"Operation '{self._name}' has no attr named '{name}'.") from None

    @property
    def attrs(self) -> dict:
        return dict(self._attrs)

    def _add_control_input(self, op: Operation) -> None:
        if op not in self._control_inputs:
            self._control_inputs.append(op)
            op._control_outputs.append(self)
            self._graph._version += 1

    def _add_control_inputs(self, ops) -> None:
        for op in ops:
            self._add_control_input(op)

    def _update_input(self, index: int, tensor: Tensor) -> None:
        """Replace input `index` by `tensor` (same dtype): how while loops close their
        NextIteration back edges, as TF's `Operation._update_input`."""
        old = self._inputs[index]
        if tensor.dtype != old.dtype:
            raise TypeError(
                f"Cannot update input {index} of {self._name}: dtype {tensor.dtype.name} "
                f"!= {old.dtype.name}"
            )
        if self in old._consumers:
            old._consumers.remove(self)
        inputs = list(self._inputs)
        inputs[index] = tensor
        self._inputs = tuple(inputs)
        tensor._consumers.append(self)
        self._graph._version += 1

    def run(self, feed_dict=None, session=None) -> None:
        _eval_with_default(self, feed_dict, session)

    def __repr__(self) -> str:
        return f"<tf.Operation '{self._name}' type={self.type}>"

    def __str__(self) -> str:
        return _CODEC.node_def_text(self)


class _GraphDefCodec:
    """How Operations and Graphs become NodeDefs and GraphDefs.  The format lives in
    `graph_io`, a module above this one, which installs its functions here when it is
    imported (`install_graph_def_codec`); `import asyncflow` always imports it."""

    def _missing(self, *args, **kwargs):
        raise RuntimeError("GraphDef export needs asyncflow.graph_io (import asyncflow)")

    node_def = node_def_text = graph_to_graph_def = _missing


_CODEC = _GraphDefCodec()


def install_graph_def_codec(node_def, node_def_text, graph_to_graph_def) -> None:
    """Called by `graph_io` at import: the functions behind NodeDef/GraphDef export."""
    _CODEC.node_def = node_def
    _CODEC.node_def_text = node_def_text
    _CODEC.graph_to_graph_def = graph_to_graph_def


# -- Graph -----------------------------------------------------------------------------

# TF's: a root name starts with a letter, digit or "."; a nested scope may start with
# "-", "_", "/" or "\\" too.
_VALID_OP_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$")
_VALID_SCOPE_NAME = re.compile(r"^[A-Za-z0-9_.\\/>-]*$")


class _BuildStacks:
    """A graph's building stacks, shared by every thread."""

    def __init__(self, template: _BuildStacks | None = None):
        t = template
        self.name_stack = "" if t is None else t.name_stack
        self.control_stack: list[_ControlFrame | None] = [] if t is None else list(t.control_stack)
        self.device_stack: list[Any] = [] if t is None else list(t.device_stack)
        self.colocation_stack: list[Operation] = [] if t is None else list(t.colocation_stack)


class _ControlFrame:
    """One `control_dependencies` block: its control inputs, and the ops made in it."""

    __slots__ = ("inputs", "seen")

    def __init__(self):
        self.inputs: list[Operation] = []
        self.seen: set[Operation] = set()


class _ThreadLocalStacks(threading.local):
    """Per-thread building stacks; each thread starts from a copy of `template`."""

    def __init__(self, template: _BuildStacks):
        _BuildStacks.__init__(self, template)


def _set(obj, name: str, value) -> None:
    setattr(obj, name, value)


class InaccessibleTensorError(ValueError):
    """A fetch of an op marked not fetchable (inside a cond or while_loop: TF's)."""


class Graph:
    """A TF1 graph: ops, names, scopes and collections.  Not thread-safe for building."""

    def __init__(self):
        self._ops_by_name: dict[str, Operation] = {}
        self._ops: list[Operation] = []
        self._names_in_use: dict[str, int] = {}
        self._stacks = _BuildStacks()
        self._collections: dict[str, list] = {}
        self._finalized = False
        self._version = 0
        self._id_counter = 0
        self._seed = None
        self._lock = threading.RLock()
        # Per-graph state that other modules keep (variable scopes, ...).
        self._attached: dict[str, Any] = {}
        self._container = ""
        self._gradient_override_map: dict[str, str] = {}  # op type -> gradient name
        self._attr_scope_map: dict[str, Any] = {}  # attr -> value, or fn(node_def) -> value
        # The cond/while context ops are being built in (ops/control_flow_ops.py).
        self._control_flow_context = None
        # What a step may not feed or fetch (TF's: ops inside cond/while, and whatever
        # the user marks with prevent_feeding / prevent_fetching).
        self._unfeedable_tensors: set = set()
        self._unfetchable_ops: set = set()

    # The building stacks (name scope, control dependencies, devices, colocation) live in
    # `_stacks`: one object for every thread, or one per thread after switch_to_thread_local.
    _name_stack = property(
        lambda self: self._stacks.name_stack, lambda self, v: _set(self._stacks, "name_stack", v)
    )
    _control_stack = property(
        lambda self: self._stacks.control_stack,
        lambda self, v: _set(self._stacks, "control_stack", v),
    )
    _device_stack = property(
        lambda self: self._stacks.device_stack,
        lambda self, v: _set(self._stacks, "device_stack", v),
    )
    _colocation_stack = property(
        lambda self: self._stacks.colocation_stack,
        lambda self, v: _set(self._stacks, "colocation_stack", v),
    )

    # -- what a step may feed and fetch
    def prevent_feeding(self, tensor) -> None:
        """Mark `tensor` as one that `Session.run` may not feed."""
        self._unfeedable_tensors.add(tensor)

    def is_feedable(self, tensor) -> bool:
        return tensor not in self._unfeedable_tensors

    def prevent_fetching(self, op) -> None:
        """Mark `op` (and its outputs) as not fetchable by `Session.run`."""
        self._unfetchable_ops.add(op)

    def is_fetchable(self, tensor_or_op) -> bool:
        if not self._unfetchable_ops:  # (most graphs: no lookup, no Operation hash)
            return True
        if isinstance(tensor_or_op, Tensor):
            return tensor_or_op.op not in self._unfetchable_ops
        return tensor_or_op not in self._unfetchable_ops

    @contextlib.contextmanager
    def _kernel_label_map(self, op_to_kernel_label_map: dict):
        """TF's per-op kernel label override (how TF's tests pick an alternative kernel).
        asyncflow registers one kernel per op and device type, so no label can select
        another: the map is accepted and changes nothing."""
        yield

    def switch_to_thread_local(self) -> None:
        """Make the name-scope, control-dependency, device and colocation stacks
        thread-local (TF's `Graph.switch_to_thread_local`): each thread starts from a copy
        of the stacks as they are now, and its own `with` blocks no longer leak into ops
        that other threads build.  Idempotent."""
        if isinstance(self._stacks, _ThreadLocalStacks):
            return
        self._stacks = _ThreadLocalStacks(self._stacks)

    # -- ids and names
    def _next_id(self) -> int:
        self._id_counter += 1
        return self._id_counter

    @property
    def version(self) -> int:
        """How many ops this graph has created (TF's: it grows with every op added)."""
        return self._id_counter

    @property
    def building_function(self) -> bool:
        """True for a function's graph (`tf.function`, Defun bodies)."""
        return self._building_function

    @property
    def seed(self):
        return self._seed

    @seed.setter
    def seed(self, value):
        self._seed = value

    @property
    def finalized(self) -> bool:
        return self._finalized

    def finalize(self) -> None:
        self._finalized = True

    def _unsafe_unfinalize(self) -> None:
        self._finalized = False

    def _check_not_finalized(self) -> None:
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        if self._name_stack:
            name = self._name_stack + "/" + name
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = key
            while f"{base}_{i}" in self._names_in_use:
                i += 1
            if mark_as_used:
                self._names_in_use[f"{base}_{i}"] = 1
            name = f"{name}_{i}"
        return name

    def get_name_scope(self) -> str:
        return self._name_stack

    @contextlib.contextmanager
    def name_scope(self, name):
        """TF1 name scope: a trailing '/' reuses the scope exactly; None resets to root."""
        old = self._name_stack
        if name is None or name == "":
            new = ""
        elif not isinstance(name, str):
            raise TypeError(f"expected string or bytes-like object, got '{type(name).__name__}'")
        elif name.endswith("/"):
            new = name[:-1]
        else:
            valid = _VALID_SCOPE_NAME if old else _VALID_OP_NAME
            if not valid.match(name):
                raise ValueError(f"'{name}' is not a valid scope name")
            new = self.unique_name(name)
        self._name_stack = new
        try:
            yield (new + "/") if new else ""
        finally:
            self._name_stack = old

    @contextlib.contextmanager
    def container(self, container_name: str):
        """Stateful ops created inside keep their state in the named resource container.

        Named containers are shared by every session of the process and cleared by
        `Session.reset(target, containers)`.
        """
        old = self._container
        self._container = container_name
        try:
            yield container_name
        finally:
            self._container = old

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map):
        """Ops of the mapped types created inside take their gradient from the named
        function (`tf.RegisterGradient(name)`, or another op type's gradient): TF1's
        idiom for straight-through and guided gradients.  The op records the name in
        its `_gradient_op_type` attr, as TF's NodeDef does.

        Raises:
          TypeError: op_type_map is not a dict of strings to strings.
        """
        if not isinstance(op_type_map, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in op_type_map.items()
        ):
            raise TypeError("op_type_map must be a dictionary mapping strings to strings")
        saved = {k: self._gradient_override_map.get(k) for k in op_type_map}
        self._gradient_override_map.update(op_type_map)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    self._gradient_override_map.pop(k, None)
                else:
                    self._gradient_override_map[k] = v

    @contextlib.contextmanager
    def _attr_scope(self, attr_map: dict):
        """Ops created inside get these attrs (TF's `Graph._attr_scope`, how jit_scope
        marks ops `_XlaCompile`): a value, or a function of the new op's NodeDef
        returning one; None leaves the attr off.

        Raises:
          TypeError: attr_map is not a dict with string keys.
        """
        if not isinstance(attr_map, dict) or not all(isinstance(k, str) for k in attr_map):
            raise TypeError(
                "attr_map must be a dictionary mapping strings to AttrValue protocol buffers"
            )
        saved = dict(self._attr_scope_map)
        self._attr_scope_map.update(attr_map)
        try:
            yield
        finally:
            self._attr_scope_map = saved

    # -- op lookup
    def get_operations(self) -> list[Operation]:
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        if not isinstance(name, str):
            raise TypeError(
                f"Operation names are strings (or similar), not {type(name).__name__}."
            )
        return self.as_graph_element(name, allow_tensor=False, allow_operation=True)

    def get_tensor_by_name(self, name: str) -> Tensor:
        if not isinstance(name, str):
            raise TypeError(f"Tensor names are strings (or similar), not {type(name).__name__}.")
        return self.as_graph_element(name, allow_tensor=True, allow_operation=False)

    def as_graph_element(self, obj, allow_tensor=True, allow_operation=True):
        """Resolve a Tensor, Operation or name to an element of this graph (as TF).

        Raises:
          TypeError: obj is not a name, Tensor or Operation (of the kinds allowed).
          ValueError: a malformed name, an element of another graph, or a name of the
            wrong kind; also both kinds disallowed.
          KeyError: a well-formed name that no op of the graph has.
        """
        if not allow_tensor and not allow_operation:
            raise ValueError("allow_tensor and allow_operation can't both be False.")
        conv = getattr(obj, "_as_graph_element", None)
        if conv is not None:
            obj = conv()
        if isinstance(obj, str):
            if ":" in obj and allow_tensor:
                try:
                    op_name, idx = obj.split(":")
                    out_n = int(idx)
                except ValueError:
                    raise ValueError(
                        f"The name {obj!r} looks a like a Tensor name, but is not a valid one. "
                        'Tensor names must be of the form "<op_name>:<output_index>".'
                    ) from None
                op = self._ops_by_name.get(op_name)
                if op is None:
                    raise KeyError(
                        f"The name {obj!r} refers to a Tensor which does not exist. The "
                        f"operation, {op_name!r}, does not exist in the graph."
                    )
                try:
                    return op.outputs[out_n]  # (as TF's: a negative index counts back)
                except IndexError:
                    raise KeyError(
                        f"The name {obj!r} refers to a Tensor which does not exist. The "
                        f"operation, {op_name!r}, exists but only has {len(op.outputs)} outputs."
                    ) from None
            if ":" not in obj and allow_operation:
                op = self._ops_by_name.get(obj)
                if op is None:
                    raise KeyError(f"The name {obj!r} refers to an Operation not in the graph.")
                return op
            if ":" in obj:
                raise ValueError(f"Name {obj!r} appears to refer to a Tensor, not a Operation.")
            raise ValueError(
                f"The name {obj!r} refers to an Operation, not a Tensor. Tensor names must be "
                'of the form "<op_name>:<output_index>".'
            )
        if isinstance(obj, Tensor) and allow_tensor:
            if obj.graph is not self:
                raise ValueError(f"Tensor {obj} is not an element of this graph.")
            return obj
        if isinstance(obj, Operation) and allow_operation:
            if obj.graph is not self:
                raise ValueError(f"Operation {obj} is not an element of this graph.")
            return obj
        kinds = " or ".join(
            k for k, ok in (("Tensor", allow_tensor), ("Operation", allow_operation)) if ok
        )
        raise TypeError(f"Can not convert a {type(obj).__name__} into a {kinds}.")

    # -- scopes
    @contextlib.contextmanager
    def as_default(self):
        _default_graph_stack.push(self)
        try:
            yield self
        finally:
            _default_graph_stack.pop(self)

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs):
        """Ops created inside depend on control_inputs; None clears outer dependencies.

        As TF: an element may be an Operation, a Tensor, a Variable or a name in this
        graph; one the outer blocks already give is not repeated; an op with a data input
        made inside the same block takes none of the block's dependencies (it has them
        through that input).

        Raises:
          TypeError: an element is none of those.
          ValueError: an element is from another graph.
        """
        if control_inputs is None:
            self._control_stack.append(None)
        else:
            current = set(self._current_control_inputs())
            frame = _ControlFrame()
            for c in control_inputs:
                if hasattr(c, "_handle") and hasattr(c, "op"):
                    c = c.op  # a resource variable: its op, not a read (as TF)
                c = self.as_graph_element(c)
                if isinstance(c, Tensor):
                    c = c.op
                if c not in current:
                    current.add(c)
                    frame.inputs.append(c)
            self._control_stack.append(frame)
        try:
            yield
        finally:
            self._control_stack.pop()

    def _active_control_frames(self) -> list[_ControlFrame]:
        """The control_dependencies blocks in force, outermost first (after a None)."""
        stack = self._control_stack
        start = len(stack)
        while start and stack[start - 1] is not None:
            start -= 1
        return stack[start:]

    def _current_control_inputs(self) -> list[Operation]:
        return [c for f in self._active_control_frames() for c in f.inputs]

    def _control_inputs_for(self, input_ops) -> list[Operation]:
        """The control inputs of a new op whose data inputs come from `input_ops` (TF's
        `_control_dependencies_for_inputs`): a block that made one of those ops already
        orders the new op, and an op that is a data input is not repeated."""
        if not self._control_stack:
            return []
        out: list[Operation] = []
        for f in self._active_control_frames():
            if not f.seen.isdisjoint(input_ops):
                continue
            out.extend(c for c in f.inputs if c not in input_ops and c not in out)
        return out

    @contextlib.contextmanager
    def device(self, device_name_or_function):
        if isinstance(device_name_or_function, device_spec.DeviceSpec):
            device_name_or_function = device_name_or_function.to_string()
        if device_name_or_function is not None and not callable(device_name_or_function):
            # Validate now, so a bad string fails at the user's `with` line.
            device_spec.DeviceSpec.from_string(device_name_or_function)
        self._device_stack.append(device_name_or_function)
        try:
            yield
        finally:
            self._device_stack.pop()

    def _apply_device_functions(self, op: Operation) -> None:
        # Innermost first, as TF: a string fills the fields inner scopes left unset; a
        # function sees the device chosen so far (op.device) and its result replaces it.
        dev = ""
        for d in reversed(self._device_stack):
            if d is None:
                break
            if callable(d):
                op._set_device(dev)
                result = d(op)
                dev = device_spec.canonical_name(result if result is not None else "")
            else:
                dev = device_spec.merge_device(d, dev)
        if dev:
            op._set_device(dev)

    @contextlib.contextmanager
    def colocate_with(self, op, ignore_existing=False):
        """Ops created inside are colocated with `op` (None with ignore_existing=True:
        with nothing).

        Raises:
          ValueError: op is None without ignore_existing.
          TypeError: op is not an Operation or Tensor.
        """
        if op is None and not ignore_existing:
            raise ValueError(
                "Trying to reset colocation (op is None) but ignore_existing is not True"
            )
        if op is None:
            saved = self._colocation_stack
            self._colocation_stack = []
            try:
                yield
            finally:
                self._colocation_stack = saved
            return
        op = _to_operation(op)
        saved = self._colocation_stack
        self._colocation_stack = ([] if ignore_existing else list(saved)) + [op]
        try:
            yield
        finally:
            self._colocation_stack = saved

    # -- collections
    def add_to_collection(self, name, value) -> None:
        self._check_not_finalized()
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names, value) -> None:
        names = (names,) if isinstance(names, str) else set(names)
        for name in names:
            self.add_to_collection(name, value)

    def get_collection_ref(self, name) -> list:
        return self._collections.setdefault(name, [])

    def get_collection(self, name, scope=None) -> list:
        items = self._collections.get(name, [])
        if scope is None:
            return list(items)
        pat = re.compile(scope)
        return [i for i in items if hasattr(i, "name") and pat.match(i.name)]

    def get_all_collection_keys(self) -> list[str]:
        """The collection names that are strings (TF leaves out other keys)."""
        return [k for k, v in self._collections.items() if v and isinstance(k, str)]

    def clear_collection(self, name) -> None:
        """Raises:
        RuntimeError: the graph is finalized."""
        self._check_not_finalized()
        self._collections.pop(name, None)

    # -- building
    def _create_op(self, op_def, name, inputs, attrs, output_dtypes, output_refs, control):
        self._check_not_finalized()
        with self._lock:
            op = Operation(self, op_def, name, inputs, attrs, output_dtypes, output_refs)
            self._ops_by_name[name] = op
            self._ops.append(op)
            for t in op._inputs:
                t._consumers.append(op)
            for c in control:
                if c not in op._control_inputs:
                    op._control_inputs.append(c)
                    c._control_outputs.append(op)
            if self._control_stack:
                for f in self._active_control_frames():
                    f.seen.add(op)
            if self._colocation_stack:
                op._attrs["_class"] = sorted(
                    {g for c in self._colocation_stack for g in c.colocation_groups()}
                )
                # TF's: the device of the innermost colocated op that has one.
                for c in reversed(self._colocation_stack):
                    if c.device:
                        op._set_device(c.device)
                        break
            else:
                self._apply_device_functions(op)
            if self._gradient_override_map:
                mapped = self._gradient_override_map.get(op.type)
                if mapped is not None:
                    op._attrs["_gradient_op_type"] = mapped
            for key, value in self._attr_scope_map.items():
                value = value(op.node_def) if callable(value) else value
                if value is not None:
                    op._attrs[key] = value
        return op

    # A function's graph (asyncflow.tf_function.FuncGraph) takes tensors of the graphs
    # around it as its captured inputs, and is where ops are built while it is traced.
    _building_function = False

    # tf.debugging.enable_check_numerics: each checked output -> its CheckNumericsV2
    # output, which ops built later read instead (a per-graph dict once set).
    _checked_outputs: dict | None = None

    def _capture(self, t: Tensor) -> Tensor:
        """`t` as an input of an op of this graph (a FuncGraph captures it).

        Raises:
          ValueError: `t` is from another graph.
        """
        if t.graph is not self:
            raise ValueError(f"Tensor {t.name} must be from the same graph as the op.")
        return t

    def as_graph_def(self, from_version=None, add_shapes=False):
        """This graph as a GraphDef message (`SerializeToString()`: TF's `.pb` bytes)."""
        return _CODEC.graph_to_graph_def(self, add_shapes=add_shapes)

    def __repr__(self) -> str:
        return f"<asyncflow.Graph object at {id(self):#x} with {len(self._ops)} ops>"


def _to_operation(x) -> Operation:
    if isinstance(x, Operation):
        return x
    if isinstance(x, Tensor):
        return x.op
    conv = getattr(x, "op", None)
    if isinstance(conv, Operation):
        return conv
    raise TypeError(f"Expected an Operation or Tensor, got {x!r}")


class _DefaultGraphStack(threading.local):
    def __init__(self):
        self.stack: list[Graph] = []

    def push(self, g: Graph) -> None:
        self.stack.append(g)

    def pop(self, g: Graph) -> None:
        """Raises: AssertionError: `g` is not the innermost default graph (TF's)."""
        if not self.stack or self.stack[-1] is not g:
            raise AssertionError(f"Nesting violated for default stack of {type(g)} objects")
        self.stack.pop()

    def get(self) -> Graph:
        if self.stack:
            return self.stack[-1]
        global _global_default_graph
        if _global_default_graph is None:
            _global_default_graph = Graph()
        return _global_default_graph


_default_graph_stack = _DefaultGraphStack()
_global_default_graph: Graph | None = None


def get_default_graph() -> Graph:
    return _default_graph_stack.get()


def reset_default_graph() -> None:
    """Clear the global default graph; an error inside a `with g.as_default()` block."""
    if _default_graph_stack.stack:
        raise AssertionError(
            "Do not use tf.reset_default_graph() to clear nested graphs. If you need a "
            "cleared graph, exit the nesting and create a new graph."
        )
    global _global_default_graph
    _global_default_graph = None


# -- module-level scope helpers (TF1 spellings) ---------------------------------------


@contextlib.contextmanager
def name_scope(name, default_name=None, values=None):
    """`tf.name_scope(name, default_name=None, values=None)`; `tf.name_scope(None)`
    opens the root scope.

    Raises:
      ValueError: name and default_name are both None while values is given.
    """
    n = default_name if name is None else name
    if n is None and values is not None:
        raise ValueError(
            f"At least one of name ({name}) and default_name ({default_name}) must be provided."
        )
    g = _graph_from_values(values)
    with g.as_default(), g.name_scope(n) as scope:
        yield scope


def _graph_from_values(values) -> Graph:
    default = get_default_graph()
    if default._building_function:
        return default
    for v in values or ():
        g = getattr(v, "graph", None)
        if isinstance(g, Graph):
            return g
    return get_default_graph()


def control_dependencies(control_inputs):
    return get_default_graph().control_dependencies(control_inputs)


def device(device_name_or_function):
    return get_default_graph().device(device_name_or_function)


def colocate_with(op, ignore_existing=False):
    return get_default_graph().colocate_with(op, ignore_existing)


def container(container_name: str):
    return get_default_graph().container(container_name)


def add_to_collection(name, value) -> None:
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value) -> None:
    get_default_graph().add_to_collections(names, value)


def get_collection(key, scope=None) -> list:
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key) -> list:
    return get_default_graph().get_collection_ref(key)


# -- tensor conversion -----------------------------------------------------------------

_CONVERSION_FUNCS: list[tuple[type, Callable]] = []


def register_tensor_conversion_function(base_type, conversion_func, priority=100) -> None:
    """`conversion_func(value, dtype=None, name=None, as_ref=False) -> Tensor`.

    A subclass's function is tried before its base class's (ResourceVariable before
    Variable), whatever the order of registration."""
    for i, (base, _) in enumerate(_CONVERSION_FUNCS):
        if isinstance(base_type, type) and isinstance(base, type) and issubclass(base_type, base):
            _CONVERSION_FUNCS.insert(i, (base_type, conversion_func))
            return
    _CONVERSION_FUNCS.append((base_type, conversion_func))


def convert_to_tensor(
    value, dtype=None, name=None, preferred_dtype=None, dtype_hint=None, *, as_ref=False
):
    """Turn a Tensor, Variable, numpy array or Python value into a Tensor (as TF);
    `dtype_hint` is TF 2's name for `preferred_dtype`."""
    if dtype_hint is not None:
        if preferred_dtype is not None:
            raise ValueError("Cannot specify both 'preferred_dtype' and 'dtype_hint'.")
        preferred_dtype = dtype_hint
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype).base_dtype  # a ref dtype asks for its base type
    if isinstance(value, Tensor):
        if dtype is not None:
            if value.dtype.base_dtype != dtype:
                raise ValueError(
                    f"Tensor conversion requested dtype {dtype.name} for Tensor with dtype "
                    f"{value.dtype.name}: {value!r}"
                )
        return value
    for base, fn in _CONVERSION_FUNCS:
        if isinstance(value, base):
            t = fn(value, dtype=dtype, name=name, as_ref=as_ref)
            if dtype is not None and t.dtype.base_dtype != dtype:
                raise ValueError(
                    f"Tensor conversion requested dtype {dtype.name} for "
                    f"Tensor with dtype {t.dtype.name}: {t!r}"
                )
            return t
    if isinstance(value, Operation):
        raise TypeError(f"Can't convert Operation '{value.name}' to Tensor (target dtype={dtype})")
    if (
        dtype is None
        and preferred_dtype is not None
        and dtypes.fits_without_wrapping(value, preferred_dtype)
    ):
        try:
            return _make_const(value, preferred_dtype, name)
        except (TypeError, ValueError):
            pass
    return _make_const(value, dtype, name)


def _make_const(value, dtype, name):
    if isinstance(value, (list, tuple)) and any(
        isinstance(v, tensor_shape.Dimension) for v in _flatten(value)
    ):
        # An op input of an integer type takes [Dimension(100), 1] as [100, 1]; with no
        # dtype to convert to, TF's make_tensor_proto refuses the elements.
        if dtype is None:
            raise TypeError(
                f"Failed to convert elements of {value} to Tensor. Consider casting elements "
                "to a supported type."
            )
        value = _dims_as_ints(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in _flatten(value)):
        return _overload("stack")(value, dtype=dtype, name=name)
    return _overload("constant")(value, dtype=dtype, name=name or "Const")


def _dims_as_ints(value):
    if isinstance(value, tensor_shape.Dimension):
        if value.value is None:
            raise ValueError(f"Cannot convert an unknown Dimension to a Tensor: {value}")
        return value.value
    if isinstance(value, (list, tuple)):
        return [_dims_as_ints(v) for v in value]
    return value


def _flatten(value):
    for v in value:
        if isinstance(v, (list, tuple)):
            yield from _flatten(v)
        else:
            yield v


def convert_n_to_tensor(values, dtype=None, name=None):
    return [convert_to_tensor(v, dtype=dtype) for v in values]


# -- build-time constant values (used by shape functions) ------------------------------

_CONSTANT_FOLDERS: dict[str, Callable] = {}


def register_constant_folder(op_type: str, fn: Callable) -> None:
    """`fn(tensor) -> np.ndarray | None`: the value of `tensor` when known at build time."""
    _CONSTANT_FOLDERS[op_type] = fn


def constant_value(tensor) -> np.ndarray | None:
    """The value of `tensor` if it is known when the graph is built, else None."""
    if not isinstance(tensor, Tensor):
        return np.asarray(tensor)
    fn = _CONSTANT_FOLDERS.get(tensor.op.type)
    if fn is None:
        return None
    try:
        return fn(tensor)
    except Exception:  # noqa: BLE001 - a folder that cannot fold just says "unknown"
        return None


def constant_shape(tensor) -> tensor_shape.TensorShape:
    """Partially known shape from a 1-D shape tensor (TF's `constant_value_as_shape`)."""
    value = constant_value(tensor)
    if value is not None:
        return tensor_shape.TensorShape([None if d < 0 else int(d) for d in value.reshape(-1)])
    shape = tensor.shape
    if shape.ndims == 1 and shape[0].value is not None:
        fn = _CONSTANT_FOLDERS.get("__partial_shape__:" + tensor.op.type)
        if fn is not None:
            partial = fn(tensor)
            if partial is not None:
                return partial
        return tensor_shape.unknown_shape(shape[0].value)
    return tensor_shape.unknown_shape()


# -- apply_op: build an Operation from its OpDef ---------------------------------------


def _resolve_type_attrs(op_def, inputs, attrs):
    """Convert inputs to Tensors, inferring and checking type attrs (TF's op_def_library)."""
    # First pass: type attrs fixed by tensors already present.
    for arg, value in zip(op_def.inputs, inputs):
        ta = arg.type_attr
        if ta is None or ta in attrs:
            continue
        constraint = op_def.attrs[ta]
        if constraint.is_list:
            continue
        values = value if arg.number_attr else [value]
        for v in values:
            if isinstance(v, Tensor):
                attrs[ta] = v.dtype.base_dtype
                break
            dt = getattr(v, "dtype", None)
            if dt is not None and not isinstance(v, np.ndarray | np.generic):
                attrs[ta] = dtypes.as_dtype(dt).base_dtype  # a Variable or similar
                break
    converted = []
    for arg, value in zip(op_def.inputs, inputs):
        if arg.number_attr:
            if not isinstance(value, (list, tuple)):
                raise TypeError(
                    f"Expected list for '{arg.name}' argument to '{op_def.name}' Op, not {value}."
                )
            if arg.number_attr in attrs and attrs[arg.number_attr] != len(value):
                raise ValueError(f"List argument '{arg.name}' to '{op_def.name}' has wrong length")
            attrs[arg.number_attr] = len(value)
            name = arg.name
            if any(v is None for v in value):  # (TF's words for an unconvertible element)
                kinds = ", ".join(
                    "<NOT CONVERTIBLE TO TENSOR>" if v is None else _dtype_name_of(v)
                    for v in value
                )
                raise TypeError(
                    f"Tensors in list passed to '{arg.name}' of '{op_def.name}' Op have types "
                    f"[{kinds}] that don't all match."
                )
            converted.append(
                [_convert_arg(op_def, arg, v, attrs, f"{name}_{i}") for i, v in enumerate(value)]
            )
        elif arg.type_attr and op_def.attrs[arg.type_attr].is_list:
            ts = [convert_to_tensor(v, name=f"{arg.name}_{i}") for i, v in enumerate(value)]
            attrs.setdefault(arg.type_attr, [t.dtype.base_dtype for t in ts])
            converted.append(ts)
        else:
            converted.append(_convert_arg(op_def, arg, value, attrs, arg.name))
    return converted


def _dtype_name_of(value) -> str:
    dt = getattr(value, "dtype", None)
    if dt is not None:
        return dtypes.as_dtype(dt).base_dtype.name
    try:
        return dtypes.infer_dtype(value).name
    except (TypeError, ValueError):
        return "<NOT CONVERTIBLE TO TENSOR>"


def _convert_arg(op_def, arg, value, attrs, name):
    if arg.is_ref:
        ref = getattr(value, "_ref", None)
        t = ref() if callable(ref) else value
        if not isinstance(t, Tensor) or not t._is_ref:
            raise TypeError(
                f"'{op_def.name}' Op requires that input '{arg.name}' be a mutable tensor "
                f"(e.g. a tf.Variable)"
            )
        if arg.type_attr and arg.type_attr not in attrs:
            attrs[arg.type_attr] = t.dtype.base_dtype
        return t
    if arg.fixed_dtype is not None:
        want = arg.fixed_dtype
    else:
        want = attrs.get(arg.type_attr)
    if want is None:
        constraint = op_def.attrs[arg.type_attr]
        try:
            t = convert_to_tensor(value, preferred_dtype=constraint.default, name=name)
        except ValueError as e:  # (None, a ragged list: TF's op_def_library words)
            raise ValueError(
                f"Tried to convert '{arg.name}' to a tensor and failed. Error: {e}"
            ) from None
        attrs[arg.type_attr] = t.dtype
        return t
    if isinstance(value, Tensor):
        if value.dtype.base_dtype != want:
            raise TypeError(
                f"Input '{arg.name}' of '{op_def.name}' Op has type {value.dtype.name} that "
                f"does not match {'expected type' if arg.fixed_dtype else 'type'} "
                f"{want.name}{'' if arg.fixed_dtype else ' of argument'}"
                f"{'' if arg.fixed_dtype else ' ' + repr(_first_arg_with(op_def, arg))}."
            )
        return value
    try:
        return convert_to_tensor(value, dtype=want, name=name)
    except ValueError as e:
        if value is None:  # (TF: "None values not supported.", a ValueError)
            raise
        raise TypeError(str(e)) from None


def _first_arg_with(op_def, arg) -> str:
    for a in op_def.inputs:
        if a.type_attr == arg.type_attr:
            return a.name
    return arg.name


def _output_dtypes(op_def, attrs):
    out_dtypes, refs = [], []
    for arg in op_def.outputs:
        if arg.type_attr and op_def.attrs[arg.type_attr].is_list:
            dts = attrs[arg.type_attr]
            out_dtypes.extend(dts)
            refs.extend([False] * len(dts))
            continue
        dt = arg.fixed_dtype if arg.fixed_dtype is not None else attrs[arg.type_attr]
        n = attrs[arg.number_attr] if arg.number_attr else 1
        out_dtypes.extend([dtypes.as_dtype(dt)] * n)
        refs.extend([arg.is_ref] * n)
    return out_dtypes, refs


def apply_op(op_type: str, inputs=(), attrs=None, name=None, graph=None) -> Operation:
    """Create an Operation of `op_type` in the default graph (TF's `_apply_op_helper`).

    `inputs` aligns with the OpDef's inputs (a list for variadic ones); values are
    converted to Tensors with TF's rules, inside the op's name scope and named by
    their argument: `Add(x, 1.0)` makes "Add/y", a list argument "concat/values_1".

    The op's name is taken before anything is converted, so it stays taken when the
    op then fails (as TF's); the constants made for it stay too, complete ops that
    nothing else will use.  An op its shape function rejects is removed again.

    Raises:
      TypeError: mismatched dtypes, a missing attr, or an input that will not convert.
      ValueError: incompatible shapes, an invalid or duplicate name, at build time.
    """
    op_def = get_op_def(op_type)
    attrs = dict(attrs or {})
    if len(inputs) != len(op_def.inputs):
        raise TypeError(f"{op_type} takes {len(op_def.inputs)} inputs, got {len(inputs)}")
    if graph is None:
        graph = _graph_from_inputs(inputs)
    with graph.as_default():
        for k, v in list(attrs.items()):
            if isinstance(op_def.attrs.get(k), TypeConstraint) and v is not None:
                # Type attrs take base types (TF's _MakeType): `dtype=v.dtype` is float32.
                attrs[k] = (
                    [dtypes.as_dtype(d).base_dtype for d in v]
                    if op_def.attrs[k].is_list
                    else dtypes.as_dtype(v).base_dtype
                )
        graph._check_not_finalized()
        op_name = _claim_op_name(graph, name, op_type)
        cf_ctx = graph._control_flow_context
        converted, flat_inputs = _inputs_in_scope(graph, op_def, inputs, attrs, op_name)
        if graph._checked_outputs:
            flat_inputs = [graph._checked_outputs.get(t, t) for t in flat_inputs]
        if cf_ctx is None:
            for t in flat_inputs:
                if t.op._control_flow_context is not None:  # e.g. a value of a loop's body
                    t.op._control_flow_context.check_use_outside(t, op_name)
        _complete_attrs(op_def, attrs, graph)
        out_dtypes, refs = _output_dtypes(op_def, attrs)
        input_ops = {t.op for t in flat_inputs}
        control = graph._control_inputs_for(input_ops)
        # TF's op_def_library colocates an op with the producers of its ref inputs (an
        # Assign lands with its variable: `_class` is [b"loc:@v"]).
        ref_ops = [
            t.op
            for arg, c in zip(op_def.inputs, converted, strict=True)
            if arg.is_ref
            for t in (c if isinstance(c, list) else [c])
        ]
        if ref_ops:
            with contextlib.ExitStack() as stack:
                for r in ref_ops:
                    stack.enter_context(graph.colocate_with(r))
                op = graph._create_op(
                    op_def, op_name, flat_inputs, attrs, out_dtypes, refs, control
                )
        else:
            op = graph._create_op(op_def, op_name, flat_inputs, attrs, out_dtypes, refs, control)
        if cf_ctx is not None:
            cf_ctx.add_op(op)
        if op_def.shape_fn is not None:
            _set_output_shapes(graph, op, op_def)
        if OP_CALLBACKS and not getattr(_IN_CALLBACKS, "on", False):
            _IN_CALLBACKS.on = True  # (ops a callback makes are not seen by any: TF's)
            try:
                for callback in OP_CALLBACKS:
                    callback(op)
            finally:
                _IN_CALLBACKS.on = False
    return op


# Called with each op apply_op makes, once its shapes are set (what
# tf.debugging.enable_check_numerics adds its checks with, and tfdbg2 records ops with).
OP_CALLBACKS: list = []
_IN_CALLBACKS = threading.local()


def _inputs_in_scope(graph: Graph, op_def, inputs, attrs: dict, op_name: str):
    """(converted, flat_inputs): `inputs` as tensors of `graph`, made inside the op's
    name scope, opened by hand (this is hot): the Consts made for them, a function's
    captures and a cond's Switch or a loop's Enter for an outer tensor are named under
    it ("Add/y", "cond/Add/Switch")."""
    stacks = graph._stacks  # (the `_name_stack` property, without its two calls)
    outer_stack, stacks.name_stack = stacks.name_stack, op_name
    try:
        converted = _resolve_type_attrs(op_def, inputs, attrs)
        flat_inputs: list[Tensor] = []
        for c in converted:
            flat_inputs.extend(c if isinstance(c, list) else [c])
        if any(t.graph is not graph for t in flat_inputs):
            flat_inputs = [graph._capture(t) for t in flat_inputs]
        cf_ctx = graph._control_flow_context
        if cf_ctx is not None:  # inside cond/while: outer inputs go through Switch/Enter
            flat_inputs = cf_ctx.map_inputs(flat_inputs)
    finally:
        stacks.name_stack = outer_stack
    return converted, flat_inputs


def _claim_op_name(graph: Graph, name: str | None, op_type: str) -> str:
    """The name the op will have, marked used (TF's `name_scope(name or op_type)`).

    Raises:
      ValueError: the name is invalid, or an op already has it.
    """
    if not name:
        op_name = graph.unique_name(op_type)
    else:
        # TF checks the whole name the op gets ("scope/_x" is valid, "_x" not).
        stack = graph._name_stack
        exact = name.endswith("/")  # TF: a scope name ("foo/") names the op exactly
        full = name[:-1] if exact else (f"{stack}/{name}" if stack else name)
        if not _VALID_OP_NAME.match(full):
            raise ValueError(f"'{name}' is not a valid node name")
        op_name = full if exact else graph.unique_name(name)
    # An exact name does not mark itself used, so a later "foo" may meet a "foo/" op.
    if op_name in graph._ops_by_name:
        raise ValueError(f"Duplicate node name in graph: '{op_name}'")
    return op_name


def _complete_attrs(op_def, attrs: dict, graph: Graph) -> None:
    """Check the type attrs set, and fill in defaults (TF's op_def_library)."""
    op_type = op_def.name
    for k, spec in op_def.attrs.items():
        if k in attrs and attrs[k] is not None:
            if isinstance(spec, TypeConstraint) and not spec.is_list:
                spec.check(op_type, k, attrs[k])
            continue
        if isinstance(spec, TypeConstraint):
            if spec.default is not None:
                attrs[k] = spec.default
                continue
            raise TypeError(f"{op_type}: could not infer type attr '{k}'")
        if spec is REQUIRED:
            raise TypeError(f"{op_type} missing required attr '{k}'")
        attrs[k] = spec
    if graph._container and op_def.stateful and attrs.get("container") == "":
        attrs["container"] = graph._container  # `with tf.container(...)`, as TF1


def shape_text(shape: tensor_shape.TensorShape) -> str:
    """A shape as TF's shape-inference errors write it: [2,?], ? for an unknown rank."""
    if shape.ndims is None:
        return "?"
    return "[" + ",".join("?" if d is None else str(d) for d in shape.as_list()) + "]"


_PYTHON_RANK_WORDS = re.compile(r"^Shape \((.*)\) must have rank (at least |at most )?(\d+)$")


def _inference_words(message: str) -> str:
    """A shape function's error in TF's shape-inference words: TensorShape.with_rank's
    "Shape (2, 3) must have rank 4" is "Shape must be rank 4 but is rank 2" there."""
    m = _PYTHON_RANK_WORDS.match(message)
    if m is None:
        return message
    dims = m.group(1).strip().rstrip(",")
    rank = dims.count(",") + 1 if dims else 0
    return f"Shape must be {m.group(2) or ''}rank {m.group(3)} but is rank {rank}"


def _set_output_shapes(graph: Graph, op: Operation, op_def) -> None:
    try:
        shapes = op_def.shape_fn(op)
    except ValueError as e:
        # TF prefixes shape errors with the op; keep it a ValueError at build time.
        _discard_op(graph, op)
        shapes = ", ".join(shape_text(t.shape) for t in op._inputs)
        raise ValueError(
            f"{_inference_words(str(e))} for '{op.name}' (op: '{op_def.name}') with input "
            f"shapes: {shapes}."
        ) from None
    except Exception:
        _discard_op(graph, op)
        raise
    if isinstance(shapes, tensor_shape.TensorShape) or shapes is None:
        shapes = [shapes]
    for t, s in zip(op._outputs, shapes):
        if s is not None:
            t._shape = tensor_shape.as_shape(s)


def _discard_op(graph: Graph, op: Operation) -> None:
    """Undo _create_op for an op whose shape function rejected it."""
    graph._ops_by_name.pop(op.name, None)
    if graph._ops and graph._ops[-1] is op:
        graph._ops.pop()
    for t in op._inputs:
        if t._consumers and t._consumers[-1] is op:
            t._consumers.pop()
    for c in op._control_inputs:
        if op in c._control_outputs:
            c._control_outputs.remove(op)


def _graph_from_inputs(inputs) -> Graph:
    default = get_default_graph()
    if default._building_function:  # (outer tensors are captured, as TF's FuncGraph)
        return default
    for v in inputs:
        vs = v if isinstance(v, (list, tuple)) else [v]
        for x in vs:
            if isinstance(x, Tensor):
                return x.graph
            g = getattr(x, "graph", None)
            if isinstance(g, Graph):
                return g
    return get_default_graph()


def outputs_of(op: Operation):
    """The usual builder return: one Tensor, a tuple of them, or the op itself."""
    outs = op._outputs
    if len(outs) == 1:
        return outs[0]
    if not outs:
        return op
    return outs


def is_tensor(x) -> bool:
    """Whether `x` is a Tensor or tensor-like (a Variable: `is_tensor_like`), as TF."""
    return isinstance(x, Tensor) or bool(getattr(x, "is_tensor_like", False))


# -- default session stack -------------------------------------------------------------


class _DefaultSessionStack(threading.local):
    def __init__(self):
        self.stack: list = []


_default_sessions = _DefaultSessionStack()
_global_default_session: list = []  # InteractiveSession, visible to all threads


def get_default_session():
    if _default_sessions.stack:
        return _default_sessions.stack[-1]
    return _global_default_session[-1] if _global_default_session else None


def _eval_with_default(element, feed_dict, session):
    if session is None:
        session = get_default_session()
        if session is None:
            if isinstance(element, Tensor):
                raise ValueError(
                    "Cannot evaluate tensor using `eval()`: No default session is "
                    "registered. Use `with sess.as_default()` or pass an explicit session "
                    "to `eval(session=sess)`"
                )
            raise ValueError(
                "Cannot execute operation using `run()`: No default session is registered. "
                "Use `with sess.as_default():` or pass an explicit session to "
                "`run(session=sess)`"
            )
    if element.graph is not session.graph:
        raise ValueError(
            "Cannot use the given session to evaluate tensor: the tensor's graph is "
            "different from the session's graph."
        )
    return session.run(element, feed_dict)
