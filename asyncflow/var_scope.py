"""TF1 variable scopes and `get_variable`: named, shareable variables.

Each graph keeps (in `graph._attached`):
  "variable_store"        the `_VariableStore`: full name -> Variable made by get_variable;
  "variable_scope_store"  the current VariableScope and how often each scope name was
                          opened (per thread, as TF1), which makes default names unique.

Reuse (TF1): a scope's `reuse` is False (create only), True (reuse only) or AUTO_REUSE;
sub-scopes inherit it, and `reuse=False` on a sub-scope cannot turn inherited reuse off.
Variable names depend on variable scopes only; op names on name scopes, so re-entering
a scope object opens a fresh name scope ("foo_1/") while its variables stay "foo/v".
"""

from __future__ import annotations

import contextlib
import copy
import enum
import functools
import inspect
import threading

from asyncflow import dtypes, tensor_shape
from asyncflow import graph as ops
from asyncflow import partitioned_variables as pv
from asyncflow.graph import GraphKeys
from asyncflow.ops import array_ops, init_ops
from asyncflow.variables import (
    Variable,
    VariableAggregation,
    VariableSynchronization,
    dataset_function_scope,
    in_dataset_function,
)

__all__ = [
    "AUTO_REUSE",
    "VariableScope",
    "variable_scope",
    "variable_op_scope",
    "get_variable",
    "get_local_variable",
    "get_variable_scope",
    "no_regularizer",
]


class _ReuseMode(enum.Enum):
    AUTO_REUSE = 1


AUTO_REUSE = _ReuseMode.AUTO_REUSE


def no_regularizer(_):
    """Use this function to prevent regularization of variables."""
    return None


class _VariableStore:
    """Variables created by get_variable, by full name."""

    def __init__(self):
        self._vars: dict[str, Variable] = {}
        self._partitioned_vars: dict[str, pv.PartitionedVariable] = {}

    def get_variable(
        self,
        name,
        shape=None,
        dtype=dtypes.float32,
        initializer=None,
        regularizer=None,
        reuse=None,
        trainable=None,
        collections=None,
        caching_device=None,
        partitioner=None,
        validate_shape=True,
        use_resource=None,
        custom_getter=None,
        constraint=None,
        synchronization=VariableSynchronization.AUTO,
        aggregation=VariableAggregation.NONE,
    ):
        if custom_getter is not None and not callable(custom_getter):
            raise ValueError(f"Passed a custom_getter which is not callable: {custom_getter}")
        dtype = getattr(dtype, "base_dtype", dtype)

        def true_getter(
            name,
            shape=None,
            dtype=dtypes.float32,
            initializer=None,
            regularizer=None,
            reuse=None,
            trainable=None,
            collections=None,
            caching_device=None,
            partitioner=None,
            validate_shape=True,
            use_resource=None,
            constraint=None,
            synchronization=VariableSynchronization.AUTO,
            aggregation=VariableAggregation.NONE,
        ):
            is_scalar = shape is not None and isinstance(shape, (list, tuple)) and not shape
            kwargs = dict(
                shape=shape,
                dtype=dtype,
                initializer=initializer,
                regularizer=regularizer,
                reuse=reuse,
                trainable=trainable,
                collections=collections,
                caching_device=caching_device,
                validate_shape=validate_shape,
                constraint=constraint,
                synchronization=synchronization,
                aggregation=aggregation,
                use_resource=use_resource,
            )
            if partitioner is not None and not is_scalar:
                if not callable(partitioner):
                    raise ValueError(f"Partitioner must be callable, but received: {partitioner}")
                return self._get_partitioned_variable(name, partitioner, **kwargs)
            return self._get_single_variable(name, **kwargs)

        kwargs = dict(
            name=name,
            shape=shape,
            dtype=dtype,
            initializer=initializer,
            regularizer=regularizer,
            reuse=reuse,
            trainable=trainable,
            collections=collections,
            caching_device=caching_device,
            partitioner=partitioner,
            validate_shape=validate_shape,
            use_resource=use_resource,
            synchronization=synchronization,
            aggregation=aggregation,
        )
        if custom_getter is None:
            return true_getter(constraint=constraint, **kwargs)
        if _accepts(custom_getter, "constraint"):
            kwargs["constraint"] = constraint
        return custom_getter(getter=true_getter, **kwargs)

    def _get_partitioned_variable(
        self,
        name,
        partitioner,
        shape=None,
        dtype=dtypes.float32,
        initializer=None,
        regularizer=None,
        reuse=None,
        **kwargs,
    ):
        """A PartitionedVariable "name" of slices "name/part_<i>" (TF1's rules)."""
        # As TF: only a Tensor initial value is sliced (a Python or NumPy value is not).
        initializing_from_value = isinstance(initializer, ops.Tensor)
        dtype = dtypes.as_dtype(dtype)
        shape = tensor_shape.as_shape(shape)
        if initializing_from_value:
            shape = shape.merge_with(initializer.shape)
            dtype = initializer.dtype.base_dtype
            init_value = initializer
        if name in self._vars:
            raise ValueError(
                "A partitioner was provided, but an unpartitioned version of the variable was "
                f"found: {name}.  Perhaps a variable of the same name was already created "
                "without partitioning?"
            )
        partitions = None
        if not reuse or partitioner:
            partitions = pv.call_partitioner(partitioner, shape, dtype)
        found = self._partitioned_vars.get(name)
        if found is not None:
            if reuse is False:
                raise ValueError(
                    f"Partitioned variable with name {name} already exists. Did you mean to "
                    "set reuse=True or reuse=tf.AUTO_REUSE in VarScope?"
                )
            if not shape.is_compatible_with(found.get_shape()):
                raise ValueError(
                    f"Trying to reuse partitioned variable {name}, but specified shape {shape} "
                    f"and found shape {found.get_shape()}."
                )
            if not dtype.is_compatible_with(found.dtype):
                raise ValueError(
                    f"Trying to reuse partitioned variable {name}, but specified dtype "
                    f"{dtype.name} and found dtype {found.dtype.name}."
                )
            if partitions is not None and found._get_partitions() != partitions:
                raise ValueError(
                    f"Trying to reuse partitioned variable {name}, but specified partitions "
                    f"{partitions} and found partitions {found._get_partitions()}."
                )
            return found
        if reuse is True:
            raise ValueError(
                f"PartitionedVariable {name} does not exist, or was not created with "
                "tf.get_variable(). Did you mean to set reuse=False or reuse=tf.AUTO_REUSE "
                "in VarScope?"
            )
        dim, count = pv.slice_dim_and_count(partitions)
        if f"{name}/part_0" in self._vars:
            raise ValueError(
                f"A partitioner was provided, but some partitions already exist: {name}/part_0"
            )
        full = shape.as_list()
        parts = []
        for i, (offset, part_shape) in enumerate(pv.iter_slices(full, count, dim)):
            info = pv.PartitionInfo(full_shape=full, var_offset=offset)
            if initializing_from_value:
                with ops.name_scope(name + "/PartitionedInitializer/"):
                    part_init = array_ops.slice(init_value, offset, part_shape)
                part_shape_arg = None
            else:
                part_init, part_shape_arg = (
                    _partition_aware(initializer, info, name, dtype),
                    part_shape,
                )
            var = self._get_single_variable(
                f"{name}/part_{i}", shape=part_shape_arg, dtype=dtype, initializer=part_init,
                regularizer=regularizer, reuse=reuse, **kwargs,
            )  # fmt: skip
            var._set_save_slice_info(pv.SaveSliceInfo(name, full, offset, part_shape))
            parts.append(var)
        result = pv.PartitionedVariable(name, full, dtype, parts, partitions)
        self._partitioned_vars[name] = result
        return result

    def _get_single_variable(
        self,
        name,
        shape=None,
        dtype=dtypes.float32,
        initializer=None,
        regularizer=None,
        reuse=None,
        trainable=None,
        collections=None,
        caching_device=None,
        validate_shape=True,
        constraint=None,
        synchronization=VariableSynchronization.AUTO,
        aggregation=VariableAggregation.NONE,
        use_resource=None,
    ):
        initializing_from_value = initializer is not None and not callable(initializer)
        if shape is not None and initializing_from_value:
            raise ValueError("If initializer is a constant, do not specify shape.")
        dtype = dtypes.as_dtype(dtype)
        shape = tensor_shape.as_shape(shape)

        if name in self._vars:
            found = self._vars[name]
            if reuse is False:
                raise ValueError(
                    f"Variable {name} already exists, disallowed. Did you mean to set "
                    "reuse=True or reuse=tf.AUTO_REUSE in VarScope? Originally defined "
                    f"at:\n\n  {found.op.traceback}\n"
                )
            if not shape.is_compatible_with(found.get_shape()):
                raise ValueError(
                    f"Trying to share variable {name}, but specified shape {shape} and found "
                    f"shape {found.get_shape()}."
                )
            if not dtype.is_compatible_with(found.dtype):
                raise ValueError(
                    f"Trying to share variable {name}, but specified dtype {dtype.name} and "
                    f"found dtype {found.dtype.name}."
                )
            return found

        if reuse is True:
            raise ValueError(
                f"Variable {name} does not exist, or was not created with tf.get_variable()."
                " Did you mean to set reuse=tf.AUTO_REUSE in VarScope?"
            )
        if initializer is None:
            if not shape.is_fully_defined():  # (TF's words; nothing to make a value of)
                raise ValueError(
                    f"Variable {name} did not get an initializer, so its `shape` argument "
                    "must be specified."
                )
            initializer, initializing_from_value = _default_initializer(name, dtype)
        if initializing_from_value:
            init_val, variable_dtype = initializer, None
        else:
            if inspect.isclass(initializer):
                initializer = initializer()
            if shape.is_fully_defined():
                dims = shape.as_list()
                init_val = lambda: initializer(dims, dtype=dtype, partition_info=None)
                variable_dtype = dtype.base_dtype
            elif _takes_no_arguments(initializer):
                init_val, variable_dtype = initializer, None
            else:
                raise ValueError(
                    "The initializer passed is not valid. It should be a callable with no "
                    "arguments and the shape should not be provided or an instance of "
                    "`tf.keras.initializers.*' and `shape` should be fully defined."
                )
        if trainable is None:  # TF resolves it here, so variable creators see True
            trainable = synchronization != VariableSynchronization.ON_READ
        graph = ops.get_default_graph()
        inside = in_dataset_function(graph)
        if inside and reuse is not AUTO_REUSE:
            # TF traces a dataset function twice: the second finds the first's variable.
            raise ValueError(
                f"Variable {name} already exists, disallowed. Did you mean to set "
                "reuse=True or reuse=tf.AUTO_REUSE in VarScope?"
            )
        with dataset_function_scope(graph, False) if inside else contextlib.nullcontext():
            v = Variable(
                initial_value=init_val,
                name=name,
                trainable=trainable,
                collections=collections,
                caching_device=caching_device,
                dtype=variable_dtype,
                validate_shape=validate_shape,
                constraint=constraint,
                synchronization=synchronization,
                aggregation=aggregation,
                use_resource=use_resource,
            )
        self._vars[name] = v
        if regularizer:
            with ops.colocate_with(v.op), ops.name_scope(name + "/Regularizer/"):
                loss = regularizer(v)
            if loss is not None:
                ops.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
        return v


def _partition_aware(initializer, info, name, dtype):
    """An initializer that builds its slice knowing where the slice sits (`partition_info`),
    so e.g. glorot scales by the full variable's fans, as TF does."""
    if initializer is None:
        initializer, _ = _default_initializer(name, dtype)
    if inspect.isclass(initializer):
        initializer = initializer()
    if not _accepts(initializer, "partition_info"):
        return initializer
    init = initializer

    def sliced(shape, dtype=None, partition_info=None):
        return init(shape, dtype=dtype, partition_info=info)

    return sliced


def _accepts(fn, arg: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return arg in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _takes_no_arguments(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params
    )


def _default_initializer(name, dtype):
    """glorot_uniform for floats; zeros for integers, bools and strings (TF1)."""
    if dtype.is_floating:
        return init_ops.glorot_uniform_initializer(), False
    if dtype.is_integer or dtype.is_unsigned or dtype.is_bool or dtype == dtypes.string:
        return init_ops.zeros_initializer(), False
    raise ValueError(f"An initializer for variable {name} of {dtype.base_dtype} is required")


class VariableScope:
    """A variable scope: name prefix, reuse mode and defaults for get_variable."""

    def __init__(
        self,
        reuse,
        name="",
        initializer=None,
        regularizer=None,
        caching_device=None,
        partitioner=None,
        custom_getter=None,
        name_scope="",
        dtype=dtypes.float32,
        use_resource=None,
        constraint=None,
    ):
        self._name = name
        self._initializer = initializer
        self._regularizer = regularizer
        self._reuse = reuse
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._name_scope = name_scope
        self._dtype = dtype
        self._use_resource = use_resource
        self._constraint = constraint

    name = property(lambda self: self._name)
    original_name_scope = property(lambda self: self._name_scope)
    reuse = property(lambda self: self._reuse)
    initializer = property(lambda self: self._initializer)
    dtype = property(lambda self: self._dtype)
    use_resource = property(lambda self: self._use_resource)
    regularizer = property(lambda self: self._regularizer)
    caching_device = property(lambda self: self._caching_device)
    partitioner = property(lambda self: self._partitioner)
    custom_getter = property(lambda self: self._custom_getter)
    constraint = property(lambda self: self._constraint)

    def reuse_variables(self) -> None:
        """Reuse variables in this scope from now on."""
        self._reuse = True

    def set_initializer(self, initializer) -> None:
        self._initializer = initializer

    def set_dtype(self, dtype) -> None:
        self._dtype = dtype

    def set_use_resource(self, use_resource) -> None:
        self._use_resource = use_resource

    def set_regularizer(self, regularizer) -> None:
        self._regularizer = regularizer

    def set_caching_device(self, caching_device) -> None:
        self._caching_device = caching_device

    def set_partitioner(self, partitioner) -> None:
        self._partitioner = partitioner

    def set_custom_getter(self, custom_getter) -> None:
        self._custom_getter = custom_getter

    def get_collection(self, name) -> list:
        scope = self._name + "/" if self._name else ""
        return ops.get_collection(name, scope)

    def trainable_variables(self) -> list:
        return self.get_collection(GraphKeys.TRAINABLE_VARIABLES)

    def global_variables(self) -> list:
        return self.get_collection(GraphKeys.GLOBAL_VARIABLES)

    def local_variables(self) -> list:
        return self.get_collection(GraphKeys.LOCAL_VARIABLES)

    def get_variable(
        self,
        var_store,
        name,
        shape=None,
        dtype=None,
        initializer=None,
        regularizer=None,
        reuse=None,
        trainable=None,
        collections=None,
        caching_device=None,
        partitioner=None,
        validate_shape=True,
        use_resource=None,
        custom_getter=None,
        constraint=None,
        synchronization=VariableSynchronization.AUTO,
        aggregation=VariableAggregation.NONE,
    ):
        """get_variable with this scope's defaults filled in (see `get_variable`)."""
        regularizer = self._regularizer if regularizer is None else regularizer
        caching_device = self._caching_device if caching_device is None else caching_device
        partitioner = self._partitioner if partitioner is None else partitioner
        custom_getter = self._custom_getter if custom_getter is None else custom_getter
        reuse = self._reuse if reuse is None else reuse
        use_resource = self._use_resource if use_resource is None else use_resource
        full_name = self._name + "/" + name if self._name else name
        # Variable names depend on variable scopes only: create at the root name scope.
        with ops.name_scope(None):
            if dtype is not None and initializer is not None and not callable(initializer):
                init_dtype = _value_dtype(initializer)
                if init_dtype != dtypes.as_dtype(dtype):
                    raise ValueError(
                        f"Initializer type '{init_dtype}' and explicit dtype "
                        f"'{dtypes.as_dtype(dtype)}' don't match."
                    )
            initializer = self._initializer if initializer is None else initializer
            constraint = self._constraint if constraint is None else constraint
            dtype = self._dtype if dtype is None else dtype
            return var_store.get_variable(
                full_name,
                shape=shape,
                dtype=dtype,
                initializer=initializer,
                regularizer=regularizer,
                reuse=reuse,
                trainable=trainable,
                collections=collections,
                caching_device=caching_device,
                partitioner=partitioner,
                validate_shape=validate_shape,
                use_resource=use_resource,
                custom_getter=custom_getter,
                constraint=constraint,
                synchronization=synchronization,
                aggregation=aggregation,
            )


def _value_dtype(value) -> dtypes.DType:
    if isinstance(value, ops.Tensor) or hasattr(value, "_as_graph_element"):
        return value.dtype.base_dtype
    return dtypes.as_dtype(dtypes.convert_to_numpy(value).dtype)


class _VariableScopeStore(threading.local):
    """The current scope and open-counts of scope names (per thread, as TF1)."""

    def __init__(self):
        super().__init__()
        self.current_scope = VariableScope(False)
        self.variable_scopes_count: dict[str, int] = {}

    def open_variable_scope(self, scope_name: str) -> None:
        self.variable_scopes_count[scope_name] = self.variable_scopes_count.get(scope_name, 0) + 1

    def close_variable_subscopes(self, scope_name) -> None:
        for k in list(self.variable_scopes_count):
            if scope_name is None or k.startswith(scope_name + "/"):
                self.variable_scopes_count[k] = 0

    def variable_scope_count(self, scope_name: str) -> int:
        return self.variable_scopes_count.get(scope_name, 0)


def _attached(key: str, factory):
    attached = ops.get_default_graph()._attached
    value = attached.get(key)
    if value is None:
        value = attached[key] = factory()
    return value


def _get_default_variable_store() -> _VariableStore:
    return _attached("variable_store", _VariableStore)


def get_variable_scope_store() -> _VariableScopeStore:
    return _attached("variable_scope_store", _VariableScopeStore)


def get_variable_scope() -> VariableScope:
    """The current variable scope."""
    return get_variable_scope_store().current_scope


def get_variable(
    name,
    shape=None,
    dtype=None,
    initializer=None,
    regularizer=None,
    trainable=None,
    collections=None,
    caching_device=None,
    partitioner=None,
    validate_shape=True,
    use_resource=None,
    custom_getter=None,
    constraint=None,
    synchronization=VariableSynchronization.AUTO,
    aggregation=VariableAggregation.NONE,
):
    """Get an existing variable "<scope>/name" or create a new one (TF1 semantics).

    `initializer` may be an initializer object/class, a callable of no arguments, or a
    value (then `shape` must be None).  Defaults: the scope's initializer, else
    glorot_uniform for floats and zeros for integers, bools and strings.

    Raises:
      ValueError: creating a variable that exists when the scope does not reuse;
        reusing (reuse=True) a variable that does not exist; a shape or dtype that does
        not match the existing variable; an invalid initializer.
    """
    return get_variable_scope().get_variable(
        _get_default_variable_store(),
        name,
        shape=shape,
        dtype=dtype,
        initializer=initializer,
        regularizer=regularizer,
        trainable=trainable,
        collections=collections,
        caching_device=caching_device,
        partitioner=partitioner,
        validate_shape=validate_shape,
        use_resource=use_resource,
        custom_getter=custom_getter,
        constraint=constraint,
        synchronization=synchronization,
        aggregation=aggregation,
    )


def get_local_variable(
    name,
    shape=None,
    dtype=None,
    initializer=None,
    regularizer=None,
    trainable=False,
    collections=None,
    caching_device=None,
    partitioner=None,
    validate_shape=True,
    use_resource=None,
    custom_getter=None,
    constraint=None,
    synchronization=VariableSynchronization.AUTO,
    aggregation=VariableAggregation.NONE,
):
    """get_variable for LOCAL_VARIABLES (not trainable, not saved by default)."""
    collections = [GraphKeys.LOCAL_VARIABLES] + list(collections or [])
    return get_variable(
        name,
        shape=shape,
        dtype=dtype,
        initializer=initializer,
        regularizer=regularizer,
        trainable=False,
        collections=collections,
        caching_device=caching_device,
        partitioner=partitioner,
        validate_shape=validate_shape,
        use_resource=use_resource,
        custom_getter=custom_getter,
        constraint=constraint,
        synchronization=synchronization,
        aggregation=aggregation,
    )


def _maybe_wrap_custom_getter(custom_getter, old_getter):
    """Compose getters: the new one receives a getter that calls the old one."""
    if old_getter is None:
        return custom_getter

    def wrapped_custom_getter(getter, *args, **kwargs):
        return custom_getter(functools.partial(old_getter, getter), *args, **kwargs)

    return wrapped_custom_getter


class _pure_variable_scope:  # noqa: N801 - TF's name
    """Enter a variable scope without touching name scopes."""

    def __init__(
        self,
        name_or_scope,
        reuse=None,
        initializer=None,
        regularizer=None,
        caching_device=None,
        partitioner=None,
        custom_getter=None,
        old_name_scope=None,
        dtype=dtypes.float32,
        use_resource=None,
        constraint=None,
    ):
        self._name_or_scope = name_or_scope
        self._reuse = reuse
        self._overrides = dict(
            initializer=initializer,
            regularizer=regularizer,
            caching_device=caching_device,
            partitioner=partitioner,
            dtype=dtype,
            use_resource=use_resource,
        )
        self._custom_getter = custom_getter
        self._old_name_scope = old_name_scope
        self._constraint = constraint
        self._var_scope_store = get_variable_scope_store()
        self._last_variable_scope_object = None
        if isinstance(name_or_scope, VariableScope):
            self._new_name = name_or_scope.name
            self._cached_variable_scope_object = self._derive(
                name_or_scope,
                name_or_scope.reuse if not reuse else reuse,
                name_or_scope.original_name_scope,
            )

    def _derive(self, base: VariableScope, reuse, name_scope) -> VariableScope:
        scope = VariableScope(
            reuse,
            name=self._new_name,
            initializer=base.initializer,
            regularizer=base.regularizer,
            caching_device=base.caching_device,
            partitioner=base.partitioner,
            dtype=base.dtype,
            use_resource=base.use_resource,
            custom_getter=base.custom_getter,
            name_scope=name_scope,
            constraint=self._constraint,
        )
        for attr, value in self._overrides.items():
            if value is not None:
                getattr(scope, "set_" + attr)(value)
        if self._custom_getter is not None:
            scope.set_custom_getter(
                _maybe_wrap_custom_getter(self._custom_getter, base.custom_getter)
            )
        return scope

    def __enter__(self) -> VariableScope:
        store = self._var_scope_store
        self._old = store.current_scope
        if isinstance(self._name_or_scope, VariableScope):
            store.open_variable_scope(self._new_name)
            self._old_subscopes = copy.copy(store.variable_scopes_count)
            scope = self._cached_variable_scope_object
        else:
            old = self._old
            self._new_name = (
                old.name + "/" + self._name_or_scope if old.name else self._name_or_scope
            )
            self._reuse = self._reuse or old.reuse  # reuse is inherited by sub-scopes
            name_scope = (
                self._name_or_scope if self._old_name_scope is None else self._old_name_scope
            )
            scope = self._derive(old, self._reuse, name_scope)
            store.open_variable_scope(self._new_name)
        store.current_scope = scope
        self._last_variable_scope_object = scope
        return scope

    def __exit__(self, *exc) -> None:
        store = self._var_scope_store
        if store.current_scope is not self._last_variable_scope_object:
            raise RuntimeError("Improper nesting of variable_scope.")
        if isinstance(self._name_or_scope, VariableScope):
            store.variable_scopes_count = self._old_subscopes
        else:
            store.close_variable_subscopes(self._new_name)
        store.current_scope = self._old


def _get_unique_variable_scope(prefix: str) -> str:
    store = get_variable_scope_store()
    current = get_variable_scope()
    name = current.name + "/" + prefix if current.name else prefix
    if store.variable_scope_count(name) == 0:
        return prefix
    idx = 1
    while store.variable_scope_count(f"{name}_{idx}") > 0:
        idx += 1
    return f"{prefix}_{idx}"


class variable_scope:  # noqa: N801 - TF's name
    """`tf.compat.v1.variable_scope`: a context manager opening a variable scope.

    Also opens a name scope (unless auxiliary_name_scope=False).  With a string name the
    scope extends the current one; with a VariableScope object it jumps to that scope;
    with name_or_scope=None, `default_name` is made unique ("dense", "dense_1", ...).

    Raises:
      TypeError: neither name_or_scope nor default_name; bad name_or_scope type.
      ValueError: reuse is not True, False, None or AUTO_REUSE; reuse=True with
        default_name only.
    """

    def __init__(
        self,
        name_or_scope,
        default_name=None,
        values=None,
        initializer=None,
        regularizer=None,
        caching_device=None,
        partitioner=None,
        custom_getter=None,
        reuse=None,
        dtype=None,
        use_resource=None,
        constraint=None,
        auxiliary_name_scope=True,
    ):
        self._name_or_scope = name_or_scope
        self._default_name = default_name
        self._scope_kwargs = dict(
            initializer=initializer,
            regularizer=regularizer,
            caching_device=caching_device,
            partitioner=partitioner,
            custom_getter=custom_getter,
            dtype=dtype,
            use_resource=use_resource,
            constraint=constraint,
        )
        if default_name is None and name_or_scope is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if reuse is False:  # no non-inheriting scopes: False means None here
            reuse = None
        if not (reuse is True or reuse is None or reuse is AUTO_REUSE):
            raise ValueError("The reuse parameter must be True or False or None.")
        self._reuse = reuse
        self._graph = ops._graph_from_values(values or [])
        if not isinstance(auxiliary_name_scope, bool):
            raise TypeError(
                "The auxiliary_name_scope must be `True` or `False`, while get "
                f"{auxiliary_name_scope}"
            )
        self._auxiliary_name_scope = auxiliary_name_scope
        self._cached_pure_variable_scope = None
        self._current_name_scope = None
        self._name_scope_args = None  # what to open as name scope on each entry

    def __enter__(self) -> VariableScope:
        self._graph_cm = self._graph.as_default()
        self._graph_cm.__enter__()
        try:
            if self._cached_pure_variable_scope is not None:
                if self._name_scope_args is not None:
                    # A fresh name scope per entry ("foo_1/"), as TF's name_scope object.
                    self._current_name_scope = ops.name_scope(self._name_scope_args)
                    self._current_name_scope.__enter__()
                return self._cached_pure_variable_scope.__enter__()
            return self._enter_scope_uncached()
        except BaseException as e:
            self._graph_cm.__exit__(type(e), e, e.__traceback__)
            raise

    def _enter_scope_uncached(self) -> VariableScope:
        if self._auxiliary_name_scope:
            current_name_scope = None
        else:  # re-enter the current name scope
            name_scope = ops.get_default_graph().get_name_scope()
            self._name_scope_args = name_scope + "/" if name_scope else None
            current_name_scope = ops.name_scope(self._name_scope_args)
        nos = self._name_or_scope
        if nos is not None:
            if not isinstance(nos, (VariableScope, str)):
                raise TypeError("VariableScope: name_or_scope must be a string or VariableScope.")
            name_scope = nos if isinstance(nos, str) else nos.name.split("/")[-1]
            if name_scope or current_name_scope:
                if current_name_scope is None:
                    self._name_scope_args = name_scope
                    current_name_scope = ops.name_scope(name_scope)
                entered = current_name_scope.__enter__()
                self._current_name_scope = current_name_scope
                old_name_scope = entered if isinstance(nos, str) else nos.original_name_scope
            else:  # entering the root variable scope
                self._current_name_scope = None
                old_name_scope = None
            pure = _pure_variable_scope(
                nos, reuse=self._reuse, old_name_scope=old_name_scope, **self._scope_kwargs
            )
        else:  # default_name, made unique
            if self._reuse:
                raise ValueError("reuse=True cannot be used without a name_or_scope")
            if current_name_scope is None:
                self._name_scope_args = self._default_name
                current_name_scope = ops.name_scope(self._default_name)
            entered = current_name_scope.__enter__()
            self._current_name_scope = current_name_scope
            unique = _get_unique_variable_scope(self._default_name)
            pure = _pure_variable_scope(unique, old_name_scope=entered, **self._scope_kwargs)
        try:
            scope = pure.__enter__()
        except BaseException:
            if self._current_name_scope is not None:
                self._current_name_scope.__exit__(None, None, None)
                self._current_name_scope = None
            raise
        self._cached_pure_variable_scope = pure
        return scope

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self._cached_pure_variable_scope.__exit__(exc_type, exc, tb)
        finally:
            try:
                if self._current_name_scope is not None:
                    self._current_name_scope.__exit__(exc_type, exc, tb)
            finally:
                self._graph_cm.__exit__(exc_type, exc, tb)


def variable_op_scope(
    values,
    name_or_scope,
    default_name=None,
    initializer=None,
    regularizer=None,
    caching_device=None,
    partitioner=None,
    custom_getter=None,
    reuse=None,
    dtype=None,
    use_resource=None,
    constraint=None,
):
    """Deprecated: `variable_scope(name_or_scope, default_name, values, ...)`."""
    return variable_scope(
        name_or_scope,
        default_name=default_name,
        values=values,
        initializer=initializer,
        regularizer=regularizer,
        caching_device=caching_device,
        partitioner=partitioner,
        custom_getter=custom_getter,
        reuse=reuse,
        dtype=dtype,
        use_resource=use_resource,
        constraint=constraint,
    )
