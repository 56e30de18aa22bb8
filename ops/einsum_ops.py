"""Einsum: the op (one kernel over `xp.einsum`), its gradient and TF1's builder.

The gradient of operand k contracts the incoming gradient with the other operands
back onto k's subscripts: einsum("<out>,<others>-><k>").  Letters that only operand k
has (summed inside it) come back by broadcasting; an operand with a repeated letter
(a diagonal, "ii->i") gets its diagonal view's gradient put back through identities.
"""

from __future__ import annotations

import re

from asyncflow import graph as ops
from asyncflow.ops import array_ops
from asyncflow.registry import NUMERIC, REQUIRED, register_op

__all__ = ["einsum"]

_TERM = re.compile(r"^[a-zA-Z]*$")


def _parse(equation, n: int) -> tuple[list[str], str]:
    if isinstance(equation, bytes):
        equation = equation.decode()
    eq = equation.replace(" ", "")
    if "..." in eq:
        raise ValueError("einsum: ellipsis ('...') subscripts are not supported in asyncflow")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs = eq
        letters = lhs.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    terms = lhs.split(",")
    if len(terms) != n:
        raise ValueError(f"Input count mismatch: {equation!r} names {len(terms)} operands, "
                         f"{n} given")  # fmt: skip
    if not all(_TERM.match(t) for t in [*terms, out]):
        raise ValueError(f"Invalid einsum equation {equation!r}")
    for c in out:
        if out.count(c) > 1:
            raise ValueError(f"Output subscripts contain a label appearing more than once: {eq}")
        if c not in lhs:
            raise ValueError(
                f"Output subscripts contain the label {c} not present in the input subscripts."
            )
    return terms, out


def _einsum_shape(op):
    from asyncflow import tensor_shape

    terms, out = _parse(op.get_attr("equation"), len(op.inputs))
    sizes = {}
    for t, x in zip(terms, op.inputs):
        s = x.shape
        if s.ndims is None:
            continue
        if s.ndims != len(t):
            raise ValueError(f"einsum operand {t!r} has rank {s.ndims}")
        for c, d in zip(t, s.as_list()):
            if d is not None and sizes.get(c) not in (None, d, 1) and d != 1:
                raise ValueError(f"Dimension of subscript {c!r} differs: {sizes[c]} vs {d}")
            if d is not None and (sizes.get(c) in (None, 1)):
                sizes[c] = d
    return [tensor_shape.TensorShape([sizes.get(c) for c in out])]


Einsum = register_op(
    "Einsum",
    inputs=["inputs: N * T"],
    outputs=["output: T"],
    attrs={"equation": REQUIRED, "N": 1, "T": NUMERIC},
    shape_fn=_einsum_shape,
)


@Einsum.kernel()
async def _einsum(ctx, *xs):
    xp = ctx.xp
    terms, out = _parse(ctx.attrs["equation"], len(xs))
    eq = ",".join(terms) + "->" + out
    result = xp.einsum(eq, *[xp.asarray(x) for x in xs])
    return xp.asarray(result).astype(ctx.attrs["T"].as_numpy_dtype)


@Einsum.gradient
def _einsum_grad(op, grad):
    terms, out = _parse(op.get_attr("equation"), len(op.inputs))
    grads = []
    for k, (term, x) in enumerate(zip(terms, op.inputs)):
        if len(set(term)) != len(term):
            grads.append(_repeated_grad(op, grad, terms, out, k))
            continue
        others = [(t, y) for j, (t, y) in enumerate(zip(terms, op.inputs)) if j != k]
        present = set(out).union(*[set(t) for t, _ in others])
        kept = "".join(c for c in term if c in present)
        eq = ",".join([out, *[t for t, _ in others]]) + "->" + kept
        g = ops.apply_op("Einsum", [[grad, *[y for _, y in others]]],
                         {"equation": eq, "N": 1 + len(others)}).outputs[0]  # fmt: skip
        if kept != term:  # letters summed inside operand k: broadcast back
            for pos, c in enumerate(term):
                if c not in present:
                    g = array_ops.expand_dims(g, pos)
            g = g + array_ops.zeros_like(x)
        grads.append(g)
    return grads


def _repeated_grad(op, grad, terms, out, k):
    """The gradient of an operand whose term repeats a letter ("iij"): the gradient of
    its diagonal view (the letters once each) placed on the diagonal by identity
    matrices, and broadcast by ones along the letters summed inside the operand."""
    term, x = terms[k], op.inputs[k]
    others = [(t, y) for j, (t, y) in enumerate(zip(terms, op.inputs)) if j != k]
    present = set(out).union(*[set(t) for t, _ in others])
    unique = "".join(dict.fromkeys(term))
    kept = "".join(c for c in unique if c in present)
    eq = ",".join([out, *[t for t, _ in others]]) + "->" + kept
    g = ops.apply_op("Einsum", [[grad, *[y for _, y in others]]],
                     {"equation": eq, "N": 1 + len(others)}).outputs[0]  # fmt: skip
    used = set("".join(terms) + out)
    fresh = (c for c in _LETTERS if c not in used)

    def size(pos):
        d = x.shape[pos].value if x.shape.ndims is not None else None
        return [d] if d is not None else array_ops.shape(x)[pos]

    subs, operands, target, seen = [kept], [g], [], set()
    for pos, c in enumerate(term):
        if c in seen:  # a later occurrence: a new letter tied to c by an identity
            a = next(fresh)
            eye = ops.apply_op("MatrixDiag", [array_ops.ones(size(pos), dtype=x.dtype)])
            subs.append(c + a)
            operands.append(eye.outputs[0])
            target.append(a)
            continue
        seen.add(c)
        target.append(c)
        if c not in present:  # summed inside the operand: its gradient is broadcast
            subs.append(c)
            operands.append(array_ops.ones(size(pos), dtype=x.dtype))
    eq = ",".join(subs) + "->" + "".join(target)
    return ops.apply_op("Einsum", [operands], {"equation": eq, "N": len(operands)}).outputs[0]


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _expand_ellipsis(equation, xs) -> str:
    """`equation` with each '...' spelled out in letters it does not use, right-aligned
    over the operands' (static) ranks as broadcasting aligns them; an implicit output
    puts the broadcast letters first, as TF."""
    if isinstance(equation, bytes):
        equation = equation.decode()
    eq = equation.replace(" ", "")
    if "..." not in eq:
        return equation
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(xs):
        raise ValueError(f"Input count mismatch: {equation!r} names {len(terms)} operands, "
                         f"{len(xs)} given")  # fmt: skip
    widths = []
    for term, x in zip(terms, xs):
        if "..." not in term:
            widths.append(0)
            continue
        if x.shape.ndims is None:
            raise ValueError("einsum: '...' needs operands of known rank in asyncflow")
        widths.append(x.shape.ndims - (len(term) - 3))
        if widths[-1] < 0:
            raise ValueError(f"einsum operand {term!r} has rank {x.shape.ndims}")
    fresh = [c for c in _LETTERS if c not in eq][: max(widths)]
    spelled = [
        t.replace("...", "".join(fresh[len(fresh) - w :]) if w else "")
        for t, w in zip(terms, widths)
    ]
    if arrow:
        out = out.replace("...", "".join(fresh))
    else:
        letters = lhs.replace(",", "").replace(".", "")
        out = "".join(fresh) + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return ",".join(spelled) + "->" + out


def einsum(equation, *inputs, **kwargs):
    """Contraction of `inputs` by an Einstein-summation equation ("ij,jk->ik"; without
    "->" the output is the letters used once, sorted), op Einsum.  '...' stands for
    broadcast leading axes; the op's equation spells them out in letters.

    Raises:
      ValueError: a malformed equation, '...' over an operand of unknown rank, the
        wrong number of operands, or operands whose ranks or sizes contradict it.
    """
    name = kwargs.pop("name", None)
    kwargs.pop("optimize", None)
    if kwargs:
        raise TypeError(f"Invalid keyword arguments for einsum: {', '.join(kwargs)}")
    with ops.name_scope(name, "einsum", list(inputs)) as scope:
        xs = [ops.convert_to_tensor(x, name="input") for x in inputs]
        if xs:
            xs = [xs[0]] + [ops.convert_to_tensor(x, dtype=xs[0].dtype) for x in xs[1:]]
        equation = _expand_ellipsis(equation, xs)
        _parse(equation, len(xs))
        attrs = {"equation": equation, "N": len(xs)}
        return ops.apply_op("Einsum", [xs], attrs, name=scope).outputs[0]
