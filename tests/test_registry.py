"""Every registered op has a shape function and a CPU kernel (STYLE.md)."""

import inspect

import pytest

import asyncflow  # noqa: F401 - registers every op family
from asyncflow.registry import (
    NotDifferentiable,
    all_op_defs,
    get_op_def,
    ops_supported_on,
    register_op,
)

OPS = sorted(all_op_defs())


def test_registry_is_populated():
    assert len(OPS) >= 80, OPS


@pytest.mark.parametrize("op_type", OPS)
def test_op_has_shape_fn_and_cpu_kernel(op_type):
    op_def = get_op_def(op_type)
    assert op_def.shape_fn is not None, f"{op_type} has no shape function"
    kd = op_def.kernel_for("CPU")
    assert kd is not None, f"{op_type} has no CPU kernel"
    assert inspect.iscoroutinefunction(kd.fn), f"{op_type} kernel is not async"


def test_duplicate_registration_rejected():
    with pytest.raises(ValueError):
        register_op("Identity", inputs=["x: T"], outputs=["y: T"])


def test_unknown_op_type():
    with pytest.raises(KeyError, match="Op type not registered 'NoSuchOp'"):
        get_op_def("NoSuchOp")


def _fresh_op(name, **kw):
    """A test-only op (registered once per process), complete as the registry tests ask."""
    try:
        return get_op_def(name)
    except KeyError:
        op_def = register_op(name, shape_fn=lambda op: [op.inputs[0].shape], **kw)
        NotDifferentiable(name)
        return op_def


def test_generic_kernel_serves_every_device_type_and_specific_one_wins():
    op_def = _fresh_op(
        "TestRegistryGeneric", inputs=["x: float32", "axis: int32"], outputs=["y: float32"]
    )
    if not op_def.kernel_defs:

        @op_def.kernel(host_memory=("axis",))
        async def _generic(ctx, x, axis):
            return x

        @op_def.kernel("TPU")
        async def _tpu(ctx, x, axis):
            return x

    assert op_def.kernel_for("CPU").device_type is None
    assert op_def.kernel_for("CPU").host_memory == frozenset({"axis"})
    assert op_def.kernel_for("GPU").fn is op_def.kernel_for("CPU").fn
    assert op_def.kernel_for("TPU").device_type == "TPU"
    assert op_def.supports("ANYTHING") and op_def.has_generic_kernel
    assert op_def.host_memory_positions({}, "GPU") == ([1], [])
    assert op_def.host_memory_positions({}, "TPU") == ([], [])


def test_device_specific_kernel_only():
    op_def = _fresh_op("TestRegistryCpuOnly", inputs=["x: string"], outputs=["y: string"])
    if not op_def.kernel_defs:

        @op_def.kernel("CPU")
        async def _cpu(ctx, x):
            return x

    assert op_def.kernel_for("CPU") is not None
    assert op_def.kernel_for("GPU") is None and not op_def.supports("GPU")
    assert "TestRegistryCpuOnly" in ops_supported_on("CPU")
    assert "TestRegistryCpuOnly" not in ops_supported_on("GPU")
    assert "Identity" in ops_supported_on("GPU")  # derived from its generic kernel


def test_kernel_registration_errors():
    op_def = _fresh_op("TestRegistryErrors", inputs=["x: float32"], outputs=["y: float32"])
    if not op_def.kernel_defs:
        op_def.kernel()(_noop_kernel)
    with pytest.raises(ValueError, match="already has a generic kernel"):
        op_def.kernel()(_noop_kernel)
    op_def.kernel_defs.pop("CPU", None)
    op_def.kernel("CPU")(_noop_kernel)
    with pytest.raises(ValueError, match="already has a CPU kernel"):
        op_def.kernel("cpu")(_noop_kernel)
    with pytest.raises(ValueError, match="unknown args"):
        op_def.kernel("GPU", host_memory=("shape",))
    with pytest.raises(TypeError):
        op_def.kernel("GPU", host_memory="x")


async def _noop_kernel(ctx, x):
    return x
