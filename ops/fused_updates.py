"""Compiled dense optimizer updates: TF's formulas in one pass, bit for bit NumPy's.

training_ops' update functions make one NumPy ufunc pass per operation (Adam: twelve,
RMSProp: eleven), where TF's Eigen kernel makes one pass over the elements; measured on
the 2-core project machine, Adam on 1M float32 parameters took 2.2-2.7 ms on one core
in L2-sized blocks, TF ~1.1-1.8 ms.  numba (LLVM) compiles each formula into one loop
that does the same IEEE operations in the same order on each element: no fast-math,
so no reassociation, no fused multiply-add, correctly rounded division and square root;
the results are bitwise those of the NumPy functions (tests/ops/test_fused_updates.py),
in one pass: Adam on 1M float32 ~0.6 ms on one core.  numexpr, tried before, was slower
than the NumPy blocks (its virtual machine evaluates one operation at a time too).

Optional: without numba, or with ASYNCFLOW_NO_NUMBA=1, `apply` returns False and the
NumPy functions run.  numba is imported, and each loop compiled, on a background thread
started by the first update that wants it (not at `import asyncflow`: numba's import
costs ~0.3 s, a compile ~1.5 s, loading numba's on-disk cache (`cache=True`) ~0.2 s);
until it is ready the NumPy update runs, with the same bits, so no kernel (which may run
on the event loop) waits for a compile.  `warm()` compiles them all and waits.

Scope: the dense GradientDescent, Momentum (not Nesterov), RMSProp and Adam (not
Nesterov) updates on float32 and float64 arrays that do not overlap (var and its slots
are writable targets the copy-on-write protocol made, the gradient a value: they never
share memory, which is checked); float16 keeps NumPy's path, which rounds to half after
every operation.  A float32 update of _POOL_MIN elements or more runs on numba's pool
(ops/jit_threads.py) while two cores are free, one slice per thread; else updates from
_SPLIT_MIN elements share blocks among the CPU budget's threads as before: the loops
release the GIL (`nogil`).
"""

from __future__ import annotations

import os
import threading

import numpy as np

from asyncflow import tf_logging
from asyncflow.devices import cpu_budget
from asyncflow.ops import jit_flush, jit_fork

__all__ = ["apply", "available", "numba_module", "warm"]

_DISABLED = os.environ.get("ASYNCFLOW_NO_NUMBA", "") not in ("", "0")
_BLOCK = 1 << 16  # elements per block shared among threads
# Updates of fewer elements run on the calling thread alone.  A compiled update is one
# pass over memory (var, slots and gradient: 5-7 arrays), which a second thread barely
# speeds up in a training step: the helper's wake-up and the other core's cold caches
# (the gradient was just written on this one) cost what its half saves.  Measured in one
# process, settings alternating (benchmarks/models/ab_inproc.py; 2 cores, load 1.1-1.5,
# 40-60 rounds of 10 steps), one thread against the split from 2 * _BLOCK, wall / CPU:
# VAE (RMSProp, 401K-element weights) 0.91-0.93x / 0.90-0.92x in three runs (one at a
# higher load 1.03x / 0.99x), autoencoder 0.97x / 0.96-0.97x, GAN (Adam, 200K) 0.99-1.00x
# / 0.97-0.98x.  A step that is nothing but a 1M-element update (benchmarks/models'
# rmsprop_1m, adam_1m) took 1.18-1.21x the wall on one thread (0.77-0.82x the CPU), so
# updates from _SPLIT_MIN elements split as before.
_SPLIT_MIN = 1 << 19
_numba = None  # the module once imported; False when it cannot be
_compiled: dict[str, object] = {}


# -- the loops: one element at a time, each operation as the NumPy function does it -------


def _gradient_descent_loop(var, delta, alpha):  # var -= delta * alpha
    for i in range(var.size):
        var[i] = var[i] - delta[i] * alpha


def _momentum_loop(var, accum, grad, lr, momentum):
    # accum *= momentum; accum += grad; var -= accum * lr
    for i in range(var.size):
        a = accum[i] * momentum
        a = a + grad[i]
        accum[i] = a
        var[i] = var[i] - a * lr


def _rms_prop_loop(var, ms, mom, grad, lr, one_minus_rho, momentum, epsilon):
    # ms += (grad * grad - ms) * (1 - rho); mom = mom * momentum + grad * lr / sqrt(ms + eps)
    for i in range(var.size):
        g = grad[i]
        t = g * g
        t = t - ms[i]
        t = t * one_minus_rho
        s = ms[i] + t
        ms[i] = s
        d = np.sqrt(s + epsilon)
        u = g * lr
        u = u / d
        m = mom[i] * momentum
        m = m + u
        mom[i] = m
        var[i] = var[i] - m


def _adam_loop(var, m, v, grad, alpha, one_minus_beta1, one_minus_beta2, epsilon):
    # m += (g - m) * (1 - beta1); v += (g * g - v) * (1 - beta2);
    # var -= m * alpha / (sqrt(v) + epsilon)
    for i in range(var.size):
        g = grad[i]
        t = g - m[i]
        t = t * one_minus_beta1
        a = m[i] + t
        m[i] = a
        t = g * g
        t = t - v[i]
        t = t * one_minus_beta2
        b = v[i] + t
        v[i] = b
        d = np.sqrt(b) + epsilon
        u = a * alpha
        u = u / d
        var[i] = var[i] - u


# -- the same loops on numba's pool (ops/jit_threads.py) ---------------------------------
#
# A float32 update of _POOL_MIN elements or more, while the CPU budget has two cores
# free, runs as one part per thread in a `prange`, each part the loop above on its
# slice: each element's operations are the loop's, so the bits are the same on any
# count of parts.  The pool's threads spin between regions (the products' pool), so a
# part costs no wake-up, where the budget's helper threads (parallel_for) woke a
# sleeping thread and took the GIL; those served only updates from _SPLIT_MIN.
# Alone, hot in cache (us, one thread / the pool's two): RMSProp 18 / 13 at 50K
# elements, 69 / 46 at 200K, 175 / 104 at 401K, 636 / 278 at 1M; Adam 18 / 11, 71 /
# 45, 177 / 103, 684 / 313; at 10K the pool loses (4.0 / 5.1).  The names the pool
# functions call are bound to the compiled loops before they compile (`_compile_pool`).


def _gradient_descent_pool(var, delta, alpha, parts):
    n = var.size
    mode = _mx_get() & _FLUSH  # the caller's denormal modes, for each part's thread
    for p in prange(parts):
        saved = _mx_adopt(mode)
        lo, hi = p * n // parts, (p + 1) * n // parts
        _gradient_descent_one(var[lo:hi], delta[lo:hi], alpha)
        _mx_put(saved)


def _momentum_pool(var, accum, grad, lr, momentum, parts):
    n = var.size
    mode = _mx_get() & _FLUSH  # the caller's denormal modes, for each part's thread
    for p in prange(parts):
        saved = _mx_adopt(mode)
        lo, hi = p * n // parts, (p + 1) * n // parts
        _momentum_one(var[lo:hi], accum[lo:hi], grad[lo:hi], lr, momentum)
        _mx_put(saved)


def _rms_prop_pool(var, ms, mom, grad, lr, one_minus_rho, momentum, epsilon, parts):
    n = var.size
    mode = _mx_get() & _FLUSH  # the caller's denormal modes, for each part's thread
    for p in prange(parts):
        saved = _mx_adopt(mode)
        lo, hi = p * n // parts, (p + 1) * n // parts
        _rms_prop_one(var[lo:hi], ms[lo:hi], mom[lo:hi], grad[lo:hi], lr, one_minus_rho,
                      momentum, epsilon)  # fmt: skip
        _mx_put(saved)


def _adam_pool(var, m, v, grad, alpha, one_minus_beta1, one_minus_beta2, epsilon, parts):
    n = var.size
    mode = _mx_get() & _FLUSH  # the caller's denormal modes, for each part's thread
    for p in prange(parts):
        saved = _mx_adopt(mode)
        lo, hi = p * n // parts, (p + 1) * n // parts
        _adam_one(var[lo:hi], m[lo:hi], v[lo:hi], grad[lo:hi], alpha, one_minus_beta1,
                  one_minus_beta2, epsilon)  # fmt: skip
        _mx_put(saved)


prange = range
_gradient_descent_one = _momentum_one = _rms_prop_one = _adam_one = None
_mx_get = _mx_put = _mx_adopt = None
_FLUSH = jit_flush.BITS
_POOL_MIN = 1 << 15
_pooled: dict[str, object] = {}  # loop name -> its pool form (float32), once compiled
_jit_threads = None  # ops/jit_threads (it imports this module), once a pool form compiles


_import_lock = threading.Lock()


def numba_module():
    """numba, imported by the calling thread on first use (a background thread's: see
    _loop); None where it cannot be, or is disabled.  Also for fused_elementwise_jit."""
    return None if _DISABLED else import_numba()


def import_numba():
    """numba, or None where it cannot be imported, whatever the switch says: for the
    compile threads, which the request paths start only where compiles are on.  (A
    compile reading the switch could see it turned off after its start, by a test's
    monkeypatch or a program's A/B run, and end with nothing compiled: the loop then
    stayed on NumPy's path for the rest of the process.)"""
    global _numba
    if _numba is None:
        with _import_lock:  # (one importer: the others wait for the whole module)
            if _numba is None:
                try:
                    import numba
                except Exception:  # not installed, or not built for this NumPy
                    numba = False
                _numba = numba
    return _numba or None


# Each loop's (arrays, scalars) count: the tiny call that compiles it.
_ARITY = {
    "_gradient_descent_loop": (2, 1),
    "_momentum_loop": (3, 2),
    "_rms_prop_loop": (4, 4),
    "_adam_loop": (4, 4),
}
_lock = threading.Lock()
_started: dict[str, threading.Event] = {}  # loop name -> set once its compile ended


def _compile(name: str, done: threading.Event) -> None:
    """Import numba, compile loop `name` for float32 and float64 (a call on one-element
    arrays), and publish it in `_compiled`: on a thread of its own, never in a kernel."""
    try:
        with jit_fork.compiling():
            _compile_loop(name)
    except Exception as exc:  # a loop that cannot compile leaves NumPy's path in place
        tf_logging.warning("asyncflow: compiling %s with numba failed: %r", name, exc)
    finally:
        done.set()


def _compile_loop(name: str) -> None:
    numba = import_numba()
    if numba is not None:
        # error_model="numpy": a division by zero gives inf/nan as NumPy does, without
        # the per-element check (and exception) of Python's model, which also keeps the
        # loop vectorisable.
        fn = numba.njit(nogil=True, cache=True, error_model="numpy")(globals()[name])
        n_arrays, n_scalars = _ARITY[name]
        for dtype in (np.float32, np.float64):
            arrays = [np.zeros(1, dtype) for _ in range(n_arrays)]
            fn(*arrays, *[dtype(1) for _ in range(n_scalars)])
        _compiled[name] = fn
        try:
            _compile_pool(numba, name, fn)
        except Exception as exc:  # (no parallel layer here: the loop runs as before)
            tf_logging.warning("asyncflow: the pool form of %s failed: %r", name, exc)


def _compile_pool(numba, name: str, fn) -> None:
    """Loop `name`'s pool form for float32 (see above), where the pool may start here;
    published in `_pooled` once it ran on this (compile) thread."""
    global prange, _jit_threads, _mx_get, _mx_put, _mx_adopt
    from asyncflow.ops import jit_threads

    _jit_threads = jit_threads
    if not jit_threads.may_launch():
        return
    base = name[: -len("_loop")]
    globals()[base + "_one"] = fn  # (the name the pool form calls, bound as it compiles)
    prange = numba.prange
    _mx_get, _mx_put, _mx_adopt = jit_flush.intrinsics(numba)
    # One signature per kind of gradient, writable or read-only (a fed or constant
    # one); the targets are always writable (the copy-on-write protocol's).  Another
    # layout raises TypeError, and `apply` takes the plain loop.
    n_arrays, n_scalars = _ARITY[name]
    types = numba.types
    target, f32 = types.Array(types.float32, 1, "C"), types.float32
    signatures = [
        types.void(*[target] * (n_arrays - 1), grad, *[f32] * n_scalars, types.int64)
        for grad in (target, types.Array(types.float32, 1, "C", readonly=True))
    ]
    options = dict(nogil=True, cache=True, parallel=True, error_model="numpy")
    arrays = [np.zeros(2, np.float32) for _ in range(n_arrays)]
    with jit_threads.launching():  # (numba loads its threading layer as it compiles)
        pool = numba.njit(signatures, **options)(globals()[base + "_pool"])
        pool.disable_compile()
        pool(*arrays, *[np.float32(1) for _ in range(n_scalars)], 2)
    if jit_threads.note_layer(numba):
        _pooled[name] = pool


def _loop(name: str):
    """The compiled loop `name`, or None while it is not ready: the first request starts
    its compile on a background thread (numba's import ~0.3 s, a compile ~1.5 s, a
    cached one ~0.2 s), and the NumPy update runs meanwhile, which gives the same bits.
    A kernel, which may run on the event loop, never waits for a compile."""
    fn = _compiled.get(name)
    if fn is not None or _numba is False:
        return fn
    if name not in _started and jit_fork.may_start():
        with _lock:
            if name not in _started:
                done = _started[name] = threading.Event()
                threading.Thread(
                    target=_compile, args=(name, done), name="asyncflow-numba", daemon=True
                ).start()
    return None


def _in_child(mid_compile: bool) -> None:
    """After a fork (ops/jit_fork.py): new locks; a compile the parent's thread ran
    never ends here, so its waiters go on at once (the NumPy update runs)."""
    global _lock, _import_lock
    _lock, _import_lock = threading.Lock(), threading.Lock()
    for done in _started.values():
        done.set()


jit_fork.at_fork_in_child(_in_child)


def warm(timeout: float | None = 120.0) -> bool:
    """Compile every loop now and wait for them (tests, benchmarks, or a program that
    wants its first steps on the compiled path); whether they are all ready."""
    if _DISABLED:
        return False
    for name in _ARITY:
        _loop(name)
    for name in _ARITY:
        event = _started.get(name)
        if event is not None and not event.wait(timeout):
            return False
    return all(name in _compiled for name in _ARITY)


def available() -> bool:
    """Whether the compiled updates run (numba importable and the loops compiled, not
    disabled); compiles them first, waiting."""
    return warm()


def _pool_parts() -> int:
    """Parts for an update on the pool now: one per thread the CPU budget has free
    (ops/jit_threads.py `free_threads`); 1 where the pool may not run."""
    return _jit_threads.free_threads() if _POOL else 1


_POOL = True  # False: updates on one thread or the budget's helpers, as before (A/B)


# -- from the NumPy update functions' arguments to a loop's --------------------------------
#
# Each update's arguments as its loop takes them: (loop name, arrays beside the targets,
# scalars), or None where no loop covers the call.  `scalars` are the hyper-parameters
# (0-d arrays or NumPy scalars, checked to be of the variables' dtype by `apply`); what
# a loop takes derived from them is computed as training_ops' function computes it,
# on the same values (as NumPy scalars: the same float32/float64 operations as on 0-d
# arrays, without a ufunc call each), after `apply` checked them.


def _gradient_descent_args(attrs, values):
    alpha, delta = values
    return "_gradient_descent_loop", delta, (alpha,), None


def _momentum_args(attrs, values):
    if attrs["use_nesterov"]:
        return None
    lr, grad, momentum = values
    return "_momentum_loop", grad, (lr, momentum), None


def _rms_prop_args(attrs, values):
    lr, rho, momentum, epsilon, grad = values
    return "_rms_prop_loop", grad, (lr, rho, momentum, epsilon), _rms_prop_scalars


def _rms_prop_scalars(one, lr, rho, momentum, epsilon):
    return lr, one - rho, momentum, epsilon


def _adam_args(attrs, values):
    if attrs["use_nesterov"]:
        return None
    beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad = values
    return "_adam_loop", grad, (beta1_power, beta2_power, lr, beta1, beta2, epsilon), _adam_scalars


def _adam_scalars(one, beta1_power, beta2_power, lr, beta1, beta2, epsilon):
    alpha = lr * np.sqrt(one - beta2_power) / (one - beta1_power)
    return alpha, one - beta1, one - beta2, epsilon


# Below these sizes (elements) an update is left to NumPy: its few ufunc calls cost less
# than this path's checks and the compiled loop's call (~4 us: the checks below, numba's
# dispatch on each argument's type), and give the same bits.  Measured per
# `training_ops._apply_dense` call in one process (float32, 2-core project machine,
# cpu-quiet), NumPy / compiled: GradientDescent 2.8 / 4.2 us at 256 elements, 3.7 / 4.5
# at 4K, 5.3 / 5.3 at 16K, 7.7 / 6.5 at 32K; Momentum 3.4 / 4.9 at 256, 4.7 / 5.3 at 4K,
# 8.2 / 7.0 at 16K; RMSProp 10.3 / 5.5 at 1, 6.4 / 5.7 at 16, 6.7 / 5.6 at 256, 11.6 /
# 7.1 at 4K; Adam 13.8 / 6.2 at 1, 9.4 / 6.2 at 16, 9.6 / 6.3 at 256, 15.0 / 8.0 at 4K.
# (The MLP 784-512-512-10's biases and last layer: 4 of its 6 SGD updates.)  RMSProp's
# and Adam's loops win at any size; a variable under 16 elements keeps NumPy's path all
# the same, so that a program of scalars only never starts numba's import and compile.
_NUMPY_BELOW = {
    "_gradient_descent": 1 << 15,
    "_gradient_descent_scratch": 1 << 15,
    "_momentum": 1 << 14,
    "_rms_prop": 1 << 4,
    "_adam": 1 << 4,
}
# training_ops' update name -> its arguments' function above
_UPDATES = {
    "_gradient_descent": _gradient_descent_args,
    "_gradient_descent_scratch": _gradient_descent_args,
    "_momentum": _momentum_args,
    "_rms_prop": _rms_prop_args,
    "_adam": _adam_args,
}
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def apply(fn, attrs, targets: list, values: list) -> bool:
    """Run training_ops' dense update `fn` as its compiled loop; False (nothing done)
    where no loop covers it (see the module note) or NumPy's calls cost less (a small
    variable: `_NUMPY_BELOW`), for the NumPy path to run.

    Every optimizer step calls this once per variable: the checks are written out
    (no comprehension or helper call each), as they cost more than a small loop."""
    name = fn.__name__
    args_of = _UPDATES.get(name)
    if args_of is None or _DISABLED:
        return False
    var = targets[0]
    if var.size < _NUMPY_BELOW.get(name, 0):
        return False
    dtype = var.dtype
    if dtype != _F32 and dtype != _F64:
        return False
    made = args_of(attrs, values)
    if made is None:
        return False
    name, grad, scalars, derive = made
    shape = var.shape
    ndarray = np.ndarray
    for t in targets:
        if type(t) is not ndarray or t.dtype != dtype or t.shape != shape:
            return False
        flags = t.flags
        if not (flags.c_contiguous and flags.writeable):
            return False
    if type(grad) is not ndarray or grad.dtype != dtype or grad.shape != shape:
        return False
    gflags = grad.flags
    if not gflags.c_contiguous:
        grad = np.ascontiguousarray(grad)
        gflags = grad.flags
    one = dtype.type(1)
    args = []
    for s in scalars:  # 0-d arrays or NumPy scalars of the dtype, as NumPy scalars
        if type(s) is ndarray or isinstance(s, np.generic):
            if s.ndim or s.dtype != dtype:
                return False
            args.append(s[()])
        elif np.ndim(s) or np.asarray(s).dtype != dtype:
            return False
        else:
            args.append(dtype.type(s))
    if derive is not None:
        args = derive(one, *args)
    # The loops read and write element by element: no two arrays may overlap.  Distinct
    # arrays that each own their memory cannot (the usual case: variables' buffers and
    # a computed gradient); views are checked pair by pair.
    every = [*targets, grad]
    distinct = True
    for k, a in enumerate(every):
        if not (gflags if a is grad else a.flags).owndata:
            distinct = False
            break
        for b in every[:k]:
            if a is b:
                distinct = False
    if not distinct:
        for k, a in enumerate(every):
            for b in every[k + 1 :]:
                if np.may_share_memory(a, b):
                    return False
    loop = _loop(name)
    if loop is None:
        return False
    if len(shape) != 1:
        every = [a.reshape(-1) for a in every]
    n = var.size
    if n >= _POOL_MIN and dtype == _F32:
        pool = _pooled.get(name)
        if pool is not None:
            parts = _pool_parts()
            if parts > 1:
                try:
                    pool(*every, *args, parts)
                    return True
                except TypeError:  # (a layout outside its signatures: the loop below)
                    pass
    if n < _SPLIT_MIN:  # on this thread (see _SPLIT_MIN): no slices, no job
        loop(*every, *args)
        return True

    def run(start: int, stop: int) -> None:
        loop(*(a[start:stop] for a in every), *args)

    cpu_budget.parallel_for(n, run, min_block=_BLOCK)
    return True
