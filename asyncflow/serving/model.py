"""A loaded model answering `await model.predict(inputs, signature_name=...)`.

`load(export_dir, tags)` reads a SavedModel (asyncflow.saved_model.loader) into a new
graph and session; `await aload(...)` does the same with the session bound to the
caller's running loop, so every predict runs there (`Session.arun`) without a thread
hop.  `ServableModel.from_session(sess, inputs, outputs)` serves tensors of a session
the caller already has, no export needed.

Signatures name their inputs and outputs (TF Serving's signature_def); a predict gives
exactly the signature's inputs and gets every output, as NumPy arrays.  With batching
enabled for a signature, concurrent predicts are merged by a `Batcher`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import numpy as np

from asyncflow import errors
from asyncflow import graph as ops
from asyncflow.batching import Batcher
from asyncflow.session import Session, dims_fit

__all__ = ["ServableModel", "Signature", "load", "aload", "DEFAULT_SERVING_SIGNATURE_DEF_KEY"]

DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"


class Signature:
    """Named input and output tensors of one servable method."""

    def __init__(self, inputs: Mapping, outputs: Mapping, method_name: str = ""):
        if not outputs:
            raise ValueError("A signature needs at least one output.")
        self.inputs = dict(inputs)
        self.outputs = dict(outputs)
        self.method_name = method_name
        self._callables: dict = {}  # session -> its prepared step (Session.make_async_callable)
        self._np_dtypes = {k: t.dtype.as_numpy_dtype for k, t in self.inputs.items()}
        # (an array of exactly this dtype is fed as it is: np.asarray would return it)
        self._exact = {
            k: None if t.dtype.name == "string" else np.dtype(t.dtype.as_numpy_dtype)
            for k, t in self.inputs.items()
        }
        # Each input's dims (None: unknown rank), for a check cheaper than TensorShape's.
        self._dims = {
            k: None if t.shape.ndims is None else tuple(t.shape.as_list())
            for k, t in self.inputs.items()
        }

    def feed_dict(self, inputs: Mapping) -> dict:
        """{tensor: array} for `inputs`; InvalidArgumentError when names don't match."""
        if not isinstance(inputs, Mapping):
            raise errors.InvalidArgumentError(
                None, None, f"inputs must be a dict of input name to value, got {type(inputs)}"
            )
        expected = self.inputs.keys()
        if inputs.keys() != expected:
            unknown = sorted(set(inputs) - set(expected))
            if unknown:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"input tensor alias not found in signature: {unknown[0]}. Inputs "
                    f"expected to be in the set {{{','.join(sorted(expected))}}}.",
                )
            missing = sorted(set(expected) - set(inputs))
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Missing input tensor alias(es): {', '.join(missing)}. Inputs expected to "
                f"be in the set {{{','.join(sorted(expected))}}}.",
            )
        feed = {}
        for key, value in inputs.items():
            tensor = self.inputs[key]
            if type(value) is np.ndarray and value.dtype is self._exact[key]:
                arr = value
            else:
                try:
                    arr = np.asarray(value, dtype=self._np_dtypes[key])
                except (TypeError, ValueError, OverflowError) as e:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"Input '{key}' cannot be converted to {tensor.dtype.name}: {e}",
                    ) from None
            if not dims_fit(self._dims[key], arr.shape):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Input '{key}' has shape {arr.shape}, which is not compatible with the "
                    f"signature's shape {tensor.shape}",
                )
            feed[key] = arr
        return feed

    def step(self, session):
        """`await step(feed)` runs the signature on `session` for `feed_dict`'s result:
        a prepared callable (fetches and feeds resolved once), made at the first call."""
        call = self._callables.get(session)
        if call is None:
            keys = list(self.inputs)
            run = session.make_async_callable(self.outputs, [self.inputs[k] for k in keys])
            if len(keys) == 1:
                (key,) = keys

                def call(feed, run=run, key=key):
                    return run(feed[key])

            else:

                def call(feed, run=run, keys=keys):
                    return run(*[feed[k] for k in keys])

            self._callables[session] = call
        return call


async def _within(step, deadline_s: float):
    """`await step` (a step's coroutine), failing with DeadlineExceededError once
    `deadline_s` seconds have passed.  The timer is armed only if the step suspends:
    most steps of a served model end without suspending, and a timeout's timer costs
    more than their kernels (~20 us a request of the digits MLP)."""
    when = asyncio.get_running_loop().time() + deadline_s
    try:
        first = step.send(None)
    except StopIteration as done:
        return done.value
    return await _rest_within(step, first, when)


async def _rest_within(step, first, when: float):
    """The rest of `step` (which yielded `first`), failing with DeadlineExceededError
    at loop time `when`."""
    try:
        async with asyncio.timeout_at(when):
            return await _Resumed(step, first)
    except TimeoutError:
        raise errors.DeadlineExceededError(None, None, "Deadline exceeded") from None


class _Resumed:
    """`await _Resumed(coro, first)`: the rest of a coroutine that already yielded
    `first` to its caller's Task (sends and throws, a cancellation too, go on to it)."""

    __slots__ = ("coro", "first")

    def __init__(self, coro, first):
        self.coro, self.first = coro, first

    def __await__(self):
        coro, y = self.coro, self.first
        self.first = None
        while True:
            try:
                sent = yield y
            except BaseException as exc:  # noqa: BLE001 - delivered to the step itself
                try:
                    y = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    y = coro.send(sent)
                except StopIteration as done:
                    return done.value


class ServableModel:
    """A session plus its signatures; `await predict(...)` runs on the caller's loop."""

    def __init__(
        self,
        session,
        signatures: Mapping[str, Signature],
        meta_graph=None,
        default_signature: str = DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    ):
        self.session = session
        self.signatures = dict(signatures)
        self.meta_graph = meta_graph
        self.default_signature = default_signature
        self._batchers: dict[str, Batcher] = {}
        self._joint: dict[tuple, Signature] = {}  # predict_signatures' merged signatures
        self._inflight = 0  # predicts started and not finished (adrain waits for 0)
        self._idle: asyncio.Event | None = None

    @classmethod
    def from_session(
        cls,
        session,
        inputs: Mapping,
        outputs: Mapping,
        signature_name: str = DEFAULT_SERVING_SIGNATURE_DEF_KEY,
        batching: Mapping | None = None,
    ) -> ServableModel:
        """Serve `outputs` (name -> Tensor) of `session` fed by `inputs` (name -> Tensor).

        `batching` (Batcher options, e.g. {"max_batch_size": 64}) enables batching.
        """
        model = cls(
            session, {signature_name: Signature(inputs, outputs)}, default_signature=signature_name
        )
        if batching is not None:
            model.enable_batching(signature_name, **batching)
        return model

    def enable_batching(self, signature_name: str | None = None, **options) -> Batcher:
        """Merge concurrent predicts of a signature (all signatures if None).

        Options are Batcher's: max_batch_size, batch_timeout_micros,
        max_enqueued_batches, max_concurrent_batches, allowed_batch_sizes,
        batch_size_fn.  Returns the (last) Batcher made.
        """
        names = [signature_name] if signature_name else list(self.signatures)
        batcher = None
        for name in names:
            sig = self._signature(name)
            batcher = Batcher(self._batch_fn(sig), **options)
            self._batchers[name] = batcher
        return batcher

    def _batch_fn(self, sig: Signature):
        return sig.step(self.session)

    def _signature(self, name: str) -> Signature:
        sig = self.signatures.get(name)
        if sig is None:
            raise errors.InvalidArgumentError(
                None, None, f'Serving signature key "{name}" not found.'
            )
        return sig

    async def predict(
        self, inputs: Mapping, signature_name: str | None = None, deadline_s: float | None = None
    ) -> dict:
        """Run the signature on `inputs` (input name -> array); output name -> array.

        Raises:
          InvalidArgumentError: unknown signature, missing/unknown inputs, bad values.
          DeadlineExceededError: `deadline_s` seconds passed.
          UnavailableError: the batching queue is full (fail fast).
          The OpError of the failing op.
        """
        # Counted before the first await: see asyncflow.serving.registry's invariant.
        # (One coroutine from here to Session.arun: each layer costs on every request.)
        self._inflight += 1
        try:
            name = signature_name or self.default_signature
            sig = self._signature(name)
            feed = sig.feed_dict(inputs)
            batcher = self._batchers.get(name)
            if batcher is not None:
                return await batcher.submit(feed, deadline_s=deadline_s)
            step = sig.step(self.session)
            if deadline_s is None:
                return await step(feed)
            # `_within`, inlined (a coroutine less per request): the step's first send
            # from here, the deadline's timer only if it suspends.
            when = asyncio.get_running_loop().time() + deadline_s
            step = step(feed)
            try:
                first = step.send(None)
            except StopIteration as done:
                return done.value
            return await _rest_within(step, first, when)
        finally:
            self._inflight -= 1
            if not self._inflight and self._idle is not None:
                self._idle.set()

    async def predict_signatures(
        self, signature_names, inputs: Mapping, deadline_s: float | None = None
    ) -> list[dict]:
        """Run several signatures that take the same inputs as one step (TF Serving's
        MultiInference); per name, in order, its output name -> array.  Not batched.

        Raises:
          InvalidArgumentError: an unknown signature, signatures whose inputs are not the
            same tensors, missing/unknown inputs, bad values.
          DeadlineExceededError: `deadline_s` seconds passed.
          The OpError of the failing op.
        """
        self._inflight += 1
        try:
            signatures = [self._signature(name) for name in signature_names]
            key = tuple(signature_names)
            joint = self._joint.get(key)
            if joint is None:
                joint = _joint_signature(signatures)
                if len(self._joint) >= 64:
                    self._joint.clear()
                self._joint[key] = joint
            feed = joint.feed_dict(inputs)
            step = joint.step(self.session)
            if deadline_s is None:
                outputs = await step(feed)
            else:
                outputs = await _within(step(feed), deadline_s)
            return [
                {alias: outputs[t.name] for alias, t in sig.outputs.items()} for sig in signatures
            ]
        finally:
            self._inflight -= 1
            if not self._inflight and self._idle is not None:
                self._idle.set()

    async def awarmup(self) -> None:
        """Run each signature once on a one-row batch of zeros (empty strings), so the
        first real request finds its plan compiled.  A signature those values do not
        suit (its step fails) is left cold: warm-up never fails a load."""
        for sig in self.signatures.values():
            feed = {}
            for tensor in sig.inputs.values():
                dims = tensor.shape.as_list() if tensor.shape.ndims is not None else None
                if dims is None:
                    break
                shape = [1 if d is None else d for d in dims]
                if tensor.dtype.name == "string":
                    feed[tensor] = np.full(shape, b"", dtype=object)
                else:
                    feed[tensor] = np.zeros(shape, tensor.dtype.as_numpy_dtype)
            else:
                try:
                    await self.session.arun(sig.outputs, feed)
                except errors.OpError:
                    pass

    @property
    def in_flight(self) -> int:
        """Predicts started and not yet finished."""
        return self._inflight

    async def adrain(self) -> None:
        """Wait until no predict is in flight (new ones may still start meanwhile)."""
        while self._inflight:
            self._idle = asyncio.Event()
            await self._idle.wait()

    def metrics(self, signature_name: str | None = None) -> dict | None:
        """The batcher's metrics snapshot for a signature (None without batching)."""
        batcher = self._batchers.get(signature_name or self.default_signature)
        return batcher.metrics.snapshot() if batcher is not None else None

    def batcher(self, signature_name: str | None = None) -> Batcher | None:
        return self._batchers.get(signature_name or self.default_signature)

    async def aclose(self) -> None:
        for b in self._batchers.values():
            await b.aclose()
        self.session.close()

    def close(self) -> None:
        self.session.close()


def _joint_signature(signatures: list[Signature]) -> Signature:
    """One signature fetching every output of `signatures` (keyed by tensor name), fed
    as they all are; InvalidArgumentError when their inputs differ."""
    inputs = signatures[0].inputs
    for sig in signatures[1:]:
        if {k: t.name for k, t in sig.inputs.items()} != {k: t.name for k, t in inputs.items()}:
            raise errors.InvalidArgumentError(
                None, None, "Input tensor must be the same for all Signatures."
            )
    outputs = {t.name: t for sig in signatures for t in sig.outputs.values()}
    return Signature(inputs, outputs)


def _tensor_info_name(info) -> str:
    if isinstance(info, str):
        return info
    if isinstance(info, Mapping):
        return info["name"]
    return info.name


def _signatures_from_meta_graph(graph, meta_graph) -> dict[str, Signature]:
    defs = getattr(meta_graph, "signature_def", None)
    if defs is None and isinstance(meta_graph, Mapping):
        defs = meta_graph.get("signature_def")
    signatures = {}
    for name, sd in (defs or {}).items():
        if name.startswith("__saved_model_"):  # the init/train op, not a servable signature
            continue
        ins = sd["inputs"] if isinstance(sd, Mapping) else sd.inputs
        outs = sd["outputs"] if isinstance(sd, Mapping) else sd.outputs
        method = sd.get("method_name", "") if isinstance(sd, Mapping) else sd.method_name
        signatures[name] = Signature(
            {k: graph.get_tensor_by_name(_tensor_info_name(v)) for k, v in ins.items()},
            {k: graph.get_tensor_by_name(_tensor_info_name(v)) for k, v in outs.items()},
            method,
        )
    return signatures


def _load_into(sess, tags, export_dir):
    from asyncflow.saved_model import loader

    with sess.graph.as_default():
        return loader.load(sess, list(tags), export_dir)


def _finish(sess, meta_graph, signature_name, batching):
    signatures = _signatures_from_meta_graph(sess.graph, meta_graph)
    if signature_name not in signatures:
        sess.close()
        raise errors.InvalidArgumentError(
            None, None, f'Serving signature key "{signature_name}" not found.'
        )
    model = ServableModel(sess, signatures, meta_graph, default_signature=signature_name)
    if batching is not None:
        model.enable_batching(None, **batching)
    return model


def load(
    export_dir: str,
    tags=("serve",),
    signature_name: str = DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    config=None,
    batching: Mapping | None = None,
) -> ServableModel:
    """Load a SavedModel for serving (blocking; the session runs on the runtime loop).

    In async code prefer `await aload(...)`: predicts then run on the caller's loop.

    Raises: what `saved_model.loader.load` raises (NotFoundError / RuntimeError for a
    missing export or tags); InvalidArgumentError when `signature_name` is absent.
    """
    sess = Session(graph=ops.Graph(), config=config)
    try:
        meta_graph = _load_into(sess, tags, export_dir)
    except BaseException:
        sess.close()
        raise
    return _finish(sess, meta_graph, signature_name, batching)


async def aload(
    export_dir: str,
    tags=("serve",),
    signature_name: str = DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    config=None,
    batching: Mapping | None = None,
) -> ServableModel:
    """`load`, with the session bound to the running loop; file reading off the loop."""
    sess = Session(graph=ops.Graph(), config=config)
    try:
        await sess.arun([])  # binds the session to this loop
        # The loader's blocking calls run on a worker thread; its Session.run steps are
        # handed to this loop, which is free while we await.
        meta_graph = await asyncio.to_thread(_load_into, sess, tags, export_dir)
    except BaseException:
        sess.close()
        raise
    return _finish(sess, meta_graph, signature_name, batching)
