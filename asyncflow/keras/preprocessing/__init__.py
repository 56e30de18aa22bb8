"""`tf.keras.preprocessing`: sequence and text utilities (numpy and Python, no graph)."""

from asyncflow.keras.preprocessing import sequence, text

__all__ = ["sequence", "text"]
