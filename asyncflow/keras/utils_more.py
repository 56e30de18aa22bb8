"""More of `tf.keras.utils`: `Progbar`, `to_ordinal`, `get_source_inputs`,
`get_registered_object`, `pad_sequences`, and the enqueuers that run a generator or a
`Sequence` ahead of training in background threads.

The enqueuers' threads feed a `queue.Queue` for the (blocking, synchronous) Keras
training loop; they never touch the graph runtime's event loop.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time

import numpy as np

from asyncflow import nest
from asyncflow.keras.backend_config import keras_history
from asyncflow.keras.serialization import get_custom_objects

__all__ = [
    "Progbar",
    "to_ordinal",
    "get_source_inputs",
    "get_registered_object",
    "pad_sequences",
    "SequenceEnqueuer",
    "OrderedEnqueuer",
    "GeneratorEnqueuer",
    "enable_interactive_logging",
    "disable_interactive_logging",
    "is_interactive_logging_enabled",
]

# Keras writes progress to stdout while interactive logging is on (the default), else to
# the "asyncflow.keras" logger.
_INTERACTIVE = [True]


def enable_interactive_logging() -> None:
    _INTERACTIVE[0] = True


def disable_interactive_logging() -> None:
    _INTERACTIVE[0] = False


def is_interactive_logging_enabled() -> bool:
    return _INTERACTIVE[0]


def _print_msg(message: str) -> None:
    if _INTERACTIVE[0]:
        sys.stdout.write(message)
        sys.stdout.flush()
    else:
        logging.getLogger("asyncflow.keras").info(message)


def to_ordinal(y, num_classes=None, dtype="float32"):
    """Ordinal-regression targets: row i has ones in its first y[i] columns (of
    num_classes - 1; num_classes defaults to max(y) + 1)."""
    y = np.array(y, dtype="int")
    shape = y.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = tuple(shape[:-1])
    y = y.ravel()
    if not num_classes:
        num_classes = int(np.max(y)) + 1
    n = y.shape[0]
    range_values = np.arange(num_classes - 1)
    range_values = np.tile(np.expand_dims(range_values, 0), [n, 1])
    ordinal = np.zeros((n, num_classes - 1), dtype=dtype)
    ordinal[range_values < np.expand_dims(y, -1)] = 1
    return np.reshape(ordinal, shape + (num_classes - 1,))


def get_source_inputs(tensor, layer=None, node_index=None):
    """The Input tensors that `tensor` was computed from through Keras layer calls (a
    tensor no layer made is returned as is)."""
    history = keras_history(tensor)
    if history is None:
        return tensor
    if layer is None or node_index:
        layer, node_index, _ = history
    if not layer._inbound_nodes:
        return [tensor]
    node = layer._inbound_nodes[node_index]
    if type(layer).__name__ == "InputLayer":
        return nest.flatten(node.input_tensors)
    sources: list = []
    for x in node.keras_inputs:  # (keyword tensors too: an attention mask's Input)
        for s in get_source_inputs(x):
            if all(s is not t for t in sources):
                sources.append(s)
    return sources


def get_registered_object(name, custom_objects=None, module_objects=None):
    """The object registered (or in a custom-object scope) under `name`, else the one in
    `custom_objects`, then `module_objects`; None if none has it."""
    if name in get_custom_objects():
        return get_custom_objects()[name]
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    if module_objects and name in module_objects:
        return module_objects[name]
    return None


def pad_sequences(
    sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre", value=0.0
):
    """A (num_samples, maxlen, ...) array of `sequences`, cut to `maxlen` at the start
    ('pre') or end ('post') and filled with `value` before or after.

    Raises:
      ValueError: `sequences` not iterable or holding a non-iterable, unknown padding or
        truncating, a string `value` for a non-string dtype, or samples of other shapes.
    """
    if not hasattr(sequences, "__len__"):
        raise ValueError("`sequences` must be iterable.")
    lengths, sample_shape = [], ()
    for x in sequences:
        try:
            lengths.append(len(x))
        except TypeError as e:
            raise ValueError(
                f"`sequences` must be a list of iterables. Found non-iterable: {x}"
            ) from e
        if not sample_shape and len(x):
            sample_shape = np.asarray(x).shape[1:]
    if maxlen is None:
        maxlen = np.max(lengths)
    is_str = np.issubdtype(dtype, np.str_)
    if isinstance(value, str) and dtype is not object and not is_str:
        raise ValueError(
            f"`dtype` {dtype} is not compatible with `value`'s type: {type(value)}\n"
            "You should set `dtype=object` for variable length strings."
        )
    out = np.full((len(sequences), maxlen) + tuple(sample_shape), value, dtype=dtype)
    for idx, s in enumerate(sequences):
        if not len(s):
            continue
        if truncating == "pre":
            kept = s[-maxlen:]
        elif truncating == "post":
            kept = s[:maxlen]
        else:
            raise ValueError(f'Truncating type "{truncating}" not understood')
        kept = np.asarray(kept, dtype=dtype)
        if kept.shape[1:] != tuple(sample_shape):
            raise ValueError(
                f"Shape of sample {kept.shape[1:]} of sequence at position {idx} is "
                f"different from expected shape {sample_shape}"
            )
        if padding == "post":
            out[idx, : len(kept)] = kept
        elif padding == "pre":
            out[idx, -len(kept) :] = kept
        else:
            raise ValueError(f'Padding type "{padding}" not understood')
    return out


class Progbar:
    """A console progress bar: `update(current, values)` keeps, per name, the mean of
    the values weighted by the steps they cover (or the last value for
    `stateful_metrics`), and prints a bar (verbose=1) or one line at the end (2)."""

    def __init__(
        self, target, width=30, verbose=1, interval=0.05, stateful_metrics=None, unit_name="step"
    ):
        self.target, self.width, self.verbose = target, width, verbose
        self.interval, self.unit_name = interval, unit_name
        self.stateful_metrics = set(stateful_metrics or ())
        # Keras redraws in place on a terminal, in notebooks and on every POSIX system.
        self._dynamic_display = (
            (hasattr(sys.stdout, "isatty") and sys.stdout.isatty())
            or "ipykernel" in sys.modules
            or "posix" in sys.modules
            or "PYCHARM_HOSTED" in os.environ
        )
        self._total_width = 0
        self._seen_so_far = 0
        self._values: dict = {}
        self._values_order: list = []
        self._start = time.time()
        self._last_update = 0.0

    def update(self, current, values=None, finalize=None):
        if finalize is None:
            finalize = self.target is not None and current >= self.target
        for k, v in values or []:
            if k not in self._values_order:
                self._values_order.append(k)
            if k not in self.stateful_metrics:
                # The value stands for every step since the last update.
                steps = max(current - self._seen_so_far, 1)
                if k not in self._values:
                    self._values[k] = [v * steps, steps]
                else:
                    self._values[k][0] += v * steps
                    self._values[k][1] += steps
            else:
                self._values[k] = [v, 1]
        self._seen_so_far = current
        now = time.time()
        if self.verbose == 1:
            if now - self._last_update < self.interval and not finalize:
                return
            self._print_bar(current, now, finalize)
        elif self.verbose == 2 and finalize:
            digits = int(np.log10(self.target)) + 1
            elapsed = now - self._start
            line = f"{current:{digits}d}/{self.target} - {elapsed:.0f}s"
            line += self._metrics_text(signed=False)
            if current == self.target:
                line += " -" + _format_time(elapsed, "epoch")
                line += " -" + _format_time(elapsed / self.target, self.unit_name) + "\n"
            _print_msg(line)
        self._last_update = now

    def add(self, n, values=None):
        self.update(self._seen_so_far + n, values)

    def _metrics_text(self, signed=True) -> str:
        text = ""
        for k in self._values_order:
            total, count = self._values[k]
            avg = np.mean(total / max(1, count))
            small = abs(avg) <= 1e-3 if signed else avg <= 1e-3
            text += f" - {k}: " + (f"{avg:.4e}" if small else f"{avg:.4f}")
        return text

    def _print_bar(self, current, now, finalize):
        prev_width = self._total_width
        out = ("\b" * prev_width + "\r") if self._dynamic_display else "\n"
        if self.target is not None:
            digits = int(np.log10(self.target)) + 1
            bar = f"{current:{digits}d}/{self.target} ["
            prog_width = int(self.width * current / self.target)
            if prog_width > 0:
                bar += "=" * (prog_width - 1) + (">" if current < self.target else "=")
            bar += "." * (self.width - prog_width) + "]"
        else:
            bar = f"{current:7d}/Unknown"
        self._total_width = len(bar)
        elapsed = now - self._start
        per_unit = elapsed / current if current else 0.0
        if self.target is None or finalize:
            info = f" - {elapsed:.0f}s" + _format_time(per_unit, self.unit_name)
        else:
            eta = per_unit * (self.target - current)
            if eta > 3600:
                info = (
                    f" - ETA: {int(eta // 3600)}:{int(eta % 3600 // 60):02d}:{int(eta % 60):02d}"
                )
            elif eta > 60:
                info = f" - ETA: {int(eta // 60)}:{int(eta % 60):02d}"
            else:
                info = f" - ETA: {int(eta)}s"
        info += self._metrics_text()
        self._total_width += len(info)
        if prev_width > self._total_width:
            info += " " * (prev_width - self._total_width)
        if finalize:
            info += "\n"
        _print_msg(out + bar + info)


def _format_time(seconds, unit_name) -> str:
    if seconds >= 1 or seconds == 0:
        return f" {seconds:.0f}s/{unit_name}"
    if seconds >= 1e-3:
        return f" {seconds * 1e3:.0f}ms/{unit_name}"
    return f" {seconds * 1e6:.0f}us/{unit_name}"


class SequenceEnqueuer:
    """Base of the enqueuers: `start(workers, max_queue_size)`, `get()` yielding items,
    `stop()`; `is_running()` between them."""

    def __init__(self, sequence, use_multiprocessing=False):
        if use_multiprocessing:
            raise NotImplementedError("enqueuers with use_multiprocessing=True")
        self.sequence = sequence
        self.use_multiprocessing = use_multiprocessing
        self._threads: list = []
        self._stop_event = None
        self.queue = None

    def is_running(self) -> bool:
        return self._stop_event is not None and not self._stop_event.is_set()

    def start(self, workers=1, max_queue_size=10):
        self.queue = queue.Queue(max_queue_size)
        self._stop_event = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(1)]
        for t in self._threads:
            t.start()

    def _put(self, item) -> bool:
        while not self._stop_event.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def stop(self, timeout=None):
        if self._stop_event is None:
            return
        self._stop_event.set()
        for t in self._threads:
            t.join(timeout)
        self._threads = []
        self.queue = None

    def get(self):
        """Yield the items in order; an exception raised by the source is re-raised."""
        while self.is_running() or (self.queue is not None and not self.queue.empty()):
            try:
                kind, item = self.queue.get(timeout=0.1)
            except queue.Empty:
                continue
            if kind == "error":
                self.stop()
                raise item
            if kind == "done":
                return
            yield item

    def _run(self):
        raise NotImplementedError


class OrderedEnqueuer(SequenceEnqueuer):
    """Runs a `Sequence` ahead, in index order (shuffled each epoch with `shuffle`),
    calling its `on_epoch_end` after each pass."""

    def __init__(self, sequence, use_multiprocessing=False, shuffle=False):
        super().__init__(sequence, use_multiprocessing)
        self.shuffle = shuffle

    def _run(self):
        while not self._stop_event.is_set():
            order = list(range(len(self.sequence)))
            if self.shuffle:
                np.random.shuffle(order)
            for i in order:
                try:
                    item = self.sequence[i]
                except Exception as e:  # handed to the consumer, which re-raises it
                    self._put(("error", e))
                    return
                if not self._put(("item", item)):
                    return
            self.sequence.on_epoch_end()


class GeneratorEnqueuer(SequenceEnqueuer):
    """Runs a Python generator ahead of its consumer; `get` ends when it does."""

    def __init__(self, generator, use_multiprocessing=False, random_seed=None):
        super().__init__(generator, use_multiprocessing)
        self.random_seed = random_seed

    def _run(self):
        try:
            for item in self.sequence:
                if not self._put(("item", item)):
                    return
        except Exception as e:  # handed to the consumer, which re-raises it
            self._put(("error", e))
            return
        self._put(("done", None))
