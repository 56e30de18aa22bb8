"""Session 29's odds against TF 2.21's recorded results (tests/fixtures/misc_s29_tf.json,
recorded by record_misc_s29_tf.py from misc_s29_cases.py with tensorflow.compat.v1 in
graph mode): DynamicRaggedShape's equality, dtypes and tf.reshape to one; tf.where and
tf.where_v2 with ragged operands.  Values, and errors by class and when they came.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

import asyncflow as tf

HERE = pathlib.Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(HERE))
from dynamic_ragged_shape_s28_cases import describe  # noqa: E402
from misc_s29_cases import CASES  # noqa: E402

TABLE = json.loads((HERE / "misc_s29_tf.json").read_text())


def test_every_case_is_recorded():
    assert sorted(TABLE) == sorted(CASES)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_tf(name):
    assert describe(tf, CASES[name]) == TABLE[name]
