"""Every registered gradient against finite differences (float64), and every op marked.

`CASES` maps an op type to builders: each is (fn, input values[, atol]) where fn gets
one placeholder per value and returns y.  An op whose gradient is registered but that
is neither in CASES nor in ALLOWLIST fails `test_every_gradient_has_a_case`.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import asyncflow as af
from asyncflow import gradients as _gradients  # noqa: F401 - registers gradient ops
from asyncflow.graph import apply_op
from asyncflow.ops import gradient_ops as g
from asyncflow.registry import all_op_defs
from asyncflow.test_util import GradientChecker

rng = np.random.RandomState(42)


def r(*shape, lo=0.5, hi=1.5):
    return rng.uniform(lo, hi, size=shape)


def op(op_type, *inputs, **attrs):
    return apply_op(op_type, list(inputs), attrs).outputs[0]


def to_c(a, b):
    """A complex tensor a + ib from two float64 tensors."""
    ca, cb = af.cast(a, af.complex128), af.cast(b, af.complex128)
    return ca + cb * af.constant(1j, af.complex128)


# Modules whose ops this table checks; ops of other families are checked by their tests.
OWNED = {
    "math_ops",
    "cast_ops",
    "matmul_ops",
    "reduction_ops",
    "array_ops",
    "manip_ops",
    "slicing_ops",
    "control_flow_ops",
    "state_ops",
    "random_ops",
    "check_ops",
    "logging_ops",
    "init_ops",
    "gradient_ops",
}

# Families owned by other work: their gradients are checked (and marked) by their own tests.
FOREIGN_MODULES = {
    "nn_ops": "NN ops: tests/ops/test_nn_ops.py",
    "conv_ops": "convolutions: tests/ops/test_conv_ops.py",
    "pooling_ops": "pooling: tests/ops/test_pooling_ops.py",
    "nn_impl": "NN ops (batch norm, in_top_k...): the NN family's tests",
    "training_ops": "optimizer update ops (stateful, not differentiated)",
    "control_flow_prims": "cond/while primitives: their gradients belong to control flow",
    "_testing_ops": "test-only ops",
    "test_frames": "test-only ops",
    "legacy_ops": "TF's legacy op types: tests/ops/test_raw_ops_s25.py",
    "math_extra_ops": "tests/ops/test_raw_ops_s25_math.py",
    "fft_real_ops": "RFFT/IRFFT: tests/ops/test_raw_ops_s25_fft.py",
    "color_ops": "RGBToHSV/HSVToRGB: tests/ops/test_raw_ops_s25_math.py",
    "array_extra_ops": "tests/ops/test_raw_ops_s25_array.py",
    "legacy_nn_ops": "TF 1.x op types: tests/test_legacy_ops_s26.py (TF 2.21's gradients)",
    "legacy_random_ops": "TF 1.x op types: tests/test_legacy_ops_s26.py (no TF gradient)",
    "audio_features_ops": "AudioSpectrogram/Mfcc: tests/test_legacy_ops_s26.py (no TF gradient)",
    "quantize_dequantize_ops": "QuantizeAndDequantize* spellings: tests/test_legacy_ops_s26.py",
    "parsing_sequence_legacy_ops": "old SequenceExample parsers: tests/test_legacy_ops_s26.py",
    "quantized_math_ops": "eight-bit graph ops: tests/test_legacy_ops_s26.py (no TF gradient)",
    "clustering_legacy_ops": "k-means kernels: tests/test_legacy_ops_s26.py (no TF gradient)",
    "isotonic_ops": "IsotonicRegression: tests/test_legacy_ops_s26.py (TF's gradient)",
    "legacy_image_ops": "TF 1.x op types: tests/test_legacy_ops_s26.py (TF 2.21's gradients)",
    "rnn_block_ops": "contrib RNN kernels: tests/test_legacy_ops_s26.py (TF 2.21's gradients)",
}

ALLOWLIST = {
    "PreventGradient": "its gradient raises LookupError by design (tested in test_gradients)",
    "Rint": "piecewise constant: its gradient is None, as TF's (tests/ops/test_api_extras_tf.py)",
}

# Ops TF 2.21 registers no gradient for (neither a function nor NotDifferentiable):
# tf.gradients through them raises LookupError there, so here too.
def _tpu_raw_ops_without_gradient() -> list[str]:
    record = pathlib.Path(__file__).parent / "fixtures" / "tpu_raw_ops_tf.json"
    gradients = json.loads(record.read_text())["gradients"]
    return [name for name, has in gradients.items() if has == "none"]


def _quantized_fused_ops_without_gradient() -> list[str]:
    record = pathlib.Path(__file__).parent / "fixtures" / "quantized_fused_tf.json"
    gradients = json.loads(record.read_text())["gradients"]
    return [name for name, has in gradients.items() if has == "none"]


TF_NO_GRADIENT = {
    # TF 2.21 registers none for these s27 raw ops either
    **{
        name: "tests/test_raw_ops_s27.py::test_no_gradient_where_tf_has_none"
        for name in (
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
        )
    },
    # cuDNN's RNN gradient op: TF 2.21 registers no gradient for it either
    "CudnnRNNBackpropV3": "tests/test_keras_s26_more.py",
    # the boosted trees ops: TF registers no gradient for any of them
    "BoostedTreesAggregateStats": "tests/test_boosted_trees.py",
    "BoostedTreesBucketize": "tests/test_boosted_trees.py",
    "BoostedTreesCalculateBestFeatureSplit": "tests/test_boosted_trees.py",
    "BoostedTreesCalculateBestFeatureSplitV2": "tests/test_boosted_trees.py",
    "BoostedTreesCalculateBestGainsPerFeature": "tests/test_boosted_trees.py",
    "BoostedTreesCenterBias": "tests/test_boosted_trees.py",
    "BoostedTreesCreateEnsemble": "tests/test_boosted_trees.py",
    "BoostedTreesCreateQuantileStreamResource": "tests/test_boosted_trees.py",
    "BoostedTreesDeserializeEnsemble": "tests/test_boosted_trees.py",
    "BoostedTreesEnsembleResourceHandleOp": "tests/test_boosted_trees.py",
    "BoostedTreesExampleDebugOutputs": "tests/test_boosted_trees.py",
    "BoostedTreesFlushQuantileSummaries": "tests/test_boosted_trees.py",
    "BoostedTreesGetEnsembleStates": "tests/test_boosted_trees.py",
    "BoostedTreesMakeQuantileSummaries": "tests/test_boosted_trees.py",
    "BoostedTreesMakeStatsSummary": "tests/test_boosted_trees.py",
    "BoostedTreesPredict": "tests/test_boosted_trees.py",
    "BoostedTreesQuantileStreamResourceAddSummaries": "tests/test_boosted_trees.py",
    "BoostedTreesQuantileStreamResourceDeserialize": "tests/test_boosted_trees.py",
    "BoostedTreesQuantileStreamResourceFlush": "tests/test_boosted_trees.py",
    "BoostedTreesQuantileStreamResourceGetBucketBoundaries": "tests/test_boosted_trees.py",
    "BoostedTreesQuantileStreamResourceHandleOp": "tests/test_boosted_trees.py",
    "BoostedTreesSerializeEnsemble": "tests/test_boosted_trees.py",
    "BoostedTreesSparseAggregateStats": "tests/test_boosted_trees.py",
    "BoostedTreesSparseCalculateBestFeatureSplit": "tests/test_boosted_trees.py",
    "BoostedTreesTrainingPredict": "tests/test_boosted_trees.py",
    "BoostedTreesUpdateEnsemble": "tests/test_boosted_trees.py",
    "BoostedTreesUpdateEnsembleV2": "tests/test_boosted_trees.py",
    "IsBoostedTreesEnsembleInitialized": "tests/test_boosted_trees.py",
    "IsBoostedTreesQuantileStreamResourceInitialized": "tests/test_boosted_trees.py",

    # TF1's data-flow, staging and V1 checkpoint ops: TF registers no gradient
    "AccumulatorApplyGradient": "tests/test_legacy_dataflow_ops.py",
    "AccumulatorTakeGradient": "tests/test_legacy_dataflow_ops.py",
    "ConditionalAccumulator": "tests/test_legacy_dataflow_ops.py",
    "FIFOQueue": "tests/test_legacy_dataflow_ops.py",
    "FakeQueue": "tests/test_legacy_dataflow_ops.py",
    "LookupTableExport": "tests/test_legacy_dataflow_ops.py",
    "LookupTableImport": "tests/test_legacy_dataflow_ops.py",
    "PaddingFIFOQueue": "tests/test_legacy_dataflow_ops.py",
    # TF 2's summary-writer ops: TF registers no gradient
    "SummaryWriter": "tests/test_summary_writer_ops.py",
    "CreateSummaryFileWriter": "tests/test_summary_writer_ops.py",
    "CreateSummaryDbWriter": "tests/test_summary_writer_ops.py",
    "WriteSummary": "tests/test_summary_writer_ops.py",
    "WriteScalarSummary": "tests/test_summary_writer_ops.py",
    "WriteHistogramSummary": "tests/test_summary_writer_ops.py",
    "WriteImageSummary": "tests/test_summary_writer_ops.py",
    "WriteAudioSummary": "tests/test_summary_writer_ops.py",
    "WriteGraphSummary": "tests/test_summary_writer_ops.py",
    "WriteRawProtoSummary": "tests/test_summary_writer_ops.py",
    "ImportEvent": "tests/test_summary_writer_ops.py",
    "FlushSummaryWriter": "tests/test_summary_writer_ops.py",
    "CloseSummaryWriter": "tests/test_summary_writer_ops.py",
    # CSR sparse-matrix ops TF registers no gradient for
    "CSRSparseMatrixComponents": "tests/test_csr_sparse_matrix.py",
    "SparseMatrixOrderingAMD": "tests/test_csr_sparse_matrix.py",
    "SparseMatrixSoftmaxGrad": "tests/test_csr_sparse_matrix.py",
    "SparseMatrixSparseCholesky": "tests/test_csr_sparse_matrix.py",
    "PriorityQueue": "tests/test_legacy_dataflow_ops.py",
    "QueueIsClosed": "tests/test_legacy_dataflow_ops.py",
    "RandomShuffleQueue": "tests/test_legacy_dataflow_ops.py",
    "RecordInput": "tests/test_legacy_dataflow_ops.py",
    "MapClear": "tests/test_legacy_dataflow_ops.py",
    "MapIncompleteSize": "tests/test_legacy_dataflow_ops.py",
    "MapPeek": "tests/test_legacy_dataflow_ops.py",
    "MapSize": "tests/test_legacy_dataflow_ops.py",
    "MapStage": "tests/test_legacy_dataflow_ops.py",
    "MapUnstage": "tests/test_legacy_dataflow_ops.py",
    "MapUnstageNoKey": "tests/test_legacy_dataflow_ops.py",
    "OrderedMapClear": "tests/test_legacy_dataflow_ops.py",
    "OrderedMapIncompleteSize": "tests/test_legacy_dataflow_ops.py",
    "OrderedMapPeek": "tests/test_legacy_dataflow_ops.py",
    "OrderedMapSize": "tests/test_legacy_dataflow_ops.py",
    "OrderedMapStage": "tests/test_legacy_dataflow_ops.py",
    "OrderedMapUnstage": "tests/test_legacy_dataflow_ops.py",
    "OrderedMapUnstageNoKey": "tests/test_legacy_dataflow_ops.py",
    "Stage": "tests/test_legacy_dataflow_ops.py",
    "StageClear": "tests/test_legacy_dataflow_ops.py",
    "StagePeek": "tests/test_legacy_dataflow_ops.py",
    "StageSize": "tests/test_legacy_dataflow_ops.py",
    "Unstage": "tests/test_legacy_dataflow_ops.py",
    "Restore": "tests/test_checkpoint_v1.py",
    "RestoreSlice": "tests/test_checkpoint_v1.py",
    "Save": "tests/test_checkpoint_v1.py",
    "SaveSlices": "tests/test_checkpoint_v1.py",
    "ShardedFilespec": "tests/test_checkpoint_v1.py",
    "Mod": "tests/ops/test_raw_ops_s25.py::test_gradients",
    "ResizeArea": "tests/test_image.py::test_no_gradient_where_tf_has_none",
    "AdjustContrastv2": "tests/test_image.py::test_no_gradient_where_tf_has_none",
    "AdjustHue": "tests/test_image.py::test_no_gradient_where_tf_has_none",
    "AdjustSaturation": "tests/test_image.py::test_no_gradient_where_tf_has_none",
    "Conv": "tests/ops/test_sem18b_kernel_tests.py::test_conv_op_has_no_gradient_as_in_tf",
    "Lu": "tests/ops/test_math_more_ops.py::test_lu_reconstructs_and_has_no_gradient",
    **dict.fromkeys(
        [
            "TruncateMod",
            "Unique",
            "UniqueWithCounts",
            "ListDiff",
            "SparseReduceSumSparse",
            "SparseReduceMax",
            "SparseReduceMaxSparse",
            "SparseSplit",
            "DenseBincount",
        ],
        "tests/ops/test_tf_parity_numeric.py::test_ops_without_a_tf_gradient_raise_lookup_error",
    ),
    "MatrixLogarithm": "tests/test_linalg_functions.py::test_logm_has_no_gradient_as_in_tf",
    **dict.fromkeys(
        [
            "NonMaxSuppressionV3",
            "NonMaxSuppressionV4",
            "NonMaxSuppressionV5",
            "CombinedNonMaxSuppression",
            "DrawBoundingBoxesV2",
            "ExtractGlimpseV2",
        ],
        "tests/ops/test_image_nms_ops.py::test_no_gradient_where_tf_has_none",
    ),  # fmt: skip
    **dict.fromkeys(
        [
            "QuantizeV2",
            "Dequantize",
            "QuantizedConcat",
            "FakeQuantWithMinMaxArgsGradient",
            "FakeQuantWithMinMaxVarsGradient",
            "FakeQuantWithMinMaxVarsPerChannelGradient",
        ],
        "tests/ops/test_quantization_ops.py::test_no_gradient_for_quantize_and_dequantize_as_tf",
    ),  # fmt: skip
    **dict.fromkeys(
        "UniformQuantize UniformDequantize UniformRequantize UniformQuantizedAdd "
        "UniformQuantizedClipByValue UniformQuantizedDot UniformQuantizedDotHybrid "
        "UniformQuantizedConvolution UniformQuantizedConvolutionHybrid".split(),
        "tests/test_quantized_s27.py::test_no_gradient_as_tf",
    ),
    "Fingerprint": "tests/ops/test_tf_odds.py::test_no_gradient_where_tf_has_none",
    "CheckPinned": "tests/test_tf2_compat.py::test_check_pinned_as_tf (TF registers none)",
    "FractionalMaxPoolGrad": "tests/ops/test_tf_odds.py::test_no_gradient_where_tf_has_none",
    "FractionalAvgPoolGrad": "tests/ops/test_tf_odds.py::test_no_gradient_where_tf_has_none",
    **dict.fromkeys(
        ["DebugIdentity", "DebugIdentityV3", "DebugNumericSummary", "DebugNumericSummaryV2"],
        "tests/test_tfdbg.py::test_gradients_as_in_tf",
    ),
    **dict.fromkeys(
        [
            "AnonymousHashTable",
            "AnonymousMutableHashTable",
            "AnonymousMutableHashTableOfTensors",
            "AnonymousMutableDenseHashTable",
        ],
        "tests/test_anonymous_tables.py (TF 2.21 registers no gradient for them)",
    ),
    **dict.fromkeys(
        [
            "CudnnRNNBackprop",
            "CudnnRNNBackpropV2",
            "CudnnRNNParamsSize",
            "CudnnRNNCanonicalToParams",
            "CudnnRNNCanonicalToParamsV2",
            "CudnnRNNParamsToCanonical",
            "CudnnRNNParamsToCanonicalV2",
        ],
        "tests/test_cudnn_rnn_ops.py::test_only_the_forward_ops_have_gradients_as_in_tf",
    ),
    **dict.fromkeys(
        [
            "TPUReplicatedOutput",
            "TPUReplicateMetadata",
            "TPUCompilationResult",
            "ConfigureDistributedTPU",
            "ShutdownDistributedTPU",
            "ConfigureTPUEmbedding",
        ],
        "tests/test_tpu_api.py::test_tpu_op_gradients_as_in_tf",
    ),
    # the serving batching ops: TF 2.21 registers none (LookupError there too)
    **dict.fromkeys(
        ["Batch", "BatchFunction", "Unbatch", "UnbatchGrad"],
        "tests/test_batch_ops.py::test_tf_graph_def_runs_here_and_ours_has_tf_form",
    ),
    # the TPU/XLA raw ops TF registers no gradient for (recorded)
    **dict.fromkeys(
        _tpu_raw_ops_without_gradient(), "tests/test_tpu_raw_ops.py::test_gradients_as_in_tf"
    ),
    # the fused quantized raw ops TF registers no gradient for (recorded)
    **dict.fromkeys(
        _quantized_fused_ops_without_gradient(),
        "tests/test_quantized_fused_ops.py::test_no_gradient_as_tf",
    ),
}

CASES: dict[str, list] = {
    # -- unary
    "Abs": [(lambda x: af.abs(x), [r(2, 3, lo=-1.5) + 0.01])],
    "Neg": [(lambda x: -x, [r(3)])],
    "Sign": [(lambda x: af.sign(x), [r(3, lo=-1) + 0.05])],
    "Square": [(af.square, [r(2, 3, lo=-1)])],
    "Sqrt": [(af.sqrt, [r(2, 3)])],
    "Rsqrt": [(af.rsqrt, [r(2, 3)])],
    "Exp": [(af.exp, [r(2, 3, lo=-1)])],
    "Expm1": [(af.expm1, [r(2, 3, lo=-1)])],
    "Log": [(af.log, [r(2, 3)])],
    "Log1p": [(af.log1p, [r(2, 3)])],
    "Sin": [(af.sin, [r(4, lo=-2)])],
    "Cos": [(af.cos, [r(4, lo=-2)])],
    "Tan": [(af.tan, [r(4, lo=-1, hi=1)])],
    "Tanh": [(af.tanh, [r(4, lo=-2)])],
    "Sigmoid": [(af.sigmoid, [r(4, lo=-2)])],
    "SigmoidGrad": [(lambda y, dy: op("SigmoidGrad", y, dy), [r(4, lo=0.1, hi=0.9), r(4, lo=-1)])],
    "TanhGrad": [(lambda y, dy: op("TanhGrad", y, dy), [r(4, lo=-0.9, hi=0.9), r(4, lo=-1)])],
    "ReciprocalGrad": [(lambda y, dy: op("ReciprocalGrad", y, dy), [r(4, lo=0.5), r(4, lo=-1)])],
    "RsqrtGrad": [(lambda y, dy: op("RsqrtGrad", y, dy), [r(4, lo=0.5), r(4, lo=-1)])],
    "SqrtGrad": [(lambda y, dy: op("SqrtGrad", y, dy), [r(4, lo=0.5), r(4, lo=-1)])],
    "BesselI0e": [(af.math.bessel_i0e, [r(4, lo=-2)])],
    "BesselI0": [(lambda x: op("BesselI0", x), [r(4, lo=-2)])],
    "BesselI1": [(lambda x: op("BesselI1", x), [r(4, lo=-2)])],
    "BesselI1e": [(af.math.bessel_i1e, [r(4, lo=-2)])],
    "Reciprocal": [(af.reciprocal, [r(4)])],
    "Acos": [(af.acos, [r(4, lo=-0.8, hi=0.8)])],
    "Asin": [(af.asin, [r(4, lo=-0.8, hi=0.8)])],
    "Atan": [(af.atan, [r(4, lo=-2)])],
    "Sinh": [(af.sinh, [r(4, lo=-2)])],
    "Cosh": [(af.cosh, [r(4, lo=-2)])],
    "Asinh": [(af.asinh, [r(4, lo=-2)])],
    "Acosh": [(af.acosh, [r(4, lo=1.2, hi=3)])],
    "Atanh": [(af.atanh, [r(4, lo=-0.8, hi=0.8)])],
    "Erf": [(af.erf, [r(4, lo=-1.5)])],
    "Erfc": [(af.erfc, [r(4, lo=-1.5)])],
    "Erfinv": [(af.math.erfinv, [r(4, lo=-0.9, hi=0.9)])],
    "Ndtri": [(af.math.ndtri, [r(4, lo=0.05, hi=0.95)])],
    "NextAfter": [(lambda x, y: af.math.nextafter(x, y), [r(4, lo=-1.5), r(4, lo=-1.5)])],
    "Lgamma": [(af.lgamma, [r(4, lo=0.5, hi=4.0)])],
    "Digamma": [(af.digamma, [r(4, lo=0.5, hi=4.0)])],
    "Polygamma": [(lambda x: af.polygamma(af.constant(1.0, af.float64), x), [r(4, hi=4.0)])],
    "Atan2": [(af.atan2, [r(2, 3, lo=-1), r(3)])],
    "Xlogy": [(af.math.xlogy, [r(2, 3), r(3)])],
    "Xdivy": [(af.math.xdivy, [r(2, 3), r(3)])],
    "Xlog1py": [(af.math.xlog1py, [r(2, 3), r(3)])],
    "DivNoNan": [(af.math.divide_no_nan, [r(2, 3), r(3)])],
    "MulNoNan": [(af.math.multiply_no_nan, [r(2, 3), r(2, 1)])],
    "Floor": [(af.floor, [r(4) + 0.2])],
    "Ceil": [(af.ceil, [r(4) + 0.2])],
    "Round": [(lambda x: op("Round", x), [r(4) + 0.1])],
    "Conj": [(lambda a, b: af.abs(op("Conj", to_c(a, b)) * to_c(b, a)), [r(3), r(3)])],
    "ComplexAbs": [(lambda a, b: af.abs(to_c(a, b)), [r(2, 2, lo=-1), r(2, 2, lo=-1)])],
    "Cast": [
        (lambda x: af.cast(af.cast(x, af.float32), af.float64) * 2.0, [r(3)], 1e-3),
        (lambda a, b: af.abs(to_c(a, b)), [r(3), r(3)]),
        (lambda x: af.cast(af.cast(x, af.int32), af.float64) + x, [r(3) + 0.2]),
    ],
    # -- binary (with broadcasting)
    "Add": [(lambda x, y: op("Add", x, y), [r(2, 3), r(3)])],
    "AddV2": [
        (lambda x, y: op("AddV2", x, y), [r(2, 3), r(2, 1)]),
        (lambda x, y: op("AddV2", x, y), [r(1, 3), r(2, 1)]),
    ],
    "Sub": [(lambda x, y: x - y, [r(2, 3), r(1, 3)])],
    "Mul": [(lambda x, y: x * y, [r(2, 3), r(3)]), (lambda x, y: x * y, [r(4), r(2, 1, 4)])],
    "Div": [(lambda x, y: op("Div", x, y), [r(2, 3), r(3)])],
    "RealDiv": [(lambda x, y: x / y, [r(2, 3), r(2, 1)])],
    "FloorDiv": [(lambda x, y: af.floordiv(x, y) + x * y, [r(3) * 3, r(3)])],
    "FloorMod": [(lambda x, y: af.floormod(x, y), [np.array([2.3, 3.7, -1.6]), r(3)])],
    "Pow": [(lambda x, y: af.pow(x, y), [r(2, 3), r(3)])],
    "Maximum": [(af.maximum, [np.array([[1.0, 2.0, 3.0]]), np.array([[1.5], [2.5]])])],
    "Minimum": [(af.minimum, [np.array([[1.0, 2.0, 3.0]]), np.array([[1.5], [2.5]])])],
    "SquaredDifference": [(af.squared_difference, [r(2, 3), r(3)])],
    "AddN": [(lambda a, b, c: af.add_n([a, b * 2.0, c]), [r(2, 2), r(2, 2), r(2, 2)])],
    # -- matmul
    "MatMul": [
        (
            lambda a, b, ta=ta, tb=tb: af.matmul(a, b, transpose_a=ta, transpose_b=tb),
            [r(*sa), r(*sb)],
        )
        for ta, tb, sa, sb in [
            (False, False, (2, 3), (3, 4)),
            (False, True, (2, 3), (4, 3)),
            (True, False, (3, 2), (3, 4)),
            (True, True, (3, 2), (4, 3)),
        ]
    ],
    "BatchMatMul": [
        (lambda a, b: op("BatchMatMul", a, b), [r(2, 2, 3), r(2, 3, 2)]),
        (lambda a, b: op("BatchMatMul", a, b, adj_x=True, adj_y=True), [r(2, 3, 2), r(2, 2, 3)]),
        (lambda a, b: op("BatchMatMul", a, b, adj_x=True), [r(2, 3, 2), r(2, 3, 2)]),
        (lambda a, b: op("BatchMatMul", a, b, adj_y=True), [r(2, 2, 3), r(2, 2, 3)]),
    ],
    "BatchMatMulV2": [
        (lambda a, b: op("BatchMatMulV2", a, b), [r(2, 2, 3), r(3, 2)]),
        (lambda a, b: op("BatchMatMulV2", a, b, adj_x=True), [r(1, 3, 2), r(2, 3, 2)]),
        (lambda a, b: op("BatchMatMulV2", a, b, adj_y=True), [r(2, 2, 3), r(2, 3)]),
    ],
    "BatchMatMulV3": [
        (lambda a, b: op("BatchMatMulV3", a, b, Tout=af.float64), [r(2, 2, 3), r(3, 2)]),
        (
            lambda a, b: op("BatchMatMulV3", a, b, adj_x=True, Tout=af.float64),
            [r(1, 3, 2), r(2, 3, 2)],
        ),
    ],
    # -- reductions
    "Sum": [
        (lambda x: af.reduce_sum(x), [r(2, 3)]),
        (lambda x: af.reduce_sum(x, axis=1), [r(2, 3)]),
        (lambda x: af.reduce_sum(x, axis=[0, 2], keepdims=True), [r(2, 3, 2)]),
    ],
    "Mean": [
        (lambda x: af.reduce_mean(x), [r(2, 3)]),
        (lambda x: af.reduce_mean(x, axis=-1), [r(2, 3)]),
    ],
    "Prod": [
        (lambda x: af.reduce_prod(x, axis=1), [r(2, 3)]),
        (lambda x: af.reduce_prod(x, axis=0, keepdims=True), [np.array([[0.0, 2.0], [3.0, 4.0]])]),
        (lambda x: af.reduce_prod(x, axis=[0, 2]), [r(2, 2, 2)]),
    ],
    "Max": [(lambda x: af.reduce_max(x, axis=1), [r(3, 4)])],
    "Min": [(lambda x: af.reduce_min(x, axis=[0, 1], keepdims=True), [r(3, 4)])],
    "EuclideanNorm": [
        (lambda x: af.reduce_euclidean_norm(x), [r(2, 3)]),
        (lambda x: af.reduce_euclidean_norm(x, axis=1), [r(2, 3)]),
        (lambda x: af.reduce_euclidean_norm(x, axis=[0, 2], keepdims=True), [r(2, 3, 2)]),
    ],
    # -- array
    "Identity": [(af.identity, [r(3)])],
    "IdentityN": [
        (lambda a, b: (lambda o: o[0] * 2.0 + o[1])(af.identity_n([a, b])), [r(2), r(2)])
    ],
    "PlaceholderWithDefault": [
        (lambda x: af.placeholder_with_default(x, [2, 2]) * 3.0, [r(2, 2)])
    ],
    "Fill": [(lambda v: af.fill([2, 3], v) * af.constant(r(2, 3)), [np.array(1.5)])],
    "Reshape": [(lambda x: af.reshape(x, [3, 2]) * af.constant(r(3, 2)), [r(2, 3)])],
    "ExpandDims": [(lambda x: af.expand_dims(x, 1) * af.constant(r(2, 3, 3)), [r(2, 3)])],
    "Squeeze": [(lambda x: af.squeeze(x, [1]), [r(2, 1, 3)])],
    "Transpose": [(lambda x: af.transpose(x, [2, 0, 1]), [r(2, 3, 4)])],
    "ConjugateTranspose": [(lambda x: op("ConjugateTranspose", x, [1, 0]), [r(2, 3)])],
    "ConcatV2": [
        (lambda a, b: af.concat([a, b * 2.0], axis=1), [r(2, 1), r(2, 3)]),
        (lambda a, b: af.concat([a, b], axis=-1), [r(2, 2), r(2, 1)]),
    ],
    "Pack": [(lambda a, b: af.stack([a, b * 2.0], axis=1), [r(2, 3), r(2, 3)])],
    "Tile": [(lambda x: af.tile(x, [2, 3]), [r(2, 2)])],
    "BroadcastTo": [
        (lambda x: af.broadcast_to(x, [2, 3, 4]), [r(3, 1)]),
        (lambda x: af.broadcast_to(x, [2, 3]), [r(3)]),
    ],
    "Pad": [(lambda x: af.pad(x, [[1, 0], [2, 1]]), [r(2, 3)])],
    "PadV2": [(lambda x: af.pad(x, [[1, 1], [0, 1]], constant_values=2.0), [r(2, 3)])],
    "MirrorPad": [
        (lambda x: af.pad(x, [[1, 1], [2, 1]], mode="REFLECT"), [r(3, 3)]),
        (lambda x: af.pad(x, [[1, 2], [0, 1]], mode="SYMMETRIC"), [r(2, 3)]),
    ],
    # -- slicing
    "Slice": [(lambda x: af.slice(x, [1, 0], [1, 2]), [r(3, 3)])],
    "StridedSlice": [
        (lambda x: x[1:, ::2], [r(3, 5)]),
        (lambda x: x[::-1, 1], [r(4, 3)]),
        (lambda x: x[..., None, 1:], [r(2, 3)]),
    ],
    "GatherV2": [
        (lambda x, i: af.gather(x, i), [r(4, 2), np.array([3, 0, 3])]),
        (lambda x, i: af.gather(x, i, axis=1), [r(2, 4, 2), np.array([[1, 1], [3, 0]])]),
    ],
    "ReverseV2": [(lambda x: af.reverse(x, [1]), [r(2, 3)])],
    "Split": [(lambda x: (lambda s: s[0] * 2.0 + s[1])(af.split(x, 2, axis=1)), [r(2, 4)])],
    "SplitV": [
        (lambda x: (lambda s: af.concat([s[1] * 3.0, s[0]], 0))(af.split(x, [1, 2])), [r(3, 2)])
    ],
    "Unpack": [(lambda x: (lambda u: u[0] * 2.0 + u[1])(af.unstack(x, axis=1)), [r(3, 2)])],
    "Select": [(lambda a, b: af.where(af.constant([True, False, True]), a, b), [r(3), r(3)])],
    "SelectV2": [
        (lambda a, b: af.where_v2(af.constant([[True], [False]]), a, b), [r(2, 3), r(1, 3)])
    ],
    # -- checks and logging
    "CheckNumerics": [(lambda x: af.check_numerics(x, "bad"), [r(3)])],
    "CheckNumericsV2": [
        (lambda x: apply_op("CheckNumericsV2", [x], {"message": "bad"}).outputs[0], [r(3)])
    ],
    "Print": [(lambda x: af.Print(x, [x], first_n=0) * 2.0, [r(3)])],
    # -- gradient_ops
    "UnsortedSegmentSum": [
        (lambda x, i: g.unsorted_segment_sum(x, i, 3), [r(4, 2), np.array([2, 0, 2, -1])])
    ],
    "StridedSliceGrad": [  # linear in dy (TF's gradient: dy's slice)
        (
            lambda dy: op(
                "StridedSliceGrad",
                af.constant([4, 3]),
                af.constant([1, 0]),
                af.constant([4, 3]),
                af.constant([2, 1]),
                dy,
            ),
            [r(2, 3)],
        )
    ],
    "MirrorPadGrad": [
        (
            lambda x: op("MirrorPadGrad", x, af.constant([[1, 1], [0, 2]]), mode="REFLECT"),
            [r(5, 5)],
        )
    ],
    "Cumsum": [
        (lambda x: g.cumsum(x, 1), [r(2, 3)]),
        (lambda x: g.cumsum(x, 0, exclusive=True, reverse=True), [r(3, 2)]),
    ],
    "Cumprod": [
        (lambda x: g.cumprod(x, 1), [r(2, 3)]),
        (lambda x: g.cumprod(x, 0, exclusive=True, reverse=True), [r(3, 2)]),
    ],
    # -- Zeta, Igamma(c) (ops/math_special_ops.py; SciPy's values)
    "Zeta": [(lambda q: af.zeta(af.constant([2.5, 3.0], af.float64), q), [r(2)])],
    "Igamma": [(af.igamma, [r(3, lo=0.5, hi=3.0), r(3, lo=0.5, hi=3.0)])],
    "Igammac": [(af.igammac, [r(3, lo=0.5, hi=3.0), r(3, lo=0.5, hi=3.0)])],
    # -- tf.math.special (ops/math_special_ops.py; SciPy's values)
    **{
        op_type: [(getattr(af.math.special, fn), [r(3, lo=0.3, hi=2.5)])]
        for op_type, fn in [
            ("Dawsn", "dawsn"),
            ("Expint", "expint"),
            ("FresnelCos", "fresnel_cos"),
            ("FresnelSin", "fresnel_sin"),
            ("Spence", "spence"),
            ("BesselJ0", "bessel_j0"),
            ("BesselJ1", "bessel_j1"),
            ("BesselY0", "bessel_y0"),
            ("BesselY1", "bessel_y1"),
            ("BesselK0", "bessel_k0"),
            ("BesselK0e", "bessel_k0e"),
            ("BesselK1", "bessel_k1"),
            ("BesselK1e", "bessel_k1e"),
        ]
    },
}

# Cases re-run with placeholders of unknown dimensions (the run-time shape paths).
DYNAMIC = [
    "Add",
    "AddV2",
    "Mul",
    "Maximum",
    "BatchMatMulV2",
    "Sum",
    "Mean",
    "Max",
    "Prod",
    "ConcatV2",
    "Tile",
    "Pad",
    "Slice",
    "StridedSlice",
    "GatherV2",
    "Fill",
]


def _module(op_def) -> str:
    kd = next(iter(op_def.kernel_defs.values()), None)
    return kd.fn.__module__.rsplit(".", 1)[-1] if kd else "?"


def _differentiable_owned():
    return sorted(
        name
        for name, d in all_op_defs().items()
        if d.grad_fn is not None and not d.not_differentiable and _module(d) in OWNED
    )


def test_every_gradient_has_a_case():
    missing = [n for n in _differentiable_owned() if not CASES.get(n) and n not in ALLOWLIST]
    assert missing == [], f"gradients without a finite-difference case: {missing}"


def test_every_op_has_gradient_or_mark():
    unmarked = sorted(
        f"{name} ({_module(d)})"
        for name, d in all_op_defs().items()
        if d.grad_fn is None
        and not d.not_differentiable
        and _module(d) not in FOREIGN_MODULES
        and not _module(d).startswith("test_")  # ops that tests register for themselves
        and name not in TF_NO_GRADIENT
    )
    assert unmarked == [], f"ops with neither a gradient nor NotDifferentiable: {unmarked}"


def _params(static):
    names = CASES if static else DYNAMIC
    for name in names:
        for i, case in enumerate(CASES[name]):
            yield pytest.param(name, case, id=f"{name}-{i}")


def _check(case, static):
    fn, values, *rest = case
    atol = rest[0] if rest else 1e-6
    checker = GradientChecker(delta=1e-6 if atol <= 1e-6 else 1e-3, static_shapes=static)
    errs = checker.errors(fn, values)
    assert any(e is not None for e in errs)
    for i, e in enumerate(errs):
        assert e is None or e <= atol, f"input {i}: max Jacobian error {e} > {atol}"


@pytest.mark.parametrize("name,case", list(_params(True)))
def test_gradient_matches_finite_differences(name, case):
    _check(case, static=True)


@pytest.mark.parametrize("name,case", list(_params(False)))
def test_gradient_with_unknown_shapes(name, case):
    _check(case, static=False)
