"""`tf.keras.layers.experimental.DynamicLookup` / `DynamicEmbedding` and
`tf.keras.callbacks.experimental.UpdateEmbeddingCallback`, as TF 2.21's tf_keras has them
in TF1 graph mode.

Keras sizes the layers' vocabulary tables with a tensor (`floor(1.2 * vocabulary_size)`)
that only eager execution can turn into a shape, so in graph mode -- the only mode
asyncflow has -- neither layer can be made: the constructor builds that tensor and then
fails with TF's TypeError (or ValueError for a bad `initial_vocabulary` or
`eviction_policy`), as TF's does.  The callback is a timed thread (Keras' TimedThread)
that asks its layer to update its embeddings every `interval` seconds.
"""

from __future__ import annotations

import logging
import threading

from asyncflow import critical_section, dtypes
from asyncflow import graph as ops
from asyncflow.keras import backend
from asyncflow.keras.callbacks import Callback
from asyncflow.keras.engine import Layer
from asyncflow.keras.layers import Embedding
from asyncflow.ops import cast_ops, math_ops

__all__ = ["DynamicEmbedding", "DynamicLookup", "UpdateEmbeddingCallback"]

_LOG = logging.getLogger(__name__)
_VOCABULARY_DTYPES = (dtypes.string, dtypes.int32, dtypes.int64)


def _is_vocabulary_dtype(value) -> bool:
    try:
        return dtypes.as_dtype(value) in _VOCABULARY_DTYPES
    except TypeError:
        return False


class DynamicLookup(Layer):
    """Maps inputs to indices of a vocabulary that follows the most frequent inputs.

    Raises:
      ValueError: `initial_vocabulary` is neither a tensor nor one of tf.string,
        tf.int32, tf.int64; or `eviction_policy` is not "LFU".
      TypeError: in graph mode, always otherwise (the table's size is a tensor), as TF.
    """

    def __init__(self, vocabulary_size, initial_vocabulary, eviction_policy="LFU", **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.eviction_policy = eviction_policy
        if isinstance(initial_vocabulary, ops.Tensor) or _is_vocabulary_dtype(initial_vocabulary):
            self.initial_vocabulary = initial_vocabulary
        else:
            raise ValueError(
                "Either specify the initial vocabulary or provide a valid dtype. The dtype "
                "argument must be one of the following: tf.string, tf.int32, tf.int64."
            )
        # Keras keeps a 20% larger table.
        size = cast_ops.cast(vocabulary_size, dtypes.float32)
        self.internal_table_size = cast_ops.cast(
            math_ops.floor(math_ops.multiply(size, 1.2)), dtypes.int32
        )
        if eviction_policy != "LFU":
            raise ValueError(
                f"{eviction_policy} eviction policy is currently unsupported by DynamicLookup "
                "layer. It currently only supports `LFU`"
            )
        table_size = self.internal_table_size
        raise TypeError(
            "Dimension value must be integer or None or have an __index__ method, got value "
            f"'{table_size!r}' with type '{type(table_size)}'"
        )


class DynamicEmbedding(Layer):
    """An Embedding over a DynamicLookup's indices (one out-of-vocabulary row).

    Raises:
      ValueError, TypeError: as `DynamicLookup` (always, in graph mode).
    """

    def __init__(
        self,
        input_dim,
        output_dim,
        initial_vocabulary,
        eviction_policy="LFU",
        input_length=None,
        embedding_initializer="uniform",
        num_oov_indices=1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.embedding_layer = Embedding(
            input_dim=input_dim + num_oov_indices,
            output_dim=output_dim,
            embeddings_initializer=embedding_initializer,
            input_length=input_length,
            **kwargs,
        )
        self.dynamic_lookup_layer = DynamicLookup(
            vocabulary_size=input_dim,
            eviction_policy=eviction_policy,
            initial_vocabulary=initial_vocabulary,
            **kwargs,
        )


class UpdateEmbeddingCallback(Callback):
    """Every `interval` seconds (on a daemon thread, between `start()`/`stop()` or as a
    context manager), asks `dynamic_embedding_layer` to update its embeddings, then
    zeroes the optimizer's variables of the dynamic embedding."""

    def __init__(self, dynamic_embedding_layer, interval):
        super().__init__()
        self._epoch = 0
        self.interval = interval
        self.daemon = True
        self.thread_kwargs: dict = {}
        self.thread = None
        self.thread_stop_event = None
        self._dynamic_embedding_layer = dynamic_embedding_layer
        from asyncflow.distribute import context

        self.strategy = context.get_strategy()

    def _call_on_interval(self) -> None:
        while not self.thread_stop_event.is_set():
            self.on_interval()
            self.thread_stop_event.wait(self.interval)

    def start(self) -> None:
        if self.thread and self.thread.is_alive():
            _LOG.warning("Thread is already running.")
            return
        self.thread = threading.Thread(
            target=self._call_on_interval, daemon=self.daemon, **self.thread_kwargs
        )
        self.thread_stop_event = threading.Event()
        self.thread.start()

    def stop(self) -> None:
        if self.thread_stop_event:
            self.thread_stop_event.set()

    def is_alive(self) -> bool:
        return bool(self.thread and self.thread.is_alive())

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *args) -> None:
        self.stop()

    def on_interval(self) -> None:
        try:
            section = critical_section.CriticalSection()
            section.execute(lambda: self._dynamic_embedding_layer.update_embeddings(self.strategy))
            self._reset_optimizer()
        except AttributeError:
            _LOG.info(
                "Time interval specified to the UpdateEmbeddingCallback may be too small, "
                "please try increasing the value of `interval`."
            )

    def _reset_optimizer(self) -> None:
        for var in self.model.optimizer.variables():
            if "dynamic_embedding" in var.name:
                backend.set_value(var, backend.zeros_like(var))

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
