"""BesselI0/I1, ApproximateEqual, ClipByValue, AccumulateNV2, DataFormat*, Eig,
CholeskyGrad, RGBToHSV/HSVToRGB, Reverse, SpaceToBatch/BatchToSpace, SelfAdjointEig and
MatrixExponential (ops/math_extra_ops.py, ops/color_ops.py, ops/legacy_ops.py).
Values recorded from TF 2.21 (rounded to 6 places)."""

import numpy as np
import pytest
from google.protobuf import text_format

import asyncflow as tf
from asyncflow import errors
from asyncflow.protos import graph_pb2

R = tf.raw_ops
XS = [-2.5, -0.5, 0.0, 0.7, 3.0]
RGB = [
    [0.2, 0.4, 0.6],
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.0, 0.0, 0.0],
    [0.9, 0.8, 0.1],
    [0.3, 0.9, 0.6],
]
HSV = [
    [0.1, 0.5, 0.6],
    [0.5, 1.0, 1.0],
    [0.9, 0.2, 0.3],
    [0.0, 0.0, 0.7],
    [0.7, 0.7, 0.2],
    [0.35, 0.4, 0.9],
]


def _run(t):
    with tf.Session() as sess:
        return sess.run(t)


def _x():
    return tf.constant(XS, tf.float64)


def _f64(v):
    return tf.constant(v, tf.float64)


_CASES = [
    ("BesselI0:0", lambda: R.BesselI0(x=_x()), [3.289839, 1.063483, 1.0, 1.126303, 4.880793]),
    ("BesselI1:0", lambda: R.BesselI1(x=_x()), [-2.516716, -0.257894, 0.0, 0.37188, 3.95337]),
    (
        "bessel_i0/BesselI0:0",
        lambda: tf.math.bessel_i0(_x()),
        [3.289839, 1.063483, 1.0, 1.126303, 4.880793],
    ),
    (
        "bessel_i1/BesselI1:0",
        lambda: tf.math.bessel_i1(_x()),
        [-2.516716, -0.257894, 0.0, 0.37188, 3.95337],
    ),
    ("BesselI0:0", lambda: R.BesselI0(x=tf.constant([1.0, 10.0])), [1.266066, 2815.716553]),
    (
        "ApproximateEqual:0",
        lambda: R.ApproximateEqual(x=[1.0, 2.0, 3.0], y=[1.000001, 2.1, 3.0], tolerance=0.01),
        [True, False, True],
    ),
    (
        "ApproximateEqual:0",
        lambda: R.ApproximateEqual(x=[1.0, 2.0], y=[1.000001, 2.00002]),
        [True, False],
    ),
    (
        "ClipByValue:0",
        lambda: R.ClipByValue(t=_x(), clip_value_min=_f64(-1.0), clip_value_max=_f64(1.0)),
        [-1.0, -0.5, 0.0, 0.7, 1.0],
    ),
    (
        "ClipByValue:0",
        lambda: R.ClipByValue(
            t=_x(),
            clip_value_min=_f64([-1.0, -1, -1, 0, 0]),
            clip_value_max=_f64([1.0, 1, 1, 0.5, 5]),
        ),
        [-1.0, -0.5, 0.0, 0.5, 3.0],
    ),
    (
        "AccumulateNV2:0",
        lambda: R.AccumulateNV2(inputs=[_x(), _x(), _x()], shape=[5]),
        [-7.5, -1.5, 0.0, 2.1, 9.0],
    ),
    ("DataFormatDimMap:0", lambda: R.DataFormatDimMap(x=[0, 1, 2, 3, -1]), [0, 2, 3, 1, 1]),
    (
        "DataFormatDimMap:0",
        lambda: R.DataFormatDimMap(x=[1, 2], src_format="NCHW", dst_format="NHWC"),
        [3, 1],
    ),
    ("DataFormatVecPermute:0", lambda: R.DataFormatVecPermute(x=[1, 2, 3, 4]), [1, 4, 2, 3]),
    (
        "DataFormatVecPermute:0",
        lambda: R.DataFormatVecPermute(x=[[1, 2], [3, 4], [5, 6], [7, 8]]),
        [[1, 2], [7, 8], [3, 4], [5, 6]],
    ),
    ("DataFormatVecPermute:0", lambda: R.DataFormatVecPermute(x=[10, 20]), [10, 20]),
    (
        "Eig:0",
        lambda: R.Eig(input=_f64([[2.0, 1.0], [-1.0, 3.0]]), Tout=tf.complex128)[0],
        [2.5 + 0.866025j, 2.5 - 0.866025j],
    ),
    (
        "Abs:0",
        lambda: tf.abs(R.Eig(input=_f64([[2.0, 1.0], [-1.0, 3.0]]), Tout=tf.complex128)[1]),
        [[0.707107, 0.707107], [0.707107, 0.707107]],
    ),
    (
        "CholeskyGrad:0",
        lambda: R.CholeskyGrad(
            l=_f64([[2.0, 0.0], [0.5, 1.5]]), grad=_f64([[1.0, 0.0], [2.0, 1.0]])
        ),
        [[0.145833, 0.416667], [0.416667, 0.333333]],
    ),
    (
        "RGBToHSV:0",
        lambda: R.RGBToHSV(images=_f64(RGB)),
        [
            [0.583333, 0.666667, 0.6],
            [0.0, 1.0, 1.0],
            [0.0, 0.0, 0.5],
            [0.0, 0.0, 0.0],
            [0.145833, 0.888889, 0.9],
            [0.416667, 0.666667, 0.9],
        ],
    ),
    (
        "HSVToRGB:0",
        lambda: R.HSVToRGB(images=_f64(HSV)),
        [
            [0.6, 0.48, 0.3],
            [0.0, 1.0, 1.0],
            [0.3, 0.24, 0.276],
            [0.7, 0.7, 0.7],
            [0.088, 0.06, 0.2],
            [0.54, 0.9, 0.576],
        ],
    ),
    (
        "Reverse:0",
        lambda: R.Reverse(tensor=[[1, 2, 3], [4, 5, 6]], dims=[True, False]),
        [[4, 5, 6], [1, 2, 3]],
    ),
    (
        "Reverse:0",
        lambda: R.Reverse(tensor=[[1, 2, 3], [4, 5, 6]], dims=[False, True]),
        [[3, 2, 1], [6, 5, 4]],
    ),
    (
        "SpaceToBatch:0",
        lambda: R.SpaceToBatch(
            input=np.arange(16.0).reshape(1, 4, 4, 1), paddings=[[0, 0], [0, 0]], block_size=2
        ),
        np.array(
            [
                [0.0, 2.0, 8.0, 10.0],
                [1.0, 3.0, 9.0, 11.0],
                [4.0, 6.0, 12.0, 14.0],
                [5.0, 7.0, 13.0, 15.0],
            ]
        ).reshape(4, 2, 2, 1),
    ),
    (
        "BatchToSpace:0",
        lambda: R.BatchToSpace(
            input=np.arange(16.0).reshape(4, 2, 2, 1), crops=[[0, 0], [0, 0]], block_size=2
        ),
        np.array(
            [
                [0.0, 4.0, 1.0, 5.0],
                [8.0, 12.0, 9.0, 13.0],
                [2.0, 6.0, 3.0, 7.0],
                [10.0, 14.0, 11.0, 15.0],
            ]
        ).reshape(1, 4, 4, 1),
    ),
]


@pytest.mark.parametrize("name, build, want", _CASES)
def test_values(name, build, want):
    with tf.Graph().as_default():
        t = build()
        assert t.name == name
        got = _run(t)
    if np.asarray(want).dtype == bool:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=1e-6)


def test_gradients():
    with tf.Graph().as_default():
        x = _x()
        lo, hi = _f64(-1.0), _f64(1.0)
        m = _f64([[2.0, 1.0], [-1.0, 3.0]])
        grads = [
            tf.gradients(R.BesselI0(x=x), x)[0],
            tf.gradients(R.BesselI1(x=x), x)[0],
            tf.gradients(R.ClipByValue(t=x, clip_value_min=lo, clip_value_max=hi) * x, x)[0],
            tf.gradients(R.AccumulateNV2(inputs=[x, x * 2.0], shape=[5]), x)[0],
            tf.gradients(R.Reverse(tensor=m, dims=[False, True]) * [[1.0, 2.0], [3.0, 4.0]], m)[0],
        ]
        hsv = _f64(HSV)
        assert tf.gradients(R.HSVToRGB(images=hsv), hsv) == [None]
        assert tf.gradients(tf.cast(R.ApproximateEqual(x=x, y=x), tf.float64), x) == [None]
        values = _run(grads)
    want = [
        [-2.516716, -0.257894, 0.0, 0.37188, 3.95337],
        [2.283153, 0.547695, 1.0, 0.595046, 3.563003],  # (1 at 0: TF's I0(0) - 0)
        [-1.0, -1.0, 0.0, 1.4, 1.0],
        [3.0, 3.0, 3.0, 3.0, 3.0],
        [[2.0, 1.0], [4.0, 3.0]],
    ]
    for got, w in zip(values, want):
        np.testing.assert_allclose(got, w, atol=1e-6)


def test_errors():
    with tf.Graph().as_default():
        with pytest.raises(
            ValueError,
            match="Dimension 0 in both shapes must be equal, but are "
            "2 and 3. Shapes are \\[2\\] and \\[3\\].",
        ):
            R.ApproximateEqual(x=[1.0, 2.0], y=[1.0, 2.0, 3.0])
        with pytest.raises(ValueError, match="Dimension must be 3 but is 2"):
            R.RGBToHSV(images=tf.constant([1.0, 2.0]))
        clip = R.ClipByValue(t=_x(), clip_value_min=_f64([-1.0, 1.0]), clip_value_max=_f64(1.0))
        with pytest.raises(errors.InvalidArgumentError) as e:
            _run(clip)
        assert (
            "clip_value_min and clip_value_max must be either of the same shape as input, or a "
            "scalar. input shape: [5]clip_value_min shape: [2]clip_value_max shape: []"
        ) in str(e.value)
        loose = tf.placeholder_with_default([1.0, 2.0], [None])
        with pytest.raises(errors.InvalidArgumentError) as e:
            _run(R.ApproximateEqual(x=loose, y=[1.0, 2.0, 3.0]))
        assert "x and y must be of the same shape. x shape: [3]. y shape: [2]" in str(e.value)
        for build in (
            lambda: R.SelfAdjointEig(input=_f64([[2.0, 1.0], [1.0, 3.0]])),
            lambda: R.MatrixExponential(input=_f64([[1.0]])),
        ):
            with pytest.raises(NotImplementedError, match="is not available in GraphDef"):
                build()


def test_removed_linalg_ops_from_an_old_graph_def():
    def const(name, value):
        dims = " ".join(f"dim {{ size: {d} }}" for d in value.shape)
        vals = " ".join(f"double_val: {v}" for v in value.ravel())
        return (
            f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: DT_DOUBLE '
            f'}} }} attr {{ key: "value" value {{ tensor {{ dtype: DT_DOUBLE tensor_shape {{ '
            f"{dims} }} {vals} }} }} }} }}\n"
        )

    def node(name, op, arg):
        return (
            f'node {{ name: "{name}" op: "{op}" input: "{arg}" attr {{ key: "T" value {{ '
            "type: DT_DOUBLE } } }\n"
        )

    text = (
        const("s", np.array([[[2.0, 1.0], [1.0, 3.0]]]))
        + const("e", np.array([[1.0, 2.0], [-0.5, 0.3]]))
        + node("sae", "SelfAdjointEig", "s")
        + node("mexp", "MatrixExponential", "e")
        + "versions { producer: 10 }"
    )
    with tf.Graph().as_default():
        sae, mexp = tf.import_graph_def(
            text_format.Parse(text, graph_pb2.GraphDef()), return_elements=["sae:0", "mexp:0"]
        )
        assert sae.shape.as_list() == [1, 3, 2]
        sv, mv = _run([sae, mexp])
    # (eigenvalues in row 0, eigenvectors below: TF's signs may differ per vector)
    np.testing.assert_allclose(sv[0, 0], [1.381966, 3.618034], atol=1e-6)
    np.testing.assert_allclose(
        np.abs(sv[0, 1:]), [[0.850651, 0.525731], [0.525731, 0.850651]], atol=1e-6
    )
    np.testing.assert_allclose(mv, [[1.711386, 3.294862], [-0.823715, 0.558184]], atol=1e-6)


def test_batch_norm_with_global_normalization_from_an_old_graph_def():
    t = np.sin(np.arange(16, dtype=np.float64)).reshape(2, 2, 2, 2)

    def const(name, value):
        dims = " ".join(f"dim {{ size: {d} }}" for d in value.shape)
        vals = " ".join(f"double_val: {v}" for v in value.ravel())
        return (
            f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: DT_DOUBLE '
            f'}} }} attr {{ key: "value" value {{ tensor {{ dtype: DT_DOUBLE tensor_shape {{ '
            f"{dims} }} {vals} }} }} }} }}\n"
        )

    attrs = (
        ' attr { key: "T" value { type: DT_DOUBLE } } attr { key: "variance_epsilon" value { '
        'f: 0.001 } } attr { key: "scale_after_normalization" value { b: true } }'
    )
    text = (
        const("t", t)
        + const("mm", np.array([0.1, -0.2]))
        + const("vv", np.array([0.5, 2.0]))
        + const("b", np.array([0.3, -0.1]))
        + const("g", np.array([2.0, 3.0]))
        + 'node { name: "bn" op: "BatchNormWithGlobalNormalization" input: "t" input: "mm" '
        f'input: "vv" input: "b" input: "g"{attrs} }}\n' + "versions { producer: 8 }"
    )
    with tf.Graph().as_default() as g:
        (bn,) = tf.import_graph_def(
            text_format.Parse(text, graph_pb2.GraphDef()), return_elements=["bn:0"], name=""
        )
        xs = [g.get_tensor_by_name(n + ":0") for n in ("t", "mm", "vv", "b", "g")]
        grads = tf.gradients(bn * bn, xs)  # (TF's graph keeps the old version: this builds)
        values = _run([bn] + grads)
    want = [
        [
            0.01744,
            2.108741,
            2.586753,
            0.623444,
            -2.120984,
            -1.709519,
            -0.772078,
            1.717489,
            2.812973,
            1.198175,
            -1.519748,
            -1.796611,
            -1.498702,
            1.215244,
            2.816503,
            1.703282,
        ],
        [
            0.098555,
            8.944397,
            14.618275,
            2.644388,
            -11.986115,
            -7.251063,
            -4.363169,
            7.284867,
            15.896691,
            5.082155,
            -8.588408,
            -7.620472,
            -8.469475,
            5.154556,
            15.916637,
            7.224608,
        ],
        [-13.12299, -21.463436],
        [-62.856034, -10.122511],
        [4.644315, 10.12049],
        [31.490873, 13.50343],
    ]
    for got, w in zip(values, want):
        np.testing.assert_allclose(np.ravel(got), w, atol=2e-6)
    with tf.Graph().as_default():
        with pytest.raises(NotImplementedError, match="removed in version 9"):
            R.BatchNormWithGlobalNormalization(
                t=t,
                m=[0.0, 0.0],
                v=[1.0, 1.0],
                beta=[0.0, 0.0],
                gamma=[1.0, 1.0],
                variance_epsilon=0.001,
                scale_after_normalization=True,
            )


def test_random_poisson_from_an_old_graph_def():
    text = (
        'node { name: "sh" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } attr { '
        'key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } } '
        "int_val: 3 } } } }\n"
        'node { name: "rate" op: "Const" attr { key: "dtype" value { type: DT_DOUBLE } } attr '
        '{ key: "value" value { tensor { dtype: DT_DOUBLE tensor_shape { dim { size: 2 } } '
        "double_val: 1.5 double_val: 20.0 } } } }\n"
        'node { name: "p" op: "RandomPoisson" input: "sh" input: "rate" attr { key: "S" value '
        '{ type: DT_INT32 } } attr { key: "dtype" value { type: DT_DOUBLE } } attr { key: '
        '"seed" value { i: 5 } } attr { key: "seed2" value { i: 9 } } }\n'
        "versions { producer: 24 }"
    )
    with tf.Graph().as_default():
        (p,) = tf.import_graph_def(
            text_format.Parse(text, graph_pb2.GraphDef()), return_elements=["p:0"]
        )
        assert p.shape.as_list() == [3, 2]
        with tf.Session() as sess:
            first, second = sess.run(p), sess.run(p)
    np.testing.assert_array_equal(first, [[2.0, 20.0], [0.0, 17.0], [0.0, 30.0]])
    np.testing.assert_array_equal(second, [[1.0, 25.0], [2.0, 17.0], [2.0, 16.0]])


# (lower, adjoint, bands, TF 2.21's x, d sum(x * w) / d bands, d sum(x * w) / d rhs)
_BANDED = [
    (
        True,
        False,
        [[2.0, 3.0, 4.0, 5.0], [0.5, -1.0, 0.25, 2.0]],
        [[0.5, 1.0], [1.166667, 1.666667], [1.177083, 1.395833], [0.929167, 1.041667]],
        [[-0.326065, 0.685987, 0.311614, -0.335495], [0.0, 0.388173, 0.310124, -0.436504]],
        [
            [0.441452, 0.105339],
            [-0.117097, -0.329625],
            [-0.259428, -0.004475],
            [0.192034, 0.15078],
        ],
    ),
    (
        False,
        True,
        [[1.0, 2.0, 3.0, 0.0], [0.5, 1.0, 0.5, 0.0], [2.0, 3.0, 4.0, 5.0]],
        [[0.5, 1.0], [0.916667, 1.166667], [0.895833, 0.958333], [0.94375, 1.0375]],
        [
            [0.04164, -0.351942, 0.0, 0.0],
            [0.550007, 0.111051, -0.316528, 0.0],
            [-0.678473, 0.709764, 0.117994, -0.337667],
        ],
        [[0.644774, 0.356086], [-0.204267, -0.447874], [-0.187415, 0.052068], [0.192034, 0.15078]],
    ),
]


@pytest.mark.parametrize("lower, adjoint, bands, want_x, want_gb, want_gr", _BANDED)
def test_banded_triangular_solve(lower, adjoint, bands, want_x, want_gb, want_gr):
    with tf.Graph().as_default():
        b = _f64(bands)
        rhs = _f64([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
        x = R.BandedTriangularSolve(matrix=b, rhs=rhs, lower=lower, adjoint=adjoint)
        assert x.shape.as_list() == [4, 2]
        w = _f64(np.cos(np.arange(8.0)).reshape(4, 2))
        gb, gr = tf.gradients(tf.reduce_sum(x * w), [b, rhs])
        values = _run([x, gb, gr])
    for got, want in zip(values, (want_x, want_gb, want_gr)):
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_adjust_contrast_from_an_old_graph_def():
    img = (np.arange(24) * 17 % 11).reshape(2, 2, 3, 2)
    vals = " ".join(f"int_val: {v}" for v in img.ravel())

    def scalar(name, v):
        return (
            f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} '
            f'}} attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ }} '
            f"float_val: {v} }} }} }} }}\n"
        )

    text = (
        'node { name: "img" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } attr { '
        'key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } dim { '
        f"size: 2 }} dim {{ size: 3 }} dim {{ size: 2 }} }} {vals} }} }} }} }}\n"
        + scalar("cf", 1.5)
        + scalar("lo", 1.0)
        + scalar("hi", 9.0)
        + 'node { name: "ac" op: "AdjustContrast" input: "img" input: "cf" input: "lo" input: '
        '"hi" attr { key: "T" value { type: DT_INT32 } } }\nversions { producer: 1 }'
    )
    with tf.Graph().as_default():
        (a,) = tf.import_graph_def(
            text_format.Parse(text, graph_pb2.GraphDef()), return_elements=["ac:0"]
        )
        assert a.dtype == tf.float32
        got = _run(a)
    want = [
        [
            [[1.0, 5.66667], [1.0, 7.16667], [1.75, 8.66667]],
            [[3.25, 9.0], [4.75, 9.0], [6.25, 1.0]],
        ],
        [
            [[5.66667, 1.0], [7.16667, 1.25], [8.66667, 2.75]],
            [[9.0, 4.25], [9.0, 5.75], [1.0, 7.25]],
        ],
    ]
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_random_crop_from_an_old_graph_def():
    img = np.arange(70).reshape(5, 7, 2)
    vals = " ".join(f"int_val: {v}" for v in img.ravel())
    text = (
        'node { name: "img" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } attr { '
        'key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 5 } dim { '
        f"size: 7 }} dim {{ size: 2 }} }} {vals} }} }} }} }}\n"
        'node { name: "sz" op: "Const" attr { key: "dtype" value { type: DT_INT64 } } attr { '
        'key: "value" value { tensor { dtype: DT_INT64 tensor_shape { dim { size: 2 } } '
        "int64_val: 2 int64_val: 3 } } } }\n"
        'node { name: "rc" op: "RandomCrop" input: "img" input: "sz" attr { key: "T" value { '
        'type: DT_INT32 } } attr { key: "seed" value { i: 3 } } attr { key: "seed2" value { '
        "i: 11 } } }\nversions { producer: 7 }"
    )
    with tf.Graph().as_default():
        (crop,) = tf.import_graph_def(
            text_format.Parse(text, graph_pb2.GraphDef()), return_elements=["rc:0"]
        )
        assert crop.shape.as_list() == [2, 3, 2]
        with tf.Session() as sess:
            got = [sess.run(crop)[:, :, 0].tolist() for _ in range(4)]
    assert got == [
        [[22, 24, 26], [36, 38, 40]],
        [[46, 48, 50], [60, 62, 64]],
        [[8, 10, 12], [22, 24, 26]],
        [[34, 36, 38], [48, 50, 52]],
    ]


def test_eig_gradients():
    want = {
        2: ([[1.01306, 0.48582], [-0.48582, 0.52724]], [[0.0, -0.07071], [-0.07071, 0.0]]),
        3: (
            [
                [0.93268, -0.08126, -0.32506],
                [1.58795, -0.65527, -0.9565],
                [-0.47825, 0.31572, 0.84675],
            ],
            [
                [0.14813, 0.06206, 0.13157],
                [-0.37726, 0.26974, 0.61228],
                [0.41372, -0.27947, -0.41787],
            ],
        ),
    }
    for mat in ([[2.0, 1.0], [-1.0, 3.0]], [[1.0, 2.0, 0.0], [0.5, -1.0, 1.0], [2.0, 0.0, 3.0]]):
        n = len(mat)
        with tf.Graph().as_default():
            a = _f64(mat)
            e, v = R.Eig(input=a, Tout=tf.complex128)
            w = tf.constant(np.cos(np.arange(n)) + 1j * np.sin(np.arange(n)), tf.complex128)
            loss_e = tf.real(tf.reduce_sum(e * w))
            weights = _f64(np.arange(n * n).reshape(n, n) * 0.1 + 1)
            loss_v = tf.reduce_sum(tf.abs(v) * weights)
            got = _run([tf.gradients(loss_e, a)[0], tf.gradients(loss_v, a)[0]])
        for g, w_ in zip(got, want[n]):
            np.testing.assert_allclose(g, w_, atol=1e-5)
