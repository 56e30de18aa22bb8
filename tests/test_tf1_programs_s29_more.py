"""The session-29 TF1 programs of tests/tf1_programs/p_s29_more.py give TF 2.21's numbers,
names and shapes (tests/fixtures/tf1_programs_s29.json, recorded by
tests/tf1_programs/record_s29.py; TensorFlow is not needed here). Floats compare as in
test_tf1_compat (float32 to 1e-6 relative) unless a program lists a looser bound below."""

import pytest
from tf1_programs import to_json
from tf1_programs.p_s29 import MODULES
from tf1_programs.s29_compare import EXPECTED, diff

import asyncflow as af

_PROGRAMS = MODULES["more"].PROGRAMS


@pytest.mark.parametrize("program", _PROGRAMS, ids=[p.__name__ for p in _PROGRAMS])
def test_program_matches_tf(program):
    with af.Graph().as_default():
        got = to_json(program(af))
    diffs = diff(EXPECTED[program.__name__], got)
    assert not diffs, "\n".join(diffs)
