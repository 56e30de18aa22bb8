"""Op families.  Each module registers its ops at import; imported explicitly here,
except the families of ops few graphs hold (legacy, TPU, boosted trees, quantized, ...):
ops/lazy_index.py names the op types of each, and the registry imports a family at the
first lookup of one of its types (a graph built, a GraphDef imported, a gradient taken),
so that `import asyncflow` does not pay for them.  tools/lazy_op_index.py regenerates
the table, and a test checks that it is current and that no lazy family changes an op
another module registers."""

import importlib as _importlib

from asyncflow import registry as _registry
from asyncflow.ops import lazy_index as _lazy_index

_registry.register_lazy_ops(
    {f"asyncflow.ops.{family}": names for family, names in _lazy_index.FAMILIES.items()}
)


def __getattr__(name: str):
    """A lazy family read as an attribute (the namespaces find their Python functions,
    tf.strings.unicode_decode and others, as `asyncflow.ops.<family>.<name>`)."""
    if name in _lazy_index.FAMILIES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted((set(globals()) - {"__getattr__", "__dir__"}) | set(_lazy_index.FAMILIES))


from asyncflow.ops import (  # noqa: E402, F401
    approx_topk_ops,
    array_ops,
    barrier_ops,
    batch_ops,
    candidate_sampling_ops,
    cast_ops,
    check_ops,
    checkpoint_remap_ops,
    collective_ops,
    color_ops,
    control_flow_contexts,
    control_flow_ops,
    control_flow_prims,
    conv3d_ops,
    conv_ops,
    conv_pool_nd,
    count_ops,
    ctc_ops,
    data_flow_ops,
    data_flow_stack_ops,
    dataset_more,
    dataset_ops,
    dataset_service_ops,
    dataset_sql,
    edit_distance_ops,
    fake_quant_ops,
    fft_real_ops,
    fingerprint_ops,
    fractional_pool_ops,
    framework_ops,
    functional_ops,
    fused_elementwise_gpu,
    gradient_ops,
    image_draw_ops,
    image_nms_ops,
    image_ops,
    image_patches_ops,
    image_proposals_ops,
    image_sample_box_ops,
    index_shuffle_ops,
    init_ops,
    io_ops,
    jpeg_ops,
    legacy_ops,
    linalg_matrix_ops,
    linalg_ops,
    linalg_tridiag_ops,
    lmdb_reader_ops,
    logging_ops,
    lookup_ops,
    manip_ops,
    math_extra_ops,
    math_more_ops,
    math_ops,
    math_special_ops,
    matmul_ops,
    nn_impl,
    nn_impl_gpu,
    nn_ops,
    optional_ops,
    parsing_ops,
    parsing_sequence_ops,
    partition_ops,
    pooling_ops,
    quantization_ops,
    quantized_nn_ops,
    ragged_ops,
    random_ops,
    reader_ops,
    reduction_ops,
    scatter_nd_ops,
    script_ops,
    sdca_ops,
    segment_ops,
    sendrecv_ops,
    sequence_ops,
    session_ops,
    slicing_ops,
    space_ops,
    sparse_cross_ops,
    sparse_map_ops,
    sparse_math_ops,
    sparse_ops,
    sparse_serialize_ops,
    special_math_ops,
    staging_ops,
    state_ops,
    stateless_random_ops,
    string_extras_ops,
    string_hash_ops,
    string_ops,
    summary_ops,
    summary_writer_ops,
    tensor_array_ops,
    tensor_list_ops,
    tf2_graph_ops,
    top_misc_ops,
    training_ops,
    unique_ops,
    volume_patches_ops,
    write_file_ops,
)
