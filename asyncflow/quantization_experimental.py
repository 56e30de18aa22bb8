"""`tf.quantization.experimental`: TF's quantization options protos, the TFRecord saver of
representative datasets, and `quantize_saved_model` for TF1 SavedModels.

The option messages are TF's (asyncflow/protos/quantization_options.proto, TF's field
numbers), so their bytes and text format are TF's.

`quantize_saved_model` writes a TF1 SavedModel (frozen graph, the input's tags and
signatures) where TF 2.21 writes a TF2 one (functions, XLA ops). With
METHOD_DYNAMIC_RANGE_INT8 each MatMul whose constant weight has at least
`min_num_elements_for_weights` (default 1024) elements computes what TF's quantized
function computes, op for op in value: int8 weights (one symmetric scale,
max|w| / 127), the input quantized per call to int8 with TF's asymmetric parameters
(range widened to hold 0, scale (max - min) / 255 in float64, the zero point
truncated), an int32 product, and the float rescale. METHOD_NO_QUANTIZE writes the
frozen model as it is. METHOD_STATIC_RANGE_WEIGHT_ONLY_INT8 keeps the input float:
float input times the int8 weight as floats, then the weight's scale, as TF's function
does. Other methods, and op sets other than XLA (TF's default here),
raise ValueError. TF returns the output loaded as a TF2 object; this returns None.
"""

from __future__ import annotations

import os
import shutil

import numpy as np

from asyncflow import clip_ops, dtypes, graph_io, graph_util, python_io, tf_logging
from asyncflow import graph as graph_mod
from asyncflow import session as session_mod
from asyncflow.framework_extras import make_ndarray, make_tensor_proto
from asyncflow.ops import array_ops, cast_ops, math_ops, matmul_ops, reduction_ops
from asyncflow.protos import GraphDef
from asyncflow.protos import quantization_options_pb2 as _pb
from asyncflow.saved_model import builder as builder_mod
from asyncflow.saved_model import loader

QuantizationOptions = _pb.QuantizationOptions
QuantizationMethod = _pb.QuantizationMethod
QuantizationComponentSpec = _pb.QuantizationComponentSpec
UnitWiseQuantizationSpec = _pb.UnitWiseQuantizationSpec
RepresentativeDatasetFile = _pb.RepresentativeDatasetFile
RepresentativeDataSample = _pb.RepresentativeDataSample

_DEFAULT_MIN_ELEMENTS = 1024
_MAX_SAMPLES = 1 << 20


class TfRecordRepresentativeDatasetSaver:
    """Saves representative datasets (per signature key, iterables of
    {input name: value} samples) as TFRecord files of `RepresentativeDataSample`s."""

    def __init__(self, path_map, expected_input_key_map=None):
        """Raises:
        KeyError: `path_map` and `expected_input_key_map` name different keys."""
        self.path_map = path_map
        self.expected_input_key_map = {}
        if expected_input_key_map is not None:
            if set(path_map) != set(expected_input_key_map):
                raise KeyError(
                    "The `path_map` and `expected_input_key_map` should have the same set of keys."
                )
            self.expected_input_key_map = expected_input_key_map

    def save(self, representative_dataset) -> dict:
        """Writes each signature key's dataset to its path; returns {key:
        RepresentativeDatasetFile}.

        Raises:
          ValueError: a key not in `path_map`.
          KeyError: a sample whose input names are not the expected ones.
        """
        files = {}
        for key, samples in representative_dataset.items():
            if key not in self.path_map:
                raise ValueError(
                    f"SignatureDef key does not exist in the provided path_map: {key}"
                )
            files[key] = self._write(samples, key)
        return files

    def _write(self, samples, key: str):
        expected = self.expected_input_key_map.get(key)
        path = self.path_map[key]
        with python_io.TFRecordWriter(os.fspath(path)) as writer:
            for sample in samples:
                if expected is not None and set(sample) != set(expected):
                    raise KeyError(
                        "Invalid input keys for representative sample. The function expects "
                        f"input keys of: {set(expected)}. Got: {set(sample)}. Please provide "
                        "correct input keys for representative samples."
                    )
                record = RepresentativeDataSample()
                for name, value in _evaluated(sample).items():
                    record.tensor_proto_inputs[name].CopyFrom(make_tensor_proto(value))
                writer.write(record.SerializeToString())
        tf_logging.info("Saved representative dataset for signature def: %s to: %s", key, path)
        return RepresentativeDatasetFile(tfrecord_file_path=str(path))


def _evaluated(sample) -> dict:
    """`sample` with graph tensors replaced by their values (TF1: run in a Session)."""
    tensors = {k: v for k, v in sample.items() if isinstance(v, graph_mod.Tensor)}
    if not tensors:
        return dict(sample)
    graph = next(iter(tensors.values())).graph
    with session_mod.Session(graph=graph) as sess:
        values = sess.run(tensors)
    return {k: values.get(k, v) for k, v in sample.items()}


def quantize_saved_model(
    saved_model_path,
    output_directory=None,
    quantization_options=None,
    representative_dataset=None,
    *,
    overwrite_output_directory=False,
):
    """Quantizes the TF1 SavedModel at `saved_model_path` into `output_directory`.

    Raises:
      OSError: no SavedModel at `saved_model_path`.
      FileExistsError: `output_directory` exists, is not empty, and
        `overwrite_output_directory` is false.
      ValueError: no `representative_dataset` for a static-range method, or a method,
        op set or unit-wise spec asyncflow does not implement.
    """
    path = os.fspath(saved_model_path)
    if not any(
        os.path.exists(os.path.join(path, n)) for n in ("saved_model.pb", "saved_model.pbtxt")
    ):
        raise OSError(
            f"SavedModel file does not exist at: {path}/{{saved_model.pbtxt|saved_model.pb}}"
        )
    out = os.fspath(output_directory) if output_directory is not None else _temp_dir()
    if os.path.exists(out) and os.listdir(out) and not overwrite_output_directory:
        raise FileExistsError(
            f"Output directory already exists: {out} . Please set "
            "overwrite_output_directory to true to overwrite the existing directory."
        )
    options = QuantizationOptions()
    if quantization_options is not None:
        options.CopyFrom(quantization_options)
    method = options.quantization_method.preset_method
    if method == QuantizationMethod.METHOD_UNSPECIFIED:
        method = QuantizationMethod.METHOD_STATIC_RANGE_INT8
    if method == QuantizationMethod.METHOD_STATIC_RANGE_INT8 and representative_dataset is None:
        raise ValueError(
            "When `representative_dataset` is not provided, the model should be trained "
            "with quantization-aware training (QAT)."
        )
    if method not in (
        QuantizationMethod.METHOD_DYNAMIC_RANGE_INT8,
        QuantizationMethod.METHOD_STATIC_RANGE_WEIGHT_ONLY_INT8,
        QuantizationMethod.METHOD_NO_QUANTIZE,
    ) or len(options.unit_wise_quantization_specs):
        name = QuantizationMethod.PresetMethod.Name(method)
        raise ValueError(
            "asyncflow's quantize_saved_model implements METHOD_DYNAMIC_RANGE_INT8, "
            "METHOD_STATIC_RANGE_WEIGHT_ONLY_INT8 and METHOD_NO_QUANTIZE without unit-wise "
            f"specs, not {name}."
        )
    if options.op_set not in (_pb.OP_SET_UNSPECIFIED, _pb.XLA):
        # TF's other op sets compute with other kernels; only XLA's arithmetic is here.
        raise ValueError(
            "asyncflow's quantize_saved_model computes with the XLA op set's arithmetic, "
            f"not {_pb.OpSet.Name(options.op_set)}."
        )
    tags = set(options.tags) or {"serve"}
    min_elements = options.min_num_elements_for_weights or _DEFAULT_MIN_ELEMENTS
    graph_def, meta = _frozen(path, tags)
    keys = list(options.signature_keys) or ["serving_default"]
    signatures = {k: meta.signature_def[k] for k in keys if k in meta.signature_def}
    if len(signatures) != len(keys):
        missing = sorted(set(keys) - set(signatures))
        raise ValueError(f"Signature keys {missing} are not in the SavedModel.")
    if method == QuantizationMethod.METHOD_DYNAMIC_RANGE_INT8:
        graph_def = _dynamic_range(graph_def, min_elements, _quantized_matmul)
    elif method == QuantizationMethod.METHOD_STATIC_RANGE_WEIGHT_ONLY_INT8:
        graph_def = _dynamic_range(graph_def, min_elements, _weight_only_matmul)
    if os.path.exists(out):
        shutil.rmtree(out)
    _write(out, graph_def, tags, signatures)


def _temp_dir() -> str:
    import tempfile

    return tempfile.mkdtemp()


def _frozen(path: str, tags):
    """The SavedModel's graph with its variables as constants, and its MetaGraphDef."""
    g = graph_mod.Graph()
    with session_mod.Session(graph=g) as sess:
        meta = loader.load(sess, tags, path)
        outputs = sorted(
            {
                info.name.split(":")[0]
                for sig in meta.signature_def.values()
                for info in sig.outputs.values()
            }
        )
        frozen = graph_util.convert_variables_to_constants(sess, g.as_graph_def(), outputs)
    return frozen, meta


def _write(out: str, graph_def, tags, signatures) -> None:
    g = graph_mod.Graph()
    with g.as_default():
        graph_io.import_graph_def(graph_def, name="")
    with session_mod.Session(graph=g) as sess:
        b = builder_mod.SavedModelBuilder(out)
        b.add_meta_graph_and_variables(sess, sorted(tags), signature_def_map=signatures)
        b.save()


def _const_value(nodes: dict, name: str):
    """The value of the Const that `name` reads, through Identity nodes, or None."""
    name = name.split(":")[0].lstrip("^")
    seen = 0
    while name in nodes and nodes[name].op == "Identity" and seen < 64:
        name = nodes[name].input[0].split(":")[0]
        seen += 1
    node = nodes.get(name)
    if node is None or node.op != "Const":
        return None
    return make_ndarray(node.attr["value"].tensor)


def _dynamic_range(graph_def, min_elements: int, rewrite):
    """Each float MatMul (no transposes) of an input by a large constant weight becomes
    `rewrite`'s int8 computation (TF's), under the MatMul's name."""
    nodes = {n.name: n for n in graph_def.node}
    targets = []
    for n in graph_def.node:
        if n.op != "MatMul" or n.attr["T"].type != dtypes.float32.as_datatype_enum:
            continue
        if n.attr["transpose_a"].b or n.attr["transpose_b"].b:
            continue
        w = _const_value(nodes, n.input[1])
        if w is not None and w.dtype == np.float32 and w.ndim == 2 and w.size >= min_elements:
            targets.append((n, w))
    if not targets:
        return graph_def
    out = GraphDef()
    out.CopyFrom(graph_def)
    replaced = {n.name for n, _ in targets}
    del out.node[:]
    out.node.extend(n for n in graph_def.node if n.name not in replaced)
    for node, w in targets:
        out.node.extend(rewrite(node, w))
    return out


def _int8_weight(w: np.ndarray):
    """TF's int8 weight: one symmetric scale, max|w| / 127."""
    scale = np.float32(np.abs(w).max() / np.float32(127))
    scale = scale if scale > 0 else np.float32(1)
    return np.clip(np.round(w / scale), -127, 127).astype(np.int8), scale


def _weight_only_matmul(node, w: np.ndarray) -> list:
    """NodeDefs for TF's weight-only int8 MatMul: the float input times the int8
    weight (as float), then the weight's scale; named as the MatMul."""
    q, scale = _int8_weight(w)
    g = graph_mod.Graph()
    stand_in = "asyncflow_matmul_input"
    with g.as_default():
        x = array_ops.placeholder(dtypes.float32, [None, w.shape[0]], name=stand_in)
        with g.name_scope(node.name + "/quantized"):
            wq = cast_ops.cast(array_ops.constant(q, name="weight"), dtypes.float32)
            product = matmul_ops.matmul(x, wq)
            scale_t = array_ops.constant(scale, name="weight_scale")
        math_ops.multiply(product, scale_t, name=node.name)
    return _graft(g, stand_in, node)


def _graft(g, stand_in: str, node) -> list:
    """`g`'s nodes but the stand-in, reading `node`'s first input in its place."""
    made = [n for n in g.as_graph_def().node if n.name != stand_in]
    for n in made:
        for i, inp in enumerate(n.input):
            if inp.split(":")[0] == stand_in:
                n.input[i] = node.input[0]
        n.device = node.device
    return made


def _quantized_matmul(node, w: np.ndarray) -> list:
    """NodeDefs computing MatMul `node` as TF's dynamic-range int8 function does; the
    last is named as the MatMul and reads its first input."""
    q, scale = _int8_weight(w)
    k = w.shape[0]
    g = graph_mod.Graph()
    stand_in = "asyncflow_matmul_input"
    with g.as_default():
        x = array_ops.placeholder(dtypes.float32, [None, k], name=stand_in)
        with g.name_scope(node.name + "/quantized"):
            flat = array_ops.reshape(x, [-1])
            top = reduction_ops.reduce_max(flat, [0], keepdims=True)
            bottom = reduction_ops.reduce_min(flat, [0], keepdims=True)
            hi = math_ops.maximum(np.float32([0.0]), top)
            lo = math_ops.minimum(np.float32([0.0]), bottom)
            hi64 = cast_ops.cast(hi, dtypes.float64)
            step64 = (hi64 - cast_ops.cast(lo, dtypes.float64)) / np.float64(255)
            step = cast_ops.cast(step64, dtypes.float32)
            # TF casts the float zero point to int32: truncation, not rounding.
            zero = cast_ops.cast(
                cast_ops.cast(np.float64(127) - hi64 / step64, dtypes.float32), dtypes.int32
            )
            offset = cast_ops.cast(zero, dtypes.float32) + np.float32(0.5)
            xq = math_ops.floor(x / step + offset)
            xq = cast_ops.cast(clip_ops.clip_by_value(xq, -128.0, 127.0), dtypes.int8)
            xi = cast_ops.cast(xq, dtypes.int32) - zero
            wq = cast_ops.cast(array_ops.constant(q, name="weight"), dtypes.int32)
            acc = matmul_ops.matmul(xi, wq)
            rescale = step * array_ops.constant(scale, name="weight_scale")
        math_ops.multiply(cast_ops.cast(acc, dtypes.float32), rescale, name=node.name)
    return _graft(g, stand_in, node)
