"""`tf.keras.utils.warmstart_embedding_matrix`: an embedding matrix for a new vocabulary
that keeps the rows of words the old vocabulary already had.

It needs the initializers, which import `keras.utils`, so the package attaches it to
`tf.keras.utils` (keras/__init__.py) instead of utils.py importing it.
"""

from __future__ import annotations

import numpy as np

from asyncflow import gfile
from asyncflow import graph as ops
from asyncflow.keras import initializers
from asyncflow.ops import array_ops, scatter_nd_ops, slicing_ops

__all__ = ["warmstart_embedding_matrix"]


def warmstart_embedding_matrix(
    base_vocabulary, new_vocabulary, base_embeddings, new_embeddings_initializer="uniform"
):
    """A [len(new_vocabulary), dim] tensor: `new_embeddings_initializer`'s rows, with the
    row of `base_embeddings` put in for each word both vocabularies have.

    Vocabularies are lists, tuples, NumPy arrays or the path of a one-word-a-line file.
    Graph tensors are refused as TF1 graph mode refuses them (it reads their `.numpy()`).

    Raises:
      ValueError: a missing vocabulary file, an empty vocabulary or one of another type.
      AttributeError: a vocabulary given as a graph tensor.
    """
    base = _vocab_list(base_vocabulary)
    new = _vocab_list(new_vocabulary)
    init = initializers.get(new_embeddings_initializer)
    matrix = init(shape=(len(new), base_embeddings.shape[1]), dtype=base_embeddings.dtype)
    position = {word: i for i, word in enumerate(base)}
    kept = [(position[word], i) for i, word in enumerate(new) if word in position]
    if not kept:
        return matrix
    rows = slicing_ops.gather(base_embeddings, [b for b, _ in kept])
    where = array_ops.expand_dims([n for _, n in kept], axis=1)
    return scatter_nd_ops.tensor_scatter_nd_update(matrix, where, rows)


def _vocab_list(vocab) -> list:
    if isinstance(vocab, ops.Tensor):
        # TF reads a tensor vocabulary eagerly; a graph tensor has no value to read.
        raise AttributeError("'SymbolicTensor' object has no attribute 'numpy'")
    if isinstance(vocab, (np.ndarray, tuple, list)):
        words = list(vocab)
    elif isinstance(vocab, str):
        if not gfile.exists(vocab):
            raise ValueError(f"Vocabulary file {vocab} does not exist.")
        with gfile.GFile(vocab, "r") as f:
            words = f.read().splitlines()
    else:
        raise ValueError(
            "Vocabulary is expected to be either a NumPy array, list, 1D tensor or a "
            f"vocabulary text file. Instead type {type(vocab)} was received."
        )
    if not words:
        raise ValueError(
            "Vocabulary is expected to be either a NumPy array, list, 1D tensor or a "
            "vocabulary text file with at least one token. Received 0 instead."
        )
    return words
