"""TF's ExtractJpegShape, DecodeAndCropJpeg, EncodeJpegVariableQuality (adjust / random
JPEG quality) and DecodeWebP against TF 2.21's recorded results on JPEGs TF itself
encoded and WebPs Pillow wrote (tests/fixtures/jpeg_ops, recorded by
record_jpeg_ops_tf.py).

Decoded pixels are TF's exactly (libjpeg-turbo with TF's fast IDCT, ops/image_ops.py);
shapes, errors, and decode-and-crop being exactly decode-then-crop (TF's own test) too.
A re-encode (adjust_jpeg_quality) goes through Pillow's encoder, whose bytes are not
TF's: its decoded pixels are within a bound.
"""

from __future__ import annotations

import base64
import hashlib
import json
import pathlib
import re

import numpy as np
import pytest

import asyncflow as tf

FIX = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "jpeg_ops"
TABLE = json.loads((FIX / "values.json").read_text())
JPEGS = sorted(TABLE["jpegs"])
# Largest |ours - TF's| per pixel allowed: none for a decode; after a re-encode
# (adjust_jpeg_quality: Pillow's encoder settings, not TF's) measured at most 7.
DECODE_TOL = 0
ADJUST_TOL = 8


def arr(entry) -> np.ndarray:
    raw = base64.b64decode(entry["b64"])
    return np.frombuffer(raw, dtype=entry["dtype"]).reshape(entry["shape"])


def run(fetch, feed=None):
    with tf.Session() as sess:
        return sess.run(fetch, feed)


@pytest.mark.parametrize("name", JPEGS)
def test_extract_jpeg_shape_is_tf_s(name):
    data = (FIX / f"{name}.jpg").read_bytes()
    want = TABLE["jpegs"][name]
    with tf.Graph().as_default():
        s32 = tf.image.extract_jpeg_shape(data)
        s64 = tf.io.extract_jpeg_shape(data, tf.int64)
        assert s32.dtype == tf.int32 and s64.dtype == tf.int64 and s32.shape == [3]
        a, b = run([s32, s64])
    assert a.tolist() == want["shape32"] and b.tolist() == want["shape64"]


@pytest.mark.parametrize("name", JPEGS)
def test_decode_and_crop_is_decode_then_crop_and_near_tf(name):
    data = (FIX / f"{name}.jpg").read_bytes()
    want = TABLE["jpegs"][name]
    for ch in (0, 1, 3):
        tf_full = arr(want[f"decode_{ch}"])
        crops = {k: v for k, v in want["crops"].items() if k.startswith(f"{ch}_")}
        with tf.Graph().as_default():
            full = tf.image.decode_jpeg(data, channels=ch)
            wins = [json.loads(k.split("_", 1)[1]) for k in crops]
            outs = [tf.image.decode_and_crop_jpeg(data, w, channels=ch) for w in wins]
            got_full, *got = run([full, *outs])
        assert got_full.shape == tf_full.shape
        diff = np.abs(got_full.astype(int) - tf_full.astype(int)).max()
        assert diff <= DECODE_TOL, (name, ch, diff)
        for (y, x, h, w), out, (key, ref) in zip(wins, got, crops.items()):
            np.testing.assert_array_equal(out, got_full[y : y + h, x : x + w])
            assert list(out.shape) == ref["shape"]
            if name != "progressive":  # (TF's partial decode of a progressive JPEG can
                # round chroma apart from its full decode near the window's edge)
                tf_crop = tf_full[y : y + h, x : x + w]
                assert hashlib.sha256(tf_crop.tobytes()).hexdigest() == ref["sha256"], key


@pytest.mark.parametrize("q", [10, 50, 95])
def test_adjust_jpeg_quality_near_tf(q):
    want_u8 = arr(TABLE["adjust"][f"u8_{q}"])
    want_f32 = arr(TABLE["adjust"][f"f32_{q}"])
    rng_img = _image(26, 35, 3, 11)
    with tf.Graph().as_default():
        u8 = tf.image.adjust_jpeg_quality(rng_img, q)
        f32 = tf.image.adjust_jpeg_quality(rng_img.astype(np.float32) / 255, q)
        assert u8.dtype == tf.uint8 and f32.dtype == tf.float32
        got_u8, got_f32 = run([u8, f32])
    assert got_u8.shape == want_u8.shape
    assert np.abs(got_u8.astype(int) - want_u8.astype(int)).max() <= ADJUST_TOL
    np.testing.assert_allclose(got_f32 * 255, np.round(got_f32 * 255), atol=1e-3)
    assert np.abs(np.round(got_f32 * 255) - want_f32).max() <= ADJUST_TOL


def _image(h: int, w: int, c: int, seed: int) -> np.ndarray:
    # (the recorder's image(): the same smooth pattern)
    y, x = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(seed)
    planes = []
    for k in range(c):
        a, b = rng.uniform(0.05, 0.3, 2)
        planes.append(128 + 90 * np.sin(a * x + k) * np.cos(b * y) + 30 * ((x // 7 + y // 5) % 2))
    return np.clip(np.stack(planes, -1), 0, 255).astype(np.uint8)


def test_random_jpeg_quality_is_adjust_at_some_quality_in_range():
    img = _image(16, 16, 3, 3)
    with tf.Graph().as_default():
        out = tf.image.random_jpeg_quality(img, 40, 60, seed=7)
        options = [tf.image.adjust_jpeg_quality(img, q) for q in range(40, 60)]
        got, *candidates = run([out, *options])
        assert any(np.array_equal(got, c) for c in candidates)
        with pytest.raises(ValueError, match="between 0 and 100"):
            tf.image.random_jpeg_quality(img, -1, 60)
        with pytest.raises(ValueError, match="must be less than"):
            tf.image.random_jpeg_quality(img, 60, 60)


@pytest.mark.parametrize("key", sorted(TABLE["webp"]))
def test_decode_webp_is_tf_s(key):
    stem, ch = key.rsplit("_", 1)
    want = TABLE["webp"][key]
    with tf.Graph().as_default():
        out = tf.io.decode_webp((FIX / f"{stem}.webp").read_bytes(), channels=int(ch))
        if "error" in want:
            with pytest.raises(
                getattr(tf.errors, want["error"]), match=re.escape(want["message"])
            ):
                run(out)
            return
        got = run(out)
    ref = arr(want)
    assert got.shape == ref.shape
    tol = 0 if stem != "lossy" else 2  # lossy: libwebp's decoder versions may round apart
    assert np.abs(got.astype(int) - ref.astype(int)).max() <= tol


@pytest.mark.parametrize("name", sorted(TABLE["errors"]))
def test_errors_are_tf_s(name):
    want = TABLE["errors"][name]
    data = (FIX / "rgb420.jpg").read_bytes()
    with tf.Graph().as_default():
        window = tf.placeholder(tf.int32, [None])
        cases = {
            "crop_outside": (tf.image.decode_and_crop_jpeg(data, window), [30, 0, 10, 10]),
            "crop_negative": (tf.image.decode_and_crop_jpeg(data, window), [-1, 0, 10, 10]),
            "crop_zero": (tf.image.decode_and_crop_jpeg(data, window), [0, 0, 0, 10]),
            "crop_len3": (tf.image.decode_and_crop_jpeg(data, window), [0, 0, 1]),
            "not_jpeg_crop": (tf.image.decode_and_crop_jpeg(b"notajpeg", window), [0, 0, 1, 1]),
            "not_jpeg_shape": (tf.image.extract_jpeg_shape(b"\x89PNG\r\n\x1a\n"), None),
            "quality_bad": (tf.image.adjust_jpeg_quality(_image(8, 8, 3, 0), 101), None),
            "webp_bad": (tf.io.decode_webp(b"RIFF\x00\x00\x00\x00WEBPjunk"), None),
        }
        fetch, value = cases[name]
        with pytest.raises(getattr(tf.errors, want["error"])) as e:
            run(fetch, None if value is None else {window: value})
    assert want["message"] in str(e.value)
