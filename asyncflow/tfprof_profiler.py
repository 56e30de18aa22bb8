"""TF1's `tf.profiler.Profiler` and `tf.profiler.advise` over asyncflow's tfprof views.

A Profiler holds a graph, an optional OpLogProto and the traced steps added to it
(`add_step(step, run_meta)`, RunMetadata from `RunOptions(trace_level=FULL_TRACE)`);
its profile_* methods are the views of asyncflow/tfprof.py, reading the step the
options' `step` names, or with -1 (the default) each node's average over the steps it
ran in, as TF's.

`advise` runs TF's checkers and returns an AdviceProto (checker name -> reports),
printing each checker's name and reports.  ExpensiveOperationChecker reports the three
op types that took longest (own cpu, accelerator and total time, and the share of all
time) and the three top-level name scopes whose subtrees took longest (their own
times), as TF 2.21 words them; TF's third report, from the code view's Python call
stacks, is not made (asyncflow records one user line per op, not the stack).
AcceleratorUtilizationChecker and OperationChecker look at accelerator streams and
ops placed on accelerators: asyncflow's CPU traces give them nothing to report, as
TF's CPU traces give TF's; their accelerator findings are not built.  JobChecker,
named in ALL_ADVICE, is not a checker of TF's open-source build and reports nothing
there, so it is left out of the result as TF leaves it out.
"""

from __future__ import annotations

import copy
import sys

from asyncflow import errors
from asyncflow.protos.tfprof_output_pb2 import AdviceProto
from asyncflow.tfprof import (
    _DEFAULTS,
    _fmt_time,
    _op_tree,
    _scope_tree,
    profile_graph,
)

__all__ = ["ALL_ADVICE", "AdviceProto", "Profiler", "advise"]

ALL_ADVICE = {
    "ExpensiveOperationChecker": {},
    "AcceleratorUtilizationChecker": {},
    "JobChecker": {},  # (not a checker of TF's open-source build)
    "OperationChecker": {},
}
_BUILT = ("AcceleratorUtilizationChecker", "ExpensiveOperationChecker", "OperationChecker")
_DEFAULT_ADVISE_OPTIONS = 0


class Profiler:
    """TF1's `tf.profiler.Profiler(graph=None, op_log=None)`."""

    def __init__(self, graph=None, op_log=None):
        from asyncflow import graph as ops

        self._graph = graph if graph is not None else ops.get_default_graph()
        self._op_log = op_log
        self._steps: dict[int, object] = {}

    def add_step(self, step, run_meta) -> None:
        """Adds the traced step `run_meta` as step number `step` (replacing one there).

        Raises:
          InvalidArgumentError: `run_meta` holds no trace (TF aborts the process).
        """
        stats = getattr(run_meta, "step_stats", None)
        if stats is None or not stats.dev_stats:
            raise errors.InvalidArgumentError(
                None, None, "Profiler.add_step: run_meta has no step_stats (run the step "
                "with RunOptions(trace_level=FULL_TRACE))"
            )  # fmt: skip
        self._steps[int(step)] = run_meta

    def _run_meta(self, options):
        step = int(options.get("step", -1))
        if step < 0:
            return [self._steps[k] for k in sorted(self._steps)] or None
        return self._steps.get(step)

    def _view(self, cmd, options):
        options = {**_DEFAULTS, **(options or {})}
        return profile_graph(self._graph, self._run_meta(options), cmd, options, self._op_log)

    def profile_name_scope(self, options):
        """The scope view (GraphNodeProto) under `options`."""
        return self._view("scope", options)

    def profile_operations(self, options):
        """The op view (MultiGraphNodeProto) under `options`."""
        return self._view("op", options)

    def profile_graph(self, options):
        """The graph view (GraphNodeProto) under `options`: each op under the first op
        that reads it (asyncflow/tfprof.py, `_graph_tree`)."""
        return self._view("graph", options)

    def profile_python(self, options):
        """The code view (MultiGraphNodeProto) under `options`: one level, the user's
        lines (asyncflow/tfprof.py, `_code_tree`)."""
        return self._view("code", options)

    def advise(self, options):
        """Runs the checkers named in `options` over the added steps; an AdviceProto."""
        return _advise(self._graph, self._run_meta({"step": -1}), options, self._op_log)


def _expensive_operations(graph, run_meta, op_log) -> list[str]:
    if run_meta is None:
        return []
    options = {**_DEFAULTS, "select": ["micros"], "order_by": "micros", "max_depth": 10000}
    root = _op_tree(graph, options, run_meta, op_log)
    whole = root.total_exec_micros
    lines = []
    for i, row in enumerate(root._rows[:3], 1):
        share = 100.0 * row.exec_micros / whole if whole else 0.0
        lines.append(
            f"top {i} operation type: {row.name}, cpu: {_fmt_time(row.cpu_exec_micros)}, "
            f"accelerator: {_fmt_time(row.accelerator_exec_micros)}, "
            f"total: {_fmt_time(row.exec_micros)} ({share:.2f}%)"
        )
    reports = ["\n".join(lines)] if lines else []
    scope = _scope_tree(graph, {**options, "max_depth": 2}, run_meta, op_log)
    # (TF ranks the top-level nodes by their subtrees' time and prints their own)
    top = sorted(scope.children, key=lambda n: -n.total_exec_micros)[:3]
    lines = [
        f"top {i} graph node: {n.name}, cpu: {_fmt_time(n.cpu_exec_micros)}, "
        f"accelerator: {_fmt_time(n.accelerator_exec_micros)}, "
        f"total: {_fmt_time(n.exec_micros)}"
        for i, n in enumerate(top, 1)
    ]
    if lines:
        reports.append("\n".join(lines))
    return reports


def _advise(graph, run_meta, options, op_log=None) -> AdviceProto:
    if options == _DEFAULT_ADVISE_OPTIONS:
        options = copy.deepcopy(ALL_ADVICE)
    advice = AdviceProto()
    for name in options:
        if name not in _BUILT:
            continue
        checker = advice.checkers[name]
        if name == "ExpensiveOperationChecker":
            checker.reports.extend(_expensive_operations(graph, run_meta, op_log))
    for name in sorted(advice.checkers):
        sys.stdout.write(f"\n{name}:\n")
        for report in advice.checkers[name].reports:
            sys.stdout.write(report + "\n")
    return advice


def advise(graph=None, run_meta=None, options=_DEFAULT_ADVISE_OPTIONS):
    """TF1's `tf.profiler.advise`: the checkers of `options` (a dict of checker name ->
    its options; the default, all of ALL_ADVICE) over `graph` (the default graph when
    None) and the traced step `run_meta`; prints and returns the AdviceProto."""
    from asyncflow import graph as ops

    g = graph if graph is not None else ops.get_default_graph()
    return _advise(g, run_meta, options)
