"""`tf.custom_gradient` and `tf.grad_pass_through` in graph mode, as TF1 builds them.

A decorated `f(*args)` returns `(result, grad_fn)`.  Its results and arguments pass
through one IdentityN whose gradient is overridden (`Graph.gradient_override_map`) by a
gradient registered under a fresh name: it calls `grad_fn(*dresults)` for the
arguments' gradients and gives none to the results' own producers, so autodiff does
not walk into `f`.  TF's graph-mode limits hold: no keyword arguments; variables `f`
reads receive no gradient from it.
"""

from __future__ import annotations

import functools
import itertools

from asyncflow import graph as ops
from asyncflow import nest
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
        name = f"CustomGradient-{next(_UIDS)}"

        @RegisterGradient(name)
        def _grad(_op, *dresults):
            grads = grad_fn(*dresults[:n_results])
            grads = list(grads) if isinstance(grads, list | tuple) else [grads]
            return [None] * n_results + grads  # (a wrong count: autodiff's ValueError)

        graph = ops.get_default_graph()
        with graph.gradient_override_map({"IdentityN": name}):
            passed = array_ops.identity_n(flat_result + args)
        for out, src in zip(passed, flat_result + args, strict=True):
            out.set_shape(src.shape)
        return nest.pack_sequence_as(result, passed[:n_results])

    return decorated


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
