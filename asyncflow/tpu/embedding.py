"""`tf.tpu.experimental.embedding`'s mid-level APIs on a machine with no TPU, as TF
2.21's CPU build has them, and `serving_embedding_lookup`, which runs on CPU.

- `TPUEmbedding` outside a TPUStrategy (there is none here) is TF's CPU form: it names
  its tables (`table_<i>` where unnamed), gives each table without an optimizer the
  one passed, `build()` creates each table's variable and its optimizer's slots
  (`<table>/<slot>`), and `enqueue`/`dequeue`/`apply_gradients` raise RuntimeError.
- `TPUEmbeddingV0` and `TPUEmbeddingV2` refuse to be created outside a TPUStrategy
  (RuntimeError), as TF's.
- `TPUEmbeddingForServing` is created; in a TF1 graph TF's `build()` (and so its
  tables and lookups) fails on a scope name it makes ("_sparse_core_table_layouts"),
  and so does this one.
- `serving_embedding_lookup(inputs, weights, tables, feature_config)` looks each
  feature up in its table's variable: dense ids gather rows; sparse and ragged ids
  combine each row's embeddings by the table's combiner, or, for a sequence feature,
  lay them out as [batch, max_sequence_length, dim].
"""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow import nest
from asyncflow.distribute.context import get_strategy
from asyncflow.ragged import RaggedTensor
from asyncflow.resource_variable import ResourceVariable
from asyncflow.sparse_tensor import SparseTensor
from asyncflow.tpu.embedding_config import _Optimizer

__all__ = [
    "TPUEmbedding",
    "TPUEmbeddingForServing",
    "TPUEmbeddingV0",
    "TPUEmbeddingV2",
    "serving_embedding_lookup",
]


def _tables_of(feature_config) -> list:
    tables = []
    for feature in nest.flatten(feature_config):
        if feature.table not in tables:
            tables.append(feature.table)
    return tables


def _create_variables(tables) -> dict:
    """Each table's variable and its optimizer's slots: {table name: {"parameters":
    variable, slot: variable}}."""
    made = {}
    for table in tables:

        def create(name, initializer, table=table):
            shape = (table.vocabulary_size, table.dim)
            return ResourceVariable(
                initial_value=lambda: initializer(shape, dtype=table.dtype),
                name=name,
                dtype=table.dtype,
            )

        parameters = create(table.name, table.initializer)
        variables = {"parameters": parameters}
        if table.optimizer is not None:

            def create_slot(slot, initializer, table=table):
                return create(f"{table.name}/{slot}", initializer)

            variables.update(table.optimizer._create_slots(parameters, create_slot))
        made[table.name] = variables
    return made


class TPUEmbedding:
    """`tf.tpu.experimental.embedding.TPUEmbedding` outside a TPUStrategy.

    Raises:
      ValueError: a table's optimizer is not an embedding optimizer, or two tables
        share a name.
    """

    def __init__(self, feature_config, optimizer, pipeline_execution_with_tensor_core=False):
        self._strategy = get_strategy()
        self._using_tpu = False
        self._pipeline_execution_with_tensor_core = pipeline_execution_with_tensor_core
        self._feature_config = feature_config
        self._output_shapes = [f.output_shape for f in nest.flatten(feature_config)]
        self._num_cores_per_replica = None
        self._table_config = _tables_of(feature_config)
        names = []
        for i, table in enumerate(self._table_config):
            if table.optimizer is None:
                table.optimizer = optimizer
            if table.optimizer is not None and not isinstance(table.optimizer, _Optimizer):
                raise ValueError(
                    f"{type(table.optimizer)} is an unsupported optimizer class. Please pass "
                    "an instance of one of the optimizer classes under "
                    "tf.tpu.experimental.embedding."
                )
            if table.name is None:
                table.name = f"table_{i}"
            if table.name in names:
                raise ValueError(
                    "Tables must have a unique name. "
                    f"Multiple tables with name {table.name} found."
                )
            names.append(table.name)
        self._built = False

    def build(self, per_replica_input_shapes=None, per_replica_batch_size=None) -> None:
        """Create the tables' variables and slots (once)."""
        if self._built:
            return
        self._variables = _create_variables(self._table_config)
        self._built = True

    @property
    def embedding_tables(self) -> dict:
        """{TableConfig: its variable}, building first if needed."""
        self.build()
        return {t: self._variables[t.name]["parameters"] for t in self._table_config}

    def _tpu_only(self, what: str):
        return RuntimeError(
            f"{what} is not valid when TPUEmbedding object is not created under a TPUStrategy."
        )

    def enqueue(self, features, weights=None, training=True, name=None, device=None):
        """Raises RuntimeError: there is no TPUStrategy."""
        raise self._tpu_only("enqueue")

    def dequeue(self, name=None, partial_batch=False):
        """Raises RuntimeError: there is no TPUStrategy."""
        raise self._tpu_only("dequeue")

    def apply_gradients(self, gradients, name=None):
        """Raises RuntimeError: there is no TPUStrategy."""
        raise self._tpu_only("apply_gradients")


def _needs_tpu_strategy(cls_name: str):
    return RuntimeError(
        f"{cls_name} should be created under TPUStrategy but found {get_strategy()}."
    )


class TPUEmbeddingV0:
    """`tf.tpu.experimental.embedding.TPUEmbeddingV0`: only under a TPUStrategy.

    Raises:
      RuntimeError: always here (no TPUStrategy).
    """

    def __init__(self, feature_config, optimizer):
        raise _needs_tpu_strategy("TPUEmbeddingV0")


class TPUEmbeddingV2:
    """`tf.tpu.experimental.embedding.TPUEmbeddingV2` (SparseCore): only under a
    TPUStrategy.

    Raises:
      RuntimeError: always here (no TPUStrategy).
    """

    def __init__(self, feature_config, optimizer=None, pipeline_execution_with_tensor_core=False,
                 sparse_core_embedding_config=None):  # fmt: skip
        raise _needs_tpu_strategy("TPUEmbeddingV2")


class TPUEmbeddingForServing(TPUEmbedding):
    """`tf.tpu.experimental.embedding.TPUEmbeddingForServing`.

    In a TF1 graph TF's `build` fails before it makes a table (on a variable scope
    name it cannot take), and so do `embedding_tables` and `embedding_lookup` here.
    `serving_embedding_lookup` is the lookup that works in a graph.
    """

    def __init__(self, feature_config, optimizer, experimental_sparsecore_restore_info=None):
        super().__init__(feature_config, optimizer)
        self._sparsecore_restore_info = experimental_sparsecore_restore_info

    def build(self, per_replica_input_shapes=None, per_replica_batch_size=None) -> None:
        """Raises ValueError in a graph, as TF's."""
        if self._built:
            return
        raise ValueError(
            "'_sparse_core_table_layouts' is not a valid root scope name. A root scope name "
            "has to match the following pattern: ^[A-Za-z0-9.][A-Za-z0-9_.\\\\/>-]*$"
        )

    def embedding_lookup(self, features, weights=None):
        """Raises ValueError in a graph (see `build`)."""
        self.build()
        return serving_embedding_lookup(features, weights, self.embedding_tables,
                                        self._feature_config)  # fmt: skip

    __call__ = embedding_lookup


def _paths(structure, prefix="") -> list:
    """(joined path, leaf) pairs in flatten order: dict keys sorted, "/" between."""
    if isinstance(structure, dict):
        out = []
        for key in sorted(structure):
            out.extend(_paths(structure[key], f"{prefix}{key}/"))
        return out
    if isinstance(structure, (list, tuple)) and not hasattr(structure, "_fields"):
        out = []
        for i, item in enumerate(structure):
            out.extend(_paths(item, f"{prefix}{i}/"))
        return out
    return [(prefix[:-1], structure)]


def serving_embedding_lookup(inputs, weights, tables: dict, feature_config):
    """Each input's embeddings from `tables[feature.table]`, in `inputs`' structure.

    Raises:
      ValueError: inputs that are not in feature_config, weights with dense or
        sequence inputs or of another type than the input, an input that is not a
        Tensor, SparseTensor or RaggedTensor, or a ragged input of rank other than 2.
    """
    flat_inputs = _paths(inputs)
    flat_weights = [None] * len(flat_inputs)
    if weights is not None:
        nest.assert_same_structure(inputs, weights)
        flat_weights = nest.flatten(weights)
    features = dict(_paths(feature_config))
    keys = {key for key, _ in flat_inputs}
    if not keys.issubset(features.keys()):
        raise ValueError(
            f"Inputs are not a subset of feature_config. Inputs keys are {keys}, but "
            f"feature_config keys are {features.keys()}"
        )
    outputs = []
    for (path, inp), weight in zip(flat_inputs, flat_weights):
        feature = features[path]
        table = tables[feature.table]
        if weight is not None:
            if isinstance(inp, ops.Tensor):
                raise ValueError(f"Weight specified for {path}, but input is dense.")
            if type(weight) is not type(inp):
                raise ValueError(
                    f"Weight for {path} is of type {type(weight)} but it does not match "
                    f"type of the input which is {type(inp)}."
                )
            if feature.max_sequence_length > 0:
                raise ValueError(f"Weight specified for {path}, but this is a sequence feature.")
        if isinstance(inp, ops.Tensor):
            if feature.max_sequence_length > 0:
                raise ValueError(
                    f"Feature {path} is a sequence feature but a dense tensor was passed."
                )
            from asyncflow.ops.nn_impl import embedding_lookup

            outputs.append(embedding_lookup(table, inp))
        elif isinstance(inp, SparseTensor):
            outputs.append(_lookup_sparse(inp, weight, table, feature))
        elif isinstance(inp, RaggedTensor):
            outputs.append(_lookup_ragged(inp, weight, table, feature))
        else:
            raise ValueError(
                f"Input {path} is type {type(inp)}. Tensor, SparseTensor or RaggedTensor expected."
            )
    return nest.pack_sequence_as(inputs, outputs)


def _lookup_sparse(inp, weight, table, feature):
    from asyncflow.nn_composites import embedding_lookup_sparse
    from asyncflow.nn_sparse_extras import safe_embedding_lookup_sparse
    from asyncflow.ops import cast_ops, manip_ops, scatter_nd_ops, slicing_ops
    from asyncflow.ops.sparse_ops import sparse_slice

    rank = inp.shape.rank
    if not feature.output_shape and feature.max_sequence_length > 0 and rank in (None, 2):
        # A sequence feature: each id's embedding at its (row, position), cut at
        # max_sequence_length positions.
        batch = cast_ops.cast(inp.dense_shape[0], "int64")
        kept = sparse_slice(inp, [0, 0], manip_ops.stack([batch, feature.max_sequence_length]))
        shape = manip_ops.stack([batch, feature.max_sequence_length, feature.table.dim])
        rows = slicing_ops.gather(table.read_value(), kept.values)
        return scatter_nd_ops.scatter_nd(kept.indices, rows, shape)
    combiner = feature.table.combiner
    if not feature.validate_weights_and_indices and rank is not None and rank <= 2:
        return embedding_lookup_sparse(table, inp, sp_weights=weight, combiner=combiner)
    return safe_embedding_lookup_sparse(table, inp, sparse_weights=weight, combiner=combiner)


def _lookup_ragged(inp, weight, table, feature):
    from asyncflow.math_composites import div_no_nan
    from asyncflow.ops import array_ops, math_ops
    from asyncflow.ops.nn_impl import embedding_lookup

    if inp.shape.rank != 2:
        raise ValueError(f"Only rank 2 ragged tensor is supported, but got rank {inp.shape.rank}")
    dim = feature.table.dim
    if feature.max_sequence_length > 0 and not feature.output_shape:
        batch = inp.shape[0]
        looked_up = inp.with_values(embedding_lookup(table, inp.values))
        return looked_up.to_tensor(shape=[batch, feature.max_sequence_length, dim])
    # Each row's weighted sum of embeddings, divided (mean, sqrtn) by its weights'.
    values = embedding_lookup(table, inp.values)
    if weight is None:
        w = array_ops.ones_like(inp.values, dtype=table.dtype)
    else:
        w = weight.values
    from asyncflow.ops.gradient_ops import unsorted_segment_sum

    rows, nrows = inp.value_rowids(), inp.nrows()
    summed = unsorted_segment_sum(values * array_ops.expand_dims(w, 1), rows, nrows)
    combiner = feature.table.combiner
    if combiner == "mean":
        summed = div_no_nan(summed, array_ops.expand_dims(unsorted_segment_sum(w, rows, nrows), 1))
    elif combiner == "sqrtn":
        norm = math_ops.sqrt(unsorted_segment_sum(w * w, rows, nrows))
        summed = div_no_nan(summed, array_ops.expand_dims(norm, 1))
    if feature.output_shape:
        summed = array_ops.reshape(summed, feature.output_shape.as_list() + [dim])
    return summed
