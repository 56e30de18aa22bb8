"""Unlocked updates of one variable that overlap (TF's use_locking=False, asynchronous
parameter-server training): each update large enough to run on the device's workers,
two at once.  Neither may fail, and the variable ends between one update per round
(every overlap lost) and two (none lost), as TF's racy updates do."""

import asyncio

import numpy as np
import pytest

import asyncflow as af

pytestmark = pytest.mark.timeout(60)

N = 2_000_000  # elements: a cost the device hands to its workers, not the loop


async def test_overlapping_unlocked_updates_of_one_variable(graph):
    v = af.Variable(np.zeros(N, np.float32))
    grad = af.constant(np.ones(N, np.float32))
    ups = [af.train.GradientDescentOptimizer(0.5).apply_gradients([(grad, v)]) for _ in range(2)]
    rounds = 10
    async with af.Session(graph=graph) as s:
        await s.arun(v.initializer)
        held = await s.arun(v)  # a value read before the updates never changes
        for _ in range(rounds):
            await asyncio.gather(s.arun(ups[0]), s.arun(ups[1]))
        got = await s.arun(v)
    assert not held.any()
    assert got.min() >= -0.5 * 2 * rounds - 1e-3 and got.max() <= -0.5 * rounds + 1e-3
