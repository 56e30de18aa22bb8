"""TF1 static shapes: ``Dimension`` and ``TensorShape`` (``tf.compat.v1`` flavour).

Shapes here are build-time facts used by shape functions; nothing in this module touches
values. Unknown is ``None`` throughout and propagates through arithmetic.

Invariants:
- ``TensorShape._dims`` is ``None`` (unknown rank) or a tuple of ``Dimension``.
- Conflicts raise ``ValueError`` with TF's messages; shapes are immutable.
- Comparisons of a ``Dimension`` with an unknown side return ``None`` (TF1 semantics).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Iterator
from typing import Any


def _arith_method(op: Any, reverse: bool = False) -> Any:
    """A ``Dimension`` operator: unknown if either side is unknown."""

    def method(self: Dimension, other: Any) -> Dimension:
        try:
            other = as_dimension(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self.value is None or other.value is None:
            return Dimension(None)
        a, b = (other.value, self.value) if reverse else (self.value, other.value)
        return Dimension(op(a, b))

    return method


class Dimension:
    """One dimension of a ``TensorShape``; ``value`` is a non-negative int or None."""

    __slots__ = ("_value",)

    def __init__(self, value: Any):
        """Raises:
        TypeError: if ``value`` is a string or not convertible to int.
        ValueError: if ``value`` is negative or a non-integral number.
        """
        if value is None:
            self._value = None
            return
        if isinstance(value, Dimension):
            self._value = value.value
            return
        if isinstance(value, str | bytes):
            raise TypeError(f"Cannot convert {value!r} to Dimension")
        try:
            int_value = int(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"Dimension value must be integer or None or have an __index__ method, "
                f"got value '{value!r}' with type '{type(value)}'"
            ) from exc
        if int_value != value:
            raise ValueError(f"Ambiguous dimension: {value}")
        if int_value < 0:
            raise ValueError(f"Dimension {int_value} must be >= 0")
        self._value = int_value

    @property
    def value(self) -> int | None:
        return self._value

    def __repr__(self) -> str:
        return f"Dimension({self._value!r})"

    def __str__(self) -> str:
        return "?" if self._value is None else str(self._value)

    def __int__(self) -> int:
        return self._value  # type: ignore[return-value]  # TypeError if unknown, as in TF

    def __index__(self) -> int:
        return self._value  # type: ignore[return-value]

    def __hash__(self) -> int:
        return hash(self._value)

    def _cmp(self, other: Any, op: Any) -> bool | None:
        try:
            other = as_dimension(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._value is None or other.value is None:
            return None
        return op(self._value, other.value)

    def __eq__(self, other: Any) -> bool | None:  # type: ignore[override]
        return self._cmp(other, operator.eq)

    def __ne__(self, other: Any) -> bool | None:  # type: ignore[override]
        return self._cmp(other, operator.ne)

    def __lt__(self, other: Any) -> bool | None:
        return self._cmp(other, operator.lt)

    def __le__(self, other: Any) -> bool | None:
        return self._cmp(other, operator.le)

    def __gt__(self, other: Any) -> bool | None:
        return self._cmp(other, operator.gt)

    def __ge__(self, other: Any) -> bool | None:
        return self._cmp(other, operator.ge)

    def is_compatible_with(self, other: Any) -> bool:
        """True if either side is unknown or both values are equal."""
        other = as_dimension(other)
        return self._value is None or other.value is None or self._value == other.value

    def assert_is_compatible_with(self, other: Any) -> None:
        """Raises:
        ValueError: if ``self`` and ``other`` are not compatible.
        """
        if not self.is_compatible_with(other):
            raise ValueError(f"Dimensions {self} and {other} are not compatible")

    def merge_with(self, other: Any) -> Dimension:
        """Returns the more specific of two compatible dimensions.

        Raises:
          ValueError: if ``self`` and ``other`` are not compatible.
        """
        other = as_dimension(other)
        self.assert_is_compatible_with(other)
        return Dimension(self._value if self._value is not None else other.value)

    __add__ = _arith_method(operator.add)
    __radd__ = _arith_method(operator.add, reverse=True)
    __sub__ = _arith_method(operator.sub)
    __rsub__ = _arith_method(operator.sub, reverse=True)
    __mul__ = _arith_method(operator.mul)
    __rmul__ = _arith_method(operator.mul, reverse=True)
    __floordiv__ = _arith_method(operator.floordiv)
    __rfloordiv__ = _arith_method(operator.floordiv, reverse=True)
    __mod__ = _arith_method(operator.mod)
    __rmod__ = _arith_method(operator.mod, reverse=True)

    def __truediv__(self, other: Any) -> Dimension:
        raise TypeError(
            f"unsupported operand type(s) for /: 'Dimension' and '{type(other).__name__}', "
            "please use // instead"
        )

    def __rtruediv__(self, other: Any) -> Dimension:
        raise TypeError(
            f"unsupported operand type(s) for /: '{type(other).__name__}' and 'Dimension', "
            "please use // instead"
        )


def as_dimension(value: Any) -> Dimension:
    """Returns ``value`` as a ``Dimension`` (unchanged if it already is one)."""
    return value if isinstance(value, Dimension) else Dimension(value)


def dimension_value(dimension: Any) -> int | None:
    """Returns the int/None value of a ``Dimension`` (or passes an int/None through)."""
    return dimension.value if isinstance(dimension, Dimension) else dimension


class TensorShape:
    """The static shape of a tensor: unknown rank, or a sequence of ``Dimension``."""

    __slots__ = ("_dims",)
    __hash__ = None  # type: ignore[assignment]  # TF1 TensorShape is unhashable

    def __init__(self, dims: Any):
        if dims is None:
            self._dims: tuple[Dimension, ...] | None = None
        elif isinstance(dims, TensorShape):
            self._dims = dims._dims
        elif isinstance(dims, str | bytes):
            raise TypeError(f"Cannot convert {dims!r} to TensorShape")
        elif _is_shape_proto(dims):  # a TensorShapeProto (op.get_attr's), as TF takes it
            if dims.unknown_rank:
                self._dims = None
            else:
                self._dims = tuple(Dimension(None if d.size < 0 else d.size) for d in dims.dim)
        elif isinstance(dims, Iterable):
            self._dims = tuple(as_dimension(d) for d in dims)
        else:
            self._dims = (as_dimension(dims),)

    @property
    def dims(self) -> list[Dimension] | None:
        return None if self._dims is None else list(self._dims)

    def as_proto(self):
        """This shape as a TensorShapeProto (TF's: -1 for an unknown size)."""
        from asyncflow.protos.tensor_shape_pb2 import TensorShapeProto

        if self._dims is None:
            return TensorShapeProto(unknown_rank=True)
        return TensorShapeProto(
            dim=[TensorShapeProto.Dim(size=-1 if d.value is None else d.value) for d in self._dims]
        )

    @property
    def ndims(self) -> int | None:
        return None if self._dims is None else len(self._dims)

    rank = ndims

    def __repr__(self) -> str:
        return f"TensorShape({self.dims!r})"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        if len(self._dims) == 1:
            return f"({self._dims[0]},)"
        return "(" + ", ".join(str(d) for d in self._dims) + ")"

    def __bool__(self) -> bool:
        return self._dims is not None

    def __len__(self) -> int:
        """Raises:
        ValueError: if the rank is unknown.
        """
        if self._dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self._dims)

    def __iter__(self) -> Iterator[Dimension]:
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key: int | slice) -> Any:
        if self._dims is not None:
            if isinstance(key, slice):
                return TensorShape(self._dims[key])
            return self._dims[key]
        if not isinstance(key, slice):
            return Dimension(None)
        if key.step is not None:
            raise ValueError("Steps are not yet handled")
        start = 0 if key.start is None else key.start
        if key.stop is None or start < 0 or key.stop < 0:
            return unknown_shape()
        return unknown_shape(rank=max(key.stop - start, 0))

    def num_elements(self) -> int | None:
        """Total element count, or None unless fully defined."""
        if not self.is_fully_defined():
            return None
        return functools.reduce(operator.mul, (d.value for d in self._dims), 1)  # type: ignore[union-attr]

    def is_fully_defined(self) -> bool:
        return self._dims is not None and all(d.value is not None for d in self._dims)

    def as_list(self) -> list[int | None]:
        """Raises:
        ValueError: if the rank is unknown.
        """
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return [d.value for d in self._dims]

    def merge_with(self, other: Any) -> TensorShape:
        """Returns the most specific shape compatible with both.

        Raises:
          ValueError: "Shapes (2, 3) and (3, 3) are not compatible".
        """
        other = as_shape(other)
        if self._dims is None:
            return other
        if other._dims is None:
            return self
        try:
            self.assert_same_rank(other)
            return TensorShape(
                a.merge_with(b) for a, b in zip(self._dims, other._dims, strict=True)
            )
        except ValueError:
            raise ValueError(f"Shapes {self} and {other} are not compatible") from None

    def concatenate(self, other: Any) -> TensorShape:
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return unknown_shape()
        return TensorShape(self._dims + other._dims)

    def __add__(self, other: Any) -> TensorShape:
        return self.concatenate(other)

    def __radd__(self, other: Any) -> TensorShape:
        return as_shape(other).concatenate(self)

    def assert_same_rank(self, other: Any) -> None:
        """Raises:
        ValueError: if both ranks are known and differ.
        """
        other = as_shape(other)
        if self.rank is not None and other.rank is not None and self.rank != other.rank:
            raise ValueError(f"Shapes {self} and {other} must have the same rank")

    def assert_has_rank(self, rank: int) -> None:
        """Raises:
        ValueError: if the rank is known and not ``rank``.
        """
        if self.rank not in (None, rank):
            raise ValueError(f"Shape {self} must have rank {rank}")

    def with_rank(self, rank: int) -> TensorShape:
        """Returns this shape with rank ``rank``.

        Raises:
          ValueError: if the rank is known and not ``rank``.
        """
        try:
            return self.merge_with(unknown_shape(rank=rank))
        except ValueError:
            raise ValueError(f"Shape {self} must have rank {rank}") from None

    def with_rank_at_least(self, rank: int) -> TensorShape:
        """Raises:
        ValueError: if the rank is known and below ``rank``.
        """
        if self.rank is not None and self.rank < rank:
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def with_rank_at_most(self, rank: int) -> TensorShape:
        """Raises:
        ValueError: if the rank is known and above ``rank``.
        """
        if self.rank is not None and self.rank > rank:
            raise ValueError(f"Shape {self} must have rank at most {rank}")
        return self

    def is_compatible_with(self, other: Any) -> bool:
        """True if some fully defined shape could match both."""
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return True
        if len(self._dims) != len(other._dims):
            return False
        return all(a.is_compatible_with(b) for a, b in zip(self._dims, other._dims, strict=True))

    def assert_is_compatible_with(self, other: Any) -> None:
        """Raises:
        ValueError: if ``self`` and ``other`` are not compatible.
        """
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def most_specific_compatible_shape(self, other: Any) -> TensorShape:
        """The most specific shape compatible with both (unknown where they differ)."""
        other = as_shape(other)
        if self._dims is None or other._dims is None or self.rank != other.rank:
            return unknown_shape()
        return TensorShape(
            a.value if a.value is not None and a.value == b.value else None
            for a, b in zip(self._dims, other._dims, strict=True)
        )

    def __eq__(self, other: Any) -> bool:
        # Structural: unknown dims compare equal to unknown dims (see module note).
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._dims is None or other._dims is None:
            return self._dims is None and other._dims is None
        return self.as_list() == other.as_list()

    def __ne__(self, other: Any) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result


def _is_shape_proto(value: Any) -> bool:
    return type(value).__name__ == "TensorShapeProto" and hasattr(value, "unknown_rank")


def as_shape(shape: Any) -> TensorShape:
    """Converts a list/tuple/int/None/``TensorShape`` to a ``TensorShape``."""
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank: int | None = None, ndims: int | None = None) -> TensorShape:
    """Unknown rank if ``rank`` is None, else ``rank`` unknown dimensions."""
    rank = ndims if rank is None else rank
    return TensorShape(None) if rank is None else TensorShape([None] * rank)


def scalar() -> TensorShape:
    return TensorShape([])


def vector(length: Any) -> TensorShape:
    return TensorShape([length])


def matrix(rows: Any, cols: Any) -> TensorShape:
    return TensorShape([rows, cols])


def dimension_at_index(shape: Any, index: int) -> Dimension:
    """``shape[index]`` as a ``Dimension``, unknown when the rank is unknown."""
    shape = as_shape(shape)
    return Dimension(None) if shape.rank is None else shape.dims[index]  # type: ignore[index]


def _broadcast_dim(a: Dimension, b: Dimension) -> Dimension:
    x, y = a.value, b.value
    if x is None and y is None:
        return Dimension(None)
    if x is None or y is None:
        known = x if y is None else y
        # The unknown side may be 1 (result = known) or equal to known; either way a known
        # size other than 1 wins, while against 1 the result stays unknown.
        return Dimension(None if known == 1 else known)
    if x == y or y == 1:
        return a
    if x == 1:
        return b
    raise ValueError(f"Dimensions must be equal, but are {x} and {y}")


def broadcast_shape(shape_x: Any, shape_y: Any) -> TensorShape:
    """NumPy-style broadcast of two static shapes, tolerating unknown dims.

    Raises:
      ValueError: "Dimensions must be equal, but are 2 and 3" for incompatible known dims.
    """
    shape_x, shape_y = as_shape(shape_x), as_shape(shape_y)
    if shape_x._dims is None or shape_y._dims is None:
        return unknown_shape()
    xs, ys = list(shape_x._dims), list(shape_y._dims)
    n = max(len(xs), len(ys))
    xs = [Dimension(1)] * (n - len(xs)) + xs
    ys = [Dimension(1)] * (n - len(ys)) + ys
    return TensorShape(_broadcast_dim(a, b) for a, b in zip(xs, ys, strict=True))
