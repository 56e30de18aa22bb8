"""Element-wise numerics in few passes over memory, in place when the caller owns a buffer.

The activation kernels (Sigmoid, SigmoidGrad, TanhGrad, Softplus, SoftplusGrad) and the
optimizers' update formulas (training_ops) call these.  Each is a short sequence of
ufunc calls that write into one buffer: `out` when the caller has one it may overwrite
(a donated input, `ctx.may_forward`), else one new array, so a 200k-element sigmoid
makes one array and reads memory four times instead of making four temporaries.

Why NumPy ufuncs and not numexpr: NumPy (>= 2.0) ships SIMD exp/tanh/log for float32
and float64; measured on this project's 2-core machine, a [256,784] float32 sigmoid
takes ~120 us as four in-place ufuncs against ~370 us with numexpr 2.14 on two
threads (its exp and tanh are scalar loops without Intel's VML), and tanh ~33 us
against ~1.5 ms.  The old `exp(-logaddexp(0, -x))` took ~3.5 ms.

Numerics: float32 tanh, sigmoid and exp are TF's own (Eigen's functions, `tanh`,
`_sigmoid32`, `_exp32`; exp only where numba runs, `tf_exp`), and so is float16
sigmoid (`_sigmoid16`, rounded after each operation): their bits, where NumPy's tanh
differs from TF's in ~60% of inputs by up to 6 ulps, 1 / (1 + exp(-x)) from TF's
sigmoid in ~60% (TF's costs ~25 passes here where that formula costs four: inside the
compiled loops of fused programs it is the cheaper one, one division), and NumPy's exp
from TF's in ~11%.  The others equal NumPy's reference formulas to rounding: float64
sigmoid is 1 / (1 + exp(-x)) (exp overflowing to inf gives exactly 0, never nan),
softplus is max(x, 0) + log1p(exp(-|x|)) (no overflow, exact for large |x|).  Other
float16 functions compute in float32 and round once, as Eigen does for half; complex
inputs use the plain formulas.
Callers silence floating-point warnings (`_quiet`): TF yields inf and 0 silently.

Large tensors (`parallel`): the same function over blocks of the flattened arrays, the
blocks shared by the threads the process's CPU budget allows (devices/cpu_budget.py).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import os

import numpy as np

from asyncflow.devices import cpu_budget

__all__ = [
    "exp",
    "log",
    "log1p",
    "parallel",
    "tf_exp",
    "sigmoid",
    "sigmoid_grad",
    "softplus",
    "softplus_grad",
    "tanh",
    "tanh_grad",
]


_F32 = np.float32
_ONE32 = _F32(1.0)


def _one(x):
    return x.dtype.type(1)


def _one_element(xp, fn, args, out):
    """fn over 0-d `args` as arrays of one element: NumPy's ufuncs return a scalar, not
    an array, for 0-d operands, and the functions' later passes write into their first
    result.  The result 0-d (written into `out` when given)."""
    r = fn(xp, *(a.reshape(1) for a in args), None).reshape(())
    if out is None:
        return r
    out[...] = r
    return out


def _widened(xp, fn, args, out):
    """fn over float32 copies of float16 `args`; the result rounded into `out` (or new)."""
    wide = fn(xp, *(a.astype(xp.float32) for a in args), None)
    if out is None:
        return wide.astype(xp.float16)
    out[...] = wide
    return out


def sigmoid(xp, x, out=None):
    """1 / (1 + exp(-x)), written into `out` when given (which may be `x` itself)."""
    if x.ndim == 0:
        return _one_element(xp, sigmoid, (x,), out)
    if xp is np and x.dtype == np.float16:
        return _sigmoid16(x, out)
    if x.dtype == xp.float16:
        return _widened(xp, sigmoid, (x,), out)
    if x.dtype.kind == "c":
        return xp.divide(_one(x), _one(x) + xp.exp(-x), out=out)
    if xp is np and x.dtype == _F32:
        return _sigmoid32(x, out)
    o = xp.negative(x, out=out)
    xp.exp(o, out=o)
    xp.add(o, _one(o), out=o)
    return xp.reciprocal(o, out=o)


# TF 2.21's float32 sigmoid on the CPU: Eigen's logistic function for float as TF's x86
# build runs it (packets of 8, AVX; no FMA instructions: each multiply-add is a rounded
# multiply and a rounded add).  A packet: x clamped above at _SIG_HI (where the result
# rounds to 1) and halved; exp(x/2) = 2^m p(r), m = floor(x/2 * log2(e) + 1/2), r =
# x/2 - m ln 2 in two parts (Cephes' C1, C2), p(r) = r^2 (r (r^2 P5 + P3) + (r^2 P4 +
# P2)) + (r + 1); squared, that is exp(x) (never subnormal on the way); then e / (1 + e),
# and 0 below -104.  The elements past the last whole packet (size % 8 of them) take
# Eigen's scalar path instead: e = expf(min(x, _SIG_HI)), e / (1 + e) (expf here: the
# float64 exp rounded once).  TF's threads flush subnormal results to zero, as the
# kernels here do (devices/denormal.py).  Its bits equal TF's on 2.1 million inputs
# spread over the bit patterns, 1.1 million normal ones and arrays of every length 1-40
# (tests/ops/test_sigmoid_tf.py holds TF's outputs).
_SIG_HI = _F32(16.6355324)
_SIG_LO = _F32(-104.0)
_SIG_HALF = _F32(0.5)
_SIG_LOG2E = _F32(1.44269504088896341)
_SIG_C1, _SIG_C2 = _F32(-0.693359375), _F32(2.12194440e-4)
_SIG_P2, _SIG_P3 = _F32(0.49999141693115234375), _F32(0.16666877269744873046875)
_SIG_P4, _SIG_P5 = _F32(4.1898667812347412109375e-2), _F32(8.33471305668354034423828125e-3)
SIGMOID_PACKET = 8  # (elements from the last multiple of this on take the scalar path)


def _in_packets(x, out, packets, tail):
    """A float32 function as TF's CPU kernel splits it: `packets(xs, ys)` writes the
    elements of whole packets of SIGMOID_PACKET (ys may be xs), `tail(xs)` returns the
    last size % SIGMOID_PACKET (Eigen's scalar path); into `out` (which may be x) when
    given."""
    res = np.empty(x.shape, _F32) if out is None or not out.flags.c_contiguous else out
    flat, dst = np.ascontiguousarray(x).reshape(-1), res.reshape(-1)
    n = flat.size
    k = n - n % SIGMOID_PACKET
    if k:
        packets(flat[:k], dst[:k])
    if k < n:
        dst[k:] = tail(flat[k:])
    if res is not out and out is not None:
        np.copyto(out, res)
        return out
    return res


def _sigmoid32(x, out=None):
    """TF's float32 sigmoid (above), into `out` (which may be x) when given."""
    return _in_packets(x, out, _sigmoid_packets, _sigmoid_tail)


def _cody_waite(t):
    """Eigen's exp reduction of float32 `t` (its buffer reused for r^2): m = floor(t
    log2(e) + 1/2), r = t - m ln 2 in two parts, r^2; each a rounded float32 step."""
    m = np.multiply(t, _SIG_LOG2E)
    np.add(m, _SIG_HALF, out=m)
    np.floor(m, out=m)
    r = np.multiply(m, _SIG_C1)
    np.add(r, t, out=r)
    np.multiply(m, _SIG_C2, out=t)
    np.add(t, r, out=r)
    return m, r, np.multiply(r, r, out=t)


def _sigmoid_packets(xs, ys):
    """_sigmoid32's whole packets: xs into ys (which may be xs)."""
    below = np.less(xs, _SIG_LO)  # (read before ys, which may be xs, is written)
    t = np.minimum(xs, _SIG_HI)
    np.multiply(t, _SIG_HALF, out=t)
    m, r, r2 = _cody_waite(t)
    even = np.multiply(r2, _SIG_P4)
    np.add(even, _SIG_P2, out=even)
    p = np.multiply(r2, _SIG_P5)
    np.add(p, _SIG_P3, out=p)
    np.multiply(r, p, out=p)
    np.add(p, even, out=p)
    np.multiply(r2, p, out=p)
    np.add(r, _ONE32, out=r)
    np.add(p, r, out=p)
    np.add(m, _F32(127), out=m)  # 2^m from its bits (m in [-75, 12]: normal)
    bits = m.astype(np.int32)
    np.left_shift(bits, 23, out=bits)
    np.multiply(p, bits.view(_F32), out=p)
    np.multiply(p, p, out=p)
    np.add(p, _ONE32, out=even)
    np.divide(p, even, out=ys)
    ys[below] = 0


def _sigmoid_tail(xs):
    """_sigmoid32's last elements, Eigen's scalar path."""
    e = np.exp(np.minimum(xs, _SIG_HI).astype(np.float64)).astype(_F32)
    return np.divide(e, _ONE32 + e)


def _sigmoid16(x, out=None):
    """TF's float16 sigmoid: Eigen's generic logistic function on half values, each
    operation computed in float32 and rounded to half: e = exp(x) (TF's float32 exp,
    `exp`, rounded), then e / (1 + e) with the sum rounded before the division (as
    NumPy's float16 arithmetic rounds), and 1 where e is infinite.  All 65,536 half
    inputs give TF's bits (tests/ops/test_unary_tf.py)."""
    e = _exp32(x.astype(_F32)).astype(np.float16)
    den = np.add(e, np.float16(1))
    y = np.divide(e, den, out=den)
    y[np.isinf(e)] = 1
    if out is None:
        return y
    out[...] = y
    return out


def sigmoid_grad(xp, y, dy, out=None):
    """dy * y * (1 - y): TF's SigmoidGrad (y the Sigmoid's output); `out` may be y or dy."""
    if y.ndim == 0:
        return _one_element(xp, sigmoid_grad, (y, dy), out)
    if y.dtype == xp.float16:
        return _widened(xp, sigmoid_grad, (y, dy), out)
    if out is y:  # y is read twice: 1 - y first, then times y would read the result
        t = xp.subtract(_one(y), y)
        xp.multiply(t, y, out=t)
        return xp.multiply(t, dy, out=out)
    o = xp.subtract(_one(y), y, out=out if out is not dy else None)
    xp.multiply(o, y, out=o)
    return xp.multiply(o, dy, out=out if out is dy else o)


# TF 2.21's float32 tanh on the CPU: Eigen's `ptanh_float` as TF's x86 build runs it
# (no FMA instructions): x clamped to [-c, c], then x * (x^2 p(x^2) + 1) / q(x^2) with
# p of degree 3 and q of degree 4 in x^2, each Horner step a rounded multiply and a
# rounded add.  c is the smallest input whose quotient rounds to exactly 1.  Its bits
# equal TF's on every input tried (2.4 million spread over [-10, 10] and near zero, and
# arrays of every length 1-39: Eigen's scalar tail computes the same function), except
# subnormal inputs, which TF's threads flush to zero (here tanh(x) = x there, as
# NumPy's).  tests/ops/test_tanh_tf.py holds TF's outputs.
_TANH_CLAMP = _F32(7.90738964080810547)
_TANH_P = tuple(_F32(v) for v in (1.394553628e-8, 2.102733560e-5, 3.520756727e-3, 1.340216100e-1))
_TANH_Q = tuple(
    _F32(v) for v in (8.015776984e-7, 3.326951409e-4, 2.597254514e-2, 4.673548340e-1, 1.0)
)


def exp(xp, x, out=None):
    """The Exp kernel's function: float32 (and float16 through float32) TF's as its CPU
    kernel computes it (`_exp32`, below) where `tf_exp()`, else NumPy's; other dtypes
    and other array modules their module's exp.  `out` may be x itself."""
    if x.ndim == 0:
        return _one_element(xp, exp, (x,), out)
    if xp is not np or x.dtype.kind != "f" or x.dtype.itemsize > 4 or not tf_exp():
        return xp.exp(x, out=out)
    if x.dtype != _F32:  # float16: float32's result rounded once, as Eigen's
        return _widened(xp, exp, (x,), out)
    return _exp32(x, out)


_tf_exp: list = []
_libm: dict = {}  # name -> the C library's float function, or None


def _c_float_function(name: str, xs, wide):
    """The C library's float32 function `name` (expf, logf, log1pf: Eigen's scalar path
    calls them) over the few elements `xs` of a packet's tail; where it cannot be
    loaded, `wide` (NumPy's float64 function) rounded once."""
    if name not in _libm:
        try:
            fn = getattr(ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6"), name)
            fn.argtypes, fn.restype = [ctypes.c_float], ctypes.c_float
        except (OSError, AttributeError):
            fn = None
        _libm[name] = fn
    fn = _libm[name]
    if fn is None:
        return wide(xs.astype(np.float64)).astype(_F32)
    return np.array([fn(v) for v in xs.tolist()], _F32)


def tf_exp() -> bool:
    """Whether float32 Exp computes TF's function in this process: where numba can run
    (not ASYNCFLOW_NO_NUMBA=1; decided once, without importing numba).  There a float32
    Exp runs inside compiled loops (a lone one fused alone, ops/fused_elementwise.py) at
    about NumPy's exp's cost; as the NumPy passes below it costs ~10x NumPy's exp, so
    without numba Exp keeps NumPy's function (its bits differ from TF's in ~11% of
    inputs, by up to 3 ulps: docs/tf_numerics.md)."""
    if not _tf_exp:
        off = os.environ.get("ASYNCFLOW_NO_NUMBA", "") not in ("", "0")
        _tf_exp.append(not off and importlib.util.find_spec("numba") is not None)
    return _tf_exp[0]


# TF 2.21's float32 exp on the CPU: Eigen's exp for float as TF's x86 build runs it
# (packets of 8, AVX, no FMA instructions), the steps of the sigmoid's exp above on x
# itself: x clamped above at _EXP_HI, m = floor(x log2(e) + 1/2), r = x - m ln 2 in two
# parts, p(r) = r^2 (r (r^2 P5 + P3) + (r^2 (r^2 P6 + P4) + P2)) + (r + 1), times 2^m
# (results below 2^-126 flushed to zero, as TF's threads do), and 0 below -104.  The
# last size % 8 elements take Eigen's scalar path, the C library's expf (here the
# float64 exp rounded once).  Its bits equal TF's on 1.25 million inputs spread over
# the bit patterns and normal ones, and on arrays of every length 1-40
# (tests/ops/test_unary_tf.py holds TF's outputs for some of them).
_EXP_HI = _F32(88.723)
_EXP_P6 = _F32(1.37449637986719608306884765625e-3)
_EXP_P5 = _F32(8.36894474923610687255859375e-3)
_EXP_P4 = _F32(4.166965186595916748046875e-2)
_EXP_P3 = _F32(0.16666518151760101318359375)
_EXP_P2 = _F32(0.49999988079071044921875)


def _exp32(x, out=None):
    """TF's float32 exp (above), into `out` (which may be x) when given."""
    return _in_packets(x, out, _exp_packets, _exp_tail)


def _exp_packets(xs, ys):
    """_exp32's whole packets: xs into ys (which may be xs)."""
    t = np.clip(xs, _SIG_LO, _EXP_HI)  # (NaN stays NaN; below -104: 2^m is 0)
    m, r, r2 = _cody_waite(t)
    even = np.multiply(r2, _EXP_P6, out=ys)  # (xs, which ys may be, is read: t)
    np.add(even, _EXP_P4, out=even)
    np.multiply(even, r2, out=even)
    np.add(even, _EXP_P2, out=even)
    p = np.multiply(r2, _EXP_P5)
    np.add(p, _EXP_P3, out=p)
    np.multiply(p, r, out=p)
    np.add(p, even, out=p)
    np.multiply(p, r2, out=p)
    np.add(r, _ONE32, out=r)
    np.add(p, r, out=p)
    # times 2^m exactly (np.ldexp: m in [-150, 128], a result below 2^-126 is
    # flushed to zero as the kernels run, as TF's threads flush it)
    np.ldexp(p, m.astype(np.int32), out=ys)


def _exp_tail(xs):
    """_exp32's last elements, Eigen's scalar path."""
    return np.exp(xs.astype(np.float64)).astype(_F32)


def log(xp, x, out=None):
    """The Log kernel's function: float32 (and float16 through float32) TF's as its CPU
    kernel computes it (`_log32`, below) where `tf_exp()` (numba runs: the loops inline
    it), else NumPy's; other dtypes and other array modules their module's log.  `out`
    may be x itself."""
    if x.ndim == 0:
        return _one_element(xp, log, (x,), out)
    if xp is not np or x.dtype.kind != "f" or x.dtype.itemsize > 4 or not tf_exp():
        return xp.log(x, out=out)
    if x.dtype != _F32:  # float16: float32's result rounded once, as Eigen's
        return _widened(xp, log, (x,), out)
    return _log32(x, out)


# TF 2.21's float32 log on the CPU: Eigen's log for float as TF's x86 build runs it
# (packets of 8, no FMA instructions): x = m 2^e with m in [1/2, 1) (frexp); where m <
# sqrt(1/2), e - 1 and f = (m - 1) + m, else f = m - 1; then f p(f) / q(f) with p of
# degree 2 and q of degree 3 (Horner steps of a rounded multiply and a rounded add),
# plus e ln 2 (rounded, then added).  Negative inputs and NaN give NaN, 0 (and, as TF's
# threads treat them, subnormal inputs) -inf, +inf +inf.  The last size % 8 elements
# take Eigen's scalar path, the C library's logf (here the float64 log rounded once).
# Its bits equal TF's on 1.25 million inputs spread over the bit patterns and normal
# ones, and on arrays of every length 1-40 (tests/ops/test_unary_tf.py).
_LOG_SQRTHF = _F32(0.707106781186547524)
_LOG_P = (_F32(0.18256296349849254), _F32(1.0000000190281063), _F32(1.0000000190281136))
_LOG_Q = tuple(
    _F32(v) for v in (0.049616247954120038, 0.59923249590823520, 1.4999999999999927, 1.0)
)
_LOG_LN2 = _F32(0.693147180559945309417232121458)


def _log32(x, out=None):
    """TF's float32 log (above), into `out` (which may be x) when given."""
    return _in_packets(x, out, _log_packets, _log_tail)


def _log_packets(xs, ys):
    """_log32's whole packets: xs into ys (which may be xs)."""
    special = np.greater(xs, 0)  # (read before ys, which may be xs, is written)
    np.logical_and(special, np.less(xs, np.inf), out=special)
    np.logical_not(special, out=special)
    if special.any():
        s = xs[special]
        s = np.where(s == 0, -np.inf, np.where(s == np.inf, np.inf, np.nan)).astype(_F32)
    m, e = np.frexp(xs)
    low = np.less(m, _LOG_SQRTHF).astype(_F32)  # (1 or 0: NumPy's where= is slow)
    f = np.subtract(m, _ONE32, out=ys)
    np.multiply(low, m, out=m)
    np.add(f, m, out=f)
    e = e.astype(_F32)
    np.subtract(e, low, out=e)
    p = np.multiply(f, _LOG_P[0], out=m)
    for c in _LOG_P[1:]:
        np.add(p, c, out=p)
        np.multiply(p, f, out=p)  # (the last: f p(f))
    q = np.multiply(f, _LOG_Q[0])
    for c in _LOG_Q[1:]:
        np.add(q, c, out=q)
        if c is not _LOG_Q[-1]:
            np.multiply(q, f, out=q)
    np.divide(p, q, out=p)
    np.multiply(e, _LOG_LN2, out=e)
    np.add(e, p, out=ys)
    if special.any():
        ys[special] = s


def _log_tail(xs):
    """_log32's last elements, Eigen's scalar path."""
    return np.log(xs.astype(np.float64)).astype(_F32)


def log1p(xp, x, out=None):
    """The Log1p kernel's function: float32 (and float16 through float32) TF's as its
    CPU kernel computes it (`_log1p32`, below) where `tf_exp()`, else NumPy's; other
    dtypes and array modules their module's log1p.  `out` may be x itself."""
    if x.ndim == 0:
        return _one_element(xp, log1p, (x,), out)
    if xp is not np or x.dtype.kind != "f" or x.dtype.itemsize > 4 or not tf_exp():
        return xp.log1p(x, out=out)
    if x.dtype != _F32:  # float16: float32's result rounded once, as Eigen's
        return _widened(xp, log1p, (x,), out)
    return _log1p32(x, out)


# TF 2.21's float32 log1p on the CPU: Eigen's generic log1p (Kahan's) on its log
# (`_log32`): y = x + 1; x where y is 1 or log(y) is y (infinite; a subnormal x flushed
# to a signed 0 there, as TF gives it), else x (log(y) / (y - 1)).  The last size % 8
# elements take Eigen's scalar path, the C library's log1pf (called: glibc's is not
# correctly rounded).  Its bits equal TF's on 1.25 million inputs spread over the bit
# patterns and normal ones, and on arrays of every length 1-40
# (tests/ops/test_unary_tf.py).
def _log1p32(x, out=None):
    """TF's float32 log1p (above), into `out` (which may be x) when given."""
    return _in_packets(x, out, _log1p_packets, _log1p_tail)


def _log1p_packets(xs, ys):
    """_log1p32's whole packets: xs into ys (which may be xs)."""
    y = np.add(xs, _ONE32)
    log = _log32(y)
    keep = np.equal(y, log)
    np.logical_or(keep, np.equal(y, _ONE32), out=keep)
    np.subtract(y, _ONE32, out=y)
    np.divide(log, y, out=log)
    log[keep] = 1  # (x times 1 there: a subnormal x is 0 as TF's threads read it)
    np.multiply(xs, log, out=ys)


def _log1p_tail(xs):
    """_log1p32's last elements, Eigen's scalar path."""
    return _c_float_function("log1pf", xs, np.log1p)


def tanh(xp, x, out=None):
    """TF's tanh: float32 (and float16 through float32) as TF's CPU kernel computes it
    (above), in 20 passes of float32 arithmetic (NumPy's own float32 tanh costs about as
    much on an AVX2 CPU: 3-4 ns an element); other dtypes (float64, complex, bfloat16)
    and other array modules (a GPU's: TF's GPU kernel is CUDA's tanhf) their module's
    tanh.  `out` may be x itself."""
    if x.ndim == 0:
        return _one_element(xp, tanh, (x,), out)
    if xp is not np or x.dtype.kind != "f" or x.dtype.itemsize > 4:
        return xp.tanh(x, out=out)
    if x.dtype != _F32:  # float16: float32's result rounded once, as Eigen's
        return _widened(xp, tanh, (x,), out)
    t = np.minimum(x, _TANH_CLAMP, out=out)  # (NaN stays NaN)
    np.maximum(t, -_TANH_CLAMP, out=t)
    x2 = np.multiply(t, t)
    p = np.multiply(x2, _TANH_P[0])
    for c in _TANH_P[1:]:
        np.add(p, c, out=p)
        if c is not _TANH_P[-1]:
            np.multiply(p, x2, out=p)
    q = np.multiply(x2, _TANH_Q[0])
    for c in _TANH_Q[1:]:
        np.add(q, c, out=q)
        if c is not _TANH_Q[-1]:
            np.multiply(q, x2, out=q)
    np.multiply(x2, t, out=x2)  # x^3
    np.multiply(x2, p, out=p)
    np.add(p, t, out=p)
    return np.divide(p, q, out=t)


def tanh_grad(xp, y, dy, out=None):
    """dy * (1 - y * y): TF's TanhGrad (y the Tanh's output); `out` may be y or dy."""
    if y.ndim == 0:
        return _one_element(xp, tanh_grad, (y, dy), out)
    if y.dtype == xp.float16:
        return _widened(xp, tanh_grad, (y, dy), out)
    if out is dy:
        t = xp.multiply(y, y)
        xp.subtract(_one(t), t, out=t)
        return xp.multiply(t, dy, out=out)
    o = xp.multiply(y, y, out=out)
    xp.subtract(_one(o), o, out=o)
    return xp.multiply(o, dy, out=o)


def softplus(xp, x, out=None):
    """The Softplus kernel's function: float32 and float16 TF's as its CPU kernel
    computes them (`_softplus_tf`, below) where `tf_exp()`, else (and for other dtypes
    and array modules) log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)).  `out` may be
    x itself."""
    if x.ndim == 0:
        return _one_element(xp, softplus, (x,), out)
    if xp is np and x.dtype in (_F32, np.float16) and tf_exp():
        return _softplus_tf(x, out)
    if x.dtype == xp.float16:
        return _widened(xp, softplus, (x,), out)
    t = xp.absolute(x)
    xp.negative(t, out=t)
    xp.exp(t, out=t)
    xp.log1p(t, out=t)
    o = xp.maximum(x, x.dtype.type(0), out=out)
    return xp.add(o, t, out=o)


# TF 2.21's Softplus (its functor on Eigen's functions): x where x > -t, exp(x) where x <
# t, else log1p(exp(x)) (Eigen's log1p: y = 1 + e, e * (log(y) / (y - 1)); y is never 1
# nor infinite there), with t = log(epsilon) + 2 in the dtype (float32: -13.942385;
# float16, Eigen's half epsilon 2^-13: -7.008).  float32 packets use TF's exp and log
# (`_exp32`, `_log32`); float16 computes each function in float32 and rounds to half.
# The last size % 8 elements take Eigen's scalar path: the C library's expf and log1pf
# (called: glibc's log1pf is not correctly rounded).  Its bits equal TF's on 1.25 million float32
# inputs and all 65,536 half ones (tests/ops/test_unary_tf.py).
_SP_T32 = _F32(np.log(np.finfo(_F32).eps)) + _F32(2)
_SP_T16 = np.float16(np.log(_F32(2.0**-13))) + np.float16(2)


def _softplus_tf(x, out=None):
    """TF's float32 or float16 softplus (above), into `out` (which may be x)."""
    half = x.dtype == np.float16
    t = _F32(_SP_T16 if half else _SP_T32)
    flat = np.ascontiguousarray(x).reshape(-1).astype(_F32, copy=half)
    res = np.empty(flat.shape, _F32)
    n = flat.size
    k = n - n % SIGMOID_PACKET
    if k:
        xs, ys = flat[:k], res[:k]
        e = _exp32(xs)
        if half:
            e = e.astype(np.float16).astype(_F32)
        y = np.add(e, _ONE32)
        log = _log32(y)
        np.subtract(y, _ONE32, out=y)
        np.divide(log, y, out=log)
        np.multiply(e, log, out=ys)
        small = np.less(xs, t)
        ys[small] = e[small]
        big = np.greater(xs, -t, out=small)
        ys[big] = xs[big]
    if k < n:
        xt = flat[k:]
        e = _c_float_function("expf", xt, np.exp)
        if half:
            e = e.astype(np.float16).astype(_F32)
        y = _c_float_function("log1pf", e, np.log1p)
        y[xt < t] = e[xt < t]
        y[xt > -t] = xt[xt > -t]
        res[k:] = y
    res = res.reshape(x.shape)
    if out is None:
        return res.astype(x.dtype, copy=False)
    out[...] = res
    return out


def softplus_grad(xp, g, x, out=None):
    """g / (1 + exp(-x)) (g times sigmoid(x)): TF's SoftplusGrad; `out` may be g or x."""
    if x.ndim == 0:
        return _one_element(xp, softplus_grad, (g, x), out)
    if x.dtype == xp.float16:
        return _widened(xp, softplus_grad, (g, x), out)
    t = xp.negative(x, out=out if out is not g else None)
    xp.exp(t, out=t)
    xp.add(t, _one(t), out=t)
    return xp.divide(g, t, out=out if out is not None else t)


_BLOCK = 1 << 16  # elements per block (256 KiB of float32)


def parallel(xp, fn, inputs: tuple, out=None):
    """`fn(xp, *inputs, out)` (a function of this module, or `ufunc`'s) over blocks of
    the flattened arrays on as many threads as the CPU budget allows now; `out` may be
    one of `inputs` (a donated buffer) or None (a new array like inputs[0]).  Small,
    non-NumPy, strided or broadcasting arguments run as one call."""
    x0 = inputs[0]
    if (
        xp is not np
        or x0.size < 2 * _BLOCK
        or any(type(a) is not np.ndarray or a.shape != x0.shape for a in inputs)
        or not all(a.flags.c_contiguous for a in inputs)
        or (out is not None and not out.flags.c_contiguous)
        or cpu_budget.threads_now() < 2
    ):
        return fn(xp, *inputs, out)
    result = np.empty_like(x0) if out is None else out
    flat = [a.reshape(-1) for a in inputs]
    flat_out = result.reshape(-1)
    alias = next((i for i, a in enumerate(inputs) if a is out), None)

    n = x0.size

    def run(start: int, stop: int) -> None:
        # (blocks of whole packets: a sigmoid's scalar tail is the array's own last one)
        start, stop = start * SIGMOID_PACKET, min(stop * SIGMOID_PACKET, n)
        args = [a[start:stop] for a in flat]
        # the output block is the very input block it aliases: the functions test `is`
        block_out = args[alias] if alias is not None else flat_out[start:stop]
        with np.errstate(all="ignore"):  # per thread: helpers do not inherit the caller's
            fn(xp, *args, block_out)

    packets = -(-n // SIGMOID_PACKET)
    cpu_budget.parallel_for(packets, run, min_block=_BLOCK // SIGMOID_PACKET)
    return result


def ufunc(name: str):
    """`fn(xp, x, out=None)` for the unary ufunc `name` (for `parallel`)."""

    def fn(xp, x, out=None):
        return getattr(xp, name)(x, out=out)

    fn.__name__ = fn.__qualname__ = f"_{name}"
    return fn
