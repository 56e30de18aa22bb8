"""The on-disk cache of compiled programs and checks' verdicts (ops/jit_cache.py): where
it lives, when it is refused, what its files are named by, and that a second process
loads a fused program's loop from it instead of compiling it again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from asyncflow.ops import fused_elementwise_jit, jit_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache under tmp_path (the module's memo of its directory cleared).  The
    compiles earlier tests queued finish first: a compiling thread writes its program
    into whatever cache the module points at, this one too (a stray program file made
    test_oldest_programs_pruned prune one of its own)."""
    assert fused_elementwise_jit.wait(timeout=50)
    monkeypatch.setenv("ASYNCFLOW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ASYNCFLOW_JIT_CACHE", raising=False)
    monkeypatch.setattr(jit_cache, "_state", {})
    return tmp_path / "cache" / "jit"


def test_directory_is_private(cache):
    assert jit_cache.directory() == str(cache)
    assert (os.stat(cache).st_mode & 0o777) == 0o700


def test_off_by_environment(cache, monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_JIT_CACHE", "0")
    assert jit_cache.directory() is None
    assert jit_cache.load_source("def loop():\n    return 1\n", {}) is None
    assert jit_cache.read_verdict("f", jit_cache.__file__) is None


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX ownership")
def test_refused_when_others_may_write(cache):
    os.makedirs(cache, mode=0o700)
    os.chmod(cache, 0o777)  # (code loaded from here would run in this process)
    assert jit_cache.directory() is None


def test_source_module_named_by_digest(cache):
    source = "def loop(x):\n    return x * k\n"
    first = jit_cache.load_source(source, {"k": 3})
    assert first.loop(2) == 6  # (the namespace's names are the module's globals)
    files = [f for f in os.listdir(cache) if f.endswith(".py")]
    assert len(files) == 1
    stamp = os.stat(cache / files[0]).st_mtime_ns
    again = jit_cache.load_source(source, {"k": 5})
    assert again.loop(2) == 10
    # The file is not written again (numba's index keys on its time stamp).
    assert os.stat(cache / files[0]).st_mtime_ns == stamp
    jit_cache.load_source(source.replace("*", "+"), {"k": 1})
    assert len([f for f in os.listdir(cache) if f.endswith(".py")]) == 2


def test_oldest_programs_pruned(cache, monkeypatch):
    monkeypatch.setattr(jit_cache, "MAX_PROGRAMS", 4)
    stems = []
    for k in range(6):
        module = jit_cache.load_source(f"def loop():\n    return {k}\n", {})
        stem = module.__file__.rsplit(os.sep, 1)[1][:-3]
        os.utime(module.__file__, (1000 + k, 1000 + k))  # (written in this order)
        os.makedirs(cache / "__pycache__", exist_ok=True)
        (cache / "__pycache__" / f"{stem}.loop-1.py311.nbi").write_bytes(b"index")
        stems.append(stem)
    (cache / f"verdict__exp32_{'0' * 32}").write_text("ok")  # (not a program: kept)
    monkeypatch.setattr(jit_cache, "_state", {})  # (a new process opens the cache)
    assert jit_cache.directory() == str(cache)
    left = sorted(f[:-3] for f in os.listdir(cache) if f.endswith(".py"))
    assert left == sorted(stems[4:])  # 6 > 4: the oldest down to half of 4 removed
    # (numba's files and, where Python writes bytecode, the module's .pyc: by stem)
    compiled = sorted({f.split(".", 1)[0] for f in os.listdir(cache / "__pycache__")})
    assert compiled == sorted(stems[4:])
    assert (cache / f"verdict__exp32_{'0' * 32}").exists()


def test_partial_file_written_again(cache):
    source = "def loop(x):\n    return x + 1\n"
    jit_cache.load_source(source, {})
    (name,) = [f for f in os.listdir(cache) if f.endswith(".py")]
    (cache / name).write_text(source[:10])  # (as a writer cut short would leave it)
    assert jit_cache.load_source(source, {}).loop(1) == 2
    assert (cache / name).read_text() == source


def test_verdict_round_trip(cache, tmp_path):
    pytest.importorskip("llvmlite")
    module = tmp_path / "fn.py"
    module.write_text("A = 1\n")
    assert jit_cache.read_verdict("_f32", str(module)) is None
    jit_cache.write_verdict("_f32", str(module), True)
    assert jit_cache.read_verdict("_f32", str(module)) is True
    jit_cache.write_verdict("_g32", str(module), False)
    assert jit_cache.read_verdict("_g32", str(module)) is False
    module.write_text("A = 2\n")  # (another function: its own check)
    assert jit_cache.read_verdict("_f32", str(module)) is None


_CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import asyncflow as af
    from asyncflow.ops import fused_elementwise_exp, fused_elementwise_jit
    checked = []
    real = fused_elementwise_exp.matches_numpy
    def counting(*args):
        checked.append(1)
        return real(*args)
    fused_elementwise_exp.matches_numpy = counting
    x = np.linspace(-3, 3, 6144, dtype=np.float32).reshape(64, 96)
    with af.Graph().as_default(), af.device("/cpu:0"):  # (host arrays: compiled loops)
        p = af.placeholder(af.float32, x.shape)
        y = af.sigmoid(p * 2.0 + 1.0) * p
        with af.Session() as sess:
            sess.run(y, {p: x})
            assert fused_elementwise_jit.wait(timeout=100)
            got = sess.run(y, {p: x})
    loops = [f for f in fused_elementwise_jit._loops.values() if f is not None]
    hits = sum(sum(f.stats.cache_hits.values()) for f in loops)
    misses = sum(sum(f.stats.cache_misses.values()) for f in loops)
    want = (1 / (np.exp(-(x * 2 + 1)) + 1)) * x
    print(json.dumps({"loops": len(loops), "hits": hits, "misses": misses,
                      "checks": len(checked), "close": bool(np.allclose(got, want, rtol=1e-6))}))
    """
)


def test_second_process_loads_the_loop(tmp_path):
    pytest.importorskip("numba")
    env = dict(os.environ, ASYNCFLOW_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("ASYNCFLOW_JIT_CACHE", None)
    env.pop("ASYNCFLOW_NO_NUMBA", None)
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=200
        )
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["loops"] >= 1 and first["close"] and second["close"]
    assert first["misses"] >= 1 and first["hits"] == 0  # compiled, and saved
    assert first["checks"] == 1  # exp's check ran once, and its verdict was recorded
    assert second["hits"] >= 1 and second["misses"] == 0  # loaded, not compiled
    assert second["checks"] == 0  # the recorded verdict stood for the check


# -- the generated source's shape (check_generated, function_from_source) ---------------


@pytest.mark.parametrize(
    "source",
    [
        "import os\ndef loop():\n    pass\n",  # (anything but one def)
        "def loop(x):\n    return __import__('os')\n",
        "def loop(x):\n    return x.__class__\n",
        "def loop(x):\n    return np.load(x)\n",
        "def loop(x):\n    return open(x)\n",
        "def loop(x):\n    return 'x'\n",
        "def loop(x):\n    return [x]\n",
        "def loop(x):\n    return lambda: x\n",
        "def loop(x):\n    while x:\n        x = x - 1\n",
        "@np.vectorize\ndef loop(x):\n    return x\n",
        "def loop(x=open('f')):\n    return x\n",
        "def loop(x):\n    return range(x, step=1)\n",
        "def loop(x):\n    return x[0](1)\n",
    ],
)
def test_generated_source_held_to_its_shape(source, cache):
    with pytest.raises(ValueError, match="generated source"):
        jit_cache.check_generated(source)
    with pytest.raises(ValueError, match="generated source"):
        jit_cache.function_from_source(source, {"np": np})
    with pytest.raises(ValueError, match="generated source"):  # (nothing written either)
        jit_cache.load_source(source, {"np": np})
    assert not os.path.isdir(cache) or not [f for f in os.listdir(cache) if f.endswith(".py")]


def test_function_from_memory_runs_no_module_code():
    source = (
        "def loop(in0, out0, c0, one, zero):\n"
        "    for i in range(out0.size):\n"
        "        x0 = in0[i]\n"
        "        v0 = (one / np.sqrt(x0) if x0 > zero else -x0) * c0 + _tanh32(abs(x0))\n"
        "        out0[i] = v0\n"
    )
    fn = jit_cache.function_from_source(source, {"np": np, "_tanh32": np.tanh})
    x = np.array([4.0, -2.0, 0.0])
    out = np.empty(3)
    fn(x, out, 2.0, 1.0, 0.0)
    np.testing.assert_array_equal(out, [1.0 + np.tanh(4.0), 4.0 + np.tanh(2.0), 0.0])
    assert fn.__name__ == "loop" and fn.__globals__["np"] is np
    with pytest.raises(ValueError, match="defines other"):
        jit_cache.function_from_source(source.replace("def loop", "def other"), {"np": np})


def test_every_generated_loop_passes_the_check():
    """The planner's own sources: every one this process compiled so far (whatever
    forms the tests before it made), and each op template inside a flat loop.  (The
    nine model benchmarks' 33 programs, every form among them, were checked by hand
    with ASYNCFLOW_JIT_CACHE=0 when the check landed.)"""
    sources = [key[0] for key in list(fused_elementwise_jit._loops)]
    sources += [key[0] for key in list(fused_elementwise_jit._pending)]
    for expr in (
        list(fused_elementwise_jit._EXPRESSIONS.values())
        + list(fused_elementwise_jit._INLINE32.values())
        + [e for e, _ in fused_elementwise_jit._POW_FORMS.values()]
        + [fused_elementwise_jit._POW]
    ):
        body = expr.format("x0", "x1", "x2")
        sources.append(
            "def loop(in0, in1, in2, out0, one, zero):\n"
            "    for i in range(out0.size):\n"
            "        x0 = in0[i]\n        x1 = in1[i]\n        x2 = in2[i]\n"
            f"        v0 = {body}\n        out0[i] = v0\n"
        )
    for source in sources:
        jit_cache.check_generated(source)
