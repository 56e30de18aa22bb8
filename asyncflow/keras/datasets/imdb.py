"""`tf.keras.datasets.imdb`: the word index (JSON) is served; the reviews are published
as object arrays in an .npz, i.e. pickles, and `load_data` refuses them."""

import json

from asyncflow.keras.data_utils import get_file
from asyncflow.keras.datasets._common import ORIGIN, refuse_pickled

__all__ = ["get_word_index", "load_data"]


def load_data(
    path="imdb.npz",
    num_words=None,
    skip_top=0,
    maxlen=None,
    seed=113,
    start_char=1,
    oov_char=2,
    index_from=3,
    cache_dir=None,
    **kwargs,
):
    """Refused: imdb.npz holds pickled object arrays (see the package docstring)."""
    refuse_pickled("imdb")


def get_word_index(path="imdb_word_index.json"):
    """The dict word -> rank of Keras' IMDB word index."""
    path = get_file(
        path, origin=ORIGIN + "imdb_word_index.json", file_hash="bfafd718b763782e994055a2d397834f"
    )
    with open(path) as f:
        return json.load(f)
