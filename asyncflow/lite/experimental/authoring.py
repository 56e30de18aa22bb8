"""`tf.lite.experimental.authoring.compatible`: checks, on a tf.function's first call,
that its graph converts to TFLite builtin ops.

The wrapped function runs as usual; its first call also traces a concrete function and
converts that graph with asyncflow's TFLiteConverter. Each op with no builtin TFLite
equivalent is reported as TF reports it: one warning naming them all (sorted), then
one "Op: tf.<type>" entry per op with the line that built it (TF lists its internal
frames too; asyncflow records the user's line). The messages are printed and kept for
`get_compatibility_log()`; `raise_exception=True` raises CompatibilityError instead of
returning.
"""

from __future__ import annotations

from asyncflow.lite.converter import ConverterError, OpsSet, TFLiteConverter

_SELECT = (
    "COMPATIBILITY WARNING: op '{ops}' require(s) \"Select TF Ops\" for model conversion "
    "for TensorFlow Lite. https://www.tensorflow.org/lite/guide/ops_select"
)


class CompatibilityError(Exception):
    """A function the checker found incompatible (with `raise_exception=True`)."""


class _Compatible:
    """A tf.function wrapped with a TFLite compatibility check."""

    def __init__(
        self,
        target,
        converter_target_spec=None,
        converter_allow_custom_ops=None,
        raise_exception=False,
    ):
        self._func = target
        self._converter_target_spec = converter_target_spec
        self._converter_allow_custom_ops = converter_allow_custom_ops
        self._raise_exception = raise_exception
        self._verified = False
        self._log_messages: list[str] = []

    def __call__(self, *args, **kwargs):
        result = self._func(*args, **kwargs)
        if not self._verified:
            concrete = self._func.get_concrete_function(*args, **kwargs)
            self._check(concrete)
            self._verified = True
            if self._log_messages and self._raise_exception:
                raise CompatibilityError(f"CompatibilityException at {self._func!r}")
        return result

    def get_concrete_function(self, *args, **kwargs):
        return self._func.get_concrete_function(*args, **kwargs)

    def _check(self, concrete) -> None:
        graph = concrete.graph
        conv = TFLiteConverter(
            graph.as_graph_def(), graph.inputs[: len(graph.inputs)], graph.outputs
        )
        if self._converter_target_spec is not None:
            conv.target_spec = self._converter_target_spec
        if self._converter_allow_custom_ops is not None:
            conv.allow_custom_ops = self._converter_allow_custom_ops
        if OpsSet.SELECT_TF_OPS in conv.target_spec.supported_ops:
            return  # ops without builtins may run as TF ops
        try:
            conv.convert()
        except ConverterError as exc:
            ops = getattr(exc, "unsupported_ops", None)
            if not ops:
                raise
            # The converter's ops are its own import of the graph: report the traced ones.
            self._report([graph.get_operation_by_name(op.name) for op in ops])

    def _report(self, ops) -> None:
        names = sorted(f"tf.{op.type}" for op in ops)
        self._log(_SELECT.format(ops=", ".join(names)))
        # TF lists the ops by type, last type first, the latest op of a type first.
        ordered = sorted(enumerate(ops), key=lambda item: (item[1].type, item[0]), reverse=True)
        for _, op in ordered:
            self._log(f"Op: tf.{op.type}\n  - {op.traceback}\n")

    def _log(self, message: str) -> None:
        self._log_messages.append(message)
        print(message)

    def get_compatibility_log(self) -> list[str]:
        """The messages the check printed."""
        return list(self._log_messages)


def compatible(target=None, converter_target_spec=None, **kwargs):
    """Wraps tf.function `target` with a TFLite compatibility check (a decorator, with
    or without arguments: `converter_target_spec`, `converter_allow_custom_ops`,
    `raise_exception`)."""
    if target is None:

        def wrap(func):
            return _Compatible(func, converter_target_spec, **kwargs)

        return wrap
    return _Compatible(target, converter_target_spec, **kwargs)
