"""`tf.lite.OpHint` and `tf.lite.experimental.convert_op_hints_to_stubs` (both deprecated
in TF 2.21, kept as TF keeps them).

An OpHint marks a subgraph as one TFLite custom op: `add_input`/`add_output` wrap
tensors in Identity ops named `InputHint-<function>-<uuid>-<index>-<sort>-<name>` (and
`OutputHint-...`) that carry `_tflite_*` attrs. `convert_op_hints_to_stubs` rewrites a
GraphDef so each hinted call becomes one node of op type `<function>` named by the
call's uuid, reading the input hints (a `Const` of [-1] is added for unused input
slots, as TF adds it) and read by the output hints; the nodes between them are
dropped. Tagged arguments are packed (`stack`: a Pack in, an Unpack out) or reduced
to their first/last one, and a stub output unpacked only to be packed again for the
next stub is connected directly, as TF does. Nested (level >= 2) hints are recorded as
TF records them, but converting them raises ValueError here.
"""

from __future__ import annotations

import collections
import copy
import sys
import uuid as uuid_mod

import numpy as np

from asyncflow import dtypes, tf_logging
from asyncflow.framework_extras import make_tensor_proto
from asyncflow.ops import array_ops
from asyncflow.protos import AttrValue, GraphDef, NodeDef

_warned: set[str] = set()
_INSTRUCTIONS = (
    "Please follow instructions under "
    "https://www.tensorflow.org/lite/convert/operation_fusion for operationfusion in tflite."
)


def _deprecated(name: str) -> None:
    if name in _warned:
        return
    _warned.add(name)
    frame = sys._getframe(2)
    tf_logging.warning(
        "From %s:%d: %s (from tensorflow.lite.python.op_hint) is deprecated and will be "
        "removed in a future version.\nInstructions for updating:\n%s",
        frame.f_code.co_filename,
        frame.f_lineno,
        name,
        _INSTRUCTIONS,
    )


class OpHint:
    """Marks a subgraph's inputs and outputs as one TFLite custom op call."""

    FUNCTION_NAME_ATTR = "_tflite_function_name"
    FUNCTION_UUID_ATTR = "_tflite_function_uuid"
    FUNCTION_INPUT_INDEX_ATTR = "_tflite_function_input_index"
    FUNCTION_OUTPUT_INDEX_ATTR = "_tflite_function_output_index"
    FUNCTION_SORT_INDEX_ATTR = "_tflite_function_sort_index"
    FUNCTION_AGGREGATE_ATTR = "_tflite_function_aggregate"
    TFLITE_INPUT_INDICES = "_tflite_input_indices"
    FUNCTION_LEVEL_ATTR = "_tflite_ophint_level"
    CHILDREN_INPUTS_MAPPINGS = "_tflite_children_ophint_inputs_mapping"
    AGGREGATE_STACK = "stack"
    AGGREGATE_FIRST = "first"
    AGGREGATE_LAST = "last"

    class OpHintArgumentTracker:
        """Numbers one side's (inputs' or outputs') arguments of a hinted call."""

        def __init__(
            self,
            function_name,
            unique_function_id,
            node_name_prefix,
            attr_name,
            level=1,
            children_inputs_mappings=None,
        ):
            self._function_name = function_name
            self._unique_function_id = unique_function_id
            self._next_global_index = 0
            self._used_global_indices: set[int] = set()
            self._tag_to_global_index: dict = {}
            self._tag_to_next_sort_index: dict = {}
            self._node_name_prefix = node_name_prefix
            self._attr_name = attr_name
            self._level = level
            self._children_inputs_mappings = children_inputs_mappings

        def _get_new_global_index(self, index_override):
            if index_override is None:
                index = self._next_global_index
            else:
                if index_override in self._used_global_indices:
                    # TF's message (its %d is never filled in).
                    raise ValueError("Index %d was already used by another call to add")
                index = index_override
            self._used_global_indices.add(index)
            while self._next_global_index in self._used_global_indices:
                self._next_global_index += 1
            return index

        def add(self, arg, tag=None, name=None, aggregate=None, index_override=None):
            """Wraps `arg` in a hint Identity; returns it.

            Raises:
              ValueError: `aggregate` without `tag` or the reverse, or indices that
                disagree.
            """
            if tag is None:
                if aggregate is not None:
                    raise ValueError("You must specify `tag` if using aggregate.")
                index = self._get_new_global_index(index_override)
                sort = None
            else:
                if aggregate is None:
                    raise ValueError("You must specify `aggregate` if using tag.")
                if tag not in self._tag_to_global_index:
                    self._tag_to_global_index[tag] = self._get_new_global_index(index_override)
                    self._tag_to_next_sort_index[tag] = 0
                elif index_override and index_override != self._tag_to_global_index[tag]:
                    raise ValueError(
                        f"Tag {tag!r} was called with two indices {index_override!r} and "
                        f"{self._tag_to_global_index[tag]!r}"
                    )
                index = self._tag_to_global_index[tag]
                sort = self._tag_to_next_sort_index[tag]
                self._tag_to_next_sort_index[tag] += 1
            label = (
                f"{self._node_name_prefix}-{self._function_name}-{self._unique_function_id}"
                f"-{index!r}-{sort!r}-{name}"
            )
            out = array_ops.identity(arg, name=label)
            attrs = out.op._attrs
            attrs[OpHint.FUNCTION_NAME_ATTR] = self._function_name.encode()
            attrs[OpHint.FUNCTION_UUID_ATTR] = self._unique_function_id.encode()
            attrs[self._attr_name] = index
            attrs[OpHint.FUNCTION_LEVEL_ATTR] = self._level
            if self._children_inputs_mappings:
                import json

                attrs[OpHint.CHILDREN_INPUTS_MAPPINGS] = json.dumps(
                    self._children_inputs_mappings
                ).encode()
            if sort is not None:
                attrs[OpHint.FUNCTION_SORT_INDEX_ATTR] = sort
            if aggregate is not None:
                attrs[OpHint.FUNCTION_AGGREGATE_ATTR] = str(aggregate).encode()
            return out

    def __init__(self, function_name, level=1, children_inputs_mappings=None, **kwargs):
        _deprecated("OpHint.__init__")
        self._function_name = function_name
        self._level = level
        if level == 1:
            assert children_inputs_mappings is None
        else:
            assert isinstance(children_inputs_mappings, dict)
        self._children_inputs_mappings = children_inputs_mappings
        self._unique_function_id = uuid_mod.uuid1().hex
        # TF keeps these keyword attributes and never writes them anywhere.
        self._attrs_to_store_later = kwargs
        self._inputs = OpHint.OpHintArgumentTracker(
            function_name,
            self._unique_function_id,
            "InputHint",
            OpHint.FUNCTION_INPUT_INDEX_ATTR,
            level,
            children_inputs_mappings,
        )
        self._outputs = OpHint.OpHintArgumentTracker(
            function_name,
            self._unique_function_id,
            "OutputHint",
            OpHint.FUNCTION_OUTPUT_INDEX_ATTR,
            level,
            children_inputs_mappings,
        )

    def add_input(self, *args, **kwargs):
        """Wraps an input (`name`, `tag`, `aggregate`, `index_override` as TF)."""
        return self._inputs.add(*args, **kwargs)

    def add_output(self, *args, **kwargs):
        """Wraps an output (`name`, `tag`, `aggregate`, `index_override` as TF)."""
        return self._outputs.add(*args, **kwargs)

    def add_inputs(self, *args, **kwargs):
        """Wraps several inputs; `names=` labels them."""
        if "names" in kwargs:
            return [self._inputs.add(a, name=n) for a, n in zip(args, kwargs["names"])]
        return [self._inputs.add(a) for a in args]

    def add_outputs(self, *args, **kwargs):
        """Wraps several outputs; `names=` labels them."""
        if "names" in kwargs:
            return [self._outputs.add(a, name=n) for a, n in zip(args, kwargs["names"])]
        return [self._outputs.add(a) for a in args]


def _base(name: str) -> str:
    return name[1:] if name.startswith("^") else name.split(":")[0]


class _Call:
    def __init__(self):
        self.uuid = b""
        self.function_name = b""
        self.level = 1
        self.inputs: dict = {}  # index -> NodeDef, or _Aggregate for tagged arguments
        self.outputs: dict = {}


class _Aggregate:
    """Tagged arguments of one index, by sort index: packed (stack) or one kept."""

    def __init__(self, aggregation: str):
        self.aggregation = aggregation
        self.nodes: dict[int, NodeDef] = {}

    def flat(self) -> list:
        nodes = [self.nodes[k] for k in sorted(self.nodes)]
        if self.aggregation == OpHint.AGGREGATE_FIRST:
            return nodes[:1]
        if self.aggregation == OpHint.AGGREGATE_LAST:
            return nodes[-1:]
        if self.aggregation == OpHint.AGGREGATE_STACK:
            return nodes
        raise ValueError(f"Invalid aggregation type {self.aggregation!r} specified")

    def packed(self) -> bool:
        return self.aggregation == OpHint.AGGREGATE_STACK or len(self.flat()) != 1


def _names(operand) -> list[str]:
    nodes = operand.flat() if isinstance(operand, _Aggregate) else [operand]
    return [_base(n.name) for n in nodes]


def _find_calls(nodes) -> dict:
    calls: dict = collections.defaultdict(_Call)
    for node in nodes:
        attr = node.attr
        if OpHint.FUNCTION_UUID_ATTR not in attr or not attr[OpHint.FUNCTION_UUID_ATTR].s:
            continue
        key = attr[OpHint.FUNCTION_UUID_ATTR].s
        call = calls[key]
        call.uuid = key
        call.function_name = attr[OpHint.FUNCTION_NAME_ATTR].s
        call.level = attr[OpHint.FUNCTION_LEVEL_ATTR].i
        if call.level >= 2:
            raise ValueError(
                "asyncflow's convert_op_hints_to_stubs converts level-1 hints; "
                f"{node.name} is a nested hint."
            )
        sort = None
        if OpHint.FUNCTION_SORT_INDEX_ATTR in attr:
            sort = attr[OpHint.FUNCTION_SORT_INDEX_ATTR].i
            sort = None if sort == -1 else sort
        aggregation = None
        if OpHint.FUNCTION_AGGREGATE_ATTR in attr:
            aggregation = attr[OpHint.FUNCTION_AGGREGATE_ATTR].s.decode()
        for index_attr, side in (
            (OpHint.FUNCTION_INPUT_INDEX_ATTR, call.inputs),
            (OpHint.FUNCTION_OUTPUT_INDEX_ATTR, call.outputs),
        ):
            if index_attr not in attr:
                continue
            index = attr[index_attr].i
            if sort is None:
                side[index] = node
            else:
                side.setdefault(index, _Aggregate(aggregation)).nodes[sort] = node
    return calls


def _reachable(targets, inputs_of) -> set:
    seen: set = set()
    todo = list(targets)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(inputs_of.get(n, ()))
    return seen


def _summary(graph_def):
    inputs_of, by_name, order = {}, {}, {}
    for k, node in enumerate(graph_def.node):
        n = _base(node.name)
        by_name[n] = node
        inputs_of[n] = [_base(i) for i in node.input]
        if "_class" in node.attr:
            inputs_of[n] += [c.decode()[5:] for c in node.attr["_class"].list.s]
        order[n] = k
    return inputs_of, by_name, order


def _input_name(operand, out) -> str:
    if not isinstance(operand, _Aggregate):
        return _base(operand.name)
    flat = operand.flat()
    if not operand.packed():
        return _base(flat[0].name)
    pack = out.node.add()
    pack.op = "Pack"
    pack.name = f"OpHintStack-{flat[0].name}"
    pack.attr["N"].i = len(flat)
    pack.attr["T"].type = flat[0].attr["T"].type
    pack.input.extend(_base(n.name) for n in flat)
    return pack.name


def _output(operand, stub: str, k: int, out) -> None:
    source = stub if k == 0 else f"{stub}:{k}"
    if isinstance(operand, _Aggregate) and operand.packed():
        flat = operand.flat()
        unpack = out.node.add()
        unpack.op = "Unpack"
        unpack.name = f"OpHintUnstack-{flat[0].name}"
        unpack.attr["num"].i = len(flat)
        unpack.attr["T"].type = flat[0].attr["T"].type
        unpack.input.append(source)
        for j, n in enumerate(flat):
            node = copy.deepcopy(n)
            del node.input[:]
            node.input.append(unpack.name if j == 0 else f"{unpack.name}:{j}")
            out.node.append(node)
        return
    node = copy.deepcopy(operand.flat()[0] if isinstance(operand, _Aggregate) else operand)
    del node.input[:]
    node.input.append(source)
    out.node.append(node)


def _stub(call: _Call, graph_def) -> GraphDef:
    """`graph_def` with `call`'s subgraph replaced by one stub node."""
    inputs_of, by_name, order = _summary(graph_def)
    in_names = [n for op in call.inputs.values() for n in _names(op)]
    out_names = [n for op in call.outputs.values() for n in _names(op)]
    by_input = _reachable(in_names, inputs_of)
    by_output = _reachable(out_names, inputs_of)
    deleted, after = set(), []
    for node in graph_def.node:
        n = _base(node.name)
        if n in by_output:
            if n not in by_input and n not in out_names:
                deleted.add(n)
        elif n not in by_input:
            after.append(n)
    out = GraphDef()
    for n in sorted(by_input, key=lambda m: order[m]):
        out.node.add().CopyFrom(by_name[n])
    filler = out.node.add()
    filler.name = "Const" + uuid_mod.uuid1().hex
    filler.op = "Const"
    filler.attr["dtype"].CopyFrom(AttrValue(type=dtypes.float32.as_datatype_enum))
    filler.attr["value"].CopyFrom(
        AttrValue(tensor=make_tensor_proto(np.float32([-1]), dtypes.float32, [1]))
    )
    stub = NodeDef()
    for k in range(max(call.inputs) + 1 if call.inputs else 0):
        stub.input.append(_input_name(call.inputs[k], out) if k in call.inputs else filler.name)
    stub.attr[OpHint.TFLITE_INPUT_INDICES].list.i.extend(sorted(call.inputs))
    stub.op = call.function_name.decode()
    stub.name = call.uuid.decode()
    out.node.append(stub)
    for k in sorted(call.outputs):
        _output(call.outputs[k], stub.name, k, out)
    for n in after:
        if not any(i in deleted for i in inputs_of[n]):
            out.node.add().CopyFrom(by_name[n])
    out.library.CopyFrom(graph_def.library)
    out.versions.CopyFrom(graph_def.versions)
    return out


def _drop_one_stack_unstack(graph_def):
    """TF's clean-up: a Pack reached from exactly one Unpack through Identity/Pack
    nodes only (a stub's output unpacked, then packed again for the next stub) reads
    that Unpack's input directly; the nodes between are dropped. (graph_def, changed)"""
    inputs_of, by_name, _ = _summary(graph_def)
    for node in graph_def.node:
        pack = _base(node.name)
        if not pack.startswith("OpHintStack") and not node.op.startswith("Pack"):
            continue
        todo, visited, unpacks = [pack], set(), set()
        hint_stack, matches = False, True
        while todo:
            current = todo.pop(0)
            visited.add(current)
            n = by_name[current]
            if n.op == "Identity" or n.name.startswith("OpHintStack") or n.op == "Pack":
                hint_stack |= n.name.startswith("OpHintStack")
                todo += [i for i in inputs_of[current] if i not in visited]
            elif n.name.startswith("OpHintUnstack") or n.op == "Unpack":
                unpacks.add(n.name)
                hint_stack &= n.name.startswith("OpHintUnstack")
            else:
                matches = False
                break
        if not matches or len(unpacks) != 1:
            continue
        external = any(
            i in visited and i != pack
            for other in graph_def.node
            if other.name not in visited
            for i in inputs_of[other.name]
        )
        if not hint_stack and external:
            continue
        end_input = by_name[unpacks.pop()].input[0]
        out = GraphDef()
        out.library.CopyFrom(graph_def.library)
        out.versions.CopyFrom(graph_def.versions)
        for other in graph_def.node:
            name = _base(other.name)
            if name in visited:
                continue
            new = out.node.add()
            new.CopyFrom(other)
            new.input[:] = [
                end_input if stripped == pack else raw
                for stripped, raw in zip(inputs_of[name], other.input, strict=False)
            ]
        return out, True
    return graph_def, False


def convert_op_hints_to_stubs(
    session=None, graph_def=None, write_callback=lambda graph_def, comments: None
):
    """A GraphDef with each OpHint call replaced by its one stub node.

    Raises:
      ValueError: both or neither of `session` and `graph_def`, or hints asyncflow
        does not convert (aggregated arguments, nested hints).
    """
    _deprecated("convert_op_hints_to_stubs")
    if session is not None and graph_def is not None:
        raise ValueError("Provide only one of session and graph_def.")
    if session is not None:
        graph_def = session.graph.as_graph_def()
    elif graph_def is None:
        raise ValueError("Must specify session or graph_def as input.")
    current = graph_def
    # TF stubs the calls in the reverse of the order it first meets them.
    for call in reversed(list(_find_calls(graph_def.node).values())):
        current = _stub(call, current)
        write_callback(current, "initial")
    changed = True
    while changed:
        current, changed = _drop_one_stack_unstack(current)
    return current
