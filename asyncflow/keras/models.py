"""`tf.keras.models`: Model and Sequential under Keras' models namespace."""

from __future__ import annotations

from asyncflow.keras.training import Model, Sequential

__all__ = ["Model", "Sequential"]
