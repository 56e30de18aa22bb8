"""Compiles of numba loops and os.fork: what a child forked mid-compile may do.

The compiled loops (ops/jit_loops.py, fused_updates, fused_elementwise_jit, cnn_jit)
compile on background threads.  A fork while one compiles (a server forking workers
after a warm-up, a fork-based data loader) leaves the child without that thread: its
compile never ends there, and numba's own compiler lock, which the parent's compiling
thread held, stays held in the child for good, so a compile the child started would
wait forever (and `warm()` with it).  Every compile of ours runs inside `compiling()`;
a child forked while one ran starts no compile (`may_start()` is False there): the
loops it has keep running, the others take their NumPy paths, with the same results.
The modules' hooks (`at_fork_in_child`) end the child's waits for the lost compiles at
once and renew their locks (one may have been held by a thread the child lacks).  A
child forked between compiles compiles as its parent would.
"""

from __future__ import annotations

import os
import threading

__all__ = ["at_fork_in_child", "compiling", "may_start"]

_compiling: dict[int, int] = {}  # ident of each of our threads inside a compile: depth
_forked_mid_compile = [False]
_child_hooks: list = []


class compiling:  # noqa: N801 - a context manager: `with compiling():`
    """Marks the calling thread as compiling while inside."""

    def __enter__(self):
        ident = threading.get_ident()
        _compiling[ident] = _compiling.get(ident, 0) + 1

    def __exit__(self, *exc):
        ident = threading.get_ident()
        depth = _compiling.get(ident, 1) - 1
        if depth:
            _compiling[ident] = depth
        else:
            _compiling.pop(ident, None)


def may_start() -> bool:
    """Whether a compile may start in this process: not in a child forked mid-compile
    (nor in that child's own children)."""
    return not _forked_mid_compile[0]


def at_fork_in_child(hook) -> None:
    """Run `hook(mid_compile)` in every forked child, before anything else of ours runs
    there; `mid_compile`: whether a compile of ours was running at the fork."""
    _child_hooks.append(hook)


def _after_fork_in_child() -> None:
    mid = bool(_compiling) or _forked_mid_compile[0]
    _forked_mid_compile[0] = mid
    _compiling.clear()
    for hook in _child_hooks:
        hook(mid)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
