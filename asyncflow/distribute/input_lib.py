"""Input for a strategy's replicas: a dataset's batches handed out one part per replica.

`experimental_distribute_dataset` (and `make_dataset_iterator`) split every global batch
into one slice per replica, of ceil(batch / replicas) rows each (the last slices may be
shorter, as TF's rebatching): one iterator on the host reads the dataset, and each
replica's slice is cut on that replica's device.  `make_input_fn_iterator` (and
`distribute_datasets_from_function`) give each replica one element of the input
function's dataset in turn, replica 0 first, through one host iterator per replica over
every n-th element; a step that cannot give every replica an element ends the input
(OutOfRangeError), as TF's.
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


class _RoundRobinIterator:
    """One iterator per replica over every n-th element (replica i: elements i, i + n,
    ...), so each step gives the replicas consecutive elements, whatever their shapes."""

    def __init__(self, strategy, iterators):
        from asyncflow.ops import control_flow_ordering

        self._strategy = strategy
        self._iterators = iterators
        self._initializer = control_flow_ordering.group(*[it.initializer for it in iterators])

    @property
    def initializer(self):
        return self._initializer

    def initialize(self) -> list:
        return [self.initializer]

    def get_next(self, name=None):
        from asyncflow.ops import array_ops

        devices = self._strategy.extended.worker_devices
        parts = []
        for it, device in zip(self._iterators, devices, strict=True):
            with ops.device(self._strategy.extended._host_device):
                element = it.get_next(name=name)
            with ops.device(device):
                parts.append(map_structure(array_ops.identity, element))
        return values_lib.regroup(parts)

    output_types = property(lambda self: self._iterators[0].output_types)
    output_shapes = property(lambda self: self._iterators[0].output_shapes)
    output_classes = property(lambda self: self._iterators[0].output_classes)
    element_spec = property(lambda self: self._iterators[0].element_spec)


class _RoundRobinDataset:
    """The input function's dataset, handed to the replicas one element each in turn."""

    def __init__(self, strategy, dataset):
        self._strategy = strategy
        self._dataset = dataset

    def _iterator(self, make) -> _RoundRobinIterator:
        # This process's replicas (a multi-worker strategy's other workers read their
        # own pipelines).
        n = len(self._strategy.extended._devices)
        with ops.device(self._strategy.extended._host_device):
            its = [make(self._dataset.shard(n, i)) for i in range(n)]
        return _RoundRobinIterator(self._strategy, its)

    def make_initializable_iterator(self) -> _RoundRobinIterator:
        return self._iterator(lambda d: d.make_initializable_iterator())

    def make_one_shot_iterator(self) -> _RoundRobinIterator:
        return self._iterator(lambda d: d.make_one_shot_iterator())

    @property
    def element_spec(self):
        return self._dataset.element_spec


def input_fn_dataset(strategy, dataset) -> _RoundRobinDataset:
    """The input function's dataset, one element per replica per step."""
    return _RoundRobinDataset(strategy, dataset)
