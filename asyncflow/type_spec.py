"""`tf.TypeSpec`: the base of the specs that describe a value's type (TensorSpec,
SparseTensorSpec, RaggedTensorSpec, IndexedSlicesSpec, TensorArraySpec, DatasetSpec,
NoneTensorSpec), with TF's comparisons.

A spec is its class and the tuple `_serialize()` returns (shapes, dtypes, flags and
nested specs).  From that tuple alone, as TF:
- two specs are equal when their classes and tuples are (a TensorShape by its dims);
- `is_compatible_with(other)`: same class, shapes compatible, every other field equal
  (nested specs compatible); a value is first turned into its spec (`_from_value`);
- `most_specific_compatible_type(other)`: the spec whose shapes are the most specific
  shape compatible with both, other fields equal; ValueError ("No TypeSpec is
  compatible with both ...") where a field differs;
- `most_specific_common_supertype(others)`: the same, or None;
- `is_subtype_of(other)`: every dim of `other` is unknown or the same;
- `repr`: the class name and the repr of the fields' tuple ("OptionalSpec(x,)").
Subclasses may override any of these where TF's own class differs (TensorSpec: the
name is ignored by is_compatible_with).

Invariant: specs are immutable; `_serialize()` holds everything that makes one.
"""

from __future__ import annotations

from asyncflow import dtypes, tensor_shape

__all__ = ["NoneTensor", "NoneTensorSpec", "TypeSpec"]


class TypeSpec:
    """`tf.TypeSpec`: the type of a value (see the module note)."""

    __slots__ = ()

    # -- what a subclass defines
    def _serialize(self) -> tuple:
        raise NotImplementedError

    @property
    def value_type(self):
        """The Python type of values this spec describes."""
        raise NotImplementedError

    def _from_value(self, value) -> TypeSpec:
        """The spec of `value`, to compare with this one (TypeError when there is none)."""
        from_value = getattr(type(self), "from_value", None)
        if from_value is None:
            raise TypeError(f"Could not build a TypeSpec for {value!r}")
        return from_value(value)

    def _rebuild(self, fields: tuple) -> TypeSpec:
        return type(self)(*fields)

    # -- comparisons
    def is_compatible_with(self, spec_or_value) -> bool:
        """Whether `spec_or_value` (a spec, or a value of one) fits this spec."""
        other = spec_or_value
        if not isinstance(other, TypeSpec):
            try:
                other = self._from_value(other)
            except (TypeError, ValueError):
                return False
        if type(other) is not type(self):
            return False
        return _fields_compatible(self._serialize(), other._serialize())

    def most_specific_compatible_type(self, other) -> TypeSpec:
        """The most specific spec compatible with both.

        Raises:
          ValueError: no spec is (a dtype, a flag or the class differs).
        """
        if type(other) is not type(self):
            raise ValueError(f"No TypeSpec is compatible with both {self} and {other}")
        try:
            fields = _fields_join(self._serialize(), other._serialize())
        except _Incompatible:
            raise ValueError(f"No TypeSpec is compatible with both {self} and {other}") from None
        return self._rebuild(fields)

    def most_specific_common_supertype(self, others):
        """The most specific spec every one of `others` and this one fit, or None."""
        result = self
        for other in others:
            if type(other) is not type(self):
                return None
            try:
                result = result._rebuild(_fields_join(result._serialize(), other._serialize()))
            except _Incompatible:
                return None
        return result

    def is_subtype_of(self, other) -> bool:
        """Whether every value of this spec is a value of `other`."""
        if type(other) is not type(self):
            return False
        return _fields_subtype(self._serialize(), other._serialize())

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and _key(self._serialize()) == _key(other._serialize())

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self).__name__, _key(self._serialize())))

    def __repr__(self) -> str:
        return f"{type(self).__name__}{tuple(self._serialize())!r}"  # (TF's: "X(a,)")


class _Incompatible(Exception):
    pass


def _key(field):
    """A hashable, comparable form of a field (a shape by its dims)."""
    if isinstance(field, tensor_shape.TensorShape):
        return ("shape", None if field.rank is None else tuple(field.as_list()))
    if isinstance(field, (tuple, list)):
        return (type(field).__name__, tuple(_key(f) for f in field))
    if isinstance(field, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in field.items())))
    return field


def _fields_compatible(a, b) -> bool:
    if isinstance(a, tensor_shape.TensorShape) and isinstance(b, tensor_shape.TensorShape):
        return a.is_compatible_with(b)
    if isinstance(a, TypeSpec) and isinstance(b, TypeSpec):
        return a.is_compatible_with(b)
    if isinstance(a, dtypes.DType) and isinstance(b, dtypes.DType):
        return a.is_compatible_with(b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(_fields_compatible(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_fields_compatible(a[k], b[k]) for k in a)
    return a == b


def _fields_join(a, b):
    if isinstance(a, tensor_shape.TensorShape) and isinstance(b, tensor_shape.TensorShape):
        return a.most_specific_compatible_shape(b)
    if isinstance(a, TypeSpec) and isinstance(b, TypeSpec):
        joined = a.most_specific_common_supertype([b])
        if joined is None:
            raise _Incompatible
        return joined
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        if type(a) is not type(b) or len(a) != len(b):
            raise _Incompatible
        return type(a)(_fields_join(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            raise _Incompatible
        return {k: _fields_join(a[k], b[k]) for k in a}
    if a != b:
        raise _Incompatible
    return a


def _fields_subtype(a, b) -> bool:
    if isinstance(a, tensor_shape.TensorShape) and isinstance(b, tensor_shape.TensorShape):
        if b.rank is None:
            return True
        if a.rank != b.rank:
            return False
        return all(y is None or x == y for x, y in zip(a.as_list(), b.as_list(), strict=True))
    if isinstance(a, TypeSpec) and isinstance(b, TypeSpec):
        return a.is_subtype_of(b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(_fields_subtype(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_fields_subtype(a[k], b[k]) for k in a)
    return a == b


class NoneTensor:
    """The value of a NoneTensorSpec: stands for None where a structure needs a value."""

    __slots__ = ()


class NoneTensorSpec(TypeSpec):
    """`tf.NoneTensorSpec`: the type of None in a value's structure."""

    __slots__ = ()

    def _serialize(self) -> tuple:
        return ()

    def _rebuild(self, fields: tuple) -> TypeSpec:
        return NoneTensorSpec()

    value_type = property(lambda self: NoneTensor)

    @classmethod
    def from_value(cls, value) -> NoneTensorSpec:
        if value is not None and not isinstance(value, NoneTensor):
            raise TypeError(f"NoneTensorSpec describes None, not {value!r}")
        return cls()
