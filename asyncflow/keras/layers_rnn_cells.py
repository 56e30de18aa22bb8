"""`tf.keras.layers` AbstractRNNCell (the base of user-written cells that `RNN` runs),
StackedRNNCells (cells run one after another within each time step) and Wrapper (the
base of layers that wrap one layer), as TF 2.21's tf_keras has them."""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import nest, tensor_shape
from asyncflow.keras.engine import Layer
from asyncflow.ops import array_ops

__all__ = ["AbstractRNNCell", "StackedRNNCells", "Wrapper"]


class AbstractRNNCell(Layer):
    """A cell for `RNN`: subclasses define `state_size`, `output_size` (both raise
    NotImplementedError here) and `call(inputs, states) -> (output, new_states)`."""

    def call(self, inputs, states):
        raise NotImplementedError

    @property
    def state_size(self):
        raise NotImplementedError

    @property
    def output_size(self):
        raise NotImplementedError

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        """Zero states, one (batch_size, size) tensor per entry of state_size."""
        if inputs is not None:
            batch_size = array_ops.shape(inputs)[0]
            dtype = inputs.dtype
        sizes = nest.flatten(self.state_size)
        states = [array_ops.zeros(array_ops.stack([batch_size, size]), dtype=dtype or "float32")
                  for size in sizes]  # fmt: skip
        return states[0] if len(states) == 1 else states


def _sizes(cell) -> list:
    return nest.flatten(cell.state_size)


class StackedRNNCells(Layer):
    """Runs `cells` in order within each time step, each on the previous one's output;
    `state_size` is the tuple of the cells' state sizes.

    Raises:
      ValueError: a cell without `call` or `state_size`.
    """

    def __init__(self, cells, **kwargs):
        for cell in cells:
            if "call" not in dir(cell):
                raise ValueError(
                    f"All cells must have a `call` method. Received cell without a `call` "
                    f"method: {cell}"
                )
            if "state_size" not in dir(cell):
                raise ValueError(
                    "All cells must have a `state_size` attribute. Received cell without a "
                    f"`state_size`: {cell}"
                )
        super().__init__(**kwargs)
        self.cells = list(cells)

    @property
    def state_size(self):
        return tuple(cell.state_size for cell in self.cells)

    def _config_dtype(self):
        # As TF's: `RNN` builds the stack but never calls it, so its dtype stays unset.
        return self._dtype

    @property
    def output_size(self):
        last = self.cells[-1]
        if getattr(last, "output_size", None) is not None:
            return last.output_size
        return _sizes(last)[0]

    def build(self, input_shape) -> None:
        shape = tensor_shape.TensorShape(input_shape)
        for cell in self.cells:
            if not cell.built:
                with ops.name_scope(cell.name):
                    cell.build(shape)
                cell.built = True
            out = getattr(cell, "output_size", None)
            out = _sizes(cell)[0] if out is None else out
            shape = tensor_shape.TensorShape([shape[0], out])
        self.built = True

    def call(self, inputs, states):
        # `RNN` hands the cells' states flat, in cell order.
        states = list(states)
        new_states = []
        for cell in self.cells:
            n = len(_sizes(cell))
            mine, states = states[:n], states[n:]
            inputs, out_states = cell.call(inputs, mine)
            new_states += nest.flatten(out_states)
        return inputs, new_states


class Wrapper(Layer):
    """A layer holding another layer (`self.layer`), built on the same input shape."""

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        self.layer = layer

    def build(self, input_shape=None) -> None:
        if not self.layer.built:
            self.layer.build(input_shape)
            self.layer.built = True
        self.built = True
