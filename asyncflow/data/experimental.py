"""`af.data.experimental`: the transformations TF1 programs take from it."""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.data.csv_dataset import CsvDataset, make_csv_dataset
from asyncflow.data.dataset import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Counter,
    Dataset,
    _seed_tensors,
    bucket_by_sequence_length,
    choose_from_datasets,
    sample_from_datasets,
)
from asyncflow.data.experimental_more import (
    SqlDataset,
    dense_to_ragged_batch,
    from_variant,
    get_model_proto,
    make_saveable_from_iterator,
    pad_to_cardinality,
    to_variant,
)
from asyncflow.data.optional import Optional, OptionalSpec, get_next_as_optional
from asyncflow.data.options import (
    AutoShardPolicy,
    AutotuneAlgorithm,
    AutotuneOptions,
    DistributeOptions,
    ExternalStatePolicy,
    OptimizationOptions,
    ServiceOptions,
    ThreadingOptions,
)

__all__ = [
    "distributed_save",
    "AUTOTUNE",
    "AutoShardPolicy",
    "AutotuneAlgorithm",
    "AutotuneOptions",
    "Counter",
    "CsvDataset",
    "DatasetInitializer",
    "DistributeOptions",
    "ExternalStatePolicy",
    "INFINITE_CARDINALITY",
    "OptimizationOptions",
    "Optional",
    "OptionalStructure",
    "RandomDataset",
    "Reducer",
    "SHARD_HINT",
    "ServiceOptions",
    "SqlDataset",
    "TFRecordWriter",
    "ThreadingOptions",
    "UNKNOWN_CARDINALITY",
    "assert_cardinality",
    "bucket_by_sequence_length",
    "cardinality",
    "choose_from_datasets",
    "copy_to_device",
    "dense_to_ragged_batch",
    "dense_to_sparse_batch",
    "enable_debug_mode",
    "enumerate_dataset",
    "from_list",
    "from_variant",
    "get_model_proto",
    "get_next_as_optional",
    "get_single_element",
    "group_by_reducer",
    "group_by_window",
    "ignore_errors",
    "index_table_from_dataset",
    "make_batched_features_dataset",
    "make_csv_dataset",
    "make_saveable_from_iterator",
    "map_and_batch",
    "map_and_batch_with_legacy_function",
    "parallel_interleave",
    "pad_to_cardinality",
    "parse_example_dataset",
    "prefetch_to_device",
    "sample_from_datasets",
    "rejection_resample",
    "save",
    "load",
    "scan",
    "snapshot",
    "shuffle_and_repeat",
    "table_from_dataset",
    "take_while",
    "to_variant",
    "unbatch",
    "unique",
]


OptionalStructure = OptionalSpec  # TF1's name for tf.OptionalSpec


def save(dataset, path, compression=None, shard_func=None, checkpoint_args=None):
    """`tf.data.experimental.save`: `dataset.save(...)` (the SaveDataset op)."""
    return dataset.save(path, compression, shard_func, checkpoint_args)


def distributed_save(dataset, path, data_service_address, compression="AUTO"):
    """`tf.data.experimental.distributed_save`: the DistributedSave op, which hands the
    dataset to the tf.data service dispatcher at `data_service_address` (asyncflow runs
    none: the op's run is an UnavailableError; TF's waits for a dispatcher)."""
    if not isinstance(data_service_address, str):
        raise ValueError(
            "`data_service_address` must be a string, but is a "
            f"{type(data_service_address)} ({data_service_address}"
        )
    if not data_service_address:
        raise ValueError("`data_service_address` must not be empty")
    inputs = [dataset._variant, ops.convert_to_tensor(path, dtypes.string),
              ops.convert_to_tensor(data_service_address, dtypes.string)]  # fmt: skip
    return ops.apply_op("DistributedSave", inputs, {}, name="DistributedSave")


def load(path, element_spec=None, compression=None, reader_func=None):
    """`tf.data.experimental.load`: `Dataset.load(...)`."""
    return Dataset.load(path, element_spec, compression, reader_func)


def snapshot(path, compression="AUTO", reader_func=None, shard_func=None):
    """`ds.apply(snapshot(path))` is `ds.snapshot(path, ...)`."""

    def apply(ds: Dataset) -> Dataset:
        return ds.snapshot(path, compression, reader_func, shard_func)

    return apply


def rejection_resample(class_func, target_dist, initial_dist=None, seed=None):
    """`ds.apply(rejection_resample(...))`: (class, element) pairs whose classes follow
    `target_dist` (Dataset.rejection_resample)."""

    def apply(ds: Dataset) -> Dataset:
        return ds.rejection_resample(class_func, target_dist, initial_dist, seed)

    return apply


def map_and_batch(
    map_func, batch_size, num_parallel_batches=None, drop_remainder=False, num_parallel_calls=None
):
    """`ds.apply(map_and_batch(f, n))`: the elements of `ds.map(f).batch(n,
    drop_remainder)` by TF's MapAndBatchDataset, a map fused into its batch whatever
    the options (a failed element fails its whole batch).  Its calls in parallel are
    `num_parallel_calls`, else `batch_size` times `num_parallel_batches` (1 unset).

    Raises:
      ValueError: both `num_parallel_batches` and `num_parallel_calls` are set.
    """
    if num_parallel_calls is None:
        n = batch_size if num_parallel_batches is None else batch_size * num_parallel_batches
    elif num_parallel_batches is None:
        n = num_parallel_calls
    else:
        raise ValueError(
            "`map_and_batch` allows only one of `num_parallel_batches` and "
            "`num_parallel_calls` to be set, but "
            f"`num_parallel_batches` was set to {num_parallel_batches} "
            f"and `num_parallel_calls` as set to {num_parallel_calls}."
        )

    def apply(ds: Dataset) -> Dataset:
        return ds._map_and_batch(map_func, batch_size, n, drop_remainder)

    return apply


def parallel_interleave(
    map_func,
    cycle_length,
    block_length=1,
    sloppy=False,
    buffer_output_elements=None,
    prefetch_input_elements=None,
):
    # (a parallel interleave, as TF's LegacyParallelInterleaveDatasetV2: a failed element
    # moves through the cycle as in Dataset.interleave's with num_parallel_calls)
    def apply(ds: Dataset) -> Dataset:
        return ds.interleave(
            map_func, cycle_length, block_length, cycle_length, deterministic=not sloppy
        )

    return apply


def shuffle_and_repeat(buffer_size, count=None, seed=None):
    """`count` epochs (for ever where None or -1) of the input shuffled with a
    `buffer_size` buffer, reshuffled each epoch: TF's ShuffleAndRepeatDataset, whose
    order is that of `shuffle(buffer_size, seed).repeat(count)`.

    Raises (when the iterator starts):
      InvalidArgumentError: buffer_size <= 0, or count 0 or below -1.
    """

    def apply(ds: Dataset) -> Dataset:
        size = ops.convert_to_tensor(buffer_size, dtype=dtypes.int64, name="buffer_size")
        epochs = ops.convert_to_tensor(
            -1 if count is None else count, dtype=dtypes.int64, name="count"
        )
        seed1, seed2 = _seed_tensors(seed)
        return ds._then(
            "ShuffleAndRepeatDataset",
            [ds._variant, size, seed1, seed2, epochs],
            attrs={"reshuffle_each_iteration": True},
        )

    return apply


def unbatch():
    return lambda ds: ds.unbatch()


# -- transformations and functions of TF 2.21's tf.compat.v1.data.experimental -------------


def unique():
    return lambda ds: ds.unique()


def scan(initial_state, scan_func):
    return lambda ds: ds.scan(initial_state, scan_func)


def take_while(predicate):
    return lambda ds: ds.take_while(predicate)


def group_by_window(key_func, reduce_func, window_size=None, window_size_func=None):
    return lambda ds: ds.group_by_window(key_func, reduce_func, window_size, window_size_func)


def enumerate_dataset(start=0):
    return lambda ds: ds.enumerate(start)


def get_single_element(dataset):
    return dataset.get_single_element()


def cardinality(dataset):
    return dataset.cardinality()


def ignore_errors(log_warning=False):
    """Elements whose computation failed are dropped (see ops/dataset_more.IgnoreErrors)."""
    return lambda ds: ds.ignore_errors(log_warning)


def parse_example_dataset(features, num_parallel_calls=1, deterministic=None):
    """`ds.apply(parse_example_dataset(features))`: each element (a batch of serialized
    Examples) parsed as tf.io.parse_example does: a dict of Tensors and SparseTensors."""
    from asyncflow.ops import parsing_ops

    def apply(ds: Dataset) -> Dataset:
        n = None if num_parallel_calls in (None, 1) else num_parallel_calls
        return ds.map(lambda serialized: parsing_ops.parse_example(serialized, features), n)

    return apply


def make_batched_features_dataset(
    file_pattern,
    batch_size,
    features,
    reader=None,
    label_key=None,
    reader_args=None,
    num_epochs=None,
    shuffle=True,
    shuffle_buffer_size=10000,
    shuffle_seed=None,
    prefetch_buffer_size=None,
    reader_num_threads=None,
    parser_num_threads=None,
    sloppy_ordering=False,
    drop_final_batch=False,
):
    """Batches of parsed Examples from the files `file_pattern` matches (TFRecord
    files unless `reader` says otherwise): a dict of features, or (features, label)
    with `label_key`.  num_epochs None repeats forever.

    Raises:
      ValueError: `label_key` is not one of `features`.
    """
    from asyncflow.data.dataset import TFRecordDataset

    if label_key is not None and label_key not in features:
        raise ValueError(
            f"The `label_key` provided ({label_key}) must be one of the `features` keys."
        )
    reader = reader or TFRecordDataset
    files = Dataset.list_files(file_pattern, shuffle=shuffle, seed=shuffle_seed)
    ds = files.interleave(
        lambda f: reader(f, *(reader_args or [])), cycle_length=reader_num_threads or 1
    )
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, seed=shuffle_seed)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size, drop_remainder=drop_final_batch)
    ds = ds.apply(parse_example_dataset(features, parser_num_threads or 1))
    if label_key is not None:
        ds = ds.map(lambda d: (d, d.pop(label_key)))
    return ds.prefetch(AUTOTUNE if prefetch_buffer_size is None else prefetch_buffer_size)


class TFRecordWriter:
    """`TFRecordWriter(filename).write(dataset)`: an op writing each element of a
    dataset of scalar strings as one record of a TFRecord file."""

    def __init__(self, filename, compression_type=None):
        self._filename = ops.convert_to_tensor(filename, dtype=dtypes.string, name="filename")
        self._compression = ops.convert_to_tensor(compression_type or "", dtype=dtypes.string)

    def write(self, dataset):
        specs = dataset._flat_specs()
        if (
            len(specs) != 1
            or specs[0].dtype != dtypes.string
            or specs[0].shape.ndims not in (0, None)
        ):
            raise TypeError(
                "`dataset` must produce scalar `DT_STRING` tensors whereas it produces "
                f"shape {dataset.output_shapes} and types {dataset.output_types}"
            )
        return ops.apply_op(
            "DatasetToTFRecord",
            [dataset._variant, self._filename, self._compression],
            {},
            name="DatasetToTFRecord",
        )


def assert_cardinality(expected_cardinality):
    """The input unchanged, with a FailedPreconditionError when a pass finds more or
    fewer elements than `expected_cardinality` (which `cardinality` then reports)."""

    def apply(ds: Dataset) -> Dataset:
        n = ops.convert_to_tensor(expected_cardinality, dtype=dtypes.int64, name="cardinality")
        return ds._then("AssertCardinalityDataset", [ds._variant, n])

    return apply


def RandomDataset(seed=None, rerandomize_each_iteration=None, name=None):  # noqa: N802 - TF's name (a class there)
    return Dataset.random(seed, rerandomize_each_iteration, name)


class Reducer:
    """group_by_reducer's functions: init_func(key) -> state, reduce_func(state,
    element) -> state, finalize_func(state) -> output."""

    def __init__(self, init_func, reduce_func, finalize_func):
        self.init_func = init_func
        self.reduce_func = reduce_func
        self.finalize_func = finalize_func


def group_by_reducer(key_func, reducer):
    """One output per key (in the order keys first appear): the finalized state of
    the key's elements reduced from its initial state."""
    from asyncflow.data.dataset import _at_least_one, _structure_of, _Traced
    from asyncflow.data.structure import _flat, _Spec
    from asyncflow.ops import dataset_more

    def apply(ds: Dataset) -> Dataset:
        key = _Traced(key_func, ds._structure, "key_func")
        if (len(key.outputs) != 1 or key.outputs[0].dtype != dtypes.int64
                or key.outputs[0].shape.ndims not in (0, None)):  # fmt: skip
            raise ValueError("`key_func` must return a single tf.int64 scalar tensor.")
        init = _Traced(reducer.init_func, _Spec(dtypes.int64, []), "init_func")
        state = _structure_of(init.structure)
        red = _Traced(
            lambda s, *x: reducer.reduce_func(s, *x), (state, ds._structure), "reduce_func"
        )
        if [t.dtype for t in red.outputs] != [t.dtype for t in init.outputs]:
            raise TypeError(
                "The element types for the new state must match the initial state. "
                f"Expected {[t.dtype.name for t in init.outputs]}; got "
                f"{[t.dtype.name for t in red.outputs]}."
            )
        fin = _Traced(reducer.finalize_func, state, "finalize_func")
        structure = _structure_of(fin.structure)
        _at_least_one("ExperimentalGroupByReducerDataset", "output_types", _flat(structure))
        fns = (("key", key), ("init", init), ("reduce", red), ("finalize", fin))
        attrs = {}
        for prefix, t in fns:
            attrs.update(dataset_more.function_attrs(prefix, t.inputs, t.fetches, t.captures))
        return ds._then(
            "GroupByReducerDataset",
            [ds._variant, *(t.captures for _, t in fns)],
            structure,
            attrs,
        )

    return apply


def dense_to_sparse_batch(batch_size, row_shape):
    """Batches of `batch_size` elements (dense, each at most `row_shape`) as one
    SparseTensor of dense shape [batch, *row_shape]."""
    return lambda ds: ds.sparse_batch(batch_size, row_shape)


def from_list(elements, name=None) -> Dataset:
    """A dataset of the given elements (each the same structure), in order."""
    from asyncflow import nest

    elements = list(elements)
    if not elements:
        raise ValueError("Invalid `elements`. `elements` should not be empty.")
    first = elements[0]
    flat = [nest.flatten(e) if isinstance(e, (tuple, dict)) else [e] for e in elements]
    if any(len(f) != len(flat[0]) for f in flat):
        raise ValueError("All elements of `elements` must have the same structure.")
    # (a column as a list: TF's conversion of its values, Python ints to int32 ...)
    columns = [ops.convert_to_tensor([f[k] for f in flat]) for k in range(len(flat[0]))]
    if isinstance(first, (tuple, dict)):
        return Dataset.from_tensor_slices(nest.pack_sequence_as(first, columns))
    return Dataset.from_tensor_slices(columns[0])


def prefetch_to_device(device, buffer_size=None):
    """Prefetch `buffer_size` (default 1) elements; the elements are host arrays, which
    every device here reads (a device kernel's inputs are copied as it runs)."""
    return lambda ds: ds.prefetch(1 if buffer_size is None else buffer_size)


def copy_to_device(target_device, source_device="/cpu:0"):
    """The input unchanged (elements are host arrays; see prefetch_to_device)."""
    return lambda ds: ds


SHARD_HINT = -1  # (Dataset.shard's num_shards/index under AutoShardPolicy.HINT)


def enable_debug_mode() -> None:
    """TF: run tf.data functions eagerly for debugging.  Here every pipeline stage
    already runs in order on the session's loop; nothing to switch."""


def map_and_batch_with_legacy_function(
    map_func, batch_size, num_parallel_batches=None, drop_remainder=False, num_parallel_calls=None
):
    return map_and_batch(
        map_func, batch_size, num_parallel_batches, drop_remainder, num_parallel_calls
    )


class DatasetInitializer:
    """A table initializer reading (key, value) elements of `dataset`
    (InitializeTableFromDataset)."""

    def __init__(self, dataset):
        specs = dataset._flat_specs()
        if len(specs) != 2:
            raise ValueError(
                "The dataset of a DatasetInitializer must have (key, value) elements, got "
                f"{dataset.output_types}."
            )
        self.dataset = dataset
        self.key_dtype, self.value_dtype = specs[0].dtype, specs[1].dtype

    def initialize(self, table):
        op = ops.apply_op(
            "InitializeTableFromDataset",
            [table.resource_handle, self.dataset._variant],
            {},
            name="InitializeTableFromDataset",
        )
        ops.add_to_collection(ops.GraphKeys.TABLE_INITIALIZERS, op)
        return op


def table_from_dataset(
    dataset=None,
    num_oov_buckets=0,
    vocab_size=None,
    default_value=None,
    hasher_spec=None,
    key_dtype=None,
    name=None,
):
    """A lookup table of the (key, value) elements of `dataset` (the first
    `vocab_size`); with num_oov_buckets, a StaticVocabularyTable (int64 values)."""
    from asyncflow import lookup

    if vocab_size is not None:
        dataset = dataset.take(vocab_size)
    init = DatasetInitializer(dataset)
    if num_oov_buckets:
        return lookup.StaticVocabularyTable(
            init, num_oov_buckets, lookup_key_dtype=key_dtype, name=name
        )
    if default_value is None:
        raise ValueError("`default_value` must be given when there are no OOV buckets.")
    return lookup.StaticHashTable(init, default_value, name=name)


def index_table_from_dataset(
    dataset=None,
    num_oov_buckets=0,
    vocab_size=None,
    default_value=-1,
    hasher_spec=None,
    key_dtype=None,
    name=None,
):
    """A table mapping each key of `dataset` to its position (int64), unknown keys to
    `default_value` or, with num_oov_buckets, to a hash bucket after the vocabulary."""
    from asyncflow.ops import cast_ops

    indexed = dataset.enumerate().map(lambda i, k: (k, cast_ops.cast(i, dtypes.int64)))
    return table_from_dataset(
        indexed, num_oov_buckets, vocab_size, default_value, hasher_spec, key_dtype, name
    )
