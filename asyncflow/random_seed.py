"""Graph-level and op-level random seeds (TF1's `tf.set_random_seed` / `get_seed`).

A random op gets two seeds, `seed` and `seed2`, stored as int attrs; 0 means "unset".
`get_seed` turns the user's graph seed and op seed into that pair with TF's rules, so
that the same program with the same graph seed draws the same numbers in a fresh
session, while two ops of one graph draw different streams.

Invariant: `get_seed` is a pure function of the default graph's seed and of how many
times `get_seed(None)` was asked of that graph before (TF 2.21's per-graph counter;
TF 1.x used the graph's last op id), so a program reproduces TF's op seeds.
"""

from __future__ import annotations

import weakref

from asyncflow import graph as ops

__all__ = ["set_random_seed", "get_seed"]

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2**31 - 1


# graph -> how many op seeds `get_seed(None)` has handed out in it
_op_seed_counts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _truncate_seed(seed: int) -> int:
    return int(seed) % _MAXINT32  # Truncate to fit into 32-bit integer


def get_seed(op_seed: int | None) -> tuple[int | None, int | None]:
    """The (graph seed, op seed) pair a random op should use, by TF1's rules.

    - no graph seed, no op seed: `(None, None)` (the op draws from OS entropy);
    - graph seed, no op seed: the op seed counts the graph's earlier unseeded
      requests (0, 1, 2, ...), so one program reproduces its numbers while its ops
      differ from one another;
    - no graph seed, op seed: the graph seed is `DEFAULT_GRAPH_SEED`;
    - both: both, each truncated to 31 bits.
    `(0, 0)` becomes `(0, 2**31 - 1)` because 0 means "unset" to the kernels.
    """
    graph = ops.get_default_graph()
    global_seed = graph.seed
    if global_seed is not None:
        if op_seed is None:
            op_seed = _op_seed_counts.get(graph, 0)
            _op_seed_counts[graph] = op_seed + 1
        seeds = _truncate_seed(global_seed), _truncate_seed(op_seed)
    elif op_seed is not None:
        seeds = DEFAULT_GRAPH_SEED, _truncate_seed(op_seed)
    else:
        seeds = None, None
    if seeds == (0, 0):
        return 0, _MAXINT32
    return seeds


def set_random_seed(seed: int | None) -> None:
    """Set the default graph's graph-level random seed (`tf.set_random_seed`)."""
    ops.get_default_graph().seed = seed
