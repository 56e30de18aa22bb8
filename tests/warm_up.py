"""Warm a fresh checkout's caches before the suite's workers start (`make test` runs it).

On a clean clone nothing is compiled yet, and each of the two pytest-xdist workers then
does the same work at the same time while it collects the ~18,000 tests: it rewrites the
asserts of the ~420 test modules and compiles them (~30 s of CPU), compiles the bytecode
of asyncflow's own modules, and compiles the CNN loops (ops/cnn_jit.py, ~5 s) that a test
module's graph asks for at import.  Done once here, split over two processes, the workers
find it all on disk and only load it.

What is written is what the workers would have written themselves, in the same places:
pytest's own rewritten pycs (its functions and file names: the same pytest reads them
and checks each against its source's hash), ordinary pycs (checked by mtime, as imports
do), and numba's cache files of the CNN loops.  A file already up to date is left as it
is, so on a warm checkout this takes ~1 s.  Nothing here is required: any failure leaves
a file for the workers to compile as before.

Usage: python tests/warm_up.py [processes]   (from the repository root)
"""

from __future__ import annotations

import compileall
import os
import sys
import time
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("asyncflow", "ops", "devices")


def _rewrite(paths: list[str]) -> int:
    """Pytest's rewritten pycs of the test modules `paths`; how many were written."""
    import importlib.util
    import types

    from _pytest.assertion import rewrite

    state = types.SimpleNamespace(trace=lambda *args: None)  # (what _write_pyc uses)
    written = 0
    for name in paths:
        fn = Path(name)
        pyc = rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
        try:
            with open(pyc, "rb") as f:
                head = f.read(16)
            if head[8:16] == importlib.util.source_hash(fn.read_bytes())[:8]:
                continue  # (up to date; pytest checks the magic number and flags too)
        except OSError:
            pass
        try:
            # config=None: the ini options' defaults (no assertion-pass hook), as here
            source_hash, co = rewrite._rewrite_test(fn, None)
            rewrite.try_makedirs(pyc.parent)
            written += rewrite._write_pyc(state, co, source_hash, pyc)
        except Exception:  # (a syntax error, say: pytest reports it when it collects)
            pass
    return written


def _compile(paths: list[str]) -> int:
    """Ordinary pycs of `paths` (each skipped where up to date); how many are ready."""
    return sum(bool(compileall.compile_file(p, quiet=2)) for p in paths)


def _numba() -> int:
    """The CNN loops, into numba's on-disk cache (beside ops/cnn_jit.py)."""
    os.environ.setdefault("ASYNCFLOW_CHECK_KERNELS", "1")  # (as tests/conftest.py)
    os.environ.setdefault("ASYNCFLOW_BLAS", "openblas")
    from asyncflow.ops import cnn_jit

    return int(cnn_jit.warm())


def _run(task):
    kind, arg = task
    return kind, (
        _numba() if kind == "numba" else _rewrite(arg) if kind == "rewrite" else _compile(arg)
    )


def tasks(chunk: int = 24) -> list:
    """The work in chunks: the numba compile first (the longest), then the test modules'
    rewrites and the ordinary modules' compiles, largest files first."""
    tests = ROOT / "tests"
    rewritten = [
        p for p in tests.rglob("*.py") if p.name.startswith("test_") or p.name == "conftest.py"
    ]
    plain = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    plain += [
        p
        for p in tests.rglob("*.py")
        if p not in rewritten
        and not (p.parent.name == "fixtures" and p.name.startswith("record_"))
    ]
    out: list = [("numba", None)]
    for kind, paths in (("rewrite", rewritten), ("compile", plain)):
        paths = sorted(
            (p for p in paths if "__pycache__" not in p.parts), key=lambda p: -p.stat().st_size
        )
        out += [
            (kind, [str(p) for p in paths[i : i + chunk]]) for i in range(0, len(paths), chunk)
        ]
    return out


def main(argv: list[str]) -> int:
    if sys.dont_write_bytecode:
        return 0  # (the workers will not read pycs either)
    processes = int(argv[1]) if len(argv) > 1 else 2
    start = time.perf_counter()
    done = {"numba": 0, "rewrite": 0, "compile": 0}
    # fork: the pool's processes start from this one, which has imported nothing heavy
    with get_context("fork").Pool(processes) as pool:
        for kind, n in pool.imap_unordered(_run, tasks()):
            done[kind] += n
    seconds = time.perf_counter() - start
    print(
        f"warm-up: {done['rewrite']} test modules rewritten, {done['compile']} modules' "
        f"bytecode ready, CNN loops {'ready' if done['numba'] else 'not ready'} ({seconds:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv))
