"""Small TF1 training utilities: `GlobalStepWaiterHook`, `checkpoints_iterator`,
`VocabInfo` and `warm_start`.

GlobalStepWaiterHook and checkpoints_iterator poll, as TF's do: they wait in the
calling thread (or, for the hook's async twin, in a task that sleeps between polls),
never inside a kernel.  warm_start initialises the selected variables from a checkpoint
through `init_from_checkpoint`; a variable with a VocabInfo gets TF's remapping graph as
its initializer: GenerateVocabRemapping and LoadAndRemapMatrix move its rows (or
columns) from the old vocabulary to the new one when it is initialized; cells with no
old counterpart, and OOV buckets, come from `backup_initializer` (zeros by default).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time

from asyncflow import graph as ops
from asyncflow import variables as variables_mod
from asyncflow.ops import checkpoint_remap_ops, init_ops, state_ops
from asyncflow.train import checkpoint_utils
from asyncflow.train.basic_session_run_hooks import SessionRunHook, _global_step_read

__all__ = ["GlobalStepWaiterHook", "checkpoints_iterator", "VocabInfo", "warm_start"]

logger = logging.getLogger("asyncflow")


class GlobalStepWaiterHook(SessionRunHook):
    """Delays a worker's first step until the global step reaches `wait_until_step`
    (TF1's hook for starting replicas gradually).

    Raises:
      RuntimeError: (begin) the graph has no global step.
    """

    _poll_secs = 0.5  # TF's polling interval

    def __init__(self, wait_until_step):
        self._wait_until_step = wait_until_step

    def begin(self):
        self._worker_is_started = False
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use _GlobalStepWaiterHook.")

    def _started(self, step) -> bool:
        if step >= self._wait_until_step:
            self._worker_is_started = True
        return self._worker_is_started

    def before_run(self, run_context):
        if self._worker_is_started or self._started(0 if self._wait_until_step <= 0 else -1):
            return None
        logger.info("Waiting for global step %d before starting training.", self._wait_until_step)
        while not self._started(run_context.session.run(self._global_step_tensor)):
            time.sleep(self._poll_secs)
        return None

    async def abefore_run(self, run_context):
        if self._worker_is_started or self._started(0 if self._wait_until_step <= 0 else -1):
            return None
        while True:  # TF polls: the step is another process's to advance
            if self._started(await run_context.session.arun(self._global_step_tensor)):
                return None
            await asyncio.sleep(self._poll_secs)


def _wait_for_new_checkpoint(checkpoint_dir, last, seconds_to_sleep=1.0, timeout=None):
    from asyncflow.train.saver import latest_checkpoint

    stop_time = time.monotonic() + timeout if timeout is not None else None
    while True:
        path = latest_checkpoint(checkpoint_dir)
        if path is not None and path != last:
            return path
        if stop_time is not None and time.monotonic() + seconds_to_sleep > stop_time:
            return None
        time.sleep(seconds_to_sleep)


def checkpoints_iterator(checkpoint_dir, min_interval_secs=0, timeout=None, timeout_fn=None):
    """Yield each new latest checkpoint of `checkpoint_dir`, waiting for the next one.

    After `timeout` seconds without a new checkpoint the iterator ends, unless
    `timeout_fn` is given and returns False (then it keeps waiting).  Consecutive
    yields are at least `min_interval_secs` apart.
    """
    path = None
    while True:
        new_path = _wait_for_new_checkpoint(checkpoint_dir, path, timeout=timeout)
        if new_path is None:
            if not timeout_fn:
                logger.info("Timed-out waiting for a checkpoint.")
                return
            if timeout_fn():
                return
            continue
        start = time.monotonic()
        path = new_path
        yield path
        remaining = start + min_interval_secs - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)


class VocabInfo(
    collections.namedtuple(
        "VocabInfo",
        [
            "new_vocab",
            "new_vocab_size",
            "num_oov_buckets",
            "old_vocab",
            "old_vocab_size",
            "backup_initializer",
            "axis",
        ],
    )  # fmt: skip
):
    """How to remap a vocabulary-indexed variable in `warm_start`: rows (axis 0) or
    columns (axis 1) follow tokens from the `old_vocab` file to the `new_vocab` file.

    Raises:
      ValueError: axis is not 0 or 1.
    """

    def __new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab,
                old_vocab_size=-1, backup_initializer=None, axis=0):  # fmt: skip
        if axis not in (0, 1):
            raise ValueError(f"The only supported values for the axis argument are 0 and 1.  "
                             f"Provided axis: {axis}")  # fmt: skip
        return super().__new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab,
                               old_vocab_size, backup_initializer, axis)  # fmt: skip


def _select_variables(vars_to_warm_start):
    if isinstance(vars_to_warm_start, str) or vars_to_warm_start is None:
        if vars_to_warm_start is None:
            return []
        return ops.get_collection(ops.GraphKeys.TRAINABLE_VARIABLES, scope=vars_to_warm_start)
    if all(isinstance(v, str) for v in vars_to_warm_start):
        found = []
        for pattern in vars_to_warm_start:
            for v in ops.get_collection(ops.GraphKeys.GLOBAL_VARIABLES, scope=pattern):
                if v not in found:
                    found.append(v)
        return found
    if all(isinstance(v, variables_mod.Variable) for v in vars_to_warm_start):
        return list(vars_to_warm_start)
    raise ValueError("If `vars_to_warm_start` is a list, it must be all `Variable` or all `str`."
                     f"  Given types are {[type(v) for v in vars_to_warm_start]}")  # fmt: skip


def _remap_matrix_initializer(ckpt, prev_name, shape, info: VocabInfo, backup):
    """TF's `_load_and_remap_matrix_initializer` for one whole (unpartitioned) variable:
    the vocabulary rows (or columns) read from the checkpoint through
    GenerateVocabRemapping and LoadAndRemapMatrix, the cells with no old counterpart from
    `backup` (one vector, in row-major order), then the OOV columns and rows from it."""
    af = _af()
    rows_by_vocab = info.axis == 0
    if rows_by_vocab:
        row_vocab, col_vocab = info.new_vocab_size, shape[1]
    else:
        row_vocab, col_vocab = shape[0], info.new_vocab_size
    row_oov, col_oov = (info.num_oov_buckets, 0) if rows_by_vocab else (0, info.num_oov_buckets)
    if shape[0] > row_vocab + row_oov:
        raise ValueError(
            f"Trying to initialize {shape[0]} additional rows after 0 rows have already been "
            f"initialized, which would exceed expected total row count of new_row_vocab_size "
            f"({row_vocab}) + num_row_oov_buckets ({row_oov}) = {row_vocab + row_oov}."
        )
    if shape[1] != col_vocab + col_oov:
        raise ValueError(
            f"The specified shape's second dimension ({shape[1]}) does not match "
            f"new_col_vocab_size ({col_vocab}) + num_col_oov_buckets ({col_oov}) = "
            f"{col_vocab + col_oov}."
        )
    rows_to_load = min(shape[0], row_vocab)
    if rows_by_vocab:
        row_map, rows_present = checkpoint_remap_ops.generate_vocab_remapping(
            info.new_vocab, info.old_vocab, 0, rows_to_load, info.old_vocab_size
        )
        col_map, cols_present = af.constant([], dtype="int64"), col_vocab
    else:
        row_map = af.range(0, rows_to_load, dtype="int64")
        rows_present = rows_to_load
        col_map, cols_present = checkpoint_remap_ops.generate_vocab_remapping(
            info.new_vocab, info.old_vocab, 0, col_vocab, info.old_vocab_size
        )
    missing = rows_to_load * col_vocab - af.cast(rows_present, "int64") * af.cast(
        cols_present, "int64"
    )
    init_vals = backup(af.stack([missing, 1]))
    value = checkpoint_remap_ops.load_and_remap_matrix(
        ckpt, prev_name, row_map, col_map, init_vals, rows_to_load, col_vocab
    )
    if col_oov > 0:
        value = af.concat([value, backup([rows_to_load, col_oov])], 1)
    if shape[0] - rows_to_load > 0:
        value = af.concat([value, backup([shape[0] - rows_to_load, col_vocab + col_oov])], 0)
    return value


def _remap(var, ckpt, prev_name, info: VocabInfo) -> None:
    """Make `var`'s initializer the checkpoint's `prev_name` remapped by `info` (TF's
    `_warm_start_var_with_vocab`: the remapping runs with the initializer)."""
    shape = var.shape.as_list()
    backup = info.backup_initializer or init_ops.zeros_initializer()
    with var.graph.as_default(), ops.control_dependencies(None):
        with ops.colocate_with(var.op), ops.name_scope("warm_starting_util"):
            init = _remap_matrix_initializer(ckpt, prev_name, shape, info, backup)
            var._initializer_op = state_ops.assign(var, init).op
            var._initial_value = init


def _af():
    import asyncflow

    return asyncflow


def warm_start(ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
               var_name_to_prev_var_name=None):  # fmt: skip
    """Initialise variables from a checkpoint (TF1's `tf.train.warm_start`): those of
    `vars_to_warm_start` (a TRAINABLE_VARIABLES regex, a list of GLOBAL_VARIABLES
    regexes, or Variables; None: only the vocab-remapped ones), each from its own name
    or `var_name_to_prev_var_name`'s, rows remapped where `var_name_to_vocab_info` says.

    Raises:
      ValueError: an entry of var_name_to_vocab_info or var_name_to_prev_var_name that
        matches no selected variable, or a name not in the checkpoint.
    """
    vocab_info = dict(var_name_to_vocab_info or {})
    prev_names = dict(var_name_to_prev_var_name or {})
    selected = _select_variables(vars_to_warm_start)
    if vars_to_warm_start is None:
        selected = [v for v in variables_mod.trainable_variables() if v.op.name in vocab_info]
    used_vocab, used_prev = set(), set()
    for var in selected:
        name = var.op.name
        prev = prev_names.get(name, name)
        if name in prev_names:
            used_prev.add(name)
        if name in vocab_info:
            used_vocab.add(name)
            _remap(var, ckpt_to_initialize_from, prev, vocab_info[name])
        else:
            checkpoint_utils.init_from_checkpoint(ckpt_to_initialize_from, {prev: var})
    unused = sorted(set(vocab_info) - used_vocab)
    if unused:
        raise ValueError("You provided the following variables in var_name_to_vocab_info that "
                         f"were not used: {unused}")  # fmt: skip
    unused = sorted(set(prev_names) - used_prev)
    if unused:
        raise ValueError("You provided the following variables in var_name_to_prev_var_name "
                         f"that were not used: {unused}")  # fmt: skip
