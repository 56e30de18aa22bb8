"""Record TF 2.21's results for the session-29 TF1 programs (p_s29_*.py).

Run with a Python that has TensorFlow (never the project's venv), from outside the
worktree so that `import asyncflow` cannot mix in:

    cd /tmp && TF_USE_LEGACY_KERAS=1 /work/tfvenv/bin/python \
        <worktree>/tests/tf1_programs/record_s29.py [program names...]

Each program runs in a fresh tf.Graph with `tf = tensorflow.compat.v1` (v2 behaviour
disabled) and its result is written to tests/fixtures/tf1_programs_s29.json, which
tests/test_tf1_programs_s29_*.py compare asyncflow against.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
FIXTURE = TESTS / "fixtures" / "tf1_programs_s29.json"


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    sys.path.insert(0, str(TESTS))
    import tensorflow.compat.v1 as tf

    from tf1_programs import to_json
    from tf1_programs.p_s29 import PROGRAMS

    tf.disable_v2_behavior()
    only = set(sys.argv[1:])
    results = json.loads(FIXTURE.read_text()) if only and FIXTURE.exists() else {}
    for name, program in PROGRAMS.items():
        if only and name not in only:
            continue
        with tf.Graph().as_default():
            results[name] = to_json(program(tf))
        print(f"recorded {name}")
    results = {k: results[k] for k in PROGRAMS if k in results}
    meta = {"tensorflow": tf.__version__}
    FIXTURE.write_text(json.dumps({"_meta": meta, **results}, indent=1) + "\n")
    print(f"wrote {FIXTURE} ({len(results)} programs)")


if __name__ == "__main__":
    main()
