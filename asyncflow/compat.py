"""`af.compat`: `af.compat.v1` is asyncflow itself (it is TF1's API), so scripts written
as `import tensorflow.compat.v1 as tf; tf.disable_v2_behavior()` run with
`tf = af.compat.v1`.  The v2-switching calls change nothing of graph mode (asyncflow only
has it); disable_v2_behavior is remembered for what TF bases on `tf2.enabled()` (Keras'
default save format: a SavedModel directory with TF 2 behaviour, HDF5 without).
"""

from __future__ import annotations

import sys

__all__ = ["disable_v2_behavior", "disable_eager_execution", "executing_eagerly"]


_V2_BEHAVIOR = [True]  # (TF 2.21's `tf2.enabled()` until disable_v2_behavior)


def disable_v2_behavior() -> None:
    """asyncflow always builds graphs; what TF bases on TF 2 behaviour being on (Keras'
    default save format) behaves as TF1 from now on."""
    _V2_BEHAVIOR[0] = False


def v2_behavior_enabled() -> bool:
    """TF's `tf.__internal__.tf2.enabled()`: True until disable_v2_behavior."""
    return _V2_BEHAVIOR[0]


def disable_eager_execution() -> None:
    """No-op: asyncflow always builds graphs."""


def executing_eagerly() -> bool:
    return False


def __getattr__(name):  # `v1`: the package itself, read once it is imported
    if name == "v1":
        return sys.modules["asyncflow"]
    raise AttributeError(name)
