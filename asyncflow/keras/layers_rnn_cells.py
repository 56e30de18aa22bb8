"""`tf.keras.layers` AbstractRNNCell (the base of user-written cells that `RNN` runs) and
Wrapper (the base of layers that wrap one layer), as TF 2.21's tf_keras has them
(StackedRNNCells is recurrent.py's)."""

from __future__ import annotations

from asyncflow import nest
from asyncflow.keras.engine import Layer
from asyncflow.ops import array_ops

__all__ = ["AbstractRNNCell", "Wrapper"]


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
