"""`tf.keras.datasets.fashion_mnist`: Zalando's 28x28 clothing images, from the four
gzipped IDX files Keras publishes."""

import gzip
import os

import numpy as np

from asyncflow.keras.data_utils import get_file
from asyncflow.keras.datasets._common import ORIGIN, cache_dir_of

__all__ = ["load_data"]

_FILES = (
    "train-labels-idx1-ubyte.gz",
    "train-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
)
# An IDX file's header: magic and one count (labels), or magic, count, rows, cols.
_LABEL_HEADER, _IMAGE_HEADER = 8, 16


def _read(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def _images(path, n):
    pixels = _read(path, _IMAGE_HEADER)
    if pixels.size != n * 28 * 28:
        raise ValueError(
            f"fashion_mnist: {os.path.basename(path)} holds {pixels.size} pixels, not the "
            f"{n} 28x28 images its labels file counts"
        )
    return pixels.reshape(n, 28, 28)


def load_data(cache_dir=None):
    """`((x_train, y_train), (x_test, y_test))`: uint8 images [n, 28, 28], labels [n]."""
    cache_dir = cache_dir_of(cache_dir)
    subdir = os.path.join("datasets", "fashion-mnist")
    paths = [
        get_file(name, origin=ORIGIN + name, cache_dir=cache_dir, cache_subdir=subdir)
        for name in _FILES
    ]
    y_train = _read(paths[0], _LABEL_HEADER)
    y_test = _read(paths[2], _LABEL_HEADER)
    x_train = _images(paths[1], len(y_train))
    x_test = _images(paths[3], len(y_test))
    return (x_train, y_train), (x_test, y_test)
