"""The fast path for tf.data's traced functions: a nested step through the session's
master with the feeds and fetches resolved once, instead of `arun`'s per-call feed
validation and fetch mapping (the elements already have the placeholders' dtypes and
shapes: they come from ops with those outputs); in a prefetch or parallel-map Task, a
small pure function runs as the straight-line program `Session.make_async_callable`
uses (asyncflow.straight_line), its kernels one after another without the
interpreter.  Installed into ops/dataset_pipeline.py by `asyncflow.data`; a session
without a master (or with a different one) falls back to `arun`.  A step whose plan may
run an op keeping state for the pass (`_per_pass`: a seeded random op, Print's
`first_n` count, RecordInput's reader, an unshared queue, table, accumulator, barrier,
reader or one-shot iterator made in the function) keeps it in the pass's states
(`random_states`: kernel_api.with_pass_random); the others run unwrapped."""

from __future__ import annotations

import numpy as np

from asyncflow.kernel_api import in_parked_task, keeps_pass_resource, quiet_step, with_pass_random

__all__ = ["function_caller"]


def _owned(v):
    # A fed value or a constant's read-only buffer comes back as is: copy it, so the
    # element owns its arrays (dataset_pipeline's invariant).
    if isinstance(v, np.ndarray) and not v.flags.writeable:
        return v.copy()
    return v


# Ops running a function body of their own (not inlined into the plan): it may keep
# pass state.
_CALLS = frozenset(
    ("PartitionedCall", "StatefulPartitionedCall", "RemoteCall", "SymbolicGradient")
    + ("If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase")
)


def _keeps_pass_state(op) -> bool:
    """Whether `op` keeps state for a pass (kernel_api.pass_state): a stateful random
    op (one with a `seed2` attr), a Print counting its `first_n`, a RecordInput, an op
    making an unshared resource inside a dataset function (a queue, a table, ...:
    kernel_api.keeps_pass_resource)."""
    if "seed2" in op._attrs:
        return op.op_def.stateful
    if op.type == "Print":
        return op._attrs.get("first_n", -1) >= 0
    return op.type == "RecordInput" or keeps_pass_resource(op)


def _per_pass(plan) -> bool:
    """Whether a step of `plan` may run an op keeping state for the pass, itself or in
    a function body it calls; true where the plan does not show its partitions (a
    task's)."""
    parts = getattr(plan, "parts", None)
    if parts is None:
        return True
    return any(op.type in _CALLS or _keeps_pass_state(op) for p in parts for op in p.index)


def function_caller(session, feeds, fetches):
    master = getattr(session, "_master", None)
    plan_fn = getattr(master, "plan", None)
    run_step = getattr(master, "run_step", None)
    if plan_fn is None or run_step is None:
        return None
    feeds, fetches = list(feeds), list(fetches)
    fed = {id(t): i for i, t in enumerate(feeds)}
    straight_line = getattr(session, "_straight_line", None)
    # the plan last run, its straight-line program (or None), whether it keeps pass state
    line = [None, None, False]

    async def call(values, random_states=None):
        """The outputs for `values`; the random ops of the step draw from
        `random_states` (the pass's: kernel_api.with_pass_random) when given."""
        plan = plan_fn(feeds, fetches, False)  # cached by the master
        if plan is not line[0]:
            program = None if straight_line is None else straight_line(plan)
            line[:] = plan, program, _per_pass(plan)
        program = line[1]
        # A program sets and resets context variables around its kernels: it runs only
        # where nothing resumes it in another Task (a prefetch or parallel-map Task),
        # not inside a kernel of the caller's step, which its interpreter may resume in
        # another Task after a suspension.
        if program is None or not in_parked_task():
            with quiet_step():
                run = run_step(plan, values, None, None)
                if line[2] and random_states is not None:
                    run = with_pass_random(run, random_states)
                out = await run
        else:  # a small pure function (a parse, a normalisation): its kernels in a row
            master._step_counter += 1
            run = program.run(master._step_counter, values)
            if line[2] and random_states is not None:
                run = with_pass_random(run, random_states)
            out = await run
        return tuple(
            np.array(values[fed[id(t)]], copy=True) if id(t) in fed else _owned(v)
            for t, v in zip(fetches, out)
        )

    return call
