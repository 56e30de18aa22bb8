"""The CPU budget counts the CPUs the process may run on (its affinity mask, as
`taskset -c 1` sets it), not the machine's: on a one-CPU mask every BLAS call of ours
takes one thread and no work is split (a second thread would only take turns with the
first)."""

import os
import subprocess
import sys

import pytest

_CHILD = """
import os
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # as `taskset -c N` would
import numpy as np
from asyncflow.devices import cpu_budget
cpu_budget._sample_competing = lambda: 0  # a free machine otherwise: nothing else decides
a = np.ones((256, 512), np.float32)
b = np.ones((512, 512), np.float32)
counts = set()
for _ in range(12):  # first tries of both ways, then the measured choice
    out = cpu_budget.call(np.matmul, (a, b))
    counts.add(cpu_budget._blas_now)
assert (out == 512).all()
print(cpu_budget._CORES, cpu_budget.budget(), cpu_budget.threads_now(),
      cpu_budget.threads_shared(), cpu_budget.threads_blocks(), sorted(counts))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity API")
@pytest.mark.timeout(120)
def test_a_one_cpu_mask_is_a_one_thread_budget():
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=100
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1", "1", "1", "1", "[1]"]


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity API")
def test_the_budget_is_the_mask_not_the_machine():
    from asyncflow.devices import cpu_budget

    assert cpu_budget._cores_allowed() == len(os.sched_getaffinity(0))



def test_devices_take_their_share_of_the_budgets_cpus(monkeypatch):
    """CPU devices split the CPUs the budget counts (the mask), not os.cpu_count()."""
    from asyncflow.config import ConfigProto
    from asyncflow.devices import cpu_budget, registry

    monkeypatch.setattr(cpu_budget, "_CORES", 6)  # as a 6-CPU mask would count
    devs = registry.create_devices(ConfigProto(device_count={"CPU": 2}))
    assert sorted(d.num_threads for d in devs if d.device_type == "CPU") == [3, 3]
