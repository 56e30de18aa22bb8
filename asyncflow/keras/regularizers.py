"""`tf.keras.regularizers`: asyncflow's Keras-style regularizers (L1, L2, L1L2, l1, l2,
l1_l2) plus `get` by name ('l1', 'l2', 'l1_l2' with Keras' default factor 0.01)."""

from __future__ import annotations

from asyncflow.regularizers import L1, L1L2, L2, Regularizer, l1, l1_l2, l2

__all__ = ["Regularizer", "L1", "L2", "L1L2", "l1", "l2", "l1_l2", "get"]

_BY_NAME = {"l1": L1, "l2": L2, "l1_l2": L1L2, "l1l2": L1L2}


def get(identifier):
    """A regularizer from a name or a callable (None stays None).

    Raises:
      ValueError: an unknown name or an identifier of another kind.
    """
    if identifier is None or (callable(identifier) and not isinstance(identifier, str)):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        cls = _BY_NAME[identifier.lower()]
        return cls(l1=0.01, l2=0.01) if cls is L1L2 else cls()
    raise ValueError(f"Could not interpret regularizer identifier: {identifier}")
