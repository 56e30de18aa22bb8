#!/bin/sh
# The wire fuzzer for a minute (CI runs it for 2 s): random, truncated and oversized frames
# against an in-process task; passes if the task never crashes or hangs, keeps serving
# correct steps, and the process's peak RSS grows by less than 200 MB.
cd "$(dirname "$0")/../.." || exit 1
ASYNCFLOW_FUZZ_SECONDS="${1:-60}" exec .venv/bin/python -m pytest -p no:cacheprovider -q \
    tests/distributed/test_dist_fuzz.py -k random -o timeout=600
