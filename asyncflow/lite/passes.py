"""The passes TF's converter runs over the lowered TFLite operators, in its order.

`merge_duplicates` (CSE); `fold_affine`: a per-channel MUL and ADD after CONV_2D,
DEPTHWISE_CONV_2D or FULLY_CONNECTED fold into its filter and bias (so BiasAdd and an
inference FusedBatchNorm vanish); pattern fusions (L2_NORMALIZATION, RELU_N1_TO_1);
`fuse_activations`: a RELU or RELU6 fuses into the op before it; `drop_identity_reshapes`;
`drop_reshape_before_fc`.

Invariant: a fold only happens when the intermediate value has one consumer and is not
a graph output, so no tensor anyone reads disappears.
"""

from __future__ import annotations

import numpy as np

from asyncflow.lite import schema
from asyncflow.lite.lowering import Const, Node

_ACT_OPS = {"RELU": schema.ACT_RELU, "RELU6": schema.ACT_RELU6}
_FUSES_ACT = {
    "CONV_2D",
    "DEPTHWISE_CONV_2D",
    "FULLY_CONNECTED",
    "ADD",
    "SUB",
    "MUL",
    "DIV",
    "MAX_POOL_2D",
    "AVERAGE_POOL_2D",
    "CONCATENATION",
}
_HAS_BIAS = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"}


def _consumers(nodes: list[Node]) -> dict[str, int]:
    count: dict[str, int] = {}
    for node in nodes:
        for v in node.inputs:
            if isinstance(v, str):
                count[v] = count.get(v, 0) + 1
    return count


def _producer_of(nodes: list[Node]) -> dict[str, Node]:
    return {out: node for node in nodes for out in node.outputs}


def _channel_const(node: Node, const: Const, channels: int) -> np.ndarray | None:
    """`const` as a per-output-channel vector, when it broadcasts that way."""
    v = const.value
    if v.dtype != np.float32 or v.size not in (1, channels):
        return None
    if v.ndim and v.shape[-1] != v.size:
        return None
    return np.broadcast_to(v.reshape(-1), (channels,)).astype(np.float32)


def fold_affine(nodes: list[Node], outputs: set[str]) -> list[Node]:
    """Folds MUL/ADD/SUB by a per-channel constant into the conv/FC before it."""
    changed = True
    while changed:
        changed = False
        uses, prod = _consumers(nodes), _producer_of(nodes)
        for node in nodes:
            if node.op not in ("ADD", "SUB", "MUL") or node.options.get(
                "fused_activation_function"
            ):
                continue
            src, other = node.inputs
            if not isinstance(src, str) or not isinstance(other, Const):
                continue
            base = prod.get(src)
            if base is None or base.op not in _HAS_BIAS or uses.get(src) != 1 or src in outputs:
                continue
            if base.options.get("fused_activation_function"):
                continue
            w, bias = base.inputs[1], base.inputs[2]
            if not isinstance(w, Const):
                continue
            channels = w.value.shape[-1 if base.op == "DEPTHWISE_CONV_2D" else 0]
            vec = _channel_const(node, other, channels)
            if vec is None:
                continue
            b = bias.value if isinstance(bias, Const) else np.zeros(channels, np.float32)
            if node.op == "MUL":
                shape = (
                    (1, 1, 1, -1)
                    if base.op == "DEPTHWISE_CONV_2D"
                    else (-1,) + (1,) * (w.value.ndim - 1)
                )
                w = Const((w.value * vec.reshape(shape)).astype(np.float32), w.name)
                b = b * vec
            else:
                b = b + vec if node.op == "ADD" else b - vec
            names = ";".join(dict.fromkeys(node.names + [bias.name if bias else base.names[0]]))
            base.inputs[1:3] = [w, Const(b.astype(np.float32), names)]
            base.outputs = list(node.outputs)
            base.names = base.names + node.names
            nodes.remove(node)
            changed = True
            break
    return nodes


def fuse_l2_normalize(nodes: list[Node], outputs: set[str], shapes) -> list[Node]:
    """x * rsqrt(max(sum(square(x), last axis, keep_dims), eps)) -> L2_NORMALIZATION."""
    uses, prod = _consumers(nodes), _producer_of(nodes)

    def single(v, op):
        node = prod.get(v) if isinstance(v, str) else None
        ok = node is not None and node.op == op and uses.get(v) == 1 and v not in outputs
        return node if ok else None

    dropped: set[int] = set()
    for node in nodes:
        if node.op != "MUL" or node.options.get("fused_activation_function"):
            continue
        for x, r in (node.inputs, node.inputs[::-1]):
            rsqrt = single(r, "RSQRT")
            mx = rsqrt and single(rsqrt.inputs[0], "MAXIMUM")
            total = mx and isinstance(mx.inputs[1], Const) and single(mx.inputs[0], "SUM")
            sq = total and total.options.get("keep_dims") and single(total.inputs[0], "SQUARE")
            if not sq or sq.inputs[0] != x or not isinstance(total.inputs[1], Const):
                continue
            rank = len(shapes(x))
            if [int(a) % rank for a in np.ravel(total.inputs[1].value)] != [rank - 1]:
                continue
            node.op, node.inputs = "L2_NORMALIZATION", [x]
            node.options = {"fused_activation_function": 0}
            node.names = sq.names + total.names + mx.names + rsqrt.names + node.names
            dropped.update(id(n) for n in (sq, total, mx, rsqrt))
            break
    return [n for n in nodes if id(n) not in dropped]


def _scalar(v, value: float) -> bool:
    return isinstance(v, Const) and v.value.size == 1 and float(v.value.reshape(())) == value


def fuse_relu_n1_to_1(nodes: list[Node], outputs: set[str]) -> list[Node]:
    """minimum(maximum(x, -1), 1) (either nesting) -> RELU_N1_TO_1."""
    uses, prod = _consumers(nodes), _producer_of(nodes)
    dropped: set[int] = set()
    bounds = {"MINIMUM": (1.0, "MAXIMUM", -1.0), "MAXIMUM": (-1.0, "MINIMUM", 1.0)}
    for node in nodes:
        if node.op not in bounds or len(node.inputs) != 2:
            continue
        outer, inner_op, inner = bounds[node.op]
        src = node.inputs[0]
        first = prod.get(src) if isinstance(src, str) else None
        if (
            not _scalar(node.inputs[1], outer)
            or first is None
            or first.op != inner_op
            or not _scalar(first.inputs[1], inner)
            or uses.get(src) != 1
            or src in outputs
        ):
            continue
        node.op, node.inputs, node.options = "RELU_N1_TO_1", [first.inputs[0]], {}
        node.names = first.names + node.names
        dropped.add(id(first))
    return [n for n in nodes if id(n) not in dropped]


def fuse_activations(nodes: list[Node], outputs: set[str]) -> list[Node]:
    """Folds RELU/RELU6 into the op producing its input."""
    uses, prod = _consumers(nodes), _producer_of(nodes)
    kept = []
    for node in nodes:
        src = node.inputs[0] if node.inputs else None
        base = prod.get(src) if isinstance(src, str) else None
        if (
            node.op in _ACT_OPS
            and base is not None
            and base.op in _FUSES_ACT
            and not base.options.get("fused_activation_function")
            and uses.get(src) == 1
            and src not in outputs
            and len(base.outputs) == 1
        ):
            base.options["fused_activation_function"] = _ACT_OPS[node.op]
            base.outputs = list(node.outputs)
            base.names = base.names + node.names
            continue
        kept.append(node)
    return kept


def drop_identity_reshapes(nodes: list[Node], outputs: set[str], shapes) -> list[Node]:
    """A RESHAPE of a RESHAPE reads the first one's input, and a RESHAPE back to its
    input's shape disappears (TF's converter does both); when it was a graph output, the
    op before it takes over the output's name."""
    prod = _producer_of(nodes)
    alias: dict[str, str] = {}
    renamed: dict[str, str] = {}
    for node in nodes:
        node.inputs = [alias.get(v, v) if isinstance(v, str) else v for v in node.inputs]
        if node.op != "RESHAPE" or not isinstance(node.inputs[0], str):
            continue
        first = prod.get(node.inputs[0])
        if first is not None and first.op == "RESHAPE":
            node.inputs[0] = first.inputs[0]
        src, out = node.inputs[0], node.outputs[0]
        if shapes(src) != shapes(out):
            continue
        if out not in outputs:
            alias[out] = src
        elif src in prod and src not in outputs and len(prod[src].outputs) == 1:
            renamed[src] = out
    kept = [n for n in nodes if not (n.op == "RESHAPE" and n.outputs[0] in alias)]
    kept = _drop_unread_reshapes(kept, outputs)
    uses = _consumers(kept)
    for src, out in renamed.items():
        if uses.get(src) == 1:
            kept = [n for n in kept if not (n.op == "RESHAPE" and n.outputs[0] == out)]
            prod[src].outputs = [out]
    return _drop_unread_reshapes(kept, outputs)


def _drop_unread_reshapes(nodes: list[Node], outputs: set[str]) -> list[Node]:
    """RESHAPEs whose result nobody reads any more (their reader skipped them)."""
    uses = _consumers(nodes)
    return [
        n for n in nodes if n.op != "RESHAPE" or n.outputs[0] in outputs or uses.get(n.outputs[0])
    ]


def _input_key(v):
    if isinstance(v, Const):
        return ("const", v.value.dtype.str, v.value.shape, v.value.tobytes())
    return v


def merge_duplicates(nodes: list[Node], outputs: set[str]) -> tuple[list[Node], dict]:
    """Common subexpressions: a node equal to an earlier one (same operator, inputs and
    options) goes, its readers reading the earlier one (TF's converter runs CSE too).

    When only the later one is a graph output the earlier one takes its name; when both
    are, both graph outputs name the earlier one's tensor: the returned dict maps such
    outputs to the tensor now holding them.
    """
    seen: dict = {}
    alias: dict[str, str] = {}
    renames: dict[str, str] = {}
    same_as: dict[str, str] = {}
    kept = []
    for node in nodes:
        node.inputs = [alias.get(v, v) if isinstance(v, str) else v for v in node.inputs]
        key = (
            node.op,
            tuple(_input_key(v) for v in node.inputs),
            repr(sorted(node.options.items())),
        )
        first = seen.get(key)
        if first is None:
            seen[key] = node
            kept.append(node)
            continue
        if not any(o in outputs for o in node.outputs):
            alias.update(zip(node.outputs, first.outputs, strict=True))
        elif not any(o in outputs for o in first.outputs):
            renames.update(zip(first.outputs, node.outputs, strict=True))
            alias.update({old: new for old, new in renames.items()})
            first.outputs = list(node.outputs)
        else:
            same_as.update(zip(node.outputs, first.outputs, strict=True))
    rename_outputs(kept, renames)
    return kept, same_as


def fuse_hard_swish(nodes: list[Node], outputs: set[str]) -> list[Node]:
    """x * relu6(x + 3) / 6 (the division already a MUL by 1/6) -> HARD_SWISH(x)."""
    uses, prod = _consumers(nodes), _producer_of(nodes)

    def single(v, op):
        node = prod.get(v) if isinstance(v, str) else None
        ok = node is not None and node.op == op and uses.get(v) == 1 and v not in outputs
        return node if ok else None

    dropped: set[int] = set()
    for node in nodes:
        if node.op != "MUL" or node.options.get("fused_activation_function"):
            continue
        m, sixth = node.inputs
        scale = sixth.value if isinstance(sixth, Const) else None
        if scale is None or scale.size != 1 or abs(float(scale.reshape(())) - 1 / 6) > 1e-6:
            continue
        inner = single(m, "MUL")
        if inner is None or inner.options.get("fused_activation_function"):
            continue
        for x, r in (inner.inputs, inner.inputs[::-1]):
            relu6 = single(r, "RELU6")
            add = relu6 and single(relu6.inputs[0], "ADD")
            if not add or add.options.get("fused_activation_function") or x not in add.inputs:
                continue
            three = add.inputs[1] if add.inputs[0] == x else add.inputs[0]
            if not _scalar(three, 3.0):
                continue
            node.op, node.inputs, node.options = "HARD_SWISH", [x], {}
            node.names = add.names + relu6.names + inner.names + node.names
            dropped.update(id(n) for n in (add, relu6, inner))
            break
    return [n for n in nodes if id(n) not in dropped]


def rename_outputs(nodes: list[Node], renames: dict[str, str]) -> None:
    """Gives a graph output's name (an Identity's, say) to the tensor it aliases."""
    for node in nodes:
        node.inputs = [renames.get(v, v) if isinstance(v, str) else v for v in node.inputs]
        node.outputs = [renames.get(v, v) for v in node.outputs]


def drop_reshape_before_fc(nodes: list[Node], outputs: set[str], shapes) -> list[Node]:
    """A RESHAPE to 2-D that keeps the last dimension, read only by a FULLY_CONNECTED
    that flattens its input anyway (keep_num_dims false), disappears (TF's converter
    removes it too)."""
    prod, uses = _producer_of(nodes), _consumers(nodes)
    dropped: set[int] = set()
    for node in nodes:
        if node.op != "FULLY_CONNECTED" or node.options.get("keep_num_dims"):
            continue
        src = node.inputs[0]
        reshape = prod.get(src) if isinstance(src, str) else None
        if reshape is None or reshape.op != "RESHAPE" or uses.get(src) != 1 or src in outputs:
            continue
        inner = reshape.inputs[0]
        if not isinstance(inner, str):
            continue
        before, after = shapes(inner), shapes(src)
        if len(after) != 2 or not before or before[-1] != after[-1]:
            continue
        node.inputs[0] = inner
        dropped.add(id(reshape))
    return [n for n in nodes if id(n) not in dropped]
