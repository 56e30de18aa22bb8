"""devices.cpu.keep_freed_memory: a step's freed arrays keep their pages for the next."""

from __future__ import annotations

import platform
import resource

import numpy as np
import pytest

from asyncflow.devices import cpu


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_freed_arrays_are_reused_without_page_faults():
    assert cpu.keep_freed_memory() is True
    assert cpu.keep_freed_memory() is True  # once per process; the same answer again

    def touch():  # four 1 MiB arrays, freed together (4 MiB free at the heap's top)
        arrays = [np.empty(1 << 18, np.float32) for _ in range(4)]
        for a in arrays:
            a.fill(1.0)

    touch()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        touch()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    # Trimmed from the heap after each use (glibc's default), their pages fault in again:
    # ~20,000 faults, measured; kept, none.
    assert faults < 2000


def test_opt_out_leaves_malloc_alone(monkeypatch):
    monkeypatch.setattr(cpu, "_heap_kept", None)
    monkeypatch.setenv("ASYNCFLOW_KEEP_FREED_MEMORY", "0")
    assert cpu.keep_freed_memory() is False
