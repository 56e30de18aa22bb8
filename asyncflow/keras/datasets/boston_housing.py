"""`tf.keras.datasets.boston_housing`: 506 rows of 13 features and a price, split as
Keras splits them (a seeded NumPy permutation, then the first 1 - test_split)."""

import numpy as np

from asyncflow.keras.data_utils import get_file
from asyncflow.keras.datasets._common import ORIGIN, cache_dir_of

__all__ = ["load_data"]


def load_data(path="boston_housing.npz", test_split=0.2, seed=113, cache_dir=None):
    """`((x_train, y_train), (x_test, y_test))`, shuffled by `RandomState(seed)`."""
    assert 0 <= test_split < 1
    path = get_file(
        path,
        origin=ORIGIN + "boston_housing.npz",
        file_hash="f553886a1f8d56431e820c5b82552d9d95cfcb96d1e678153f8839538947dff5",
        cache_dir=cache_dir_of(cache_dir),
    )
    with np.load(path, allow_pickle=False) as f:
        x, y = f["x"], f["y"]
    order = np.arange(len(x))
    np.random.RandomState(seed).shuffle(order)
    x, y = x[order], y[order]
    cut = int(len(x) * (1 - test_split))
    return (np.array(x[:cut]), np.array(y[:cut])), (np.array(x[cut:]), np.array(y[cut:]))
