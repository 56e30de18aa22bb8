"""A finished step keeps nothing alive: its undo callbacks (which hold what a Dequeue
would put back) are dropped when it ends, without waiting for the cyclic collector."""

from __future__ import annotations

import numpy as np

import asyncflow as af
from asyncflow import executor
from asyncflow import graph as ops
from asyncflow.registry import ANY, register_op

_seen: list = []

_Capture = register_op(
    "TestCaptureStep",
    inputs=["x: T"],
    outputs=["y: T"],
    attrs={"T": ANY},
    shape_fn=lambda op: [op.inputs[0].shape],
)


@_Capture.kernel("CPU")
async def _capture(ctx, x):
    _seen.append(executor.current_step())
    return x


def test_a_finished_step_drops_its_undo_callbacks():
    with af.Graph().as_default():
        q = af.FIFOQueue(4, af.float32, shapes=[[1000]])
        x = af.placeholder(af.float32, [1000])
        enq = q.enqueue(x)
        out = ops.apply_op("TestCaptureStep", [q.dequeue()]).outputs[0]
        with af.Session() as sess:
            for k in range(3):
                sess.run(enq, {x: np.full(1000, k, np.float32)})
                assert sess.run(out)[0] == k
    assert len(_seen) == 3
    for sctx in _seen:  # each Dequeue registered a put-back; none is kept
        assert sctx.failure_callbacks() == []
