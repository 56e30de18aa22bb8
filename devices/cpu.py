"""The CPU device: NumPy kernels, heavy work on the device's own worker threads.

NumPy's BLAS and most large ufunc loops release the GIL, so a kernel handed to a worker
thread runs while the loop goes on with other ready kernels and other tasks.  Whether
`compute` runs its work inline or hands it to a worker is decided by the work's
estimated *time* (the cost model below): from what it computes and the shapes of its
arrays, inputs and result, then from what the same call measured before.  Cheap work
runs inline, since a thread hop (~20-50 µs) costs more than the work; work expected
to take longer than INLINE_S goes to a worker, so that the loop stays free for other
tasks (a [4096,1]x[1,4096] product reads 32 KiB and writes 64 MiB: it is not cheap).

A lone device while a synchronous `run` drives its step on the caller's own thread
(`CALLER_DRIVES`) computes everything inline: that thread waits for the step anyway
and the loop has nothing else to serve, while a worker would only run heavy kernels
beside the inline ones, two BLAS calls thrashing two cores and their caches (~15% of
the LeNet step of benchmarks/conv_bench.py).  The one exception is a side lane (TF's
inter-op parallelism): while the step has other nodes ready and the budget has a core
that no other process's thread holds, a kind of call measured at SIDE_S or more runs
on the worker with one BLAS thread, the driver's own calls narrowed to one thread
meanwhile (the budget counts both lanes), and its completion makes its consumers
ready.  A kind stays on the side only while the driver, out of other work, waited for
it less than half its inline time (SIDE_WAIT).  Lanes run for sessions that set
`inter_op_parallelism_threads` to 2 or more (see _SIDE_LANES).
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import os
import platform
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from asyncflow.devices import cpu_budget, denormal
from asyncflow.devices.base import DRIVER, NOT_INLINE, Device

__all__ = [
    "CALLER_DRIVES",
    "CPUDevice",
    "INLINE_S",
    "SHARED_INLINE_S",
    "estimate_seconds",
    "keep_freed_memory",
    "favour_loop_thread",
    "share_the_gil",
    "plan_seconds",
    "share_cores",
]

# Work expected to take less than this runs inline on the loop (a lone device): more
# than a thread hop costs, and well under the interpreter's slice (loop_slices.SLICE_S),
# so that other tasks on the loop wait about a millisecond at most.
INLINE_S = 2.5e-4
# While several devices share the host, work goes to a worker sooner: another device's
# kernels run on the loop meanwhile.
SHARED_INLINE_S = 5e-5
# A caller-driven step's kernel expected to take at least this, while other nodes of
# the step are ready and a core is free (cpu_budget.side_free), runs on a worker beside
# them: a side lane (TF's inter-op parallelism; see the module note).
SIDE_S = 1e-4
# Side lanes run where the session asks for inter-op parallelism
# (`inter_op_parallelism_threads` of 2 or more); ASYNCFLOW_SIDE_LANES=1 gives them to
# sessions that leave it at 0 too, =0 to none (to measure what they buy).  Not by
# default: on the 2-core project machine they bought the training steps of
# benchmarks/models and the summary step of benchmarks/summary_example_bench.py
# nothing or cost them time (benchmarks/README.md, "Side lanes").
_SIDE_LANES = {"1": True, "0": False}.get(os.environ.get("ASYNCFLOW_SIDE_LANES", ""))

# True while a synchronous caller drives the current step inline on its own thread
# (set by the session runtime; Tasks of the step inherit it).
CALLER_DRIVES: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "asyncflow_caller_drives", default=False
)

_share_lock = threading.Lock()
_share_count = 0
_share_limiter = None


def share_cores(n_devices: int) -> None:
    """Split the host's cores between `n_devices` virtual CPU devices.

    Each device runs heavy kernels on its own workers; letting every BLAS call also
    spread over all cores would oversubscribe them.  Where the CPU budget sets BLAS's
    thread count (`cpu_budget.manages_blas`) it already gives each call only the cores
    no other call of ours holds, so nothing is done here: a threadpoolctl limit would
    change the process-wide count behind the budget's back, and its restore at the
    session's close would leave the budget's deterministic one-thread calls running
    on the program's count.  Without the budget, while a multi-device session lives,
    each BLAS call gets cores / n_devices threads (threadpoolctl, when present).  Either
    way the host counts as shared (`_share_count`: the cost model's SHARED_INLINE_S, no
    inline forms).  Call `release_cores()` when that session closes.
    """
    global _share_count, _share_limiter
    if n_devices <= 1:
        return
    with _share_lock:
        _share_count += 1
        if _share_limiter is None and not cpu_budget.manages_blas():
            try:
                from threadpoolctl import threadpool_limits
            except ImportError:  # pragma: no cover - optional
                return
            per = max(1, cpu_budget.cores() // n_devices)
            _share_limiter = threadpool_limits(limits=per, user_api="blas")


def release_cores() -> None:
    global _share_count, _share_limiter
    with _share_lock:
        if _share_count == 0:
            return
        _share_count -= 1
        if _share_count == 0 and _share_limiter is not None:
            _share_limiter.restore_original_limits()
            _share_limiter = None


# -- the cost model ---------------------------------------------------------------------
#
# A call of `compute` is known by its function, the functions among its arguments (the
# element-wise kernels pass theirs), and its arrays' shapes and dtypes.  The first call
# of a kind is estimated from that: GEMM flops for a matrix product, else the bytes it
# reads plus the bytes its result is expected to take (arrays of one rank that differ
# broadcast to the larger result: an outer product); memory at _BYTES_PER_S, which
# counts the page faults of a fresh result.  Once two calls of a kind were measured
# (inline or on a worker), later ones are judged by the median of its last three, so
# the priors need only be right about which side of INLINE_S the work falls on.

_BYTES_PER_S = 2e9
_FLOPS_PER_S = 2e10
_MAX_KINDS = 1 << 14  # measured kinds kept (shapes vary: a service's batch sizes)
_MEASURED: dict[tuple, float] = {}  # kind -> seconds, once two runs were measured
_SAMPLES: dict[tuple, list[float]] = {}  # kind -> its last three measured runs
# Kinds that once went to a worker: they come back inline only when measured under
# half the limit, so that a kind near it does not alternate (one preempted run on a
# loaded machine, one fast run: a 1 ms kernel on the loop every few steps).
_WENT_TO_WORKER: set = set()
# Kinds measured well under the limit (SETTLED_FRACTION of it) run inline untimed, and
# are timed again on every RETIME_EVERY-th call: timing every call (two clock reads
# and the samples' median) cost as much as a small kernel's arithmetic (a served
# one-row predict's products and softmax), and a kind's work is fixed by its shapes.
SETTLED_FRACTION = 0.125
RETIME_EVERY = 16
_UNTIMED: dict[tuple, int] = {}  # settled kind -> calls run untimed since last timed
_clock = time.perf_counter
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, np.ufunc)


def _call_key(fn, args) -> tuple:
    key = [fn]
    for a in args:
        if type(a) is np.ndarray:
            key.append(a.shape)
            key.append(a.dtype)
        elif isinstance(a, _FUNCTION_TYPES):
            key.append(a)
        elif type(a) is list or type(a) is tuple:
            key.append(len(a))
            if a and type(a[0]) is np.ndarray:
                key.append(a[0].shape)
    return tuple(key)


def _observe(key: tuple, seconds: float) -> None:
    samples = _SAMPLES.get(key)
    if samples is None:
        if len(_SAMPLES) >= _MAX_KINDS:
            _SAMPLES.clear()
            _MEASURED.clear()
            _WENT_TO_WORKER.clear()
            _UNTIMED.clear()
        _SAMPLES[key] = [seconds]  # a kind's first run pays its warm-up: not trusted alone
        return
    samples.append(seconds)
    if len(samples) > 3:
        del samples[0]
    # The lower of two, the median of three: one preempted or collected run (a
    # loaded machine) does not send a cheap kind to the workers.
    _MEASURED[key] = sorted(samples)[(len(samples) - 1) // 2]


def _timed(key: tuple | None, fn, args):  # on a worker thread
    if key is None:  # (decided by the plan: nothing to learn)
        return cpu_budget.call(fn, args)
    t0 = _clock()
    result = cpu_budget.call(fn, args)
    _observe(key, _clock() - t0)
    return result


def _side_call(fn, args):  # on a worker thread, a side lane's core
    # (Not timed: beside the driver a call waits for the GIL between its GIL-free
    # parts, so its time is not the kind's; `_SIDE_RECORDS` judges the lane instead.)
    return cpu_budget.call_narrow(fn, args)


# While a side lane runs, the GIL changes hands after SIDE_SWITCH_S instead of
# GIL_SWITCH_S: the kernel's Python between its GIL-free calls (a summary's encoding
# around its compiled loops) waited up to 0.5 ms for the driver at each, and ended
# after the driver had run out of ready nodes.
SIDE_SWITCH_S = 5e-5
_side_switch = [0.005]  # the interval before the lane began


# A kind of call goes beside the driver only while that paid: the driver, out of other
# work, must have waited for it less than SIDE_WAIT of the call's inline time (the
# hand-off, the completion's trip through the loop, one BLAS thread instead of the
# budget's and both lanes' waits for the GIL cost the rest).  A kind whose last
# SIDE_TRIES tries beside it mostly did not runs inline, and is tried beside again
# after SIDE_RETRY calls (the step's work or the machine's load may have changed).
SIDE_WAIT = 0.5
SIDE_TRIES = 3
SIDE_RETRY = 64
_SIDE_RECORDS: dict[tuple, list] = {}  # kind -> [waits / inline time of its last tries, calls]


def _side_allowed(record: list | None) -> bool:
    if record is None or len(record[0]) < SIDE_TRIES:
        return True
    if sum(r < SIDE_WAIT for r in record[0]) * 2 > SIDE_TRIES:
        return True
    record[1] += 1
    if record[1] % SIDE_RETRY:
        return False
    record[0].clear()  # (tried afresh)
    return True


def _side_outcome(key: tuple, wait: float) -> None:
    record = _SIDE_RECORDS.get(key)
    if record is None:
        if len(_SIDE_RECORDS) >= _MAX_KINDS:
            _SIDE_RECORDS.clear()
        record = _SIDE_RECORDS[key] = [[], 0]
    record[0].append(wait)
    if len(record[0]) > SIDE_TRIES:
        del record[0][0]


def _release_side(_cf) -> None:
    sys.setswitchinterval(_side_switch[0])
    cpu_budget.release_side()


def estimate_seconds(fn, args, cost: float | None = None) -> float:
    """The prior: seconds `fn(*args)` is expected to take before any was measured."""
    arrays = []
    for a in args:
        if type(a) is np.ndarray:
            arrays.append(a)
        elif type(a) is list or type(a) is tuple:
            arrays.extend(x for x in a if type(x) is np.ndarray)
    read = sum(a.nbytes for a in arrays)
    if cost is not None:
        return max(float(cost), read) / _BYTES_PER_S
    if fn is np.matmul and len(arrays) == 2 and arrays[0].ndim >= 2 and arrays[1].ndim >= 2:
        a, b = arrays
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        batch = max(a.size // max(m * k, 1), b.size // max(k * n, 1), 1)
        flops = 2.0 * batch * m * k * n
        written = batch * m * n * max(a.itemsize, b.itemsize)
        return max(flops / _FLOPS_PER_S, (read + written) / _BYTES_PER_S)
    written = max((a.nbytes for a in arrays), default=0)
    if len(arrays) >= 2:
        ndim = arrays[0].ndim
        if all(a.ndim == ndim for a in arrays) and any(a.shape != arrays[0].shape for a in arrays):
            elements = 1
            for dims in zip(*(a.shape for a in arrays)):
                elements *= max(dims)
            written = max(written, elements * max(a.itemsize for a in arrays))
    return (read + written) / _BYTES_PER_S


# -- the C heap: freed tensors' pages kept for the next step ---------------------------
#
# A training step frees and allocates the same few-hundred-KiB arrays every step.  With
# glibc's defaults such arrays are mmapped or given back to the OS (heap trimming) when
# freed, so each step pays their page faults again: ~700 a step for the GAN model of
# benchmarks/models (2.5 ms of its 12 ms CPU per step).  A fixed mmap threshold of 32 MiB
# (glibc's largest) and no trimming keep them in the heap, as TF's allocator keeps its
# buffers: the process holds its peak heap (its peak RSS, measured, did not grow).
# Either setting alone is worse than neither (it turns off glibc's dynamic threshold).

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_heap_kept: bool | None = None


def keep_freed_memory() -> bool:
    """Tune glibc's malloc once per process (see above); False where it is not glibc or
    ASYNCFLOW_KEEP_FREED_MEMORY=0 asks to leave malloc alone."""
    global _heap_kept
    if _heap_kept is None:
        _heap_kept = False
        if os.environ.get("ASYNCFLOW_KEEP_FREED_MEMORY", "") not in ("", "1"):
            return False
        try:
            libc = ctypes.CDLL(None)
            mallopt = libc.mallopt
            is_glibc = hasattr(libc, "gnu_get_libc_version")  # mallopt's numbers are glibc's
        except (OSError, AttributeError):
            return False
        if not is_glibc:
            return False
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        _heap_kept = bool(
            mallopt(_M_MMAP_THRESHOLD, 32 << 20) and mallopt(_M_TRIM_THRESHOLD, 1 << 30)
        )
    return _heap_kept


# -- the GIL: how long the event loop waits for it ------------------------------------
#
# A thread that wants the GIL waits `sys.getswitchinterval()` (CPython's default: 5 ms)
# before it asks the thread holding it to let go.  Our device workers, intra-op helpers
# and synchronous callers' threads run Python beside the event loop (between NumPy
# calls, or a whole step for `run` in a thread), so with the default the loop, waking
# from its selector, waits up to 5 ms for one of them: measured with benchmarks/
# loop_bench.py's ticker, the lag not spent waiting for a core reached 8-12 ms for the
# CNN and the MLP (the CNN's convolutions and pooling gradients on the worker), and the
# `sess.run`-in-a-thread baseline showed 2-3 ms at p99.  At 0.5 ms that wait stays under
# the interpreter's own slice (loop_slices.SLICE_S); the cost is one forced switch per
# 0.5 ms while two threads both want the GIL, and nothing while only one does.

GIL_SWITCH_S = 5e-4
_DEFAULT_SWITCH_S = 0.005  # CPython's
_gil_shared: bool | None = None


def share_the_gil() -> bool:
    """Lower the interpreter's GIL switch interval to GIL_SWITCH_S, once per process,
    when it is still CPython's default (an interval the program chose stays).  False
    when left alone: changed by the program, or ASYNCFLOW_GIL_SWITCH_INTERVAL=0;
    another positive value there (seconds) is used instead of GIL_SWITCH_S."""
    global _gil_shared
    if _gil_shared is None:
        _gil_shared = False
        env = os.environ.get("ASYNCFLOW_GIL_SWITCH_INTERVAL", "")
        try:
            target = float(env) if env else GIL_SWITCH_S
        except ValueError:
            target = GIL_SWITCH_S
        if target > 0 and sys.getswitchinterval() == _DEFAULT_SWITCH_S:
            sys.setswitchinterval(target)
            _gil_shared = True
    return _gil_shared


# -- the loop's thread: how soon the OS runs it when it wakes -------------------------
#
# Linux's EEVDF scheduler (6.6 and later) runs a thread that wakes (the event loop,
# from epoll_wait, when a timer or a socket is due) when its virtual deadline comes:
# up to a slice after waking while our kernels' threads hold every core.  The slice is
# 0.75 ms x (1 + log2 cores) by default (1.4 ms read on the 2-core project machine).
# Since 6.12 a thread may ask for a shorter slice of its own (sched_setattr's
# sched_runtime, 0.1-100 ms): earlier deadlines, not more CPU (its share stays its
# weight's).  The thread of a loop a session steps on with `arun` asks for LOOP_SLICE_S:
# measured with loop_bench's phases (A/B in one process, 2 cores, load ~1), the 1 ms
# ticker's lag p99 went 2.6-3.2 -> 1.6-2.4 ms (CNN), 1.9-4.0 -> 1.0-1.1 ms (the outer
# product), 1.7-1.9 -> 1.6-1.8 ms (MLP), at the same steps/s.  A thread whose policy
# is not the default one (real-time, idle) is left alone, as on other systems;
# ASYNCFLOW_LOOP_SLICE_US=0 opts out, another value (microseconds) replaces 100.

LOOP_SLICE_S = 1e-4
_SCHED_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}  # setattr, getattr


class _Favoured(threading.local):
    asked = False  # this thread asked already


_favoured = _Favoured()


class _SchedAttr(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("sched_policy", ctypes.c_uint32),
        ("sched_flags", ctypes.c_uint64),
        ("sched_nice", ctypes.c_int32),
        ("sched_priority", ctypes.c_uint32),
        ("sched_runtime", ctypes.c_uint64),
        ("sched_deadline", ctypes.c_uint64),
        ("sched_period", ctypes.c_uint64),
        ("sched_util_min", ctypes.c_uint32),
        ("sched_util_max", ctypes.c_uint32),
    ]


def _loop_slice_ns() -> int:
    env = os.environ.get("ASYNCFLOW_LOOP_SLICE_US", "")
    try:
        us = float(env) if env else LOOP_SLICE_S * 1e6
    except ValueError:
        us = LOOP_SLICE_S * 1e6
    return max(int(us * 1e3), 0)


def favour_loop_thread() -> bool:
    """Ask the OS for a short scheduler slice for the calling thread (an event loop's),
    once per thread.  True when asked now; False when asked before, opted out, not
    Linux on x86_64/aarch64, the thread's policy is not the default, or refused."""
    if _favoured.asked:
        return False
    _favoured.asked = True
    calls = _SCHED_SYSCALLS.get(platform.machine()) if sys.platform == "linux" else None
    slice_ns = _loop_slice_ns()
    if calls is None or not slice_ns:
        return False
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return False
    attr = _SchedAttr()
    size, long_, uint = ctypes.sizeof(_SchedAttr), ctypes.c_long, ctypes.c_uint
    this_thread = ctypes.c_int(0)
    got = syscall(long_(calls[1]), this_thread, ctypes.byref(attr), uint(size), uint(0))
    if got != 0 or attr.sched_policy != 0:
        return False  # unknown to this kernel, or SCHED_FIFO/RR/BATCH/IDLE/DEADLINE
    attr.size, attr.sched_flags = size, 0
    attr.sched_runtime = slice_ns  # (its nice, read above, is written back as it was)
    return syscall(long_(calls[0]), this_thread, ctypes.byref(attr), uint(0)) == 0


# -- decided at plan time ----------------------------------------------------------------
#
# A node whose op type the table below knows, and whose shapes the graph fixes, gets its
# time estimated once, when its plan is lowered (`plan_seconds`): its kernel's work then
# runs inline or on a worker by that estimate, whatever any single call measured (a
# per-call measurement on a loaded machine moves a kernel near the limit to and fro:
# a millisecond on the loop every few steps).  Every other node keeps the per-call
# model above.

# (a: input index, b: input index) of the GEMM-based ops.
_GEMM_OPS = {
    "MatMul": (0, 1),
    "_FusedMatMul": (0, 1),
    "_FusedMatMulReluGrad": (0, 1),
    "BatchMatMul": (0, 1),
    "BatchMatMulV2": (0, 1),
    "BatchMatMulV3": (0, 1),
    "_FusedMatMulAssignUpdate": (1, 2),
    "_FusedMatMulApplyGradientDescent": (2, 3),
}
# Convolutions: (the tensor of output-gradient shape: -1 the output, else an input;
# the filter's shape: likewise).  Our convolutions reach about a quarter of GEMM's rate.
_CONV_OPS = {
    "Conv2D": (-1, 1),
    "Conv2DBackpropInput": (2, 1),
    "Conv2DBackpropFilter": (2, -1),
}
_CONV_FLOPS_PER_S = _FLOPS_PER_S / 4
# Memory-bound ops: their bytes read and written tell their time.
_BYTES_OPS = frozenset(
    "BiasAdd BiasAddGrad _FusedBiasAddRelu Relu ReluGrad Relu6 Elu Softmax LogSoftmax "
    "MaxPool MaxPoolGrad _FusedMaxPoolGradReluGrad AvgPool AvgPoolGrad "
    "ApplyGradientDescent ApplyMomentum ApplyAdam ApplyRMSProp ApplyAdagrad "
    "AssignSub AssignAdd".split()
)
# Pooling reads each input element once per window it lies in.
_WINDOW_OPS = frozenset(
    "MaxPool MaxPoolGrad _FusedMaxPoolGradReluGrad AvgPool AvgPoolGrad".split()
)


def _dims(t) -> list | None:
    shape = t.shape
    if shape.dims is None or not shape.is_fully_defined():
        return None
    return shape.as_list()


def _nbytes(t) -> int | None:
    dims = _dims(t)
    if dims is None:
        return None
    n = t.dtype.size
    for d in dims:
        n *= d
    return n


def plan_seconds(op, inputs=None) -> float | None:
    """The estimated time of `op`'s kernel from its type and static shapes; None when
    the table does not know the type or a shape is not fixed.  `inputs`: the tensors
    the node reads (a fused node's op lists none itself); default `op.inputs`."""
    t = op.type
    if t not in _GEMM_OPS and t not in _CONV_OPS and t not in _BYTES_OPS:
        return None
    inputs = list(op.inputs) if inputs is None else inputs
    if any(x is None for x in inputs):
        return None
    moved = 0
    for x in (*inputs, *op.outputs):
        b = _nbytes(x)
        if b is None:
            if t in _BYTES_OPS:
                return None
            continue  # (the flops decide: an internal op's output shape may be unset)
        moved += 2 * b if x._is_ref else b  # a variable: read and written in place
    seconds = moved / _BYTES_PER_S
    gemm = _GEMM_OPS.get(t)
    if gemm is not None:
        if len(inputs) <= gemm[1]:
            return None
        a, b = _dims(inputs[gemm[0]]), _dims(inputs[gemm[1]])
        if a is None or b is None or len(a) < 2 or len(b) < 2:
            return None
        attrs = op._attrs
        ta = attrs.get("transpose_a", False) or attrs.get("adj_x", False)
        tb = attrs.get("transpose_b", False) or attrs.get("adj_y", False)
        m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
        n = b[-2] if tb else b[-1]
        batch = max(_prod(a[:-2]), _prod(b[:-2]), 1)
        return max(seconds, 2.0 * batch * m * k * n / _FLOPS_PER_S)
    conv = _CONV_OPS.get(t)
    if conv is not None:
        if len(inputs) <= max(conv) or not op.outputs:
            return None
        y = op.outputs[0] if conv[0] < 0 else inputs[conv[0]]
        w = op.outputs[0] if conv[1] < 0 else inputs[conv[1]]
        y_dims, w_dims = _dims(y), _dims(w)
        if y_dims is None or w_dims is None or len(w_dims) != 4:
            return None
        flops = 2.0 * _prod(y_dims) * w_dims[0] * w_dims[1] * w_dims[2]
        return max(seconds, flops / _CONV_FLOPS_PER_S)
    if t in _WINDOW_OPS:
        seconds *= max(_prod(op._attrs.get("ksize") or ()), 1)
    return seconds


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


class CPUDevice(Device):
    device_type = "CPU"
    xp = np

    def __init__(self, name: str, index: int = 0, num_threads: int = 0):
        super().__init__(name, index)
        keep_freed_memory()
        share_the_gil()
        # One worker by default: BLAS already spreads a big kernel over the cores, and
        # two BLAS calls at once on two cores oversubscribe them (intra-op threads).
        self.num_threads = num_threads or 1
        # Side lanes (see the module note): TF's inter_op_parallelism_threads of 2 or
        # more; 1 (or TF's negative, "the caller's thread only") one kernel at a time;
        # 0, TF's default, one here unless ASYNCFLOW_SIDE_LANES=1 (see _SIDE_LANES).
        if _SIDE_LANES is None:
            self.side_lanes = num_threads >= 2
        else:
            self.side_lanes = _SIDE_LANES and (num_threads == 0 or num_threads >= 2)
        self._pool: ThreadPoolExecutor | None = None
        self.offloaded = 0  # calls of `compute` handed to a worker (statistics, tests)
        self._busy: asyncio.Future | None = None  # a lone device's work on its worker

    plan_seconds = staticmethod(plan_seconds)

    @property
    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self.num_threads,
                thread_name_prefix=f"asyncflow-cpu{self.index}",
                initializer=denormal.flush_this_thread,  # (kernels only, as TF's threads)
            )
        return self._pool

    def run_inline(self, fn, args):
        """`fn(*args)` now, when `compute(fn, *args)` would run it inline untimed (a
        settled cheap kind, nothing of this device on its worker, the host not shared
        between devices); else NOT_INLINE (for kernels' inline forms, kernel_api)."""
        if _share_count or self._busy is not None:
            return NOT_INLINE
        key = _call_key(fn, args)
        seconds = _MEASURED.get(key)
        if seconds is None or seconds >= SETTLED_FRACTION * INLINE_S:
            return NOT_INLINE
        untimed = _UNTIMED.get(key, 0)
        if untimed >= RETIME_EVERY - 1:
            return NOT_INLINE  # (its turn to be timed: by compute)
        _UNTIMED[key] = untimed + 1
        return cpu_budget.call_narrow(fn, args)

    kind_key = staticmethod(_call_key)  # (a kind of call, as run_inline and compute key it)

    def settled_seconds(self, keys) -> float | None:
        """The measured seconds of the kinds `keys` together (`kind_key`s), when each is
        a settled cheap kind and the device would run inline now, i.e. when run_inline
        would run every one of them (bar its retiming turn); else None.  For a
        straight-line step's direct form (asyncflow.straight_line), which makes these
        calls itself after this one check instead of asking per call."""
        if _share_count or self._busy is not None:
            return None
        limit = SETTLED_FRACTION * INLINE_S
        total = 0.0
        for key in keys:
            seconds = _MEASURED.get(key)
            if seconds is None or seconds >= limit:
                return None
            total += seconds
        return total

    def runs_inline_now(self) -> bool:
        """Whether `compute` would run a call inline on this thread now, with nothing
        to decide but BLAS's threads: a caller-driven step, cores not shared between
        devices, no side lanes.  A kernel whose work makes no BLAS call may then run
        it through `cpu_budget.call_without_blas` itself (fused element-wise programs)."""
        return not _share_count and not self.side_lanes and CALLER_DRIVES.get()

    def observe_kinds(self, timings) -> None:
        """Record `(kind_key, seconds)` pairs measured outside `compute`: a straight-line
        step's direct form (asyncflow.straight_line) makes its settled calls itself,
        times them on every RETIME_EVERY-th step and reports the times here."""
        for key, seconds in timings:
            _observe(key, seconds)

    async def compute(self, fn, *args, cost: float | None = None, seconds: float | None = None):
        """`fn(*args)`, inline when its estimated time is small, else on a worker.

        `cost` is the kernel's own hint, in bytes of memory traffic, for work whose
        size its arguments do not show (a convolution's patches).  `seconds`: the
        node's time as the plan estimated it from its op type and static shapes
        (`plan_seconds`, through `KernelContext.compute`); well under or well over
        the limit, it decides instead of the per-call cost model.
        """
        shared = _share_count
        if not shared:
            if CALLER_DRIVES.get():
                if seconds is not None and seconds < 0.25 * INLINE_S:  # the plan: cheap
                    return cpu_budget.call_narrow(fn, args)  # (one BLAS thread, untimed)
                if self.side_lanes and DRIVER.ready and cpu_budget.side_free():
                    return await self._beside(fn, args)
                return cpu_budget.call(fn, args)
            if self._busy is not None:
                await self._idle()
        limit = SHARED_INLINE_S if shared else INLINE_S
        if seconds is not None and seconds < 0.25 * limit:  # decided by the plan: cheap
            return cpu_budget.call_narrow(fn, args)
        if seconds is not None and seconds >= 4.0 * limit:  # decided by the plan: heavy
            key = None
        else:  # near the limit, or not estimated by the plan: per call, measured
            key = _call_key(fn, args)
            seconds = _MEASURED.get(key)
            if seconds is not None and seconds < SETTLED_FRACTION * limit:
                untimed = _UNTIMED.get(key, 0)
                if untimed < RETIME_EVERY - 1:  # settled cheap (see RETIME_EVERY)
                    _UNTIMED[key] = untimed + 1
                    return cpu_budget.call_narrow(fn, args)
                _UNTIMED[key] = 0
            if seconds is None:
                seconds = estimate_seconds(fn, args, cost)
            elif key in _WENT_TO_WORKER:
                seconds *= 2.0  # back inline only when well under the limit (no flip-flop)
            if seconds < limit:
                t0 = _clock()
                result = cpu_budget.call_narrow(fn, args)
                _observe(key, _clock() - t0)
                return result
            _WENT_TO_WORKER.add(key)
        self.offloaded += 1
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self.pool, _timed, key, fn, args)
        if not shared:
            self._busy = fut
            fut.add_done_callback(self._done)
        return await fut

    async def _beside(self, fn, args):
        """`fn(*args)` for a caller-driven step with other nodes ready and a core free:
        on a worker beside them, one BLAS thread, when this kind of call measured at
        least SIDE_S and went well beside them before (SIDE_WAIT); else inline,
        timed (a kind is measured inline before it may go: the plan's and the cost
        model's priors are bounds, not times)."""
        key = _call_key(fn, args)
        measured = _MEASURED.get(key)
        if measured is not None and measured < 0.25 * SIDE_S:  # settled: cheap
            return cpu_budget.call(fn, args)
        record = _SIDE_RECORDS.get(key)
        if measured is None or measured < SIDE_S or not _side_allowed(record):
            t0 = _clock()
            result = cpu_budget.call(fn, args)
            _observe(key, _clock() - t0)
            return result
        cpu_budget.reserve_side()
        _side_switch[0] = sys.getswitchinterval()
        sys.setswitchinterval(min(_side_switch[0], SIDE_SWITCH_S))
        try:
            cf = self.pool.submit(_side_call, fn, args)
        except BaseException:
            _release_side(None)
            raise
        # Held until the call ended, or was cancelled before a worker took it.
        cf.add_done_callback(_release_side)
        self.offloaded += 1
        t0 = _clock()
        result = await asyncio.wrap_future(cf)
        # How long the driver sat idle waiting for it: since its drivers ran dry (if
        # they did after t0), against what the call costs inline.
        idle = DRIVER.idle_at
        _side_outcome(key, (_clock() - idle if idle > t0 else 0.0) / measured)
        return result

    # A lone device's work goes one piece at a time, as on a caller-driven thread: while
    # a worker computes, the step's other compute waits (the loop stays free for other
    # tasks) instead of running inline beside it on the same cores, where the two (and
    # the BLAS threads) would thrash each other (a small GEMM measured 100x slower).
    def _done(self, fut) -> None:
        if self._busy is fut:
            self._busy = None

    async def _idle(self) -> None:
        """Wait until no work of this device runs on its worker (on this loop)."""
        loop = asyncio.get_running_loop()
        while self._busy is not None and self._busy.get_loop() is loop:
            waiter = loop.create_future()
            self._busy.add_done_callback(lambda _f, w=waiter: w.done() or w.set_result(None))
            await waiter  # (not the work itself: its error belongs to its own kernel)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def local_cpu_name(index: int = 0) -> str:
    return f"/job:localhost/replica:0/task:0/device:CPU:{index}"
