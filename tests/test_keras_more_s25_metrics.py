"""tf.keras.metrics classes added in s25 (confusion-matrix metrics, AUC, the IoU family,
running-mean metrics, Sum, MeanTensor, MeanRelativeError, F1/FBeta, R2Score): values
after one and two batches, state variables, configs, errors and use in compile/fit.

Expected values were recorded from TF 2.21 (tf_keras, TF_USE_LEGACY_KERAS=1, v2 behaviour
disabled) on the inputs built below; F1Score/FBetaScore/R2Score were recorded in TF 2.21
eager mode, since in graph mode their `update_state` there returns no update op.
"""

import re

import numpy as np
import pytest

import asyncflow as tf

K = tf.keras
M = K.metrics


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g
    K.backend.clear_session()


RNG = np.random.RandomState(0)
YT_B = (RNG.rand(2, 8, 1) > 0.5).astype("float32")
YP_B = RNG.rand(2, 8, 1).astype("float32")
SW = RNG.rand(2, 8).astype("float32")
YT_R = RNG.rand(2, 4, 3).astype("float32")
YP_R = (RNG.rand(2, 4, 3) + 0.1).astype("float32")
YT_I = RNG.randint(0, 3, size=(2, 6)).astype("int32")
YP_C = RNG.rand(2, 6, 3).astype("float32")
YT_PM = np.sign(RNG.rand(2, 4, 3) - 0.5).astype("float32")


def _data(kind, i):
    if kind.startswith("b"):
        return YT_B[i], YP_B[i], (SW[i] if kind == "bw" else None)
    if kind.startswith("r"):
        return YT_R[i], YP_R[i], (SW[i, :4] if kind == "rw" else None)
    if kind == "pm":
        return YT_PM[i], YP_R[i] - 0.5, None
    if kind == "c":
        return YT_I[i], YP_C[i], None
    if kind in ("c1", "oh"):
        return np.eye(3, dtype="float32")[YT_I[i]], YP_C[i], None
    return YT_I[i], YP_C[i].argmax(-1), None  # "iou"


def _run(metric, calls):
    updates = [
        metric.update_state(*[None if a is None else tf.constant(a) for a in c]) for c in calls
    ]
    result = metric.result()
    sess = K.backend.get_session()
    sess.run(tf.variables_initializer(metric.variables))
    out = []
    for u in updates:
        sess.run(u)
        out.append(sess.run(result))
    return out


def _close(actual, expected):
    np.testing.assert_allclose(
        np.asarray(actual, np.float64), np.asarray(expected, np.float64), rtol=2e-5, atol=2e-6
    )


# (class, kwargs, data kind, result after batch 1, after batch 2, variable names, shapes,
#  config), recorded from TF 2.21 in one graph (names there carry _N suffixes).
CASES = [
    (
        "TruePositives",
        {},
        "b",
        5.0,
        7.0,
        ["accumulator"],
        [[1]],
        {"dtype": "float32", "name": "true_positives", "thresholds": None},
    ),
    (
        "TrueNegatives",
        {"thresholds": [0.3, 0.6]},
        "b",
        [0.0, 1.0],
        [1.0, 2.0],
        ["accumulator"],
        [[2]],
        {"dtype": "float32", "name": "true_negatives", "thresholds": [0.3, 0.6]},
    ),
    (
        "FalsePositives",
        {},
        "bw",
        0.6120960116386414,
        1.1780539751052856,
        ["accumulator"],
        [[1]],
        {"dtype": "float32", "name": "false_positives", "thresholds": None},
    ),
    (
        "FalseNegatives",
        {"thresholds": 0.7},
        "b",
        1.0,
        5.0,
        ["accumulator"],
        [[1]],
        {"dtype": "float32", "name": "false_negatives", "thresholds": 0.7},
    ),
    (
        "Precision",
        {},
        "b",
        0.8333330154418945,
        0.699999988079071,
        ["true_positives", "false_positives"],
        [[1], [1]],
        {
            "class_id": None,
            "dtype": "float32",
            "name": "precision",
            "thresholds": None,
            "top_k": None,
        },
    ),
    (
        "Precision",
        {"thresholds": [0.2, 0.5, 0.8]},
        "bw",
        [0.6167359948158264, 0.8035449981689453, 0.659600019454956],
        [0.6258580088615417, 0.7327859997749329, 0.6706309914588928],
        ["true_positives", "false_positives"],
        [[3], [3]],
        {
            "class_id": None,
            "dtype": "float32",
            "name": "precision_1",
            "thresholds": [0.2, 0.5, 0.8],
            "top_k": None,
        },
    ),
    (
        "Recall",
        {},
        "b",
        0.8333330154418945,
        0.6363639831542969,
        ["true_positives", "false_negatives"],
        [[1], [1]],
        {
            "class_id": None,
            "dtype": "float32",
            "name": "recall",
            "thresholds": None,
            "top_k": None,
        },
    ),
    (
        "Recall",
        {"thresholds": [0.25, 0.75]},
        "b",
        [0.8333330154418945, 0.8333330154418945],
        [0.7272729873657227, 0.5454549789428711],
        ["true_positives", "false_negatives"],
        [[2], [2]],
        {
            "class_id": None,
            "dtype": "float32",
            "name": "recall_1",
            "thresholds": [0.25, 0.75],
            "top_k": None,
        },
    ),
    (
        "Precision",
        {"top_k": 2},
        "c1",
        0.25,
        0.33333298563957214,
        ["true_positives", "false_positives"],
        [[1], [1]],
        {
            "class_id": None,
            "dtype": "float32",
            "name": "precision_2",
            "thresholds": None,
            "top_k": 2,
        },
    ),
    (
        "Recall",
        {"class_id": 1},
        "c1",
        0.0,
        0.33333298563957214,
        ["true_positives", "false_negatives"],
        [[1], [1]],
        {"class_id": 1, "dtype": "float32", "name": "recall_2", "thresholds": None, "top_k": None},
    ),
    (
        "AUC",
        {},
        "b",
        0.41666701436042786,
        0.48181799054145813,
        ["true_positives", "true_negatives", "false_positives", "false_negatives"],
        [[200], [200], [200], [200]],
        {
            "curve": "ROC",
            "dtype": "float32",
            "from_logits": False,
            "label_weights": None,
            "multi_label": False,
            "name": "auc",
            "num_labels": None,
            "num_thresholds": 200,
            "summation_method": "interpolation",
        },
    ),
    (
        "AUC",
        {"curve": "PR"},
        "b",
        0.6568629741668701,
        0.6630539894104004,
        ["true_positives", "true_negatives", "false_positives", "false_negatives"],
        [[200], [200], [200], [200]],
        {
            "curve": "PR",
            "dtype": "float32",
            "from_logits": False,
            "label_weights": None,
            "multi_label": False,
            "name": "auc_1",
            "num_labels": None,
            "num_thresholds": 200,
            "summation_method": "interpolation",
        },
    ),
    (
        "AUC",
        {"num_thresholds": 7},
        "bw",
        0.5541470050811768,
        0.46474799513816833,
        ["true_positives", "true_negatives", "false_positives", "false_negatives"],
        [[7], [7], [7], [7]],
        {
            "curve": "ROC",
            "dtype": "float32",
            "from_logits": False,
            "label_weights": None,
            "multi_label": False,
            "name": "auc_2",
            "num_labels": None,
            "num_thresholds": 7,
            "summation_method": "interpolation",
        },
    ),
    (
        "AUC",
        {"summation_method": "minoring"},
        "b",
        0.41666701436042786,
        0.4727270007133484,
        ["true_positives", "true_negatives", "false_positives", "false_negatives"],
        [[200], [200], [200], [200]],
        {
            "curve": "ROC",
            "dtype": "float32",
            "from_logits": False,
            "label_weights": None,
            "multi_label": False,
            "name": "auc_3",
            "num_labels": None,
            "num_thresholds": 200,
            "summation_method": "minoring",
        },
    ),
    (
        "AUC",
        {"summation_method": "majoring", "curve": "PR"},
        "b",
        0.7166669964790344,
        0.7042750120162964,
        ["true_positives", "true_negatives", "false_positives", "false_negatives"],
        [[200], [200], [200], [200]],
        {
            "curve": "PR",
            "dtype": "float32",
            "from_logits": False,
            "label_weights": None,
            "multi_label": False,
            "name": "auc_4",
            "num_labels": None,
            "num_thresholds": 200,
            "summation_method": "majoring",
        },
    ),
    (
        "AUC",
        {"from_logits": True},
        "b",
        0.41666701436042786,
        0.4727270007133484,
        ["true_positives", "true_negatives", "false_positives", "false_negatives"],
        [[200], [200], [200], [200]],
        {
            "curve": "ROC",
            "dtype": "float32",
            "from_logits": True,
            "label_weights": None,
            "multi_label": False,
            "name": "auc_5",
            "num_labels": None,
            "num_thresholds": 200,
            "summation_method": "interpolation",
        },
    ),
    (
        "PrecisionAtRecall",
        {"recall": 0.5},
        "b",
        0.8333330154418945,
        0.75,
        ["true_positives", "true_negatives", "false_positives", "false_negatives"],
        [[200], [200], [200], [200]],
        {
            "class_id": None,
            "dtype": "float32",
            "name": "precision_at_recall",
            "num_thresholds": 200,
            "recall": 0.5,
        },
    ),
    (
        "RecallAtPrecision",
        {"precision": 0.6},
        "b",
        1.0,
        1.0,
        ["true_positives", "true_negatives", "false_positives", "false_negatives"],
        [[200], [200], [200], [200]],
        {
            "class_id": None,
            "dtype": "float32",
            "name": "recall_at_precision",
            "num_thresholds": 200,
            "precision": 0.6,
        },
    ),
    (
        "SensitivityAtSpecificity",
        {"specificity": 0.5},
        "b",
        0.8333330154418945,
        0.5454549789428711,
        ["true_positives", "true_negatives", "false_positives", "false_negatives"],
        [[200], [200], [200], [200]],
        {
            "class_id": None,
            "dtype": "float32",
            "name": "sensitivity_at_specificity",
            "num_thresholds": 200,
            "specificity": 0.5,
        },
    ),
    (
        "SpecificityAtSensitivity",
        {"sensitivity": 0.5, "num_thresholds": 10},
        "bw",
        0.6065829992294312,
        0.09020800143480301,
        ["true_positives", "true_negatives", "false_positives", "false_negatives"],
        [[10], [10], [10], [10]],
        {
            "class_id": None,
            "dtype": "float32",
            "name": "specificity_at_sensitivity",
            "num_thresholds": 10,
            "sensitivity": 0.5,
        },
    ),
    (
        "RootMeanSquaredError",
        {},
        "r",
        0.38645100593566895,
        0.44071999192237854,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "name": "root_mean_squared_error"},
    ),
    (
        "RootMeanSquaredError",
        {},
        "rw",
        0.42583000659942627,
        0.46091800928115845,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "name": "root_mean_squared_error"},
    ),
    (
        "MeanAbsolutePercentageError",
        {},
        "r",
        98.41352081298828,
        160.85662841796875,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "name": "mean_absolute_percentage_error"},
    ),
    (
        "MeanSquaredLogarithmicError",
        {},
        "r",
        0.06241200119256973,
        0.08509700000286102,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "name": "mean_squared_logarithmic_error"},
    ),
    (
        "CosineSimilarity",
        {},
        "r",
        0.8678969740867615,
        0.8036479949951172,
        ["total", "count"],
        [[], []],
        {"axis": -1, "dtype": "float32", "name": "cosine_similarity"},
    ),
    (
        "CosineSimilarity",
        {"axis": 1},
        "r",
        0.8678969740867615,
        0.8036479949951172,
        ["total", "count"],
        [[], []],
        {"axis": 1, "dtype": "float32", "name": "cosine_similarity"},
    ),
    (
        "LogCoshError",
        {},
        "rw",
        0.0860619992017746,
        0.10064399987459183,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "name": "logcosh"},
    ),
    (
        "KLDivergence",
        {},
        "r",
        0.1665250062942505,
        0.25498300790786743,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "name": "kullback_leibler_divergence"},
    ),
    (
        "Poisson",
        {},
        "r",
        0.8429329991340637,
        0.8688600063323975,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "name": "poisson"},
    ),
    (
        "Hinge",
        {},
        "pm",
        1.1028989553451538,
        1.1150740385055542,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "name": "hinge"},
    ),
    (
        "SquaredHinge",
        {},
        "pm",
        1.289721965789795,
        1.3044099807739258,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "name": "squared_hinge"},
    ),
    (
        "CategoricalHinge",
        {},
        "pm",
        1.5631999969482422,
        1.7923810482025146,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "name": "categorical_hinge"},
    ),
    (
        "SparseCategoricalCrossentropy",
        {},
        "c",
        1.4561690092086792,
        1.3098640441894531,
        ["total", "count"],
        [[], []],
        {
            "axis": -1,
            "dtype": "float32",
            "from_logits": False,
            "ignore_class": None,
            "name": "sparse_categorical_crossentropy",
        },
    ),
    (
        "SparseCategoricalCrossentropy",
        {"from_logits": True},
        "c",
        1.2212680578231812,
        1.1501350402832031,
        ["total", "count"],
        [[], []],
        {
            "axis": -1,
            "dtype": "float32",
            "from_logits": True,
            "ignore_class": None,
            "name": "sparse_categorical_crossentropy",
        },
    ),
    (
        "SparseTopKCategoricalAccuracy",
        {"k": 2},
        "c",
        0.5,
        0.6666669845581055,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "k": 2, "name": "sparse_top_k_categorical_accuracy"},
    ),
    (
        "SparseTopKCategoricalAccuracy",
        {},
        "c",
        1.0,
        1.0,
        ["total", "count"],
        [[], []],
        {"dtype": "float32", "k": 5, "name": "sparse_top_k_categorical_accuracy"},
    ),
    (
        "MeanIoU",
        {"num_classes": 3},
        "iou",
        0.06666699796915054,
        0.19444400072097778,
        ["total_confusion_matrix"],
        [[3, 3]],
        {
            "axis": -1,
            "dtype": "float32",
            "ignore_class": None,
            "name": "mean_io_u",
            "num_classes": 3,
            "sparse_y_pred": True,
            "sparse_y_true": True,
        },
    ),
    (
        "IoU",
        {"num_classes": 3, "target_class_ids": [0, 2]},
        "iou",
        0.10000000149011612,
        0.20833300054073334,
        ["total_confusion_matrix"],
        [[3, 3]],
        {
            "axis": -1,
            "dtype": "float32",
            "ignore_class": None,
            "name": "io_u",
            "num_classes": 3,
            "sparse_y_pred": True,
            "sparse_y_true": True,
            "target_class_ids": [0, 2],
        },
    ),
    (
        "BinaryIoU",
        {},
        "b",
        0.5238100290298462,
        0.36111098527908325,
        ["total_confusion_matrix"],
        [[2, 2]],
        {"dtype": "float32", "name": "binary_io_u", "target_class_ids": [0, 1], "threshold": 0.5},
    ),
    (
        "BinaryIoU",
        {"target_class_ids": [1], "threshold": 0.3},
        "b",
        0.625,
        0.5333330035209656,
        ["total_confusion_matrix"],
        [[2, 2]],
        {"dtype": "float32", "name": "binary_io_u_1", "target_class_ids": [1], "threshold": 0.3},
    ),
    (
        "OneHotIoU",
        {"num_classes": 3, "target_class_ids": [1]},
        "oh",
        0.0,
        0.16666699945926666,
        ["total_confusion_matrix"],
        [[3, 3]],
        {
            "axis": -1,
            "dtype": "float32",
            "ignore_class": None,
            "name": "one_hot_io_u",
            "num_classes": 3,
            "sparse_y_pred": False,
            "target_class_ids": [1],
        },
    ),
    (
        "OneHotMeanIoU",
        {"num_classes": 3},
        "oh",
        0.06666699796915054,
        0.19444400072097778,
        ["total_confusion_matrix"],
        [[3, 3]],
        {
            "axis": -1,
            "dtype": "float32",
            "ignore_class": None,
            "name": "one_hot_mean_io_u",
            "num_classes": 3,
            "sparse_y_pred": False,
        },
    ),
]


def _base(name):
    return re.sub(r"_\d+$", "", name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[2]}-{sorted(c[1])}")
def test_metric_values_variables_config(case):
    cls_name, kwargs, kind, r1, r2, var_names, var_shapes, config = case
    metric = getattr(M, cls_name)(**kwargs)
    got = _run(metric, [_data(kind, 0), _data(kind, 1)])
    _close(got[0], r1)
    _close(got[1], r2)
    assert [re.sub(r"(_\d+)?:0$", "", v.name) for v in metric.variables] == var_names
    assert [v.shape.as_list() for v in metric.variables] == var_shapes
    got_config = metric.get_config()
    assert {**got_config, "name": _base(got_config["name"])} == {
        **config,
        "name": _base(config["name"]),
    }
    again = type(metric).from_config(got_config)
    assert again.get_config() == got_config


def test_default_names_and_variable_names_in_one_graph():
    # Recorded from TF 2.21: metrics without a fixed name are numbered per graph, and
    # their variables are uniquified by the graph.
    p0, p1, r0 = M.Precision(), M.Precision(), M.Recall()
    auc = M.AUC()
    assert [p0.name, p1.name, r0.name, auc.name] == ["precision", "precision_1", "recall", "auc"]
    names = [v.name for m in (p0, p1, r0, auc) for v in m.variables]
    assert names == [
        "true_positives:0",
        "false_positives:0",
        "true_positives_1:0",
        "false_positives_1:0",
        "true_positives_2:0",
        "false_negatives:0",
        "true_positives_3:0",
        "true_negatives:0",
        "false_positives_2:0",
        "false_negatives_1:0",
    ]


RNG2 = np.random.RandomState(1)
YT2 = (RNG2.rand(2, 6, 3) > 0.5).astype("float32")
YP2 = RNG2.rand(2, 6, 3).astype("float32")
SW2 = RNG2.rand(2, 6).astype("float32")


def test_sum_mean_tensor_mean_relative_error():
    # Recorded from TF 2.21 (graph mode).
    _close(_run(M.Sum(), [(YP2[0],), (YP2[1], SW2[1, :, None])]), [8.44282, 14.18086])
    m = M.MeanTensor()
    got = _run(m, [(YP2[0],), (YP2[1], SW2[1, :, None])])
    assert [v.shape.as_list() for v in m.variables] == [[6, 3], [6, 3]]
    assert m.get_config() == {"name": "mean_tensor", "dtype": "float32"}
    _close(got[0], YP2[0])
    w = SW2[1, :, None] * np.ones((6, 3), np.float32)
    _close(got[1], (YP2[0] + YP2[1] * w) / (1 + w))
    mre = M.MeanRelativeError(normalizer=[1.0, 2.0, 0.0])
    _close(_run(mre, [(YT2[0], YP2[0]), (YT2[1], YP2[1], SW2[1])]), [0.26917, 0.27259])
    assert mre.get_config()["normalizer"].tolist() == [1.0, 2.0, 0.0]


@pytest.mark.parametrize(
    "make, want",
    [
        (lambda: M.F1Score(), [[0.5, 0.33333, 0.0], [0.33567, 0.35586, 0.66419]]),
        (lambda: M.F1Score(average="micro"), [0.33333, 0.47008]),
        (lambda: M.F1Score(average="macro", threshold=0.5), [0.24444, 0.40918]),
        (lambda: M.F1Score(average="weighted"), [0.27778, 0.47344]),
        (lambda: M.R2Score(), [-0.61707, -0.41322]),
        (
            lambda: M.R2Score(class_aggregation=None),
            [[-0.20257, -1.4415, -0.20714], [-0.46508, -0.829, 0.05443]],
        ),
        (lambda: M.R2Score(class_aggregation="variance_weighted_average"), [-0.61707, -0.39363]),
    ],
)
def test_f1_and_r2(make, want):
    # Recorded from TF 2.21 in eager mode (see the module docstring).
    got = _run(make(), [(YT2[0], YP2[0]), (YT2[1], YP2[1], SW2[1])])
    _close(got[0], want[0])
    _close(got[1], want[1])


def test_fbeta_and_variables():
    m = M.FBetaScore(beta=2.0, average="macro")
    _close(_run(m, [(YT2[0], YP2[0]), (YT2[1], YP2[1])]), [0.30556, 0.46437])
    assert [v.name for v in m.variables] == [
        "true_positives:0",
        "false_positives:0",
        "false_negatives:0",
        "intermediate_weights:0",
    ]
    r2 = M.R2Score()
    _run(r2, [(YT2[0], YP2[0])])
    assert [(v.name.split(":")[0], v.dtype.base_dtype.name) for v in r2.variables][:2] == [
        ("num_samples", "int32"),
        ("squared_sum", "float32"),
    ]


# Errors recorded from TF 2.21 (class and message).
@pytest.mark.parametrize(
    "make, cls, message",
    [
        (lambda: M.Metric(), TypeError, "Can't instantiate abstract class Metric"),
        (
            lambda: M.AUC(curve="XX"),
            ValueError,
            'Invalid AUC curve value: "XX". Expected values are ["PR", "ROC", "PR_GAIN"]',
        ),
        (
            lambda: M.AUC(summation_method="x"),
            ValueError,
            'Invalid AUC summation method value: "x". Expected values are ["interpolation", '
            '"majoring", "minoring"]',
        ),
        (
            lambda: M.Precision(thresholds=[1.5]),
            ValueError,
            "Threshold values must be in [0, 1]. Received: [1.5]",
        ),
        (
            lambda: M.F1Score(average="foo"),
            ValueError,
            "Invalid `average` argument value. Expected one of: {None, 'micro', 'macro', "
            "'weighted'}. Received: average=foo",
        ),
        (
            lambda: M.FBetaScore(beta=1),
            ValueError,
            "Invalid `beta` argument value. It should be a Python float. Received: beta=1 of "
            "type '<class 'int'>'",
        ),
        (
            lambda: M.R2Score(class_aggregation="x"),
            ValueError,
            "Invalid value for argument `class_aggregation`. Expected one of (None, "
            "'uniform_average', 'variance_weighted_average'). Received: class_aggregation=x",
        ),
        (lambda: M.IoU(3, [3]), ValueError, "Target class id 3 is out of range, which is [0, 3)."),
        (
            lambda: M.PrecisionAtRecall(1.5),
            ValueError,
            "Argument `recall` must be in the range [0, 1]. Received: recall=1.5",
        ),
        (
            lambda: M.AUC(num_thresholds=1),
            ValueError,
            "Argument `num_thresholds` must be an integer > 1. Received: num_thresholds=1",
        ),
    ],
)
def test_errors(make, cls, message):
    with pytest.raises(cls) as info:
        make()
    assert str(info.value).startswith(message)


def test_aliases_serialization_and_base_class():
    assert M.MAE is M.mae and M.get("MSE") is M.mean_squared_error
    assert M.serialize(M.AUC())["class_name"] == "AUC"
    p = M.deserialize({"class_name": "Precision", "config": {"name": "p", "thresholds": 0.3}})
    assert type(p) is M.Precision and p.thresholds == [0.3]
    assert isinstance(M.Mean(), M.Metric) and isinstance(M.AUC(), M.Metric)


def test_metric_objects_in_compile_fit_evaluate():
    # Recorded from TF 2.21 (graph mode): history after two epochs and evaluate().
    rng = np.random.RandomState(2)
    x = rng.rand(32, 4).astype("float32")
    y = (x.sum(1, keepdims=True) > 2).astype("float32")
    model = K.Sequential(
        [
            K.layers.Dense(
                1,
                activation="sigmoid",
                input_shape=(4,),
                kernel_initializer=K.initializers.Constant(0.3),
            )
        ]
    )
    model.compile(
        K.optimizers.SGD(0.5),
        "binary_crossentropy",
        metrics=[
            M.AUC(),
            M.Precision(),
            M.Recall(thresholds=[0.3, 0.6]),
            "mape",
            M.RootMeanSquaredError(),
            M.TruePositives(),
            M.BinaryIoU(),
            M.SpecificityAtSensitivity(0.5),
        ],
    )
    assert model.metrics_names == [
        "loss",
        "auc",
        "precision",
        "recall",
        "mean_absolute_percentage_error",
        "root_mean_squared_error",
        "true_positives",
        "binary_io_u",
        "specificity_at_sensitivity",
    ]
    h = model.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False).history
    want = {
        "auc": [0.5625, 0.63086],
        "binary_io_u": [0.25, 0.32917],
        "loss": [0.70088, 0.68261],
        "mean_absolute_percentage_error": [294189088.0, 277457184.0],
        "precision": [0.5, 0.53333],
        "recall": [[1.0, 0.5], [1.0, 0.4375]],
        "root_mean_squared_error": [0.50394, 0.49496],
        "specificity_at_sensitivity": [0.6875, 0.9375],
        "true_positives": [16.0, 16.0],
    }
    assert sorted(h) == sorted(want)
    for key, values in want.items():
        np.testing.assert_allclose(np.asarray(h[key], np.float64), values, rtol=1e-4)
    got = model.evaluate(x, y, batch_size=16, verbose=0)
    want_eval = [0.63845, 1.0, 0.5, [1.0, 0.8125], 273454336.0, 0.47271, 16.0, 0.25, 1.0]
    for g, w in zip(got, want_eval, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=1e-4)


# AUC with multi_label / label_weights: (kwargs, [unweighted after batch 1, 2],
# [sample-weighted after batch 1, 2]), recorded from TF 2.21 (graph mode).
AUC_LABEL_CASES = [
    ({"multi_label": True}, [0.475, 0.56667], [0.50633, 0.60526]),
    (
        {"multi_label": True, "num_labels": 3, "curve": "PR"},
        [0.59985, 0.69116],
        [0.62958, 0.74882],
    ),
    (
        {"multi_label": True, "label_weights": [0.2, 0.5, 1.0], "num_thresholds": 11},
        [0.55147, 0.65104],
        [0.56786, 0.66119],
    ),
    ({"label_weights": [0.2, 0.5, 1.0]}, [0.515, 0.61113], [0.60334, 0.64409]),
    (
        {"multi_label": True, "summation_method": "majoring", "label_weights": [1.0, 0.0, 2.0]},
        [0.39722, 0.625],
        [0.50976, 0.64799],
    ),
    ({"label_weights": [1.0, 2.0, 3.0], "curve": "PR"}, [0.57265, 0.63891], [0.61491, 0.71439]),
]


@pytest.mark.parametrize("kwargs, plain, weighted", AUC_LABEL_CASES)
def test_auc_multi_label_and_label_weights(kwargs, plain, weighted):
    rng = np.random.RandomState(10)
    yt = (rng.rand(2, 8, 3) > 0.5).astype("float32")
    yp = rng.rand(2, 8, 3).astype("float32")
    sw = rng.rand(2, 8).astype("float32")
    for use_weights, want in ((False, plain), (True, weighted)):
        m = M.AUC(**kwargs)
        got = _run(m, [(yt[i], yp[i], sw[i] if use_weights else None) for i in range(2)])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
        shape = [m.num_thresholds, 3] if kwargs.get("multi_label") else [m.num_thresholds]
        assert [v.shape.as_list() for v in m.variables] == [shape] * 4
        assert m.get_config()["num_labels"] == kwargs.get("num_labels")


def test_r2_score_adjusted_for_regressors():
    # Recorded from TF 2.21 (eager mode): the adjusted score uses the number of elements
    # seen; with num_regressors >= that - 1 it falls back to the plain score.
    rng = np.random.RandomState(1)
    yt = rng.rand(6, 2).astype("float32")
    yp = rng.rand(6, 2).astype("float32")
    want = {1: -1.13447, 2: -1.37164, 5: -2.55745, 9: -9.67236, 11: -0.94043, 20: -0.94043}
    for p, w in want.items():
        got = _run(M.R2Score(num_regressors=p), [(yt, yp)])
        np.testing.assert_allclose(got[0], w, rtol=2e-5, atol=1e-5)


def test_metric_names_and_class_strings_in_compile():
    # Recorded from TF 2.21 (graph mode): function names, get() of a class name giving an
    # instance, and compile() naming string metrics by their function or class.
    for name, fn_name in [
        ("logcosh", "log_cosh"),
        ("log_cosh", "log_cosh"),
        ("kullback_leibler_divergence", "kl_divergence"),
        ("cosine_proximity", "cosine_similarity"),
        ("cosine_similarity", "cosine_similarity"),
    ]:
        assert M.get(name).__name__ == fn_name
    a = tf.constant([[0.2, 0.8, 0.1], [0.5, 0.3, 0.9]])
    b = tf.constant([[0.3, 0.6, 0.2], [0.1, 0.7, 0.4]])
    x = np.random.RandomState(0).rand(8, 3).astype("float32")
    y = np.random.RandomState(1).rand(8, 2).astype("float32")
    model = K.Sequential([K.layers.Dense(2, input_shape=(3,), kernel_initializer="ones")])
    model.compile(
        "sgd",
        "mse",
        metrics=[
            "log_cosh",
            "cosine_similarity",
            "AUC",
            "RootMeanSquaredError",
            "MeanSquaredError",
        ],
    )
    assert model.metrics_names == [
        "loss",
        "log_cosh",
        "cosine_similarity",
        "auc",
        "root_mean_squared_error",
        "mean_squared_error",
    ]
    got = model.evaluate(x, y, verbose=0)
    np.testing.assert_allclose(
        got, [2.4347, 0.855, 0.894, 0.0, 1.5603, 2.4347], rtol=1e-4, atol=1e-4
    )
    sess = K.backend.get_session()
    np.testing.assert_allclose(
        sess.run(M.get("cosine_proximity")(a, b)), [0.9631, 0.7117], rtol=1e-4
    )
    # (after compile: a metric made here would take the name "auc" first)
    assert type(M.get("AUC")) is M.AUC and type(M.get("Precision")) is M.Precision
