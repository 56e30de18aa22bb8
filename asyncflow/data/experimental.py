"""`af.data.experimental`: the transformations TF1 programs take from it."""

from __future__ import annotations

from asyncflow.data.csv_dataset import CsvDataset, make_csv_dataset
from asyncflow.data.dataset import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Counter,
    Dataset,
    bucket_by_sequence_length,
    choose_from_datasets,
    sample_from_datasets,
)

__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "Counter",
    "CsvDataset",
    "bucket_by_sequence_length",
    "cardinality",
    "choose_from_datasets",
    "enumerate_dataset",
    "get_single_element",
    "group_by_window",
    "ignore_errors",
    "make_csv_dataset",
    "map_and_batch",
    "parallel_interleave",
    "sample_from_datasets",
    "scan",
    "shuffle_and_repeat",
    "take_while",
    "unbatch",
    "unique",
]


def map_and_batch(
    map_func, batch_size, num_parallel_batches=None, drop_remainder=False, num_parallel_calls=None
):
    """`ds.apply(map_and_batch(f, n))` is `ds.map(f, ...).batch(n, drop_remainder)`."""

    def apply(ds: Dataset) -> Dataset:
        return ds.map(map_func, num_parallel_calls).batch(batch_size, drop_remainder)

    return apply


def parallel_interleave(
    map_func,
    cycle_length,
    block_length=1,
    sloppy=False,
    buffer_output_elements=None,
    prefetch_input_elements=None,
):
    def apply(ds: Dataset) -> Dataset:
        return ds.interleave(map_func, cycle_length, block_length)

    return apply


def shuffle_and_repeat(buffer_size, count=None, seed=None):
    def apply(ds: Dataset) -> Dataset:
        return ds.shuffle(buffer_size, seed).repeat(count)

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
