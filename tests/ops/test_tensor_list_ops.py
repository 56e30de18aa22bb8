"""TensorList ops against TF 2.21 (tests/fixtures/record_tensor_list_tf.py): values, and
the class and message of each error.

TF also checks a list's element dtype while building the graph (through the handle's
shape data: a ValueError there); here that check runs with the kernel
(InvalidArgumentError), tested on its own below.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as tf

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
from fetched import flat as _plain  # noqa: E402
from raw_ops import RawOps as _Raw  # noqa: E402
from tensor_list_cases import CASES  # noqa: E402

REF = json.loads((FIXTURES / "tensor_list_tf.json").read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_tensor_list_matches_tf(case):
    want = REF[case]
    with tf.Graph().as_default(), tf.Session() as sess:
        t = CASES[case](tf, _Raw())
        if "error" in want:
            with pytest.raises(getattr(tf.errors, want["error"])) as info:
                sess.run(t)
            assert info.value.message.startswith(want["message"])
            return
        got = sess.run(t)
    got = [_plain(v) for v in got] if isinstance(got, list) else _plain(got)
    assert got == want["value"]


def test_wrong_element_dtype_is_invalid_argument():
    raw = _Raw()
    with tf.Graph().as_default(), tf.Session() as sess:
        h = raw.TensorListFromTensor(tensor=np.ones((2, 3), np.float32), element_shape=[3])
        item = raw.TensorListGetItem(
            input_handle=h, index=0, element_shape=[3], element_dtype=tf.int32
        )
        with pytest.raises(tf.errors.InvalidArgumentError, match="op elements int32 but list"):
            sess.run(item)


def test_lists_are_values_set_item_leaves_its_input():
    raw = _Raw()
    with tf.Graph().as_default(), tf.Session() as sess:
        h = raw.TensorListFromTensor(tensor=np.zeros((2, 2), np.float32), element_shape=[2])
        h2 = raw.TensorListSetItem(input_handle=h, index=0, item=[5.0, 6.0])
        a, b = sess.run([
            raw.TensorListStack(input_handle=h, element_shape=[2], element_dtype=tf.float32),
            raw.TensorListStack(input_handle=h2, element_shape=[2], element_dtype=tf.float32),
        ])  # fmt: skip
    np.testing.assert_array_equal(a, [[0, 0], [0, 0]])
    np.testing.assert_array_equal(b, [[5, 6], [0, 0]])
