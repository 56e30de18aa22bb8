"""What a `tf.py_function`'s Python function receives: a concrete tensor (`EagerTensor`).

asyncflow has no eager mode, so this is a NumPy value dressed as TF's EagerTensor for
what TF1 code does with one inside a py_function: `.numpy()`, `.shape`, `.dtype`,
`.ndim`, `np.asarray(t)`, arithmetic and comparisons (giving EagerTensors, with the other
operand converted to this tensor's dtype as TF converts it), indexing, `len`, iteration,
`float(t)` / `int(t)` / `bool(t)`, and `tf.convert_to_tensor(t)` (a constant).  Like TF's,
it is unhashable.  TF ops applied to it build graph ops (no eager execution here).

The tape: when a py_function's gradient is wanted, its floating inputs are watched and
the operators record what they compute from watched tensors (`_grad_fn`: the operands
and a function from the result's gradient to theirs), as TF's eager tape records its ops
on EagerTensors; what goes through NumPy (`.numpy()`, np.asarray, np.sin(t)) is not
recorded, there as here.  `gradients` walks it back.

Invariant: an EagerTensor owns its array (the kernel hands it a copy of its input), so
a function that keeps or changes what it is given never touches the step's buffers.
"""

from __future__ import annotations

import operator

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops

__all__ = ["EagerTensor", "convert_eager", "gradients", "tf_type_name"]

_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"


class EagerTensor:
    """A concrete tensor: a NumPy value with TF's EagerTensor surface."""

    __slots__ = ("_value", "_dtype", "_watched", "_grad_fn")
    # NumPy defers binary operators to ours (`np.float32(2) * t` is an EagerTensor).
    __array_priority__ = 100

    def __init__(self, value: np.ndarray, dtype: dtypes.DType, watched: bool = False):
        self._value = value
        self._dtype = dtype
        self._watched = watched
        self._grad_fn = None  # (operands, vjp) when computed from a recorded tensor

    def _recorded(self) -> bool:
        return self._watched or self._grad_fn is not None

    def _result(self, out: np.ndarray, operands: tuple, vjp) -> EagerTensor:
        """`out` as an EagerTensor, recorded when an operand is and it is floating."""
        t = EagerTensor(out, _dtype_of(out))
        if t._dtype.is_floating or t._dtype.is_complex:
            live = tuple(o for o in operands if isinstance(o, EagerTensor) and o._recorded())
            if live:
                t._grad_fn = (operands, vjp)
        return t

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
        return (self[i] for i in range(len(self._value)))

    def __getitem__(self, key):
        if isinstance(key, EagerTensor):
            key = key._value
        elif isinstance(key, tuple):
            key = tuple(k._value if isinstance(k, EagerTensor) else k for k in key)
        shape, dtype = self._value.shape, self._value.dtype

        def vjp(g):
            full = np.zeros(shape, dtype)
            np.add.at(full, key, g)
            return (full,)

        return self._result(np.array(self._value[key]), (self,), vjp)

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
        operands = (other, self) if reverse else (self, other)
        rule = _VJPS.get(fn)
        if rule is None:  # (comparisons, logic, floor division: no gradient, as TF)
            return EagerTensor(out, _dtype_of(out))
        return self._result(out, operands, lambda g: rule(g, x, y, out))

    def __neg__(self):
        return self._result(-self._value, (self,), lambda g: (-g,))

    def __abs__(self):
        x = self._value
        return self._result(np.abs(x), (self,), lambda g: (g * np.sign(x),))

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


def _pow_vjp(g, x, y, z):
    # TF's _PowGrad: d/dy uses log(x) where x > 0, else 0
    safe = np.where(x > 0, x, 1)
    return g * y * np.power(x, y - 1), g * z * np.where(x > 0, np.log(safe), 0)


def _matmul_vjp(g, x, y, z):
    return np.matmul(g, np.swapaxes(y, -1, -2)), np.matmul(np.swapaxes(x, -1, -2), g)


_VJPS = {
    operator.add: lambda g, x, y, z: (g, g),
    operator.sub: lambda g, x, y, z: (g, -g),
    operator.mul: lambda g, x, y, z: (g * y, g * x),
    _truediv: lambda g, x, y, z: (g / y, -g * x / (y * y)),
    np.mod: lambda g, x, y, z: (g, -g * np.floor_divide(x, y)),
    np.power: _pow_vjp,
    np.matmul: _matmul_vjp,
}


def _unbroadcast(g: np.ndarray, shape: tuple) -> np.ndarray:
    """The gradient of a broadcast operand: summed over the dimensions it was spread on."""
    g = np.asarray(g)
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for i, n in enumerate(shape):
        if n == 1 and g.shape[i] != 1:
            g = g.sum(axis=i, keepdims=True)
    return g


def gradients(outputs: list, inputs: list, output_grads: list) -> list:
    """d(sum outputs * output_grads)/d(input) for each input along what the operators
    recorded: an array, or None where nothing recorded connects them (TF's tape)."""
    order, seen = [], set()

    def visit(t):
        stack = [(t, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            if node._grad_fn is not None:
                for o in node._grad_fn[0]:
                    if isinstance(o, EagerTensor) and o._recorded() and id(o) not in seen:
                        stack.append((o, False))

    grads: dict[int, np.ndarray] = {}
    for out, g in zip(outputs, output_grads, strict=True):
        if isinstance(out, EagerTensor) and out._recorded() and g is not None:
            visit(out)
            prev = grads.get(id(out))
            g = np.asarray(g, out._value.dtype)
            grads[id(out)] = g if prev is None else prev + g
    for node in reversed(order):  # results before the tensors they are computed from
        g = grads.get(id(node))
        if g is None or node._grad_fn is None:
            continue
        operands, vjp = node._grad_fn
        for o, og in zip(operands, vjp(g), strict=True):
            if isinstance(o, EagerTensor) and o._recorded():
                og = _unbroadcast(og, o._value.shape).astype(o._value.dtype, copy=False)
                prev = grads.get(id(o))
                grads[id(o)] = og if prev is None else prev + og
    return [grads.get(id(t)) if isinstance(t, EagerTensor) and t._watched else None
            for t in inputs]  # fmt: skip


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
