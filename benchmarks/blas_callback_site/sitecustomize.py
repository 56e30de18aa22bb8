"""Installs benchmarks/blas_callback_probe.py at interpreter start (PYTHONPATH=this folder)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import blas_callback_probe  # noqa: E402

blas_callback_probe.install()
