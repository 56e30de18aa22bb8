"""GraphDef export/import: protobuf round trips, AttrValue encoding, import_graph_def semantics."""

from __future__ import annotations

import json

import numpy as np
import pytest
from google.protobuf import json_format, text_format

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.graph_io import (
    _group_inputs,
    attr_value,
    decode_attr,
    encode_attr,
    graph_def_to_dict,
    graph_to_graph_def,
    import_graph_def,
    node_def_text,
)
from asyncflow.ops import array_ops, control_flow_ops
from asyncflow.protos import AttrValue, GraphDef
from asyncflow.registry import ANY, ArgDef, OpDef, TypeConstraint
from asyncflow.session import Session

TS = tensor_shape.TensorShape


def _bytes_round_trip(message):
    """`message` through its binary serialization."""
    return type(message).FromString(message.SerializeToString())


def _json_round_trip(graph_def: dict) -> dict:
    return json.loads(json.dumps(graph_def))


def _dict_graph_def(graph) -> dict:
    """The graph's GraphDef in protobuf's JSON mapping (what asyncflow wrote before)."""
    return _json_round_trip(graph_def_to_dict(graph.as_graph_def()))


def _attr(text: str) -> AttrValue:
    return text_format.Parse(text, AttrValue())


def _build_sample():
    """A small graph with feeds, constants of several dtypes and control edges."""
    g = ops.Graph()
    with g.as_default():
        x = array_ops.placeholder(dtypes.float32, [None, 2], name="x")
        w = array_ops.constant([[1.5, -2.0], [3.0, 0.25]], name="w")
        with g.name_scope("block"):
            y = array_ops.identity(x, name="y")
        i = array_ops.constant(np.arange(6, dtype=np.int64).reshape(2, 3), name="i")
        s = array_ops.constant([b"ab", b"\x00\xff", b""], name="s")
        b = array_ops.constant([True, False], name="b")
        d = array_ops.placeholder_with_default(w, [2, 2], name="d")
        with g.control_dependencies([w]):
            z = array_ops.identity(i, name="z")
        with g.device("/cpu:0"):
            grp = control_flow_ops.group(y, z, name="grp")
    fetches = {"y": y, "w": w, "i": i, "s": s, "b": b, "d": d, "z": z}
    return g, fetches, grp, x


def _run(graph, fetch_names, feeds):
    with Session(graph=graph) as sess:
        fetches = {k: graph.get_tensor_by_name(v) for k, v in fetch_names.items()}
        feed = {graph.get_tensor_by_name(k): v for k, v in feeds.items()}
        return sess.run(fetches, feed)


# -- whole-graph round trip ----------------------------------------------------------------


def test_round_trip_runs_the_same():
    g, fetches, _, _ = _build_sample()
    graph_def = _bytes_round_trip(g.as_graph_def())
    g2 = ops.Graph()
    with g2.as_default():
        assert import_graph_def(graph_def) is None
    feed = {"x:0": np.array([[1.0, 2.0]], np.float32)}
    want = _run(g, {k: t.name for k, t in fetches.items()}, feed)
    got = _run(
        g2,
        {k: "import/" + t.name for k, t in fetches.items()},
        {"import/x:0": feed["x:0"]},
    )
    assert want.keys() == got.keys()
    for k in want:
        assert got[k].dtype == want[k].dtype, k
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_round_trip_preserves_structure():
    g, _, grp, _ = _build_sample()
    g2 = ops.Graph()
    with g2.as_default():
        import_graph_def(g.as_graph_def().SerializeToString(), name="")
    assert [op.name for op in g2.get_operations()] == [op.name for op in g.get_operations()]
    for op in g.get_operations():
        new = g2.get_operation_by_name(op.name)
        assert new.type == op.type
        assert [t.name for t in new.inputs] == [t.name for t in op.inputs]
        assert [c.name for c in new.control_inputs] == [c.name for c in op.control_inputs]
        assert new.device == op.device
        assert [t.dtype for t in new.outputs] == [t.dtype for t in op.outputs]
        assert [t.shape for t in new.outputs] == [t.shape for t in op.outputs]
        assert new.node_def == op.node_def
    assert g2.get_operation_by_name("grp").device == "/device:CPU:0"
    assert g.as_graph_def() == g2.as_graph_def()


def test_graph_def_layout():
    g, _, _, _ = _build_sample()
    gd = g.as_graph_def()
    assert isinstance(gd, GraphDef)
    assert gd == graph_to_graph_def(g)
    assert gd.versions.producer == 27
    assert not gd.HasField("library")
    by_name = {n.name: n for n in gd.node}
    assert {f.name for f, _ in by_name["z"].ListFields()} == {"name", "op", "input", "attr"}
    assert list(by_name["z"].input) == ["i", "^w"]
    assert list(by_name["block/y"].input) == ["x"]
    assert by_name["x"].attr["shape"] == _attr("shape { dim { size: -1 } dim { size: 2 } }")
    assert by_name["w"].attr["value"].tensor.dtype == dtypes.float32.as_datatype_enum
    assert list(by_name["s"].attr["value"].tensor.string_val) == [b"ab", b"\x00\xff", b""]
    assert by_name["grp"].device == "/device:CPU:0"


def test_add_shapes_round_trip():
    g, fetches, _, _ = _build_sample()
    gd = _bytes_round_trip(g.as_graph_def(add_shapes=True))
    by_name = {n.name: n for n in gd.node}
    assert by_name["x"].attr["_output_shapes"] == _attr(
        "list { shape { dim { size: -1 } dim { size: 2 } } }"
    )
    assert by_name["grp"].attr["_output_shapes"] == _attr("list { }")
    g2 = ops.Graph()
    with g2.as_default():
        import_graph_def(gd)
    y = g2.get_tensor_by_name("import/block/y:0")
    assert y.shape.as_list() == [None, 2]
    assert "_output_shapes" not in y.op.attrs


def test_output_shapes_refine_imported_shapes():
    g = ops.Graph()
    with g.as_default():
        x = array_ops.placeholder(dtypes.float32, name="x")
        array_ops.identity(x, name="y")
    gd = g.as_graph_def()
    gd.node[1].attr["_output_shapes"].CopyFrom(_attr("list { shape { dim { size: 4 } } }"))
    g2 = ops.Graph()
    with g2.as_default():
        (y,) = import_graph_def(gd, return_elements=["y:0"])
    assert y.shape.as_list() == [4]


# -- AttrValue encoding ----------------------------------------------------------------------

_ENUM_NAMES = {
    "float32": "DT_FLOAT",
    "float64": "DT_DOUBLE",
    "int32": "DT_INT32",
    "uint8": "DT_UINT8",
    "int16": "DT_INT16",
    "int8": "DT_INT8",
    "string": "DT_STRING",
    "complex64": "DT_COMPLEX64",
    "int64": "DT_INT64",
    "bool": "DT_BOOL",
    "bfloat16": "DT_BFLOAT16",
    "uint16": "DT_UINT16",
    "complex128": "DT_COMPLEX128",
    "float16": "DT_HALF",
    "uint32": "DT_UINT32",
    "uint64": "DT_UINT64",
}


@pytest.mark.parametrize("name, enum", sorted(_ENUM_NAMES.items()))
def test_dtype_enum_names(name, enum):
    dt = dtypes.as_dtype(name)
    assert attr_value(dt) == _attr(f"type: {enum}")
    assert encode_attr(dt) == {"type": enum}  # protobuf's JSON mapping
    assert decode_attr({"type": enum}) is dt
    assert decode_attr(_attr(f"type: {enum}")) is dt


@pytest.mark.parametrize(
    "value, encoded",
    [
        (True, "b: true"),
        (False, "b: false"),
        (3, "i: 3"),
        (-(2**40), "i: -1099511627776"),
        (1.5, "f: 1.5"),
        ("héllo", 's: "h\\303\\251llo"'),
        (TS([2, None]), "shape { dim { size: 2 } dim { size: -1 } }"),
        (TS(None), "shape { unknown_rank: true }"),
        (TS([]), "shape { }"),
        ([1, 2], "list { i: [1, 2] }"),
        ([True], "list { b: true }"),
        ([0.5, 2.0], "list { f: [0.5, 2.0] }"),
        ([dtypes.int32, dtypes.string], "list { type: [DT_INT32, DT_STRING] }"),
        (["a", "b"], 'list { s: ["a", "b"] }'),
        ([TS([1]), TS(None)], "list { shape { dim { size: 1 } } shape { unknown_rank: true } }"),
        ([], "list { }"),
    ],
)
def test_encode_uses_tf_field_names(value, encoded):
    assert attr_value(value) == _attr(encoded)  # TF's text format names TF's fields
    back = decode_attr(_bytes_round_trip(attr_value(value)))
    assert back == value
    assert type(back) is type(value)
    if isinstance(value, list):
        assert [type(v) for v in back] == [type(v) for v in value]


def test_bool_and_int_stay_distinct():
    assert decode_attr(encode_attr(True)) is True
    one = decode_attr(encode_attr(1))
    assert one == 1 and type(one) is int
    assert decode_attr(encode_attr([1, 0])) == [1, 0]
    assert [type(v) for v in decode_attr(encode_attr([True, False]))] == [bool, bool]


def test_numpy_scalars_encode_as_python_scalars():
    assert attr_value(np.int64(7)) == _attr("i: 7")
    assert attr_value(np.float32(0.5)) == _attr("f: 0.5")
    assert attr_value(np.bool_(True)) == _attr("b: true")


def test_int_float_list_becomes_float_list_and_mixed_lists_fail():
    assert attr_value([1, 2.5]) == _attr("list { f: [1.0, 2.5] }")
    with pytest.raises(TypeError):
        encode_attr([1, "a"])
    with pytest.raises(TypeError):
        encode_attr({"a": 1})


def test_string_attrs_decode_by_hint_and_name():
    raw = encode_attr(b"loc:@x")
    assert decode_attr(raw) == "loc:@x"  # no hint: valid UTF-8 reads as str
    assert decode_attr(raw, name="_class") == b"loc:@x"  # TF's internal attrs keep bytes
    assert decode_attr(raw, hint=b"") == b"loc:@x"
    assert decode_attr(raw, hint="") == "loc:@x"
    assert decode_attr(encode_attr(b"\xff\x00")) == b"\xff\x00"  # not UTF-8: bytes
    with pytest.raises(ValueError):
        decode_attr(encode_attr(b"\xff"), hint="", name="padding")
    assert decode_attr(encode_attr([b"a"]), name="_class") == [b"a"]
    assert decode_attr(encode_attr(["a"]), hint=("x",)) == ("a",)


def _np_dtypes():
    names = [n for n in _ENUM_NAMES if n not in ("string", "bfloat16")]
    if dtypes.bfloat16._np is not None:
        names.append("bfloat16")
    return names


@pytest.mark.parametrize("dtype", _np_dtypes())
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (0, 4)])
def test_tensor_attr_round_trip(dtype, shape):
    np_dt = dtypes.as_dtype(dtype).as_numpy_dtype
    size = int(np.prod(shape))
    value = (np.arange(size) % 7 - 3).reshape(shape)
    if dtype.startswith("complex"):
        value = value + 1j * value[::-1] if value.ndim else value + 0.5j
    value = np.asarray(value).astype(np_dt)
    encoded = attr_value(value).tensor
    assert encoded.dtype == dtypes.as_dtype(dtype).as_datatype_enum
    assert [d.size for d in encoded.tensor_shape.dim] == list(shape)
    if size == 1:  # (TF's make_tensor_proto: one value in its typed field)
        assert encoded.tensor_content == b""
    elif dtype in ("bool", "complex64", "complex128"):
        # TF 2.21 lists these in bool_val / scomplex_val / dcomplex_val, never as content.
        assert encoded.tensor_content == b""
    else:
        assert encoded.tensor_content == value.astype(value.dtype.newbyteorder("<")).tobytes()
    back = decode_attr(_bytes_round_trip(attr_value(value)))
    assert back.dtype == value.dtype
    assert back.shape == value.shape
    np.testing.assert_array_equal(back, value)
    assert not back.flags.writeable


# Const values as TF 2.21 writes them (GraphDef attr "value", serialized, recorded): a
# single value in its typed field with an empty tensor_shape, more as tensor_content.
_TF_CONST_VALUES = [
    (np.array(1.0, np.float32), "420a080112002a040000803f"),
    (np.array(2.5, np.float64), "420e0802120032080000000000000440"),
    (np.array(3, np.int32), "4207080312003a0103"),
    (np.array(-4, np.int64), "421008091200520afcffffffffffffffff01"),
    (np.array(200, np.uint8), "4208080412003a02c801"),
    (np.array(True), "4207080a12005a0101"),
    (np.array(1.5, np.float16), "4208081312006a02807c"),
    (np.array(1 + 2j, np.complex64), "420e080812004a080000803f00000040"),
    (np.array([1.0], np.float32), "420e08011204120208012a040000803f"),
    (np.array([[2]], np.int32), "420f0803120812020801120208013a0102"),
    (np.array([1.0, 2.0], np.float32), "4212080112041202080222080000803f00000040"),
    (np.array(-0.0, np.float32), "420a080112002a0400000080"),
]


@pytest.mark.parametrize("value, want", _TF_CONST_VALUES)
def test_const_values_serialize_as_tfs(value, want):
    assert attr_value(value).SerializeToString().hex() == want


def test_tensor_content_is_little_endian():
    encoded = attr_value(np.array([1, 256], np.int32))
    assert encoded.tensor.tensor_content == b"\x01\x00\x00\x00\x00\x01\x00\x00"
    assert encode_attr(np.array([1, 256], np.int32))["tensor"]["tensor_content"] == "AQAAAAABAAA="


@pytest.mark.parametrize("shape", [(), (3,), (2, 0)])
def test_string_tensor_round_trip(shape):
    items = [b"", "é".encode(), b"\x00\xff"]
    value = np.empty(shape, dtype=object)
    flat = value.reshape(-1)
    for k in range(flat.size):
        flat[k] = items[k % 3]
    encoded = attr_value(value)
    assert encoded.tensor.dtype == dtypes.string.as_datatype_enum
    assert len(encoded.tensor.string_val) == value.size
    back = decode_attr(_bytes_round_trip(encoded))
    assert back.dtype == object
    assert back.shape == value.shape
    assert back.tolist() == value.tolist()


def test_list_of_tensors_round_trip():
    value = [np.array([1.0], np.float32), np.array([[2]], np.int8)]
    back = decode_attr(_bytes_round_trip(attr_value(value)))
    assert [b.dtype for b in back] == [np.float32, np.int8]
    for b, v in zip(back, value, strict=True):
        np.testing.assert_array_equal(b, v)


def test_tf_style_typed_value_fields_decode():
    # TF writes small tensors with *_val fields; the last value fills the rest.
    t = {"dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size": 3}]}, "float_val": [2.5]}
    np.testing.assert_array_equal(decode_attr({"tensor": t}), [2.5, 2.5, 2.5])
    t = {"dtype": "DT_INT64", "tensor_shape": {}, "int64_val": ["9007199254740993"]}
    assert decode_attr({"tensor": t}) == 9007199254740993
    t = {"dtype": "DT_INT32", "tensor_shape": {"dim": [{"size": "2"}]}}
    np.testing.assert_array_equal(decode_attr({"tensor": t}), [0, 0])
    assert decode_attr({"i": "12"}) == 12
    assert np.isnan(decode_attr({"f": "NaN"}))


def test_unknown_attr_value_raises():
    with pytest.raises(ValueError):
        decode_attr({"func": {"name": "f"}})
    with pytest.raises(ValueError):
        decode_attr(AttrValue())  # no value at all


def test_fill_from_a_file_is_bounded():
    # A tensor giving one value for a huge shape would make the reader allocate it all.
    t = _attr(
        "tensor { dtype: DT_FLOAT tensor_shape { dim { size: 4000000000000 } } float_val: 1 }"
    )
    with pytest.raises(ValueError, match="more than"):
        decode_attr(t)
    t = _attr("tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } } tensor_content: 'abc' }")
    with pytest.raises(ValueError, match="bytes"):
        decode_attr(t)


def test_every_attr_kind_survives_an_op_round_trip():
    attrs = {
        "a_type": dtypes.complex64,
        "a_bool": True,
        "a_int": 0,
        "a_float": -0.125,
        "a_str": "SAME",
        "_a_bytes": b"\x00\x01",
        "a_shape": TS([None, 3]),
        "a_unknown": TS(None),
        "a_tensor": np.arange(4, dtype=np.uint16).reshape(2, 2),
        "a_strings": np.array([b"x", b"yz"], dtype=object),
        "a_types": [dtypes.float32, dtypes.bool_],
        "a_ints": [3, -1],
        "a_floats": [0.5],
        "a_bools": [False, True],
        "a_strs": ["p", "q"],
        "a_shapes": [TS([]), TS([2])],
        "a_empty": [],
        "a_none": None,
    }
    g = ops.Graph()
    with g.as_default():
        ops.apply_op("NoOp", [], attrs, name="n")
    g2 = ops.Graph()
    with g2.as_default():
        (op,) = import_graph_def(_bytes_round_trip(g.as_graph_def()), return_elements=["n"])
    got = op.attrs
    assert set(got) == set(attrs) - {"a_none"}
    for key, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, np.ndarray):
            assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
            assert got[key].tolist() == value.tolist(), key
        else:
            assert got[key] == value, key
            assert type(got[key]) is type(value), key


# -- node_def text ---------------------------------------------------------------------------


def test_node_def_text():
    g = ops.Graph()
    with g.as_default():
        c = array_ops.constant(np.array([1, 2], np.int32), name="c")
        a = array_ops.constant('say "hi"\n', name="a")
        with g.control_dependencies([a]), g.device("/job:w"):
            y = array_ops.identity(c, name="y")
    text = node_def_text(y.op)
    assert text == (
        'name: "y"\nop: "Identity"\ninput: "c"\ninput: "^a"\ndevice: "/job:w"\n'
        'attr {\n  key: "T"\n  value {\n    type: DT_INT32\n  }\n}\n'
    )
    assert str(y.op) == text
    assert 'tensor_content: "\\001\\000\\000\\000\\002\\000\\000\\000"' in str(c.op)
    assert 'string_val: "say \\"hi\\"\\n"' in str(a.op)
    with g.as_default():
        p = array_ops.placeholder(dtypes.float32, [2, None], name="p")
    assert (
        "    shape {\n      dim {\n        size: 2\n      }\n      dim {\n        size: -1\n"
        in str(p.op)
    )


# -- import_graph_def semantics --------------------------------------------------------------


def _feed_graph_def():
    """x (placeholder) -> y = Identity(x) with ^c; c a Const; n a NoOp after y."""
    g = ops.Graph()
    with g.as_default():
        x = array_ops.placeholder(dtypes.float32, [2], name="x")
        c = array_ops.constant([7.0, 8.0], name="c")
        with g.control_dependencies([c]):
            y = array_ops.identity(x, name="y")
        with g.control_dependencies([y]):
            control_flow_ops.no_op(name="n")
    return _dict_graph_def(g)


def test_import_names_under_import_scope():
    gd = _feed_graph_def()
    g = ops.Graph()
    with g.as_default():
        import_graph_def(gd)
        import_graph_def(gd)
        import_graph_def(gd, name="mine")
        with g.name_scope("outer"):
            import_graph_def(gd, name="inner")
    names = {op.name for op in g.get_operations()}
    for prefix in ("import/", "import_1/", "mine/", "outer/inner/"):
        assert {prefix + n for n in ("x", "c", "y", "n")} <= names


def test_import_accepts_messages_binary_and_former_json():
    gd = _feed_graph_def()
    message = json_format.ParseDict(gd, GraphDef())
    forms = (message, message.SerializeToString(), gd, json.dumps(gd), json.dumps(gd).encode())
    for form in forms:
        g = ops.Graph()
        with g.as_default():
            import_graph_def(form)
        assert len(g.get_operations()) == 4


def test_import_rejects_non_graph_defs():
    with pytest.raises(TypeError):
        import_graph_def(42)
    with pytest.raises(ValueError):
        import_graph_def("{not json")


def test_input_map_replaces_placeholder_with_constant():
    gd = _feed_graph_def()
    g = ops.Graph()
    with g.as_default():
        k = array_ops.constant([1.0, 2.0], name="k")
        y, x = import_graph_def(gd, input_map={"x:0": k}, return_elements=["y:0", "x"])
    assert y.op.inputs == (k,)
    assert x.name == "import/x"  # the mapped node is still imported
    assert x.outputs[0].consumers() == []
    with Session(graph=g) as sess:
        np.testing.assert_array_equal(sess.run(y), [1.0, 2.0])


def test_input_map_key_without_index_means_output_zero():
    gd = _feed_graph_def()
    g = ops.Graph()
    with g.as_default():
        k = array_ops.constant([3.0, 4.0])
        (y,) = import_graph_def(gd, input_map={"x": k}, return_elements=["y:0"])
    assert y.op.inputs == (k,)


def test_input_map_values_are_converted_to_tensors():
    gd = _feed_graph_def()
    g = ops.Graph()
    with g.as_default():
        (y,) = import_graph_def(
            gd, input_map={"x": np.array([5.0, 6.0], np.float32)}, return_elements=["y:0"]
        )
        with Session() as sess:
            np.testing.assert_array_equal(sess.run(y), [5.0, 6.0])


def test_input_map_control_input():
    gd = _feed_graph_def()
    g = ops.Graph()
    with g.as_default():
        gate = control_flow_ops.no_op(name="gate")
        (y,) = import_graph_def(gd, input_map={"^c": gate}, return_elements=["y"])
    assert y.control_inputs == [gate]


def test_return_element_of_mapped_tensor_is_the_replacement():
    gd = _feed_graph_def()
    g = ops.Graph()
    with g.as_default():
        k = array_ops.constant([1.0, 2.0])
        (x,) = import_graph_def(gd, input_map={"x:0": k}, return_elements=["x:0"])
    assert x is k


def test_input_map_dtype_mismatch_raises_and_leaves_graph_unchanged():
    gd = _feed_graph_def()
    g = ops.Graph()
    with g.as_default():
        k = array_ops.constant([1, 2], name="k")
        with pytest.raises(ValueError):
            import_graph_def(gd, input_map={"x:0": k})
    assert [op.name for op in g.get_operations()] == ["k"]
    assert k.consumers() == []


def test_input_map_of_missing_node_raises():
    g = ops.Graph()
    with g.as_default():
        k = array_ops.constant([1.0, 2.0])
        with pytest.raises(ValueError, match="not found in graph_def"):
            import_graph_def(_feed_graph_def(), input_map={"nope:0": k})
        with pytest.raises(ValueError):
            import_graph_def(_feed_graph_def(), input_map={"x:3": k})
        with pytest.raises(TypeError):
            import_graph_def(_feed_graph_def(), input_map={0: k})
    assert [op.name for op in g.get_operations()] == ["Const"]


def test_return_elements():
    gd = _feed_graph_def()
    g = ops.Graph()
    with g.as_default():
        c_op, c_t, n = import_graph_def(gd, return_elements=["c", "c:0", "n"])
    assert isinstance(c_op, ops.Operation) and c_op.name == "import/c"
    assert isinstance(c_t, ops.Tensor) and c_t.name == "import/c:0"
    assert n.type == "NoOp"


@pytest.mark.parametrize("missing", ["nope", "nope:0", "c:1"])
def test_missing_return_element_raises(missing):
    g = ops.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="not found|Invalid return output"):
            import_graph_def(_feed_graph_def(), return_elements=["c", missing])
    assert g.get_operations() == []


def test_return_elements_must_be_strings():
    with ops.Graph().as_default(), pytest.raises(TypeError):
        import_graph_def(_feed_graph_def(), return_elements=[1])


def test_control_inputs_preserved():
    g = ops.Graph()
    with g.as_default():
        y, n = import_graph_def(_feed_graph_def(), return_elements=["y", "n"])
    assert [c.name for c in y.control_inputs] == ["import/c"]
    assert n.control_inputs == [y]
    assert n.inputs == ()


def test_outer_control_dependencies_gate_only_entry_nodes():
    g = ops.Graph()
    with g.as_default():
        gate = control_flow_ops.no_op(name="gate")
        with g.control_dependencies([gate]):
            x, c, y = import_graph_def(_feed_graph_def(), return_elements=["x", "c", "y"])
    assert x.control_inputs == [gate]
    assert c.control_inputs == [gate]
    assert gate not in y.control_inputs


def test_devices_kept_and_merged_with_outer_scope():
    g = ops.Graph()
    with g.as_default():
        with g.device("/job:w/task:2"):
            array_ops.constant(1.0, name="a")
        with g.device("/gpu:1"):
            array_ops.constant(1.0, name="b")
    gd = g.as_graph_def()
    g2 = ops.Graph()
    with g2.as_default(), g2.device("/job:ps/cpu:0"):
        a, b = import_graph_def(gd, return_elements=["a", "b"])
    assert a.device == "/job:w/task:2/device:CPU:0"
    assert b.device == "/job:ps/device:GPU:1"


def test_colocation_attr_follows_import_prefix():
    g = ops.Graph()
    with g.as_default():
        x = array_ops.constant(1.0, name="x")
        with g.colocate_with(x):
            array_ops.identity(x, name="y")
    g2 = ops.Graph()
    with g2.as_default():
        other = array_ops.constant(2.0, name="other")
        with g2.colocate_with(other):
            (y,) = import_graph_def(g.as_graph_def(), return_elements=["y"])
    assert y.get_attr("_class") == [b"loc:@import/x"]


def test_nodes_in_any_order():
    gd = _feed_graph_def()
    gd["node"].reverse()
    g = ops.Graph()
    with g.as_default():
        (y,) = import_graph_def(gd, return_elements=["y:0"])
    assert y.op.inputs[0].name == "import/x:0"


def test_unknown_op_raises_not_found_naming_op_and_node():
    gd = _feed_graph_def()
    gd["node"].append({"name": "q", "op": "NoSuchOpType", "input": ["c"]})
    g = ops.Graph()
    with g.as_default(), pytest.raises(errors.NotFoundError, match="'NoSuchOpType'.*'q'"):
        import_graph_def(gd)
    assert g.get_operations() == []


def test_unknown_input_node_raises():
    gd = _feed_graph_def()
    gd["node"].append({"name": "q", "op": "Identity", "input": ["ghost"], "attr": {}})
    with ops.Graph().as_default(), pytest.raises(ValueError, match="ghost"):
        import_graph_def(gd)


def test_bad_output_index_raises():
    gd = _feed_graph_def()
    gd["node"].append({"name": "q", "op": "Identity", "input": ["c:4"]})
    g = ops.Graph()
    with g.as_default(), pytest.raises(ValueError):
        import_graph_def(gd)
    assert g.get_operations() == []


def test_cycle_raises_value_error():
    f32 = {"T": {"type": "DT_FLOAT"}}
    gd = {
        "node": [
            {"name": "a", "op": "Identity", "input": ["b"], "attr": f32},
            {"name": "b", "op": "Identity", "input": ["a"], "attr": f32},
        ]
    }
    with ops.Graph().as_default(), pytest.raises(ValueError, match="cycle"):
        import_graph_def(gd)


def test_control_edge_cycle_raises_value_error():
    gd = {
        "node": [
            {"name": "a", "op": "NoOp", "input": ["^b"]},
            {"name": "b", "op": "NoOp", "input": ["^a"]},
        ]
    }
    with ops.Graph().as_default(), pytest.raises(ValueError, match="cycle"):
        import_graph_def(gd)


def test_input_map_breaks_a_cycle():
    f32 = {"T": {"type": "DT_FLOAT"}}
    gd = {
        "node": [
            {"name": "a", "op": "Identity", "input": ["b"], "attr": f32},
            {"name": "b", "op": "Identity", "input": ["a"], "attr": f32},
        ]
    }
    g = ops.Graph()
    with g.as_default():
        k = array_ops.constant(1.0)
        a, b = import_graph_def(gd, input_map={"b:0": k}, return_elements=["a:0", "b:0"])
    assert a.op.inputs == (k,)
    assert b is k


def test_duplicate_and_invalid_node_names_raise():
    with ops.Graph().as_default():
        with pytest.raises(ValueError, match="Duplicate"):
            import_graph_def({"node": [{"name": "a", "op": "NoOp"}] * 2})
        with pytest.raises(ValueError):
            import_graph_def({"node": [{"name": "a b", "op": "NoOp"}]})


def test_empty_name_imports_exact_names_and_uniquifies_clashes():
    gd = _feed_graph_def()
    g = ops.Graph()
    with g.as_default():
        (y,) = import_graph_def(gd, name="", return_elements=["y:0"])
        assert y.name == "y:0"
        (y,) = import_graph_def(gd, name="", return_elements=["y:0"])  # TF: "y_1"
        assert y.name == "y_1:0"
    assert len(g.get_operations()) == 8


def test_node_names_differing_only_in_case_are_kept():
    gd = {"node": [{"name": "A", "op": "NoOp"}, {"name": "a", "op": "NoOp"}]}
    g = ops.Graph()
    with g.as_default():
        big, small = import_graph_def(gd, return_elements=["A", "a"])
    assert (big.name, small.name) == ("import/A", "import/a")
    assert g.get_operation_by_name("import/a") is small


def test_tf_style_minimal_node_defs():
    # TF's JSON omits empty fields and defaulted attrs; int64s may be strings.
    gd = {
        "node": [
            {
                "name": "c",
                "op": "Const",
                "attr": {
                    "dtype": {"type": "DT_INT64"},
                    "value": {
                        "tensor": {
                            "dtype": "DT_INT64",
                            "tensor_shape": {"dim": [{"size": "2"}]},
                            "int64_val": ["5"],
                        }
                    },
                },
            },
            {"name": "y", "op": "Identity", "input": ["c:0"]},
        ]
    }
    g = ops.Graph()
    with g.as_default():
        (y,) = import_graph_def(gd, return_elements=["y:0"])
        with Session() as sess:
            out = sess.run(y)
    assert y.dtype == dtypes.int64
    np.testing.assert_array_equal(out, [5, 5])
    assert out.dtype == np.int64


def test_camel_case_json_fields_decode():
    t = {"dtype": "DT_FLOAT", "tensorShape": {"dim": [{"size": "1"}]}, "tensorContent": "AACAPw=="}
    np.testing.assert_array_equal(decode_attr({"tensor": t}), [1.0])
    assert decode_attr({"shape": {"unknownRank": True}}) == TS(None)


def test_colocated_import_takes_target_device():
    g = ops.Graph()
    with g.as_default():
        with g.device("/job:ps"):
            x = array_ops.constant(1.0, name="x")
        with g.colocate_with(x):
            array_ops.identity(x, name="y")
    gd = g.as_graph_def()
    gd.node[1].device = ""
    g2 = ops.Graph()
    with g2.as_default():
        (y,) = import_graph_def(gd, return_elements=["y"])
    assert y.device == "/job:ps"
    gd.node[1].attr["_class"].CopyFrom(_attr('list { s: "loc:@ghost" }'))
    with g2.as_default(), pytest.raises(ValueError, match="colocation"):
        import_graph_def(gd)


# -- regrouping flat inputs per OpDef argument -----------------------------------------------


def _op_def(inputs, attrs):
    return OpDef(
        name="Fake",
        inputs=[ArgDef.parse(s, attrs) for s in inputs],
        outputs=[],
        attrs=attrs,
        shape_fn=None,
    )


def test_group_inputs_number_attr():
    od = _op_def(["values: N * T", "axis: int32"], {"N": 1, "T": ANY})
    assert _group_inputs(od, ["a", "b", "c"], {"N": 2}, "n") == [["a", "b"], "c"]
    assert _group_inputs(od, ["a", "b", "c"], {}, "n") == [["a", "b"], "c"]
    with pytest.raises(ValueError):
        _group_inputs(od, ["a", "b", "c"], {"N": 3}, "n")


def test_group_inputs_type_list_attr():
    attrs = {"T": ANY, "U": TypeConstraint(None, is_list=True)}
    od = _op_def(["input: T", "data: U"], attrs)
    grouped = _group_inputs(od, ["x", "d1", "d2"], {"U": [dtypes.int32, dtypes.bool_]}, "p")
    assert grouped == ["x", ["d1", "d2"]]
    assert _group_inputs(od, ["x"], {"U": []}, "p") == ["x", []]


def test_group_inputs_wrong_count():
    od = _op_def(["a: T", "b: T"], {"T": ANY})
    assert _group_inputs(od, ["x", "y"], {}, "n") == ["x", "y"]
    with pytest.raises(ValueError):
        _group_inputs(od, ["x"], {}, "n")


def test_a_tiny_file_declaring_a_huge_constant_allocates_nothing_on_import():
    # Issue 18 item 15: a 64-byte GraphDef whose Const declares shape [2**28] with one
    # float_val.  TF imports it without materialising it; so does asyncflow (a read-only
    # broadcast view), and slices of it compute normally.
    import asyncflow as af

    with af.Graph().as_default() as g:
        af.constant(1.0, shape=[2], name="c")
    gd = g.as_graph_def()
    t = gd.node[0].attr["value"].tensor
    t.tensor_shape.dim[0].size = 2**28
    t.ClearField("tensor_content")
    del t.float_val[:]
    t.float_val.append(1.0)
    assert len(gd.SerializeToString()) < 100
    with af.Graph().as_default() as g2:
        af.import_graph_def(gd, name="")
        op = g2.get_operation_by_name("c")
        value = op._attr("value")
        assert value.shape == (2**28,) and value.strides == (0,)  # nothing allocated
        # TF's get_attr gives the TensorProto: as compact as the file's, still nothing
        proto = op.get_attr("value")
        assert list(proto.float_val) == [1.0] and not proto.tensor_content
        assert len(op.node_def.SerializeToString()) < 100
        c = g2.get_tensor_by_name("c:0")
        with af.Session() as sess:
            assert sess.run(c[:3]).tolist() == [1.0, 1.0, 1.0]
