"""tf.keras.losses classes and functions added in s25 (Huber, KLDivergence, LogCosh,
Poisson, Hinge, SquaredHinge, CategoricalHinge, CosineSimilarity, MAPE, MSLE and the
binary and categorical focal crossentropies): each reduction with and without sample
weights, configs, `get` names and serialization.

Expected values were recorded from TF 2.21 (tf_keras, TF_USE_LEGACY_KERAS=1, v2 behaviour
disabled) on the inputs built below.
"""

import numpy as np
import pytest

import asyncflow as tf

L = tf.keras.losses

RNG = np.random.RandomState(3)
YT = (RNG.rand(4, 3) > 0.5).astype("float32")
YP = RNG.rand(4, 3).astype("float32") * 0.9 + 0.05
YR = (RNG.rand(4, 3) * 3 - 1).astype("float32")
YC = np.eye(3, dtype="float32")[RNG.randint(0, 3, 4)]
SW = RNG.rand(4).astype("float32")
INPUTS = {
    "Huber": (YR, YP),
    "KLDivergence": (YT, YP),
    "LogCosh": (YR, YP),
    "Poisson": (YT, YP),
    "Hinge": (YT, YR),
    "SquaredHinge": (YT, YR),
    "CategoricalHinge": (YC, YR),
    "CosineSimilarity": (YR, YP),
    "MeanAbsolutePercentageError": (YR, YP),
    "MeanSquaredLogarithmicError": (YT, YP),
    "BinaryFocalCrossentropy": (YT, YP),
    "CategoricalFocalCrossentropy": (YC, YP),
}


def _inputs(name, kwargs):
    a, b = INPUTS[name]
    if name == "CosineSimilarity" and kwargs.get("axis") == 0:
        return a.T.copy(), b.T.copy()
    if kwargs.get("from_logits"):
        return a, YR
    return a, b


# (class, kwargs, [auto, auto weighted, sum, sum weighted, none, none weighted], config of
#  the reduction="none" instance), recorded from TF 2.21.
CASES = [
    (
        "Huber",
        {},
        [
            0.42146000266075134,
            0.18928000330924988,
            1.6858500242233276,
            0.7571099996566772,
            [0.27125000953674316, 0.3932900130748749, 0.741379976272583, 0.27990999817848206],
            [0.0062699997797608376, 0.12419000267982483, 0.4172300100326538, 0.20941999554634094],
        ],
        {"delta": 1.0, "fn": "huber", "name": "huber_loss", "reduction": "none"},
    ),
    (
        "Huber",
        {"delta": 0.3},
        [
            0.2049500048160553,
            0.09132999926805496,
            0.8198099732398987,
            0.36531999707221985,
            [0.1479800045490265, 0.18862999975681305, 0.31915000081062317, 0.1640399992465973],
            [0.0034199999645352364, 0.05956000089645386, 0.1796099990606308, 0.12273000180721283],
        ],
        {"delta": 0.3, "fn": "huber", "name": "huber_loss", "reduction": "none"},
    ),
    (
        "KLDivergence",
        {},
        [
            1.3570499420166016,
            0.30726999044418335,
            5.428190231323242,
            1.2290699481964111,
            [1.657189965248108, 3.771009922027588, -0.0, -0.0],
            [0.03830999881029129, 1.1907600164413452, -0.0, -0.0],
        ],
        {"fn": "kl_divergence", "name": "kl_divergence", "reduction": "none"},
    ),
    (
        "LogCosh",
        {},
        [
            0.36741000413894653,
            0.1652500033378601,
            1.4696400165557861,
            0.6609799861907959,
            [0.23882000148296356, 0.3388400077819824, 0.6412100195884705, 0.2507599890232086],
            [0.005520000122487545, 0.10700000077486038, 0.3608599901199341, 0.18761000037193298],
        ],
        {"fn": "log_cosh", "name": "log_cosh", "reduction": "none"},
    ),
    (
        "Poisson",
        {},
        [
            0.879289984703064,
            0.26646000146865845,
            3.5171799659729004,
            1.065850019454956,
            [1.0835599899291992, 1.6591099500656128, 0.3373599946498871, 0.43713998794555664],
            [0.025049999356269836, 0.5238900184631348, 0.189860001206398, 0.32705000042915344],
        ],
        {"fn": "poisson", "name": "poisson", "reduction": "none"},
    ),
    (
        "Hinge",
        {},
        [
            1.2547399997711182,
            0.6646599769592285,
            5.018959999084473,
            2.6586201190948486,
            [0.42838001251220703, 0.7233999967575073, 2.5512099266052246, 1.3159600496292114],
            [0.00989999994635582, 0.22843000292778015, 1.4357500076293945, 0.9845499992370605],
        ],
        {"fn": "hinge", "name": "hinge", "reduction": "none"},
    ),
    (
        "SquaredHinge",
        {},
        [
            2.602979898452759,
            1.490339994430542,
            10.411919593811035,
            5.96136999130249,
            [0.32624000310897827, 0.8263099789619446, 6.659329891204834, 2.600029945373535],
            [0.007540000136941671, 0.260919988155365, 3.7476699352264404, 1.9452400207519531],
        ],
        {"fn": "squared_hinge", "name": "squared_hinge", "reduction": "none"},
    ),
    (
        "CategoricalHinge",
        {},
        [
            1.6402499675750732,
            0.8315899968147278,
            6.560989856719971,
            3.3263700008392334,
            [0.2930000126361847, 2.645240068435669, 1.219480037689209, 2.4032700061798096],
            [0.006769999861717224, 0.8352800011634827, 0.6862900257110596, 1.7980200052261353],
        ],
        {"fn": "categorical_hinge", "name": "categorical_hinge", "reduction": "none"},
    ),
    (
        "CosineSimilarity",
        {},
        [
            -0.6656299829483032,
            -0.3010700047016144,
            -2.662529945373535,
            -1.204259991645813,
            [-0.5259000062942505, -0.5494199991226196, -0.910860002040863, -0.6763399839401245],
            [-0.012160000391304493, -0.1734900027513504, -0.5126100182533264, -0.5060099959373474],
        ],
        {"axis": -1, "fn": "cosine_similarity", "name": "cosine_similarity", "reduction": "none"},
    ),
    (
        "CosineSimilarity",
        {"axis": 0},
        [
            -0.6656299829483032,
            -0.3010700047016144,
            -2.662529945373535,
            -1.204259991645813,
            [-0.5259000062942505, -0.5494199991226196, -0.910860002040863, -0.6763399839401245],
            [-0.012160000391304493, -0.1734900027513504, -0.5126100182533264, -0.5060099959373474],
        ],
        {"axis": 0, "fn": "cosine_similarity", "name": "cosine_similarity", "reduction": "none"},
    ),
    (
        "MeanAbsolutePercentageError",
        {},
        [
            169.4266357421875,
            48.944740295410156,
            677.70654296875,
            195.7789764404297,
            [330.5526428222656, 133.2940216064453, 75.26587677001953, 138.593994140625],
            [7.641570091247559, 42.08988952636719, 42.357391357421875, 103.69011688232422],
        ],
        {
            "fn": "mean_absolute_percentage_error",
            "name": "mean_absolute_percentage_error",
            "reduction": "none",
        },
    ),
    (
        "MeanSquaredLogarithmicError",
        {},
        [
            0.14003999531269073,
            0.05335000157356262,
            0.5601500272750854,
            0.21337999403476715,
            [0.1606599986553192, 0.16946999728679657, 0.08596999943256378, 0.14406000077724457],
            [0.003710000077262521, 0.05350999906659126, 0.04837999865412712, 0.10778000205755234],
        ],
        {
            "fn": "mean_squared_logarithmic_error",
            "name": "mean_squared_logarithmic_error",
            "reduction": "none",
        },
    ),
    (
        "BinaryFocalCrossentropy",
        {},
        [
            0.3662300109863281,
            0.11458999663591385,
            1.4649200439453125,
            0.4583599865436554,
            [0.3716599941253662, 0.8286700248718262, 0.05316999927163124, 0.2114199995994568],
            [0.008589999750256538, 0.26166999340057373, 0.029920000582933426, 0.15817999839782715],
        ],
        {
            "alpha": 0.25,
            "apply_class_balancing": False,
            "axis": -1,
            "fn": "binary_focal_crossentropy",
            "from_logits": False,
            "gamma": 2.0,
            "label_smoothing": 0.0,
            "name": "binary_focal_crossentropy",
            "reduction": "none",
        },
    ),
    (
        "BinaryFocalCrossentropy",
        {"apply_class_balancing": True, "alpha": 0.4, "gamma": 1.5},
        [
            0.19878999888896942,
            0.06736999750137329,
            0.7951700091362,
            0.2694999873638153,
            [0.2220499962568283, 0.3576599955558777, 0.05270000174641609, 0.16276000440120697],
            [0.0051299999468028545, 0.1129399985074997, 0.029659999534487724, 0.12177000194787979],
        ],
        {
            "alpha": 0.4,
            "apply_class_balancing": True,
            "axis": -1,
            "fn": "binary_focal_crossentropy",
            "from_logits": False,
            "gamma": 1.5,
            "label_smoothing": 0.0,
            "name": "binary_focal_crossentropy",
            "reduction": "none",
        },
    ),
    (
        "BinaryFocalCrossentropy",
        {"from_logits": True, "label_smoothing": 0.1},
        [
            0.4291900098323822,
            0.24255000054836273,
            1.7167500257492065,
            0.9702000021934509,
            [0.0764399990439415, 0.14137999713420868, 1.066140055656433, 0.43279001116752625],
            [0.001769999973475933, 0.04464000090956688, 0.5999900102615356, 0.3237900137901306],
        ],
        {
            "alpha": 0.25,
            "apply_class_balancing": False,
            "axis": -1,
            "fn": "binary_focal_crossentropy",
            "from_logits": True,
            "gamma": 2.0,
            "label_smoothing": 0.1,
            "name": "binary_focal_crossentropy",
            "reduction": "none",
        },
    ),
    (
        "CategoricalFocalCrossentropy",
        {},
        [
            0.2906700074672699,
            0.0934000015258789,
            1.1627000570297241,
            0.37362000346183777,
            [0.27445998787879944, 0.6248000264167786, 0.14621999859809875, 0.11721000075340271],
            [0.006339999847114086, 0.19729000329971313, 0.08229000121355057, 0.08769000321626663],
        ],
        {
            "alpha": 0.25,
            "axis": -1,
            "fn": "categorical_focal_crossentropy",
            "from_logits": False,
            "gamma": 2.0,
            "label_smoothing": 0.0,
            "name": "categorical_focal_crossentropy",
            "reduction": "none",
        },
    ),
    (
        "CategoricalFocalCrossentropy",
        {"from_logits": True, "gamma": 1.0, "label_smoothing": 0.2},
        [
            0.24939000606536865,
            0.11939000338315964,
            0.9975500106811523,
            0.477539986371994,
            [0.0938199982047081, 0.3915799856185913, 0.16957999765872955, 0.3425599932670593],
            [0.0021699999924749136, 0.12364999949932098, 0.09543000161647797, 0.2562899887561798],
        ],
        {
            "alpha": 0.25,
            "axis": -1,
            "fn": "categorical_focal_crossentropy",
            "from_logits": True,
            "gamma": 1.0,
            "label_smoothing": 0.2,
            "name": "categorical_focal_crossentropy",
            "reduction": "none",
        },
    ),
]

FUNCTIONS = [
    ("huber", [0.22086000442504883, 0.25102999806404114, 0.1237500011920929, 0.13283999264240265]),
    (
        "log_cosh",
        [0.20621000230312347, 0.22883999347686768, 0.1169700026512146, 0.1252799928188324],
    ),
    (
        "logcosh",
        [0.20621000230312347, 0.22883999347686768, 0.1169700026512146, 0.1252799928188324],
    ),
    (
        "categorical_hinge",
        [1.357990026473999, 1.5101900100708008, 1.1184200048446655, 1.2274199724197388],
    ),
    (
        "cosine_similarity",
        [-0.31235000491142273, -0.08883000165224075, -0.513759970664978, -0.5374600291252136],
    ),
    (
        "binary_focal_crossentropy",
        [0.4862099885940552, 0.938040018081665, 0.23286999762058258, 0.25453001260757446],
    ),
    (
        "categorical_focal_crossentropy",
        [0.27445998787879944, 0.6248000264167786, 0.14621999859809875, 0.11721000075340271],
    ),
    (
        "kl_divergence",
        [1.2018400430679321, 2.6368799209594727, 1.1868699789047241, 0.8065199851989746],
    ),
    ("kld", [1.2018400430679321, 2.6368799209594727, 1.1868699789047241, 0.8065199851989746]),
    ("KLD", [1.2018400430679321, 2.6368799209594727, 1.1868699789047241, 0.8065199851989746]),
    ("poisson", [0.9317799806594849, 1.2810699939727783, 0.732990026473999, 0.7059800028800964]),
    ("hinge", [1.330739974975586, 1.354390025138855, 1.1339199542999268, 1.1395299434661865]),
    (
        "squared_hinge",
        [1.970289945602417, 1.9252300262451172, 1.3854399919509888, 1.5090199708938599],
    ),
    ("mape", [430953088.0, 378248384.0, 235639456.0, 288335040.0]),
    ("msle", [0.2274799942970276, 0.26447001099586487, 0.12303999811410904, 0.133650004863739]),
    ("mean_absolute_percentage_error", [430953088.0, 378248384.0, 235639456.0, 288335040.0]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{sorted(c[1])}")
def test_loss_class_reductions_and_config(case):
    name, kwargs, want, config = case
    a, b = _inputs(name, kwargs)
    outs = []
    for reduction in ("auto", "sum", "none"):
        loss = getattr(L, name)(reduction=reduction, **kwargs)
        outs.append(loss(tf.constant(a), tf.constant(b)))
        outs.append(loss(tf.constant(a), tf.constant(b), sample_weight=tf.constant(SW)))
    with tf.Session() as sess:
        got = sess.run(outs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5)
    assert loss.get_config() == config
    assert type(loss).from_config(config).get_config() == config


@pytest.mark.parametrize("name, want", FUNCTIONS, ids=lambda x: x if isinstance(x, str) else "")
def test_loss_functions_by_name(name, want):
    fn = L.get(name)
    with tf.Session() as sess:
        got = sess.run(fn(tf.constant(YC), tf.constant(YP)))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)


def test_serialize_and_deserialize():
    # Recorded from TF 2.21.
    assert L.serialize(L.Huber(delta=2.0)) == {
        "class_name": "Huber",
        "config": {"reduction": "auto", "name": "huber_loss", "delta": 2.0, "fn": "huber"},
    }
    loss = L.deserialize(
        {"class_name": "CategoricalHinge", "config": {"name": "ch", "reduction": "sum"}}
    )
    assert type(loss) is L.CategoricalHinge and loss.reduction == "sum"


def test_function_aliases_in_losses_and_metrics():
    # Values recorded from TF 2.21.
    a = tf.constant([[0.2, 0.8, 0.1], [0.5, 0.3, 0.9]])
    b = tf.constant([[0.3, 0.6, 0.2], [0.1, 0.7, 0.4]])
    want = {
        "cosine": [-0.96309, -0.71166],
        "cosine_proximity": [-0.96309, -0.71166],
        "kl_divergence": [0.07974, 1.28037],
        "log_cosh": [0.00995, 0.09201],
        "binary_focal_crossentropy": [0.07168, 0.30503],
        "categorical_focal_crossentropy": [0.08794, 0.37788],
    }
    with tf.Session() as sess:
        for module in (tf.keras.losses, tf.keras.metrics):
            for name, values in want.items():
                got = sess.run(getattr(module, name)(a, b))
                np.testing.assert_allclose(got, values, rtol=2e-5, atol=1e-5)
    legacy = tf.keras.optimizers.legacy
    assert legacy.Adam is tf.keras.optimizers.Adam and legacy.Ftrl is tf.keras.optimizers.Ftrl


def test_sparse_categorical_crossentropy_ignore_class():
    # Recorded from TF 2.21: the ignored labels (2) neither count in the sum nor in the
    # mean's divisor, for the loss (auto/sum/none, unweighted and weighted) and the metric.
    yt = tf.constant(np.array([0, 2, 1, 2, 0], "int32"))
    yp = tf.constant(
        np.array(
            [[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.2, 0.5, 0.3], [0.3, 0.3, 0.4], [0.5, 0.4, 0.1]],
            "float32",
        )
    )
    sw = tf.constant(np.array([1.0, 2.0, 0.5, 1.0, 3.0], "float32"))
    outs = []
    for reduction in ("auto", "sum", "none"):
        loss = L.SparseCategoricalCrossentropy(ignore_class=2, reduction=reduction)
        outs += [loss(yt, yp), loss(yt, yp, sample_weight=sw)]
    want = [
        0.58099,
        0.92756,
        1.74297,
        2.78269,
        [0.35667, 0.0, 0.69315, 0.0, 0.69315],
        [0.35667, 0.0, 0.34657, 0.0, 2.07944],
    ]
    metrics = []
    for weights in (None, sw):
        m = tf.keras.metrics.SparseCategoricalCrossentropy(ignore_class=2)
        metrics.append((m, m.update_state(yt, yp, sample_weight=weights), m.result()))
    sess = tf.keras.backend.get_session()
    for g, w in zip(sess.run(outs), want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5)
    fn = L.sparse_categorical_crossentropy(yt, yp, ignore_class=2)
    np.testing.assert_allclose(sess.run(fn), want[4], rtol=2e-5, atol=1e-5)
    for (m, update, result), w in zip(metrics, [0.58099, 0.61838], strict=True):
        sess.run(tf.variables_initializer(m.variables))
        sess.run(update)
        np.testing.assert_allclose(sess.run(result), w, rtol=2e-5)
    assert L.SparseCategoricalCrossentropy(ignore_class=2).get_config() == {
        "reduction": "auto",
        "name": "sparse_categorical_crossentropy",
        "from_logits": False,
        "ignore_class": 2,
        "fn": "sparse_categorical_crossentropy",
    }
    tf.keras.backend.clear_session()
