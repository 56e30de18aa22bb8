"""`af.layers`: TF1's `tf.compat.v1.layers`, functions (layer_functions.py) and classes
(layer_classes.py)."""

from asyncflow import layer_classes, layer_functions, layer_functions_3d
from asyncflow.layer_classes import *  # noqa: F403
from asyncflow.layer_functions import *  # noqa: F403
from asyncflow.layer_functions_3d import *  # noqa: F403

__all__ = [*layer_functions.__all__, *layer_functions_3d.__all__, *layer_classes.__all__]
