"""An on-disk cache for the loops compiled from generated source, and for checks' verdicts.

The fused element-wise programs (ops/fused_elementwise_jit.py) are Python source made at
plan time and compiled by numba, ~0.4 s a program; the inline float32 functions they call
(exp, log1p, tanh) are each checked against NumPy's bits first, ~0.5-1 s each.  Without a
cache every process pays all of it again: measured on the 2-core project machine, the
VAE of benchmarks/models 8.2 s of compiles (13 programs and the checks) on background
threads, which take the second core and the GIL from its first ~140 steps (40-90 ms a
step instead of 11).  numba caches a compiled function only when it has a source file,
so a program's source is written to a file of this cache, named by the digest of the
source and of everything else its compiled code depends on (`fingerprint`: the inline
functions' modules, numba's, llvmlite's and NumPy's versions), imported from there and
compiled with numba's `cache=True`; the next process loads it (~10 ms).  A check's
verdict is a one-word file named by the digest of the checked function's module, the
versions and this CPU (NumPy's SIMD paths follow its features).

Where: $ASYNCFLOW_CACHE_DIR, else $XDG_CACHE_HOME/asyncflow, else ~/.cache/asyncflow;
`ASYNCFLOW_JIT_CACHE=0` turns the cache off (everything compiles in memory, as before).
What is loaded from it runs in this process, so the directory is used only when it is
this user's and nobody else can write to it (made 0700; numba's index files are pickles,
which is numba's format, read only from there).  Any error reading or writing the cache
leaves the in-memory path in place: a cache never makes a program fail.  It holds at most
MAX_PROGRAMS programs: past that, a process opening it removes the oldest half.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import platform
import stat
import sys
import threading
import types

import numpy as np

from asyncflow import tf_logging
from asyncflow.ops import jit_fork

__all__ = [
    "MAX_PROGRAMS",
    "check_generated",
    "directory",
    "fingerprint",
    "function_from_source",
    "load_source",
    "read_verdict",
    "write_verdict",
]

_lock = threading.Lock()
_state: dict = {}  # "dir": the usable directory or None; "fingerprint": str


def _new_lock(_mid_compile: bool) -> None:  # (a fork: the lock may have had an owner)
    global _lock
    _lock = threading.Lock()


jit_fork.at_fork_in_child(_new_lock)


def directory() -> str | None:
    """The cache's directory (created 0700), or None where caching is off or the
    directory is not safe to load code from."""
    with _lock:
        if "dir" not in _state:
            _state["dir"] = _open_directory()
        return _state["dir"]


def _open_directory() -> str | None:
    if os.environ.get("ASYNCFLOW_JIT_CACHE", "") == "0":
        return None
    root = os.environ.get("ASYNCFLOW_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "asyncflow",
    )
    path = os.path.join(root, "jit")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        for p in (root, path):
            st = os.stat(p)
            if not stat.S_ISDIR(st.st_mode):
                raise OSError(f"{p} is not a directory")
            if hasattr(os, "getuid") and st.st_uid != os.getuid():
                raise OSError(f"{p} belongs to another user")
            if st.st_mode & 0o022:
                raise OSError(f"{p} can be written by other users")
    except OSError as exc:
        tf_logging.warning("asyncflow: compiled loops are not cached on disk: %s", exc)
        return None
    _prune(path)
    return path


# Programs the cache keeps (~25 KiB each with numba's files): past this many, a process
# opening the cache removes the oldest half, by the time their source was written, with
# their compiled files; a program removed compiles again when a plan asks for it.
MAX_PROGRAMS = 2048


def _prune(path: str) -> None:
    try:
        programs = [
            (e.stat().st_mtime, e.name[:-3])
            for e in os.scandir(path)
            if e.name.startswith("program_") and e.name.endswith(".py")
        ]
        if len(programs) <= MAX_PROGRAMS:
            return
        programs.sort()
        doomed = {stem for _, stem in programs[: len(programs) - MAX_PROGRAMS // 2]}
        for stem in doomed:
            os.unlink(os.path.join(path, stem + ".py"))
        compiled = os.path.join(path, "__pycache__")
        if os.path.isdir(compiled):
            for e in os.scandir(compiled):  # (numba's <stem>.<function>-<line>.py311.*)
                if e.name.split(".", 1)[0] in doomed:
                    os.unlink(e.path)
    except OSError:
        pass  # (another process pruning at the same time, or a file in use: next time)


def fingerprint() -> str:
    """What compiled code and checks' verdicts depend on besides their own source: the
    versions of numba, llvmlite, NumPy and Python, the module that compiles the programs
    (its flags) and the inline functions' modules (a program's loop compiles their code
    into its own)."""
    with _lock:
        if "fingerprint" not in _state:
            import importlib.metadata  # (~60 ms at import; only the first compile reads it)

            parts = [sys.version, np.__version__, platform.machine()]
            for name in ("numba", "llvmlite"):
                try:
                    version = importlib.metadata.version(name)
                except importlib.metadata.PackageNotFoundError:
                    version = "-"
                parts.append(f"{name} {version}")
            here = os.path.dirname(os.path.abspath(__file__))
            for name in (
                "fused_elementwise_jit.py",  # (the flags it compiles programs with)
                "fused_elementwise_exp.py",
                "fused_elementwise_log.py",
                "fused_elementwise_log1p.py",
                "fused_elementwise_tanh.py",
                "fused_elementwise_sigmoid.py",
                "fused_elementwise_softplus.py",
                "elementwise.py",
            ):
                parts.append(_file_digest(os.path.join(here, name)))
            _state["fingerprint"] = "\n".join(parts)
        return _state["fingerprint"]


def _file_digest(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return "missing " + path


def _digest(*texts: str) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def load_source(source: str, namespace: dict, tag: str = "program"):
    """A module made from `source` with the names of `namespace` as globals, from a
    file of the cache (written once, named by the source's digest and `fingerprint()`),
    so that numba may cache what it compiles from it; None where there is no usable
    cache (the caller compiles from memory)."""
    path = directory()
    if path is None:
        return None
    check_generated(source)  # (ValueError: the caller's compile fails, NumPy's form runs)
    name = f"{tag}_{_digest(source, fingerprint())}"
    filename = os.path.join(path, name + ".py")
    try:
        if not _same_text(filename, source):
            tmp = f"{filename}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(source)
            os.replace(tmp, filename)  # (whole or not at all, for a racing process)
        module_name = f"_asyncflow_jit_{name}"
        spec = importlib.util.spec_from_file_location(module_name, filename)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        module.__dict__.update(namespace)
        spec.loader.exec_module(module)
        # Importable by name, as numba's cache needs to rebuild what the loop refers to.
        sys.modules[module_name] = module
        return module
    except (OSError, SyntaxError, ImportError) as exc:
        tf_logging.warning("asyncflow: the compiled-loop cache could not be used: %r", exc)
        return None


# -- generated source, checked -----------------------------------------------------------
#
# The loops' source is made by the fused programs' planner from fixed templates and
# integer indices (fused_elementwise_jit._source): no user text goes into it.  Before it
# is compiled (from a file of the cache or from memory) `check_generated` holds it to
# that shape, so that a planner bug that let a node's name or an attribute's string in
# could never run it as code: one `def` of plain arithmetic on local names, loops over
# `range`, subscripts and slices, arrays' `size`, number literals, and calls of the few
# functions the templates use.  It costs ~0.1 ms a program, once per compile.

_NODES = (
    ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.For, ast.Assign, ast.Return,
    ast.Expr, ast.Name, ast.Load, ast.Store, ast.Constant, ast.BinOp, ast.UnaryOp,
    ast.Compare, ast.IfExp, ast.Call, ast.Attribute, ast.Subscript, ast.Slice,
    ast.operator, ast.unaryop, ast.cmpop,
)  # fmt: skip
_CALLS = frozenset(
    ["range", "abs", "_exp32", "_log32", "_log1p32", "_tanh32", "_sigmoid32", "_softplus32"]
)
_NP = ("sqrt",)  # np.<name>


def check_generated(source: str) -> ast.Module:
    """The parsed `source` where it has the generated loops' shape (see above); else
    ValueError, naming what it holds."""
    tree = ast.parse(source, "<generated loop>")
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        raise ValueError("generated source: not one function definition")
    fn = tree.body[0]
    if fn.decorator_list or fn.returns or fn.args.defaults or fn.args.kw_defaults:
        raise ValueError("generated source: a decorated or annotated function")
    for node in ast.walk(fn):
        if not isinstance(node, _NODES):
            raise ValueError(f"generated source: a {type(node).__name__} node")
        if isinstance(node, ast.Name) and node.id.startswith("__"):
            raise ValueError(f"generated source: the name {node.id}")
        if isinstance(node, ast.Constant) and type(node.value) not in (int, float):
            raise ValueError(f"generated source: the constant {node.value!r}")
        if isinstance(node, ast.Attribute):  # np.sqrt, or an array parameter's size
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner is None or node.attr not in (_NP if owner == "np" else ("size",)):
                raise ValueError(f"generated source: the attribute {ast.unparse(node)}")
        if isinstance(node, ast.Call):
            callee = node.func
            if node.keywords or not (
                (isinstance(callee, ast.Attribute) and callee.attr in _NP)
                or (isinstance(callee, ast.Name) and callee.id in _CALLS)
            ):
                raise ValueError(f"generated source: a call of {ast.unparse(callee)}")
    return tree


def function_from_source(source: str, namespace: dict, name: str = "loop"):
    """The function `name` that the checked generated `source` defines, with the names
    of `namespace` as its globals: compiled from memory, without running the module
    (the source is one `def`: its code object is the function's body)."""
    tree = check_generated(source)
    if tree.body[0].name != name:
        raise ValueError(f"generated source: defines {tree.body[0].name}, not {name}")
    code = compile(tree, "<fused element-wise program>", "exec")
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == name:
            return types.FunctionType(const, namespace, name)
    raise ValueError(f"generated source: no function {name}")  # (cannot happen: checked)


def _same_text(filename: str, source: str) -> bool:
    """Whether `filename` holds exactly `source` (a file of another process's partial
    write, or changed by hand, is written again)."""
    try:
        with open(filename, encoding="utf-8") as f:
            return f.read(len(source) + 1) == source
    except (OSError, UnicodeDecodeError):
        return False


def _verdict_file(name: str, module_file: str) -> str | None:
    path = directory()
    if path is None:
        return None
    try:
        import llvmlite.binding as llvm  # (numba's own dependency: present with numba)

        cpu = llvm.get_host_cpu_name() + " " + llvm.get_host_cpu_features().flatten()
    except Exception:  # no llvmlite: nothing was compiled, nothing to remember
        return None
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # (NumPy < 2)
        features = {}
    simd = ",".join(sorted(k for k, v in features.items() if v))
    key = _digest(name, _file_digest(module_file), fingerprint(), cpu, simd)
    return os.path.join(path, f"verdict_{name}_{key}")


def read_verdict(name: str, module_file: str) -> bool | None:
    """The verdict of check `name` (of the function in `module_file`) recorded on this
    machine with these versions, or None if none was."""
    filename = _verdict_file(name, module_file)
    if filename is None:
        return None
    try:
        with open(filename, encoding="ascii") as f:
            word = f.read(8).strip()
    except (OSError, UnicodeDecodeError):
        return None
    return {"ok": True, "fail": False}.get(word)


def write_verdict(name: str, module_file: str, ok: bool) -> None:
    filename = _verdict_file(name, module_file)
    if filename is None:
        return
    try:
        tmp = f"{filename}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write("ok" if ok else "fail")
        os.replace(tmp, filename)
    except OSError:
        pass  # (the check runs again next time)
