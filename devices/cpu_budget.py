"""One CPU budget per process: kernels, BLAS and element-wise threads share the cores.

The budget is `intra_op_parallelism_threads` (ConfigProto; 0 = the CPUs the process may
run on, its affinity mask), as TF's intra-op pool.  A kernel's heavy call
(`CPUDevice.compute` runs it through `call`) may use at most

    budget - other kernels of ours computing now      (at least 1)

threads, so kernels on device workers and their BLAS threads never oversubscribe the
budget.  Its BLAS calls run on one thread or on that many (OpenBLAS's own control,
`openblas_set_num_threads_local`, in the library NumPy itself loads; the count is
process-wide, and a step's end restores the program's own: `restore_blas`),
whichever that kind of call (function and
shapes) measured faster recently; the other way is tried again every `_EXPLORE` calls.
While another process's thread is runnable (`threads_now()` is 1) every call takes one
thread and nothing is explored: a second thread would only spin and wait for that core.
Where numba's pool runs (ops/jit_threads.py), a product granted several threads runs
as blocks on the pool's threads instead, each block on one BLAS thread
(`pool_threads`): its threads spin between products, and no second pool (OpenBLAS's
threads) fights them for the cores.

Why measure: OpenBLAS splits a product statically between its threads, which spin
and wait for each other; when another process holds a core, a two-thread call waits a
scheduler slice for the thread that is not running (measured on the 2-core project
machine beside a busy process: a [128,156]x[156,512] product ~90 us alone, 1-20 ms
beside it), while a neighbour that mostly sleeps costs it little.  Large element-wise
kernels split their work with `parallel_for` over `threads_now()`: the budget's share
less the cores other processes' runnable threads hold (/proc/loadavg, ours subtracted
from /proc/self/task, sampled at most every `_SAMPLE_S`).

`parallel_for(n, fn)` is that dynamic sharing for our own loops: `fn(start, stop)` over
blocks of range(n); the calling thread takes blocks itself, and helper threads (at
most budget - 1, made once) take the others from a shared counter, so a helper the
OS does not run leaves its blocks to the caller instead of stalling it; helpers are kept
off the caller's CPU.  `parallel_parts(count, fn)` shares a kernel's fixed parts that way
(convolutions, pooling: the same bits on any number of threads).

Invariants: the budget never hands out more threads than the cores it counts, so
kernels on device workers and their BLAS threads never oversubscribe the machine;
without OpenBLAS's per-thread symbol (another NumPy build) BLAS keeps its own
default and only `parallel_for` follows the budget.
"""

from __future__ import annotations

import ctypes
import glob
import itertools
import os
import threading
import time

import numpy as np

from asyncflow.devices import denormal

__all__ = [
    "blas_single",
    "budget",
    "call",
    "call_narrow",
    "configure",
    "cores",
    "deterministic",
    "granted",
    "parallel_for",
    "parallel_parts",
    "pool_threads",
    "restore_blas",
    "release_side",
    "reserve_side",
    "set_deterministic",
    "side_free",
    "split_allowed",
    "threads_blocks",
    "threads_now",
    "threads_shared",
    "unpool",
]


def _cores_allowed() -> int:
    """The CPUs this process may run on (its affinity mask: `taskset -c 1` gives one),
    not the machine's: on a one-CPU mask a second BLAS thread or a split's helper only
    takes turns with the caller (benchmarks/train_bench.py's MLP under `taskset -c 1` on
    the 2-core project machine: 5.9 ms a step counting two CPUs, 5.1 counting one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity API (not Linux)
        return os.cpu_count() or 1


_CORES = _cores_allowed()


def cores() -> int:
    """The CPUs this process may run on, counted once at import (the affinity mask)."""
    return _CORES


_budget = _CORES
_lock = threading.Lock()
_active = 0  # our threads inside `call` or running `parallel_for` blocks right now
_side = 0  # cores reserved by side lanes (`reserve_side`): kernels beside the driver's
_SAMPLE_S = 0.01
# Samples in a row that must see another process running before it counts (the least
# of them is taken).  One sample is one instant: on this project's idle 2-core VM ~1% of
# them caught a kernel thread or a daemon on the run queue for a moment (kworker,
# kdamond, rcu), and in noisy phases a third of a GAN step's samples did, each holding
# the step's products on one thread for _SAMPLE_S.  A CPU-bound neighbour is on the run
# queue in every sample, so it still counts from its second sample on.
_CONFIRM = 2
_competing = 0
_recent: list[int] = []  # the latest raw samples, at most _CONFIRM
_sampled_at = -1.0


def configure(intra_op_parallelism_threads: int = 0) -> None:
    """Set the budget from a session's ConfigProto (0: every CPU the process may run on),
    as TF's intra-op pool.

    The budget is process-wide (TF's pools are too); the latest session's value holds.
    """
    global _budget
    n = int(intra_op_parallelism_threads or 0)
    _budget = n if n > 0 else _CORES


def budget() -> int:
    return _budget


# -- other processes' load --------------------------------------------------------------


_fds: dict[str, int] = {}  # open /proc files, read again with pread (no open per sample)
_tasks_listed_at = -1.0


def _pread(path: str) -> bytes:
    fd = _fds.get(path)
    if fd is None:
        fd = _fds[path] = os.open(path, os.O_RDONLY)
    return os.pread(fd, 512, 0)


def _running_total() -> int:
    # "0.50 0.40 0.30 3/120 4567": 3 threads runnable on the machine now.
    return int(_pread("/proc/loadavg").split()[3].split(b"/")[0])


def _running_ours(now: float) -> int:
    global _tasks_listed_at
    if now - _tasks_listed_at > 1.0:  # threads come and go rarely: list them each second
        _tasks_listed_at = now
        tasks = {f"/proc/self/task/{t}/stat" for t in os.listdir("/proc/self/task")}
        for path in [p for p in _fds if p.startswith("/proc/self/task/") and p not in tasks]:
            os.close(_fds.pop(path))
        for path in tasks:
            _fds.setdefault(path, -1)
    n = 0
    for path, fd in list(_fds.items()):
        if not path.startswith("/proc/self/task/"):
            continue
        try:
            if fd < 0:
                fd = _fds[path] = os.open(path, os.O_RDONLY)
            stat = os.pread(fd, 512, 0)
        except OSError:  # the thread ended
            if fd >= 0:
                os.close(fd)
            del _fds[path]
            continue
        end = stat.rindex(b")")
        n += stat[end + 2 : end + 3] == b"R"
    return n


def _sample_competing() -> int:
    """Runnable threads of other processes: the least of the last _CONFIRM samples,
    one at most every _SAMPLE_S seconds."""
    global _competing, _sampled_at
    now = time.monotonic()
    if now - _sampled_at < _SAMPLE_S:
        return _competing
    _sampled_at = now
    try:
        total = _running_total()
        # (the sampling thread is one of the runnable ones: with no other, nobody
        # competes, and our threads' states need not be read: ~40 us saved a sample)
        raw = 0 if total <= 1 else max(0, total - _running_ours(now))
    except (OSError, ValueError, IndexError):  # no /proc (not Linux): assume nobody
        raw = 0
    _recent.append(raw)
    del _recent[: -max(1, _CONFIRM)]
    _competing = min(_recent)
    return _competing


def threads_now(active: int | None = None) -> int:
    """Threads a kernel may use now: the budget less our other computing threads, and
    no core another process is running on.  At least 1."""
    others = (_active if active is None else active) - 1
    free = min(_budget - max(others, 0), _CORES - _side - _sample_competing())
    return max(1, free)


# Work shared dynamically (`parallel_for`) may take helpers while another process runs:
# a helper the OS does not run leaves its blocks to the caller, so a busy core costs at
# most the block a preempted helper holds, and a helper that sleeps between jobs is
# run soon after it wakes (the scheduler favours threads that slept).  So the process
# keeps its share of the cores beside busy ones, as TF's pool threads do.


def threads_shared(active: int | None = None) -> int:
    """Threads work shared block by block may use now: the budget less our other
    computing threads (other processes' load does not count, see above).  At least 1."""
    others = (_active if active is None else active) - 1
    return max(1, min(_budget - max(others, 0), _CORES - _side))


# ... except when other processes' runnable threads hold every core: then a helper is
# woken onto a core it must queue for, and once it has taken a block it holds it while
# preempted, so the caller, done with its own blocks, waits for it.  Measured on the
# 2-core project machine at load 3.4-4.3 (per-thread CPU, 100 steps, alternating in
# separate processes): the GAN's split products 10.7-13.7 ms/step at 7.7-8.5 ms CPU,
# unsplit 10.0-10.7 at 7.0-7.2; the MLP 9.2-11.1 at 5.9-6.5, unsplit 6.5-8.2 at 5.3-5.6
# (a split GEMM that the caller ends up doing alone costs ~15% more: each block packs
# its operand again).  Beside one busy process on two cores a core stays ours to share.


def threads_blocks(active: int | None = None) -> int:
    """Threads a kernel's own blocks (ops/blas.py's split products and grouped runs,
    `parallel_parts`' convolution parts) may use now: `threads_shared()`; 1 while other
    processes' runnable threads fill every core; and 1 when the budget does not set
    BLAS's thread count (ASYNCFLOW_CPU_BUDGET=0, or no per-call control in this BLAS):
    blocks then call a BLAS that runs on all its threads, so each block on a thread of
    ours would put BLAS's threads times ours on the cores (a split product so took the
    MLP 44 ms a step against 6.2 unsplit, see `split_allowed`); and 1 while the only
    core other processes leave free is the caller's (`_PARTS_ON_BUSY_CORES`)."""
    if _set_blas_local is None:
        return 1
    competing = _sample_competing()
    if competing >= _CORES or (
        competing and _CORES - _side - competing < 2 and not _PARTS_ON_BUSY_CORES
    ):
        return 1
    return threads_shared(active)


# And 1 while no core other processes leave free is there for a helper besides the
# caller's (two cores beside one busy process): as for the split of one product
# (`split_allowed`, `_SPLIT_ON_BUSY_CORES`), the helper waits on the busy core's run
# queue (the CNN's convolution parts beside a spinner: its helper ran 1.1 ms a step and
# waited 1.0 on the run queue).  Beside one spinning process on the 2-core project
# machine, in one process alternating (benchmarks/models/contention_probe.py, 12
# rounds): the CNN 32.31 ms a step at 32.3 ms CPU against 32.95 at 33.8 with the parts
# shared (0.981x, 12/12 rounds); the GAN and the autoencoder, which share no parts
# there, 1.005x and 0.985x.  True: shared there too (A/B).
_PARTS_ON_BUSY_CORES = False


# -- BLAS's thread count ----------------------------------------------------------------
#
# `openblas_set_num_threads_local` (the library NumPy itself loads) sets OpenBLAS's
# *process-wide* count despite its name (measured with OpenBLAS 0.3.31: a count set on
# one thread is the count every thread's next call uses) and returns the previous one.
# So the count we chose is one module variable, set again only when a call wants
# another, and `restore_blas` gives the user's own count back when a step ends: numpy
# code of the program between steps runs with the threads it had before.


def _load_blas_local():
    libs_dir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs_dir, "libscipy_openblas*.so"))):
        try:
            lib = ctypes.CDLL(path)
            fn = lib.openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_int]
        _short_spin(lib)
        return fn
    return None


# After a threaded call OpenBLAS's idle threads spin (sched_yield) for 2^28 cycles,
# ~0.1 s, before they sleep: through the rest of a step (the element-wise kernels, the
# optimizer, Python) a model whose products took two BLAS threads burned the second
# core.  Measured on the 2-core project machine, load ~1 (benchmarks/models' VAE, one
# process per setting, alternating): 4.9-5.0 ms/step at 9.5-9.8 ms CPU/step, the
# spinning thread as busy as the loop's; with 2^14 cycles (~5 us) 4.9-5.1 ms at 6.6-6.9
# ms CPU (TF 2.21: 3.4 ms at 6.6 ms).  OpenBLAS reads OPENBLAS_THREAD_TIMEOUT (log2
# cycles) when it starts its threads, so the value is given to it (openblas_read_env,
# the environment restored at once) and its threads are stopped, to start again with
# it at the next threaded call.  A value the program set in the environment stays, as
# does OpenBLAS with ASYNCFLOW_BLAS_SPIN_LOG2=0.
_SPIN_LOG2 = 14


def _short_spin(lib) -> bool:
    """Give OpenBLAS's idle threads a spin of 2^_SPIN_LOG2 cycles; whether it was set."""
    if "OPENBLAS_THREAD_TIMEOUT" in os.environ or "GOTO_THREAD_TIMEOUT" in os.environ:
        return False
    try:
        log2 = int(os.environ.get("ASYNCFLOW_BLAS_SPIN_LOG2", _SPIN_LOG2))
        read_env, shutdown = lib.openblas_read_env, lib.blas_thread_shutdown_
    except (AttributeError, ValueError):
        return False
    if log2 <= 0:
        return False
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(max(4, min(log2, 30)))
    try:
        read_env()
    finally:
        del os.environ["OPENBLAS_THREAD_TIMEOUT"]
    shutdown()  # (the threads start again, with the new spin, when a call wants them)
    return True


# ASYNCFLOW_CPU_BUDGET=0 leaves BLAS's thread count alone (to measure what the budget buys).
_set_blas_local = (
    _load_blas_local() if os.environ.get("ASYNCFLOW_CPU_BUDGET", "") in ("", "1") else None
)
_blas_now = 0  # the count our calls set (the threads granted); 0: the user's, untouched
_blas_user = 0  # the count BLAS had before our first call changed it
# The count OpenBLAS has now: `_blas_now`, except while a product granted several
# threads runs them as blocks on the numba pool (ops/jit_threads.py), each on one BLAS
# thread (`pool_threads`); 0 with `_blas_now`.
_lib_now = 0


def _blas_threads(n: int) -> None:
    global _blas_now, _blas_user, _lib_now
    if n and (n != _blas_now or n != _lib_now) and _set_blas_local is not None:
        if n != _lib_now:
            previous = _set_blas_local(n)
            if not _lib_now:
                _blas_user = previous
            _lib_now = n
        _blas_now = n


def granted() -> int:
    """The BLAS threads the call running now was granted (`call`); 0 when no call of
    ours set a count since the last `restore_blas`."""
    return _blas_now


def unpool() -> None:
    """After `pool_threads`, for a product the pool did not make after all: OpenBLAS
    back on the threads granted."""
    _blas_threads(_blas_now)


def pool_threads() -> int:
    """For a product that runs as blocks on the numba pool: the threads its call was
    granted (`_blas_now`), BLAS set to one thread for its blocks (its count is
    process-wide: the next call that wants more sets it back)."""
    global _lib_now
    n = _blas_now
    if n > 1 and _lib_now != 1:
        _set_blas_local(1)
        _lib_now = 1
    return n


def blas_single() -> None:
    """BLAS calls on one thread from now on (until a call of `call` chooses again):
    for work that splits itself over the budget's threads (ops/blas.py's blocks)."""
    _blas_threads(1)


def manages_blas() -> bool:
    """Whether the budget sets BLAS's thread count for our calls (NumPy's OpenBLAS found,
    ASYNCFLOW_CPU_BUDGET not 0): then nothing else of ours may change that count, which
    is process-wide, behind `_blas_now` (devices/cpu.py `share_cores`)."""
    return _set_blas_local is not None


def split_allowed() -> bool:
    """Whether a large product may split itself over the budget's threads now
    (ops/blas.py): only while another process's thread is runnable, the case the split
    is for (a helper the OS does not run leaves its blocks to the caller), and not
    while our BLAS runs on several threads.

    And only while a core other processes leave free is there for the split's helper
    (see `_SPLIT_ON_BUSY_CORES` below).

    On a free machine OpenBLAS's own threads beat the split ([128,512]x[512,512], 2
    cores: ~510 us on two BLAS threads, ~610 us split, ~680 us on one), and a split
    there costs the step more than its own time: its helper and OpenBLAS's idle thread,
    still spinning after the last threaded call, take turns on the second core.
    Measured with benchmarks/ab_train.py's MLP (8 rounds, load ~1): 6.54 ms a step
    split where `call` chose one thread, 6.40 unsplit; at OpenBLAS's default spin 6.69
    split, 5.97 unsplit.  And when the budget does not set BLAS's thread count
    (ASYNCFLOW_CPU_BUDGET=0, or no per-call control in this BLAS), each block would run
    on all of BLAS's threads: that MLP took 44 ms a step so, against 6.2 unsplit."""
    if _set_blas_local is None or _blas_now > 1:
        return False
    competing = _sample_competing()
    return competing > 0 and (_CORES - _side - competing >= 2 or _SPLIT_ON_BUSY_CORES)


# ... but only while a core the other processes leave free is there for the helper
# besides the caller's: on two cores beside one busy process the helper's only core is
# the busy one, where it waits on the run queue (~1 ms a MLP step, /proc's schedstat)
# while the caller's core saves little of the blocks' work (the MLP's step: 4.0 ms of
# CPU split, 3.0 as one call each).  Beside one spinning process on the 2-core project
# machine, in one process alternating (benchmarks/models/contention_probe.py, split as
# B with `_SPLIT_ON_BUSY_CORES=True`): with MKL's one-thread gemm, mlp 2.99 against
# 3.29 ms (6/6 rounds), gan 4.13 against 4.69 (6/6), autoencoder 5.27 against 5.81
# (6/6); with oneDNN's (ASYNCFLOW_BLAS=onednn), mlp 2.99 against 3.20 (6/6); with
# OpenBLAS's alone (ASYNCFLOW_BLAS=openblas), mlp 0.948x (6/6), gan 0.940x (6/6),
# autoencoder 0.970x (4/6) the split's time; the VAE's and CNN's steps unchanged, and
# alone nothing splits.  True: the split wherever another process runs (A/B).
_SPLIT_ON_BUSY_CORES = False


def restore_blas() -> None:
    """Give BLAS back the thread count it had before our kernels changed it (a step's
    end: the program's own NumPy calls between steps keep their threads), but not
    while a call of ours is computing (`_active`): the count is process-wide, and that
    call set it for its own BLAS calls.  A restore skipped so is made at a later one.

    It runs whenever a driver leaves a quiet step (kernel_api.end_quiet_step): at a
    step's end, and also when a synchronous step suspends on a kernel computing on a
    device worker (session._SyncCall._start), or while other threads' steps compute.
    Given back then, the worker's product, for which `call` had chosen one thread,
    could start on the program's count: with TF_DETERMINISTIC_OPS=1, other bits now
    and then (an LSTM cell's [64,128]x[128,384] float32 product on two OpenBLAS 0.3.31
    Haswell threads differs from one thread's from its 13th row on).  Under `_lock`,
    where `call` counts itself in `_active` before it reads `_blas_now`: a call is
    either counted here, or finds `_blas_now` at 0 and sets its count itself."""
    global _blas_now, _lib_now
    with _lock:
        if not _blas_now or _active:
            return
        if _lib_now != _blas_user and _set_blas_local is not None:
            _set_blas_local(_blas_user)
        _blas_now = _lib_now = 0


# A kind of call (its function and array shapes) remembers its last three times on one
# BLAS thread and on all it may have; it runs the faster way, and tries the other once
# every _EXPLORE calls (the load changes).  The cores other processes hold decide the
# first tries only: a busy neighbour that sleeps half the time costs a two-thread call
# little, a CPU-bound one costs it a scheduler slice, and only measuring tells which.
_EXPLORE = 128
_MAX_KINDS = 4096
# kind -> [one-thread samples, many-thread samples, calls, small]
_kinds: dict[tuple, list] = {}
# A kind whose one-thread calls took less than this is small: it runs on one thread
# unmeasured, measured again once every _EXPLORE calls.  A second BLAS thread cannot
# pay for its wake-up there, and its cost falls outside the call's own time, where the
# choice cannot see it: after a call OpenBLAS's idle threads spin (sched_yield) on the
# other core for a while, where the next kernel's split GEMM (ops/blas.py), the event
# loop or another process needs it.  The MLP 784-512-512-10 step chose two threads for
# its [128,512]x[512,10] product (0.07 ms).  Measured in one process, alternating (2-core
# machine, load ~1), at 3e-4 against 2e-5: the MLP step 0.90x the wall time and 0.65x
# the CPU; under `arun` with a 1 ms ticker on the loop (benchmarks/loop_bench.py's
# phase), 75-87 -> 90-95 steps/s and ticker lag p99 3.9 -> 2.2-2.7 ms; the models of
# benchmarks/models 0.65-0.91x the CPU at 0.91-1.07x the wall time.  That was with
# OpenBLAS's idle threads spinning ~0.1 s after each threaded call; since they spin ~5 us
# (_SPIN_LOG2) the bound is 1.5e-4: an LSTM cell's products (lstm_static: [128,156]x
# [156,512] and its gradient [128,512]x[156,512]^T, 150-270 us on one thread, 55 a step)
# were small at 3e-4 and never tried on two threads, which take them 0.6-0.7x the time
# (issue 21: figures in the commit that set it).  Since a product granted two threads
# runs as blocks on numba's pool, whose threads spin ~1 ms between regions
# (ops/jit_threads.py), and the one-thread calls run on MKL's or oneDNN's gemm, the
# bound is 3e-5: on the 2-vCPU Xeon (2026-12-04) the GAN tutorial's batch-32 products
# took 61-81 us on one thread, 31-52 on the pool's two ([32,784]x[784,256] 61 against
# 31), and an LSTM cell's [128,156]x[156,512] ~100 us on MKL's one thread: all small at
# 1.5e-4, never tried on two.  The models' steps (`ab_env.py`, 3 rounds, against 150):
# gan_b32 0.89x, autoencoder 0.91x, lstm_static 0.91-0.94x, bilstm 0.95x, lstm_dynamic
# 0.98x, cnn 0.98x, the others 0.99-1.01x, at up to 28% more CPU (the LSTMs'); 60 read
# as 30 within noise.  ASYNCFLOW_BLAS_SMALL_US sets it (A/B).
_SMALL_S = float(os.environ.get("ASYNCFLOW_BLAS_SMALL_US") or 30) * 1e-6
_clock = time.perf_counter


# Run-to-run identical results (TF's TF_DETERMINISTIC_OPS=1): OpenBLAS on several
# threads does not always give one thread's bits (0.3.31: a [128,784]x[784,512] float32
# product differs in the last bits; K=512 and K=128 ones did not), and `call` chooses
# the thread count by measured time, so a model's loss could differ in its last digits
# between runs (the VAE of benchmarks/models over 75 steps: 547.35-548.13 in six runs).
# With the flag every BLAS call runs on one thread, and large products are not split
# into blocks (ops/blas.py: on some CPUs' kernels a block's bits are not one call's, and
# the number of blocks follows the load).  The same VAE then printed 547.9564819335938
# in every run.
_deterministic = os.environ.get("TF_DETERMINISTIC_OPS", "").lower() in ("1", "true")


def set_deterministic(enabled: bool) -> None:
    """Every BLAS call on one thread from now on (True) or by measured choice (False)."""
    global _deterministic
    _deterministic = bool(enabled)


def deterministic() -> bool:
    return _deterministic


def _median(samples: list) -> float:
    return sorted(samples)[(len(samples) - 1) // 2]


def call(fn, args):
    """`fn(*args)` as one kernel's heavy work: counted against the budget while it runs,
    its BLAS calls on one thread or on as many as the budget allows now, whichever
    this kind of call measured faster."""
    global _active
    with _lock:
        _active += 1
        active = _active
    try:
        if _set_blas_local is None:
            return fn(*args)
        # The kind: the function and its array arguments' shapes (inline: a helper's
        # call costs ~0.1 us more, a comprehension more again).
        key = [fn]
        for a in args:
            if type(a) is np.ndarray:
                key.append(a.shape)
        key = tuple(key)
        stats = _kinds.get(key)
        if stats is not None and stats[3]:
            # Small (most of a step's calls): one thread, unmeasured, whatever the cap,
            # measured again once every _EXPLORE calls.  Nothing else to look at.
            stats[2] += 1
            if stats[2] % _EXPLORE:
                if _blas_now != 1:
                    _blas_threads(1)
                return fn(*args)
        cap = 1 if _deterministic else min(_budget - (active - 1), _CORES - _side)
        if cap <= 1:
            if _blas_now != 1:
                _blas_threads(1)
            return fn(*args)
        if stats is None:
            if len(_kinds) >= _MAX_KINDS:
                _kinds.clear()
            stats = _kinds[key] = [[], [], 1, False]
        elif not stats[3]:
            stats[2] += 1
        one, many = stats[0], stats[1]
        free = threads_now(active) > 1
        if not free:
            # Another process runs on the core the second thread would take: two
            # threads would spin and wait for it a scheduler slice (measured beside a
            # busy process: 10-20x the CPU time, 5-50x the wall time of one thread).
            wide = False
        elif len(one) < 2 or len(many) < 2:  # first tries, both ways
            wide = len(many) < 2
        else:
            wide = _median(many) < _median(one)
            # Try the other way afresh now and then (its old times are stale); sooner
            # when one thread won, as the cores are free now.
            every = _EXPLORE if wide or stats[2] % 8 else 8
            if stats[2] % every == 0:
                wide = not wide
                (many if wide else one).clear()
        _blas_threads(cap if wide else 1)
        t0 = _clock()
        result = fn(*args)
        samples = many if wide else one
        samples.append(_clock() - t0)
        if len(samples) > 3:
            del samples[0]
        stats[3] = len(one) >= 2 and _median(one) < _SMALL_S
        return result
    finally:
        with _lock:
            _active -= 1


def call_narrow(fn, args):
    """`fn(*args)` as cheap work run inline on an event loop: counted against the
    budget, its BLAS calls on one thread.  Work that short gains little from more, and
    a two-thread call waits a whole scheduler slice when its partner thread is not
    running (another process holds the core): the loop would stall for it."""
    if _blas_now != 1 and _set_blas_local is not None:
        _blas_threads(1)
    return call_without_blas(fn, args)


def call_without_blas(fn, args):
    """`fn(*args)` for work that makes no BLAS call (a compiled element-wise loop):
    counted against the budget while it runs, BLAS's thread count left as it is (no
    choice to measure, nothing to set: `call`'s choice and `call_narrow`'s setting
    cost a fused program's call 5-20 us in a step, ~1 ms of an LSTM's)."""
    global _active
    with _lock:
        _active += 1
    try:
        return fn(*args)
    finally:
        with _lock:
            _active -= 1


# -- side lanes: a second kernel beside the one the step's driver runs -----------------
#
# A step's interpreter runs one kernel at a time on its thread.  When other nodes are
# ready and a core is free, the CPU device may run one heavy kernel on a worker beside
# it (devices/cpu.py, `CPUDevice.compute`): TF's inter-op parallelism.  The lane holds a
# core of the budget from the moment it is granted (`reserve_side`, on the driver's
# thread, before the worker picks the call up) until the call has ended or was
# cancelled unstarted (`release_side`), so neither its own BLAS call nor the driver's
# (`call`, `threads_now`, `threads_shared`: the cores less the lanes) takes a second
# thread meanwhile: two kernels on two cores, one BLAS thread each, never three threads.


def side_free() -> bool:
    """Whether a side lane may start now: none running, none of our threads computing
    (the driver asks between its calls: another thread's kernel would make three),
    a budget of two cores or more, and two cores free of other processes' runnable
    threads (beside a busy process a lane would wait for its core: one lane, as
    before)."""
    if _side or _active or min(_budget, _CORES) < 2:
        return False
    return _CORES - _sample_competing() >= 2


def reserve_side() -> None:
    """Hold a core for a side lane (see above); `release_side` gives it back."""
    global _side
    with _lock:
        _side += 1
    if _blas_now != 1 and _set_blas_local is not None:
        _blas_threads(1)  # (process-wide: the driver's next call narrows too)


def release_side() -> None:
    global _side
    with _lock:
        _side -= 1


# -- parallel_for: the caller and helpers share blocks ----------------------------------


class _Job:
    __slots__ = ("fn", "blocks", "next", "done", "error", "cond")

    def __init__(self, fn, blocks):
        self.fn = fn
        self.blocks = blocks
        self.next = itertools.count()  # next() is atomic under the GIL
        self.done = 0
        self.error = None
        self.cond = threading.Condition(threading.Lock())

    def work(self) -> None:
        """Take blocks until none are left (any thread)."""
        blocks = self.blocks
        while True:
            i = next(self.next)
            if i >= len(blocks):
                return
            try:
                if self.error is None:
                    self.fn(*blocks[i])
            except BaseException as exc:  # re-raised by the caller
                self.error = exc
            with self.cond:
                self.done += 1
                if self.done == len(blocks):
                    self.cond.notify_all()

    def wait(self) -> None:
        with self.cond:
            while self.done < len(self.blocks):
                self.cond.wait()


_helpers: list[threading.Thread] = []
_queue: list = []
_queue_cond = threading.Condition(threading.Lock())

# Helpers woken off the caller's CPU.  A helper woken by the caller is put by Linux's
# wake-up on the waker's CPU about half the time, where it waits behind the caller's own
# block until the balancer moves it (ms): a split product then took 1.10-1.26x one
# thread's time, against 0.81x with the helper on the other core (issue 21, lstm_static's
# cell products).  So the caller, before it wakes them, allows the helpers every CPU of
# the process but the one it runs on (`sched_getcpu`, a vDSO call), and a helper allows
# itself every CPU again once it runs (a syscall each, ~2-4 us a job): kept pinned, a
# helper preempted by another process on its core could not move to the caller's while
# the caller sat waiting for its block (lstm_static's summed products: 0.93x as fast
# pinned).  ASYNCFLOW_HELPER_AFFINITY=0: no affinity calls.
_helper_tids: list[int] = []


def _cpu_getter():
    if not hasattr(os, "sched_setaffinity") or os.environ.get(
        "ASYNCFLOW_HELPER_AFFINITY", ""
    ) not in ("", "1"):
        return None
    try:
        fn = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_int, []
    return fn


_getcpu = _cpu_getter()
# The CPUs the helpers may run on: the caller's own affinity at its latest offer (the
# program, or a tf.data worker process's `avoid`, may have narrowed the process's).
_cpus = frozenset(os.sched_getaffinity(0)) if _getcpu is not None else frozenset()


def _keep_helpers_off(cpu: int) -> None:
    """Allow the helpers every CPU the caller may use but `cpu` (called with
    _queue_cond held)."""
    global _cpus
    try:
        _cpus = frozenset(os.sched_getaffinity(0))
    except OSError:
        return
    if cpu not in _cpus or len(_cpus) < 2:
        return
    mask = _cpus - {cpu}
    for tid in _helper_tids:
        try:
            os.sched_setaffinity(tid, mask)
        except OSError:  # (not allowed here: leave them where they are)
            return


def _helper_main() -> None:
    global _active
    denormal.flush_this_thread()  # (it runs kernels' blocks only, as TF's threads)
    while True:
        with _queue_cond:
            while not _queue:
                _queue_cond.wait()
            job = _queue.pop()
        cpus = _cpus
        if _getcpu is not None and len(cpus) > 1:
            try:
                os.sched_setaffinity(0, cpus)  # running now: free to move again
            except OSError:
                pass
        with _lock:
            _active += 1
        try:
            job.work()
        finally:
            with _lock:
                _active -= 1


def _offer(job: _Job, n_helpers: int) -> None:
    with _queue_cond:
        while len(_helpers) < min(n_helpers, _CORES - 1):
            t = threading.Thread(target=_helper_main, name="asyncflow-intra-op", daemon=True)
            t.start()  # (returns once the thread runs: its native_id is known)
            _helpers.append(t)
            _helper_tids.append(t.native_id)
        if _getcpu is not None:
            _keep_helpers_off(_getcpu())
        _queue.extend([job] * n_helpers)
        _queue_cond.notify(n_helpers)


def parallel_for(
    n: int, fn, min_block: int = 1 << 16, threads: int | None = None, per_thread: int = 4
) -> None:
    """`fn(start, stop)` over blocks covering range(n), on up to `threads` threads
    (default `threads_now()`).

    Blocks hold at least `min_block` items, at most `per_thread` blocks per thread
    (more even out threads that start late; fewer cost less where each block pays a
    fixed price, a gemm its packing); with one thread allowed (or a small `n`),
    `fn(0, n)` runs on the caller alone.  The first error raised by a block is raised
    here once every started block has finished; blocks not started are skipped.
    """
    if n < 2 * min_block:
        threads = 1
    elif threads is None:
        threads = threads_now()
    if threads <= 1:
        fn(0, n)
        return
    n_blocks = min(per_thread * threads, max(n // min_block, 1))
    step = -(-n // n_blocks)
    blocks = [(s, min(s + step, n)) for s in range(0, n, step)]
    job = _Job(fn, blocks)
    _offer(job, threads - 1)
    job.work()
    job.wait()
    with _queue_cond:  # helpers that never came: their offers are stale now
        _queue[:] = [j for j in _queue if j is not job]
    if job.error is not None:
        raise job.error


def parallel_parts(count: int, fn, threads: int | None = None) -> None:
    """`fn(i)` for every i in range(count): parts of one kernel's work that the caller
    fixed (from sizes alone, so a result never depends on how many threads ran it: the
    same bits on one thread as on several, TF_DETERMINISTIC_OPS=1 included), shared
    dynamically by the caller and the budget's helpers (`parallel_for`), each part's
    BLAS calls on one thread.  `threads` defaults to `threads_blocks()`: parts are
    blocks a preempted helper holds at most one of.  Parts write disjoint outputs."""
    if threads is None:
        threads = threads_blocks() if count > 1 else 1
    threads = min(threads, count)
    if threads <= 1:
        if count > 1:  # (one BLAS thread for each part here too: the same bits)
            blas_single()
        for i in range(count):
            fn(i)
        return

    def run(start: int, stop: int) -> None:
        for i in range(start, stop):
            fn(i)

    blas_single()  # the parts share the cores, one BLAS thread each
    parallel_for(count, run, min_block=1, threads=threads, per_thread=count)
