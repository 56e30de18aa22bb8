"""A SavedModel's fingerprint.pb, computed as TF 2.21 computes it.

Each field is a FarmHash Fingerprint64 of deterministically serialised protos, or a
FingerprintCat64 chain of them:

- saved_model_checksum: the whole SavedModel, serialised as TF's C++ serialises it;
- graph_def_program_hash: the meta graph's GraphDef with the function library and the
  versions emptied, calls' function names without their numeric suffix, their
  `config_proto` emptied, and string constants' values cleared ("regularised");
- signature_def_hash: per signature key in sorted order, the key then the SignatureDef;
- saved_object_graph_hash: per saved concrete function in the order of its name's
  numeric suffix, the name without the suffix then the SavedConcreteFunction;
- checkpoint_hash: variables/variables.index's bytes (0 when there is none);
- uuid: 128 random bits in decimal; version.producer 4, as TF 2.21 writes.

"Deterministic" is C++ protobuf's: map entries in ascending key order (strings bytewise,
a prefix first; integers by value).  Python's protobuf (upb) orders them otherwise
("config_proto" before "config", "x_1" before "x"; integer keys descending), so where a
message holds a map these hashes serialise it themselves (`deterministic_bytes`, which
writes saved_model.pb too): a call node's `config` and `config_proto` attrs, a
FunctionDef's `arg_attr`, a signature's composite keywords `x`, `x_1`, made every hash of
a graph with them differ from TF's.  TF's fingerprinting of a directory asyncflow wrote
gives the same five hashes as ours, and ours of TF's directories TF's.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import struct

from google.protobuf.descriptor import FieldDescriptor as _T
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


def _hash(message) -> int:
    return fingerprint64(deterministic_bytes(message))


@functools.cache
def _holds_a_map(descriptor, _seen=frozenset()) -> bool:
    """Whether a message of this type can hold a map field, at any depth."""
    if descriptor.full_name in _seen:
        return False
    seen = _seen | {descriptor.full_name}
    for fd in descriptor.fields:
        if fd.message_type is not None:
            if fd.message_type.GetOptions().map_entry or _holds_a_map(fd.message_type, seen):
                return True
    return False


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1  # negative int32/int64: ten bytes of two's complement, as protobuf
    out = bytearray()
    while True:
        byte, v = v & 0x7F, v >> 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_FIXED = {  # wire type and layout of the fixed-width scalars
    _T.TYPE_FIXED32: (5, "<I"), _T.TYPE_SFIXED32: (5, "<i"), _T.TYPE_FLOAT: (5, "<f"),
    _T.TYPE_FIXED64: (1, "<Q"), _T.TYPE_SFIXED64: (1, "<q"), _T.TYPE_DOUBLE: (1, "<d"),
}  # fmt: skip


def _field(number: int, fd, value) -> bytes:
    """One scalar or message field of a map entry, tag included, as C++ writes it."""
    t = fd.type
    if t == _T.TYPE_MESSAGE:
        body = deterministic_bytes(value)
        return _varint(number << 3 | 2) + _varint(len(body)) + body
    if t in (_T.TYPE_STRING, _T.TYPE_BYTES):
        body = value.encode() if isinstance(value, str) else bytes(value)
        return _varint(number << 3 | 2) + _varint(len(body)) + body
    if t in (_T.TYPE_SINT32, _T.TYPE_SINT64):
        return _varint(number << 3) + _varint((value << 1) ^ (value >> 63))
    fixed = _FIXED.get(t)
    if fixed is not None:
        return _varint(number << 3 | fixed[0]) + struct.pack(fixed[1], value)
    return _varint(number << 3) + _varint(int(value))  # int32/64, uint32/64, bool, enum


def deterministic_bytes(message) -> bytes:
    """`message` serialised as C++ protobuf's deterministic serialisation: fields in number
    order, map entries by ascending key, each entry's key and value always written."""
    if not _holds_a_map(message.DESCRIPTOR):
        return message.SerializeToString(deterministic=True)  # (the same bytes)
    out = bytearray()
    for fd, value in message.ListFields():  # (in field number order)
        tag = _varint(fd.number << 3 | 2)
        entry_type = fd.message_type
        if entry_type is not None and entry_type.GetOptions().map_entry:
            key_fd, value_fd = entry_type.fields_by_name["key"], entry_type.fields_by_name["value"]
            strings = key_fd.type in (key_fd.TYPE_STRING, key_fd.TYPE_BYTES)
            for k in sorted(value, key=(lambda k: k.encode()) if strings else None):
                body = _field(1, key_fd, k) + _field(2, value_fd, value[k])
                out += tag + _varint(len(body)) + body
        elif entry_type is not None:
            for item in value if fd.is_repeated else (value,):
                body = deterministic_bytes(item)
                out += tag + _varint(len(body)) + body
        else:  # scalars: protobuf's own bytes for this one field
            alone = type(message)()
            if fd.is_repeated:
                getattr(alone, fd.name).extend(value)
            else:
                setattr(alone, fd.name, value)
            out += alone.SerializeToString(deterministic=True)
    return bytes(out) + _unknown(message)


def _unknown(message) -> bytes:
    """The unknown fields' bytes as parsed (a newer TF's fields), last, as C++ writes them."""
    if not len(UnknownFieldSet(message)):
        return b""
    known = type(message)()
    known.CopyFrom(message)
    known.DiscardUnknownFields()
    whole = message.SerializeToString(deterministic=True)
    return whole[len(known.SerializeToString(deterministic=True)) :]  # (upb writes them last)


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


def create_fingerprint_def(saved_model, export_dir: str):
    """The FingerprintDef of the SavedModel `saved_model` written at `export_dir`."""
    mg = saved_model.meta_graphs[0]
    fp = FingerprintDef()
    fp.saved_model_checksum = _hash(saved_model)
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


def write(saved_model, export_dir: str) -> None:
    """Write export_dir/fingerprint.pb (after saved_model.pb and the variables)."""
    fp = create_fingerprint_def(saved_model, export_dir)
    with open(os.path.join(export_dir, FINGERPRINT_FILENAME), "wb") as f:
        f.write(fp.SerializeToString())
