"""What a `tf.py_function`'s Python function receives: a concrete tensor (`EagerTensor`).

asyncflow has no eager mode, so this is a NumPy value dressed as TF's EagerTensor for
what TF1 code does with one inside a py_function: `.numpy()`, `.shape`, `.dtype`,
`.ndim`, `np.asarray(t)`, arithmetic and comparisons (giving EagerTensors, with the other
operand converted to this tensor's dtype as TF converts it), indexing, `len`, iteration,
`float(t)` / `int(t)` / `bool(t)`, and `tf.convert_to_tensor(t)` (a constant).  Like TF's,
it is unhashable.  TF ops applied to it build graph ops (no eager execution here).

Invariant: an EagerTensor owns its array (the kernel hands it a copy of its input), so
a function that keeps or changes what it is given never touches the step's buffers.
"""

from __future__ import annotations

import operator

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops

__all__ = ["EagerTensor", "convert_eager", "tf_type_name"]

_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"


class EagerTensor:
    """A concrete tensor: a NumPy value with TF's EagerTensor surface."""

    __slots__ = ("_value", "_dtype")
    # NumPy defers binary operators to ours (`np.float32(2) * t` is an EagerTensor).
    __array_priority__ = 100

    def __init__(self, value: np.ndarray, dtype: dtypes.DType):
        self._value = value
        self._dtype = dtype

    # -- what TF code reads ---------------------------------------------------
    def numpy(self):
        """The value as NumPy: an array, or a NumPy scalar (bytes for a string) when 0-d."""
        return self._value[()] if self._value.ndim == 0 else self._value

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    @property
    def shape(self) -> tensor_shape.TensorShape:
        return tensor_shape.TensorShape(self._value.shape)

    def get_shape(self) -> tensor_shape.TensorShape:
        return self.shape

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def device(self) -> str:
        return _DEVICE

    def __array__(self, dtype=None, copy=None):
        return self._value if dtype is None else self._value.astype(dtype)

    def __len__(self) -> int:
        if self._value.ndim == 0:
            raise TypeError("Scalar tensor has no `len()`")
        return len(self._value)

    def __iter__(self):
        if self._value.ndim == 0:
            raise TypeError("Cannot iterate over a scalar tensor.")
        return (EagerTensor(v, self._dtype) for v in self._value)

    def __getitem__(self, key):
        if isinstance(key, EagerTensor):
            key = key._value
        elif isinstance(key, tuple):
            key = tuple(k._value if isinstance(k, EagerTensor) else k for k in key)
        return EagerTensor(np.array(self._value[key]), self._dtype)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __float__(self) -> float:
        return float(self._value)

    def __int__(self) -> int:
        return int(self._value)

    def __index__(self) -> int:
        if not (self._dtype.is_integer and self._value.ndim == 0):
            raise TypeError(f"Only integer scalar tensors can be used as an index: {self!r}")
        return int(self._value)

    def __hash__(self):
        raise TypeError("Tensor is unhashable. Instead, use tensor.ref() as the key.")

    def __repr__(self) -> str:
        shape = tuple(self._value.shape)
        return (
            f"<tf.Tensor: shape={shape}, dtype={self._dtype.name}, "
            f"numpy={np.array_repr(self._value) if self._value.ndim else self.numpy()}>"
        )

    def __str__(self) -> str:
        shape = tuple(self._value.shape)
        return f"tf.Tensor({self._value}, shape={shape}, dtype={self._dtype.name})"

    def __format__(self, spec: str) -> str:
        return format(self.numpy(), spec) if self._value.ndim == 0 else str(self)

    # -- operators --------------------------------------------------------------
    def _binary(self, other, fn, reverse=False):
        if isinstance(other, EagerTensor) and other.dtype != self._dtype:
            op_type = _OP_TYPES.get(fn, getattr(fn, "__name__", "op"))
            a, b = (other, self) if reverse else (self, other)
            raise errors.InvalidArgumentError(
                None, None, f"cannot compute {op_type} as input #1(zero-based) was expected "
                f"to be a {tf_type_name(a.dtype)} tensor but is a {tf_type_name(b.dtype)} tensor "
                f"[Op:{op_type}]"
            )  # fmt: skip
        y = convert_eager(other, self._dtype)
        x, y = (y, self._value) if reverse else (self._value, y)
        out = np.asarray(fn(x, y))
        return EagerTensor(out, _dtype_of(out))

    def __neg__(self):
        return EagerTensor(-self._value, self._dtype)

    def __abs__(self):
        return EagerTensor(np.abs(self._value), self._dtype)

    def __invert__(self):
        return EagerTensor(~self._value, self._dtype)


def tf_type_name(dtype: dtypes.DType) -> str:
    """TF's DataTypeString: float32 is "float", float64 "double"."""
    return {"float32": "float", "float64": "double", "float16": "half"}.get(dtype.name, dtype.name)


def _dtype_of(value: np.ndarray) -> dtypes.DType:
    return dtypes.string if value.dtype == object else dtypes.as_dtype(value.dtype)


def _truediv(x, y):
    # TF: int32 / int32 is float64, int8/int16 / ... is float32; floats divide as they are.
    if x.dtype.kind in "iu":
        wide = np.float64 if x.dtype.itemsize >= 4 else np.float32
        return np.true_divide(x, y, dtype=wide)
    return np.true_divide(x, y)


def _install_operators() -> None:
    table = {
        "add": operator.add,
        "sub": operator.sub,
        "mul": operator.mul,
        "truediv": _truediv,
        "floordiv": np.floor_divide,
        "mod": np.mod,
        "pow": np.power,
        "matmul": np.matmul,
        "and": np.logical_and,
        "or": np.logical_or,
        "xor": np.logical_xor,
    }
    for name, fn in table.items():
        setattr(EagerTensor, f"__{name}__", lambda self, o, fn=fn: self._binary(o, fn))
        setattr(EagerTensor, f"__r{name}__", lambda self, o, fn=fn: self._binary(o, fn, True))
    for name in ("lt", "le", "gt", "ge", "eq", "ne"):
        fn = getattr(operator, name)
        setattr(EagerTensor, f"__{name}__", lambda self, o, fn=fn: self._binary(o, fn))


_install_operators()
# The op types TF's eager operators run, named in their dtype errors.
_OP_TYPES = {
    operator.add: "AddV2", operator.sub: "Sub", operator.mul: "Mul", _truediv: "RealDiv",
    np.floor_divide: "FloorDiv", np.mod: "FloorMod", np.power: "Pow", np.matmul: "MatMul",
    np.logical_and: "LogicalAnd", np.logical_or: "LogicalOr", np.logical_xor: "LogicalXor",
    operator.lt: "Less", operator.le: "LessEqual", operator.gt: "Greater",
    operator.ge: "GreaterEqual", operator.eq: "Equal", operator.ne: "NotEqual",
}  # fmt: skip


def convert_eager(value, dtype: dtypes.DType) -> np.ndarray:
    """`value` as an array of `dtype`, as TF's eager conversion does: an EagerTensor must
    have that dtype; NumPy values are cast; Python values are checked (1.5 is no int32).

    Raises:
      ValueError: an EagerTensor of another dtype.
      TypeError: a Python value `dtype` cannot hold.
    """
    if isinstance(value, EagerTensor):
        if value.dtype != dtype:
            raise ValueError(
                f"Tensor conversion requested dtype {dtype.name} for Tensor with dtype "
                f"{value.dtype.name}: {value!r}"
            )
        return value._value
    if isinstance(value, ops.Tensor):
        raise TypeError(
            f"py_function returned a graph tensor, {value!r}: asyncflow has no eager "
            "execution, so TF ops inside the function build graph ops; compute its results "
            "with NumPy or the arguments' operators"
        )
    try:
        return dtypes.convert_to_numpy(value, dtype)
    except TypeError:
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {dtype.name}") from None


def _to_constant(value: EagerTensor, dtype=None, name=None, as_ref=False):
    return ops.convert_to_tensor(value._value, dtype=dtype or value.dtype, name=name)


ops.register_tensor_conversion_function(EagerTensor, _to_constant)
