"""Probe (issue 21): the static LSTM's weight products on a thread that never takes the GIL.

    .venv/bin/python benchmarks/models/gemm_lane_probe.py lstm_static [--steps 10] [--rounds 20]

TF's inter-op pool runs a backward step's weight product x_t^T @ dgates_t beside the
input gradient dgates_t @ W^T and the cell's element-wise work; ours runs the two
products as one `_MatMulSumPair` (ops/matmul_sum.py) on the pool's two threads and then
the cell's programs on the step's thread.  Side lanes (devices/cpu.py) moved kernels to
a Python worker and lost to its GIL hand-offs.  This probe measures the other form: a
lane thread in compiled code (numba, nogil) that takes gemm jobs from a ring in shared
memory (acquire/release atomics, `pause` while it waits) and never touches Python,
fed by the pairs' kernels, replaced here in place: each pair hands its weight product
(beta = 1 into the sum's buffer, the same gemm calls in the same order as the pair's, so
the same bits) to the lane, computes the input gradient on its own thread with the
one-thread gemm (MKL's sequential layer where loaded), and returns; the sum's end waits
for the lane.  The CPU budget holds the lane's core meanwhile (`reserve_side`), so no
product of the step's thread takes a second thread beside it.

One process, one session; rounds alternate the lane off (A) and on (B); the line gives
medians over rounds of ms a step (wall and CPU), B/A and the rounds B won.  A probe, not
a feature: the kernels are patched in this process only, and the lane spins while on.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from models import MODELS  # noqa: E402

import asyncflow as tf  # noqa: E402
from asyncflow import registry  # noqa: E402
from asyncflow.devices import cpu_budget, host_pool  # noqa: E402
from asyncflow.ops import blas, matmul_sum  # noqa: E402

_HEAD, _TAIL, _STOP, _PARK = 0, 1, 2, 3  # ring slots
_CAP = 64  # jobs in flight at most
_NO_TRANS, _TRANS = 111, 112  # CBLAS


def _build(numba):
    """(lane, one): the lane's loop and a one-thread gemm call for the step's thread."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def load_acquire(typingctx, arr, idx):
        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            return builder.load_atomic(builder.gep(data, [args[1]]), "acquire", 8)

        return types.int64(arr, idx), codegen

    @intrinsic
    def store_release(typingctx, arr, idx, val):
        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            builder.store_atomic(args[2], builder.gep(data, [args[1]]), "release", 8)
            return context.get_dummy_value()

        return types.void(arr, idx, val), codegen

    @intrinsic
    def pause(typingctx):
        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(ir.VoidType(), [])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse2.pause")
            builder.call(fn, [])
            return context.get_dummy_value()

        return types.void(), codegen

    @intrinsic
    def usleep_at(typingctx, address, us):
        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32)])
            fn = builder.inttoptr(args[0], fnty.as_pointer())
            builder.call(fn, [builder.trunc(args[1], ir.IntType(32))])
            return context.get_dummy_value()

        return types.void(address, us), codegen

    gemm_at = blas._gemm_intrinsic(ir.FloatType())
    usleep = ctypes.cast(ctypes.CDLL(None).usleep, ctypes.c_void_p).value

    @numba.njit(nogil=True)
    def lane(ring, jobs, scalars):
        while not load_acquire(ring, _STOP):
            tail = ring[_TAIL]
            if load_acquire(ring, _HEAD) == tail:
                if load_acquire(ring, _PARK):
                    usleep_at(usleep, 200)
                else:
                    pause()
                continue
            j = tail % _CAP
            job = jobs[j]
            gemm_at(job[0], job[1], job[2], job[3], job[4], job[5], 1.0, job[6], job[7],
                    job[8], job[9], scalars[j], job[10], job[4])  # fmt: skip
            store_release(ring, _TAIL, tail + 1)

    @numba.njit(nogil=True)
    def one(address, ta, tb, m, n, k, pa, lda, pb, ldb, pc):
        gemm_at(address, ta, tb, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, n)

    return lane, one


class _Lane:
    def __init__(self):
        import numba

        blas.warm()
        self.address = blas._single_address(np.dtype(np.float32))
        self.ring = np.zeros(8, np.int64)
        self.jobs = np.zeros((_CAP, 11), np.int64)
        self.scalars = np.zeros(_CAP, np.float64)  # each job's beta
        self.ring[_PARK] = 1
        self._loop, self._one = _build(numba)
        self.thread = threading.Thread(
            target=self._loop, args=(self.ring, self.jobs, self.scalars), daemon=True
        )
        self.thread.start()

    def submit(self, c, a, b, ta, tb, beta) -> int:
        """c = op(a) @ op(b) + beta * c on the lane; the job's number."""
        head = int(self.ring[_HEAD])
        if head - int(self.ring[_TAIL]) >= _CAP:
            self.wait(head - _CAP + 1)
        j = head % _CAP
        m, n = c.shape
        k = a.shape[0] if ta else a.shape[1]
        self.jobs[j] = (self.address, _TRANS if ta else _NO_TRANS, _TRANS if tb else _NO_TRANS,
                        m, n, k, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1],
                        c.ctypes.data)  # fmt: skip
        self.scalars[j] = beta
        self.ring[_HEAD] = head + 1  # (x86 keeps the job's stores before this one)
        return head + 1

    def one(self, c, a, b, ta, tb) -> None:
        m, n = c.shape
        k = a.shape[0] if ta else a.shape[1]
        self._one(self.address, _TRANS if ta else _NO_TRANS, _TRANS if tb else _NO_TRANS,
                  m, n, k, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1],
                  c.ctypes.data)  # fmt: skip

    def wait(self, seq: int) -> None:
        while self.ring[_TAIL] < seq:
            pass

    def close(self) -> None:
        self.ring[_STOP] = 1
        self.thread.join()


def _patch(lane: _Lane, on: list):
    """The pair and end kernels, in place: through the lane while on[0]."""
    pair_kd = next(iter(registry._REGISTRY["_MatMulSumPair"].kernel_defs.values()))
    end_kd = next(iter(registry._REGISTRY["_MatMulSumEnd"].kernel_defs.values()))
    plain_pair, plain_end = pair_kd.fn, end_kd.fn
    pending: dict[int, list] = {}  # id(sum) -> [last job, operands held]

    async def pair(ctx, *xs):
        attrs = ctx.attrs
        if not on[0] or attrs["T"].np_dtype != np.float32:
            return await plain_pair(ctx, *xs)
        index, ta, tb = attrs["index"], attrs["transpose_a"], attrs["transpose_b"]
        pta, ptb = attrs["partner_transpose_a"], attrs["partner_transpose_b"]
        acc, (a, b, pa, pb) = (matmul_sum._Sum(), xs) if index == 0 else (xs[0], xs[1:])
        into = matmul_sum._take(acc, index, attrs["count"], np.float32, a, b, ta, tb)
        pa, pb, pm, pn, _pk = matmul_sum._matrix_pair(pa, pb, pta, ptb)
        buf, first, a, b, _macs = into
        a, b, pa, pb = (np.ascontiguousarray(x) for x in (a, b, pa, pb))
        held = pending.get(id(acc))
        if held is None:
            held = pending[id(acc)] = [0, []]
            lane.ring[_PARK] = 0
            cpu_budget.reserve_side()
        held[0] = lane.submit(buf, a, b, ta, tb, 0.0 if first else 1.0)
        held[1] += [a, b]
        out = host_pool.empty((pm, pn), np.float32)
        lane.one(out, pa, pb, pta, ptb)
        return acc, out

    async def end(ctx, acc, *addends):
        held = pending.pop(id(acc), None)
        if held is not None:
            lane.wait(held[0])
            lane.ring[_PARK] = 1
            cpu_budget.release_side()
        return await plain_end(ctx, acc, *addends)

    object.__setattr__(pair_kd, "fn", pair)
    object.__setattr__(end_kd, "fn", end)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    lane, on = _Lane(), [False]
    _patch(lane, on)
    feeds, train, loss, batch = MODELS[args.model](tf, np.random.default_rng(0))
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    batches = [dict(zip(feeds, batch())) for _ in range(4)]
    for setting in (False, True):
        on[0] = setting
        for i in range(20):
            sess.run([train, loss], batches[i % 4])
    # The same bits: one step from the same variables, off and on.
    variables = tf.global_variables()
    start = sess.run(variables)
    after = []
    for setting in (False, True):
        on[0] = setting
        for v, value in zip(variables, start):
            v.load(value, sess)
        sess.run(train, batches[0])
        after.append(sess.run(variables))
    same = all(np.array_equal(x, y) for x, y in zip(*after))
    print(f"{args.model}: a step's variables off and on the lane bitwise equal: {same}")
    wall: dict[bool, list] = {False: [], True: []}
    cpu: dict[bool, list] = {False: [], True: []}
    for r in range(args.rounds):
        for setting in (False, True) if r % 2 else (True, False):
            on[0] = setting
            sess.run([train, loss], batches[0])
            t0, c0 = time.perf_counter(), time.process_time()
            for i in range(args.steps):
                sess.run([train, loss], batches[i % 4])
            wall[setting].append((time.perf_counter() - t0) / args.steps * 1e3)
            cpu[setting].append((time.process_time() - c0) / args.steps * 1e3)
    lane.close()
    a, b = np.median(wall[False]), np.median(wall[True])
    wins = sum(y < x for x, y in zip(wall[False], wall[True]))
    print(
        f"{args.model}: off {a:.2f} ms (CPU {np.median(cpu[False]):.2f}), lane {b:.2f} ms "
        f"(CPU {np.median(cpu[True]):.2f}), B/A {b / a:.3f}, lane faster in {wins}/{args.rounds}"
    )


if __name__ == "__main__":
    main()
