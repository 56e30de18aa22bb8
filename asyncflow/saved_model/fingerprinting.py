"""A SavedModel's fingerprint.pb, computed as TF 2.21 computes it.

Each field is a FarmHash Fingerprint64 of deterministically serialised protos, or a
FingerprintCat64 chain of them:

- saved_model_checksum: the whole SavedModel (the bytes written to saved_model.pb);
- graph_def_program_hash: the meta graph's GraphDef with the function library and the
  versions emptied, calls' function names without their numeric suffix, their
  `config_proto` emptied, and string constants' values cleared ("regularised");
- signature_def_hash: per signature key in sorted order, the key then the SignatureDef;
- saved_object_graph_hash: per saved concrete function in the order of its name's
  numeric suffix, the name without the suffix then the SavedConcreteFunction;
- checkpoint_hash: variables/variables.index's bytes (0 when there is none);
- uuid: 128 random bits in decimal; version.producer 4, as TF 2.21 writes.

"Deterministically serialised" is C++'s order, which `deterministic_bytes` writes: map
entries sorted bytewise by key (protobuf's Python upb orders string keys otherwise:
"x_1", "x_2", "x", which a signature's composite keywords, "x", "x_1", ..., showed).
saved_model.pb is written in that form too, so on a directory asyncflow wrote TF's own
fingerprinting computes all five hashes ours wrote (checked with TF 2.21, 2026-12-02);
on TF's files, these functions give TF's four regularised hashes.
"""

from __future__ import annotations

import os
import re
import secrets

from google.protobuf.unknown_fields import UnknownFieldSet

from asyncflow.ops.string_hash_ops import fingerprint64
from asyncflow.protos.fingerprint_pb2 import FingerprintDef
from asyncflow.protos.graph_pb2 import GraphDef

__all__ = [
    "FINGERPRINT_FILENAME",
    "create_fingerprint_def",
    "deterministic_bytes",
    "fingerprint64",
    "fingerprint_cat64",
    "write",
]

FINGERPRINT_FILENAME = "fingerprint.pb"
_PRODUCER = 4  # (TF 2.21's)
_MASK = (1 << 64) - 1
_MUL = 0xC6A4A7935BD1E995
_SUFFIX_UID = re.compile(r"_(\d+)$")


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TF's FingerprintCat64: two 64-bit fingerprints combined, order-dependent."""
    result = fp1 ^ _MUL
    result ^= (_shift_mix((fp2 * _MUL) & _MASK) * _MUL) & _MASK
    result = (result * _MUL) & _MASK
    result = (_shift_mix(result) * _MUL) & _MASK
    return _shift_mix(result)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _map_key(key):
    return key.encode() if isinstance(key, str) else key


def deterministic_bytes(message) -> bytes:
    """`message` serialised as TF's C++ SerializeToStringDeterministic writes it: fields
    in number order, map entries by key (bytewise for strings).  protobuf's Python (upb)
    deterministic mode orders string keys otherwise ("x_1" before "x"), so maps are
    written here entry by entry; everything else is upb's own encoding of one field."""
    out = []
    for field, value in message.ListFields():  # (in field number order)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            for key in sorted(value, key=_map_key):
                entry = field.message_type._concrete_class()
                if value_field.message_type is not None:
                    entry.key = key
                    body = entry.SerializeToString()
                    body += _length_delimited(value_field.number, deterministic_bytes(value[key]))
                else:
                    entry.key, entry.value = key, value[key]
                    body = entry.SerializeToString(deterministic=True)
                out.append(_length_delimited(field.number, body))
        elif field.message_type is not None:
            items = value if field.is_repeated else [value]
            out.extend(_length_delimited(field.number, deterministic_bytes(v)) for v in items)
        else:
            single = type(message)()
            if field.is_repeated:
                getattr(single, field.name).extend(value)
            else:
                setattr(single, field.name, value)
            out.append(single.SerializeToString(deterministic=True))
    return b"".join(out) + _unknown(message)


def _unknown(message) -> bytes:
    """The unknown fields' bytes, as parsed (kept at the end, as C++ writes them)."""
    if not len(UnknownFieldSet(message)):
        return b""
    whole = message.SerializeToString(deterministic=True)
    known = type(message)()
    known.CopyFrom(message)
    known.DiscardUnknownFields()
    rest = known.SerializeToString(deterministic=True)
    if len(whole) == len(rest):
        return b""
    # (upb writes unknown fields after the known ones)
    return whole[len(rest) :]


def _hash(message) -> int:
    return fingerprint64(deterministic_bytes(message))


def _graph_def_program_hash(graph_def) -> int:
    gd = GraphDef()
    gd.CopyFrom(graph_def)
    for node in gd.node:
        if node.op in ("PartitionedCall", "StatefulPartitionedCall"):
            name = node.attr["f"].func.name
            match = _SUFFIX_UID.search(name)
            if match:
                node.attr["f"].func.name = name[: -len(match.group(1))]
            if "config_proto" in node.attr:
                node.attr["config_proto"].s = b""
        if node.op == "Const" and node.attr["dtype"].type == 7:  # DT_STRING
            node.attr["value"].Clear()
    # Emptied but present, as TF's regulariser leaves them.
    gd.library.Clear()
    gd.library.SetInParent()
    gd.versions.Clear()
    gd.versions.SetInParent()
    return _hash(gd)


def _signature_def_hash(signature_defs) -> int:
    result = 0
    for key in sorted(signature_defs):
        result = fingerprint_cat64(result, fingerprint64(key.encode()))
        result = fingerprint_cat64(result, _hash(signature_defs[key]))
    return result


def _saved_object_graph_hash(object_graph) -> int:
    """Raises ValueError for a concrete function whose name has no numeric suffix (TF's
    fingerprinting fails on it too)."""
    by_uid = []
    for name in object_graph.concrete_functions:
        match = _SUFFIX_UID.search(name)
        if match is None:
            raise ValueError(f"Function name {name!r} does not end with a numeric UID")
        by_uid.append((int(match.group(1)), name))
    result = 0
    for uid, name in sorted(by_uid):
        stem = name[: -len(str(uid))]
        result = fingerprint_cat64(result, fingerprint64(stem.encode()))
        result = fingerprint_cat64(result, _hash(object_graph.concrete_functions[name]))
    return result


def create_fingerprint_def(saved_model_bytes: bytes, saved_model, export_dir: str):
    """The FingerprintDef of the SavedModel `saved_model` (serialised as
    `saved_model_bytes`) written at `export_dir`."""
    mg = saved_model.meta_graphs[0]
    fp = FingerprintDef()
    fp.saved_model_checksum = fingerprint64(saved_model_bytes)
    fp.graph_def_program_hash = _graph_def_program_hash(mg.graph_def)
    fp.signature_def_hash = _signature_def_hash(mg.signature_def)
    fp.saved_object_graph_hash = _saved_object_graph_hash(mg.object_graph_def)
    index = os.path.join(export_dir, "variables", "variables.index")
    if os.path.isfile(index):
        with open(index, "rb") as f:
            fp.checkpoint_hash = fingerprint64(f.read())
    fp.uuid = str(secrets.randbits(128))
    fp.version.producer = _PRODUCER
    return fp


def write(saved_model_bytes: bytes, saved_model, export_dir: str) -> None:
    """Write export_dir/fingerprint.pb (after saved_model.pb and the variables)."""
    fp = create_fingerprint_def(saved_model_bytes, saved_model, export_dir)
    with open(os.path.join(export_dir, FINGERPRINT_FILENAME), "wb") as f:
        f.write(fp.SerializeToString())
