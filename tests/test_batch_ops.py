"""The serving batching ops (ops/batch_ops.py) against TF 2.21's recorded behaviour
(tests/fixtures/batch_ops_cases.py -> batch_ops_tf.json): the graph and values of
nondifferentiable_batch_function and raw_ops.BatchFunction, padding to
allowed_batch_sizes, large batch splitting, TF's errors, Batch / Unbatch / UnbatchGrad
with one caller and with two threads; and concurrent `arun` callers batched into one
run of the function (counted by a py_func), a timeout flushing a partial batch, an
error reaching every caller, a cancelled caller leaving the others to run."""

import asyncio
import base64
import json
import pathlib
import sys
import threading

import numpy as np
import pytest
from _testing_ops import until

import asyncflow as tf
from asyncflow import errors
from asyncflow.protos.graph_pb2 import GraphDef

FIX = pathlib.Path(__file__).parent / "fixtures"
TABLE = json.loads((FIX / "batch_ops_tf.json").read_text())
sys.path.insert(0, str(FIX))
from batch_ops_cases import ERROR_CASES  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def _base(kw, calls):
    """TF's recorded BatchFunction: f(x, c) = py_func(x) + c (the py_func counts each
    run's rows and fails on a negative one), max_batch_size 8, allowed [2, 4]."""

    def rec(x):
        calls.append(int(x.shape[0]))
        if (x < 0).any():
            raise ValueError("negative row")
        return x

    @tf.function
    def comp(x, c):
        y = tf.py_func(rec, [x], tf.float32)
        return y[:1] + c if kw.get("first_row_only") else y + c

    x = tf.placeholder(tf.float32, [None])
    c = tf.constant(10.0)
    spec = tf.TensorSpec
    if kw.get("scalar"):
        ins = [tf.constant(1.0)]
        cf = comp.get_concrete_function(spec([], tf.float32), spec([], tf.float32))
    elif kw.get("unequal"):
        ins = [x, tf.zeros([2])]
        cf = tf.function(lambda x, y, c: x + c).get_concrete_function(
            spec([None], tf.float32), spec([None], tf.float32), spec([], tf.float32)
        )
    else:
        ins = [x, x] if kw.get("extra_input") else [x]
        cf = comp.get_concrete_function(spec([None], tf.float32), spec([], tf.float32))
    args = {
        "num_batch_threads": 1,
        "max_batch_size": 8,
        "batch_timeout_micros": 100000,
        "allowed_batch_sizes": [2, 4],
        "enable_large_batch_splitting": True,
    }
    args.update({k: v for k, v in kw.items() if k in args})
    outs = tf.raw_ops.BatchFunction(
        in_tensors=ins, captured_tensors=[c], f=cf, Tout=[tf.float32], **args
    )
    return x, outs


# -- the decorator ------------------------------------------------------------------------


def test_nondifferentiable_batch_function_graph_as_tf():
    want = TABLE["decorator"]
    g = tf.Graph()
    with g.as_default(), tf.Session() as s:

        @tf.nondifferentiable_batch_function(2, 4, 1000, allowed_batch_sizes=[2, 4])
        def batched(a, b):
            return a * 2.0 + b, tf.reduce_sum(a, axis=1, keepdims=True)

        a = tf.placeholder(tf.float32, [None, 2])
        b = tf.placeholder(tf.float32, [None, 2])
        res = batched(a, b)
        op = res[0].op
        assert (op.name, op.type) == tuple(want["ops"][-1])
        assert [t.name for t in op.inputs] == want["inputs"]
        for k, v in want["attrs"].items():
            got = op.get_attr(k)
            got = got.decode() if isinstance(got, bytes) else got
            if isinstance(got, list):
                got = [x.name if isinstance(x, tf.DType) else x for x in got]
            assert got == v, k
        args = [op.graph.get_tensor_by_name(n.decode()).op.name.rsplit("/", 1)[1] for n in
                op.get_attr("f_inputs")]  # fmt: skip
        assert args == want["arg_names"]
        assert [str(t.shape) for t in res] == want["shapes"]
        feeds = {a: [[1, 2], [3, 4], [5, 6]], b: np.ones((3, 2))}
        assert [v.tolist() for v in s.run(list(res), feeds)] == want["values"]
        empty = s.run(list(res), {a: np.zeros((0, 2)), b: np.zeros((0, 2))})
        assert [list(v.shape) for v in empty] == want["empty_shapes"]
        with pytest.raises(LookupError):
            tf.gradients(res[0], a)


# -- BatchFunction, one caller ------------------------------------------------------------


def test_padding_and_large_batch_splitting_as_tf():
    calls: list = []
    with tf.Graph().as_default(), tf.Session() as s:
        x, outs = _base({}, calls)
        assert outs[0].name == TABLE["function"]["name"]
        assert str(outs[0].shape) == TABLE["function"]["shape"]
        for n, want in TABLE["function"]["runs"].items():
            calls.clear()
            (v,) = s.run(outs, {x: np.arange(int(n), dtype=np.float32)})
            assert v.tolist() == want["value"], n
            assert calls == want["calls"], n  # padded to [2, 4]; 6 and 8 rows split
    with tf.Graph().as_default(), tf.Session() as s:
        kw = {"enable_large_batch_splitting": False, "allowed_batch_sizes": [2, 8]}
        x, outs = _base(kw, calls)
        calls.clear()
        (v,) = s.run(outs, {x: np.arange(6, dtype=np.float32)})
        assert v.tolist() == TABLE["function_no_split"]["value"]
        assert calls == TABLE["function_no_split"]["calls"]


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_batch_function_errors_as_tf(case):
    kind, message = TABLE["function_errors"][case]
    kw = ERROR_CASES[case]
    with tf.Graph().as_default(), tf.Session() as s:
        x, outs = _base(kw, [])
        with pytest.raises(getattr(errors, kind)) as info:
            s.run(outs, {x: np.arange(kw.get("feed", 3), dtype=np.float32)})
        # (TF's message for allowed_over_max_splitting ends in a stray line number)
        assert message.startswith(info.value.message.splitlines()[0]), info.value.message


# -- concurrent callers --------------------------------------------------------------------


def test_concurrent_arun_callers_share_one_run():
    calls: list = []
    with tf.Graph().as_default(), tf.Session() as s:
        x, outs = _base({"batch_timeout_micros": 60_000_000}, calls)

        async def main():
            return await asyncio.gather(*(s.arun(outs, {x: [float(i)]}) for i in range(1, 5)))

        got = asyncio.run(main())  # (a full batch of 4 goes at once, not after 60 s)
        assert calls == [4]
        assert [v[0].tolist() for v in got] == [[11.0], [12.0], [13.0], [14.0]]


def test_concurrent_threads_as_tf():
    calls: list = []
    want = TABLE["concurrent"]
    with tf.Graph().as_default(), tf.Session() as s:
        x, outs = _base({"batch_timeout_micros": 2_000_000}, calls)
        res = {}

        def run(i):
            res[i] = s.run(outs, {x: [float(i + 1)]})[0].tolist()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for i, t in enumerate(threads):  # (each starts once the one before waits)
            t.start()
            _wait_for(lambda i=i: _queued(s) == i + 1)
        for t in threads:
            t.join(30)
        assert [res[i] for i in range(3)] == want["values"]
        assert calls == want["calls"]  # 3 rows padded to 4, one run after the timeout


def test_timeout_flushes_a_partial_batch():
    calls: list = []
    with tf.Graph().as_default(), tf.Session() as s:
        x, outs = _base({"batch_timeout_micros": 20_000}, calls)

        async def main():
            return await asyncio.gather(*(s.arun(outs, {x: [float(i)]}) for i in range(3)))

        got = asyncio.run(main())
        assert calls == [4]  # 3 rows, padded to 4, sent by the timer
        assert [v[0].tolist() for v in got] == [[10.0], [11.0], [12.0]]


def test_split_request_fills_the_open_batch_first():
    calls: list = []
    with tf.Graph().as_default(), tf.Session() as s:
        x, outs = _base({"batch_timeout_micros": 20_000}, calls)

        async def main():
            one = asyncio.create_task(s.arun(outs, {x: [100.0]}))
            await until(lambda: _queued(s) == 1)
            six = await s.arun(outs, {x: np.arange(6, dtype=np.float32)})
            return await one, six

        one, six = asyncio.run(main())
        assert calls == [4, 4]  # 1 + 3 rows (full: it goes), then 3 padded to 4
        assert one[0].tolist() == [110.0]
        assert six[0].tolist() == [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]


def test_function_error_reaches_every_caller():
    calls: list = []
    want = TABLE["concurrent_error"]
    with tf.Graph().as_default(), tf.Session() as s:
        x, outs = _base({"batch_timeout_micros": 60_000_000}, calls)

        async def one(i):
            try:
                await s.arun(outs, {x: [-1.0 if i == 0 else 1.0]})
                return "no error"
            except errors.OpError as e:
                return [type(e).__name__, "negative row" in e.message]

        async def main():
            return await asyncio.gather(*(one(i) for i in range(4)))

        assert asyncio.run(main()) == want["errors"] + want["errors"][-1:]
        assert calls == want["calls"]


def test_cancelled_caller_leaves_the_batch():
    calls: list = []
    with tf.Graph().as_default(), tf.Session() as s:
        x, outs = _base({"batch_timeout_micros": 60_000_000}, calls)

        async def main():
            first = asyncio.create_task(s.arun(outs, {x: [1.0]}))
            second = asyncio.create_task(s.arun(outs, {x: [2.0]}))
            await until(lambda: _queued(s) == 2)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            assert _queued(s) == 1  # (its row left the batch)
            rest = [s.arun(outs, {x: [float(i)]}) for i in (3, 4, 5)]
            return await asyncio.gather(second, *rest)

        got = asyncio.run(main())
        assert calls == [4]
        assert [v[0].tolist() for v in got] == [[12.0], [13.0], [14.0], [15.0]]


def test_step_deadline_while_batching_withdraws_its_rows():
    calls: list = []
    with tf.Graph().as_default(), tf.Session() as s:
        x, outs = _base({"batch_timeout_micros": 60_000_000}, calls)
        with pytest.raises(errors.DeadlineExceededError):
            s.run(outs, {x: [1.0]}, options=tf.RunOptions(timeout_in_ms=50))
        assert _queued(s) == 0 and calls == []
        (v,) = s.run(outs, {x: np.arange(4, dtype=np.float32)})  # (a full batch, at once)
        assert v.tolist() == [10.0, 11.0, 12.0, 13.0] and calls == [4]


def _queued(session, prefix: str = "BatchFunction:") -> int:
    """Requests waiting in the session's batchers of one op type."""
    return sum(
        r.queued_requests()
        for d in session._devices
        for c in d.resource_mgr.containers()
        for name, r in d.resource_mgr._containers[c].items()
        if name.startswith(prefix)
    )


# -- Batch / Unbatch / UnbatchGrad ----------------------------------------------------------


def _batch_graph(timeout_micros):
    x = tf.placeholder(tf.float32, [None, 2])
    b, idx, id_ = tf.raw_ops.Batch(
        in_tensors=[x], num_batch_threads=1, max_batch_size=4, batch_timeout_micros=timeout_micros,
        allowed_batch_sizes=[2, 4], grad_timeout_micros=1_000_000, shared_name="b",
    )  # fmt: skip
    u = tf.raw_ops.Unbatch(
        batched_tensor=b[0] * 2.0, batch_index=idx, id=id_, timeout_micros=3_000_000,
        shared_name="u",
    )  # fmt: skip
    return x, [b[0], idx, id_, u]


def test_batch_unbatch_one_caller_as_tf():
    want = TABLE["batch"]
    with tf.Graph().as_default(), tf.Session() as s:
        x, fetches = _batch_graph(50_000)
        assert [str(t.shape) for t in fetches] == want["shapes"]
        assert [t.name for t in fetches] == want["names"]
        batched, index, task_id, unbatched = s.run(fetches, {x: [[1, 2], [3, 4], [5, 6]]})
        assert batched.tolist() == want["batched"]  # padded with its first row
        assert [r[1:] for r in index.tolist()] == want["index_rows"]
        assert (index[0][0] == task_id) == want["index_id_is_id"]
        assert unbatched.tolist() == want["unbatched"]


def test_batch_unbatch_two_threads_as_tf():
    want = TABLE["batch_threads"]
    with tf.Graph().as_default(), tf.Session() as s:
        x, fetches = _batch_graph(30_000_000)  # (a full batch goes at once)
        res = {}

        def run(i):
            res[i] = s.run(fetches, {x: np.full((1 + 2 * i, 2), float(i + 1))})

        # Thread 0's rows come first; once they wait, thread 1's fill the batch, which
        # goes to thread 1 (the last caller), as TF's.
        t0 = threading.Thread(target=run, args=(0,))
        t0.start()
        _wait_for(lambda: _queued(s, "Batch:") == 1)
        t1 = threading.Thread(target=run, args=(1,))
        t1.start()
        t0.join(30)
        t1.join(30)
        ids = {i: int(res[i][2]) for i in range(2)}
        for i in range(2):
            batched, index, _, unbatched = res[i]
            w = want[str(i)]
            assert list(batched.shape) == w["batched_shape"]
            assert batched.tolist() == w["batched"]
            assert list(index.shape) == w["index_shape"]
            named = [
                [[k for k, v in ids.items() if v == r[0]][0], r[1], r[2]] for r in index.tolist()
            ]
            assert named == w["index"]
            assert unbatched.tolist() == w["unbatched"]


def _wait_for(predicate, limit_s: float = 20.0) -> None:
    done = threading.Event()
    for _ in range(int(limit_s / 0.005)):
        if predicate():
            return
        done.wait(0.005)
    raise AssertionError("condition not reached")


def test_unbatch_and_unbatch_grad_as_tf():
    want = TABLE["unbatch"]
    with tf.Graph().as_default(), tf.Session() as s:
        t = tf.placeholder(tf.float32, [None, 2])
        bi = tf.placeholder(tf.int64, [None, 3])
        i = tf.placeholder(tf.int64, [])
        u = tf.raw_ops.Unbatch(batched_tensor=t, batch_index=bi, id=i, timeout_micros=100000,
                               shared_name="u")  # fmt: skip
        none = {t: np.zeros((0, 2)), bi: np.zeros((0, 3)), i: 5}
        with pytest.raises(errors.DeadlineExceededError) as info:
            s.run(u, none)
        assert [type(info.value).__name__, info.value.message.splitlines()[0]] == want["timeout"]
        whole = np.arange(8).reshape(4, 2)
        assert s.run(u, {t: whole, bi: [[5, 0, 1], [6, 1, 3]], i: 6}).tolist() == want["emitter"]
        assert s.run(u, none).tolist() == want["stored"]  # (5's rows waited for it)
        with pytest.raises(errors.InvalidArgumentError) as info:
            s.run(u, {t: whole, bi: [[5, 0, 1], [6, 1, 7]], i: 6})
        assert info.value.message.splitlines()[0] == want["split_error"][1]

        oi = tf.placeholder(tf.float32, [None, 2])
        ug = tf.raw_ops.UnbatchGrad(original_input=oi, batch_index=bi, grad=t, id=i,
                                    shared_name="ug")  # fmt: skip
        assert str(ug.shape) == want["grad_shape"]
        single = {oi: np.ones((4, 2)), t: np.arange(6).reshape(3, 2), bi: [[7, 0, 3]], i: 7}
        assert s.run(ug, single).tolist() == want["grad_single"]
        feeds = [
            {oi: np.ones((4, 2)), t: np.full((1, 2), 5.0), bi: [[8, 0, 1], [9, 1, 3]], i: 8},
            {oi: np.zeros((0, 2)), t: np.full((2, 2), 6.0), bi: np.zeros((0, 3)), i: 9},
        ]

        async def main():
            holder = asyncio.create_task(s.arun(ug, feeds[0]))  # waits for 9's gradient
            other = await s.arun(ug, feeds[1])
            return [await holder, other]

        got = asyncio.run(main())
        assert [[list(v.shape), v.tolist()] for v in got] == want["grad_threads"]


# -- GraphDefs -----------------------------------------------------------------------------


def test_tf_graph_def_runs_here_and_ours_has_tf_form():
    want = TABLE["graph_def"]
    gd = GraphDef()
    gd.ParseFromString(base64.b64decode(want["pb"]))
    with tf.Graph().as_default() as g, tf.Session() as s:
        tf.import_graph_def(gd, name="")
        feeds = {"a:0": [[1, 2], [3, 4]], "k:0": 2.0}
        assert [v.tolist() for v in s.run(want["fetches"], feeds)] == want["values"]
        for op_type, outcome in want["gradients"].items():
            op = next(o for o in g.get_operations() if o.type == op_type)
            assert outcome == "LookupError"
            x = op.inputs[2] if op_type == "UnbatchGrad" else op.inputs[0]
            with pytest.raises(LookupError):
                tf.gradients(op.outputs[0], x)
        ours = g.as_graph_def()
    node = next(n for n in ours.node if n.name == "raw")
    assert node.op == "BatchFunction" and node.attr["f"].func.name
    assert "f_inputs" not in node.attr
    assert node.attr["f"].func.name in {f.signature.name for f in ours.library.function}
    with tf.Graph().as_default(), tf.Session() as s:
        tf.import_graph_def(ours, name="")
        assert [v.tolist() for v in s.run(want["fetches"], feeds)] == want["values"]


def _attrs(node) -> dict:
    return {k: v.SerializeToString() for k, v in node.attr.items() if k != "f"}


def test_our_graph_def_nodes_as_tf():
    """The graph of record_graph_def built here: each batching node's inputs and attrs
    (all but the function's name) are TF's, its function has TF's signature."""
    tf_gd = GraphDef()
    tf_gd.ParseFromString(base64.b64decode(TABLE["graph_def"]["pb"]))
    with tf.Graph().as_default() as g:

        @tf.nondifferentiable_batch_function(1, 4, 1000)
        def batched(a):
            return a * 3.0

        a = tf.placeholder(tf.float32, [None, 2], name="a")
        k = tf.placeholder(tf.float32, [], name="k")
        batched(a)
        cf = tf.function(lambda x, c: x * c - 1.0).get_concrete_function(
            tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([], tf.float32)
        )
        tf.raw_ops.BatchFunction(
            in_tensors=[a], captured_tensors=[k], f=cf, num_batch_threads=1, max_batch_size=4,
            batch_timeout_micros=1000, Tout=[tf.float32], name="raw",
        )  # fmt: skip
        b, idx, id_ = tf.raw_ops.Batch(
            in_tensors=[a], num_batch_threads=1, max_batch_size=4, batch_timeout_micros=1000,
            grad_timeout_micros=1000, shared_name="b",
        )  # fmt: skip
        u = tf.raw_ops.Unbatch(batched_tensor=b[0], batch_index=idx, id=id_, timeout_micros=1000)
        tf.raw_ops.UnbatchGrad(original_input=b[0], batch_index=idx, grad=u, id=id_)
        ours = g.as_graph_def()
    theirs = {n.name: n for n in tf_gd.node}
    functions = {f.signature.name: f.signature for f in ours.library.function}
    tf_functions = {f.signature.name: f.signature for f in tf_gd.library.function}
    compared = []
    for node in ours.node:
        if node.op not in ("BatchFunction", "Batch", "Unbatch", "UnbatchGrad"):
            continue
        compared.append(node.name)
        want = theirs[node.name]
        assert node.op == want.op and list(node.input) == list(want.input), node.name
        assert _attrs(node) == _attrs(want), node.name
        if node.op == "BatchFunction":
            sig, tf_sig = (
                functions[node.attr["f"].func.name],
                tf_functions[want.attr["f"].func.name],
            )
            assert [a.type for a in sig.input_arg] == [a.type for a in tf_sig.input_arg]
            assert [a.type for a in sig.output_arg] == [a.type for a in tf_sig.output_arg]
    assert sorted(compared) == ["Batch_1", "Unbatch", "UnbatchGrad", "batch/BatchFunction", "raw"]
