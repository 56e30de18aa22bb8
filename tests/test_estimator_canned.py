"""Canned estimators (Linear/DNN Classifier/Regressor) against TF 2.15.1.

Every expected number was recorded from TF 2.15.1 (`tf.compat.v1.estimator`, the v1
canned estimators) running the same program: RunConfig(tf_random_seed=42), the data
below in batches of 3, 4 training steps with the default optimizer (FTRL 0.2 for the
linear models, Adagrad 0.05 for the DNNs; glorot kernels drawn from the graph seed),
then evaluate over one pass of the data and predict the first two rows.
"""

import os

import numpy as np
import pytest

import asyncflow as af

E = af.estimator

X = np.array([[1, 2], [3, -4], [-5, 6], [7, 8], [0.5, -1], [2, 2]], np.float32)
W = np.array([1, 2, 0.5, 1, 3, 1], np.float32)
LABELS = {
    "binary": np.array([[1], [0], [1], [0], [1], [1]], np.int64),
    "multi": np.array([[2], [0], [1], [0], [2], [1]], np.int64),
    "regression": np.array([[1.5], [-2], [3], [0.5], [1], [2]], np.float32),
    "binary_vocab": np.array([["b"], ["a"], ["b"], ["a"], ["b"], ["b"]]),
    "multi_vocab": np.array([["z"], ["x"], ["y"], ["x"], ["z"], ["y"]]),
}


def _columns():
    return [af.feature_column.numeric_column("x", shape=(2,))]


def _config():
    return E.RunConfig(tf_random_seed=42, save_checkpoints_steps=100, save_summary_steps=0)


def _input(labels, repeat):
    def input_fn():
        ds = af.data.Dataset.from_tensor_slices(({"x": X, "w": W}, labels))
        return (ds.repeat() if repeat else ds).batch(3)

    return input_fn


def _predict_input():
    return af.data.Dataset.from_tensor_slices({"x": X[:2], "w": W[:2]}).batch(2)


def _make(kind, model_dir):
    cols, cfg = _columns(), _config()
    makers = {
        "linear_binary": lambda: E.LinearClassifier(cols, model_dir=model_dir, config=cfg),
        "linear_multi": lambda: E.LinearClassifier(
            cols, n_classes=3, model_dir=model_dir, config=cfg
        ),
        "linear_regression": lambda: E.LinearRegressor(cols, model_dir=model_dir, config=cfg),
        "dnn_binary": lambda: E.DNNClassifier([4, 3], cols, model_dir=model_dir, config=cfg),
        "dnn_multi": lambda: E.DNNClassifier(
            [4], cols, n_classes=3, model_dir=model_dir, config=cfg
        ),
        "dnn_regression": lambda: E.DNNRegressor([3], cols, model_dir=model_dir, config=cfg),
        "linear_binary_vocab": lambda: E.LinearClassifier(
            cols, model_dir=model_dir, config=cfg, label_vocabulary=["a", "b"], weight_column="w"
        ),
        "dnn_multi_vocab": lambda: E.DNNClassifier(
            [3],
            cols,
            n_classes=3,
            model_dir=model_dir,
            config=cfg,
            label_vocabulary=["x", "y", "z"],
            weight_column="w",
            optimizer=af.train.GradientDescentOptimizer(0.1),
        ),
    }
    return makers[kind]()


_BINARY_KEYS = [
    "accuracy",
    "accuracy_baseline",
    "auc",
    "auc_precision_recall",
    "average_loss",
    "global_step",
    "label/mean",
    "loss",
    "precision",
    "prediction/mean",
    "recall",
]

# kind: (labels, eval metrics, the two rows' logits, their classes)
CASES = {
    "linear_binary": (
        "binary",
        dict(
            zip(
                _BINARY_KEYS,
                [0.8333333, 0.6666667, 0.9999995, 0.9999998, 0.4063638, 4, 0.6666667]
                + [1.2190915, 1.0, 0.5039932, 0.75],
                strict=True,
            )
        ),
        [[0.3198401], [-1.0826803]],
        [b"1", b"0"],
    ),
    "linear_multi": (
        "multi",
        {"accuracy": 0.5, "average_loss": 0.703799, "global_step": 4, "loss": 2.111397},
        [[0.209708, 0.465098, -0.0481338], [1.2504705, -1.4769664, 0.0514214]],
        [b"1", b"0"],
    ),
    "linear_regression": (
        "regression",
        {
            "average_loss": 0.7324604,
            "global_step": 4,
            "label/mean": 1.0,
            "loss": 2.1973813,
            "prediction/mean": 0.7038098,
        },
        [[0.7510051], [-1.2180386]],
        None,
    ),
    "dnn_binary": (
        "binary",
        dict(
            zip(
                _BINARY_KEYS,
                [0.6666667, 0.6666667, 0.7499997, 0.9083331, 0.5883737, 4, 0.6666667]
                + [1.765121, 1.0, 0.5555267, 0.5],
                strict=True,
            )
        ),
        [[0.110014], [-0.1031356]],
        [b"1", b"0"],
    ),
    "dnn_multi": (
        "multi",
        {"accuracy": 0.3333333, "average_loss": 2.7191887, "global_step": 4, "loss": 8.157566},
        [[-0.3508067, 0.4756184, 0.775377], [-1.8745247, 1.9251214, 2.0260453]],
        [b"2", b"2"],
    ),
    "dnn_regression": (
        "regression",
        {
            "average_loss": 2.2058165,
            "global_step": 4,
            "label/mean": 1.0,
            "loss": 6.6174498,
            "prediction/mean": 0.0732577,
        },
        [[0.6329917], [-1.5821297]],
        None,
    ),
    "linear_binary_vocab": (
        "binary_vocab",
        dict(
            zip(
                _BINARY_KEYS,
                [0.5294118, 0.6470588, 0.9999997, 0.9999998, 0.5211734, 4, 0.6470588]
                + [2.2149868, 1.0, 0.4211271, 0.2727273],
                strict=True,
            )
        ),
        [[0.0922515], [-1.1737173]],
        [b"b", b"a"],
    ),
    "dnn_multi_vocab": (
        "multi_vocab",
        {"accuracy": 0.5294118, "average_loss": 0.978935, "global_step": 4, "loss": 4.1604738},
        [[1.0829272, 0.1116394, -0.2908626], [0.0729659, -0.2583294, 0.1853635]],
        [b"x", b"z"],
    ),
}

# Prediction keys as TF's v1 heads name them.
CLASSIFIER_KEYS = ["all_class_ids", "all_classes", "class_ids", "classes", "logits"]
CLASSIFIER_KEYS += ["probabilities"]


@pytest.mark.parametrize("kind", sorted(CASES))
def test_canned_matches_tf(kind, tmp_path):
    labels_key, metrics, logits, classes = CASES[kind]
    labels = LABELS[labels_key]
    est = _make(kind, str(tmp_path))
    est.train(_input(labels, True), steps=4)
    got = est.evaluate(_input(labels, False))
    assert sorted(got) == sorted(metrics)
    np.testing.assert_allclose(
        [got[k] for k in sorted(metrics)],
        [metrics[k] for k in sorted(metrics)],
        rtol=2e-5,
        atol=1e-6,
    )
    preds = list(est.predict(_predict_input))
    np.testing.assert_allclose(
        [p["logits" if classes else "predictions"] for p in preds], logits, rtol=2e-5, atol=1e-6
    )
    if classes is None:
        assert [sorted(p) for p in preds] == [["predictions"]] * 2
        return
    keys = CLASSIFIER_KEYS + (["logistic"] if labels_key.startswith("binary") else [])
    assert [sorted(p) for p in preds] == [sorted(keys)] * 2
    assert [p["classes"][0] for p in preds] == classes
    n = len(logits[0]) if len(logits[0]) > 1 else 2
    assert preds[0]["all_class_ids"].tolist() == list(range(n))
    probs = np.array([p["probabilities"] for p in preds])
    np.testing.assert_allclose(probs.sum(axis=1), [1.0, 1.0], rtol=1e-6)


def test_linear_variables_as_tf(tmp_path):
    est = _make("linear_binary", str(tmp_path))
    est.train(_input(LABELS["binary"], True), steps=4)
    # TF 2.15.1's checkpoint names: one-partition variables, FTRL's two slots.
    assert est.get_variable_names() == [
        "global_step",
        "linear/linear_model/bias_weights",
        "linear/linear_model/bias_weights/part_0/Ftrl",
        "linear/linear_model/bias_weights/part_0/Ftrl_1",
        "linear/linear_model/x/weights",
        "linear/linear_model/x/weights/part_0/Ftrl",
        "linear/linear_model/x/weights/part_0/Ftrl_1",
    ]
    np.testing.assert_allclose(
        est.get_variable_value("linear/linear_model/x/weights").ravel(),
        [-0.3853853, 0.1052916],
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        est.get_variable_value("linear/linear_model/bias_weights"), [0.4946421], rtol=1e-5
    )


def test_dnn_variables_as_tf(tmp_path):
    est = _make("dnn_binary", str(tmp_path))
    est.train(_input(LABELS["binary"], True), steps=4)
    # TF 2.15.1's checkpoint names, its slot names included (TF cuts the slot's name
    # by length; 't_0/Adagrad' is what it writes, and what TF reads back).
    layers = ["hiddenlayer_0", "hiddenlayer_1", "logits"]
    assert est.get_variable_names() == [
        f"dnn/{layer}/{kind}{slot}"
        for layer in layers
        for kind in ("bias", "kernel")
        for slot in ("", "/t_0/Adagrad")
    ] + ["global_step"]
    np.testing.assert_allclose(
        est.get_variable_value("dnn/logits/kernel/t_0/Adagrad").ravel(),
        [0.1347708, 53.295036, 63.154636],
        rtol=1e-5,
    )
    # TF 2.15.1 (glorot-uniform kernels from graph seed 42, 4 Adagrad steps).
    np.testing.assert_allclose(
        est.get_variable_value("dnn/hiddenlayer_0/kernel").ravel()[:3],
        [0.5564536, 0.9589964, -0.0775198],
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        est.get_variable_value("dnn/logits/kernel").ravel(),
        [1.2320108, -0.4777851, 0.7744769],
        rtol=1e-5,
    )


def test_canned_argument_errors():
    with pytest.raises(ValueError) as info:
        E.LinearClassifier(_columns(), n_classes=1)
    assert str(info.value) == "n_classes must be > 2: 1."
    with pytest.raises(TypeError) as info:
        E.LinearClassifier(_columns(), label_vocabulary="ab")
    assert str(info.value) == (
        "label_vocabulary should be a list or tuple. Given type: <class 'str'>"
    )
    est = E.DNNClassifier([3], _columns(), optimizer="Foo")
    with pytest.raises(ValueError) as info:
        est.train(_input(LABELS["binary"], True), steps=1)
    assert str(info.value) == (
        "Unsupported optimizer name: Foo. Supported names are: "
        "('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD')"
    )


def test_dnn_classifier_export_serves_as_tf(tmp_path):
    x = np.array([[1, 2], [3, -4], [-5, 6]], np.float32)
    y = np.array([1, 0, 1], np.int64)
    cols = _columns()
    est = E.DNNClassifier([3], cols, model_dir=str(tmp_path / "m"), config=_config())
    est.train(lambda: af.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(3), steps=3)
    receiver = E.export.build_parsing_serving_input_receiver_fn(
        af.feature_column.make_parse_example_spec(cols)
    )
    path = est.export_saved_model(str(tmp_path / "export"), receiver)
    feature = af.train.Feature(float_list=af.train.FloatList(value=[1.0, 2.0]))
    example = af.train.Example(features=af.train.Features(feature={"x": feature}))
    with af.Graph().as_default(), af.Session() as sess:
        mg = af.saved_model.loader.load(sess, ["serve"], path)
        assert sorted(k for k in mg.signature_def if not k.startswith("__")) == [
            "classification",
            "predict",
            "regression",
            "serving_default",
        ]
        sig = mg.signature_def["serving_default"]
        assert sig.method_name == "tensorflow/serving/classify"
        feed = {sig.inputs["inputs"].name: [example.SerializeToString()]}
        out = sess.run({k: v.name for k, v in sig.outputs.items()}, feed)
        logits = mg.signature_def["predict"].outputs["logits"].name
        logit = sess.run(
            logits,
            {mg.signature_def["predict"].inputs["examples"].name: feed[sig.inputs["inputs"].name]},
        )
    # TF 2.15.1 serves this program's export as below (and loads this export itself).
    assert out["classes"].tolist() == [[b"0", b"1"]]
    np.testing.assert_allclose(out["scores"], [[0.3691396, 0.6308603]], rtol=1e-5)
    np.testing.assert_allclose(logit, [[0.5359095]], rtol=1e-5)


# Categorical columns: TF 2.15.1, RunConfig(tf_random_seed=7), 3 steps, batches of 3.
_CX = np.array([[1.0], [3.0], [-5.0], [7.0], [0.5], [2.0]], np.float32)
_CC = np.array([["a"], ["b"], ["c"], ["a"], ["b"], ["d"]])


def _categorical_estimator(kind, model_dir):
    fc = af.feature_column
    num = fc.numeric_column("x")
    cat = fc.categorical_column_with_vocabulary_list("c", ["a", "b", "c"])
    buck = fc.bucketized_column(num, [0.0, 2.0])
    cfg = E.RunConfig(tf_random_seed=7, save_summary_steps=0)
    if kind == "linear":
        columns = [num, cat, buck, fc.crossed_column([cat, buck], 5)]
        return E.LinearClassifier(columns, model_dir=model_dir, config=cfg)
    if kind == "dnn_indicator":
        columns = [num, fc.indicator_column(cat)]
    else:
        columns = [num, fc.embedding_column(cat, 2), fc.embedding_column(buck, 3)]
    return E.DNNClassifier([3], columns, model_dir=model_dir, config=cfg)


@pytest.mark.parametrize(
    "kind, expected, weights",
    [
        (
            "linear",
            {"accuracy": 0.83333, "auc": 1.0, "loss": 0.96772},
            ["bias_weights", "c/weights", "c_X_x_bucketized/weights", "x/weights"]
            + ["x_bucketized/weights"],
        ),
        ("dnn_indicator", {"accuracy": 0.83333, "auc": 0.75, "loss": 1.98315}, []),
        (
            "dnn_embedding",
            {"accuracy": 0.5, "auc": 0.875, "loss": 1.97827},
            ["c_embedding/embedding_weights", "x_bucketized_embedding/embedding_weights"],
        ),
    ],
)
def test_categorical_columns_match_tf(kind, expected, weights, tmp_path):
    est = _categorical_estimator(kind, str(tmp_path))

    def input_fn(repeat):
        ds = af.data.Dataset.from_tensor_slices(({"x": _CX, "c": _CC}, LABELS["binary"]))
        return (ds.repeat() if repeat else ds).batch(3)

    est.train(lambda: input_fn(True), steps=3)
    got = est.evaluate(lambda: input_fn(False))
    np.testing.assert_allclose(
        [got[k] for k in sorted(expected)], [expected[k] for k in sorted(expected)], atol=1e-5
    )
    names = est.get_variable_names()
    if kind == "linear":
        assert names == ["global_step"] + [
            f"linear/linear_model/{w}{suffix}"
            for w in weights
            for suffix in ("", "/part_0/Ftrl", "/part_0/Ftrl_1")
        ]
    else:
        scope = "dnn/input_from_feature_columns/input_layer/"
        assert [n for n in names if n.startswith(scope)] == [
            scope + w + slot for w in weights for slot in ("", "/t_0/Adagrad")
        ]


@pytest.mark.parametrize(
    "n_classes, labels, vocabulary, error, message",
    [
        (
            2,
            [[1], [2]],
            None,
            af.errors.InvalidArgumentError,
            "assertion failed: [Labels must <= n_classes - 1] [Condition x <= y did not hold "
            "element-wise:] [x (linear/head/Cast:0) = ] [[1][2]] [y "
            "(linear/head/assert_range/Const:0) = ] [1]",
        ),
        (
            3,
            [[1], [-1]],
            None,
            af.errors.InvalidArgumentError,
            "assertion failed: [Labels must >= 0.  ] [Condition x >= 0 did not hold "
            "element-wise:] [x (linear/head/labels:0) = ] [[1][-1]]",
        ),
        (
            2,
            [["a"], ["c"]],
            ["a", "b"],
            af.errors.InvalidArgumentError,
            "assertion failed: [Labels must >= 0.  ] [Condition x >= 0 did not hold "
            "element-wise:] [x (linear/head/Cast:0) = ] [[0][-1]]",
        ),
        (
            3,
            np.array([[1.0], [0.0]], np.float32),
            None,
            ValueError,
            "Labels dtype should be integer. Instead got <dtype: 'float32'>.",
        ),
        (
            2,
            [[1, 0], [0, 1]],
            None,
            ValueError,
            "Mismatched label shape. Expected labels dimension=1.  Received 2. Suggested "
            "Fix:If your classifier expects one-hot encoding label,check your n_classes "
            "argument to the estimator and/or the shape of your label. Otherwise, check the "
            "shape of your label.",
        ),
        (
            2,
            [[1], [0]],
            ["a", "b"],
            TypeError,
            "Dtype of argument `keys` must be <dtype: 'string'>, received: <dtype: 'int64'>",
        ),
    ],
)
def test_classifier_label_errors(n_classes, labels, vocabulary, error, message, tmp_path):
    # TF 2.15.1 raises these (the run-time ones as InvalidArgumentError from assert ops).
    est = E.LinearClassifier(
        _columns(), n_classes=n_classes, label_vocabulary=vocabulary, model_dir=str(tmp_path)
    )
    x = X[:2]

    def input_fn():
        return af.data.Dataset.from_tensor_slices(({"x": x}, np.asarray(labels))).batch(2)

    with pytest.raises(error) as info:
        est.train(input_fn, steps=1)
    assert str(info.value).split("\n")[0] == message


def _summaries(directory):
    values = {}
    for name in os.listdir(directory):
        if name.startswith("events"):
            for event in af.train.summary_iterator(os.path.join(directory, name)):
                for v in event.summary.value:
                    if v.HasField("simple_value"):
                        values[(event.step, v.tag)] = v.simple_value
                    elif v.HasField("tensor"):
                        values[(event.step, v.tag)] = af.make_ndarray(v.tensor).tolist()
                    else:
                        values[(event.step, v.tag)] = "histo"
    return values


def test_summaries_as_tf(tmp_path):
    x, y = X[:3], LABELS["binary"][:3]
    cfg = E.RunConfig(save_summary_steps=1, tf_random_seed=3)
    est = E.LinearClassifier(_columns(), model_dir=str(tmp_path), config=cfg, weight_column="w")

    def input_fn(repeat):
        ds = af.data.Dataset.from_tensor_slices(({"x": x, "w": W[:3]}, y))
        return (ds.repeat() if repeat else ds).batch(3)

    est.train(lambda: input_fn(True), steps=2)
    est.evaluate(lambda: input_fn(False))
    # TF 2.15.1 writes these (global_step/sec too, whose value is a rate).
    train = {k: v for k, v in _summaries(str(tmp_path)).items() if k[1] != "global_step/sec"}
    expected = {
        (1, "average_loss"): 0.69315,
        (1, "linear/bias"): 0.0,
        (1, "linear/fraction_of_zero_weights"): 1.0,
        (1, "loss"): 2.42602,
        (2, "average_loss"): 0.31725,
        (2, "linear/bias"): -0.12403,
        (2, "linear/fraction_of_zero_weights"): 0.0,
        (2, "loss"): 1.11038,
    }
    assert sorted(train) == sorted(expected)
    np.testing.assert_allclose(
        [train[k] for k in sorted(expected)], [expected[k] for k in sorted(expected)], atol=1e-5
    )
    evals = _summaries(str(tmp_path / "eval"))
    assert evals.pop((2, "checkpoint_path")) == str(tmp_path / "model.ckpt-2").encode()
    expected = {"accuracy": 1.0, "accuracy_baseline": 0.57143, "auc": 1.0}
    expected.update({"auc_precision_recall": 1.0, "average_loss": 0.25129})
    expected.update({"label/mean": 0.42857, "loss": 0.87953, "precision": 1.0})
    expected.update({"prediction/mean": 0.37207, "recall": 1.0})
    assert sorted(evals) == [(2, k) for k in sorted(expected)]
    np.testing.assert_allclose(
        [evals[(2, k)] for k in sorted(expected)],
        [expected[k] for k in sorted(expected)],
        atol=1e-5,
    )


def test_parse_example_specs():
    # Recorded from TF 2.15.1 (reprs of the FixedLenFeatures).
    def specs(spec):
        return sorted((k, repr(v)) for k, v in spec.items())

    x = "FixedLenFeature(shape=(2,), dtype=tf.float32, default_value=None)"
    got = E.classifier_parse_example_spec(
        _columns(), "y", label_dtype=af.string, label_default="a", weight_column="w"
    )
    assert specs(got) == [
        ("w", "FixedLenFeature(shape=(1,), dtype=tf.float32, default_value=None)"),
        ("x", x),
        ("y", "FixedLenFeature(shape=(1,), dtype=tf.string, default_value='a')"),
    ]
    got = E.regressor_parse_example_spec(
        _columns(), "y", label_dimension=3, weight_column=af.feature_column.numeric_column("w")
    )
    assert specs(got) == [
        ("w", "FixedLenFeature(shape=(1,), dtype=tf.float32, default_value=None)"),
        ("x", x),
        ("y", "FixedLenFeature(shape=(3,), dtype=tf.float32, default_value=None)"),
    ]
    with pytest.raises(ValueError) as info:
        E.classifier_parse_example_spec(_columns(), "x")
    assert str(info.value) == (
        "label should not be used as feature. label_key: x, features: dict_keys(['x'])"
    )
    with pytest.raises(ValueError) as info:
        E.classifier_parse_example_spec(_columns(), "y", weight_column="x")
    assert str(info.value) == (
        "weight_column should not be used as feature. weight_column: x, features: "
        "dict_keys(['x', 'y'])"
    )


# Wide and deep: TF 2.15.1, RunConfig(tf_random_seed=11), 3 steps, batches of 3.
_WIDE_DEEP = {
    "classifier": (
        "binary",
        {"accuracy": 0.83333, "auc": 0.4375, "average_loss": 0.74915, "loss": 2.24746},
        0.29654,
        ["dnn/input_from_feature_columns/input_layer/c_embedding/embedding_weights/Adagrad"]
        + ["linear/linear_model/c/weights/Ftrl_1"],
        {"linear/linear/fraction_of_zero_values": 0.0, "linear/bias": 0.0057},
    ),
    "regressor": (
        "regression",
        {"average_loss": 3.41182, "loss": 10.23545, "prediction/mean": 1.44037},
        0.42411,
        ["dnn/hiddenlayer_1/kernel/Adagrad", "linear/linear_model/bias_weights/Ftrl"],
        {"dnn/dnn/hiddenlayer_0/fraction_of_zero_values": 0.5, "loss": 12.0927},
    ),
}


@pytest.mark.parametrize("kind", sorted(_WIDE_DEEP))
def test_dnn_linear_combined_matches_tf(kind, tmp_path):
    labels_key, metrics, first, some_names, some_summaries = _WIDE_DEEP[kind]
    fc = af.feature_column
    num = fc.numeric_column("x")
    cat = fc.categorical_column_with_vocabulary_list("c", ["a", "b", "c"])
    cfg = E.RunConfig(tf_random_seed=11, save_summary_steps=1)
    if kind == "classifier":
        est = E.DNNLinearCombinedClassifier(
            linear_feature_columns=[cat, num],
            dnn_feature_columns=[num, fc.embedding_column(cat, 2)],
            dnn_hidden_units=[3],
            model_dir=str(tmp_path),
            config=cfg,
        )
    else:
        est = E.DNNLinearCombinedRegressor(
            linear_feature_columns=[cat],
            dnn_feature_columns=[num],
            dnn_hidden_units=[4, 2],
            model_dir=str(tmp_path),
            config=cfg,
        )
    labels = LABELS[labels_key]

    def input_fn(repeat):
        ds = af.data.Dataset.from_tensor_slices(({"x": _CX, "c": _CC}, labels))
        return (ds.repeat() if repeat else ds).batch(3)

    est.train(lambda: input_fn(True), steps=3)
    got = est.evaluate(lambda: input_fn(False))
    assert got["global_step"] == 3
    np.testing.assert_allclose(
        [got[k] for k in sorted(metrics)], [metrics[k] for k in sorted(metrics)], atol=1e-5
    )
    pred = next(est.predict(lambda: af.data.Dataset.from_tensors({"x": _CX[:1], "c": _CC[:1]})))
    np.testing.assert_allclose(pred["logits" if kind == "classifier" else "predictions"], [first],
                               atol=1e-5)  # fmt: skip
    assert set(some_names) <= set(est.get_variable_names())
    written = _summaries(str(tmp_path))
    np.testing.assert_allclose(
        [written[(3, tag)] for tag in sorted(some_summaries)],
        [some_summaries[tag] for tag in sorted(some_summaries)],
        atol=1e-4,
    )


def test_dnn_linear_combined_errors(tmp_path):
    with pytest.raises(ValueError) as info:
        E.DNNLinearCombinedClassifier()
    assert (
        str(info.value) == "Either linear_feature_columns or dnn_feature_columns must be defined."
    )
    est = E.DNNLinearCombinedClassifier(
        dnn_feature_columns=[af.feature_column.numeric_column("x")], model_dir=str(tmp_path)
    )
    with pytest.raises(ValueError) as info:
        est.train(lambda: ({"x": af.constant(_CX)}, af.constant(LABELS["binary"])), steps=1)
    assert str(info.value) == (
        "dnn_hidden_units must be defined when dnn_feature_columns is specified."
    )


# Baselines: TF 2.15.1, 3 steps of FTRL(0.3), batches of 3.
@pytest.mark.parametrize(
    "kind, labels_key, metrics, bias",
    [
        (
            "binary_weighted",
            "binary",
            {"accuracy": 0.64706, "auc_precision_recall": 0.82353, "loss": 2.91632},
            [0.04935167],
        ),
        ("multi", "multi", {"accuracy": 0.33333, "loss": 3.29584}, [-1.696378e-07] * 3),
        ("regressor", "regression", {"loss": 7.74917, "prediction/mean": 0.59209}, [0.59208983]),
    ],
)
def test_baselines_match_tf(kind, labels_key, metrics, bias, tmp_path):
    cfg = E.RunConfig(save_summary_steps=0)
    if kind == "binary_weighted":
        est = E.BaselineClassifier(model_dir=str(tmp_path), config=cfg, weight_column="w")
    elif kind == "multi":
        est = E.BaselineClassifier(model_dir=str(tmp_path), config=cfg, n_classes=3)
    else:
        est = E.BaselineRegressor(model_dir=str(tmp_path), config=cfg)
    labels = LABELS[labels_key]

    def input_fn(repeat):
        ds = af.data.Dataset.from_tensor_slices(({"x": _CX, "w": W}, labels))
        return (ds.repeat() if repeat else ds).batch(3)

    est.train(lambda: input_fn(True), steps=3)
    got = est.evaluate(lambda: input_fn(False))
    np.testing.assert_allclose(
        [got[k] for k in sorted(metrics)], [metrics[k] for k in sorted(metrics)], atol=1e-5
    )
    assert est.get_variable_names() == [
        "baseline/bias",
        "baseline/bias/Ftrl",
        "baseline/bias/Ftrl_1",
        "global_step",
    ]
    np.testing.assert_allclose(est.get_variable_value("baseline/bias"), bias, rtol=1e-5, atol=1e-9)
