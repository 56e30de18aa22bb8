"""A shared RandomShuffleQueue checks min_after_dequeue as TF's kernel does (TF's
random_shuffle_queue_test testIncompatibleSharedQueueErrors)."""

import pytest

import asyncflow as af


def test_shared_shuffle_queue_checks_min_after_dequeue():
    g = af.Graph()
    with g.as_default():
        q1 = af.RandomShuffleQueue(10, 0, af.float32, shared_name="q_b")
        q2 = af.RandomShuffleQueue(10, 5, af.float32, shared_name="q_b")
        q3 = af.RandomShuffleQueue(10, 0, af.float32, shared_name="q_b")
        with af.Session(graph=g) as s:
            s.run(q1.queue_ref.op)
            with pytest.raises(af.errors.InvalidArgumentError, match="min_after_dequeue"):
                s.run(q2.queue_ref.op)
            s.run(q3.queue_ref.op)  # the same settings share it
