"""The op registry (STYLE.md): every op has a shape function, a kernel a CPU runs, and
a gradient or an explicit not-differentiable mark; kernels are registered once (a
generic kernel for every device, or one per device type whose code differs)."""

import inspect
import json
import pathlib

import pytest

import asyncflow  # noqa: F401 - registers every op family
from asyncflow.registry import (
    NotDifferentiable,
    all_op_defs,
    get_op_def,
    ops_supported_on,
    register_op,
)

OPS = sorted(all_op_defs())


def test_registry_is_populated():
    assert len(OPS) >= 80, OPS


@pytest.mark.parametrize("op_type", OPS)
def test_op_has_shape_fn_and_cpu_kernel(op_type):
    op_def = get_op_def(op_type)
    assert op_def.shape_fn is not None, f"{op_type} has no shape function"
    kd = op_def.kernel_for("CPU")
    assert kd is not None, f"{op_type} has no CPU kernel"
    assert inspect.iscoroutinefunction(kd.fn), f"{op_type} kernel is not async"


def _project_ops():
    """The project's own ops (test modules register test-only ops too)."""
    return sorted(
        name
        for name, d in all_op_defs().items()
        if all(kd.fn.__module__.startswith("asyncflow.") for kd in d.kernel_defs.values())
    )


# Ops whose gradient is not written yet (they raise LookupError when differentiated,
# rather than silently giving no gradient as a NotDifferentiable mark would).
_GRADIENT_PENDING = {
    "FusedBatchNormGradV3": "second-order batch norm (TF's _FusedBatchNormGradGrad)",
    "FusedBatchNormGrad": "second-order batch norm (TF's _FusedBatchNormGradGrad)",
    "FusedBatchNormGradV2": "second-order batch norm (TF's _FusedBatchNormGradGrad)",
    "RGBToHSV": "TF's _RGBToHSVGrad (tf.image.rgb_to_hsv is a composite that differentiates)",
}

# Ops TF 2.21 itself registers no gradient for (LookupError there too; tested in
# tests/test_image.py::test_no_gradient_where_tf_has_none and, for Conv,
# tests/ops/test_sem18b_kernel_tests.py::test_conv_op_has_no_gradient_as_in_tf).
_TPU_RAW_GRADIENTS = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "tpu_raw_ops_tf.json").read_text()
)["gradients"]
_QUANTIZED_FUSED_GRADIENTS = json.loads(
    (pathlib.Path(__file__).parent / "fixtures" / "quantized_fused_tf.json").read_text()
)["gradients"]
_TF_NO_GRADIENT = {
    "ResizeArea",
    "AdjustContrastv2",
    "AdjustHue",
    "AdjustSaturation",
    "Conv",
    "LRNGrad",
    "Lu",
    "MatrixLogarithm",  # (tests/test_linalg_functions.py)
    # (tests/ops/test_tf_parity_numeric.py)
    "TruncateMod",
    "Unique",
    "UniqueWithCounts",
    "ListDiff",
    "SparseReduceSumSparse",
    "SparseReduceMax",
    "SparseReduceMaxSparse",
    "SparseSplit",
    "DenseBincount",
    "NonMaxSuppressionV3",
    "NonMaxSuppressionV4",
    "NonMaxSuppressionV5",
    "CombinedNonMaxSuppression",
    "DrawBoundingBoxesV2",
    "ExtractGlimpseV2",
    # (tests/ops/test_quantization_ops.py)
    "QuantizeV2",
    "Dequantize",
    "QuantizedConcat",
    "FakeQuantWithMinMaxArgsGradient",
    "FakeQuantWithMinMaxVarsGradient",
    "FakeQuantWithMinMaxVarsPerChannelGradient",
    # (tests/ops/test_tf_odds.py, tests/ops/test_fractional_pool_ops.py)
    "Fingerprint",
    "FractionalMaxPoolGrad",
    "FractionalAvgPoolGrad",
    "CheckPinned",  # (tests/test_tf2_compat.py)
    # TF's legacy op types (tests/ops/test_raw_ops_s25*.py)
    *("BatchMatrix" + n for n in ("BandPart", "Determinant", "Diag", "DiagPart", "Inverse",
                                  "SetDiag", "Solve", "SolveLs", "TriangularSolve")),
    *("Batch" + n for n in ("Cholesky", "SelfAdjointEigV2", "Svd", "FFT", "FFT2D", "FFT3D",
                            "IFFT", "IFFT2D", "IFFT3D")),
    "InTopK",
    "RFFT3D",
    "IRFFT3D",
    "CholeskyGrad",
    "UniqueV2",
    "UniqueWithCountsV2",
    "InplaceAdd",
    "InplaceSub",
    "InplaceUpdate",
    "Empty",
    "ParallelConcat",
    "Bincount",
    "TileGrad",
    "SegmentSumV2",
    "SegmentProdV2",
    "SegmentMaxV2",
    "SegmentMinV2",
    "AdjustContrast",
    "RandomPoisson",
    "BatchNormWithGlobalNormalizationGrad",
    "Conv2DBackpropFilterV2",
    "Conv2DBackpropInputV2",
    "Conv3DBackpropFilter",
    "Conv3DBackpropInput",
    "MatrixExponential",
    "SelfAdjointEig",
    "BatchSelfAdjointEig",
    "Mod",
    "PlaceholderV2",
    # tfdbg's ops (tests/test_tfdbg.py)
    "DebugIdentity",
    "DebugIdentityV3",
    "DebugNumericSummary",
    "DebugNumericSummaryV2",
    # TF1's ref-typed data-flow ops (tests/test_legacy_dataflow_ops.py)
    *("FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue", "QueueIsClosed"),
    *("LookupTableExport", "LookupTableImport", "TensorArrayPack", "TensorArrayUnpack"),
    *("ConditionalAccumulator", "AccumulatorApplyGradient", "AccumulatorTakeGradient"),
    # the V1 checkpoint ops (tests/test_checkpoint_v1.py)
    *("Save", "SaveSlices", "Restore", "RestoreSlice", "ShardedFilespec"),
    "FakeQueue",
    "RecordInput",
    # staging areas (tests/test_legacy_dataflow_ops.py)
    *("Stage", "Unstage", "StagePeek", "StageSize", "StageClear"),
    *(p + n for p in ("Map", "OrderedMap") for n in ("Stage", "Unstage", "UnstageNoKey", "Peek",
                                                    "Size", "IncompleteSize", "Clear")),
    # TF 1.x op types of tests/test_legacy_ops_s26.py
    *(f"SparseSegment{w}Grad{v}" for w in ("Sum", "Mean", "SqrtN") for v in ("", "V2")),
    "SparseBincount",
    "ToBool",
    "Copy",
    "CopyHost",
    "DeepCopy",
    "Snapshot",  # (tests/test_snapshot_op.py)
    "ImmutableConst",
    "RngSkip",
    "NonDeterministicInts",
    "StatelessShuffle",
    "StatelessSampleDistortedBoundingBox",
    "LSTMBlockCell",
    "LSTMBlockCellGrad",
    "BlockLSTMGrad",
    "BlockLSTMGradV2",
    "GRUBlockCell",
    "GRUBlockCellGrad",
    "MaxPoolGradGradWithArgmax",
    "FusedPadConv2D",
    "FusedResizeAndPadConv2D",
    "AudioSpectrogram",
    "Mfcc",
    "ParseSequenceExample",
    "ParseSingleSequenceExample",
    *("Quantized" + n for n in ("MatMul", "BiasAdd", "Add", "Mul", "Relu", "Relu6", "Reshape")),
    "RequantizationRange",
    "Requantize",
    "QuantizeDownAndShrinkRange",
    "RequantizationRangePerChannel",
    "RequantizePerChannel",
    *("UniformQuantize UniformDequantize UniformRequantize UniformQuantizedAdd".split()),
    *("UniformQuantizedClipByValue UniformQuantizedDot UniformQuantizedDotHybrid".split()),
    *("UniformQuantizedConvolution UniformQuantizedConvolutionHybrid".split()),
    "NearestNeighbors",
    "KMC2ChainInitialization",
    "BatchCholeskyGrad",
    "CudnnRNNBackpropV3",
    # (tests/test_summary_writer_ops.py)
    *"SummaryWriter CreateSummaryFileWriter CreateSummaryDbWriter WriteSummary".split(),
    *"WriteScalarSummary WriteHistogramSummary WriteImageSummary WriteAudioSummary".split(),
    *"WriteGraphSummary WriteRawProtoSummary ImportEvent FlushSummaryWriter".split(),
    "CloseSummaryWriter",
    # (tests/test_csr_sparse_matrix.py)
    "CSRSparseMatrixComponents",
    "SparseMatrixOrderingAMD",
    "SparseMatrixSoftmaxGrad",
    "SparseMatrixSparseCholesky",
    # (tests/test_raw_ops_s27.py::test_no_gradient_where_tf_has_none)
    "StatefulUniform",
    "StatefulStandardNormal",
    "StatefulStandardNormalV2",
    "StatefulTruncatedNormal",
    "StatefulUniformFullInt",
    "StatefulUniformInt",
    "StatelessRandomGetAlg",
    "AddSparseToTensorsMap",
    "AddManySparseToTensorsMap",
    "TakeManySparseFromTensorsMap",
    "TensorMapSize",
    "TensorMapHasKey",
    "TensorMapStackKeys",
    "KmeansPlusPlusInitialization",
    "Abort",
    "DeviceIndex",
    "SyncDevice",
    "FakeParam",
    # (tests/test_boosted_trees.py)
    "BoostedTreesAggregateStats",
    "BoostedTreesBucketize",
    "BoostedTreesCalculateBestFeatureSplit",
    "BoostedTreesCalculateBestFeatureSplitV2",
    "BoostedTreesCalculateBestGainsPerFeature",
    "BoostedTreesCenterBias",
    "BoostedTreesCreateEnsemble",
    "BoostedTreesCreateQuantileStreamResource",
    "BoostedTreesDeserializeEnsemble",
    "BoostedTreesEnsembleResourceHandleOp",
    "BoostedTreesExampleDebugOutputs",
    "BoostedTreesFlushQuantileSummaries",
    "BoostedTreesGetEnsembleStates",
    "BoostedTreesMakeQuantileSummaries",
    "BoostedTreesMakeStatsSummary",
    "BoostedTreesPredict",
    "BoostedTreesQuantileStreamResourceAddSummaries",
    "BoostedTreesQuantileStreamResourceDeserialize",
    "BoostedTreesQuantileStreamResourceFlush",
    "BoostedTreesQuantileStreamResourceGetBucketBoundaries",
    "BoostedTreesQuantileStreamResourceHandleOp",
    "BoostedTreesSerializeEnsemble",
    "BoostedTreesSparseAggregateStats",
    "BoostedTreesSparseCalculateBestFeatureSplit",
    "BoostedTreesTrainingPredict",
    "BoostedTreesUpdateEnsemble",
    "BoostedTreesUpdateEnsembleV2",
    "IsBoostedTreesEnsembleInitialized",
    "IsBoostedTreesQuantileStreamResourceInitialized",
    # (tests/test_anonymous_tables.py)
    *"AnonymousHashTable AnonymousMutableHashTable AnonymousMutableHashTableOfTensors".split(),
    "AnonymousMutableDenseHashTable",
    # (tests/test_cudnn_rnn_ops.py::test_only_the_forward_ops_have_gradients_as_in_tf)
    *"CudnnRNNBackprop CudnnRNNBackpropV2 CudnnRNNParamsSize".split(),
    *"CudnnRNNCanonicalToParams CudnnRNNCanonicalToParamsV2".split(),
    *"CudnnRNNParamsToCanonical CudnnRNNParamsToCanonicalV2".split(),
    # (tests/test_tpu_api.py::test_tpu_op_gradients_as_in_tf)
    "TPUReplicatedOutput",
    "TPUReplicateMetadata",
    "TPUCompilationResult",
    "ConfigureDistributedTPU",
    "ShutdownDistributedTPU",
    "ConfigureTPUEmbedding",
    # the serving batching ops
    # (tests/test_batch_ops.py::test_tf_graph_def_runs_here_and_ours_has_tf_form)
    "Batch",
    "BatchFunction",
    "Unbatch",
    "UnbatchGrad",
    # (tests/test_tpu_raw_ops.py::test_gradients_as_in_tf)
    *(n for n, has in _TPU_RAW_GRADIENTS.items() if has == "none"),
    # (tests/test_quantized_fused_ops.py::test_no_gradient_as_tf)
    *(n for n, has in _QUANTIZED_FUSED_GRADIENTS.items() if has == "none"),
}


@pytest.mark.parametrize("op_type", _project_ops())
def test_op_has_gradient_or_is_marked_not_differentiable(op_type):
    op_def = get_op_def(op_type)
    if op_type in _GRADIENT_PENDING or op_type in _TF_NO_GRADIENT:
        assert op_def.grad_fn is None and not op_def.not_differentiable
        return
    assert op_def.grad_fn is not None or op_def.not_differentiable, (
        f"{op_type} has neither a gradient nor a NotDifferentiable mark"
    )


def test_no_op_registers_one_function_for_two_device_types():
    """A kernel that is the same code everywhere is the generic one (`@Op.kernel()`)."""
    for name, op_def in all_op_defs().items():
        fns = [kd.fn for kd in op_def.kernel_defs.values()]
        assert len(fns) == len(set(fns)), name


def test_which_ops_a_device_type_supports_is_derived():
    generic = {n for n, d in all_op_defs().items() if d.has_generic_kernel}
    assert set(ops_supported_on("SOME_ACCELERATOR")) == generic
    assert set(ops_supported_on("CPU")) == set(all_op_defs())
    # Host objects and string/file work have CPU kernels only (as TF's).
    for op_type in ("FIFOQueueV2", "QueueDequeueV2", "StringJoin", "ReaderReadV2", "SaveV2"):
        assert not get_op_def(op_type).supports("GPU"), op_type
    for op_type in ("MatMul", "Conv2D", "Reshape", "Shape", "Switch", "_Send", "_Recv"):
        assert get_op_def(op_type).supports("GPU"), op_type
    assert get_op_def("Reshape").kernel_for("GPU").host_memory == frozenset({"shape"})


def test_duplicate_registration_rejected():
    with pytest.raises(ValueError):
        register_op("Identity", inputs=["x: T"], outputs=["y: T"])


def test_unknown_op_type():
    with pytest.raises(KeyError, match="Op type not registered 'NoSuchOp'"):
        get_op_def("NoSuchOp")


def _fresh_op(name, **kw):
    """A test-only op (registered once per process), complete as the registry tests ask."""
    try:
        return get_op_def(name)
    except KeyError:
        op_def = register_op(name, shape_fn=lambda op: [op.inputs[0].shape], **kw)
        NotDifferentiable(name)
        return op_def


def test_generic_kernel_serves_every_device_type_and_specific_one_wins():
    op_def = _fresh_op(
        "TestRegistryGeneric", inputs=["x: float32", "axis: int32"], outputs=["y: float32"]
    )
    if not op_def.kernel_defs:

        @op_def.kernel(host_memory=("axis",))
        async def _generic(ctx, x, axis):
            return x

        @op_def.kernel("TPU")
        async def _tpu(ctx, x, axis):
            return x

    assert op_def.kernel_for("CPU").device_type is None
    assert op_def.kernel_for("CPU").host_memory == frozenset({"axis"})
    assert op_def.kernel_for("GPU").fn is op_def.kernel_for("CPU").fn
    assert op_def.kernel_for("TPU").device_type == "TPU"
    assert op_def.supports("ANYTHING") and op_def.has_generic_kernel
    assert op_def.host_memory_positions({}, "GPU") == ([1], [])
    assert op_def.host_memory_positions({}, "TPU") == ([], [])


def test_device_specific_kernel_only():
    op_def = _fresh_op("TestRegistryCpuOnly", inputs=["x: string"], outputs=["y: string"])
    if not op_def.kernel_defs:

        @op_def.kernel("CPU")
        async def _cpu(ctx, x):
            return x

    assert op_def.kernel_for("CPU") is not None
    assert op_def.kernel_for("GPU") is None and not op_def.supports("GPU")
    assert "TestRegistryCpuOnly" in ops_supported_on("CPU")
    assert "TestRegistryCpuOnly" not in ops_supported_on("GPU")
    assert "Identity" in ops_supported_on("GPU")  # derived from its generic kernel


def test_kernel_registration_errors():
    op_def = _fresh_op("TestRegistryErrors", inputs=["x: float32"], outputs=["y: float32"])
    if not op_def.kernel_defs:
        op_def.kernel()(_noop_kernel)
    with pytest.raises(ValueError, match="already has a generic kernel"):
        op_def.kernel()(_noop_kernel)
    op_def.kernel_defs.pop("CPU", None)
    op_def.kernel("CPU")(_noop_kernel)
    with pytest.raises(ValueError, match="already has a CPU kernel"):
        op_def.kernel("cpu")(_noop_kernel)
    with pytest.raises(ValueError, match="unknown args"):
        op_def.kernel("GPU", host_memory=("shape",))
    with pytest.raises(TypeError):
        op_def.kernel("GPU", host_memory="x")


async def _noop_kernel(ctx, x):
    return x
