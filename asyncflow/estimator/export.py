"""`tf.estimator.export`: serving input receivers and the export outputs (TF1's).

A serving_input_receiver_fn returns a ServingInputReceiver: the tensors a served model
is fed (`receiver_tensors`, e.g. serialized tf.Examples) and the features the model_fn
sees (parsed from them). `build_all_signature_defs` turns an EstimatorSpec's
export_outputs into SignatureDefs over those tensors, leaving out, as TF does, the
Classify/Regress signatures whose input is not one string tensor.
"""

from __future__ import annotations

import collections
import logging

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.estimator.export_output import (
    ClassificationOutput,
    ExportOutput,
    PredictOutput,
    RegressionOutput,
)
from asyncflow.ops import array_ops, parsing_ops
from asyncflow.saved_model import signature_def_utils
from asyncflow.sparse_tensor import SparseTensor

__all__ = [
    "ClassificationOutput",
    "ExportOutput",
    "PredictOutput",
    "RegressionOutput",
    "ServingInputReceiver",
    "TensorServingInputReceiver",
    "build_parsing_serving_input_receiver_fn",
    "build_raw_serving_input_receiver_fn",
]

logger = logging.getLogger("asyncflow.estimator")

_TENSOR_KINDS = (ops.Tensor, SparseTensor)


def _checked_features(features):
    if features is None:
        raise ValueError("features must be defined.")
    if not isinstance(features, dict):
        features = {"feature": features}
    for name, tensor in features.items():
        if not isinstance(tensor, _TENSOR_KINDS):
            raise ValueError(f"feature {name} must be a Tensor, SparseTensor, or RaggedTensor.")
    return features


def _checked_receivers(receiver_tensors, what="receiver_tensor"):
    if receiver_tensors is None:
        raise ValueError("receiver_tensors must be defined.")
    if not isinstance(receiver_tensors, dict):
        receiver_tensors = {"input": receiver_tensors}
    for name, tensor in receiver_tensors.items():
        if not isinstance(name, str):
            raise ValueError(f"{what} keys must be strings: {name}.")
        if not isinstance(tensor, _TENSOR_KINDS):
            raise ValueError(f"{what} {name} must be a Tensor, SparseTensor, or RaggedTensor.")
    return receiver_tensors


_RECEIVER_FIELDS = "features receiver_tensors receiver_tensors_alternatives"


class ServingInputReceiver(collections.namedtuple("ServingInputReceiver", _RECEIVER_FIELDS)):
    """The serving inputs (receiver_tensors) and the features built from them.

    A single tensor for features becomes {'feature': t}; for receiver_tensors,
    {'input': t}.

    Raises:
      ValueError: a missing argument; a value that is not a Tensor or SparseTensor; a
        receiver key that is not a string.
    """

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        features = _checked_features(features)
        receiver_tensors = _checked_receivers(receiver_tensors)
        if receiver_tensors_alternatives is not None:
            if not isinstance(receiver_tensors_alternatives, dict):
                raise ValueError(
                    "receiver_tensors_alternatives must be a dict: "
                    f"{receiver_tensors_alternatives}."
                )
            receiver_tensors_alternatives = {
                name: _checked_receivers(tensors)
                for name, tensors in receiver_tensors_alternatives.items()
            }
        return super().__new__(cls, features, receiver_tensors, receiver_tensors_alternatives)


class TensorServingInputReceiver(
    collections.namedtuple("TensorServingInputReceiver", _RECEIVER_FIELDS)
):
    """A receiver whose features are one Tensor, passed to the model_fn unwrapped.

    Raises:
      ValueError: as ServingInputReceiver's.
    """

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        if features is None:
            raise ValueError("features must be defined.")
        inner = ServingInputReceiver({"feature": features}, receiver_tensors,
                                     receiver_tensors_alternatives)  # fmt: skip
        return super().__new__(
            cls, features, inner.receiver_tensors, inner.receiver_tensors_alternatives
        )


def build_parsing_serving_input_receiver_fn(feature_spec, default_batch_size=None):
    """A serving_input_receiver_fn that parses serialized tf.Examples per feature_spec.

    The receiver is {'examples': a string placeholder 'input_example_tensor' of shape
    [default_batch_size]}.
    """

    def serving_input_receiver_fn():
        serialized = array_ops.placeholder(
            dtype=dtypes.string, shape=[default_batch_size], name="input_example_tensor"
        )
        features = parsing_ops.parse_example(serialized, feature_spec)
        return ServingInputReceiver(features, {"examples": serialized})

    return serving_input_receiver_fn


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
    """A serving_input_receiver_fn feeding each feature through its own placeholder.

    Each placeholder takes the feature's dtype, its op name, and its shape with the
    batch dimension set to default_batch_size.
    """

    def serving_input_receiver_fn():
        receivers = {}
        for name, tensor in features.items():
            shape = tensor.shape.as_list() if tensor.shape.ndims is not None else None
            if shape:
                shape = [default_batch_size, *shape[1:]]
            receivers[name] = array_ops.placeholder(
                dtype=tensor.dtype, shape=shape, name=tensor.op.name
            )
        return ServingInputReceiver(receivers, dict(receivers))

    return serving_input_receiver_fn


def build_all_signature_defs(receiver_tensors, export_outputs, alternatives=None) -> dict:
    """The SignatureDefs of export_outputs over receiver_tensors (and alternatives).

    Signatures that cannot take these inputs (Classify/Regress over anything but one
    string tensor) are left out with a warning, as TF leaves them out.

    Raises:
      ValueError: export_outputs is not a dict of ExportOutputs.
    """
    if not isinstance(export_outputs, dict):
        raise ValueError(f"export_outputs must be a dict and not{type(export_outputs)}")
    receiver_sets = {None: receiver_tensors, **(alternatives or {})}
    signatures = {}
    for receiver_name, receivers in receiver_sets.items():
        for key, output in export_outputs.items():
            if not isinstance(output, ExportOutput):
                raise ValueError(
                    f"export_outputs must be a dict of ExportOutputs, got {output} for {key}."
                )
            name = key if receiver_name is None else f"{receiver_name}:{key}"
            try:
                signature = output.as_signature_def(receivers)
            except ValueError as e:
                logger.warning("Signature %s is left out of the export: %s", name, e)
                continue
            if signature_def_utils.is_valid_signature(signature):
                signatures[name] = signature
    if "serving_default" not in signatures:
        logger.warning("Export includes no default signature!")
    return signatures
