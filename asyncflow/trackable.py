"""`tf.Module` and the object graph of TF2-style (object-based) checkpoints.

An object-based checkpoint names each value by the path of attribute names that leads to
it from a root object ("model/layer/kernel"), not by the variable's graph name.  This
module decides what is an object of that graph and what its children are:
  - a variable is a leaf holding one value, VARIABLE_VALUE;
  - a Module's children are its attributes holding trackable values, in the order the
    attributes were first assigned (Python keeps `vars()` in that order, as TF keeps its
    dependency list);
  - a list or tuple is a node whose children are its trackable items, named by index;
    a dict is a node whose children are its trackable values, named by key, in
    insertion order; lists, tuples and dicts are nodes even when they hold no
    trackable value (TF wraps them on assignment);
  - other types (the optimizers, tf.train.Checkpoint) join through `register_trackable`
    or a `_trackable_children()` method, so this library-layer module never imports
    the layers above it.

`build_object_graph` walks breadth first from the root, as TF does, so node ids, the
checkpoint keys and the TrackableObjectGraph proto are TF's: node 0 is the root, an object
reached twice keeps its first path, optimizer slot variables follow every other node.

Invariants: the walk never follows an object twice (cycles end); a key is the escaped
path ("." -> "..", "/" -> ".S") plus "/.ATTRIBUTES/VARIABLE_VALUE".
"""

from __future__ import annotations

import abc
import functools
import re
from collections.abc import Callable

from asyncflow import dtypes as _dtypes
from asyncflow import graph as ops
from asyncflow import variables as variables_mod
from asyncflow.protos.trackable_object_graph_pb2 import TrackableObjectGraph

__all__ = ["Module", "PythonState"]

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
VARIABLE_VALUE = "VARIABLE_VALUE"
PY_STATE = "py_state"
_ATTRIBUTES = ".ATTRIBUTES"
_OPTIMIZER_SLOT = ".OPTIMIZER_SLOT"


@functools.cache
def _registry() -> dict:
    return {}


def register_trackable(cls, children: Callable, slots: Callable | None = None) -> None:
    """Make instances of `cls` objects of the graph.

    `children(obj)` returns [(name, child)]; `slots(obj)` returns the optimizer-style
    slot variables as [(slot_name, variable_identity(original variable), slot)] and is
    also used to find a slot by name when restoring.
    """
    _registry()[cls] = (children, slots)


def _registered(obj):
    for cls, fns in _registry().items():
        if isinstance(obj, cls):
            return fns
    return None


class PythonState(abc.ABC):
    """`tf.train.experimental.PythonState`: Python state saved in object-based
    checkpoints as one string, "<path>/.ATTRIBUTES/py_state".

    Subclasses define `serialize()` (called when a checkpoint is written, returning the
    state as a string) and `deserialize(string_value)` (called when it is restored,
    with the bytes read back, as TF's graph mode passes them).
    """

    @abc.abstractmethod
    def serialize(self):
        """The state as a string."""

    @abc.abstractmethod
    def deserialize(self, string_value):
        """Set the state from `string_value`, as `serialize` returned it."""

    def _trackable_children(self) -> list:
        return []


def is_variable(value) -> bool:
    return isinstance(value, variables_mod.Variable)


def is_trackable(value) -> bool:
    """Whether assigning `value` to a Module attribute makes it a node of the graph."""
    if isinstance(value, variables_mod.Variable | list | tuple | dict):
        return True
    return hasattr(value, "_trackable_children") or _registered(value) is not None


def legacy_children_of(obj) -> list[tuple[str, object]]:
    """The children an older asyncflow gave `obj` in checkpoints where they differ from
    its children now (a Keras layer holding layers): restores match a checkpoint's key
    against these when `obj`'s children lack it."""
    legacy = getattr(obj, "_legacy_trackable_children", None)
    return list(legacy()) if legacy is not None else []


def children_of(obj) -> list[tuple[str, object]]:
    """The named children of `obj` in TF's order.

    Raises:
      ValueError: a dict maps a non-string key to a trackable value (TF cannot name it).
    """
    if is_variable(obj):
        return []
    if isinstance(obj, list | tuple):
        return [(str(i), v) for i, v in enumerate(obj) if is_trackable(v)]
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            if not is_trackable(v):
                continue
            if not isinstance(k, str):
                raise ValueError(
                    f"Unable to save the object {obj} (a dictionary wrapper constructed "
                    "automatically on attribute assignment). The wrapped dictionary "
                    "contains a non-string key which maps to a trackable object or "
                    "mutable data structure."
                )
            out.append((k, v))
        return out
    if hasattr(obj, "_trackable_children"):
        return list(obj._trackable_children())
    fns = _registered(obj)
    return list(fns[0](obj)) if fns else []


def slots_of(obj) -> list[tuple[str, object, object]]:
    fns = _registered(obj)
    return list(fns[1](obj)) if fns and fns[1] else []


def escape_local_name(name: str) -> str:
    """A local name as it appears in a checkpoint key ("." -> "..", "/" -> ".S")."""
    return name.replace(".", "..").replace("/", ".S")


def variable_identity(var) -> tuple:
    """How a slot names the variable it belongs to: (graph, op name)."""
    return (var.op.graph, var.op.name)


def variable_full_name(var) -> str:
    return var.op.name


class ObjectGraph:
    """What one breadth-first walk found.

    nodes: the objects by node id; paths: escaped key paths by node id; names: the
    pretty names TF prints ("(root).model.kernel"); values: [(checkpoint key, variable)];
    proto: the TrackableObjectGraph.
    """

    def __init__(self, root):
        self.nodes: list = [root]
        self.ids: dict[int, int] = {id(root): 0}
        self.paths: list[str] = [""]
        self.names: list[str] = ["(root)"]
        self.values: list[tuple[str, object]] = []
        self.proto = TrackableObjectGraph()


def _slot_key(var_path: str, opt_path: str, slot_name: str) -> str:
    return f"{var_path}/{_OPTIMIZER_SLOT}/{opt_path}/{escape_local_name(slot_name)}"


def build_object_graph(root) -> ObjectGraph:
    """Walk the objects reachable from `root`, breadth first (TF's node ids and keys).

    Raises:
      NotImplementedError: a slot variable is also an ordinary node of the graph.
      ValueError: see `children_of`.
    """
    g = ObjectGraph(root)
    edges: list[list[tuple[str, int]]] = []
    i = 0
    while i < len(g.nodes):
        kids = []
        for name, child in children_of(g.nodes[i]):
            cid = g.ids.get(id(child))
            if cid is None:
                cid = len(g.nodes)
                g.ids[id(child)] = cid
                g.nodes.append(child)
                path = escape_local_name(name)
                g.paths.append(f"{g.paths[i]}/{path}" if i else path)
                g.names.append(f"{g.names[i]}.{name}")
            kids.append((name, cid))
        edges.append(kids)
        i += 1
    slot_refs: dict[int, list] = {}
    n_plain = len(g.nodes)
    var_ids = {variable_identity(o): i for i, o in enumerate(g.nodes) if is_variable(o)}
    for oid in range(n_plain):
        found = [(name, var_ids.get(key), slot) for name, key, slot in slots_of(g.nodes[oid])]
        # TF's order: slot names sorted, then the variables in node order.
        found = sorted((f for f in found if f[1] is not None), key=lambda f: (f[0], f[1]))
        for slot_name, vid, slot in found:
            if id(slot) in g.ids:
                raise NotImplementedError(
                    "A slot variable was re-used as a dependency of a Trackable object. "
                    "This is not currently allowed. File a feature request if this "
                    "limitation bothers you."
                )
            sid = len(g.nodes)
            g.ids[id(slot)] = sid
            g.nodes.append(slot)
            g.paths.append(_slot_key(g.paths[vid], g.paths[oid], slot_name))
            g.names.append(f"{g.names[vid]}'s state '{slot_name}' for {g.names[oid]}")
            edges.append([])
            slot_refs.setdefault(oid, []).append((vid, slot_name, sid))
    _fill_proto(g, edges, slot_refs)
    return g


def _fill_proto(g: ObjectGraph, edges, slot_refs) -> None:
    has_values = [False] * len(g.nodes)
    for nid, obj in enumerate(g.nodes):
        node = g.proto.nodes.add()
        for name, cid in edges[nid]:
            node.children.add(node_id=cid, local_name=name)
        if is_variable(obj):
            key = f"{g.paths[nid]}/{_ATTRIBUTES}/{VARIABLE_VALUE}"
            node.attributes.add(
                name=VARIABLE_VALUE, full_name=variable_full_name(obj), checkpoint_key=key
            )
            g.values.append((key, obj))
            has_values[nid] = True
        elif isinstance(obj, PythonState):
            key = f"{g.paths[nid]}/{_ATTRIBUTES}/{PY_STATE}"
            node.attributes.add(name=PY_STATE, checkpoint_key=key)
            g.values.append((key, obj))
            has_values[nid] = True
        for vid, slot_name, sid in slot_refs.get(nid, ()):
            node.slot_variables.add(
                original_variable_node_id=vid, slot_name=slot_name, slot_variable_node_id=sid
            )
            has_values[nid] = True
    # A node has values when it or anything below it has (children have larger ids
    # than their first parent, but a later parent may point back: iterate to a fixpoint).
    changed = True
    while changed:
        changed = False
        for nid in range(len(g.nodes)):
            if not has_values[nid] and any(has_values[c] for _, c in edges[nid]):
                has_values[nid] = changed = True
    for nid, node in enumerate(g.proto.nodes):
        node.has_checkpoint_values.value = has_values[nid]


# -- tf.Module -----------------------------------------------------------------------------

_VALID_IDENTIFIER = re.compile(r"^[a-zA-Z_]([a-zA-Z0-9_])*$")


def _camel_to_snake(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


class _ModuleNameScope:
    """A Module's name scope: re-enters the scope the Module got at construction."""

    def __init__(self, name: str):
        self.name = name
        self._stack: list = []

    def __enter__(self) -> str:
        cm = ops.get_default_graph().name_scope(self.name)
        self._stack.append(cm)
        return cm.__enter__()

    def __exit__(self, *exc):
        return self._stack.pop().__exit__(*exc)


def _flatten(obj, path: tuple):
    """(path, leaf) pairs of nested lists, tuples and dicts (dicts in sorted key order,
    as tf.nest flattens them)."""
    if isinstance(obj, dict):
        for k in sorted(obj):
            yield from _flatten(obj[k], (*path, k))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _flatten(v, (*path, i))
    else:
        yield path, obj


class Module:
    """Base class for a named container of variables and other Modules (`tf.Module`).

    Attributes holding variables, Modules, or lists/tuples/dicts of them are tracked:
    they are found by `variables` / `submodules` and saved by `tf.train.Checkpoint`.

    Raises (at construction):
      ValueError: `name` is not a valid Python identifier.
    """

    _TF_MODULE_IGNORED_PROPERTIES = frozenset(
        ("_self_unconditional_checkpoint_dependencies", "_self_unconditional_dependency_names")
    )

    def __init__(self, name: str | None = None):
        if name is None:
            name = _camel_to_snake(type(self).__name__)
        elif not _VALID_IDENTIFIER.match(name):
            raise ValueError(
                f"{name!r} is not a valid module name. Module names must be valid Python "
                "identifiers (e.g. a valid class name)."
            )
        self._name = name
        with ops.get_default_graph().name_scope(name) as scope_name:
            self._name_scope = _ModuleNameScope(scope_name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def name_scope(self) -> _ModuleNameScope:
        """The scope this Module's ops and variables go under ("dense/", "dense_1/")."""
        return self._name_scope

    @property
    def variables(self) -> tuple:
        """Every variable of this Module and its submodules (attribute names sorted)."""
        return tuple(self._flatten(predicate=is_variable))

    @property
    def trainable_variables(self) -> tuple:
        return tuple(self._flatten(predicate=lambda v: is_variable(v) and v.trainable))

    @property
    def non_trainable_variables(self) -> tuple:
        return tuple(self._flatten(predicate=lambda v: is_variable(v) and not v.trainable))

    @property
    def submodules(self) -> tuple:
        """Every Module below this one, direct ones first."""
        return tuple(self._flatten(predicate=lambda m: isinstance(m, Module)))

    def _flatten(self, recursive=True, predicate=None, attribute_traversal_key=None,
                 with_path=False, expand_composites=False):  # fmt: skip
        """Leaves of this Module's attributes matching `predicate`, TF's traversal."""
        predicate = predicate or (lambda _: True)
        return _flatten_module(
            self, recursive, predicate, attribute_traversal_key, with_path, (), None, []
        )

    def _trackable_children(self) -> list[tuple[str, object]]:
        return [
            (k, v)
            for k, v in vars(self).items()
            if k not in self._TF_MODULE_IGNORED_PROPERTIES and is_trackable(v)
        ]

    @classmethod
    def with_name_scope(cls, method):
        """Decorator: run `method` inside the Module's name scope."""

        @functools.wraps(method)
        def wrapped(self, *args, **kwargs):
            with self.name_scope:
                return method(self, *args, **kwargs)

        return wrapped


def _flatten_module(module, recursive, predicate, key, with_path, module_path, seen, stack):
    # Invariant: without paths a leaf is yielded once (first occurrence); a Module met
    # again while inside itself is not recursed into (cycles end).
    if seen is None:
        seen = {id(module)}
    recursive = recursive and id(module) not in stack
    submodules = []
    for name in sorted(vars(module), key=key):
        if name in Module._TF_MODULE_IGNORED_PROPERTIES:
            continue
        for leaf_path, leaf in _flatten(vars(module)[name], (name,)):
            if not with_path:
                if id(leaf) in seen:
                    continue
                seen.add(id(leaf))
            if predicate(leaf):
                yield (module_path + leaf_path, leaf) if with_path else leaf
            if recursive and isinstance(leaf, Module):
                submodules.append((module_path + leaf_path, leaf))
    stack.append(id(module))
    for sub_path, sub in submodules:
        yield from _flatten_module(sub, recursive, predicate, key, with_path, sub_path, seen,
                                   stack)  # fmt: skip
    stack.pop()


class Asset:
    """`tf.saved_model.Asset`, an asset file of a SavedModel (a node of the object
    graph; here so that library-layer objects such as lookup tables can hold one):
    `asset_path` is a string constant holding the path (on the CPU, named "asset_path",
    as TF builds it in a graph).

    Raises:
      TypeError: `path` is not a string or string tensor.
    """

    def __init__(self, path):
        if isinstance(path, ops.Tensor):
            if path.dtype.base_dtype != _dtypes.string:
                raise TypeError(f"Expected string, but got {path} of type 'Tensor'.")
            self._path = path
            return
        if not isinstance(path, (str, bytes)):
            raise TypeError(f"Expected string, but got {path} of type '{type(path).__name__}'.")
        with ops.device("/device:CPU:*"):
            self._path = ops.convert_to_tensor(path, dtype=_dtypes.string, name="asset_path")

    @property
    def asset_path(self) -> ops.Tensor:
        return self._path

    def _trackable_children(self) -> list:
        return []
