"""DecodeWav / EncodeWav (ops/audio_ops.py) against TF 2.21's recorded bytes, values
and messages, and NumPy."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors

pytestmark = pytest.mark.timeout(60)

AUDIO = np.array([[0.0, 0.5], [-0.5, 1.0], [0.25, -1.0], [0.3, 2.0]], np.float32)
# TF's bytes for encode_wav(AUDIO, 16000) and for its first channel at 8000 Hz.
TF_STEREO = bytes.fromhex(
    "524946463400000057415645666d74201000000001000200803e000000fa00000400100064617461"
    "100000000000004000c0ff7f002000806626ff7f"
)
TF_MONO = bytes.fromhex(
    "524946462c00000057415645666d74201000000001000100401f0000803e000002001000646174610800"
    "0000000000c000206626"
)
PCM = np.array([[0, 16384], [-16384, 32767], [8192, -32768], [9830, 32767]]) / 32768.0


def _run(fetch, feed=None):
    with af.Session() as sess:
        return sess.run(fetch, feed)


def _wav(*chunks, fmt=None):
    fmt = fmt if fmt is not None else struct.pack("<IHHIIHH", 16, 1, 1, 8000, 16000, 2, 16)
    body = b"WAVEfmt " + fmt + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _data(b):
    return b"data" + struct.pack("<I", len(b)) + b


def test_encode_writes_tfs_bytes():
    with af.Graph().as_default():
        assert _run(af.audio.encode_wav(AUDIO, 16000)) == TF_STEREO
        assert _run(af.audio.encode_wav(AUDIO[:, :1], 8000)) == TF_MONO
        # half away from zero, clamped, NaN as 0 (TF's)
        odd = np.array([[0.5 / 32768], [-0.5 / 32768], [1.5 / 32768], [np.nan]], np.float32)
        assert _run(af.audio.encode_wav(odd, 10))[-8:] == bytes.fromhex("0100ffff02000000")


def test_decode_reads_samples_channels_and_rate():
    with af.Graph().as_default():
        got = _run(af.audio.decode_wav(TF_STEREO))
        assert type(got).__name__ == "DecodeWav" and got.sample_rate == 16000
        np.testing.assert_array_equal(got.audio, PCM.astype(np.float32))
        one = _run(af.audio.decode_wav(TF_STEREO, desired_channels=1)).audio
        np.testing.assert_array_equal(one, PCM[:, :1].astype(np.float32))
        three = _run(af.audio.decode_wav(TF_STEREO, desired_channels=3)).audio
        np.testing.assert_array_equal(three, PCM[:, [0, 1, 1]].astype(np.float32))
        mono2 = _run(af.audio.decode_wav(TF_MONO, desired_channels=2)).audio
        np.testing.assert_array_equal(mono2, PCM[:, [0, 0]].astype(np.float32))
        six = _run(af.audio.decode_wav(TF_STEREO, desired_samples=6)).audio
        np.testing.assert_array_equal(six[4:], np.zeros((2, 2)))
        assert _run(af.audio.decode_wav(TF_STEREO, desired_samples=2)).audio.shape == (2, 2)
        audio, rate = af.audio.decode_wav(TF_STEREO, desired_channels=2, desired_samples=5)
        assert audio.shape.as_list() == [5, 2] and rate.shape.ndims == 0
        # chunks other than data are skipped; an 18-byte fmt chunk's extension too
        extra = _wav(
            b"LIST" + struct.pack("<I", 4) + b"abcd", _data(struct.pack("<hh", 1000, -1000))
        )
        assert _run(af.audio.decode_wav(extra)).audio.ravel().tolist() == [
            1000 / 32768,
            -1000 / 32768,
        ]
        fmt18 = struct.pack("<IHHIIHHH", 18, 1, 1, 8000, 16000, 2, 16, 0)
        got = _run(af.audio.decode_wav(_wav(_data(struct.pack("<hh", 32767, -32768)), fmt=fmt18)))
        assert got.audio.ravel().tolist() == [32767 / 32768, -1.0]


def _fmt(size=16, kind=1, ch=1, rate=8000, byte_rate=None, block=None, bits=16):
    block = ch * bits // 8 if block is None else block
    byte_rate = rate * block if byte_rate is None else byte_rate
    return struct.pack("<IHHIIHH", size, kind, ch, rate, byte_rate, block, bits)


D4 = _data(struct.pack("<hh", 100, -100))


@pytest.mark.parametrize(
    "contents, message",
    [
        (b"", "Data too short when trying to read string"),
        (b"RIFX" + TF_STEREO[4:], "Header mismatch: Expected RIFF but found RIFX"),
        (
            TF_STEREO[:8] + b"WAVX" + TF_STEREO[12:],
            "Header mismatch: Expected WAVE but found WAVX",
        ),
        (TF_STEREO[:-3], "Data too short when trying to read string"),
        (_wav(D4, fmt=_fmt(bits=8)), "Can only read 16-bit WAV files, but received 8"),
        (_wav(D4, fmt=_fmt(kind=3)), "Bad audio format for WAV: Expected 1 (PCM), but got3"),
        (
            _wav(D4, fmt=_fmt(20) + b"\0\0\0\0"),
            "Bad format chunk size for WAV: Expected 16 or 18, but got20",
        ),
        (_wav(D4, fmt=_fmt(ch=0, block=2)), "Bad number of channels for WAV: Expected at least 1"),
        (_wav(D4, fmt=_fmt(block=4)), "Bad bytes per sample in WAV header: Expected 2 but got 4"),
        (
            _wav(D4, fmt=_fmt(byte_rate=5)),
            "Bad bytes per second in WAV header: Expected 16000 but got 5 (sample_rate=8000, "
            "bytes_per_sample=2)",
        ),
        (_wav(), "No data chunk found in WAV"),
        (_wav(D4, D4), "More than one data chunk found in WAV"),
        (_wav(b"data" + struct.pack("<I", 100) + b"abcd"), "Data too short when trying to read"),
        (_wav(_data(b"abcde")), "Data too short when trying to read string"),  # a partial frame
        (
            _wav(b"junk" + struct.pack("<I", 2**31 + 5)),
            "WAV data chunk 'junk' is too large: 2147483653 bytes, but the limit is 2147483647",
        ),
        (b"RIFF\0\0\0\0WAVEjunk" + bytes(8), "Unexpected field junk"),
    ],
)
def test_decode_refuses_what_tf_refuses(contents, message):
    with af.Graph().as_default():
        p = af.placeholder(af.string, [])
        with pytest.raises(
            errors.InvalidArgumentError,
            match="^" + message.replace("(", r"\(").replace(")", r"\)"),
        ):
            _run(af.audio.decode_wav(p).audio, {p: contents})


def test_a_chunk_past_the_end_is_skipped():
    with af.Graph().as_default():
        wav = _wav(D4, b"junk" + struct.pack("<I", 1000))
        assert _run(af.audio.decode_wav(wav)).audio.shape == (2, 1)


def test_encode_checks_its_inputs():
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="^Shape must be rank 2 but is rank 1"):
            af.audio.encode_wav(np.zeros([3], np.float32), 100)
        with pytest.raises(errors.InvalidArgumentError, match=r"^sample_rate must be in \(0"):
            _run(af.audio.encode_wav(np.zeros([2, 1], np.float32), 0))
        with pytest.raises(errors.InvalidArgumentError, match="^audio is null"):
            _run(af.audio.encode_wav(np.zeros([2, 0], np.float32), 10))
        empty = _run(af.audio.encode_wav(np.zeros([0, 2], np.float32), 100))
        assert empty.hex() == (
            "524946462400000057415645666d742010000000010002006400000090010000040010006461746100000000"
        )


def test_round_trip_through_the_graph():
    with af.Graph().as_default():
        x = np.random.RandomState(0).uniform(-1, 1, (50, 2)).astype(np.float32)
        got = _run(af.audio.decode_wav(af.audio.encode_wav(x, 22050)))
        assert got.sample_rate == 22050
        np.testing.assert_allclose(got.audio, np.round(x * 32768) / 32768, atol=1 / 32768)
