"""`SyncReplicasOptimizer`: synchronous data-parallel training with backup workers
(OSDI §4.4), as TF1's `tf.train.SyncReplicasOptimizer` builds it.

Each replica's train op applies its gradients to a conditional accumulator per variable
(on the variable's device, shared by name across replicas) tagged with the replica's
local step, then waits for a token from the token queue and takes the token's value
as its next local step.  The chief's queue runner runs the sync op: it takes
`replicas_to_aggregate` gradients from every accumulator (waiting until that many
arrived), applies their mean with the wrapped optimizer, which advances the global
step, and puts `max(total_num_replicas, replicas_to_aggregate)` tokens holding the new
global step into the queue.

Backup workers: with `total_num_replicas > replicas_to_aggregate`, the first
`replicas_to_aggregate` gradients of a step are applied; an accumulator drops any
gradient whose local step is older than its global step, so a straggler's gradient
computed against old parameters is discarded, and the straggler takes a fresh token and
carries on from the new step.
"""

from __future__ import annotations

import asyncio
import logging

from asyncflow import graph as ops
from asyncflow import tensor_shape, variables
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import array_ops, control_flow_ops, data_flow_ops, state_ops
from asyncflow.ops.accumulator_ops import ConditionalAccumulator, SparseConditionalAccumulator
from asyncflow.train import queue_runner
from asyncflow.train.basic_session_run_hooks import SessionRunHook
from asyncflow.train.optimizer import Optimizer

__all__ = ["SyncReplicasOptimizer"]

_log = logging.getLogger("asyncflow")


class SyncReplicasOptimizer(Optimizer):
    """Aggregates gradients of `replicas_to_aggregate` replicas per step (TF1's).

    Raises:
      ValueError: apply_gradients without gradients or without a global step; the
        chief's ops asked for before apply_gradients; too few initial tokens.
    """

    def __init__(
        self,
        opt,
        replicas_to_aggregate,
        total_num_replicas=None,
        variable_averages=None,
        variables_to_average=None,
        use_locking=False,
        name="sync_replicas",
    ):
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        super().__init__(use_locking, name)
        _log.info(
            "SyncReplicasV2: replicas_to_aggregate=%s; total_num_replicas=%s",
            replicas_to_aggregate,
            total_num_replicas,
        )
        self._opt = opt
        self._replicas_to_aggregate = replicas_to_aggregate
        self._gradients_applied = False
        self._variable_averages = variable_averages
        self._variables_to_average = variables_to_average
        self._total_num_replicas = total_num_replicas
        self._tokens_per_step = max(total_num_replicas, replicas_to_aggregate)
        self._global_step = None
        self._sync_token_queue = None
        self._chief_queue_runner = None
        self._accumulator_list: list = []  # (accumulator, device)

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's gradients."""
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """This replica's train op: accumulate its gradients, then wait for a token.

        Also builds the chief's sync op (run by `get_chief_queue_runner()`) and init
        ops (`chief_init_op`, `local_step_init_op`, `ready_for_local_init_op`).
        """
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        self._global_step = global_step
        train_ops, aggregated, var_list = [], [], []
        # The local step lives with this replica (colocated with a no-op made here), not
        # on a parameter server.
        local_anchor = control_flow_ops.no_op()
        with ops.colocate_with(local_anchor):
            self._local_step = variables.Variable(
                initial_value=0,
                trainable=False,
                collections=[ops.GraphKeys.LOCAL_VARIABLES],
                dtype=global_step.dtype.base_dtype,
                name="sync_rep_local_step",
            )
        self.local_step_init_op = state_ops.assign(self._local_step, global_step)
        chief_init_ops = [self.local_step_init_op]
        self.ready_for_local_init_op = variables.report_uninitialized_variables(
            variables.global_variables()
        )
        with ops.name_scope(None, self._name):
            for grad, var in grads_and_vars:
                var_list.append(var)
                with ops.device(var.device):
                    if grad is None:
                        aggregated.append(None)
                        continue
                    acc, apply, take = self._accumulate(grad, var)
                    train_ops.append(apply)
                    aggregated.append(take)
                    self._accumulator_list.append((acc, var.device))
            with ops.device(global_step.device), ops.name_scope(""):
                update_op = self._opt.apply_gradients(zip(aggregated, var_list), global_step)
                queue = data_flow_ops.FIFOQueue(
                    -1,
                    global_step.dtype.base_dtype,
                    shapes=(),
                    name="sync_token_q",
                    shared_name="sync_token_q",
                )
                self._sync_token_queue = queue
                with ops.control_dependencies(train_ops):
                    token = queue.dequeue()
                train_op = state_ops.assign(self._local_step, token)
                with ops.control_dependencies([update_op]):
                    tokens = array_ops.fill([self._tokens_per_step], global_step)
                    sync_op = queue.enqueue_many((tokens,))
                if self._variable_averages is not None:
                    with ops.control_dependencies([sync_op]), ops.name_scope(""):
                        sync_op = self._variable_averages.apply(self._variables_to_average)
                self._chief_queue_runner = _ChiefQueueRunner(queue, [sync_op])
            for acc, dev in self._accumulator_list:
                with ops.device(dev):
                    chief_init_ops.append(acc.set_global_step(global_step, name="SetGlobalStep"))
            self.chief_init_op = control_flow_ops.group(*chief_init_ops)
            self._gradients_applied = True
            return train_op

    def _accumulate(self, grad, var):
        """(accumulator, op applying `grad` to it, the aggregated gradient it yields)."""
        if isinstance(grad, ops.Tensor):
            acc = ConditionalAccumulator(
                grad.dtype, shape=var.get_shape(), shared_name=var.name + "/grad_accum"
            )
            apply = acc.apply_grad(grad, local_step=self._local_step)
            return acc, apply, acc.take_grad(self._replicas_to_aggregate)
        if not isinstance(grad, IndexedSlices):
            raise ValueError("Unknown grad type!")
        # TF passes shape=() and its kernel reads a rank-0 shape as "any"; ours checks a
        # given shape strictly, so the unknown shape says the same thing.
        acc = SparseConditionalAccumulator(
            grad.dtype, shape=tensor_shape.unknown_shape(), shared_name=var.name + "/grad_accum"
        )
        apply = acc.apply_indexed_slices_grad(grad, local_step=self._local_step)
        return acc, apply, acc.take_indexed_slices_grad(self._replicas_to_aggregate)

    def get_chief_queue_runner(self):
        """The QueueRunner the chief runs: the sync op in a loop.

        Raises: ValueError before apply_gradients.
        """
        if not self._gradients_applied:
            raise ValueError("Should be called after apply_gradients().")
        return self._chief_queue_runner

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def variables(self):
        return self._opt.variables()

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def get_init_tokens_op(self, num_tokens=-1):
        """An op putting `num_tokens` tokens (default: replicas_to_aggregate) holding the
        global step into the queue, so the first step can start (the chief runs it).

        Raises: ValueError before apply_gradients, or with too few tokens.
        """
        if not self._gradients_applied:
            raise ValueError("get_init_tokens_op() should be called after apply_gradients().")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < tokens_needed:
            raise ValueError(
                f"Too few tokens to finish the first step: {num_tokens} (given) vs "
                f"{tokens_needed} (needed)"
            )
        if num_tokens > 0:
            with ops.device(self._global_step.device), ops.name_scope(""):
                tokens = array_ops.fill([num_tokens], self._global_step)
                return self._sync_token_queue.enqueue_many((tokens,))
        return control_flow_ops.no_op(name="no_init_tokens")

    def make_session_run_hook(self, is_chief, num_tokens=-1):
        """A hook that runs the init ops, the initial tokens and (chief) the queue runner."""
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)


class _ChiefQueueRunner(queue_runner.QueueRunner):
    """The chief's sync loop.  On stop it closes the token queue (TF's cancel op) and
    then cancels its own step, which waits in take_grad for gradients no replica will
    send any more: TF leaves that thread to its session's close, which here would hold
    `Coordinator.join` for the whole grace period.  A cancelled take gives nothing up:
    the accumulator keeps the gradients it holds."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._steps: dict = {}  # session -> the tasks running its sync loop

    async def _run(self, sess, enqueue_op, coord=None) -> None:
        task = asyncio.current_task()
        self._steps.setdefault(sess, set()).add(task)
        try:
            await super()._run(sess, enqueue_op, coord)
        finally:
            self._steps[sess].discard(task)

    async def _close_on_stop(self, sess, cancel_op, coord) -> None:
        await super()._close_on_stop(sess, cancel_op, coord)
        for task in list(self._steps.get(sess, ())):
            task.cancel()


class _SyncReplicasOptimizerHook(SessionRunHook):
    def __init__(self, sync_optimizer, is_chief, num_tokens):
        self._sync_optimizer = sync_optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens

    def begin(self):
        opt = self._sync_optimizer
        if not opt._gradients_applied:
            raise ValueError(
                "SyncReplicasOptimizer.apply_gradient should be called before using the hook."
            )
        self._ready_for_local_init_op = opt.ready_for_local_init_op
        if self._is_chief:
            self._local_init_op = opt.chief_init_op
            self._q_runner = opt.get_chief_queue_runner()
            self._init_tokens_op = opt.get_init_tokens_op(self._num_tokens)
        else:
            self._local_init_op = opt.local_step_init_op
            self._q_runner = None
            self._init_tokens_op = None

    def after_create_session(self, session, coord):
        """Runs the local init, the initial tokens (chief) and the chief's queue runner.

        Raises: RuntimeError when global variables are still uninitialised.
        """
        missing = session.run(self._ready_for_local_init_op)
        if len(missing):
            names = ", ".join(m.decode() if isinstance(m, bytes) else str(m) for m in missing)
            raise RuntimeError(
                "Init operations did not make model ready for SyncReplicasOptimizer "
                f"local_init. Init op: {self._local_init_op.name}, error: Variables not "
                f"initialized: {names}"
            )
        session.run(self._local_init_op)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._q_runner is not None:
            self._q_runner.create_threads(session, coord=coord, daemon=True, start=True)
