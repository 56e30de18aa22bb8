"""Keras' `Model` (functional) and `Sequential` with TF1 graph-mode training:
`compile` builds the loss, metric and target tensors; `fit`, `evaluate`, `predict` and
the `*_on_batch` calls feed numpy batches to functions run in Keras' session.

As in TF1's Keras (training_v1 with arrays):
- the training function's updates (optimizer step, then the layers' own updates such
  as batch-norm moving averages) run after its loss and metrics are computed, under
  name scope "training/<Optimizer>";
- the learning phase is fed True for training and left False otherwise;
- an epoch's loss is the batch losses' mean weighted by batch size, its metrics the
  running means after its last batch; metrics reset when each epoch (and each
  evaluate) starts and after each train/test_on_batch;
- `shuffle=True` shuffles sample indices with NumPy's global generator each epoch.
"""

from __future__ import annotations

import os

import numpy as np

from asyncflow import graph as ops
from asyncflow import nest
from asyncflow.keras import (
    backend,
    layer_configs,
    model_config,
    optimizers,
    saving_api,
    saving_hdf5,
    saving_v3,
    training_generator,
)
from asyncflow.keras import callbacks as cbks
from asyncflow.keras import losses as losses_mod
from asyncflow.keras import metrics as metrics_mod
from asyncflow.keras.engine import Input, InputLayer, keras_history
from asyncflow.keras.network import Network
from asyncflow.keras.training_generator import sample_weights as _sample_weights
from asyncflow.ops import array_ops, cast_ops, math_ops, reduction_ops

__all__ = ["Model", "Sequential"]


class Model(Network):
    """`tf.keras.Model(inputs, outputs, name=None)`: a trainable graph network.

    Raises:
      ValueError: (construction) outputs not reachable from the inputs.
    """

    def __new__(cls, *args, **kwargs):
        # As Keras: `Model(inputs, outputs)` itself makes a Functional model.
        if cls is Model and _functional_arguments(args, kwargs):
            cls = Functional
        return super().__new__(cls)

    def __init__(self, *args, **kwargs):
        inputs = kwargs.pop("inputs", args[0] if len(args) > 0 else None)
        outputs = kwargs.pop("outputs", args[1] if len(args) > 1 else None)
        if inputs is not None and outputs is not None and not isinstance(self, Functional):
            _make_functional(type(self))
        if type(self) is Functional and kwargs.get("name") is None:
            kwargs["name"] = backend.unique_object_name("model")  # (Keras' default name)
        super().__init__(inputs, outputs, **kwargs)
        self.optimizer = None
        self.loss = None
        self.stop_training = False
        self.history = None
        self._compiled = False
        self._compile_args = None
        self._compile_kwargs = None
        self._fns: dict = {}

    # -- compile --------------------------------------------------------------------------------

    def compile(
        self,
        optimizer="rmsprop",
        loss=None,
        metrics=None,
        loss_weights=None,
        sample_weight_mode=None,
        weighted_metrics=None,
        target_tensors=None,
        **kwargs,
    ):
        """Set the optimizer, loss(es) and metrics, and build the training graph (at once
        if the model is built, else when it is).

        Raises:
          ValueError: an unknown optimizer, loss or metric, or a loss dict/list that does
            not match the outputs.
        """
        self.optimizer = optimizers.get(optimizer)
        self.loss = loss
        self._compile_args = (loss, metrics, loss_weights)
        # (as given: what model.save() writes as the training config)
        self._compile_kwargs = dict(
            loss=loss,
            metrics=metrics,
            loss_weights=loss_weights,
            sample_weight_mode=sample_weight_mode,
            weighted_metrics=weighted_metrics,
        )
        self._target_tensors = target_tensors
        self._fns = {}
        if self.built and self.outputs:
            self._compile_graph()

    def _per_output(self, value, what):
        names = self.output_names
        if isinstance(value, dict):
            for k in value:
                if k not in names:
                    raise ValueError(
                        f"Unknown entries in {what} dictionary: ['{k}']. Only expected "
                        f"following keys: {names}"
                    )
            return [value.get(n) for n in names]
        if isinstance(value, (list, tuple)) and what != "metrics":
            if len(value) != len(names):
                raise ValueError(
                    f"When passing a list as {what}, it should have one entry per model "
                    f"outputs. The model has {len(names)} outputs, but you passed "
                    f"{what}={value}"
                )
            return list(value)
        return [value] * len(names)

    def _compile_graph(self) -> None:
        loss, metrics, loss_weights = self._compile_args
        names = self.output_names
        loss_fns = [losses_mod.get(x) for x in self._per_output(loss, "loss")]
        if loss_weights is None:
            weights = [1.0] * len(names)
        else:
            weights = [1.0 if w is None else w for w in self._per_output(loss_weights, "loss")]
        if isinstance(metrics, dict):
            per_metrics = [_as_list(metrics.get(n)) for n in names]
        else:
            per_metrics = [_as_list(metrics)] * len(names)
        self._targets, self._sample_weights, output_losses = [], [], []
        given = getattr(self, "_target_tensors", None)
        if given is not None:
            given = self._per_output(given, "target_tensors")
        for i, (out, name, fn) in enumerate(zip(self.outputs, names, loss_fns, strict=True)):
            if fn is None:
                self._targets.append(None)
                self._sample_weights.append(None)
                continue
            rank = out.shape.ndims
            if given is not None and given[i] is not None:
                # Targets given as tensors (an Estimator's labels): nothing to feed, and
                # every sample weighs one.
                target = given[i]
                weight = array_ops.ones(array_ops.shape(target)[:1], dtype=out.dtype.base_dtype)
            else:
                target = weight = None
            with ops.name_scope(""):
                if target is None:
                    target = array_ops.placeholder(
                        out.dtype.base_dtype,
                        shape=None if rank is None else (None,) * rank,
                        name=name + "_target",
                    )
                    weight = array_ops.placeholder(
                        out.dtype.base_dtype, shape=(None,), name=name + "_sample_weights"
                    )
            self._targets.append(target)
            self._sample_weights.append(weight)
            mask = getattr(out, "_keras_mask", None)
            with ops.name_scope("loss"), ops.name_scope(name + "_loss"):
                if mask is not None:
                    output_losses.append(_masked_loss(fn, target, out, weight, mask))
                elif isinstance(fn, losses_mod.Loss):
                    output_losses.append(fn(target, out, sample_weight=weight))
                else:
                    output_losses.append(losses_mod.reduce_weighted(fn(target, out), weight))
        self.loss_functions = loss_fns
        with ops.name_scope("loss"):
            total = None
            for w, value in zip(weights, output_losses, strict=False):
                total = w * value if total is None else total + w * value
            if total is None:
                raise ValueError(
                    "The model cannot be compiled because it has no loss to optimize."
                )
            if self.losses:
                total = total + math_ops.add_n(list(self.losses))
        self.total_loss = total
        self.metrics_names = ["loss"]
        if len(names) > 1:
            self.metrics_names += [n + "_loss" for n, f in zip(names, loss_fns, strict=True) if f]
        self._metrics, self._metric_tensors = [], []
        with ops.name_scope("metrics"):
            if len(names) > 1:
                # Each output's loss is reported as a running mean over batches (Keras'
                # stateful `Mean`), not weighted by batch size as the total loss is.
                for name, value in zip(names, output_losses, strict=False):
                    metric = metrics_mod.MeanMetricWrapper(_identity, name=name + "_loss")
                    metric._loss_tracker = True  # (not the user's: not saved in keras_api)
                    self._metrics.append(metric)
                    self._metric_tensors.append(metric.update_batch_mean(value))
            for i, (out, name) in enumerate(zip(self.outputs, names, strict=True)):
                # Metrics weigh each step by the output's mask, as Keras does.
                mask = getattr(out, "_keras_mask", None)
                mask = None if mask is None else cast_ops.cast(mask, out.dtype.base_dtype)
                for m in per_metrics[i]:
                    m = metrics_mod.class_instance(m) or m
                    if isinstance(m, metrics_mod.Metric):
                        # A metric object keeps its own state and name.
                        full = m.name if len(names) == 1 else f"{name}_{m.name}"
                        self._add_metric(full, m, m(self._targets[i], out, mask))
                        continue
                    fn, label = _metric_fn(m, loss_fns[i], out)
                    full = label if len(names) == 1 else f"{name}_{label}"
                    metric = metrics_mod.MeanMetricWrapper(fn, name=full)
                    self._add_metric(full, metric, metric(self._targets[i], out, mask))
        self._collected_trainable_weights = self.trainable_weights
        self._compiled = True

    def _add_metric(self, name, metric, tensor) -> None:
        # TF reports one metric per name: the place of the first, the value of the last.
        if name in self.metrics_names[1:]:
            at = self.metrics_names.index(name, 1) - 1  # metrics_names[0] is the loss
            self._metrics[at], self._metric_tensors[at] = metric, tensor
            return
        self._metrics.append(metric)
        self._metric_tensors.append(tensor)
        self.metrics_names.append(name)

    def _ensure_compiled(self) -> None:
        if self.optimizer is None:
            raise RuntimeError(
                "You must compile your model before training/testing. "
                "Use `model.compile(optimizer, loss)`."
            )
        if not self._compiled:
            self._compile_graph()

    @property
    def state_updates(self) -> list:
        """The updates of the stateful layers (their states carried to the next batch),
        which predicting and evaluating run too."""
        return [u for layer in self.layers if getattr(layer, "stateful", False)
                for u in layer.updates]  # fmt: skip

    def reset_states(self) -> None:
        """Reset the states of every stateful layer."""
        for layer in self.layers:
            if getattr(layer, "stateful", False) and hasattr(layer, "reset_states"):
                layer.reset_states()

    @property
    def metrics(self) -> list:
        return list(getattr(self, "_metrics", []))

    def reset_metrics(self) -> None:
        if getattr(self, "_metrics", None):
            backend.get_session().run([op for m in self._metrics for op in m.reset_ops()])

    # -- functions ------------------------------------------------------------------------------

    def _function(self, mode):
        if mode in self._fns:
            return self._fns[mode]
        # The learning phase is the last feed (a fixed 0/1 phase is not fed).
        phase = [backend.learning_phase()]
        if mode == "predict":
            fn = backend.function(self.inputs + phase, self.outputs, updates=self.state_updates)
        else:
            self._ensure_compiled()
            feeds = self.inputs + [t for t in self._targets if t is not None]
            feeds += [w for w in self._sample_weights if w is not None]
            outputs = [self.total_loss] + self._metric_tensors
            updates = None
            if mode == "train":
                updates = self._training_updates()
            else:
                updates = self.state_updates
            fn = backend.function(feeds + phase, outputs, updates=updates)
        self._fns[mode] = fn
        return fn

    def _training_updates(self) -> list:
        """The train function's updates: the optimizer's, then the layers' own."""
        with ops.name_scope("training"):
            with ops.name_scope(type(self.optimizer).__name__):
                updates = self.optimizer.get_updates(
                    loss=self.total_loss, params=self._collected_trainable_weights
                )
        # Only the layers' updates made from this model's inputs (or from none): a nested
        # model's updates on its own Input placeholder are not run, as Keras does.
        return updates + self.get_updates_for(None) + self.get_updates_for(self.inputs)

    def _run(self, mode, inputs, targets=None, weights=None):
        fn = self._function(mode)
        feed = list(inputs)
        if mode != "predict":
            n = len(inputs[0]) if inputs else len(targets[0])
            feed += [t for t, p in zip(targets, self._targets, strict=True) if p is not None]
            for w, p in zip(
                weights or [None] * len(self._targets), self._sample_weights, strict=True
            ):
                if p is not None:
                    feed.append(np.ones(n, np.float32) if w is None else w)
        return fn(feed + [mode == "train"])

    # -- data -----------------------------------------------------------------------------------

    def _standardize(self, data, refs, names, what):
        if data is None:
            return None
        if isinstance(data, dict):
            try:
                arrays = [data[n] for n in names]
            except KeyError as e:
                raise ValueError(
                    f'No data provided for "{e.args[0]}". Need data for each key in: {names}'
                ) from None
        elif isinstance(data, (list, tuple)):
            # TF's reading of a list: one array per input ([x] for one input too), a
            # list of lists one list per input, a flat list of numbers one input's data
            if data and isinstance(data[0], (list, tuple)):
                arrays = [np.asarray(d) for d in data]
            elif len(refs) == 1 and data and isinstance(data[0], (float, int, np.number)):
                arrays = [np.asarray(data)]
            else:
                arrays = list(data)
        else:
            arrays = [data]
        if len(arrays) != len(refs):
            raise ValueError(
                f"Error when checking model {what}: the list of Numpy arrays that you are "
                f"passing to your model is not the size the model expected. Expected to see "
                f"{len(refs)} array(s), but instead got {len(arrays)} arrays."
            )
        out = []
        for a in arrays:
            a = np.asarray(a)
            if a.ndim == 1:
                a = np.expand_dims(a, 1)
            out.append(a)
        return out

    def _build_from(self, x) -> None:
        """A subclassed model is built by calling it on placeholders shaped like the
        first data ("input_1", ...; outputs "output_1", ...), as Keras does."""
        if self._is_graph_network or self.outputs:
            return
        arrays = list(x) if isinstance(x, (list, tuple)) else [x]
        with ops.name_scope(""):
            placeholders = []
            for i, a in enumerate(arrays):
                a = np.asarray(a)
                a = a[:, None] if a.ndim == 1 else a
                dtype = backend.floatx() if a.dtype.kind == "f" else a.dtype.name
                placeholders.append(array_ops.placeholder(
                    dtype, shape=(None,) + a.shape[1:], name=f"input_{i + 1}"))  # fmt: skip
        outputs = self(placeholders[0] if len(placeholders) == 1 else placeholders)
        self.inputs, self.outputs = placeholders, list(nest.flatten(outputs))
        self.built = True
        if not self._compiled and self._compile_args is not None:
            self._compile_graph()

    def _inputs_of(self, x):
        self._build_from(x)
        return self._standardize(x, self.inputs, self.input_names, "input")

    def _targets_of(self, y):
        return self._standardize(y, self.outputs, self.output_names, "target")

    # -- training -------------------------------------------------------------------------------

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        epochs=1,
        verbose=1,
        callbacks=None,
        validation_split=0.0,
        validation_data=None,
        shuffle=True,
        class_weight=None,
        sample_weight=None,
        initial_epoch=0,
        steps_per_epoch=None,
        validation_steps=None,
        validation_freq=1,
        **kwargs,
    ):
        """Train for `epochs` epochs on numpy arrays; returns the History callback.

        Raises:
          RuntimeError: the model was not compiled.
          ValueError: inputs and targets with different numbers of samples, or data that
            does not match the model's inputs/outputs.
        """
        if training_generator.is_batch_source(x):
            return self.fit_generator(
                x, steps_per_epoch=steps_per_epoch, epochs=epochs, verbose=verbose,
                callbacks=callbacks, validation_data=validation_data,
                validation_steps=validation_steps, validation_freq=validation_freq,
                class_weight=class_weight, shuffle=shuffle, initial_epoch=initial_epoch,
            )  # fmt: skip
        xs = self._inputs_of(x)
        self._ensure_compiled()
        ys = self._targets_of(y)
        sws = _sample_weights(ys, sample_weight, class_weight)
        _check_counts(xs, ys)
        val = None
        if validation_data is not None:
            vx, vy = validation_data[0], validation_data[1]
            val = (self._inputs_of(vx), self._targets_of(vy))
        elif validation_split and 0 < validation_split < 1:
            split = int(len(xs[0]) * (1.0 - validation_split))
            val = ([a[split:] for a in xs], [a[split:] for a in ys])
            xs, ys = [a[:split] for a in xs], [a[:split] for a in ys]
            sws = None if sws is None else [w[:split] for w in sws]
        batch_size = batch_size or 32
        n = len(xs[0])
        history = cbks.History()
        cb_list = list(callbacks or []) + [history]
        if verbose:
            cb_list.append(cbks.ProgbarLogger())
            print(
                f"Train on {n} samples"
                + (f", validate on {len(val[0][0])} samples" if val else "")
            )
        params = {
            "batch_size": batch_size,
            "epochs": epochs,
            "steps": None,
            "samples": n,
            "verbose": verbose,
            "do_validation": val is not None,
            "metrics": list(self.metrics_names),
        }
        for c in cb_list:
            if isinstance(c, cbks.BaseLogger):
                c.stateful_metrics = list(self.metrics_names[1:])
        cb = cbks.CallbackList(cb_list, model=self, **params)
        self.stop_training = False
        self._function("train")
        cb.on_train_begin({})
        for epoch in range(initial_epoch, epochs):
            self.reset_metrics()
            cb.on_epoch_begin(epoch, {})
            index = np.arange(n)
            if shuffle:
                np.random.shuffle(index)
            logs = self._epoch(xs, ys, sws, index, batch_size, cb)
            if val is not None and (epoch + 1) % validation_freq == 0:
                # TF's fit validates on shuffled batches whatever `shuffle` says: the same
                # mean, but it draws from np.random (later epochs' order depends on it) and
                # batch-wise callbacks (TensorBoard's histograms) see those batches.
                results = self._test_loop(val[0], val[1], None, batch_size, shuffle=True)
                for name, value in zip(self.metrics_names, results, strict=True):
                    logs["val_" + name] = _log_value(value)
            cb.on_epoch_end(epoch, logs)
            if self.stop_training:
                break
        cb.on_train_end({})
        return history

    def _epoch(self, xs, ys, sws, index, batch_size, cb) -> dict:
        totals = None
        n = len(index)
        for b, start in enumerate(range(0, n, batch_size)):
            ids = index[start : start + batch_size]
            cb.on_train_batch_begin(b, {"batch": b, "size": len(ids)})
            outs = self._run(
                "train",
                [a[ids] for a in xs],
                [a[ids] for a in ys],
                None if sws is None else [w[ids] for w in sws],
            )
            totals = _aggregate(totals, outs, len(ids), self._n_losses())
            batch_logs = {"batch": b, "size": len(ids)}
            named = zip(self.metrics_names, outs, strict=True)
            batch_logs.update((k, _log_value(v)) for k, v in named)
            cb.on_train_batch_end(b, batch_logs)
        results = _finalize(totals, n, self._n_losses())
        return {k: _log_value(v) for k, v in zip(self.metrics_names, results, strict=True)}

    def _n_losses(self) -> int:
        return 1

    def _test_loop(self, xs, ys, sws, batch_size, shuffle=False) -> list:
        self.reset_metrics()
        totals = None
        n = len(xs[0])
        index = np.arange(n)
        if shuffle:
            np.random.shuffle(index)
        for start in range(0, n, batch_size):
            ids = index[start : start + batch_size]
            outs = self._run(
                "test",
                [a[ids] for a in xs],
                [a[ids] for a in ys],
                None if sws is None else [w[ids] for w in sws],
            )
            totals = _aggregate(totals, outs, len(ids), self._n_losses())
        return _finalize(totals, n, self._n_losses())

    def evaluate(
        self,
        x=None,
        y=None,
        batch_size=None,
        verbose=1,
        sample_weight=None,
        steps=None,
        callbacks=None,
        **kwargs,
    ):
        """The loss (and metrics) on numpy arrays: a scalar, or a list in metrics_names order.

        Raises:
          RuntimeError: the model was not compiled.
        """
        if training_generator.is_batch_source(x):
            return self.evaluate_generator(x, steps=steps)
        xs = self._inputs_of(x)
        self._ensure_compiled()
        ys = self._targets_of(y)
        _check_counts(xs, ys)
        sws = _sample_weights(ys, sample_weight, None)
        results = [np.float32(r) for r in self._test_loop(xs, ys, sws, batch_size or 32)]
        return results[0] if len(results) == 1 else results

    def predict(self, x, batch_size=None, verbose=0, steps=None, callbacks=None, **kwargs):
        """The model's outputs for numpy inputs, batch by batch, concatenated."""
        if training_generator.is_batch_source(x):
            return self.predict_generator(x, steps=steps)
        xs = self._inputs_of(x)
        batch_size = batch_size or 32
        parts = []
        for start in range(0, len(xs[0]), batch_size):
            parts.append(self._run("predict", [a[start : start + batch_size] for a in xs]))
        outs = [np.concatenate([p[i] for p in parts]) for i in range(len(self.outputs))]
        return outs[0] if len(outs) == 1 else outs

    def _on_batch(self, mode, x, y, sample_weight, reset_metrics, class_weight=None):
        xs = self._inputs_of(x)
        self._ensure_compiled()
        ys = self._targets_of(y)
        outs = self._run(mode, xs, ys, _sample_weights(ys, sample_weight, class_weight))
        if reset_metrics:
            self.reset_metrics()
        return outs[0] if len(outs) == 1 else outs

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, reset_metrics=True):
        """One training step on one batch; returns the loss (and metrics)."""
        return self._on_batch("train", x, y, sample_weight, reset_metrics, class_weight)

    def test_on_batch(self, x, y=None, sample_weight=None, reset_metrics=True):
        """The loss (and metrics) on one batch, without training."""
        return self._on_batch("test", x, y, sample_weight, reset_metrics)

    def predict_on_batch(self, x):
        """The model's outputs for one batch."""
        outs = self._run("predict", self._inputs_of(x))
        return outs[0] if len(outs) == 1 else outs

    def fit_generator(self, generator, steps_per_epoch=None, epochs=1, verbose=1,
                      callbacks=None, validation_data=None, validation_steps=None,
                      validation_freq=1, class_weight=None, max_queue_size=10, workers=1,
                      use_multiprocessing=False, shuffle=True, initial_epoch=0):  # fmt: skip
        """Train on batches from a generator or `keras.utils.Sequence` (see
        training_generator); returns the History callback."""
        return training_generator.fit_generator(
            self, generator, steps_per_epoch=steps_per_epoch, epochs=epochs, verbose=verbose,
            callbacks=callbacks, validation_data=validation_data,
            validation_steps=validation_steps, validation_freq=validation_freq,
            class_weight=class_weight, shuffle=shuffle, initial_epoch=initial_epoch,
        )  # fmt: skip

    def evaluate_generator(self, generator, steps=None, callbacks=None, max_queue_size=10,
                           workers=1, use_multiprocessing=False, verbose=0):  # fmt: skip
        """The loss (and metrics) over batches from a generator or Sequence."""
        return training_generator.evaluate_generator(self, generator, steps=steps)

    def predict_generator(self, generator, steps=None, callbacks=None, max_queue_size=10,
                          workers=1, use_multiprocessing=False, verbose=0):  # fmt: skip
        """The outputs for batches from a generator or Sequence, concatenated."""
        return training_generator.predict_generator(self, generator, steps=steps)

    # -- weights --------------------------------------------------------------------------------

    @property
    def weights(self) -> list:
        out, seen = [], set()
        # A subclassed model's own add_weight variables come after its layers', as TF's.
        owned = list(self._trainable_weights) + list(self._non_trainable_weights)
        for w in [w for layer in self.layers for w in layer.weights] + owned:
            if id(w) not in seen:
                seen.add(id(w))
                out.append(w)
        return out

    # -- configs --------------------------------------------------------------------------------

    def get_config(self) -> dict:
        """The functional config (layers with their inbound nodes, input_layers,
        output_layers), as TF's Keras writes it.

        Raises:
          NotImplementedError: a subclassed model (no layer graph to describe).
        """
        if not self._is_graph_network:
            raise NotImplementedError(
                "Model.get_config: a subclassed model has no layer graph to serialize; "
                "save its weights instead (save_weights)"
            )
        return model_config.network_config(self)

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """A model rebuilt (new layers, new weights) from `get_config()`'s dict.

        Raises:
          ValueError: an unknown layer class or an inconsistent config.
        """
        inputs, outputs = model_config.reconstruct(config, custom_objects)
        model = cls(inputs=inputs, outputs=outputs, name=config.get("name"))
        if not config.get("trainable", True):
            model.trainable = False
        return model

    def to_json(self, **kwargs) -> str:
        """The model's class and config as JSON (`json.dumps` keyword arguments pass)."""
        return model_config.model_to_json(self, **kwargs)

    def _trackable_children(self) -> list:
        """Keras' checkpoint dependencies: "layer_with_weights-<k>" for each layer that
        has weights, in layer order."""
        with_weights = [layer for layer in self.layers if layer.weights]
        return [(f"layer_with_weights-{k}", layer) for k, layer in enumerate(with_weights)]

    def _legacy_trackable_children(self) -> list:
        """Nothing: a model's checkpoint children have not changed."""
        return []

    def save(self, filepath, overwrite=True, save_format=None, **kwargs) -> None:
        """Save the whole model (config, weights, training config, optimizer state) as
        Keras' HDF5 file (keras/saving_hdf5.py), for a `.keras` path as Keras' v3
        archive (keras/saving_v3.py), else as a Keras SavedModel directory
        (keras/saving_savedmodel.py); keyword arguments as `save_model`'s.
        """
        saving_api.save_model(self, filepath, overwrite, save_format, **kwargs)

    def save_weights(self, filepath, overwrite=True, save_format=None, options=None) -> None:
        """Write the weights: as Keras' HDF5 file when `filepath` ends in .h5/.hdf5 (or
        save_format='h5'), else as an object-based TF checkpoint at `filepath` (keys
        "layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE", ...) and point the
        directory's `checkpoint` file at it, as Keras' TF format does.

        Raises:
          ValueError: an unknown save_format.
        """
        from asyncflow.train import saver

        fmt = (save_format or ("h5" if saving_hdf5.is_hdf5_filepath(filepath) else "tf")).lower()
        if fmt not in ("h5", "hdf5", "tf", "tensorflow"):
            raise ValueError(
                f"Unknown format. Received: `save_format`={save_format}. Was expecting one of "
                '{"tf", "h5"}.'
            )
        if saving_v3.is_weights_h5_path(filepath):
            saving_v3.save_weights(self, filepath, overwrite)
            return
        if fmt in ("h5", "hdf5"):
            if not overwrite and os.path.exists(filepath):
                return
            import h5py

            with h5py.File(filepath, "w") as f:
                saving_hdf5.save_weights_to_hdf5(f, self)
            return

        # Keras' TF format makes the directory (its h5 format does not).
        directory = os.path.dirname(os.fspath(filepath))
        if directory:
            os.makedirs(directory, exist_ok=True)
        path = _root_checkpoint(self).write(filepath, session=backend.get_session())
        saver.update_checkpoint_state(
            os.path.dirname(os.path.abspath(path)), path, [path], save_relative_paths=True
        )

    def load_weights(self, filepath, by_name=False, skip_mismatch=False, options=None):
        """Restore weights written by `save_weights` (by TF's Keras or ours): an HDF5
        file by layer order or, with `by_name`, by layer name (`skip_mismatch` skips
        layers whose weights do not fit); a TF checkpoint by object path.

        Raises:
          NotFoundError: no checkpoint at filepath.
          ValueError: HDF5 weights that do not fit the model.
          NotImplementedError: by_name with a TF checkpoint.
        """
        if saving_v3.is_weights_h5_path(filepath) or saving_v3.is_keras_path(filepath):
            saving_v3.load_weights(self, filepath, skip_mismatch)
            return None
        if _is_hdf5(filepath):
            import h5py

            with h5py.File(filepath, "r") as f:
                group = f["model_weights"] if "layer_names" not in f.attrs else f
                saving_hdf5.load_weights_from_hdf5(group, self, by_name, skip_mismatch)
            return None
        if by_name:
            raise NotImplementedError(
                "Weights may only be loaded based on topology into Models when loading "
                "TensorFlow-formatted weights (got by_name=True to load_weights)."
            )
        status = _root_checkpoint(self).read(filepath)
        status.run_restore_ops(backend.get_session())
        return status


class Functional(Model):
    """A model made by `tf.keras.Model(inputs, outputs)`: Keras' class of functional
    models (its name in configs, summaries and `type(model).__name__`), and the base of
    Sequential and of a subclassed model whose __init__ passes inputs and outputs to
    Model's."""


def _functional_arguments(args, kwargs) -> bool:
    """Whether Model's arguments are a functional model's (inputs and outputs)."""
    return (
        len(args) >= 2
        or (len(args) == 1 and "outputs" in kwargs)
        or ("inputs" in kwargs and "outputs" in kwargs)
    )


def _make_functional(cls) -> None:
    """Put Functional in place of Model among the bases of a Model subclass whose
    __init__ gives Model inputs and outputs, as Keras does (so the class, and every
    instance, is a Functional)."""
    for klass in cls.__mro__:
        if Model in klass.__bases__:
            klass.__bases__ = tuple(Functional if b is Model else b for b in klass.__bases__)
            return


def _is_hdf5(filepath) -> bool:
    if saving_hdf5.is_hdf5_filepath(filepath):
        return True
    path = os.fspath(filepath)
    # A path with no checkpoint index next to it may still be an HDF5 file (Keras looks).
    if os.path.isfile(path) and not os.path.exists(path + ".index"):
        import h5py

        return bool(h5py.is_hdf5(path))
    return False


def _root_checkpoint(model):
    """A Checkpoint whose root children are the model's own (the model is the root)."""
    from asyncflow.train import checkpoint_object

    root = checkpoint_object.Checkpoint()
    root._deps.update(model._trackable_children())
    return root


def _masked_loss(fn, target, output, sample_weight, mask):
    """An output's loss over its unmasked steps only: per-step losses weighted by the
    sample weights times the mask, which Keras rescales by (steps / unmasked steps) for
    a mean over the batch, so the mean is over the unmasked steps."""
    if isinstance(fn, losses_mod.Loss):
        per_step, reduction = fn.call(target, output), fn.reduction
    else:
        per_step, reduction = fn(target, output), losses_mod.Reduction.SUM_OVER_BATCH_SIZE
    if reduction == losses_mod.Reduction.AUTO:
        reduction = losses_mod.Reduction.SUM_OVER_BATCH_SIZE
    mask = cast_ops.cast(mask, per_step.dtype)
    if reduction == losses_mod.Reduction.SUM_OVER_BATCH_SIZE:
        total = cast_ops.cast(array_ops.size(mask), per_step.dtype)
        mask = mask * (total / reduction_ops.reduce_sum(mask))
    weight = cast_ops.cast(sample_weight, per_step.dtype)
    for _ in range(mask.shape.ndims - 1):
        weight = array_ops.expand_dims(weight, -1)
    return losses_mod.reduce_weighted(per_step, weight * mask, reduction)


def _identity(_, value):
    return value


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _metric_fn(metric, loss_fn, output):
    """(function, name) for a compile() metric: 'acc'/'accuracy' picks binary, sparse or
    categorical accuracy from the loss and the output's width, as Keras does."""
    if metric in ("accuracy", "acc", "crossentropy", "ce"):
        fn = getattr(loss_fn, "fn", loss_fn)
        binary = fn is losses_mod.binary_crossentropy
        sparse = fn is losses_mod.sparse_categorical_crossentropy
        last = output.shape.as_list()[-1] if output.shape.ndims else None
        if metric in ("accuracy", "acc"):
            if last == 1 or binary:
                return metrics_mod.binary_accuracy, "acc"
            if sparse:
                return metrics_mod.sparse_categorical_accuracy, "acc"
            return metrics_mod.categorical_accuracy, "acc"
        if last == 1 or binary:
            return metrics_mod.binary_crossentropy, "ce"
        if sparse:
            return metrics_mod.sparse_categorical_crossentropy, "ce"
        return metrics_mod.categorical_crossentropy, "ce"
    fn = metrics_mod.get(metric)
    return fn, getattr(fn, "name", None) or fn.__name__


def _log_value(v):
    # A metric with several thresholds reports an array, which Keras logs as is.
    v = np.asarray(v)
    return float(v) if v.ndim == 0 else v


def _check_counts(xs, ys) -> None:
    nx = {len(a) for a in xs}
    ny = {len(a) for a in ys}
    if len(nx) > 1:
        raise ValueError(
            "All input arrays (x) should have the same number of samples. "
            f"Got array shapes: {[a.shape for a in xs]}"
        )
    if nx and ny and nx != ny:
        raise ValueError(
            "Input arrays should have the same number of samples as target arrays. Found "
            f"{nx.pop()} input samples and {ny.pop()} target samples."
        )


def _aggregate(totals, outs, size, n_losses):
    # Losses: a batch-size-weighted sum (float32, as Keras' aggregator accumulates);
    # metrics: the running value after the latest batch.
    if totals is None:
        totals = [0.0] * len(outs)
    for i, v in enumerate(outs):
        totals[i] = totals[i] + np.float64(v) * size if i < n_losses else v
    return totals


def _finalize(totals, n, n_losses) -> list:
    return [v / n if i < n_losses else v for i, v in enumerate(totals)]


class Sequential(Functional):
    """`tf.keras.Sequential(layers=None, name=None)`: a linear stack of layers.

    Raises:
      TypeError: adding something that is not a layer.
      ValueError: adding a layer with several outputs.
    """

    def __init__(self, layers=None, name=None):
        super().__init__(name=name)
        self._seq_layers: list = []
        self._input_layer = None
        for layer in layers or []:
            self.add(layer)

    @property
    def layers(self) -> list:
        return list(self._seq_layers)

    def _sublayers(self) -> list:
        return self._seq_layers

    def _summary_layers(self) -> list:
        return self.layers

    def _sequential_like(self) -> bool:
        return True

    def add(self, layer) -> None:
        """Append a layer (built at once when the input shape is known)."""
        if isinstance(layer, ops.Tensor) and keras_history(layer) is not None:
            layer = keras_history(layer)[0]
        if not callable(layer) or not hasattr(layer, "weights"):
            raise TypeError(
                "The added layer must be an instance of class Layer. "
                f"Received: layer={layer} of type {type(layer)}."
            )
        if isinstance(layer, InputLayer):
            self._input_layer = layer
            self.inputs, self.outputs = [layer.output], [layer.output]
            return
        # (the input shape of a model added first is its first layer's, as Keras finds it)
        first = layer
        while isinstance(first, Network) and first.layers and first is not self:
            first = first.layers[0]
        if not self._seq_layers and not self.outputs and hasattr(first, "_batch_input_shape"):
            self._input_layer = InputLayer(
                batch_input_shape=first._batch_input_shape,
                dtype=first._dtype,
                name=layer.name + "_input",
            )
            self.inputs, self.outputs = [self._input_layer.output], [self._input_layer.output]
        self._seq_layers.append(layer)
        if self.outputs:
            out = layer(self.outputs[0])
            if isinstance(out, (list, tuple)):
                raise ValueError(
                    "All layers in a Sequential model should have a single output tensor. For "
                    "multi-output layers, use the functional API."
                )
            self.outputs = [out]
            self._init_graph(self.inputs[0], out)
        self._fns = {}
        self._compiled = False

    def pop(self) -> None:
        """Remove the last layer.

        Raises:
          TypeError: the model has no layers.
        """
        if not self._seq_layers:
            raise TypeError("There are no layers in the model.")
        self._seq_layers.pop()
        layers = self._seq_layers
        self._seq_layers = []
        self.outputs = list(self.inputs)
        self.built = False
        for layer in layers:
            self.add(layer)

    def build(self, input_shape=None, name=None, _scope=None) -> None:
        if self.outputs or input_shape is None:
            return
        self._input_layer = InputLayer(
            batch_input_shape=tuple(input_shape), name=name or self._seq_layers[0].name + "_input"
        )
        # (an input made by build or by the data, which TF's config does not list)
        self._input_layer._built_by_model = True
        layers, self._seq_layers = self._seq_layers, []
        self.inputs, self.outputs = [self._input_layer.output], [self._input_layer.output]
        with ops.name_scope(_scope):
            for layer in layers:
                self.add(layer)

    def _build_from(self, x) -> None:
        if not self.outputs and self._seq_layers and isinstance(x, dict):
            self._build_from_features(x)
        elif not self.outputs and self._seq_layers:
            # Keras names the placeholder of a model built from data "input_1", and
            # builds its layers in the model's scope ("sequential/dense/kernel").
            self.build((None,) + np.shape(np.asarray(x))[1:], name="input_1", _scope=self.name)
        if self.outputs and not self._compiled and self._compile_args is not None:
            self._compile_graph()

    def _build_from_features(self, x: dict) -> None:
        """A Sequential model whose first layer takes a features dict (DenseFeatures):
        one Input per key, named by it (a 1-D feature as [batch, 1], as the data is fed),
        the dict to the first layer, the rest in turn."""
        inputs = {}
        for key in sorted(x):
            a = np.asarray(x[key])
            a = a[:, None] if a.ndim == 1 else a
            dtype = backend.floatx() if a.dtype.kind == "f" else a.dtype.name
            inputs[key] = Input(shape=a.shape[1:], name=key, dtype=dtype)
        layers, self._seq_layers = self._seq_layers, [self._seq_layers[0]]
        with ops.name_scope(self.name):
            out = layers[0](inputs)
            for layer in layers[1:]:
                self._seq_layers.append(layer)
                out = layer(out)
        self.inputs = [inputs[k] for k in sorted(inputs)]
        self.outputs = [out]
        self._init_graph(self.inputs, out)
        self._fns = {}
        self._compiled = False

    def get_config(self) -> dict:
        """Name and layers (the InputLayer first when the model has one)."""
        return model_config.sequential_config(self)

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """A Sequential of new layers made from `get_config()`'s dict.

        Raises:
          ValueError: an unknown layer class.
        """
        if isinstance(config, list):  # (Keras 1's format: the bare layer list)
            config = {"layers": config}
        model = cls(name=config.get("name"))
        for layer_config in config["layers"]:
            model.add(layer_configs.deserialize(layer_config, custom_objects))
        if not model.inputs and config.get("build_input_shape"):
            model.build(config["build_input_shape"])
        return model

    def call(self, inputs, training=None, mask=None):
        if self.outputs and len(self._seq_layers):
            return super().call(inputs, training=training, mask=mask)
        out = inputs
        for layer in self._seq_layers:
            out = layer(out)
        return out

    def __call__(self, inputs, *args, **kwargs):
        if not self.outputs and self._seq_layers:
            inputs = ops.convert_to_tensor(inputs)
            # TF1's Keras builds the layers of a Sequential first called on a tensor in the
            # model's scope ("stem/stem_conv/kernel").
            self.build(inputs.shape.as_list(), _scope=self.name)
        return super().__call__(inputs, *args, **kwargs)


layer_configs.register_layer_classes(Model=Model, Functional=Functional, Sequential=Sequential)
