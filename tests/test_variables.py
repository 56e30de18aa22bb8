"""Variables, collections, variable scopes and initializers (TF1 semantics)."""

from __future__ import annotations

import numpy as np
import pytest

from asyncflow import dtypes, errors, random_seed, variables
from asyncflow import graph as ops
from asyncflow import var_scope as vs
from asyncflow.graph import GraphKeys
from asyncflow.ops import array_ops, init_ops, math_ops, state_ops  # noqa: F401 - operators
from asyncflow.session import Session
from asyncflow.variables import Variable


@pytest.fixture(autouse=True)
def _fresh_graph():
    with ops.Graph().as_default() as g:
        yield g


def _init_and_run(fetches, feed_dict=None):
    with Session() as sess:
        sess.run(variables.global_variables_initializer())
        return sess.run(fetches, feed_dict)


# -- Variable ----------------------------------------------------------------------------------


def test_variable_graph_structure(_fresh_graph):
    v = Variable([1.0, 2.0], name="v")
    assert v.name == "v:0" and v.op.name == "v" and v.op.type == "VariableV2"
    assert v.initializer.name == "v/Assign" and v.initializer.type == "Assign"
    assert v.value().name == "v/read:0" and v.value().op.type == "Identity"
    assert v.initial_value.op.name == "v/initial_value"
    assert v.dtype == dtypes.float32._as_ref and v.dtype.base_dtype == dtypes.float32
    assert v.value().dtype == dtypes.float32
    assert v.shape == (2,) and v.get_shape() == (2,)
    assert v.graph is _fresh_graph and v.trainable
    assert v._ref()._is_ref and not v.value()._is_ref
    assert repr(v) == "<tf.Variable 'v:0' shape=(2,) dtype=float32_ref>"


def test_variable_names_are_unique_and_scoped():
    a = Variable(1.0)
    b = Variable(1.0)
    with ops.name_scope("outer"):
        c = Variable(1.0, name="c")
    assert [a.op.name, b.op.name, c.op.name] == ["Variable", "Variable_1", "outer/c"]
    assert c.initializer.name == "outer/c/Assign"


def test_variable_fetch_and_uninitialised():
    v = Variable([[1, 2], [3, 4]], name="v")
    with Session() as sess:
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized value v"):
            sess.run(v)
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(v), [[1, 2], [3, 4]])
        assert sess.run(v).dtype == np.int32


def test_variable_from_callable_and_tensor():
    a = Variable(lambda: array_ops.constant([3.0]), name="a")
    assert a.initial_value.op.name == "a/Initializer/Const"
    b = Variable(array_ops.constant([4.0]), name="b")
    c = Variable(np.float64(2.5), dtype=dtypes.float64, name="c")
    assert c.dtype.base_dtype == dtypes.float64
    got = _init_and_run([a, b, c])
    assert got[0].tolist() == [3.0] and got[1].tolist() == [4.0] and got[2] == 2.5


def test_variable_constructor_errors():
    with pytest.raises(ValueError, match="initial_value must be specified"):
        Variable()
    with pytest.raises(ValueError, match="must have a shape specified"):
        Variable(array_ops.placeholder(dtypes.float32))
    with pytest.raises(ValueError, match="collections argument"):
        Variable(1.0, collections="foo")
    with pytest.raises(ValueError, match="constraint"):
        Variable(1.0, constraint=3)


def test_variable_without_shape_validation():
    p = array_ops.placeholder(dtypes.float32)
    v = Variable(p, validate_shape=False, name="v")
    assert v.shape.ndims is None
    with Session() as sess:
        sess.run(v.initializer, {p: [1.0, 2.0, 3.0]})
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0, 3.0])


def test_variable_methods():
    v = Variable([1.0, 2.0], name="v")
    with Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(v.assign([5.0, 6.0])), [5.0, 6.0])
        np.testing.assert_array_equal(sess.run(v.assign_add([1.0, 1.0])), [6.0, 7.0])
        assert isinstance(v.assign_sub([1.0, 1.0], read_value=False), ops.Operation)
        sess.run(v.assign_sub([1.0, 1.0], read_value=False))
        np.testing.assert_array_equal(sess.run(v.read_value()), [5.0, 6.0])
        with sess.as_default():
            np.testing.assert_array_equal(v.eval(), [5.0, 6.0])
        v.load([9.0, 8.0], sess)
        np.testing.assert_array_equal(sess.run(v), [9.0, 8.0])


def test_variable_scatter_methods():
    class Slices:  # duck-typed IndexedSlices
        def __init__(self, values, indices):
            self.values, self.indices = values, indices

    v = Variable([1.0, 2.0, 3.0], name="v")
    with Session() as sess:
        sess.run(v.initializer)
        sess.run(v.scatter_update(Slices([7.0], [1])))
        sess.run(v.scatter_add(Slices([1.0, 1.0], [0, 0])))
        sess.run(v.scatter_sub(Slices([3.0], [2])))
        np.testing.assert_array_equal(sess.run(v), [3.0, 7.0, 0.0])
    with pytest.raises(TypeError, match="IndexedSlices"):
        v.scatter_update([1.0])


def test_variable_operators_and_conversion():
    v = Variable([1.0, 2.0], name="v")
    y = v * 2.0 + 1.0
    z = 10.0 - v
    neg = -v
    t = ops.convert_to_tensor(v)
    assert t is v.value()
    assert ops.convert_to_tensor(v, as_ref=True) is v._ref()
    got = _init_and_run([y, z, neg, v[1]])
    np.testing.assert_array_equal(got[0], [3.0, 5.0])
    np.testing.assert_array_equal(got[1], [9.0, 8.0])
    np.testing.assert_array_equal(got[2], [-1.0, -2.0])
    assert got[3] == 2.0


def test_initialized_value_chain():
    w1 = Variable(init_ops.random_normal_initializer()([3, 2]), name="w1")
    w2 = Variable(w1.initialized_value(), name="w2")
    w3 = Variable(w2.initialized_value() * 2.0, name="w3")
    a, b, c = _init_and_run([w1, w2, w3])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(c, 2 * a)


def test_initialized_value_after_update_is_current_value():
    w1 = Variable([1.0], name="w1")
    iv = w1.initialized_value()
    with Session() as sess:
        np.testing.assert_array_equal(sess.run(iv), [1.0])  # not initialised: initial value
        sess.run(w1.initializer)
        sess.run(w1.assign([5.0]))
        np.testing.assert_array_equal(sess.run(iv), [5.0])


def test_variable_in_control_dependencies_has_none():
    c = array_ops.constant(1.0)
    with ops.control_dependencies([c]):
        v = Variable(2.0, name="v")
    assert v.initializer.control_inputs == [] and v.op.control_inputs == []


# -- collections and initializers ------------------------------------------------------------


def test_collections():
    a = Variable(1.0, name="a")
    b = Variable(1.0, name="b", trainable=False)
    c = Variable(1.0, name="c", collections=[GraphKeys.LOCAL_VARIABLES], trainable=False)
    with ops.name_scope("s"):
        d = Variable(1.0, name="d")
    assert variables.global_variables() == [a, b, d]
    assert variables.trainable_variables() == [a, d]
    assert variables.local_variables() == [c]
    assert variables.global_variables(scope="s") == [d]
    assert variables.model_variables() == []
    assert variables.all_variables() == [a, b, d]


def test_global_and_local_initializers():
    g = Variable(1.0, name="g")
    loc = Variable(2.0, name="l", collections=[GraphKeys.LOCAL_VARIABLES])
    init = variables.global_variables_initializer()
    local_init = variables.local_variables_initializer()
    assert init.name == "init" and local_init.name == "init_1"
    with Session() as sess:
        sess.run(init)
        assert sess.run(g) == 1.0
        with pytest.raises(errors.FailedPreconditionError):
            sess.run(loc)
        sess.run(local_init)
        assert sess.run(loc) == 2.0


def test_variables_initializer_empty_and_subset():
    a = Variable(1.0, name="a")
    b = Variable(2.0, name="b")
    assert variables.variables_initializer([]).type == "NoOp"
    with Session() as sess:
        sess.run(variables.variables_initializer([b]))
        assert sess.run(b) == 2.0
        with pytest.raises(errors.FailedPreconditionError):
            sess.run(a)


def test_report_uninitialized_variables():
    a = Variable(1.0, name="a")
    b = Variable(2.0, name="b")
    report = variables.report_uninitialized_variables()
    assert report.dtype == dtypes.string and report.shape.as_list() == [None]
    empty = variables.report_uninitialized_variables([])
    with Session() as sess:
        assert list(sess.run(report)) == [b"a", b"b"]
        sess.run(a.initializer)
        assert list(sess.run(report)) == [b"b"]
        sess.run(b.initializer)
        assert list(sess.run(report)) == []
        assert list(sess.run(empty)) == []


def test_is_variable_initialized_and_assert():
    a = Variable(1.0, name="a")
    flag = variables.is_variable_initialized(a)
    check = variables.assert_variables_initialized()
    with Session() as sess:
        assert not sess.run(flag)
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized value a"):
            sess.run(check)
        sess.run(a.initializer)
        assert sess.run(flag)
        sess.run(check)


# -- variable_scope / get_variable --------------------------------------------------------------


def test_get_variable_names_and_sharing():
    with vs.variable_scope("foo"):
        with vs.variable_scope("bar"):
            v = vs.get_variable("v", [1])
    assert v.name == "foo/bar/v:0"
    with vs.variable_scope("foo", reuse=True):
        with vs.variable_scope("bar"):
            assert vs.get_variable("v", [1]) is v
    with vs.variable_scope("foo/bar", reuse=True):
        assert vs.get_variable("v") is v


def test_get_variable_reuse_errors():
    with vs.variable_scope("foo"):
        vs.get_variable("v", [1])
    with vs.variable_scope("foo"):
        with pytest.raises(
            ValueError,
            match=r"^Variable foo/v already exists, disallowed. Did you mean to set "
            r"reuse=True or reuse=tf.AUTO_REUSE in VarScope\?",
        ):
            vs.get_variable("v", [1])
    with vs.variable_scope("foo", reuse=True):
        with pytest.raises(
            ValueError,
            match=r"^Variable foo/w does not exist, or was not created with "
            r"tf.get_variable\(\). Did you mean to set reuse=tf.AUTO_REUSE in VarScope\?$",
        ):
            vs.get_variable("w", [1])


def test_get_variable_reuse_mismatches():
    with vs.variable_scope("foo"):
        vs.get_variable("v", [1, 2])
    with vs.variable_scope("foo", reuse=True):
        with pytest.raises(
            ValueError, match="Trying to share variable foo/v, but specified shape"
        ):
            vs.get_variable("v", [2, 2])
        with pytest.raises(ValueError, match="specified dtype int32 and found dtype float32"):
            vs.get_variable("v", [1, 2], dtype=dtypes.int32)


@pytest.mark.parametrize(
    "reuse,exists,outcome",
    [
        (None, False, "create"),
        (None, True, "error"),
        (False, True, "error"),
        (True, True, "reuse"),
        (True, False, "error"),
        (vs.AUTO_REUSE, False, "create"),
        (vs.AUTO_REUSE, True, "reuse"),
    ],
)
def test_reuse_matrix(reuse, exists, outcome):
    existing = None
    if exists:
        with vs.variable_scope("s"):
            existing = vs.get_variable("v", [2])
    with vs.variable_scope("s", reuse=reuse):
        if outcome == "error":
            with pytest.raises(ValueError):
                vs.get_variable("v", [2])
            return
        v = vs.get_variable("v", [2])
    assert (v is existing) == (outcome == "reuse")
    assert v.name == "s/v:0"


def test_reuse_is_inherited_and_reuse_variables():
    with vs.variable_scope("a") as scope:
        v = vs.get_variable("v", [1])
        assert scope.reuse is False
        scope.reuse_variables()
        assert vs.get_variable_scope().reuse is True
        assert vs.get_variable("v") is v
        with vs.variable_scope("inner", reuse=False):  # cannot switch inherited reuse off
            assert vs.get_variable_scope().reuse is True
    assert vs.get_variable_scope().reuse is False


def test_root_scope_does_not_reuse():
    vs.get_variable("v", [1])
    with pytest.raises(ValueError, match="already exists"):
        vs.get_variable("v", [1])


def test_scope_object_reentry_and_name_scopes():
    with vs.variable_scope("foo") as foo:
        a = array_ops.constant(1.0, name="c")
    with vs.variable_scope(foo, reuse=True) as foo2:
        b = array_ops.constant(1.0, name="c")
        assert foo2.name == "foo" and foo2.reuse is True
    with vs.variable_scope("outer"):
        with vs.variable_scope(foo) as jumped:
            assert jumped.name == "foo"
            v = vs.get_variable("v", [1])
    assert a.op.name == "foo/c" and b.op.name == "foo_1/c"
    assert v.name == "foo/v:0"
    assert foo.original_name_scope == "foo/"


def test_default_name_is_made_unique():
    names = []
    for _ in range(2):
        with vs.variable_scope(None, default_name="layer"):
            names.append(vs.get_variable("w", [1]).name)
    assert names == ["layer/w:0", "layer_1/w:0"]
    with pytest.raises(ValueError, match="reuse=True cannot be used without a name_or_scope"):
        with vs.variable_scope(None, default_name="x", reuse=True):
            pass
    with pytest.raises(TypeError, match="default_name is None"):
        vs.variable_scope(None)
    with pytest.raises(ValueError, match="reuse parameter"):
        vs.variable_scope("x", reuse=2)


def test_auxiliary_name_scope_false():
    with vs.variable_scope("foo", auxiliary_name_scope=False) as scope:
        c = array_ops.constant(1.0, name="c")
        v = vs.get_variable("v", [1])
    assert c.op.name == "c" and v.name == "foo/v:0" and scope.name == "foo"


def test_variables_ignore_name_scopes():
    with ops.name_scope("ns"):
        with vs.variable_scope("vs"):
            v = vs.get_variable("v", [1])
            c = array_ops.constant(1.0, name="c")
    assert v.name == "vs/v:0" and c.op.name == "ns/vs/c"


def test_default_initializers():
    f = vs.get_variable("f", [20, 30])
    i = vs.get_variable("i", [3], dtype=dtypes.int32)
    b = vs.get_variable("b", [2], dtype=dtypes.bool)
    assert f.initial_value.op.name.startswith("f/Initializer/random_uniform")
    fv, iv, bv = _init_and_run([f, i, b])
    limit = np.sqrt(6.0 / 50)
    assert fv.dtype == np.float32 and np.all(np.abs(fv) <= limit) and fv.std() > limit / 4
    assert iv.tolist() == [0, 0, 0] and bv.tolist() == [False, False]
    with pytest.raises(ValueError, match="An initializer for variable c of"):
        vs.get_variable("c", [1], dtype=dtypes.complex64)


def test_scope_initializer_and_dtype_inheritance():
    with vs.variable_scope("s", initializer=init_ops.constant_initializer(3.0)):
        a = vs.get_variable("a", [2])
        with vs.variable_scope("t", dtype=dtypes.float64):
            b = vs.get_variable("b", [1])
            c = vs.get_variable("c", [1], initializer=init_ops.ones_initializer())
    assert b.dtype.base_dtype == dtypes.float64
    av, bv, cv = _init_and_run([a, b, c])
    assert av.tolist() == [3.0, 3.0] and bv.tolist() == [3.0] and cv.tolist() == [1.0]


def test_get_variable_from_value():
    v = vs.get_variable("v", initializer=[1, 2, 3])
    assert v.dtype.base_dtype == dtypes.int32 and v.shape == (3,)
    t = vs.get_variable("t", initializer=array_ops.constant([1.5]))
    with pytest.raises(ValueError, match="do not specify shape"):
        vs.get_variable("w", [3], initializer=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="don't match"):
        vs.get_variable("x", initializer=[1, 2], dtype=dtypes.float32)
    vv, tv = _init_and_run([v, t])
    assert vv.tolist() == [1, 2, 3] and tv.tolist() == [1.5]


def test_get_variable_trainable_collections_and_local():
    a = vs.get_variable("a", [1], trainable=False)
    b = vs.get_variable("b", [1], collections=["mine"])
    c = vs.get_local_variable("c", [1])
    assert variables.trainable_variables() == [b]
    assert variables.global_variables() == [a]
    assert ops.get_collection("mine") == [b]
    assert variables.local_variables() == [c]


def test_regularizer_adds_loss():
    seen = []

    def reg(v):
        seen.append(v)
        return math_ops.multiply(v, 2.0)

    with vs.variable_scope("s", regularizer=reg):
        v = vs.get_variable("v", [1], initializer=init_ops.ones_initializer())
        vs.get_variable("u", [1], regularizer=vs.no_regularizer)
    losses = ops.get_collection(GraphKeys.REGULARIZATION_LOSSES)
    assert seen == [v] and len(losses) == 1
    assert losses[0].op.name.startswith("s/v/Regularizer/")
    assert _init_and_run(losses[0]).tolist() == [2.0]


def test_custom_getters_compose():
    calls = []

    def outer(getter, name, *args, **kwargs):
        calls.append(("outer", name))
        return getter(name, *args, **kwargs)

    def inner(getter, name, *args, **kwargs):
        calls.append(("inner", name))
        kwargs["trainable"] = False
        return getter(name, *args, **kwargs)

    with vs.variable_scope("a", custom_getter=outer):
        with vs.variable_scope("b", custom_getter=inner):
            v = vs.get_variable("v", [1])
    assert calls == [("inner", "a/b/v"), ("outer", "a/b/v")]
    assert not v.trainable
    with pytest.raises(ValueError, match="not callable"):
        vs.get_variable("w", [1], custom_getter=3)


def test_scope_collections():
    with vs.variable_scope("s") as s:
        v = vs.get_variable("v", [1])
        u = vs.get_variable("u", [1], trainable=False)
    vs.get_variable("other", [1])
    assert s.global_variables() == [v, u] and s.trainable_variables() == [v]


def test_scope_stores_are_per_graph():
    with vs.variable_scope("s"):
        vs.get_variable("v", [1])
    with ops.Graph().as_default():
        with vs.variable_scope("s"):
            assert vs.get_variable("v", [1]).name == "s/v:0"
        assert vs.get_variable_scope().name == ""


# -- initializers ------------------------------------------------------------------------------


def _sample(init, shape, dtype=dtypes.float32):
    with Session() as sess:
        return sess.run(init(shape, dtype=dtype))


@pytest.mark.parametrize(
    "init,dtype,expected",
    [
        (init_ops.zeros_initializer(), dtypes.float32, 0.0),
        (init_ops.zeros_initializer(dtype=dtypes.int64), dtypes.int64, 0),
        (init_ops.ones_initializer(), dtypes.float64, 1.0),
        (init_ops.constant_initializer(2.5), dtypes.float32, 2.5),
    ],
)
def test_constant_initializers(init, dtype, expected):
    value = _sample(init, [2, 3], dtype)
    assert value.shape == (2, 3) and value.dtype == dtype.as_numpy_dtype
    assert np.all(value == expected)


def test_constant_initializer_lists():
    value = _sample(init_ops.constant_initializer([1, 2, 3]), [2, 3])
    np.testing.assert_array_equal(value, [[1, 2, 3], [3, 3, 3]])
    # TF 2.21: ValueError "Too many elements provided. Takes at most 2, but got 3."
    with pytest.raises(ValueError, match="Takes at most 2, but got 3"):
        init_ops.constant_initializer([1, 2, 3])([2])
    with pytest.raises(TypeError):
        init_ops.constant_initializer([1, 2], verify_shape=True)([3])


@pytest.mark.parametrize(
    "init,shape,check",
    [
        (
            init_ops.random_uniform_initializer(-2.0, 3.0),
            [4000],
            lambda x: x.min() >= -2 and x.max() < 3 and abs(x.mean() - 0.5) < 0.15,
        ),
        (
            init_ops.random_normal_initializer(1.0, 2.0),
            [4000],
            lambda x: abs(x.mean() - 1) < 0.2 and abs(x.std() - 2) < 0.2,
        ),
        (
            init_ops.truncated_normal_initializer(0.0, 1.0),
            [4000],
            lambda x: np.abs(x).max() <= 2 and abs(x.std() - 0.88) < 0.1,
        ),
        # Uniform limits are float32 values: float32(sqrt(6/300)) lies above the float64
        # root, and a draw of exactly 0 lands on -float32(limit) (about once in 800 runs).
        (
            init_ops.glorot_uniform_initializer(),
            [100, 200],
            lambda x: (
                np.abs(x).max() <= np.float32(np.sqrt(6 / 300))
                and abs(x.std() - np.sqrt(2 / 300)) < 0.01
            ),
        ),
        (
            init_ops.glorot_normal_initializer(),
            [100, 200],
            lambda x: abs(x.std() - np.sqrt(2 / 300)) < 0.01,
        ),
        (
            init_ops.variance_scaling_initializer(2.0, "fan_in", "untruncated_normal"),
            [50, 400],
            lambda x: abs(x.std() - np.sqrt(2 / 50)) < 0.02,
        ),
        (
            init_ops.variance_scaling_initializer(1.0, "fan_out", "uniform"),
            [3, 3, 8, 16],
            lambda x: np.abs(x).max() <= np.float32(np.sqrt(3 / 144)),
        ),
        (
            init_ops.uniform_unit_scaling_initializer(),
            [300, 10],
            lambda x: np.abs(x).max() <= np.float32(np.sqrt(3 / 300)),
        ),
        (init_ops.he_normal(), [100, 100], lambda x: abs(x.std() - np.sqrt(2 / 100)) < 0.02),
        (
            init_ops.orthogonal_initializer(),
            [6, 4],
            lambda x: np.allclose(x.T @ x, np.eye(4), atol=1e-5),
        ),
    ],
)
def test_random_initializers(init, shape, check):
    value = _sample(init, shape)
    assert value.shape == tuple(shape) and value.dtype == np.float32
    assert check(value)


def test_initializer_argument_errors():
    with pytest.raises(ValueError):
        init_ops.random_normal_initializer(dtype=dtypes.int32)
    with pytest.raises(ValueError):
        init_ops.variance_scaling_initializer(scale=0.0)
    with pytest.raises(ValueError):
        init_ops.variance_scaling_initializer(mode="fan_x")
    with pytest.raises(ValueError):
        init_ops.variance_scaling_initializer(distribution="cauchy")


def test_initializer_config_round_trip():
    init = init_ops.variance_scaling_initializer(2.0, "fan_avg", "uniform", seed=3)
    again = init_ops.variance_scaling_initializer.from_config(init.get_config())
    assert again.get_config() == init.get_config()


def test_seeded_initializer_is_reproducible():
    a = vs.get_variable("a", [5], initializer=init_ops.random_uniform_initializer(seed=4))
    b = vs.get_variable("b", [5], initializer=init_ops.random_uniform_initializer(seed=4))
    av, bv = _init_and_run([a, b])
    np.testing.assert_array_equal(av, bv)


def test_orthogonal_initializer_follows_the_graph_seed():
    def draw(graph_seed, op_seed=None):
        with ops.Graph().as_default():
            if graph_seed is not None:
                random_seed.set_random_seed(graph_seed)
            return _sample(init_ops.orthogonal_initializer(seed=op_seed), [6, 4])

    a, b = draw(3), draw(3)
    np.testing.assert_array_equal(a, b)  # a graph seed alone reproduces the matrix
    assert not np.array_equal(a, draw(4))
    np.testing.assert_array_equal(draw(None, 7), draw(None, 7))
    np.testing.assert_allclose(a.T @ a, np.eye(4), atol=1e-5)


def test_variable_count_up_to():
    # TF 2.21 (ref variable 0, limit 2): op CountUpTo returns 0, then 1, then raises
    # OutOfRangeError "Reached limit of 2".
    with ops.Graph().as_default():
        v = Variable(0, dtype=dtypes.int32)
        c = v.count_up_to(2)
        assert c.op.type == "CountUpTo"
        with Session() as sess:
            sess.run(v.initializer)
            assert [sess.run(c), sess.run(c)] == [0, 1]
            with pytest.raises(errors.OutOfRangeError, match="Reached limit of 2"):
                sess.run(c)


def test_ops_on_a_ref_are_colocated_with_their_variable():
    # TF 2.21 (ref variables): assign, assign_add and scatter_update on v have
    # colocation_groups() == [b"loc:@v"]; an assign built under another device scope
    # takes the variable's device.
    import asyncflow as af

    with ops.Graph().as_default():
        with af.device("/cpu:0"):
            v = Variable(1.0, name="v")
        w = Variable([1.0, 2.0], name="w")
        with af.device("/cpu:1"):
            a = state_ops.assign(v, 2.0)
        assert a.op.colocation_groups() == [b"loc:@v"] and a.op.device.endswith("CPU:0")
        assert v.assign_add(1.0).op.colocation_groups() == [b"loc:@v"]
        assert state_ops.scatter_update(w, [0], [3.0]).op.colocation_groups() == [b"loc:@w"]


def test_variable_to_proto_and_from_proto_match_tf():
    # TF 2.21: Variable(1.0, name="v").to_proto() is VariableDef(variable_name "v:0",
    # initializer_name "v/Assign", snapshot_name "v/read:0", initial_value_name
    # "v/initial_value:0", trainable); from_proto rebuilds a variable named "v:0".
    with ops.Graph().as_default():
        v = Variable(1.0, name="v")
        vd = v.to_proto()
        assert type(vd).__name__ == "VariableDef"
        assert (vd.variable_name, vd.initializer_name, vd.snapshot_name) == (
            "v:0", "v/Assign", "v/read:0",
        )  # fmt: skip
        assert vd.initial_value_name == "v/initial_value:0" and vd.trainable
        v2 = Variable.from_proto(vd)
        assert (v2.name, v2.initializer.name, v2.op.name) == ("v:0", "v/Assign", "v")
        with Session() as sess:
            sess.run(v2.initializer)
            assert sess.run(v2) == 1.0
