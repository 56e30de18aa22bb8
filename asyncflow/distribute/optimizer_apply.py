"""TF1 optimizers under a strategy: `apply_gradients` called in a replica.

Every replica hands its (gradient, variable) pairs to one `merge_call`; there the
gradients of each variable are summed over the replicas (TF1's optimizers sum; a loss
meant as a mean is scaled by the user), the slots are made once (mirrored, like their
variable), and every copy of every variable is updated on its own device with the
summed gradient.  Each replica gets the same training op back.
"""

from __future__ import annotations

import functools

from asyncflow import graph as ops
from asyncflow.distribute import distribute_lib
from asyncflow.distribute import values as values_lib

__all__ = ["apply_gradients_in_replica", "scale_loss"]


def scale_loss(loss):
    """TF1's `Optimizer._scale_loss`: under an estimator's strategy, a MEAN-reduced loss
    is divided by the number of replicas (the gradients are summed over them); the
    graph remembers it so the reported loss is their mean."""
    graph = ops.get_default_graph()
    graph._attached["loss_scaled_by_optimizer"] = False
    if distribute_lib.get_loss_reduction() is distribute_lib.ReduceOp.MEAN:
        n = distribute_lib.get_strategy().num_replicas_in_sync
        if n > 1:
            loss = loss * (1.0 / n)
            graph._attached["loss_scaled_by_optimizer"] = True
    return loss


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
    # The optimizer is not a merge argument: each replica may have built its own (a
    # model_fn run per replica); as TF, replica 0's applies the updates.
    return distribute_lib.get_replica_context().merge_call(
        functools.partial(_distributed_apply, optimizer=optimizer),
        args=(pairs, global_step, name),
    )


def _distributed_apply(strategy, grads_and_vars, global_step, name, optimizer):
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
            # Each replica's result is the step as a tensor (TF's "<name>/Identity").
            apply_updates = _as_tensors(strategy, apply_updates)
    if isinstance(apply_updates, ops.Tensor):
        apply_updates = apply_updates.op
    train_op = graph.get_collection_ref(ops.GraphKeys.TRAIN_OP)
    for op in strategy.experimental_local_results(apply_updates):
        op = op.op if isinstance(op, ops.Tensor) else op
        if op not in train_op:
            train_op.append(op)
    return apply_updates


def _as_tensors(strategy, value):
    from asyncflow.ops import array_ops

    parts = []
    for part in strategy.experimental_local_results(value):
        with ops.device(part.device):
            parts.append(array_ops.identity(part))
    if len(parts) == 1 and not isinstance(value, values_lib.DistributedValues):
        return parts[0]
    return values_lib.Mirrored(parts)


def is_distributed(var) -> bool:
    return isinstance(var, values_lib.DistributedVariable)
