"""A strict array module for tests: device arrays that never silently become NumPy.

A device kernel receives arrays that live on its device and must compute on them with
`ctx.xp`; `np.asarray(x)`, `float(x)`, `int(x)`, `x.tolist()` or a Python loop over `x`
would copy a device array to the host (CuPy) or fail.  `StrictArray` wraps a NumPy array
and refuses every such implicit conversion (`__array__`, `__float__`, `__int__`,
`__index__`, `__bool__`, `__iter__`, `tolist`, `item`, `tobytes` raise
`HostConversionError`), and NumPy functions applied to it raise too (it opts out of
NumPy's ufunc and array-function protocols).  `xp` is the matching array module: any
NumPy function reached through it unwraps its arguments, runs, and wraps array results,
as CuPy's functions do for CuPy arrays.  Dtypes, constants and classes pass through.

    x = strict_xp.asarray(np.arange(6.0))      # explicit host -> "device"
    y = strict_xp.xp.exp(x) * 2                 # fine: device arithmetic
    np.asarray(y)                               # HostConversionError
    strict_xp.to_numpy(y)                       # explicit device -> host

`StrictNamespace(allowed={...})` builds a namespace that offers only the named functions
(a toy accelerator with a small xp); the others raise AttributeError, as a missing
function of a real array module would.  `xp.asnumpy(y)` (CuPy's name) is the explicit
device -> host copy a kernel may ask for (it is always offered).
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from typing import Any

import numpy as np

from asyncflow.devices.fake_cupy import refuse_host_conversion as _refuse_all

__all__ = [
    "HostConversionError",
    "StrictArray",
    "StrictNamespace",
    "asarray",
    "is_strict",
    "to_numpy",
    "unwrap",
    "wrap",
    "xp",
]


class HostConversionError(TypeError):
    """An implicit device -> host conversion of a StrictArray was attempted."""


def _refuse(what: str):
    def method(self, *args, **kwargs):
        raise HostConversionError(f"implicit host conversion of a device array ({what})")

    method.__name__ = what
    return method


def refuse_host_conversion(cls):
    """Every implicit host conversion of `cls` raises HostConversionError (the list the
    fake CuPy's arrays refuse too)."""
    return _refuse_all(cls, _refuse)


def unwrap(value: Any) -> Any:
    """StrictArrays (also inside lists, tuples, dicts and slices) -> their NumPy arrays."""
    if type(value) is StrictArray:
        return value._a
    if type(value) is tuple or type(value) is list:
        return type(value)(unwrap(v) for v in value)
    if type(value) is dict:
        return {k: unwrap(v) for k, v in value.items()}
    if type(value) is slice:
        return slice(unwrap(value.start), unwrap(value.stop), unwrap(value.step))
    return value


def wrap(value: Any) -> Any:
    """NumPy arrays and scalars (also inside tuples and lists) -> StrictArrays."""
    if isinstance(value, (np.ndarray, np.generic)):
        return StrictArray(value)
    if type(value) is tuple or type(value) is list:
        return type(value)(wrap(v) for v in value)
    return value


@refuse_host_conversion
class StrictArray:
    """A NumPy array living on a pretend device; see the module note."""

    __slots__ = ("_a",)
    __array_ufunc__ = None  # np.add(x, strict) -> defers, then TypeError
    __array_priority__ = 1000
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, array: Any):
        if type(array) is StrictArray:
            array = array._a
        self._a = np.asarray(array)

    def __array_function__(self, func, types_, args, kwargs):
        raise HostConversionError(
            f"NumPy function {getattr(func, '__name__', func)} called on a device array; "
            "use ctx.xp"
        )

    # -- metadata: on the host for a device array too (CuPy keeps it there)
    @property
    def shape(self) -> tuple:
        return self._a.shape

    @property
    def dtype(self) -> np.dtype:
        return self._a.dtype

    @property
    def ndim(self) -> int:
        return self._a.ndim

    @property
    def size(self) -> int:
        return self._a.size

    @property
    def nbytes(self) -> int:
        return self._a.nbytes

    @property
    def itemsize(self) -> int:
        return self._a.itemsize

    @property
    def strides(self) -> tuple:
        return self._a.strides

    @property
    def flags(self):
        return self._a.flags

    @property
    def T(self) -> StrictArray:  # noqa: N802 - NumPy's name
        return StrictArray(self._a.T)

    @property
    def real(self) -> StrictArray:
        return StrictArray(self._a.real)

    @property
    def imag(self) -> StrictArray:
        return StrictArray(self._a.imag)

    def __len__(self) -> int:
        return len(self._a)

    def __repr__(self) -> str:
        return f"StrictArray({self._a!r})"

    __str__ = __repr__

    # -- array methods: unwrap the arguments, wrap the results
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return wrap(attr)

        def method(*args, **kwargs):
            return wrap(attr(*unwrap(args), **unwrap(kwargs)))

        return method

    def __getitem__(self, key):
        return wrap(self._a[unwrap(key)])

    def __setitem__(self, key, value) -> None:
        self._a[unwrap(key)] = unwrap(value)


def _binary(name: str):
    op = getattr(np.ndarray, name)

    def method(self, other):
        if isinstance(other, np.ndarray):
            # A host array meeting a device array: the kernel forgot to move it.
            raise HostConversionError(f"host ndarray operand of {name} on a device array")
        return wrap(op(self._a, unwrap(other)))

    method.__name__ = name
    return method


def _unary(name: str):
    op = getattr(np.ndarray, name)

    def method(self):
        return wrap(op(self._a))

    method.__name__ = name
    return method


for _name in (
    "add sub mul truediv floordiv mod pow matmul and or xor lshift rshift divmod "
    "radd rsub rmul rtruediv rfloordiv rmod rpow rmatmul rand ror rxor rlshift rrshift "
    "rdivmod lt le gt ge eq ne"
).split():
    setattr(StrictArray, f"__{_name}__", _binary(f"__{_name}__"))
for _name in ("iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior"):

    def _inplace(self, other, _op=getattr(np.ndarray, f"__{_name}__")):
        _op(self._a, unwrap(other))
        return self

    setattr(StrictArray, f"__{_name}__", _inplace)
for _name in ("neg", "pos", "abs", "invert"):
    setattr(StrictArray, f"__{_name}__", _unary(f"__{_name}__"))


def is_strict(value: Any) -> bool:
    return type(value) is StrictArray


def asarray(value: Any, dtype=None) -> StrictArray:
    """Explicit host -> device copy."""
    return StrictArray(np.array(unwrap(value), dtype=dtype))


def to_numpy(value: Any) -> Any:
    """Explicit device -> host copy (also inside tuples and lists); others unchanged."""
    if type(value) is StrictArray:
        return value._a.copy()
    if type(value) is tuple or type(value) is list:
        return type(value)(to_numpy(v) for v in value)
    return value


class _StrictUfunc:
    """A NumPy ufunc over StrictArrays: call, reduce, accumulate, outer and at."""

    def __init__(self, ufunc: np.ufunc):
        self._ufunc = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args, **kwargs):
        return wrap(self._ufunc(*unwrap(args), **unwrap(kwargs)))

    def __getattr__(self, name: str):
        if name not in ("reduce", "accumulate", "outer", "at", "reduceat"):
            return getattr(self._ufunc, name)  # nin, nout, identity, ...
        method = getattr(self._ufunc, name)
        return lambda *args, **kwargs: wrap(method(*unwrap(args), **unwrap(kwargs)))


class StrictNamespace:
    """An array module over NumPy whose functions take and return StrictArrays.

    `allowed`: the only names offered (None: all of NumPy's).  Dtypes, classes and
    constants are NumPy's own, as CuPy's are.
    """

    def __init__(self, module: types.ModuleType = np, allowed: Iterable[str] | None = None):
        self._module = module
        self._allowed = None if allowed is None else frozenset(allowed)
        self.__name__ = f"strict_xp({module.__name__})"

    def __getattr__(self, name: str):
        # Made once per name and kept, so that `xp.cumsum is xp.cumsum`, as in a module.
        value = self._make(name)
        setattr(self, name, value)
        return value

    def _make(self, name: str):
        if name.startswith("__") or (self._allowed is not None and name not in self._allowed):
            raise AttributeError(f"{self.__name__} has no attribute {name!r}")
        if name == "asnumpy":
            return to_numpy
        attr = getattr(self._module, name)
        if isinstance(attr, types.ModuleType):
            return StrictNamespace(attr)
        if isinstance(attr, type) or not callable(attr):
            return attr
        if isinstance(attr, np.ufunc):
            return _StrictUfunc(attr)
        if name in ("asarray", "array", "asanyarray", "ascontiguousarray"):
            # Host values become device arrays (a copy), device arrays stay.
            def convert(value, *args, **kwargs):
                return wrap(np.asarray(attr(unwrap(value), *unwrap(args), **unwrap(kwargs))))

            return convert

        def function(*args, **kwargs):
            return wrap(attr(*unwrap(args), **unwrap(kwargs)))

        function.__name__ = name
        return function

    def __repr__(self) -> str:
        return f"<{self.__name__}>"


xp = StrictNamespace()
