"""Input for a strategy's replicas: a dataset's batches handed out one part per replica.

`experimental_distribute_dataset` (and `make_dataset_iterator`) split every global batch
into one slice per replica, of ceil(batch / replicas) rows each (the last slices may be
shorter, as TF's rebatching).  `make_input_fn_iterator` gives each replica one element of
the input function's dataset in turn, replica 0 first; a step that cannot give every
replica an element ends the input (OutOfRangeError), as TF's.  One iterator on the host
reads the dataset; each replica's part is cut on that replica's device.
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.distribute import values as values_lib
from asyncflow.nest import map_structure

__all__ = ["DatasetIterator", "DistributedDataset"]


def _split_batch(strategy, element) -> values_lib.PerReplica:
    from asyncflow.ops import array_ops, math_ops

    devices = strategy.extended.worker_devices
    n = len(devices)
    parts = []
    for i, device in enumerate(devices):
        with ops.device(device):

            def cut(t, i=i):
                rows = array_ops.shape(t, out_type="int64")[0]
                size = math_ops.floordiv(rows + (n - 1), n)
                return t[size * i : size * (i + 1)]

            parts.append(map_structure(cut, element))
    return values_lib.regroup(parts)


def _one_element_each(strategy, element) -> values_lib.PerReplica:
    devices = strategy.extended.worker_devices
    parts = []
    for i, device in enumerate(devices):
        with ops.device(device):
            parts.append(map_structure(lambda t, i=i: t[i], element))
    return values_lib.regroup(parts)


class DatasetIterator:
    """An iterator whose `get_next()` is a PerReplica (one part per replica)."""

    def __init__(self, strategy, iterator, split):
        self._strategy = strategy
        self._iterator = iterator
        self._split = split

    @property
    def initializer(self):
        return self._iterator.initializer

    def initialize(self) -> list:
        """The ops that (re)start the input, as a list (TF's)."""
        return [self._iterator.initializer]

    def get_next(self, name=None):
        with ops.device(self._strategy.extended._host_device):
            element = self._iterator.get_next(name=name)
        return self._split(self._strategy, element)

    @property
    def output_types(self):
        return self._iterator.output_types

    @property
    def output_shapes(self):
        return self._iterator.output_shapes

    @property
    def output_classes(self):
        return self._iterator.output_classes

    @property
    def element_spec(self):
        return self._iterator.element_spec


class DistributedDataset:
    """A dataset made for a strategy (`strategy.experimental_distribute_dataset`)."""

    def __init__(self, strategy, dataset, split=_split_batch):
        self._strategy = strategy
        self._dataset = dataset
        self._split = split

    def make_initializable_iterator(self) -> DatasetIterator:
        with ops.device(self._strategy.extended._host_device):
            it = self._dataset.make_initializable_iterator()
        return DatasetIterator(self._strategy, it, self._split)

    def make_one_shot_iterator(self) -> DatasetIterator:
        with ops.device(self._strategy.extended._host_device):
            it = self._dataset.make_one_shot_iterator()
        return DatasetIterator(self._strategy, it, self._split)

    @property
    def element_spec(self):
        return self._dataset.element_spec


def input_fn_dataset(strategy, dataset) -> DistributedDataset:
    """The input function's dataset, `num_replicas` consecutive elements per step."""
    n = strategy.num_replicas_in_sync
    return DistributedDataset(strategy, dataset.batch(n, drop_remainder=True), _one_element_each)
