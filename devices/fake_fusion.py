"""`cupy.fuse` for the CuPy stand-in (devices/fake_cupy.py): one launch, CuPy's limits.

CuPy's `fuse` traces a Python function with proxy variables in place of its array and
scalar arguments, records the ufuncs it calls and compiles them into one
ElementwiseKernel, cached per argument dtypes and ranks.  The stand-in runs the same
function with proxies that compute with NumPy's ufuncs, so the numbers are NumPy's,
and counts one kernel launch for the call.  It refuses what CuPy's fusion refuses (or
computes differently), so that code which passes here compiles on a GPU:
- inside the function only ufuncs (of the device module, or through the proxies'
  operators) and `astype`: no other module function, no indexing, no `.shape`, no
  truth value or Python number of a proxy (control flow on values);
- ufunc arguments are proxies, Python scalars or NumPy scalars; `out=` only a proxy;
  a NumPy scalar whose dtype no array operand has is refused (CuPy treats it as weak,
  NumPy promotes with it: the dtypes would differ);
- the arguments of the call: device arrays (at least one, else the function runs as
  plain Python, as CuPy's does), scalars or None; a host array is refused;
- every output has the broadcast shape of all array arguments (an ElementwiseKernel's
  outputs all do), whatever the value it returns;
- reductions are refused (CuPy fuses one, at the end: nothing here uses that).

Invariant: while a fused function is traced on a thread, `tracing()` is True there, and
the stand-in's ufuncs hand their calls to `call_ufunc`.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

__all__ = ["FusionError", "call_ufunc", "make_fuse", "tracing"]

_local = threading.local()
_SCALARS = (bool, int, float, complex, np.generic)


class FusionError(TypeError):
    """Something CuPy's fused kernels cannot express."""


def tracing() -> bool:
    return getattr(_local, "depth", 0) > 0


class _Var:
    """A value inside a fused function: an array argument, a scalar argument, or a
    ufunc's result.  `value` is its NumPy value (computed as the trace goes)."""

    __slots__ = ("value", "is_array", "source", "written")
    __array_ufunc__ = None  # NumPy's functions never see one

    def __init__(self, value, is_array: bool, source=None):
        self.value = value
        self.is_array = is_array
        self.source = source  # the device array an array argument stands for
        self.written = False  # (through `out=`)

    @property
    def dtype(self):
        return np.asarray(self.value).dtype

    @property
    def ndim(self):
        return np.ndim(self.value) if self.is_array else -1

    def astype(self, dtype, copy=True):
        dtype = np.dtype(dtype)
        if not copy and self.dtype == dtype:
            return self
        return _Var(np.asarray(self.value).astype(dtype), self.is_array)

    def copy(self):
        return _Var(np.array(self.value), self.is_array)

    def _refuse(self, *args, **kwargs):
        raise FusionError(
            "cupy.fuse cannot branch on, index or convert a traced value (its shape, "
            "truth value or number is not known while the kernel is built)"
        )

    __bool__ = __float__ = __int__ = __index__ = __iter__ = __len__ = _refuse
    __getitem__ = __setitem__ = __array__ = _refuse

    def __getattr__(self, name):
        raise FusionError(f"a value inside cupy.fuse has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"<fused {'array' if self.is_array else 'scalar'} {self.dtype}>"


def _operator(ufunc, reflected=False):
    def method(self, other):
        return call_ufunc(ufunc, (other, self) if reflected else (self, other), {})

    return method


for _name, _uf in {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "truediv": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.remainder,
    "pow": np.power,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "lshift": np.left_shift,  # CuPy's fusion variables have the shifts too
    "rshift": np.right_shift,
}.items():
    setattr(_Var, f"__{_name}__", _operator(_uf))
    setattr(_Var, f"__r{_name}__", _operator(_uf, True))
for _name, _uf in {
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}.items():
    setattr(_Var, f"__{_name}__", _operator(_uf))
for _name, _uf in {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "truediv": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.remainder,
    "pow": np.power,
}.items():  # in place: into the array (an argument's device memory), as CuPy's

    def _inplace(self, other, _uf=_uf):
        return call_ufunc(_uf, (self, other), {"out": self})

    setattr(_Var, f"__i{_name}__", _inplace)
_Var.__hash__ = None  # type: ignore[assignment]
_Var.__neg__ = lambda self: call_ufunc(np.negative, (self,), {})
_Var.__abs__ = lambda self: call_ufunc(np.absolute, (self,), {})
_Var.__invert__ = lambda self: call_ufunc(np.invert, (self,), {})


def call_ufunc(ufunc: np.ufunc, args: tuple, kwargs: dict):
    """A ufunc called inside a traced function: checked as CuPy's fusion checks it,
    computed with NumPy."""
    if ufunc.signature is not None:  # (np.matmul): not element-wise
        raise FusionError(f"cupy.fuse: {ufunc.__name__} is not an element-wise ufunc")
    out = kwargs.pop("out", None)
    if kwargs:
        raise FusionError(f"cupy.fuse: {ufunc.__name__} takes no {sorted(kwargs)} here")
    if len(args) > ufunc.nin:
        if out is not None or len(args) > ufunc.nin + 1:
            raise FusionError(f"cupy.fuse: invalid number of arguments to {ufunc.__name__}")
        args, out = args[: ufunc.nin], args[ufunc.nin]
    if len(args) != ufunc.nin:
        raise FusionError(f"cupy.fuse: invalid number of arguments to {ufunc.__name__}")
    for a in args:
        if not isinstance(a, (_Var, *_SCALARS)):
            raise FusionError(f"cupy.fuse: unsupported operand type {type(a).__name__}")
    if out is not None and not (isinstance(out, _Var) and out.is_array):
        raise FusionError("cupy.fuse: `out` must be an array inside the fused function")
    array_dtypes = {a.dtype for a in args if isinstance(a, _Var)}
    for a in args:
        if isinstance(a, np.generic) and array_dtypes and a.dtype not in array_dtypes:
            raise FusionError(
                f"cupy.fuse: a {a.dtype} constant with {sorted(map(str, array_dtypes))} "
                "operands (CuPy's fusion takes it as weakly typed, NumPy does not)"
            )
    values = [a.value if isinstance(a, _Var) else a for a in args]
    is_array = any(isinstance(a, _Var) and a.is_array for a in args)
    with np.errstate(all="ignore"):  # a GPU kernel does not warn
        if out is None:
            result = ufunc(*values)
        else:
            target = out.value
            result = ufunc(*values, out=target if type(target) is np.ndarray else None)
            if result is not target:
                out.value = np.asarray(result).astype(out.dtype, casting="same_kind")
            out.written = True
            return out
    if isinstance(result, tuple):
        return tuple(_Var(r, is_array) for r in result)
    return _Var(result, is_array)


def make_fuse(launch, device_array: type, host_error: type, tally):
    """The module's `fuse` decorator.  `launch(args)` checks the device arrays of a call
    and returns the launch (`wrap`, `written`, `dev`); `tally(dev, "kernels")` counts."""

    class Fusion:
        def __init__(self, func, kernel_name=None):
            self.func = func
            self.name = kernel_name or getattr(func, "__name__", "fused")

        def __repr__(self) -> str:
            return f"<Fusion {self.name!r}>"

        def __call__(self, *args):
            if tracing():  # a fused function called inside another one: inlined
                return self.func(*args)
            if not any(type(a) is device_array for a in args):
                return self.func(*args)
            for a in args:
                if isinstance(a, np.ndarray):
                    raise host_error(
                        f"a host numpy array {a.dtype}{list(a.shape)} was passed to fused "
                        f"kernel {self.name}; copy it to the device first"
                    )
                if not (type(a) is device_array or a is None or isinstance(a, _SCALARS)):
                    raise TypeError(f"Invalid argument type for {self.name!r}: {type(a)}")
            run = launch(args)
            arrays = [a for a in args if type(a) is device_array]
            shape = np.broadcast_shapes(*(a.shape for a in arrays))
            proxies = [
                None
                if a is None
                else _Var(a._a, True, a)
                if type(a) is device_array
                else _Var(a, False)
                for a in args
            ]
            _local.depth = getattr(_local, "depth", 0) + 1
            try:
                ret = self.func(*proxies)
            finally:
                _local.depth -= 1
            if ret is None:
                outs = []
            elif isinstance(ret, _Var):
                outs = [ret]
            elif isinstance(ret, tuple) and all(isinstance(r, _Var) for r in ret):
                outs = list(ret)
            else:
                raise FusionError(f"Fusion function can't return {type(ret).__name__}")
            for p in proxies:  # arrays written through `out=`
                if p is not None and p.source is not None and p.written:
                    run.written(p.source)
            tally(run.dev, "kernels")
            results = [
                run.wrap(np.array(np.broadcast_to(np.asarray(r.value), shape))) for r in outs
            ]
            if isinstance(ret, tuple):
                return tuple(results)
            return results[0] if results else None

    def fuse(*args, **kwargs):
        """`cupy.fuse`: as a bare decorator, or `fuse(kernel_name=...)`."""
        if len(args) == 1 and not kwargs and callable(args[0]):
            return functools.update_wrapper(Fusion(args[0]), args[0])
        return lambda f: functools.update_wrapper(Fusion(f, *args, **kwargs), f)

    return fuse
