"""TF's strided-slice index arithmetic (BuildDenseSpec, ValidateStridedSliceOp), on
plain Python ints: shared by StridedSlice (its shape function and kernel, in
`slicing_ops`) and StridedSliceGrad (`gradient_ops`).  No graph, no arrays.
"""

from __future__ import annotations

__all__ = [
    "MASK_DEFAULTS",
    "SliceError",
    "basic_index",
    "mask_attrs",
    "slice_masks",
    "strided_slice_spec",
]

_NEW_AXIS = -1
_SHRINK_AXIS = -2


class SliceError(Exception):
    """A strided-slice spec problem: ValueError at build time, InvalidArgument at run."""


def _bit(mask: int, i: int) -> bool:
    return bool((mask >> i) & 1)


def _dense_spec(rank, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                shrink_axis_mask):  # fmt: skip
    """TF's BuildDenseSpec: expand the ellipsis and drop new axes, per input dimension."""
    n = len(strides)
    if ellipsis_mask & (ellipsis_mask - 1):
        raise SliceError("Multiple ellipses in slice spec not allowed")
    num_add_after_ellipsis, seen = 0, False
    for i in range(n):
        if seen and _bit(new_axis_mask, i):
            num_add_after_ellipsis += 1
        if _bit(ellipsis_mask, i):
            seen = True
    if not seen:
        ellipsis_mask |= 1 << n
        n += 1
    d_begin, d_end, d_strides = [0] * rank, [0] * rank, [1] * rank
    d_bm = d_em = d_shrink = 0
    gather: list[int] = []
    full = 0
    for i in range(n):
        if _bit(ellipsis_mask, i):
            nxt = min(rank - (n - i) + 1 + num_add_after_ellipsis, rank)
            while full < nxt:
                d_bm |= 1 << full
                d_em |= 1 << full
                gather.append(full)
                full += 1
        elif _bit(new_axis_mask, i):
            gather.append(_NEW_AXIS)
        else:
            if full == rank:
                if rank == 0:
                    raise SliceError("Attempting to slice scalar input.")
                raise SliceError(
                    f"Index out of range using input dim {full}; input has only {rank} dims"
                )
            if begin is not None:
                d_begin[full] = int(begin[i])
            if end is not None:
                d_end[full] = int(end[i])
            d_strides[full] = int(strides[i])
            if _bit(begin_mask, i):
                d_bm |= 1 << full
            if _bit(end_mask, i):
                d_em |= 1 << full
            if _bit(shrink_axis_mask, i):
                gather.append(_SHRINK_AXIS)
                d_shrink |= 1 << full
            else:
                gather.append(full)
            full += 1
    return d_begin, d_end, d_strides, d_bm, d_em, d_shrink, gather


def strided_slice_spec(dims, begin, end, strides, masks):
    """TF's ValidateStridedSliceOp for input dims (None = unknown) and begin/end values
    (None = unknown).  Returns (final_shape, per-dim (begin, end, stride, shrink, size))."""
    begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask = masks
    d_begin, d_end, d_strides, d_bm, d_em, d_shrink, gather = _dense_spec(
        len(dims), begin, end, strides, *masks
    )
    valid = begin is not None and end is not None
    processing, canon = [], []
    for i, dim in enumerate(dims):
        b, e, s = d_begin[i], d_end[i], d_strides[i]
        if s == 0:
            raise SliceError(f"strides[{i}] must be non-zero")
        shrink = _bit(d_shrink, i)
        if dim is None:
            processing.append(1 if shrink else None)
            canon.append(None)
            continue
        if shrink and s <= 0:
            raise SliceError("only stride 1 allowed on non-range indexing.")
        lo, hi = (0, dim) if s > 0 else (-1, dim - 1)
        masked = (_bit(d_bm, i), _bit(d_em, i))

        def canonical(x, c, s=s, dim=dim, lo=lo, hi=hi, masked=masked):
            if masked[c]:
                return (lo, hi)[c] if s > 0 else (lo, hi)[(c + 1) & 1]
            x = dim + x if x < 0 else x
            return min(max(x, lo), hi)

        length = None
        if valid:
            if shrink:
                fwd = b + dim if b < 0 else b
                if fwd < 0 or fwd >= dim:
                    raise SliceError(f"slice index {b} of dimension {i} out of bounds.")
                b, e = fwd, fwd + 1
            else:
                b, e = canonical(b, 0), canonical(e, 1)
            length = e - b
        elif shrink:
            length = 1
        elif masked[0] and masked[1]:
            length = -dim if s < 0 else dim
        if length is None:
            size = None
        elif length == 0 or (length < 0) != (s < 0):
            size = 0
        else:
            size = -(-abs(length) // abs(s))
        processing.append(size)
        canon.append((b, e, s, shrink, size) if valid else None)
    final = []
    for g in gather:
        if g >= 0:
            final.append(processing[g])
        elif g == _NEW_AXIS:
            final.append(1)
    return final, canon


_MASK_NAMES = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
# The five mask attrs with their defaults, as StridedSlice, StridedSliceGrad and the
# slice assignments register them.
MASK_DEFAULTS = dict.fromkeys(_MASK_NAMES, 0)


def mask_attrs(begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0):
    """The five mask attrs of a strided-slice op, by name."""
    return dict(zip(_MASK_NAMES, (begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                                  shrink_axis_mask)))  # fmt: skip


def slice_masks(op_or_attrs):
    get = op_or_attrs._attr if hasattr(op_or_attrs, "_attr") else op_or_attrs.__getitem__
    return tuple(int(get(k)) for k in _MASK_NAMES)


def basic_index(canon) -> tuple:
    """NumPy basic indexing for `strided_slice_spec`'s per-dimension spec: the view it
    selects has the processing shape (no new axes; shrunk dimensions gone).  A trailing
    Ellipsis keeps a fully indexed element an array (a string tensor's element is
    otherwise a bare bytes object)."""
    index = []
    for b, e, s, shrink, size in canon:
        if shrink:
            index.append(b)
        elif size == 0:
            index.append(slice(0, 0))
        else:
            index.append(slice(b, e if e >= 0 else None, s))
    return (*index, Ellipsis)
