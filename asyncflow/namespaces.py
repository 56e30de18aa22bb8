"""TF1's namespaces over names asyncflow already has: `af.math`, `af.random`,
`af.linalg`, `af.io`, `af.sparse`, `af.strings`, `af.signal`, `af.spectral`,
`af.quantization`, `af.debugging`, `af.manip`, `af.queue`, `af.version`, `af.audio`,
`af.ragged` (its functions beyond the RaggedTensor module).

Each namespace lists TF1's names (`tf.compat.v1.<namespace>`, TF 2.21) and resolves
one when it is first read: an explicit alias (`linalg.inv` is `matrix_inverse`), else
the top-level name, else `af.nn`'s, else the namespace's TF1 prefix (`random.uniform`
is `random_uniform`, `sparse.add` is `sparse_add`, `strings.length` is
`string_length`).  Resolution is lazy so names other modules add later appear without
an edit here; a TF1 name asyncflow lacks raises AttributeError as any missing
attribute does.  `sparse` resolves only through aliases and its prefix (its bare
names, add, concat, ..., are dense ops at the top level); `strings` tries its prefix
before the bare name.
"""

from __future__ import annotations

import types

__all__ = ["NAMESPACES", "Namespace", "install"]

_NAMES = {
    "math": """
        abs accumulate_n acos acosh add add_n angle approx_max_k approx_min_k argmax argmin
        asin asinh atan atan2 atanh bessel_i0 bessel_i0e bessel_i1 bessel_i1e betainc
        bincount ceil confusion_matrix conj cos cosh count_nonzero cumprod cumsum
        cumulative_logsumexp digamma divide divide_no_nan equal erf erfc erfcinv erfinv exp
        expm1 floor floordiv floormod greater greater_equal igamma igammac imag in_top_k
        invert_permutation is_finite is_inf is_nan is_non_decreasing is_strictly_increasing
        l2_normalize lbeta less less_equal lgamma log log1p log_sigmoid log_softmax
        logical_and logical_not logical_or logical_xor maximum minimum mod multiply
        multiply_no_nan ndtri negative nextafter not_equal polygamma polyval pow real
        reciprocal reciprocal_no_nan reduce_all reduce_any reduce_euclidean_norm
        reduce_logsumexp reduce_max reduce_mean reduce_min reduce_prod reduce_std reduce_sum
        reduce_variance rint round rsqrt scalar_mul segment_max segment_mean segment_min
        segment_prod segment_sum sigmoid sign sin sinh sobol_sample softmax softplus
        softsign special sqrt square squared_difference subtract tan tanh top_k truediv
        unsorted_segment_max unsorted_segment_mean unsorted_segment_min
        unsorted_segment_prod unsorted_segment_sqrt_n unsorted_segment_sum xdivy xlog1py
        xlogy zero_fraction zeta
    """,
    "random": """
        Algorithm Generator all_candidate_sampler categorical create_rng_state
        fixed_unigram_candidate_sampler fold_in gamma get_global_generator get_seed
        learned_unigram_candidate_sampler log_uniform_candidate_sampler multinomial normal
        poisson set_global_generator set_random_seed shuffle split stateless_binomial
        stateless_categorical stateless_gamma stateless_multinomial stateless_normal
        stateless_parameterized_truncated_normal stateless_poisson
        stateless_truncated_normal stateless_uniform truncated_normal uniform
        uniform_candidate_sampler
    """,
    "linalg": """
        LinearOperator LinearOperatorAdjoint LinearOperatorBlockDiag
        LinearOperatorBlockLowerTriangular LinearOperatorCirculant LinearOperatorCirculant2D
        LinearOperatorCirculant3D LinearOperatorComposition LinearOperatorDiag
        LinearOperatorFullMatrix LinearOperatorHouseholder LinearOperatorIdentity
        LinearOperatorInversion LinearOperatorKronecker LinearOperatorLowRankUpdate
        LinearOperatorLowerTriangular LinearOperatorPermutation LinearOperatorScaledIdentity
        LinearOperatorToeplitz LinearOperatorTridiag LinearOperatorZeros adjoint band_part
        cholesky cholesky_solve cross det diag diag_part eigh eigh_tridiagonal eigvalsh
        einsum expm eye global_norm inv l2_normalize logdet logm lstsq lu lu_matrix_inverse
        lu_reconstruct lu_solve matmul matrix_rank matrix_transpose matvec norm normalize
        pinv qr set_diag slogdet solve sqrtm svd tensor_diag tensor_diag_part tensordot
        trace transpose triangular_solve tridiagonal_matmul tridiagonal_solve
    """,
    "io": """
        FixedLenFeature FixedLenSequenceFeature PaddingFIFOQueue PriorityQueue QueueBase
        RaggedFeature RandomShuffleQueue SparseFeature TFRecordCompressionType
        TFRecordOptions TFRecordWriter VarLenFeature decode_and_crop_jpeg decode_base64
        decode_bmp decode_compressed decode_csv decode_gif decode_image decode_jpeg
        decode_json_example decode_jxl decode_png decode_proto decode_raw decode_webp
        deserialize_many_sparse encode_base64 encode_jpeg encode_png encode_proto
        extract_jpeg_shape is_jpeg match_filenames_once matching_files parse_example
        parse_sequence_example parse_single_example parse_single_sequence_example
        parse_tensor read_file serialize_many_sparse serialize_sparse serialize_tensor
        tf_record_iterator write_file write_graph
    """,
    "sparse": """
        SparseConditionalAccumulator SparseTensor add bincount concat cross cross_hashed
        expand_dims eye fill_empty_rows from_dense mask matmul maximum merge minimum
        placeholder reduce_max reduce_max_sparse reduce_sum reduce_sum_sparse reorder
        reset_shape reshape retain segment_mean segment_sqrt_n segment_sum slice softmax
        sparse_dense_matmul split to_dense to_indicator transpose
    """,
    "strings": """
        as_string bytes_split format join length lower ngrams reduce_join regex_full_match
        regex_replace split strip substr to_hash_bucket to_hash_bucket_fast
        to_hash_bucket_strong to_number unicode_decode unicode_decode_with_offsets
        unicode_encode unicode_script unicode_split unicode_split_with_offsets
        unicode_transcode unsorted_segment_join upper
    """,
    "quantization": """
        dequantize fake_quant_with_min_max_args fake_quant_with_min_max_args_gradient
        fake_quant_with_min_max_vars fake_quant_with_min_max_vars_gradient
        fake_quant_with_min_max_vars_per_channel
        fake_quant_with_min_max_vars_per_channel_gradient quantize quantize_and_dequantize
        quantize_and_dequantize_v2 quantized_concat
    """,
    "signal": """
        dct fft fft2d fft3d fftnd fftshift frame hamming_window hann_window idct ifft ifft2d
        ifft3d ifftnd ifftshift inverse_mdct inverse_stft inverse_stft_window_fn irfft
        irfft2d irfft3d irfftnd kaiser_bessel_derived_window kaiser_window
        linear_to_mel_weight_matrix mdct mfccs_from_log_mel_spectrograms overlap_and_add
        rfft rfft2d rfft3d rfftnd stft vorbis_window
    """,
    "debugging": """
        Assert assert_all_finite assert_equal assert_greater assert_greater_equal
        assert_integer assert_less assert_less_equal assert_near assert_negative
        assert_non_negative assert_non_positive assert_none_equal assert_positive
        assert_proper_iterable assert_rank assert_rank_at_least assert_rank_in
        assert_same_float_dtype assert_scalar assert_shapes assert_type check_numerics
        get_log_device_placement is_finite is_inf is_nan is_non_decreasing
        is_numeric_tensor is_strictly_increasing set_log_device_placement
    """,
    "ragged": """
        RaggedTensorValue boolean_mask constant constant_value cross cross_hashed
        map_flat_values placeholder range row_splits_to_segment_ids
        segment_ids_to_row_splits stack stack_dynamic_partitions
    """,
    "spectral": """
        dct fft fft2d fft3d idct ifft ifft2d ifft3d irfft irfft2d irfft3d rfft rfft2d rfft3d
    """,
    "manip": """
        batch_to_space_nd gather_nd reshape reverse roll scatter_nd space_to_batch_nd tile
    """,
    "audio": """
        decode_wav encode_wav
    """,
    "queue": """
        FIFOQueue PaddingFIFOQueue PriorityQueue QueueBase RandomShuffleQueue
    """,
    "version": """
        COMPILER_VERSION GIT_VERSION GRAPH_DEF_VERSION GRAPH_DEF_VERSION_MIN_CONSUMER
        GRAPH_DEF_VERSION_MIN_PRODUCER VERSION
    """,
}

# namespace -> {name: dotted path under asyncflow}
_ALIASES = {
    "math": {
        "sobol_sample": "ops.sobol_ops.sobol_sample",
        "divide": "divide",
        "divide_no_nan": "div_no_nan",
        "multiply_no_nan": "math_composites.multiply_no_nan",
        "reciprocal_no_nan": "math_composites.reciprocal_no_nan",
        "log_softmax": "nn.log_softmax",
        "softplus": "nn.softplus",
        "softsign": "nn.softsign",
        "in_top_k": "nn.in_top_k",
        "top_k": "nn.top_k",
        "l2_normalize": "nn.l2_normalize",
        "zero_fraction": "nn.zero_fraction",
        "softmax": "nn.softmax",
        "confusion_matrix": "metrics.confusion_matrix",
        "erfinv": "ops.math_more_ops.erfinv",
        "ndtri": "ops.math_more_ops.ndtri",
        "erfcinv": "ops.math_more_ops.erfcinv",
        "nextafter": "ops.math_more_ops.nextafter",
        "cumulative_logsumexp": "ops.math_more_ops.cumulative_logsumexp",
        "approx_max_k": "ops.approx_topk_ops.approx_max_k",
        "approx_min_k": "ops.approx_topk_ops.approx_min_k",
        "special": "ops.math_special_ops.special",
    },
    "linalg": {
        "matmul": "matmul",
        "inv": "linalg_dispatch.inv",
        "det": "linalg_dispatch.det",
        "transpose": "matrix_transpose",
        "adjoint": "linalg_dispatch.adjoint",
        "diag": "matrix_diag",
        "diag_part": "linalg_dispatch.diag_part",
        "set_diag": "matrix_set_diag",
        "band_part": "matrix_band_part",
        "solve": "linalg_dispatch.solve",
        "triangular_solve": "matrix_triangular_solve",
        "lstsq": "matrix_solve_ls",
        "sqrtm": "matrix_square_root",
        "eigh": "self_adjoint_eig",
        "eigvalsh": "self_adjoint_eigvals",
        "l2_normalize": "nn.l2_normalize",
        "tensor_diag": "diag",
        "tensor_diag_part": "diag_part",
        "global_norm": "global_norm",
        "slogdet": "ops.math_more_ops.slogdet",
        "logdet": "linalg_dispatch.logdet",
        "lu": "ops.math_more_ops.lu",
        "lu_reconstruct": "linalg_extras.lu_reconstruct",
        "lu_solve": "linalg_extras.lu_solve",
        "lu_matrix_inverse": "linalg_extras.lu_matrix_inverse",
        "pinv": "linalg_extras.pinv",
        "matrix_rank": "linalg_extras.matrix_rank",
        "normalize": "linalg_extras.normalize",
        "expm": "linalg_extras.expm",
        "tridiagonal_solve": "ops.linalg_tridiag_ops.tridiagonal_solve",
        "tridiagonal_matmul": "ops.linalg_tridiag_ops.tridiagonal_matmul",
        "cholesky": "linalg_dispatch.cholesky",
        "trace": "linalg_dispatch.trace",
        "eigh_tridiagonal": "linalg_tridiagonal.eigh_tridiagonal",
        "logm": "ops.linalg_logm_ops.logm",
        "LinearOperator": "linalg_operator.LinearOperator",
        "LinearOperatorAdjoint": "linalg_operators_derived.LinearOperatorAdjoint",
        "LinearOperatorComposition": "linalg_operator.LinearOperatorComposition",
        "LinearOperatorFullMatrix": "linalg_operators_matrix.LinearOperatorFullMatrix",
        "LinearOperatorInversion": "linalg_operators_derived.LinearOperatorInversion",
        "LinearOperatorLowerTriangular": "linalg_operator.LinearOperatorLowerTriangular",
        "LinearOperatorDiag": "linalg_operators_diag.LinearOperatorDiag",
        "LinearOperatorHouseholder": "linalg_operators_matrix.LinearOperatorHouseholder",
        "LinearOperatorIdentity": "linalg_operators_diag.LinearOperatorIdentity",
        "LinearOperatorPermutation": "linalg_operators_matrix.LinearOperatorPermutation",
        "LinearOperatorScaledIdentity": "linalg_operators_diag.LinearOperatorScaledIdentity",
        "LinearOperatorZeros": "linalg_operators_diag.LinearOperatorZeros",
        "LinearOperatorBlockDiag": "linalg_operators_block.LinearOperatorBlockDiag",
        "LinearOperatorBlockLowerTriangular": (
            "linalg_operators_block.LinearOperatorBlockLowerTriangular"
        ),
        "LinearOperatorKronecker": "linalg_operators_kronecker.LinearOperatorKronecker",
        "LinearOperatorLowRankUpdate": "linalg_operators_kronecker.LinearOperatorLowRankUpdate",
        "LinearOperatorCirculant": "linalg_operators_fft.LinearOperatorCirculant",
        "LinearOperatorCirculant2D": "linalg_operators_fft.LinearOperatorCirculant2D",
        "LinearOperatorCirculant3D": "linalg_operators_fft.LinearOperatorCirculant3D",
        "LinearOperatorToeplitz": "linalg_operators_fft.LinearOperatorToeplitz",
        "LinearOperatorTridiag": "linalg_operators_fft.LinearOperatorTridiag",
    },
    "random": {
        "uniform": "random_uniform",
        "normal": "random_normal",
        "shuffle": "random_shuffle",
        "gamma": "random_gamma",
        "poisson": "random_poisson",
        "categorical": "ops.random_ops.categorical",
        "get_seed": "get_seed",
        "stateless_uniform": "stateless_random_uniform",
        "stateless_normal": "stateless_random_normal",
        "stateless_categorical": "ops.stateless_random_ops.stateless_categorical",
        "stateless_multinomial": "ops.stateless_random_ops.stateless_multinomial",
        "stateless_gamma": "ops.stateless_random_ops.stateless_random_gamma",
        "stateless_poisson": "ops.stateless_random_ops.stateless_random_poisson",
        "stateless_binomial": "ops.stateless_random_ops.stateless_random_binomial",
        "stateless_parameterized_truncated_normal": (
            "ops.parameterized_truncated_normal_ops.stateless_parameterized_truncated_normal"
        ),
        "fold_in": "ops.stateless_random_ops.fold_in",
        "split": "ops.stateless_random_ops.split",  # (not the top-level array split)
        "create_rng_state": "ops.stateless_random_ops.create_rng_state",
        "Algorithm": "ops.stateless_random_ops.Algorithm",
        "Generator": "random_generator.Generator",
        "get_global_generator": "random_generator.get_global_generator",
        "set_global_generator": "random_generator.set_global_generator",
    },
    "io": {
        "TFRecordWriter": "python_io.TFRecordWriter",
        "TFRecordOptions": "python_io.TFRecordOptions",
        "TFRecordCompressionType": "python_io.TFRecordCompressionType",
        "tf_record_iterator": "python_io.tf_record_iterator",
        "match_filenames_once": "train.match_filenames_once",
        "decode_jpeg": "image.decode_jpeg",
        "decode_png": "image.decode_png",
        "decode_jxl": "image.decode_jxl",
        "decode_image": "image.decode_image",
        "decode_gif": "image.decode_gif",
        "decode_bmp": "image.decode_bmp",
        "encode_jpeg": "image.encode_jpeg",
        "encode_png": "image.encode_png",
        "is_jpeg": "image.is_jpeg",
        "extract_jpeg_shape": "image.extract_jpeg_shape",
        "decode_and_crop_jpeg": "image.decode_and_crop_jpeg",
        "decode_webp": "image.decode_webp",
        "decode_proto": "ops.proto_ops.decode_proto",
        "encode_proto": "ops.proto_ops.encode_proto",
        "RaggedFeature": "ops.parsing_ops.RaggedFeature",  # (not a top-level name in TF1)
    },
    "sparse": {
        "SparseTensor": "SparseTensor",
        "placeholder": "sparse_placeholder",
        "to_dense": "sparse_tensor_to_dense",
        "matmul": "sparse_tensor_dense_matmul",
        "sparse_dense_matmul": "sparse_tensor_dense_matmul",
        "eye": "sparse_composites.sparse_eye",
        "expand_dims": "sparse_composites.sparse_expand_dims",
        "bincount": "ops.count_ops.sparse_bincount",
        "from_dense": "sparse_composites.from_dense",
        "SparseConditionalAccumulator": "SparseConditionalAccumulator",
        "cross": "ops.sparse_cross_ops.sparse_cross",
        "cross_hashed": "ops.sparse_cross_ops.sparse_cross_hashed",
    },
    "strings": {
        "join": "string_join",
        "length": "string_length",
        "split": "ops.string_ops.strings_split",
        "strip": "string_strip",
        "to_number": "string_to_number",
        "to_hash_bucket": "string_to_hash_bucket",
        "to_hash_bucket_fast": "string_to_hash_bucket_fast",
        "to_hash_bucket_strong": "string_to_hash_bucket_strong",
        "format": "string_format",
        "lower": "ops.string_extras_ops.string_lower",
        "upper": "ops.string_extras_ops.string_upper",
        "unicode_decode": "ops.string_unicode_ops.unicode_decode",
        "unicode_decode_with_offsets": "ops.string_unicode_ops.unicode_decode_with_offsets",
        "unicode_split": "ops.string_unicode_ops.unicode_split",
        "unicode_split_with_offsets": "ops.string_unicode_ops.unicode_split_with_offsets",
        "unicode_encode": "ops.string_unicode_ops.unicode_encode",
        "unicode_transcode": "ops.string_unicode_ops.unicode_transcode",
        "unicode_script": "ops.string_unicode_ops.unicode_script",
        "ngrams": "ops.string_unicode_ops.ngrams",
        "bytes_split": "ops.string_unicode_ops.bytes_split",
        "unsorted_segment_join": "ops.string_unicode_ops.unsorted_segment_join",
    },
    "signal": {
        "mdct": "signal_mdct.mdct",
        "inverse_mdct": "signal_mdct.inverse_mdct",
        "kaiser_bessel_derived_window": "signal_mdct.kaiser_bessel_derived_window",
    },
    "quantization": {
        "quantize_and_dequantize": "ops.quantize_dequantize_ops.quantize_and_dequantize",
        "quantize_and_dequantize_v2": "ops.quantize_dequantize_ops.quantize_and_dequantize_v2",
    },
    "debugging": {"assert_all_finite": "verify_tensor_all_finite"},
    "manip": {},
    "queue": {},
    "version": {},
    "audio": {"decode_wav": "ops.audio_ops.decode_wav", "encode_wav": "ops.audio_ops.encode_wav"},
    "ragged": {
        n: f"ragged_functions.{n}"
        for n in "boolean_mask cross cross_hashed map_flat_values placeholder range stack "
        "row_splits_to_segment_ids segment_ids_to_row_splits stack_dynamic_partitions".split()
    },
    # TF1's older name for tf.signal's transforms: the same functions.
    "spectral": {
        n: f"signal.{n}"
        for n in "dct fft fft2d fft3d idct ifft ifft2d ifft3d irfft irfft2d irfft3d rfft rfft2d "
        "rfft3d".split()
    },
}

_PREFIXES = {
    "random": ("random_",),
    "sparse": ("sparse_",),
    "strings": ("string_",),
    "linalg": ("matrix_",),
    "math": (),
    "io": (),
    "signal": (),
    "quantization": (),
    "spectral": (),
    "debugging": (),
    "manip": (),
    "queue": (),
    "version": (),
    "audio": (),
    "ragged": (),
}


# Namespaces whose names are only their TF1 prefixed names: a bare top-level name of the
# same spelling is a dense op (add, concat, split, ...), not this one.  `strings` tries
# its prefix first (strings.strip is string_strip) but has bare names too (as_string).
_PREFIX_ONLY = frozenset({"sparse"})
_PREFIX_FIRST = frozenset({"strings"})


def _lookup(path: str):
    import asyncflow

    obj = asyncflow
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


class Namespace(types.ModuleType):
    """A namespace module whose TF1 names resolve lazily (see the module note)."""

    def __init__(self, name: str):
        super().__init__(f"asyncflow.{name}", f"TF1's tf.{name} namespace (asyncflow).")
        self._ns = name
        self._tf_names = frozenset(_NAMES[name].split())

    def _resolve(self, attr: str):
        ns = self._ns
        candidates = []
        if attr in _ALIASES[ns]:
            candidates.append(_ALIASES[ns][attr])
        prefixed = [p + attr for p in _PREFIXES[ns]]
        if ns in _PREFIX_ONLY:
            candidates += prefixed  # tf.sparse.add is sparse_add, never the dense add
        elif ns in _PREFIX_FIRST:
            candidates += [*prefixed, attr, f"nn.{attr}"]  # strings.strip: string_strip
        else:
            candidates += [attr, f"nn.{attr}", *prefixed]
        for path in candidates:
            obj = _lookup(path)
            if obj is not None and not isinstance(obj, types.ModuleType):
                return obj
        return None

    def __getattr__(self, attr: str):
        if attr.startswith("_") or attr not in self._tf_names:
            raise AttributeError(f"module 'asyncflow.{self._ns}' has no attribute '{attr}'")
        obj = self._resolve(attr)
        if obj is None:
            raise AttributeError(
                f"module 'asyncflow.{self._ns}' has no attribute '{attr}' "
                f"(TF1's tf.{self._ns}.{attr} is not implemented in asyncflow)"
            )
        setattr(self, attr, obj)
        return obj

    def __dir__(self):
        return sorted(n for n in self._tf_names if self._resolve(n) is not None)


NAMESPACES = {name: Namespace(name) for name in _NAMES}


def _union_dir(module, ns):
    """`dir()` of a family's own module: its public names and the namespace's."""
    own = getattr(module, "__all__", None)
    if own is None:
        own = [n for n in vars(module) if not n.startswith("_")]
    return lambda: sorted(set(own) | set(ns.__dir__()))


def install(package_globals: dict) -> None:
    """Bind each namespace in the package: a module already there (a family's own
    `asyncflow/<name>.py`) keeps its attributes and resolves the rest lazily."""
    for name, ns in NAMESPACES.items():
        existing = package_globals.get(name)
        if isinstance(existing, types.ModuleType) and not isinstance(existing, Namespace):
            existing.__getattr__ = ns.__getattr__
            existing.__dir__ = _union_dir(existing, ns)
        else:
            package_globals[name] = ns
