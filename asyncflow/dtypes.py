"""TensorFlow data types (``tf.DType``) and TF's Python-value conversion rules.

Invariants:
- One ``DType`` instance per TF enum; equality and hashing go by the enum.
- Strings are stored as NumPy object arrays of ``bytes`` (``str`` is UTF-8 encoded).
- Python floats default to float32 and ints to int32 (int64 when out of int32 range),
  as ``tf.constant`` does; NumPy arrays keep their own dtype.
- ``ml_dtypes`` is optional: without it ``bfloat16`` exists but has no NumPy type.
- Every type has a reference twin (``float32_ref``, enum + 100), the dtype TF1 reports
  for a Variable and its ref tensors; it is not equal to its base type, so code that
  needs a plain dtype takes ``.base_dtype``.
"""

from __future__ import annotations

import builtins
import types
from typing import Any

import numpy as np

try:  # Optional: provides a NumPy bfloat16 scalar type.
    import ml_dtypes as _ml_dtypes

    _BFLOAT16_NP: Any = _ml_dtypes.bfloat16
    _BFLOAT16_IMPORT_ERROR: Exception | None = None
except ImportError as _exc:  # pragma: no cover - depends on the environment
    _ml_dtypes = None
    _BFLOAT16_NP = None
    _BFLOAT16_IMPORT_ERROR = _exc


def _ml_type(name: str) -> Any:
    """ml_dtypes' NumPy type `name` (TF's narrow types), None without it."""
    return getattr(_ml_dtypes, name, None)


def _finfo(np_type):
    """np.finfo, or ml_dtypes' for its own floating types (which NumPy's refuses)."""
    try:
        return np.finfo(np_type)
    except ValueError:
        return _ml_dtypes.finfo(np_type)


def _iinfo(np_type):
    try:
        return np.iinfo(np_type)
    except ValueError:
        return _ml_dtypes.iinfo(np_type)


class DType:
    """A TensorFlow element type, e.g. ``tf.float32``."""

    __slots__ = ("_enum", "_name", "_np", "_base", "np_dtype", "_handle_data")

    def __init__(self, type_enum: int, handle_data=None):
        """The type of TF's DataType enum value `type_enum` (TF's constructor; the
        module's types are the canonical instances, which `as_dtype` returns).

        Raises:
          TypeError: an enum value that is no type.
        """
        spec = _SPECS.get(int(type_enum))
        if spec is None:
            raise TypeError(f"{type_enum} does not correspond to a valid tensorflow::DataType")
        name, np_type, base = spec
        self._enum = int(type_enum)
        self._name = name
        self._np = np_type
        self._base = base  # the base type of a reference type, else None
        self._handle_data = handle_data
        # The np.dtype instance (None without a NumPy type): kernels compare a result's
        # dtype to it with `is` first, which is cheaper than `== scalar type`.
        self.np_dtype = None if np_type is None else np.dtype(np_type)

    @property
    def name(self) -> str:
        return self._name

    @property
    def as_datatype_enum(self) -> int:
        return self._enum

    @property
    def as_numpy_dtype(self) -> Any:
        """The NumPy scalar type (``np.object_`` for string).

        Raises:
          TypeError: for bfloat16 when ``ml_dtypes`` is not installed.
        """
        if self._np is None:
            if self.base_dtype in (resource, variant):
                raise TypeError(f"{self!r} has no NumPy type")
            raise TypeError(
                f"{self!r} has no NumPy type: install ml_dtypes to use it "
                f"(import failed: {_BFLOAT16_IMPORT_ERROR})"
            )
        return self._np

    @property
    def base_dtype(self) -> DType:
        return self if self._base is None else self._base

    @property
    def is_ref_dtype(self) -> bool:
        """True for a reference type (``float32_ref``)."""
        return self._base is not None

    _is_ref_dtype = is_ref_dtype  # TF's spelling

    @property
    def _as_ref(self) -> DType:
        """The reference type of this type's base (``float32`` -> ``float32_ref``)."""
        return self if self._base is not None else _REF_OF[self]

    @property
    def real_dtype(self) -> DType:
        return {complex64: float32, complex128: float64}.get(self.base_dtype, self)

    @property
    def is_numpy_compatible(self) -> bool:
        return self._np is not None

    @property
    def is_quantized(self) -> bool:
        return self.base_dtype in _QUANTIZED

    @property
    def is_bool(self) -> bool:
        return self.base_dtype is bool_

    @property
    def is_floating(self) -> bool:
        return self.base_dtype in _FLOATING

    @property
    def is_complex(self) -> bool:
        return self.base_dtype in (complex64, complex128)

    @property
    def is_integer(self) -> bool:
        return self.base_dtype in _SIGNED or self.base_dtype in _UNSIGNED

    @property
    def is_unsigned(self) -> bool:
        return self.base_dtype in _UNSIGNED

    @property
    def min(self) -> Any:
        """Smallest representable value.

        Raises:
          TypeError: for types without a minimum (bool, string, complex).
        """
        if self.is_quantized:
            raise TypeError(f"Cannot find minimum value of {self!r} with quantized type.")
        if self.is_floating:
            return float(_finfo(self.as_numpy_dtype).min)
        if self.is_integer:
            return int(_iinfo(self._np).min)
        raise TypeError(f"Cannot find minimum value of {self!r}.")

    @property
    def max(self) -> Any:
        """Largest representable value.

        Raises:
          TypeError: for types without a maximum (bool, string, complex).
        """
        if self.is_quantized:
            raise TypeError(f"Cannot find maximum value of {self!r} with quantized type.")
        if self.is_floating:
            return float(_finfo(self.as_numpy_dtype).max)
        if self.is_integer:
            return int(_iinfo(self._np).max)
        raise TypeError(f"Cannot find maximum value of {self!r}.")

    @property
    def size(self) -> int:
        """Bytes per element (a pointer's size for string, as TF reports)."""
        if self.base_dtype is bfloat16:
            return 2
        return np.dtype(self._np).itemsize

    def is_compatible_with(self, other: Any) -> bool:
        """True if ``other`` (anything ``as_dtype`` accepts) converts to this type.

        As in TF1, a reference type converts to its base type (``float32`` is compatible
        with ``float32_ref``), not the other way round.
        """
        other = as_dtype(other)
        return self == other or self == other.base_dtype

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, DType):
            return self._enum == other._enum
        if other is None:
            return False
        try:
            return self._enum == as_dtype(other)._enum
        except TypeError:
            return False

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._enum

    def __reduce__(self):
        return as_dtype, (self._name,)

    def __repr__(self) -> str:
        return f"tf.{self._name}"

    def __str__(self) -> str:  # (TF's: print(x.dtype) and "%s" % dtype show this)
        return f"<dtype: '{self._name}'>"


_SPECS: dict[int, tuple] = {}  # enum -> (name, NumPy type, base type of a ref type)


def _define(type_enum: int, name: str, np_type: Any, base: DType | None = None) -> DType:
    _SPECS[type_enum] = (name, np_type, base)
    return DType(type_enum)


float16 = _define(19, "float16", np.float16)
half = float16
bfloat16 = _define(14, "bfloat16", _BFLOAT16_NP)
float32 = _define(1, "float32", np.float32)
float64 = _define(2, "float64", np.float64)
double = float64
int8 = _define(6, "int8", np.int8)
int16 = _define(5, "int16", np.int16)
int32 = _define(3, "int32", np.int32)
int64 = _define(9, "int64", np.int64)
uint8 = _define(4, "uint8", np.uint8)
uint16 = _define(17, "uint16", np.uint16)
uint32 = _define(22, "uint32", np.uint32)
uint64 = _define(23, "uint64", np.uint64)
bool_ = _define(10, "bool", np.bool_)
string = _define(7, "string", np.object_)
complex64 = _define(8, "complex64", np.complex64)
complex128 = _define(18, "complex128", np.complex128)
# Quantized types: NumPy records of their storage type, as TF's; no kernel computes on
# them here, but graphs and protos carry them.
qint8 = _define(11, "qint8", np.dtype([("qint8", np.int8)]))
quint8 = _define(12, "quint8", np.dtype([("quint8", np.uint8)]))
qint32 = _define(13, "qint32", np.dtype([("qint32", np.int32)]))
qint16 = _define(15, "qint16", np.dtype([("qint16", np.int16)]))
quint16 = _define(16, "quint16", np.dtype([("quint16", np.uint16)]))
# TF's narrow types (8-bit floats, 4-bit integers: one byte per element), ml_dtypes'.
float8_e5m2 = _define(24, "float8_e5m2", _ml_type("float8_e5m2"))
float8_e4m3fn = _define(25, "float8_e4m3fn", _ml_type("float8_e4m3fn"))
float8_e4m3fnuz = _define(26, "float8_e4m3fnuz", _ml_type("float8_e4m3fnuz"))
float8_e4m3b11fnuz = _define(27, "float8_e4m3b11fnuz", _ml_type("float8_e4m3b11fnuz"))
float8_e5m2fnuz = _define(28, "float8_e5m2fnuz", _ml_type("float8_e5m2fnuz"))
int4 = _define(29, "int4", _ml_type("int4"))
uint4 = _define(30, "uint4", _ml_type("uint4"))
int2 = _define(31, "int2", _ml_type("int2"))
uint2 = _define(32, "uint2", _ml_type("uint2"))
float4_e2m1fn = _define(33, "float4_e2m1fn", _ml_type("float4_e2m1fn"))
# Handles: no NumPy type (as_numpy_dtype raises TypeError).
resource = _define(20, "resource", None)
variant = _define(21, "variant", None)

_ALL = (
    float16, bfloat16, float32, float64, int8, int16, int32, int64,
    uint8, uint16, uint32, uint64, bool_, string, complex64, complex128,
    qint8, quint8, qint32, qint16, quint16, resource, variant,
    float8_e5m2, float8_e4m3fn, int4, uint4, float8_e4m3fnuz, float8_e4m3b11fnuz,
    float8_e5m2fnuz, int2, uint2, float4_e2m1fn,
)  # fmt: skip
_QUANTIZED = frozenset((qint8, quint8, qint32, qint16, quint16))
# TF's narrow floats (8 and 4 bits, one byte per element in memory).
_NARROW_FLOATS = (float8_e5m2, float8_e4m3fn, float8_e4m3fnuz, float8_e4m3b11fnuz)
_NARROW_FLOATS += (float8_e5m2fnuz, float4_e2m1fn)
_FLOATING = frozenset((float16, bfloat16, float32, float64, *_NARROW_FLOATS))
_SIGNED = frozenset((int8, int16, int32, int64, int4, int2))
_UNSIGNED = frozenset((uint8, uint16, uint32, uint64, uint4, uint2))
_REF_OF = {d: _define(d._enum + 100, d._name + "_ref", d._np, base=d) for d in _ALL}
globals().update({r.name: r for r in _REF_OF.values()})  # TF's dtypes.float32_ref, ...
_BY_ENUM = {d.as_datatype_enum: d for d in (*_ALL, *_REF_OF.values())}
_BY_NAME: dict[str, DType] = {d.name: d for d in (*_ALL, *_REF_OF.values())}
_BY_NAME.update({"half": float16, "float": float32, "double": float64})
_BY_NP = {np.dtype(d._np): d for d in _ALL if d._np is not None and d is not string}
QUANTIZED_DTYPES = frozenset((*_QUANTIZED, *(_REF_OF[d] for d in _QUANTIZED)))
_BY_PY = {builtins.bool: bool_, int: int32, float: float32, complex: complex128}
_BY_PY.update({str: string, bytes: string})


def as_dtype(type_value: Any) -> DType:
    """Converts a DType, name, TF enum, NumPy dtype/type or Python type to a ``DType``.

    Raises:
      TypeError: if ``type_value`` names no supported type.
    """
    if isinstance(type_value, DType):
        return _BY_ENUM.get(type_value._enum, type_value)  # (the canonical instance)
    if isinstance(type_value, str):
        if type_value in _BY_NAME:
            return _BY_NAME[type_value]
    elif isinstance(type_value, int) and not isinstance(type_value, builtins.bool):
        if type_value in _BY_ENUM:
            return _BY_ENUM[type_value]
    elif isinstance(type_value, type) and type_value in _BY_PY:
        return _BY_PY[type_value]
    elif type_value is not None:  # np.dtype(None) would mean float64
        try:
            np_dtype = np.dtype(type_value)
        except TypeError:
            np_dtype = None
        if np_dtype is not None:
            if np_dtype in _BY_NP:
                return _BY_NP[np_dtype]
            if np_dtype.kind in "OSU":
                return string
    raise TypeError(
        f"Cannot convert the argument `type_value`: {type_value!r} to a TensorFlow DType."
    )


_INT32 = np.iinfo(np.int32)
_INT64 = np.iinfo(np.int64)


def _flatten(value: Any, out: list[Any]) -> tuple[int, ...]:
    """Appends the leaves of nested lists to ``out``; returns the shape.

    Raises:
      ValueError: on ragged nesting.
    """
    if isinstance(value, list | tuple):
        shapes = {_flatten(v, out) for v in value}
        if len(shapes) > 1:
            raise ValueError(f"Can't convert non-rectangular Python sequence to Tensor: {value}")
        return (len(value), *(shapes.pop() if shapes else ()))
    out.append(value)
    return ()


def _leaf_dtype(leaf: Any, value: Any) -> DType:
    if isinstance(leaf, np.ndarray | np.generic):
        return as_dtype(leaf.dtype)
    for py_type in (builtins.bool, int, float, complex, str, bytes):
        if isinstance(leaf, py_type):
            return _BY_PY[py_type]
    raise _unconvertible(value)


def _unconvertible(value: Any) -> TypeError:
    """TF's error for a value with an element no tensor holds (an object, a dict, a
    RaggedTensor or SparseTensor given to a dense op): it names the whole value."""
    return TypeError(
        f"Failed to convert elements of {value!r} to Tensor. Consider casting elements to a "
        "supported type. See https://www.tensorflow.org/api_docs/python/tf/dtypes for "
        "supported TF dtypes."
    )


def _python_dtype(leaves: list[Any], value: Any = None) -> DType:
    kinds = {_leaf_dtype(leaf, value) for leaf in leaves}
    if not kinds:
        return float32  # tf.constant([]) is float32
    if len(kinds) == 1:
        (dtype,) = kinds
    elif string in kinds:
        raise TypeError(f"Can't mix strings and numbers in one Tensor: {leaves!r}")
    elif complex128 in kinds or any(k.is_complex for k in kinds):
        dtype = complex128
    elif any(k.is_floating for k in kinds):
        dtype = max((k for k in kinds if k.is_floating), key=lambda k: k.size)
    else:
        dtype = int32  # bool mixed with int: TF treats it as int
    if dtype == int32 and any(not (_INT32.min <= int(v) <= _INT32.max) for v in leaves):
        dtype = int64
        if any(not (_INT64.min <= int(v) <= _INT64.max) for v in leaves):
            dtype = _past_int64(leaves, value)
    return dtype


def _past_int64(leaves: list[Any], value: Any) -> DType:
    """The type TF gives integers some of which no int64 holds: NumPy's inference, as
    TF's conversion uses it (uint64 when every value is past int64 or a bool, float32
    when others are int64s, refused past uint64)."""
    if any(not (_INT64.min <= int(v) < 2**64) for v in leaves):
        raise TypeError(
            f"Failed to convert elements of {value!r} to Tensor. Consider casting elements to "
            "a supported type."
        )
    if all(isinstance(v, builtins.bool) or int(v) > _INT64.max for v in leaves):
        return uint64
    return float32


def infer_dtype(value: Any) -> DType:
    """Returns the ``DType`` TF gives ``value`` when converted without a dtype.

    Raises:
      TypeError: for unsupported Python objects or mixed strings and numbers.
      ValueError: for ragged nested lists.
    """
    if isinstance(value, np.ndarray | np.generic):
        return as_dtype(value.dtype)
    if value is None:
        raise ValueError("None values not supported.")
    leaves: list[Any] = []
    _flatten(value, leaves)
    if any(isinstance(leaf, np.ndarray) for leaf in leaves):
        return as_dtype(np.asarray(value).dtype)
    return _python_dtype(leaves, value)


def _to_bytes(x: Any) -> bytes:
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode("utf-8")
    if isinstance(x, np.bytes_ | np.str_):
        return _to_bytes(x.item())
    raise TypeError(f"Expected string, got {x!r} of type '{type(x).__name__}' instead.")


def _string_array(value: Any) -> np.ndarray:
    arr = np.asarray(value, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for idx, x in np.ndenumerate(arr):
        out[idx] = _to_bytes(x)
    return out


def _mismatch(leaf: Any, dtype: DType, value: Any) -> TypeError:
    # (a composite tensor, SparseTensor or RaggedTensor, gets TF's wording for
    # unconvertible elements; other values TF's "Expected <dtype>")
    if hasattr(leaf, "dense_shape") or hasattr(leaf, "flat_values"):
        return _unconvertible(value)
    return TypeError(
        f"Expected {dtype.name}, got {leaf!r} of type '{type(leaf).__name__}' instead."
    )


def _check_python_cast(leaves: list[Any], dtype: DType, value: Any = None) -> None:
    """Rejects Python values the target dtype cannot hold exactly, as TF does."""
    if dtype.is_integer or dtype.is_bool:
        for leaf in leaves:
            ok = isinstance(leaf, int | np.integer | np.bool_)
            if dtype.is_bool and not isinstance(leaf, builtins.bool | np.bool_):
                ok = False
            if not ok:
                raise _mismatch(leaf, dtype, value)
        if dtype.is_integer:
            # TF1 (and TF 2.21 in graph mode) wraps a 64-bit integer modulo the target's
            # width: constant(300, uint8) is 44, constant(-1, uint32) is 4294967295.
            # Only a value no 64-bit integer holds is refused.
            for leaf in leaves:
                if not -(2**63) <= int(leaf) < 2**64:
                    raise TypeError(f"Value {leaf!r} out of range for {dtype.name}.")
    elif dtype.is_floating or dtype.is_complex:
        for leaf in leaves:
            number = isinstance(leaf, int | float | np.number | np.bool_) or (
                dtype.is_complex and isinstance(leaf, complex)
            )
            if not number:  # a string, a complex for a real type, None, an object
                raise _mismatch(leaf, dtype, value)


def convert_to_numpy(value: Any, dtype: Any = None) -> np.ndarray:
    """Converts a Python or NumPy value to an array under TF's conversion rules.

    NumPy inputs keep their dtype unless ``dtype`` is given, in which case they are cast.
    Python inputs are checked: ``convert_to_numpy(1.5, int32)`` raises as TF does.

    Raises:
      TypeError: for unsupported objects or values the requested dtype can't represent.
      ValueError: for ragged nested lists.
    """
    target = None if dtype is None else as_dtype(dtype)
    if value is None:
        raise ValueError("None values not supported.")
    if isinstance(value, np.ndarray | np.generic):
        source = as_dtype(value.dtype)
        if target is None:
            target = source
        if target == string:
            return _string_array(value)
        if source == string:
            raise TypeError(f"Can't convert a string array to {target.name}.")
        return np.asarray(value, dtype=target.as_numpy_dtype)
    if target is not None and isinstance(value, list | tuple):
        fast = _typed_array(value, target)
        if fast is not None:
            return fast
    leaves: list[Any] = []
    _flatten(value, leaves)
    if target is None:
        target = infer_dtype(value)
    elif not any(isinstance(leaf, np.ndarray) for leaf in leaves):
        if target == string:
            for leaf in leaves:
                _to_bytes(leaf)
        else:
            _check_python_cast(leaves, target, value)
    if target == string:
        return _string_array(value)
    if any(isinstance(leaf, str | bytes) for leaf in leaves):
        raise TypeError(f"Can't convert strings in {value!r} to {target.name}.")
    if target.is_integer and not any(isinstance(leaf, np.ndarray) for leaf in leaves):
        info = np.iinfo(target.as_numpy_dtype)
        if any(not info.min <= int(leaf) <= info.max for leaf in leaves):
            return _wrapped_ints(value, target)
    with np.errstate(over="ignore"):  # (a float beyond the type's range is inf, silently)
        return np.asarray(value, dtype=target.as_numpy_dtype)


def fits_without_wrapping(value: Any, dtype: Any) -> bool:
    """False when `value` holds a Python integer outside integer `dtype`'s range.

    An explicit dtype wraps such values as TF does (constant(2**40, int32) is 0), but an
    op input whose type merely defaults to int32 takes int64 instead (TF's
    reshape(x, [50000**2]) has an int64 shape): conversions under a preferred dtype ask
    this first.
    """
    dtype = as_dtype(dtype)
    if not dtype.is_integer or isinstance(value, np.ndarray | np.generic):
        return True
    if isinstance(value, builtins.bool):
        return True
    if isinstance(value, int):
        ints = [value]
    else:
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, OverflowError, NotImplementedError):
            return True
        if arr.dtype.kind in "iu":
            ints = [arr.min(), arr.max()] if arr.size else []
        elif arr.dtype.kind == "O":
            leaves: list[Any] = []
            try:
                _flatten(value, leaves)
            except ValueError:
                return True
            ints = [v for v in leaves if isinstance(v, int) and not isinstance(v, builtins.bool)]
        else:
            return True
    info = np.iinfo(dtype.as_numpy_dtype)
    return all(info.min <= int(v) <= info.max for v in ints)


def _typed_array(value: list | tuple, target: DType) -> np.ndarray | None:
    """A nested list converted to `target` in one NumPy pass when NumPy's own reading of
    it shows every leaf acceptable (a float list for a float dtype, ints in range...);
    None sends it down the leaf-by-leaf path, which decides and words any error.  A
    [100000, 100] list takes seconds this way instead of a minute or more."""
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError, OverflowError, NotImplementedError):
        return None
    kind = arr.dtype.kind
    if target.is_bool:
        ok = kind == "b"
    elif target.is_integer:
        ok = kind in "biu"
        if ok and arr.size and kind != "b":
            info = np.iinfo(target.as_numpy_dtype)
            if arr.min() < info.min or arr.max() > info.max:
                return None
    elif target.is_floating:
        ok = kind in "biuf"
    elif target.is_complex:
        ok = kind in "biufc"
    else:
        ok = False
    return arr.astype(target.as_numpy_dtype, copy=False) if ok else None


def _wrapped_ints(value: Any, target: DType) -> np.ndarray:
    """Python integers outside `target`'s range, wrapped modulo its width as TF does."""
    bits = np.iinfo(target.as_numpy_dtype).bits
    signed = np.iinfo(target.as_numpy_dtype).min < 0

    def wrap(v):
        v = int(v) & ((1 << bits) - 1)
        return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v

    arr = np.asarray(value, dtype=object)
    return np.vectorize(wrap, otypes=[object])(arr).astype(target.as_numpy_dtype)


# Exported under TF's name last, so the builtin stays usable above; ``bool_`` is the alias.
bool = bool_  # noqa: A001


_TF_FUNCTIONS = ("as_string", "cast", "complex", "saturate_cast")

# tf.dtypes.experimental: where TF 2.21 lists its narrow types (tf.experimental too).
EXPERIMENTAL_NAMES = (
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
    "int4", "uint4", "int2", "uint2", "float4_e2m1fn",
)  # fmt: skip
experimental = types.ModuleType(
    "asyncflow.dtypes.experimental", "TF's narrow types (tf.dtypes.experimental)."
)
for _name in EXPERIMENTAL_NAMES:
    setattr(experimental, _name, globals()[_name])


def __getattr__(name: str):
    # tf.dtypes also lists these four ops; they live at the top level (and import this
    # module), so they are looked up when first read
    if name in _TF_FUNCTIONS:
        import asyncflow

        return getattr(asyncflow, name)
    raise AttributeError(f"module 'asyncflow.dtypes' has no attribute '{name}'")
