"""`tf.keras.datasets.cifar100`: published as pickled Python batches (refused)."""

from asyncflow.keras.datasets._common import refuse_pickled

__all__ = ["load_data"]


def load_data(label_mode="fine", cache_dir=None):
    """Refused: the CIFAR-100 archive holds Python pickles (see the package docstring)."""
    if label_mode not in ("fine", "coarse"):
        raise ValueError('`label_mode` must be one of `"fine"`, `"coarse"`.')
    refuse_pickled("cifar100")
