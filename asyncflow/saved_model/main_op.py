"""`tf.saved_model.main_op`: the usual main op of a SavedModel (initialise the local
variables and the lookup tables), alone or after a restore op."""

from __future__ import annotations

from asyncflow import framework_extras, variables
from asyncflow import graph as ops
from asyncflow.ops import control_flow_ordering

__all__ = ["main_op", "main_op_with_restore"]


def main_op():
    """One group of the local variables' and the tables' initializers."""
    init_local = variables.local_variables_initializer()
    init_tables = framework_extras.tables_initializer()
    return control_flow_ordering.group(init_local, init_tables)


def main_op_with_restore(restore_op_name):
    """`restore_op_name` (an op or its name) run after main_op()."""
    with ops.control_dependencies([main_op()]):
        restore = restore_op_name
        if isinstance(restore, str):
            restore = ops.get_default_graph().as_graph_element(restore)
        return control_flow_ordering.group(restore)
