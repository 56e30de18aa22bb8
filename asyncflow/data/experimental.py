"""`af.data.experimental`: the transformations TF1 programs take from it."""

from __future__ import annotations

from asyncflow.data.dataset import AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset

__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "map_and_batch",
    "parallel_interleave",
    "shuffle_and_repeat",
    "unbatch",
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
