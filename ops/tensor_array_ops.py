"""TensorArray: a per-step array of tensors written and read inside loops (TF1's
TensorArrayV3 family and `tf.TensorArray`), with gradients.

Ops take a handle (a 0-d tensor holding the `_TensorArray`, see data_flow_stack_ops)
and a float32 scalar `flow`: every write returns a new flow, and reads take the latest
one, so dataflow orders the accesses (TF's design).  `TensorArray` objects are
immutable Python views (handle, flow); `write` returns a new view.

Gradients go to a gradient TensorArray per (forward array, gradient source); writes to
a gradient array add up (an element read twice gets both gradients), and reading an
unwritten gradient element gives zeros.

The kernels are generic: elements live on the array's device (`xp`, the array module
of the device that created it); handles, flows, indices, sizes and lengths stay in host
memory (TF's HostMemory).
"""

from __future__ import annotations

import itertools

import numpy as np

from asyncflow import dtypes, errors, tensor_shape
from asyncflow import graph as ops
from asyncflow.ops.data_flow_stack_ops import handle_object, handle_value
from asyncflow.registry import ANY, NotDifferentiable, TypeConstraint, register_op

__all__ = ["TensorArray"]


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


# TF's TensorArrayV3 names each array "<tensor_array_name or op name>_<process-wide count>",
# the name its errors start with ("TensorArray foo_3: Could not write to ...").
_COUNTER = itertools.count()


def _shape_str(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


class _TensorArray:
    """The run-time array.  Invariant: `values[i] is None` means not written (or
    cleared after a read, which `cleared` records)."""

    def __init__(
        self,
        name,
        dtype,
        size,
        element_shape,
        dynamic_size,
        clear_after_read,
        identical_element_shapes,
        is_grad=False,
        xp=np,
    ):
        self.xp = xp  # the array module of the device holding the elements
        self.name = name
        self.dtype = dtype
        self.values: list = [None] * size
        self.cleared: set = set()
        self.element_shape = element_shape  # TensorShape, possibly partial
        self.dynamic_size = dynamic_size
        self.clear_after_read = clear_after_read
        self.identical = identical_element_shapes
        self._known = None  # (write's fast check: element_shape as a tuple, when known)
        self.is_grad = is_grad
        self.closed = False
        self.grads: dict = {}
        # TF's marked size: the element count of the last split (a gradient array takes its
        # forward array's), and the count a gradient array's concat reads.
        self.marked_size = -1

    def check_open(self):
        if self.closed:
            raise _invalid(f"TensorArray {self.name} has already been closed.")

    def write(self, index: int, value) -> None:
        self.check_open()
        size = len(self.values)
        if index < 0:
            raise _invalid(f"Tried to write to index {index} but array size is: {size}")
        if index >= size:
            if not self.dynamic_size:
                raise _invalid(
                    f"Tried to write to index {index} but array is not resizeable and size "
                    f"is: {size}"
                )
            self.values.extend([None] * (index + 1 - size))
        value = self.xp.asarray(value)
        # (`_known`: the element shape as a tuple once fully defined; an equal shape
        # passes the check below without building a TensorShape, as every write of a
        # loop's array does.  A step of dynamic_rnn writes 84 elements.)
        if self.identical and self._known != value.shape:
            if not self.element_shape.is_compatible_with(value.shape):
                es = self.element_shape
                es = _shape_str(es.as_list()) if es.dims is not None else "<unknown>"
                raise _invalid(
                    f"TensorArray {self.name}: "
                    f"Could not write to TensorArray index {index} because the value shape "
                    f"is {_shape_str(value.shape)} which is incompatible with the "
                    f"TensorArray's inferred element shape: "
                    f"{es}"
                    " (consider setting infer_shape=False)."
                )
            if self.element_shape.dims is None or not self.element_shape.is_fully_defined():
                self.element_shape = tensor_shape.TensorShape(value.shape)
            self._known = tuple(self.element_shape.as_list())
        old = self.values[index]
        if old is not None:
            if not self.is_grad:
                raise _invalid(
                    f"TensorArray {self.name}: Could not write to TensorArray index {index} "
                    "because it has already been written to."
                )
            if old.shape != value.shape:  # TF aggregates equal shapes only, no broadcast
                raise _invalid(
                    f"TensorArray {self.name}: Could not aggregate to TensorArray index "
                    f"{index} because the existing shape is {_shape_str(old.shape)} but the "
                    f"new input shape is {_shape_str(value.shape)}"
                )
            value = old + value
        self.values[index] = value

    def read(self, index: int):
        self.check_open()
        size = len(self.values)
        if index < 0 or index >= size:
            raise _invalid(f"Tried to read from index {index} but array size is: {size}")
        value = self.values[index]
        if value is None:
            if index in self.cleared:
                raise _invalid(
                    f"Could not read index {index} twice because it was cleared after a "
                    "previous read (perhaps try setting clear_after_read = false?)."
                )
            if self.element_shape.is_fully_defined():
                return self.xp.zeros(self.element_shape.as_list(), self.dtype.as_numpy_dtype)
            raise _invalid(
                f"Could not read from TensorArray index {index}.  Furthermore, the element "
                f"shape is not fully defined: {self.element_shape}.  It is possible you are "
                "working with a resizeable TensorArray and stop_gradients is not allowing the "
                "gradients to be written.  If you set the full element_shape property on the "
                "forward TensorArray, the proper all-zeros tensor will be returned instead of "
                "incurring this error."
            )
        if self.clear_after_read and not self.is_grad:
            self.values[index] = None
            self.cleared.add(index)
        return value


def _ta(handle) -> _TensorArray:
    return handle_object(handle, _TensorArray, "TensorArray")


def _scalar(op):
    return [tensor_shape.TensorShape([])]


def _attr_shape(op, name):
    s = op._attr(name)
    return tensor_shape.as_shape(s) if s is not None else tensor_shape.unknown_shape()


TensorArrayV3 = register_op(
    "TensorArrayV3",
    inputs=["size: int32"],
    outputs=["handle: string", "flow: float32"],
    attrs={
        "dtype": TypeConstraint(None),
        "element_shape": None,
        "dynamic_size": False,
        "clear_after_read": True,
        "identical_element_shapes": False,
        "tensor_array_name": "",
    },
    shape_fn=lambda op: [tensor_shape.TensorShape([]), tensor_shape.TensorShape([])],
    stateful=True,
)
TensorArrayGradV3 = register_op(
    "TensorArrayGradV3",
    inputs=["handle: string", "flow_in: float32"],
    outputs=["grad_handle: string", "flow_out: float32"],
    attrs={"source": ""},
    shape_fn=lambda op: [tensor_shape.TensorShape([]), tensor_shape.TensorShape([])],
    stateful=True,
)
TensorArrayGradWithShape = register_op(
    "TensorArrayGradWithShape",
    inputs=["handle: string", "flow_in: float32", "shape_to_prepend: int32"],
    outputs=["grad_handle: string", "flow_out: float32"],
    attrs={"source": ""},
    shape_fn=lambda op: [tensor_shape.TensorShape([]), tensor_shape.TensorShape([])],
    stateful=True,
)
TensorArrayWriteV3 = register_op(
    "TensorArrayWriteV3",
    inputs=["handle: string", "index: int32", "value: T", "flow_in: float32"],
    outputs=["flow_out: float32"],
    attrs={"T": ANY},
    shape_fn=_scalar,
    stateful=True,
)
TensorArrayReadV3 = register_op(
    "TensorArrayReadV3",
    inputs=["handle: string", "index: int32", "flow_in: float32"],
    outputs=["value: dtype"],
    attrs={"dtype": TypeConstraint(None)},
    shape_fn=lambda op: [None],
    stateful=True,
)
TensorArrayGatherV3 = register_op(
    "TensorArrayGatherV3",
    inputs=["handle: string", "indices: int32", "flow_in: float32"],
    outputs=["value: dtype"],
    attrs={"dtype": TypeConstraint(None), "element_shape": None},
    shape_fn=lambda op: [
        tensor_shape.TensorShape(
            [op.inputs[1].shape[0].value if op.inputs[1].shape.ndims else None]
        ).concatenate(_attr_shape(op, "element_shape"))
    ],
    stateful=True,
)
TensorArrayScatterV3 = register_op(
    "TensorArrayScatterV3",
    inputs=["handle: string", "indices: int32", "value: T", "flow_in: float32"],
    outputs=["flow_out: float32"],
    attrs={"T": ANY},
    shape_fn=_scalar,
    stateful=True,
)
TensorArrayConcatV3 = register_op(
    "TensorArrayConcatV3",
    inputs=["handle: string", "flow_in: float32"],
    outputs=["value: dtype", "lengths: int64"],
    attrs={"dtype": TypeConstraint(None), "element_shape_except0": None},
    shape_fn=lambda op: [
        tensor_shape.TensorShape([None]).concatenate(_attr_shape(op, "element_shape_except0")),
        tensor_shape.TensorShape([None]),
    ],
    stateful=True,
)
TensorArraySplitV3 = register_op(
    "TensorArraySplitV3",
    inputs=["handle: string", "value: T", "lengths: int64", "flow_in: float32"],
    outputs=["flow_out: float32"],
    attrs={"T": ANY},
    shape_fn=_scalar,
    stateful=True,
)
TensorArraySizeV3 = register_op(
    "TensorArraySizeV3",
    inputs=["handle: string", "flow_in: float32"],
    outputs=["size: int32"],
    shape_fn=_scalar,
    stateful=True,
)
TensorArrayCloseV3 = register_op(
    "TensorArrayCloseV3", inputs=["handle: string"], shape_fn=lambda op: [], stateful=True
)

_FLOW = np.float32(0.0)


@TensorArrayV3.kernel(host_memory=("size", "handle", "flow"))
async def _tensor_array_v3(ctx, size):
    a = ctx.attrs
    size = int(size)
    if size < 0:
        raise _invalid(f"Size should be >= 0, got: {size}")
    ctx.device.check_alloc(size, dtypes.int64)
    es = a["element_shape"]
    es = tensor_shape.as_shape(es) if es is not None else tensor_shape.unknown_shape()
    ta = _TensorArray(
        f"{a['tensor_array_name'] or ctx.op.name}_{next(_COUNTER)}",
        a["dtype"],
        size,
        es,
        a["dynamic_size"],
        a["clear_after_read"],
        a["identical_element_shapes"],
        xp=ctx.xp,
    )
    return handle_value(ta), _FLOW


@TensorArrayGradV3.kernel(host_memory=("handle", "flow_in", "grad_handle", "flow_out"))
async def _tensor_array_grad_v3(ctx, handle, flow):
    return _grad_array(_ta(handle), ctx.attrs["source"], None), _FLOW


@TensorArrayGradWithShape.kernel(
    host_memory=("handle", "flow_in", "shape_to_prepend", "grad_handle", "flow_out")
)
async def _tensor_array_grad_with_shape(ctx, handle, flow, shape_to_prepend):
    """A gradient array whose elements are `shape_to_prepend + element_shape` (TF's: one
    per source, so a later call with another prefix gets the first call's array)."""
    prefix = [int(d) for d in np.asarray(shape_to_prepend).reshape(-1)]
    return _grad_array(_ta(handle), ctx.attrs["source"], prefix), _FLOW


def _grad_array(ta, source: str, prefix):
    ta.check_open()
    g = ta.grads.get(source)
    if g is None:
        shape = ta.element_shape
        if prefix is not None:
            shape = tensor_shape.TensorShape(prefix).concatenate(shape)
        g = ta.grads[source] = _TensorArray(
            f"{ta.name}@{source}",
            ta.dtype,
            len(ta.values),
            shape,
            True,
            False,
            ta.identical,
            is_grad=True,
            xp=ta.xp,
        )
        g.marked_size = ta.marked_size
    return handle_value(g)


@TensorArrayWriteV3.kernel(host_memory=("handle", "index", "flow_in", "flow_out"))
async def _tensor_array_write_v3(ctx, handle, index, value, flow):
    _ta(handle).write(int(index), value)
    return _FLOW


def _type_string(dtype) -> str:
    """TF's DataTypeString: float32 is "float", float64 "double", float16 "half"."""
    return {"float32": "float", "float64": "double", "float16": "half"}.get(dtype.name, dtype.name)


@TensorArrayReadV3.kernel(host_memory=("handle", "index", "flow_in"))
async def _tensor_array_read_v3(ctx, handle, index, flow):
    ta = _ta(handle)
    if ctx.attrs["dtype"] != ta.dtype:
        raise _invalid(
            f"TensorArray dtype is {_type_string(ta.dtype)} but Op requested dtype "
            f"{_type_string(ctx.attrs['dtype'])}."
        )
    return ta.read(int(index))


def _zero_shape(ta, values):
    for v in values:
        if v is not None:
            return v.shape
    if ta.element_shape.is_fully_defined():
        return tuple(ta.element_shape.as_list())
    return None



def _np_type(dtype):
    """The arrays' NumPy type: object for variants (ragged rows in tf.map_fn)."""
    return object if dtype == dtypes.variant else dtype.as_numpy_dtype

@TensorArrayGatherV3.kernel(host_memory=("handle", "indices", "flow_in"))
async def _tensor_array_gather_v3(ctx, handle, indices, flow):
    ta = _ta(handle)
    xp = ta.xp
    indices = np.asarray(indices).reshape(-1)
    if len(indices) == 0:
        es = ctx.attrs["element_shape"]
        es = tensor_shape.as_shape(es) if es is not None else ta.element_shape
        if not es.is_fully_defined():
            raise errors.UnimplementedError(
                None,
                None,
                "TensorArray has size zero, but element shape "
                f"{es} is not fully defined. Currently only static shapes are supported "
                "when packing zero-size TensorArrays.",
            )
        return xp.zeros([0] + es.as_list(), ta.dtype.as_numpy_dtype)
    if ta.is_grad:  # unwritten gradient elements are zeros
        shape = _zero_shape(ta, ta.values)
        values = []
        for i in indices:
            i = int(i)
            if 0 <= i < len(ta.values) and ta.values[i] is None and shape is not None:
                values.append(xp.zeros(shape, ta.dtype.as_numpy_dtype))
            else:
                values.append(ta.read(i))
    else:
        values = [ta.read(int(i)) for i in indices]
    first = values[0].shape
    for i, v in zip(indices, values):
        if v.shape != first:
            raise _invalid(
                f"TensorArray has inconsistent shapes.  Index 0 has shape: {_shape_str(first)} "
                f"but index {i} has shape: {_shape_str(v.shape)}"
            )
    return xp.stack(values).astype(_np_type(ta.dtype), copy=False)


@TensorArrayScatterV3.kernel(host_memory=("handle", "indices", "flow_in", "flow_out"))
async def _tensor_array_scatter_v3(ctx, handle, indices, value, flow):
    ta = _ta(handle)
    indices = np.asarray(indices).reshape(-1)
    value = ta.xp.asarray(value)
    if value.ndim == 0 or value.shape[0] != len(indices):
        raise _invalid(
            f"Expected len(indices) == values.shape[0], but saw: {len(indices)} vs. "
            f"{value.shape[0] if value.ndim else 0}"
        )
    for k, i in enumerate(indices.tolist()):
        ta.write(i, value[k])  # index, never iterate, a device array
    return _FLOW


@TensorArrayConcatV3.kernel(host_memory=("handle", "flow_in", "lengths"))
async def _tensor_array_concat_v3(ctx, handle, flow):
    ta = _ta(handle)
    xp = ta.xp
    n = len(ta.values)
    if ta.is_grad and ta.marked_size >= 0:
        n = min(n, ta.marked_size)  # TF's PackOrConcatSize: the forward split's count
    values = [ta.read(i) for i in range(n)]
    if not values:
        es = ctx.attrs["element_shape_except0"]
        es = tensor_shape.as_shape(es) if es is not None else tensor_shape.unknown_shape()
        if not es.is_fully_defined():
            raise errors.UnimplementedError(
                None,
                None,
                "TensorArray has size zero, but element_shape_except0 "
                f"{es} is not fully defined. Currently only static shapes are supported when "
                "concatenating zero-size TensorArrays.",
            )
        return xp.zeros([0] + es.as_list(), ta.dtype.as_numpy_dtype), np.zeros([0], np.int64)
    for i, v in enumerate(values):
        if v.ndim == 0:
            raise _invalid(
                f"Concat saw a scalar shape at index {i} but requires at least vectors."
            )
        if v.shape[1:] != values[0].shape[1:]:
            raise _invalid(
                "TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) "
                f"shape: {_shape_str(values[0].shape[1:])} but index {i} has (excepting "
                f"dimension 0) shape: {_shape_str(v.shape[1:])}"
            )
    lengths = np.array([v.shape[0] for v in values], np.int64)
    return xp.concatenate(values).astype(_np_type(ta.dtype), copy=False), lengths


@TensorArraySplitV3.kernel(host_memory=("handle", "lengths", "flow_in", "flow_out"))
async def _tensor_array_split_v3(ctx, handle, value, lengths, flow):
    ta = _ta(handle)
    value = ta.xp.asarray(value)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1:
        raise _invalid(
            f"Expected lengths to be a vector, received shape: {_shape_str(lengths.shape)}"
        )
    if value.ndim == 0:
        raise _invalid("Expected value to be at least a vector, but received shape: []")
    if int(lengths.sum()) != value.shape[0] or (lengths < 0).any():
        raise _invalid(
            f"Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
            f"{int(lengths.sum())} and value's shape is: {_shape_str(value.shape)}"
        )
    if not ta.dynamic_size and len(lengths) != len(ta.values):
        raise _invalid(
            f"TensorArray's size is not equal to the size of lengths ({len(ta.values)} vs. "
            f"{len(lengths)}), and the TensorArray is not marked as dynamically resizeable"
        )
    start = 0
    for i, n in enumerate(lengths):
        ta.write(i, value[start : start + int(n)])
        start += int(n)
    if not ta.is_grad:
        ta.marked_size = len(lengths)
    return _FLOW


@TensorArraySizeV3.kernel(host_memory=("handle", "flow_in", "size"))
async def _tensor_array_size_v3(ctx, handle, flow):
    return np.int32(len(_ta(handle).values))


@TensorArrayCloseV3.kernel(host_memory=("handle",))
async def _tensor_array_close_v3(ctx, handle):
    ta = _ta(handle)
    ta.closed = True
    ta.values = [None] * len(ta.values)


for _t in ("TensorArrayV3", "TensorArrayGradV3", "TensorArrayGradWithShape", "TensorArraySizeV3",
           "TensorArrayCloseV3"):  # fmt: skip
    NotDifferentiable(_t)


# -- gradients (TF's tensor_array_grad.py) ---------------------------------------------------


def _grad_source(t) -> str:
    """The `gradients...` name scope of a gradient tensor: one gradient array per call
    of `gradients`."""
    tokens = t.name.split("/")
    pos = [i for i, x in enumerate(tokens) if x.startswith("gradients")]
    if not pos:
        raise ValueError(
            f"Expected op/tensor name to start with gradients (excluding scope), got: {t.name}"
        )
    return "/".join(tokens[: pos[-1] + 1])


_GetGradSource = _grad_source  # TF's name (tensor_array_grad._GetGradSource)


def _grad_ta(op, dtype, flow, source):
    ta = TensorArray(
        dtype=dtype, handle=op.inputs[0], flow=flow, colocate_with_first_write_call=False
    )
    return ta.grad(source=source, flow=flow)


@TensorArrayReadV3.gradient
def _read_grad(op, grad):
    flow = op.inputs[2]
    g = _grad_ta(op, op._attr("dtype"), flow, _grad_source(grad))
    return [None, None, g.write(op.inputs[1], grad).flow]


@TensorArrayWriteV3.gradient
def _write_grad(op, flow):
    from asyncflow.ops import array_ops

    flow_out = array_ops.identity(op.outputs[0], "flow_out")
    with ops.control_dependencies([flow_out]):
        flow = array_ops.identity(flow, "write_barrier")
    g = _grad_ta(op, op._attr("T"), flow, _grad_source(flow))
    return [None, None, g.read(op.inputs[1]), flow]


@TensorArrayGatherV3.gradient
def _gather_grad(op, grad):
    flow = op.inputs[2]
    g = _grad_ta(op, op._attr("dtype"), flow, _grad_source(grad))
    return [None, None, g.scatter(op.inputs[1], grad).flow]


@TensorArrayScatterV3.gradient
def _scatter_grad(op, flow):
    from asyncflow.ops import array_ops

    flow_out = array_ops.identity(op.outputs[0], "flow_out")
    with ops.control_dependencies([flow_out]):
        flow = array_ops.identity(flow, "write_barrier")
    g = _grad_ta(op, op._attr("T"), flow, _grad_source(flow))
    return [None, None, g.gather(op.inputs[1]), flow]


@TensorArrayConcatV3.gradient
def _concat_grad(op, grad, unused_lengths_grad):
    flow = op.inputs[1]
    g = _grad_ta(op, op._attr("dtype"), flow, _grad_source(grad))
    return [None, g.split(grad, lengths=op.outputs[1]).flow]


@TensorArraySplitV3.gradient
def _split_grad(op, flow):
    from asyncflow.ops import array_ops

    flow_out = array_ops.identity(op.outputs[0], "flow_out")
    with ops.control_dependencies([flow_out]):
        flow = array_ops.identity(flow, "write_barrier")
    g = _grad_ta(op, op._attr("T"), flow, _grad_source(flow))
    return [None, g.concat(), None, flow]


# -- the Python class ------------------------------------------------------------------------


def _check_dtypes(value, dtype) -> None:
    if value.dtype != dtype:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"TensorArray dtype is {dtype.name} but Op is trying to write dtype "
            f"{value.dtype.name} ",
        )


def _int32(x, name=None):
    return ops.convert_to_tensor(x, dtype=dtypes.int32, name=name)


class TensorArray:
    """`tf.TensorArray` (TF1 graph mode): a dynamically written array of tensors.

    Raises:
      ValueError: inconsistent constructor arguments, or element shapes that disagree
        at build time.
      errors.InvalidArgumentError: a write of another dtype (at build time, as TF);
        at run time, reads/writes out of range, double writes, reads of cleared or
        unwritten elements.
    """

    def __init__(
        self,
        dtype,
        size=None,
        dynamic_size=None,
        clear_after_read=None,
        tensor_array_name=None,
        handle=None,
        flow=None,
        infer_shape=True,
        element_shape=None,
        colocate_with_first_write_call=True,
        name=None,
    ):
        if handle is not None and tensor_array_name:
            raise ValueError("Cannot construct with both handle and tensor_array_name")
        if handle is not None and not isinstance(handle, ops.Tensor):
            raise TypeError("Handle must be a Tensor")
        if handle is None and size is None:
            raise ValueError("Size must be provided if handle is not provided")
        if handle is not None and size is not None:
            raise ValueError("Cannot provide both a handle and size at the same time")
        if handle is not None and element_shape is not None:
            raise ValueError("Cannot provide both a handle and element_shape at the same time")
        if handle is not None and dynamic_size is not None:
            raise ValueError("Cannot provide both a handle and dynamic_size at the same time")
        if handle is not None and clear_after_read:
            raise ValueError("Cannot provide both a handle and clear_after_read at the same time")
        if clear_after_read is None:
            clear_after_read = True
        self._dynamic_size = bool(dynamic_size)
        self._dtype = dtypes.as_dtype(dtype).base_dtype  # a _ref dtype too, as TF
        self._infer_shape = infer_shape
        self._size = size
        self._colocate_with_first_write_call = colocate_with_first_write_call
        self._element_shape = (
            [tensor_shape.as_shape(element_shape)]
            if element_shape is not None
            else [tensor_shape.unknown_shape()]
        )
        with ops.name_scope(name, "TensorArray", [handle, size, flow]) as scope:
            if handle is not None:
                if flow is None:
                    raise ValueError("flow must not be None if handle is not None.")
                self._handle, self._flow = handle, flow
                return
            es = None if element_shape is None else tensor_shape.as_shape(element_shape)
            attrs = {
                "dtype": self._dtype,
                # a shape attr, as TF's (a list of ints is not one TF reads)
                "element_shape": None if es is None or es.dims is None else es,
                "dynamic_size": self._dynamic_size,
                "clear_after_read": bool(clear_after_read),
                "identical_element_shapes": bool(infer_shape),
                "tensor_array_name": tensor_array_name or "",
            }
            op = ops.apply_op("TensorArrayV3", [_int32(size, name="size")], attrs, name=scope)
            self._handle, self._flow = op.outputs

    # -- properties
    @property
    def flow(self):
        return self._flow

    @property
    def dtype(self):
        return self._dtype

    @property
    def handle(self):
        return self._handle

    @property
    def element_shape(self):
        return self._element_shape[0]

    def _merge_element_shape(self, shape) -> None:
        """Every element must fit the given/inferred element shape (TF checks it with
        infer_shape=False too); with infer_shape the shape is refined by each write."""
        try:
            merged = self._element_shape[0].merge_with(shape)
        except ValueError:
            raise ValueError(
                f"Inconsistent shapes: saw {shape} but expected {self._element_shape[0]} "
            ) from None
        if self._infer_shape:
            self._element_shape[0] = merged

    def mark_used(self) -> None:
        """TF marks a TensorArray used to silence its not-used warning; nothing to do."""

    def _with_flow(self, flow) -> TensorArray:
        return build_ta_with_new_flow(self, flow)

    # -- ops
    def identity(self) -> TensorArray:
        from asyncflow.ops import array_ops

        return self._with_flow(array_ops.identity(self._flow))

    def grad(self, source, flow=None, name=None) -> TensorArray:
        from asyncflow.ops import array_ops

        if flow is None:
            flow = self._flow
        with ops.name_scope(name, "TensorArrayGrad", [self._handle]):
            g_handle, _ = ops.apply_op(
                "TensorArrayGradV3", [self._handle, flow], {"source": source}
            ).outputs
            with ops.control_dependencies([g_handle]):
                flow = array_ops.identity(flow, name="gradient_flow")
            g = TensorArray(
                dtype=self._dtype,
                handle=g_handle,
                flow=flow,
                infer_shape=self._infer_shape,
                colocate_with_first_write_call=False,
            )
            g._element_shape = self._element_shape
            return g

    def read(self, index, name=None) -> ops.Tensor:
        value = ops.apply_op(
            "TensorArrayReadV3",
            [self._handle, _int32(index), self._flow],
            {"dtype": self._dtype},
            name=name or "TensorArrayReadV3",
        ).outputs[0]
        if self._element_shape[0].dims is not None:
            value.set_shape(self._element_shape[0])
        return value

    def write(self, index, value, name=None) -> TensorArray:
        with ops.name_scope(name, "TensorArrayWrite", [self._handle, index, value]):
            value = ops.convert_to_tensor(value, preferred_dtype=self._dtype, name="value")
            _check_dtypes(value, self._dtype)
            self._merge_element_shape(value.shape)
            flow = ops.apply_op(
                "TensorArrayWriteV3", [self._handle, _int32(index), value, self._flow]
            ).outputs[0]
            return self._with_flow(flow)

    def gather(self, indices, name=None) -> ops.Tensor:
        es = self._element_shape[0]
        value = ops.apply_op(
            "TensorArrayGatherV3",
            [self._handle, _int32(indices), self._flow],
            {"dtype": self._dtype, "element_shape": None if es.dims is None else es},
            name=name or "TensorArrayGatherV3",
        ).outputs[0]
        return value

    def stack(self, name=None) -> ops.Tensor:
        from asyncflow.ops import reduction_ops

        with ops.name_scope(name, "TensorArrayStack", [self._handle]):
            value = self.gather(reduction_ops.range(0, self.size()), name=name)
            if self._element_shape[0].dims is not None and not self._dynamic_size:
                n = ops.constant_value(ops.convert_to_tensor(self._size))
                if n is not None:
                    value.set_shape([int(n)] + self._element_shape[0].as_list())
            return value

    def scatter(self, indices, value, name=None) -> TensorArray:
        with ops.name_scope(name, "TensorArrayScatter", [self._handle, value, indices]):
            value = ops.convert_to_tensor(value, preferred_dtype=self._dtype, name="value")
            _check_dtypes(value, self._dtype)
            if value.shape.ndims is not None and value.shape.ndims > 0:
                self._merge_element_shape(value.shape[1:])
            flow = ops.apply_op(
                "TensorArrayScatterV3", [self._handle, _int32(indices), value, self._flow]
            ).outputs[0]
            return self._with_flow(flow)

    def unstack(self, value, name=None) -> TensorArray:
        from asyncflow.ops import array_ops, reduction_ops

        with ops.name_scope(name, "TensorArrayUnstack", [self._handle, value]):
            value = ops.convert_to_tensor(value, preferred_dtype=self._dtype, name="value")
            num = array_ops.shape(value)[0]
            return self.scatter(reduction_ops.range(0, num), value, name=name)

    def concat(self, name=None) -> ops.Tensor:
        es = self._element_shape[0]
        except0 = None if es.dims is None or es.ndims == 0 else es.as_list()[1:]
        value, _ = ops.apply_op(
            "TensorArrayConcatV3",
            [self._handle, self._flow],
            {"dtype": self._dtype, "element_shape_except0": except0},
            name=name or "TensorArrayConcatV3",
        ).outputs
        return value

    def split(self, value, lengths, name=None) -> TensorArray:
        with ops.name_scope(name, "TensorArraySplit", [self._handle, value, lengths]):
            value = ops.convert_to_tensor(value, preferred_dtype=self._dtype, name="value")
            _check_dtypes(value, self._dtype)
            lengths = ops.convert_to_tensor(lengths, preferred_dtype=dtypes.int64)
            if lengths.dtype != dtypes.int64:
                from asyncflow.ops import math_ops

                lengths = math_ops.cast(lengths, dtypes.int64)
            clengths = ops.constant_value(lengths)
            if value.shape.dims is not None and clengths is not None and len(clengths):
                if clengths.max() == clengths.min():
                    self._merge_element_shape(
                        tensor_shape.TensorShape([int(clengths[0])]).concatenate(value.shape[1:])
                    )
            flow = ops.apply_op(
                "TensorArraySplitV3", [self._handle, value, lengths, self._flow]
            ).outputs[0]
            return self._with_flow(flow)

    def size(self, name=None) -> ops.Tensor:
        if not self._dynamic_size and self._size is not None:
            return ops.convert_to_tensor(self._size, dtype=dtypes.int32)
        return ops.apply_op(
            "TensorArraySizeV3", [self._handle, self._flow], name=name or "TensorArraySizeV3"
        ).outputs[0]

    def close(self, name=None) -> ops.Operation:
        return ops.apply_op(
            "TensorArrayCloseV3", [self._handle], name=name or "TensorArrayCloseV3"
        )


def build_ta_with_new_flow(old: TensorArray, flow) -> TensorArray:
    """A view of the same array whose accesses come after `flow`."""
    new = TensorArray.__new__(TensorArray)
    new.__dict__.update(old.__dict__)
    new._flow = flow
    return new
