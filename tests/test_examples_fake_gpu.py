"""The examples run on a GPU device, as a TF1 program runs on a GPU machine: ops with a
GPU kernel on GPU:0 by default, queues and readers on the CPU.  The GPU is the CuPy
stand-in (ASYNCFLOW_FAKE_GPUS=1) unless this process finds a real one through CuPy
(`make test-gpu`).  Each runs as its own process, with short settings.  The `test`
extra includes the `examples` extra (scikit-learn, tqdm), so CI runs them all; a bare
install without it skips those that need it.
(examples/multi_gpu_train.py has its own test in test_gpu_device.py.)
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from asyncflow.devices import gpu

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(150)


def _run_example(name: str, *args: str) -> str:
    env = dict(os.environ)
    if os.environ.get("ASYNCFLOW_FAKE_GPUS", "0") == "0" and gpu.unavailable_reason():
        env["ASYNCFLOW_FAKE_GPUS"] = "1"
        env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=140,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_quickstart():
    out = _run_example("quickstart.py")
    assert "sync and async steps agree; both match NumPy." in out


def test_train_digits_mlp():
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    out = _run_example("train_digits.py", "--model", "mlp", "--epochs", "1")
    accuracy = float(out.split("test accuracy ")[1].split("%")[0])
    assert accuracy > 80


def test_char_rnn():
    pytest.importorskip("tqdm")
    out = _run_example(
        "char_rnn.py", "--epochs", "1", "--steps", "1", "--batch", "4", "--seq", "10",
        "--hidden", "16", "--sample", "10",
    )  # fmt: skip
    assert "---- sample ----" in out


def test_input_pipeline(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    out = _run_example("input_pipeline.py", "--epochs", "1", "--dir", str(tmp_path))
    assert float(out.split("test accuracy: ")[1].split()[0]) > 0.5
