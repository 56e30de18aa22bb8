"""tf.distributions (TF1's, tf.compat.v1.distributions): values, op names, seeded samples,
gradients, errors and KL divergences, against literals recorded from TF 2.21
(tf.compat.v1.distributions, graph mode)."""

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors

d = tf.distributions
inf = np.inf


def _check_cases(cases, expected):
    """Runs the built tensors; every name and value must equal TF's (float32 tolerance:
    atol covers differences of O(1) terms, such as a KL near 0)."""
    assert [label for label, _ in cases] == list(expected)
    with tf.Session() as sess:
        values = sess.run([t for _, t in cases])
    for (label, t), got in zip(cases, values):
        name, want = expected[label]
        if name is not None:
            assert t.name == name, label
        if isinstance(want, list):
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=2e-6, atol=5e-8, err_msg=label)
            continue
        got = np.asarray(got)
        assert got.dtype == want.dtype, label
        assert got.shape == want.shape, label
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=5e-8, err_msg=label)


def _build_basic(tf, d):
    out = []

    def show(label, t):
        out.append((label, t))

    tf.set_random_seed(7)
    n = d.Normal(loc=[0.0, 1.5, -2.0], scale=[1.0, 0.5, 3.0])
    x = [[-12.0, 0.3, 7.0], [0.1, 1.2, -30.0]]
    for m in ["log_prob", "prob", "cdf", "log_cdf", "survival_function", "log_survival_function"]:
        show("normal." + m, getattr(n, m)(x))
    show("normal.quantile", n.quantile([0.01, 0.5, 0.97]))
    for m in ["entropy", "mean", "mode", "variance", "stddev"]:
        show("normal." + m, getattr(n, m)())
    s = n.sample([2], seed=3)
    show("normal.sample", s)
    show("normal.sample2", n.sample(seed=5))
    loc = tf.constant([0.5, -1.0])
    scale = tf.constant([2.0, 0.3])
    n2 = d.Normal(loc, scale)
    ss = n2.sample(4, seed=11)
    show("normal.grad_sample", tf.gradients(tf.reduce_sum(ss * ss), [loc, scale]))
    show("normal.grad_logprob", tf.gradients(tf.reduce_sum(n2.log_prob([1.0, 2.0])), [loc, scale]))
    b = d.Bernoulli(logits=[-1.0, 0.5, 3.0])
    for m in ["entropy", "mean", "mode", "variance", "stddev"]:
        show("bern." + m, getattr(b, m)())
    show("bern.log_prob", b.log_prob([[1, 0, 1], [0, 0, 1]]))
    show("bern.prob", b.prob([1, 0, 0]))
    show("bern.sample", b.sample([2, 2], seed=4))
    bp = d.Bernoulli(probs=[0.2, 0.9], dtype=tf.float32)
    show("bernp.logits", bp.logits)
    show("bernp.sample", bp.sample(3, seed=9))
    show("bernp.lp", bp.log_prob(1.0))
    c = d.Categorical(logits=[[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    for m in ["entropy", "mode"]:
        show("cat." + m, getattr(c, m)())
    show("cat.log_prob", c.log_prob([2, 0]))
    show("cat.log_prob_b", c.log_prob([[0], [1]]))
    show("cat.prob", c.prob(1))
    show("cat.cdf", c.cdf([1, 3]))
    show("cat.log_cdf", c.log_cdf([2, 1]))
    show("cat.surv", c.survival_function([1, 2]))
    show("cat.lsurv", c.log_survival_function([1, 2]))
    show("cat.sample", c.sample([2, 3], seed=2))
    c3 = d.Categorical(probs=[[[0.1, 0.9], [0.5, 0.5]]])
    show("cat3.sample", c3.sample(4, seed=1))
    show("cat3.logits", c3.logits)
    lg = tf.constant([[0.2, -0.4, 1.0]])
    c4 = d.Categorical(logits=lg)
    show("cat.grad_logprob", tf.gradients(c4.log_prob([2]), lg))
    u = d.Uniform(low=[0.0, -1.0], high=[2.0, 3.0])
    for m in ["entropy", "mean", "variance", "stddev"]:
        show("unif." + m, getattr(u, m)())
    xu = [[-0.5, 0.0], [1.0, 3.0], [2.0, 2.9]]
    for m in ["log_prob", "prob", "cdf", "log_cdf", "survival_function", "log_survival_function"]:
        show("unif." + m, getattr(u, m)(xu))
    show("unif.sample", u.sample([3], seed=8))
    show("unif.range", u.range())
    lo = tf.constant(1.0)
    hi = tf.constant([2.0, 5.0])
    u2 = d.Uniform(lo, hi)
    show("unif.grad", tf.gradients(tf.reduce_sum(u2.sample(5, seed=1) ** 2), [lo, hi]))
    # KL
    show("kl.nn", d.kl_divergence(n, d.Normal(1.0, 2.0)))
    show("kl.bb", d.kl_divergence(b, d.Bernoulli(probs=[0.3, 0.3, 0.9])))
    show("kl.cc", d.kl_divergence(c, d.Categorical(probs=[0.2, 0.3, 0.5])))
    show("kl.method", n.kl_divergence(d.Normal(0.0, 1.0)))
    show("xent", n.cross_entropy(d.Normal(0.0, 1.0)))
    return out


# Recorded from TF 2.21 (tf.compat.v1.distributions): (op name, value).
EXPECTED_BASIC = {
    "normal.log_prob": (
        "Normal/log_prob/sub:0",
        np.array(
            [
                [-72.91893768310547, -3.1057915687561035, -6.517550945281982],
                [-0.923938512802124, -0.4057912826538086, -45.57310485839844],
            ],
            dtype=np.float32,
        ),
    ),
    "normal.prob": (
        "Normal/prob/Exp:0",
        np.array(
            [
                [2.1463855344867063e-32, 0.04478904977440834, 0.0014772826107218862],
                [0.3969525694847107, 0.666449248790741, 1.6138086955756432e-20],
            ],
            dtype=np.float32,
        ),
    ),
    "normal.cdf": (
        "Normal/cdf/ndtr/mul_1:0",
        np.array(
            [
                [1.776493755671014e-33, 0.008197534829378128, 0.998650074005127],
                [0.539827823638916, 0.27425315976142883, 5.1296636335195676e-21],
            ],
            dtype=np.float32,
        ),
    ),
    "normal.log_cdf": (
        "Normal/log_cdf/log_ndtr/SelectV2_5:0",
        np.array(
            [
                [-75.41067504882812, -4.803921699523926, -0.001350837992504239],
                [-0.6165050268173218, -1.2937036752700806, -46.71924591064453],
            ],
            dtype=np.float32,
        ),
    ),
    "normal.survival_function": (
        "Normal/survival_function/ndtr/mul_1:0",
        np.array(
            [
                [1.0, 0.991802453994751, 0.0013498985208570957],
                [0.460172176361084, 0.7257468700408936, 1.0],
            ],
            dtype=np.float32,
        ),
    ),
    "normal.log_survival_function": (
        "Normal/log_survival_function/log_ndtr/SelectV2_5:0",
        np.array(
            [
                [-1.776493755671014e-33, -0.008231330662965775, -6.607726097106934],
                [-0.7761545777320862, -0.3205539882183075, -5.1296636335195676e-21],
            ],
            dtype=np.float32,
        ),
    ),
    "normal.quantile": (
        "Normal/quantile/reconstruct/add:0",
        np.array([-2.326347827911377, 1.5, 3.6423821449279785], dtype=np.float32),
    ),
    "normal.entropy": (
        "Normal/entropy/add:0",
        np.array([1.4189385175704956, 0.725791335105896, 2.5175509452819824], dtype=np.float32),
    ),
    "normal.mean": ("Normal/mean/mul:0", np.array([0.0, 1.5, -2.0], dtype=np.float32)),
    "normal.mode": ("Normal/mode/mul:0", np.array([0.0, 1.5, -2.0], dtype=np.float32)),
    "normal.variance": ("Normal/variance/Square:0", np.array([1.0, 0.25, 9.0], dtype=np.float32)),
    "normal.stddev": ("Normal/stddev/mul:0", np.array([1.0, 0.5, 3.0], dtype=np.float32)),
    "normal.sample": (
        "Normal/sample/Reshape:0",
        np.array(
            [
                [0.9447038173675537, 1.0166046619415283, 0.4155149459838867],
                [1.3033159971237183, 1.6074522733688354, -4.203972816467285],
            ],
            dtype=np.float32,
        ),
    ),
    "normal.sample2": (
        "Normal/sample_1/Reshape:0",
        np.array([0.007278046105057001, 1.767179012298584, -1.4493999481201172], dtype=np.float32),
    ),
    "normal.grad_sample": (
        None,
        [
            np.array([14.238479614257812, -7.502352714538574], dtype=np.float32),
            np.array([20.252912521362305, 1.885364055633545], dtype=np.float32),
        ],
    ),
    "normal.grad_logprob": (
        None,
        [
            np.array([0.125, 33.33333206176758], dtype=np.float32),
            np.array([-0.46875, 329.9999694824219], dtype=np.float32),
        ],
    ),
    "bern.entropy": (
        "Bernoulli/entropy/add:0",
        np.array([0.5822030305862427, 0.6628472805023193, 0.1908649504184723], dtype=np.float32),
    ),
    "bern.mean": (
        "Bernoulli/mean/Identity:0",
        np.array([0.2689414322376251, 0.622459352016449, 0.9525741338729858], dtype=np.float32),
    ),
    "bern.mode": ("Bernoulli/mode/Cast:0", np.array([0, 1, 1], dtype=np.int32)),
    "bern.variance": (
        "Bernoulli/variance/mul:0",
        np.array([0.1966119408607483, 0.23500370979309082, 0.04517665505409241], dtype=np.float32),
    ),
    "bern.stddev": (
        "Bernoulli/stddev/Sqrt:0",
        np.array(
            [0.44340944290161133, 0.48477181792259216, 0.21254800260066986], dtype=np.float32
        ),
    ),
    "bern.log_prob": (
        "Bernoulli/log_prob/Neg:0",
        np.array(
            [
                [-1.3132617473602295, -0.9740769863128662, -0.04858735203742981],
                [-0.3132616877555847, -0.9740769863128662, -0.04858735203742981],
            ],
            dtype=np.float32,
        ),
    ),
    "bern.prob": (
        "Bernoulli/prob/Exp:0",
        np.array([0.26894140243530273, 0.3775406777858734, 0.04742587357759476], dtype=np.float32),
    ),
    "bern.sample": (
        "Bernoulli/sample/Reshape:0",
        np.array([[[1, 1, 1], [0, 1, 1]], [[1, 1, 1], [1, 1, 1]]], dtype=np.int32),
    ),
    "bernp.logits": (
        "Bernoulli_1/logits/sub:0",
        np.array([-1.3862943649291992, 2.1972243785858154], dtype=np.float32),
    ),
    "bernp.sample": (
        "Bernoulli_1/sample/Reshape:0",
        np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]], dtype=np.float32),
    ),
    "bernp.lp": (
        "Bernoulli_1/log_prob/Neg:0",
        np.array([-1.6094379425048828, -0.10536053776741028], dtype=np.float32),
    ),
    "cat.entropy": (
        "Categorical/entropy/Neg:0",
        np.array([0.9059592485427856, 0.2743130922317505], dtype=np.float32),
    ),
    "cat.mode": ("Categorical/mode/Cast:0", np.array([1, 2], dtype=np.int32)),
    "cat.log_prob": (
        "Categorical/log_prob/Neg:0",
        np.array([-1.9643688201904297, -3.0658838748931885], dtype=np.float32),
    ),
    "cat.log_prob_b": (
        "Categorical/log_prob_1/Neg:0",
        np.array(
            [
                [-1.4643688201904297, -3.0658838748931885],
                [-0.4643687903881073, -4.065884113311768],
            ],
            dtype=np.float32,
        ),
    ),
    "cat.prob": (
        "Categorical/prob/Exp:0",
        np.array([0.6285316944122314, 0.017147822305560112], dtype=np.float32),
    ),
    "cat.cdf": (
        "Categorical/cdf/Reshape_2:0",
        np.array([0.23122389614582062, 1.0], dtype=np.float32),
    ),
    "cat.log_cdf": (
        "Categorical/log_cdf/Log:0",
        np.array([-0.15110714733600616, -3.0658838748931885], dtype=np.float32),
    ),
    "cat.surv": (
        "Categorical/survival_function/sub:0",
        np.array([0.7687761187553406, 0.9362395405769348], dtype=np.float32),
    ),
    "cat.lsurv": (
        "Categorical/log_survival_function/Log1p:0",
        np.array([-0.26295551657676697, -0.06588389724493027], dtype=np.float32),
    ),
    "cat.sample": (
        "Categorical/sample/Reshape_1:0",
        np.array([[[1, 2], [0, 2], [1, 2]], [[1, 0], [2, 2], [1, 2]]], dtype=np.int32),
    ),
    "cat3.sample": (
        "Categorical_1/sample/Reshape_2:0",
        np.array([[[1, 0]], [[1, 0]], [[1, 0]], [[1, 1]]], dtype=np.int32),
    ),
    "cat3.logits": (
        "Categorical_1/logits/Log:0",
        np.array(
            [
                [
                    [-2.3025851249694824, -0.10536054521799088],
                    [-0.6931471824645996, -0.6931471824645996],
                ]
            ],
            dtype=np.float32,
        ),
    ),
    "cat.grad_logprob": (
        None,
        [
            np.array(
                [[-0.2649461030960083, -0.14540551602840424, 0.41035163402557373]],
                dtype=np.float32,
            )
        ],
    ),
    "unif.entropy": (
        "Uniform/entropy/Log:0",
        np.array([0.6931471824645996, 1.3862943649291992], dtype=np.float32),
    ),
    "unif.mean": ("Uniform/mean/truediv:0", np.array([1.0, 1.0], dtype=np.float32)),
    "unif.variance": (
        "Uniform/variance/truediv:0",
        np.array([0.3333333432674408, 1.3333333730697632], dtype=np.float32),
    ),
    "unif.stddev": (
        "Uniform/stddev/truediv:0",
        np.array([0.5773502588272095, 1.154700517654419], dtype=np.float32),
    ),
    "unif.log_prob": (
        "Uniform/log_prob/Log:0",
        np.array(
            [
                [-inf, -1.3862943649291992],
                [-0.6931471824645996, -inf],
                [-inf, -1.3862943649291992],
            ],
            dtype=np.float32,
        ),
    ),
    "unif.prob": (
        "Uniform/prob/SelectV2_1:0",
        np.array([[0.0, 0.25], [0.5, 0.0], [0.0, 0.25]], dtype=np.float32),
    ),
    "unif.cdf": (
        "Uniform/cdf/SelectV2_1:0",
        np.array([[0.0, 0.25], [0.5, 1.0], [1.0, 0.9750000238418579]], dtype=np.float32),
    ),
    "unif.log_cdf": (
        "Uniform/log_cdf/Log:0",
        np.array(
            [
                [-inf, -1.3862943649291992],
                [-0.6931471824645996, 0.0],
                [0.0, -0.025317782536149025],
            ],
            dtype=np.float32,
        ),
    ),
    "unif.survival_function": (
        "Uniform/survival_function/sub:0",
        np.array([[1.0, 0.75], [0.5, 0.0], [0.0, 0.02499997615814209]], dtype=np.float32),
    ),
    "unif.log_survival_function": (
        "Uniform/log_survival_function/Log1p:0",
        np.array(
            [
                [-0.0, -0.28768205642700195],
                [-0.6931471824645996, -inf],
                [-inf, -3.688880443572998],
            ],
            dtype=np.float32,
        ),
    ),
    "unif.sample": (
        "Uniform/sample/Reshape:0",
        np.array(
            [
                [0.5330691337585449, 1.6774044036865234],
                [0.6125142574310303, 0.6667575836181641],
                [1.3551578521728516, 0.12029743194580078],
            ],
            dtype=np.float32,
        ),
    ),
    "unif.range": ("Uniform/range_10/sub:0", np.array([2.0, 4.0], dtype=np.float32)),
    "unif.grad": (
        None,
        [
            np.array(19.375389099121094, dtype=np.float32),
            np.array([4.2738165855407715, 22.457597732543945], dtype=np.float32),
        ],
    ),
    "kl.nn": (
        "KullbackLeibler/kl_normal_normal/add:0",
        np.array([0.4431471824645996, 0.9487943649291992, 1.3445348739624023], dtype=np.float32),
    ),
    "kl.bb": (
        "KullbackLeibler_1/kl_bernoulli_bernoulli/add:0",
        np.array(
            [0.0023453403264284134, 0.22123607993125916, 0.01870085299015045], dtype=np.float32
        ),
    ),
    "kl.cc": (
        "KullbackLeibler_2/kl_categorical_categorical/Sum:0",
        np.array([0.3201262950897217, 0.47030434012413025], dtype=np.float32),
    ),
    "kl.method": (
        "Normal/kl_divergence/KullbackLeibler/kl_normal_normal/add:0",
        np.array([0.0, 1.4431471824645996, 4.901387691497803], dtype=np.float32),
    ),
    "xent": (
        "Normal/cross_entropy/cross_entropy/add:0",
        np.array([1.4189385175704956, 2.168938636779785, 7.418938636779785], dtype=np.float32),
    ),
}


def test_basic_distributions_match_tf():
    with tf.Graph().as_default():
        _check_cases(_build_basic(tf, d), EXPECTED_BASIC)


def test_reachable_as_compat_v1():
    assert tf.compat.v1.distributions is d
    assert d.Normal.__mro__[1] is d.Distribution


def test_repr_parameters_shapes_and_copy():
    with tf.Graph().as_default():
        n = d.Normal(loc=[0.0, 1.0], scale=2.0)
        assert repr(n) == (
            "<tfp.distributions.Normal 'Normal/' batch_shape=(2,) event_shape=() dtype=float32>"
        )
        assert str(n) == (
            'tfp.distributions.Normal("Normal/", batch_shape=(2,), event_shape=(), dtype=float32)'
        )
        assert n.parameters == {
            "loc": [0.0, 1.0],
            "scale": 2.0,
            "validate_args": False,
            "allow_nan_stats": True,
            "name": "Normal",
        }
        assert n.copy(scale=3.0).parameters["scale"] == 3.0
        assert (n.loc.name, n.scale.name) == ("Normal/loc:0", "Normal/scale:0")
        assert n.batch_shape_tensor().name == "Normal/batch_shape_tensor/batch_shape:0"
        assert n.event_shape_tensor().name == "Normal/event_shape_tensor/event_shape:0"
        assert n.reparameterization_type is d.FULLY_REPARAMETERIZED
        assert repr(d.NOT_REPARAMETERIZED) == "<Reparameterization Type: NOT_REPARAMETERIZED>"
        assert d.Bernoulli(logits=0.5).reparameterization_type is d.NOT_REPARAMETERIZED
        assert d.Uniform().reparameterization_type is d.FULLY_REPARAMETERIZED
        c = d.Categorical(logits=tf.placeholder(tf.float32, [None, 4]))
        assert repr(c) == (
            "<tfp.distributions.Categorical 'Categorical/' batch_shape=(?,) event_shape=() "
            "dtype=int32>"
        )
        assert c.sample(2).shape.as_list() == [2, None]
        assert c.batch_shape_tensor().name == "Categorical/batch_shape_tensor_1/Identity:0"
        assert d.Uniform().sample([2, 3]).shape.as_list() == [2, 3]
        assert d.Bernoulli(probs=[[0.5]]).sample().shape.as_list() == [1, 1]


@pytest.mark.parametrize(
    "build, cls, message",
    [
        (lambda: d.Bernoulli(logits=1.0, probs=0.5), ValueError,
         "Must pass probs or logits, but not both."),
        (lambda: d.Categorical(), ValueError, "Must pass probs or logits, but not both."),
        (lambda: d.Bernoulli(logits=[1, 2]), TypeError, "logits must having floating type."),
        (lambda: d.kl_divergence(d.Normal(0.0, 1.0), d.Uniform()), NotImplementedError,
         "No KL(distribution_a || distribution_b) registered for distribution_a type Normal "
         "and distribution_b type Uniform"),
        (lambda: d.Uniform().mode(), NotImplementedError, "mode is not implemented: Uniform"),
        (lambda: d.Categorical(logits=[1.0, 2.0]).mean(), NotImplementedError,
         "mean is not implemented: Categorical"),
        (lambda: d.Bernoulli(logits=0.0).cdf(1), NotImplementedError,
         "cdf is not implemented: Bernoulli"),
        (lambda: d.RegisterKL(d.Normal, d.Uniform)(3), TypeError,
         "kl_fn must be callable, received: 3"),
        (lambda: d.Normal(0.0, 1.0).sample([[2]]), ValueError,
         "Input is neither scalar nor vector."),
        (lambda: d.Categorical(logits=[1.0], validate_args=True), ValueError,
         "A categorical-distribution parameter must have at least 2 events."),
    ],
)  # fmt: skip
def test_build_errors(build, cls, message):
    with tf.Graph().as_default():
        with pytest.raises(cls) as info:
            build()
        assert str(info.value) == message


def test_register_kl_twice_and_mro_lookup():
    with tf.Graph().as_default():
        with pytest.raises(
            ValueError, match=r"KL\(Normal \|\| Normal\) has already been registered"
        ):
            d.RegisterKL(d.Normal, d.Normal)(lambda a, b, name=None: 0.0)

        class MyNormal(d.Normal):
            pass

        kl = d.kl_divergence(MyNormal(0.0, 1.0), d.Normal(1.0, 1.0))
        assert kl.name == "KullbackLeibler/kl_normal_normal/add:0"

        class MyDist(d.Uniform):
            pass

        @d.RegisterKL(MyDist, d.Normal)
        def _kl(a, b, name=None):
            return tf.constant(42.0)

        k = d.kl_divergence(MyDist(), d.Normal(0.0, 1.0))
        assert k.name == "KullbackLeibler_1/Const:0"
        with tf.Session() as sess:
            assert sess.run(k) == 42.0


def test_kl_nan_check_and_validate_args_fail_at_run_time():
    with tf.Graph().as_default():
        kn = d.kl_divergence(d.Normal(0.0, 1.0), d.Normal(0.0, 0.0), allow_nan_stats=False)
        assert kn.name == "KullbackLeibler/checked_kl:0"
        # Constant arguments fail while building (TF's static check), others when run.
        checks = [
            (lambda: kn, "KL calculation between Normal/ and Normal_1/ returned NaN values"),
            (lambda: d.Normal(0.0, -1.0, validate_args=True).mean(), ""),
            (lambda: d.Uniform(2.0, 1.0, validate_args=True).mean(),
             "uniform not defined when low >= high."),
            (lambda: d.Bernoulli(probs=1.5, validate_args=True).mean(),
             "probs has components greater than 1."),
            (lambda: d.Categorical(probs=[0.5, 0.6], validate_args=True).probs,
             "probs does not sum to 1."),
            (lambda: d.Categorical(probs=[-0.5, 1.5], validate_args=True).probs, ""),
        ]  # fmt: skip
        with tf.Session() as sess:
            for build, message in checks:
                with pytest.raises(errors.InvalidArgumentError) as info:
                    sess.run(build())
                assert message in str(info.value)
