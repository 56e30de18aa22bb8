"""Where a fused element-wise program's call goes inside a model's real steps (issue 21).

    .venv/bin/python benchmarks/models/cell_path_probe.py lstm_static --steps 60
    .venv/bin/python benchmarks/models/cell_path_probe.py lstm_static --steps 10 \\
        --rounds 10 --attr asyncflow.ops.fused_elementwise_jit:_IN_PLACE=False

Runs the model of models.py under asyncflow with every kernel of the plan timed at its
entry and exit (the executor's `await`), and the `_FusedElementwise` kernel replaced by
a copy of itself with clocks between its layers: the Python before `compute` (the
schedule's lookup, donation checks), the device's `compute` and the budget's `call` up
to the kernel's function, `evaluate` up to the compiled form's `run`, inside it the
inputs made contiguous (`np.ascontiguousarray`) and the outputs allocated (`np.empty`),
the numba loop's call (its dispatch and the loop), and the way back out; and the time
from the kernel's return to the next kernel's entry (the executor's bookkeeping).
`--ops BiasAddGrad ...`: the kernels of those op types timed whole as well.
With `--again`, each call is followed at once by the same `evaluate` on the same inputs
and by the same loop call on the same arrays: what the call costs on warm state.

Prints, per program kind (its op types and shape), the median of each piece in us.
With `--attr` (as ab_inproc.py's), two sessions, A and B, run `--rounds` rounds of
`--steps` steps alternately, and each setting's pieces are printed.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import numpy as np  # noqa: E402
from ab_inproc import attr_settings, model_graph  # noqa: E402
from models import MODELS, _tf  # noqa: E402

clock = time.perf_counter
_TOTAL = "0 TOTAL executor await"
T: dict = collections.defaultdict(lambda: collections.defaultdict(list))
_state = {"last_exit": None, "last_kind": None, "np_t": 0.0, "np_n": 0, "kind": None}


class _NumpyProbe:
    """numpy for fused_elementwise_jit, with ascontiguousarray and empty timed."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def ascontiguousarray(x):
        t0 = clock()
        r = np.ascontiguousarray(x)
        _state["np_t"] += clock() - t0
        _state["np_c"] = _state.get("np_c", 0) + (r is not x)
        return r

    @staticmethod
    def empty(shape, dtype):
        t0 = clock()
        r = np.empty(shape, dtype)
        _state["alloc_t"] = _state.get("alloc_t", 0.0) + clock() - t0
        return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--again", action="store_true")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--ops", nargs="*", default=[], help="op types to time whole as well")
    ap.add_argument("--attr", action="append", default=[], help="MODULE:NAME=VALUE, setting B")
    args = ap.parse_args(argv)
    tf = _tf("asyncflow")
    from asyncflow.devices import base, cpu_budget
    from asyncflow.ops import fused_elementwise as fe
    from asyncflow.ops import fused_elementwise_jit as fj
    from asyncflow.ops.math_helpers import _quiet
    from asyncflow.registry import KernelDef

    fj.np = _NumpyProbe()
    real_loop_for = fj._loop_for

    def loop_for(*a, **k):
        loop = real_loop_for(*a, **k)
        if loop is None:
            return None

        def timed(*xs):
            t0 = clock()
            r = loop(*xs)
            t1 = clock()
            _state["loop"] = (t0, t1)
            if args.again:
                t2 = clock()
                loop(*xs)
                _state["loop_again"] = clock() - t2
            return r

        return timed

    fj._loop_for = loop_for

    def timed_quiet(xp, fn, *a):
        _state["quiet_in"] = clock()
        r = _quiet(xp, fn, *a)
        _state["quiet_out"] = clock()
        return r

    def evaluate(program, xp, sched, donated, xs, *more):
        _state["np_t"], _state["np_c"], _state["alloc_t"] = 0.0, 0, 0.0
        t0 = clock()
        out = program.evaluate(xp, sched, donated, xs, *more)
        _state["eval"] = (t0, clock())
        return out

    async def kernel(ctx, *args_):
        tin = clock()
        program = ctx.kernel_state.get("fused_program")
        if program is None:
            program = ctx.kernel_state["fused_program"] = fe._Program(ctx.op)
        xp = ctx.xp
        xs = args_[: program.n_inputs]
        more = ()
        if program.columns:  # (Split pieces: fe.fuse_split_inputs)
            more = (xs,)
            xs = program.pieces(xs)
        if program.by_shapes:
            key = tuple(x.shape for x in args_)
        else:
            key = tuple(x.shape for x in xs)
            if len(args_) > len(xs):
                key += fe._targets(xp, args_[len(xs) :], program.shape_of)
        t_key = clock()
        schedule = program.schedules.get(key)
        if schedule is None:
            schedule = program.schedule(xp, xs, key)
        t_sched = clock()
        if fe._LEAN and schedule.compiled:
            donated = ()
        else:
            donated = [
                k
                for k in schedule.donatable
                if xs[k].dtype == program.dtype and ctx.may_forward(k, xs[k])
            ]
        t_pre = clock()
        _state["loop"] = None
        if schedule.elements < fe._INLINE_ELEMENTS:
            out = program.evaluate(xp, schedule, donated, xs, *more)
        elif fe._LEAN and xp is np and getattr(ctx.device, "runs_inline_now", fe._never)():
            out = cpu_budget.call_without_blas(
                timed_quiet, (xp, evaluate, program, xp, schedule, donated, xs, *more)
            )
        else:
            cost = schedule.elements * schedule.itemsize * (len(schedule.steps) + len(xs))
            out = await ctx.device.compute(
                timed_quiet, xp, evaluate, program, xp, schedule, donated, xs, *more, cost=cost
            )
        t_post = clock()
        kind = f"{'/'.join(sorted(set(program.types)))} {schedule.slot_shapes[-1]}"
        kind += f" in{len(xs)} out{len(program.results)}"
        if _state["loop"] is not None and schedule.elements >= fe._INLINE_ELEMENTS:
            t = T[kind]
            e0, e1 = _state["eval"]
            l0, l1 = _state["loop"]
            t["1 kernel: before compute"].append(t_pre - tin)
            t["1a  of it: the key (shapes, targets)"].append(t_key - tin)
            t["1b  of it: the schedule's lookup"].append(t_sched - t_key)
            t["1c  of it: donation checks"].append(t_pre - t_sched)
            t["2 compute+budget to fn"].append(_state["quiet_in"] - t_pre)
            t["3 _quiet to evaluate"].append(e0 - _state["quiet_in"])
            t["4 evaluate to loop (all)"].append(l0 - e0)
            t["4a  of it: ascontiguousarray"].append(_state["np_t"])
            t["4b  of it: copies made"].append(_state["np_c"])
            t["4c  of it: np.empty"].append(_state["alloc_t"])
            t["5 loop call (dispatch+loop)"].append(l1 - l0)
            t["6 loop to evaluate's end"].append(e1 - l1)
            t["7 evaluate's end to compute's return"].append(t_post - e1)
            if args.again:
                t["A loop again at once"].append(_state["loop_again"])
                t0 = clock()
                evaluate(program, xp, schedule, donated, xs, *more)
                t["B evaluate again at once"].append(clock() - t0)
        _state["kind"] = kind if _state["loop"] is not None else None
        _state["t_post"] = t_post
        return out if len(out) > 1 else out[0]

    wrapped = {}

    def wrap(fn, is_fused):
        async def timed_kernel(ctx, *a, **k):
            t0 = clock()
            last = _state["last_exit"]
            if last is not None and _state["last_kind"] is not None:
                T[_state["last_kind"]]["9 after: to next kernel's entry"].append(t0 - last)
            _state["last_kind"] = None
            r = await fn(ctx, *a, **k)
            t1 = clock()
            if ctx.op.type in args.ops:  # (a kernel of another type, timed whole)
                T[f"op {ctx.op.type}"][_TOTAL].append(t1 - t0)
            if is_fused and _state["kind"] is not None:
                T[_state["kind"]][_TOTAL].append(t1 - t0)
                T[_state["kind"]]["8 kernel return to await's end"].append(t1 - _state["t_post"])
                _state["last_kind"] = _state["kind"]
            _state["last_exit"] = clock()
            return r

        return timed_kernel

    fused_def = fe.FusedElementwise.kernel_defs[None]
    fe.FusedElementwise.kernel_defs[None] = KernelDef(kernel, None, fused_def.host_memory)
    real_kernel_for = base.Device.kernel_for

    def kernel_for(self, op_def):
        kd = real_kernel_for(self, op_def)
        if kd is None:
            return None
        w = wrapped.get(id(kd.fn))
        if w is None:
            w = wrapped[id(kd.fn)] = (kd.fn, wrap(kd.fn, kd.fn is kernel))
        return KernelDef(w[1], kd.device_type, kd.host_memory)

    base.Device.kernel_for = kernel_for

    settings, use = attr_settings(args.attr)  # (ab_inproc.py's --attr)
    graph, feeds, train, init, batches = model_graph(tf, args.model)
    sides = (0, 1) if settings else (0,)
    sessions, steps, per = [], [[], []], [{}, {}]
    try:
        for j in sides:
            use(j)
            sessions.append(tf.Session(graph=graph))
            sessions[j].run(init)
            for k in range(30):
                sessions[j].run(train, batches[k % 4])
            fj.wait()
            for k in range(10):
                sessions[j].run(train, batches[k % 4])
        for r in range(args.rounds):
            for j in sides if r % 2 == 0 else sides[::-1]:
                use(j)
                T.clear()
                _state["last_exit"] = None
                t0 = clock()
                for k in range(args.steps):
                    sessions[j].run(train, batches[k % 4])
                steps[j].append((clock() - t0) / args.steps)
                for kind, pieces in T.items():
                    got = per[j].setdefault(kind, collections.defaultdict(list))
                    for name, v in pieces.items():
                        got[name].extend(v)
    finally:
        use(0)
        for s in sessions:
            s.close()
    for j in sides:
        label = "A" if j == 0 else "B " + " ".join(args.attr)
        print(
            f"== {label}: {args.model} {statistics.median(steps[j]) * 1e3:.2f} ms a step "
            f"(median of {args.rounds} rounds, instrumented)"
        )
        total = 0.0
        for kind, pieces in sorted(per[j].items(), key=lambda kv: -len(kv[1].get(_TOTAL, ()))):
            n = len(pieces.get(_TOTAL, ()))
            if not n:
                continue
            calls = n / (args.steps * args.rounds)
            total += calls * statistics.median(pieces[_TOTAL])
            print(f"{kind}: {calls:.0f} calls a step")
            for name in sorted(pieces):
                v = pieces[name]
                scale = 1 if "copies" in name else 1e6
                print(
                    f"   {name:40s} median {statistics.median(v) * scale:8.1f}"
                    f"  p10 {np.percentile(v, 10) * scale:8.1f}"
                    f"  p90 {np.percentile(v, 90) * scale:8.1f}"
                )
        print(f"   the programs' calls: {total * 1e3:.2f} ms a step (calls x medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
