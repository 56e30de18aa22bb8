"""`tf.custom_gradient` and `tf.grad_pass_through` in graph mode, as TF1 builds them.

A decorated `f(*args)` returns `(result, grad_fn)`.  Its results and arguments pass
through one IdentityN whose gradient is overridden (`Graph.gradient_override_map`) by a
gradient registered under a fresh name: it calls `grad_fn(*dresults)` for the
arguments' gradients and gives none to the results' own producers, so autodiff does
not walk into `f`.  Variables `f` reads (a VariableV2 / VarHandleOp between the
arguments and the results) pass through the IdentityN too, after the arguments, and
`grad_fn` must take `variables=` and return their gradients, as in TF.  TF's graph-mode
limit holds: no keyword arguments.
"""

from __future__ import annotations

import functools
import inspect
import itertools

from asyncflow import graph as ops
from asyncflow import nest
from asyncflow.graph import GraphKeys
from asyncflow.ops import array_ops
from asyncflow.registry import RegisterGradient

__all__ = ["custom_gradient", "grad_pass_through"]

_UIDS = itertools.count(1)


def custom_gradient(f=None):
    """Decorator: `f(*args) -> (result, grad_fn)`; `grad_fn(*dresults)` returns the
    gradients of `args` (one, or a list/tuple of as many as there are args).

    Raises (when the decorated function is called):
      ValueError: keyword arguments (TF: only in eager mode).
    At gradient time, as TF: ValueError when grad_fn returns another number of gradients.
    """
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def decorated(*args, **kwargs):
        if kwargs:
            raise ValueError(
                "The custom_gradient decorator currently supports keywords arguments only "
                "when eager execution is enabled."
            )
        args = [ops.convert_to_tensor(a) for a in args]
        result, grad_fn = f(*args)
        flat_result = [ops.convert_to_tensor(r) for r in nest.flatten(result)]
        n_results = len(flat_result)
        variables = _variables_between(args, flat_result)
        spec = inspect.getfullargspec(grad_fn)
        takes_variables = "variables" in spec.args + spec.kwonlyargs or spec.varkw
        if variables and not takes_variables:
            raise TypeError(
                "@tf.custom_gradient grad_fn must accept keyword argument 'variables', "
                f"since function uses variables: {variables}"
            )
        name = f"CustomGradient-{next(_UIDS)}"

        @RegisterGradient(name)
        def _grad(_op, *dresults):
            if variables:
                grads, var_grads = grad_fn(*dresults[:n_results], variables=variables)
                if len(var_grads) != len(variables):
                    raise ValueError(
                        "Must return gradient for each variable from @custom_gradient grad_fn."
                    )
            else:
                grads, var_grads = grad_fn(*dresults[:n_results]), []
            grads = list(grads) if isinstance(grads, list | tuple) else [grads]
            # (a wrong count: autodiff's ValueError)
            return [None] * n_results + grads + list(var_grads)

        graph = ops.get_default_graph()
        inputs = flat_result + args + [ops.convert_to_tensor(v) for v in variables]
        with graph.gradient_override_map({"IdentityN": name}):
            passed = array_ops.identity_n(inputs)
        for out, src in zip(passed, inputs, strict=True):
            out.set_shape(src.shape)
        return nest.pack_sequence_as(result, passed[:n_results])

    return decorated


def _variables_between(args, results) -> list:
    """The global and local variables whose ops the results reach without passing an
    argument, sorted by name (TF's search; TF also leaves one Identity per result)."""
    results = [array_ops.identity(r) for r in results]
    stop = {id(a) for a in args}
    seen, stack, var_ops = set(), [r.op for r in results], set()
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if op.type in ("VariableV2", "VarHandleOp"):
            var_ops.add(op.name)
        stack.extend(t.op for t in op.inputs if id(t) not in stop)
    found = {}
    for v in ops.get_collection(GraphKeys.GLOBAL_VARIABLES) + ops.get_collection(
        GraphKeys.LOCAL_VARIABLES
    ):
        if v.op.name in var_ops:
            found.setdefault(v.op.name, v)
    return sorted(found.values(), key=lambda v: v.name)


def grad_pass_through(f):
    """`f` forward, the identity backward (a straight-through estimator): the gradient
    of `f(x)` with respect to x is taken as the incoming gradient unchanged."""

    @functools.wraps(f)
    def decorated(x):
        @custom_gradient
        def passed(x):
            return f(x), lambda dy: dy

        return passed(x)

    return decorated
