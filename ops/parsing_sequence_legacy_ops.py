"""The SequenceExample parsers TF 1.x graphs hold: ParseSingleSequenceExample (TF 1.x's
tf.io.parse_single_sequence_example: one record, the keys as inputs) and
ParseSequenceExample (TF 1.12 to 2.2's parse_sequence_example: a batch, the keys as
attrs).  asyncflow's builders write ParseSequenceExampleV2, as TF 2.21's do; these let
the older GraphDefs import and run.

Both run ParseSequenceExampleV2's parser (ops/parsing_sequence_ops.py) with no ragged
features: the same values, errors and, for the single form, the batch of one without
its batch axis; ParseSingleSequenceExample has no feature-list lengths output.  Neither
is differentiable (TF: NotDifferentiable for the V2 op, no entry for these, so
tf.gradients raises LookupError through them, as here).
"""

from __future__ import annotations

import numpy as np

from asyncflow import errors, tensor_shape
from asyncflow.ops import parsing_sequence_ops as _seq
from asyncflow.ops.parsing_ops import _PARSE_TYPES
from asyncflow.registry import REQUIRED, TypeConstraint, register_op

__all__: list[str] = []

_TYPES = {
    name: TypeConstraint(_PARSE_TYPES, default=(), is_list=True)
    for name in (
        "context_sparse_types",
        "Tcontext_dense",
        "feature_list_dense_types",
        "feature_list_sparse_types",
    )
}
_COUNTS = {"Ncontext_sparse": 0, "Ncontext_dense": 0, "Nfeature_list_sparse": 0,
           "Nfeature_list_dense": 0}  # fmt: skip
_OUTPUTS = [
    "context_sparse_indices: Ncontext_sparse * int64",
    "context_sparse_values: context_sparse_types",
    "context_sparse_shapes: Ncontext_sparse * int64",
    "context_dense_values: Tcontext_dense",
    "feature_list_sparse_indices: Nfeature_list_sparse * int64",
    "feature_list_sparse_values: feature_list_sparse_types",
    "feature_list_sparse_shapes: Nfeature_list_sparse * int64",
    "feature_list_dense_values: feature_list_dense_types",
]


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _shapes(op, batched: bool):
    a = op._attr
    lead = [op.inputs[0].shape.with_rank(1)[0].value] if batched else []
    rank = len(lead)
    ncs, nfs = len(a("context_sparse_types")), len(a("feature_list_sparse_types"))
    out = [tensor_shape.TensorShape([None, rank + 1])] * ncs
    out += [tensor_shape.TensorShape([None])] * ncs
    out += [tensor_shape.TensorShape([rank + 1])] * ncs
    out += [tensor_shape.TensorShape([*lead, *s]) for s in a("context_dense_shapes")]
    out += [tensor_shape.TensorShape([None, rank + 2])] * nfs
    out += [tensor_shape.TensorShape([None])] * nfs
    out += [tensor_shape.TensorShape([rank + 2])] * nfs
    dense = a("feature_list_dense_shapes")
    out += [tensor_shape.TensorShape([*lead, None, *s]) for s in dense]
    if batched:
        out += [tensor_shape.TensorShape(lead)] * len(dense)
    return out


def _attrs(a, keys, missing, names) -> dict:
    """The attrs ParseSequenceExampleV2's parser reads, for these keys and no ragged."""
    (c_sparse, c_dense, f_sparse, f_dense) = keys
    for got, what, want in (
        (c_sparse, "context_sparse_keys", len(a["context_sparse_types"])),
        (c_dense, "context_dense_keys", len(a["Tcontext_dense"])),
        (f_sparse, "feature_list_sparse_keys", len(a["feature_list_sparse_types"])),
        (f_dense, "feature_list_dense_keys", len(a["feature_list_dense_types"])),
    ):
        if len(got) != want:
            raise _invalid(f"Expected len({what}) to match the op's types: {len(got)} vs. {want}")
    return {
        **a,
        "context_sparse_keys": c_sparse,
        "context_dense_keys": c_dense,
        "context_ragged_keys": [],
        "feature_list_sparse_keys": f_sparse,
        "feature_list_dense_keys": f_dense,
        "feature_list_ragged_keys": [],
        "context_ragged_value_types": [],
        "feature_list_ragged_value_types": [],
        "feature_list_dense_missing_assumed_empty": [k for k in f_dense if k in set(missing)],
        "_example_names": names,
    }


# -- ParseSequenceExample: a batch, keys as attrs ----------------------------------------------

ParseSequenceExample = register_op(
    "ParseSequenceExample",
    inputs=["serialized: string", "debug_name: string", "context_dense_defaults: Tcontext_dense"],
    outputs=[*_OUTPUTS, "feature_list_dense_lengths: Nfeature_list_dense * int64"],
    attrs={
        "feature_list_dense_missing_assumed_empty": REQUIRED,
        "context_sparse_keys": REQUIRED,
        "context_dense_keys": REQUIRED,
        "feature_list_sparse_keys": REQUIRED,
        "feature_list_dense_keys": REQUIRED,
        **_COUNTS,
        **_TYPES,
        "context_dense_shapes": [],
        "feature_list_dense_shapes": [],
    },
    shape_fn=lambda op: _shapes(op, True),
)


@ParseSequenceExample.kernel("CPU")
async def _parse_sequence_example_v1(ctx, serialized, debug_name, *defaults):
    a = ctx.attrs
    keys = [
        [k.decode() if isinstance(k, bytes) else k for k in a[name]]
        for name in ("context_sparse_keys", "context_dense_keys", "feature_list_sparse_keys",
                     "feature_list_dense_keys")
    ]  # fmt: skip
    missing = [
        k.decode() if isinstance(k, bytes) else k
        for k in a["feature_list_dense_missing_assumed_empty"]
    ]
    attrs = _attrs(a, keys, missing, _seq._keys(debug_name))
    out = await ctx.device.compute(_seq._parse_sync, attrs, serialized, defaults)
    return out[0] if len(out) == 1 else out


# -- ParseSingleSequenceExample: one record, keys as inputs ------------------------------------

ParseSingleSequenceExample = register_op(
    "ParseSingleSequenceExample",
    inputs=[
        "serialized: string",
        "feature_list_dense_missing_assumed_empty: string",
        "context_sparse_keys: Ncontext_sparse * string",
        "context_dense_keys: Ncontext_dense * string",
        "feature_list_sparse_keys: Nfeature_list_sparse * string",
        "feature_list_dense_keys: Nfeature_list_dense * string",
        "context_dense_defaults: Tcontext_dense",
        "debug_name: string",
    ],
    outputs=_OUTPUTS,
    attrs={**_COUNTS, **_TYPES, "context_dense_shapes": [], "feature_list_dense_shapes": []},
    shape_fn=lambda op: _shapes(op, False),
)


@ParseSingleSequenceExample.kernel("CPU")
async def _parse_single_sequence_example(ctx, serialized, missing, *rest):
    a = ctx.attrs
    counts = [a["Ncontext_sparse"], a["Ncontext_dense"], a["Nfeature_list_sparse"],
              a["Nfeature_list_dense"]]  # fmt: skip
    keys, i = [], 0
    for n in counts:
        keys.append([_seq._keys(k)[0] for k in rest[i : i + n]])
        i += n
    ndefaults = len(a["Tcontext_dense"])
    defaults, debug_name = rest[i : i + ndefaults], rest[i + ndefaults]
    if np.ndim(serialized) != 0:
        raise _invalid(
            f"Expected serialized to be a scalar, got shape: {list(np.shape(serialized))}"
        )
    attrs = _attrs(a, keys, _seq._keys(missing), _seq._keys(debug_name))
    record = np.reshape(serialized, [1])
    # (this op words a missing required context feature its own way; checked first)
    (parsed,) = _seq._parse_records(record.tolist())
    for key, default in zip(keys[1], defaults):
        if np.size(default) == 0 and key not in parsed.context.feature:
            name = attrs["_example_names"][0] if attrs["_example_names"] else ""
            raise _invalid(
                f"Name: {name}, Context feature '{key}' is required but could not be found."
            )
    out = _seq._parse_sync(attrs, record, defaults)
    out = _seq._unbatch(attrs, list(out))
    out = out[: len(out) - len(a["feature_list_dense_types"])]  # (no lengths output)
    return out[0] if len(out) == 1 else out
