"""TF1 optimizers under a strategy: `apply_gradients` called in a replica.

Every replica hands its (gradient, variable) pairs to one `merge_call`; there the
gradients of each variable are summed over the replicas (TF1's optimizers sum; a loss
meant as a mean is scaled by the user), the slots are made once (mirrored, like their
variable), and every copy of every variable is updated on its own device with the
summed gradient.  Each replica gets the same training op back.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.distribute import distribute_lib
from asyncflow.distribute import values as values_lib

__all__ = ["apply_gradients_in_replica"]


def apply_gradients_in_replica(optimizer, grads_and_vars, global_step, name):
    """The replica's part of `optimizer.apply_gradients` under a strategy.

    Raises:
      RuntimeError: called in the cross-replica context (TF's wording).
    """
    if distribute_lib.in_cross_replica_context():
        raise RuntimeError(
            "Use `_distributed_apply()` instead of `apply_gradients()` in a cross-replica context."
        )
    pairs = [(g, v) for g, v in grads_and_vars if g is not None]  # TF's filtered grads
    return distribute_lib.get_replica_context().merge_call(
        _distributed_apply, args=(optimizer, pairs, global_step, name)
    )


def _distributed_apply(strategy, optimizer, grads_and_vars, global_step, name):
    extended = strategy.extended
    reduced = extended.batch_reduce_to(distribute_lib.ReduceOp.SUM, grads_and_vars)
    var_list = [v for _, v in grads_and_vars]
    graph = ops.get_default_graph()
    with graph.control_dependencies(None):  # TF's init_scope
        optimizer._create_slots(var_list)

    def update(var, grad):
        with ops.name_scope("update_" + var.op.name):
            return optimizer._update_op(grad, var)

    with ops.name_scope(name, optimizer._name) as scope:
        optimizer._prepare()
        update_ops = []
        for grad, var in zip(reduced, var_list, strict=True):
            result = extended.update(var, update, args=(grad,), group=False)
            update_ops.extend(strategy.experimental_local_results(result))
        finish = extended.update_non_slot(
            var_list, lambda: optimizer._finish(update_ops, "update"), group=False
        )
        if global_step is None:
            apply_updates = strategy.group(finish, name=scope.rstrip("/"))
        else:
            with ops.control_dependencies([finish]):
                apply_updates = extended.update(
                    global_step, lambda v: v.assign_add(1, name=scope.rstrip("/")), group=False
                )
    if isinstance(apply_updates, ops.Tensor):
        apply_updates = apply_updates.op
    train_op = graph.get_collection_ref(ops.GraphKeys.TRAIN_OP)
    for op in strategy.experimental_local_results(apply_updates):
        op = op.op if isinstance(op, ops.Tensor) else op
        if op not in train_op:
            train_op.append(op)
    return apply_updates


def is_distributed(var) -> bool:
    return isinstance(var, values_lib.DistributedVariable)
