"""The same TF1 programs give the same numbers, names, shapes and error classes as TF.

tests/tf1_programs/ holds small programs written against tf.compat.v1 names; each one is
run here with `tf = asyncflow` in a fresh graph and compared with what TensorFlow printed
for the same source (tests/fixtures/tf1_programs.json, written by
tests/tf1_programs/record.py; TensorFlow is not needed to run this test).

Floats compare to a relative tolerance (float32: 1e-6, float64: 1e-12, float16: 1e-3);
everything else — ints, bools, strings, names, shapes, dtypes, error class names — exactly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from tf1_programs import PROGRAMS, to_json

import asyncflow as af

FIXTURE = Path(__file__).parent / "fixtures" / "tf1_programs.json"
EXPECTED = json.loads(FIXTURE.read_text())

_RTOL = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-12}
_ATOL = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-7, "float64": 1e-15}

# Known differences from TF: each names the asyncflow code responsible (see the report).
XFAIL: dict[str, str] = {}


def _close(want, got, rtol: float, atol: float) -> bool:
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(want) == len(got)
            and all(_close(w, g, rtol, atol) for w, g in zip(want, got, strict=True))
        )
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        if math.isnan(want):
            return math.isnan(got)
        return math.isclose(want, got, rel_tol=rtol, abs_tol=atol)
    return want == got and type(want) is type(got)


def _diff(want, got, path: str = "") -> list[str]:
    """Human-readable differences between an expected and an actual converted result."""
    if isinstance(want, dict) and isinstance(got, dict):
        if set(want) == {"dtype", "shape", "value"} and set(got) == set(want):
            if want["dtype"] != got["dtype"] or want["shape"] != got["shape"]:
                w, g = f"{want['dtype']}{want['shape']}", f"{got['dtype']}{got['shape']}"
                return [f"{path}: want {w}, got {g}"]
            rtol, atol = _RTOL.get(want["dtype"], 0.0), _ATOL.get(want["dtype"], 0.0)
            if not _close(want["value"], got["value"], rtol, atol):
                return [f"{path}: want {want['value']!r}, got {got['value']!r}"]
            return []
        if set(want) != set(got):
            return [f"{path}: want keys {sorted(want)}, got {sorted(got)}"]
        return [d for k in want for d in _diff(want[k], got[k], f"{path}.{k}")]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [
            d
            for i, (w, g) in enumerate(zip(want, got, strict=True))
            for d in _diff(w, g, f"{path}[{i}]")
        ]
    if want != got or type(want) is not type(got):
        return [f"{path}: want {want!r}, got {got!r}"]
    return []


def _params():
    for name in PROGRAMS:
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[name])] if name in XFAIL else []
        yield pytest.param(name, id=name, marks=marks)


def test_every_program_is_recorded():
    assert sorted(PROGRAMS) == sorted(k for k in EXPECTED if not k.startswith("_"))


@pytest.mark.parametrize("name", list(_params()))
def test_program_matches_tf(name):
    assert name in EXPECTED, f"{name} not recorded: run tests/tf1_programs/record.py"
    g = af.Graph()
    with g.as_default():
        got = to_json(PROGRAMS[name](af))
    diffs = _diff(EXPECTED[name], got)
    assert not diffs, "\n".join(diffs)
