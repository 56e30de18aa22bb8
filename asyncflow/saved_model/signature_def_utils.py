"""SignatureDef builders (TF's `saved_model.signature_def_utils`)."""

from __future__ import annotations

from asyncflow.protos.meta_graph_pb2 import SignatureDef
from asyncflow.saved_model import signature_constants as sc
from asyncflow.saved_model.utils import build_tensor_info

__all__ = [
    "build_signature_def",
    "predict_signature_def",
    "classification_signature_def",
    "regression_signature_def",
    "is_valid_signature",
]


def build_signature_def(inputs=None, outputs=None, method_name=None, defaults=None):
    """A SignatureDef from {key: TensorInfo} maps and a method name; `defaults` maps an
    argument to its default, a constant tensor (its value is recorded).

    Raises:
      ValueError: a default that is not a Const op's output.
    """
    sig = SignatureDef(method_name=method_name or "")
    for k, v in (inputs or {}).items():
        sig.inputs[k].CopyFrom(v)
    for k, v in (outputs or {}).items():
        sig.outputs[k].CopyFrom(v)
    for arg, default in (defaults or {}).items():
        if getattr(getattr(default, "op", None), "type", None) != "Const":
            raise ValueError(
                f"Unable to convert object {default!s} of type {type(default)} to TensorProto."
            )
        sig.defaults[arg].CopyFrom(default.op.get_attr("value"))
    return sig


def predict_signature_def(inputs, outputs) -> SignatureDef:
    """A predict SignatureDef from {key: Tensor} maps.

    Raises:
      ValueError: inputs or outputs is None or empty.
    """
    if inputs is None or not inputs:
        raise ValueError("Prediction inputs cannot be None or empty.")
    if outputs is None or not outputs:
        raise ValueError("Prediction outputs cannot be None or empty.")
    return build_signature_def(
        {k: build_tensor_info(t) for k, t in inputs.items()},
        {k: build_tensor_info(t) for k, t in outputs.items()},
        sc.PREDICT_METHOD_NAME,
    )


def classification_signature_def(examples, classes, scores) -> SignatureDef:
    if examples is None:
        raise ValueError("Classification examples cannot be None.")
    if classes is None and scores is None:
        raise ValueError("Classification classes and scores cannot both be None.")
    outputs = {}
    if classes is not None:
        outputs[sc.CLASSIFY_OUTPUT_CLASSES] = build_tensor_info(classes)
    if scores is not None:
        outputs[sc.CLASSIFY_OUTPUT_SCORES] = build_tensor_info(scores)
    return build_signature_def(
        {sc.CLASSIFY_INPUTS: build_tensor_info(examples)}, outputs, sc.CLASSIFY_METHOD_NAME
    )


def regression_signature_def(examples, predictions) -> SignatureDef:
    if examples is None:
        raise ValueError("Regression examples cannot be None.")
    if predictions is None:
        raise ValueError("Regression predictions cannot be None.")
    return build_signature_def(
        {sc.REGRESS_INPUTS: build_tensor_info(examples)},
        {sc.REGRESS_OUTPUTS: build_tensor_info(predictions)},
        sc.REGRESS_METHOD_NAME,
    )


def is_valid_signature(signature_def) -> bool:
    """Whether `signature_def` is a well-formed SignatureDef with inputs and outputs."""
    if not isinstance(signature_def, SignatureDef):
        return False
    if not signature_def.method_name or not signature_def.outputs:
        return False
    infos = list(signature_def.inputs.values()) + list(signature_def.outputs.values())
    return all(":" in i.name for i in infos)
