"""ExtensionType elements through the transformations that batch or slice: each value is
carried as the tuple of its tensors through the transformation, then rebuilt (TF's
batch encoder for a BatchableExtensionType stacks the same tensors).

`via_parts(ds, transform)` maps `ds`'s ExtensionType values to their tensors, applies
`transform` (batch, unbatch) and maps the results back; `slices(value, from_slices)`
is from_tensor_slices of a structure holding ExtensionType values.  A value of a type
that is not batchable raises TF's AttributeError (its Spec has no _batch / _unbatch).
"""

from __future__ import annotations

from asyncflow import nest
from asyncflow.data.structure import _ExtensionSpec, _flat, _pack

__all__ = ["has_extension", "slices", "via_parts"]


def _is_extension(v) -> bool:
    return hasattr(v, "_tf_extension_type_fields")


def has_extension(structure) -> bool:
    return any(isinstance(s, _ExtensionSpec) for s in _flat(structure))


def _to_parts(element):
    return _pack(element, [tuple(v._cf_parts()) if _is_extension(v) else v
                           for v in _flat(element)])  # fmt: skip


def _rebuild(structure_likes, parts_element):
    """The element `parts_element` (ExtensionType values as tuples of tensors) with each
    value rebuilt like its counterpart in `structure_likes` (a structure of values and
    None where a leaf is no ExtensionType)."""
    likes = _flat(structure_likes)
    leaves = nest.flatten(parts_element)
    out, pos = [], 0
    for like in likes:
        if like is None:
            out.append(leaves[pos])
            pos += 1
        else:
            n = len(like._cf_parts())
            out.append(like._cf_rebuild(leaves[pos : pos + n]))
            pos += n
    return _pack(structure_likes, out)


def _element(structure, args):
    """What a map function's arguments stand for (map passes a tuple's items apart)."""
    return args if isinstance(structure, tuple) else args[0]


def via_parts(ds, transform, check: str):
    """`transform(ds)` for a dataset of ExtensionType elements (see the module note);
    `check` names the Spec method the transformation needs ("_batch" or "_unbatch")."""
    structure = ds._structure
    for s in _flat(structure):
        if isinstance(s, _ExtensionSpec):
            getattr(s.type_spec, check)  # (TF's AttributeError for a non-batchable type)
    likes = _pack(structure, [s.like if isinstance(s, _ExtensionSpec) else None
                              for s in _flat(structure)])  # fmt: skip
    parts_structure = _to_parts(likes)
    parts = ds.map(lambda *args: _to_parts(_element(structure, args)))
    out = transform(parts)
    return out.map(lambda *args: _rebuild(likes, _element(parts_structure, args)))


def slices(value, from_slices):
    """from_tensor_slices of `value`, whose ExtensionType values are sliced tensor by
    tensor and rebuilt."""
    for v in _flat(value):
        if _is_extension(v) and not hasattr(v._type_spec, "_unbatch"):
            name = type(v._type_spec).__name__  # (TF's: the Spec cannot be sliced)
            raise AttributeError(f"'{name}' object has no attribute '_to_batched_tensor_list'")
    likes = _pack(value, [v if _is_extension(v) else None for v in _flat(value)])
    parts_value = _to_parts(value)
    ds = from_slices(parts_value)
    return ds.map(lambda *args: _rebuild(likes, _element(parts_value, args)))
