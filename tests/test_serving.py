"""asyncflow.serving: the dynamic Batcher's semantics and ServableModel.predict.

Batcher tests drive a fake batch function gated by asyncio events: a batch "runs" until
the test releases it, so which requests share a batch is decided by the test, not by
timing.
"""

import asyncio

import numpy as np
import pytest
from _testing_ops import settle

import asyncflow as af
from asyncflow import errors
from asyncflow.serving import Batcher, ServableModel


class GatedFn:
    """A batch function recording each batch and blocking until released."""

    def __init__(self, fail=None):
        self.calls: list[dict] = []
        self.gates: list[asyncio.Event] = []
        self.fail = fail
        self.auto = False

    async def __call__(self, inputs):
        self.calls.append({k: v.copy() for k, v in inputs.items()})
        gate = asyncio.Event()
        self.gates.append(gate)
        if not self.auto:
            await gate.wait()
        if self.fail is not None:
            raise self.fail
        # rows keep their identity: out = x * 10
        return {"y": inputs["x"] * 10}

    def release(self, i=-1):
        self.gates[i].set()


def rows(*vals):
    return {"x": np.array([[v] for v in vals], dtype=np.float32)}


async def test_concurrent_requests_are_merged_and_routed():
    fn = GatedFn()
    b = Batcher(fn, max_batch_size=8)
    first = asyncio.ensure_future(b.submit(rows(1)))
    await settle()
    assert len(fn.calls) == 1  # a lone request goes at once
    others = [asyncio.ensure_future(b.submit(rows(v, v + 0.5))) for v in (2, 3, 4)]
    await settle()
    assert len(fn.calls) == 1 and b.queued_requests() == 3  # waiting for the slot
    fn.release()
    assert (await first)["y"].tolist() == [[10]]
    await settle()
    assert len(fn.calls) == 2
    assert fn.calls[1]["x"].ravel().tolist() == [2, 2.5, 3, 3.5, 4, 4.5]
    fn.release()
    results = await asyncio.gather(*others)
    for v, r in zip((2, 3, 4), results):
        assert r["y"].ravel().tolist() == [v * 10, v * 10 + 5]
    m = b.metrics.snapshot()
    assert m["batch_size_histogram"] == {1: 1, 6: 1}
    assert m["requests"] == 4 and m["batches"] == 2
    assert m["latency_s"]["p50"] is not None and m["queue_time_s"]["p99"] >= 0


async def test_same_loop_pass_shares_a_batch_with_zero_timeout():
    fn = GatedFn()
    fn.auto = True
    b = Batcher(fn, max_batch_size=8)
    results = await asyncio.gather(*(b.submit(rows(v)) for v in range(5)))
    assert len(fn.calls) == 1 and fn.calls[0]["x"].shape == (5, 1)
    assert [r["y"].item() for r in results] == [0, 10, 20, 30, 40]


async def test_full_batch_does_not_wait_for_timeout():
    fn = GatedFn()
    fn.auto = True
    b = Batcher(fn, max_batch_size=3, batch_timeout_micros=60_000_000)
    a = asyncio.ensure_future(b.submit(rows(1)))
    await settle()
    assert fn.calls == []  # waiting for more, up to the (long) timeout
    c = asyncio.ensure_future(b.submit(rows(2, 3)))
    assert (await a)["y"].item() == 10
    assert (await c)["y"].ravel().tolist() == [20, 30]
    assert len(fn.calls) == 1


async def test_batch_timeout_fires():
    fn = GatedFn()
    fn.auto = True
    b = Batcher(fn, max_batch_size=8, batch_timeout_micros=1000)
    assert (await b.submit(rows(7)))["y"].item() == 70


async def test_padding_to_allowed_batch_sizes():
    fn = GatedFn()
    b = Batcher(fn, max_batch_size=8, allowed_batch_sizes=[2, 4, 8])
    first = asyncio.ensure_future(b.submit(rows(1)))
    await settle()
    assert fn.calls[0]["x"].ravel().tolist() == [1, 1]  # 1 padded to 2 with its first row
    rest = [asyncio.ensure_future(b.submit(rows(v))) for v in (5, 6, 7)]
    await settle()
    fn.release()
    assert (await first)["y"].ravel().tolist() == [10]
    await settle()
    assert fn.calls[1]["x"].ravel().tolist() == [5, 6, 7, 5]
    fn.release()
    assert [(await r)["y"].item() for r in rest] == [50, 60, 70]
    assert b.metrics.snapshot()["padded_batch_size_histogram"] == {2: 1, 4: 1}


def test_bad_options():
    with pytest.raises(ValueError, match="final entry"):
        Batcher(GatedFn(), max_batch_size=8, allowed_batch_sizes=[2, 4])
    with pytest.raises(ValueError, match="increasing"):
        Batcher(GatedFn(), max_batch_size=8, allowed_batch_sizes=[4, 2, 8])
    with pytest.raises(ValueError):
        Batcher(GatedFn(), max_batch_size=0)


async def test_queue_overflow_fails_fast_with_unavailable():
    fn = GatedFn()
    b = Batcher(fn, max_batch_size=1, max_enqueued_batches=2)
    running = asyncio.ensure_future(b.submit(rows(0)))
    await settle()
    queued = [asyncio.ensure_future(b.submit(rows(v))) for v in (1, 2)]
    await settle()
    with pytest.raises(errors.UnavailableError, match="queue .* is full"):
        await b.submit(rows(3))
    assert b.metrics.rejected == 1
    for _ in range(3):
        fn.release()
        await settle()
    assert (await running)["y"].item() == 0
    assert [(await q)["y"].item() for q in queued] == [10, 20]


async def test_oversized_request_is_invalid():
    b = Batcher(GatedFn(), max_batch_size=2)
    with pytest.raises(errors.InvalidArgumentError, match="larger than maximum"):
        await b.submit(rows(1, 2, 3))
    with pytest.raises(errors.InvalidArgumentError):
        await b.submit({})


async def test_deadline_while_queued_removes_the_request():
    fn = GatedFn()
    b = Batcher(fn, max_batch_size=4)
    running = asyncio.ensure_future(b.submit(rows(1)))
    await settle()
    late = asyncio.ensure_future(b.submit(rows(2), deadline_s=0.001))
    keep = asyncio.ensure_future(b.submit(rows(3)))
    with pytest.raises(errors.DeadlineExceededError):
        await late
    assert b.queued_requests() == 1
    fn.release()
    await running
    await settle()
    assert fn.calls[1]["x"].ravel().tolist() == [3]
    fn.release()
    assert (await keep)["y"].item() == 30
    assert b.metrics.deadline_exceeded == 1


async def test_deadline_while_running():
    fn = GatedFn()
    b = Batcher(fn, max_batch_size=4)
    with pytest.raises(errors.DeadlineExceededError):
        await b.submit(rows(1), deadline_s=0.001)
    fn.release()  # the batch finishes later; nobody is left to answer
    await settle()
    assert b.running_batches == 0


async def test_deadlines_of_one_batch_expire_each_at_its_own_time():
    """A batch keeps one timer for its requests' deadlines: a request that joins with
    an earlier deadline than the others fails first, the others keep their place."""
    fn = GatedFn()
    b = Batcher(fn, max_batch_size=8)
    running = asyncio.ensure_future(b.submit(rows(1), deadline_s=0.002))
    await settle()
    patient = asyncio.ensure_future(b.submit(rows(2), deadline_s=60.0))
    hasty = asyncio.ensure_future(b.submit(rows(3), deadline_s=0.001))
    with pytest.raises(errors.DeadlineExceededError):
        await hasty
    with pytest.raises(errors.DeadlineExceededError):
        await running  # (still running: it fails at its deadline all the same)
    assert not patient.done() and b.queued_requests() == 1
    fn.release()  # the first batch ends; the queued one runs without `hasty`
    await settle()
    assert fn.calls[1]["x"].ravel().tolist() == [2]
    fn.release()
    assert (await patient)["y"].item() == 20
    assert b.metrics.deadline_exceeded == 2


async def test_batch_error_reaches_every_caller():
    boom = errors.InvalidArgumentError(None, None, "bad batch")
    fn = GatedFn(fail=boom)
    fn.auto = True
    b = Batcher(fn, max_batch_size=4)
    results = await asyncio.gather(b.submit(rows(1)), b.submit(rows(2)), return_exceptions=True)
    assert all(isinstance(r, errors.InvalidArgumentError) for r in results)
    assert results[0] is not results[1] and str(results[0]) == "bad batch"
    assert b.metrics.failed == 2
    fn.fail = None  # the batcher keeps working
    assert (await b.submit(rows(4)))["y"].item() == 40


async def test_bad_output_dim_is_failed_precondition():
    async def fn(inputs):
        return {"y": np.zeros((1, 1))}

    b = Batcher(fn, max_batch_size=4)
    results = await asyncio.gather(b.submit(rows(1)), b.submit(rows(2)), return_exceptions=True)
    assert all(isinstance(r, errors.FailedPreconditionError) for r in results)


async def test_cancelling_one_waiter_leaves_the_others():
    fn = GatedFn()
    b = Batcher(fn, max_batch_size=4)
    running = asyncio.ensure_future(b.submit(rows(1)))
    await settle()
    gone = asyncio.ensure_future(b.submit(rows(2)))
    stay = asyncio.ensure_future(b.submit(rows(3)))
    await settle()
    gone.cancel()
    await settle()
    assert gone.cancelled() and b.queued_requests() == 1
    fn.release()
    await running
    await settle()
    assert fn.calls[1]["x"].ravel().tolist() == [3]
    fn.release()
    assert (await stay)["y"].item() == 30


async def test_cancelling_a_running_request_leaves_its_batch():
    fn = GatedFn()
    b = Batcher(fn, max_batch_size=4)
    gone = asyncio.ensure_future(b.submit(rows(1)))
    stay = asyncio.ensure_future(b.submit(rows(2)))
    await settle()
    gone.cancel()
    await settle()
    fn.release()
    assert (await stay)["y"].item() == 20


async def test_different_shapes_use_different_batches():
    fn = GatedFn()
    fn.auto = True
    b = Batcher(fn, max_batch_size=8)
    r1, r2 = await asyncio.gather(
        b.submit({"x": np.ones((1, 2), np.float32)}), b.submit({"x": np.ones((1, 3), np.float32)})
    )
    assert r1["y"].shape == (1, 2) and r2["y"].shape == (1, 3)
    assert len(fn.calls) == 2


async def test_pad_variable_length_inputs_shares_a_batch():
    """TF Serving's pad_variable_length_inputs: dims after the first are padded at their
    end to the batch's largest, each request's input with its own first element; the
    outputs are sliced back along dim 0 only."""
    fn = GatedFn()
    fn.auto = True
    b = Batcher(fn, max_batch_size=8, pad_variable_length_inputs=True, allowed_batch_sizes=[4, 8])
    a = np.array([[7.0, 1.0]], np.float32)
    c = np.array([[2.0, 3.0, 4.0], [5.0, 6.0, 8.0]], np.float32)
    ra, rc = await asyncio.gather(b.submit({"x": a}), b.submit({"x": c}))
    assert len(fn.calls) == 1
    want = [[7, 1, 7], [2, 3, 4], [5, 6, 8], [7, 1, 7]]  # row 4: the allowed size's padding
    assert fn.calls[0]["x"].tolist() == want
    assert ra["y"].tolist() == [[70, 10, 70]]
    assert rc["y"].tolist() == (c * 10).tolist()
    # Inputs of another rank are not padded into the batch: they get their own.
    await asyncio.gather(b.submit({"x": a}), b.submit({"x": np.ones((1, 2, 2), np.float32)}))
    assert [call["x"].ndim for call in fn.calls[1:]] == [2, 3]


async def test_max_concurrent_batches():
    fn = GatedFn()
    b = Batcher(fn, max_batch_size=1, max_concurrent_batches=2)
    futs = [asyncio.ensure_future(b.submit(rows(v))) for v in range(3)]
    await settle()
    assert len(fn.calls) == 2 and b.running_batches == 2
    fn.release(0)
    await settle()
    assert len(fn.calls) == 3
    fn.release(1)
    fn.release(2)
    assert [(await f)["y"].item() for f in futs] == [0, 10, 20]


async def test_batch_size_fn_and_close():
    fn = GatedFn()
    b = Batcher(fn, max_batch_size=4, batch_size_fn=lambda inputs: 2)  # each counts 2
    running = asyncio.ensure_future(b.submit(rows(1)))
    await settle()
    assert b.running_batches == 1
    queued = [asyncio.ensure_future(b.submit(rows(v))) for v in (2, 3, 4)]
    await settle()
    assert b.queued_requests() == 3 and len(b._queues[next(iter(b._queues))].pending) == 2
    closing = asyncio.ensure_future(b.aclose())
    for q in queued:  # queued requests fail at once; the running batch finishes
        with pytest.raises(errors.UnavailableError):
            await q
    await settle()
    assert not closing.done()
    fn.release()
    await closing
    assert (await running)["y"].item() == 10
    with pytest.raises(errors.UnavailableError):
        await b.submit(rows(3))


# -- ServableModel ------------------------------------------------------------------------


def _mlp_graph():
    g = af.Graph()
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    with g.as_default():
        x = af.placeholder(af.float32, [None, 4], name="x")
        y = af.nn.softmax(af.matmul(x, af.constant(w)))
    return g, x, y, w


def _softmax(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("batching", [None, {"max_batch_size": 16}])
async def test_model_predict(batching):
    g, x, y, w = _mlp_graph()
    async with af.Session(graph=g) as sess:
        model = ServableModel.from_session(sess, {"x": x}, {"probs": y}, batching=batching)
        data = np.arange(32, dtype=np.float32).reshape(8, 4) / 32
        outs = await asyncio.gather(*(model.predict({"x": data[i : i + 1]}) for i in range(8)))
        got = np.concatenate([o["probs"] for o in outs])
        np.testing.assert_allclose(got, _softmax(data @ w), rtol=1e-5)
        if batching:
            m = model.metrics()
            assert m["requests"] == 8 and m["batches"] < 8
        with pytest.raises(errors.InvalidArgumentError, match="alias not found"):
            await model.predict({"nope": data})
        with pytest.raises(errors.InvalidArgumentError, match="Missing input"):
            await model.predict({})
        with pytest.raises(errors.InvalidArgumentError, match="signature key"):
            await model.predict({"x": data}, signature_name="other")
        with pytest.raises(errors.InvalidArgumentError, match="shape"):
            await model.predict({"x": np.zeros((1, 5), np.float32)})
        if batching:
            await model.aclose()


async def test_model_predict_deadline_without_batching(probes):
    import _testing_ops

    g = af.Graph()
    w = probes.waiter("serve")
    with g.as_default():
        x = af.placeholder(af.float32, [None], name="x")
        y = _testing_ops.wait_op(x, w)
    async with af.Session(graph=g) as sess:
        model = ServableModel.from_session(sess, {"x": x}, {"y": y})
        with pytest.raises(errors.DeadlineExceededError):
            await model.predict({"x": [1.0]}, deadline_s=0.001)


# -- SavedModel round trip ----------------------------------------------------------------


def _export(tmp_path):
    from asyncflow.saved_model import simple_save

    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 4], name="x")
        w = af.Variable(np.arange(12, dtype=np.float32).reshape(4, 3) / 12, name="w")
        y = af.nn.softmax(af.matmul(x, w), name="probs")
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            export_dir = str(tmp_path / "export")
            simple_save(sess, export_dir, inputs={"x": x}, outputs={"probs": y})
            w_value = sess.run(w)
    return export_dir, w_value


async def test_aload_saved_model(tmp_path):
    from asyncflow import serving

    export_dir, w = _export(tmp_path)
    model = await serving.aload(export_dir, batching={"max_batch_size": 8})
    data = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
    outs = await asyncio.gather(*(model.predict({"x": data[i : i + 1]}) for i in range(3)))
    got = np.concatenate([o["probs"] for o in outs])
    np.testing.assert_allclose(got, _softmax(data @ w), rtol=1e-5)
    assert model.session._loop is asyncio.get_running_loop()
    await model.aclose()


def test_load_saved_model_sync(tmp_path):
    from asyncflow import serving

    export_dir, w = _export(tmp_path)
    model = serving.load(export_dir)
    data = np.ones((2, 4), np.float32)
    out = asyncio.run(model.predict({"x": data}))  # another loop: the step hops to the session's
    np.testing.assert_allclose(out["probs"], _softmax(data @ w), rtol=1e-5)
    with pytest.raises(errors.InvalidArgumentError, match="signature key"):
        serving.load(export_dir, signature_name="nope")
    model.close()


async def test_idle_per_shape_queues_are_freed():
    fn = GatedFn()
    b = Batcher(fn, max_batch_size=8)
    first = asyncio.ensure_future(b.submit({"x": np.ones((1, 1), np.float32)}))
    await settle()
    assert b.running_batches == 1 and b.active_queues() == 0  # its batch left the queue
    shapes = [(1, 2), (2, 3), (1, 1)]
    queued = [asyncio.ensure_future(b.submit({"x": np.ones(s, np.float32)})) for s in shapes]
    await settle()
    assert b.active_queues() == 3
    fn.auto = True
    fn.release(0)
    results = await asyncio.gather(first, *queued)
    assert [r["y"].shape for r in results] == [(1, 1)] + shapes
    assert b.active_queues() == 0 and len(fn.calls) == 4
    # a queued request withdrawn (cancelled) frees its queue too
    fn.auto = False
    running = asyncio.ensure_future(b.submit({"x": np.ones((1, 1), np.float32)}))
    await settle()
    lone = asyncio.ensure_future(b.submit({"x": np.ones((1, 7), np.float32)}))
    await settle()
    assert b.active_queues() == 1
    lone.cancel()
    await settle()
    assert b.active_queues() == 0
    fn.release()
    assert (await running)["y"].tolist() == [[10.0]]


async def test_a_finished_batch_leaves_no_garbage_cycle():
    # A request and its batch pointed at each other, so every batched request (its
    # future, inputs and outputs) waited for the cycle collector: under load that was
    # ~35 ms pauses of the server's loop.  Now reference counting frees them.
    import gc
    import weakref

    outputs = []

    async def fn(inputs):
        y = inputs["x"] * 10
        outputs.append(weakref.ref(y))
        return {"y": y}

    b = Batcher(fn, max_batch_size=8)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        results = await asyncio.gather(*(b.submit(rows(v)) for v in range(5)))
        assert [r["y"].item() for r in results] == [0, 10, 20, 30, 40]
        del results
        await settle()
        assert len(outputs) == 1 and outputs[0]() is None  # freed without a collection
    finally:
        if was_enabled:
            gc.enable()
