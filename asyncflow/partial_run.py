"""Partial runs (TF1's `Session.partial_run_setup` and `partial_run`): one step whose
feeds arrive, and whose fetches leave, over several calls.

`partial_run_setup(fetches, feeds)` starts the step at once, on the session's loop,
with every feed and fetched tensor crossing the step's rendezvous
(`Master.partial_plan`): what needs no feed runs now; each `partial_run(handle,
fetches, feed_dict)` sends its feeds and awaits its fetches.  So every op runs once in
the whole sequence, as in TF: a random value or a variable update seen by one call is
the one later calls see.

TF's rules and words (InvalidArgumentError):
- a feed or fetch not named at setup: "The feed a:0 was not specified in
  partial_run_setup."; one fed or fetched before: "... has already been fed.";
- a fetch that needs a feed not fed yet: "Fetch c:0 can't be computed from the feeds
  that have been fed so far." (naming the missing feed);
- a handle that is unknown, finished or failed: "Must run 'setup' before performing
  partial runs!".
Operations are fetches of the setup only (a `partial_run` naming one raises TF's
RuntimeError): they run in the step as their inputs arrive.

Invariants: a call is checked whole before anything is fed, so a refused call uses up
no feed and no fetch; the handle is dropped once every feed is fed and every tensor
fetched (after the step has ended, its error raised), or at the step's first error.
"""

from __future__ import annotations

import asyncio
import contextlib

from asyncflow import errors
from asyncflow import graph as ops

__all__ = ["PartialRun", "NO_SETUP"]

NO_SETUP = "Must run 'setup' before performing partial runs!"


class PartialRun:
    """One partial-run step: what was set up, what has been fed and fetched so far."""

    __slots__ = (
        "feed_index",
        "fetch_index",
        "feed_keys",
        "fetch_keys",
        "fed",
        "fetched",
        "tensor_fetches",
        "rendezvous",
        "task",
        "step_id",
    )

    def __init__(self, feeds, elements, client_keys, rendezvous, task, step_id):
        self.feed_index = {t: i for i, t in enumerate(feeds)}
        self.fetch_index = {e: k for k, e in enumerate(elements)}
        self.feed_keys, self.fetch_keys = client_keys
        self.fed: set = set()
        self.fetched: set = set()
        self.tensor_fetches = sum(isinstance(e, ops.Tensor) for e in elements)
        self.rendezvous = rendezvous
        self.task = task
        self.step_id = step_id

    def check(self, feed_tensors, elements) -> None:
        """Refuse the call, as TF does, before anything of it is fed or fetched."""
        for t in feed_tensors:
            if t not in self.feed_index:
                raise _invalid(f"The feed {t.name} was not specified in partial_run_setup.")
            if t in self.fed:
                raise _invalid(f"The feed {t.name} has already been fed.")
        fed_now = set(feed_tensors)
        for e in elements:
            if e in fed_now:
                continue
            if e not in self.fetch_index:
                raise _invalid(f"The fetch {e.name} was not specified in partial_run_setup.")
            if e in self.fetched:
                raise _invalid(f"The fetch {e.name} has already been fetched.")
        pending = {t for t in self.feed_index if t not in self.fed and t not in fed_now}
        if pending:
            for e in elements:
                if e not in fed_now:
                    _check_computable(e, pending, set(self.feed_index))

    def done(self) -> bool:
        return len(self.fed) == len(self.feed_index) and len(self.fetched) == self.tensor_fetches

    async def run(self, feed_tensors, feed_values, elements, deadline_s):
        """Feed, then the fetched values in `elements`' order (a tensor fed in this
        call is its fed value, as `Session.run` gives it)."""
        rv = self.rendezvous
        fed_now = {}
        for t, v in zip(feed_tensors, feed_values, strict=True):
            for key in self.feed_keys[self.feed_index[t]]:
                rv.send_nowait(key, v)
            self.fed.add(t)
            fed_now[t] = v
        wanted = [e for e in dict.fromkeys(elements) if e not in fed_now]  # (once each)
        self.fetched.update(wanted)
        got = dict(fed_now)
        async with _deadline(deadline_s):
            for e in wanted:  # (each fetch's _Send wakes its own recv)
                got[e] = await rv.recv(self.fetch_keys[self.fetch_index[e]])
            if self.done():
                await self.task  # the step's last ops, and its error if one failed
        return [got[e] for e in elements]


@contextlib.asynccontextmanager
async def _deadline(seconds):
    """`asyncio.timeout(seconds)` (None: none) raising the session's DeadlineExceeded."""
    if seconds is None:
        yield
        return
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise errors.DeadlineExceededError(
            None,
            None,
            "Timed out waiting for notification (the partial run ran past "
            f"timeout_in_ms={int(seconds * 1000)})",
        ) from None


def _check_computable(fetch: ops.Tensor, pending: set, feeds: set) -> None:
    """Walk back from `fetch` to the feeds (TF's CheckFetch): reaching one not fed yet
    means the call would wait for it forever."""
    seen: set = set()
    stack = [fetch.op]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        for t in op._inputs:
            if t in pending:
                raise _invalid(
                    f"Fetch {t.name} can't be computed from the feeds that have been fed so far."
                )
            if t not in feeds:
                stack.append(t.op)
        stack.extend(op._control_inputs)


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)
