"""`tf.keras.export.ExportArchive`: a SavedModel of chosen endpoints of tracked Keras
models, for inference.

TF 2.21 in graph mode traces each endpoint as a tf.function and writes a TF2 SavedModel
(object graph, functions).  asyncflow writes no TF2 SavedModel; it writes the closest
form TF reads: a TF1 SavedModel (tag "serve") whose signatures are the endpoints, under
their names and, for the first, "serving_default" as TF's; inputs keyed "args_0",
"args_1", ... (fed through placeholders "<endpoint>_args_<i>"), outputs "output_0",
...; method "tensorflow/serving/predict"; the variables saved are those of the tracked
models and variable collections.  `tf.saved_model.load` (TF2) and
`tf.compat.v1.saved_model.load` read it and run the signatures.
"""

from __future__ import annotations

from asyncflow import framework_extras, nest, trackable
from asyncflow import variables as variables_mod
from asyncflow.keras import backend
from asyncflow.keras.engine import Layer
from asyncflow.ops import array_ops

__all__ = ["ExportArchive"]

_NO_SIGNATURE = (
    "If the `fn` argument provided is not a `tf.function`, you must provide an "
    "`input_signature` argument to specify the shape and dtype of the function arguments. "
    "Example:\n\nexport_archive.add_endpoint(\n    name='call',\n    fn=model.call,\n"
    "    input_signature=[\n        tf.TensorSpec(\n            shape=(None, 224, 224, 3),\n"
    "            dtype=tf.float32,\n        )\n    ],\n)"
)


class ExportArchive:
    """Endpoints (functions of tracked models' variables) exported as a SavedModel.

    Raises:
      ValueError: (track) not a Layer/trackable object, or a Layer not yet built;
        (add_endpoint) a name taken, or no `input_signature` for a plain function;
        (add_variable_collection) not a list/tuple/set of variables;
        (write_out) no endpoint.
    """

    def __init__(self):
        self._endpoint_names: list = []
        self._endpoint_signatures: dict = {}
        self._endpoint_fns: dict = {}
        self._collections: dict = {}
        self._tracked: list = []
        self.tensorflow_version = framework_extras.VERSION
        self.variables: list = []
        self.trainable_variables: list = []
        self.non_trainable_variables: list = []

    def track(self, resource) -> None:
        if not (isinstance(resource, Layer) or trackable.is_trackable(resource)):
            raise ValueError(
                "Invalid resource type. Expected an instance of a TensorFlow `Trackable` "
                "(such as a TF-Keras `Layer` or `Model`). Received instead an object of type "
                f"'{type(resource)}'. Object received: {resource}"
            )
        if isinstance(resource, Layer):
            if not resource.built:
                raise ValueError(
                    "The layer provided has not yet been built. It must be built before export."
                )
            self.variables += resource.variables
            self.trainable_variables += resource.trainable_variables
            self.non_trainable_variables += resource.non_trainable_variables
        self._tracked.append(resource)

    def add_endpoint(self, name, fn, input_signature=None) -> None:
        if name in self._endpoint_names:
            raise ValueError(f"Endpoint name '{name}' is already taken.")
        input_signature = input_signature or getattr(fn, "input_signature", None)
        if not input_signature:
            raise ValueError(_NO_SIGNATURE)
        self._endpoint_signatures[name] = input_signature
        self._endpoint_fns[name] = fn
        setattr(self, name, fn)
        self._endpoint_names.append(name)

    def add_variable_collection(self, name, variables) -> None:
        if not isinstance(variables, (list, tuple, set)):
            raise ValueError(
                "Expected `variables` to be a list/tuple/set. Received instead object of "
                f"type '{type(variables)}'."
            )
        if not all(isinstance(v, variables_mod.Variable) for v in variables):
            raise ValueError(
                "Expected all elements in `variables` to be `tf.Variable` instances. Found "
                f"instead the following types: {list({type(v) for v in variables})}"
            )
        self._collections[name] = list(variables)
        setattr(self, name, list(variables))

    def write_out(self, filepath, options=None) -> None:
        """Write the SavedModel at `filepath` and print its endpoints, as Keras does."""
        from asyncflow.saved_model import builder as builder_mod
        from asyncflow.saved_model import signature_def_utils, utils
        from asyncflow.train import saver as saver_mod

        if not self._endpoint_names:
            raise ValueError("No endpoints have been set yet. Call add_endpoint().")
        graph = backend.get_graph()
        signatures, printed = {}, []
        with graph.as_default():
            for name in self._endpoint_names:
                specs = nest.flatten(self._endpoint_signatures[name])
                feeds = [
                    array_ops.placeholder(s.dtype, s.shape, name=f"{name}_args_{i}")
                    for i, s in enumerate(specs)
                ]
                args = nest.pack_sequence_as(self._endpoint_signatures[name], feeds)
                outputs = nest.flatten(self._endpoint_fns[name](*args))
                signatures[name] = signature_def_utils.build_signature_def(
                    {f"args_{i}": utils.build_tensor_info(t) for i, t in enumerate(feeds)},
                    {f"output_{i}": utils.build_tensor_info(t) for i, t in enumerate(outputs)},
                    "tensorflow/serving/predict",
                )
                printed.append(_describe(name, specs, outputs, self._saved_variables()))
            if "serving_default" not in signatures:
                signatures["serving_default"] = signatures[self._endpoint_names[0]]
            saver = saver_mod.Saver(self._saved_variables() or None, allow_empty=True)
        builder = builder_mod.SavedModelBuilder(str(filepath))
        builder.add_meta_graph_and_variables(
            backend.get_session(), ["serve"], signature_def_map=signatures, saver=saver
        )
        builder.save()
        endpoints = "\n\n".join(printed)
        print(
            f"Saved artifact at '{filepath}'. The following endpoints are available:\n\n"
            f"{endpoints}"
        )

    def _saved_variables(self) -> list:
        seen, out = set(), []
        for v in self.variables + [v for vs in self._collections.values() for v in vs]:
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        return out


def _spec_text(t) -> str:
    return repr(framework_extras.TensorSpec(t.shape, t.dtype))


def _describe(name, specs, outputs, captured) -> str:
    lines = [f"* Endpoint '{name}'"]
    lines += [f"  args_{i} (POSITIONAL_ONLY): {s!r}" for i, s in enumerate(specs)]
    lines.append("Output Type:")
    lines += [f"  {_spec_text(t)}" for t in outputs]
    if captured:
        lines.append("Captures:")
        lines += [
            f"  {id(v)}: TensorSpec(shape=(), dtype=tf.resource, name=None)" for v in captured
        ]
    return "\n".join(lines)
