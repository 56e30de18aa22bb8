"""`fit_generator`, `evaluate_generator` and `predict_generator` of TF1's Keras: batches
come from a Python generator (yielding `(x, y)` or `(x, y, sample_weight)`) or a
`keras.utils.Sequence`.

As TF1's Keras (training_generator_v1): an epoch's loss is the mean of its batch losses
weighted by batch size, metrics are the running values after the last batch, and a
Sequence gives `len(sequence)` steps per epoch, visited in order unless `shuffle`
(Python's `random.shuffle` of the batch order), with `on_epoch_end()` called after each
epoch.  A plain generator used for validation is read batch by batch here, where TF's
enqueuer thread reads ahead; use a Sequence for reproducible validation batches.
"""

from __future__ import annotations

import random

import numpy as np

from asyncflow.data.dataset import Dataset
from asyncflow.keras import backend
from asyncflow.keras import callbacks as cbks
from asyncflow.keras.utils import Sequence

__all__ = ["fit_generator", "evaluate_generator", "predict_generator", "is_batch_source"]


def is_batch_source(x) -> bool:
    """Whether `fit`/`evaluate`/`predict` should read `x` batch by batch: a generator, a
    Sequence or a tf.data Dataset."""
    return isinstance(x, (Sequence, Dataset)) or (
        hasattr(x, "__next__") and hasattr(x, "__iter__")
    )


class _DatasetBatches:
    """A Dataset's batches, read in Keras' session through one iterator (made once per
    fit/evaluate/predict call, read on across its epochs)."""

    def __init__(self, dataset):
        with backend.get_graph().as_default():
            self._next = dataset.make_one_shot_iterator().get_next()

    def __next__(self):
        return backend.get_session().run(self._next)


def sample_weights(ys, sample_weight, class_weight):
    """Per-output sample weights: `sample_weight` times the weight of each sample's
    class (argmax of a one-hot row, else the label) from `class_weight`.

    Raises:
      ValueError: a class present in the data but missing from class_weight.
    """
    if sample_weight is None and not class_weight:
        return None
    out = []
    for y in ys:
        weights = None if sample_weight is None else np.asarray(sample_weight)
        if isinstance(class_weight, dict) and class_weight:
            classes = np.argmax(y, axis=1) if y.shape[1] > 1 else np.reshape(y, y.shape[0])
            missing = {c for c in classes.tolist() if c not in class_weight}
            if missing:
                raise ValueError(
                    "`class_weight` must contain all classes in the data. The classes "
                    f"{missing} exist in the data but not in `class_weight`."
                )
            per_class = np.asarray([class_weight[c] for c in classes.tolist()])
            weights = per_class if weights is None else per_class * weights
        out.append(weights)
    return out


def _batches(data, steps, shuffle):
    """An iterator over `steps` batches of a Sequence or generator.

    Raises:
      ValueError: a generator without `steps`.
    """
    if isinstance(data, Dataset):
        data = _DatasetBatches(data)
    if isinstance(data, Sequence):
        order = list(range(len(data)))
        if shuffle:
            random.shuffle(order)
        steps = len(data) if steps is None else steps
        return (data[order[i % len(order)]] for i in range(steps)), steps
    if steps is None:
        raise ValueError(
            "`steps=None` is only valid for a generator based on the "
            "`keras.utils.Sequence` class. Please specify `steps` or use the "
            "`keras.utils.Sequence` class."
        )
    return (next(data) for _ in range(steps)), steps


def _unpack(batch):
    if not isinstance(batch, tuple) or len(batch) not in (2, 3):
        raise ValueError(
            "Output of generator should be a tuple `(x, y, sample_weight)` or `(x, y)`. "
            f"Found: {batch}"
        )
    x, y = batch[0], batch[1]
    return x, y, (batch[2] if len(batch) == 3 else None)


def _run_batches(model, mode, data, steps, shuffle, cb=None) -> list:
    by_steps = isinstance(data, Dataset)
    batches, steps = _batches(data, steps, shuffle)
    totals, seen = None, 0
    for step, batch in enumerate(batches):
        x, y, sample_weight = _unpack(batch)
        xs = model._inputs_of(x)
        model._ensure_compiled()
        ys = model._targets_of(y)
        if cb is not None:
            cb.on_train_batch_begin(step, {"batch": step, "size": 1 if by_steps else len(xs[0])})
        outs = model._run(mode, xs, ys, sample_weights(ys, sample_weight, None))
        if totals is None:
            totals = [0.0] * len(outs)
        # A Dataset's steps count as one sample each (a plain mean), as TF1's Keras does.
        size = 1 if by_steps else len(xs[0])
        totals[0] += np.float64(outs[0]) * size
        totals[1:] = outs[1:]
        seen += size
        if cb is not None:
            logs = {"batch": step, "size": size}
            logs.update((k, float(v)) for k, v in zip(model.metrics_names, outs, strict=True))
            cb.on_train_batch_end(step, logs)
    totals[0] /= seen
    return totals


def fit_generator(
    model,
    generator,
    steps_per_epoch=None,
    epochs=1,
    verbose=1,
    callbacks=None,
    validation_data=None,
    validation_steps=None,
    validation_freq=1,
    class_weight=None,
    shuffle=True,
    initial_epoch=0,
):
    """Train on batches from `generator`; returns the History callback."""
    history = cbks.History()
    cb_list = list(callbacks or []) + [history]
    if verbose:
        cb_list.append(cbks.ProgbarLogger())
    steps = (
        len(generator)
        if steps_per_epoch is None and isinstance(generator, Sequence)
        else steps_per_epoch
    )
    params = {
        "epochs": epochs,
        "steps": steps,
        "verbose": verbose,
        "do_validation": validation_data is not None,
        "samples": steps,
        "metrics": None,
    }
    cb = cbks.CallbackList(cb_list, model=model, **params)
    model.stop_training = False
    cb.on_train_begin({})
    for epoch in range(initial_epoch, epochs):
        model.reset_metrics()
        cb.on_epoch_begin(epoch, {})
        results = _run_batches(model, "train", generator, steps, shuffle, cb)
        logs = {k: float(v) for k, v in zip(model.metrics_names, results, strict=True)}
        if validation_data is not None and (epoch + 1) % validation_freq == 0:
            if isinstance(validation_data, tuple):
                val = model._test_loop(
                    model._inputs_of(validation_data[0]),
                    model._targets_of(validation_data[1]),
                    None,
                    32,
                )
            else:
                model.reset_metrics()
                val = _run_batches(model, "test", validation_data, validation_steps, False)
            for name, value in zip(model.metrics_names, val, strict=True):
                logs["val_" + name] = float(value)
        if isinstance(generator, Sequence):
            generator.on_epoch_end()
        cb.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    cb.on_train_end({})
    return history


def evaluate_generator(model, generator, steps=None, verbose=0):
    """The loss (and metrics) over `steps` batches of `generator`."""
    model.reset_metrics()
    results = [np.float32(r) for r in _run_batches(model, "test", generator, steps, False)]
    return results[0] if len(results) == 1 else results


def predict_generator(model, generator, steps=None, verbose=0):
    """The model's outputs for `steps` batches of inputs (or (x, y) pairs), concatenated."""
    batches, steps = _batches(generator, steps, False)
    parts = []
    for batch in batches:
        x = batch[0] if isinstance(batch, tuple) and len(batch) in (2, 3) else batch
        parts.append(model._run("predict", model._inputs_of(x)))
    outs = [np.concatenate([p[i] for p in parts]) for i in range(len(model.outputs))]
    return outs[0] if len(outs) == 1 else outs
