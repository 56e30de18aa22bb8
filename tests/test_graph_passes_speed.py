"""The graph passes' bookkeeping (asyncflow.graph_passes.PartitionView) against a
straightforward reference.

The view keeps who reads each node up to date through its own changes, so that a
fusion costs what it touches rather than the whole partition.  `_ReferenceView` answers
every question the passes ask the way the view did before (rebuilding the readers of
every node, scanning every node): on training graphs of the benchmark models' kinds
(unrolled and bidirectional LSTMs, a dynamic_rnn loop, a VAE, a CNN, a GAN, summaries,
optimizers) both must leave the same partition (op types, names, attrs, inputs,
control edges, order, fetches), and the view's index must match the nodes' lists after
every pass.  Speed is measured in benchmarks/plan_bench.py, not here.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph_passes, partition
from asyncflow.deadness import LOOP_OPS, MAY_BE_DEAD, RECV_OPS, Deadness
from asyncflow.devices.cpu import CPUDevice
from asyncflow.executor import _flat_input_is_ref
from asyncflow.graph_passes import PartitionView
from asyncflow.partition import Partition, PNode, make_op

pytestmark = pytest.mark.timeout(120)


class _ReferenceView(PartitionView):
    """PartitionView as it was before it kept an index: every query walks the whole
    partition (quadratic, simple)."""

    def __init__(self, partition, scratch_graph):
        super().__init__(partition, scratch_graph)
        self._keep_as_found()  # (consumers and reference reads, computed up front)

    def _index(self):
        raise AssertionError("the reference keeps no index")

    def _set_edges(self, k, inputs=None, controls=None):
        node = self.nodes[k]
        if inputs is not None:
            node.inputs = inputs
        if controls is not None:
            node.controls = controls

    def waiting_for_any(self, sources):
        return {i for i in range(len(self.nodes)) if set(sources) & self._upstream(i)}

    def upstream_masks(self):
        ups = [self._upstream(i) for i in range(len(self.nodes))]
        if any(i in up for i, up in enumerate(ups)):
            return None
        return [sum(1 << j for j in up) for up in ups]

    def has_control_flow(self):
        return any(n.op.type in MAY_BE_DEAD for n in self.nodes)

    def has_loops_or_recvs(self):
        return any(n.op.type in LOOP_OPS | RECV_OPS for n in self.nodes)

    def deadness(self):
        order = graph_passes._topological(list(range(len(self.nodes))), self.nodes)
        return Deadness(self.nodes, order)

    def order_before_writers(self, i, variables):
        if self.has_loops_or_recvs():
            return False
        writers = set()
        for w, node in enumerate(self.nodes):
            if w != i and w not in self._dead:
                is_ref = _flat_input_is_ref(node.op)
                if any(r and s[0] in variables and s[1] == 0 for r, s in zip(is_ref, node.inputs)):
                    writers.add(w)
        if not writers:
            return True
        if writers & self._upstream(i):
            return False
        if self.has_control_flow():
            dead = self.deadness()
            if any(not dead.node[i] <= dead.node[w] for w in writers):
                return False
        for w in writers:
            self.nodes[w].controls.append(i)
        return True

    def fuse(self, into, op_type, attrs, inputs, absorbed, outputs=None):
        dead = self.deadness() if self.has_control_flow() else None
        old = self.nodes[into]
        olds = list(old.op._outputs) + [self.nodes[j].op._outputs[k] for j, k in outputs or ()]
        op = make_op(self._graph, op_type, old.op.name, attrs, [], [t.dtype for t in olds])
        op.traceback = old.op.traceback
        for new_t, old_t in zip(op._outputs, olds):
            new_t._shape, new_t._is_ref = old_t._shape, old_t._is_ref
        gone = set(absorbed)
        if outputs:
            self._take_over(into, len(old.op._outputs), outputs, gone)
        pattern = gone | {into}
        for k, node in enumerate(self.nodes):
            if k not in pattern and gone.intersection(node.controls):
                waits: list[int] = []
                for c in node.controls:
                    for w in self._waited_for(c, set(), pattern) if c in gone else (c,):
                        if w not in waits:
                            waits.append(w)
                if dead is not None:
                    kept = set().union(*(dead.value(s) for s in node.inputs))
                    kept = kept.union(*(dead.node[w] for w in waits))
                    if kept != dead.node[k] and kept | dead.node[into] == dead.node[k]:
                        if k not in self._upstream(into):
                            waits.append(into)
                node.controls = waits
        after = self._downstream(pattern)
        sources = list(old.controls)
        for j in absorbed:
            sources.extend(self.nodes[j].controls)
            self._dead.add(j)
        controls: list[int] = []
        for c in sources:
            for k in self._waited_for(c, after, pattern) if c in after else (c,):
                if k not in controls:
                    controls.append(k)
        old.op, old.inputs, old.controls = op, list(inputs), controls
        self._taken.update(absorbed)
        self._taken.add(into)
        return op

    def drop_if_unused(self, i):
        if i in self._dead or i in self._fetched or self.nodes[i].op.op_def.stateful:
            return False
        for k, node in enumerate(self.nodes):
            if k not in self._dead and (i in node.controls or any(s[0] == i for s in node.inputs)):
                return False
        self._dead.add(i)
        self._taken.add(i)
        return True

    def _take_over(self, into, first, outputs, gone):
        moved = {tuple(src): (into, first + k) for k, src in enumerate(outputs)}
        for k, node in enumerate(self.nodes):
            if k != into and k not in gone:
                node.inputs = [moved.get(tuple(s), s) for s in node.inputs]
        targets = {j for j, _ in outputs}
        p = self.partition
        p.fetches = [
            (into, None) if f[0] in targets and f[1] is None else moved.get(tuple(f), f)
            for f in p.fetches
        ]

    def _upstream(self, i):
        seen, todo = set(), [i]
        while todo:
            node = self.nodes[todo.pop()]
            for j in [s[0] for s in node.inputs if s[0] != "feed"] + node.controls:
                if j not in seen:
                    seen.add(j)
                    todo.append(j)
        return seen

    def _downstream(self, roots):
        users: list[list[int]] = [[] for _ in self.nodes]
        for i, node in enumerate(self.nodes):
            for src in node.inputs:
                if src[0] != "feed" and self.nodes[src[0]].op.type != "NextIteration":
                    users[src[0]].append(i)
            for c in node.controls:
                users[c].append(i)
        seen, todo = set(), list(roots)
        while todo:
            for u in users[todo.pop()]:
                if u not in seen:
                    seen.add(u)
                    todo.append(u)
        return seen


def _check_index(view: PartitionView) -> None:
    """The view's readers of each node are what the nodes' lists say."""
    if view._users is None:
        return
    users = [set() for _ in view.nodes]
    waiters = [set() for _ in view.nodes]
    for i, node in enumerate(view.nodes):
        for src in node.inputs:
            if src[0] != "feed":
                users[src[0]].add(i)
        for c in node.controls:
            waiters[c].add(i)
    assert view._users == users
    assert view._waiters == waiters


def _run_passes(p: Partition, view_class) -> None:
    """graph_passes.run_graph_passes with `view_class` for the view."""
    scratch = tf.Graph()
    for rewrite in graph_passes.GRAPH_PASSES:
        view = view_class(p, scratch)
        rewrite(view)
        if view_class is PartitionView:
            _check_index(view)
        if view._dead:
            view.finish()
            assert graph_passes._acyclic(p.nodes), rewrite.__name__


def _attr(v) -> str:
    if isinstance(v, np.ndarray):
        return f"array({v.dtype},{v.shape},{hashlib.sha256(v.tobytes()).hexdigest()})"
    if isinstance(v, list | tuple):
        return "[" + ",".join(_attr(x) for x in v) + "]"
    return repr(v)


def _describe(p: Partition) -> list[str]:
    lines = []
    for i, n in enumerate(p.nodes):
        attrs = ",".join(f"{k}={_attr(v)}" for k, v in sorted(n.op._attrs.items()))
        inputs = [tuple(s) for s in n.inputs]
        lines.append(f"{i} {n.op.type} {n.op.name} {attrs} in={inputs} ctl={list(n.controls)}")
    lines.append(f"fetches={[tuple(f) for f in p.fetches]}")
    return lines


def _copy(p: Partition) -> Partition:
    q = Partition(p.device)
    for node in p.nodes:
        q.add(PNode(node.op, node.device, list(node.inputs), list(node.controls)))
    q.fetches = list(p.fetches)
    return q


def _compare(feeds, fetches) -> list[str]:
    """Run the passes over the fetches' CPU partition with both views; the fused op
    types the rewritten partition holds."""
    order = partition.prune(list(feeds), fetches)
    dev = CPUDevice("/job:localhost/replica:0/task:0/device:CPU:0")
    (p,), _ = partition.partition(
        order, dict.fromkeys(order, dev), list(feeds), fetches, tf.Graph()
    )
    fast, slow = _copy(p), _copy(p)
    _run_passes(fast, PartitionView)
    _run_passes(slow, _ReferenceView)
    got, want = _describe(fast), _describe(slow)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a == b
    return [n.op.type for n in fast.nodes if n.op.type.startswith("_")]


def _classifier(x_last, y, width, optimizer):
    rng = np.random.default_rng(3)
    w = tf.Variable(rng.standard_normal((width, 10)).astype(np.float32) * 0.1)
    b = tf.Variable(np.zeros(10, np.float32))
    logits = tf.matmul(x_last, w) + b
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    return loss, optimizer.minimize(loss)


def _lstm(kind: str):
    """A small form of the tutorials' LSTM classifiers: static_rnn (with a
    sequence_length: the Selects of zeros), static_bidirectional_rnn, dynamic_rnn."""
    x = tf.placeholder(tf.float32, [None, 6, 5])
    y = tf.placeholder(tf.int64, [None])
    steps = tf.unstack(x, 6, 1)
    if kind == "static":
        cell = tf.nn.rnn_cell.BasicLSTMCell(16)
        lengths = tf.fill(tf.shape(y), 6)
        outs, _ = tf.nn.static_rnn(cell, steps, dtype=tf.float32, sequence_length=lengths)
        last, width = outs[-1], 16
    elif kind == "bidirectional":
        fw, bw = tf.nn.rnn_cell.BasicLSTMCell(8), tf.nn.rnn_cell.BasicLSTMCell(8)
        outs, _, _ = tf.nn.static_bidirectional_rnn(fw, bw, steps, dtype=tf.float32)
        last, width = outs[-1], 16
    else:
        outs, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(16), x, dtype=tf.float32)
        last, width = outs[:, -1], 16
    loss, train = _classifier(last, y, width, tf.train.AdamOptimizer(0.01))
    return [x, y], [loss, train]


@pytest.mark.parametrize(
    "kind, fused",
    [
        ("static", {"_MatMulSumPair", "_MatMulSumEnd", "_FusedElementwise"}),
        ("bidirectional", {"_MatMulSumPair", "_FusedElementwise"}),
        ("dynamic", {"_MatMulPairAdd", "_FusedElementwise"}),
    ],
)
def test_lstm_training_graphs_rewrite_as_the_reference_does(kind, fused):
    with tf.Graph().as_default():
        types = _compare(*_lstm(kind))
    assert fused <= set(types), sorted(set(types))


def test_benchmark_models_rewrite_as_the_reference_does():
    """The benchmark models' shapes of graph (benchmarks/models/models.py), smaller."""
    rng = np.random.default_rng(5)

    def var(*shape):
        return tf.Variable(rng.standard_normal(shape).astype(np.float32) * 0.05)

    seen = set()
    with tf.Graph().as_default():  # a VAE: sampling, KL term, RMSProp-free Adam
        x = tf.placeholder(tf.float32, [None, 32])
        h = tf.nn.relu(tf.matmul(x, var(32, 24)) + var(24))
        mu, log_var = tf.matmul(h, var(24, 4)) + var(4), tf.matmul(h, var(24, 4)) + var(4)
        z = mu + tf.exp(0.5 * log_var) * tf.random_normal(tf.shape(mu))
        out = tf.nn.sigmoid(tf.matmul(tf.nn.relu(tf.matmul(z, var(4, 24)) + var(24)), var(24, 32)))
        rec = tf.reduce_sum(tf.square(x - out), 1)
        kl = -0.5 * tf.reduce_sum(1 + log_var - tf.square(mu) - tf.exp(log_var), 1)
        loss = tf.reduce_mean(rec + kl)
        seen.update(_compare([x], [loss, tf.train.AdamOptimizer(1e-3).minimize(loss)]))
    with tf.Graph().as_default():  # a GAN: two optimizers in one step
        zin, real = tf.placeholder(tf.float32, [None, 8]), tf.placeholder(tf.float32, [None, 16])
        gv, dv = [var(8, 12), var(12), var(12, 16)], [var(16, 12), var(12), var(12, 1)]

        def disc(v):
            return tf.nn.sigmoid(tf.matmul(tf.nn.relu(tf.matmul(v, dv[0]) + dv[1]), dv[2]))

        fake = tf.nn.sigmoid(tf.matmul(tf.nn.relu(tf.matmul(zin, gv[0]) + gv[1]), gv[2]))
        g_loss = -tf.reduce_mean(tf.log(disc(fake) + 1e-8))
        d_loss = -tf.reduce_mean(tf.log(disc(real) + 1e-8) + tf.log(1.0 - disc(fake) + 1e-8))
        trains = [
            tf.train.AdamOptimizer(2e-4).minimize(g_loss, var_list=gv),
            tf.train.AdamOptimizer(2e-4).minimize(d_loss, var_list=dv),
        ]
        seen.update(_compare([zin, real], [g_loss, *trains]))
    with tf.Graph().as_default():  # a LeNet-like CNN: convolutions, pooling, dropout
        x = tf.placeholder(tf.float32, [None, 12, 12, 1])
        y = tf.placeholder(tf.int64, [None])
        c = tf.nn.relu(tf.nn.conv2d(x, var(3, 3, 1, 4), [1, 1, 1, 1], "SAME") + var(4))
        c = tf.nn.max_pool(c, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        flat = tf.nn.dropout(tf.reshape(c, [-1, 6 * 6 * 4]), keep_prob=0.5)
        loss, train = _classifier(flat, y, 144, tf.train.AdamOptimizer(1e-3))
        seen.update(_compare([x, y], [loss, train]))
    with tf.Graph().as_default():  # the MLP (SGD), and summaries of its loss and weights
        x, y = tf.placeholder(tf.float32, [None, 20]), tf.placeholder(tf.int64, [None])
        w1 = var(20, 16)
        h = tf.nn.relu(tf.matmul(x, w1) + var(16))
        loss, train = _classifier(h, y, 16, tf.train.GradientDescentOptimizer(0.1))
        tf.summary.scalar("loss", loss)
        tf.summary.histogram("w1", w1)
        merged = tf.summary.merge_all()
        seen.update(_compare([x, y], [loss, merged, train]))
    for make in (
        lambda: tf.train.AdamOptimizer(1e-3),
        lambda: tf.train.RMSPropOptimizer(1e-3),
        lambda: tf.train.MomentumOptimizer(0.01, 0.9),
    ):
        with tf.Graph().as_default():  # an optimizer alone
            g = tf.placeholder(tf.float32, [30, 30])
            seen.update(_compare([g], [make().apply_gradients([(g, var(30, 30))])]))
    assert {"_FusedMatMul", "_FusedElementwise", "_FusedMergeSummary"} <= seen, sorted(seen)
