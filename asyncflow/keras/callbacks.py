"""`tf.keras.callbacks`: the Callback base, History (what `fit` returns), LambdaCallback,
EarlyStopping, LearningRateScheduler, ReduceLROnPlateau, ModelCheckpoint (weights only),
CSVLogger, TerminateOnNaN, BaseLogger, RemoteMonitor, and the console logger behind
`verbose` (TensorBoard is in callbacks_tensorboard.py).

`fit` calls, in order: on_train_begin, then per epoch on_epoch_begin, per batch
on_train_batch_begin/end (logs: batch, size, loss and metrics), on_epoch_end (logs:
the epoch's loss and metrics, then val_*), and finally on_train_end.
"""

from __future__ import annotations

import json
import logging
import os
import sys

import numpy as np

__all__ = [
    "Callback",
    "History",
    "LambdaCallback",
    "EarlyStopping",
    "LearningRateScheduler",
    "ModelCheckpoint",
    "TerminateOnNaN",
    "ReduceLROnPlateau",
    "CSVLogger",
    "BaseLogger",
    "RemoteMonitor",
    "CallbackList",
]


class Callback:
    """Base class: every hook does nothing; `model` and `params` are set by `fit`."""

    def __init__(self):
        self.model = None
        self.params = {}
        self.validation_data = None

    def set_params(self, params) -> None:
        self.params = params

    def set_model(self, model) -> None:
        self.model = model

    def on_epoch_begin(self, epoch, logs=None): ...
    def on_epoch_end(self, epoch, logs=None): ...
    def on_batch_begin(self, batch, logs=None): ...
    def on_batch_end(self, batch, logs=None): ...
    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def on_test_batch_begin(self, batch, logs=None): ...
    def on_test_batch_end(self, batch, logs=None): ...
    def on_predict_batch_begin(self, batch, logs=None): ...
    def on_predict_batch_end(self, batch, logs=None): ...
    def on_train_begin(self, logs=None): ...
    def on_train_end(self, logs=None): ...
    def on_test_begin(self, logs=None): ...
    def on_test_end(self, logs=None): ...
    def on_predict_begin(self, logs=None): ...
    def on_predict_end(self, logs=None): ...


class History(Callback):
    """Records each epoch's logs: `history[name]` is a list with one value per epoch."""

    def on_train_begin(self, logs=None):
        self.epoch = []
        self.history = {}

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)
        if self.model is not None:
            self.model.history = self


class LambdaCallback(Callback):
    """A callback from plain functions (on_epoch_begin(epoch, logs), on_batch_end(batch,
    logs), on_train_begin(logs), ...)."""

    def __init__(
        self,
        on_epoch_begin=None,
        on_epoch_end=None,
        on_batch_begin=None,
        on_batch_end=None,
        on_train_begin=None,
        on_train_end=None,
        **kwargs,
    ):
        super().__init__()
        noop2 = lambda a, logs=None: None  # noqa: E731
        noop1 = lambda logs=None: None  # noqa: E731
        self.on_epoch_begin = on_epoch_begin or noop2
        self.on_epoch_end = on_epoch_end or noop2
        self.on_batch_begin = on_batch_begin or noop2
        self.on_batch_end = on_batch_end or noop2
        self.on_train_begin = on_train_begin or noop1
        self.on_train_end = on_train_end or noop1
        for k, v in kwargs.items():
            setattr(self, k, v)


class EarlyStopping(Callback):
    """Stops training when `monitor` has not improved by `min_delta` for `patience`
    epochs (mode 'auto': 'max' for accuracies, else 'min')."""

    def __init__(
        self,
        monitor="val_loss",
        min_delta=0,
        patience=0,
        verbose=0,
        mode="auto",
        baseline=None,
        restore_best_weights=False,
        start_from_epoch=0,
    ):
        super().__init__()
        self.monitor, self.patience, self.verbose = monitor, patience, verbose
        self.baseline, self.restore_best_weights = baseline, restore_best_weights
        self.start_from_epoch = start_from_epoch
        self.min_delta = abs(min_delta)
        if mode not in ("auto", "min", "max"):
            mode = "auto"
        if mode == "max" or (
            mode == "auto" and ("acc" in monitor or monitor.startswith("fmeasure"))
        ):
            self.monitor_op = np.greater
        else:
            self.monitor_op = np.less
        if self.monitor_op is np.less:
            self.min_delta *= -1
        self.stopped_epoch = 0

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = np.inf if self.monitor_op is np.less else -np.inf
        self.best_weights = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        current = (logs or {}).get(self.monitor)
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = self.model.get_weights()
        self.wait += 1
        if self.monitor_op(current - self.min_delta, self.best):
            self.best, self.best_epoch = current, epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self.monitor_op(current - self.min_delta, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            if self.restore_best_weights and self.best_weights is not None:
                self.model.set_weights(self.best_weights)

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")


class ProgbarLogger(Callback):
    """The console output of `fit(verbose=1|2)`: Keras' epoch lines with the epoch's
    loss and metrics (timings are not printed); the verbosity comes with the params
    `fit` sets, as Keras'.

    Raises:
      ValueError: a count_mode other than "samples" or "steps".
    """

    def __init__(self, count_mode: str = "samples", stateful_metrics=None):
        super().__init__()
        if count_mode not in ("samples", "steps"):
            raise ValueError(
                f'Unknown `count_mode`: {count_mode}. Expected values are ["samples", "steps"]'
            )
        self.use_steps = count_mode == "steps"
        self.stateful_metrics = set(stateful_metrics) if stateful_metrics else set()
        self.verbose = 1

    def set_params(self, params):
        super().set_params(params)
        self.verbose = params.get("verbose", 1)

    def on_epoch_begin(self, epoch, logs=None):
        if self.verbose == 1:
            print(f"Epoch {epoch + 1}/{self.params['epochs']}")

    def on_epoch_end(self, epoch, logs=None):
        n = self.params["samples"]
        values = " - ".join(f"{k}: {_fmt(v)}" for k, v in (logs or {}).items())
        if self.verbose == 1:
            print(f"{n}/{n} [==============================] - {values}")
        else:
            print(f"{n}/{n} - {values}")
        sys.stdout.flush()


def _fmt(value) -> str:
    return f"{value:.4f}" if abs(value) > 1e-3 else f"{value:.4e}"


class CallbackList:
    """Calls each hook on every callback in order (Keras' container: `add_history` /
    `add_progbar` add those callbacks when the list has none; `model` and the
    keyword `params` are given to every callback)."""

    def __init__(self, callbacks=None, add_history=False, add_progbar=False, model=None,
                 **params):  # fmt: skip
        self.callbacks = list(callbacks or [])
        if add_history and not any(isinstance(c, History) for c in self.callbacks):
            self.callbacks.append(History())
        if add_progbar and not any(isinstance(c, ProgbarLogger) for c in self.callbacks):
            self.callbacks.append(ProgbarLogger(count_mode="steps"))
        self.model = None
        self.params = {}
        if model is not None:
            self.set_model(model)
        if params:
            self.set_params(params)

    def append(self, callback):
        self.callbacks.append(callback)

    def set_model(self, model):
        self.model = model
        for cb in self.callbacks:
            cb.set_model(model)

    def set_params(self, params):
        self.params = params
        for cb in self.callbacks:
            cb.set_params(params)

    def __iter__(self):
        return iter(self.callbacks)

    def __getattr__(self, hook):
        if not hook.startswith("on_"):
            raise AttributeError(hook)

        # on_train_begin(logs), ...; on_epoch_begin(epoch, logs), on_batch_end(batch, logs)
        indexed = (
            0 if hook.split("_")[1] in ("train", "test", "predict") and hook.count("_") == 2 else 1
        )

        def call(*args, logs=None):
            if len(args) > indexed:  # (the logs given positionally)
                args, logs = args[:indexed], args[indexed]
            for cb in self.callbacks:
                getattr(cb, hook)(*args, logs=logs)

        return call


class LearningRateScheduler(Callback):
    """Sets the optimizer's learning rate to `schedule(epoch, lr)` (or `schedule(epoch)`)
    when each epoch begins.

    Raises:
      ValueError: the schedule returned something other than a float.
    """

    def __init__(self, schedule, verbose=0):
        super().__init__()
        self.schedule, self.verbose = schedule, verbose

    def on_epoch_begin(self, epoch, logs=None):
        from asyncflow.keras import backend

        lr_var = self.model.optimizer.lr
        try:
            lr = self.schedule(epoch, float(backend.get_value(lr_var)))
        except TypeError:  # a schedule of the epoch only
            lr = self.schedule(epoch)
        if not isinstance(lr, (float, int, np.floating, np.integer)):
            raise ValueError(f'The output of the "schedule" function should be float. Got: {lr}')
        backend.set_value(lr_var, float(lr))
        if self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: LearningRateScheduler setting learning rate to {lr}.")

    def on_epoch_end(self, epoch, logs=None):
        from asyncflow.keras import backend

        if logs is not None:
            logs["lr"] = backend.get_value(self.model.optimizer.lr)


class ModelCheckpoint(Callback):
    """Saves the model after each epoch, or only when `monitor` improves
    (`save_best_only`): its weights (`save_weights`: HDF5 for a .h5 path, Keras' v3
    weights file for .weights.h5, else a TF checkpoint) or, by default, the whole model
    (`model.save`: HDF5, a .keras archive or a Keras SavedModel directory);
    `filepath` may hold `{epoch:02d}` and log fields such as `{val_loss:.2f}`.
    """

    def __init__(
        self,
        filepath,
        monitor="val_loss",
        verbose=0,
        save_best_only=False,
        save_weights_only=False,
        mode="auto",
        save_freq="epoch",
        period=1,
        **kwargs,
    ):
        super().__init__()
        self.save_weights_only = save_weights_only
        self.filepath, self.monitor, self.verbose = str(filepath), monitor, verbose
        self.save_best_only, self.period = save_best_only, period
        if mode == "max" or (
            mode == "auto" and ("acc" in monitor or monitor.startswith("fmeasure"))
        ):
            self.monitor_op, self.best = np.greater, -np.inf
        else:
            self.monitor_op, self.best = np.less, np.inf
        self._since_last = 0

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self._since_last += 1
        if self._since_last < self.period:
            return
        self._since_last = 0
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_best_only:
            current = logs.get(self.monitor)
            if current is None or not self.monitor_op(current, self.best):
                return
            if self.verbose > 0:
                print(
                    f"\nEpoch {epoch + 1}: {self.monitor} improved from {self.best:.5f} to "
                    f"{current:.5f}, saving model to {path}"
                )
            self.best = current
        elif self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: saving model to {path}")
        if os.path.dirname(path):  # Keras makes the directory of every save
            os.makedirs(os.path.dirname(path), exist_ok=True)
        if self.save_weights_only:
            self.model.save_weights(path)
        else:
            self.model.save(path)


class TerminateOnNaN(Callback):
    """Stops training when a batch loss is NaN or infinite."""

    def on_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not np.isfinite(loss):
            print(f"Batch {batch}: Invalid loss, terminating training")
            self.model.stop_training = True


class ReduceLROnPlateau(Callback):
    """Multiplies the learning rate by `factor` when `monitor` has not improved by
    `min_delta` for `patience` epochs (then waits `cooldown` epochs), never below
    `min_lr`; records the rate in the logs as "lr".

    Raises:
      ValueError: factor >= 1.
    """

    def __init__(
        self,
        monitor="val_loss",
        factor=0.1,
        patience=10,
        verbose=0,
        mode="auto",
        min_delta=1e-4,
        cooldown=0,
        min_lr=0,
        **kwargs,
    ):
        super().__init__()
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau does not support a factor >= 1.0. Got {factor}")
        self.monitor, self.factor, self.patience, self.verbose = monitor, factor, patience, verbose
        self.min_delta, self.cooldown, self.min_lr = min_delta, cooldown, min_lr
        self.mode = mode if mode in ("auto", "min", "max") else "auto"
        self._reset()

    def _reset(self) -> None:
        if self.mode == "min" or (self.mode == "auto" and "acc" not in self.monitor):
            self.monitor_op = lambda a, b: np.less(a, b - self.min_delta)
            self.best = np.inf
        else:
            self.monitor_op = lambda a, b: np.greater(a, b + self.min_delta)
            self.best = -np.inf
        self.cooldown_counter = 0
        self.wait = 0

    def on_train_begin(self, logs=None):
        self._reset()

    def on_epoch_end(self, epoch, logs=None):
        from asyncflow.keras import backend

        logs = logs if logs is not None else {}
        logs["lr"] = backend.get_value(self.model.optimizer.lr)
        current = logs.get(self.monitor)
        if current is None:
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self.monitor_op(current, self.best):
            self.best = current
            self.wait = 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience:
                old_lr = backend.get_value(self.model.optimizer.lr)
                if old_lr > np.float32(self.min_lr):
                    new_lr = max(old_lr * self.factor, self.min_lr)
                    backend.set_value(self.model.optimizer.lr, new_lr)
                    if self.verbose > 0:
                        print(
                            f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate "
                            f"to {new_lr}."
                        )
                    self.cooldown_counter = self.cooldown
                    self.wait = 0


class CSVLogger(Callback):
    """Writes each epoch's logs to a CSV file: a header "epoch,<sorted keys>", then one
    row per epoch."""

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        self.filename, self.sep, self.append = str(filename), separator, append
        self._file, self.keys = None, None

    def on_train_begin(self, logs=None):
        import os

        self._header = not (
            self.append and os.path.exists(self.filename) and os.path.getsize(self.filename) > 0
        )
        self._file = open(self.filename, "a" if self.append else "w")  # noqa: SIM115

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.keys is None:
            self.keys = sorted(logs)
            # Keras reserves val_ columns ("NA") when the first epoch had none.
            if not any(k.startswith("val_") for k in self.keys):
                self.keys += ["val_" + k for k in self.keys]
        if self._header:
            self._file.write(self.sep.join(["epoch"] + self.keys) + "\n")
            self._header = False
        values = [str(epoch)] + [str(logs.get(k, "NA")) for k in self.keys]
        self._file.write(self.sep.join(values) + "\n")
        self._file.flush()

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
            self._file = None


class BaseLogger(Callback):
    """Replaces the epoch logs of the model's metrics by their sample-weighted average over
    the epoch's batches (those in `stateful_metrics`, by their last batch value). `fit`
    sets `stateful_metrics` to the model's metric names other than the loss, as TF does.
    """

    def __init__(self, stateful_metrics=None):
        super().__init__()
        self.stateful_metrics = set(stateful_metrics or [])

    def on_epoch_begin(self, epoch, logs=None):
        self.seen = 0
        self.totals = {}

    def on_batch_end(self, batch, logs=None):
        logs = logs or {}
        size = logs.get("size", 0)
        self.seen += size * logs.get("num_steps", 1)
        # Every log is totalled, batch and size included (TF's totals hold them too).
        for key, value in logs.items():
            if key in self.stateful_metrics:
                self.totals[key] = value
            else:
                self.totals[key] = self.totals.get(key, 0) + value * size

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        for key in self.params["metrics"]:
            if key in self.totals:
                stateful = key in self.stateful_metrics
                logs[key] = self.totals[key] if stateful else self.totals[key] / self.seen


class RemoteMonitor(Callback):
    """POSTs each epoch's logs (and `epoch`) to `root + path`: as JSON when `send_as_json`,
    else as a form whose `field` holds the JSON text. An unreachable server only logs a
    warning.

    Raises:
      ImportError (on_epoch_end): the `requests` package is not installed.
    """

    def __init__(
        self,
        root="http://localhost:9000",
        path="/publish/epoch/end/",
        field="data",
        headers=None,
        send_as_json=False,
    ):
        super().__init__()
        self.root = root
        self.path = path
        self.field = field
        self.headers = headers
        self.send_as_json = send_as_json

    def on_epoch_end(self, epoch, logs=None):
        try:
            import requests
        except ImportError:
            raise ImportError("RemoteMonitor requires the `requests` library.") from None
        send = {"epoch": epoch}
        for key, value in (logs or {}).items():
            send[key] = value.item() if isinstance(value, (np.ndarray, np.generic)) else value
        url = self.root + self.path
        try:
            if self.send_as_json:
                requests.post(url, json=send, headers=self.headers)
            else:
                requests.post(url, {self.field: json.dumps(send)}, headers=self.headers)
        except requests.exceptions.RequestException:
            logging.getLogger("asyncflow").warning(
                "Warning: could not reach RemoteMonitor root server at %s", self.root
            )
