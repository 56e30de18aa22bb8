"""Post-training quantization of a converted float32 TFLite model, as TF 2.21's converter
does it; works on the model dict `schema.read_model` returns, in place.

- `dynamic_range`: FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D weights of at least
  1024 elements become int8, symmetric per output channel (scale = max|w| / 127,
  values rounded half away from zero into [-127, 127]); activations stay float, and
  the interpreter runs TF's hybrid kernels (FULLY_CONNECTED quantizes its input
  asymmetrically).
- `full_integer`: every float activation becomes int8 with the asymmetric parameters of
  its calibrated [min, max] (widened to hold 0; TF's nudged zero point), except the
  fixed output ranges TFLite's kernels want (SOFTMAX/LOGISTIC 1/256, TANH 1/128) and
  the ops that keep their input's parameters (pools, reshapes, PAD, TRANSPOSE, slices,
  SPLIT, GATHER). A CONCATENATION's, MAXIMUM's or MINIMUM's inputs take its output's
  parameters (back through parameter-keeping ops); one whose producer has a fixed range
  is requantized by a QUANTIZE op all its consumers then read. Weights are int8 per
  channel as above; biases int32 with scale input scale * weight scale. An operator
  with no int8 kernel stays float between a DEQUANTIZE and a QUANTIZE, as TF falls
  back. Like TF, an ADD's first input that TFLite overwrites in place during
  calibration is given the union of its range and the sum's.

- `full_integer(..., activations=np.int16)` (16x8: TF's
  EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8): activations int16,
  symmetric (scale max(|min|, |max|) / 32767, zero point 0; SOFTMAX 1/32768), weights
  int8 per channel as above, biases int64; FULLY_CONNECTED and CONV_2D say so in
  `quantized_bias_type`, ADD in `pot_scale_int16` (false). Only the operators with
  16x8 kernels here are accepted (`INT16_OPS`); the float edges are named
  `<name>_int16` inside, as TF names them.

- `float16`: every float32 constant an operator reads is stored as float16 and widened
  back by a DEQUANTIZE (version 3) at the start, whose float32 output all readers use.

Operator versions are TF's for the kernels the quantized operators need.
"""

from __future__ import annotations

import numpy as np

from asyncflow.lite import schema

MIN_WEIGHT_ELEMENTS = 1024
_WEIGHT_AXIS = {"FULLY_CONNECTED": 0, "CONV_2D": 0, "DEPTHWISE_CONV_2D": 3}
_FIXED_OUTPUT = {
    "SOFTMAX": (1.0 / 256, -128),
    "LOGISTIC": (1.0 / 256, -128),
    "TANH": (1.0 / 128, 0),
}
SAME_AS_INPUT = {
    "MAX_POOL_2D",
    "AVERAGE_POOL_2D",
    "RESHAPE",
    "SQUEEZE",
    "PAD",
    "TRANSPOSE",
    "STRIDED_SLICE",
    "SLICE",
    "SPLIT",
    "GATHER",
}
_ALIGN_INPUTS = {"CONCATENATION", "MAXIMUM", "MINIMUM"}
# TF 2.21's operator versions for int8 kernels (recorded from its converter).
_INT8_VERSIONS = {
    "CONV_2D": 3,
    "DEPTHWISE_CONV_2D": 3,
    "FULLY_CONNECTED": 4,
    "ADD": 2,
    "SUB": 2,
    "MUL": 2,
    "RELU": 2,
    "RELU6": 2,
    "PAD": 2,
    "TRANSPOSE": 2,
    "STRIDED_SLICE": 2,
    "SLICE": 2,
    "SPLIT": 2,
    "GATHER": 2,
    "MAXIMUM": 2,
    "MINIMUM": 2,
    "MAX_POOL_2D": 2,
    "AVERAGE_POOL_2D": 2,
    "SOFTMAX": 2,
    "LOGISTIC": 2,
    "TANH": 2,
    "CONCATENATION": 2,
    "MEAN": 2,
    "RESHAPE": 1,
    "QUANTIZE": 1,
    "DEQUANTIZE": 2,
    "EXP": 2,
}
# Operators this package quantizes (and runs) 16x8.
INT16_OPS = {
    "CONV_2D",
    "DEPTHWISE_CONV_2D",
    "FULLY_CONNECTED",
    "ADD",
    "RELU",
    "RELU6",
    "MAX_POOL_2D",
    "AVERAGE_POOL_2D",
    "SOFTMAX",
    "RESHAPE",
    "SQUEEZE",
    "QUANTIZE",
    "DEQUANTIZE",
    "TRANSPOSE",
    "STRIDED_SLICE",
    "SLICE",
    "SPLIT",
    "GATHER",
    "PAD",
    "MAXIMUM",
    "MINIMUM",
    "SUB",
    "MUL",
    "MEAN",
    "LOGISTIC",
    "TANH",
    "CONCATENATION",
}
_INT16_FIXED_OUTPUT = {
    "SOFTMAX": (1.0 / 32768, 0),
    "LOGISTIC": (1.0 / 32768, 0),
    "TANH": (1.0 / 32768, 0),
}
# Hybrid kernels: per-channel weights, FULLY_CONNECTED with asymmetric inputs.
_HYBRID_VERSIONS = {"FULLY_CONNECTED": 12, "CONV_2D": 5, "DEPTHWISE_CONV_2D": 6}


class QuantizationError(ValueError):
    """The model holds an operator TF's int8 quantization cannot express."""


def _round(x):
    return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))


def _op_names(model) -> list[str]:
    codes = model["operator_codes"]
    return [
        schema.BUILTIN_NAMES[codes[op["opcode_index"]]["builtin_code"]]
        for op in model["subgraphs"][0]["operators"]
    ]


def _const(model, index: int) -> np.ndarray | None:
    t = model["subgraphs"][0]["tensors"][index]
    data = model["buffers"][t["buffer"]].get("data")
    if data is None or not len(data):
        return None
    dtype = np.dtype(schema.TENSOR_NUMPY[t["type"]]).newbyteorder("<")
    return np.frombuffer(np.asarray(data).tobytes(), dtype).reshape([int(d) for d in t["shape"]])


def _set_const(model, index: int, value: np.ndarray, quant: dict) -> None:
    t = model["subgraphs"][0]["tensors"][index]
    v = np.ascontiguousarray(value)
    raw = v.astype(v.dtype.newbyteorder("<")).tobytes()
    model["buffers"][t["buffer"]]["data"] = np.frombuffer(raw, np.uint8)
    t["type"] = schema.NUMPY_TENSOR[v.dtype]
    t["quantization"] = quant


def _quant(scale, zero, axis: int = 0) -> dict:
    return {
        "scale": np.asarray(np.atleast_1d(scale), np.float32),
        "zero_point": np.asarray(np.atleast_1d(zero), np.int64),
        "quantized_dimension": axis,
    }


def symmetric_per_channel(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(int8 values, float32 scales) of float weights `w`, one scale per index of `axis`."""
    others = tuple(a for a in range(w.ndim) if a != axis)
    scale = (np.abs(w).max(axis=others) / np.float32(127)).astype(np.float32)
    # An all-zero channel keeps scale 1 (it quantizes to zeros either way).
    scale = np.where(scale > 0, scale, np.float32(1)).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(_round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def _set_versions(model, versions: list[int]) -> None:
    sg = model["subgraphs"][0]
    for op, version in zip(sg["operators"], versions, strict=True):
        code = model["operator_codes"][op["opcode_index"]]
        code["version"] = max(code.get("version") or 1, version)


def dynamic_range(model, per_tensor_fully_connected: bool = False) -> None:
    """Quantizes the large FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D weights of
    `model` to int8. `per_tensor_fully_connected`: one scale per FULLY_CONNECTED weight
    (version 9), as TF's legacy `post_training_quantize` flag (toco_convert) does."""
    sg = model["subgraphs"][0]
    versions = []
    done: set[int] = set()
    for op, name in zip(sg["operators"], _op_names(model), strict=True):
        versions.append(1)
        if name not in _HYBRID_VERSIONS or len(op["inputs"]) < 2:
            continue
        index = int(op["inputs"][1])
        w = _const(model, index)
        tensor = sg["tensors"][index]
        if w is None or w.dtype != np.float32 or w.size < MIN_WEIGHT_ELEMENTS:
            continue
        legacy = per_tensor_fully_connected and name == "FULLY_CONNECTED"
        if index not in done:
            axis = _WEIGHT_AXIS[name]
            if legacy:
                q, scale = symmetric_per_channel(w.reshape(1, -1), 0)
                q = q.reshape(w.shape)
            else:
                q, scale = symmetric_per_channel(w, axis)
            _set_const(model, index, q, _quant(scale, np.zeros(len(scale)), 0 if legacy else axis))
            done.add(index)
        elif tensor["type"] != schema.INT8:
            continue
        if name == "FULLY_CONNECTED":
            op["builtin_options"]["asymmetric_quantize_inputs"] = True
        versions[-1] = 9 if legacy else _HYBRID_VERSIONS[name]
    _set_versions(model, versions)


def float16(model) -> None:
    """Stores `model`'s float32 constants as float16, each behind a DEQUANTIZE."""
    sg = model["subgraphs"][0]
    tensors = sg["tensors"]
    order: list[int] = []
    for op in sg["operators"]:
        for v in op["inputs"]:
            i = int(v)
            if i >= 0 and i not in order and tensors[i]["type"] == schema.FLOAT32:
                if _const(model, i) is not None:
                    order.append(i)
    widened = {}
    for i in order:
        value = _const(model, i).astype(np.float16)
        wide = _copy_tensor(model, i, tensors[i]["name"] + "1")
        _set_const(model, i, value, None)
        tensors[i].pop("quantization", None)
        widened[i] = wide
    for op in sg["operators"]:
        op["inputs"] = [widened.get(int(v), int(v)) for v in op["inputs"]]
    code = _opcode(model, "DEQUANTIZE")
    for i in order:  # TF lists the last-read constant's DEQUANTIZE first
        sg["operators"].insert(0, {"opcode_index": code, "inputs": [i], "outputs": [widened[i]]})
    _set_versions(model, [3 if n == "DEQUANTIZE" else 1 for n in _op_names(model)])


def activation_params(lo: float, hi: float) -> tuple[np.float32, int]:
    """int8 (scale, zero point) of a calibrated range, as TF's quantizer nudges it."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if abs(hi - lo) < np.finfo(np.float64).eps:
        return np.float32(1.0), -128
    scale = (hi - lo) / 255.0
    from_min, from_max = -128.0 - lo / scale, 127.0 - hi / scale
    err_min, err_max = 128.0 + abs(lo / scale), 127.0 + abs(hi / scale)
    zero = from_min if err_min < err_max else from_max
    zero = -128 if zero < -128 else 127 if zero > 127 else int(_round(zero))
    return np.float32(scale), zero


def int16_params(lo: float, hi: float) -> tuple[np.float32, int]:
    """int16 (scale, zero point) of a calibrated range: symmetric, zero point 0."""
    bound = max(abs(float(lo)), abs(float(hi)))
    return (np.float32(bound / 32767.0) if bound > 0 else np.float32(1.0)), 0


def full_integer(
    model, stats: dict[int, tuple[float, float]], input_type, output_type, activations=np.int8
) -> None:
    """Quantizes `model` to int8 (or, `activations=np.int16`, 16x8) from calibrated
    `stats` ({tensor index: (min, max)}); `input_type`/`output_type` (np.int8, np.uint8,
    np.int16 or np.float32) are the model's inputs' and outputs' types.

    Raises:
      QuantizationError: a tensor never calibrated, a float-op output as an integer
        model output, or (16x8) an operator with no int16 kernel here.
    """
    if np.dtype(activations) == np.int16:
        _full_int16(model, stats, input_type, output_type)
        return
    sg = model["subgraphs"][0]
    tensors = sg["tensors"]
    consts = {i for i, t in enumerate(tensors) if _const(model, i) is not None}
    stats = _with_in_place_add(model, _op_names(model), stats)
    _split_float_ops(model, stats, consts)
    ops, names = sg["operators"], _op_names(model)
    params: dict[int, tuple] = {}

    def from_stats(i):
        if i not in stats:
            raise QuantizationError(f"tensor {tensors[i]['name']} was not calibrated")
        return activation_params(*stats[i])

    for i in sg["inputs"]:
        params[int(i)] = from_stats(int(i))
    for op, name in zip(ops, names, strict=True):
        if name not in _INT8_VERSIONS or name == "DEQUANTIZE":
            continue
        for o in op["outputs"]:
            if name in _FIXED_OUTPUT:
                params[int(o)] = (np.float32(_FIXED_OUTPUT[name][0]), _FIXED_OUTPUT[name][1])
            elif name in SAME_AS_INPUT:
                params[int(o)] = params[_data_input(op, name)]
            else:
                params[int(o)] = from_stats(int(o))
    _align_inputs(model, names, params)
    ops, names = sg["operators"], _op_names(model)
    for i, (scale, zero) in params.items():
        if tensors[i]["type"] == schema.FLOAT32:
            tensors[i]["type"] = schema.INT8
            tensors[i]["quantization"] = _quant(scale, zero)
    for op, name in zip(ops, names, strict=True):
        if name in _INT8_VERSIONS:
            _quantize_const_inputs(model, op, name, params, consts)
    _set_io_type(model, input_type, output_type)
    _drop_round_trips(model)
    _set_versions(model, [_INT8_VERSIONS.get(n, 1) for n in _op_names(model)])


def _split_float_ops(model, stats, consts) -> None:
    """Operators with no int8 kernel stay float (TF's fallback): a DEQUANTIZE feeds
    them and a QUANTIZE carries their results to int8 operators."""
    sg = model["subgraphs"][0]
    names = _op_names(model)
    is_int8 = [n in _INT8_VERSIONS for n in names]
    if all(is_int8):
        return
    producer = {int(o): k for k, op in enumerate(sg["operators"]) for o in op["outputs"]}
    inserts: list[tuple[int, dict]] = []  # (after operator k, or -1 first; new operator)
    copies: dict[tuple[int, bool], int] = {}
    for op, int8 in zip(sg["operators"], is_int8, strict=True):
        for pos, v in enumerate(op["inputs"]):
            i = int(v)
            if i < 0 or i in consts or sg["tensors"][i]["type"] != schema.FLOAT32:
                continue
            k = producer.get(i, -1)
            from_int8 = is_int8[k] if k >= 0 else True  # graph inputs start int8
            if from_int8 == int8:
                continue
            key = (i, int8)
            if key not in copies:
                kind = "QUANTIZE" if int8 else "DEQUANTIZE"
                label = "tfl.quantize" if int8 else "tfl.dequantize"
                new = _copy_tensor(model, i, label)
                copies[key] = new
                if int8:
                    stats[new] = stats.get(i, (0.0, 0.0))
                code = _opcode(model, kind)
                inserts.append((k, {"opcode_index": code, "inputs": [i], "outputs": [new]}))
            op["inputs"][pos] = copies[key]
    for k, new_op in sorted(inserts, key=lambda item: -item[0]):
        sg["operators"].insert(k + 1, new_op)


def _drop_round_trips(model) -> None:
    """A DEQUANTIZE of a QUANTIZE of a float tensor reads that tensor instead."""
    sg = model["subgraphs"][0]
    names = _op_names(model)
    quantized_from = {
        int(op["outputs"][0]): int(op["inputs"][0])
        for op, n in zip(sg["operators"], names, strict=True)
        if n == "QUANTIZE" and sg["tensors"][int(op["inputs"][0])]["type"] == schema.FLOAT32
    }
    same: dict[int, int] = {}
    keep = []
    for op, n in zip(sg["operators"], names, strict=True):
        if n == "DEQUANTIZE" and int(op["inputs"][0]) in quantized_from:
            same[int(op["outputs"][0])] = quantized_from[int(op["inputs"][0])]
            continue
        keep.append(op)
    for op in keep:
        op["inputs"] = [same.get(int(v), int(v)) for v in op["inputs"]]
    read = {int(v) for op in keep for v in op["inputs"]} | {int(v) for v in sg["outputs"]}
    sg["operators"] = [
        op
        for op, n in zip(keep, [_name_of(model, op) for op in keep], strict=True)
        if n != "QUANTIZE" or int(op["outputs"][0]) in read
    ]
    _drop_unused_tensors(model)


def _drop_unused_tensors(model) -> None:
    """Tensors (and their empty buffers) no operator or model edge names any more."""
    sg = model["subgraphs"][0]
    used = {int(v) for op in sg["operators"] for v in list(op["inputs"]) + list(op["outputs"])}
    used |= {int(v) for v in list(sg["inputs"]) + list(sg["outputs"])}
    used.discard(-1)
    if len(used) == len(sg["tensors"]):
        return
    new_index = {old: k for k, old in enumerate(sorted(used))}
    dropped_buffers = {
        t["buffer"]
        for i, t in enumerate(sg["tensors"])
        if i not in used and _empty(model["buffers"][t["buffer"]])
    }
    sg["tensors"] = [t for i, t in enumerate(sg["tensors"]) if i in used]
    buffer_index = {}
    buffers = []
    for b, buf in enumerate(model["buffers"]):
        if b not in dropped_buffers or b == 0:
            buffer_index[b] = len(buffers)
            buffers.append(buf)
    model["buffers"] = buffers
    for t in sg["tensors"]:
        t["buffer"] = buffer_index[t["buffer"]]
    for meta in model.get("metadata") or []:
        meta["buffer"] = buffer_index[meta["buffer"]]
    for op in sg["operators"]:
        op["inputs"] = [new_index[int(v)] if int(v) >= 0 else -1 for v in op["inputs"]]
        op["outputs"] = [new_index[int(v)] for v in op["outputs"]]
    sg["inputs"] = [new_index[int(v)] for v in sg["inputs"]]
    sg["outputs"] = [new_index[int(v)] for v in sg["outputs"]]


def _empty(buffer: dict) -> bool:
    data = buffer.get("data")
    return data is None or not len(data)


def _name_of(model, op) -> str:
    return schema.BUILTIN_NAMES[model["operator_codes"][op["opcode_index"]]["builtin_code"]]


def _with_in_place_add(model, names, stats) -> dict:
    """TF calibrates on TFLite, whose ADD writes its output over its first input when
    nothing else reads it, so that input's logged range also covers the sum's."""
    sg = model["subgraphs"][0]
    reads: dict[int, int] = {}
    for op in sg["operators"]:
        for v in op["inputs"]:
            reads[int(v)] = reads.get(int(v), 0) + 1
    edges = {int(v) for v in list(sg["inputs"]) + list(sg["outputs"])}
    stats = dict(stats)
    for op, name in zip(sg["operators"], names, strict=True):
        if name != "ADD":
            continue
        a, out = int(op["inputs"][0]), int(op["outputs"][0])
        same = list(sg["tensors"][a]["shape"]) == list(sg["tensors"][out]["shape"])
        if a in stats and out in stats and reads.get(a) == 1 and same and a not in edges:
            stats[a] = (min(stats[a][0], stats[out][0]), max(stats[a][1], stats[out][1]))
    return stats


def _data_input(op, name: str) -> int:
    # SPLIT reads its axis first, its data second.
    return int(op["inputs"][1 if name == "SPLIT" else 0])


def _align_inputs(model, names, params) -> None:
    """CONCATENATION, MAXIMUM and MINIMUM read their inputs with their output's
    parameters: each input takes them, back through the parameter-keeping ops that made
    it; an input with a fixed range is requantized instead. Then the parameter-keeping
    ops pass their (possibly new) input parameters forward again."""
    sg = model["subgraphs"][0]

    def producers():
        return {int(o): n for n, p in enumerate(sg["operators"]) for o in p["outputs"]}

    def pin(i, want, producer):
        params[i] = want
        at = producer.get(i)
        if at is not None and names[at] in SAME_AS_INPUT:
            pin(_data_input(sg["operators"][at], names[at]), want, producer)

    k = 0
    while k < len(sg["operators"]):
        op, name = sg["operators"][k], names[k]
        k += 1
        if name not in _ALIGN_INPUTS:
            continue
        want = params[int(op["outputs"][0])]
        producer = producers()
        for i in [int(v) for v in op["inputs"]]:
            if params.get(i) == want:
                continue
            at = producer.get(i)
            if at is None or names[at] not in _FIXED_OUTPUT:
                pin(i, want, producer)
                continue
            _requantize_after(model, i, at, want, params)
            names[:] = _op_names(model)
            producer = producers()
            k += 1
    for op, name in zip(sg["operators"], names, strict=True):
        if name in SAME_AS_INPUT:
            for o in op["outputs"]:
                params[int(o)] = params[_data_input(op, name)]


def _requantize_after(model, index: int, producer: int | None, want, params) -> None:
    """A QUANTIZE right after tensor `index`'s producer, read by all its consumers."""
    sg = model["subgraphs"][0]
    old = sg["tensors"][index]
    model["buffers"].append({})
    new_t = dict(old, name=old["name"] + "1", buffer=len(model["buffers"]) - 1)
    new_t.pop("quantization", None)
    sg["tensors"].append(new_t)
    new = len(sg["tensors"]) - 1
    params[new] = want
    for op in sg["operators"]:
        op["inputs"] = [new if int(v) == index else int(v) for v in op["inputs"]]
    at = 0 if producer is None else producer + 1
    sg["operators"].insert(
        at, {"opcode_index": _opcode(model, "QUANTIZE"), "inputs": [index], "outputs": [new]}
    )


def _opcode(model, name: str) -> int:
    code = schema.BUILTIN_OPS[name]
    for k, c in enumerate(model["operator_codes"]):
        if c["builtin_code"] == code:
            return k
    model["operator_codes"].append(
        {
            "deprecated_builtin_code": min(code, schema.PLACEHOLDER_FOR_GREATER_OP_CODES),
            "version": 1,
            "builtin_code": code,
        }
    )
    return len(model["operator_codes"]) - 1


def _quantize_const_inputs(model, op, name, params, consts, int16=False) -> None:
    """The float constants `op` reads, quantized: weights int8 per channel; biases at
    input scale * weight scale (int32, or int64 for 16x8 where TF multiplies by the
    float32 reciprocal: dividing differs in the last bit); other constants as
    activations (int8 with a zero point, or symmetric int16)."""
    ins = [int(v) for v in op["inputs"]]
    tensors = model["subgraphs"][0]["tensors"]
    for pos, i in enumerate(ins):
        if i < 0 or i not in consts or tensors[i]["type"] != schema.FLOAT32:
            continue
        value = _const(model, i)
        if name in _WEIGHT_AXIS and pos == 1:
            axis = _WEIGHT_AXIS[name]
            q, scale = symmetric_per_channel(value, axis)
            _set_const(model, i, q, _quant(scale, np.zeros(len(scale)), axis))
        elif name in _WEIGHT_AXIS and pos == 2:
            continue  # biases, after the weights
        elif int16:
            scale, _ = int16_params(value.min(), value.max())
            q = np.clip(_round(value / scale), -32768, 32767).astype(np.int16)
            _set_const(model, i, q, _quant(scale, 0))
        else:
            scale, zero = activation_params(value.min(), value.max())
            q = np.clip(_round(value / scale) + zero, -128, 127).astype(np.int8)
            _set_const(model, i, q, _quant(scale, zero))
    if name in _WEIGHT_AXIS and len(ins) > 2 and ins[2] >= 0 and ins[2] in consts:
        bias = _const(model, ins[2])
        if bias.dtype == np.float32:
            w_scale = tensors[ins[1]]["quantization"]["scale"]
            scale = (np.float32(params[ins[0]][0]) * w_scale).astype(np.float32)
            if int16:
                q = _round(bias * (np.float32(1) / scale)).astype(np.int64)
            else:
                q = np.clip(_round(bias / scale), -(2**31), 2**31 - 1).astype(np.int32)
            _set_const(model, ins[2], q, _quant(scale, np.zeros(len(scale)), 0))


def _set_io_type(model, input_type, output_type) -> None:
    """Float or uint8 inputs/outputs: a QUANTIZE (DEQUANTIZE for float outputs) at each
    edge, the int8 tensor inside; uint8 keeps the scale and shifts the zero point."""
    sg = model["subgraphs"][0]
    tensors = sg["tensors"]
    for pos, i in enumerate(list(sg["inputs"])):
        if np.dtype(input_type) == np.int8:
            break
        i = int(i)
        inner = _copy_tensor(model, i, "tfl.quantize")
        for op in sg["operators"]:
            op["inputs"] = [inner if int(v) == i else int(v) for v in op["inputs"]]
        quantize = {"opcode_index": _opcode(model, "QUANTIZE"), "inputs": [i], "outputs": [inner]}
        sg["operators"].insert(pos, quantize)
        _retype_edge(tensors[i], input_type)
    for o in list(sg["outputs"]):
        o = int(o)
        if tensors[o]["type"] == schema.FLOAT32:  # made by an operator left float
            if np.dtype(output_type) != np.float32:
                raise QuantizationError(
                    f"output {tensors[o]['name']} comes from an operator with no int8 "
                    "kernel, so it cannot be an integer output"
                )
            continue
        if np.dtype(output_type) == np.int8:
            continue
        inner = _copy_tensor(model, o, tensors[o]["name"] + "1")
        for op in sg["operators"]:
            op["outputs"] = [inner if int(v) == o else int(v) for v in op["outputs"]]
            op["inputs"] = [inner if int(v) == o else int(v) for v in op["inputs"]]
        kind = "DEQUANTIZE" if np.dtype(output_type) == np.float32 else "QUANTIZE"
        sg["operators"].append(
            {"opcode_index": _opcode(model, kind), "inputs": [inner], "outputs": [o]}
        )
        _retype_edge(tensors[o], output_type)


def _copy_tensor(model, index: int, name: str) -> int:
    sg = model["subgraphs"][0]
    model["buffers"].append({})
    t = dict(sg["tensors"][index], name=name, buffer=len(model["buffers"]) - 1)
    sg["tensors"].append(t)
    return len(sg["tensors"]) - 1


def _retype_edge(tensor: dict, dtype) -> None:
    dtype = np.dtype(dtype)
    q = tensor.get("quantization")
    if dtype == np.float32:
        tensor["type"] = schema.FLOAT32
        tensor.pop("quantization", None)
    else:
        tensor["type"] = schema.UINT8
        tensor["quantization"] = _quant(q["scale"], q["zero_point"] + 128)


def _full_int16(model, stats, input_type, output_type) -> None:
    sg = model["subgraphs"][0]
    tensors = sg["tensors"]
    names = _op_names(model)
    missing = sorted({n for n in names if n not in INT16_OPS})
    if missing:
        raise QuantizationError(
            "16x8 quantization here has no int16 kernel for " + ", ".join(missing)
        )
    consts = {i for i, t in enumerate(tensors) if _const(model, i) is not None}
    stats = _with_in_place_add(model, names, stats)
    params: dict[int, tuple] = {}

    def from_stats(i):
        if i not in stats:
            raise QuantizationError(f"tensor {tensors[i]['name']} was not calibrated")
        return int16_params(*stats[i])

    for i in sg["inputs"]:
        params[int(i)] = from_stats(int(i))
    for op, name in zip(sg["operators"], names, strict=True):
        for o in op["outputs"]:
            if name in _INT16_FIXED_OUTPUT:
                params[int(o)] = (np.float32(_INT16_FIXED_OUTPUT[name][0]), 0)
            elif name in SAME_AS_INPUT:
                params[int(o)] = params[_data_input(op, name)]
            else:
                params[int(o)] = from_stats(int(o))
    _requantize_int16_inputs(model, names, params)
    names = _op_names(model)
    for i, (scale, zero) in params.items():
        if tensors[i]["type"] == schema.FLOAT32:
            tensors[i]["type"] = schema.INT16
            tensors[i]["quantization"] = _quant(scale, zero)
    for op, name in zip(sg["operators"], names, strict=True):
        _quantize_const_inputs(model, op, name, params, consts, int16=True)
        if name in ("FULLY_CONNECTED", "CONV_2D"):
            op["builtin_options"]["quantized_bias_type"] = schema.INT64
        elif name in ("ADD", "SUB"):
            op["builtin_options"]["pot_scale_int16"] = False
    _set_int16_io(model, input_type, output_type)
    versions = [_INT8_VERSIONS.get(n, 1) for n in _op_names(model)]
    for k, op in enumerate(sg["operators"]):
        if versions[k] == 1 and _name_of(model, op) == "QUANTIZE":
            # An int16 -> int16 requantization is QUANTIZE's version 2.
            if tensors[int(op["inputs"][0])]["type"] == schema.INT16:
                versions[k] = 2
    _set_versions(model, versions)


def _requantize_int16_inputs(model, names, params) -> None:
    """MAXIMUM, MINIMUM and CONCATENATION read inputs with their output's parameters:
    TF requantizes
    each other input by a QUANTIZE (`<name>_requantized`) just before the operator, the
    last input's first."""
    sg = model["subgraphs"][0]
    k = 0
    while k < len(sg["operators"]):
        op = sg["operators"][k]
        if _name_of(model, op) not in ("MAXIMUM", "MINIMUM", "CONCATENATION"):
            k += 1
            continue
        want = params[int(op["outputs"][0])]
        for pos in reversed(range(len(op["inputs"]))):
            i = int(op["inputs"][pos])
            if i < 0 or i not in params or params[i] == want:
                continue
            new = _copy_tensor(model, i, sg["tensors"][i]["name"] + "_requantized")
            params[new] = want
            op["inputs"][pos] = new
            code = _opcode(model, "QUANTIZE")
            sg["operators"].insert(k, {"opcode_index": code, "inputs": [i], "outputs": [new]})
            k += 1
        k += 1


def _set_int16_io(model, input_type, output_type) -> None:
    """Float inputs/outputs: a QUANTIZE (DEQUANTIZE) at each edge, the int16 tensor
    inside named `<name>_int16`; int16 ones stay as they are."""
    sg = model["subgraphs"][0]
    tensors = sg["tensors"]
    if np.dtype(input_type) == np.float32:
        for pos, i in enumerate(list(sg["inputs"])):
            i = int(i)
            inner = _copy_tensor(model, i, tensors[i]["name"] + "_int16")
            for op in sg["operators"]:
                op["inputs"] = [inner if int(v) == i else int(v) for v in op["inputs"]]
            code = _opcode(model, "QUANTIZE")
            sg["operators"].insert(pos, {"opcode_index": code, "inputs": [i], "outputs": [inner]})
            _retype_edge(tensors[i], np.float32)
    if np.dtype(output_type) == np.float32:
        for o in list(sg["outputs"]):
            o = int(o)
            inner = _copy_tensor(model, o, tensors[o]["name"] + "_int16")
            for op in sg["operators"]:
                op["outputs"] = [inner if int(v) == o else int(v) for v in op["outputs"]]
                op["inputs"] = [inner if int(v) == o else int(v) for v in op["inputs"]]
            code = _opcode(model, "DEQUANTIZE")
            sg["operators"].append({"opcode_index": code, "inputs": [inner], "outputs": [o]})
            _retype_edge(tensors[o], np.float32)
