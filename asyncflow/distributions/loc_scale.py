"""The location-scale families' shared part (Normal, Laplace): a `loc` and a positive
`scale` of one float dtype, identities named "loc" and "scale" in the distribution's
scope (with TF's positivity check under `validate_args`), scalar events and the batch
shape the two broadcast to."""

from __future__ import annotations

from asyncflow import dtypes
from asyncflow.distributions import _ops as ops
from asyncflow.distributions.distribution import FULLY_REPARAMETERIZED, Distribution
from asyncflow.graph import control_dependencies, name_scope
from asyncflow.tensor_shape import TensorShape

__all__: list[str] = []


class LocScale(Distribution):
    """A univariate distribution of `loc` and `scale` (subclasses give the density)."""

    _PARAM_SHAPE_NAMES = ("loc", "scale")

    def __init__(self, loc, scale, validate_args, allow_nan_stats, name, parameters):
        with name_scope(name, values=[loc, scale]) as name:
            deps = [ops.assert_positive(scale)] if validate_args else []
            with control_dependencies(deps):
                self._loc = ops.identity(loc, name="loc")
                self._scale = ops.identity(scale, name="scale")
                ops.assert_same_float_dtype([self._loc, self._scale])
        super().__init__(
            dtype=self._scale.dtype,
            reparameterization_type=FULLY_REPARAMETERIZED,
            validate_args=validate_args,
            allow_nan_stats=allow_nan_stats,
            parameters=parameters,
            graph_parents=[self._loc, self._scale],
            name=name,
        )

    @property
    def loc(self):
        """Distribution parameter for the location (the mean of a Normal)."""
        return self._loc

    @property
    def scale(self):
        """Distribution parameter for the scale (a Normal's standard deviation)."""
        return self._scale

    def _batch_shape_tensor(self):
        return ops.broadcast_dynamic_shape(ops.shape(self.loc), ops.shape(self.scale))

    def _batch_shape(self):
        return ops.broadcast_static_shape(self.loc.shape, self.scale.shape)

    def _event_shape_tensor(self):
        return ops.constant([], dtype=dtypes.int32)

    def _event_shape(self):
        return TensorShape([])
