"""`tf.keras.callbacks.TensorBoard` as TF1 graph mode runs it: one event file in `log_dir`
(no train/ or validation/ subdirectories), written by asyncflow's `tf.summary.FileWriter`.

What lands in the file, as TF 2.21's v1 callback writes it:
- the graph and its meta graph, when `write_graph` (at `set_model`);
- `epoch_<name>` scalars for every log of `on_epoch_end`, at step `epoch` (or, with a
  numeric/"batch" `update_freq`, at the number of samples seen so far);
- `batch_<name>` scalars every `update_freq` samples, at the count of batches seen;
- with `histogram_freq`, histograms of each layer's weights (tag: the weight's name with
  ':' as '_'), of each layer's output (`<layer>_out`) and, with `write_images`, weight
  images; these ops run with every validation batch of a histogram epoch, at the count
  of validation batches seen, so they need validation data to appear at all.

With `profile_batch` (the index + 1 of the training batch to profile, 0 for none) the
train function runs that batch with a FULL_TRACE and the trace is written under
`log_dir/plugins/profile/` as an XSpace (tensorboard_files says what it holds).  With
`embeddings_freq` and `embeddings_data`, the outputs of the embedding layers for that
data are kept in variables "<layer>_embedding", saved every `embeddings_freq` epochs to
`log_dir/keras_embedding.ckpt-<epoch>`, and `projector_config.pbtxt` names them (and
`embeddings_metadata`'s files) for TensorBoard's projector.

Invariant: the writer is opened by `set_model` and closed by `on_train_end`; scalars are
flushed after each write so a reader sees them while training runs.
"""

from __future__ import annotations

import os
import time

import numpy as np

from asyncflow import dtypes, summary
from asyncflow import resource_variable as _rv
from asyncflow.config import RunMetadata, RunOptions
from asyncflow.keras import backend, tensorboard_files
from asyncflow.keras.callbacks import Callback
from asyncflow.ops import array_ops
from asyncflow.train import saver as _saver

__all__ = ["TensorBoard"]

# Logs that describe the batch rather than measure the model: never written.
_NOT_WRITTEN = ("batch", "size", "num_steps")


class TensorBoard(Callback):
    """Writes the model's graph, loss/metric scalars and (optionally) weight and
    activation histograms to an event file in `log_dir` for TensorBoard.

    `profile_batch` traces that training batch (module docstring); `embeddings_freq` with
    `embeddings_data` saves the embedding layers' outputs for the projector.

    Raises:
      ValueError (on_epoch_end): `embeddings_freq` set without `embeddings_data`.
      ValueError (set_model): `embeddings_freq` with `embeddings_data` but no embedding
        layer to watch (the Saver has no variables), as Keras.
    """

    def __init__(
        self,
        log_dir="./logs",
        histogram_freq=0,
        batch_size=32,
        write_graph=True,
        write_grads=False,
        write_images=False,
        embeddings_freq=0,
        embeddings_layer_names=None,
        embeddings_metadata=None,
        embeddings_data=None,
        update_freq="epoch",
        profile_batch=2,
    ):
        super().__init__()
        self.log_dir = log_dir
        self.histogram_freq = histogram_freq
        self.batch_size = batch_size
        self.write_graph = write_graph
        self.write_grads = write_grads
        self.write_images = write_images
        self.embeddings_freq = embeddings_freq
        self.embeddings_layer_names = embeddings_layer_names
        self.embeddings_metadata = embeddings_metadata
        self.embeddings_data = embeddings_data
        self.update_freq = 1 if update_freq == "batch" else update_freq
        self.merged = None
        self.writer = None
        self._samples_seen = 0
        self._samples_seen_at_last_write = 0
        self._total_batches_seen = 0
        self._total_val_batches_seen = 0
        self._profile_batch = profile_batch
        self._profile_start_ns = None

    def set_model(self, model) -> None:
        self.model = model
        graph = backend.get_graph()
        self.writer = summary.FileWriter(self.log_dir, graph if self.write_graph else None)
        if self.histogram_freq and self.merged is None:
            with graph.as_default():
                for layer in model.layers:
                    self._layer_summaries(model, layer)
                self.merged = summary.merge_all()
        if self.embeddings_freq and self.embeddings_data is not None:
            with graph.as_default():
                self._embedding_ops(model)

    def _embedding_ops(self, model) -> None:
        self.embeddings_data = _standardize(self.embeddings_data, model)
        names = self.embeddings_layer_names or [
            layer.name for layer in model.layers if type(layer).__name__ == "Embedding"
        ]
        self.batch_id = batch_id = array_ops.placeholder(dtypes.int32)
        self.step = step = array_ops.placeholder(dtypes.int32)
        self.assign_embeddings = []
        variables = {}
        for layer in model.layers:
            if layer.name not in names:
                continue
            output = model.get_layer(layer.name).output
            size = int(np.prod(output.shape[1:].as_list()))
            output = array_ops.reshape(output, (step, size))
            rows = self.embeddings_data[0].shape[0]
            variable = _rv.ResourceVariable(
                array_ops.zeros((rows, size)), name=layer.name + "_embedding"
            )
            variables[layer.name] = variable
            self.assign_embeddings.append(variable[batch_id : batch_id + step].assign(output))
        self.saver = _saver.Saver(list(variables.values()))
        # Keras leaves these variables uninitialized (its session initializes the layers'
        # own only), so TF 2.21 fails on the first save with NotFoundError; here they
        # start at zeros as Keras meant.
        backend.get_session().run([v.initializer for v in variables.values()])
        metadata = self.embeddings_metadata
        if isinstance(metadata, str):
            metadata = dict.fromkeys(variables, metadata)
        tensorboard_files.write_projector_config(
            self.writer.get_logdir(),
            [(v.name, (metadata or {}).get(name)) for name, v in variables.items()],
        )

    def _layer_summaries(self, model, layer) -> None:
        for weight in layer.weights:
            tag = weight.name.replace(":", "_")
            summary.histogram(tag, weight)
            if self.write_images:
                image = _weight_image(weight)
                if image is not None:
                    summary.image(tag, image)
        if self.write_grads:
            for weight in layer.trainable_weights:
                tag = weight.name.replace(":", "_")
                grads = model.optimizer.get_gradients(model.total_loss, [weight])
                grads = [getattr(g, "values", g) for g in grads]
                summary.histogram(f"{tag}_grad", grads)
        output = getattr(layer, "output", None)
        if isinstance(output, list):
            for i, out in enumerate(output):
                summary.histogram(f"{layer.name}_out_{i}", out)
        elif output is not None:
            summary.histogram(f"{layer.name}_out", output)

    def _write_scalars(self, step, logs) -> None:
        for name, value in logs.items():
            proto = summary.Summary()
            entry = proto.value.add()
            entry.tag = name
            entry.simple_value = float(np.asarray(value).item())
            self.writer.add_summary(proto, step)
        self.writer.flush()

    def _on_histograms(self, serialized) -> None:
        self.writer.add_summary(serialized, self._total_val_batches_seen)
        self._total_val_batches_seen += 1

    def on_train_batch_begin(self, batch, logs=None):
        if self._total_batches_seen == self._profile_batch - 1:
            self._start_profiler()

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def _start_profiler(self) -> None:
        if self._profile_start_ns is not None:
            return
        fn = self.model._function("train")
        fn.run_options = RunOptions(trace_level=RunOptions.FULL_TRACE)
        fn.run_metadata = RunMetadata()
        self._profile_start_ns = time.time_ns()

    def _stop_profiler(self) -> None:
        if self._profile_start_ns is None:
            return
        fn = self.model._function("train")
        traced = fn.run_metadata
        fn.run_options = fn.run_metadata = None
        tensorboard_files.write_xplane(
            self.log_dir, traced.step_stats, backend.get_graph(), self._profile_start_ns
        )
        self._profile_start_ns = None

    def on_batch_end(self, batch, logs=None):
        logs = logs or {}
        self._samples_seen += logs.get("size", 1)
        pending = self._samples_seen - self._samples_seen_at_last_write
        if self.update_freq != "epoch" and pending >= self.update_freq:
            measured = {f"batch_{k}": v for k, v in logs.items() if k not in _NOT_WRITTEN}
            self._write_scalars(self._total_batches_seen, measured)
            self._samples_seen_at_last_write = self._samples_seen
        self._total_batches_seen += 1
        self._stop_profiler()

    def on_epoch_begin(self, epoch, logs=None):
        if self.histogram_freq and epoch % self.histogram_freq == 0:
            fn = self.model._function("test")
            if self.merged not in fn.fetches:
                fn.fetches.append(self.merged)
                fn.fetch_callbacks[self.merged] = self._on_histograms

    def on_epoch_end(self, epoch, logs=None):
        logs = {f"epoch_{k}": v for k, v in (logs or {}).items() if k not in _NOT_WRITTEN}
        step = epoch if self.update_freq == "epoch" else self._samples_seen
        self._write_scalars(step, logs)
        if self.histogram_freq:
            fn = self.model._function("test")
            if self.merged in fn.fetches:
                fn.fetches.remove(self.merged)
            fn.fetch_callbacks.pop(self.merged, None)
        if self.embeddings_freq and self.embeddings_data is None:
            raise ValueError("To visualize embeddings, embeddings_data must be provided.")
        if self.embeddings_freq and epoch % self.embeddings_freq == 0:
            self._save_embeddings(epoch)

    def _save_embeddings(self, epoch) -> None:
        # A second forward pass over embeddings_data, batch_size rows at a time, each
        # batch assigned into its rows and the checkpoint saved after each (as Keras).
        data = self.embeddings_data
        inputs = self.model.inputs
        sess = backend.get_session()
        n = data[0].shape[0]
        for i in range(0, n, self.batch_size):
            step = min(self.batch_size, n - i)
            feed = {x: d[i : i + step] for x, d in zip(inputs, data, strict=False)}
            feed[self.batch_id] = i
            feed[self.step] = step
            phase = backend.learning_phase()
            if not isinstance(phase, int):
                feed[phase] = False
            sess.run(self.assign_embeddings, feed_dict=feed)
            self.saver.save(sess, os.path.join(self.log_dir, "keras_embedding.ckpt"), epoch)

    def on_train_end(self, logs=None):
        self._stop_profiler()
        self.writer.close()


def _standardize(data, model) -> list:
    """`embeddings_data` as one array per model input (an array, a list, or a dict by
    input name).

    Raises:
      ValueError: a dict missing one of the model's input names.
    """
    if isinstance(data, dict):
        missing = [name for name in model.input_names if name not in data]
        if missing:
            raise ValueError(
                f"No data provided for {missing[0]!r}. Need data for each key in: "
                f"{model.input_names}"
            )
        return [np.asarray(data[name]) for name in model.input_names]
    if isinstance(data, (list, tuple)):
        return [np.asarray(d) for d in data]
    return [np.asarray(data)]


def _weight_image(weight):
    """The weight as a [n, h, w, 1] image batch (kernels of a 1-D conv one image per
    output channel), or None for shapes TensorBoard's v1 callback does not draw."""
    img = array_ops.squeeze(weight)
    shape = tuple(img.shape.as_list())
    if len(shape) == 2:
        if shape[0] > shape[1]:
            img = array_ops.transpose(img)
            shape = shape[::-1]
        return array_ops.reshape(img, [1, shape[0], shape[1], 1])
    if len(shape) == 3:
        if backend.image_data_format() == "channels_last":
            img = array_ops.transpose(img, perm=[2, 0, 1])
            shape = (shape[2], shape[0], shape[1])
        return array_ops.reshape(img, [shape[0], shape[1], shape[2], 1])
    if len(shape) == 1:
        return array_ops.reshape(img, [1, shape[0], 1, 1])
    return None
