import copy

import pytest

from asyncflow.device_spec import DeviceSpec, canonical_name, merge_device

PARSE = [
    # spec, (job, replica, task, device_type, device_index), to_string
    (
        "/job:localhost/replica:0/task:0/device:CPU:1",
        ("localhost", 0, 0, "CPU", 1),
        "/job:localhost/replica:0/task:0/device:CPU:1",
    ),
    ("/cpu:1", (None, None, None, "CPU", 1), "/device:CPU:1"),
    ("CPU:1", (None, None, None, "CPU", 1), "/device:CPU:1"),
    ("cpu", (None, None, None, "CPU", None), "/device:CPU:*"),
    ("/device:GPU:0", (None, None, None, "GPU", 0), "/device:GPU:0"),
    ("/device:gpu:0", (None, None, None, "GPU", 0), "/device:GPU:0"),
    ("/gpu:0", (None, None, None, "GPU", 0), "/device:GPU:0"),
    ("/job:ps", ("ps", None, None, None, None), "/job:ps"),
    ("/device:GPU:*", (None, None, None, "GPU", None), "/device:GPU:*"),
    ("/device:TPU:3", (None, None, None, "TPU", 3), "/device:TPU:3"),
    ("/task:1/job:worker", ("worker", None, 1, None, None), "/job:worker/task:1"),
    ("", (None, None, None, None, None), ""),
]


def _fields(d):
    return (d.job, d.replica, d.task, d.device_type, d.device_index)


@pytest.mark.parametrize("spec,fields,string", PARSE)
def test_parse(spec, fields, string):
    d = DeviceSpec.from_string(spec)
    assert _fields(d) == fields
    assert d.to_string() == string == canonical_name(spec)
    assert DeviceSpec.from_string(d.to_string()) == d


@pytest.mark.parametrize(
    "spec",
    ["/foo:1", "/job:", "/device:CPU:x", "/task:abc", "/replica:-1", "/cpu:0/gpu:0", "/device::0"],
)
def test_invalid(spec):
    with pytest.raises(ValueError, match=spec.replace("*", r"\*")):
        DeviceSpec.from_string(spec)


def test_constructor_and_setters():
    d = DeviceSpec(job="ps", task=0, device_type="cpu", device_index=0)
    assert d.to_string() == "/job:ps/task:0/device:CPU:0"
    d.device_type, d.replica = "GPU", "2"
    assert d.to_string() == "/job:ps/replica:2/task:0/device:GPU:0"
    assert DeviceSpec(device_index=1).to_string() == ""  # TF drops an index without a type


def test_parse_resets_fields():
    d = DeviceSpec(job="ps", task=3)
    assert d.parse_from_string("/gpu:1") is d
    assert _fields(d) == (None, None, None, "GPU", 1)


def test_merge():
    base = DeviceSpec.from_string("/job:worker/task:1/device:CPU:0")
    merged = base.make_merged_spec(DeviceSpec.from_string("/gpu:2"))
    assert merged.to_string() == "/job:worker/task:1/device:GPU:2"
    assert base.to_string() == "/job:worker/task:1/device:CPU:0"
    base.merge_from(DeviceSpec(job="ps"))
    assert base.to_string() == "/job:ps/task:1/device:CPU:0"
    assert copy.copy(base) == base and copy.copy(base) is not base


@pytest.mark.parametrize(
    "outer,inner,expected",
    [
        ("/job:worker/task:0", "/gpu:1", "/job:worker/task:0/device:GPU:1"),
        ("/job:worker/device:CPU:0", "/job:ps", "/job:ps/device:CPU:0"),
        ("/gpu:0", "", "/device:GPU:0"),
        ("/gpu:0", None, ""),
        ("", "/cpu:0", "/device:CPU:0"),
        (None, "/cpu:0", "/device:CPU:0"),
        (DeviceSpec(job="a"), DeviceSpec(task=2), "/job:a/task:2"),
    ],
)
def test_merge_device(outer, inner, expected):
    assert merge_device(outer, inner) == expected


def test_canonical_name_of_spec_and_none():
    assert canonical_name(DeviceSpec(job="localhost", replica=0, task=0)) == (
        "/job:localhost/replica:0/task:0"
    )
    assert canonical_name(None) == ""
