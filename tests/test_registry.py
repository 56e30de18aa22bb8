"""Every registered op has a shape function and a CPU kernel (STYLE.md)."""

import inspect

import pytest

import asyncflow  # noqa: F401 - registers every op family
from asyncflow.registry import all_op_defs, get_op_def, register_op

OPS = sorted(all_op_defs())


def test_registry_is_populated():
    assert len(OPS) >= 80, OPS


@pytest.mark.parametrize("op_type", OPS)
def test_op_has_shape_fn_and_cpu_kernel(op_type):
    op_def = get_op_def(op_type)
    assert op_def.shape_fn is not None, f"{op_type} has no shape function"
    assert "CPU" in op_def.kernels, f"{op_type} has no CPU kernel"
    assert inspect.iscoroutinefunction(op_def.kernels["CPU"]), f"{op_type} kernel is not async"


def test_duplicate_registration_rejected():
    with pytest.raises(ValueError):
        register_op("Identity", inputs=["x: T"], outputs=["y: T"])


def test_unknown_op_type():
    with pytest.raises(KeyError, match="Op type not registered 'NoSuchOp'"):
        get_op_def("NoSuchOp")
