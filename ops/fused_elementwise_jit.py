"""A fused element-wise program of arithmetic only, compiled into one loop (numba).

`_FusedElementwise` evaluates its program as one NumPy ufunc call per instruction, each
a pass over memory; an LSTM cell's backward cluster is a dozen multiplies, adds and
activation gradients over [batch, units] values, most of them read from memory the
forward pass left cold.  Where every instruction is plain arithmetic on values of one
shape (no broadcasting but of scalar inputs, no reduction: a SumTo only where the
schedule made it an alias or a copy; Pow as NumPy's power computes it, `_POW_FORMS`),
the program becomes one loop over the elements that computes each instruction
with the same IEEE operations in the same order as its NumPy function (no fast-math: no
FMA contraction, no reassociation), so the outputs are bitwise those of the ufunc
program (tests/ops/test_fused_elementwise_jit.py).  Transcendental functions stay
NumPy's calls (numba's libm would round differently from NumPy's loops), except float32
Exp, Log, Log1p, Sigmoid, Softplus and Tanh: fused_elementwise_exp, _log, _log1p,
_tanh, _sigmoid and _softplus are those kernels' own functions (TF's, ops/elementwise),
as inline functions of the loops, each checked against the kernel's before a loop uses
it.  A
program with other ones (Log, float64 Tanh) runs as compiled stages of its arithmetic
around those calls (`_staged`, below), with the same bits.

Optional, as ops/fused_updates.py: without numba, or with ASYNCFLOW_NO_NUMBA=1, or for a
float16 program (NumPy rounds half after each operation), `compile_schedule` returns
None and the ufunc program runs.  Compiling takes ~0.3-0.6 s a program, on one
background thread, one program after another (as fused_updates' loops): until the loop
is ready the ufunc program runs, with the same bits, so no kernel waits for a compile;
`wait()` waits for the compiles under way.  A compiled loop is kept in an on-disk cache
(ops/jit_cache.py), from which later processes load it in milliseconds.  Only programs
over _MIN_ELEMENTS elements compile (_MIN_STAGED in stages), those under
_EAGER_ELEMENTS once they have run _SMALL_RUNS times.
"""

from __future__ import annotations

import collections
import importlib.util
import math
import threading

import numpy as np

from asyncflow import tf_logging
from asyncflow.ops import elementwise as _ew
from asyncflow.ops import fused_elementwise_exp as _exp
from asyncflow.ops import fused_elementwise_log as _log
from asyncflow.ops import fused_elementwise_log1p as _log1p
from asyncflow.ops import fused_elementwise_sigmoid as _sigmoid
from asyncflow.ops import fused_elementwise_softplus as _softplus
from asyncflow.ops import fused_elementwise_tanh as _tanh
from asyncflow.ops import fused_updates, jit_cache, jit_fork

__all__ = ["compile_schedule", "wait"]

# A program compiles from this many elements (a few microseconds a call, where NumPy's
# program pays ~2-3 us an instruction: the VAE's [64, 20] programs of 3-25
# instructions take 0.4-0.8x their ufunc programs' time); staged from _MIN_STAGED
# (each of its NumPy calls a pass of its own), or from _MIN_ELEMENTS where one of TF's
# float32 functions is inside (~10-25 NumPy calls each in the ufunc program).  The
# loop's call costs ~2.5 us at any size up to a few hundred elements: on the 2-vCPU
# Xeon (2026-12-04), hot, [8..128, 1] each, us, loop / ufunc program: two Logs, a Sub
# and an Add 2.3-2.5 / 30.6-31.6; Sigmoid, Add, Log 2.6-2.8 / 28.9-29.8; Tanh, Mul, Add
# 2.5-2.7 / 10.5-11.9; Mul, Exp, Sub 2.7-2.9 / 15.1-15.5.  The GAN tutorial's loss
# program at its batch of 32 (two Sigmoids, three Logs over [32, 1]) took 144 us of
# its step as the ufunc program, 26 us compiled.
_MIN_ELEMENTS = 8
# A program under this many elements compiles only once it has run _SMALL_RUNS times
# (a training loop's, not a test's or a one-off graph's: each compile takes ~0.3-0.6 s
# of a background thread); larger ones at their first run.
_EAGER_ELEMENTS = 1024
_SMALL_RUNS = 8
_MIN_STAGED = 4096

# Per op type: the expression its NumPy function computes, in its order of operations
# (ops/fused_elementwise.py's rules and ops/elementwise.py's activation gradients).
_EXPRESSIONS = {
    "Neg": "-{0}",
    "Abs": "abs({0})",
    "Sqrt": "np.sqrt({0})",
    "Reciprocal": "one / {0}",
    "Rsqrt": "one / np.sqrt({0})",
    "Square": "{0} * {0}",
    "Add": "{0} + {1}",
    "AddV2": "{0} + {1}",
    "Sub": "{0} - {1}",
    "Mul": "{0} * {1}",
    "RealDiv": "{0} / {1}",
    "SquaredDifference": "({0} - {1}) * ({0} - {1})",
    "SigmoidGrad": "((one - {0}) * {0}) * {1}",  # (1 - y) * y * dy
    "TanhGrad": "(one - {0} * {0}) * {1}",  # (1 - y * y) * dy
    "ReluGrad": "{0} * (one if {1} > zero else zero)",  # g * (x > 0)
    # (a bool condition: an input of the loop's shape, a scalar, or one per row)
    "Select": "{1} if {0} else {2}",
    "_SelectZero": "{1} if {0} else zero",  # (+0, as ZerosLike's)
    "_SelectZeroThen": "zero if {0} else {1}",
}
_SELECTS = frozenset(["Select", "_SelectZero", "_SelectZeroThen"])
# Float32 transcendental functions inside a loop, each the function the kernel's NumPy
# calls run here (the same bits; each module checks it against them before a loop uses
# it): Sigmoid, Exp, Log, Log1p and Softplus are ops/elementwise's (TF's, for values of a
# multiple of 8 elements), Tanh is ops/elementwise.tanh (TF's rational function).
_INLINE32 = {
    "Sigmoid": "_sigmoid32({0})",
    "Exp": "_exp32({0})",
    "Log": "_log32({0})",
    "Log1p": "_log1p32({0})",
    "Tanh": "_tanh32({0})",
    "Softplus": "_softplus32({0})",
}
_CHECKS = {  # type -> module
    "Sigmoid": _sigmoid,
    "Exp": _exp,
    "Log": _log,
    "Log1p": _log1p,
    "Tanh": _tanh,
    "Softplus": _softplus,
}
_NAMES = (  # source names
    ("_exp32", _exp),
    ("_log32", _log),
    ("_log1p32", _log1p),
    ("_tanh32", _tanh),
    ("_sigmoid32", _sigmoid),
    ("_softplus32", _softplus),
)


# Pow: NumPy's power loop takes a fast path for an exponent that is one scalar (an
# input of shape () or a literal: a stride of 0) of these values (NumPy 2's
# loops_umath_fp: x * x, x, 1 / x, 1, sqrt(x); glibc's pow rounds x ** 2 and x ** -1
# otherwise in ~0.07% of inputs), else C's pow per element, as numba's `**`.  A loop
# is compiled per form its Pows' exponents take, chosen at each call from the
# scalars' values (one loop of all forms, branching on the exponent, ran ~12x slower).
_POW_FORMS = {  # exponent: (the loop's expression, NumPy's)
    2.0: ("{0} * {0}", lambda x: x * x),
    1.0: ("{0}", lambda x: x.copy()),
    -1.0: ("one / {0}", lambda x: x.dtype.type(1) / x),
    0.0: ("one", lambda x: np.ones_like(x)),
    0.5: ("np.sqrt({0})", lambda x: np.sqrt(x)),
}
_POW = "{0} ** {1}"
_COMPILE_POW = True  # False: programs with a Pow compiled from now on stay NumPy's (A/B)
_pow_fast: dict = {}  # dtype -> {exponent: the loop's expression}, or None


def _fast_pows(dtype):
    """{exponent: expression} of the fast paths NumPy's power takes here for a scalar
    exponent, found once per dtype on inputs where C's pow gives other bits (NaN,
    signed zeros, infinities, 20,000 ordinary values); None where a scalar exponent's
    power is neither a fast path nor C's pow (Pows are not compiled then)."""
    if dtype in _pow_fast:
        return _pow_fast[dtype]
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1e-300, 1e30, 1e300]
    ordinary = np.random.default_rng(0).standard_normal(20000) * 10
    x = np.concatenate([np.array(special), ordinary]).astype(dtype)
    got: dict | None = {}
    with np.errstate(all="ignore"):
        for e, (expr, numpy_fn) in _POW_FORMS.items():
            want = np.power(x, dtype.type(e))
            if _exp.same_bits(want, numpy_fn(x)):
                got[e] = expr
            elif not _exp.same_bits(want, np.power(x, np.full_like(x, e))):
                got = None
                break
    _pow_fast[dtype] = got
    return got


_pow_general: dict = {}  # dtype -> whether the `**` form gives NumPy's power's bits


def _general_pow(dtype) -> bool:
    ok = _pow_general.get(dtype)
    if ok is None:
        ok = _pow_general[dtype] = _numpy_power_is_c_pow(dtype)
    return ok


def _numpy_power_is_c_pow(dtype) -> bool:
    """Whether NumPy's power of an exponent array gives C's pow's bits here (numba's `**`
    calls libm's pow / powf).  Not on every CPU: NumPy's AVX-512 loops use their own
    power (on the 2-core Zen 4 project machine 449 of 2,000 float32 and 117 float64
    results differ from glibc's by an ulp or two), and a compiled `**` would not give
    the NumPy program's bits there: a program whose Pow takes that form at a call runs
    NumPy's program (the fast forms, x * x and the like, are NumPy's own and compile
    everywhere).  Checked on 1,000 values through ctypes, ~2 ms once."""
    import ctypes
    import ctypes.util

    try:
        try:  # (glibc's name first: find_library runs ldconfig in a subprocess)
            libm = ctypes.CDLL("libm.so.6")
        except OSError:
            libm = ctypes.CDLL(ctypes.util.find_library("m"))
        fn = libm.powf if dtype == np.float32 else libm.pow
    except (OSError, AttributeError, TypeError):
        return False
    scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    fn.argtypes, fn.restype = [scalar, scalar], scalar
    rng = np.random.default_rng(1)
    x = (np.abs(rng.standard_normal(1000)) * 10).astype(dtype)
    y = (rng.standard_normal(1000) * 3).astype(dtype)
    want = np.array([fn(a, b) for a, b in zip(x.tolist(), y.tolist())], dtype)
    with np.errstate(all="ignore"):
        return _exp.same_bits(np.power(x, y), want)


def _expression(t: str, inline: frozenset):
    if t in inline:
        return _INLINE32[t]
    return _EXPRESSIONS.get(t)


def _full_shape(sched):
    """The shape of the program's values: its largest slot's."""
    return max(sched.slot_shapes, key=math.prod) if sched.slot_shapes else None


def _copies(own) -> bool:
    """Whether a step's own function copies an input into an output (a SumTo or
    Identity to the input's shape): in a loop, the output's store."""
    return getattr(own, "is_copy", False)


def _conditions(program) -> frozenset:
    """The inputs that are Selects' conditions (bool arrays)."""
    return frozenset(args[0] for t, args in zip(program.types, program.operands) if t in _SELECTS)


def _row_inputs(program, sched, shape) -> frozenset:
    """Conditions that are TF1's batch vectors: one per row of the loop's values (rank
    2 or more), read once a row by the row loop (`_source`)."""
    if len(shape) < 2:
        return frozenset()
    return frozenset(k for k in _conditions(program) if sched.slot_shapes[k] == shape[:1])


def _eligible(program, sched, inline: frozenset = frozenset()) -> bool:
    if sched.elements < _MIN_ELEMENTS or program.dtype not in (np.float32, np.float64):
        return False
    shape = _full_shape(sched)
    rows = _row_inputs(program, sched, shape)
    if any(k >= program.n_inputs for k in _conditions(program)):
        return False  # (a condition that is not an input: cannot happen, bool literals)
    for s, slot_shape in enumerate(sched.slot_shapes):
        # every value of one shape, but for scalar inputs (each the same operand of
        # every element, as NumPy's broadcast reads it) and conditions one per row
        if slot_shape != shape and not (s < program.n_inputs and slot_shape == ()):
            if s not in rows:
                return False  # broadcasting, or an input of another shape
    for lit in program.literals:
        if lit.ndim:
            return False
    for t, (own, _args, slot) in zip(program.types, sched.steps):
        if slot is None:
            continue  # an alias (Identity, a SumTo to the same shape)
        if sched.slot_shapes[slot] != shape:
            return False  # a value of a scalar's shape (in a scalar input's slot)
        if own is not None:
            if _copies(own):
                continue
            return False  # a SumTo that sums
        if t == "Pow":
            if not _COMPILE_POW or _fast_pows(program.dtype) is None:
                return False
        elif t != "AddN" and _expression(t, inline) is None:
            return False
    return True


def _pow_exponents(program, sched) -> list:
    """Per Pow instruction j: (j, the exponent's value index when it is a scalar (an
    input of shape () or a literal), else None)."""
    n_in, n_fixed = program.n_inputs, program.n_fixed
    out = []
    for j, (t, (_own, args, slot)) in enumerate(zip(program.types, sched.steps)):
        if t == "Pow" and slot is not None:
            a = args[1]
            scalar = (a < n_in and sched.slot_shapes[a] == ()) or n_in <= a < n_fixed
            out.append((j, a if scalar else None))
    return out


def _value_names(program, sched) -> list:
    """Each value's name in the loop's source: inputs `x{k}`, literals `c{k}`, an
    instruction's `v{j}`, or that of the value it is (an Identity, a SumTo to the same
    shape, a copy: the output's store)."""
    n_in, n_lit = program.n_inputs, len(program.literals)
    names = [f"x{k}" for k in range(n_in)] + [f"c{k}" for k in range(n_lit)]
    for j, (own, args, slot) in enumerate(sched.steps):
        names.append(names[args[0]] if slot is None or _copies(own) else f"v{j}")
    return names


def _source(
    program,
    sched,
    inline: frozenset = frozenset(),
    pows=None,
    concat: int = 0,
    rows=frozenset(),
    wide=None,
    sums: bool = False,
) -> str:
    """The loop's Python source: def loop(inputs..., outputs..., literals..., one, zero);
    `pows`: {instruction j: its Pow's expression}.

    With `concat` (a count), the first `concat` results are written into one array,
    `cat`, as ConcatV2 joins them: viewed as [rows, cols] (`cols` the elements from
    the axis on), result k's row r goes to cat's row r at column k * cols.  The loop
    takes `rows, cols` last and runs over rows, each array's row a slice of its own
    (cat's: one per result), then over the columns of the row: every access in the
    inner loop is a slice indexed by the loop's counter, which vectorizes (indices
    computed from r and c, `cat[r * width + k * cols + c]`, made the LSTM's [128,512]
    join 3x slower than this; ~the flat loop plus NumPy's concatenation).  The same
    row loop, with no `cat`, where inputs `rows` hold one value per row (a Select's
    batch-vector condition): read once a row.  `wide` ({input: (begin, width)}): inputs
    passed as the whole [rows, width] array they are columns begin.. of (a Split's
    piece, `fuse_split_inputs`), their row a slice of its row, not a copy made first.
    With `sums` (a join's), `bsum` after the outputs: cat's column sums, from zero, one
    row at a time in order (`fuse_bias_add_grad`).
    """
    wide = wide or {}
    n_in, n_lit = program.n_inputs, len(program.literals)
    names = _value_names(program, sched)
    scalar = [sched.slot_shapes[k] == () for k in range(n_in)]
    by_row = bool(concat or rows or wide)
    pad = " " * (12 if by_row else 8)
    # (a row loop reads row slices `in{k}c` by the column c; a scalar input, in either
    # loop, its one element; a row's input its row's, before the columns' loop)
    at = ["in{}[0]" if scalar[k] else "in{}c[c]" if by_row else "in{}[i]" for k in range(n_in)]
    body = [f"{pad}x{k} = {at[k].format(k)}" for k in range(n_in) if k not in rows]
    for j, (t, (own, args, slot)) in enumerate(zip(program.types, sched.steps)):
        if slot is None or _copies(own):  # (a copy: the output's store below)
            continue
        ops = [names[a] for a in args]
        if t == "AddN":  # ((x0 + x1) + x2) + ...
            expr = f"{ops[0]} + {ops[1]}"
            for o in ops[2:]:
                expr = f"({expr}) + {o}"
        elif t == "Pow":
            expr = (pows or {}).get(j, _POW).format(*ops)
        else:
            expr = _expression(t, inline).format(*ops)
        body.append(f"{pad}v{j} = {expr}")
    params = [f"in{k}" for k in range(n_in)]
    if not by_row:
        outs = [f"out{k}[i] = {names[r]}" for k, r in enumerate(sched.results)]
        params += [f"out{k}" for k in range(len(sched.results))]
        params += [f"c{k}" for k in range(n_lit)]
        lines = [f"def loop({', '.join(params)}, one, zero):", "    for i in range(out0.size):"]
        return "\n".join(lines + body + [f"{pad}{o}" for o in outs]) + "\n"
    n_out = len(sched.results)
    outs = [f"cat{k}[c] = {names[r]}" for k, r in enumerate(sched.results[:concat])]
    outs += [f"out{k}c[c] = {names[r]}" for k, r in enumerate(sched.results) if k >= concat]
    params += (["cat"] if concat else []) + [f"out{k}" for k in range(concat, n_out)]
    params += ["bsum"] if sums else []
    params += [f"c{k}" for k in range(n_lit)]
    lines = [
        f"def loop({', '.join(params)}, one, zero, rows, cols):",
        f"    width = cols * {max(concat, 1)}",
    ]
    # (the row's sums in a loop of their own after it, over cat's row just written: in
    # the columns' loop, the store into bsum kept that loop from vectorizing, 2x slower)
    tail = ["        catr = cat[b : b + width]", "        for j in range(width):"]
    tail += ["            bsum[j] = bsum[j] + catr[j]"]
    if sums:
        lines += ["    for j in range(width):", "        bsum[j] = zero"]
    lines += [
        "    for r in range(rows):",
        "        a = r * cols",
        "        b = r * width",
    ]
    lines += [f"        x{k} = in{k}[r]" for k in sorted(rows)]
    for k in range(n_in):
        if k in wide:
            b, w = wide[k]
            lines.append(f"        in{k}c = in{k}[r * {w} + {b} : r * {w} + {b} + cols]")
        elif not scalar[k] and k not in rows:
            lines.append(f"        in{k}c = in{k}[a : a + cols]")
    lines += [f"        cat{k} = cat[b + {k} * cols : b + {k + 1} * cols]" for k in range(concat)]
    lines += [f"        out{k}c = out{k}[a : a + cols]" for k in range(concat, n_out)]
    lines.append("        for c in range(cols):")
    return "\n".join(lines + body + [f"{pad}{o}" for o in outs] + (tail if sums else [])) + "\n"


_SUMS = True  # False: a join's column sums after the loop, not inside it (A/B)
# A rank-2 program reading Split pieces (`fuse_split_inputs`) and neither joining nor
# reading values per row runs as the row loop all the same, which reads each piece's
# row in its whole array (a dynamic_rnn's forward cell: four [128,128] gates of the
# [128,512] product, else copied first).  False: the flat loop, the pieces copied (A/B).
_WIDE_ROWS = True
# ... from this many columns: a narrower row's loop of its own costs more than the copies
# (an LSTM cell's program, us a call, row loop / flat: [128,128] 75 / 83, [4096,16] 231 /
# 334, [16384,8] 464 / 750, [4096,4] 315 / 137).
_WIDE_MIN_COLS = 8
_NO_LOOP = object()  # (a form whose compile failed, or whose inline function's check did)
_lock = threading.Lock()
_loops: dict[tuple, object] = {}  # (source, dtype) -> compiled loop, or None: it failed
_pending: dict[tuple, threading.Event] = {}  # compiles under way


def _compile(key: tuple, n_args: tuple, done: threading.Event) -> None:
    """Compile the loop of source `key[0]` for 1-D arrays and scalars of dtype `key[1]`
    (`n_args`: arrays read, read-only ones where `key[2]`, arrays written, scalars; a
    call on one element compiles the signature every call will have) and publish it:
    on the compiling thread, never in a kernel (which may run on the event loop)."""
    source, dtype, readonly = key
    loop = None
    try:
        numba = fused_updates.import_numba()
        if numba is not None:
            namespace = {"np": np}
            for name, module in _NAMES:
                if name in source:
                    if not module.check():
                        return  # (NumPy's function differs here: the other form runs)
                    namespace.update(module.namespace())
            # From a file of the on-disk cache where there is one, so that numba caches
            # the compiled loop for the next process (ops/jit_cache.py); else from memory.
            module = jit_cache.load_source(source, namespace)
            if module is not None:
                jitted = numba.njit(nogil=True, cache=True, error_model="numpy")(module.loop)
            else:
                loop_fn = jit_cache.function_from_source(source, namespace)
                jitted = numba.njit(nogil=True, error_model="numpy")(loop_fn)
            # n_args: (arrays read, written, scalars[, joined count, the conditions
            # (bool arrays read), whether a row loop]); one element each, a row
            # loop's `rows, cols` one row of one column (its `cat`: `count` elements)
            n_reads, n_writes, n_scalars, *more = n_args
            count, conditions, by_row, wide = more if more else (0, frozenset(), False, {})
            # (a column input reads its row's columns of a wider array: `wide[k]` of it)
            reads = [
                np.ones(wide.get(k, 1), np.bool_ if k in conditions else dtype)
                for k in range(n_reads)
            ]
            reads = [_readonly(r) for r in reads] if readonly else reads
            writes = [np.ones(max(1, count), dtype) for _ in range(n_writes)]
            jitted(*reads, *writes, *[dtype.type(1)] * n_scalars, *([1, 1] if by_row else []))
            loop = jitted
    except Exception as exc:  # numba could not type or compile it: NumPy's program runs
        tf_logging.warning("asyncflow: compiling a fused program with numba failed: %r", exc)
    finally:
        with _lock:
            if len(_loops) > 256:
                _loops.clear()
            _loops[key] = loop
            _pending.pop(key, None)
        done.set()


def _readonly(a):
    """A read-only view of array a."""
    v = a.view()
    v.flags.writeable = False
    return v


def _reading(arrays: list) -> tuple:
    """(the arrays a loop reads, whether through read-only views): numba types a
    read-only array (a constant's buffer, a feed) apart from a writable one, and an
    argument of another type compiles another signature at the call, on the step's
    thread (~1 s); so where one is read-only all are read as such, by a loop compiled
    for that (`_loop_for`'s `readonly`; setting the flag costs ~1 us an array)."""
    if all(a.flags.writeable for a in arrays):
        return arrays, False
    return [_readonly(a) for a in arrays], True


def _loop_for(source: str, dtype, n_args: tuple, readonly: bool = False):
    """The compiled loop of `source` (reading read-only arrays where `readonly`), or
    None while it is not ready (the first request starts its compile on a background
    thread; every cell of an unrolled RNN with the same program shares it) or when it
    could not compile."""
    key = (source, dtype, readonly)
    loop = _loops.get(key, _pending)
    if loop is not _pending:
        return loop
    with _lock:
        if not jit_fork.may_start():  # (a child forked mid-compile: ops/jit_fork.py)
            _loops[key] = None
        elif key not in _loops and key not in _pending:
            done = _pending[key] = threading.Event()
            _queue.append((key, n_args, done))
            if not _compiler:  # (one thread compiles them all, one after another)
                _compiler.append(
                    threading.Thread(target=_compile_queued, name="asyncflow-numba", daemon=True)
                )
                _compiler[0].start()
    return None


# The programs wait for one compiling thread, in the order first asked for: numba's
# compiles are mostly Python, so several threads at once would only take turns with the
# GIL, and each would take a turn from the step's own thread (a VAE's 13 programs on 13
# threads slowed its first ~140 steps 4-8x; ops/jit_cache.py spares the compiles after
# the first run).
_queue: collections.deque = collections.deque()
_compiler: list = []  # the compiling thread, while it runs


def _compile_queued() -> None:
    try:
        while True:
            with _lock:
                if not _queue:
                    return
                key, n_args, done = _queue.popleft()
            with jit_fork.compiling():
                _compile(key, n_args, done)
    finally:
        with _lock:
            _compiler.clear()
            if _queue:  # (asked for between the last look and now, or left by an error)
                _compiler.append(
                    threading.Thread(target=_compile_queued, name="asyncflow-numba", daemon=True)
                )
                _compiler[0].start()


def _in_child(mid_compile: bool) -> None:
    """After a fork (ops/jit_fork.py): a new lock, and no compiling thread.  Programs
    queued or compiling in the parent stay NumPy's here, their waiters released; where
    no compile ran at the fork, the queue was empty and new programs compile as before."""
    global _lock
    _lock = threading.Lock()
    _compiler.clear()
    _queue.clear()
    for key, done in list(_pending.items()):
        _loops[key] = None
        done.set()
    _pending.clear()


jit_fork.at_fork_in_child(_in_child)

_available: list = []


def may_compile() -> bool:
    """Whether programs may compile in this process (numba installed and not disabled),
    without importing numba."""
    if fused_updates._DISABLED:
        return False
    if not _available:
        _available.append(importlib.util.find_spec("numba") is not None)
    return _available[0]


def wait(timeout: float | None = 120.0) -> bool:
    """Wait for the compiles started so far (tests, benchmarks); whether they ended."""
    with _lock:
        events = list(_pending.values())
    return all(event.wait(timeout) for event in events)


def compile_schedule(program, sched):
    """A function `f(xs)` running `program` on inputs of `sched`'s shapes in one compiled
    loop, returning the node's outputs (`program.pack`: a concatenation of results
    written by the loop itself where it can), or None where that loop is not ready
    (yet): the NumPy program runs then, with the same bits.  None for a program it does
    not compile (see the module note)."""
    if fused_updates._DISABLED:
        return None
    wanted = frozenset()
    if program.dtype == np.float32:  # (whose functions' checks have not failed)
        wanted = frozenset(t for t in program.types if t in _INLINE32)
        wanted = frozenset(t for t in wanted if _CHECKS[t].verdict() is not False)
        if sched.elements % _ew.SIGMOID_PACKET:  # (TF's scalar tail: the kernel's own)
            wanted -= {"Sigmoid", "Exp", "Log", "Log1p", "Softplus"}
    inline = _packing(program, _compiled(program, sched, wanted)) if wanted else None
    if inline is None or all(_CHECKS[t].verdict() for t in wanted):
        fn = inline or _packing(program, _compiled(program, sched, frozenset()))
    else:
        plain = _packing(program, _compiled(program, sched, frozenset()))  # (until the checks)

        def fn(xs, whole=None):
            out = inline(xs, whole)  # None while compiling, or for good if its check failed
            return plain(xs, whole) if out is None and plain is not None else out

    if fn is None or sched.elements >= _EAGER_ELEMENTS:
        return fn
    return _after_runs(fn)


def _after_runs(fn):
    """`fn` for a small schedule (see _EAGER_ELEMENTS): None (the ufunc program runs)
    for its first _SMALL_RUNS runs, then `fn` (concurrent runs may count one run twice
    or not at all: no matter)."""
    left = [_SMALL_RUNS]

    def run(xs, whole=None):
        if left[0] > 0:
            left[0] -= 1
            return None
        return fn(xs, whole)

    return run


def _packing(program, fn):
    """`fn` (a compiled form's function), returning the node's outputs: `fn` itself when
    it packs them (`packs`), else with `program.pack` after it."""
    if fn is None or program.concat is None or getattr(fn, "packs", False):
        return fn
    pack = program.pack

    def packed(xs, whole=None):
        out = fn(xs, whole)
        return None if out is None else pack(np, out)

    return packed


def _concat_count(program, sched, shape) -> int:
    """How many results the loop itself writes joined (`program.concat`'s count), or 0:
    where each of them has the program's whole shape (not a scalar input it passes on)
    and the axis is one of that shape's."""
    if program.concat is None:
        return 0
    axis, count = program.concat
    scalar = {f"x{k}" for k in range(program.n_inputs) if sched.slot_shapes[k] == ()}
    if not -len(shape) <= axis < len(shape) or count > len(sched.results):
        return 0  # (ConcatV2's error, from `pack`)
    names = _value_names(program, sched)
    if any(names[r] in scalar for r in sched.results[:count]):
        return 0
    return count


def _compiled(program, sched, inline: frozenset):
    """compile_schedule's function for one form of the program: the op types `inline`
    inside the loops, the other transcendental functions NumPy's calls between stages."""
    if not _eligible(program, sched, inline):
        return _staged(program, sched, inline)
    dtype = program.dtype
    n_in, n_lit, n_out = program.n_inputs, len(program.literals), len(sched.results)
    one, zero = dtype.type(1), dtype.type(0)
    lits = [dtype.type(v) for v in program.literals]
    shape = _full_shape(sched)
    pows = _pow_exponents(program, sched)
    fast = _fast_pows(dtype) if pows else {}
    ready: dict = {}  # (the Pows' expressions, read-only) -> the loop, or _NO_LOOP
    sources: dict = {}  # the Pows' expressions -> the loop's source
    count = _concat_count(program, sched, shape)
    by_rows = _row_inputs(program, sched, shape)
    rows, cols = shape[0] if shape else 1, math.prod(shape[1:])  # (a row loop's)
    if count:
        axis = program.concat[0] % len(shape)
        if by_rows and math.prod(shape[:axis]) != shape[0]:
            count = 0  # (conditions per row of the first axis: the join by NumPy after)
        else:
            rows, cols = math.prod(shape[:axis]), math.prod(shape[axis:])
            joined = (*shape[:axis], shape[axis] * count, *shape[axis + 1 :])
    by_row = bool(count or by_rows)
    if not by_row and _WIDE_ROWS and len(shape) == 2 and getattr(program, "columns", ()):
        by_row = shape[1] >= _WIDE_MIN_COLS  # (else the flat loop copies each piece first)
    # Split pieces (`program.columns`) a row loop of rank-2 values reads in their whole
    # arrays; elsewhere (a flat loop: its vectorized form) each is copied first.
    wide = {}
    if by_row and len(shape) == 2 and (rows, cols) == tuple(shape):
        wide = {k: (b, w) for k, b, _e, w in getattr(program, "columns", ())}
    # the join's column sums as the loop writes it (`fuse_bias_add_grad`): its rows
    # the loop's rows, its columns each result's row after another's
    sums = bool(_SUMS and count and getattr(program, "bias_grad", False) and len(shape) == 2)
    sums = sums and (rows, cols) == tuple(shape)
    n_args = (n_in, n_out - count + (1 if count else 0) + sums, n_lit + 2)
    n_args += (count, _conditions(program), by_row, {k: w for k, (_b, w) in wide.items()})

    def run(xs, whole=None):
        if wide:
            if whole is None:
                return None  # (the pieces' arrays not given: NumPy's program runs)
            xs = list(xs)
            for k in wide:
                xs[k] = whole[k]
        flat, readonly = _reading([np.ascontiguousarray(x).reshape(-1) for x in xs])
        key = tuple(
            _POW if a is None else fast.get(float(xs[a] if a < n_in else lits[a - n_in]), _POW)
            for _j, a in pows
        )
        loop = ready.get((key, readonly))
        if loop is None:
            if _POW in key and not _general_pow(dtype):
                return None  # (C's pow is not NumPy's power here: NumPy's program runs)
            source = sources.get(key)
            if source is None:  # (~30 us to write: once, not at every call a compile waits)
                forms = {j: e for (j, _a), e in zip(pows, key)}
                source = sources[key] = _source(
                    program, sched, inline, forms, count, by_rows, wide, sums
                )
            loop = _loop_for(source, dtype, n_args, readonly)
            if loop is None:
                if _loops.get((source, dtype, readonly), _pending) is None:
                    ready[key, readonly] = _NO_LOOP  # (failed for good: never asked again)
                return None
            ready[key, readonly] = loop
        elif loop is _NO_LOOP:
            return None
        if count:
            cat = np.empty(joined, dtype)
            rest = [np.empty(shape, dtype) for _ in range(n_out - count)]
            if sums:
                bsum = np.empty(joined[-1], dtype)
                loop(*flat, cat.reshape(-1), *(o.reshape(-1) for o in rest), bsum, *lits, one,
                     zero, rows, cols)  # fmt: skip
                return (cat, *rest, bsum)
            loop(*flat, cat.reshape(-1), *(o.reshape(-1) for o in rest), *lits, one, zero,
                 rows, cols)  # fmt: skip
            return (cat, *rest)
        outs = [np.empty(shape, dtype) for _ in range(n_out)]
        if by_row:
            loop(*flat, *(o.reshape(-1) for o in outs), *lits, one, zero, rows, cols)
        else:
            loop(*flat, *(o.reshape(-1) for o in outs), *lits, one, zero)
        return tuple(outs)

    run.packs = bool(count)
    return run


# -- programs with transcendental functions: compiled stages around NumPy's calls --------
#
# An LSTM cell's forward cluster (three Sigmoids, two Tanhs and the products and sums
# between them) ran as ten ufunc calls of a few passes each (~90 us a [128,128] cell,
# a third of it Python).  Its transcendental functions stay NumPy's (SIMD loops; numba's
# libm would round differently), while the arithmetic between them runs as compiled
# loops: stage k computes every arithmetic instruction k transcendental calls deep, and
# NumPy's calls run between the stages.  A float64 Sigmoid is NumPy's program's own
# sequence (ops/elementwise.sigmoid: negative, exp, add one, reciprocal): the negation
# ends one stage, exp runs in NumPy, 1 / (e + 1) starts the next (reciprocal is that
# division); a float32 one not inside the loops (values of a size TF ends with its
# scalar path) is the kernel's own function, called.  So the outputs are bitwise those
# of the ufunc program.  Values that cross a stage, or that NumPy's calls read or
# write, are arrays; the others live in registers.


def _kernel_tanh(x, out=None):
    """The Tanh kernel's function (TF's for float32, NumPy's for float64)."""
    return _ew.tanh(np, x, out)


def _kernel_exp(x, out=None):
    """The Exp kernel's function (TF's for float32 where numba runs, else NumPy's)."""
    return _ew.exp(np, x, out)


def _kernel_log(x, out=None):
    """The Log kernel's function (TF's for float32 where numba runs, else NumPy's)."""
    return _ew.log(np, x, out)


def _kernel_log1p(x, out=None):
    """The Log1p kernel's function (TF's for float32 where numba runs, else NumPy's)."""
    return _ew.log1p(np, x, out)


def _kernel_softplus(x, out=None):
    """The Softplus kernel's function (TF's where numba runs, else NumPy's formula)."""
    return _ew.softplus(np, x, out)


def _kernel_sigmoid(x, out=None):
    """The Sigmoid kernel's function (TF's for float32, 1 / (1 + exp(-x)) for float64)."""
    return _ew.sigmoid(np, x, out)


_UFUNCS = {
    "Exp": _kernel_exp,
    "Tanh": _kernel_tanh,
    "Sigmoid": _kernel_sigmoid,
    "Log": _kernel_log,
    "Log1p": _kernel_log1p,
    "Softplus": _kernel_softplus,
}


def _staged_plan(program, sched, inline: frozenset = frozenset()):
    """(stages, calls per stage, arrays, results) or None (see the note above).

    Values are the program's (inputs, literals, instructions, aliases resolved) and, per
    Sigmoid j, ("neg", j) and ("exp", j).  stages[k]: [(value, expression)] in order;
    calls[k]: [(ufunc, value, operand)] run before stage k."""
    least = _MIN_ELEMENTS if inline else _MIN_STAGED
    if sched.elements < least or program.dtype not in (np.float32, np.float64):
        return None
    if any(t in _SELECTS for t in program.types):
        return None  # (bool conditions: the whole loop's, or NumPy's program)
    shape = sched.slot_shapes[0] if sched.slot_shapes else None
    if any(s != shape for s in sched.slot_shapes) or any(lit.ndim for lit in program.literals):
        return None
    n_in, n_fixed = program.n_inputs, program.n_fixed
    level: dict = {v: 0 for v in range(n_fixed)}
    names: dict = {v: f"x{v}" if v < n_in else f"c{v - n_in}" for v in range(n_fixed)}
    rep = list(range(n_fixed))
    stages: list[list] = [[]]
    calls: list[list] = [[]]
    uses: dict = {}  # value -> the stages reading it inside a loop
    called: set = set()  # values NumPy's calls read or write
    transcendental = False

    def at(k):
        while len(stages) <= k:
            stages.append([])
            calls.append([])

    for j, (t, (own, args, slot)) in enumerate(zip(program.types, sched.steps)):
        v = n_fixed + j
        if slot is None or own is not None:  # an alias (Identity, a SumTo to the same
            # shape), or one the ufunc program copies (an output that is an input: the
            # results copy it below; a SumTo that sums has a shape of its own, above)
            rep.append(rep[args[0]])
            continue
        rep.append(v)
        ops = [rep[a] for a in args]
        if t not in inline and (t in _UFUNCS or t == "Sigmoid"):
            transcendental = True
            (x,) = ops
            k = level[x] + 1
            at(k)
            if t == "Sigmoid" and program.dtype != np.float32:  # (float32's: TF's, called)
                neg, e = ("neg", j), ("exp", j)
                stages[k - 1].append((neg, f"-{names[x]}"))
                names[neg], level[neg] = f"n{j}", k - 1
                uses.setdefault(x, set()).add(k - 1)
                calls[k].append((np.exp, e, neg))
                called.update((neg, e))
                names[e], level[e] = f"e{j}", k
                stages[k].append((v, f"one / ({names[e]} + one)"))
                uses.setdefault(e, set()).add(k)
            else:
                calls[k].append((_UFUNCS[t], v, x))
                called.update((x, v))
            names[v], level[v] = f"v{j}", k
            continue
        if t == "AddN":
            expr = f"{names[ops[0]]} + {names[ops[1]]}"
            for o in ops[2:]:
                expr = f"({expr}) + {names[o]}"
        elif _expression(t, inline) is not None:
            expr = _expression(t, inline).format(*(names[o] for o in ops))
        else:
            return None
        k = max(level[o] for o in ops)
        at(k)
        stages[k].append((v, expr))
        for o in ops:
            uses.setdefault(o, set()).add(k)
        names[v], level[v] = f"v{j}", k
    if not transcendental:
        return None
    # Stage only when it saves passes over memory (each NumPy call is one, each stage
    # loop one; the ufunc program makes one per instruction, twenty-five per float32
    # Sigmoid and four per float64 one, twenty per float32 Tanh): a float64 Tanh times
    # a value is two passes either way, and staged it also pays a loop call and a new
    # array for the Tanh (its ufunc program writes both into one buffer): measured
    # 1.1-1.4x the ufunc program's time at 4K-1M elements.
    n_calls = sum(len(c) for c in calls)
    n_loops = sum(1 for stage in stages if stage)
    f32 = program.dtype == np.float32
    passes = {"Sigmoid": 25 if f32 else 4, "Tanh": 20 if f32 else 1}
    if f32 and _ew.tf_exp():
        passes.update(Exp=22, Log=25, Log1p=31, Softplus=55)
    else:
        passes["Softplus"] = 6
    ufunc_passes = sum(
        passes.get(t, 1)
        for t, (own, _a, slot) in zip(program.types, sched.steps)
        if slot is not None and own is None
    )
    if n_calls + n_loops >= ufunc_passes:
        return None
    results = [rep[r] for r in sched.results]
    if any(n_in <= r < n_fixed for r in results if isinstance(r, int)):
        return None  # an output that is a literal
    # Arrays: inputs, values NumPy reads or writes, values read in a later stage, results.
    arrays = {v for v in range(n_in)} | called | set(results)
    for v, ks in uses.items():
        literal = isinstance(v, int) and n_in <= v < n_fixed  # (a parameter of every loop)
        if not literal and any(k != level[v] for k in ks):
            arrays.add(v)
    if any(isinstance(v, int) and n_in <= v < n_fixed for v in called):
        return None  # a transcendental function of a literal (folded before, in practice)
    return stages, calls, arrays, results, names, shape


def _stage_source(stage, k, arrays, names, n_lit):
    """def loop(reads..., writes..., literals..., one, zero): one stage's loop; and the
    values its array parameters are (reads, writes)."""
    made = {v for v, _ in stage}
    reads = []
    for _v, expr in stage:
        for w in sorted(
            (w for w in arrays if w not in made and names[w] in _tokens(expr)), key=str
        ):
            if w not in reads:
                reads.append(w)
    writes = [v for v, _ in stage if v in arrays]
    body = [f"        {names[w]} = r{p}[i]" for p, w in enumerate(reads)]
    body += [f"        {names[v]} = {expr}" for v, expr in stage]
    body += [f"        w{p}[i] = {names[v]}" for p, v in enumerate(writes)]
    params = [f"r{p}" for p in range(len(reads))] + [f"w{p}" for p in range(len(writes))]
    params += [f"c{p}" for p in range(n_lit)]
    head = [f"def loop({', '.join(params)}, one, zero):", "    for i in range(w0.size):"]
    return "\n".join(head + body) + "\n", reads, writes


def _tokens(expr: str) -> set:
    out, cur = set(), []
    for ch in expr + " ":
        if ch.isalnum() or ch == "_":
            cur.append(ch)
        elif cur:
            out.add("".join(cur))
            cur = []
    return out


def _staged(program, sched, inline: frozenset = frozenset()):
    """compile_schedule's function for a program with transcendental functions (see
    the note above), or None."""
    plan = _staged_plan(program, sched, inline)
    if plan is None:
        return None
    stages, calls, arrays, results, names, shape = plan
    dtype = program.dtype
    n_lit = len(program.literals)
    loops = []
    for k, stage in enumerate(stages):
        source, reads, writes = _stage_source(stage, k, arrays, names, n_lit)
        if stage and not writes:
            return None  # (nothing of it is needed outside: cannot happen for outputs)
        loops.append((source, reads, writes, (len(reads), len(writes), n_lit + 2)))
    one, zero = dtype.type(1), dtype.type(0)
    lits = [dtype.type(v) for v in program.literals]
    n_in = program.n_inputs
    size = math.prod(shape)
    ready: dict = {}  # read-only -> the stages' loops

    def run(xs, whole=None):
        flat, readonly = _reading([np.ascontiguousarray(x).reshape(-1) for x in xs[:n_in]])
        got = ready.get(readonly)
        if got is None:  # (every stage's compile starts at the first call)
            got = [_loop_for(src, dtype, n, readonly) if w else None for src, _r, w, n in loops]
            if any(w and loop is None for (_s, _r, w, _n), loop in zip(loops, got)):
                return None
            ready[readonly] = got
        vals = dict(enumerate(flat))
        for k, loop in enumerate(got):
            for ufunc, v, x in calls[k]:
                vals[v] = ufunc(vals[x], out=vals[x] if isinstance(x, tuple) else None)
            _source, reads, writes, _n = loops[k]
            if loop is None:
                continue
            for w in writes:
                vals[w] = np.empty(size, dtype)
            args = [vals[w] for w in reads]
            args = [_readonly(a) for a in args] if readonly else args
            loop(*args, *[vals[w] for w in writes], *lits, one, zero)
        outs, seen = [], set()
        for r in results:  # distinct arrays, none an input, as the ufunc program's
            v = vals[r].reshape(shape)
            if r in seen or (isinstance(r, int) and r < n_in):
                v = v.copy()
            seen.add(r)
            outs.append(v)
        return tuple(outs)

    return run
