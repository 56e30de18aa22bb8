"""`tf.lite.TFLiteConverter` (TF1's): a frozen float32 inference graph -> .tflite bytes.

Plan, in order:
1. Freeze: variables become Consts (`graph_util.convert_variables_to_constants`); each
   input becomes a Placeholder whose unknown dimensions are 1 (TF1's converter fixes the
   batch at 1 and keeps -1 in `shape_signature`).
2. Import that GraphDef into a fresh graph (shape inference gives every tensor a static
   shape) and, when an input had unknown dimensions, a second time with them unknown, for
   the shape signatures.
3. Fold constants: a tensor none of whose ancestors is an input is computed once in a
   Session (Shape/Size/Rank of a static shape count as constants).
4. Lower each remaining op (`lowering.LOWERINGS`), run TF's fusion passes (`passes`),
   and write the flatbuffer: inputs, then constants, then the other tensors in operator
   order, one buffer per tensor (buffer 0 empty), as TF's converter lays them out.
"""

from __future__ import annotations

import enum
import os

import numpy as np

from asyncflow import dtypes, graph_io, graph_util
from asyncflow import graph as graph_mod
from asyncflow import session as session_mod
from asyncflow.lite import interpreter, lowering, passes, quantize, schema
from asyncflow.protos import GraphDef
from asyncflow.saved_model import loader

_SHAPE_OPS = {"Shape", "Size", "Rank", "ZerosLike", "OnesLike"}
_INPUT_OPS = {"Placeholder", "PlaceholderWithDefault", "PlaceholderV2"}
_STATEFUL_SOURCES = {
    "RandomUniform",
    "RandomStandardNormal",
    "TruncatedNormal",
    "RandomUniformInt",
    "VariableV2",
    "Variable",
    "VarHandleOp",
    "ReadVariableOp",
}


class ConverterError(Exception):
    """The graph holds an op TFLite's builtin operators cannot express."""


class OpsSet(enum.Enum):
    TFLITE_BUILTINS = "TFLITE_BUILTINS"
    SELECT_TF_OPS = "SELECT_TF_OPS"
    TFLITE_BUILTINS_INT8 = "TFLITE_BUILTINS_INT8"
    EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8 = (
        "EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8"
    )
    EXPERIMENTAL_STABLEHLO_OPS = "EXPERIMENTAL_STABLEHLO_OPS"

    def __str__(self) -> str:
        return str(self.value)


class Optimize(enum.Enum):
    DEFAULT = "DEFAULT"
    OPTIMIZE_FOR_SIZE = "OPTIMIZE_FOR_SIZE"
    OPTIMIZE_FOR_LATENCY = "OPTIMIZE_FOR_LATENCY"
    EXPERIMENTAL_SPARSITY = "EXPERIMENTAL_SPARSITY"

    def __str__(self) -> str:
        return str(self.value)


class TargetSpec:
    """The ops and types the converted model may use."""

    def __init__(
        self,
        supported_ops=None,
        supported_types=None,
        experimental_select_user_tf_ops=None,
        experimental_supported_backends=None,
    ):
        self.supported_ops = set(supported_ops) if supported_ops else {OpsSet.TFLITE_BUILTINS}
        self.supported_types = set(supported_types) if supported_types else set()
        self.experimental_select_user_tf_ops = set(experimental_select_user_tf_ops or ())
        self.experimental_supported_backends = experimental_supported_backends


class RepresentativeDataset:
    """A generator of input samples: calibration data for full-integer quantization."""

    def __init__(self, input_gen):
        self.input_gen = input_gen


class TFLiteConverter:
    """Converts a TF1 float32 inference graph to a TFLite flatbuffer (`convert()`).

    Build it with `from_session`, `from_frozen_graph` or `from_saved_model`.
    """

    def __init__(
        self,
        graph_def,
        input_tensors,
        output_tensors,
        input_arrays_with_shape=None,
        output_arrays=None,
        experimental_debug_info_func=None,
    ):
        self._graph_def = graph_def
        # Each input: (tensor name, dtype, shape list or None); outputs: tensor names.
        if input_tensors is None:
            # TF's form: (name, shape or None) pairs naming nodes of `graph_def`.
            self._inputs = _arrays_of(graph_def, input_arrays_with_shape or [])
            self._outputs = [_tensor_name(n) for n in output_arrays or []]
        else:
            self._inputs = [(t.name, t.dtype, _shape_list(t)) for t in input_tensors]
            self._outputs = [t.name for t in output_tensors]
        self._signature_names = None
        self.inference_type = dtypes.float32
        self.inference_input_type = None
        self.inference_output_type = None
        self.output_format = 2  # constants.TFLITE
        self.quantized_input_stats = {}
        self.default_ranges_stats = None
        self.drop_control_dependency = True
        self.reorder_across_fake_quant = False
        self.change_concat_input_ranges = False
        self.allow_custom_ops = False
        self.dump_graphviz_dir = None
        self.dump_graphviz_video = False
        self.conversion_summary_dir = None
        self.optimizations = set()
        self.representative_dataset = None
        self.target_spec = TargetSpec()
        self.experimental_new_converter = True
        self.experimental_new_quantizer = True
        self.exclude_conversion_metadata = False
        self.saved_model_dir = None
        # toco_convert's post_training_quantize: per-tensor FULLY_CONNECTED weights.
        self._legacy_dynamic_range = False

    # -- constructors

    @classmethod
    def from_session(cls, sess, input_tensors, output_tensors) -> TFLiteConverter:
        """Freezes `sess`'s variables into the graph reaching `output_tensors`."""
        outs = sorted({t.op.name for t in output_tensors})
        frozen = graph_util.convert_variables_to_constants(sess, sess.graph.as_graph_def(), outs)
        return cls(frozen, input_tensors, output_tensors)

    @classmethod
    def from_frozen_graph(
        cls, graph_file, input_arrays, output_arrays, input_shapes=None
    ) -> TFLiteConverter:
        """Reads a frozen GraphDef file; `input_shapes` maps input names to shapes.

        Raises:
          OSError: `graph_file` does not exist.
          ValueError: the file is not a GraphDef, or an input/output name is not in it.
        """
        path = os.fspath(graph_file)
        if not os.path.exists(path):
            raise OSError(f"File '{path}' does not exist.")
        with open(path, "rb") as f:
            data = f.read()
        gd = GraphDef()
        try:
            gd.ParseFromString(data)
        except Exception as exc:
            raise ValueError(f"Unable to parse input file '{path}'.") from exc
        nodes = {n.name for n in gd.node}
        for name in output_arrays:
            if _op_name(name) not in nodes:
                raise ValueError(f"Invalid tensors '{name}' were found.")
        pairs = [
            (n, _given_shape(input_shapes or {}, _tensor_name(n), None)) for n in input_arrays
        ]
        return cls(gd, None, None, pairs, output_arrays)

    @classmethod
    def from_saved_model(
        cls,
        saved_model_dir,
        input_arrays=None,
        input_shapes=None,
        output_arrays=None,
        tag_set=None,
        signature_key=None,
    ) -> TFLiteConverter:
        """Loads the meta graph tagged `tag_set` ({"serve"}) and converts signature
        `signature_key` ("serving_default").

        Raises:
          ValueError: no such signature.
        """
        tags = set(tag_set or {"serve"})
        key = signature_key or "serving_default"
        g = graph_mod.Graph()
        with session_mod.Session(graph=g) as sess:
            mg = loader.load(sess, tags, saved_model_dir)
            if key not in mg.signature_def:
                raise ValueError(
                    f"No '{key}' in the SavedModel's SignatureDefs. Possible "
                    f"values are '{','.join(sorted(mg.signature_def))}'."
                )
            sig = mg.signature_def[key]
            # TF orders a signature's inputs and outputs by tensor name, not by key.
            ins = [g.get_tensor_by_name(n) for n in sorted(v.name for v in sig.inputs.values())]
            outs = [g.get_tensor_by_name(n) for n in sorted(v.name for v in sig.outputs.values())]
            if input_arrays is not None:
                ins = [g.get_tensor_by_name(_tensor_name(n)) for n in input_arrays]
            if output_arrays is not None:
                outs = [g.get_tensor_by_name(_tensor_name(n)) for n in output_arrays]
            conv = cls.from_session(sess, ins, outs)
        if input_shapes:
            conv._inputs = [(n, dt, _given_shape(input_shapes, n, s)) for n, dt, s in conv._inputs]
        conv.saved_model_dir = saved_model_dir
        return conv

    # -- conversion

    def _quantization(self) -> str | None:
        """None (a float model), "float16", "dynamic", "integer" or "int16" (16x8), as TF
        2.21 picks it.

        Raises:
          ValueError: options TF rejects.
        """
        types = {dtypes.as_dtype(t) for t in self.target_spec.supported_types}
        if types - {dtypes.float32, dtypes.float16}:
            raise ValueError(
                "target_spec.supported_types other than tf.float32 and tf.float16 "
                f"are not supported (got {sorted(t.name for t in types)})."
            )
        int16 = OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
        sixteen = int16 in self.target_spec.supported_ops and bool(self.optimizations)
        io_types = (None, dtypes.float32, dtypes.int8, dtypes.uint8)
        for t in (self.inference_input_type, self.inference_output_type):
            if sixteen and t in (dtypes.int16, dtypes.uint8):
                continue
            if t not in io_types:
                raise ValueError(
                    "Unsupported `inference_input_type` value. Expected to be in "
                    f"('tf.uint8', 'tf.int8'), instead got {_tf_name(t)}."
                )
        if not self.optimizations:
            if self.inference_type not in (dtypes.float32, None) or self.inference_input_type in (
                dtypes.int8,
                dtypes.uint8,
            ):
                raise ValueError(
                    "The `quantized_input_stats` flag must be defined when either "
                    "`inference_type` flag or `inference_input_type` flag is set to tf.int8 "
                    f"or tf.uint8. Currently, `inference_type={_tf_name(self.inference_type)}` "
                    f"and `inference_input_type={_tf_name(self.inference_input_type)}`."
                )
            return None
        if dtypes.float16 in types and self.representative_dataset is None:
            return "float16"
        if sixteen:
            if self.representative_dataset is None:
                return "dynamic"  # TF 2.21 too: 16x8 needs calibration
            if dtypes.uint8 in (self.inference_input_type, self.inference_output_type):
                # TF 2.21 writes a file whose uint8 QUANTIZE then fails to prepare.
                raise ValueError(
                    "16x8 quantization takes tf.float32 or tf.int16 inference_input_type "
                    "and inference_output_type, not tf.uint8."
                )
            return "int16"
        if self.representative_dataset is None:
            if OpsSet.TFLITE_BUILTINS_INT8 in self.target_spec.supported_ops:
                raise ValueError(
                    "For full integer quantization, a `representative_dataset` must be specified."
                )
            return "dynamic"
        return "integer"

    def convert(self) -> bytes:
        """The .tflite flatbuffer bytes.

        Raises:
          ConverterError: an op with no TFLite builtin equivalent (named in the message),
            or, quantizing to int8, one with no int8 kernel.
          ValueError: bad quantization options, or inputs with an unknown rank.
        """
        mode = self._quantization()
        content = _Builder(self._graph_def, self._inputs, self._outputs).build()
        if mode is None:
            return content
        model = schema.read_model(content)
        if mode == "float16":
            quantize.float16(model)
        elif mode == "dynamic":
            quantize.dynamic_range(model, self._legacy_dynamic_range)
        else:
            stats = self._calibrate(content)
            io = [
                _np_dtype(t or dtypes.float32)
                for t in (self.inference_input_type, self.inference_output_type)
            ]
            if mode == "int16":
                # TF 2.21 gives a 16x8 model int16 edges for tf.int8 as for tf.int16.
                io = [np.dtype(np.int16) if t.kind == "i" else t for t in io]
            try:
                quantize.full_integer(
                    model,
                    stats,
                    io[0],
                    io[1],
                    np.int16 if mode == "int16" else np.int8,
                )
            except quantize.QuantizationError as exc:
                raise ConverterError(str(exc)) from None
        return schema.write_model(model)

    def _calibrate(self, content: bytes) -> dict[int, tuple[float, float]]:
        """Each float tensor's (min, max) over the representative dataset, run through
        the float model (TF calibrates its float TFLite model the same way)."""
        gen = self.representative_dataset
        gen = gen.input_gen if isinstance(gen, RepresentativeDataset) else gen
        interp = interpreter.Interpreter(model_content=content)
        inputs = interp.get_input_details()
        names = [_op_name(n) for n, _, _ in self._inputs]
        float_tensors = [
            d["index"] for d in interp.get_tensor_details() if d["dtype"] == np.float32
        ]
        stats: dict[int, tuple[float, float]] = {}
        for sample in gen():
            if isinstance(sample, dict):
                sample = [sample[n] for n in names]
            if len(sample) != len(inputs):
                raise ValueError(
                    f"The representative dataset gave {len(sample)} inputs; the model "
                    f"has {len(inputs)}."
                )
            interp.allocate_tensors()
            for d, v in zip(inputs, sample, strict=True):
                interp.set_tensor(d["index"], np.asarray(v, d["dtype"]))
            interp.invoke()
            for i in float_tensors:
                v = interp.get_tensor(i)
                if v.size == 0:
                    continue
                lo, hi = float(v.min()), float(v.max())
                old = stats.get(i, (lo, hi))
                stats[i] = (min(old[0], lo), max(old[1], hi))
        if not stats:
            raise ValueError("The representative dataset gave no samples.")
        return stats


def _tf_name(dtype) -> str:
    return "None" if dtype is None else f"tf.{dtypes.as_dtype(dtype).name}"


def _static_value(op_type: str, shape: list[int], dtype):
    """The value of a Shape/Size/Rank/ZerosLike/OnesLike of a static `shape`."""
    if op_type == "Shape":
        return shape
    if op_type == "Size":
        return int(np.prod(shape))
    if op_type == "Rank":
        return len(shape)
    return (np.zeros if op_type == "ZerosLike" else np.ones)(shape, dtype)


def _arrays_of(graph_def, pairs) -> list[tuple]:
    """(tensor name, dtype, shape) of each (name, shape or None) input pair; a missing
    shape is the Placeholder's.

    Raises:
      ValueError: a name that is no node of `graph_def`.
    """
    nodes = {n.name: n for n in graph_def.node}
    inputs = []
    for name, shape in pairs:
        node = nodes.get(_op_name(name))
        if node is None:
            raise ValueError(f"Invalid tensors '{name}' were found.")
        dtype = graph_io._dtype_from_enum(node.attr["dtype"].type)
        if shape is None and "shape" in node.attr:
            sp = graph_io.shape_from_proto(node.attr["shape"].shape)
            shape = sp.as_list() if sp.rank is not None else None
        inputs.append((_tensor_name(name), dtype, None if shape is None else list(shape)))
    return inputs


def _given_shape(input_shapes: dict, tensor_name: str, default):
    """`input_shapes`' entry for a tensor (keyed by op or tensor name), else `default`."""
    given = input_shapes.get(_op_name(tensor_name), input_shapes.get(tensor_name))
    return default if given is None else list(given)


def _op_name(name: str) -> str:
    return name.split(":")[0]


def _tensor_name(name: str) -> str:
    return name if ":" in name else name + ":0"


def _shape_list(t):
    return t.shape.as_list() if t.shape.rank is not None else None


def _np_dtype(dtype) -> np.dtype:
    return np.dtype(dtypes.as_dtype(dtype).as_numpy_dtype)


def _placeholder_graph(graph_def, inputs, concrete: bool) -> GraphDef:
    """`graph_def` with each input's producer replaced by a Placeholder of its shape."""
    out = GraphDef()
    out.CopyFrom(graph_def)
    by_op = {_op_name(n): (dt, shape) for n, dt, shape in inputs}
    for node in out.node:
        if node.name not in by_op:
            continue
        dt, shape = by_op[node.name]
        if shape is None:
            raise ValueError(f"Provide an input shape for input array '{node.name}'.")
        dims = [1 if (d is None or d < 0) and concrete else d for d in shape]
        node.op = "Placeholder"
        del node.input[:]
        node.attr.clear()
        node.attr["dtype"].CopyFrom(graph_io.attr_value(dtypes.as_dtype(dt)))
        graph_io.shape_proto(dims, node.attr["shape"].shape)
    return out


class _Builder:
    """One conversion: graph import, constant folding, lowering, passes, writing."""

    def __init__(self, graph_def, inputs, outputs):
        self.inputs = inputs
        self.output_names = [_tensor_name(n) for n in outputs]
        self.graph = graph_mod.Graph()
        with self.graph.as_default():
            graph_io.import_graph_def(_placeholder_graph(graph_def, inputs, True), name="")
        self.sig_graph = None
        if any(s is None or any(d is None or d < 0 for d in s) for _, _, s in inputs):
            self.sig_graph = graph_mod.Graph()
            with self.sig_graph.as_default():
                graph_io.import_graph_def(_placeholder_graph(graph_def, inputs, False), name="")
        self.nodes: list[lowering.Node] = []
        self.consts: dict[str, np.ndarray] = {}
        self.alias_of: dict[str, str | lowering.Const] = {}
        # Tensors a rule makes up between the TFLite ops it emits -> the TF tensor whose
        # shape and dtype they share.
        self.made_up: dict[str, str] = {}
        self.made_up_dtype: dict[str, np.dtype] = {}

    # -- rule context (used by lowering.LOWERINGS)

    def const(self, tensor) -> np.ndarray | None:
        return self.consts.get(tensor.name)

    def static_shape(self, tensor) -> list[int]:
        return tensor.shape.as_list()

    def value(self, tensor, int32: bool = False):
        name = tensor.name
        while name in self.alias_of and isinstance(self.alias_of[name], str):
            name = self.alias_of[name]
        if isinstance(self.alias_of.get(name), lowering.Const):
            return self.alias_of[name]
        if name in self.consts:
            v = self.consts[name]
            if int32 or v.dtype == np.int64:
                v = v.astype(np.int32)
            return lowering.Const(v, _op_name(name))
        return name

    def new_const(self, value, name: str) -> lowering.Const:
        return lowering.Const(np.asarray(value), name)

    def synthetic(self, name: str, like, dtype=None) -> str:
        """A tensor between two emitted ops: `like`'s shape, `dtype` or `like`'s dtype."""
        self.made_up[name] = like.name
        if dtype is not None:
            self.made_up_dtype[name] = np.dtype(dtype)
        return name

    def alias(self, out, src) -> None:
        v = self.value(src)
        self.alias_of[out.name] = v

    def emit(self, kind, inputs, op, options, outputs=None) -> None:
        outs = outputs if outputs is not None else [t.name for t in op.outputs]
        self.nodes.append(lowering.Node(kind, list(inputs), outs, options, [op.name]))

    # -- steps

    def _reachable(self) -> list:
        """Ops the outputs need, in a topological order, stopping at the inputs."""
        input_ops = {_op_name(n) for n, _, _ in self.inputs}
        order, seen = [], set()
        # Reversed: the first output's ops pop (and so come) first.
        stack = [(self.graph.get_tensor_by_name(n).op, False) for n in self.output_names[::-1]]
        while stack:
            op, done = stack.pop()
            if done:
                order.append(op)
                continue
            if op.name in seen:
                continue
            seen.add(op.name)
            stack.append((op, True))
            if op.name not in input_ops:
                stack.extend((t.op, False) for t in reversed(list(op.inputs)))
        return order

    def _fold_constants(self, ops) -> list:
        input_ops = {_op_name(n) for n, _, _ in self.inputs}
        dynamic: set[str] = set()
        feeds: dict = {}
        for op in ops:
            if op.name in input_ops or op.type in _STATEFUL_SOURCES:
                dynamic.add(op.name)
            elif op.type in _SHAPE_OPS and op.inputs[0].shape.is_fully_defined():
                shape = op.inputs[0].shape.as_list()
                out = op.outputs[0]
                dtype = _np_dtype(out.dtype)
                feeds[out] = np.asarray(_static_value(op.type, shape, dtype), dtype)
            elif op.type in _INPUT_OPS:
                raise ValueError(f"Placeholder {op.name} is not an input of the conversion.")
            elif any(t.op.name in dynamic for t in op.inputs):
                dynamic.add(op.name)
        folded = [t for op in ops if op.name not in dynamic for t in op.outputs]
        wanted = [t for t in folded if t not in feeds]
        if wanted:
            with session_mod.Session(graph=self.graph) as sess:
                values = sess.run(wanted, feed_dict=feeds or None)
            self.consts.update(
                {t.name: np.asarray(v) for t, v in zip(wanted, values, strict=True)}
            )
        self.consts.update({t.name: v for t, v in feeds.items()})
        return [op for op in ops if op.name in dynamic and op.name not in input_ops]

    def _lower(self, ops) -> None:
        unsupported = []
        for op in ops:
            rule = lowering.LOWERINGS.get(op.type)
            if rule is None:
                unsupported.append(op)
                continue
            try:
                rule(self, op)
            except lowering.LoweringError as exc:
                raise ConverterError(
                    f"Could not translate MLIR to FlatBuffer. 'tf.{exc.op_type}' op "
                    f"({op.name}) with {exc.detail} is not supported by asyncflow's TFLite "
                    "converter"
                ) from None
        if unsupported:
            names = sorted({op.type for op in unsupported})
            lines = [
                f"'tf.{op.type}' op is neither a custom op nor a flex op" for op in unsupported
            ]
            error = ConverterError(
                "Could not translate MLIR to FlatBuffer. " + "\n".join(lines) + "\nSome ops "
                "are not supported by the native TFLite runtime.\nTF Select ops: "
                + ", ".join(names)
            )
            # The ops themselves, for tf.lite.experimental.authoring's report.
            error.unsupported_ops = list(unsupported)
            raise error

    def _shape_of(self, name: str):
        name = self.made_up.get(name, name)
        return tuple(self.graph.get_tensor_by_name(self.renamed.get(name, name)).shape.as_list())

    def build(self) -> bytes:
        ops = self._fold_constants(self._reachable())
        self._lower(ops)
        outputs = [self.value(self.graph.get_tensor_by_name(n)) for n in self.output_names]
        renames = {}
        produced = {o for node in self.nodes for o in node.outputs}
        for i, (name, v) in enumerate(zip(self.output_names, outputs, strict=True)):
            if isinstance(v, str) and v != name and v in produced and v not in outputs[:i]:
                renames[v] = outputs[i] = name
        passes.rename_outputs(self.nodes, renames)
        self.renamed = {new: old for old, new in renames.items()}
        out_set = {o for o in outputs if isinstance(o, str)}
        nodes = passes.fuse_hard_swish(self.nodes, out_set)
        nodes, same_as = passes.merge_duplicates(nodes, out_set)
        outputs = [same_as.get(o, o) if isinstance(o, str) else o for o in outputs]
        out_set = {o for o in outputs if isinstance(o, str)}
        nodes = passes.fold_affine(nodes, out_set)
        nodes = passes.fuse_l2_normalize(nodes, out_set, self._shape_of)
        nodes = passes.fuse_relu_n1_to_1(nodes, out_set)
        nodes = passes.fuse_activations(nodes, out_set)
        nodes = passes.drop_identity_reshapes(nodes, out_set, self._shape_of)
        nodes = passes.drop_reshape_before_fc(nodes, out_set, self._shape_of)
        return _Writer(self, nodes, outputs).write()


class _Writer:
    """Lays out tensors and buffers for the lowered nodes and writes the flatbuffer."""

    def __init__(self, builder: _Builder, nodes, outputs):
        self.b = builder
        self.nodes = nodes
        self.outputs = outputs
        self.tensors: list[dict] = []
        self.buffers: list[dict] = [{}]
        self.index: dict = {}

    def _add(self, key, name, shape, dtype, data=None, signature=None) -> int:
        code = schema.NUMPY_TENSOR.get(np.dtype(dtype))
        if code is None:
            raise ConverterError(
                f"Tensor {name} has type {np.dtype(dtype)}, which TFLite "
                "float models here do not hold."
            )
        self.buffers.append({"data": data} if data is not None else {})
        t = {
            "shape": _i32list(shape),
            "type": code,
            "buffer": len(self.buffers) - 1,
            "name": name,
            "has_rank": True,
        }
        if signature is not None and list(signature) != list(shape):
            t["shape_signature"] = _i32list(signature)
        self.tensors.append(t)
        self.index[key] = len(self.tensors) - 1
        return len(self.tensors) - 1

    def _signature(self, name: str):
        if self.b.sig_graph is None:
            return None
        try:
            shape = self.b.sig_graph.get_tensor_by_name(name).shape
        except (KeyError, ValueError):
            return None
        if shape.rank is None:
            return None
        return [-1 if d is None else d for d in shape.as_list()]

    def _dynamic(self, name: str) -> int:
        if name not in self.index:
            like = self.b.made_up.get(name, name)
            t = self.b.graph.get_tensor_by_name(like)
            label = _tensor_label(name)
            dtype = self.b.made_up_dtype.get(name, _np_dtype(t.dtype))
            self._add(name, label, t.shape.as_list(), dtype, signature=self._signature(like))
        return self.index[name]

    def _const(self, c: lowering.Const) -> int:
        v = np.ascontiguousarray(c.value)
        if v.dtype == np.int64:
            v = v.astype(np.int32)
        raw = v.astype(v.dtype.newbyteorder("<")).tobytes()
        # One tensor per distinct constant, however many rules asked for it.
        key = ("const", c.name, v.dtype.str, v.shape, raw)
        if key not in self.index:
            self._add(key, c.name, v.shape, v.dtype, np.frombuffer(raw, np.uint8))
        return self.index[key]

    def _ref(self, v) -> int:
        if v is None:
            return -1
        if isinstance(v, lowering.Const):
            return self._const(v)
        return self._dynamic(v)

    def write(self) -> bytes:
        for name, _, _ in self.b.inputs:
            self._dynamic(_tensor_name(name))
        for node in self.nodes:
            for v in node.inputs:
                if isinstance(v, lowering.Const):
                    self._const(v)
        codes: list[int] = []
        operators = []
        for node in self.nodes:
            code = schema.BUILTIN_OPS[node.op]
            if code not in codes:
                codes.append(code)
            opts_name = _OPTIONS_OF.get(node.op)
            op = {
                "opcode_index": codes.index(code),
                "inputs": [self._ref(v) for v in node.inputs],
                "outputs": [self._dynamic(o) for o in node.outputs],
            }
            if opts_name is not None:
                op["builtin_options_type"] = schema.OPTIONS[opts_name][0]
                op["builtin_options"] = node.options
            operators.append(op)
        outputs = [self._ref(o) for o in self.outputs]
        model = {
            "version": schema.SCHEMA_VERSION,
            "operator_codes": [
                {
                    "deprecated_builtin_code": min(c, schema.PLACEHOLDER_FOR_GREATER_OP_CODES),
                    "version": 1,
                    "builtin_code": c,
                }
                for c in codes
            ],
            "subgraphs": [
                {
                    "tensors": self.tensors,
                    "inputs": [self.index[_tensor_name(n)] for n, _, _ in self.b.inputs],
                    "outputs": outputs,
                    "operators": operators,
                    "name": "main",
                }
            ],
            "description": "MLIR Converted.",
            "buffers": self.buffers,
        }
        self.buffers.append({"data": np.frombuffer(b"1.14.0".ljust(16, b"\0"), np.uint8)})
        model["metadata"] = [{"name": "min_runtime_version", "buffer": len(self.buffers) - 1}]
        return schema.write_model(model)


def _tensor_label(name: str) -> str:
    op, _, index = name.partition(":")
    return op if index in ("", "0") else f"{op}:{index}"


def _i32list(shape) -> list[int]:
    return [int(d) for d in shape]


_OPTIONS_OF = {
    "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "SOFTMAX": "SoftmaxOptions",
    "CONCATENATION": "ConcatenationOptions",
    "ADD": "AddOptions",
    "SUB": "SubOptions",
    "MUL": "MulOptions",
    "DIV": "DivOptions",
    "MEAN": "ReducerOptions",
    "SUM": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions",
    "PAD": "PadOptions",
    "PADV2": "PadV2Options",
    "GATHER": "GatherOptions",
    "STRIDED_SLICE": "StridedSliceOptions",
    "EXP": "ExpOptions",
    "LOG_SOFTMAX": "LogSoftmaxOptions",
    "NEG": "NegOptions",
    "SELECT": "SelectOptions",
    "ARG_MAX": "ArgMaxOptions",
    "ARG_MIN": "ArgMinOptions",
    "SPLIT": "SplitOptions",
    "SPLIT_V": "SplitVOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "SPACE_TO_DEPTH": "SpaceToDepthOptions",
    "DEPTH_TO_SPACE": "DepthToSpaceOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions",
    "L2_NORMALIZATION": "L2NormOptions",
    "REDUCE_ANY": "ReducerOptions",
    "MIRROR_PAD": "MirrorPadOptions",
    "LOCAL_RESPONSE_NORMALIZATION": "LocalResponseNormalizationOptions",
    "PACK": "PackOptions",
    "UNPACK": "UnpackOptions",
    "LEAKY_RELU": "LeakyReluOptions",
    "BATCH_MATMUL": "BatchMatMulOptions",
}
