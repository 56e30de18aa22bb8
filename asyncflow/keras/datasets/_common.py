"""What the `tf.keras.datasets` modules share: TF's download folder, cache-dir handling,
and the refusal for datasets published only as Python pickles."""

import os

ORIGIN = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"


def cache_dir_of(cache_dir):
    """`cache_dir` expanded and created, as Keras' loaders do, or None for the default."""
    if cache_dir:
        cache_dir = os.path.expanduser(cache_dir)
        os.makedirs(cache_dir, exist_ok=True)
    return cache_dir


def refuse_pickled(name):
    raise NotImplementedError(
        f"tf.keras.datasets.{name}.load_data: this dataset is published as Python pickles, "
        "and asyncflow never unpickles data (it can run code). Convert it once to an .npz "
        "of plain arrays with TensorFlow or Keras and load that with numpy.load."
    )
