"""`tf.keras.estimator.model_to_estimator` (TF 2.15.1's, tf.compat.v1 flavour): a TF1
Estimator whose model_fn rebuilds a compiled Keras model on the input_fn's features.

Each model_fn call clones the model (same layer names, so the same variable names) onto
the features (a dict keyed by the model's input names, or one tensor for a one-input
model) and, to train or evaluate, compiles the clone with a fresh optimizer of the
original's config and the original's loss and metrics, its targets the labels:
  TRAIN     loss = the Keras total loss; train_op = the optimizer's updates (its
            `iterations` is the global step, so a step advances the global step);
  EVAL      loss, and each compiled metric as an eval metric (Keras' running means);
  PREDICT   {output layer name: output}.
The estimator starts from the Keras model's weights: they are saved first, with a Saver
(checkpoint_format='saver'), to model_dir/keras/keras_model.ckpt, and the estimator
warm-starts from there.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from asyncflow import graph as ops
from asyncflow import random_seed
from asyncflow.estimator import estimator as estimator_lib
from asyncflow.estimator import model_fn as model_fn_lib
from asyncflow.estimator import run_config as run_config_lib
from asyncflow.estimator.export_output import PredictOutput
from asyncflow.keras import backend, models, optimizers
from asyncflow.keras.saving_api import load_model
from asyncflow.ops import cast_ops, control_flow_ops
from asyncflow.session import Session
from asyncflow.train import saver as saver_lib
from asyncflow.train import training_util

__all__ = ["model_to_estimator"]

_SERVING_KEY = "serving_default"


def _as_inputs(model, features) -> list:
    names = model.input_names
    if isinstance(features, dict):
        missing = [n for n in names if n not in features]
        if missing:
            raise KeyError(
                f"The dictionary passed into features does not have the expected inputs "
                f"keys defined in the keras model.\n\tExpected keys: {set(names)}\n\t"
                f"features keys: {set(features)}\n\tDifference: {set(missing)}"
            )
        tensors = [features[n] for n in names]
    elif isinstance(features, (list, tuple)):
        tensors = list(features)
    else:
        tensors = [features]
    if len(tensors) != len(names):
        raise ValueError(
            f"The model has {len(names)} inputs ({names}) but the features give {len(tensors)}"
        )
    out = []
    for t, x in zip(tensors, model.inputs, strict=True):
        t = ops.convert_to_tensor(t)
        if t.dtype != x.dtype and t.dtype.is_floating:
            t = cast_ops.cast(t, x.dtype)
        out.append(t)
    return out


def _as_targets(model, labels):
    if labels is None:
        return None
    names = model.output_names
    if isinstance(labels, dict):
        return [labels[n] for n in names]
    return list(labels) if isinstance(labels, (list, tuple)) else [labels]


def _clone(mode, keras_model, features, labels, optimizer_config, custom_objects):
    backend.set_learning_phase(1 if mode == model_fn_lib.ModeKeys.TRAIN else 0)
    inputs = _as_inputs(keras_model, features)
    clone = models.clone_model(keras_model, input_tensors=inputs)
    if mode == model_fn_lib.ModeKeys.PREDICT:
        return clone
    optimizer = optimizers.deserialize(
        {"class_name": type(keras_model.optimizer).__name__, "config": optimizer_config},
        custom_objects=custom_objects,
    )
    # A training step advances the global step (the optimizer counts with it).
    optimizer._iterations = training_util.get_or_create_global_step()
    args = keras_model._compile_kwargs
    targets = [
        cast_ops.cast(t, out.dtype) if t.dtype != out.dtype else t
        for t, out in zip(_as_targets(keras_model, labels), clone.outputs, strict=True)
    ]
    clone.compile(
        optimizer=optimizer,
        loss=args["loss"],
        metrics=args["metrics"],
        loss_weights=args["loss_weights"],
        sample_weight_mode=args["sample_weight_mode"],
        weighted_metrics=args["weighted_metrics"],
        target_tensors=targets,
    )
    clone._ensure_compiled()
    return clone


def _metric_ops(model, metric_names_map) -> dict | None:
    names = model.metrics_names[1:]
    if not names:
        return None
    if metric_names_map:
        unknown = set(names) - set(metric_names_map)
        if unknown:
            raise ValueError(
                "Invalid `metric_names_map`. The following keras model metric "
                f'names:"{list(unknown)}" do not exist in the `metric_names_map` dictionary'
            )
        extra = set(metric_names_map) - set(names)
        if extra:
            raise ValueError(
                "Invalid `metric_names_map`. There are unexpected keys in the "
                f"`metric_names_map` dictionary. Expected keys: {list(names)}, Received: "
                f"{list(extra)}"
            )
    out = {}
    for name, metric, update in zip(names, model._metrics, model._metric_tensors, strict=True):
        # Keras' metric state lives outside the global collections; the Estimator's
        # evaluation initializes the local ones.
        for v in metric.variables:
            ops.add_to_collection(ops.GraphKeys.LOCAL_VARIABLES, v)
        out[metric_names_map[name] if metric_names_map else name] = (metric.result(), update)
    return out


def _model_fn(keras_model, custom_objects, metric_names_map, export_outputs):
    optimizer_config = keras_model.optimizer.get_config()

    def model_fn(features, labels, mode):
        model = _clone(mode, keras_model, features, labels, optimizer_config, custom_objects)
        predictions = dict(zip(model.output_names, model.outputs, strict=True))
        loss = train_op = metric_ops = None
        if mode != model_fn_lib.ModeKeys.PREDICT:
            loss = model.total_loss
            metric_ops = _metric_ops(model, metric_names_map)
        if mode == model_fn_lib.ModeKeys.TRAIN:
            train_op = control_flow_ops.group(*model._training_updates())
        outputs = {_SERVING_KEY: PredictOutput(predictions)}
        for key, cls in (export_outputs or {}).items():
            if key not in predictions:
                raise KeyError(
                    f"The list passed into {model.output_names} does not cover requested "
                    f"{export_outputs} keys defined in the keras model.\n\tMissed keys: {key}"
                )
            outputs[key] = cls(predictions[key])
        return model_fn_lib.EstimatorSpec(
            mode=mode,
            predictions=predictions,
            loss=loss,
            train_op=train_op,
            eval_metric_ops=metric_ops,
            export_outputs=outputs,
        )

    return model_fn


def _save_first_checkpoint(keras_model, custom_objects, config) -> str:
    keras_dir = os.path.join(config.model_dir, "keras")
    latest = saver_lib.latest_checkpoint(keras_dir)
    if latest:
        return latest
    weights = keras_model.get_weights()
    os.makedirs(keras_dir, exist_ok=True)
    path = os.path.join(keras_dir, "keras_model.ckpt")
    with ops.Graph().as_default():
        random_seed.set_random_seed(config.tf_random_seed)
        training_util.create_global_step()
        model = models.clone_model(keras_model)
        with Session(config=config.session_config) as sess:
            for var, value in zip(model.weights, weights, strict=True):
                var.load(np.asarray(value), sess)
            step = training_util.get_global_step()
            sess.run(step.initializer)
            saver_lib.Saver(var_list=[*model.weights, step]).save(sess, path)
    return path


def model_to_estimator(keras_model=None, keras_model_path=None, custom_objects=None,
                       model_dir=None, config=None, checkpoint_format="saver",
                       metric_names_map=None, export_outputs=None):  # fmt: skip
    """An Estimator that trains, evaluates and predicts with a compiled Keras model
    (see the module docstring).

    Raises:
      ValueError: neither or both of keras_model / keras_model_path, an uncompiled or
        subclassed model, a model_dir that disagrees with config.model_dir, or an
        unknown checkpoint_format.
      NotImplementedError: checkpoint_format='checkpoint' (object-based).
    """
    if not (keras_model or keras_model_path):
        raise ValueError("Either `keras_model` or `keras_model_path` needs to be provided.")
    if keras_model and keras_model_path:
        raise ValueError(
            "Please specity either `keras_model` or `keras_model_path`, but not both."
        )
    if keras_model_path:
        keras_model = load_model(keras_model_path, custom_objects=custom_objects)
    if not getattr(keras_model, "_is_graph_network", False):
        raise ValueError(
            "model_to_estimator needs a Sequential or functional Keras model (asyncflow "
            "cannot clone a subclassed one)"
        )
    if checkpoint_format not in ("saver", "checkpoint"):
        raise ValueError(
            f'Checkpoint format must be one of "checkpoint" or "saver". Got {checkpoint_format}'
        )
    if checkpoint_format == "checkpoint":
        raise NotImplementedError(
            "model_to_estimator(checkpoint_format='checkpoint') (object-based checkpoints) "
            "is not supported by asyncflow; use checkpoint_format='saver'"
        )
    if getattr(keras_model, "optimizer", None) is None:
        raise ValueError(
            "The given keras model has not been compiled yet. Please compile the model "
            "with `model.compile()` before calling `model_to_estimator()`."
        )
    config = run_config_lib.RunConfig() if config is None else config
    if model_dir is not None:
        if config.model_dir is not None and config.model_dir != model_dir:
            raise ValueError(
                "`model_dir` are set both in constructor and `RunConfig`, but with different "
                f"values. In constructor: '{model_dir}', in `RunConfig`: '{config.model_dir}' "
            )
        config = config.replace(model_dir=model_dir)
    elif config.model_dir is None:
        config = config.replace(model_dir=tempfile.mkdtemp())
    warm_start = None
    if config.is_chief:
        warm_start = _save_first_checkpoint(keras_model, custom_objects, config)
    model_fn = _model_fn(keras_model, custom_objects, metric_names_map, export_outputs)
    return estimator_lib.Estimator(model_fn, config=config, warm_start_from=warm_start)
