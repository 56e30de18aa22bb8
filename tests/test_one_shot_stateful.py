"""A one-shot iterator refuses a dataset that captures a stateful object, as TF's
`make_one_shot_iterator` does when it copies the dataset's graph into its factory: the
graphs of tests/fixtures/one_shot_stateful_cases.py give TF 2.21's results (recorded
by record_one_shot_stateful_tf.py): which captures are refused, the ValueError's
message, and the elements of those allowed; and which op types TF refuses to copy."""

import json
import pathlib
import sys

import pytest

import asyncflow as af
from asyncflow import registry
from asyncflow.data import one_shot

pytestmark = pytest.mark.timeout(60)

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import one_shot_stateful_cases as cases  # noqa: E402

RECORDED = json.loads((FIXTURES / "one_shot_stateful_tf.json").read_text())
TF = RECORDED["cases"]
# (Cases whose message names a node asyncflow names otherwise: none now that
# from_tensors reads a variable in TF's "normalize_element" name scope too.)
NAMED_ELSEWHERE: dict[str, tuple[str, str]] = {}


# asyncflow's own stateful op types (TF has none of that name), refused as the variable
# reads they stand for are; internal ones start with "_", tests/_testing_ops.py's with
# "Test".
UNKNOWN_TO_TF = {"VariableInitializedValue", "ReportUninitialized"}


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_as_tf(name):
    with af.Graph().as_default():
        got = cases.CASES[name](af)
    want = TF[name]
    if name in NAMED_ELSEWHERE:
        want = json.loads(json.dumps(want).replace(*NAMED_ELSEWHERE[name]))
    assert json.loads(json.dumps(got)) == want


def test_refused_op_types_as_tf():
    refused = set(RECORDED["refused_types"])
    ours = registry.all_op_defs()
    wrong = sorted(
        name
        for name, op_def in ours.items()
        if one_shot.refused_type(op_def) != (name in refused)
        and not (name.startswith(("_", "Test")) or name in UNKNOWN_TO_TF)
    )
    assert wrong == [], wrong


def test_a_map_inside_flat_map_capturing_a_variable_is_refused():
    with af.Graph().as_default():
        v = af.get_variable("v", initializer=2.0, use_resource=False)
        ds = af.data.Dataset.range(2).flat_map(
            lambda x: af.data.Dataset.range(x).map(lambda y: af.cast(y, af.float32) * v)
        )
        with pytest.raises(ValueError, match=r"name:v, type:VariableV2"):
            af.data.make_one_shot_iterator(ds)
        af.data.make_initializable_iterator(ds)  # (which takes it)
