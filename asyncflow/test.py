"""`af.test`: `tf.compat.v1.test` — TestCase and its helpers (asyncflow/test_case.py),
gradient checking, and what the process was built with."""

import os
import types

from asyncflow.test_case import (
    Benchmark,
    StubOutForTesting,
    TestCase,
    assert_equal_graph_def,
    benchmark_config,
    create_local_cluster,
    disable_with_predicate,
    get_temp_dir,
    main,
    with_eager_op_as_function,
)
from asyncflow.test_util import compute_gradient, compute_gradient_error

__all__ = [
    "Benchmark",
    "StubOutForTesting",
    "TestCase",
    "assert_equal_graph_def",
    "benchmark_config",
    "create_local_cluster",
    "disable_with_predicate",
    "get_temp_dir",
    "is_built_with_gpu_support",
    "is_built_with_rocm",
    "is_built_with_xla",
    "main",
    "with_eager_op_as_function",
    "compute_gradient",
    "compute_gradient_error",
    "gpu_device_name",
    "is_built_with_cuda",
    "is_gpu_available",
    "is_cpu_target_available",
    "test_src_dir_path",
    "experimental",
]


def is_gpu_available(cuda_only=False, min_cuda_compute_capability=None) -> bool:
    """`tf.test.is_gpu_available`: whether this process has a GPU device (CuPy with a
    driver, or the ASYNCFLOW_FAKE_GPUS stand-in)."""
    from asyncflow import device_lib

    for d in device_lib.list_local_devices():
        if d.device_type == "GPU":
            if min_cuda_compute_capability is None:
                return True
            desc = d.physical_device_desc
            cc = desc.rsplit("compute capability: ", 1)[-1] if "compute capability" in desc else ""
            try:
                major, minor = (int(v) for v in cc.split("."))
            except ValueError:
                return True
            if (major, minor) >= tuple(min_cuda_compute_capability):
                return True
    return False


def gpu_device_name() -> str:
    """`tf.test.gpu_device_name`: '/device:GPU:0' when a GPU exists, else ''."""
    from asyncflow import device_lib

    for d in device_lib.list_local_devices():
        if d.device_type == "GPU":
            return "/device:GPU:" + d.name.rsplit(":", 1)[-1]
    return ""


def is_built_with_cuda() -> bool:
    """Whether GPU support can work here: CuPy imports (or the stand-in is on)."""
    from asyncflow.devices import gpu

    return gpu.backend() is not None


def is_built_with_gpu_support() -> bool:
    """CUDA or ROCm: here CUDA through CuPy (`is_built_with_cuda`)."""
    return is_built_with_cuda()


def is_built_with_rocm() -> bool:
    """asyncflow's GPUs are CUDA devices (CuPy); there is no ROCm build."""
    return False


def is_built_with_xla() -> bool:
    """asyncflow compiles no XLA clusters (tf.xla's attrs are kept, not compiled)."""
    return False


def is_cpu_target_available(target) -> bool:
    """Whether a compiler backend for CPU `target` ('x86', 'aarch64', ...) is built in:
    TF answers for its XLA/LLVM build; asyncflow compiles no XLA, so none is."""
    del target
    return False


def test_src_dir_path(relative_path) -> str:
    """Where a Bazel test's runfiles hold `tensorflow/<relative_path>`: under
    $TEST_SRCDIR/$TEST_WORKSPACE (a KeyError when not run by Bazel, as in TF)."""
    return os.path.join(
        os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"], "tensorflow", relative_path
    )


def _sync_devices() -> None:
    """Wait for every device's pending work: TF allows it only eagerly, and asyncflow
    runs only graphs (a Session's run returns when its step is done)."""
    raise RuntimeError("sync_devices() must only be called in Eager mode, outside tf.functions")


experimental = types.SimpleNamespace(sync_devices=_sync_devices)
