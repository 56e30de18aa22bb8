"""The runtime switches TF keeps in `tf.experimental`, `tf.config.experimental` and
`tf.errors`, as they behave in a TF1 graph program (TF 2.21, v2 behaviour disabled).

Most of them configure TF's eager context, which a graph program never initializes:
`async_scope` and `async_clear_error` then fail as TF's do, and
`experimental_connect_to_host` / `experimental_connect_to_cluster` refuse to run outside
eager mode (asyncflow's clusters are `tf.train.Server` and sessions' targets).  The others
record their setting where TF's only reach tf.function or control flow v2 calls, which a
TF1 graph does not make.  `register_filesystem_plugin` loads the library as TF does and
reports TF's errors; asyncflow cannot host TF's C filesystem plugins themselves.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import inspect
import os
import typing

import numpy as np

from asyncflow import errors
from asyncflow import graph as ops

__all__ = [
    "ClusterDeviceFilters",
    "FunctionType",
    "TensorLike",
    "async_clear_error",
    "async_scope",
    "disable_mlir_bridge",
    "enable_mlir_bridge",
    "experimental_connect_to_cluster",
    "experimental_connect_to_host",
    "function_executor_type",
    "output_all_intermediates",
    "raise_exception_on_not_ok_status",
    "register_filesystem_plugin",
    "types_namespace",
]

_NO_CONTEXT = "Context is not initialized."


class _Settings:
    """What the switches set (read by nothing in a graph program; kept for callers that
    read them back)."""

    executor_type = None
    output_all_intermediates = None
    mlir_bridge = None


settings = _Settings()


@contextlib.contextmanager
def async_scope():
    """`tf.experimental.async_scope()`.

    Raises:
      ValueError: always in a graph program: TF's eager context is not initialized.
    """
    raise ValueError(_NO_CONTEXT)
    yield  # (a context manager, as TF's)


def async_clear_error() -> None:
    """`tf.experimental.async_clear_error()`.

    Raises:
      ValueError: always in a graph program: TF's eager context is not initialized.
    """
    raise ValueError(_NO_CONTEXT)


@contextlib.contextmanager
def function_executor_type(executor_type):
    """`tf.experimental.function_executor_type(executor_type)`: functions called inside
    use `executor_type` (TF's function call option; graphs run by sessions are not
    functions, so it only records it)."""
    previous = settings.executor_type
    settings.executor_type = executor_type
    try:
        yield
    finally:
        settings.executor_type = previous


def output_all_intermediates(state) -> None:
    """`tf.experimental.output_all_intermediates(state)`: True, False or None (the
    default) for control flow v2's intermediates; TF1 graphs build v1 control flow."""
    settings.output_all_intermediates = state


def enable_mlir_bridge() -> None:
    """`tf.config.experimental.enable_mlir_bridge()`: recorded (TF's eager-context
    setting; sessions compile no XLA clusters in asyncflow)."""
    settings.mlir_bridge = True


def disable_mlir_bridge() -> None:
    """`tf.config.experimental.disable_mlir_bridge()`."""
    settings.mlir_bridge = False


def register_filesystem_plugin(plugin_location) -> None:
    """`tf.experimental.register_filesystem_plugin(plugin_location)`.

    Raises:
      FileNotFoundError: no file at `plugin_location` (TF's message).
      NotFoundError: the file is not a loadable library, or lacks TF_InitPlugin.
      UnimplementedError: a real TF filesystem plugin: asyncflow cannot host it.
    """
    if not os.path.exists(plugin_location):
        raise FileNotFoundError(
            errno.ENOENT,
            "The file to load file system plugin from does not exist.",
            plugin_location,
        )
    try:
        library = ctypes.CDLL(plugin_location)
    except OSError as e:
        raise errors.NotFoundError(None, None, str(e)) from None
    if not hasattr(library, "TF_InitPlugin"):
        raise errors.NotFoundError(
            None,
            None,
            f"{plugin_location}: undefined symbol: TF_InitPlugin\n\tFailed to load "
            f"TF_InitPlugin symbol for DSO: {plugin_location}",
        )
    raise errors.UnimplementedError(
        None, None, f"asyncflow cannot host TF's C filesystem plugins ({plugin_location})"
    )


class ClusterDeviceFilters:
    """`tf.config.experimental.ClusterDeviceFilters`: the devices each remote task may
    see, by job and task (`_as_cluster_device_filters()`: TF's ClusterDeviceFilters
    proto, jobs by name and tasks by index)."""

    def __init__(self):
        self._device_filters: dict = {}
        self._cluster_device_filters = None

    def set_device_filters(self, job_name, task_index, device_filters) -> None:
        """The filters of one task (strings, each a partial device name)."""
        assert all(isinstance(f, str) for f in device_filters)
        self._device_filters.setdefault(job_name, {})[task_index] = list(device_filters)
        self._cluster_device_filters = None

    def _as_cluster_device_filters(self):
        if self._cluster_device_filters is None:
            proto = _device_filters_class()()
            for job_name, tasks in sorted(self._device_filters.items()):
                if not isinstance(job_name, (str, bytes)):
                    raise TypeError(f"Job name {job_name!r} must be bytes or unicode")
                job = proto.jobs.add()
                job.name = job_name if isinstance(job_name, str) else job_name.decode()
                for index, filters in sorted(tasks.items()):
                    job.tasks[index].device_filters.extend(filters)
            self._cluster_device_filters = proto
        return self._cluster_device_filters


_DEVICE_FILTERS = None


def _device_filters_class():
    """TF's device_filters.proto messages, built once from their descriptor."""
    global _DEVICE_FILTERS
    if _DEVICE_FILTERS is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        f = descriptor_pb2.FileDescriptorProto(
            name="asyncflow/protos/device_filters.proto",
            package="asyncflow.tensorflow",
            syntax="proto3",
        )
        fd = descriptor_pb2.FieldDescriptorProto
        task = f.message_type.add(name="TaskDeviceFilters")
        task.field.add(name="device_filters", number=1, type=fd.TYPE_STRING,
                       label=fd.LABEL_REPEATED)  # fmt: skip
        job = f.message_type.add(name="JobDeviceFilters")
        job.field.add(name="name", number=1, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
        entry = job.nested_type.add(name="TasksEntry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=fd.TYPE_INT32, label=fd.LABEL_OPTIONAL)
        entry.field.add(name="value", number=2, type=fd.TYPE_MESSAGE, label=fd.LABEL_OPTIONAL,
                        type_name=".asyncflow.tensorflow.TaskDeviceFilters")  # fmt: skip
        job.field.add(name="tasks", number=2, type=fd.TYPE_MESSAGE, label=fd.LABEL_REPEATED,
                      type_name=".asyncflow.tensorflow.JobDeviceFilters.TasksEntry")  # fmt: skip
        cluster = f.message_type.add(name="ClusterDeviceFilters")
        cluster.field.add(name="jobs", number=1, type=fd.TYPE_MESSAGE, label=fd.LABEL_REPEATED,
                          type_name=".asyncflow.tensorflow.JobDeviceFilters")  # fmt: skip
        pool = descriptor_pool.Default()
        try:
            descriptor = pool.FindMessageTypeByName("asyncflow.tensorflow.ClusterDeviceFilters")
        except KeyError:
            descriptor = pool.Add(f).message_types_by_name["ClusterDeviceFilters"]
        _DEVICE_FILTERS = message_factory.GetMessageClass(descriptor)
    return _DEVICE_FILTERS


def experimental_connect_to_host(remote_host=None, job_name="worker") -> None:
    """`tf.config.experimental_connect_to_host`.

    Raises:
      ValueError: no remote_host; else always in a graph program (TF connects its
        eager context only).
    """
    if not remote_host:
        raise ValueError("Must provide at least one remote_host")
    _eager_only()


def experimental_connect_to_cluster(cluster_spec_or_resolver, job_name="localhost",
                                    task_index=0, protocol=None,
                                    make_master_device_default=True,
                                    cluster_device_filters=None) -> None:  # fmt: skip
    """`tf.config.experimental_connect_to_cluster`.

    Raises:
      ValueError: always in a graph program (TF connects its eager context only).
    """
    _eager_only()


def _eager_only():
    raise ValueError(
        "`tf.config.experimental_connect_to_cluster` can only be called in eager mode."
    )


class FunctionType(inspect.Signature):
    """`tf.types.experimental.FunctionType`: a function's signature type (an
    inspect.Signature)."""

    __slots__ = ()


# `tf.types.experimental.TensorLike`: what converts to a tensor.
TensorLike = typing.Union[  # noqa: UP007 - (a typing.Union, as TF's)
    ops.Tensor, int, float, bool, str, bytes, complex, tuple, list, np.ndarray, np.generic
]


def types_namespace():
    """`tf.types` (TF1's holds only `experimental`)."""
    import types

    experimental = types.ModuleType("asyncflow.types.experimental", "tf.types.experimental")
    experimental.TensorLike = TensorLike
    experimental.FunctionType = FunctionType
    module = types.ModuleType("asyncflow.types", "tf.types")
    module.experimental = experimental
    return module


class _Status:
    """What `raise_exception_on_not_ok_status` yields: TF's C status, as a code and a
    message that a caller sets."""

    __slots__ = ("code", "message")

    def __init__(self):
        self.code = 0
        self.message = ""


class raise_exception_on_not_ok_status:  # noqa: N801 - TF's name
    """`tf.errors.raise_exception_on_not_ok_status()`: a context manager yielding a
    status; on leaving, a status whose code is not OK raises its OpError subclass."""

    def __enter__(self) -> _Status:
        self.status = _Status()
        return self.status

    def __exit__(self, exc_type, exc, tb) -> bool:
        status, self.status = self.status, None
        if status.code != 0:
            cls = errors.exception_type_from_error_code(status.code)
            raise cls(None, None, status.message)
        return False
