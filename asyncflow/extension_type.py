"""`tf.experimental.ExtensionType`: user classes of typed, immutable fields that travel
through graphs as composite values (TF 2.21's graph-mode behaviour).

A subclass declares its fields by annotation (`values: tf.Tensor`, `n: int = 3`); the
class gets a constructor that binds its arguments as a Python signature would, checks and
converts each value against its annotation (a Tensor field takes anything that converts
to a tensor), then calls `__validate__`.  A custom `__init__` may set the fields itself;
they are checked after it returns.  Each subclass gets a nested `Spec` (an
ExtensionTypeSpec): the fields with tensors replaced by their specs.

Invariants: an instance never changes after construction (setting or deleting an
attribute is an AttributeError); its components (`tf.nest.flatten(x,
expand_composites=True)`) are its fields' tensors in declaration order, each composite
field expanded in place, and rebuilding from them skips the constructor, as TF's.
Control flow (cond, while_loop) carries those components, through `_cf_parts` and
`_cf_rebuild`, which it finds by name.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping

from asyncflow import dispatch, dtypes, nest, tensor_shape
from asyncflow import graph as ops
from asyncflow.composite_specs import register_type_spec_from_value, type_spec_from_value
from asyncflow.framework_extras import TensorSpec
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import array_ops, manip_ops, math_ops, reduction_ops
from asyncflow.ragged import RaggedTensor
from asyncflow.sparse_tensor import SparseTensor
from asyncflow.type_spec import TypeSpec

__all__ = [
    "BatchableExtensionType",
    "ExtensionType",
    "ExtensionTypeBatchEncoder",
    "ExtensionTypeSpec",
    "ImmutableDict",
    "as_dict",
]

_COMPOSITE_TYPES = (RaggedTensor, SparseTensor, IndexedSlices)


class ImmutableDict(Mapping):
    """The read-only mapping a Mapping field holds (TF's repr)."""

    __slots__ = ("_d",)

    def __init__(self, *args, **kwargs):
        self._d = dict(*args, **kwargs)

    def __getitem__(self, key):
        return self._d[key]

    def __iter__(self):
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __repr__(self) -> str:
        return f"ImmutableDict({self._d!r})"


# -- field checks: one converter per annotation, `convert(value, path)` -> the stored value


def _expected(path, what, value):
    return TypeError(f"{path}: expected {what}, got {type(value).__name__!r}")


def _converter(annotation):
    """The converter of `annotation`, or a TypeError naming an unsupported one."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is None or annotation is type(None):
        return _none_converter
    if origin is typing.Union:
        convs = [_converter(a) for a in args]
        return _union_converter(annotation, convs)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _tuple_converter(_converter(args[0]), None)
        return _tuple_converter(None, [_converter(a) for a in args])
    if origin is Mapping and len(args) == 2:
        return _mapping_converter(_converter(args[0]), _converter(args[1]))
    if annotation is ops.Tensor:
        return _tensor_converter
    if annotation is tensor_shape.TensorShape:
        return lambda v, path: tensor_shape.as_shape(v)
    if annotation is dtypes.DType:
        return lambda v, path: dtypes.as_dtype(v)
    if annotation in (int, float, str, bool):
        return _python_converter(annotation)
    if isinstance(annotation, type) and (
        issubclass(annotation, ExtensionType) or issubclass(annotation, _COMPOSITE_TYPES)
    ):
        return _python_converter(annotation)
    if isinstance(annotation, type) or annotation is typing.Any:
        raise TypeError(f"Unsupported type annotation {getattr(annotation, '__name__', 'Any')!r}")
    raise TypeError(f"Unsupported type annotation {annotation}")


def _none_converter(value, path):
    if value is not None:
        raise _expected(path, "None", value)
    return None


def _tensor_converter(value, path):
    if isinstance(value, ops.Tensor):
        return value
    try:
        return ops.convert_to_tensor(value)
    except (TypeError, ValueError):
        raise _expected(path, "a Tensor", value) from None


def _python_converter(cls):
    def convert(value, path):
        if not isinstance(value, cls):
            raise _expected(path, repr(cls.__name__), value)
        return value

    return convert


def _union_converter(annotation, convs):
    def convert(value, path):
        for conv in convs:
            try:
                return conv(value, path)
            except (TypeError, ValueError):
                continue
        raise _expected(path, str(annotation), value)

    return convert


def _tuple_converter(each, fixed):
    def convert(value, path):
        if not isinstance(value, (tuple, list)):
            raise _expected(path, "'tuple'", value)
        if fixed is not None and len(value) != len(fixed):
            raise TypeError(f"{path}: expected a tuple of length {len(fixed)}, got {value!r}")
        convs = fixed if fixed is not None else [each] * len(value)
        return tuple(c(v, f"{path}[{i}]") for i, (c, v) in enumerate(zip(convs, value)))

    return convert


def _mapping_converter(key_conv, value_conv):
    def convert(value, path):
        if not isinstance(value, Mapping):
            raise _expected(path, "'Mapping'", value)
        return ImmutableDict(
            (key_conv(k, f"{path}.keys()"), value_conv(v, f"{path}[{k!r}]"))
            for k, v in value.items()
        )

    return convert


# -- the field table of a class


class _Field(typing.NamedTuple):
    name: str
    annotation: object
    convert: typing.Callable
    default: object


_NO_DEFAULT = inspect.Parameter.empty


def _fields_of(cls) -> list[_Field]:
    """`cls`'s fields, base classes' first, each checked (TF's TypeErrors)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # (an unresolved forward reference: the raw annotations)
        hints = {}
        for base in reversed(cls.__mro__):
            hints.update(base.__dict__.get("__annotations__", {}))
    fields = []
    for name, annotation in hints.items():
        if (
            name.startswith(("__", "_tf_extension_type"))
            or typing.get_origin(annotation) is typing.ClassVar
        ):
            continue
        try:
            convert = _converter(annotation)
        except TypeError as e:
            raise TypeError(f"In field {name!r}: {e}") from e
        default = _NO_DEFAULT
        for base in cls.__mro__:
            if name in base.__dict__:
                default = base.__dict__[name]
                break
        if default is not _NO_DEFAULT and not _holds_tensor_type(annotation):
            default = convert(default, f"default value for {name}")
        fields.append(_Field(name, annotation, convert, default))
    return fields


def _holds_tensor_type(annotation) -> bool:
    """Whether a default of this type becomes a graph value (converted per instance)."""
    if annotation is ops.Tensor:
        return True
    return any(_holds_tensor_type(a) for a in typing.get_args(annotation))


# -- the classes


class ExtensionType:
    """`tf.experimental.ExtensionType`: subclass it with annotated fields (see the module
    note).

    Raises:
      TypeError: (at class creation) an unsupported annotation or a default of the wrong
        type; (at construction) missing, unexpected or wrongly typed arguments.
      AttributeError: setting or deleting a field after construction.
      AssertionError: constructing ExtensionType itself.
    """

    _tf_extension_type_fields = ()
    _batchable = False
    __hash__ = None  # (TF: values are compared by tensors, so never hashable)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_tf_extension_type_abstract"):
            return
        fields = tuple(_fields_of(cls))
        cls._tf_extension_type_fields = fields
        custom_init = cls.__dict__.get("__init__")
        if custom_init is None:
            cls.__init__ = _generated_init(cls, fields)
        else:
            cls.__init__ = _wrapped_init(custom_init)
        base = BatchableExtensionTypeSpec if cls._batchable else ExtensionTypeSpec
        own = cls.__dict__.get("Spec")
        if own is None or not issubclass(own, ExtensionTypeSpec):
            # (a class's own `class Spec:` adds its methods to the generated Spec, as TF's)
            body = {
                k: v
                for k, v in (vars(own).items() if own is not None else ())
                if k not in ("__dict__", "__weakref__")
            }
            body.update({"__slots__": (), "__module__": cls.__module__})
            cls.Spec = type("Spec", (base,), body)
        spec_cls = cls.Spec
        spec_cls.__name__ = f"{cls.__name__}.Spec"
        spec_cls.__qualname__ = f"{cls.__qualname__}.Spec"  # (reprs show it: TF's)
        spec_cls._value_type = cls
        nest.register_composite(cls, _to_components, _from_components)
        register_type_spec_from_value(cls, lambda v: v._type_spec)

    def __init__(self, *args, **kwargs):
        raise AssertionError(
            "Cannot create an instance of ExtensionType because ExtensionType is an "
            "abstract base class."
        )

    def __setattr__(self, name, value):
        if not (
            self.__dict__.get("_tf_extension_type_mutable", False)
            and any(f.name == name for f in self._fields())
        ):  # (a custom constructor sets fields, and nothing else)
            raise AttributeError(
                f"Cannot mutate attribute `{name}` outside the custom constructor of "
                "ExtensionType."
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if not self.__dict__.get("_tf_extension_type_mutable", False):
            raise AttributeError(
                f"Cannot mutate attribute `{name}` outside the custom constructor of "
                "ExtensionType."
            )
        object.__delattr__(self, name)

    def __repr__(self) -> str:
        fields = ", ".join(f"{f.name}={self.__dict__[f.name]!r}" for f in self._fields())
        return f"{type(self).__qualname__}({fields})"

    def __eq__(self, other):
        """A bool tensor: every component equal in shape and values (False, a Python
        bool, where the types or specs differ)."""
        if type(self) is not type(other) or self._type_spec != other._type_spec:
            return False
        mine = nest.flatten(self, expand_composites=True)
        theirs = nest.flatten(other, expand_composites=True)
        conditions = []
        for a, b in zip(mine, theirs):
            same_shape = reduction_ops.reduce_all(
                math_ops.equal(array_ops.shape(a), array_ops.shape(b))
            )
            conditions.append(same_shape)
            conditions.append(_equal_values(a, b))
        return reduction_ops.reduce_all(manip_ops.stack(conditions))

    def __ne__(self, other):
        eq = self.__eq__(other)
        if isinstance(eq, ops.Tensor):
            return math_ops.logical_not(eq)
        return not eq

    def __validate__(self):
        """Checks a subclass runs on each new value (after its fields are converted)."""

    @classmethod
    def _fields(cls):
        return cls._tf_extension_type_fields

    @property
    def _type_spec(self):
        return type(self).Spec._from_fields(
            [_spec_of_field(self.__dict__[f.name]) for f in self._fields()]
        )

    # -- what control flow carries (found by name in ops/control_flow_contexts.py)
    def _cf_parts(self) -> list:
        return nest.flatten(self, expand_composites=True)

    def _cf_rebuild(self, parts):
        return nest.pack_sequence_as(self, list(parts), expand_composites=True)

    def _cf_kind(self):
        """What two values must share to be carried by one cond or while_loop: their
        spec with every shape left out (TF joins the shapes, and refuses the rest)."""
        return (type(self), _shapeless(self._type_spec))

    def _cf_invariant_shapes(self, spec) -> list:
        """The shape invariants of this value's tensors under `spec`, a while_loop shape
        invariant for it.

        Raises:
          TypeError: `spec` is not a Spec of this type compatible with the value (TF's
            messages).
        """
        name = type(self).__name__
        if not isinstance(spec, TypeSpec):
            raise TypeError(
                f"To describe or constrain a {name}, use a {name}.Spec instead of a TensorShape."
            )
        if (
            type(spec) is not type(self).Spec
            or spec.most_specific_common_supertype([self._type_spec]) is None
        ):
            raise TypeError(f"TypeSpec {spec!r} is not compatible with {self!r}")
        shapes = []
        for value, field_spec in zip(_field_values(self), spec._field_values):
            shapes += _invariant_shapes(value, field_spec)
        return shapes

    def _dense_fields_only(self) -> bool:
        """Whether every tensor of this value is a field's own (no ragged or sparse
        field): map_fn batches such values by their tensors' first dimension."""
        return all(
            not isinstance(v, _COMPOSITE_TYPES)
            and (not isinstance(v, ExtensionType) or v._dense_fields_only())
            for v in nest.flatten(_field_values(self))
        )


dispatch.register_dispatchable_type(ExtensionType)


class BatchableExtensionType(ExtensionType):
    """`tf.experimental.BatchableExtensionType`: an ExtensionType whose values stack into
    batches (map_fn, tf.data's batch): its Spec has `_batch` and `_unbatch`."""

    _batchable = True
    _tf_extension_type_abstract = True

    def __init__(self, *args, **kwargs):
        raise AssertionError(
            "Cannot create an instance of BatchableExtensionType because "
            "BatchableExtensionType is an abstract base class."
        )


def _shapeless(field):
    if isinstance(field, TensorSpec):
        return ("TensorSpec", field.dtype)
    if isinstance(field, ExtensionTypeSpec):
        return (type(field), tuple(_shapeless(f) for f in field._field_values))
    if isinstance(field, TypeSpec):
        return (type(field).__name__, tuple(_shapeless(f) for f in field._serialize()))
    if isinstance(field, tensor_shape.TensorShape):
        return None
    if isinstance(field, tuple):
        return tuple(_shapeless(f) for f in field)
    if isinstance(field, Mapping):
        return tuple(sorted((k, _shapeless(v)) for k, v in field.items()))
    return field


def _invariant_shapes(value, spec) -> list:
    """Shape invariants of the tensors of one field value under its spec (a composite
    field's tensors may take any shape)."""
    if isinstance(value, ops.Tensor):
        return [spec.shape]
    if isinstance(value, ExtensionType):
        return value._cf_invariant_shapes(spec)
    if isinstance(value, tuple):
        return [s for v, sp in zip(value, spec) for s in _invariant_shapes(v, sp)]
    if isinstance(value, Mapping):
        return [s for k in sorted(value) for s in _invariant_shapes(value[k], spec[k])]
    parts = nest.flatten(value, expand_composites=True)
    return [tensor_shape.unknown_shape() for t in parts if isinstance(t, ops.Tensor)]


def _equal_values(a, b):
    # TF compares with Equal(incompatible_shape_error=False) and reduces over the static
    # rank's axes: tensors whose shapes differ only when the step runs fail there
    # (InvalidArgumentError), as a plain Equal of them fails here.
    return reduction_ops.reduce_all(math_ops.equal(a, b))


def _construct(self, fields, values: dict) -> None:
    for f in fields:
        object.__setattr__(self, f.name, f.convert(values[f.name], f.name))
    self.__validate__()


def _generated_init(cls, fields):
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [
        inspect.Parameter(
            f.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=f.default,
            annotation=f.annotation,
        )  # fmt: skip
        for f in fields
    ]
    signature = inspect.Signature(params, return_annotation=cls)

    def __init__(self, *args, **kwargs):  # noqa: N807 - the class's constructor
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        _construct(self, type(self)._fields(), bound.arguments)

    __init__.__signature__ = signature
    return __init__


def _wrapped_init(custom_init):
    def __init__(self, *args, **kwargs):  # noqa: N807 - the class's constructor
        object.__setattr__(self, "_tf_extension_type_mutable", True)
        try:
            custom_init(self, *args, **kwargs)
        finally:
            object.__delattr__(self, "_tf_extension_type_mutable")
        fields = type(self)._fields()
        missing = {f.name for f in fields if f.name not in self.__dict__}
        if missing:
            raise ValueError(f"Missing required fields: {missing}")
        _construct(self, fields, dict(self.__dict__))

    __init__.__signature__ = inspect.signature(custom_init)
    return __init__


def _spec_of_field(value):
    if isinstance(value, ops.Tensor):
        return TensorSpec(value.shape, value.dtype.base_dtype)
    if isinstance(value, (ExtensionType, *_COMPOSITE_TYPES)):
        return type_spec_from_value(value)
    if isinstance(value, tuple):
        return tuple(_spec_of_field(v) for v in value)
    if isinstance(value, Mapping):
        return {k: _spec_of_field(v) for k, v in value.items()}
    return value


def _field_values(value) -> list:
    return [value.__dict__[f.name] for f in value._fields()]


def _to_components(value) -> list:
    """The tensors of `value`'s fields, composites expanded (Python fields are no
    components)."""
    flat = nest.flatten(_field_values(value), expand_composites=True)
    return [x for x in flat if isinstance(x, ops.Tensor)]


def _from_components(like, components):
    """A value like `like` holding `components`, made without its constructor (TF's)."""
    fields = _field_values(like)
    parts = iter(components)
    flat = [next(parts) if isinstance(x, ops.Tensor) else x
            for x in nest.flatten(fields, expand_composites=True)]  # fmt: skip
    values = nest.pack_sequence_as(fields, flat, expand_composites=True)
    out = object.__new__(type(like))
    for f, v in zip(like._fields(), values):
        object.__setattr__(out, f.name, v)
    return out


def as_dict(value) -> dict:
    """`tf.experimental.extension_type.as_dict`: the fields of an ExtensionType value."""
    return dict(zip((f.name for f in value._fields()), _field_values(value)))


class ExtensionTypeSpec(TypeSpec):
    """`tf.experimental.ExtensionTypeSpec`: an ExtensionType's type, its fields with each
    tensor replaced by a TensorSpec (and each composite by its spec).  Its constructor
    takes every field (no defaults), as TF's."""

    __slots__ = ("_field_values",)
    _value_type = None

    def __init__(self, *args, **kwargs):
        fields = self._value_type._fields() if self._value_type else ()
        params = [inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for f in fields]  # fmt: skip
        bound = inspect.Signature(params).bind(*args, **kwargs)
        self._field_values = tuple(bound.arguments[f.name] for f in fields)

    @classmethod
    def _from_fields(cls, values):
        spec = object.__new__(cls)
        spec._field_values = tuple(values)
        return spec

    @property
    def value_type(self):
        return self._value_type

    def __getattr__(self, name):
        for f, v in zip(self._value_type._fields(), self._field_values):
            if f.name == name:
                return v
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _serialize(self) -> tuple:
        return tuple(dict(v) if isinstance(v, ImmutableDict) else v for v in self._field_values)

    def _rebuild(self, fields: tuple):
        return self._from_fields(fields)

    @classmethod
    def from_value(cls, value):
        if not isinstance(value, ExtensionType):
            raise TypeError(f"Expected an ExtensionType, got {value!r}")
        return value._type_spec

    def __repr__(self) -> str:
        fields = self._value_type._fields()
        body = ", ".join(f"{f.name}={v!r}" for f, v in zip(fields, self._serialize()))
        return f"{type(self).__qualname__}({body})"

    @property
    def _component_specs(self) -> tuple:
        return tuple(v for v in self._field_values if _is_component_spec(v))

    def _to_components(self, value) -> tuple:
        return tuple(value.__dict__[f.name] for f in value._fields()
                     if _is_component(value.__dict__[f.name]))  # fmt: skip


def _is_component(value) -> bool:
    if isinstance(value, (ops.Tensor, ExtensionType, *_COMPOSITE_TYPES)):
        return True
    if isinstance(value, (tuple, Mapping)):
        values = value.values() if isinstance(value, Mapping) else value
        return any(_is_component(v) for v in values)
    return False


class BatchableExtensionTypeSpec(ExtensionTypeSpec):
    """The Spec of a BatchableExtensionType: `_batch(n)` prepends a dimension of size n
    to every tensor field's spec, `_unbatch()` removes the first."""

    __slots__ = ()

    def _batch(self, batch_size):
        dim = tensor_shape.TensorShape([batch_size])
        return self._from_fields(
            _map_specs(
                self._field_values,
                lambda s: (
                    s._batch(batch_size)
                    if not isinstance(s, TensorSpec)
                    else TensorSpec(dim.concatenate(s.shape), s.dtype)
                ),
            )
        )

    def _unbatch(self):
        def unbatch(s):
            if isinstance(s, TensorSpec):
                return TensorSpec(s.shape[1:], s.dtype)
            return s._unbatch()

        return self._from_fields(_map_specs(self._field_values, unbatch))


def _map_specs(values, fn):
    def one(v):
        if isinstance(v, TypeSpec):
            return fn(v)
        if isinstance(v, tuple):
            return tuple(one(x) for x in v)
        return v

    return [one(v) for v in values]


class ExtensionTypeBatchEncoder:
    """`tf.experimental.ExtensionTypeBatchEncoder`: how a BatchableExtensionType's spec
    batches (`batch`, `unbatch`) and encodes values as components (`encode`, `decode`,
    `encoding_specs`); asyncflow's encodes a value as its components."""

    def batch(self, spec, batch_size):
        return spec._batch(batch_size)

    def unbatch(self, spec):
        return spec._unbatch()

    def encode(self, spec, value, minimum_rank=0):
        return spec._to_components(value)

    def decode(self, spec, encoded_value):
        parts = iter(encoded_value)
        out = object.__new__(spec._value_type)
        for f, v in zip(spec._value_type._fields(), spec._field_values):
            is_part = isinstance(v, TypeSpec) or _is_component_spec(v)
            object.__setattr__(out, f.name, next(parts) if is_part else v)
        return out

    def encoding_specs(self, spec):
        return spec._component_specs


def _is_component_spec(value) -> bool:
    if isinstance(value, TypeSpec):
        return True
    if isinstance(value, (tuple, Mapping)):
        values = value.values() if isinstance(value, Mapping) else value
        return any(_is_component_spec(v) for v in values)
    return False
