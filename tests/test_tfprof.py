"""tf.profiler.profile's model analysis (tfprof) with ProfileOptionBuilder, as TF 2.21
counts: every expected number and the printed tree were recorded from TF on the same
graphs."""

import pytest

import asyncflow as af

PB = af.profiler.ProfileOptionBuilder
XENT_GRAD = (
    "gradients/SparseSoftmaxCrossEntropyWithLogits/SparseSoftmaxCrossEntropyWithLogits_grad/mul"
)


def _mlp(with_training=True):
    x = af.placeholder(af.float32, [32, 784])
    y = af.placeholder(af.int64, [32])
    h = af.nn.relu(af.matmul(x, af.get_variable("w1", [784, 256])) + af.get_variable("b1", [256]))
    lo = af.matmul(h, af.get_variable("w2", [256, 10]))
    if with_training:  # (TF's printed tree below is of the graph without b2)
        lo = af.nn.bias_add(lo, af.get_variable("b2", [10]))
    loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=lo))
    if with_training:
        af.train.GradientDescentOptimizer(0.1).minimize(loss)


def _quiet(options):
    return PB(options).with_empty_output().build()


def test_mlp_flops_and_parameters():
    with af.Graph().as_default() as g:
        _mlp()
        flops = af.profiler.profile(g, options=_quiet(PB.float_operation()))
        params = af.profiler.profile(g, options=_quiet(PB.trainable_variables_parameter()))
    assert (flops.total_float_ops, params.total_parameters) == (39450894, 203530)
    assert sorted((c.name, c.total_float_ops) for c in flops.children) == [
        ("BiasAdd", 320), ("MatMul", 12845056), ("MatMul_1", 163840), ("Mean", 32),
        ("add", 8192), ("b1/Initializer/random_uniform", 513),
        ("b2/Initializer/random_uniform", 21), ("gradients/BiasAdd_grad/BiasAddGrad", 310),
        ("gradients/MatMul_1_grad/MatMul", 163840), ("gradients/MatMul_1_grad/MatMul_1", 163840),
        ("gradients/MatMul_grad/MatMul", 12845056), ("gradients/MatMul_grad/MatMul_1", 12845056),
        ("gradients/Mean_grad/truediv", 32),
        (XENT_GRAD, 320),
        ("gradients/add_grad/Sum", 7936), ("w1/Initializer/random_uniform", 401409),
        ("w2/Initializer/random_uniform", 5121),
    ]  # fmt: skip
    assert [(c.name, c.parameters) for c in params.children] == [
        ("b1", 256), ("b2", 10), ("w1", 200704), ("w2", 2560),
    ]  # fmt: skip


def test_cnn_flops():
    with af.Graph().as_default() as g:
        x = af.placeholder(af.float32, [8, 28, 28, 1])
        c = af.nn.conv2d(x, af.get_variable("k", [5, 5, 1, 16]), [1, 1, 1, 1], "SAME")
        c = af.nn.max_pool(af.nn.relu(c), [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        d = af.nn.depthwise_conv2d(c, af.get_variable("dk", [3, 3, 16, 2]), [1, 1, 1, 1], "VALID")
        a = af.nn.avg_pool(d, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        s = af.reduce_sum(af.square(a - 1.0)) + af.nn.l2_loss(a) * 2.0
        af.gradients(s, af.trainable_variables())
        flops = af.profiler.profile(g, options=_quiet(PB.float_operation()))
        params = af.profiler.profile(g, options=_quiet(PB.trainable_variables_parameter()))
    assert (flops.total_float_ops, params.total_parameters) == (16164707, 688)
    by_name = {c.name: c.total_float_ops for c in flops.children}
    assert by_name["Conv2D"] == 5017600 and by_name["depthwise"] == 663552
    assert by_name["gradients/Conv2D_grad/Conv2DBackpropFilter"] == 5017600
    assert by_name["gradients/Conv2D_grad/Conv2DBackpropInput"] == 5017600
    assert by_name["gradients/MaxPool_grad/MaxPoolGrad"] == 125440
    assert by_name["gradients/AvgPool_grad/AvgPoolGrad"] == 73728
    assert (by_name["L2Loss"], by_name["MaxPool"], by_name["AvgPool"]) == (27647, 100352, 36864)


def _flops(build):
    with af.Graph().as_default() as g:
        build()
        return af.profiler.profile(g, options=_quiet(PB.float_operation())).total_float_ops


def test_per_op_formulas():
    def ph(shape=(2, 3, 4)):
        return af.placeholder(af.float32, list(shape))

    dil = [1, 2, 2, 1]

    def conv(x, f, s, **kw):
        return af.nn.conv2d(ph(x), ph(f), s, "VALID", **kw)

    def pool(k, s):
        return af.nn.max_pool(ph([1, 5, 5, 2]), k, s, "VALID")

    def transposed():
        return af.nn.conv2d_transpose(
            ph([2, 4, 4, 5]), ph([3, 3, 3, 5]), [2, 9, 9, 3], [1, 2, 2, 1], "VALID"
        )

    def conv3d():
        return af.nn.conv3d(ph([1, 4, 4, 4, 2]), ph([2, 2, 2, 2, 3]), [1] * 5, "VALID")

    cases = {
        # TF 2.21's counts for [2, 3, 4] inputs
        "mul": (lambda: ph() * ph(), 24),
        "squared_difference": (lambda: af.squared_difference(ph(), ph()), 48),
        "rsqrt": (lambda: af.rsqrt(ph()), 48),
        "softmax": (lambda: af.nn.softmax(ph()), 120),
        "sum_axis": (lambda: af.reduce_sum(ph(), 1), 16),
        "mean_axis": (lambda: af.reduce_mean(ph(), 1), 24),
        "argmax": (lambda: af.argmax(ph(), 1), 16),
        "add_n": (lambda: af.add_n([ph(), ph(), ph()]), 48),
        "relu": (lambda: af.nn.relu(ph()), 0),
        "exp": (lambda: af.exp(ph()), 0),
        "unknown_shape": (lambda: af.placeholder(af.float32) + 1.0, 0),
        "matmul_t": (lambda: af.matmul(ph([3, 2]), ph([5, 3]), True, True), 60),
        "batch_matmul": (lambda: af.matmul(ph([4, 2, 3]), ph([3, 5])), 240),
        "conv_s2": (lambda: conv([2, 9, 9, 3], [3, 3, 3, 4], [1, 2, 2, 1]), 6912),
        "conv_dilated": (lambda: conv([1, 9, 9, 2], [3, 3, 2, 4], [1] * 4, dilations=dil), 3600),
        "conv3d": (conv3d, 2592),
        "transpose_conv": (transposed, 10935),
        "max_pool_k3s2": (lambda: pool([1, 3, 3, 1], [1, 2, 2, 1]), 72),
    }  # fmt: skip
    for name, (build, want) in cases.items():
        assert _flops(build) == want, name


def test_printed_tree_and_default_options(capsys):
    with af.Graph().as_default() as g:
        _mlp(with_training=False)
        af.profiler.profile(g, options=PB.float_operation())
        printed = capsys.readouterr().out
        assert printed.splitlines()[:8] == [
            "Profile:",
            "node name | # float_ops",
            "_TFProfRoot (--/13.42m flops)",
            "  MatMul (12.85m/12.85m flops)",
            "  w1/Initializer/random_uniform (200.70k/401.41k flops)",
            "    w1/Initializer/random_uniform/mul (200.70k/200.70k flops)",
            "    w1/Initializer/random_uniform/sub (1/1 flops)",
            "  MatMul_1 (163.84k/163.84k flops)",
        ]
        assert printed.splitlines()[8:] == [
            "  add (8.19k/8.19k flops)",
            "  w2/Initializer/random_uniform (2.56k/5.12k flops)",
            "    w2/Initializer/random_uniform/mul (2.56k/2.56k flops)",
            "    w2/Initializer/random_uniform/sub (1/1 flops)",
            "  b1/Initializer/random_uniform (256/513 flops)",
            "    b1/Initializer/random_uniform/mul (256/256 flops)",
            "    b1/Initializer/random_uniform/sub (1/1 flops)",
            "  Mean (32/32 flops)",
        ]
        default = af.profiler.profile(g)  # TF's default: the trainable parameters
        assert default.total_parameters == 203520
        assert capsys.readouterr().out.splitlines() == [
            "Profile:",
            "node name | # parameters",
            "_TFProfRoot (--/203.52k params)",
            "  b1 (256, 256/256 params)",
            "  w1 (784x256, 200.70k/200.70k params)",
            "  w2 (256x10, 2.56k/2.56k params)",
        ]
        with pytest.raises(af.errors.InvalidArgumentError, match="unknown cmd: bogus"):
            af.profiler.profile(g, cmd="bogus", options=_quiet(PB.float_operation()))
