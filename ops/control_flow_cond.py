"""cond and case (TF1's classic conds, whitepaper §4.4), built on the contexts of
`control_flow_contexts`.

cond: every tensor from outside a branch enters it through a Switch on the predicate
(output 1 for true_fn, 0 for false_fn), ops without inputs get a control edge from the
branch pivot (an Identity of the predicate's Switch), so the untaken branch is dead and
never runs; a Merge per output (per component of an IndexedSlices or SparseTensor)
joins the branches.  case is a chain of conds.

Assert lives here because TF guards it with a cond ("AssertGuard") whenever a data
tensor may sit in device memory (any dtype but int32 and string): the message is then
formatted only when the check fails.
"""

from __future__ import annotations

import functools

from asyncflow import dispatch as _dispatch
from asyncflow import dtypes, nest
from asyncflow import graph as ops
from asyncflow.indexed_slices import IndexedSlices
from asyncflow.ops import array_ops, cast_ops, logging_ops, math_ops, reduction_ops
from asyncflow.ops import control_flow_prims as prims
from asyncflow.ops.control_flow_contexts import (
    CondContext,
    _composite_kind,
    _identity,
    _leaf_components,
    _pack_components,
)
from asyncflow.ops.control_flow_ordering import no_op

__all__ = ["cond", "case", "Assert"]


# -- cond --------------------------------------------------------------------------------


def _unpack_if_singleton(res):
    if isinstance(res, (list, tuple)) and len(res) == 1:
        return res[0]
    return res


@_dispatch.add_dispatch_support
def cond(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None, fn2=None):
    """`true_fn()` if `pred` else `false_fn()`; only the selected branch runs.

    Both functions must return the same (nested) structure of tensors of the same
    dtypes; singleton lists are unpacked unless `strict`.

    Raises:
      TypeError: missing or non-callable functions, a Python bool `pred`, a non-bool
        `pred`, or branch outputs of different structure kinds.
      ValueError: a non-scalar `pred`, branches returning nothing, different nested
        structures or dtypes.
    """
    if fn1 is not None:
        if true_fn is not None:
            raise TypeError("cond(): true_fn and fn1 may not be set simultaneously.")
        true_fn = fn1
    elif true_fn is None:
        raise TypeError("cond(): true_fn argument required")
    if fn2 is not None:
        if false_fn is not None:
            raise TypeError("cond(): false_fn and fn2 may not be set simultaneously.")
        false_fn = fn2
    elif false_fn is None:
        raise TypeError("cond(): false_fn argument required")
    if not callable(true_fn):
        raise TypeError("true_fn must be callable.")
    if not callable(false_fn):
        raise TypeError("false_fn must be callable.")
    with ops.name_scope(name, "cond", [pred]) as scope:
        if isinstance(pred, bool):
            raise TypeError("pred must not be a Python bool")
        pred = ops.convert_to_tensor(pred)
        if pred.dtype != dtypes.bool:
            raise TypeError(
                f"Input 'pred' of 'Switch' Op has type {pred.dtype.name} that does not match "
                "expected type of bool."
            )
        if pred.shape.ndims not in (None, 0):
            raise ValueError(
                f"Shape must be rank 0 but is rank {pred.shape.ndims} for "
                f"'{scope}Switch' (op: 'Switch') with input shapes: "
                f"{ops.shape_text(pred.shape)}, {ops.shape_text(pred.shape)}."
            )
        p_2, p_1 = prims.switch(pred, pred)
        pivot_1 = _identity(p_1, name="switch_t")
        pivot_2 = _identity(p_2, name="switch_f")
        pred = _identity(pred, name="pred_id")
        graph = pred.graph
        for t in (p_1, pivot_1, pivot_2, pred):
            graph.prevent_fetching(t.op)  # TF's: only the Merges of a cond are fetchable
        results = []
        for pivot, branch, fn in ((pivot_1, 1, true_fn), (pivot_2, 0, false_fn)):
            ctx = CondContext(pred, pivot, branch)
            with ctx.entered():
                orig, res = ctx.BuildCondBranch(fn)
            if orig is None:
                which = "true_fn" if branch else "false_fn"
                raise ValueError(f"{which} must have a return value.")
            results.append((ctx, orig, res))
        (ctx_t, orig_t, res_t), (ctx_f, orig_f, res_f) = results
        if not strict:
            orig_t, orig_f = _unpack_if_singleton(orig_t), _unpack_if_singleton(orig_f)
        try:
            nest.assert_same_structure(orig_t, orig_f)
        except TypeError as e:
            raise TypeError(f"Incompatible return types of true_fn and false_fn: {e}") from None
        except ValueError as e:
            raise ValueError(f"Incompatible return values of true_fn and false_fn: {e}") from None
        for x, y in zip(nest.flatten(orig_t), nest.flatten(orig_f)):
            if _composite_kind(x) != _composite_kind(y):
                raise ValueError(
                    "Incompatible return values of true_fn and false_fn: The two structures "
                    f"don't have the same nested structure.\n\nFirst structure: {x}\n\n"
                    f"Second structure: {y}"
                )
        if not res_t:
            raise ValueError("true_fn and false_fn must return at least one result.")
        _cast_indexed_slices_indices(orig_t, orig_f, (ctx_t, res_t), (ctx_f, res_f))
        for x, y in zip(res_t, res_f):
            if x.dtype != y.dtype:
                raise ValueError(
                    "Outputs of true_fn and false_fn must have the same type: "
                    f"{x.dtype.name}, {y.dtype.name}"
                )
        merges = [prims.merge([f, t])[0] for f, t in zip(res_f, res_t)]
        merges = _pack_components(nest.flatten(orig_t), merges)
        if ctx_t.outer_context is None:
            ops.add_to_collection(ops.GraphKeys.COND_CONTEXT, ctx_t)
            ops.add_to_collection(ops.GraphKeys.COND_CONTEXT, ctx_f)
        merges = nest.pack_sequence_as(orig_t, merges)
        if not strict:
            merges = _unpack_if_singleton(merges)
        return merges


def _cast_indexed_slices_indices(orig_t, orig_f, *branches) -> None:
    """TF's cond: where both branches return IndexedSlices whose indices differ in dtype
    (int32 and int64), both cast theirs to int64 (in `res_*`, in place, in-branch)."""
    pos = 0
    for x, y in zip(nest.flatten(orig_t), nest.flatten(orig_f)):
        width = 1 if isinstance(x, ops.Operation) else len(_leaf_components(x))
        if (
            isinstance(x, IndexedSlices)
            and isinstance(y, IndexedSlices)
            and len(_leaf_components(y)) == width
            and x.indices.dtype != y.indices.dtype
        ):
            for ctx, res in branches:
                with ctx.entered():
                    res[pos + 1] = cast_ops.cast(res[pos + 1], dtypes.int64)
        pos += width


# -- Assert ------------------------------------------------------------------------------

_HOST_DTYPES = (dtypes.int32, dtypes.string)


def Assert(condition, data, summarize=None, name=None) -> ops.Operation:  # noqa: N802
    """An op that fails when `condition` (a bool scalar) is false (`tf.Assert`).

    Returns an Operation to run or depend on: the Assert itself when every data tensor
    is int32 or string, else the Merge of a cond named "AssertGuard" whose false branch
    holds the Assert (the true branch is a NoOp), as TF builds it.

    Raises:
      InvalidArgumentError: at run time, "assertion failed: [data0] [data1]..." with at
        most `summarize` (default 3) values of each data tensor.
    """
    with ops.name_scope(name, "Assert", [condition, data]):
        xs = [ops.convert_to_tensor(d) for d in data]
        if all(x.dtype.base_dtype in _HOST_DTYPES for x in xs):
            return logging_ops.assert_op(condition, data, summarize, name="Assert")
        condition = ops.convert_to_tensor(condition, name="Condition")

        def _failing():
            # `data` itself (not `xs`): TF converts Python values again inside the
            # branch, as "AssertGuard/Assert/data_0", so they depend on its pivot.
            return logging_ops.assert_op(condition, data, summarize, name="Assert")

        return cond(condition, no_op, _failing, name="AssertGuard").op


# -- case --------------------------------------------------------------------------------


def _case_args(pred_fn_pairs, exclusive):
    if not isinstance(pred_fn_pairs, (list, tuple, dict)):
        raise TypeError(
            f"'pred_fn_pairs' must be a list, tuple, or dict. Received: {type(pred_fn_pairs)}"
        )
    if isinstance(pred_fn_pairs, dict):
        pred_fn_pairs = sorted(pred_fn_pairs.items(), key=lambda item: item[0].name)
    for pair in pred_fn_pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError(f"Each entry in 'pred_fn_pairs' must be a 2-tuple. Received {pair}.")
        pred, fn = pair
        if isinstance(pred, ops.Tensor):
            if pred.dtype != dtypes.bool:
                raise TypeError(f"pred must be Tensor of type bool: {pred.name}")
        else:
            raise TypeError(f"pred must be a Tensor, got: {pred}")
        if not callable(fn):
            raise TypeError(f"fn for pred {pred.name} must be callable.")
    if not pred_fn_pairs:
        return (), ()
    predicates, actions = zip(*pred_fn_pairs)
    return list(predicates), list(actions)


def _assert_at_most_n_true(predicates, n, msg):
    preds_c = array_ops.stack(predicates, name="preds_c")
    num_true = reduction_ops.reduce_sum(
        math_ops.cast(preds_c, dtypes.int32), name="num_true_conds"
    )
    condition = math_ops.less_equal(num_true, array_ops.constant(n, name="n_true_conds"))
    return Assert(condition, data=[msg, preds_c], summarize=len(predicates))


def _case_default_action(predicates, actions):
    k = len(predicates) - 1
    predicate, action = predicates[k], actions[k]
    others_p, others_a = predicates[:k], actions[:k]

    def default_action():
        others_msg = (
            f"Implementation error: selected default action #{k} was called, but some of "
            "other predicates are True: "
        )
        deps = [
            Assert(
                predicate,
                data=[
                    "Input error: None of conditions evaluated as True:",
                    array_ops.stack(predicates, name="preds_c"),
                ],
            )
        ]
        if others_p:
            deps.insert(0, _assert_at_most_n_true(others_p, 0, others_msg))
        with ops.control_dependencies(deps):
            return action()

    return default_action, others_p, others_a


def case(pred_fn_pairs, default=None, exclusive=False, strict=False, name="case"):
    """The result of the first `fn` whose `pred` is true (TF1's `tf.case`).

    Built as nested conds evaluated in order; `default` runs when no predicate holds
    (without `default`, the last pair is the default and asserts its predicate).
    `exclusive=True` asserts at run time that at most one predicate is true.

    Raises:
      TypeError: `pred_fn_pairs` is not a list/tuple/dict of (bool Tensor, callable).
      errors.InvalidArgumentError (at run time): the exclusivity or default assertion.
    """
    predicates, actions = _case_args(pred_fn_pairs, exclusive)
    with ops.name_scope(name, "case", list(predicates)):
        if default is None:
            if not predicates:
                raise ValueError("case needs at least one pred_fn_pair or a default")
            default, predicates, actions = _case_default_action(predicates, actions)
        fn = default
        for predicate, action in reversed(list(zip(predicates, actions))):
            fn = functools.partial(cond, predicate, true_fn=action, false_fn=fn, strict=strict)
        if exclusive and len(predicates) > 1:
            with ops.control_dependencies(
                [_assert_at_most_n_true(predicates, 1, "Input error: exclusive=True")]
            ):
                return fn()
        return fn()
