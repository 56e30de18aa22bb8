"""Ordering: no_op, group, tuple, with_dependencies (TF1's control_flow_ops, its part
that needs no control-flow context).

`tuple` and `with_dependencies` gate values on control edges; `group` makes one NoOp
(one per device, then a final one) run after its inputs.  Below the contexts (cond and
while_loop use `with_dependencies`) and the checks (`check_ops` groups its asserts):
this module imports neither.
"""

from __future__ import annotations

import builtins

from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.registry import NotDifferentiable, register_op
from asyncflow.sparse_tensor import SparseTensor

__all__ = ["no_op", "group", "tuple", "with_dependencies"]

NoOp = register_op("NoOp", shape_fn=lambda op: [])


@NoOp.kernel()
async def _no_op(ctx):
    return None


def _take_scope_name(op: ops.Operation, scope: str) -> ops.Operation:
    """Rename `op` to its name scope's own name ("a/b/" -> "a/b"), as TF's `name=scope`.

    TF creates an op whose name ends in "/" with exactly that name minus the slash; the
    graph here always makes names unique inside the current scope, so the op is built
    under a default name and renamed afterwards.  The scope already reserved the name.
    """
    want = scope[:-1] if scope.endswith("/") else scope
    if not want or op.name == want:
        return op
    graph = op.graph
    if want in graph._ops_by_name:
        return op
    del graph._ops_by_name[op.name]
    op._name = want
    graph._ops_by_name[want] = op
    return op


def no_op(name: str | None = None) -> ops.Operation:
    """Does nothing; useful as a placeholder for control edges."""
    if name and name.endswith("/"):
        if name[:-1] in ops.get_default_graph()._ops_by_name:  # TF's exact name is taken
            raise ValueError(f"Duplicate node name in graph: '{name[:-1]}'")
        return _take_scope_name(ops.apply_op("NoOp", []), name)
    return ops.apply_op("NoOp", [], name=name)


def _flatten(inputs) -> list:
    flat = []
    for x in inputs:
        if isinstance(x, (list, builtins.tuple)):
            flat.extend(_flatten(x))
        elif isinstance(x, dict):
            flat.extend(_flatten([x[k] for k in sorted(x)]))
        else:
            flat.append(x)
    return flat


def _group_control_deps(dev, deps, name=None) -> ops.Operation:
    with ops.control_dependencies(deps):
        if dev is None:
            return no_op(name=name)
        with ops.device(dev):
            return no_op(name=name)


def group(*inputs, **kwargs) -> ops.Operation:
    """An op that runs after all of `inputs` (TF1's `tf.group`).

    Inputs on several devices get one NoOp per device, gated by a final NoOp.

    Raises:
      ValueError: for unknown keyword arguments.
      TypeError: when an input is not a Tensor or Operation (None included).
    """
    name = kwargs.pop("name", None)
    if kwargs:
        raise ValueError("Unknown keyword arguments: " + ", ".join(kwargs.keys()))
    flat = _flatten(inputs)
    with ops.name_scope(name, "group_deps", flat) as scope:
        if not flat:
            return no_op(name=scope)
        ops_on_device: dict = {}
        for inp in flat:
            if not hasattr(inp, "device"):
                raise TypeError(
                    f"Expected tf.group() expected Tensor arguments not '{inp}' with type "
                    f"'{type(inp)}'"
                )
            ops_on_device.setdefault(inp.device, []).append(inp)
        if len(ops_on_device) == 1:
            ((dev, deps),) = ops_on_device.items()
            return _group_control_deps(dev, deps, name=scope)
        deps = [
            _group_control_deps(dev, ops_on_device[dev])
            for dev in sorted(ops_on_device, key=lambda d: "" if d is None else d)
        ]
        with ops.control_dependencies(deps):
            return no_op(name=scope)


def with_dependencies(dependencies, output_tensor, name: str | None = None) -> ops.Tensor:
    """`output_tensor`'s value, produced only after all of `dependencies` have run.

    Raises:
      TypeError: when a dependency is not an Operation or Tensor.
    """
    dependencies = list(dependencies)
    with ops.name_scope(name, "control_dependency", dependencies + [output_tensor]) as scope:
        if not isinstance(output_tensor, (IndexedSlices, SparseTensor)):
            # TF colocates with the converted value: a Python number becomes a Const.
            output_tensor = ops.convert_to_tensor(output_tensor)
        with ops.colocate_with(output_tensor):
            with ops.control_dependencies(dependencies):
                if isinstance(output_tensor, IndexedSlices):
                    # TF's: the values wait; indices and shape come with them.
                    values = _identity(output_tensor.values)
                    _take_scope_name(values.op, scope)
                    return IndexedSlices(values, output_tensor.indices, output_tensor.dense_shape)
                if isinstance(output_tensor, SparseTensor):
                    parts = [
                        _identity(t)
                        for t in (
                            output_tensor.indices,
                            output_tensor.values,
                            output_tensor.dense_shape,
                        )
                    ]
                    return SparseTensor(*parts)
                out = _identity(ops.convert_to_tensor(output_tensor))
        _take_scope_name(out.op, scope)
        return out


def _identity(t):
    return ops.apply_op("Identity", [t]).outputs[0]


def tuple(tensors, name: str | None = None, control_inputs=None) -> list:  # noqa: A001
    """Group tensors: each output is available only once all inputs are computed.

    Returns a list with an Identity (for a Tensor), a NoOp (for an Operation) or None
    in place of each input.

    Raises:
      ValueError: when `tensors` holds no Tensor or Operation.
      TypeError: when a control input is not an Operation or Tensor.
    """
    with ops.name_scope(name, "tuple", tensors):
        tensors = [
            t
            if isinstance(t, (ops.Operation, ops.Tensor, IndexedSlices, SparseTensor)) or t is None
            else ops.convert_to_tensor(t)
            for t in tensors
        ]
        gating_ops = [op for t in tensors if t is not None for op in _ops_of(t)]
        for c in control_inputs or ():
            if isinstance(c, ops.Tensor):
                c = c.op
            elif not isinstance(c, ops.Operation):
                raise TypeError(f"Control input must be Operation or Tensor: {c}")
            gating_ops.append(c)
        # Sorted by creation order so that the graph is the same from run to run.
        gating_ops = sorted(set(gating_ops), key=lambda op: op._id)
        if not gating_ops:
            raise ValueError(f"Must have at least one Tensor: {tensors}")
        gate = group(*gating_ops)
        tpl = []
        for t in tensors:
            if isinstance(t, (ops.Tensor, IndexedSlices, SparseTensor)):
                tpl.append(with_dependencies([gate], t))
            elif isinstance(t, ops.Operation):
                with ops.control_dependencies([gate]):
                    tpl.append(group(t))
            else:
                tpl.append(None)
        return tpl


def _ops_of(t) -> list:
    """The ops a tuple waits for: an IndexedSlices or SparseTensor waits for each part."""
    if isinstance(t, ops.Operation):
        return [t]
    if isinstance(t, IndexedSlices):
        parts = [t.values, t.indices, t.dense_shape]
        return [p.op for p in parts if p is not None]
    if isinstance(t, SparseTensor):
        return [t.indices.op, t.values.op, t.dense_shape.op]
    return [t.op]


NotDifferentiable("NoOp")
