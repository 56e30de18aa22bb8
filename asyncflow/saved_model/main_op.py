"""`tf.saved_model.main_op`: the op a SavedModel runs after restoring (TF1's)."""

from __future__ import annotations

from asyncflow import graph as ops

__all__ = ["main_op", "main_op_with_restore"]


def main_op():
    """One op initializing the global and local variables and the tables: TF's
    `group_deps` over `init`, `init_1` and `init_all_tables`."""
    from asyncflow import variables
    from asyncflow.framework_extras import tables_initializer
    from asyncflow.ops import control_flow_ops

    return control_flow_ops.group(
        variables.global_variables_initializer(),
        variables.local_variables_initializer(),
        tables_initializer(),
    )


def main_op_with_restore(restore_op_name):
    """`main_op()` and then the restore op (given as an op or tensor, as TF 2.21 takes
    it).

    Raises:
      TypeError: restore_op_name is a string (TF 2.21's group refuses it too).
    """
    from asyncflow.ops import control_flow_ops

    if isinstance(restore_op_name, (str, bytes)):
        raise TypeError(
            "'inputs' should be zero or more (nested) Tensors. Received "
            f"'{restore_op_name}' with type '{type(restore_op_name)}'."
        )
    with ops.control_dependencies([main_op()]):
        return control_flow_ops.group(restore_op_name)
