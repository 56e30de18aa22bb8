"""The op registry: one OpDef per op type, holding everything about the op.

An OpDef names its typed inputs and outputs, its attrs (with defaults and type
constraints), its shape function, its kernels, its gradient and whether it is
stateful.  `ops/<family>.py` registers ops at import time; the graph builds
Operations from OpDefs, the executor looks kernels up here.

Kernels (DESIGN.md "Kernel contract"): `@Op.kernel()` registers the op's generic
kernel, written once against `ctx.xp` and used on every device; `@Op.kernel("CPU")`
registers a kernel for one device type only, where the code truly differs (host-only
work: strings, queues, files, Python loops over values).  `kernel_for(device_type)`
picks the device-specific kernel first, else the generic one; which device types run
an op is derived from that, never kept in a second list.  `host_memory=(names...)`
names inputs and outputs that stay in host memory on non-CPU devices (TF's
HostMemory: shape, axis, perm and size arguments; Shape/Size/Rank results), so the
kernel reads them as host values wherever it runs.

Argument specs are TF's strings:
  "x: T"          one tensor whose dtype is the type attr T
  "x: float32"    one tensor of a fixed dtype
  "values: N * T" N tensors (N an int attr) all of dtype T
  "outs: Tlist"   a list of tensors whose dtypes are the list(type) attr Tlist
  "ref: Ref(T)"   a reference to a variable (stateful ops that update it)

Attr specs map a name to its default.  A `TypeConstraint` (e.g. NUMERIC) marks a
type attr and lists the dtypes it may take; `REQUIRED` marks an attr without a
default.  Invariant: once registered, an OpDef's signature never changes.
"""

from __future__ import annotations

import collections
import importlib
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from asyncflow import dtypes

__all__ = [
    "ArgDef",
    "KernelDef",
    "OpDef",
    "named_outputs",
    "REQUIRED",
    "TypeConstraint",
    "ANY",
    "NUMERIC",
    "REAL",
    "FLOATING",
    "INTEGER",
    "INDEX",
    "BOOL",
    "register_op",
    "get_op_def",
    "all_op_defs",
    "ops_supported_on",
    "RegisterGradient",
    "NotDifferentiable",
    "get_gradient_function",
]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class TypeConstraint:
    """Marks an attr as a type attr; `allowed` is None for any dtype."""

    __slots__ = ("allowed", "default", "is_list")

    def __init__(self, allowed: Iterable | None = None, default=None, is_list: bool = False):
        self.allowed = None if allowed is None else frozenset(dtypes.as_dtype(d) for d in allowed)
        if default is None:
            self.default = None
        elif is_list:  # (TF's `list(type) = []`: an empty tuple, never shared mutable)
            self.default = tuple(dtypes.as_dtype(d) for d in default)
        else:
            self.default = dtypes.as_dtype(default)
        self.is_list = is_list

    def with_default(self, default) -> TypeConstraint:
        return TypeConstraint(self.allowed, default, self.is_list)

    def check(self, op_type: str, attr: str, dtype: dtypes.DType) -> None:
        if self.allowed is not None and dtype not in self.allowed:
            allowed = ", ".join(sorted(d.name for d in self.allowed))
            raise TypeError(
                f"Value passed to parameter '{attr}' of op '{op_type}' has DataType "
                f"{dtype.name} not in list of allowed values: {allowed}"
            )


def _types(*names: str) -> list:
    return [dtypes.as_dtype(n) for n in names]


_FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64")
_INT_NAMES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_COMPLEX_NAMES = ("complex64", "complex128")

ANY = TypeConstraint(None)
FLOATING = TypeConstraint(_types(*_FLOAT_NAMES))
INTEGER = TypeConstraint(_types(*_INT_NAMES))
REAL = TypeConstraint(_types(*_FLOAT_NAMES, *_INT_NAMES))
NUMERIC = TypeConstraint(_types(*_FLOAT_NAMES, *_INT_NAMES, *_COMPLEX_NAMES))
INDEX = TypeConstraint(_types("int32", "int64"), default="int32")
BOOL = TypeConstraint(_types("bool"))

_ARG_RE = re.compile(r"^\s*(\w+)\s*:\s*(?:(\w+)\s*\*\s*)?(Ref\()?\s*(\w+)\s*\)?\s*$")


@dataclass(frozen=True)
class ArgDef:
    """One declared input or output."""

    name: str
    type_attr: str | None  # attr naming the dtype (or list of dtypes)
    fixed_dtype: dtypes.DType | None
    number_attr: str | None  # "N" in "N * T"
    is_ref: bool = False

    @classmethod
    def parse(cls, spec: str, attrs: dict) -> ArgDef:
        m = _ARG_RE.match(spec)
        if not m:
            raise ValueError(f"bad argument spec {spec!r}")
        name, number_attr, ref, typ = m.groups()
        if typ in attrs:
            return cls(name, typ, None, number_attr, bool(ref))
        return cls(name, None, dtypes.as_dtype(typ), number_attr, bool(ref))


@dataclass(frozen=True)
class KernelDef:
    """One kernel registration: the function, the device type it is for (None: the
    generic kernel, for every device) and the inputs/outputs kept in host memory."""

    fn: Callable
    device_type: str | None
    host_memory: frozenset[str] = frozenset()


@dataclass(eq=False)
class OpDef:
    """Everything about one op type.  Create with `register_op`."""

    name: str
    inputs: list[ArgDef]
    outputs: list[ArgDef]
    attrs: dict[str, Any]
    shape_fn: Callable | None
    stateful: bool = False
    # Registrations keyed by device type; the key None holds the generic kernel.
    kernel_defs: dict[str | None, KernelDef] = field(default_factory=dict)
    grad_fn: Callable | None = None
    not_differentiable: bool = False
    # True when a kernel may suspend (queues, Recv, I/O): purely a placement hint.
    is_async: bool = False
    # For ops TF's CPU build has no kernel for on any device (the TPU ops): op -> the
    # InvalidArgumentError TF's placer raises for it, raised when a step would place it.
    no_kernel_error: Callable | None = None
    # For ops whose state must follow every step that holds them, whether their kernel
    # runs or not (the collectives: a step that fails before its member ran still uses
    # that member's execution): `step_watch(ctx, step, inputs)` is called as a step of a
    # plan holding the op starts, before any kernel (`step`: its kernel_api.StepContext;
    # `inputs()`: the node's inputs arrived so far in that step, None for the others).
    step_watch: Callable | None = None

    def kernel(self, *device_types: str, host_memory: Iterable[str] = ()) -> Callable:
        """Decorator registering an `async def kernel(ctx, *inputs)`.

        With no device types it is the generic kernel (every device, through
        `ctx.xp`); otherwise a kernel for each named device type.  `host_memory` names
        inputs/outputs (as declared) that stay in host memory on non-CPU devices.

        Raises:
          ValueError: a kernel is already registered for that device type (or a
            generic one twice), or `host_memory` names no input or output of the op.
        """
        if isinstance(host_memory, str):
            raise TypeError("host_memory takes a sequence of input/output names")
        host = frozenset(host_memory)
        names = {a.name for a in self.inputs} | {a.name for a in self.outputs}
        unknown = sorted(host - names)
        if unknown:
            raise ValueError(f"host_memory of op {self.name!r} names unknown args {unknown}")
        keys = [dt.upper() for dt in device_types] or [None]

        def register(fn: Callable) -> Callable:
            for key in keys:
                if key in self.kernel_defs:
                    what = "a generic kernel" if key is None else f"a {key} kernel"
                    raise ValueError(f"op {self.name!r} already has {what}")
                self.kernel_defs[key] = KernelDef(fn, key, host)
            return fn

        return register

    def kernel_for(self, device_type: str) -> KernelDef | None:
        """The kernel a device of `device_type` runs: its own, else the generic one."""
        kd = self.kernel_defs.get(device_type)
        return kd if kd is not None else self.kernel_defs.get(None)

    def supports(self, device_type: str) -> bool:
        """Whether a device of `device_type` has a kernel for this op."""
        return device_type in self.kernel_defs or None in self.kernel_defs

    @property
    def has_generic_kernel(self) -> bool:
        return None in self.kernel_defs

    def registered_kernels(self) -> str:
        """For error messages: "any device" or the device types, as TF lists them."""
        parts = ["any device" if k is None else k for k in self.kernel_defs]
        return ", ".join(parts) or "none"

    def host_memory_positions(self, attrs: dict, device_type: str) -> tuple[list, list]:
        """Flat input and output positions of an op with `attrs` that the kernel for
        `device_type` keeps in host memory (list args expand as the op's attrs say)."""
        kd = self.kernel_for(device_type)
        if kd is None or not kd.host_memory:
            return [], []
        return (
            _host_positions(self.inputs, self.attrs, attrs, kd.host_memory),
            _host_positions(self.outputs, self.attrs, attrs, kd.host_memory),
        )

    def gradient(self, fn: Callable) -> Callable:
        self.grad_fn = fn
        return fn

    def type_attrs(self) -> dict[str, TypeConstraint]:
        return {k: v for k, v in self.attrs.items() if isinstance(v, TypeConstraint)}

    def __repr__(self) -> str:
        return f"<OpDef {self.name}>"


def _host_positions(args, attr_defs: dict, attrs: dict, host: frozenset) -> list[int]:
    out, pos = [], 0
    for arg in args:
        if arg.number_attr:
            n = attrs[arg.number_attr]
        elif arg.type_attr and attr_defs[arg.type_attr].is_list:
            n = len(attrs[arg.type_attr])
        else:
            n = 1
        if arg.name in host:
            out.extend(range(pos, pos + n))
        pos += n
    return out


_REGISTRY: dict[str, OpDef] = {}


def register_op(
    name: str,
    inputs: Iterable[str] = (),
    outputs: Iterable[str] = (),
    attrs: dict[str, Any] | None = None,
    shape_fn: Callable | None = None,
    stateful: bool = False,
    is_async: bool = False,
) -> OpDef:
    """Register op type `name` and return its OpDef (kernels are added with `.kernel`)."""
    module = _LAZY_OPS.get(name)
    if module is not None and module not in sys.modules:
        importlib.import_module(module)  # (its family registers it: the clash shows here)
    if name in _REGISTRY:
        raise ValueError(f"op {name!r} is already registered")
    attrs = dict(attrs or {})
    op_def = OpDef(
        name=name,
        inputs=[ArgDef.parse(s, attrs) for s in inputs],
        outputs=[ArgDef.parse(s, attrs) for s in outputs],
        attrs=attrs,
        shape_fn=shape_fn,
        stateful=stateful,
        is_async=is_async,
    )
    _REGISTRY[name] = op_def
    return op_def


# Op families imported on first use: op type -> the module that registers it (ops/
# installs its generated table, ops/lazy_index.py).  A lookup of one of these types
# imports its module first, so a graph, a GraphDef import or a gradient finds it as if
# every family had been imported up front; the listings import them all.
_LAZY_OPS: dict[str, str] = {}


def register_lazy_ops(modules: dict[str, Iterable[str]]) -> None:
    """Name the op types each module (not yet imported) registers."""
    for module, op_types in modules.items():
        for op_type in op_types:
            _LAZY_OPS[op_type] = module


def _load(name: str) -> OpDef | None:
    """The OpDef of `name`, importing the family that registers it if need be."""
    op_def = _REGISTRY.get(name)
    if op_def is None and name in _LAZY_OPS:
        # (A module asking for one of its own ops before registering it gets itself,
        # half imported, back: then there is no OpDef yet, as before.)
        importlib.import_module(_LAZY_OPS[name])
        op_def = _REGISTRY.get(name)
    return op_def


def _load_all() -> None:
    for module in sorted(set(_LAZY_OPS.values())):
        importlib.import_module(module)


def get_op_def(name: str) -> OpDef:
    op_def = _REGISTRY.get(name) or _load(name)
    if op_def is None:
        raise KeyError(f"Op type not registered '{name}'")
    return op_def


_NAMED: dict[str, type] = {}


def named_outputs(op) -> tuple:
    """`op`'s outputs as TF's generated wrappers return a multi-output op's: a
    namedtuple named by the op type, fields named as its outputs
    (`tf.nn.top_k(x).values`, `tf.unique(x).idx`)."""
    op_def = get_op_def(op.type)
    cls = _NAMED.get(op.type)
    if cls is None:
        fields = [a.name for a in op_def.outputs]
        cls = _NAMED[op.type] = collections.namedtuple(op.type, fields)
    groups, pos = [], 0
    for arg in op_def.outputs:  # a list output is one field holding a list, as TF's
        if arg.number_attr:
            n, is_list = op._attr(arg.number_attr), True
        elif arg.type_attr and op_def.attrs[arg.type_attr].is_list:
            n, is_list = len(op._attr(arg.type_attr)), True
        else:
            n, is_list = 1, False
        part = op.outputs[pos : pos + n]
        groups.append(list(part) if is_list else part[0])
        pos += n
    return cls(*groups)


def all_op_defs() -> dict[str, OpDef]:
    _load_all()
    return dict(_REGISTRY)


def ops_supported_on(device_type: str) -> list[str]:
    """The op types a device of `device_type` can run, derived from the kernels."""
    _load_all()
    return sorted(name for name, d in _REGISTRY.items() if d.supports(device_type))


# -- gradients, keyed by op type as TF's python layer does ---------------------------


class RegisterGradient:
    """Decorator: `@RegisterGradient("Exp") def _exp_grad(op, grad): ...`."""

    def __init__(self, op_type: str):
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._op_type = op_type

    def __call__(self, fn: Callable) -> Callable:
        name = self._op_type
        op_def = _load(name)
        if op_def is None:  # a gradient of its own name, for gradient_override_map
            if name in _NAMED_GRADIENTS:
                raise KeyError(f"Registering two gradient with name '{name}'!")
            _NAMED_GRADIENTS[name] = fn
            return fn
        if op_def.grad_fn is not None:
            raise KeyError(f"Registering two gradient with name '{name}'!")
        op_def.grad_fn = fn
        return fn


# Gradients registered under names that are no op type (`RegisterGradient("MyGrad")`),
# which ops take through `Graph.gradient_override_map`.
_NAMED_GRADIENTS: dict[str, Callable | None] = {}


def NotDifferentiable(op_type: str) -> None:  # noqa: N802 - TF's name
    """Mark `op_type` as having no gradient (TF's registry entry of None): the op type
    need not be registered yet, as with TF's custom ops.

    Raises:
      TypeError: op_type is not a string.
      KeyError: a gradient, or this mark, is already registered under that name.
    """
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")
    op_def = _load(op_type)
    if op_def is None:
        if op_type in _NAMED_GRADIENTS:
            raise KeyError(f"Registering two gradient with name '{op_type}'!")
        _NAMED_GRADIENTS[op_type] = None
        return
    if op_def.grad_fn is not None or op_def.not_differentiable:
        raise KeyError(f"Registering two gradient with name '{op_type}'!")
    op_def.not_differentiable = True


NoGradient = NotDifferentiable


def get_gradient_function(op) -> Callable | None:
    """The gradient function of `op`: the one its `_gradient_op_type` attr names (set
    by `Graph.gradient_override_map`: a registered name or another op type), else its
    op type's.  None for a type marked not differentiable.

    Raises:
      LookupError: no gradient is registered under that name or type.
    """
    attrs = getattr(op, "_attrs", None)  # (an op-like object with a type only: none)
    name = attrs.get("_gradient_op_type") if attrs else None
    if name is None:
        op_def = get_op_def(op.type)
    else:
        name = name.decode() if isinstance(name, bytes) else str(name)
        if name in _NAMED_GRADIENTS:  # (None: a name marked not differentiable)
            return _NAMED_GRADIENTS[name]
        op_def = _load(name)
        if op_def is None:
            raise LookupError(
                f"No gradient defined for operation '{op.name}' (op type: {op.type}): its "
                f"gradient_override_map names '{name}', under which no gradient is registered"
            )
    if op_def.not_differentiable:
        return None
    if op_def.grad_fn is None:
        if op_def.name in _NAMED_GRADIENTS:  # registered before its op type was
            return _NAMED_GRADIENTS[op_def.name]
        raise LookupError(f"No gradient defined for operation '{op.name}' (op type: {op.type})")
    return op_def.grad_fn
