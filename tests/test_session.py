"""Session semantics, checked against tf.compat.v1's documented behaviour."""

import collections
import inspect
import os

import numpy as np
import pytest
from _testing_ops import count_op, wait_op

import asyncflow as af
from asyncflow import errors
from asyncflow.ops.array_ops import constant, identity, placeholder
from asyncflow.ops.control_flow_ops import no_op

pytestmark = pytest.mark.usefixtures("graph")

Pair = collections.namedtuple("Pair", ["first", "second"])


def _line() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


# -- fetch structures ------------------------------------------------------------------


@pytest.fixture
def abc():
    a = constant(1.0, name="a")
    b = constant([2, 3], dtype=af.int32, name="b")
    c = constant("s", name="c")
    return a, b, c


def test_fetch_single_tensor_and_list(sess, abc):
    a, b, c = abc
    assert sess.run(a) == 1.0
    out = sess.run([a, b])
    assert isinstance(out, list) and len(out) == 2
    np.testing.assert_array_equal(out[1], [2, 3])
    assert out[1].dtype == np.int32
    assert sess.run(c) == b"s"


def test_fetch_tuple_dict_ordereddict_namedtuple(sess, abc):
    a, b, _ = abc
    t = sess.run((a, b))
    assert isinstance(t, tuple) and t[0] == 1.0
    d = sess.run({"x": a, "y": b})
    assert type(d) is dict and set(d) == {"x", "y"} and d["x"] == 1.0
    od = sess.run(collections.OrderedDict([("y", b), ("x", a)]))
    assert type(od) is collections.OrderedDict and list(od) == ["y", "x"]
    p = sess.run(Pair(a, b))
    assert type(p) is Pair and p.first == 1.0
    np.testing.assert_array_equal(p.second, [2, 3])


def test_fetch_nested_mix(sess, abc):
    a, b, c = abc
    out = sess.run({"l": [a, (b, {"deep": c})], "p": Pair(first=[a], second={"z": b})})
    assert out["l"][0] == 1.0
    assert isinstance(out["l"][1], tuple)
    np.testing.assert_array_equal(out["l"][1][0], [2, 3])
    assert out["l"][1][1] == {"deep": b"s"}
    assert isinstance(out["p"], Pair) and out["p"].first == [1.0]
    np.testing.assert_array_equal(out["p"].second["z"], [2, 3])
    assert sess.run([]) == [] and sess.run({}) == {} and sess.run(()) == ()


def test_fetch_operations_give_none(sess, abc):
    a, _, _ = abc
    op = no_op(name="nothing")
    assert sess.run(op) is None
    assert sess.run([a, op, a.op]) == [1.0, None, None]
    assert sess.run("nothing") is None


def test_fetch_by_name(sess, abc):
    assert sess.run("a:0") == 1.0
    out = sess.run({"b": "b:0", "op": "a"})
    np.testing.assert_array_equal(out["b"], [2, 3])
    assert out["op"] is None


def test_duplicate_fetches(sess, probes):
    counter = probes.counter()
    x = count_op(constant(4.0), counter)
    assert sess.run([x, x, (x,)]) == [4.0, 4.0, (4.0,)]
    assert sess.run({"a": x, "b": [x, x.op]}) == {"a": 4.0, "b": [4.0, None]}
    assert counter.n == 2  # once per step, however often it is fetched


def test_scalar_fetch_is_numpy_scalar(sess):
    v = sess.run(constant(2.5))
    assert type(v) is np.float32 and v == 2.5
    i = sess.run(constant(7, dtype=af.int64))
    assert type(i) is np.int64
    x = placeholder(af.float64, [])
    fed = sess.run(identity(x), {x: 1.5})
    assert type(fed) is np.float64


# -- feeds -----------------------------------------------------------------------------


def test_fetching_a_fed_tensor_returns_the_feed(sess, probes):
    counter = probes.counter()
    c = count_op(constant([1.0, 2.0]), counter)
    out = sess.run(c, {c: [5.0, 6.0]})
    np.testing.assert_array_equal(out, [5.0, 6.0])
    assert out.dtype == np.float32
    assert counter.n == 0  # its producer did not run
    x = placeholder(af.int32, [None])
    np.testing.assert_array_equal(sess.run(x, {x: [1, 2, 3]}), [1, 2, 3])


def test_feeding_intermediate_prunes_producers(sess, probes):
    counter = probes.counter()
    x = placeholder(af.float32, [2], name="unfed")
    mid = count_op(identity(identity(x)), counter)
    y = identity(identity(mid))
    # The placeholder is not fed and would fail; feeding `mid` must prune it away.
    np.testing.assert_array_equal(sess.run(y, {mid: [3.0, 4.0]}), [3.0, 4.0])
    np.testing.assert_array_equal(sess.run(y, {"unfed:0": [1.0, 2.0]}), [1.0, 2.0])
    assert counter.n == 1  # only in the second step
    with pytest.raises(errors.InvalidArgumentError, match="unfed"):
        sess.run(y)


def test_partial_execution_needs_only_its_placeholders(sess):
    a = placeholder(af.float32, [], name="a")
    b = placeholder(af.float32, [], name="b")
    ia, ib = identity(a), identity(b)
    assert sess.run(ia, {a: 1.0}) == 1.0
    assert sess.run(ib, {b: 2.0}) == 2.0
    assert sess.run([ia, ib], {a: 3.0, b: 4.0}) == [3.0, 4.0]


def test_feed_by_name_and_fed_constant(sess):
    c = constant(1.0, name="k")
    y = identity(c)
    assert sess.run(y, {"k:0": 9.0}) == 9.0
    assert sess.run(y) == 1.0


def test_feed_wrong_shape_names_tensor_and_shapes(sess):
    x = placeholder(af.float32, [2, 3], name="img")
    with pytest.raises(ValueError) as ei:
        sess.run(x, {x: np.zeros((3, 2))})
    msg = str(ei.value)
    assert "img:0" in msg and "(3, 2)" in msg and str(x.shape) in msg


def test_feed_int_overflowing_int32_is_type_error(sess):
    x = placeholder(af.int32, [], name="i")
    with pytest.raises(TypeError, match="int32|compatible"):
        sess.run(x, {x: 2**31})
    with pytest.raises(TypeError):
        sess.run(x, {x: -(2**31) - 1})
    with pytest.raises(TypeError):
        sess.run(x, {x: 2**70})  # beyond int64 too: still TypeError, not OverflowError
    xs = placeholder(af.int32, [2], name="xs")
    with pytest.raises(TypeError, match="xs:0"):
        sess.run(xs, {xs: [1, 2**40]})
    assert sess.run(x, {x: 2**31 - 1}) == 2**31 - 1
    assert sess.run(x, {x: -(2**31)}) == -(2**31)
    f = placeholder(af.float32, [])
    assert sess.run(f, {f: 2**70}) == np.float32(2**70)  # TF compares float32(v) == v


def test_feed_value_that_is_a_tensor_is_type_error(sess):
    x = placeholder(af.float32, [])
    with pytest.raises(TypeError, match="cannot be a tf.Tensor"):
        sess.run(x, {x: constant(1.0)})


def test_feed_key_not_in_graph(sess):
    x = placeholder(af.float32, [])
    with pytest.raises(TypeError, match="nope"):
        sess.run(x, {"nope:0": 1.0})
    other = af.Graph()
    with other.as_default():
        y = placeholder(af.float32, [])
    with pytest.raises(TypeError):
        sess.run(x, {y: 1.0})


def test_missing_feed_names_placeholder_and_user_line(sess):
    x = placeholder(af.float32, [2], name="needed")
    line = _line() - 1
    y = identity(identity(x))
    with pytest.raises(errors.InvalidArgumentError) as ei:
        sess.run(y)
    msg = str(ei.value)
    assert "needed" in msg
    assert f"{os.path.basename(__file__)}:{line}" in msg
    assert ei.value.op is x.op


# -- fetch errors ------------------------------------------------------------------------


def test_fetch_nonexistent_name(sess):
    with pytest.raises((KeyError, ValueError), match="nope"):
        sess.run("nope:0")
    with pytest.raises((KeyError, ValueError), match="nope"):
        sess.run("nope")
    constant(1.0, name="one")
    with pytest.raises((KeyError, ValueError)):
        sess.run("one:3")


def test_fetch_invalid_types(sess):
    with pytest.raises(TypeError):
        sess.run(None)
    with pytest.raises(TypeError):
        sess.run(3)
    with pytest.raises(TypeError):
        sess.run([constant(1.0), object()])


def test_session_graph_rejects_other_graphs_tensors(graph):
    other = af.Graph()
    with other.as_default():
        foreign = constant(1.0)
    s = af.Session(graph=graph)
    try:
        with pytest.raises(ValueError):
            s.run(foreign)
        with pytest.raises(ValueError):
            s.run([constant(2.0), foreign])
        assert s.run(constant(3.0)) == 3.0
    finally:
        s.close()
    with af.Session(graph=other) as s2:
        assert s2.graph is other
        assert s2.run(foreign) == 1.0


def test_session_graph_argument_type_checked():
    with pytest.raises(TypeError):
        af.Session(graph=object())


# -- the session stays usable after every kind of error ------------------------------


def _bad_fetch_name(sess, x):
    sess.run("missing:0")


def _bad_fetch_type(sess, x):
    sess.run(object())


def _bad_feed_shape(sess, x):
    sess.run(x, {x: [1.0, 2.0]})


def _bad_feed_overflow(sess, x):
    sess.run(x, {placeholder(af.int32, []): 2**40})


def _bad_feed_tensor(sess, x):
    sess.run(x, {x: constant(1.0)})


def _missing_feed(sess, x):
    sess.run(x)


def _foreign_tensor(sess, x):
    with af.Graph().as_default():
        t = constant(1.0)
    sess.run(t)


@pytest.mark.parametrize(
    "provoke, expected",
    [
        (_bad_fetch_name, (KeyError, ValueError)),
        (_bad_fetch_type, TypeError),
        (_bad_feed_shape, ValueError),
        (_bad_feed_overflow, TypeError),
        (_bad_feed_tensor, TypeError),
        (_missing_feed, errors.InvalidArgumentError),
        (_foreign_tensor, ValueError),
    ],
)
def test_session_usable_after_error(sess, provoke, expected):
    x = placeholder(af.float32, [], name="x")
    y = identity(x)
    assert sess.run(y, {x: 1.0}) == 1.0
    with pytest.raises(expected):
        provoke(sess, x)
    assert sess.run(y, {x: 2.0}) == 2.0
    assert sess.run(constant(5)) == 5


# -- make_callable ---------------------------------------------------------------------


def test_make_callable_with_feed_list(sess):
    a = placeholder(af.float32, [], name="a")
    b = placeholder(af.float32, [], name="b")
    f = sess.make_callable({"a": identity(a), "both": [a, b]}, feed_list=[a, "b:0"])
    assert f(1.0, 2.0) == {"a": 1.0, "both": [1.0, 2.0]}
    assert f(3.0, 4.0)["both"] == [3.0, 4.0]
    with pytest.raises(TypeError):
        f(1.0)
    g = sess.make_callable(constant(7))
    assert g() == 7
    op_call = sess.make_callable(no_op())
    assert op_call() is None


def test_make_callable_accept_options(sess, probes):
    w = probes.waiter()
    x = placeholder(af.float32, [])
    y = wait_op(x, w)
    f = sess.make_callable(y, feed_list=[x], accept_options=True)
    opts = af.RunOptions(timeout_in_ms=50)
    with pytest.raises(errors.DeadlineExceededError):
        f(1.0, options=opts, run_metadata=af.RunMetadata())
    w.release()
    assert f(2.0, options=opts) == 2.0
    plain = sess.make_callable(y, feed_list=[x])
    with pytest.raises(TypeError):
        plain(1.0, options=opts)


async def test_make_async_callable_matches_arun(graph):
    # Feed order is the caller's, not the plan's (sorted by name): "b" before "a".
    b = placeholder(af.float32, [None], name="b")
    a = placeholder(af.int32, [], name="a")
    fetches = {"sum": b + af.cast(a, af.float32), "pair": Pair(a, identity(b))}
    s = af.Session(graph=graph)
    f = s.make_async_callable(fetches, feed_list=[b, "a:0"])
    got = await f([1.0, 2.0], 3)
    want = await s.arun(fetches, {b: [1.0, 2.0], a: 3})
    np.testing.assert_array_equal(got["sum"], want["sum"])
    np.testing.assert_array_equal(got["sum"], np.array([4.0, 5.0], np.float32))
    assert type(got["pair"]) is Pair and got["pair"].first == 3
    fed = np.array([7.0], np.float32)
    out = (await f(fed, 0))["pair"].second
    out[0] = 0.0  # a fetched feed is the caller's copy, as with arun
    assert fed[0] == 7.0
    with pytest.raises(TypeError, match="2 feed values"):
        await f([1.0])
    with pytest.raises(ValueError, match="shape"):
        await f([[1.0]], 3)
    c = constant(10.0)  # the graph grew: the callable still runs (a new plan)
    assert (await f([1.0], 1))["sum"] == 2.0 and await s.arun(c) == 10.0
    with pytest.raises(TypeError):  # bad fetches fail when the callable is made
        s.make_async_callable(None)
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        await f([1.0], 1)


def test_make_async_callable_from_another_loop_than_the_bound_one(sess):
    # A synchronous session's loop is the runtime loop: the call takes arun's path.
    import asyncio

    x = placeholder(af.float32, [])
    assert sess.run(x * 2.0, {x: 1.0}) == 2.0
    f = sess.make_async_callable(x * 3.0, [x])
    assert asyncio.run(f(2.0)) == 6.0


# -- default sessions --------------------------------------------------------------------


def test_with_session_is_default_for_eval_and_run(graph, probes):
    counter = probes.counter()
    x = placeholder(af.float32, [])
    y = identity(x)
    bump = count_op(constant(0.0), counter).op
    with af.Session() as s:
        assert af.get_default_session() is s
        assert y.eval({x: 3.0}) == 3.0
        assert y.eval(feed_dict={x: 4.0}, session=s) == 4.0
        assert bump.run() is None
    assert counter.n == 1
    assert af.get_default_session() is None
    with pytest.raises(ValueError, match="default session"):
        y.eval({x: 1.0})
    with pytest.raises(ValueError, match="default session"):
        bump.run()


def test_as_default_does_not_close(sess):
    c = constant(2.0)
    with sess.as_default() as s:
        assert s is sess and af.get_default_session() is sess
        assert c.eval() == 2.0
    assert af.get_default_session() is None
    assert sess.run(c) == 2.0  # still open


def test_nested_default_sessions(graph):
    c = constant(1.0)
    with af.Session() as outer:
        with af.Session() as inner:
            assert af.get_default_session() is inner
            assert c.eval() == 1.0
        assert af.get_default_session() is outer


def test_eval_with_session_of_other_graph(graph):
    c = constant(1.0)
    other = af.Graph()
    with af.Session(graph=other) as s, pytest.raises(ValueError, match="graph"):
        c.eval(session=s)


def test_interactive_session(graph):
    c = constant(3.0)
    s = af.InteractiveSession()
    try:
        assert af.get_default_session() is s
        assert c.eval() == 3.0
        assert no_op().run() is None
    finally:
        s.close()
    assert af.get_default_session() is None


# -- closing ---------------------------------------------------------------------------


def test_closed_session_raises_runtime_error(graph):
    c = constant(1.0)
    s = af.Session()
    f = s.make_callable(c)
    assert s.run(c) == 1.0
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        s.run(c)
    with pytest.raises(RuntimeError, match="closed"):
        f()
    with pytest.raises(RuntimeError, match="closed"):
        s.make_callable(c)
    s.close()  # idempotent


def test_closed_before_first_run(graph):
    s = af.Session()
    s.close()
    with pytest.raises(RuntimeError):
        s.run(constant(1.0))


async def test_closed_session_arun_raises_runtime_error(graph):
    c = constant(1.0)
    s = af.Session()
    assert await s.arun(c) == 1.0
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        await s.arun(c)


def test_context_manager_closes(graph):
    c = constant(1.0)
    with af.Session() as s:
        assert s.run(c) == 1.0
    with pytest.raises(RuntimeError):
        s.run(c)


@pytest.mark.parametrize("mode", ["inline", "arun", "loop_thread"])
def test_a_step_computes_inf_and_nan_silently_and_restores_numpy_errstate(mode):
    # TF yields inf/nan without a word, whatever the caller's NumPy settings: a step
    # runs inside one errstate (executor.quiet_step) and hands the caller's back.
    import asyncio
    import threading
    import warnings

    x = af.placeholder(af.float32, [3])
    y = af.log(x) / x
    feed = {x: np.array([0.0, -1.0, 1.0], np.float32)}
    old = np.seterr(all="raise")
    loop = thread = None
    try:
        with af.Session() as sess, warnings.catch_warnings():
            warnings.simplefilter("error")
            if mode == "inline":
                got = sess.run(y, feed)
            elif mode == "arun":

                async def main():
                    np.seterr(all="raise")  # (a new context for asyncio.run)
                    out = await sess.arun(y, feed)
                    assert np.geterr()["divide"] == "raise"
                    return out

                got = asyncio.run(main())
            else:  # bound to a loop that another thread runs: the step runs there
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, daemon=True)
                thread.start()
                asyncio.run_coroutine_threadsafe(sess.arun(af.constant(0.0)), loop).result(10)
                got = sess.run(y, feed)
        assert np.isneginf(got[0]) or np.isnan(got[0])
        assert np.isnan(got[1]) and got[2] == 0.0
        assert np.geterr()["divide"] == "raise" and np.geterr()["invalid"] == "raise"
        with pytest.raises(FloatingPointError):
            np.log(np.float32(-1.0))
    finally:
        np.seterr(**old)
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()


def test_a_sparse_tensor_is_fed_by_its_components():
    # TF feeds a SparseTensor key its value's indices, values and dense_shape.
    with af.Graph().as_default():
        sp = af.sparse_placeholder(af.float32)
        total = af.sparse_reduce_sum(sp)
        dense = af.sparse_tensor_to_dense(sp)
        with af.Session() as sess:
            value = af.SparseTensorValue([[0, 0], [1, 1]], [3.0, 4.0], [2, 2])
            assert sess.run(total, {sp: value}) == 7.0
            got = sess.run(dense, {sp: ([[0, 1]], [5.0], [1, 2])})  # a plain tuple too
            assert got.tolist() == [[0.0, 5.0]]
            fetched = sess.run(sp, {sp: value})  # fed and fetched: the value back
            assert fetched.values.tolist() == [3.0, 4.0]
            with pytest.raises(TypeError, match="feed a tf.SparseTensorValue"):
                sess.run(total, {sp: [1.0, 2.0, 3.0, 4.0]})


def test_an_integer_feed_out_of_range_says_tfs_words():
    with af.Graph().as_default():
        p = af.placeholder(af.int8)
        with af.Session() as sess:
            want = "^Type of feed value 300 with type <class 'int'> is not compatible with "
            with pytest.raises(TypeError, match=want + "Tensor type <class 'numpy.int8'>"):
                sess.run(p + 0, {p: 300})


def test_a_fetched_feed_is_the_fed_array_as_tf_hands_it_back():
    # TF 2.21: sess.run(a, {a: 1}) is array(1., dtype=float32), not a NumPy scalar; a
    # tensor computed from it stays a scalar.
    with af.Graph().as_default():
        a = af.placeholder(af.float32, [], name="a")
        b = a + 1
        with af.Session() as sess:
            got = sess.run([a, b, af.identity(a)], {a: 1})
            assert isinstance(got[0], np.ndarray) and got[0].shape == () and got[0] == 1.0
            assert got[0].dtype == np.float32
            assert not isinstance(got[1], np.ndarray) and not isinstance(got[2], np.ndarray)
            fed = np.array([1.0, 2.0], np.float32)
            out = sess.run(af.placeholder_with_default(fed, [2]) * 1, {})
            assert out.tolist() == [1.0, 2.0]
            call = sess.make_callable(a, [a])
            assert isinstance(call(2.0), np.ndarray)


def test_run_options_and_metadata_fields_made_when_first_read(sess):
    # A message field (StepStats, CostGraphDef, DebugOptions, a list) is made when first
    # read, as protobuf's are: a RunMetadata made every step builds none it never fills,
    # and an untraced step leaves them unmade.  What a program reads or sets is as
    # before: the fields' defaults, assignment, CopyFrom, HasField, copies, errors.
    import copy

    from asyncflow.debug_watch import debug_watches
    from asyncflow.protos.step_stats_pb2 import StepStats

    x = constant(2.0)
    opts, meta = af.RunOptions(trace_level=af.RunOptions.NO_TRACE), af.RunMetadata()
    assert sess.run(x * 3.0, options=opts, run_metadata=meta) == 6.0
    assert debug_watches(opts) is None
    assert "step_stats" not in vars(meta) and "debug_options" not in vars(opts)
    assert isinstance(meta.step_stats, StepStats) and not meta.HasField("step_stats")
    assert meta.partition_graphs == [] and meta.partition_graphs is meta.partition_graphs
    assert af.RunMetadata().partition_graphs is not meta.partition_graphs
    assert not opts.debug_options.debug_tensor_watch_opts and opts.trace_level == 0
    other = af.RunMetadata()
    other.CopyFrom(meta)
    assert other.partition_graphs == []
    clone = copy.deepcopy(af.RunMetadata())
    assert clone.cost_graph.ByteSize() == 0
    with pytest.raises(AttributeError):
        _ = meta.no_such_field
    with pytest.raises(ValueError, match="no_such_field"):
        meta.no_such_field = 1
    traced = af.RunMetadata()
    sess.run(x * 3.0, options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE),
             run_metadata=traced)  # fmt: skip
    assert traced.HasField("step_stats") and traced.step_stats.dev_stats
