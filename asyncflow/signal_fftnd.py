"""`tf.signal.fftnd / ifftnd / rfftnd / irfftnd`: TF 2.21's N-d FFT wrappers over the
FFTND family of raw ops (the raw builders stay `tf.fftnd` etc., as in TF).

What the wrappers add to the raw ops, as TF 2.21 builds them in a graph:
- `axes` defaults to the last len(fft_length) dimensions, or to every dimension when
  fft_length is also None; negative axes count from the end.
- `fft_length` defaults to the input's sizes on `axes` (for irfftnd the last one is
  2 * (n - 1), the even signal a half spectrum came from).
- a transformed dimension shorter than its length is zero-padded (a Pad op) before the
  raw op; a longer one is cropped by the op itself.
- `norm`: "backward" (None) leaves the forward transform unscaled and divides the
  inverse by the product of the lengths, as the raw ops do; "forward" swaps the two;
  "ortho" scales both by 1/sqrt(product).
- rfftnd's result is complex64 and irfftnd's float32 whatever the input's precision,
  as TF's wrappers leave the raw op's default Tcomplex / Treal.

TF 2.21 itself only has GPU kernels for these ops and fails to build "forward" /
"ortho" in a graph (it iterates over a symbolic shape); asyncflow computes them on every
device with the scaling TF documents (NumPy's `norm` convention).
"""

from __future__ import annotations

import math

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.ops import array_ops, cast_ops, fft_ops, manip_ops, math_ops

__all__ = ["fftnd", "ifftnd", "rfftnd", "irfftnd"]

_NORMS = (None, "backward", "forward", "ortho")


def _static_sizes(x, axes, what):
    if x.shape.ndims is None:
        raise ValueError(f"{what}: the input's rank must be known at graph-build time")
    dims = x.shape.as_list()
    sizes = [dims[a] for a in axes]
    if any(d is None for d in sizes):
        raise ValueError(f"{what}: the transformed dimensions must be known at build time")
    return sizes


def _resolve_axes(x, fft_length, axes, what):
    if axes is not None:
        return [int(a) for a in axes]
    if fft_length is not None:  # the innermost len(fft_length) dimensions
        return list(range(-len(fft_length), 0))
    rank = x.shape.ndims
    if rank is None:
        raise ValueError(f"{what}: the input's rank must be known at graph-build time")
    return list(range(rank))


def _pad_up(x, axes, lengths):
    """x zero-padded on `axes` up to `lengths` where it is shorter (never cropped)."""
    dims = x.shape.as_list()
    pads = [[0, 0] for _ in dims]
    for a, n in zip(axes, lengths):
        d = dims[a]
        if d is not None and n > d:
            pads[a][1] = n - d
    if not any(p[1] for p in pads):
        return x
    return manip_ops.pad(x, pads)


def _out_shape(x, axes, lengths, op_type):
    if x.shape.ndims is None or len(axes) != len(lengths):
        return None
    dims = x.shape.as_list()
    for a, n in zip(axes, lengths):
        if not -len(dims) <= a < len(dims):
            return None
        dims[a] = n
    if op_type == "RFFTND" and axes:
        dims[axes[-1]] = lengths[-1] // 2 + 1
    return dims


def _scale(y, factor):
    return math_ops.multiply(y, cast_ops.cast(factor, y.dtype))


def _wrapper(op_type: str, inverse: bool, real_in: bool, real_out: bool, doc: str):
    op_name = op_type.lower()

    def transform(input_tensor, fft_length=None, axes=None, norm=None, name=None):
        if norm not in _NORMS:
            raise ValueError(
                f"{op_name}: norm must be one of 'backward', 'forward', 'ortho' (or None), "
                f"got {norm!r}"
            )
        with ops.name_scope(name, op_name, [input_tensor]) as scope:
            x = ops.convert_to_tensor(input_tensor, name="input_tensor")
            if not real_in and not x.dtype.is_complex:
                x = cast_ops.cast(x, dtypes.complex64)
            ax = _resolve_axes(x, fft_length, axes, op_name)
            if fft_length is None:
                lengths = _static_sizes(x, ax, op_name)
                if real_out:
                    lengths[-1] = 2 * (lengths[-1] - 1)
            else:
                lengths = [int(n) for n in fft_length]
            # irfftnd's input holds only n // 2 + 1 bins on the last axis.
            pad_to = list(lengths)
            if real_out and pad_to:
                pad_to[-1] = pad_to[-1] // 2 + 1
            x = _pad_up(x, ax, pad_to)
            raw = getattr(fft_ops, op_name)
            scaled = norm in ("forward", "ortho")
            kinds = {"Tcomplex": dtypes.complex64} if op_type == "RFFTND" else {}
            if op_type == "IRFFTND":
                kinds = {"Treal": dtypes.float32}
            y = raw(x, lengths, ax, name=None if scaled else scope, **kinds)
            y.set_shape(_out_shape(x, ax, lengths, op_type))
            if not scaled:
                return y
            total = float(math.prod(lengths))
            if norm == "ortho":
                factor = math.sqrt(total) if inverse else 1.0 / math.sqrt(total)
            else:
                factor = total if inverse else 1.0 / total
            return array_ops.identity(_scale(y, factor), name=scope)

    transform.__name__ = transform.__qualname__ = op_name
    transform.__doc__ = doc
    return transform


fftnd = _wrapper(
    "FFTND",
    False,
    False,
    False,
    """`tf.signal.fftnd(input_tensor, fft_length=None, axes=None, norm=None, name=None)`:
    the complex DFT over `axes` (see the module note for the defaults).

    Raises:
      ValueError: `norm` is not one of None, "backward", "forward", "ortho", or a default
        needs a dimension unknown at build time.
    """,
)
ifftnd = _wrapper(
    "IFFTND",
    True,
    False,
    False,
    """`tf.signal.ifftnd(...)`: the inverse complex DFT over `axes`.

    Raises:
      ValueError: as fftnd.
    """,
)
rfftnd = _wrapper(
    "RFFTND",
    False,
    True,
    False,
    """`tf.signal.rfftnd(...)`: the DFT of a real tensor over `axes`, keeping
    fft_length[-1] // 2 + 1 bins on the last one (complex64, as TF).

    Raises:
      ValueError: as fftnd.
    """,
)
irfftnd = _wrapper(
    "IRFFTND",
    True,
    False,
    True,
    """`tf.signal.irfftnd(...)`: the real signal whose half spectrum is the input, over
    `axes` (float32, as TF).

    Raises:
      ValueError: as fftnd.
    """,
)
