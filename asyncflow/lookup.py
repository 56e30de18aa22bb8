"""`tf.lookup` (TF1's `tf.compat.v1.lookup`): hash tables and their initializers.

    table = af.lookup.StaticHashTable(
        af.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2], value_dtype=af.int64), -1)
    ids = table.lookup(words)           # run af.tables_initializer() first

A static table is filled by its initializer's op, which goes into
GraphKeys.TABLE_INITIALIZERS (`tables_initializer()` runs them all); running a
lookup first is TF's FailedPreconditionError "Table not initialized.".
Made inside a dataset function, a StaticHashTable's table is the graph's, as TF makes
it outside the function (it lasts the session), while its initializer runs with each
call, before the table's reads (a no-op once the table is filled), and is no table
initializer of the graph.
`StaticVocabularyTable` gives keys not in the vocabulary one of `num_oov_buckets` ids
after it, by TF's hash (Fingerprint64 of the key as a string).  The ops and their
errors are in ops/lookup_ops.py.

`experimental_is_anonymous=True` (every table class) builds the table's Anonymous* op:
each run makes a new table owned by its handle, so the initializer (or insert) and the
lookups go in one run, the lookups under a control dependency on it.
"""

from __future__ import annotations

import types

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow.variables import in_dataset_function

__all__ = [
    "KeyValueTensorInitializer",
    "StaticHashTable",
    "StaticVocabularyTable",
    "TextFileIndex",
    "TextFileInitializer",
    "experimental",
]


def _check_keys(keys, key_dtype):
    keys = ops.convert_to_tensor(keys, name="keys")
    if keys.dtype.base_dtype != key_dtype:
        raise TypeError(
            f"Dtype of argument `keys` must be {key_dtype!r}, received: {keys.dtype!r}"
        )
    return keys


class _Table:
    """What every table has: its handle, dtypes, lookup, size, export."""

    def __init__(self, key_dtype, value_dtype, handle, default_value):
        self._key_dtype = dtypes.as_dtype(key_dtype)
        self._value_dtype = dtypes.as_dtype(value_dtype)
        self._handle = handle
        # What the table's reads run after (a static table's initializer inside a
        # dataset function: StaticHashTable).
        self._reads_after: tuple = ()
        self._default_value = default_value

    @property
    def key_dtype(self):
        return self._key_dtype

    @property
    def value_dtype(self):
        return self._value_dtype

    @property
    def resource_handle(self):
        return self._handle

    @property
    def name(self) -> str:
        return self._handle.op.name

    @property
    def default_value(self):
        return self._default_value

    def size(self, name=None):
        with (
            ops.name_scope(name, f"{self.name}_Size"),
            ops.control_dependencies(self._reads_after),
        ):
            return ops.apply_op("LookupTableSizeV2", [self._handle], {}).outputs[0]

    def lookup(self, keys, name=None):
        """The value of each key (any shape), the default where a key is missing.

        Raises:
          TypeError: keys of another dtype than the table's.
          FailedPreconditionError (at run time): a static table not yet initialized.
        """
        from asyncflow.sparse_tensor import SparseTensor

        if isinstance(keys, SparseTensor):
            values = self.lookup(keys.values, name)
            return SparseTensor(keys.indices, values, keys.dense_shape)
        with ops.name_scope(name, f"{self.name}_Lookup"):
            keys = _check_keys(keys, self._key_dtype)
            with ops.control_dependencies(self._reads_after):
                return ops.apply_op(
                    "LookupTableFindV2",
                    [self._handle, keys, self._default_value],
                    {"Tin": self._key_dtype, "Tout": self._value_dtype},
                ).outputs[0]

    def __getitem__(self, keys):
        return self.lookup(keys)

    def export(self, name=None):
        """All keys and values (in the table's own order)."""
        with (
            ops.name_scope(name, f"{self.name}_Export"),
            ops.control_dependencies(self._reads_after),
        ):
            out = ops.apply_op(
                "LookupTableExportV2",
                [self._handle],
                {"Tkeys": self._key_dtype, "Tvalues": self._value_dtype},
            ).outputs
            return out[0], out[1]


def _table_op(op_type, name, key_dtype, value_dtype, shared_name, extra=None, anonymous=False,
              sharing=False):  # fmt: skip
    """A table's op; `anonymous`: its Anonymous* spelling (a new table each run, owned
    by the handle: no container or shared name); `sharing`: named by its node."""
    attrs = {"key_dtype": key_dtype, "value_dtype": value_dtype, **(extra or {})}
    if anonymous:
        op_type = "Anonymous" + op_type.removesuffix("V2")
    else:
        attrs.update(container="", shared_name=shared_name or "", use_node_name_sharing=sharing)
    return ops.apply_op(op_type, [], attrs, name=name).outputs[0]


class StaticHashTable(_Table):
    """A table filled once by `initializer` (see the module note)."""

    def __init__(self, initializer, default_value, name=None, experimental_is_anonymous=False):
        self._initializer = initializer
        with ops.name_scope(name, "hash_table") as scope:
            handle = _table_op(
                "HashTableV2",
                scope,  # (a scope name: the op is named exactly that, as TF's)
                initializer.key_dtype,
                initializer.value_dtype,
                None,
                anonymous=experimental_is_anonymous,
            )
            default = ops.convert_to_tensor(default_value, dtype=initializer.value_dtype)
        # TF makes the table under init_scope: one made in a dataset function is the
        # graph's, lasting the session (data/dataset.py `_Traced`).
        handle.op._lifted = True
        super().__init__(initializer.key_dtype, initializer.value_dtype, handle, default)
        self._init_op = initializer.initialize(self)
        graph = ops.get_default_graph()
        if in_dataset_function(graph):
            # TF runs the initializer with each call of the function, before the table's
            # reads (a no-op once the table is filled), and not as a table initializer
            # of the graph (it may read the function's arguments).
            self._reads_after = (self._init_op,)
            graph.get_collection_ref(ops.GraphKeys.TABLE_INITIALIZERS).remove(self._init_op)

    @property
    def initializer(self):
        return self._init_op

    def _trackable_children(self) -> list:
        """Its initializer, as TF tracks it (a SavedModel adds the resource functions,
        `_resource_functions`)."""
        return [("_initializer", self._initializer)]

    def _resource_functions(self) -> list:
        """(name, tf.function) of what a TF 2 SavedModel keeps of the table: one creating
        the HashTableV2 handle, one filling it (its captures: this table's handle and
        the initializer's asset or constants; it returns 1), one releasing it (nothing
        to release here: it returns 1)."""
        if getattr(self, "_saved_functions", None) is None:
            from asyncflow import tf_function
            from asyncflow.ops import array_ops

            handle_op = self._handle.op
            anonymous = handle_op.type.startswith("Anonymous")
            attrs = {} if anonymous else {
                key: handle_op.get_attr(key)
                for key in ("container", "shared_name", "use_node_name_sharing")
            }  # fmt: skip
            shared = attrs.pop("shared_name", None)

            def _creator():
                return _table_op(
                    "HashTableV2", "hash_table", self._key_dtype, self._value_dtype,
                    shared, attrs, anonymous=anonymous,
                )  # fmt: skip

            def _initializer():
                op = self._initializer._fill_op(self._handle)
                with ops.control_dependencies([op]):
                    return array_ops.constant(1, dtype=dtypes.int32)

            def _destroyer():
                return array_ops.constant(1, dtype=dtypes.int32)

            self._saved_functions = [
                (name, tf_function.function(fn, input_signature=[]))
                for name, fn in (
                    ("_create_resource", _creator),
                    ("_initialize", _initializer),
                    ("_destroy_resource", _destroyer),
                )
            ]
        return self._saved_functions


HashTable = StaticHashTable  # (TF1's tf.contrib.lookup name)


class KeyValueTensorInitializer:
    """Fill a table from a tensor of keys and a tensor of values (TF 2.21: one
    LookupTableImportV2 op)."""

    def __init__(self, keys, values, key_dtype=None, value_dtype=None, name=None):
        with ops.name_scope(name, "key_value_init") as scope:
            self._keys = ops.convert_to_tensor(keys, dtype=key_dtype, name="keys")
            self._values = ops.convert_to_tensor(values, dtype=value_dtype, name="values")
            self._name = scope  # (initialize re-enters this very scope, as TF's)
        self.key_dtype = self._keys.dtype.base_dtype
        self.value_dtype = self._values.dtype.base_dtype
        ks, vs = self._keys.shape, self._values.shape
        if ks.ndims is not None and vs.ndims is not None and not ks.is_compatible_with(vs):
            raise ValueError(
                f"Dimensions must be equal for keys and values: shapes {ks} and {vs}."
            )

    def _trackable_children(self) -> list:
        return []

    def _fill_op(self, handle):
        """The op filling table `handle` (in a SavedModel's initializer function)."""
        return ops.apply_op(
            "LookupTableImportV2",
            [handle, self._keys, self._values],
            {"Tin": self.key_dtype, "Tout": self.value_dtype},
        )

    def initialize(self, table):
        with ops.name_scope(self._name):
            op = ops.apply_op(
                "LookupTableImportV2",
                [table.resource_handle, self._keys, self._values],
                {"Tin": self.key_dtype, "Tout": self.value_dtype},
            )
        ops.add_to_collection(ops.GraphKeys.TABLE_INITIALIZERS, op)
        return op


class TextFileIndex:
    WHOLE_LINE = -2
    LINE_NUMBER = -1


class TextFileInitializer:
    """Fill a table from a text file: each line's `key_index`-th and `value_index`-th
    fields (split at `delimiter`), or the whole line (-2), or the line number (-1)."""

    def __init__(
        self,
        filename,
        key_dtype,
        key_index,
        value_dtype,
        value_index,
        vocab_size=None,
        delimiter="\t",
        name=None,
        value_index_offset=0,
    ):
        self.key_dtype = dtypes.as_dtype(key_dtype)
        self.value_dtype = dtypes.as_dtype(value_dtype)
        if key_index < -2 or value_index < -2:
            raise ValueError(f"Invalid key_index {key_index} or value_index {value_index}.")
        if key_index == TextFileIndex.LINE_NUMBER and self.key_dtype != dtypes.int64:
            raise ValueError("Signature mismatch. Keys must be dtype int64 for line numbers.")
        if key_index == TextFileIndex.WHOLE_LINE and self.key_dtype not in (
            dtypes.string,
            dtypes.int64,
        ):
            raise ValueError("Signature mismatch. Keys must be dtype string or int64.")
        if vocab_size is not None and vocab_size <= 0:
            raise ValueError(f"Invalid vocab_size {vocab_size}.")
        self._filename = filename
        self._args = {
            "key_index": int(key_index),
            "value_index": int(value_index),
            "vocab_size": -1 if vocab_size is None else int(vocab_size),
            "delimiter": delimiter,
            "offset": int(value_index_offset),
        }
        self._name = name or "text_file_init"
        self._asset = None
        self._graph = None

    def _trackable_children(self) -> list:
        """The vocabulary file as an Asset (TF's "_filename"), when it is a path."""
        if self._asset is None and isinstance(self._filename, str | bytes):
            from asyncflow.trackable import Asset

            # (in the table's graph, whatever graph is the default when asked)
            graph = self._graph or ops.get_default_graph()
            with graph.as_default():
                self._asset = Asset(self._filename)
        return [("_filename", self._asset)] if self._asset is not None else []

    def _fill_op(self, handle):
        """The op filling table `handle` from the asset's path (in a SavedModel's
        initializer function)."""
        if not self._trackable_children():
            raise ValueError(
                f"save: the vocabulary file of {self._name} is a tensor, not a path; a "
                "SavedModel can only hold a file given by its path"
            )
        return ops.apply_op(
            "InitializeTableFromTextFileV2",
            [handle, self._asset.asset_path],
            dict(self._args),
        )

    def initialize(self, table):
        self._graph = ops.get_default_graph()
        with ops.name_scope(self._name):
            fn = ops.convert_to_tensor(self._filename, dtype=dtypes.string, name="asset_filepath")
            op = ops.apply_op(
                "InitializeTableFromTextFileV2", [table.resource_handle, fn], dict(self._args)
            )
        ops.add_to_collection(ops.GraphKeys.TABLE_INITIALIZERS, op)
        ops.add_to_collection(ops.GraphKeys.ASSET_FILEPATHS, fn)
        return op


class StaticVocabularyTable(_Table):
    """A vocabulary (`initializer`, int64 ids) whose unknown keys get one of
    `num_oov_buckets` ids after it: size + Fingerprint64(str(key)) % num_oov_buckets."""

    def __init__(self, initializer, num_oov_buckets, lookup_key_dtype=None, name=None,
                 experimental_is_anonymous=False):  # fmt: skip
        if num_oov_buckets <= 0:
            raise ValueError("`num_oov_buckets` must be > 0; use StaticHashTable.")
        if initializer.value_dtype != dtypes.int64:
            raise TypeError(
                f"Invalid `value_dtype`, expected int64 but got {initializer.value_dtype}."
            )
        self._num_oov = int(num_oov_buckets)
        # (TF 2.21 names the inner table "hash_table", not under `name`)
        self._table = StaticHashTable(
            initializer, -1, experimental_is_anonymous=experimental_is_anonymous
        )
        key_dtype = dtypes.as_dtype(lookup_key_dtype or initializer.key_dtype)
        super().__init__(key_dtype, dtypes.int64, self._table.resource_handle, None)

    def _trackable_children(self) -> list:
        """As TF's: the vocabulary table is the resource (its handle, its functions)."""
        return self._table._trackable_children()

    def _resource_functions(self) -> list:
        return self._table._resource_functions()

    @property
    def initializer(self):
        return self._table.initializer

    def size(self, name=None):
        return self._table.size(name) + self._num_oov

    def lookup(self, keys, name=None):
        from asyncflow.ops import cast_ops, math_ops, string_hash_ops, string_ops
        from asyncflow.sparse_tensor import SparseTensor

        if isinstance(keys, SparseTensor):
            return SparseTensor(keys.indices, self.lookup(keys.values, name), keys.dense_shape)
        with ops.name_scope(name, f"{self.name}_Lookup"):
            keys = _check_keys(keys, self._key_dtype)
            if keys.dtype != self._table.key_dtype:
                keys_t = cast_ops.cast(keys, self._table.key_dtype)
            else:
                keys_t = keys
            ids = self._table.lookup(keys_t)
            text = keys if keys.dtype == dtypes.string else string_ops.as_string(keys)
            bucket = string_hash_ops.string_to_hash_bucket_fast(text, self._num_oov)
            oov = math_ops.add(self._table.size(), bucket)
            return ops.apply_op(
                "SelectV2", [math_ops.equal(ids, -1), oov, ids], {"T": dtypes.int64}
            ).outputs[0]


class MutableHashTable(_Table):
    """A table its ops change: `insert`, `remove`; values scalars or tensors of
    `default_value`'s shape."""

    def __init__(self, key_dtype, value_dtype, default_value, name="MutableHashTable",
                 checkpoint=True, experimental_is_anonymous=False):  # fmt: skip
        default = ops.convert_to_tensor(default_value, dtype=value_dtype)
        shape = default.shape
        with ops.name_scope(name, "MutableHashTable") as scope:
            tname = scope
            if shape.ndims:
                handle = _table_op(
                    "MutableHashTableOfTensorsV2", tname, dtypes.as_dtype(key_dtype),
                    dtypes.as_dtype(value_dtype), None, {"value_shape": shape},
                    anonymous=experimental_is_anonymous, sharing=checkpoint,
                )  # fmt: skip
            else:
                handle = _table_op(
                    "MutableHashTableV2", tname, dtypes.as_dtype(key_dtype),
                    dtypes.as_dtype(value_dtype), None, anonymous=experimental_is_anonymous,
                    sharing=checkpoint,
                )  # fmt: skip
        super().__init__(key_dtype, value_dtype, handle, default)

    def insert(self, keys, values, name=None):
        with ops.name_scope(name, f"{self.name}_lookup_table_insert"):
            keys = _check_keys(keys, self._key_dtype)
            values = ops.convert_to_tensor(values, dtype=self._value_dtype, name="values")
            return ops.apply_op(
                "LookupTableInsertV2",
                [self._handle, keys, values],
                {"Tin": self._key_dtype, "Tout": self._value_dtype},
            )

    def remove(self, keys, name=None):
        with ops.name_scope(name, f"{self.name}_lookup_table_remove"):
            keys = _check_keys(keys, self._key_dtype)
            return ops.apply_op(
                "LookupTableRemoveV2", [self._handle, keys], {"Tin": self._key_dtype}
            )


class DenseHashTable(MutableHashTable):
    """A mutable table kept in a bucket array (TF's MutableDenseHashTableV2): `empty_key`
    and `deleted_key` mark free and removed buckets and can never be keys.

    Raises (at run time): InvalidArgumentError for a key equal to either, or equal
    empty and deleted keys.
    """

    def __init__(self, key_dtype, value_dtype, default_value, empty_key, deleted_key,
                 initial_num_buckets=None, name="MutableDenseHashTable", checkpoint=True,
                 experimental_is_anonymous=False):  # fmt: skip
        key_dtype, value_dtype = dtypes.as_dtype(key_dtype), dtypes.as_dtype(value_dtype)
        default = ops.convert_to_tensor(default_value, dtype=value_dtype, name="default_value")
        empty = ops.convert_to_tensor(empty_key, dtype=key_dtype, name="empty_key")
        deleted = ops.convert_to_tensor(deleted_key, dtype=key_dtype, name="deleted_key")
        with ops.name_scope(name, "MutableDenseHashTable") as scope:
            attrs = {"key_dtype": key_dtype, "value_dtype": value_dtype,
                     "value_shape": default.shape}  # fmt: skip
            if not experimental_is_anonymous:
                attrs.update(container="", shared_name="", use_node_name_sharing=True)
            if initial_num_buckets is not None:
                attrs["initial_num_buckets"] = initial_num_buckets
            op_type = (
                "AnonymousMutableDenseHashTable"
                if experimental_is_anonymous
                else "MutableDenseHashTableV2"
            )
            handle = ops.apply_op(op_type, [empty, deleted], attrs, name=scope).outputs[0]
        _Table.__init__(self, key_dtype, value_dtype, handle, default)

    def insert_or_assign(self, keys, values, name=None):
        return self.insert(keys, values, name)

    def erase(self, keys, name=None):
        return self.remove(keys, name)


experimental = types.SimpleNamespace(
    DenseHashTable=DenseHashTable,
    MutableHashTable=MutableHashTable,
    StaticHashTable=StaticHashTable,
    StaticVocabularyTable=StaticVocabularyTable,
)
