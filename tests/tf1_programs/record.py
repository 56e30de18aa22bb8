"""Record the reference results of every TF1 program with TensorFlow itself.

Run with a Python that has TensorFlow (never the project's venv):

    /work/tfvenv/bin/python tests/tf1_programs/record.py

It runs each program of tf1_programs.PROGRAMS in a fresh tf.Graph with
`tf = tensorflow.compat.v1` and writes tests/fixtures/tf1_programs.json, which
tests/test_tf1_compat.py compares asyncflow against. Only this script imports TensorFlow.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
FIXTURE = TESTS / "fixtures" / "tf1_programs.json"


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, str(TESTS))
    import tensorflow.compat.v1 as tf

    from tf1_programs import PROGRAMS, to_json

    tf.disable_v2_behavior()  # TF1 semantics: RefVariables, Dimension, graph mode
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
    FIXTURE.write_text(json.dumps({"_meta": meta, **results}, indent=1, sort_keys=False) + "\n")
    print(f"wrote {FIXTURE} ({len(results)} programs)")


if __name__ == "__main__":
    main()
