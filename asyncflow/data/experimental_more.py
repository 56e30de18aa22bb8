"""More of TF 2.21's `tf.compat.v1.data.experimental`: SqlDataset, pad_to_cardinality,
to_variant / from_variant, get_model_proto, as TF builds them in graph mode.

pad_to_cardinality is TF's own construction: the elements with `mask_key` True, then
`from_tensors(zeros with mask_key False).repeat(cardinality - input cardinality)` (so
an input of unknown cardinality, -2, gets cardinality + 2 fillers, as in TF's graph
mode where the cardinality is not checked).
"""

from __future__ import annotations

from collections.abc import Mapping

from asyncflow import dtypes, nest
from asyncflow import graph as ops
from asyncflow.data import saving
from asyncflow.data.dataset import Dataset
from asyncflow.data.structure import _Spec
from asyncflow.ops import array_ops, dataset_ops
from asyncflow.train.saver import SaveableObject, SaveSpec

__all__ = [
    "SqlDataset",
    "dense_to_ragged_batch",
    "from_variant",
    "get_model_proto",
    "make_saveable_from_iterator",
    "pad_to_cardinality",
    "to_variant",
]


class SqlDataset(Dataset):
    """The rows of a SQL query against a sqlite database, one scalar per column
    (ops/dataset_sql.py: TF's conversions and errors)."""

    def __init__(self, driver_name, data_source_name, query, output_types):
        structure = nest.map_structure(lambda t: _Spec(t, []), output_types)
        super().__init__(None, structure)
        inputs = [
            ops.convert_to_tensor(v, dtype=dtypes.string, name=n)
            for v, n in (
                (driver_name, "driver_name"),
                (data_source_name, "data_source_name"),
                (query, "query"),
            )
        ]
        self._variant = dataset_ops.dataset_op(
            "SqlDataset", inputs, self._out_attrs(), name="SqlDataset"
        )


def pad_to_cardinality(cardinality, mask_key="valid"):
    """`ds.apply(pad_to_cardinality(n))`: the (dict) elements with `mask_key` True,
    then zero elements with `mask_key` False up to `n` (see the module note).

    Raises:
      ValueError: elements that are not dicts.
    """

    def apply(ds: Dataset) -> Dataset:
        spec = ds.element_spec
        if not isinstance(spec, Mapping):
            raise ValueError("`pad_to_cardinality` requires its input dataset to be a dictionary.")
        padding = cardinality - ds.cardinality()
        filler = nest.map_structure(lambda s: array_ops.zeros(s.shape, s.dtype), spec)
        filler[mask_key] = False
        filler_ds = Dataset.from_tensors(filler).repeat(padding)

        def with_mask(x):
            x[mask_key] = True
            return x

        return ds.map(with_mask).concatenate(filler_ds)

    return apply


def dense_to_ragged_batch(batch_size, drop_remainder=False, row_splits_dtype=dtypes.int64):
    """`ds.apply(dense_to_ragged_batch(n))` is `ds.ragged_batch(n, ...)`."""
    return lambda ds: ds.ragged_batch(batch_size, drop_remainder, row_splits_dtype)


def to_variant(dataset: Dataset):
    """The dataset's handle tensor (TF: its variant tensor)."""
    return dataset._variant


def from_variant(variant, structure) -> Dataset:
    """A Dataset of the handle `variant` whose elements have `structure` (an element_spec).

    Raises:
      TypeError: a structure of specs other than TensorSpec / SparseTensorSpec.
    """
    return Dataset(variant, saving._structure_of_spec(structure))


def get_model_proto(iterator):
    """TF's: only an eager `tf.data.Iterator` has an autotuning model, so a TF1 graph
    program's iterators raise ValueError.

    Raises:
      ValueError: always (as TF for every graph-mode iterator).
    """
    raise ValueError("Only supports `tf.data.Iterator`-typed `iterator`.")


class _IteratorSaveable(SaveableObject):
    """An iterator's state as one string tensor `<resource name>_STATE` of a checkpoint
    (ops/dataset_iterator_state.py: the elements given so far, replayed on restore)."""

    def __init__(self, resource, name, external_state_policy):
        state = ops.apply_op(
            "SerializeIterator",
            [resource],
            {"external_state_policy": int(external_state_policy)},
            name="SerializeIterator",
        ).outputs[0]
        spec = SaveSpec(state, "", name + "_STATE", dtypes.string, resource.device)
        super().__init__(resource, [spec], name)

    def restore(self, restored_tensors, restored_shapes):
        with ops.colocate_with(self.op.op):
            return ops.apply_op(
                "DeserializeIterator",
                [self.op, restored_tensors[0]],
                {},
                name="DeserializeIterator",
            )


def make_saveable_from_iterator(iterator, external_state_policy=None):
    """A SaveableObject of `iterator`'s state for tf.train.Saver (add it to the
    SAVEABLE_OBJECTS collection, or give it in var_list).  Restoring replays the
    iterator's pass to the saved position, so the iterator must be initialized (a
    one-shot iterator is) before the restore runs."""
    from asyncflow.data.options import ExternalStatePolicy

    policy = ExternalStatePolicy.FAIL if external_state_policy is None else external_state_policy
    if isinstance(policy, str):  # TF takes the names too
        names = {"warn": "WARN", "ignore": "IGNORE", "fail": "FAIL"}
        if policy not in names:
            raise ValueError(
                "Invalid `ExternalStatePolicy.` Supported values include 'warn', 'ignore', "
                f"and 'fail.' Received {policy}."
            )
        policy = getattr(ExternalStatePolicy, names[policy])
    resource = iterator._resource
    return _IteratorSaveable(resource, resource.name, getattr(policy, "value", policy))
