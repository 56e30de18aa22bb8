"""The tf.compat.v1 endpoints TF 2.21 marks deprecated (a notice on their first call,
an error after `tf.experimental.enable_strict_mode()`; see asyncflow/deprecation.py),
and the deprecated arguments of others.  `install()` wraps each function once and puts
the wrapper wherever the public namespaces hold the original (tf.argmax and
tf.math.argmax are one function), so every spelling gives one notice, as TF's.
"""

from __future__ import annotations

from asyncflow import deprecation

__all__ = ["install"]

_CAST = "Use `tf.cast` instead."
_AXIS = "Use the `axis` argument instead"
_KEEP_DIMS = "keep_dims is deprecated, use keepdims instead"

# name under asyncflow -> instructions (the endpoint is deprecated)
FUNCTIONS = {
    "to_float": _CAST,
    "to_int32": _CAST,
    "to_int64": _CAST,
    "to_double": _CAST,
    "to_bfloat16": _CAST,
    "to_complex64": _CAST,
    "to_complex128": _CAST,
    "initialize_all_variables": "Use `tf.global_variables_initializer` instead.",
    "initialize_local_variables": "Use `tf.local_variables_initializer` instead.",
    "all_variables": "Please use tf.global_variables instead.",
    "div": "Deprecated in favor of operator or tf.math.divide.",
    "arg_max": "Use `tf.math.argmax` instead",
    "arg_min": "Use `tf.math.argmin` instead",
    "sparse_to_dense": "Create a `tf.sparse.SparseTensor` and use `tf.sparse.to_dense` instead.",
    "multinomial": "Use `tf.random.categorical` instead.",
    "colocate_with": "Colocations handled automatically by placer.",
    "substr": "Use `tf.strings.substr` instead of `tf.substr`.",
    "test.is_gpu_available": "Use `tf.config.list_physical_devices('GPU')` instead.",
    "train.string_input_producer": "Queue-based input pipelines have been replaced by "
    "`tf.data`. Use `tf.data.Dataset.from_tensor_slices(string_tensor).shuffle("
    "tf.shape(input_tensor, out_type=tf.int64)[0]).repeat(num_epochs)`. If "
    "`shuffle=False`, omit the `.shuffle(...)`.",
    "graph_util.extract_sub_graph": "This API was designed for TensorFlow v1. See "
    "https://www.tensorflow.org/guide/migrate for instructions on how to migrate your code "
    "to TensorFlow v2.",
}

# name under asyncflow -> (instructions, deprecated argument names)
ARGUMENTS = {
    "reduce_sum": (_KEEP_DIMS, "keep_dims"),
    "reduce_max": (_KEEP_DIMS, "keep_dims"),
    "reduce_min": (_KEEP_DIMS, "keep_dims"),
    "reduce_prod": (_KEEP_DIMS, "keep_dims"),
    "reduce_all": (_KEEP_DIMS, "keep_dims"),
    "reduce_any": (_KEEP_DIMS, "keep_dims"),
    "reduce_logsumexp": (_KEEP_DIMS, "keep_dims"),
    "count_nonzero": (_KEEP_DIMS, "keep_dims"),
    "nn.softmax": ("dim is deprecated, use axis instead", "dim"),
    "nn.log_softmax": ("dim is deprecated, use axis instead", "dim"),
    "argmax": (_AXIS, "dimension"),
    "argmin": (_AXIS, "dimension"),
    "squeeze": (_AXIS, "squeeze_dims"),
    "expand_dims": (_AXIS, "dim"),
    "nn.dropout": (
        "Please use `rate` instead of `keep_prob`. Rate should be set to `rate = 1 - keep_prob`.",
        "keep_prob",
    ),
}

# (class, method) -> instructions
_ONE_SHOT = (
    "This is a deprecated API that should only be used in TF 1 graph mode and legacy TF 2 "
    "graph mode available through `tf.compat.v1`. In all other situations -- namely, eager "
    "mode and inside `tf.function` -- you can consume dataset elements using `for elem in "
    "dataset: ...` or by explicitly creating iterator via `iterator = iter(dataset)` and "
    "fetching its elements via `values = next(iterator)`."
)


_MODULE_NAMESPACES = ("nn", "train", "test", "graph_util")


def _lookup(root, dotted: str):
    obj = root
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _namespaces(root) -> list:
    """The public namespaces that may hold an endpoint: the package, its lazy
    namespaces (tf.math, ...) and the modules that are TF1 namespaces themselves.  The
    defining modules keep the originals, so the library's own calls give no notice."""
    from asyncflow.namespaces import Namespace

    out = [root]
    out += [v for v in vars(root).values() if isinstance(v, Namespace)]
    out += [getattr(root, n) for n in _MODULE_NAMESPACES]
    return out


def install(root) -> None:
    """Wrap the deprecated endpoints of `root` (the asyncflow package) wherever its
    namespaces hold them."""
    wrappers, endpoints = {}, {}
    for name, instructions in FUNCTIONS.items():
        func = _lookup(root, name)
        shown = name.rsplit(".", 1)[-1]
        # Only under its deprecated name: an alias of a current endpoint
        # (initialize_all_variables is global_variables_initializer) keeps no notice.
        endpoints[(id(func), shown)] = deprecation.deprecated(instructions, shown)(func)
    for name, (instructions, *args) in ARGUMENTS.items():
        func = _lookup(root, name)
        shown = name.rsplit(".", 1)[-1]
        wrapper = deprecation.deprecated_args(instructions, *args, name=shown)(func)
        wrappers[id(func)] = wrapper
    for ns in _namespaces(root):
        for key, value in list(vars(ns).items()):
            wrapper = endpoints.get((id(value), key)) or wrappers.get(id(value))
            if wrapper is not None:
                setattr(ns, key, wrapper)
    dataset = root.data.Dataset
    method = dataset.make_one_shot_iterator
    dataset.make_one_shot_iterator = deprecation.deprecated(
        _ONE_SHOT, "DatasetV1.make_one_shot_iterator"
    )(method)
