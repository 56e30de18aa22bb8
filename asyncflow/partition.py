"""Pruning and partitioning: from (feeds, fetches) to one node list per device.

`prune` keeps what the fetches need given the feeds (whitepaper §4.2: a fed tensor
cuts its producer off).  `partition` cuts the placed, pruned graph into one subgraph
per device (whitepaper §3.2.2, Figure 4): every data edge between devices becomes
_Send → _Recv, with ONE _Recv per (tensor, destination device) shared by all its
consumers there; a control edge between devices is carried by a _Send of a dummy
value after the source and a _Recv before the destination.  Feeds go to whichever
partition consumes them; a fetch comes from the partition holding its producer.

The output is plain data (`PNode`s) that `lowering.compile_plan` lays out flat.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, errors, rendezvous, tensor_shape
from asyncflow.graph import Operation, Tensor
from asyncflow.registry import get_op_def

__all__ = [
    "LOSSY_TRANSFER_COLLECTION",
    "PNode",
    "client_ends",
    "make_op",
    "partition",
    "prune",
    "renumber",
    "set_lossy_transfer",
]

LOSSY_TRANSFER_COLLECTION = "_lossy_transfer_tensors"


def set_lossy_transfer(tensor: Tensor, enabled: bool = True) -> None:
    """Send `tensor` between devices as 16-bit truncated floats (whitepaper §5.5)."""
    coll = tensor.graph.get_collection_ref(LOSSY_TRANSFER_COLLECTION)
    if enabled and tensor.name not in coll:
        coll.append(tensor.name)
    elif not enabled and tensor.name in coll:
        coll.remove(tensor.name)


class PNode:
    """One node of a partition: an op, its device, and where its inputs come from.

    `inputs[k]` is `("feed", i)` or `(node_index, output_index)` within the partition;
    `controls` lists node indices.
    """

    __slots__ = ("op", "device", "inputs", "controls")

    def __init__(self, op, device, inputs=None, controls=None):
        self.op = op
        self.device = device
        self.inputs = inputs if inputs is not None else []
        self.controls = controls if controls is not None else []


def prune(feeds: list[Tensor], fetches: list) -> list[Operation]:
    """The ops `fetches` need given `feeds`, in topological order.

    Raises InvalidArgumentError for a cycle.
    """
    fed = set(feeds)
    fed_placeholders = fed_placeholder_ops(feeds)
    order: list[Operation] = []
    seen: set[Operation] = set()
    visiting: set[Operation] = set()

    back_edges: list[Operation] = []

    def needs(op: Operation) -> list[Operation]:
        # A NextIteration input is a loop's back edge: needed, but ordered after its
        # consumer (a Merge), so it is visited as a root of its own instead.
        deps = []
        for t in op._inputs:
            if t in fed:
                continue
            if t.op.op_def.name == "NextIteration":
                back_edges.append(t.op)
            else:
                deps.append(t.op)
        deps.extend(c for c in op._control_inputs if c not in fed_placeholders)
        return deps

    # Iterative post-order DFS (graphs of 100k nodes must not hit the recursion limit).
    roots = [
        f.op if isinstance(f, Tensor) else f
        for f in fetches
        if not (isinstance(f, Tensor) and f in fed)
    ]
    for root in _roots_then_back_edges(roots, back_edges):
        if root in seen:
            continue
        stack = [(root, iter(needs(root)))]
        visiting.add(root)
        while stack:
            op, it = stack[-1]
            for dep in it:
                if dep in seen:
                    continue
                if dep in visiting:
                    raise errors.InvalidArgumentError(
                        None, op, f"Graph has a cycle through {dep.name} and {op.name}"
                    )
                visiting.add(dep)
                stack.append((dep, iter(needs(dep))))
                break
            else:
                stack.pop()
                visiting.discard(op)
                seen.add(op)
                order.append(op)
    return order


def fed_placeholder_ops(feeds) -> set:
    """Placeholders whose value is fed: control edges from them are satisfied by the
    feed (TF's subgraph rewrite moves them to the fed value), they never run."""
    return {t.op for t in feeds if t.op.type in ("Placeholder", "PlaceholderV2")}


def _roots_then_back_edges(roots, back_edges):
    yield from roots
    while back_edges:  # grows while the back edges' own inputs are visited
        yield back_edges.pop()


class Partition:
    """The nodes of one device, and which global fetches it produces."""

    __slots__ = ("device", "nodes", "fetches", "fetch_ids", "index", "copies")

    def __init__(self, device):
        self.device = device
        self.nodes: list[PNode] = []
        self.fetches: list = []  # specs as compile_plan takes them
        self.fetch_ids: list[int] = []  # which global fetch each one answers
        self.index: dict[Operation, int] = {}
        self.copies: dict | None = None  # (source, to_host) -> its _DeviceCopy node

    def add(self, node: PNode) -> int:
        self.index[node.op] = len(self.nodes)
        self.nodes.append(node)
        return len(self.nodes) - 1


_CF_PRIMS = frozenset(["Enter", "Merge", "Switch", "LoopCond", "NextIteration", "Exit"])


def static_frames(ops) -> tuple[dict, dict]:
    """Each op's loop frame name (None for the root) and each frame's parent frame.

    `ops` is in topological order except for loop back edges (NextIteration inputs),
    which are skipped: a Merge takes its frame from its Enter input.
    """
    frame_of: dict = {}
    parent: dict = {}

    def frame_of_value(src):
        f = frame_of[src]
        if src.type == "Enter":
            name = src._attrs["frame_name"]
            parent.setdefault(name, f)
            return name
        if src.type == "Exit":
            return parent.get(f)
        return f

    for op in ops:
        srcs = [t.op for t in op._inputs if t.op.type != "NextIteration"]
        srcs.extend(op._control_inputs)
        frame = None
        for src in srcs:
            if src in frame_of:
                frame = frame_of_value(src)
                break
        frame_of[op] = frame
    return frame_of, parent


def partition(order, assignment, feeds, fetches, scratch_graph, lossy_all=False):
    """Cut placed `order` into per-device Partitions joined by _Send/_Recv pairs.

    A loop whose body spans devices (whitepaper §4.4): its primitives live on one
    "home" device (the placer keeps them together); every other device running part
    of the body gets its own control-loop state (Enter → Merge → Switch on the loop's
    predicate, received from home each iteration → Identity → NextIteration), and
    every _Recv inside the loop runs in that frame, so Send/Recv pairs meet per frame
    and iteration.
    """
    fed = {t: i for i, t in enumerate(feeds)}
    fed_placeholders = fed_placeholder_ops(feeds)
    parts: dict = {}
    frame_of, frame_parent = static_frames(order)
    home: dict = {}  # frame -> (device, its LoopCond op)
    for op in order:
        if op.type == "LoopCond" and frame_of[op] is not None:
            home[frame_of[op]] = (assignment[op], op)
    # What a _Recv on the home device waits for to run in each iteration: a loop Merge
    # there (it fires every iteration, before the predicate), not the LoopCond, which
    # may itself wait for that _Recv (a predicate computed on another device).
    home_merge: dict = {}
    for op in order:
        f = frame_of.get(op)
        if op.type == "Merge" and f in home and f not in home_merge:
            if assignment[op] is home[f][0]:
                home_merge[f] = op
    loop_states: dict = {}  # (frame, device) -> index of that device's Merge
    graph = order[0].graph if order else None
    lossy_names = set(graph.get_collection(LOSSY_TRANSFER_COLLECTION)) if graph else set()
    recvs: dict[tuple, int] = {}  # (tensor or ("ctrl", op), dst device) -> recv node idx
    counter = [0]

    def part(dev) -> Partition:
        p = parts.get(dev)
        if p is None:
            p = parts[dev] = Partition(dev)
        return p

    def value_frame(t_or_op):
        op = t_or_op.op if isinstance(t_or_op, Tensor) else t_or_op
        f = frame_of.get(op)
        if op.type == "Enter" and isinstance(t_or_op, Tensor):
            return op._attrs["frame_name"]
        if op.type == "Exit":
            return frame_parent.get(f)
        return f

    def anchor(frame, dev) -> int:
        """A node on `dev` that runs (live) in every iteration of `frame`."""
        home_dev, cond = home[frame]
        if dev is home_dev:
            return part(dev).index[home_merge.get(frame, cond)]
        return loop_state(frame, dev)

    def loop_state(frame, dev) -> int:
        """Build `dev`'s control-loop state for `frame`; index of its Merge."""
        idx = loop_states.get((frame, dev))
        if idx is not None:
            return idx
        from asyncflow import dtypes

        home_dev, cond = home[frame]
        p = part(dev)
        i32 = dtypes.int32
        counter[0] += 1
        base = f"_loop_{frame}_{counter[0]}"
        up = frame_parent.get(frame)
        start = p.add(
            PNode(
                _dummy_const(scratch_graph, counter[0]),
                dev,
                [],
                [anchor(up, dev)] if up is not None else [],
            )
        )
        parallel = 10
        for op in order:
            if op.type == "Enter" and op._attrs["frame_name"] == frame:
                parallel = op._attrs["parallel_iterations"]
                break
        enter = p.add(
            PNode(
                make_op(
                    scratch_graph,
                    "Enter",
                    base + "/Enter",
                    {
                        "T": i32,
                        "frame_name": frame,
                        "is_constant": False,
                        "parallel_iterations": parallel,
                    },
                    [],
                    [i32],
                ),
                dev,
                [(start, 0)],
            )
        )
        merge_op = make_op(
            scratch_graph, "Merge", base + "/Merge", {"T": i32, "N": 2}, [], [i32, i32]
        )
        merge = p.add(PNode(merge_op, dev))
        loop_states[(frame, dev)] = merge
        pred = cut(cond.outputs[0], home_dev, dev, recv_control=merge)
        switch = p.add(
            PNode(
                make_op(scratch_graph, "Switch", base + "/Switch", {"T": i32}, [], [i32, i32]),
                dev,
                [(merge, 0), (pred, 0)],
            )
        )
        pivot = p.add(
            PNode(
                make_op(scratch_graph, "Identity", base + "/Identity", {"T": i32}, [], [i32]),
                dev,
                [(switch, 1)],
            )
        )
        nxt = p.add(
            PNode(
                make_op(
                    scratch_graph, "NextIteration", base + "/NextIteration", {"T": i32}, [], [i32]
                ),
                dev,
                [(pivot, 0)],
            )
        )
        p.nodes[merge].inputs = [(enter, 0), (nxt, 0)]
        return merge

    def cut(t_or_op, src_dev, dst_dev, recv_control=None) -> int:
        """Index in dst's partition of the _Recv for `t_or_op` (creating the pair)."""
        key = (t_or_op, dst_dev)
        idx = recvs.get(key)
        if idx is not None:
            return idx
        src, dst = part(src_dev), part(dst_dev)
        counter[0] += 1
        if isinstance(t_or_op, Tensor):
            t = t_or_op
            name, dtype, shape = t.name, t.dtype, t.shape
            lossy = (lossy_all or t.name in lossy_names) and dtype.name == "float32"
            src_input = [(src.index[t.op], t._value_index)]
            src_controls = []
        else:  # a control edge: send a dummy scalar after the source op runs
            op = t_or_op
            name, lossy = f"{op.name}/_control", False
            dummy = _dummy_const(scratch_graph, counter[0])
            dummy_idx = src.add(PNode(dummy, src_dev, [], [src.index[op]]))
            from asyncflow import dtypes

            dtype, shape = dtypes.int32, tensor_shape.TensorShape([])
            src_input = [(dummy_idx, 0)]
            src_controls = []
        key_str = rendezvous.create_key(src_dev.name, src_dev.incarnation, dst_dev.name, name)
        attrs = {
            "tensor_name": name,
            "send_device": src_dev.name,
            "send_device_incarnation": src_dev.incarnation,
            "recv_device": dst_dev.name,
            "client_terminated": False,
            "lossy": bool(lossy),
            "key": key_str,
        }
        base = f"_send_{name.replace(':', '_')}_{counter[0]}"
        send_op = make_op(scratch_graph, "_Send", base, {**attrs, "T": dtype}, [dtype])
        src.add(PNode(send_op, src_dev, src_input, src_controls))
        recv_op = make_op(
            scratch_graph,
            "_Recv",
            base.replace("_send_", "_recv_"),
            {**attrs, "tensor_type": dtype, "shape": shape},
            [],
            out_dtype=dtype,
        )
        idx = dst.add(PNode(recv_op, dst_dev, [], []))
        recvs[key] = idx
        frame = value_frame(t_or_op)
        if recv_control is not None:
            dst.nodes[idx].controls = [recv_control]
        elif frame is not None and frame in home:
            # A value inside a loop: its _Recv must run in the same frame and iteration.
            dst.nodes[idx].controls = [anchor(frame, dst_dev)]
        return idx

    for op in order:  # first give every op its index, so back edges can refer to it
        part(assignment[op]).add(PNode(op, assignment[op]))
    for op in order:
        dev = assignment[op]
        p = part(dev)
        node = p.nodes[p.index[op]]
        inputs = []
        for t in op._inputs:
            if t in fed:
                inputs.append(("feed", fed[t]))
            elif assignment[t.op] is dev:
                inputs.append((p.index[t.op], t._value_index))
            else:
                inputs.append((cut(t, assignment[t.op], dev), 0))
        controls = []
        for c in op._control_inputs:
            if c in fed_placeholders:
                continue  # fed: its value is there when the step starts
            if assignment[c] is dev:
                controls.append(p.index[c])
            else:
                controls.append(cut(c, assignment[c], dev))
        node.inputs, node.controls = inputs, controls

    for p in list(parts.values()):
        if p.device is not None and not p.device.host_memory:
            _insert_memory_copies(p, feeds, scratch_graph, counter)

    fetch_map = []
    default_dev = next(iter(parts)) if parts else None
    for k, f in enumerate(fetches):
        if isinstance(f, Tensor) and f in fed:
            p = part(default_dev) if default_dev is not None else None
            if p is None:
                p = part(None)
            spec = ("feed", fed[f])
        elif isinstance(f, Tensor):
            p = part(assignment[f.op])
            spec = (p.index[f.op], f._value_index)
        else:
            p = part(assignment[f])
            spec = (p.index[f], None)
        if spec[1] is not None and spec[0] != "feed" and p.device is not None:
            spec = _fetch_on_host(p, spec, scratch_graph, counter)
        fetch_map.append((p, len(p.fetches)))
        p.fetches.append(spec)
        p.fetch_ids.append(k)
    for p in parts.values():
        if p.device is not None and not p.device.host_memory:
            _topological_order(p)
    return list(parts.values()), fetch_map


# -- host <-> device copies on one device ------------------------------------------------
#
# On a device with memory of its own (`device.host_memory` False), every value is in
# device memory except what a kernel registration declares host memory (shape and axis
# arguments, Shape's output, ...; `OpDef.host_memory_positions`).  Feeds arrive in host
# memory and fetches leave in it.  Where the two ends of an edge disagree, a _DeviceCopy
# joins them (one per value and direction, shared by its consumers), inside loop frames
# as outside.


def _output_in_host(pnode, device) -> list[bool]:
    op = pnode.op
    if op.type == "_DeviceCopy":
        return [bool(op._attrs["to_host"])]
    # A resource handle is a host object wherever its resource lives (TF's HostMemory
    # "resource" on every GPU kernel): it never moves to device memory.
    host = [t.dtype.base_dtype == dtypes.resource for t in op._outputs] or [False]
    for k in op.op_def.host_memory_positions(op._attrs, device.device_type)[1]:
        host[k] = True
    return host


def _copy_node(p, src, dtype, to_host: bool, graph, counter, cache) -> int:
    idx = cache.get((src, to_host))
    if idx is None:
        counter[0] += 1
        where = "to_host" if to_host else "from_host"
        constant = not to_host and src[0] != "feed" and p.nodes[src[0]].op.type == "Const"
        op = make_op(
            graph,
            "_DeviceCopy",
            f"_copy_{where}_{counter[0]}",
            {"T": dtype, "to_host": to_host, "constant": constant},
            [dtype],
            dtype,
        )
        idx = cache[(src, to_host)] = p.add(PNode(op, p.device, [src], []))
    return idx


def _insert_memory_copies(p, feeds, graph, counter) -> None:
    device = p.device
    cache = p.copies = {}
    out_host = [_output_in_host(node, device) for node in p.nodes]
    for node in list(p.nodes):
        if node.op.type == "_DeviceCopy":
            continue
        op = node.op
        in_host = op.op_def.host_memory_positions(op._attrs, device.device_type)[0]
        for k, src in enumerate(node.inputs):
            if src[0] == "feed":
                have, dtype = True, feeds[src[1]].dtype
            else:
                have = out_host[src[0]][src[1]]
                dtype = p.nodes[src[0]].op._outputs[src[1]].dtype
            want = k in in_host or dtype.base_dtype == dtypes.resource
            if have != want:
                node.inputs[k] = (_copy_node(p, src, dtype, want, graph, counter, cache), 0)


def _fetch_on_host(p, spec, graph, counter):
    device = p.device
    if device.host_memory or _output_in_host(p.nodes[spec[0]], device)[spec[1]]:
        return spec
    dtype = p.nodes[spec[0]].op._outputs[spec[1]].dtype
    cache = getattr(p, "copies", None)
    if cache is None:
        cache = p.copies = {}
    return (_copy_node(p, spec, dtype, True, graph, counter, cache), 0)


def client_ends(parts, feeds, scratch_graph) -> tuple[list[list[str]], list[str | None]]:
    """Rewrite `parts` (as `partition` returned them) so that the client meets the step
    in its rendezvous, as a partial run needs (TF's `partial_run_setup`): every feed
    enters each partition consuming it through a _Recv, every fetched tensor leaves
    through a _Send, so feeds may arrive and fetches leave while the step runs.  A
    fetched Operation just runs in the step (TF's partial runs take no targets).

    Returns (the keys each feed is to be sent under, one per partition taking it; the
    key each fetch arrives under, by fetch index, None for an Operation).  Keys are
    unique within a step."""
    feed_keys: list[list[str]] = [[] for _ in feeds]
    fetch_keys: dict[int, str] = {}
    n_fetches = sum(len(p.fetch_ids) for p in parts)
    for n, p in enumerate(parts):
        _partition_client_ends(p, n, feeds, scratch_graph, feed_keys, fetch_keys)
        _topological_order(p)
    return feed_keys, [fetch_keys.get(k) for k in range(n_fetches)]


def _partition_client_ends(p, n, feeds, graph, feed_keys, fetch_keys) -> None:
    dev = p.device
    dev_name = dev.name if dev is not None else ""
    incarnation = dev.incarnation if dev is not None else 0
    recv_of: dict[int, int] = {}

    def recv(i: int) -> int:
        idx = recv_of.get(i)
        if idx is None:
            t = feeds[i]
            dtype = t.dtype.base_dtype
            key = rendezvous.create_key("client", 0, dev_name, f"{t.name}/{n}")
            attrs = {
                "tensor_name": t.name,
                "send_device": "client",
                "send_device_incarnation": 0,
                "recv_device": dev_name,
                "client_terminated": True,
                "lossy": False,
                "key": key,
                "tensor_type": dtype,
                "shape": t.shape,
            }
            name = f"_recv_{t.name.replace(':', '_')}_{n}"
            op = make_op(graph, "_Recv", name, attrs, [], out_dtype=dtype)
            idx = recv_of[i] = p.add(PNode(op, dev, [], []))
            feed_keys[i].append(key)
        return idx

    for node in list(p.nodes):
        if any(s[0] == "feed" for s in node.inputs):
            node.inputs = [(recv(s[1]), 0) if s[0] == "feed" else s for s in node.inputs]
    for spec, k in zip(p.fetches, p.fetch_ids, strict=True):
        if spec[1] is None:  # an Operation: it runs in the step, nothing is sent
            continue
        src = (recv(spec[1]), 0) if spec[0] == "feed" else spec
        dtype = p.nodes[src[0]].op._outputs[src[1]].dtype.base_dtype
        key = rendezvous.create_key(dev_name, incarnation, "client", f"fetch:{k}")
        attrs = {
            "T": dtype,
            "tensor_name": f"fetch:{k}",
            "send_device": dev_name,
            "send_device_incarnation": incarnation,
            "recv_device": "client",
            "client_terminated": True,
            "lossy": False,
            "key": key,
        }
        send = make_op(graph, "_Send", f"_send_fetch_{k}", attrs, [dtype])
        p.add(PNode(send, dev, [src], []))
        fetch_keys[k] = key
    p.fetches, p.fetch_ids = [], []


def _topological_order(p) -> None:
    """Renumber `p`'s nodes in topological order (copies were appended at the end);
    loop back edges (NextIteration -> Merge) do not count."""
    nodes = p.nodes
    n = len(nodes)
    deps: list[list[int]] = [[] for _ in range(n)]
    users: list[list[int]] = [[] for _ in range(n)]
    for i, node in enumerate(nodes):
        srcs = [s[0] for s in node.inputs if s[0] != "feed"] + list(node.controls)
        for j in srcs:
            if nodes[j].op.type != "NextIteration":
                deps[i].append(j)
                users[j].append(i)
    pending = [len(d) for d in deps]
    ready = [i for i in range(n - 1, -1, -1) if not pending[i]]
    order: list[int] = []
    while ready:
        i = ready.pop()
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if not pending[u]:
                ready.append(u)
    if len(order) != n or order == list(range(n)):
        return  # (a cycle is reported by the executor as it always was)
    renumber(p, order)


def renumber(p, order: list[int]) -> None:
    """Keep `p`'s nodes `order` (old indices), in that order; nothing kept may refer
    to a node left out."""
    new_of = {old: new for new, old in enumerate(order)}
    nodes = p.nodes
    p.nodes = [nodes[i] for i in order]
    for node in p.nodes:
        node.inputs = [s if s[0] == "feed" else (new_of[s[0]], s[1]) for s in node.inputs]
        node.controls = [new_of[c] for c in node.controls]
    p.index = {op: new_of[i] for op, i in p.index.items() if i in new_of}
    p.fetches = [f if f[0] == "feed" else (new_of[f[0]], f[1]) for f in p.fetches]
    if p.copies:
        p.copies = {k: new_of[v] for k, v in p.copies.items() if v in new_of}


def make_op(graph, op_type, name, attrs, input_dtypes, out_dtype=None) -> Operation:
    """A detached Operation for a runtime-inserted node (never added to a user graph).

    `out_dtype` is one dtype, or a list of them for several outputs.
    """
    op_def = get_op_def(op_type)
    if isinstance(out_dtype, list):
        outs = out_dtype
    else:
        outs = [out_dtype] if out_dtype is not None else []
    op = Operation(graph, op_def, name, [], attrs, outs, [False] * len(outs))
    op.traceback = "<partitioner>"
    return op


def _dummy_const(graph, n: int) -> Operation:
    from asyncflow import dtypes

    value = np.zeros((), np.int32)
    value.flags.writeable = False
    op = make_op(
        graph,
        "Const",
        f"_control_dummy_{n}",
        {"value": value, "dtype": dtypes.int32},
        [],
        out_dtype=dtypes.int32,
    )
    return op


def partition_graph_defs(parts) -> list[dict]:
    """GraphDefs (TF field names) of the partitions, for RunMetadata.partition_graphs."""
    from asyncflow.graph_io import encode_attr

    out = []
    for p in parts:
        nodes = []
        for n in p.nodes:
            ins = []
            for src in n.inputs:
                if src[0] == "feed":
                    ins.append(f"_feed:{src[1]}")
                else:
                    prod = p.nodes[src[0]].op.name
                    ins.append(prod if src[1] == 0 else f"{prod}:{src[1]}")
            ins.extend("^" + p.nodes[c].op.name for c in n.controls)
            attrs = {}
            for k, v in n.op._attrs.items():
                if v is None:
                    continue
                try:
                    attrs[k] = encode_attr(v)
                except TypeError:
                    attrs[k] = {"s": str(v)}
            nodes.append(
                {
                    "name": n.op.name,
                    "op": n.op.type,
                    "input": ins,
                    "device": p.device.name if p.device is not None else "",
                    "attr": attrs,
                }
            )
        out.append({"node": nodes, "versions": {"producer": 27}})
    return out
