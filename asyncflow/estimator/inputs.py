"""`tf.estimator.inputs`: input_fns over in-memory NumPy arrays (and pandas frames).

TF1 fed these through a queue and an enqueue thread; here they are a `tf.data` pipeline
(slices, repeated `num_epochs` times, shuffled across epochs when asked, batched with a
short last batch), so the batches come out in the same order as TF's when
`shuffle=False`. With `shuffle=True` the order is random in both, but not the same one.
pandas is optional: `pandas_input_fn` raises TF's TypeError when it is missing.
"""

from __future__ import annotations

import collections

import numpy as np

from asyncflow.data.dataset import Dataset

__all__ = ["numpy_input_fn", "pandas_input_fn"]

_TARGET_KEY = "__target_key__"


def _check_shuffle(shuffle) -> None:
    if not isinstance(shuffle, bool):
        raise ValueError(
            "shuffle must be provided and explicitly set as boolean (it is recommended to "
            f"set it as True for training); got {shuffle}"
        )


def _pipeline(arrays, batch_size, num_epochs, shuffle, queue_capacity):
    ds = Dataset.from_tensor_slices(arrays).repeat(num_epochs)
    if shuffle:
        ds = ds.shuffle(queue_capacity)
    return ds.batch(batch_size).make_one_shot_iterator().get_next()


def _lengths_match(x: dict, y) -> None:
    lengths = {len(v) for v in x.values()}
    y_values = list(y.values()) if isinstance(y, dict) else [] if y is None else [y]
    lengths |= {len(v) for v in y_values}
    if len(lengths) > 1:
        x_shapes = {k: v.shape for k, v in x.items()}
        y_shapes = {k: v.shape for k, v in y.items()} if isinstance(y, dict) else None
        if y is not None and not isinstance(y, dict):
            y_shapes = y.shape
        raise ValueError(
            "Length of tensors in x and y is mismatched. All elements in x and y must have "
            f"the same length.\nShapes in x: {x_shapes}\nShapes in y: {y_shapes}\n"
        )


def numpy_input_fn(
    x,
    y=None,
    batch_size=128,
    num_epochs=1,
    shuffle=None,
    queue_capacity=1000,
    num_threads=1,
):
    """An input_fn yielding (features, labels) batches from NumPy arrays or dicts of them.

    `num_epochs=None` repeats forever. `num_threads` is accepted for TF's signature; the
    pipeline keeps the data's order when not shuffling.

    Raises:
      ValueError: shuffle is not a bool (at once); when the input_fn is called: an empty
        dict x, arrays of different lengths, a key in both x and y.
      TypeError: x neither a dict nor an array (when called).
    """
    _check_shuffle(shuffle)

    def input_fn():
        if not isinstance(x, dict | np.ndarray):
            raise TypeError(f"x must be a dict or array; got {type(x).__name__}")
        features = dict(x) if isinstance(x, dict) else {"__x__": x}
        if isinstance(x, dict) and not x:
            raise ValueError("x cannot be an empty dict")
        if isinstance(x, dict) and isinstance(y, dict):
            shared = set(x) & set(y)
            if shared:
                raise ValueError(
                    f"{len(shared)} duplicate keys are found in both x and y: {shared}"
                )
        _lengths_match(features, y)
        arrays = collections.OrderedDict((k, np.asarray(v)) for k, v in features.items())
        if y is not None:
            arrays[_TARGET_KEY] = dict(y) if isinstance(y, dict) else np.asarray(y)
        batch = _pipeline(arrays, batch_size, num_epochs, shuffle, queue_capacity)
        labels = batch.pop(_TARGET_KEY, None)
        feats = batch["__x__"] if not isinstance(x, dict) else {k: batch[k] for k in x}
        return feats if y is None else (feats, labels)

    return input_fn


def pandas_input_fn(
    x,
    y=None,
    batch_size=128,
    num_epochs=1,
    shuffle=None,
    queue_capacity=1000,
    num_threads=1,
    target_column="target",
):
    """An input_fn over a pandas DataFrame (and a label Series); needs pandas.

    Raises:
      TypeError: pandas is not installed.
      ValueError: shuffle is not a bool; target_column already a column of x; x and y
        with different indexes.
    """
    try:
        import pandas as pd  # noqa: PLC0415 - optional dependency, as in TF
    except ImportError:
        raise TypeError("pandas_input_fn should not be called without pandas installed") from None
    _check_shuffle(shuffle)
    x = x.copy()
    if y is not None:
        if target_column in x:
            raise ValueError(
                f"Cannot use name {target_column} for target column: DataFrame already has a "
                f"column with that name: {x.columns}"
            )
        if not np.array_equal(x.index, y.index):
            raise ValueError(
                "Index for x and y are mismatched.\n"
                f"Index for x: {x.index}\nIndex for y: {y.index}\n"
            )
    columns = {name: x[name].to_numpy() for name in x.columns}
    labels = None
    if isinstance(y, pd.DataFrame):
        labels = {name: y[name].to_numpy() for name in y.columns}
    elif y is not None:
        labels = y.to_numpy()
    return numpy_input_fn(columns, labels, batch_size, num_epochs, shuffle, queue_capacity)
