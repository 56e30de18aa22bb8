"""The recorded results of the session-29 programs and the comparison the tests use
(the same rules as tests/test_tf1_compat.py: floats to a dtype's tolerance, everything
else exactly)."""

import json
from pathlib import Path

from test_tf1_compat import _diff

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "tf1_programs_s29.json"
EXPECTED = json.loads(FIXTURE.read_text())


def diff(want, got) -> list[str]:
    return _diff(want, got)
