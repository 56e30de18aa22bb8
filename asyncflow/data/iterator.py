"""`tf.data.Iterator`: a resource handing out a dataset's elements, one `get_next` at a time."""

from __future__ import annotations

from asyncflow import dtypes, nest, tensor_shape
from asyncflow import graph as ops
from asyncflow.data.one_shot import check_capturable
from asyncflow.data.optional import Optional, element_spec_of
from asyncflow.data.structure import (
    _component_attrs,
    _flat,
    _from_components,
    _pack,
    _SparseSpec,
    _Spec,
)
from asyncflow.sparse_tensor import SparseTensor

__all__ = [
    "Iterator",
    "make_one_shot_iterator",
    "make_initializable_iterator",
    "get_output_types",
    "get_output_shapes",
    "get_output_classes",
]


class Iterator:
    """TF1's graph-mode iterator.

    `get_next()` returns the next element's tensors; running them raises
    `FailedPreconditionError` before the iterator is initialized and
    `OutOfRangeError` after the last element."""

    def __init__(self, iterator_resource, initializer, structure):
        self._resource = iterator_resource
        self._initializer = initializer
        self._structure = structure
        # TF's GLOBAL_ITERATORS: every iterator's resource, kept in meta graphs.
        iterator_resource.graph.add_to_collection("iterators", iterator_resource)
        # TF makes every iterator's string handle when it makes the iterator (its op
        # names count from there) and hands the same tensor out each time.
        with iterator_resource.graph.as_default():
            self._string_handle = ops.apply_op(
                "IteratorToStringHandle", [iterator_resource], {}, name="IteratorToStringHandle"
            ).outputs[0]

    @staticmethod
    def from_structure(
        output_types, output_shapes=None, shared_name=None, output_classes=None
    ) -> Iterator:
        """An iterator not yet bound to a dataset: `make_initializer(ds)` binds one."""
        structure = _structure(output_types, output_shapes, output_classes)
        return Iterator(_iterator_v2(structure, shared_name), None, structure)

    @staticmethod
    def _initializable(dataset, shared_name=None) -> Iterator:
        """`dataset.make_initializable_iterator()`: as TF, its IteratorV2, MakeIterator
        and string handle (in that order) colocated with the dataset."""
        structure = _structure(dataset.output_types, dataset.output_shapes, dataset.output_classes)
        with ops.colocate_with(dataset._variant.op):
            handle = _iterator_v2(structure, shared_name)
            init = ops.apply_op(
                "MakeIterator",
                [dataset._variant, handle],
                {"output_types": _attrs(structure)["output_types"]},
                name="MakeIterator",
            )
            return Iterator(handle, init, structure)

    @staticmethod
    def _one_shot(dataset) -> Iterator:
        check_capturable(dataset._variant.op)  # (TF's ValueError, before any op is made)
        attrs = _attrs(dataset._structure)
        attrs["container"] = getattr(ops.get_default_graph(), "_container", "") or ""
        with ops.colocate_with(dataset._variant.op):  # (TF's, its string handle too)
            handle = ops.apply_op(
                "OneShotIterator", [dataset._variant], attrs, name="OneShotIterator"
            ).outputs[0]
            return Iterator(handle, None, dataset._structure)

    @property
    def initializer(self) -> ops.Operation:
        if self._initializer is None:
            raise ValueError("Iterator does not have an initializer.")
        return self._initializer

    def make_initializer(self, dataset, name=None) -> ops.Operation:
        """An op that starts a new pass of this iterator over `dataset`.

        Raises:
          TypeError: the dataset's element types differ from the iterator's.
        """
        mine = [(s.dtype, type(s)) for s in _flat(self._structure)]
        theirs = [(s.dtype, type(s)) for s in _flat(dataset._structure)]
        if mine != theirs:
            raise TypeError(
                f"Expected output types {self.output_types} but got dataset with "
                f"output types {dataset.output_types}."
            )
        for a, b in zip(_flat(self._structure), _flat(dataset._structure)):
            if not a.shape.is_compatible_with(b.shape):
                raise TypeError(
                    f"Expected output shapes compatible with {self.output_shapes} "
                    f"but got dataset with output shapes {dataset.output_shapes}."
                )
        with ops.name_scope(name, "make_initializer") as scope:
            return self._make_iterator(dataset, scope)  # (the op is named as the scope, TF's)

    def _make_iterator(self, dataset, name) -> ops.Operation:
        with ops.colocate_with(self._resource.op):  # (TF's)
            return ops.apply_op(
                "MakeIterator",
                [dataset._variant, self._resource],
                {"output_types": _attrs(self._structure)["output_types"]},
                name=name,
            )

    def get_next(self, name=None):
        """The next element's tensors, structured as the dataset's elements."""
        with ops.colocate_with(self._resource.op):  # (TF's)
            outs = ops.apply_op(
                "IteratorGetNext",
                [self._resource],
                _attrs(self._structure),
                name=name or "IteratorGetNext",
            ).outputs
        return _from_components(self._structure, list(outs))

    def get_next_as_optional(self):
        """The next element as a `tf.data.experimental.Optional`, empty at the end of the
        data (IteratorGetNextAsOptional) instead of raising OutOfRangeError."""
        with ops.colocate_with(self._resource.op):  # (TF's)
            handle = ops.apply_op(
                "IteratorGetNextAsOptional",
                [self._resource],
                _attrs(self._structure),
                name="IteratorGetNextAsOptional",
            ).outputs[0]
        return Optional(handle, element_spec_of(self._structure))

    def string_handle(self, name=None):
        """A string naming this iterator, to feed an iterator made by
        `Iterator.from_string_handle` (TF1's feedable iterator)."""
        if name is None:
            return self._string_handle
        return ops.apply_op("IteratorToStringHandle", [self._resource], {}, name=name).outputs[0]

    @staticmethod
    def from_string_handle(
        string_handle, output_types, output_shapes=None, output_classes=None
    ) -> Iterator:
        """An iterator whose `get_next` reads the iterator named by the (fed) string
        handle: one graph switching between datasets per step.

        Raises:
          NotFoundError / InvalidArgumentError (at run time): an unknown handle or one of
            an iterator with other element types.
        """
        structure = _structure(output_types, output_shapes, output_classes)
        h = ops.convert_to_tensor(string_handle, dtype=dtypes.string)
        res = ops.apply_op("IteratorFromStringHandleV2", [h], _attrs(structure)).outputs[0]
        return Iterator(res, None, structure)

    def _map_specs(self, f):
        return _pack(self._structure, [f(s) for s in _flat(self._structure)])

    @property
    def output_types(self):
        return self._map_specs(lambda s: s.dtype)

    @property
    def output_shapes(self):
        return self._map_specs(lambda s: s.shape)

    @property
    def output_classes(self):
        return self._map_specs(
            lambda s: SparseTensor if isinstance(s, _SparseSpec) else ops.Tensor
        )


def _structure(output_types, output_shapes, output_classes):
    """The element structure the three TF1 descriptions give (classes: Tensor or
    SparseTensor per component; None: all Tensor)."""
    types = nest.map_structure(dtypes.as_dtype, output_types)
    flat_t = _flat(types)
    if output_shapes is None:
        flat_s = [tensor_shape.unknown_shape() for _ in flat_t]
    else:
        flat_s = [tensor_shape.as_shape(s) for s in _flat_like_types(types, output_shapes)]
    if output_classes is None:
        flat_c = [ops.Tensor] * len(flat_t)
    else:
        flat_c = _flat_like_types(types, output_classes)
    return _pack(
        types,
        [
            (_SparseSpec if c is SparseTensor else _Spec)(t, s)
            for t, s, c in zip(flat_t, flat_s, flat_c)
        ],
    )


def _flat_like_types(types, shapes) -> list:
    if isinstance(types, (tuple, dict)):
        return nest.flatten(shapes) if isinstance(shapes, (tuple, dict)) else [shapes]
    return [shapes]


def _attrs(structure) -> dict:
    return _component_attrs(structure)


def _iterator_v2(structure, shared_name):
    """An IteratorV2 resource of elements `structure`."""
    attrs = _attrs(structure)
    attrs["shared_name"] = shared_name or ""
    attrs["container"] = getattr(ops.get_default_graph(), "_container", "") or ""
    return ops.apply_op("IteratorV2", [], attrs).outputs[0]


def make_one_shot_iterator(dataset) -> Iterator:
    return dataset.make_one_shot_iterator()


def make_initializable_iterator(dataset, shared_name=None) -> Iterator:
    return dataset.make_initializable_iterator(shared_name)


def get_output_types(dataset_or_iterator):
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator):
    return dataset_or_iterator.output_shapes


def get_output_classes(dataset_or_iterator):
    return dataset_or_iterator.output_classes
