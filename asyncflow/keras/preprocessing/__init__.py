"""`tf.keras.preprocessing`: sequence, text and image-array utilities (numpy, Python and
Pillow, no graph)."""

from asyncflow.keras.preprocessing import image, sequence, text

__all__ = ["image", "sequence", "text"]
