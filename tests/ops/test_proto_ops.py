"""tf.io.decode_proto / encode_proto (DecodeProtoV2, EncodeProto) against TF 2.21's
recorded results (fixtures/proto_ops_tf.json, recorded by
fixtures/record_proto_ops_tf.py from fixtures/proto_ops_cases.py): every scalar field
type singular and repeated, packed and not, nested messages and groups, text format,
the local descriptor pool, the output types TF accepts for each field type, the bytes
TF writes, and its errors.

One difference is kept on purpose: TF 2.21 returned 4 bytes of garbage instead of the
default for the missing string field "s" of the last four messages in `batch_2x3`
(uninitialised memory); we return the default, as it does in `all_native`."""

from __future__ import annotations

import base64
import json
import pathlib
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.session import Session

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import proto_ops_cases as cases  # noqa: E402

TF = json.loads((FIXTURES / "proto_ops_tf.json").read_text())


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _decoded():
    out = cases.decode_cases(af)
    with Session() as sess:
        return sess.run(out)


@pytest.mark.parametrize("key", sorted(TF["decode"]))
def test_decode_as_tf(key):
    got = _decoded()[key]
    want = TF["decode"][key]
    assert cases.plain(got.sizes) == want["sizes"]
    assert len(got.values) == len(want["values"])
    for i, (v, w) in enumerate(zip(got.values, want["values"])):
        v = cases.plain(v)
        if key == "batch_2x3" and i == 1:  # (see the module note)
            assert w["values"][2:] == [cases.b64(b"P\x1f\x1f~")] * 4
            w = dict(w, values=w["values"][:2] + [cases.b64(b"dflt")] * 4)
        assert v == w, (key, i)


def test_decode_outputs_are_a_named_pair_with_static_shapes():
    sizes, values = af.io.decode_proto(
        af.placeholder(af.string, [4, 2]), "aft.All", ["i32", "r_s"], [af.int32, af.string],
        descriptor_source=cases.SOURCE,
    )  # fmt: skip
    assert sizes.shape.as_list() == [4, 2, 2]
    assert [v.shape.as_list() for v in values] == [[4, 2, None]] * 2
    assert [v.dtype for v in values] == [af.int32, af.string]
    assert sizes.op.type == "DecodeProtoV2"


@pytest.mark.parametrize("key", sorted(TF["encode"]))
def test_encode_as_tf(key):
    out = cases.encode_cases(af)
    with Session() as sess:
        got = sess.run(out[key])
    assert cases.plain(got) == TF["encode"][key]


def test_encode_then_decode_round_trip():
    All, _ = cases.message_classes()
    out = cases.encode_cases(af)
    with Session() as sess:
        got = sess.run(out["round_trip"])
    for data, want in zip(got, cases.messages()):
        a, b = All.FromString(data), All.FromString(want)
        for name in ["i32", "r_f", "s", "r_u64", "e", "r_b", "d", "sub"]:
            assert getattr(a, name) == getattr(b, name), name


def _outcome(thunk) -> dict:
    try:
        op = thunk()
    except Exception as exc:  # noqa: BLE001 - compared with what TF raised
        return {"when": "build", "error": type(exc).__name__, "message": str(exc)}
    try:
        with Session() as sess:
            sess.run(op)
    except errors.OpError as exc:
        message = exc.message.split("\n\t [[", 1)[0]  # (without the node's line)
        return {"when": "run", "error": type(exc).__name__, "message": message}
    return {"when": "ok"}


@pytest.mark.parametrize("key", sorted(TF["errors"]))
def test_errors_as_tf(key):
    got = _outcome(cases.error_cases(af)[key])
    want = TF["errors"][key]
    assert got["when"] == want["when"]
    if want["when"] != "ok":
        assert got["error"] == want["error"]
        assert got["message"] == want["message"]


def test_output_types_each_field_type_accepts():
    for key, thunk in cases.type_table_cases(af).items():
        with ops.Graph().as_default():
            assert (_outcome(thunk)["when"] == "ok") == TF["types"][key], key


def test_descriptor_set_file_and_bounds(tmp_path):
    path = tmp_path / "all.pb"
    path.write_bytes(cases.file_descriptor_set().SerializeToString())
    sizes, (v,) = af.io.decode_proto(
        cases.messages()[:2], "aft.All", ["r_i32"], [af.int32], descriptor_source=str(path)
    )
    with Session() as sess:
        s, v = sess.run([sizes, v])
    assert s.tolist() == [[3], [0]] and v.tolist() == [[5, -6, 7], [0, 0, 0]]


@pytest.mark.parametrize(
    "buf",
    [b"\x0a\xff\xff\xff\xff\x0f", b"\x0a\x05ab", b"\xa3\x03\xa8\x03", b"\x48" + b"\xff" * 10,
     b"\x07", b"\x00\x01"],
)  # fmt: skip
def test_malformed_buffers_fail_cleanly(buf):
    """Lengths past the buffer, unterminated groups and varints, bad tags: DataLoss,
    never a hang or a huge allocation."""
    sizes, _ = af.io.decode_proto(
        [buf], "aft.All", ["i32", "r_s"], [af.int32, af.string], descriptor_source=cases.SOURCE
    )
    with Session() as sess, pytest.raises(errors.DataLossError):
        sess.run(sizes)


def test_large_batch_matches_protobuf():
    All, _ = cases.message_classes()
    rng = np.random.default_rng(3)
    msgs = [All(r_i64=rng.integers(-(2**62), 2**62, int(n)).tolist(), s=str(n))
            for n in rng.integers(0, 20, 500)]  # fmt: skip
    sizes, (vals, s) = af.io.decode_proto(
        [m.SerializeToString() for m in msgs], "aft.All", ["r_i64", "s"],
        [af.int64, af.string], descriptor_source=cases.SOURCE,
    )  # fmt: skip
    with Session() as sess:
        sizes, vals, s = sess.run([sizes, vals, s])
    for i, m in enumerate(msgs):
        assert sizes[i, 0] == len(m.r_i64)
        assert vals[i, : len(m.r_i64)].tolist() == list(m.r_i64)
        assert s[i, 0] == m.s.encode()
    assert base64  # (imported for the fixture's forms)
