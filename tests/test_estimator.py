"""tf.estimator: ModeKeys, EstimatorSpec, RunConfig, Estimator train/evaluate/predict.

Expected values and error messages were recorded from TF 2.15.1 (tensorflow_estimator),
running the same programs with `import tensorflow.compat.v1 as tf`.
"""

import os

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors

E = af.estimator

X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]], np.float32)
Y = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)


def _linear_model_fn(features, labels, mode, params):
    w = af.get_variable("w", [2, 1], initializer=af.constant_initializer([[0.5], [-0.25]]))
    b = af.get_variable("b", [1], initializer=af.zeros_initializer())
    pred = af.matmul(features["x"], w) + b
    if mode == E.ModeKeys.PREDICT:
        w0 = af.reshape(w, [2])[:1] + 0 * pred[:, 0]
        return E.EstimatorSpec(mode, predictions={"y": pred, "w0": w0})
    loss = af.losses.mean_squared_error(labels, pred)
    opt = af.train.GradientDescentOptimizer(params["lr"])
    train_op = opt.minimize(loss, global_step=af.train.get_global_step())
    metrics = {"mae": af.metrics.mean_absolute_error(labels, pred)}
    return E.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def _train_input():
    return af.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(2)


def _eval_input():
    return af.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(2)


def _predict_input():
    return af.data.Dataset.from_tensor_slices({"x": X}).batch(3)


def _estimator(tmp_path, **config):
    cfg = E.RunConfig(tf_random_seed=1, save_checkpoints_steps=3, **config)
    return E.Estimator(_linear_model_fn, model_dir=str(tmp_path), config=cfg, params={"lr": 0.01})


def _counting_model_fn(features, labels, mode):
    step = af.train.get_global_step()
    return E.EstimatorSpec(
        mode,
        loss=af.reduce_mean(features),
        train_op=af.assign_add(step, 1),
        predictions=features,
    )


# -- ModeKeys, EstimatorSpec ---------------------------------------------------------------


def test_mode_keys():
    assert (E.ModeKeys.TRAIN, E.ModeKeys.EVAL, E.ModeKeys.PREDICT) == ("train", "eval", "infer")


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"mode": "train", "loss": "L"}, ValueError, "Missing train_op."),
        ({"mode": "train", "train_op": "T"}, ValueError, "Missing loss."),
        ({"mode": "eval"}, ValueError, "Missing loss."),
        ({"mode": "infer"}, ValueError, "Missing predictions."),
        ({"mode": "infer", "predictions": 3}, TypeError, "predictions must be Tensor, given: 3"),
        (
            {"mode": "infer", "predictions": {"a": 3}},
            TypeError,
            "predictions[a] must be Tensor, given: 3",
        ),
        ({"mode": "train", "loss": 3.0, "train_op": "T"}, TypeError, "loss must be Tensor"),
        (
            {"mode": "train", "loss": "L", "train_op": 3},
            TypeError,
            "train_op must be Operation or Tensor, given: 3",
        ),
        (
            {"mode": "eval", "loss": "L", "eval_metric_ops": {"a": 3}},
            TypeError,
            "Values of eval_metric_ops must be (metric_value, update_op) tuples, given: 3 "
            "for key: a",
        ),
        (
            {"mode": "eval", "loss": "L", "eval_metric_ops": 3},
            TypeError,
            "eval_metric_ops must be a dict, given: 3",
        ),
        (
            {"mode": "eval", "loss": "L", "training_hooks": [3]},
            TypeError,
            "All hooks must be SessionRunHook instances, given: 3",
        ),
        (
            {"mode": "eval", "loss": "L", "scaffold": 3},
            TypeError,
            "scaffold must be tf.train.Scaffold. Given: 3",
        ),
    ],
)
def test_estimator_spec_errors(graph, kwargs, error, message):
    loss = af.constant(1.0)
    train_op = af.assign_add(af.Variable(1.0), 1.0)
    stand_in = {"L": loss, "T": train_op}
    kwargs = {k: stand_in.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(error) as info:
        E.EstimatorSpec(**kwargs)
    assert str(info.value).startswith(message)


def test_estimator_spec_loss_shape(graph):
    train_op = af.assign_add(af.Variable(1.0), 1.0)
    with pytest.raises(ValueError, match=r"Loss must be scalar, given: Tensor\("):
        E.EstimatorSpec("train", loss=af.constant([1.0, 2.0]), train_op=train_op)
    spec = E.EstimatorSpec("train", loss=af.constant([1.0]), train_op=train_op)
    assert spec.loss.shape.ndims == 0


def test_estimator_spec_fields_and_defaults(graph):
    loss = af.constant(1.0)
    spec = E.EstimatorSpec("eval", loss=loss, predictions={"p": loss})
    assert spec._fields == (
        "mode",
        "predictions",
        "loss",
        "train_op",
        "eval_metric_ops",
        "export_outputs",
        "training_chief_hooks",
        "training_hooks",
        "scaffold",
        "evaluation_hooks",
        "prediction_hooks",
    )
    assert spec.train_op is None and spec.eval_metric_ops == {} and spec.export_outputs is None
    assert spec.training_hooks == () and isinstance(spec.scaffold, af.train.Scaffold)
    with pytest.raises(ValueError, match="mode of EstimatorSpec cannot be changed."):
        spec._replace(mode="train")
    predict = E.EstimatorSpec("infer", predictions=loss)
    assert list(predict.export_outputs) == ["serving_default"]
    assert predict.export_outputs["serving_default"].outputs == {"output": loss}


def test_estimator_spec_other_graph():
    with af.Graph().as_default():
        loss = af.constant(1.0)
    with af.Graph().as_default():
        with pytest.raises(ValueError) as info:
            E.EstimatorSpec("eval", loss=loss)
    assert str(info.value) == (
        'loss with "Const:0" must be from the default graph. Possible causes of this error '
        "include: \n\n1) loss was created outside the context of the default graph.\n\n2) "
        "The object passed through to EstimatorSpec was not created in the most recent call "
        'to "model_fn".'
    )


# -- RunConfig ------------------------------------------------------------------------------


def test_run_config_defaults():
    c = E.RunConfig()
    got = {
        k: getattr(c, k)
        for k in (
            "model_dir",
            "tf_random_seed",
            "save_summary_steps",
            "save_checkpoints_steps",
            "save_checkpoints_secs",
            "keep_checkpoint_max",
            "keep_checkpoint_every_n_hours",
            "log_step_count_steps",
            "session_config",
            "session_creation_timeout_secs",
            "checkpoint_save_graph_def",
            "is_chief",
            "master",
            "num_ps_replicas",
            "num_worker_replicas",
            "task_id",
            "task_type",
        )
    }
    assert got == {
        "model_dir": None,
        "tf_random_seed": None,
        "save_summary_steps": 100,
        "save_checkpoints_steps": None,
        "save_checkpoints_secs": 600,
        "keep_checkpoint_max": 5,
        "keep_checkpoint_every_n_hours": 10000,
        "log_step_count_steps": 100,
        "session_config": None,
        "session_creation_timeout_secs": 7200,
        "checkpoint_save_graph_def": True,
        "is_chief": True,
        "master": "",
        "num_ps_replicas": 0,
        "num_worker_replicas": 1,
        "task_id": 0,
        "task_type": "worker",
    }
    steps = E.RunConfig(save_checkpoints_steps=5)
    assert (steps.save_checkpoints_steps, steps.save_checkpoints_secs) == (5, None)
    neither = E.RunConfig(save_checkpoints_secs=None)
    assert (neither.save_checkpoints_steps, neither.save_checkpoints_secs) == (None, None)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"save_checkpoints_steps": 5, "save_checkpoints_secs": 5},
            "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.",
        ),
        ({"tf_random_seed": "a"}, "tf_random_seed must be integer."),
        ({"save_summary_steps": -1}, "save_summary_steps should be >= 0"),
        ({"keep_checkpoint_max": -1}, "keep_checkpoint_max should be >= 0"),
        ({"model_dir": ""}, "model_dir should be non-empty."),
        ({"log_step_count_steps": 0}, "log_step_count_steps should be > 0"),
        ({"session_config": 3}, "session_config must be instance of ConfigProto"),
    ],
)
def test_run_config_errors(kwargs, message):
    with pytest.raises(ValueError) as info:
        E.RunConfig(**kwargs)
    assert str(info.value) == message


def test_run_config_replace():
    c = E.RunConfig(save_checkpoints_steps=5)
    c2 = c.replace(tf_random_seed=3, model_dir="/tmp/x")
    assert (c2.tf_random_seed, c2.model_dir, c.tf_random_seed) == (3, "/tmp/x", None)
    assert E.RunConfig().replace(save_checkpoints_steps=3).save_checkpoints_secs is None
    with pytest.raises(ValueError) as info:
        c.replace(master="x")
    assert str(info.value) == (
        "Replacing master is not supported. Allowed properties are ['model_dir', "
        "'tf_random_seed', 'save_summary_steps', 'save_checkpoints_steps', "
        "'save_checkpoints_secs', 'session_config', 'keep_checkpoint_max', "
        "'keep_checkpoint_every_n_hours', 'log_step_count_steps', 'train_distribute', "
        "'device_fn', 'protocol', 'eval_distribute', 'experimental_distribute', "
        "'experimental_max_worker_delay_secs', 'session_creation_timeout_secs', "
        "'checkpoint_save_graph_def']."
    )


# -- Estimator construction -------------------------------------------------------------------


def test_estimator_model_fn_args():
    def no_features(labels, mode):
        pass

    def extra(features, mode, foo):
        pass

    def no_params(features, mode):
        pass

    with pytest.raises(ValueError, match=r"\) must include features argument\.$"):
        E.Estimator(no_features)
    with pytest.raises(ValueError, match=r"\) has following not expected args: \['foo'\]$"):
        E.Estimator(extra)
    with pytest.raises(
        ValueError,
        match=r"does not include params argument, but params \(\{'a': 1\}\) is passed to "
        r"Estimator\.$",
    ):
        E.Estimator(no_params, params={"a": 1})
    with pytest.raises(ValueError) as info:
        E.Estimator(no_params, config=3)
    assert str(info.value) == "config must be an instance of `RunConfig`, but provided 3."


def test_estimator_model_dir(tmp_path):
    def mf(features, mode):
        pass

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    with pytest.raises(ValueError) as info:
        E.Estimator(mf, model_dir=a, config=E.RunConfig(model_dir=b))
    assert str(info.value) == (
        "`model_dir` are set both in constructor and `RunConfig`, but with different "
        f"values. In constructor: '{a}', in `RunConfig`: '{b}' "
    )
    assert E.Estimator(mf, model_dir=a, config=E.RunConfig(model_dir=a)).model_dir == a
    assert E.Estimator(mf, config=E.RunConfig(model_dir=b)).model_dir == b
    est = E.Estimator(mf, model_dir=a)
    assert est.config.model_dir == a and est.params == {}
    assert est.latest_checkpoint() is None
    with pytest.raises(ValueError) as info:
        est.get_variable_names()
    assert str(info.value) == f"Could not find trained model in model_dir: {a}."


def test_estimator_temp_model_dir():
    def mf(features, mode):
        pass

    est = E.Estimator(mf)
    assert os.path.isdir(est.model_dir) and est.config.model_dir == est.model_dir


# -- train / evaluate / predict ------------------------------------------------------------


def test_train_checkpoints_and_resume(tmp_path):
    est = _estimator(tmp_path)
    assert est.train(_train_input, steps=5) is est
    files = sorted(f for f in os.listdir(tmp_path) if not f.startswith("events"))
    assert files == [
        "checkpoint",
        "graph.pbtxt",
        *[
            f"model.ckpt-{n}.{ext}"
            for n in (0, 3, 5)
            for ext in ("data-00000-of-00001", "index", "meta")
        ],
    ]
    assert any(f.startswith("events.out.tfevents.") for f in os.listdir(tmp_path))
    assert est.latest_checkpoint() == str(tmp_path / "model.ckpt-5")
    assert est.get_variable_names() == ["b", "global_step", "w"]
    # TF 2.15.1: w after 5 steps of SGD(0.01) on these batches.
    np.testing.assert_allclose(
        est.get_variable_value("w"), [[0.6240319013595581], [-0.0806293934583664]], rtol=1e-6
    )
    assert est.get_variable_value("global_step") == 5


def test_train_resumes_from_checkpoint(tmp_path):
    cfg = E.RunConfig(tf_random_seed=1, save_summary_steps=0)
    est = E.Estimator(_linear_model_fn, model_dir=str(tmp_path), config=cfg, params={"lr": 0.1})
    est.train(_train_input, steps=5)
    est.train(_train_input, steps=2)
    assert est.get_variable_value("global_step") == 7
    est.train(_train_input, max_steps=5)  # already past: returns at once
    assert est.get_variable_value("global_step") == 7
    est.train(_train_input, max_steps=9)
    assert est.get_variable_value("global_step") == 9
    with pytest.raises(errors.NotFoundError, match="Key nope not found in checkpoint"):
        est.get_variable_value("nope")


def test_evaluate_and_predict(tmp_path):
    est = _estimator(tmp_path)
    est.train(_train_input, steps=9)
    # TF 2.15.1: the metrics after 9 steps, over all 2 batches and over the first.
    r = est.evaluate(_eval_input)
    assert sorted(r) == ["global_step", "loss", "mae"] and r["global_step"] == 9
    np.testing.assert_allclose([r["loss"], r["mae"]], [0.060244054, 0.20513037], rtol=1e-5)
    r = est.evaluate(_train_input, steps=1, name="foo")
    np.testing.assert_allclose([r["loss"], r["mae"]], [0.11309512, 0.32541794], rtol=1e-5)
    assert os.path.isdir(tmp_path / "eval") and os.path.isdir(tmp_path / "eval_foo")
    events = list(
        af.train.summary_iterator(
            os.path.join(tmp_path / "eval", os.listdir(tmp_path / "eval")[0])
        )
    )
    tags = {(v.tag, e.step) for e in events for v in e.summary.value}
    assert tags == {("loss", 9), ("mae", 9), ("checkpoint_path", 9)}

    preds = list(est.predict(_predict_input))
    expected = [0.5897393, 1.7594248, 2.9291103, 4.098796]
    assert [sorted(p) for p in preds] == [["w0", "y"]] * 4
    np.testing.assert_allclose([p["y"][0] for p in preds], expected, rtol=1e-5)
    np.testing.assert_allclose([p["w0"] for p in preds], [0.638263] * 4, rtol=1e-5)
    batches = list(est.predict(_predict_input, predict_keys=["y"], yield_single_examples=False))
    assert [list(b) for b in batches] == [["y"], ["y"]]
    assert [b["y"].shape for b in batches] == [(3, 1), (1, 1)]
    assert [list(p) for p in est.predict(_predict_input, predict_keys="y")] == [["y"]] * 4
    with pytest.raises(ValueError) as info:
        list(est.predict(_predict_input, predict_keys=["z"]))
    assert str(info.value) == (
        "Expected to run at least one output from dict_keys(['y', 'w0']), provided ['z']."
    )


def test_train_argument_errors(tmp_path):
    est = E.Estimator(_counting_model_fn, model_dir=str(tmp_path))

    def input_fn():
        return af.constant([1.0]), None

    cases = [
        ({"steps": 2, "max_steps": 3}, ValueError, "Can not provide both steps and max_steps."),
        ({"steps": 0}, ValueError, "Must specify steps > 0, given: 0"),
        ({"max_steps": 0}, ValueError, "Must specify max_steps > 0, given: 0"),
        ({"steps": 2, "hooks": [3]}, TypeError, "Hooks must be a SessionRunHook, given: 3"),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error) as info:
            est.train(input_fn, **kwargs)
        assert str(info.value) == message
    with pytest.raises(TypeError, match="unsupported callable"):
        est.train(3, steps=1)
    with pytest.raises(ValueError, match="Must specify steps > 0, given: 0"):
        est.evaluate(input_fn, steps=0)


def test_tensor_inputs_and_non_dict_predictions(tmp_path):
    est = E.Estimator(_counting_model_fn, model_dir=str(tmp_path))

    def input_fn():
        return af.constant([1.0, 2.0]), None

    est.train(input_fn, steps=1)
    assert est.get_variable_value("global_step") == 1
    r = est.evaluate(input_fn, steps=2)
    assert r == {"loss": 1.5, "global_step": 1}
    once = list(est.predict(lambda: af.data.Dataset.from_tensors([1.0, 2.0]).repeat(2)))
    assert once == [1.0, 2.0, 1.0, 2.0]
    with pytest.raises(ValueError) as info:
        list(est.predict(input_fn, predict_keys=["a"]))
    assert str(info.value) == "predict_keys argument is not valid in case of non-dict predictions."


def test_model_fn_contract_errors(tmp_path):
    def returns_three(features, mode):
        return 3

    def loss_metric(features, labels, mode):
        spec = _counting_model_fn(features, labels, mode)
        return spec._replace(eval_metric_ops={"loss": af.metrics.mean(features)})

    est = E.Estimator(returns_three, model_dir=str(tmp_path / "a"))
    with pytest.raises(ValueError, match=r"^model_fn should return an EstimatorSpec\.$"):
        est.train(lambda: af.constant([1.0]), steps=1)
    with pytest.raises(
        ValueError, match=r"^model_fn does not take labels, but input_fn returns labels\.$"
    ):
        est.train(lambda: (af.constant([1.0]), af.constant(1.0)), steps=1)
    est = E.Estimator(loss_metric, model_dir=str(tmp_path / "b"))
    with pytest.raises(ValueError) as info:
        est.evaluate(lambda: (af.constant([1.0]), None), steps=1)
    assert str(info.value) == (
        'Metric with name "loss" is not allowed, because Estimator already defines a '
        "default metric with the same name."
    )


def test_input_fn_and_model_fn_optional_args(tmp_path):
    seen = {}

    def input_fn(mode, params, config):
        seen["input"] = (mode, params, config.model_dir)
        return af.constant([1.0, 2.0]), None

    def model_fn(features, mode, config, params):
        seen["model"] = (mode, params, config.tf_random_seed)
        return _counting_model_fn(features, None, mode)

    cfg = E.RunConfig(tf_random_seed=7)
    est = E.Estimator(model_fn, model_dir=str(tmp_path), config=cfg, params={"p": 1})
    est.train(input_fn, steps=1)
    assert seen == {"input": ("train", {"p": 1}, str(tmp_path)), "model": ("train", {"p": 1}, 7)}


# -- inputs.numpy_input_fn / pandas_input_fn -----------------------------------------------

NX = {"a": np.arange(5, dtype=np.float32), "b": np.arange(10).reshape(5, 2)}
NY = np.arange(5) * 10


def _drain(fn, limit=10):
    with af.Graph().as_default():
        out = fn()
        values = []
        with af.train.MonitoredSession() as sess:
            while not sess.should_stop() and len(values) < limit:
                values.append(sess.run(out))
        return out, values


def test_numpy_input_fn_batches_in_order():
    out, values = _drain(E.inputs.numpy_input_fn(NX, NY, batch_size=2, shuffle=False))
    features, labels = out
    assert {k: (v.shape.as_list(), v.dtype.name) for k, v in features.items()} == {
        "a": ([None], "float32"),
        "b": ([None, 2], "int64"),
    }
    assert (labels.shape.as_list(), labels.dtype.name) == ([None], "int64")
    # TF 2.15.1: three batches, the last one short.
    assert [f["a"].tolist() for f, _ in values] == [[0.0, 1.0], [2.0, 3.0], [4.0]]
    assert [f["b"].tolist() for f, _ in values][2] == [[8, 9]]
    assert [y.tolist() for _, y in values] == [[0, 10], [20, 30], [40]]


def test_numpy_input_fn_epochs_features_only_and_label_dicts():
    fn = E.inputs.numpy_input_fn(NX, NY, batch_size=2, shuffle=False, num_epochs=2)
    _, values = _drain(fn)
    # TF 2.15.1: the epochs run on without a break between them.
    assert [f["a"].tolist() for f, _ in values] == [
        [0.0, 1.0],
        [2.0, 3.0],
        [4.0, 0.0],
        [1.0, 2.0],
        [3.0, 4.0],
    ]
    out, values = _drain(E.inputs.numpy_input_fn(NX, None, batch_size=3, shuffle=False))
    assert isinstance(out, dict) and [v["a"].tolist() for v in values] == [[0, 1, 2], [3, 4]]
    labels = {"l1": np.arange(4), "l2": np.arange(4.0)}
    fn = E.inputs.numpy_input_fn(np.arange(4.0), labels, batch_size=3, shuffle=False)
    out, values = _drain(fn)
    assert out[0].dtype.name == "float64" and sorted(out[1]) == ["l1", "l2"]
    assert [(x.tolist(), y["l1"].tolist()) for x, y in values] == [
        ([0.0, 1.0, 2.0], [0, 1, 2]),
        ([3.0], [3]),
    ]
    _, values = _drain(E.inputs.numpy_input_fn(NX, NY, batch_size=2, shuffle=True), 3)
    assert sorted(x for f, _ in values for x in f["a"].tolist()) == [0, 1, 2, 3, 4]


def test_numpy_input_fn_errors():
    for shuffle in (None, 1):
        with pytest.raises(ValueError) as info:
            E.inputs.numpy_input_fn(NX, NY, shuffle=shuffle)
        assert str(info.value) == (
            "shuffle must be provided and explicitly set as boolean (it is recommended to "
            f"set it as True for training); got {shuffle}"
        )
    with af.Graph().as_default():
        with pytest.raises(TypeError, match=r"^x must be a dict or array; got list$"):
            E.inputs.numpy_input_fn([1], NY, shuffle=False)()
        with pytest.raises(ValueError, match=r"^1 duplicate keys are found in both x and y"):
            E.inputs.numpy_input_fn(NX, {"a": NY}, shuffle=False)()
        with pytest.raises(ValueError, match=r"^x cannot be an empty dict$"):
            E.inputs.numpy_input_fn({}, NY, shuffle=False)()
        with pytest.raises(ValueError) as info:
            E.inputs.numpy_input_fn(NX, np.arange(3), shuffle=False)()
    assert str(info.value) == (
        "Length of tensors in x and y is mismatched. All elements in x and y must have the "
        "same length.\nShapes in x: {'a': (5,), 'b': (5, 2)}\nShapes in y: (3,)\n"
    )


def test_pandas_input_fn_needs_pandas():
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(TypeError) as info:
            E.inputs.pandas_input_fn(NX, NY)
        assert str(info.value) == "pandas_input_fn should not be called without pandas installed"
    else:
        import pandas as pd

        frame = pd.DataFrame({"a": [1.0, 2.0, 3.0]})
        _, values = _drain(E.inputs.pandas_input_fn(frame, pd.Series([4, 5, 6]), shuffle=False))
        assert [(f["a"].tolist(), y.tolist()) for f, y in values] == [([1, 2, 3], [4, 5, 6])]


def test_estimator_trains_on_numpy_input_fn(tmp_path):
    est = _estimator(tmp_path)
    est.train(E.inputs.numpy_input_fn({"x": X}, Y, batch_size=2, shuffle=False, num_epochs=3))
    # Three epochs of two batches, then the input ends and training stops.
    assert est.get_variable_value("global_step") == 6


# -- TrainSpec, EvalSpec, train_and_evaluate -----------------------------------------------


def _fn():
    return None


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: E.TrainSpec(3), TypeError, "`input_fn` must be callable, given: 3"),
        (
            lambda: E.TrainSpec(_fn, max_steps=0),
            ValueError,
            "Must specify max_steps > 0, given: 0",
        ),
        (
            lambda: E.TrainSpec(_fn, hooks=[3]),
            TypeError,
            "All hooks must be `SessionRunHook` instances, given: 3",
        ),
        (
            lambda: E.TrainSpec(_fn, saving_listeners=[3]),
            TypeError,
            "All saving_listeners must be `CheckpointSaverListener` instances, given: 3",
        ),
        (lambda: E.EvalSpec(3), TypeError, "`input_fn` must be callable, given: 3"),
        (lambda: E.EvalSpec(_fn, steps=0), ValueError, "Must specify steps > 0, given: 0"),
        (lambda: E.EvalSpec(_fn, name=3), TypeError, "`name` must be string, given: 3"),
        (
            lambda: E.EvalSpec(_fn, start_delay_secs=-1),
            ValueError,
            "Must specify start_delay_secs >= 0, given: -1",
        ),
        (
            lambda: E.EvalSpec(_fn, throttle_secs=-1),
            ValueError,
            "Must specify throttle_secs >= 0, given: -1",
        ),
        (
            lambda: E.EvalSpec(_fn, exporters=3),
            TypeError,
            "`exporters` must be an Exporter, an iterable of Exporter, or `None`, found 3.",
        ),
        (
            lambda: E.train_and_evaluate(3, E.TrainSpec(_fn), E.EvalSpec(_fn)),
            TypeError,
            "`estimator` must have type `tf.estimator.Estimator`. Got: <class 'int'>",
        ),
    ],
)
def test_specs_errors(make, error, message):
    with pytest.raises(error) as info:
        make()
    assert str(info.value) == message


def test_spec_defaults():
    t = E.TrainSpec(_fn)
    assert t._fields == ("input_fn", "max_steps", "hooks", "saving_listeners")
    assert (t.max_steps, t.hooks, t.saving_listeners) == (None, (), ())
    e = E.EvalSpec(_fn)
    assert (e.steps, e.name, e.hooks, e.exporters, e.start_delay_secs, e.throttle_secs) == (
        100,
        None,
        (),
        (),
        120,
        600,
    )


class _StepAtEnd(af.train.SessionRunHook):
    def __init__(self, seen):
        self.seen = seen

    def end(self, session):
        self.seen.append(int(session.run(af.train.get_global_step())))


def test_train_and_evaluate(tmp_path):
    evaluated = []

    def model_fn(features, labels, mode):
        w = af.get_variable("w", [2, 1], initializer=af.constant_initializer([[0.5], [-0.25]]))
        loss = af.losses.mean_squared_error(labels, af.matmul(features["x"], w))
        opt = af.train.GradientDescentOptimizer(0.01)
        train_op = opt.minimize(loss, global_step=af.train.get_global_step())
        hooks = [_StepAtEnd(evaluated)]
        return E.EstimatorSpec(mode, loss=loss, train_op=train_op, evaluation_hooks=hooks)

    cfg = E.RunConfig(save_checkpoints_steps=3, save_summary_steps=0)
    est = E.Estimator(model_fn, model_dir=str(tmp_path), config=cfg)
    eval_spec = E.EvalSpec(_eval_input, steps=None, throttle_secs=0, start_delay_secs=0)
    metrics, exports = E.train_and_evaluate(est, E.TrainSpec(_train_input, max_steps=7), eval_spec)
    # TF 2.15.1: an evaluation after each new checkpoint (3, 6) and the last step (7).
    assert evaluated == [3, 6, 7] and exports == []
    assert metrics["global_step"] == 7
    np.testing.assert_allclose(metrics["loss"], 0.10756814, rtol=1e-5)
    # Already at max_steps: nothing trained, nothing evaluated.
    assert E.train_and_evaluate(est, E.TrainSpec(_train_input, max_steps=7), eval_spec) == (
        None,
        None,
    )
    none = E.Estimator(
        model_fn,
        model_dir=str(tmp_path / "n"),
        config=cfg.replace(save_checkpoints_steps=None, save_checkpoints_secs=None),
    )
    with pytest.raises(ValueError, match="^There should be a CheckpointSaverHook to use saving"):
        E.train_and_evaluate(none, E.TrainSpec(_train_input, max_steps=3), eval_spec)


# -- export: receivers and export_saved_model ----------------------------------------------


def test_serving_input_receiver(graph):
    a = af.placeholder(af.float32, [None, 2], name="a")
    r = E.export.ServingInputReceiver({"x": a}, {"in": a})
    assert r._fields == ("features", "receiver_tensors", "receiver_tensors_alternatives")
    assert (r.features, r.receiver_tensors, r.receiver_tensors_alternatives) == (
        {"x": a},
        {"in": a},
        None,
    )
    r = E.export.ServingInputReceiver(a, a)
    assert (r.features, r.receiver_tensors) == ({"feature": a}, {"input": a})
    cases = [
        ((None, a), "features must be defined."),
        (({"x": a}, None), "receiver_tensors must be defined."),
        (({"x": 3}, a), "feature x must be a Tensor, SparseTensor, or RaggedTensor."),
        (
            ({"x": a}, {"i": 3}),
            "receiver_tensor i must be a Tensor, SparseTensor, or RaggedTensor.",
        ),
        (({"x": a}, {3: a}), "receiver_tensor keys must be strings: 3."),
    ]
    for args, message in cases:
        with pytest.raises(ValueError) as info:
            E.export.ServingInputReceiver(*args)
        assert str(info.value) == message


def test_receiver_fns(graph):
    features = {"x": af.placeholder(af.float32, [None, 2]), "k": af.constant([[1, 2]])}
    r = E.export.build_raw_serving_input_receiver_fn(features, default_batch_size=4)()
    # TF 2.15.1: placeholders named after the features' ops, batch dimension replaced.
    assert {k: (v.name, v.shape.as_list(), v.dtype.name) for k, v in r.features.items()} == {
        "x": ("Placeholder_1:0", [4, 2], "float32"),
        "k": ("Const_1:0", [4, 2], "int32"),
    }
    assert r.receiver_tensors == r.features
    spec = {"x": af.FixedLenFeature([2], af.float32)}
    r = E.export.build_parsing_serving_input_receiver_fn(spec)()
    examples = r.receiver_tensors["examples"]
    assert (examples.name, examples.shape.as_list()) == ("input_example_tensor:0", [None])
    assert (r.features["x"].shape.as_list(), r.features["x"].dtype.name) == ([None, 2], "float32")


def _example(values):
    feature = af.train.Feature(float_list=af.train.FloatList(value=values))
    return af.train.Example(features=af.train.Features(feature={"x": feature}))


def test_export_saved_model(tmp_path):
    x = np.array([[1.0, 2.0], [3.0, -4.0], [-5.0, 6.0]], np.float32)
    y = np.array([[1.5], [-2.0], [3.0]], np.float32)
    columns = [af.feature_column.numeric_column("x", shape=(2,))]
    cfg = E.RunConfig(tf_random_seed=42, save_summary_steps=0)
    est = E.LinearRegressor(columns, model_dir=str(tmp_path / "m"), config=cfg)
    spec = af.feature_column.make_parse_example_spec(columns)
    parsing = E.export.build_parsing_serving_input_receiver_fn(spec)
    with pytest.raises(ValueError) as info:
        est.export_saved_model(str(tmp_path / "e"), parsing)
    assert str(info.value) == f"Couldn't find trained model at {tmp_path / 'm'}."
    est.train(lambda: af.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(3), steps=3)
    path = est.export_saved_model(str(tmp_path / "e"), parsing)
    assert isinstance(path, bytes) and os.path.basename(path).isdigit()
    assert sorted(os.listdir(path)) == [b"saved_model.pb", b"variables"]
    with af.Graph().as_default(), af.Session() as sess:
        mg = af.saved_model.loader.load(sess, ["serve"], path)
        names = sorted(k for k in mg.signature_def if not k.startswith("__"))
        assert names == ["predict", "regression", "serving_default"]
        sig = mg.signature_def["serving_default"]
        assert sig.method_name == "tensorflow/serving/regress"
        assert sig.inputs["inputs"].name == "input_example_tensor:0"
        out = sess.run(
            sig.outputs["outputs"].name,
            {sig.inputs["inputs"].name: [_example([1.0, 2.0]).SerializeToString()]},
        )
    # TF 2.15.1 serves the same export (3 FTRL steps) as [[0.6185118]].
    np.testing.assert_allclose(out, [[0.6185118]], rtol=1e-5)
    raw = E.export.build_raw_serving_input_receiver_fn(
        {"x": af.placeholder(af.float32, [None, 2])}
    )
    path = est.export_saved_model(str(tmp_path / "raw"), raw)
    with af.Graph().as_default(), af.Session() as sess:
        mg = af.saved_model.loader.load(sess, ["serve"], path)
        # The Regress signatures need one string input: TF leaves them out.
        assert sorted(k for k in mg.signature_def if not k.startswith("__")) == ["predict"]


# -- warm starting --------------------------------------------------------------------------


_WX = np.array([[1.0, 2.0], [3.0, -4.0], [-5.0, 6.0]], np.float32)
_WY = np.array([[1.5], [-2.0], [3.0]], np.float32)
_WEIGHTS, _BIAS = "linear/linear_model/x/weights", "linear/linear_model/bias_weights"


def _warm_input():
    return af.data.Dataset.from_tensor_slices(({"x": _WX}, _WY)).repeat().batch(3)


def _warm_regressor(model_dir, warm_start_from=None):
    columns = [af.feature_column.numeric_column("x", shape=(2,))]
    cfg = E.RunConfig(tf_random_seed=42, save_summary_steps=0)
    return E.LinearRegressor(
        columns, model_dir=str(model_dir), config=cfg, warm_start_from=warm_start_from
    )


def _initial(est, name):
    return af.train.load_variable(os.path.join(est.model_dir, "model.ckpt-0"), name).ravel()


def test_warm_start_from_directory(tmp_path):
    a = _warm_regressor(tmp_path / "a")
    a.train(_warm_input, steps=3)
    b = _warm_regressor(tmp_path / "b", warm_start_from=a.model_dir)
    b.train(_warm_input, steps=1)
    # TF 2.15.1: b starts from a's trained variables, not from its slots.
    np.testing.assert_allclose(_initial(b, _WEIGHTS), [-0.24661013, 0.28340146], rtol=1e-5)
    np.testing.assert_allclose(_initial(b, _BIAS), [0.298319], rtol=1e-5)
    np.testing.assert_allclose(_initial(b, _WEIGHTS + "/part_0/Ftrl"), [0.1, 0.1])
    np.testing.assert_allclose(
        b.get_variable_value(_WEIGHTS).ravel(), [-0.00087234, 0.4612563], rtol=1e-4
    )


def test_warm_start_settings(tmp_path):
    a = _warm_regressor(tmp_path / "a")
    a.train(_warm_input, steps=3)
    ws = E.WarmStartSettings(a.model_dir, vars_to_warm_start=".*bias.*")
    assert ws._fields == (
        "ckpt_to_initialize_from",
        "vars_to_warm_start",
        "var_name_to_vocab_info",
        "var_name_to_prev_var_name",
    )
    c = _warm_regressor(tmp_path / "c", warm_start_from=ws)
    c.train(_warm_input, steps=1)
    np.testing.assert_allclose(_initial(c, _WEIGHTS), [0.0, 0.0])
    np.testing.assert_allclose(_initial(c, _BIAS), [0.298319], rtol=1e-5)
    ws = E.WarmStartSettings(a.model_dir, vars_to_warm_start=[_WEIGHTS])
    d = _warm_regressor(tmp_path / "d", warm_start_from=ws)
    d.train(_warm_input, steps=1)
    np.testing.assert_allclose(_initial(d, _WEIGHTS), [-0.24661013, 0.28340146], rtol=1e-5)
    np.testing.assert_allclose(_initial(d, _BIAS), [0.0])


def test_exporters_in_train_and_evaluate(tmp_path):
    columns = [af.feature_column.numeric_column("x", shape=(2,))]
    receiver = E.export.build_parsing_serving_input_receiver_fn(
        af.feature_column.make_parse_example_spec(columns)
    )
    with pytest.raises(ValueError) as info:
        E.LatestExporter("l", receiver, exports_to_keep=0)
    assert str(info.value) == "`exports_to_keep`, if provided, must be positive number"
    with pytest.raises(ValueError) as info:
        E.EvalSpec(
            _fn, exporters=[E.FinalExporter("a", receiver), E.LatestExporter("a", receiver)]
        )
    assert str(info.value) == (
        "`exporters` must have unique names. Such a name cannot be `None`. All exporter "
        "names: ['a', 'a']"
    )
    cfg = E.RunConfig(save_checkpoints_steps=2, save_summary_steps=0)
    est = E.LinearRegressor(columns, model_dir=str(tmp_path), config=cfg)
    older = tmp_path / "export" / "latest"
    for stamp in ("100", "200"):  # exports of an earlier run: only the newest one stays
        (older / stamp).mkdir(parents=True)
    exporters = [
        E.FinalExporter("final", receiver),
        E.LatestExporter("latest", receiver, exports_to_keep=1),
    ]
    eval_spec = E.EvalSpec(_eval_input, throttle_secs=0, exporters=exporters)
    metrics, exports = E.train_and_evaluate(est, E.TrainSpec(_train_input, max_steps=2), eval_spec)
    assert metrics["global_step"] == 2
    assert [os.path.dirname(p) for p in exports] == [
        str(tmp_path / "export" / name).encode() for name in ("final", "latest")
    ]
    assert os.listdir(older) == [os.path.basename(exports[1]).decode()]
    assert os.listdir(tmp_path / "export" / "final") == [os.path.basename(exports[0]).decode()]


def test_run_config_device_fn_places_training_ops(tmp_path):
    placed = []

    def device_fn(op):
        placed.append(op.type)
        return "/cpu:0"

    cfg = E.RunConfig(device_fn=device_fn, save_summary_steps=0)
    est = E.Estimator(_counting_model_fn, model_dir=str(tmp_path), config=cfg)
    est.train(lambda: (af.constant([1.0]), None), steps=1)
    # As TF's: the training graph's ops go through device_fn (the global step among them).
    assert "Mean" in placed and any(t in placed for t in ("VariableV2", "VarHandleOp"))
