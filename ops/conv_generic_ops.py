"""TF's generic `Conv` op (`gen_nn_ops.conv`): an N-d convolution (1 to 3 spatial
dimensions, the filter's rank less two) with any number of leading batch dimensions
(`batch_dims`), channels last (`CHANNELS_LAST`) or first (`CHANNELS_FIRST`), SAME, VALID
or EXPLICIT padding, dilations and feature groups.

The kernel folds the batch dimensions into one and sums, per filter offset, the strided
input window times that offset's [in_depth, out_depth] filter slice, one matmul each.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.ops.conv_ops import compute_dtype
from asyncflow.registry import REQUIRED, TypeConstraint, register_op

__all__: list[str] = []

_TYPES = TypeConstraint(["float16", "bfloat16", "float32", "float64", "int32"])


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


class _Spec:
    """The op's attrs checked against the input and filter ranks (TF's shape function
    rules); values per spatial dimension, channels-last order."""

    def __init__(self, attrs, in_rank, filter_rank, error=ValueError):
        n = filter_rank - 2
        if not 1 <= n <= 3:
            raise error(f"filter must be of rank 3, 4 or 5, got {filter_rank}")
        self.n, self.batch_dims = n, int(attrs["batch_dims"])
        if self.batch_dims < 1:
            raise error(f"batch_dims must be at least 1, got {self.batch_dims}")
        if in_rank is not None and in_rank != n + 1 + self.batch_dims:
            raise error(
                f"Input tensor must be of rank {n + 1 + self.batch_dims} (filter rank "
                f"{filter_rank}, batch_dims {self.batch_dims}), got {in_rank}"
            )
        fmt = attrs["data_format"]
        if fmt not in ("CHANNELS_LAST", "CHANNELS_FIRST"):
            raise error(f"Invalid data format: {fmt}")
        self.first = fmt == "CHANNELS_FIRST"
        self.strides = self._per_dim(attrs["strides"], "strides", error)
        self.dilations = self._per_dim(attrs.get("dilations") or [1] * (n + 2), "dilations", error)
        self.padding = attrs["padding"]
        if self.padding not in ("SAME", "VALID", "EXPLICIT"):
            raise error(f"padding must be one of SAME, VALID, EXPLICIT, got {self.padding!r}")
        explicit = [int(v) for v in attrs.get("explicit_paddings") or []]
        if self.padding == "EXPLICIT":
            if len(explicit) != 2 * (n + 2):
                raise error(f"explicit_paddings must contain {2 * (n + 2)} values")
            pairs = [explicit[i : i + 2] for i in range(0, len(explicit), 2)]
            pairs = pairs[2:] if self.first else pairs[1:-1]
            if any(p < 0 for pair in pairs for p in pair):
                raise error("explicit_paddings must be non-negative")
            self.explicit = [tuple(p) for p in pairs]
        elif explicit:
            raise error("explicit_paddings should be empty unless padding is EXPLICIT")
        else:
            self.explicit = None
        self.groups = int(attrs.get("groups", 1))
        if self.groups < 1:
            raise error(f"groups must be positive, got {self.groups}")

    def _per_dim(self, vals, name, error):
        vals = [int(v) for v in vals]
        if len(vals) != self.n + 2:
            raise error(f"{name} must have {self.n + 2} elements, got {len(vals)}")
        outer = (vals[0], vals[1]) if self.first else (vals[0], vals[-1])
        if outer != (1, 1):
            raise error(f"{name} in the batch and depth dimensions must be 1")
        spatial = vals[2:] if self.first else vals[1:-1]
        if any(v < 1 for v in spatial):
            raise error(f"{name} must be positive, got {vals}")
        return spatial

    def out_and_pads(self, sizes, ksizes):
        """Output sizes and (before, after) paddings per spatial dimension (None: unknown)."""
        outs, pads = [], []
        for i, (size, k) in enumerate(zip(sizes, ksizes, strict=True)):
            s, d = self.strides[i], self.dilations[i]
            if size is None or k is None:
                outs.append(None)
                pads.append(None)
                continue
            span = (k - 1) * d + 1
            if self.padding == "VALID":
                lo = hi = 0
            elif self.padding == "EXPLICIT":
                lo, hi = self.explicit[i]
            else:
                out = -(-size // s)
                total = max((out - 1) * s + span - size, 0)
                lo, hi = total // 2, total - total // 2
            outs.append(max((size + lo + hi - span) // s + 1, 0))
            pads.append((lo, hi))
        return outs, pads


def _split(shape, spec: _Spec):
    """(batch dims, spatial sizes, channels) of an input shape list."""
    b = spec.batch_dims
    batch, rest = shape[:b], shape[b:]
    if spec.first:
        return batch, rest[1:], rest[0]
    return batch, rest[:-1], rest[-1]


def _conv_shape(op):
    in_shape, f_shape = op.inputs[0].shape, op.inputs[1].shape
    if f_shape.ndims is None:
        return [tensor_shape.unknown_shape()]
    attrs = {k: op._attr(k) for k in op.op_def.attrs}
    spec = _Spec(attrs, in_shape.ndims, f_shape.ndims)
    if in_shape.ndims is None:
        return [tensor_shape.unknown_shape(spec.n + 1 + spec.batch_dims)]
    fdims = f_shape.as_list()
    batch, sizes, c = _split(in_shape.as_list(), spec)
    if c is not None and fdims[-2] is not None and (fdims[-2] < 1 or c % fdims[-2]):
        raise ValueError(
            f"Depth of input ({c}) is not a multiple of input depth of filter ({fdims[-2]})"
        )
    outs, _ = spec.out_and_pads(sizes, fdims[:-2])
    oc = fdims[-1]
    dims = batch + ([oc] + outs if spec.first else outs + [oc])
    return [tensor_shape.TensorShape(dims)]


Conv = register_op(
    "Conv",
    inputs=["input: T", "filter: T"],
    outputs=["output: T"],
    attrs={
        "T": _TYPES,
        "strides": REQUIRED,
        "padding": REQUIRED,
        "explicit_paddings": [],
        "data_format": "CHANNELS_LAST",
        "dilations": [],
        "batch_dims": 1,
        "groups": 1,
    },
    shape_fn=_conv_shape,
)


def _conv_nd(x, w, spec: _Spec, outs, pads):
    """x [N, spatial..., C] (channels last) convolved with w [k..., C/groups, OC]."""
    n, groups = spec.n, spec.groups
    ct = compute_dtype(x.dtype)
    x, w = x.astype(ct, copy=False), w.astype(ct, copy=False)
    xpad = np.pad(x, [(0, 0), *pads, (0, 0)])
    cg, oc = w.shape[-2], w.shape[-1]
    ocg = oc // groups
    out = np.zeros((x.shape[0], *outs, oc), dtype=ct)
    if 0 in out.shape:
        return out
    for off in np.ndindex(*w.shape[:n]):
        window = tuple(
            slice(o * d, o * d + (m - 1) * s + 1, s)
            for o, d, m, s in zip(off, spec.dilations, outs, spec.strides, strict=True)
        )
        patch, wk = xpad[(slice(None), *window)], w[off]
        for g in range(groups):
            out[..., g * ocg : (g + 1) * ocg] += (
                patch[..., g * cg : (g + 1) * cg] @ wk[:, g * ocg : (g + 1) * ocg]
            )
    return out


def _run(x, w, attrs):
    spec = _Spec(attrs, x.ndim, w.ndim, error=_invalid)
    if 0 in w.shape:
        raise _invalid("filter must not have zero elements (i.e. all dimensions must be non-zero)")
    batch, sizes, c = _split(list(x.shape), spec)
    cg, oc = w.shape[-2], w.shape[-1]
    if c % cg:
        raise _invalid(f"input depth must be evenly divisible by filter depth: {c} vs {cg}")
    spec.groups = c // cg
    if oc % spec.groups:
        raise _invalid(f"output depth ({oc}) must be a multiple of the number of groups")
    outs, pads = spec.out_and_pads(sizes, list(w.shape[:-2]))
    nb = math.prod(batch)
    x = x.reshape(nb, *x.shape[spec.batch_dims :])
    if spec.first:
        x = np.moveaxis(x, 1, -1)
    y = _conv_nd(x, w, spec, outs, pads)
    if spec.first:
        y = np.moveaxis(y, -1, 1)
    return np.ascontiguousarray(y.reshape(*batch, *y.shape[1:])).astype(w.dtype, copy=False)


@Conv.kernel("CPU")
async def _conv(ctx, x, w):
    x, w = np.asarray(x), np.asarray(w)
    ctx.device.check_alloc(x.size * max(1, int(np.prod(w.shape[:-2]))), ctx.attrs["T"])
    dtype = x.dtype
    y = await ctx.compute(_run, x, w, ctx.attrs, cost=float(x.size * max(1, w.size)))
    return y.astype(dtype, copy=False)

