"""The layers (DESIGN.md "Layers", docs/ARCHITECTURE.md): lower never imports upper.

Walks every import of the project's modules, function-local ones included, and fails
on an import cycle or on a module importing one of a higher layer.  The layers, from
the bottom:

  core      errors, dtypes, shapes, device names, config, the file formats' codecs
  graph     the op registry, Graph/Operation/Tensor, GraphDef import/export
  kernel    the kernel API, resource containers, queue state, devices/
  ops       ops/: definitions, kernels, gradients, builders
  library   the Python API built from ops (variables, layers, losses, nn, rnn)
  autodiff  the gradient walk
  runtime   the step interpreter (executor, frames), rendezvous, workers
  compiler  placement, partition, lowering and the plan passes
  client    master, Session, device_lib
  programs  what is built on sessions: train/, saved_model/, serving/, data/, ...

A package's __init__ only re-exports (the facade `import asyncflow as tf`), so edges
from __init__ modules are not checked, as the shared import_cycles tool does.
"""

from __future__ import annotations

import ast
import functools
import pathlib

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = {"asyncflow": "asyncflow", "asyncflow.ops": "ops", "asyncflow.devices": "devices"}

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "core",
        (
            "errors",
            "dtypes",
            "tensor_shape",
            "device_spec",
            "config",
            "crc32c",
            "nest",
            "protos",
            "example_pb",
            "proto_wire",
            "example_json",
            "checkpoint_format",
            "checkpoint_v1",
            "python_io",
            "snapshot_format",
            "snapshot_format_v1",
            "lmdb_format",
            "tf_logging",
            "deprecation",  # (TF's deprecation notices, renamed arguments; imports tf_logging)
        ),
    ),
    (
        "graph",
        (
            "registry",
            "deadness",  # (an analysis of a partition's nodes, imports nothing)
            "graph",
            "function_library",
            "tf_export",
            "dataset_functions",
            "graph_io",
            "random_seed",
            "indexed_slices",
            "type_spec",
            "sparse_tensor",
            "dispatch",  # (tf.experimental.dispatch_for_*: the registry API wrappers consult)
            "ragged_methods",
            "ragged",
            "ragged_functions",
            "row_partition",
            "dynamic_ragged_shape",
            "ragged_broadcast",  # (test_dynamic_ragged_shape_s28)
            "raw_op_functions",  # (tf.raw_ops from the registry; ops add builders to it)
        ),
    ),
    # (batching: the Batcher of serving and of ops/batch_ops.py; errors and NumPy only)
    ("kernel", ("kernel_api", "resources", "queues", "devices", "batching")),
    ("ops", ("ops",)),
    (
        "library",
        (
            "partitioned_variables",
            "variables",
            "resource_variable",
            "var_scope",
            "initializers",
            "layers",
            "losses",
            "regularizers",
            "clip_ops",
            "custom_gradient",
            "template",
            "nn",
            "rnn",
            "rnn_cell",
            "rnn_bidirectional",
            "layer_classes",
            "layer_functions",
            "layer_functions_3d",
            "linalg",
            "linalg_extras",
            "linalg_operator_util",
            "linalg_operator",
            "linalg_operators_derived",
            "linalg_operators_diag",
            "linalg_operators_matrix",
            "linalg_operators_block",
            "linalg_operators_kronecker",
            "linalg_operators_fft",
            "linalg_tridiagonal",
            "linalg_dispatch",
            "lookup",
            "feature_column_kinds",  # (feature_column: programs; it reads files by gfile)
            "metrics",
            "metrics_at_k",
            "distribute.context",  # (the strategy context metrics ask about; graph only)
            "sets",
            "nn_composites",
            "nn_experimental",
            "math_composites",
            "math_composites_2",
            "sparse_composites",
            "framework_extras",
            "signal",
            "signal_mdct",
            "signal_fftnd",
            "nn_sparse_extras",
            "tf1_extras",
            "rnn_extras",
            "critical_section",
            "image",
            "image_ssim",
            "namespaces",
            "random_generator",
            "tf_function_export",
            "tf_function",
            "trackable",
            "composite_specs",
            "extension_type",
            "tf2_compat",
            "structured_tensor",  # (test_structured_tensor)
            "deprecated_endpoints",  # (test_structured_tensor: enable_strict_mode)
        ),
    ),
    ("autodiff", ("gradients", "control_flow_grad", "symbolic_gradient")),
    (
        "runtime",
        (
            "loop_slices",
            "executor",
            "straight_line",
            "frames",
            "rendezvous",
            "worker",
            "tracing",
            "distributed.cluster",
            "distributed.wire",
        ),
    ),
    (
        "compiler",
        (
            "placement",
            "partition",
            "donation",
            "graph_passes",
            "lowering",
            "debug_watch",
            "distributed.graph_codec",
            "distributed.client",  # (the cluster's Worker: task_functions reaches peers by it)
            "distributed.task_functions",
            "distributed.service",
        ),
    ),
    (
        "client",
        ("master", "partial_run", "session", "device_lib", "device_config", "distributed"),
    ),
]
PROGRAMS = len(LAYERS)  # everything else: train/, saved_model/, serving/, data/, ...


def _parse(source: str, filename: str = "<unknown>") -> ast.AST:
    """ast.parse, again if another thread's parse upset it: CPython 3.11's AST builder
    keeps its recursion depth in shared state, so a parse racing one on another thread
    (3.11's traceback formatting parses source lines; background tasks of earlier tests
    log exceptions) fails with "SystemError: AST constructor recursion depth mismatch"."""
    for _ in range(4):
        try:
            return ast.parse(source, filename)
        except SystemError:
            continue
    return ast.parse(source, filename)


def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for pkg, folder in PACKAGES.items():
        for f in (ROOT / folder).rglob("*.py"):
            rel = f.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            mods[".".join([pkg, *parts])] = f
    return mods


def _resolve(name: str, mods) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _imports_of(m: str, tree: ast.AST, mods) -> set[str]:
    """Module `m`'s imports (function-local ones too) among `mods`, from its syntax tree."""
    found: set[str] = set()
    pkg_parts = m.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(pkg_parts[: len(pkg_parts) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
        else:
            continue
        for t in targets:
            r = _resolve(t, mods)
            if r and r != m and r != "asyncflow":
                found.add(r)
    return found


def _uses_getrefcount(tree: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and n.attr == "getrefcount")
        or (isinstance(n, ast.alias) and n.name == "getrefcount")
        for n in ast.walk(tree)
    )


@functools.cache
def _scan() -> tuple[dict[str, set[str]], list[str]]:
    """The tree's import edges and the modules that call sys.getrefcount, from one parse
    of every module shared by this file's tests.  Each tree is dropped once read: kept,
    the ~650 trees' millions of objects made every garbage collection pass longer (the
    scan took 13 s; it takes about 3)."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    users = []
    for m, f in mods.items():
        tree = _parse(f.read_text(), str(f))
        if _uses_getrefcount(tree):
            users.append(str(f.relative_to(ROOT)))
        if f.name != "__init__.py":  # (a package's __init__ only re-exports)
            edges[m] = _imports_of(m, tree, mods)
    return edges, users


def layer_of(module: str) -> int:
    short = module.removeprefix("asyncflow.")
    for i, (_, names) in enumerate(LAYERS):
        for n in names:
            if short == n or short.startswith(n + "."):
                return i
    return PROGRAMS


def _cycles(edges) -> list[list[str]]:
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles(_scan()[0]) == []


def test_no_module_imports_a_higher_layer():
    names = [n for n, _ in LAYERS] + ["programs"]
    upward = [
        f"{m} ({names[layer_of(m)]}) imports {t} ({names[layer_of(t)]})"
        for m, targets in _scan()[0].items()
        for t in targets
        if layer_of(t) > layer_of(m)
    ]
    # A new module sits in the top layer until it is listed in LAYERS: list it where
    # it belongs (what it imports decides) when a lower module starts to import it.
    assert upward == []


def test_the_walk_sees_function_local_imports(tmp_path):
    # The check must not be fooled by an import hidden inside a function.
    src = "def f():\n    from asyncflow import session\n    return session\n"
    node = _parse(src)
    found = [n for n in ast.walk(node) if isinstance(n, ast.ImportFrom)]
    assert found and found[0].module == "asyncflow"
    assert layer_of("asyncflow.session") > layer_of("asyncflow.executor")


def test_no_reference_count_decisions():
    """Buffer forwarding and copy-on-write are decided from the graph and from leases,
    never from `sys.getrefcount` (correct only by one interpreter's counting)."""
    assert _scan()[1] == []
