"""Deadness analysis of a partition: which values may be dead, and under what conditions
(TF's executor semantics, as asyncflow/frames.py runs them).

A graph pass that fuses nodes or adds an ordering edge changes when nodes wait for each
other; where values may be dead (a cond's branches, a loop's body, a Recv), that can
change which nodes run: a control edge from a node that is dead in a cond's untaken
branch makes its waiter dead too.  The passes ask this analysis instead of refusing
every partition that holds a Switch.

Every value gets a set of *sources* of deadness; a value is dead exactly when one of its
sources is.  Sources: a Switch output port under its predicate tensor, past Identities
(every Switch reading that predicate takes the same port in an iteration: a loop's
Switches all read its LoopCond, a cond's its pred, the pivot's directly, the data
Switches through `pred_id`), a Merge or an Exit this analysis cannot see through, a
_Recv, a ControlTrigger (each a source of its own).  Every other node is dead when any
input or control edge is: the union of theirs.

A cond's Merge joins values whose sets are one set A plus the two ports of one
predicate (A | {p:0} and A | {p:1}): for a live predicate exactly one port is taken, so
the Merge is dead exactly when A is (the predicate's own deadness is in A, since a
Switch waits for it); after a cond (nested ones too) values are live under the same
conditions as before it.  A loop's Merge (an Enter and a NextIteration) is live in each
iteration that runs exactly when its Enter's value is, a dead NextIteration starting no
iteration; a loop's Exit (its Switch's false port) once, when the loop's Enters were
live.

Invariant: the sets over-approximate: a value whose set holds only sources that are
live is live.  Two values with equal sets are dead together; a node whose set holds
another's is dead whenever that one is (so it may wait for it without changing when it
runs).
"""

from __future__ import annotations

__all__ = ["Deadness", "LOOP_OPS", "MAY_BE_DEAD", "RECV_OPS"]

# Ops that make values of a partition possibly dead (or, for _Recv, that receive
# values another partition may have made dead).
MAY_BE_DEAD = frozenset(
    ["Switch", "Merge", "Enter", "Exit", "NextIteration", "ControlTrigger", "_Recv", "_HostRecv"]
)
# Ops of a while loop's frame: a node inside one runs once per iteration, in the frame's
# own iterations, where no ordering edge may cross the frame's border.
LOOP_OPS = frozenset(["Enter", "Exit", "NextIteration"])
# Ops receiving from another partition: a value received may wait, through the other
# partition, for any node of this one (which no path inside the partition shows).
RECV_OPS = frozenset(["_Recv", "_HostRecv"])


class Deadness:
    """The deadness sources of every node and value of a partition's nodes, visited in
    `order` (topological, a loop's back edge aside).

    `node[i]`: node i's own sets (what a control edge out of it carries); `value(src)`:
    the set of one (node, output) value."""

    def __init__(self, nodes, order: list[int]):
        self.nodes = nodes
        self._interned: dict = {}
        empty = self._intern(frozenset())
        self.node: list = [empty] * len(nodes)
        self.ports: dict[int, tuple] = {}  # Switch: the sets of outputs 0 and 1
        self._loop_merges: set[int] = set()  # (seen through: live as their Enter)
        for i in order:
            node = nodes[i]
            t = node.op.type
            if t == "Merge":
                self.node[i] = self._merge(i)
                continue
            if t == "Exit":
                self.node[i] = self._exit(i)
                continue
            if t in ("_Recv", "_HostRecv", "ControlTrigger"):
                self.node[i] = self._intern(frozenset([(t, i)]))
                continue
            base = set()
            for src in node.inputs:
                base |= self.value(src)
            for c in node.controls:
                base |= self.node[c]
            if t == "Switch" and len(node.inputs) == 2:
                pred = self._root(node.inputs[1])
                self.ports[i] = tuple(
                    self._intern(frozenset(base | {("switch", pred, k)})) for k in (0, 1)
                )
            self.node[i] = self._intern(frozenset(base))

    def _root(self, src) -> tuple:
        """The value `src` passes on unchanged, past Identities: a Switch's predicate
        key.  tf.cond's pivot Switch reads the predicate itself, its data Switches
        `pred_id`, an Identity of it: keyed alike, the constants of a branch (which
        wait for the pivot) and its values are dead together."""
        nodes = self.nodes
        while src[0] != "feed" and src[1] == 0 and nodes[src[0]].op.type == "Identity":
            src = nodes[src[0]].inputs[0]
        return tuple(src)

    def _intern(self, labels: frozenset) -> frozenset:
        return self._interned.setdefault(labels, labels)

    def _merge(self, i: int) -> frozenset:
        srcs = self.nodes[i].inputs
        if "feed" in (s[0] for s in srcs):
            return self._intern(frozenset([("Merge", i)]))
        types = [self.nodes[j].op.type for j, _ in srcs]
        if len(srcs) == 2 and sorted(types) == ["Enter", "NextIteration"]:
            enter = srcs[types.index("Enter")]
            if not self.nodes[enter[0]].op._attrs.get("is_constant", False):
                self._loop_merges.add(i)
                return self.value(enter)
            return self._intern(frozenset([("Merge", i)]))
        # (A Merge waiting on control edges as well: TF's rules for a dead one there
        # are its own; keep it a source.)
        joined = None if self.nodes[i].controls else self._cond_join([self.value(s) for s in srcs])
        if joined is None:
            return self._intern(frozenset([("Merge", i)]))
        return self._intern(joined)

    @staticmethod
    def _cond_join(sets: list[frozenset]) -> frozenset | None:
        """The set of a Merge of values with `sets`, when this analysis sees through it:
        every set is one set A, or A plus one port of one predicate, both ports of it
        among them (a cond's two branches); else None."""
        if not sets:
            return None
        common = frozenset.intersection(*sets)
        pred, ports = None, set()
        for s in sets:
            extra = s - common
            if not extra:
                continue
            if len(extra) != 1:
                return None
            (label,) = extra
            if label[0] != "switch" or (pred is not None and label[1] != pred):
                return None
            pred = label[1]
            ports.add(label[2])
        if pred is not None and ports != {0, 1}:
            return None
        return common

    def _exit(self, i: int) -> frozenset:
        """A loop's Exit (of its Switch's false port) is live, once, exactly when its
        loop ran: when the Switch's inputs are live (its frame's Enters were)."""
        (j, k), *_ = self.nodes[i].inputs
        if j != "feed" and k == 0 and j in self.ports:
            (m, _), _pred = self.nodes[j].inputs
            if m in self._loop_merges:
                return self.node[j]
        return self._intern(frozenset([("Exit", i)]))

    def value(self, src) -> frozenset:
        j, k = src[0], src[1]
        if j == "feed":
            return frozenset()
        ports = self.ports.get(j)
        return ports[k] if ports is not None and k < 2 else self.node[j]

    def without_control(self, i: int, c: int) -> set:
        """Node i's deadness sources were it not to wait for node c."""
        node = self.nodes[i]
        d = set()
        for src in node.inputs:
            d |= self.value(src)
        for w in node.controls:
            if w != c:
                d |= self.node[w]
        return d
