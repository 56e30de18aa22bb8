"""`tf.keras.utils.track_tf1_style_variables` and `get_or_create_layer` as TF1 graph mode
runs them.

A decorated method of a Layer (or Module) gets its own variable store: the
`tf.get_variable` calls inside it reuse the variables the same object made on an earlier
call, while another object makes its own (the graph gives them unique names: 's/v',
then 's/v_1'); `get_or_create_layer(name, fn)` likewise makes a layer once per object
and scope. As in TF's graph mode the variables stay in the global collections and out
of the layer's `weights`; a regularizer's loss goes to the layer's `losses` instead of
the REGULARIZATION_LOSSES collection. Outside a decorated method `get_or_create_layer`
just calls `fn`.

Invariant: `_ACTIVE` holds the stores of the decorated calls now running, innermost last.
"""

from __future__ import annotations

import functools

from asyncflow import trackable, var_scope
from asyncflow.keras.engine import Layer

__all__ = ["track_tf1_style_variables", "get_or_create_layer"]

_ACTIVE: list = []


class _Store:
    """One object's variables (by full name) and nested layers (by scope/name)."""

    def __init__(self, owner):
        self.owner = owner
        self.variables: dict = {}
        self.layers: dict = {}

    def getter(self, getter, name, *args, **kwargs):
        if name in self.variables:
            return self.variables[name]
        regularizer = kwargs.pop("regularizer", None)
        base, n = name, 0
        while True:
            try:
                var = getter(name, *args, **kwargs)
                break
            except ValueError:
                # Another object's store made this name: TF's store takes the next free
                # one, as the graph would name a new variable.
                n += 1
                name = f"{base}_{n}"
        self.variables[base] = var
        if regularizer is not None and isinstance(self.owner, Layer):
            loss = regularizer(var)
            if loss is not None:
                self.owner.add_loss(loss)
        return var


def track_tf1_style_variables(method):
    """Decorate a Layer/Module method so its `tf.get_variable` calls and
    `get_or_create_layer` layers are made once per object and reused on later calls.

    Raises:
      ValueError: the method's first argument is not a Layer, Model or Module.
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if not isinstance(self, (Layer, trackable.Module)):
            raise ValueError(
                "`@tf.compat.v1.keras.utils.track_tf1_layers_and_variables` must be applied "
                "to a method of a subclassed `tf.Module`, `tf.keras.layers.Layer`, or "
                "`tf.keras.Model` and which takes `self` as the first argument. But, the "
                f"first argument passed to the decorated method was {self}, which does not "
                "extend Module, Layer, or Model."
            )
        store = self.__dict__.get("_tf1_style_var_store")
        if store is None:
            store = self.__dict__["_tf1_style_var_store"] = _Store(self)
        scope = var_scope.get_variable_scope()
        _ACTIVE.append(store)
        try:
            with var_scope.variable_scope(
                scope, custom_getter=store.getter, auxiliary_name_scope=False
            ):
                return method(self, *args, **kwargs)
        finally:
            _ACTIVE.pop()

    return wrapper


def get_or_create_layer(name, create_layer_method):
    """Inside a `track_tf1_style_variables` method: the layer this object made under
    `name` in the current variable scope, made by `create_layer_method()` the first time.
    Elsewhere (TF1 graph mode): a new layer from `create_layer_method()` every call."""
    if not _ACTIVE:
        return create_layer_method()
    store = _ACTIVE[-1]
    key = f"{var_scope.get_variable_scope().name}/{name}"
    if key not in store.layers:
        store.layers[key] = create_layer_method()
    return store.layers[key]
