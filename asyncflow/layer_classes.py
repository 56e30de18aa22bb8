"""TF1's `tf.layers` classes (`Dense`, `Conv2D`, `Conv2DTranspose`, ...) and `Layer`.

A layer object makes its variables on its first call under a variable scope named
after it ("dense", "dense_1", ... or `name`) and reuses them on later calls, as TF1's
layers do; the built-in classes run the functional layers of layer_functions.py inside
that scope.

Keras style (`experimental.keras_style_scope()`, `experimental.set_keras_style()`): a
layer made then takes a Keras name ("dense_1", "dense_2", ... from Keras' per-graph
counter, which every tf.layers layer made without a name counts in, as TF's do), owns
resource variables named after the name scope of its first call rather than kept in
the variable store, keeps its updates out of UPDATE_OPS, and refuses `scope`/`_reuse`.
"""

from __future__ import annotations

import contextlib
import re
import weakref

from asyncflow import dtypes
from asyncflow import graph as ops
from asyncflow import var_scope as vs
from asyncflow.graph import GraphKeys
from asyncflow.layer_functions import (
    IN_LAYER_SCOPE,
    average_pooling1d,
    average_pooling2d,
    batch_normalization,
    conv1d,
    conv2d,
    conv2d_transpose,
    dense,
    dropout,
    flatten,
    max_pooling1d,
    max_pooling2d,
    separable_conv1d,
    separable_conv2d,
)
from asyncflow.layer_functions_3d import (
    average_pooling3d,
    conv3d,
    conv3d_transpose,
    max_pooling3d,
)

__all__: list[str] = []


# -- Keras style -------------------------------------------------------------------------------

# graph -> {prefix: count}: the layer and model names Keras gives (keras.backend's uids);
# here because tf.layers count in it too.
OBJECT_NAME_UIDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_KERAS_STYLE = [False]


def unique_layer_name(base: str, zero_based: bool = True) -> str:
    """`base`, `base_1`, ... (zero_based) or `base_1`, `base_2`, ... per graph."""
    uids = OBJECT_NAME_UIDS.setdefault(ops.get_default_graph(), {})
    uids[base] = uid = uids.get(base, 0) + 1
    if zero_based:
        return base if uid == 1 else f"{base}_{uid - 1}"
    return f"{base}_{uid}"


@contextlib.contextmanager
def keras_style_scope():
    """Layers made inside use Keras-style variables (module docstring); restored on
    exit, even on an error."""
    saved = _KERAS_STYLE[0]
    _KERAS_STYLE[0] = True
    try:
        yield
    finally:
        _KERAS_STYLE[0] = saved


def _generic_name(cls) -> str:
    if "_base_name" in vars(cls) or cls is Layer:
        return cls._base_name
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", cls.__name__)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def set_keras_style() -> None:
    """Every layer made from now on uses Keras-style variables."""
    _KERAS_STYLE[0] = True


# -- layer classes ----------------------------------------------------------------------------


class InputSpec:
    """What a layer accepts (dtype, shape, ndim, min_ndim, max_ndim, axes); Keras' `name`
    and `optional` label an input, and `allow_last_axis_squeeze` lets a last axis of
    size 1 be missing or added."""

    def __init__(self, dtype=None, shape=None, ndim=None, max_ndim=None, min_ndim=None,
                 axes=None, allow_last_axis_squeeze=False, name=None, optional=False):  # fmt: skip
        self.dtype = dtype
        self.shape = shape
        self.ndim = len(shape) if shape is not None else ndim
        self.max_ndim, self.min_ndim = max_ndim, min_ndim
        self.axes = axes or {}
        self.allow_last_axis_squeeze = allow_last_axis_squeeze
        self.name = name
        self.optional = optional

    def __repr__(self):
        parts = [
            f"{k}={v}"
            for k, v in (
                ("dtype", self.dtype),
                ("shape", self.shape),
                ("ndim", self.ndim),
                ("max_ndim", self.max_ndim),
                ("min_ndim", self.min_ndim),
                ("axes", self.axes),
            )
            if v
        ]
        return f"InputSpec({', '.join(parts)})"

    def get_config(self):
        return {
            "dtype": self.dtype,
            "shape": self.shape,
            "ndim": self.ndim,
            "max_ndim": self.max_ndim,
            "min_ndim": self.min_ndim,
            "axes": self.axes,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class Layer:
    """TF1's `tf.layers.Layer`: variables made on the first call under a variable scope
    named after the layer ("dense", "dense_1", ... or `name`) and reused by later calls.

    Subclasses implement `build(input_shape)` (creating weights with `add_weight`) and
    `call(inputs, ...)`; the built-in layers call the functional layers inside the
    layer's scope.  `variables`, `trainable_variables`, `updates` and `losses` list what
    the calls created."""

    _base_name = "layer"

    def __init__(self, trainable=True, name=None, dtype=None, **kwargs):
        self.trainable = trainable
        self._name = name
        self.dtype = None if dtype is None else dtypes.as_dtype(dtype)
        self._scope = None
        self.built = False
        self._variables: list = []
        self._updates: list = []
        self._losses: list = []
        self.input_spec = None
        self._reuse = kwargs.pop("_reuse", None)
        scope = kwargs.pop("_scope", None)
        self._keras_style = _KERAS_STYLE[0]
        self._var_prefix = None  # keras style: the name scope of the first call
        self._keras_name = None
        if not name:
            # Counted in either style (and before the checks), as TF's layers take a
            # Keras name either way.
            self._keras_name = unique_layer_name(_generic_name(type(self)), zero_based=False)
            if self._keras_style:
                self._name = self._keras_name
        if self._keras_style:
            if scope is not None:
                raise ValueError(
                    "scope argument not allowed when keras style layers are enabled, but saw: "
                    f"{scope}"
                )
            if self._reuse is not None:
                raise ValueError(
                    "reuse argument not allowed when keras style layers are enabled, but saw: "
                    f"{self._reuse}"
                )

    @property
    def name(self) -> str:
        # TF's: the given name, else the Keras name ("dense_1" while the variable scope
        # is "dense").
        return self._name or self._keras_name

    @property
    def scope_name(self) -> str:
        if self._scope is None:
            raise ValueError(
                "No name available for layer scope because the layer has not been used yet."
            )
        return self._scope.name

    def build(self, input_shape) -> None:
        self.built = True

    def call(self, inputs, *args, **kwargs):
        return inputs

    def add_weight(
        self,
        name,
        shape,
        dtype=None,
        initializer=None,
        regularizer=None,
        trainable=None,
        constraint=None,
        **kwargs,
    ):
        """A variable of this layer (get_variable in the layer's scope)."""
        trainable = self.trainable if trainable is None else trainable
        return vs.get_variable(
            name,
            shape,
            dtype=dtype or self.dtype or dtypes.float32,
            initializer=initializer,
            regularizer=regularizer,
            trainable=trainable,
            constraint=constraint,
        )

    add_variable = add_weight

    def _call_in_scope(self, inputs, *args, **kwargs):
        if not self.built:
            self.build(
                ops.convert_to_tensor(inputs).shape
                if not isinstance(inputs, (list, tuple, dict))
                else None
            )
            self.built = True
        return self.call(inputs, *args, **kwargs)

    def _keras_getter(self, getter, name, *args, **kwargs):
        # The layer's own variables, named after its first call's name scope (as Keras
        # names them), never looked up in the variable store by name.
        short = name.rsplit("/", 1)[-1]
        for v in self._variables:
            if v.op.name.rsplit("/", 1)[-1] == short:
                return v
        kwargs["use_resource"] = True
        return getter(self._var_prefix + short, *args, **kwargs)

    def _keras_style_call(self, inputs, *args, **kwargs):
        with ops.name_scope(self._name) as scope:
            if self._var_prefix is None:
                self._var_prefix = scope
            outer = vs.get_variable_scope()
            with vs.variable_scope(
                outer, custom_getter=self._keras_getter, auxiliary_name_scope=False
            ):
                return self._call_in_scope(inputs, *args, **kwargs)

    def __call__(self, inputs, *args, **kwargs):
        if self._keras_style and kwargs.get("scope") is not None:
            raise ValueError(
                "scope argument not allowed when keras style layers are enabled, but saw: "
                f"{kwargs['scope']}"
            )
        if self._keras_style:
            kwargs.pop("scope", None)
        g = ops.get_default_graph()
        before = {
            k: list(g.get_collection(k))
            for k in (
                GraphKeys.GLOBAL_VARIABLES,
                GraphKeys.LOCAL_VARIABLES,
                GraphKeys.UPDATE_OPS,
                GraphKeys.REGULARIZATION_LOSSES,
            )
        }
        if self._keras_style:
            out = self._keras_style_call(inputs, *args, **kwargs)
        else:
            if self._scope is None:
                cm = vs.variable_scope(self._name, default_name=self._base_name, reuse=self._reuse)
            else:
                cm = vs.variable_scope(self._scope, reuse=True)
            with cm as scope:
                self._scope = scope
                out = self._call_in_scope(inputs, *args, **kwargs)
        self.built = True

        def new(key):
            old = before[key]
            return [x for x in g.get_collection(key) if not any(x is o for o in old)]

        for v in new(GraphKeys.GLOBAL_VARIABLES) + new(GraphKeys.LOCAL_VARIABLES):
            if not any(v is w for w in self._variables):
                self._variables.append(v)
        updates = new(GraphKeys.UPDATE_OPS)
        self._updates += updates
        if self._keras_style:  # a Keras layer keeps its updates to itself
            collection = g.get_collection_ref(GraphKeys.UPDATE_OPS)
            collection[:] = [u for u in collection if not any(u is n for n in updates)]
        self._losses += new(GraphKeys.REGULARIZATION_LOSSES)
        return out

    apply = __call__

    def _find(self, short):
        for v in self._variables:
            if v.op.name.split("/")[-1] == short:
                return v
        return None

    @property
    def variables(self) -> list:
        return list(self._variables)

    weights = variables

    @property
    def trainable_variables(self) -> list:
        trainable = {id(v) for v in g_trainable()}
        return [v for v in self._variables if id(v) in trainable]

    trainable_weights = trainable_variables

    @property
    def non_trainable_variables(self) -> list:
        trainable = {id(v) for v in g_trainable()}
        return [v for v in self._variables if id(v) not in trainable]

    non_trainable_weights = non_trainable_variables

    @property
    def updates(self) -> list:
        return list(self._updates)

    @property
    def losses(self) -> list:
        return list(self._losses)

    def get_weights(self):
        return ops.get_default_session().run(self._variables)


def g_trainable() -> list:
    return ops.get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES)


class _Functional(Layer):
    """A built-in layer: the functional layer `_fn`, called in the layer's scope."""

    _fn = None
    _weight_names = ("kernel", "bias")

    def __init__(self, *args, trainable=True, name=None, dtype=None, _reuse=None, **kwargs):
        scope = kwargs.pop("_scope", None) if _KERAS_STYLE[0] else None
        super().__init__(trainable=trainable, name=name, dtype=dtype, _reuse=_reuse, _scope=scope)
        self._args, self._kwargs = args, kwargs
        for k, v in kwargs.items():
            setattr(self, k, v)

    def _extra(self, kwargs) -> dict:
        return {}

    def _call_in_scope(self, inputs, *args, **kwargs):
        kw = dict(self._kwargs)
        kw.update(self._extra(kwargs))
        if type(self)._fn in _TRAINABLE_FNS:
            kw["trainable"] = self.trainable
        out = type(self)._fn(inputs, *self._args, name=IN_LAYER_SCOPE, **kw)
        for w in self._weight_names:
            if getattr(self, w, None) is None:
                setattr(self, w, None)
        return out

    def __call__(self, inputs, *args, **kwargs):
        out = super().__call__(inputs, *args, **kwargs)
        for w in self._weight_names:
            if getattr(self, w, None) is None:
                setattr(self, w, self._find(w))
        return out


def _layer_class(cls_name, fn, base_name, weights=(), training_arg=False, doc=""):
    def _extra(self, kwargs):
        if training_arg:
            return {"training": kwargs.get("training", False)}
        return {}

    cls = type(
        cls_name,
        (_Functional,),
        {
            "_fn": staticmethod(fn),
            "_base_name": base_name,
            "_weight_names": tuple(weights),
            "_extra": _extra,
            "__doc__": doc or f"TF1's `tf.layers.{cls_name}` (see `{fn.__name__}`).",
        },
    )
    cls._fn = fn
    return cls


_TRAINABLE_FNS = set()
_CONV_W = ("kernel", "bias")
Dense = _layer_class("Dense", dense, "dense", _CONV_W)
Conv1D = _layer_class("Conv1D", conv1d, "conv1d", _CONV_W)
Conv2D = _layer_class("Conv2D", conv2d, "conv2d", _CONV_W)
Conv2DTranspose = _layer_class("Conv2DTranspose", conv2d_transpose, "conv2d_transpose", _CONV_W)
Conv3D = _layer_class("Conv3D", conv3d, "conv3d", _CONV_W)
Conv3DTranspose = _layer_class("Conv3DTranspose", conv3d_transpose, "conv3d_transpose", _CONV_W)
SeparableConv1D = _layer_class(
    "SeparableConv1D",
    separable_conv1d,
    "separable_conv1d",
    ("depthwise_kernel", "pointwise_kernel", "bias"),
)
SeparableConv2D = _layer_class(
    "SeparableConv2D",
    separable_conv2d,
    "separable_conv2d",
    ("depthwise_kernel", "pointwise_kernel", "bias"),
)
MaxPooling1D = _layer_class("MaxPooling1D", max_pooling1d, "max_pooling1d")
MaxPooling2D = _layer_class("MaxPooling2D", max_pooling2d, "max_pooling2d")
AveragePooling1D = _layer_class("AveragePooling1D", average_pooling1d, "average_pooling1d")
AveragePooling2D = _layer_class("AveragePooling2D", average_pooling2d, "average_pooling2d")
MaxPooling3D = _layer_class("MaxPooling3D", max_pooling3d, "max_pooling3d")
AveragePooling3D = _layer_class("AveragePooling3D", average_pooling3d, "average_pooling3d")
Flatten = _layer_class("Flatten", flatten, "flatten")
Dropout = _layer_class("Dropout", dropout, "dropout", (), training_arg=True)
BatchNormalization = _layer_class(
    "BatchNormalization",
    batch_normalization,
    "batch_normalization",
    ("gamma", "beta", "moving_mean", "moving_variance"),
    training_arg=True,
)
_TRAINABLE_FNS.update(
    {
        dense,
        conv1d,
        conv2d,
        conv2d_transpose,
        conv3d,
        conv3d_transpose,
        separable_conv1d,
        separable_conv2d,
        batch_normalization,
    }
)

__all__ += [
    "Layer",
    "InputSpec",
    "Dense",
    "Conv1D",
    "Conv2D",
    "Conv2DTranspose",
    "Conv3D",
    "Conv3DTranspose",
    "SeparableConv1D",
    "SeparableConv2D",
    "MaxPooling1D",
    "MaxPooling2D",
    "AveragePooling1D",
    "AveragePooling2D",
    "MaxPooling3D",
    "AveragePooling3D",
    "Flatten",
    "Dropout",
    "BatchNormalization",
]
