"""tf.data.experimental.Optional and get_next_as_optional against TF 2.21's recorded
results (fixtures/optional_tf.json, recorded by fixtures/record_optional_tf.py from
fixtures/optional_cases.py): iteration past the end without OutOfRangeError, a cond on
has_value, from_value / empty with nested, string and sparse values, the error of
get_value on an empty optional, element specs, shapes and op types."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

import asyncflow as af
from asyncflow import graph as ops
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import optional_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "optional_tf.json").read_text())


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


@pytest.mark.parametrize("key", sorted(cases.CASES))
def test_case_matches_tf(key):
    inits, fetches = cases.CASES[key](af)
    results = []
    with Session() as sess:
        sess.run(inits)
        for f in fetches:
            try:
                results.append({"value": cases.plain(sess.run(f))})
            except af.errors.OpError as e:
                results.append({"error": type(e).__name__, "message": e.message.split("\n")[0]})
    assert results == TF["cases"][key]


def test_specs_shapes_and_ops_match_tf():
    assert cases.describe(af) == TF["describe"]


def test_an_optional_owns_its_value():
    # The value read back is a copy: changing it leaves the optional's value alone.
    opt = af.data.experimental.Optional.from_value(af.constant([1.0, 2.0]))
    v = opt.get_value()
    with Session() as sess:
        first = sess.run(v)
        first[:] = 0.0
        again = sess.run(v)
    assert again.tolist() == [1.0, 2.0]


def test_optional_structure_names():
    spec = af.data.experimental.OptionalStructure(af.TensorSpec([], af.int32))
    assert spec.element_spec == af.TensorSpec([], af.int32)
    assert spec.value_type is af.data.experimental.Optional
    assert af.OptionalSpec is af.data.experimental.OptionalStructure  # (as in TF 2.21)
