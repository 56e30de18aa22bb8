"""TF's nested structure coder: a Python nest of TensorSpecs, composite TypeSpecs and
plain values as a StructuredValue proto (a saved function's signature and outputs), and
back.  Composite specs are written as TF 2.21's coder writes them (TypeSpecProto: the
class, the spec's `_serialize()` tuple, the number of component tensors); only the
classes TF's coder knows are encoded (an ExtensionType's spec fails, as in TF).
"""

from __future__ import annotations

import collections

from asyncflow import dtypes, tensor_shape
from asyncflow.composite_specs import IndexedSlicesSpec, RaggedTensorSpec
from asyncflow.framework_extras import TensorSpec
from asyncflow.protos import saved_object_graph_pb2 as sog
from asyncflow.protos.saved_object_graph_pb2 import TypeSpecProto
from asyncflow.sparse_tensor import SparseTensorSpec
from asyncflow.tf_function import _component_specs
from asyncflow.type_spec import TypeSpec

__all__ = ["NotEncodableError", "decode", "decode_type_spec", "encode", "encode_type_spec"]


def encode(sv, x) -> None:
    """Write Python value `x` (a nest of TensorSpecs and plain values) into StructuredValue
    `sv`."""
    if x is None:
        sv.none_value.SetInParent()
    elif isinstance(x, TensorSpec):
        spec = sv.tensor_spec_value
        if x.name:
            spec.name = x.name
        spec.shape.CopyFrom(x.shape.as_proto())
        spec.dtype = x.dtype.as_datatype_enum
    elif isinstance(x, TypeSpec):
        encode_type_spec(sv.type_spec_value, x)
    elif isinstance(x, tensor_shape.TensorShape):
        sv.tensor_shape_value.CopyFrom(x.as_proto())
    elif isinstance(x, dtypes.DType):
        sv.tensor_dtype_value = x.as_datatype_enum
    elif isinstance(x, bool):
        sv.bool_value = x
    elif isinstance(x, int):
        sv.int64_value = x
    elif isinstance(x, float):
        sv.float64_value = x
    elif isinstance(x, str):
        sv.string_value = x
    elif isinstance(x, dict):
        sv.dict_value.SetInParent()
        for k, v in x.items():
            encode(sv.dict_value.fields[k], v)
    elif isinstance(x, tuple) and hasattr(x, "_fields"):
        sv.named_tuple_value.name = type(x).__name__
        for k in x._fields:
            pair = sv.named_tuple_value.values.add(key=k)
            encode(pair.value, getattr(x, k))
    elif isinstance(x, tuple):
        sv.tuple_value.SetInParent()
        for v in x:
            encode(sv.tuple_value.values.add(), v)
    elif isinstance(x, list):
        sv.list_value.SetInParent()
        for v in x:
            encode(sv.list_value.values.add(), v)
    else:
        raise ValueError(f"save: cannot write a {type(x).__name__} into a SavedModel structure")


class NotEncodableError(Exception):
    """A value no SavedModel structure can hold (TF's nested_structure_coder error)."""


# (a composite's spec class -> TypeSpecProto's class and name; TF's coder knows these)
_TYPE_SPEC_CLASSES = {
    SparseTensorSpec: (sog.TypeSpecProto.SPARSE_TENSOR_SPEC, "SparseTensorSpec"),
    IndexedSlicesSpec: (sog.TypeSpecProto.INDEXED_SLICES_SPEC, "IndexedSlicesSpec"),
    RaggedTensorSpec: (sog.TypeSpecProto.RAGGED_TENSOR_SPEC, "RaggedTensorSpec"),
}


def encode_type_spec(proto, spec) -> None:
    """Write composite TypeSpec `spec` into TypeSpecProto `proto` as TF's coder does: its
    class, its `_serialize()` tuple as the state, its number of component tensors."""
    known = _TYPE_SPEC_CLASSES.get(type(spec))
    if known is None:
        # (TF 2.21 encodes only registered composite specs: an ExtensionType's spec
        # fails so, as does any other)
        raise NotEncodableError(f"No encoder for object {spec!r} of type {type(spec)}.")
    proto.type_spec_class, proto.type_spec_class_name = known
    encode(proto.type_state, tuple(spec._serialize()))
    proto.num_flat_components = len(_component_specs(spec))


def decode(sv):
    """A StructuredValue as the Python nest it encodes (TensorSpecs for tensor specs)."""
    kind = sv.WhichOneof("kind")
    if kind is None or kind == "none_value":
        return None
    if kind == "tensor_spec_value":
        spec = sv.tensor_spec_value
        name = spec.name or None
        return TensorSpec(tensor_shape.TensorShape(spec.shape), dtypes.as_dtype(spec.dtype), name)
    if kind in ("list_value", "tuple_value"):
        values = [decode(v) for v in getattr(sv, kind).values]
        return values if kind == "list_value" else tuple(values)
    if kind == "dict_value":
        return {k: decode(v) for k, v in sv.dict_value.fields.items()}
    if kind == "named_tuple_value":
        nt = sv.named_tuple_value
        cls = collections.namedtuple(nt.name, [p.key for p in nt.values])
        return cls(*(decode(p.value) for p in nt.values))
    if kind == "tensor_shape_value":
        return tensor_shape.TensorShape(sv.tensor_shape_value)
    if kind == "tensor_dtype_value":
        return dtypes.as_dtype(sv.tensor_dtype_value)
    if kind in ("float64_value", "int64_value", "string_value", "bool_value"):
        return getattr(sv, kind)
    if kind == "type_spec_value":
        return decode_type_spec(sv.type_spec_value)
    raise ValueError(f"load_v2: a saved structure holds a {kind}, which asyncflow cannot read")


# TypeSpecProto class -> the spec it stands for (its type_state: the constructor's
# arguments, TF's `_serialize()` order)
_SPEC_CLASSES = {
    TypeSpecProto.SPARSE_TENSOR_SPEC: SparseTensorSpec,
    TypeSpecProto.INDEXED_SLICES_SPEC: IndexedSlicesSpec,
    TypeSpecProto.RAGGED_TENSOR_SPEC: RaggedTensorSpec,
}


def decode_type_spec(proto):
    """The composite TypeSpec a TypeSpecProto encodes (a RaggedTensorSpec...).

    Raises:
      ValueError: a class asyncflow does not know (an ExtensionType's, ...), a state
        the class does not take, or a component count that differs from the spec's.
    """
    cls = _SPEC_CLASSES.get(proto.type_spec_class)
    name = proto.type_spec_class_name or TypeSpecProto.TypeSpecClass.Name(proto.type_spec_class)
    if cls is None:
        raise ValueError(f"load_v2: a saved structure holds a {name}, which asyncflow cannot read")
    state = decode(proto.type_state)
    if not isinstance(state, tuple):
        raise ValueError(f"load_v2: the saved state of a {name} is no tuple")
    try:
        spec = cls(*state)
    except (TypeError, ValueError) as e:
        raise ValueError(f"load_v2: a saved {name} holds a state it does not take: {e}") from None
    n = proto.num_flat_components
    if n and n != len(_component_specs(spec)):
        raise ValueError(
            f"load_v2: a saved {name} says {n} components, its spec has another count"
        )
    return spec
