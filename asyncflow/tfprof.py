"""TF1's tfprof model analysis: `tf.profiler.profile(graph, options=...)` with the
options `tf.profiler.ProfileOptionBuilder` builds, counting what TF counts.

The scope view ("scope"): every op, and every name scope that is no op, is a node named
by its name; a node's children are the names continuing its own
(`w/Initializer/random_uniform/mul` under `w/Initializer/random_uniform`), and a node
not shown (below the option's minimum, or not of an accounted type) hands its children
to the nearest shown ancestor.  The graph view ("graph"): the ops no op reads at the top,
each op's children its inputs, every op once (see `_graph_tree`).  The op view ("op"):
one MultiGraphNodeProto row per op type, its `graph_nodes` the accounted ops of that
type; the rows are chained (each the only child of the one before, its totals those of
the rest of the chain), as TF returns them.  `float_ops` are TF's per-op formulas (its
RegisterStatistics "flops" functions, recorded op by op from TF 2.21): 2·m·n·k for a
product, output elements × kernel area × input channels × 2 for a convolution, one per
output element for the elementwise ops TF counts, input − output elements for the sums
and arg-reductions, and none for the ops TF registers no formula for (Relu, Exp, Tanh,
...); an op whose shapes are not fully known counts none, as TF's.  `parameters` are the
element counts of the variables and placeholders (TF's rule); the trainable variables
also have the `_trainable_variables` account type.  An OpLogProto (`op_log`) adds types
and float operations to named ops.  The code view ("code") groups the ops by the Python
line that built them (see `_code_tree`: asyncflow records one line per op, TF the whole
stack).  With `run_meta`, the `micros` and `bytes` selections read the traced step's
times and output bytes.

The results are GraphNodeProto / MultiGraphNodeProto-shaped objects (TF's field names)
that serialize as TF's messages (SerializeToString / FromString / ParseFromString, through
asyncflow/protos/tfprof_output.proto, TF's field numbers: the bytes read in both);
the printed report follows TF's layout from its "Profile:" line (TF's option listing
and "Doc:" lines before it are not printed); `output: "none"` prints nothing.
"""

from __future__ import annotations

import ast
import copy
import functools
import os
import re
import sys

import numpy as np

__all__ = ["GraphNodeProto", "MultiGraphNodeProto", "ProfileOptionBuilder", "profile_graph"]

_DEFAULTS = {
    "max_depth": 100,
    "min_bytes": 0,
    "min_micros": 0,
    "min_params": 0,
    "min_float_ops": 0,
    "min_occurrence": 0,
    "order_by": "name",
    "account_type_regexes": [".*"],
    "start_name_regexes": [".*"],
    "trim_name_regexes": [],
    "show_name_regexes": [".*"],
    "hide_name_regexes": [],
    "account_displayed_op_only": False,
    "select": ["micros"],
    "step": -1,
    "output": "stdout",
}


class ProfileOptionBuilder:
    """TF's option builder: start from a preset (or the defaults), change, `build()`."""

    def __init__(self, options=None):
        self._options = copy.deepcopy(options) if options is not None else copy.deepcopy(_DEFAULTS)

    @staticmethod
    def trainable_variables_parameter() -> dict:
        return {
            "max_depth": 10000, "min_bytes": 0, "min_micros": 0, "min_params": 0,
            "min_float_ops": 0, "min_occurrence": 0, "order_by": "name",
            "account_type_regexes": ["_trainable_variables"], "start_name_regexes": [".*"],
            "trim_name_regexes": [], "show_name_regexes": [".*"], "hide_name_regexes": [],
            "account_displayed_op_only": True, "select": ["params"], "step": -1,
            "output": "stdout",
        }  # fmt: skip

    @staticmethod
    def float_operation() -> dict:
        return {
            "max_depth": 10000, "min_bytes": 0, "min_micros": 0, "min_params": 0,
            "min_float_ops": 1, "min_occurrence": 0, "order_by": "float_ops",
            "account_type_regexes": [".*"], "start_name_regexes": [".*"],
            "trim_name_regexes": [], "show_name_regexes": [".*"], "hide_name_regexes": [],
            "account_displayed_op_only": True, "select": ["float_ops"], "step": -1,
            "output": "stdout",
        }  # fmt: skip

    @staticmethod
    def time_and_memory(
        min_micros=1, min_bytes=1, min_accelerator_micros=0, min_cpu_micros=0,
        min_peak_bytes=0, min_residual_bytes=0, min_output_bytes=0,
    ) -> dict:  # fmt: skip
        return {
            "max_depth": 10000, "min_bytes": min_bytes, "min_peak_bytes": min_peak_bytes,
            "min_residual_bytes": min_residual_bytes, "min_output_bytes": min_output_bytes,
            "min_micros": min_micros, "min_accelerator_micros": min_accelerator_micros,
            "min_cpu_micros": min_cpu_micros, "min_params": 0, "min_float_ops": 0,
            "min_occurrence": 0, "order_by": "micros", "account_type_regexes": [".*"],
            "start_name_regexes": [".*"], "trim_name_regexes": [], "show_name_regexes": [".*"],
            "hide_name_regexes": [], "account_displayed_op_only": True,
            "select": ["micros", "bytes"], "step": -1, "output": "stdout",
        }  # fmt: skip

    def build(self) -> dict:
        return copy.deepcopy(self._options)

    def _set(self, **kw):
        self._options.update(kw)
        return self

    def with_max_depth(self, max_depth):
        return self._set(max_depth=max_depth)

    def with_min_memory(self, min_bytes=0, min_peak_bytes=0, min_residual_bytes=0,
                        min_output_bytes=0):  # fmt: skip
        return self._set(min_bytes=min_bytes, min_peak_bytes=min_peak_bytes,
                         min_residual_bytes=min_residual_bytes,
                         min_output_bytes=min_output_bytes)  # fmt: skip

    def with_min_execution_time(self, min_micros=0, min_accelerator_micros=0, min_cpu_micros=0):
        return self._set(min_micros=min_micros, min_accelerator_micros=min_accelerator_micros,
                         min_cpu_micros=min_cpu_micros)  # fmt: skip

    def with_min_parameters(self, min_params):
        return self._set(min_params=min_params)

    def with_min_occurrence(self, min_occurrence):
        return self._set(min_occurrence=min_occurrence)

    def with_min_float_operations(self, min_float_ops):
        return self._set(min_float_ops=min_float_ops)

    def with_accounted_types(self, account_type_regexes):
        return self._set(account_type_regexes=list(account_type_regexes))

    def with_node_names(self, start_name_regexes=None, show_name_regexes=None,
                        hide_name_regexes=None, trim_name_regexes=None):  # fmt: skip
        for key, value in (("start_name_regexes", start_name_regexes),
                           ("show_name_regexes", show_name_regexes),
                           ("hide_name_regexes", hide_name_regexes),
                           ("trim_name_regexes", trim_name_regexes)):  # fmt: skip
            if value is not None:
                self._options[key] = list(value)
        return self

    def account_displayed_op_only(self, is_true):
        return self._set(account_displayed_op_only=bool(is_true))

    def with_empty_output(self):
        return self._set(output="none")

    def with_stdout_output(self):
        return self._set(output="stdout")

    def with_file_output(self, outfile):
        return self._set(output=f"file:outfile={outfile}")

    def with_timeline_output(self, timeline_file):
        return self._set(output=f"timeline:outfile={timeline_file}")

    def with_pprof_output(self, pprof_file):
        return self._set(output=f"pprof:outfile={pprof_file}")

    def order_by(self, attribute):
        return self._set(order_by=attribute)

    def select(self, attributes):
        return self._set(select=list(attributes))

    def with_step(self, step):
        return self._set(step=step)


class GraphNodeProto:
    """One node of a scope view: its own and its subtree's counts, and its children."""

    def __init__(self, name=""):
        self.name = name
        self.float_ops = self.total_float_ops = 0
        self.parameters = self.total_parameters = 0
        self.exec_micros = self.total_exec_micros = 0
        self.cpu_exec_micros = self.total_cpu_exec_micros = 0
        self.accelerator_exec_micros = self.total_accelerator_exec_micros = 0
        self.output_bytes = self.total_output_bytes = 0
        self.requested_bytes = self.total_requested_bytes = 0
        self.peak_bytes = self.total_peak_bytes = 0
        self.residual_bytes = self.total_residual_bytes = 0
        self.run_count = self.total_run_count = 0
        self.total_definition_count = 0
        self.shapes: list = []
        self.input_shapes: dict[int, list | None] = {}  # input index -> dims (None: unknown)
        self.devices: list = []
        self.children: list[GraphNodeProto] = []
        self._shape = None  # a variable's or placeholder's declared shape (the printed one)
        self._op_type = ""
        self._accounted = True
        self._hidden_accounted: list = []  # (nodes not shown whose counts are in this total)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, children={len(self.children)})"

    # -- TF's message (asyncflow/protos/tfprof_output.proto, TF's field numbers)

    def to_proto(self):
        """This node and its subtree as a tfprof_output_pb2 message."""
        return _to_message(self)

    @classmethod
    def from_proto(cls, message):
        """The node (and subtree) of a tfprof_output_pb2 message of this class's name."""
        return _from_message(cls, message)

    def SerializeToString(self, deterministic=False) -> bytes:  # noqa: N802 - TF's name
        """The message's bytes, as TF's GraphNodeProto / MultiGraphNodeProto's."""
        return self.to_proto().SerializeToString(deterministic=deterministic)

    @classmethod
    def FromString(cls, data: bytes):  # noqa: N802 - protobuf's name
        """The node serialized in `data` (TF's bytes or ours).

        Raises:
          google.protobuf.message.DecodeError: not a message of this type.
        """
        return cls.from_proto(_message_class(cls).FromString(data))

    def ParseFromString(self, data: bytes) -> int:  # noqa: N802 - protobuf's name
        """Replace this node's fields by those serialized in `data`; its length."""
        parsed = type(self).FromString(data)
        self.__dict__.clear()
        self.__dict__.update(parsed.__dict__)
        return len(data)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self.to_proto() == other.to_proto()

    __hash__ = None  # (a protobuf message's: unhashable)


class MultiGraphNodeProto(GraphNodeProto):
    """A row of the op view: the nodes of one op type (`graph_nodes`)."""

    def __init__(self, name=""):
        super().__init__(name)
        self.graph_nodes: list[GraphNodeProto] = []


# The counters of each message (the rest: name, devices, shapes, children, graph_nodes).
_NODE_COUNTERS = (
    "run_count exec_micros accelerator_exec_micros cpu_exec_micros requested_bytes "
    "peak_bytes residual_bytes output_bytes parameters float_ops total_definition_count "
    "total_run_count total_exec_micros total_accelerator_exec_micros total_cpu_exec_micros "
    "total_requested_bytes total_peak_bytes total_residual_bytes total_output_bytes "
    "total_parameters total_float_ops"
).split()
_MULTI_COUNTERS = (
    "exec_micros accelerator_exec_micros cpu_exec_micros requested_bytes peak_bytes "
    "residual_bytes output_bytes parameters float_ops total_exec_micros "
    "total_accelerator_exec_micros total_cpu_exec_micros total_requested_bytes "
    "total_peak_bytes total_residual_bytes total_output_bytes total_parameters "
    "total_float_ops"
).split()


def _message_class(cls):
    from asyncflow.protos import tfprof_output_pb2

    if issubclass(cls, MultiGraphNodeProto):
        return tfprof_output_pb2.MultiGraphNodeProto
    return tfprof_output_pb2.GraphNodeProto


def _shape_to_proto(dims, proto) -> None:
    """dims (a list, None entries unknown; None: unknown rank) into a TensorShapeProto;
    a scalar as one element (TF's)."""
    if dims is None:
        proto.unknown_rank = True
        return
    for d in dims or [1]:
        proto.dim.add(size=-1 if d is None else int(d))


def _shape_from_proto(proto):
    if proto.unknown_rank:
        return None
    return [None if d.size < 0 else int(d.size) for d in proto.dim]


def _to_message(node):
    message = _message_class(type(node))()
    message.name = node.name
    multi = isinstance(node, MultiGraphNodeProto)
    for f in _MULTI_COUNTERS if multi else _NODE_COUNTERS:
        setattr(message, f, int(getattr(node, f, 0) or 0))
    if multi:
        message.graph_nodes.extend(_to_message(n) for n in node.graph_nodes)
    else:
        message.devices.extend(str(d) for d in node.devices)
        for dims in node.shapes:
            _shape_to_proto(dims, message.shapes.add())
        for i, dims in sorted(node.input_shapes.items()):
            _shape_to_proto(dims, message.input_shapes[int(i)])
    message.children.extend(_to_message(c) for c in node.children)
    return message


def _from_message(cls, message):
    node = cls(message.name)
    multi = issubclass(cls, MultiGraphNodeProto)
    for f in _MULTI_COUNTERS if multi else _NODE_COUNTERS:
        setattr(node, f, int(getattr(message, f)))
    if multi:
        node.graph_nodes = [_from_message(GraphNodeProto, n) for n in message.graph_nodes]
    else:
        node.devices = list(message.devices)
        node.shapes = [_shape_from_proto(s) for s in message.shapes]
        node.input_shapes = {int(i): _shape_from_proto(s) for i, s in message.input_shapes.items()}
    node.children = [_from_message(cls, c) for c in message.children]
    return node


# -- what TF counts per op -----------------------------------------------------------------

_PER_OUTPUT = frozenset(
    "Add AddV2 Sub Mul RealDiv Maximum Minimum Pow Equal NotEqual Greater GreaterEqual Less "
    "LessEqual AssignAdd AssignSub BiasAdd Neg Square Reciprocal Log".split()
)
_TWICE_OUTPUT = frozenset(["SquaredDifference", "Rsqrt"])
_IN_MINUS_OUT = frozenset(["Sum", "ArgMax", "ArgMin", "BiasAddGrad"])


def _n(shape) -> int | None:
    dims = shape.as_list() if shape.ndims is not None else None
    if dims is None or any(d is None for d in dims):
        return None
    return int(np.prod(dims, dtype=np.int64))


def _attr(op, name, default=None):
    try:
        return op.get_attr(name)
    except (ValueError, KeyError):
        return default


def _hw(values, fmt) -> tuple[int, int]:
    values = list(values)
    if fmt and str(fmt).startswith("NC"):
        return values[2], values[3]
    return values[1], values[2]


def _float_ops(op) -> int:
    """TF's flops of one op (0 where TF registers none or a shape is unknown)."""
    kind = op.type
    outs = op.outputs
    out = _n(outs[0].shape) if outs else None
    if kind in _PER_OUTPUT:
        return out or 0
    if kind in _TWICE_OUTPUT:
        return 2 * out if out else 0
    if kind == "Softmax":
        return 5 * out if out else 0
    if kind in _IN_MINUS_OUT:
        inp = _n(op.inputs[0].shape)
        return inp - out if inp is not None and out is not None else 0
    if kind == "Mean":
        return _n(op.inputs[0].shape) or 0
    if kind == "L2Loss":
        inp = _n(op.inputs[0].shape)
        return 3 * inp - 1 if inp else 0
    if kind == "AddN":
        return (len(op.inputs) - 1) * out if out else 0
    if kind in ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        a = op.inputs[0].shape
        if out is None or a.ndims is None or a.as_list()[-1] is None:
            return 0
        adj = _attr(op, "transpose_a", False) or _attr(op, "adj_x", False)
        k = a.as_list()[-2] if adj else a.as_list()[-1]
        return 2 * out * k if k is not None else 0
    if kind in ("Conv2D", "Conv3D"):
        f = op.inputs[1].shape.as_list() if op.inputs[1].shape.ndims else None
        if out is None or f is None or None in f:
            return 0
        return 2 * out * int(np.prod(f[:-1]))
    if kind == "DepthwiseConv2dNative":
        f = op.inputs[1].shape.as_list() if op.inputs[1].shape.ndims else None
        if out is None or f is None or None in f[:2]:
            return 0
        return 2 * out * f[0] * f[1]
    if kind in ("Conv2DBackpropInput", "Conv2DBackpropFilter"):
        # 2 x (the convolution's input elements) x kernel area x output channels,
        # over the stride area
        data = out if kind == "Conv2DBackpropInput" else _n(op.inputs[0].shape)
        kernel = op.inputs[1].shape if kind == "Conv2DBackpropInput" else outs[0].shape
        f = kernel.as_list() if kernel.ndims == 4 else None
        if data is None or f is None or None in f:
            return 0
        sh, sw = _hw(_attr(op, "strides", [1, 1, 1, 1]), _attr(op, "data_format", b"NHWC"))
        return 2 * data * f[0] * f[1] * f[3] // (sh * sw)
    if kind in ("MaxPool", "AvgPool"):
        kh, kw = _hw(_attr(op, "ksize", [1, 1, 1, 1]), _attr(op, "data_format", b"NHWC"))
        return out * kh * kw if out else 0
    if kind == "MaxPoolGrad":
        kh, kw = _hw(_attr(op, "ksize", [1, 1, 1, 1]), _attr(op, "data_format", b"NHWC"))
        orig_out = _n(op.inputs[1].shape)
        return (kh * kw + 1) * orig_out if orig_out else 0
    if kind == "AvgPoolGrad":
        kh, kw = _hw(_attr(op, "ksize", [1, 1, 1, 1]), _attr(op, "data_format", b"NHWC"))
        grad = _n(op.inputs[1].shape)
        return 2 * kh * kw * grad if grad else 0
    return 0


# -- the views -------------------------------------------------------------------------------


def _trainable(graph) -> dict:
    from asyncflow.graph import GraphKeys

    found = {}
    for v in graph.get_collection(GraphKeys.TRAINABLE_VARIABLES):
        found[v.op.name] = v
    return found


# TF counts an op's parameters when it holds or feeds a model's values: the variables
# (ref and resource) and the placeholders, by their declared shapes.
_PARAM_TYPES = frozenset(["Variable", "VariableV2", "VarHandleOp", "Placeholder"])


def _declared_shape(op):
    """The shape a variable or placeholder declares (None where it declares none)."""
    from asyncflow.tensor_shape import TensorShape

    shape = _attr(op, "shape")
    if shape is not None:
        try:
            return TensorShape(shape)
        except (TypeError, ValueError):
            return None
    return op.outputs[0].shape if op.outputs else None


def _types(op, trainable, op_log) -> list[str]:
    types = [op.type]
    if op.name in trainable:
        types.append("_trainable_variables")
    entry = op_log.get(op.name)
    if entry is not None:
        types.extend(t for t in entry.types if t not in types)
    return types


def _accounted(types, regexes) -> bool:
    return any(re.fullmatch(r, t) for r in regexes for t in types)


def _stats_by_node(run_meta) -> dict:
    """node name -> [run count, exec micros, output bytes] of the traced step, or with a
    list of steps their average over the steps the node ran in (TF's `step=-1`)."""
    sums: dict[str, list[int]] = {}
    metas = run_meta if isinstance(run_meta, (list, tuple)) else [run_meta]
    for meta in metas:
        step = getattr(meta, "step_stats", meta)
        seen: dict[str, list[int]] = {}
        for dev in step.dev_stats:
            for n in dev.node_stats:
                s = seen.setdefault(n.node_name, [1, 0, 0])
                s[1] += int((n.all_end_rel_nanos or n.all_end_rel_micros * 1000) // 1000)
                s[2] += sum(
                    o.tensor_description.allocation_description.requested_bytes for o in n.output
                )
        for name, (_, micros, nbytes) in seen.items():
            total = sums.setdefault(name, [0, 0, 0])
            total[0] += 1
            total[1] += micros
            total[2] += nbytes
    return {name: [1, micros // k, nbytes // k] for name, (k, micros, nbytes) in sums.items()}


def _input_shapes(op) -> dict:
    # (TF numbers the control inputs after the data inputs, with their first output's
    # shape)
    tensors = list(op.inputs) + [c.outputs[0] if c.outputs else None for c in op.control_inputs]
    return {
        i: t.shape.as_list() if t is not None and t.shape.ndims is not None else None
        for i, t in enumerate(tensors)
    }


def _own_node(op, trainable, regexes, stats, op_log=None) -> GraphNodeProto:
    op_log = op_log or {}
    node = GraphNodeProto(op.name)
    node.total_definition_count = 1
    node.input_shapes = _input_shapes(op)
    node._op_type = op.type
    types = _types(op, trainable, op_log)
    if op.type in _PARAM_TYPES:
        node._shape = _declared_shape(op)  # (printed; TF's returned node leaves `shapes` empty)
    node._accounted = _accounted(types, regexes)
    if not node._accounted:
        return node
    entry = op_log.get(op.name)
    node.float_ops = entry.float_ops if entry is not None and entry.float_ops else _float_ops(op)
    if node._shape is not None:
        node.parameters = _n(node._shape) or 0
    s = stats.get(op.name)
    if s is not None:
        node.run_count, node.exec_micros, node.output_bytes = s
        node.requested_bytes = s[2]
        node.cpu_exec_micros = node.exec_micros  # (asyncflow traces no accelerator time)
    return node


_SELECT = {"float_ops": "float_ops", "params": "parameters", "micros": "exec_micros",
           "bytes": "requested_bytes", "occurrence": "run_count"}  # fmt: skip


def _shown(node, options) -> bool:
    name = node.name
    if not any(re.fullmatch(r, name) for r in options.get("show_name_regexes", [".*"])):
        return False
    if any(re.fullmatch(r, name) for r in options.get("hide_name_regexes", [])):
        return False
    if not node._accounted:
        return False
    mins = {
        "min_float_ops": node.float_ops,
        "min_params": node.parameters,
        "min_micros": node.exec_micros,
        "min_bytes": node.requested_bytes,
    }
    return all(value >= options.get(key, 0) for key, value in mins.items())


# The counts a node has of its own and totals over its subtree.
_COUNTED = ("float_ops", "parameters", "exec_micros", "cpu_exec_micros",
            "accelerator_exec_micros", "output_bytes", "requested_bytes", "run_count")  # fmt: skip


def _total(node) -> None:
    for f in _COUNTED:
        setattr(node, "total_" + f, getattr(node, f))
    for h in node.__dict__.get("_hidden_accounted", ()):
        for f in _COUNTED:
            setattr(node, "total_" + f, getattr(node, "total_" + f) + getattr(h, f))
        node.total_definition_count += 1
    for c in node.children:
        _total(c)
        for f in (*_COUNTED, "definition_count"):
            setattr(node, "total_" + f, getattr(node, "total_" + f) + getattr(c, "total_" + f))


_SORT_FIELDS = {"name": None, "float_ops": "total_float_ops", "params": "total_parameters",
                "micros": "total_exec_micros", "bytes": "total_requested_bytes",
                "occurrence": "total_run_count"}  # fmt: skip


def _sort(node, order_by) -> None:
    field = _SORT_FIELDS.get(order_by)
    if field is None:
        node.children.sort(key=lambda c: c.name)
    else:
        node.children.sort(key=lambda c: (-getattr(c, field), c.name))
    for c in node.children:
        _sort(c, order_by)


def _own_nodes(graph, options, run_meta, op_log) -> dict:
    trainable = _trainable(graph)
    stats = _stats_by_node(run_meta) if run_meta is not None else {}
    regexes = options.get("account_type_regexes", [".*"])
    logged = {e.name: e for e in op_log.log_entries} if op_log is not None else {}
    ops = graph.get_operations()
    return {op.name: _own_node(op, trainable, regexes, stats, logged) for op in ops}


def _scope_tree(graph, options, run_meta, op_log=None) -> GraphNodeProto:
    nodes = _own_nodes(graph, options, run_meta, op_log)
    regexes = options.get("account_type_regexes", [".*"])
    for name in list(nodes):
        # TF's scope tree has a node for every name scope, op or not; one with no op
        # has no type, so only a pattern matching the empty type accounts for it
        parts = name.split("/")
        for i in range(1, len(parts)):
            up = "/".join(parts[:i])
            if up not in nodes:
                nodes[up] = GraphNodeProto(up)
                nodes[up]._accounted = _accounted([""], regexes)
                nodes[up].total_definition_count = 1  # (TF counts a scope as defined)
    root = GraphNodeProto("_TFProfRoot")
    # (TF counts the root as defined when it accounts the displayed nodes only)
    root.total_definition_count = int(bool(options.get("account_displayed_op_only")))
    shown = {name: _shown(n, options) for name, n in nodes.items()}
    every = not options.get("account_displayed_op_only")
    for name in sorted(nodes):
        if not shown[name] and not (every and nodes[name]._accounted):
            continue
        parent = root
        parts = name.split("/")
        for i in range(len(parts) - 1, 0, -1):
            up = "/".join(parts[:i])
            if shown.get(up):
                parent = nodes[up]
                break
        if shown[name]:
            parent.children.append(nodes[name])
        else:
            # Not shown but accounted (account_displayed_op_only off): its counts go to
            # the totals of its nearest shown ancestor, as TF's.
            parent._hidden_accounted.append(nodes[name])
    _total(root)
    root.float_ops = root.parameters = root.exec_micros = 0
    _sort(root, options.get("order_by", "name"))
    # (TF's max_depth counts the root: 1 shows the root alone)
    _trim_depth(root, int(options.get("max_depth", 100)) - 1)
    return root


def _graph_tree(graph, options, run_meta, op_log=None) -> GraphNodeProto:
    """TF's graph view: the ops no op reads are the top nodes (by name), a node's
    children its inputs (data, then control), each op once, under the first node that
    reaches it going depth first; a node not shown hands its children (and, with
    account_displayed_op_only off, its counts) to its nearest shown ancestor."""
    nodes = _own_nodes(graph, options, run_meta, op_log)
    ops = graph.get_operations()
    inputs = {op.name: [t.op.name for t in op.inputs] + [c.name for c in op.control_inputs]
              for op in ops}  # fmt: skip
    read = {i for names in inputs.values() for i in names}
    root = GraphNodeProto("_TFProfRoot")
    root.total_definition_count = int(bool(options.get("account_displayed_op_only")))
    every = not options.get("account_displayed_op_only")
    visited: set = set()
    stack = [(name, root) for name in sorted(inputs, reverse=True) if name not in read]
    while stack:  # (depth first without recursion: graphs can be deep)
        name, parent = stack.pop()
        if name in visited:
            continue
        visited.add(name)
        node = nodes[name]
        if _shown(node, options):
            parent.children.append(node)
            target = node
        else:
            target = parent
            if every and node._accounted:
                parent._hidden_accounted.append(node)
        stack.extend((i, target) for i in reversed(inputs[name]) if i not in visited)
    depth_left = int(options.get("max_depth", 100)) - 1
    for node, depth in _preorder(root):
        if depth >= depth_left:  # (TF's max_depth counts the root; what it cuts off
            node.children = []  # counts in no total of this view, as TF's)
    order = _preorder(root)
    for node, _ in reversed(order):  # (children before parents: _total without recursion)
        children, node.children = node.children, []
        _total(node)
        node.children = children
        for c in children:
            for f in (*_COUNTED, "definition_count"):
                total = "total_" + f
                setattr(node, total, getattr(node, total) + getattr(c, total))
    root.float_ops = root.parameters = root.exec_micros = 0
    field = _SORT_FIELDS.get(options.get("order_by", "name"))
    for node, _ in order:
        if field is None:
            node.children.sort(key=lambda c: c.name)
        else:  # (ties keep the inputs' order, as TF's)
            node.children.sort(key=lambda c: -getattr(c, field))
    return root


def _trim_depth(node, depth) -> None:
    if depth <= 0:
        node.children = []
        return
    for c in node.children:
        _trim_depth(c, depth - 1)


# -- the report ------------------------------------------------------------------------------


def _fmt(n: int) -> str:
    if n < 1000:
        return str(n)
    for div, unit in ((1e9, "b"), (1e6, "m"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.2f}{unit}"
    return str(n)


def _pair(node, field, fmt, root) -> str:
    own = "--" if root else fmt(getattr(node, field))
    return f"{own}/{fmt(getattr(node, 'total_' + field))}"


def _line(node, select, root=False) -> str:
    # (TF's column order, whatever the order of `select`; "micros" brings the
    # accelerator and cpu times beside the total)
    parts = []
    if "params" in select:
        known = not root and node._shape is not None and node._shape.ndims
        dims = [-1 if d is None else d for d in node._shape.as_list()] if known else None
        shape = "x".join(map(str, dims)) + ", " if dims else ""
        # (TF prints no own count for a line of the code view)
        own_hidden = root or getattr(node, "_code", False)
        parts.append(f"{shape}{_pair(node, 'parameters', _fmt, own_hidden)} params")
    if "float_ops" in select:
        parts.append(f"{_pair(node, 'float_ops', _fmt, root)} flops")
    if "bytes" in select:
        parts.append(_pair(node, "requested_bytes", _fmt_bytes, root))
    if "micros" in select:
        for field in ("exec_micros", "accelerator_exec_micros", "cpu_exec_micros"):
            parts.append(_pair(node, field, _fmt_time, root))
    if "occurrence" in select:
        defined = f"{'--' if root else 1}/{node.total_definition_count}"
        parts.append(f"{_pair(node, 'run_count', str, root)}|{defined}")
    return f"{node.name} ({', '.join(parts)})"


def _report(root, options) -> str:
    select = options.get("select", [])
    header = [h for key, h in (("params", "# parameters"), ("float_ops", "# float_ops"),
                               ("bytes", "requested bytes"))
              if key in select]  # fmt: skip
    if "micros" in select:
        header += ["total execution time", "accelerator execution time", "cpu execution time"]
    if "occurrence" in select:
        header.append("op count (run|defined)")
    lines = ["Profile:", "node name | " + " | ".join(header)]

    for node, depth in _preorder(root):
        lines.append("  " * depth + _line(node, select, root=depth == 0))
    return "\n".join(lines) + "\n"


def _preorder(root) -> list:
    """(node, depth) of the tree depth first, parents before children (no recursion:
    a graph view can be as deep as the graph)."""
    out, stack = [], [(root, 0)]
    while stack:
        node, depth = stack.pop()
        out.append((node, depth))
        stack.extend((c, depth + 1) for c in reversed(node.children))
    return out


# -- the op view ----------------------------------------------------------------------------

# A type's counts in the op view: (GraphNodeProto field, selection it belongs to)
_OP_FIELDS = _COUNTED
_OP_ORDER = {"float_ops": "float_ops", "params": "parameters", "micros": "exec_micros",
             "accelerator_micros": "accelerator_exec_micros", "cpu_micros": "cpu_exec_micros",
             "bytes": "requested_bytes", "output_bytes": "output_bytes",
             "occurrence": "run_count"}  # fmt: skip
_OP_MINS = {"min_float_ops": "float_ops", "min_params": "parameters",
            "min_micros": "exec_micros", "min_accelerator_micros": "accelerator_exec_micros",
            "min_cpu_micros": "cpu_exec_micros", "min_bytes": "requested_bytes",
            "min_output_bytes": "output_bytes", "min_occurrence": "run_count"}  # fmt: skip


def _op_tree(graph, options, run_meta, op_log=None) -> MultiGraphNodeProto:
    """TF's op view: one row per op type, chained (each row the child of the one before,
    its totals the rest of the chain's), ordered by `order_by`."""
    by_type: dict[str, list[GraphNodeProto]] = {}
    for node in _own_nodes(graph, options, run_meta, op_log).values():
        if node._accounted:
            by_type.setdefault(node._op_type, []).append(node)
    rows = []
    for kind, nodes in by_type.items():
        row = MultiGraphNodeProto(kind)
        row.graph_nodes = sorted(nodes, key=lambda n: n.name)
        for n in row.graph_nodes:
            for f in _OP_FIELDS:
                setattr(n, "total_" + f, getattr(n, f))
        for f in _OP_FIELDS:
            setattr(row, f, sum(getattr(n, f) for n in nodes))
        row.total_definition_count = len(nodes)
        if _names_shown(kind, options):
            rows.append(row)
    key = _OP_ORDER.get(options.get("order_by", "name"))
    if key is None:
        rows.sort(key=lambda r: r.name)
    else:
        rows.sort(key=lambda r: (-getattr(r, key), r.name))
    _chain_totals(rows)
    # (TF tests the minimums on the chained totals: a row is kept while the rest of the
    # chain still reaches them)
    shown = [r for r in rows if all(getattr(r, "total_" + f) >= options.get(m, 0)
                                    for m, f in _OP_MINS.items())]  # fmt: skip
    shown = shown[: max(int(options.get("max_depth", 100)), 0) + 1]
    root = MultiGraphNodeProto("_TFProfRoot")
    everything = rows if not options.get("account_displayed_op_only") else shown
    if everything is shown:
        _chain_totals(shown)
    # (else a row's totals stay those of the whole chain from it on, the rows not shown
    # included, as TF's)
    for f in _OP_FIELDS:
        setattr(root, "total_" + f, sum(getattr(r, f) for r in everything))
    for upper, lower in zip(shown, shown[1:]):
        upper.children = [lower]
    root.children = shown[:1]
    root._rows = shown
    return root


def _names_shown(name, options) -> bool:
    if not any(re.fullmatch(r, name) for r in options.get("show_name_regexes", [".*"])):
        return False
    return not any(re.fullmatch(r, name) for r in options.get("hide_name_regexes", []))


def _chain_totals(rows) -> None:
    after = dict.fromkeys(_OP_FIELDS, 0)
    for row in reversed(rows):
        row.children = []
        for f in _OP_FIELDS:
            after[f] += getattr(row, f)
            setattr(row, "total_" + f, after[f])


def _fmt_time(us: int) -> str:
    if us >= 1_000_000:
        return f"{us / 1e6:.2f}sec"
    if us >= 1000:
        return f"{us / 1e3:.2f}ms"
    return f"{us}us"


def _fmt_bytes(n: int) -> str:
    for div, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if n >= div:
            return f"{n / div:.2f}{unit}"
    return f"{n}B"


# The op view's columns in TF's order: selection, header, field, formatter.
_OP_COLUMNS = (
    ("bytes", "requested bytes", "requested_bytes", _fmt_bytes),
    ("output_bytes", "output bytes", "output_bytes", _fmt_bytes),
    ("micros", "total execution time", "exec_micros", _fmt_time),
    ("accelerator_micros", "accelerator execution time", "accelerator_exec_micros", _fmt_time),
    ("cpu_micros", "cpu execution time", "cpu_exec_micros", _fmt_time),
    ("params", "# parameters", "parameters", lambda n: _fmt(n) + " params"),
    ("float_ops", "# float_ops", "float_ops", lambda n: _fmt(n) + " float_ops"),
)


def _pct(part, whole) -> float:
    return 100.0 * part / whole if whole else 0.0


def _op_report(root, options) -> str:
    select = set(options.get("select", []))
    if "micros" in select:
        select |= {"accelerator_micros", "cpu_micros"}  # (TF shows the three together)
    columns = [c for c in _OP_COLUMNS if c[0] in select]
    header = [c[1] for c in columns]
    if "occurrence" in select:
        header.append("op occurrence (run|defined)")
    if "input_shapes" in select:
        header.append("input shapes")
    lines = ["Profile:", "node name | " + " | ".join(header)]
    for row in root._rows:
        cells = []
        for _, _, field, fmt in columns:
            own, rest, whole = (getattr(row, field), getattr(row, "total_" + field),
                                getattr(root, "total_" + field))  # fmt: skip
            text = f"{fmt(own)} ({_pct(rest, whole):.2f}%, {_pct(own, whole):.2f}%)"
            cells.append(f"{text:>30}")
        if "occurrence" in select:
            cells.append(f"{f'{row.run_count}|{row.total_definition_count}':>10}")
        lines.append(f"{row.name:<25}" + ", ".join(cells))
        if "input_shapes" in select:
            lines += ["", *_input_types(row), ""]
    return "\n".join(lines) + "\n"


def _dims_text(dims) -> str:
    if dims is None:
        return "unknown"
    # (TF writes a scalar as one element)
    return "x".join("-1" if d is None else str(d) for d in dims) if dims else "1"


def _input_types(row) -> list[str]:
    """TF's lines under an op-view row: the row's ops grouped by their input shapes."""
    groups: dict[str, list] = {}
    for n in row.graph_nodes:
        key = ",\t".join(f"{i}:{_dims_text(d)}" for i, d in sorted(n.input_shapes.items()))
        groups.setdefault(key, []).append(n)
    return [
        f"input_type: {key}\t(run*{sum(n.run_count for n in nodes)}|defined*{len(nodes)})"
        f"\texec_time: {_fmt_time(_micros(nodes))}"
        # (the longest-running first, as TF lists them)
        for key, nodes in sorted(groups.items(), key=lambda kv: (-_micros(kv[1]), kv[0]))
    ]


def _micros(nodes) -> int:
    return sum(n.exec_micros for n in nodes)


# -- the code view --------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _functions_of(path: str) -> tuple:
    """(first line, last line, name) of each function and class defined in `path`."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return ()
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            spans.append((node.lineno, node.end_lineno or node.lineno, node.name))
    return tuple(spans)


def _function_at(path: str, line: int) -> str:
    inside = [s for s in _functions_of(path) if s[0] <= line <= s[1]]
    # (the innermost definition holding the line is the one running it)
    return max(inside)[2] if inside else "<module>"


_GRADIENT_OF = re.compile(r"gradients(?:_\d+)?/(.+?)_grad/")


def _code_name(where: str) -> str | None:
    """TF's name of a Python line: file's base name, line, function (cut to 17
    characters and "..." when 20 or longer)."""
    path, _, line = where.rpartition(":")
    if not path or not line.isdigit():
        return None
    func = _function_at(path, int(line))
    if len(func) >= 20:
        func = func[:17] + "..."
    return f"{os.path.basename(path)}:{line}:{func}"


def _code_tree(graph, options, run_meta, op_log=None) -> MultiGraphNodeProto:
    """TF's code view over the Python lines that built the ops; a gradient op goes to
    its forward op's line with " (gradient)" after it, as TF's.

    asyncflow records one line per op (the user's innermost), so the tree is that one
    level: a line's node holds its ops (TF's holds them in the frames below it, down to
    TF's own internals, so its own counts are 0 there); names and totals are TF's for
    ops built at a script's top level.
    """
    nodes = _own_nodes(graph, options, run_meta, op_log)
    by_line: dict[str, MultiGraphNodeProto] = {}
    for op in graph.get_operations():
        node = nodes[op.name]
        if not node._accounted:
            continue
        source, suffix = op, ""
        forward = _GRADIENT_OF.search(op.name)
        if forward is not None:
            try:
                source, suffix = graph.get_operation_by_name(forward.group(1)), " (gradient)"
            except (KeyError, ValueError):
                pass
        name = _code_name(source.traceback or "")
        if name is None:
            continue
        row = by_line.setdefault(name + suffix, MultiGraphNodeProto(name + suffix))
        row.graph_nodes.append(node)
    rows = []
    for row in by_line.values():
        row.graph_nodes.sort(key=lambda n: n.name)
        for f in _OP_FIELDS:
            total = sum(getattr(n, f) for n in row.graph_nodes)
            setattr(row, f, total)
            setattr(row, "total_" + f, total)
        row.total_definition_count = len(row.graph_nodes)
        row._code = True
        if _names_shown(row.name, options) and all(
            getattr(row, "total_" + f) >= options.get(m, 0) for m, f in _OP_MINS.items()
        ):
            rows.append(row)
    key = _OP_ORDER.get(options.get("order_by", "name"))
    rows.sort(key=(lambda r: r.name) if key is None else (lambda r: (-getattr(r, key), r.name)))
    root = MultiGraphNodeProto("_TFProfRoot")
    for f in _OP_FIELDS:
        setattr(root, "total_" + f, sum(getattr(r, f) for r in rows))
    root.children = rows if int(options.get("max_depth", 100)) > 1 else []
    return root


def profile_graph(graph, run_meta, cmd, options, op_log=None) -> GraphNodeProto:
    """The tfprof view `cmd` of `graph` under `options` (printed as `output` says).

    Raises:
      InvalidArgumentError: a cmd other than scope, graph, op and code.

    `op_log`: an OpLogProto whose entries add types (for `account_type_regexes`) and
    float operations to the named ops.
    """
    options = {**_DEFAULTS, **options}
    if cmd == "scope":
        root = _scope_tree(graph, options, run_meta, op_log)
        text = _report
    elif cmd == "graph":
        root = _graph_tree(graph, options, run_meta, op_log)
        text = _report
    elif cmd == "op":
        root = _op_tree(graph, options, run_meta, op_log)
        text = _op_report
    elif cmd == "code":
        root = _code_tree(graph, options, run_meta, op_log)
        text = _report
    else:
        from asyncflow import errors

        raise errors.InvalidArgumentError(None, None, f"unknown cmd: {cmd}")
    output = str(options.get("output", "stdout"))
    if output.startswith("file:"):
        path = output.split("outfile=", 1)[1]
        with open(path, "w") as f:
            f.write(text(root, options))
    elif output != "none":
        sys.stdout.write(text(root, options))
    return root
