"""`tf.resource_loader` (TF 2.21 compat.v1): data files next to the calling module, or
under asyncflow's package directory.

As TF's pip build: paths are plain file paths (no Bazel runfiles); `load_resource` reads
a path relative to the root `get_root_dir_with_all_resources` gives, here the asyncflow
package directory (TF's is the directory of its own resource_loader module).
"""

from __future__ import annotations

import inspect
import os

__all__ = [
    "get_data_files_path",
    "get_path_to_datafile",
    "get_root_dir_with_all_resources",
    "load_resource",
    "readahead_file_path",
]

_ROOT = os.path.dirname(os.path.abspath(__file__))


def _caller_dir(depth: int) -> str:
    frame = inspect.stack()[depth]
    return os.path.dirname(os.path.abspath(frame.filename))


def get_data_files_path() -> str:
    """The directory of the module that calls this."""
    return _caller_dir(2)


def get_path_to_datafile(path) -> str:
    """`path` under the directory of the calling module."""
    return os.path.join(_caller_dir(2), path)


def get_root_dir_with_all_resources() -> str:
    """The directory `load_resource` reads relative paths from: asyncflow's package."""
    return _ROOT


def load_resource(path) -> bytes:
    """The bytes of the file at `path`, relative to get_root_dir_with_all_resources()
    (an absolute path reads as it is).

    Raises:
      FileNotFoundError: no such file, as TF's (the path joined to the root).
    """
    with open(os.path.join(_ROOT, path), "rb") as f:
        return f.read()


def readahead_file_path(path, readahead="128M") -> str:
    """`path` unchanged: as TF's, there is no read-ahead file system to name."""
    del readahead
    return path
