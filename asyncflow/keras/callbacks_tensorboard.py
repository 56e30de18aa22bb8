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

Invariant: the writer is opened by `set_model` and closed by `on_train_end`; scalars are
flushed after each write so a reader sees them while training runs.
"""

from __future__ import annotations

import numpy as np

from asyncflow import summary
from asyncflow.keras import backend
from asyncflow.keras.callbacks import Callback
from asyncflow.ops import array_ops

__all__ = ["TensorBoard"]

# Logs that describe the batch rather than measure the model: never written.
_NOT_WRITTEN = ("batch", "size", "num_steps")


class TensorBoard(Callback):
    """Writes the model's graph, loss/metric scalars and (optionally) weight and
    activation histograms to an event file in `log_dir` for TensorBoard.

    `profile_batch` is accepted for TF's signature; asyncflow has no trace profiler, so
    no `plugins/profile` trace is written.

    Raises:
      ValueError (on_epoch_end): `embeddings_freq` set without `embeddings_data`.
      NotImplementedError (set_model): `embeddings_freq` with `embeddings_data`; the
        projector's embedding checkpoints are not written by asyncflow.
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

    def set_model(self, model) -> None:
        if self.embeddings_freq and self.embeddings_data is not None:
            raise NotImplementedError(
                "TensorBoard: embeddings_data (the projector's embedding checkpoints) is not "
                "supported by asyncflow"
            )
        self.model = model
        graph = backend.get_graph()
        self.writer = summary.FileWriter(self.log_dir, graph if self.write_graph else None)
        if self.histogram_freq and self.merged is None:
            with graph.as_default():
                for layer in model.layers:
                    self._layer_summaries(model, layer)
                self.merged = summary.merge_all()

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

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def on_batch_end(self, batch, logs=None):
        logs = logs or {}
        self._samples_seen += logs.get("size", 1)
        pending = self._samples_seen - self._samples_seen_at_last_write
        if self.update_freq != "epoch" and pending >= self.update_freq:
            measured = {f"batch_{k}": v for k, v in logs.items() if k not in _NOT_WRITTEN}
            self._write_scalars(self._total_batches_seen, measured)
            self._samples_seen_at_last_write = self._samples_seen
        self._total_batches_seen += 1

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

    def on_train_end(self, logs=None):
        self.writer.close()


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
