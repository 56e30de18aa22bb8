"""TF 2.21 compat.v1 names and arguments added in s26-small: the tf.signal N-d FFT
wrappers, CsvDataset(exclude_cols=), the Optimizer's own-namescope non-slot variables,
and the experimental random/linalg/saved_model helpers.

Graph structure, dtypes and errors were recorded from TF 2.21 (tf.compat.v1, graph mode);
numbers TF cannot produce on a CPU (FFTND has GPU kernels only) are checked against NumPy.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import asyncflow as tf
from asyncflow import graph as ops
from asyncflow.data.csv_dataset import CsvDatasetV2
from asyncflow.saved_model.loader import read_saved_model


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(*fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(list(fetches), feed)


# -- tf.signal.fftnd family ------------------------------------------------------------------

_X = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) ** 1.3 % 5).astype(np.float32)
_XC = (_X + 1j * _X[::-1]).astype(np.complex64)
_NP_NORM = {None: "backward", "backward": "backward", "forward": "forward", "ortho": "ortho"}


@pytest.mark.parametrize("norm", [None, "backward", "forward", "ortho"])
def test_fftnd_norms_match_numpy(norm):
    n = _NP_NORM[norm]
    got = _run(
        tf.signal.fftnd(_XC, norm=norm),
        tf.signal.ifftnd(_XC, norm=norm),
        tf.signal.rfftnd(_X, norm=norm),
        tf.signal.irfftnd(_XC, norm=norm),
    )
    want = [
        np.fft.fftn(_XC, norm=n),
        np.fft.ifftn(_XC, norm=n),
        np.fft.rfftn(_X, norm=n),
        np.fft.irfftn(_XC, norm=n),
    ]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "fn, x, kwargs, ref, shape",
    [
        # static shapes are the transform's (TF 2.21's graph keeps the padded input's)
        ("fftnd", _XC, {"axes": [0, 2]}, lambda: np.fft.fftn(_XC, axes=[0, 2]), [2, 3, 4]),
        ("fftnd", _XC, {"axes": [-1]}, lambda: np.fft.fftn(_XC, axes=[-1]), [2, 3, 4]),
        (
            "fftnd",
            _XC,
            {"fft_length": [2, 6]},
            lambda: np.fft.fftn(_XC, s=[2, 6], axes=[1, 2]),
            [2, 2, 6],
        ),
        (
            "fftnd",
            _XC,
            {"fft_length": [5, 2], "axes": [1, 2]},
            lambda: np.fft.fftn(_XC, s=[5, 2], axes=[1, 2]),
            [2, 5, 2],
        ),
        (
            "rfftnd",
            _X,
            {"fft_length": [5, 3], "axes": [0, 2], "norm": "ortho"},
            lambda: np.fft.rfftn(_X, s=[5, 3], axes=[0, 2], norm="ortho"),
            [5, 3, 2],
        ),
        (
            "irfftnd",
            _XC,
            {"fft_length": [4, 6], "norm": "forward"},
            lambda: np.fft.irfftn(_XC, s=[4, 6], axes=[1, 2], norm="forward"),
            [2, 4, 6],
        ),
        (
            "irfftnd",
            _XC,
            {"fft_length": [7]},
            lambda: np.fft.irfftn(_XC, s=[7], axes=[2]),
            [2, 3, 7],
        ),
    ],
)
def test_fftnd_lengths_and_axes(fn, x, kwargs, ref, shape):
    t = getattr(tf.signal, fn)(x, **kwargs)
    assert t.shape.as_list() == shape
    np.testing.assert_allclose(_run(t)[0], ref(), rtol=1e-4, atol=1e-4)


def test_fftnd_graph_as_tf():
    # Recorded from TF 2.21: a shorter transformed dimension is padded by a Pad op
    # before the raw op (a longer one is cropped by the op); the raw op carries the
    # wrapper's name; rfftnd / irfftnd keep complex64 / float32 whatever the input.
    t = tf.signal.fftnd(_XC, fft_length=[5, 2], axes=[1, 2], name="A")
    assert t.op.type == "FFTND" and t.op.name == "A"
    pad = t.op.inputs[0].op
    assert pad.type == "Pad"
    np.testing.assert_array_equal(_run(pad.inputs[1])[0], [[0, 0], [0, 2], [0, 0]])
    c = tf.signal.irfftnd(_XC, fft_length=[4, 6], name="C")
    assert c.op.type == "IRFFTND" and c.dtype == tf.float32
    np.testing.assert_array_equal(_run(c.op.inputs[0].op.inputs[1])[0], [[0, 0], [0, 1], [0, 0]])
    assert tf.signal.rfftnd(_X.astype(np.float64)).dtype == tf.complex64
    assert tf.signal.irfftnd(_XC.astype(np.complex128)).dtype == tf.float32
    assert tf.signal.fftnd(_XC.astype(np.complex128)).dtype == tf.complex128
    assert tf.signal.fftnd(_X).dtype == tf.complex64  # real input made complex
    assert tf.signal.rfftnd(_X).name == "rfftnd_1:0"
    # tf.fftnd stays the raw op (input, fft_length, axes).
    raw = tf.fftnd(_XC, [3, 4], [1, 2])
    assert raw.op.type == "FFTND"


def test_fftnd_errors():
    with pytest.raises(ValueError, match="norm"):
        tf.signal.fftnd(_XC, norm="bad")
    # fft_length and axes of different lengths fail when run, as TF's kernel does.
    t = tf.signal.fftnd(_XC, fft_length=[2, 3], axes=[1])
    with pytest.raises(tf.errors.InvalidArgumentError, match="same length"):
        _run(t)


def test_fftnd_placeholder_batch():
    ph = tf.placeholder(tf.complex64, [None, 3, 4])
    t = tf.signal.fftnd(ph, axes=[1, 2], norm="ortho")
    assert t.shape.as_list() == [None, 3, 4]
    got = _run(t, feed={ph: _XC})[0]
    np.testing.assert_allclose(got, np.fft.fftn(_XC, axes=[1, 2], norm="ortho"), atol=1e-4)
    with pytest.raises(ValueError, match="known at build time"):
        tf.signal.ifftnd(ph)


# -- CsvDataset(exclude_cols=) ---------------------------------------------------------------

_CSV = "1,2.5,a,4\n5,,b,8\n9,1.5,c\n"


def _csv_rows(tmp_path, **kw):
    path = tmp_path / "c.csv"
    path.write_text(_CSV)
    ds = CsvDatasetV2(str(path), **kw)
    nxt = tf.data.make_one_shot_iterator(ds).get_next()
    out = []
    with tf.Session() as sess:
        try:
            while True:
                out.append(tuple(v.item() if hasattr(v, "item") else v for v in sess.run(nxt)))
        except tf.errors.OutOfRangeError:
            pass
        except tf.errors.InvalidArgumentError as e:
            out.append(("InvalidArgumentError", e.message.splitlines()[0]))
    return out


# Recorded from TF 2.21 with TF 2's class (tf.data.experimental.CsvDataset) in a graph:
# TF 2.21's compat.v1 class lists exclude_cols but its __init__ rejects the keyword
# (tests/data/test_dataset_more.py's csv_exclude), so only TF 2's class reaches it.
_CSV_CASES = [
    (dict(record_defaults=[[0], [0.0], [""]], exclude_cols=[3]),
     [(1, 2.5, b"a"), (5, 0.0, b"b"), (9, 1.5, b"c")]),
    (dict(record_defaults=[[0.0], [""], [0]], exclude_cols=[0]),
     [(2.5, b"a", 4), (0.0, b"b", 8),
      ("InvalidArgumentError", "Expect 3 fields but have 2 in record")]),
    (dict(record_defaults=[[0.0], [0]], exclude_cols=[0, 2]),
     [(2.5, 4), (0.0, 8), ("InvalidArgumentError", "Expect 2 fields but have 1 in record")]),
    (dict(record_defaults=[[0.0], [0]], exclude_cols=[2, 0]),
     [("InvalidArgumentError", "exclude_cols should be strictly increasing indices")]),
    (dict(record_defaults=[[0.0], [0]], exclude_cols=[-1, 2]),
     [("InvalidArgumentError", "exclude_cols should be non-negative indices")]),
    (dict(record_defaults=[[0.0], [0]], exclude_cols=[0], select_cols=[1, 3]),
     [("InvalidArgumentError", "Either select_cols or exclude_cols should be empty")]),
    (dict(record_defaults=[[0.0]], exclude_cols=[0]),
     [("InvalidArgumentError", "Expect 1 fields but have more in record")]),
    (dict(record_defaults=[[0], [0.0], [""], [0]], exclude_cols=[7]),
     [(1, 2.5, b"a", 4), (5, 0.0, b"b", 8),
      ("InvalidArgumentError", "Expect 4 fields but have 3 in record")]),
    (dict(record_defaults=[[0], [0.0]], exclude_cols=[2, 2]),
     [("InvalidArgumentError", "exclude_cols should be strictly increasing indices")]),
]  # fmt: skip


@pytest.mark.parametrize("kw, want", _CSV_CASES)
def test_csv_dataset_exclude_cols(tmp_path, kw, want):
    assert _csv_rows(tmp_path, **kw) == want


def test_csv_dataset_graph_as_tf(tmp_path):
    # TF 2.21's graph: no name scope, one CSVDatasetV2 op with exclude_cols last.
    g = ops.get_default_graph()
    tf.data.experimental.CsvDataset(str(tmp_path / "c.csv"), record_defaults=[[0], [0.0], [""]])
    op = g.get_operation_by_name("CSVDatasetV2")
    assert op.type == "CSVDatasetV2"
    assert [t.name for t in op.inputs] == [
        "filenames:0", "compression_type:0", "buffer_size:0", "header:0", "field_delim:0",
        "use_quote_delim:0", "na_value:0", "select_cols:0", "record_defaults_0:0",
        "record_defaults_1:0", "record_defaults_2:0", "exclude_cols:0",
    ]  # fmt: skip
    assert g.get_tensor_by_name("filenames:0").shape.as_list() == []
    assert g.get_tensor_by_name("exclude_cols:0").shape.as_list() == [0]
    with pytest.raises(TypeError, match="CsvDatasetV1.__init__.. got an unexpected keyword"):
        tf.data.experimental.CsvDataset("c.csv", [[0]], exclude_cols=[1])


# -- Optimizer(use_own_namescope_for_non_slot_vars=), apply_gradients(skip_...) ----------------


def _adam_graph():
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable([1.0, 2.0], name="w")
        loss = tf.reduce_sum(w * w)
        o1 = tf.train.AdamOptimizer(0.1, use_own_namescope_for_non_slot_vars=True)
        t1 = o1.minimize(loss)
        o2 = tf.train.AdamOptimizer(0.2, use_own_namescope_for_non_slot_vars=True)
        t2 = o2.minimize(loss)
        rv = tf.Variable([1.0], name="rv", use_resource=True)
        o3 = tf.train.AdamOptimizer(0.2, use_own_namescope_for_non_slot_vars=True)
        t3 = o3.minimize(tf.reduce_sum(rv * rv))
    return g, (o1, o2, o3), (t1, t2, t3), (w, rv)


def test_optimizer_own_namescope_names_as_tf(tmp_path):
    # Recorded from TF 2.21: each optimizer fixes its scope when built ("Adam",
    # "Adam_1", ...); re-entering it for beta1/beta2 takes name scopes, so the first
    # train op is "Adam_3".
    g, opts, trains, (w, rv) = _adam_graph()
    assert [t.name for t in trains] == ["Adam_3", "Adam_5", "Adam_7"]
    with g.as_default():
        names = sorted(v.op.name for v in tf.global_variables())
        assert names == [
            "Adam/beta1_power", "Adam/beta2_power", "Adam_1/beta1_power",
            "Adam_1/beta2_power", "Adam_2/beta1_power", "Adam_2/beta2_power", "rv",
            "rv/Adam", "rv/Adam_1", "w", "w/Adam", "w/Adam_1", "w/Adam_2", "w/Adam_3",
        ]  # fmt: skip
        assert [v.op.name for v in opts[1].variables()] == [
            "Adam_1/beta1_power", "Adam_1/beta2_power", "w/Adam_2", "w/Adam_3",
        ]  # fmt: skip
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for t in trains:
                sess.run(t)
            w_v, rv_v = sess.run([w, rv])
            path = saver.save(sess, str(tmp_path / "m"))
    np.testing.assert_allclose(w_v, [0.70000005, 1.7], rtol=1e-6)
    np.testing.assert_allclose(rv_v, [0.8], rtol=1e-6)
    assert sorted(tf.train.list_variables(path)) == [
        ("Adam/beta1_power", []), ("Adam/beta2_power", []), ("Adam_1/beta1_power", []),
        ("Adam_1/beta2_power", []), ("Adam_2/beta1_power", []), ("Adam_2/beta2_power", []),
        ("rv", [1]), ("rv/Adam", [1]), ("rv/Adam_1", [1]), ("w", [2]), ("w/Adam", [2]),
        ("w/Adam_1", [2]), ("w/Adam_2", [2]), ("w/Adam_3", [2]),
    ]  # fmt: skip


def test_optimizer_own_namescope_under_variable_scope():
    # Recorded from TF 2.21: built inside variable_scope("outer"), the scope is
    # "outer/Adam"; without the flag the beta powers are "outer/beta1_power".
    g = tf.Graph()
    with g.as_default(), tf.variable_scope("outer"):
        w = tf.Variable([1.0, 2.0], name="w")
        opt = tf.train.AdamOptimizer(0.1, use_own_namescope_for_non_slot_vars=True)
        opt.minimize(tf.reduce_sum(w * w))
        plain = tf.train.AdamOptimizer(0.1)
        v = tf.Variable(1.0, name="v")
        plain.minimize(v * v)
        names = sorted(x.op.name for x in tf.global_variables() if "power" in x.op.name)
    assert names == [
        "outer/Adam/beta1_power", "outer/Adam/beta2_power", "outer/beta1_power",
        "outer/beta2_power",
    ]  # fmt: skip


def test_apply_gradients_skip_aggregation():
    # Recorded from TF 2.21: without a distribution strategy the flag changes nothing:
    # two gradients for one variable are both applied.
    w = tf.Variable([1.0, 2.0], name="w")
    opt = tf.train.GradientDescentOptimizer(0.5)
    pairs = [(tf.constant([1.0, 1.0]), w), (tf.constant([2.0, 3.0]), w)]
    for skip in (False, True):
        train = opt.apply_gradients(pairs, skip_gradients_aggregation=skip)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train)
            np.testing.assert_allclose(sess.run(w), [-0.5, 0.0])
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.apply_gradients([(None, w)], skip_gradients_aggregation=True)
    with pytest.raises(TypeError):
        tf.train.GradientDescentOptimizer(0.5, use_own_namescope_for_non_slot_vars=True)


# -- tf.random.experimental.index_shuffle / stateless_shuffle ---------------------------------

_RX = tf.random.experimental

# Recorded from TF 2.21 (tf.compat.v1, graph mode, CPU). A small max_index still walks a
# 2**16 block per element (TF's cycle walking, slow in NumPy), so such vectors are few.
_INDEX_SHUFFLE_CASES = [
    (lambda: _RX.index_shuffle(3, [1, 2], 9), "int32", 4),
    (lambda: _RX.index_shuffle(np.arange(10), [4, 5], 9), "int64", [1, 5, 9, 2, 3, 6, 8, 0, 4, 7]),
    (
        lambda: _RX.index_shuffle(
            np.arange(5, dtype=np.uint32), np.array([4, 5], np.uint32), np.uint32(100)
        ),
        "uint32",
        [66, 77, 93, 2, 3],
    ),
    (
        lambda: _RX.index_shuffle(
            np.array([0, 1, 2, 999999, 12345678901], np.int64), [-3, 2**31 - 1], 2**40
        ),
        "int64",
        [184119983524, 185915071069, 175861347998, 460911324977, 146404828339],
    ),
    (lambda: _RX.index_shuffle(0, [1, 2], 0), "int32", 0),
]


@pytest.mark.parametrize("build, dtype, want", _INDEX_SHUFFLE_CASES)
def test_index_shuffle_as_tf(build, dtype, want):
    t = build()
    assert t.op.type == "RandomIndexShuffle" and t.dtype.name == dtype
    assert _run(t)[0].tolist() == want


def test_index_shuffle_graph_and_errors():
    # Recorded from TF 2.21: the [2] seed is padded in front by a PadV2 op.
    t = _RX.index_shuffle(3, [1, 2], 9)
    assert t.name == "RandomIndexShuffle:0"
    assert [x.op.name for x in t.op.inputs] == [
        "RandomIndexShuffle/index", "PadV2", "RandomIndexShuffle/max_index",
    ]  # fmt: skip
    assert t.op.get_attr("rounds") == 4
    with pytest.raises(ValueError, match=r"Seed must have shape \[3\] or \[n, 3\] but got \[4\]"):
        _RX.index_shuffle(3, [1, 2, 3], 9)
    with pytest.raises(ValueError, match="Shape must be at most rank 1 but is rank 2"):
        _RX.index_shuffle(np.arange(4).reshape(2, 2), [1, 2], 5)
    with pytest.raises(TypeError, match="DataType float32 not in list of allowed values"):
        _RX.index_shuffle(1.0, [1, 2], 5)
    neg = _RX.index_shuffle(np.arange(3), [1, 2], -1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_index must be >= 0 but was -1"):
        _run(neg)
    out = _RX.index_shuffle(7, [1, 2], 5)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="max_index must be >= index, but 5 < 7"
    ):
        _run(out)


_PERM_10 = [0, 3, 8, 1, 5, 4, 9, 7, 6, 2]


@pytest.mark.parametrize("alg", ["auto_select", "philox", 1, 3])
def test_stateless_shuffle_as_tf(alg):
    # Recorded from TF 2.21: every Philox spelling gives the same order on a CPU.
    t = _RX.stateless_shuffle(np.arange(10.0), seed=[1, 2], alg=alg)
    assert t.op.type == "StatelessShuffle" and t.dtype == tf.float64
    assert _run(t)[0].tolist() == [float(v) for v in _PERM_10]


def test_stateless_shuffle_values_and_errors():
    # Recorded from TF 2.21.
    a = _RX.stateless_shuffle(np.arange(10), seed=[1, 2], name="sh")
    b = _RX.stateless_shuffle(np.arange(12).reshape(4, 3), seed=[5, 6])
    c = _RX.stateless_shuffle(np.float32(3), seed=[1, 2])
    d = _RX.stateless_shuffle(np.arange(100), seed=[-3, 2**40])
    assert a.name == "sh/StatelessShuffle:0"
    assert b.name == "stateless_shuffle/StatelessShuffle:0"
    got = _run(a, b, c, d)
    assert got[0].tolist() == _PERM_10
    assert got[1].tolist() == [[9, 10, 11], [6, 7, 8], [3, 4, 5], [0, 1, 2]]
    assert got[2].tolist() == 3.0
    assert got[3].tolist() == [
        86, 52, 27, 70, 99, 6, 80, 25, 21, 93, 4, 79, 38, 67, 60, 89, 12, 82, 26, 55, 36, 15,
        13, 94, 77, 39, 50, 91, 11, 47, 78, 58, 95, 51, 62, 35, 8, 64, 57, 40, 74, 45, 20, 10,
        37, 31, 2, 97, 14, 44, 87, 84, 32, 69, 30, 0, 59, 81, 43, 46, 68, 92, 17, 23, 18, 85,
        19, 33, 90, 42, 61, 76, 54, 34, 5, 65, 48, 96, 75, 63, 7, 1, 29, 56, 22, 98, 9, 41, 16,
        73, 83, 72, 66, 49, 24, 53, 71, 28, 3, 88,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="Dimension must be 2 but is 3"):
        _RX.stateless_shuffle(np.arange(10), seed=[1, 2, 3])
    three = _RX.stateless_shuffle(np.arange(10.0), seed=[1, 2], alg="threefry")
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"counter must be a vector with length at least 2; got shape: \[1\]",
    ):
        _run(three)


# -- tf.linalg.experimental.conjugate_gradient ------------------------------------------------

_A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
_B = np.array([1.0, 2.0, 3.0], np.float32)


def _spd(m):
    return tf.linalg.LinearOperatorFullMatrix(m, is_self_adjoint=True, is_positive_definite=True)


def _check_cg(state, want):
    got = _run(*state)
    assert int(got[0]) == want[0]
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4)


def test_conjugate_gradient_as_tf():
    # Recorded from TF 2.21 (tf.compat.v1, graph mode), rounded to 5 decimals.
    cg = tf.linalg.experimental.conjugate_gradient
    state = cg(_spd(_A), tf.constant(_B))
    assert type(state).__name__ == "CGState"
    assert state._fields == ("i", "x", "r", "p", "gamma")
    assert [t.shape.as_list() for t in state] == [[], [3], [3], [3], []]
    assert state.x.name.startswith("conjugate_gradient/while/Exit")
    _check_cg(state, [3, [-0.08173, 0.59652, 1.46078], [0.0] * 3, [0.0] * 3, 0.0])
    _check_cg(
        cg(_spd(_A), tf.constant(_B), max_iter=1),
        [1, [0.32258, 0.64516, 0.96774], [-1.41935, -0.45161, 0.77419],
         [-1.21808, -0.04906, 1.37803], 2.8179],
    )  # fmt: skip
    _check_cg(
        cg(_spd(_A), tf.constant(_B), tol=1e-2, x=np.ones(3, np.float32), name="cg2"),
        [2, [-0.08715, 0.60719, 1.45642], [0.01319, -0.02572, 0.00929],
         [0.01293, -0.02545, 0.01039], 0.00092],
    )  # fmt: skip
    pre = tf.linalg.LinearOperatorDiag(
        1.0 / np.diag(_A), is_self_adjoint=True, is_positive_definite=True
    )
    _check_cg(
        cg(_spd(_A), tf.constant(_B), preconditioner=pre, max_iter=2),
        [2, [-0.05931, 0.54396, 1.48529], [-0.04935, 0.13037, -0.04972],
         [-0.01834, 0.04301, -0.02006], 0.00751],
    )  # fmt: skip
    batch = cg(_spd(np.stack([_A, 2 * _A])), tf.constant(np.stack([_B, _B[::-1]])))
    _check_cg(
        batch,
        [3, [[-0.08173, 0.59652, 1.46078], [0.30014, 0.22311, 0.15265]], np.zeros((2, 3)),
         np.zeros((2, 3)), [0.0, 0.0]],
    )  # fmt: skip
    f64 = cg(_spd(_A.astype(np.float64)), tf.constant(_B.astype(np.float64)), max_iter=2)
    assert f64.x.dtype == tf.float64
    _check_cg(
        f64,
        [2, [-0.09837, 0.62821, 1.44397], [0.0433, -0.07505, 0.0356],
         [0.0395, -0.0752, 0.03989], 0.00877],
    )  # fmt: skip


def test_conjugate_gradient_needs_spd_operator():
    cg = tf.linalg.experimental.conjugate_gradient
    for op in (
        tf.linalg.LinearOperatorFullMatrix(_A),
        tf.linalg.LinearOperatorFullMatrix(_A, is_self_adjoint=True),
    ):
        with pytest.raises(ValueError, match="Expected a self-adjoint, positive definite"):
            cg(op, tf.constant(_B))


# -- tf.saved_model: MethodNameUpdater, SaveOptions, Asset ------------------------------------


def _two_graph_saved_model(export_dir, as_text=False):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None], name="x")
        y = tf.identity(x * 2, name="y")
        with tf.Session() as sess:
            builder = tf.saved_model.Builder(export_dir)
            sig = tf.saved_model.predict_signature_def({"x": x}, {"y": y})
            builder.add_meta_graph_and_variables(
                sess, ["serve"], signature_def_map={"serving_default": sig, "other": sig}
            )
            with tf.Graph().as_default():
                x2 = tf.placeholder(tf.float32, [None], name="x")
                sig2 = tf.saved_model.predict_signature_def({"x": x2}, {"x": x2})
                builder.add_meta_graph(["train", "gpu"], signature_def_map={"t": sig2})
            builder.save(as_text=as_text)


def _method_names(export_dir):
    sm = read_saved_model(export_dir)
    return [
        (
            list(mg.meta_info_def.tags),
            sorted((k, v.method_name) for k, v in mg.signature_def.items()),
        )
        for mg in sm.meta_graphs
    ]


def test_method_name_updater_as_tf(tmp_path):
    # Recorded from TF 2.21 (each call and message).
    d = str(tmp_path / "sm")
    _two_graph_saved_model(d)
    updater = tf.saved_model.signature_def_utils.MethodNameUpdater(d)
    updater.replace_method_name("serving_default", "tensorflow/serving/classify", tags=["serve"])
    for key, tags, message in [
        ("t", None, "MetaGraphDef associated with tags None does not have a signature_def "
         "with key: 't'. This means either"),
        ("nokey", "serve", "MetaGraphDef associated with tags ['serve'] does not have a "
         "signature_def with key: 'nokey'."),
        ("other", ["nope"], "MetaGraphDef associated with tags ['nope'] could not be found "
         "in SavedModel. This means either you specified invalid tags"),
        ("", "serve", "`signature_key` must be defined."),
    ]:  # fmt: skip
        with pytest.raises(ValueError) as info:
            updater.replace_method_name(key, "m2", tags=tags)
        assert str(info.value).startswith(message)
    with pytest.raises(ValueError, match="`method_name` must be defined."):
        updater.replace_method_name("other", "", tags="serve")
    updater.replace_method_name("other", "custom", tags="serve")
    updater.replace_method_name("t", "tm", tags=["gpu", "train"])
    updater.save()
    updater.save()
    assert sorted(os.listdir(d)) == ["saved_model.pb", "variables"]
    assert _method_names(d) == [
        (["serve"], [("other", "custom"), ("serving_default", "tensorflow/serving/classify")]),
        (["train", "gpu"], [("t", "tm")]),
    ]
    with tf.Graph().as_default(), tf.Session() as sess:
        meta = tf.saved_model.load(sess, ["serve"], d)
        assert meta.signature_def["other"].method_name == "custom"
    # A new directory must exist; only the SavedModel file goes there.
    with pytest.raises(tf.errors.NotFoundError):
        tf.saved_model.signature_def_utils.MethodNameUpdater(d).save(d + "_copy")
    os.makedirs(d + "_copy")
    tf.saved_model.signature_def_utils.MethodNameUpdater(d).save(d + "_copy")
    assert os.listdir(d + "_copy") == ["saved_model.pb"]
    with pytest.raises(OSError, match="SavedModel file does not exist at"):
        tf.saved_model.signature_def_utils.MethodNameUpdater(str(tmp_path / "none"))


def test_method_name_updater_keeps_text_form(tmp_path):
    # Recorded from TF 2.21: a saved_model.pbtxt is written back as .pbtxt.
    d = str(tmp_path / "smt")
    _two_graph_saved_model(d, as_text=True)
    updater = tf.saved_model.signature_def_utils.MethodNameUpdater(d)
    updater.replace_method_name("other", "new", tags=["serve"])
    updater.save()
    assert sorted(os.listdir(d)) == ["saved_model.pbtxt", "variables"]
    assert ("other", "new") in _method_names(d)[0][1]


def test_save_options_as_tf():
    # Recorded from TF 2.21.
    fields = tf.saved_model.SaveOptions.__slots__
    o = tf.saved_model.SaveOptions()
    assert [str(getattr(o, k)) for k in fields] == [
        "None", "False", "{}", "False", "None", "VariablePolicy.NONE", "True", "False",
        "False", "None", "None",
    ]  # fmt: skip
    o2 = tf.saved_model.SaveOptions(
        namespace_whitelist=["Foo", "Bar"], save_debug_info=True, function_aliases={"a": 1},
        experimental_io_device="/job:localhost",
        experimental_variable_policy="expand_distributed_variables", extra_tags=["x"],
    )  # fmt: skip
    assert [str(getattr(o2, k)) for k in fields] == [
        "['Foo', 'Bar']", "True", "{'a': 1}", "False", "/job:localhost",
        "VariablePolicy.EXPAND_DISTRIBUTED_VARIABLES", "True", "False", "False", "None",
        "['x']",
    ]  # fmt: skip
    with pytest.raises(TypeError, match="`namespace_whitelist` must be a list of strings"):
        tf.saved_model.SaveOptions(namespace_whitelist="Foo")
    with pytest.raises(ValueError, match="Whitelisted namespace must be a string. Got: 1"):
        tf.saved_model.SaveOptions(namespace_whitelist=[1])
    with pytest.raises(ValueError, match="Received invalid VariablePolicy value: bogus."):
        tf.saved_model.SaveOptions(experimental_variable_policy="bogus")
    with pytest.raises(ValueError, match="`experimental_image_format` is disabled in OSS"):
        tf.saved_model.SaveOptions(experimental_image_format=True)
    o.save_debug_info = True
    with pytest.raises(AttributeError):
        o.foo = 1


def test_asset_as_tf(tmp_path):
    # Recorded from TF 2.21: a CPU string constant named "asset_path".
    path = str(tmp_path / "vocab.txt")
    asset = tf.saved_model.Asset(path)
    assert asset.asset_path.name == "asset_path:0"
    assert asset.asset_path.dtype == tf.string
    assert asset.asset_path.device == "/device:CPU:*"
    assert _run(asset.asset_path)[0] == path.encode()
    with pytest.raises(TypeError, match="Expected string, but got 3 of type 'int'."):
        tf.saved_model.Asset(3)


# -- narrow dtypes: tf.dtypes.experimental / tf.experimental ----------------------------------

_E = tf.dtypes.experimental
# Recorded from TF 2.21: (name, DataType enum, is_floating, is_unsigned, min, max).
_NARROW = [
    ("float8_e4m3fn", 25, True, False, -448, 448),
    ("float8_e5m2", 24, True, False, -57344, 57344),
    ("float8_e4m3fnuz", 26, True, False, -240, 240),
    ("float8_e5m2fnuz", 28, True, False, -57344, 57344),
    ("float8_e4m3b11fnuz", 27, True, False, -30, 30),
    ("int4", 29, False, False, -8, 7),
    ("uint4", 30, False, True, 0, 15),
    ("int2", 31, False, False, -2, 1),
    ("uint2", 32, False, True, 0, 3),
    ("float4_e2m1fn", 33, True, False, -6, 6),
]


@pytest.mark.parametrize("name, enum, floating, unsigned, lo, hi", _NARROW)
def test_narrow_dtypes_as_tf(name, enum, floating, unsigned, lo, hi):
    import ml_dtypes

    d = getattr(_E, name)
    assert getattr(tf.experimental, name) is d
    assert not hasattr(tf, name)  # (TF 2.21's compat.v1 has none at the top level)
    assert (d.as_datatype_enum, d.name, repr(d), d.size) == (enum, name, f"tf.{name}", 1)
    assert (d.is_floating, d.is_integer, d.is_unsigned) == (floating, not floating, unsigned)
    assert d.as_numpy_dtype is getattr(ml_dtypes, name)
    assert tf.as_dtype(np.dtype(getattr(ml_dtypes, name))) is d
    assert tf.as_dtype(name) is d and tf.as_dtype(enum) is d
    assert d._as_ref.name == name + "_ref" and d.real_dtype is d
    assert (d.min, d.max) == (lo, hi)


# Recorded from TF 2.21: make_tensor_proto of [0.5, -1, 2, 1.5] (floats) or [1, -1, 0, 1]
# (|.| for unsigned), serialized; then of the first value alone, as a scalar.
_PROTOS = {
    "float8_e4m3fn": ("0819120412020804220430b8403c", "float8_val", b"0"),
    "float8_e5m2": ("0818120412020804220438bc403e", "float8_val", b"8"),
    "float8_e4m3fnuz": ("081a120412020804220438c04844", None, None),
    "float8_e5m2fnuz": ("081c12041202080422043cc04442", None, None),
    "float8_e4m3b11fnuz": ("081b120412020804220450d8605c", None, None),
    "int4": ("081d1204120208043a0d01ffffffffffffffffff010001", "int_val", [1]),
    "uint4": ("081e1204120208043a0401010001", "int_val", [1]),
    "int2": ("081f1204120208043a0d01ffffffffffffffffff010001", "int_val", [1]),
    "uint2": ("08201204120208043a0401010001", "int_val", [1]),
    "float4_e2m1fn": ("08211204120208042204010a0403", "float8_val", b"\x01"),
}


@pytest.mark.parametrize("name", sorted(_PROTOS))
def test_narrow_tensor_protos_as_tf(name):
    d = getattr(_E, name)
    serial, field, scalar = _PROTOS[name]
    vals = np.array([0.5, -1.0, 2.0, 1.5] if d.is_floating else [1, -1, 0, 1], np.float32)
    arr = (np.abs(vals) if d.is_unsigned else vals).astype(d.as_numpy_dtype)
    proto = tf.make_tensor_proto(arr)
    assert proto.SerializeToString().hex() == serial
    back = tf.make_ndarray(proto)
    assert back.dtype == arr.dtype and back.tolist() == arr.tolist()
    const = tf.constant(arr)
    assert const.op.get_attr("value").SerializeToString().hex() == serial
    assert _run(const)[0].tolist() == arr.tolist()
    if field is None:
        with pytest.raises(TypeError, match=f"Element type not supported in TensorProto: {name}."):
            tf.make_tensor_proto(arr[0])
        return
    one = tf.make_tensor_proto(arr[0])
    assert getattr(one, field) == (scalar if isinstance(scalar, bytes) else scalar)
    assert not one.tensor_content
    filled = tf.make_tensor_proto(arr[0], shape=[3])
    assert tf.make_ndarray(filled).tolist() == [arr[0].tolist()] * 3


# Recorded from TF 2.21's CPU Cast: which casts run ("Y") and which raise
# UnimplementedError ("N"), to the narrow type / from it, for each wide type.
_WIDE = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool"]
_CASTS = {
    "float8_e4m3fn": "YY YY YY YY NY NY NY NY NY",
    "float8_e5m2": "YY YY YY YY NY NY NY NY NY",
    "int4": "NN NN NN NN YY YY YY YY NN",
    "uint4": "NN NN NN NN YY YY YY YY NN",
}


@pytest.mark.parametrize("name", [n for n, *_ in _NARROW])
def test_narrow_casts_as_tf(name):
    d = getattr(_E, name)
    want = _CASTS.get(name, " ".join(["NN"] * len(_WIDE))).split()
    x = tf.placeholder(d, [2])
    pairs = []
    for wide_name, flags in zip(_WIDE, want):
        w = tf.as_dtype(wide_name)
        src = tf.placeholder(w, [2])
        pairs.append((flags[0], tf.cast(src, d), {src: np.array([1, 0]).astype(w.as_numpy_dtype)}))
        pairs.append((flags[1], tf.cast(x, w), {x: np.array([1, 0]).astype(d.as_numpy_dtype)}))
    with tf.Session() as sess:
        for flag, t, feed in pairs:
            if flag == "Y":
                assert np.asarray(sess.run(t, feed)).astype(np.float32).tolist() == [1.0, 0.0]
            else:
                with pytest.raises(tf.errors.UnimplementedError, match="is not supported"):
                    sess.run(t, feed)


def test_narrow_cast_values_as_tf():
    # Recorded from TF 2.21: integer casts to int4/uint4 keep the low bits; float8 rounds.
    i4 = tf.cast(tf.constant(np.array([-9, 17, 300], np.int32)), _E.int4)
    u4 = tf.cast(tf.constant(np.array([-1, 7, 0], np.int8)), _E.int4)
    u4 = tf.cast(u4, _E.uint4)
    f8 = tf.cast(tf.constant([-1.7, 2.5, 300.0]), _E.float8_e4m3fn)
    got = _run(i4, u4, f8)
    assert [g.tolist() for g in got] == [[7, 1, -4], [15, 7, 0], [-1.75, 2.5, 288.0]]
    with pytest.raises(TypeError, match="DataType float8_e4m3fn not in list of allowed values"):
        tf.add(f8, f8)
