"""`af.compat`: `af.compat.v1` is asyncflow itself (it is TF1's API), so scripts written
as `import tensorflow.compat.v1 as tf; tf.disable_v2_behavior()` run with
`tf = af.compat.v1`.  The v2-switching calls are no-ops: asyncflow only has graph mode.
"""

from __future__ import annotations

import sys

__all__ = ["disable_v2_behavior", "disable_eager_execution", "executing_eagerly"]


def disable_v2_behavior() -> None:
    """No-op: asyncflow always behaves as TF1."""


def disable_eager_execution() -> None:
    """No-op: asyncflow always builds graphs."""


def executing_eagerly() -> bool:
    return False


def __getattr__(name):  # `v1`: the package itself, read once it is imported
    if name == "v1":
        return sys.modules["asyncflow"]
    raise AttributeError(name)
