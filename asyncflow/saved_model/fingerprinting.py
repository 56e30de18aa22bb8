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

On a directory asyncflow wrote, TF's own fingerprinting computes the same
signature_def_hash, saved_object_graph_hash and checkpoint_hash; its saved_model_checksum
and graph_def_program_hash differ (TF hashes its C++ re-serialisation of the parsed
protos; the bytes where it differs from ours were not found).  On TF's files, these
functions give TF's four regularised hashes.
"""

from __future__ import annotations

import os
import re
import secrets

from asyncflow.ops.string_hash_ops import fingerprint64
from asyncflow.protos.fingerprint_pb2 import FingerprintDef
from asyncflow.protos.graph_pb2 import GraphDef

__all__ = [
    "FINGERPRINT_FILENAME",
    "create_fingerprint_def",
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
    return fingerprint64(message.SerializeToString(deterministic=True))


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
