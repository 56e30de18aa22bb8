"""`af.signal`: TF1's tf.signal built from the FFT ops and array ops, as TF builds it
(so everything differentiates through those ops): windows, frame / overlap_and_add,
rfft / irfft (1-3 D), stft / inverse_stft, dct / idct (types 1-4), mel weights,
MFCCs, fftshift.

rfft is the complex FFT of the (cropped or zero-padded) real signal, keeping the first
fft_length // 2 + 1 bins; irfft rebuilds the Hermitian spectrum and keeps the real
part, which, as in TF, ignores the imaginary parts of the DC and Nyquist bins.
"""

from __future__ import annotations

import math

import numpy as np

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops import (
    array_ops,
    cast_ops,
    fft_ops,
    fft_real_ops,
    manip_ops,
    math_ops,
    math_special_ops,
    reduction_ops,
    slicing_ops,
)
from asyncflow.ops.fft_ops import fft, fft2d, fft3d, ifft, ifft2d, ifft3d
from asyncflow.ops.gradient_ops import unsorted_segment_sum
from asyncflow.signal_fftnd import fftnd, ifftnd, irfftnd, rfftnd

__all__ = [
    "fft", "ifft", "fft2d", "ifft2d", "fft3d", "ifft3d", "fftnd", "ifftnd", "rfftnd",
    "irfftnd", "rfft", "irfft", "rfft2d", "irfft2d", "rfft3d", "irfft3d", "fftshift",
    "ifftshift", "hann_window", "hamming_window", "vorbis_window", "kaiser_window",
    "frame", "overlap_and_add", "stft", "inverse_stft", "inverse_stft_window_fn", "dct",
    "idct", "linear_to_mel_weight_matrix", "mfccs_from_log_mel_spectrograms",
]  # fmt: skip
del fft_ops


def _t(x, name="x", dtype=None):
    return ops.convert_to_tensor(x, name=name, dtype=dtype)


def _static_int(v, what):
    value = ops.constant_value(v) if isinstance(v, ops.Tensor) else v
    if value is None:
        raise ValueError(f"{what} must be known at graph-build time in asyncflow")
    return [int(x) for x in np.reshape(value, -1)]


# -- real FFTs -------------------------------------------------------------------------------


def _pad_to(x, lengths):
    """x zero-padded in its last len(lengths) dims up to `lengths` (TF's kernels crop
    a longer input themselves; those dims must be known at build time here)."""
    rank = len(lengths)
    if x.shape.ndims is None:
        raise ValueError("the real FFTs need an input of known rank")
    inner = x.shape.as_list()[-rank:]
    if any(d is None for d in inner):
        raise ValueError("the real FFTs need the transformed sizes known at build time")
    if all(d >= n for d, n in zip(inner, lengths)):
        return x
    lead = x.shape.ndims - rank
    return manip_ops.pad(x, [[0, 0]] * lead + [[0, max(n - d, 0)] for d, n in zip(inner, lengths)])


def _rfft_n(rank, op_type, name_default):
    def rfft_fn(input_tensor, fft_length=None, name=None):
        with ops.name_scope(name, name_default, [input_tensor]) as scope:
            x = _t(input_tensor, "input_tensor")
            if x.dtype not in (dtypes.float32, dtypes.float64):
                raise ValueError(f"RFFT requires tf.float32 or tf.float64 inputs, got: {x}")
            if fft_length is None:
                lengths = x.shape.as_list()[-rank:]
                if any(d is None for d in lengths):
                    raise ValueError("fft_length is needed when the inner sizes are unknown")
            else:
                lengths = _static_int(fft_length, "fft_length")
            x = _pad_to(x, lengths)
            lengths_t = _t(np.asarray(lengths, np.int32), "fft_length", dtypes.int32)
            return fft_real_ops.real_fft(op_type, x, lengths_t, name=scope)

    rfft_fn.__doc__ = (
        f"The {rank}-D DFT of a real signal over its inner dims, padded or cropped to "
        f"fft_length, keeping the fft_length[-1] // 2 + 1 non-negative frequencies (op "
        f"{op_type})."
    )
    return rfft_fn


def _irfft_n(rank, op_type, name_default):
    def irfft_fn(input_tensor, fft_length=None, name=None):
        with ops.name_scope(name, name_default, [input_tensor]) as scope:
            y = _t(input_tensor, "input_tensor")
            inner = y.shape.as_list()[-rank:]
            if fft_length is None:
                if any(d is None for d in inner):
                    raise ValueError("fft_length is needed when the inner sizes are unknown")
                lengths = inner[:-1] + [2 * (inner[-1] - 1)]
            else:
                lengths = _static_int(fft_length, "fft_length")
            y = _pad_to(y, lengths[:-1] + [lengths[-1] // 2 + 1])
            lengths_t = _t(np.asarray(lengths, np.int32), "fft_length", dtypes.int32)
            return fft_real_ops.real_fft(op_type, y, lengths_t, name=scope)

    irfft_fn.__doc__ = (
        f"The real inverse of rfft{'' if rank == 1 else f'{rank}d'}: a real signal of "
        f"fft_length[-1] samples (default 2 * (inner - 1)) from its half spectrum (op "
        f"{op_type})."
    )
    return irfft_fn


rfft = _rfft_n(1, "RFFT", "rfft")
rfft2d = _rfft_n(2, "RFFT2D", "rfft2d")
rfft3d = _rfft_n(3, "RFFT3D", "rfft3d")
irfft = _irfft_n(1, "IRFFT", "irfft")
irfft2d = _irfft_n(2, "IRFFT2D", "irfft2d")
irfft3d = _irfft_n(3, "IRFFT3D", "irfft3d")
for _n in ("rfft", "rfft2d", "rfft3d", "irfft", "irfft2d", "irfft3d"):
    globals()[_n].__name__ = globals()[_n].__qualname__ = _n


def _shift(x, axes, sign, name, default):
    with ops.name_scope(name, default, [x]):
        x = _t(x)
        if axes is None:
            axes = list(range(x.shape.ndims))
        elif isinstance(axes, int):
            axes = [axes]
        shape = array_ops.shape(x)
        shifts = [sign * math_ops.floordiv(shape[a], 2) if sign > 0 else
                  -math_ops.floordiv(shape[a], 2) for a in axes]  # fmt: skip
        return math_special_ops.roll(x, array_ops.stack(shifts), list(axes))


def fftshift(x, axes=None, name=None):
    """x rolled by size // 2 along `axes` (all when None): zero frequency to the middle."""
    return _shift(x, axes, 1, name, "fftshift")


def ifftshift(x, axes=None, name=None):
    """The inverse of fftshift (rolls by -(size // 2))."""
    return _shift(x, axes, -1, name, "ifftshift")


# -- windows ---------------------------------------------------------------------------------


def _raised_cosine(window_length, periodic, dtype, a, b, name, default):
    with ops.name_scope(name, default, [window_length]):
        dtype = dtypes.as_dtype(dtype)
        if not dtype.is_floating:
            raise ValueError(f"dtype must be a floating point type. Found {dtype}")
        n = _t(window_length, "window_length", dtypes.int32)
        n.shape.with_rank(0)
        periodic_i = cast_ops.cast(_t(periodic, "periodic", dtypes.bool), dtypes.int32)
        even = 1 - math_ops.floormod(n, 2)
        denom = cast_ops.cast(n + periodic_i * even - 1, dtype)
        count = cast_ops.cast(reduction_ops.range(n), dtype)
        window = a - b * math_ops.cos(2.0 * math.pi * count / denom)
        return slicing_ops.where(math_ops.equal(n, 1), array_ops.ones([1], dtype) +
                                 array_ops.zeros_like(window), window)  # fmt: skip


def hann_window(window_length, periodic=True, dtype=dtypes.float32, name=None):
    """0.5 - 0.5 cos(2 pi n / N) (N = window_length for periodic, else length - 1).

    Raises:
      ValueError: a non-floating dtype or a non-scalar length.
    """
    return _raised_cosine(window_length, periodic, dtype, 0.5, 0.5, name, "hann_window")


def hamming_window(window_length, periodic=True, dtype=dtypes.float32, name=None):
    """0.54 - 0.46 cos(2 pi n / N), N as in hann_window.

    Raises:
      ValueError: a non-floating dtype or a non-scalar length.
    """
    return _raised_cosine(window_length, periodic, dtype, 0.54, 0.46, name, "hamming_window")


def vorbis_window(window_length, dtype=dtypes.float32, name=None):
    """sin(pi / 2 * sin^2(pi (n + 0.5) / window_length))."""
    with ops.name_scope(name, "vorbis_window", [window_length]):
        n = _t(window_length, "window_length", dtypes.int32)
        count = cast_ops.cast(reduction_ops.range(n), dtype) + 0.5
        s = math_ops.sin(math.pi * count / cast_ops.cast(n, dtype))
        return math_ops.sin(math.pi / 2.0 * s * s)


def kaiser_window(window_length, beta=12.0, dtype=dtypes.float32, name=None):
    """The Kaiser window I0(beta sqrt(1 - (2n / (N - 1) - 1)^2)) / I0(beta); the length
    must be known at build time here.

    Raises:
      ValueError: a window_length not known at build time.
    """
    length = _static_int(window_length, "window_length")[0]
    with ops.name_scope(name, "kaiser_window"):
        values = np.kaiser(length, float(beta)) if length > 1 else np.ones(length)
        return array_ops.constant(values.astype(dtypes.as_dtype(dtype).as_numpy_dtype))


# -- framing ---------------------------------------------------------------------------------


def frame(signal, frame_length, frame_step, pad_end=False, pad_value=0, axis=-1, name=None):
    """Frames of frame_length samples every frame_step along `axis` (a new axis after
    it); with pad_end the signal is padded with pad_value so every sample is framed.

    Raises:
      ValueError: frame_length or frame_step not scalars, or a signal of unknown rank.
    """
    with ops.name_scope(name, "frame", [signal, frame_length, frame_step, pad_value]):
        x = _t(signal, "signal")
        rank = x.shape.ndims
        if rank is None:
            raise ValueError("frame needs a signal of known rank")
        axis = int(axis) % rank
        flen = _t(frame_length, "frame_length", dtypes.int32)
        fstep = _t(frame_step, "frame_step", dtypes.int32)
        flen.shape.with_rank(0)
        fstep.shape.with_rank(0)
        length = array_ops.shape(x)[axis]
        static_n = x.shape[axis].value
        if pad_end:
            frames = -math_ops.floordiv(-length, fstep)  # ceil
            need = math_ops.maximum((frames - 1) * fstep + flen - length, 0)
            pads = [[0, 0]] * rank
            pads = array_ops.stack([array_ops.stack([0, need]) if i == axis else
                                    array_ops.constant([0, 0]) for i in range(rank)])  # fmt: skip
            padded = manip_ops.pad(x, pads)
            if not (isinstance(pad_value, int | float) and pad_value == 0):  # (PadV2: host value)
                filler = 1 - manip_ops.pad(array_ops.ones_like(x), pads)
                padded = padded + math_ops.cast(pad_value, x.dtype) * filler
            x = padded
        else:
            frames = math_ops.maximum(1 + math_ops.floordiv(length - flen, fstep), 0)
        starts = reduction_ops.range(frames) * fstep
        index = array_ops.expand_dims(starts, 1) + array_ops.expand_dims(
            reduction_ops.range(flen), 0
        )
        # (Through a Reshape, as TF's frame slices and reshapes: the signal's gradient
        # is a dense tensor, not Gather's IndexedSlices.)
        out = array_ops.gather(array_ops.reshape(x, array_ops.shape(x)), index, axis=axis)
        static_len = ops.constant_value(flen)
        if (
            static_n is not None
            and ops.constant_value(fstep) is not None
            and int(ops.constant_value(fstep)) > 0  # (0: FloorDiv fails when run, as TF)
            and (static_len is not None)
        ):
            n = static_n
            step, fl = int(ops.constant_value(fstep)), int(static_len)
            count = -(-n // step) if pad_end else max(1 + (n - fl) // step, 0)
            dims = x.shape.as_list()
            out.set_shape(dims[:axis] + [count, fl] + dims[axis + 1 :])
        return out


def overlap_and_add(signal, frame_step, name=None):
    """Frames [..., frames, frame_length] added back into one signal, frame i starting
    at i * frame_step.

    Raises:
      ValueError: a signal of rank below 2, or frame_step not a scalar.
    """
    with ops.name_scope(name, "overlap_and_add", [signal, frame_step]):
        x = _t(signal, "signal")
        rank = x.shape.ndims
        if rank is None or rank < 2:
            raise ValueError("input must have rank at least 2")
        step = _t(frame_step, "frame_step", dtypes.int32)
        step.shape.with_rank(0)
        shape = array_ops.shape(x)
        frames, flen = shape[-2], shape[-1]
        out_len = (frames - 1) * step + flen
        pos = array_ops.expand_dims(reduction_ops.range(frames) * step, 1) + \
            array_ops.expand_dims(reduction_ops.range(flen), 0)  # fmt: skip
        perm = [rank - 2, rank - 1] + list(range(rank - 2))
        moved = array_ops.transpose(x, perm)
        summed = unsorted_segment_sum(moved, pos, out_len)  # [out_len, ...]
        back = list(range(1, rank - 1)) + [0]
        return array_ops.transpose(summed, back)


# -- STFT ------------------------------------------------------------------------------------


def _default_fft_length(frame_length):
    n = _static_int(frame_length, "frame_length")[0]
    return 1 << max(int(math.ceil(math.log2(n))), 0) if n > 0 else 1


def stft(signals, frame_length, frame_step, fft_length=None, window_fn=hann_window,
         pad_end=False, name=None):  # fmt: skip
    """rfft of windowed frames: [..., frames, fft_length // 2 + 1] (fft_length defaults to
    the smallest power of 2 holding a frame).

    Raises:
      ValueError: frame_length not known at build time, or a signal of unknown rank.
    """
    with ops.name_scope(name, "stft", [signals, frame_length, frame_step]):
        x = _t(signals, "signals")
        if fft_length is None:
            fft_length = _default_fft_length(frame_length)
        framed = frame(x, frame_length, frame_step, pad_end=pad_end)
        if window_fn is not None:
            framed = framed * window_fn(frame_length, dtype=framed.dtype)
        return rfft(framed, [int(_static_int(fft_length, "fft_length")[0])])


def inverse_stft_window_fn(frame_step, forward_window_fn=hann_window, name=None):
    """A window function that makes inverse_stft invert stft with `forward_window_fn`."""

    def inverse_window(frame_length, dtype):
        with ops.name_scope(name, "inverse_stft_window_fn", [forward_window_fn]):
            step = _static_int(frame_step, "frame_step")[0]
            length = _static_int(frame_length, "frame_length")[0]
            forward = forward_window_fn(length, dtype=dtype)
            denom = math_ops.square(forward)
            overlaps = -(-length // step)
            denom = manip_ops.pad(denom, [[0, overlaps * step - length]])
            denom = reduction_ops.reduce_sum(array_ops.reshape(denom, [overlaps, step]), 0,
                                             keepdims=True)  # fmt: skip
            denom = array_ops.reshape(manip_ops.tile(denom, [overlaps, 1]), [overlaps * step])
            return forward / denom[:length]

    return inverse_window


def inverse_stft(stfts, frame_length, frame_step, fft_length=None, window_fn=hann_window,
                 name=None):  # fmt: skip
    """The signal whose stft is `stfts` (with window_fn = inverse_stft_window_fn of the
    forward window, the exact inverse).

    Raises:
      ValueError: frame_length not known at build time.
    """
    with ops.name_scope(name, "inverse_stft", [stfts]):
        s = _t(stfts, "stfts")
        length = _static_int(frame_length, "frame_length")[0]
        if fft_length is None:
            fft_length = _default_fft_length(length)
        n = int(_static_int(fft_length, "fft_length")[0])
        frames = irfft(s, [n])
        frames = frames[..., :length]
        if length > n:
            rank = frames.shape.ndims
            frames = manip_ops.pad(frames, [[0, 0]] * (rank - 1) + [[0, length - n]])
        if window_fn is not None:
            frames = frames * window_fn(length, dtype=frames.dtype)
        return overlap_and_add(frames, frame_step)


# -- DCT, mel, MFCC --------------------------------------------------------------------------


def _validate_dct(x, type, n, axis, norm):  # noqa: A002 - TF's names
    if axis != -1:
        raise NotImplementedError(f"axis must be -1. Got: {axis}")
    if n is not None and n < 1:
        raise ValueError("n should be a positive integer or None")
    if type not in (1, 2, 3, 4):
        raise ValueError("Types I, II, III and IV (I)DCT are supported.")
    if type == 1:
        if norm == "ortho":
            raise ValueError("Normalization is not supported for the Type-I DCT.")
        size = x.shape.as_list()[-1] if x.shape.ndims else None
        if size is not None and size < 2:
            raise ValueError("Type-I DCT requires the dimension to be greater than one.")
    if norm not in (None, "ortho"):
        raise ValueError(f"Unknown normalization. Expected None or 'ortho', got: {norm}")


def dct(input, type=2, n=None, axis=-1, norm=None, name=None):  # noqa: A002 - TF's names
    """The DCT (types 1-4) of the innermost dimension, first cut or zero-padded to `n`
    when given; norm None or "ortho" (not for type 1), computed through rfft as TF does.

    Raises:
      ValueError: a bad type, n or norm, or an unknown inner dimension.
      NotImplementedError: axis other than -1 (as TF).
    """
    with ops.name_scope(name, "dct", [input]):
        x = _t(input, "input")
        _validate_dct(x, type, n, axis, norm)
        return _dct(x, type, n, norm)


def _dct(x, type, n, norm):  # noqa: A002
    size = x.shape.as_list()[-1] if x.shape.ndims else None
    if size is None:
        raise ValueError("dct needs a known inner dimension")
    if n is not None and n != size:
        if n < size:
            x = x[..., :n]
        else:
            pads = [[0, 0]] * (x.shape.ndims - 1) + [[0, n - size]]
            x = array_ops.pad(x, pads)
        size = n
    real = x.dtype.base_dtype
    k = np.arange(size)
    if type == 1:
        if size < 2:
            raise ValueError("Type-I DCT requires the dimension to be greater than one.")
        mirrored = array_ops.concat([x, array_ops.reverse(x[..., 1 : size - 1], [-1])], -1)
        return math_special_ops.real(rfft(mirrored))
    if type == 2:
        scale = (2.0 * np.exp(-1j * k * np.pi * 0.5 / size)).astype(_ctype(real))
        out = math_special_ops.real(rfft(x, [2 * size])[..., :size] * scale)
        if norm == "ortho":
            w = np.full(size, math.sqrt(2.0) * 0.5 / math.sqrt(size))
            w[0] = 0.5 / math.sqrt(size)
            out = out * w.astype(real.as_numpy_dtype)
        return out
    if type == 4:
        # The odd terms of the type-2 DCT of the signal zero-padded to 2N (as TF).
        out = _dct(x, 2, 2 * size, None)[..., 1::2]
        if norm == "ortho":
            out = out * float(math.sqrt(0.5) / math.sqrt(size))
        return out
    if norm == "ortho":
        w = np.full(size, math.sqrt(size) * math.sqrt(0.5))
        w[0] = math.sqrt(size)
        x = x * w.astype(real.as_numpy_dtype)
    else:
        x = x * float(size)
    scale = (2.0 * np.exp(1j * k * np.pi * 0.5 / size)).astype(_ctype(real))
    spec = scale * math_special_ops.complex(x, array_ops.zeros_like(x))
    return irfft(spec, [2 * size])[..., :size]


def _ctype(real):
    return np.complex128 if real == dtypes.float64 else np.complex64


def idct(input, type=2, n=None, axis=-1, norm=None, name=None):  # noqa: A002
    """The inverse of dct of `type`: a DCT of the inverse type (1, 3, 2, 4), exact with
    "ortho"; unnormalised, it scales by 2N (type 1: 2(N-1)), as TF's.

    Raises:
      ValueError: as dct.
    """
    with ops.name_scope(name, "idct", [input]):
        x = _t(input, "input")
        _validate_dct(x, type, n, axis, norm)
        return _dct(x, {1: 1, 2: 3, 3: 2, 4: 4}[type], n, norm)


def linear_to_mel_weight_matrix(num_mel_bins=20, num_spectrogram_bins=129, sample_rate=8000,
                                lower_edge_hertz=125.0, upper_edge_hertz=3800.0,
                                dtype=dtypes.float32, name=None):  # fmt: skip
    """[num_spectrogram_bins, num_mel_bins] triangular mel filters (HTK mel scale) over
    the linear bins of an rfft spectrum; the DC bin gets no weight.

    Raises:
      ValueError: a non-positive num_mel_bins or sample_rate, or edges out of order.
    """
    # TF's checks and words (num_spectrogram_bins is not checked: 0 gives one zero row).
    if num_mel_bins <= 0:
        raise ValueError(f"num_mel_bins must be positive. Got: {num_mel_bins}")
    if lower_edge_hertz < 0.0:
        raise ValueError(f"lower_edge_hertz must be non-negative. Got: {lower_edge_hertz}")
    if lower_edge_hertz >= upper_edge_hertz:
        raise ValueError(
            f"lower_edge_hertz {lower_edge_hertz:.1f} >= upper_edge_hertz {upper_edge_hertz:.1f}"
        )
    if sample_rate <= 0.0:
        raise ValueError(f"sample_rate must be positive. Got: {sample_rate}")
    if upper_edge_hertz > sample_rate / 2:
        raise ValueError(
            "upper_edge_hertz must not be larger than the Nyquist frequency (sample_rate / 2). "
            f"Got {upper_edge_hertz} for sample_rate: {sample_rate}"
        )
    dt = dtypes.as_dtype(dtype).as_numpy_dtype

    def to_mel(f):
        return 1127.0 * np.log1p(np.asarray(f, dt) / dt(700.0))

    with ops.name_scope(name, "linear_to_mel_weight_matrix") as scope:
        freqs = np.linspace(0.0, sample_rate / 2.0, num_spectrogram_bins).astype(dt)[1:]
        bins_mel = to_mel(freqs)[:, None]
        edges = np.linspace(to_mel(lower_edge_hertz), to_mel(upper_edge_hertz),
                            num_mel_bins + 2).astype(dt)  # fmt: skip
        lower, center, upper = edges[:-2][None], edges[1:-1][None], edges[2:][None]
        lo = (bins_mel - lower) / (center - lower)
        hi = (upper - bins_mel) / (upper - center)
        weights = np.maximum(dt(0), np.minimum(lo, hi)).astype(dt)
        weights = np.pad(weights, [[1, 0], [0, 0]])
        return array_ops.constant(weights, name=scope)  # TF's result takes the scope's name


def mfccs_from_log_mel_spectrograms(log_mel_spectrograms, name=None):
    """MFCCs: the orthonormal-scaled DCT-II of log-mel spectrograms.

    Raises:
      ValueError: an inner dimension unknown at build time.
    """
    with ops.name_scope(name, "mfccs_from_log_mel_spectrograms", [log_mel_spectrograms]):
        x = _t(log_mel_spectrograms, "log_mel_spectrograms")
        bins = x.shape.as_list()[-1] if x.shape.ndims else None
        if bins is None:
            raise ValueError("mfccs need a known number of mel bins")
        return dct(x, type=2) * float(1.0 / math.sqrt(bins * 2.0))


del tensor_shape
