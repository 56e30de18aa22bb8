"""TF 2's switches as tf.compat.v1 offers them, and top-level odds of that namespace:
`conv` (TF's generic Conv op), `check_pinned`, `nondifferentiable_batch_function`,
the library loaders, `LogMessage`.

What each `enable_*` does here, against what it does in TF 2.21 (v2 behaviour off):
- enable_resource_variables: really switches: `Variable(...)` and `get_variable`
  without `use_resource` make ResourceVariables (disable_resource_variables switches
  back; resource_variables_enabled() says which).
- enable_tensor_equality: switches the flag TF reads; as in TF, in a graph `==` stays
  identity and tensors stay hashable (TF compares elementwise only when executing
  eagerly outside functions, which never happens here).
- enable_control_flow_v2: accepted; cond and while_loop still build TF1's Switch/Merge/
  Enter/Exit graphs (TF would build If/While ops).  The values are the same; a warning
  says the graph differs, and control_flow_v2_enabled() stays False.
- enable_eager_execution, enable_v2_behavior (which turns eager execution on), and
  enable_v2_tensorshape (whose TensorShape entries are ints, not the Dimensions
  asyncflow's shape code reads): NotImplementedError naming what is not supported,
  before anything changes.
"""

from __future__ import annotations

import errno
import os

from asyncflow import errors, tf_logging
from asyncflow import graph as ops
from asyncflow import variables as _variables
from asyncflow.ops import batch_ops
from asyncflow.ops.top_misc_ops import check_pinned
from asyncflow.protos.event_pb2 import LogMessage

__all__ = [
    "LogMessage",
    "check_pinned",
    "conv",
    "enable_control_flow_v2",
    "enable_eager_execution",
    "enable_resource_variables",
    "enable_tensor_equality",
    "enable_v2_behavior",
    "enable_v2_tensorshape",
    "load_file_system_library",
    "load_library",
    "load_op_library",
    "nondifferentiable_batch_function",
]


# -- switches -------------------------------------------------------------------------


def enable_eager_execution(config=None, device_policy=None, execution_mode=None) -> None:
    """Raises NotImplementedError: asyncflow builds graphs and runs them in sessions;
    it has no eager mode."""
    del config, device_policy, execution_mode
    raise NotImplementedError(
        "Eager execution is not supported: asyncflow builds TF1 graphs and runs them with "
        "Session.run."
    )


def enable_v2_behavior() -> None:
    """Raises NotImplementedError: TF 2 behaviour is eager execution, which asyncflow
    does not have (nothing is switched)."""
    raise NotImplementedError(
        "enable_v2_behavior is not supported: it turns on eager execution, which asyncflow "
        "does not have (it builds TF1 graphs). Resource variables can be enabled alone with "
        "enable_resource_variables()."
    )


def enable_resource_variables() -> None:
    """Variables made without `use_resource` are ResourceVariables from now on."""
    _variables.set_default_use_resource(True)


def enable_tensor_equality() -> None:
    """TF's tensor-equality flag, on.  In a graph, as in TF, `==` stays identity and
    tensors stay hashable (TF compares elementwise only eagerly)."""
    ops.Tensor._USE_EQUALITY = True


def enable_control_flow_v2() -> None:
    """Accepted: cond and while_loop keep building TF1's control flow here (the same
    values; TF would build If/While ops)."""
    tf_logging.warning(
        "enable_control_flow_v2: asyncflow builds TF1 control flow (Switch/Merge/Enter/Exit); "
        "results are the same, the graph holds no If/While ops."
    )


def enable_v2_tensorshape() -> None:
    """Raises NotImplementedError: asyncflow's TensorShape is TF1's (entries are
    Dimensions), which its shape code relies on."""
    raise NotImplementedError(
        "enable_v2_tensorshape is not supported: asyncflow's TensorShape is TF1's (its entries "
        "are Dimensions; use tf.compat.dimension_value to read one)."
    )


# -- ops ------------------------------------------------------------------------------


def conv(
    input,  # noqa: A002 - TF's names
    filter,  # noqa: A002
    strides,
    padding,
    explicit_paddings=(),
    data_format="CHANNELS_LAST",
    dilations=(),
    batch_dims=1,
    groups=1,
    name=None,
):
    """`tf.conv`: TF's generic N-d Conv op (ops/conv_generic_ops.py).

    Raises:
      ValueError: attrs that do not fit the input's and filter's ranks (at build time).
    """
    attrs = {
        "strides": list(strides),
        "padding": padding,
        "explicit_paddings": list(explicit_paddings),
        "data_format": data_format,
        "dilations": list(dilations),
        "batch_dims": batch_dims,
        "groups": groups,
    }
    return ops.apply_op("Conv", [input, filter], attrs, name=name or "Conv").outputs[0]


def nondifferentiable_batch_function(
    num_batch_threads,
    max_batch_size,
    batch_timeout_micros,
    allowed_batch_sizes=None,
    max_enqueued_batches=10,
    autograph=True,
    enable_large_batch_splitting=True,
):
    """`tf.nondifferentiable_batch_function`: a decorator whose function runs as TF's
    BatchFunction op `batch/BatchFunction` (ops/batch_ops.py): calls from concurrent
    steps of a session are batched along dim 0 into one run of the function, and each
    step gets its own rows.  The op has no gradient (tf.gradients through it raises
    LookupError, as TF's); its shapes are unknown.  The arguments are checked as TF
    checks them.

    Raises:
      ValueError: a max_batch_size that is not positive, or allowed_batch_sizes not
        increasing or not ending at max_batch_size.
    """
    if max_batch_size <= 0:
        raise ValueError(f"max_batch_size must be positive, got {max_batch_size}")
    if allowed_batch_sizes:
        sizes = list(allowed_batch_sizes)
        if sizes != sorted(set(sizes)) or sizes[-1] != max_batch_size:
            raise ValueError(
                "allowed_batch_sizes must be increasing and end with max_batch_size "
                f"({max_batch_size}), got {sizes}"
            )

    del autograph  # (the function is built from Python as it is written)

    def decorator(fn):
        def batched(*args):
            with ops.name_scope("batch") as scope:
                return batch_ops.batch_function(
                    args,
                    [],
                    fn,
                    num_batch_threads,
                    max_batch_size,
                    batch_timeout_micros,
                    Tout=None,
                    max_enqueued_batches=max_enqueued_batches,
                    allowed_batch_sizes=allowed_batch_sizes or (),
                    shared_name=scope,
                    enable_large_batch_splitting=enable_large_batch_splitting,
                    arg_names=[f"batch_{i}" for i in range(len(args))],
                    structured=True,
                )

        batched.__name__ = getattr(fn, "__name__", "batched")
        batched.__doc__ = fn.__doc__
        return batched

    return decorator


# -- libraries ------------------------------------------------------------------------


def _cannot_run(path: str) -> errors.UnimplementedError:
    return errors.UnimplementedError(
        None,
        None,
        f"{path}: asyncflow cannot load TensorFlow kernel libraries (its ops are Python "
        "kernels); register the op's kernel with asyncflow instead",
    )


def load_op_library(library_filename):
    """`tf.load_op_library`.

    Raises:
      NotFoundError: no such file (TF's message).
      UnimplementedError: the file exists: a TF kernel library asyncflow cannot run.
    """
    if not os.path.exists(library_filename):
        raise errors.NotFoundError(
            None, None, f"{library_filename}: cannot open shared object file: No such file or "
            "directory"
        )  # fmt: skip
    raise _cannot_run(library_filename)


def load_file_system_library(library_filename):
    """`tf.compat.v1.load_file_system_library`: as load_op_library."""
    return load_op_library(library_filename)


def load_library(library_location):
    """`tf.load_library` (a file, or a folder of them).

    Raises:
      FileNotFoundError: no such file or folder (TF's message).
      UnimplementedError: it exists: TF kernel libraries asyncflow cannot run.
    """
    if not os.path.exists(library_location):
        raise FileNotFoundError(
            errno.ENOENT,
            "The file or folder to load kernel libraries from does not exist.",
            library_location,
        )
    raise _cannot_run(library_location)
