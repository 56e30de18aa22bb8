"""`tf.data.experimental.Optional` (TF's `tf.experimental.Optional`): a value that may be
absent, as a graph tensor (ops/optional_ops.py), with its element structure.

`get_next_as_optional(iterator)` is the iterator's next element, or an empty optional
at the end of the data: a loop can test `has_value()` instead of catching
OutOfRangeError.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import nest
from asyncflow.composite_specs import register_type_spec_from_value
from asyncflow.data.structure import (
    _component_attrs,
    _from_components,
    _SparseSpec,
    _Spec,
    _to_components,
)
from asyncflow.framework_extras import TensorSpec
from asyncflow.ops import optional_ops as _optional_ops  # noqa: F401 - registers the ops
from asyncflow.sparse_tensor import SparseTensor, SparseTensorSpec
from asyncflow.type_spec import TypeSpec

__all__ = ["Optional", "OptionalSpec", "get_next_as_optional"]


class Optional:
    """A value that may be absent: `has_value()` says whether it is there, `get_value()`
    gives it (InvalidArgumentError when run on an empty one)."""

    def __init__(self, variant_tensor, element_spec):
        self._variant_tensor = variant_tensor
        self._element_spec = element_spec

    @staticmethod
    def empty(element_spec) -> Optional:
        """An optional with no value whose value would have `element_spec`'s structure."""
        return Optional(ops.apply_op("OptionalNone", [], {}, name="OptionalNone").outputs[0],
                        element_spec)  # fmt: skip

    @staticmethod
    def from_value(value) -> Optional:
        """An optional holding `value` (a nested structure of tensors / SparseTensors)."""
        with ops.name_scope("optional") as scope:
            with ops.name_scope("value"):
                flat = [_as_tensor(v) for v in nest.flatten(value)]
                spec = nest.pack_sequence_as(value, [_spec_of(t) for t in flat]) if (
                    isinstance(value, tuple | list | dict)) else _spec_of(flat[0])  # fmt: skip
                components = _to_components(flat)
            handle = ops.apply_op(
                "OptionalFromValue",
                [components],
                {"Toutput_types": [c.dtype for c in components]},
                name=scope,
            ).outputs[0]
        return Optional(handle, spec)

    def has_value(self, name=None):
        """A bool tensor: whether this optional holds a value."""
        return ops.apply_op(
            "OptionalHasValue", [self._variant_tensor], {}, name=name or "OptionalHasValue"
        ).outputs[0]

    def get_value(self, name=None):
        """The value, structured as `element_spec`.

        Raises (when run): InvalidArgumentError "The given optional does not have a
        value." for an empty optional.
        """
        structure = _structure(self._element_spec)
        attrs = _component_attrs(structure)
        with ops.name_scope(name, "OptionalGetValue") as scope:
            outs = ops.apply_op(
                "OptionalGetValue", [self._variant_tensor], attrs, name=scope
            ).outputs
            return _from_components(structure, list(outs))

    @property
    def element_spec(self):
        return self._element_spec

    @property
    def _type_spec(self) -> OptionalSpec:
        return OptionalSpec(self._element_spec)

    # Control flow (cond, while_loop) carries an optional as its variant tensor, as TF;
    # ops/control_flow_contexts.py finds these two by name.
    def _cf_parts(self) -> list:
        return [self._variant_tensor]

    def _cf_rebuild(self, parts) -> Optional:
        return Optional(parts[0], self._element_spec)


class OptionalSpec(TypeSpec):
    """`tf.OptionalSpec`: the type of an optional, by its element's spec (a TypeSpec:
    its comparisons are its element spec's)."""

    __slots__ = ("_element_spec",)

    def __init__(self, element_spec):
        self._element_spec = element_spec

    def _serialize(self) -> tuple:
        return (self._element_spec,)

    @property
    def element_spec(self):
        return self._element_spec

    @staticmethod
    def from_value(value: Optional) -> OptionalSpec:
        return OptionalSpec(value.element_spec)

    @property
    def value_type(self):
        return Optional



nest.register_composite(Optional, Optional._cf_parts, Optional._cf_rebuild)
register_type_spec_from_value(Optional, OptionalSpec.from_value)


def get_next_as_optional(iterator) -> Optional:
    """`tf.data.experimental.get_next_as_optional`: the iterator's next element as an
    Optional, empty at the end of the data."""
    return iterator.get_next_as_optional()


def element_spec_of(structure):
    """TensorSpec / SparseTensorSpec for each component of an element structure."""

    def spec(s):
        if isinstance(s, _SparseSpec):
            return SparseTensorSpec(s.shape, s.dtype)
        return TensorSpec(s.shape, s.dtype)

    if isinstance(structure, tuple | dict):
        return nest.map_structure(spec, structure)
    return spec(structure)


def _as_tensor(v):
    return v if isinstance(v, SparseTensor) else ops.convert_to_tensor(v)


def _spec_of(t):
    if isinstance(t, SparseTensor):
        return SparseTensorSpec.from_value(t)
    return TensorSpec(t.shape, t.dtype)


def _structure(element_spec):
    """The element structure (_Spec / _SparseSpec) of TensorSpec / SparseTensorSpec specs."""

    def one(s):
        if isinstance(s, SparseTensorSpec):
            return _SparseSpec(s.dtype, s.shape)
        return _Spec(s.dtype, s.shape)

    if isinstance(element_spec, tuple | list | dict):
        return nest.map_structure(one, tuple(element_spec) if isinstance(
            element_spec, list) else element_spec)  # fmt: skip
    return one(element_spec)
