"""`tf.keras.utils.model_to_dot` and `plot_model`: TF draws the model with pydot and
graphviz, and raises ImportError when they are missing; asyncflow raises that same error
without them, and NotImplementedError (it does not draw models) when they are there.
"""

from __future__ import annotations

import importlib.util

__all__ = ["model_to_dot", "plot_model"]


def _have_pydot() -> bool:
    return importlib.util.find_spec("pydot") is not None


def model_to_dot(model, show_shapes=False, show_dtype=False, show_layer_names=True,
                 rankdir="TB", expand_nested=False, dpi=96, subgraph=False, layer_range=None,
                 show_layer_activations=False, show_trainable=False):  # fmt: skip
    """Raises:
    ImportError: pydot is not installed (TF's message).
    NotImplementedError: pydot is installed; asyncflow does not draw models.
    """
    if not _have_pydot():
        raise ImportError("You must install pydot (`pip install pydot`) for model_to_dot to work.")
    raise NotImplementedError("model_to_dot: drawing a model is not supported by asyncflow")


def plot_model(model, to_file="model.png", show_shapes=False, show_dtype=False,
               show_layer_names=True, rankdir="TB", expand_nested=False, dpi=96,
               layer_range=None, show_layer_activations=False, show_trainable=False):  # fmt: skip
    """Raises:
    ImportError: pydot is not installed (TF's message, which also names graphviz).
    NotImplementedError: pydot is installed; asyncflow does not draw models.
    """
    if not _have_pydot():
        raise ImportError(
            "You must install pydot (`pip install pydot`) and install graphviz (see "
            "instructions at https://graphviz.gitlab.io/download/) for plot_model to work."
        )
    raise NotImplementedError("plot_model: drawing a model is not supported by asyncflow")
