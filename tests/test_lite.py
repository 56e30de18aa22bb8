"""tf.lite: the converter emits the TFLite operators TF 2.21's converter emits, and the
interpreter runs TF's .tflite files to TF's numbers.

Recorded from TF 2.21 by tests/fixtures/lite/record_lite_tf.py: tf_ops.json (the
operators, fused activations and output names TF's converter writes for each graph of
tests/fixtures/lite_cases.py), the four tf_*.tflite files (one float16-quantized), and
the outputs TF's interpreter gives for them (the literals below). Error messages are
TF 2.21's.
"""

from __future__ import annotations

import json
import pathlib
import struct
import sys

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph as ops
from asyncflow.lite import schema

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
from lite_cases import CASES, constant_maker, sample_input  # noqa: E402

TF_OPS = json.loads((FIXTURES / "lite" / "tf_ops.json").read_text())


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _build(case):
    build, shapes, *dtype = CASES[case]
    dt = tf.as_dtype(dtype[0] if dtype else "float32")
    xs = [tf.placeholder(dt, s, name=f"x{i}") for i, s in enumerate(shapes)]
    return xs, build(tf, constant_maker(tf), *xs)


def _summary(content: bytes) -> dict:
    model = schema.read_model(content)
    sg = model["subgraphs"][0]
    names = []
    for op in sg["operators"]:
        code = model["operator_codes"][op["opcode_index"]]["builtin_code"]
        act = (op["builtin_options"] or {}).get("fused_activation_function", 0)
        names.append(schema.BUILTIN_NAMES[code] + (f"+{act}" if act else ""))
    return {"ops": sorted(names), "outputs": [sg["tensors"][i]["name"] for i in sg["outputs"]]}


def _run(interp: tf.lite.Interpreter) -> list[np.ndarray]:
    interp.allocate_tensors()
    for d in interp.get_input_details():
        interp.set_tensor(d["index"], sample_input(d["shape"], d["index"], d["dtype"]))
    interp.invoke()
    return [interp.get_tensor(d["index"]) for d in interp.get_output_details()]


@pytest.mark.parametrize("case", sorted(CASES))
def test_converter_emits_tfs_operators_and_runs_like_the_graph(case):
    xs, ys = _build(case)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        content = tf.lite.TFLiteConverter.from_session(sess, xs, ys).convert()
        assert _summary(content) == TF_OPS[case]
        interp = tf.lite.Interpreter(model_content=content)
        got = _run(interp)
        feeds = {
            x: sample_input(d["shape"], d["index"], d["dtype"])
            for x, d in zip(xs, interp.get_input_details(), strict=True)
        }
        want = sess.run(ys, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


# TF 2.21's interpreter's outputs for the fixtures on lite_cases.sample_input.
TF_OUTPUTS = {
    "tf_dense.tflite": [[[1.936773, 4.792542]]],
    "tf_cnn.tflite": [
        [
            [0.0, 0.0, 0.0, 0.0, 0.0],
            [0.73015, 0.49948, 0.73015, 0.49948, 0.0],
            [0.731059, 0.271293, 0.731059, 0.271293, 0.0],
            [0.728709, 0.268941, 0.728709, 0.268941, 0.0],
            [0.721004, 0.730498, 0.721004, 0.730498, 0.0],
        ]
    ],
    "tf_cnn_f16.tflite": [
        [
            [0.0, 0.0, 0.0, 0.0, 0.0],
            [0.73016, 0.499482, 0.73016, 0.499482, 0.0],
            [0.731059, 0.271289, 0.731059, 0.271289, 0.0],
            [0.728702, 0.268941, 0.728702, 0.268941, 0.0],
            [0.721034, 0.730503, 0.721034, 0.730503, 0.0],
        ]
    ],
    "tf_misc.tflite": [
        [[1.764052, -1.583172, 1.48982], [3.615682, -0.58807, -0.618236]],
        [1.472247, 0.733572],
        [1.98333, 1.596974],
        [[0.0, 1.98333, -0.102216], [-0.370326, 0.988227, 1.596974]],
        [[0.5, 3.633449, 0.299923], [0.078491, 1.343233, 2.469034]],
        [[0.5, 1.98333, 0.5], [0.5, 0.988227, 1.596974]],
        [[0.0, 1.867558, -0.977278], [-1.851629, 0.988227, -0.977278]],
        [[0.0, 0.664804, -0.338223], [-0.649323, 0.497039, 0.614936]],
        [[-2.182308, -0.198978, -2.69339], [-3.903381, -1.063524, -0.454777]],
        [[0.0, 3.933596, 0.261205], [3.428532, 0.976592, 2.550327]],
        [[0.0, 1.408307, 0.7149], [1.360746, 0.994096, 1.263714]],
    ],
}


@pytest.mark.parametrize("fixture", sorted(TF_OUTPUTS))
def test_interpreter_runs_tfs_files_to_tfs_outputs(fixture):
    interp = tf.lite.Interpreter(model_path=str(FIXTURES / "lite" / fixture))
    got = _run(interp)
    assert len(got) == len(TF_OUTPUTS[fixture])
    for g, w in zip(got, TF_OUTPUTS[fixture], strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6)


def test_details_and_resize_follow_tf():
    interp = tf.lite.Interpreter(model_path=str(FIXTURES / "lite" / "tf_dense.tflite"))
    (inp,) = interp.get_input_details()
    (out,) = interp.get_output_details()
    assert sorted(inp) == sorted(
        [
            "name",
            "index",
            "shape",
            "shape_signature",
            "dtype",
            "quantization",
            "quantization_parameters",
            "sparsity_parameters",
        ]
    )
    assert (inp["name"], inp["dtype"], inp["quantization"]) == ("x0", np.float32, (0.0, 0))
    assert inp["shape"].tolist() == [1, 3] and inp["shape"].dtype == np.int32
    assert inp["shape_signature"].tolist() == [-1, 3]
    assert (out["name"], out["shape"].tolist(), out["shape_signature"].tolist()) == (
        "Relu",
        [1, 2],
        [-1, 2],
    )
    q = inp["quantization_parameters"]
    assert q["scales"].size == 0 and q["zero_points"].dtype == np.int32
    assert (q["quantized_dimension"], q["block_size"], inp["sparsity_parameters"]) == (0, 0, {})
    interp.resize_tensor_input(inp["index"], [3, 3])
    interp.allocate_tensors()
    assert interp.get_output_details()[0]["shape"].tolist() == [3, 2]
    x = sample_input([3, 3])
    interp.set_tensor(inp["index"], x)
    interp.invoke()
    got = interp.get_tensor(out["index"])
    xs, ys = _build("batch")
    with tf.Session() as sess:
        np.testing.assert_allclose(got, sess.run(ys[0], {xs[0]: x}), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="only allows mutating unknown dimensions"):
        interp.resize_tensor_input(inp["index"], [3, 4], strict=True)


def test_our_batch_model_keeps_the_shape_signature():
    xs, ys = _build("batch")
    with tf.Session() as sess:
        content = tf.lite.TFLiteConverter.from_session(sess, xs, ys).convert()
    interp = tf.lite.Interpreter(model_content=content)
    d = interp.get_input_details()[0]
    assert (d["shape"].tolist(), d["shape_signature"].tolist()) == ([1, 3], [-1, 3])
    assert interp.get_output_details()[0]["shape_signature"].tolist() == [-1, 2]


def test_interpreter_errors_are_tfs():
    path = str(FIXTURES / "lite" / "tf_dense.tflite")
    with pytest.raises(ValueError, match="`model_path` or `model_content` must be specified."):
        tf.lite.Interpreter()
    with pytest.raises(ValueError, match="Can't both provide `model_path` and `model_content`"):
        tf.lite.Interpreter(model_path=path, model_content=b"x")
    with pytest.raises(ValueError, match="Could not open"):
        tf.lite.Interpreter(model_path=path + ".missing")
    interp = tf.lite.Interpreter(model_path=path)
    with pytest.raises(ValueError, match=r"Tensor data is null. Run allocate_tensors\(\) first"):
        interp.get_tensor(0)
    with pytest.raises(RuntimeError, match="Invoke called on model that is not ready."):
        interp.invoke()
    with pytest.raises(ValueError, match="Tensor is unallocated"):
        interp.set_tensor(0, np.zeros((1, 3), np.float32))
    interp.allocate_tensors()
    n = len(interp.get_tensor_details())
    with pytest.raises(ValueError, match=f"Invalid tensor index 99 exceeds max tensor index {n}"):
        interp.get_tensor(99)
    with pytest.raises(
        ValueError,
        match="Cannot set tensor: Got value of type FLOAT64 but expected type FLOAT32 for "
        "input 0, name: x0 ",
    ):
        interp.set_tensor(0, np.zeros((1, 3)))
    with pytest.raises(ValueError, match="Got 4 but expected 3 for dimension 1 of input 0."):
        interp.set_tensor(0, np.zeros((1, 4), np.float32))
    with pytest.raises(ValueError, match="Got 1 but expected 2 for input 0."):
        interp.set_tensor(0, np.zeros((3,), np.float32))
    assert interp.get_signature_list() == {}
    with pytest.raises(ValueError, match="model has 0 Signatures"):
        interp.get_signature_runner()


def _tensor_table_offsets(content: bytes):
    """Byte positions of every Tensor table's `shape` vector length in `content`."""
    model = schema._Reader(content)
    root = model.deref(0)
    subgraphs, _ = model.vector(model.field_pos(root, 2), 4)
    sg = model.deref(subgraphs)
    tensors, count = model.vector(model.field_pos(sg, 0), 4)
    for i in range(count):
        t = model.deref(tensors + 4 * i)
        shape_field = model.field_pos(t, 0)
        yield model.deref(shape_field)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[:40],  # truncated
        lambda b: b[:4] + b"XXXX" + b[8:],  # wrong identifier
        lambda b: struct.pack("<I", 1 << 30) + b[4:],  # root offset past the end
    ],
)
def test_a_corrupt_file_is_a_value_error(mutate):
    content = (FIXTURES / "lite" / "tf_dense.tflite").read_bytes()
    with pytest.raises(ValueError):
        tf.lite.Interpreter(model_content=mutate(content))


def test_sizes_read_from_the_file_are_bounded_before_allocating():
    content = bytearray((FIXTURES / "lite" / "tf_dense.tflite").read_bytes())
    first = next(_tensor_table_offsets(bytes(content)))
    struct.pack_into("<I", content, first, 0x7FFFFFFF)  # a shape vector claiming 2**31 dims
    with pytest.raises(ValueError, match="not a valid Flatbuffer"):
        tf.lite.Interpreter(model_content=bytes(content))
    content = bytearray((FIXTURES / "lite" / "tf_dense.tflite").read_bytes())
    first = next(_tensor_table_offsets(bytes(content)))
    struct.pack_into("<i", content, first + 4, 1 << 30)  # a [2**30, 3] tensor: 12 GiB
    with pytest.raises(ValueError, match="not a valid Flatbuffer"):
        tf.lite.Interpreter(model_content=bytes(content))


def test_random_corruption_raises_only_value_or_runtime_errors():
    base = (FIXTURES / "lite" / "tf_misc.tflite").read_bytes()
    rng = np.random.RandomState(7)
    for _ in range(80):
        content = bytearray(base)
        for i in rng.randint(len(content), size=rng.randint(1, 4)):
            content[i] = rng.randint(256)
        try:
            _run(tf.lite.Interpreter(model_content=bytes(content)))
        except (ValueError, RuntimeError):
            pass


def test_an_operator_without_a_kernel_is_named():
    model = schema.read_model((FIXTURES / "lite" / "tf_dense.tflite").read_bytes())
    model["operator_codes"][0].update(builtin_code=16, deprecated_builtin_code=16)  # LSTM
    with pytest.raises(ValueError, match="Didn't find op for builtin opcode '16' version '1'"):
        tf.lite.Interpreter(model_content=schema.write_model(model))


def test_schema_round_trip_keeps_tfs_model():
    content = (FIXTURES / "lite" / "tf_cnn.tflite").read_bytes()
    model = schema.read_model(content)
    again = schema.read_model(schema.write_model(model))
    assert _summary(schema.write_model(model)) == _summary(content)
    assert [t["name"] for t in again["subgraphs"][0]["tensors"]] == [
        t["name"] for t in model["subgraphs"][0]["tensors"]
    ]
    got = _run(tf.lite.Interpreter(model_content=schema.write_model(model)))
    np.testing.assert_allclose(got[0], TF_OUTPUTS["tf_cnn.tflite"][0], rtol=1e-5, atol=2e-6)


def test_signature_runner_on_a_model_carrying_signatures():
    content = (FIXTURES / "lite" / "tf_dense.tflite").read_bytes()
    model = schema.read_model(content)
    sg = model["subgraphs"][0]
    model["signature_defs"] = [
        {
            "signature_key": "serving_default",
            "inputs": [{"name": "features", "tensor_index": int(sg["inputs"][0])}],
            "outputs": [{"name": "scores", "tensor_index": int(sg["outputs"][0])}],
            "subgraph_index": 0,
        }
    ]
    interp = tf.lite.Interpreter(model_content=schema.write_model(model))
    assert interp.get_signature_list() == {
        "serving_default": {"inputs": ["features"], "outputs": ["scores"]}
    }
    runner = interp.get_signature_runner()
    out = runner(features=sample_input([1, 3]))
    np.testing.assert_allclose(out["scores"], TF_OUTPUTS["tf_dense.tflite"][0], rtol=1e-5)
    out = runner(features=np.stack([sample_input([3])] * 2))  # resizes the batch
    assert out["scores"].shape == (2, 2)
    with pytest.raises(ValueError, match='Invalid signature_key provided: "nope".'):
        interp.get_signature_runner("nope")


def test_unsupported_op_is_a_converter_error_naming_it():
    x = tf.placeholder(tf.float32, [2, 2], name="x")
    y = tf.matrix_determinant(tf.nn.relu(x), name="d")
    with tf.Session() as sess:
        conv = tf.lite.TFLiteConverter.from_session(sess, [x], [y])
        with pytest.raises(tf.lite.ConverterError, match="'tf.MatrixDeterminant' op is neither"):
            conv.convert()


def test_quantization_options_are_a_clear_error():
    x = tf.placeholder(tf.float32, [2, 2], name="x")
    with tf.Session() as sess:
        conv = tf.lite.TFLiteConverter.from_session(sess, [x], [tf.nn.relu(x)])
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.int16]
        with pytest.raises(ValueError, match="supported_types"):
            conv.convert()
    assert tf.lite.OpsSet.TFLITE_BUILTINS.value == "TFLITE_BUILTINS"
    assert tf.lite.TargetSpec().supported_ops == {tf.lite.OpsSet.TFLITE_BUILTINS}
    assert tf.compat.v1.lite.constants.FLOAT == tf.float32


def _small_model(tmp_path):
    x = tf.placeholder(tf.float32, [None, 3], name="inp")
    w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2) / 4, name="w")
    y = tf.nn.tanh(tf.matmul(x, w) + 0.5, name="out")
    return x, w, y


def test_from_frozen_graph_and_from_saved_model(tmp_path):
    x, _w, y = _small_model(tmp_path)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        frozen = tf.graph_util.convert_variables_to_constants(
            sess, sess.graph.as_graph_def(), ["out"]
        )
        tf.train.write_graph(frozen, str(tmp_path), "frozen.pb", as_text=False)
        tf.saved_model.simple_save(sess, str(tmp_path / "sm"), {"inp": x}, {"out": y})
        want = sess.run(y, {x: np.ones((2, 3), np.float32)})
    conv = tf.lite.TFLiteConverter.from_frozen_graph(
        str(tmp_path / "frozen.pb"), ["inp"], ["out"], input_shapes={"inp": [2, 3]}
    )
    # TF 2.21: one FULLY_CONNECTED with the +0.5 as its bias, then TANH.
    content = conv.convert()
    assert _summary(content) == {"ops": ["FULLY_CONNECTED", "TANH"], "outputs": ["out"]}
    interp = tf.lite.Interpreter(model_content=content)
    interp.allocate_tensors()
    assert interp.get_input_details()[0]["shape"].tolist() == [2, 3]
    interp.set_tensor(interp.get_input_details()[0]["index"], np.ones((2, 3), np.float32))
    interp.invoke()
    np.testing.assert_allclose(
        interp.get_tensor(interp.get_output_details()[0]["index"]), want, rtol=1e-6
    )
    content = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm")).convert()
    interp = tf.lite.Interpreter(model_content=content)
    d = interp.get_input_details()[0]
    assert (d["name"], d["shape"].tolist(), d["shape_signature"].tolist()) == (
        "inp",
        [1, 3],
        [-1, 3],
    )
    with pytest.raises(OSError, match="does not exist"):
        tf.lite.TFLiteConverter.from_frozen_graph(str(tmp_path / "none.pb"), ["inp"], ["out"])


def test_constructor_takes_tfs_input_arrays_with_shape(tmp_path):
    x, _w, y = _small_model(tmp_path)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        frozen = tf.graph_util.convert_variables_to_constants(
            sess, sess.graph.as_graph_def(), ["out"]
        )
    conv = tf.lite.TFLiteConverter(frozen, None, None, [("inp", [5, 3])], ["out"])
    interp = tf.lite.Interpreter(model_content=conv.convert())
    d = interp.get_input_details()[0]
    assert (d["name"], d["shape"].tolist(), d["dtype"]) == ("inp", [5, 3], np.float32)


def test_from_saved_model_orders_inputs_and_outputs_by_tensor_name(tmp_path):
    # TF 2.21: inputs {"c": p, "a": q, "b": r} come as p, q, r; outputs {"o": AddN,
    # "a2": mul} as AddN, mul.
    xs = [tf.placeholder(tf.float32, [1, 2], name=n) for n in ("p", "q", "r")]
    y = tf.add_n(xs)
    with tf.Session() as sess:
        tf.saved_model.simple_save(
            sess, str(tmp_path / "sm"), dict(zip("cab", xs, strict=True)), {"o": y, "a2": y * 2.0}
        )
    interp = tf.lite.Interpreter(
        model_content=tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm")).convert()
    )
    assert [d["name"] for d in interp.get_input_details()] == ["p", "q", "r"]
    assert [d["name"] for d in interp.get_output_details()] == ["AddN", "mul"]
