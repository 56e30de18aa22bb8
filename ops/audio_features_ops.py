"""TF's speech-feature ops: AudioSpectrogram and Mfcc (tf.raw_ops, TF1's
tf.contrib.framework.python.ops.audio_ops; the speech_commands models' graphs hold
them), and the v1 AudioSummary with its sample rate as an attr.

AudioSpectrogram: for each channel of `input` [samples, channels], frames of
`window_size` samples every `stride`, each times a periodic Hann window
(0.5 - 0.5 cos(2 pi n / window_size)), zero-padded to the next power of two and
Fourier-transformed in double precision; the magnitudes (or their squares) of bins 0 to
fft_length / 2 make output [channels, frames, fft_length / 2 + 1] float32.

Mfcc, per spectrogram frame (squared magnitudes), all in double as TF's mfcc.cc:
triangular mel filters (mel = 1127 ln(1 + f / 700)) with `filterbank_channel_count`
centres evenly spaced in mel between the frequency limits, weighting each bin's
magnitude (the square root of its value) into its two neighbouring channels; the log of
each channel (floored at 1e-12); then the first `dct_coefficient_count` terms of an
orthonormal-scaled DCT-II (sqrt(2 / n) cos(pi i (j + 0.5) / n)).  An upper limit above
the spectrogram's top frequency gives zeros, as TF's kernel.

TF 2.21 registers no gradient for either (LookupError), nor here; AudioSummary is not
differentiable, as there.
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.ops import legacy_ops, summary_ops
from asyncflow.registry import REQUIRED, NotDifferentiable, register_op

__all__: list[str] = []


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# -- AudioSpectrogram ----------------------------------------------------------------------------


def _fft_length(window_size: int) -> int:
    return 1 << max(int(window_size) - 1, 0).bit_length()


def _spectrogram_shape(op):
    x = op.inputs[0].shape.with_rank(2)
    window, stride = op._attr("window_size"), op._attr("stride")
    samples = x[0].value
    frames = None
    if samples is not None:
        frames = 0 if samples < window else 1 + (samples - window) // stride
    bins = _fft_length(window) // 2 + 1
    return [tensor_shape.TensorShape([x[1], frames, bins])]


AudioSpectrogram = register_op(
    "AudioSpectrogram",
    inputs=["input: float"],
    outputs=["spectrogram: float"],
    attrs={"window_size": REQUIRED, "stride": REQUIRED, "magnitude_squared": False},
    shape_fn=_spectrogram_shape,
)


def _spectrogram(x, window: int, stride: int, squared: bool):
    samples, channels = x.shape
    n_fft = _fft_length(window)
    frames = 0 if samples < window else 1 + (samples - window) // stride
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(window) / window)
    out = np.zeros((channels, frames, n_fft // 2 + 1), np.float32)
    if frames == 0:
        return out
    starts = np.arange(frames) * stride
    for c in range(channels):
        chunk = x[starts[:, None] + np.arange(window), c].astype(np.float64) * hann
        spec = np.fft.rfft(chunk, n=n_fft, axis=1)
        power = spec.real**2 + spec.imag**2
        out[c] = power if squared else np.sqrt(power)
    return out


@AudioSpectrogram.kernel("CPU")
async def _audio_spectrogram(ctx, x):
    x = np.asarray(x)
    if x.ndim != 2:
        raise _invalid(f"input must be 2-dimensional{list(x.shape)}")
    attrs = ctx.attrs
    window, stride = int(attrs["window_size"]), int(attrs["stride"])
    if window < 2:
        raise _invalid(f"window_size must be greater than 1, got {window}")
    if stride < 1:
        raise _invalid(f"stride must be strictly positive, got {stride}")
    return await ctx.device.compute(_spectrogram, x, window, stride, attrs["magnitude_squared"])


# -- Mfcc ----------------------------------------------------------------------------------------


def _mel(freq):
    return 1127.0 * np.log1p(np.asarray(freq, np.float64) / 700.0)


def _filterbank(n_bins: int, rate: float, channels: int, lo: float, hi: float):
    """(band, weight, start, end): bin i goes weight w into channel band[i] and 1 - w
    into band[i] + 1 (TF's MfccMelFilterbank)."""
    mel_lo, mel_hi = _mel(lo), _mel(hi)
    spacing = (mel_hi - mel_lo) / (channels + 1)
    centres = mel_lo + spacing * np.arange(1, channels + 2)
    hz_per_bin = 0.5 * rate / (n_bins - 1)
    start = int(1.5 + lo / hz_per_bin)
    end = int(hi / hz_per_bin)
    band = np.full(n_bins, -2, np.int64)
    weight = np.zeros(n_bins)
    channel = 0
    for i in range(n_bins):
        if i < start or i > end:
            continue
        melf = _mel(i * hz_per_bin)
        while channel < channels and centres[channel] < melf:
            channel += 1
        band[i] = channel - 1
        if band[i] >= 0:
            c = band[i]
            weight[i] = (centres[c + 1] - melf) / (centres[c + 1] - centres[c])
        else:
            weight[i] = (centres[0] - melf) / (centres[0] - mel_lo)
    return band, weight, start, end


def _mfcc(spec, rate: float, attrs):
    channels = int(attrs["filterbank_channel_count"])
    n_coef = int(attrs["dct_coefficient_count"])
    n_bins = spec.shape[2]
    band, weight, start, end = _filterbank(
        n_bins, rate, channels, attrs["lower_frequency_limit"], attrs["upper_frequency_limit"]
    )
    if end >= n_bins:
        # TF's filterbank refuses a spectrogram too short for the upper limit ("Input too
        # short to compute filterbank", logged) and its kernel writes zeros.
        return np.zeros((*spec.shape[:2], n_coef), np.float32)
    mags = np.sqrt(spec.astype(np.float64))
    bank = np.zeros((n_bins, channels))
    for i in range(max(start, 0), min(end, n_bins - 1) + 1):
        c = band[i]
        if c >= 0:
            bank[i, c] += weight[i]
        if c + 1 < channels:
            bank[i, c + 1] += 1.0 - weight[i]
    energies = mags @ bank
    logs = np.log(np.maximum(energies, 1e-12))
    k = np.arange(n_coef)[:, None]
    j = np.arange(channels)[None, :]
    dct = np.sqrt(2.0 / channels) * np.cos(np.pi / channels * (j + 0.5) * k)
    return (logs @ dct.T).astype(np.float32)


def _mfcc_shape(op):
    spec = op.inputs[0].shape.with_rank(3)
    op.inputs[1].shape.with_rank(0)
    return [tensor_shape.TensorShape([spec[0], spec[1], op._attr("dct_coefficient_count")])]


Mfcc = register_op(
    "Mfcc",
    inputs=["spectrogram: float", "sample_rate: int32"],
    outputs=["output: float"],
    attrs={
        "upper_frequency_limit": 4000.0,
        "lower_frequency_limit": 20.0,
        "filterbank_channel_count": 40,
        "dct_coefficient_count": 13,
    },
    shape_fn=_mfcc_shape,
)


@Mfcc.kernel("CPU", host_memory=("sample_rate",))
async def _mfcc_kernel(ctx, spectrogram, sample_rate):
    spec, rate = np.asarray(spectrogram), np.asarray(sample_rate)
    if spec.ndim != 3:
        raise _invalid(f"spectrogram must be 3-dimensional{list(spec.shape)}")
    if rate.ndim != 0:
        raise _invalid(
            f"Input sample_rate should be a scalar tensor, got {list(rate.shape)} instead."
        )
    a = ctx.attrs
    lo, hi = float(a["lower_frequency_limit"]), float(a["upper_frequency_limit"])
    channels = int(a["filterbank_channel_count"])
    if channels < 1 or lo < 0 or hi <= lo or spec.shape[2] < 2 or int(rate) <= 0:
        raise _invalid(
            f"Mfcc initialization failed for channel count {spec.shape[2]}, sample rate "
            f"{int(rate)} and filterbank_channel_count {channels}"
        )
    return await ctx.device.compute(_mfcc, spec, float(rate), a)


# -- AudioSummary (v1: the sample rate an attr) ------------------------------------------------

AudioSummary = register_op(
    "AudioSummary",
    inputs=["tag: string", "tensor: float"],
    outputs=["summary: string"],
    attrs={"sample_rate": REQUIRED, "max_outputs": 3},
    shape_fn=lambda op: [tensor_shape.TensorShape([])],
)
NotDifferentiable("AudioSummary")
# TF builds it only from GraphDefs written before version 15 (legacy_ops._removed_in).
legacy_ops._removed_in(AudioSummary, 15, "Use AudioSummaryV2.")


@AudioSummary.kernel("CPU")
async def _audio_summary_v1(ctx, tag, tensor):
    rate = np.float32(ctx.attrs["sample_rate"])
    return await summary_ops._audio_summary(ctx, tag, tensor, rate)
