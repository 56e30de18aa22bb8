"""`tf.keras.layers` LayerNormalization, the activation layers PReLU and ThresholdedReLU,
and Identity: TF 2.21 tf_keras' weights (names, shapes, initializers), outputs, configs
and construction errors, in TF1 graph mode."""

from __future__ import annotations

import numpy as np

from asyncflow import nest, tensor_shape
from asyncflow.keras import backend
from asyncflow.keras import initializers as _init
from asyncflow.keras.engine import InputSpec, Layer
from asyncflow.keras.layers_more import _get
from asyncflow.ops import array_ops, cast_ops, math_ops, nn_impl, nn_ops

__all__ = ["LayerNormalization", "PReLU", "ThresholdedReLU", "Identity"]


def _dims(shape) -> list:
    return tensor_shape.TensorShape(shape).as_list()


class LayerNormalization(Layer):
    """Normalizes each example over `axis` (default the last) to mean 0 and variance 1,
    then scales by `gamma` and shifts by `beta` (weights of the normalized axes' shape).

    Raises:
      TypeError: `axis` not an int or a list/tuple of ints.
      ValueError: (when built) an axis outside the input's rank, or one given twice.
    """

    def __init__(
        self,
        axis=-1,
        epsilon=1e-3,
        center=True,
        scale=True,
        beta_initializer="zeros",
        gamma_initializer="ones",
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(axis, (list, tuple)):
            self.axis = list(axis)
        elif isinstance(axis, int):
            self.axis = axis
        else:
            raise TypeError(
                "Expected an int or a list/tuple of ints for the argument 'axis', "
                f"but received: {axis!r}"
            )
        self.epsilon, self.center, self.scale = epsilon, center, scale
        self.beta_initializer = _init.get(beta_initializer)
        self.gamma_initializer = _init.get(gamma_initializer)
        self.beta_regularizer = _get("regularizer", beta_regularizer)
        self.gamma_regularizer = _get("regularizer", gamma_regularizer)
        self.beta_constraint = _get("constraint", beta_constraint)
        self.gamma_constraint = _get("constraint", gamma_constraint)
        self.supports_masking = True

    def _given_axes(self, axes):
        return [self.axis] if isinstance(self.axis, int) else axes

    def build(self, input_shape) -> None:
        dims = _dims(input_shape)
        ndims = len(dims)
        axes = [self.axis] if isinstance(self.axis, int) else list(self.axis)
        for i, ax in enumerate(axes):
            if ax < 0:
                axes[i] = ax + ndims
        if any(ax < 0 or ax >= ndims for ax in axes):
            raise ValueError(
                "Invalid value for `axis` argument. Expected 0 <= axis < inputs.rank "
                f"(with inputs.rank={ndims}). Received: axis={tuple(self._given_axes(axes))}"
            )
        if len(axes) != len(set(axes)):
            raise ValueError(f"Duplicate axis: {tuple(axes)}")
        self.axis = axes
        shape = [dims[ax] for ax in axes]
        self.gamma = self.beta = None
        if self.scale:
            self.gamma = self.add_weight(
                "gamma",
                shape=shape,
                initializer=self.gamma_initializer,
                regularizer=self.gamma_regularizer,
                constraint=self.gamma_constraint,
            )
        if self.center:
            self.beta = self.add_weight(
                "beta",
                shape=shape,
                initializer=self.beta_initializer,
                regularizer=self.beta_regularizer,
                constraint=self.beta_constraint,
            )
        self.built = True

    def call(self, inputs):
        dims = inputs.shape.as_list()
        ndims = len(dims)
        bcast = [1] * ndims
        for ax in self.axis:
            bcast[ax] = dims[ax]

        def broadcast(v):
            # Weights over the last axis broadcast as they are; others need the rank.
            if v is not None and self.axis != [ndims - 1]:
                return array_ops.reshape(v, bcast)
            return v

        mean, variance = nn_impl.moments(inputs, self.axis, keepdims=True)
        return nn_impl.batch_normalization(
            inputs,
            mean,
            variance,
            offset=broadcast(self.beta),
            scale=broadcast(self.gamma),
            variance_epsilon=self.epsilon,
        )


class PReLU(Layer):
    """Parametric ReLU: x for x >= 0, alpha * x otherwise, with a learned `alpha` of the
    input's shape (less the batch), size 1 along each of `shared_axes`."""

    def __init__(
        self,
        alpha_initializer="zeros",
        alpha_regularizer=None,
        alpha_constraint=None,
        shared_axes=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.alpha_initializer = _init.get(alpha_initializer)
        self.alpha_regularizer = _get("regularizer", alpha_regularizer)
        self.alpha_constraint = _get("constraint", alpha_constraint)
        if shared_axes is None:
            self.shared_axes = None
        elif isinstance(shared_axes, (list, tuple)):
            self.shared_axes = list(shared_axes)
        else:
            self.shared_axes = [shared_axes]

    def build(self, input_shape) -> None:
        dims = _dims(input_shape)
        shape = list(dims[1:])
        for ax in self.shared_axes or ():
            shape[ax - 1] = 1
        self.alpha = self.add_weight(
            "alpha",
            shape=shape,
            initializer=self.alpha_initializer,
            regularizer=self.alpha_regularizer,
            constraint=self.alpha_constraint,
        )
        axes = {i: dims[i] for i in range(1, len(dims)) if i not in (self.shared_axes or ())}
        self.input_spec = InputSpec(ndim=len(dims), axes=axes)
        self.built = True

    def call(self, inputs):
        pos = nn_ops.relu(inputs)
        neg = -self.alpha * nn_ops.relu(-inputs)
        return pos + neg


class ThresholdedReLU(Layer):
    """x where x > theta, 0 elsewhere.

    Raises:
      ValueError: theta None or negative.
    """

    def __init__(self, theta=1.0, **kwargs):
        super().__init__(**kwargs)
        if theta is None:
            raise ValueError(
                "Theta of a Thresholded ReLU layer cannot be None, expecting a float. "
                f"Received: {theta}"
            )
        if theta < 0:
            raise ValueError(
                f"The theta value of a Thresholded ReLU layer should be >=0. Received: {theta}"
            )
        self.supports_masking = True
        self.theta = np.asarray(theta, dtype=backend.floatx())

    def call(self, inputs):
        kept = math_ops.greater(inputs, cast_ops.cast(self.theta, inputs.dtype))
        return inputs * cast_ops.cast(kept, inputs.dtype)


class Identity(Layer):
    """Returns its inputs unchanged (an identity op per tensor)."""

    def call(self, inputs):
        return nest.map_structure(array_ops.identity, inputs)
