"""The frame executor on hand-built control-flow graphs (issue 5 items 1-2).

cond/while_loop builders sit on top of these primitives; here the graphs are wired by
hand so that the executor's rules are tested on their own: deadness, Merge, frames,
iterations, parallel_iterations, nested loops, errors, and memory.
"""

import asyncio

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow.ops import control_flow_prims as cf
from asyncflow.registry import ANY, register_op

# A kernel that waits on a per-test asyncio.Event: makes iterations genuinely async.
_GATES: dict[str, asyncio.Event] = {}
_ARRIVED: dict[str, int] = {}

_Gate = register_op(
    "TestFrameGate",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": ANY, "key": "g"},
    shape_fn=lambda op: [op.inputs[0].shape],
    stateful=True,
    is_async=True,
)


@_Gate.kernel("CPU")
async def _gate(ctx, x):
    key = ctx.attrs["key"]
    _ARRIVED[key] = _ARRIVED.get(key, 0) + 1
    await _GATES[key].wait()
    return x


def gate(x, key):
    return af.graph.apply_op("TestFrameGate", [x], {"key": key}).outputs[0]


@pytest.fixture(autouse=True)
def fresh_graph():
    g = af.Graph()
    with g.as_default():
        yield g


def _set_back_edge(merge_out, next_it):
    """Point the Merge's second input at the NextIteration (the builders' job)."""
    m = merge_out.op
    m._inputs = (m._inputs[0], next_it)
    next_it._consumers.append(m)
    m.graph._version += 1


def inv(value, frame):
    """A loop invariant: a constant brought into the frame by a constant Enter.

    (A Const created inside a body without inputs would live in the root frame; the
    while_loop builder adds such Enters itself.)
    """
    return cf.enter(af.constant(value), frame, is_constant=True)


def counting_loop(n, parallel_iterations=10, frame="loop", body=None, start=None, one=None):
    """while i < n: i = body(i) (default i + 1); returns the Exit tensor.

    `start`, `n` and `one` must live in the frame the loop is built in.
    """
    i0 = af.constant(0) if start is None else start
    e = cf.enter(i0, frame, parallel_iterations=parallel_iterations)
    n_in = cf.enter(n, frame, is_constant=True)
    m, _ = cf.merge([e, e])
    c = cf.loop_cond(af.less(m, n_in))
    f, t = cf.switch(m, c)
    if body:
        b = body(af.identity(t), frame)
    else:
        one_in = cf.enter(af.constant(1) if one is None else one, frame, is_constant=True)
        b = af.identity(t) + one_in
    nxt = cf.next_iteration(b)
    _set_back_edge(m, nxt)
    return cf.exit(f)


def test_switch_kills_the_untaken_branch_and_merge_picks_the_live_one():
    x = af.placeholder(af.float32, [], name="x")
    p = af.placeholder(af.bool, [], name="p")
    f, t = cf.switch(x, p)
    # The untaken side would raise: it must be dead, not run.
    bad_if_run = af.check_numerics(f * np.float32(np.nan), "false branch ran")
    good = t * 2.0
    out, idx = cf.merge([bad_if_run, good])
    with af.Session() as s:
        assert s.run([out, idx], {x: 3.0, p: True}) == [6.0, 1]
        with pytest.raises(errors.InvalidArgumentError, match="false branch ran"):
            s.run(out, {x: 3.0, p: False})


def test_deadness_propagates_through_ordinary_ops_and_control_edges():
    x = af.constant(1.0)
    f, t = cf.switch(x, False)
    dead_chain = af.square(af.identity(t) + 1.0)  # all dead
    with af.control_dependencies([dead_chain]):
        gated = af.constant(5.0)  # its only (control) input is dead: dead too
    out, idx = cf.merge([gated, f])
    with af.Session() as s:
        assert s.run([out, idx]) == [1.0, 1]
        with pytest.raises(errors.InvalidArgumentError, match="does not have value"):
            s.run(dead_chain)


def test_merge_of_all_dead_inputs_is_dead():
    x = af.constant(1.0)
    f, t = cf.switch(x, True)
    g, _ = cf.switch(x, True)
    out, _ = cf.merge([f + 1.0, g * 2.0])
    after, _ = cf.merge([out, t])  # the live one comes through here
    with af.Session() as s:
        assert s.run(after) == 1.0
        with pytest.raises(errors.InvalidArgumentError, match="does not have value"):
            s.run(out)


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_counting_loop(n):
    out = counting_loop(af.constant(n))
    with af.Session() as s:
        assert s.run(out) == n


def test_loop_with_a_float_accumulator_matches_numpy():
    # i, acc = 0, 1; while i < 5: acc = acc * 1.5 + i; i += 1
    i0, a0 = af.constant(0), af.constant(1.0)
    ei, ea = cf.enter(i0, "acc"), cf.enter(a0, "acc")
    five = cf.enter(af.constant(5), "acc", is_constant=True)
    mi, _ = cf.merge([ei, ei])
    ma, _ = cf.merge([ea, ea])
    c = cf.loop_cond(af.less(mi, five))
    fi, ti = cf.switch(mi, c)
    fa, ta = cf.switch(ma, c)
    ti_, ta_ = af.identity(ti), af.identity(ta)
    ni = cf.next_iteration(ti_ + inv(1, "acc"))
    na = cf.next_iteration(ta_ * inv(1.5, "acc") + af.cast(ti_, af.float32))
    _set_back_edge(mi, ni)
    _set_back_edge(ma, na)
    out = cf.exit(fa)
    acc = 1.0
    for i in range(5):
        acc = acc * 1.5 + i
    with af.Session() as s:
        assert s.run(out) == pytest.approx(acc)


def test_nested_loops():
    # outer: for j < 3: total += inner(j) where inner counts to 4
    j0, t0 = af.constant(0), af.constant(0)
    ej, et = cf.enter(j0, "outer"), cf.enter(t0, "outer")
    three = cf.enter(af.constant(3), "outer", is_constant=True)
    mj, _ = cf.merge([ej, ej])
    mt, _ = cf.merge([et, et])
    c = cf.loop_cond(af.less(mj, three))
    fj, tj = cf.switch(mj, c)
    ft, tt = cf.switch(mt, c)
    tj_ = af.identity(tj)
    # A fresh inner frame per outer iteration; its start value must come from inside
    # the outer frame (a root-frame Const would start the inner loop only once).
    inner = counting_loop(
        inv(4, "outer"), frame="inner", start=inv(0, "outer"), one=inv(1, "outer")
    )
    nj = cf.next_iteration(tj_ + inv(1, "outer"))
    nt = cf.next_iteration(af.identity(tt) + inner)
    _set_back_edge(mj, nj)
    _set_back_edge(mt, nt)
    out = cf.exit(ft)
    with af.Session() as s:
        assert s.run(out) == 12


def test_error_in_loop_body_aborts_the_step():
    def body(i, frame):
        bad = af.cast(af.equal(i, inv(3, frame)), af.float32) * inv(np.float32(np.inf), frame)
        return i + af.cast(af.check_numerics(bad, "iteration 3 failed"), af.int32)

    out = counting_loop(af.constant(10), body=body)
    with af.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match="iteration 3 failed"):
            s.run(out)
        assert s.run(af.constant(1)) == 1  # session still usable


async def test_parallel_iterations_limit_how_many_iterations_wait_at_once():
    # i drives the iterations; acc collects each iteration's slow (gated) work, so
    # iteration k+1 can start while k's gate still waits, up to parallel_iterations.
    _GATES["lim"] = asyncio.Event()
    _ARRIVED["lim"] = 0
    ei = cf.enter(af.constant(0), "lim", parallel_iterations=3)
    ea = cf.enter(af.constant(0), "lim", parallel_iterations=3)
    n_in = inv(6, "lim")
    mi, _ = cf.merge([ei, ei])
    ma, _ = cf.merge([ea, ea])
    c = cf.loop_cond(af.less(mi, n_in))
    fi, ti = cf.switch(mi, c)
    fa, ta = cf.switch(ma, c)
    ti_ = af.identity(ti)
    _set_back_edge(mi, cf.next_iteration(ti_ + inv(1, "lim")))
    _set_back_edge(ma, cf.next_iteration(af.identity(ta) + gate(ti_, "lim")))
    outs = [cf.exit(fi), cf.exit(fa)]
    async with af.Session() as s:
        task = asyncio.ensure_future(s.arun(outs))
        for _ in range(100):
            await asyncio.sleep(0)
        # Iterations 0..2 are all waiting at once; the fourth waits for the oldest.
        assert _ARRIVED["lim"] == 3
        assert not task.done()
        _GATES["lim"].set()
        assert await asyncio.wait_for(task, 10) == [6, 15]
        assert _ARRIVED["lim"] == 6


_PEAKS = """
import importlib.util, sys, tracemalloc
spec = importlib.util.spec_from_file_location("frames_under_test", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
af = mod.af
n = af.placeholder(af.int32, [])
out = mod.counting_loop(n)
with af.Session() as s:
    s.run(out, {n: 1000})
    tracemalloc.start()
    s.run(out, {n: 1000})
    _, small = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    s.run(out, {n: 8000})
    _, big = tracemalloc.get_traced_memory()
print(small, big)
"""


def test_long_loop_frees_iterations():
    # In a process of its own: tracemalloc counts every thread's allocations, and a
    # pytest-xdist worker's I/O thread allocates while it receives the next tests.
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _PEAKS, __file__], capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr
    peak_small, peak_big = map(int, done.stdout.split())
    assert peak_big < 2 * peak_small + 200_000  # not 8x: iterations are freed


def test_loop_in_a_multi_device_session():
    n = af.constant(5)
    out = counting_loop(n)
    with af.Session(config=af.ConfigProto(device_count={"CPU": 2})) as s:
        assert s.run(out) == 5
