"""WarmStartSettings and warm starting: initialise a new model from another's checkpoint.

As TF's: `vars_to_warm_start` picks variables by regex over the trainable ones (a
string) or by scope over all global ones (a list of strings), or names them (a list of
variables); each takes the checkpoint tensor of the same name, or of the name
`var_name_to_prev_var_name` gives. The variables' initializers are replaced, so a model
that restores its own checkpoint is unaffected. A variable in one partition (the linear
models' variables) takes the checkpoint's whole tensor. Settings that remap
vocabularies (`var_name_to_vocab_info` of VocabInfo) go through `tf.train.warm_start`,
as TF's do: GenerateVocabRemapping and LoadAndRemapMatrix in the initializers.
"""

from __future__ import annotations

import collections
import logging

from asyncflow import graph as ops
from asyncflow.train import checkpoint_utils, training_extras

__all__ = ["WarmStartSettings", "warm_start"]

logger = logging.getLogger("asyncflow.estimator")


class WarmStartSettings(
    collections.namedtuple(
        "WarmStartSettings",
        "ckpt_to_initialize_from vars_to_warm_start var_name_to_vocab_info "
        "var_name_to_prev_var_name",
    )
):
    """Which checkpoint, and which of its variables, a model starts from.

    Raises:
      ValueError: no checkpoint given.
    """

    def __new__(
        cls,
        ckpt_to_initialize_from,
        vars_to_warm_start=".*",
        var_name_to_vocab_info=None,
        var_name_to_prev_var_name=None,
    ):
        if not ckpt_to_initialize_from:
            raise ValueError("`ckpt_to_initialize_from` MUST be set in WarmStartSettings")
        return super().__new__(
            cls,
            ckpt_to_initialize_from,
            vars_to_warm_start,
            var_name_to_vocab_info or {},
            var_name_to_prev_var_name or {},
        )


def _chosen_variables(vars_to_warm_start) -> list:
    if vars_to_warm_start is None:
        return []
    if isinstance(vars_to_warm_start, str):
        return ops.get_collection(ops.GraphKeys.TRAINABLE_VARIABLES, scope=vars_to_warm_start)
    if all(isinstance(v, str) for v in vars_to_warm_start):
        chosen = []
        for scope in vars_to_warm_start:
            chosen += ops.get_collection(ops.GraphKeys.GLOBAL_VARIABLES, scope=scope)
        return chosen
    return list(vars_to_warm_start)


def _checkpoint_name(var) -> str:
    info = var._get_save_slice_info()
    if info is not None:
        if list(info.full_shape) != var.shape.as_list():
            raise ValueError(
                f"Warm-starting {info.full_name}: variables in more than one partition are "
                "not supported"
            )
        return info.full_name
    return var.op.name


def warm_start(settings) -> None:
    """Replace the chosen variables' initializers with the checkpoint's values.

    Raises:
      ValueError: a name not in the checkpoint; a shape that differs; a VocabInfo that
        does not fit its variable.
    """
    if not isinstance(settings, WarmStartSettings):
        settings = WarmStartSettings(settings)
    if settings.var_name_to_vocab_info:  # (TF's estimators call this same function)
        training_extras.warm_start(*settings)
        return
    logger.info("Warm-starting from: %s", settings.ckpt_to_initialize_from)
    assignment = {}
    for var in _chosen_variables(settings.vars_to_warm_start):
        name = _checkpoint_name(var)
        assignment[settings.var_name_to_prev_var_name.get(name, name)] = var
    if assignment:
        checkpoint_utils.init_from_checkpoint(settings.ckpt_to_initialize_from, assignment)
