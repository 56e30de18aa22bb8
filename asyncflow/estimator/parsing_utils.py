"""classifier_parse_example_spec / regressor_parse_example_spec (TF1's estimator ones).

The feature columns' parse spec plus the label (and weight) features, for parsing
training data of the canned estimators from tf.Examples.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import feature_column as fc_lib
from asyncflow.ops.parsing_ops import FixedLenFeature

__all__ = ["classifier_parse_example_spec", "regressor_parse_example_spec"]


def _add_weight(spec: dict, weight_column) -> None:
    if weight_column is None:
        return
    if isinstance(weight_column, str):
        weight_column = fc_lib.numeric_column(weight_column)
    key = weight_column.key
    if key in spec:
        raise ValueError(
            "weight_column should not be used as feature. weight_column: "
            f"{key}, features: {spec.keys()}"
        )
    spec.update(fc_lib.make_parse_example_spec([weight_column]))


def _spec(feature_columns, label_key, label_spec, weight_column) -> dict:
    spec = fc_lib.make_parse_example_spec(feature_columns)
    if label_key in spec:
        raise ValueError(
            f"label should not be used as feature. label_key: {label_key}, features: {spec.keys()}"
        )
    spec[label_key] = label_spec
    _add_weight(spec, weight_column)
    return spec


def classifier_parse_example_spec(
    feature_columns, label_key, label_dtype=dtypes.int64, label_default=None, weight_column=None
) -> dict:
    """The parse spec of a classifier's features, its label ([1], label_dtype) and weight.

    Raises:
      ValueError: the label or weight key is also a feature's.
    """
    label = FixedLenFeature((1,), label_dtype, label_default)
    return _spec(feature_columns, label_key, label, weight_column)


def regressor_parse_example_spec(
    feature_columns,
    label_key,
    label_dtype=dtypes.float32,
    label_default=None,
    label_dimension=1,
    weight_column=None,
) -> dict:
    """The parse spec of a regressor's features, its label ([label_dimension]) and weight.

    Raises:
      ValueError: the label or weight key is also a feature's.
    """
    label = FixedLenFeature((label_dimension,), label_dtype, label_default)
    return _spec(feature_columns, label_key, label, weight_column)
