"""Export outputs: what a served model returns for one signature (TF1's export_output).

An EstimatorSpec's `export_outputs` maps signature keys to these; `export_saved_model`
turns each into a SignatureDef over the serving receiver's tensors.
"""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.saved_model import signature_def_utils

__all__ = ["ExportOutput", "PredictOutput", "ClassificationOutput", "RegressionOutput"]


class ExportOutput:
    """Base of the export outputs: one serving signature's outputs."""

    def as_signature_def(self, receiver_tensors):
        raise NotImplementedError


def _single_receiver(receiver_tensors, kind: str):
    """The one string input a Classify or Regress signature takes.

    Raises:
      ValueError: several receiver tensors, or one that is not a string tensor.
    """
    if len(receiver_tensors) != 1:
        raise ValueError(
            f"{kind} signatures can only accept a single tensor input of type "
            f"tf.string. Please check to make sure that you have structured the serving "
            f"input function so that ServingInputReceiver.receiver_tensors is a dict "
            f"with a single tensor. Received: {receiver_tensors}"
        )
    examples = next(iter(receiver_tensors.values()))
    if examples.dtype != dtypes.string:
        raise ValueError(f"{kind} input must be a single string Tensor; got {receiver_tensors}")
    return examples


class PredictOutput(ExportOutput):
    """Named output tensors for a Predict signature.

    Raises:
      ValueError: an output that is not a Tensor.
    """

    def __init__(self, outputs):
        if not isinstance(outputs, dict):
            outputs = {"output": outputs}
        for value in outputs.values():
            if not isinstance(value, ops.Tensor):
                raise ValueError(f"Prediction output value must be a Tensor; got {value}.")
        self._outputs = dict(outputs)

    @property
    def outputs(self):
        return self._outputs

    def as_signature_def(self, receiver_tensors):
        return signature_def_utils.predict_signature_def(receiver_tensors, self._outputs)


class ClassificationOutput(ExportOutput):
    """Classes and/or scores for a Classify signature.

    Raises:
      ValueError: neither classes nor scores; a wrong dtype for either.
    """

    def __init__(self, scores=None, classes=None):
        if scores is None and classes is None:
            raise ValueError("At least one of scores and classes must be set.")
        self._scores = scores
        self._classes = classes

    @property
    def scores(self):
        return self._scores

    @property
    def classes(self):
        return self._classes

    def as_signature_def(self, receiver_tensors):
        examples = _single_receiver(receiver_tensors, "Classification")
        return signature_def_utils.classification_signature_def(
            examples, self._classes, self._scores
        )


class RegressionOutput(ExportOutput):
    """One float value per example for a Regress signature.

    Raises:
      ValueError: value is not a Tensor.
    """

    def __init__(self, value):
        if not isinstance(value, ops.Tensor):
            raise ValueError(f"Regression output value must be a Tensor; got {value}.")
        self._value = value

    @property
    def value(self):
        return self._value

    def as_signature_def(self, receiver_tensors):
        examples = _single_receiver(receiver_tensors, "Regression")
        return signature_def_utils.regression_signature_def(examples, self._value)
