"""`tf.keras.datasets.mnist`: 60,000 + 10,000 28x28 uint8 digit images and labels."""

import numpy as np

from asyncflow.keras.data_utils import get_file
from asyncflow.keras.datasets._common import ORIGIN, cache_dir_of

__all__ = ["load_data"]


def load_data(path="mnist.npz", cache_dir=None):
    """`((x_train, y_train), (x_test, y_test))` from Keras' mnist.npz."""
    path = get_file(
        path,
        origin=ORIGIN + "mnist.npz",
        file_hash="731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1",
        cache_dir=cache_dir_of(cache_dir),
    )
    with np.load(path, allow_pickle=False) as f:
        return (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])
