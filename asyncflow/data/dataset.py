"""`tf.data.Dataset` (TF1's graph-mode API): each transformation adds one dataset op.

A `Dataset` is a handle tensor plus the structure of its elements (nested tuples,
dicts and namedtuples of components, each with a dtype and a static shape).  Functions
given to `map`, `filter`, `flat_map` and `interleave` are traced once into the graph
(ops/dataset_ops.py says how they run).  Lists become tensors and tuples structures, as
in TF 2.x's `tf.compat.v1`.

The `name=` keyword TF 2 gives every source and transformation labels the step inside
TF's tf.data metadata attr (for its debugging tools); asyncflow's dataset ops carry no
such attr, so it is accepted for TF's signatures and has no effect.
"""

from __future__ import annotations

import itertools
import os

import numpy as np

from asyncflow import dtypes, nest, random_seed, tensor_shape, variables
from asyncflow import graph as ops
from asyncflow.data import autodeps, extension_elements, one_shot, ragged_batch, resampling, saving
from asyncflow.data.structure import (
    _component_attrs,
    _DatasetSpec,
    _ExtensionSpec,
    _flat,
    _from_components,
    _pack,
    _RaggedSpec,
    _respec,
    _SparseSpec,
    _Spec,
    _to_components,
)
from asyncflow.ops import (
    array_ops,
    dataset_more,
    dataset_ops,
    dataset_raw_extra,  # noqa: F401 - registers the other versions of ops
    dataset_raw_more,  # noqa: F401 - registers the other versions of ops
    math_ops,
    partition_ops,
)
from asyncflow.proto_wire import length_delimited
from asyncflow.ragged import RaggedTensor
from asyncflow.sparse_tensor import SparseTensor, SparseTensorValue

__all__ = ["Dataset", "AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY"]

AUTOTUNE = -1
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2
_tokens = itertools.count()


def _schedulable_cpus() -> int:
    """TF's default parallelism for tf.data: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # (no affinity call on this OS)
        return os.cpu_count() or 1


def _normalize(value, count=None):
    """TF's element normalization: tuples, dicts, namedtuples nest; the rest are tensors.
    With `count` (an iterator of indices), each component's constant is named
    `component_<i>`, i its index in TF's flattened order (dict keys sorted)."""
    if isinstance(value, Dataset | SparseTensor | RaggedTensor):
        return value if count is None else _counted(count, value)
    if hasattr(value, "_tf_extension_type_fields"):  # an ExtensionType value
        return value if count is None else _counted(count, value)
    if isinstance(value, SparseTensorValue):
        return SparseTensor.from_value(value) if count is None else _counted(count, value)
    if isinstance(value, dict):  # (an OrderedDict stays one, as TF's elements)
        try:
            keys = sorted(value)
        except TypeError:
            keys = list(value)
        done = {k: _normalize(value[k], count) for k in keys}
        return type(value)((k, done[k]) for k in value)
    if isinstance(value, tuple):
        items = [_normalize(v, count) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if count is None:
        return ops.convert_to_tensor(value)
    return ops.convert_to_tensor(value, name=f"component_{next(count)}")


def _is_autotune(value) -> bool:
    """Whether `value` is the Python AUTOTUNE (-1), as TF's `buffer_size == AUTOTUNE`
    (a tensor never is)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and value == -1


def _counted(count, value):
    next(count)
    if isinstance(value, SparseTensorValue):
        return SparseTensor.from_value(value)
    return value


def _normalize_element(value):
    """`_normalize` as TF's `normalize_element` (from_tensors, from_tensor_slices):
    its constants `normalize_element/component_<i>`."""
    with ops.name_scope("normalize_element"):
        return _normalize(value, itertools.count())


def _at_least_one(op_type: str, attr: str, values) -> None:
    """TF's dataset ops take at least one component (an element, a state): a function
    returning none (`()`, `None`) is TF's ValueError as the op is made.

    Raises:
      ValueError: `values` is empty.
    """
    if not values:
        raise ValueError(
            f"Attr '{attr}' of '{op_type}' Op passed list of length 0 less than minimum 1."
        )


def _structure_of(value):
    """The _Spec structure of a normalized value (tensors, SparseTensors)."""
    return _pack(value, [_spec_of(t) for t in _flat(value)])


def _legacy_type(spec: _Spec):
    if isinstance(spec, _ExtensionSpec):
        raise NotImplementedError(f"{type(spec.type_spec).__name__}._to_legacy_output_types()")
    return spec.dtype


def _legacy_shape(spec: _Spec):
    if isinstance(spec, _ExtensionSpec):
        if isinstance(getattr(type(spec.type_spec), "shape", None), property):
            return spec.type_spec.shape  # (a Spec's own shape property, as TF reads it)
        raise NotImplementedError(
            "It appears that the Spec of the ExtensionType is missing a shape property. In "
            "order to support tf.Data, it is recommended that you implement a shape property "
            "on the Spec."
        )
    return spec.shape


def _class_of(spec: _Spec):
    if isinstance(spec, _ExtensionSpec):
        return spec.type_spec.value_type
    if isinstance(spec, _SparseSpec):
        return SparseTensor
    return RaggedTensor if isinstance(spec, _RaggedSpec) else ops.Tensor


def _spec_of(t) -> _Spec:
    if hasattr(t, "_tf_extension_type_fields"):
        return _ExtensionSpec(t)
    if isinstance(t, RaggedTensor):
        return _RaggedSpec(t.dtype, t.shape, t.ragged_rank, t.row_splits.dtype)
    return (_SparseSpec if isinstance(t, SparseTensor) else _Spec)(t.dtype, t.shape)


class _Traced:
    """`fn` traced into the graph on argument placeholders (or, with `after`, on the
    results of an earlier traced function: two maps fused into one call)."""

    def __init__(self, fn, structure, name, after: _Traced | None = None):
        graph = ops.get_default_graph()
        first_id = graph.version
        first_op = len(graph._ops)
        with ops.name_scope(name), ops.control_dependencies(None):
            if after is None:
                self.first_id = first_id
                specs = _flat(structure)
                comp = _component_attrs(structure)
                self.inputs = [
                    array_ops.placeholder(t, sh, name=f"arg{i}")
                    for i, (t, sh) in enumerate(zip(comp["output_types"], comp["output_shapes"]))
                ]
                args = _from_components(
                    structure,
                    [
                        Dataset(p, s.structure) if isinstance(s, _DatasetSpec) else p
                        for p, s in zip(self.inputs, specs)
                    ],
                )
            else:
                self.inputs = after.inputs
                self.first_id = after.first_id
                args = after.structure
            with variables.dataset_function_scope(graph):  # (a Variable made: ValueError)
                out = fn(*args) if type(args) is tuple else fn(args)
            if type(out) is list:  # TF: a function's list of results is a tuple of them
                out = tuple(out)
            self.structure = out = _normalize(out)
            if isinstance(out, Dataset):
                self.outputs = [out._variant]
            else:
                self.outputs = _to_components(_flat(out))
            self._control_outputs(graph, first_op, after)
        # Its ops are the function's, but for those TF makes outside it (`_lifted`): an
        # unshared resource of the function's lasts a pass (kernel_api.kernel_resource).
        for op in graph._ops[first_op:]:
            if not getattr(op, "_lifted", False):
                op._in_dataset_function = True
        # The names of the ops of each earlier map fused into this call, first first: an
        # error of theirs is an earlier map's, not this one's (pl.Map's `_call`).
        own = frozenset(op.name for op in graph._ops[first_op:])
        self.earlier = () if after is None else (*after.earlier, after.own)
        self.own = own
        # The earlier map's results as this part reads them, where all are tensors: the
        # GraphDef writes this part apart, reading the earlier map's dataset, as TF's
        # maps are (asyncflow/dataset_functions.py's `_export_apart`)
        read = [] if after is None else _flat(after.structure)
        self.read = read if read and all(type(x) is ops.Tensor for x in read) else None
        # What each map fused into this call reads (None: not all tensors), first first:
        # TF's noop elimination drops a map passing on what it reads (ops/dataset_paths)
        self.reads = (list(self.inputs),) if after is None else (*after.reads, self.read)
        one_shot.note_traced(graph, first_id)  # (what a one-shot iterator may capture)
        self.captures = dataset_ops.function_captures(self.fetches, self.inputs, self.first_id)

    def _control_outputs(self, graph, first_op: int, after: _Traced | None) -> None:
        """TF's automatic control dependencies (data/autodeps.py): the function's
        stateful ops on one resource in creation order, and the results waiting for
        those no result depends on (with a fused earlier function's)."""
        own = {t.op for t in self.inputs}
        new = []
        for op in graph._ops[first_op:]:
            # (not those of a function traced inside this one: an inner map's)
            if getattr(op, "_lifted", False) or hasattr(op, "_traced_once"):
                continue
            op._traced_once = True
            if op not in own:
                new.append(op)
        autodeps.refuse_outer_refs(new, set(graph._ops[first_op:]))
        base = graph._control_flow_context  # (the function's top level)
        nest = autodeps.nesting(new, base)  # (its conds' and loops' results wait)
        autodeps.order_by_resource(new, nest, base)
        inner = set(graph._ops[first_op:])
        must = autodeps.control_outputs(new, self.outputs, inner, nest, base)
        if after is not None and after.control is not None:  # (after the earlier map's)
            autodeps.run_after(new, after.control, nest, base)
            must.insert(0, after.control)
        self.control = None  # (the NoOp the results wait for)
        if must:
            self.outputs, self.control = autodeps.wait_for(self.outputs, must, "control_outputs")

    @property
    def fetches(self) -> list:
        """What a call runs: the results; for a function with none (a group_by_reducer
        state of no component) whose control outputs must run, that NoOp, named in the
        op's `<prefix>_outputs` by its op name (ops/dataset_ops.py)."""
        if not self.outputs and self.control is not None:
            return [self.control]
        return self.outputs

    def op_inputs(self):
        return list(self.captures)

    def attrs(self):
        return dataset_ops.function_attrs(self.inputs, self.fetches, self.captures)


def _i64(v, name):
    return ops.convert_to_tensor(v, dtype=dtypes.int64, name=name)


def _seed_tensors(op_seed):
    """The (seed, seed2) tensors a dataset's random op takes (shuffle, shuffle_and_repeat,
    random), as TF's tf.data writes them: the graph-level rules of random_seed.get_seed,
    with seed2 chosen in the graph (2**31 - 1 where both are 0, since (0, 0) asks the
    kernel for fresh entropy) unless neither seed is set (two 0 constants)."""
    s1, s2 = random_seed.get_seed(op_seed)
    seed = _i64(0 if s1 is None else s1, "seed")
    if s2 is None:
        return seed, _i64(0, "seed2")
    with ops.name_scope("seed2") as scope:
        s2 = ops.convert_to_tensor(s2, dtype=dtypes.int64)
        both_zero = math_ops.logical_and(math_ops.equal(seed, 0), math_ops.equal(s2, 0))
        fallback = ops.convert_to_tensor(2**31 - 1, dtype=dtypes.int64)
        seed2 = ops.apply_op("SelectV2", [both_zero, fallback, s2], name=scope).outputs[0]
    return seed, seed2


def _det(deterministic) -> str:
    """A parallel op's `deterministic` attr as TF writes it."""
    return "default" if deterministic is None else str(bool(deterministic)).lower()


# The attrs TF 2.21 writes on every ParallelMapDatasetV2 (a v1 map's threads are never
# unbounded, whatever its use_unbounded_threadpool), but for `deterministic`.
_PARALLEL_MAP_ATTRS = {
    "use_inter_op_parallelism": True,
    "preserve_cardinality": False,
    "use_unbounded_threadpool": False,
}


class Dataset:
    """A sequence of elements, each a structure of tensors.

    Iterate it with `make_one_shot_iterator()`, `make_initializable_iterator()` or
    `Iterator.from_structure(...)`; `get_next()` raises `OutOfRangeError` at the end."""

    def __init__(self, variant: ops.Tensor, structure):
        self._variant = variant
        self._structure = structure
        self._map = None  # (input dataset, traced fn, num_parallel_calls) of a map

    # -- element structure
    def _flat_specs(self) -> list:
        return _flat(self._structure)

    def _out_attrs(self) -> dict:
        return _component_attrs(self._structure)

    def _map_specs(self, f):
        return _pack(self._structure, [f(s) for s in self._flat_specs()])

    @property
    def output_types(self):
        """TF1's element types.

        Raises:
          NotImplementedError: ExtensionType elements (TF's: their Specs have none).
        """
        return self._map_specs(_legacy_type)

    @property
    def output_shapes(self):
        """TF1's element shapes.

        Raises:
          NotImplementedError: ExtensionType elements (TF's message).
        """
        return self._map_specs(_legacy_shape)

    @property
    def output_classes(self):
        return self._map_specs(_class_of)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} shapes: {self.output_shapes}, types: {self.output_types}>"

    def _then(self, op_type, inputs, structure=None, attrs=None, name=None) -> Dataset:
        ds = Dataset(None, self._structure if structure is None else structure)
        ds._options = getattr(self, "_options", None)  # (options follow a pipeline, as TF's)
        a = ds._out_attrs()
        a.update(attrs or {})
        ds._variant = dataset_ops.dataset_op(op_type, inputs, a, name=name)
        return ds

    # -- sources
    @staticmethod
    def from_tensor_slices(tensors, name=None) -> Dataset:
        value = _normalize_element(tensors)
        if any(hasattr(v, "_tf_extension_type_fields") for v in _flat(value)):
            return extension_elements.slices(value, Dataset.from_tensor_slices)
        flat = _flat(value)
        if any(isinstance(t, SparseTensor) for t in flat):
            raise TypeError(
                "from_tensor_slices of a SparseTensor is not supported here; slice it "
                "with tf.sparse_split or give dense slices."
            )
        n = {t.shape[0].value for t in flat if t.shape.ndims}
        if any(t.shape.ndims == 0 for t in flat):
            raise ValueError("Unbatching a tensor is only supported for rank >= 1")
        n.discard(None)
        if len(n) > 1:
            raise ValueError(
                "Dimension 0 in both shapes must be equal, but are "
                + " and ".join(str(x) for x in sorted(n))
            )
        structure = _pack(value, [_Spec(t.dtype, t.shape[1:]) for t in flat])
        ds = Dataset(None, structure)
        ds._variant = dataset_ops.dataset_op(
            "TensorSliceDataset", [flat], ds._out_attrs(), name="TensorSliceDataset"
        )
        return ds

    @staticmethod
    def from_sparse_tensor_slices(sparse_tensor) -> Dataset:
        """TF1's slices of a SparseTensor by its first dimension, each as a tuple
        (indices of rank-1 positions, values, dense shape without the first dim)."""
        st = SparseTensor.from_value(sparse_tensor)
        with ops.name_scope("SparseTensorSliceDataset"):
            indices, values, dense_shape = st.indices, st.values, st.dense_shape

            def row(i):
                keep = math_ops.equal(indices[:, 0], i)
                return (
                    partition_ops.boolean_mask(indices, keep)[:, 1:],
                    partition_ops.boolean_mask(values, keep),
                    dense_shape[1:],
                )

            return Dataset.range(dense_shape[0]).map(row)

    @staticmethod
    def from_tensors(tensors, name=None) -> Dataset:
        value = _normalize_element(tensors)
        ds = Dataset(None, _structure_of(value))
        ds._variant = dataset_ops.dataset_op(
            "TensorDataset", [_to_components(_flat(value))], ds._out_attrs(), name="TensorDataset"
        )
        return ds

    @staticmethod
    def range(*args, output_type=dtypes.int64, name=None) -> Dataset:
        """range(stop), range(start, stop) or range(start, stop, step)."""
        if not 1 <= len(args) <= 3:
            raise ValueError("Invalid arguments to RangeDataset: " + repr(args))
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
        ds = Dataset(None, _Spec(output_type, []))
        ds._variant = dataset_ops.dataset_op(
            "RangeDataset",
            [_i64(start, "start"), _i64(stop, "stop"), _i64(step, "step")],
            ds._out_attrs(),
            name="RangeDataset",
        )
        return ds

    @staticmethod
    def zip(*args, datasets=None, name=None) -> Dataset:
        """zip(a, b, ...), zip((a, b)) or zip(datasets=...): tuples (or the given
        structure) of the datasets' elements, as long as the shortest."""
        if args and datasets is not None:
            raise TypeError("Both `*args` and `datasets` cannot be set.")
        if datasets is None:
            if not args:
                raise TypeError("Must pass at least one dataset to `zip`.")
            datasets = args[0] if len(args) == 1 else args
        flat = nest.flatten(datasets)
        for d in flat:
            if not isinstance(d, Dataset):
                raise TypeError(
                    "Invalid input to `zip`. Inputs are expected to be (nested) structures "
                    "of `tf.data.Dataset` objects but encountered object of type "
                    f"{type(d)}."
                )
        structure = nest.pack_sequence_as(datasets, [d._structure for d in flat])
        ds = Dataset(None, structure)
        ds._variant = dataset_ops.dataset_op(
            "ZipDataset", [[d._variant for d in flat]], ds._out_attrs(), name="ZipDataset"
        )
        return ds

    @staticmethod
    def from_generator(
        generator,
        output_types=None,
        output_shapes=None,
        args=None,
        output_signature=None,
        name=None,
    ) -> Dataset:
        """Elements from a Python generator, which runs on a worker thread; each element
        is checked against the given types and shapes (or `output_signature`'s specs).

        Raises:
          TypeError: no types and no signature, or both; a signature of non-specs.
          InvalidArgumentError (at run time): an element of another shape or type.
        """
        if not callable(generator):
            raise TypeError("`generator` must be callable.")
        if output_signature is not None:
            if output_types is not None:
                raise TypeError(
                    "The `output_types` argument can not be used together with the "
                    "`output_signature` argument."
                )
            if output_shapes is not None:
                raise TypeError(
                    "The `output_shapes` argument can not be used together with the "
                    "`output_signature` argument."
                )
            from asyncflow.type_spec import TypeSpec

            for spec in nest.flatten(output_signature):
                if not isinstance(spec, TypeSpec):
                    raise TypeError(
                        "`output_signature` must contain objects that are subclass of "
                        f"`tf.TypeSpec` but found {type(spec)} which is not."
                    )
            output_types = nest.map_structure(lambda t: t.dtype, output_signature)
            output_shapes = nest.map_structure(lambda t: t.shape, output_signature)
        elif output_types is None:
            raise TypeError(
                "To specify the output signature you need to provide either the "
                "`output_signature` argument or the `output_types` argument."
            )
        types = nest.map_structure(dtypes.as_dtype, output_types)
        if output_shapes is None:
            output_shapes = nest.map_structure(lambda _: tensor_shape.unknown_shape(), types)
        shapes = _shapes_like(types, output_shapes)
        flat_t, flat_s = _flat(types), _flat(shapes)
        structure = _pack(types, [_Spec(t, s) for t, s in zip(flat_t, flat_s)])
        call_args = tuple(np.asarray(a) for a in (args or ()))
        token = f"gen{next(_tokens)}"
        dataset_ops.register_generator(
            token,
            lambda: generator(*call_args),
            lambda x: _flatten_up_to(types, x),
        )
        ds = Dataset(None, structure)
        ds._variant = dataset_ops.dataset_op(
            "GeneratorDataset", [], {**ds._out_attrs(), "token": token}, name="GeneratorDataset"
        )
        return ds

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None, name=None) -> Dataset:
        """The files matching `file_pattern` (sorted; shuffled unless shuffle=False).

        Raises:
          InvalidArgumentError (at run time): nothing matches.
        """
        from asyncflow.ops import reader_ops

        names = reader_ops.matching_files(file_pattern)
        ds = Dataset.from_tensor_slices(names)
        if shuffle is None or shuffle:
            ds = ds.shuffle(10000, seed=seed)
        return ds

    # -- transformations
    def map(
        self,
        map_func,
        num_parallel_calls=None,
        deterministic=None,
        synchronous=None,
        use_unbounded_threadpool=False,
        name=None,
    ) -> Dataset:
        """Elements `map_func(element)`; a map of a map runs as one fused function call
        (TF's map fusion), as sequential or parallel as the later map asks. The
        elements always come in order (`deterministic=False` allows any order).  With
        `num_parallel_calls` (an int64, as TF's), TF 2.21's ParallelMapDatasetV2.

        Raises:
          ValueError: `num_parallel_calls` is a tensor of another dtype than int64.
        """
        return self._mapped(map_func, num_parallel_calls, deterministic)

    def _mapped(self, map_func, num_parallel_calls, deterministic=None, attrs=None) -> Dataset:
        """`map`; `attrs` (a sequential map's alone) over its MapDataset's, as TF's
        internal maps set theirs (sample_from_datasets' selector)."""
        src, t, structure = self._traced_map(map_func, num_parallel_calls is not None)
        if num_parallel_calls is None:
            a = {**t.attrs(), **(attrs or {})}
            out = src._then("MapDataset", [src._variant, t.op_inputs()], structure, a)
        else:
            n = _i64(num_parallel_calls, "num_parallel_calls")
            attrs = {**t.attrs(), **_PARALLEL_MAP_ATTRS, "deterministic": _det(deterministic)}
            out = src._then(
                "ParallelMapDatasetV2", [src._variant, t.op_inputs(), n], structure, attrs
            )
        if t.earlier:  # (read by its kernel: ops/dataset_ops.py's `_fused_maps`)
            out._variant.op._fused_maps = t.earlier
            out._variant.op._fused_reads = t.reads
            if t.read is not None:  # (export: the earlier map's op and results)
                out._variant.op._fused_after = (self._variant.op, t.read)
        out._map = (src, t, num_parallel_calls)
        return out

    def _traced_map(self, map_func, parallel: bool, op_type: str | None = None, fuse=True):
        """`map_func` traced for a map of this dataset: (the dataset the map reads, the
        traced function, the elements' structure).  With `fuse`, a map of a map of the
        same kind (parallel or not) reads the earlier map's input, the two functions
        fused.
        `op_type`: the op TF names in the error for a function returning no component
        (`map_and_batch`'s MapAndBatchDataset; the map op by default)."""
        src, after = self, None
        if fuse and self._map is not None and (self._map[2] is None) != parallel:
            src, after = self._map[0], self._map[1]

        def fn(*args):  # (None: no components, as TF's NoneTensorSpec)
            out = map_func(*args)
            return () if out is None else out

        t = _Traced(fn, self._structure, "map", after)
        if isinstance(t.structure, Dataset):
            raise TypeError("map_func must not return a Dataset; use flat_map.")
        structure = _structure_of(t.structure)
        if op_type is None:
            op_type = "ParallelMapDatasetV2" if parallel else "MapDataset"
        _at_least_one(op_type, "output_types", _flat(structure))
        return src, t, structure

    def filter(self, predicate, name=None) -> Dataset:
        t = _Traced(predicate, self._structure, "filter")
        outs = t.outputs
        if len(outs) != 1 or outs[0].dtype != dtypes.bool or outs[0].shape.ndims not in (0, None):
            raise ValueError(
                "`predicate` return type must be convertible to a scalar boolean tensor."
            )
        return self._then("FilterDataset", [self._variant, t.op_inputs()], None, t.attrs())

    def _fn_dataset(self, fn, what):
        t = _Traced(fn, self._structure, what)
        if not isinstance(t.structure, Dataset):
            raise TypeError(f"`map_func` of {what} must return a `Dataset` object.")
        return t

    def flat_map(self, map_func, name=None) -> Dataset:
        t = self._fn_dataset(map_func, "flat_map")
        return self._then(
            "FlatMapDataset", [self._variant, t.op_inputs()], t.structure._structure, t.attrs()
        )

    def interleave(
        self,
        map_func,
        cycle_length=None,
        block_length=None,
        num_parallel_calls=None,
        deterministic=None,
        name=None,
    ) -> Dataset:
        """The datasets `map_func` makes, `cycle_length` open at once, `block_length`
        elements from each in turn. As TF's, an unset (or AUTOTUNE) cycle length is the
        number of CPUs this process may run on, so the order depends on the machine.
        With `num_parallel_calls`, TF's ParallelInterleaveDatasetV4: the same order (the
        calls only tune TF's threads), but a failed element moves through the cycle as
        TF's parallel interleave moves it (ops/dataset_pipeline.py's `Interleave`)."""
        t = self._fn_dataset(map_func, "interleave")
        cycle = _schedulable_cpus() if cycle_length in (None, AUTOTUNE) else cycle_length
        block_length = 1 if block_length is None else block_length
        inputs = [
            self._variant,
            t.op_inputs(),
            _i64(cycle, "cycle_length"),
            _i64(block_length, "block_length"),
        ]
        if num_parallel_calls is None:
            return self._then("InterleaveDataset", inputs, t.structure._structure, t.attrs())
        inputs += [
            _i64(AUTOTUNE, "buffer_output_elements"),
            _i64(AUTOTUNE, "prefetch_input_elements"),
            _i64(num_parallel_calls, "num_parallel_calls"),
        ]
        return self._then(
            "ParallelInterleaveDatasetV4",
            inputs,
            t.structure._structure,
            {**t.attrs(), "deterministic": _det(deterministic)},
        )

    def batch(
        self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None,
        name=None,
    ) -> Dataset:  # fmt: skip
        if extension_elements.has_extension(self._structure):
            return extension_elements.via_parts(
                self, lambda ds: ds.batch(batch_size, drop_remainder), "_batch"
            )
        bs = _i64(batch_size, "batch_size")
        structure = self._batched_structure(bs, drop_remainder is True)
        drop = ops.convert_to_tensor(drop_remainder, dtype=dtypes.bool, name="drop_remainder")
        if num_parallel_calls is None:
            return self._then("BatchDatasetV2", [self._variant, bs, drop], structure)
        # TF's parallel batch: its own op, which TF's map_and_batch_fusion leaves apart
        n = _i64(num_parallel_calls, "num_parallel_calls")
        return self._then(
            "ParallelBatchDataset",
            [self._variant, bs, n, drop],
            structure,
            attrs={"deterministic": _det(deterministic)},
        )

    def _batched_structure(self, batch_size: ops.Tensor, static: bool):
        """The structure of batches of this dataset's elements, their outer dimension
        `batch_size`'s value where `static` (a drop_remainder of True) and it is known."""
        known = ops.constant_value(batch_size) if static else None
        outer = int(known) if known is not None else None
        return self._map_specs(
            lambda s: (
                _respec(s, [outer, *_dims(s.shape)])
                if s.shape.ndims is not None
                else _respec(s, None)
            )
        )

    def _map_and_batch(self, map_func, batch_size, num_parallel_calls, drop_remainder):
        """`experimental.map_and_batch`: TF's MapAndBatchDataset, one op that the
        runtime runs as a map fused into its batch whatever the options (a failed
        element fails its batch).  Unlike `map`, never fused with a map beneath, as
        TF's: a lower map's error stays that map's."""
        _, t, structure = self._traced_map(map_func, True, "MapAndBatchDataset", fuse=False)
        if extension_elements.has_extension(structure):  # (batched part by part)
            mapped = self._then("MapDataset", [self._variant, t.op_inputs()], structure, t.attrs())
            return mapped.batch(batch_size, drop_remainder)
        bs = _i64(batch_size, "batch_size")
        n = _i64(num_parallel_calls, "num_parallel_calls")
        drop = ops.convert_to_tensor(drop_remainder, dtype=dtypes.bool, name="drop_remainder")
        return self._then(
            "MapAndBatchDataset",
            [self._variant, t.op_inputs(), bs, n, drop],
            Dataset(None, structure)._batched_structure(bs, bool(ops.constant_value(drop))),
            {**t.attrs(), "preserve_cardinality": True},
        )

    def padded_batch(
        self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False,
        name=None,
    ) -> Dataset:  # fmt: skip
        specs = self._flat_specs()
        if any(isinstance(s, _SparseSpec) for s in specs):
            raise TypeError("Batching of padded sparse tensors is not currently supported")
        bs = _i64(batch_size, "batch_size")  # (TF's constants: this one first)
        dynamic = {}  # component -> a shape tensor given as its padded shape
        if padded_shapes is None:
            flat_shapes = [s.shape for s in specs]
        else:
            flat_shapes = []
            for k, p in enumerate(_flat_like(self._structure, padded_shapes)):
                if isinstance(p, ops.Tensor):
                    dynamic[k] = p
                    known = ops.constant_value(p)
                    p = (
                        [None if d < 0 else int(d) for d in known]
                        if known is not None
                        else tensor_shape.unknown_shape(p.shape[0].value)
                    )
                flat_shapes.append(tensor_shape.as_shape(p))
        if padding_values is None:
            flat_pads = [
                np.zeros((), s.dtype.as_numpy_dtype) if s.dtype != dtypes.string else b""
                for s in specs
            ]
        else:
            flat_pads = _flat_like(self._structure, padding_values)
        shape_ts = [
            math_ops.cast(dynamic[k], dtypes.int64)
            if k in dynamic
            else ops.convert_to_tensor(
                [-1 if d is None else d for d in _dims(p)], dtype=dtypes.int64
            )
            for k, p in enumerate(flat_shapes)
        ]
        pads = [
            ops.convert_to_tensor(v, dtype=s.dtype, name="padding_value")
            for v, s in zip(flat_pads, specs)
        ]
        static = ops.constant_value(bs) if drop_remainder is True else None
        outer = int(static) if static is not None else None
        structure = _pack(
            self._structure,
            [_Spec(s.dtype, [outer, *_dims(p)]) for s, p in zip(specs, flat_shapes)],
        )
        drop = ops.convert_to_tensor(drop_remainder, dtype=dtypes.bool, name="drop_remainder")
        return self._then(
            "PaddedBatchDatasetV2",
            [self._variant, bs, shape_ts, pads, drop],
            structure,
            {"Toutput_types": [s.dtype for s in specs]},
        )

    def unbatch(self, name=None) -> Dataset:
        if extension_elements.has_extension(self._structure):
            return extension_elements.via_parts(self, lambda ds: ds.unbatch(), "_unbatch")
        src = self
        if all(type(s) is _Spec for s in _flat(self._structure)):
            # (TF's normalize_to_dense: a map of its dense components, an identity)
            same = (lambda *x: x) if type(self._structure) is tuple else (lambda x: x)
            src = self.map(same)
        structure = src._map_specs(
            lambda s: _respec(s, s.shape[1:]) if s.shape.ndims else _respec(s, None)
        )
        return src._then("UnbatchDataset", [src._variant], structure)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True, name=None) -> Dataset:
        size = _i64(buffer_size, "buffer_size")
        seed1, seed2 = _seed_tensors(seed)
        return self._then(
            "ShuffleDataset",
            [self._variant, size, seed1, seed2],
            None,
            {"reshuffle_each_iteration": reshuffle_each_iteration is not False},
        )

    def repeat(self, count=None, name=None) -> Dataset:
        return self._then(
            "RepeatDataset", [self._variant, _i64(-1 if count is None else count, "count")]
        )

    def take(self, count, name=None) -> Dataset:
        return self._then("TakeDataset", [self._variant, _i64(count, "count")])

    def skip(self, count, name=None) -> Dataset:
        return self._then("SkipDataset", [self._variant, _i64(count, "count")])

    def prefetch(self, buffer_size, name=None) -> Dataset:
        size = _i64(buffer_size, "buffer_size")
        # TF's: colocated with its input; legacy_autotune (default true) only for AUTOTUNE
        with ops.colocate_with(self._variant.op):
            return self._then(
                "PrefetchDataset",
                [self._variant, size],
                attrs={"legacy_autotune": _is_autotune(buffer_size)},
            )

    def cache(self, filename="", name=None) -> Dataset:
        fn = ops.convert_to_tensor(filename, dtype=dtypes.string, name="filename")
        return self._then("CacheDataset", [self._variant, fn])

    def concatenate(self, dataset, name=None) -> Dataset:
        if [s.dtype for s in self._flat_specs()] != [s.dtype for s in dataset._flat_specs()]:
            raise TypeError(
                f"Types of datasets do not match: {self.output_types} vs {dataset.output_types}"
            )
        structure = _pack(
            self._structure,
            [
                _respec(a, a.shape.most_specific_compatible_shape(b.shape))
                for a, b in zip(self._flat_specs(), dataset._flat_specs())
            ],
        )
        return self._then("ConcatenateDataset", [self._variant, dataset._variant], structure)

    def enumerate(self, start=0, name=None) -> Dataset:
        """(index, element) pairs, the indices from `start`: as TF's, a zip of a range
        (through TF's RewriteDataset "replicate_on_split", which keeps its elements)
        and this dataset."""
        counter = Dataset.range(start, np.iinfo(np.int64).max)
        rewrite = [counter._variant, "replicate_on_split"]  # (TF's RewriteDataset/rewrite_name)
        counter = counter._then("RewriteDataset", rewrite, None, {}, name="RewriteDataset")
        return Dataset.zip((counter, self))

    def shard(self, num_shards, index, name=None) -> Dataset:
        """Every `num_shards`-th element from the `index`-th on.

        Raises:
          InvalidArgumentError (at run time): num_shards <= 0, index outside
            [0, num_shards).
        """
        return self._then(
            "ShardDataset",
            [self._variant, _i64(num_shards, "num_shards"), _i64(index, "index")],
            None,
            {"require_non_empty": False},
        )

    def unique(self, name=None) -> Dataset:
        """The elements not seen before, in order (one int32, int64 or string component).

        Raises:
          TypeError: any other element structure.
        """
        specs = self._flat_specs()
        if len(specs) != 1 or specs[0].dtype not in (dtypes.int32, dtypes.int64, dtypes.string):
            raise TypeError(
                "`tf.data.Dataset.unique` does not support type "
                f"{self.output_types}: only a single int32, int64 or string component."
            )
        return self._then("UniqueDataset", [self._variant])

    def scan(self, initial_state, scan_func, name=None) -> Dataset:
        """`scan_func(state, element) -> (new_state, output)` from `initial_state` on.

        Raises:
          TypeError: the new state's structure or dtypes differ from the initial one's.
        """
        state = _normalize(initial_state)
        init = _flat(state)
        specs = [_Spec(t.dtype, t.shape) for t in init]
        for _ in range(2):  # a second trace with the shapes the new state relaxed to
            struct = (_pack(state, specs), self._structure)
            t = _Traced(lambda s, *x: scan_func(s, *x), struct, "scan")
            out = t.structure
            if not isinstance(out, tuple) or len(out) != 2:
                raise TypeError(
                    "The scan function must return a pair comprising the new state and the "
                    "output value."
                )
            new_flat = _flat(out[0])
            if len(new_flat) != len(init) or [x.dtype for x in new_flat] != [
                s.dtype for s in specs
            ]:
                raise TypeError(
                    "The element types for the new state must match the initial state. "
                    f"Expected {[s.dtype.name for s in specs]}; got "
                    f"{[x.dtype.name for x in new_flat]}."
                )
            relaxed = [
                _Spec(s.dtype, s.shape.most_specific_compatible_shape(x.shape))
                for s, x in zip(specs, new_flat)
            ]
            if all(r.shape.as_list() == s.shape.as_list() if s.shape.ndims is not None
                   else r.shape.ndims is None for r, s in zip(relaxed, specs)):  # fmt: skip
                break
            specs = relaxed
        attrs = {**t.attrs(), "Tstate": [s.dtype for s in specs]}
        structure = _structure_of(out[1])
        _at_least_one("ScanDataset", "Tstate", specs)
        _at_least_one("ScanDataset", "output_types", _flat(structure))
        return self._then("ScanDataset", [self._variant, init, t.op_inputs()], structure, attrs)

    def take_while(self, predicate, name=None) -> Dataset:
        """The elements up to the first for which `predicate` is false."""
        t = _Traced(predicate, self._structure, "take_while")
        outs = t.outputs
        if len(outs) != 1 or outs[0].dtype != dtypes.bool or outs[0].shape.ndims not in (0, None):
            raise ValueError("`predicate` must return a scalar boolean tensor.")
        return self._then("TakeWhileDataset", [self._variant, t.op_inputs()], None, t.attrs())

    def window(self, size, shift=None, stride=1, drop_remainder=False, name=None) -> Dataset:
        """Windows of `size` elements (`stride` apart), one every `shift` (default
        `size`) elements; each window is a structure of datasets, one per component."""
        structure = self._map_specs(lambda s: _DatasetSpec(_Spec(s.dtype, s.shape)))
        return self._then(
            "WindowDataset",
            [
                self._variant,
                _i64(size, "size"),
                _i64(size if shift is None else shift, "shift"),
                _i64(stride, "stride"),
                ops.convert_to_tensor(drop_remainder, dtype=dtypes.bool, name="drop_remainder"),
            ],
            structure,
        )

    def group_by_window(
        self, key_func, reduce_func, window_size=None, window_size_func=None, name=None
    ) -> Dataset:
        """Elements grouped by `key_func` (an int64 scalar) into windows of
        `window_size` (or `window_size_func(key)`), each reduced by
        `reduce_func(key, window_dataset)` to a dataset whose elements are the output.

        Raises:
          ValueError: both or neither of window_size and window_size_func.
        """
        if (window_size is None) == (window_size_func is None):
            raise ValueError("Either the `window_size` argument or the `window_size_func` "
                             "argument must be specified.")  # fmt: skip
        if window_size is not None:
            size = window_size

            def window_size_func(key):
                return ops.convert_to_tensor(size, dtype=dtypes.int64)

        key = _Traced(key_func, self._structure, "key_func")
        if (len(key.outputs) != 1 or key.outputs[0].dtype != dtypes.int64
                or key.outputs[0].shape.ndims not in (0, None)):  # fmt: skip
            raise ValueError("`key_func` must return a single tf.int64 scalar tensor.")
        key_spec = _Spec(dtypes.int64, [])
        sizes = _Traced(window_size_func, key_spec, "window_size_func")
        if len(sizes.outputs) != 1 or sizes.outputs[0].dtype != dtypes.int64:
            raise ValueError("`window_size_func` must return a single tf.int64 scalar tensor.")
        red = _Traced(
            lambda k, w: reduce_func(k, w),
            (key_spec, _DatasetSpec(self._structure)),
            "reduce_func",
        )
        if not isinstance(red.structure, Dataset):
            raise TypeError("`reduce_func` must return a `Dataset` object.")
        attrs = {
            **dataset_more.function_attrs("key", key.inputs, key.outputs, key.captures),
            **dataset_more.function_attrs("reduce", red.inputs, red.outputs, red.captures),
            **dataset_more.function_attrs("size", sizes.inputs, sizes.outputs, sizes.captures),
        }
        return self._then(
            "GroupByWindowDataset",
            [self._variant, key.captures, red.captures, sizes.captures],
            red.structure._structure,
            attrs,
        )

    def bucket_by_sequence_length(
        self,
        element_length_func,
        bucket_boundaries,
        bucket_batch_sizes,
        padded_shapes=None,
        padding_values=None,
        pad_to_bucket_boundary=False,
        no_padding=False,
        drop_remainder=False,
        name=None,
    ) -> Dataset:
        return self.apply(
            bucket_by_sequence_length(
                element_length_func,
                bucket_boundaries,
                bucket_batch_sizes,
                padded_shapes,
                padding_values,
                pad_to_bucket_boundary,
                no_padding,
                drop_remainder,
            )
        )

    def reduce(self, initial_state, reduce_func, name=None):
        """The state after `reduce_func(state, element)` of every element, as tensors."""
        state = _normalize(initial_state)
        init = _flat(state)
        specs = [_Spec(t.dtype, t.shape) for t in init]
        t = _Traced(
            lambda s, *x: reduce_func(s, *x), (_pack(state, specs), self._structure), "reduce"
        )
        new_flat = _flat(t.structure)
        if [x.dtype for x in new_flat] != [s.dtype for s in specs]:
            raise TypeError(
                "The element types for the new state must match the initial state. "
                f"Expected {[s.dtype.name for s in specs]}; got "
                f"{[x.dtype.name for x in new_flat]}."
            )
        shapes = [s.shape.most_specific_compatible_shape(x.shape) for s, x in zip(specs, new_flat)]
        _at_least_one("ReduceDataset", "Tstate", specs)
        op = ops.apply_op(
            "ReduceDataset",
            [self._variant, init, t.op_inputs()],
            {
                **t.attrs(),
                "Tstate": [s.dtype for s in specs],
                "output_types": [s.dtype for s in specs],
                "output_shapes": shapes,
            },
            name="ReduceDataset",
        )
        return _pack(state, list(op.outputs))

    def get_single_element(self, name=None):
        """The dataset's one element, as tensors.

        Raises:
          InvalidArgumentError (at run time): the dataset is empty or has more elements.
        """
        op = ops.apply_op("DatasetToSingleElement", [self._variant], self._out_attrs(), name=name)
        return _from_components(self._structure, list(op.outputs))

    def cardinality(self):
        """The number of elements as an int64 scalar tensor: -1 infinite, -2 unknown."""
        return ops.apply_op("DatasetCardinality", [self._variant], {}).outputs[0]

    @staticmethod
    def counter(start=0, step=1, dtype=dtypes.int64, name=None) -> Dataset:
        return Counter(start, step, dtype)

    @staticmethod
    def sample_from_datasets(
        datasets, weights=None, seed=None, stop_on_empty_dataset=False,
        rerandomize_each_iteration=None,
    ):  # fmt: skip
        return resampling.sample_from_datasets(
            Dataset, datasets, weights, seed, stop_on_empty_dataset, rerandomize_each_iteration
        )

    def rejection_resample(self, class_func, target_dist, initial_dist=None, seed=None, name=None):
        """(class, element) pairs resampled towards `target_dist` (TF's construction:
        asyncflow/data/resampling.py)."""
        return resampling.rejection_resample(
            Dataset, self, class_func, target_dist, initial_dist, seed
        )

    @staticmethod
    def choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=True):
        # (TF's method ends at the first exhausted dataset; tf.data.experimental's
        # function skips its picks by default)
        return choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset)

    @staticmethod
    def random(seed=None, rerandomize_each_iteration=None, name=None) -> Dataset:
        """int64 draws of TF's Philox stream for (seed, seed2), one 32-bit value each,
        forever (TF's RandomDataset: the same numbers for the same seeds). With
        `rerandomize_each_iteration`, TF's RandomDatasetV2: each `repeat` pass draws
        other numbers (its seeds the next of a stream seeded with the seeds)."""
        ds = Dataset(None, _Spec(dtypes.int64, []))
        seeds = list(_seed_tensors(seed))
        if rerandomize_each_iteration:
            generator = ops.apply_op("DummySeedGenerator", [], {}).outputs[0]
            ds._variant = dataset_ops.dataset_op(
                "RandomDatasetV2",
                [*seeds, generator],
                {**ds._out_attrs(), "rerandomize_each_iteration": True},
                name="RandomDatasetV2",
            )
        else:
            ds._variant = dataset_ops.dataset_op(
                "RandomDataset", seeds, ds._out_attrs(), name="RandomDataset"
            )
        return ds

    def ragged_batch(
        self, batch_size, drop_remainder=False, row_splits_dtype=dtypes.int64, name=None
    ):
        """Batches whose components of not fully known shape are RaggedTensors
        (asyncflow/data/ragged_batch.py)."""
        return ragged_batch.ragged_batch(self, batch_size, drop_remainder, row_splits_dtype)

    # -- saved datasets and snapshots (asyncflow/data/saving.py)
    def save(self, path, compression=None, shard_func=None, checkpoint_args=None):
        """The op that writes this dataset to `path` in TF's snapshot format when run
        (and `path/dataset_spec.pb` now, as TF)."""
        return saving.save(self, _Traced, path, compression, shard_func, checkpoint_args)

    @staticmethod
    def load(path, element_spec=None, compression=None, reader_func=None, wait=False):
        """The dataset `save` (TF's or ours) wrote at `path`.

        Raises:
          NotFoundError: no `element_spec` and no `path/dataset_spec.pb`.
        """
        return saving.load(Dataset, _Traced, path, element_spec, compression, reader_func, wait)

    def snapshot(self, path, compression="AUTO", reader_func=None, shard_func=None, name=None):
        """This dataset written to a snapshot at `path` on a pass, read from it once a
        pass finished it."""
        return saving.snapshot(Dataset, _Traced, self, path, compression, reader_func, shard_func)

    @property
    def element_spec(self):
        """The elements' structure as TensorSpec / SparseTensorSpec (TF 2's view)."""
        from asyncflow import SparseTensorSpec, TensorSpec

        def spec(s):
            if isinstance(s, _ExtensionSpec):
                return s.type_spec
            if isinstance(s, _SparseSpec):
                return SparseTensorSpec(s.shape, s.dtype)
            if isinstance(s, _DatasetSpec):
                return s.structure
            return TensorSpec(s.shape, s.dtype)

        return self._map_specs(spec)

    def as_numpy_iterator(self):
        """TF: eager mode only (so in every TF1 graph program)."""
        raise RuntimeError(
            "`tf.data.Dataset.as_numpy_iterator()` is only supported in eager mode."
        )

    def sparse_batch(self, batch_size, row_shape, name=None) -> Dataset:
        """Batches of `batch_size` elements (dense, each at most `row_shape`) as one
        SparseTensor of dense shape [batch, *row_shape] (DenseToSparseBatchDataset)."""
        specs = self._flat_specs()
        if len(specs) != 1:
            raise TypeError("sparse_batch needs elements of one tensor.")
        dims = [None if d is None or int(d) < 0 else int(d)
                for d in tensor_shape.as_shape(row_shape).as_list()]  # fmt: skip
        row = _i64([-1 if d is None else d for d in dims], None)
        # (TF's: its batch_size converted in the op's own name scope, the op named as it)
        with ops.name_scope("DenseToSparseBatchDataset") as scope:
            bs = _i64(batch_size, "batch_size")
            return self._then(
                "DenseToSparseBatchDataset",
                [self._variant, bs, row],
                _SparseSpec(specs[0].dtype, [None, *dims]),
                name=scope,
            )

    def rebatch(self, batch_size, drop_remainder=False, name=None) -> Dataset:
        """The elements (batches) unbatched and batched again by `batch_size`."""
        return self.unbatch().batch(batch_size, drop_remainder)

    def ignore_errors(self, log_warning=False, name=None) -> Dataset:
        return self._then(
            "IgnoreErrorsDataset", [self._variant], None, {"log_warning": bool(log_warning)}
        )

    def filter_with_legacy_function(self, predicate) -> Dataset:
        return self.filter(predicate)

    def map_with_legacy_function(
        self, map_func, num_parallel_calls=None, deterministic=None,
        use_unbounded_threadpool=False,
    ) -> Dataset:  # fmt: skip
        return self.map(map_func, num_parallel_calls, deterministic)

    def options(self):
        from asyncflow.data.options import Options

        return getattr(self, "_options", None) or Options()

    def apply(self, transformation_func) -> Dataset:
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError("`transformation_func` must return a Dataset.")
        return out

    def with_options(self, options, name=None) -> Dataset:
        """This dataset with `options` merged over its own (`options()`), as TF 2.21's
        OptionsDataset op: colocated with its input, its attr `options` alone (the
        runtime merges a pipeline's OptionsDatasets, as TF's; data/options.py).  Only
        `with_options` writes one, as TF's graph mode: a pipeline without options
        exports without it.  A `name` goes into its metadata attr (TF's Metadata
        message), as TF's."""
        from asyncflow.data.options import serialized

        merged = self.options().merge(options)
        attrs = {"serialized_options": serialized(options)}
        if name:
            attrs["metadata"] = length_delimited(1, str(name).encode())
        with ops.colocate_with(self._variant.op):
            out = self._then("OptionsDataset", [self._variant], attrs=attrs)
        out._options = merged
        return out

    # -- iteration
    def make_one_shot_iterator(self):
        """TF1's iterator over this dataset.

        Raises:
          NotImplementedError: ExtensionType elements (TF: no legacy output types).
        """
        from asyncflow.data.iterator import Iterator

        self.output_types  # noqa: B018 - (TF's NotImplementedError for ExtensionTypes)
        return Iterator._one_shot(self)

    def make_initializable_iterator(self, shared_name=None):
        from asyncflow.data.iterator import Iterator

        return Iterator._initializable(self, shared_name)

    async def aiterate(self, session=None):
        """`async for element in dataset.aiterate(sess)`: the elements' values, each a
        step of `session` (the default session when None), until the end of the data."""
        from asyncflow import errors
        from asyncflow.session import get_default_session

        sess = session or get_default_session()
        if sess is None:
            raise ValueError("aiterate needs a session (or a default session).")
        nxt = self.make_one_shot_iterator().get_next()
        while True:
            try:
                yield await sess.arun(nxt)
            except errors.OutOfRangeError:
                return

    def __aiter__(self):
        return self.aiterate()


def _flatten_up_to(structure, value) -> list:
    """`value`'s parts where `structure` has leaves (a generator may yield lists)."""
    if isinstance(structure, dict):
        return [x for k in sorted(structure) for x in _flatten_up_to(structure[k], value[k])]
    if isinstance(structure, tuple):
        if len(value) != len(structure):
            raise ValueError(
                f"`generator` yielded an element that did not match the "
                f"expected structure {structure}: {value!r}"
            )
        return [x for s, v in zip(structure, value) for x in _flatten_up_to(s, v)]
    return [value]


def _dims(shape) -> list:
    return [d.value for d in shape.dims]


def _flat_like(structure, value) -> list:
    """`value` flattened up to `structure` (TF's nest.flatten_up_to): a component's
    value is taken whole, so a padded shape `[]` or `[4]` stays one shape."""
    if isinstance(structure, tuple) and isinstance(value, (tuple, list)):
        if len(value) != len(structure):
            raise ValueError(
                f"The two structures don't have the same sequence length. Input structure "
                f"has length {len(value)}, while shallow structure has length {len(structure)}."
            )
        return [x for s, v in zip(structure, value) for x in _flat_like(s, v)]
    if isinstance(structure, dict) and isinstance(value, dict):
        missing = sorted(set(structure) - set(value), key=str)
        if missing:
            raise ValueError(f"The two structures don't have the same keys: missing {missing}")
        return [x for k in sorted(structure) for x in _flat_like(structure[k], value[k])]
    return [value]


def _shapes_like(types, shapes):
    if isinstance(types, (tuple, dict)):
        return nest.pack_sequence_as(
            types, [tensor_shape.as_shape(s) for s in _flat_like(types, shapes)]
        )
    return tensor_shape.as_shape(shapes)


class _FileDataset(Dataset):
    def __init__(self, op_type, inputs, name):
        super().__init__(None, _Spec(dtypes.string, []))
        self._variant = dataset_ops.dataset_op(op_type, inputs, self._out_attrs(), name=name)

    def _read_in_parallel(self, filenames, num_parallel_reads, one_file) -> None:
        """TF's reading of `num_parallel_reads` files at once: an interleave of the
        files' datasets (`one_file(name)`), one record from each in turn."""
        n = _static(num_parallel_reads, AUTOTUNE)
        files = Dataset.from_tensor_slices(_filenames(filenames))
        ds = files.interleave(one_file, cycle_length=n, block_length=1, num_parallel_calls=n)
        self._variant, self._structure = ds._variant, ds._structure


def _filenames(filenames):
    t = ops.convert_to_tensor(filenames, dtype=dtypes.string, name="filenames")
    return array_ops.reshape(t, [-1]) if t.shape.ndims != 1 else t


class TFRecordDataset(_FileDataset):
    """The records of TFRecord files, one string element each."""

    def __init__(
        self,
        filenames,
        compression_type=None,
        buffer_size=None,
        num_parallel_reads=None,
        name=None,
    ):
        if num_parallel_reads is not None:
            self._read_in_parallel(
                filenames,
                num_parallel_reads,
                lambda f: TFRecordDataset(f, compression_type, buffer_size),
            )
            return
        with ops.name_scope("TFRecordDataset"):
            inputs = [
                _filenames(filenames),
                ops.convert_to_tensor(compression_type or "", dtype=dtypes.string),
                _i64(buffer_size or 0, "buffer_size"),
            ]
            super().__init__("TFRecordDataset", inputs, "TFRecordDataset")


class TextLineDataset(_FileDataset):
    """The lines of text files (without their '\\n' or '\\r\\n'), one element each."""

    def __init__(
        self,
        filenames,
        compression_type=None,
        buffer_size=None,
        num_parallel_reads=None,
        name=None,
    ):
        if num_parallel_reads is not None:
            self._read_in_parallel(
                filenames,
                num_parallel_reads,
                lambda f: TextLineDataset(f, compression_type, buffer_size),
            )
            return
        with ops.name_scope("TextLineDataset"):
            inputs = [
                _filenames(filenames),
                ops.convert_to_tensor(compression_type or "", dtype=dtypes.string),
                _i64(buffer_size or 0, "buffer_size"),
            ]
            super().__init__("TextLineDataset", inputs, "TextLineDataset")


class FixedLengthRecordDataset(_FileDataset):
    """Fixed-length records of files, after `header_bytes` and before `footer_bytes`."""

    def __init__(
        self,
        filenames,
        record_bytes,
        header_bytes=None,
        footer_bytes=None,
        buffer_size=None,
        compression_type=None,
        num_parallel_reads=None,
        name=None,
    ):
        if num_parallel_reads is not None:
            self._read_in_parallel(
                filenames,
                num_parallel_reads,
                lambda f: FixedLengthRecordDataset(
                    f, record_bytes, header_bytes, footer_bytes, buffer_size, compression_type
                ),
            )
            return
        with ops.name_scope("FixedLengthRecordDataset"):
            inputs = [
                _filenames(filenames),
                _i64(header_bytes or 0, "header_bytes"),
                _i64(record_bytes, "record_bytes"),
                _i64(footer_bytes or 0, "footer_bytes"),
                _i64(buffer_size or 0, "buffer_size"),
                ops.convert_to_tensor(compression_type or "", dtype=dtypes.string),
            ]
            super().__init__("FixedLengthRecordDatasetV2", inputs, "FixedLengthRecordDataset")


# -- tf.data.experimental's functions that Dataset's methods share ---------------------


def Counter(start=0, step=1, dtype=dtypes.int64):  # noqa: N802 - TF's name
    """start, start + step, ... (int64 range to the type's end)."""
    end = np.iinfo(np.int64).max if _static(step, 1) > 0 else np.iinfo(np.int64).min
    return Dataset.range(start, end, step, output_type=dtypes.as_dtype(dtype))


def _static(v, default):
    if isinstance(v, ops.Tensor):
        c = ops.constant_value(v)
        return default if c is None else int(c)
    return int(v)


def choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=False) -> Dataset:
    """Elements of `datasets[i]` for each i of `choice_dataset` (int64 scalars); the
    picks of an exhausted dataset are skipped (or end it, with stop_on_empty_dataset).

    Raises:
      TypeError: choice_dataset is not of int64 scalars; datasets of different types.
      InvalidArgumentError (at run time): a choice outside [0, len(datasets)).
    """
    datasets = list(datasets)
    if not datasets:
        raise ValueError("Invalid `datasets`. `datasets` should not be empty.")
    specs = choice_dataset._flat_specs()
    if len(specs) != 1 or specs[0].dtype != dtypes.int64 or specs[0].shape.ndims not in (0, None):
        raise TypeError(
            "Invalid `choice_dataset`. Elements of `choice_dataset` must be scalar of "
            f"`tf.int64` dtype, but got {choice_dataset.output_types}."
        )
    return _interleave_of(
        datasets,
        "DirectedInterleaveDataset",
        [choice_dataset._variant, [d._variant for d in datasets]],
        stop_on_empty_dataset,
    )


def sample_from_datasets(datasets, weights=None, seed=None, stop_on_empty_dataset=False):
    """Elements drawn from `datasets` at random, dataset i with probability weights[i]
    (uniform by default; a list, a tensor, or a dataset of weights), as TF 2.21 builds
    it: a seeded selection picks the same datasets as TF's (asyncflow/data/resampling.py).

    Raises:
      ValueError: no datasets, or weights of another length.
      TypeError: weights not float32 / float64.
    """
    return resampling.sample_from_datasets(Dataset, datasets, weights, seed, stop_on_empty_dataset)


def _interleave_of(datasets, op_type, inputs, stop) -> Dataset:
    first = datasets[0]
    for d in datasets[1:]:
        if [s.dtype for s in d._flat_specs()] != [s.dtype for s in first._flat_specs()]:
            raise TypeError(
                "Incompatible dataset elements: all datasets must have the same types, "
                f"got {first.output_types} and {d.output_types}."
            )
    specs = [
        _Spec(s.dtype, _common_shape([d._flat_specs()[k].shape for d in datasets]))
        for k, s in enumerate(first._flat_specs())
    ]
    ds = Dataset(None, _pack(first._structure, specs))
    ds._variant = dataset_ops.dataset_op(
        op_type,
        inputs,
        {**ds._out_attrs(), "stop_on_empty_dataset": bool(stop)},
        name=op_type.lstrip("_"),
    )
    return ds


def _common_shape(shapes):
    out = shapes[0]
    for s in shapes[1:]:
        out = out.most_specific_compatible_shape(s)
    return out


def bucket_by_sequence_length(
    element_length_func,
    bucket_boundaries,
    bucket_batch_sizes,
    padded_shapes=None,
    padding_values=None,
    pad_to_bucket_boundary=False,
    no_padding=False,
    drop_remainder=False,
):
    """Elements batched by length: bucket i holds lengths in [boundaries[i-1],
    boundaries[i]) and batches bucket_batch_sizes[i] of them, padded to the longest
    (or, with pad_to_bucket_boundary, to boundaries[i] - 1).

    Raises:
      ValueError: len(bucket_batch_sizes) != len(bucket_boundaries) + 1.
      InvalidArgumentError (at run time, with pad_to_bucket_boundary): an element of a
        length >= max(bucket_boundaries).
    """
    if len(bucket_batch_sizes) != len(bucket_boundaries) + 1:
        raise ValueError(
            "len(bucket_batch_sizes) must equal len(bucket_boundaries) + 1 but "
            f"len(bucket_batch_sizes)={len(bucket_batch_sizes)} and "
            f"len(bucket_boundaries)={len(bucket_boundaries)}"
        )
    boundaries = [int(b) for b in bucket_boundaries]
    lows = [np.iinfo(np.int32).min, *boundaries]
    highs = [*boundaries, np.iinfo(np.int32).max]

    def apply(ds: Dataset) -> Dataset:
        from asyncflow.ops import cast_ops, check_ops, math_ops, reduction_ops, slicing_ops

        with ops.name_scope("bucket_by_seq_length"):
            sizes = ops.convert_to_tensor(bucket_batch_sizes, dtype=dtypes.int64)
            bounds = ops.convert_to_tensor(boundaries or [0], dtype=dtypes.int64)

        def bucket_of(*args):
            length = cast_ops.cast(element_length_func(*args), dtypes.int64)
            fits = math_ops.logical_and(
                math_ops.less_equal(ops.convert_to_tensor(lows, dtypes.int64), length),
                math_ops.less(length, ops.convert_to_tensor(highs, dtypes.int64)),
            )
            return cast_ops.cast(
                reduction_ops.argmax(cast_ops.cast(fits, dtypes.int32)), dtypes.int64
            )

        def size_of(bucket):
            return slicing_ops.gather(sizes, bucket)

        def batch_bucket(bucket, window):
            batch = slicing_ops.gather(sizes, bucket)
            if no_padding:
                return window.batch(batch, drop_remainder=drop_remainder)
            shapes = padded_shapes
            if shapes is None:
                shapes = window._map_specs(lambda s: s.shape)
            if pad_to_bucket_boundary:
                check = check_ops.assert_less(
                    bucket,
                    ops.convert_to_tensor(len(boundaries), dtypes.int64),
                    message="When pad_to_bucket_boundary=True, elements must have length "
                    "< max(bucket_boundaries).",
                )
                with ops.control_dependencies([check]):
                    fill = slicing_ops.gather(bounds, bucket) - 1
                shapes = _map_shapes(ds, shapes, lambda s: _filled(s, fill))
            return window.padded_batch(
                batch, shapes, padding_values, drop_remainder=drop_remainder
            )

        return ds.group_by_window(bucket_of, batch_bucket, window_size_func=size_of)

    return apply


def _map_shapes(ds, shapes, f):
    flat = [tensor_shape.as_shape(s) if not isinstance(s, ops.Tensor) else s
            for s in _flat_like(ds._structure, shapes)]  # fmt: skip
    return _pack(ds._structure, [f(s) for s in flat])


def _filled(shape, fill):
    """`shape` (static) with its unknown dimensions `fill` (an int64 scalar tensor)."""
    from asyncflow.ops import manip_ops

    if isinstance(shape, ops.Tensor) or shape.ndims is None:
        return shape
    dims = [ops.convert_to_tensor(d, dtypes.int64) if d is not None else fill
            for d in shape.as_list()]  # fmt: skip
    return manip_ops.stack(dims) if dims else ops.convert_to_tensor([], dtypes.int64)
