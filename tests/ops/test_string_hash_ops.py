"""TF's string hash ops (StringToHashBucketFast / Strong / legacy StringToHashBucket)
against TF 2.21's recorded buckets (tests/fixtures/string_hash_tf.json, recorded by
record_string_hash_tf.py): every string length 0..199 and longer ones, so each branch of
FarmHash's Fingerprint64 and every SipHash / MurmurHash tail length is covered; a bucket
count near 2**62 compares the hashes themselves.  And the errors TF raises.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as tf

TABLE = json.loads(
    (
        pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "string_hash_tf.json"
    ).read_text()
)
STRINGS = [bytes.fromhex(h) for h in TABLE["strings"]]


@pytest.mark.parametrize("buckets", TABLE["buckets"])
def test_buckets_match_tf(buckets):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.string, [None])
        fast = tf.string_to_hash_bucket_fast(x, buckets)
        strong = tf.strings.to_hash_bucket_strong(x, buckets, key=TABLE["key"])
        legacy = tf.strings.to_hash_bucket(x, buckets)
        assert (fast.op.type, strong.op.type, legacy.op.type) == (
            "StringToHashBucketFast", "StringToHashBucketStrong", "StringToHashBucket",
        )  # fmt: skip
        assert fast.dtype == tf.int64
        with tf.Session() as sess:
            f, s, g = sess.run([fast, strong, legacy], {x: np.array(STRINGS, dtype=object)})
    assert f.tolist() == TABLE[f"fast_{buckets}"]
    assert s.tolist() == TABLE[f"strong_{buckets}"]
    assert g.tolist() == TABLE[f"legacy_{buckets}"]


def test_shape_is_kept_and_errors_are_tf_s():
    with tf.Graph().as_default():
        y = tf.string_to_hash_bucket_fast([["a", "b"], ["c", "d"]], 7)
        assert y.shape.as_list() == [2, 2]
        with pytest.raises(ValueError, match="less than minimum 1"):
            tf.string_to_hash_bucket_fast(["a"], 0)
        bad_key = tf.strings.to_hash_bucket_strong(["a"], 3, key=[1])
        with tf.Session() as sess:
            assert sess.run(y).shape == (2, 2)
            with pytest.raises(tf.errors.InvalidArgumentError, match="Key must have 2 elements"):
                sess.run(bad_key)
