"""`tf.lite.experimental.QuantizationDebugger` and `QuantizationDebugOptions`: per-layer
error of a full-integer model against its float model, TF's metrics.

TF builds a debug model in which every quantized operator is followed by a float copy
reading the dequantized inputs and a NumericVerify op emitting the difference. Here the
two models run side by side instead: the quantized model (float inputs and outputs
unless `fully_quantize`) runs through asyncflow's interpreter, and each of its
quantized operators is run again with its float kernel on the dequantized inputs and
the float model's constants (operators that keep their input's parameters, such as
pools and reshapes, are their own reference: TF reports float noise around 0 for
them); the difference (dequantized result - float result) feeds
TF's metrics (num_elements, stddev, mean_error, max_abs_error, mean_squared_error),
averaged over the dataset as TF does (NaN-skipping mean).

Layer keys are "NumericVerify/<quantized tensor name>:<its index>" in asyncflow's
quantized model (TF's name and index its own debug model's tensors). A debug model TF
wrote runs as it is (the interpreter has TFLite's NumericVerify kernel), keys and all.
"""

from __future__ import annotations

import collections
import copy
import csv

import numpy as np

from asyncflow.lite import interpreter as interpreter_mod
from asyncflow.lite import kernels, quant_kernels, quantize

_DEFAULT_LAYER_DEBUG_METRICS = {
    "num_elements": lambda diffs: diffs.size,
    "stddev": np.std,
    "mean_error": np.average,
    "max_abs_error": lambda diffs: np.max(np.abs(diffs)),
    "mean_squared_error": lambda diffs: np.average(diffs**2),
}
_NOT_VERIFIED = {"QUANTIZE", "DEQUANTIZE"}


class QuantizationDebugOptions:
    """What the debugger measures and how the model is quantized.

    Raises:
      ValueError: two metrics share a name.
    """

    def __init__(
        self,
        layer_debug_metrics=None,
        model_debug_metrics=None,
        layer_direct_compare_metrics=None,
        denylisted_ops=None,
        denylisted_nodes=None,
        fully_quantize=False,
    ):
        self.layer_debug_metrics = layer_debug_metrics
        self.model_debug_metrics = model_debug_metrics
        self.layer_direct_compare_metrics = layer_direct_compare_metrics
        keys = []
        for metrics in (layer_debug_metrics, model_debug_metrics, layer_direct_compare_metrics):
            if metrics is not None:
                keys.extend(metrics.keys())
        if len(keys) != len(set(keys)):
            raise ValueError("Provided metrics have duplicate keys.")
        self.denylisted_ops = denylisted_ops
        self.denylisted_nodes = denylisted_nodes
        self.fully_quantize = fully_quantize


class QuantizationDebugger:
    """Runs a quantized model beside its float model and measures each layer's error.

    Give `converter` (a TFLiteConverter set up for full-integer quantization, with a
    representative dataset) and `debug_dataset` (a callable returning an iterable of
    input lists): asyncflow builds both models from the converter. Or give a debug model
    TF wrote (`quant_debug_model_path`/`_content`, with NumericVerify ops) and, for model
    metrics, the float model: its NumericVerify outputs are the differences, and the
    layer keys are TF's.

    Raises:
      ValueError: denylisted ops or nodes (not implemented), or a model with no
        quantized layer.
    """

    def __init__(
        self,
        quant_debug_model_path=None,
        quant_debug_model_content=None,
        float_model_path=None,
        float_model_content=None,
        debug_dataset=None,
        debug_options=None,
        converter=None,
    ):
        self._data_gen = debug_dataset
        self._debug_options = debug_options or QuantizationDebugOptions()
        self.converter = converter
        self.float_model = None
        self.quant_model = None
        if converter is None:
            # A debug model TF wrote: its NumericVerify ops give the differences.
            self._quant = interpreter_mod.Interpreter(
                quant_debug_model_path, quant_debug_model_content
            )
            self._float = None
            if self._debug_options.model_debug_metrics:
                self._float = interpreter_mod.Interpreter(float_model_path, float_model_content)
            self._start_stats(self._verified_layers())
            return
        self._build_models()
        self._initialize_stats()

    @property
    def options(self) -> QuantizationDebugOptions:
        return self._debug_options

    @options.setter
    def options(self, options: QuantizationDebugOptions) -> None:
        self._debug_options = options
        self._build_models()
        self._initialize_stats()

    def _build_models(self) -> None:
        opts = self._debug_options
        if opts.denylisted_ops or opts.denylisted_nodes:
            raise ValueError(
                "asyncflow's QuantizationDebugger does not keep denylisted ops or nodes float."
            )
        conv = copy.copy(self.converter)
        conv.optimizations = set()
        conv.representative_dataset = None
        self.float_model = conv.convert()
        conv = copy.copy(self.converter)
        if conv.representative_dataset is None:
            conv.representative_dataset = self._data_gen
        if not opts.fully_quantize:
            conv.inference_input_type = None
            conv.inference_output_type = None
        self.quant_model = conv.convert()

    def _initialize_stats(self) -> None:
        self._quant = interpreter_mod.Interpreter(model_content=self.quant_model)
        self._float = interpreter_mod.Interpreter(model_content=self.float_model)
        self._quantized_from = {
            outs[0]: ins[0]
            for name, ins, outs, _ in self._quant._ops
            if name == "QUANTIZE" and ins[0] in self._quant._inputs
        }
        self._start_stats(self._pair_layers())

    def _verified_layers(self) -> list:
        """(NumericVerify op, None, its output's name) of a TF debug model."""
        layers = []
        for op in self._quant._ops:
            if op[0] == "NumericVerify":
                layers.append((op, None, self._quant._tensors[op[2][0]].get("name") or ""))
        return layers

    def _start_stats(self, layers) -> None:
        self._layers = layers
        if not self._layers:
            raise ValueError("Please check if the quantized model is in debug mode")
        self._layer_debug_metrics = dict(_DEFAULT_LAYER_DEBUG_METRICS)
        if self._debug_options.layer_debug_metrics:
            self._layer_debug_metrics.update(self._debug_options.layer_debug_metrics)
        self.layer_statistics = None
        self.model_statistics = None

    def _pair_layers(self) -> list:
        """(quantized op, float op, key) for each quantized operator."""
        q_ops = [op for op in self._quant._ops if op[0] not in _NOT_VERIFIED]
        f_ops = [op for op in self._float._ops if op[0] not in _NOT_VERIFIED]
        layers = []
        for q_op, f_op in zip(q_ops, f_ops, strict=False):
            if q_op[0] != f_op[0]:
                break
            out = q_op[2][0]
            if self._quant._quant[out] is None:
                continue  # an operator left float
            name = self._quant._tensors[out].get("name") or ""
            layers.append((q_op, f_op, f"NumericVerify/{name}:{out}"))
        return layers

    def _set_inputs(self, interp, data, first: bool) -> None:
        details = interp.get_input_details()
        if len(details) != len(data):
            raise ValueError(
                f"Number of inputs provided ({len(data)}) does not match number of inputs "
                f"to the model ({len(details)})"
            )
        if first:
            for d, value in zip(details, data, strict=True):
                interp.resize_tensor_input(d["index"], np.shape(value))
            interp.allocate_tensors()
        for d, value in zip(details, data, strict=True):
            value = np.asarray(value)
            if value.dtype == np.float32 and d["dtype"] != np.float32:
                scale, zero = d["quantization"]
                info = np.iinfo(d["dtype"])
                value = np.clip(np.round(value / scale) + zero, info.min, info.max)
            interp.set_tensor(d["index"], np.asarray(value, d["dtype"]))

    def _operand(self, q_index: int, f_index: int):
        if q_index == -1:
            return None
        if q_index in self._quant._consts:
            return self._float.get_tensor(f_index)
        if q_index in self._quantized_from:
            # TF's float copy reads a quantized model input's float value itself.
            return self._quant.get_tensor(self._quantized_from[q_index])
        value = self._quant.get_tensor(q_index)
        if value.dtype.kind in "iu" and self._quant._quant[q_index] is not None:
            return kernels.dequantize(value, self._quant._tensors[q_index]["quantization"])
        return value

    def _layer_diff(self, q_op, f_op):
        if f_op is None:  # a NumericVerify op: (quantized, float) in, differences out
            (q_index, f_index), out = q_op[1], q_op[2][0]
            diffs = self._quant.get_tensor(out)
            return diffs, self._quant.get_tensor(f_index), self._quant.get_tensor(q_index)
        name, q_ins, q_outs, _ = q_op
        _, f_ins, f_outs, f_opts = f_op
        args = [self._operand(q, f) for q, f in zip(q_ins, f_ins, strict=True)]
        specs = [(self._quant._shapes[o], np.dtype(np.float32)) for o in q_outs]
        expected = np.asarray(kernels.KERNELS[name](args, f_opts, specs)[0], np.float32)
        quantized = self._quant.get_tensor(q_outs[0])
        quant = self._quant._tensors[q_outs[0]]["quantization"]
        got = kernels.dequantize(quantized, quant)
        if name in quantize.SAME_AS_INPUT:
            # Operators that keep their input's parameters (pools, reshapes, slices):
            # TF's debug model gives them no float twin, and the errors it reports for
            # them are float noise around 0; the quantized result is its own reference.
            expected = got
        return got - np.asarray(expected, np.float32), np.asarray(expected, np.float32), quantized

    def run(self) -> None:
        """Computes `layer_statistics` (and `model_statistics` with model metrics)."""
        self.layer_statistics = self._collect_layer_statistics()
        if self._debug_options.model_debug_metrics:
            self.model_statistics = self._collect_model_statistics()

    def _collect_layer_statistics(self) -> dict:
        stats = collections.defaultdict(lambda: collections.defaultdict(list))
        direct = self._debug_options.layer_direct_compare_metrics
        first = True
        for data in self._data_gen():
            self._set_inputs(self._quant, data, first)
            if first and self._float is not None:
                self._float.allocate_tensors()
            first = False
            self._quant.invoke()
            for q_op, f_op, key in self._layers:
                diffs, expected, quantized = self._layer_diff(q_op, f_op)
                for metric, fn in self._layer_debug_metrics.items():
                    stats[key][metric].append(fn(diffs))
                if direct is not None:
                    q_index = q_op[2][0] if f_op is not None else q_op[1][0]
                    q = quant_kernels.quant_of(self._quant._tensors[q_index])
                    for metric, fn in direct.items():
                        stats[key][metric].append(fn(expected, quantized, q.scale[0], q.z))
        for metrics in stats.values():
            for metric in metrics:
                metrics[metric] = np.nanmean(metrics[metric])
        return stats

    def _collect_model_statistics(self) -> dict:
        stats = collections.defaultdict(list)
        first = True
        for data in self._data_gen():
            self._set_inputs(self._quant, data, first)
            self._set_inputs(self._float, data, first)
            first = False
            self._quant.invoke()
            self._float.invoke()
            quant_out = [
                self._quant.get_tensor(d["index"]) for d in self._quant.get_output_details()
            ]
            float_out = [
                self._float.get_tensor(d["index"]) for d in self._float.get_output_details()
            ]
            for metric, fn in self._debug_options.model_debug_metrics.items():
                stats[metric].append(fn(float_out, quant_out))
        return {metric: np.mean(values) for metric, values in stats.items()}

    def layer_statistics_dump(self, file) -> None:
        """Writes `layer_statistics` to `file` as CSV, TF's columns."""
        fields = ["op_name", "tensor_idx", *self._layer_debug_metrics]
        direct = self._debug_options.layer_direct_compare_metrics
        if direct is not None:
            fields += list(direct)
        fields += ["scale", "zero_point", "tensor_name"]
        writer = csv.DictWriter(file, fields)
        writer.writeheader()
        if not self.layer_statistics:
            return
        by_key = {key: (q_op, f_op) for q_op, f_op, key in self._layers}
        producer = {o: op[0] for op in self._quant._ops for o in op[2]}
        for key, metrics in self.layer_statistics.items():
            q_op, f_op = by_key[key]
            index = q_op[2][0] if f_op is not None else q_op[1][0]
            q = quant_kernels.quant_of(self._quant._tensors[index])
            row = dict(metrics)
            row["op_name"] = producer[index]
            row["tensor_idx"] = index
            row["scale"] = q.scale[0]
            row["zero_point"] = np.int32(q.z)
            if f_op is not None:
                row["tensor_name"] = self._float._tensors[f_op[2][0]].get("name") or ""
            else:
                # TF's reading of "NumericVerify/<name>:<index>": <name> less one digit.
                name = key.rsplit(":", 1)[0][len("NumericVerify/") :]
                row["tensor_name"] = name[:-1] if name[-1:].isdigit() else name
            writer.writerow(row)

    def get_nondebug_quantized_model(self) -> bytes:
        """The quantized model's bytes."""
        return self.quant_model
