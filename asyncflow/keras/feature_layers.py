"""`tf.keras.layers.DenseFeatures` and `tf.keras.experimental.SequenceFeatures`: feature
columns as Keras layers (TF1's, Keras 2).

Each is `tf.feature_column.input_layer` (or `sequence_input_layer`) in the layer's own
variable scope, "dense_features", "sequence_features", ... as TF names them: a features
dict in, the dense tensor out (SequenceFeatures: and the sequence lengths).  The layer
holds the variables its columns made (embedding weights) as its weights; they are in
GLOBAL_VARIABLES (and TRAINABLE_VARIABLES), not MODEL_VARIABLES, as TF's.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import var_scope
from asyncflow.feature_column import _dense_columns, _dense_layer
from asyncflow.feature_column_sequence import _check_sequence_columns, _sequence_layer
from asyncflow.keras.engine import Layer

__all__ = ["DenseFeatures", "SequenceFeatures"]


class _FeaturesLayer(Layer):
    """What both layers share: the columns, checked when made, and the variables a call
    makes, kept as the layer's weights."""

    def __init__(self, feature_columns, trainable=True, name=None, **kwargs):
        self._feature_columns = self._checked(feature_columns)
        super().__init__(trainable=trainable, name=name, **kwargs)

    def __call__(self, features, *args, **kwargs):
        if not isinstance(features, dict):
            raise ValueError(f"We expected a dictionary here. Instead we got: {features}")
        graph = ops.get_default_graph()
        before = set(graph.get_collection(ops.GraphKeys.GLOBAL_VARIABLES))
        scope = var_scope.variable_scope(self.name)
        outputs = self._build_outputs(features, scope, *args, **kwargs)
        self._record(features, outputs, kwargs)  # (called on Inputs: a node of the model)
        held = self._trainable_weights if self.trainable else self._non_trainable_weights
        held.extend(
            v for v in graph.get_collection(ops.GraphKeys.GLOBAL_VARIABLES) if v not in before
        )
        self.built = True
        return outputs


class DenseFeatures(_FeaturesLayer):
    """The dense columns' values, each flattened to [batch, n], concatenated in the order
    of the columns' names: [batch, sum of n].

    Raises:
      ValueError: no columns or a column that is not dense (when made); a features
        argument that is not a dict, or a feature missing from it (when called).
    """

    def _checked(self, feature_columns):
        return _dense_columns(feature_columns)

    def _build_outputs(self, features, scope, cols_to_output_tensors=None, training=None):
        del training
        collections = [ops.GraphKeys.GLOBAL_VARIABLES]
        return _dense_layer(
            features, self._feature_columns, collections, self.trainable, None,
            cols_to_output_tensors, scope,
        )  # fmt: skip


class SequenceFeatures(_FeaturesLayer):
    """The sequence columns' values as one [batch, T, D] tensor, and the int64 [batch]
    sequence lengths.

    Raises:
      ValueError: no columns or a column that is not a sequence column (when made).
    """

    def _checked(self, feature_columns):
        return _check_sequence_columns(feature_columns)

    def _build_outputs(self, features, scope, training=None):
        del training
        return _sequence_layer(features, self._feature_columns, None, self.trainable, scope)
