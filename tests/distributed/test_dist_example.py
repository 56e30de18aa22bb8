"""examples/distributed_train.py, run as a user runs it: 1 ps (`python -m asyncflow.server`
from TF_CONFIG) and 2 worker processes train between-graph; worker 1 is SIGKILLed and
started again, rejoins the model the ps kept, and both finish; the loss falls."""

import pathlib
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(150)

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "distributed_train.py"


def test_distributed_train_example_survives_a_killed_worker():
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "1200", "--timeout", "120"],
        capture_output=True,
        text=True,
        timeout=140,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    log = out.stdout
    assert "[launcher] killed worker 1; starting it again" in log
    killed_at = log.index("killed worker 1")
    # The new worker 1 joined the model the ps kept: its first loss (before its own
    # steps; it may find the chief already done, when this machine is slow to start
    # processes) is far below the start.
    done = re.findall(r"worker 1 done: (\d+) steps, first loss ([\d.]+)", log[killed_at:])
    assert done
    start = float(re.search(r"worker 0 done: \d+ steps, first loss ([\d.]+)", log).group(1))
    assert float(done[0][1]) < start / 2
    first, last = map(float, re.search(r"loss ([\d.]+) -> ([\d.]+)", log).groups())
    assert last < first / 10
