"""Gather and segment sums on a GPU as TF's GPU kernels do them: no host check.

On the CPU, TF's GatherV2 and UnsortedSegmentSum raise InvalidArgumentError for an
index out of range, and ours read the indices' bounds on the host to do so.  On a GPU
that read waits for the device to reach it, in the middle of every step, on the event
loop's thread.  TF's GPU kernels check nothing: Gather stores 0 for an index out of
range ("On GPU, if an out of bound index is found, a 0 is stored in the corresponding
output value", tf.gather), UnsortedSegmentSum drops the rows whose id is out of range
(negative ids are dropped everywhere).  These helpers do the same without a host read
and without boolean-mask indexing (whose result size CuPy reads back too): indices
clipped into range by one fused kernel, the bad positions masked by a `where`.
"""

from __future__ import annotations

__all__ = ["gather", "segment_sum"]

_FUSED: dict = {}  # xp -> the fused range check (CuPy caches its compiled code in it)


def _in_range(xp):
    """f(indices, limit) -> (indices with the bad ones 0, bad), one kernel."""
    fn = _FUSED.get(xp)
    if fn is None:

        def in_range(indices, limit):
            bad = xp.logical_or(xp.less(indices, 0), xp.greater_equal(indices, limit))
            return xp.multiply(indices, xp.logical_not(bad)), bad

        fuse = getattr(xp, "fuse", None)  # (an array module without one: plain ufuncs)
        fn = _FUSED[xp] = (
            in_range if fuse is None else fuse(kernel_name="asyncflow_in_range")(in_range)
        )
    return fn


def gather(xp, params, indices, axis: int, batch_dims: int, gather_value):
    """`gather_value(xp, params, indices, axis, batch_dims)` with 0 where an index is
    outside [0, params.shape[axis])."""
    if not indices.size:
        return gather_value(xp, params, indices, axis, batch_dims)
    safe, bad = _in_range(xp)(indices, indices.dtype.type(params.shape[axis]))
    out = gather_value(xp, params, safe, axis, batch_dims)
    shape = (
        indices.shape[:batch_dims]
        + (1,) * (axis - batch_dims)
        + indices.shape[batch_dims:]
        + (1,) * (params.ndim - axis - 1)
    )
    return xp.where(bad.reshape(shape), params.dtype.type(0), out)


def segment_sum(xp, data, ids, n: int, scatter_at):
    """The sum of `data`'s rows per id in [0, n); rows with other ids are dropped."""
    out = xp.zeros((n,) + data.shape[ids.ndim :], dtype=data.dtype)
    if not ids.size or not n:
        return out
    safe, bad = _in_range(xp)(ids, ids.dtype.type(n))
    rows = data.reshape((ids.size,) + data.shape[ids.ndim :])
    bad = bad.reshape((ids.size,) + (1,) * (rows.ndim - 1))
    scatter_at(xp, "add", out, safe.reshape(-1), xp.where(bad, data.dtype.type(0), rows))
    return out
