"""numba's threading layer as the pool that runs products granted several threads
(and, while two cores are free, pairs of small products and optimizer updates:
`free_threads`).

A step's kernels run one after another on its driver thread.  On the 2-core project
machine OpenBLAS's own helper thread splits a product and then sleeps after a ~5 us spin
(devices/cpu_budget.py `_SPIN_LOG2`), and a thread woken from sleep in this VM takes ~35
us to run (a Python Event's round trip: 77 us).  GNU OpenMP's threads (numba's `omp`
layer) spin between parallel regions instead.  Where numba's layer is GNU OpenMP's and
spins, a product the CPU budget gives two or more threads runs as that many blocks of
columns or rows in a `prange` (ops/blas.py), each block one gemm call of OpenBLAS on one
thread: one pool, with no second one (OpenBLAS's threads) fighting it for the core.
(TBB's layer, which numba prefers where the `tbb` package is installed, was not measured
here: the pool stays off with it, as with the workqueue layer.) A block's elements get
one whole one-thread call's bits where the CPU's kernels give them (the models' shapes
here did).

The element-wise programs between products on the same pool (their outer loop a
`prange`) were tried and not kept: an LSTM cell's forward program took 29-35 us on two
spinning threads against 55 on one, but lstm_static's step gained 5% in one A/B and
lost 8% in another, and lstm_seqlen's gained nothing at twice the CPU (a cost the
per-call times leave out, we think: the next kernel, on the driver's core, reads the
half its partner wrote; benchmarks/README.md).

How long the threads spin: GNU OpenMP's default, 300,000 rounds of its wait loop, kept
a thread spinning ~9.5 ms of CPU after every region here (a step's CPU time doubled).
The pool's first region (`launching`, where numba loads the layer and GNU OpenMP reads
its environment) runs with a GOMP_SPINCOUNT of about _SPIN_SECONDS of rounds: regions
a step makes within that of each other find the thread spinning.  A program's own
GOMP_SPINCOUNT or OMP_WAIT_POLICY stays, as does a GNU OpenMP that another library
loaded before.  Measured (`ab_inproc.py`, pool on against off, 5 rounds, with the
programs' parallel forms then still in, on a Skylake-like Xeon where 20,000 rounds
spun ~1.1 ms): the GAN 1.01x at 3,000 rounds, 1.10x at 10,000, 1.29x at the default;
lstm_static 1.14-1.16x at each.

A round is an atomic load and a `pause`, whose time differs severalfold between x86
cores, so the count is timed on this CPU (`_spin_count`, ops/jit_spin.py): on the
2-vCPU Xeon LLVM reads as Rocket Lake (2026-12-04) a round takes ~10.8 ns, and the
fixed 20,000 rounds spun only ~0.2-0.4 ms (a product on the pool's two threads took
118 us hot, 153 us after 0.4 ms of the caller's Python, as the helper slept).  There
GOMP_SPINCOUNT=80,000 (~0.9 ms) took the models' steps (`ab_env.py`, 3 rounds, against
20,000) to gan 0.91x, vae 0.92x, mlp 0.95x, autoencoder 0.98x, lstm_static 0.99x,
lstm_seqlen 0.98x, at 1-8% more CPU; 200,000 gained no more, and lstm_seqlen's CPU
grew 30%.  Where numba is not loaded yet when GNU OpenMP is (oneDNN's first
convolution), or off x86-64, the count stays _SPIN_FALLBACK.

`usable()` says whether the pool runs now: numba's layer known to spin (`note_layer`,
once a parallel function has run on a compile thread), a budget of two cores or more,
not in a forked child (GNU OpenMP's team does not survive a fork: a parallel region
there would wait for threads the child lacks), and not turned off
(ASYNCFLOW_JIT_POOL=0).  `threads(n)` gives numba the calling thread's count.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import threading

from asyncflow.devices import cpu_budget
from asyncflow.ops import jit_fork

__all__ = ["free_threads", "launching", "may_launch", "note_layer", "threads", "usable"]

_ENABLED = os.environ.get("ASYNCFLOW_JIT_POOL", "") in ("", "1")
_SPIN_SECONDS = 1e-3
_SPIN_FALLBACK = 20_000
_SPIN_BOUNDS = (5_000, 300_000)  # (a timing gone wrong stays between these)
_spin_memo: list = []  # [GOMP_SPINCOUNT timed on this CPU], once timed
_launch_lock = threading.Lock()
_spins: list = []  # [whether numba's threading layer spins], once known
_forked = [False]
_counts = threading.local()  # .n: the count numba was last given on this thread


@contextlib.contextmanager
def launching():
    """Around a parallel function's first call on a compile thread (see the module
    note): GNU OpenMP finds GOMP_SPINCOUNT=`_spin_count()` in the environment when numba
    loads it, unless the program set its own wait policy; the environment is restored
    after."""
    with _launch_lock:
        ours = "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ
        if ours:
            os.environ["GOMP_SPINCOUNT"] = str(_spin_count())
        try:
            yield
        finally:
            if ours:
                os.environ.pop("GOMP_SPINCOUNT", None)


def _spin_count() -> int:
    """GOMP_SPINCOUNT for a spin of about _SPIN_SECONDS here (see the module note):
    rounds timed on this CPU where numba is loaded on x86-64, once; else
    _SPIN_FALLBACK."""
    if _spin_memo:
        return _spin_memo[0]
    if "numba" not in sys.modules or platform.machine().lower() not in ("x86_64", "amd64"):
        return _SPIN_FALLBACK
    try:
        from asyncflow.ops import jit_spin

        per_round = jit_spin.seconds_per_round()
    except Exception:  # (numba could not compile the round: the fixed count)
        per_round = 0.0
    lo, hi = _SPIN_BOUNDS
    count = round(_SPIN_SECONDS / per_round) if per_round > 0 else _SPIN_FALLBACK
    _spin_memo.append(min(max(count, lo), hi))
    return _spin_memo[0]


def note_layer(numba) -> bool:
    """Record, after a parallel function ran, whether numba's threading layer is one
    whose threads spin between regions (GNU OpenMP's, not told to be passive);
    whether it is."""
    if not _spins:
        try:
            name = numba.threading_layer()
        except ValueError:  # (no parallel function ran yet)
            return False
        policy = os.environ.get("OMP_WAIT_POLICY", "").strip().lower()
        passive = policy == "passive" or os.environ.get("GOMP_SPINCOUNT", "").strip() == "0"
        _spins.append(name == "omp" and not passive)
    return _spins[0]


def may_launch() -> bool:
    """Whether parallel functions may be compiled and started here: the pool is on, the
    process is not a forked child, and it may use two cores or more."""
    return _ENABLED and not _forked[0] and min(cpu_budget.cores(), cpu_budget.budget()) > 1


def usable() -> bool:
    """Whether the pool may run work now (see the module note)."""
    return bool(_spins) and _spins[0] and may_launch()


def free_threads(most: int | None = None) -> int:
    """Threads the pool may take now for work the CPU budget granted none for (a pair
    of small products, an optimizer update): as many as `cpu_budget.threads_now()`
    finds free (none of our other threads computing, no other process on the run
    queue), at most `most`, with numba's count on this thread set to them; 1 where the
    pool may not run."""
    if not usable():
        return 1
    n = cpu_budget.threads_now()
    if most is not None:
        n = min(n, most)
    if n > 1:
        threads(n)
    return n


def threads(n: int) -> None:
    """Let the calling thread's parallel regions use `n` threads (numba is loaded:
    the pool's functions exist)."""
    if getattr(_counts, "n", 0) != n:
        numba = sys.modules["numba"]  # (imported by whoever compiled the pool's functions)
        numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
        _counts.n = n


def _in_child(mid_compile: bool) -> None:
    _forked[0] = True


jit_fork.at_fork_in_child(_in_child)
