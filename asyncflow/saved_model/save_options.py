"""`tf.saved_model.SaveOptions` and `tf.saved_model.Asset`, as TF 2.21's compat.v1 has
them: the options object TF 2's `tf.saved_model.save` takes (validated as TF validates
it, fixed attribute set), and an asset file whose path is a string tensor in the graph.
"""

from __future__ import annotations

import enum

from asyncflow.trackable import Asset  # noqa: F401 - tf.saved_model.Asset

__all__ = ["Asset", "SaveOptions", "VariablePolicy"]


class VariablePolicy(enum.Enum):
    """How variables are saved: TF's `tf.saved_model.experimental.VariablePolicy`."""

    NONE = None
    SAVE_VARIABLE_DEVICES = "save_variable_devices"
    EXPAND_DISTRIBUTED_VARIABLES = "expand_distributed_variables"

    @classmethod
    def from_obj(cls, obj) -> VariablePolicy:
        if obj is None:
            return cls.NONE
        if isinstance(obj, cls):
            return obj
        key = str(obj).lower()
        for policy in cls:
            if key == policy.value:
                return policy
        raise ValueError(f"Received invalid VariablePolicy value: {obj}.")


def _namespace_whitelist(names):
    if names is None:
        return None
    if not isinstance(names, list):
        raise TypeError(
            f"`namespace_whitelist` must be a list of strings. Got: {names} with type "
            f"{type(names)}."
        )
    for name in names:
        if not isinstance(name, str):
            raise ValueError(
                f"Whitelisted namespace must be a string. Got: {name} of type {type(name)}."
            )
    return list(names)


class SaveOptions:
    """Options for saving a SavedModel (TF 2's `tf.saved_model.save`).

    Raises:
      TypeError: `namespace_whitelist` is not a list.
      ValueError: a namespace that is not a string, an unknown variable policy, a
        sharding callback that is not one, or `experimental_image_format=True` (off in
        TF's open-source build too).
    """

    __slots__ = (
        "namespace_whitelist", "save_debug_info", "function_aliases",
        "experimental_debug_stripper", "experimental_io_device",
        "experimental_variable_policy", "experimental_custom_gradients",
        "experimental_image_format", "experimental_skip_saver",
        "experimental_sharding_callback", "extra_tags",
    )  # fmt: skip

    def __init__(
        self,
        namespace_whitelist=None,
        save_debug_info=False,
        function_aliases=None,
        experimental_debug_stripper=False,
        experimental_io_device=None,
        experimental_variable_policy=None,
        experimental_custom_gradients=True,
        experimental_image_format=False,
        experimental_skip_saver=False,
        experimental_sharding_callback=None,
        extra_tags=None,
    ):
        self.namespace_whitelist = _namespace_whitelist(namespace_whitelist)
        self.save_debug_info = save_debug_info
        self.function_aliases = function_aliases if function_aliases else {}
        self.experimental_debug_stripper = experimental_debug_stripper
        self.experimental_custom_gradients = experimental_custom_gradients
        self.experimental_io_device = experimental_io_device
        self.experimental_variable_policy = VariablePolicy.from_obj(experimental_variable_policy)
        self.experimental_skip_saver = experimental_skip_saver
        if experimental_image_format:
            raise ValueError("The option `experimental_image_format` is disabled in OSS.")
        self.experimental_image_format = experimental_image_format
        if experimental_sharding_callback is not None:
            # (asyncflow has no sharding callbacks, so any value is the wrong type)
            raise ValueError(
                "The experimental_sharding_callback checkpoint optionmust be of type "
                "ShardingCallback. The option providedwas of type "
                f"{type(experimental_sharding_callback)}."
            )
        self.experimental_sharding_callback = experimental_sharding_callback
        self.extra_tags = extra_tags
