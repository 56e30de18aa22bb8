"""tf.signal's MDCT: `mdct`, `inverse_mdct` and `kaiser_bessel_derived_window`, built from
the ops TF builds them from (frame, a type-4 DCT, overlap_and_add; the KBD window from
a Kaiser window's cumulative sum), so they differentiate through those ops.

mdct frames the signal by frame_length with a step of frame_length / 2, windows each
frame, folds its four quarters (a, b, c, d) into (-c_r - d, a - b_r) and takes the
type-4 DCT of that; inverse_mdct unfolds the DCT-4 (scaled by 0.5 / N without norm),
windows and overlap-adds with a step of N.
"""

from __future__ import annotations

import numpy as np

from asyncflow import dtypes, signal
from asyncflow import graph as ops
from asyncflow.ops import cast_ops, gradient_ops, manip_ops, math_ops, slicing_ops

__all__ = ["inverse_mdct", "kaiser_bessel_derived_window", "mdct"]


def kaiser_bessel_derived_window(window_length, beta=12.0, dtype=dtypes.float32, name=None):
    """The Kaiser-Bessel-derived window: sqrt of the normalized cumulative sum of a
    Kaiser window of window_length // 2 + 1 points, mirrored.

    Raises:
      ValueError: a non-floating dtype, or a length not known at build time.
    """
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"dtype must be a floating point type. Found {dtype}")
    length = signal._static_int(window_length, "window_length")[0]
    with ops.name_scope(name, "kaiser_bessel_derived_window"):
        half = length // 2
        kaiser = signal.kaiser_window(half + 1, beta, dtype=dtype)
        csum = gradient_ops.cumsum(kaiser)
        halfw = math_ops.sqrt(csum[:-1] / csum[-1])
        return manip_ops.concat([halfw, slicing_ops.reverse(halfw, [0])], 0)


def mdct(signals, frame_length, window_fn=signal.vorbis_window, pad_end=False, norm=None,
         name=None):  # fmt: skip
    """The MDCT of each frame of `signals` ([..., samples] float32/float64):
    [..., frames, frame_length // 2].

    Raises:
      ValueError: a frame_length not a multiple of 4 (known at build time here).
    """
    with ops.name_scope(name, "mdct", [signals, frame_length]):
        signals = ops.convert_to_tensor(signals, name="signals")
        signals.shape.with_rank_at_least(1)
        length = signal._static_int(frame_length, "frame_length")[0]
        if length % 4 != 0:
            raise ValueError("The frame length must be a multiple of 4.")
        frames = signal.frame(signals, length, length // 2, pad_end=pad_end)
        if window_fn is not None:
            frames = frames * window_fn(length, dtype=frames.dtype)
        else:
            frames = frames * (1.0 / np.sqrt(2))
        a, b, c, d = slicing_ops.split(frames, 4, axis=-1)
        first = -slicing_ops.reverse(c, [-1]) - d
        second = a - slicing_ops.reverse(b, [-1])
        return signal.dct(manip_ops.concat([first, second], -1), type=4, norm=norm)


def inverse_mdct(mdcts, window_fn=signal.vorbis_window, norm=None, name=None):
    """Signals whose mdct (same window and norm) is `mdcts` ([..., frames, N]),
    [..., (frames + 1) * N] samples, by overlap-adding the windowed inverse frames.

    Raises:
      ValueError: mdcts of rank < 2 or of an unknown last dimension.
    """
    with ops.name_scope(name, "inverse_mdct", [mdcts]):
        mdcts = ops.convert_to_tensor(mdcts, name="mdcts")
        mdcts.shape.with_rank_at_least(2)
        half = mdcts.shape.as_list()[-1]
        if half is None:
            raise ValueError("inverse_mdct needs a known last dimension")
        if norm is None:
            scale = cast_ops.cast(0.5 / half, mdcts.dtype)
            idct4 = scale * signal.dct(mdcts, type=4)
        elif norm == "ortho":
            idct4 = signal.dct(mdcts, type=4, norm="ortho")
        else:
            raise ValueError(f"Unknown normalization. Expected None or 'ortho', got: {norm}")
        lo, hi = slicing_ops.split(idct4, 2, axis=-1)
        frames = manip_ops.concat(
            [
                hi,
                -slicing_ops.reverse(hi, [-1]),
                -slicing_ops.reverse(lo, [-1]),
                -lo,
            ],
            -1,
        )
        if window_fn is not None:
            frames = frames * window_fn(2 * half, dtype=mdcts.dtype)
        else:
            frames = frames * (1.0 / np.sqrt(2))
        return signal.overlap_and_add(frames, half)
