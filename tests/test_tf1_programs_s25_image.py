"""An image input pipeline written as a TF1 program, checked against TF 2.21: the
tensor names its steps end in, dtype handling of the colour adjustments, seeded batch
flips, and the build-time errors of resize and crop_and_resize. Values recorded from
TF 2.21 (tf.compat.v1)."""

import numpy as np
import pytest

import asyncflow as tf


def test_pipeline_result_names_match_tf():
    with tf.Graph().as_default():
        img = np.zeros((6, 8, 3), np.uint8)
        f = tf.image.convert_image_dtype(
            tf.image.decode_png(tf.image.encode_png(img), channels=3), tf.float32
        )
        # TF 2.21 names each step's result after its scope
        assert f.name == "convert_image:0"
        assert tf.image.adjust_gamma(f, 2.0).name == "adjust_gamma/Identity:0"
        assert tf.image.random_brightness(f, 0.3, seed=6).name == "adjust_brightness/Identity:0"
        assert tf.image.random_contrast(f, 0.5, 1.5, seed=8).name == "adjust_contrast/Identity:0"
        assert tf.image.random_hue(f, 0.2, seed=9).name == "adjust_hue/Identity:0"
        assert tf.image.per_image_standardization(f).name == "per_image_standardization:0"
        assert tf.image.rgb_to_grayscale(f).name == "rgb_to_grayscale:0"
        assert tf.random_crop(f, [3, 4, 3], seed=3).name == "random_crop:0"
        flip = tf.image.random_flip_left_right(f, seed=4)
        assert (flip.name, flip.shape.as_list()) == (
            "random_flip_left_right/Merge:0",
            [None, None, 3],
        )
        assert tf.image.random_flip_up_down(f, seed=5).name == "random_flip_up_down/Merge:0"


def test_convert_image_dtype_names_and_values_match_tf():
    with tf.Graph().as_default():
        u = tf.constant(np.array([[[10, 200, 30]]], np.uint8))
        h = tf.constant(np.array([[[0.2, 0.5, 0.9]]], np.float16))
        e = tf.image.convert_image_dtype(u, tf.int32)
        e2 = tf.image.convert_image_dtype(e, tf.uint8)
        e3 = tf.image.convert_image_dtype(
            tf.constant([[[0.5, 0.2, 1.0]]]), tf.uint8, saturate=True
        )
        e4 = tf.image.convert_image_dtype(h, tf.float32)
        same = tf.image.convert_image_dtype(e4, tf.float32)
        gray = tf.image.rgb_to_grayscale(u)
        names = [t.name for t in (e, e2, e3, e4, same, gray)]
        assert names == [
            "convert_image:0",
            "convert_image_1:0",
            "convert_image_2:0",
            "convert_image_3:0",
            "Identity:0",
            "rgb_to_grayscale:0",
        ]
        with tf.Session() as s:
            r = s.run([e, e2, e3, gray])
        assert r[0].tolist() == [[[83886080, 1677721600, 251658240]]]
        assert r[1].tolist() == [[[10, 200, 30]]]
        assert r[2].tolist() == [[[127, 51, 255]]]
        assert (r[3].dtype, r[3].tolist()) == (np.uint8, [[[124]]])


def test_float16_brightness_and_gamma_stay_half_as_in_tf():
    with tf.Graph().as_default():
        h = tf.constant(np.array([[[0.2, 0.5, 0.9]]], np.float16))
        c = tf.image.adjust_brightness(h, 0.3)
        d = tf.image.adjust_gamma(h, 2.0)
        assert (c.dtype, d.dtype) == (tf.float16, tf.float16)
        with tf.Session() as s:
            rc, rd = s.run([c, d])
        np.testing.assert_allclose(rc, [[[0.5, 0.7998, 1.2002]]], atol=1e-4)
        np.testing.assert_allclose(rd, [[[0.03998, 0.25, 0.81006]]], atol=1e-4)


def test_batch_flips_are_seeded_per_image_as_in_tf():
    with tf.Graph().as_default():
        tf.set_random_seed(3)
        x = tf.constant(np.arange(24, dtype=np.float32).reshape(4, 2, 3, 1))
        a = tf.image.random_flip_left_right(x, seed=1)
        b = tf.image.random_flip_up_down(x, seed=2)
        assert a.name == "random_flip_left_right/add:0"
        with tf.Session() as s:
            ra, rb = s.run([a, b])
    assert ra[..., 0].tolist() == [
        [[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]],
        [[8.0, 7.0, 6.0], [11.0, 10.0, 9.0]],
        [[14.0, 13.0, 12.0], [17.0, 16.0, 15.0]],
        [[18.0, 19.0, 20.0], [21.0, 22.0, 23.0]],
    ]
    assert rb[..., 0].tolist() == [
        [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]],
        [[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]],
        [[12.0, 13.0, 14.0], [15.0, 16.0, 17.0]],
        [[21.0, 22.0, 23.0], [18.0, 19.0, 20.0]],
    ]


def test_build_errors_match_tf():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"^'images' must have either 3 or 4 dimensions\.$"):
            tf.image.resize_images(tf.zeros([3]), [2, 2])
        img = tf.zeros([1, 4, 4, 3])
        boxes = tf.zeros([2, 4])
        with pytest.raises(ValueError, match="Dimension must be 2 but is 1"):
            tf.image.crop_and_resize(img, boxes, tf.zeros([2], tf.int32), [3])


def test_resize_image_with_pad_places_the_image_as_tf():
    # TF floors half the padding the unfloored resized height leaves: 5x7 -> 4x4 puts
    # the two resized rows at the top, not one row down
    img = np.arange(35, dtype=np.float32).reshape(5, 7, 1)
    with tf.Graph().as_default(), tf.Session() as s:
        out = s.run(tf.image.resize_image_with_pad(img, 4, 4, method=1))
    assert out[..., 0].tolist() == [
        [0.0, 1.0, 3.0, 5.0],
        [14.0, 15.0, 17.0, 19.0],
        [0.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0],
    ]


def test_rot90_with_k_known_only_when_run():
    small = np.arange(6, dtype=np.float32).reshape(2, 3, 1)
    with tf.Graph().as_default(), tf.Session() as s:
        k = tf.placeholder(tf.int32, [])
        r = tf.image.rot90(small, k)
        assert (r.name, r.shape.as_list()) == ("rot90/cond/Merge:0", [None, None, 1])
        got = {kv: s.run(r, {k: kv})[..., 0].tolist() for kv in (0, 1, 2, 3, 5, -1)}
        with pytest.raises(ValueError, match="k: Tensor conversion requested dtype int32"):
            tf.image.rot90(small, tf.constant(1.5))
    assert got[0] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert got[1] == got[5] == [[2.0, 5.0], [1.0, 4.0], [0.0, 3.0]]
    assert got[2] == [[5.0, 4.0, 3.0], [2.0, 1.0, 0.0]]
    assert got[3] == got[-1] == [[3.0, 0.0], [4.0, 1.0], [5.0, 2.0]]


def test_decode_image_and_grayscale_to_rgb_shapes_and_names():
    with tf.Graph().as_default():
        png = tf.image.encode_png(np.zeros((2, 2, 3), np.uint8))
        d = tf.image.decode_image(png)
        d3 = tf.image.decode_image(png, channels=3)
        flat = tf.image.decode_image(png, channels=3, expand_animations=False)
        assert (d.name, d.shape.ndims, d3.shape.ndims) == (
            "decode_image/DecodeImage:0",
            None,
            None,
        )
        assert flat.shape.as_list() == [None, None, 3]
        gr = tf.image.grayscale_to_rgb(tf.zeros([4, 5, 1]))
        assert (gr.name, gr.shape.as_list()) == ("grayscale_to_rgb:0", [4, 5, 3])


def test_run_and_build_errors_of_the_pipeline_match_tf():
    img = np.zeros((5, 7, 3), np.uint8)
    with tf.Graph().as_default(), tf.Session() as s:
        png = tf.image.encode_png(img)
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="`channels` must be 0, 1, 3 or 4"
        ):
            s.run(tf.image.decode_png(png, channels=5))
        f = tf.image.convert_image_dtype(img, tf.float32)
        crop = tf.random_crop(f, [10, 2, 3])
        assert crop.shape.as_list() == [10, 2, 3]
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"Need value.shape >= size, got \] \[5 7 3\] \[10 2 3\]",
        ):
            s.run(crop)
        with pytest.raises(AttributeError, match="dtype must be either floating point or integer"):
            tf.image.convert_image_dtype(img, tf.string)


def test_decode_ops_take_each_others_formats_as_tf():
    # TF 2.21: DecodeJpeg/Png/Gif decode any of JPEG, PNG and GIF (DecodeGif with a frame
    # axis); BMP data, or DecodeBmp on the others, is an error naming the right op
    img = (np.arange(18) * 9 % 256).astype(np.uint8).reshape(2, 3, 3)
    with tf.Graph().as_default(), tf.Session() as s:
        png = s.run(tf.image.encode_png(img))
        jpg = s.run(tf.image.encode_jpeg(img, quality=100))
        assert s.run(tf.image.decode_jpeg(png)).tolist() == img.tolist()
        assert s.run(tf.image.decode_gif(png)).shape == (1, 2, 3, 3)
        assert s.run(tf.image.decode_png(jpg)).shape == (2, 3, 3)
        assert s.run(tf.image.decode_gif(jpg)).shape == (1, 2, 3, 3)
        assert s.run(tf.image.decode_jpeg(png, channels=1)).shape == (2, 3, 1)
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"Trying to decode PNG format using DecodeBmp op\. Use `decode_png`",
        ):
            s.run(tf.io.decode_bmp(png))
