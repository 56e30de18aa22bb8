"""Random ops: shapes, dtypes, moments, ranges and TF1's seeding rules."""

from __future__ import annotations

import numpy as np
import pytest

from asyncflow import dtypes, errors, random_seed
from asyncflow import graph as ops
from asyncflow.ops import array_ops, random_ops
from asyncflow.session import Session


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _run(fetches, feed_dict=None):
    with Session() as sess:
        return sess.run(fetches, feed_dict)


# -- get_seed ------------------------------------------------------------------------------


def test_get_seed_rules():
    g = ops.get_default_graph()
    assert random_seed.get_seed(None) == (None, None)
    assert random_seed.get_seed(5) == (random_seed.DEFAULT_GRAPH_SEED, 5)
    random_seed.set_random_seed(7)
    assert g.seed == 7
    assert random_seed.get_seed(3) == (7, 3)
    array_ops.constant(1.0)
    # TF 2.21 counts unseeded requests per graph (not the graph's ops, as TF 1.x did).
    assert random_seed.get_seed(None) == (7, 0)
    assert random_seed.get_seed(None) == (7, 1)
    random_seed.set_random_seed(0)
    assert random_seed.get_seed(0) == (0, 2**31 - 1)
    assert random_seed.get_seed(2**31 + 4) == (0, 5)  # truncated to 31 bits


def test_seed_attrs():
    g = ops.get_default_graph()
    random_ops.random_uniform([2])
    raw = g.get_operation_by_name("random_uniform/RandomUniform")
    assert (raw.get_attr("seed"), raw.get_attr("seed2")) == (0, 0)
    random_ops.random_normal([2], seed=4)
    raw = g.get_operation_by_name("random_normal/RandomStandardNormal")
    assert (raw.get_attr("seed"), raw.get_attr("seed2")) == (random_seed.DEFAULT_GRAPH_SEED, 4)


# -- shapes, dtypes, names -------------------------------------------------------------------

_BUILDERS = [
    ("uniform", lambda shape, dt: random_ops.random_uniform(shape, dtype=dt), "RandomUniform"),
    ("normal", lambda shape, dt: random_ops.random_normal(shape, dtype=dt),
     "RandomStandardNormal"),
    ("truncated", lambda shape, dt: random_ops.truncated_normal(shape, dtype=dt),
     "TruncatedNormal"),
]  # fmt: skip


@pytest.mark.parametrize("kind,build,op_type", _BUILDERS, ids=[b[0] for b in _BUILDERS])
@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.float32, dtypes.float64])
@pytest.mark.parametrize("shape", [[], [3], [2, 0], [2, 3, 4]])
def test_float_shapes_and_dtypes(kind, build, op_type, dtype, shape):
    t = build(shape, dtype)
    assert t.dtype == dtype
    assert t.shape.as_list() == shape
    assert any(op.type == op_type for op in ops.get_default_graph().get_operations())
    v = _run(t)
    assert v.dtype == dtype.as_numpy_dtype and v.shape == tuple(shape)


def test_builder_names_follow_tf():
    # TF 2.21: bounds 0 and 1 leave the draw as it is
    assert random_ops.random_uniform([2]).name == "random_uniform/RandomUniform:0"
    assert random_ops.random_uniform([2], 0.0, 1.0).name == "random_uniform_1:0"
    assert random_ops.random_normal([2], name="noise").name == "noise:0"
    assert random_ops.truncated_normal([2]).name == "truncated_normal:0"
    assert random_ops.random_uniform([2], maxval=3, dtype=dtypes.int32).name == (
        "random_uniform_2:0"
    )
    g = ops.get_default_graph()
    assert g.get_operation_by_name("random_uniform/RandomUniform").type == "RandomUniform"


def test_shape_from_tensor_and_placeholder():
    s = array_ops.placeholder(dtypes.int32, [2])
    t = random_ops.random_uniform(s)
    assert t.shape.as_list() == [None, None]
    assert _run(t, {s: [3, 5]}).shape == (3, 5)
    t64 = random_ops.random_normal(array_ops.constant([4], dtype=dtypes.int64))
    assert t64.shape.as_list() == [4]


def test_bad_shape_and_dtype_arguments():
    with pytest.raises(TypeError):
        random_ops.random_uniform(array_ops.constant([2.0]))
    with pytest.raises(ValueError):
        random_ops.random_uniform(array_ops.constant([[2]]))
    with pytest.raises(ValueError, match="Invalid dtype"):
        random_ops.random_uniform([2], dtype=dtypes.string)
    with pytest.raises(ValueError, match="Must specify maxval for integer dtype"):
        random_ops.random_uniform([2], dtype=dtypes.int32)
    with pytest.raises(ValueError):
        random_ops.random_normal([2], dtype=dtypes.int32)
    s = array_ops.placeholder(dtypes.int32)
    t = random_ops.random_uniform(s)
    with pytest.raises(errors.InvalidArgumentError, match="shape must be a vector"):
        _run(t, {s: [[2]]})
    with pytest.raises(errors.InvalidArgumentError, match="Dimension -2 must be >= 0"):
        _run(t, {s: [-2]})


# -- values --------------------------------------------------------------------------------


def test_uniform_moments_and_range():
    v = _run(random_ops.random_uniform([20000], minval=-2.0, maxval=6.0, seed=1))
    assert v.min() >= -2.0 and v.max() < 6.0
    assert abs(v.mean() - 2.0) < 0.1
    assert abs(v.var() - 64.0 / 12) < 0.3


def test_half_uniform_stays_below_one():
    v = _run(random_ops.random_uniform([50000], dtype=dtypes.float16, seed=3))
    assert v.max() < 1.0 and v.min() >= 0.0


def test_normal_moments():
    v = _run(random_ops.random_normal([20000], mean=3.0, stddev=2.0, seed=2))
    assert abs(v.mean() - 3.0) < 0.1
    assert abs(v.std() - 2.0) < 0.1


def test_truncated_normal_bound_and_moments():
    v = _run(random_ops.truncated_normal([20000], mean=1.0, stddev=3.0, seed=5))
    assert np.all(np.abs(v - 1.0) <= 2 * 3.0 + 1e-5)
    assert abs(v.mean() - 1.0) < 0.1
    # The standard normal truncated at +-2 has stddev ~0.8796.
    assert abs(v.std() - 3.0 * 0.8796) < 0.1


@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.int64])
def test_uniform_int_range(dtype):
    t = random_ops.random_uniform([5000], minval=-3, maxval=4, dtype=dtype, seed=9)
    assert t.dtype == dtype and t.op.type == "RandomUniformInt"
    v = _run(t)
    assert v.dtype == dtype.as_numpy_dtype
    assert v.min() >= -3 and v.max() < 4
    assert set(np.unique(v)) == set(range(-3, 4))


def test_uniform_int_bad_range():
    lo = array_ops.placeholder(dtypes.int32, [])
    t = random_ops.random_uniform([3], minval=lo, maxval=5, dtype=dtypes.int32)
    with pytest.raises(errors.InvalidArgumentError, match="Need minval < maxval, got 5 >= 5"):
        _run(t, {lo: 5})
    empty = random_ops.random_uniform([0], minval=lo, maxval=5, dtype=dtypes.int32)
    assert _run(empty, {lo: 9}).shape == (0,)


@pytest.mark.parametrize("value", [
    np.arange(10),
    np.arange(24, dtype=np.float32).reshape(6, 4),
    np.array([b"a", b"b", b"c", b"d"], dtype=object),
])  # fmt: skip
def test_shuffle_is_permutation_of_first_dim(value):
    t = random_ops.random_shuffle(value, seed=11)
    assert t.shape.as_list() == list(value.shape)
    v = _run(t)
    rows = sorted(map(lambda r: np.asarray(r).tobytes(), v))
    assert rows == sorted(map(lambda r: np.asarray(r).tobytes(), value))


def test_shuffle_scalar_and_single_row_pass_through():
    assert _run(random_ops.random_shuffle(5.0)) == 5.0
    np.testing.assert_array_equal(_run(random_ops.random_shuffle([[1, 2]])), [[1, 2]])


def test_multinomial():
    logits = np.array([[0.0, 0.0, -np.inf], [-np.inf, -np.inf, 0.0]])
    t = random_ops.multinomial(logits, 2000, seed=4)
    assert t.dtype == dtypes.int64 and t.shape.as_list() == [2, 2000]
    v = _run(t)
    assert set(np.unique(v[0])) == {0, 1}
    assert abs(v[0].mean() - 0.5) < 0.1
    assert np.all(v[1] == 2)
    t32 = random_ops.multinomial([[0.0]], 3, output_dtype=dtypes.int32)
    assert _run(t32).dtype == np.int32


# -- reproducibility -----------------------------------------------------------------------


def _program(graph_seed, op_seed=None):
    g = ops.Graph()
    with g.as_default():
        if graph_seed is not None:
            random_seed.set_random_seed(graph_seed)
        a = random_ops.random_uniform([4], seed=op_seed)
        b = random_ops.random_normal([4], seed=op_seed)
        with Session(graph=g) as sess:
            return sess.run([a, b]), sess.run([a, b])


def test_graph_seed_reproduces_across_fresh_graphs_and_sessions():
    first, second = _program(42)
    again_first, again_second = _program(42)
    for x, y in zip(first + second, again_first + again_second, strict=True):
        np.testing.assert_array_equal(x, y)
    # Successive runs of one op continue its stream.
    assert not np.array_equal(first[0], second[0])
    other, _ = _program(43)
    assert not np.array_equal(first[0], other[0])


def test_op_seed_alone_reproduces():
    first, _ = _program(None, op_seed=7)
    again, _ = _program(None, op_seed=7)
    np.testing.assert_array_equal(first[0], again[0])


def test_ops_with_different_seeds_differ():
    random_seed.set_random_seed(1)
    a = random_ops.random_uniform([8], seed=1)
    b = random_ops.random_uniform([8], seed=2)
    c = random_ops.random_uniform([8])
    d = random_ops.random_uniform([8])
    va, vb, vc, vd = _run([a, b, c, d])
    assert not np.array_equal(va, vb)
    assert not np.array_equal(vc, vd)


def test_unseeded_differs_across_sessions():
    t = random_ops.random_uniform([8])
    assert not np.array_equal(_run(t), _run(t))


def test_one_seeded_op_restarts_in_a_new_session():
    t = random_ops.random_uniform([8], seed=3)
    np.testing.assert_array_equal(_run(t), _run(t))
