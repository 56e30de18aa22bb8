"""Keras' object configs: `serialize_keras_object` / `deserialize_keras_object` and the
custom-object registry (`get_custom_objects`, `CustomObjectScope`).

An object serializes as TF's legacy Keras format does: a function as its name, an object
with `get_config` as `{"class_name": <class name>, "config": <its config>}`.  A name is
looked up, in order, in the `custom_objects` given to the call, in the custom objects of
the open `CustomObjectScope`s (and `get_custom_objects()`), then in the module's own
table.  Configs are plain JSON-able values; nothing here runs code read from a config
(no pickle, no eval): a name can only pick a class or function registered beforehand.
"""

from __future__ import annotations

import inspect

import numpy as np

__all__ = [
    "CustomObjectScope",
    "custom_object_scope",
    "get_custom_objects",
    "serialize_keras_object",
    "deserialize_keras_object",
    "get_registered_name",
    "register_keras_serializable",
    "unknown_object",
]


def unknown_object(kind: str, name) -> ValueError:
    """Keras' error for a name its registry lacks ("Unknown layer: 'X'. ...")."""
    return ValueError(
        f"Unknown {kind}: '{name}'. Please ensure you are using a "
        "`keras.utils.custom_object_scope` and that this object is included in the scope. "
        "See https://www.tensorflow.org/guide/keras/save_and_serialize"
        "#registering_the_custom_object for details."
    )


# Invariant: holds the global custom objects plus those of every open scope; a scope
# restores the dict it found when it exits.
_CUSTOM_OBJECTS: dict = {}


def get_custom_objects() -> dict:
    """The global dict of custom objects (name -> class or function); entries added to it
    are found by every deserialization."""
    return _CUSTOM_OBJECTS


class CustomObjectScope:
    """`with CustomObjectScope({"MyLayer": MyLayer}):` makes the names known to
    deserialization inside the block."""

    def __init__(self, *args):
        self.custom_objects = args
        self._backup = None

    def __enter__(self):
        self._backup = dict(_CUSTOM_OBJECTS)
        for objects in self.custom_objects:
            _CUSTOM_OBJECTS.update(objects or {})
        return self

    def __exit__(self, *exc):
        _CUSTOM_OBJECTS.clear()
        _CUSTOM_OBJECTS.update(self._backup)
        return False


def custom_object_scope(*args) -> CustomObjectScope:
    """`with custom_object_scope({...}):` (CustomObjectScope by its function name)."""
    return CustomObjectScope(*args)


def register_keras_serializable(package="Custom", name=None):
    """A class decorator registering it in the custom objects as "package>Name"."""

    def decorator(arg):
        registered = f"{package}>{name or arg.__name__}"
        _CUSTOM_OBJECTS[registered] = arg
        arg._keras_registered_name = registered
        return arg

    return decorator


def get_registered_name(obj) -> str:
    """The name `obj` serializes under (its registered name, else its own name)."""
    # (looked up in the class's own dict: a subclass is known by its own name)
    registered = obj.__dict__.get("_keras_registered_name") if inspect.isclass(obj) else None
    if registered:
        return registered
    return getattr(obj, "__name__", type(obj).__name__)


def plain(value):
    """`value` with tuples, numpy scalars/arrays and TensorShapes made JSON values, as
    Keras' JSON encoder writes them."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "as_list") and not isinstance(value, str):
        return value.as_list()
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if hasattr(value, "name") and hasattr(value, "is_floating"):  # a DType
        return value.name
    return value


def serialize_keras_object(obj):
    """`obj` as a JSON-able value: None, a function's name, or
    `{"class_name": ..., "config": ...}` for an object with `get_config`.

    Raises:
      ValueError: an object with neither `get_config` nor a name.
    """
    if obj is None:
        return None
    if hasattr(obj, "get_config") and not inspect.isclass(obj):
        config = obj.get_config()
        for key, item in list(config.items()):
            if hasattr(item, "get_config") and not inspect.isclass(item):
                config[key] = serialize_keras_object(item)
        return {"class_name": get_registered_name(type(obj)), "config": config}
    if hasattr(obj, "__name__"):
        return get_registered_name(obj)
    raise ValueError(f"Cannot serialize {obj} since it doesn't implement `get_config()`.")


def _lookup(name, module_objects, custom_objects):
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    if name in _CUSTOM_OBJECTS:
        return _CUSTOM_OBJECTS[name]
    return (module_objects or {}).get(name)


def _from_config(cls, config, custom_objects):
    from_config = getattr(cls, "from_config", None)
    if from_config is None:
        return cls(**config)
    if "custom_objects" in inspect.signature(from_config).parameters:
        merged = {**_CUSTOM_OBJECTS, **(custom_objects or {})}
        return from_config(config, custom_objects=merged)
    with CustomObjectScope(custom_objects or {}):
        return from_config(config)


def deserialize_keras_object(
    identifier, module_objects=None, custom_objects=None, printable_module_name="object"
):
    """The object a serialized `identifier` names: a config dict makes an instance (by
    the class's `from_config`), a string returns the function (or an instance of the
    class) of that name.

    Raises:
      ValueError: an unknown name, or a dict without `class_name`/`config`.
    """
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        if "class_name" not in identifier or "config" not in identifier:
            raise ValueError(
                f"Improper config format for {identifier}. Expecting python dict contains "
                "`class_name` and `config` as keys"
            )
        class_name, config = identifier["class_name"], identifier["config"]
        cls = _lookup(class_name, module_objects, custom_objects)
        if cls is None:
            raise unknown_object(printable_module_name, class_name)
        return _from_config(cls, dict(config), custom_objects)
    if isinstance(identifier, str):
        obj = _lookup(identifier, module_objects, custom_objects)
        if obj is None:
            raise unknown_object(printable_module_name, identifier)
        return obj() if inspect.isclass(obj) else obj
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret serialized {printable_module_name}: {identifier}")


def module_table(*modules, names=None) -> dict:
    """Name -> public class or function of `modules` (their `__all__`)."""
    table = {}
    for module in modules:
        for name in names or module.__all__:
            obj = getattr(module, name, None)
            if obj is not None and (inspect.isclass(obj) or callable(obj)):
                table[name] = obj
    return table


def deserialize_keras_object_api(config, custom_objects=None, safe_mode=True, **kwargs):
    """`tf.keras.utils.deserialize_keras_object` as TF 2.21's: `module_objects` and
    `printable_module_name` (by keyword) name where classes are looked up; in graph
    mode a config is Keras' legacy one, so `safe_mode` changes nothing here.

    Raises:
      ValueError: another keyword argument, an unknown class or function.
    """
    del safe_mode  # (it guards lambdas of the new format, which graph mode never writes)
    module_objects = kwargs.pop("module_objects", None)
    printable = kwargs.pop("printable_module_name", "object")
    if kwargs:
        raise ValueError(f"The following argument(s) are not supported: {list(kwargs)}")
    return deserialize_keras_object(config, module_objects, custom_objects, printable)
