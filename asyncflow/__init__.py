"""asyncflow: TensorFlow's dataflow system as an asyncio-native runtime (tf.compat.v1 API).

`import asyncflow as tf` gives the TF1 names; `await sess.arun(...)` is the async twin
of `sess.run(...)`.
"""

from asyncflow import errors
from asyncflow.config import (
    ConfigProto,
    GPUOptions,
    GraphOptions,
    OptimizerOptions,
    RunMetadata,
    RunOptions,
)
from asyncflow.device_spec import DeviceSpec
from asyncflow.dtypes import (
    QUANTIZED_DTYPES,
    DType,
    as_dtype,
    bfloat16,
    bool,  # noqa: A004 - TF's name
    complex64,
    complex128,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int16,
    int32,
    int64,
    qint8,
    qint16,
    qint32,
    quint8,
    quint16,
    resource,
    string,
    uint8,
    uint16,
    uint32,
    uint64,
    variant,
)
from asyncflow.graph import (
    Graph,
    GraphKeys,
    Operation,
    Tensor,
    add_to_collection,
    add_to_collections,
    colocate_with,
    control_dependencies,
    convert_to_tensor,
    device,
    get_collection,
    get_collection_ref,
    get_default_graph,
    is_tensor,
    name_scope,
    register_tensor_conversion_function,
    reset_default_graph,
)
from asyncflow.registry import NotDifferentiable, RegisterGradient
from asyncflow.session import InteractiveSession, Session, get_default_session
from asyncflow.tensor_shape import Dimension, TensorShape

# Namespaces that are whole subpackages, heavy and used by few programs: imported on
# first access (PEP 562), so a process that never reads tf.keras does not pay for Keras.
# `from asyncflow.keras import ...` and `tf.keras` both import the subpackage, which the
# import system then binds here; dir(tf) lists them as before.
_LAZY_SUBPACKAGES = frozenset(
    {"estimator", "keras", "lite", "profiler", "tpu", "tfprof", "tfprof_logger", "tfprof_profiler"}
    | {"app", "flags"}  # (absl's flags: ~70 ms)
)


def __getattr__(name: str):
    if name in _LAZY_SUBPACKAGES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(
        (set(globals()) - {"__getattr__", "__dir__", "_LAZY_SUBPACKAGES"}) | _LAZY_SUBPACKAGES
    )


def _reexport(module) -> None:
    """Copy a family's public builders (its `__all__`) into the top-level namespace."""
    for name in module.__all__:
        globals()[name] = getattr(module, name)


from asyncflow import clip_ops as _clip_ops  # noqa: E402
from asyncflow import critical_section as _critical_section  # noqa: E402
from asyncflow import custom_gradient as _custom_gradient  # noqa: E402
from asyncflow import framework_extras as _framework_extras  # noqa: E402
from asyncflow import gradients as _gradients  # noqa: E402
from asyncflow import indexed_slices as _indexed_slices  # noqa: E402
from asyncflow import math_composites as _math_composites  # noqa: E402
from asyncflow import math_composites_2 as _math_composites_2  # noqa: E402
from asyncflow import (
    ops,  # noqa: E402 - registers every op family
    sparse_composites,  # noqa: E402 - also af.sparse.from_dense's home
)
from asyncflow import partitioned_variables as _partitioned_variables  # noqa: E402
from asyncflow import random_generator as _random_generator  # noqa: E402, F401
from asyncflow import random_seed as _random_seed  # noqa: E402
from asyncflow import sparse_tensor as _sparse_tensor  # noqa: E402
from asyncflow import symbolic_gradient as _symbolic_gradient  # noqa: E402, F401 - its import hook
from asyncflow import template as _template  # noqa: E402
from asyncflow import tf1_extras as _tf1_extras  # noqa: E402
from asyncflow import var_scope as _variable_scope  # noqa: E402
from asyncflow import variables as _variables  # noqa: E402
from asyncflow.ops import approx_topk_ops as _approx_topk_ops  # noqa: E402
from asyncflow.ops import array_ops as _array_ops  # noqa: E402
from asyncflow.ops import bitwise_ops as bitwise  # noqa: E402 - tf.bitwise
from asyncflow.ops import check_ops as _check_ops  # noqa: E402
from asyncflow.ops import control_flow_ops as _control_flow_ops  # noqa: E402
from asyncflow.ops import data_flow_ops as _data_flow_ops  # noqa: E402
from asyncflow.ops import debug_ops as _debug_ops  # noqa: E402 - tfdbg's ops
from asyncflow.ops import edit_distance_ops as _edit_distance_ops  # noqa: E402
from asyncflow.ops import einsum_ops as _einsum_ops  # noqa: E402
from asyncflow.ops import fake_quant_ops as _fake_quant_ops  # noqa: E402
from asyncflow.ops import fft_ops as _fft_ops  # noqa: E402
from asyncflow.ops import fingerprint_ops as _fingerprint_ops  # noqa: E402
from asyncflow.ops import framework_ops as _framework_ops  # noqa: E402
from asyncflow.ops import functional_ops as _functional_ops  # noqa: E402
from asyncflow.ops import gradient_ops as _gradient_ops  # noqa: E402
from asyncflow.ops import image_patches_ops as _image_patches_ops  # noqa: E402
from asyncflow.ops import init_ops as _init_ops  # noqa: E402
from asyncflow.ops import linalg_matrix_ops as _linalg_matrix_ops  # noqa: E402
from asyncflow.ops import linalg_ops as _linalg_ops  # noqa: E402
from asyncflow.ops import lmdb_reader_ops as _lmdb_reader_ops  # noqa: E402
from asyncflow.ops import logging_ops as _logging_ops  # noqa: E402
from asyncflow.ops import math_ops as _math_ops  # noqa: E402
from asyncflow.ops import math_special_ops as _math_special_ops  # noqa: E402
from asyncflow.ops import parsing_ops as _parsing_ops  # noqa: E402
from asyncflow.ops import parsing_sequence_ops as _parsing_sequence_ops  # noqa: E402
from asyncflow.ops import partition_ops as _partition_ops  # noqa: E402
from asyncflow.ops import quantization_ops as _quantization_ops  # noqa: E402
from asyncflow.ops import random_more_ops as _random_more_ops  # noqa: E402
from asyncflow.ops import random_ops as _random_ops  # noqa: E402
from asyncflow.ops import reader_ops as _reader_ops  # noqa: E402
from asyncflow.ops import reduction_ops as _reduction_ops  # noqa: E402
from asyncflow.ops import scatter_nd_ops as _scatter_nd_ops  # noqa: E402
from asyncflow.ops import script_ops as _script_ops  # noqa: E402
from asyncflow.ops import segment_ops as _segment_ops  # noqa: E402
from asyncflow.ops import sequence_ops as _sequence_ops  # noqa: E402
from asyncflow.ops import session_ops as _session_ops  # noqa: E402
from asyncflow.ops import slicing_ops as _slicing_ops  # noqa: E402
from asyncflow.ops import space_ops as _space_ops  # noqa: E402
from asyncflow.ops import sparse_math_ops as _sparse_math_ops  # noqa: E402
from asyncflow.ops import sparse_ops as _sparse_ops  # noqa: E402
from asyncflow.ops import sparse_serialize_ops as _sparse_serialize_ops  # noqa: E402
from asyncflow.ops import special_math_ops as _special_math_ops  # noqa: E402
from asyncflow.ops import state_ops as _state_ops  # noqa: E402
from asyncflow.ops import string_extras_ops as _string_extras_ops  # noqa: E402
from asyncflow.ops import string_hash_ops as _string_hash_ops  # noqa: E402
from asyncflow.ops import string_ops as _string_ops  # noqa: E402
from asyncflow.ops import tensor_array_ops as _tensor_array_ops  # noqa: E402
from asyncflow.ops import tensor_proto_ops as _tensor_proto_ops  # noqa: E402
from asyncflow.ops import unique_ops as _unique_ops  # noqa: E402
from asyncflow.ops import volume_patches_ops as _volume_patches_ops  # noqa: E402
from asyncflow.ops import write_file_ops as _write_file_ops  # noqa: E402

# Composites first: an op family's dedicated op of the same name takes their place.
_reexport(_math_composites)
_reexport(_custom_gradient)
_reexport(_template)
for _m in (
    _array_ops,
    _slicing_ops,
    _scatter_nd_ops,
    _partition_ops,
    _fake_quant_ops,
    _quantization_ops,
    _approx_topk_ops,
    _fingerprint_ops,
    _session_ops,
    _volume_patches_ops,
    _script_ops,
    _linalg_ops,
    _special_math_ops,
    _segment_ops,
    _unique_ops,
    _edit_distance_ops,
    _image_patches_ops,
    _math_ops,
    _reduction_ops,
    _random_ops,
    _random_more_ops,
    _control_flow_ops,
    _logging_ops,
    _check_ops,
    _debug_ops,
    _state_ops,
    _init_ops,
    _random_seed,
    _variables,
    _variable_scope,
    _partitioned_variables,
    _gradients,
    _indexed_slices,
    _gradient_ops,
    _clip_ops,
    _parsing_ops,
    _parsing_sequence_ops,
    _string_ops,
    _string_hash_ops,
    _tensor_proto_ops,
    _reader_ops,
    _lmdb_reader_ops,
    _sparse_tensor,
    _functional_ops,
    _tensor_array_ops,
    _data_flow_ops,
    _sequence_ops,
    _framework_ops,
    _math_special_ops,
    _sparse_ops,
    _sparse_math_ops,
    _sparse_serialize_ops,
    _write_file_ops,
    _linalg_matrix_ops,
    _einsum_ops,
    _fft_ops,
    _space_ops,
    _string_extras_ops,
    _framework_extras,
    _math_composites_2,
    _tf1_extras,
    _critical_section,
    sparse_composites,
):
    _reexport(_m)
del _m
OpError = errors.OpError
__version__ = VERSION  # noqa: F821 - (framework_extras': asyncflow's own, as tf.__version__)

from asyncflow import (  # noqa: E402
    data,
    debugging,
    device_lib,
    distribute,
    distributions,
    feature_column,
    image,
    initializers,
    layers,
    linalg_dispatch,
    linalg_extras,
    linalg_operator,
    linalg_operator_util,
    linalg_operators_block,
    linalg_operators_derived,
    linalg_operators_diag,
    linalg_operators_fft,
    linalg_operators_kronecker,
    linalg_operators_matrix,
    linalg_tridiagonal,
    lookup,
    losses,
    metrics,
    mixed_precision,
    nest,
    nn,
    python_io,
    ragged,
    ragged_functions,
    regularizers,
    resource_loader,
    saved_model,
    serving,
    sets,
    signal,
    sysconfig,
    test,
    train,
    user_ops,
    xla,
)
from asyncflow import resource_variable as _resource_variable  # noqa: E402,F401 - use_resource
from asyncflow import signal_mdct as _signal_mdct  # noqa: E402,F401 - tf.signal.mdct, ...
from asyncflow.composite_specs import (  # noqa: E402
    IndexedSlicesSpec,
    RaggedTensorSpec,
    TensorArraySpec,
    type_spec_from_value,
)
from asyncflow.data.optional import OptionalSpec  # noqa: E402 - tf.OptionalSpec
from asyncflow.graph import container  # noqa: E402
from asyncflow.graph_io import import_graph_def  # noqa: E402
from asyncflow.image import random_crop  # noqa: E402
from asyncflow.meta_graph import export_meta_graph, write_graph  # noqa: E402
from asyncflow.metrics import confusion_matrix  # noqa: E402
from asyncflow.namespaces import install as _install_namespaces  # noqa: E402
from asyncflow.ops.index_shuffle_ops import random_index_shuffle  # noqa: E402
from asyncflow.ops.top_misc_ops import (  # noqa: E402
    ragged_fill_empty_rows,
    ragged_fill_empty_rows_grad,
)
from asyncflow.partition import set_lossy_transfer  # noqa: E402
from asyncflow.protos import (  # noqa: E402 - TF's format messages (tf.GraphDef, ...)
    AttrValue,
    Event,
    GraphDef,
    HistogramProto,
    MetaGraphDef,
    NameAttrList,
    NodeDef,
    SessionLog,
    Summary,
    SummaryMetadata,
    TensorInfo,
)
from asyncflow.ragged import RaggedTensor  # noqa: E402
from asyncflow.raw_op_functions import raw_ops  # noqa: E402 - tf.raw_ops
from asyncflow.tf2_compat import (  # noqa: E402 - TF 2's switches, top-level odds
    LogMessage,
    check_pinned,
    conv,
    enable_control_flow_v2,
    enable_eager_execution,
    enable_resource_variables,
    enable_tensor_equality,
    enable_v2_behavior,
    enable_v2_tensorshape,
    load_file_system_library,
    load_library,
    load_op_library,
    nondifferentiable_batch_function,
)
from asyncflow.tf_function import function, wrap_function  # noqa: E402 - tf.function
from asyncflow.trackable import Module  # noqa: E402 - tf.Module
from asyncflow.train.saver import import_meta_graph  # noqa: E402
from asyncflow.type_spec import NoneTensorSpec, TypeSpec  # noqa: E402

_install_namespaces(globals())  # tf.math, tf.random, tf.linalg, tf.io, tf.sparse, ...
from asyncflow import gfile, graph_util  # noqa: E402 - tf.gfile, tf.graph_util

io.gfile = gfile  # noqa: F821 - tf.io.gfile (io is bound by _install_namespaces)
from asyncflow import random_experimental  # noqa: E402

random.experimental = random_experimental  # noqa: F821 - tf.random.experimental
from asyncflow import linalg_experimental  # noqa: E402

linalg.experimental = linalg_experimental  # noqa: F821 - tf.linalg.experimental
from asyncflow import quantization_experimental  # noqa: E402

quantization.experimental = quantization_experimental  # noqa: F821 - its protos, saver
from asyncflow import device_config as _device_config  # noqa: E402
from asyncflow import experimental  # noqa: E402,F401 - tf.experimental (its dtypes)
from asyncflow import experimental_runtime as _xr  # noqa: E402 - TF's runtime switches

errors.raise_exception_on_not_ok_status = _xr.raise_exception_on_not_ok_status
for _name in ("ClusterDeviceFilters", "enable_mlir_bridge", "disable_mlir_bridge"):
    setattr(_device_config.experimental, _name, getattr(_xr, _name))
for _name in ("experimental_connect_to_host", "experimental_connect_to_cluster"):
    setattr(config, _name, getattr(_xr, _name))  # noqa: F821
types = _xr.types_namespace()  # tf.types.experimental: TensorLike, FunctionType

# tf.config: the session protos' module also carries TF 2's runtime settings
for _name in _device_config.__all__:
    if _name != "session_config":
        setattr(config, _name, getattr(_device_config, _name))  # noqa: F821
from asyncflow import raw_ops_functional as _raw_ops_functional  # noqa: E402,F401 - tf.raw_ops.If...
from asyncflow import tf_function as _tf_function  # noqa: E402

for _name in ("run_functions_eagerly", "functions_run_eagerly"):
    for _spelling in (_name, "experimental_" + _name):
        setattr(config, _spelling, getattr(_tf_function, _spelling))  # noqa: F821

# Observability and TF1 script idioms (issue 17): tf.logging, tf.app, tf.flags, tf.compat.v1.
from asyncflow import autograph, compat, summary  # noqa: E402
from asyncflow import deprecated_endpoints as _deprecated_endpoints  # noqa: E402
from asyncflow import tf_logging as logging  # noqa: E402
from asyncflow.client import timeline as _timeline  # noqa: E402,F401 - af.client.timeline
from asyncflow.compat import (  # noqa: E402
    disable_eager_execution,
    disable_v2_behavior,
    executing_eagerly,
)

# The endpoints TF 2.21 marks deprecated: a notice on their first call, an error after
# tf.experimental.enable_strict_mode() (last: every namespace is in place).
_deprecated_endpoints.install(__import__(__name__))
