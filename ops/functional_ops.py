"""map_fn, scan, foldl, foldr: higher-order functions over the first dimension, built
on while_loop and TensorArray as TF1's functional_ops.

Elements are read from TensorArrays unstacked from `elems` (any nested structure of
tensors with the same first dimension); results are written to TensorArrays and
stacked.  Gradients flow through the loop and the arrays.
"""

from __future__ import annotations

from asyncflow import dtypes, nest, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import array_ops
from asyncflow.ops.control_flow_contexts import while_loop
from asyncflow.ops.tensor_array_ops import TensorArray
from asyncflow.ragged import RaggedTensor, is_ragged

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
    """[fn(e) for e in unstack(elems)], stacked; `dtype` (or `fn_output_signature`)
    gives fn's output structure when it differs from elems'.  RaggedTensor elems give
    fn their rows (a Tensor, or a RaggedTensor of one ragged dimension less); a
    RaggedTensorSpec output (the default for ragged elems) stacks fn's ragged results.

    Raises:
      TypeError: `fn` not callable.
      ValueError: scalar elems, or fn's output structure differs from `dtype`.
    """
    if not callable(fn):
        raise TypeError("fn must be callable.")
    if fn_output_signature is not None:  # (as TF's: it wins over dtype)
        dtype = fn_output_signature
    leaves = nest.flatten(elems) + (nest.flatten(dtype) if dtype is not None else [])
    if any(hasattr(x, "_cf_parts") or _is_extension_spec(x) for x in leaves):
        kwargs = {"parallel_iterations": parallel_iterations, "back_prop": back_prop,
                  "swap_memory": swap_memory, "infer_shape": infer_shape, "name": name}
        return _extension_map_fn(fn, elems, dtype, kwargs)
    if any(is_ragged(x) or _is_ragged_spec(x) for x in leaves):
        kwargs = {"parallel_iterations": parallel_iterations, "back_prop": back_prop,
                  "swap_memory": swap_memory, "infer_shape": infer_shape}
        with ops.name_scope(name, "map", []):
            return _ragged_map_fn(fn, elems, dtype, kwargs)
    if dtype is not None:  # (TensorSpecs give their dtypes)
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


def _parts(x) -> list:
    return x._cf_parts() if hasattr(x, "_cf_parts") else [x]


def _is_extension_spec(d) -> bool:
    return hasattr(d, "_field_values") and hasattr(d, "_component_specs")


def _extension_map_fn(fn, elems, dtype, kwargs):
    """map_fn over or to BatchableExtensionType values (found by their `_cf_parts`, and
    their specs in `dtype`): each is mapped as its tensors, row by row; fn sees (and
    returns) the values rebuilt from their rows.  asyncflow maps values whose fields are
    dense tensors.

    Raises:
      AttributeError: a value of a non-batchable type (TF's: its Spec has no _unbatch).
      NotImplementedError: a value or spec with ragged or sparse fields.
    """
    flat = nest.flatten(elems)
    for x in flat:
        if hasattr(x, "_cf_parts"):
            x._type_spec._unbatch()
            if not x._dense_fields_only():
                raise NotImplementedError(
                    "asyncflow's map_fn maps ExtensionType values of dense tensor fields only"
                )
    out_struct = elems if dtype is None else dtype
    out_dtypes = []
    for d in nest.flatten(out_struct):
        if hasattr(d, "_cf_parts"):
            out_dtypes += [c.dtype for c in d._cf_parts()]
        elif _is_extension_spec(d):
            d._unbatch()
            specs = d._component_specs
            if not all(type(c).__name__ == "TensorSpec" for c in specs):
                raise NotImplementedError(
                    "asyncflow's map_fn maps to ExtensionType values of dense tensor fields only"
                )
            out_dtypes += [c.dtype for c in specs]
        else:
            out_dtypes.append(dtypes.as_dtype(getattr(d, "dtype", d)))
    traced = []  # fn's outputs, as traced once: the structure the results are rebuilt in

    def regroup(like, values):
        out, pos = [], 0
        for x in like:
            n = len(_parts(x))
            chunk, pos = values[pos : pos + n], pos + n
            out.append(x._cf_rebuild(chunk) if hasattr(x, "_cf_parts") else chunk[0])
        return out

    def body(row_parts):
        rows = regroup(flat, list(row_parts))
        out = nest.flatten(fn(nest.pack_sequence_as(elems, rows)))
        traced[:] = out
        return [c for o in out for c in _parts(o)]

    flat_parts = [c for x in flat for c in _parts(x)]
    results = map_fn(body, flat_parts, dtype=out_dtypes, **kwargs)
    return nest.pack_sequence_as(out_struct, regroup(traced, results))


def _ragged_map_fn(fn, elems, dtype, kwargs):
    """map_fn over ragged elems or to ragged results, as TF's: each ragged elem becomes
    a vector of variants (RaggedTensorToVariant, one row each), decoded inside the loop;
    a ragged result is encoded there and decoded, stacked, after it."""
    in_specs = [_spec_of(e) for e in nest.flatten(elems)]
    encoded = [_encode(e, batched=True) if sp else e
               for e, sp in zip(nest.flatten(elems), in_specs)]
    out_struct = elems if dtype is None else dtype
    out_specs = [_spec_of(d, element=dtype is None) for d in nest.flatten(out_struct)]
    out_dtypes = [dtypes.variant if sp else (d.dtype if dtype is None else dtypes.as_dtype(d))
                  for d, sp in zip(nest.flatten(out_struct), out_specs)]

    def body(x):
        rows = [_decode(v, sp) if sp else v for v, sp in zip(nest.flatten(x), in_specs)]
        out = fn(nest.pack_sequence_as(elems, rows))
        flat = nest.flatten(out)
        if len(flat) != len(out_specs):
            raise ValueError("The two structures don't have the same nested structure: fn "
                             "output and dtype.")
        return [_encode(o, batched=False, rank=sp[0]) if sp else o
                for o, sp in zip(flat, out_specs)]

    results = map_fn(body, nest.pack_sequence_as(elems, encoded), dtype=out_dtypes, **kwargs)
    results = [_decode(r, (sp[0] + 1, *sp[1:]), input_rank=sp[0]) if sp else r
               for r, sp in zip(results, out_specs)]
    return nest.pack_sequence_as(out_struct, results)


def _is_ragged_spec(x) -> bool:
    # (a tf.RaggedTensorSpec, known by its fields: composite_specs sits above the ops)
    return not is_ragged(x) and hasattr(x, "row_splits_dtype") and hasattr(x, "ragged_rank")


def _spec_of(x, element=True):
    """(ragged rank of one element, dtype, splits dtype) of a ragged elem or spec."""
    if is_ragged(x):
        inner = x.flat_values.shape[1:]
        rank = x.ragged_rank - 1 if element else x.ragged_rank
        return (rank, x.dtype, x.row_splits.dtype, inner)
    if _is_ragged_spec(x):
        shape = x.shape
        inner = shape[x.ragged_rank + 1 :] if shape.ndims is not None else None
        return (x.ragged_rank, x.dtype, x.row_splits_dtype, inner)
    return None


def _encode(x, batched, rank=None):
    splits = list(x.nested_row_splits) if is_ragged(x) else []
    values = x.flat_values if is_ragged(x) else ops.convert_to_tensor(x)
    if rank is not None and len(splits) != rank:
        raise ValueError(f"fn's result has ragged_rank {len(splits)}, its signature {rank}")
    return ops.apply_op("RaggedTensorToVariant", [splits, values],
                        {"RAGGED_RANK": len(splits), "batched_input": batched}).outputs[0]


def _decode(v, spec, input_rank=None):
    rank, dtype, split_dtype, inner = spec
    out = ops.apply_op("RaggedTensorFromVariant", [v], {
        "input_ragged_rank": rank if input_rank is None else input_rank,
        "output_ragged_rank": rank, "Tvalues": dtype, "Tsplits": split_dtype}).outputs
    n = v.shape[0].value if v.shape.ndims == 1 else None
    if n is not None and len(out) > 1:  # (stacked results: one row per element)
        out[0].set_shape([n + 1])
    result = out[-1]
    if inner is not None:
        result.set_shape(tensor_shape.TensorShape([None]).concatenate(inner))
    for s in reversed(out[:-1]):
        result = RaggedTensor(result, s, internal=True)
    return result


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
