"""asyncflow/op_default_gaps.py against TF 2.21's recorded attr defaults.

Stripping default-valued attrs (tf.saved_model.save, strip_default_attrs=True) keeps the
attrs that file lists, so that TF can load what we write.  A registered default changed
here without regenerating it (tools/record_op_default_gaps.py, under TF) would strip an
attr TF needs, or keep one it does not: this test finds that from the defaults TF 2.21
reported, recorded by the same tool (tests/fixtures/tf_op_attr_defaults.json).
"""

import json
import os

import pytest
from google.protobuf import text_format

import asyncflow  # noqa: F401 - registers the ops
from asyncflow.meta_graph import _default_attr_value
from asyncflow.op_default_gaps import NOT_TF_DEFAULTS
from asyncflow.registry import all_op_defs

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "tf_op_attr_defaults.json")


@pytest.fixture(scope="module")
def tf_defaults():
    with open(FIXTURE) as f:
        return json.load(f)


def _ours(op_def):
    out = {}
    for key, spec in op_def.attrs.items():
        value = _default_attr_value(spec)
        if value is not None:
            out[key] = text_format.MessageToString(value, as_one_line=True)
    return out


def test_gaps_match_tf_defaults(tf_defaults):
    ours = all_op_defs()
    gaps = set()
    for name, tf in tf_defaults.items():
        op_def = ours.get(name)
        if op_def is None:
            continue  # (an op registered when the file was written, since removed)
        gaps.update(f"{name}.{k}" for k, v in _ours(op_def).items() if tf.get(k) != v)
    recorded = {g for g in NOT_TF_DEFAULTS if g.split(".", 1)[0] in tf_defaults}
    assert sorted(gaps - recorded) == [], "defaults that differ from TF's, not in the file"
    assert sorted(recorded - gaps) == [], "listed in the file, now TF's default"


def test_fixture_covers_the_registry(tf_defaults):
    # Every op TF knows that the file's gaps name was recorded: a gap of an op missing
    # from the fixture could not be checked.
    names = {g.split(".", 1)[0] for g in NOT_TF_DEFAULTS}
    assert sorted(names - set(tf_defaults)) == []
