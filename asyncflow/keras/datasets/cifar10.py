"""`tf.keras.datasets.cifar10`: published as pickled Python batches (refused)."""

from asyncflow.keras.datasets._common import refuse_pickled

__all__ = ["load_data"]


def load_data(cache_dir=None):
    """Refused: the CIFAR-10 archive holds Python pickles (see the package docstring)."""
    refuse_pickled("cifar10")
