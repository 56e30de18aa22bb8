"""`tf.keras.experimental.LinearModel` and `WideDeepModel` (also in `tf.keras.models`):
Keras' premade subclassed models.

LinearModel is one bias-free Dense kernel per input (dict inputs in sorted key order,
each kernel named by its key), their sum, one bias and an activation; its weights live
in the model's own scope ("linear_model/kernel", "linear_model/bias"), as TF's do.
WideDeepModel adds a LinearModel's output to a DNN model's; compiled with a pair of
optimizers, the first trains the linear model's weights and the second the DNN's.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import nest
from asyncflow.keras import activations, initializers, layer_configs, optimizers, regularizers
from asyncflow.keras.layers import Dense
from asyncflow.keras.training import Model
from asyncflow.ops import nn_ops

__all__ = ["LinearModel", "WideDeepModel"]


class LinearModel(Model):
    """`activation(sum_i inputs[i] @ kernel_i + bias)`.

    Raises:
      ValueError (call): dict inputs without a key the model was built with.
    """

    def __init__(
        self,
        units=1,
        activation=None,
        use_bias=True,
        kernel_initializer="zeros",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = units
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.dense_layers = []
        self.bias = None

    def _kernel(self, shape, name=None) -> Dense:
        layer = Dense(
            units=self.units,
            use_bias=False,
            kernel_initializer=self.kernel_initializer,
            kernel_regularizer=self.kernel_regularizer,
            name=name,
        )
        # Built here, not called: its kernel is made in the model's scope.
        layer.build(shape)
        layer.built = True
        return layer

    def build(self, input_shape) -> None:
        if isinstance(input_shape, dict):
            self.dense_layers = [self._kernel(input_shape[k], k) for k in sorted(input_shape)]
        elif isinstance(input_shape, (list, tuple)) and all(
            not isinstance(s, (int, type(None))) for s in input_shape
        ):
            self.dense_layers = [self._kernel(s) for s in input_shape]
        else:
            self.dense_layers = [self._kernel(input_shape)]
        if self.use_bias:
            self.bias = self.add_weight(
                "bias",
                shape=(self.units,),
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                trainable=True,
            )
        self.built = True

    def call(self, inputs):
        if not self.built:
            # Subclassed models are not built by __call__; build in the model's scope.
            self.build(nest.map_structure(lambda t: t.shape, inputs))
        if isinstance(inputs, dict):
            names = [layer.name for layer in self.dense_layers]
            missing = set(names) - set(inputs)
            if missing:
                raise ValueError(
                    "The `inputs` dictionary does not match the structure expected by the "
                    f"model.\n\tExpected keys: {set(names)}\n\tReceived keys: "
                    f"{set(inputs)}\n\tMissing keys: {missing}"
                )
            inputs = [inputs[name] for name in names]
        elif not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        result = None
        for x, layer in zip(inputs, self.dense_layers, strict=False):
            out = layer.call(x)
            result = out if result is None else result + out
        if self.use_bias:
            result = nn_ops.bias_add(result, self.bias)
        return self.activation(result) if self.activation is not None else result

    def get_config(self) -> dict:
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": self.dtype,
            "units": self.units,
            "activation": activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": initializers.serialize(self.kernel_initializer),
            "bias_initializer": initializers.serialize(self.bias_initializer),
            "kernel_regularizer": regularizers.serialize(self.kernel_regularizer),
            "bias_regularizer": regularizers.serialize(self.bias_regularizer),
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


class WideDeepModel(Model):
    """`activation(linear_model(linear_inputs) + dnn_model(dnn_inputs))`; a pair of
    inputs splits between them, anything else goes to both."""

    def __init__(self, linear_model, dnn_model, activation=None, **kwargs):
        super().__init__(**kwargs)
        self.linear_model = linear_model
        self.dnn_model = dnn_model
        self.activation = activations.get(activation)

    def call(self, inputs, training=None):
        if isinstance(inputs, (list, tuple)) and len(inputs) == 2:
            linear_inputs, dnn_inputs = inputs
        else:
            linear_inputs = dnn_inputs = inputs
        output = nest.map_structure(
            lambda a, b: a + b, self.linear_model(linear_inputs), self.dnn_model(dnn_inputs)
        )
        if self.activation is not None:
            return nest.map_structure(self.activation, output)
        return output

    def compile(self, optimizer="rmsprop", *args, **kwargs):
        if isinstance(optimizer, (list, tuple)):
            pair = [optimizers.get(o) for o in optimizer]
            super().compile(pair[0], *args, **kwargs)
            self.optimizer = pair
        else:
            super().compile(optimizer, *args, **kwargs)

    def _training_updates(self) -> list:
        linear_opt, dnn_opt = (
            self.optimizer if isinstance(self.optimizer, list) else [self.optimizer] * 2
        )
        with ops.name_scope("training"):
            updates = linear_opt.get_updates(
                loss=self.total_loss, params=self.linear_model.trainable_weights
            )
            updates += dnn_opt.get_updates(
                loss=self.total_loss, params=self.dnn_model.trainable_weights
            )
        return updates + self.updates

    def get_config(self) -> dict:
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": self.dtype,
            "linear_model": layer_configs.serialize(self.linear_model),
            "dnn_model": layer_configs.serialize(self.dnn_model),
            "activation": activations.serialize(self.activation),
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        linear = layer_configs.deserialize(config.pop("linear_model"), custom_objects)
        dnn = layer_configs.deserialize(config.pop("dnn_model"), custom_objects)
        return cls(linear, dnn, **config)


layer_configs.register_layer_classes(LinearModel=LinearModel, WideDeepModel=WideDeepModel)
