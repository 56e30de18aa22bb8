"""TF's legacy op types (ops/legacy_ops.py): BatchMatrix*, BatchFFT*, Inv, Mod, TopK,
Gather, Concat, ... run as TF 2.21 runs them; removed ones refuse to build, import from
an old GraphDef and fail when run from a newer one.  Values recorded from TF 2.21."""

import numpy as np
import pytest
from google.protobuf import text_format

import asyncflow as tf
from asyncflow import errors
from asyncflow.protos import graph_pb2

R = tf.raw_ops
M = np.array([[[4.0, 1.0], [1.0, 3.0]], [[2.0, 0.5], [0.5, 5.0]]])


def _run(t):
    with tf.Session() as sess:
        return sess.run(t)


_DT = {
    "float64": ("DT_DOUBLE", "double_val"),
    "int64": ("DT_INT64", "int64_val"),
    "int32": ("DT_INT32", "int_val"),
    "complex64": ("DT_COMPLEX64", "scomplex_val"),
}


def _const(name, value):
    value = np.asarray(value)
    dt, field = _DT[str(value.dtype)]
    flat = np.stack([value.real, value.imag], -1).ravel() if value.dtype.kind == "c" else value
    dims = " ".join(f"dim {{ size: {d} }}" for d in value.shape)
    vals = " ".join(f"{field}: {x}" for x in np.ravel(flat))
    return (
        f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: {dt} }} }} '
        f'attr {{ key: "value" value {{ tensor {{ dtype: {dt} tensor_shape {{ {dims} }} {vals} '
        "} } } }\n"
    )


def _node(name, op, inputs, **attrs):
    text = f'node {{ name: "{name}" op: "{op}" ' + " ".join(f'input: "{i}"' for i in inputs)
    for k, v in attrs.items():
        val = (
            f"b: {str(v).lower()}"
            if isinstance(v, bool)
            else (f"i: {v}" if isinstance(v, int) else f"type: {v}")
        )
        text += f' attr {{ key: "{k}" value {{ {val} }} }}'
    return text + " }\n"


def _import(text, producer, returns):
    gd = text_format.Parse(text + f"versions {{ producer: {producer} }}", graph_pb2.GraphDef())
    return tf.import_graph_def(gd, return_elements=returns, name="")


_OLD_CONSTS = (
    _const("m", M)
    + _const("r", np.ones((2, 2, 1)))
    + _const("l2", np.float64(0.1))
    + _const("lo", np.int64(0))
    + _const("hi", np.int64(1))
    + _const("d", np.array([[1.0, 2.0], [3.0, 4.0]]))
    + _const("c", np.array([1 + 2j, 3 - 1j, 0.5, -2j], np.complex64))
    + _const("c2", np.array([[1 + 2j, 3 - 1j], [0.5, -2j]], np.complex64))
)
D = "DT_DOUBLE"
# (node, op, inputs, attrs, TF 2.21's value from a GraphDef of producer 12)
_OLD_CASES = [
    (
        "bp",
        "BatchMatrixBandPart",
        ["m", "lo", "hi"],
        {"T": D},
        [[[4.0, 1.0], [0.0, 3.0]], [[2.0, 0.5], [0.0, 5.0]]],
    ),
    ("det", "BatchMatrixDeterminant", ["m"], {"T": D}, [11.0, 9.75]),
    (
        "diag",
        "BatchMatrixDiag",
        ["d"],
        {"T": D},
        [[[1.0, 0.0], [0.0, 2.0]], [[3.0, 0.0], [0.0, 4.0]]],
    ),
    ("dp", "BatchMatrixDiagPart", ["m"], {"T": D}, [[4.0, 3.0], [2.0, 5.0]]),
    (
        "inv",
        "BatchMatrixInverse",
        ["m"],
        {"T": D, "adjoint": True},
        [
            [[0.27272727, -0.09090909], [-0.09090909, 0.36363636]],
            [[0.51282051, -0.05128205], [-0.05128205, 0.20512821]],
        ],
    ),
    (
        "sd",
        "BatchMatrixSetDiag",
        ["m", "d"],
        {"T": D},
        [[[1.0, 1.0], [1.0, 2.0]], [[3.0, 0.5], [0.5, 4.0]]],
    ),
    (
        "sol",
        "BatchMatrixSolve",
        ["m", "r"],
        {"T": D, "adjoint": False},
        [[[0.18181818], [0.27272727]], [[0.46153846], [0.15384615]]],
    ),
    (
        "ls",
        "BatchMatrixSolveLs",
        ["m", "r", "l2"],
        {"T": D, "fast": True},
        [[[0.18187697], [0.26998626]], [[0.45015175], [0.1548114]]],
    ),
    (
        "tri",
        "BatchMatrixTriangularSolve",
        ["m", "r"],
        {"T": D, "lower": False, "adjoint": False},
        [[[0.16666667], [0.33333333]], [[0.45], [0.2]]],
    ),
    (
        "chol",
        "BatchCholesky",
        ["m"],
        {"T": D},
        [[[2.0, 0.0], [0.5, 1.6583124]], [[1.41421356, 0.0], [0.35355339, 2.20794022]]],
    ),
    (
        "eig",
        "BatchSelfAdjointEigV2",
        ["m"],
        {"T": D, "compute_v": False},
        [[2.38196601, 4.61803399], [1.91886117, 5.08113883]],
    ),
    (
        "svd",
        "BatchSvd",
        ["m"],
        {"T": D, "compute_uv": False, "full_matrices": False},
        [[4.61803399, 2.38196601], [5.08113883, 1.91886117]],
    ),
    # (TF 2.21 has GPU kernels only for BatchFFT*: values of FFT / IFFT2D there)
    ("fft", "BatchFFT", ["c"], {}, [4.5 - 1j, 1.5 - 1j, -1.5 + 5j, -0.5 + 5j]),
    (
        "ifft2",
        "BatchIFFT2D",
        ["c2"],
        {},
        [[1.125 - 0.25j, -0.375 + 1.25j], [0.875 + 0.75j, -0.625 + 0.25j]],
    ),
]


def test_removed_ops_run_from_an_old_graph_def():
    text = _OLD_CONSTS + "".join(_node(n, op, i, **a) for n, op, i, a, _ in _OLD_CASES)
    with tf.Graph().as_default():
        outs = _import(text, 12, [f"{n}:0" for n, *_ in _OLD_CASES])
        assert all(t.shape.ndims is None for t in outs)  # (TF infers no shapes here)
        values = _run(outs)
    for (name, *_, want), got in zip(_OLD_CASES, values):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda: R.BatchMatrixInverse(input=M),
            "Op BatchMatrixInverse is not available in GraphDef version 2474. It has been "
            "removed in version 13. Use MatrixInverse instead..",
        ),
        (
            lambda: R.BatchMatrixBandPart(input=M, num_lower=np.int64(0), num_upper=np.int64(1)),
            "Op BatchMatrixBandPart is not available in GraphDef version 2474. It has been "
            "removed in version 14. Use MatrixBandPart.",
        ),
        (
            lambda: R.TopK(input=[3.0, 1.0], k=1),
            "Op TopK is not available in GraphDef version 2474. It has been removed in "
            "version 7. Use TopKV2 instead.",
        ),
        (
            lambda: R.BatchFFT(input=np.ones(2, np.complex64)),
            "Op BatchFFT is not available in GraphDef version 2474. It has been removed in "
            "version 15. Use FFT.",
        ),
        (
            lambda: R.PlaceholderV2(dtype=tf.float32, shape=[2]),
            "Op PlaceholderV2 is not available in GraphDef version 2474. It has been removed "
            "in version 23. Placeholder now behaves the same as PlaceholderV2..",
        ),
    ],
)
def test_removed_ops_refuse_to_build(build, message):
    with tf.Graph().as_default():
        with pytest.raises(NotImplementedError) as e:
            build()
        assert str(e.value) == message


def test_removed_op_from_a_newer_graph_def_fails_when_run():
    text = _OLD_CONSTS + _node("inv", "BatchMatrixInverse", ["m"], T=D, adjoint=False)
    with tf.Graph().as_default():
        (inv,) = _import(text, 27, ["inv:0"])
        with pytest.raises(errors.UnimplementedError) as e:
            _run(inv)
    assert (
        "Op BatchMatrixInverse is not available in GraphDef version 27. It has been "
        "removed in version 13. Use MatrixInverse instead.." in str(e.value)
    )


def test_top_k_and_gather_from_an_old_graph_def():
    text = (
        _const("m", M[0])
        + _const("i", np.array([1], np.int32))
        + _node("k", "TopK", ["m"], T=D, k=1)
        + _node("g", "Gather", ["m", "i"], Tparams=D, Tindices="DT_INT32")
    )
    with tf.Graph().as_default():
        k, g = _import(text, 5, ["k:0", "g:0"])
        assert k.shape.as_list() == [2, 1] and g.shape.as_list() == [1, 2]
        kv, gv = _run([k, g])
    np.testing.assert_array_equal(kv, [[4.0], [3.0]])
    np.testing.assert_array_equal(gv, [[1.0, 3.0]])


# (builder, TF 2.21's name, dtype, value)
_CASES = [
    (lambda: R.Mod(x=[7, -7, 7, -7], y=[3, 3, -3, -3]), "Mod:0", tf.int32, [1, -1, 1, -1]),
    (lambda: R.Mod(x=[7.5, -7.5], y=[2.0, 2.0]), "Mod:0", tf.float32, [1.5, -1.5]),
    (lambda: R.Inv(x=[2.0, 4.0, -0.5]), "Inv:0", tf.float32, [0.5, 0.25, -2.0]),
    (lambda: R.InvGrad(y=[2.0, 4.0], dy=[1.0, 3.0]), "InvGrad:0", tf.float32, [-4.0, -48.0]),
    (
        lambda: R.BiasAddV1(value=np.ones((2, 3)), bias=[1.0, 2.0, 3.0]),
        "BiasAddV1:0",
        tf.float64,
        [[2.0, 3.0, 4.0], [2.0, 3.0, 4.0]],
    ),
    (
        lambda: R.InTopK(
            predictions=np.array([[0.1, 0.8, 0.1], [0.3, 0.3, 0.4]], np.float32),
            targets=[1, 0],
            k=1,
        ),
        "InTopK:0",
        tf.bool,
        [True, False],
    ),
    (
        lambda: R.Gather(params=[[1, 2], [3, 4], [5, 6]], indices=[2, 0]),
        "Gather:0",
        tf.int32,
        [[5, 6], [1, 2]],
    ),
    (lambda: R.Concat(concat_dim=1, values=[[[1, 2]], [[3]]]), "Concat:0", tf.int32, [[1, 2, 3]]),
]


@pytest.mark.parametrize("build, name, dtype, want", _CASES)
def test_renamed_ops_values(build, name, dtype, want):
    with tf.Graph().as_default():
        t = build()
        assert (t.name, t.dtype) == (name, dtype)
        np.testing.assert_allclose(_run(t), want)


def test_mod_by_zero_and_gather_out_of_range():
    with tf.Graph().as_default():
        with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
            _run(R.Mod(x=[7], y=[0]))
        with pytest.raises(
            errors.InvalidArgumentError, match=r"indices\[0\] = 3 is not in \[0, 3\)"
        ):
            _run(R.Gather(params=[[1, 2], [3, 4], [5, 6]], indices=[3]))


def test_gradients():
    with tf.Graph().as_default():
        x = tf.constant([[3.0, 1.0, 4.0], [1.0, 5.0, 9.0]], dtype=tf.float64)
        g_inv = tf.gradients(R.Inv(x=x), x)[0]
        g_concat = tf.gradients(R.Concat(concat_dim=1, values=[x, x * 2.0]), x)[0]
        bias = tf.constant([1.0, 2.0, 3.0], tf.float64)
        g_bias = tf.gradients(R.BiasAddV1(value=x, bias=bias) * x, x)[0]
        g_gather = tf.gradients(tf.reduce_sum(R.Gather(params=x, indices=[1, 1, 0])), x)[0]
        with pytest.raises(LookupError, match="op type: Mod"):
            tf.gradients(R.Mod(x=x, y=x), x)
        vals = _run([g_inv, g_concat, g_bias, tf.convert_to_tensor(g_gather)])
    np.testing.assert_allclose(
        vals[0], [[-0.111111, -1.0, -0.0625], [-1.0, -0.04, -0.012346]], atol=1e-6
    )
    np.testing.assert_allclose(vals[1], np.full((2, 3), 3.0))
    np.testing.assert_allclose(vals[2], [[7.0, 4.0, 11.0], [3.0, 12.0, 21.0]])
    np.testing.assert_allclose(vals[3], [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])


def test_conv_backprops_taking_the_tensor():
    # (TF 2.21 has no CPU kernel for the 2-D V2 ops: values of Conv2DBackpropFilter /
    # Conv2DBackpropInput with the same shapes there)
    x = np.arange(2 * 4 * 4 * 2, dtype=np.float32).reshape(2, 4, 4, 2) / 10
    f = (np.arange(3 * 3 * 2 * 3, dtype=np.float32).reshape(3, 3, 2, 3) - 20) / 10
    dy = np.cos(np.arange(2 * 2 * 2 * 3, dtype=np.float32)).reshape(2, 2, 2, 3)
    conv = dict(strides=[1, 2, 2, 1], padding="SAME")
    with tf.Graph().as_default():
        a = R.Conv2DBackpropFilterV2(input=x, filter=f, out_backprop=dy, **conv)
        b = R.Conv2DBackpropInputV2(input=x, filter=f, out_backprop=dy, **conv)
        assert a.shape.as_list() == [3, 3, 2, 3] and b.shape.as_list() == [2, 4, 4, 2]
        va, vb = _run([a, b])
    np.testing.assert_allclose(
        va.ravel()[:6], [-0.3952, -1.7311, -1.4755, -0.3696, -1.7571, -1.5291], atol=1e-4
    )
    np.testing.assert_allclose(va.sum(), 80.4269, atol=1e-3)
    np.testing.assert_allclose(
        vb.ravel()[:6], [-2.2775, -1.9403, -1.603, -1.2658, 1.7828, 1.712], atol=1e-4
    )
    np.testing.assert_allclose(vb.sum(), 24.5237, atol=1e-3)
    x3 = np.arange(27, dtype=np.float64).reshape(1, 3, 3, 3, 1) / 10
    text = (
        _const("x3", x3)
        + _const("f3", np.full((2, 2, 2, 1, 1), 0.5))
        + _const("dy3", np.arange(8, dtype=np.float64).reshape(1, 2, 2, 2, 1))
    )
    for name, op in (("cf", "Conv3DBackpropFilter"), ("ci", "Conv3DBackpropInput")):
        text += (
            f'node {{ name: "{name}" op: "{op}" input: "x3" input: "f3" input: "dy3" attr {{ '
            'key: "T" value { type: DT_DOUBLE } } attr { key: "padding" value { s: "VALID" } '
            '} attr { key: "strides" value { list { i: 1 i: 1 i: 1 i: 1 i: 1 } } } }\n'
        )
    with tf.Graph().as_default():
        cf, ci = _import(text, 9, ["cf:0", "ci:0"])
        vf, vi = _run([cf, ci])
    np.testing.assert_allclose(vf.ravel(), [26.8, 29.6, 35.2, 38.0, 52.0, 54.8, 60.4, 63.2])
    np.testing.assert_allclose(
        vi.ravel(),
        [
            0.0,
            0.5,
            0.5,
            1.0,
            3.0,
            2.0,
            1.0,
            2.5,
            1.5,
            2.0,
            5.0,
            3.0,
            6.0,
            14.0,
            8.0,
            4.0,
            9.0,
            5.0,
            2.0,
            4.5,
            2.5,
            5.0,
            11.0,
            6.0,
            3.0,
            6.5,
            3.5,
        ],
    )
