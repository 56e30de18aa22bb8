"""The newer collective ops (CollectiveAllToAllV2/V3, CollectiveReduceV3 and its
communicator, CollectiveReduceScatterV2, CollectiveAssignGroupV2), the NCCL ops on the
stand-in GPUs, and members that stay in step when an execution gives up.

Outcomes marked "TF 2.21" come from fixtures/collective_s28_tf.json, recorded by
fixtures/record_collective_s28_tf.py running the cases of fixtures/collective_s28_cases.py
(tf.compat.v1 graphs on four CPUs of one session).  Every collective has a timeout: a
member that never meets its group fails the test instead of hanging it.
"""

from __future__ import annotations

import numpy as np
import pytest

import asyncflow as af

pytestmark = pytest.mark.timeout(30)

raw = af.raw_ops
CPU2 = af.ConfigProto(device_count={"CPU": 2})


def _reduce(x, timeout=3.0):
    return raw.CollectiveReduce(
        input=x, group_size=2, group_key=1, instance_key=1, merge_op="Add", final_op="Id",
        subdiv_offsets=[0], timeout_seconds=timeout,
    )  # fmt: skip


# -- members stay in step when an execution gives up --------------------------------------


def test_a_step_aborted_before_one_members_collective_leaves_the_next_step_paired():
    # cpu:1's member starts and waits; cpu:0's never starts (its input waits on an empty
    # queue) and the step is aborted by its deadline.  cpu:1's execution did not happen:
    # the next step's executions pair (before, cpu:1 was one execution ahead and timed out).
    with af.Graph().as_default():
        with af.device("/cpu:0"):
            q = af.FIFOQueue(2, af.float32, shapes=[[2]])
            a = _reduce(q.dequeue())
            put = q.enqueue(af.constant([1.0, 2.0]))
        with af.device("/cpu:1"):
            b = _reduce(af.constant([10.0, 20.0]))
        with af.Session(config=CPU2) as sess:
            with pytest.raises(af.errors.DeadlineExceededError):
                sess.run([a, b], options=af.RunOptions(timeout_in_ms=300))
            sess.run(put)
            for got in sess.run([a, b]):
                assert got.tolist() == [11.0, 22.0]
            sess.run(put)
            for got in sess.run([a, b]):  # and the one after
                assert got.tolist() == [11.0, 22.0]


def test_a_member_that_timed_out_gives_its_execution_back():
    with af.Graph().as_default():
        with af.device("/cpu:0"):
            a = _reduce(af.constant([1.0, 2.0]))
        with af.device("/cpu:1"):
            b = _reduce(af.constant([10.0, 20.0]), timeout=0.05)
        with af.Session(config=CPU2) as sess:
            with pytest.raises(af.errors.DeadlineExceededError, match="Collective has timed"):
                sess.run(b)  # alone: its group never completes
            for got in sess.run([a, b]):
                assert got.tolist() == [11.0, 22.0]
