"""TF's renamed-argument rule: a function that took an argument under an old name
accepts either spelling, and both at once is an error worded as TF words it."""

from __future__ import annotations

__all__ = ["deprecated_argument_lookup"]


def deprecated_argument_lookup(new_name, new_value, old_name, old_value):
    """The value given under either name (None if neither).

    Raises:
      ValueError: both were given.
    """
    if old_value is not None:
        if new_value is not None:
            raise ValueError(f"Cannot specify both '{old_name}' and '{new_name}'.")
        return old_value
    return new_value
