"""tf.distributions (TF1's, tf.compat.v1.distributions): values, op names, seeded samples,
gradients, errors and KL divergences, against literals recorded from TF 2.21
(tf.compat.v1.distributions, graph mode)."""

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import errors

d = tf.distributions
inf = np.inf
nan = np.nan


def _check_cases(cases, expected, atol=5e-8):
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
                np.testing.assert_allclose(g, w, rtol=2e-6, atol=atol, err_msg=label)
            continue
        got = np.asarray(got)
        assert got.dtype == want.dtype, label
        assert got.shape == want.shape, label
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=atol, err_msg=label)


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


def _build_more(tf, d):
    out = []

    def show(label, t):
        out.append((label, t))

    def stats(prefix, dist, methods, x=None):
        for m in methods:
            if m in (
                "log_prob",
                "prob",
                "cdf",
                "log_cdf",
                "survival_function",
                "log_survival_function",
            ):
                show(prefix + "." + m, getattr(dist, m)(x))
            else:
                show(prefix + "." + m, getattr(dist, m)())

    tf.set_random_seed(3)
    scalar = ["entropy", "mean", "mode", "variance", "stddev"]
    dens = ["log_prob", "prob", "cdf", "log_cdf", "survival_function", "log_survival_function"]
    e = d.Exponential(rate=[0.5, 2.0])
    stats("exp", e, scalar)
    stats("exp", e, dens, [[0.3, 1.0], [4.0, 0.01]])
    show("exp.sample", e.sample([3], seed=2))
    show("exp.concentration", e.concentration)
    g = d.Gamma(concentration=[0.5, 2.0, 5.0], rate=[1.0, 0.5, 3.0])
    stats("gamma", g, scalar)
    stats("gamma", g, dens, [0.2, 3.0, 1.5])
    show("gamma.sample", g.sample(2, seed=6))
    a = tf.constant([1.5, 3.0])
    r = tf.constant(2.0)
    # The rate here; the concentration's (RandomGammaGrad) in test_gamma_family_sample_gradients.
    show("gamma.grad_sample", tf.gradients(tf.reduce_sum(d.Gamma(a, r).sample(3, seed=4)), [r]))
    bt = d.Beta(concentration1=[0.5, 2.0, 3.0], concentration0=[0.5, 5.0, 1.5])
    stats("beta", bt, scalar)
    stats("beta", bt, dens, [0.1, 0.3, 0.9])
    show("beta.sample", bt.sample([2], seed=12))
    lp = d.Laplace(loc=[0.0, 1.0], scale=[1.0, 0.5])
    stats("laplace", lp, ["entropy", "mean", "mode", "variance", "stddev"])
    stats("laplace", lp, dens, [[-3.0, 1.2], [0.5, -40.0]])
    show("laplace.sample", lp.sample(3, seed=7))
    st = d.StudentT(df=[0.8, 1.5, 5.0], loc=[0.0, 1.0, -1.0], scale=[1.0, 2.0, 0.5])
    stats("studentt", st, ["entropy", "mean", "mode", "variance", "stddev"])
    stats(
        "studentt",
        st,
        ["log_prob", "prob", "cdf", "log_cdf", "survival_function", "log_survival_function"],
        [0.5, -2.0, 3.0],
    )
    show("studentt.sample", st.sample(2, seed=9))
    dr = d.Dirichlet([[1.0, 2.0, 3.0], [0.5, 4.0, 1.5]])
    stats("dirichlet", dr, ["entropy", "mean", "variance", "stddev", "covariance"])
    show("dirichlet.mode", d.Dirichlet([1.5, 2.0, 3.0]).mode())
    show("dirichlet.mode_nan", d.Dirichlet([0.5, 2.0, 3.0]).mode())
    show("dirichlet.log_prob", dr.log_prob([[0.2, 0.3, 0.5], [0.1, 0.8, 0.1]]))
    show("dirichlet.prob", dr.prob([0.2, 0.3, 0.5]))
    show("dirichlet.sample", dr.sample(2, seed=1))
    show("dirichlet.event_shape_tensor", dr.event_shape_tensor())
    mn = d.Multinomial(total_count=[4.0, 6.0], logits=[[0.0, 1.0, -1.0], [2.0, 0.5, 0.1]])
    stats("multinomial", mn, ["mean", "variance", "stddev", "covariance"])
    show("multinomial.log_prob", mn.log_prob([[1.0, 2.0, 1.0], [3.0, 3.0, 0.0]]))
    show("multinomial.prob", mn.prob([2.0, 2.0, 0.0]))
    dm = d.DirichletMultinomial(total_count=5.0, concentration=[[1.0, 2.0, 0.5], [3.0, 1.0, 1.0]])
    stats("dirmult", dm, ["mean", "variance", "stddev", "covariance"])
    show("dirmult.log_prob", dm.log_prob([[1.0, 2.0, 2.0], [5.0, 0.0, 0.0]]))
    show("dirmult.prob", dm.prob([2.0, 2.0, 1.0]))
    show("dirmult.sample", dm.sample(3, seed=8))
    # KL divergences registered for these families (Exponential through Gamma's).
    show("kl.gamma", d.kl_divergence(g, d.Gamma(1.0, 2.0)))
    show("kl.exp", d.kl_divergence(e, d.Exponential(1.0)))
    show("kl.beta", d.kl_divergence(bt, d.Beta(2.0, 2.0)))
    show("kl.dirichlet", d.kl_divergence(dr, d.Dirichlet([1.0, 1.0, 1.0])))
    return out


# Recorded from TF 2.21 (tf.compat.v1.distributions): (op name, value).
EXPECTED_MORE = {
    "exp.entropy": (
        "Exponential/entropy/add_1:0",
        np.array([1.6931471824645996, 0.3068528175354004], dtype=np.float32),
    ),
    "exp.mean": ("Exponential/mean/truediv:0", np.array([2.0, 0.5], dtype=np.float32)),
    "exp.mode": ("Exponential/mode/SelectV2:0", np.array([nan, nan], dtype=np.float32)),
    "exp.variance": ("Exponential/variance/truediv:0", np.array([4.0, 0.25], dtype=np.float32)),
    "exp.stddev": ("Exponential/stddev/truediv:0", np.array([2.0, 0.5], dtype=np.float32)),
    "exp.log_prob": (
        "Exponential/log_prob/sub_3:0",
        np.array(
            [
                [-0.8431471586227417, -1.3068528175354004],
                [-2.6931471824645996, 0.6731472015380859],
            ],
            dtype=np.float32,
        ),
    ),
    "exp.prob": (
        "Exponential/prob/Exp:0",
        np.array(
            [[0.4303539991378784, 0.2706705629825592], [0.0676676407456398, 1.9603973627090454]],
            dtype=np.float32,
        ),
    ),
    "exp.cdf": (
        "Exponential/cdf/Igamma:0",
        np.array(
            [
                [0.13929200172424316, 0.8646647334098816],
                [0.8646647334098816, 0.019801326096057892],
            ],
            dtype=np.float32,
        ),
    ),
    "exp.log_cdf": (
        "Exponential/log_cdf/Log:0",
        np.array(
            [
                [-1.9711828231811523, -0.14541344344615936],
                [-0.14541344344615936, -3.922006368637085],
            ],
            dtype=np.float32,
        ),
    ),
    "exp.survival_function": (
        "Exponential/survival_function/sub:0",
        np.array(
            [[0.8607079982757568, 0.1353352665901184], [0.1353352665901184, 0.9801986813545227]],
            dtype=np.float32,
        ),
    ),
    "exp.log_survival_function": (
        "Exponential/log_survival_function/sub_4:0",
        np.array([[-0.1499999761581421, -2.0], [-2.0, -0.019999980926513672]], dtype=np.float32),
    ),
    "exp.sample": (
        "Exponential/sample/Reshape:0",
        np.array(
            [
                [0.3227250874042511, 0.963829517364502],
                [3.6356630325317383, 0.06861330568790436],
                [1.557359218597412, 0.31421855092048645],
            ],
            dtype=np.float32,
        ),
    ),
    "exp.concentration": ("Exponential/concentration:0", np.array(1.0, dtype=np.float32)),
    "gamma.entropy": (
        "Gamma/entropy/add_1:0",
        np.array([0.09060955047607422, 2.2703628540039062, 1.0549707412719727], dtype=np.float32),
    ),
    "gamma.mean": (
        "Gamma/mean/truediv:0",
        np.array([0.5, 4.0, 1.6666666269302368], dtype=np.float32),
    ),
    "gamma.mode": (
        "Gamma/mode/SelectV2:0",
        np.array([nan, 2.0, 1.3333333730697632], dtype=np.float32),
    ),
    "gamma.variance": (
        "Gamma/variance/truediv:0",
        np.array([0.5, 8.0, 0.5555555820465088], dtype=np.float32),
    ),
    "gamma.stddev": (
        "Gamma/stddev/truediv:0",
        np.array([0.7071067690849304, 2.8284270763397217, 0.745356023311615], dtype=np.float32),
    ),
    "gamma.log_prob": (
        "Gamma/log_prob/sub_3:0",
        np.array([0.03235405683517456, -1.787682056427002, -0.5631318092346191], dtype=np.float32),
    ),
    "gamma.prob": (
        "Gamma/prob/Exp:0",
        np.array([1.0328831672668457, 0.16734762489795685, 0.5694229602813721], dtype=np.float32),
    ),
    "gamma.cdf": (
        "Gamma/cdf/Igamma:0",
        np.array([0.47291067242622375, 0.4421745538711548, 0.4678965210914612], dtype=np.float32),
    ),
    "gamma.log_cdf": (
        "Gamma/log_cdf/Log:0",
        np.array(
            [-0.7488487362861633, -0.8160505294799805, -0.7595081329345703], dtype=np.float32
        ),
    ),
    "gamma.survival_function": (
        "Gamma/survival_function/sub:0",
        np.array([0.5270893573760986, 0.5578254461288452, 0.5321034789085388], dtype=np.float32),
    ),
    "gamma.log_survival_function": (
        "Gamma/log_survival_function/Log1p:0",
        np.array([-0.6403852701187134, -0.583709180355072, -0.6309173107147217], dtype=np.float32),
    ),
    "gamma.sample": (
        "Gamma/sample/Reshape:0",
        np.array(
            [
                [0.5891710519790649, 5.598677158355713, 1.4997353553771973],
                [0.6859275102615356, 2.2917401790618896, 2.0416908264160156],
            ],
            dtype=np.float32,
        ),
    ),
    "gamma.grad_sample": (None, [np.array(-2.3504066467285156, dtype=np.float32)]),
    "beta.entropy": (
        "Beta/entropy/add_1:0",
        np.array(
            [-0.24156498908996582, -0.4845304489135742, -0.2730073928833008], dtype=np.float32
        ),
    ),
    "beta.mean": (
        "Beta/mean/truediv:0",
        np.array([0.5, 0.2857142984867096, 0.6666666865348816], dtype=np.float32),
    ),
    "beta.mode": (
        "Beta/mode/SelectV2:0",
        np.array([nan, 0.20000000298023224, 0.800000011920929], dtype=np.float32),
    ),
    "beta.variance": (
        "Beta/variance/truediv_2:0",
        np.array([0.125, 0.025510204955935478, 0.04040403664112091], dtype=np.float32),
    ),
    "beta.stddev": (
        "Beta/stddev/Sqrt:0",
        np.array([0.3535533845424652, 0.15971913933753967, 0.20100755989551544], dtype=np.float32),
    ),
    "beta.log_prob": (
        "Beta/log_prob/sub_3:0",
        np.array([0.059242963790893555, 0.7705247402191162, 0.5193582773208618], dtype=np.float32),
    ),
    "beta.prob": (
        "Beta/prob/Exp:0",
        np.array([1.061033010482788, 2.1608998775482178, 1.6809486150741577], dtype=np.float32),
    ),
    "beta.cdf": (
        "Beta/cdf/Betainc:0",
        np.array([0.2048327624797821, 0.5798250436782837, 0.8776593208312988], dtype=np.float32),
    ),
    "beta.log_cdf": (
        "Beta/log_cdf/Log:0",
        np.array(
            [-1.5855613946914673, -0.5450288653373718, -0.1304967850446701], dtype=np.float32
        ),
    ),
    "beta.survival_function": (
        "Beta/survival_function/sub:0",
        np.array([0.7951672077178955, 0.4201749563217163, 0.12234067916870117], dtype=np.float32),
    ),
    "beta.log_survival_function": (
        "Beta/log_survival_function/Log1p:0",
        np.array(
            [-0.22920282185077667, -0.8670840859413147, -2.1009457111358643], dtype=np.float32
        ),
    ),
    "beta.sample": (
        "Beta/sample/Reshape:0",
        np.array(
            [
                [0.7208606600761414, 0.16357283294200897, 0.959587037563324],
                [0.9168239235877991, 0.2267230898141861, 0.8605217933654785],
            ],
            dtype=np.float32,
        ),
    ),
    "laplace.entropy": (
        "Laplace/entropy/add_1:0",
        np.array([1.6931471824645996, 1.0], dtype=np.float32),
    ),
    "laplace.mean": ("Laplace/mean/add:0", np.array([0.0, 1.0], dtype=np.float32)),
    "laplace.mode": ("Laplace/mode/add:0", np.array([0.0, 1.0], dtype=np.float32)),
    "laplace.variance": (
        "Laplace/variance/Square:0",
        np.array([1.9999998807907104, 0.4999999701976776], dtype=np.float32),
    ),
    "laplace.stddev": (
        "Laplace/stddev/add:0",
        np.array([1.4142135381698608, 0.7071067690849304], dtype=np.float32),
    ),
    "laplace.log_prob": (
        "Laplace/log_prob/sub_1:0",
        np.array(
            [[-3.6931471824645996, -0.40000009536743164], [-1.1931471824645996, -82.0]],
            dtype=np.float32,
        ),
    ),
    "laplace.prob": (
        "Laplace/prob/Exp:0",
        np.array(
            [
                [0.024893533438444138, 0.6703199744224548],
                [0.3032653331756592, 2.442600707513088e-36],
            ],
            dtype=np.float32,
        ),
    ),
    "laplace.cdf": (
        "Laplace/cdf/add:0",
        np.array(
            [[0.024893522262573242, 0.6648399829864502], [0.6967346668243408, 0.0]],
            dtype=np.float32,
        ),
    ),
    "laplace.log_cdf": (
        "Laplace/log_cdf/log_cdf_laplace/SelectV2:0",
        np.array(
            [
                [-3.6931471824645996, -0.40820884704589844],
                [-0.3613506257534027, -82.69314575195312],
            ],
            dtype=np.float32,
        ),
    ),
    "laplace.survival_function": (
        "Laplace/survival_function/sub:0",
        np.array(
            [[0.9751064777374268, 0.3351600170135498], [0.3032653331756592, 1.0]], dtype=np.float32
        ),
    ),
    "laplace.log_survival_function": (
        "Laplace/log_survival_function/log_cdf_laplace/SelectV2:0",
        np.array(
            [
                [-0.025208616629242897, -1.0931472778320312],
                [-1.1931471824645996, -1.221300353756544e-36],
            ],
            dtype=np.float32,
        ),
    ),
    "laplace.sample": (
        "Laplace/sample/Reshape:0",
        np.array(
            [
                [0.6162657737731934, 1.1067919731140137],
                [-0.2777254581451416, -0.2780197858810425],
                [0.6102233529090881, 0.7857717275619507],
            ],
            dtype=np.float32,
        ),
    ),
    "studentt.entropy": (
        "StudentT/entropy/add_4:0",
        np.array([2.816906452178955, 2.842805862426758, 0.9343545436859131], dtype=np.float32),
    ),
    "studentt.mean": ("StudentT/mean/SelectV2:0", np.array([nan, 1.0, -1.0], dtype=np.float32)),
    "studentt.mode": ("StudentT/mode/Identity:0", np.array([0.0, 1.0, -1.0], dtype=np.float32)),
    "studentt.variance": (
        "StudentT/variance/SelectV2_2:0",
        np.array([nan, inf, 0.4166666567325592], dtype=np.float32),
    ),
    "studentt.stddev": (
        "StudentT/stddev/Sqrt:0",
        np.array([nan, inf, 0.64549720287323], dtype=np.float32),
    ),
    "studentt.log_prob": (
        "StudentT/log_prob/sub_2:0",
        np.array([-1.4358351230621338, -2.915160894393921, -8.1494779586792], dtype=np.float32),
    ),
    "studentt.prob": (
        "StudentT/prob/Exp:0",
        np.array(
            [0.23791658878326416, 0.05419531092047691, 0.0002888861345127225], dtype=np.float32
        ),
    ),
    "studentt.cdf": (
        "StudentT/cdf/SelectV2:0",
        np.array([0.6397931575775146, 0.15499739348888397, 0.9997535347938538], dtype=np.float32),
    ),
    "studentt.log_cdf": (
        "StudentT/log_cdf/Log:0",
        np.array(
            [-0.44661036133766174, -1.864346981048584, -0.00024649559054523706], dtype=np.float32
        ),
    ),
    "studentt.survival_function": (
        "StudentT/survival_function/sub:0",
        np.array(
            [0.36020684242248535, 0.8450025916099548, 0.00024646520614624023], dtype=np.float32
        ),
    ),
    "studentt.log_survival_function": (
        "StudentT/log_survival_function/Log1p:0",
        np.array(
            [-1.0210769176483154, -0.16841556131839752, -8.308289527893066], dtype=np.float32
        ),
    ),
    "studentt.sample": (
        "StudentT/sample/Reshape:0",
        np.array(
            [
                [723.7777099609375, 1.9730277061462402, 0.007948756217956543],
                [-2.051769256591797, 0.3292810320854187, -2.775607109069824],
            ],
            dtype=np.float32,
        ),
    ),
    "dirichlet.entropy": (
        "Dirichlet/entropy/sub_2:0",
        np.array([-1.2443442344665527, -2.19415020942688], dtype=np.float32),
    ),
    "dirichlet.mean": (
        "Dirichlet/mean/truediv:0",
        np.array(
            [
                [0.1666666716337204, 0.3333333432674408, 0.5],
                [0.0833333358168602, 0.6666666865348816, 0.25],
            ],
            dtype=np.float32,
        ),
    ),
    "dirichlet.variance": (
        "Dirichlet/variance/mul_1:0",
        np.array(
            [
                [0.0198412723839283, 0.0317460335791111, 0.035714291036129],
                [0.010912700556218624, 0.0317460335791111, 0.02678571827709675],
            ],
            dtype=np.float32,
        ),
    ),
    "dirichlet.stddev": (
        "Dirichlet/stddev/Sqrt:0",
        np.array(
            [
                [0.14085905253887177, 0.17817416787147522, 0.18898224830627441],
                [0.10446387529373169, 0.17817416787147522, 0.16366343200206757],
            ],
            dtype=np.float32,
        ),
    ),
    "dirichlet.covariance": (
        "Dirichlet/covariance/set_diag:0",
        np.array(
            [
                [
                    [0.0198412723839283, -0.00793650932610035, -0.011904763989150524],
                    [-0.00793650932610035, 0.0317460335791111, -0.02380952797830105],
                    [-0.011904763989150524, -0.02380952797830105, 0.035714291036129],
                ],
                [
                    [0.010912700556218624, -0.00793650932610035, -0.002976190997287631],
                    [-0.00793650932610035, 0.0317460335791111, -0.02380952797830105],
                    [-0.002976190997287631, -0.02380952797830105, 0.02678571827709675],
                ],
            ],
            dtype=np.float32,
        ),
    ),
    "dirichlet.mode": (
        "Dirichlet_1/mode/SelectV2:0",
        np.array([0.1428571492433548, 0.2857142984867096, 0.5714285969734192], dtype=np.float32),
    ),
    "dirichlet.mode_nan": (
        "Dirichlet_2/mode/SelectV2:0",
        np.array([nan, nan, nan], dtype=np.float32),
    ),
    "dirichlet.log_prob": (
        "Dirichlet/log_prob/sub_1:0",
        np.array([1.504077434539795, 1.8747190237045288], dtype=np.float32),
    ),
    "dirichlet.prob": (
        "Dirichlet/prob/Exp:0",
        np.array([4.5, 0.543555498123169], dtype=np.float32),
    ),
    "dirichlet.sample": (
        "Dirichlet/sample/Reshape:0",
        np.array(
            [
                [
                    [4.104342224309221e-05, 0.3576381504535675, 0.6423208117485046],
                    [0.19356900453567505, 0.42125311493873596, 0.38517794013023376],
                ],
                [
                    [0.44259992241859436, 0.4447409212589264, 0.11265914887189865],
                    [0.06576497852802277, 0.5087353587150574, 0.42549967765808105],
                ],
            ],
            dtype=np.float32,
        ),
    ),
    "dirichlet.event_shape_tensor": (
        "Dirichlet/event_shape_tensor_1/event_shape:0",
        np.array([3], dtype=np.int32),
    ),
    "multinomial.mean": (
        "Multinomial/mean/Identity:0",
        np.array(
            [
                [0.9789139032363892, 2.660963773727417, 0.36012229323387146],
                [4.3709516525268555, 0.9752911329269409, 0.6537572145462036],
            ],
            dtype=np.float32,
        ),
    ),
    "multinomial.variance": (
        "Multinomial/variance/sub:0",
        np.array(
            [
                [0.7393457889556885, 0.8907817602157593, 0.32770028710365295],
                [1.1867485046386719, 0.8167589902877808, 0.5825241208076477],
            ],
            dtype=np.float32,
        ),
    ),
    "multinomial.stddev": (
        "Multinomial/stddev/Sqrt:0",
        np.array(
            [
                [0.8598521947860718, 0.943812370300293, 0.572451114654541],
                [1.089379906654358, 0.9037472009658813, 0.7632326483726501],
            ],
            dtype=np.float32,
        ),
    ),
    "multinomial.covariance": (
        "Multinomial/covariance/set_diag:0",
        np.array(
            [
                [
                    [0.7393457889556885, -0.6512135863304138, -0.08813218027353287],
                    [-0.6512135863304138, 0.8907817602157593, -0.2395680993795395],
                    [-0.08813218027353287, -0.2395680993795395, 0.32770028710365295],
                ],
                [
                    [1.1867485046386719, -0.7104917764663696, -0.4762568473815918],
                    [-0.7104917764663696, 0.8167589902877808, -0.10626726597547531],
                    [-0.4762568771839142, -0.10626727342605591, 0.5825241208076477],
                ],
            ],
            dtype=np.float32,
        ),
    ),
    "multinomial.log_prob": (
        "Multinomial/log_prob/sub:0",
        np.array([-2.145516872406006, -3.404939651489258], dtype=np.float32),
    ),
    "multinomial.prob": (
        "Multinomial/prob/Exp:0",
        np.array([0.1590297371149063, 2.5239932537078857], dtype=np.float32),
    ),
    "dirmult.mean": (
        "DirichletMultinomial/mean/mul:0",
        np.array(
            [[1.4285714626312256, 2.857142925262451, 0.7142857313156128], [3.0, 1.0, 1.0]],
            dtype=np.float32,
        ),
    ),
    "dirmult.variance": (
        "DirichletMultinomial/variance/mul_3:0",
        np.array(
            [
                [1.9274379014968872, 2.312925338745117, 1.1564626693725586],
                [1.999999761581421, 1.3333332538604736, 1.3333332538604736],
            ],
            dtype=np.float32,
        ),
    ),
    "dirmult.stddev": (
        "DirichletMultinomial/stddev/Sqrt_1:0",
        np.array(
            [
                [1.3883219957351685, 1.520830512046814, 1.0753895044326782],
                [1.4142134189605713, 1.154700517654419, 1.154700517654419],
            ],
            dtype=np.float32,
        ),
    ),
    "dirmult.covariance": (
        "DirichletMultinomial/covariance/set_diag:0",
        np.array(
            [
                [
                    [1.9274379014968872, -1.5419502258300781, -0.38548755645751953],
                    [-1.5419502258300781, 2.312925338745117, -0.7709751129150391],
                    [-0.38548755645751953, -0.7709751129150391, 1.1564626693725586],
                ],
                [
                    [1.999999761581421, -0.9999999403953552, -0.9999999403953552],
                    [-0.9999999403953552, 1.3333332538604736, -0.3333333134651184],
                    [-0.9999999403953552, -0.3333333134651184, 1.3333332538604736],
                ],
            ],
            dtype=np.float32,
        ),
    ),
    "dirmult.log_prob": (
        "DirichletMultinomial/log_prob/add_1:0",
        np.array([-3.4430184364318848, -1.7917590141296387], dtype=np.float32),
    ),
    "dirmult.prob": (
        "DirichletMultinomial/prob/Exp:0",
        np.array([0.042624060064554214, 0.04761907830834389], dtype=np.float32),
    ),
    "dirmult.sample": (
        "DirichletMultinomial/sample/Reshape_2:0",
        np.array(
            [
                [[0.0, 5.0, 0.0], [3.0, 2.0, 0.0]],
                [[1.0, 4.0, 0.0], [3.0, 1.0, 1.0]],
                [[0.0, 2.0, 3.0], [3.0, 1.0, 1.0]],
            ],
            dtype=np.float32,
        ),
    ),
    "kl.gamma": (
        "KullbackLeibler/kl_gamma_gamma/add_2:0",
        np.array([0.21624326705932617, 5.036489963531494, 1.5852155685424805], dtype=np.float32),
    ),
    "kl.exp": (
        "KullbackLeibler_1/kl_gamma_gamma/add_2:0",
        np.array([0.3068528175354004, 0.1931471824645996], dtype=np.float32),
    ),
    "kl.beta": (
        "KullbackLeibler_2/kl_beta_beta/add_2:0",
        np.array([1.222395420074463, 0.5094380378723145, 0.299716055393219], dtype=np.float32),
    ),
    "kl.dirichlet": (
        "KullbackLeibler_3/kl_dirichlet_dirichlet/add:0",
        np.array([0.5511970520019531, 1.5010030269622803], dtype=np.float32),
    ),
}


def test_more_distributions_match_tf():
    with tf.Graph().as_default():
        # Entropies and KLs here are sums of O(1) lgamma/digamma terms: a few ulps of 1.
        _check_cases(_build_more(tf, d), EXPECTED_MORE, atol=1e-6)


def test_multinomial_samples_are_counts():
    # One batch member: TF's seeded draws (recorded from TF 2.21).
    with tf.Graph().as_default():
        tf.set_random_seed(3)
        s1 = d.Multinomial(total_count=5.0, logits=[0.0, 1.0, -1.0]).sample(4, seed=5)
        s2 = d.Multinomial(total_count=[3.0], probs=[[0.2, 0.3, 0.5]]).sample([2, 2], seed=9)
        assert (s1.name, s2.name) == (
            "Multinomial/sample/Reshape_3:0",
            "Multinomial_1/sample/Reshape_3:0",
        )
        assert s2.shape.as_list() == [2, 2, 1, 3]
        with tf.Session() as sess:
            got1, got2 = sess.run([s1, s2])
        np.testing.assert_array_equal(got1, [[2, 3, 0], [2, 3, 0], [1, 3, 1], [0, 5, 0]])
        np.testing.assert_array_equal(
            got2, [[[[0, 2, 1]], [[0, 2, 1]]], [[[1, 1, 1]], [[0, 2, 1]]]]
        )
    # Several members: the counts' form here; TF's numbers (its draws run last-first,
    # not always) are in test_tf1_fixes_s25.py.
    with tf.Graph().as_default():
        mn = d.Multinomial(total_count=[4.0, 6.0], logits=[[0.0, 1.0, -1.0], [2.0, 0.5, 0.1]])
        s = mn.sample(2, seed=5)
        assert s.shape.as_list() == [2, 2, 3]
        with tf.Session() as sess:
            got = sess.run(s)
        np.testing.assert_array_equal(got.sum(-1), [[4.0, 6.0], [4.0, 6.0]])
        assert (got >= 0).all() and (got == np.round(got)).all()


def test_reachable_as_compat_v1():
    assert tf.compat.v1.distributions is d
    assert issubclass(d.Normal, d.Distribution) and issubclass(d.Laplace, d.Distribution)


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


def test_more_properties_match_tf():
    with tf.Graph().as_default():
        e = d.Exponential(rate=[0.5, 2.0])
        assert repr(e) == (
            "<tfp.distributions.Exponential 'Exponential/' batch_shape=(2,) event_shape=() "
            "dtype=float32>"
        )
        assert e.parameters == {
            "rate": [0.5, 2.0],
            "validate_args": False,
            "allow_nan_stats": True,
            "name": "Exponential",
        }
        assert (e.concentration.name, e.rate.name) == (
            "Exponential/concentration:0",
            "Exponential/rate_1:0",
        )
        assert e.reparameterization_type is d.FULLY_REPARAMETERIZED
        assert repr(d.Dirichlet([[1.0, 2.0, 3.0]])) == (
            "<tfp.distributions.Dirichlet 'Dirichlet/' batch_shape=(1,) event_shape=(3,) "
            "dtype=float32>"
        )
        assert str(d.Gamma([1.0], [[2.0]]).batch_shape) == "(1, 1)"
        for dist, name in [
            (d.Multinomial(3.0, probs=[0.2, 0.8]), "Multinomial"),
            (d.DirichletMultinomial(3.0, [1.0, 2.0]), "DirichletMultinomial"),
        ]:
            assert dist.reparameterization_type is d.NOT_REPARAMETERIZED
            assert (str(dist.event_shape), str(dist.batch_shape)) == ("(2,)", "()")
            assert dist.sample(4).shape.as_list() == [4, 2]
            assert dist.event_shape_tensor().name == name + "/event_shape_tensor_1/event_shape:0"
        with pytest.raises(NotImplementedError, match="^entropy is not implemented: Multinomial$"):
            d.Multinomial(3.0, probs=[0.2, 0.8]).entropy()
        with pytest.raises(NotImplementedError, match="^quantile is not implemented: StudentT$"):
            d.StudentT(3.0, 0.0, 1.0).quantile(0.3)
        assert d.Gamma(1.0, 1.0).survival_function(0.3).name == "Gamma_1/survival_function/sub:0"


def test_more_gradients_match_tf():
    # Recorded from TF 2.21.
    with tf.Graph().as_default():
        # No graph seed: the sample's op seed pairs with TF's default graph seed.
        loc, scale = tf.constant([0.5, -1.0]), tf.constant([2.0, 0.3])
        lp = d.Laplace(loc, scale)
        g_laplace = tf.gradients(tf.reduce_sum(lp.sample(4, seed=11) ** 2), [loc, scale])
        c1, c0 = tf.constant([2.0, 3.0]), tf.constant(1.5)
        g_beta = tf.gradients(tf.reduce_sum(d.Beta(c1, c0).log_prob([0.3, 0.6])), [c1, c0])
        con = tf.constant([1.0, 2.0, 3.0])
        g_dir = tf.gradients(d.Dirichlet(con).log_prob([0.2, 0.3, 0.5]), con)
        dfs = tf.constant([3.0, 5.0])
        g_t = tf.gradients(tf.reduce_sum(d.StudentT(dfs, 0.0, 1.0).log_prob([0.5, -1.0])), dfs)
        with tf.Session() as sess:
            got = sess.run([g_laplace, g_beta, g_dir, g_t])
        want = [
            [[-16.83988, -6.5463724], [42.77954, 0.83799386]],
            [[-0.5236002, -0.04473871], 1.1460822],
            [[2.2833335, 0.0793606, 0.09018624]],
            [[0.03774114, 0.01865291]],
        ]
        for g_list, w_list in zip(got, want):
            for g, w in zip(g_list, w_list):
                # digamma's last ulps differ: 1e-6 absolute.
                np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)


def test_more_validate_args_and_nan_stats_raise():
    # Messages recorded from TF 2.21 (its first line; "" is an assert without message).
    checks = [
        (lambda: d.Gamma(-1.0, 1.0, validate_args=True).mean(), ""),
        (lambda: d.Gamma(1.0, 1.0, validate_args=True).log_prob(-1.0), ""),
        (lambda: d.Gamma(0.5, 1.0, allow_nan_stats=False).mode(),
         "mode not defined when any concentration <= 1"),
        (lambda: d.Beta(-1.0, 1.0, validate_args=True).mean(),
         "Concentration parameter must be positive."),
        (lambda: d.Beta(2.0, 1.0, validate_args=True).log_prob(1.5),
         "sample must be less than `1`."),
        (lambda: d.Beta(0.5, 2.0, allow_nan_stats=False).mode(),
         "Mode undefined for concentration1 <= 1."),
        (lambda: d.Laplace(0.0, -1.0, validate_args=True).mean(), ""),
        (lambda: d.StudentT(-1.0, 0.0, 1.0, validate_args=True).mean(), ""),
        (lambda: d.StudentT(0.5, 0.0, 1.0, allow_nan_stats=False).mean(),
         "mean not defined for components of df <= 1"),
        (lambda: d.StudentT(0.5, 0.0, 1.0, allow_nan_stats=False).variance(),
         "variance not defined for components of df <= 1"),
        (lambda: d.Dirichlet([1.0, -2.0], validate_args=True).mean(),
         "Concentration parameter must be positive."),
        (lambda: d.Dirichlet([1.0, 2.0], validate_args=True).log_prob([0.5, 0.6]),
         "sample last-dimension must sum to `1`"),
        (lambda: d.Dirichlet([0.5, 2.0], allow_nan_stats=False).mode(),
         "Mode undefined when any concentration <= 1"),
        (lambda: d.Multinomial(3.0, probs=[0.2, 0.8], validate_args=True).log_prob([1.0, 1.0]),
         "counts must sum to `self.total_count`"),
        (lambda: d.Multinomial(3.0, probs=[0.2, 0.8], validate_args=True).log_prob([1.5, 1.5]),
         "' cannot contain fractional components."),
        (lambda: d.Multinomial(-3.0, probs=[0.2, 0.8], validate_args=True).mean(),
         "'Tensor(\"Multinomial_2/total_count:0\", shape=(), dtype=float32)' must be "
         "non-negative."),
        (lambda: d.DirichletMultinomial(3.0, [1.0, 2.0], validate_args=True).log_prob([1.0, 1.0]),
         "counts must sum to `self.total_count`"),
        (lambda: d.Exponential(-1.0, validate_args=True).mean(), ""),
    ]  # fmt: skip
    with tf.Graph().as_default(), tf.Session() as sess:
        for build, message in checks:
            with pytest.raises(errors.InvalidArgumentError) as info:
                sess.run(build())
            assert message in str(info.value)


def test_param_shapes_value_dtype_and_static_sample_shapes():
    # Recorded from TF 2.21.
    with tf.Graph().as_default():
        shapes = {
            d.Normal: ("loc", "scale"),
            d.Laplace: ("loc", "scale"),
            d.StudentT: ("df", "loc", "scale"),
            d.Gamma: ("concentration", "rate"),
            d.Exponential: ("rate",),
            d.Beta: ("concentration1", "concentration0"),
            d.Bernoulli: ("logits",),
            d.Uniform: ("low", "high"),
        }
        for cls, names in shapes.items():
            static = cls.param_static_shapes([2, 3])
            assert list(static) == list(names)
            assert all(s.as_list() == [2, 3] for s in static.values())
        for cls in (d.Categorical, d.Dirichlet, d.Multinomial):
            with pytest.raises(NotImplementedError, match="^_param_shapes not implemented$"):
                cls.param_static_shapes([2, 3])
        shapes = d.Normal.param_shapes([4])
        assert shapes["loc"].name == shapes["scale"].name == "DistributionParamShapes_11/Const:0"
        with pytest.raises(ValueError, match="^TensorShape sample_shape must be fully defined$"):
            d.Normal.param_static_shapes(tf.TensorShape([None, 2]))
        with pytest.raises(ValueError, match="^sample_shape must be a fully-defined TensorShape"):
            d.Normal.param_static_shapes(tf.placeholder(tf.int32, [2]))
        with pytest.raises(
            ValueError, match=r"^Expected floating point type, got <dtype: 'int32'>"
        ):
            d.Normal(1, 2)
        assert d.Normal([1.0, 2.0], 2.0).log_prob([[1]]).shape.as_list() == [1, 2]
        lp = d.Categorical(logits=[0.0, 1.0]).log_prob(1.0)
        assert lp.name == "Categorical/log_prob/Neg:0"
        s64 = d.Categorical(logits=[0.0, 1.0], dtype=tf.int64).sample(2)
        assert (s64.name, s64.dtype) == ("Categorical_1/sample/Reshape_2:0", tf.int64)
        assert d.Normal(0.0, 1.0).sample(tf.constant([2, 3])).shape.as_list() == [2, 3]
        assert d.Normal(0.0, 1.0).sample(tf.placeholder(tf.int32, [None])).shape.ndims is None
        event = d.Normal(0.0, 1.0).is_scalar_event()
        assert event.name == "Normal_4/is_scalar_event/is_scalar_event:0"
        assert d.Normal(tf.zeros([2, 1]), tf.ones([3])).batch_shape.as_list() == [2, 3]
        with tf.Session() as sess:
            np.testing.assert_allclose(sess.run(lp), -0.31326169, rtol=1e-6)


def test_event_validation_of_bernoulli_and_categorical():
    # Recorded from TF 2.21: the failing node and its message.
    def default(value):
        return tf.placeholder_with_default(value, [])

    def bern(value):
        return d.Bernoulli(logits=0.0, validate_args=True).log_prob(value)

    def cat(value):
        return d.Categorical(logits=[0.0, 1.0], validate_args=True).log_prob(value)

    checks = [
        (lambda: bern(2), "Elements cannot exceed 1."),
        (lambda: bern(-1), "Elements must be non-negative."),
        (lambda: bern(0.5), "Elements must be bool-equivalent."),
        (lambda: bern(default(2)),
         "Bernoulli_3/log_prob/embed_check_casting_closed/assert_less_equal"),
        (lambda: cat(5), "Received a label value of 5 which is outside the valid range of [0, 2)"),
        (lambda: cat(default(-1)), "Elements must be non-negative."),
        (lambda: cat(default(1.5)), "Elements must be int32-equivalent."),
        (lambda: d.Normal(0.0, default(-1.0), validate_args=True).mean(),
         "Normal/assert_positive/assert_less/Assert"),
        (lambda: d.Uniform(default(3.0), 1.0, validate_args=True).mean(),
         "uniform not defined when low >= high."),
    ]  # fmt: skip
    with tf.Graph().as_default(), tf.Session() as sess:
        for build, message in checks:
            with pytest.raises(errors.InvalidArgumentError) as info:
                sess.run(build())
            assert message in str(info.value)
        np.testing.assert_allclose(sess.run(bern(1)), -0.6931472, rtol=1e-6)
        np.testing.assert_allclose(sess.run(cat(1)), -0.31326166, rtol=1e-6)
        np.testing.assert_allclose(
            sess.run(d.Categorical(logits=[0.0, 1.0], validate_args=True).cdf(default(3))), 1.0
        )


def test_gamma_family_sample_gradients_match_tf():
    # Implicit reparameterization through RandomGammaGrad; recorded from TF 2.21.
    with tf.Graph().as_default():
        tf.set_random_seed(2)
        a, r = tf.constant([1.5, 3.0, 0.3]), tf.constant(2.0)
        g1 = tf.gradients(tf.reduce_sum(d.Gamma(a, r).sample(3, seed=4)), [a, r])
        c1, c0 = tf.constant([0.7, 2.0]), tf.constant([1.5, 4.0])
        g2 = tf.gradients(tf.reduce_sum(d.Beta(c1, c0).sample([2], seed=5) ** 2), [c1, c0])
        con = tf.constant([[1.0, 2.0, 0.5]])
        g3 = tf.gradients(tf.reduce_sum(d.Dirichlet(con).sample(2, seed=6)[..., 0]), [con])
        df = tf.constant([3.0, 10.0])
        g4 = tf.gradients(tf.reduce_sum(d.StudentT(df, 0.0, 1.0).sample(2, seed=7)), [df])
        a64 = tf.constant([[2.5], [0.8]], tf.float64)
        sample64 = tf.random_gamma([2, 3], a64, dtype=tf.float64, seed=1)
        g5 = tf.gradients(tf.reduce_sum(sample64), [a64])
        with tf.Session() as sess:
            got = sess.run([g1, g2, g3, g4, g5])
    want = [
        [[1.4627701044082642, 1.7354488372802734, 0.5019930601119995], -3.828336000442505],
        [[0.3103748559951782, 0.014996472746133804], [-0.2062119096517563, -0.003008704399690032]],
        [[[0.4155852794647217, -0.2372833639383316, -0.01761082001030445]]],
        [[0.2373082935810089, 0.0009712651371955872]],
        [[[6.778265237734372], [5.306920089717338]]],
    ]
    for g_list, w_list in zip(got, want):
        for g, w in zip(g_list, w_list):
            # StudentT's df gradient is a difference of O(0.1) terms: 1e-6 absolute.
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)


def test_float64_and_user_subclass_match_tf():
    # Recorded from TF 2.21: float64 uses log_ndtr's float64 segments (-20, 8).
    with tf.Graph().as_default():
        tf.set_random_seed(4)
        f64 = tf.float64
        n = d.Normal(tf.constant([0.0, 1.0], f64), tf.constant(2.0, f64))
        x = np.array([[-50.0, 3.0], [20.0, -15.0]])
        out = [
            n.log_cdf(x),
            n.log_survival_function(x),
            n.cdf(x),
            n.quantile([1e-10, 0.7]),
            n.sample(2, seed=1),
            d.Categorical(logits=tf.constant([0.1, 0.5], f64), dtype=tf.int64).sample(3, seed=2),
            d.Uniform(tf.constant(0.0, f64), tf.constant(2.0, f64)).sample(2, seed=3),
            d.Bernoulli(probs=0.3, dtype=tf.bool).sample(4, seed=6),
        ]

        class Flat(d.Distribution):
            def __init__(self):
                super().__init__(
                    dtype=tf.float32,
                    reparameterization_type=d.NOT_REPARAMETERIZED,
                    validate_args=False,
                    allow_nan_stats=True,
                    parameters={},
                    name="Flat",
                )

            def _log_prob(self, x):
                return tf.zeros_like(x)

        flat = Flat()
        assert repr(flat) == (
            "<tfp.distributions.Flat 'Flat/' batch_shape=<unknown> event_shape=<unknown> "
            "dtype=float32>"
        )
        for method, message in [
            (flat.sample, "sample_n is not implemented: Flat"),
            (flat.mean, "mean is not implemented: Flat"),
            (flat.batch_shape_tensor, "batch_shape_tensor is not implemented: Flat"),
        ]:
            with pytest.raises(NotImplementedError, match=f"^{message}$"):
                method()
        out += [flat.prob([1.0, 2.0]), flat.log_prob(3.0)]
        assert [t.name for t in out[-2:]] == ["Flat/prob/Exp:0", "Flat/log_prob/zeros_like:0"]
        with tf.Session() as sess:
            got = sess.run(out)
    want = [
        [[-316.63940800869966, -0.1727537790234498], [-7.619853024160498e-24, -35.01343715991455]],
        [
            [-3.0566967063824906e-138, -1.8410216450092636],
            [-53.23128515051248, -6.661338147750941e-16],
        ],
        [[3.0566967063824906e-138, 0.841344746068543], [1.0, 6.220960574271755e-16]],
        [-12.722681804808111, 2.048801025416081],
        [[-0.3829989188208668, 2.0052310846310375], [1.6345124394131738, 1.5642848177048432]],
        [1, 0, 0],
        [0.9358157019433007, 0.3813644226857704],
        [False, True, False, False],
        [1.0, 1.0],
        0.0,
    ]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=0)
    assert [g.dtype for g in got[5:8]] == [np.int64, np.float64, np.bool_]
