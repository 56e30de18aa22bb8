"""map_fn, scan, foldl, foldr: higher-order functions over the first dimension, built
on while_loop and TensorArray as TF1's functional_ops.

Elements are read from TensorArrays unstacked from `elems` (any nested structure of
tensors with the same first dimension); results are written to TensorArrays and
stacked.  Gradients flow through the loop and the arrays.
"""

from __future__ import annotations

from asyncflow import dtypes, nest
from asyncflow import graph as ops
from asyncflow.ops import array_ops
from asyncflow.ops.control_flow_contexts import while_loop
from asyncflow.ops.tensor_array_ops import TensorArray

__all__ = ["map_fn", "scan", "foldl", "foldr"]


def _prepare(elems, name):
    flat = [ops.convert_to_tensor(e, name="elem") for e in nest.flatten(elems)]
    if not flat:
        raise ValueError(f"{name}: elems must not be empty")
    for e in flat:
        if e.shape.ndims == 0:
            raise ValueError(f"Elements in elems must be 1+ dimensional Tensors, not scalars: {e}")
    n = flat[0].shape[0].value
    if n is None:
        n = array_ops.shape(flat[0])[0]
    tas = [
        TensorArray(e.dtype, size=n, dynamic_size=False, infer_shape=True).unstack(e) for e in flat
    ]
    return flat, n, tas


def _read(tas, i, elems, flat):
    values = [ta.read(i) for ta in tas]
    for v, e in zip(values, flat):
        v.set_shape(e.shape[1:])
    return nest.pack_sequence_as(elems, values)


def map_fn(
    fn,
    elems,
    dtype=None,
    parallel_iterations=None,
    back_prop=True,
    swap_memory=False,
    infer_shape=True,
    name=None,
    fn_output_signature=None,
):
    """[fn(e) for e in unstack(elems)], stacked; `dtype` (TF 2's `fn_output_signature`:
    dtypes or TensorSpecs) gives fn's output structure when it differs from elems'.

    Raises:
      TypeError: `fn` not callable.
      ValueError: scalar elems, or fn's output structure differs from `dtype`.
    """
    if not callable(fn):
        raise TypeError("fn must be callable.")
    from asyncflow.deprecation import deprecated_argument_lookup

    dtype = deprecated_argument_lookup("fn_output_signature", fn_output_signature, "dtype", dtype)
    if dtype is not None:
        dtype = nest.map_structure(lambda d: getattr(d, "dtype", d), dtype)
    parallel_iterations = parallel_iterations or 10
    with ops.name_scope(name, "map", nest.flatten(elems)):
        flat, n, tas = _prepare(elems, "map_fn")
        out_struct = elems if dtype is None else dtype
        out_dtypes = (
            [f.dtype for f in flat]
            if dtype is None
            else [dtypes.as_dtype(d) for d in nest.flatten(dtype)]
        )
        acc = [TensorArray(d, size=n, infer_shape=infer_shape) for d in out_dtypes]
        i = array_ops.constant(0, name="i")

        def body(i, accs):
            out = fn(_read(tas, i, elems, flat))
            try:
                nest.assert_same_structure(out_struct, out, check_types=False)
            except (TypeError, ValueError) as e:
                raise ValueError(
                    f"The two structures don't have the same nested structure: fn output and "
                    f"dtype. {e}"
                ) from None
            flat_out = [ops.convert_to_tensor(o) for o in nest.flatten(out)]
            return i + 1, [a.write(i, o) for a, o in zip(accs, flat_out)]

        _, accs = while_loop(
            lambda i, _: i < n,
            body,
            (i, acc),
            parallel_iterations=parallel_iterations,
            back_prop=back_prop,
            swap_memory=swap_memory,
            maximum_iterations=n,
        )
        results = [a.stack() for a in accs]
        return nest.pack_sequence_as(out_struct, results)


def scan(
    fn,
    elems,
    initializer=None,
    parallel_iterations=10,
    back_prop=True,
    swap_memory=False,
    infer_shape=True,
    reverse=False,
    name=None,
):
    """Running `a = fn(a, e)` over elems; every intermediate `a`, stacked."""
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with ops.name_scope(name, "scan", nest.flatten(elems)):
        flat, n, tas = _prepare(elems, "scan")
        if initializer is None:
            first = 0 if not reverse else n - 1
            a0 = _read(tas, first, elems, flat)
            start = 1
            a_struct = elems
        else:
            a0 = nest.map_structure(ops.convert_to_tensor, initializer)
            start = 0
            a_struct = initializer
        flat_a0 = nest.flatten(a0)
        acc = [TensorArray(a.dtype, size=n, infer_shape=infer_shape) for a in flat_a0]
        if initializer is None:
            acc = [ta.write(0 if not reverse else n - 1, a) for ta, a in zip(acc, flat_a0)]
        i = array_ops.constant(start, name="i")

        def body(i, a, accs):
            idx = (n - 1 - i) if reverse else i
            out = fn(nest.pack_sequence_as(a_struct, a), _read(tas, idx, elems, flat))
            flat_out = [ops.convert_to_tensor(o) for o in nest.flatten(out)]
            return i + 1, flat_out, [ta.write(idx, o) for ta, o in zip(accs, flat_out)]

        _, _, accs = while_loop(
            lambda i, a, accs: i < n,
            body,
            (i, flat_a0, acc),
            parallel_iterations=parallel_iterations,
            back_prop=back_prop,
            swap_memory=swap_memory,
            maximum_iterations=n,
        )
        return nest.pack_sequence_as(a_struct, [ta.stack() for ta in accs])


def _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name, reverse):
    if not callable(fn):
        raise TypeError("fn must be callable.")
    what = "foldr" if reverse else "foldl"
    with ops.name_scope(name, what, nest.flatten(elems)):
        flat, n, tas = _prepare(elems, what)
        if initializer is None:
            a0 = _read(tas, n - 1 if reverse else 0, elems, flat)
            a_struct, start = elems, 1
        else:
            a0 = nest.map_structure(ops.convert_to_tensor, initializer)
            a_struct, start = initializer, 0
        i = array_ops.constant(start, name="i")

        def body(i, a):
            idx = (n - 1 - i) if reverse else i
            out = fn(nest.pack_sequence_as(a_struct, a), _read(tas, idx, elems, flat))
            return i + 1, [ops.convert_to_tensor(o) for o in nest.flatten(out)]

        _, a = while_loop(
            lambda i, a: i < n,
            body,
            (i, nest.flatten(a0)),
            parallel_iterations=parallel_iterations,
            back_prop=back_prop,
            swap_memory=swap_memory,
            maximum_iterations=n,
        )
        return nest.pack_sequence_as(a_struct, a)


def foldl(
    fn,
    elems,
    initializer=None,
    parallel_iterations=10,
    back_prop=True,
    swap_memory=False,
    name=None,
):
    """fn(...fn(fn(initializer, e0), e1)..., en-1) (initializer defaults to e0)."""
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name, False)


def foldr(
    fn,
    elems,
    initializer=None,
    parallel_iterations=10,
    back_prop=True,
    swap_memory=False,
    name=None,
):
    """Like foldl from the last element to the first."""
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name, True)
