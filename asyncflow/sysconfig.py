"""`tf.sysconfig` (TF 2.21 compat.v1): where a build of extensions would find asyncflow.

asyncflow is pure Python: it ships no C++ headers and no shared library, so the paths
name its package directory (`get_lib`) and an `include` directory under it that does
not exist (`get_include`), and the flags only point at them.  `get_build_info` says
what this process can run on (CuPy's CUDA), not how a binary was compiled.  The three
constants are TF 2.21's values, for build scripts that read them.
"""

from __future__ import annotations

import collections
import os

__all__ = [
    "CXX11_ABI_FLAG",
    "CXX_VERSION",
    "MONOLITHIC_BUILD",
    "get_build_info",
    "get_compile_flags",
    "get_include",
    "get_lib",
    "get_link_flags",
]

CXX11_ABI_FLAG = 1
CXX_VERSION = 201703
MONOLITHIC_BUILD = 0

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def get_lib() -> str:
    """The asyncflow package directory (TF's: the directory of its shared library)."""
    return _PACKAGE_DIR


def get_include() -> str:
    """`<package>/include`: where TF keeps its C++ headers; asyncflow has none, so the
    directory does not exist."""
    return os.path.join(_PACKAGE_DIR, "include")


def get_compile_flags() -> list[str]:
    """TF 2.21's flags with asyncflow's include path: `-I<include>`, the C++11 ABI,
    C++17, Eigen's alignment."""
    return [
        f"-I{get_include()}",
        f"-D_GLIBCXX_USE_CXX11_ABI={CXX11_ABI_FLAG}",
        "--std=c++17",
        "-DEIGEN_MAX_ALIGN_BYTES=64",
    ]


def get_link_flags() -> list[str]:
    """`-L<package dir>` only: asyncflow has no libtensorflow_framework to link."""
    return [f"-L{get_lib()}"]


def get_build_info() -> collections.OrderedDict:
    """TF's keys for this process: `is_cuda_build` when the GPU backend (CuPy, or the
    test stand-in) loads, with `cuda_version` ("major.minor") when CuPy reports one; ROCm
    and TensorRT never."""
    from asyncflow.devices import gpu

    backend = gpu.backend()
    info = collections.OrderedDict(
        is_cuda_build=backend is not None, is_rocm_build=False, is_tensorrt_build=False
    )
    runtime = getattr(getattr(getattr(backend, "xp", None), "cuda", None), "runtime", None)
    if backend is not None and hasattr(runtime, "runtimeGetVersion"):
        version = runtime.runtimeGetVersion()  # e.g. 12050
        info["cuda_version"] = f"{version // 1000}.{version % 1000 // 10}"
    return info
