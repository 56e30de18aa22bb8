"""TF1's session handles: a tensor kept in the session between runs (`tf.get_session_handle`,
`tf.get_session_tensor`, `tf.delete_session_tensor`; ops GetSessionHandle(V2),
GetSessionTensor, DeleteSessionTensor).

Fetching a GetSessionHandle gives a `TensorHandle`: the handle string TF makes
("<node>;<id>;<device>", ids counted per session) that also reads its tensor back
(`eval()`) and deletes it (`delete()`, or when the last reference goes, as TF's
garbage-collected handles).  Feeding the handle (the object or its string) to the
placeholder of `get_session_tensor` gives the tensor in a later run.

Invariants:
- The store belongs to one session: a handle is unknown to every other session, and
  to its own once deleted (InvalidArgumentError, TF's messages).
- A stored tensor is a private read-only copy: later updates of what it was made from
  (a variable's buffer) do not change it, and every read hands out the same read-only
  array, which consumers copy before writing.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.array_ops import placeholder
from asyncflow.registry import ANY, NotDifferentiable, register_op

__all__ = ["TensorHandle", "get_session_handle", "get_session_tensor", "delete_session_tensor"]


class _Store:
    """One session's persistent tensors: handle string -> (read-only array, dtype)."""

    def __init__(self):
        self.tensors: dict[str, np.ndarray] = {}
        self.dead: list[str] = []  # handles whose TensorHandle went away
        self._ids = 0
        self._lock = threading.Lock()  # (handles may be made by steps on several threads)

    def new_id(self) -> int:
        with self._lock:
            n = self._ids
            self._ids += 1
            return n


_DEAD_HANDLES_THRESHOLD = 10  # (TF's)
_STORES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def _store(session) -> _Store:
    with _STORES_LOCK:
        store = _STORES.get(session)
        if store is None:
            store = _STORES[session] = _Store()
        return store


def _as_str(h) -> str:
    if isinstance(h, TensorHandle):
        return h.handle
    return h.decode("utf-8", "replace") if isinstance(h, bytes) else str(h)


class TensorHandle(bytes):
    """A handle to a tensor kept in a session (TF's `session_ops.TensorHandle`): what
    `sess.run` gives for a `get_session_handle` tensor.  It is the handle's bytes, so it
    feeds a string placeholder as the handle itself."""

    def __new__(cls, handle: str, dtype, session, store: _Store):
        self = super().__new__(cls, handle.encode("utf-8"))
        self._handle = handle
        self._dtype = dtypes.as_dtype(dtype)
        self._session = session
        self._store = weakref.ref(store)
        self._auto_gc_enabled = True
        return self

    def __str__(self) -> str:
        return self._handle

    def __repr__(self) -> str:
        return f"<TensorHandle {self._handle!r}>"

    @property
    def handle(self) -> str:
        """The handle string ("<node>;<id>;<device>")."""
        return self._handle

    def to_numpy_array(self) -> np.ndarray:
        """The handle as a string array (what a feed of this handle holds)."""
        return np.asarray(self._handle.encode("utf-8"), dtype=object)

    def get_raw_handle(self) -> str:
        return self._handle

    def eval(self):
        """The tensor this handle holds (a run of the session's reader for its dtype).

        Raises:
          TypeError: the handle was deleted with `delete()`.
          InvalidArgumentError: the session no longer holds the tensor.
        """
        if not self._auto_gc_enabled:
            raise TypeError(f"Persistent tensor {self._handle} may have already been deleted.")
        holder, reader = _handle_op(self._session.graph, "reader", self._handle, self._dtype)
        return self._session.run(reader, feed_dict={holder: self._handle})

    def delete(self) -> None:
        """Delete the tensor from the session (a run of the session's deleter).

        Raises:
          InvalidArgumentError: the session does not hold it (deleted already).
        """
        self._auto_gc_enabled = False
        holder, deleter = _handle_op(self._session.graph, "deleter", self._handle, None)
        self._session.run(deleter, feed_dict={holder: self._handle})

    def __del__(self):
        # TF deletes the tensors of garbage-collected handles ten at a time
        if getattr(self, "_auto_gc_enabled", False):
            store = self._store()
            if store is not None:
                store.dead.append(self._handle)
                if len(store.dead) >= _DEAD_HANDLES_THRESHOLD:
                    dead, store.dead = store.dead, []
                    for h in dead:
                        store.tensors.pop(h, None)

    # (bytes' own pickling would lose the session: handles do not leave the process)
    def __reduce__(self):
        raise TypeError("a TensorHandle cannot be pickled")

    @staticmethod
    def _get_device_name(handle) -> str:
        return _as_str(handle).split(";")[-1]


# Per graph: the reader / deleter ops TensorHandle.eval / delete run, made as TF's
# _get_handle_reader / _get_handle_deleter make them: one reader per producing node and
# device (so the reader's names are TF's), one deleter.
_HANDLE_OPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _handle_op(graph, kind: str, handle: str, dtype):
    parts = handle.split(";")
    device = parts[-1]
    key = ("reader", parts[0], device) if kind == "reader" else ("deleter", 0)
    made = _HANDLE_OPS.setdefault(graph, {})
    if key not in made:
        with graph.as_default(), ops.device(device):
            holder = _string_placeholder()
            if kind == "reader":
                out = ops.apply_op("GetSessionTensor", [holder], {"dtype": dtype}).outputs[0]
            else:
                out = ops.apply_op("DeleteSessionTensor", [holder])
        made[key] = (holder, out)
    return made[key]


def _string_placeholder():
    return placeholder(dtypes.string)


def _scalar_string(op):
    return [tensor_shape.TensorShape([])]


def _make_handle(ctx, value) -> np.ndarray:
    store = _store(ctx.session)
    handle = f"{ctx.op.name};{store.new_id()};{ctx.device.name}"
    kept = np.array(value, copy=True)
    kept.flags.writeable = False
    store.tensors[handle] = kept
    out = np.empty((), dtype=object)
    out[()] = TensorHandle(handle, ctx.op.inputs[0].dtype.base_dtype, ctx.session, store)
    return out


GetSessionHandle = register_op(
    "GetSessionHandle",
    inputs=["value: T"],
    outputs=["handle: string"],
    attrs={"T": ANY},
    shape_fn=_scalar_string,
    stateful=True,  # (each run keeps a new tensor: never folded nor merged)
)
NotDifferentiable("GetSessionHandle")


@GetSessionHandle.kernel("CPU")
async def _get_session_handle(ctx, value):
    return _make_handle(ctx, value)


GetSessionHandleV2 = register_op(
    "GetSessionHandleV2",
    inputs=["value: T"],
    outputs=["handle: resource"],
    attrs={"T": ANY},
    shape_fn=_scalar_string,
    stateful=True,
)
NotDifferentiable("GetSessionHandleV2")


@GetSessionHandleV2.kernel("CPU")
async def _get_session_handle_v2(ctx, value):
    return _make_handle(ctx, value)


GetSessionTensor = register_op(
    "GetSessionTensor",
    inputs=["handle: string"],
    outputs=["value: dtype"],
    attrs={"dtype": ANY},
    shape_fn=lambda op: [tensor_shape.unknown_shape()],
    stateful=True,
)
NotDifferentiable("GetSessionTensor")


def _handle_str(handle) -> str:
    arr = np.asarray(handle, dtype=object)
    if arr.ndim != 0:
        raise errors.InvalidArgumentError(
            None, None, f"handle must be a scalar, but got shape {list(arr.shape)}"
        )
    return _as_str(arr[()])


@GetSessionTensor.kernel("CPU")
async def _get_session_tensor(ctx, handle):
    name = _handle_str(handle)
    value = _store(ctx.session).tensors.get(name)
    if value is None:
        raise errors.InvalidArgumentError(
            None, None, f"The tensor with handle '{name}' is not in the session store."
        )
    want = dtypes.as_dtype(ctx.attrs["dtype"])
    if value.dtype != np.dtype(want.as_numpy_dtype):
        have = dtypes.as_dtype(value.dtype).name
        raise errors.InternalError(
            None,
            None,
            f"Output 0 of type {have} does not match declared output type "
            f"{_TF_TYPE_NAMES.get(want.name, want.name)} for node {{{{node {ctx.op.name}}}}}",
        )
    return value


_TF_TYPE_NAMES = {"float32": "float", "float64": "double"}

DeleteSessionTensor = register_op(
    "DeleteSessionTensor",
    inputs=["handle: string"],
    outputs=[],
    attrs={},
    shape_fn=lambda op: [],
    stateful=True,
)
NotDifferentiable("DeleteSessionTensor")


@DeleteSessionTensor.kernel("CPU")
async def _delete_session_tensor(ctx, handle):
    name = _handle_str(handle)
    if _store(ctx.session).tensors.pop(name, None) is None:
        raise errors.InvalidArgumentError(
            None, None, f"Failed to delete a tensor with handle '{name}' in the session store."
        )


# -- builders ----------------------------------------------------------------------------


def get_session_handle(data, name=None):
    """`tf.get_session_handle`: a string tensor whose run keeps `data`'s value in the
    session; `sess.run` of it gives a `TensorHandle`.

    Raises:
      TypeError: `data` is not a Tensor.
    """
    if not isinstance(data, ops.Tensor):
        raise TypeError("`data` must be of type Tensor.")
    with ops.colocate_with(data):
        return ops.apply_op("GetSessionHandle", [data], name=name).outputs[0]


def get_session_tensor(handle, dtype, name=None):
    """`tf.get_session_tensor`: (placeholder, tensor): feed the placeholder a handle
    (its string, or the TensorHandle) and the tensor is the value kept under it.

    Raises (at run time):
      InvalidArgumentError: the session holds no tensor under the fed handle.
    """
    with ops.device(TensorHandle._get_device_name(handle)):
        holder = _string_placeholder()
        tensor = ops.apply_op(
            "GetSessionTensor", [holder], {"dtype": dtypes.as_dtype(dtype)}, name=name
        ).outputs[0]
    return holder, tensor


def delete_session_tensor(handle, name=None):
    """`tf.delete_session_tensor`: (placeholder, op): running the op with a handle fed
    deletes its tensor from the session.

    Raises (at run time):
      InvalidArgumentError: the session holds no tensor under the fed handle.
    """
    with ops.device(TensorHandle._get_device_name(handle)):
        holder = _string_placeholder()
        deleter = ops.apply_op("DeleteSessionTensor", [holder], name=name)
    return holder, deleter
