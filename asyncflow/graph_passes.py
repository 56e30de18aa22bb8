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

import heapq
from collections.abc import Callable

from asyncflow import errors
from asyncflow.deadness import LOOP_OPS, MAY_BE_DEAD, RECV_OPS, Deadness
from asyncflow.executor import _flat_input_is_ref
from asyncflow.ops import (
    fused_elementwise,
    matmul_ops,
    matmul_sum,
    nn_ops,
    select_zero,
    summary_ops,
    training_ops,
)
from asyncflow.partition import Partition, make_op, renumber

__all__ = ["GRAPH_PASSES", "PartitionView", "run_graph_passes"]


class PartitionView:
    """What a graph pass sees of a partition: its nodes, who consumes what, and the
    one way to change it (`fuse`).

    Invariant: every change to a node's inputs or control edges goes through the view
    (`fuse`, `order_before_writers`, `drop_control`), which keeps `_users` and
    `_waiters` (who reads each node now, dead nodes included) equal to what the nodes'
    lists say: the queries a fusion asks (who waits for the pattern, is a node still
    read) then cost what they touch, not the whole partition (a 2,400-node unrolled
    LSTM's passes took ~3 s rebuilding them once a fusion).  `_consumers`, `_fetched`
    and `_reads_ref` describe the partition as the pass found it."""

    def __init__(self, partition: Partition, scratch_graph):
        self.partition = partition
        self.nodes = nodes = partition.nodes
        self._graph = scratch_graph
        self._dead: set[int] = set()
        self._taken: set[int] = set()
        self._fetched = {f[0] for f in partition.fetches if f[0] != "feed"}
        # (Both built as asked, most passes change nothing; before a change, in full.)
        self._consumers_of: list[list[tuple[int, int]]] | None = None
        self._reads_ref: list[bool | None] = [None] * len(nodes)
        self._found_as_is = False
        self._users: list[set[int]] | None = None  # (built on first use: `_index`)
        self._waiters: list[set[int]] = []
        self._control_flow: bool | None = None
        self._loops: bool | None = None
        self._deadness: tuple | None = None  # (changes, Deadness), as `_masks`
        self._changes = 0  # (edges changed so often: `upstream_masks` is valid until one)
        self._masks: tuple | None = None

    @property
    def _consumers(self) -> list[list[tuple[int, int]]]:
        """(node, input) of every data edge out of each node, as the pass found them."""
        if self._consumers_of is None:
            consumers: list[list[tuple[int, int]]] = [[] for _ in self.nodes]
            for i, node in enumerate(self.nodes):
                for k, src in enumerate(node.inputs):
                    if src[0] != "feed":
                        consumers[src[0]].append((i, k))
            self._consumers_of = consumers
        return self._consumers_of

    def _keep_as_found(self) -> None:
        """Before the first change: what describes the partition as the pass found it,
        in full."""
        if not self._found_as_is:
            self._found_as_is = True
            self._consumers  # noqa: B018 (built now)
            for i in range(len(self.nodes)):
                self.reads_ref(i)

    def _derefs(self, node) -> bool:
        """Whether the node reads a variable's value through a reference edge."""
        nodes = self.nodes
        refs = [
            k
            for k, src in enumerate(node.inputs)
            if src[0] != "feed" and nodes[src[0]].op._outputs[src[1]]._is_ref
        ]
        if not refs:  # (most nodes: no reference comes in at all)
            return False
        is_ref = _flat_input_is_ref(node.op)
        return any(k < len(is_ref) and not is_ref[k] for k in refs)

    def _index(self) -> tuple[list[set[int]], list[set[int]]]:
        """(users, waiters): the nodes whose inputs name node j, and those whose control
        edges do, for each j."""
        if self._users is None:
            users: list[set[int]] = [set() for _ in self.nodes]
            waiters: list[set[int]] = [set() for _ in self.nodes]
            for i, node in enumerate(self.nodes):
                for src in node.inputs:
                    if src[0] != "feed":
                        users[src[0]].add(i)
                for c in node.controls:
                    waiters[c].add(i)
            self._users, self._waiters = users, waiters
        return self._users, self._waiters

    def _set_edges(self, k: int, inputs: list | None = None, controls: list | None = None):
        """Give node k new inputs and/or control edges, keeping the index."""
        self._keep_as_found()
        self._changes += 1
        node = self.nodes[k]
        if self._users is not None:
            if inputs is not None:
                old = {s[0] for s in node.inputs if s[0] != "feed"}
                new = {s[0] for s in inputs if s[0] != "feed"}
                for j in old - new:
                    self._users[j].discard(k)
                for j in new - old:
                    self._users[j].add(k)
            if controls is not None:
                old, new = set(node.controls), set(controls)
                for j in old - new:
                    self._waiters[j].discard(k)
                for j in new - old:
                    self._waiters[j].add(k)
        if inputs is not None:
            node.inputs = inputs
        if controls is not None:
            node.controls = controls

    def op(self, i: int):
        return self.nodes[i].op

    def device(self, i: int):
        return self.nodes[i].device

    def reads_ref(self, i: int) -> bool:
        r = self._reads_ref[i]
        if r is None:
            r = self._reads_ref[i] = self._derefs(self.nodes[i])
        return r

    def sole_consumer(self, j: int) -> int | None:
        """The node that alone takes node j's outputs (one data edge, no fetch, not
        read through a reference), or None.  Control edges do not count."""
        users = self._consumers[j]
        if len(users) != 1 or j in self._fetched:
            return None
        i = users[0][0]
        return None if self.reads_ref(i) else i

    def consumers(self, j: int) -> list[tuple[int, int]]:
        """(node, input) of every data edge out of node j."""
        return list(self._consumers[j])

    def upstream(self, i: int) -> set[int]:
        """Every node that node i waits for, through data or control edges."""
        return self._upstream(i)

    def upstream_masks(self) -> list[int] | None:
        """`upstream` of every node at once, as bit masks (bit j of entry i: node i
        waits for node j), or None when the partition has a cycle (a loop's back edge).
        For a pass that asks about paths between many nodes (each `upstream` walks the
        partition); valid until the partition changes."""
        if self._masks is None or self._masks[0] != self._changes:
            users, waiters = self._index()
            nodes = self.nodes
            preds = [
                {s[0] for s in node.inputs if s[0] != "feed"}.union(node.controls)
                for node in nodes
            ]
            masks = [0] * len(nodes)
            pending = [len(ps) for ps in preds]
            ready = [i for i, n in enumerate(pending) if not n]
            done = 0
            while ready:
                i = ready.pop()
                done += 1
                m = 0
                for j in preds[i]:
                    m |= masks[j] | 1 << j
                masks[i] = m
                for u in users[i].union(waiters[i]):
                    pending[u] -= 1
                    if not pending[u]:
                        ready.append(u)
            self._masks = (self._changes, masks if done == len(nodes) else None)
        return self._masks[1]

    def waiting_for_any(self, sources) -> set[int]:
        """Every node that waits, through data or control edges (a loop's back edge
        too), for one of `sources`: the nodes whose `upstream` meets `sources`."""
        users, waiters = self._index()
        seen: set[int] = set()
        todo = list(sources)
        while todo:
            j = todo.pop()
            for group in (users[j], waiters[j]):
                for u in group:
                    if u not in seen:
                        seen.add(u)
                        todo.append(u)
        return seen

    def drop_control(self, i: int, c: int) -> None:
        """Node i no longer waits for node c (every control edge between them goes)."""
        self._set_edges(i, controls=[w for w in self.nodes[i].controls if w != c])

    def chain_source(self, i: int, k: int):
        """(node, [Identities passed]) behind input k of node i, past Identities that
        each feed only the next step (gate_gradients' tf.tuple); None when the chain
        branches or starts at a feed."""
        src = self.nodes[i].inputs[k]
        passed, consumer = [], i
        while src[0] != "feed" and src[1] == 0 and self.sole_consumer(src[0]) == consumer:
            j = src[0]
            if self.nodes[j].op.type != "Identity":
                return j, passed
            passed.append(j)
            consumer, src = j, self.nodes[j].inputs[0]
        return None

    def variable_behind(self, src) -> int | None:
        """The variable node whose value `src` reads, past Identities (a `w/read`)."""
        j, out = src
        while j != "feed" and out == 0:
            op = self.nodes[j].op
            if op.type in ("VariableV2", "Variable"):
                return j
            if op.type != "Identity":
                return None
            j, out = self.nodes[j].inputs[0]
        return None

    def order_before_writers(self, i: int, variables) -> bool:
        """Make every node that updates one of `variables` (through a reference input)
        wait for node i (control edges), so that i reads their values from before the
        update.  False, adding nothing, when a writer is upstream of i (it would wait on
        itself), when the partition holds a while loop (no ordering edge may cross a
        frame's border) or receives from another (i could wait for a writer through
        it), or when a writer could be live where i is dead (i in a cond's branch):
        waiting for i would make it dead too."""
        if self.has_loops_or_recvs():
            return False
        users, waiters = self._index()
        nodes, n = self.nodes, len(self.nodes)
        readers = {w for v in variables if type(v) is int and 0 <= v < n for w in users[v]}
        writers = set()
        for w in readers:  # (a writer reads the variable: it is one of its users)
            if w != i and w not in self._dead:
                is_ref = _flat_input_is_ref(nodes[w].op)
                srcs = nodes[w].inputs
                if any(r and s[0] in variables and s[1] == 0 for r, s in zip(is_ref, srcs)):
                    writers.add(w)
        if not writers:
            return True
        # (Is a writer upstream of i?  Asked forwards: the updates end a training step,
        # little waits for them, while i may wait for most of the partition.)
        if i in self.waiting_for_any(writers):
            return False
        if self.has_control_flow():
            dead = self.deadness()
            if any(not dead.node[i] <= dead.node[w] for w in writers):
                return False
        self._keep_as_found()
        self._changes += 1
        if self._deadness is not None and self._deadness[0] == self._changes - 1:
            # (A writer's deadness holds i's: waiting for i changes no one's.)
            self._deadness = (self._changes, self._deadness[1])
        for w in writers:
            nodes[w].controls.append(i)
            waiters[i].add(w)
        return True

    def has_control_flow(self) -> bool:
        """Whether the partition has control flow or receives from another: whether a
        value of it may be dead (`deadness` says which)."""
        if self._control_flow is None:
            self._control_flow = any(n.op.type in MAY_BE_DEAD for n in self.nodes)
        return self._control_flow

    def has_loops_or_recvs(self) -> bool:
        """Whether the partition holds (part of) a while loop's frame or receives from
        another partition: where no pass adds an ordering edge or chains nodes."""
        if self._loops is None:
            self._loops = any(n.op.type in LOOP_OPS or n.op.type in RECV_OPS for n in self.nodes)
        return self._loops

    def deadness(self) -> Deadness:
        """Under which conditions each node and value of the partition is dead
        (asyncflow.deadness); valid until the partition changes."""
        if self._deadness is None or self._deadness[0] != self._changes:
            order = _topological(list(range(len(self.nodes))), self.nodes)
            self._deadness = (self._changes, Deadness(self.nodes, order))
        return self._deadness[1]

    def after_an_update(self, i: int) -> bool:
        """Whether node i waits (data or control edges) for a node that updates a
        variable through a reference input."""
        for w in self._upstream(i):
            node = self.nodes[w]
            if w not in self._dead and any(_flat_input_is_ref(node.op)):
                return True
        return False

    def available(self, *nodes: int) -> bool:
        """None of `nodes` was taken by an earlier rewrite."""
        return not self._taken.intersection(nodes)

    def fuse(
        self,
        into: int,
        op_type: str,
        attrs: dict,
        inputs: list,
        absorbed: list[int],
        outputs: list | None = None,
        extra: list | None = None,
    ):
        """Replace node `into` by a node of `op_type` taking `inputs`; the nodes of
        `absorbed` (each feeding only this pattern, unless it is one of `outputs`) are
        dropped, and their control edges, in and out, move to the fused node.  The
        fused node's outputs are `into`'s, then the values `outputs` lists ((node,
        output) of absorbed nodes), whose consumers and fetches it takes over, then new
        values of the dtypes `extra` lists, read by nothing yet (a later rewrite's node
        may).  Returns the new op."""
        self._keep_as_found()
        old = self.nodes[into]
        olds = list(old.op._outputs) + [self.nodes[j].op._outputs[k] for j, k in outputs or ()]
        dtypes = [t.dtype for t in olds] + list(extra or ())
        # The fused node keeps the name of the node it replaces, as TF's remapper does: its
        # value is that node's (fetches, traces and errors name it so).
        op = make_op(self._graph, op_type, old.op.name, attrs, [], dtypes)
        op.traceback = old.op.traceback  # errors name the user's line of the pattern
        for new_t, old_t in zip(op._outputs, olds):
            new_t._shape, new_t._is_ref = old_t._shape, old_t._is_ref
        gone = set(absorbed)
        pattern = gone | {into}
        _users, waiters = self._index()
        dead = None  # (the partition's deadness as found, where a waiter needs it)
        if self.has_control_flow() and any(waiters[g] - pattern for g in gone):
            dead = self.deadness()
        if outputs:
            self._take_over(into, len(old.op._outputs), outputs, gone)
        # A control edge out of an absorbed node (gate_gradients' group_deps waiting for
        # a MatMul the pattern swallows) now waits for what that node waited for: not for
        # the fused node, which may do more (an update the waiting node must precede).
        # (Each such node's new edges depend on the pattern's alone: any order will do.)
        # Where values may be dead, what the absorbed node waited for may not carry its
        # deadness (it read a Switch's port; the Switch's own control edge is live):
        # the node waits for the fused node too when that gives back its deadness
        # exactly (a constant in a cond's branch waiting for a MatMul the pass took).
        for k in sorted({k for g in gone for k in waiters[g]} - pattern):
            waits: list[int] = []
            for c in self.nodes[k].controls:
                for w in self._waited_for(c, set(), pattern) if c in gone else (c,):
                    if w not in waits:
                        waits.append(w)
            if dead is not None:
                kept: set = set()
                for src in self.nodes[k].inputs:
                    kept |= dead.value(src)
                for w in waits:
                    kept |= dead.node[w]
                lost = dead.node[k] - kept
                if lost and kept | dead.node[into] == dead.node[k]:
                    if k not in self._upstream(into):
                        waits.append(into)
            self._set_edges(k, controls=waits)
        # Control edges into the pattern move to the fused node.  One from a node that
        # itself waits for part of the pattern would close a cycle: the fused node waits
        # instead for what that node waited for outside the pattern (the other gradient
        # of a gate_gradients tuple, which may read the weights this node updates: were
        # it to run later, copy-on-write would copy them every step).
        sources = list(old.controls)
        for j in absorbed:
            sources.extend(self.nodes[j].controls)
        after = self._downstream(pattern) if sources else set()
        self._dead.update(absorbed)
        controls: list[int] = []
        for c in sources:
            for k in self._waited_for(c, after, pattern) if c in after else (c,):
                if k not in controls:
                    controls.append(k)
        if old.op.type in MAY_BE_DEAD or op_type in MAY_BE_DEAD:
            self._control_flow = self._loops = None
        old.op = op
        self._set_edges(into, list(inputs), controls)
        self._taken.update(absorbed)
        self._taken.add(into)
        return op

    def drop_if_unused(self, i: int) -> bool:
        """Drop node i if it is pure and nothing reads it any more (no data or control
        edge, no fetch): shape arithmetic whose readers a rewrite absorbed."""
        if i in self._dead or i in self._fetched or self.nodes[i].op.op_def.stateful:
            return False
        users, waiters = self._index()
        dead = self._dead
        if any(k not in dead for k in users[i]) or any(k not in dead for k in waiters[i]):
            return False
        self._dead.add(i)
        self._taken.add(i)
        return True

    def _take_over(self, into: int, first: int, outputs: list, gone: set) -> None:
        """Point the consumers and fetches of `outputs` at outputs `first`, ... of node
        `into`."""
        moved = {tuple(src): (into, first + k) for k, src in enumerate(outputs)}
        targets = {j for j, _ in outputs}
        users, _waiters = self._index()
        for k in sorted({k for j in targets for k in users[j]}):
            if k != into and k not in gone:
                inputs = [moved.get(tuple(s), s) for s in self.nodes[k].inputs]
                self._set_edges(k, inputs=inputs)
        p = self.partition
        p.fetches = [
            (into, None) if f[0] in targets and f[1] is None else moved.get(tuple(f), f)
            for f in p.fetches
        ]

    def _waited_for(self, c: int, after: set[int], pattern: set[int]) -> list[int]:
        """The nodes outside `after` and `pattern` that node c waits for, directly or
        through nodes of `after` or `pattern` (data and control edges; a loop's back
        edge is not waited for within an iteration)."""
        out, seen, todo = [], {c}, [c]
        while todo:
            node = self.nodes[todo.pop()]
            for j in [s[0] for s in node.inputs if s[0] != "feed"] + node.controls:
                if j in seen or self.nodes[j].op.type == "NextIteration":
                    continue
                seen.add(j)
                if j in after or j in pattern:
                    todo.append(j)
                else:
                    out.append(j)
        return out

    def _upstream(self, i: int) -> set[int]:
        """Every node that node i waits for, through data or control edges."""
        nodes = self.nodes
        seen: set[int] = set()
        todo = [i]
        while todo:
            node = nodes[todo.pop()]
            for src in node.inputs:
                j = src[0]
                if j != "feed" and j not in seen:
                    seen.add(j)
                    todo.append(j)
            for j in node.controls:
                if j not in seen:
                    seen.add(j)
                    todo.append(j)
        return seen

    def _downstream(self, roots: set[int]) -> set[int]:
        """Every node that waits, through data or control edges, for one of `roots`
        in the same iteration (a loop's back edge into its Merge does not count)."""
        users, waiters = self._index()
        nodes = self.nodes
        seen: set[int] = set()
        todo = list(roots)
        while todo:
            j = todo.pop()
            if nodes[j].op.type != "NextIteration":
                for u in users[j]:
                    if u not in seen:
                        seen.add(u)
                        todo.append(u)
            for u in waiters[j]:
                if u not in seen:
                    seen.add(u)
                    todo.append(u)
        return seen

    def finish(self) -> None:
        """Drop the absorbed nodes, renumbering the partition in a topological order (a
        fused node's consumers may have come before it), as close to the old one as
        that allows."""
        if self._dead:
            renumber(
                self.partition,
                _topological(
                    [i for i in range(len(self.nodes)) if i not in self._dead], self.nodes
                ),
            )


# The graph passes, in the order they run.  (Plan passes, which replace kernels of a
# lowered plan without changing its nodes, run after these: lowering.PLAN_PASSES.)
GRAPH_PASSES: list[Callable[[PartitionView], None]] = [
    summary_ops.fuse_summaries,  # (before the ordering, which then orders the fused op)
    summary_ops.order_before_updates,  # (adds control edges only: before other fusions)
    matmul_ops.fuse_matmul_bias,
    matmul_sum.merge_matmul_rows,  # (two of those of one layer: after they formed)
    matmul_ops.fuse_matmul_relu_grad,
    nn_ops.fuse_conv2d_bias_add_relu,  # (before the BiasAdd + Relu pair is taken)
    nn_ops.fuse_bias_add_relu,
    nn_ops.fuse_max_pool_grad_relu_grad,
    training_ops.fuse_matmul_into_updates,
    matmul_sum.fuse_matmul_add_n,  # (after the updates took their single products)
    matmul_sum.pair_matmuls,  # (two products of one operand: after the sums took theirs)
    matmul_sum.accumulate_pair_products,  # (a pair's product into its Add's accumulator)
    select_zero.fuse_select_zero,
    # what the pattern fusions left of the element-wise nodes, in clusters; then a join
    # of one cluster's outputs, given to its fused node
    fused_elementwise.fuse_elementwise,
    fused_elementwise.fuse_concat_outputs,
    fused_elementwise.fuse_split_inputs,  # (a Split whose pieces one program reads)
    fused_elementwise.fuse_bias_add_grad,  # (a BiasAddGrad of a program's join)
    matmul_ops.fuse_concat_matmul,  # (a join that a product reads: after the joins' fusions)
    fused_elementwise.mark_shape_only_outputs,  # (last: no reader comes after it)
]


def run_graph_passes(partition: Partition, scratch_graph) -> None:
    """Run GRAPH_PASSES over `partition` in order.

    Raises InternalError if a pass left a cycle (a step would wait forever)."""
    for rewrite in GRAPH_PASSES:
        view = PartitionView(partition, scratch_graph)
        rewrite(view)
        if view._dead:
            view.finish()
            if not _acyclic(partition.nodes):
                raise errors.InternalError(
                    None, None, f"graph pass {rewrite.__name__} made a cycle in a partition"
                )


def _topological(keep: list[int], nodes) -> list[int]:
    """`keep` (node indices) in a topological order, each node as early in the old
    order as its inputs allow (loop back edges into a Merge do not count); a cycle's
    nodes are left at the end, for `_acyclic` to report."""
    keep_set = set(keep)
    pending = dict.fromkeys(keep, 0)
    users: dict[int, list[int]] = {i: [] for i in keep}
    for i in keep:
        node = nodes[i]
        for j in [s[0] for s in node.inputs if s[0] != "feed"] + node.controls:
            if j in keep_set and nodes[j].op.type != "NextIteration":
                pending[i] += 1
                users[j].append(i)
    ready = [i for i in keep if not pending[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if not pending[u]:
                heapq.heappush(ready, u)
    if len(order) < len(keep):
        placed = set(order)
        order.extend(i for i in keep if i not in placed)
    return order


def _acyclic(nodes) -> bool:
    """Whether the nodes can run (loop back edges into a Merge do not count)."""
    pending, users = [0] * len(nodes), [[] for _ in nodes]
    for i, node in enumerate(nodes):
        for j in [s[0] for s in node.inputs if s[0] != "feed"] + node.controls:
            if nodes[j].op.type != "NextIteration":
                pending[i] += 1
                users[j].append(i)
    ready = [i for i, c in enumerate(pending) if not c]
    done = 0
    while ready:
        done += 1
        for u in users[ready.pop()]:
            pending[u] -= 1
            if not pending[u]:
                ready.append(u)
    return done == len(nodes)
