"""ConfigProto, RunOptions, RunMetadata: TF1's session protos as plain Python objects.

Only fields asyncflow reads are interpreted; the others are accepted so TF1 programs
that set them run unchanged.  An unknown field name is a ValueError, as protobuf's.
"""

from __future__ import annotations

from typing import Any

from asyncflow.protos.cost_graph_pb2 import CostGraphDef
from asyncflow.protos.debug_pb2 import DebugOptions
from asyncflow.protos.step_stats_pb2 import StepStats

__all__ = [
    "ConfigProto",
    "GPUOptions",
    "GraphOptions",
    "OptimizerOptions",
    "RewriterConfig",
    "RunOptions",
    "RunMetadata",
]


class _Message:
    _fields: dict[str, Any] = {}

    def __init__(self, **kwargs):
        # A field whose default is a class (a message, a list) is made when first read
        # (`__getattr__`): a RunMetadata made for every step, as TF1 programs make
        # theirs, then builds no protobuf messages it may never fill (its StepStats and
        # CostGraphDef, made and dropped each step, cost the MLP example's step ~17 us)
        for k, default in self._fields.items():
            if not isinstance(default, type):
                object.__setattr__(self, k, _fresh(default))
        for k, v in kwargs.items():
            setattr(self, k, v)

    def __getattr__(self, name):
        # (only for attributes not set yet: a field with a class default, made now)
        default = type(self)._fields.get(name)
        if not isinstance(default, type):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        value = default()
        object.__setattr__(self, name, value)
        return value

    def _made(self, name: str):
        """Field `name` where it was set or read before, else None (never makes it)."""
        return self.__dict__.get(name)

    def __setattr__(self, name, value):
        if name not in self._fields:
            raise ValueError(f'Protocol message {type(self).__name__} has no "{name}" field.')
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        set_fields = {
            k: getattr(self, k) for k, d in self._fields.items() if getattr(self, k) != d
        }
        return f"{type(self).__name__}({set_fields})"

    def CopyFrom(self, other) -> None:  # noqa: N802 - protobuf's name
        for k in self._fields:
            object.__setattr__(self, k, getattr(other, k))

    def HasField(self, name: str) -> bool:  # noqa: N802 - protobuf's name
        """Whether message field `name` holds anything (protobuf's, for the message
        fields: a repeated or scalar field is a ValueError there too)."""
        if name not in self._fields:
            raise ValueError(f"Protocol message {type(self).__name__} has no field {name}.")
        value = getattr(self, name)
        if isinstance(value, _Message):
            return any(getattr(value, k) != _fresh(d) for k, d in value._fields.items())
        if hasattr(value, "ByteSize"):
            return value.ByteSize() > 0
        raise ValueError(f'Protocol message has no singular "{name}" field.')


def _fresh(default):
    if isinstance(default, type):
        return default()
    if isinstance(default, dict):
        return dict(default)
    if isinstance(default, list):
        return list(default)
    return default


class GPUOptions(_Message):
    _fields = {
        "per_process_gpu_memory_fraction": 0.0,
        "allow_growth": False,
        "allocator_type": "",
        "visible_device_list": "",
        "force_gpu_compatible": False,
    }


class OptimizerOptions(_Message):
    L1 = 0
    L0 = -1
    DEFAULT = 0
    _fields = {
        "do_common_subexpression_elimination": False,
        "do_constant_folding": False,
        "do_function_inlining": False,
        "opt_level": 0,
        "global_jit_level": 0,
    }


class RewriterConfig(_Message):
    """GraphOptions.rewrite_options (TF's grappler switches): accepted, with TF's enum
    values as class attributes, so programs that switch passes off run; asyncflow's
    own graph passes do not read them."""

    DEFAULT, ON, OFF, AGGRESSIVE, EXPERIMENTAL_MLIR, EXPERIMENTAL_BOTH = range(6)
    NO_CONVERSION_ON_CPU, NCHW_TO_NHWC, NHWC_TO_NCHW = range(3)
    DEFAULT_NUM_ITERS, ONE, TWO = range(3)
    DEFAULT_MEM_OPT, NO_MEM_OPT, MANUAL, HEURISTICS = range(4)
    SWAPPING_HEURISTICS, RECOMPUTATION_HEURISTICS, SCHEDULING_HEURISTICS = 4, 5, 6
    _fields = {
        **dict.fromkeys(
            [
                "cpu_layout_conversion", "layout_optimizer", "constant_folding",
                "shape_optimization", "remapping", "common_subgraph_elimination",
                "arithmetic_optimization", "dependency_optimization", "loop_optimization",
                "function_optimization", "debug_stripper", "scoped_allocator_optimization",
                "pin_to_host_optimization", "implementation_selector", "auto_mixed_precision",
                "auto_mixed_precision_mkl", "auto_mixed_precision_onednn_bfloat16",
                "auto_mixed_precision_cpu", "use_plugin_optimizers",
                "experimental_conditional_code_motion", "meta_optimizer_iterations",
                "min_graph_nodes", "memory_optimization", "meta_optimizer_timeout_ms",
            ],
            0,
        ),
        **dict.fromkeys(
            [
                "disable_model_pruning", "disable_meta_optimizer", "disable_tfg_optimizer",
                "experimental_disable_compressed_tensor_optimization",
                "experimental_disable_folding_quantization_emulation",
                "fail_on_optimizer_errors",
            ],
            False,
        ),
        "memory_optimizer_target_node_name_scope": "",
        "optimizers": list,
        "custom_optimizers": list,
    }  # fmt: skip


class GraphOptions(_Message):
    _fields = {
        "optimizer_options": OptimizerOptions,
        "build_cost_model": 0,
        "infer_shapes": False,
        "place_pruned_graph": False,
        "enable_bfloat16_sendrecv": False,
        "rewrite_options": RewriterConfig,
    }


class Experimental(_Message):
    """ConfigProto.Experimental: accepted so programs that set it run; asyncflow has
    one executor and reads none of these."""

    _fields = {
        "collective_group_leader": "",
        "executor_type": "",
        "recv_buf_max_chunk": 0,
        "use_numa_affinity": False,
        "collective_deterministic_sequential_execution": False,
        "collective_nccl": False,
        "share_session_state_in_clusterspec_propagation": False,
        "disable_thread_spinning": False,
        "share_cluster_devices_in_session": False,
        "optimize_for_static_graph": False,
        "enable_mlir_bridge": False,
        "enable_mlir_graph_optimization": False,
        "disable_output_partition_graphs": False,
        "xla_fusion_autotuner_thresh": 0,
        "use_tfrt": False,
        "disable_functional_ops_lowering": False,
        "xla_prefer_single_graph_cluster": False,
    }


class ConfigProto(_Message):
    """TF1's `tf.ConfigProto`; `device_count={"CPU": n}` gives n virtual CPU devices."""

    _fields = {
        "device_count": dict,
        "experimental": Experimental,
        "intra_op_parallelism_threads": 0,
        "inter_op_parallelism_threads": 0,
        "use_per_session_threads": False,
        "allow_soft_placement": False,
        "log_device_placement": False,
        "gpu_options": GPUOptions,
        "graph_options": GraphOptions,
        "operation_timeout_in_ms": 0,
        "isolate_session_state": False,
        "device_filters": list,
    }

    Experimental = Experimental


class RunOptions(_Message):
    NO_TRACE = 0
    SOFTWARE_TRACE = 1
    HARDWARE_TRACE = 2
    FULL_TRACE = 3
    _fields = {
        "trace_level": 0,
        "timeout_in_ms": 0,
        "inter_op_thread_pool": 0,
        "output_partition_graphs": False,
        "report_tensor_allocations_upon_oom": False,
        "debug_options": DebugOptions,  # tfdbg v1's watches (asyncflow/debug_watch.py)
    }


class RunMetadata(_Message):
    """What a traced step reports: `step_stats` and `cost_graph` are TF's protobuf
    messages (StepStats, CostGraphDef); `partition_graphs` the partitions' GraphDefs."""

    _fields = {"step_stats": StepStats, "partition_graphs": list, "cost_graph": CostGraphDef}
