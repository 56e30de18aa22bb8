"""tf.keras.optimizers Adadelta, Adamax, Nadam and Ftrl, and optimizers.schedules used as
an optimizer's learning rate, in Keras' TF1 training loop: losses and weights over four
train_on_batch steps, the optimizer's weights (names and values), configs and errors.

Expected values were recorded from TF 2.21 (tf_keras legacy optimizers,
TF_USE_LEGACY_KERAS=1, v2 behaviour disabled) on the model and data built below.
"""

import numpy as np
import pytest

import asyncflow as tf

K = tf.keras
O = K.optimizers  # noqa: E741 - Keras' usual alias
S = O.schedules

RNG = np.random.RandomState(4)
X = RNG.rand(8, 3).astype("float32")
Y = RNG.rand(8, 2).astype("float32")

OPTIMIZERS = [
    lambda: O.Adadelta(learning_rate=1.0),
    lambda: O.Adadelta(rho=0.8, epsilon=1e-5, learning_rate=0.5),
    lambda: O.Adamax(learning_rate=0.1),
    lambda: O.Adamax(learning_rate=0.05, beta_1=0.8, decay=0.1),
    lambda: O.Nadam(learning_rate=0.05),
    lambda: O.Nadam(learning_rate=0.1, beta_2=0.9, schedule_decay=0.01),
    lambda: O.Ftrl(learning_rate=0.3),
    lambda: O.Ftrl(
        learning_rate=0.2,
        l1_regularization_strength=0.01,
        l2_regularization_strength=0.02,
        beta=0.1,
        learning_rate_power=-0.3,
    ),
    lambda: O.Ftrl(
        learning_rate=0.2, l2_shrinkage_regularization_strength=0.05, initial_accumulator_value=0.5
    ),
    lambda: O.SGD(learning_rate=S.ExponentialDecay(0.5, 2, 0.5)),
    lambda: O.SGD(learning_rate=S.ExponentialDecay(0.5, 2, 0.5, staircase=True)),
    lambda: O.SGD(learning_rate=S.PiecewiseConstantDecay([1, 2], [0.5, 0.2, 0.1])),
    lambda: O.Adam(learning_rate=S.PolynomialDecay(0.1, 3, 0.01, power=2.0)),
    lambda: O.Adam(learning_rate=S.PolynomialDecay(0.1, 2, cycle=True)),
    lambda: O.SGD(learning_rate=S.InverseTimeDecay(0.5, 1, 0.5)),
    lambda: O.SGD(learning_rate=S.CosineDecay(0.5, 3, alpha=0.1)),
    lambda: O.SGD(learning_rate=S.CosineDecay(0.1, 3, warmup_target=0.5, warmup_steps=2)),
    lambda: O.RMSprop(learning_rate=S.CosineDecayRestarts(0.1, 2, t_mul=1.5, m_mul=0.5)),
]

# (label, losses of the 4 steps, kernel after them, optimizer weight names, first values
#  of each optimizer weight, config with floats rounded to 6 places), from TF 2.21.
RECORDED = [
    (
        "Adadelta",
        [0.098021, 0.097495, 0.096986, 0.096491],
        [
            0.20556999742984772,
            0.19721999764442444,
            0.20558999478816986,
            0.20550000667572021,
            0.19384999573230743,
            0.20486000180244446,
        ],
        [
            "training/Adadelta/iter:0",
            "training/Adadelta/dense/kernel/accum_grad:0",
            "training/Adadelta/dense/bias/accum_grad:0",
            "training/Adadelta/dense/kernel/accum_var:0",
            "training/Adadelta/dense/bias/accum_var:0",
        ],
        [
            [4],
            [0.0005099999834783375, 0.0, 0.0005600000149570405],
            [0.0020800000056624413, 0.001560000004246831],
            [0.0, 0.0, 0.0],
            [0.0, 0.0],
        ],
        {"decay": 0.0, "epsilon": 0.0, "learning_rate": 1.0, "name": "Adadelta", "rho": 0.95},
    ),
    (
        "Adadelta",
        [0.098021, 0.096754, 0.095552, 0.094424],
        [
            0.2137800008058548,
            0.1932699978351593,
            0.21396000683307648,
            0.21342000365257263,
            0.18542000651359558,
            0.20702999830245972,
        ],
        [
            "training/Adadelta/iter:0",
            "training/Adadelta/dense/kernel/accum_grad:0",
            "training/Adadelta/dense/bias/accum_grad:0",
            "training/Adadelta/dense/kernel/accum_var:0",
            "training/Adadelta/dense/bias/accum_var:0",
        ],
        [
            [4],
            [0.0013099999632686377, 2.9999999242136255e-05, 0.0014799999771639705],
            [0.00571999978274107, 0.004310000222176313],
            [2.9999999242136255e-05, 9.999999747378752e-06, 2.9999999242136255e-05],
            [2.9999999242136255e-05, 2.9999999242136255e-05],
        ],
        {"decay": 0.0, "epsilon": 1e-05, "learning_rate": 0.5, "name": "Adadelta", "rho": 0.8},
    ),
    (
        "Adamax",
        [0.098021, 0.116711, 0.091496, 0.079586],
        [
            0.22266000509262085,
            0.14920000731945038,
            0.24195000529289246,
            0.1913899928331375,
            -0.07806000113487244,
            0.15981000661849976,
        ],
        [
            "training/Adamax/iter:0",
            "training/Adamax/dense/kernel/m:0",
            "training/Adamax/dense/bias/m:0",
            "training/Adamax/dense/kernel/v:0",
            "training/Adamax/dense/bias/v:0",
        ],
        [
            [4],
            [0.005940000060945749, 0.029270000755786896, 0.003909999970346689],
            [-0.0016499999910593033, 0.008709999732673168],
            [0.07608000189065933, 0.19543999433517456, 0.06212000176310539],
            [0.10967999696731567, 0.1761000007390976],
        ],
        {
            "beta_1": 0.9,
            "beta_2": 0.999,
            "decay": 0.0,
            "epsilon": 0.0,
            "learning_rate": 0.1,
            "name": "Adamax",
        },
    ),
    (
        "Adamax",
        [0.098021, 0.093193, 0.088882, 0.084327],
        [
            0.25464001297950745,
            0.17402000725269318,
            0.26892000436782837,
            0.21351000666618347,
            0.06035999953746796,
            0.1818999946117401,
        ],
        [
            "training/Adamax/iter:0",
            "training/Adamax/dense/kernel/m:0",
            "training/Adamax/dense/bias/m:0",
            "training/Adamax/dense/kernel/v:0",
            "training/Adamax/dense/bias/v:0",
        ],
        [
            [4],
            [0.007319999858736992, 0.03508000075817108, 0.003000000026077032],
            [-0.008100000210106373, -0.00559999980032444],
            [0.05500999838113785, 0.09690999984741211, 0.057259999215602875],
            [0.10967999696731567, 0.09582000225782394],
        ],
        {
            "beta_1": 0.8,
            "beta_2": 0.999,
            "decay": 0.1,
            "epsilon": 0.0,
            "learning_rate": 0.05,
            "name": "Adamax",
        },
    ),
    (
        "Nadam",
        [0.098021, 0.093765, 0.085507, 0.081606],
        [
            0.24457000195980072,
            0.1588200032711029,
            0.2618499994277954,
            0.22648000717163086,
            0.02167999930679798,
            0.17257000505924225,
        ],
        [
            "training/Nadam/iter:0",
            "training/Nadam/momentum_cache:0",
            "training/Nadam/dense/kernel/m:0",
            "training/Nadam/dense/bias/m:0",
            "training/Nadam/dense/kernel/v:0",
            "training/Nadam/dense/bias/v:0",
        ],
        [
            [4],
            [0.04106999933719635],
            [-0.002580000087618828, 0.014170000329613686, -0.0041600000113248825],
            [-0.014050000347197056, -0.011880000121891499],
            [0.0, 9.999999747378752e-06, 0.0],
            [9.999999747378752e-06, 1.9999999494757503e-05],
        ],
        {
            "beta_1": 0.9,
            "beta_2": 0.999,
            "decay": 0.004,
            "epsilon": 0.0,
            "learning_rate": 0.05,
            "name": "Nadam",
        },
    ),
    (
        "Nadam",
        [0.098021, 0.12115, 0.088117, 0.081186],
        [
            0.24256999790668488,
            0.1604200005531311,
            0.2543399930000305,
            0.22342999279499054,
            -0.07340999692678452,
            0.1766500025987625,
        ],
        [
            "training/Nadam/iter:0",
            "training/Nadam/momentum_cache:0",
            "training/Nadam/dense/kernel/m:0",
            "training/Nadam/dense/bias/m:0",
            "training/Nadam/dense/kernel/v:0",
            "training/Nadam/dense/bias/v:0",
        ],
        [
            [4],
            [0.04117000102996826],
            [0.0011399999493733048, 0.02126999944448471, -0.0003499999875202775],
            [-0.008430000394582748, -0.0023300000466406345],
            [0.00139999995008111, 0.003590000094845891, 0.0011099999537691474],
            [0.0029200001154094934, 0.00430000014603138],
        ],
        {
            "beta_1": 0.9,
            "beta_2": 0.9,
            "decay": 0.01,
            "epsilon": 0.0,
            "learning_rate": 0.1,
            "name": "Nadam",
        },
    ),
    (
        "Ftrl",
        [0.098021, 0.153332, 0.093284, 0.071366],
        [
            0.16452999413013458,
            0.05370999872684479,
            0.17473000288009644,
            0.1582300066947937,
            -0.015790000557899475,
            0.08113999664783478,
        ],
        [
            "training/Ftrl/iter:0",
            "training/Ftrl/dense/kernel/accumulator:0",
            "training/Ftrl/dense/kernel/linear:0",
            "training/Ftrl/dense/bias/accumulator:0",
            "training/Ftrl/dense/bias/linear:0",
        ],
        [
            [4],
            [0.15639999508857727, 0.15446999669075012, 0.14610999822616577],
            [-0.21690000593662262, -0.07035999745130539, -0.22262999415397644],
            [0.22338999807834625, 0.24285000562667847],
            [-0.4189800024032593, -0.46055999398231506],
        ],
        {
            "beta": 0.0,
            "decay": 0.0,
            "initial_accumulator_value": 0.1,
            "l1_regularization_strength": 0.0,
            "l2_regularization_strength": 0.0,
            "l2_shrinkage_regularization_strength": 0.0,
            "learning_rate": 0.3,
            "learning_rate_power": -0.5,
            "name": "Ftrl",
        },
    ),
    (
        "Ftrl",
        [0.098021, 0.222496, 0.100462, 0.076716],
        [
            0.1411599963903427,
            0.09470000118017197,
            0.13718000054359436,
            0.1274300068616867,
            0.049630001187324524,
            0.08071000128984451,
        ],
        [
            "training/Ftrl/iter:0",
            "training/Ftrl/dense/kernel/accumulator:0",
            "training/Ftrl/dense/kernel/linear:0",
            "training/Ftrl/dense/bias/accumulator:0",
            "training/Ftrl/dense/bias/linear:0",
        ],
        [
            [4],
            [0.19450999796390533, 0.16184000670909882, 0.1814900040626526],
            [-0.5181000232696533, -0.33531999588012695, -0.4951399862766266],
            [0.31679001450538635, 0.32238999009132385],
            [-0.8377500176429749, -0.8431800007820129],
        ],
        {
            "beta": 0.1,
            "decay": 0.0,
            "initial_accumulator_value": 0.1,
            "l1_regularization_strength": 0.01,
            "l2_regularization_strength": 0.02,
            "l2_shrinkage_regularization_strength": 0.0,
            "learning_rate": 0.2,
            "learning_rate_power": -0.3,
            "name": "Ftrl",
        },
    ),
    (
        "Ftrl",
        [0.098021, 0.230422, 0.107015, 0.080196],
        [
            0.13042999804019928,
            0.088639996945858,
            0.12515999376773834,
            0.11625000089406967,
            0.04597000032663345,
            0.07241000235080719,
        ],
        [
            "training/Ftrl/iter:0",
            "training/Ftrl/dense/kernel/accumulator:0",
            "training/Ftrl/dense/kernel/linear:0",
            "training/Ftrl/dense/bias/accumulator:0",
            "training/Ftrl/dense/bias/linear:0",
        ],
        [
            [4],
            [0.6048799753189087, 0.5677400231361389, 0.5902000069618225],
            [-0.5072100162506104, -0.33392998576164246, -0.4807800054550171],
            [0.7387099862098694, 0.7410699725151062],
            [-0.8498299717903137, -0.8504700064659119],
        ],
        {
            "beta": 0.0,
            "decay": 0.0,
            "initial_accumulator_value": 0.5,
            "l1_regularization_strength": 0.0,
            "l2_regularization_strength": 0.0,
            "l2_shrinkage_regularization_strength": 0.05,
            "learning_rate": 0.2,
            "learning_rate_power": -0.5,
            "name": "Ftrl",
        },
    ),
    (
        "SGD-exp",
        [0.098021, 0.089291, 0.087168, 0.085741],
        [
            0.2223300039768219,
            0.16972999274730682,
            0.2303600013256073,
            0.22023999691009521,
            0.1577499955892563,
            0.1911800056695938,
        ],
        ["training/SGD/iter:0"],
        [[4]],
        {
            "decay": 0.0,
            "learning_rate": {
                "class_name": "ExponentialDecay",
                "config": {
                    "initial_learning_rate": 0.5,
                    "decay_steps": 2,
                    "decay_rate": 0.5,
                    "staircase": False,
                    "name": None,
                },
            },
            "momentum": 0.0,
            "name": "SGD",
            "nesterov": False,
        },
    ),
    (
        "SGD-exps",
        [0.098021, 0.089291, 0.086307, 0.08491],
        [
            0.22109000384807587,
            0.16130000352859497,
            0.23090000450611115,
            0.22023999691009521,
            0.14760999381542206,
            0.18756000697612762,
        ],
        ["training/SGD/iter:0"],
        [[4]],
        {
            "decay": 0.0,
            "learning_rate": {
                "class_name": "ExponentialDecay",
                "config": {
                    "initial_learning_rate": 0.5,
                    "decay_steps": 2,
                    "decay_rate": 0.5,
                    "staircase": True,
                    "name": None,
                },
            },
            "momentum": 0.0,
            "name": "SGD",
            "nesterov": False,
        },
    ),
    (
        "SGD-pw",
        [0.098021, 0.089291, 0.086307, 0.085188],
        [
            0.22208000719547272,
            0.16878999769687653,
            0.23037000000476837,
            0.22026999294757843,
            0.15665000677108765,
            0.19074000418186188,
        ],
        ["training/SGD/iter:0"],
        [[4]],
        {
            "decay": 0.0,
            "learning_rate": {
                "class_name": "PiecewiseConstantDecay",
                "config": {"boundaries": [1, 2], "values": [0.5, 0.2, 0.1], "name": None},
            },
            "momentum": 0.0,
            "name": "SGD",
            "nesterov": False,
        },
    ),
    (
        "Adam-poly",
        [0.098021, 0.11667, 0.097972, 0.090568],
        [
            0.27414000034332275,
            0.2374500036239624,
            0.28275999426841736,
            0.2533099949359894,
            0.03207999840378761,
            0.24104000627994537,
        ],
        [
            "training/Adam/iter:0",
            "training/Adam/dense/kernel/m:0",
            "training/Adam/dense/bias/m:0",
            "training/Adam/dense/kernel/v:0",
            "training/Adam/dense/bias/v:0",
        ],
        [
            [4],
            [0.011839999817311764, 0.03996000066399574, 0.008829999715089798],
            [0.006140000186860561, 0.023250000551342964],
            [9.999999747378752e-06, 7.000000186963007e-05, 9.999999747378752e-06],
            [1.9999999494757503e-05, 5.999999848427251e-05],
        ],
        {
            "amsgrad": False,
            "beta_1": 0.9,
            "beta_2": 0.999,
            "decay": 0.0,
            "epsilon": 0.0,
            "learning_rate": {
                "class_name": "PolynomialDecay",
                "config": {
                    "initial_learning_rate": 0.1,
                    "decay_steps": 3,
                    "end_learning_rate": 0.01,
                    "power": 2.0,
                    "cycle": False,
                    "name": None,
                },
            },
            "name": "Adam",
        },
    ),
    (
        "Adam-polyc",
        [0.098021, 0.11667, 0.097956, 0.097915],
        [
            0.2738800048828125,
            0.2405499964952469,
            0.2817400097846985,
            0.2549299895763397,
            0.03571999818086624,
            0.24381999671459198,
        ],
        [
            "training/Adam/iter:0",
            "training/Adam/dense/kernel/m:0",
            "training/Adam/dense/bias/m:0",
            "training/Adam/dense/kernel/v:0",
            "training/Adam/dense/bias/v:0",
        ],
        [
            [4],
            [0.013460000045597553, 0.042660001665353775, 0.010200000368058681],
            [0.008320000022649765, 0.026930000633001328],
            [1.9999999494757503e-05, 7.999999797903001e-05, 9.999999747378752e-06],
            [1.9999999494757503e-05, 5.999999848427251e-05],
        ],
        {
            "amsgrad": False,
            "beta_1": 0.9,
            "beta_2": 0.999,
            "decay": 0.0,
            "epsilon": 0.0,
            "learning_rate": {
                "class_name": "PolynomialDecay",
                "config": {
                    "initial_learning_rate": 0.1,
                    "decay_steps": 2,
                    "end_learning_rate": 0.0001,
                    "power": 1.0,
                    "cycle": True,
                    "name": None,
                },
            },
            "name": "Adam",
        },
    ),
    (
        "SGD-inv",
        [0.098021, 0.089291, 0.087287, 0.085856],
        [
            0.22232000529766083,
            0.1696300059556961,
            0.23037000000476837,
            0.22023999691009521,
            0.15762999653816223,
            0.19113999605178833,
        ],
        ["training/SGD/iter:0"],
        [[4]],
        {
            "decay": 0.0,
            "learning_rate": {
                "class_name": "InverseTimeDecay",
                "config": {
                    "initial_learning_rate": 0.5,
                    "decay_steps": 1,
                    "decay_rate": 0.5,
                    "staircase": False,
                    "name": None,
                },
            },
            "momentum": 0.0,
            "name": "SGD",
            "nesterov": False,
        },
    ),
    (
        "SGD-cos",
        [0.098021, 0.089291, 0.086967, 0.086041],
        [
            0.22328999638557434,
            0.1765899956226349,
            0.22989000380039215,
            0.22022999823093414,
            0.166020005941391,
            0.19412000477313995,
        ],
        ["training/SGD/iter:0"],
        [[4]],
        {
            "decay": 0.0,
            "learning_rate": {
                "class_name": "CosineDecay",
                "config": {
                    "initial_learning_rate": 0.5,
                    "decay_steps": 3,
                    "alpha": 0.1,
                    "name": None,
                    "warmup_target": None,
                    "warmup_steps": 0,
                },
            },
            "momentum": 0.0,
            "name": "SGD",
            "nesterov": False,
        },
    ),
    (
        "SGD-cosw",
        [0.098021, 0.095312, 0.090424, 0.086907],
        [
            0.2223300039768219,
            0.1698800027370453,
            0.23035000264644623,
            0.22025999426841736,
            0.15794000029563904,
            0.19122999906539917,
        ],
        ["training/SGD/iter:0"],
        [[4]],
        {
            "decay": 0.0,
            "learning_rate": {
                "class_name": "CosineDecay",
                "config": {
                    "initial_learning_rate": 0.1,
                    "decay_steps": 3,
                    "alpha": 0.0,
                    "name": None,
                    "warmup_target": 0.5,
                    "warmup_steps": 2,
                },
            },
            "momentum": 0.0,
            "name": "SGD",
            "nesterov": False,
        },
    ),
    (
        "RMS-cosr",
        [0.098021, 0.544738, 0.153535, 0.093991],
        [
            0.33340999484062195,
            0.2529999911785126,
            0.32870998978614807,
            0.263619989156723,
            -0.3106600046157837,
            0.2558099925518036,
        ],
        [
            "training/RMSprop/iter:0",
            "training/RMSprop/dense/kernel/rms:0",
            "training/RMSprop/dense/bias/rms:0",
        ],
        [
            [4],
            [0.010990000329911709, 0.043150000274181366, 0.008849999867379665],
            [0.01947000063955784, 0.06047999858856201],
        ],
        {
            "centered": False,
            "decay": 0.0,
            "epsilon": 0.0,
            "learning_rate": {
                "class_name": "CosineDecayRestarts",
                "config": {
                    "initial_learning_rate": 0.1,
                    "first_decay_steps": 2,
                    "t_mul": 1.5,
                    "m_mul": 0.5,
                    "alpha": 0.0,
                    "name": None,
                },
            },
            "momentum": 0.0,
            "name": "RMSprop",
            "rho": 0.9,
        },
    ),
]

SCHEDULE_VALUES = [
    [0.10000000149011612, 0.30000001192092896, 0.5, 0.375, 0.1249999850988388, 0.0],
    [
        0.10000000149011612,
        0.050050001591444016,
        9.999999747378752e-05,
        0.025074999779462814,
        9.999999747378752e-05,
        0.016750002279877663,
    ],
    [
        0.10000000149011612,
        0.04999999701976776,
        0.05000000074505806,
        0.03750000149011612,
        0.012499998323619366,
        0.02500000037252903,
    ],
]


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default() as g:
        yield g
    K.backend.clear_session()


def _rounded(config):
    return {k: round(float(v), 6) if isinstance(v, float) else v for k, v in config.items()}


@pytest.mark.parametrize("index", range(len(OPTIMIZERS)), ids=[r[0] for r in RECORDED])
def test_training_steps_weights_and_config(index):
    _, losses, kernel, names, values, config = RECORDED[index]
    opt = OPTIMIZERS[index]()
    model = K.Sequential(
        [K.layers.Dense(2, input_shape=(3,), kernel_initializer=K.initializers.Constant(0.2))]
    )
    model.compile(opt, "mse")
    got = [float(model.train_on_batch(X, Y)) for _ in range(4)]
    np.testing.assert_allclose(got, losses, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(model.get_weights()[0].ravel(), kernel, rtol=1e-4, atol=1e-5)
    assert [w.name for w in opt.weights] == names
    for got_w, want in zip(opt.get_weights(), values, strict=True):
        np.testing.assert_allclose(np.ravel(got_w)[:3], want, rtol=1e-4, atol=1e-5)
    got_config = opt.get_config()
    assert _rounded(got_config) == config
    again = _rounded(type(opt).from_config(got_config).get_config())
    if isinstance(opt, O.Nadam):
        # As in TF, Nadam's constructor reads `schedule_decay`, not the config's `decay`.
        again["decay"] = config["decay"]
    assert again == config


def test_get_serialize_and_errors():
    # Recorded from TF 2.21.
    assert [type(O.get(n)).__name__ for n in ("adadelta", "adamax", "nadam", "ftrl")] == [
        "Adadelta",
        "Adamax",
        "Nadam",
        "Ftrl",
    ]
    schedule = S.ExponentialDecay(0.1, 10, 0.9)
    assert S.serialize(schedule) == {
        "class_name": "ExponentialDecay",
        "config": {
            "initial_learning_rate": 0.1,
            "decay_steps": 10,
            "decay_rate": 0.9,
            "staircase": False,
            "name": None,
        },
    }
    restored = S.deserialize(S.serialize(S.CosineDecayRestarts(0.1, 5)))
    assert type(restored) is S.CosineDecayRestarts
    cases = [
        (
            lambda: O.Nadam(learning_rate=schedule),
            "The Nadam optimizer does not support tf.keras.optimizers.LearningRateSchedules as "
            "the learning rate.",
        ),
        (
            lambda: O.Ftrl(learning_rate_power=0.5),
            "`learning_rate_power` needs to be negative or zero. "
            "Received: learning_rate_power=0.5.",
        ),
        (
            lambda: O.Ftrl(initial_accumulator_value=-1.0),
            "`initial_accumulator_value` needs to be positive or zero. Received: "
            "initial_accumulator_value=-1.0.",
        ),
        (
            lambda: S.PiecewiseConstantDecay([1], [1.0]),
            "The length of boundaries should be 1 less than the length of values. Received: "
            "boundaries=[1] of length 1, and values=[1.0] of length 1.",
        ),
    ]
    for make, message in cases:
        with pytest.raises(ValueError) as info:
            make()
        assert str(info.value) == message


def test_schedule_values_by_step():
    # Learning rates at steps 0..5, recorded from TF 2.21's schedules.
    step = tf.placeholder(tf.float32, [])
    schedules = [
        S.CosineDecay(0.1, 3, warmup_target=0.5, warmup_steps=2),
        S.PolynomialDecay(0.1, 2, cycle=True),
        S.CosineDecayRestarts(0.1, 2, t_mul=1.5, m_mul=0.5),
    ]
    outs = [s(step) for s in schedules]
    with tf.Session() as sess:
        got = [[float(sess.run(o, {step: i})) for i in range(6)] for o in outs]
    np.testing.assert_allclose(got, SCHEDULE_VALUES, rtol=1e-5, atol=1e-7)
