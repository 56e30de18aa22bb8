"""Graph passes: rewrites of one partition's nodes before it is lowered (TF's grappler).

A pass is `rewrite(view)`: it looks at the partition through a `PartitionView` and may
replace a pattern of nodes by one node of a registered internal op (`_FusedMatMul`,
`_FusedBiasAddRelu`, ...), whose kernel does the work of the pattern; the nodes it
absorbed are dropped.  The internal ops and their kernels live with their family in
ops/ (each pass beside them, testable alone on a graph); the order the passes run in
lives here, in `GRAPH_PASSES`, and only here: an earlier pass takes a node before a
later one can.

Invariant: a rewrite keeps what the partition computes: a node is absorbed only when
its value has no other consumer (no other node, no fetch, no reference read), and the
fused node takes over the absorbed nodes' inputs and control edges, in and out.
"""

from __future__ import annotations

from collections.abc import Callable

from asyncflow.executor import _flat_input_is_ref
from asyncflow.ops import matmul_ops, nn_ops
from asyncflow.partition import Partition, make_op, renumber

__all__ = ["GRAPH_PASSES", "PartitionView", "run_graph_passes"]


class PartitionView:
    """What a graph pass sees of a partition: its nodes, who consumes what, and the
    one way to change it (`fuse`)."""

    def __init__(self, partition: Partition, scratch_graph):
        self.partition = partition
        self.nodes = partition.nodes
        self._graph = scratch_graph
        self._dead: set[int] = set()
        self._taken: set[int] = set()
        self._consumers: list[list[tuple[int, int]]] = [[] for _ in self.nodes]
        for i, node in enumerate(self.nodes):
            for k, src in enumerate(node.inputs):
                if src[0] != "feed":
                    self._consumers[src[0]].append((i, k))
        self._fetched = {f[0] for f in partition.fetches if f[0] != "feed"}
        self._reads_ref = [self._derefs(node) for node in self.nodes]
        self._count = 0

    def _derefs(self, node) -> bool:
        """Whether the node reads a variable's value through a reference edge."""
        is_ref = _flat_input_is_ref(node.op)
        return any(
            src[0] != "feed" and not r and self.nodes[src[0]].op._outputs[src[1]]._is_ref
            for r, src in zip(is_ref, node.inputs)
        )

    def op(self, i: int):
        return self.nodes[i].op

    def device(self, i: int):
        return self.nodes[i].device

    def reads_ref(self, i: int) -> bool:
        return self._reads_ref[i]

    def source(self, i: int, k: int):
        """(node, output) feeding input k of node i; ("feed", n) for a feed."""
        return self.nodes[i].inputs[k]

    def sole_consumer(self, j: int) -> int | None:
        """The node that alone takes node j's outputs (one data edge, no fetch, not
        read through a reference), or None.  Control edges do not count."""
        users = self._consumers[j]
        if len(users) != 1 or j in self._fetched:
            return None
        i = users[0][0]
        return None if self._reads_ref[i] else i

    def available(self, *nodes: int) -> bool:
        """None of `nodes` was taken by an earlier rewrite."""
        return not self._taken.intersection(nodes)

    def fuse(self, into: int, op_type: str, attrs: dict, inputs: list, absorbed: list[int]):
        """Replace node `into` by a node of `op_type` taking `inputs`; the nodes of
        `absorbed` (each feeding only this pattern) are dropped, and their control
        edges, in and out, move to the fused node.  Returns the new op."""
        old = self.nodes[into]
        self._count += 1
        dtypes = [t.dtype for t in old.op._outputs]
        op = make_op(
            self._graph, op_type, f"{old.op.name}/_fused_{self._count}", attrs, [], dtypes
        )
        op.traceback = old.op.traceback  # errors name the user's line of the pattern
        for new_t, old_t in zip(op._outputs, old.op._outputs):
            new_t._shape = old_t._shape
        controls = list(old.controls)
        for j in absorbed:
            controls.extend(c for c in self.nodes[j].controls if c not in controls)
            self._dead.add(j)
        gone = set(absorbed)
        for node in self.nodes:  # control edges out of an absorbed node start here now
            if gone.intersection(node.controls):
                node.controls = list(
                    dict.fromkeys(into if c in gone else c for c in node.controls)
                )
        old.op, old.inputs, old.controls = op, list(inputs), controls
        self._taken.update(absorbed)
        self._taken.add(into)
        return op

    def finish(self) -> None:
        """Drop the absorbed nodes (renumbering the partition)."""
        if self._dead:
            keep = [i for i in range(len(self.nodes)) if i not in self._dead]
            renumber(self.partition, keep)


# The graph passes, in the order they run.  (Plan passes, which replace kernels of a
# lowered plan without changing its nodes, run after these: lowering.PLAN_PASSES.)
GRAPH_PASSES: list[Callable[[PartitionView], None]] = [
    matmul_ops.fuse_matmul_bias,
    nn_ops.fuse_bias_add_relu,
    nn_ops.fuse_max_pool_grad_relu_grad,
]


def run_graph_passes(partition: Partition, scratch_graph) -> None:
    for rewrite in GRAPH_PASSES:
        view = PartitionView(partition, scratch_graph)
        rewrite(view)
        view.finish()
