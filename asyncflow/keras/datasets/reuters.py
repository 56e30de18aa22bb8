"""`tf.keras.datasets.reuters`: the word index (JSON) and the 46 topic names are served;
the newswires are published as object arrays in an .npz, i.e. pickles, and `load_data`
refuses them."""

import json

from asyncflow.keras.data_utils import get_file
from asyncflow.keras.datasets._common import ORIGIN, refuse_pickled

__all__ = ["get_label_names", "get_word_index", "load_data"]

# The topic of label i, in the dataset's label order.
_LABELS = (
    "cocoa",
    "grain",
    "veg-oil",
    "earn",
    "acq",
    "wheat",
    "copper",
    "housing",
    "money-supply",
    "coffee",
    "sugar",
    "trade",
    "reserves",
    "ship",
    "cotton",
    "carcass",
    "crude",
    "nat-gas",
    "cpi",
    "money-fx",
    "interest",
    "gnp",
    "meal-feed",
    "alum",
    "oilseed",
    "gold",
    "tin",
    "strategic-metal",
    "livestock",
    "retail",
    "ipi",
    "iron-steel",
    "rubber",
    "heat",
    "jobs",
    "lei",
    "bop",
    "zinc",
    "orange",
    "pet-chem",
    "dlr",
    "gas",
    "silver",
    "wpi",
    "hog",
    "lead",
)


def load_data(
    path="reuters.npz",
    num_words=None,
    skip_top=0,
    maxlen=None,
    test_split=0.2,
    seed=113,
    start_char=1,
    oov_char=2,
    index_from=3,
    cache_dir=None,
    **kwargs,
):
    """Refused: reuters.npz holds pickled object arrays (see the package docstring)."""
    refuse_pickled("reuters")


def get_word_index(path="reuters_word_index.json"):
    """The dict word -> rank of Keras' Reuters word index."""
    path = get_file(
        path,
        origin=ORIGIN + "reuters_word_index.json",
        file_hash="4d44cc38712099c9e383dc6e5f11a921",
    )
    with open(path) as f:
        return json.load(f)


def get_label_names():
    """The 46 topic names, indexed by label."""
    return _LABELS
