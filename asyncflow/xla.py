"""`tf.xla.experimental`: TF1's `jit_scope` and `compile`.

asyncflow has no XLA compiler: its own plan passes fuse element-wise chains and products
whatever the graph says.  `jit_scope` therefore does what TF's does to the graph, and
only that: the ops built inside (and their gradients, `gradients._xla_grad_attrs`)
carry TF's `_XlaCompile`, `_XlaScope` and `_XlaSeparateCompiledGradients` attrs, so a
GraphDef written here reads in TF as the same clustering request.  `compile` builds the
computation and returns its outputs as TF does (a list of `output_<i>` tensors); it runs
as ordinary graph ops.
"""

from __future__ import annotations

import contextlib

from asyncflow import graph as ops
from asyncflow.ops import array_ops

__all__ = ["experimental"]

_SCOPES = "xla_jit_scopes"  # (scopes made, scopes open) in this graph


@contextlib.contextmanager
def jit_scope(compile_ops=True, separate_compiled_gradients=False):
    """Marks the ops built inside for one XLA cluster, `jit_scope_<n>` (n counted per
    graph; a scope inside another stays in the outer one's cluster, as TF's).
    `compile_ops` is a bool, or a function of an op's NodeDef returning one."""
    graph = ops.get_default_graph()
    count, depth = graph._attached.get(_SCOPES, (0, 0))
    if callable(compile_ops):

        def xla_compile(node_def):
            return bool(compile_ops(node_def))
    else:
        xla_compile = bool(compile_ops)
    attrs = {
        "_XlaCompile": xla_compile,
        "_XlaSeparateCompiledGradients": bool(separate_compiled_gradients),
    }
    if depth == 0:
        attrs["_XlaScope"] = f"jit_scope_{count}".encode()
        count += 1
    graph._attached[_SCOPES] = (count, depth + 1)
    try:
        with graph._attr_scope(attrs):
            yield
    finally:
        count, depth = graph._attached[_SCOPES]
        graph._attached[_SCOPES] = (count, depth - 1)


def compile(computation, inputs=None):  # noqa: A001 - TF's name
    """`computation(*inputs)`'s outputs as a list of tensors named `output_<i>`.

    Raises:
      TypeError: `inputs` is not a list or tuple.
    """
    if inputs is None:
        inputs = []
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"inputs must be a list or tuple, got {type(inputs).__name__}")
    outputs = computation(*inputs)
    if outputs is None:
        return []
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    result = []
    for i, out in enumerate(outputs):
        if isinstance(out, ops.Operation):
            result.append(out)
        else:
            result.append(array_ops.identity(ops.convert_to_tensor(out), name=f"output_{i}"))
    return result


class _Experimental:
    """`tf.xla.experimental`."""

    jit_scope = staticmethod(jit_scope)
    compile = staticmethod(compile)


experimental = _Experimental()
