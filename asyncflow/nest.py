"""Nested structures of tensors (TF's `tf.nest`, the subset control flow and RNNs use).

A structure is any nesting of lists, tuples, namedtuples and dicts (dicts in sorted key
order, as TF); everything else is a leaf.  Invariant: `pack_sequence_as(s, flatten(s))`
rebuilds `s`.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "register_composite",
    "is_nested",
    "flatten",
    "pack_sequence_as",
    "assert_same_structure",
    "map_structure",
]


def is_nested(seq) -> bool:
    return isinstance(seq, (list, tuple, Mapping))


# -- expand_composites: composite values (SparseTensor, IndexedSlices, RaggedTensor) as
# their component tensors, in TF's order.  The classes live in higher layers and
# register themselves here (`register_composite`); the plain functions below stay as
# fast as they were.

_COMPOSITES: dict[type, tuple[Callable, Callable]] = {}


def register_composite(cls, to_components: Callable, from_components: Callable) -> None:
    """Let `expand_composites` take `cls` apart (`to_components(x)` -> list of tensors)
    and rebuild it (`from_components(like, components)`)."""
    _COMPOSITES[cls] = (to_components, from_components)


class _Components(list):
    """A composite's component tensors standing in its place; `like` rebuilds it."""

    __slots__ = ("like",)


def _components(x):
    kind = _COMPOSITES.get(type(x))
    if kind is None:
        return None
    out = _Components(kind[0](x))
    out.like = x
    return out


def _expand(structure):
    comps = _components(structure)
    if comps is not None:
        return comps
    if not is_nested(structure):
        return structure
    return _rebuild(structure, [_expand(s) for s in _items(structure)])


def _collapse(structure):
    if isinstance(structure, _Components):
        return _COMPOSITES[type(structure.like)][1](structure.like, list(structure))
    if not is_nested(structure):
        return structure
    return _rebuild(structure, [_collapse(s) for s in _items(structure)])


def _items(x) -> list:
    if isinstance(x, Mapping):
        return [x[k] for k in sorted(x)]
    return list(x)


def flatten(structure, expand_composites=False) -> list:
    """The leaves of `structure`, depth first (a leaf gives `[leaf]`); with
    `expand_composites`, sparse, ragged and IndexedSlices values give their component
    tensors."""
    if expand_composites:
        return flatten(_expand(structure))
    if not is_nested(structure):
        return [structure]
    out: list = []
    for item in _items(structure):
        out.extend(flatten(item))
    return out


def _rebuild(like, items: list):
    if isinstance(like, _Components):
        out = _Components(items)
        out.like = like.like
        return out
    if isinstance(like, Mapping):
        # values go to the sorted keys; the result keeps `like`'s own key order (TF's)
        by_key = dict(zip(sorted(like), items))
        if isinstance(like, collections.defaultdict):
            out = type(like)(like.default_factory)
            out.update((k, by_key[k]) for k in like)
            return out
        return type(like)((k, by_key[k]) for k in like)
    if isinstance(like, tuple) and hasattr(like, "_fields"):
        return type(like)(*items)
    return type(like)(items)


def _pack(structure, flat: list, pos: int):
    if not is_nested(structure):
        return flat[pos], pos + 1
    items = []
    for s in _items(structure):
        v, pos = _pack(s, flat, pos)
        items.append(v)
    return _rebuild(structure, items), pos


def pack_sequence_as(structure, flat_sequence, expand_composites=False) -> Any:
    """`flat_sequence` in the shape of `structure` (with `expand_composites`, composite
    values are rebuilt from their component tensors).

    Raises:
      ValueError: the number of leaves differs.
    """
    if expand_composites:
        return _collapse(pack_sequence_as(_expand(structure), flat_sequence))
    flat_sequence = list(flat_sequence)
    n = len(flatten(structure))
    if n != len(flat_sequence):
        raise ValueError(
            f"Could not pack sequence. Structure had {n} elements, but flat_sequence had "
            f"{len(flat_sequence)} elements."
        )
    if not is_nested(structure):
        return flat_sequence[0]
    return _pack(structure, flat_sequence, 0)[0]


def _kind(x):
    if isinstance(x, Mapping):
        return ("dict", tuple(sorted(x)))
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("namedtuple", type(x).__name__, tuple(x._fields))
    if isinstance(x, (list, tuple)):
        return ("sequence", len(x))
    return ("leaf",)


def assert_same_structure(nest1, nest2, check_types=True, expand_composites=False) -> None:
    """Raises ValueError (different nesting or lengths) or TypeError (different kinds)."""
    if expand_composites:
        nest1, nest2 = _expand(nest1), _expand(nest2)
    a, b = nest1, nest2
    if (
        isinstance(a, _Components)
        and isinstance(b, _Components)
        and type(a.like) is not type(b.like)
    ):  # (composites of different types: TF compares their type specs)
        raise ValueError(
            "The two structures don't have the same nested structure.\n\nFirst structure: "
            f"type={type(a.like).__name__} str={a.like}\n\nSecond structure: "
            f"type={type(b.like).__name__} str={b.like}"
        )
    if is_nested(a) != is_nested(b):
        raise ValueError(
            "The two structures don't have the same nested structure.\n\n"
            f"First structure: {a}\n\nSecond structure: {b}"
        )
    if not is_nested(a):
        return
    ka, kb = _kind(a), _kind(b)
    if ka[0] == "dict" or kb[0] == "dict":
        if ka != kb:
            raise ValueError(
                "The two structures don't have the same nested structure.\n\n"
                f"First structure: {a}\n\nSecond structure: {b}\n\nMore specifically: The "
                "two dictionaries don't have the same set of keys. First structure has keys "
                f"{sorted(a) if ka[0] == 'dict' else None}, while second structure has keys "
                f"{sorted(b) if kb[0] == 'dict' else None}"
            )
    elif len(a) != len(b):
        raise ValueError(
            "The two structures don't have the same nested structure.\n\n"
            f"First structure: {a}\n\nSecond structure: {b}\n\nMore specifically: The "
            f"two structures don't have the same number of elements. First structure: {a}. "
            f"Second structure: {b}"
        )
    elif check_types and (
        ka[0] != kb[0]
        or ka[0] == "namedtuple"
        and ka != kb
        or ka[0] == "sequence"
        and type(a) is not type(b)
    ):
        raise TypeError(
            "The two structures don't have the same nested structure.\n\nMore specifically: "
            "The two namedtuples don't have the same sequence type. First structure "
            f"type={type(a).__name__} str={a} has type {type(a).__name__}, while second "
            f"structure type={type(b).__name__} str={b} has type {type(b).__name__}"
        )
    for x, y in zip(_items(a), _items(b)):
        assert_same_structure(x, y, check_types)


def map_structure(func: Callable, *structure, check_types=True, expand_composites=False) -> Any:
    """`func` applied leaf by leaf to structures of the same shape."""
    if not structure:
        raise ValueError("Must provide at least one structure")
    if expand_composites:
        expanded = [_expand(s) for s in structure]
        return _collapse(map_structure(func, *expanded, check_types=check_types))
    for s in structure[1:]:
        assert_same_structure(structure[0], s, check_types)
    flats = [flatten(s) for s in structure]
    return pack_sequence_as(structure[0], [func(*xs) for xs in zip(*flats)])


def is_composite(x) -> bool:
    """Whether `expand_composites` takes `x` apart (a registered composite type)."""
    return type(x) in _COMPOSITES
