"""`tf.saved_model.experimental`: save, TrackableResource and VariablePolicy as TF 2.21's
tf.compat.v1 lists them."""

from __future__ import annotations

from asyncflow import graph as ops
from asyncflow.saved_model.object_saver import save
from asyncflow.saved_model.save_options import VariablePolicy

__all__ = ["TrackableResource", "VariablePolicy", "save"]


class TrackableResource:
    """A resource an object owns (a table, a queue): subclasses define
    `_create_resource()`, which builds the handle; `resource_handle` builds it once, on
    first use, on the device given to the constructor."""

    def __init__(self, device=""):
        self._resource_device = device
        self._resource_handle_value = None

    def _create_resource(self):
        raise NotImplementedError("TrackableResource._create_resource not implemented.")

    def _initialize(self):
        """Ops that initialize the resource (none by default)."""

    def _destroy_resource(self):
        """Ops that release the resource (none by default)."""

    @property
    def resource_handle(self):
        if self._resource_handle_value is None:
            with ops.device(self._resource_device):
                self._resource_handle_value = self._create_resource()
        return self._resource_handle_value
