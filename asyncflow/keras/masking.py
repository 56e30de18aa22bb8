"""Keras masking: the `Masking` layer and how merge layers combine their inputs' masks.

A mask is a boolean tensor (batch, time) riding on a Keras tensor as `t._keras_mask`:
True where the time step holds data.  `Layer.__call__` hands the inputs' masks to a
`call` that takes `mask` and sets `compute_mask`'s result on the outputs; layers that do
not support masking drop it.  Recurrent layers skip masked steps (recurrent.py) and
`fit`/`evaluate` weight the loss and metrics by the output's mask (training.py).
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow.keras import backend
from asyncflow.keras.engine import Layer
from asyncflow.ops import array_ops, cast_ops, math_ops, reduction_ops

__all__ = ["Masking"]


class Masking(Layer):
    """Masks the time steps whose features all equal `mask_value` (their outputs become
    zeros and their mask False)."""

    def __init__(self, mask_value=0.0, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.mask_value = mask_value

    def compute_mask(self, inputs, mask=None):
        return reduction_ops.reduce_any(math_ops.not_equal(inputs, self.mask_value), axis=-1)

    def call(self, inputs):
        keep = reduction_ops.reduce_any(
            math_ops.not_equal(inputs, self.mask_value), axis=-1, keepdims=True
        )
        outputs = inputs * cast_ops.cast(keep, inputs.dtype)
        # The mask is this step's keep flags without their last axis, as Keras makes it.
        outputs._keras_mask = array_ops.squeeze(keep, axis=-1)
        return outputs

    def get_config(self) -> dict:
        return {**super().get_config(), "mask_value": self.mask_value}


def _check_masks(inputs, mask) -> None:
    if not isinstance(mask, (tuple, list)):
        raise ValueError(f"`mask` should be a list. Received: mask={mask}")
    if not isinstance(inputs, (tuple, list)):
        raise ValueError(f"`inputs` should be a list. Received: inputs={inputs}")
    if len(mask) != len(inputs):
        raise ValueError(
            "The lists `inputs` and `mask` should have the same length. Received: "
            f"inputs={inputs} of length {len(inputs)}, and mask={mask} of length {len(mask)}"
        )


def merge_mask(inputs, mask):
    """An element-wise merge's mask: the logical AND of its inputs' masks.

    Raises:
      ValueError: `mask` not a list as long as `inputs`.
    """
    if mask is None:
        return None
    _check_masks(inputs, mask)
    if all(m is None for m in mask):
        return None
    masks = [array_ops.expand_dims(m, 0) for m in mask if m is not None]
    return reduction_ops.reduce_all(array_ops.concat(masks, 0), axis=0)


def concat_mask(inputs, mask, axis):
    """Concatenate's mask: the inputs' masks (all True for an unmasked input) joined
    along `axis`, then AND-ed over the last axis.

    Raises:
      ValueError: `mask` not a list as long as `inputs`.
    """
    if mask is None:
        return None
    _check_masks(inputs, mask)
    if all(m is None for m in mask):
        return None
    masks = []
    for x, m in zip(inputs, mask, strict=True):
        if m is None:
            masks.append(array_ops.ones_like(x, dtype=dtypes.bool))
        elif backend.ndim(m) < backend.ndim(x):
            masks.append(array_ops.expand_dims(m, -1))
        else:
            masks.append(m)
    return reduction_ops.reduce_all(array_ops.concat(masks, axis), axis=-1)
