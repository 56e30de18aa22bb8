"""`tf.lite.TocoConverter` and `tf.lite.toco_convert`: TF 2.21 keeps both only as
deprecated wrappers, and so does asyncflow.

`TocoConverter`'s constructors return a `TFLiteConverter` (as TF's do); `toco_convert`
converts a frozen GraphDef with `TFLiteConverter`, taking the keyword flags TF's
`build_model_flags`/`build_conversion_flags` take that matter to this converter and
ignoring the others, as TF ignores unknown ones. Each logs TF's deprecation warning
once.
"""

from __future__ import annotations

import sys

from asyncflow import dtypes, tf_logging
from asyncflow.lite.converter import Optimize, TFLiteConverter

_warned: set[str] = set()


def _deprecated(name: str, module: str, instead: str) -> None:
    if name in _warned:
        return
    _warned.add(name)
    frame = sys._getframe(2)
    tf_logging.warning(
        "From %s:%d: %s (from %s) is deprecated and will be removed in a future version.\n"
        "Instructions for updating:\nUse `%s` instead.",
        frame.f_code.co_filename,
        frame.f_lineno,
        name,
        module,
        instead,
    )


class TocoConverter:
    """Converts a TensorFlow model to TFLite: deprecated, use `lite.TFLiteConverter`."""

    @classmethod
    def from_session(cls, sess, input_tensors, output_tensors) -> TFLiteConverter:
        _deprecated(
            "TocoConverter.from_session",
            "tensorflow.lite.python.lite",
            "lite.TFLiteConverter.from_session",
        )
        return TFLiteConverter.from_session(sess, input_tensors, output_tensors)

    @classmethod
    def from_frozen_graph(
        cls, graph_def_file, input_arrays, output_arrays, input_shapes=None
    ) -> TFLiteConverter:
        _deprecated(
            "TocoConverter.from_frozen_graph",
            "tensorflow.lite.python.lite",
            "lite.TFLiteConverter.from_frozen_graph",
        )
        return TFLiteConverter.from_frozen_graph(
            graph_def_file, input_arrays, output_arrays, input_shapes
        )

    @classmethod
    def from_saved_model(
        cls,
        saved_model_dir,
        input_arrays=None,
        input_shapes=None,
        output_arrays=None,
        tag_set=None,
        signature_key=None,
    ) -> TFLiteConverter:
        _deprecated(
            "TocoConverter.from_saved_model",
            "tensorflow.lite.python.lite",
            "lite.TFLiteConverter.from_saved_model",
        )
        return TFLiteConverter.from_saved_model(
            saved_model_dir, input_arrays, input_shapes, output_arrays, tag_set, signature_key
        )

    @classmethod
    def from_keras_model_file(
        cls, model_file, input_arrays=None, input_shapes=None, output_arrays=None
    ):
        """Raises:
        ValueError: asyncflow's converter takes no Keras HDF5 model file."""
        _deprecated(
            "TocoConverter.from_keras_model_file",
            "tensorflow.lite.python.lite",
            "lite.TFLiteConverter.from_keras_model_file",
        )
        raise ValueError(
            "asyncflow's TFLiteConverter has no from_keras_model_file: save the Keras "
            "model's session graph and use from_session or from_frozen_graph."
        )


# Conversion flags (TF's build_conversion_flags) that set a TFLiteConverter attribute.
_ATTRIBUTES = (
    "inference_type",
    "inference_input_type",
    "allow_custom_ops",
    "drop_control_dependency",
    "reorder_across_fake_quant",
    "change_concat_input_ranges",
    "default_ranges_stats",
    "dump_graphviz_dir",
    "dump_graphviz_video",
    "conversion_summary_dir",
)


def toco_convert(input_data, input_tensors, output_tensors, *args, **kwargs) -> bytes:
    """Converts GraphDef `input_data` to TFLite bytes: deprecated, use
    `lite.TFLiteConverter`.

    Raises:
      TypeError: positional flags (TF takes them by keyword only).
      ConverterError, ValueError: as `TFLiteConverter.convert`.
    """
    _deprecated("toco_convert", "tensorflow.lite.python.convert", "lite.TFLiteConverter")
    if args:
        raise TypeError(
            f"convert_graphdef() takes 3 positional arguments but {3 + len(args)} were given"
        )
    conv = TFLiteConverter(input_data, input_tensors, output_tensors)
    shapes = kwargs.get("input_shapes")
    if shapes is not None:
        # TensorShapes, as TF reads them (`shape.rank`: a list fails there too).
        conv._inputs = [
            (name, dtype, None if shape.rank is None else shape.as_list())
            for (name, dtype, _), shape in zip(conv._inputs, shapes, strict=True)
        ]
    for key in _ATTRIBUTES:
        if key in kwargs:
            setattr(conv, key, kwargs[key])
    if kwargs.get("quantized_input_stats") is not None:
        conv.quantized_input_stats = kwargs["quantized_input_stats"]
    if kwargs.get("post_training_quantize"):
        conv.optimizations = {Optimize.DEFAULT}
        conv._legacy_dynamic_range = True
        if kwargs.get("quantize_to_float16"):
            conv.target_spec.supported_types = {dtypes.float16}
    return conv.convert()
