"""`tf.keras.datasets`: the small datasets Keras fetches into its cache.

Each `load_data` finds its file in `~/.keras/datasets` (or downloads it there with
`tf.keras.utils.get_file`, checked against TF's published hash) and returns NumPy
arrays as Keras does.  CIFAR-10/100, IMDB and Reuters are published as Python pickles
(inside a tarball, or object arrays inside an .npz); asyncflow reads no pickles, so their
`load_data` raises NotImplementedError saying so, while their word indexes and label
names (JSON and a fixed list) are served.
"""

from asyncflow.keras.datasets import (
    boston_housing,
    cifar10,
    cifar100,
    fashion_mnist,
    imdb,
    mnist,
    reuters,
)

__all__ = ["boston_housing", "cifar10", "cifar100", "fashion_mnist", "imdb", "mnist", "reuters"]
