"""`tf.lite.experimental.load_delegate` and `OpResolverType`.

asyncflow's interpreter runs its own NumPy kernels, so it takes no TFLite delegate: a
library is still opened as TF opens it (ctypes), so a missing library or one without
TFLite's external-delegate entry point fails with TF's error; a real delegate library
is then refused with ValueError, the error TF gives a delegate that fails to load.
"""

from __future__ import annotations

import ctypes
import enum


class OpResolverType(enum.Enum):
    """The op resolver an Interpreter uses. asyncflow's interpreter has one set of
    kernels (TFLite's reference arithmetic), so each value runs the same kernels."""

    AUTO = 0
    BUILTIN = 1
    BUILTIN_REF = 2
    BUILTIN_WITHOUT_DEFAULT_DELEGATES = 3


def load_delegate(library, options=None):
    """Loads a TFLite delegate from shared library `library` (with `options`).

    Raises:
      OSError: the library cannot be opened (the dynamic loader's message, as TF).
      AttributeError: it has no `tflite_plugin_create_delegate` (as TF).
      ValueError: it is a delegate library: asyncflow's interpreter takes none.
    """
    lib = ctypes.CDLL(library)
    lib.tflite_plugin_create_delegate  # noqa: B018 - TF's AttributeError when missing
    raise ValueError(
        f"Failed to load delegate from {library}\nasyncflow's tf.lite.Interpreter runs "
        "NumPy kernels and cannot use TFLite delegates."
    )
