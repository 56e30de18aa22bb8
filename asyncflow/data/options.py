"""`tf.data.Options` and its parts, as TF1 programs set them.

The options are kept (a dataset's `options()` returns what `with_options` gave it,
and `with_options` writes them into the graph as TF's OptionsDataset op, serialized
as TF's `Options` message: `serialized`).  Of TF's optimizations only one changes
what a pipeline gives: map_and_batch_fusion, which the runtime follows for a failed
element (ops/dataset_pipeline.py's Batch).  Otherwise they change nothing: this
runtime's pipelines have no thread pools to size and no auto-sharding (a worker
shards with `Dataset.shard`).  Each class takes only TF's attribute names, so a
misspelt option is an AttributeError here as in TF.
"""

from __future__ import annotations

import enum

from asyncflow.proto_wire import length_delimited, varint

__all__ = [
    "AutoShardPolicy",
    "AutotuneAlgorithm",
    "AutotuneOptions",
    "DistributeOptions",
    "ExternalStatePolicy",
    "OptimizationOptions",
    "Options",
    "ServiceOptions",
    "ThreadingOptions",
]


class AutoShardPolicy(enum.IntEnum):
    OFF = -1
    AUTO = 0
    FILE = 1
    DATA = 2
    HINT = 3


class AutotuneAlgorithm(enum.IntEnum):
    DEFAULT = 0
    HILL_CLIMB = 1
    GRADIENT_DESCENT = 2
    MAX_PARALLELISM = 3
    STAGE_BASED = 4


class ExternalStatePolicy(enum.IntEnum):
    WARN = 0
    IGNORE = 1
    FAIL = 2


class _OptionsBase:
    """Attributes named in _FIELDS, None until set; merge() takes the other's set ones."""

    _FIELDS: tuple = ()
    __slots__ = ("_values",)

    def __init__(self):
        object.__setattr__(self, "_values", {})

    def __getattr__(self, name):
        if name in type(self)._FIELDS:
            return self._values.get(name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __setattr__(self, name, value):
        if name not in type(self)._FIELDS:
            raise AttributeError(f"Cannot set the property {name} on {type(self).__name__}.")
        self._values[name] = value

    def __eq__(self, other):
        return type(other) is type(self) and self._values == other._values

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._values})"


class ThreadingOptions(_OptionsBase):
    _FIELDS = ("max_intra_op_parallelism", "private_threadpool_size")
    __slots__ = ()


class DistributeOptions(_OptionsBase):
    _FIELDS = ("auto_shard_policy", "num_devices")
    __slots__ = ()


class AutotuneOptions(_OptionsBase):
    _FIELDS = ("enabled", "cpu_budget", "ram_budget", "autotune_algorithm", "initial_parallelism")
    __slots__ = ()


class OptimizationOptions(_OptionsBase):
    _FIELDS = (
        "apply_default_optimizations",
        "filter_fusion",
        "filter_parallelization",
        "inject_prefetch",
        "map_and_batch_fusion",
        "map_and_filter_fusion",
        "map_fusion",
        "map_parallelization",
        "noop_elimination",
        "parallel_batch",
        "seq_interleave_prefetch",
        "shuffle_and_repeat_fusion",
        "warm_start",
    )
    __slots__ = ()


class ServiceOptions(_OptionsBase):
    """tf.data service options (`Options().experimental_service`); `pinned` is a bool."""

    _FIELDS = ("pinned",)
    __slots__ = ()

    def __setattr__(self, name, value):
        if name == "pinned" and value is not None and not isinstance(value, bool):
            raise TypeError(
                f'Property "pinned" must be of type {bool}, got: {value!r} (type: {type(value)})'
            )
        super().__setattr__(name, value)


_NESTED = {
    "autotune": AutotuneOptions,
    "experimental_distribute": DistributeOptions,
    "experimental_optimization": OptimizationOptions,
    "experimental_service": ServiceOptions,
    "experimental_threading": ThreadingOptions,
    "threading": ThreadingOptions,
}


class Options(_OptionsBase):
    _FIELDS = (
        *_NESTED,
        "dataset_name",
        "deterministic",
        "experimental_deterministic",
        "experimental_external_state_policy",
        "experimental_slack",
        "experimental_symbolic_checkpoint",
        "experimental_warm_start",
        "framework_type",
    )
    __slots__ = ()

    def __init__(self):
        super().__init__()
        for name, cls in _NESTED.items():
            self._values[name] = cls()
        # (TF: experimental_threading is threading under its older name)
        self._values["experimental_threading"] = self._values["threading"]

    def merge(self, options) -> Options:
        """These options with `options`' set values over them (TF: a new object)."""
        out = Options()
        for src in (self, options):
            for name, value in src._values.items():
                if name in _NESTED:
                    out._values[name]._values.update(value._values)
                elif value is not None:
                    out._values[name] = value
        return out


# TF's dataset_options.proto: each message's attributes and their field numbers (a
# nested options object is a message of its own table; TF writes the nested messages
# even when they are empty).
_FIELD_NUMBERS: dict = {
    OptimizationOptions: {
        "apply_default_optimizations": 1,
        "filter_fusion": 6,
        "map_and_batch_fusion": 9,
        "map_and_filter_fusion": 10,
        "map_fusion": 11,
        "map_parallelization": 12,
        "noop_elimination": 14,
        "parallel_batch": 15,
        "shuffle_and_repeat_fusion": 17,
        "filter_parallelization": 18,
        "inject_prefetch": 19,
        "seq_interleave_prefetch": 21,
    },
    ThreadingOptions: {"max_intra_op_parallelism": 1, "private_threadpool_size": 2},
    DistributeOptions: {"auto_shard_policy": 1, "num_devices": 2},
    AutotuneOptions: {
        "enabled": 1,
        "cpu_budget": 2,
        "ram_budget": 3,
        "autotune_algorithm": 4,
        "initial_parallelism": 5,
    },
    ServiceOptions: {"pinned": 1},
    Options: {
        "deterministic": 1,
        "experimental_deterministic": 1,
        "experimental_distribute": 2,
        "experimental_optimization": 3,
        "experimental_slack": 4,
        "threading": 5,
        "experimental_external_state_policy": 6,
        "autotune": 7,
        "experimental_symbolic_checkpoint": 8,
        "experimental_warm_start": 9,
        "dataset_name": 10,
        "framework_type": 11,
        "experimental_service": 12,
    },
}


def serialized(options: _OptionsBase) -> bytes:
    """`options` as TF's serialized `Options` message (OptionsDataset's
    `serialized_options`): the fields set, in field order, the nested messages always
    (as TF's `Options._to_proto` writes them)."""
    numbers = _FIELD_NUMBERS[type(options)]
    fields: dict[int, bytes] = {}
    for name, number in numbers.items():
        value = options._values.get(name)
        if isinstance(value, _OptionsBase):
            fields[number] = length_delimited(number, serialized(value))
        elif isinstance(value, str):
            fields[number] = length_delimited(number, value.encode())
        elif isinstance(value, (list, tuple)):
            fields[number] = b"".join(length_delimited(number, str(v).encode()) for v in value)
        elif value is not None:
            fields[number] = varint(number << 3) + varint(int(value))
    return b"".join(fields[k] for k in sorted(fields))
